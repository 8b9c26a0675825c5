//! The policy file as written: the normative TOML shape of DESIGN.md, deserialised strictly.
//!
//! Unknown keys are errors (`deny_unknown_fields`), so a typo such as `fs.raed` never silently grants or
//! loses anything. Each scope string keeps its byte span so errors and `explain` can name `file:line`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toml::Spanned;

/// A whole policy file: named profiles under `[profile.NAME]`.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "stockade policy")]
pub struct PolicyFile {
    /// Named profiles; pick one with `--profile NAME` or `--agent ID` (which picks `[profile.ID]` if present).
    #[serde(default)]
    pub profile: BTreeMap<String, ProfileSpec>,
}

/// One profile. Built-in profiles have the same shape.
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ProfileSpec {
    /// Another profile (in this file or built in) whose rules this one starts from.
    pub extends: Option<String>,
    /// What relative scopes are relative to; default `${POLICY_DIR}` for files, `${CWD}` for built-ins.
    pub base: Option<String>,
    /// Filesystem scopes.
    #[serde(default)]
    pub fs: FsSpec,
    /// Environment of the confined process.
    #[serde(default)]
    pub env: EnvSpec,
    /// Claude Code tool names (and `mcp__` patterns) the agent may call.
    #[serde(default)]
    pub tools: ToolsSpec,
    /// Bash commands the hook lets through whole.
    #[serde(default)]
    pub commands: CommandsSpec,
    /// Hook behaviour.
    #[serde(default)]
    pub hook: HookSpec,
    /// Network: `"none"` (default), `"all"`, or a table of hosts (`allow`, `deny`) reached through the
    /// proxy stockade serves into the sandbox.
    pub net: Option<NetSpec>,
    /// API gateways by name: a local endpoint inside the sandbox that reaches an upstream HTTPS API with
    /// headers (keys) the supervisor adds, so the key never enters the sandbox.
    #[serde(default)]
    pub gateway: BTreeMap<String, GatewaySpec>,
    /// Resource limits.
    #[serde(default)]
    pub limits: LimitsSpec,
}

/// Filesystem scopes: each entry a path (covers everything beneath) or a glob (`*` stays in one component,
/// `**` crosses them).
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FsSpec {
    /// Readable (and executable).
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub read: Vec<Spanned<String>>,
    /// Readable and writable.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub write: Vec<Spanned<String>>,
    /// Readable, never writable, even inside a writable tree.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub read_only: Vec<Spanned<String>>,
    /// Readable by the programs the agent runs (the kernel sandbox), not by the agent's own file tools
    /// (the hook, `stockade fs`, the MCP server): system directories and toolchains. Paths, not globs.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub runtime: Vec<Spanned<String>>,
    /// Package caches (`~/.npm`, `~/.cache/pip`): the programs the agent runs read the host's copy and
    /// write a private overlay of it, discarded with the run (or kept per agent with `--persist-caches`),
    /// so installs work without changing the host's cache. The agent's own file tools may read them.
    /// Directories, not globs.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub cache: Vec<Spanned<String>>,
    /// Neither readable nor writable, even inside a granted tree.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub deny: Vec<Spanned<String>>,
    /// Other projects' content: denied like `deny` (by the kernel too), and refusals tell the agent to
    /// read it through `stockade quarantine`, which returns only checked references.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub cross_project: Vec<Spanned<String>>,
}

/// The environment: nothing from the caller passes unless listed.
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct EnvSpec {
    /// Names copied from the caller's environment when set there.
    #[serde(default)]
    pub pass: Vec<String>,
    /// Variables set to these values (which may use `${VAR}`).
    #[serde(default)]
    pub set: BTreeMap<String, String>,
}

/// Tool permissions for agent-level layers (the hook, quarantine).
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ToolsSpec {
    /// Tool names or `*` patterns allowed.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Tool names or `*` patterns denied; deny wins over allow.
    #[serde(default)]
    pub deny: Vec<String>,
    /// What a tool in neither list gets; default `allow` (the filesystem rules still apply).
    pub default: Option<ToolDefault>,
}

/// The answer for a tool in neither list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ToolDefault {
    /// Let it run (path rules still apply).
    Allow,
    /// Refuse it.
    Deny,
    /// Ask the user.
    Ask,
}

/// Commands the hook lets through whole.
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CommandsSpec {
    /// Command names (first word of a simple command), e.g. `ib`.
    #[serde(default)]
    pub allow: Vec<String>,
}

