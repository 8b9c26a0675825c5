//! The mediator: the process that answers the seccomp filter's notifications.
//!
//! Landlock grants by directory: a grant to create files in `src` is a grant for every name, and nothing
//! can be said about a name that does not exist yet. So every call that gives a file a name (`open` with
//! `O_CREAT`, `mkdir`, `mknod`, `rename`, `link`, `symlink`, `bind`) and every `connect` stops in the
//! kernel and is handed here (see `seccomp.rs`). A creation in a directory where Landlock lets the program
//! create any name (no name-based rule applies there) proceeds in the kernel
//! (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): whatever the path says by then, Landlock decides as the policy
//! does. Landlock's rules are on directories, not names, so that road is taken only while the path still
//! names the directory it named at the start; one removed and made again during the run is another
//! directory, without a rule, whose names are made here. Every other one is checked and performed here.
//! The mediator reads the call's arguments from the caller's memory, resolves the path as the caller
//! would, asks the policy, and then **performs the call itself** on the directory it resolved, handing an
//! opened file back with `SECCOMP_IOCTL_NOTIF_ADDFD`. The caller's memory is read once and never trusted
//! again, so there is no window between the check and the use (answering "continue" would let another
//! thread of the caller rewrite the path after the check).
//!
//! # Security model
//!
//! The mediator is a deputy: it acts for the program with more rights than the program has, so the
//! program will try to make it act where the program itself could not (DESIGN.md, "Deputies"). What it
//! is, what it may do, and why each right is safe:
//! - A process forked from the supervisor (single-threaded, as joining namespaces needs), which joins the
//!   sandbox's user namespace (when there is one) and mount namespace through descriptors the program
//!   sends with the listener: it sees exactly the program's root, read-only binds and masks included, so
//!   the kernel still refuses what the mount namespace refuses. It is not under Landlock or the filter.
//! - **It resolves every path in the program's own view** ([`view::AgentView`]): the sandbox's root and
//!   the sandbox's own `/proc`, component by component where the kernel's walk cannot be trusted to stop
//!   where the program's would. In `/proc` it follows only the caller's own entries (`fd/N` as a
//!   duplicate of the caller's own descriptor, `cwd`, `root`), never another process's, never another
//!   magic link, never `..` out of a process's directory (see `view`). The host's `/proc`, opened before
//!   joining ([`view::HostProc`]), is its authority over the caller and never a base for a path the
//!   program names: through it `/proc/self/..` was the host's `/proc` (issue 30).
//! - It keeps one capability, `CAP_SYS_PTRACE`, in its effective and permitted sets (the rest are dropped
//!   for good): reading the path from the caller's memory (`process_vm_readv`) and taking the caller's
//!   descriptors (`pidfd_getfd`) and working directory need it where Yama restricts tracing to
//!   descendants; the mediator is the caller's sibling. It is used only on the caller that stopped (the
//!   notification is checked to be still pending after each read, so a reused pid is never read), and the
//!   walk never lets it follow another process's `/proc` entries, where the same right would pass ptrace
//!   checks the program fails. Its filesystem uid and gid are the program's and it holds no `CAP_DAC_*`:
//!   files are owned as if the program made them, and file-mode checks apply as to it. It applies the
//!   caller's umask.
//! - It decides before any side effect: the policy's decision for the resolved path (write to create,
//!   rename, link or connect; the open's own access for an existing file), the same decision `explain`
//!   shows, comes before the create, the `O_TRUNC`, the connect. A reopen of a descriptor the caller holds
//!   (`/dev/stdout`) is judged on the file it is, in the sandbox's view; one handed to the program from
//!   outside that view (a redirection of the user's) is reopened with no more access than the descriptor
//!   has; an object without a path (a pipe, a socket) is the caller's already. The run's private areas
//!   (temp dir, `/tmp`, `/var/tmp`, `/dev/shm`, `/dev`) are writable whatever the policy says, as they are
//!   for Landlock.
//! - A creation in a writable tree where names matter takes a direct road when it can: `openat2` from
//!   the tree's root, refusing any symlink, magic link or mount on the way, makes exactly the path as
//!   written, so the policy's decision for the text is the decision for what is made. An `open` without
//!   `O_EXCL` then proceeds in the kernel (the file now exists; handing a descriptor over with ADDFD would
//!   cost a second round trip with the caller). Anything else takes the general road.
//! - A `connect` is made on a thread of its own, which answers for it (a listener may be slow to
//!   accept); a pathname socket is opened without following a final symlink, checked, and reached through
//!   its descriptor, so the socket connected is the one checked.
//! - It exits when every process under the filter has; if it dies first, every mediated call fails with
//!   `ENOSYS` (fail closed) and the run's outcome says so. The program cannot reach it: it is outside the
//!   sandbox's PID namespace (no `/proc` entry, no signal), not dumpable, and its descriptors are not the
//!   program's.
//!
//! Refusals are `EACCES` and are recorded for the run's outcome.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use stockade_policy::{Access, CanonicalPath, ResolvedPolicy};

use crate::sys;

mod view;

use view::{AgentView, HostProc, NsIds, Resolved, Stop};

/// How many refusals a run keeps for its outcome (the count is always exact).
const MAX_RECORDED: usize = 256;
/// `CAP_SYS_PTRACE`: reading a caller's memory and descriptors.
const CAP_SYS_PTRACE: u32 = 19;
/// Symlinks followed while resolving one path, as the kernel's own limit.
const MAX_FOLLOWS: u32 = 40;

/// One call the mediator refused.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Refusal {
    /// The system call (`openat`, `mkdir`, `rename`, `connect`, ...).
    pub call: &'static str,
    /// The path as the sandbox sees it (the same as on the host for granted trees).
    pub path: PathBuf,
    /// What was asked of it.
    pub access: Access,
    /// Why it was refused.
    pub reason: RefusalReason,
}

/// Why the mediator refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum RefusalReason {
    /// The policy does not grant the access to the path (`explain` names the rule).
    Policy,
    /// The path went, in `/proc`, where the mediator does not follow the program: another process's
    /// directory, a magic link other than the program's own `fd/N`, `cwd` and `root`, a `..` out of a
    /// process's directory, or a procfs other than the sandbox's own. The kernel would refuse the
    /// program most of these itself; the mediator, which holds more rights, refuses them all.
    OutsideOwnProc,
    /// A reopen (`/proc/self/fd/N`, `/dev/stdout`) of a file outside the sandbox's view, which the
    /// program was handed already open (a redirection), asked for more access than its descriptor has.
    BeyondHeld,
    /// The path went through a directory outside the sandbox's view that the program holds (a
    /// descriptor or working directory handed in already open, e.g. `< DIR`): the mediator makes and
    /// opens nothing there, since its names are not the sandbox's.
    OutsideView,
}

impl RefusalReason {
    /// The reason in words, for a refusal the policy did not decide (`None` for [`RefusalReason::Policy`]).
    pub fn explanation(self) -> Option<&'static str> {
        match self {
            RefusalReason::Policy => None,
            RefusalReason::OutsideOwnProc => Some(
                "in /proc the mediator follows only the program's own process (its fd/N, cwd and root): \
                 not another process's entries, other magic links, or `..` out of a process's directory",
            ),
            RefusalReason::BeyondHeld => Some(
                "the file lies outside the sandbox and was handed to the program already open; it is \
                 reopened with no more access than that descriptor has",
            ),
            RefusalReason::OutsideView => Some(
                "the path goes through a directory outside the sandbox that the program was handed \
                 already open; the mediator acts only in the sandbox's own view",
            ),
        }
    }
}

/// What the mediator learned during a run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Findings {
    pub refusals: Vec<Refusal>,
    pub refused: u64,
    pub mediated: u64,
}

/// What the mediator needs to know about the run.
#[derive(Debug)]
pub(crate) struct MediatorConfig {
    /// Whether the sandbox has its own user namespace (the run is not root's).
    pub user_ns: bool,
    pub policy: Arc<ResolvedPolicy>,
    /// Private, writable areas of the run (tmpfs mounts that vanish with it).
    pub private: Vec<PathBuf>,
    /// The uid and gid the program runs as, in the sandbox's user namespace.
    pub ids: (u32, u32),
    /// Whether the run has its own network namespace (abstract Unix sockets are then its own).
    pub private_net: bool,
    /// Where Landlock lets the program create names itself ([`crate::MountPlan::create_dirs`]).
    pub create_dirs: Vec<PathBuf>,
    /// The writable trees of the run ([`crate::MountPlan::writable_roots`]), which the mediator holds
    /// open for its direct road.
    pub writable_roots: Vec<PathBuf>,
}

