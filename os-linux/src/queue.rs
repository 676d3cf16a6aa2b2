//! The host queue of a soft lock's waiters (PROTOCOL 7.20): a side file
//! beside the lock, `<L>.queue` (its first 8 bytes a mark, so that another
//! lock's marker of that name is never taken for it), whose open file
//! description locks
//! (`F_OFD_SETLK`, Linux 3.15) order this host's waiters so that one at a
//! time, the queue's head, watches the marker. Each member draws a ticket
//! (a counter in the file, drawn under the lock of byte 0) and holds the
//! ticket's byte until it leaves; it is the head once its predecessor's
//! byte is free, so members take turns in the order they drew, and one
//! that leaves (or dies: the kernel drops its locks) wakes its successor
//! alone. Byte 1 is every member's, taken shared, so that the last member
//! to leave knows it is the last and may remove the file.
//!
//! Nothing here grants the soft lock: the marker's exclusive create still
//! does. Every call reports its failure, and the caller then waits as it
//! did without a queue.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use swaplock_core::Errno;

/// The core's errno of a failed call.
fn errno(e: rustix::io::Errno) -> Errno {
    Errno::from_raw(e.raw_os_error())
}

/// Opens the queue file `name` in `dir`, read-write (a write lock needs
/// it), never following a symbolic link and never blocking (a FIFO put
/// there); where there is none, makes it with its mark (`make` below).
/// Anything but a regular file that begins with the mark is refused with
/// `EINVAL`: a file another lock named `<L>.queue` holds as its marker is
/// never taken for the queue (nor, where the file could not be made whole,
/// one just created whose mark is not written yet: that wait goes
/// without). With whether this call made it.
pub fn open(dir: BorrowedFd<'_>, name: &[u8], mode: u32) -> Result<(OwnedFd, bool), Errno> {
    let flags =
        OFlags::RDWR | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
    let fd = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Err(e) if e == rustix::io::Errno::NOENT => match make(dir, name, mode)? {
            Some(fd) => return Ok((fd, true)),
            // Made by another joiner meanwhile: taken as found.
            None => rustix::fs::openat(dir, name, flags, Mode::empty()).map_err(errno)?,
        },
        opened => opened.map_err(errno)?,
    };
    let st = rustix::fs::fstat(&fd).map_err(errno)?;
    if FileType::from_raw_mode(st.st_mode as _) != FileType::RegularFile {
        return Err(Errno::INVAL);
    }
    let mut mark = [0u8; 8];
    match rustix::io::pread(&fd, &mut mark, 0) {
        Ok(8) if mark == MARK => Ok((fd, false)),
        _ => Err(Errno::INVAL),
    }
}

