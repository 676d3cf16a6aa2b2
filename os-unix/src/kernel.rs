//! The syscalls of the kernel-lock protocols: with-lock-ex's `fcntl` lock on
//! byte 0 and `flock`, with the identity check's `fstat` and `stat`.

use rustix::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use rustix::fs::{FlockOperation, Mode, OFlags};
use std::ffi::CStr;
use std::time::Duration;
use swaplock_core::decide::{FileId, FileTime, Instant};
use swaplock_core::kernel::{Listed, Names};
use swaplock_core::sqlite::{Access, Call, Span};
use swaplock_core::Errno;

fn errno(e: rustix::io::Errno) -> Errno {
    Errno::from_raw(e.raw_os_error())
}

pub(crate) fn file_id(st: &crate::stat::RawStat) -> FileId {
    // st_dev is signed on Apple targets and st_ino narrower on some 32-bit
    // ABIs; the casts widen, and are no-ops elsewhere.
    #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
    FileId {
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
    }
}

/// `open(path, O_RDWR|O_CREAT|O_CLOEXEC[|O_EXCL][|O_NOFOLLOW], mode)` —
/// open or create a lock file, never truncating it.
///
/// `follow` keeps a final symlink followed, as with-lock-ex does; without it
/// a symlink at `path` fails with `ELOOP`. `exclusive` fails with `EEXIST`
/// unless this call creates the file.
///
/// # References
/// - [`open(2)`](https://man7.org/linux/man-pages/man2/open.2.html)
pub fn open_lock_file(
    path: &CStr,
    follow: bool,
    mode: u32,
    exclusive: bool,
) -> Result<OwnedFd, Errno> {
    let mut flags = OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    if exclusive {
        flags |= OFlags::EXCL;
    }
    rustix::fs::open(path, flags, crate::soft::permissions(mode)).map_err(errno)
}

/// `open(path, O_RDWR|O_CLOEXEC[|O_NOFOLLOW])` — open the lock file if it
/// exists, never creating it (`ENOENT` otherwise).
///
/// # References
/// - [`open(2)`](https://man7.org/linux/man-pages/man2/open.2.html)
pub fn open_existing_lock_file(path: &CStr, follow: bool) -> Result<OwnedFd, Errno> {
    let mut flags = OFlags::RDWR | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    rustix::fs::open(path, flags, Mode::empty()).map_err(errno)
}

/// `open(path, O_RDONLY|O_NONBLOCK|O_CLOEXEC[|O_NOFOLLOW])` — open an
/// existing lock file to query it (a FIFO at the path does not block the
/// open).
///
/// Without `follow`, a symlink at `path` fails with `ELOOP`.
///
/// # References
/// - [`open(2)`](https://man7.org/linux/man-pages/man2/open.2.html)
pub fn open_existing_read_only(path: &CStr, follow: bool) -> Result<OwnedFd, Errno> {
    let mut flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    rustix::fs::open(path, flags, Mode::empty()).map_err(errno)
}

fn byte_zero(kind: libc::c_short, len: libc::off_t) -> libc::flock {
    range(kind, 0, len)
}

/// A `struct flock` for bytes `start..start + len` (`len` 0: to the end
/// of the file, and beyond).
fn range(kind: libc::c_short, start: libc::off_t, len: libc::off_t) -> libc::flock {
    // SAFETY: `flock` is a plain C struct of integers; all-zero is a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = len;
    fl
}

fn fcntl_lock_call(fd: impl AsFd, cmd: libc::c_int, fl: &mut libc::flock) -> Result<(), Errno> {
    // SAFETY: the descriptor is borrowed and open for the whole call, and
    // `fl` is a valid, exclusively borrowed `struct flock`.
    let r = unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), cmd, fl as *mut libc::flock) };
    if r == -1 {
        Err(Errno::from_raw(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ))
    } else {
        Ok(())
    }
}

