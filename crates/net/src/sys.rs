//! The host's own interface addresses, the pipes and `splice` calls of the tunnels, and the wait for a
//! proxy's first connection; the only module with `unsafe`.
#![allow(
    unsafe_code,
    reason = "getifaddrs, pipe2, splice and poll have no std equivalent; each block documents why it is sound"
)]

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Every address configured on one of this host's interfaces (in the supervisor's network namespace),
/// whatever its range: a connection to any of them reaches services bound to `0.0.0.0` here.
pub(crate) fn host_addresses() -> io::Result<Vec<IpAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list it allocates; it is freed below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } == -1 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed; `ifa_addr` may be null
        // and is checked, and its family says which sockaddr it points to.
        unsafe {
            let addr = (*cur).ifa_addr;
            if !addr.is_null() {
                match i32::from((*addr).sa_family) {
                    libc::AF_INET => {
                        let v4 = &*addr.cast::<libc::sockaddr_in>();
                        out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr))));
                    }
                    libc::AF_INET6 => {
                        let v6 = &*addr.cast::<libc::sockaddr_in6>();
                        out.push(IpAddr::V6(Ipv6Addr::from(v6.sin6_addr.s6_addr)));
                    }
                    _ => {}
                }
            }
            cur = (*cur).ifa_next;
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once; nothing points into it any more.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// A pipe for [`splice`], both ends non-blocking, enlarged to 1 MiB where the system allows (fewer
/// calls per megabyte; the default 64 KiB is kept otherwise).
pub(crate) fn splice_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`, which has room for exactly two.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made by pipe2 and belong to nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: F_SETPIPE_SZ takes an int and touches no memory of ours; a refusal leaves the pipe as it was.
    unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
    Ok((read, write))
}

/// One non-blocking `splice(2)` of up to `len` bytes from `from` to `to` (one of them a pipe): the
/// bytes move inside the kernel, never through this process's memory.
pub(crate) fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: null offsets splice at the descriptors' own positions; no memory of ours is involved.
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Shuts down the sending side of a socket (a peer that is already gone is not an error).
pub(crate) fn shutdown_write(socket: RawFd) -> io::Result<()> {
    // SAFETY: shutdown takes a descriptor and a constant; no memory of ours is involved.
    if unsafe { libc::shutdown(socket, libc::SHUT_WR) } == -1 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ENOTCONN) {
            return Err(e);
        }
    }
    Ok(())
}

/// Waits until `listener` has a connection to accept (`true`) or `stop` is readable or closed (`false`).
pub(crate) fn wait_for_connection(listener: RawFd, stop: RawFd) -> io::Result<bool> {
    let mut fds = [
        libc::pollfd {
            fd: listener,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: stop,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: `fds` is a valid array of two pollfd for the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if fds[1].revents != 0 {
            return Ok(false);
        }
        if fds[0].revents & libc::POLLIN != 0 {
            return Ok(true);
        }
        if fds[0].revents != 0 {
            return Err(io::Error::other("the proxy's listener failed"));
        }
    }
}
