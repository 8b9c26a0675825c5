//! What runs inside the new namespaces: the init process that builds the private root, and the agent
//! process it forks, which drops every privilege and executes the program.
//!
//! Everything here runs in a child of a single-threaded supervisor. All strings are prepared beforehand;
//! the steps below are system calls plus the Landlock ruleset (which allocates, which is sound because the
//! child has exactly one thread).

use std::ffi::{CString, c_int};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::PathBuf;

use libc::c_char;

use crate::plan::LandlockGrant;
use crate::sys;

/// The steps, by index, as reported back over the error pipe.
pub(crate) const STAGES: &[&str] = &[
    "setsid",                 // 0
    "user namespace mapping", // 1
    "private mount propagation",
    "staging tmpfs",
    "pivot to staging",
    "bind mount",
    "mask mount",
    "private tmpfs",
    "proc mount",
    "dev setup",
    "symlink", // 10
    "read-only remount",
    "loopback up",
    "pivot to new root",
    "start the agent",
    "working directory",
    "resource limits",
    "switch user",
    "drop capabilities",
    "landlock",
    "landlock not fully enforced", // 20
    "exec",
    "close inherited descriptors",
    "no-new-privileges",
    "snapshot", // 24
    "seccomp filter and mediator",
    "proxy listener", // 26
    "cache overlay",
    "join the network namespace", // 28
    "join the staged root",
];

pub(crate) const STAGE_EXEC: u32 = 21;

/// One mount, with its strings ready.
#[derive(Debug)]
pub(crate) enum PreparedOp {
    Bind {
        src: CString,
        dst: CString,
        write: bool,
        dir: bool,
    },
    MaskDir {
        dst: CString,
    },
    MaskFile {
        dst: CString,
    },
    Tmpfs {
        dst: CString,
        data: CString,
    },
    Overlay {
        dst: CString,
        /// The host's directory, through `/oldroot`.
        lower: CString,
        /// The upper layer's directory, whose owner and mode become the merged root's.
        upper: CString,
        /// For a private upper layer: a tmpfs to mount at this staging directory (with these options)
        /// and the upper and work directories to make in it.
        private: Option<PrivateLayer>,
        /// The overlay's mount options (the layers, escaped).
        data: CString,
    },
    Proc {
        dst: CString,
    },
    Dev {
        dst: CString,
        devices: Vec<(CString, CString)>,
        links: Vec<(CString, CString)>,
    },
    Symlink {
        target: CString,
        dst: CString,
    },
    Stub {
        dst: CString,
        dir: bool,
    },
    Snapshot {
        dst: CString,
        bytes: std::sync::Arc<[u8]>,
    },
}

/// Where a private overlay's upper and work directories are made: in the run's tmpfs for its caches
/// ([`Prepared::cache_layers`]).
#[derive(Debug)]
pub(crate) struct PrivateLayer {
    /// This cache's directory in it, holding `upper` and `work`.
    pub(crate) dir: CString,
    pub(crate) work: CString,
}