/// `fcntl(fd, F_SETLK or F_SETLKW, {F_WRLCK, byte 0, length 1})` — take the
/// with-lock-ex write lock on the first byte.
///
/// With `wait` the call blocks until the lock is free (and may fail with
/// `EINTR` or `EDEADLK`); without it a held lock fails with `EAGAIN` or
/// `EACCES`.
///
/// # References
/// - [`fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html), "Advisory record locking"
pub fn fcntl_lock_byte0(fd: impl AsFd, wait: bool) -> Result<(), Errno> {
    fcntl_take_byte0(fd, wait, false)
}

/// The `fcntl` lock type: `F_RDLCK` for a shared lock, else `F_WRLCK`.
fn lock_type(shared: bool) -> libc::c_short {
    // The constants are `c_int` on Linux and `c_short` on Apple systems.
    #[allow(clippy::unnecessary_cast)]
    if shared {
        libc::F_RDLCK as libc::c_short
    } else {
        libc::F_WRLCK as libc::c_short
    }
}

/// [`fcntl_lock_byte0`], or with `shared` a read lock (`F_RDLCK`) on the
/// first byte, which other read locks share and a write lock excludes.
pub fn fcntl_take_byte0(fd: impl AsFd, wait: bool, shared: bool) -> Result<(), Errno> {
    let mut fl = byte_zero(lock_type(shared), 1);
    fcntl_lock_call(
        fd,
        if wait { libc::F_SETLKW } else { libc::F_SETLK },
        &mut fl,
    )
}

/// `F_OFD_SETLK` and `F_OFD_SETLKW` (Linux 3.15; the same numbers on every
/// architecture). Only where `off_t` is 64 bits: with a 32-bit `off_t`
/// the kernel reads an `F_OFD_*` request as a `struct flock64`, which
/// bionic passes it unconverted (glibc bug 20251 was the same), so the
/// lock could land on another byte than 0 and exclude nobody.
#[cfg(all(
    any(target_os = "linux", target_os = "android"),
    target_pointer_width = "64"
))]
const F_OFD_SETLK: libc::c_int = 37;
#[cfg(all(
    any(target_os = "linux", target_os = "android"),
    target_pointer_width = "64"
))]
const F_OFD_SETLKW: libc::c_int = 38;

/// `F_OFD_GETLK` (Linux 3.15).
#[cfg(all(
    any(target_os = "linux", target_os = "android"),
    target_pointer_width = "64"
))]
const F_OFD_GETLK: libc::c_int = 36;

/// `fcntl(fd, F_OFD_GETLK, {F_WRLCK, byte 0, length 1})` — whether the
/// kernel has open file description locks: `false` when it answers
/// `EINVAL` (an unknown command, before Linux 3.15), `true` for any other
/// answer.
///
/// # References
/// - [`fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html), "Open file description locks (non-POSIX)"
#[cfg(all(
    any(target_os = "linux", target_os = "android"),
    target_pointer_width = "64"
))]
pub fn fcntl_ofd_supported(fd: impl AsFd) -> bool {
    let mut fl = byte_zero(libc::F_WRLCK as libc::c_short, 1);
    fcntl_lock_call(fd, F_OFD_GETLK, &mut fl) != Err(Errno::INVAL)
}

/// `fcntl(fd, F_OFD_SETLK or F_OFD_SETLKW, {F_WRLCK, byte 0, length 1})` —
/// the with-lock-ex write lock on the first byte, owned by the open file
/// description rather than by the process: another open of the file, in
/// this process too, is excluded, and closing another descriptor of the
/// file leaves it held. It still conflicts with a classic `fcntl` lock of
/// any process (with-lock-ex's, Python's `fcntl.lockf`'s). A kernel
/// without it (before Linux 3.15) answers `EINVAL`, and the classic lock
/// is taken instead.
///
/// # References
/// - [`fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html), "Open file description locks (non-POSIX)"
#[cfg(all(
    any(target_os = "linux", target_os = "android"),
    target_pointer_width = "64"
))]
pub fn fcntl_ofd_lock_byte0(fd: impl AsFd, wait: bool) -> Result<(), Errno> {
    fcntl_ofd_take_byte0(fd, wait, false)
}

