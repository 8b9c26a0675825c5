//! The network allowlist (issue 16): a private network namespace whose only way out is stockade's proxy,
//! against local upstream servers whose names the tests pin (`$STOCKADE_NET_HOSTS`).

use std::io::{Read, Write};
use std::net::TcpListener;

use super::util::*;
use crate::both_users;

/// An HTTP server on 127.0.0.1 answering every request with `hello from upstream` and the request line it
/// got; runs until the test process ends.
fn upstream() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&request)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string();
                let body = format!("hello from upstream: {line}\n");
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    port
}

/// A hosts file pinning the test names, all to loopback (where the upstream listens).
fn hosts(d: &TestDir) -> String {
    let path = d.path("hosts");
    std::fs::write(
        &path,
        "127.0.0.1 good.test sub.good.test bad.good.test rebind.test\n",
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

fn run_net(d: &TestDir, flags: &[&str], script: &str) -> Out {
    let hosts = hosts(d);
    let mut args = vec!["run"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    d.stockade(args).env("STOCKADE_NET_HOSTS", &hosts).run()
}

both_users! {
    /// Allowed and denied names through all three ways in: absolute-form HTTP, CONNECT and SOCKS5 with a
    /// host name. Loopback is reachable only because a rule names `127.0.0.1:PORT` itself.
    fn names_are_allowed_and_denied_through_every_protocol(d) {
        let port = upstream();
        let allow_addr = format!("127.0.0.1:{port}");
        let script = format!(
            "for h in good.test sub.good.test bad.good.test other.test; do \
               printf '%s http ' $h; curl -s -o /dev/null -w '%{{http_code}}\\n' http://$h:{port}/x; \
               printf '%s connect ' $h; curl -s -p -o /dev/null -w '%{{http_connect}}\\n' http://$h:{port}/x; \
               printf '%s socks ' $h; curl -s -x socks5h://127.0.0.1:3128 -o /dev/null -w '%{{http_code}}\\n' http://$h:{port}/x; \
             done; curl -s http://good.test:{port}/path?q=1"
        );
        let out = run_net(&d, &["--net-allow", "good.test", "--net-allow", "*.good.test",
                                "--net-deny", "bad.good.test", "--net-allow", &allow_addr], &script);
        out.ok()
            .stdout_has("good.test http 200\ngood.test connect 200\ngood.test socks 200\n")
            .stdout_has("sub.good.test http 200\nsub.good.test connect 200\nsub.good.test socks 200\n")
            // curl reports 403 for the refused proxy answer, and 000 for a SOCKS refusal.
            .stdout_has("bad.good.test http 403\nbad.good.test connect 403\nbad.good.test socks 000\n")
            .stdout_has("other.test http 403\nother.test connect 403\nother.test socks 000\n")
            // The proxy sends the origin form upstream.
            .stdout_has("hello from upstream: GET /path?q=1 HTTP/1.1");
        out.stderr_has("bad.good.test:").stderr_has("is denied by net rule 'bad.good.test'");
    }
}

both_users! {
    /// An allowed name that resolves to loopback does not reach the host's services; the refusal is
    /// audited with the host, the port and the reason, and counted in the --json outcome.
    fn an_allowed_name_resolving_to_loopback_is_refused_and_audited(d) {
        let port = upstream();
        let hosts = hosts(&d);
        let out = d
            .stockade(["--json", "run", "--net-allow", "rebind.test", "--", "sh", "-c",
                       &format!("curl -s -o /dev/null -w '%{{http_code}}' http://rebind.test:{port}/; \
                                 curl -s -o /dev/null -w ' %{{http_code}}' http://127.0.0.1:{port}/ --noproxy ''; echo")])
            .env("STOCKADE_NET_HOSTS", &hosts)
            .run();
        out.ok().stdout_has("403 403");
        let outcome: serde_json::Value =
            serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
        assert_eq!(outcome["net"]["allowed_connections"], 0, "{outcome}");
        assert_eq!(outcome["net"]["refused_connections"], 2, "{outcome}");
        let reason = outcome["net"]["refusals"][0]["reason"].as_str().unwrap();
        assert!(reason.contains("resolves to 127.0.0.1, a loopback address"), "{reason}");

        let audit = d.stockade(["--json", "audit", "--layer", "net"]).run();
        audit.ok();
        let records: Vec<serde_json::Value> =
            audit.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(records.len(), 2, "{}", audit.stdout);
        assert_eq!(records[0]["layer"], "net");
        assert_eq!(records[0]["host"], "rebind.test");
        assert_eq!(records[0]["port"], port);
        assert_eq!(records[0]["tool"], "http");
        assert_eq!(records[1]["host"], "127.0.0.1");
        assert!(records[1]["reason"].as_str().unwrap().contains("not in the network allowlist"));
    }
}

both_users! {
    /// A program that ignores the proxy has no network: a direct TCP connect to an address and any UDP
    /// datagram fail for want of a route, whatever the allowlist says.
    fn direct_connections_and_udp_are_impossible(d) {
        let port = upstream();
        let allow = format!("127.0.0.1:{port}");
        let script = r#"import socket
for kind, target in [(socket.SOCK_STREAM, ('1.1.1.1', 80)), (socket.SOCK_STREAM, ('10.0.0.1', 80)),
                     (socket.SOCK_DGRAM, ('1.1.1.1', 53)), (socket.SOCK_DGRAM, ('8.8.8.8', 53))]:
    s = socket.socket(socket.AF_INET, kind)
    s.settimeout(3)
    try:
        s.connect(target) if kind == socket.SOCK_STREAM else s.sendto(b'x', target)
        print('reached', target)
    except OSError as e:
        print('refused', target, e.errno)
"#;
        d.write("work/direct.py", script);
        let out = run_net(&d, &["--net-allow", "1.1.1.1", "--net-allow", "8.8.8.8", "--net-allow", &allow],
                          "python3 direct.py");
        out.ok()
            .stdout_lacks("reached")
            .stdout_has("refused ('1.1.1.1', 80) 101")
            .stdout_has("refused ('1.1.1.1', 53) 101")
            .stdout_has("refused ('8.8.8.8', 53) 101");
    }
}

#[test]
fn net_rules_are_checked_before_anything_starts() {
    let d = TestDir::new(Who::Root);
    let out = d.sh(&["--net-allow", "exa mple.com"], "true");
    out.code(125).stderr_has("net rule 'exa mple.com'");
    let out = d.sh(&["--net", "--net-allow", "example.com"], "true");
    out.code(125).stderr_has("--net-allow");
    let out = d.sh(&["--dry-run", "--net-allow", "*.example.com:443"], "true");
    out.ok()
        .stdout_has("network            through the proxy: allow *.example.com:443");
}