/// The mediator, a process of its own (forked from the supervisor, so single-threaded when it joins the
/// sandbox's namespaces, which a thread of a multi-threaded process cannot do).
#[derive(Debug)]
pub(crate) struct MediatorProcess {
    pub pid: libc::pid_t,
    /// Its report, written when it exits (see [`Findings::parse`]).
    pub report: RawFd,
}

/// Forks the mediator. It receives the filter's listener on `sock` with the program's mount (and user)
/// namespace, sent by the program's process just before `execve`; joins those namespaces; and answers
/// until every process under the filter is gone; then it writes its findings and exits. It dies with the
/// supervisor.
/// `inherited` are descriptors of the supervisor's the mediator must not keep (a lock that must end with
/// the supervisor's run).
pub(crate) fn spawn(
    sock: RawFd,
    config: &MediatorConfig,
    inherited: &[RawFd],
) -> std::io::Result<MediatorProcess> {
    let (report_r, report_w) = sys::pipe()?;
    match sys::fork_process() {
        Ok(Some(pid)) => {
            sys::close(report_w);
            Ok(MediatorProcess {
                pid,
                report: report_r,
            })
        }
        Ok(None) => {
            sys::close(report_r);
            for fd in inherited {
                sys::close(*fd);
            }
            let code = match mediator_main(sock, config, report_w) {
                Ok(()) => 0,
                Err(_) => 1,
            };
            sys::exit_now(code)
        }
        Err(e) => {
            sys::close(report_r);
            sys::close(report_w);
            Err(e)
        }
    }
}

fn mediator_main(sock: RawFd, config: &MediatorConfig, report_w: RawFd) -> std::io::Result<()> {
    let _ = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
    let _ = sys::prctl(libc::PR_SET_DUMPABLE, 0);
    // A session of its own, without the user's terminal: the program has none (it runs in its own
    // session), and an open of `/dev/tty` performed here must find none either.
    sys::setsid()?;
    let host = HostProc::open()?;
    // The program sends the filter's listener and its own mount (and user) namespace just before `execve`.
    let Some(fds) = sys::recv_fds(sock)? else {
        // The program failed before installing the filter: nothing to mediate.
        return sys::write_all(report_w, &Findings::default().to_bytes());
    };
    sys::close(sock);
    let mut fds = fds.into_iter();
    let (Some(listener), Some(mount_ns)) = (fds.next(), fds.next()) else {
        return Err(std::io::Error::other("the program sent no listener"));
    };
    let user_ns = if config.user_ns {
        Some(
            fds.next()
                .ok_or_else(|| std::io::Error::other("no user namespace sent"))?,
        )
    } else {
        None
    };
    // The program sent the listener after the init built and entered the root: joining the mount
    // namespace now puts this process at that root, seeing exactly the program's mounts.
    if let Some(user_ns) = &user_ns {
        sys::setns(user_ns.as_raw_fd(), libc::CLONE_NEWUSER)?;
    }
    sys::setns(mount_ns.as_raw_fd(), libc::CLONE_NEWNS)?;
    // Every path the agent names is resolved in this view, never from the host's `/proc` (see `view`).
    let view = AgentView::open(&host)?;
    let (uid, gid) = config.ids;
    sys::set_fs_ids(uid, gid);
    sys::limit_capabilities(&[CAP_SYS_PTRACE])?;
    // Both from Linux 6.6: the hand-over on one CPU, and a waiting `RECV` woken when the last process
    // under the filter exits.
    let blocking_recv = sys::notif_sync_wake_up(listener.as_raw_fd()).is_ok();
    let roots = config
        .writable_roots
        .iter()
        .filter_map(|r| {
            let fd = sys::openat(
                libc::AT_FDCWD,
                &cstr(r.as_os_str().as_bytes()),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                0,
            )
            .ok()?;
            let id = sys::fstat_identity(fd.as_raw_fd())?;
            Some(HeldDir {
                path: r.clone(),
                fd,
                id,
            })
        })
        .collect();
    // Landlock's rules were attached to these directories (inodes, not names) just before the program
    // sent the listener; a directory removed and made again by that name during the run has none.
    let create_dirs = config
        .create_dirs
        .iter()
        .filter_map(|d| Some((d.clone(), identity(d)?)))
        .collect();
    let mut m = Mediator {
        config,
        roots,
        create_dirs,
        create_dirs_seen: SeenInPlace::default(),
        roots_seen: SeenInPlace::default(),
        dirfds: DirfdPaths::default(),
        umasks: std::collections::HashMap::new(),
        applied_umask: None,
        workers: Workers::default(),
        findings: Findings::default(),
        host,
        view,
        ns_ids: NsIds::default(),
    };
    m.serve(&listener, blocking_recv);
    let written = sys::write_all(report_w, &m.findings.to_bytes());
    // Closed now, not at exit: the supervisor reads to the end of the report and need not wait for this
    // process's address space to be torn down.
    sys::close(report_w);
    written
}

impl Findings {
    /// One line per refusal (`call`, access, path in hex, tab-separated), then `end <mediated> <refused>`.
    /// The path is the program's to choose (a newline in a name must not end the report early).
    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for r in &self.refusals {
            out.extend_from_slice(r.call.as_bytes());
            out.push(b'\t');
            out.extend_from_slice(r.access.to_string().as_bytes());
            out.push(b'\t');
            out.push(match r.reason {
                RefusalReason::Policy => b'p',
                RefusalReason::OutsideOwnProc => b'o',
                RefusalReason::BeyondHeld => b'h',
                RefusalReason::OutsideView => b'v',
            });
            out.push(b'\t');
            for b in r.path.as_os_str().as_bytes() {
                out.extend_from_slice(format!("{b:02x}").as_bytes());
            }
            out.push(b'\n');
        }
        out.extend_from_slice(format!("end {} {}\n", self.mediated, self.refused).as_bytes());
        out
    }

    /// Reads [`Findings::to_bytes`]; `None` when the report is incomplete (the mediator died).
    pub(crate) fn parse(bytes: &[u8]) -> Option<Findings> {
        let mut f = Findings::default();
        for line in bytes.split(|b| *b == b'\n') {
            if let Some(end) = line.strip_prefix(b"end ") {
                let text = String::from_utf8_lossy(end);
                let mut n = text.split(' ').map(|v| v.parse::<u64>().ok());
                f.mediated = n.next()??;
                f.refused = n.next()??;
                return Some(f);
            }
            let mut parts = line.splitn(4, |b| *b == b'\t');
            let (Some(call), Some(access), Some(reason), Some(path)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            f.refusals.push(Refusal {
                call: CALLS
                    .iter()
                    .find(|c| c.as_bytes() == call)
                    .copied()
                    .unwrap_or("?"),
                path: PathBuf::from(OsStr::from_bytes(&unhex(path)?)),
                access: if access == b"read" {
                    Access::Read
                } else {
                    Access::Write
                },
                reason: match reason {
                    b"o" => RefusalReason::OutsideOwnProc,
                    b"h" => RefusalReason::BeyondHeld,
                    b"v" => RefusalReason::OutsideView,
                    _ => RefusalReason::Policy,
                },
            });
        }
        None
    }
}

