//! Reading tools: `read_file`, `read_multiple_files`, `list_directory`, `file_info`, `directory_tree`.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, OFlags, RawDir};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use stockade_policy::Access;

use crate::error::FsError;
use crate::root::Root;

/// Default cap on the bytes `read_file` returns.
pub const DEFAULT_MAX_READ_BYTES: u64 = 256 * 1024;
/// Default cap on entries of one listing or tree.
pub const DEFAULT_MAX_ENTRIES: usize = 10_000;

/// What kind of file an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (not followed by listings and walks).
    Symlink,
    /// A FIFO, socket or device: listed, never opened.
    Other,
}

impl EntryKind {
    pub(crate) fn of(file_type: FileType) -> EntryKind {
        match file_type {
            FileType::RegularFile => EntryKind::File,
            FileType::Directory => EntryKind::Directory,
            FileType::Symlink => EntryKind::Symlink,
            _ => EntryKind::Other,
        }
    }

    /// How text listings mark the kind after a name: `/` for a directory, `@` for a link, else nothing.
    pub fn suffix(self) -> &'static str {
        match self {
            EntryKind::Directory => "/",
            EntryKind::Symlink => "@",
            EntryKind::File | EntryKind::Other => "",
        }
    }
}

/// The text of bytes read from a file: taken as they are when valid UTF-8 (no copy of the file), else with
/// U+FFFD for each bad sequence.
fn into_text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

pub(crate) fn describe(file_type: FileType) -> &'static str {
    match file_type {
        FileType::RegularFile => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symbolic link",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Unknown => "file of unknown type",
    }
}

/// Options of [`Root::read_file`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// First line to return, 1-based (default 1).
    pub start_line: Option<usize>,
    /// Last line to return, inclusive (default: to the end).
    pub end_line: Option<usize>,
    /// At most this many bytes are returned; the rest is cut at a line boundary and `truncated` set.
    pub max_bytes: u64,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            start_line: None,
            end_line: None,
            max_bytes: DEFAULT_MAX_READ_BYTES,
        }
    }
}

/// A file's text, or the requested lines of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileContent {
    /// Relative to the root, as resolved.
    pub path: String,
    /// The text (invalid UTF-8 replaced).
    pub content: String,
    /// First line returned, 1-based.
    pub start_line: usize,
    /// Last line returned (0 when none).
    pub end_line: usize,
    /// The file's size in bytes.
    pub size: u64,
    /// Whether the cap cut the text short.
    pub truncated: bool,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DirEntry {
    /// The entry's name.
    pub name: String,
    /// What it is.
    pub kind: EntryKind,
    /// Size in bytes, for files, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// A directory's entries, sorted by name; entries the policy denies are left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Listing {
    /// Relative to the root, as resolved.
    pub path: String,
    /// The entries.
    pub entries: Vec<DirEntry>,
    /// How many entries were left out because the policy denies reading them.
    pub hidden: usize,
    /// Whether the entry cap cut the listing short.
    pub truncated: bool,
}

/// Metadata of one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileInfo {
    /// Relative to the root, as resolved (symlinks inside the root followed).
    pub path: String,
    /// What it is.
    pub kind: EntryKind,
    /// Size in bytes.
    pub size: u64,
    /// Permission bits, octal (`644`).
    pub mode: String,
    /// Last modification, seconds since the Unix epoch.
    pub modified: i64,
    /// Whether the policy lets the tools write it.
    pub writable: bool,
}

/// A node of [`Root::directory_tree`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TreeNode {
    /// The entry's name (`.` for the start).
    pub name: String,
    /// What it is.
    pub kind: EntryKind,
    /// Children of a directory within the depth cap; absent beyond it and for files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<TreeNode>>,
}

/// A whole tree, with whether a cap cut it short.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tree {
    /// Relative to the root, as resolved.
    pub path: String,
    /// The start directory and what is beneath it.
    pub root: TreeNode,
    /// Whether the entry cap cut the tree short.
    pub truncated: bool,
}

