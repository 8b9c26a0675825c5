//! Writing tools: `write_file`, `edit_file`, `create_directory`, `move_file`. Each judges the entry it
//! changes for `write` before changing anything, and changes it through a descriptor opened beneath the root:
//! an existing file is reopened through the very descriptor that was judged, a new one is created with
//! `O_EXCL | O_NOFOLLOW` in a parent directory opened beneath the root.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use stockade_policy::{Access, CanonicalPath, ScopeTarget};

use crate::error::FsError;
use crate::read::{for_each_entry, read_all, regular_size};
use crate::root::{Opened, Root};

/// Largest file `edit_file` loads.
pub const MAX_EDIT_BYTES: u64 = 16 * 1024 * 1024;

/// One replacement of [`Root::edit_file`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Edit {
    /// Text to find; it must occur exactly once.
    pub old_text: String,
    /// Text to put in its place.
    pub new_text: String,
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WriteOutcome {
    /// Relative to the root.
    pub path: String,
    /// `created`, `replaced`, `edited`, `moved`, `exists`.
    pub action: String,
    /// Bytes now in the file (0 for directories).
    pub bytes: u64,
}

/// A parent directory opened beneath the root, and the last component to act on in it.
struct Slot {
    parent: Opened,
    name: PathBuf,
}

impl Slot {
    fn real(&self) -> PathBuf {
        self.parent.real.join(&self.name)
    }
}

impl Root {
    fn slot(&self, shown: &str, relative: &Path) -> Result<Slot, FsError> {
        let name = match relative.components().next_back() {
            Some(Component::Normal(name)) => PathBuf::from(name),
            _ => {
                return Err(FsError::InvalidArgument {
                    what: "path",
                    reason: format!("{shown:?} does not end in a file name"),
                });
            }
        };
        let parent = relative.parent().filter(|p| !p.as_os_str().is_empty());
        let parent = parent.unwrap_or(Path::new("."));
        let parent = self.open_beneath(shown, parent, OFlags::PATH | OFlags::DIRECTORY)?;
        Ok(Slot { parent, name })
    }

    /// Opens an existing file for writing: judged on what it is, reopened through the judged descriptor.
    fn reopen_for_write(
        &self,
        shown: &str,
        opened: &Opened,
        flags: OFlags,
        action: &'static str,
    ) -> Result<File, FsError> {
        self.check(shown, &opened.real, Access::Write)?;
        regular_size(shown, &opened.fd, action)?;
        let again = format!("/proc/self/fd/{}", opened.fd.as_raw_fd());
        let fd = rustix::fs::open(again.as_str(), flags | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| self.io(shown, e.into()))?;
        Ok(File::from(fd))
    }

    /// Writes `content` to a file, creating it (not its parents) or replacing what it holds. A dangling
    /// symlink is followed, as the kernel would: the file it names is created, judged by its own path
    /// (issue 35: the tools refused what `explain` and the hook allow).
    pub fn write_file(&self, path: &str, content: &str) -> Result<WriteOutcome, FsError> {
        self.write_file_following(path, content, 0)
    }

    fn write_file_following(
        &self,
        path: &str,
        content: &str,
        hops: u32,
    ) -> Result<WriteOutcome, FsError> {
        /// Symlinks followed for one write, as the kernel's own limit.
        const MAX_HOPS: u32 = 40;
        let relative = self.relative(path)?;
        match self.open_beneath(path, &relative, OFlags::PATH) {
            Ok(opened) => {
                let mut file = self.reopen_for_write(
                    path,
                    &opened,
                    OFlags::WRONLY | OFlags::TRUNC,
                    "written",
                )?;
                file.write_all(content.as_bytes())
                    .map_err(|e| self.io(path, e))?;
                Ok(WriteOutcome {
                    path: self.display(&opened.real),
                    action: "replaced".to_string(),
                    bytes: content.len() as u64,
                })
            }
            Err(FsError::NotFound { .. }) => {
                let slot = self.slot(path, &relative)?;
                if let Ok(target) = rustix::fs::readlinkat(&slot.parent.fd, &slot.name, Vec::new())
                    && hops < MAX_HOPS
                {
                    // Where the link leads, spelled from the root's real path: `relative` and the opens
                    // beneath the root then refuse it if it leads out.
                    let target = PathBuf::from(std::ffi::OsStr::from_bytes(target.as_bytes()));
                    let next = slot.parent.real.join(target);
                    return self.write_file_following(&self.display(&next), content, hops + 1);
                }
                let real = slot.real();
                self.check(path, &real, Access::Write)?;
                let fd = self.create_in(path, &slot, OFlags::WRONLY)?;
                File::from(fd)
                    .write_all(content.as_bytes())
                    .map_err(|e| self.io(path, e))?;
                Ok(WriteOutcome {
                    path: self.display(&real),
                    action: "created".to_string(),
                    bytes: content.len() as u64,
                })
            }
            Err(other) => Err(other),
        }
    }

