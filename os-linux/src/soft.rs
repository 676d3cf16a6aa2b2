//! The soft-lock protocol's operations on Linux and Android: the shared
//! POSIX operations of [`swaplock_unix::soft`], with this system's pin
//! (`O_PATH`), start token (`/proc`), randomness (`getrandom`) and host
//! name (with the PID namespace), as filelock computes them.

// `stat` field types differ between targets (and between rustix's raw and
// libc backends); the casts widen where needed and are no-ops elsewhere.
#![allow(clippy::unnecessary_cast, clippy::useless_conversion)]

use crate::proc::{read_start_token, starttime_unshifted};
use rustix::fd::BorrowedFd;
use rustix::fs::OFlags;
use std::sync::Mutex;
use swaplock_core::host::{host_name as escape_host_name, HostName};
use swaplock_core::names::{NameCase, Token};
use swaplock_core::start::StartToken;
use swaplock_core::{Decimal, Pid};
pub use swaplock_unix::soft::{current_pid, monotonic_now, open_dir, probe, Platform};

/// Linux and Android, as a [`Platform`].
#[derive(Clone, Copy, Debug)]
pub struct Linux;

impl Platform for Linux {
    /// `O_PATH`: the pin holds the inode without opening the file for I/O.
    const PIN_FLAGS: OFlags = OFlags::PATH;
    const UNNAMED_FLAGS: Option<OFlags> = Some(OFlags::TMPFILE);

    fn start_token(pid: Pid) -> Option<StartToken> {
        start_token(pid.get())
    }

    fn runs_elsewhere(pid: Pid, start: Decimal<'_>) -> bool {
        crate::elsewhere::runs_elsewhere(pid, start)
    }

    /// `getrandom(16 bytes)`.
    fn token() -> Token {
        random_token()
    }

    /// `fstatfs(dir)`: the filesystem's type, judged by the core.
    fn exclusive_rename(dir: BorrowedFd<'_>) -> swaplock_core::fs::ExclusiveRename {
        match rustix::fs::fstatfs(dir) {
            Ok(fs) => swaplock_core::fs::exclusive_rename(crate::fs::f_type(&fs)),
            Err(_) => swaplock_core::fs::ExclusiveRename::Untrusted,
        }
    }

    /// `syncfs(fd)`.
    fn sync_filesystem(fd: BorrowedFd<'_>) -> Result<(), swaplock_core::Errno> {
        rustix::fs::syncfs(fd).map_err(|e| swaplock_core::Errno::from_raw(e.raw_os_error()))
    }

    /// `ioctl(dir, FS_IOC_GETFLAGS)`: a directory with `FS_CASEFOLD_FL`
    /// (ext4 or f2fs casefolding, as Android keeps its shared storage)
    /// looks names up without regard to case; any other answer, an error
    /// included, is byte for byte.
    ///
    /// # References
    /// - [`ioctl_iflags(2)`](https://man7.org/linux/man-pages/man2/ioctl_iflags.2.html)
    /// - Linux `Documentation/filesystems/ext4/directory.rst` (casefolding)
    fn name_case(dir: BorrowedFd<'_>) -> NameCase {
        const FS_CASEFOLD_FL: u32 = 0x4000_0000;
        match rustix::fs::ioctl_getflags(dir) {
            Ok(flags) if flags.bits() & FS_CASEFOLD_FL != 0 => NameCase::AsciiInsensitive,
            _ => NameCase::Exact,
        }
    }
}

/// The soft-lock operations on one directory, on Linux and Android.
pub type LinuxOs<'d> = swaplock_unix::soft::UnixOs<'d, Linux>;

/// The soft-lock operations on one directory, on this system.
pub type SoftOs<'d> = LinuxOs<'d>;

/// The read-write lock's files (`swaplock_unix::rw`) on this system.
pub type RwFiles = swaplock_unix::rw::RwFiles<Linux>;

