//! `stockade fs ...` and `stockade mcp`: the confined file tools, from the command line and over MCP.

use std::io::{Read, Write};
use std::sync::Arc;

use anyhow::Context;
use stockade_audit::{AuditLog, AuditRecord, Layer};
use stockade_fs::{
    Edit, FindOptions, FsContext, FsError, GrepOptions, PathMode, ReadOptions, Root, RootOptions,
    WalkLimits,
};
use stockade_mcp::FsServer;

use crate::ExitStatus;
use crate::args::{FsCommand, FsRootArgs, PolicyArgs, WalkArgs};
use crate::output;
use crate::policy_args;

/// Opens the root the flags name, with their policy.
pub(crate) fn open_root(args: &FsRootArgs) -> anyhow::Result<Root> {
    let context = match (&args.repos_path, &args.group, &args.technology) {
        (Some(repos), Some(group), Some(technology)) => Some(FsContext::new(
            repos,
            group,
            technology,
            args.environment.as_deref(),
        )?),
        _ => None,
    };
    let dir = match (&context, &args.root) {
        (Some(context), _) => context.working_directory.clone(),
        (None, Some(root)) => root.clone(),
        (None, None) => {
            anyhow::bail!("give --root DIR, or --repos-path with --group and --technology")
        }
    };
    let options = RootOptions {
        write: args.write,
        path_mode: if args.relative_only || context.is_some() {
            PathMode::RelativeOnly
        } else {
            PathMode::InsideRoot
        },
        policy: policy_for(&args.policy, &dir)?,
    };
    let root = match &context {
        Some(context) => context.open(options)?,
        None => Root::open(&dir, options)?,
    };
    Ok(root)
}

/// The policy the flags ask for inside the root; `None` when they ask for none (the root alone).
fn policy_for(
    args: &PolicyArgs,
    dir: &std::path::Path,
) -> anyhow::Result<Option<stockade_policy::PolicyBuilder>> {
    let any = args.policy.is_some()
        || args.profile.is_some()
        || !(args.rw.is_empty()
            && args.ro.is_empty()
            && args.read_only.is_empty()
            && args.deny.is_empty());
    if !any {
        return Ok(None);
    }
    let mut scoped = args.clone();
    // ${CWD} is the root unless --project says otherwise: a policy's relative paths mean the root.
    if scoped.project.is_none() {
        scoped.project = Some(std::path::absolute(dir).context("cannot make the root absolute")?);
    }
    let vars = policy_args::variables(&scoped, true)?;
    let mut builder = policy_args::builder(&scoped, vars);
    if args.policy.is_none() && args.profile.is_none() {
        // Flags alone: start from nothing, not from workspace-write (which would grant the root write).
        builder.policy_text("[profile.flags]\n", "<command line>");
    }
    Ok(Some(builder))
}

fn audit_refusal(audit: &AuditLog, agent: Option<&str>, tool: &str, error: &FsError) {
    if !error.is_refusal() {
        return;
    }
    let mut record = AuditRecord::new(Layer::Fs, error.to_string())
        .maybe_agent(agent)
        .tool(tool);
    if let Some(path) = error.path() {
        record = record.path(path);
    }
    if let Some(denial) = error.denial() {
        record = record
            .path(denial.path.display().to_string())
            .access(denial.access.to_string());
        if let Some(rule) = &denial.rule {
            record = record.rule(rule.clone());
        }
    }
    if let Err(e) = audit.append(&record) {
        output::message(&e.to_string());
    }
}

/// `stockade mcp`.
pub(crate) fn mcp(args: FsRootArgs, audit: &AuditLog) -> anyhow::Result<ExitStatus> {
    let root = open_root(&args)?;
    let audit = audit.clone();
    let agent = args.policy.agent.clone();
    let server = FsServer::new(root).on_refusal(Arc::new(move |tool, error| {
        audit_refusal(&audit, agent.as_deref(), tool, error);
    }));
    server.serve_stdio().context("the MCP server failed")?;
    Ok(ExitStatus::Success)
}

fn limits(walk: &WalkArgs) -> WalkLimits {
    WalkLimits {
        path: walk.path.clone(),
        max_depth: walk.max_depth,
        max_results: walk.max_results,
        hidden: walk.hidden,
        gitignore: !walk.no_ignore,
        ..WalkLimits::default()
    }
}

fn parse_lines(text: &str) -> anyhow::Result<(Option<usize>, Option<usize>)> {
    let (start, end) = text
        .split_once(':')
        .with_context(|| format!("--lines {text:?}: write START:END, e.g. 10:40, 10: or :40"))?;
    let number = |s: &str| -> anyhow::Result<Option<usize>> {
        if s.is_empty() {
            return Ok(None);
        }
        let n: usize = s
            .parse()
            .with_context(|| format!("--lines {text:?}: {s:?} is not a line number"))?;
        anyhow::ensure!(n > 0, "--lines {text:?}: lines are numbered from 1");
        Ok(Some(n))
    };
    Ok((number(start)?, number(end)?))
}