    fn create_in(&self, shown: &str, slot: &Slot, flags: OFlags) -> Result<OwnedFd, FsError> {
        rustix::fs::openat(
            &slot.parent.fd,
            &slot.name,
            flags | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_bits_truncate(0o644),
        )
        .map_err(|errno| match errno {
            // The name exists but did not resolve: a dangling symlink (or a race).
            Errno::EXIST => FsError::Exists {
                path: shown.to_string(),
                hint: "it is a dangling symbolic link; write to the path it names instead",
            },
            other => self.errno(shown, other),
        })
    }

    /// Replaces text in a file: every edit's `old_text` must occur exactly once (checked against the text
    /// as the earlier edits left it); if any does not, nothing is written.
    pub fn edit_file(&self, path: &str, edits: &[Edit]) -> Result<WriteOutcome, FsError> {
        if edits.is_empty() {
            return Err(FsError::InvalidArgument {
                what: "edits",
                reason: "no edits given".to_string(),
            });
        }
        let relative = self.relative(path)?;
        let opened = self.open_beneath(path, &relative, OFlags::PATH)?;
        let reader = self.reopen_for_write(path, &opened, OFlags::RDONLY, "edited")?;
        let size = regular_size(path, &opened.fd, "edited")?;
        if size > MAX_EDIT_BYTES {
            return Err(FsError::InvalidArgument {
                what: "file",
                reason: format!(
                    "{path:?} is {size} bytes; edit_file loads at most {MAX_EDIT_BYTES}"
                ),
            });
        }
        let bytes = read_all(reader.into(), MAX_EDIT_BYTES).map_err(|e| self.io(path, e))?;
        let mut text = String::from_utf8(bytes).map_err(|_| FsError::Binary {
            path: path.to_string(),
            size,
        })?;
        for (i, edit) in edits.iter().enumerate() {
            let fail = |reason: String| FsError::Edit {
                path: path.to_string(),
                index: i + 1,
                reason,
            };
            if edit.old_text.is_empty() {
                return Err(fail("has an empty oldText".to_string()));
            }
            match text.matches(edit.old_text.as_str()).count() {
                0 => return Err(fail("oldText was not found".to_string())),
                1 => {}
                n => {
                    return Err(fail(format!(
                        "oldText occurs {n} times; include more surrounding text to make it unique"
                    )));
                }
            }
            text = text.replacen(edit.old_text.as_str(), &edit.new_text, 1);
        }
        let mut file =
            self.reopen_for_write(path, &opened, OFlags::WRONLY | OFlags::TRUNC, "edited")?;
        file.write_all(text.as_bytes())
            .map_err(|e| self.io(path, e))?;
        Ok(WriteOutcome {
            path: self.display(&opened.real),
            action: "edited".to_string(),
            bytes: text.len() as u64,
        })
    }

