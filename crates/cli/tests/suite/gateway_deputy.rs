//! The gateway as a confused deputy (issue 30): it acts for the program with a key the program must never
//! see, so each test tries to have it hand the key back, against the scripted API over HTTPS
//! (`TlsApi`, reached only through the gateway). Through `TRACE`, which an upstream answers by echoing
//! the request with the header the gateway added; through the file the key is read from, which the
//! profile would otherwise grant; and through dot segments, which a normalising upstream resolves outside
//! the base path the policy names.

use serde_json::{Value, json};

use super::util::*;
use crate::both_users;

/// Writes `work/policy.toml`: profile `gw`, `workspace-write` plus gateway `api` to the scripted API under
/// `/base`, its URL in `$API_BASE_URL`, with these header lines.
fn gateway_policy(d: &TestDir, api: &TlsApi, headers: &str) {
    d.write(
        "work/policy.toml",
        &format!(
            "[profile.gw]\nextends = \"workspace-write\"\n\
             [profile.gw.gateway.api]\nupstream = \"https://api.gateway.test:{}/base\"\n\
             url-env = [\"API_BASE_URL\"]\n{headers}",
            api.port
        ),
    );
}

/// `stockade --json run --profile gw -- sh -c SCRIPT` with the key in `$GATEWAY_TEST_KEY` outside.
fn run_gateway(d: &TestDir, api: &TlsApi, key: &str, script: &str) -> Out {
    d.stockade([
        "--json",
        "run",
        "--policy",
        "policy.toml",
        "--profile",
        "gw",
        "--",
        "sh",
        "-c",
        script,
    ])
    .env("GATEWAY_TEST_KEY", key)
    .env("SSL_CERT_FILE", api.ca.to_str().unwrap())
    .env("STOCKADE_NET_HOSTS", api.hosts.to_str().unwrap())
    .run()
}

/// The `--json` outcome: the last line of stdout.
fn outcome(out: &Out) -> Value {
    serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap()
}

both_users! {
    /// `TRACE` through the gateway: the upstream echoes the request it got, `x-api-key` included, so
    /// forwarding it hands the key to the program. The gateway forwards only the methods an API needs;
    /// `TRACE` and an extension method get a 405 that names them and the allowed ones, never reach the
    /// upstream, and are audited like the proxy's other refusals. `GET`, `POST` and `HEAD` still pass.
    fn the_gateway_forwards_only_the_methods_an_api_needs(d) {
        let api = TlsApi::start(&d, json!([]));
        let secret = format!("sk-trace-{}", unique_marker());
        gateway_policy(&d, &api, "headers.x-api-key.env = \"GATEWAY_TEST_KEY\"\n");
        let script = r#"for m in TRACE PROPFIND; do printf '%s: ' $m; curl -sS -X $m -w ' %{http_code}\n' "$API_BASE_URL/v1/x"; done
curl -sS -o /dev/null -w 'GET %{http_code}\n' "$API_BASE_URL/v1/models"
curl -sS -o /dev/null -w 'POST %{http_code}\n' -d '{}' "$API_BASE_URL/v1/messages/count_tokens"
curl -sS -I -o /dev/null -w 'HEAD %{http_code}\n' "$API_BASE_URL/v1/models""#;
        let out = run_gateway(&d, &api, &secret, script);
        out.ok();
        assert!(!out.stdout.contains(&secret), "the key came back:\n{}", out.stdout);
        out.stdout_has("TRACE: stockade: gateway 'api' refuses method TRACE; it forwards only GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS")
            .stdout_has("OPTIONS")
            .stdout_has("PROPFIND: stockade: gateway 'api' refuses method PROPFIND")
            .stdout_has(" 405\nPROPFIND")
            .stdout_has("GET 200\nPOST 200\nHEAD 200\n");
        let requests = api.requests();
        assert!(requests.iter().all(|r| r["method"] != "TRACE"), "{requests:?}");
        let net = &outcome(&out)["net"];
        assert_eq!(net["refused_connections"], 2, "{net}");
        assert_eq!(net["gateway_requests"], 3, "{net}");

        let audit = d.stockade(["--json", "audit", "--layer", "net"]).run();
        audit.ok();
        let records: Vec<Value> =
            audit.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(records.len(), 2, "{}", audit.stdout);
        for method in ["TRACE", "PROPFIND"] {
            let record = records
                .iter()
                .find(|r| r["reason"].as_str().unwrap().contains(&format!("refuses method {method}")))
                .unwrap_or_else(|| panic!("no record of {method}: {records:?}"));
            assert_eq!(record["layer"], "net", "{record}");
            assert_eq!(record["tool"], "gateway", "{record}");
            assert_eq!(record["host"], "api.gateway.test", "{record}");
        }
        assert!(!audit.stdout.contains(&secret));
    }
}

