//! Many agents at once (issue #7): 50 runs side by side cannot reach each other's files, processes or
//! environment; all finish; their temp dirs are gone; cancelling one takes its whole tree and nothing else.

use std::process::Stdio;

use super::util::*;

const AGENTS: usize = 50;

#[test]
fn fifty_agents_at_once_stay_apart_and_one_cancelled_leaves_the_rest() {
    if !landlock_ready() {
        return;
    }
    let d = TestDir::new(Who::Root);
    for i in 0..AGENTS {
        d.write(&format!("agents/a{i}/own.txt"), &format!("OWN{i}\n"));
    }
    // Four bombs, each in its own run beside the agents, each stopped by its limit.
    d.mkdir("bombs");
    let bomb = |flags: &[&str], script: &str| {
        let mut args = vec!["run", "--project", "../bombs"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "sh", "-c", script]);
        let mut cmd = d.stockade(args).cmd;
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.spawn().unwrap()
    };
    let bombs = vec![
        bomb(
            &["--memory", "64MiB"],
            "python3 -c \"b = bytearray(512 * 1024 * 1024); print('ALLOCATED')\"",
        ),
        bomb(&["--max-output", "4KiB"], "yes flood"),
        bomb(
            &["--max-file-size", "1MiB"],
            "head -c 5000000 /dev/zero > big; echo status=$?",
        ),
        bomb(
            &["--user", TEST_USER, "--pids", "30"],
            "python3 -c \"import os\nfor _ in range(300):\n    try:\n        os.fork() or (__import__('time').sleep(3), os._exit(0))\n    except OSError:\n        print('STOPPED'); break\n\"",
        ),
    ];
    let victim_marker = format!("30.{}", unique_marker());
    let mut children = Vec::new();
    for i in 0..AGENTS {
        let other = (i + 1) % AGENTS;
        let wait = if i == 0 {
            format!("sleep {victim_marker}")
        } else {
            "sleep 1".to_string()
        };
        let script = format!(
            "echo mine > written.txt; \
             cat ../a{other}/own.txt 2>/dev/null && echo READ-OTHER || echo no-read; \
             (echo x > ../a{other}/pwn.txt) 2>/dev/null && echo WROTE-OTHER || echo no-write; \
             echo procs=$(ls /proc | grep -c '^[0-9]'); \
             printenv SECRET_{other} >/dev/null && echo SAW-ENV || echo no-env; \
             kill -0 -1 2>/dev/null; echo tmp=$TMPDIR; {wait}; echo finished"
        );
        let project = d.path(&format!("agents/a{i}")).display().to_string();
        let mut cmd = d
            .stockade([
                "run",
                "--project",
                &project,
                "--env",
                &format!("SECRET_{i}=s{i}"),
                "--",
                "sh",
                "-c",
                &script,
            ])
            .cmd;
        cmd.current_dir(&project)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        children.push(cmd.spawn().unwrap());
    }
    // Cancel agent 0 mid-run: its whole tree goes, the others are unaffected.
    assert!(
        wait_sleeping(&victim_marker, true, 60),
        "agent 0 never started sleeping"
    );
    let victim = children.remove(0);
    let cancelled = std::time::Instant::now();
    std::process::Command::new("kill")
        .args(["-TERM", &victim.id().to_string()])
        .status()
        .unwrap();
    assert!(
        wait_sleeping(&victim_marker, false, 10),
        "agent 0's sleep outlived its cancelled run"
    );
    eprintln!(
        "cancel: agent 0's tree was gone {} ms after SIGTERM to its stockade",
        cancelled.elapsed().as_millis()
    );
    let victim = victim.wait_with_output().unwrap();
    assert_eq!(victim.status.code(), Some(128 + 15));

    for (n, child) in children.into_iter().enumerate() {
        let i = n + 1;
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "agent {i}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for forbidden in ["READ-OTHER", "WROTE-OTHER", "SAW-ENV", "OWN"] {
            assert!(
                !stdout.contains(forbidden),
                "agent {i} did {forbidden}: {stdout}"
            );
        }
        assert!(stdout.contains("finished"), "agent {i}: {stdout}");
        let procs: usize = stdout
            .lines()
            .find_map(|l| l.strip_prefix("procs="))
            .and_then(|n| n.trim().parse().ok())
            .unwrap();
        assert!(procs <= 8, "agent {i} sees {procs} processes: {stdout}");
        let tmp = stdout.lines().find_map(|l| l.strip_prefix("tmp=")).unwrap();
        assert!(
            !tmp.is_empty() && !std::path::Path::new(tmp).exists(),
            "agent {i}: temp dir {tmp:?} left on the host"
        );
        assert_eq!(
            d.read(&format!("agents/a{i}/written.txt")).as_deref(),
            Some("mine\n")
        );
    }
    for i in 0..AGENTS {
        assert!(!d.path(&format!("agents/a{i}/pwn.txt")).exists());
    }
    let outs: Vec<_> = bombs
        .into_iter()
        .map(|b| b.wait_with_output().unwrap())
        .collect();
    let text = |o: &std::process::Output| {
        (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (memory, flood, disk, fork) = (
        text(&outs[0]),
        text(&outs[1]),
        text(&outs[2]),
        text(&outs[3]),
    );
    assert!(
        outs[0].status.code() != Some(0)
            && !memory.0.contains("ALLOCATED")
            && memory.1.contains("MemoryError"),
        "{memory:?}"
    );
    assert_eq!(outs[1].status.code(), Some(128 + 9));
    assert!(
        flood
            .1
            .contains("stdout exceeded the output limit of 4096 bytes"),
        "{flood:?}"
    );
    assert!(
        disk.0.contains("status=") && !disk.0.contains("status=0"),
        "{disk:?}"
    );
    assert!(std::fs::metadata(d.path("bombs/big")).unwrap().len() <= 1 << 20);
    assert!(fork.0.contains("STOPPED"), "{fork:?}");
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// The hook under a burst: 1,000 calls from 8 parallel callers, every decision right. Latencies are
/// printed (and recorded in BENCHMARKS.md), not asserted: these machines are shared.
#[test]
fn the_hook_under_a_burst_of_parallel_calls_decides_every_one_right() {
    let d = TestDir::new(Who::Root);
    d.write("work/src/lib.rs", "fn main() {}\n")
        .write("work/.env", "TOKEN=1\n");
    let work = d.work().display().to_string();
    let latencies = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for caller in 0..8 {
            let (d, work, latencies) = (&d, &work, &latencies);
            scope.spawn(move || {
                for call in 0..125 {
                    let (path, allowed) = match (caller + call) % 3 {
                        0 => (format!("{work}/src/lib.rs"), true),
                        1 => (format!("{work}/.env"), false),
                        _ => ("/etc/shadow".to_string(), false),
                    };
                    let input = serde_json::json!({
                        "session_id": "s", "cwd": work, "hook_event_name": "PreToolUse",
                        "tool_name": "Read", "tool_input": {"file_path": path}
                    });
                    let start = std::time::Instant::now();
                    let out = d
                        .stockade(["hook", "claude", "--deny", "**/.env"])
                        .run_with_stdin(&input.to_string());
                    let elapsed = start.elapsed().as_secs_f64() * 1000.0;
                    assert_eq!(out.code, if allowed { 0 } else { 2 }, "{path}: {out:?}");
                    latencies.lock().unwrap().push(elapsed);
                }
            });
        }
    });
    let mut all = latencies.into_inner().unwrap();
    all.sort_by(f64::total_cmp);
    assert_eq!(all.len(), 1000);
    eprintln!(
        "hook burst: 1000 calls, 8 callers: median {:.2} ms, p99 {:.2} ms (each through setpriv + a fresh process)",
        percentile(&all, 0.5),
        percentile(&all, 0.99)
    );
}

