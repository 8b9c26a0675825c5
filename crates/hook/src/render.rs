//! The answer, in Claude Code's wire format.

use serde_json::json;

use crate::input::Event;
use crate::judge::{Judgement, Verdict};

/// What the hook prints and how it exits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// JSON for Claude Code (may be empty).
    pub stdout: String,
    /// The reason, for a deny.
    pub stderr: String,
    /// 0 or 2, nothing else.
    pub exit_code: u8,
}

/// Renders a judgement for the event that asked.
///
/// `PreToolUse`: `permissionDecision` allow (exit 0), ask (exit 0) or deny (reason on stderr, exit 2: the
/// only code that blocks in every version). `PermissionRequest`: `decision.behavior` allow or deny with a
/// message (exit 0); for ask, nothing, so Claude Code shows its prompt.
///
/// `defer_allow` (`hook.on-allow = "defer"`) answers nothing for an allow, so Claude Code's own rules decide.
/// `updated_input` replaces the call's whole input through `updatedInput` (`hook.bash = "sandbox"`: the
/// original fields with the command rewritten).
pub fn render(
    event: Event,
    judgement: &Judgement,
    defer_allow: bool,
    updated_input: Option<&serde_json::Value>,
) -> Rendered {
    let reason = judgement.verdict.reason();
    if let (Event::PreToolUse, Verdict::Allow { .. }, Some(input)) =
        (event, &judgement.verdict, updated_input)
    {
        return Rendered {
            stdout: json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                "permissionDecisionReason": reason, "updatedInput": input}})
            .to_string(),
            stderr: String::new(),
            exit_code: 0,
        };
    }
    if defer_allow && matches!(judgement.verdict, Verdict::Allow { .. }) {
        return Rendered {
            stdout: String::new(),
            stderr: String::new(),
            exit_code: 0,
        };
    }
    match (event, &judgement.verdict) {
        (Event::PermissionRequest, Verdict::Allow { .. }) => Rendered {
            stdout: json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}).to_string(),
            stderr: String::new(),
            exit_code: 0,
        },
        (Event::PermissionRequest, Verdict::Deny { .. }) => Rendered {
            stdout: json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": reason}}}).to_string(),
            stderr: format!("stockade: {reason}\n"),
            exit_code: 0,
        },
        (Event::PermissionRequest, _) => Rendered { stdout: String::new(), stderr: String::new(), exit_code: 0 },
        (_, Verdict::Deny { .. }) => render_failure(reason),
        (_, Verdict::Allow { .. }) => pre_tool_use("allow", reason, 0),
        (_, _) => pre_tool_use("ask", reason, 0),
    }
}

fn pre_tool_use(decision: &str, reason: &str, exit_code: u8) -> Rendered {
    Rendered {
        stdout: json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": decision, "permissionDecisionReason": reason}}).to_string(),
        stderr: if exit_code == 2 { format!("stockade: {reason}\n") } else { String::new() },
        exit_code,
    }
}

/// A `PreToolUse` deny with exit 2: for refusals, and for every failure to judge (bad input, no policy,
/// a panic), whatever the event.
pub fn render_failure(reason: &str) -> Rendered {
    pre_tool_use("deny", reason, 2)
}