/// Paths whose dot segments or encoded separators would leave the gateway's base path, or that an
/// upstream may read more than one way: refused with a 400, never forwarded. Ordinary paths, a name that
/// merely starts with dots, an encoded dot inside a name and dots in the query pass unchanged.
#[test]
fn dot_segments_and_encoded_slashes_never_leave_the_base_path() {
    if !landlock_ready() {
        return;
    }
    let d = TestDir::new(Who::Root);
    let api = TlsApi::start(&d, json!([]));
    gateway_policy(&d, &api, "headers.x-api-key.env = \"GATEWAY_TEST_KEY\"\n");
    let refused = [
        "/../../x",
        "/v1/../../x",
        "/v1/..",
        "/./v1/x",
        "/v1/./x",
        "/%2e%2e/x",
        "/%2E%2E/x",
        "/.%2e/x",
        "/%2e./x",
        "/v1/%2E/x",
        "/v1%2f..%2f..%2fx",
        "/v1%2F..%2Fx",
        "/v1%5c..%5cx",
        "/v1/..%5Cx",
        "/..;/x",
        "/v1/%252e%252e/x",
        "/v1/%c0%ae%c0%ae/x",
        "/v1/%00x",
        "/v1/%zz",
    ];
    let passed = [
        "/v1/messages/count_tokens?beta=true",
        "/v1/..foo/a.b?next=../z&p=%2e%2e",
        "/v1/file%2Ejson",
    ];
    let mut script = String::new();
    for path in refused.iter().chain(&passed) {
        script.push_str(&format!(
            "printf '%s ' '{path}'; curl -sS --path-as-is -o /dev/null -w '%{{http_code}}\\n' -d '{{}}' \"$API_BASE_URL\"'{path}'\n"
        ));
    }
    script.push_str("curl -sS --path-as-is -d '{}' \"$API_BASE_URL/v1/../../x\"; echo\n");
    let out = run_gateway(&d, &api, "sk-dots", &script);
    out.ok();
    for path in refused {
        out.stdout_has(&format!("{path} 400\n"));
    }
    for path in passed {
        out.stdout_has(&format!("{path} 200\n"));
    }
    out.stdout_has("stockade: gateway 'api' refuses the path '/v1/../../x'");
    let forwarded: Vec<String> = api
        .requests()
        .iter()
        .map(|r| r["path"].as_str().unwrap().to_string())
        .collect();
    let want: Vec<String> = passed.iter().map(|p| format!("/base{p}")).collect();
    assert_eq!(forwarded, want);
    let net = &outcome(&out)["net"];
    assert_eq!(net["refused_connections"], refused.len() + 1, "{net}");
}

both_users! {
    /// The file a gateway reads its key from (`env-file`) is denied inside whatever the profile grants:
    /// here one in the project (`workspace-write` makes it writable) and the README's own
    /// `~/.config/keys.env` (`$HOME` is readable). Reading, grepping, moving, linking or copying it from
    /// inside yields nothing, while the gateway still adds both keys on the way out.
    fn a_gateways_key_file_is_unreadable_inside_whatever_the_profile_grants(d) {
        let api = TlsApi::start(&d, json!([]));
        let in_project = format!("sk-project-{}", unique_marker());
        let in_home = format!("sk-home-{}", unique_marker());
        d.write("work/keys.env", &format!("API_KEY={in_project}\n"))
            .write("home/.config/keys.env", &format!("OTHER_KEY={in_home}\n"));
        gateway_policy(
            &d,
            &api,
            "headers.x-api-key = { env = \"API_KEY\", env-file = \"keys.env\" }\n\
             headers.authorization = { env = \"OTHER_KEY\", env-file = \"~/.config/keys.env\", format = \"Bearer {}\" }\n",
        );
        let script = format!(
            "{TRY}try cat 'cat keys.env'\n\
             try cat-home 'cat ~/.config/keys.env'\n\
             try cat-abs 'cat {abs}'\n\
             try grep 'grep -rh sk- . ~/.config'\n\
             try mv 'mv keys.env moved.env && cat moved.env'\n\
             try ln 'ln keys.env linked.env && cat linked.env'\n\
             try cp 'cp ~/.config/keys.env copied.env && cat copied.env'\n\
             try symlink 'ln -s ~/.config/keys.env sym.env && cat sym.env'\n\
             curl -sS -o /dev/null -w 'api %{{http_code}}\\n' -d '{{}}' \"$API_BASE_URL/v1/messages/count_tokens\"\n",
            abs = d.path("work/keys.env").display(),
        );
        let out = d
            .stockade(["run", "--policy", "policy.toml", "--profile", "gw", "--", "sh", "-c", &script])
            .env("HOME", d.path("home").to_str().unwrap())
            .env("SSL_CERT_FILE", api.ca.to_str().unwrap())
            .env("STOCKADE_NET_HOSTS", api.hosts.to_str().unwrap())
            .run();
        out.ok().stdout_lacks("ESCAPED").stdout_has("api 200");
        for name in ["cat", "cat-home", "cat-abs", "grep", "mv", "ln", "cp", "symlink"] {
            out.stdout_has(&format!("held {name}\n"));
        }
        assert!(
            !out.stdout.contains(&in_project) && !out.stdout.contains(&in_home),
            "a key was read inside:\n{}",
            out.stdout
        );
        let requests = api.requests();
        assert_eq!(requests.len(), 1, "{requests:?}");
        assert_eq!(requests[0]["headers"]["x-api-key"], in_project.as_str());
        assert_eq!(requests[0]["headers"]["authorization"], format!("Bearer {in_home}"));
        assert_eq!(d.read("work/keys.env"), Some(format!("API_KEY={in_project}\n")));
        assert_eq!(d.read("home/.config/keys.env"), Some(format!("OTHER_KEY={in_home}\n")));
    }
}

