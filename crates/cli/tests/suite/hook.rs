//! `stockade hook claude` through the real binary with real hook JSON: seed 003's layout, every field,
//! symlinks, `..`, prefixes, fail-closed cases, PermissionRequest and the audit log.

use std::io::Write;
use std::process::Stdio;

use super::util::*;

/// The seed-003 layout: a main repo with `.ittybitty/agents/<id>/worktree` per agent.
struct Repo {
    d: TestDir,
}

impl Repo {
    fn new() -> Self {
        let d = TestDir::new(Who::Root);
        for a in ["a1", "a10", "a2"] {
            d.write(
                &format!("work/.ittybitty/agents/{a}/worktree/src/lib.rs"),
                &format!("// {a}\n"),
            );
        }
        d.write("work/.ittybitty/logs/a1.log", "log\n")
            .write("work/src/main.rs", "fn main() {}\n");
        d.write(
            "agents.toml",
            r#"
[profile.a1]
base = "${POLICY_DIR}/work"
fs.write = [".ittybitty/agents/${AGENT_ID}/worktree", ".ittybitty", ".ittybitty/agents/${AGENT_ID}"]
fs.deny = [".ittybitty/agents"]
commands.allow = ["ib"]
"#,
        );
        Repo { d }
    }

    fn worktree(&self) -> String {
        self.d
            .path("work/.ittybitty/agents/a1/worktree")
            .display()
            .to_string()
    }

    /// One hook call as agent a1, from its worktree.
    fn call(&self, event: &str, tool: &str, input: serde_json::Value) -> Out {
        let json = serde_json::json!({
            "session_id": "s", "transcript_path": "/dev/null", "cwd": self.worktree(),
            "permission_mode": "default", "hook_event_name": event, "tool_name": tool,
            "tool_input": input, "tool_use_id": "t1", "some_future_field": 1
        });
        self.raw(&json.to_string(), &[])
    }

