//! The mediator as a confused deputy (issue 30). The seccomp filter hands every naming call (`open` with
//! `O_CREAT`, `mkdir`, `mknod`, `rename`, `link`, `symlink`, `bind`, `connect`) to the mediator, which runs
//! outside the sandbox with more power than the agent and performs the call itself. These tests attack it
//! from the agent's side with paths the agent's own kernel resolves one way and a careless deputy
//! another: `/proc/self/..`, `/proc/thread-self/..` and planted links to them lead, in the host's `/proc`,
//! to other host processes' `root`, `cwd`, `environ`, `mem` and `fd/N`. Each attack runs unconfined first
//! (it must escape there) and inside must leave the host unchanged: no file created or truncated, no
//! secret read, no socket or pipe reached. A table (`tests/fixtures/deputy_suite.py`) tries `/proc` from
//! every angle through every mediated call, and a seeded property run
//! (`tests/fixtures/deputy_property.py`) compares the mediated open with the agent's own. The positive
//! twins (`/dev/stdout`, `/proc/self/fd/N`, `/proc/self/cwd`) must keep working.
//!
//! Every test uses a project outside `/tmp` (`TestDir::outside_tmp`): a project under `/tmp` makes the run
//! bind the host's `/tmp`, and the host's `/tmp` is what the attacks aim at.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::util::*;
use crate::both_users;

/// Python shared by the attack scripts: `attempt(NAME, F)` prints `ESCAPED NAME RESULT` when `F()` works
/// and `held NAME ERRNO` when it raises; `hostproc` is a planted link to `/proc/self/..`.
const PY_ATTEMPT: &str = r#"import errno, os, socket, sys
RC = os.O_RDONLY | os.O_CREAT
def attempt(name, f):
    try:
        r = f()
    except OSError as e:
        print('held', name, errno.errorcode.get(e.errno, e.errno), flush=True)
    else:
        print('ESCAPED', name, repr(r)[:400], flush=True)
def create(path):
    f = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(f, b'pwned')
    os.close(f)
    return 'created'
def read(path, at=0, n=4096):
    f = os.open(path, RC)
    if at:
        os.lseek(f, at, os.SEEK_SET)
    return os.read(f, n)
def write(path, data):
    f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOCTTY)
    return os.write(f, data.encode())
def connect(path):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    return 'connected'
if not os.path.lexists('hostproc'):
    os.symlink('/proc/self/..', 'hostproc')
"#;

/// The home directory the run sees as `~` (the test user's, or root's).
fn home(d: &TestDir) -> PathBuf {
    match (d.who, test_user()) {
        (Who::User, Some((_, _, home))) => home,
        _ => PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())),
    }
}

/// Gives `p` to the test directory's user (unchanged for root).
fn give(d: &TestDir, p: &Path) {
    if let (Who::User, Some((uid, gid, _))) = (d.who, test_user()) {
        std::os::unix::fs::lchown(p, Some(uid), Some(gid)).unwrap();
    }
}

/// A process on the host, as the test directory's user, in `cwd`: `sleep 300` unless told otherwise.
fn host_process(d: &TestDir, cwd: &Path, argv: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = d.as_who();
    cmd.args(if argv.is_empty() {
        &["sleep", "300"][..]
    } else {
        argv
    });
    cmd.current_dir(cwd).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// The attack script run unconfined on the host as the test directory's user, in `cwd`; its stdout.
fn control(d: &TestDir, cwd: &Path, script: &str, args: &[&str]) -> String {
    let out = d
        .as_who()
        .args(["/usr/bin/python3", "-c", script])
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A directory for the control, owned by the test directory's user.
fn control_dir(d: &TestDir) -> PathBuf {
    d.mkdir("control");
    d.path("control")
}

/// The same script under `stockade run FLAGS -- python3 -c SCRIPT ARGS`, in the project.
fn inside(d: &TestDir, flags: &[&str], script: &str, args: &[&str]) -> Out {
    let mut argv: Vec<&str> = vec!["run"];
    argv.extend_from_slice(flags);
    argv.extend_from_slice(&["--", "python3", "-c", script]);
    argv.extend_from_slice(args);
    d.stockade(argv).run()
}

/// `python3 -c SCRIPT` unconfined in the control's directory (`control`), or under `stockade run` in
/// the project, as the test directory's user; the caller sets its stdio.
fn python(d: &TestDir, script: &str, control: bool) -> Command {
    if control {
        let mut c = d.as_who();
        c.args(["/usr/bin/python3", "-c", script])
            .current_dir(control_dir(d));
        c
    } else {
        d.stockade(["run", "--", "python3", "-c", script]).cmd
    }
}

/// Removes its paths when dropped (files, sockets or directories), so a failing test leaves no trace.
struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p).or_else(|_| std::fs::remove_dir_all(p));
        }
    }
}

#[track_caller]
fn assert_all_escaped(unconfined: &str, names: &[&str]) {
    for name in names {
        assert!(
            unconfined.contains(&format!("ESCAPED {name} ")),
            "the control must escape ({name}):\n{unconfined}"
        );
    }
}

#[track_caller]
fn assert_all_held(out: &Out, names: &[&str]) {
    out.ok().stdout_lacks("ESCAPED");
    for name in names {
        out.stdout_has(&format!("held {name} "));
    }
}

const TMP_WRITE: &str = r#"
P, base, cache = sys.argv[1], sys.argv[2], sys.argv[3]
attempt('self', lambda: create(f'/proc/self/../{P}/root{base}-self'))
attempt('thread-self', lambda: create(f'/proc/thread-self/../../../{P}/root{base}-thread-self'))
attempt('planted-link', lambda: create(f'hostproc/{P}/root{base}-link'))
attempt('cache', lambda: create(f'/proc/self/../{P}/root{cache}'))
"#;

both_users! {
    outside_tmp
    /// Issue 30's report: `open(O_CREAT)` of `/proc/self/../P/root/tmp/...` (P a host process of the same
    /// user) made a file in the host's `/tmp`; also through `/proc/thread-self/..`, a link the agent planted
    /// to `/proc/self/..`, and into the host's copy of a cache the run overlays (`~/.cache/pip`).
    fn host_tmp_is_not_written_through_proc_self_dotdot(d) {
        let m = unique_marker();
        let cache_dir = home(&d).join(".cache/pip");
        let mk = d.as_who().args(["mkdir", "-p"]).arg(&cache_dir).status().unwrap();
        assert!(mk.success());
        let base = format!("/tmp/stockade-deputy-{m}");
        let control_base = format!("{base}-control");
        let cache = cache_dir.join(format!("stockade-deputy-{m}"));
        let control_cache = cache_dir.join(format!("stockade-deputy-{m}-control"));
        let suffixes = ["-self", "-thread-self", "-link"];
        let mut made: Vec<PathBuf> = suffixes.iter().flat_map(|s| [format!("{base}{s}"), format!("{control_base}{s}")]).map(PathBuf::from).collect();
        made.extend([cache.clone(), control_cache.clone()]);
        let _cleanup = Cleanup(made);
        let _p = KillOnDrop(host_process(&d, &d.root, &[], &[]).spawn().unwrap());
        let pid = _p.0.id().to_string();
        let script = format!("{PY_ATTEMPT}{TMP_WRITE}");

        let unconfined = control(&d, &control_dir(&d), &script, &[&pid, &control_base, control_cache.to_str().unwrap()]);
        assert_all_escaped(&unconfined, &["self", "thread-self", "planted-link", "cache"]);
        for s in suffixes {
            assert!(exists(Path::new(&format!("{control_base}{s}"))), "the control made {control_base}{s}");
        }
        assert!(exists(&control_cache));

        let out = inside(&d, &[], &script, &[&pid, &base, cache.to_str().unwrap()]);
        let escaped: Vec<String> = suffixes.iter().map(|s| format!("{base}{s}")).chain([cache.display().to_string()])
            .filter(|p| exists(Path::new(p))).collect();
        assert!(escaped.is_empty(), "made on the host from inside: {escaped:?}\n{out:?}");
        assert_all_held(&out, &["self", "thread-self", "planted-link", "cache"]);
    }
}

