//! Thin wrappers over the system calls the sandbox needs; the only module with `unsafe`.
//!
//! Each wrapper does one call and turns `-1`/`errno` into `io::Error`. They allocate nothing, so they may be
//! used between `fork` and `execve`.
#![allow(
    unsafe_code,
    reason = "system calls without safe std equivalents; each block documents why it is sound"
)]

use std::ffi::CStr;
use std::io;
use std::os::fd::RawFd;

use libc::{c_char, c_int, c_ulong, pid_t};

fn check(ret: c_int) -> io::Result<c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn check_long(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `clone(flags | SIGCHLD)` without a new stack: like `fork`, into new namespaces.
/// Returns `Some(pid)` in the parent and `None` in the child.
///
/// The caller must be single-threaded: the child continues with a copy of this thread only.
pub(crate) fn clone_into_namespaces(flags: c_int) -> io::Result<Option<pid_t>> {
    // SAFETY: a raw clone with a null stack behaves like fork(2); no Rust state is shared with the child,
    // which gets a copy of the address space. The caller guarantees a single thread (documented above).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    let pid = check_long(ret)?;
    Ok(if pid == 0 { None } else { Some(pid as pid_t) })
}

/// Runs `child` in a new process that shares this one's memory, this thread waiting until the child has
/// called `execve` or exited: `clone(CLONE_VM | CLONE_VFORK)` on a stack of its own, as `posix_spawn`
/// does. Nothing is copied, so the agent's start costs no page-table copy and no copy-on-write fault in
/// either process (each fault is microseconds under a hypervisor's shadowed page tables).
///
/// The caller must be single-threaded, and `child` should end in `execve` or [`exit_now`] (the process
/// exits with 125 if it returns): it runs on this process's heap and thread-local storage while this
/// thread is stopped, so whatever it leaves there (an allocation, errno) is what this thread finds when
/// it resumes. Descriptors, signal handlers and credentials are the child's own copies, as after `fork`.
pub(crate) fn spawn_sharing_memory(child: &mut dyn FnMut()) -> io::Result<pid_t> {
    /// A Rust thread's default, ample for the agent's set-up; pages never touched cost nothing.
    const STACK: usize = 2 << 20;
    extern "C" fn start(arg: *mut libc::c_void) -> c_int {
        // SAFETY: `arg` is the `&mut &mut dyn FnMut` below, alive until the parent resumes, which is
        // after this process has exec'd or exited.
        let child = unsafe { &mut *arg.cast::<&mut dyn FnMut()>() };
        child();
        // Never reached by the agent, which ends in exec or `_exit`; whatever else returns exits here.
        exit_now(125)
    }
    let page = 4096;
    // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            STACK + page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // The lowest page is the guard: an overflow faults instead of writing into another mapping.
    // SAFETY: the first page of the mapping just made.
    let guarded = check(unsafe { libc::mprotect(base, page, libc::PROT_NONE) });
    let mut arg: &mut dyn FnMut() = child;
    let pid = guarded.and_then(|_| {
        // SAFETY: the stack grows down from the mapping's end (page-aligned, so 16-byte aligned); `start`
        // never returns into Rust code of this thread, and this thread stays stopped (CLONE_VFORK) while
        // the child uses the stack and `arg`; the caller is single-threaded (documented above).
        check(unsafe {
            libc::clone(
                start,
                base.cast::<u8>().add(STACK + page).cast(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                std::ptr::from_mut(&mut arg).cast(),
            )
        })
    });
    // SAFETY: the mapping made above; the child has exec'd (its own memory now) or exited.
    unsafe { libc::munmap(base, STACK + page) };
    pid
}

/// `_exit(code)`: leaves the child without running destructors or atexit handlers of the parent's copy.
pub(crate) fn exit_now(code: c_int) -> ! {
    // SAFETY: _exit never returns and touches no Rust state.
    unsafe { libc::_exit(code) }
}

pub(crate) fn setsid() -> io::Result<()> {
    // SAFETY: no arguments; failure is reported through errno.
    check(unsafe { libc::setsid() }).map(drop)
}

pub(crate) fn prctl(option: c_int, arg2: c_ulong) -> io::Result<()> {
    // SAFETY: every option used here takes integer arguments only.
    check(unsafe { libc::prctl(option, arg2, 0 as c_ulong, 0 as c_ulong, 0 as c_ulong) }).map(drop)
}

pub(crate) fn mount(
    src: Option<&CStr>,
    dst: &CStr,
    fstype: Option<&CStr>,
    flags: c_ulong,
    data: Option<&CStr>,
) -> io::Result<()> {
    let p = |c: Option<&CStr>| c.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: all pointers are NUL-terminated strings that outlive the call, or null where allowed.
    check(unsafe { libc::mount(p(src), dst.as_ptr(), p(fstype), flags, p(data).cast()) }).map(drop)
}

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x0000_0001;
const AT_RECURSIVE: c_int = 0x8000;

/// Makes the mount at `path` and every mount beneath it read-only (`mount_setattr`, Linux 5.12).
pub(crate) fn make_readonly_recursive(path: &CStr) -> io::Result<()> {
    set_readonly(path, AT_RECURSIVE)
}

/// Makes only the mount at `path` read-only, not the mounts stacked beneath it.
pub(crate) fn make_readonly(path: &CStr) -> io::Result<()> {
    set_readonly(path, 0)
}

fn set_readonly(path: &CStr, flags: c_int) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `attr` is a valid mount_attr of the size passed; `path` is NUL-terminated.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags as c_ulong,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check_long(ret).map(drop)
}

/// A filesystem context (`fsopen`, Linux 5.2): configured with [`fsconfig_string`] and [`fsconfig_fd`],
/// made with [`fsconfig_create`], and turned into a detached mount by [`fsmount_nosuid_nodev`].
pub(crate) fn fsopen(fstype: &CStr) -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: a NUL-terminated name; the new descriptor is owned by the returned OwnedFd.
    let fd = check_long(unsafe {
        libc::syscall(libc::SYS_fsopen, fstype.as_ptr(), libc::FSOPEN_CLOEXEC)
    })?;
    Ok(owned(fd))
}

