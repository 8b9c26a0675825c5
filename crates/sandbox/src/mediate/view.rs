//! The two things the mediator reaches files through, kept apart by type.
//!
//! - [`AgentView`] is the sandbox's own view: its root (the mediator's root since it joined the
//!   sandbox's mount namespace) and its own `/proc` (a procfs of the sandbox's PID namespace, mounted by
//!   its init). Every path the agent names is resolved here, by [`AgentView::resolve`], as the agent's
//!   kernel would resolve it.
//! - [`HostProc`] is the mediator's own authority: the host's `/proc`, opened before it joined the
//!   sandbox. Through it the mediator reaches the caller itself (its working directory and descriptors,
//!   its status) and the paths of its own descriptors. It is never a base for a path the agent names:
//!   `/proc/self/..` resolved through it was the host's `/proc`, where `<pid>/root` of any host process
//!   led out of the sandbox (issue 30).
//!
//! # What is followed in `/proc`
//!
//! The mediator's credentials pass checks the agent's fail: it holds `CAP_SYS_PTRACE` and is in no
//! Landlock domain, so following `/proc/<pid>/root` or opening `/proc/<pid>/mem` of a process the agent
//! may not trace would hand the agent what the kernel refuses it. So inside the sandbox's `/proc` the
//! walk follows only what is the caller's own:
//! - `self`, `thread-self`, and the caller's own process and thread directories by number;
//! - in them, the magic links `fd/N` (a duplicate of the caller's own descriptor, taken with
//!   `pidfd_getfd`: an object the agent already holds), `exe` (its own executable), `cwd` (the caller's
//!   working directory) and `root` (the sandbox's root).
//!
//! Refused, and recorded as refusals: a step into any other process's directory, every other magic
//! link (`ns/*`, `map_files/*`), and any procfs other than the sandbox's own (a host `/proc` bound into
//! the sandbox) or entered other than at its root. A `..` climbs only as far as the sandbox's own
//! `/proc`.
//!
//! # Two roads
//!
//! Outside `/proc` the kernel's own walk is used where it can be: `openat2` refusing magic links
//! ([`sys::openat2_no_magiclinks`]) from the sandbox's root or the caller's directory reaches exactly what
//! the agent's own walk reaches by name (same root, same mounts, same file-mode checks: the mediator's
//! filesystem ids are the agent's and it has no `CAP_DAC_*`), so its answer stands unless it lands in a
//! procfs. Otherwise (a magic link or `/proc/self` on the way, a procfs reached) the walk goes component
//! by component ([`Walk::walk`]), the complete road, which judges every step itself.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use super::{Call, MAX_FOLLOWS, RefusalReason, cstr, errno};
use crate::sys;

/// The inode number of a procfs's root directory.
const PROC_ROOT_INO: u64 = 1;

/// The mediator's own authority over the caller and itself: the host's `/proc`, opened before joining
/// the sandbox (see the module docs). Only the operations below use it; none resolves a path the agent
/// named.
pub(super) struct HostProc(OwnedFd);

impl HostProc {
    /// Opens the host's `/proc`. Call before joining the sandbox's mount namespace.
    pub(super) fn open() -> std::io::Result<Self> {
        sys::openat(
            libc::AT_FDCWD,
            c"/proc",
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            0,
        )
        .map(Self)
    }

    /// The descriptor, for the operations on the caller in [`Call`] (its `cwd`, `fd/N`, `status`) and on
    /// this process's own descriptors (`thread-self/fd/N`).
    pub(super) fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// What this process's descriptor `fd` names, as this thread (rooted in the sandbox) sees it: a path,
    /// or `pipe:[...]`, `socket:[...]`, `anon_inode:...` for an object without one.
    pub(super) fn own_fd_link(&self, fd: RawFd) -> Option<Vec<u8>> {
        sys::readlink_at(self.fd(), &cstr(format!("thread-self/fd/{fd}").as_bytes())).ok()
    }

    /// The path of this process's descriptor `fd`; `None` for objects without one.
    pub(super) fn own_fd_path(&self, fd: RawFd) -> Option<PathBuf> {
        self.own_fd_link(fd)
            .filter(|l| l.starts_with(b"/"))
            .map(|l| PathBuf::from(OsStr::from_bytes(&l)))
    }

