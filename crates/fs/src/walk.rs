//! A parallel directory walk over file descriptors, for `find_files` and `grep`.
//!
//! `ignore::WalkBuilder` walks by path name, so a directory swapped for a symlink mid-walk would be listed
//! through the link. This walk opens each directory relative to its parent's descriptor with `O_NOFOLLOW`,
//! so it never leaves the tree it started in; symlinks are reported, never followed. `.gitignore` and
//! `.ignore` files are read through the same descriptors and matched with `ignore`'s gitignore matcher.

use std::ffi::{CStr, OsStr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Instant;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fs::{FileType, Mode, OFlags};
use stockade_policy::Access;

use crate::read::for_each_entry;
use crate::root::Root;

/// What a walk visits and how far it goes.
#[derive(Debug, Clone)]
pub(crate) struct WalkOptions {
    /// Levels below the start (1: its entries only); `None`: no limit.
    pub(crate) max_depth: Option<usize>,
    /// Visit names starting with `.` (`.git` itself is never entered).
    pub(crate) hidden: bool,
    /// Honour `.gitignore` and `.ignore` files.
    pub(crate) gitignore: bool,
    /// Stop when this passes.
    pub(crate) deadline: Instant,
    /// Worker threads.
    pub(crate) threads: usize,
}

/// One entry found by a walk.
pub(crate) struct WalkEntry<'a> {
    /// The directory holding it (open entries relative to this, with `O_NOFOLLOW`).
    pub(crate) dir: BorrowedFd<'a>,
    /// Its name in that directory.
    pub(crate) name: &'a CStr,
    /// Its canonical path (no link was followed to reach it).
    pub(crate) real: PathBuf,
    /// What it is (not followed).
    pub(crate) file_type: FileType,
}

/// What a visitor wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Control {
    Continue,
    Quit,
}

/// How a walk ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct WalkEnd {
    /// A visitor asked to stop (a result cap).
    pub(crate) quit: bool,
    /// The deadline passed.
    pub(crate) timed_out: bool,
}

/// Gitignore matchers from the start down to one directory, deepest first when matching.
struct Ignores {
    parent: Option<Arc<Ignores>>,
    matcher: Option<Gitignore>,
}

impl Ignores {
    fn ignored(&self, path: &Path, is_dir: bool) -> bool {
        let mut level = Some(self);
        while let Some(ignores) = level {
            if let Some(matcher) = &ignores.matcher {
                match matcher.matched(path, is_dir) {
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                    Match::None => {}
                }
            }
            level = ignores.parent.as_deref();
        }
        false
    }
}

struct Job {
    fd: OwnedFd,
    real: PathBuf,
    depth: usize,
    ignores: Arc<Ignores>,
}

struct Queue {
    jobs: Vec<Job>,
    active: usize,
}

/// Walks the directory `start` (already opened and judged) with `make_visitor()` per thread; each visitor
/// sees every entry the policy lets it read, after hidden and gitignore filtering.
pub(crate) fn walk<V>(
    root: &Root,
    start: OwnedFd,
    start_real: PathBuf,
    options: &WalkOptions,
    make_visitor: impl Fn() -> V + Sync,
) -> WalkEnd
where
    V: FnMut(&WalkEntry<'_>) -> Control,
{
    let top = Arc::new(Ignores {
        parent: None,
        matcher: None,
    });
    let ignores = if options.gitignore {
        child_ignores(&top, &start, &start_real)
    } else {
        top
    };
    let queue = Mutex::new(Queue {
        jobs: vec![Job {
            fd: start,
            real: start_real,
            depth: 0,
            ignores,
        }],
        active: 0,
    });
    let ready = Condvar::new();
    let stop = AtomicBool::new(false);
    let timed_out = AtomicBool::new(false);
    let quit = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..options.threads.max(1) {
            scope.spawn(|| {
                let mut visit = make_visitor();
                while let Some(job) = next_job(&queue, &ready, &stop) {
                    process(
                        root, options, job, &mut visit, &queue, &ready, &stop, &quit, &timed_out,
                    );
                    let mut state = queue.lock().unwrap_or_else(PoisonError::into_inner);
                    state.active -= 1;
                    if state.active == 0 && state.jobs.is_empty() {
                        ready.notify_all();
                    }
                }
                // Wake the others so they see the end (or the stop).
                ready.notify_all();
            });
        }
    });
    WalkEnd {
        quit: quit.load(Ordering::Relaxed),
        timed_out: timed_out.load(Ordering::Relaxed),
    }
}

