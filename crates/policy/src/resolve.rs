//! From a policy file (or a built-in profile) plus flags to one immutable [`ResolvedPolicy`].

use std::collections::{BTreeMap, HashMap};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Serialize;
use toml::Spanned;

use crate::builtin::{BUILTIN_PROFILES, BUILTIN_TOML, DEFAULT_PROFILE, builtin_text_for};
use crate::error::PolicyError;
use crate::file::{
    BashMode, NetMode, NetSpec, OnAllow, OnUnknowable, PolicyFile, ProfileSpec, ToolDefault,
};
use crate::net::{Gateway, HostRule, NetAccess, NetRules};
use crate::path::{AbsPath, CanonicalPath, LstatCache, PathMap, PathResolver};
use crate::scope::{GlobTarget, PathTarget, RuleId, RuleSource, Scope, ScopeKind, ScopeTarget};
use crate::units::{parse_duration, parse_size};
use crate::vars::Variables;

/// Builds a [`ResolvedPolicy`]. Nothing is read from disk until [`PolicyBuilder::build`].
#[derive(Debug, Clone, Default)]
pub struct PolicyBuilder {
    vars: Variables,
    file: Option<PathBuf>,
    text: Option<(String, PathBuf)>,
    profile: Option<String>,
    agent: Option<String>,
    flags: Vec<(ScopeKind, String, &'static str)>,
    env_set: Vec<(String, String)>,
    env_pass: Vec<String>,
    net: Option<NetMode>,
    net_allow: Vec<String>,
    net_deny: Vec<String>,
    limits: LimitsOverride,
}

/// A profile's (or the command line's) `net` over what came before: a mode replaces everything; rules
/// extend an allowlist inherited through `extends`, or start one.
fn apply_net(current: NetAccess, spec: &NetSpec) -> Result<NetAccess, PolicyError> {
    match spec {
        NetSpec::Mode(NetMode::None) => Ok(NetAccess::None),
        NetSpec::Mode(NetMode::All) => Ok(NetAccess::All),
        NetSpec::Rules(r) => {
            let mut rules = match current {
                NetAccess::Filtered(rules) => rules,
                NetAccess::None | NetAccess::All => NetRules::default(),
            };
            for text in &r.allow {
                rules.allow.push(HostRule::parse(text)?);
            }
            for text in &r.deny {
                rules.deny.push(HostRule::parse(text)?);
            }
            Ok(NetAccess::Filtered(rules))
        }
    }
}

/// Limits given on the command line; each replaces the profile's value.
#[derive(Debug, Clone, Default)]
pub struct LimitsOverride {
    /// `--timeout`.
    pub timeout: Option<Duration>,
    /// `--memory`.
    pub memory: Option<u64>,
    /// `--pids`.
    pub pids: Option<u64>,
    /// `--max-output`.
    pub output: Option<u64>,
    /// `--max-file-size`.
    pub file_size: Option<u64>,
}

impl PolicyBuilder {
    /// Starts from variable values; `CWD` and `HOME` must be set, `TEMP_DIR` should be.
    pub fn new(vars: Variables) -> Self {
        PolicyBuilder {
            vars,
            ..PolicyBuilder::default()
        }
    }

    /// Loads profiles from this TOML file (default: built-ins only).
    pub fn policy_file(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.file = Some(path.into());
        self
    }

    /// Uses this TOML text as if read from `origin` (tests, embedded policies).
    pub fn policy_text(
        &mut self,
        text: impl Into<String>,
        origin: impl Into<PathBuf>,
    ) -> &mut Self {
        self.text = Some((text.into(), origin.into()));
        self
    }

    /// Picks a profile by name (default: `[profile.<agent>]` if present, else `default`, else the only
    /// profile of the file, else `workspace-write`).
    pub fn profile(&mut self, name: impl Into<String>) -> &mut Self {
        self.profile = Some(name.into());
        self
    }

    /// Sets `${AGENT_ID}` and prefers `[profile.<id>]`.
    pub fn agent(&mut self, id: impl Into<String>) -> &mut Self {
        let id = id.into();
        self.vars.set("AGENT_ID", id.clone());
        self.agent = Some(id);
        self
    }

    /// Adds a scope from a command-line flag (`--rw`, `--ro`, `--read-only`, `--deny`); relative to `${CWD}`.
    pub fn flag_scope(
        &mut self,
        kind: ScopeKind,
        path: impl Into<String>,
        flag: &'static str,
    ) -> &mut Self {
        self.flags.push((kind, path.into(), flag));
        self
    }

    /// Sets an environment variable for the confined process.
    pub fn env_set(&mut self, name: impl Into<String>, value: impl Into<String>) -> &mut Self {
        self.env_set.push((name.into(), value.into()));
        self
    }

    /// Passes a variable from the caller's environment.
    pub fn env_pass(&mut self, name: impl Into<String>) -> &mut Self {
        self.env_pass.push(name.into());
        self
    }

    /// Replaces the profile's network mode.
    pub fn net(&mut self, net: NetMode) -> &mut Self {
        self.net = Some(net);
        self
    }

    /// Adds a host the proxy lets through (`--net-allow`): the network becomes the profile's allowlist
    /// (empty if it had none) plus this rule.
    pub fn net_allow(&mut self, rule: impl Into<String>) -> &mut Self {
        self.net_allow.push(rule.into());
        self
    }