/// `getrandom(16 bytes)` — 128 bits for a derived name or a lease token;
/// where the kernel has no `getrandom` (before Linux 3.17, as on many
/// Android 5-7 devices: `ENOSYS`) or a seccomp policy refuses it (`EPERM`),
/// the same bytes from `/dev/urandom`, as bionic's `getentropy` falls back.
///
/// # Panics
/// When neither source answers: the process must not publish guessable
/// names (invariant I13).
///
/// # References
/// - [`getrandom(2)`](https://man7.org/linux/man-pages/man2/getrandom.2.html)
/// - [`random(4)`](https://man7.org/linux/man-pages/man4/random.4.html)
pub fn random_token() -> Token {
    let mut bytes = [0u8; 16];
    let mut filled = 0;
    while filled < bytes.len() {
        match rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => {
                return Token(
                    urandom().unwrap_or_else(|e| {
                        panic!("neither getrandom nor /dev/urandom answers: {e}")
                    }),
                )
            }
            // The kernel's random source does not fail once it is seeded; if
            // it ever does, the process must not publish guessable names.
            Err(e) => panic!("getrandom failed: {e}"),
        }
    }
    Token(bytes)
}

/// 16 bytes read from `/dev/urandom`.
fn urandom() -> Result<[u8; 16], rustix::io::Errno> {
    let fd = rustix::fs::open(
        "/dev/urandom",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let mut bytes = [0u8; 16];
    let mut filled = 0;
    while filled < bytes.len() {
        match rustix::io::read(&fd, &mut bytes[filled..]) {
            Ok(0) => return Err(rustix::io::Errno::IO),
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(bytes)
}

/// This host's name as records carry it: `uname().nodename` escaped, with
/// the PID namespace's inode (of `/proc/self/ns/pid`).
pub fn host_name() -> HostName {
    let uname = rustix::system::uname();
    escape_host_name(
        uname.nodename().to_bytes(),
        crate::proc::own_pid_namespace(),
    )
}

/// This process's own start token, computed once per process and time
/// namespace: the token depends on the process (a forked child starts
/// later) and on the time namespace it runs in (a boot-time offset makes
/// it unknowable, PROTOCOL 4.2), which `setns` can change; so each call
/// still looks at the time namespace (one `readlink`), and recomputes when
/// it or the process ([`crate::fork`]) differs. The cache is only tried
/// (`try_lock`): a thread that forked while another held it leaves the
/// child computing afresh.
fn own_start_token(pid: u32) -> Option<StartToken> {
    /// (PID and forks counted, time namespace inode or `None` where there
    /// are none, token): a child given the PID of an ancestor that has
    /// exited must not write that ancestor's token ([`crate::fork`]).
    type Own = ((u32, u32), Option<u64>, Option<StartToken>);
    static CACHED: Mutex<Option<Own>> = Mutex::new(None);
    let time_ns = match crate::proc::ns_inode(c"/proc/self/ns/time") {
        Ok(ino) => Some(ino),
        Err(rustix::io::Errno::NOENT) => None,
        Err(_) => return compute_start_token(pid),
    };
    let me = (pid, crate::fork::forks());
    if let Ok(cached) = CACHED.try_lock() {
        if let Some((p, ns, token)) = *cached {
            if p == me && ns == time_ns {
                return token;
            }
        }
    }
    let token = compute_start_token(pid);
    if let Ok(mut cached) = CACHED.try_lock() {
        *cached = Some((me, time_ns, token));
    }
    token
}

fn compute_start_token(pid: u32) -> Option<StartToken> {
    if starttime_unshifted() {
        read_start_token(u64::from(pid))
    } else {
        None
    }
}

/// The start token of process `pid`, exactly as filelock computes it, or
/// `None` when it cannot be (the process is gone, or this process runs in
/// a time namespace with a boot-time offset).
pub fn start_token(pid: u32) -> Option<StartToken> {
    if pid == rustix::process::getpid().as_raw_nonzero().get() as u32 {
        return own_start_token(pid);
    }
    compute_start_token(pid)
}
