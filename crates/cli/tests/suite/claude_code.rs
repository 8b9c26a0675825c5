//! The hook as installed, driven by the real Claude Code CLI (the npm package `.ci/run` installs) against a
//! scripted local Messages API (`tests/fixtures/scripted_api.py`): seed 003's agent in a linked worktree.
//!
//! Each test scripts the model's tool calls, lets Claude Code run them through the installed hook, and
//! reads back what Claude Code sent the API as each tool's result, plus what happened on disk.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::util::{TestDir, Who, landlock_ready, scripted_api, unique_marker};

/// The Claude Code CLI: `$STOCKADE_CLAUDE`, or a loud skip (a failure under `STOCKADE_REQUIRE_CLAUDE=1`,
/// which `.ci/run` sets after installing the pinned version).
pub(super) fn claude_bin() -> Option<PathBuf> {
    let found = std::env::var_os("STOCKADE_CLAUDE")
        .map(PathBuf::from)
        .filter(|p| p.is_file());
    if found.is_none() {
        if std::env::var("STOCKADE_REQUIRE_CLAUDE").as_deref() == Ok("1") {
            panic!("STOCKADE_REQUIRE_CLAUDE=1 but $STOCKADE_CLAUDE names no Claude Code CLI");
        }
        eprintln!(
            "SKIPPED: no Claude Code CLI ($STOCKADE_CLAUDE unset); .ci/run installs it (npm @anthropic-ai/claude-code)"
        );
    }
    found
}

/// What a test with the real Claude Code CLI needs: Landlock, the CLI ([`claude_bin`]), and a test
/// directory outside `/tmp` (the sandbox mirrors `/tmp`'s entries); `None`, a skip, without the first two.
pub(super) fn claude_and_dir() -> Option<(PathBuf, TestDir)> {
    if !landlock_ready() {
        return None;
    }
    let claude = claude_bin()?;
    Some((claude, TestDir::outside_tmp(Who::Root)))
}

/// A main repository with a secret, agent a1's linked worktree (the hook installed in it) and agent a2's.
struct Seed003 {
    d: TestDir,
    claude: PathBuf,
}

impl Seed003 {
    fn new() -> Option<Self> {
        let (claude, d) = claude_and_dir()?;
        d.write("work/README.md", "main repo\n")
            .write("work/secret.txt", "MAIN-REPO-SECRET\n")
            .write("work/src/main.rs", "fn main() {}\n")
            .write(
                "home/.bashrc",
                "# the user's rc: not for the sandboxed shell\n",
            )
            .agent_worktrees(&["a1", "a2"]);
        let s = Seed003 { d, claude };
        s.install(&["--profile", "worktree"]);
        Some(s)
    }

    fn worktree(&self) -> PathBuf {
        self.d.path("work/.ittybitty/agents/a1/worktree")
    }

    /// `stockade install claude --agent a1 --worktree W EXTRA...`, as a user would.
    fn install(&self, extra: &[&str]) {
        let wt = self.worktree();
        let mut args = vec![
            "install",
            "claude",
            "--agent",
            "a1",
            "--worktree",
            wt.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        self.d
            .stockade(args)
            .env("HOME", self.d.path("home").to_str().unwrap())
            .run()
            .ok();
    }

    /// Runs `claude -p` in the worktree with the model's tool calls scripted; returns each tool result
    /// (its text, and whether Claude Code marked it an error) in order.
    fn session(&self, script: serde_json::Value, skip_permissions: bool) -> Vec<(String, bool)> {
        let dir = self.d.path(&format!("api-{}", unique_marker()));
        let (_api, port) = scripted_api(&dir, &script, None);
        let log = dir.join("requests.jsonl");
        let mut cmd = Command::new("timeout");
        cmd.args([
            "120",
            self.claude.to_str().unwrap(),
            "-p",
            "go",
            "--output-format",
            "json",
        ]);
        if skip_permissions {
            cmd.arg("--dangerously-skip-permissions");
        }
        let out = cmd
            .current_dir(self.worktree())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.d.path("home"))
            .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
            .env("ANTHROPIC_API_KEY", "sk-ant-scripted")
            .env("IS_SANDBOX", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "claude failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // The last main-conversation request holds every tool result.
        let text = std::fs::read_to_string(&log).unwrap();
        let last = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .rfind(|r| r["body"]["tools"].as_array().is_some_and(|t| !t.is_empty()))
            .expect("no request from Claude Code");
        let mut results: Vec<(String, bool)> = Vec::new();
        for m in last["body"]["messages"].as_array().unwrap() {
            for block in m["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" {
                    let content = match &block["content"] {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    results.push((content, block["is_error"] == true));
                }
            }
        }
        // The sandboxed shell reads no rc file of the user's (whose home it cannot read).
        assert!(
            !results.iter().any(|(t, _)| t.contains(".bashrc")),
            "{results:#?}"
        );
        results
    }
}

fn tool(name: &str, input: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"tool": name, "input": input})
}

