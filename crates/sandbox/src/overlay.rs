//! The run's cache overlays, made by the supervisor while the init builds the rest of the root.
//!
//! Making an overlay is most of the work of mounting it (checking and preparing its work directory: a
//! tenth of a millisecond or more each), and the built-in profile has seven caches: made one after the
//! other by the init, they were more than a millisecond of every launch. With the new mount API
//! (`fsopen`, `fsconfig`, `fsmount`, Linux 6.15 for layers given as descriptors) an overlay can be made
//! detached, in any mount namespace, and attached later in another: a thread of the supervisor makes
//! them on the other core, in the order of the plan, and sends each to the init, which only attaches it
//! (`move_mount`) where the plan puts it. A private cache whose host directory is empty gets no overlay:
//! its upper layer, bound alone, is the same view for a fraction of the cost.
//!
//! The init falls back to mounting an overlay itself, as before, for every cache this did not send: the
//! stream ends early when anything here fails (an older kernel, a layer that cannot be prepared), and
//! the init then reports the error it meets itself. Only a supervisor running as root makes them: without
//! privilege they belong to the sandbox's own user namespace, which only the clone creates.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::sys;

/// One cache overlay, named by host paths.
#[derive(Debug)]
pub(crate) struct DetachedOverlay {
    /// The host's cache directory, the overlay's lower layer.
    pub(crate) lower: PathBuf,
    /// Where its writes go.
    pub(crate) upper: UpperLayer,
}

/// An overlay's upper and work directories.
#[derive(Debug)]
pub(crate) enum UpperLayer {
    /// In a tmpfs made for the run's caches, which vanishes with the run.
    Private,
    /// In the agent's cache store (`--persist-caches`), made already.
    Stored { upper: PathBuf, work: PathBuf },
}

/// Makes the overlays on a thread of their own and sends each to the init over `sock`, in order, then
/// closes `sock`. The caller joins the thread before it forks again.
pub(crate) fn make_beside(
    overlays: Vec<DetachedOverlay>,
    tmpfs_size: Option<u64>,
    sock: RawFd,
) -> Option<std::thread::JoinHandle<()>> {
    let made = std::thread::Builder::new()
        .name("stockade-caches".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            // An error ends the stream here; the init makes the rest itself and reports what it meets.
            let _ = send_all(&overlays, tmpfs_size, sock);
            sys::close(sock);
        });
    match made {
        Ok(thread) => Some(thread),
        Err(_) => {
            // Nothing sent: the init makes every overlay itself.
            sys::close(sock);
            None
        }
    }
}

fn send_all(overlays: &[DetachedOverlay], tmpfs_size: Option<u64>, sock: RawFd) -> io::Result<()> {
    let mut private_tmpfs = None;
    // The layers' tmpfs goes with the last overlay in it, for the init to attach in its staging root,
    // where it is unmounted with the old root. (Closed here while detached, it would be unmounted on
    // the spot: a grace period of RCU, a millisecond.) Not before: attached in another namespace, it
    // could hold no further layer.
    let last_private = overlays
        .iter()
        .rposition(|o| matches!(o.upper, UpperLayer::Private));
    for (index, overlay) in overlays.iter().enumerate() {
        let lower = sys::openat(
            libc::AT_FDCWD,
            &cstring(overlay.lower.as_os_str().as_bytes())?,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            0,
        )?;
        // The merged root is the upper layer's root: it gets the host directory's owner and mode, so the
        // program (perhaps another user, with `--user`) may write where it could read.
        let owner = sys::fd_owner_and_mode(lower.as_raw_fd())?;
        let mount = match &overlay.upper {
            UpperLayer::Private => {
                // Over an empty directory an overlay would show only its upper layer: that layer bound
                // alone is the same view, without making an overlay (a sixth of a millisecond each, and
                // most of the built-in profile's caches are empty on a machine that does not use every
                // toolchain). Not even its context is opened: dropping one that made no overlay waits for
                // an RCU grace period.
                let fs = if sys::dir_is_empty(lower.as_raw_fd())? {
                    None
                } else {
                    Some(overlay_context(&lower)?)
                };
                let tmpfs = match &private_tmpfs {
                    Some(fd) => fd,
                    None => private_tmpfs.insert(layers_tmpfs(tmpfs_size)?),
                };
                let tmpfs = tmpfs.as_raw_fd();
                // Not the names the init would give its own layers: it makes the rest if this fails.
                let dir = format!("detached-{index}");
                let upper = cstring(format!("{dir}/upper"))?;
                sys::mkdir_at(tmpfs, &cstring(dir.as_str())?, 0o700)?;
                sys::mkdir_at(tmpfs, &upper, 0o700)?;
                give(tmpfs, &upper, owner)?;
                match fs {
                    None => sys::open_tree_clone(tmpfs, &upper)?,
                    Some(fs) => {
                        let work = cstring(format!("{dir}/work"))?;
                        sys::mkdir_at(tmpfs, &work, 0o700)?;
                        make_overlay(&fs, open_dir(tmpfs, &upper)?, open_dir(tmpfs, &work)?)?
                    }
                }
            }
            UpperLayer::Stored { upper, work } => {
                let fs = overlay_context(&lower)?;
                let upper = cstring(upper.as_os_str().as_bytes())?;
                let work = cstring(work.as_os_str().as_bytes())?;
                give(libc::AT_FDCWD, &upper, owner)?;
                make_overlay(
                    &fs,
                    open_dir(libc::AT_FDCWD, &upper)?,
                    open_dir(libc::AT_FDCWD, &work)?,
                )?
            }
        };
        match private_tmpfs
            .as_ref()
            .filter(|_| last_private == Some(index))
        {
            Some(tmpfs) => sys::send_fds(sock, &[mount.as_raw_fd(), tmpfs.as_raw_fd()])?,
            None => sys::send_fds(sock, &[mount.as_raw_fd()])?,
        }
    }
    Ok(())
}