/// Everything the child needs, computed before the clone.
pub(crate) struct Prepared {
    pub(crate) user_ns: Option<(u32, u32)>,
    pub(crate) net_ns: bool,
    /// The private network namespace made ahead ([`crate::Namespaces`]), loopback up, which the init
    /// joins; `None` when the clone makes it.
    pub(crate) net_ns_fd: Option<RawFd>,
    /// A mount namespace staged ahead ([`stage_root`], its `/dev` made too, [`crate::Namespaces`]), which
    /// the init joins instead of staging its own; then the clone makes none.
    pub(crate) staged_root: Option<RawFd>,
    pub(crate) ops: Vec<PreparedOp>,
    /// Parent directories to create (in order) before each op; tmpfs areas only.
    pub(crate) mkdirs: Vec<Vec<(CString, libc::mode_t)>>,
    pub(crate) landlock: Vec<(PathBuf, LandlockGrant)>,
    pub(crate) landlock_hard: bool,
    pub(crate) cwd: CString,
    pub(crate) exec_path: CString,
    pub(crate) _argv: Vec<CString>,
    pub(crate) argv_ptrs: Vec<*const c_char>,
    pub(crate) _envp: Vec<CString>,
    pub(crate) envp_ptrs: Vec<*const c_char>,
    pub(crate) rlimits: Vec<(libc::__rlimit_resource_t, u64)>,
    pub(crate) switch_user: Option<(u32, u32)>,
    pub(crate) stdout_w: Option<RawFd>,
    pub(crate) stderr_w: Option<RawFd>,
    pub(crate) err_w: RawFd,
    /// A caller's pipe, handed to the program as descriptor 3 ([`crate::SandboxBuilder::pass_pipe`]).
    pub(crate) passed_pipe: Option<RawFd>,
    /// The program's end of the socket on which it sends the seccomp listener to the mediator.
    pub(crate) mediator_sock: RawFd,
    /// The mediator's end, which the init must not keep (a listener queued on it would then outlive a
    /// mediator that died, and the program would wait on it for ever).
    pub(crate) mediator_sup: RawFd,
    /// Where the init sends the proxy's listener, made in the sandbox's network namespace, and its port.
    pub(crate) proxy: Option<(RawFd, u16)>,
    /// The supervisor's end of that socket, which the init closes (so a failed init reads as the end).
    pub(crate) proxy_sup: Option<RawFd>,
    /// The directory in the staging root (never inside the new one) of the one tmpfs holding every
    /// private cache layer, and its options: mounted with the first overlay the init makes itself, or
    /// attached with the last the supervisor sends ([`crate::overlay`]).
    pub(crate) cache_layers: (CString, CString),
    /// Where the supervisor sends the cache overlays it made ([`crate::overlay`]), one descriptor per
    /// [`PreparedOp::Overlay`] in order, for as long as the stream lasts.
    pub(crate) overlay_sock: Option<RawFd>,
    /// The supervisor's end of that stream, which the init closes (so the stream ends with the thread).
    pub(crate) overlay_sup: Option<RawFd>,
    /// The supervisor's lock on the cache store, which the init closes (the lock ends when the supervisor
    /// lets it go, not when the last process of the run has gone).
    pub(crate) cache_lock: Option<RawFd>,
    /// The seccomp filter (`seccomp.rs`), built before the clone.
    pub(crate) seccomp: Vec<libc::sock_filter>,
    pub(crate) status_w: RawFd,
    pub(crate) old_mask: libc::sigset_t,
    pub(crate) cap_last: u32,
    pub(crate) strings: Strings,
}

/// Fixed strings used during setup.
pub(crate) struct Strings {
    pub(crate) root: CString,
    pub(crate) staging: CString,
    pub(crate) newroot: CString,
    pub(crate) newroot_rel: CString,
    pub(crate) oldroot_rel: CString,
    pub(crate) maskfile: CString,
    pub(crate) tmpfs: CString,
    pub(crate) proc_: CString,
    pub(crate) overlay: CString,
    pub(crate) dot: CString,
    pub(crate) setgroups: CString,
    pub(crate) uid_map: CString,
    pub(crate) gid_map: CString,
    pub(crate) deny: CString,
    pub(crate) mask_data: CString,
    pub(crate) dev_data: CString,
    /// Where the new root's `/dev` is made.
    pub(crate) dev: CString,
}

impl Strings {
    pub(crate) fn new() -> Self {
        let c = |s: &str| CString::new(s).unwrap_or_default();
        Strings {
            root: c("/"),
            staging: c("/tmp"),
            newroot: c("/newroot"),
            newroot_rel: c("newroot"),
            oldroot_rel: c("oldroot"),
            maskfile: c("/mask"),
            tmpfs: c("tmpfs"),
            proc_: c("proc"),
            overlay: c("overlay"),
            dot: c("."),
            setgroups: c("/proc/self/setgroups"),
            uid_map: c("/proc/self/uid_map"),
            gid_map: c("/proc/self/gid_map"),
            deny: c("deny"),
            mask_data: c("mode=0111,size=16k"),
            dev_data: c("mode=0755,size=64k"),
            dev: c(NEW_DEV),
        }
    }
}

