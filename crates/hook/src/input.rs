//! The hook's input, as Claude Code sends it.

use serde::Deserialize;

/// One hook call. Every field is optional: Claude Code versions differ, and the hook must still answer.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct HookInput {
    /// The session.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The transcript file.
    #[serde(default)]
    pub transcript_path: Option<String>,
    /// The working directory relative paths resolve against.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Claude Code's permission mode.
    #[serde(default)]
    pub permission_mode: Option<String>,
    /// `PreToolUse` or `PermissionRequest`.
    #[serde(default)]
    pub hook_event_name: Option<String>,
    /// `Read`, `Bash`, `mcp__server__tool`, ...
    #[serde(default)]
    pub tool_name: Option<String>,
    /// The tool's arguments.
    #[serde(default)]
    pub tool_input: Option<serde_json::Value>,
    /// The tool call's id.
    #[serde(default)]
    pub tool_use_id: Option<String>,
}

/// The events the hook answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// Before a tool runs: allow, deny or ask.
    PreToolUse,
    /// A permission prompt is about to be shown: allow or deny in its place.
    PermissionRequest,
}

impl HookInput {
    /// The event; anything unknown is treated as `PreToolUse`, whose deny blocks in every version.
    pub fn event(&self) -> Event {
        match self.hook_event_name.as_deref() {
            Some("PermissionRequest") => Event::PermissionRequest,
            _ => Event::PreToolUse,
        }
    }
}
