//! Paths as the policy sees them: [`AbsPath`] (expanded, absolute, not yet resolved) and
//! [`CanonicalPath`] (resolved as the kernel would resolve it).
//!
//! Policy decisions accept only a [`CanonicalPath`], so no layer can forget to resolve symlinks and `..`
//! before asking.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The kernel's own limit on symlinks followed in one lookup (`MAXSYMLINKS`).
const MAX_SYMLINK_FOLLOWS: u32 = 40;

/// An absolute path with `.` and repeated separators removed.
///
/// It is *not* canonical: it may still contain symlinks and `..`, and it may not exist. `..` is kept on purpose,
/// because after a symlink the kernel resolves `..` against the link's target, not lexically.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AbsPath(PathBuf);

impl AbsPath {
    /// Makes `path` absolute against `base` (which must itself be absolute) and drops `.` components.
    pub fn new(path: &Path, base: &Path) -> io::Result<Self> {
        let joined = if path.is_absolute() {
            path.to_path_buf()
        } else if base.is_absolute() {
            base.join(path)
        } else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("base '{}' is not absolute", base.display()),
            ));
        };
        let bytes = joined.as_os_str().as_bytes();
        if bytes.contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "path contains a NUL byte",
            ));
        }
        // Already in the form the loop below gives (no empty or `.` components, no trailing `/`): most
        // paths of a policy are.
        let plain = bytes == b"/"
            || (bytes.first() == Some(&b'/')
                && bytes.last() != Some(&b'/')
                && !bytes
                    .split(|b| *b == b'/')
                    .skip(1)
                    .any(|c| c.is_empty() || c == b"."));
        if plain {
            return Ok(AbsPath(joined));
        }
        let mut out = PathBuf::with_capacity(bytes.len());
        out.push("/");
        for component in joined.components() {
            match component {
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
                Component::ParentDir => out.push(".."),
                Component::Normal(name) => out.push(name),
            }
        }
        Ok(AbsPath(out))
    }

    /// The path.
    pub fn as_path(&self) -> &Path {
        &self.0
    }

    /// Resolves the path as the kernel would; see [`CanonicalPath`].
    pub fn canonicalize(&self) -> io::Result<CanonicalPath> {
        CanonicalPath::resolve(&self.0)
    }
}

/// A path resolved as the kernel resolves it: every existing component walked through the filesystem with
/// symlinks followed (so `link/../x` lands beside the link's *target*), and the part that does not exist yet
/// appended with `..` applied lexically. Such a path is judged by its deepest existing ancestor.
///
/// It does not stay true: the filesystem can change after resolution. Enforcement layers that open files
/// must open beneath a handle (the `fs` part) or rely on the kernel (the `sandbox` part); this type is for
/// *deciding*.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CanonicalPath {
    path: PathBuf,
    /// Length in bytes of the prefix that exists on disk.
    existing_len: usize,
}

impl CanonicalPath {
    /// Resolves an absolute path; see the type's documentation.
    ///
    /// Fails only on a symlink loop or a relative input. A component that cannot be examined (not found,
    /// not a directory, permission denied) ends the existing prefix.
    pub fn resolve(path: &Path) -> io::Result<Self> {
        Self::resolve_cached(path, &mut LstatCache::default())
    }

