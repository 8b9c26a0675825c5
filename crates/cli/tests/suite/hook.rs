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
# These tests are about the parser: judge-only is opt-in.
hook.bash = "judge"
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
        self.d.stockade(args).run_with_stdin(stdin)
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
    // A raw `~` is the home directory (a caller other than Claude Code may pass it unexpanded), not a
    // directory named `~` in the worktree.
    denied(
        &r.call(
            "PreToolUse",
            "Read",
            serde_json::json!({"file_path": "~/.ssh/id_rsa"}),
        ),
        ".ssh/id_rsa",
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

/// What the hook answers for one Bash command, run from agent a1's worktree.
fn bash(r: &Repo, command: &str) -> (String, String) {
    let out = r.call(
        "PreToolUse",
        "Bash",
        serde_json::json!({"command": command, "description": "test"}),
    );
    let d = decision(&out);
    assert_eq!(out.code, if d == "deny" { 2 } else { 0 }, "{out:?}");
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    (
        d,
        v["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    )
}

#[test]
fn bash_commands_are_parsed_and_every_path_judged() {
    let r = Repo::new();
    std::fs::create_dir_all(r.d.path("work/.ittybitty/agents/a1/worktree/build")).unwrap();
    std::os::unix::fs::symlink(
        "../../a2",
        r.d.path("work/.ittybitty/agents/a1/worktree/peek"),
    )
    .unwrap();
    // (command, expected): "allow", "deny" (a path is refused), "unknowable" (refused as unknowable).
    let cases: &[(&str, &str)] = &[
        ("ls -la src", "allow"),
        ("cat src/lib.rs | grep a1 > out.txt", "allow"),
        ("ib status a1", "allow"),
        ("ib log a1 && ls", "allow"),
        ("mkdir -p build && touch build/x", "allow"),
        ("echo done >> ../../../logs/a1.log", "allow"),
        ("cd src && cat lib.rs", "allow"),
        ("git status", "allow"),
        ("for i in 1 2 3; do echo hi; done", "allow"),
        ("cat <<EOF > notes.md\nhello\nEOF", "allow"),
        ("cat <<'EOF'\n$(cat /etc/hostname)\nEOF", "allow"),
        ("bash -c 'ls src'", "allow"),
        ("if [ -f src/lib.rs ]; then cat src/lib.rs; fi", "allow"),
        ("[[ -f src/lib.rs ]] && echo yes", "allow"),
        ("ls > /dev/null 2>&1", "allow"),
        ("python3 -c 'print(1)'", "allow"),
        ("cp src/lib.rs src/copy.rs", "allow"),
        ("touch ..foo", "allow"),
        ("(cd src; ls) && ls build", "allow"),
        ("cat /etc/passwd", "deny"),
        ("cat ../../../../src/main.rs", "deny"),
        ("ls ../../a2/worktree", "deny"),
        ("cat ../../a10/worktree/src/lib.rs", "deny"),
        ("echo x > /tmp/x", "deny"),
        ("cd ../../a2 && cat worktree/src/lib.rs", "deny"),
        ("cd ../.. && cat a2/worktree/src/lib.rs", "deny"),
        ("cd src && cat ../../../a2/worktree/src/lib.rs", "deny"),
        ("bash -c \"cat ../../a2/worktree/src/lib.rs\"", "deny"),
        ("sh -c 'sh -c \"cat /etc/hosts\"'", "deny"),
        ("ln -s ../../a2/worktree peek", "deny"),
        ("ib status; cat /etc/hostname", "deny"),
        ("python3 -c \"print(open('/etc/hostname').read())\"", "deny"),
        (
            "node -e \"require('fs').readFileSync('../../a2/worktree/src/lib.rs')\"",
            "deny",
        ),
        ("cat < /etc/hostname", "deny"),
        ("source /etc/profile", "unknowable"),
        ("rm -rf ../../../../src", "deny"),
        ("mv src /tmp/stolen", "deny"),
        ("tee /tmp/x < src/lib.rs", "deny"),
        ("dd if=/etc/hostname of=out", "deny"),
        ("grep -r secret --include=x /etc", "deny"),
        ("cat /etc/*", "deny"),
        ("FOO=/etc/hostname cat x", "deny"),
        ("exec cat /etc/hostname", "deny"),
        ("env X=1 cat /etc/hostname", "deny"),
        ("cat $(echo /etc/hostname)", "unknowable"),
        ("cat `echo x`", "unknowable"),
        ("cat $SOME_VAR", "unknowable"),
        ("eval 'cat /etc/hostname'", "unknowable"),
        ("diff <(cat a) b", "unknowable"),
        ("cd - && ls", "unknowable"),
        // Found by fuzz/bash_paths: a failed `cd` leaves the shell where it was.
        (
            "cd ./src/new.rs; cp ../../a2/worktree/src/lib.rs src/lib.rs",
            "unknowable",
        ),
        ("cat <<EOF\n$(cat /etc/hostname)\nEOF", "unknowable"),
        ("echo $((1 + $(cat /etc/x)))", "unknowable"),
        ("find . -name x | xargs cat", "unknowable"),
        ("cat \"unterminated", "unknowable"),
        // Issue #14's classes: what a shell decides that a naive reading misses.
        ("cat $'\\x2e\\x2e'/../../../src/main.rs", "deny"),
        ("cat $'\\x00'", "unknowable"),
        ("cat {../../../..,.}/src/main.rs", "deny"),
        ("cat {src/lib.rs,'../../../../src/main.rs'}", "deny"),
        ("ls {src,build}", "allow"),
        ("cat $'src/lib.rs'", "allow"),
        ("echo x > {a,b}", "unknowable"),
        ("cat ../../a?/worktree/src/lib.rs", "deny"),
        ("false && cd src; cat ../../../../src/main.rs", "unknowable"),
        ("sort -o../../../../p src/lib.rs", "deny"),
        ("cp -t../../../.. src/lib.rs", "deny"),
        ("grep -f../../../../src/main.rs x src/lib.rs", "deny"),
        ("env -C ../../a2 cat worktree/src/lib.rs", "deny"),
        ("env --chdir=../../a2 cat worktree/src/lib.rs", "deny"),
        ("tar -C../../../.. -xf a.tar", "deny"),
        ("git -C ../../a2/worktree log", "deny"),
        ("bash -c -- 'cat ../../a2/worktree/src/lib.rs'", "deny"),
        ("HOME=/ cat ~/etc/hostname", "unknowable"),
        ("export PWD=/; cat x", "unknowable"),
        ("grep -r x ../..", "deny"),
        ("rm -r ../../../../.ittybitty", "deny"),
        ("sh x.sh", "unknowable"),
        ("make", "unknowable"),
        ("bash <<< 'cat /etc/hostname'", "unknowable"),
        ("python3 x.py", "unknowable"),
        ("git -c diff.external=/bin/sh diff", "unknowable"),
        ("tar -T list -cf a.tar", "unknowable"),
        ("curl file:///etc/hostname", "unknowable"),
        ("sed 'w /tmp/out' src/lib.rs", "unknowable"),
        ("awk '{print > \"/tmp/o\"}' src/lib.rs", "unknowable"),
        // Not paths, or not reading: no false denials.
        ("grep -n '//' src/lib.rs", "allow"),
        ("cd ../../a2 && cd -", "unknowable"),
        ("cd ../.. && cd a1/worktree && ls", "allow"),
        ("cd src || cat ../../../../src/main.rs", "unknowable"),
        ("for f in src/*.rs; do wc -l \"$f\"; done", "unknowable"),
        ("grep -r lib src", "allow"),
        ("cat ~/../../etc/hostname", "deny"),
        // Operations on a symlink itself are judged on the link (peek -> ../../a2, made by the test).
        ("rm peek", "allow"),
        ("ls -l peek", "allow"),
        ("stat peek", "allow"),
        ("cp -P peek copy", "allow"),
        ("ls peek", "deny"),
        ("cat peek/worktree/src/lib.rs", "deny"),
        ("cp -L peek copy", "deny"),
        ("cp src/lib.rs peek", "deny"),
    ];
    let mut failures = Vec::new();
    for (command, expected) in cases {
        let (d, reason) = bash(&r, command);
        let got = match d.as_str() {
            "deny" if reason.contains("cannot be judged before it runs") => "unknowable",
            other => other,
        };
        if got != *expected {
            failures.push(format!(
                "{command:?}: expected {expected}, got {got}: {reason}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} Bash cases wrong:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    assert!(cases.len() >= 40);
}

#[test]
fn unknowable_bash_asks_when_the_policy_says_so() {
    let r = Repo::new();
    let policy = r.d.path("agents.toml");
    let text = std::fs::read_to_string(&policy).unwrap() + "hook.on-unknowable = \"ask\"\n";
    std::fs::write(&policy, text).unwrap();
    let (d, reason) = bash(&r, "cat $(echo x)");
    assert_eq!(d, "ask", "{reason}");
    let (d, _) = bash(&r, "cat /etc/passwd");
    assert_eq!(d, "deny");
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
        d.stockade(["hook", "claude", "--profile", "cross-project"])
            .run_with_stdin(&input(tool))
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

/// Seed 003 with no policy file: the built-in `worktree` profile, parameterised by `--worktree` and
/// `--agent`, used by the hook and by `stockade run` alike; `git commit` still works from the worktree.
#[test]
fn builtin_worktree_profile_isolates_agents_and_lets_them_commit() {
    if !landlock_ready() {
        return;
    }
    let d = TestDir::new(Who::Root);
    d.write("work/README.md", "main repo\n")
        .agent_worktrees(&["a1", "a10"])
        .write("work/.ittybitty/logs/keep", "");
    let wt = d.path("work/.ittybitty/agents/a1/worktree");
    let script = r#"
set -e
cd "$WT"
echo change > mine.txt && git add mine.txt && git -c user.name=a -c user.email=b commit -qm "agent commit" 2>/dev/null
echo log >> ../../../logs/a1.log
try main-write 'echo x >> ../../../../README.md'
try main-read 'cat ../../../../README.md'
try other-agent 'ls ../../a10/worktree'
try other-prefix 'cat ../../a10/worktree/README.md'
try tmp 'echo x > /tmp/stockade-escape'
try hooks 'echo x > ../../../../.git/hooks/pre-commit'
echo again >> mine.txt && git stash -q && git stash pop -q && git checkout -qb a1-topic && echo stashed-and-branched
GD=$(sed -n 's/^gitdir: //p' .git)
try commondir 'echo /tmp > "$GD/commondir"'
try config-worktree 'echo "[core] fsmonitor = evil" > "$GD/config.worktree"'
try main-config 'echo "[core] fsmonitor = evil" >> ../../../../.git/config'
try mcp 'echo {} > .mcp.json'
"#;
    let out = d
        .stockade([
            "run",
            "--profile",
            "worktree",
            "--agent",
            "a1",
            "--worktree",
            wt.to_str().unwrap(),
            "--env",
            &format!("WT={}", wt.display()),
            "--",
            "sh",
            "-c",
            &format!("{TRY}{script}"),
        ])
        .run();
    out.ok()
        .stdout_has("stashed-and-branched")
        .stdout_lacks("ESCAPED commondir")
        .stdout_lacks("ESCAPED config-worktree")
        .stdout_lacks("ESCAPED main-config")
        .stdout_lacks("ESCAPED mcp")
        .stdout_lacks("ESCAPED hooks")
        .stdout_lacks("ESCAPED main-write")
        .stdout_lacks("ESCAPED main-read");
    out.stdout_lacks("ESCAPED other-agent")
        .stdout_lacks("ESCAPED other-prefix")
        .stdout_lacks("ESCAPED tmp");
    let log = std::process::Command::new("git")
        .args(["log", "--oneline", "agent-a1"])
        .current_dir(d.work())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&log.stdout).contains("agent commit"),
        "the agent's commit did not land: {out:?} {log:?}"
    );
    assert_eq!(d.read("work/README.md").as_deref(), Some("main repo\n"));
    assert_eq!(
        d.read("work/.ittybitty/logs/a1.log").as_deref(),
        Some("log\n")
    );

    // The hook asks the same profile.
    let hook = |tool: &str, input: serde_json::Value| {
        let json = serde_json::json!({"cwd": wt, "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input});
        d.stockade([
            "hook",
            "claude",
            "--profile",
            "worktree",
            "--agent",
            "a1",
            "--worktree",
            wt.to_str().unwrap(),
            "--worktree-gitdir",
            d.path("work/.git/worktrees/worktree").to_str().unwrap(),
        ])
        .run_with_stdin(&json.to_string())
    };
    allowed(&hook(
        "Write",
        serde_json::json!({"file_path": "src/new.rs"}),
    ));
    allowed(&hook(
        "Write",
        serde_json::json!({"file_path": "../../../logs/a1.log"}),
    ));
    denied(
        &hook(
            "Read",
            serde_json::json!({"file_path": "../../../../README.md"}),
        ),
        "README.md",
    );
    denied(
        &hook(
            "Read",
            serde_json::json!({"file_path": "../../a10/worktree/README.md"}),
        ),
        "a10",
    );
    denied(
        &hook("Write", serde_json::json!({"file_path": "/tmp/x"})),
        "/tmp/x",
    );
    denied(
        &hook(
            "Bash",
            serde_json::json!({"command": "cat ../../../../README.md"}),
        ),
        "README.md",
    );
}

#[test]
fn install_merges_idempotently_and_the_installed_command_fails_closed() {
    let d = TestDir::new(Who::Root);
    d.write(
        "work/.claude/settings.json",
        r#"{"model": "opus", "permissions": {"allow": ["Read"]}, "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "my-linter"}]}], "Stop": [{"hooks": []}]}}"#,
    );
    d.write("agent.toml", "[profile.agent]\nfs.write = [\"work\"]\n");
    let policy = d.path("agent.toml");
    let install = || {
        d.stockade([
            "install",
            "claude",
            "--agent",
            "a1",
            "--policy",
            policy.to_str().unwrap(),
        ])
        .run()
    };
    install().ok().stdout_has("settings.json");
    let first = d.read("work/.claude/settings.json").unwrap();
    install().ok();
    assert_eq!(
        d.read("work/.claude/settings.json").unwrap(),
        first,
        "install is not idempotent"
    );
    let v: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["model"], "opus");
    assert_eq!(v["permissions"]["allow"][0], "Read");
    assert_eq!(v["hooks"]["Stop"], serde_json::json!([{"hooks": []}]));
    let pre = v["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre.len(), 2, "{first}");
    assert_eq!(pre[0]["hooks"][0]["command"], "my-linter");
    for event in ["PreToolUse", "PermissionRequest"] {
        let ours = v["hooks"][event].as_array().unwrap().last().unwrap();
        assert_eq!(ours["matcher"], "*");
        assert_eq!(ours["hooks"][0]["type"], "command");
        assert_eq!(ours["hooks"][0]["timeout"], 10);
        let cmd = ours["hooks"][0]["command"].as_str().unwrap();
        assert!(
            cmd.ends_with(" || exit 2") && cmd.contains("--policy") && cmd.contains("--agent 'a1'"),
            "{cmd}"
        );
    }
    // The installed command, as Claude Code runs it (through a shell, from the project).
    let cmd = pre[1]["hooks"][0]["command"].as_str().unwrap().to_string();
    let run = |command: &str, input: serde_json::Value| {
        let mut sh = std::process::Command::new("sh");
        sh.arg("-c")
            .arg(command)
            .current_dir(d.work())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = sh.spawn().unwrap();
        // A shell that fails before reading (the missing binary) closes the pipe early.
        let _ = child
            .stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes());
        child.wait_with_output().unwrap().status.code()
    };
    let inside = serde_json::json!({"cwd": d.work(), "tool_name": "Write", "tool_input": {"file_path": "x.txt"}});
    let outside = serde_json::json!({"cwd": d.work(), "tool_name": "Write", "tool_input": {"file_path": "/etc/x"}});
    assert_eq!(run(&cmd, inside.clone()), Some(0));
    assert_eq!(run(&cmd, outside), Some(2));
    // A missing binary (exit 127 from the shell) still blocks.
    let missing = cmd.replacen("stockade'", "stockade-missing'", 1);
    assert_eq!(run(&missing, inside), Some(2));
    // A settings file that is not JSON is reported and left alone.
    d.write("work/.claude/settings.json", "{not json");
    install().code(125).stderr_has("not valid JSON");
    assert_eq!(
        d.read("work/.claude/settings.json").as_deref(),
        Some("{not json")
    );
}

/// The hook reads its policy at every call: `install` refuses a policy file the agent could replace.
#[test]
fn install_refuses_a_policy_the_agent_can_write() {
    let d = TestDir::new(Who::Root);
    d.write("work/agent.toml", "[profile.agent]\nfs.write = [\".\"]\n");
    let out = d
        .stockade([
            "install",
            "claude",
            "--policy",
            d.path("work/agent.toml").to_str().unwrap(),
        ])
        .run();
    out.code(125).stderr_has("lets the agent write");
    assert!(!d.path("work/.claude/settings.json").exists());
}

/// `hook.on-allow = "defer"` leaves in-scope calls to Claude Code's own rules; `hook.bash = "sandbox"`
/// rewrites Bash (even what cannot be judged statically) to run under `stockade run`, and the rewritten
/// command is really confined.
#[test]
fn defer_and_sandboxed_bash() {
    if !landlock_ready() {
        return;
    }
    let d = TestDir::new(Who::Root);
    d.write(
        "p.toml",
        "[profile.p]\nextends = \"workspace-write\"\nhook.on-allow = \"defer\"\nhook.bash = \"sandbox\"\n",
    );
    let policy = d.path("p.toml");
    let call = |tool: &str, input: serde_json::Value| {
        let json = serde_json::json!({"cwd": d.work(), "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input});
        d.stockade(["hook", "claude", "--policy", policy.to_str().unwrap()])
            .run_with_stdin(&json.to_string())
    };
    let read = call("Read", serde_json::json!({"file_path": "x.txt"}));
    assert_eq!(
        (read.code, read.stdout.trim()),
        (0, ""),
        "defer answers nothing: {read:?}"
    );
    denied(
        &call("Read", serde_json::json!({"file_path": "/etc/shadow"})),
        "shadow",
    );
    // Statically refused paths are still refused early, with the reason.
    denied(
        &call("Bash", serde_json::json!({"command": "cat /etc/shadow"})),
        "shadow",
    );
    let rewritten = |command: &str| {
        let out = call("Bash", serde_json::json!({"command": command}));
        assert_eq!(out.code, 0, "{out:?}");
        let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "allow");
        v["hookSpecificOutput"]["updatedInput"]["command"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // The rewrite replaces the input whole (Claude Code does not merge): every other field is kept.
    let out = call(
        "Bash",
        serde_json::json!({"command": "ls", "description": "list", "timeout": 5000, "run_in_background": true}),
    );
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    let updated = &v["hookSpecificOutput"]["updatedInput"];
    assert_eq!(
        (
            &updated["description"],
            &updated["timeout"],
            &updated["run_in_background"]
        ),
        (
            &serde_json::json!("list"),
            &serde_json::json!(5000),
            &serde_json::json!(true)
        ),
        "{v}"
    );
    let escape = rewritten("echo pwned > $(echo /etc/stockade-hook-escape)");
    assert!(
        escape.contains(" run ") && escape.contains("--project"),
        "{escape}"
    );
    let ok = rewritten("echo fine > $(echo note.txt)");
    let run = |command: &str| {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .current_dir(d.work())
            .output()
            .unwrap()
    };
    let _ = run(&escape);
    assert!(
        !std::path::Path::new("/etc/stockade-hook-escape").exists(),
        "the rewritten command escaped"
    );
    let o = run(&ok);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(d.read("work/note.txt").as_deref(), Some("fine\n"));

    // Exit status, signals and stdout pass through; a `cd` carries over to the shell that ran it.
    std::fs::create_dir_all(d.work().join("sub")).unwrap();
    let status = |command: &str| {
        let o = run(&format!(
            "{}; echo \"status $? in ${{PWD##*/}}\"",
            rewritten(command)
        ));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert_eq!(status("cd sub; echo out; exit 7"), "out\nstatus 7 in sub");
    assert_eq!(status("kill -KILL $$"), "status 137 in work");
    assert_eq!(
        status("cd /nonexistent-dir 2>/dev/null; true"),
        "status 0 in work"
    );
    // Descriptor 3 is the command's own, as in plain bash: the final directory goes elsewhere.
    assert_eq!(
        status("exec 3>fd3.txt; echo mine >&3; exec 3>&-; cd sub; cat ../fd3.txt"),
        "mine\nstatus 0 in sub"
    );
    // A plain program and its literal arguments run without a second shell, and still confined.
    let direct = rewritten("sh -c exit.3");
    assert!(!direct.contains("bash --norc"), "{direct}");
    assert_eq!(status("sh -c exit.3"), "status 127 in work");
    assert_eq!(status("ls sub"), "status 0 in work");
    d.write("work/w.sh", "touch /etc/stockade-hook-direct\n");
    let escape = rewritten("sh w.sh");
    assert!(!escape.contains("bash --norc"), "{escape}");
    let _ = run(&escape);
    assert!(!std::path::Path::new("/etc/stockade-hook-direct").exists());
    // Anything bash would read differently keeps the shell: builtins, quotes, expansions, assignments.
    for command in [
        "cd sub", "echo a", "ls 'sub'", "ls ~", "ls s*", "X=1 ls", "ls $HOME", "ls\tsub",
    ] {
        assert!(rewritten(command).contains("bash --norc"), "{command}");
    }
}

/// In a linked worktree, `install` pins the worktree's git dir and the repository's common dir (the hook
/// never reads the `.git` file, which the agent can write), and the hook's sandboxed Bash commits there.
#[test]
fn the_hook_commits_in_a_linked_worktree() {
    if !landlock_ready() {
        return;
    }
    let d = TestDir::new(Who::Root);
    d.mkdir("repo");
    let setup = "git init -q -b main && git config user.name a && git config user.email a@b && \
                 echo one > f && git add f && git commit -qm first && git worktree add -q ../work -b wt";
    setup_repo(&d.path("repo"), setup);
    let git_dir = d.path("repo/.git/worktrees/work");
    let common = d.path("repo/.git");
    d.write(
        "p.toml",
        "[profile.p]\nextends = \"workspace-write\"\nhook.bash = \"sandbox\"\n",
    );
    let policy = d.path("p.toml");
    d.stockade(["install", "claude", "--policy", policy.to_str().unwrap()])
        .run()
        .ok();
    let settings = d.read("work/.claude/settings.json").unwrap();
    assert!(
        settings.contains(&format!("--git-dir '{}'", git_dir.display()))
            && settings.contains(&format!("--git-common-dir '{}'", common.display())),
        "{settings}"
    );
    let json = serde_json::json!({"cwd": d.work(), "hook_event_name": "PreToolUse", "tool_name": "Bash",
                                  "tool_input": {"command": "echo two >> f && git commit -qam second && git log --oneline | wc -l"}});
    let out = d
        .stockade([
            "hook",
            "claude",
            "--policy",
            policy.to_str().unwrap(),
            "--git-dir",
            git_dir.to_str().unwrap(),
            "--git-common-dir",
            common.to_str().unwrap(),
        ])
        .run_with_stdin(&json.to_string());
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    let command = v["hookSpecificOutput"]["updatedInput"]["command"]
        .as_str()
        .unwrap()
        .to_string();
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(&command)
        .current_dir(d.work())
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "2", "{o:?}");
}