/// Sets a string option of a filesystem context (`mode`, `size`).
pub(crate) fn fsconfig_string(fs: RawFd, key: &CStr, value: &CStr) -> io::Result<()> {
    // SAFETY: NUL-terminated strings that outlive the call.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs,
            libc::FSCONFIG_SET_STRING,
            key.as_ptr(),
            value.as_ptr(),
            0,
        )
    })
    .map(drop)
}

/// Sets an option of a filesystem context to a descriptor (an overlay's layers, Linux 6.15 or later).
pub(crate) fn fsconfig_fd(fs: RawFd, key: &CStr, fd: RawFd) -> io::Result<()> {
    // SAFETY: a NUL-terminated key; the value is passed as the auxiliary descriptor.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs,
            libc::FSCONFIG_SET_FD,
            key.as_ptr(),
            std::ptr::null::<c_char>(),
            fd,
        )
    })
    .map(drop)
}

/// Creates the filesystem a context describes (the `mount` work itself: for an overlay, checking and
/// preparing its work directory).
pub(crate) fn fsconfig_create(fs: RawFd) -> io::Result<()> {
    // SAFETY: integer arguments and null pointers, as the command requires.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs,
            libc::FSCONFIG_CMD_CREATE,
            std::ptr::null::<c_char>(),
            std::ptr::null::<c_char>(),
            0,
        )
    })
    .map(drop)
}

/// A detached mount of the filesystem a context made, `nosuid` and `nodev`: attached nowhere until
/// [`move_mount_detached`] puts it somewhere, in whatever mount namespace the caller is in then.
pub(crate) fn fsmount_nosuid_nodev(fs: RawFd) -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: integer arguments.
    let fd = check_long(unsafe {
        libc::syscall(
            libc::SYS_fsmount,
            fs,
            libc::FSMOUNT_CLOEXEC,
            libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
        )
    })?;
    Ok(owned(fd))
}

/// Moves `thread` off the CPU the caller runs on, onto any other it may use (nothing when there is no
/// other). The thread must not have ended: glibc would then move the caller instead (an ended thread's
/// id reads 0, which means the caller), so the caller makes sure it cannot end before this returns.
pub(crate) fn move_off_this_cpu(thread: libc::pthread_t) {
    // SAFETY: cpu_set_t is plain data; the calls read and write it within its size.
    unsafe {
        let here = libc::sched_getcpu();
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if here < 0 || libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) != 0 {
            return;
        }
        libc::CPU_CLR(here as usize, &mut set);
        if libc::CPU_COUNT(&set) == 0 {
            return;
        }
        libc::pthread_setaffinity_np(thread, std::mem::size_of_val(&set), &set);
    }
}

/// A detached bind mount of `dir/path` (`open_tree` with `OPEN_TREE_CLONE`, Linux 5.2), attached
/// nowhere until [`move_mount_detached`]; it keeps the flags of the mount it is taken from.
pub(crate) fn open_tree_clone(dir: RawFd, path: &CStr) -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: a NUL-terminated path; the new descriptor is owned by the returned OwnedFd.
    let fd = check_long(unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            dir,
            path.as_ptr(),
            libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC,
        )
    })?;
    Ok(owned(fd))
}

/// Whether the directory open at `fd` (not `O_PATH`) has no entry but `.` and `..`. A reply it cannot
/// read counts as not empty, the answer that never skips anything.
pub(crate) fn dir_is_empty(fd: RawFd) -> io::Result<bool> {
    /// `struct linux_dirent64`'s records start 8-byte aligned.
    #[repr(C, align(8))]
    struct Records([u8; 1024]);
    let mut records = Records([0; 1024]);
    loop {
        // SAFETY: the buffer is writable for its whole length and outlives the call.
        let n = check_long(unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                fd,
                records.0.as_mut_ptr(),
                records.0.len(),
            )
        })? as usize;
        if n == 0 {
            return Ok(true);
        }
        let filled = &records.0[..n.min(records.0.len())];
        let mut at = 0;
        // Each record: inode (8 bytes), offset (8), its length (2), type (1), the NUL-terminated name.
        while at < filled.len() {
            let Some(&[lo, hi]) = filled.get(at + 16..at + 18) else {
                return Ok(false);
            };
            let len = usize::from(u16::from_ne_bytes([lo, hi]));
            let Some(name) = filled.get(at + 19..at + len) else {
                return Ok(false);
            };
            let name = name.split(|&b| b == 0).next().unwrap_or_default();
            if name != b"." && name != b".." {
                return Ok(false);
            }
            at += len;
        }
    }
}

/// Attaches the detached mount `mnt` (from [`fsmount_nosuid_nodev`]) at `dst`.
pub(crate) fn move_mount_detached(mnt: RawFd, dst: &CStr) -> io::Result<()> {
    // SAFETY: an empty NUL-terminated source path (the descriptor itself) and a NUL-terminated target.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            mnt,
            c"".as_ptr(),
            libc::AT_FDCWD,
            dst.as_ptr(),
            libc::MOVE_MOUNT_F_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// `fchownat(2)` without following a final symlink.
pub(crate) fn chown_at(dir: RawFd, name: &CStr, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: a NUL-terminated name.
    check(unsafe { libc::fchownat(dir, name.as_ptr(), uid, gid, libc::AT_SYMLINK_NOFOLLOW) })
        .map(drop)
}

/// `fchmodat(2)`.
pub(crate) fn chmod_at(dir: RawFd, name: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: a NUL-terminated name.
    check(unsafe { libc::fchmodat(dir, name.as_ptr(), mode, 0) }).map(drop)
}

/// `fstat(2)`'s owner and permission bits (`st_mode & 07777`); an `O_PATH` descriptor will do.
pub(crate) fn fd_owner_and_mode(fd: RawFd) -> io::Result<(u32, u32, u32)> {
    // SAFETY: `st` is plain data filled by the kernel.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer for the duration of the call.
    check(unsafe { libc::fstat(fd, &mut st) })?;
    Ok((st.st_uid, st.st_gid, st.st_mode & 0o7777))
}

/// Takes ownership of a descriptor a system call just returned.
fn owned(fd: libc::c_long) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: the kernel just returned this descriptor to us, and nothing else owns it.
    unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as RawFd) }
}