    /// Reopens this process's descriptor `fd` with `flags` (never creating): the same file, through its
    /// magic link in this process's own `/proc`.
    pub(super) fn reopen_own(&self, fd: RawFd, flags: i32) -> std::io::Result<OwnedFd> {
        sys::openat(
            self.fd(),
            &cstr(format!("thread-self/fd/{fd}").as_bytes()),
            (flags & !(libc::O_CREAT | libc::O_EXCL)) | libc::O_CLOEXEC,
            0,
        )
    }
}

/// The sandbox's own view: its root and its `/proc` (see the module docs).
pub(super) struct AgentView {
    root: OwnedFd,
    root_id: (u64, u64),
    /// The ids of the mounts of the sandbox's mount namespace, read when the mediator joined it (after
    /// the init built the root; the program can mount nothing in it).
    mounts: std::collections::HashSet<u64>,
    /// Those of them that are procfs (the sandbox's `/proc`, and any part of it bound elsewhere).
    proc_mounts: std::collections::HashSet<u64>,
    /// The device of the sandbox's own procfs, mounted at `/proc` in its root; `None` without one.
    proc_dev: Option<u64>,
}

/// A path resolved to (directory, final name), and the full path as the sandbox sees it.
pub(super) struct Resolved {
    pub dir: OwnedFd,
    pub name: CString,
    pub path: PathBuf,
    /// The name is `.` or `..` (or the path was `/`, or a magic link to a directory such as
    /// `/proc/self/cwd`): it names an existing directory, never a new file.
    pub is_dot: bool,
    /// The path named a file the caller holds: one of its own descriptors (`/proc/self/fd/N`,
    /// `/dev/stdout`), a duplicate of it, the same open file; or its own executable (`/proc/self/exe`).
    /// Nothing is created through it.
    pub held: Option<OwnedFd>,
    /// The path ended in `/`: it can only name a directory.
    pub trailing_slash: bool,
}

/// Why a resolution stopped.
pub(super) enum Stop {
    /// An error the kernel would give the caller.
    Errno(i32),
    /// A step the mediator refuses to take for the caller (the module docs list them): the path of that
    /// step, as the sandbox sees it, and why.
    Refused(PathBuf, RefusalReason),
}

impl From<i32> for Stop {
    fn from(e: i32) -> Self {
        Stop::Errno(e)
    }
}

fn io(e: std::io::Error) -> Stop {
    Stop::Errno(errno(&e))
}

/// The caller's process and thread ids in the sandbox's PID namespace, read once per thread from its
/// `status` in the host's `/proc` (`NStgid`, `NSpid`); emptied every 4,096 threads, as a thread id may
/// be reused.
#[derive(Default)]
pub(super) struct NsIds(HashMap<i32, (u32, u32)>);

impl NsIds {
    fn of(&mut self, call: &Call, host: &HostProc) -> Result<(u32, u32), Stop> {
        if let Some(ids) = self.0.get(&call.pid) {
            return Ok(*ids);
        }
        // The sandbox's PID namespace is one below the mediator's (run.rs always makes one); a namespace
        // the agent made below it adds fields after.
        let at_sandbox_level = |v: String| -> Option<u32> {
            let fields: Vec<&str> = v.split_whitespace().collect();
            fields.get(1).or(fields.first())?.parse().ok()
        };
        let tgid = call
            .status_field(host, "NStgid:")
            .and_then(at_sandbox_level);
        let tid = call.status_field(host, "NSpid:").and_then(at_sandbox_level);
        let (Some(tgid), Some(tid)) = (tgid, tid) else {
            return Err(Stop::Errno(libc::ESRCH));
        };
        call.still_valid()?;
        if self.0.len() >= 4096 {
            self.0.clear();
        }
        self.0.insert(call.pid, (tgid, tid));
        Ok((tgid, tid))
    }
}

/// Where in the sandbox's view a directory lies, as far as the walk needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Not in a procfs.
    Files,
    /// The sandbox's `/proc`.
    ProcRoot,
    /// Beneath `/proc`, outside every process's directory (`sys`, `fs`, `bus`, ...).
    ProcOther { depth: u32 },
    /// The caller's own process or thread directory (`depth` 0), or a directory beneath it (`attr`,
    /// `net`, ...).
    Own { depth: u32 },
    /// The caller's own `task` directory.
    OwnTasks,
    /// The caller's own `fd` directory.
    OwnFds,
}