/// Reports a failed step to the supervisor and leaves.
///
/// The message is `stage (u32) | errno (i32) | detail (UTF-8, rest)`; the detail is only sent for errors that
/// carry no errno (Landlock's), where formatting (which allocates) is sound because this child has one thread.
fn fail(err_w: RawFd, stage: u32, err: &std::io::Error, code: c_int) -> ! {
    let errno = err.raw_os_error().unwrap_or(0);
    let mut msg = [0u8; 512];
    msg[..4].copy_from_slice(&stage.to_ne_bytes());
    msg[4..8].copy_from_slice(&errno.to_ne_bytes());
    let mut len = 8;
    if errno == 0 {
        let detail = err.to_string();
        let n = detail.len().min(msg.len() - 8);
        msg[8..8 + n].copy_from_slice(&detail.as_bytes()[..n]);
        len += n;
    }
    let _ = sys::write_all(err_w, &msg[..len]);
    sys::exit_now(code)
}

trait Step<T> {
    fn or_fail(self, p: &Prepared, stage: u32) -> T;
}

impl<T> Step<T> for std::io::Result<T> {
    fn or_fail(self, p: &Prepared, stage: u32) -> T {
        match self {
            Ok(v) => v,
            Err(e) => fail(p.err_w, stage, &e, 125),
        }
    }
}

/// The sandbox's PID 1. Never returns.
pub(crate) fn init_main(p: &Prepared) -> ! {
    // If the supervisor dies, so does this init, and with it the whole PID namespace.
    let _ = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
    if let Some(fd) = p.net_ns_fd {
        sys::setns(fd, libc::CLONE_NEWNET).or_fail(p, 28);
        sys::close(fd);
    }
    sys::close(p.mediator_sup);
    for fd in p
        .proxy_sup
        .iter()
        .chain(&p.cache_lock)
        .chain(&p.overlay_sup)
    {
        sys::close(*fd);
    }
    sys::setsid().or_fail(p, 0);
    let s = &p.strings;
    if let Some((uid, gid)) = p.user_ns {
        let _ = sys::write_file(&s.setgroups, s.deny.as_bytes());
        let mut buf = [0u8; 64];
        let n = format_map(&mut buf, uid);
        sys::write_file(&s.uid_map, buf.get(..n).unwrap_or(&[])).or_fail(p, 1);
        let n = format_map(&mut buf, gid);
        sys::write_file(&s.gid_map, buf.get(..n).unwrap_or(&[])).or_fail(p, 1);
    }
    build_root(p);
    if let Some(fd) = p.overlay_sock {
        sys::close(fd);
    }
    if p.net_ns && p.net_ns_fd.is_none() {
        sys::loopback_up().or_fail(p, 12);
    }
    // The proxy's socket is made here, inside the private network namespace, and served outside by the
    // supervisor: the program's only way to any other host. Sent before the agent exists, so its
    // connections wait in the backlog until the supervisor accepts them.
    if let Some((sock, port)) = p.proxy {
        let listener = sys::loopback_listener(port).or_fail(p, 26);
        sys::send_fds(sock, &[listener]).or_fail(p, 26);
        sys::close(listener);
        sys::close(sock);
    }

    // Switch to the new root and let go of the old one.
    sys::chdir(&s.newroot).or_fail(p, 13);
    sys::pivot_root(&s.dot, &s.dot).or_fail(p, 13);
    sys::umount_detach(&s.dot).or_fail(p, 13);
    sys::chdir(&s.root).or_fail(p, 13);

    // Emptied once here, inherited by the agent: the bounding set only limits what exec can grant, so the
    // init keeps the effective capabilities it still needs (CAP_SETPCAP for the agent's securebits,
    // CAP_SETUID for --user) until each process clears them.
    drop_capability_bounding_set(p.cap_last);
    // The init waits while the agent sets itself up in its memory (nothing copied), until the exec.
    let agent_pid = sys::spawn_sharing_memory(&mut || agent_main(p)).or_fail(p, 14);

    // The init: hold no descriptor the agent could use, keep no privilege, reap until the agent is done.
    sys::close(p.err_w);
    sys::close(p.mediator_sock);
    if let Some(fd) = p.passed_pipe {
        sys::close(fd);
    }
    if let Some(fd) = p.stdout_w {
        sys::close(fd);
    }
    if let Some(fd) = p.stderr_w {
        sys::close(fd);
    }
    let _ = sys::prctl(libc::PR_SET_DUMPABLE, 0);
    let _ = sys::clear_capabilities();
    loop {
        match sys::waitpid(-1, 0) {
            Ok((pid, status)) if pid == agent_pid => {
                let _ = sys::write_all(p.status_w, &InitReport::new(status).to_bytes());
                // Exiting as PID 1 makes the kernel kill everything left in the namespace, daemons included.
                sys::exit_now(0)
            }
            Ok(_) => continue,
            Err(_) => sys::exit_now(125),
        }
    }
}

