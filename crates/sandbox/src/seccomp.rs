//! The seccomp filter every confined program runs under.
//!
//! Three kinds of system calls are stopped before the kernel acts on them:
//!
//! - **Refused outright**: the kernel keyrings (`keyctl`, `add_key`, `request_key`), which a process
//!   shares with its user across namespaces; `io_uring`, whose operations open and connect without passing
//!   through this filter; `openat2`, whose flags live in memory the filter cannot read (libc falls back to
//!   `openat`); Unix datagram sockets, which send to a path per message without a `connect` to mediate;
//!   and every foreign system call ABI (x32, i386), which would bypass the numbers below.
//! - **Handed to the supervisor** (`SECCOMP_RET_USER_NOTIF`, see `mediate.rs`): everything that gives a
//!   name to a new file (`open`/`openat` with `O_CREAT`, `creat`, `mkdir`, `mknod`, `rename`, `link`,
//!   `symlink` and their `*at` forms), every `connect` and every `bind` (a Unix socket's name is a file); and `umask`, which only tells the supervisor that its record of umasks is stale. Landlock grants by directory, so it cannot say
//!   "`src/new.ts` but not `src/new.js`", nor "anything but `.mcp.json`", and it has no right for
//!   connecting to a pathname socket. The supervisor checks the policy and performs the call itself.
//! - Everything else is allowed, and still confined by Landlock and the mount namespace.
//!
//! The filter is built by hand (a few dozen BPF instructions) rather than with a filter compiler: every
//! jump is forward and local to one system call's block.

use libc::sock_filter;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7; // AUDIT_ARCH_AARCH64

/// x86_64's x32 ABI numbers carry this bit; they would otherwise reach the same calls unfiltered.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const RET_NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;
const RET_KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

const fn ret_errno(errno: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (errno as u32 & libc::SECCOMP_RET_DATA)
}

/// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
/// The low 32 bits of argument `i` (both supported architectures are little-endian).
const fn arg(i: u32) -> u32 {
    16 + 8 * i
}

const fn load(offset: u32) -> sock_filter {
    stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, offset)
}

const fn ret(value: u32) -> sock_filter {
    stmt(libc::BPF_RET | libc::BPF_K, value)
}

