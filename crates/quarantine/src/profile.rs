//! The quarantined reader's tool profile (the seed's `CrossProjectProfile`), built in or loaded from JSON,
//! strictly validated.

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::QuarantineError;

/// What the quarantined reader may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CrossProjectProfile {
    /// The profile's name.
    pub name: String,
    /// Tools the reader may use (Claude Code names: `Read`, `Glob`, `Grep`, `WebFetch`).
    pub allowed_tools: Vec<String>,
    /// Tools it may not; `mcp__*` patterns cover every MCP server's tools.
    pub denied_tools: Vec<String>,
    /// Paths the reader may never read, even if listed as input (absolute, or starting with `~/`).
    pub denied_paths: Vec<String>,
}

impl CrossProjectProfile {
    /// The seed's built-in `cross-project` profile.
    pub fn builtin() -> CrossProjectProfile {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        CrossProjectProfile {
            name: "cross-project".to_string(),
            allowed_tools: names(&["Read", "Glob", "Grep", "WebFetch"]),
            denied_tools: names(&[
                "Bash",
                "Write",
                "Edit",
                "MultiEdit",
                "NotebookEdit",
                "mcp__*",
            ]),
            denied_paths: names(&["~/.claude/skills/CORE/USER/"]),
        }
    }

    /// Loads and validates a JSON profile.
    pub fn load(path: &Path) -> Result<CrossProjectProfile, QuarantineError> {
        let text = std::fs::read_to_string(path).map_err(|source| QuarantineError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        CrossProjectProfile::parse(&text, path)
    }

    /// Parses and validates JSON text read from `origin`.
    pub fn parse(text: &str, origin: &Path) -> Result<CrossProjectProfile, QuarantineError> {
        let profile: CrossProjectProfile =
            serde_json::from_str(text).map_err(|e| QuarantineError::Profile {
                path: origin.to_path_buf(),
                field: "(file)".to_string(),
                reason: format!("{e} (line {}, column {})", e.line(), e.column()),
            })?;
        profile.validate(origin)?;
        Ok(profile)
    }

    /// Every rule of R-001: names non-empty, no tool both allowed and denied, denied paths absolute.
    pub fn validate(&self, origin: &Path) -> Result<(), QuarantineError> {
        let fail = |field: String, reason: String| QuarantineError::Profile {
            path: origin.to_path_buf(),
            field,
            reason,
        };
        if self.name.trim().is_empty() {
            return Err(fail("name".into(), "is empty; name the profile".into()));
        }
        for (list, field) in [
            (&self.allowed_tools, "allowedTools"),
            (&self.denied_tools, "deniedTools"),
        ] {
            for (i, tool) in list.iter().enumerate() {
                if tool.trim().is_empty() || tool.trim() != tool {
                    return Err(fail(
                        format!("{field}[{i}]"),
                        format!("{tool:?} is not a tool name (empty or padded)"),
                    ));
                }
            }
        }
        for (i, tool) in self.allowed_tools.iter().enumerate() {
            if let Some(rule) = self
                .denied_tools
                .iter()
                .find(|d| stockade_policy::wildcard_match(d, tool))
            {
                return Err(fail(
                    format!("allowedTools[{i}]"),
                    format!(
                        "{tool:?} is also denied by deniedTools entry {rule:?}; keep it in one list"
                    ),
                ));
            }
        }
        for (i, path) in self.denied_paths.iter().enumerate() {
            if !(path.starts_with('/') || path.starts_with("~/")) {
                return Err(fail(
                    format!("deniedPaths[{i}]"),
                    format!("{path:?} is relative; write it absolute or starting with ~/"),
                ));
            }
        }
        Ok(())
    }

    /// Whether a tool is allowed: listed in `allowedTools` and matched by no `deniedTools` pattern.
    pub fn allows_tool(&self, tool: &str) -> bool {
        self.allowed_tools.iter().any(|t| t == tool)
            && !self
                .denied_tools
                .iter()
                .any(|d| stockade_policy::wildcard_match(d, tool))
    }
}

/// The JSON Schema of a profile (`stockade schema profile`).
pub fn profile_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(CrossProjectProfile)).unwrap_or_default()
}
