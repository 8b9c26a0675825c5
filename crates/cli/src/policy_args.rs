//! From raw flags to a resolved policy.

use std::path::{Path, PathBuf};

use anyhow::Context;
use stockade_audit::AuditLog;
use stockade_policy::{PolicyBuilder, ScopeKind, Variables};

use crate::args::PolicyArgs;

/// The variables every command starts from: CWD, HOME, and the flags that set others.
///
/// `WORKTREE/.git` names the worktree's git dir, and the agent can write it: it is read only when
/// `may_read_agent_files` (a launcher, before the agent runs) and `--worktree-gitdir` and `--pinned` are
/// absent. The hook and the sandboxed Bash it builds run while the agent does, so they get every value as a
/// flag, pinned by `install` ([`self_command`]).
pub(crate) fn variables(
    args: &PolicyArgs,
    may_read_agent_files: bool,
) -> anyhow::Result<Variables> {
    let here = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = args
        .project
        .as_ref()
        .map_or_else(|| here.clone(), |p| absolute(&here, p));
    let mut vars = Variables::default();
    vars.set_path("CWD", &cwd);
    let home = match &args.home {
        Some(h) => absolute(&cwd, h),
        None => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/")),
    };
    vars.set_path("HOME", home);
    let mut repo_root = args.repo_root.as_ref().map(|r| absolute(&cwd, r));
    if let Some(w) = &args.worktree {
        let worktree = absolute(&cwd, w);
        let gitdir = match &args.worktree_gitdir {
            Some(g) => Some(absolute(&cwd, g)),
            None if may_read_agent_files && !args.pinned => read_gitdir(&worktree)?,
            None => None,
        };
        if let Some(gitdir) = gitdir {
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
    // A project that is a linked worktree keeps git's state in its own git dir and in the repository's
    // .git, a submodule's checkout in the superproject's `.git/modules/<name>` (`${GIT_DIR}`,
    // `${GIT_COMMON_DIR}`; both `${CWD}/.git` otherwise).
    let read = (may_read_agent_files && !args.pinned && args.worktree.is_none())
        .then(|| git_dirs_named_by_file(&cwd))
        .flatten();
    // Canonical, as the read ones are: globs are built on them.
    let pinned_dir = |g: &PathBuf| {
        let dir = absolute(&cwd, g);
        dir.canonicalize().unwrap_or(dir)
    };
    let git_dir = args.git_dir.as_ref().map(pinned_dir);
    let git_common_dir = args.git_common_dir.as_ref().map(pinned_dir);
    if let Some(dir) = git_dir.or_else(|| read.as_ref().map(|r| r.0.clone())) {
        vars.set_path("GIT_DIR", dir);
    }
    if let Some(dir) = git_common_dir.or_else(|| read.as_ref().map(|r| r.1.clone())) {
        vars.set_path("GIT_COMMON_DIR", dir);
    }
    if may_read_agent_files && !args.pinned {
        let project = vars
            .get("WORKTREE")
            .map_or_else(|| cwd.clone(), PathBuf::from);
        let home = vars.get("HOME").map(PathBuf::from).unwrap_or_default();
        // The git dirs just read for the project, if its `.git` is a file: not read a second time.
        let read = read.filter(|_| project == cwd);
        if let Some(hooks) = git_hooks_path(&project, &home, read) {
            vars.set_path("GIT_HOOKS_PATH", hooks);
        }
    }
    Ok(vars)
}

/// The directory `core.hooksPath` names for the repository holding `project`, as git would read it now:
/// the system, global, repository and worktree configuration in that order, the last setting winning;
/// relative to the top of the work tree, `~/` to the home directory. `None` outside a repository or
/// when it is not set. (`include` directives are not followed.) `project_git_dirs`: what
/// [`git_dirs_named_by_file`] already read for `project`, if anything.
fn git_hooks_path(
    project: &Path,
    home: &Path,
    project_git_dirs: Option<(PathBuf, PathBuf)>,
) -> Option<PathBuf> {
    let top = project.ancestors().find(|d| d.join(".git").exists())?;
    let dot_git = top.join(".git");
    // A linked worktree's git dir names the repository's common dir, where `config` lives.
    let (git_dir, common) = match project_git_dirs.filter(|_| top == project) {
        Some(dirs) => dirs,
        None if dot_git.is_dir() => (dot_git.clone(), dot_git),
        None => git_dirs_named_by_file(top)?,
    };
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map_or_else(|| home.join(".config"), PathBuf::from)
        .join("git/config");
    let files = [
        PathBuf::from("/etc/gitconfig"),
        xdg,
        home.join(".gitconfig"),
        common.join("config"),
        git_dir.join("config.worktree"),
    ];
    // The last file that sets it wins: search from the most specific.
    let value = files
        .iter()
        .rev()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .find_map(|text| config_value(&text, "core", "hookspath"))?;
    let path = match value.strip_prefix("~/") {
        Some(rest) => home.join(rest),
        None => absolute(top, Path::new(&value)),
    };
    Some(path)
}

/// The last value of `section.key` in a git configuration file (names compared without case, as git
/// does); a quoted value is unquoted.
fn config_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut in_section = false;
    let mut found = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            let name = header.split([']', ' ', '"']).next().unwrap_or("");
            in_section = name.eq_ignore_ascii_case(section);
            continue;
        }
        if !in_section {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        if k.trim().eq_ignore_ascii_case(key) {
            let v = v.split(['#', ';']).next().unwrap_or("").trim();
            found = Some(v.trim_matches('"').to_string());
        }
    }
    found
}