impl Root {
    /// Reads a regular file as text, whole or a line range, up to `options.max_bytes`.
    pub fn read_file(&self, path: &str, options: ReadOptions) -> Result<FileContent, FsError> {
        // O_NONBLOCK: opening a FIFO must not hang; it is refused below by its type.
        let opened = self.open_to_read(path, OFlags::RDONLY | OFlags::NONBLOCK)?;
        let size = regular_size(path, &opened.fd, "read")?;
        let start = options.start_line.unwrap_or(1).max(1);
        if let Some(end) = options.end_line
            && end < start
        {
            return Err(FsError::InvalidArgument {
                what: "line range",
                reason: format!("end line {end} is before start line {start}"),
            });
        }
        let shown = self.display(&opened.real);
        let cap = usize::try_from(options.max_bytes).unwrap_or(usize::MAX);
        if start == 1 && options.end_line.is_none() {
            return self.read_whole(path, shown, File::from(opened.fd), size, cap);
        }
        let mut reader = BufReader::new(File::from(opened.fd));
        let mut content = Vec::new();
        let mut line = Vec::new();
        let mut number = 0usize;
        let mut last = 0usize;
        let mut truncated = false;
        loop {
            line.clear();
            let (read, whole) =
                bounded_line(&mut reader, &mut line, cap).map_err(|e| self.io(path, e))?;
            if read == 0 {
                break;
            }
            number += 1;
            if number < start {
                continue;
            }
            if options.end_line.is_some_and(|end| number > end) {
                break;
            }
            if number == start && looks_binary(&line) {
                return Err(FsError::Binary {
                    path: path.to_string(),
                    size,
                });
            }
            if !whole || content.len() + line.len() > cap {
                truncated = true;
                if content.is_empty() {
                    // One line longer than the cap: return its head rather than nothing.
                    content.extend_from_slice(&line[..cap.min(line.len())]);
                    last = number;
                }
                break;
            }
            content.extend_from_slice(&line);
            last = number;
        }
        Ok(FileContent {
            path: shown,
            content: into_text(content),
            start_line: start,
            end_line: last,
            size,
            truncated,
        })
    }

    /// The common case, a whole file: one bounded read, cut at the last line that fits the cap.
    fn read_whole(
        &self,
        path: &str,
        shown: String,
        file: File,
        size: u64,
        cap: usize,
    ) -> Result<FileContent, FsError> {
        let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
        let mut bytes = Vec::with_capacity(usize::try_from(size.min(limit)).unwrap_or(0));
        file.take(limit)
            .read_to_end(&mut bytes)
            .map_err(|e| self.io(path, e))?;
        if looks_binary(&bytes) {
            return Err(FsError::Binary {
                path: path.to_string(),
                size,
            });
        }
        let truncated = bytes.len() > cap;
        if truncated {
            bytes.truncate(cap);
            // Cut after the last whole line, unless one line is longer than the cap.
            if let Some(end) = bytes.iter().rposition(|&b| b == b'\n') {
                bytes.truncate(end + 1);
            }
        }
        let lines = bytes.iter().filter(|&&b| b == b'\n').count();
        let end_line = if bytes.is_empty() {
            0
        } else if bytes.ends_with(b"\n") {
            lines
        } else {
            lines + 1
        };
        Ok(FileContent {
            path: shown,
            content: into_text(bytes),
            start_line: 1,
            end_line,
            size,
            truncated,
        })
    }

    /// Reads several files; each gets its own result, so one refusal does not hide the others.
    pub fn read_multiple_files(
        &self,
        paths: &[String],
        options: ReadOptions,
    ) -> Vec<Result<FileContent, FsError>> {
        paths.iter().map(|p| self.read_file(p, options)).collect()
    }

    /// Lists a directory; entries the policy denies are left out and counted in `hidden`. File sizes cost
    /// a `stat` per entry, so they are filled in only `with_sizes`.
    pub fn list_directory(
        &self,
        path: &str,
        max_entries: usize,
        with_sizes: bool,
    ) -> Result<Listing, FsError> {
        let opened = self.open_to_read(path, OFlags::RDONLY | OFlags::DIRECTORY)?;
        let mut entries = Vec::new();
        let mut hidden = 0;
        let mut truncated = false;
        for_each_entry(self, path, &opened.fd, |name, file_type| {
            let real = opened
                .real
                .join(std::ffi::OsStr::from_bytes(name.to_bytes()));
            if !self.allows(&real, Access::Read) {
                hidden += 1;
                return true;
            }
            if entries.len() >= max_entries {
                truncated = true;
                return false;
            }
            let kind = EntryKind::of(file_type);
            let size = (with_sizes && kind == EntryKind::File)
                .then(|| rustix::fs::statat(&opened.fd, name, AtFlags::SYMLINK_NOFOLLOW).ok())
                .flatten()
                .map(|st| u64::try_from(st.st_size).unwrap_or(0));
            entries.push(DirEntry {
                name: name.to_string_lossy().into_owned(),
                kind,
                size,
            });
            true
        })?;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Listing {
            path: self.display(&opened.real),
            entries,
            hidden,
            truncated,
        })
    }

    /// Metadata of a path (symlinks inside the root are followed).
    pub fn file_info(&self, path: &str) -> Result<FileInfo, FsError> {
        let opened = self.open_to_read(path, OFlags::PATH)?;
        let st = rustix::fs::fstat(&opened.fd).map_err(|e| self.io(path, e.into()))?;
        Ok(FileInfo {
            path: self.display(&opened.real),
            kind: EntryKind::of(FileType::from_raw_mode(st.st_mode)),
            size: u64::try_from(st.st_size).unwrap_or(0),
            mode: format!("{:o}", st.st_mode & 0o7777),
            modified: st.st_mtime,
            writable: self.allows(&opened.real, Access::Write),
        })
    }

    /// The tree beneath a directory, `max_depth` levels deep (1: its entries only), at most `max_entries`
    /// entries. Symlinks are shown, not followed; denied entries are left out.
    pub fn directory_tree(
        &self,
        path: &str,
        max_depth: usize,
        max_entries: usize,
    ) -> Result<Tree, FsError> {
        let opened = self.open_to_read(path, OFlags::RDONLY | OFlags::DIRECTORY)?;
        let mut budget = max_entries;
        let mut truncated = false;
        let children = self.tree_children(
            path,
            &opened.fd,
            &opened.real,
            max_depth,
            &mut budget,
            &mut truncated,
        )?;
        Ok(Tree {
            path: self.display(&opened.real),
            root: TreeNode {
                name: ".".to_string(),
                kind: EntryKind::Directory,
                children: Some(children),
            },
            truncated,
        })
    }

    fn tree_children(
        &self,
        shown: &str,
        dir: &OwnedFd,
        real: &Path,
        depth: usize,
        budget: &mut usize,
        truncated: &mut bool,
    ) -> Result<Vec<TreeNode>, FsError> {
        let mut nodes = Vec::new();
        if depth == 0 {
            return Ok(nodes);
        }
        let mut subdirs = Vec::new();
        for_each_entry(self, shown, dir, |name, file_type| {
            let child = real.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
            if !self.allows(&child, Access::Read) {
                return true;
            }
            if *budget == 0 {
                *truncated = true;
                return false;
            }
            *budget -= 1;
            let kind = EntryKind::of(file_type);
            if kind == EntryKind::Directory {
                subdirs.push((nodes.len(), name.to_owned()));
            }
            nodes.push(TreeNode {
                name: name.to_string_lossy().into_owned(),
                kind,
                children: None,
            });
            true
        })?;
        for (index, name) in subdirs {
            if depth <= 1 {
                break;
            }
            // O_NOFOLLOW: a directory swapped for a link since the listing is refused, not followed.
            let Ok(fd) = rustix::fs::openat(
                dir,
                name.as_c_str(),
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            ) else {
                continue;
            };
            let child_real = real.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
            let children =
                self.tree_children(shown, &fd, &child_real, depth - 1, budget, truncated)?;
            if let Some(node) = nodes.get_mut(index) {
                node.children = Some(children);
            }
        }
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(nodes)
    }
}

