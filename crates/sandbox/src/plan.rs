//! The mount plan: what the sandbox's private root contains, computed from the policy alone.
//!
//! The root starts empty (a tmpfs). Every granted path scope that exists is bind-mounted at its own
//! canonical path, read-only or read-write as the policy decides; everything else is simply absent. Inside
//! those trees, `deny` targets are masked by empty read-only mounts and `read-only` targets are re-bound
//! read-only (Landlock cannot take rights away inside a writable tree). The order is by depth, so a deeper
//! rule is applied after, and on top of, a shallower one, which is the policy's "deepest decides". A
//! caller that has read a granted file itself may have it written into the root as a read-only snapshot
//! instead of bound ([`MountPlan::use_snapshots`]).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use stockade_policy::{Access, CanonicalPath, Level, ResolvedPolicy, ScopeKind, ScopeTarget};

use crate::error::SandboxError;

/// Entries examined while looking for glob matches, across all globs of one plan. Past it the sandbox
/// refuses to start (fail closed) rather than silently skip a `deny` glob.
pub const MAX_GLOB_WALK_ENTRIES: usize = 200_000;

/// Entries a write glob's directories may hold for them to be guarded (each entry the glob does not make
/// writable is bound back read-only). Past it, a new match cannot be created in them.
pub const MAX_GLOB_GUARDED_ENTRIES: usize = 2_000;

/// The host directories one plan has listed, each read once: the built-in profile's globs and guards
/// walk the same `.git` a dozen times per launch (and try to, a dozen times, where it is missing). The
/// plan describes the host as it is at start, so a listing, or a directory found unreadable, never goes
/// stale within it.
#[derive(Default)]
struct Listings(std::collections::HashMap<PathBuf, Option<Rc<Listing>>>);

/// The entries of one directory, in `read_dir` order.
struct Listing {
    entries: Vec<Listed>,
    /// Every entry is here: false when the directory held more than [`Listings::MAX_KEPT`].
    complete: bool,
}

/// One entry of a listed directory.
struct Listed {
    path: PathBuf,
    /// `None` where the kind could not be read.
    kind: Option<std::fs::FileType>,
}

impl Listings {
    /// The most entries one listing keeps: one past the largest walk budget, so a walk that meets a cut
    /// listing stops or fails as it would have.
    const MAX_KEPT: usize = MAX_GLOB_WALK_ENTRIES + 1;

    /// The entries of `dir`, at most [`Self::MAX_KEPT`] of them, or `None` if it cannot be read.
    fn of(&mut self, dir: &Path) -> Option<Rc<Listing>> {
        if let Some(found) = self.0.get(dir) {
            return found.clone();
        }
        let listing = Self::read(dir, Self::MAX_KEPT).map(Rc::new);
        self.0.insert(dir.to_path_buf(), listing.clone());
        listing
    }

    /// Every entry of `dir`, however many (kept only if within [`Self::MAX_KEPT`]).
    fn whole(&mut self, dir: &Path) -> Option<Rc<Listing>> {
        match self.of(dir) {
            Some(listing) if !listing.complete => Self::read(dir, usize::MAX).map(Rc::new),
            found => found,
        }
    }

    /// The first `most` entries of `dir`: from its listing if it has one, else read for this caller only
    /// (a cut listing kept would stand for the whole directory to the walks).
    fn first(&mut self, dir: &Path, most: usize) -> Option<Rc<Listing>> {
        match self.0.get(dir) {
            Some(found) => found.clone(),
            None => Self::read(dir, most).map(Rc::new),
        }
    }

    fn read(dir: &Path, most: usize) -> Option<Listing> {
        let mut read = std::fs::read_dir(dir).ok()?.flatten();
        let entries: Vec<Listed> = read
            .by_ref()
            .take(most)
            .map(|entry| Listed {
                path: entry.path(),
                kind: entry.file_type().ok(),
            })
            .collect();
        let complete = read.next().is_none();
        Some(Listing { entries, complete })
    }
}

/// One step of building the root, at a canonical path.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum MountOp {
    /// Bind the host path at the same path; read-only unless `write`.
    Bind {
        /// Read-write.
        write: bool,
        /// A directory (else a file or other non-directory).
        dir: bool,
    },
    /// Hide a directory under an empty, read-only, mode-000 tmpfs.
    MaskDir,
    /// Hide a non-directory under an empty, read-only, mode-000 file.
    MaskFile,
    /// A private, empty, writable tmpfs (the temp dir, `/dev/shm`).
    PrivateTmpfs {
        /// Permission bits of its root.
        mode: u32,
        /// Size limit in bytes.
        size: Option<u64>,
    },
    /// A private overlay of the host directory at the same path (a `cache` scope): the host's directory
    /// is the lower layer, and every write lands in an upper layer of the run's own (a tmpfs that
    /// vanishes with it, or the agent's persisted store, [`crate::SandboxBuilder::cache_store`]), so a
    /// package manager fills its cache and the host's is never changed.
    Overlay,
    /// A fresh `/proc` for the sandbox's PID namespace.
    Proc,
    /// A minimal `/dev`: a tmpfs with the standard devices bound in.
    Dev,
    /// An inaccessible stand-in for a host entry the policy does not grant, in a directory of the empty
    /// root (mode 000): touching it fails with a permission error, as the policy's default deny says,
    /// while its contents stay hidden.
    Stub {
        /// A directory (else an empty file).
        dir: bool,
    },
    /// A symlink recreated in the empty root, pointing where the host's does.
    Symlink {
        /// Its target, as the host has it.
        target: PathBuf,
    },
    /// A read-only file created in the empty root holding bytes the caller read from the host file
    /// beforehand ([`crate::Sandbox::snapshot_files`]), in place of a bind of the file: the program sees
    /// exactly those bytes, and a mount is saved.
    Snapshot {
        /// Its size.
        bytes: u64,
    },
}

/// A mount step and where.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PlannedMount {
    /// Canonical path inside the sandbox (the same as on the host).
    pub path: PathBuf,
    /// What to do there.
    pub op: MountOp,
}

/// What Landlock grants beneath a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LandlockGrant {
    /// Read files, list directories, execute.
    Read,
    /// Everything.
    Write,
    /// Everything but giving a name: no `MAKE_*` and no `REFER` rights. Directories where a name matters
    /// (`.mcp.json` may not be created in the project root, `index.lock` may be created in `.git`): every
    /// creation there is the mediator's, which checks the name.
    WriteNoCreate,
    /// Read and write an existing file (devices).
    FileReadWrite,
}

/// The whole plan.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MountPlan {
    /// In application order.
    pub mounts: Vec<PlannedMount>,
    /// Landlock rules, applied after the root is built.
    pub landlock: Vec<(PathBuf, LandlockGrant)>,
    /// Directories the policy does not let the program write, but in which it names files it may create
    /// (`.git`, where `index.lock` may be made but `config` may not be changed): bound writable, every
    /// existing entry the policy does not make writable bound back at its own level, and every new name
    /// left to the mediator.
    pub guarded_dirs: Vec<PathBuf>,
}

/// Files of the fresh `/proc` hidden under an empty file: what the kernel shows there is not the
/// sandbox's own (the keyrings of the user's uid).
const PROC_MASKED: &[&str] = &["/proc/keys", "/proc/key-users"];