/// What the init tells the supervisor when the agent has exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InitReport {
    /// The agent's wait status.
    pub(crate) status: c_int,
    /// Nothing but the init was left in the namespace: every process the agent started had ended and was
    /// reaped. The supervisor may then take the run as over without waiting for the init's own exit, in
    /// which the kernel tears down the namespaces (most of a millisecond).
    pub(crate) alone: bool,
    /// Peak resident memory of the largest process the init reaped, in bytes.
    pub(crate) peak_memory_bytes: u64,
}

impl InitReport {
    const LEN: usize = 13;

    /// Reaps whatever else has already ended, then reports.
    fn new(status: c_int) -> Self {
        let alone = loop {
            // __WALL: children cloned with another exit signal count too.
            match sys::waitpid(-1, libc::WNOHANG | libc::__WALL) {
                Ok((0, _)) => break false,
                Ok(_) => continue,
                Err(e) => break e.raw_os_error() == Some(libc::ECHILD),
            }
        };
        InitReport {
            status,
            alone,
            peak_memory_bytes: sys::children_max_rss(),
        }
    }

    fn to_bytes(self) -> [u8; Self::LEN] {
        let mut bytes = [0u8; Self::LEN];
        bytes[..4].copy_from_slice(&self.status.to_ne_bytes());
        bytes[4] = u8::from(self.alone);
        bytes[5..].copy_from_slice(&self.peak_memory_bytes.to_ne_bytes());
        bytes
    }

    /// The report, once all of it has arrived.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let bytes: &[u8; Self::LEN] = bytes.get(..Self::LEN)?.try_into().ok()?;
        let (status, rest) = bytes.split_first_chunk::<4>()?;
        let (alone, peak) = rest.split_first()?;
        Some(InitReport {
            status: c_int::from_ne_bytes(*status),
            alone: *alone == 1,
            peak_memory_bytes: u64::from_ne_bytes(peak.try_into().ok()?),
        })
    }
}

fn format_map(buf: &mut [u8; 64], id: u32) -> usize {
    // "<id> <id> 1\n" without allocating.
    let mut digits = [0u8; 10];
    let mut n = id;
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut pos = 0;
    for _ in 0..2 {
        for i in (0..len).rev() {
            buf[pos] = digits[i];
            pos += 1;
        }
        buf[pos] = b' ';
        pos += 1;
    }
    buf[pos] = b'1';
    buf[pos + 1] = b'\n';
    pos + 2
}

/// Stages the root in the caller's own mount namespace (a copy of the host's): a tmpfs becomes the root
/// for a moment, so the host's tree stays reachable at /oldroot while the new one is assembled at
/// /newroot (the same dance as bubblewrap). On failure, the step's number for [`fail`].
pub(crate) fn stage_root(s: &Strings) -> Result<(), (u32, std::io::Error)> {
    let nosuid_nodev = libc::MS_NOSUID | libc::MS_NODEV;
    let step = |stage: u32| move |e: std::io::Error| (stage, e);
    sys::mount(None, &s.root, None, libc::MS_REC | libc::MS_PRIVATE, None).map_err(step(2))?;
    mount_tmpfs(s, &s.staging, nosuid_nodev, None).map_err(step(3))?;
    sys::chdir(&s.staging).map_err(step(4))?;
    sys::mkdir(&s.newroot_rel, 0o755).map_err(step(4))?;
    sys::mkdir(&s.oldroot_rel, 0o755).map_err(step(4))?;
    mount_tmpfs(s, &s.newroot_rel, nosuid_nodev, None).map_err(step(4))?;
    sys::pivot_root(&s.dot, &s.oldroot_rel).map_err(step(4))?;
    sys::chdir(&s.root).map_err(step(4))?;
    sys::touch(&s.maskfile, 0).map_err(step(6))
}