/// An overlay's context with its lower layer, given first: a kernel that takes no layer as a descriptor
/// (before 6.15) refuses it here, before a tmpfs is made that would then have to be unmounted.
fn overlay_context(lower: &OwnedFd) -> io::Result<OwnedFd> {
    let fs = sys::fsopen(c"overlay")?;
    sys::fsconfig_fd(fs.as_raw_fd(), c"lowerdir+", lower.as_raw_fd())?;
    Ok(fs)
}

/// Makes the overlay whose lower layer `fs` has, on `upper` and `work`.
fn make_overlay(fs: &OwnedFd, upper: OwnedFd, work: OwnedFd) -> io::Result<OwnedFd> {
    sys::fsconfig_fd(fs.as_raw_fd(), c"upperdir", upper.as_raw_fd())?;
    sys::fsconfig_fd(fs.as_raw_fd(), c"workdir", work.as_raw_fd())?;
    sys::fsconfig_create(fs.as_raw_fd())?;
    sys::fsmount_nosuid_nodev(fs.as_raw_fd())
}

/// The options of the one tmpfs holding every private upper layer of the run: mode 0700, as large as the
/// memory limit. The init mounts it with them as `mount(2)` data when it makes the layers itself; here
/// they are set one by one.
pub(crate) fn layers_tmpfs_options(size: Option<u64>) -> Vec<(&'static str, String)> {
    let mut options = vec![("mode", "700".to_string())];
    options.extend(size.map(|size| ("size", size.to_string())));
    options
}

/// The tmpfs of [`layers_tmpfs_options`], detached, like the one the init would mount in its staging
/// root.
fn layers_tmpfs(size: Option<u64>) -> io::Result<OwnedFd> {
    let fs = sys::fsopen(c"tmpfs")?;
    for (key, value) in layers_tmpfs_options(size) {
        sys::fsconfig_string(fs.as_raw_fd(), &cstring(key)?, &cstring(value)?)?;
    }
    sys::fsconfig_create(fs.as_raw_fd())?;
    sys::fsmount_nosuid_nodev(fs.as_raw_fd())
}

/// Gives an upper layer the owner and mode of its lower one. As when the init does it, an owner that
/// cannot be given leaves the directory the caller's.
fn give(dir: RawFd, upper: &CString, (uid, gid, mode): (u32, u32, u32)) -> io::Result<()> {
    let _ = sys::chown_at(dir, upper, uid, gid);
    sys::chmod_at(dir, upper, mode)
}

fn open_dir(dir: RawFd, path: &CString) -> io::Result<OwnedFd> {
    sys::openat(
        dir,
        path,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        0,
    )
}