const STANDARD_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// What the private root shows of the host's entries beside the granted ones, in the directories built
/// to hold them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Siblings {
    /// Each as an inaccessible stub (mode 000; a symlink as itself): the tree looks like the host's and
    /// an ungranted name reads EACCES, as every other layer says. `run`'s default.
    #[default]
    Stubs,
    /// Symlinks only (so `/bin` and `/lib64` still lead somewhere); every other ungranted name does not
    /// exist. The quarantine's choice: a reader of untrusted content learns nothing of what else is on
    /// disk, and a directory of a hundred inputs' siblings costs nothing to hide.
    SymlinksOnly,
}

impl MountPlan {
    /// The run's private, writable areas: its tmpfs mounts that vanish with it (temp dir, `/dev/shm`, the
    /// private `/tmp` and `/var/tmp`) and `/dev`, which holds only the standard devices.
    pub fn private_areas(&self) -> Vec<PathBuf> {
        self.mounts
            .iter()
            .filter(|m| matches!(m.op, MountOp::PrivateTmpfs { .. } | MountOp::Dev))
            .map(|m| m.path.clone())
            .collect()
    }

    /// Computes the plan. `temp_dir` is the run's private temp dir (a tmpfs inside the sandbox; it never
    /// exists on the host). Nothing is created on the host.
    pub fn new(
        policy: &ResolvedPolicy,
        temp_dir: &Path,
        temp_size: Option<u64>,
        siblings: Siblings,
    ) -> Result<Self, SandboxError> {
        let mut plan = MountPlan::default();
        let mut listings = Listings::default();
        let mut entries: Vec<PlannedMount> = Vec::new();
        // In the normalized form the plan's byte comparisons (`is_within`) expect: a caller's
        // `/stockade-tmp/run/` is `/stockade-tmp/run`.
        let temp_dir: PathBuf = temp_dir.components().collect();
        let temp_dir = temp_dir.as_path();
        let special = |p: &Path| {
            is_within(p, Path::new("/proc"))
                || is_within(p, Path::new("/dev"))
                || is_within(p, temp_dir)
        };

        for scope in policy.scopes() {
            let ScopeTarget::Path(target) = &scope.target else {
                continue;
            };
            let path = target.canonical.as_path();
            if special(path) {
                continue;
            }
            let exists = target.canonical.exists();
            match scope.kind {
                ScopeKind::Read | ScopeKind::Write | ScopeKind::Runtime => {
                    if !exists {
                        continue;
                    }
                    let level = bind_level(policy, &target.canonical, target.is_dir);
                    if level == Level::None {
                        continue;
                    }
                    entries.push(PlannedMount {
                        path: path.to_path_buf(),
                        op: MountOp::Bind {
                            write: level == Level::Write,
                            dir: target.is_dir,
                        },
                    });
                }
                // A cache that does not exist has nothing to overlay (the builder creates a missing one, with
                // its parents where it may, before planning, so it is looked at now, not at resolution); a file is
                // refused by the builder. A glob cap on the cache's directory itself: `read-only` leaves
                // the overlay (the host's directory cannot change beneath it, and its entries keep the
                // cache's level), `deny` masks it instead.
                ScopeKind::Cache
                    if path.is_dir()
                        && policy.path_scope_level(&target.canonical) == Level::Write
                        && policy.decide(&target.canonical, Access::Read).level() > Level::None =>
                {
                    entries.push(PlannedMount {
                        path: path.to_path_buf(),
                        op: MountOp::Overlay,
                    });
                }
                // A target that does not exist is held by the mediator, which refuses to create it (or
                // anything under it): nothing is made on the host.
                ScopeKind::ReadOnly
                    if exists
                        && policy.decide(&target.canonical, Access::Read).level()
                            == Level::Read =>
                {
                    entries.push(PlannedMount {
                        path: path.to_path_buf(),
                        op: MountOp::Bind {
                            write: false,
                            dir: target.is_dir,
                        },
                    });
                }
                ScopeKind::Deny => {
                    if !exists {
                        continue;
                    }
                    if policy.decide(&target.canonical, Access::Read).level() == Level::None {
                        entries.push(PlannedMount {
                            path: path.to_path_buf(),
                            op: mask(target.is_dir),
                        });
                    }
                }
                _ => {}
            }
        }
        plan.add_glob_entries(policy, &mut entries, &mut listings)?;
        plan.add_guarded_dirs(policy, &mut entries, &mut listings);
        drop_redundant_binds(&mut entries);

        // Protected entries inside a writable tree: every ancestor between the writable root and the entry
        // becomes a mount point (bound onto itself), so `mv .git .git-old && mkdir -p .git/hooks` fails with
        // EBUSY instead of replacing the protected entry.
        let overlays: Vec<PathBuf> = entries
            .iter()
            .filter(|e| e.op == MountOp::Overlay)
            .map(|e| e.path.clone())
            .collect();
        let mut anchors = Vec::new();
        for e in &entries {
            if !matches!(
                e.op,
                MountOp::Bind { write: false, .. } | MountOp::MaskDir | MountOp::MaskFile
            ) {
                continue;
            }
            let mut ancestor = e.path.parent();
            while let Some(a) = ancestor {
                // An anchor binds the host's directory writable: inside a private overlay that would
                // open the host's cache, and a rename there changes only the run's copy anyway.
                if overlays.iter().any(|o| is_within(a, o)) {
                    break;
                }
                let canon = CanonicalPath::assume_canonical(a.to_path_buf());
                if !policy.decide(&canon, Access::Write).is_allow() {
                    break;
                }
                let parent_writable = a.parent().is_some_and(|pp| {
                    policy
                        .decide(
                            &CanonicalPath::assume_canonical(pp.to_path_buf()),
                            Access::Write,
                        )
                        .is_allow()
                });
                if !parent_writable {
                    break; // `a` is the writable root itself, already a mount point.
                }
                anchors.push(PlannedMount {
                    path: a.to_path_buf(),
                    op: MountOp::Bind {
                        write: true,
                        dir: true,
                    },
                });
                ancestor = a.parent();
            }
        }
        entries.extend(anchors);

        // Special mounts.
        entries.push(PlannedMount {
            path: PathBuf::from("/proc"),
            op: MountOp::Proc,
        });
        // Kernel keys are not namespaced: a fresh `/proc` still lists the keys of the user's own uid (as
        // root, the host's). The keyring calls are refused by the seccomp filter; these are masked.
        for keys in PROC_MASKED {
            if Path::new(keys).exists() {
                entries.push(PlannedMount {
                    path: PathBuf::from(keys),
                    op: MountOp::MaskFile,
                });
            }
        }
        entries.push(PlannedMount {
            path: PathBuf::from("/dev"),
            op: MountOp::Dev,
        });
        entries.push(PlannedMount {
            path: PathBuf::from("/dev/shm"),
            op: MountOp::PrivateTmpfs {
                mode: 0o1777,
                size: temp_size,
            },
        });
        entries.push(PlannedMount {
            path: temp_dir.to_path_buf(),
            op: MountOp::PrivateTmpfs {
                mode: 0o700,
                size: temp_size,
            },
        });
        // Scripts write `/tmp/x` whatever $TMPDIR says: where the policy grants neither the shared temp
        // directories nor anything under them, each is a private, empty tmpfs (sticky, as on the host) that vanishes
        // with the run. Where it grants something there, the host's entries are bound as planned instead.
        for shared_tmp in policy.private_tmp_dirs() {
            entries.push(PlannedMount {
                path: shared_tmp.to_path_buf(),
                op: MountOp::PrivateTmpfs {
                    mode: 0o1777,
                    size: temp_size,
                },
            });
        }

        // Symlinks along the written paths (e.g. /bin -> usr/bin on merged-/usr systems), so the names the
        // policy used still lead somewhere inside.
        for scope in policy.scopes() {
            let ScopeTarget::Path(target) = &scope.target else {
                continue;
            };
            // Only a path that differs from its resolution went through a symlink.
            if !scope.kind.is_grant()
                || special(target.abs.as_path())
                || target.abs.as_path() == target.canonical.as_path()
            {
                continue;
            }
            let mut prefix = PathBuf::from("/");
            for c in target.abs.as_path().components().skip(1) {
                prefix.push(c);
                match std::fs::symlink_metadata(&prefix) {
                    Ok(m) if m.file_type().is_symlink() => {
                        if let Ok(t) = std::fs::read_link(&prefix) {
                            entries.push(PlannedMount {
                                path: prefix.clone(),
                                op: MountOp::Symlink { target: t },
                            });
                        }
                        break;
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        }

        sort_for_mounting(&mut entries);
        entries.dedup_by(|later, earlier| later.path == earlier.path);
        plan.mounts = entries;
        // A mask needs a visible tree around it; a recreated symlink must not land inside a bind.
        let visible: Vec<PathBuf> = plan
            .mounts
            .iter()
            .filter(|m| matches!(m.op, MountOp::Bind { .. } | MountOp::Overlay))
            .map(|m| m.path.clone())
            .collect();
        // A mask whose nearest enclosing entry is a directory mask hides nothing more (and has no mount
        // point left to land on: `deny = ["a/c", "**/.env"]` with `a/c/.env`).
        let masked: std::collections::HashMap<OsString, bool> = plan
            .mounts
            .iter()
            .map(|m| {
                (
                    m.path.as_os_str().to_os_string(),
                    matches!(m.op, MountOp::MaskDir),
                )
            })
            .collect();
        let inside_mask = |path: &Path| {
            path.ancestors()
                .skip(1)
                .find_map(|a| masked.get(a.as_os_str()))
                .copied()
                .unwrap_or(false)
        };
        plan.mounts.retain(|m| match m.op {
            MountOp::MaskDir | MountOp::MaskFile if is_within(&m.path, Path::new("/proc")) => true,
            MountOp::MaskDir | MountOp::MaskFile => {
                !inside_mask(&m.path)
                    && visible
                        .iter()
                        .any(|v| is_within(&m.path, v) && *v != m.path)
            }
            MountOp::Symlink { .. } => !visible.iter().any(|v| is_within(&m.path, v)),
            MountOp::Bind { .. }
            | MountOp::Overlay
            | MountOp::PrivateTmpfs { .. }
            | MountOp::Proc
            | MountOp::Dev
            | MountOp::Stub { .. }
            | MountOp::Snapshot { .. } => true,
        });

        plan.add_siblings(siblings, &mut listings);
        for m in &plan.mounts {
            let grant = match m.op {
                MountOp::Bind { write: true, .. }
                | MountOp::Overlay
                | MountOp::PrivateTmpfs { .. } => LandlockGrant::Write,
                MountOp::Bind { write: false, .. } | MountOp::Proc | MountOp::Snapshot { .. } => {
                    LandlockGrant::Read
                }
                MountOp::Dev
                | MountOp::MaskDir
                | MountOp::MaskFile
                | MountOp::Symlink { .. }
                | MountOp::Stub { .. } => continue,
            };
            plan.landlock.push((m.path.clone(), grant));
        }
        for dev in STANDARD_DEVICES {
            let canon = CanonicalPath::assume_canonical(PathBuf::from(dev));
            let grant = match policy.decide(&canon, Access::Read).level() {
                Level::Write => LandlockGrant::FileReadWrite,
                Level::Read => LandlockGrant::Read,
                Level::None => continue,
            };
            plan.landlock.push((PathBuf::from(dev), grant));
        }
        plan.split_create_rights(policy, &mut listings);
        Ok(plan)
    }

    /// Takes the right to create names away from Landlock wherever a name-based rule applies, so that
    /// every creation there reaches the mediator (which checks the name), and keeps it everywhere else,
    /// so that ordinary creations (a build's output, an untarred tree) proceed in the kernel.
    ///
    /// A directory needs its names checked when a path the policy does not let the program write does
    /// not exist yet beneath it (`.mcp.json` in the project root), when it is a guarded directory, or
    /// when a glob cap (`deny`, `read-only`) could match beneath it. Such a directory and every directory
    /// from its writable rule down to it get [`LandlockGrant::WriteNoCreate`]; every other existing
    /// writable directory beside that chain gets a `Write` rule of its own.
    fn split_create_rights(&mut self, policy: &ResolvedPolicy, listings: &mut Listings) {
        let writable = |p: &Path| {
            policy
                .decide(
                    &CanonicalPath::assume_canonical(p.to_path_buf()),
                    Access::Write,
                )
                .is_allow()
        };
        let mut named: Vec<PathBuf> = self.guarded_dirs.clone();
        let mut whole: Vec<PathBuf> = Vec::new();
        for scope in policy.scopes() {
            match &scope.target {
                ScopeTarget::Path(target) => {
                    if scope.kind == ScopeKind::Write || target.canonical.exists() {
                        continue;
                    }
                    let at = target.canonical.existing_ancestor();
                    if writable(at) || self.guarded_dirs.iter().any(|g| g == at) {
                        named.push(at.to_path_buf());
                    }
                }
                ScopeTarget::Glob(glob) => {
                    if matches!(scope.kind, ScopeKind::Deny | ScopeKind::ReadOnly) {
                        whole.push(glob.prefix.clone());
                    }
                }
                _ => {}
            }
        }
        let mut chain: std::collections::BTreeSet<PathBuf> = std::collections::BTreeSet::new();
        let mut children: Vec<PathBuf> = Vec::new();
        for rule in &mut self.landlock {
            if rule.1 != LandlockGrant::Write {
                continue;
            }
            let root = rule.0.clone();
            if whole
                .iter()
                .any(|w| is_within(w, &root) || is_within(&root, w))
            {
                rule.1 = LandlockGrant::WriteNoCreate;
                continue;
            }
            let mut hit = false;
            for n in named.iter().filter(|n| is_within(n, &root)) {
                hit = true;
                for a in n.ancestors() {
                    chain.insert(a.to_path_buf());
                    if a == root {
                        break;
                    }
                }
            }
            if hit {
                rule.1 = LandlockGrant::WriteNoCreate;
            }
        }
        for dir in &chain {
            let Some(listed) = listings.whole(dir) else {
                continue;
            };
            for entry in listed.entries.iter() {
                let path = &entry.path;
                if entry.kind.is_some_and(|t| t.is_dir())
                    && !chain.contains(path)
                    && !whole
                        .iter()
                        .any(|w| is_within(w, path) || is_within(path, w))
                    && writable(path)
                {
                    children.push(path.clone());
                }
            }
        }
        for c in children {
            if !self.landlock.iter().any(|(p, _)| *p == c) {
                self.landlock.push((c, LandlockGrant::Write));
            }
        }
        // A chain directory's own rule (a bind below the root, e.g. a guarded `.git` of its own) loses
        // its create rights too.
        for rule in &mut self.landlock {
            if rule.1 == LandlockGrant::Write && chain.contains(&rule.0) {
                rule.1 = LandlockGrant::WriteNoCreate;
            }
        }
    }

    /// Directories where Landlock lets the program create names itself (`Write` rules): no name-based
    /// rule applies beneath them, so the mediator lets a creation there proceed in the kernel
    /// (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`) instead of performing it. Anywhere else it performs the call.
    pub fn create_dirs(&self) -> Vec<PathBuf> {
        self.landlock_paths(|g| g == LandlockGrant::Write)
    }

    /// The writable trees of the run (`Write` and `WriteNoCreate` rules), where the mediator may make a
    /// name directly.
    pub fn writable_roots(&self) -> Vec<PathBuf> {
        self.landlock_paths(|g| matches!(g, LandlockGrant::Write | LandlockGrant::WriteNoCreate))
    }

    fn landlock_paths(&self, grant: impl Fn(LandlockGrant) -> bool) -> Vec<PathBuf> {
        self.landlock
            .iter()
            .filter(|(_, g)| grant(*g))
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// Replaces the read-only bind of each file in `snapshots` (path and size) by a [`MountOp::Snapshot`].
    /// Only a bind that lands in the empty root itself is replaced: a file the policy makes writable, or one
    /// that lies inside another mount (a directory grant, a mask), stays as the plan had it, and the
    /// program sees the host's file there. Returns the paths replaced.
    pub fn use_snapshots(&mut self, snapshots: &[(&Path, u64)]) -> Vec<PathBuf> {
        let sizes: std::collections::HashMap<&OsStr, u64> = snapshots
            .iter()
            .map(|(path, size)| (path.as_os_str(), *size))
            .collect();
        let enclosing = self.mount_points();
        let replacing: Vec<(usize, u64)> = self
            .mounts
            .iter()
            .enumerate()
            .filter_map(|(i, m)| match (&m.op, sizes.get(m.path.as_os_str())) {
                (
                    MountOp::Bind {
                        write: false,
                        dir: false,
                    },
                    Some(&bytes),
                ) => Some((i, bytes)),
                _ => None,
            })
            .filter(|&(i, _)| {
                !self.mounts[i]
                    .path
                    .ancestors()
                    .skip(1)
                    .any(|a| enclosing.contains(a.as_os_str()))
            })
            .collect();
        let mut replaced = Vec::with_capacity(replacing.len());
        for (i, bytes) in replacing {
            let m = &mut self.mounts[i];
            m.op = MountOp::Snapshot { bytes };
            replaced.push(m.path.clone());
        }
        self.group_snapshot_rules();
        replaced
    }

    /// The paths of the entries that hold what lies beneath them: every mount but symlinks and stubs.
    /// Keyed by bytes: the paths are canonical, and hashing a `Path` goes component by component.
    fn mount_points(&self) -> std::collections::HashSet<&OsStr> {
        self.mounts
            .iter()
            .filter(|m| !matches!(m.op, MountOp::Symlink { .. } | MountOp::Stub { .. }))
            .map(|m| m.path.as_os_str())
            .collect()
    }

    /// One Landlock rule for a directory of the empty root that holds nothing but snapshots, in place of
    /// one per file: it grants exactly the same (nothing else is beneath it, and the root is read-only, so
    /// nothing can be added) plus listing those files, at a fraction of the rules. A directory with
    /// anything else beneath it (a mount, a stub, a symlink, a deeper directory) keeps per-file rules.
    fn group_snapshot_rules(&mut self) {
        use std::collections::{HashMap, HashSet};
        let mut mixed: HashSet<&OsStr> = self.mounts.iter().map(|m| m.path.as_os_str()).collect();
        let mut snapshots: HashMap<&OsStr, Vec<&Path>> = HashMap::new();
        for m in &self.mounts {
            let parent = m.path.parent();
            let direct_snapshot = matches!(m.op, MountOp::Snapshot { .. });
            if direct_snapshot && let Some(parent) = parent {
                snapshots
                    .entry(parent.as_os_str())
                    .or_default()
                    .push(&m.path);
            }
            let skip = usize::from(direct_snapshot);
            for ancestor in m.path.ancestors().skip(1 + skip) {
                mixed.insert(ancestor.as_os_str());
            }
        }
        let grouped: HashMap<PathBuf, Vec<PathBuf>> = snapshots
            .into_iter()
            .filter(|(dir, _)| !mixed.contains(dir))
            .map(|(dir, files)| {
                (
                    PathBuf::from(dir),
                    files.into_iter().map(Path::to_path_buf).collect(),
                )
            })
            .collect();
        if grouped.is_empty() {
            return;
        }
        let files: HashSet<&OsStr> = grouped.values().flatten().map(|p| p.as_os_str()).collect();
        self.landlock
            .retain(|(path, _)| !files.contains(path.as_os_str()));
        let mut dirs: Vec<PathBuf> = grouped.into_keys().collect();
        dirs.sort();
        self.landlock
            .extend(dirs.into_iter().map(|dir| (dir, LandlockGrant::Read)));
    }

    /// Mirrors, in every directory of the empty root (the ancestors of mounts that no bind covers), the host's
    /// other entries as mode-000 stubs, and its symlinks as they are.
    /// A directory the policy keeps from the program (read or read-only) with a write scope naming one of
    /// its entries that is not a directory or does not exist yet (`.git` with `.git/index.lock`): creating
    /// that file, or renaming it into place, needs the directory writable in the kernel, which a bind of
    /// the entry cannot give. So the directory is bound writable, each existing entry the policy does not
    /// make writable is bound back at its level (which also keeps it from being removed or renamed: a
    /// mount point), and every new name is the mediator's to allow.
    fn add_guarded_dirs(
        &mut self,
        policy: &ResolvedPolicy,
        entries: &mut Vec<PlannedMount>,
        listings: &mut Listings,
    ) {
        // Readable, but its bind not writable: where a writable name needs a guard. The level of the
        // bind, not only of the entry: a write glob matching the directory (`**` over `-x`) makes the
        // entry writable, but its bind exposes only what its tree inherits (issue 35: `-x/z` under
        // `write = ["-x/z", "**"]` was EROFS, and a directory `out/**` matched was a mode-000 stub).
        let read_level = |dir: &Path| {
            let canon = CanonicalPath::assume_canonical(dir.to_path_buf());
            policy.decide(&canon, Access::Read).level() >= Level::Read
                && bind_level(policy, &canon, true) < Level::Write
        };
        let mut guarded: Vec<PathBuf> = Vec::new();
        // Parents already looked at: the built-in profile names twenty of git's files in one `.git`,
        // which is missing outside a repository.
        let mut seen: Vec<&Path> = Vec::new();
        for scope in policy.scopes() {
            let ScopeTarget::Path(target) = &scope.target else {
                continue;
            };
            if scope.kind != ScopeKind::Write || (target.is_dir && target.canonical.exists()) {
                continue;
            }
            let Some(dir) = target.canonical.as_path().parent() else {
                continue;
            };
            if seen.contains(&dir) {
                continue;
            }
            seen.push(dir);
            if read_level(dir) && std::fs::metadata(dir).is_ok_and(|m| m.is_dir()) {
                guarded.push(dir.to_path_buf());
            }
        }
        // A write glob (`src/**/*.ts`) under a directory it does not make writable names files that may
        // not exist yet, in every directory beneath its prefix down to its depth: those are guarded too,
        // as long as the entries to bind back stay few (past that, new matches cannot be created: the
        // kernel is stricter than the policy).
        let mut budget = MAX_GLOB_GUARDED_ENTRIES;
        for scope in policy.scopes() {
            let (ScopeTarget::Glob(glob), ScopeKind::Write) = (&scope.target, scope.kind) else {
                continue;
            };
            let max_depth = glob_walk_depth(&glob.pattern);
            let mut found = Vec::new();
            let mut stack = vec![(glob.prefix.clone(), 0usize)];
            let mut fits = true;
            while let Some((dir, depth)) = stack.pop() {
                // A writable directory needs no guard, but a read one may lie beneath it.
                let guard = read_level(&dir);
                let Some(listed) = listings.of(&dir) else {
                    continue;
                };
                for entry in listed.entries.iter() {
                    let Some(left) = budget.checked_sub(1) else {
                        fits = false;
                        break;
                    };
                    budget = left;
                    if depth + 1 < max_depth && entry.kind.is_some_and(|t| t.is_dir()) {
                        stack.push((entry.path.clone(), depth + 1));
                    }
                }
                if guard {
                    found.push(dir);
                }
            }
            if fits {
                for d in found {
                    if !guarded.contains(&d) {
                        guarded.push(d);
                    }
                }
            }
        }
        // Never at or inside a cache's overlay: a guard binds the host's directory writable, which there
        // would send the program's new files into the host's cache (a cache `a` that a glob cap `*` makes
        // read-only itself). The overlay already takes every new name into the run's own layer, and the
        // mediator still checks each.
        let overlays: Vec<PathBuf> = entries
            .iter()
            .filter(|e| e.op == MountOp::Overlay)
            .map(|e| e.path.clone())
            .collect();
        guarded.retain(|d| !overlays.iter().any(|o| is_within(d, o)));
        // Parents first: a parent binds its entries back read-only, then a guarded child replaces its own.
        guarded.sort_by_key(|d| depth(d));
        let mut planned: std::collections::HashSet<PathBuf> =
            entries.iter().map(|e| e.path.clone()).collect();
        for dir in guarded {
            entries.retain(|e| e.path != dir);
            entries.push(PlannedMount {
                path: dir.clone(),
                op: writable_mount(policy, &CanonicalPath::assume_canonical(dir.clone()), true),
            });
            let Some(listed) = listings.whole(&dir) else {
                continue;
            };
            for entry in listed.entries.iter() {
                let path = entry.path.clone();
                if planned.contains(&path) {
                    continue;
                }
                let Some(kind) = entry.kind else {
                    continue;
                };
                // A bind follows a symlink: the link itself cannot be held (its target has its own rule).
                if kind.is_symlink() {
                    continue;
                }
                let is_dir = kind.is_dir();
                let canon = CanonicalPath::assume_canonical(path.clone());
                let op = match bind_level(policy, &canon, is_dir) {
                    // Inherits the directory's writable bind, and stays a plain entry that git can
                    // replace by renaming `index.lock` onto it.
                    Level::Write => continue,
                    Level::Read => MountOp::Bind {
                        write: false,
                        dir: is_dir,
                    },
                    Level::None => mask(is_dir),
                };
                planned.insert(path.clone());
                entries.push(PlannedMount { path, op });
            }
            self.guarded_dirs.push(dir);
        }
    }

    fn add_siblings(&mut self, siblings: Siblings, listings: &mut Listings) {
        /// Entries mirrored per directory; the rest simply do not exist inside (ENOENT instead of EACCES).
        const MAX_STUBS_PER_DIR: usize = 4096;
        // Hash sets instead of pairwise `starts_with`: this runs on every launch.
        let binds = self.mount_points();
        let covered = |p: &Path| p.ancestors().any(|a| binds.contains(a.as_os_str()));
        // Every mount path and all its ancestors: the directories of the empty root and what they hold.
        let mut used: std::collections::HashSet<&OsStr> = std::collections::HashSet::new();
        let mut skeleton: Vec<PathBuf> = Vec::new();
        for m in &self.mounts {
            for a in m.path.ancestors() {
                if !used.insert(a.as_os_str()) {
                    break;
                }
                if a != m.path && !covered(a) {
                    skeleton.push(a.to_path_buf());
                }
            }
        }
        let used = |p: &Path| used.contains(p.as_os_str());
        let mut stubs = Vec::new();
        for dir in &skeleton {
            let Some(listed) = listings.first(dir, MAX_STUBS_PER_DIR) else {
                continue;
            };
            for entry in listed.entries.iter().take(MAX_STUBS_PER_DIR) {
                let path = entry.path.clone();
                if used(&path) {
                    continue;
                }
                let Some(ft) = entry.kind else { continue };
                let op = if ft.is_symlink() {
                    match std::fs::read_link(&path) {
                        Ok(target) => MountOp::Symlink { target },
                        Err(_) => continue,
                    }
                } else if siblings == Siblings::Stubs {
                    MountOp::Stub { dir: ft.is_dir() }
                } else {
                    continue;
                };
                stubs.push(PlannedMount { path, op });
            }
        }
        self.mounts.extend(stubs);
        sort_for_mounting(&mut self.mounts);
    }

    /// Glob scopes, enforced for the matches that exist now: grants bind each matching file, caps mask or
    /// re-bind each match inside a visible tree.
    fn add_glob_entries(
        &mut self,
        policy: &ResolvedPolicy,
        entries: &mut Vec<PlannedMount>,
        listings: &mut Listings,
    ) -> Result<(), SandboxError> {
        let mut budget = MAX_GLOB_WALK_ENTRIES;
        for scope in policy.scopes() {
            let ScopeTarget::Glob(glob) = &scope.target else {
                continue;
            };
            let max_depth = glob_walk_depth(&glob.pattern);
            let mut stack = vec![(glob.prefix.clone(), 0usize)];
            while let Some((dir, dir_depth)) = stack.pop() {
                let Some(listed) = listings.of(&dir) else {
                    continue;
                };
                for entry in listed.entries.iter() {
                    budget =
                        budget
                            .checked_sub(1)
                            .ok_or_else(|| SandboxError::GlobWalkTooLarge {
                                glob: scope.written.clone(),
                                limit: MAX_GLOB_WALK_ENTRIES,
                            })?;
                    let path = entry.path.clone();
                    let Some(ft) = entry.kind else { continue };
                    let matched = glob.is_match(&path);
                    let canon = CanonicalPath::assume_canonical(path.clone());
                    if matched && !ft.is_symlink() {
                        let level = policy.decide(&canon, Access::Read).level();
                        match scope.kind {
                            ScopeKind::Deny if level == Level::None => {
                                entries.push(PlannedMount {
                                    op: mask(path.is_dir()),
                                    path: path.clone(),
                                });
                                // A glob caps exactly its matches: what lies in a matched directory
                                // keeps its own level, so it is bound back inside the mask.
                                if ft.is_dir() {
                                    rebind_children(policy, &path, Level::None, entries, listings);
                                }
                            }
                            // A cache's overlay already keeps the host's directory as it is.
                            ScopeKind::ReadOnly
                                if level == Level::Read
                                    && !entries
                                        .iter()
                                        .any(|e| e.path == path && e.op == MountOp::Overlay) =>
                            {
                                entries.push(PlannedMount {
                                    path: path.clone(),
                                    op: MountOp::Bind {
                                        write: false,
                                        dir: ft.is_dir(),
                                    },
                                });
                                if ft.is_dir() {
                                    rebind_children(policy, &path, Level::Read, entries, listings);
                                }
                            }
                            ScopeKind::Read | ScopeKind::Write
                                if ft.is_file() && level > Level::None =>
                            {
                                entries.push(PlannedMount {
                                    path: path.clone(),
                                    op: MountOp::Bind {
                                        write: level == Level::Write,
                                        dir: false,
                                    },
                                });
                            }
                            _ => {}
                        }
                    }
                    if ft.is_dir() && dir_depth + 1 < max_depth {
                        stack.push((path, dir_depth + 1));
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether `dir` exists inside the sandbox as a usable directory: beneath a bind (or at a private
    /// mount) and not beneath a mask, or on the way to one.
    pub fn has_directory(&self, dir: &Path) -> bool {
        let beneath_grant = match self
            .deepest_mount_holding(dir)
            .map(|m| (&m.op, m.path == dir))
        {
            Some((MountOp::Bind { dir: true, .. } | MountOp::Overlay | MountOp::Proc, _)) => true,
            // A private area starts empty (or, `/dev`, with the standard devices only): the host's
            // directories beneath it are not there.
            Some((MountOp::PrivateTmpfs { .. } | MountOp::Dev, at_mount)) => at_mount,
            _ => false,
        };
        let on_the_way = self.mounts.iter().any(|m| {
            is_within(&m.path, dir)
                && m.path != dir
                && !matches!(m.op, MountOp::Stub { .. } | MountOp::Symlink { .. })
        });
        beneath_grant || on_the_way
    }

    /// The run's private area (`/dev/shm`, `/dev`, a private `/tmp`, the temp dir) that `dir` lies beneath,
    /// when no grant inside brings the host's `dir` there: the directory inside is not the host's.
    pub fn private_area_hiding(&self, dir: &Path) -> Option<&Path> {
        let best = self.deepest_mount_holding(dir)?;
        (matches!(best.op, MountOp::PrivateTmpfs { .. } | MountOp::Dev) && best.path != dir)
            .then_some(best.path.as_path())
    }

    /// The deepest planned entry at or above `dir` (the last of equals, as mounted last).
    fn deepest_mount_holding(&self, dir: &Path) -> Option<&PlannedMount> {
        self.mounts
            .iter()
            .filter(|m| is_within(dir, &m.path))
            .max_by_key(|m| m.path.as_os_str().len())
    }
}

/// How many levels below its literal prefix a glob can match: a glob without `**` matches at a fixed
/// depth, so a walk for its matches stops there (`.git/index.stash.*` lists `.git`, never
/// `.git/objects`).
fn glob_walk_depth(pattern: &str) -> usize {
    if pattern.contains("**") {
        return usize::MAX;
    }
    let parts: Vec<&str> = pattern.split('/').filter(|c| !c.is_empty()).collect();
    let literal = parts
        .iter()
        .take_while(|c| !stockade_policy::is_glob_component(c))
        .count();
    parts.len().saturating_sub(literal).max(1)
}

/// A bind whose nearest enclosing entry is a bind of the same kind adds nothing (e.g. `/bin` ->
/// `/usr/bin` inside a read-only `/usr`, or `~/.bashrc` read-only inside a read-only home): drop it.
/// A mask or a different kind in between keeps it.
fn drop_redundant_binds(entries: &mut Vec<PlannedMount>) {
    let by_path: std::collections::HashMap<OsString, MountOp> = entries
        .iter()
        .map(|e| (e.path.as_os_str().to_os_string(), e.op.clone()))
        .collect();
    entries.retain(|e| {
        let MountOp::Bind { write, .. } = e.op else {
            return true;
        };
        let enclosing = e
            .path
            .ancestors()
            .skip(1)
            .find_map(|a| by_path.get(a.as_os_str()));
        !matches!(enclosing, Some(MountOp::Bind { write: w, .. }) if *w == write)
    });
}

/// Binds back the entries of `dir` whose own level is above `cap` (the level a glob gave `dir` itself),
/// each at its level, and masks those whose level is below it: the bind or mask on `dir` covers its
/// tree, the policy only `dir` (issue 35: `read-only = ["out/**"]` beside `write = ["out/*"]` reads
/// `out/d` but not `out/d/k.txt`, which no rule grants; a read-only bind of `out/d` exposed it).
fn rebind_children(
    policy: &ResolvedPolicy,
    dir: &Path,
    cap: Level,
    entries: &mut Vec<PlannedMount>,
    listings: &mut Listings,
) {
    let Some(listed) = listings.whole(dir) else {
        return;
    };
    for entry in listed.entries.iter() {
        let path = entry.path.clone();
        let Some(ft) = entry.kind else { continue };
        if ft.is_symlink() {
            continue;
        }
        let level = bind_level(
            policy,
            &CanonicalPath::assume_canonical(path.clone()),
            ft.is_dir(),
        );
        if level > cap {
            let op = if level == Level::Write {
                writable_mount(
                    policy,
                    &CanonicalPath::assume_canonical(path.clone()),
                    ft.is_dir(),
                )
            } else {
                MountOp::Bind {
                    write: false,
                    dir: ft.is_dir(),
                }
            };
            entries.push(PlannedMount { path, op });
        } else if level < cap && !entries.iter().any(|e| e.path == path) {
            // What lies beneath is bound back by its own rules (a deeper path or glob scope has an
            // entry of its own), as beneath any mask.
            entries.push(PlannedMount {
                op: mask(ft.is_dir()),
                path,
            });
        }
    }
}

/// How a path the policy lets programs write is mounted on its own: a writable bind of the host's file
/// or directory, except where a `cache` scope decides the level, whose writes must never reach the host:
/// a directory gets a private overlay of its own, a file is bound read-only (stricter than the policy, in
/// the rare shape where a glob cap splits a cache).
fn writable_mount(policy: &ResolvedPolicy, path: &CanonicalPath, is_dir: bool) -> MountOp {
    let by_cache = policy
        .decide(path, Access::Write)
        .rule()
        .and_then(|r| policy.scope(r))
        .is_some_and(|s| s.kind == ScopeKind::Cache);
    match (by_cache, is_dir) {
        (false, _) => MountOp::Bind {
            write: true,
            dir: is_dir,
        },
        (true, true) => MountOp::Overlay,
        (true, false) => MountOp::Bind {
            write: false,
            dir: false,
        },
    }
}

/// The level a bind of `path` exposes: the level the policy gives the path itself (a tie may go to a
/// stricter rule), but for a directory never above what its contents inherit, since a glob grant matching
/// a directory raises the directory, not the tree a bind would expose.
fn bind_level(policy: &ResolvedPolicy, path: &CanonicalPath, is_dir: bool) -> Level {
    let level = policy.decide(path, Access::Read).level();
    if is_dir {
        level.min(policy.path_scope_level(path))
    } else {
        level
    }
}

fn mask(dir: bool) -> MountOp {
    if dir {
        MountOp::MaskDir
    } else {
        MountOp::MaskFile
    }
}

/// Mounts are applied parents first. Byte order within a depth: entries of equal depth never contain one
/// another, so any total order serves, and comparing bytes is cheaper than comparing components. Each
/// depth is counted once, not once per comparison (two sorts of a hundred entries were a quarter of a
/// launch's planning).
fn sort_for_mounting(mounts: &mut Vec<PlannedMount>) {
    let mut keyed: Vec<(usize, PlannedMount)> =
        mounts.drain(..).map(|m| (depth(&m.path), m)).collect();
    keyed.sort_by(|(da, a), (db, b)| {
        da.cmp(db)
            .then_with(|| a.path.as_os_str().cmp(b.path.as_os_str()))
    });
    mounts.extend(keyed.into_iter().map(|(_, m)| m));
}

/// `path` is `dir` or lies beneath it: [`Path::starts_with`] for the normalized absolute paths a plan
/// holds (no `.`, `..`, repeated or trailing `/`), comparing bytes rather than components, as it runs
/// hundreds of times a launch.
pub(crate) fn is_within(path: &Path, dir: &Path) -> bool {
    let (path, dir) = (path.as_os_str().as_bytes(), dir.as_os_str().as_bytes());
    path.starts_with(dir)
        && (path.len() == dir.len() || dir == b"/" || path.get(dir.len()) == Some(&b'/'))
}

fn depth(p: &Path) -> usize {
    p.as_os_str()
        .as_bytes()
        .iter()
        .filter(|b| **b == b'/')
        .count()
        - usize::from(p == Path::new("/"))
}

/// `/newroot` + path, as bytes, for the in-namespace code.
pub(crate) fn under(prefix: &str, path: &Path) -> OsString {
    let mut s = OsString::from(prefix);
    s.push(path.as_os_str());
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use stockade_policy::{PolicyBuilder, Variables};

    /// A listing cut at its size says so, and the walks that need every entry read them all again.
    #[test]
    fn a_cut_listing_is_never_taken_for_the_whole_directory() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a", "b", "c"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let cut = Listings::read(dir.path(), 2).unwrap();
        assert_eq!((cut.entries.len(), cut.complete), (2, false));
        let exact = Listings::read(dir.path(), 3).unwrap();
        assert_eq!((exact.entries.len(), exact.complete), (3, true));

        let mut listings = Listings::default();
        listings
            .0
            .insert(dir.path().to_path_buf(), Some(Rc::new(cut)));
        assert_eq!(listings.of(dir.path()).unwrap().entries.len(), 2);
        let whole = listings.whole(dir.path()).unwrap();
        let mut names: Vec<_> = whole.entries.iter().map(|e| e.path.clone()).collect();
        names.sort();
        assert_eq!(names, ["a", "b", "c"].map(|n| dir.path().join(n)));

        // A short read for the stand-ins is not kept: the walks still see every entry.
        let mut listings = Listings::default();
        assert_eq!(listings.first(dir.path(), 1).unwrap().entries.len(), 1);
        let listing = listings.of(dir.path()).unwrap();
        assert_eq!((listing.entries.len(), listing.complete), (3, true));
        assert_eq!(listings.first(dir.path(), 1).unwrap().entries.len(), 3);

        // A directory missing at the start stays missing for the plan: it is looked for once.
        let missing = dir.path().join("missing");
        let mut listings = Listings::default();
        assert!(listings.of(&missing).is_none());
        std::fs::create_dir(&missing).unwrap();
        assert!(listings.of(&missing).is_none());
        assert!(listings.first(&missing, 1).is_none());
        assert!(Listings::default().of(&missing).is_some());
    }

    /// The byte comparison answers as `Path::starts_with` does for every pair of normalized paths,
    /// prefixes that stop inside a name included.
    #[test]
    fn is_within_agrees_with_path_starts_with() {
        let paths = [
            "/",
            "/a",
            "/ab",
            "/a/b",
            "/a/bc",
            "/a/b/c",
            "/ab/c",
            "/proc",
            "/procx",
            "/proc/keys",
        ];
        for p in paths {
            for d in paths {
                assert_eq!(
                    is_within(Path::new(p), Path::new(d)),
                    Path::new(p).starts_with(d),
                    "{p} within {d}"
                );
            }
        }
    }

    fn plan_for(root: &Path, toml: &str) -> MountPlan {
        plan_with(root, toml, Siblings::Stubs)
    }

    fn plan_with(root: &Path, toml: &str, siblings: Siblings) -> MountPlan {
        let mut vars = Variables::default();
        vars.set_path("CWD", root)
            .set_path("HOME", root.join("home"))
            .set_path("TEMP_DIR", "/tmp/stockade-test");
        let policy = PolicyBuilder::new(vars)
            .policy_text(toml, root.join("p.toml"))
            .build()
            .unwrap();
        MountPlan::new(&policy, Path::new("/tmp/stockade-test"), None, siblings).unwrap()
    }

    /// A temporary directory (canonical) holding `dirs` and empty `files`.
    fn tree(dirs: &[&str], files: &[&str]) -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        for d in dirs {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in files {
            std::fs::write(root.join(f), "").unwrap();
        }
        (tmp, root)
    }

    fn op_at<'a>(plan: &'a MountPlan, p: &Path) -> Option<&'a MountOp> {
        plan.mounts.iter().find(|m| m.path == p).map(|m| &m.op)
    }

    /// A temp dir given with a trailing `/` is planned as the same private area: the plan's byte
    /// comparisons see it normalized.
    #[test]
    fn a_temp_dir_written_with_a_trailing_slash_is_the_same_area() {
        let (_tmp, root) = tree(&["w"], &[]);
        let policy = PolicyBuilder::new({
            let mut vars = Variables::default();
            vars.set_path("CWD", &root)
                .set_path("HOME", root.join("home"));
            vars
        })
        .policy_text("[profile.p]\nfs.write = [\"w\"]\n", root.join("p.toml"))
        .build()
        .unwrap();
        let plan = MountPlan::new(
            &policy,
            Path::new("/tmp/stockade-test/"),
            None,
            Siblings::Stubs,
        )
        .unwrap();
        let temp = Path::new("/tmp/stockade-test");
        assert!(matches!(
            op_at(&plan, temp),
            Some(MountOp::PrivateTmpfs { mode: 0o700, .. })
        ));
        assert_eq!(plan.private_area_hiding(&temp.join("x")), Some(temp));
    }

    #[test]
    fn binds_masks_and_protects_in_depth_order() {
        let (_tmp, root) = tree(&["w/.git/hooks", "w/secret", "r/sub"], &["w/.env"]);
        let plan = plan_for(
            &root,
            "[profile.p]\nfs.write = [\"w\"]\nfs.read = [\"r\", \"r/sub\"]\nfs.read-only = [\"w/.git/hooks\", \"w/.claude/\"]\nfs.deny = [\"w/secret\", \"**/.env\", \"r/nothing\"]\n",
        );
        assert_eq!(
            op_at(&plan, &root.join("w")),
            Some(&MountOp::Bind {
                write: true,
                dir: true
            })
        );
        assert_eq!(
            op_at(&plan, &root.join("r")),
            Some(&MountOp::Bind {
                write: false,
                dir: true
            })
        );
        assert_eq!(
            op_at(&plan, &root.join("w/.git/hooks")),
            Some(&MountOp::Bind {
                write: false,
                dir: true
            })
        );
        assert_eq!(
            op_at(&plan, &root.join("w/.git")),
            Some(&MountOp::Bind {
                write: true,
                dir: true
            }),
            "anchor"
        );
        assert_eq!(
            op_at(&plan, &root.join("w/secret")),
            Some(&MountOp::MaskDir)
        );
        assert_eq!(op_at(&plan, &root.join("w/.env")), Some(&MountOp::MaskFile));
        assert_eq!(op_at(&plan, &root.join("r/nothing")), None);
        // Same kind inside the same kind adds nothing; a write tree inside keeps its own bind.
        assert_eq!(op_at(&plan, &root.join("r/sub")), None);
        // A read-only target that does not exist is left to the mediator: nothing is made for it.
        assert_eq!(op_at(&plan, &root.join("w/.claude")), None);
        let pos = |p: &Path| plan.mounts.iter().position(|m| m.path == p).unwrap();
        assert!(pos(&root.join("w")) < pos(&root.join("w/.git")));
        assert!(pos(&root.join("w/.git")) < pos(&root.join("w/.git/hooks")));
    }

    #[test]
    fn a_read_only_directory_with_writable_names_is_guarded() {
        let (_tmp, root) = tree(
            &["w/.git/objects", "w/.git/hooks"],
            &["w/.git/config", "w/.git/index", "w/.git/HEAD"],
        );
        let plan = plan_for(
            &root,
            "[profile.p]\nfs.write = [\"w\", \"w/.git/objects\", \"w/.git/index\", \"w/.git/index.lock\"]\n\
             fs.read-only = [\"w/.git\"]\n",
        );
        assert_eq!(plan.guarded_dirs, vec![root.join("w/.git")]);
        // Writable through `w`'s bind (a bind of its own would add nothing).
        assert_eq!(op_at(&plan, &root.join("w/.git")), None);
        // What the policy keeps read-only is bound back; what it makes writable stays a plain entry that
        // a rename can replace.
        for ro in ["w/.git/config", "w/.git/HEAD"] {
            assert_eq!(
                op_at(&plan, &root.join(ro)),
                Some(&MountOp::Bind {
                    write: false,
                    dir: false
                }),
                "{ro}"
            );
        }
        assert!(matches!(
            op_at(&plan, &root.join("w/.git/hooks")),
            Some(MountOp::Bind { write: false, .. })
        ));
        assert_eq!(op_at(&plan, &root.join("w/.git/index")), None);
        assert_eq!(op_at(&plan, &root.join("w/.git/objects")), None);
    }

    #[test]
    fn glob_grants_bind_matches_only() {
        let (_tmp, root) = tree(&["src/a"], &["src/a/x.ts", "src/a/y.js"]);
        let plan = plan_for(&root, "[profile.p]\nfs.read = [\"src/**/*.ts\"]\n");
        assert_eq!(
            op_at(&plan, &root.join("src/a/x.ts")),
            Some(&MountOp::Bind {
                write: false,
                dir: false
            })
        );
        // Ungranted siblings are inaccessible stand-ins, not the file.
        assert_eq!(
            op_at(&plan, &root.join("src/a/y.js")),
            Some(&MountOp::Stub { dir: false })
        );
        assert_eq!(op_at(&plan, &root.join("src")), None);
    }

    #[test]
    fn hidden_siblings_leave_only_symlinks_beside_grants() {
        let (_tmp, root) = tree(&["in/other"], &["in/input.md", "in/neighbour.md"]);
        std::os::unix::fs::symlink("input.md", root.join("in/link")).unwrap();
        let toml = "[profile.p]\nfs.read = [\"in/input.md\"]\n";
        let shown = plan_for(&root, toml);
        assert_eq!(
            op_at(&shown, &root.join("in/neighbour.md")),
            Some(&MountOp::Stub { dir: false })
        );
        assert_eq!(
            op_at(&shown, &root.join("in/other")),
            Some(&MountOp::Stub { dir: true })
        );
        let hidden = plan_with(&root, toml, Siblings::SymlinksOnly);
        assert!(matches!(
            op_at(&hidden, &root.join("in/input.md")),
            Some(MountOp::Bind { write: false, .. })
        ));
        assert_eq!(op_at(&hidden, &root.join("in/neighbour.md")), None);
        assert_eq!(op_at(&hidden, &root.join("in/other")), None);
        assert_eq!(
            op_at(&hidden, &root.join("in/link")),
            Some(&MountOp::Symlink {
                target: PathBuf::from("input.md")
            }),
            "symlinks stay, so /bin and /lib64 still lead somewhere"
        );
    }

    #[test]
    fn snapshots_replace_only_read_only_file_binds_in_the_empty_root() {
        let (_tmp, root) = tree(
            &["in", "tree", "w"],
            &["in/a.md", "in/b.md", "tree/c.md", "w/d.md", "w/e.md"],
        );
        let mut plan = plan_with(
            &root,
            "[profile.p]\nfs.read = [\"in/a.md\", \"in/b.md\", \"tree\", \"tree/c.md\"]\nfs.write = [\"w\"]\nfs.read-only = [\"w/e.md\"]\n",
            Siblings::SymlinksOnly,
        );
        let landlock_before = plan.landlock.clone();
        let replaced = plan.use_snapshots(&[
            (&root.join("in/a.md"), 4),
            (&root.join("tree/c.md"), 4), // visible through the directory grant
            (&root.join("w/d.md"), 4),    // writable
            (&root.join("w/e.md"), 4), // read-only, but inside a writable bind: it would land on the host
            (&root.join("in/none.md"), 4), // not in the plan at all
        ]);
        assert_eq!(replaced, vec![root.join("in/a.md")]);
        assert_eq!(
            op_at(&plan, &root.join("in/a.md")),
            Some(&MountOp::Snapshot { bytes: 4 })
        );
        assert!(matches!(
            op_at(&plan, &root.join("in/b.md")),
            Some(MountOp::Bind {
                write: false,
                dir: false
            })
        ));
        assert!(matches!(
            op_at(&plan, &root.join("w/e.md")),
            Some(MountOp::Bind {
                write: false,
                dir: false
            })
        ));
        assert_eq!(op_at(&plan, &root.join("in/none.md")), None);
        assert_eq!(
            plan.landlock, landlock_before,
            "a snapshot is read as the bind was"
        );

        // A directory of nothing but snapshots: one rule for it instead of one per file.
        std::fs::create_dir_all(root.join("in/deeper")).unwrap();
        std::fs::write(root.join("in/deeper/f.md"), "text").unwrap();
        let toml = "[profile.p]\nfs.read = [\"in/a.md\", \"in/b.md\", \"in/deeper/f.md\"]\n";
        let mut plan = plan_with(&root, toml, Siblings::SymlinksOnly);
        let all = [&root.join("in/a.md"), &root.join("in/b.md")];
        plan.use_snapshots(&all.map(|p| (p.as_path(), 4)));
        let rules: Vec<&Path> = plan.landlock.iter().map(|(p, _)| p.as_path()).collect();
        assert!(
            !rules.contains(&root.join("in").as_path()),
            "in/ also holds a directory: per-file rules"
        );
        plan.use_snapshots(&[(&root.join("in/deeper/f.md"), 4)]);
        let rules: Vec<(&Path, LandlockGrant)> = plan
            .landlock
            .iter()
            .map(|(p, g)| (p.as_path(), *g))
            .collect();
        assert!(rules.contains(&(root.join("in/deeper").as_path(), LandlockGrant::Read)));
        assert!(!rules.iter().any(|(p, _)| *p == root.join("in/deeper/f.md")));
        assert!(rules.contains(&(root.join("in/a.md").as_path(), LandlockGrant::Read)));
        assert!(!rules.iter().any(|(p, _)| *p == root.join("in")));

        // With a symlink beside them (a name the reader could otherwise not list) per-file rules stay.
        std::os::unix::fs::symlink("a.md", root.join("in/deeper/link")).unwrap();
        let mut plan = plan_with(&root, toml, Siblings::SymlinksOnly);
        plan.use_snapshots(&[(&root.join("in/deeper/f.md"), 4)]);
        let rules: Vec<&Path> = plan.landlock.iter().map(|(p, _)| p.as_path()).collect();
        assert!(rules.contains(&root.join("in/deeper/f.md").as_path()));
        assert!(!rules.contains(&root.join("in/deeper").as_path()));
    }
}
