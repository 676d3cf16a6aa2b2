//! The soft-lock protocol's operations on macOS: the shared POSIX
//! operations of [`swaplock_unix::soft`], with this system's pin, start
//! token, randomness and host name, as filelock computes them.

use rustix::fd::{AsRawFd, BorrowedFd};
use rustix::fs::OFlags;
use swaplock_core::host::{host_name as escape_host_name, HostName};
use swaplock_core::names::{NameCase, Token};
use swaplock_core::start::{darwin_start_token, StartToken};
use swaplock_core::{Decimal, Pid};
pub use swaplock_unix::soft::{current_pid, monotonic_now, open_dir, probe, Platform};

/// macOS, as a [`Platform`].
#[derive(Clone, Copy, Debug)]
pub struct MacOs;

impl Platform for MacOs {
    /// A non-blocking read-only open: there is no `O_PATH`, and
    /// `O_NONBLOCK` keeps a FIFO planted at the name from blocking the pin.
    const PIN_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK);
    const UNNAMED_FLAGS: Option<OFlags> = None;

    fn start_token(pid: Pid) -> Option<StartToken> {
        start_token(pid.get())
    }

    /// There are no PID namespaces.
    fn runs_elsewhere(_pid: Pid, _start: Decimal<'_>) -> bool {
        false
    }

    /// `arc4random_buf(16 bytes)`.
    fn token() -> Token {
        random_token()
    }

    /// `fpathconf(dir, _PC_CASE_SENSITIVE)`: 0 on a case-insensitive volume
    /// (APFS and HFS+ as macOS formats them by default); any other answer,
    /// an error included, is byte for byte.
    ///
    /// # References
    /// - [`pathconf(2)`](https://developer.apple.com/library/archive/documentation/System/Conceptual/ManPages_iPhoneOS/man2/pathconf.2.html)
    fn name_case(dir: BorrowedFd<'_>) -> NameCase {
        // SAFETY: fpathconf on an open descriptor.
        match unsafe { libc::fpathconf(dir.as_raw_fd(), libc::_PC_CASE_SENSITIVE) } {
            0 => NameCase::AsciiInsensitive,
            _ => NameCase::Exact,
        }
    }

    /// Not here: APFS's `renamex_np(RENAME_EXCL)` would serve, but no test
    /// on this system shows it, so a marker is linked from nothing here
    /// and created by name (PROTOCOL 7.2 step 4).
    fn exclusive_rename(_dir: BorrowedFd<'_>) -> swaplock_core::fs::ExclusiveRename {
        swaplock_core::fs::ExclusiveRename::Untrusted
    }

    /// Not asked for here (no exclusive rename is trusted).
    fn sync_filesystem(_fd: BorrowedFd<'_>) -> Result<(), swaplock_core::Errno> {
        Err(swaplock_core::Errno::OPNOTSUPP)
    }
}

/// The soft-lock operations on one directory, on macOS.
pub type MacOsOs<'d> = swaplock_unix::soft::UnixOs<'d, MacOs>;

/// The soft-lock operations on one directory, on this system.
pub type SoftOs<'d> = MacOsOs<'d>;

/// The read-write lock's files (`swaplock_unix::rw`) on this system.
pub type RwFiles = swaplock_unix::rw::RwFiles<MacOs>;

/// `arc4random_buf(16 bytes)` — 128 bits for a derived name or a lease
/// token. It cannot fail.
///
/// # References
/// - [`arc4random(3)`](https://developer.apple.com/library/archive/documentation/System/Conceptual/ManPages_iPhoneOS/man3/arc4random.3.html)
pub fn random_token() -> Token {
    let mut bytes = [0u8; 16];
    // SAFETY: the pointer and length describe `bytes`, which is writable
    // for the whole call.
    unsafe { libc::arc4random_buf(bytes.as_mut_ptr().cast(), bytes.len()) };
    Token(bytes)
}

/// This host's name as records carry it: `uname().nodename` (the
/// `gethostname` value) escaped; macOS has no PID namespaces, so no suffix.
pub fn host_name() -> HostName {
    let uname = rustix::system::uname();
    escape_host_name(uname.nodename().to_bytes(), None)
}

/// The start token of process `pid`: `sysctl({CTL_KERN, KERN_PROC,
/// KERN_PROC_PID, pid})` into a stack buffer, read by the core; `None` when
/// the process is gone or the call fails.
///
/// # References
/// - [`sysctl(3)`](https://developer.apple.com/library/archive/documentation/System/Conceptual/ManPages_iPhoneOS/man3/sysctl.3.html)
pub fn start_token(pid: u32) -> Option<StartToken> {
    let mut mib = [
        libc::CTL_KERN,
        libc::KERN_PROC,
        libc::KERN_PROC_PID,
        libc::c_int::try_from(pid).ok()?,
    ];
    // A `struct kinfo_proc` is 648 bytes on 64-bit macOS.
    let mut buf = [0u8; 1024];
    let mut len: libc::size_t = buf.len();
    // SAFETY: `mib` holds 4 ints; `buf` is writable for `len` bytes and
    // `len` is a valid in-out size; no new value is set.
    let r = unsafe {
        libc::sysctl(
            mib.as_mut_ptr(),
            mib.len() as libc::c_uint,
            buf.as_mut_ptr().cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if r != 0 {
        return None;
    }
    darwin_start_token(buf.get(..len)?)
}
