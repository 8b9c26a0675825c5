//! From one tool call to a verdict: which paths it touches, and what the policy says about each.

use std::path::{Path, PathBuf};

use serde_json::Value;
use stockade_policy::{
    AbsPath, Access, BashMode, CanonicalPath, Decision, Denial, OnUnknowable, PathResolver,
    ResolvedPolicy, ToolDecision,
};

use crate::bash::{BashAnalysis, ENTRY_FIELD, expand_tilde};

/// The field of a directory a Bash command reads or changes recursively: everything beneath it is judged.
const RECURSIVE_FIELD: &str = "recursive";

/// Entries examined beneath one recursive operand before the command counts as unknowable.
const MAX_RECURSIVE_ENTRIES: usize = 20_000;
use crate::input::HookInput;

/// Argument names that carry paths in tools the hook does not know by name (MCP tools and new tools).
pub const PATH_KEYS: &[&str] = &[
    "path",
    "paths",
    "file_path",
    "filePath",
    "file",
    "filename",
    "notebook_path",
    "directory",
    "dir",
    "root",
    "source",
    "destination",
    "target",
];

/// Words in a tool's name that mean it changes files (for tools judged through [`PATH_KEYS`]).
const WRITING_WORDS: &[&str] = &[
    "write", "edit", "create", "move", "rename", "delete", "remove", "mkdir", "put", "save",
];

/// One path a tool call would touch, and the policy's answer for it.
#[derive(Debug, Clone)]
pub struct Touch {
    /// The argument it came from (`file_path`, `pattern`, ...).
    pub field: String,
    /// As the agent wrote it.
    pub written: String,
    /// Where it leads.
    pub path: CanonicalPath,
    /// What the tool would do with it.
    pub access: Access,
    /// The policy's answer.
    pub decision: Decision,
}

/// The answer for the call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Let it run without a prompt.
    Allow {
        /// Why.
        reason: String,
    },
    /// Block it.
    Deny {
        /// Why, naming the path and the rule.
        reason: String,
    },
    /// Let the user decide.
    Ask {
        /// Why.
        reason: String,
    },
}

impl Verdict {
    /// The reason.
    pub fn reason(&self) -> &str {
        match self {
            Verdict::Allow { reason } | Verdict::Deny { reason } | Verdict::Ask { reason } => {
                reason
            }
        }
    }
}

/// The verdict and how it was reached.
#[derive(Debug, Clone)]
pub struct Judgement {
    /// The tool, as named in the input.
    pub tool: String,
    /// The answer.
    pub verdict: Verdict,
    /// Every path judged.
    pub touches: Vec<Touch>,
    /// The refusal that decided a deny, when a path decided it.
    pub denial: Option<Denial>,
    /// With `hook.bash = "sandbox"`, the Bash command to rewrite so that it runs under `stockade run`.
    pub sandbox_command: Option<String>,
}

fn deny(tool: &str, reason: impl Into<String>) -> Judgement {
    Judgement {
        tool: tool.to_string(),
        verdict: Verdict::Deny {
            reason: reason.into(),
        },
        touches: Vec::new(),
        denial: None,
        sandbox_command: None,
    }
}