/// Holds a secret at a known address and prints the address; the environment holds another.
const MEM_HOLDER: &str = "import ctypes, sys\n\
b = ctypes.create_string_buffer(sys.argv[1].encode())\n\
print(ctypes.addressof(b), flush=True)\n\
sys.stdin.read()\n";

const ENVIRON_MEM: &str = r#"
P, addr = sys.argv[1], int(sys.argv[2])
def secret(path):
    return [e for e in read(path, n=1 << 20).split(b'\0') if e.startswith(b'DEPUTY_SECRET=')]
attempt('environ', lambda: secret(f'/proc/self/../{P}/environ'))
attempt('environ-thread-self', lambda: secret(f'/proc/thread-self/../../../{P}/environ'))
attempt('environ-planted-link', lambda: secret(f'hostproc/{P}/environ'))
attempt('mem', lambda: read(f'/proc/self/../{P}/mem', addr, 64))
attempt('maps', lambda: read(f'/proc/self/../{P}/maps'))
"#;

both_users! {
    outside_tmp
    /// A host process's `environ` and `mem`, through `/proc/self/../P` with `O_RDONLY|O_CREAT` (mediated
    /// because of `O_CREAT`, which changes nothing for an existing file).
    fn host_process_environ_and_mem_are_not_read(d) {
        let m = unique_marker();
        let env_secret = format!("ENVSECRET{m}");
        let mem_secret = format!("MEMSECRET{m}");
        let mut holder = host_process(&d, &d.root, &["/usr/bin/python3", "-c", MEM_HOLDER, &mem_secret], &[("DEPUTY_SECRET", &env_secret)]);
        let mut child = holder.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let _holder = KillOnDrop(child);
        let pid = _holder.0.id().to_string();
        let addr = line.trim().to_string();
        let script = format!("{PY_ATTEMPT}{ENVIRON_MEM}");

        let unconfined = control(&d, &control_dir(&d), &script, &[&pid, &addr]);
        assert_all_escaped(&unconfined, &["environ", "environ-thread-self", "environ-planted-link", "mem", "maps"]);
        assert!(unconfined.contains(&env_secret) && unconfined.contains(&mem_secret), "the control must read both secrets:\n{unconfined}");

        let out = inside(&d, &[], &script, &[&pid, &addr]);
        out.stdout_lacks(&env_secret).stdout_lacks(&mem_secret);
        assert_all_held(&out, &["environ", "environ-thread-self", "environ-planted-link", "mem", "maps"]);
    }
}

const SOCKET_CONNECT: &str = r#"
P, sock = sys.argv[1], sys.argv[2]
attempt('self', lambda: connect(f'/proc/self/../{P}/root{sock}'))
attempt('thread-self', lambda: connect(f'/proc/thread-self/../../../{P}/root{sock}'))
attempt('planted-link', lambda: connect(f'hostproc/{P}/root{sock}'))
"#;

