#![deny(clippy::wildcard_enum_match_arm, clippy::indexing_slicing)]
//! The one policy model every stockade layer asks.
//!
//! A policy says what an agent may read and write (filesystem scopes), which environment it gets, which
//! tools it may call, whether it has network, and its resource limits. This crate loads it (TOML; built-in
//! profiles in the same shape), expands variables, resolves paths as the kernel would, and decides
//! `(path, access)`. It is pure: it starts no process and applies no Landlock rule. The enforcement layers
//! (the sandbox, the hook, the file tools) ask the same [`ResolvedPolicy`], so they never disagree.
//!
//! # Example
//!
//! ```
//! use stockade_policy::{Access, CanonicalPath, PolicyBuilder, Variables};
//!
//! let tmp = std::env::temp_dir();
//! let mut vars = Variables::default();
//! vars.set_path("CWD", &tmp).set_path("HOME", "/nonexistent-home");
//! let policy = PolicyBuilder::new(vars)
//!     .policy_text("[profile.p]\nfs.write = [\"work\"]\nfs.deny = [\"work/**/.env\"]\n", tmp.join("agent.toml"))
//!     .build()?;
//! let ok = CanonicalPath::resolve(&tmp.join("work/src/main.rs"))?;
//! assert!(policy.decide(&ok, Access::Write).is_allow());
//! let secret = CanonicalPath::resolve(&tmp.join("work/app/.env"))?;
//! assert!(!policy.decide(&secret, Access::Read).is_allow());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Semantics
//!
//! Kinds of scope: `read`, `write` (implies read), `read-only` (readable, never writable) and `deny`. A
//! scope is a path (covering everything beneath it) or a glob (`*` never crosses `/`, `**` does); relative
//! scopes are relative to the profile's `base`. [`ResolvedPolicy::decide`] documents the three-step order.
//! Paths are compared by whole components after [`CanonicalPath`] resolution, never as strings.
//!
//! # Security model
//!
//! Trusted: the policy file and the caller's variables. Untrusted: every path an agent names. This crate
//! guarantees that a decision is made on the path the kernel would reach *at resolution time*. It does not
//! guarantee that the filesystem stays that way; enforcement layers must open beneath a handle or leave
//! the final word to the kernel. Built-in profiles deny known secrets (`~/.ssh`, `~/.aws`, `/etc/shadow`, …)
//! and stockade's own policy, state and settings, and keep files that something outside the sandbox will
//! later trust (`.git/hooks`, `.git/config`, `.claude/`, `.mcp.json`, shell rc files) read-only. Whatever
//! the profile, the policy file itself and every file a gateway reads its key from (`env-file`) are
//! denied by implicit rules no grant or flag lifts, so every layer refuses them.
//!
//! # Limitations
//!
//! A glob grant can only be enforced by the kernel for matches that exist when the sandbox starts; `explain`
//! says so for every decision it makes through a glob. Hard links are judged by the path used, as the
//! kernel's path-based rules are.

mod builtin;
mod decide;
mod error;
mod file;
mod net;
mod path;
mod resolve;
mod scope;
mod units;
mod vars;

pub use builtin::{
    BUILTIN_PROFILES, BUILTIN_TOML, DEFAULT_PROFILE, PRIVATE_TMP_DIRS, SYSTEM_READ_DIRS,
    SYSTEM_SECRETS, system_run_profile,
};
pub use decide::{Decision, Denial, DenyCause, ExplainedRule, Explanation};
pub use error::PolicyError;
pub use file::{
    BashMode, CommandsSpec, EnvSpec, FsSpec, GatewaySpec, HookSpec, LimitsSpec, NetMode,
    NetRulesSpec, NetSpec, OnAllow, OnUnknowable, PolicyFile, ProfileSpec, SecretSpec, ToolDefault,
    ToolsSpec, policy_schema,
};
pub use net::{
    GATEWAY_PATH, Gateway, GatewayHeader, HostPattern, HostRule, NetAccess, NetDecision, NetRules,
    SpecialAddress, canonical_ip, normalize_host, special_address,
};
pub use path::{AbsPath, CanonicalPath, PathResolver};
pub use resolve::{
    HookRules, Limits, LimitsOverride, PolicyBuilder, ResolvedEnv, ResolvedPolicy, ToolDecision,
    ToolRules, is_glob_component, is_literal_path, wildcard_match,
};
pub use scope::{
    Access, GlobTarget, Level, PathTarget, RuleId, RuleSource, Scope, ScopeKind, ScopeTarget,
};
pub use units::{parse_duration, parse_size};
pub use vars::{KNOWN_VARIABLES, Variables, read_env_file};

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