/// Hook behaviour.
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct HookSpec {
    /// What to answer for Bash that cannot be judged statically: `deny` (default) or `ask`.
    pub on_unknowable: Option<OnUnknowable>,
    /// What to answer for calls within the policy: `allow` (default: no permission prompt) or `defer`
    /// (say nothing, so Claude Code's own permission rules decide).
    pub on_allow: Option<OnAllow>,
    /// How Bash is handled: `sandbox` (default: judge what the command names, then rewrite it to run under
    /// `stockade run` with the same policy, so the kernel enforces what parsing cannot see; unknowable
    /// commands run confined instead of being refused) or `judge` (parse and judge only: opt-in, since a
    /// parser cannot see scripts, substitutions or what programs do; see the README's list).
    pub bash: Option<BashMode>,
}

/// The answer for tool calls within the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum OnAllow {
    /// An explicit allow: the call proceeds without a prompt.
    Allow,
    /// No answer: Claude Code's own rules decide.
    Defer,
}

/// How the hook handles Bash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum BashMode {
    /// Parse the command and judge every path it names.
    Judge,
    /// Judge, then run it under `stockade run` with the same policy (via `updatedInput`).
    Sandbox,
}

/// The answer for Bash that cannot be judged statically.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum OnUnknowable {
    /// Refuse, saying why.
    Deny,
    /// Ask the user.
    Ask,
}

/// Network access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum NetMode {
    /// No network at all (a fresh network namespace with only loopback).
    None,
    /// The host's network.
    All,
}

/// One API gateway: requests to `http://127.0.0.1:3128/gateway/NAME/...` inside the sandbox go to
/// `UPSTREAM/...` over TLS, with `headers` set by the supervisor.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GatewaySpec {
    /// The upstream base URL: `https://host[:port][/path]`.
    pub upstream: String,
    /// Variables set inside to the gateway's local base URL (e.g. `ANTHROPIC_BASE_URL`).
    #[serde(default)]
    pub url_env: Vec<String>,
    /// Headers set on every request (replacing any the program sent), by name: where each value comes
    /// from, read once when the run starts.
    #[serde(default)]
    pub headers: BTreeMap<String, SecretSpec>,
    /// Variables set inside to a placeholder, for clients that will not start without a key.
    #[serde(default)]
    pub placeholder_env: Vec<String>,
}

/// Where a gateway header's value comes from: a variable of the supervisor's environment, or of a
/// `K=V` file (`env-file`), never the policy itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SecretSpec {
    /// The variable's name.
    pub env: String,
    /// Read the variable from this file (`K=V` lines) instead of the environment; variables such as
    /// `${HOME}` are expanded, and a relative path is relative to the profile's `base`. The file is
    /// denied in every layer, whatever the profile grants: the key must not be readable inside.
    pub env_file: Option<String>,
    /// The value around the secret, with `{}` where it goes (e.g. `"Bearer {}"`); default the secret alone.
    pub format: Option<String>,
}

/// A profile's `net`: a mode, or the hosts its proxy lets through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum NetSpec {
    /// `"none"` or `"all"`.
    Mode(NetMode),
    /// `[net] allow = [...]`, `deny = [...]`.
    Rules(NetRulesSpec),
}

/// Host rules as written: `example.com`, `*.example.com` (subdomains), an IP address, each with an optional
/// `:port`. `deny` wins; a host no `allow` rule matches is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetRulesSpec {
    /// Hosts the program may reach (through the proxy).
    #[serde(default)]
    pub allow: Vec<String>,
    /// Hosts refused even where `allow` matches.
    #[serde(default)]
    pub deny: Vec<String>,
}

// By hand rather than `untagged`, so that a typo inside the table (`alow`) is reported as such, not as "did
// not match any variant".
impl<'de> Deserialize<'de> for NetSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = NetSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(r#""none", "all", or a table with `allow` and `deny` lists"#)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<NetSpec, E> {
                match v {
                    "none" => Ok(NetSpec::Mode(NetMode::None)),
                    "all" => Ok(NetSpec::Mode(NetMode::All)),
                    other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
                }
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<NetSpec, A::Error> {
                NetRulesSpec::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(NetSpec::Rules)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// Resource limits; each optional.
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LimitsSpec {
    /// Wall-clock limit, e.g. `30m`; exit code 124 when reached.
    pub timeout: Option<String>,
    /// Memory per process (data segment), e.g. `4GiB`.
    pub memory: Option<String>,
    /// Processes and threads, e.g. `512`.
    pub pids: Option<u64>,
    /// Bytes of stdout and of stderr each, e.g. `16MiB`.
    pub output: Option<String>,
    /// Largest file the agent may write, e.g. `1GiB`.
    pub file_size: Option<String>,
}

/// The JSON Schema of the policy file, for editors (`stockade schema policy`).
pub fn policy_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(PolicyFile)).unwrap_or(serde_json::Value::Null)
}
