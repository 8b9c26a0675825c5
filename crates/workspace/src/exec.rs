//! What an orchestrator's agent runs with: the private workspace (read-write, and the CWD, or a run
//! workspace beneath it) plus exactly the granted shared areas, as a policy `stockade-sandbox` enforces.
//! Nothing else of the host is visible but the system directories programs need (secrets denied).

use std::path::{Path, PathBuf};

use serde::Serialize;
use stockade_policy::{LimitsOverride, PolicyBuilder, ResolvedPolicy, Variables};

use crate::error::WorkspaceError;
use crate::settings::{AccessMode, Settings, WorkspaceMode, check_name};

/// One shared area as granted for a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SharedGrant {
    /// Its logical name.
    pub name: String,
    /// Its path.
    pub path: PathBuf,
    /// Its mode.
    pub mode: AccessMode,
}

/// Everything a confined run of an orchestrator's agent needs.
#[derive(Debug)]
pub struct ExecPlan {
    /// The policy: private workspace and granted areas, nothing else.
    pub policy: ResolvedPolicy,
    /// The process's CWD.
    pub cwd: PathBuf,
    /// The private workspace.
    pub private: PathBuf,
    /// The run workspace, for `run_workspace` steps.
    pub run_workspace: Option<PathBuf>,
    /// The shared areas granted.
    pub shared: Vec<SharedGrant>,
    /// The run's private temp dir (inside the sandbox).
    pub temp_dir: PathBuf,
}

/// `path`, if a policy can name it as it is (see [`stockade_policy::is_literal_path`]).
fn literal(path: &Path) -> Result<&Path, WorkspaceError> {
    if !stockade_policy::is_literal_path(&path.to_string_lossy()) {
        return Err(WorkspaceError::Refused(format!(
            "{} holds `${{` or a glob character, which a policy would not take literally; rename it",
            path.display()
        )));
    }
    Ok(path)
}

/// Builds the plan for a run of `id`'s agent in `mode`, after validating the whole settings (nothing starts
/// when they are invalid). `needs` are shared areas the step names: each must be granted, or nothing starts.
pub fn plan(
    settings: &Settings,
    id: &str,
    mode: WorkspaceMode,
    run_id: &str,
    needs: &[String],
    temp_dir: PathBuf,
    limits: LimitsOverride,
) -> Result<ExecPlan, WorkspaceError> {
    let problems = settings.validate();
    if !problems.is_empty() {
        return Err(WorkspaceError::Invalid { problems });
    }
    let entry = settings.orchestrator(id)?;
    check_name("run id", run_id).map_err(WorkspaceError::Refused)?;
    for area in needs {
        if !entry.shared_access.iter().any(|g| g.name() == area) {
            return Err(WorkspaceError::Refused(format!(
                "shared area {area:?} is not granted to orchestrator {id:?}; the step was not started (grant it with `stockade orchestrator grant {id} {area}`)"
            )));
        }
    }
    let private = settings.private_workspace(id);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| WorkspaceError::Io { path, source }
    };
    std::fs::create_dir_all(&private).map_err(io(&private))?;
    let private = std::fs::canonicalize(&private).map_err(io(&private))?;
    let run_workspace = match mode {
        WorkspaceMode::OrchestratorWorkspace => None,
        WorkspaceMode::RunWorkspace => {
            let dir = private.join("work").join("runs").join(run_id);
            std::fs::create_dir_all(&dir).map_err(io(&dir))?;
            Some(dir)
        }
    };
    let cwd = run_workspace.clone().unwrap_or_else(|| private.clone());
    let shared: Vec<SharedGrant> = entry
        .shared_access
        .iter()
        .filter_map(|g| {
            settings
                .settings
                .shared_workspaces
                .get(g.name())
                .map(|area| SharedGrant {
                    name: g.name().to_string(),
                    path: area.path().to_path_buf(),
                    mode: g.mode(),
                })
        })
        .collect();

    let mut read = Vec::new();
    let mut write = vec![literal(&private)?];
    for grant in &shared {
        match grant.mode {
            AccessMode::ReadWrite => write.push(literal(&grant.path)?),
            AccessMode::ReadOnly => read.push(literal(&grant.path)?),
        }
    }
    let toml = stockade_policy::system_run_profile("orchestrator", &read, &write, &[]);
    let mut vars = Variables::default();
    vars.set_path("CWD", &cwd);
    vars.set_path("HOME", &private);
    vars.set_path("TEMP_DIR", &temp_dir);
    vars.set_path("PRIVATE_WORKSPACE", &private);
    if let Some(run) = &run_workspace {
        vars.set_path("RUN_WORKSPACE", run);
    }
    let mut builder = PolicyBuilder::new(vars);
    builder.policy_text(toml, format!("<orchestrator {id}>"));
    // The agent's home is its private workspace: tools that keep state there stay inside it.
    builder.env_set("HOME", private.to_string_lossy());
    builder.env_set("STOCKADE_ORCHESTRATOR", id);
    builder.env_set("STOCKADE_RUN_ID", run_id);
    builder.limits(limits);
    Ok(ExecPlan {
        policy: builder.build()?,
        cwd,
        private,
        run_workspace,
        shared,
        temp_dir,
    })
}