fn bash(command: &str) -> serde_json::Value {
    tool(
        "Bash",
        serde_json::json!({"command": command, "description": "scripted"}),
    )
}

#[test]
fn in_scope_calls_run_without_a_prompt_and_out_of_scope_calls_are_refused() {
    let Some(s) = Seed003::new() else { return };
    let wt = s.worktree();
    let main = s.d.work();
    let results = s.session(
        serde_json::json!([
            tool("Write", serde_json::json!({"file_path": wt.join("notes.md"), "content": "first\n"})),
            tool("Read", serde_json::json!({"file_path": wt.join("notes.md")})),
            tool("Edit", serde_json::json!({"file_path": wt.join("notes.md"), "old_string": "first", "new_string": "second"})),
            bash("cat notes.md && git status --short"),
            tool("Read", serde_json::json!({"file_path": main.join("secret.txt")})),
            tool("Write", serde_json::json!({"file_path": main.join(".ittybitty/agents/a2/worktree/planted.txt"), "content": "x"})),
            tool("Read", serde_json::json!({"file_path": "/etc/hostname"})),
            bash("cat ../../../../secret.txt"),
            {"text": "done"}
        ]),
        false,
    );
    assert_eq!(results.len(), 8, "{results:#?}");
    let ok = |i: usize| {
        let (text, error) = &results[i];
        assert!(!error, "call {i} was refused: {text}");
        text.clone()
    };
    let refused = |i: usize, needle: &str| {
        let (text, error) = &results[i];
        assert!(
            *error && text.contains(needle),
            "call {i} was not refused naming {needle:?}: {text}"
        );
    };
    ok(0);
    assert!(ok(1).contains("first"));
    ok(2);
    let listed = ok(3);
    assert!(
        listed.contains("second") && listed.contains("notes.md"),
        "{listed}"
    );
    assert_eq!(
        s.d.read("work/.ittybitty/agents/a1/worktree/notes.md")
            .as_deref(),
        Some("second\n")
    );
    refused(4, "secret.txt");
    refused(5, "a2");
    assert!(
        !s.d.path("work/.ittybitty/agents/a2/worktree/planted.txt")
            .exists()
    );
    // The seed's scope: the agent's file tools do not reach system directories.
    refused(6, "/etc/hostname");
    refused(7, "secret.txt");
    assert!(!results.iter().any(|(t, _)| t.contains("MAIN-REPO-SECRET")));
}

#[test]
fn a_script_written_then_run_is_stopped_by_the_kernel_and_cd_carries_over() {
    let Some(s) = Seed003::new() else { return };
    let wt = s.worktree();
    let secret = s.d.work().join("secret.txt");
    let results = s.session(
        serde_json::json!([
            tool("Write", serde_json::json!({"file_path": wt.join("x.sh"),
                "content": format!("cat {} > leak.txt; echo \"status $?\"\ncp leak.txt /tmp/leak 2>/dev/null; ls /tmp\n", secret.display())})),
            bash("sh x.sh"),
            bash("cd src && echo made > /tmp/scratch && cat /tmp/scratch"),
            bash("pwd"),
            {"text": "done"}
        ]),
        false,
    );
    assert_eq!(results.len(), 4, "{results:#?}");
    let (ran, _) = &results[1];
    assert!(
        ran.contains("status 1"),
        "the script was not refused by the kernel: {ran}"
    );
    assert!(!results.iter().any(|(t, _)| t.contains("MAIN-REPO-SECRET")));
    assert_eq!(
        s.d.read("work/.ittybitty/agents/a1/worktree/leak.txt")
            .as_deref(),
        Some("")
    );
    assert_eq!(results[2].0.trim(), "made");
    assert_eq!(results[3].0.trim(), wt.join("src").display().to_string());
}