fn cstring(bytes: impl Into<Vec<u8>>) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;
    use std::path::PathBuf;

    use super::{DetachedOverlay, UpperLayer, send_all};
    use crate::sys;

    /// The stream carries the overlays made before one that cannot be made, then ends: the init makes
    /// that one and the rest itself. What was sent is a working overlay of the host's directory, whose
    /// writes never reach it.
    #[test]
    fn the_stream_ends_at_the_first_overlay_that_cannot_be_made() {
        if sys::geteuid() != 0 {
            eprintln!("skipped: making a mount needs root");
            return;
        }
        let base =
            std::env::temp_dir().join(format!("stockade-overlay-test-{}", std::process::id()));
        let (a, missing, c) = (base.join("a"), base.join("missing"), base.join("c"));
        for d in [&a, &c] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(a.join("host.txt"), "host").unwrap();
        let private = |lower: &PathBuf| DetachedOverlay {
            lower: lower.clone(),
            upper: UpperLayer::Private,
        };
        let (sup, init) = sys::socketpair().unwrap();
        let sent = send_all(&[private(&a), private(&missing), private(&c)], None, sup);
        sys::close(sup);
        assert_eq!(
            sent.map_err(|e| e.kind()),
            Err(std::io::ErrorKind::NotFound)
        );

        let first = sys::recv_fds(init).unwrap().unwrap();
        // One overlay, without the layers' tmpfs (that goes with the last private overlay, never made).
        assert_eq!(first.len(), 1);
        let merged = first[0].as_raw_fd();
        let opened = sys::openat(merged, c"host.txt", libc::O_RDONLY | libc::O_CLOEXEC, 0);
        assert!(
            opened.is_ok(),
            "the host's file is seen through the overlay"
        );
        let made = sys::openat(
            merged,
            c"new.txt",
            libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
            0o600,
        );
        assert!(made.is_ok(), "{made:?}");
        assert!(!a.join("new.txt").exists(), "a write reached the host");
        assert!(
            sys::recv_fds(init).unwrap().is_none(),
            "the stream did not end"
        );
        sys::close(init);
        drop((first, opened, made));
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// An empty cache is sent as a bind of its private upper layer, not an overlay: the same view (empty,
    /// writable, with the host directory's owner and mode), whose writes never reach the host; a cache
    /// with entries still gets its overlay; the layers' tmpfs goes with the last of them.
    #[test]
    fn an_empty_cache_is_its_private_layer_alone() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        if sys::geteuid() != 0 {
            eprintln!("skipped: making a mount needs root");
            return;
        }
        let base = std::env::temp_dir().join(format!(
            "stockade-overlay-empty-test-{}",
            std::process::id()
        ));
        let (empty, full) = (base.join("empty"), base.join("full"));
        for d in [&empty, &full] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(full.join("host.txt"), "host").unwrap();
        std::fs::set_permissions(&empty, PermissionsExt::from_mode(0o751)).unwrap();
        let private = |lower: &PathBuf| DetachedOverlay {
            lower: lower.clone(),
            upper: UpperLayer::Private,
        };
        let (sup, init) = sys::socketpair().unwrap();
        send_all(&[private(&empty), private(&full)], None, sup).unwrap();
        sys::close(sup);
        let first = sys::recv_fds(init).unwrap().unwrap();
        let second = sys::recv_fds(init).unwrap().unwrap();
        assert!(
            sys::recv_fds(init).unwrap().is_none(),
            "the stream did not end"
        );
        sys::close(init);
        let metadata = |fd: &std::os::fd::OwnedFd| {
            std::fs::File::from(fd.try_clone().unwrap())
                .metadata()
                .unwrap()
        };

        // The empty cache: a directory of the layers' tmpfs (sent with the second), as the host's.
        assert_eq!(first.len(), 1);
        assert_eq!(second.len(), 2, "the layers' tmpfs comes with the last");
        let (bound, tmpfs) = (metadata(&first[0]), metadata(&second[1]));
        assert_eq!(bound.dev(), tmpfs.dev(), "not a bind of the private layer");
        let host = std::fs::metadata(&empty).unwrap();
        assert_eq!(
            (bound.uid(), bound.gid(), bound.mode()),
            (host.uid(), host.gid(), host.mode())
        );
        let made = sys::openat(
            first[0].as_raw_fd(),
            c"new.txt",
            libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
            0o600,
        );
        assert!(made.is_ok(), "{made:?}");
        assert!(!empty.join("new.txt").exists(), "a write reached the host");

        // The cache with an entry: an overlay, its own file system, showing the host's file.
        let merged = metadata(&second[0]);
        assert_ne!(merged.dev(), tmpfs.dev());
        let opened = sys::openat(
            second[0].as_raw_fd(),
            c"host.txt",
            libc::O_RDONLY | libc::O_CLOEXEC,
            0,
        );
        assert!(opened.is_ok(), "{opened:?}");
        drop((first, second, made, opened));
        std::fs::remove_dir_all(&base).unwrap();
    }
}