/// [`fcntl_ofd_lock_byte0`], or with `shared` a read lock.
#[cfg(all(
    any(target_os = "linux", target_os = "android"),
    target_pointer_width = "64"
))]
pub fn fcntl_ofd_take_byte0(fd: impl AsFd, wait: bool, shared: bool) -> Result<(), Errno> {
    let fd = fd.as_fd();
    let mut fl = byte_zero(lock_type(shared), 1);
    let cmd = if wait { F_OFD_SETLKW } else { F_OFD_SETLK };
    match fcntl_lock_call(fd, cmd, &mut fl) {
        Err(e) if e == Errno::INVAL => fcntl_take_byte0(fd, wait, shared),
        done => done,
    }
}

/// `fcntl(fd, F_OFD_SETLK, {F_UNLCK, byte 0, length 1})` — release the
/// lock [`fcntl_ofd_lock_byte0`] took; where the kernel has no open file
/// description locks, the classic one it took instead.
#[cfg(all(
    any(target_os = "linux", target_os = "android"),
    target_pointer_width = "64"
))]
pub fn fcntl_ofd_unlock_byte0(fd: impl AsFd) -> Result<(), Errno> {
    let fd = fd.as_fd();
    let mut fl = byte_zero(libc::F_UNLCK as libc::c_short, 1);
    match fcntl_lock_call(fd, F_OFD_SETLK, &mut fl) {
        Err(e) if e == Errno::INVAL => fcntl_unlock_byte0(fd),
        done => done,
    }
}

/// `fcntl(fd, F_SETLK, {F_UNLCK, byte 0, length 1})` — release the byte-0 lock.
///
/// # References
/// - [`fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html)
pub fn fcntl_unlock_byte0(fd: impl AsFd) -> Result<(), Errno> {
    let mut fl = byte_zero(libc::F_UNLCK as libc::c_short, 1);
    fcntl_lock_call(fd, libc::F_SETLK, &mut fl)
}

/// A lock that conflicts with a write lock on a whole file, as `F_GETLK`
/// reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conflict {
    /// No lock conflicts.
    None,
    /// A write lock, held by this PID (-1 for an open file description lock).
    Write(i32),
    /// A read lock, held by this PID.
    Read(i32),
}

/// `fcntl(fd, F_GETLK, {F_WRLCK, whole file})` — which lock, if any, would
/// keep a write lock on the whole file from being taken.
///
/// # References
/// - [`fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html)
pub fn fcntl_query(fd: impl AsFd) -> Result<Conflict, Errno> {
    query(fd, byte_zero(libc::F_WRLCK as libc::c_short, 0))
}

/// `fcntl(fd, F_GETLK, {F_WRLCK, span})` — which lock, if any, would keep
/// a write lock on `span` from being taken (a classic query: this
/// process's own classic locks are never in its way).
///
/// # References
/// - [`fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html)
pub fn fcntl_query_range(fd: impl AsFd, span: Span) -> Result<Conflict, Errno> {
    let (start, len) = offsets(span)?;
    query(fd, range(libc::F_WRLCK as libc::c_short, start, len))
}

fn query(fd: impl AsFd, mut fl: libc::flock) -> Result<Conflict, Errno> {
    fcntl_lock_call(fd, libc::F_GETLK, &mut fl)?;
    // The lock-type constants are `c_int` on Linux and `c_short` on Apple
    // systems, as `l_type` is.
    #[allow(clippy::unnecessary_cast)]
    let (write, read) = (
        libc::F_WRLCK as libc::c_short,
        libc::F_RDLCK as libc::c_short,
    );
    Ok(if fl.l_type == write {
        Conflict::Write(fl.l_pid)
    } else if fl.l_type == read {
        Conflict::Read(fl.l_pid)
    } else {
        Conflict::None
    })
}