pub(crate) fn pivot_root(new_root: &CStr, put_old: &CStr) -> io::Result<()> {
    // SAFETY: both pointers are NUL-terminated strings.
    check_long(unsafe { libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr()) })
        .map(drop)
}

pub(crate) fn umount_detach(path: &CStr) -> io::Result<()> {
    // SAFETY: NUL-terminated path.
    check(unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) }).map(drop)
}

pub(crate) fn chdir(path: &CStr) -> io::Result<()> {
    // SAFETY: NUL-terminated path.
    check(unsafe { libc::chdir(path.as_ptr()) }).map(drop)
}

pub(crate) fn mkdir(path: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: NUL-terminated path.
    check(unsafe { libc::mkdir(path.as_ptr(), mode) }).map(drop)
}

/// `stat`'s owner and permission bits (`st_mode & 07777`).
pub(crate) fn owner_and_mode(path: &CStr) -> io::Result<(u32, u32, u32)> {
    // SAFETY: `st` is plain data filled by the kernel.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid pointer for the duration of the call.
    check(unsafe { libc::stat(path.as_ptr(), &mut st) })?;
    Ok((st.st_uid, st.st_gid, st.st_mode & 0o7777))
}

pub(crate) fn chown(path: &CStr, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: NUL-terminated path.
    check(unsafe { libc::chown(path.as_ptr(), uid, gid) }).map(drop)
}

/// Takes an exclusive `flock` on `fd` without waiting: `Ok(false)` when another holder has it.
pub(crate) fn try_lock_exclusive(fd: RawFd) -> io::Result<bool> {
    // SAFETY: integer arguments.
    match check(unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) }) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(false),
        Err(e) => Err(e),
    }
}

pub(crate) fn chmod(path: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: NUL-terminated path.
    check(unsafe { libc::chmod(path.as_ptr(), mode) }).map(drop)
}

/// Creates an empty file (for a bind-mount target); an existing one is fine.
pub(crate) fn touch(path: &CStr, mode: u32) -> io::Result<()> {
    create(path, libc::O_NOFOLLOW, mode, None)
}

/// Creates an empty file; `AlreadyExists` when anything is at `path` already (a symlink is not followed).
pub(crate) fn create_new(path: &CStr, mode: u32) -> io::Result<()> {
    create(path, libc::O_EXCL, mode, None)
}

/// Creates a file holding `content` with exactly `mode` (whatever the umask); `AlreadyExists` when
/// anything is at `path` already.
pub(crate) fn create_new_with(path: &CStr, mode: u32, content: &[u8]) -> io::Result<()> {
    create(path, libc::O_EXCL, mode, Some(content))
}

/// Opens `path` for writing with `O_CREAT` and `flags`, writes `content` (setting `mode` exactly first)
/// if there is any, and closes it.
fn create(path: &CStr, flags: c_int, mode: u32, content: Option<&[u8]>) -> io::Result<()> {
    // SAFETY: NUL-terminated path; the returned fd is closed below.
    let fd = check(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC | flags,
            mode,
        )
    })?;
    let written = content.map_or(Ok(()), |content| {
        // SAFETY: `fd` is the descriptor opened above.
        check(unsafe { libc::fchmod(fd, mode) })?;
        write_all(fd, content)
    });
    close(fd);
    written
}

/// Whether `fd` (an `O_PATH` descriptor will do) is a directory; false when it cannot be examined.
pub(crate) fn is_dir(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: `st` is plain data filled by the kernel.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor borrowed for the call and a valid pointer.
    let r = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
    r == 0 && st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

/// Whether `fd` is open and a pipe (FIFO); false when it cannot be examined.
pub(crate) fn is_pipe(fd: RawFd) -> bool {
    // SAFETY: `st` is plain data filled by the kernel.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: an integer descriptor (fstat fails cleanly on a closed one) and a valid pointer.
    let r = unsafe { libc::fstat(fd, &mut st) };
    r == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO
}

/// A close-on-exec duplicate of `fd` numbered `min` or above.
pub(crate) fn dup_above(fd: RawFd, min: RawFd) -> io::Result<RawFd> {
    // SAFETY: integer arguments.
    check(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, min) })
}

pub(crate) fn symlink(target: &CStr, link: &CStr) -> io::Result<()> {
    // SAFETY: NUL-terminated paths.
    check(unsafe { libc::symlink(target.as_ptr(), link.as_ptr()) }).map(drop)
}

/// `lstat`'s file type bits, or an error.
pub(crate) fn file_type(path: &CStr) -> io::Result<u32> {
    // SAFETY: `st` is plain data filled by the kernel; the path is NUL-terminated.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers for the duration of the call.
    check(unsafe { libc::lstat(path.as_ptr(), &mut st) })?;
    Ok(st.st_mode & libc::S_IFMT)
}

/// Opens, writes all of `data`, closes.
pub(crate) fn write_file(path: &CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: NUL-terminated path.
    let fd = check(unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) })?;
    let r = write_all(fd, data);
    close(fd);
    r
}

pub(crate) fn write_all(fd: RawFd, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        // SAFETY: `data` is a valid readable buffer of the given length.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        data = data.get(n as usize..).unwrap_or(&[]);
    }
    Ok(())
}

pub(crate) fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is a valid writable buffer of the given length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

pub(crate) fn close(fd: RawFd) {
    // SAFETY: closing a descriptor we own; errors are irrelevant here.
    unsafe { libc::close(fd) };
}

/// Closes every descriptor from `first` up.
pub(crate) fn close_from(first: u32) -> io::Result<()> {
    // SAFETY: close_range with integer arguments.
    check_long(unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0u32) }).map(drop)
}

pub(crate) fn dup2(from: RawFd, to: RawFd) -> io::Result<()> {
    // SAFETY: integer arguments.
    check(unsafe { libc::dup2(from, to) }).map(drop)
}

pub(crate) fn set_cloexec(fd: RawFd) -> io::Result<()> {
    // SAFETY: integer arguments.
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) }).map(drop)
}

