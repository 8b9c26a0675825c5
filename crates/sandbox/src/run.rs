//! Building, spawning and supervising one sandboxed process.

use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use stockade_policy::{Access, CanonicalPath, ResolvedPolicy};

use crate::child::{self, InitReport, Prepared, PreparedOp, STAGE_EXEC, STAGES, Strings};
use crate::error::SandboxError;
use crate::overlay::{DetachedOverlay, UpperLayer};
use crate::plan::{MountOp, MountPlan, Siblings, under};
use crate::sys;

/// The port of the proxy inside a sandbox whose network goes through one (`net.allow`): the sandbox's
/// network namespace is private, so the port is free there whatever the host runs.
pub const PROXY_PORT: u16 = 3128;

/// What a gateway's `placeholder-env` variables hold inside the sandbox: not a key.
pub const GATEWAY_PLACEHOLDER: &str = "stockade-gateway-adds-the-key";

/// The variables that point programs at the proxy: curl, git, pip, cargo and most HTTP libraries read
/// the lower-case ones (curl ignores `HTTP_PROXY` for http, against "httpoxy"), npm and Go the upper-case
/// ones, SOCKS clients `ALL_PROXY`, Node 24 and later `NODE_USE_ENV_PROXY`. Loopback stays direct: it is
/// the sandbox's own.
pub fn proxy_env(port: u16) -> Vec<(String, String)> {
    let http = format!("http://127.0.0.1:{port}");
    let socks = format!("socks5h://127.0.0.1:{port}");
    let no_proxy = "localhost,127.0.0.1,::1".to_string();
    let mut vars = Vec::new();
    for (name, value) in [
        ("http_proxy", &http),
        ("https_proxy", &http),
        ("all_proxy", &socks),
        ("no_proxy", &no_proxy),
    ] {
        vars.push((name.to_string(), value.clone()));
        vars.push((name.to_ascii_uppercase(), value.clone()));
    }
    vars.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
    vars
}

/// A socketpair whose child end is numbered 64 or above, like the passed pipe, out of the way of the
/// child's moves to 3 and 4: (the supervisor's end, the child's end).
fn socketpair_for_child(what: &str) -> Result<(RawFd, RawFd), SandboxError> {
    let (sup, low) =
        sys::socketpair().map_err(|e| SandboxError::io(format!("socketpair for {what}"))(e))?;
    let child = sys::dup_above(low, 64);
    sys::close(low);
    match child {
        Ok(fd) => Ok((sup, fd)),
        Err(e) => {
            sys::close(sup);
            Err(SandboxError::io(format!("dup the socket for {what}"))(e))
        }
    }
}

/// Sets a variable of the program's environment, replacing any earlier value.
fn set_var(
    env: &mut Vec<(OsString, OsString)>,
    name: impl Into<OsString>,
    value: impl Into<OsString>,
) {
    let name = name.into();
    env.retain(|(k, _)| *k != name);
    env.push((name, value.into()));
}

/// Signals that cancel a run: the supervisor kills the whole tree and exits 128+N.
const CANCEL_SIGNALS: &[libc::c_int] = &[libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// The Landlock ABI this kernel offers.
pub(crate) fn landlock_abi() -> i32 {
    sys::landlock_abi_version()
}

/// A fresh, unguessable path for a run's private temp dir. It exists only inside that run's sandbox.
///
/// It lives under its own top-level directory rather than `/tmp`: the sandbox mirrors every host entry
/// beside a granted path as an inaccessible stub, so a temp dir under `/tmp` would cost one stub per entry
/// of the host's `/tmp`, where this way `/tmp` is a single stub (and still refuses with a permission error).
pub fn new_temp_dir_path() -> PathBuf {
    let mut random = [0u8; 8];
    sys::fill_random(&mut random);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    PathBuf::from(format!(
        "/stockade-tmp/run-{}-{nanos:08x}{hex}",
        std::process::id()
    ))
}

/// Where the child's stdout and stderr go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Stdio {
    /// The supervisor's own (through a capped pipe when an output limit is set).
    #[default]
    Inherit,
    /// Collected into [`RunOutcome::stdout`] / [`RunOutcome::stderr`] (up to the output limit).
    Collect,
}

/// Builds a [`Sandbox`]. Setters document their defaults; [`SandboxBuilder::build`] checks everything that
/// can be checked before a process exists.
#[derive(Debug)]
pub struct SandboxBuilder {
    policy: Arc<ResolvedPolicy>,
    program: OsString,
    args: Vec<OsString>,
    cwd: Option<PathBuf>,
    temp_dir: Option<PathBuf>,
    caller_env: Option<Vec<(OsString, OsString)>>,
    best_effort: bool,
    user: Option<String>,
    stdio: Stdio,
    stdin_null: bool,
    siblings: Siblings,
    passed_pipe: Option<RawFd>,
    cache_store: Option<PathBuf>,
    namespaces: Option<Namespaces>,
}

/// Namespaces made ahead of [`Sandbox::spawn`], on a thread of its own while the caller resolves its
/// policy: a private network namespace with its loopback up (most of a millisecond of kernel work,
/// `setup_net`, the largest single cost of a launch), and a mount namespace with the staging root and the
/// new root's `/dev` already in place (the host's tree at `/oldroot`, the new root's tmpfs at `/newroot`),
/// which the init joins instead of copying the host's and making them itself. Made on the other core,
/// both leave the launch's path.
///
/// Only a supervisor running as root makes them ahead: without privilege they must belong to the
/// sandbox's own user namespace, which only the clone creates. The thread is always joined before the
/// clone (the supervisor forks single-threaded), when the sandbox spawns or when this is dropped.
#[derive(Debug)]
pub struct Namespaces {
    made: Option<std::thread::JoinHandle<MadeAhead>>,
}

/// What the thread of [`Namespaces`] made; each `None` if it could not be (the clone then makes it).
#[derive(Debug, Default)]
struct MadeAhead {
    net: Option<OwnedFd>,
    staged_root: Option<OwnedFd>,
}

impl Namespaces {
    /// Starts making them and returns at once: the network namespace if `net` (a policy that grants the
    /// host's network needs none), the staged root always. Does nothing unless the effective user is root.
    ///
    /// The thread is put on another CPU than the caller's: a scheduler may keep a new thread on its
    /// creator's CPU (this VM's packs work onto as few CPUs as it can), where it ran after the policy's
    /// resolution rather than beside it, and the clone waited for it.
    pub fn prepare(net: bool) -> Self {
        if sys::geteuid() != 0 {
            return Namespaces { made: None };
        }
        // The thread waits for its placement: it cannot end while the placement names it.
        let (placed, wait_placed) = std::sync::mpsc::channel::<()>();
        let made = std::thread::Builder::new()
            .name("stockade-ns".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                let _ = wait_placed.recv();
                // Only this thread moves: namespaces belong to each thread, not to the process.
                let net = net.then(|| -> std::io::Result<OwnedFd> {
                    sys::unshare(libc::CLONE_NEWNET)?;
                    sys::loopback_up()?;
                    std::fs::File::open("/proc/thread-self/ns/net").map(OwnedFd::from)
                });
                let staged_root = (|| -> std::io::Result<OwnedFd> {
                    sys::unshare(libc::CLONE_NEWNS)?;
                    let ns = std::fs::File::open("/proc/thread-self/ns/mnt").map(OwnedFd::from)?;
                    let strings = child::Strings::new();
                    child::stage_root(&strings).map_err(|(_, e)| e)?;
                    // Every plan has it: the init leaves its `/dev` op to this.
                    child::make_dev(
                        &strings,
                        &strings.dev,
                        &child::standard_devices(),
                        &child::standard_dev_links(),
                    )?;
                    Ok(ns)
                })();
                MadeAhead {
                    net: net.and_then(Result::ok),
                    staged_root: staged_root.ok(),
                }
            })
            .ok();
        if let Some(thread) = &made {
            use std::os::unix::thread::JoinHandleExt;
            sys::move_off_this_cpu(thread.as_pthread_t());
        }
        let _ = placed.send(());
        Namespaces { made }
    }

    /// Waits for the thread; what it made.
    fn join(&mut self) -> MadeAhead {
        self.made
            .take()
            .and_then(|thread| thread.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        drop(self.join());
    }
}

/// A thread joined when this is dropped, on every way out of [`Sandbox::spawn`].
struct JoinOnDrop(Option<std::thread::JoinHandle<()>>);

