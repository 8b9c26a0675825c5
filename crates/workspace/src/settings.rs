//! The global settings file (DESIGN.md, "Orchestrator settings") and each orchestrator's
//! `orchestrator.yaml`: their shapes, where they live, every validation rule of seed 002, and atomic edits.

use std::io::Write;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::error::WorkspaceError;

/// `read-write` (default) or `read-only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AccessMode {
    /// Read and write.
    #[default]
    ReadWrite,
    /// Read only.
    ReadOnly,
}

/// A shared area: a path, or a path with a domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SharedArea {
    /// `docs: /srv/shared/docs`.
    Path(PathBuf),
    /// `finance: { path: /srv/shared/finance, domain: finance }`.
    Full {
        /// Absolute, canonical, existing.
        path: PathBuf,
        /// The domain it belongs to (for channel profiles).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        domain: Option<String>,
    },
}

impl SharedArea {
    /// Its path.
    pub fn path(&self) -> &Path {
        match self {
            SharedArea::Path(p) | SharedArea::Full { path: p, .. } => p,
        }
    }

    /// Its domain, if it has one.
    pub fn domain(&self) -> Option<&str> {
        match self {
            SharedArea::Path(_) => None,
            SharedArea::Full { domain, .. } => domain.as_deref(),
        }
    }
}

/// One grant: a name, or a name with a mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Grant {
    /// `docs` (read-write).
    Name(String),
    /// `{ name: finance, mode: read-only }`.
    Full {
        /// The shared area.
        name: String,
        /// Its mode.
        #[serde(default)]
        mode: AccessMode,
    },
}

impl Grant {
    /// The area's name.
    pub fn name(&self) -> &str {
        match self {
            Grant::Name(n) | Grant::Full { name: n, .. } => n,
        }
    }

    /// The mode.
    pub fn mode(&self) -> AccessMode {
        match self {
            Grant::Name(_) => AccessMode::ReadWrite,
            Grant::Full { mode, .. } => *mode,
        }
    }
}

/// `settings:`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsBlock {
    /// Logical name -> area.
    #[serde(default)]
    pub shared_workspaces: IndexMap<String, SharedArea>,
}

/// `orchestrators.<id>`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrchestratorEntry {
    /// Overrides `<workspaces_path>/<id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_workspace: Option<PathBuf>,
    /// Shared areas granted to this orchestrator (deny by default).
    #[serde(default)]
    pub shared_access: Vec<Grant>,
    /// Present only to be refused: shared access is granted per orchestrator, never per agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents: Option<yaml_serde::Value>,
}

/// `channel_profiles.<name>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelProfile {
    /// The orchestrator that runs it.
    pub orchestrator: String,
    /// Its default workflow.
    pub workflow: String,
    /// The domain it serves: the orchestrator's grants must all be of this domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
}

/// The global settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Where private workspaces go by default.
    pub workspaces_path: PathBuf,
    /// `settings.shared_workspaces`.
    #[serde(default)]
    pub settings: SettingsBlock,
    /// Per orchestrator.
    #[serde(default)]
    pub orchestrators: IndexMap<String, OrchestratorEntry>,
    /// Channel profiles -> default workflows.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub channel_profiles: IndexMap<String, ChannelProfile>,
}

/// `workspace_mode` of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceMode {
    /// CWD = the private workspace.
    OrchestratorWorkspace,
    /// CWD = `<private>/work/runs/<run_id>`.
    RunWorkspace,
}

/// One workflow step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Its id.
    pub id: String,
    /// The command (argv).
    pub run: Vec<String>,
    /// Where it runs (default `orchestrator_workspace`).
    #[serde(default = "default_mode")]
    pub workspace_mode: String,
    /// Shared areas it needs; each must be granted.
    #[serde(default)]
    pub shared: Vec<String>,
}

fn default_mode() -> String {
    "orchestrator_workspace".to_string()
}

impl Step {
    /// The mode, if valid.
    pub fn mode(&self) -> Option<WorkspaceMode> {
        match self.workspace_mode.as_str() {
            "orchestrator_workspace" => Some(WorkspaceMode::OrchestratorWorkspace),
            "run_workspace" => Some(WorkspaceMode::RunWorkspace),
            _ => None,
        }
    }
}

/// One workflow.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workflow {
    /// Its steps, in order.
    #[serde(default)]
    pub steps: Vec<Step>,
}

/// `<private>/orchestrator.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrchestratorFile {
    /// Workflows by name.
    #[serde(default)]
    pub workflows: IndexMap<String, Workflow>,
}

