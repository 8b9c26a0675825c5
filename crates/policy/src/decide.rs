//! `(path, access) -> Decision`: the one place the scope algebra is implemented.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use globset::Candidate;
use serde::Serialize;

use crate::path::CanonicalPath;
use crate::resolve::ResolvedPolicy;
use crate::scope::{Access, Level, RuleId, RuleSource, ScopeKind, ScopeTarget};

/// The answer for one `(path, access)`. Cheap to produce; render a [`Denial`] with
/// [`ResolvedPolicy::denial`] when a refusal must be explained.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "kebab-case")]
pub enum Decision {
    /// Permitted; `rule` is the rule that set the level.
    Allow {
        /// The level the path has.
        level: Level,
        /// The deciding rule.
        rule: RuleId,
    },
    /// Refused; `rule` is the deciding rule, `None` for default deny.
    Deny {
        /// Why, in one word.
        cause: DenyCause,
        /// The level the path has (lower than the access needs).
        level: Level,
        /// The deciding rule.
        rule: Option<RuleId>,
    },
}

impl Decision {
    /// Whether the access is permitted.
    pub fn is_allow(&self) -> bool {
        matches!(self, Decision::Allow { .. })
    }

    /// The level the path has.
    pub fn level(&self) -> Level {
        match self {
            Decision::Allow { level, .. } | Decision::Deny { level, .. } => *level,
        }
    }

    /// The rule that decided (none for a path no rule covers).
    pub fn rule(&self) -> Option<RuleId> {
        match self {
            Decision::Allow { rule, .. } => Some(*rule),
            Decision::Deny { rule, .. } => *rule,
        }
    }
}

/// Why a path was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum DenyCause {
    /// No rule grants it (default deny).
    NotGranted,
    /// A `deny` path or glob covers it.
    Denied,
    /// Readable only: a `read` grant, or a `read-only` cap, for a write.
    ReadOnly,
    /// A `runtime` path: readable by the programs the agent runs, not by its own file tools
    /// ([`ResolvedPolicy::decide_for_tools`]).
    RuntimeOnly,
    /// A write to a `cache` path by the agent's own file tools: the programs it runs write a private
    /// copy, the file tools would change the host's ([`ResolvedPolicy::decide_for_tools`]).
    PrivateCache,
}

/// A refusal, explained: what, which rule, why, and what to change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Denial {
    /// The canonical path judged.
    pub path: PathBuf,
    /// The access refused.
    pub access: Access,
    /// The deciding rule, as written, or `None` for default deny.
    pub rule: Option<String>,
    /// Where that rule was written (`file:line`, built-in profile, flag).
    pub source: Option<RuleSource>,
    /// One sentence.
    pub reason: String,
    /// The change that would allow it.
    pub fix: String,
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (fix: {})", self.reason, self.fix)
    }
}

/// The glob groups, in the order `ResolvedPolicy::globs` holds them.
const READ_GRANTS: usize = 0;
const WRITE_GRANTS: usize = 1;
const READ_ONLY_CAPS: usize = 2;
const DENY_CAPS: usize = 3;

impl ResolvedPolicy {
    /// Decides `access` to `path`. Order-independent, in three steps:
    ///
    /// 1. Among the *path* scopes covering the path (the path itself or an ancestor, compared by whole
    ///    components), the deepest decides: `deny` gives nothing, `read` and `read-only` give read, `write`
    ///    gives write. At the same depth the strictest wins (deny > read-only > read > write). No path scope:
    ///    nothing (default deny).
    /// 2. *Glob* grants (`read`, `write`) that match raise the level, unless step 1 ended in an explicit
    ///    `deny` (no raise) or `read-only` (raise to read at most: read-only means never writable).
    /// 3. *Glob* caps that match lower it: `read-only` to read at most, `deny` to nothing. They always apply.
    pub fn decide(&self, path: &CanonicalPath, access: Access) -> Decision {
        let (level, rule, cause_if_none) = self.level_of(path.as_path());
        if level.permits(access) {
            // A permitting level always has a rule: the default is Level::None.
            if let Some(rule) = rule {
                return Decision::Allow { level, rule };
            }
        }
        let cause = match (level, access) {
            (Level::Read, Access::Write) => DenyCause::ReadOnly,
            _ => cause_if_none,
        };
        Decision::Deny { cause, level, rule }
    }