#[test]
fn rewriting_the_worktrees_git_file_widens_nothing() {
    let Some(s) = Seed003::new() else { return };
    let wt = s.worktree();
    let main = s.d.work();
    let planted = format!("gitdir: {}\n", main.display());
    let results = s.session(
        serde_json::json!([
            tool("Write", serde_json::json!({"file_path": wt.join(".git"), "content": planted})),
            bash(&format!("printf 'gitdir: {}\\n' > .git; echo \"status $?\"", main.display())),
            // Nor can it plant settings (a hook of its own, permissions) for its next session.
            tool("Write", serde_json::json!({"file_path": wt.join(".claude/settings.local.json"),
                "content": "{\"permissions\": {\"allow\": [\"Bash\"]}}"})),
            bash("echo '{}' > .claude/settings.local.json; echo \"status $?\""),
            {"text": "done"}
        ]),
        true,
    );
    // Each pair: the file tool's call is refused by the hook, the Bash write by the kernel (status 1).
    for (i, what) in [(0, ".git"), (2, ".claude/")] {
        let (tool_call, bash_call) = (&results[i], &results[i + 1]);
        assert!(tool_call.1, "writing {what} was not refused: {tool_call:?}");
        assert!(
            bash_call.0.contains("status 1"),
            "the kernel let {what} be written: {bash_call:?}"
        );
    }
    assert!(!wt.join(".claude/settings.local.json").exists());
    assert!(
        s.d.read("work/.ittybitty/agents/a1/worktree/.git")
            .unwrap()
            .contains("worktrees")
    );

    // Even had it been written (here, by the test), no decision reads it.
    std::fs::write(wt.join(".git"), &planted).unwrap();
    let results = s.session(
        serde_json::json!([
            tool("Read", serde_json::json!({"file_path": main.join("secret.txt")})),
            tool("Write", serde_json::json!({"file_path": main.join("src/planted.rs"), "content": "x"})),
            bash("cat ../../../../secret.txt; echo planted > ../../../../src/planted2.rs"),
            {"text": "done"}
        ]),
        true,
    );
    assert!(
        !results.iter().any(|(t, _)| t.contains("MAIN-REPO-SECRET")),
        "{results:#?}"
    );
    assert!(!main.join("src/planted.rs").exists());
    assert!(!main.join("src/planted2.rs").exists());
}

#[test]
fn a_hook_past_its_deadline_blocks_the_call() {
    let Some(s) = Seed003::new() else { return };
    // A policy on a filesystem that hangs: the hook blocks reading it (a FIFO nobody writes), past its
    // deadline and towards Claude Code's timeout, which would let the call through.
    let policy = s.d.path("slow.toml");
    std::fs::write(&policy, "[profile.slow]\nextends = \"worktree\"\n").unwrap();
    s.install(&[
        "--policy",
        policy.to_str().unwrap(),
        "--profile",
        "slow",
        "--hook-timeout",
        "4",
    ]);
    std::fs::remove_file(&policy).unwrap();
    let st = Command::new("mkfifo").arg(&policy).status().unwrap();
    assert!(st.success());
    let wt = s.worktree();
    let results = s.session(
        serde_json::json!([
            tool("Write", serde_json::json!({"file_path": wt.join("late.txt"), "content": "x"})),
            {"text": "done"}
        ]),
        true,
    );
    assert!(
        results[0].1 && results[0].0.contains("deadline"),
        "the call was not refused at the deadline: {results:?}"
    );
    assert!(!wt.join("late.txt").exists());
}

/// A `run_in_background` Bash call keeps its field through the rewrite and runs confined: what the parser
/// cannot see (a substitution) is stopped by the kernel, the rest of the command runs.
#[test]
fn a_background_command_runs_confined() {
    let Some(s) = Seed003::new() else { return };
    let results = s.session(
        serde_json::json!([
            tool("Bash", serde_json::json!({
                "command": "sleep 1; cat $(echo ../../../../secret.txt) > bg.txt; echo done > bg2.txt",
                "description": "in the background", "run_in_background": true})),
            bash("sleep 4; cat bg2.txt; wc -c < bg.txt"),
            {"text": "done"}
        ]),
        false,
    );
    assert_eq!(results.len(), 2, "{results:#?}");
    assert!(
        !results[0].1,
        "the background call was refused: {:?}",
        results[0]
    );
    assert_eq!(results[1].0.trim(), "done\n0", "{results:#?}");
    assert_eq!(
        s.d.read("work/.ittybitty/agents/a1/worktree/bg.txt")
            .as_deref(),
        Some("")
    );
}