/// Where a resolution starts.
enum Start {
    /// The sandbox's root (an absolute path).
    Root,
    /// The caller's working directory or `dirfd`, not yet judged (see [`Walk::parent`]).
    Caller(OwnedFd),
    /// A directory the walk stands in (the one a symlink it follows lies in).
    At(Here),
}

/// A directory the walk stands in.
struct Here {
    fd: OwnedFd,
    place: Place,
}

/// What the last component came to.
enum Last {
    Done(Resolved),
    /// A symlink to follow: its text, relative to the directory it lies in.
    Follow(Here, Vec<u8>),
}

impl AgentView {
    /// Opens the view. Call after joining the sandbox's mount namespace, whose root is then this
    /// process's.
    pub(super) fn open(host: &HostProc) -> std::io::Result<Self> {
        let root = sys::openat(
            libc::AT_FDCWD,
            c"/",
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            0,
        )?;
        let root_id = sys::fstat_identity(root.as_raw_fd())
            .ok_or_else(|| std::io::Error::other("cannot examine the sandbox's root"))?;
        let proc_dev = sys::openat(
            root.as_raw_fd(),
            c"proc",
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0,
        )
        .ok()
        .filter(|fd| sys::is_procfs(fd.as_raw_fd()).unwrap_or(false))
        .and_then(|fd| sys::fstat(fd.as_raw_fd()).ok())
        .filter(|st| st.st_ino == PROC_ROOT_INO)
        .map(|st| st.st_dev);
        let mountinfo = sys::openat(
            host.fd(),
            c"thread-self/mountinfo",
            libc::O_RDONLY | libc::O_CLOEXEC,
            0,
        )?;
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut std::fs::File::from(mountinfo), &mut text)?;
        let (mut mounts, mut proc_mounts) = (HashSet::new(), HashSet::new());
        for line in text.split(|b| *b == b'\n') {
            // `ID PARENT MAJOR:MINOR ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER`
            let mut fields = line.split(|b| *b == b' ');
            let Some(id) = fields
                .next()
                .and_then(|id| std::str::from_utf8(id).ok()?.parse::<u64>().ok())
            else {
                continue;
            };
            mounts.insert(id);
            if fields.skip_while(|f| *f != b"-").nth(1) == Some(b"proc") {
                proc_mounts.insert(id);
            }
        }
        Ok(Self {
            root,
            root_id,
            mounts,
            proc_mounts,
            proc_dev,
        })
    }

    /// Whether `file` lies on one of the sandbox's own mounts, and so at the path the kernel reports for
    /// it in this view (a copy of a host mount in the sandbox's namespace is its own; the host's mount of
    /// the same files is not): a descriptor handed in from outside (a redirection of the user's) reads
    /// like a path inside.
    pub(super) fn holds_in_view(&self, file: &OwnedFd) -> bool {
        sys::file_ids(file.as_raw_fd()).is_ok_and(|ids| self.mounts.contains(&ids.mount))
    }

    /// Resolves `path` as the caller would (relative to `dirfd` or its working directory, inside the
    /// sandbox's root), following a final symlink when `follow`. The directory is opened here and stays
    /// the one the operation uses.
    pub(super) fn resolve(
        &self,
        host: &HostProc,
        call: &Call,
        ids: &mut NsIds,
        dirfd: i32,
        path: &[u8],
        follow: bool,
    ) -> Result<Resolved, Stop> {
        if path.is_empty() {
            return Err(Stop::Errno(libc::ENOENT));
        }
        let mut walk = Walk {
            view: self,
            host,
            call,
            ids,
            follows: 0,
        };
        let mut start = if path.starts_with(b"/") {
            Start::Root
        } else {
            Start::Caller(call.dir(host, dirfd)?)
        };
        let mut path = path.to_vec();
        loop {
            // `/dev/stdout` and its kin lead here: the caller's own descriptor, taken at once. `/proc` in
            // the sandbox's root is its procfs (a mount point the program can neither move nor cover),
            // so the text alone says what it names.
            if matches!(start, Start::Root)
                && follow
                && self.proc_dev.is_some()
                && let Some(n) = own_fd_text(&path)
            {
                let held = walk.held(n)?;
                return Ok(Resolved {
                    dir: self.root.try_clone().map_err(io)?,
                    name: cstr(n),
                    path: PathBuf::new(),
                    is_dot: false,
                    held: Some(held),
                    trailing_slash: false,
                });
            }
            let (parent, name, trailing_slash) = split_last(&path);
            let here = walk.parent(std::mem::replace(&mut start, Start::Root), parent)?;
            match walk.last(here, name, follow, trailing_slash)? {
                Last::Done(r) => return Ok(r),
                Last::Follow(at, target) => {
                    walk.count_follow()?;
                    start = if target.starts_with(b"/") {
                        Start::Root
                    } else {
                        Start::At(at)
                    };
                    path = target;
                }
            }
        }
    }
}

