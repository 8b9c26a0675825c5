//! Kernel objects outside the sandbox, and the sockets in granted trees: issue 15's attacks, each tried
//! unconfined first (it must escape there), then under `stockade run`.

use std::process::Command;

use super::util::*;
use crate::both_users;

/// Runs `python3 -c SCRIPT` on the host, unconfined, as the test directory's user; returns stdout.
fn host_python(d: &TestDir, script: &str) -> String {
    // Debian's own python: a pyenv shim under /root is not the test user's to run.
    let out = d
        .as_who()
        .args(["/usr/bin/python3", "-c", script])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// x86_64 system call numbers, through libc's `syscall` (Python has no keyring or io_uring binding).
const PY_SYSCALLS: &str = "import ctypes, os, sys\n\
libc = ctypes.CDLL(None, use_errno=True)\n\
libc.syscall.restype = ctypes.c_long\n\
ADD_KEY, KEYCTL, IO_URING_SETUP = 248, 250, 425\n\
SEARCH, READ, UNLINK, USER_KEYRING = 10, 11, 9, -4\n\
def err(): return os.strerror(ctypes.get_errno())\n";

both_users! {
    /// A key the user stored in their keyring is neither found, read nor listed inside: the keyring calls
    /// are refused and `/proc/keys` is masked (as root the run shares the host's keyrings otherwise).
    fn kernel_keyrings_are_out_of_reach(d) {
        if !cfg!(target_arch = "x86_64") {
            eprintln!("SKIPPED: the script uses x86_64 system call numbers");
            return;
        }
        let desc = format!("stockade-test-{}", unique_marker());
        let secret = format!("KEYSECRET{}", unique_marker());
        let find = format!("{PY_SYSCALLS}\
k = libc.syscall(KEYCTL, SEARCH, USER_KEYRING, b'user', b'{desc}', 0)\n\
print('search', k, err())\n\
buf = ctypes.create_string_buffer(256)\n\
n = libc.syscall(KEYCTL, READ, k, buf, 256) if k > 0 else -1\n\
print('read', buf.raw[:max(n, 0)].decode())\n\
print(open('/proc/keys').read() if os.access('/proc/keys', os.R_OK) else 'no /proc/keys')\n");
        let added = host_python(&d, &format!("{PY_SYSCALLS}print(libc.syscall(ADD_KEY, b'user', b'{desc}', b'{secret}', {}, USER_KEYRING))\n", secret.len()));
        let id: i64 = added.trim().parse().unwrap_or(-1);
        assert!(id > 0, "could not add a key on the host: {added}");
        let unconfined = host_python(&d, &find);
        let out = d.stockade(["run", "--", "python3", "-c", &find]).run();
        host_python(&d, &format!("{PY_SYSCALLS}libc.syscall(KEYCTL, UNLINK, {id}, USER_KEYRING)\n"));
        assert!(unconfined.contains(&secret) && unconfined.contains(&desc), "the control must reach the key:\n{unconfined}");
        out.ok().stdout_lacks(&secret).stdout_lacks(&desc).stdout_has("Operation not permitted");
    }
}

both_users! {
    /// SysV IPC objects of the host (here a shared memory segment) are not visible; POSIX message queues
    /// have no `/dev/mqueue`; `io_uring`, whose operations would bypass the filter, looks absent.
    fn ipc_objects_and_io_uring_are_out_of_reach(d) {
        let made = Command::new("ipcmk").args(["-M", "4096"]).output().unwrap();
        let text = String::from_utf8_lossy(&made.stdout);
        let id = text.split_whitespace().last().unwrap_or("").to_string();
        assert!(!id.is_empty(), "ipcmk failed: {text}");
        let listed = std::fs::read_to_string("/proc/sysvipc/shm").unwrap();
        let uring = format!("{PY_SYSCALLS}p = ctypes.create_string_buffer(120)\nr = libc.syscall(IO_URING_SETUP, 1, p)\nprint('uring', 'made' if r >= 0 else err())\n");
        let unconfined = host_python(&d, &uring);
        let out = d.sh(&[], &format!("cat /proc/sysvipc/shm; ls -d /dev/mqueue 2>&1; python3 -c \"{}\"", uring.replace('"', "\\\"")));
        let _ = Command::new("ipcrm").args(["-m", &id]).status();
        assert!(listed.contains(&format!(" {id} ")), "the control must list the segment");
        assert!(unconfined.contains("uring made"), "the control must make a ring: {unconfined}");
        out.ok().stdout_lacks(&format!(" {id} ")).stdout_has("No such file").stdout_has("uring Function not implemented");
    }
}

both_users! {
    /// Connecting to a pathname socket is a write to it: a socket in a tree granted read-only is refused
    /// (a read-only mount does not stop `connect`, and Landlock has no right for it); one in a writable
    /// tree is reached. The refusal is in the run's outcome.
    fn connecting_to_a_socket_needs_write_on_its_path(d) {
        use std::os::unix::fs::PermissionsExt;
        d.mkdir("outside").mkdir("work/sockets");
        let ro = d.path("outside/app.sock");
        let rw = d.path("work/sockets/dev.sock");
        let _ro_listener = std::os::unix::net::UnixListener::bind(&ro).unwrap();
        let _rw_listener = std::os::unix::net::UnixListener::bind(&rw).unwrap();
        for s in [&ro, &rw] {
            std::fs::set_permissions(s, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        let connect = |p: &std::path::Path| format!(
            "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect('{}')\n    print('CONNECTED')\nexcept OSError as e:\n    print('refused', e.strerror)\n",
            p.display());
        assert!(host_python(&d, &connect(&ro)).contains("CONNECTED"), "the control must connect");
        let outside = d.path("outside");
        let out = d.stockade(["run", "--json", "--ro", outside.to_str().unwrap(), "--", "python3", "-c", &connect(&ro)]).run();
        out.ok().stdout_lacks("CONNECTED").stdout_has("refused Permission denied");
        assert!(out.stdout.contains(&format!("connect write {}", ro.display())), "{}", out.stdout);
        d.stockade(["run", "--", "python3", "-c", &connect(&rw)]).run().ok().stdout_has("CONNECTED");
        // A symlink in the writable tree to the read-only socket leads to the same refusal.
        std::os::unix::fs::symlink(&ro, d.path("work/sockets/link.sock")).unwrap();
        let link = d.path("work/sockets/link.sock");
        d.stockade(["run", "--ro", outside.to_str().unwrap(), "--", "python3", "-c", &connect(&link)]).run()
            .ok().stdout_lacks("CONNECTED");
    }
}

both_users! {
    /// `bind` gives a socket a name: in the project root (where names matter) it is made by the mediator
    /// and works, in a subdirectory the kernel makes it, and a protected name is refused.
    fn binding_a_socket_is_a_creation(d) {
        d.mkdir("work/sub");
        let script = "import socket\n\
for p in ('dev.sock', 'sub/dev.sock', '.mcp.json'):\n    \
s = socket.socket(socket.AF_UNIX)\n    \
try:\n        s.bind(p); s.listen(1); c = socket.socket(socket.AF_UNIX); c.connect(p); print('bound', p)\n    \
except OSError as e:\n        print('refused', p, e.strerror)\n";
        let out = d.stockade(["run", "--", "python3", "-c", script]).run();
        out.ok().stdout_has("bound dev.sock").stdout_has("bound sub/dev.sock").stdout_has("refused .mcp.json Permission denied");
        assert!(!exists(&d.path("work/.mcp.json")));
    }
}

both_users! {
    /// A seccomp notification names the calling thread: a connect from a thread that does not lead its
    /// process (as every HTTP client pool makes them) works like one from the main thread, for TCP on the
    /// sandbox's loopback and for a Unix socket in the project.
    fn connects_work_from_any_thread(d) {
        d.write("work/threads.py", r#"import os, socket, threading
tcp = socket.socket(); tcp.bind(('127.0.0.1', 0)); tcp.listen(8)
unix = socket.socket(socket.AF_UNIX); unix.bind('s.sock'); unix.listen(8)
results = []
def client():
    for family, address in [(socket.AF_INET, tcp.getsockname()), (socket.AF_UNIX, 's.sock')]:
        for blocking in (True, False):
            c = socket.socket(family)
            c.setblocking(blocking)
            try:
                c.connect(address)
                results.append('ok')
            except BlockingIOError:
                results.append('ok')
            except OSError as e:
                results.append(f'{family} {e}')
t = threading.Thread(target=client); t.start(); t.join()
print(threading.get_native_id() != t.native_id, results)
"#);
        d.sh(&[], "python3 threads.py").ok().stdout_has("True ['ok', 'ok', 'ok', 'ok']");
    }
}