    /// Decides `access` to `path` for the agent's own file tools (the hook's Read, Write, Edit, Glob,
    /// Grep, LS and MCP file tools; `stockade fs`; the MCP server): as [`ResolvedPolicy::decide`], except
    /// that a path whose level a `runtime` scope decided is refused ([`DenyCause::RuntimeOnly`]), and one a
    /// `cache` scope decided is readable only ([`DenyCause::PrivateCache`]: the tools act on the host). The
    /// programs the agent runs (the kernel sandbox, and Bash as the hook judges it) use `decide`.
    pub fn decide_for_tools(&self, path: &CanonicalPath, access: Access) -> Decision {
        let decision = self.decide(path, access);
        let Some(rule) = decision.rule() else {
            return decision;
        };
        match self.scope(rule).map(|s| s.kind) {
            Some(ScopeKind::Runtime) => Decision::Deny {
                cause: DenyCause::RuntimeOnly,
                level: Level::None,
                rule: Some(rule),
            },
            Some(ScopeKind::Cache) if decision.level() == Level::Write => match access {
                Access::Read => Decision::Allow {
                    level: Level::Read,
                    rule,
                },
                Access::Write => Decision::Deny {
                    cause: DenyCause::PrivateCache,
                    level: Level::Read,
                    rule: Some(rule),
                },
            },
            _ => decision,
        }
    }

    /// The level step 1 alone gives a path: its deepest path scope, before any glob raises or lowers it.
    /// This is what everything beneath a directory inherits, so the sandbox binds a directory at this
    /// level (at most): a glob that matches the directory itself says nothing about its contents.
    pub fn path_scope_level(&self, path: &CanonicalPath) -> Level {
        self.deepest_path_scope(path.as_path())
            .and_then(|id| self.scopes.get(id.0))
            .map_or(Level::None, |s| s.kind.level())
    }

    /// Step 1: the deepest path scope covering `path`, walking ancestors by whole components.
    fn deepest_path_scope(&self, path: &Path) -> Option<RuleId> {
        let bytes = path.as_os_str().as_bytes();
        let mut end = bytes.len();
        loop {
            let prefix = bytes.get(..end).unwrap_or(b"/");
            if let Some(id) = self.path_index.get(prefix) {
                return Some(*id);
            }
            if end <= 1 {
                return None;
            }
            end = match prefix.iter().rposition(|b| *b == b'/') {
                Some(0) => 1,
                Some(i) => i,
                None => return None,
            };
        }
    }

    /// The level of a canonical path and the rule that set it.
    fn level_of(&self, path: &Path) -> (Level, Option<RuleId>, DenyCause) {
        let hit = self.deepest_path_scope(path);
        let kind = hit.and_then(|id| self.scopes.get(id.0)).map(|s| s.kind);
        let mut level = kind.map(ScopeKind::level).unwrap_or(Level::None);
        let mut rule = hit;
        let mut cause = if kind == Some(ScopeKind::Deny) {
            DenyCause::Denied
        } else {
            DenyCause::NotGranted
        };

        let any_glob = self
            .globs
            .iter()
            .any(|g| !g.ids.is_empty() || !g.one_name.is_empty());
        if !any_glob {
            return (level, rule, cause);
        }
        // Only compiled globs need a candidate (one-name globs are matched on the path itself): making
        // one costs a basename search, whose first use detects CPU features, on every decision.
        let candidate = self
            .globs
            .iter()
            .any(|g| !g.ids.is_empty())
            .then(|| Candidate::new(path));
        // Step 2: glob grants raise.
        if kind != Some(ScopeKind::Deny) {
            let ceiling = if kind == Some(ScopeKind::ReadOnly) {
                Level::Read
            } else {
                Level::Write
            };
            if level < Level::Write
                && ceiling == Level::Write
                && let Some(id) = self.first_match(WRITE_GRANTS, path, candidate.as_ref())
            {
                level = Level::Write;
                rule = Some(id);
            }
            if level < Level::Read
                && let Some(id) = self
                    .first_match(READ_GRANTS, path, candidate.as_ref())
                    .or_else(|| self.first_match(WRITE_GRANTS, path, candidate.as_ref()))
            {
                level = Level::Read;
                rule = Some(id);
            }
        }
        // Step 3: glob caps lower.
        if level > Level::None
            && let Some(id) = self.first_match(DENY_CAPS, path, candidate.as_ref())
        {
            level = Level::None;
            rule = Some(id);
            cause = DenyCause::Denied;
        }
        if level == Level::Write
            && let Some(id) = self.first_match(READ_ONLY_CAPS, path, candidate.as_ref())
        {
            level = Level::Read;
            rule = Some(id);
        }
        (level, rule, cause)
    }