fn build_root(p: &Prepared) {
    let s = &p.strings;
    let nosuid_nodev = libc::MS_NOSUID | libc::MS_NODEV;
    match p.staged_root {
        // Staged by the supervisor while it resolved the policy: joining puts the init at its root.
        Some(fd) => {
            sys::setns(fd, libc::CLONE_NEWNS).or_fail(p, 29);
            sys::close(fd);
        }
        None => {
            if let Err((stage, e)) = stage_root(s) {
                fail(p.err_w, stage, &e, 125)
            }
        }
    }
    // The overlays the supervisor makes (until its stream ends), and whether the init has mounted the
    // tmpfs for the ones it makes itself.
    let mut detached = p.overlay_sock;
    let mut layers_mounted = false;

    for (op, parents) in p.ops.iter().zip(&p.mkdirs) {
        for (dir, mode) in parents {
            existing_is_fine(sys::mkdir(dir, *mode)).or_fail(p, 5);
        }
        match op {
            PreparedOp::Bind {
                src,
                dst,
                write,
                dir,
            } => {
                ensure_target(p, dst, *dir);
                sys::mount(Some(src), dst, None, libc::MS_BIND | libc::MS_REC, None).or_fail(p, 5);
                if !write {
                    sys::make_readonly_recursive(dst).or_fail(p, 11);
                }
            }
            PreparedOp::MaskDir { dst } => {
                mount_tmpfs(s, dst, nosuid_nodev | libc::MS_NOEXEC, Some(&s.mask_data))
                    .or_fail(p, 6);
            }
            PreparedOp::MaskFile { dst } => {
                sys::mount(Some(&s.maskfile), dst, None, libc::MS_BIND, None).or_fail(p, 6);
                sys::make_readonly_recursive(dst).or_fail(p, 11);
            }
            PreparedOp::Tmpfs { dst, data } => {
                ensure_target(p, dst, true);
                mount_tmpfs(s, dst, nosuid_nodev, Some(data)).or_fail(p, 7);
            }
            PreparedOp::Overlay {
                dst,
                lower,
                upper,
                private,
                data,
            } => {
                // Inside a mask (a cache beneath a denied directory) the mount point must be made.
                ensure_target(p, dst, true);
                if let Some(sock) = detached {
                    let received = sys::recv_fds(sock).ok().flatten().unwrap_or_default();
                    match received.as_slice() {
                        [overlay, more @ ..] if more.len() <= 1 => {
                            // With the last private overlay comes the tmpfs holding the layers: attached
                            // in the staging root, as the init's own would be, and gone with it.
                            if let (Some(tmpfs), Some(_)) = (more.first(), private) {
                                let dir = &p.cache_layers.0;
                                sys::mkdir(dir, 0o700).or_fail(p, 27);
                                sys::move_mount_detached(tmpfs.as_raw_fd(), dir).or_fail(p, 27);
                                layers_mounted = true;
                            }
                            sys::move_mount_detached(overlay.as_raw_fd(), dst).or_fail(p, 27);
                            continue;
                        }
                        // The supervisor made no more: this one and the rest are made here.
                        _ => detached = None,
                    }
                }
                if let Some(layer) = private {
                    if !layers_mounted {
                        let (dir, data) = &p.cache_layers;
                        sys::mkdir(dir, 0o700).or_fail(p, 27);
                        mount_tmpfs(s, dir, nosuid_nodev, Some(data)).or_fail(p, 27);
                        layers_mounted = true;
                    }
                    sys::mkdir(&layer.dir, 0o700).or_fail(p, 27);
                    sys::mkdir(upper, 0o700).or_fail(p, 27);
                    sys::mkdir(&layer.work, 0o700).or_fail(p, 27);
                }
                // The merged root is the upper layer's root: give it the host directory's owner and mode,
                // so the program (perhaps another user, with --user) may write where it could read. The
                // owner may be unmapped in a user namespace; then it stays ours, which is the caller's.
                let (uid, gid, mode) = sys::owner_and_mode(lower).or_fail(p, 27);
                let _ = sys::chown(upper, uid, gid);
                sys::chmod(upper, mode).or_fail(p, 27);
                sys::mount(
                    Some(&s.overlay),
                    dst,
                    Some(&s.overlay),
                    nosuid_nodev,
                    Some(data),
                )
                .or_fail(p, 27);
            }
            PreparedOp::Proc { dst } => {
                ensure_target(p, dst, true);
                sys::mount(
                    Some(&s.proc_),
                    dst,
                    Some(&s.proc_),
                    nosuid_nodev | libc::MS_NOEXEC,
                    None,
                )
                .or_fail(p, 8);
            }
            // A staged root comes with its `/dev` made.
            PreparedOp::Dev { dst, .. } if p.staged_root.is_some() && *dst == s.dev => {}
            PreparedOp::Dev {
                dst,
                devices,
                links,
            } => make_dev(s, dst, devices, links).or_fail(p, 9),
            PreparedOp::Stub { dst, dir } => {
                let r = if *dir {
                    sys::mkdir(dst, 0)
                } else {
                    sys::touch(dst, 0)
                };
                existing_is_fine(r).or_fail(p, 5);
            }
            PreparedOp::Symlink { target, dst } => {
                existing_is_fine(sys::symlink(target, dst)).or_fail(p, 10);
            }
            // Read-only with the rest of the root, below.
            PreparedOp::Snapshot { dst, bytes } => {
                sys::create_new_with(dst, 0o444, bytes).or_fail(p, 24);
            }
        }
    }
    // Masks and the skeleton itself become read-only once everything is mounted on them.
    for op in &p.ops {
        if let PreparedOp::MaskDir { dst } = op {
            sys::chmod(dst, 0o111).or_fail(p, 11);
            // Only the mask itself: grants mounted inside it (a deeper `write`) keep their own mode.
            sys::make_readonly(dst).or_fail(p, 11);
        }
    }
    sys::mount(
        None,
        &s.newroot,
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | nosuid_nodev,
        None,
    )
    .or_fail(p, 11);
}