/// A pipe, both ends close-on-exec: (read, write).
pub(crate) fn pipe() -> io::Result<(RawFd, RawFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` has room for two descriptors.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    Ok((fds[0], fds[1]))
}

pub(crate) fn execve(path: &CStr, argv: &[*const c_char], envp: &[*const c_char]) -> io::Error {
    // SAFETY: argv and envp are null-terminated arrays of pointers to NUL-terminated strings, all kept
    // alive by the caller; execve only returns on failure.
    unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    io::Error::last_os_error()
}

/// `waitpid`; returns (pid, raw status).
pub(crate) fn waitpid(pid: pid_t, flags: c_int) -> io::Result<(pid_t, c_int)> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, flags) };
        if r >= 0 {
            return Ok((r, status));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

pub(crate) fn kill(pid: pid_t, sig: c_int) -> io::Result<()> {
    // SAFETY: integer arguments.
    check(unsafe { libc::kill(pid, sig) }).map(drop)
}

pub(crate) fn pidfd_open(pid: pid_t) -> io::Result<RawFd> {
    // SAFETY: integer arguments.
    check_long(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) }).map(|fd| fd as RawFd)
}

/// `PIDFD_THREAD` (Linux 6.9): a pidfd for a thread that need not lead its thread group.
const PIDFD_THREAD: c_int = libc::O_EXCL;

/// A pidfd for any thread `tid`, with `PIDFD_THREAD` (Linux 6.9); EINVAL on older kernels.
pub(crate) fn pidfd_open_thread(tid: pid_t) -> io::Result<RawFd> {
    // SAFETY: integer arguments.
    check_long(unsafe { libc::syscall(libc::SYS_pidfd_open, tid, PIDFD_THREAD) })
        .map(|fd| fd as RawFd)
}

fn sigset(signals: &[c_int]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data, initialised by sigemptyset before use.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a sigset_t.
    unsafe { libc::sigemptyset(&mut set) };
    for s in signals {
        // SAFETY: valid pointer; signal numbers are constants.
        unsafe { libc::sigaddset(&mut set, *s) };
    }
    set
}

/// Blocks `signals` in this thread, returning the previous mask.
pub(crate) fn block_signals(signals: &[c_int]) -> io::Result<libc::sigset_t> {
    let set = sigset(signals);
    // SAFETY: sigset_t is plain data, filled by pthread_sigmask.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers.
    check(unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) })?;
    Ok(old)
}

pub(crate) fn set_signal_mask(mask: &libc::sigset_t) -> io::Result<()> {
    // SAFETY: valid pointer to an initialised sigset_t.
    check(unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, mask, std::ptr::null_mut()) }).map(drop)
}

/// A signalfd for `signals` (which must be blocked).
pub(crate) fn signalfd(signals: &[c_int]) -> io::Result<RawFd> {
    let set = sigset(signals);
    // SAFETY: valid pointer to an initialised set.
    check(unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) })
}

/// Resets every catchable signal to its default action (ignored signals survive `execve` otherwise; Rust
/// ignores SIGPIPE at startup).
pub(crate) fn reset_signal_dispositions() {
    for sig in 1..32 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: setting SIG_DFL is always valid for catchable signals.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
}

pub(crate) fn poll(fds: &mut [libc::pollfd], timeout_ms: c_int) -> io::Result<usize> {
    // SAFETY: `fds` is a valid array of pollfd of the given length.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(r as usize)
}

pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: integer arguments.
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    // SAFETY: integer arguments.
    check(unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) }).map(drop)
}

/// Fills `buf` from the kernel's random pool (`getrandom`, one system call where opening `/dev/urandom`
/// took four); left as it is if the call fails (the caller mixes in the time).
pub(crate) fn fill_random(buf: &mut [u8]) {
    // SAFETY: a writable buffer of the given length.
    let _ = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
}

/// The status flags of an open file (`F_GETFL`: the access mode, `O_APPEND`, `O_PATH`, ...); `None` when
/// it cannot be examined.
pub(crate) fn status_flags(fd: RawFd) -> Option<c_int> {
    // SAFETY: integer arguments.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    (flags >= 0).then_some(flags)
}

/// Whether `fd`'s open file description is non-blocking.
pub(crate) fn is_nonblocking(fd: RawFd) -> bool {
    status_flags(fd).is_some_and(|f| f & libc::O_NONBLOCK != 0)
}

pub(crate) fn setrlimit(resource: libc::__rlimit_resource_t, value: u64) -> io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: valid pointer to an rlimit.
    check(unsafe { libc::setrlimit(resource, &lim) }).map(drop)
}

/// Peak resident set of waited-for descendants, in bytes.
pub(crate) fn children_max_rss() -> u64 {
    // SAFETY: rusage is plain data filled by the kernel.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0;
    }
    (ru.ru_maxrss.max(0) as u64).saturating_mul(1024)
}

/// A TCP socket listening on 127.0.0.1:`port` in the current network namespace, close-on-exec.
/// Allocates nothing: the sandbox's init calls it.
pub(crate) fn loopback_listener(port: u16) -> io::Result<RawFd> {
    // SAFETY: plain socket call.
    let fd =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: sockaddr_in is plain data.
    let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    addr.sin_family = libc::AF_INET as libc::sa_family_t;
    addr.sin_port = port.to_be();
    addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
    // SAFETY: a valid sockaddr_in of the size given.
    let bound = check(unsafe {
        libc::bind(
            fd,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    })
    // SAFETY: plain listen call on the socket just bound.
    .and_then(|_| check(unsafe { libc::listen(fd, 1024) }));
    match bound {
        Ok(_) => Ok(fd),
        Err(e) => {
            close(fd);
            Err(e)
        }
    }
}

/// Brings the loopback interface up in the current network namespace.
pub(crate) fn loopback_up() -> io::Result<()> {
    // SAFETY: plain socket call.
    let fd =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: ifreq is plain data.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as c_char;
    }
    // SAFETY: valid ifreq pointer for SIOCGIFFLAGS.
    let r = check(unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) }).and_then(|_| {
        // SAFETY: reading and writing the flags member of the union that SIOCGIFFLAGS filled.
        unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
        // SAFETY: valid ifreq pointer for SIOCSIFFLAGS.
        check(unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) })
    });
    close(fd);
    r.map(drop)
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Clears the effective, permitted and inheritable capability sets of this thread.
pub(crate) fn clear_capabilities() -> io::Result<()> {
    let header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: header and a two-element data array as capset(2) requires for version 3.
    check_long(unsafe {
        libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr())
    })
    .map(drop)
}

/// This thread's capability sets (`capget`). Allocates nothing.
fn capabilities() -> io::Result<[CapData; 2]> {
    let header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: as clear_capabilities, with a writable data array.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_capget,
            &header as *const CapHeader,
            data.as_mut_ptr(),
        )
    })?;
    Ok(data)
}

/// Whether this thread has any capability in its effective set.
pub(crate) fn has_effective_capabilities() -> io::Result<bool> {
    Ok(capabilities()?
        .iter()
        .any(|d| d.effective != 0 || d.permitted != 0))
}

pub(crate) fn set_ids(uid: u32, gid: u32) -> io::Result<()> {
    let groups = [gid];
    // SAFETY: one valid gid_t.
    check(unsafe { libc::setgroups(1, groups.as_ptr()) })?;
    // SAFETY: integer arguments.
    check(unsafe { libc::setresgid(gid, gid, gid) })?;
    // SAFETY: integer arguments.
    check(unsafe { libc::setresuid(uid, uid, uid) }).map(drop)
}

pub(crate) fn geteuid() -> u32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::geteuid() }
}

pub(crate) fn getegid() -> u32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::getegid() }
}

/// Looks up a user by name: (uid, gid, home).
///
/// stockade is linked statically (.cargo/config.toml), and glibc's `getpwnam_r` in a static binary
/// `dlopen`s the NSS modules that `/etc/nsswitch.conf` names, which can crash it. So: `/etc/passwd` first,
/// then `getent passwd` (a dynamic program with the host's NSS: LDAP, sssd, systemd users) in its own process.
pub(crate) fn lookup_user(name: &str) -> Option<(u32, u32, std::path::PathBuf)> {
    // A name that could split a passwd line or pass as an option is nobody's.
    if name.is_empty() || name.starts_with('-') || name.contains([':', '\n', '\0']) {
        return None;
    }
    if let Some(found) = std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|text| text.lines().find_map(|line| passwd_entry(line, name)))
    {
        return Some(found);
    }
    let out = std::process::Command::new("getent")
        .args(["passwd", "--", name])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| passwd_entry(line, name))
}

/// One `passwd(5)` line, if it is `name`'s: `name:password:uid:gid:gecos:home:shell`.
pub(crate) fn passwd_entry(line: &str, name: &str) -> Option<(u32, u32, std::path::PathBuf)> {
    let mut fields = line.split(':');
    if fields.next()? != name {
        return None;
    }
    let _password = fields.next()?;
    let uid = fields.next()?.parse().ok()?;
    let gid = fields.next()?.parse().ok()?;
    let _gecos = fields.next()?;
    let home = fields.next()?;
    Some((uid, gid, std::path::PathBuf::from(home)))
}

/// The Landlock ABI version, or 0 when Landlock is unavailable.
pub(crate) fn landlock_abi_version() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: a null attribute with size 0 and the VERSION flag only queries the ABI.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if r < 0 { 0 } else { r as i32 }
}

/// Reads one `signalfd_siginfo` and returns the signal number.
pub(crate) fn read_signal(fd: RawFd) -> Option<u32> {
    // SAFETY: signalfd_siginfo is plain data.
    let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is a writable buffer of exactly the size passed.
    let n = unsafe {
        libc::read(
            fd,
            (&mut info as *mut libc::signalfd_siginfo).cast(),
            std::mem::size_of::<libc::signalfd_siginfo>(),
        )
    };
    if n as usize == std::mem::size_of::<libc::signalfd_siginfo>() {
        Some(info.ssi_signo)
    } else {
        None
    }
}

// ---- seccomp and the mediator (seccomp.rs, mediate.rs) ----

/// Installs `program` as this thread's seccomp filter (no-new-privs must be set) and returns the
/// listener descriptor for its `SECCOMP_RET_USER_NOTIF` answers. Allocates nothing.
pub(crate) fn seccomp_install_with_listener(program: &[libc::sock_filter]) -> io::Result<RawFd> {
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `prog` points at `program`, valid for the call; the kernel copies the filter.
    let fd = check_long(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    })?;
    Ok(fd as RawFd)
}

/// Most descriptors one message carries ([`send_fds`], [`recv_fds`]).
const MAX_PASSED_FDS: usize = 4;

/// Sends descriptors (at most four) over a Unix socket with one byte of data. Allocates nothing: it runs
/// in the sandbox's child processes.
pub(crate) fn send_fds(sock: RawFd, fds: &[RawFd]) -> io::Result<()> {
    let fds = fds.get(..fds.len().min(MAX_PASSED_FDS)).unwrap_or(&[]);
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // Room for one cmsghdr carrying up to four ints, suitably aligned.
    let mut control = [0u64; 6];
    let data_len = std::mem::size_of_val(fds) as u32;
    // SAFETY: msghdr is plain data; every pointer set below stays valid for the sendmsg call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is a pure computation.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(data_len) } as usize;
    // SAFETY: the control buffer is large enough for one header with four ints (CMSG_SPACE(16) = 32).
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(data_len) as usize;
        let data = libc::CMSG_DATA(cmsg).cast::<c_int>();
        for (i, fd) in fds.iter().enumerate() {
            std::ptr::write_unaligned(data.add(i), *fd);
        }
    }
    // SAFETY: a valid msghdr for the call. A receiver that is gone is an error (EPIPE), not a SIGPIPE.
    check_long(unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) } as libc::c_long).map(drop)
}

/// Receives the descriptors sent by [`send_fds`], close-on-exec; `None` at end of stream.
pub(crate) fn recv_fds(sock: RawFd) -> io::Result<Option<Vec<std::os::fd::OwnedFd>>> {
    use std::os::fd::FromRawFd;
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = [0u64; 6];
    // SAFETY: as in send_fds.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    let n = loop {
        // SAFETY: a valid msghdr whose buffers outlive the call.
        let r = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if r == -1 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        break check_long(r as libc::c_long)?;
    };
    if n == 0 {
        return Ok(None);
    }
    let mut out = Vec::new();
    // SAFETY: the kernel filled the control buffer; the header is checked before its data is read, and
    // the count of ints comes from the header's own length.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(io::Error::other("no descriptor in the message"));
        }
        let header = libc::CMSG_LEN(0) as usize;
        let count = ((*cmsg).cmsg_len.saturating_sub(header)) / std::mem::size_of::<c_int>();
        let data = libc::CMSG_DATA(cmsg).cast::<c_int>();
        for i in 0..count.min(MAX_PASSED_FDS) {
            let fd = std::ptr::read_unaligned(data.add(i));
            out.push(std::os::fd::OwnedFd::from_raw_fd(fd));
        }
    }
    Ok(Some(out))
}

/// A connected pair of close-on-exec Unix stream sockets.
pub(crate) fn socketpair() -> io::Result<(RawFd, RawFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: a two-element array for the kernel to fill.
    check(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    Ok((fds[0], fds[1]))
}

/// Waits for the next notification on a seccomp listener.
pub(crate) fn notif_recv(listener: RawFd) -> io::Result<libc::seccomp_notif> {
    // SAFETY: the kernel requires a zeroed struct and fills it.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a seccomp_notif for the RECV ioctl.
    check(unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut n) })?;
    Ok(n)
}

/// Answers notification `id`: `Ok(val)` returns `val`, `Err(errno)` fails the call with it.
pub(crate) fn notif_send(listener: RawFd, id: u64, result: Result<i64, i32>) -> io::Result<()> {
    let (val, error) = match result {
        Ok(v) => (v, 0),
        Err(e) => (0, -e),
    };
    let resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags: 0,
    };
    // SAFETY: a valid pointer to a seccomp_notif_resp for the SEND ioctl.
    check(unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &resp) }).map(drop)
}

/// Lets notification `id`'s system call proceed in the kernel, as the caller, with whatever arguments it
/// has now: only for calls whose every possible outcome the caller's Landlock domain and mounts already
/// decide (see `MountPlan::create_dirs`).
pub(crate) fn notif_continue(listener: RawFd, id: u64) -> io::Result<()> {
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
    };
    // SAFETY: a valid pointer to a seccomp_notif_resp for the SEND ioctl.
    check(unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &resp) }).map(drop)
}

/// `SECCOMP_IOCTL_NOTIF_SET_FLAGS` (`_IOW('!', 4, __u64)`) and its one flag, from Linux 6.6.
const SECCOMP_IOCTL_NOTIF_SET_FLAGS: libc::c_ulong = 0x4008_2104;
const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;

/// Asks the kernel to hand the CPU straight from a notifying process to the listener and back
/// (`SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`): without it each mediated call pays two cross-CPU wake-ups.
/// Older kernels refuse it; the mediator then works as before, only slower.
pub(crate) fn notif_sync_wake_up(listener: RawFd) -> io::Result<()> {
    // SAFETY: the ioctl takes its flags by value.
    check(unsafe {
        libc::ioctl(
            listener,
            SECCOMP_IOCTL_NOTIF_SET_FLAGS as _,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        )
    })
    .map(drop)
}

/// Whether notification `id` is still pending (its process has not died, its pid not been reused).
pub(crate) fn notif_id_valid(listener: RawFd, id: u64) -> bool {
    // SAFETY: a valid pointer to a u64 for the ID_VALID ioctl.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0 }
}

/// Installs `fd` in the notifying process and answers notification `id` with its number, in one step.
pub(crate) fn notif_addfd_send(
    listener: RawFd,
    id: u64,
    fd: RawFd,
    cloexec: bool,
) -> io::Result<()> {
    let addfd = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd: fd as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: a valid pointer to a seccomp_notif_addfd for the ADDFD ioctl.
    check(unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ADDFD, &addfd) }).map(drop)
}

/// Reads `buf.len()` bytes at `addr` in process `pid` (short at an unmapped page).
pub(crate) fn read_process_memory(pid: pid_t, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` describes `buf`, writable for its length; `remote` is only read by the kernel, in
    // the other process, and faults there are reported as a short count or EFAULT.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    check_long(n as libc::c_long).map(|n| n as usize)
}