    /// Adds a host the proxy refuses (`--net-deny`), as [`PolicyBuilder::net_allow`] does.
    pub fn net_deny(&mut self, rule: impl Into<String>) -> &mut Self {
        self.net_deny.push(rule.into());
        self
    }

    /// Replaces limits given here.
    pub fn limits(&mut self, limits: LimitsOverride) -> &mut Self {
        self.limits = limits;
        self
    }

    /// Reads, expands, canonicalises and validates; the result is immutable.
    pub fn build(&self) -> Result<ResolvedPolicy, PolicyError> {
        self.build_with(&mut PathResolver::new())
    }

    /// [`PolicyBuilder::build`], resolving paths with `resolver`: a caller that has just resolved the
    /// paths it is about to grant (the quarantine's input files) does not have them examined twice.
    pub fn build_with(&self, resolver: &mut PathResolver) -> Result<ResolvedPolicy, PolicyError> {
        let user = match (&self.text, &self.file) {
            (Some((text, origin)), _) => Some(Source::parse(text.clone(), Some(origin.clone()))?),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
                    path: path.clone(),
                    source,
                })?;
                Some(Source::parse(text, Some(path.clone()))?)
            }
            (None, None) => None,
        };
        let mut vars = self.vars.clone();
        if let Some(origin) = user.as_ref().and_then(|u| u.origin.as_ref()) {
            let dir = origin.parent().unwrap_or(Path::new("/"));
            let dir = absolute(dir, &vars)?;
            vars.set_path("POLICY_DIR", dir);
        }
        let name = self.pick_profile(user.as_ref())?;
        // The built-ins are parsed only when the chain reaches them, and then only the profiles it
        // reaches: a hook call per tool use should not pay for profiles it does not use.
        let builtin = match builtin_entry(&name, user.as_ref()) {
            Some(entry) => {
                let text = match entry {
                    BuiltinEntry::Profile(profile) => builtin_text_for(profile),
                    BuiltinEntry::Loop => None,
                };
                Source::parse(text.unwrap_or_else(|| BUILTIN_TOML.to_string()), None)?
            }
            None => Source {
                origin: None,
                file: PolicyFile::default(),
                newlines: Vec::new(),
            },
        };
        let chain = profile_chain(&name, user.as_ref(), &builtin)?;

        let mut scopes = Vec::new();
        let cache = resolver.cache();
        let mut env = ResolvedEnv::default();
        let mut tools = ToolRules::default();
        let mut commands_allow = Vec::new();
        let mut hook = HookRules::default();
        let mut net = NetAccess::None;
        let mut gateways: std::collections::BTreeMap<String, Gateway> = Default::default();
        let mut limits = Limits::default();

        for link in &chain {
            let source = if link.builtin {
                &builtin
            } else {
                user.as_ref().unwrap_or(&builtin)
            };
            let spec = link.spec;
            let default_base = if link.builtin || source.origin.is_none() {
                "${CWD}"
            } else {
                "${POLICY_DIR}"
            };
            let base_text = spec.base.as_deref().unwrap_or(default_base);
            let here = source.location(&link.name, 0, link.builtin);
            let base = vars
                .expand(base_text)
                .map_err(|m| PolicyError::invalid(&here, m, "fix `base`"))?;
            let base = canonical_dir(Path::new(&base), &here)?;
            let first = scopes.len();
            for (kind, list) in [
                (ScopeKind::Read, &spec.fs.read),
                (ScopeKind::Write, &spec.fs.write),
                (ScopeKind::ReadOnly, &spec.fs.read_only),
                (ScopeKind::Runtime, &spec.fs.runtime),
                (ScopeKind::Cache, &spec.fs.cache),
                (ScopeKind::Deny, &spec.fs.deny),
                (ScopeKind::Deny, &spec.fs.cross_project),
            ] {
                let cross_project = std::ptr::eq(list, &spec.fs.cross_project);
                for item in list {
                    let line = source.line_of(item);
                    let rule = if link.builtin {
                        RuleSource::Builtin {
                            profile: link.name.clone(),
                            line,
                        }
                    } else {
                        RuleSource::File {
                            path: source.origin.clone().unwrap_or_default(),
                            line,
                            profile: link.name.clone(),
                        }
                    };
                    scopes.push(make_scope(kind, item.get_ref(), &base, &vars, rule, cache)?);
                    if cross_project && let Some(scope) = scopes.last_mut() {
                        scope.cross_project = true;
                    }
                }
            }
            if let Some(later) = scopes.get(first..) {
                check_contradictions(later)?;
            }
            env.pass.extend(spec.env.pass.iter().cloned());
            for (k, v) in &spec.env.set {
                let value = vars.expand(v).map_err(|m| {
                    PolicyError::invalid(&here, format!("env.set.{k}: {m}"), "fix the value")
                })?;
                check_env_name(k, &here)?;
                env.set.insert(k.clone(), value);
            }
            tools.allow.extend(spec.tools.allow.iter().cloned());
            tools.deny.extend(spec.tools.deny.iter().cloned());
            if let Some(d) = spec.tools.default {
                tools.default = d;
            }
            commands_allow.extend(spec.commands.allow.iter().cloned());
            if let Some(o) = spec.hook.on_unknowable {
                hook.on_unknowable = o;
            }
            if let Some(o) = spec.hook.on_allow {
                hook.on_allow = o;
            }
            if let Some(b) = spec.hook.bash {
                hook.bash = b;
            }
            if let Some(n) = &spec.net {
                net = apply_net(net, n)?;
            }
            for (name, g) in &spec.gateway {
                let mut gateway = Gateway::parse(name, g, |t| vars.expand(t))?;
                // A relative env-file is relative to the profile's base, like every path in it. Made
                // absolute here, once, so that the file the supervisor reads the key from and the file
                // every layer denies (below) are the same path.
                for header in &mut gateway.headers {
                    if let Some(file) = header.env_file.as_mut() {
                        *file = base.join(&*file);
                    }
                }
                gateways.insert(name.clone(), gateway);
            }
            limits.apply(&spec.limits, &here)?;
        }
        for name in env
            .pass
            .iter()
            .chain(tools.allow.iter())
            .chain(tools.deny.iter())
        {
            if name.is_empty() {
                return Err(PolicyError::invalid(
                    source_label(user.as_ref()),
                    "an empty name in env.pass or tools",
                    "remove the empty string",
                ));
            }
        }
        for name in &env.pass {
            check_env_name(name, &format!("profile {name}"))?;
        }
        if let Some(both) = tools.allow.iter().find(|t| tools.deny.contains(t)) {
            return Err(PolicyError::invalid(
                format!("profile {name}"),
                format!("tool '{both}' is both allowed and denied"),
                "keep it in one of tools.allow and tools.deny",
            ));
        }

        // Flags: relative to the caller's CWD.
        let cwd = vars
            .get("CWD")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/"));
        let cwd = canonical_dir(&cwd, "${CWD}")?;
        let flag_start = scopes.len();
        for (kind, text, flag) in &self.flags {
            let rule = RuleSource::Flag {
                flag: (*flag).to_string(),
            };
            scopes.push(make_scope(*kind, text, &cwd, &vars, rule, cache)?);
        }
        // Implicit: what the sandbox always provides.
        let mut implicit = |kind, path: &str, what: &str| -> Result<(), PolicyError> {
            let rule = RuleSource::Implicit {
                what: what.to_string(),
            };
            scopes.push(make_scope(kind, path, &cwd, &vars, rule, cache)?);
            Ok(())
        };
        if let Some(temp) = vars.get("TEMP_DIR").map(str::to_string) {
            implicit(
                ScopeKind::Write,
                &temp,
                "the run's private temp dir ($TEMP_DIR)",
            )?;
        }
        for dev in ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"] {
            implicit(ScopeKind::Write, dev, "a standard device")?;
        }
        for dev in ["/dev/random", "/dev/urandom"] {
            implicit(ScopeKind::Read, dev, "a standard device")?;
        }
        implicit(
            ScopeKind::Write,
            "/dev/shm",
            "the run's private shared memory",
        )?;
        implicit(
            ScopeKind::Read,
            "/proc",
            "the run's own /proc (its PID namespace only)",
        )?;
        if let Some(file) = user.as_ref().and_then(|u| u.origin.as_ref()) {
            let file = absolute(file, &vars)?;
            implicit(
                ScopeKind::Deny,
                &file.to_string_lossy(),
                "stockade's own policy file",
            )?;
        }
        // Issue 30: a gateway exists so that its key never enters the sandbox, yet the file it reads the
        // key from (`env-file`) usually sits in a tree the profile grants (`~/.config/keys.env` under the
        // `$HOME` that workspace-write, claude-code and codex read; a `.env` in the project they write).
        // Denied here, once, every layer refuses it: the kernel sandbox, the hook, the file tools, and
        // `explain` names this rule. A deny of a file is the deepest path scope there can be, and a tie
        // goes to the strictest, so no grant in a profile or a flag lifts it.
        for gateway in gateways.values() {
            for header in &gateway.headers {
                if let Some(file) = &header.env_file {
                    let rule = RuleSource::Implicit {
                        what: format!(
                            "the key file of gateway '{}' (header '{}')",
                            gateway.name, header.name
                        ),
                    };
                    scopes.push(literal_scope(ScopeKind::Deny, file, rule, cache)?);
                }
            }
        }

        for (k, v) in &self.env_set {
            check_env_name(k, "--env")?;
            env.set.insert(k.clone(), v.clone());
        }
        env.pass.extend(self.env_pass.iter().cloned());
        env.pass.sort();
        env.pass.dedup();
        if let Some(n) = self.net {
            if n == NetMode::All && !(self.net_allow.is_empty() && self.net_deny.is_empty()) {
                return Err(PolicyError::invalid(
                    "--net",
                    "--net opens the whole network, so --net-allow and --net-deny would do nothing",
                    "drop --net to reach only the hosts --net-allow names",
                ));
            }
            net = apply_net(net, &NetSpec::Mode(n))?;
        }
        if !(self.net_allow.is_empty() && self.net_deny.is_empty()) {
            net = apply_net(
                net,
                &NetSpec::Rules(crate::file::NetRulesSpec {
                    allow: self.net_allow.clone(),
                    deny: self.net_deny.clone(),
                }),
            )?;
        }
        limits.override_with(&self.limits);
        // A gateway is served on the proxy's port, inside a private network namespace.
        if !gateways.is_empty() {
            net = match net {
                NetAccess::None => NetAccess::Filtered(NetRules::default()),
                NetAccess::All => {
                    return Err(PolicyError::invalid(
                        format!("profile '{name}'"),
                        "a gateway needs the sandbox's private network (net = \"none\" or an allowlist), \
                         but net is \"all\"",
                        "drop net = \"all\" (or --net) and allow the hosts the program needs",
                    ));
                }
                filtered @ NetAccess::Filtered(_) => filtered,
            };
        }

        let policy = ResolvedPolicy::index(
            name,
            scopes,
            env,
            tools,
            commands_allow,
            hook,
            (net, gateways.into_values().collect()),
            limits,
            vars,
        )?;
        policy.check_flags_effective(flag_start)?;
        Ok(policy)
    }

    fn pick_profile(&self, user: Option<&Source>) -> Result<String, PolicyError> {
        if let Some(p) = &self.profile {
            return Ok(p.clone());
        }
        let Some(user) = user else {
            return Ok(DEFAULT_PROFILE.to_string());
        };
        if let Some(agent) = &self.agent
            && user.file.profile.contains_key(agent)
        {
            return Ok(agent.clone());
        }
        if user.file.profile.contains_key("default") {
            return Ok("default".to_string());
        }
        let mut names = user.file.profile.keys();
        match (names.next(), names.next()) {
            (Some(only), None) => Ok(only.clone()),
            (None, _) => Ok(DEFAULT_PROFILE.to_string()),
            (Some(_), Some(_)) => Err(PolicyError::invalid(
                user.origin
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                format!(
                    "the file has several profiles ({}) and none is named 'default'",
                    user.file
                        .profile
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "pass --profile NAME",
            )),
        }
    }
}