impl Drop for JoinOnDrop {
    fn drop(&mut self) {
        if let Some(thread) = self.0.take() {
            let _ = thread.join();
        }
    }
}

/// The bytes of a [`Sandbox::snapshot_files`], shared with the child (printed by size only).
#[derive(Clone)]
struct SnapshotBytes(Arc<[u8]>);

impl std::fmt::Debug for SnapshotBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes", self.0.len())
    }
}

impl SandboxBuilder {
    /// A program (a path, or a name looked up in the confined environment's `PATH`) and its arguments.
    pub fn new<I, S>(policy: Arc<ResolvedPolicy>, program: impl AsRef<OsStr>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        SandboxBuilder {
            policy,
            program: program.as_ref().to_os_string(),
            args: args
                .into_iter()
                .map(|a| a.as_ref().to_os_string())
                .collect(),
            cwd: None,
            temp_dir: None,
            caller_env: None,
            best_effort: false,
            user: None,
            stdio: Stdio::Inherit,
            stdin_null: false,
            siblings: Siblings::Stubs,
            passed_pipe: None,
            cache_store: None,
            namespaces: None,
        }
    }

    /// Namespaces made ahead ([`Namespaces::prepare`]): the staged root always, the network namespace if
    /// the policy keeps the program off the host's network.
    pub fn namespaces(mut self, ns: Namespaces) -> Self {
        self.namespaces = Some(ns);
        self
    }

    /// The working directory (default: the policy's `${CWD}`). It must be readable under the policy.
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// The private temp dir's path (default: the policy's `${TEMP_DIR}`, else a new one).
    pub fn temp_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.temp_dir = Some(dir.into());
        self
    }

    /// The caller's environment, from which `env.pass` copies (default: this process's).
    pub fn caller_env(mut self, env: Vec<(OsString, OsString)>) -> Self {
        self.caller_env = Some(env);
        self
    }

    /// Run even where the kernel cannot enforce everything (default: refuse).
    pub fn best_effort(mut self, yes: bool) -> Self {
        self.best_effort = yes;
        self
    }

    /// When started as root, run the program as this user (default: the caller's uid).
    pub fn user(mut self, name: impl Into<String>) -> Self {
        self.user = Some(name.into());
        self
    }

    /// Where stdout and stderr go (default: inherited).
    pub fn stdio(mut self, stdio: Stdio) -> Self {
        self.stdio = stdio;
        self
    }

    /// What the private root shows of ungranted entries beside granted ones (default: stubs).
    pub fn siblings(mut self, siblings: Siblings) -> Self {
        self.siblings = siblings;
        self
    }

    /// Give the program `/dev/null` as stdin (default: inherited).
    pub fn stdin_null(mut self, yes: bool) -> Self {
        self.stdin_null = yes;
        self
    }

    /// Hand the program one end of a pipe of the caller's as its descriptor 3 (default: none; every
    /// descriptor above 2 is closed). Only a pipe is accepted, checked by [`SandboxBuilder::build`]: it
    /// carries bytes and reaches no file, so the program can report something back (e.g. its final
    /// working directory) without seeing anything else of the caller's. The caller keeps `fd` open until
    /// the run has started.
    pub fn pass_pipe(mut self, fd: RawFd) -> Self {
        self.passed_pipe = Some(fd);
        self
    }

    /// Keeps what the program writes to the policy's caches (`fs.cache`) in `dir` from run to run
    /// (default: each run's writes vanish with it): one upper layer per cache, beneath `dir`, made if
    /// missing. The run locks `dir` while it lasts, so two runs never write one layer at once (a second
    /// is refused). The host's caches are never changed either way.
    pub fn cache_store(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_store = Some(dir.into());
        self
    }

    /// Checks the kernel, the user, the working directory and the program against the policy, and
    /// computes the private root.
    pub fn build(self) -> Result<Sandbox, SandboxError> {
        let policy = &self.policy;
        let mut warnings = Vec::new();
        for (fd, name) in directory_stdio() {
            warnings.push(format!(
                "{name} is a directory or a path handle; the program gets /dev/null there instead (it \
                 would lead out of the sandbox: `cd /proc/self/fd/{fd}/..`)"
            ));
        }
        let abi = landlock_abi();
        if abi < 6 {
            let feature = if abi == 0 {
                "Landlock is not available".to_string()
            } else {
                format!(
                    "Landlock ABI 6 is needed (signal and abstract-socket scoping), this kernel has ABI {abi}"
                )
            };
            if !self.best_effort {
                return Err(SandboxError::Unsupported {
                    feature,
                    setting:
                        "use Linux 6.12 or later with `lsm=...,landlock` on the kernel command line"
                            .into(),
                });
            }
            warnings.push(format!(
                "best effort: {feature}; running with the mount namespace and what Landlock offers"
            ));
        }
        if let Some(fd) = self.passed_pipe
            && !sys::is_pipe(fd)
        {
            return Err(SandboxError::Policy {
                message: format!(
                    "descriptor {fd} is not an open pipe; only a pipe can be passed to the program"
                ),
            });
        }
        let euid = sys::geteuid();
        let egid = sys::getegid();
        let switch_user = match &self.user {
            None => None,
            Some(name) => {
                if euid != 0 {
                    return Err(SandboxError::Policy {
                        message: "--user needs stockade to be started as root".into(),
                    });
                }
                let (uid, gid, _) = sys::lookup_user(name).ok_or_else(|| SandboxError::Policy {
                    message: format!("no user named '{name}'; create it (useradd --system {name}) or pick another"),
                })?;
                Some((uid, gid))
            }
        };
        let limits = policy.limits();
        if limits.pids.is_some() && euid == 0 && switch_user.is_none_or(|(u, _)| u == 0) {
            let message = "limits.pids cannot be enforced for uid 0 (the kernel exempts root from RLIMIT_NPROC); pass --user NAME to run as an unprivileged user, or remove the pids limit".to_string();
            if !self.best_effort {
                return Err(SandboxError::Policy { message });
            }
            warnings.push(format!("best effort: {message}"));
        }

        let vars = policy.variables();
        let cwd = match self
            .cwd
            .clone()
            .or_else(|| vars.get("CWD").map(PathBuf::from))
        {
            Some(c) => c,
            None => std::env::current_dir()
                .map_err(SandboxError::io("cannot read the current directory"))?,
        };
        let cwd_c = CanonicalPath::resolve(&cwd).map_err(SandboxError::io(format!(
            "cannot resolve '{}'",
            cwd.display()
        )))?;
        let temp_dir = self
            .temp_dir
            .clone()
            .or_else(|| vars.get("TEMP_DIR").map(PathBuf::from))
            .unwrap_or_else(new_temp_dir_path);

        // The environment: nothing from the caller unless passed.
        let caller_env = self
            .caller_env
            .clone()
            .unwrap_or_else(|| std::env::vars_os().collect());
        let mut env: Vec<(OsString, OsString)> = Vec::new();
        for name in &policy.env().pass {
            if let Some((_, v)) = caller_env
                .iter()
                .find(|(k, _)| k.as_os_str() == OsStr::new(name))
            {
                env.push((name.into(), v.clone()));
            }
        }
        for (k, v) in &policy.env().set {
            set_var(&mut env, k, v);
        }
        for k in ["TEMP_DIR", "TMPDIR"] {
            set_var(&mut env, k, &temp_dir);
        }
        let proxy_port = policy.net().rules().map(|_| PROXY_PORT);
        if let Some(port) = proxy_port {
            let mut vars = proxy_env(port);
            // A gateway's base URL, and a placeholder where a client insists on a key of its own: the
            // real key stays with the supervisor.
            for gateway in policy.gateways() {
                for k in &gateway.url_env {
                    vars.push((k.clone(), gateway.local_url(port)));
                }
                for k in &gateway.placeholder_env {
                    vars.push((k.clone(), GATEWAY_PLACEHOLDER.into()));
                }
            }
            for (k, v) in vars {
                set_var(&mut env, k, v);
            }
        }

        let exec_path = resolve_program(&self.program, &cwd_c, &env)?;
        let exec_c = CanonicalPath::resolve(&exec_path)
            .map_err(SandboxError::io("cannot resolve the program"))?;
        let decision = policy.decide(&exec_c, Access::Read);
        if let Some(d) = policy.denial(&exec_c, Access::Read, decision) {
            return Err(SandboxError::NotExecutable {
                program: exec_path.display().to_string(),
                reason: d.to_string(),
            });
        }

        prepare_caches(policy, &mut warnings)?;
        let plan = MountPlan::new(policy, &temp_dir, limits.memory, self.siblings)?;
        let cache_store = match &self.cache_store {
            Some(dir) if plan.mounts.iter().any(|m| m.op == MountOp::Overlay) => {
                Some(CacheStore::lock(dir)?)
            }
            _ => None,
        };
        // The working directory must exist inside: granted, or a directory on the way to something granted
        // (e.g. the project root of a policy that grants only `src/**/*.ts`).
        if let Some(area) = plan.private_area_hiding(cwd_c.as_path()) {
            return Err(SandboxError::CwdInPrivateArea {
                cwd: cwd.clone(),
                area: area.to_path_buf(),
            });
        }
        if !plan.has_directory(cwd_c.as_path()) {
            let decision = policy.decide(&cwd_c, Access::Read);
            let reason = policy
                .denial(&cwd_c, Access::Read, decision)
                .map_or_else(|| "it is masked".to_string(), |d| d.to_string());
            return Err(SandboxError::CwdNotVisible {
                cwd: cwd.clone(),
                reason,
            });
        }
        Ok(Sandbox {
            policy: self.policy.clone(),
            plan,
            exec_path,
            program: self.program,
            args: self.args,
            env,
            cwd: cwd_c.into_path_buf(),
            temp_dir,
            user_ns: (euid != 0).then_some((euid, egid)),
            switch_user,
            landlock_hard: !self.best_effort,
            stdio: self.stdio,
            stdin_null: self.stdin_null,
            passed_pipe: self.passed_pipe,
            cache_store,
            namespaces: self.namespaces,
            snapshots: HashMap::new(),
            warnings,
        })
    }
}

