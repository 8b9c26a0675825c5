//! Confined file tools: list, read, find, grep, and writes where the policy grants them.
//!
//! Every operation goes through a [`Root`]: a directory handle plus the shared policy. Paths from the model
//! are opened beneath that handle with `openat2(RESOLVE_BENEATH)`, and what the kernel actually opened is
//! what the policy judges, so there is no window between "check the string" and "open the name". See
//! [`root`](crate::Root) for the security model, and `SECURITY.md` for the tests that try to break it.
//!
//! ```no_run
//! use stockade_fs::{ReadOptions, Root, RootOptions};
//! let root = Root::open("/srv/repo".as_ref(), RootOptions::default())?;
//! let text = root.read_file("src/lib.rs", ReadOptions::default())?;
//! assert!(root.read_file("../etc/passwd", ReadOptions::default()).is_err());
//! # Ok::<(), stockade_fs::FsError>(())
//! ```

mod context;
mod error;
mod read;
mod root;
mod search;
mod walk;
mod write;

pub use context::{FsContext, context_schema};
pub use error::FsError;
pub use read::{
    DEFAULT_MAX_ENTRIES, DEFAULT_MAX_READ_BYTES, DirEntry, EntryKind, FileContent, FileInfo,
    Listing, ReadOptions, Tree, TreeNode,
};
pub use root::{PathMode, Root, RootOptions, root_policy};
pub use search::{
    DEFAULT_MAX_RESULTS, DEFAULT_WALK_TIMEOUT, FindOptions, FindResult, Found, GrepMatch,
    GrepOptions, GrepResult, WalkLimits,
};
pub use write::{Edit, MAX_EDIT_BYTES, WriteOutcome};

#[cfg(test)]
mod tests;
