//! Built-in profiles, written in the same TOML shape a user's file uses and loaded by the same code.
//!
//! `secrets` is the shared base (known secrets denied, a small environment, no network), and `system` adds
//! the system directories and the home directory readable; neither is meant to be picked alone, but both
//! can be. The public ones are `workspace-write` (the default), `read-only`, `cross-project` and `worktree`.

/// The names users may pick, in the order `--help` lists them.
pub const BUILTIN_PROFILES: &[&str] = &[
    "workspace-write",
    "read-only",
    "cross-project",
    "worktree",
    "claude-code",
    "codex",
    "system",
    "secrets",
];

/// System directories a confined program needs to run (readable in the quarantine and orchestrator runs,
/// which do not extend `system`, since that also grants the home directory).
pub const SYSTEM_READ_DIRS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/etc/resolv.conf",
];

/// The shared temp directories a sandboxed run gets a private, empty copy of when its policy grants
/// nothing in them: a program's `/tmp/x` is then its own, never the host's (`stockade run`, and the Bash
/// the hook sandboxes), while the agent's file tools still reach only the host's, as the policy says.
pub const PRIVATE_TMP_DIRS: &[&str] = &["/tmp", "/var/tmp"];

/// Secrets inside [`SYSTEM_READ_DIRS`], denied wherever those are granted.
pub const SYSTEM_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/shadow-",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/ssh/ssh_host_rsa_key",
    "/etc/ssh/ssh_host_ecdsa_key",
    "/etc/ssh/ssh_host_ed25519_key",
    "/etc/ssh/ssh_host_dsa_key",
];

/// The TOML of a profile stockade writes for a run it sets up itself (a quarantine reader, an orchestrator
/// agent): `base = "/"`; [`SYSTEM_READ_DIRS`] and `read` readable; `write` writable; [`SYSTEM_SECRETS`] and
/// `deny` denied; only `PATH`, `LANG`, `LC_ALL` and `TERM` passed from the environment. Paths are quoted
/// as TOML strings; whether they are literal (see [`crate::is_literal_path`]) is the caller's to check.
pub fn system_run_profile(
    name: &str,
    read: &[&std::path::Path],
    write: &[&std::path::Path],
    deny: &[&std::path::Path],
) -> String {
    let list = |system: &[&str], extra: &[&std::path::Path]| {
        system
            .iter()
            .map(|p| std::borrow::Cow::Borrowed(*p))
            .chain(extra.iter().map(|p| p.to_string_lossy()))
            // JSON's string escapes are valid in a TOML basic string.
            .map(|p| serde_json::to_string(&p).unwrap_or_default())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "[profile.{name}]\nbase = \"/\"\nfs.read = [{}]\nfs.write = [{}]\nfs.deny = [{}]\n\
         env.pass = [\"PATH\", \"LANG\", \"LC_ALL\", \"TERM\"]\n",
        list(SYSTEM_READ_DIRS, read),
        list(&[], write),
        list(SYSTEM_SECRETS, deny),
    )
}

/// The default profile when neither `--profile` nor a policy file picks one.
pub const DEFAULT_PROFILE: &str = "workspace-write";

/// The built-in policy source. Line numbers in `explain` refer to this text (`stockade profile show`).
pub const BUILTIN_TOML: &str = r#"
# What every built-in denies whatever else it grants (known secrets), the small environment it passes,
# and no network: the base of `system` and of `worktree`.
[profile.secrets]
base = "/"
fs.deny = [
  "~/.ssh", "~/.aws", "~/.gnupg", "~/.config/gh", "~/.netrc", "~/.docker", "~/.kube",
  "~/.git-credentials", "~/.config/stockade", "~/.local/state/stockade", "~/.cargo/credentials",
  "~/.cargo/credentials.toml",
  "/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-",
  "/etc/sudoers", "/etc/sudoers.d", "/etc/ssl/private",
  # Paths, not a glob: the default profile compiles no glob, which keeps every launch fast.
  "/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ecdsa_key", "/etc/ssh/ssh_host_ed25519_key",
  "/etc/ssh/ssh_host_dsa_key",
]
env.pass = [
  "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE",
  "TERM", "COLORTERM", "NO_COLOR", "TZ",
]
net = "none"

[profile.system]
extends = "secrets"
base = "${CWD}"
fs.read = [
  "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
  "/etc", "/opt", "/sys",
  # Often a symlink into /run (systemd-resolved); granting the name grants where it leads.
  "/etc/resolv.conf",
  "${HOME}",
]