use std::os::unix::ffi::OsStrExt;

/// Calls `visit(name, type)` for each entry except `.` and `..`, until it returns `false`. Reads from the
/// descriptor's current offset (callers pass freshly opened directories) without duplicating it.
pub(crate) fn for_each_entry(
    root: &Root,
    shown: &str,
    dir: &OwnedFd,
    mut visit: impl FnMut(&std::ffi::CStr, FileType) -> bool,
) -> Result<(), FsError> {
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 16 * 1024];
    let mut entries = RawDir::new(dir.as_fd(), &mut buf);
    while let Some(entry) = entries.next() {
        let entry = entry.map_err(|e| root.io(shown, e.into()))?;
        let name = entry.file_name();
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        let mut file_type = entry.file_type();
        if file_type == FileType::Unknown {
            // Some filesystems do not fill d_type: ask without following.
            if let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                file_type = FileType::from_raw_mode(st.st_mode);
            }
        }
        if !visit(name, file_type) {
            break;
        }
    }
    Ok(())
}

/// The size of an open regular file, or a refusal naming what it is instead.
pub(crate) fn regular_size(
    shown: &str,
    fd: &OwnedFd,
    action: &'static str,
) -> Result<u64, FsError> {
    let st = rustix::fs::fstat(fd).map_err(|e| FsError::Io {
        path: shown.to_string(),
        source: e.into(),
    })?;
    let file_type = FileType::from_raw_mode(st.st_mode);
    if file_type != FileType::RegularFile {
        return Err(FsError::NotAFile {
            path: shown.to_string(),
            kind: describe(file_type),
            action,
        });
    }
    Ok(u64::try_from(st.st_size).unwrap_or(0))
}

/// NUL in the first bytes: the same heuristic git and ripgrep use.
pub(crate) fn looks_binary(head: &[u8]) -> bool {
    head.iter().take(8192).any(|&b| b == 0)
}

/// Reads a whole (small) file from an open descriptor.
pub(crate) fn read_all(fd: OwnedFd, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    File::from(fd).take(limit).read_to_end(&mut out)?;
    Ok(out)
}

/// Reads one line into `line`, keeping at most `cap` bytes of it (the rest is consumed and dropped, so a
/// file without newlines never fills memory). Returns the bytes consumed and whether the line was kept whole.
fn bounded_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<(usize, bool)> {
    let mut consumed = 0;
    let mut whole = true;
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok((consumed, whole));
        }
        let (chunk, done) = match memchr_newline(buf) {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        let room = cap.saturating_sub(line.len());
        if chunk.len() > room {
            whole = false;
        }
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let n = chunk.len();
        reader.consume(n);
        consumed += n;
        if done {
            return Ok((consumed, whole));
        }
    }
}

fn memchr_newline(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}
