//! OS enforcement of a resolved stockade policy on one child process and everything it starts.
//!
//! ```no_run
//! use std::sync::Arc;
//! use stockade_policy::{PolicyBuilder, Variables};
//! use stockade_sandbox::{SandboxBuilder, Stdio};
//!
//! let cwd = std::env::current_dir()?;
//! let temp = stockade_sandbox::new_temp_dir_path();
//! let mut vars = Variables::default();
//! vars.set_path("CWD", &cwd).set_path("HOME", "/root").set_path("TEMP_DIR", &temp);
//! let policy = Arc::new(PolicyBuilder::new(vars).build()?);
//! let outcome = SandboxBuilder::new(policy, "sh", ["-c", "echo hi > note.txt"])
//!     .cwd(&cwd)
//!     .temp_dir(&temp)
//!     .build()?
//!     .spawn()?
//!     .wait()?;
//! assert_eq!(outcome.exit_code, Some(0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Security model
//!
//! The confined process is hostile. The boundary is the kernel, set up in this order by a child of the
//! (single-threaded) supervisor, which becomes PID 1 of new namespaces:
//!
//! 1. New PID, mount, IPC and (unless the policy allows network) network namespaces; a user namespace
//!    when not started as root. A new session (`setsid`): no controlling terminal, so no `TIOCSTI`
//!    keystroke injection into the user's shell.
//! 2. A private root built from nothing: an empty tmpfs onto which every granted path is bind-mounted at
//!    its own path, read-only unless the policy grants write. What the policy does not grant does not exist
//!    inside (not even for `stat`, pathname sockets such as `docker.sock`, or `/proc/<pid>/root` of outside
//!    processes: `/proc` is a fresh one for the new PID namespace). A granted file the caller gave as a
//!    snapshot is instead a copy of those bytes written into the root, which is then made read-only.
//!    `deny` targets inside granted trees are covered by empty read-only mounts; `read-only` targets
//!    inside writable trees are re-bound read-only, and every directory between them and the writable
//!    root is made a mount point so it cannot be renamed away. `/dev` holds only null, zero, full, random, urandom and tty. The temp dir and `/dev/shm` are
//!    private tmpfs mounts that vanish with the namespace, and so are `/tmp` and `/var/tmp` unless the
//!    policy grants something in them: a script's `/tmp/x` works and never reaches the host's `/tmp`.
//!    A `cache` directory (`~/.npm`) is an overlay whose lower layer is the host's directory and whose
//!    upper layer is a tmpfs of the run's (or the agent's persisted store): writes never reach the host.
//!    As root the supervisor makes these overlays detached, on a thread, while the init mounts the rest,
//!    and the init attaches them (`overlay.rs`); otherwise the init mounts them itself.
//!    `/proc/keys` and `/proc/key-users` are masked (kernel keys are not namespaced). A directory the
//!    policy keeps read-only but in which it names writable files (`.git`, with `index.lock`) is bound
//!    writable with every other entry bound back read-only; its new names are the mediator's (step 3).
//! 3. The agent process: signals reset, every descriptor above 2 closed (`close_range`), and one of 0 to 2
//!    that is a directory replaced by `/dev/null` (the kernel would walk `..` from it in the host's
//!    tree, outside the private root), rlimits set,
//!    capability bounding set emptied, securebits locked so uid 0 gains nothing on exec, all capabilities
//!    cleared and checked, `no_new_privs`, then Landlock (filesystem rights mirroring the mounts, plus
//!    signal and abstract-Unix-socket scoping, which also stops ptrace of anything outside), then a
//!    seccomp filter (`seccomp.rs`), then `execve`. The filter kills foreign system-call ABIs, refuses the
//!    keyrings (`EPERM`), `io_uring` and `openat2` (`ENOSYS`) and Unix datagram sockets, and hands every
//!    call that names a file (`open` with `O_CREAT`, `creat`, `mkdir`, `mknod`, `rename`, `link`,
//!    `symlink`, `bind`) and every `connect` to the **mediator** (`mediate.rs`): a process forked by the
//!    supervisor that joins the sandbox's mount (and user) namespace, resolves the path in the sandbox's
//!    own view (its root and its own `/proc`, following there only the caller's own entries; never the
//!    host's `/proc`), checks the policy's decision for it before any side effect, performs the call
//!    itself and hands back the descriptor. Names are therefore exact:
//!    a protected name cannot be created whether or not it exists at start, and connecting to a pathname
//!    socket needs write on its path. Where no name-based rule applies, Landlock keeps the right to create
//!    names ([`MountPlan::create_dirs`]) and the mediator lets a creation proceed in the kernel; where one
//!    does, Landlock withholds it, so a path rewritten after the mediator looked cannot create there.
//! 4. When the agent exits, PID 1 exits, and the kernel kills everything left in the namespace (double-forked
//!    daemons included). Timeout and cancellation kill PID 1. If the supervisor dies, PID 1 gets `SIGKILL`.
//!
//! Trusted: the policy, the supervisor and its mediator, the kernel. Guaranteed: the process reaches no
//! file the policy does not grant, writes nothing the policy makes read-only (including metadata: chmod,
//! chown, utimes, xattrs, which Landlock alone does not cover), creates no name the policy does not let it
//! write, connects to no pathname socket it may not write, reaches no kernel keyring, has no network unless
//! allowed, and leaves nothing running. Nothing is created on the host for the run.
//!
//! # Limitations
//!
//! A write glob creates new matches through the mediator in the directories beneath its prefix, as long as
//! they hold at most [`MAX_GLOB_GUARDED_ENTRIES`] entries (past that, new matches cannot be created:
//! stricter than the policy); a symlink in such a directory is not held by a mount and can be removed.
//! Hard links to a denied file that already exist elsewhere in a granted tree are reachable, as with every
//! path-based mechanism. Landlock's and the mounts' refusals are not reported to stockade (the process sees
//! `EACCES`, `EROFS` or `ENOENT`); the mediator's are, in [`RunOutcome::refusals`]. A server accepting a
//! connection the mediator made sees the supervisor's pid in `SO_PEERCRED`, and a socket it bound reports
//! only its last component from `getsockname`. The pids limit uses `RLIMIT_NPROC`, which the kernel does
//! not apply to uid 0: as root, use `--user`.

mod child;
mod error;
mod mediate;
mod overlay;
mod plan;
mod run;
mod seccomp;
mod sys;

pub use error::SandboxError;
pub use mediate::{Refusal, RefusalReason};
pub use plan::{
    LandlockGrant, MAX_GLOB_GUARDED_ENTRIES, MAX_GLOB_WALK_ENTRIES, MountOp, MountPlan,
    PlannedMount, Siblings,
};
pub use run::{
    GATEWAY_PLACEHOLDER, Namespaces, PROXY_PORT, ProxyListener, RunOutcome, RunningSandbox,
    Sandbox, SandboxBuilder, Stdio, StopReason, new_temp_dir_path, proxy_env,
};

/// The Landlock ABI this kernel offers (0 when Landlock is unavailable).
pub fn landlock_abi() -> i32 {
    run::landlock_abi()
}