    /// [`CanonicalPath::resolve`], remembering what each examined component was, so that resolving many
    /// paths with common prefixes (a whole policy) examines each component once.
    pub(crate) fn resolve_cached(path: &Path, cache: &mut LstatCache) -> io::Result<Self> {
        if !path.is_absolute() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("'{}' is not absolute", path.display()),
            ));
        }
        if let Some(known) = cache.resolved.get(path.as_os_str()) {
            return Ok(known.clone());
        }
        if let Some(canonical) = Self::resolve_plain(path, cache) {
            cache
                .resolved
                .insert(path.as_os_str().to_os_string(), canonical.clone());
            return Ok(canonical);
        }
        let mut pending: VecDeque<OsString> = components(path).collect();
        let mut resolved = PathBuf::from("/");
        let mut existing_len = 1;
        let mut missing = false;
        let mut follows = 0;
        while let Some(name) = pending.pop_front() {
            if name == ".." {
                resolved.pop();
                if !missing {
                    existing_len = resolved.as_os_str().len();
                }
                continue;
            }
            let candidate = resolved.join(&name);
            if missing {
                resolved = candidate;
                continue;
            }
            match cache.lookup(&candidate) {
                Entry::Symlink(target) => {
                    follows += 1;
                    if follows > MAX_SYMLINK_FOLLOWS {
                        return Err(io::Error::other(format!(
                            "too many levels of symbolic links at '{}'",
                            candidate.display()
                        )));
                    }
                    if target.is_absolute() {
                        resolved = PathBuf::from("/");
                        existing_len = 1;
                    }
                    for (i, part) in components(&target).enumerate() {
                        pending.insert(i, part);
                    }
                }
                Entry::Present { .. } => {
                    resolved = candidate;
                    existing_len = resolved.as_os_str().len();
                }
                Entry::Missing => {
                    missing = true;
                    resolved = candidate;
                }
            }
        }
        let canonical = CanonicalPath {
            path: resolved,
            existing_len,
        };
        cache
            .resolved
            .insert(path.as_os_str().to_os_string(), canonical.clone());
        Ok(canonical)
    }

    /// [`CanonicalPath::resolve_cached`] for a path with no `..` and no symlink on the way (almost every
    /// path of a policy), in one buffer, without the queue of component copies that following a link
    /// needs; `None` when it meets either.
    fn resolve_plain(path: &Path, cache: &mut LstatCache) -> Option<Self> {
        let mut resolved = PathBuf::with_capacity(path.as_os_str().len());
        resolved.push("/");
        let mut existing_len = 1;
        let mut missing = false;
        for component in path.components() {
            match component {
                Component::Normal(name) => {
                    resolved.push(name);
                    if missing {
                        continue;
                    }
                    match cache.lookup(&resolved) {
                        Entry::Present { .. } => existing_len = resolved.as_os_str().len(),
                        Entry::Missing => missing = true,
                        Entry::Symlink(_) => return None,
                    }
                }
                Component::ParentDir => return None,
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
        Some(CanonicalPath {
            path: resolved,
            existing_len,
        })
    }

    /// Wraps a path the caller knows to be canonical already (for example one returned by `realpath`, or
    /// produced by walking a canonical directory). Existence is not checked: the whole path counts as existing.
    pub fn assume_canonical(path: PathBuf) -> Self {
        let existing_len = path.as_os_str().len();
        CanonicalPath { path, existing_len }
    }

    /// The resolved path.
    pub fn as_path(&self) -> &Path {
        &self.path
    }

    /// The deepest ancestor (or the path itself) that existed at resolution time.
    pub fn existing_ancestor(&self) -> &Path {
        let bytes = self.path.as_os_str().as_bytes();
        Path::new(OsStr::from_bytes(
            bytes.get(..self.existing_len).unwrap_or(bytes),
        ))
    }

    /// Whether the whole path existed when it was resolved.
    pub fn exists(&self) -> bool {
        self.existing_len == self.path.as_os_str().len()
    }

    /// Consumes into the inner path.
    pub fn into_path_buf(self) -> PathBuf {
        self.path
    }
}

impl std::fmt::Display for CanonicalPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.path.display().fmt(f)
    }
}

/// What one path component was when examined.
#[derive(Debug, Clone)]
enum Entry {
    Symlink(PathBuf),
    Present { dir: bool },
    Missing,
}

/// Resolves many paths as [`CanonicalPath::resolve`] does, examining each component once: for a caller
/// judging several paths at one moment (all the paths of one tool call). Keep it short-lived: it remembers
/// the filesystem as it was when first asked.
#[derive(Debug, Default)]
pub struct PathResolver {
    cache: LstatCache,
}

impl PathResolver {
    /// A resolver with nothing remembered.
    pub fn new() -> Self {
        PathResolver::default()
    }

    /// [`CanonicalPath::resolve`], sharing what earlier calls examined.
    pub fn resolve(&mut self, path: &Path) -> io::Result<CanonicalPath> {
        CanonicalPath::resolve_cached(path, &mut self.cache)
    }

    pub(crate) fn cache(&mut self) -> &mut LstatCache {
        &mut self.cache
    }
}

/// A cheap hash for path bytes (a multiply and a rotate per eight bytes, as rustc's FxHash): SipHash was a
/// quarter of the instructions of building a policy, once in each hook call and each sandboxed command.
/// The keys are paths of the policy and of what it resolves; a crafted collision could only cost time,
/// which the hook's deadline bounds.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PathHasher(u64);

impl std::hash::Hasher for PathHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let w = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
        }
        for &b in words.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by path bytes, hashed with [`PathHasher`].
