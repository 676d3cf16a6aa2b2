//! The syscalls of the SQLite lock (a peer of filelock's `ReadWriteLock`)
//! besides its byte-range locks, which are [`crate::kernel::fcntl_range`]
//! and [`crate::kernel::fcntl_query_range`]: opening the database as
//! filelock does, telling what kind of file it is, and reading its header.

use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::OFlags;
use std::ffi::CStr;
use swaplock_core::decide::FileId;
use swaplock_core::Errno;

fn errno(e: rustix::io::Errno) -> Errno {
    Errno::from_raw(e.raw_os_error())
}

/// `open(path, O_RDWR|O_CREAT|O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC, mode)` —
/// open the lock's database, creating it empty if it is missing (never
/// truncating it), as filelock opens it: a symlink at the path fails with
/// `ELOOP`, and a FIFO there does not block the open (the caller then
/// refuses it as not a regular file).
///
/// # References
/// - [`open(2)`](https://man7.org/linux/man-pages/man2/open.2.html)
pub fn open_database(path: &CStr, mode: u32) -> Result<OwnedFd, Errno> {
    let flags =
        OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    rustix::fs::open(path, flags, crate::soft::permissions(mode)).map_err(errno)
}

/// `fstat(fd)` — the file's identity, and whether it is a regular file.
///
/// # References
/// - [`fstat(2)`](https://man7.org/linux/man-pages/man2/fstat.2.html)
pub fn identify(fd: impl AsFd) -> Result<(FileId, bool), Errno> {
    let st = crate::stat::fstat(fd.as_fd()).map_err(errno)?;
    let kind = rustix::fs::FileType::from_raw_mode(st.st_mode as rustix::fs::RawMode);
    Ok((
        crate::kernel::file_id(&st),
        kind == rustix::fs::FileType::RegularFile,
    ))
}

/// `pread(fd, buf, 0)`, again until `buf` is full or the file ends — the
/// file's first bytes, without moving the descriptor's offset; how many
/// were read.
///
/// # References
/// - [`pread(2)`](https://man7.org/linux/man-pages/man2/pread.2.html)
pub fn read_head(fd: impl AsFd, buf: &mut [u8]) -> Result<usize, Errno> {
    let fd = fd.as_fd();
    let mut got = 0;
    while got < buf.len() {
        match rustix::io::pread(fd, &mut buf[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e == rustix::io::Errno::INTR => {}
            Err(e) => return Err(errno(e)),
        }
    }
    Ok(got)
}
