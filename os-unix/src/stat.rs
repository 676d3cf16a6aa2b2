//! `fstat` and `fstatat` as each system allows them.
//!
//! On 32-bit Android, rustix routes every stat through `statx` (for
//! timestamps past 2038), and bionic exports `statx` only from API 30, so
//! rustix makes the raw syscall, which the app seccomp policy of Android
//! 8.0 to 10 does not allow: the filter answers `SECCOMP_RET_TRAP`, and the
//! process dies of `SIGSYS` instead of seeing `ENOSYS` (rustix's fallback
//! never runs). This covers 32-bit apps on 64-bit devices too. There, the
//! calls go to bionic's own `fstat` and `fstatat`, which make the
//! `fstat64` and `fstatat64` syscalls every Android release allows; their
//! `struct stat` carries 32-bit seconds, as all of 32-bit Android's
//! userspace does. Everywhere else rustix's calls are used as they are.
//!
//! # References
//! - bionic `libc/SYSCALLS.TXT` (`fstat64`, `fstatat64` on LP32) and
//!   `libc/bionic/statx.cpp` (API 30)
//! - Android's app seccomp policy: `bionic/libc/SECCOMP_ALLOWLIST_APP.TXT`
//!   and `SECCOMP_BLOCKLIST_APP.TXT`, `statx` allowed from Android 11
//! - rustix 1.1 `src/backend/libc/fs/syscalls.rs`: `fstat` and `statat`
//!   call `statx` first where `target_pointer_width = "32"`

use rustix::fd::BorrowedFd;
use rustix::fs::AtFlags;
use std::ffi::CStr;

#[cfg(not(all(target_os = "android", target_pointer_width = "32")))]
mod imp {
    use super::{AtFlags, BorrowedFd, CStr};

    /// What a stat returns here.
    pub type RawStat = rustix::fs::Stat;

    pub(super) fn fstat(fd: BorrowedFd<'_>) -> rustix::io::Result<RawStat> {
        rustix::fs::fstat(fd)
    }

    pub(super) fn statat(
        dir: BorrowedFd<'_>,
        name: &CStr,
        flags: AtFlags,
    ) -> rustix::io::Result<RawStat> {
        rustix::fs::statat(dir, name, flags)
    }
}

#[cfg(all(target_os = "android", target_pointer_width = "32"))]
mod imp {
    use super::{AtFlags, BorrowedFd, CStr};
    use core::mem::MaybeUninit;
    use rustix::fd::AsRawFd;

    /// What a stat returns here: bionic's `struct stat` (`stat64` is its
    /// synonym on LP32).
    pub type RawStat = libc::stat;

    fn answer(ret: libc::c_int, st: MaybeUninit<libc::stat>) -> rustix::io::Result<RawStat> {
        if ret != 0 {
            let raw = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO);
            return Err(rustix::io::Errno::from_raw_os_error(raw));
        }
        // SAFETY: the call succeeded, so it filled the buffer.
        Ok(unsafe { st.assume_init() })
    }

    pub(super) fn fstat(fd: BorrowedFd<'_>) -> rustix::io::Result<RawStat> {
        let mut st = MaybeUninit::<libc::stat>::uninit();
        // SAFETY: a valid descriptor and a buffer of the right type.
        let ret = unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) };
        answer(ret, st)
    }

    pub(super) fn statat(
        dir: BorrowedFd<'_>,
        name: &CStr,
        flags: AtFlags,
    ) -> rustix::io::Result<RawStat> {
        let mut st = MaybeUninit::<libc::stat>::uninit();
        // SAFETY: a valid descriptor, a NUL-terminated name, and a buffer
        // of the right type.
        let ret = unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                name.as_ptr(),
                st.as_mut_ptr(),
                flags.bits() as libc::c_int,
            )
        };
        answer(ret, st)
    }
}

pub use imp::RawStat;

/// `fstat(fd)`.
pub fn fstat(fd: BorrowedFd<'_>) -> rustix::io::Result<RawStat> {
    imp::fstat(fd)
}

/// `fstatat(dir, name, flags)`.
pub fn statat(dir: BorrowedFd<'_>, name: &CStr, flags: AtFlags) -> rustix::io::Result<RawStat> {
    imp::statat(dir, name, flags)
}

/// `stat(path)`, or `lstat(path)` without `follow`.
pub fn stat_path(path: &CStr, follow: bool) -> rustix::io::Result<RawStat> {
    let flags = if follow {
        AtFlags::empty()
    } else {
        AtFlags::SYMLINK_NOFOLLOW
    };
    imp::statat(rustix::fs::CWD, path, flags)
}