both_users! {
    outside_tmp
    /// A listening socket in the host's `/tmp` (like an ssh-agent's or a database's), reached through
    /// `/proc/self/../P/root/tmp/...`: nothing may arrive in its queue.
    fn host_unix_socket_is_not_connected_through_proc(d) {
        let sock = PathBuf::from(format!("/tmp/stockade-deputy-{}.sock", unique_marker()));
        let _cleanup = Cleanup(vec![sock.clone()]);
        let listener = UnixListener::bind(&sock).unwrap();
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let _p = KillOnDrop(host_process(&d, &d.root, &[], &[]).spawn().unwrap());
        let pid = _p.0.id().to_string();
        let script = format!("{PY_ATTEMPT}{SOCKET_CONNECT}");

        let unconfined = control(&d, &control_dir(&d), &script, &[&pid, sock.to_str().unwrap()]);
        assert_all_escaped(&unconfined, &["self", "thread-self", "planted-link"]);
        for _ in 0..3 {
            assert!(listener.accept().is_ok(), "the control's connection must be queued");
        }

        let out = inside(&d, &[], &script, &[&pid, sock.to_str().unwrap()]);
        let queued = listener.accept();
        assert!(
            matches!(&queued, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "a connection from inside reached the host's socket: {queued:?}\n{out:?}"
        );
        assert_all_held(&out, &["self", "thread-self", "planted-link"]);
    }
}

const PIPE_WRITE: &str = r#"
P, tag = sys.argv[1], sys.argv[2]
attempt('self', lambda: write(f'/proc/self/../{P}/fd/1', f'{tag}-self;'))
attempt('thread-self', lambda: write(f'/proc/thread-self/../../../{P}/fd/1', f'{tag}-thread-self;'))
attempt('planted-link', lambda: write(f'hostproc/{P}/fd/1', f'{tag}-link;'))
"#;

both_users! {
    outside_tmp
    /// A pipe a host process holds (as its descriptor 1), written through `/proc/self/../P/fd/1`.
    fn host_pipe_is_not_written_through_proc_fd(d) {
        let mut holder = Holder::start(&d, "pipe", &d.root, &[]);
        let pid = holder.pid.clone();
        let script = format!("{PY_ATTEMPT}{PIPE_WRITE}");

        let unconfined = control(&d, &control_dir(&d), &script, &[&pid, "CONTROL"]);
        assert_all_escaped(&unconfined, &["self", "thread-self", "planted-link"]);
        let got = holder.arrived("SENTINEL-1");
        assert!(got.contains("CONTROL-self;CONTROL-thread-self;CONTROL-link;"), "the control reaches the pipe: {got}");
        let out = inside(&d, &[], &script, &[&pid, "INSIDE"]);
        let got = holder.arrived("SENTINEL-2");
        assert!(!got.contains("INSIDE"), "written to the host's pipe from inside: {got}\n{out:?}");
        assert_all_held(&out, &["self", "thread-self", "planted-link"]);
    }
}

const TRUNCATE: &str = r#"
P = sys.argv[1]
ro_w, ro_r, envrc, denied_w, denied_r, host_w, host_r, tmp_w, cache_w = sys.argv[2:11]
W = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
R = os.O_RDONLY | os.O_CREAT | os.O_TRUNC
def reopen(path, flags):
    fd = os.open(path, os.O_RDONLY)
    return os.open(f'/proc/self/fd/{fd}', flags)
attempt('reopen-read-only-grant-wronly', lambda: reopen(ro_w, W))
attempt('reopen-read-only-grant-rdonly', lambda: reopen(ro_r, R))
attempt('reopen-protected-envrc', lambda: reopen(envrc, W))
attempt('host-route-denied-wronly', lambda: os.open(f'/proc/self/../{P}/root{denied_w}', W))
attempt('host-route-denied-rdonly', lambda: os.open(f'/proc/self/../{P}/root{denied_r}', R))
attempt('host-route-outside-wronly', lambda: os.open(f'/proc/self/../{P}/root{host_w}', W))
attempt('host-route-outside-rdonly', lambda: os.open(f'/proc/self/../{P}/root{host_r}', R))
attempt('host-route-tmp-wronly', lambda: os.open(f'/proc/self/../{P}/root{tmp_w}', W))
attempt('host-route-cache-wronly', lambda: os.open(f'/proc/self/../{P}/root{cache_w}', W))
"#;

const TRUNCATE_CASES: [&str; 9] = [
    "reopen-read-only-grant-wronly",
    "reopen-read-only-grant-rdonly",
    "reopen-protected-envrc",
    "host-route-denied-wronly",
    "host-route-denied-rdonly",
    "host-route-outside-wronly",
    "host-route-outside-rdonly",
    "host-route-tmp-wronly",
    "host-route-cache-wronly",
];

both_users! {
    outside_tmp
    /// Truncation by a mediated open: a file granted read-only, opened `O_RDONLY` and reopened through
    /// `/proc/self/fd/N` with `O_CREAT|O_TRUNC`; the project's `.envrc` (read-only in the built-in
    /// profile) the same way; a denied file in the project and a host file outside the policy through
    /// `/proc/self/../P/root/...`. Every one keeps its content.
    fn files_outside_the_policy_are_not_truncated(d) {
        let m = unique_marker();
        let cache_dir = home(&d).join(".cache/pip");
        let mk = d.as_who().args(["mkdir", "-p"]).arg(&cache_dir).status().unwrap();
        assert!(mk.success());
        // In the test directory, in the host's /tmp and in the host's cache (which the run overlays).
        let files = |control: bool| -> Vec<(PathBuf, String)> {
            let (prefix, suffix) = if control { ("control/", "-control") } else { ("", "") };
            let mut v: Vec<PathBuf> = ["outside/ro-w.txt", "outside/ro-r.txt", "work/.envrc", "work/secret/w.txt", "work/secret/r.txt", "hostonly/w.txt", "hostonly/r.txt"]
                .iter().map(|f| d.path(&format!("{prefix}{f}"))).collect();
            v.push(PathBuf::from(format!("/tmp/stockade-deputy-{m}-trunc{suffix}")));
            v.push(cache_dir.join(format!("stockade-deputy-{m}-trunc{suffix}")));
            v.into_iter().map(|p| { let text = format!("KEEP {}\n", p.display()); (p, text) }).collect()
        };
        let _cleanup = Cleanup([files(false), files(true)].concat().into_iter().map(|(p, _)| p).filter(|p| !p.starts_with(&d.root)).collect());
        for (p, text) in [files(false), files(true)].concat() {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, &text).unwrap();
            give(&d, &p);
        }
        d.chown_all();
        let _p = KillOnDrop(host_process(&d, &d.root, &[], &[]).spawn().unwrap());
        let pid = _p.0.id().to_string();
        let script = format!("{PY_ATTEMPT}{TRUNCATE}");
        let args = |control: bool| -> Vec<String> {
            std::iter::once(pid.clone()).chain(files(control).into_iter().map(|(p, _)| p.display().to_string())).collect()
        };

        let control_args = args(true);
        let control_args: Vec<&str> = control_args.iter().map(String::as_str).collect();
        let unconfined = control(&d, &control_dir(&d), &script, &control_args);
        assert_all_escaped(&unconfined, &TRUNCATE_CASES);
        for (p, _) in files(true) {
            assert_eq!(std::fs::read_to_string(&p).unwrap(), "", "the control truncates {}", p.display());
        }

        let outside = d.path("outside");
        let inside_args = args(false);
        let inside_args: Vec<&str> = inside_args.iter().map(String::as_str).collect();
        let out = inside(&d, &["--ro", outside.to_str().unwrap(), "--deny", "secret"], &script, &inside_args);
        let changed: Vec<String> = files(false).into_iter().filter(|(p, text)| std::fs::read_to_string(p).ok().as_ref() != Some(text)).map(|(p, _)| p.display().to_string()).collect();
        assert!(changed.is_empty(), "truncated from inside: {changed:?}\n{out:?}");
        assert_all_held(&out, &TRUNCATE_CASES);
    }
}

/// Holds a pipe (as its descriptor 1) or a pseudo-terminal (raw mode) the way a user's shell holds
/// its terminal or a pipeline its pipe: made by the holder itself, so it belongs to the test's user. Prints
/// the descriptor and the terminal's name, then for each line on stdin reads what arrived up to that
/// line's text (a sentinel the test writes after an attack) and prints it.
const HOLDER: &str = "import os, pty, sys, tty\n\
out = os.fdopen(os.dup(1), 'w')\n\
if sys.argv[1] == 'pty':\n    \
r, w = pty.openpty()\n    \
tty.setraw(w)\n    \
name = os.ttyname(w)\n\
else:\n    \
r, w = os.pipe()\n    \
os.dup2(w, 1)\n    \
os.close(w)\n    \
w, name = 1, '-'\n\
print(w, name, file=out, flush=True)\n\
for line in sys.stdin:\n    \
sentinel = line.strip().encode()\n    \
got = b''\n    \
while sentinel not in got:\n        \
got += os.read(r, 4096)\n    \
print(repr(got.split(sentinel)[0]), file=out, flush=True)\n";

/// A `HOLDER` on the host, as the test directory's user.
struct Holder {
    _process: KillOnDrop,
    pid: String,
    fd: String,
    tty: String,
    to: std::process::ChildStdin,
    from: BufReader<std::process::ChildStdout>,
}

