//! Per-test directories and a command builder for the real binary, run as root or as an unprivileged user
//! the tests create.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

pub(super) const TEST_USER: &str = "stockade-test";

/// Who runs stockade.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Who {
    Root,
    User,
}

/// Landlock ABI 6 or later, or a loud skip (a failure under `STOCKADE_REQUIRE_LANDLOCK=1`).
pub(super) fn landlock_ready() -> bool {
    static ABI: OnceLock<i32> = OnceLock::new();
    let abi = *ABI.get_or_init(stockade_sandbox_abi);
    if abi >= 6 {
        return true;
    }
    if std::env::var("STOCKADE_REQUIRE_LANDLOCK").as_deref() == Ok("1") {
        panic!("Landlock ABI {abi} < 6 but STOCKADE_REQUIRE_LANDLOCK=1");
    }
    eprintln!("SKIPPED: Landlock ABI {abi} < 6 on this kernel; sandbox test not run");
    false
}

fn stockade_sandbox_abi() -> i32 {
    let out = Command::new("python3")
        .args([
            "-c",
            "import ctypes;print(ctypes.CDLL(None,use_errno=True).syscall(444,None,0,1))",
        ])
        .output();
    out.ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(0)
}

pub(super) fn is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

/// The unprivileged test user's (uid, gid, home), created on first use when running as root.
pub(super) fn test_user() -> Option<(u32, u32, PathBuf)> {
    static USER: OnceLock<Option<(u32, u32, PathBuf)>> = OnceLock::new();
    USER.get_or_init(|| {
        if !is_root() {
            return None;
        }
        let lookup = || -> Option<(u32, u32, PathBuf)> {
            let out = Command::new("getent")
                .args(["passwd", TEST_USER])
                .output()
                .ok()?;
            let line = String::from_utf8_lossy(&out.stdout).to_string();
            let f: Vec<&str> = line.trim().split(':').collect();
            Some((
                f.get(2)?.parse().ok()?,
                f.get(3)?.parse().ok()?,
                PathBuf::from(f.get(5)?),
            ))
        };
        if lookup().is_none() {
            let _ = Command::new("useradd")
                .args(["-m", "-s", "/bin/sh", TEST_USER])
                .status();
        }
        lookup()
    })
    .clone()
}

/// The binary, where every user can execute it: in place when every directory above it is
/// world-searchable, else copied once to a temp dir (the build tree may sit under a private home).
pub(super) fn bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let src = PathBuf::from(env!("CARGO_BIN_EXE_stockade"));
        let searchable = src
            .ancestors()
            .skip(1)
            .all(|a| std::fs::metadata(a).is_ok_and(|m| m.permissions().mode() & 0o001 != 0));
        if searchable {
            return src;
        }
        let dir = std::env::temp_dir().join(format!("stockade-test-bin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let dst = dir.join("stockade");
        std::fs::copy(&src, &dst).unwrap();
        std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o755)).unwrap();
        dst
    })
    .clone()
}

/// A fresh directory for one test, owned by whoever runs stockade in it.
pub(super) struct TestDir {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub who: Who,
}

impl TestDir {
    pub(super) fn new(who: Who) -> Self {
        Self::in_dir(who, &std::env::temp_dir())
    }

    /// One outside `/tmp` (in cargo's target directory), for tests of what a run's private `/tmp` holds:
    /// a policy granting the test's own directory under `/tmp` would make the run bind the host's instead.
    pub(super) fn outside_tmp(who: Who) -> Self {
        Self::in_dir(who, Path::new(env!("CARGO_TARGET_TMPDIR")))
    }