fn root_args(command: &FsCommand) -> &FsRootArgs {
    match command {
        FsCommand::List { root, .. }
        | FsCommand::Read { root, .. }
        | FsCommand::Find { root, .. }
        | FsCommand::Grep { root, .. }
        | FsCommand::Info { root, .. }
        | FsCommand::Tree { root, .. }
        | FsCommand::Write { root, .. }
        | FsCommand::Edit { root, .. }
        | FsCommand::Mkdir { root, .. }
        | FsCommand::Mv { root, .. } => root,
    }
}

/// `stockade fs TOOL`. A refusal or a missing file exits 1 with the reason; bad flags or policy exit 125.
pub(crate) fn fs(command: FsCommand, json: bool, audit: &AuditLog) -> anyhow::Result<ExitStatus> {
    let args = root_args(&command);
    let root = open_root(args)?;
    let agent = args.policy.agent.clone();
    let (tool, result) = run_tool(&root, &command, json);
    match result {
        Ok(status) => Ok(status),
        Err(error) => {
            audit_refusal(audit, agent.as_deref(), tool, &error);
            match error {
                FsError::InvalidArgument { .. } | FsError::InvalidContext { .. } => {
                    Err(error.into())
                }
                error => {
                    if json {
                        output::json(&serde_json::json!({
                            "error": error.code(),
                            "message": error.to_string(),
                            "path": error.path(),
                        }));
                    }
                    output::message(&error.to_string());
                    Ok(ExitStatus::No)
                }
            }
        }
    }
}

