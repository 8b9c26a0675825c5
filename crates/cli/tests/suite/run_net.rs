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

/// A server on 127.0.0.1 that reads everything until the client half-closes, then answers with the
/// byte count and a checksum of what it got, followed by 4 MiB of its own; runs until the test ends. A
/// `POST` is answered as HTTP: the sum is of its body, and the answer says whether the head it got was
/// what a proxy must send (origin form, `Connection: close`, no `Proxy-` header).
fn checksum_upstream() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut got = Vec::new();
                if stream.read_to_end(&mut got).is_err() {
                    return;
                }
                let split = got.windows(4).position(|w| w == b"\r\n\r\n");
                let (head, body) = match split {
                    Some(at) if got.starts_with(b"POST ") => (
                        String::from_utf8_lossy(&got[..at]).to_string(),
                        &got[at + 4..],
                    ),
                    _ => (String::new(), &got[..]),
                };
                let sum = body
                    .iter()
                    .fold(0u64, |s, b| s.wrapping_mul(31).wrapping_add(u64::from(*b)));
                if !head.is_empty() {
                    let proper = head.starts_with("POST /up HTTP/1.1\r\n")
                        && head.contains("\r\nConnection: close")
                        && !head.to_ascii_lowercase().contains("proxy-");
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nConnection: close\r\nX-Head: {}\r\n\r\n",
                        if proper { "proper" } else { "WRONG" }
                    );
                }
                let _ = writeln!(stream, "{} {sum}", body.len());
                let _ = stream.write_all(&vec![b'z'; 4 << 20]);
            });
        }
    });
    port
}