impl Holder {
    fn start(d: &TestDir, kind: &str, cwd: &Path, env: &[(&str, &str)]) -> Holder {
        let mut child = host_process(d, cwd, &["/usr/bin/python3", "-c", HOLDER, kind], env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let to = child.stdin.take().unwrap();
        let mut from = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        from.read_line(&mut line).unwrap();
        let (fd, tty) = line.trim().split_once(' ').unwrap();
        let (fd, tty) = (fd.to_string(), tty.to_string());
        let pid = child.id().to_string();
        Holder {
            _process: KillOnDrop(child),
            pid,
            fd,
            tty,
            to,
            from,
        }
    }

    /// Everything that arrived before `sentinel`, which the test writes now (as root through
    /// `/proc/PID/fd/N`, or as anyone to the terminal; O_NOCTTY so the test never takes it as its own).
    fn arrived(&mut self, sentinel: &str) -> String {
        let path = if self.tty == "-" {
            format!("/proc/{}/fd/{}", self.pid, self.fd)
        } else {
            self.tty.clone()
        };
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(0o400)
            .open(&path)
            .unwrap()
            .write_all(sentinel.as_bytes())
            .unwrap();
        writeln!(self.to, "{sentinel}").unwrap();
        let mut got = String::new();
        self.from.read_line(&mut got).unwrap();
        got
    }
}

const TERMINAL_WRITE: &str = r#"
P, n, tty, tag = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
attempt('fd', lambda: write(f'/proc/self/../{P}/fd/{n}', f'{tag}-fd;'))
attempt('dev-pts', lambda: write(f'/proc/self/../{P}/root{tty}', f'{tag}-pts;'))
attempt('planted-link', lambda: write(f'hostproc/{P}/fd/{n}', f'{tag}-link;'))
"#;

both_users! {
    outside_tmp
    /// The user's terminal (a pseudo-terminal a host process holds), written through
    /// `/proc/self/../P/fd/N` and the host's `/dev/pts/K`. The test writes a sentinel after each run and
    /// the holder reports everything that arrived before it, so no timing decides the outcome.
    fn host_terminal_is_not_written(d) {
        let mut holder = Holder::start(&d, "pty", &d.root, &[]);
        let (pid, n, tty) = (holder.pid.clone(), holder.fd.clone(), holder.tty.clone());
        let script = format!("{PY_ATTEMPT}{TERMINAL_WRITE}");

        let unconfined = control(&d, &control_dir(&d), &script, &[&pid, &n, &tty, "CONTROL"]);
        assert_all_escaped(&unconfined, &["fd", "dev-pts", "planted-link"]);
        let got = holder.arrived("SENTINEL-1");
        assert!(got.contains("CONTROL-fd;") && got.contains("CONTROL-pts;") && got.contains("CONTROL-link;"), "the control reaches the terminal: {got}");

        let out = inside(&d, &[], &script, &[&pid, &n, &tty, "INSIDE"]);
        let got = holder.arrived("SENTINEL-2");
        assert!(!got.contains("INSIDE"), "written to the host's terminal from inside: {got}\n{out:?}");
        assert_all_held(&out, &["fd", "dev-pts", "planted-link"]);
    }
}

/// Every record of the kernel's log, read from the start until one contains `sentinel`.
fn kmsg_until(sentinel: &str) -> String {
    let mut kmsg = std::fs::File::open("/dev/kmsg").unwrap();
    let mut all = String::new();
    let mut buf = vec![0u8; 8192];
    while !all.contains(sentinel) {
        match kmsg.read(&mut buf) {
            Ok(n) => all.push_str(&String::from_utf8_lossy(&buf[..n])),
            // EPIPE: records overwritten while reading; the next read goes on from the oldest.
            Err(e) if e.raw_os_error() == Some(32) => {}
            Err(e) => panic!("reading /dev/kmsg: {e}"),
        }
    }
    all
}

/// The kernel's log, `/dev/kmsg` (root's to write, so the control only escapes as root), through
/// `/proc/self/../P/root/dev/kmsg`; a sentinel the test logs after the run bounds the search.
#[test]
fn host_kmsg_is_not_written() {
    if !landlock_ready() {
        return;
    }
    if !is_root()
        || std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/kmsg")
            .is_err()
    {
        eprintln!(
            "SKIPPED: /dev/kmsg is not writable here (root's to write): the attack has no control"
        );
        return;
    }
    let d = TestDir::outside_tmp(Who::Root);
    let m = unique_marker();
    let _p = KillOnDrop(host_process(&d, &d.root, &[], &[]).spawn().unwrap());
    let pid = _p.0.id().to_string();
    let script = format!(
        "{PY_ATTEMPT}P, tag = sys.argv[1], sys.argv[2]\n\
         attempt('kmsg', lambda: write(f'/proc/self/../{{P}}/root/dev/kmsg', tag))\n\
         attempt('kmsg-planted-link', lambda: write(f'hostproc/{{P}}/root/dev/kmsg', tag + '-link'))\n"
    );
    let (control_tag, inside_tag) = (
        format!("stockade-deputy-{m}-control"),
        format!("stockade-deputy-{m}-inside"),
    );
    let unconfined = control(&d, &control_dir(&d), &script, &[&pid, &control_tag]);
    assert_all_escaped(&unconfined, &["kmsg", "kmsg-planted-link"]);
    let out = inside(&d, &[], &script, &[&pid, &inside_tag]);
    let sentinel = format!("stockade-deputy-{m}-sentinel");
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .unwrap()
        .write_all(sentinel.as_bytes())
        .unwrap();
    let log = kmsg_until(&sentinel);
    assert!(
        log.contains(&control_tag) && log.contains(&format!("{control_tag}-link")),
        "the control reaches the kernel's log"
    );
    assert!(
        !log.contains(&inside_tag),
        "written to the kernel's log from inside\n{out:?}"
    );
    assert_all_held(&out, &["kmsg", "kmsg-planted-link"]);
}

/// What programs do every day through `/dev/std*` and `/proc/self`, each of them a mediated call (`>`
/// opens with `O_CREAT`).
const EVERYDAY: &str = r#"
echo hi-stdout > /dev/stdout && echo ok-stdout
echo hi-stderr > /dev/stderr && echo ok-stderr
echo hi-tee | tee /dev/stderr && echo ok-tee
printf 'copied\n' > f && cp f /dev/stdout && echo ok-cp
python3 -c "open('/proc/self/fd/1', 'w').write('py-fd1\n')" && echo ok-py-fd1
python3 -c "open('/dev/stdout', 'w').write('py-stdout\n')" && echo ok-py-stdout
mkdir -p sub && python3 -c "
import os
d = os.open('sub', os.O_RDONLY | os.O_DIRECTORY)
f = os.open('/proc/self/fd/%d/newfile' % d, os.O_CREAT | os.O_WRONLY, 0o644)
os.write(f, b'via-dirfd')" && echo ok-dirfd
echo via-cwd > /proc/self/cwd/made-via-cwd && echo ok-cwd
mkdir /proc/self/cwd/dir-via-cwd && echo ok-cwd-mkdir
"#;

const EVERYDAY_OK: [&str; 10] = [
    "ok-stdout",
    "ok-stderr",
    "ok-tee",
    "ok-cp",
    "ok-py-fd1",
    "ok-py-stdout",
    "ok-dirfd",
    "ok-cwd",
    "ok-cwd-mkdir",
    "copied",
];

both_users! {
    outside_tmp
    /// The positive twins: `/dev/stdout`, `/dev/stderr`, `tee`, `cp` to `/dev/stdout`,
    /// `/proc/self/fd/1`, `/proc/self/fd/DIR/newfile`, `/proc/self/cwd/`: unconfined and
    /// inside alike.
    fn everyday_proc_self_and_dev_std_paths_keep_working(d) {
        let ctl = control_dir(&d);
        // Through a pipe of the user's own (one the test made would be root's, mode 0600).
        let unconfined = d.as_who().args(["sh", "-c", &format!("{{ {EVERYDAY} }} 2>&1 | cat")]).current_dir(&ctl).output().unwrap();
        let unconfined = String::from_utf8_lossy(&unconfined.stdout).into_owned();
        for ok in EVERYDAY_OK {
            assert!(unconfined.contains(ok), "the control: {ok}\n{unconfined}");
        }
        // As the test user, stockade's own stdout and stderr are the test's pipes (root's, mode 0600),
        // which that user could not reopen unconfined either: there the agent's shell makes the pipe.
        let out = if d.who == Who::User { d.sh(&[], &format!("{{ {EVERYDAY} }} 2>&1 | cat")) } else { d.sh(&[], EVERYDAY) };
        out.ok().stdout_has("hi-stdout").stdout_has("hi-tee").stdout_has("py-fd1").stdout_has("py-stdout");
        if d.who == Who::Root {
            out.stderr_has("hi-stderr").stderr_has("hi-tee");
        }
        for ok in EVERYDAY_OK {
            out.stdout_has(ok);
        }
        assert_eq!(d.read("work/sub/newfile").as_deref(), Some("via-dirfd"));
        assert_eq!(d.read("work/made-via-cwd").as_deref(), Some("via-cwd\n"));
        assert!(d.path("work/dir-via-cwd").is_dir());
    }
}

/// `oom_score_adj` may be raised by anyone unconfined (it only makes the process the OOM killer's first
/// choice). Inside, the policy grants the run's `/proc` read-only, and the agent's kernel (Landlock)
/// refuses the write without `O_CREAT`, which is not mediated. The shell's `>` adds `O_CREAT`: the
/// mediator must answer as the kernel does, neither more (an escape) nor, here, less.
const OOM: &str = r#"
python3 -c "import os; f = os.open('/proc/self/oom_score_adj', os.O_WRONLY); os.write(f, b'900')" && echo ok-plain
echo 1000 > /proc/self/oom_score_adj && echo ok-shell-$(cat /proc/self/oom_score_adj)
echo end
"#;

both_users! {
    outside_tmp
    /// `echo 1000 > /proc/self/oom_score_adj` works unconfined; inside it is refused like the unmediated
    /// write (decided: `/proc` is read-only in the policy, so it should not work inside).
    fn oom_score_adj_inside_is_decided_as_the_kernel_decides(d) {
        let unconfined = d.as_who().args(["sh", "-c", OOM]).current_dir(control_dir(&d)).output().unwrap();
        let unconfined = String::from_utf8_lossy(&unconfined.stdout).into_owned();
        assert!(unconfined.contains("ok-plain") && unconfined.contains("ok-shell-1000"), "the control: {unconfined}");
        d.sh(&[], OOM).ok().stdout_has("end").stdout_lacks("ok-plain").stdout_lacks("ok-shell");
    }
}

/// The host side of the table and property runs: a directory in the host's `/tmp` holding a file and a
/// listening socket, and a host process (whose cwd it is) with its stdout a pipe the test reads.
struct HostSide {
    dir: PathBuf,
    listener: UnixListener,
    holder: Holder,
    pid: String,
}

impl HostSide {
    fn new(d: &TestDir, name: &str) -> HostSide {
        let dir = PathBuf::from(format!("/tmp/stockade-deputy-{name}-{}", unique_marker()));
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        give(d, &dir);
        std::fs::write(dir.join("victim"), "HOSTVICTIM\n").unwrap();
        give(d, &dir.join("victim"));
        let listener = UnixListener::bind(dir.join("sock")).unwrap();
        std::fs::set_permissions(dir.join("sock"), std::fs::Permissions::from_mode(0o777)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let holder = Holder::start(d, "pipe", &dir, &[("DEPUTY_SECRET", "HOSTENVSECRET")]);
        let pid = holder.pid.clone();
        HostSide {
            dir,
            listener,
            holder,
            pid,
        }
    }

    fn dir(&self) -> &str {
        self.dir.to_str().unwrap()
    }

    /// What changed on the host: entries of the directory besides `victim` and `sock`, the victim's
    /// content, connections queued on the socket, bytes written to the process's pipe.
    fn changes(&mut self) -> Vec<String> {
        let mut changes = Vec::new();
        for e in std::fs::read_dir(&self.dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name != "victim" && name != "sock" {
                changes.push(format!("made {}", e.path().display()));
            }
        }
        match std::fs::read_to_string(self.dir.join("victim")) {
            Ok(text) if text == "HOSTVICTIM\n" => {}
            other => changes.push(format!("victim changed: {other:?}")),
        }
        let mut queued = 0;
        while self.listener.accept().is_ok() {
            queued += 1;
        }
        if queued > 0 {
            changes.push(format!("{queued} connections reached the socket"));
        }
        let piped = self.holder.arrived("SENTINEL");
        if piped.trim() != "b''" {
            changes.push(format!("the pipe received {}", piped.trim()));
        }
        changes
    }
}

impl Drop for HostSide {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Names a run made on the host with `marker` in them, in the directories a deputy that follows the
/// host's `/proc` could reach by the scripts' vocabulary (removed, and returned).
fn strays(d: &TestDir, marker: &str) -> Vec<PathBuf> {
    let dirs = [
        PathBuf::from("/"),
        PathBuf::from("/tmp"),
        PathBuf::from("/root"),
        home(d),
        d.root.clone(),
    ];
    let mut found = Vec::new();
    for dir in dirs {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if e.file_name()
                .to_string_lossy()
                .contains(&format!("-{marker}-"))
            {
                let p = e.path();
                let _ = std::fs::remove_file(&p).or_else(|_| std::fs::remove_dir_all(&p));
                found.push(p);
            }
        }
    }
    found
}

const SUITE: &str = include_str!("../fixtures/deputy_suite.py");

both_users! {
    outside_tmp
    /// The deputy suite: `/proc` from every angle (`self`, `thread-self`, `..`, the sandbox's own pids
    /// and pid 1, the host's pid; `root`, `cwd`, `exe`, `fd/N` of a directory, a pipe and a socket,
    /// `map_files`, `ns/*`; planted links) through every mediated call. Invariants: no case the agent's
    /// own kernel cannot reach succeeds, a creation lands where the agent's path leads, and nothing on the
    /// host is created, changed, read or connected to. The same script run unconfined reaches the host
    /// and (its kernel being the oracle) reports no violation.
    fn the_deputy_suite_proc_from_every_angle(d) {
        let m = unique_marker();
        let mut control_host = HostSide::new(&d, "suite-control");
        let unconfined = control(&d, &control_dir(&d), SUITE, &[&control_host.pid, control_host.dir(), &m]);
        assert!(unconfined.contains(", 0 violations"), "the oracle must agree with the kernel unconfined:\n{unconfined}");
        for reached in ["case host self/.. environ read -> ok", "case host self/.. sock connect -> ok", "case host self/.. victim trunc -> ok", "case host self/.. fd/1 write -> ok"] {
            assert!(unconfined.contains(reached), "the control must reach the host: {reached}\n{unconfined}");
        }
        assert!(!control_host.changes().is_empty());

        let mut host = HostSide::new(&d, "suite");
        let out = inside(&d, &[], SUITE, &[&host.pid, host.dir(), &m]);
        let changes = host.changes();
        let strays = strays(&d, &m);
        let violations: Vec<&str> = out.stdout.lines().filter(|l| l.contains("VIOLATION")).collect();
        out.ok().stdout_has("deputy suite: ");
        assert!(
            violations.is_empty() && changes.is_empty() && strays.is_empty() && !out.stdout.contains("HOSTVICTIM") && !out.stdout.contains("HOSTENVSECRET"),
            "{} violations:\n{}\nhost changes: {changes:?}\nstrays: {strays:?}",
            violations.len(),
            violations.join("\n")
        );
    }
}

const PROPERTY: &str = include_str!("../fixtures/deputy_property.py");

both_users! {
    outside_tmp
    /// Random paths mixing `/proc`, `self`, `..`, the host's pid, magic links and planted links (to
    /// `/proc/self/..`, `..`, the project, `/`): the mediated `open(O_RDONLY|O_CREAT)` never succeeds
    /// where the agent's own `open(O_RDONLY)` fails (bar a missing leaf it creates), never reaches another
    /// file, and every creation (`open`, `mkdir`) lands where the agent's path leads. The other direction
    /// (the mediator refusing what the kernel allows) is counted and printed, not failed.
    /// `STOCKADE_DEPUTY_SEED` and `STOCKADE_DEPUTY_CASES` (default 3,000) repeat or widen a run.
    fn mediated_opens_agree_with_the_agents_own(d) {
        let m = unique_marker();
        let seed = std::env::var("STOCKADE_DEPUTY_SEED").unwrap_or_else(|_| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs().to_string()
        });
        let cases = std::env::var("STOCKADE_DEPUTY_CASES").unwrap_or_else(|_| "3000".into());
        let mut host = HostSide::new(&d, "property");
        let out = inside(&d, &[], PROPERTY, &[&host.pid, host.dir(), &m, &seed, &cases]);
        let changes = host.changes();
        let strays = strays(&d, &m);
        let summary = out.stdout.lines().find(|l| l.starts_with("property: ")).unwrap_or("no summary");
        eprintln!("{summary} (STOCKADE_DEPUTY_SEED={seed})");
        if !summary.contains(", 0 stricter") {
            eprintln!("WARNING: the mediator refuses opens the agent's kernel allows:\n{}",
                out.stdout.lines().filter(|l| l.starts_with("stricter")).collect::<Vec<_>>().join("\n"));
        }
        let violations: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("VIOLATION")).collect();
        out.ok();
        assert!(
            violations.is_empty() && changes.is_empty() && strays.is_empty() && summary.contains(", 0 violations"),
            "seed {seed}: {} violations:\n{}\nhost changes: {changes:?}\nstrays: {strays:?}\n{summary}",
            violations.len(),
            violations.iter().take(40).copied().collect::<Vec<_>>().join("\n")
        );
    }
}