    fn in_dir(who: Who, base: &Path) -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("stockade-it-")
            .tempdir_in(base)
            .unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let d = TestDir {
            _tmp: tmp,
            root,
            who,
        };
        d.mkdir("work");
        d
    }

    /// Seed 003's layout: `work/` a git repository with everything in it committed on `main`, and a linked
    /// worktree per agent at `work/.ittybitty/agents/<id>/worktree`, on branch `agent-<id>`.
    pub(super) fn agent_worktrees(&self, agents: &[&str]) -> &Self {
        let work = self.work();
        git(&work, &["init", "-q", "-b", "main"]);
        git(&work, &["add", "."]);
        git(&work, &["commit", "-qm", "init"]);
        for a in agents {
            self.mkdir(&format!("work/.ittybitty/agents/{a}"));
            git(
                &work,
                &[
                    "worktree",
                    "add",
                    "-q",
                    "-b",
                    &format!("agent-{a}"),
                    &format!(".ittybitty/agents/{a}/worktree"),
                ],
            );
        }
        self
    }

    /// The working directory the agent runs in.
    pub(super) fn work(&self) -> PathBuf {
        self.root.join("work")
    }

    pub(super) fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub(super) fn mkdir(&self, rel: &str) -> &Self {
        std::fs::create_dir_all(self.root.join(rel)).unwrap();
        self.chown(rel);
        self
    }

    pub(super) fn write(&self, rel: &str, text: &str) -> &Self {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        self.chown(rel);
        self
    }

    pub(super) fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(rel)).ok()
    }

    fn chown(&self, rel: &str) {
        if let (Who::User, Some((uid, gid, _))) = (self.who, test_user()) {
            let mut p = self.root.join(rel);
            loop {
                let _ = std::os::unix::fs::lchown(&p, Some(uid), Some(gid));
                if p == self.root || !p.pop() {
                    break;
                }
            }
        }
    }

    /// `setpriv ... --`: what follows runs as this directory's user (unchanged for root).
    pub(super) fn as_who(&self) -> Command {
        let mut cmd = Command::new("setpriv");
        if let (Who::User, Some((uid, gid, _))) = (self.who, test_user()) {
            cmd.args([
                "--reuid",
                &uid.to_string(),
                "--regid",
                &gid.to_string(),
                "--clear-groups",
            ]);
        }
        cmd.arg("--");
        cmd
    }

    /// `stockade ARGS` in `work/`, as this directory's user, with a clean environment and a private audit log.
    pub(super) fn stockade<I, S>(&self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = self.as_who();
        cmd.arg(bin());
        cmd.arg("--audit-log").arg(self.root.join("audit.jsonl"));
        cmd.args(args);
        cmd.current_dir(self.work());
        cmd.env_clear();
        let home = match (self.who, test_user()) {
            (Who::User, Some((_, _, home))) => home,
            _ => PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())),
        };
        cmd.env("HOME", home);
        cmd.env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        );
        cmd.env("LANG", "C.UTF-8");
        cmd.stdin(Stdio::null());
        Cmd { cmd }
    }

    /// `stockade run [FLAGS] -- sh -c SCRIPT`.
    pub(super) fn sh(&self, flags: &[&str], script: &str) -> Out {
        let mut args: Vec<&str> = vec!["run"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "sh", "-c", script]);
        self.stockade(args).run()
    }
}

pub(super) struct Cmd {
    pub cmd: Command,
}

impl Cmd {
    pub(super) fn env(mut self, k: &str, v: &str) -> Self {
        self.cmd.env(k, v);
        self
    }