/// The same key file through the other layers, which ask the same resolved policy: the hook blocks Claude
/// Code's Read and Grep of it, the file tools refuse to read it and leave it out of grep, and `explain`
/// names the rule that denies it, a gateway's key file.
#[test]
fn the_hook_the_file_tools_and_explain_deny_a_gateways_key_file() {
    let d = TestDir::new(Who::Root);
    let secret = format!("sk-layers-{}", unique_marker());
    d.write("work/keys.env", &format!("API_KEY={secret}\n"))
        .write("work/notes.md", "sk- is how keys start\n")
        .write(
            "work/policy.toml",
            "[profile.gw]\nextends = \"workspace-write\"\n\
             [profile.gw.gateway.api]\nupstream = \"https://api.example.com\"\n\
             url-env = [\"API_BASE_URL\"]\n\
             headers.x-api-key = { env = \"API_KEY\", env-file = \"keys.env\" }\n",
        );
    let policy = ["--policy", "policy.toml", "--profile", "gw"];
    let work = d.work().display().to_string();
    let keys = d.path("work/keys.env").display().to_string();

    let explain = |access: &str| {
        let mut args = vec!["explain"];
        args.extend(policy);
        args.extend([access, "keys.env"]);
        d.stockade(args).run()
    };
    explain("--read")
        .code(1)
        .stdout_has("DENY read")
        .stdout_has("implicit: the key file of gateway 'api' (header 'x-api-key')");
    explain("--write").code(1).stdout_has("DENY write");
    let json = {
        let mut args = vec!["--json", "explain"];
        args.extend(policy);
        args.extend(["--read", "keys.env"]);
        d.stockade(args).run()
    };
    let v: Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(v["allowed"], false, "{v}");
    assert!(
        v["deciding_rule"]
            .as_str()
            .unwrap()
            .contains("key file of gateway 'api'"),
        "{v}"
    );

    let hook = |tool: &str, input: Value| {
        let call = json!({
            "session_id": "s", "transcript_path": "/dev/null", "cwd": work,
            "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": tool,
            "tool_input": input, "tool_use_id": "t1"
        });
        let mut args = vec!["hook", "claude"];
        args.extend(policy);
        d.stockade(args).run_with_stdin(&call.to_string())
    };
    for (tool, input) in [
        ("Read", json!({"file_path": keys})),
        ("Read", json!({"file_path": "keys.env"})),
        ("Grep", json!({"pattern": "sk-", "path": keys})),
    ] {
        let out = hook(tool, input.clone());
        out.code(2).stderr_has("key file of gateway 'api'");
        let v: Value = serde_json::from_str(out.stdout.trim()).unwrap();
        assert_eq!(
            v["hookSpecificOutput"]["permissionDecision"], "deny",
            "{tool} {input}: {out:?}"
        );
    }
    hook("Read", json!({"file_path": "notes.md"})).ok();

    let fs = |rest: &[&str]| {
        let mut args = vec!["fs"];
        args.push(rest[0]);
        args.extend(["--root", &work]);
        args.extend(policy);
        args.extend(&rest[1..]);
        d.stockade(args).run()
    };
    let read = fs(&["read", "keys.env"]);
    read.code(1).stderr_has("key file of gateway 'api'");
    assert!(!read.stdout.contains(&secret));
    let grep = fs(&["grep", "sk-"]);
    grep.ok().stdout_has("notes.md");
    assert!(!grep.stdout.contains(&secret), "{}", grep.stdout);
    fs(&["read", "notes.md"]).ok();
}