fn source_label(user: Option<&Source>) -> String {
    user.and_then(|u| u.origin.as_ref())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "policy".to_string())
}

fn check_env_name(name: &str, location: &str) -> Result<(), PolicyError> {
    if name.is_empty() || name.contains('=') || name.contains('\0') {
        return Err(PolicyError::invalid(
            location,
            format!("'{name}' is not a valid environment variable name"),
            "use a name without '=' or NUL",
        ));
    }
    Ok(())
}

fn absolute(path: &Path, vars: &Variables) -> Result<PathBuf, PolicyError> {
    let cwd = vars.get("CWD").unwrap_or("/");
    AbsPath::new(path, Path::new(cwd))
        .map(|p| p.as_path().to_path_buf())
        .map_err(|source| PolicyError::Resolve {
            location: "policy".into(),
            path: path.to_path_buf(),
            source,
        })
}

fn canonical_dir(path: &Path, location: &str) -> Result<PathBuf, PolicyError> {
    let abs = AbsPath::new(path, Path::new("/")).map_err(|source| PolicyError::Resolve {
        location: location.to_string(),
        path: path.to_path_buf(),
        source,
    })?;
    abs.canonicalize()
        .map(CanonicalPath::into_path_buf)
        .map_err(|source| PolicyError::Resolve {
            location: location.to_string(),
            path: path.to_path_buf(),
            source,
        })
}