/// One validation problem: the key it is about, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// Dotted key (`settings.shared_workspaces.docs`), or a file.
    pub key: String,
    /// What is wrong, and the fix.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// Where the settings file is: the flag, else `$STOCKADE_SETTINGS`, else
/// `$XDG_CONFIG_HOME/stockade/settings.yaml`, else `~/.config/stockade/settings.yaml`.
pub fn settings_path(flag: Option<&Path>, env: impl Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(path) = flag {
        return path.to_path_buf();
    }
    if let Some(path) = env("STOCKADE_SETTINGS").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let config = env("XDG_CONFIG_HOME")
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env("HOME").unwrap_or_else(|| "/".to_string())).join(".config")
        });
    config.join("stockade").join("settings.yaml")
}

/// A valid name for an orchestrator, area, workflow or run: one path component.
pub fn check_name(what: &str, name: &str) -> Result<(), String> {
    if name.is_empty()
        || name == "."
        || name == ".."
        || name.contains(['/', '\0'])
        || name.trim() != name
    {
        return Err(format!(
            "{what} {name:?} is not a valid name (one path component: no `/`, not `.` or `..`, not empty)"
        ));
    }
    Ok(())
}

impl Settings {
    /// Reads and parses the file (validation is separate: [`Settings::validate`]).
    pub fn load(path: &Path) -> Result<Settings, WorkspaceError> {
        let text = std::fs::read_to_string(path).map_err(|source| WorkspaceError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        yaml_serde::from_str(&text).map_err(|e| WorkspaceError::Parse {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
    }

    /// Writes atomically: a temp file in the same directory, fsynced, renamed over the original.
    pub fn save(&self, path: &Path) -> Result<(), WorkspaceError> {
        let text = yaml_serde::to_string(self).map_err(|e| WorkspaceError::Parse {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        write_atomic(path, &text)
    }

    /// The private workspace of `id`: the override if set, else `<workspaces_path>/<id>`.
    pub fn private_workspace(&self, id: &str) -> PathBuf {
        self.orchestrators
            .get(id)
            .and_then(|o| o.private_workspace.clone())
            .unwrap_or_else(|| self.workspaces_path.join(id))
    }

    /// The orchestrator, or an error naming the known ones.
    pub fn orchestrator(&self, id: &str) -> Result<&OrchestratorEntry, WorkspaceError> {
        self.orchestrators
            .get(id)
            .ok_or_else(|| self.unknown_orchestrator(id))
    }

    /// The orchestrator to edit, or an error naming the known ones.
    pub fn orchestrator_mut(&mut self, id: &str) -> Result<&mut OrchestratorEntry, WorkspaceError> {
        match self.orchestrators.get_index_of(id) {
            Some(i) => Ok(&mut self.orchestrators[i]),
            None => Err(self.unknown_orchestrator(id)),
        }
    }

    fn unknown_orchestrator(&self, id: &str) -> WorkspaceError {
        WorkspaceError::Unknown {
            what: "orchestrator",
            name: id.to_string(),
            known: self.orchestrators.keys().cloned().collect(),
        }
    }

    /// Every problem, not just the first (seed 002, "Path Security and Validation" and the step rules).
    pub fn validate(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        let mut problem = |key: String, message: String| problems.push(Problem { key, message });
        if !self.workspaces_path.is_absolute() {
            problem(
                "workspaces_path".into(),
                format!("{} is not absolute", self.workspaces_path.display()),
            );
        }
        for (name, area) in &self.settings.shared_workspaces {
            let key = format!("settings.shared_workspaces.{name}");
            if let Err(m) = check_name("shared area", name) {
                problem(key.clone(), m);
            }
            let path = area.path();
            if !path.is_absolute() {
                problem(
                    key,
                    format!("{} is not absolute; write the full path", path.display()),
                );
                continue;
            }
            match std::fs::canonicalize(path) {
                Err(e) => problem(
                    key,
                    format!(
                        "{} does not resolve ({e}); create it or fix the path",
                        path.display()
                    ),
                ),
                Ok(canonical) if canonical != path => problem(
                    key,
                    format!(
                        "{} is not canonical: it resolves to {}; write that instead",
                        path.display(),
                        canonical.display()
                    ),
                ),
                Ok(canonical) if !canonical.is_dir() => {
                    problem(key, format!("{} is not a directory", path.display()));
                }
                Ok(_) => {}
            }
        }
        for (id, entry) in &self.orchestrators {
            let key = format!("orchestrators.{id}");
            if let Err(m) = check_name("orchestrator", id) {
                problem(key.clone(), m);
            }
            if entry.agents.is_some() {
                problem(
                    format!("{key}.agents"),
                    "shared access is granted per orchestrator, never per agent; move the grants to shared_access".into(),
                );
            }
            if let Some(p) = &entry.private_workspace
                && !p.is_absolute()
            {
                problem(
                    format!("{key}.private_workspace"),
                    format!("{} is not absolute", p.display()),
                );
            }
            let mut seen = Vec::new();
            for (i, grant) in entry.shared_access.iter().enumerate() {
                let name = grant.name();
                if !self.settings.shared_workspaces.contains_key(name) {
                    problem(
                        format!("{key}.shared_access[{i}]"),
                        format!("{name:?} is not a shared area in settings.shared_workspaces"),
                    );
                }
                if seen.contains(&name) {
                    problem(
                        format!("{key}.shared_access[{i}]"),
                        format!("{name:?} is granted twice"),
                    );
                }
                seen.push(name);
            }
            let file = self.private_workspace(id).join("orchestrator.yaml");
            if file.exists() {
                match OrchestratorFile::load(&file) {
                    Err(e) => problem(file.display().to_string(), e.to_string()),
                    Ok(config) => {
                        for p in config.problems(id, entry) {
                            problem(format!("{}: {}", file.display(), p.key), p.message);
                        }
                    }
                }
            }
        }
        for (name, profile) in &self.channel_profiles {
            let key = format!("channel_profiles.{name}");
            let Some(entry) = self.orchestrators.get(&profile.orchestrator) else {
                problem(
                    key,
                    format!("orchestrator {:?} is not defined", profile.orchestrator),
                );
                continue;
            };
            let file = self
                .private_workspace(&profile.orchestrator)
                .join("orchestrator.yaml");
            let has_workflow = OrchestratorFile::load(&file)
                .map(|c| c.workflows.contains_key(&profile.workflow))
                .unwrap_or(false);
            if !has_workflow {
                problem(
                    format!("{key}.workflow"),
                    format!(
                        "{:?} is not a workflow in {}",
                        profile.workflow,
                        file.display()
                    ),
                );
            }
            if let Some(domain) = &profile.domain {
                for grant in &entry.shared_access {
                    let area_domain = self
                        .settings
                        .shared_workspaces
                        .get(grant.name())
                        .and_then(SharedArea::domain);
                    if area_domain != Some(domain.as_str()) {
                        problem(
                            key.clone(),
                            format!(
                                "serves domain {domain:?} but its orchestrator {:?} is granted {:?} (domain {}); a domain's workflows may only use orchestrators whose grants are all within that domain",
                                profile.orchestrator,
                                grant.name(),
                                area_domain.map_or("none".to_string(), |d| format!("{d:?}"))
                            ),
                        );
                    }
                }
            }
        }
        problems
    }
}

impl OrchestratorFile {
    /// Reads and parses `orchestrator.yaml`.
    pub fn load(path: &Path) -> Result<OrchestratorFile, WorkspaceError> {
        let text = std::fs::read_to_string(path).map_err(|source| WorkspaceError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if text.trim().is_empty() {
            return Ok(OrchestratorFile::default());
        }
        yaml_serde::from_str(&text).map_err(|e| WorkspaceError::Parse {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
    }

    /// The step rules: valid modes, argv present, every named shared area granted to `id`.
    pub fn problems(&self, id: &str, entry: &OrchestratorEntry) -> Vec<Problem> {
        let mut problems = Vec::new();
        for (name, workflow) in &self.workflows {
            for (i, step) in workflow.steps.iter().enumerate() {
                let key = format!("workflows.{name}.steps[{i}]");
                if step.mode().is_none() {
                    problems.push(Problem {
                        key: format!("{key}.workspace_mode"),
                        message: format!(
                            "{:?} is not a workspace mode; use orchestrator_workspace or run_workspace",
                            step.workspace_mode
                        ),
                    });
                }
                if step.run.is_empty() {
                    problems.push(Problem {
                        key: format!("{key}.run"),
                        message: "is empty; give the command as a list (argv)".into(),
                    });
                }
                for area in &step.shared {
                    if !entry.shared_access.iter().any(|g| g.name() == area) {
                        problems.push(Problem {
                            key: format!("{key}.shared"),
                            message: format!("{area:?} is not granted to orchestrator {id:?}; grant it with `stockade orchestrator grant {id} {area}`"),
                        });
                    }
                }
            }
        }
        problems
    }
}

/// Writes `text` to `path` atomically (temp file in the same directory, fsync, rename).
pub fn write_atomic(path: &Path, text: &str) -> Result<(), WorkspaceError> {
    let io = |source| WorkspaceError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result.map_err(io)
}
