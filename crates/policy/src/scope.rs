//! Scopes, the rules they come from, and the levels and accesses they decide.

use std::path::{Path, PathBuf};

use globset::GlobMatcher;
use serde::Serialize;

use crate::path::{AbsPath, CanonicalPath};

/// What a scope says about the paths it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ScopeKind {
    /// Readable (and executable).
    Read,
    /// Readable and writable.
    Write,
    /// Readable, never writable.
    ReadOnly,
    /// Readable (and executable) by the programs the agent runs, as `read` for the kernel sandbox, but not
    /// by the agent's own file tools (the hook's Read/Write/Glob/..., `stockade fs`, the MCP server): the
    /// system runtime and toolchains a build needs, which the agent itself has no reason to read into its
    /// context. Paths only.
    Runtime,
    /// A package cache (`~/.npm`, `~/.cache/pip`, `~/.cargo/registry`): the programs the agent runs read
    /// the host's copy and write a private one (an overlay inside the sandbox, discarded with the run or
    /// kept per agent with `--persist-caches`), so installs work and the host's cache is never changed.
    /// The agent's own file tools may read it, not write it. Paths only.
    Cache,
    /// Nothing.
    Deny,
}

impl ScopeKind {
    /// The key under `fs.` that holds this kind.
    pub fn key(self) -> &'static str {
        match self {
            ScopeKind::Read => "read",
            ScopeKind::Write => "write",
            ScopeKind::ReadOnly => "read-only",
            ScopeKind::Runtime => "runtime",
            ScopeKind::Cache => "cache",
            ScopeKind::Deny => "deny",
        }
    }

    /// Higher is stricter: deny > runtime > read-only > read > cache > write (runtime gives the agent's
    /// own tools nothing; a cache's writes never reach the host). A tie at the same depth goes to the
    /// strictest.
    pub(crate) fn strictness(self) -> u8 {
        match self {
            ScopeKind::Write => 0,
            ScopeKind::Cache => 1,
            ScopeKind::Read => 2,
            ScopeKind::ReadOnly => 3,
            ScopeKind::Runtime => 4,
            ScopeKind::Deny => 5,
        }
    }

    /// The level a path scope of this kind gives the paths it decides, as the programs the agent runs
    /// see it (a cache is writable there, privately).
    pub fn level(self) -> Level {
        match self {
            ScopeKind::Write | ScopeKind::Cache => Level::Write,
            ScopeKind::Read | ScopeKind::ReadOnly | ScopeKind::Runtime => Level::Read,
            ScopeKind::Deny => Level::None,
        }
    }

    /// Grants (`read`, `write`) raise; caps (`read-only`, `deny`) lower. `runtime` and `cache` are path
    /// scopes that grant programs read (and a cache private writes), so they count as grants.
    pub fn is_grant(self) -> bool {
        matches!(
            self,
            ScopeKind::Read | ScopeKind::Write | ScopeKind::Runtime | ScopeKind::Cache
        )
    }
}

impl std::fmt::Display for ScopeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key())
    }
}

/// How much a path is granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    /// Nothing.
    None,
    /// Read (and execute).
    Read,
    /// Read and write.
    Write,
}

impl Level {
    /// Whether this level permits `access`.
    pub fn permits(self, access: Access) -> bool {
        match access {
            Access::Read => self >= Level::Read,
            Access::Write => self == Level::Write,
        }
    }
}

/// What an agent wants to do with a path. Creating, deleting, renaming, truncating and changing metadata are
/// all `Write` (of the entry, judged at the entry's own path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Read a file, list a directory, execute.
    Read,
    /// Anything that changes the file or its entry.
    Write,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Access::Read => "read",
            Access::Write => "write",
        })
    }
}

/// Where a rule was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum RuleSource {
    /// A line of a policy file.
    File {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// The profile the line belongs to.
        profile: String,
    },
    /// A line of the built-in profiles (`stockade profile show` prints them).
    Builtin {
        /// The built-in profile.
        profile: String,
        /// 1-based line in the built-in text.
        line: usize,
    },
    /// A command-line flag.
    Flag {
        /// The flag, e.g. `--rw`.
        flag: String,
    },
    /// Something stockade always provides, e.g. the private temp dir.
    Implicit {
        /// What it is.
        what: String,
    },
}

impl std::fmt::Display for RuleSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuleSource::File {
                path,
                line,
                profile,
            } => write!(f, "{}:{line} [profile.{profile}]", path.display()),
            RuleSource::Builtin { profile, line } => {
                write!(f, "built-in profile {profile} (line {line})")
            }
            RuleSource::Flag { flag } => write!(f, "flag {flag}"),
            RuleSource::Implicit { what } => write!(f, "implicit: {what}"),
        }
    }
}

/// A path scope: covers the path and everything beneath it.
#[derive(Debug, Clone)]
pub struct PathTarget {
    /// As expanded and made absolute (may contain symlinks; the sandbox recreates them).
    pub abs: AbsPath,
    /// As the kernel resolves it.
    pub canonical: CanonicalPath,
    /// Written with a trailing `/`: the sandbox may create an empty directory to hold the rule in place.
    pub dir_hint: bool,
    /// It was an existing directory when resolved (the sandbox plans from this instead of asking again).
    pub is_dir: bool,
}

