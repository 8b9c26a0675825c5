//! The sandbox part's one error type. "This system cannot" and "this policy or command is wrong" are
//! separate variants, so callers can tell a user which one to fix.

use std::path::PathBuf;

/// Why a confined process could not be started (or was not, to fail closed).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The kernel lacks something the policy needs.
    #[error(
        "this system cannot enforce the policy: {feature}; {setting}. Pass --best-effort to run with what the kernel has (weaker confinement)"
    )]
    Unsupported {
        /// What is missing.
        feature: String,
        /// The setting or upgrade that provides it.
        setting: String,
    },
    /// Unprivileged user namespaces are forbidden here.
    #[error(
        "cannot create a user namespace ({source}); unprivileged user namespaces are forbidden on this system: enable them with `sysctl kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu), `sysctl kernel.unprivileged_userns_clone=1` (older Debian) or a non-zero `user.max_user_namespaces`, or run stockade as root with --user"
    )]
    UserNamespaces {
        /// The OS error.
        source: std::io::Error,
    },
    /// The program does not exist (exit 127).
    #[error("'{program}': command not found in the sandbox's PATH ({path})")]
    NotFound {
        /// As given.
        program: String,
        /// The PATH searched.
        path: String,
    },
    /// The program exists but cannot be run (exit 126).
    #[error("'{program}' cannot be executed: {reason}")]
    NotExecutable {
        /// As given or resolved.
        program: String,
        /// Why.
        reason: String,
    },
    /// The working directory is not visible under the policy.
    #[error("the working directory '{cwd}' is not readable under the policy: {reason}")]
    CwdNotVisible {
        /// The directory.
        cwd: PathBuf,
        /// The policy's denial.
        reason: String,
    },
    /// The working directory lies in one of the run's private areas, which start empty.
    #[error(
        "the working directory '{cwd}' cannot be shown inside the sandbox: it lies in '{area}', which each run gets fresh and empty; start from a directory outside it"
    )]
    CwdInPrivateArea {
        /// The directory.
        cwd: PathBuf,
        /// The private area (`/dev/shm`, `/tmp`, ...).
        area: PathBuf,
    },
    /// Looking for existing glob matches took too many entries.
    #[error(
        "glob '{glob}' would need more than {limit} directory entries examined to find its existing matches; narrow it (e.g. 'src/**/.env' instead of '**/.env')"
    )]
    GlobWalkTooLarge {
        /// The glob as written.
        glob: String,
        /// The limit.
        limit: usize,
    },
    /// The policy asks for something that cannot hold for this user.
    #[error("{message}")]
    Policy {
        /// What and how to fix it.
        message: String,
    },
    /// A step of building the sandbox failed inside the child, before the program started.
    #[error("sandbox setup failed at '{stage}': {source}")]
    Setup {
        /// The step.
        stage: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// Something failed in the supervisor.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl SandboxError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SandboxError {
        let what = what.into();
        move |source| SandboxError::Io { what, source }
    }

    /// The exit code `stockade run` uses for this error (DESIGN.md, "Command line").
    pub fn exit_code(&self) -> u8 {
        match self {
            SandboxError::NotFound { .. } => 127,
            SandboxError::NotExecutable { .. } => 126,
            SandboxError::Setup { stage, source } if *stage == "exec" => {
                if source.kind() == std::io::ErrorKind::NotFound {
                    127
                } else {
                    126
                }
            }
            _ => 125,
        }
    }
}