/// `span` as `off_t` offsets (`EOVERFLOW` past what `off_t` holds).
fn offsets(span: Span) -> Result<(libc::off_t, libc::off_t), Errno> {
    let off = |v: u64| libc::off_t::try_from(v).map_err(|_| Errno::from_raw(libc::EOVERFLOW));
    Ok((off(span.start)?, off(span.len)?))
}

/// `fcntl(fd, F_SETLK, {type, span})`, or with `by_description`
/// `F_OFD_SETLK` — one non-blocking lock call on a byte range, as
/// SQLite's unix VFS makes them (`call`: read, write or unlock, and the
/// range). A held conflicting lock fails with `EAGAIN` or `EACCES`. An
/// open file description lock belongs to `fd`'s open file description
/// (closing another descriptor of the file leaves it), a classic one to
/// the process; the two kinds conflict with each other. Where the kernel
/// has no open file description locks, `by_description` fails with
/// `EINVAL`, as a kernel before Linux 3.15 answers.
///
/// # References
/// - [`fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html), "Advisory record locking" and "Open file description locks (non-POSIX)"
pub fn fcntl_range(fd: impl AsFd, by_description: bool, call: Call) -> Result<(), Errno> {
    #[allow(clippy::unnecessary_cast)]
    let kind = match call.access {
        Access::Read => libc::F_RDLCK as libc::c_short,
        Access::Write => libc::F_WRLCK as libc::c_short,
        Access::Unlock => libc::F_UNLCK as libc::c_short,
    };
    let (start, len) = offsets(call.span)?;
    let mut fl = range(kind, start, len);
    if !by_description {
        return fcntl_lock_call(fd, libc::F_SETLK, &mut fl);
    }
    #[cfg(all(
        any(target_os = "linux", target_os = "android"),
        target_pointer_width = "64"
    ))]
    return fcntl_lock_call(fd, F_OFD_SETLK, &mut fl);
    #[cfg(not(all(
        any(target_os = "linux", target_os = "android"),
        target_pointer_width = "64"
    )))]
    Err(Errno::INVAL)
}

/// `flock(fd, LOCK_EX[|LOCK_NB])` — take an exclusive `flock` lock.
///
/// # References
/// - [`flock(2)`](https://man7.org/linux/man-pages/man2/flock.2.html)
pub fn flock_exclusive(fd: impl AsFd, wait: bool) -> Result<(), Errno> {
    flock_take(fd, wait, false)
}

/// [`flock_exclusive`], or with `shared` `flock(fd, LOCK_SH[|LOCK_NB])`.
pub fn flock_take(fd: impl AsFd, wait: bool, shared: bool) -> Result<(), Errno> {
    let op = match (shared, wait) {
        (false, true) => FlockOperation::LockExclusive,
        (false, false) => FlockOperation::NonBlockingLockExclusive,
        (true, true) => FlockOperation::LockShared,
        (true, false) => FlockOperation::NonBlockingLockShared,
    };
    rustix::fs::flock(fd, op).map_err(errno)
}

/// `flock(fd, LOCK_UN)` — release a `flock` lock.
///
/// # References
/// - [`flock(2)`](https://man7.org/linux/man-pages/man2/flock.2.html)
pub fn flock_unlock(fd: impl AsFd) -> Result<(), Errno> {
    rustix::fs::flock(fd, FlockOperation::Unlock).map_err(errno)
}

/// `fstat(fd)` — the identity of an open file.
///
/// # References
/// - [`fstat(2)`](https://man7.org/linux/man-pages/man2/fstat.2.html)
pub fn fstat_id(fd: impl AsFd) -> Result<FileId, Errno> {
    crate::stat::fstat(fd.as_fd())
        .map(|st| file_id(&st))
        .map_err(errno)
}