const SUPERVISOR: &str = r#"
mark = sys.argv[1][::-1]  # given reversed: the program's own command line must not hold it
for pid in sorted(p for p in os.listdir('/proc') if p.isdigit()):
    for what in ('environ', 'cmdline'):
        try:
            with open(f'/proc/{pid}/{what}', 'rb') as f:
                if mark.encode() in f.read():
                    print('ESCAPED', what, pid, flush=True)
        except OSError:
            pass
try:
    fds = os.listdir('/proc/1/fd')
except OSError as e:
    fds = []
    print('held list-init-fds', errno.errorcode.get(e.errno, e.errno), flush=True)
for fd in fds:
    attempt(f'init-fd-{fd}', lambda: os.open(f'/proc/1/fd/{fd}', os.O_WRONLY))
    attempt(f'init-fd-{fd}-mediated', lambda: os.open(f'/proc/1/fd/{fd}', os.O_WRONLY | os.O_CREAT))
attempt('init-root', lambda: create('/proc/1/root/tmp/x'))
attempt('init-cwd', lambda: create('/proc/1/cwd/x'))
print('end', flush=True)
"#;

both_users! {
    /// The supervisor and the sandbox's init are deputies too: the supervisor's environment (where a
    /// gateway's key would be) and its pipes must stay out of reach. From inside, no process in `/proc`
    /// shows the supervisor's environment or command line (it is outside the sandbox's PID namespace),
    /// and the init's descriptors (its report pipe to the supervisor) can be neither opened by the
    /// program (Landlock's ptrace scope) nor through the mediator (another process's `/proc`). The
    /// mediator's refusals are explained as such, in words and in `--json`.
    fn the_supervisor_and_the_init_are_out_of_reach(d) {
        let mark = format!("DEPUTY_MARK_{}", unique_marker());
        let script = format!("{PY_ATTEMPT}{SUPERVISOR}");
        let reversed: String = mark.chars().rev().collect();
        for json in [false, true] {
            let mut argv = vec!["run"];
            argv.extend(json.then_some("--json"));
            argv.extend(["--", "python3", "-c", &script, &reversed]);
            let out = d.stockade(argv).env("STOCKADE_DEPUTY_MARK", &mark).run();
            out.ok().stdout_lacks("ESCAPED").stdout_has("end").stdout_has("held init-root ");
            if json {
                out.stdout_has("\"reason\":\"outside-own-proc\"");
            } else {
                out.stderr_has("in /proc the mediator follows only the program's own process");
            }
        }
    }
}