fn is_glob(text: &str) -> bool {
    text.contains(['*', '?', '[', '{'])
}

/// The characters a glob gives a meaning to, which a literal put into a pattern escapes.
const GLOB_SPECIAL: [char; 7] = ['*', '?', '[', ']', '{', '}', '\\'];

/// `text` with its glob characters escaped: in a pattern it matches exactly itself.
fn escape_glob(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if GLOB_SPECIAL.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Whether one component of a pattern matches more than its own text: a glob character that is not
/// escaped.
pub fn is_glob_component(part: &str) -> bool {
    let mut chars = part.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '*' | '?' | '[' | '{' => return true,
            _ => {}
        }
    }
    false
}

/// A literal component of a pattern as the name it matches (escapes dropped).
fn unescape_glob(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    let mut chars = part.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// Whether a policy written by stockade itself can name this path as it is: no `${` (a variable) and no
/// glob character, closing brackets included (so nothing is read as a pattern however it is quoted).
pub fn is_literal_path(text: &str) -> bool {
    !text.contains("${") && !text.contains(['*', '?', '[', ']', '{', '}'])
}

fn make_scope(
    kind: ScopeKind,
    written: &str,
    base: &Path,
    vars: &Variables,
    source: RuleSource,
    cache: &mut LstatCache,
) -> Result<Scope, PolicyError> {
    if written.is_empty() {
        return Err(PolicyError::invalid(
            &source,
            format!("empty path in fs.{}", kind.key()),
            "remove the empty string or write a path",
        ));
    }
    let expanded = vars
        .expand(written)
        .map_err(|m| PolicyError::invalid(&source, m, "fix the path"))?;
    // A glob is what the policy's own text makes one; a variable's value (a project in `p[1]`, an
    // agent id) is always literal.
    let outside_variables = vars
        .expand_with(written, |_| String::new())
        .map_err(|m| PolicyError::invalid(&source, m, "fix the path"))?;
    if expanded.contains('\0') {
        return Err(PolicyError::invalid(
            &source,
            "path contains a NUL byte",
            "remove it",
        ));
    }
    let target = if is_glob(&outside_variables) {
        let expanded = vars
            .expand_with(written, escape_glob)
            .map_err(|m| PolicyError::invalid(&source, m, "fix the path"))?;
        if matches!(kind, ScopeKind::Runtime | ScopeKind::Cache) {
            return Err(PolicyError::invalid(
                &source,
                format!("fs.{kind} takes paths, and '{written}' is a glob"),
                "name the directory instead (runtime is for system and toolchain trees, cache for package caches)",
            ));
        }
        // The policy's own text: a value (`--project ../p`) names a directory, whatever its spelling.
        if outside_variables.split('/').any(|c| c == "..") {
            return Err(PolicyError::invalid(
                &source,
                format!("glob '{written}' contains '..'"),
                "write the glob without '..' (relative globs start at the profile's base)",
            ));
        }
        let pattern = if expanded.starts_with('/') {
            expanded.clone()
        } else {
            format!(
                "{}/{}",
                escape_glob(&base.to_string_lossy()),
                expanded.trim_start_matches("./")
            )
        };
        let pattern = pattern.trim_end_matches('/').to_string();
        // A one-name glob (`dir/prefix*suffix`, nothing else special) is always well formed, and matched
        // by hand: compiling it would be wasted.
        let matcher = match crate::scope::OneNameGlob::parse(&pattern) {
            Some(one) => crate::scope::GlobMatch::OneName(one),
            None => crate::scope::GlobMatch::Full(
                GlobBuilder::new(&pattern)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .map_err(|e| {
                        PolicyError::invalid(
                            &source,
                            format!("bad glob '{written}': {}", e.kind()),
                            "fix the glob syntax",
                        )
                    })?
                    .compile_matcher(),
            ),
        };
        let mut prefix = PathBuf::from("/");
        for part in pattern.split('/').filter(|c| !c.is_empty()) {
            if is_glob_component(part) {
                break;
            }
            prefix.push(unescape_glob(part));
        }
        // The prefix may run into the last literal component (a file): walks start at its parent then.
        ScopeTarget::Glob(GlobTarget {
            pattern,
            prefix: CanonicalPath::resolve_cached(&prefix, cache)
                .map(CanonicalPath::into_path_buf)
                .unwrap_or(prefix),
            matcher,
        })
    } else {
        let dir_hint = expanded.ends_with('/') && expanded.len() > 1;
        let abs = AbsPath::new(Path::new(&expanded), base).map_err(|e| {
            PolicyError::invalid(
                &source,
                format!("bad path '{written}': {e}"),
                "fix the path",
            )
        })?;
        path_target(abs, dir_hint, cache)?
    };
    Ok(Scope {
        cross_project: false,
        kind,
        target,
        written: written.to_string(),
        source,
    })
}

/// A scope on exactly this absolute path, taken as it is: no variable is expanded and no character makes
/// it a glob (a key file named `keys[1].env` is that file), as a path stockade itself adds must be.
fn literal_scope(
    kind: ScopeKind,
    path: &Path,
    source: RuleSource,
    cache: &mut LstatCache,
) -> Result<Scope, PolicyError> {
    let abs = AbsPath::new(path, Path::new("/")).map_err(|e| {
        PolicyError::invalid(
            &source,
            format!("bad path '{}': {e}", path.display()),
            "fix the path",
        )
    })?;
    Ok(Scope {
        cross_project: false,
        kind,
        target: path_target(abs, false, cache)?,
        written: path.to_string_lossy().into_owned(),
        source,
    })
}

fn path_target(
    abs: AbsPath,
    dir_hint: bool,
    cache: &mut LstatCache,
) -> Result<ScopeTarget, PolicyError> {
    let canonical = CanonicalPath::resolve_cached(abs.as_path(), cache).map_err(|source| {
        PolicyError::Resolve {
            location: source.to_string(),
            path: abs.as_path().to_path_buf(),
            source,
        }
    })?;
    let is_dir = cache.was_dir(canonical.as_path());
    Ok(ScopeTarget::Path(PathTarget {
        abs,
        canonical,
        dir_hint,
        is_dir,
    }))
}

/// One profile may not say two different things about the same path or glob.
fn check_contradictions(scopes: &[Scope]) -> Result<(), PolicyError> {
    let mut seen: HashMap<String, &Scope> = HashMap::new();
    for scope in scopes {
        let key = match &scope.target {
            ScopeTarget::Path(p) => p.canonical.as_path().to_string_lossy().into_owned(),
            ScopeTarget::Glob(g) => format!("glob:{}", g.pattern),
        };
        if let Some(other) = seen.get(&key)
            && other.kind != scope.kind
        {
            return Err(PolicyError::invalid(
                &scope.source,
                format!(
                    "'{}' is listed as fs.{} here and as fs.{} at {}",
                    scope.written, scope.kind, other.kind, other.source
                ),
                "keep one of the two entries",
            ));
        }
        seen.insert(key, scope);
    }
    Ok(())
}

struct Source {
    origin: Option<PathBuf>,
    file: PolicyFile,
    /// Offset of every `\n` in the text: each rule's line is looked up, not counted from the start (a
    /// policy listing hundreds of paths would otherwise be scanned hundreds of times).
    newlines: Vec<usize>,
}

impl Source {
    fn parse(text: String, origin: Option<PathBuf>) -> Result<Self, PolicyError> {
        let newlines: Vec<usize> = text
            .bytes()
            .enumerate()
            .filter_map(|(i, b)| (b == b'\n').then_some(i))
            .collect();
        let file: PolicyFile = toml::from_str(&text).map_err(|e| {
            let line = e.span().map_or(1, |s| line_at(&newlines, s.start));
            let name = origin
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "built-in profiles".into());
            PolicyError::Syntax {
                location: format!("{name}:{line}"),
                message: e.message().trim().to_string(),
            }
        })?;
        Ok(Source {
            origin,
            file,
            newlines,
        })
    }

    fn line_of<T>(&self, item: &Spanned<T>) -> usize {
        line_at(&self.newlines, item.span().start)
    }

    fn location(&self, profile: &str, line: usize, builtin: bool) -> String {
        match (&self.origin, builtin) {
            (Some(path), false) => format!("{} [profile.{profile}]", path.display()),
            _ => format!(
                "built-in profile {profile}{}",
                if line > 0 {
                    format!(" (line {line})")
                } else {
                    String::new()
                }
            ),
        }
    }
}