/// A duplicate of process `pidfd`'s descriptor `fd` in this process (close-on-exec).
pub(crate) fn pidfd_getfd(pidfd: RawFd, fd: c_int) -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: integer arguments; the new descriptor is owned by the returned OwnedFd.
    let r = check_long(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) })?;
    Ok(owned(r))
}

/// Whether descriptor `mine` of this process (`me`) and process `pid`'s descriptor `theirs` are the same
/// open file (`kcmp(2)`, `KCMP_FILE`). Holding `mine` keeps that file alive, so equal means the same file
/// whatever has happened to `pid` since.
pub(crate) fn same_open_file(me: pid_t, mine: RawFd, pid: pid_t, theirs: c_int) -> bool {
    const KCMP_FILE: c_int = 0;
    // SAFETY: integer arguments.
    let r = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            me,
            pid,
            KCMP_FILE,
            mine as libc::c_ulong,
            theirs as libc::c_ulong,
        )
    };
    r == 0
}

/// `openat(2)`, returning an owned descriptor.
pub(crate) fn openat(
    dir: RawFd,
    path: &CStr,
    flags: c_int,
    mode: u32,
) -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: NUL-terminated path; the new descriptor is owned by the returned OwnedFd.
    let fd = check(unsafe { libc::openat(dir, path.as_ptr(), flags, mode) })?;
    Ok(owned(fd.into()))
}

