//! The strict lock's system calls beyond the soft locks' ([`crate::soft`]):
//! its directories (made, opened without following a symlink, their owner
//! and mode), the no-replace hard link that publishes every name, and
//! `fsync`. The forwards are the read-write lock's ([`crate::rw`]), which
//! needs the same calls; this module adds the owner and mode of an open
//! directory. The decisions are `swaplock_core::strict`'s.

// `stat` field types differ between targets; the casts widen where needed.
#![allow(clippy::unnecessary_cast)]

pub use crate::rw::{effective_uid, fsync, link_at, mkdir_at, open_dir_nofollow};
use rustix::fd::AsFd;
use swaplock_core::Errno;

/// Who owns a file and its mode, from `fstat(fd)`: `(st_uid, st_mode)`.
///
/// # References
/// - [`fstat(2)`](https://man7.org/linux/man-pages/man2/fstat.2.html)
pub fn owner_and_mode(fd: impl AsFd) -> Result<(u32, u32), Errno> {
    let st = crate::stat::fstat(fd.as_fd()).map_err(|e| Errno::from_raw(e.raw_os_error()))?;
    Ok((st.st_uid as u32, st.st_mode as u32))
}