/// Reads the hex of [`Findings::to_bytes`].
fn unhex(text: &[u8]) -> Option<Vec<u8>> {
    text.chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

/// The names a refusal can carry.
const CALLS: &[&str] = &[
    "open", "mkdir", "mknod", "symlink", "link", "rename", "connect", "bind",
];

struct Mediator<'a> {
    config: &'a MediatorConfig,
    /// [`MediatorConfig::writable_roots`], open (inside the sandbox's mount namespace).
    roots: Vec<HeldDir>,
    /// [`MediatorConfig::create_dirs`], each with the directory it named when the run started.
    create_dirs: Vec<(PathBuf, (u64, u64))>,
    /// Which of them were found still at their path, lately.
    create_dirs_seen: SeenInPlace,
    /// Which of `roots` were found still at their path, lately.
    roots_seen: SeenInPlace,
    /// The paths of the directory descriptors callers create names beneath again and again.
    dirfds: DirfdPaths,
    /// Each thread's umask, read once from `/proc/<tid>/status` (the costliest read of a mediated
    /// creation). Every `umask` call in the sandbox stops at the filter and empties it; a thread started
    /// since inherits its parent's umask and is read anew. (A thread id reused after the kernel's pid
    /// space wrapped, 4 million threads later, could meet an old entry: the cache is also emptied every
    /// 4,096 threads.)
    umasks: std::collections::HashMap<i32, u32>,
    /// The umask this thread has now, once it has set one ([`Mediator::apply_umask`]).
    applied_umask: Option<u32>,
    /// Threads that make the calls that may wait (`connect`, `bind`) and answer for them.
    workers: Workers,
    findings: Findings,
    /// The mediator's own authority over the caller: the host's `/proc` (see [`view`]).
    host: HostProc,
    /// The sandbox's own view, where every path the agent names is resolved (see [`view`]).
    view: AgentView,
    /// The callers' ids in the sandbox's PID namespace, for its `/proc`.
    ns_ids: NsIds,
}

/// Which of a list of directories ([`Mediator::create_dirs`], [`Mediator::roots`]) were found still at
/// their path (by device and inode) since the last call that could have put another directory there,
/// and not long ago: a `stat` of each for every creation was a tenth of a mediated creation's cost. Only
/// a directory made, renamed or linked in its place replaces one (a program cannot mount), and each of
/// those calls stops at the filter and forgets what was seen; a change from outside the sandbox is
/// noticed within [`SeenInPlace::FOR`]. For `create_dirs` never a question of security: a creation let
/// through goes to Landlock, which knows only the directory that had the name at the start. For `roots`
/// the directory the mediator makes a name in is one the run was granted at its start, by Landlock
/// too; only a user's own rename outside the sandbox within that time could make the name land in it
/// where it now lies.
#[derive(Default)]
struct SeenInPlace {
    seen: Vec<usize>,
    since: Option<std::time::Instant>,
}

impl SeenInPlace {
    const FOR: std::time::Duration = std::time::Duration::from_millis(100);

    /// Whether directory `index` is still at its path: seen lately, or `still_there` now (then
    /// remembered).
    fn holds(&mut self, index: usize, still_there: impl FnOnce() -> bool) -> bool {
        if self.since.is_some_and(|t| t.elapsed() > Self::FOR) {
            self.forget();
        }
        if self.seen.contains(&index) {
            return true;
        }
        if !still_there() {
            return false;
        }
        if self.seen.is_empty() {
            self.since = Some(std::time::Instant::now());
        }
        self.seen.push(index);
        true
    }

    fn forget(&mut self) {
        self.seen.clear();
        self.since = None;
    }
}

/// The paths of directory descriptors a caller keeps using (`tar` creates every file with
/// `openat(dirfd, ...)`), so that choosing a creation's road costs a `kcmp` (about 1 us here) instead of
/// a `readlink` of `/proc/<pid>/fd/<fd>` (4 to 6 us, a sixth of a mediated creation). An entry holds a
/// duplicate of the caller's descriptor: `kcmp` finding the caller's descriptor to be that same open
/// file means it is still that directory, whatever the caller closed or opened since. A descriptor is
/// taken only when the same one is used twice in a row, so that a program that opens a directory for
/// each name it makes pays little for it (taking one costs about 2 us more than a `readlink`). Never a
/// question of security: the path only chooses the road ([`Mediator::kernel_may_create`]), and on the
/// road it picks the kernel's Landlock rules decide. Holding a directory's open description keeps a
/// `flock` taken on it after the caller closes its own descriptor, until the paths are next forgotten
/// (below); a program would have to lock a directory and make names through that same
/// descriptor for that to matter. But the path must be the directory's: the paths are
/// forgotten whenever a call could have moved or replaced a directory (`rename`, `mkdir`, `symlink`,
/// `link`, each stopped at the filter; see [`puts_a_directory_in_place`]) and after
/// [`SeenInPlace::FOR`], for changes made from outside the sandbox.
#[derive(Default)]
struct DirfdPaths {
    /// This process's pid, read once.
    me: Option<i32>,
    entries: Vec<DirfdPath>,
    /// When the oldest of `entries` was taken.
    since: Option<std::time::Instant>,
    /// The last descriptor looked up that was not in `entries`: (pid, fd).
    last_missed: Option<(i32, i32)>,
    /// Descriptors found to name another file before their entry was used once: taken no more.
    churning: Vec<(i32, i32)>,
    /// Where the next entry goes once `entries` is full.
    next: usize,
}

struct DirfdPath {
    pid: i32,
    fd: i32,
    held: OwnedFd,
    path: Vec<u8>,
    used: bool,
}

impl DirfdPaths {
    const ENTRIES: usize = 8;

    /// The path of the caller's directory descriptor `fd`, when it is one the caller keeps using (see
    /// the type); `None` for the caller to read it from `/proc` itself.
    fn path_of(&mut self, call: &Call, fd: i32, host: &HostProc) -> Option<Vec<u8>> {
        if fd < 0 {
            return None;
        }
        if self.since.is_some_and(|t| t.elapsed() > SeenInPlace::FOR) {
            self.forget();
        }
        let me = *self.me.get_or_insert_with(|| std::process::id() as i32);
        let key = (call.pid, fd);
        if let Some(at) = self.entries.iter().position(|e| (e.pid, e.fd) == key) {
            let e = &mut self.entries[at];
            if sys::same_open_file(me, e.held.as_raw_fd(), call.pid, fd) {
                e.used = true;
                return Some(e.path.clone());
            }
            // The number names another file now. Taken again when used twice in a row, unless it
            // never served: a program that opens a directory for each name it makes would pay for
            // taking each one.
            if !e.used && self.churning.len() < Self::ENTRIES * 8 {
                self.churning.push(key);
            }
            self.entries.swap_remove(at);
        }
        if self.last_missed.replace(key) != Some(key) || self.churning.contains(&key) {
            return None;
        }
        let held = call.descriptor(host, fd).ok()?;
        // Only a directory: holding a FIFO's or a file's open description would keep what its closing
        // does (a reader's end of file, a `flock`) from happening when the caller closes it.
        if !sys::is_dir(held.as_fd()) {
            if self.churning.len() < Self::ENTRIES * 8 {
                self.churning.push(key);
            }
            return None;
        }
        let path = host
            .own_fd_link(held.as_raw_fd())
            .filter(|p| p.starts_with(b"/"))?;
        let entry = DirfdPath {
            pid: call.pid,
            fd,
            held,
            path: path.clone(),
            used: false,
        };
        if self.entries.is_empty() {
            self.since = Some(std::time::Instant::now());
        }
        if self.entries.len() < Self::ENTRIES {
            self.entries.push(entry);
        } else {
            self.entries[self.next] = entry;
            self.next = (self.next + 1) % Self::ENTRIES;
        }
        Some(path)
    }

    /// Drops every path (see the type).
    fn forget(&mut self) {
        self.entries.clear();
        self.since = None;
        self.next = 0;
    }
}

/// A directory the mediator holds open, by the path it had and its (device, inode) then.
struct HeldDir {
    path: PathBuf,
    fd: OwnedFd,
    id: (u64, u64),
}

impl HeldDir {
    /// Whether its path still names it: a writable tree removed (or renamed away) and made again during
    /// the run is another directory, which creations by that path must not reach through this one.
    fn still_at_its_path(&self) -> bool {
        identity(&self.path) == Some(self.id)
    }
}

/// The (device, inode) a path names now, not following a final symlink.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Waits up to `timeout_ms` (-1: until something happens) for the listener to have a notification;
/// `false` when every process under the filter has exited (POLLHUP and nothing to read), or the listener
/// is unusable (never expected: the loop must not spin on it).
fn wait_for_notification(listener: RawFd, timeout_ms: i32) -> bool {
    loop {
        let mut p = [libc::pollfd {
            fd: listener,
            events: libc::POLLIN,
            revents: 0,
        }];
        match sys::poll(&mut p, timeout_ms) {
            Ok(_) if p[0].revents & libc::POLLIN != 0 => return true,
            Ok(_) if p[0].revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 => {
                return false;
            }
            // Interrupted, or nothing yet when only looking.
            Ok(_) if timeout_ms == 0 => return true,
            Ok(_) => continue,
            Err(_) => return true,
        }
    }
}

