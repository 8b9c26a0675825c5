//! The one error type of the file tools. Every message names the path, says why, and, where there is one,
//! what to do instead: the model reads these and retries.

use std::io;
use std::path::PathBuf;

use stockade_policy::{Denial, PolicyError};

/// Why a file-tool call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// The path climbs above the root with `..`.
    #[error(
        "access denied: {path:?} climbs out of the root {root} with `..`; name a path inside the root"
    )]
    Climbs {
        /// The path as given.
        path: String,
        /// The root.
        root: PathBuf,
    },
    /// An absolute path where only relative ones are taken.
    #[error(
        "access denied: {path:?} is absolute; paths are taken relative to the root {root} (drop the leading `/`)"
    )]
    Absolute {
        /// The path as given.
        path: String,
        /// The root.
        root: PathBuf,
    },
    /// An absolute path that is not inside the root.
    #[error("access denied: {path:?} is outside the root {root}; only paths inside it can be used")]
    OutsideRoot {
        /// The path as given.
        path: String,
        /// The root.
        root: PathBuf,
    },
    /// A symbolic link on the way leads out of the root.
    #[error(
        "access denied: {path:?} leads outside the root {root} through a symbolic link; links are followed only while they stay inside"
    )]
    SymlinkEscape {
        /// The path as given.
        path: String,
        /// The root.
        root: PathBuf,
    },
    /// The path holds a NUL byte, which no file name can contain.
    #[error("invalid path {path:?}: it contains a NUL byte")]
    NulByte {
        /// The path as given (NUL shown escaped).
        path: String,
    },
    /// The policy refuses the access.
    #[error("access denied: {denial}")]
    Denied {
        /// The path as given.
        path: String,
        /// The policy's refusal: rule, reason, fix.
        denial: Box<Denial>,
    },
    /// Nothing at that path.
    #[error("{path:?} does not exist under the root {root}")]
    NotFound {
        /// The path as given.
        path: String,
        /// The root.
        root: PathBuf,
    },
    /// Not a regular file where one is needed (FIFOs, sockets and devices are never opened for reading).
    #[error("{path:?} is a {kind}, not a regular file; only regular files can be {action}")]
    NotAFile {
        /// The path as given.
        path: String,
        /// `directory`, `FIFO`, `socket`, ...
        kind: &'static str,
        /// `read`, `written`, `edited`.
        action: &'static str,
    },
    /// Not a directory where one is needed.
    #[error("{path:?} is not a directory")]
    NotADirectory {
        /// The path as given.
        path: String,
    },
    /// The target of a create or move exists already.
    #[error("{path:?} already exists; {hint}")]
    Exists {
        /// The path as given.
        path: String,
        /// What to do instead.
        hint: &'static str,
    },
    /// The file holds binary data; the tools return text.
    #[error(
        "{path:?} is a binary file ({size} bytes); read_file returns text only (use file_info for its metadata)"
    )]
    Binary {
        /// The path as given.
        path: String,
        /// Its size.
        size: u64,
    },
    /// An edit could not be applied; nothing was written.
    #[error("{path:?}: edit {index} {reason}; nothing was written")]
    Edit {
        /// The path as given.
        path: String,
        /// 1-based index of the failing edit.
        index: usize,
        /// What was wrong.
        reason: String,
    },
    /// A context field (`group`, `technology`, ...) is unusable.
    #[error("invalid {field}: {reason}")]
    InvalidContext {
        /// The field name, as in the context schema.
        field: &'static str,
        /// What is wrong, and the fix.
        reason: String,
    },
    /// An argument other than a path is unusable (a bad regex, glob, line range...).
    #[error("invalid {what}: {reason}")]
    InvalidArgument {
        /// Which argument.
        what: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The root itself cannot be used.
    #[error("cannot use {path} as the root: {reason}")]
    Root {
        /// The root as given.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The policy could not be built.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// Any other I/O failure.
    #[error("{path:?}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The error.
        #[source]
        source: io::Error,
    },
}

impl FsError {
    /// A short stable code for machines (`--json`, MCP structured errors, the audit log).
    pub fn code(&self) -> &'static str {
        match self {
            FsError::Climbs { .. } => "climbs-out",
            FsError::Absolute { .. } => "absolute-path",
            FsError::OutsideRoot { .. } => "outside-root",
            FsError::SymlinkEscape { .. } => "symlink-escape",
            FsError::NulByte { .. } => "nul-byte",
            FsError::Denied { .. } => "denied",
            FsError::NotFound { .. } => "not-found",
            FsError::NotAFile { .. } => "not-a-file",
            FsError::NotADirectory { .. } => "not-a-directory",
            FsError::Exists { .. } => "exists",
            FsError::Binary { .. } => "binary",
            FsError::Edit { .. } => "edit-failed",
            FsError::InvalidContext { .. } => "invalid-context",
            FsError::InvalidArgument { .. } => "invalid-argument",
            FsError::Root { .. } => "bad-root",
            FsError::Policy(_) => "bad-policy",
            FsError::Io { .. } => "io",
        }
    }

    /// Whether this is a confinement refusal (as opposed to an ordinary failure): these go to the audit log.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            FsError::Climbs { .. }
                | FsError::Absolute { .. }
                | FsError::OutsideRoot { .. }
                | FsError::SymlinkEscape { .. }
                | FsError::NulByte { .. }
                | FsError::Denied { .. }
        )
    }

    /// The path the call named, when there is one.
    pub fn path(&self) -> Option<&str> {
        match self {
            FsError::Climbs { path, .. }
            | FsError::Absolute { path, .. }
            | FsError::OutsideRoot { path, .. }
            | FsError::SymlinkEscape { path, .. }
            | FsError::NulByte { path }
            | FsError::Denied { path, .. }
            | FsError::NotFound { path, .. }
            | FsError::NotAFile { path, .. }
            | FsError::NotADirectory { path }
            | FsError::Exists { path, .. }
            | FsError::Binary { path, .. }
            | FsError::Edit { path, .. }
            | FsError::Io { path, .. } => Some(path),
            _ => None,
        }
    }

    /// The policy's refusal, for a `Denied` error.
    pub fn denial(&self) -> Option<&Denial> {
        match self {
            FsError::Denied { denial, .. } => Some(denial),
            _ => None,
        }
    }
}