/// `stat(path)` or, without `follow`, `lstat(path)` — the identity of the
/// file a path names now.
///
/// # References
/// - [`stat(2)`](https://man7.org/linux/man-pages/man2/stat.2.html)
pub fn stat_id(path: &CStr, follow: bool) -> Result<FileId, Errno> {
    crate::stat::stat_path(path, follow)
        .map(|st| file_id(&st))
        .map_err(errno)
}

/// What the directory of `path` lists under its last component, read from
/// its filesystem (for [`swaplock_core::kernel::named`], where a client
/// may answer the name from a delegation of the file): the directory is
/// opened, its attributes fetched anew (`statx` with
/// `AT_STATX_FORCE_SYNC`, on Linux), its cached listing dropped
/// (`posix_fadvise(POSIX_FADV_DONTNEED)`, which on an NFS client
/// discards the pages of the directory's entries, so that `getdents64`
/// reads them from the server), and its entries read until the name. An
/// entry that is a symlink, where `follow` follows it, or whose type the
/// listing does not say, is [`Listed::Link`]: its target is not listed
/// there. The drop of the cached listing is best effort; every other
/// failure is the listing's.
///
/// # References
/// - [`getdents64(2)`](https://man7.org/linux/man-pages/man2/getdents64.2.html)
/// - [`statx(2)`](https://man7.org/linux/man-pages/man2/statx.2.html), `AT_STATX_FORCE_SYNC`
/// - [`posix_fadvise(2)`](https://man7.org/linux/man-pages/man2/posix_fadvise.2.html)
pub fn listed(path: &CStr, follow: bool) -> Result<Listed, Errno> {
    let bytes = path.to_bytes();
    let (dir, name): (&[u8], &[u8]) = match bytes.iter().rposition(|&b| b == b'/') {
        Some(0) => (b"/", &bytes[1..]),
        Some(slash) => (&bytes[..slash], &bytes[slash + 1..]),
        None => (b".", bytes),
    };
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = rustix::fs::open(dir, flags, Mode::empty()).map_err(errno)?;
    #[cfg(target_os = "linux")]
    rustix::fs::statx(
        &fd,
        c"",
        rustix::fs::AtFlags::EMPTY_PATH | rustix::fs::AtFlags::STATX_FORCE_SYNC,
        rustix::fs::StatxFlags::BASIC_STATS,
    )
    .map_err(errno)?;
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let _ = rustix::fs::fadvise(&fd, 0, None, rustix::fs::Advice::DontNeed);
    let dir = rustix::fs::Dir::new(fd).map_err(errno)?;
    for entry in dir {
        let entry = entry.map_err(errno)?;
        if entry.file_name().to_bytes() != name {
            continue;
        }
        return Ok(match entry.file_type() {
            rustix::fs::FileType::Symlink | rustix::fs::FileType::Unknown if follow => Listed::Link,
            _ => Listed::Entry(entry.ino()),
        });
    }
    Ok(Listed::Absent)
}

/// `unlink(path)` — remove a name.
///
/// # References
/// - [`unlink(2)`](https://man7.org/linux/man-pages/man2/unlink.2.html)
pub fn unlink(path: &CStr) -> Result<(), Errno> {
    rustix::fs::unlink(path).map_err(errno)
}

/// `fcntl(fd, F_SETFD, flags & !FD_CLOEXEC)` — let a descriptor survive
/// `exec`, so a command keeps the lock.
///
/// # References
/// - [`fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html), "File descriptor flags"
pub fn clear_cloexec(fd: impl AsFd) -> Result<(), Errno> {
    let fd = fd.as_fd();
    let flags = rustix::io::fcntl_getfd(fd).map_err(errno)?;
    rustix::io::fcntl_setfd(fd, flags - rustix::io::FdFlags::CLOEXEC).map_err(errno)
}