/// Judges one call. Order: the tool rules (`tools.deny`, `tools.allow`, `tools.default`), then every path
/// the call names; the first refused path decides a deny. Nothing judged, nothing allowed: a call whose
/// paths cannot be known is refused.
pub fn judge(policy: &ResolvedPolicy, input: &HookInput) -> Judgement {
    let Some(tool) = input.tool_name.as_deref().filter(|t| !t.is_empty()) else {
        return deny(
            "",
            "the hook input has no tool_name; refusing what cannot be judged",
        );
    };
    match policy.tools().decide(tool) {
        ToolDecision::Deny(rule) => {
            let why = rule.map_or_else(
                || "tools.default = \"deny\"".to_string(),
                |r| format!("tools.deny entry '{r}'"),
            );
            return deny(
                tool,
                format!(
                    "tool '{tool}' is denied by {why} of profile '{}'",
                    policy.profile()
                ),
            );
        }
        ToolDecision::Ask => {
            return Judgement {
                tool: tool.to_string(),
                verdict: Verdict::Ask {
                    reason: format!("tool '{tool}' is in no list and tools.default = \"ask\""),
                },
                touches: Vec::new(),
                denial: None,
                sandbox_command: None,
            };
        }
        ToolDecision::Allow(_) => {}
        _ => return deny(tool, "unknown tool decision"),
    }
    let Some(args) = input.tool_input.as_ref() else {
        return deny(
            tool,
            format!("the call to '{tool}' has no tool_input; refusing what cannot be judged"),
        );
    };
    let cwd = input.cwd.as_deref().filter(|c| c.starts_with('/'));
    let requests = match requests_for(tool, args, policy, cwd) {
        Ok(r) => r,
        Err(verdict) => {
            return Judgement {
                tool: tool.to_string(),
                verdict,
                touches: Vec::new(),
                denial: None,
                sandbox_command: None,
            };
        }
    };
    let mut touches = Vec::new();
    let mut resolver = PathResolver::new();
    let home = policy.variables().get("HOME").unwrap_or("/nonexistent");
    for (field, written, access) in requests {
        if written.contains('\0') {
            return deny(tool, format!("{field} contains a NUL byte"));
        }
        // A raw `~` means the home directory, as the tool that expands it will take it (Claude Code
        // expands it before the hook; other callers may not).
        let target = expand_tilde(&written, home);
        let base = match (Path::new(&target).is_absolute(), cwd) {
            (true, _) => Path::new("/"),
            (false, Some(c)) => Path::new(c),
            (false, None) => {
                return deny(
                    tool,
                    format!(
                        "{field} '{written}' is relative and the input has no absolute cwd to resolve it against"
                    ),
                );
            }
        };
        let resolved = AbsPath::new(Path::new(&target), base).and_then(|a| {
            // An operation on an entry itself (rm, mv, ls -l of a symlink) is judged where the entry
            // is: its directory resolved, its own name kept.
            match (
                field == ENTRY_FIELD,
                a.as_path().parent(),
                a.as_path().file_name(),
            ) {
                (true, Some(parent), Some(name)) => resolver
                    .resolve(parent)
                    .map(|p| CanonicalPath::assume_canonical(p.as_path().join(name))),
                _ => resolver.resolve(a.as_path()),
            }
        });
        let path = match resolved {
            Ok(p) => p,
            Err(e) => return deny(tool, format!("{field} '{written}' cannot be resolved: {e}")),
        };
        // Bash names what the programs it runs touch (the kernel's view); every other tool is the agent's
        // own file access, to which `runtime` paths are closed.
        let decision = if tool == "Bash" {
            policy.decide(&path, access)
        } else {
            policy.decide_for_tools(&path, access)
        };
        if field_is_private_tmp(tool, policy, &path, decision) {
            continue;
        }
        let denial = policy.denial(&path, access, decision);
        let reason = denial
            .as_ref()
            .map(|d| format!("{tool} {field} '{written}': {d}"));
        let recursive_dir =
            (field == RECURSIVE_FIELD && path.exists()).then(|| path.as_path().to_path_buf());
        touches.push(Touch {
            field,
            written,
            path,
            access,
            decision,
        });
        let (Some(d), Some(reason)) = (denial, reason) else {
            if let Some(dir) = &recursive_dir
                && let Some(verdict) = judge_beneath(policy, &mut resolver, tool, dir, access)
            {
                return Judgement {
                    tool: tool.to_string(),
                    verdict,
                    touches,
                    denial: None,
                    sandbox_command: None,
                };
            }
            continue;
        };
        return Judgement {
            tool: tool.to_string(),
            verdict: Verdict::Deny { reason },
            touches,
            denial: Some(d),
            sandbox_command: None,
        };
    }
    let sandbox_command = (tool == "Bash" && policy.hook().bash == BashMode::Sandbox)
        .then(|| {
            args.get("command")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .flatten();
    let reason = match (touches.len(), &sandbox_command) {
        (_, Some(_)) => format!(
            "Bash runs under `stockade run` with profile '{}' (hook.bash = \"sandbox\"): the kernel enforces it",
            policy.profile()
        ),
        (0, None) => format!("tool '{tool}' is allowed by profile '{}'", policy.profile()),
        (n, None) => format!(
            "all {n} path(s) of this {tool} call are within profile '{}'",
            policy.profile()
        ),
    };
    Judgement {
        tool: tool.to_string(),
        verdict: Verdict::Allow { reason },
        touches,
        denial: None,
        sandbox_command,
    }
}

type Request = (String, String, Access);

/// A recursive Bash operand: every entry beneath `dir`, and where each symlink there leads, must allow
/// `access`. `None` when it does; otherwise the refusal (or, past [`MAX_RECURSIVE_ENTRIES`], the policy's
/// answer for what cannot be judged).
fn judge_beneath(
    policy: &ResolvedPolicy,
    resolver: &mut PathResolver,
    tool: &str,
    dir: &Path,
    access: Access,
) -> Option<Verdict> {
    let mut stack = vec![dir.to_path_buf()];
    let mut seen = 0usize;
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > MAX_RECURSIVE_ENTRIES {
                let reason = format!(
                    "this Bash command recurses into '{}', which holds more than {MAX_RECURSIVE_ENTRIES} entries to judge; run it sandboxed (hook.bash = \"sandbox\") or narrow it",
                    dir.display()
                );
                return Some(match policy.on_unknowable() {
                    OnUnknowable::Ask => Verdict::Ask { reason },
                    OnUnknowable::Deny | _ => Verdict::Deny { reason },
                });
            }
            let path = e.path();
            let is_link = e.file_type().is_ok_and(|t| t.is_symlink());
            let judged = if is_link {
                // Recursive tools that follow symlinks (grep -R, cp -L, tar -h) reach the target.
                match resolver.resolve(&path) {
                    Ok(target) => target,
                    Err(_) => continue,
                }
            } else {
                CanonicalPath::assume_canonical(path.clone())
            };
            let decision = policy.decide(&judged, access);
            if let Some(d) = policy.denial(&judged, access, decision) {
                return Some(Verdict::Deny {
                    reason: format!(
                        "{tool} recurses into '{}' and would reach '{}': {d}",
                        dir.display(),
                        path.display()
                    ),
                });
            }
            if !is_link && e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            }
        }
    }
    None
}