/// What the client inside sends and checks: 8 MiB up, a half-close, then the server's count and sum
/// of them and its 4 MiB down, through a CONNECT tunnel, through SOCKS5, and as the body of a plain HTTP
/// `POST` in absolute form (which the proxy forwards as a spliced tunnel too).
const TUNNEL_CLIENT: &str = r#"import socket, sys
port = int(sys.argv[1])
data = bytes((i * 7 + i // 251) % 256 for i in range(8 << 20))
want = 0
for b in data:
    want = (want * 31 + b) % (1 << 64)
for way in ('connect', 'socks', 'http'):
    s = socket.create_connection(('127.0.0.1', 3128))
    if way == 'http':
        s.sendall(b'POST http://good.test:%d/up HTTP/1.1\r\nHost: good.test:%d\r\n'
                  b'Proxy-Connection: keep-alive\r\nContent-Length: %d\r\n\r\n' % (port, port, len(data)))
    elif way == 'connect':
        s.sendall(b'CONNECT good.test:%d HTTP/1.1\r\nHost: good.test:%d\r\n\r\n' % (port, port))
        head = b''
        while b'\r\n\r\n' not in head:
            head += s.recv(1)
        assert head.startswith(b'HTTP/1.1 200'), head
    else:
        s.sendall(b'\x05\x01\x00')
        assert s.recv(2) == b'\x05\x00'
        s.sendall(b'\x05\x01\x00\x03' + bytes([9]) + b'good.test' + port.to_bytes(2, 'big'))
        assert s.recv(10)[1] == 0
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    got = b''
    while True:
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        got += chunk
    if way == 'http':
        head, _, got = got.partition(b'\r\n\r\n')
        print('http head', 'proper' if b'X-Head: proper' in head else 'WRONG %r' % head[:200])
    line, _, rest = got.partition(b'\n')
    print(way, 'echoed' if line == b'%d %d' % (len(data), want) else 'WRONG %r' % line[:80],
          'received', len(rest), 'ok' if rest == b'z' * (4 << 20) else 'WRONG')
"#;

both_users! {
    /// A tunnel carries bytes both ways intact and passes a half-close on: 8 MiB up, the end of them,
    /// then the server's answer and 4 MiB down, through CONNECT, through SOCKS5, and for a plain HTTP
    /// request (whose head the proxy rewrites: origin form, `Connection: close`, no `Proxy-` headers).
    fn tunnels_carry_both_ways_and_pass_a_half_close_on(d) {
        let port = checksum_upstream();
        d.write("work/tunnel.py", TUNNEL_CLIENT);
        let out = run_net(&d, &["--net-allow", "good.test", "--net-allow", &format!("127.0.0.1:{port}")],
                          &format!("python3 tunnel.py {port}"));
        out.ok()
            .stdout_has("connect echoed received 4194304 ok")
            .stdout_has("socks echoed received 4194304 ok")
            .stdout_has("http head proper\nhttp echoed received 4194304 ok");
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
        let by_host = |host: &str| {
            records.iter().find(|r| r["host"] == host).unwrap_or_else(|| panic!("no record for {host}: {records:?}"))
        };
        let rebind = by_host("rebind.test");
        assert_eq!(rebind["layer"], "net");
        assert_eq!(rebind["port"], port);
        assert_eq!(rebind["tool"], "http");
        assert!(by_host("127.0.0.1")["reason"].as_str().unwrap().contains("not in the network allowlist"));
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

/// Looks for the secret (given hex-encoded, so that no command line holds it) in every process's
/// environment, command line and readable memory it can see, and in the files under the directories given.
const FIND_SECRET: &str = r#"import os, sys
secret = bytes.fromhex(sys.argv[1])
found = []
for pid in [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]:
    for name in ('environ', 'cmdline'):
        try:
            if secret in open(f'/proc/{pid}/{name}', 'rb').read():
                found.append(f'{pid}/{name}')
        except OSError:
            pass
    try:
        with open(f'/proc/{pid}/maps') as maps, open(f'/proc/{pid}/mem', 'rb', 0) as mem:
            for line in maps:
                span, perms = line.split()[:2]
                if 'r' not in perms:
                    continue
                start, end = (int(x, 16) for x in span.split('-'))
                try:
                    mem.seek(start)
                    if secret in mem.read(end - start):
                        found.append(f'{pid}/mem')
                except (OSError, ValueError, OverflowError):
                    pass
    except OSError:
        pass
if secret in b''.join(f'{k}={v}'.encode() for k, v in os.environ.items()):
    found.append('own environment')
for top in sys.argv[2:]:
    for root, dirs, files in os.walk(top):
        for f in files:
            try:
                if secret in open(os.path.join(root, f), 'rb').read():
                    found.append(os.path.join(root, f))
            except OSError:
                pass
print('secret found in', found) if found else print('no trace of the secret')
"#;

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// A streamed Messages request through the gateway (the scripted API ends its event stream by closing
/// the connection); prints `stream STATUS` when curl got the whole response.
const STREAM: &str = r#"curl -sS -N -o /dev/null -w 'stream %{http_code}\n' -X POST -H 'content-type: application/json' -d '{"stream":true,"tools":[{"name":"x"}],"messages":[]}' "$API_BASE_URL/v1/messages""#;

both_users! {
    /// The gateway: the upstream gets the key in the headers the policy names (replacing the placeholder
    /// the program sent), under the upstream's base path; inside, there is no trace of the key.
    fn the_gateway_adds_the_key_that_never_enters_the_sandbox(d) {
        let api = TlsApi::start(&d, serde_json::json!([]));
        let secret = format!("sk-gateway-{}", unique_marker());
        d.write("work/policy.toml", &format!(
            "[profile.gw]\nextends = \"workspace-write\"\n\
             [profile.gw.gateway.api]\nupstream = \"https://api.gateway.test:{}/base\"\n\
             url-env = [\"API_BASE_URL\"]\nplaceholder-env = [\"API_KEY\"]\n\
             headers.x-api-key.env = \"GATEWAY_TEST_KEY\"\n\
             headers.authorization = {{ env = \"GATEWAY_TEST_KEY\", format = \"Bearer {{}}\" }}\n", api.port));
        d.write("work/find_secret.py", FIND_SECRET);
        d.write("work/call.py", "import os, urllib.request\n\
            req = urllib.request.Request(os.environ['API_BASE_URL'] + '/v1/messages/count_tokens?beta=true', \
            data=b'{}', headers={'x-api-key': os.environ['API_KEY'], 'content-type': 'application/json'})\n\
            print('status', urllib.request.urlopen(req).status)\n");
        let out = d
            .stockade(["--json", "run", "--policy", "policy.toml", "--profile", "gw", "--", "sh", "-c",
                       &format!("python3 call.py && python3 find_secret.py {} . \"$TMPDIR\" && echo \"key inside: $API_KEY\" && {STREAM}",
                                hex(&secret))])
            .env("GATEWAY_TEST_KEY", &secret)
            .env("SSL_CERT_FILE", api.ca.to_str().unwrap())
            .env("STOCKADE_NET_HOSTS", api.hosts.to_str().unwrap())
            .run();
        out.ok()
            .stdout_has("status 200")
            .stdout_has("no trace of the secret")
            .stdout_has("key inside: stockade-gateway-adds-the-key")
            // The event stream ends as the upstream ended it (by closing, without TLS close_notify):
            // whole, not cut short (curl would exit 18).
            .stdout_has("stream 200");
        assert!(!out.stdout.contains(&secret) && !out.stderr.contains(&secret));
        let outcome: serde_json::Value =
            serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
        assert_eq!(outcome["net"]["gateway_requests"], 2, "{outcome}");
        let requests = api.requests();
        assert_eq!(requests.len(), 2, "{requests:?}");
        assert_eq!(requests[0]["path"], "/base/v1/messages/count_tokens?beta=true");
        assert_eq!(requests[0]["headers"]["x-api-key"], secret.as_str());
        assert_eq!(requests[0]["headers"]["authorization"], format!("Bearer {secret}"));
        assert_eq!(requests[0]["headers"]["host"], format!("api.gateway.test:{}", api.port));
        let audit = std::fs::read_to_string(d.path("audit.jsonl")).unwrap_or_default();
        assert!(!audit.contains(&secret));
    }
}

#[test]
fn a_gateway_without_its_key_or_with_the_key_passed_in_does_not_start() {
    let d = TestDir::new(Who::Root);
    d.write(
        "work/policy.toml",
        "[profile.gw]\nextends = \"workspace-write\"\nenv.pass = [\"K\"]\n\
         [profile.gw.gateway.api]\nupstream = \"https://example.com\"\nheaders.x-api-key.env = \"K\"\n",
    );
    let out = d
        .stockade([
            "run",
            "--policy",
            "policy.toml",
            "--profile",
            "gw",
            "--",
            "true",
        ])
        .env("K", "secret")
        .run();
    out.code(125).stderr_has("also passes $K into the sandbox");
    let out = d
        .stockade(["run", "--profile", "claude-code", "--", "true"])
        .run();
    out.code(125)
        .stderr_has("from $ANTHROPIC_API_KEY, which is not set");
    let out = d
        .stockade(["run", "--profile", "claude-code", "--net", "--", "true"])
        .env("ANTHROPIC_API_KEY", "k")
        .run();
    out.code(125)
        .stderr_has("a gateway needs the sandbox's private network");
}

/// Runs the real Claude Code CLI whole under `--profile claude-code` (its API through the gateway, the key
/// `secret` outside) in `d`'s project, answered by the scripted API `script`.
fn claude_whole(
    d: &TestDir,
    claude: &std::path::Path,
    script: serde_json::Value,
    secret: &str,
) -> (Out, TlsApi) {
    d.mkdir("home");
    let api = TlsApi::start(d, script);
    d.write(
        "work/policy.toml",
        &format!(
            "[profile.agent]\nextends = \"claude-code\"\n\
             [profile.agent.gateway.anthropic]\nupstream = \"https://api.gateway.test:{}\"\n\
             url-env = [\"ANTHROPIC_BASE_URL\"]\nplaceholder-env = [\"ANTHROPIC_API_KEY\"]\n\
             headers.x-api-key.env = \"ANTHROPIC_API_KEY\"\n",
            api.port
        ),
    );
    // The package directory (the bin entry is a symlink into it).
    let package = claude.canonicalize().unwrap();
    let package = package
        .ancestors()
        .find(|p| p.ends_with("node_modules"))
        .unwrap_or(package.parent().unwrap())
        .to_path_buf();
    let out = d
        .stockade([
            "--json",
            "run",
            "--policy",
            "policy.toml",
            "--profile",
            "agent",
            "--ro",
            package.to_str().unwrap(),
            "--env",
            "IS_SANDBOX=1",
            "--timeout",
            "120s",
            "--",
            claude.to_str().unwrap(),
            "-p",
            "go",
            "--output-format",
            "json",
            "--dangerously-skip-permissions",
        ])
        .env("HOME", d.path("home").to_str().unwrap())
        .env("ANTHROPIC_API_KEY", secret)
        .env("SSL_CERT_FILE", api.ca.to_str().unwrap())
        .env("STOCKADE_NET_HOSTS", api.hosts.to_str().unwrap())
        .run();
    (out, api)
}

/// Issue 16's agent confined whole: the real Claude Code CLI under `--profile claude-code` completes a
/// tool-using session against a scripted Messages API it reaches only through the gateway. The API gets
/// the key on every request; neither Claude Code's state nor anything it printed holds it.
#[test]
fn claude_code_runs_whole_under_its_profile_through_the_gateway() {
    let Some((claude, d)) = super::claude_code::claude_and_dir() else {
        return;
    };
    let secret = format!("sk-ant-gateway-{}", unique_marker());
    let (out, api) = claude_whole(
        &d,
        &claude,
        serde_json::json!([
            {"tool": "Bash", "input": {"command": "echo made-by-claude > made.txt && cat made.txt", "description": "scripted"}},
            {"tool": "Bash", "input": {"command": "curl -s -m 5 -o /dev/null -w '%{http_connect}' https://example.com/", "description": "scripted"}},
            {"text": "done"}
        ]),
        &secret,
    );
    out.ok();
    assert_eq!(
        d.read("work/made.txt").as_deref(),
        Some("made-by-claude\n"),
        "{}\n{}\n{:?}",
        out.stdout,
        out.stderr,
        api.requests()
            .last()
            .map(|r| r["body"]["messages"].to_string())
    );
    assert!(!out.stdout.contains(&secret) && !out.stderr.contains(&secret));
    let requests = api.requests();
    assert!(requests.len() >= 3, "{requests:?}");
    for r in &requests {
        assert_eq!(r["headers"]["x-api-key"], secret.as_str(), "{r}");
    }
    // The session's tool results, as Claude Code sent them back: the file made, and the other host refused.
    let text = api.conversation().to_string();
    assert!(text.contains("made-by-claude"), "{text}");
    assert!(text.contains("403"), "example.com was not refused: {text}");
    let outcome: serde_json::Value =
        serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    assert!(
        outcome["net"]["gateway_requests"].as_u64().unwrap() >= 3,
        "{outcome}"
    );
    assert!(
        outcome["net"]["refusals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["host"] == "example.com"),
        "{outcome}"
    );
    // Claude Code's state, written during the run, holds no trace of the key.
    let grep = std::process::Command::new("grep")
        .args([
            "-r",
            "-l",
            &secret,
            d.path("home").to_str().unwrap(),
            d.work().to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        grep.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&grep.stdout)
    );
}

/// Issue 15's files-run-later attacks, made by the real agent: Claude Code, confined whole, is scripted to
/// plant what the user's tools would load or run later (`.mcp.json`, `.envrc`, the hooks directory that
/// `core.hooksPath` names, `.git/hooks`, `.git/commondir`, git's config, `.claude/` and `.vscode/`, a
/// rename onto a protected name, the shell rc in `$HOME`) through its Bash tool. Each is refused, ordinary
/// work beside them is not, and the host's files are as they were.
#[test]
fn the_agent_confined_whole_cannot_plant_what_the_users_tools_run_later() {
    let Some((claude, d)) = super::claude_code::claude_and_dir() else {
        return;
    };
    git(&d.work(), &["init", "-q"]);
    git(&d.work(), &["config", "core.hooksPath", ".husky"]);
    d.write("work/.husky/pre-commit", "npm test\n")
        .write("home/.bashrc", "# the user's rc\n");
    let attacks = r#"try() { n=$1; shift; if sh -c "$*" >/dev/null 2>&1; then echo "$n done"; else echo "$n refused"; fi; }
try ordinary 'echo ok > notes.txt'
try mcp 'echo {} > .mcp.json'
try envrc 'echo evil > .envrc'
try husky 'echo evil >> .husky/pre-commit'
try git-hook 'echo evil > .git/hooks/pre-commit'
try commondir 'echo /tmp > .git/commondir'
try git-config 'git config core.fsmonitor "touch /tmp/pwned"'
try claude-dir 'mkdir -p .claude && echo {} > .claude/settings.json'
try vscode 'mkdir -p .vscode && echo {} > .vscode/tasks.json'
try rename-onto 'echo {} > m.json && mv m.json .mcp.json'
try bashrc 'echo evil >> ~/.bashrc'"#;
    let secret = format!("sk-ant-gateway-{}", unique_marker());
    let (out, api) = claude_whole(
        &d,
        &claude,
        serde_json::json!([
            {"tool": "Bash", "input": {"command": attacks, "description": "scripted"}},
            {"text": "done"}
        ]),
        &secret,
    );
    out.ok();
    let text = api.conversation().to_string();
    assert!(text.contains("ordinary done"), "{text}");
    for attack in [
        "mcp",
        "envrc",
        "husky",
        "git-hook",
        "commondir",
        "git-config",
        "claude-dir",
        "vscode",
        "rename-onto",
        "bashrc",
    ] {
        assert!(
            text.contains(&format!("{attack} refused")),
            "{attack} was not refused: {text}"
        );
    }
    assert_eq!(d.read("work/notes.txt").as_deref(), Some("ok\n"));
    for planted in [
        ".mcp.json",
        ".envrc",
        ".git/hooks/pre-commit",
        ".git/commondir",
        ".claude/settings.json",
        ".vscode/tasks.json",
    ] {
        assert!(!exists(&d.work().join(planted)), "{planted} was planted");
    }
    assert_eq!(
        d.read("work/.husky/pre-commit").as_deref(),
        Some("npm test\n")
    );
    assert_eq!(d.read("home/.bashrc").as_deref(), Some("# the user's rc\n"));
    let config = d.read("work/.git/config").unwrap();
    assert!(!config.contains("fsmonitor"), "{config}");
}

/// A gateway upstream that accepts the connection and then says nothing does not hold the program's
/// request forever: the TLS handshake has the connect's time limit (10 s), and the program gets a 502
/// that says so.
#[test]
fn a_silent_gateway_upstream_is_a_502_not_a_hang() {
    if !landlock_ready() {
        return;
    }
    let d = TestDir::new(Who::Root);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        // Accept one connection and keep it open, silent, until the test ends.
        let accepted = listener.accept();
        std::thread::sleep(std::time::Duration::from_secs(30));
        drop(accepted);
    });
    d.write("hosts", "127.0.0.1 silent.test\n").write(
        "work/policy.toml",
        &format!(
            "[profile.gw]\nextends = \"workspace-write\"\n\
             [profile.gw.gateway.api]\nupstream = \"https://silent.test:{port}\"\n\
             url-env = [\"API_BASE_URL\"]\nheaders.x-api-key.env = \"K\"\n"
        ),
    );
    let started = std::time::Instant::now();
    let out = d
        .stockade([
            "run",
            "--policy",
            "policy.toml",
            "--profile",
            "gw",
            "--",
            "sh",
            "-c",
            "curl -s -m 60 -w ' %{http_code}' \"$API_BASE_URL/v1/x\"",
        ])
        .env("K", "secret")
        .env("STOCKADE_NET_HOSTS", d.path("hosts").to_str().unwrap())
        .run();
    out.ok()
        .stdout_has("no TLS handshake within 10 s")
        .stdout_has(" 502");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    drop(held);
}