/// Whether a call can put a directory where another was (see [`SeenInPlace`]).
fn puts_a_directory_in_place(nr: libc::c_long) -> bool {
    match nr {
        libc::SYS_mkdirat
        | libc::SYS_renameat
        | libc::SYS_renameat2
        | libc::SYS_symlinkat
        | libc::SYS_linkat => true,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_mkdir | libc::SYS_rename | libc::SYS_symlink | libc::SYS_link => true,
        _ => false,
    }
}

/// A result for the caller: a value, an errno, or a descriptor to install.
enum Answer {
    /// Let the call proceed in the kernel, as the caller: it creates a name where Landlock lets the
    /// caller create any name, and no name-based rule applies there.
    Continue,
    /// Another thread answers (a `connect` that may block).
    Pending,
    Value(i64),
    Errno(i32),
    Fd {
        fd: OwnedFd,
        cloexec: bool,
    },
}

fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

impl Mediator<'_> {
    /// Answers notifications until every process under the filter has exited. With `blocking_recv`
    /// (Linux 6.6 and later, where a waiting `RECV` also returns when the filter's last user exits) it
    /// waits in `RECV` itself: a `poll` first cost a system call and a wake-up per mediated call, a
    /// tenth of its cost. Older kernels wake only `poll` then.
    fn serve(&mut self, listener: &OwnedFd, blocking_recv: bool) {
        let fd = listener.as_raw_fd();
        loop {
            if !blocking_recv && !wait_for_notification(fd, -1) {
                return;
            }
            let n = match sys::notif_recv(fd) {
                Ok(n) => n,
                // ENOENT: the caller died (or was interrupted) before we read it, or (blocking) the
                // filter has no user left; EINTR.
                Err(_) if blocking_recv && !wait_for_notification(fd, 0) => return,
                Err(_) => continue,
            };
            let answer = self.answer(fd, &n);
            let _ = match answer {
                Answer::Continue => sys::notif_continue(fd, n.id),
                Answer::Pending => Ok(()),
                Answer::Value(v) => sys::notif_send(fd, n.id, Ok(v)),
                Answer::Errno(e) => sys::notif_send(fd, n.id, Err(e)),
                Answer::Fd { fd: file, cloexec } => {
                    match sys::notif_addfd_send(fd, n.id, file.as_raw_fd(), cloexec) {
                        Ok(()) => Ok(()),
                        Err(e) => sys::notif_send(fd, n.id, Err(errno(&e))),
                    }
                }
            };
        }
    }

    fn answer(&mut self, listener: RawFd, n: &libc::seccomp_notif) -> Answer {
        let pid = n.pid as i32;
        let a = n.data.args;
        let fd_arg = |v: u64| v as i32;
        let call = Call {
            pid,
            id: n.id,
            listener,
        };
        self.findings.mediated += 1;
        if n.data.nr as libc::c_long == libc::SYS_umask {
            self.umasks.clear();
            return Answer::Continue;
        }
        if puts_a_directory_in_place(n.data.nr as libc::c_long) {
            self.create_dirs_seen.forget();
            self.roots_seen.forget();
            self.dirfds.forget();
        }
        // Creations where no name-based rule applies proceed in the kernel: Landlock lets the caller create
        // any name there and nowhere else, so whatever the path says by the time the kernel reads it
        // again, the kernel's answer is the policy's. The path is only read to pick this road.
        let created = match n.data.nr as libc::c_long {
            libc::SYS_openat | libc::SYS_mkdirat | libc::SYS_mknodat => Some((fd_arg(a[0]), a[1])),
            libc::SYS_symlinkat => Some((fd_arg(a[1]), a[2])),
            #[cfg(target_arch = "x86_64")]
            libc::SYS_open | libc::SYS_creat | libc::SYS_mkdir | libc::SYS_mknod => {
                Some((libc::AT_FDCWD, a[0]))
            }
            #[cfg(target_arch = "x86_64")]
            libc::SYS_symlink => Some((libc::AT_FDCWD, a[1])),
            _ => None,
        };
        // The path is read once, without checking the caller: it only chooses the road, and each road
        // that acts on it checks first or relies on Landlock.
        if let Some((dirfd, path_ptr)) = created
            && let Ok(path) = call.read_path_unchecked(path_ptr)
            && let Some((dir, name)) = self.as_written(&call, dirfd, &path)
        {
            if self.kernel_may_create(&dir, &name) {
                return Answer::Continue;
            }
            let direct = match n.data.nr as libc::c_long {
                libc::SYS_openat => Some(Direct::Open {
                    flags: a[2] as i32,
                    mode: a[3] as u32,
                }),
                #[cfg(target_arch = "x86_64")]
                libc::SYS_open => Some(Direct::Open {
                    flags: a[1] as i32,
                    mode: a[2] as u32,
                }),
                libc::SYS_mkdirat => Some(Direct::Mkdir { mode: a[2] as u32 }),
                #[cfg(target_arch = "x86_64")]
                libc::SYS_mkdir => Some(Direct::Mkdir { mode: a[1] as u32 }),
                _ => None,
            };
            if let Some(what) = direct
                && !path.ends_with(b"/")
                && let Some(answer) = self.direct(&call, &dir, &name, what)
            {
                return answer;
            }
        }
        let r = match n.data.nr as libc::c_long {
            libc::SYS_openat => self.open(&call, fd_arg(a[0]), a[1], a[2] as i32, a[3] as u32),
            #[cfg(target_arch = "x86_64")]
            libc::SYS_open => self.open(&call, libc::AT_FDCWD, a[0], a[1] as i32, a[2] as u32),
            #[cfg(target_arch = "x86_64")]
            libc::SYS_creat => self.open(
                &call,
                libc::AT_FDCWD,
                a[0],
                libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
                a[1] as u32,
            ),
            libc::SYS_mkdirat => self.make(&call, "mkdir", fd_arg(a[0]), a[1], a[2] as u32, None),
            #[cfg(target_arch = "x86_64")]
            libc::SYS_mkdir => self.make(&call, "mkdir", libc::AT_FDCWD, a[0], a[1] as u32, None),
            libc::SYS_mknodat => {
                self.make(&call, "mknod", fd_arg(a[0]), a[1], a[2] as u32, Some(a[3]))
            }
            #[cfg(target_arch = "x86_64")]
            libc::SYS_mknod => self.make(
                &call,
                "mknod",
                libc::AT_FDCWD,
                a[0],
                a[1] as u32,
                Some(a[2]),
            ),
            libc::SYS_symlinkat => self.symlink(&call, a[0], fd_arg(a[1]), a[2]),
            #[cfg(target_arch = "x86_64")]
            libc::SYS_symlink => self.symlink(&call, a[0], libc::AT_FDCWD, a[1]),
            libc::SYS_linkat => {
                self.link(&call, fd_arg(a[0]), a[1], fd_arg(a[2]), a[3], a[4] as i32)
            }
            #[cfg(target_arch = "x86_64")]
            libc::SYS_link => self.link(&call, libc::AT_FDCWD, a[0], libc::AT_FDCWD, a[1], 0),
            libc::SYS_renameat2 => {
                self.rename(&call, fd_arg(a[0]), a[1], fd_arg(a[2]), a[3], a[4] as u32)
            }
            libc::SYS_renameat => self.rename(&call, fd_arg(a[0]), a[1], fd_arg(a[2]), a[3], 0),
            #[cfg(target_arch = "x86_64")]
            libc::SYS_rename => self.rename(&call, libc::AT_FDCWD, a[0], libc::AT_FDCWD, a[1], 0),
            libc::SYS_connect => self.connect(&call, fd_arg(a[0]), a[1], a[2] as usize),
            libc::SYS_bind => self.bind(&call, fd_arg(a[0]), a[1], a[2] as usize),
            _ => Err(libc::ENOSYS),
        };
        match r {
            Ok(answer) => answer,
            Err(PENDING) => Answer::Pending,
            Err(e) => Answer::Errno(e),
        }
    }

    /// Whether a name, as written ([`Mediator::as_written`]), lies in a directory where Landlock lets the
    /// caller create names itself. Never trusted beyond choosing the road.
    fn kernel_may_create(&mut self, dir: &Path, name: &[u8]) -> bool {
        // `> /dev/null` opens an existing device with O_CREAT: the kernel opens it under Landlock's rule
        // for it, and cannot create anything there (no rule on `/dev` lets it).
        if dir == Path::new("/dev") && DEVICES_OPENED_FOR_WRITING.contains(&name) {
            return true;
        }
        // Landlock's rule is on the directory that had the name at the start: one removed and made again
        // since (`rm -rf out && mkdir out`) has no rule of its own, and the kernel would refuse.
        for (index, (d, id)) in self.create_dirs.iter().enumerate() {
            if !crate::plan::is_within(dir, d) {
                continue;
            }
            if self
                .create_dirs_seen
                .holds(index, || identity(d) == Some(*id))
            {
                return true;
            }
        }
        false
    }

    /// The directory and final name a path names as written (joined to the caller's working directory
    /// or `dirfd`), with `.` and repeated `/` dropped; `None` for `..`, `/proc` and what cannot be read.
    /// Nothing here is trusted: it only chooses a road, or is handed to `openat2` that refuses any
    /// symlink on the way (see [`Mediator::direct`]).
    fn as_written(&mut self, call: &Call, dirfd: i32, path: &[u8]) -> Option<(PathBuf, Vec<u8>)> {
        let mut full = if path.starts_with(b"/") {
            Vec::new()
        } else if let Some(base) = self.dirfds.path_of(call, dirfd, &self.host) {
            base
        } else {
            let link = call.dir_link(dirfd)?;
            match sys::readlink_at(self.host.fd(), &cstr(link.as_bytes())) {
                Ok(base) if base.starts_with(b"/") => base,
                _ => return None,
            }
        };
        full.push(b'/');
        full.extend_from_slice(path);
        let parts: Vec<&[u8]> = full
            .split(|b| *b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .collect();
        if parts.iter().any(|c| *c == b"..") || parts.first().is_some_and(|c| *c == b"proc") {
            return None;
        }
        let (name, parent) = parts.split_last()?;
        let mut dir = PathBuf::from("/");
        for c in parent {
            dir.push(OsStr::from_bytes(c));
        }
        Some((dir, name.to_vec()))
    }

    /// The direct road for a creation beneath a writable root the mediator holds open: `openat2`
    /// refusing symlinks, magic links and mount crossings opens exactly the path as written, so the
    /// policy's decision for that path is the decision for what is made. `None` sends the call down the
    /// general road (a symlink or a mount on the way, a refusal to explain, anything unusual).
    fn direct(&mut self, call: &Call, dir: &Path, name: &[u8], what: Direct) -> Option<Answer> {
        let mut deepest: Option<usize> = None;
        for (index, r) in self.roots.iter().enumerate() {
            if !crate::plan::is_within(dir, &r.path)
                || deepest.is_some_and(|d| {
                    self.roots[d].path.as_os_str().len() >= r.path.as_os_str().len()
                })
            {
                continue;
            }
            if self.roots_seen.holds(index, || r.still_at_its_path()) {
                deepest = Some(index);
            }
        }
        let held = &self.roots[deepest?];
        let (root, root_fd) = (&held.path, &held.fd);
        let target = dir.join(OsStr::from_bytes(name));
        if !self.allows(&target, Access::Write) {
            return None;
        }
        let rel = target.strip_prefix(root).ok()?;
        let root_fd = root_fd.as_raw_fd();
        let umask = self.umask_of(call);
        // The path was read without checking the caller: check now, before acting on it.
        call.still_valid().ok()?;
        match what {
            Direct::Open { flags, mode } => {
                let rel = cstr(rel.as_os_str().as_bytes());
                if flags & libc::O_EXCL == 0 {
                    // Make the file (empty, as the open would), then let the caller's own open proceed
                    // in the kernel: it finds the file there. Handing a descriptor over
                    // (SECCOMP_IOCTL_NOTIF_ADDFD) would cost a second round trip with the caller. The
                    // make is exclusive, so nothing that exists (a FIFO, a device) is opened here; what
                    // exists is the caller's to open. A path rewritten meanwhile reaches only what
                    // Landlock lets the caller open or create itself, as on the kernel's road.
                    self.apply_umask(umask);
                    let made = sys::openat2_exact(
                        root_fd,
                        &rel,
                        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                        mode,
                    );
                    return match made {
                        Ok(_) => Some(Answer::Continue),
                        // What exists is the caller's to open, unless it is a symlink (`O_EXCL` answers
                        // EEXIST for a dangling one too): following it is the general road's, which
                        // judges where it leads (issue 35: a dangling link in a directory where names
                        // matter was left to the kernel, which Landlock refused).
                        Err(e) if errno(&e) == libc::EEXIST => {
                            let is_link = sys::openat2_exact(
                                root_fd,
                                &rel,
                                libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                                0,
                            )
                            .ok()
                            .and_then(|f| sys::fstat_kind(f.as_raw_fd()).ok())
                                == Some(libc::S_IFLNK);
                            (!is_link).then_some(Answer::Continue)
                        }
                        Err(_) => None,
                    };
                }
                let cloexec = flags & libc::O_CLOEXEC != 0;
                let flags = flags | libc::O_CLOEXEC | libc::O_NOFOLLOW;
                self.apply_umask(umask);
                let file = sys::openat2_exact(root_fd, &rel, flags, mode);
                Some(Answer::Fd {
                    fd: file.ok()?,
                    cloexec,
                })
            }
            Direct::Mkdir { mode } => {
                let parent = rel.parent().unwrap_or(Path::new(""));
                let parent = if parent.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    parent
                };
                let parent_fd = sys::openat2_exact(
                    root_fd,
                    &cstr(parent.as_os_str().as_bytes()),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                    0,
                )
                .ok()?;
                self.apply_umask(umask);
                let made = sys::mkdir_at(parent_fd.as_raw_fd(), &cstr(name), mode);
                match made {
                    Ok(()) => Some(Answer::Value(0)),
                    Err(e) if errno(&e) == libc::EEXIST => Some(Answer::Errno(libc::EEXIST)),
                    Err(_) => None,
                }
            }
        }
    }

    fn refuse(&mut self, call: &'static str, path: &Path, access: Access) -> i32 {
        self.refuse_for(call, path, access, RefusalReason::Policy)
    }

    fn refuse_for(
        &mut self,
        call: &'static str,
        path: &Path,
        access: Access,
        reason: RefusalReason,
    ) -> i32 {
        let f = &mut self.findings;
        f.refused += 1;
        if f.refusals.len() < MAX_RECORDED {
            f.refusals.push(Refusal {
                call,
                path: path.to_path_buf(),
                access,
                reason,
            });
        }
        libc::EACCES
    }

    /// Whether the policy lets the program have `access` to `path` (a path inside the sandbox).
    fn allows(&self, path: &Path, access: Access) -> bool {
        if self.config.private.iter().any(|p| path.starts_with(p)) {
            return true;
        }
        self.config
            .policy
            .decide(&CanonicalPath::assume_canonical(path.to_path_buf()), access)
            .is_allow()
    }

    fn check(&mut self, call: &'static str, path: &Path, access: Access) -> Result<(), i32> {
        if self.allows(path, access) {
            Ok(())
        } else {
            Err(self.refuse(call, path, access))
        }
    }

    fn open(
        &mut self,
        call: &Call,
        dirfd: i32,
        path_ptr: u64,
        flags: i32,
        mode: u32,
    ) -> Result<Answer, i32> {
        let path = call.read_path(path_ptr)?;
        let follow = flags & (libc::O_NOFOLLOW | libc::O_EXCL) == 0;
        let cloexec = flags & libc::O_CLOEXEC != 0;
        let wants_write = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
        let access = if wants_write {
            Access::Write
        } else {
            Access::Read
        };
        let r = self.resolve(call, "open", access, dirfd, &path, follow)?;
        if let Some(held) = &r.held {
            // `/proc/self/fd/N` and the `/dev/std*` links to it: a reopen of a descriptor the caller
            // holds. Nothing is created, and the file is judged before it is opened again (an `O_TRUNC`
            // is a write). An object without a path (a pipe, a socket) is the caller's already.
            if sys::is_dir(held.as_fd()) {
                return Err(libc::EISDIR);
            }
            let mut flags = flags;
            match self.host.own_fd_path(held.as_raw_fd()) {
                // In the sandbox's view: judged by its path, as Landlock judges the caller's own reopen.
                Some(real) if self.view.holds_in_view(held) => self.check("open", &real, access)?,
                // Handed to the program from outside its view (a redirection of the user's): reopened
                // with no more access than the descriptor it holds. An append-only one (`>> log`)
                // stays so: `> /dev/stdout` appends rather than being refused (unconfined it would
                // truncate the log, which the program was not given).
                Some(real) => {
                    let held_flags = sys::status_flags(held.as_raw_fd());
                    if held_flags.is_some_and(|h| h & libc::O_APPEND != 0) {
                        flags = (flags & !libc::O_TRUNC) | libc::O_APPEND;
                    }
                    if !within_access(held_flags, flags) {
                        return Err(self.refuse_for(
                            "open",
                            &real,
                            access,
                            RefusalReason::BeyondHeld,
                        ));
                    }
                }
                // Or an object without a path (a pipe, a socket): the caller's already.
                None => {}
            }
            let file = self
                .host
                .reopen_own(held.as_raw_fd(), flags)
                .map_err(|e| errno(&e))?;
            return Ok(Answer::Fd { fd: file, cloexec });
        }
        let kind = sys::lstat_at(r.dir.as_raw_fd(), &r.name);
        // As the kernel: O_CREAT never opens a directory, and a trailing `/` never creates a file.
        if r.is_dot || kind.as_ref().is_ok_and(|k| *k == libc::S_IFDIR) {
            return Err(libc::EISDIR);
        }
        if r.trailing_slash && kind.is_err() {
            return Err(libc::EISDIR);
        }
        let exists = kind.is_ok();
        if exists && flags & libc::O_EXCL != 0 {
            return Err(libc::EEXIST);
        }
        let (flags, name) = if exists {
            // Not a creation: the open's own access, and O_CREAT dropped so that a file removed in the
            // meantime is not created unchecked.
            self.check("open", &r.path, access)?;
            (flags & !libc::O_CREAT, &r.name)
        } else {
            self.check("open", &r.path, Access::Write)?;
            (flags, &r.name)
        };
        // The final symlink, if any, was followed above: never follow one planted since.
        let umask = self.umask_of(call);
        self.apply_umask(umask);
        let opened = sys::openat(
            r.dir.as_raw_fd(),
            name,
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode,
        );
        let file = opened.map_err(|e| errno(&e))?;
        Ok(Answer::Fd { fd: file, cloexec })
    }

    /// `mkdir` (no device) or `mknod` (with one).
    fn make(
        &mut self,
        call: &Call,
        name: &'static str,
        dirfd: i32,
        path_ptr: u64,
        mode: u32,
        dev: Option<u64>,
    ) -> Result<Answer, i32> {
        let path = call.read_path(path_ptr)?;
        let r = self.resolve(call, name, Access::Write, dirfd, &path, false)?;
        self.check_new_name(name, &r)?;
        let umask = self.umask_of(call);
        self.apply_umask(umask);
        let made = match dev {
            None => sys::mkdir_at(r.dir.as_raw_fd(), &r.name, mode),
            Some(dev) => sys::mknod_at(r.dir.as_raw_fd(), &r.name, mode, dev),
        };
        made.map_err(|e| errno(&e))?;
        Ok(Answer::Value(0))
    }

    fn symlink(
        &mut self,
        call: &Call,
        target_ptr: u64,
        dirfd: i32,
        path_ptr: u64,
    ) -> Result<Answer, i32> {
        // The target is only text: what it names is checked whenever it is followed.
        let target = call.read_path(target_ptr)?;
        let path = call.read_path(path_ptr)?;
        let r = self.resolve(call, "symlink", Access::Write, dirfd, &path, false)?;
        self.check_new_name("symlink", &r)?;
        sys::symlink_at(&cstr(&target), r.dir.as_raw_fd(), &r.name).map_err(|e| errno(&e))?;
        Ok(Answer::Value(0))
    }

    fn link(
        &mut self,
        call: &Call,
        from_dirfd: i32,
        from_ptr: u64,
        to_dirfd: i32,
        to_ptr: u64,
        flags: i32,
    ) -> Result<Answer, i32> {
        if flags & libc::AT_EMPTY_PATH != 0 {
            // Linking a descriptor needs CAP_DAC_READ_SEARCH, which the program does not have.
            return Err(libc::ENOENT);
        }
        let follow = flags & libc::AT_SYMLINK_FOLLOW != 0;
        let (f, t) = self.both_ends(
            call,
            "link",
            (from_dirfd, from_ptr, follow),
            (to_dirfd, to_ptr, true),
        )?;
        sys::link_at(f.dir.as_raw_fd(), &f.name, t.dir.as_raw_fd(), &t.name)
            .map_err(|e| errno(&e))?;
        Ok(Answer::Value(0))
    }

    /// The two ends of a `link` or `rename`, resolved (the first following a final symlink when asked)
    /// and checked: a new name for a file is a way to write it, so both ends must be writable. When the
    /// new name must not exist (`link`, `RENAME_NOREPLACE`), an existing one answers EEXIST first.
    fn both_ends(
        &mut self,
        call: &Call,
        name: &'static str,
        (from_dirfd, from_ptr, follow): (i32, u64, bool),
        (to_dirfd, to_ptr, new_name): (i32, u64, bool),
    ) -> Result<(Resolved, Resolved), i32> {
        let from = call.read_path(from_ptr)?;
        let to = call.read_path(to_ptr)?;
        let f = self.resolve(call, name, Access::Write, from_dirfd, &from, follow)?;
        let t = self.resolve(call, name, Access::Write, to_dirfd, &to, false)?;
        if f.held.is_some() || t.held.is_some() {
            return Err(libc::EXDEV);
        }
        if !f.is_dot {
            self.check(name, &f.path, Access::Write)?;
        }
        if new_name {
            self.check_new_name(name, &t)?;
        } else if !t.is_dot {
            self.check(name, &t.path, Access::Write)?;
        }
        Ok((f, t))
    }

    /// A name about to be made (mkdir, mknod, symlink, link): the kernel answers EEXIST for an existing
    /// name before it asks whether the directory is writable, so the mediator does too (`mkdir -p` of an
    /// existing read-only directory, a home directory say, is not a refusal); else it must be writable.
    fn check_new_name(&mut self, call: &'static str, r: &Resolved) -> Result<(), i32> {
        if r.held.is_some() {
            return Err(libc::EEXIST);
        }
        if r.is_dot {
            return Ok(());
        }
        if sys::lstat_at(r.dir.as_raw_fd(), &r.name).is_ok() {
            return Err(libc::EEXIST);
        }
        self.check(call, &r.path, Access::Write)
    }

    fn rename(
        &mut self,
        call: &Call,
        from_dirfd: i32,
        from_ptr: u64,
        to_dirfd: i32,
        to_ptr: u64,
        flags: u32,
    ) -> Result<Answer, i32> {
        let (f, t) = self.both_ends(
            call,
            "rename",
            (from_dirfd, from_ptr, false),
            (to_dirfd, to_ptr, flags & libc::RENAME_NOREPLACE != 0),
        )?;
        sys::rename_at(
            f.dir.as_raw_fd(),
            &f.name,
            t.dir.as_raw_fd(),
            &t.name,
            flags,
        )
        .map_err(|e| errno(&e))?;
        Ok(Answer::Value(0))
    }

    fn connect(
        &mut self,
        call: &Call,
        sockfd: i32,
        addr_ptr: u64,
        len: usize,
    ) -> Result<Answer, i32> {
        let (family, addr) = call.socket_address(addr_ptr, len)?;
        let sock = call.descriptor(&self.host, sockfd)?;
        if family != libc::AF_UNIX {
            // Another family reaches only what the network namespace holds (the socket's own, whichever
            // process connects it); the connect may take long, so it is made on its own thread.
            let nonblocking = sys::is_nonblocking(sock.as_raw_fd());
            return self.socket_call(call, nonblocking, move || {
                sys::connect_raw(sock.as_raw_fd(), &addr)
            });
        }
        let Some(path) = unix_path(&addr) else {
            // Abstract or unnamed: the run's own when it has its own network namespace.
            if !self.config.private_net {
                return Err(self.refuse("connect", Path::new("@abstract"), Access::Write));
            }
            sys::connect_raw(sock.as_raw_fd(), &addr).map_err(|e| errno(&e))?;
            return Ok(Answer::Value(0));
        };
        let r = self.resolve(call, "connect", Access::Write, libc::AT_FDCWD, path, true)?;
        if r.held.is_some() || r.is_dot {
            return Err(libc::ECONNREFUSED);
        }
        // Connecting is writing to the socket: it needs write on the socket's path.
        self.check("connect", &r.path, Access::Write)?;
        // Connect to exactly the file checked: opened without following a symlink planted since, then
        // reached through its descriptor's magic link in the host's `/proc` (which also lifts the 108-byte
        // limit of `sun_path`).
        let file = sys::openat(
            r.dir.as_raw_fd(),
            &r.name,
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0,
        )
        .map_err(|e| errno(&e))?;
        if sys::fstat_kind(file.as_raw_fd()).map_err(|e| errno(&e))? != libc::S_IFSOCK {
            return Err(libc::ECONNREFUSED);
        }
        // Made from the host's `/proc` (this process's descriptors are there), which is the mediator's
        // working directory; a worker's is its own, so it goes there first.
        let proc = self.host.fd();
        let nonblocking = sys::is_nonblocking(sock.as_raw_fd());
        self.socket_call(call, nonblocking, move || {
            let name = format!("thread-self/fd/{}", file.as_raw_fd());
            sys::fchdir(proc)?;
            sys::connect_unix_relative(sock.as_raw_fd(), name.as_bytes())
        })
    }

    /// Makes a socket call for the caller: at once when it cannot wait (a non-blocking socket), else on a
    /// worker, which answers for it (a listener may be slow to accept).
    fn socket_call(
        &mut self,
        call: &Call,
        at_once: bool,
        make: impl FnOnce() -> std::io::Result<()> + Send + 'static,
    ) -> Result<Answer, i32> {
        if at_once {
            make().map_err(|e| errno(&e))?;
            return Ok(Answer::Value(0));
        }
        let (listener, id) = (call.listener, call.id);
        self.workers.run(move || {
            let r = make().map_err(|e| errno(&e));
            let _ = sys::notif_send(listener, id, r.map(|()| 0));
        });
        Err(PENDING)
    }

    /// `bind` gives a Unix socket a name in the filesystem: a creation like any other. Other families,
    /// abstract names, and names where the kernel may create any name proceed in the kernel.
    fn bind(&mut self, call: &Call, sockfd: i32, addr_ptr: u64, len: usize) -> Result<Answer, i32> {
        // Whatever the caller makes of the address later, the kernel binds as the caller, under Landlock,
        // which withholds the right to make a socket wherever a name matters.
        let Ok((libc::AF_UNIX, addr)) = call.socket_address(addr_ptr, len) else {
            return Ok(Answer::Continue);
        };
        let Some(path) = unix_path(&addr) else {
            return Ok(Answer::Continue);
        };
        let path = path.to_vec();
        if let Some((dir, name)) = self.as_written(call, libc::AT_FDCWD, &path)
            && self.kernel_may_create(&dir, &name)
        {
            return Ok(Answer::Continue);
        }
        let r = self.resolve(call, "bind", Access::Write, libc::AT_FDCWD, &path, false)?;
        if r.held.is_some() || r.is_dot || r.trailing_slash {
            return Err(libc::EINVAL);
        }
        self.check("bind", &r.path, Access::Write)?;
        let sock = call.descriptor(&self.host, sockfd)?;
        let umask = self.umask_of(call);
        // Bound from the directory checked, on a worker (its working directory and umask are its own).
        // The socket's own name is the last component only.
        self.socket_call(call, false, move || {
            sys::fchdir(r.dir.as_raw_fd())?;
            sys::umask(umask);
            sys::bind_unix_relative(sock.as_raw_fd(), r.name.as_bytes())
        })
    }

    /// Makes `umask` this thread's umask for the creation it performs next. It stays until another is
    /// needed: nothing else this thread does creates a file (workers have their own), and setting and
    /// restoring it cost two system calls a creation.
    fn apply_umask(&mut self, umask: u32) {
        if self.applied_umask != Some(umask) {
            sys::umask(umask);
            self.applied_umask = Some(umask);
        }
    }

    /// The caller's umask (see [`Mediator::umasks`]).
    fn umask_of(&mut self, call: &Call) -> u32 {
        if let Some(umask) = self.umasks.get(&call.pid) {
            return *umask;
        }
        if self.umasks.len() >= 4096 {
            self.umasks.clear();
        }
        let umask = call.umask(&self.host);
        self.umasks.insert(call.pid, umask);
        umask
    }

    /// Resolves `path` in the sandbox's own view ([`AgentView::resolve`]); a step the mediator refuses to
    /// take for the caller is recorded as a refusal of `access` by `what`.
    fn resolve(
        &mut self,
        call: &Call,
        what: &'static str,
        access: Access,
        dirfd: i32,
        path: &[u8],
        follow: bool,
    ) -> Result<Resolved, i32> {
        match self
            .view
            .resolve(&self.host, call, &mut self.ns_ids, dirfd, path, follow)
        {
            Ok(r) => Ok(r),
            Err(Stop::Errno(e)) => Err(e),
            Err(Stop::Refused(at, reason)) => Err(self.refuse_for(what, &at, access, reason)),
        }
    }
}