fn rss_and_fds(pid: u32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0);
    (rss, fds)
}

/// 8 MCP clients, each on its own `stockade mcp`, doing reads, finds and greps for a while
/// (`STOCKADE_LOAD_SECONDS`, default 5; 60 on demand): no error, no descriptor leak, memory flat.
#[test]
fn the_mcp_server_under_eight_concurrent_clients() {
    use std::io::{BufRead, BufReader, Write};
    let seconds: u64 = std::env::var("STOCKADE_LOAD_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let d = TestDir::new(Who::Root);
    for i in 0..40 {
        d.write(
            &format!("work/src/m{i}.rs"),
            &format!("fn f{i}() {{ let x = {i}; }}\n").repeat(50),
        );
    }
    let root = d.work().display().to_string();
    let total = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for client in 0..8 {
            let (d, root, total) = (&d, &root, &total);
            scope.spawn(move || {
                let mut cmd = d.stockade(["mcp", "--root", root]).cmd;
                cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
                let mut server = cmd.spawn().unwrap();
                let mut input = server.stdin.take().unwrap();
                let mut output = BufReader::new(server.stdout.take().unwrap());
                let mut line = String::new();
                let mut id = 0;
                let mut call = |method: &str, params: serde_json::Value| -> serde_json::Value {
                    if method.starts_with("notifications/") {
                        writeln!(input, "{}", serde_json::json!({"jsonrpc": "2.0", "method": method})).unwrap();
                        return serde_json::Value::Null;
                    }
                    id += 1;
                    let msg = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
                    writeln!(input, "{msg}").unwrap();
                    loop {
                        line.clear();
                        assert!(output.read_line(&mut line).unwrap() > 0, "client {client}: server closed");
                        let reply: serde_json::Value = serde_json::from_str(&line).unwrap();
                        if reply["id"] == id {
                            assert!(reply.get("error").is_none(), "client {client}: {reply}");
                            return reply["result"].clone();
                        }
                    }
                };
                call("initialize", serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "load", "version": "1"}}));
                call("notifications/initialized", serde_json::Value::Null);
                let tools = [
                    ("read_file", serde_json::json!({"path": format!("src/m{client}.rs")})),
                    ("find_files", serde_json::json!({"patterns": ["*.rs"]})),
                    ("grep", serde_json::json!({"pattern": "let x = 3", "contextLines": 1})),
                ];
                let mut warm = None;
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
                let mut n = 0usize;
                while std::time::Instant::now() < deadline {
                    let (tool, args) = &tools[n % tools.len()];
                    let result = call("tools/call", serde_json::json!({"name": tool, "arguments": args}));
                    assert_ne!(result["isError"], true, "client {client}: {tool}: {result}");
                    n += 1;
                    if n == 30 {
                        warm = Some(rss_and_fds(server.id()));
                    }
                }
                let pid = server.id();
                let end = rss_and_fds(pid);
                if let Some((rss, fds)) = warm {
                    assert_eq!(end.1, fds, "client {client}: descriptors leaked");
                    assert!(end.0 < rss + 16 * 1024, "client {client}: RSS grew from {rss} to {} KiB", end.0);
                }
                drop(input);
                let _ = server.wait();
                total.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            });
        }
    });
    let calls = total.into_inner();
    eprintln!(
        "mcp load: 8 clients, {seconds} s, {calls} calls ({:.0} calls/s in all)",
        calls as f64 / seconds as f64
    );
}