fn run_tool(
    root: &Root,
    command: &FsCommand,
    json: bool,
) -> (&'static str, Result<ExitStatus, FsError>) {
    let print = |value: &dyn Fn() -> serde_json::Value, text: &dyn Fn() -> String| {
        if json {
            output::json(&value());
        } else {
            output::out(&text());
        }
    };
    // write_file and edit_file answer alike.
    let print_written = |outcome: &stockade_fs::WriteOutcome| {
        print(
            &|| serde_json::to_value(outcome).unwrap_or_default(),
            &|| {
                format!(
                    "{} {} ({} bytes)",
                    outcome.action, outcome.path, outcome.bytes
                )
            },
        );
    };
    match command {
        FsCommand::List { path, .. } => (
            "list_directory",
            (|| {
                let listing = root.list_directory(path, stockade_fs::DEFAULT_MAX_ENTRIES, json)?;
                print(
                    &|| serde_json::to_value(&listing).unwrap_or_default(),
                    &|| {
                        listing
                            .entries
                            .iter()
                            .map(|e| format!("{}{}", e.name, e.kind.suffix()))
                            .collect::<Vec<_>>()
                            .join("\n")
                    },
                );
                Ok(ExitStatus::Success)
            })(),
        ),
        FsCommand::Read {
            path,
            lines,
            max_bytes,
            ..
        } => (
            "read_file",
            (|| {
                let (start_line, end_line) = match lines.as_deref().map(parse_lines).transpose() {
                    Ok(range) => range.unwrap_or_default(),
                    Err(e) => {
                        return Err(FsError::InvalidArgument {
                            what: "--lines",
                            reason: format!("{e:#}"),
                        });
                    }
                };
                let content = root.read_file(
                    path,
                    ReadOptions {
                        start_line,
                        end_line,
                        max_bytes: *max_bytes,
                    },
                )?;
                if json {
                    output::json(&content);
                } else {
                    let mut stdout = std::io::stdout().lock();
                    let _ = stdout.write_all(content.content.as_bytes());
                    let _ = stdout.flush();
                    if content.truncated {
                        output::message(&format!(
                            "{}: output cut at {} bytes (file is {} bytes); use --lines or --max-bytes",
                            content.path, max_bytes, content.size
                        ));
                    }
                }
                Ok(ExitStatus::Success)
            })(),
        ),
        FsCommand::Find { patterns, walk, .. } => (
            "find_files",
            (|| {
                let found = root.find_files(&FindOptions {
                    patterns: patterns.clone(),
                    kind: None,
                    limits: limits(walk),
                })?;
                print(
                    &|| serde_json::to_value(&found).unwrap_or_default(),
                    &|| {
                        found
                            .matches
                            .iter()
                            .map(|m| m.path.as_str())
                            .collect::<Vec<_>>()
                            .join("\n")
                    },
                );
                truncation_note(found.truncated);
                Ok(if found.matches.is_empty() {
                    ExitStatus::No
                } else {
                    ExitStatus::Success
                })
            })(),
        ),
        FsCommand::Grep {
            pattern,
            glob,
            fixed_strings,
            ignore_case,
            smart_case,
            context,
            walk,
            ..
        } => (
            "grep",
            (|| {
                let found = root.grep(&GrepOptions {
                    pattern: pattern.clone(),
                    fixed_string: *fixed_strings,
                    case_insensitive: *ignore_case,
                    smart_case: *smart_case,
                    context: *context,
                    globs: glob.clone(),
                    max_file_size: None,
                    limits: limits(walk),
                })?;
                if json {
                    output::json(&found);
                } else {
                    // Like rg: path:line:text, context lines as path-line-text.
                    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
                    for m in &found.matches {
                        for (i, line) in m.before.iter().enumerate() {
                            let n = m.line_number as usize - m.before.len() + i;
                            let _ = writeln!(out, "{}-{n}-{line}", m.path);
                        }
                        let _ = writeln!(out, "{}:{}:{}", m.path, m.line_number, m.line);
                        for (i, line) in m.after.iter().enumerate() {
                            let _ = writeln!(
                                out,
                                "{}-{}-{line}",
                                m.path,
                                m.line_number as usize + i + 1
                            );
                        }
                    }
                    let _ = out.flush();
                }
                truncation_note(found.truncated);
                Ok(if found.matches.is_empty() {
                    ExitStatus::No
                } else {
                    ExitStatus::Success
                })
            })(),
        ),
        FsCommand::Info { path, .. } => (
            "file_info",
            (|| {
                let info = root.file_info(path)?;
                print(&|| serde_json::to_value(&info).unwrap_or_default(), &|| {
                    format!(
                        "path: {}\nkind: {:?}\nsize: {}\nmode: {}\nmodified: {}\nwritable: {}",
                        info.path, info.kind, info.size, info.mode, info.modified, info.writable
                    )
                });
                Ok(ExitStatus::Success)
            })(),
        ),
        FsCommand::Tree { path, depth, .. } => (
            "directory_tree",
            (|| {
                let tree = root.directory_tree(path, *depth, stockade_fs::DEFAULT_MAX_ENTRIES)?;
                print(&|| serde_json::to_value(&tree).unwrap_or_default(), &|| {
                    let mut text = format!("{}\n", tree.path);
                    draw(
                        &mut text,
                        tree.root.children.as_deref().unwrap_or_default(),
                        "",
                    );
                    text
                });
                truncation_note(tree.truncated);
                Ok(ExitStatus::Success)
            })(),
        ),
        FsCommand::Write { path, .. } => (
            "write_file",
            (|| {
                let mut content = String::new();
                std::io::stdin()
                    .read_to_string(&mut content)
                    .map_err(|source| FsError::Io {
                        path: "<stdin>".to_string(),
                        source,
                    })?;
                let outcome = root.write_file(path, &content)?;
                print_written(&outcome);
                Ok(ExitStatus::Success)
            })(),
        ),
        FsCommand::Edit { path, old, new, .. } => (
            "edit_file",
            (|| {
                let edit = Edit {
                    old_text: old.clone(),
                    new_text: new.clone(),
                };
                let outcome = root.edit_file(path, &[edit])?;
                print_written(&outcome);
                Ok(ExitStatus::Success)
            })(),
        ),
        FsCommand::Mkdir { path, .. } => (
            "create_directory",
            (|| {
                let outcome = root.create_directory(path)?;
                print(
                    &|| serde_json::to_value(&outcome).unwrap_or_default(),
                    &|| format!("{} {}", outcome.action, outcome.path),
                );
                Ok(ExitStatus::Success)
            })(),
        ),
        FsCommand::Mv {
            source,
            destination,
            ..
        } => (
            "move_file",
            (|| {
                let outcome = root.move_file(source, destination)?;
                print(
                    &|| serde_json::to_value(&outcome).unwrap_or_default(),
                    &|| format!("moved {source} -> {}", outcome.path),
                );
                Ok(ExitStatus::Success)
            })(),
        ),
    }
}

fn truncation_note(truncated: bool) {
    if truncated {
        output::message(
            "results cut short by --max-results or the time cap; narrow the search or raise the cap",
        );
    }
}

fn draw(text: &mut String, nodes: &[stockade_fs::TreeNode], indent: &str) {
    for (i, node) in nodes.iter().enumerate() {
        let last = i + 1 == nodes.len();
        text.push_str(&format!(
            "{indent}{}{}{}\n",
            if last { "└── " } else { "├── " },
            node.name,
            node.kind.suffix()
        ));
        if let Some(children) = &node.children {
            let deeper = format!("{indent}{}", if last { "    " } else { "│   " });
            draw(text, children, &deeper);
        }
    }
}
