//! `stockade`: the command-line front end. The only crate that parses argv or prints for humans.

mod args;
mod audit_cmd;
mod explain;
mod fs_cmd;
mod hook;
mod install;
mod output;
mod policy_args;
mod quarantine_cmd;
mod quick_args;
mod run;
mod workspace_cmd;

use std::process::ExitCode;

use clap::Parser;

use args::{
    Cli, Command, ExtractOnly, GlobalArgs, HookOnly, HookTarget, InstallTarget, ProfileAction,
    QuarantineOnly, RunOnly, SchemaKind, SingleCli,
};

/// How stockade ends (DESIGN.md, "Command line"; the README lists every code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExitStatus {
    /// 0.
    Success,
    /// 1: a query answered "no" (e.g. `explain` of a denied access).
    No,
    /// 124: the time limit passed.
    Timeout,
    /// 125: a policy or usage error, or the sandbox could not be built.
    Usage,
    /// 126: the program cannot be executed.
    CannotExecute,
    /// 127: the program was not found.
    NotFound,
    /// The confined program's own code, or 128+N for signal N.
    External(u8),
}

impl From<ExitStatus> for ExitCode {
    fn from(s: ExitStatus) -> Self {
        ExitCode::from(match s {
            ExitStatus::Success => 0,
            ExitStatus::No => 1,
            ExitStatus::Timeout => 124,
            ExitStatus::Usage => 125,
            ExitStatus::CannotExecute => 126,
            ExitStatus::NotFound => 127,
            ExitStatus::External(c) => c,
        })
    }
}

fn main() -> ExitCode {
    // These start once per tool call, confined command or quarantined read: parse them with their own
    // flags only, and the usual lines of `hook` and `run` without clap at all (`quick_args`).
    match args::subcommand_name().as_deref() {
        Some("hook") => {
            let answer = |args, global: GlobalArgs| -> ExitCode {
                hook::claude(args, &policy_args::audit_log(global.audit_log.as_deref())).into()
            };
            let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
            if let Some((args, global)) = quick_args::hook(&argv) {
                return answer(args, global);
            }
            // A usage error of the hook still answers as a hook: it blocks.
            return match SingleCli::<HookOnly>::try_parse_from(argv) {
                Ok(SingleCli {
                    command:
                        HookOnly::Hook {
                            target: HookTarget::Claude(args),
                        },
                    global,
                }) => answer(args, global),
                Err(e) => hook::usage_failure(&e.to_string()),
            };
        }
        Some("run") => {
            let confine = |args, global: GlobalArgs| {
                let audit = policy_args::audit_log(global.audit_log.as_deref());
                finish(run::run(args, global.json, &audit))
            };
            let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
            if let Some((args, global)) = quick_args::run(&argv) {
                return confine(args, global);
            }
            return single(|RunOnly::Run(args), global| confine(args, global));
        }
        Some("quarantine") => {
            return single(|QuarantineOnly::Quarantine(args), global| {
                finish(quarantine_cmd::quarantine(
                    args,
                    &policy_args::audit_log(global.audit_log.as_deref()),
                ))
            });
        }
        Some("extract") => {
            return single(|ExtractOnly::Extract { files }, _| {
                finish(quarantine_cmd::extract(&files))
            });
        }
        _ => {}
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    let (json, audit) = (
        cli.global.json,
        policy_args::audit_log(cli.global.audit_log.as_deref()),
    );
    let result = match cli.command {
        Command::Run(args) => run::run(args, json, &audit),
        Command::Explain(args) => explain::explain(args, json),
        // `hook`, `quarantine` and `extract` are parsed by `SingleCli` above; reached only if argv and
        // `subcommand_name` disagree.
        Command::Hook {
            target: HookTarget::Claude(args),
        } => Ok(hook::claude(args, &audit)),
        Command::Install {
            target: InstallTarget::Claude(args),
        } => install::claude(args, json),
        Command::Audit(args) => audit_cmd::audit(args, json, &audit),
        Command::Schema {
            which: SchemaKind::Policy,
        } => {
            output::json_pretty(&stockade_policy::policy_schema());
            Ok(ExitStatus::Success)
        }
        Command::Schema {
            which: SchemaKind::FsContext,
        } => {
            output::json_pretty(&stockade_fs::context_schema());
            Ok(ExitStatus::Success)
        }
        Command::Schema {
            which: SchemaKind::Profile,
        } => {
            output::json_pretty(&stockade_quarantine::profile_schema());
            Ok(ExitStatus::Success)
        }
        Command::Schema {
            which: SchemaKind::TypedReference,
        } => {
            output::json_pretty(&stockade_quarantine::reference_schema());
            Ok(ExitStatus::Success)
        }
        Command::Quarantine(args) => quarantine_cmd::quarantine(args, &audit),
        Command::Extract { files } => quarantine_cmd::extract(&files),
        Command::Profile {
            action: ProfileAction::Validate { file },
        } => quarantine_cmd::validate(&file, json),
        Command::Orchestrator { settings, action } => {
            workspace_cmd::orchestrator(settings.as_deref(), action, json, &audit)
        }
        Command::Config { settings, action } => {
            workspace_cmd::config(settings.as_deref(), action, json)
        }
        Command::Workflow { settings, action } => {
            workspace_cmd::workflow(settings.as_deref(), action, json, &audit)
        }
        Command::Fs { tool } => fs_cmd::fs(tool, json, &audit),
        Command::Mcp(args) => fs_cmd::mcp(args, &audit),
        Command::Profile {
            action: ProfileAction::List,
        } => {
            for name in stockade_policy::BUILTIN_PROFILES {
                output::out(name);
            }
            Ok(ExitStatus::Success)
        }
        Command::Profile {
            action: ProfileAction::Show,
        } => {
            output::out(stockade_policy::BUILTIN_TOML.trim_start());
            Ok(ExitStatus::Success)
        }
    };
    finish(result)
}

/// The exit code for a subcommand's result; an error is printed and is a usage error (125).
/// Parses argv as the one subcommand `C` and runs it; a usage error is clap's, as for the full command line.
fn single<C: clap::Subcommand>(run: impl FnOnce(C, GlobalArgs) -> ExitCode) -> ExitCode {
    match SingleCli::<C>::try_parse() {
        Ok(SingleCli { command, global }) => run(command, global),
        Err(e) => usage_error(&e),
    }
}

fn finish(result: anyhow::Result<ExitStatus>) -> ExitCode {
    match result {
        Ok(status) => status.into(),
        Err(e) => {
            output::message(&output::describe(&e));
            ExitStatus::Usage.into()
        }
    }
}

/// clap's verdict on argv: help and version go to stdout (exit 0), errors to stderr (exit 125).
fn usage_error(e: &clap::Error) -> ExitCode {
    let _ = e.print();
    if e.use_stderr() {
        ExitStatus::Usage.into()
    } else {
        ExitStatus::Success.into()
    }
}
