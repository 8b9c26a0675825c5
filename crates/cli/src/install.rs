//! `stockade install claude`: the seed's `build_agent_settings`, as a merge that loses nothing.

use std::path::Path;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use stockade_policy::Variables;

use crate::args::InstallArgs;
use crate::policy_args::{absolute, self_command};
use crate::{ExitStatus, output};

/// The events the hook answers.
const EVENTS: &[&str] = &["PreToolUse", "PermissionRequest"];

pub(crate) fn claude(args: InstallArgs, json_out: bool) -> anyhow::Result<ExitStatus> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let settings = match (&args.settings, &args.policy.worktree) {
        (Some(s), _) => absolute(&cwd, s),
        (None, Some(w)) => absolute(&cwd, w).join(".claude/settings.json"),
        (None, None) => cwd.join(".claude/settings.json"),
    };
    // The hook must find the same policy wherever Claude Code runs it: check that it resolves now, and
    // pass every path absolute.
    // Every variable is resolved here, once, before the agent runs (the worktree's `.git` included), and
    // pinned into the installed command: nothing the agent writes later changes a decision.
    let vars = crate::policy_args::variables(&args.policy, true)?;
    let policy = crate::policy_args::builder(&args.policy, vars.clone())
        .build()
        .context("the policy the hook would use does not resolve")?;
    // The hook reads its policy file at every call: in a directory the agent may write, the agent could
    // replace it (rename the directory, or the file where no kernel stands in the way).
    if let Some(file) = &args.policy.policy {
        let file = absolute(&cwd, file);
        let dir = file.parent().unwrap_or(Path::new("/"));
        let dir = stockade_policy::CanonicalPath::resolve(dir)
            .with_context(|| format!("cannot resolve '{}'", dir.display()))?;
        if policy
            .decide(&dir, stockade_policy::Access::Write)
            .is_allow()
        {
            bail!(
                "the policy file '{}' lies in '{}', which this policy lets the agent write: the agent could replace it; move it outside every writable scope (e.g. beside the repository, or in ~/.config)",
                file.display(),
                dir
            );
        }
    }
    if args.hook_timeout < 2 {
        bail!(
            "--hook-timeout {} is too short: the hook needs a second of margin to refuse before Claude Code's timeout lets the call through",
            args.hook_timeout
        );
    }
    let command = hook_command(&args, &vars, &cwd)?;

    let mut doc: Value = match std::fs::read_to_string(&settings) {
        Ok(text) if text.trim().is_empty() => json!({}),
        Ok(text) => serde_json::from_str(&text).with_context(|| {
            format!(
                "'{}' is not valid JSON; fix or move it first",
                settings.display()
            )
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({}),
        Err(e) => return Err(e).with_context(|| format!("cannot read '{}'", settings.display())),
    };
    merge(&mut doc, &command, args.hook_timeout)
        .with_context(|| format!("cannot merge into '{}'", settings.display()))?;
    write_atomically(&settings, &doc)?;
    if json_out {
        output::json(&json!({"settings": settings, "command": command, "events": EVENTS}));
    } else {
        output::out(&format!(
            "installed the stockade hook in {}\n  {command}",
            settings.display()
        ));
    }
    Ok(ExitStatus::Success)
}

/// `'/abs/stockade' hook claude --pinned --project '/abs' --home ... --deadline 8000ms ... || exit 2`. The
/// deadline leaves the hook time to refuse before Claude Code's own timeout would let the call through:
/// the timeout less a fifth, and at least a second less.
fn hook_command(args: &InstallArgs, vars: &Variables, base: &Path) -> anyhow::Result<String> {
    let timeout_ms = u64::from(args.hook_timeout) * 1000;
    let deadline_ms = timeout_ms - (timeout_ms / 5).max(1000);
    Ok(format!(
        "{} --deadline {deadline_ms}ms || exit 2",
        self_command(&["hook", "claude"], &args.policy, vars, base)?
    ))
}

/// Whether a hook entry is one stockade installed (so a new install replaces it instead of adding).
fn is_ours(entry: &Value) -> bool {
    entry["hooks"].as_array().is_some_and(|hooks| {
        hooks.iter().any(|h| {
            h["command"]
                .as_str()
                .is_some_and(|c| c.contains("stockade") && c.contains("' hook claude"))
        })
    })
}

/// Adds the hook for every event, replacing an earlier stockade entry and keeping everything else.
fn merge(doc: &mut Value, command: &str, timeout: u32) -> anyhow::Result<()> {
    let Some(root) = doc.as_object_mut() else {
        bail!("the settings file is not a JSON object")
    };
    let hooks = root.entry("hooks").or_insert_with(|| json!({}));
    let Some(hooks) = hooks.as_object_mut() else {
        bail!("\"hooks\" is not an object")
    };
    for event in EVENTS {
        let list = hooks.entry(*event).or_insert_with(|| json!([]));
        let Some(list) = list.as_array_mut() else {
            bail!("\"hooks.{event}\" is not an array")
        };
        list.retain(|e| !is_ours(e));
        list.push(json!({"matcher": "*", "hooks": [{"type": "command", "command": command, "timeout": timeout}]}));
    }
    Ok(())
}

/// Write to a temp file beside it, then rename: never a half-written settings file.
fn write_atomically(path: &Path, doc: &Value) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create '{}'", dir.display()))?;
    let tmp = dir.join(format!(
        ".{}.stockade-{}",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let mut text = serde_json::to_string_pretty(doc)?;
    text.push('\n');
    std::fs::write(&tmp, text).with_context(|| format!("cannot write '{}'", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace '{}'", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_keeps_unrelated_keys_and_is_idempotent() {
        let mut doc = json!({"model": "x", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "other"}]}], "Stop": []}});
        let cmd = "'/bin/stockade' hook claude --agent 'a1' || exit 2";
        merge(&mut doc, cmd, 10).unwrap();
        let once = doc.clone();
        merge(&mut doc, cmd, 10).unwrap();
        assert_eq!(doc, once);
        assert_eq!(doc["model"], "x");
        assert_eq!(doc["hooks"]["PreToolUse"].as_array().unwrap().len(), 2);
        assert_eq!(doc["hooks"]["PermissionRequest"][0]["matcher"], "*");
        assert!(merge(&mut json!([1]), cmd, 10).is_err());
        assert_eq!(crate::policy_args::quote("a'b"), r"'a'\''b'");
    }
}