/// Sandboxed Bash gets a private `/tmp` and `/var/tmp` where the policy grants nothing there
/// ([`ResolvedPolicy::private_tmp_dirs`]): a path in them names the run's own empty directory, not the
/// host's, so the pre-filter has nothing to refuse.
fn field_is_private_tmp(
    tool: &str,
    policy: &ResolvedPolicy,
    path: &CanonicalPath,
    decision: Decision,
) -> bool {
    tool == "Bash"
        && policy.hook().bash == BashMode::Sandbox
        && decision.level() == stockade_policy::Level::None
        && policy
            .private_tmp_dirs()
            .any(|t| path.as_path().starts_with(t))
}

/// The paths a call names, by tool. `Err` is a verdict reached without paths (Bash, malformed input).
fn requests_for(
    tool: &str,
    args: &Value,
    policy: &ResolvedPolicy,
    cwd: Option<&str>,
) -> Result<Vec<Request>, Verdict> {
    let field = |name: &str| args.get(name).and_then(Value::as_str).map(str::to_string);
    let required = |name: &str, access: Access| -> Result<Vec<Request>, Verdict> {
        match field(name) {
            Some(p) if !p.is_empty() => Ok(vec![(name.to_string(), p, access)]),
            _ => Err(Verdict::Deny {
                reason: format!("{tool} call without a {name}; refusing what cannot be judged"),
            }),
        }
    };
    // A missing or empty `path` means the call's working directory.
    let dir_or_cwd = |name: &str| -> Request {
        (
            name.to_string(),
            field(name)
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| ".".to_string()),
            Access::Read,
        )
    };
    match tool {
        "Read" => required("file_path", Access::Read),
        "NotebookRead" => required("notebook_path", Access::Read),
        "Write" | "Edit" | "MultiEdit" => required("file_path", Access::Write),
        "NotebookEdit" => required("notebook_path", Access::Write),
        "LS" => Ok(vec![dir_or_cwd("path")]),
        // Glob's `pattern` and Grep's `glob` are judged at their fixed leading part, under `path`.
        "Glob" | "Grep" => {
            let key = if tool == "Glob" { "pattern" } else { "glob" };
            let base = dir_or_cwd("path");
            let mut out = vec![base.clone()];
            if let Some(pattern) = field(key) {
                out.push((
                    key.to_string(),
                    join_literal_prefix(&base.1, &pattern),
                    Access::Read,
                ));
            }
            Ok(out)
        }
        "Bash" => bash(args, policy, cwd),
        "WebFetch" | "WebSearch" | "TodoWrite" | "Task" | "ExitPlanMode" | "AskUserQuestion"
        | "BashOutput" | "KillShell" => Ok(Vec::new()),
        _ => Ok(path_keys(tool, args)),
    }
}