/// A pool of threads for calls that may wait: one is started only when none is idle, and each stays for
/// the next call (starting a thread per call cost more than the call).
#[derive(Default)]
struct Workers {
    queue: Option<std::sync::mpsc::Sender<Job>>,
    jobs: Arc<std::sync::Mutex<Option<std::sync::mpsc::Receiver<Job>>>>,
    idle: Arc<std::sync::atomic::AtomicUsize>,
}

type Job = Box<dyn FnOnce() + Send>;

impl Workers {
    fn run(&mut self, job: impl FnOnce() + Send + 'static) {
        use std::sync::atomic::Ordering;
        let queue = self.queue.get_or_insert_with(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            if let Ok(mut jobs) = self.jobs.lock() {
                *jobs = Some(rx);
            }
            tx
        });
        if self.idle.load(Ordering::Acquire) == 0 {
            let (jobs, idle) = (self.jobs.clone(), self.idle.clone());
            std::thread::spawn(move || {
                // Each worker has a working directory of its own: the calls it makes set it.
                if sys::unshare(libc::CLONE_FS).is_err() {
                    return;
                }
                loop {
                    idle.fetch_add(1, Ordering::AcqRel);
                    let next = match jobs.lock() {
                        Ok(rx) => rx.as_ref().and_then(|rx| rx.recv().ok()),
                        Err(_) => None,
                    };
                    idle.fetch_sub(1, Ordering::AcqRel);
                    match next {
                        Some(job) => job(),
                        None => return,
                    }
                }
            });
        }
        let _ = queue.send(Box::new(job));
    }
}

