//! The configuration commands (`orchestrator add`, `grant`, `revoke`, `set-workspace`, `unset-workspace`):
//! each one a read-modify-write of the settings under an exclusive lock, written atomically, so concurrent
//! commands never lose an update and a crash never leaves half a file.

use std::path::{Path, PathBuf};

use rustix::fs::FlockOperation;

use crate::error::WorkspaceError;
use crate::settings::{AccessMode, Grant, OrchestratorEntry, Settings, check_name, write_atomic};

/// The first `orchestrator.yaml` of a new orchestrator.
pub const BOOTSTRAP_ORCHESTRATOR_YAML: &str = "\
# Workflows of this orchestrator. Each step runs confined: CWD is this directory (orchestrator_workspace)
# or work/runs/<run_id> (run_workspace); `shared` lists the shared areas it needs, each of which must be
# granted to this orchestrator in the global settings.
#
# workflows:
#   nightly:
#     steps:
#       - id: summarize
#         run: [\"claude\", \"-p\", \"Summarize the docs\"]
#         workspace_mode: run_workspace
#         shared: [docs]
workflows: {}
";

/// Runs `change` on the settings at `path` under an exclusive lock, then saves them atomically.
pub fn edit<T>(
    path: &Path,
    change: impl FnOnce(&mut Settings) -> Result<T, WorkspaceError>,
) -> Result<T, WorkspaceError> {
    let lock_path = path.with_extension("yaml.lock");
    let io = |source| WorkspaceError::Io {
        path: lock_path.clone(),
        source,
    };
    if let Some(dir) = lock_path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io)?;
    rustix::fs::flock(&lock, FlockOperation::LockExclusive).map_err(|e| io(e.into()))?;
    let mut settings = Settings::load(path)?;
    let out = change(&mut settings)?;
    settings.save(path)?;
    Ok(out)
}

/// Creates the settings file with `workspaces_path` (refuses to overwrite one).
pub fn init(path: &Path, workspaces_path: &Path) -> Result<(), WorkspaceError> {
    if path.exists() {
        return Err(WorkspaceError::Refused(format!(
            "{} exists already",
            path.display()
        )));
    }
    if !workspaces_path.is_absolute() {
        return Err(WorkspaceError::Refused(format!(
            "workspaces_path {} is not absolute",
            workspaces_path.display()
        )));
    }
    let settings = Settings {
        workspaces_path: workspaces_path.to_path_buf(),
        settings: Default::default(),
        orchestrators: Default::default(),
        channel_profiles: Default::default(),
    };
    settings.save(path)
}

/// Adds an orchestrator with zero grants, creates its private workspace, and bootstraps its
/// `orchestrator.yaml` and `work/runs/`. Returns the private workspace.
pub fn add(
    path: &Path,
    id: &str,
    private_workspace: Option<&Path>,
) -> Result<PathBuf, WorkspaceError> {
    check_name("orchestrator", id).map_err(WorkspaceError::Refused)?;
    if let Some(p) = private_workspace
        && !p.is_absolute()
    {
        return Err(WorkspaceError::Refused(format!(
            "private workspace {} is not absolute",
            p.display()
        )));
    }
    let private = edit(path, |settings| {
        if settings.orchestrators.contains_key(id) {
            return Err(WorkspaceError::Refused(format!(
                "orchestrator {id:?} exists already"
            )));
        }
        settings.orchestrators.insert(
            id.to_string(),
            OrchestratorEntry {
                private_workspace: private_workspace.map(Path::to_path_buf),
                ..OrchestratorEntry::default()
            },
        );
        Ok(settings.private_workspace(id))
    })?;
    let io = |source| WorkspaceError::Io {
        path: private.clone(),
        source,
    };
    std::fs::create_dir_all(private.join("work").join("runs")).map_err(io)?;
    let config = private.join("orchestrator.yaml");
    if !config.exists() {
        write_atomic(&config, BOOTSTRAP_ORCHESTRATOR_YAML)?;
    }
    Ok(private)
}

/// Grants a shared area (idempotent; a new mode replaces the old).
pub fn grant(path: &Path, id: &str, area: &str, mode: AccessMode) -> Result<(), WorkspaceError> {
    edit(path, |settings| {
        if !settings.settings.shared_workspaces.contains_key(area) {
            return Err(WorkspaceError::Unknown {
                what: "shared area",
                name: area.to_string(),
                known: settings
                    .settings
                    .shared_workspaces
                    .keys()
                    .cloned()
                    .collect(),
            });
        }
        let entry = settings.orchestrator_mut(id)?;
        let grant = match mode {
            AccessMode::ReadWrite => Grant::Name(area.to_string()),
            AccessMode::ReadOnly => Grant::Full {
                name: area.to_string(),
                mode,
            },
        };
        match entry.shared_access.iter_mut().find(|g| g.name() == area) {
            Some(existing) => *existing = grant,
            None => entry.shared_access.push(grant),
        }
        Ok(())
    })
}

/// Revokes a shared area (an area not granted is an error, so typos show).
pub fn revoke(path: &Path, id: &str, area: &str) -> Result<(), WorkspaceError> {
    edit(path, |settings| {
        let entry = settings.orchestrator_mut(id)?;
        let before = entry.shared_access.len();
        entry.shared_access.retain(|g| g.name() != area);
        if entry.shared_access.len() == before {
            return Err(WorkspaceError::Refused(format!(
                "{area:?} is not granted to {id:?}"
            )));
        }
        Ok(())
    })
}

/// Sets (`Some`) or removes (`None`) the private-workspace override.
pub fn set_workspace(
    path: &Path,
    id: &str,
    workspace: Option<&Path>,
) -> Result<PathBuf, WorkspaceError> {
    if let Some(p) = workspace
        && !p.is_absolute()
    {
        return Err(WorkspaceError::Refused(format!(
            "private workspace {} is not absolute",
            p.display()
        )));
    }
    edit(path, |settings| {
        let entry = settings.orchestrator_mut(id)?;
        entry.private_workspace = workspace.map(Path::to_path_buf);
        Ok(settings.private_workspace(id))
    })
}