/// `fstatat(2)` without following a final symlink: the file type bits, or the error.
pub(crate) fn lstat_at(dir: RawFd, name: &CStr) -> io::Result<u32> {
    // SAFETY: `st` is plain data filled by the kernel.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: NUL-terminated name and a valid out pointer.
    check(unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) })?;
    Ok(st.st_mode & libc::S_IFMT)
}

/// `openat2(dir, path, flags, mode)` refusing every symlink, magic link, mount crossing and escape from
/// `dir`: what it opens lies exactly at `dir/path` as written.
pub(crate) fn openat2_exact(
    dir: RawFd,
    path: &CStr,
    flags: c_int,
    mode: u32,
) -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: open_how is plain data.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    // openat2 refuses a mode without O_CREAT or O_TMPFILE.
    how.mode = if flags & libc::O_CREAT != 0 {
        u64::from(mode)
    } else {
        0
    };
    how.resolve = libc::RESOLVE_BENEATH
        | libc::RESOLVE_NO_SYMLINKS
        | libc::RESOLVE_NO_MAGICLINKS
        | libc::RESOLVE_NO_XDEV;
    openat2(dir, path, &how)
}

/// `openat2(2)`, returning an owned descriptor.
fn openat2(dir: RawFd, path: &CStr, how: &libc::open_how) -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: a NUL-terminated path and a valid open_how of the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            path.as_ptr(),
            how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    Ok(owned(check_long(fd)?))
}