/// Makes the queue file `name` in `dir` (`mode` less the umask) with its
/// mark, or `None` if another joiner made it meanwhile. The file is made
/// whole: an unnamed file (`O_TMPFILE`) gets the mark, then the name, so
/// that no joiner finds it without the mark (waiters that all arrive at
/// once would go without the queue). Where the filesystem has no unnamed
/// files or `/proc` is not mounted: an exclusive create, then the mark.
fn make(dir: BorrowedFd<'_>, name: &[u8], mode: u32) -> Result<Option<OwnedFd>, Errno> {
    let flags = OFlags::RDWR | OFlags::CLOEXEC | OFlags::NOCTTY;
    let permissions = Mode::from_raw_mode(mode as _);
    if let Ok(fd) = rustix::fs::openat(dir, c".", flags | OFlags::TMPFILE, permissions) {
        if matches!(rustix::io::pwrite(&fd, &MARK, 0), Ok(n) if n == MARK.len()) {
            match swaplock_unix::soft::link_unnamed(fd.as_fd(), dir, name) {
                Ok(()) => return Ok(Some(fd)),
                Err(e) if e == Errno::EXIST => return Ok(None),
                Err(_) => {}
            }
        }
    }
    let excl = flags | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CREATE | OFlags::EXCL;
    match rustix::fs::openat(dir, name, excl, permissions) {
        Ok(fd) => match rustix::io::pwrite(&fd, &MARK, 0) {
            Ok(n) if n == MARK.len() => Ok(Some(fd)),
            // A file without its mark would keep every later waiter from
            // queueing: the one just made goes.
            written => {
                if still_there(dir, name, fd.as_fd()) {
                    let _ = remove(dir, name);
                }
                Err(written.map_or_else(errno, |_| Errno::NOSPC))
            }
        },
        Err(e) if e == rustix::io::Errno::EXIST => Ok(None),
        Err(e) => Err(errno(e)),
    }
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

/// Whether this build can queue at all: open file description locks
/// need a 64-bit `off_t` here (see `ofd` below); without them no side file is
/// made.
pub const QUEUES: bool = cfg!(target_pointer_width = "64");

/// The byte that guards the ticket counter, held while a ticket is drawn.
const DRAWING: i64 = 0;
/// The byte every member holds shared.
const MEMBERS: i64 = 1;
/// Where the ticket counter is kept: the next ticket, 8 bytes little-endian.
const COUNTER: u64 = 8;
/// Where the ticket of the member last served is kept, 8 bytes
/// little-endian: a member that took the lock writes its ticket as it
/// leaves, so that those behind see the queue move toward them without
/// looking at the marker; then its process and its marker's inode, 8
/// bytes little-endian each: the member whose turn it gives watches that
/// process's exit while that marker stands.
const SERVED: u64 = 16;
/// The side file's first 8 bytes, written before its name shows it: a
/// file at the name without them is not a queue (another lock's marker,
/// named `<L>.queue`), and is never written or removed.
const MARK: [u8; 8] = *b"swlq\0\0\0\x01";
/// The byte of ticket `t` is `SLOTS + t`: its member holds it until it
/// leaves, and its successor waits for it.
const SLOTS: i64 = 1 << 20;
/// How many bytes past the counter a drawer tries before it gives up: the
/// counter may lag (its writer was killed before writing it).
const PROBES: u64 = 1024;

/// Joins the queue: a shared lock on the members' byte, without waiting
/// (`EAGAIN` while the last member removes the file).
pub fn join(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    ofd(fd, MEMBERS, libc::F_RDLCK as _, false)
}

/// Stops being a member (the descriptor may stay open a while: a thread
/// blocked on it in the kernel).
pub fn quit(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    ofd(fd, MEMBERS, libc::F_UNLCK as _, false)
}

/// Whether this member is the only one: its shared lock on the members'
/// byte made exclusive, which no other member's allows. Made, it keeps
/// joiners out until the descriptor closes.
pub fn alone(fd: BorrowedFd<'_>) -> bool {
    ofd(fd, MEMBERS, libc::F_WRLCK as _, false).is_ok()
}

/// Draws a ticket: with the counter's byte held (at once, `EAGAIN`
/// otherwise; with `wait`, once it is free), the first ticket from the
/// counter on whose byte nobody holds, its byte taken and the counter
/// moved past it. The member holds its ticket's byte until it leaves.
pub fn draw(fd: BorrowedFd<'_>, wait: bool) -> Result<u64, Errno> {
    ofd(fd, DRAWING, libc::F_WRLCK as _, wait)?;
    let drawn = draw_held(fd);
    let _ = ofd(fd, DRAWING, libc::F_UNLCK as _, false);
    drawn
}

fn draw_held(fd: BorrowedFd<'_>) -> Result<u64, Errno> {
    let mut counter = [0u8; 8];
    let next = match rustix::io::pread(fd, &mut counter, COUNTER) {
        Ok(8) => u64::from_le_bytes(counter),
        Ok(_) => 1,
        Err(e) => return Err(errno(e)),
    };
    // Never 0 (whose predecessor would be byte SLOTS - 1), nor so large
    // that a byte's offset overflows.
    let next = next.clamp(1, 1 << 60);
    for ticket in next..next + PROBES {
        match ofd(fd, slot(ticket), libc::F_WRLCK as _, false) {
            Ok(()) => {
                let _ = rustix::io::pwrite(fd, &(ticket + 1).to_le_bytes(), COUNTER);
                return Ok(ticket);
            }
            Err(e) if e == Errno::AGAIN || e == Errno::ACCES => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Errno::AGAIN)
}

fn slot(ticket: u64) -> i64 {
    SLOTS + ticket as i64
}

/// Whether the member before `ticket` has left (its byte is free): with
/// `wait`, waits until it has (`EINTR` when a signal interrupts).
pub fn ahead_left(fd: BorrowedFd<'_>, ticket: u64, wait: bool) -> Result<bool, Errno> {
    let before = slot(ticket - 1);
    match ofd(fd, before, libc::F_WRLCK as _, wait) {
        Ok(()) => {
            let _ = ofd(fd, before, libc::F_UNLCK as _, false);
            Ok(true)
        }
        Err(e) if !wait && (e == Errno::AGAIN || e == Errno::ACCES) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Leaves the place of `ticket`: the kernel wakes its successor, who
/// waits for that byte alone.
pub fn leave(fd: BorrowedFd<'_>, ticket: u64) -> Result<(), Errno> {
    ofd(fd, slot(ticket), libc::F_UNLCK as _, false)
}

/// The ticket of the member last served (0 before any); `None` if it
/// cannot be read.
pub fn served(fd: BorrowedFd<'_>) -> Option<u64> {
    let mut ticket = [0u8; 8];
    match rustix::io::pread(fd, &mut ticket, SERVED) {
        Ok(8) => Some(u64::from_le_bytes(ticket)),
        Ok(_) => Some(0),
        Err(_) => None,
    }
}

/// The process of the member last served and the inode of the marker it
/// made, as it wrote them with its ticket; the process `None` if none is
/// written (0). `None` if they cannot be read.
pub fn served_by(fd: BorrowedFd<'_>) -> Option<(Option<u32>, u64)> {
    let mut by = [0u8; 16];
    match rustix::io::pread(fd, &mut by, SERVED + 8) {
        Ok(16) => {
            let (pid, ino) = by.split_at(8);
            let pid = u64::from_le_bytes(pid.try_into().ok()?);
            let ino = u64::from_le_bytes(ino.try_into().ok()?);
            Some((u32::try_from(pid).ok().filter(|&p| p != 0), ino))
        }
        _ => None,
    }
}

/// Writes `ticket` as the member last served, with its process `pid` and
/// the inode `ino` of the marker it made, in one write. Two members served
/// at once write one after the other: either is a member served.
pub fn serve(fd: BorrowedFd<'_>, ticket: u64, pid: u32, ino: u64) {
    let mut record = [0u8; 24];
    record[..8].copy_from_slice(&ticket.to_le_bytes());
    record[8..16].copy_from_slice(&u64::from(pid).to_le_bytes());
    record[16..].copy_from_slice(&ino.to_le_bytes());
    let _ = rustix::io::pwrite(fd, &record, SERVED);
}

/// `F_OFD_SETLK` and `F_OFD_SETLKW` (Linux 3.15), as the kernel adapter
/// has them: only where `off_t` is 64 bits (see `swaplock_unix::kernel`).
#[cfg(target_pointer_width = "64")]
fn ofd(fd: BorrowedFd<'_>, byte: i64, kind: libc::c_short, wait: bool) -> Result<(), Errno> {
    use rustix::fd::AsRawFd;
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