/// The 1-based line holding byte `offset`, given the offset of every `\n`.
fn line_at(newlines: &[usize], offset: usize) -> usize {
    newlines.partition_point(|&n| n < offset) + 1
}

/// Where a profile's chain reaches the built-in profiles.
enum BuiltinEntry<'a> {
    /// At this profile: the first of the chain that the user's file does not define, or one that
    /// extends its own name.
    Profile(&'a str),
    /// Nowhere that was found: the file's chain is longer than any real one (a loop). The whole built-in
    /// text is parsed, and the resolution reports the loop.
    Loop,
}

/// Where resolving `name` reaches the built-in profiles; `None` when its chain stays in the user's file.
fn builtin_entry<'a>(name: &'a str, user: Option<&'a Source>) -> Option<BuiltinEntry<'a>> {
    let Some(user) = user else {
        return Some(BuiltinEntry::Profile(name));
    };
    let mut current = name;
    for _ in 0..64 {
        let Some(spec) = user.file.profile.get(current) else {
            return Some(BuiltinEntry::Profile(current));
        };
        match spec.extends.as_deref() {
            None => return None,
            // A user profile that extends its own name means the built-in of that name.
            Some(parent) if parent == current => return Some(BuiltinEntry::Profile(current)),
            Some(parent) => current = parent,
        }
    }
    Some(BuiltinEntry::Loop)
}