# Files the user's own tools load or run later, protected whether or not they exist at start: the
# repository's .git except exactly what git itself writes (its configuration, hooks, info/, commondir and
# config.worktree decide what the user's next `git` runs), the directory core.hooksPath names (added at
# start from the repository's real configuration), and the editor, agent and shell configuration the
# user's tools load. A program that tries to create or change one gets EACCES (or EROFS) and the run's
# outcome lists it.
[profile.workspace-write]
extends = "system"
# ${GIT_DIR} and ${GIT_COMMON_DIR} are the project's .git, or in a linked worktree its own git dir and the
# repository's .git (read at start).
fs.write = [
  "${CWD}",
  # Shared by every worktree of the repository.
  "${GIT_COMMON_DIR}/objects", "${GIT_COMMON_DIR}/refs", "${GIT_COMMON_DIR}/logs",
  "${GIT_COMMON_DIR}/packed-refs", "${GIT_COMMON_DIR}/packed-refs.lock",
  "${GIT_COMMON_DIR}/packed-refs.new", "${GIT_COMMON_DIR}/gc.pid",
  "${GIT_COMMON_DIR}/gc.log", "${GIT_COMMON_DIR}/gc.pid.lock", "${GIT_COMMON_DIR}/gc.log.lock",
  "${GIT_COMMON_DIR}/shallow", "${GIT_COMMON_DIR}/shallow.lock", "${GIT_COMMON_DIR}/rr-cache",
  "${GIT_COMMON_DIR}/lfs",
  # The worktree's own.
  "${GIT_DIR}/logs", "${GIT_DIR}/index", "${GIT_DIR}/index.lock", "${GIT_DIR}/HEAD",
  "${GIT_DIR}/HEAD.lock", "${GIT_DIR}/COMMIT_EDITMSG", "${GIT_DIR}/AUTO_MERGE", "${GIT_DIR}/AUTO_MERGE.lock",
  # ORIG_HEAD, FETCH_HEAD, CHERRY_PICK_HEAD, REVERT_HEAD, REBASE_HEAD, BISECT_HEAD and their locks; a
  # merge's, a bisection's state; a rebase's, a cherry-pick's or a revert's directory.
  "${GIT_DIR}/*_HEAD", "${GIT_DIR}/*_HEAD.lock", "${GIT_DIR}/MERGE_*", "${GIT_DIR}/BISECT_*",
  "${GIT_DIR}/rebase-merge", "${GIT_DIR}/rebase-apply", "${GIT_DIR}/sequencer",
  # Temporary indexes: `git stash`'s, and `git commit <paths>`'s.
  "${GIT_DIR}/index.stash.*", "${GIT_DIR}/next-index-*.lock",
]
# .git is readable with exactly git's own state writable (a deeper scope or a glob may add more); what
# decides what git runs is read-only, which no glob can lift. (In a linked worktree `.git` is the file
# naming its git dir.)
fs.read = [".git", "${GIT_DIR}", "${GIT_COMMON_DIR}"]
fs.read-only = [
  "${GIT_COMMON_DIR}/config", "${GIT_DIR}/config.worktree", "${GIT_DIR}/commondir", "${GIT_DIR}/gitdir",
  "${GIT_COMMON_DIR}/hooks/", "${GIT_COMMON_DIR}/info/", "${GIT_COMMON_DIR}/modules/",
  ".claude/", ".mcp.json", ".vscode/", ".idea/", ".envrc",
  # What git hook managers run on the user's next commit (pre-commit, lefthook).
  ".pre-commit-config.yaml", "lefthook.yml", ".lefthook.yml", "lefthook-local.yml",
  "~/.bashrc", "~/.bash_profile", "~/.bash_login", "~/.profile", "~/.bash_logout", "~/.zshrc",
  "~/.zshenv", "~/.zprofile", "~/.zlogin", "~/.config/fish/",
]

# Package caches: the programs the agent runs read the host's and write a private overlay of each, so
# `npm install`, `pip install` and `cargo fetch` work and the host's cache never changes (kept per agent
# with --persist-caches). A missing one is created empty at start, with its missing parents (~/.cache).
fs.cache = [
  "~/.npm", "~/.cache/pip", "~/.cache/uv", "~/.cargo/registry", "~/.cargo/git", "~/go/pkg/mod",
  "~/.m2/repository",
]

[profile.read-only]
extends = "system"
fs.read = ["${CWD}"]