/// `umask(mask)` — set the file mode creation mask, returning the old one.
///
/// The mask belongs to the whole process: reading it this way (set, then
/// restore) races with other threads that create files; where the OS
/// offers it, the adapter's `read_umask` does not.
///
/// # References
/// - [`umask(2)`](https://man7.org/linux/man-pages/man2/umask.2.html)
// `mode_t` is 16 bits on Apple systems; the conversion widens there.
#[allow(clippy::useless_conversion)]
pub fn umask(mask: u32) -> u32 {
    u32::from(rustix::process::umask(crate::soft::permissions(mask)).as_raw_mode())
}

/// `fcntl(fd, F_DUPFD_CLOEXEC, 0)` — a second descriptor of the same open
/// file, for a thread that outlives a borrow.
///
/// # References
/// - [`fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html)
pub fn dup(fd: impl AsFd) -> Result<OwnedFd, Errno> {
    rustix::io::fcntl_dupfd_cloexec(fd, 0).map_err(errno)
}

/// `fcntl(fd, F_GETFL)` — whether `fd` was opened for reading and
/// writing, as a lock file is (so either lock may be taken through it).
///
/// # References
/// - [`fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html), "File status flags"
pub fn opened_read_write(fd: impl AsFd) -> bool {
    rustix::fs::fcntl_getfl(fd).is_ok_and(|flags| flags & OFlags::RWMODE == OFlags::RDWR)
}

/// Which kernel lock to take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockCall {
    /// `fcntl` `F_WRLCK` on byte 0, owned by the process.
    Fcntl,
    /// `fcntl` `F_WRLCK` on byte 0, owned by the open file description
    /// ([`fcntl_ofd_lock_byte0`]).
    #[cfg(all(
        any(target_os = "linux", target_os = "android"),
        target_pointer_width = "64"
    ))]
    FcntlOfd,
    /// `flock(LOCK_EX)`.
    Flock,
}

impl LockCall {
    /// Releases the lock this call took on `fd`.
    pub fn unlock(self, fd: impl AsFd) -> Result<(), Errno> {
        match self {
            LockCall::Fcntl => fcntl_unlock_byte0(fd),
            #[cfg(all(
                any(target_os = "linux", target_os = "android"),
                target_pointer_width = "64"
            ))]
            LockCall::FcntlOfd => fcntl_ofd_unlock_byte0(fd),
            LockCall::Flock => flock_unlock(fd),
        }
    }
}

/// The kernel-lock operations on one path, for
/// [`swaplock_core::kernel::attempt`], with the clocks and the pause
/// [`swaplock_core::kernel::acquire`] waits on.
#[derive(Clone, Copy, Debug)]
pub struct UnixKernel<'p> {
    /// The lock file's path.
    pub path: &'p CStr,
    /// Whether a symlink at the path is followed.
    pub follow: bool,
    /// The mode a created file gets (before the umask).
    pub mode: u32,
    /// The lock to take.
    pub call: LockCall,
    /// Whether it is the shared (read) lock rather than the exclusive one.
    pub shared: bool,
    /// Whether the client may answer a lookup of the path from a cache
    /// of names (a network filesystem), or from a delegation (NFSv4): the
    /// identity check then asks the server, and reads the directory's
    /// listing ([`swaplock_core::kernel::named`]).
    pub names: Names,
}

impl UnixKernel<'_> {
    /// Takes the lock `call` says on `file`, waiting or not, shared or not.
    fn take(call: LockCall, file: impl AsFd, wait: bool, shared: bool) -> Result<(), Errno> {
        match call {
            LockCall::Fcntl => fcntl_take_byte0(file, wait, shared),
            #[cfg(all(
                any(target_os = "linux", target_os = "android"),
                target_pointer_width = "64"
            ))]
            LockCall::FcntlOfd => fcntl_ofd_take_byte0(file, wait, shared),
            LockCall::Flock => flock_take(file, wait, shared),
        }
    }
}