/// The new root's `/dev` while the root is built ([`Strings::dev`], and where its entries are made).
const NEW_DEV: &str = "/newroot/dev";

/// The standard devices, bound from the host's `/dev` (staged at /oldroot) into the new root's.
pub(crate) fn standard_devices() -> Vec<(CString, CString)> {
    ["null", "zero", "full", "random", "urandom", "tty"]
        .into_iter()
        .map(|d| {
            (
                CString::new(format!("/oldroot/dev/{d}")).unwrap_or_default(),
                CString::new(format!("{NEW_DEV}/{d}")).unwrap_or_default(),
            )
        })
        .collect()
}

/// The standard links of `/dev` (target, link).
pub(crate) fn standard_dev_links() -> Vec<(CString, CString)> {
    [
        ("/proc/self/fd", "fd"),
        ("/proc/self/fd/0", "stdin"),
        ("/proc/self/fd/1", "stdout"),
        ("/proc/self/fd/2", "stderr"),
    ]
    .into_iter()
    .map(|(t, l)| {
        (
            CString::new(t).unwrap_or_default(),
            CString::new(format!("{NEW_DEV}/{l}")).unwrap_or_default(),
        )
    })
    .collect()
}

/// A minimal `/dev` at `dst` in the staging root: a tmpfs with the host's devices bound in (one the host
/// lacks is simply absent inside) and the standard links.
pub(crate) fn make_dev(
    s: &Strings,
    dst: &CString,
    devices: &[(CString, CString)],
    links: &[(CString, CString)],
) -> std::io::Result<()> {
    existing_is_fine(sys::mkdir(dst, 0o755))?;
    mount_tmpfs(s, dst, libc::MS_NOSUID | libc::MS_NOEXEC, Some(&s.dev_data))?;
    for (src, target) in devices {
        if sys::file_type(src).is_ok() {
            sys::touch(target, 0o666)?;
            sys::mount(Some(src), target, None, libc::MS_BIND, None)?;
            // The node is the host's: read-only, so that a program running as root (without
            // capabilities, but the owner) cannot chmod, chown or touch the host's `/dev/null`, which
            // Landlock has no right for. Reading and writing the device itself still work.
            sys::make_readonly(target)?;
        }
    }
    for (target, link) in links {
        sys::symlink(target, link)?;
    }
    Ok(())
}