fn resolve_program(
    program: &OsStr,
    cwd: &CanonicalPath,
    env: &[(OsString, OsString)],
) -> Result<PathBuf, SandboxError> {
    let shown = program.to_string_lossy().into_owned();
    if program.is_empty() {
        return Err(SandboxError::NotFound {
            program: shown,
            path: String::new(),
        });
    }
    let check = |p: &Path| -> Result<PathBuf, SandboxError> {
        let meta = std::fs::metadata(p).map_err(|_| SandboxError::NotFound {
            program: shown.clone(),
            path: p.display().to_string(),
        })?;
        if meta.is_dir() || meta.permissions().mode() & 0o111 == 0 {
            return Err(SandboxError::NotExecutable {
                program: p.display().to_string(),
                reason: "not an executable file".into(),
            });
        }
        Ok(p.to_path_buf())
    };
    if program.as_bytes().contains(&b'/') {
        return check(&cwd.as_path().join(program));
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(program);
        if candidate.is_file() {
            return check(&candidate);
        }
    }
    Err(SandboxError::NotFound {
        program: shown,
        path: path.to_string_lossy().into_owned(),
    })
}

/// A sandbox ready to start: the plan, the program and its environment, all checked.
#[derive(Debug)]
pub struct Sandbox {
    policy: Arc<ResolvedPolicy>,
    plan: MountPlan,
    exec_path: PathBuf,
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    cwd: PathBuf,
    temp_dir: PathBuf,
    user_ns: Option<(u32, u32)>,
    switch_user: Option<(u32, u32)>,
    landlock_hard: bool,
    stdio: Stdio,
    stdin_null: bool,
    passed_pipe: Option<RawFd>,
    cache_store: Option<CacheStore>,
    namespaces: Option<Namespaces>,
    /// By the bytes of their canonical paths.
    snapshots: HashMap<OsString, SnapshotBytes>,
    warnings: Vec<String>,
}

/// Which of this process's descriptors 0 to 2 are directories or path handles (`O_PATH`), with their
/// names: given to the program, either leads out of the sandbox.
fn directory_stdio() -> Vec<(RawFd, &'static str)> {
    [(0, "stdin"), (1, "stdout"), (2, "stderr")]
        .into_iter()
        .filter(|(fd, _)| {
            sys::fstat_kind(*fd).is_ok_and(|k| k == libc::S_IFDIR)
                || sys::status_flags(*fd).is_some_and(|f| f & libc::O_PATH != 0)
        })
        .collect()
}

/// Feeds this process's stdin (a file) into the pipe `w` the program reads as its stdin, on a thread of
/// its own, until the file ends or the program's end is closed (`EPIPE`: `SIGPIPE` is blocked on the
/// thread, so it ends the copy and not the supervisor).
fn relay_stdin(w: RawFd) {
    std::thread::spawn(move || {
        let _ = sys::block_signals(&[libc::SIGPIPE]);
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = sys::read(0, &mut buf) {
            if sys::write_all(w, buf.get(..n).unwrap_or_default()).is_err() {
                break;
            }
        }
        sys::close(w);
    });
}

/// Whether this process's descriptor `fd` is a file of the host's own (a regular file or a block
/// device; directories and path handles are replaced, see [`directory_stdio`]): the program gets a pipe
/// in its place, which the supervisor feeds or drains. Handed over as it is, a program could `fchmod`,
/// `fchown`, `fsetxattr`, `ftruncate` or `fallocate` the user's file, drop `O_APPEND` from `>> log`,
/// or reopen it through `/proc/self/fd/N` where Landlock reads its host path without the sandbox's
/// masks (issue 30, third red-team run). Pipes, sockets and terminals pass as they are.
fn is_host_file(fd: RawFd) -> bool {
    sys::fstat_kind(fd).is_ok_and(|k| k == libc::S_IFREG || k == libc::S_IFBLK)
}

/// Makes each missing cache directory (a `cache` scope that decides its own path), as the tool that owns
/// it would on first use: an overlay needs a directory to mount on, and the host's home is read-only
/// inside. Its missing parents are made too where they would lie beneath the user's home (`~/.cache` on
/// a fresh account, which pip and uv would create) or in a directory programs may write (where a program
/// would otherwise make the cache's directory itself, on the host, and write through it): so what
/// `explain` allows a program can do, and a cache's writes never reach the host. Elsewhere only a cache
/// whose parent exists is made. Refuses a cache that is not a directory; one that cannot be made is
/// named in a warning.
fn prepare_caches(policy: &ResolvedPolicy, warnings: &mut Vec<String>) -> Result<(), SandboxError> {
    // Canonical, as the caches' paths are; looked up once, and only when a cache's parent is missing.
    let home = std::cell::OnceCell::new();
    let home = || {
        home.get_or_init(|| {
            let home = Path::new(policy.variables().get("HOME")?);
            std::fs::canonicalize(home)
                .ok()
                .filter(|h| h.as_path() != Path::new("/"))
        })
        .as_deref()
    };
    let mut created = Vec::new();
    for scope in policy.scopes() {
        let (stockade_policy::ScopeTarget::Path(target), stockade_policy::ScopeKind::Cache) =
            (&scope.target, scope.kind)
        else {
            continue;
        };
        let path = target.canonical.as_path();
        if policy.path_scope_level(&target.canonical) != stockade_policy::Level::Write {
            continue;
        }
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(SandboxError::Policy {
                    message: format!(
                        "fs.cache = \"{}\" ({}) is not a directory; a cache is a directory a tool fills (name its directory, or move the rule to fs.read)",
                        scope.written,
                        path.display()
                    ),
                });
            }
            Err(_) => match create_cache_dir(path, |anchor| {
                home().is_some_and(|h| anchor.starts_with(h))
                    || policy
                        .decide(
                            &CanonicalPath::assume_canonical(anchor.to_path_buf()),
                            Access::Write,
                        )
                        .is_allow()
            }) {
                Ok(made) if made.len() > 1 => created.push(format!(
                    "'{}' (and {} '{}')",
                    path.display(),
                    if made.len() > 2 { "its parents" } else { "its parent" },
                    made[..made.len() - 1].join("', '")
                )),
                Ok(made) if !made.is_empty() => created.push(format!("'{}'", path.display())),
                // Already there (someone else made it meanwhile), or not to be made: a cache whose
                // parents are missing in a read-only tree belongs to a tool not installed here.
                Ok(_) => {}
                // A home on a read-only disk, say: without its directory the cache has no overlay, and
                // programs, with no more right than this process, cannot make it either.
                Err(e) => warnings.push(format!(
                    "cannot create the cache directory '{}' (fs.cache = \"{}\"): {e}; programs cannot use that cache in this run",
                    path.display(),
                    scope.written
                )),
            },
        }
    }
    if !created.is_empty() {
        warnings.push(format!(
            "created empty cache directories to mount their private overlays on (once; the host's stay empty): {}",
            created.join(", ")
        ));
    }
    Ok(())
}

