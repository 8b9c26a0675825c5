//! Round trips per second of MCP `tools/call` through a server's real stdio, from a client cheap enough
//! that the server, not the client, is what is measured (bench/mcp.sh runs it against two servers).
//!
//! ```text
//! cargo run --release -p stockade-mcp --example mcp_rtt -- CALLS WINDOW DIR -- SERVER ARGS...
//! ```
//! Times CALLS `read_file` calls on the files of DIR and CALLS `list_directory` calls of DIR, WINDOW
//! requests in flight (1: one at a time, as an agent issues them). Prints one JSON line per tool.
//! `MCP_RTT_TOOLS=list_directory` times only the tools it names (comma-separated), for profiling one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    reason = "a benchmark driver: it fails loudly and prints its result"
)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let split = args
        .iter()
        .position(|a| a == "--")
        .expect("CALLS WINDOW DIR -- SERVER...");
    let calls: usize = args[1].parse().expect("CALLS");
    let window: usize = args[2].parse().expect("WINDOW");
    let dir = std::path::PathBuf::from(&args[3]);
    let mut child = Command::new(&args[split + 1])
        .args(&args[split + 2..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the server");
    let mut input = std::io::BufWriter::new(child.stdin.take().unwrap());
    let mut output = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut next_id = 0u64;
    let mut send = |input: &mut std::io::BufWriter<_>, method: &str, params: Value, id: bool| {
        let mut message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        if id {
            next_id += 1;
            message["id"] = json!(next_id);
        }
        serde_json::to_writer(&mut *input, &message).unwrap();
        input.write_all(b"\n").unwrap();
    };
    let mut receive = |output: &mut BufReader<_>| -> Value {
        loop {
            line.clear();
            assert!(
                output.read_line(&mut line).unwrap() > 0,
                "the server closed its stdout"
            );
            let reply: Value = serde_json::from_str(&line).unwrap();
            if reply.get("id").is_some() {
                assert!(reply.get("error").is_none(), "{reply}");
                assert_ne!(reply["result"]["isError"], json!(true), "{reply}");
                return reply;
            }
        }
    };
    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "mcp_rtt", "version": "1"}});
    send(&mut input, "initialize", init, true);
    input.flush().unwrap();
    receive(&mut output);
    send(&mut input, "notifications/initialized", json!({}), false);
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
        .map(|e| e.path().display().to_string())
        .collect();
    files.sort();
    let dir_text = dir.display().to_string();
    let only = std::env::var("MCP_RTT_TOOLS").unwrap_or_default();
    let mut timed = 0;
    for tool in ["read_file", "list_directory"] {
        if !only.is_empty() && !only.split(',').any(|t| t == tool) {
            continue;
        }
        timed += 1;
        let arguments = |i: usize| match tool {
            "read_file" => json!({"path": files[i % files.len()]}),
            _ => json!({"path": dir_text}),
        };
        let mut run = |n: usize| -> f64 {
            let start = Instant::now();
            let (mut sent, mut received) = (0, 0);
            while received < n {
                while sent < n && sent - received < window {
                    send(
                        &mut input,
                        "tools/call",
                        json!({"name": tool, "arguments": arguments(sent)}),
                        true,
                    );
                    sent += 1;
                }
                input.flush().unwrap();
                receive(&mut output);
                received += 1;
            }
            start.elapsed().as_secs_f64()
        };
        run(100);
        let seconds = run(calls);
        println!(
            "{}",
            json!({"tool": tool, "calls": calls, "window": window, "seconds": (seconds * 1000.0).round() / 1000.0,
                   "calls_per_second": (calls as f64 / seconds).round()})
        );
    }
    // The server's own CPU time (utime + stime, in clock ticks of 10 ms), to tell its cost from the client's.
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: u64 = fields
        .get(11..13)
        .map_or(0, |f| f.iter().filter_map(|x| x.parse::<u64>().ok()).sum());
    println!(
        "{}",
        json!({"server_cpu_seconds": ticks as f64 / 100.0, "calls": timed * (calls + 100)})
    );
    drop(input);
    let _ = child.wait();
}
