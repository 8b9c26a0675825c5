//! `stockade orchestrator ...`, `stockade config ...`, `stockade workflow run`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use stockade_audit::{AuditLog, AuditRecord, Layer};
use stockade_sandbox::{SandboxBuilder, StopReason};
use stockade_workspace::{
    AccessMode, ExecPlan, OrchestratorFile, Settings, WorkspaceError, WorkspaceMode,
};

use crate::ExitStatus;
use crate::args::{ConfigAction, OrchestratorAction, WorkflowAction};
use crate::output;

fn settings_file(flag: Option<&Path>) -> PathBuf {
    stockade_workspace::settings_path(flag, |k| std::env::var(k).ok())
}

fn load(path: &Path) -> anyhow::Result<Settings> {
    if !path.exists() {
        anyhow::bail!(
            "no settings at {}; create them with `stockade config init /path/to/workspaces` (or pass --settings, or set STOCKADE_SETTINGS)",
            path.display()
        );
    }
    Ok(Settings::load(path)?)
}

fn new_run_id() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!("run-{secs}-{}", std::process::id())
}

/// Records a refusal of the workspace layer.
fn audit_refusal(audit: &AuditLog, id: &str, run: &str, reason: &str, command: &[String]) {
    let record = AuditRecord::new(Layer::Workspace, reason)
        .orchestrator(id)
        .run(run)
        .command(command.join(" "));
    if let Err(e) = audit.append(&record) {
        output::message(&e.to_string());
    }
}

pub(crate) fn orchestrator(
    flag: Option<&Path>,
    action: OrchestratorAction,
    json: bool,
    audit: &AuditLog,
) -> anyhow::Result<ExitStatus> {
    let path = settings_file(flag);
    match action {
        OrchestratorAction::Add {
            id,
            private_workspace,
        } => {
            load(&path)?;
            let private = stockade_workspace::add(&path, &id, private_workspace.as_deref())?;
            if json {
                output::json(
                    &serde_json::json!({"orchestrator": id, "private_workspace": private, "shared_access": []}),
                );
            } else {
                output::out(&format!(
                    "added {id}: private workspace {} (no shared areas granted)",
                    private.display()
                ));
            }
        }
        OrchestratorAction::Grant {
            id,
            area,
            read_only,
        } => {
            load(&path)?;
            let mode = if read_only {
                AccessMode::ReadOnly
            } else {
                AccessMode::ReadWrite
            };
            stockade_workspace::grant(&path, &id, &area, mode)?;
            output::message(&format!("granted {area} to {id} ({})", mode_name(mode)));
        }
        OrchestratorAction::Revoke { id, area } => {
            load(&path)?;
            stockade_workspace::revoke(&path, &id, &area)?;
            output::message(&format!("revoked {area} from {id}"));
        }
        OrchestratorAction::SetWorkspace { id, path: dir } => {
            load(&path)?;
            let private = stockade_workspace::set_workspace(&path, &id, Some(&dir))?;
            output::message(&format!("{id}: private workspace {}", private.display()));
        }
        OrchestratorAction::UnsetWorkspace { id } => {
            load(&path)?;
            let private = stockade_workspace::set_workspace(&path, &id, None)?;
            output::message(&format!(
                "{id}: private workspace {} (default)",
                private.display()
            ));
        }
        OrchestratorAction::Show { id } => {
            let settings = load(&path)?;
            let entry = settings.orchestrator(&id)?;
            let private = settings.private_workspace(&id);
            let shared: Vec<serde_json::Value> = entry
                .shared_access
                .iter()
                .map(|g| {
                    let area = settings.settings.shared_workspaces.get(g.name());
                    serde_json::json!({
                        "name": g.name(),
                        "path": area.map(|a| a.path().to_path_buf()),
                        "mode": mode_name(g.mode()),
                        "domain": area.and_then(|a| a.domain()),
                    })
                })
                .collect();
            if json {
                output::json(&serde_json::json!({
                    "orchestrator": id,
                    "private_workspace": private,
                    "private_workspace_overridden": entry.private_workspace.is_some(),
                    "shared_access": shared,
                }));
            } else {
                let mut text = format!(
                    "orchestrator: {id}\nprivate workspace: {}\nshared access:",
                    private.display()
                );
                if shared.is_empty() {
                    text.push_str(" none");
                }
                for s in &shared {
                    text.push_str(&format!(
                        "\n  {} {} ({})",
                        s["name"].as_str().unwrap_or(""),
                        s["path"].as_str().unwrap_or("(undefined)"),
                        s["mode"].as_str().unwrap_or("")
                    ));
                }
                output::out(&text);
            }
        }
        OrchestratorAction::List => {
            let settings = load(&path)?;
            if json {
                let list: Vec<_> = settings
                    .orchestrators
                    .keys()
                    .map(|id| serde_json::json!({"orchestrator": id, "private_workspace": settings.private_workspace(id)}))
                    .collect();
                output::json(&list);
            } else {
                for id in settings.orchestrators.keys() {
                    output::out(&format!(
                        "{id}\t{}",
                        settings.private_workspace(id).display()
                    ));
                }
            }
        }
        OrchestratorAction::Exec {
            id,
            run_workspace,
            run_id,
            timeout,
            command,
        } => {
            let settings = load(&path)?;
            let run = run_id.unwrap_or_else(new_run_id);
            let mode = if run_workspace {
                WorkspaceMode::RunWorkspace
            } else {
                WorkspaceMode::OrchestratorWorkspace
            };
            let timeout = timeout
                .map(|t| {
                    crate::policy_args::flag_value("--timeout", &t, stockade_policy::parse_duration)
                })
                .transpose()?;
            return execute(&settings, &id, &run, mode, &[], &command, timeout, audit);
        }
    }
    Ok(ExitStatus::Success)
}

