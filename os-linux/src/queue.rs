//! The host queue of a soft lock's waiters (PROTOCOL 7.20): an empty side
//! file beside the lock, `<L>.queue`, whose open file description locks
//! (`F_OFD_SETLK`, Linux 3.15) order this host's waiters so that one at a
//! time, the queue's head, watches the marker. Byte 0 is the head's turn,
//! taken exclusively; byte 1 is every member's, taken shared, so that the
//! last member to leave knows it is the last and may remove the file.
//!
//! Nothing here grants the soft lock: the marker's exclusive create still
//! does. Every call reports its failure, and the caller then waits as it
//! did without a queue.

use rustix::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use swaplock_core::Errno;

/// The core's errno of a failed call.
fn errno(e: rustix::io::Errno) -> Errno {
    Errno::from_raw(e.raw_os_error())
}

/// Opens (and creates, with `mode` less the umask) the queue file `name`
/// in `dir`, read-write (a write lock needs it), never following a
/// symbolic link and never blocking (a FIFO put there). Anything but a
/// regular file is refused with `EINVAL`.
pub fn open(dir: BorrowedFd<'_>, name: &[u8], mode: u32) -> Result<OwnedFd, Errno> {
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
    let fd = rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(mode as _)).map_err(errno)?;
    let st = rustix::fs::fstat(&fd).map_err(errno)?;
    if FileType::from_raw_mode(st.st_mode as _) != FileType::RegularFile {
        return Err(Errno::INVAL);
    }
    Ok(fd)
}

/// Whether `fd` is still the file at `name` in `dir` (the same device and
/// inode): a member that joined a file removed or replaced meanwhile
/// queues alone.
pub fn still_there(dir: BorrowedFd<'_>, name: &[u8], fd: BorrowedFd<'_>) -> bool {
    let (Ok(ours), Ok(there)) = (
        rustix::fs::fstat(fd),
        rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW),
    ) else {
        return false;
    };
    ours.st_dev == there.st_dev && ours.st_ino == there.st_ino
}

/// Removes `name` from `dir`.
pub fn remove(dir: BorrowedFd<'_>, name: &[u8]) -> Result<(), Errno> {
    rustix::fs::unlinkat(dir, name, AtFlags::empty()).map_err(errno)
}

/// The byte of the head's turn.
const TURN: i64 = 0;
/// The byte every member holds shared.
const MEMBERS: i64 = 1;

/// Joins the queue: a shared lock on the members' byte, without waiting
/// (`EAGAIN` while the last member removes the file).
pub fn join(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    ofd(fd, MEMBERS, libc::F_RDLCK as _, false)
}

/// Whether this member is the only one: its shared lock on the members'
/// byte made exclusive, which no other member's allows. Made, it keeps
/// joiners out until the descriptor closes.
pub fn alone(fd: BorrowedFd<'_>) -> bool {
    ofd(fd, MEMBERS, libc::F_WRLCK as _, false).is_ok()
}

/// Takes the head's turn: at once or `EAGAIN`; with `wait`, once it is
/// free (`EINTR` when a signal interrupts the wait).
pub fn take_turn(fd: BorrowedFd<'_>, wait: bool) -> Result<(), Errno> {
    ofd(fd, TURN, libc::F_WRLCK as _, wait)
}

/// Gives the head's turn up: the kernel wakes the member that waits
/// longest for it (its waiters form a chain: a release wakes one).
pub fn end_turn(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    ofd(fd, TURN, libc::F_UNLCK as _, false)
}

/// `F_OFD_SETLK` and `F_OFD_SETLKW` (Linux 3.15), as the kernel adapter
/// has them: only where `off_t` is 64 bits (see `swaplock_unix::kernel`).
#[cfg(target_pointer_width = "64")]
fn ofd(fd: BorrowedFd<'_>, byte: i64, kind: libc::c_short, wait: bool) -> Result<(), Errno> {
    const F_OFD_SETLK: libc::c_int = 37;
    const F_OFD_SETLKW: libc::c_int = 38;
    // SAFETY: `flock` is a plain C struct of integers; all-zero is valid.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = byte;
    fl.l_len = 1;
    let cmd = if wait { F_OFD_SETLKW } else { F_OFD_SETLK };
    // SAFETY: the descriptor is borrowed for the call, and `fl` is a valid
    // `struct flock` exclusively borrowed by it.
    let r = unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), cmd, &mut fl as *mut libc::flock) };
    if r == -1 {
        return Err(Errno::from_raw(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ));
    }
    Ok(())
}

/// No open file description locks where `off_t` has 32 bits: no queue.
#[cfg(not(target_pointer_width = "64"))]
fn ofd(_: BorrowedFd<'_>, _: i64, _: libc::c_short, _: bool) -> Result<(), Errno> {
    Err(Errno::NOSYS)
}