/// Something already there (a directory on the host, a stub planned twice) is what creation wanted.
fn existing_is_fine(r: std::io::Result<()>) -> std::io::Result<()> {
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

/// Mounts a fresh tmpfs at `dst`.
fn mount_tmpfs(
    s: &Strings,
    dst: &CString,
    flags: libc::c_ulong,
    data: Option<&CString>,
) -> std::io::Result<()> {
    sys::mount(
        Some(&s.tmpfs),
        dst,
        Some(&s.tmpfs),
        flags,
        data.map(CString::as_c_str),
    )
}

/// Creates an empty directory or file to mount on, where nothing is yet (only possible in tmpfs areas).
fn ensure_target(p: &Prepared, dst: &CString, dir: bool) {
    // Creating and taking "already there" as done is one call per mount point; looking first was two.
    let r = if dir {
        sys::mkdir(dst, 0o755)
    } else {
        sys::create_new(dst, 0o644)
    };
    existing_is_fine(r).or_fail(p, 5);
}

fn drop_capability_bounding_set(cap_last: u32) {
    for cap in 0..=cap_last {
        let _ = sys::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong);
    }
}

/// The agent: confine, drop everything, exec. Never returns.
fn agent_main(p: &Prepared) -> ! {
    let _ = sys::set_signal_mask(&p.old_mask);
    sys::reset_signal_dispositions();
    if let Some(fd) = p.stdout_w {
        sys::dup2(fd, 1).or_fail(p, 22);
    }
    if let Some(fd) = p.stderr_w {
        sys::dup2(fd, 2).or_fail(p, 22);
    }
    // The error pipe moves to fd 3 (close-on-exec), or 4 when a passed pipe takes 3 (its source is numbered
    // 64 or above, so neither move overwrites it); everything above is closed, however high.
    let err_w = if p.passed_pipe.is_some() { 4 } else { 3 };
    sys::dup2(p.err_w, err_w).or_fail(p, 22);
    sys::set_cloexec(err_w).or_fail(p, 22);
    if let Some(fd) = p.passed_pipe {
        // dup2 leaves the new descriptor without close-on-exec: the program keeps it.
        sys::dup2(fd, 3).or_fail(p, 22);
    }
    // The mediator's socket sits just above, close-on-exec, until the filter's listener is sent.
    let mediator_sock = err_w + 1;
    sys::dup2(p.mediator_sock, mediator_sock).or_fail(p, 22);
    sys::set_cloexec(mediator_sock).or_fail(p, 22);
    sys::close_from(mediator_sock as u32 + 1).or_fail(p, 22);
    let p_err = |stage: u32, e: &std::io::Error| fail(err_w, stage, e, 125);
    // The mediator joins these namespaces through descriptors the program opens on itself: a process
    // may always open its own, while the supervisor, without privilege, may not open the init's.
    let ns = |path: &std::ffi::CStr| {
        sys::openat(libc::AT_FDCWD, path, libc::O_RDONLY | libc::O_CLOEXEC, 0)
            .unwrap_or_else(|e| fail(err_w, 25, &e, 125))
    };
    let mount_ns = ns(c"/proc/thread-self/ns/mnt");
    let user_ns = p.user_ns.map(|_| ns(c"/proc/thread-self/ns/user"));

    if let Err(e) = sys::chdir(&p.cwd) {
        p_err(15, &e);
    }
    for (resource, value) in &p.rlimits {
        if let Err(e) = sys::setrlimit(*resource, *value) {
            p_err(16, &e);
        }
    }
    // Root keeps no capability across exec: the bounding set is already empty (the init emptied it); lock
    // the securebits (needs CAP_SETPCAP), then (optionally) switch user, then clear what is left.
    let securebits = 0x2f; // NOROOT | NOROOT_LOCKED | NO_SETUID_FIXUP | NO_SETUID_FIXUP_LOCKED | KEEP_CAPS_LOCKED
    let _ = sys::prctl(libc::PR_SET_SECUREBITS, securebits);
    let _ = sys::prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
    );
    if let Some((uid, gid)) = p.switch_user
        && let Err(e) = sys::set_ids(uid, gid)
    {
        p_err(17, &e);
    }
    if let Err(e) = sys::clear_capabilities() {
        p_err(18, &e);
    }
    match sys::has_effective_capabilities() {
        Ok(false) => {}
        Ok(true) => p_err(18, &std::io::Error::from_raw_os_error(libc::EPERM)),
        Err(e) => p_err(18, &e),
    }
    if let Err(e) = sys::prctl(libc::PR_SET_NO_NEW_PRIVS, 1) {
        p_err(23, &e);
    }
    if let Err((stage, e)) = apply_landlock(&p.landlock, p.landlock_hard) {
        p_err(stage, &e);
    }
    // Last, so that the setup above is not mediated: from here every name the program creates and every
    // connect goes through the mediator (mediate.rs), which holds the listener.
    match sys::seccomp_install_with_listener(&p.seccomp) {
        Ok(listener) => {
            let mut fds = [listener, mount_ns.as_raw_fd(), -1];
            let count = match &user_ns {
                Some(user) => {
                    fds[2] = user.as_raw_fd();
                    3
                }
                None => 2,
            };
            if let Err(e) = sys::send_fds(mediator_sock, &fds[..count]) {
                p_err(25, &e);
            }
            sys::close(listener);
        }
        Err(e) => p_err(25, &e),
    }
    drop((mount_ns, user_ns));
    sys::close(mediator_sock);
    let e = sys::execve(&p.exec_path, &p.argv_ptrs, &p.envp_ptrs);
    let code = if e.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    fail(err_w, STAGE_EXEC, &e, code)
}