impl swaplock_core::kernel::KernelOs for UnixKernel<'_> {
    type File = OwnedFd;

    fn open(&mut self, exclusive: bool) -> Result<OwnedFd, Errno> {
        open_lock_file(self.path, self.follow, self.mode, exclusive)
    }

    fn open_existing(&mut self) -> Result<OwnedFd, Errno> {
        open_existing_lock_file(self.path, self.follow)
    }

    fn lock(&mut self, file: &OwnedFd, wait: bool) -> Result<(), Errno> {
        Self::take(self.call, file, wait, self.shared)
    }

    fn fstat(&mut self, file: &OwnedFd) -> Result<FileId, Errno> {
        fstat_id(file)
    }

    fn stat(&mut self) -> Result<FileId, Errno> {
        stat_id(self.path, self.follow)
    }

    fn close(&mut self, file: OwnedFd) {
        drop(file);
    }

    fn names_cached(&self) -> bool {
        self.names.cached()
    }

    fn names_delegated(&self) -> bool {
        self.names.delegated()
    }

    fn listed(&mut self) -> Result<Listed, Errno> {
        listed(self.path, self.follow)
    }
}

/// The clocks and the pause of the kernel-lock drivers, the same for each.
macro_rules! system_clock {
    ($kernel:ty) => {
        impl swaplock_core::wait::Clock for $kernel {
            /// [`monotonic_now`](crate::soft::monotonic_now): a clock that
            /// stops while the system sleeps.
            fn now(&mut self) -> Instant {
                crate::soft::monotonic_now()
            }

            /// `clock_gettime(CLOCK_REALTIME)`.
            ///
            /// # References
            /// - [`clock_gettime(2)`](https://man7.org/linux/man-pages/man2/clock_gettime.2.html)
            fn wall(&mut self) -> FileTime {
                crate::soft::wall_now()
            }

            /// `nanosleep` — pause this thread.
            ///
            /// # References
            /// - [`nanosleep(2)`](https://man7.org/linux/man-pages/man2/nanosleep.2.html)
            fn sleep(&mut self, duration: Duration) {
                std::thread::sleep(duration);
            }
        }
    };
}

system_clock!(UnixKernel<'_>);

/// The kernel-lock operations on a file the caller opened, for
/// [`swaplock_core::kernel::acquire`]: each attempt locks a duplicate of
/// its descriptor (the same open file description, so an open file
/// description or `flock` lock is the caller's file's), and the path check
/// compares the file with itself, as there is no path.
#[derive(Clone, Copy, Debug)]
pub struct OpenKernel<'f> {
    /// The caller's file.
    pub file: BorrowedFd<'f>,
    /// The lock to take.
    pub call: LockCall,
    /// Whether it is the shared (read) lock rather than the exclusive one.
    pub shared: bool,
}

impl swaplock_core::kernel::KernelOs for OpenKernel<'_> {
    type File = OwnedFd;

    /// `fcntl(file, F_DUPFD_CLOEXEC, 0)`.
    fn open(&mut self, _exclusive: bool) -> Result<OwnedFd, Errno> {
        dup(self.file)
    }

    /// As `open`: the caller's file always exists.
    fn open_existing(&mut self) -> Result<OwnedFd, Errno> {
        dup(self.file)
    }

    fn lock(&mut self, file: &OwnedFd, wait: bool) -> Result<(), Errno> {
        UnixKernel::take(self.call, file, wait, self.shared)
    }

    fn fstat(&mut self, file: &OwnedFd) -> Result<FileId, Errno> {
        fstat_id(file)
    }

    /// `fstat` of the caller's file.
    fn stat(&mut self) -> Result<FileId, Errno> {
        fstat_id(self.file)
    }

    fn close(&mut self, file: OwnedFd) {
        drop(file);
    }
}

system_clock!(OpenKernel<'_>);