/// Run as `sh -c 'exec 3<&0 </dev/null; exec python3 -c SCRIPT UP' < DIR`: Python refuses a directory
/// as its stdin, so the directory handed in is descriptor 3.
const HELD_DIR: &str = r#"
up = sys.argv[1]
secret = up.removesuffix('-control') + '-secret'
attempt('overwrite', lambda: write('/proc/self/fd/3/existing', 'OVERWRITTEN'))
attempt('create', lambda: create('/proc/self/fd/3/planted'))
attempt('climb', lambda: create('/proc/self/fd/3/../' + up))
attempt('dirfd', lambda: create_at(3, 'planted-at'))
attempt('cwd', lambda: (os.chdir('/proc/self/fd/3'), create('/proc/self/cwd/planted-cwd'))[1])
attempt('read-beside', lambda: read('/proc/self/fd/3/../' + secret))
attempt('read-beside-unmediated', lambda: open('/proc/self/fd/3/../' + secret).read())
"#;

both_users! {
    outside_tmp
    /// A directory of the host's handed to the program already open (`stockade run -- CMD < DIR`) is a
    /// way out: the kernel walks from it, and `..` from it, in the host's tree, where no mask of the
    /// private root applies (a second red-team run read `/etc/shadow` and `~/.ssh` and wrote `.git/config`
    /// that way, with calls the mediator never sees), and a mediated call through it acted in the host's
    /// directory, judged by names that read as the sandbox's (the first run). The program now gets
    /// /dev/null in its place, with a warning; the mediator also refuses any directory held from
    /// outside its view. The control reaches the host through every route.
    fn a_directory_handed_in_is_not_a_way_out(d) {
        let m = unique_marker();
        let dir = PathBuf::from(format!("/tmp/stockade-deputy-held-{m}"));
        let up = format!("stockade-deputy-up-{m}");
        let _cleanup = Cleanup(vec![dir.clone(), PathBuf::from(format!("/tmp/{up}")), PathBuf::from(format!("/tmp/{up}-control"))]);
        let fresh = || {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("existing"), "ORIGINAL").unwrap();
            give(&d, &dir);
            give(&d, &dir.join("existing"));
        };
        let script = format!("{PY_ATTEMPT}{CREATE_AT}{HELD_DIR}");
        let secret = PathBuf::from(format!("/tmp/{up}-secret"));
        std::fs::write(&secret, "HOSTSECRET").unwrap();
        give(&d, &secret);
        let _secret = Cleanup(vec![secret]);
        let names = ["overwrite", "create", "climb", "dirfd", "cwd", "read-beside", "read-beside-unmediated"];

        let via_fd_3 = "exec 3<&0 </dev/null; exec python3 -c \"$0\" \"$1\"";
        fresh();
        let control = d
            .as_who()
            .args(["sh", "-c", via_fd_3, &script, &format!("{up}-control")])
            .current_dir(control_dir(&d))
            .stdin(std::fs::File::open(&dir).unwrap())
            .output()
            .unwrap();
        let control = String::from_utf8_lossy(&control.stdout).into_owned();
        assert_all_escaped(&control, &names);
        assert_eq!(std::fs::read_to_string(dir.join("existing")).unwrap(), "OVERWRITTEN");

        fresh();
        let mut inside = d.stockade(["run", "--", "sh", "-c", via_fd_3, &script, &up]);
        inside.cmd.stdin(std::fs::File::open(&dir).unwrap());
        let out = inside.run();
        assert_all_held(&out, &names);
        assert_eq!(std::fs::read_to_string(dir.join("existing")).unwrap(), "ORIGINAL");
        let listed: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(listed, vec![std::ffi::OsString::from("existing")], "made in the host's directory");
        assert!(!exists(Path::new(&format!("/tmp/{up}"))), "made in the host's /tmp");
        out.stdout_lacks("HOSTSECRET");
        out.stderr_has("stdin is a directory or a path handle; the program gets /dev/null there instead");
    }
}

