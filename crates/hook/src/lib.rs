//! The Claude Code hook: for one tool call, find every path it would touch, decide each with the same
//! resolved policy `stockade run` enforces, and answer in Claude Code's wire format.
//!
//! ```
//! use stockade_hook::{HookInput, judge, Verdict};
//! use stockade_policy::{PolicyBuilder, Variables};
//!
//! let dir = tempfile::tempdir()?;
//! let root = dir.path().canonicalize()?;
//! let mut vars = Variables::default();
//! vars.set_path("CWD", &root).set_path("HOME", "/nonexistent");
//! let policy = PolicyBuilder::new(vars).build()?;
//! let input: HookInput = serde_json::from_str(&format!(
//!     r#"{{"hook_event_name":"PreToolUse","cwd":"{}","tool_name":"Read","tool_input":{{"file_path":"/etc/shadow"}}}}"#,
//!     root.display()
//! ))?;
//! assert!(matches!(judge(&policy, &input).verdict, Verdict::Deny { .. }));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Wire format
//!
//! Input (stdin): `session_id, transcript_path, cwd, permission_mode, hook_event_name, tool_name, tool_input,
//! tool_use_id`; unknown fields are ignored, missing ones handled (a missing `cwd` makes relative paths
//! unjudgeable, so they are refused). Output, see [`render()`]: for `PreToolUse`,
//! `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow|deny|ask",
//! "permissionDecisionReason":"..."}}`; a deny also writes the reason to stderr and exits 2. For
//! `PermissionRequest`, `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":
//! "allow|deny","message":"..."}}}` with exit 0 (and no output for "ask": Claude Code prompts as usual).
//!
//! # Security model
//!
//! The agent is hostile: every field of the input is untrusted. The hook fails closed: unparsable input,
//! empty stdin, a missing `tool_input`, a policy that does not load, or a panic all end in a deny and exit 2
//! (the only exit code that blocks in every Claude Code version). Paths are resolved as the kernel would
//! ([`stockade_policy::CanonicalPath`]), so `..`, symlinks and prefixes such as `a1` vs `a10` are judged on
//! where they lead. The hook is a courtesy that explains early; the boundary is the OS sandbox.
//!
//! # Limitations
//!
//! Bash is parsed with brush-parser and every word that may name a path is judged (see the `bash` module
//! for which words, and which are writes); what only the run decides (substitutions, variables beyond
//! `$HOME` and `$PWD`, `eval`) gets the policy's `hook.on-unknowable` answer, deny by default. Which
//! arguments a program treats as paths is a heuristic: an argument is judged as a path whether or not
//! the program opens it, so the hook can refuse more than the kernel would, never less. MCP tools are judged on the arguments
//! whose names say they are paths ([`PATH_KEYS`]), as writes when the tool's name says it changes things.

#![deny(clippy::wildcard_enum_match_arm, clippy::indexing_slicing)]

mod bash;
mod input;
mod judge;
mod render;

pub use input::{Event, HookInput};
pub use judge::{Judgement, PATH_KEYS, Touch, Verdict, judge};
pub use render::{Rendered, render, render_failure};
