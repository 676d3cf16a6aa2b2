//! The strict lock's system calls beyond the soft locks' ([`crate::soft`]):
//! its directories (made, opened without following, owned and moded),
//! the no-replace hard link that publishes every name, and `fsync`. Each
//! is one forward; the decisions are `swaplock_core::strict`'s.

// `stat` field types differ between targets; the casts widen where needed.
#![allow(clippy::unnecessary_cast, clippy::useless_conversion)]

use crate::soft::{c_name, with_name};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags};
use std::ffi::CStr;
use swaplock_core::Errno;

fn errno(e: rustix::io::Errno) -> Errno {
    Errno::from_raw(e.raw_os_error())
}
/// `mkdirat(dir, name, mode)` — makes a directory (the umask applies).
///
/// # References
/// - [`mkdir(2)`](https://man7.org/linux/man-pages/man2/mkdir.2.html)
pub fn mkdir_at(dir: impl AsFd, name: &[u8], mode: u32) -> Result<(), Errno> {
    let mode = crate::soft::permissions(mode);
    with_name(name, |c| rustix::fs::mkdirat(dir.as_fd(), c, mode))
}

/// `openat(dir, name, O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC)` — opens
/// a directory below `dir`, refusing a symlink in its place (`ELOOP`, or
/// `ENOTDIR`).
///
/// # References
/// - [`open(2)`](https://man7.org/linux/man-pages/man2/open.2.html)
pub fn open_dir_at(dir: impl AsFd, name: &[u8]) -> Result<OwnedFd, Errno> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    with_name(name, |c| {
        rustix::fs::openat(dir.as_fd(), c, flags, Mode::empty())
    })
}

/// Who owns a file and its mode, from `fstat(fd)`: `(st_uid, st_mode)`.
///
/// # References
/// - [`fstat(2)`](https://man7.org/linux/man-pages/man2/fstat.2.html)
pub fn owner_and_mode(fd: impl AsFd) -> Result<(u32, u32), Errno> {
    let st = crate::stat::fstat(fd.as_fd()).map_err(errno)?;
    Ok((st.st_uid as u32, st.st_mode as u32))
}

/// `geteuid()` — the account this process acts as.
///
/// # References
/// - [`geteuid(2)`](https://man7.org/linux/man-pages/man2/geteuid.2.html)
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw() as u32
}

/// `linkat(dir, from, dir, to, 0)` — a second name for a file, never
/// replacing one (`EEXIST`), and never following a symlink at `from`.
///
/// # References
/// - [`link(2)`](https://man7.org/linux/man-pages/man2/link.2.html)
pub fn link_at(dir: impl AsFd, from: &[u8], to: &[u8]) -> Result<(), Errno> {
    let dir = dir.as_fd();
    let from = c_name(from)?;
    let from = CStr::from_bytes_with_nul(&from).map_err(|_| Errno::INVAL)?;
    with_name(to, |to| {
        rustix::fs::linkat(dir, from, dir, to, AtFlags::empty())
    })
}

/// `fsync(fd)` — the file's data and size on stable storage.
///
/// # References
/// - [`fsync(2)`](https://man7.org/linux/man-pages/man2/fsync.2.html)
pub fn fsync(fd: impl AsFd) -> Result<(), Errno> {
    rustix::fs::fsync(fd).map_err(errno)
}