struct ChainLink<'a> {
    name: String,
    builtin: bool,
    spec: &'a ProfileSpec,
}

/// The profile and everything it extends, root first.
fn profile_chain<'a>(
    name: &str,
    user: Option<&'a Source>,
    builtin: &'a Source,
) -> Result<Vec<ChainLink<'a>>, PolicyError> {
    let mut chain: Vec<ChainLink<'a>> = Vec::new();
    let mut next = Some((name.to_string(), false));
    while let Some((current, force_builtin)) = next.take() {
        let from_user = if force_builtin {
            None
        } else {
            user.and_then(|u| u.file.profile.get(&current))
        };
        let (spec, is_builtin) = match from_user {
            Some(spec) => (spec, false),
            None => match builtin.file.profile.get(&current) {
                Some(spec) => (spec, true),
                None => {
                    let mut available: Vec<String> =
                        BUILTIN_PROFILES.iter().map(|s| s.to_string()).collect();
                    if let Some(u) = user {
                        available.extend(u.file.profile.keys().cloned());
                    }
                    return Err(PolicyError::UnknownProfile {
                        name: current,
                        where_: match user.and_then(|u| u.origin.as_ref()) {
                            Some(p) => format!("not in {} nor built in", p.display()),
                            None => "not built in; pass --policy FILE for your own".into(),
                        },
                        available: available.join(", "),
                    });
                }
            },
        };
        if chain
            .iter()
            .any(|l| l.name == current && l.builtin == is_builtin)
        {
            let mut names: Vec<&str> = chain.iter().map(|l| l.name.as_str()).collect();
            names.push(&current);
            return Err(PolicyError::ExtendsCycle {
                name: name.to_string(),
                chain: names.join(" -> "),
            });
        }
        if let Some(parent) = &spec.extends {
            // A user profile that extends its own name means the built-in of that name.
            next = Some((parent.clone(), !is_builtin && parent == &current));
        }
        chain.push(ChainLink {
            name: current,
            builtin: is_builtin,
            spec,
        });
    }
    chain.reverse();
    Ok(chain)
}

/// The environment of the confined process.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ResolvedEnv {
    /// Names copied from the caller when set there.
    pub pass: Vec<String>,
    /// Names set to values.
    pub set: BTreeMap<String, String>,
}

/// Tool permissions.
#[derive(Debug, Clone, Serialize)]
pub struct ToolRules {
    /// Allowed names or `*` patterns.
    pub allow: Vec<String>,
    /// Denied names or patterns; deny wins.
    pub deny: Vec<String>,
    /// For tools in neither list.
    pub default: ToolDefault,
}

impl Default for ToolRules {
    fn default() -> Self {
        ToolRules {
            allow: Vec::new(),
            deny: Vec::new(),
            default: ToolDefault::Allow,
        }
    }
}

/// The answer for one tool name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum ToolDecision {
    /// Allowed, by this pattern (or the default when `None`).
    Allow(Option<String>),
    /// Denied, by this pattern (or the default when `None`).
    Deny(Option<String>),
    /// Ask the user (the default says so).
    Ask,
}