/// A glob's fixed leading part, joined to its base: `../../etc/*.conf` under `/w` is judged at `/etc`
/// (after resolution), `/etc/**` at `/etc`, `src/**/*.rs` at `<base>/src`.
fn join_literal_prefix(base: &str, pattern: &str) -> String {
    let mut prefix = PathBuf::new();
    if pattern.starts_with('/') {
        prefix.push("/");
    }
    for part in pattern.split('/').filter(|p| !p.is_empty()) {
        if part.contains(['*', '?', '[', '{']) {
            break;
        }
        prefix.push(part);
    }
    let joined = match (prefix.is_absolute(), prefix.as_os_str().is_empty()) {
        (true, _) => prefix,
        (false, true) => PathBuf::from(base),
        (false, false) => Path::new(base).join(prefix),
    };
    joined.to_string_lossy().into_owned()
}

/// Bash: the paths the parsed command names, or the policy's `hook.on-unknowable` answer when something in
/// it decides at run time what is touched.
fn bash(args: &Value, policy: &ResolvedPolicy, cwd: Option<&str>) -> Result<Vec<Request>, Verdict> {
    let Some(command) = args.get("command").and_then(Value::as_str) else {
        return Err(Verdict::Deny {
            reason: "Bash call without a command; refusing what cannot be judged".into(),
        });
    };
    let home = policy.variables().get("HOME").unwrap_or("/nonexistent");
    match crate::bash::analyze(command, cwd, home, policy.commands_allow()) {
        BashAnalysis::Paths {
            mut paths,
            recursive,
        } => {
            // What a recursive command reaches beneath a directory is walked only in judge mode: in
            // sandbox mode the kernel stops it, and the pre-filter must stay fast.
            if policy.hook().bash == BashMode::Judge {
                paths.extend(
                    recursive
                        .into_iter()
                        .map(|(_, path, access)| (RECURSIVE_FIELD.to_string(), path, access)),
                );
            }
            Ok(paths)
        }
        // Sandboxed Bash: what parsing cannot see, the kernel enforces.
        BashAnalysis::Unknowable(_) if policy.hook().bash == BashMode::Sandbox => Ok(Vec::new()),
        BashAnalysis::Unknowable(why) => {
            let reason = format!(
                "this Bash command cannot be judged before it runs: {why}. Rewrite it with literal paths, run it \
                 under `stockade run` (the kernel enforces the same policy), or set hook.on-unknowable = \"ask\""
            );
            match policy.on_unknowable() {
                OnUnknowable::Ask => Err(Verdict::Ask { reason }),
                OnUnknowable::Deny | _ => Err(Verdict::Deny { reason }),
            }
        }
    }
}

/// Arguments named like paths, at the top level of the call (strings, or arrays of strings).
fn path_keys(tool: &str, args: &Value) -> Vec<Request> {
    let lower = tool.to_ascii_lowercase();
    let access = if WRITING_WORDS.iter().any(|w| lower.contains(w)) {
        Access::Write
    } else {
        Access::Read
    };
    let Some(map) = args.as_object() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for key in PATH_KEYS {
        match map.get(*key) {
            Some(Value::String(s)) if !s.is_empty() => {
                out.push(((*key).to_string(), s.clone(), access))
            }
            Some(Value::Array(items)) => {
                for s in items
                    .iter()
                    .filter_map(Value::as_str)
                    .filter(|s| !s.is_empty())
                {
                    out.push(((*key).to_string(), s.to_string(), access));
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_prefixes() {
        assert_eq!(join_literal_prefix("/w", "src/**/*.rs"), "/w/src");
        assert_eq!(
            join_literal_prefix("/w", "../../etc/*.conf"),
            "/w/../../etc"
        );
        assert_eq!(join_literal_prefix("/w", "/etc/**"), "/etc");
        assert_eq!(join_literal_prefix("/w", "**/*.ts"), "/w");
    }
}
