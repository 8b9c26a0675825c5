//! [`Root`]: a directory handle, the policy that judges what lies beneath it, and the one way in.
//!
//! Security model. A path from the model is never opened by name. It is first checked lexically (NUL bytes,
//! absolute paths, `..` that climbs above the root) so the common mistakes get a precise message, then
//! opened with `openat2(root_fd, path, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: the kernel resolves every
//! component, follows symlinks only while they stay beneath the root, and fails with `EXDEV` otherwise. What
//! was actually opened is then named by the kernel (`/proc/self/fd/N`) and that name, not the string the
//! model sent, is judged by the shared policy. A directory swapped for a symlink between any two of these
//! steps makes the open fail or land beneath the root; it never reaches outside.
//!
//! `RESOLVE_BENEATH` refuses every absolute symlink, even one pointing back inside the root. Those are
//! retried once: the full path is resolved as the kernel would, and if the result lies inside the root it is
//! opened again with `RESOLVE_NO_SYMLINKS`, so a concurrent swap makes that open fail instead of escape.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use stockade_policy::{Access, CanonicalPath, PolicyBuilder, ResolvedPolicy, ScopeKind, Variables};

use crate::error::FsError;

/// How absolute paths from the model are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PathMode {
    /// Accepted when they lie inside the root (MCP clients commonly send absolute paths).
    #[default]
    InsideRoot,
    /// Always refused: every path is relative to the root (the seed's context mode, `--relative-only`).
    RelativeOnly,
}

/// How a [`Root`] is opened.
#[derive(Debug, Clone, Default)]
pub struct RootOptions {
    /// Grant write beneath the root (otherwise read, unless the policy grants more).
    pub write: bool,
    /// How absolute paths are treated.
    pub path_mode: PathMode,
    /// A policy whose scopes apply inside the root too (`--policy`, `--profile`); `None`: the root alone.
    pub policy: Option<PolicyBuilder>,
}

/// A confined directory: every operation of the file tools goes through one.
///
/// Cheap to share between threads (`Arc` it); every method takes `&self`.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    canonical: PathBuf,
    given: PathBuf,
    policy: Arc<ResolvedPolicy>,
    mode: PathMode,
    writable: bool,
    /// `/proc/self/fd` of the process that opened the root, and that process: naming an opened file
    /// through it skips walking `/proc/self/fd` on every call. A forked child names its own descriptors,
    /// so it falls back to the full path (see `real_path`).
    proc_fds: Option<(OwnedFd, rustix::process::Pid)>,
}

/// A path inside the root, as the kernel resolved it.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) fd: OwnedFd,
    /// Canonical absolute path of what was opened.
    pub(crate) real: PathBuf,
}