/// The git dir and the common dir of a work tree whose `.git` is a file (a linked worktree, a submodule's
/// checkout): the git dir it names, and the one that dir's `commondir` names (itself without one), both
/// canonical.
fn git_dirs_named_by_file(work_tree: &Path) -> Option<(PathBuf, PathBuf)> {
    let git_dir = read_gitdir(work_tree).ok().flatten()?.canonicalize().ok()?;
    let common = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(c) => absolute(&git_dir, Path::new(c.trim()))
            .canonicalize()
            .ok()?,
        Err(_) => git_dir.clone(),
    };
    Some((git_dir, common))
}

/// A linked worktree's `.git` is a file naming its git dir inside the main repository
/// (`<repo>/.git/worktrees/<name>`), which is where `git commit` writes its index and HEAD. `None` when the
/// worktree has no such file.
fn read_gitdir(worktree: &Path) -> anyhow::Result<Option<PathBuf>> {
    let dot_git = worktree.join(".git");
    let Ok(text) = std::fs::read_to_string(&dot_git) else {
        return Ok(None);
    };
    text.lines()
        .find_map(|l| l.strip_prefix("gitdir:"))
        .map(|g| Some(absolute(worktree, Path::new(g.trim()))))
        .with_context(|| format!("'{}' does not name a gitdir", dot_git.display()))
}

/// `p` against `cwd`, without `.` components (`--worktree .` pins the directory, not `dir/.`).
pub(crate) fn absolute(cwd: &Path, p: &Path) -> PathBuf {
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    };
    joined
        .components()
        .filter(|c| *c != std::path::Component::CurDir)
        .collect()
}

/// A builder with the profile choice and the flag scopes applied.
pub(crate) fn builder(args: &PolicyArgs, vars: Variables) -> PolicyBuilder {
    // The hooks directory is as much a file the user's git runs later as `.git/hooks` is.
    let b_hooks = vars.get("GIT_HOOKS_PATH").map(str::to_string);
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
    if let Some(hooks) = b_hooks {
        b.flag_scope(ScopeKind::ReadOnly, hooks, "core.hooksPath");
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

/// The policy flags again, quoted for a shell, with every variable pinned to its resolved value, so that a
/// command built from them (the installed hook, a sandboxed Bash call) decides the same way wherever and
/// whenever it runs, whatever the agent has written since: `--project`, `--home`, `--repo-root`,
/// `--worktree`, `--worktree-gitdir` as resolved now, and `--pinned`.
pub(crate) fn flags_for_shell(args: &PolicyArgs, vars: &Variables, base: &Path) -> Vec<String> {
    let abs = |p: &Path| absolute(base, p).to_string_lossy().into_owned();
    let mut out = vec!["--pinned".to_string()];
    let mut flag = |name: &str, value: String| {
        out.push(name.to_string());
        out.push(quote(&value));
    };
    for (name, var) in [
        ("--project", "CWD"),
        ("--home", "HOME"),
        ("--repo-root", "REPO_ROOT"),
        ("--worktree", "WORKTREE"),
        ("--worktree-gitdir", "WORKTREE_GITDIR"),
        ("--git-dir", "GIT_DIR"),
        ("--git-common-dir", "GIT_COMMON_DIR"),
    ] {
        if let Some(v) = vars.get(var) {
            flag(name, v.to_string());
        }
    }
    if let Some(a) = &args.agent {
        flag("--agent", a.clone());
    }
    if let Some(hooks) = vars.get("GIT_HOOKS_PATH") {
        flag("--read-only", hooks.to_string());
    }
    if let Some(f) = &args.policy {
        flag("--policy", abs(f));
    }
    if let Some(n) = &args.profile {
        flag("--profile", n.clone());
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

/// A shell command line running this stockade binary with `words` (a subcommand) and the same policy,
/// every variable pinned ([`flags_for_shell`]): the installed hook and the sandboxed rewrite of a Bash call
/// are both built here.
pub(crate) fn self_command(
    words: &[&str],
    args: &PolicyArgs,
    vars: &Variables,
    base: &Path,
) -> anyhow::Result<String> {
    let exe = std::env::current_exe().context("cannot find stockade's own path")?;
    let mut parts = vec![quote(&exe.to_string_lossy())];
    parts.extend(words.iter().map(|w| (*w).to_string()));
    parts.extend(flags_for_shell(args, vars, base));
    Ok(parts.join(" "))
}
