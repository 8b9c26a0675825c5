//! The command line, as clap parses it. Nothing here is seen by the library crates: `policy_args` turns the
//! raw flags into a `PolicyBuilder`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Confine AI coding agents: one policy, enforced by the kernel, the hook and the file tools.
#[derive(Debug, Parser)]
#[command(name = "stockade", version, about, max_term_width = 100)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    #[command(flatten)]
    pub(crate) global: GlobalArgs,
}

/// Options every subcommand takes.
#[derive(Debug, Args)]
pub(crate) struct GlobalArgs {
    /// Output JSON instead of text (one object, or one object per line for streams).
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// The audit log (default: $STOCKADE_AUDIT_LOG, else $XDG_STATE_HOME/stockade/audit.jsonl).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) audit_log: Option<PathBuf>,
}

/// The subcommand argv names: its first argument that is not a global option or a global option's value.
pub(crate) fn subcommand_name() -> Option<String> {
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => {}
            "--audit-log" => {
                args.next();
            }
            other if other.starts_with("--audit-log=") => {}
            other => return Some(other.to_string()),
        }
    }
    None
}

/// The command line of one subcommand alone, for those that start once per tool call, confined command
/// or quarantined read: `hook`, `run`, `quarantine` and its reader `extract`. Each accepts exactly what
/// [`Cli`] accepts for that subcommand; building clap's model of every other subcommand was a visible share
/// of their start-up (0.3 ms), so `main` parses these invocations with it.
#[derive(Debug, Parser)]
#[command(name = "stockade", version, about, max_term_width = 100)]
pub(crate) struct SingleCli<C: Subcommand> {
    #[command(subcommand)]
    pub(crate) command: C,
    #[command(flatten)]
    pub(crate) global: GlobalArgs,
}

/// [`Command::Quarantine`], alone.
#[derive(Debug, Subcommand)]
pub(crate) enum QuarantineOnly {
    /// Read untrusted files (other projects' content) in a confined reader; print only the references
    /// whose provenance checks out, as JSON.
    Quarantine(QuarantineArgs),
}

/// [`Command::Extract`], alone.
#[derive(Debug, Subcommand)]
pub(crate) enum ExtractOnly {
    /// The built-in deterministic reader.
    Extract {
        /// Files to read.
        files: Vec<PathBuf>,
    },
}

/// [`Command::Run`], alone.
#[derive(Debug, Subcommand)]
pub(crate) enum RunOnly {
    /// Run a command confined by the kernel (built-in profile workspace-write unless told otherwise).
    Run(RunArgs),
}