fn mode_name(mode: AccessMode) -> &'static str {
    match mode {
        AccessMode::ReadWrite => "read-write",
        AccessMode::ReadOnly => "read-only",
    }
}

/// Plans and runs one confined command; a refused plan is audited and never starts.
#[allow(
    clippy::too_many_arguments,
    reason = "one private helper, called with a run's whole context"
)]
fn execute(
    settings: &Settings,
    id: &str,
    run: &str,
    mode: WorkspaceMode,
    needs: &[String],
    command: &[String],
    timeout: Option<std::time::Duration>,
    audit: &AuditLog,
) -> anyhow::Result<ExitStatus> {
    let temp = stockade_sandbox::new_temp_dir_path();
    let limits = stockade_policy::LimitsOverride {
        timeout,
        ..Default::default()
    };
    let plan: ExecPlan =
        match stockade_workspace::plan(settings, id, mode, run, needs, temp.clone(), limits) {
            Ok(plan) => plan,
            Err(e @ (WorkspaceError::Refused(_) | WorkspaceError::Invalid { .. })) => {
                audit_refusal(audit, id, run, &e.to_string(), command);
                output::message(&e.to_string());
                return Ok(ExitStatus::No);
            }
            Err(e) => return Err(e.into()),
        };
    let Some((program, args)) = command.split_first() else {
        anyhow::bail!("no command given");
    };
    let sandbox = SandboxBuilder::new(Arc::new(plan.policy), program, args)
        .temp_dir(&temp)
        .cwd(&plan.cwd)
        .build();
    let sandbox = match sandbox {
        Ok(s) => s,
        Err(e) => {
            audit_refusal(audit, id, run, &e.to_string(), command);
            output::message(&e.to_string());
            return Ok(match e.exit_code() {
                127 => ExitStatus::NotFound,
                126 => ExitStatus::CannotExecute,
                _ => ExitStatus::Usage,
            });
        }
    };
    let outcome = sandbox
        .spawn()
        .context("cannot start the sandbox")?
        .wait()
        .context("the sandbox failed")?;
    if let Some(StopReason::Timeout { limit_ms }) = &outcome.stopped {
        output::message(&format!(
            "{id}/{run}: timeout after {} ms; the whole tree was killed",
            limit_ms
        ));
    }
    Ok(ExitStatus::External(
        u8::try_from(outcome.status).unwrap_or(125),
    ))
}

pub(crate) fn config(
    flag: Option<&Path>,
    action: ConfigAction,
    json: bool,
) -> anyhow::Result<ExitStatus> {
    let path = settings_file(flag);
    match action {
        ConfigAction::Init { workspaces_path } => {
            stockade_workspace::init(&path, &workspaces_path)?;
            output::message(&format!("created {}", path.display()));
            Ok(ExitStatus::Success)
        }
        ConfigAction::Validate => {
            let settings = load(&path)?;
            let problems = settings.validate();
            if json {
                output::json(
                    &serde_json::json!({"valid": problems.is_empty(), "problems": problems}),
                );
            } else if problems.is_empty() {
                output::out(&format!("{}: valid", path.display()));
            } else {
                for p in &problems {
                    output::out(&format!("{}: {p}", path.display()));
                }
            }
            Ok(if problems.is_empty() {
                ExitStatus::Success
            } else {
                ExitStatus::No
            })
        }
    }
}

pub(crate) fn workflow(
    flag: Option<&Path>,
    action: WorkflowAction,
    json: bool,
    audit: &AuditLog,
) -> anyhow::Result<ExitStatus> {
    let WorkflowAction::Run {
        id,
        workflow,
        run_id,
    } = action;
    let path = settings_file(flag);
    let settings = load(&path)?;
    settings.orchestrator(&id)?;
    let run = run_id.unwrap_or_else(new_run_id);
    let file = settings.private_workspace(&id).join("orchestrator.yaml");
    let config = OrchestratorFile::load(&file)?;
    let Some(flow) = config.workflows.get(&workflow) else {
        anyhow::bail!(
            "no workflow {workflow:?} in {}; known: {}",
            file.display(),
            config
                .workflows
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let mut steps = Vec::new();
    for step in &flow.steps {
        let Some(mode) = step.mode() else {
            // Validation inside `plan` names it; stop before anything runs.
            let problems = settings.validate();
            let reason = format!(
                "step {:?}: invalid workspace_mode {:?}; {} problem(s) in the settings",
                step.id,
                step.workspace_mode,
                problems.len()
            );
            audit_refusal(audit, &id, &run, &reason, &step.run);
            output::message(&reason);
            return Ok(ExitStatus::No);
        };
        output::message(&format!("{id}/{run}: step {}", step.id));
        let status = execute(
            &settings,
            &id,
            &run,
            mode,
            &step.shared,
            &step.run,
            None,
            audit,
        )?;
        let ok = status == ExitStatus::External(0);
        steps.push(serde_json::json!({"id": step.id, "ok": ok}));
        if !ok {
            if json {
                output::json(
                    &serde_json::json!({"orchestrator": id, "run": run, "workflow": workflow, "steps": steps, "success": false}),
                );
            }
            return Ok(status);
        }
    }
    if json {
        output::json(
            &serde_json::json!({"orchestrator": id, "run": run, "workflow": workflow, "steps": steps, "success": true}),
        );
    }
    Ok(ExitStatus::Success)
}
