//! The one error type of the workspace part.

use std::path::PathBuf;

use crate::settings::Problem;

/// Why a workspace operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not valid YAML of the expected shape.
    #[error("{path}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// No such orchestrator, area or workflow.
    #[error("no {what} {name:?}; known: {}", if known.is_empty() { "none".to_string() } else { known.join(", ") })]
    Unknown {
        /// `orchestrator`, `shared area`, `workflow`.
        what: &'static str,
        /// The name given.
        name: String,
        /// The names that exist.
        known: Vec<String>,
    },
    /// A change that cannot be made (the orchestrator exists already, a name is invalid...).
    #[error("{0}")]
    Refused(String),
    /// The settings fail validation: nothing runs.
    #[error("the settings are invalid, so nothing was started:\n{}", problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// Every problem.
        problems: Vec<Problem>,
    },
    /// The policy for a run could not be built.
    #[error(transparent)]
    Policy(#[from] stockade_policy::PolicyError),
}