/// `path` split into its parent's text, its last component and whether it ended in `/`. `/` is
/// (`/`, `.`); a name without a `/` has the parent `.`.
fn split_last(path: &[u8]) -> (&[u8], &[u8], bool) {
    let trimmed_len = path.len() - path.iter().rev().take_while(|b| **b == b'/').count();
    let trailing_slash = trimmed_len < path.len();
    let trimmed = path.get(..trimmed_len).unwrap_or_default();
    if trimmed.is_empty() {
        return (b"/", b".", trailing_slash);
    }
    match trimmed.iter().rposition(|b| *b == b'/') {
        Some(0) => (b"/", trimmed.get(1..).unwrap_or_default(), trailing_slash),
        Some(i) => (
            trimmed.get(..i).unwrap_or_default(),
            trimmed.get(i + 1..).unwrap_or_default(),
            trailing_slash,
        ),
        None => (b".", trimmed, trailing_slash),
    }
}

/// `N` of exactly `/proc/self/fd/N` or `/proc/thread-self/fd/N`.
fn own_fd_text(path: &[u8]) -> Option<&[u8]> {
    let rest = path
        .strip_prefix(b"/proc/self/fd/")
        .or_else(|| path.strip_prefix(b"/proc/thread-self/fd/"))?;
    is_number(rest).then_some(rest)
}

/// The components of `text`, without empty ones and `.`.
fn components(text: &[u8]) -> impl DoubleEndedIterator<Item = Vec<u8>> + '_ {
    text.split(|b| *b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .map(<[u8]>::to_vec)
}

/// A process or thread id as a procfs names it.
fn is_number(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(u8::is_ascii_digit)
}

/// One resolution: the view, the caller, and the symlinks followed so far.
struct Walk<'a> {
    view: &'a AgentView,
    host: &'a HostProc,
    call: &'a Call,
    ids: &'a mut NsIds,
    follows: u32,
}