/// `create_at(DIRFD, NAME)`: a creation relative to a directory descriptor.
const CREATE_AT: &str = r#"
def create_at(dirfd, name):
    os.close(os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=dirfd))
    return 'created'
"#;

/// Each write through a reopened stdout; `/proc/self/fd/1` with `O_TRUNC` is what `> /dev/stdout` does.
const APPEND_ONLY: &str = r#"
def reopen_write(flags, text):
    f = os.open('/proc/self/fd/1', flags)
    try:
        os.lseek(f, 0, os.SEEK_SET)
    except OSError:
        pass
    return os.write(f, text)
attempt('truncate', lambda: reopen_write(os.O_WRONLY | os.O_CREAT | os.O_TRUNC, b'TRUNCATED\n'))
attempt('drop-append', lambda: reopen_write(os.O_WRONLY | os.O_CREAT, b'OVERWRITE\n'))
"#;

both_users! {
    outside_tmp
    /// A log of the host's given as an append-only stdout (`>> log`) stays append-only: `> /dev/stdout`
    /// (a reopen of `/proc/self/fd/1` with `O_TRUNC`) still works, and what it writes is appended, not
    /// written over the log. Unconfined, the reopen truncates the log.
    fn an_append_only_stdout_stays_append_only(d) {
        let m = unique_marker();
        let log = PathBuf::from(format!("/tmp/stockade-deputy-log-{m}"));
        let _cleanup = Cleanup(vec![log.clone()]);
        let script = format!("{PY_ATTEMPT}{APPEND_ONLY}");
        let run = |control: bool| {
            std::fs::write(&log, "BEFORE\n").unwrap();
            give(&d, &log);
            let out = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
            let mut cmd = python(&d, &script, control);
            let status = cmd.stdout(out).stdin(Stdio::null()).status().unwrap();
            assert!(status.success());
            std::fs::read_to_string(&log).unwrap()
        };
        let unconfined = run(true);
        assert!(!unconfined.contains("BEFORE"), "the control must truncate:\n{unconfined}");
        let inside = run(false);
        assert!(inside.starts_with("BEFORE\n"), "the log was truncated or written over:\n{inside}");
        assert!(inside.contains("TRUNCATED\n") && inside.contains("OVERWRITE\n"), "{inside}");
    }
}

both_users! {
    outside_tmp
    /// The program runs in a session of its own, without the user's terminal, so `/dev/tty` is nothing
    /// to it; the mediator, which performs an `open` with `O_CREAT`, must not open its own controlling
    /// terminal for it (it once did: the program read what the user typed). Run under a terminal made
    /// by `script`, which is also the control's.
    fn the_users_terminal_is_not_reached_through_dev_tty(d) {
        let m = unique_marker();
        let probe = "import os\n\
try:\n    f = os.open('/dev/tty', os.O_RDWR | os.O_CREAT)\n    print('ESCAPED tty', os.ttyname(f), flush=True)\n\
except OSError as e:\n    print('held tty', e.errno, flush=True)\n";
        let result = d.work().join(format!("tty-{m}.txt"));
        let inner = format!("python3 -c \"{probe}\" > {}", result.display());
        let run = |cmd: String| {
            let status = d
                .as_who()
                .args(["script", "-qec", &cmd, "/dev/null"])
                .current_dir(d.work())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "script failed for {cmd}");
            std::fs::read_to_string(&result).unwrap_or_default()
        };
        let control = run(format!("sh -c '{}'", inner.replace('\'', "'\\''")));
        assert!(control.contains("ESCAPED tty"), "the control must open its terminal:\n{control}");
        let inside = run(format!(
            "{} run -- sh -c '{}'",
            bin().display(),
            inner.replace('\'', "'\\''")
        ));
        assert!(inside.contains("held tty"), "{inside}");
    }
}

const PROC_DIRFD: &str = r#"
own = os.open('/proc/self', os.O_RDONLY | os.O_DIRECTORY)
attempt('own-dirfd', lambda: (os.mkdir('cwd/via-proc-dirfd', dir_fd=own), 'made')[1])
init = os.open('/proc/1', os.O_RDONLY | os.O_DIRECTORY)
attempt('init-dirfd', lambda: (os.mkdir('cwd/via-init-dirfd', dir_fd=init), 'made')[1])
"#;

