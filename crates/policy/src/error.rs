//! The policy part's one error type.

use std::path::PathBuf;

/// Everything that can be wrong with a policy before anything runs.
///
/// Every message names what is wrong, where (file and line when there is one), and the change that fixes it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The policy file could not be read.
    #[error("cannot read policy file '{path}': {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid TOML, or has a key or value the policy does not know.
    #[error("{location}: {message}")]
    Syntax {
        /// `file:line`.
        location: String,
        /// What the parser said, lowercased where possible.
        message: String,
    },
    /// The requested profile exists neither in the file nor among the built-ins.
    #[error("no profile named '{name}' ({where_}); available: {available}")]
    UnknownProfile {
        /// The profile asked for.
        name: String,
        /// Where it was looked for.
        where_: String,
        /// The names that do exist.
        available: String,
    },
    /// `extends` loops back on itself.
    #[error("profile '{name}' extends itself through {chain}; remove one `extends`")]
    ExtendsCycle {
        /// The profile.
        name: String,
        /// The loop, `a -> b -> a`.
        chain: String,
    },
    /// A value is wrong in a way the file format cannot say by itself.
    #[error("{location}: {message}\n  fix: {fix}")]
    Invalid {
        /// `file:line`, or the flag or built-in profile.
        location: String,
        /// What is wrong.
        message: String,
        /// What to change.
        fix: String,
    },
    /// A path could not be resolved against the filesystem.
    #[error("{location}: cannot resolve '{path}': {source}")]
    Resolve {
        /// Where the path was written.
        location: String,
        /// The path as expanded.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl PolicyError {
    pub(crate) fn invalid(
        location: impl std::fmt::Display,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        PolicyError::Invalid {
            location: location.to_string(),
            message: message.into(),
            fix: fix.into(),
        }
    }
}