/// `openat2(dir, path, flags)` following ordinary symlinks but refusing magic links (`/proc/<pid>/root`,
/// `fd/N`, ...) with `ELOOP`: the kernel's own walk, which then reaches only what any process with the
/// same root reaches by name.
pub(crate) fn openat2_no_magiclinks(
    dir: RawFd,
    path: &CStr,
    flags: c_int,
) -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: open_how is plain data.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = libc::RESOLVE_NO_MAGICLINKS;
    openat2(dir, path, &how)
}

/// What `statx` tells of an open descriptor in one call: its mount's id (as `mountinfo`'s first field),
/// device, inode and file type (`S_IFMT` bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileIds {
    pub mount: u64,
    pub dev: u64,
    pub ino: u64,
    pub kind: u32,
}

/// [`FileIds`] of an open descriptor (an `O_PATH` one will do).
pub(crate) fn file_ids(fd: RawFd) -> io::Result<FileIds> {
    // SAFETY: `stx` is plain data filled by the kernel.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: an empty NUL-terminated name with AT_EMPTY_PATH names `fd` itself; a valid out pointer.
    check(unsafe {
        libc::statx(
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_MNT_ID | libc::STATX_INO | libc::STATX_TYPE,
            &mut stx,
        )
    })?;
    if stx.stx_mask & libc::STATX_MNT_ID == 0 {
        return Err(io::Error::from_raw_os_error(libc::ENOSYS));
    }
    Ok(FileIds {
        mount: stx.stx_mnt_id,
        dev: libc::makedev(stx.stx_dev_major, stx.stx_dev_minor),
        ino: stx.stx_ino,
        kind: u32::from(stx.stx_mode) & libc::S_IFMT,
    })
}

/// `fstat(2)` of an open descriptor (an `O_PATH` one will do, a symlink's included).
pub(crate) fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: `st` is plain data filled by the kernel.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: an empty NUL-terminated name with AT_EMPTY_PATH names `fd` itself.
    check(unsafe { libc::fstatat(fd, c"".as_ptr(), &mut st, libc::AT_EMPTY_PATH) })?;
    Ok(st)
}

/// The file type (`S_IFMT` bits) of an open descriptor.
pub(crate) fn fstat_kind(fd: RawFd) -> io::Result<u32> {
    Ok(fstat(fd)?.st_mode & libc::S_IFMT)
}

/// The (device, inode) of an open descriptor.
pub(crate) fn fstat_identity(fd: RawFd) -> Option<(u64, u64)> {
    fstat(fd).ok().map(|st| (st.st_dev, st.st_ino))
}

/// Whether `fd` lies on a procfs.
pub(crate) fn is_procfs(fd: RawFd) -> io::Result<bool> {
    // SAFETY: `st` is plain data filled by the kernel.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and a pointer to a statfs.
    check(unsafe { libc::fstatfs(fd, &mut st) })?;
    Ok(st.f_type == libc::PROC_SUPER_MAGIC)
}

/// `readlinkat(2)` into a new buffer.
pub(crate) fn readlink_at(dir: RawFd, name: &CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: NUL-terminated name and a writable buffer of the given length.
    let n = unsafe { libc::readlinkat(dir, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    let n = check_long(n as libc::c_long)? as usize;
    buf.truncate(n);
    Ok(buf)
}

/// The mediator's operations on `(directory descriptor, name)`, each one system call.
pub(crate) fn mkdir_at(dir: RawFd, name: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: NUL-terminated name.
    check(unsafe { libc::mkdirat(dir, name.as_ptr(), mode) }).map(drop)
}

pub(crate) fn mknod_at(dir: RawFd, name: &CStr, mode: u32, dev: u64) -> io::Result<()> {
    // SAFETY: NUL-terminated name.
    check(unsafe { libc::mknodat(dir, name.as_ptr(), mode, dev) }).map(drop)
}

pub(crate) fn symlink_at(target: &CStr, dir: RawFd, name: &CStr) -> io::Result<()> {
    // SAFETY: NUL-terminated strings.
    check(unsafe { libc::symlinkat(target.as_ptr(), dir, name.as_ptr()) }).map(drop)
}

pub(crate) fn link_at(from_dir: RawFd, from: &CStr, to_dir: RawFd, to: &CStr) -> io::Result<()> {
    // SAFETY: NUL-terminated names.
    check(unsafe { libc::linkat(from_dir, from.as_ptr(), to_dir, to.as_ptr(), 0) }).map(drop)
}

pub(crate) fn rename_at(
    from_dir: RawFd,
    from: &CStr,
    to_dir: RawFd,
    to: &CStr,
    flags: u32,
) -> io::Result<()> {
    // SAFETY: NUL-terminated names; renameat2 through syscall(2) (glibc's wrapper needs 2.28).
    check_long(unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            from_dir,
            from.as_ptr(),
            to_dir,
            to.as_ptr(),
            flags,
        )
    })
    .map(drop)
}

/// `bind(2)` of `sock` to the Unix socket `name` in the calling thread's working directory.
pub(crate) fn bind_unix_relative(sock: RawFd, name: &[u8]) -> io::Result<()> {
    let (addr, len) = unix_address(name)?;
    // SAFETY: a valid sockaddr_un of `len` bytes.
    check(unsafe { libc::bind(sock, (&addr as *const libc::sockaddr_un).cast(), len) }).map(drop)
}

/// A `sockaddr_un` for a pathname, and its length.
fn unix_address(name: &[u8]) -> io::Result<(libc::sockaddr_un, u32)> {
    // SAFETY: sockaddr_un is plain data.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    if name.len() >= addr.sun_path.len() {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    for (d, s) in addr.sun_path.iter_mut().zip(name) {
        *d = *s as c_char;
    }
    Ok((
        addr,
        (std::mem::size_of::<libc::sa_family_t>() + name.len() + 1) as u32,
    ))
}

