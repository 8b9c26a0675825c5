//! Limits, exit codes and `--json`.

use super::util::*;
use crate::both_users;

both_users! {
    /// Memory limit: an allocation past it fails inside the agent; the run ends with its error.
    fn memory_limit_stops_a_memory_bomb(d) {
        let out = d.sh(&["--memory", "64MiB"], "python3 -c \"b = bytearray(512 * 1024 * 1024); print('ALLOCATED')\"");
        assert_ne!(out.code, 0);
        assert!(!out.stdout.contains("ALLOCATED"));
        assert!(out.stderr.contains("MemoryError"), "{}", out.stderr);
    }
}

both_users! {
    /// Output limit: a flood is cut at the limit and the run stopped, with a clear message.
    fn output_limit_stops_a_flood(d) {
        let out = d.sh(&["--max-output", "4KiB"], "yes flood");
        out.stderr_has("stdout exceeded the output limit of 4096 bytes");
        assert_eq!(out.stdout.len(), 4096);
        assert_eq!(out.code, 128 + 9);
    }
}

both_users! {
    /// File size limit: a disk-filling writer is stopped by SIGXFSZ.
    fn file_size_limit_stops_a_disk_filler(d) {
        let out = d.sh(&["--max-file-size", "1MiB"], "head -c 5000000 /dev/zero > big; echo status=$?");
        out.ok().stdout_lacks("status=0");
        assert!(std::fs::metadata(d.path("work/big")).unwrap().len() <= 1 << 20);
    }
}

#[test]
fn pids_limit_stops_a_fork_bomb_for_an_unprivileged_user() {
    if !landlock_ready() {
        return;
    }
    let d = TestDir::new(Who::User);
    let out = d.sh(
        &["--pids", "30"],
        "python3 -c \"
import os
n = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            import time; time.sleep(5); os._exit(0)
        n += 1
except OSError as e:
    print('STOPPED', n, e.errno)
\"",
    );
    out.ok().stdout_has("STOPPED");
}

#[test]
fn pids_limit_as_root_without_user_is_refused() {
    if !landlock_ready() || !is_root() {
        return;
    }
    let d = TestDir::new(Who::Root);
    d.sh(&["--pids", "30"], "true")
        .code(125)
        .stderr_has("--user");
}

#[test]
fn user_flag_runs_as_that_user() {
    if !landlock_ready() || !is_root() || test_user().is_none() {
        return;
    }
    let d = TestDir::new(Who::Root);
    let (uid, _, _) = test_user().unwrap();
    d.sh(&["--user", TEST_USER], "id -u")
        .ok()
        .stdout_has(&uid.to_string());
    d.sh(&["--user", "no-such-user-here"], "true")
        .code(125)
        .stderr_has("no user named");
}

both_users! {
    /// Exit codes: the child's passes through, 128+N for a signal, 127 not found, 126 not executable,
    /// 125 for a policy error.
    fn exit_codes(d) {
        d.sh(&[], "exit 3").code(3);
        d.sh(&[], "kill -KILL $$").code(128 + 9);
        d.stockade(["run", "--", "no-such-program-xyz"]).run().code(127).stderr_has("command not found");
        d.write("work/noexec", "#!/bin/sh\n");
        d.stockade(["run", "--", "./noexec"]).run().code(126).stderr_has("cannot be executed");
        d.write("bad.toml", "[profile.p]\nfs.wrtie = [\".\"]\n");
        let bad = d.path("bad.toml");
        d.stockade(["run", "--policy", bad.to_str().unwrap(), "--", "true"]).run().code(125).stderr_has("bad.toml:2");
        d.stockade(["run", "--timeout", "soon", "--", "true"]).run().code(125).stderr_has("--timeout");
    }
}

both_users! {
    /// `--json` prints one object at the end with the outcome.
    fn json_reports_the_outcome(d) {
        let out = d.stockade(["--json", "run", "--", "true"]).run();
        out.ok();
        let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
        assert_eq!(v["exit_code"], 0);
        assert_eq!(v["status"], 0);
        assert_eq!(v["timed_out"], false);
        assert!(v["duration_ms"].is_u64());
        assert!(v["peak_memory_bytes"].as_u64().unwrap() > 0);
        assert!(v["denials_observed"].is_array());
        let out = d.stockade(["--json", "run", "--timeout", "200ms", "--", "sleep", "5"]).run();
        out.code(124);
        let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
        assert_eq!(v["timed_out"], true);
        assert_eq!(v["stopped"]["kind"], "timeout");
    }
}

/// `--dry-run` shows what the sandbox would contain and runs nothing.
#[test]
fn dry_run_shows_the_sandbox_and_runs_nothing() {
    let d = TestDir::new(Who::Root);
    let out = d
        .stockade(["run", "--dry-run", "--deny", "secret", "--", "touch", "ran"])
        .run();
    out.ok()
        .stdout_has("fresh /proc")
        .stdout_has("landlock rules");
    let work = d.work().display().to_string();
    assert!(
        out.stdout
            .lines()
            .any(|l| l.contains("bind read-write") && l.trim_end().ends_with(&work)),
        "{}",
        out.stdout
    );
    assert!(d.read("work/ran").is_none(), "--dry-run ran the command");
    let out = d
        .stockade(["--json", "run", "--dry-run", "--", "true"])
        .run();
    out.ok();
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(v["profile"], "workspace-write");
    assert!(
        v["plan"]["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["op"]["op"] == "bind" && m["path"] == d.work().display().to_string())
    );
    assert!(v["env"].as_array().unwrap().iter().any(|e| e == "PATH"));
}