impl ToolRules {
    /// Deny patterns first, then allow patterns, then the default.
    pub fn decide(&self, tool: &str) -> ToolDecision {
        if let Some(p) = self.deny.iter().find(|p| wildcard_match(p, tool)) {
            return ToolDecision::Deny(Some(p.clone()));
        }
        if let Some(p) = self.allow.iter().find(|p| wildcard_match(p, tool)) {
            return ToolDecision::Allow(Some(p.clone()));
        }
        match self.default {
            ToolDefault::Allow => ToolDecision::Allow(None),
            ToolDefault::Deny => ToolDecision::Deny(None),
            ToolDefault::Ask => ToolDecision::Ask,
        }
    }
}

/// `*` matches any run of characters (including none); everything else is literal.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = rest.get(i + part.len()..).unwrap_or(""),
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The hook's behaviour.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct HookRules {
    /// For Bash that cannot be judged.
    pub on_unknowable: OnUnknowable,
    /// For calls within the policy.
    pub on_allow: OnAllow,
    /// Judge Bash, or also run it sandboxed.
    pub bash: BashMode,
}

impl Default for HookRules {
    fn default() -> Self {
        HookRules {
            on_unknowable: OnUnknowable::Deny,
            on_allow: OnAllow::Allow,
            // The kernel is the boundary for Bash: the parser only refuses early.
            bash: BashMode::Sandbox,
        }
    }
}

/// Resource limits, each optional.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Limits {
    /// Wall clock.
    pub timeout: Option<Duration>,
    /// Bytes of data segment per process.
    pub memory: Option<u64>,
    /// Processes and threads.
    pub pids: Option<u64>,
    /// Bytes of stdout and of stderr each.
    pub output: Option<u64>,
    /// Largest file the agent may write.
    pub file_size: Option<u64>,
}

impl Limits {
    fn apply(&mut self, spec: &crate::file::LimitsSpec, location: &str) -> Result<(), PolicyError> {
        let bad = |key: &str, m: String| {
            PolicyError::invalid(location, format!("limits.{key}: {m}"), "fix the value")
        };
        if let Some(t) = &spec.timeout {
            self.timeout = Some(parse_duration(t).map_err(|m| bad("timeout", m))?);
        }
        if let Some(m) = &spec.memory {
            self.memory = Some(parse_size(m).map_err(|e| bad("memory", e))?);
        }
        if let Some(p) = spec.pids {
            if p == 0 {
                return Err(bad("pids", "must be at least 1".into()));
            }
            self.pids = Some(p);
        }
        if let Some(o) = &spec.output {
            self.output = Some(parse_size(o).map_err(|e| bad("output", e))?);
        }
        if let Some(f) = &spec.file_size {
            self.file_size = Some(parse_size(f).map_err(|e| bad("file-size", e))?);
        }
        Ok(())
    }

    fn override_with(&mut self, o: &LimitsOverride) {
        self.timeout = o.timeout.or(self.timeout);
        self.memory = o.memory.or(self.memory);
        self.pids = o.pids.or(self.pids);
        self.output = o.output.or(self.output);
        self.file_size = o.file_size.or(self.file_size);
    }
}

/// A policy resolved once and shared (by `Arc`) by every layer that enforces it.
#[derive(Debug, Clone)]
pub struct ResolvedPolicy {
    pub(crate) profile: String,
    pub(crate) scopes: Vec<Scope>,
    /// Canonical path bytes -> the strictest path scope written for exactly that path.
    pub(crate) path_index: PathMap<Box<[u8]>, RuleId>,
    pub(crate) globs: [GlobGroup; 4],
    pub(crate) env: ResolvedEnv,
    pub(crate) tools: ToolRules,
    pub(crate) commands_allow: Vec<String>,
    pub(crate) hook: HookRules,
    pub(crate) net: NetAccess,
    pub(crate) gateways: Vec<Gateway>,
    pub(crate) limits: Limits,
    pub(crate) vars: Variables,
}

/// All glob scopes of one kind: the one-name globs matched by hand, the rest compiled into one set.
#[derive(Debug, Clone)]
pub(crate) struct GlobGroup {
    pub(crate) set: GlobSet,
    pub(crate) ids: Vec<RuleId>,
    pub(crate) one_name: Vec<(RuleId, crate::scope::OneNameGlob)>,
}

impl GlobGroup {
    fn new(scopes: &[Scope], kind: ScopeKind) -> Result<Self, PolicyError> {
        let mut builder = GlobSetBuilder::new();
        let mut ids = Vec::new();
        let mut one_name = Vec::new();
        for (i, scope) in scopes.iter().enumerate() {
            let (ScopeTarget::Glob(g), true) = (&scope.target, scope.kind == kind) else {
                continue;
            };
            if let crate::scope::GlobMatch::OneName(one) = &g.matcher {
                one_name.push((RuleId(i), one.clone()));
                continue;
            }
            let glob = GlobBuilder::new(&g.pattern)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| PolicyError::invalid(&scope.source, e.to_string(), "fix the glob"))?;
            builder.add(glob);
            ids.push(RuleId(i));
        }
        let set = if ids.is_empty() {
            GlobSet::empty()
        } else {
            builder
                .build()
                .map_err(|e| PolicyError::invalid("policy", e.to_string(), "fix the globs"))?
        };
        Ok(GlobGroup { set, ids, one_name })
    }
}