both_users! {
    outside_tmp
    /// A creation relative to a descriptor on a directory inside the sandbox's `/proc`: the caller's own
    /// process directory is placed by walking its path and followed as the caller's (`cwd/x` is made in
    /// its working directory, as unconfined); another process's (the init's, whose `cwd` the program may
    /// not follow) stays refused.
    fn a_dirfd_inside_proc_is_placed_as_the_caller_sees_it(d) {
        let script = format!("{PY_ATTEMPT}{PROC_DIRFD}");
        let out = inside(&d, &[], &script, &[]);
        out.ok().stdout_has("ESCAPED own-dirfd 'made'").stdout_has("held init-dirfd EACCES");
        assert!(exists(&d.work().join("via-proc-dirfd")));
        assert!(!exists(&d.work().join("via-init-dirfd")));
    }
}

const HOST_FILES_ON_STDIO: &str = r#"
import fcntl
# First, while nothing is in the output pipe yet: a read end reopened from the pipe has nothing to take.
attempt('reopen-stdout-for-read', lambda: os.read(os.open('/proc/self/fd/1', os.O_RDONLY | os.O_NONBLOCK), 100))
attempt('fchmod-stdin', lambda: os.fchmod(0, 0o4777))
attempt('xattr-stdin', lambda: os.setxattr(0, 'user.stockade', b'1'))
attempt('utime-stdin', lambda: os.utime(0, (0, 0)))
def write_closed(fd, data):
    try:
        return os.write(fd, data)
    finally:
        os.close(fd)
attempt('reopen-stdin-for-write', lambda: write_closed(os.open('/proc/self/fd/0', os.O_WRONLY), b'W'))
attempt('fchmod-stdout', lambda: os.fchmod(1, 0o600))
attempt('truncate-stdout', lambda: os.ftruncate(1, 0))
attempt('drop-append', lambda: (fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) & ~os.O_APPEND), os.lseek(1, 0, 0), os.write(1, b'OVER'))[2])
print('read', sys.stdin.read().strip(), flush=True)
"#;

both_users! {
    outside_tmp
    /// Files of the user's handed in as stdin and stdout (`< in`, `>> log`) reach the program as pipes the
    /// supervisor feeds and drains: the program reads the input and appends to the log, and can change
    /// nothing else about them (mode, owner, extended attributes, times, length, the `O_APPEND` it was
    /// given), nor reopen them through `/proc/self/fd/N`, where Landlock judges the host's path without
    /// the sandbox's masks. Unconfined, each of these works on the descriptor it holds. Found by the third
    /// red-team run (a setuid bit set on a file given as stdin; `>> log` rewritten from its start).
    fn files_handed_in_on_stdio_are_only_read_and_appended_to(d) {
        let m = unique_marker();
        let input = PathBuf::from(format!("/tmp/stockade-deputy-in-{m}"));
        let log = PathBuf::from(format!("/tmp/stockade-deputy-out-{m}"));
        let _cleanup = Cleanup(vec![input.clone(), log.clone()]);
        let script = format!("{PY_ATTEMPT}{HOST_FILES_ON_STDIO}");
        let run = |control: bool| {
            std::fs::write(&input, "INPUT").unwrap();
            std::fs::set_permissions(&input, std::fs::Permissions::from_mode(0o644)).unwrap();
            std::fs::write(&log, "BEFORE\n").unwrap();
            give(&d, &input);
            give(&d, &log);
            let mut cmd = python(&d, &script, control);
            let status = cmd
                .stdin(std::fs::File::open(&input).unwrap())
                .stdout(std::fs::OpenOptions::new().append(true).open(&log).unwrap())
                .status()
                .unwrap();
            assert!(status.success());
            let mode = std::fs::metadata(&input).unwrap().permissions().mode() & 0o7777;
            (std::fs::read_to_string(&log).unwrap(), mode)
        };
        let (unconfined, mode) = run(true);
        assert_ne!(mode, 0o644, "the control must chmod its stdin:\n{unconfined}");
        assert!(!unconfined.starts_with("BEFORE\n"), "the control must rewrite the log:\n{unconfined}");
        let (inside, mode) = run(false);
        assert_eq!(mode, 0o644, "the input's mode changed from inside:\n{inside}");
        assert!(inside.starts_with("BEFORE\n"), "the log was rewritten:\n{inside}");
        // The program's own `W`, written into its stdin pipe, may come before or after the input.
        assert!(inside.lines().any(|l| l.starts_with("read ") && l.contains("INPUT")), "{inside}");
        assert_eq!(std::fs::read_to_string(&input).unwrap(), "INPUT");
        // Reopening the pipes is harmless (a second end of the same pipe); the files stay as they were.
        for name in ["truncate-stdout", "reopen-stdout-for-read"] {
            assert!(inside.contains(&format!("held {name} ")), "{name}:\n{inside}");
        }
        assert!(std::fs::metadata(&log).unwrap().len() > 7, "{inside}");
    }
}

/// A path handle (`O_PATH`) as stdin leads out of the sandbox like a directory (its `/proc/self/fd/0` is
/// reopened as the host's path, without the sandbox's masks): the program gets `/dev/null` instead.
#[test]
fn a_path_handle_on_stdin_is_replaced() {
    if !landlock_ready() {
        return;
    }
    let d = TestDir::outside_tmp(Who::Root);
    let m = unique_marker();
    let secret = PathBuf::from(format!("/tmp/stockade-deputy-opath-{m}"));
    std::fs::write(&secret, "OPATHSECRET").unwrap();
    let _cleanup = Cleanup(vec![secret.clone()]);
    let launcher = format!(
        "import os, sys\nfd = os.open({secret:?}, os.O_PATH)\nos.dup2(fd, 0)\nos.execv(sys.argv[1], sys.argv[1:])\n",
        secret = secret.display().to_string()
    );
    let out = Command::new("python3")
        .args(["-c", &launcher])
        .arg(bin())
        .args(["run", "--", "sh", "-c", "cat /proc/self/fd/0; echo end"])
        .current_dir(d.work())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("end") && !stdout.contains("OPATHSECRET"),
        "{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("stdin is a directory or a path handle"),
        "{stderr}"
    );
}

/// The sandbox's `/dev` holds the host's device nodes, read-only: a program running as root (the owner,
/// though without capabilities) cannot chmod or touch the host's `/dev/null`, which Landlock has no
/// right for; the devices themselves still read and write. (As another user the kernel refuses anyway.)
#[test]
fn the_hosts_device_nodes_cannot_be_changed() {
    if !landlock_ready() || !is_root() {
        eprintln!("SKIPPED: needs root and Landlock");
        return;
    }
    let d = TestDir::outside_tmp(Who::Root);
    let before = std::fs::metadata("/dev/null").unwrap();
    let out = d.sh(&[], "chmod 1666 /dev/null; touch -d 2001-01-01 /dev/zero; echo x > /dev/null && head -c 2 /dev/zero | wc -c");
    let after = std::fs::metadata("/dev/null").unwrap();
    if after.permissions().mode() != before.permissions().mode() {
        std::fs::set_permissions("/dev/null", before.permissions()).unwrap();
        panic!("the host's /dev/null was chmod'ed from inside");
    }
    use std::os::unix::fs::MetadataExt;
    assert!(
        std::fs::metadata("/dev/zero").unwrap().mtime() > 1_000_000_000 + 100_000_000,
        "/dev/zero touched"
    );
    out.ok().stdout_has("2").stderr_has("Read-only file system");
}