/// Arbitrary bytes on the real hook's stdin (issue #7): it only ever exits 0 or 2, and never allows (exit 0
/// with an allow) a call it could not parse. The in-process fuzz target `hook_input` goes much further.
#[test]
fn the_hook_binary_exits_0_or_2_for_any_input() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    let d = TestDir::new(Who::Root);
    let mut runner = TestRunner::new(Config {
        cases: 150,
        failure_persistence: None,
        ..Config::default()
    });
    let json_ish = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        "\\{\"tool_name\":\"(Read|Write|Bash|mcp__x__y)\",\"tool_input\":\\{\"(file_path|command|path)\":\"[ -~]{0,40}\"\\}(,\"cwd\":\"/[a-z/]{0,10}\")?\\}",
    ];
    runner
        .run(&json_ish, |input| {
            let out = d.stockade(["hook", "claude"]).run_with_stdin(&input);
            prop_assert!(
                out.code == 0 || out.code == 2,
                "exit {} for {input:?}: {out:?}",
                out.code
            );
            if serde_json::from_str::<serde_json::Value>(&input).is_err() {
                prop_assert_eq!(out.code, 2, "unparsable input was let through: {:?}", input);
            }
            Ok(())
        })
        .unwrap();
}

/// stockade makes nothing in the user's tree, not even while a run lasts (the user's editor would see
/// it): a protected name that does not exist stays absent on the host during the run, and a second run
/// started meanwhile cannot create it either.
#[test]
fn nothing_appears_in_the_project_while_runs_last() {
    if !landlock_ready() {
        return;
    }
    let d = TestDir::new(Who::Root);
    let spawn = |script: String| {
        let mut cmd = d.stockade(["run", "--", "sh", "-c", &script]).cmd;
        cmd.stdout(Stdio::piped());
        cmd.spawn().unwrap()
    };
    let first = format!("1.{}", unique_marker());
    let second = format!("3.{}", unique_marker());
    let maker = spawn(format!("sleep {first}"));
    assert!(wait_sleeping(&first, true, 30));
    let other = spawn(format!(
        "sleep {second}; mkdir -p .claude/planted 2>/dev/null && echo PLANTED || echo KEPT"
    ));
    assert!(wait_sleeping(&second, true, 30));
    let listed: Vec<_> = std::fs::read_dir(d.work())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(listed.is_empty(), "the run made {listed:?} in the project");
    assert!(maker.wait_with_output().unwrap().status.success());
    let out = other.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "KEPT");
    assert!(!d.path("work/.claude").exists());
}
