//! From raw flags to a resolved policy.

use std::path::{Path, PathBuf};

use anyhow::Context;
use stockade_audit::AuditLog;
use stockade_policy::{PolicyBuilder, ScopeKind, Variables};

use crate::args::PolicyArgs;

/// The variables every command starts from: CWD, HOME, and the flags that set others.
pub(crate) fn variables(args: &PolicyArgs) -> anyhow::Result<Variables> {
    let here = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = args
        .project
        .as_ref()
        .map_or_else(|| here.clone(), |p| absolute(&here, p));
    let mut vars = Variables::default();
    vars.set_path("CWD", &cwd);
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"));
    vars.set_path("HOME", home);
    let mut repo_root = args.repo_root.as_ref().map(|r| absolute(&cwd, r));
    if let Some(w) = &args.worktree {
        let worktree = absolute(&cwd, w);
        // A linked worktree's `.git` is a file naming its git dir inside the main repository
        // (`<repo>/.git/worktrees/<name>`), which is where `git commit` writes its index and HEAD.
        let dot_git = worktree.join(".git");
        if let Ok(text) = std::fs::read_to_string(&dot_git) {
            let gitdir = text
                .lines()
                .find_map(|l| l.strip_prefix("gitdir:"))
                .map(|g| absolute(&worktree, Path::new(g.trim())))
                .with_context(|| format!("'{}' does not name a gitdir", dot_git.display()))?;
            if repo_root.is_none() {
                // <repo>/.git/worktrees/<name> -> <repo>
                repo_root = gitdir
                    .parent()
                    .and_then(Path::parent)
                    .and_then(Path::parent)
                    .map(Path::to_path_buf);
            }
            vars.set_path("WORKTREE_GITDIR", gitdir);
        }
        vars.set_path("WORKTREE", worktree);
    }
    if let Some(r) = repo_root {
        vars.set_path("REPO_ROOT", r);
    }
    Ok(vars)
}

pub(crate) fn absolute(cwd: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    }
}

/// A builder with the profile choice and the flag scopes applied.
pub(crate) fn builder(args: &PolicyArgs, vars: Variables) -> PolicyBuilder {
    let mut b = PolicyBuilder::new(vars);
    if let Some(p) = &args.policy {
        b.policy_file(p);
    }
    if let Some(p) = &args.profile {
        b.profile(p);
    }
    if let Some(a) = &args.agent {
        b.agent(a);
    }
    for (list, kind, flag) in [
        (&args.rw, ScopeKind::Write, "--rw"),
        (&args.ro, ScopeKind::Read, "--ro"),
        (&args.read_only, ScopeKind::ReadOnly, "--read-only"),
        (&args.deny, ScopeKind::Deny, "--deny"),
    ] {
        for p in list {
            b.flag_scope(kind, p.clone(), flag);
        }
    }
    b
}

/// The audit log location.
/// A flag's value read by `parse` (`stockade_policy::parse_duration`, `parse_size`), or an error naming
/// the flag and the value given.
pub(crate) fn flag_value<T>(
    flag: &str,
    value: &str,
    parse: fn(&str) -> Result<T, String>,
) -> anyhow::Result<T> {
    parse(value).map_err(|e| anyhow::anyhow!("{flag} {value:?}: {e}"))
}

pub(crate) fn audit_log(flag: Option<&Path>) -> AuditLog {
    match flag {
        Some(p) => AuditLog::at(p),
        None => AuditLog::at(AuditLog::default_path(|k| std::env::var(k).ok())),
    }
}

/// POSIX single quotes: safe for any byte but NUL.
pub(crate) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The policy flags again, quoted for a shell and with every path absolute (against `base`), so that a
/// command built from them (the installed hook, a sandboxed Bash call) finds the same policy wherever it
/// runs. `--project` is always given: ${CWD} must not follow the process.
pub(crate) fn flags_for_shell(args: &PolicyArgs, base: &Path) -> Vec<String> {
    let abs = |p: &Path| absolute(base, p).to_string_lossy().into_owned();
    let mut out = Vec::new();
    let mut flag = |name: &str, value: String| {
        out.push(name.to_string());
        out.push(quote(&value));
    };
    flag(
        "--project",
        args.project
            .as_deref()
            .map_or_else(|| base.to_string_lossy().into_owned(), abs),
    );
    if let Some(a) = &args.agent {
        flag("--agent", a.clone());
    }
    if let Some(f) = &args.policy {
        flag("--policy", abs(f));
    }
    if let Some(n) = &args.profile {
        flag("--profile", n.clone());
    }
    if let Some(r) = &args.repo_root {
        flag("--repo-root", abs(r));
    }
    if let Some(w) = &args.worktree {
        flag("--worktree", abs(w));
    }
    for (list, name) in [
        (&args.rw, "--rw"),
        (&args.ro, "--ro"),
        (&args.read_only, "--read-only"),
        (&args.deny, "--deny"),
    ] {
        for v in list {
            let glob_or_absolute =
                v.contains(['*', '?', '[', '{']) || v.starts_with('/') || v.starts_with('~');
            flag(
                name,
                if glob_or_absolute {
                    v.clone()
                } else {
                    abs(Path::new(v))
                },
            );
        }
    }
    out
}

/// A shell command line running this stockade binary with `words` (a subcommand) and the same policy
/// flags: the installed hook and the sandboxed rewrite of a Bash call are both built here.
pub(crate) fn self_command(
    words: &[&str],
    args: &PolicyArgs,
    base: &Path,
) -> anyhow::Result<String> {
    let exe = std::env::current_exe().context("cannot find stockade's own path")?;
    let mut parts = vec![quote(&exe.to_string_lossy())];
    parts.extend(words.iter().map(|w| (*w).to_string()));
    parts.extend(flags_for_shell(args, base));
    Ok(parts.join(" "))
}