/// [`Command::Hook`], alone.
#[derive(Debug, Subcommand)]
pub(crate) enum HookOnly {
    /// Agent-tool hooks (what Claude Code runs before each tool call).
    Hook {
        #[command(subcommand)]
        target: HookTarget,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a command confined by the kernel (built-in profile workspace-write unless told otherwise).
    Run(RunArgs),
    /// Say which rule decides an access to a path, and how each layer enforces it.
    Explain(ExplainArgs),
    /// Show refusals from the audit log, newest first.
    Audit(AuditArgs),
    /// Agent-tool hooks (what Claude Code runs before each tool call).
    Hook {
        #[command(subcommand)]
        target: HookTarget,
    },
    /// Install stockade into an agent's configuration.
    Install {
        #[command(subcommand)]
        target: InstallTarget,
    },
    /// Print a JSON Schema.
    Schema {
        /// Which schema.
        #[arg(value_enum)]
        which: SchemaKind,
    },
    /// Confined file tools from the command line (the same code the MCP server runs).
    Fs {
        #[command(subcommand)]
        tool: FsCommand,
    },
    /// Serve the confined file tools over MCP (stdio), for Claude Code's .mcp.json and other MCP clients.
    Mcp(FsRootArgs),
    /// Read untrusted files (other projects' content) in a confined reader; print only the references
    /// whose provenance checks out, as JSON.
    Quarantine(QuarantineArgs),
    /// The built-in deterministic reader: print the references in FILES as a JSON array (run confined by
    /// `stockade quarantine`; running it directly confines nothing).
    #[command(hide = true)]
    Extract {
        /// Files to read.
        files: Vec<PathBuf>,
    },
    /// Orchestrator workspaces: private and shared areas, and agents run with exactly that access.
    Orchestrator {
        /// The settings file (default: $STOCKADE_SETTINGS, else $XDG_CONFIG_HOME/stockade/settings.yaml).
        #[arg(long, global = true, value_name = "FILE")]
        settings: Option<PathBuf>,
        #[command(subcommand)]
        action: OrchestratorAction,
    },
    /// The orchestrator settings file.
    Config {
        /// The settings file (default: $STOCKADE_SETTINGS, else $XDG_CONFIG_HOME/stockade/settings.yaml).
        #[arg(long, global = true, value_name = "FILE")]
        settings: Option<PathBuf>,
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Workflows of an orchestrator.
    Workflow {
        /// The settings file (default: $STOCKADE_SETTINGS, else $XDG_CONFIG_HOME/stockade/settings.yaml).
        #[arg(long, global = true, value_name = "FILE")]
        settings: Option<PathBuf>,
        #[command(subcommand)]
        action: WorkflowAction,
    },
    /// Built-in profiles.
    Profile {
        #[command(subcommand)]
        action: ProfileAction,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum HookTarget {
    /// Claude Code's PreToolUse and PermissionRequest hook: hook JSON on stdin, the answer on stdout;
    /// exits 0 (allow, ask) or 2 (deny, and any failure to judge).
    Claude(HookArgs),
}

#[derive(Debug, Subcommand)]
pub(crate) enum InstallTarget {
    /// Write (or merge) the hook into a Claude Code settings file: matcher `*`, for PreToolUse and
    /// PermissionRequest, as `'/abs/stockade' hook claude ... || exit 2` so that a missing binary, a crash or
    /// a timeout still blocks.
    Claude(InstallArgs),
}

#[derive(Debug, Args)]
pub(crate) struct InstallArgs {
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// The settings file (default: WORKTREE/.claude/settings.json with --worktree, else ./.claude/settings.json).
    #[arg(long, value_name = "FILE")]
    pub(crate) settings: Option<std::path::PathBuf>,
    /// Seconds Claude Code waits for the hook before giving up (which then blocks, through `|| exit 2`).
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub(crate) hook_timeout: u32,
}

/// The hook's `--deadline` when none is given.
pub(crate) const DEFAULT_DEADLINE: &str = "5s";

#[derive(Debug, Args)]
pub(crate) struct HookArgs {
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// Explain the decision for a human instead of answering Claude Code.
    #[arg(long)]
    pub(crate) explain: bool,
    /// Answer deny by this time after starting if judging has not finished (slow filesystem, huge
    /// command): Claude Code lets a call through when a hook outlives its timeout, so this must be shorter
    /// than the installed timeout (`install` sets both).
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_DEADLINE)]
    pub(crate) deadline: String,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum SchemaKind {
    /// The policy file (TOML).
    Policy,
    /// The file tools' context (`workingDirectory`, `environment`, `group`, `technology`).
    FsContext,
    /// The quarantine reader's tool profile (JSON).
    Profile,
    /// A reference a quarantined reader reports.
    TypedReference,
}

#[derive(Debug, Subcommand)]
pub(crate) enum OrchestratorAction {
    /// Add an orchestrator: zero grants, its private workspace and orchestrator.yaml created.
    Add {
        /// Its id (one path component).
        id: String,
        /// A private workspace other than WORKSPACES_PATH/ID.
        #[arg(long, value_name = "DIR")]
        private_workspace: Option<PathBuf>,
    },
    /// Grant a shared area (defined in settings.shared_workspaces) to an orchestrator.
    Grant {
        /// The orchestrator.
        id: String,
        /// The shared area.
        area: String,
        /// Read-only access (default: read-write).
        #[arg(long)]
        read_only: bool,
    },
    /// Revoke a shared area from an orchestrator.
    Revoke {
        /// The orchestrator.
        id: String,
        /// The shared area.
        area: String,
    },
    /// Override an orchestrator's private workspace.
    SetWorkspace {
        /// The orchestrator.
        id: String,
        /// An absolute path.
        path: PathBuf,
    },
    /// Remove the override: back to WORKSPACES_PATH/ID.
    UnsetWorkspace {
        /// The orchestrator.
        id: String,
    },
    /// Show an orchestrator's private path and shared access.
    Show {
        /// The orchestrator.
        id: String,
    },
    /// List the orchestrators.
    List,
    /// Run one agent with the orchestrator's access (CWD: its private workspace).
    Exec {
        /// The orchestrator.
        id: String,
        /// Run in PRIVATE/work/runs/RUN_ID instead of the private workspace root.
        #[arg(long)]
        run_workspace: bool,
        /// The run id (default: generated).
        #[arg(long, value_name = "ID")]
        run_id: Option<String>,
        /// Time limit (30s, 5m).
        #[arg(long, value_name = "DURATION")]
        timeout: Option<String>,
        /// The command.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigAction {
    /// Create the settings file.
    Init {
        /// Where private workspaces go (absolute).
        workspaces_path: PathBuf,
    },
    /// Check every rule; exit 1 listing every problem.
    Validate,
}

#[derive(Debug, Subcommand)]
pub(crate) enum WorkflowAction {
    /// Run a workflow's steps in order, each confined to the orchestrator's access.
    Run {
        /// The orchestrator.
        id: String,
        /// The workflow (in its orchestrator.yaml).
        workflow: String,
        /// The run id (default: generated).
        #[arg(long, value_name = "ID")]
        run_id: Option<String>,
    },
}

/// Which built-in reader `stockade quarantine` runs.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ReaderKind {
    /// stockade's deterministic reader (no model; URLs, paths, packages, ... with provenance).
    Extract,
    /// The seed's `k cross-project FILES`.
    K,
    /// Claude Code in print mode, restricted to the profile's tools.
    Claude,
}

#[derive(Debug, Args)]
pub(crate) struct QuarantineArgs {
    /// The untrusted files.
    pub(crate) files: Vec<PathBuf>,
    /// The reader.
    #[arg(long, value_enum, default_value = "extract")]
    pub(crate) reader: ReaderKind,
    /// Any reader program instead (it gets the files as arguments and prints a JSON array).
    #[arg(long, value_name = "PROGRAM", conflicts_with = "reader")]
    pub(crate) command: Option<String>,
    /// A cross-project profile (JSON; default: the built-in `cross-project`).
    #[arg(long = "profile", value_name = "FILE")]
    pub(crate) profile_file: Option<PathBuf>,
    /// Time limit for the reader (30s, 2m).
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub(crate) timeout: String,
    /// Cap on the reader's stdout.
    #[arg(long, value_name = "SIZE", default_value = "1MiB")]
    pub(crate) max_output: String,
    /// Pass this variable of your environment to the reader (repeatable; e.g. ANTHROPIC_MODEL,
    /// ANTHROPIC_CUSTOM_HEADERS). Credentials are refused: the claude reader's gateway adds
    /// $ANTHROPIC_API_KEY outside, and $ANTHROPIC_BASE_URL is always that gateway's upstream.
    #[arg(long, value_name = "NAME")]
    pub(crate) pass_env: Vec<String>,
    /// Let the reader reach this host (repeatable; `example.com`, `*.example.com`, optional `:port`),
    /// through stockade's proxy, when the profile allows WebFetch. Default: no host at all.
    #[arg(long, value_name = "HOST")]
    pub(crate) net_allow: Vec<String>,
}

/// The directory the file tools are confined to, and the policy inside it.
#[derive(Debug, Args, Clone)]
#[command(group = clap::ArgGroup::new("where").required(true).args(["root", "repos_path"]))]
pub(crate) struct FsRootArgs {
    /// The directory the tools are confined to (granted read; see --write).
    #[arg(long, value_name = "DIR")]
    pub(crate) root: Option<PathBuf>,
    /// The seed's context: the root is REPOS/GROUP/TECHNOLOGY and every path must be relative.
    #[arg(long, value_name = "REPOS", requires_all = ["group", "technology"], conflicts_with = "root")]
    pub(crate) repos_path: Option<PathBuf>,
    /// The technology group (one path component).
    #[arg(long, value_name = "NAME", requires = "repos_path")]
    pub(crate) group: Option<String>,
    /// The technology, i.e. the repository (one path component).
    #[arg(long, value_name = "NAME", requires = "repos_path")]
    pub(crate) technology: Option<String>,
    /// The optional environment identifier of the context.
    #[arg(long, value_name = "NAME", requires = "repos_path")]
    pub(crate) environment: Option<String>,
    /// Grant write beneath the root (the write tools are offered only where something is writable).
    #[arg(long)]
    pub(crate) write: bool,
    /// Refuse absolute paths even inside the root (always so with --repos-path).
    #[arg(long)]
    pub(crate) relative_only: bool,
    /// A policy whose scopes apply inside the root too (deny, read-only, write grants).
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
}

/// Walk flags shared by `fs find` and `fs grep`.
#[derive(Debug, Args, Clone)]
pub(crate) struct WalkArgs {
    /// Directory (or, for grep, file) to start from, relative to the root.
    #[arg(long, value_name = "PATH", default_value = ".")]
    pub(crate) path: String,
    /// Levels below the start (1: its entries only).
    #[arg(long, value_name = "N")]
    pub(crate) max_depth: Option<usize>,
    /// Stop after this many results.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub(crate) max_results: usize,
    /// Include names starting with `.` (`.git` is never entered).
    #[arg(long)]
    pub(crate) hidden: bool,
    /// Do not honour .gitignore and .ignore files.
    #[arg(long)]
    pub(crate) no_ignore: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum FsCommand {
    /// List a directory.
    List {
        #[command(flatten)]
        root: FsRootArgs,
        /// Relative to the root.
        #[arg(default_value = ".")]
        path: String,
    },
    /// Print a text file, or a line range of it.
    Read {
        #[command(flatten)]
        root: FsRootArgs,
        /// Relative to the root.
        path: String,
        /// Lines START:END (1-based, inclusive; either side may be empty).
        #[arg(long, value_name = "START:END")]
        lines: Option<String>,
        /// Cap on bytes printed.
        #[arg(long, value_name = "N", default_value_t = stockade_fs::DEFAULT_MAX_READ_BYTES)]
        max_bytes: u64,
    },
    /// Find paths matching globs.
    Find {
        #[command(flatten)]
        root: FsRootArgs,
        /// Globs relative to the root (`src/**/*.rs`, `*.toml`); none: everything.
        patterns: Vec<String>,
        #[command(flatten)]
        walk: WalkArgs,
    },
    /// Search file contents (like rg, confined).
    Grep {
        #[command(flatten)]
        root: FsRootArgs,
        /// A regular expression (or text with -F).
        pattern: String,
        /// Only files matching this glob (repeatable).
        #[arg(long, value_name = "GLOB")]
        glob: Vec<String>,
        /// Treat the pattern as literal text.
        #[arg(short = 'F', long)]
        fixed_strings: bool,
        /// Ignore case.
        #[arg(short = 'i', long)]
        ignore_case: bool,
        /// Ignore case unless the pattern has an uppercase letter.
        #[arg(short = 'S', long)]
        smart_case: bool,
        /// Lines of context around each match.
        #[arg(short = 'C', long, value_name = "N", default_value_t = 0)]
        context: usize,
        #[command(flatten)]
        walk: WalkArgs,
    },
    /// Metadata of a path.
    Info {
        #[command(flatten)]
        root: FsRootArgs,
        /// Relative to the root.
        path: String,
    },
    /// The tree beneath a directory.
    Tree {
        #[command(flatten)]
        root: FsRootArgs,
        /// Relative to the root.
        #[arg(default_value = ".")]
        path: String,
        /// Levels to show.
        #[arg(long, value_name = "N", default_value_t = 3)]
        depth: usize,
    },
    /// Write stdin to a file (needs --write or a policy granting write).
    Write {
        #[command(flatten)]
        root: FsRootArgs,
        /// Relative to the root.
        path: String,
    },
    /// Replace text in a file: --old must occur exactly once.
    Edit {
        #[command(flatten)]
        root: FsRootArgs,
        /// Relative to the root.
        path: String,
        /// Text to find.
        #[arg(long)]
        old: String,
        /// Text to put in its place.
        #[arg(long)]
        new: String,
    },
    /// Create a directory and its missing parents.
    Mkdir {
        #[command(flatten)]
        root: FsRootArgs,
        /// Relative to the root.
        path: String,
    },
    /// Move or rename; the destination must not exist.
    Mv {
        #[command(flatten)]
        root: FsRootArgs,
        /// What to move.
        source: String,
        /// Where to.
        destination: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ProfileAction {
    /// List the built-in profiles.
    List,
    /// Print the built-in profiles' source (the lines `explain` refers to).
    Show,
    /// Check a quarantine (cross-project) profile file; every problem names its field.
    Validate {
        /// The JSON profile.
        file: PathBuf,
    },
}

/// Which policy, and scopes added on top of it.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct PolicyArgs {
    /// A TOML policy file.
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
    /// The profile (built-in: workspace-write, read-only, cross-project; or one in --policy).
    #[arg(long, value_name = "NAME")]
    pub(crate) profile: Option<String>,
    /// The agent id: sets ${AGENT_ID} and picks [profile.ID] when the file has one.
    #[arg(long, value_name = "ID")]
    pub(crate) agent: Option<String>,
    /// Grant read and write on a path or glob.
    #[arg(long = "rw", value_name = "PATH")]
    pub(crate) rw: Vec<String>,
    /// Grant read on a path or glob.
    #[arg(long = "ro", value_name = "PATH")]
    pub(crate) ro: Vec<String>,
    /// Make a path or glob read-only, even inside a writable tree.
    #[arg(long = "read-only", value_name = "PATH")]
    pub(crate) read_only: Vec<String>,
    /// Deny a path or glob, even inside a granted tree.
    #[arg(long, value_name = "PATH")]
    pub(crate) deny: Vec<String>,
    /// The directory ${CWD} means (default: the current directory). The hook pins it to the project, so an
    /// agent's own `cd` never moves its scope.
    #[arg(long, value_name = "DIR")]
    pub(crate) project: Option<PathBuf>,
    /// ${REPO_ROOT} for policies that use it.
    #[arg(long, value_name = "DIR")]
    pub(crate) repo_root: Option<PathBuf>,
    /// ${WORKTREE} for policies that use it.
    #[arg(long, value_name = "DIR")]
    pub(crate) worktree: Option<PathBuf>,
    /// ${WORKTREE_GITDIR}: the linked worktree's git dir (default, for `run` and `install` only: read from
    /// WORKTREE/.git at start). The hook never reads that file, which the agent can write: `install` pins
    /// this value into the command it installs.
    #[arg(long, value_name = "DIR")]
    pub(crate) worktree_gitdir: Option<PathBuf>,
    /// ${GIT_DIR}: the project's git dir, when it is a linked worktree (default, for `run` and `install`
    /// only: read from CWD/.git at start; otherwise CWD/.git). `install` pins it
    #[arg(long, value_name = "DIR")]
    pub(crate) git_dir: Option<PathBuf>,
    /// ${GIT_COMMON_DIR}: the repository's .git, when the project is a linked worktree (default, for `run`
    /// and `install` only: read from the git dir's `commondir` at start; otherwise CWD/.git). `install`
    /// pins it
    #[arg(long, value_name = "DIR")]
    pub(crate) git_common_dir: Option<PathBuf>,
    /// ${HOME} (default: $HOME). `install` pins it, so no later environment changes a decision.
    #[arg(long, value_name = "DIR")]
    pub(crate) home: Option<PathBuf>,
    /// Take every variable from these flags and read nothing the agent can write (WORKTREE/.git). The
    /// hook always works this way; the commands stockade builds for it (the sandboxed Bash) pass this.
    #[arg(long)]
    pub(crate) pinned: bool,
}

#[derive(Debug, Args, Default)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// Set a variable in the confined environment (K=V). Never put secrets here: use --env-file.
    #[arg(long = "env", value_name = "K=V")]
    pub(crate) env: Vec<String>,
    /// Read K=V lines (comments with #) into the confined environment; keeps secrets out of argv.
    #[arg(long = "env-file", value_name = "FILE")]
    pub(crate) env_file: Vec<PathBuf>,
    /// Pass a variable from this environment.
    #[arg(long = "pass-env", value_name = "NAME")]
    pub(crate) pass_env: Vec<String>,
    /// Allow all network access (default: none, or the profile's allowlist).
    #[arg(long)]
    pub(crate) net: bool,
    /// Let the program reach this host through stockade's proxy: `example.com`, `*.example.com`
    /// (subdomains), or an IP address, each with an optional `:port`. Adds to the profile's allowlist
    #[arg(long, value_name = "HOST")]
    pub(crate) net_allow: Vec<String>,
    /// Refuse this host even where an allow rule matches (same forms as --net-allow)
    #[arg(long, value_name = "HOST")]
    pub(crate) net_deny: Vec<String>,
    /// Keep what programs write to the policy's caches (fs.cache: ~/.npm, ~/.cache/pip, ...) for this
    /// agent's next run, in $XDG_STATE_HOME/stockade/caches/AGENT, AGENT being the --agent id or else the
    /// profile (default: each run's writes vanish with it). The host's caches never change either way.
    #[arg(long)]
    pub(crate) persist_caches: bool,
    /// Where the program starts (default: ${CWD}, the project); it must be visible under the policy.
    #[arg(long, value_name = "DIR")]
    pub(crate) cwd: Option<PathBuf>,
    /// Hand this process's descriptor N, which must be a pipe, to the program as its descriptor 3 (for it
    /// to report back, e.g. its final directory: the sandboxed Bash of the hook uses it).
    #[arg(long, value_name = "N")]
    pub(crate) pass_fd: Option<i32>,
    /// Time limit (30s, 5m, 1h); exit 124 when reached.
    #[arg(long, value_name = "DURATION")]
    pub(crate) timeout: Option<String>,
    /// Memory limit per process (data segment), e.g. 2GiB.
    #[arg(long, value_name = "SIZE")]
    pub(crate) memory: Option<String>,
    /// Process and thread limit (needs a non-root uid: see --user).
    #[arg(long, value_name = "N")]
    pub(crate) pids: Option<u64>,
    /// Limit on bytes of stdout and of stderr each, e.g. 16MiB.
    #[arg(long, value_name = "SIZE")]
    pub(crate) max_output: Option<String>,
    /// Largest file the program may write, e.g. 1GiB.
    #[arg(long, value_name = "SIZE")]
    pub(crate) max_file_size: Option<String>,
    /// Run even where the kernel cannot enforce everything (weaker; says what is missing).
    #[arg(long)]
    pub(crate) best_effort: bool,
    /// Check everything and print what the sandbox would contain (mounts, Landlock rules, environment
    /// names, limits) without running the command.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// When started as root, run the program as this unprivileged user.
    #[arg(long, value_name = "NAME")]
    pub(crate) user: Option<String>,
    /// The command and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub(crate) command: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub(crate) struct ExplainArgs {
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// Explain reading this path.
    #[arg(long = "read", value_name = "PATH", conflicts_with = "write_path")]
    pub(crate) read_path: Option<PathBuf>,
    /// Explain writing this path.
    #[arg(long = "write", value_name = "PATH")]
    pub(crate) write_path: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct AuditArgs {
    /// Only records newer than this: a duration (30m, 1h, 2d) or a timestamp.
    #[arg(long, value_name = "WHEN")]
    pub(crate) since: Option<String>,
    /// Only this agent.
    #[arg(long, value_name = "ID")]
    pub(crate) agent: Option<String>,
    /// Only this layer (kernel, hook, fs, quarantine, workspace, net).
    #[arg(long, value_name = "LAYER")]
    pub(crate) layer: Option<String>,
    /// At most this many records.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub(crate) limit: usize,
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::{Cli, ExtractOnly, HookOnly, QuarantineOnly, RunOnly, SingleCli};

    /// `main` parses `hook` and `run` with their own parsers: each must accept and refuse exactly what the
    /// full command line does for that subcommand, wherever the global options are written.
    #[test]
    fn the_single_subcommand_parsers_agree_with_the_full_one() {
        Cli::command().debug_assert();
        SingleCli::<HookOnly>::command().debug_assert();
        SingleCli::<RunOnly>::command().debug_assert();
        SingleCli::<QuarantineOnly>::command().debug_assert();
        SingleCli::<ExtractOnly>::command().debug_assert();
        let hooks: &[&[&str]] = &[
            &["hook", "claude"],
            &["--json", "hook", "claude", "--agent", "a1"],
            &[
                "--audit-log",
                "/x",
                "hook",
                "claude",
                "--policy",
                "p.toml",
                "--explain",
            ],
            &[
                "hook",
                "claude",
                "--audit-log=/x",
                "--rw",
                "src",
                "--deny",
                "**/.env",
            ],
            &["hook", "claude", "--no-such-flag"],
            &["hook", "codex"],
            &["hook"],
        ];
        let runs: &[&[&str]] = &[
            &["run", "--", "true"],
            &[
                "--json",
                "run",
                "--net",
                "--timeout",
                "5s",
                "--",
                "sh",
                "-c",
                "x",
            ],
            &["run", "--audit-log", "/x", "--rw", "src", "--", "true"],
            &[
                "run",
                "--profile",
                "read-only",
                "--json",
                "--",
                "cargo",
                "metadata",
            ],
            &["run", "--bogus"],
            &["run"],
        ];
        let quarantines: &[&[&str]] = &[
            &["quarantine", "a.yaml", "b.md"],
            &[
                "--json",
                "quarantine",
                "--reader",
                "claude",
                "--timeout",
                "60s",
                "a",
            ],
            &["quarantine", "--audit-log", "/x", "--command", "./r", "a"],
            &["quarantine", "--reader", "nobody", "a"],
            &["quarantine", "--bogus", "a"],
            &["extract", "a.yaml", "b.md"],
            &["extract", "--json", "a"],
            &["extract", "--bogus"],
        ];
        fn own<C: clap::Subcommand>(argv: &[&str]) -> bool {
            SingleCli::<C>::try_parse_from(std::iter::once("stockade").chain(argv.iter().copied()))
                .is_ok()
        }
        let cases = hooks
            .iter()
            .map(|a| (a, own::<HookOnly>(a)))
            .chain(runs.iter().map(|a| (a, own::<RunOnly>(a))))
            .chain(quarantines.iter().map(|a| {
                let parsed = if a[..].contains(&"extract") {
                    own::<ExtractOnly>(a)
                } else {
                    own::<QuarantineOnly>(a)
                };
                (a, parsed)
            }));
        for (argv, own) in cases {
            let full = Cli::try_parse_from(std::iter::once("stockade").chain(argv.iter().copied()))
                .is_ok();
            assert_eq!(own, full, "{argv:?}");
        }
    }
}