/// Whether an open with `flags` asks no more than a descriptor with status flags `held` gives: no
/// access mode it lacks, and, for an append-only one (`>> log`), appending still and never truncating.
fn within_access(held: Option<i32>, flags: i32) -> bool {
    let Some(held) = held.filter(|h| h & libc::O_PATH == 0) else {
        return false;
    };
    let wants_read = matches!(flags & libc::O_ACCMODE, libc::O_RDONLY | libc::O_RDWR);
    let wants_write = matches!(flags & libc::O_ACCMODE, libc::O_WRONLY | libc::O_RDWR)
        || flags & libc::O_TRUNC != 0;
    let has_read = matches!(held & libc::O_ACCMODE, libc::O_RDONLY | libc::O_RDWR);
    let has_write = matches!(held & libc::O_ACCMODE, libc::O_WRONLY | libc::O_RDWR);
    let append_kept =
        held & libc::O_APPEND == 0 || (flags & libc::O_APPEND != 0 && flags & libc::O_TRUNC == 0);
    (!wants_read || has_read) && (!wants_write || has_write) && append_kept
}

/// The path of a Unix socket address (up to its first NUL); `None` for an abstract or unnamed one.
fn unix_path(addr: &[u8]) -> Option<&[u8]> {
    let path = addr.get(2..)?;
    let end = path.iter().position(|b| *b == 0).unwrap_or(path.len());
    path.get(..end).filter(|p| !p.is_empty())
}