fn next_job(queue: &Mutex<Queue>, ready: &Condvar, stop: &AtomicBool) -> Option<Job> {
    let mut state = queue.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        if let Some(job) = state.jobs.pop() {
            state.active += 1;
            return Some(job);
        }
        if state.active == 0 {
            return None;
        }
        state = ready.wait(state).unwrap_or_else(PoisonError::into_inner);
    }
}

#[allow(
    clippy::too_many_arguments,
    reason = "the walk's shared state, passed to one private helper"
)]
fn process<V>(
    root: &Root,
    options: &WalkOptions,
    job: Job,
    visit: &mut V,
    queue: &Mutex<Queue>,
    ready: &Condvar,
    stop: &AtomicBool,
    quit: &AtomicBool,
    timed_out: &AtomicBool,
) where
    V: FnMut(&WalkEntry<'_>) -> Control,
{
    let depth = job.depth + 1;
    let descend = options.max_depth.is_none_or(|max| depth < max);
    let mut children = Vec::new();
    // A directory that cannot be listed (gone, permissions) is skipped, as find and rg do.
    let _ = for_each_entry(root, "", &job.fd, |name, file_type| {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        if Instant::now() >= options.deadline {
            timed_out.store(true, Ordering::Relaxed);
            stop.store(true, Ordering::Relaxed);
            return false;
        }
        let bytes = name.to_bytes();
        if bytes == b".git" || (!options.hidden && bytes.first() == Some(&b'.')) {
            return true;
        }
        let real = job.real.join(OsStr::from_bytes(bytes));
        let is_dir = file_type == FileType::Directory;
        if options.gitignore && job.ignores.ignored(&real, is_dir) {
            return true;
        }
        if !root.allows(&real, Access::Read) {
            return true;
        }
        let entry = WalkEntry {
            dir: job.fd.as_fd(),
            name,
            real,
            file_type,
        };
        if visit(&entry) == Control::Quit {
            quit.store(true, Ordering::Relaxed);
            stop.store(true, Ordering::Relaxed);
            return false;
        }
        if is_dir && descend {
            // O_NOFOLLOW: a directory swapped for a link since it was listed is refused, not followed.
            if let Ok(fd) = rustix::fs::openat(
                &job.fd,
                name,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                let ignores = if options.gitignore {
                    child_ignores(&job.ignores, &fd, &entry.real)
                } else {
                    Arc::clone(&job.ignores)
                };
                children.push(Job {
                    fd,
                    real: entry.real,
                    depth,
                    ignores,
                });
            }
        }
        true
    });
    if !children.is_empty() {
        let mut state = queue.lock().unwrap_or_else(PoisonError::into_inner);
        let n = children.len();
        state.jobs.extend(children);
        drop(state);
        for _ in 0..n {
            ready.notify_one();
        }
    }
}

/// The matchers for a directory: its `.gitignore` and `.ignore`, read through its descriptor.
fn child_ignores(parent: &Arc<Ignores>, dir: &OwnedFd, real: &Path) -> Arc<Ignores> {
    let mut builder: Option<GitignoreBuilder> = None;
    for file in [c".gitignore", c".ignore"] {
        let Ok(fd) = rustix::fs::openat(
            dir,
            file,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            continue;
        };
        if crate::read::regular_size("", &fd, "read").is_err() {
            continue;
        }
        let Ok(text) = crate::read::read_all(fd, 1024 * 1024) else {
            continue;
        };
        let builder = builder.get_or_insert_with(|| GitignoreBuilder::new(real));
        for line in String::from_utf8_lossy(&text).lines() {
            // A malformed line is skipped, as git does.
            let _ = builder.add_line(None, line);
        }
    }
    match builder.and_then(|b| b.build().ok()) {
        Some(matcher) => Arc::new(Ignores {
            parent: Some(Arc::clone(parent)),
            matcher: Some(matcher),
        }),
        None => Arc::clone(parent),
    }
}