    /// The first rule (in the policy's order) of a glob group matching the path.
    fn first_match(
        &self,
        group: usize,
        path: &Path,
        candidate: Option<&Candidate<'_>>,
    ) -> Option<RuleId> {
        let group = self.globs.get(group)?;
        let one_name = group
            .one_name
            .iter()
            .find(|(_, g)| g.is_match(path))
            .map(|(id, _)| *id);
        let full = match candidate {
            Some(candidate) if !group.ids.is_empty() && group.set.is_match_candidate(candidate) => {
                group
                    .set
                    .matches_candidate(candidate)
                    .first()
                    .and_then(|first| group.ids.get(*first).copied())
            }
            _ => None,
        };
        match (one_name, full) {
            (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
            (a, b) => a.or(b),
        }
    }

    /// Renders a refusal with its reason and fix. Returns `None` for an `Allow`.
    pub fn denial(
        &self,
        path: &CanonicalPath,
        access: Access,
        decision: Decision,
    ) -> Option<Denial> {
        let Decision::Deny { cause, rule, .. } = decision else {
            return None;
        };
        let scope = rule.and_then(|r| self.scope(r));
        let shown = path.as_path().display();
        let (reason, fix) = match (cause, scope) {
            (DenyCause::NotGranted, _) => (
                format!(
                    "{access} access to '{shown}' is not granted by profile '{}' (default deny)",
                    self.profile
                ),
                format!(
                    "add it to fs.{} in the policy, or pass {} {shown}",
                    if access == Access::Write {
                        "write"
                    } else {
                        "read"
                    },
                    if access == Access::Write {
                        "--rw"
                    } else {
                        "--ro"
                    },
                ),
            ),
            (DenyCause::Denied, Some(s)) if s.cross_project => (
                format!(
                    "'{shown}' is another project's content ({}): the agent may not read it directly",
                    s.describe()
                ),
                format!(
                    "read it through the quarantine: `stockade quarantine '{shown}'` returns only references checked against the file"
                ),
            ),
            // stockade's own denies (its policy file, a gateway's key file): no profile or flag lifts
            // them, so "narrow that rule" would be no advice at all.
            (DenyCause::Denied, Some(s)) if matches!(s.source, RuleSource::Implicit { .. }) => (
                format!("{access} access to '{shown}' is denied by {}", s.describe()),
                "nothing in a policy or on the command line lifts this: keep what the agent needs \
                 elsewhere (and a gateway's key in a file of its own, or in stockade's environment)"
                    .to_string(),
            ),
            (DenyCause::Denied, Some(s)) => (
                format!("{access} access to '{shown}' is denied by {}", s.describe()),
                "remove or narrow that deny rule (a deeper path grant also overrides a path deny)"
                    .to_string(),
            ),
            (DenyCause::ReadOnly, Some(s)) if s.kind == ScopeKind::ReadOnly => (
                format!("'{shown}' is read-only by {}", s.describe()),
                "remove that read-only rule if the agent must change it".to_string(),
            ),
            (DenyCause::ReadOnly, Some(s)) => (
                format!(
                    "'{shown}' is readable but not writable: {} grants read only",
                    s.describe()
                ),
                format!("add it to fs.write in the policy, or pass --rw {shown}"),
            ),
            (DenyCause::RuntimeOnly, Some(s)) => (
                format!(
                    "'{shown}' is runtime by {}: the programs the agent runs may read it, its own file tools may not",
                    s.describe()
                ),
                format!(
                    "read it through a Bash command if a program needs it, or add it to fs.read in the policy (--ro {shown}) to let the file tools read it"
                ),
            ),
            (DenyCause::PrivateCache, Some(s)) => (
                format!(
                    "'{shown}' is a package cache by {}: the programs the agent runs write a private copy of it, its own file tools may only read the host's",
                    s.describe()
                ),
                format!(
                    "change it through the program that owns the cache (npm, pip, cargo) in a Bash command, or add it to fs.write in the policy (--rw {shown}) to let the agent change the host's cache"
                ),
            ),
            (
                DenyCause::Denied
                | DenyCause::ReadOnly
                | DenyCause::RuntimeOnly
                | DenyCause::PrivateCache,
                None,
            ) => (
                format!("{access} access to '{shown}' is refused"),
                "see `stockade explain`".to_string(),
            ),
        };
        Some(Denial {
            path: path.as_path().to_path_buf(),
            access,
            rule: scope.map(|s| format!("fs.{} = \"{}\"", s.kind, s.written)),
            source: scope.map(|s| s.source.clone()),
            reason,
            fix,
        })
    }

    /// Everything that bears on `(path, access)`: the path scopes covering it, the globs matching it, the
    /// decision, and how each layer enforces it.
    pub fn explain(&self, path: &CanonicalPath, access: Access) -> Explanation {
        let p = path.as_path();
        let mut covering = Vec::new();
        let mut globs = Vec::new();
        for (i, scope) in self.scopes.iter().enumerate() {
            let line = ExplainedRule {
                rule: scope.describe(),
                kind: scope.kind,
                id: RuleId(i),
            };
            match &scope.target {
                ScopeTarget::Path(t) if p.starts_with(t.canonical.as_path()) => covering.push(line),
                ScopeTarget::Glob(g) if g.is_match(p) => globs.push(line),
                ScopeTarget::Path(_) | ScopeTarget::Glob(_) => {}
            }
        }
        let decision = self.decide(path, access);
        let deciding = decision.rule();
        Explanation {
            path: p.to_path_buf(),
            exists: path.exists(),
            judged_at: path.existing_ancestor().to_path_buf(),
            access,
            profile: self.profile.clone(),
            allowed: decision.is_allow(),
            level: decision.level(),
            deciding_rule: deciding.and_then(|r| self.scope(r)).map(|s| s.describe()),
            covering_paths: covering,
            matching_globs: globs,
            denial: self.denial(path, access, decision),
            enforcement: self.enforcement(path, decision),
        }
    }

    fn enforcement(&self, path: &CanonicalPath, decision: Decision) -> Vec<String> {
        let scope = decision.rule().and_then(|r| self.scope(r));
        let glob = matches!(scope.map(|s| &s.target), Some(ScopeTarget::Glob(_)));
        let kernel = match (decision.level(), scope.map(|s| s.kind), glob) {
            (Level::None | Level::Read, Some(_), false) if !path.exists() => "kernel (stockade run): nothing to bind or mask (it does not exist at start); the mediator holds the name".to_string(),
            (Level::None, None, _) => "kernel (stockade run): not in the sandbox's root: beside a granted path it is an empty mode-000 stand-in (EACCES), elsewhere absent (ENOENT); Landlock grants nothing there".to_string(),
            (Level::None, Some(_), false) => "kernel (stockade run): masked by an empty read-only mount in the sandbox's mount namespace (if it exists at start); Landlock grants nothing there".to_string(),
            (Level::None, Some(_), true) => "kernel (stockade run): each match existing at start is masked by an empty read-only mount; a new match is refused by the mediator".to_string(),
            (Level::Read, Some(ScopeKind::ReadOnly), _) => "kernel (stockade run): read-only bind mount (Landlock cannot subtract rights inside a writable tree), so writes, renames, chmod, chown, utimes and xattrs fail with EROFS".to_string(),
            (Level::Read, _, true) => "kernel (stockade run): each match existing at start is bound read-only and granted by Landlock; new matches cannot be created (the kernel is stricter than the policy here)".to_string(),
            (Level::Read, _, false) => "kernel (stockade run): read-only bind mount plus Landlock read/execute rights".to_string(),
            (Level::Write, _, true) => "kernel (stockade run): the directories beneath the glob's prefix are bound writable with every entry it does not match bound back read-only, and the mediator creates new matches (up to 2,000 entries there; past that new matches cannot be created)".to_string(),
            (Level::Write, Some(ScopeKind::Cache), false) => "kernel (stockade run): a private overlay of the host's directory plus Landlock rights: programs read the host's files, and what they write stays in the run (or in the agent's own copy with --persist-caches); the host's cache is never changed (a missing cache directory is created empty at start, to mount on: with its missing parents beneath your home or in a writable directory, elsewhere only where its parent exists)".to_string(),
            (Level::Write, _, false) => "kernel (stockade run): read-write bind mount plus Landlock rights".to_string(),
        };
        let mut notes = vec![kernel];
        if decision.level() == Level::None
            && crate::PRIVATE_TMP_DIRS
                .iter()
                .any(|t| path.as_path().starts_with(t))
        {
            notes.push("kernel (stockade run): programs get a private, empty /tmp and /var/tmp (where the policy grants nothing in them), so this name may exist inside the run; the host's file is never reached".to_string());
        }
        if !path.exists() {
            notes.push(format!(
                "it does not exist yet: judged by its deepest existing ancestor '{}'",
                path.existing_ancestor().display()
            ));
        }
        notes.push(self.mediation(path));
        if scope.map(|s| s.kind) == Some(ScopeKind::Cache) && decision.level() == Level::Write {
            notes.push("hook (stockade hook claude): cache: Bash commands may write it (into the private overlay, under stockade run); the agent's file tools may read the host's copy, not write it".to_string());
            notes.push(
                "file tools (stockade fs, stockade mcp): read only (they act on the host's cache)"
                    .to_string(),
            );
        } else if scope.map(|s| s.kind) == Some(ScopeKind::Runtime) {
            notes.push("hook (stockade hook claude): runtime: Bash commands may read it (as the kernel does); the agent's file tools (Read, Write, Edit, Glob, Grep, LS, MCP file tools) are refused".to_string());
            notes.push("file tools (stockade fs, stockade mcp): refused (runtime is for the programs the agent runs)".to_string());
        } else {
            notes.push(
                "hook (stockade hook claude): the same decision for every path a tool call names"
                    .to_string(),
            );
            notes.push("file tools (stockade fs, stockade mcp): the same decision, opened beneath a directory handle".to_string());
        }
        notes.push("audit: refusals by the hook, the file tools and the mediator are logged (the mediator's also in the run's outcome); Landlock's and the mounts' own refusals are seen only by the process (EACCES/EROFS/ENOENT)".to_string());
        notes
    }

    /// What the mediator (the supervisor's answer to the seccomp filter) does for names at `path`.
    fn mediation(&self, path: &CanonicalPath) -> String {
        let writable = self.decide(path, Access::Write).is_allow();
        let parent_writable = path.as_path().parent().is_none_or(|p| {
            self.decide(
                &CanonicalPath::assume_canonical(p.to_path_buf()),
                Access::Write,
            )
            .is_allow()
        });
        match (writable, parent_writable) {
            (true, true) => "mediator (stockade run): creating, renaming, linking or connecting to it is checked against this decision and performed by the mediator: allowed".to_string(),
            (true, false) => "mediator (stockade run): its directory is not writable but this name is: the directory is bound writable with its other entries bound back read-only, and the mediator creates or renames only the names the policy allows, this one included".to_string(),
            (false, _) => "mediator (stockade run): creating it (open with O_CREAT, mkdir, mknod, symlink), renaming or linking onto it, and connecting to it if it is a Unix socket are refused with EACCES, whether or not it exists at start".to_string(),
        }
    }
}

/// The answer of `stockade explain`.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The canonical path judged.
    pub path: PathBuf,
    /// Whether it exists.
    pub exists: bool,
    /// Its deepest existing ancestor (itself when it exists).
    pub judged_at: PathBuf,
    /// The access asked about.
    pub access: Access,
    /// The profile.
    pub profile: String,
    /// The answer.
    pub allowed: bool,
    /// The level the path has.
    pub level: Level,
    /// The rule that decided, as written with its source.
    pub deciding_rule: Option<String>,
    /// Every path scope covering the path.
    pub covering_paths: Vec<ExplainedRule>,
    /// Every glob matching the path.
    pub matching_globs: Vec<ExplainedRule>,
    /// The refusal, when refused.
    pub denial: Option<Denial>,
    /// How each layer enforces it.
    pub enforcement: Vec<String>,
}

/// One rule as `explain` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct ExplainedRule {
    /// `fs.KIND = "written" (source)`.
    pub rule: String,
    /// Its kind.
    pub kind: ScopeKind,
    /// Its index.
    pub id: RuleId,
}