/// A glob scope: covers exactly the paths that match.
#[derive(Debug, Clone)]
pub struct GlobTarget {
    /// The absolute pattern matched against canonical paths.
    pub pattern: String,
    /// The longest leading directory without glob characters: walks for matches start here.
    pub prefix: PathBuf,
    pub(crate) matcher: GlobMatch,
}

impl GlobTarget {
    /// Whether a canonical path matches.
    pub fn is_match(&self, path: &Path) -> bool {
        match &self.matcher {
            GlobMatch::OneName(name) => name.is_match(path),
            GlobMatch::Full(m) => m.is_match(path),
        }
    }
}

/// How a glob is matched.
#[derive(Debug, Clone)]
pub(crate) enum GlobMatch {
    /// `<dir>/<prefix>*<suffix>`: one `*` in the last component, nothing else special (git's temporary
    /// files in the default profile). Matched by hand: compiling a regular expression for it costs more
    /// than a launch can spare.
    OneName(OneNameGlob),
    /// Anything else, compiled by globset.
    Full(GlobMatcher),
}

/// A glob of the form `<dir>/<prefix>*<suffix>` (see [`GlobMatch::OneName`]).
#[derive(Debug, Clone)]
pub(crate) struct OneNameGlob {
    pub(crate) dir: PathBuf,
    pub(crate) prefix: String,
    pub(crate) suffix: String,
}

impl OneNameGlob {
    /// Recognises the form in an absolute pattern.
    pub(crate) fn parse(pattern: &str) -> Option<Self> {
        let (dir, name) = pattern.rsplit_once('/')?;
        let special = |c: char| matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\');
        // At the root, globset's `/*` also matches `/` itself: leave that to it.
        if dir.is_empty() || dir.contains(special) || name.matches('*').count() != 1 {
            return None;
        }
        let (prefix, suffix) = name.split_once('*')?;
        if prefix.contains(special) || suffix.contains(special) {
            return None;
        }
        Some(OneNameGlob {
            dir: PathBuf::from(dir),
            prefix: prefix.to_string(),
            suffix: suffix.to_string(),
        })
    }

    /// Whether a canonical path matches. Split at its last `/` by bytes, not by components: every
    /// decision asks each one-name glob of its kind, a hundred decisions a launch.
    pub(crate) fn is_match(&self, path: &Path) -> bool {
        let path = path.as_os_str().as_encoded_bytes();
        let Some(slash) = path.iter().rposition(|b| *b == b'/') else {
            return false;
        };
        let (dir, name) = path.split_at(slash);
        let name = name.get(1..).unwrap_or_default();
        dir == self.dir.as_os_str().as_encoded_bytes()
            && name.len() >= self.prefix.len() + self.suffix.len()
            && name.starts_with(self.prefix.as_bytes())
            && name.ends_with(self.suffix.as_bytes())
    }
}

/// What a scope covers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ScopeTarget {
    /// A path and everything beneath it.
    Path(PathTarget),
    /// Exactly the paths that match a glob.
    Glob(GlobTarget),
}

/// One rule: a kind, a target, and where it was written.
#[derive(Debug, Clone)]
pub struct Scope {
    /// What it says.
    pub kind: ScopeKind,
    /// What it covers.
    pub target: ScopeTarget,
    /// The text as written (before expansion).
    pub written: String,
    /// Where it was written.
    pub source: RuleSource,
    /// A `deny` written as `fs.cross-project`: refusals point to `stockade quarantine`.
    pub cross_project: bool,
}

impl Scope {
    /// `fs.deny = "~/.ssh" (built-in profile system (line 12))`.
    pub fn describe(&self) -> String {
        format!(
            "fs.{} = \"{}\" ({})",
            if self.cross_project {
                "cross-project"
            } else {
                self.kind.key()
            },
            self.written,
            self.source
        )
    }
}

/// Index of a scope in [`crate::ResolvedPolicy::scopes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct RuleId(pub usize);

#[cfg(test)]
mod tests {
    use super::OneNameGlob;
    use std::path::Path;

    /// The hand matcher agrees with globset (with the options policies use) wherever it applies.
    #[test]
    fn one_name_globs_match_as_globset_does() {
        let patterns = [
            "/p/.git/index.stash.*",
            "/p/.git/next-index-*.lock",
            "/p/*.rs",
            "/p/a*",
            "/p/é*ü",
        ];
        let paths = [
            "/p/.git/index.stash.7",
            "/p/.git/index.stash.",
            "/p/.git/index.stash",
            "/p/.git/sub/index.stash.7",
            "/p/.git/next-index-12.lock",
            "/p/.git/next-index-.lock",
            "/p/.git/next-index.lock",
            "/p/x.rs",
            "/p/.rs",
            "/p/q/x.rs",
            "/p/a",
            "/p/ab/c",
            "/p",
            "/",
            "/p/éxü",
            "/p/éü",
            "/p/é",
        ];
        for pattern in patterns {
            let one = OneNameGlob::parse(pattern).expect(pattern);
            let full = globset::GlobBuilder::new(pattern)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .unwrap()
                .compile_matcher();
            for path in paths {
                assert_eq!(
                    one.is_match(Path::new(path)),
                    full.is_match(path),
                    "{pattern} against {path}"
                );
            }
        }
        for not_one in [
            "/*",
            "/p/**/x",
            "/p/*/x",
            "/p/a?",
            "/p/[ab]*",
            "/p/*a*",
            "/p/{a,b}*",
        ] {
            assert!(OneNameGlob::parse(not_one).is_none(), "{not_one}");
        }
    }
}
