//! The one error type of the quarantine part: failures to set a run up. What goes wrong *in* a run (timeout,
//! exit code, malformed output) is reported in the [`crate::QuarantineResult`], not as an error.

use std::path::PathBuf;

/// Why a quarantine run could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QuarantineError {
    /// A profile file is invalid.
    #[error("profile {path}: {field} {reason}")]
    Profile {
        /// The file.
        path: PathBuf,
        /// The offending field (`allowedTools[2]`).
        field: String,
        /// What is wrong and the fix.
        reason: String,
    },
    /// The reader program is not installed.
    #[error("reader {program:?} is not installed (not found in PATH); {hint}")]
    ReaderMissing {
        /// The program.
        program: String,
        /// How to get it, or another reader to use.
        hint: String,
    },
    /// An input file cannot be used.
    #[error("input {path}: {reason}")]
    Input {
        /// The file as given.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The reader cannot be set up as asked (its API, its environment, its network proxy).
    #[error("{reason}")]
    Reader {
        /// What is wrong and the fix.
        reason: String,
    },
    /// The reader's network proxy could not be set up (its gateway's key, the trust roots).
    #[error(transparent)]
    Net(#[from] stockade_net::SetupError),
    /// The policy for the reader could not be built.
    #[error(transparent)]
    Policy(#[from] stockade_policy::PolicyError),
    /// The sandbox could not be built or started.
    #[error(transparent)]
    Sandbox(#[from] stockade_sandbox::SandboxError),
    /// Reading a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}