/// What the direct road makes ([`Mediator::direct`]).
#[derive(Debug, Clone, Copy)]
enum Direct {
    Open { flags: i32, mode: u32 },
    Mkdir { mode: u32 },
}

/// The standard devices a shell redirects output to (`/dev/null` above all).
const DEVICES_OPENED_FOR_WRITING: &[&[u8]] = &[b"null", b"zero", b"full"];

/// Not an errno: the answer is sent by another thread.
pub(crate) const PENDING: i32 = -1;

/// The notification being answered: whose it is and how to reach the caller.
struct Call {
    pid: i32,
    id: u64,
    listener: RawFd,
}

impl Call {
    /// Checks that the notification is still pending, so that what was read from `/proc/<pid>` or the
    /// caller's memory was the caller's and not a later process's with a reused pid.
    fn still_valid(&self) -> Result<(), i32> {
        if sys::notif_id_valid(self.listener, self.id) {
            Ok(())
        } else {
            Err(libc::ENOENT)
        }
    }

    /// A NUL-terminated string from the caller's memory, read once.
    fn read_path(&self, addr: u64) -> Result<Vec<u8>, i32> {
        let out = self.read_path_unchecked(addr)?;
        self.still_valid()?;
        Ok(out)
    }

    /// [`Call::read_path`] without checking that the caller is still the one that stopped: for choosing
    /// a road only.
    fn read_path_unchecked(&self, addr: u64) -> Result<Vec<u8>, i32> {
        let mut out = Vec::new();
        let mut chunk = [0u8; 256];
        let mut at = addr;
        while out.len() <= libc::PATH_MAX as usize {
            // Never read across a page boundary in one go: the next page may be unmapped.
            let room = 4096 - (at % 4096) as usize;
            let want = room.min(chunk.len());
            let n = sys::read_process_memory(self.pid, at, &mut chunk[..want])
                .map_err(|e| errno(&e))?;
            if n == 0 {
                return Err(libc::EFAULT);
            }
            if let Some(end) = chunk[..n].iter().position(|b| *b == 0) {
                out.extend_from_slice(&chunk[..end]);
                return Ok(out);
            }
            out.extend_from_slice(&chunk[..n]);
            at += n as u64;
        }
        Err(libc::ENAMETOOLONG)
    }