/// Creates the missing directories down to `path`: all of them when `parents_allowed` says so of the
/// deepest existing one, otherwise only `path` itself, whose parent must exist. Each new directory is its
/// owner's alone (0700) and, when this process is root, owned like the directory it was made in, so a
/// home's caches stay its user's. Returns the directories made, outermost first (none if `path` cannot be
/// made here).
fn create_cache_dir(
    path: &Path,
    parents_allowed: impl Fn(&Path) -> bool,
) -> std::io::Result<Vec<String>> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let mut missing = Vec::new();
    let mut existing = path;
    // Stops at the first entry that exists, whatever it is: a file or a dangling symlink there means
    // this cache cannot be made.
    while std::fs::symlink_metadata(existing).is_err() {
        missing.push(existing);
        match existing.parent() {
            Some(parent) => existing = parent,
            None => return Ok(Vec::new()),
        }
    }
    let Ok(anchor) = std::fs::metadata(existing) else {
        return Ok(Vec::new());
    };
    if !anchor.is_dir() || (missing.len() > 1 && !parents_allowed(existing)) {
        return Ok(Vec::new());
    }
    let mut made = Vec::new();
    for dir in missing.into_iter().rev() {
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
        if sys::geteuid() == 0 && anchor.uid() != 0 {
            std::os::unix::fs::lchown(dir, Some(anchor.uid()), Some(anchor.gid()))?;
        }
        made.push(dir.display().to_string());
    }
    Ok(made)
}

/// Creates `dir` and its missing parents, each new one readable by its owner alone.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// A directory that keeps the caches' upper layers from run to run, locked for one run.
#[derive(Debug)]
struct CacheStore {
    dir: PathBuf,
    lock: std::fs::File,
}

impl CacheStore {
    fn lock(dir: &Path) -> Result<Self, SandboxError> {
        private_dir(dir).map_err(SandboxError::io(format!(
            "cannot create the cache store '{}'",
            dir.display()
        )))?;
        let dir = dir.canonicalize().map_err(SandboxError::io(format!(
            "cannot resolve the cache store '{}'",
            dir.display()
        )))?;
        let lock_path = dir.join("lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(SandboxError::io(format!(
                "cannot open '{}'",
                lock_path.display()
            )))?;
        let locked = sys::try_lock_exclusive(lock.as_raw_fd()).map_err(SandboxError::io(
            format!("cannot lock '{}'", lock_path.display()),
        ))?;
        if !locked {
            return Err(SandboxError::Policy {
                message: format!(
                    "the cache store '{}' is in use by another run; wait for it to end, or give this run another agent id (--agent)",
                    dir.display()
                ),
            });
        }
        Ok(CacheStore { dir, lock })
    }

    fn lock_fd(&self) -> RawFd {
        self.lock.as_raw_fd()
    }

    /// The upper and work directories of the cache at `path`, made if missing: one directory per
    /// cache, named by its path with `%` and `/` escaped (`/root/.npm` is `%2Froot%2F.npm`).
    fn layers(&self, path: &Path) -> Result<(PathBuf, PathBuf), SandboxError> {
        let mut name = Vec::new();
        for b in path.as_os_str().as_bytes() {
            match b {
                b'%' => name.extend_from_slice(b"%25"),
                b'/' => name.extend_from_slice(b"%2F"),
                b => name.push(*b),
            }
        }
        let base = self.dir.join(OsStr::from_bytes(&name));
        let (upper, work) = (base.join("upper"), base.join("work"));
        for d in [&upper, &work] {
            private_dir(d).map_err(SandboxError::io(format!(
                "cannot create '{}' in the cache store",
                d.display()
            )))?;
        }
        Ok((upper, work))
    }
}

/// Escapes a path for overlayfs's options, where `,` separates options, `:` lower layers, and `\`
/// escapes either.
fn overlay_option_path(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    for b in path {
        if matches!(b, b',' | b':' | b'\\') {
            out.push(b'\\');
        }
        out.push(*b);
    }
    out
}

fn cstring(bytes: impl Into<Vec<u8>>) -> Result<CString, SandboxError> {
    CString::new(bytes).map_err(|_| SandboxError::Policy {
        message: "a path, argument or variable contains a NUL byte".into(),
    })
}

impl Sandbox {
    /// Shows the program each file's `bytes` instead of the host's file at that path (canonical, granted
    /// read-only by the policy): the caller knows exactly what the program reads (no change on disk after
    /// the caller read it reaches the program), and the private root needs no mount for it. Each is a
    /// read-only file, mode 0444, in the sandbox's own root. Where the plan cannot hold a snapshot (the
    /// file lies inside a directory grant, or is writable: see [`MountPlan::use_snapshots`]) the host's
    /// file stays bound. Returns the paths that became snapshots; the plan shows them.
    pub fn snapshot_files(
        &mut self,
        files: impl IntoIterator<Item = (PathBuf, Arc<[u8]>)>,
    ) -> Vec<PathBuf> {
        let files: HashMap<OsString, Arc<[u8]>> = files
            .into_iter()
            .map(|(path, bytes)| (path.into_os_string(), bytes))
            .collect();
        let sizes: Vec<(&Path, u64)> = files
            .iter()
            .map(|(path, bytes)| (Path::new(path), bytes.len() as u64))
            .collect();
        let replaced = self.plan.use_snapshots(&sizes);
        for path in &replaced {
            if let Some(bytes) = files.get(path.as_os_str()) {
                self.snapshots.insert(
                    path.as_os_str().to_os_string(),
                    SnapshotBytes(bytes.clone()),
                );
            }
        }
        replaced
    }

    /// The computed private root.
    pub fn plan(&self) -> &MountPlan {
        &self.plan
    }

    /// Things that hold only in part (best-effort mode).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The private temp dir's path (inside the sandbox only).
    pub fn temp_dir(&self) -> &Path {
        &self.temp_dir
    }

    /// The environment the program gets.
    pub fn env(&self) -> &[(OsString, OsString)] {
        &self.env
    }

