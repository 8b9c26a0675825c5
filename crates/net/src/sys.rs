//! The host's own interface addresses; the only module with `unsafe`.
#![allow(
    unsafe_code,
    reason = "getifaddrs has no std equivalent; the block documents why it is sound"
)]

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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