const fn stmt(code: u32, k: u32) -> sock_filter {
    sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(op: u32, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter {
        code: (libc::BPF_JMP | op | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

/// System calls refused with `EPERM`: the kernel keyrings.
const KEYRING: &[libc::c_long] = &[libc::SYS_keyctl, libc::SYS_add_key, libc::SYS_request_key];

/// System calls refused with `ENOSYS`, as on a kernel without them: callers fall back to calls this
/// filter can see.
const UNSEEABLE: &[libc::c_long] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_openat2,
];

/// System calls that always go to the supervisor.
#[cfg(target_arch = "x86_64")]
pub(crate) const MEDIATED: &[libc::c_long] = &[
    libc::SYS_creat,
    libc::SYS_mkdir,
    libc::SYS_mkdirat,
    libc::SYS_mknod,
    libc::SYS_mknodat,
    libc::SYS_rename,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_link,
    libc::SYS_linkat,
    libc::SYS_symlink,
    libc::SYS_symlinkat,
    libc::SYS_connect,
    libc::SYS_bind,
    libc::SYS_umask,
];
#[cfg(target_arch = "aarch64")]
pub(crate) const MEDIATED: &[libc::c_long] = &[
    libc::SYS_mkdirat,
    libc::SYS_mknodat,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_linkat,
    libc::SYS_symlinkat,
    libc::SYS_connect,
    libc::SYS_bind,
    libc::SYS_umask,
];

/// The filter, as BPF instructions.
pub(crate) fn program() -> Vec<sock_filter> {
    let mut p = vec![
        load(ARCH),
        jump(libc::BPF_JEQ, AUDIT_ARCH, 1, 0),
        ret(RET_KILL),
        load(NR),
        jump(libc::BPF_JGE, X32_SYSCALL_BIT, 0, 1),
        ret(RET_KILL),
    ];
    // Each block starts with the number in the accumulator and either returns or falls through to the
    // next block with the number still there.
    let simple = |p: &mut Vec<sock_filter>, nr: libc::c_long, action: u32| {
        p.push(jump(libc::BPF_JEQ, nr as u32, 0, 1));
        p.push(ret(action));
    };
    for &nr in KEYRING {
        simple(&mut p, nr, ret_errno(libc::EPERM));
    }
    for &nr in UNSEEABLE {
        simple(&mut p, nr, ret_errno(libc::ENOSYS));
    }
    for &nr in MEDIATED {
        simple(&mut p, nr, RET_NOTIFY);
    }
    // open/openat: only with O_CREAT (the flags are in a register, so the filter can read them).
    #[cfg(target_arch = "x86_64")]
    let opens: &[(libc::c_long, u32)] = &[(libc::SYS_open, 1), (libc::SYS_openat, 2)];
    #[cfg(target_arch = "aarch64")]
    let opens: &[(libc::c_long, u32)] = &[(libc::SYS_openat, 2)];
    for &(nr, flags) in opens {
        p.extend([
            jump(libc::BPF_JEQ, nr as u32, 0, 4),
            load(arg(flags)),
            jump(libc::BPF_JSET, libc::O_CREAT as u32, 0, 1),
            ret(RET_NOTIFY),
            ret(RET_ALLOW),
        ]);
    }
    // socket/socketpair(AF_UNIX, SOCK_DGRAM): refused (sendto/sendmsg to a path cannot be mediated).
    for nr in [libc::SYS_socket, libc::SYS_socketpair] {
        p.extend([
            jump(libc::BPF_JEQ, nr as u32, 0, 7),
            load(arg(0)),
            jump(libc::BPF_JEQ, libc::AF_UNIX as u32, 0, 4),
            load(arg(1)),
            stmt(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K, 0xf),
            jump(libc::BPF_JEQ, libc::SOCK_DGRAM as u32, 0, 1),
            ret(ret_errno(libc::EACCES)),
            ret(RET_ALLOW),
        ]);
    }
    p.push(ret(RET_ALLOW));
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny BPF interpreter for the instructions `program` uses, to check the filter's decisions
    /// without installing it.
    fn run(p: &[sock_filter], nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = p[pc];
            let code = i.code as u32;
            pc += 1;
            match code {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    let o = i.k as usize;
                    acc = u32::from_le_bytes(data[o..o + 4].try_into().unwrap());
                }
                c if c == libc::BPF_RET | libc::BPF_K => return i.k,
                c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => acc &= i.k,
                c => {
                    let taken = match c & 0xf0 {
                        x if x == libc::BPF_JEQ => acc == i.k,
                        x if x == libc::BPF_JGE => acc >= i.k,
                        x if x == libc::BPF_JSET => acc & i.k != 0,
                        _ => panic!("unexpected instruction {code:#x}"),
                    };
                    pc += if taken { i.jt } else { i.jf } as usize;
                }
            }
        }
    }

    #[test]
    fn the_filter_sorts_calls_as_documented() {
        let p = program();
        let call = |nr: libc::c_long, args: [u64; 6]| run(&p, nr as u32, AUDIT_ARCH, args);
        let none = [0u64; 6];
        assert_eq!(call(libc::SYS_read, none), RET_ALLOW);
        assert_eq!(call(libc::SYS_keyctl, none), ret_errno(libc::EPERM));
        assert_eq!(
            call(libc::SYS_io_uring_setup, none),
            ret_errno(libc::ENOSYS)
        );
        assert_eq!(call(libc::SYS_openat2, none), ret_errno(libc::ENOSYS));
        assert_eq!(call(libc::SYS_mkdirat, none), RET_NOTIFY);
        assert_eq!(call(libc::SYS_connect, none), RET_NOTIFY);
        let creat = libc::O_CREAT as u64 | libc::O_WRONLY as u64;
        assert_eq!(call(libc::SYS_openat, [0, 0, creat, 0, 0, 0]), RET_NOTIFY);
        assert_eq!(
            call(libc::SYS_openat, [0, 0, libc::O_RDONLY as u64, 0, 0, 0]),
            RET_ALLOW
        );
        // The flags' high bits are not O_CREAT: only the low word is read.
        assert_eq!(call(libc::SYS_openat, [0, 0, 1 << 40, 0, 0, 0]), RET_ALLOW);
        let unix = libc::AF_UNIX as u64;
        let dgram = (libc::SOCK_DGRAM | libc::SOCK_CLOEXEC) as u64;
        assert_eq!(
            call(libc::SYS_socket, [unix, dgram, 0, 0, 0, 0]),
            ret_errno(libc::EACCES)
        );
        assert_eq!(
            call(libc::SYS_socketpair, [unix, dgram, 0, 0, 0, 0]),
            ret_errno(libc::EACCES)
        );
        assert_eq!(
            call(
                libc::SYS_socket,
                [unix, libc::SOCK_STREAM as u64, 0, 0, 0, 0]
            ),
            RET_ALLOW
        );
        assert_eq!(
            call(libc::SYS_socket, [libc::AF_INET as u64, dgram, 0, 0, 0, 0]),
            RET_ALLOW
        );
        // Another ABI, or the x32 numbers, end the process.
        assert_eq!(run(&p, 0, 0x4000_0003, none), RET_KILL);
        assert_eq!(
            run(
                &p,
                libc::SYS_read as u32 | X32_SYSCALL_BIT,
                AUDIT_ARCH,
                none
            ),
            RET_KILL
        );
    }
}