    /// Starts the program. The calling thread must be the process's only thread: the sandbox's init is a
    /// fork of it.
    pub fn spawn(mut self) -> Result<RunningSandbox, SandboxError> {
        reap_exited_children();
        let mut ops = Vec::new();
        let mut mkdirs = Vec::new();
        // Directories of the empty root to create before each mount: each once, and none where the
        // nearest enclosing mount is a directory bind (those exist already, on the host). Beneath a mask
        // (an empty tmpfs) they must be made, for a deeper grant to have a mount point.
        let mut made: std::collections::HashSet<OsString> = std::collections::HashSet::new();
        // Directory mounts made so far (parents come first): visible (a bind) or not (a mask).
        let mut mounted: HashMap<&OsStr, bool> = HashMap::new();
        // Private cache layers made so far, all in one tmpfs (a mount each cost a launch more), in the
        // staging root beside /newroot: never visible inside.
        let mut caches = 0usize;
        const LAYERS: &str = "/cache-layers";
        let cache_layers = (
            cstring(LAYERS)?,
            cstring(
                crate::overlay::layers_tmpfs_options(self.policy.limits().memory)
                    .iter()
                    .map(|(key, value)| format!("{key}={value}"))
                    .collect::<Vec<_>>()
                    .join(","),
            )?,
        );
        // The same overlays by host paths, for the supervisor to make beside the init (overlay.rs).
        let mut detached = Vec::new();
        for m in &self.plan.mounts {
            let dst = cstring(under("/newroot", &m.path).into_vec())?;
            let mut parents = Vec::new();
            let mut acc = PathBuf::from("/");
            // The nearest enclosing directory mount, found while walking down.
            let mut nearest = mounted.get(OsStr::new("/")).copied();
            let comps: Vec<_> = m.path.components().skip(1).collect();
            for c in comps.iter().take(comps.len().saturating_sub(1)) {
                acc.push(c);
                if let Some(visible) = mounted.get(acc.as_os_str()) {
                    nearest = Some(*visible);
                }
                if nearest == Some(true) || !made.insert(acc.as_os_str().to_os_string()) {
                    continue;
                }
                // Inside a mask a directory only carries a deeper grant: searchable, not listable.
                let mode = if nearest.is_some() { 0o111 } else { 0o755 };
                parents.push((cstring(under("/newroot", &acc).into_vec())?, mode));
            }
            match m.op {
                MountOp::Bind { dir: true, .. } | MountOp::Overlay => {
                    mounted.insert(m.path.as_os_str(), true);
                }
                MountOp::MaskDir => {
                    mounted.insert(m.path.as_os_str(), false);
                }
                _ => {}
            }
            mkdirs.push(parents);
            let op = match &m.op {
                MountOp::Bind { write, dir } => PreparedOp::Bind {
                    src: cstring(under("/oldroot", &m.path).into_vec())?,
                    dst,
                    write: *write,
                    dir: *dir,
                },
                MountOp::MaskDir => PreparedOp::MaskDir { dst },
                MountOp::MaskFile => PreparedOp::MaskFile { dst },
                MountOp::PrivateTmpfs { mode, size } => {
                    let data = match size {
                        Some(s) => format!("mode={mode:o},size={s}"),
                        None => format!("mode={mode:o}"),
                    };
                    PreparedOp::Tmpfs {
                        dst,
                        data: cstring(data)?,
                    }
                }
                MountOp::Overlay => {
                    let lower = under("/oldroot", &m.path).into_vec();
                    let (upper, work, private) = match &self.cache_store {
                        Some(store) => {
                            let (upper, work) = store.layers(&m.path)?;
                            let layers = (
                                under("/oldroot", &upper).into_vec(),
                                under("/oldroot", &work).into_vec(),
                                None,
                            );
                            detached.push(DetachedOverlay {
                                lower: m.path.clone(),
                                upper: UpperLayer::Stored { upper, work },
                            });
                            layers
                        }
                        None => {
                            detached.push(DetachedOverlay {
                                lower: m.path.clone(),
                                upper: UpperLayer::Private,
                            });
                            let dir = format!("{LAYERS}/{caches}");
                            caches += 1;
                            let work = format!("{dir}/work").into_bytes();
                            let private = child::PrivateLayer {
                                dir: cstring(dir.clone())?,
                                work: cstring(work.clone())?,
                            };
                            (format!("{dir}/upper").into_bytes(), work, Some(private))
                        }
                    };
                    let mut data = b"lowerdir=".to_vec();
                    data.extend(overlay_option_path(&lower));
                    data.extend_from_slice(b",upperdir=");
                    data.extend(overlay_option_path(&upper));
                    data.extend_from_slice(b",workdir=");
                    data.extend(overlay_option_path(&work));
                    PreparedOp::Overlay {
                        dst,
                        lower: cstring(lower)?,
                        upper: cstring(upper)?,
                        private,
                        data: cstring(data)?,
                    }
                }
                MountOp::Proc => PreparedOp::Proc { dst },
                MountOp::Dev => PreparedOp::Dev {
                    dst,
                    devices: child::standard_devices(),
                    links: child::standard_dev_links(),
                },
                MountOp::Stub { dir } => PreparedOp::Stub { dst, dir: *dir },
                MountOp::Symlink { target } => PreparedOp::Symlink {
                    target: cstring(target.as_os_str().as_bytes())?,
                    dst,
                },
                MountOp::Snapshot { .. } => PreparedOp::Snapshot {
                    dst,
                    bytes: self
                        .snapshots
                        .get(m.path.as_os_str())
                        .map(|b| b.0.clone())
                        .ok_or_else(|| SandboxError::Policy {
                            message: format!(
                                "the plan holds a snapshot of '{}' but no bytes were given for it",
                                m.path.display()
                            ),
                        })?,
                },
            };
            ops.push(op);
        }

        let argv: Vec<CString> = std::iter::once(&self.program)
            .chain(self.args.iter())
            .map(|a| cstring(a.as_bytes()))
            .collect::<Result<_, _>>()?;
        let envp: Vec<CString> = self
            .env
            .iter()
            .map(|(k, v)| {
                let mut kv = k.as_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                cstring(kv)
            })
            .collect::<Result<_, _>>()?;
        let mut argv_ptrs: Vec<_> = argv.iter().map(|c| c.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        let mut envp_ptrs: Vec<_> = envp.iter().map(|c| c.as_ptr()).collect();
        envp_ptrs.push(std::ptr::null());

        let limits = self.policy.limits();
        let mut rlimits = vec![(libc::RLIMIT_CORE, 0)];
        if let Some(m) = limits.memory {
            rlimits.push((libc::RLIMIT_DATA, m));
        }
        if let Some(p) = limits.pids {
            rlimits.push((libc::RLIMIT_NPROC, p));
        }
        if let Some(f) = limits.file_size {
            rlimits.push((libc::RLIMIT_FSIZE, f));
        }
        let cap_last = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(63);

        let piped = self.stdio == Stdio::Collect
            || limits.output.is_some()
            || is_host_file(1)
            || is_host_file(2);
        // A file as stdin is fed to the program through a pipe by a thread of the supervisor.
        let stdin_relay = if !self.stdin_null && is_host_file(0) {
            Some(sys::pipe().map_err(SandboxError::io("pipe"))?)
        } else {
            None
        };
        let (err_r, err_w) = sys::pipe().map_err(SandboxError::io("pipe"))?;
        let (status_r, status_w) = sys::pipe().map_err(SandboxError::io("pipe"))?;
        let out = if piped {
            Some(sys::pipe().map_err(SandboxError::io("pipe"))?)
        } else {
            None
        };
        let errout = if piped {
            Some(sys::pipe().map_err(SandboxError::io("pipe"))?)
        } else {
            None
        };
        // Numbered 64 or above so that the child's moves to 3 and 4 cannot overwrite it first.
        let passed_pipe = match self.passed_pipe {
            Some(fd) => {
                Some(sys::dup_above(fd, 64).map_err(SandboxError::io("dup the passed pipe"))?)
            }
            None => None,
        };
        let stdin_null = if self.stdin_null {
            let f = std::fs::File::open("/dev/null").map_err(SandboxError::io("open /dev/null"))?;
            Some(f)
        } else {
            None
        };
        // A directory among 0 to 2 is a way out: the kernel walks from it, and `..` from it, in the
        // host's tree, where no mask or read-only bind of the private root applies and Landlock's rules
        // on the granted directories still do (issue 30: `cd /proc/self/fd/0/../..` read /etc/shadow).
        // It becomes /dev/null in the child, as `stdin_null` does.
        let directories: Vec<RawFd> = directory_stdio().into_iter().map(|(fd, _)| fd).collect();
        let dev_null_rw = if directories.is_empty() {
            None
        } else {
            Some(
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open("/dev/null")
                    .map_err(SandboxError::io("open /dev/null"))?,
            )
        };

        let (mediator_sup, mediator_child) = socketpair_for_child("the mediator")?;
        // The proxy's listener comes back over this pair.
        let proxy_pair = match self.policy.net().rules() {
            Some(_) => match socketpair_for_child("the proxy listener") {
                Ok(pair) => Some(pair),
                Err(e) => {
                    sys::close(mediator_sup);
                    sys::close(mediator_child);
                    return Err(e);
                }
            },
            None => None,
        };
        // The cache overlays come over this pair when the supervisor may make them: as root, the
        // sandbox in the host's user namespace.
        let overlay_pair = if detached.is_empty() || self.user_ns.is_some() {
            None
        } else {
            match socketpair_for_child("the cache overlays") {
                Ok(pair) => Some(pair),
                Err(e) => {
                    for fd in [mediator_sup, mediator_child]
                        .into_iter()
                        .chain(proxy_pair.into_iter().flat_map(|(a, b)| [a, b]))
                    {
                        sys::close(fd);
                    }
                    return Err(e);
                }
            }
        };
        let old_mask =
            sys::block_signals(CANCEL_SIGNALS).map_err(SandboxError::io("block signals"))?;
        let sigfd = match sys::signalfd(CANCEL_SIGNALS) {
            Ok(fd) => fd,
            Err(e) => {
                let _ = sys::set_signal_mask(&old_mask);
                return Err(SandboxError::io("signalfd")(e));
            }
        };

        // Joined whether it is used or not: nothing may run beside the clone.
        let made = self
            .namespaces
            .take()
            .map(|mut ns| ns.join())
            .unwrap_or_default();
        let net_ns = self.policy.net().private_namespace();
        let made_net = made.net.filter(|_| net_ns && self.user_ns.is_none());
        let staged_root = made.staged_root.filter(|_| self.user_ns.is_none());
        let prepared = Prepared {
            user_ns: self.user_ns,
            net_ns,
            net_ns_fd: made_net.as_ref().map(AsRawFd::as_raw_fd),
            staged_root: staged_root.as_ref().map(AsRawFd::as_raw_fd),
            ops,
            mkdirs,
            landlock: self.plan.landlock.clone(),
            landlock_hard: self.landlock_hard,
            cwd: cstring(self.cwd.as_os_str().as_bytes())?,
            exec_path: cstring(self.exec_path.as_os_str().as_bytes())?,
            _argv: argv,
            argv_ptrs,
            _envp: envp,
            envp_ptrs,
            rlimits,
            switch_user: self.switch_user,
            stdout_w: out.map(|(_, w)| w),
            stderr_w: errout.map(|(_, w)| w),
            err_w,
            passed_pipe,
            mediator_sock: mediator_child,
            mediator_sup,
            seccomp: crate::seccomp::program(),
            proxy: proxy_pair.map(|(_, child)| (child, PROXY_PORT)),
            proxy_sup: proxy_pair.map(|(sup, _)| sup),
            cache_layers,
            overlay_sock: overlay_pair.map(|(_, child)| child),
            overlay_sup: overlay_pair.map(|(sup, _)| sup),
            cache_lock: self.cache_store.as_ref().map(CacheStore::lock_fd),
            status_w,
            old_mask,
            cap_last,
            strings: Strings::new(),
        };

        let mut flags = libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
        // With a staged root the init joins that mount namespace: a copy of the host's would be thrown
        // away, and throwing a mount namespace away waits for a grace period of RCU.
        if prepared.staged_root.is_none() {
            flags |= libc::CLONE_NEWNS;
        }
        if prepared.net_ns && prepared.net_ns_fd.is_none() {
            flags |= libc::CLONE_NEWNET;
        }
        if prepared.user_ns.is_some() {
            flags |= libc::CLONE_NEWUSER;
        }
        let start = Instant::now();
        let spawned = sys::clone_into_namespaces(flags);
        let pid = match spawned {
            Ok(Some(pid)) => pid,
            Ok(None) => {
                // Replaced in the child only; the supervisor keeps its own stdin.
                if let Some(f) = &stdin_null {
                    let _ = sys::dup2(f.as_raw_fd(), 0);
                }
                if let Some((r, w)) = stdin_relay {
                    sys::close(w);
                    if sys::dup2(r, 0).is_err() {
                        sys::exit_now(125);
                    }
                    sys::close(r);
                }
                if let Some(f) = &dev_null_rw {
                    for fd in &directories {
                        if sys::dup2(f.as_raw_fd(), *fd).is_err() {
                            // Never run with the directory in place.
                            sys::exit_now(125);
                        }
                    }
                }
                child::init_main(&prepared)
            }
            Err(e) => {
                let _ = sys::set_signal_mask(&old_mask);
                for fd in [
                    err_r,
                    err_w,
                    status_r,
                    status_w,
                    sigfd,
                    mediator_sup,
                    mediator_child,
                ]
                .into_iter()
                .chain(passed_pipe)
                .chain(proxy_pair.into_iter().flat_map(|(a, b)| [a, b]))
                .chain(overlay_pair.into_iter().flat_map(|(a, b)| [a, b]))
                .chain(stdin_relay.into_iter().flat_map(|(a, b)| [a, b]))
                {
                    sys::close(fd);
                }
                if prepared.user_ns.is_some()
                    && matches!(
                        e.raw_os_error(),
                        Some(libc::EPERM | libc::EINVAL | libc::ENOSPC | libc::EUSERS)
                    )
                {
                    return Err(SandboxError::UserNamespaces { source: e });
                }
                return Err(SandboxError::Setup {
                    stage: "create namespaces",
                    source: e,
                });
            }
        };
        if let Some((r, w)) = stdin_relay {
            sys::close(r);
            relay_stdin(w);
        }
        // The init has its copy; the mediator, forked next, must not get one.
        drop(made_net);
        sys::close(err_w);
        sys::close(status_w);
        if let Some(fd) = passed_pipe {
            sys::close(fd);
        }
        if let Some((_, w)) = out {
            sys::close(w);
        }
        if let Some((_, w)) = errout {
            sys::close(w);
        }
        sys::close(mediator_child);
        if let Some((_, child)) = overlay_pair {
            sys::close(child);
        }
        let proxy_listener = proxy_pair.map(|(sup, child)| {
            sys::close(child);
            ProxyListener { sock: sup }
        });
        // Forked now that this process holds none of the program's pipe ends: the mediator must not
        // keep a stream open after the program is gone.
        let mediator_config = crate::mediate::MediatorConfig {
            user_ns: prepared.user_ns.is_some(),
            policy: self.policy.clone(),
            private: self.plan.private_areas(),
            // The user namespace maps the caller's ids to themselves.
            ids: prepared
                .switch_user
                .unwrap_or((sys::geteuid(), sys::getegid())),
            private_net: prepared.net_ns,
            create_dirs: self.plan.create_dirs(),
            writable_roots: self.plan.writable_roots(),
        };
        // The mediator keeps no end of the overlays' stream either: the init must see it end when the
        // overlay thread ends; nor of the stdin relay, whose end the program must see.
        let inherited: Vec<RawFd> = self
            .cache_store
            .iter()
            .map(CacheStore::lock_fd)
            .chain(overlay_pair.map(|(sup, _)| sup))
            .chain(stdin_relay.map(|(_, w)| w))
            .collect();
        let mediator = crate::mediate::spawn(mediator_sup, &mediator_config, &inherited);
        sys::close(mediator_sup);
        let mediator = match mediator {
            Ok(m) => m,
            Err(e) => {
                if let Some((sup, _)) = overlay_pair {
                    sys::close(sup);
                }
                let _ = sys::kill(pid, libc::SIGKILL);
                let _ = sys::waitpid(pid, 0);
                return Err(SandboxError::Setup {
                    stage: "start the mediator",
                    source: e,
                });
            }
        };
        // Started once the last fork is done, and joined before this returns: the supervisor forks
        // single-threaded. The init meanwhile mounts everything else.
        let _overlays = overlay_pair.map(|(sup, _)| {
            JoinOnDrop(crate::overlay::make_beside(
                detached,
                self.policy.limits().memory,
                sup,
            ))
        });
        let _ = sys::set_nonblocking(mediator.report);
        let pidfd = sys::pidfd_open(pid).map_err(SandboxError::io("pidfd_open"))?;
        for fd in [err_r, status_r]
            .into_iter()
            .chain(out.map(|(r, _)| r))
            .chain(errout.map(|(r, _)| r))
        {
            let _ = sys::set_nonblocking(fd);
        }
        Ok(RunningSandbox {
            pid,
            pidfd,
            sigfd,
            old_mask,
            err_r,
            status_r,
            reaped: false,
            out_r: out.map(|(r, _)| r),
            errout_r: errout.map(|(r, _)| r),
            start,
            timeout: limits.timeout,
            output_limit: limits.output,
            stdio: self.stdio,
            temp_dir: self.temp_dir,
            warnings: self.warnings,
            mediator,
            proxy_listener,
            _cache_store: self.cache_store,
        })
    }
}

/// The proxy's listening socket on its way from the sandbox's network namespace, where the init makes it
/// (`127.0.0.1:`[`PROXY_PORT`] inside), to the caller who serves it
/// ([`RunningSandbox::take_proxy_listener`]). Until it is served, the program's connections wait.
#[derive(Debug)]
pub struct ProxyListener {
    sock: RawFd,
}

impl ProxyListener {
    /// Waits for the init to send the listener (it does so before the program starts).
    pub fn receive(self) -> std::io::Result<std::net::TcpListener> {
        let received = sys::recv_fds(self.sock);
        match received? {
            Some(mut fds) if fds.len() == 1 => match fds.pop() {
                Some(fd) => Ok(std::net::TcpListener::from(fd)),
                None => Err(std::io::Error::other("no listener arrived")),
            },
            Some(_) => Err(std::io::Error::other(
                "the sandbox sent other than one listener",
            )),
            None => Err(std::io::Error::other(
                "the sandbox ended before it made the proxy's listener",
            )),
        }
    }
}

impl Drop for ProxyListener {
    fn drop(&mut self) {
        sys::close(self.sock);
    }
}

/// A started sandbox. Dropping it without [`RunningSandbox::wait`] kills the whole tree.
#[derive(Debug)]
pub struct RunningSandbox {
    pid: libc::pid_t,
    pidfd: RawFd,
    sigfd: RawFd,
    old_mask: libc::sigset_t,
    err_r: RawFd,
    status_r: RawFd,
    /// The init has been waited for (or handed to a reaper): its pid is no longer ours to signal.
    reaped: bool,
    out_r: Option<RawFd>,
    errout_r: Option<RawFd>,
    start: Instant,
    timeout: Option<Duration>,
    output_limit: Option<u64>,
    stdio: Stdio,
    temp_dir: PathBuf,
    warnings: Vec<String>,
    mediator: crate::mediate::MediatorProcess,
    proxy_listener: Option<ProxyListener>,
    /// Held (locked) until the run is dropped.
    _cache_store: Option<CacheStore>,
}

/// Why a run was stopped by stockade rather than ending by itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
#[non_exhaustive]
pub enum StopReason {
    /// The time limit passed.
    Timeout {
        /// The limit, in milliseconds.
        limit_ms: u64,
    },
    /// stockade received this signal and cancelled the run.
    Cancelled {
        /// The signal number.
        signal: i32,
    },
    /// A stream exceeded the output limit.
    OutputLimit {
        /// `stdout` or `stderr`.
        stream: String,
        /// The limit in bytes.
        limit: u64,
    },
}

/// How a run ended.
#[derive(Debug, Clone, Serialize)]
pub struct RunOutcome {
    /// The program's exit code, when it exited by itself.
    pub exit_code: Option<i32>,
    /// The signal that ended the program, when one did.
    pub signal: Option<i32>,
    /// What `stockade run` exits with: the code, 128+signal, or 124 on timeout.
    pub status: i32,
    /// Wall time.
    pub duration_ms: u64,
    /// Whether the time limit ended it.
    pub timed_out: bool,
    /// Why stockade stopped it, if it did.
    pub stopped: Option<StopReason>,
    /// Peak resident memory of the largest process, in bytes.
    pub peak_memory_bytes: u64,
    /// Refusals stockade saw: the mediator's (creating a name, renaming, linking or connecting where the
    /// policy does not allow it), as `<call> <access> <path>`. Landlock and mount refusals are seen only
    /// by the confined process (see the crate's Limitations).
    pub denials_observed: Vec<String>,
    /// The mediator's refusals, whole (at most 256 kept; `refused_calls` counts them all).
    pub refusals: Vec<crate::Refusal>,
    /// Calls the mediator handled (creations, renames, links, connects).
    pub mediated_calls: u64,
    /// Calls the mediator refused.
    pub refused_calls: u64,
    /// The private temp dir (it existed only inside the sandbox and is gone).
    pub temp_dir: PathBuf,
    /// Partial-enforcement warnings (best-effort mode).
    pub warnings: Vec<String>,
    /// Collected stdout ([`Stdio::Collect`]).
    #[serde(skip)]
    pub stdout: Vec<u8>,
    /// Collected stderr ([`Stdio::Collect`]).
    #[serde(skip)]
    pub stderr: Vec<u8>,
}

impl RunningSandbox {
    /// The sandbox's init process (PID 1 inside), as the supervisor sees it.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The proxy's listener, when the policy's network goes through the proxy (`net.allow`): the caller
    /// must serve it (`stockade-net`), or the program has no network at all. Taken once.
    pub fn take_proxy_listener(&mut self) -> Option<ProxyListener> {
        self.proxy_listener.take()
    }