    /// Creates a directory and any missing parents; an existing directory is not an error.
    pub fn create_directory(&self, path: &str) -> Result<WriteOutcome, FsError> {
        let relative = self.relative(path)?;
        let mut prefix = PathBuf::new();
        let mut last: Option<Opened> = None;
        let mut created = false;
        for component in relative.components() {
            prefix.push(component);
            match self.open_beneath(path, &prefix, OFlags::PATH | OFlags::DIRECTORY) {
                Ok(opened) => last = Some(opened),
                Err(FsError::NotFound { .. }) => {
                    let slot = self.slot(path, &prefix)?;
                    let real = slot.real();
                    self.check(path, &real, Access::Write)?;
                    match rustix::fs::mkdirat(
                        &slot.parent.fd,
                        &slot.name,
                        Mode::from_bits_truncate(0o755),
                    ) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(errno) => return Err(self.errno(path, errno)),
                    }
                    created = true;
                    last =
                        Some(self.open_beneath(path, &prefix, OFlags::PATH | OFlags::DIRECTORY)?);
                }
                Err(other) => return Err(other),
            }
        }
        let real = match last {
            Some(opened) => opened.real,
            None => self.path().to_path_buf(),
        };
        Ok(WriteOutcome {
            path: self.display(&real),
            action: if created { "created" } else { "exists" }.to_string(),
            bytes: 0,
        })
    }

    /// Moves (renames) a file or directory; the destination must not exist. A directory move is refused
    /// when anything inside it would gain access at its new place (rules are by path: moving `secrets/`
    /// out from under its `deny` would otherwise expose it).
    pub fn move_file(&self, source: &str, destination: &str) -> Result<WriteOutcome, FsError> {
        let from_relative = self.relative(source)?;
        let to_relative = self.relative(destination)?;
        let from = self.slot(source, &from_relative)?;
        let to = self.slot(destination, &to_relative)?;
        let from_real = from.real();
        let to_real = to.real();
        self.check(source, &from_real, Access::Write)?;
        self.check(destination, &to_real, Access::Write)?;
        let st = rustix::fs::statat(
            &from.parent.fd,
            &from.name,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|e| self.errno(source, e))?;
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
            self.check_directory_move(source, &from, &to_real)?;
        }
        rustix::fs::renameat_with(
            &from.parent.fd,
            &from.name,
            &to.parent.fd,
            &to.name,
            RenameFlags::NOREPLACE,
        )
        .map_err(|errno| match errno {
            Errno::EXIST => FsError::Exists {
                path: destination.to_string(),
                hint: "move_file does not replace; move or delete the existing entry first",
            },
            other => self.errno(source, other),
        })?;
        Ok(WriteOutcome {
            path: self.display(&to_real),
            action: "moved".to_string(),
            bytes: 0,
        })
    }

    /// Refuses a directory move that would raise any entry's level, or carry a path rule's target along.
    fn check_directory_move(
        &self,
        shown: &str,
        from: &Slot,
        to_real: &Path,
    ) -> Result<(), FsError> {
        let from_real = from.real();
        let carried = self
            .policy()
            .scopes()
            .iter()
            .find(|scope| match &scope.target {
                ScopeTarget::Path(target) => {
                    let p = target.canonical.as_path();
                    p.starts_with(&from_real) && p != from_real
                }
                _ => false,
            });
        if let Some(scope) = carried {
            return Err(FsError::InvalidArgument {
                what: "move",
                reason: format!(
                    "moving {shown:?} would carry {} away from the path it names; move the files inside instead",
                    scope.describe()
                ),
            });
        }
        let dir = rustix::fs::openat(
            &from.parent.fd,
            &from.name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| self.errno(shown, e))?;
        let mut budget = 100_000usize;
        self.compare_levels(shown, &dir, &from_real, to_real, &mut budget)
    }

    fn compare_levels(
        &self,
        shown: &str,
        dir: &OwnedFd,
        old: &Path,
        new: &Path,
        budget: &mut usize,
    ) -> Result<(), FsError> {
        let mut subdirs = Vec::new();
        let mut raised: Option<PathBuf> = None;
        for_each_entry(self, shown, dir, |name, file_type| {
            let name = std::ffi::OsStr::from_bytes(name.to_bytes()).to_os_string();
            let old_path = old.join(&name);
            let new_path = new.join(&name);
            let level = |p: &Path| {
                self.policy()
                    .decide_for_tools(
                        &CanonicalPath::assume_canonical(p.to_path_buf()),
                        Access::Read,
                    )
                    .level()
            };
            if level(&new_path) > level(&old_path) {
                raised = Some(old_path);
                return false;
            }
            *budget = budget.saturating_sub(1);
            if file_type == FileType::Directory {
                subdirs.push(name);
            }
            *budget > 0
        })?;
        if let Some(path) = raised {
            return Err(FsError::InvalidArgument {
                what: "move",
                reason: format!(
                    "moving {shown:?} would expose {} to more access than the policy gives it where it is",
                    self.display(&path)
                ),
            });
        }
        if *budget == 0 {
            return Err(FsError::InvalidArgument {
                what: "move",
                reason: format!("{shown:?} holds too many entries to check the move safely"),
            });
        }
        for name in subdirs {
            let fd = rustix::fs::openat(
                dir,
                name.as_os_str(),
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| self.errno(shown, e))?;
            self.compare_levels(shown, &fd, &old.join(&name), &new.join(&name), budget)?;
        }
        Ok(())
    }
}