impl Walk<'_> {
    fn count_follow(&mut self) -> Result<(), Stop> {
        self.follows += 1;
        if self.follows > MAX_FOLLOWS {
            return Err(Stop::Errno(libc::ELOOP));
        }
        Ok(())
    }

    /// The sandbox's root, to stand in.
    fn root(&self) -> Result<Here, Stop> {
        let fd = self.view.root.try_clone().map_err(io)?;
        Ok(Here {
            fd,
            place: Place::Files,
        })
    }

    /// The path of a directory the walk holds, for a refusal's record.
    fn path_of(&self, fd: &OwnedFd, name: &[u8]) -> PathBuf {
        let mut p = self.host.own_fd_path(fd.as_raw_fd()).unwrap_or_default();
        if !name.is_empty() {
            p.push(OsStr::from_bytes(name));
        }
        p
    }

    fn refuse(&self, fd: &OwnedFd, name: &[u8]) -> Stop {
        Stop::Refused(self.path_of(fd, name), RefusalReason::OutsideOwnProc)
    }

    /// Where a directory lies, from its mount: on one of the sandbox's own mounts (else refused: a
    /// directory handed to the program already open from outside, `< DIR`, has names that are not the
    /// sandbox's, and a path judged by them would act elsewhere), and in procfs or not. `None` for a
    /// directory inside the sandbox's `/proc` other than its root, whose place only a walk can tell.
    fn place_of(&self, fd: &OwnedFd, ids: &sys::FileIds) -> Result<Option<Place>, Stop> {
        if !self.view.mounts.contains(&ids.mount) {
            return Err(Stop::Refused(
                self.path_of(fd, b""),
                RefusalReason::OutsideView,
            ));
        }
        Ok(if !self.view.proc_mounts.contains(&ids.mount) {
            Some(Place::Files)
        } else if Some(ids.dev) == self.view.proc_dev && ids.ino == PROC_ROOT_INO {
            Some(Place::ProcRoot)
        } else {
            None
        })
    }

    /// A directory reached other than by a step the walk tracks (`..`, a mount crossed): files, or the
    /// root of the sandbox's own `/proc`; anything else is refused.
    fn placed(&self, fd: OwnedFd, ids: &sys::FileIds) -> Result<Here, Stop> {
        match self.place_of(&fd, ids)? {
            Some(place) => Ok(Here { fd, place }),
            None => Err(self.refuse(&fd, b"")),
        }
    }

    /// A directory the caller holds (its working directory, a descriptor, `/proc/self/fd/N`), placed by
    /// [`Walk::place_of`]. One inside the sandbox's `/proc` (`mkdir -p` walks `/proc/self` by
    /// descriptors) is placed by walking its path from the root, which judges every step, and taken only
    /// if that walk reaches the very same directory.
    fn held_dir(&mut self, fd: OwnedFd) -> Result<Here, Stop> {
        let ids = sys::file_ids(fd.as_raw_fd()).map_err(io)?;
        if let Some(place) = self.place_of(&fd, &ids)? {
            return Ok(Here { fd, place });
        }
        let path = self.path_of(&fd, b"");
        let walked = self.walk(None, path.as_os_str().as_bytes())?;
        if sys::file_ids(walked.fd.as_raw_fd()).is_ok_and(|w| w == ids) {
            Ok(walked)
        } else {
            Err(self.refuse(&fd, b""))
        }
    }

    /// The caller's directory for `dirfd` (its working directory for `AT_FDCWD`): the caller's own,
    /// reached through the host's `/proc`, placed by [`Walk::held_dir`].
    fn caller_dir(&mut self, dirfd: i32) -> Result<Here, Stop> {
        let fd = self.call.dir(self.host, dirfd)?;
        self.held_dir(fd)
    }

    /// The directory `text` names from `start` (the root when `None`).
    ///
    /// The kernel's walk first, which refuses magic links: where it lands on one of the sandbox's own
    /// mounts other than procfs, it went where the agent's own walk goes (a walk that began in a
    /// directory from outside the view stays on the host's mounts, whose ancestors are all the host's,
    /// unless an absolute symlink brings it back to the sandbox's root, as it would the agent). Anything
    /// else takes the component walk, which judges its start and each step.
    fn parent(&mut self, start: Start, text: &[u8]) -> Result<Here, Stop> {
        let base = match &start {
            Start::Root => Some(self.view.root.as_raw_fd()),
            Start::Caller(fd) => Some(fd.as_raw_fd()),
            Start::At(h) => (h.place == Place::Files).then(|| h.fd.as_raw_fd()),
        };
        if let Some(base) = base
            && !text.starts_with(b"/proc/")
            && text != b"/proc"
            && let Ok(fd) = sys::openat2_no_magiclinks(
                base,
                &cstr(text),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
            && let Ok(ids) = sys::file_ids(fd.as_raw_fd())
            && self.view.mounts.contains(&ids.mount)
            && !self.view.proc_mounts.contains(&ids.mount)
        {
            return Ok(Here {
                fd,
                place: Place::Files,
            });
        }
        let start = match start {
            Start::Root => None,
            Start::Caller(fd) => Some(self.held_dir(fd)?),
            Start::At(h) => Some(h),
        };
        self.walk(start, text)
    }

    /// The complete road: `text` from `start`, one component at a time.
    fn walk(&mut self, start: Option<Here>, text: &[u8]) -> Result<Here, Stop> {
        let mut here = match start {
            Some(h) if !text.starts_with(b"/") => h,
            _ => self.root()?,
        };
        let mut todo: VecDeque<Vec<u8>> = components(text).collect();
        while let Some(c) = todo.pop_front() {
            here = self.step(here, &c, &mut todo)?;
        }
        Ok(here)
    }

    /// Opens `name` in `here` without following it.
    fn open_in(&self, here: &Here, name: &[u8]) -> Result<(OwnedFd, sys::FileIds), Stop> {
        let fd = sys::openat(
            here.fd.as_raw_fd(),
            &cstr(name),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0,
        )
        .map_err(io)?;
        let ids = sys::file_ids(fd.as_raw_fd()).map_err(io)?;
        Ok((fd, ids))
    }

    /// Physical `..` of `here`.
    fn up(&self, here: &Here) -> Result<OwnedFd, Stop> {
        sys::openat(
            here.fd.as_raw_fd(),
            c"..",
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            0,
        )
        .map_err(io)
    }

    /// The caller's own process (or, for `thread`, thread) directory in the sandbox's `/proc`.
    fn own_dir(&mut self, proc_root: &Here, thread: bool) -> Result<Here, Stop> {
        let (tgid, tid) = self.ids.of(self.call, self.host)?;
        let name = if thread {
            format!("{tgid}/task/{tid}")
        } else {
            tgid.to_string()
        };
        let fd = sys::openat(
            proc_root.fd.as_raw_fd(),
            &cstr(name.as_bytes()),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0,
        )
        .map_err(io)?;
        Ok(Here {
            fd,
            place: Place::Own { depth: 0 },
        })
    }

    /// Whether `name` is the caller's own process or thread id.
    fn is_own(&mut self, name: &[u8]) -> Result<bool, Stop> {
        let (tgid, tid) = self.ids.of(self.call, self.host)?;
        Ok(name == tgid.to_string().as_bytes() || name == tid.to_string().as_bytes())
    }

    /// One step of [`Walk::walk`]: from `here` into `c`, expanding a symlink into `todo`.
    fn step(&mut self, here: Here, c: &[u8], todo: &mut VecDeque<Vec<u8>>) -> Result<Here, Stop> {
        let dotdot = c == b"..";
        match here.place {
            Place::Files if dotdot => {
                if sys::fstat_identity(here.fd.as_raw_fd()) == Some(self.view.root_id) {
                    return Ok(here);
                }
                let up = self.up(&here)?;
                let ids = sys::file_ids(up.as_raw_fd()).map_err(io)?;
                self.placed(up, &ids)
            }
            Place::ProcRoot if dotdot => {
                let up = self.up(&here)?;
                let ids = sys::file_ids(up.as_raw_fd()).map_err(io)?;
                self.placed(up, &ids)
            }
            Place::ProcOther { depth } if dotdot => {
                let fd = self.up(&here)?;
                let place = match depth {
                    0 | 1 => Place::ProcRoot,
                    d => Place::ProcOther { depth: d - 1 },
                };
                Ok(Here { fd, place })
            }
            // Up within the caller's own directory, or from it to the sandbox's `/proc` (a thread's
            // directory reached through `task/<tid>` goes up to that `task`); never further by this
            // road than the places above already allow.
            Place::Own { .. } | Place::OwnTasks | Place::OwnFds if dotdot => {
                let fd = self.up(&here)?;
                let place = match here.place {
                    Place::Own { depth: 0 } => {
                        if sys::file_ids(fd.as_raw_fd()).map_err(io)?.ino == PROC_ROOT_INO {
                            Place::ProcRoot
                        } else {
                            Place::OwnTasks
                        }
                    }
                    Place::Own { depth } => Place::Own { depth: depth - 1 },
                    _ => Place::Own { depth: 0 },
                };
                Ok(Here { fd, place })
            }
            Place::Files => {
                let (fd, ids) = self.open_in(&here, c)?;
                match ids.kind {
                    libc::S_IFLNK => self.expand(here, &fd, todo),
                    libc::S_IFDIR => self.placed(fd, &ids),
                    _ => Err(Stop::Errno(libc::ENOTDIR)),
                }
            }
            Place::ProcRoot => {
                if c == b"self" || c == b"thread-self" {
                    return self.own_dir(&here, c == b"thread-self");
                }
                if is_number(c) {
                    if !self.is_own(c)? {
                        return Err(self.refuse(&here.fd, c));
                    }
                    let (fd, _) = self.open_in(&here, c)?;
                    return Ok(Here {
                        fd,
                        place: Place::Own { depth: 0 },
                    });
                }
                // `mounts`, `net` and the like are plain links to `self/...`.
                let (fd, ids) = self.open_in(&here, c)?;
                match ids.kind {
                    libc::S_IFLNK => self.expand(here, &fd, todo),
                    libc::S_IFDIR => self.beneath(fd, &ids, 1),
                    _ => Err(Stop::Errno(libc::ENOTDIR)),
                }
            }
            Place::ProcOther { depth } => {
                let (fd, ids) = self.open_in(&here, c)?;
                match ids.kind {
                    libc::S_IFDIR => self.beneath(fd, &ids, depth + 1),
                    libc::S_IFLNK => Err(self.refuse(&here.fd, c)),
                    _ => Err(Stop::Errno(libc::ENOTDIR)),
                }
            }
            Place::Own { depth } => {
                let (fd, ids) = self.open_in(&here, c)?;
                match ids.kind {
                    libc::S_IFLNK if depth == 0 && c == b"cwd" => self.caller_dir(libc::AT_FDCWD),
                    libc::S_IFLNK if depth == 0 && c == b"root" => self.root(),
                    libc::S_IFLNK => Err(self.refuse(&here.fd, c)),
                    libc::S_IFDIR => {
                        let place = match c {
                            b"fd" if depth == 0 => Place::OwnFds,
                            b"task" if depth == 0 => Place::OwnTasks,
                            _ => Place::Own { depth: depth + 1 },
                        };
                        Ok(Here { fd, place })
                    }
                    _ => Err(Stop::Errno(libc::ENOTDIR)),
                }
            }
            Place::OwnTasks => {
                let (_, tid) = self.ids.of(self.call, self.host)?;
                if c != tid.to_string().as_bytes() {
                    return Err(self.refuse(&here.fd, c));
                }
                let (fd, _) = self.open_in(&here, c)?;
                Ok(Here {
                    fd,
                    place: Place::Own { depth: 0 },
                })
            }
            Place::OwnFds => {
                let held = self.held(c)?;
                if !sys::is_dir(std::os::fd::AsFd::as_fd(&held)) {
                    return Err(Stop::Errno(libc::ENOTDIR));
                }
                self.held_dir(held)
            }
        }
    }

    /// A directory beneath `/proc` outside every process's: still procfs, or a mount on it (another
    /// filesystem, judged as files).
    fn beneath(&self, fd: OwnedFd, ids: &sys::FileIds, depth: u32) -> Result<Here, Stop> {
        let place = self
            .place_of(&fd, ids)?
            .unwrap_or(Place::ProcOther { depth });
        Ok(Here { fd, place })
    }

    /// A symlink met on the way: its text goes before what is left of the path.
    fn expand(
        &mut self,
        here: Here,
        link: &OwnedFd,
        todo: &mut VecDeque<Vec<u8>>,
    ) -> Result<Here, Stop> {
        self.count_follow()?;
        let target = sys::readlink_at(link.as_raw_fd(), c"").map_err(io)?;
        if target.is_empty() {
            return Err(Stop::Errno(libc::ENOENT));
        }
        for c in components(&target).rev() {
            todo.push_front(c);
        }
        if target.starts_with(b"/") {
            self.root()
        } else {
            Ok(here)
        }
    }

    /// A duplicate of the caller's descriptor named `name` (a number) in its `fd` directory.
    fn held(&self, name: &[u8]) -> Result<OwnedFd, Stop> {
        let n: i32 = std::str::from_utf8(name)
            .ok()
            .filter(|_| is_number(name))
            .and_then(|s| s.parse().ok())
            .ok_or(Stop::Errno(libc::ENOENT))?;
        self.call
            .descriptor(self.host, n)
            .map_err(|e| Stop::Errno(if e == libc::EBADF { libc::ENOENT } else { e }))
    }

    /// The last component, `name`, in `here`.
    fn last(
        &mut self,
        here: Here,
        name: &[u8],
        follow: bool,
        trailing_slash: bool,
    ) -> Result<Last, Stop> {
        let is_dot = name == b"." || name == b"..";
        let name_c = cstr(name);
        let is_link =
            |h: &Here| sys::lstat_at(h.fd.as_raw_fd(), &name_c).is_ok_and(|t| t == libc::S_IFLNK);
        let done = |w: &Self, here: Here, held: Option<OwnedFd>| {
            // A file the caller holds is judged on what it is, not by this name.
            let path = match (&held, is_dot) {
                (Some(_), _) => PathBuf::new(),
                (None, true) => w.path_of(&here.fd, b""),
                (None, false) => w.path_of(&here.fd, b"").join(OsStr::from_bytes(name)),
            };
            Ok(Last::Done(Resolved {
                dir: here.fd,
                name: cstr(name),
                path,
                is_dot,
                held,
                trailing_slash,
            }))
        };
        match here.place {
            Place::Files | Place::ProcOther { .. } => {
                if follow && !is_dot && is_link(&here) {
                    let target = sys::readlink_at(here.fd.as_raw_fd(), &name_c).map_err(io)?;
                    if here.place != Place::Files {
                        return Err(self.refuse(&here.fd, name));
                    }
                    return Ok(Last::Follow(here, target));
                }
                done(self, here, None)
            }
            Place::ProcRoot => {
                if follow && !is_dot && is_link(&here) {
                    let target = match name {
                        b"self" | b"thread-self" => {
                            let (tgid, tid) = self.ids.of(self.call, self.host)?;
                            if name == b"self" {
                                tgid.to_string().into_bytes()
                            } else {
                                format!("{tgid}/task/{tid}").into_bytes()
                            }
                        }
                        _ => sys::readlink_at(here.fd.as_raw_fd(), &name_c).map_err(io)?,
                    };
                    return Ok(Last::Follow(here, target));
                }
                // Another process's directory as the last name is only a name: nothing is followed
                // into it, and nothing can be made or opened as a file there.
                done(self, here, None)
            }
            Place::Own { depth } => {
                if follow && !is_dot && is_link(&here) {
                    let dir = match name {
                        b"cwd" if depth == 0 => self.caller_dir(libc::AT_FDCWD)?,
                        b"root" if depth == 0 => self.root()?,
                        b"exe" if depth == 0 => {
                            let exe = self.call.exe(self.host)?;
                            return done(self, here, Some(exe));
                        }
                        _ => return Err(self.refuse(&here.fd, name)),
                    };
                    // A directory the caller holds: named as a whole, like `.`.
                    let path = self.path_of(&dir.fd, b"");
                    return Ok(Last::Done(Resolved {
                        dir: dir.fd,
                        name: cstr(b"."),
                        path,
                        is_dot: true,
                        held: None,
                        trailing_slash,
                    }));
                }
                done(self, here, None)
            }
            Place::OwnTasks => done(self, here, None),
            Place::OwnFds => {
                if follow && !is_dot {
                    let held = self.held(name)?;
                    return done(self, here, Some(held));
                }
                done(self, here, None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split_last;

    /// A path, and its parent's text, last name and trailing `/`.
    type Case = (&'static [u8], (&'static [u8], &'static [u8], bool));

    #[test]
    fn only_exactly_an_own_descriptor_is_taken_from_the_text() {
        use super::own_fd_text;
        assert_eq!(own_fd_text(b"/proc/self/fd/1"), Some(&b"1"[..]));
        assert_eq!(own_fd_text(b"/proc/thread-self/fd/12"), Some(&b"12"[..]));
        for other in [
            &b"/proc/self/fd/1/x"[..],
            b"/proc/self/fd/",
            b"/proc/self/fd/-1",
            b"/proc/self/../1/fd/1",
            b"/proc//self/fd/1",
            b"/proc/1/fd/1",
            b"proc/self/fd/1",
        ] {
            assert_eq!(
                own_fd_text(other),
                None,
                "{}",
                String::from_utf8_lossy(other)
            );
        }
    }

    #[test]
    fn a_path_splits_into_its_parent_and_last_name() {
        let cases: &[Case] = &[
            (b"/", (b"/", b".", true)),
            (b"//", (b"/", b".", true)),
            (b"/a", (b"/", b"a", false)),
            (b"/a/b/", (b"/a", b"b", true)),
            (b"a", (b".", b"a", false)),
            (b"a/..", (b"a", b"..", false)),
            (b"/proc/self/fd/1", (b"/proc/self/fd", b"1", false)),
        ];
        for (path, want) in cases {
            assert_eq!(split_last(path), *want, "{}", String::from_utf8_lossy(path));
        }
    }
}