pub(crate) type PathMap<K, V> =
    std::collections::HashMap<K, V, std::hash::BuildHasherDefault<PathHasher>>;

/// Remembered `lstat`/`readlink` answers for one resolution pass.
#[derive(Debug, Default)]
pub(crate) struct LstatCache {
    /// By the bytes of the path (hashing a `Path` goes component by component: several times slower).
    entries: PathMap<OsString, Entry>,
    /// Whole paths already resolved in this pass, as given (a policy often names a path twice, and the
    /// quarantine resolves its inputs before the policy that grants them).
    resolved: PathMap<OsString, CanonicalPath>,
}

impl LstatCache {
    /// Whether `path` was a directory when this cache examined it (false when it did not, or was not one).
    pub(crate) fn was_dir(&self, path: &Path) -> bool {
        // The root is never examined: resolution starts there.
        path == Path::new("/")
            || matches!(
                self.entries.get(path.as_os_str()),
                Some(Entry::Present { dir: true })
            )
    }

    fn lookup(&mut self, path: &Path) -> Entry {
        if let Some(e) = self.entries.get(path.as_os_str()) {
            return e.clone();
        }
        let entry = match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => match std::fs::read_link(path) {
                Ok(t) => Entry::Symlink(t),
                Err(_) => Entry::Missing,
            },
            Ok(m) => Entry::Present { dir: m.is_dir() },
            Err(_) => Entry::Missing,
        };
        self.entries
            .insert(path.as_os_str().to_os_string(), entry.clone());
        entry
    }
}

fn components(path: &Path) -> impl Iterator<Item = OsString> + '_ {
    path.components().filter_map(|c| match c {
        Component::Normal(name) => Some(name.to_os_string()),
        Component::ParentDir => Some(OsString::from("..")),
        Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn canon(p: &Path) -> PathBuf {
        CanonicalPath::resolve(p).unwrap().into_path_buf()
    }

    #[test]
    fn abs_path_joins_and_drops_dots() {
        let p = AbsPath::new(Path::new("./src//a/./b"), Path::new("/base")).unwrap();
        assert_eq!(p.as_path(), Path::new("/base/src/a/b"));
        let p = AbsPath::new(Path::new("../x"), Path::new("/base")).unwrap();
        assert_eq!(p.as_path(), Path::new("/base/../x"));
        assert!(AbsPath::new(Path::new("x"), Path::new("rel")).is_err());
        // Byte for byte what the component loop makes, whether or not the input needed it.
        for (path, want) in [
            ("/", "/"),
            ("/a/b", "/a/b"),
            ("/a/../b", "/a/../b"),
            ("/a/b/", "/a/b"),
            ("/a//b", "/a/b"),
            ("/a/./b/.", "/a/b"),
            ("//a", "/a"),
            ("/.", "/"),
            ("/a/.b/..c", "/a/.b/..c"),
        ] {
            let p = AbsPath::new(Path::new(path), Path::new("/base")).unwrap();
            assert_eq!(p.as_path().as_os_str(), want, "{path}");
        }
    }

    #[test]
    fn follows_symlinks_then_dotdot_like_the_kernel() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("real/inner")).unwrap();
        std::fs::create_dir_all(root.join("other")).unwrap();
        symlink(root.join("real/inner"), root.join("other/link")).unwrap();
        // `other/link/..` is `real`, not `other`.
        assert_eq!(canon(&root.join("other/link/../x")), root.join("real/x"));
        // Relative link.
        symlink("../real", root.join("other/rel")).unwrap();
        assert_eq!(
            canon(&root.join("other/rel/inner")),
            root.join("real/inner")
        );
    }

    #[test]
    fn missing_tail_is_lexical_and_judged_by_existing_ancestor() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let c = CanonicalPath::resolve(&root.join("new/dir/../file")).unwrap();
        assert_eq!(c.as_path(), root.join("new/file"));
        assert_eq!(c.existing_ancestor(), root.as_path());
        assert!(!c.exists());
    }

    #[test]
    fn symlink_loops_fail() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        symlink(root.join("b"), root.join("a")).unwrap();
        symlink(root.join("a"), root.join("b")).unwrap();
        assert!(CanonicalPath::resolve(&root.join("a/x")).is_err());
    }

    #[test]
    fn dotdot_above_root_stays_at_root() {
        assert_eq!(canon(Path::new("/../../etc")), PathBuf::from("/etc"));
    }
}
