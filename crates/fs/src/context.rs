//! The seed's per-invocation context: `workingDirectory`, `environment?`, `group`, `technology`, where the
//! working directory is `{reposPath}/{group}/{technology}`. In this mode every path from the model is
//! relative: absolute paths are refused, as the seed requires.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::FsError;
use crate::root::{PathMode, Root, RootOptions};

/// The context a tool call runs in (the seed's `contextSchema`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FsContext {
    /// Absolute path of the sandbox directory: `{reposPath}/{group}/{technology}`.
    pub working_directory: PathBuf,
    /// Optional environment identifier (`dev`, `prod`, ...); informational.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// The technology group name: one path component.
    pub group: String,
    /// The technology (repository) name: one path component.
    pub technology: String,
}

impl FsContext {
    /// Computes the context for `{repos_path}/{group}/{technology}`, validating each part.
    pub fn new(
        repos_path: &Path,
        group: &str,
        technology: &str,
        environment: Option<&str>,
    ) -> Result<FsContext, FsError> {
        validate_component("group", group)?;
        validate_component("technology", technology)?;
        if let Some(environment) = environment {
            validate_component("environment", environment)?;
        }
        let repos = std::path::absolute(repos_path).map_err(|e| FsError::InvalidContext {
            field: "reposPath",
            reason: format!("{}: {e}", repos_path.display()),
        })?;
        Ok(FsContext {
            working_directory: repos.join(group).join(technology),
            environment: environment.map(str::to_string),
            group: group.to_string(),
            technology: technology.to_string(),
        })
    }

    /// Checks a context received from elsewhere (JSON): every field as [`FsContext::new`] checks it, and
    /// the working directory absolute and ending in `{group}/{technology}`.
    pub fn validate(&self) -> Result<(), FsError> {
        validate_component("group", &self.group)?;
        validate_component("technology", &self.technology)?;
        if let Some(environment) = &self.environment {
            validate_component("environment", environment)?;
        }
        if !self.working_directory.is_absolute() {
            return Err(FsError::InvalidContext {
                field: "workingDirectory",
                reason: format!("{} is not absolute", self.working_directory.display()),
            });
        }
        if !self
            .working_directory
            .ends_with(Path::new(&self.group).join(&self.technology))
        {
            return Err(FsError::InvalidContext {
                field: "workingDirectory",
                reason: format!(
                    "{} does not end in {}/{}",
                    self.working_directory.display(),
                    self.group,
                    self.technology
                ),
            });
        }
        Ok(())
    }

    /// Opens the working directory as a [`Root`] in relative-only mode.
    pub fn open(&self, mut options: RootOptions) -> Result<Root, FsError> {
        self.validate()?;
        options.path_mode = PathMode::RelativeOnly;
        Root::open(&self.working_directory, options)
    }
}

/// One non-empty path component: no `/`, no NUL, not `.` or `..`.
fn validate_component(field: &'static str, value: &str) -> Result<(), FsError> {
    let reason = if value.is_empty() {
        "it is empty"
    } else if value.contains('/') {
        "it contains `/`; give a single name"
    } else if value.contains('\0') {
        "it contains a NUL byte"
    } else if value == "." || value == ".." {
        "it is `.` or `..`; give a real name"
    } else if value.trim() != value {
        "it has leading or trailing whitespace"
    } else {
        return Ok(());
    };
    Err(FsError::InvalidContext {
        field,
        reason: format!("{value:?}: {reason}"),
    })
}

/// The JSON Schema of [`FsContext`] (`stockade schema fs-context`).
pub fn context_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(FsContext)).unwrap_or_default()
}