impl ResolvedPolicy {
    #[allow(
        clippy::too_many_arguments,
        reason = "one private constructor fed by build()"
    )]
    fn index(
        profile: String,
        scopes: Vec<Scope>,
        env: ResolvedEnv,
        tools: ToolRules,
        commands_allow: Vec<String>,
        hook: HookRules,
        (net, gateways): (NetAccess, Vec<Gateway>),
        limits: Limits,
        vars: Variables,
    ) -> Result<Self, PolicyError> {
        let mut path_index: PathMap<Box<[u8]>, RuleId> = PathMap::default();
        for (i, scope) in scopes.iter().enumerate() {
            if let ScopeTarget::Path(p) = &scope.target {
                let key: Box<[u8]> = p.canonical.as_path().as_os_str().as_bytes().into();
                let stricter = match path_index.get(&key).and_then(|id| scopes.get(id.0)) {
                    Some(existing) => scope.kind.strictness() > existing.kind.strictness(),
                    None => true,
                };
                if stricter {
                    path_index.insert(key, RuleId(i));
                }
            }
        }
        let globs = [
            GlobGroup::new(&scopes, ScopeKind::Read)?,
            GlobGroup::new(&scopes, ScopeKind::Write)?,
            GlobGroup::new(&scopes, ScopeKind::ReadOnly)?,
            GlobGroup::new(&scopes, ScopeKind::Deny)?,
        ];
        Ok(ResolvedPolicy {
            profile,
            scopes,
            path_index,
            globs,
            env,
            tools,
            commands_allow,
            hook,
            net,
            gateways,
            limits,
            vars,
        })
    }

    /// A grant flag that the profile overrides would silently do nothing: refuse it instead.
    fn check_flags_effective(&self, first_flag: usize) -> Result<(), PolicyError> {
        for scope in self.scopes.iter().skip(first_flag) {
            let (ScopeTarget::Path(p), true) = (&scope.target, scope.kind.is_grant()) else {
                continue;
            };
            if matches!(scope.source, RuleSource::Implicit { .. }) {
                continue;
            }
            let access = if scope.kind == ScopeKind::Write {
                crate::Access::Write
            } else {
                crate::Access::Read
            };
            let decision = self.decide(&p.canonical, access);
            if let crate::Decision::Deny {
                rule: Some(rule), ..
            } = decision
                && let Some(winner) = self.scope(rule)
            {
                return Err(PolicyError::invalid(
                    &scope.source,
                    format!(
                        "{} '{}' has no effect: {} wins",
                        scope.source,
                        scope.written,
                        winner.describe()
                    ),
                    "use a policy file whose profile does not deny it, or a deeper path",
                ));
            }
        }
        Ok(())
    }

    /// The profile's name.
    pub fn profile(&self) -> &str {
        &self.profile
    }

    /// Every scope, in the order written (profiles root first, then flags, then implicit ones).
    pub fn scopes(&self) -> &[Scope] {
        &self.scopes
    }

    /// One scope.
    pub fn scope(&self, id: RuleId) -> Option<&Scope> {
        self.scopes.get(id.0)
    }

    /// The environment rules.
    pub fn env(&self) -> &ResolvedEnv {
        &self.env
    }

    /// Tool rules.
    pub fn tools(&self) -> &ToolRules {
        &self.tools
    }

    /// Commands the hook lets through whole.
    pub fn commands_allow(&self) -> &[String] {
        &self.commands_allow
    }

    /// The answer for Bash that cannot be judged.
    pub fn on_unknowable(&self) -> OnUnknowable {
        self.hook.on_unknowable
    }

    /// Everything the hook's answers depend on besides the scopes.
    pub fn hook(&self) -> &HookRules {
        &self.hook
    }

    /// The shared temp directories ([`crate::PRIVATE_TMP_DIRS`]) a sandboxed run replaces with private,
    /// empty ones: those the policy neither grants nor grants anything in (a grant there is about the
    /// host's entries, which are then bound as granted instead). The sandbox's plan and the hook's
    /// pre-filter both ask this, so they agree on what `/tmp/x` in a Bash command means.
    pub fn private_tmp_dirs(&self) -> impl Iterator<Item = &'static Path> + '_ {
        crate::PRIVATE_TMP_DIRS.iter().map(Path::new).filter(|dir| {
            let canonical = CanonicalPath::assume_canonical(dir.to_path_buf());
            let granted_within = self.scopes.iter().any(|s| {
                s.kind.is_grant()
                    && match &s.target {
                        ScopeTarget::Path(p) => p.canonical.as_path().starts_with(dir),
                        // A glob from above may match inside, too.
                        ScopeTarget::Glob(g) => {
                            g.prefix.starts_with(dir) || dir.starts_with(&g.prefix)
                        }
                    }
            });
            !granted_within
                && self.decide(&canonical, crate::Access::Read).level() == crate::Level::None
        })
    }

    /// The network: none, all, or the hosts the proxy lets through.
    pub fn net(&self) -> &NetAccess {
        &self.net
    }

    /// The API gateways, by name.
    pub fn gateways(&self) -> &[Gateway] {
        &self.gateways
    }

    /// Limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The variables the policy was resolved with.
    pub fn variables(&self) -> &Variables {
        &self.vars
    }
}