# Seed 003: one agent per linked git worktree under .ittybitty/agents/<id>/. Its worktree and .ittybitty (logs)
# are writable, other agents' folders and the main repository's files are not; git commit still works,
# because exactly what it writes in the main repository's .git is granted (objects, branch refs and their
# logs, this worktree's own git dir). The agent's own file tools reach nothing else: the system and the
# toolchains under $HOME are `runtime`, readable by the programs its Bash runs, not by Read or Grep, and the
# rest of $HOME (other projects included) is not granted at all. Needs --worktree (and --agent);
# --repo-root defaults to the main repo.
[profile.worktree]
extends = "secrets"
base = "${REPO_ROOT}"
fs.runtime = [
  "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys",
  "/etc/resolv.conf",
  # What builds read from $HOME: git's identity, and the toolchains and package caches of cargo, rustup,
  # npm, pip, pyenv, nvm, go and bun (read-only: the agent's builds use them, never change them).
  "~/.gitconfig", "~/.config/git", "~/.cargo", "~/.rustup", "~/.npm", "~/.cache/pip",
  "~/.pyenv", "~/.nvm", "~/.local/bin", "~/.local/lib", "~/go", "~/.bun",
]
fs.write = [
  "${WORKTREE}", ".ittybitty", ".ittybitty/agents/${AGENT_ID}",
  ".git/objects", ".git/refs", ".git/logs", ".git/packed-refs", ".git/packed-refs.lock",
  "${WORKTREE_GITDIR}",
]
fs.read = [".git"]
# The worktree's .git names the git dir the policy was pinned to; .claude/ holds the installed hook. The
# worktree's own git dir is writable except what decides what git runs (commondir, gitdir,
# config.worktree); the rest is as in workspace-write.
fs.read-only = [
  "${WORKTREE}/.git", "${WORKTREE}/.claude/", "${WORKTREE}/.mcp.json", "${WORKTREE}/.vscode/",
  "${WORKTREE}/.idea/", "${WORKTREE}/.envrc", "${WORKTREE}/.pre-commit-config.yaml",
  "${WORKTREE}/lefthook.yml", "${WORKTREE}/.lefthook.yml", "${WORKTREE}/lefthook-local.yml",
  "${WORKTREE_GITDIR}/commondir", "${WORKTREE_GITDIR}/gitdir", "${WORKTREE_GITDIR}/config.worktree",
  "${WORKTREE_GITDIR}/hooks/", "${WORKTREE_GITDIR}/info/",
]
fs.deny = [
  "${REPO_ROOT}", ".ittybitty/agents",
  "~/.cargo/credentials", "~/.cargo/credentials.toml", "~/.config/git/credentials",
]

# The agent itself, confined whole: the project as in workspace-write, the agent's own state writable, its
# API reached only through a gateway that adds the key the supervisor holds, and no other host unless the
# user adds one (--net-allow). Inside, ANTHROPIC_BASE_URL points at the gateway and ANTHROPIC_API_KEY is a
# placeholder; the real key is read from stockade's own environment when the run starts.
[profile.claude-code]
extends = "workspace-write"
# Claude Code replaces ~/.claude.json by renaming a temporary file beside it.
fs.write = [
  "~/.claude", "~/.claude.json", "~/.claude.json.backup", "~/.claude.json.tmp.*", "~/.claude.json.lock",
  "~/.cache/claude",
]
env.set = { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1", DISABLE_AUTOUPDATER = "1" }
[profile.claude-code.gateway.anthropic]
upstream = "https://api.anthropic.com"
url-env = ["ANTHROPIC_BASE_URL"]
placeholder-env = ["ANTHROPIC_API_KEY"]
headers.x-api-key.env = "ANTHROPIC_API_KEY"

# The same for Codex: its state in ~/.codex, the OpenAI API through a gateway that adds the bearer token.
[profile.codex]
extends = "workspace-write"
fs.write = ["~/.codex"]
[profile.codex.gateway.openai]
upstream = "https://api.openai.com/v1"
url-env = ["OPENAI_BASE_URL"]
placeholder-env = ["OPENAI_API_KEY"]
headers.authorization = { env = "OPENAI_API_KEY", format = "Bearer {}" }

[profile.cross-project]
extends = "system"
fs.deny = ["~/.claude/skills/CORE/USER/"]
tools.allow = ["Read", "Glob", "Grep", "WebFetch"]
tools.deny = ["Bash", "Write", "Edit", "MultiEdit", "NotebookEdit", "mcp__*"]
tools.default = "deny"
"#;

/// [`BUILTIN_TOML`] with only the sections of `profile` and of the profiles it extends: every other line is
/// left empty, so that line numbers (which `explain` shows) stay those of the whole text. A launch, a hook
/// call or a file tool call then parses a third of it. `None` when `profile` has no section here.
pub(crate) fn builtin_text_for(profile: &str) -> Option<String> {
    // Each line with the profile whose section it is in (`None` before the first header).
    let sections: Vec<(Option<&str>, &str)> = {
        let mut current = None;
        BUILTIN_TOML
            .split_inclusive('\n')
            .map(|line| {
                if let Some(header) = line.strip_prefix("[profile.") {
                    current = header.split(['.', ']']).next();
                }
                (current, line)
            })
            .collect()
    };
    let extends = |name: &str| {
        sections
            .iter()
            .filter(|(section, _)| *section == Some(name))
            .find_map(|(_, line)| {
                let value = line.trim().strip_prefix("extends")?.trim_start();
                value
                    .strip_prefix('=')?
                    .trim()
                    .strip_prefix('"')?
                    .strip_suffix('"')
            })
    };
    if !sections
        .iter()
        .any(|(section, _)| *section == Some(profile))
    {
        return None;
    }
    let mut chain = vec![profile];
    while let Some(parent) = chain.last().and_then(|last| extends(last)) {
        if chain.contains(&parent) {
            break; // a loop: the resolution reports it
        }
        chain.push(parent);
    }
    Some(
        sections
            .iter()
            .map(|(section, line)| match section {
                Some(name) if !chain.contains(name) => "\n",
                _ => line,
            })
            .collect(),
    )
}