    fn raw(&self, stdin: &str, extra: &[&str]) -> Out {
        let policy = self.d.path("agents.toml");
        let mut args = vec![
            "hook",
            "claude",
            "--agent",
            "a1",
            "--policy",
            policy.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let mut cmd = self.d.stockade(args).cmd;
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let o = child.wait_with_output().unwrap();
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

fn decision(out: &Out) -> String {
    let v: serde_json::Value =
        serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    v["hookSpecificOutput"]["permissionDecision"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[track_caller]
fn allowed(out: &Out) {
    assert_eq!((out.code, decision(out).as_str()), (0, "allow"), "{out:?}");
}

#[track_caller]
fn denied(out: &Out, mention: &str) {
    assert_eq!((out.code, decision(out).as_str()), (2, "deny"), "{out:?}");
    assert!(
        out.stderr.contains(mention),
        "stderr lacks {mention:?}: {out:?}"
    );
}

#[test]
fn seed_003_own_worktree_allowed_everything_else_blocked() {
    let r = Repo::new();
    let wt = r.worktree();
    let root = r.d.path("work").display().to_string();
    allowed(&r.call(
        "PreToolUse",
        "Read",
        serde_json::json!({"file_path": "src/lib.rs"}),
    ));
    allowed(&r.call(
        "PreToolUse",
        "Write",
        serde_json::json!({"file_path": format!("{wt}/src/new.rs"), "content": "x"}),
    ));
    allowed(&r.call(
        "PreToolUse",
        "Edit",
        serde_json::json!({"file_path": "src/lib.rs", "old_string": "a", "new_string": "b"}),
    ));
    allowed(&r.call(
        "PreToolUse",
        "Write",
        serde_json::json!({"file_path": format!("{root}/.ittybitty/logs/a1.log")}),
    ));
    denied(
        &r.call(
            "PreToolUse",
            "Read",
            serde_json::json!({"file_path": format!("{root}/src/main.rs")}),
        ),
        "default deny",
    );
    denied(&r.call("PreToolUse", "Read", serde_json::json!({"file_path": format!("{root}/.ittybitty/agents/a2/worktree/src/lib.rs")})), ".ittybitty/agents");
    denied(&r.call("PreToolUse", "Read", serde_json::json!({"file_path": format!("{root}/.ittybitty/agents/a10/worktree/src/lib.rs")})), ".ittybitty/agents");
    denied(
        &r.call(
            "PreToolUse",
            "Write",
            serde_json::json!({"file_path": "/tmp/x"}),
        ),
        "/tmp/x",
    );
    denied(
        &r.call(
            "PreToolUse",
            "Read",
            serde_json::json!({"file_path": "../../a2/worktree/src/lib.rs"}),
        ),
        "a2",
    );
}

#[test]
fn every_path_field_is_checked() {
    let r = Repo::new();
    let root = r.d.path("work").display().to_string();
    denied(
        &r.call(
            "PreToolUse",
            "NotebookEdit",
            serde_json::json!({"notebook_path": format!("{root}/n.ipynb"), "new_source": ""}),
        ),
        "n.ipynb",
    );
    denied(
        &r.call(
            "PreToolUse",
            "MultiEdit",
            serde_json::json!({"file_path": format!("{root}/src/main.rs"), "edits": []}),
        ),
        "main.rs",
    );
    denied(
        &r.call(
            "PreToolUse",
            "LS",
            serde_json::json!({"path": root.clone()}),
        ),
        "default deny",
    );
    allowed(&r.call("PreToolUse", "LS", serde_json::json!({})));
    allowed(&r.call(
        "PreToolUse",
        "Glob",
        serde_json::json!({"pattern": "src/**/*.rs"}),
    ));
    denied(
        &r.call(
            "PreToolUse",
            "Glob",
            serde_json::json!({"pattern": "../../../../src/*.rs"}),
        ),
        "work/src'",
    );
    denied(
        &r.call(
            "PreToolUse",
            "Glob",
            serde_json::json!({"pattern": "/etc/**"}),
        ),
        "/etc",
    );
    denied(
        &r.call(
            "PreToolUse",
            "Glob",
            serde_json::json!({"pattern": "*.rs", "path": root.clone()}),
        ),
        "default deny",
    );
    allowed(&r.call(
        "PreToolUse",
        "Grep",
        serde_json::json!({"pattern": "fn main"}),
    ));
    denied(
        &r.call(
            "PreToolUse",
            "Grep",
            serde_json::json!({"pattern": "x", "path": "/etc"}),
        ),
        "/etc",
    );
    denied(
        &r.call(
            "PreToolUse",
            "Grep",
            serde_json::json!({"pattern": "x", "glob": "../../../../**/*.rs"}),
        ),
        "glob",
    );
    denied(
        &r.call(
            "PreToolUse",
            "mcp__fs__read_text_file",
            serde_json::json!({"path": format!("{root}/src/main.rs")}),
        ),
        "main.rs",
    );
    denied(
        &r.call(
            "PreToolUse",
            "mcp__fs__read_multiple_files",
            serde_json::json!({"paths": ["src/lib.rs", format!("{root}/src/main.rs")]}),
        ),
        "main.rs",
    );
    allowed(&r.call(
        "PreToolUse",
        "mcp__fs__read_text_file",
        serde_json::json!({"path": "src/lib.rs"}),
    ));
    allowed(&r.call(
        "PreToolUse",
        "WebFetch",
        serde_json::json!({"url": "https://example.com"}),
    ));
}

#[test]
fn symlinks_dotdot_and_prefixes_are_judged_where_they_lead() {
    let r = Repo::new();
    let wt = r.d.path("work/.ittybitty/agents/a1/worktree");
    std::os::unix::fs::symlink(r.d.path("work/src"), wt.join("main-src")).unwrap();
    std::os::unix::fs::symlink(r.d.path("work/.ittybitty/agents/a10"), wt.join("to-a10")).unwrap();
    denied(
        &r.call(
            "PreToolUse",
            "Read",
            serde_json::json!({"file_path": "main-src/main.rs"}),
        ),
        "main.rs",
    );
    denied(
        &r.call(
            "PreToolUse",
            "Write",
            serde_json::json!({"file_path": "main-src/new.rs"}),
        ),
        "new.rs",
    );
    denied(
        &r.call(
            "PreToolUse",
            "Read",
            serde_json::json!({"file_path": "to-a10/worktree/src/lib.rs"}),
        ),
        "a10",
    );
    denied(
        &r.call(
            "PreToolUse",
            "Read",
            serde_json::json!({"file_path": "src/../../../a10/worktree/src/lib.rs"}),
        ),
        "a10",
    );
    allowed(&r.call(
        "PreToolUse",
        "Read",
        serde_json::json!({"file_path": "src/../src/lib.rs"}),
    ));
    // `..foo` is a name, not a climb.
    allowed(&r.call(
        "PreToolUse",
        "Write",
        serde_json::json!({"file_path": "..foo"}),
    ));
}

#[test]
fn fails_closed_on_every_kind_of_bad_input() {
    let r = Repo::new();
    for stdin in ["", "   \n", "not json", "[1,2]", "{\"tool_name\": 5}"] {
        let out = r.raw(stdin, &[]);
        assert_eq!(out.code, 2, "{stdin:?}: {out:?}");
        assert_eq!(decision(&out), "deny");
    }
    denied(&r.raw(r#"{"tool_name":"Read"}"#, &[]), "no tool_input");
    denied(&r.raw(r#"{"tool_input":{}}"#, &[]), "no tool_name");
    denied(
        &r.raw(
            r#"{"tool_name":"Read","tool_input":{"file_path":"rel.txt"}}"#,
            &[],
        ),
        "no absolute cwd",
    );
    denied(
        &r.raw(r#"{"tool_name":"Read","cwd":"/","tool_input":{}}"#, &[]),
        "without a file_path",
    );
    denied(
        &r.raw(
            r#"{"tool_name":"Read","cwd":"/","tool_input":{"file_path":"/x\u0000y"}}"#,
            &[],
        ),
        "NUL",
    );
    let bad_policy = r.d.path("work/missing.toml");
    let out =
        r.d.stockade(["hook", "claude", "--policy", bad_policy.to_str().unwrap()])
            .run();
    assert_eq!(out.code, 2, "{out:?}");
    let out = r.d.stockade(["hook", "claude", "--no-such-flag"]).run();
    assert_eq!(out.code, 2, "{out:?}");
}

#[test]
fn bash_is_refused_as_unknowable_except_plain_allowed_commands() {
    let r = Repo::new();
    allowed(&r.call(
        "PreToolUse",
        "Bash",
        serde_json::json!({"command": "ib status a1"}),
    ));
    denied(
        &r.call(
            "PreToolUse",
            "Bash",
            serde_json::json!({"command": "ib status; cat /etc/passwd"}),
        ),
        "not parsed",
    );
    denied(
        &r.call("PreToolUse", "Bash", serde_json::json!({"command": "ls"})),
        "not parsed",
    );
    denied(
        &r.call(
            "PreToolUse",
            "Bash",
            serde_json::json!({"command": "ib $(cat /etc/shadow)"}),
        ),
        "not parsed",
    );
}

#[test]
fn permission_requests_are_answered_and_audited() {
    let r = Repo::new();
    let root = r.d.path("work").display().to_string();
    let out = r.call(
        "PermissionRequest",
        "Read",
        serde_json::json!({"file_path": "src/lib.rs"}),
    );
    assert_eq!(out.code, 0);
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(
        v["hookSpecificOutput"]["hookEventName"],
        "PermissionRequest"
    );
    assert_eq!(v["hookSpecificOutput"]["decision"]["behavior"], "allow");
    let out = r.call(
        "PermissionRequest",
        "Read",
        serde_json::json!({"file_path": format!("{root}/src/main.rs")}),
    );
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(v["hookSpecificOutput"]["decision"]["behavior"], "deny");
    assert!(
        v["hookSpecificOutput"]["decision"]["message"]
            .as_str()
            .unwrap()
            .contains("main.rs")
    );
    denied(
        &r.call(
            "PreToolUse",
            "Write",
            serde_json::json!({"file_path": "/etc/passwd"}),
        ),
        "passwd",
    );
    let log = r.d.stockade(["--json", "audit", "--layer", "hook"]).run();
    log.ok();
    let records: Vec<serde_json::Value> = log
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 3, "{}", log.stdout);
    assert!(records.iter().all(|r| r["agent"] == "a1"));
    let write = records.iter().find(|r| r["tool"] == "Write").unwrap();
    assert_eq!(write["path"], "/etc/passwd");
    assert_eq!(write["access"], "write");
    assert!(write["rule"].is_null(), "default deny has no rule: {write}");
}

#[test]
fn tool_rules_come_first() {
    let d = TestDir::new(Who::Root);
    let input = |tool: &str| {
        serde_json::json!({"cwd": d.work(), "tool_name": tool, "tool_input": {"file_path": "x"}})
            .to_string()
    };
    let run = |tool: &str| {
        let mut cmd = d
            .stockade(["hook", "claude", "--profile", "cross-project"])
            .cmd;
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input(tool).as_bytes())
            .unwrap();
        let o = child.wait_with_output().unwrap();
        Out {
            code: o.status.code().unwrap(),
            stdout: String::from_utf8_lossy(&o.stdout).into(),
            stderr: String::from_utf8_lossy(&o.stderr).into(),
        }
    };
    denied(&run("Bash"), "tools.deny entry 'Bash'");
    denied(
        &run("mcp__github__create_issue"),
        "tools.deny entry 'mcp__*'",
    );
    denied(&run("Task"), "tools.default");
}

#[test]
fn explain_says_why_for_a_human() {
    let r = Repo::new();
    let root = r.d.path("work").display().to_string();
    let input = serde_json::json!({"cwd": r.worktree(), "tool_name": "Read", "tool_input": {"file_path": format!("{root}/src/main.rs")}});
    let out = r.raw(&input.to_string(), &["--explain"]);
    assert_eq!(out.code, 2);
    assert!(out.stdout.starts_with("DENY Read"), "{out:?}");
    assert!(out.stdout.contains("fix:"), "{out:?}");
}
