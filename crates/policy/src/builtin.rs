//! Built-in profiles, written in the same TOML shape a user's file uses and loaded by the same code.
//!
//! `system` is the shared base (system directories readable, known secrets denied, a small environment);
//! it is not meant to be picked alone but can be. The three public ones are `workspace-write` (the
//! default), `read-only` and `cross-project`.

/// The names users may pick, in the order `--help` lists them.
pub const BUILTIN_PROFILES: &[&str] = &["workspace-write", "read-only", "cross-project", "system"];

/// The default profile when neither `--profile` nor a policy file picks one.
pub const DEFAULT_PROFILE: &str = "workspace-write";

/// The built-in policy source. Line numbers in `explain` refer to this text (`stockade profile show`).
pub const BUILTIN_TOML: &str = r#"
[profile.system]
base = "${CWD}"
fs.read = [
  "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
  "/etc", "/opt", "/sys",
  "${HOME}",
]
fs.deny = [
  "~/.ssh", "~/.aws", "~/.gnupg", "~/.config/gh", "~/.netrc", "~/.docker", "~/.kube",
  "~/.git-credentials", "~/.config/stockade", "~/.local/state/stockade",
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

[profile.workspace-write]
extends = "system"
fs.write = ["${CWD}"]
fs.read-only = [
  ".git/hooks/", ".git/config", ".claude/", ".mcp.json", ".vscode/", ".idea/",
  "~/.bashrc", "~/.bash_profile", "~/.bash_login", "~/.profile", "~/.zshrc", "~/.zshenv",
  "~/.zprofile", "~/.config/fish/",
]

[profile.read-only]
extends = "system"
fs.read = ["${CWD}"]

[profile.cross-project]
extends = "system"
fs.deny = ["~/.claude/skills/CORE/USER/"]
tools.allow = ["Read", "Glob", "Grep", "WebFetch"]
tools.deny = ["Bash", "Write", "Edit", "MultiEdit", "NotebookEdit", "mcp__*"]
tools.default = "deny"
"#;