impl Root {
    /// Opens `path` as a root: it must be an existing directory.
    pub fn open(path: &Path, options: RootOptions) -> Result<Root, FsError> {
        let bad = |reason: String| FsError::Root {
            path: path.to_path_buf(),
            reason,
        };
        let given = std::path::absolute(path).map_err(|e| bad(e.to_string()))?;
        let canonical = std::fs::canonicalize(&given).map_err(|e| bad(e.to_string()))?;
        let fd = rustix::fs::open(
            &canonical,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| bad(std::io::Error::from(e).to_string()))?;
        let policy = root_policy(&canonical, options.write, options.policy)?;
        let writable = policy
            .decide(
                &CanonicalPath::assume_canonical(canonical.clone()),
                Access::Write,
            )
            .is_allow()
            || policy.scopes().iter().any(|s| {
                s.kind == ScopeKind::Write
                    && match &s.target {
                        stockade_policy::ScopeTarget::Path(p) => {
                            p.canonical.as_path().starts_with(&canonical)
                        }
                        stockade_policy::ScopeTarget::Glob(g) => {
                            g.prefix.starts_with(&canonical) || canonical.starts_with(&g.prefix)
                        }
                        _ => false,
                    }
            });
        let proc_fds = rustix::fs::open(
            "/proc/self/fd",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()
        .map(|dir| (dir, rustix::process::getpid()));
        Ok(Root {
            fd,
            canonical,
            given,
            policy: Arc::new(policy),
            mode: options.path_mode,
            writable,
            proc_fds,
        })
    }

    /// The root, canonical.
    pub fn path(&self) -> &Path {
        &self.canonical
    }

    /// The policy that judges every path beneath the root.
    pub fn policy(&self) -> &ResolvedPolicy {
        &self.policy
    }

    /// Whether anything beneath the root may be written: the write tools are offered only then.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// How absolute paths are treated.
    pub fn path_mode(&self) -> PathMode {
        self.mode
    }

    /// Turns a path from the model into one relative to the root, or refuses it with the reason.
    pub(crate) fn relative(&self, path: &str) -> Result<PathBuf, FsError> {
        if path.contains('\0') {
            return Err(FsError::NulByte {
                path: path.replace('\0', "\\0"),
            });
        }
        let as_path = Path::new(path);
        let relative = if as_path.is_absolute() {
            if self.mode == PathMode::RelativeOnly {
                return Err(FsError::Absolute {
                    path: path.to_string(),
                    root: self.canonical.clone(),
                });
            }
            // Whole components: `/x/repo-evil` and `/x/repo ` do not start with `/x/repo`.
            let stripped = as_path
                .strip_prefix(&self.canonical)
                .or_else(|_| as_path.strip_prefix(&self.given));
            match stripped {
                Ok(rest) => rest.to_path_buf(),
                Err(_) => {
                    return Err(FsError::OutsideRoot {
                        path: path.to_string(),
                        root: self.canonical.clone(),
                    });
                }
            }
        } else {
            as_path.to_path_buf()
        };
        let mut depth = 0usize;
        for component in relative.components() {
            match component {
                Component::ParentDir => {
                    depth = depth.checked_sub(1).ok_or_else(|| FsError::Climbs {
                        path: path.to_string(),
                        root: self.canonical.clone(),
                    })?;
                }
                Component::Normal(_) => depth += 1,
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            }
        }
        if relative.as_os_str().is_empty() {
            return Ok(PathBuf::from("."));
        }
        Ok(relative)
    }

    /// Opens the model's `path` beneath the root with `flags` and judges what the kernel opened for read:
    /// the start of every read-side tool.
    pub(crate) fn open_to_read(&self, path: &str, flags: OFlags) -> Result<Opened, FsError> {
        let relative = self.relative(path)?;
        let opened = self.open_beneath(path, &relative, flags)?;
        self.check(path, &opened.real, Access::Read)?;
        Ok(opened)
    }

    /// Opens `relative` beneath the root with `flags`, or explains why not.
    pub(crate) fn open_beneath(
        &self,
        shown: &str,
        relative: &Path,
        flags: OFlags,
    ) -> Result<Opened, FsError> {
        // openat2 takes O_PATH only with O_DIRECTORY, O_NOFOLLOW and O_CLOEXEC (EINVAL otherwise).
        let flags = if flags.contains(OFlags::PATH) {
            flags | OFlags::CLOEXEC
        } else {
            flags | OFlags::CLOEXEC | OFlags::NOCTTY
        };
        let beneath = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        match self.openat2_retrying(relative, flags, beneath) {
            Ok(fd) => self.named(shown, fd),
            Err(Errno::XDEV) => self.open_through_absolute_link(shown, relative, flags),
            Err(errno) => Err(self.errno(shown, errno)),
        }
    }

    /// The slow path for `EXDEV`: an absolute symlink, or a link whose `..` leaves the root.
    fn open_through_absolute_link(
        &self,
        shown: &str,
        relative: &Path,
        flags: OFlags,
    ) -> Result<Opened, FsError> {
        let escape = || FsError::SymlinkEscape {
            path: shown.to_string(),
            root: self.canonical.clone(),
        };
        let resolved = CanonicalPath::resolve(&self.canonical.join(relative))
            .map_err(|source| self.io(shown, source))?;
        let inside = resolved
            .as_path()
            .strip_prefix(&self.canonical)
            .map_err(|_| escape())?;
        let inside = if inside.as_os_str().is_empty() {
            Path::new(".")
        } else {
            inside
        };
        let strict =
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_SYMLINKS;
        match self.openat2_retrying(inside, flags, strict) {
            Ok(fd) => self.named(shown, fd),
            // Swapped for a link since we resolved it: refuse rather than chase it.
            Err(Errno::XDEV | Errno::LOOP) => Err(escape()),
            Err(errno) => Err(self.errno(shown, errno)),
        }
    }

    fn openat2_retrying(
        &self,
        relative: &Path,
        flags: OFlags,
        resolve: ResolveFlags,
    ) -> Result<OwnedFd, Errno> {
        // openat2 returns EAGAIN when a concurrent rename makes a `..` walk ambiguous; retry a few times.
        // openat2 refuses a mode without O_CREAT (EINVAL), unlike openat.
        let mode = if flags.contains(OFlags::CREATE) {
            Mode::from_bits_truncate(0o644)
        } else {
            Mode::empty()
        };
        let mut last = Errno::AGAIN;
        for _ in 0..16 {
            match rustix::fs::openat2(&self.fd, relative, flags, mode, resolve) {
                Err(Errno::AGAIN | Errno::INTR) => last = Errno::AGAIN,
                other => return other,
            }
        }
        Err(last)
    }

    /// `fd` with the path the kernel gives it.
    fn named(&self, shown: &str, fd: OwnedFd) -> Result<Opened, FsError> {
        let real = self.real_path(shown, &fd)?;
        Ok(Opened { fd, real })
    }

    /// What the kernel says an open file descriptor is: the canonical path of the object itself.
    pub(crate) fn real_path(&self, shown: &str, fd: &OwnedFd) -> Result<PathBuf, FsError> {
        let number = std::os::fd::AsRawFd::as_raw_fd(fd).to_string();
        let target = match &self.proc_fds {
            Some((dir, pid)) if *pid == rustix::process::getpid() => {
                rustix::fs::readlinkat(dir, number.as_str(), Vec::new())
            }
            _ => rustix::fs::readlink(format!("/proc/self/fd/{number}").as_str(), Vec::new()),
        }
        .map_err(|e| {
            self.io(
                shown,
                std::io::Error::other(format!(
                    "cannot name the opened file through /proc ({e}); the file tools need /proc mounted"
                )),
            )
        })?;
        let real = PathBuf::from(OsStr::from_bytes(target.as_bytes()));
        // Defense in depth: the kernel resolved beneath the root, so this holds unless the root itself moved.
        if !real.starts_with(&self.canonical) {
            return Err(FsError::SymlinkEscape {
                path: shown.to_string(),
                root: self.canonical.clone(),
            });
        }
        Ok(real)
    }

    /// Judges `access` to the canonical path `real` by the policy.
    pub(crate) fn check(&self, shown: &str, real: &Path, access: Access) -> Result<(), FsError> {
        let canonical = CanonicalPath::assume_canonical(real.to_path_buf());
        // The file tools are the agent's own: `runtime` paths are for the programs it runs, not for them.
        let decision = self.policy.decide_for_tools(&canonical, access);
        match self.policy.denial(&canonical, access, decision) {
            None => Ok(()),
            Some(denial) => Err(FsError::Denied {
                path: shown.to_string(),
                denial: Box::new(denial),
            }),
        }
    }

    /// Whether `access` to `real` is allowed (for filtering walk results without building a message).
    pub(crate) fn allows(&self, real: &Path, access: Access) -> bool {
        self.policy
            .decide_for_tools(&CanonicalPath::assume_canonical(real.to_path_buf()), access)
            .is_allow()
    }

    /// The path shown to the model for a canonical path beneath the root: relative, `/`-separated, `.` for
    /// the root itself.
    pub(crate) fn display(&self, real: &Path) -> String {
        match real.strip_prefix(&self.canonical) {
            Ok(rest) if rest.as_os_str().is_empty() => ".".to_string(),
            Ok(rest) => rest.to_string_lossy().into_owned(),
            Err(_) => real.to_string_lossy().into_owned(),
        }
    }

    pub(crate) fn errno(&self, shown: &str, errno: Errno) -> FsError {
        match errno {
            Errno::NOENT => FsError::NotFound {
                path: shown.to_string(),
                root: self.canonical.clone(),
            },
            Errno::NOTDIR => FsError::NotADirectory {
                path: shown.to_string(),
            },
            Errno::XDEV => FsError::SymlinkEscape {
                path: shown.to_string(),
                root: self.canonical.clone(),
            },
            Errno::NOSYS => self.io(
                shown,
                std::io::Error::other(
                    "the kernel has no openat2 (Linux 5.6 or later is needed to open beneath the root; \
                     under valgrind or a seccomp filter that blocks it, the file tools refuse rather than open by name)",
                ),
            ),
            Errno::NXIO => FsError::NotAFile {
                path: shown.to_string(),
                kind: "socket",
                action: "read",
            },
            other => self.io(shown, other.into()),
        }
    }

    pub(crate) fn io(&self, shown: &str, source: std::io::Error) -> FsError {
        FsError::Io {
            path: shown.to_string(),
            source,
        }
    }
}

/// The policy of a root: `policy`'s scopes, plus the root granted read (or write with `write`) unless the
/// policy already grants that much there. A policy that denies the root outright makes this an error.
pub fn root_policy(
    root: &Path,
    write: bool,
    policy: Option<PolicyBuilder>,
) -> Result<ResolvedPolicy, FsError> {
    let (kind, flag, access) = if write {
        (ScopeKind::Write, "--write", Access::Write)
    } else {
        (ScopeKind::Read, "--root", Access::Read)
    };
    let root_text = root.to_string_lossy().into_owned();
    let mut builder = match policy {
        Some(builder) => {
            let resolved = builder.build()?;
            let at_root = CanonicalPath::assume_canonical(root.to_path_buf());
            if resolved.decide_for_tools(&at_root, access).is_allow() {
                return Ok(resolved);
            }
            builder
        }
        None => {
            let mut vars = Variables::default();
            vars.set_path("CWD", root);
            vars.set_path("HOME", root);
            let mut builder = PolicyBuilder::new(vars);
            builder.policy_text("[profile.root]\n", "<file tools>");
            builder
        }
    };
    builder.flag_scope(kind, root_text, flag);
    Ok(builder.build()?)
}