    /// Kills the whole tree now.
    pub fn kill(&self) {
        let _ = sys::kill(self.pid, libc::SIGKILL);
    }

    /// Supervises until the program ends, the time limit passes, an output limit is hit, or stockade is
    /// asked to stop (SIGINT, SIGTERM, SIGHUP, SIGQUIT); in every case every process of the run is gone on
    /// return. (When the program left nothing running, the sandbox's init reports so and is reaped in the
    /// background while the kernel tears down its namespaces; it holds no privilege and nothing else.)
    pub fn wait(self) -> Result<RunOutcome, SandboxError> {
        self.wait_with(|_| {})
    }

    /// [`RunningSandbox::wait`], showing `on_stdout` the stdout collected so far (within the output limit)
    /// each time more of it arrives, so a caller can consume a stream while the program is still writing
    /// it. Only with [`Stdio::Collect`]; the whole stdout is still in the outcome. The program is not read
    /// from while `on_stdout` runs: a slow consumer slows the program (its pipe fills), it loses nothing.
    pub fn wait_with(
        mut self,
        mut on_stdout: impl FnMut(&[u8]),
    ) -> Result<RunOutcome, SandboxError> {
        let deadline = self.timeout.map(|t| self.start + t);
        let mut stopped = None;
        let mut timed_out = false;
        let mut setup_err: Vec<u8> = Vec::new();
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let mut counts = [0u64; 2];
        let mut err_open = true;
        let mut outs: [Option<RawFd>; 2] = [self.out_r, self.errout_r];
        let mut report_bytes = Vec::new();
        let mut init_exited = false;
        loop {
            let mut fds = vec![
                libc::pollfd {
                    fd: self.pidfd,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.sigfd,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: if err_open { self.err_r } else { -1 },
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.status_r,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            for o in outs {
                fds.push(libc::pollfd {
                    fd: o.unwrap_or(-1),
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            let wait_ms = match (deadline, stopped.is_some()) {
                (_, true) | (None, false) => -1,
                (Some(d), false) => d
                    .saturating_duration_since(Instant::now())
                    .as_millis()
                    .min(i32::MAX as u128) as i32,
            };
            let n = sys::poll(&mut fds, wait_ms).map_err(SandboxError::io("poll"))?;
            if n == 0 && stopped.is_none() && deadline.is_some_and(|d| Instant::now() >= d) {
                timed_out = true;
                stopped = Some(StopReason::Timeout {
                    limit_ms: self.timeout.map_or(0, |t| t.as_millis() as u64),
                });
                self.kill();
                continue;
            }
            if fds[1].revents & libc::POLLIN != 0
                && let Some(sig) = sys::read_signal(self.sigfd)
            {
                if stopped.is_none() {
                    stopped = Some(StopReason::Cancelled { signal: sig as i32 });
                }
                self.kill();
            }
            if err_open && fds[2].revents != 0 {
                err_open = drain(self.err_r, &mut setup_err);
            }
            for (i, o) in outs.iter_mut().enumerate() {
                let Some(fd) = *o else { continue };
                if fds[4 + i].revents == 0 {
                    continue;
                }
                let mut chunk = Vec::new();
                let open = drain(fd, &mut chunk);
                let collected = stdout.len();
                if let Some(over) = self.forward(
                    i,
                    &chunk,
                    &mut counts[i],
                    if i == 0 { &mut stdout } else { &mut stderr },
                ) {
                    if stopped.is_none() {
                        stopped = Some(over);
                    }
                    self.kill();
                }
                if stdout.len() > collected && stopped.is_none() {
                    on_stdout(&stdout);
                }
                if !open {
                    sys::close(fd);
                    *o = None;
                }
            }
            if fds[3].revents != 0 {
                drain(self.status_r, &mut report_bytes);
            }
            if fds[0].revents & libc::POLLIN != 0 {
                init_exited = true;
                break;
            }
            // The init reported that nothing else is left, and every pipe is closed: the run is over.
            let alone = InitReport::from_bytes(&report_bytes).is_some_and(|r| r.alone);
            if alone && stopped.is_none() && !err_open && outs.iter().all(Option::is_none) {
                break;
            }
        }
        let init_status = if init_exited {
            sys::waitpid(self.pid, 0)
                .map_err(SandboxError::io("waitpid"))?
                .1
        } else {
            reap_in_background(self.pid);
            0
        };
        self.reaped = true;
        // Everything in the namespace is dead now: drain what is left in the pipes.
        drain(self.err_r, &mut setup_err);
        for (i, o) in outs.iter_mut().enumerate() {
            if let Some(fd) = o.take() {
                let mut chunk = Vec::new();
                let _ = drain_blocking(fd, &mut chunk);
                let _ = self.forward(
                    i,
                    &chunk,
                    &mut counts[i],
                    if i == 0 { &mut stdout } else { &mut stderr },
                );
                sys::close(fd);
            }
        }
        drain(self.status_r, &mut report_bytes);
        let report = InitReport::from_bytes(&report_bytes);
        let duration_ms = self.start.elapsed().as_millis() as u64;

        if let (Some(stage), Some(errno)) = (setup_err.get(0..4), setup_err.get(4..8)) {
            let stage = u32::from_ne_bytes(stage.try_into().unwrap_or([0; 4]));
            let errno = i32::from_ne_bytes(errno.try_into().unwrap_or([0; 4]));
            if stopped.is_none() {
                let name = STAGES.get(stage as usize).copied().unwrap_or("unknown");
                let source = match setup_err.get(8..) {
                    Some(detail) if errno == 0 && !detail.is_empty() => {
                        std::io::Error::other(String::from_utf8_lossy(detail).into_owned())
                    }
                    _ => std::io::Error::from_raw_os_error(errno),
                };
                return Err(if stage == STAGE_EXEC {
                    SandboxError::Setup {
                        stage: "exec",
                        source,
                    }
                } else {
                    SandboxError::Setup {
                        stage: name,
                        source,
                    }
                });
            }
        }
        let (mut exit_code, mut signal) = (None, None);
        match report.map(|r| r.status) {
            Some(s) if libc::WIFEXITED(s) => exit_code = Some(libc::WEXITSTATUS(s)),
            Some(s) if libc::WIFSIGNALED(s) => signal = Some(libc::WTERMSIG(s)),
            _ => {
                // The init died before reporting: it was killed (timeout, cancel, limit) or crashed.
                if libc::WIFSIGNALED(init_status) {
                    signal = Some(libc::WTERMSIG(init_status));
                }
            }
        }
        let status = match (&stopped, exit_code, signal) {
            (Some(StopReason::Timeout { .. }), _, _) => 124,
            (Some(StopReason::Cancelled { signal }), _, _) => 128 + signal,
            (_, Some(code), _) => code,
            (_, None, Some(sig)) => 128 + sig,
            (_, None, None) => 125,
        };
        let findings = self.mediator_findings();
        let mut warnings = std::mem::take(&mut self.warnings);
        let findings = findings.unwrap_or_else(|| {
            warnings.push(
                "the mediator ended without a report: calls it should have answered failed (ENOSYS)"
                    .into(),
            );
            crate::mediate::Findings::default()
        });
        Ok(RunOutcome {
            exit_code,
            signal,
            status,
            duration_ms,
            timed_out,
            stopped,
            peak_memory_bytes: report.map_or_else(sys::children_max_rss, |r| r.peak_memory_bytes),
            denials_observed: findings
                .refusals
                .iter()
                .map(|r| format!("{} {} {}", r.call, r.access, r.path.display()))
                .collect(),
            refusals: findings.refusals,
            mediated_calls: findings.mediated,
            refused_calls: findings.refused,
            temp_dir: self.temp_dir.clone(),
            warnings,
            stdout,
            stderr,
        })
    }

    /// The mediator's report, once every process under the filter is gone (it then exits at once, and is
    /// reaped like an exiting init: its exit is not waited for).
    fn mediator_findings(&mut self) -> Option<crate::mediate::Findings> {
        let mut bytes = Vec::new();
        if !drain_blocking(self.mediator.report, &mut bytes) {
            // Still holding its report open after a second: it answers nothing any more.
            let _ = sys::kill(self.mediator.pid, libc::SIGKILL);
        }
        reap_in_background(self.mediator.pid);
        self.mediator.pid = 0;
        crate::mediate::Findings::parse(&bytes)
    }

    /// Forwards or collects a chunk within the limit; returns a stop reason when the limit is passed.
    fn forward(
        &self,
        stream: usize,
        chunk: &[u8],
        count: &mut u64,
        sink: &mut Vec<u8>,
    ) -> Option<StopReason> {
        let limit = self.output_limit.unwrap_or(u64::MAX);
        let room = limit.saturating_sub(*count) as usize;
        let take = chunk.len().min(room);
        let part = chunk.get(..take).unwrap_or(chunk);
        *count = count.saturating_add(chunk.len() as u64);
        match self.stdio {
            Stdio::Collect => sink.extend_from_slice(part),
            Stdio::Inherit => {
                let _ = sys::write_all(if stream == 0 { 1 } else { 2 }, part);
            }
        }
        (chunk.len() > room).then(|| StopReason::OutputLimit {
            stream: if stream == 0 { "stdout" } else { "stderr" }.to_string(),
            limit,
        })
    }
}

/// Inits and mediators that reported and were still exiting (an init tears down its namespaces) when
/// their run ended.
static EXITING_CHILDREN: std::sync::Mutex<Vec<libc::pid_t>> = std::sync::Mutex::new(Vec::new());

/// Reaps a sandbox's init or mediator that has reported and is exiting, without making the caller wait for
/// it: if it has not exited yet, the next [`Sandbox::spawn`] reaps it (a thread per run to wait for it cost a
/// launch 0.1 to 0.3 ms; a zombie holds only its pid, and none outlives the process).
fn reap_in_background(pid: libc::pid_t) {
    if let Ok((0, _)) = sys::waitpid(pid, libc::WNOHANG) {
        EXITING_CHILDREN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(pid);
    }
}

/// Reaps the inits and mediators of earlier runs that have exited since.
fn reap_exited_children() {
    EXITING_CHILDREN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .retain(|&pid| matches!(sys::waitpid(pid, libc::WNOHANG), Ok((0, _))));
}

/// Reads what is available from a non-blocking fd; false at end of file.
fn drain(fd: RawFd, into: &mut Vec<u8>) -> bool {
    // Small: a large frame is probed page by page, and each new stack page is a page fault (dear on
    // this kind of VM).
    let mut buf = [0u8; 8192];
    loop {
        match sys::read(fd, &mut buf) {
            Ok(0) => return false,
            Ok(n) => into.extend_from_slice(buf.get(..n).unwrap_or(&[])),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
}

/// Reads until end of file, waiting at most a second in total (all writers are dead by now).
fn drain_blocking(fd: RawFd, into: &mut Vec<u8>) -> bool {
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        if !drain(fd, into) {
            return true;
        }
        let mut p = [libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        }];
        let _ = sys::poll(&mut p, 100);
    }
    false
}

impl Drop for RunningSandbox {
    fn drop(&mut self) {
        // Whatever happened, nothing outlives the supervisor's interest in it. Once reaped, the pid may
        // belong to someone else: it is not signalled again.
        if !self.reaped {
            let _ = sys::kill(self.pid, libc::SIGKILL);
            let _ = sys::waitpid(self.pid, libc::WNOHANG);
        }
        if self.mediator.pid > 0 {
            let _ = sys::kill(self.mediator.pid, libc::SIGKILL);
            let _ = sys::waitpid(self.mediator.pid, 0);
        }
        for fd in [
            self.pidfd,
            self.sigfd,
            self.err_r,
            self.status_r,
            self.mediator.report,
        ] {
            sys::close(fd);
        }
        let _ = sys::set_signal_mask(&self.old_mask);
    }
}

#[cfg(test)]
mod tests {
    use super::{EXITING_CHILDREN, Namespaces, reap_exited_children, reap_in_background};
    use crate::sys;

    /// The namespaces' thread is moved to another CPU, and only it: the supervisor's own CPUs,
    /// which the init and the program inherit, are never narrowed, even when the thread runs first (it
    /// waits to be moved). Moving a thread that had already ended moved the caller instead; without the
    /// wait about one run of this test in four fails (it is a race).
    #[test]
    fn making_the_namespaces_ahead_never_narrows_the_callers_cpus() {
        if sys::geteuid() != 0 {
            eprintln!("skipped: the namespaces are made ahead only as root");
            return;
        }
        let cpus = || {
            std::fs::read_to_string("/proc/thread-self/status")
                .unwrap()
                .lines()
                .find(|l| l.starts_with("Cpus_allowed_list:"))
                .unwrap()
                .to_string()
        };
        let before = cpus();
        for _ in 0..300 {
            let made = Namespaces::prepare(true).join();
            assert!(made.net.is_some(), "no network namespace was made");
            assert!(made.staged_root.is_some(), "no root was staged");
            assert_eq!(cpus(), before);
        }
    }

    /// An init still exiting when its run ends is not waited for, and the next launch reaps it.
    #[test]
    fn an_exiting_init_is_reaped_by_the_next_launch() {
        let Ok(Some(pid)) = sys::fork_process() else {
            // The child: no allocation, no lock, just a short life.
            std::thread::sleep(std::time::Duration::from_millis(100));
            sys::exit_now(0)
        };
        reap_in_background(pid);
        assert!(EXITING_CHILDREN.lock().unwrap().contains(&pid));
        // Exited, not yet reaped: as the next launch would find it.
        sys::wait_exited_unreaped(pid).unwrap();
        reap_exited_children();
        assert!(!EXITING_CHILDREN.lock().unwrap().contains(&pid));
        // Reaped: the pid is no longer this process's child.
        assert!(sys::waitpid(pid, libc::WNOHANG).is_err());
    }
}