/// `unshare(flags)`: gives the calling thread, and no other, what `flags` name for its own: its working
/// directory, root and umask (`CLONE_FS`), a copy of the mount namespace (`CLONE_NEWNS`, which unshares
/// those too), a new network namespace (`CLONE_NEWNET`).
pub(crate) fn unshare(flags: c_int) -> io::Result<()> {
    // SAFETY: an integer argument; affects only the calling thread.
    check(unsafe { libc::unshare(flags) }).map(drop)
}

/// `connect(2)` of `sock` to the Unix socket `name` in the calling thread's working directory.
pub(crate) fn connect_unix_relative(sock: RawFd, name: &[u8]) -> io::Result<()> {
    let (addr, len) = unix_address(name)?;
    // SAFETY: a valid sockaddr_un of `len` bytes.
    check(unsafe { libc::connect(sock, (&addr as *const libc::sockaddr_un).cast(), len) }).map(drop)
}

/// `connect(2)` of `sock` to the raw address `addr` (any family).
pub(crate) fn connect_raw(sock: RawFd, addr: &[u8]) -> io::Result<()> {
    // SAFETY: `addr` is readable for its length; the kernel validates the contents.
    check(unsafe { libc::connect(sock, addr.as_ptr().cast(), addr.len() as u32) }).map(drop)
}

/// `fchdir(2)`.
pub(crate) fn fchdir(fd: RawFd) -> io::Result<()> {
    // SAFETY: integer argument.
    check(unsafe { libc::fchdir(fd) }).map(drop)
}

/// Sets this thread's umask, returning the previous one.
pub(crate) fn umask(mask: u32) -> u32 {
    // SAFETY: integer argument; with CLONE_FS unshared it affects only this thread.
    unsafe { libc::umask(mask) }
}

/// Sets this thread's filesystem uid and gid (the identity of files it creates and of its access checks).
pub(crate) fn set_fs_ids(uid: u32, gid: u32) {
    // SAFETY: integer arguments; setfsuid/setfsgid cannot fail in a way that needs handling here (they
    // return the previous value), and apply to the calling thread only.
    unsafe {
        libc::setfsgid(gid);
        libc::setfsuid(uid);
    }
}

/// Keeps only `keep` (capability numbers) in this thread's effective and permitted sets, and clears the
/// inheritable set: what is dropped cannot be raised again.
pub(crate) fn limit_capabilities(keep: &[u32]) -> io::Result<()> {
    let mut data = capabilities()?;
    let header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut effective = [0u32; 2];
    for &cap in keep {
        if let Some(word) = effective.get_mut((cap / 32) as usize) {
            *word |= 1 << (cap % 32);
        }
    }
    for (d, e) in data.iter_mut().zip(effective) {
        d.permitted &= e;
        d.effective = d.permitted;
        d.inheritable = 0;
    }
    // SAFETY: as clear_capabilities.
    check_long(unsafe {
        libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr())
    })
    .map(drop)
}

/// `fork()` through libc, which keeps the allocator usable in the child (the mediator allocates).
pub(crate) fn fork_process() -> io::Result<Option<pid_t>> {
    // SAFETY: fork(2) through glibc, whose atfork handlers reset its allocator's locks in the child; the
    // child runs only the mediator, a single thread, and ends with _exit.
    let pid = check(unsafe { libc::fork() })?;
    Ok(if pid == 0 { None } else { Some(pid) })
}

/// Waits until the child `pid` has exited, leaving it to be reaped (`waitid` with `WNOWAIT`).
#[cfg(test)]
pub(crate) fn wait_exited_unreaped(pid: pid_t) -> io::Result<()> {
    // SAFETY: a zeroed siginfo_t for the kernel to fill; integer arguments.
    check(unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        )
    })
    .map(drop)
}

/// `setns(2)` into the namespace `fd` of type `kind`.
pub(crate) fn setns(fd: RawFd, kind: c_int) -> io::Result<()> {
    // SAFETY: integer arguments; the caller is single-threaded where the kind requires it.
    check(unsafe { libc::setns(fd, kind) }).map(drop)
}

#[cfg(test)]
mod tests {
    use super::{dir_is_empty, lookup_user, passwd_entry};

    /// Only `.` and `..` make a directory empty, whatever the other names look like and however many of
    /// them a read returns.
    #[test]
    fn a_directory_is_empty_with_nothing_but_its_dots() {
        use std::os::fd::AsRawFd;
        let base =
            std::env::temp_dir().join(format!("stockade-empty-dir-test-{}", std::process::id()));
        let is_empty = |dir: &std::path::Path| {
            let fd = std::fs::File::open(dir).unwrap();
            dir_is_empty(fd.as_raw_fd()).unwrap()
        };
        for (name, entries) in [
            ("none", vec![]),
            ("dots", vec!["...".to_string()]),
            ("hidden", vec![".a".to_string()]),
            ("long", (0..40).map(|i| format!("{i:0>200}")).collect()),
        ] {
            let dir = base.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            for entry in &entries {
                std::fs::write(dir.join(entry), "").unwrap();
            }
            assert_eq!(is_empty(&dir), entries.is_empty(), "{name}");
        }
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn passwd_lines_are_read_by_field() {
        let line = "ada:x:1001:1002:Ada L,,,:/home/ada:/bin/bash";
        assert_eq!(
            passwd_entry(line, "ada"),
            Some((1001, 1002, "/home/ada".into()))
        );
        assert_eq!(passwd_entry(line, "ad"), None, "whole names only");
        assert_eq!(passwd_entry("ada:x:notanumber:1:::", "ada"), None);
        assert_eq!(passwd_entry("ada:x:1", "ada"), None, "a short line");
    }

    #[test]
    fn users_are_found_without_nss_in_process() {
        assert_eq!(
            lookup_user("root").map(|(uid, gid, _)| (uid, gid)),
            Some((0, 0))
        );
        assert_eq!(lookup_user("no-such-user-here"), None);
        for bad in ["", "-s", "root:x", "root\nx"] {
            assert_eq!(lookup_user(bad), None, "{bad:?}");
        }
    }
}