    /// Runs with `stdin` fed to the process (a process that exits before reading it is fine).
    pub(super) fn run_with_stdin(mut self, stdin: &str) -> Out {
        use std::io::Write;
        self.cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = self.cmd.spawn().unwrap();
        let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
        let o = child.wait_with_output().unwrap();
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    pub(super) fn run(mut self) -> Out {
        let o: Output = self.cmd.output().unwrap();
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

#[derive(Debug)]
pub(super) struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    #[track_caller]
    pub(super) fn ok(&self) -> &Self {
        assert_eq!(
            self.code, 0,
            "expected success\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub(super) fn code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code, code,
            "expected exit {code}\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub(super) fn stdout_has(&self, s: &str) -> &Self {
        assert!(
            self.stdout.contains(s),
            "stdout lacks {s:?}\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    #[track_caller]
    pub(super) fn stdout_lacks(&self, s: &str) -> &Self {
        assert!(
            !self.stdout.contains(s),
            "stdout has {s:?}\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    #[track_caller]
    pub(super) fn stderr_has(&self, s: &str) -> &Self {
        assert!(
            self.stderr.contains(s),
            "stderr lacks {s:?}\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

/// Generates `NAME::as_root` and `NAME::as_user` from one body taking a `TestDir`; each skips loudly when
/// it cannot run here (no Landlock, or the other uid is not available). `both_users! { outside_tmp fn ... }`
/// puts the project outside `/tmp` (see [`TestDir::outside_tmp`]).
#[macro_export]
macro_rules! both_users {
    (outside_tmp $(#[$m:meta])* fn $name:ident($d:ident) $body:block) => {
        $crate::both_users!(@with outside_tmp $(#[$m])* fn $name($d) $body);
    };
    ($(#[$m:meta])* fn $name:ident($d:ident) $body:block) => {
        $crate::both_users!(@with new $(#[$m])* fn $name($d) $body);
    };
    (@with $make:ident $(#[$m:meta])* fn $name:ident($d:ident) $body:block) => {
        $(#[$m])*
        mod $name {
            #[allow(unused_imports, reason = "not every body needs every helper")]
            use super::*;
            fn body($d: $crate::suite::util::TestDir) $body
            #[test]
            fn as_root() {
                if !$crate::suite::util::landlock_ready() { return; }
                if !$crate::suite::util::is_root() {
                    eprintln!("SKIPPED: not root, cannot run the root variant");
                    return;
                }
                body($crate::suite::util::TestDir::$make($crate::suite::util::Who::Root));
            }
            #[test]
            fn as_user() {
                if !$crate::suite::util::landlock_ready() { return; }
                if $crate::suite::util::is_root() && $crate::suite::util::test_user().is_none() {
                    panic!("running as root but could not create the unprivileged test user");
                }
                body($crate::suite::util::TestDir::$make($crate::suite::util::Who::User));
            }
        }
    };
}

pub(super) fn exists(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// Digits unique to this call in this test run (markers for process scans and socket names).
pub(super) fn unique_marker() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(100);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}{n}", std::process::id())
}

/// Runs git in `dir` with no user configuration and a fixed identity, asserting it succeeds.
pub(super) fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "git {args:?}");
}

/// Runs the shell `script` in `dir` to set a repository up, with no user git configuration and every
/// directory safe (the repository may belong to the test's user), asserting it succeeds.
pub(super) fn setup_repo(dir: &Path, script: &str) {
    let st = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "safe.directory")
        .env("GIT_CONFIG_VALUE_0", "*")
        .status()
        .unwrap();
    assert!(st.success(), "{script}");
}

/// Starts the scripted Messages API (`tests/fixtures/scripted_api.py`) in `dir` with this script (HTTPS
/// when `tls` names a certificate and its key); it logs to `dir/requests.jsonl`. Returns the server
/// (killed on drop) and its port.
pub(super) fn scripted_api(
    dir: &Path,
    script: &serde_json::Value,
    tls: Option<(&Path, &Path)>,
) -> (KillOnDrop, String) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
    let mut cmd = Command::new("python3");
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scripted_api.py"))
        .args([
            dir.join("script.json"),
            dir.join("port"),
            dir.join("requests.jsonl"),
        ]);
    if let Some((cert, key)) = tls {
        cmd.env("SCRIPTED_API_CERT", cert)
            .env("SCRIPTED_API_KEY", key);
    }
    let server = KillOnDrop(cmd.spawn().unwrap());
    for _ in 0..200 {
        if let Ok(port) = std::fs::read_to_string(dir.join("port")) {
            return (server, port);
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    panic!("the scripted API did not start");
}

/// A scripted Messages API over HTTPS at `api.gateway.test` (pinned to 127.0.0.1), with a certificate
/// from a CA made for the test; logs every request with its headers.
pub(super) struct TlsApi {
    _server: KillOnDrop,
    pub(super) port: String,
    pub(super) ca: std::path::PathBuf,
    pub(super) hosts: std::path::PathBuf,
    log: std::path::PathBuf,
}

impl TlsApi {
    pub(super) fn start(d: &TestDir, script: serde_json::Value) -> TlsApi {
        let dir = d.path("api");
        std::fs::create_dir_all(&dir).unwrap();
        let openssl = |args: &str| {
            let st = std::process::Command::new("sh")
                .args(["-c", &format!("openssl {args}")])
                .current_dir(&dir)
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap();
            assert!(st.success(), "openssl {args}");
        };
        let ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
        openssl(&format!(
            "req -x509 {ec} -keyout ca.key -out ca.pem -days 2 -subj /CN=stockade-test-ca"
        ));
        openssl(&format!(
            "req {ec} -keyout server.key -out server.csr -subj /CN=api.gateway.test"
        ));
        std::fs::write(dir.join("san.ext"), "subjectAltName=DNS:api.gateway.test\n").unwrap();
        openssl(
            "x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile san.ext",
        );
        let (server, port) = scripted_api(
            &dir,
            &script,
            Some((&dir.join("server.pem"), &dir.join("server.key"))),
        );
        std::fs::write(dir.join("hosts"), "127.0.0.1 api.gateway.test\n").unwrap();
        TlsApi {
            _server: server,
            port,
            ca: dir.join("ca.pem"),
            hosts: dir.join("hosts"),
            log: dir.join("requests.jsonl"),
        }
    }

    pub(super) fn requests(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The messages of the conversation as Claude Code last sent them (its last request that offered
    /// tools; side requests offer none), tool results included.
    pub(super) fn conversation(&self) -> serde_json::Value {
        self.requests()
            .into_iter()
            .rfind(|r| r["body"]["tools"].as_array().is_some_and(|t| !t.is_empty()))
            .expect("no conversation request")["body"]["messages"]
            .take()
    }
}

/// Kills a spawned child when dropped, so a failing test leaves nothing running.
pub(super) struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

/// Whether a `sleep ARG` process is running on the host (argv exactly `sleep`, `ARG`: the scripts that
/// start it carry the marker in their own command lines, so a substring match would prove nothing).
pub(super) fn sleeping(arg: &str) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
            let mut argv = c.split(|b| *b == 0);
            argv.next() == Some(b"sleep".as_slice()) && argv.next() == Some(arg.as_bytes())
        })
    })
}

/// Waits up to `secs` for `sleeping(arg)` to become `want`.
pub(super) fn wait_sleeping(arg: &str, want: bool, secs: u64) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if sleeping(arg) == want {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A shell function for escape scripts: `try NAME 'COMMAND'` prints `held NAME` when the command fails and
/// `ESCAPED NAME` when it succeeds.
pub(super) const TRY: &str =
    "try() { if sh -c \"$2\" 2>/dev/null; then echo \"ESCAPED $1\"; else echo \"held $1\"; fi; }\n";