    /// The caller's directory for `dirfd` (its working directory for `AT_FDCWD`).
    fn dir(&self, host: &HostProc, dirfd: i32) -> Result<OwnedFd, i32> {
        let name = self.dir_link(dirfd).ok_or(libc::EBADF)?;
        let dir = sys::openat(
            host.fd(),
            &cstr(name.as_bytes()),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            0,
        )
        .map_err(|e| match errno(&e) {
            libc::ENOENT => libc::EBADF,
            other => other,
        })?;
        self.still_valid()?;
        Ok(dir)
    }

    /// The caller's own executable (`O_PATH`), through its `exe` link in the host's `/proc`.
    fn exe(&self, host: &HostProc) -> Result<OwnedFd, i32> {
        let exe = sys::openat(
            host.fd(),
            &cstr(format!("{}/exe", self.pid).as_bytes()),
            libc::O_PATH | libc::O_CLOEXEC,
            0,
        )
        .map_err(|e| errno(&e))?;
        self.still_valid()?;
        Ok(exe)
    }

    /// The caller's directory for `dirfd` as a link in `/proc` (`<pid>/cwd` for `AT_FDCWD`); `None` for
    /// a negative descriptor.
    fn dir_link(&self, dirfd: i32) -> Option<String> {
        if dirfd == libc::AT_FDCWD {
            Some(format!("{}/cwd", self.pid))
        } else {
            (dirfd >= 0).then(|| format!("{}/fd/{dirfd}", self.pid))
        }
    }

    /// A socket address from the caller's memory, and its family.
    fn socket_address(&self, addr: u64, len: usize) -> Result<(i32, Vec<u8>), i32> {
        if len < std::mem::size_of::<libc::sa_family_t>() || len > 128 {
            return Err(libc::EINVAL);
        }
        let mut bytes = vec![0u8; len];
        let got = sys::read_process_memory(self.pid, addr, &mut bytes).map_err(|e| errno(&e))?;
        if got != len {
            return Err(libc::EFAULT);
        }
        Ok((i32::from(u16::from_ne_bytes([bytes[0], bytes[1]])), bytes))
    }

    /// A duplicate of the caller's descriptor `fd` (the same open file).
    /// A seccomp notification names the calling thread, which in a multi-threaded program is rarely the
    /// leader of its group: a thread pidfd where the kernel has them, else the leader's.
    fn descriptor(&self, host: &HostProc, fd: i32) -> Result<OwnedFd, i32> {
        let pidfd = match sys::pidfd_open_thread(self.pid) {
            Err(e) if errno(&e) == libc::EINVAL => {
                let tgid = self
                    .status_field(host, "Tgid:")
                    .and_then(|v| v.parse().ok())
                    .ok_or(libc::ESRCH)?;
                sys::pidfd_open(tgid)
            }
            other => other,
        }
        .map_err(|e| errno(&e))?;
        let pidfd = OwnedGuard(pidfd);
        self.still_valid()?;
        sys::pidfd_getfd(pidfd.0, fd).map_err(|e| errno(&e))
    }

    /// The caller's umask (022 when it cannot be read), from the host's `/proc`.
    fn umask(&self, host: &HostProc) -> u32 {
        self.status_field(host, "Umask:")
            .and_then(|v| u32::from_str_radix(&v, 8).ok())
            .unwrap_or(0o022)
    }

    /// One field of the caller's `/proc/<tid>/status` (the host's `/proc`), trimmed.
    fn status_field(&self, host: &HostProc, field: &str) -> Option<String> {
        let file = sys::openat(
            host.fd(),
            &cstr(format!("{}/status", self.pid).as_bytes()),
            libc::O_RDONLY | libc::O_CLOEXEC,
            0,
        )
        .ok()?;
        let mut buf = [0u8; 4096];
        let n = sys::read(file.as_raw_fd(), &mut buf).unwrap_or(0);
        let text = String::from_utf8_lossy(buf.get(..n)?);
        text.lines()
            .find_map(|l| l.strip_prefix(field))
            .map(|v| v.trim().to_string())
    }
}

/// Closes a raw descriptor when dropped.
struct OwnedGuard(RawFd);

impl Drop for OwnedGuard {
    fn drop(&mut self) {
        sys::close(self.0);
    }
}

fn cstr(bytes: &[u8]) -> CString {
    // A NUL inside is impossible for what comes from the caller (read up to the first NUL) and from
    // readlink; should one appear, the name is cut there, which can only name less.
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    CString::new(&bytes[..end]).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::{Findings, Refusal, RefusalReason, wait_for_notification};
    use crate::sys;
    use std::path::PathBuf;
    use stockade_policy::Access;

    /// The serving loop goes on while something may still come, and stops, never spins, once nothing
    /// can: a pipe stands for the listener (readable, open but empty, hung up), and a number no
    /// descriptor has.
    #[test]
    fn waiting_tells_a_notification_from_the_end() {
        let (r, w) = sys::pipe().unwrap();
        assert!(wait_for_notification(r, 0), "open and empty: go on");
        sys::write_all(w, b"n").unwrap();
        assert!(wait_for_notification(r, -1), "something to read");
        let mut byte = [0u8; 1];
        sys::read(r, &mut byte).unwrap();
        sys::close(w);
        assert!(
            !wait_for_notification(r, -1),
            "hung up with nothing to read"
        );
        sys::close(r);
        // Not the closed number: another test's thread may have been given it since.
        assert!(!wait_for_notification(1 << 30, 0), "not a descriptor");
    }

    /// A name the program chose, newline and forged trailer included, comes back whole and ends nothing.
    #[test]
    fn the_report_survives_any_name() {
        let findings = Findings {
            refusals: vec![
                Refusal {
                    call: "open",
                    path: PathBuf::from("/p/x\nend 0 0\n"),
                    access: Access::Write,
                    reason: RefusalReason::Policy,
                },
                Refusal {
                    call: "bind",
                    path: PathBuf::from("/p/.mcp.json"),
                    access: Access::Write,
                    reason: RefusalReason::Policy,
                },
                Refusal {
                    call: "connect",
                    path: PathBuf::from("/proc/1/root"),
                    access: Access::Read,
                    reason: RefusalReason::OutsideOwnProc,
                },
            ],
            refused: 3,
            mediated: 9,
        };
        assert_eq!(
            Findings::parse(&findings.to_bytes()),
            Some(findings.clone())
        );
        // A report cut short (the mediator died) is no report.
        let bytes = findings.to_bytes();
        assert_eq!(Findings::parse(&bytes[..bytes.len() - 4]), None);
    }
}
