//! `${VAR}` and `~` expansion.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// Every variable a policy may use. Anything else in `${...}` is an error naming it.
pub const KNOWN_VARIABLES: &[&str] = &[
    "CWD",
    "HOME",
    "POLICY_DIR",
    "TEMP_DIR",
    "AGENT_ID",
    "REPO_ROOT",
    "WORKTREE",
    "WORKTREE_GITDIR",
    // The directory the project's git configuration names as `core.hooksPath`, read at start; the CLI
    // makes it read-only.
    "GIT_HOOKS_PATH",
    // The project's git dir and the repository's common dir: both `${CWD}/.git` unless the project is a
    // linked worktree (its `.git` a file naming `<repo>/.git/worktrees/<name>`), read at start.
    "GIT_DIR",
    "GIT_COMMON_DIR",
    "PRIVATE_WORKSPACE",
    "RUN_WORKSPACE",
];

/// Values for the variables; a known variable without a value is an error only where it is used.
#[derive(Debug, Clone, Default)]
pub struct Variables {
    values: BTreeMap<&'static str, String>,
    /// `${CWD}/.git`, canonical, made on first use: the default of `${GIT_DIR}` and `${GIT_COMMON_DIR}`,
    /// which the built-in profile names two dozen times.
    default_git_dir: std::sync::OnceLock<String>,
}

impl Variables {
    /// Sets a variable. Unknown names are ignored by design: callers pass only names from
    /// [`KNOWN_VARIABLES`], and a typo here would be a bug caught by the tests of the caller.
    pub fn set(&mut self, name: &str, value: impl Into<String>) -> &mut Self {
        if let Some(known) = KNOWN_VARIABLES.iter().find(|k| **k == name) {
            self.values.insert(known, value.into());
            if *known == "CWD" {
                self.default_git_dir = std::sync::OnceLock::new();
            }
        }
        self
    }

    /// Sets a path variable.
    pub fn set_path(&mut self, name: &str, value: impl Into<PathBuf>) -> &mut Self {
        let value: PathBuf = value.into();
        self.set(name, value.to_string_lossy().into_owned())
    }

    /// The value of a variable, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// Expands `${NAME}` everywhere and a leading `~` (alone or before `/`) to `${HOME}`.
    ///
    /// `$$` is not special; a lone `$` not followed by `{` is kept as written.
    pub fn expand(&self, text: &str) -> Result<String, String> {
        self.expand_with(text, str::to_string)
    }

    /// Expands as [`Variables::expand`] does, putting each value (and the home a leading `~` stands
    /// for) through `value` first: a glob is built with its values escaped, so a directory named
    /// `p[1]` stays that directory.
    pub fn expand_with(
        &self,
        text: &str,
        value: impl Fn(&str) -> String,
    ) -> Result<String, String> {
        let text = if text == "~" || text.starts_with("~/") {
            let home = value(&self.lookup("HOME")?);
            format!("{home}{}", text.get(1..).unwrap_or(""))
        } else {
            text.to_string()
        };
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(start) = rest.find("${") {
            out.push_str(rest.get(..start).unwrap_or(""));
            let after = rest.get(start + 2..).unwrap_or("");
            let Some(end) = after.find('}') else {
                return Err(format!("unclosed '${{' in '{text}'; write ${{NAME}}"));
            };
            let name = after.get(..end).unwrap_or("");
            out.push_str(&value(&self.lookup(name)?));
            rest = after.get(end + 1..).unwrap_or("");
        }
        out.push_str(rest);
        Ok(out)
    }

    fn lookup(&self, name: &str) -> Result<String, String> {
        if !KNOWN_VARIABLES.contains(&name) {
            return Err(format!(
                "unknown variable ${{{name}}}; known variables are {}",
                KNOWN_VARIABLES
                    .iter()
                    .map(|v| format!("${{{v}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Some(value) = self.values.get(name) {
            return Ok(value.clone());
        }
        if matches!(name, "GIT_DIR" | "GIT_COMMON_DIR")
            && let Some(cwd) = self.values.get("CWD")
        {
            // Canonical where it can be (`--project ../p`): globs are built on it.
            let dir = self.default_git_dir.get_or_init(|| {
                let cwd = std::fs::canonicalize(cwd)
                    .map_or_else(|_| cwd.clone(), |c| c.to_string_lossy().into_owned());
                format!("{}/.git", cwd.trim_end_matches('/'))
            });
            return Ok(dir.clone());
        }
        let how = match name {
            "AGENT_ID" => "pass --agent ID",
            "REPO_ROOT" | "WORKTREE" => {
                "pass --repo-root and --worktree (or use them only in worktree profiles)"
            }
            "WORKTREE_GITDIR" => {
                "pass --worktree-gitdir (stockade install pins it; the hook never reads the worktree's .git, which the agent can write)"
            }
            "PRIVATE_WORKSPACE" | "RUN_WORKSPACE" => "use it only in orchestrator runs",
            "POLICY_DIR" => "use it only in a policy file",
            _ => "set it",
        };
        Err(format!("variable ${{{name}}} has no value here; {how}"))
    }
}

/// The `K=V` lines of an env file (`--env-file`, a gateway's `env-file`): blank lines and `#` comments
/// skipped, an `export ` prefix and one pair of matching quotes around the value dropped. A line without
/// `=` is an `InvalidData` error naming the file and line.
pub fn read_env_file(path: &std::path::Path) -> std::io::Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path)?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((k, v)) = line.split_once('=') else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}:{}: expected K=V", path.display(), i + 1),
            ));
        };
        let v = v.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(v);
        out.push((k.trim().to_string(), v.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_known_and_rejects_unknown() {
        let mut v = Variables::default();
        v.set("HOME", "/home/u").set("CWD", "/w");
        assert_eq!(v.expand("~/.ssh").unwrap(), "/home/u/.ssh");
        assert_eq!(v.expand("~").unwrap(), "/home/u");
        assert_eq!(v.expand("${CWD}/src").unwrap(), "/w/src");
        assert_eq!(v.expand("a~b").unwrap(), "a~b");
        assert!(
            v.expand("${NOPE}")
                .unwrap_err()
                .contains("unknown variable ${NOPE}")
        );
        assert!(v.expand("${AGENT_ID}").unwrap_err().contains("--agent"));
        assert!(v.expand("${CWD").unwrap_err().contains("unclosed"));
    }
}