fn apply_landlock(
    rules: &[(PathBuf, LandlockGrant)],
    hard: bool,
) -> Result<(), (u32, std::io::Error)> {
    use landlock::{
        ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
        RulesetCreatedAttr, RulesetStatus, Scope,
    };
    let abi = ABI::V6;
    let err = |e: &dyn std::fmt::Display| (19, std::io::Error::other(e.to_string()));
    let level = if hard {
        CompatLevel::HardRequirement
    } else {
        CompatLevel::BestEffort
    };
    let mut created = Ruleset::default()
        .set_compatibility(level)
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.scope(Scope::from_all(abi)))
        .and_then(|r| r.create())
        .map_err(|e| err(&e))?;
    for (path, grant) in rules {
        let access = match grant {
            LandlockGrant::Read => AccessFs::from_read(abi),
            LandlockGrant::Write => AccessFs::from_all(abi),
            LandlockGrant::WriteNoCreate => {
                AccessFs::from_all(abi)
                    & !(AccessFs::MakeChar
                        | AccessFs::MakeDir
                        | AccessFs::MakeReg
                        | AccessFs::MakeSock
                        | AccessFs::MakeFifo
                        | AccessFs::MakeBlock
                        | AccessFs::MakeSym
                        | AccessFs::Refer)
            }
            LandlockGrant::FileReadWrite => AccessFs::from_file(abi),
        };
        // A path that vanished since planning grants nothing; that is the safe direction.
        let Ok(fd) = PathFd::new(path) else { continue };
        // Directory-only rights on a file are an error under a hard requirement: keep the file subset.
        let access = if sys::is_dir(fd.as_fd()) {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| err(&e))?;
    }
    let status = created.restrict_self().map_err(|e| err(&e))?;
    if hard && status.ruleset != RulesetStatus::FullyEnforced {
        return Err((20, std::io::Error::other(format!("{:?}", status.ruleset))));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::InitReport;

    #[test]
    fn the_init_report_reads_back_only_when_whole() {
        let report = InitReport {
            status: 0x0100,
            alone: true,
            peak_memory_bytes: 123 << 20,
        };
        let bytes = report.to_bytes();
        assert_eq!(InitReport::from_bytes(&bytes), Some(report));
        // A report cut short (the init killed mid-write) is no report: the supervisor waits for the pidfd.
        assert_eq!(InitReport::from_bytes(&bytes[..InitReport::LEN - 1]), None);
        let lonely = InitReport {
            alone: false,
            ..report
        };
        assert!(!InitReport::from_bytes(&lonely.to_bytes()).unwrap().alone);
    }
}
