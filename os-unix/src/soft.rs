//! The soft-lock protocol's operations on a POSIX system: each method of
//! [`swaplock_core::soft::Os`] as one syscall relative to the lock's
//! directory. What differs between systems (how a file is pinned, a
//! process's start token, where randomness comes from) is the
//! [`Platform`] an adapter supplies.

// `stat` field types differ between targets (and between rustix's raw and
// libc backends); the casts widen where needed and are no-ops elsewhere.
#![allow(clippy::unnecessary_cast, clippy::useless_conversion)]

use core::marker::PhantomData;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, Timestamps, CWD, UTIME_NOW};
use rustix::time::{ClockId, Timespec};
use std::ffi::CStr;
use swaplock_core::decide::{FileId, FileTime, Instant, Liveness};
use swaplock_core::fs::ExclusiveRename;
use swaplock_core::names::format_u64;
use swaplock_core::names::{NameCase, Token};
use swaplock_core::soft::{Clock, Dir, Entropy, Handles, NodeKind, Processes, Stat};
use swaplock_core::start::StartToken;
use swaplock_core::{Decimal, Errno, Pid};

/// What one POSIX system answers differently: the adapter for that system
/// implements it, and [`UnixOs`] does the rest.
pub trait Platform {
    /// The flags of a pin's `openat`, besides `O_NOFOLLOW|O_CLOEXEC`: one
    /// that holds the inode without reading it (`O_PATH` where it exists).
    const PIN_FLAGS: OFlags;
    /// The flag of an unnamed file's `openat` (`O_TMPFILE`), where the
    /// platform has one.
    const UNNAMED_FLAGS: Option<OFlags>;
    /// The start token of process `pid`, exactly as filelock computes it on
    /// this system, or `None` when it cannot be computed.
    fn start_token(pid: Pid) -> Option<StartToken>;
    /// Whether a task in another PID namespace runs as `pid` with the
    /// recorded start (PROTOCOL 4.5); `false` where there are none.
    fn runs_elsewhere(pid: Pid, start: Decimal<'_>) -> bool;
    /// 128 random bits from the OS.
    fn token() -> Token;
    /// How the directory open as `dir` compares names: byte for byte,
    /// unless the system says it folds case.
    fn name_case(dir: BorrowedFd<'_>) -> NameCase;
    /// How the filesystem of the directory open as `dir` renames without
    /// replacing ([`swaplock_core::fs::exclusive_rename`]); untrusted where
    /// the system cannot tell.
    fn exclusive_rename(dir: BorrowedFd<'_>) -> ExclusiveRename;
    /// `syncfs(fd)` where the system has it.
    fn sync_filesystem(fd: BorrowedFd<'_>) -> Result<(), Errno>;
}

fn errno(e: rustix::io::Errno) -> Errno {
    Errno::from_raw(e.raw_os_error())
}

/// File permission bits as rustix takes them (`mode_t` is 16 bits on
/// Apple systems; permission bits fit in 12).
pub(crate) fn permissions(bits: u32) -> Mode {
    Mode::from_bits_truncate(bits as rustix::fs::RawMode)
}

/// A file name as a C string, in a stack buffer.
fn c_name(name: &[u8]) -> Result<heapless::Vec<u8, 256>, Errno> {
    if name.contains(&0) {
        return Err(Errno::INVAL);
    }
    let mut buf = heapless::Vec::new();
    buf.extend_from_slice(name)
        .map_err(|_| Errno::from_raw(libc::ENAMETOOLONG))?;
    buf.push(0)
        .map_err(|_| Errno::from_raw(libc::ENAMETOOLONG))?;
    Ok(buf)
}

fn with_name<T>(name: &[u8], f: impl FnOnce(&CStr) -> rustix::io::Result<T>) -> Result<T, Errno> {
    let buf = c_name(name)?;
    let c = CStr::from_bytes_with_nul(&buf).map_err(|_| Errno::INVAL)?;
    f(c).map_err(errno)
}

/// `linkat(AT_FDCWD, "/proc/self/fd/<fd>", dir, name, AT_SYMLINK_FOLLOW)`:
/// names the unnamed file `file` (`O_TMPFILE`) `name` in `dir`, without
/// the privilege `AT_EMPTY_PATH` needs; `EEXIST` if the name is taken, so
/// that the file appears whole or not at all.
pub fn link_unnamed(file: BorrowedFd<'_>, dir: BorrowedFd<'_>, name: &[u8]) -> Result<(), Errno> {
    use std::os::fd::AsRawFd;
    let mut path = heapless::Vec::<u8, 32>::new();
    let mut digits = [0u8; 20];
    let fd = u64::try_from(file.as_raw_fd()).map_err(|_| Errno::BADF)?;
    for part in [
        b"/proc/self/fd/" as &[u8],
        format_u64(fd, &mut digits),
        b"\0",
    ] {
        path.extend_from_slice(part).map_err(|_| Errno::INVAL)?;
    }
    let from = CStr::from_bytes_with_nul(&path).map_err(|_| Errno::INVAL)?;
    with_name(name, |to| {
        rustix::fs::linkat(CWD, from, dir, to, AtFlags::SYMLINK_FOLLOW)
    })
}

fn stat(st: &crate::stat::RawStat) -> Stat {
    let kind = match FileType::from_raw_mode(st.st_mode as _) {
        FileType::RegularFile => NodeKind::Regular,
        FileType::Directory => NodeKind::Directory,
        FileType::Symlink => NodeKind::Symlink,
        _ => NodeKind::Other,
    };
    Stat {
        id: FileId {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
        },
        kind,
        nlink: st.st_nlink as u64,
        mtime: FileTime {
            sec: st.st_mtime as i64,
            nsec: st.st_mtime_nsec as u32,
        },
        ctime: FileTime {
            sec: st.st_ctime as i64,
            nsec: st.st_ctime_nsec as u32,
        },
    }
}

/// The soft-lock operations on one directory, the lock file's, on the
/// system `P`.
pub struct UnixOs<'d, P> {
    dir: BorrowedFd<'d>,
    /// The directory's filesystem's judgement, asked once: an open
    /// directory stays on the filesystem it was opened on, and an acquire
    /// asks at every attempt.
    exclusive_rename: Option<ExclusiveRename>,
    platform: PhantomData<P>,
}

impl<'d, P: Platform> UnixOs<'d, P> {
    /// Operations on the directory open as `dir`.
    pub fn new(dir: BorrowedFd<'d>) -> Self {
        UnixOs {
            dir,
            exclusive_rename: None,
            platform: PhantomData,
        }
    }

    /// Operations through a directory descriptor.
    pub fn on(dir: &'d impl AsFd) -> Self {
        Self::new(dir.as_fd())
    }
}

/// `open(path, O_RDONLY|O_DIRECTORY|O_CLOEXEC)` — the lock's directory, which
/// every operation is relative to.
///
/// # References
/// - [`open(2)`](https://man7.org/linux/man-pages/man2/open.2.html)
pub fn open_dir(path: &CStr) -> Result<OwnedFd, Errno> {
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno)
}

impl<P: Platform> Dir for UnixOs<'_, P> {
    type File = OwnedFd;

    /// `openat(dir, name, O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC[|O_TRUNC], mode)`.
    fn create_new(&mut self, name: &[u8], mode: u32, truncate: bool) -> Result<OwnedFd, Errno> {
        let mut flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if truncate {
            flags |= OFlags::TRUNC;
        }
        with_name(name, |c| {
            rustix::fs::openat(self.dir, c, flags, permissions(mode))
        })
    }

    /// `openat(dir, ".", O_TMPFILE|O_WRONLY|O_CLOEXEC, mode)` where the
    /// platform has `O_TMPFILE` (`EOPNOTSUPP` elsewhere).
    fn create_unnamed(&mut self, mode: u32) -> Result<OwnedFd, Errno> {
        let Some(unnamed) = P::UNNAMED_FLAGS else {
            return Err(Errno::OPNOTSUPP);
        };
        let flags = unnamed | OFlags::WRONLY | OFlags::CLOEXEC;
        rustix::fs::openat(self.dir, c".", flags, permissions(mode)).map_err(errno)
    }

    /// `linkat(AT_FDCWD, "/proc/self/fd/<fd>", dir, name,
    /// AT_SYMLINK_FOLLOW)` ([`link_unnamed`]).
    fn link_unnamed(&mut self, file: &OwnedFd, name: &[u8]) -> Result<(), Errno> {
        link_unnamed(file.as_fd(), self.dir, name)
    }

    /// `fsync(fd)`: the whole file, its directory entry's size and place
    /// on FAT included, which `fdatasync` may leave unwritten.
    fn sync_file(&mut self, file: &OwnedFd) -> Result<(), Errno> {
        rustix::fs::fsync(file).map_err(errno)
    }

    /// `openat(dir, name, O_RDONLY|O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC)`.
    fn open_read(&mut self, name: &[u8]) -> Result<OwnedFd, Errno> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        with_name(name, |c| {
            rustix::fs::openat(self.dir, c, flags, Mode::empty())
        })
    }

    /// `openat(dir, name, PIN_FLAGS|O_NOFOLLOW|O_CLOEXEC)`.
    fn pin(&mut self, name: &[u8]) -> Result<OwnedFd, Errno> {
        let flags = P::PIN_FLAGS | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        with_name(name, |c| {
            rustix::fs::openat(self.dir, c, flags, Mode::empty())
        })
    }

    /// `write(fd, buf)`.
    fn write(&mut self, file: &OwnedFd, buf: &[u8]) -> Result<usize, Errno> {
        rustix::io::write(file, buf).map_err(errno)
    }

    /// `pwrite(fd, buf, offset)`.
    fn write_at(&mut self, file: &OwnedFd, buf: &[u8], offset: u64) -> Result<usize, Errno> {
        rustix::io::pwrite(file, buf, offset).map_err(errno)
    }

    /// `ftruncate(fd, len)`.
    fn truncate(&mut self, file: &OwnedFd, len: u64) -> Result<(), Errno> {
        rustix::fs::ftruncate(file, len).map_err(errno)
    }

    /// `fchmod(fd, mode)`.
    fn chmod(&mut self, file: &OwnedFd, mode: u32) -> Result<(), Errno> {
        rustix::fs::fchmod(file, permissions(mode)).map_err(errno)
    }

    /// `futimens(fd, {UTIME_NOW, UTIME_NOW})`.
    fn touch(&mut self, file: &OwnedFd) -> Result<(), Errno> {
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_NOW,
        };
        rustix::fs::futimens(
            file,
            &Timestamps {
                last_access: now,
                last_modification: now,
            },
        )
        .map_err(errno)
    }

    /// `read(fd, buf)`.
    fn read(&mut self, file: &OwnedFd, buf: &mut [u8]) -> Result<usize, Errno> {
        rustix::io::read(file, buf).map_err(errno)
    }

    /// `fstat(fd)`.
    fn fstat(&mut self, file: &OwnedFd) -> Result<Stat, Errno> {
        crate::stat::fstat(file.as_fd())
            .map(|st| stat(&st))
            .map_err(errno)
    }

    /// `close(fd)`.
    fn close(&mut self, file: OwnedFd) {
        drop(file);
    }

    /// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`.
    fn lstat(&mut self, name: &[u8]) -> Result<Stat, Errno> {
        with_name(name, |c| {
            crate::stat::statat(self.dir, c, AtFlags::SYMLINK_NOFOLLOW)
        })
        .map(|st| stat(&st))
    }

    /// `renameat2(dir, a, dir, b, RENAME_EXCHANGE)` on Linux and Android (a
    /// raw syscall, so bionic before API 30 and old musl work), or
    /// `renameatx_np(.., RENAME_SWAP)` on Apple systems.
    fn exchange(&mut self, a: &[u8], b: &[u8]) -> Result<(), Errno> {
        let a = c_name(a)?;
        let a = CStr::from_bytes_with_nul(&a).map_err(|_| Errno::INVAL)?;
        with_name(b, |b| {
            rustix::fs::renameat_with(self.dir, a, self.dir, b, RenameFlags::EXCHANGE)
        })
    }

    /// `renameat(dir, from, dir, to)`.
    fn rename(&mut self, from: &[u8], to: &[u8]) -> Result<(), Errno> {
        let from = c_name(from)?;
        let from = CStr::from_bytes_with_nul(&from).map_err(|_| Errno::INVAL)?;
        with_name(to, |to| rustix::fs::renameat(self.dir, from, self.dir, to))
    }

    /// `unlinkat(dir, name, 0)`.
    fn unlink(&mut self, name: &[u8]) -> Result<(), Errno> {
        with_name(name, |c| {
            rustix::fs::unlinkat(self.dir, c, AtFlags::empty())
        })
    }

    /// The system's answer for this directory ([`Platform::name_case`]).
    fn name_case(&mut self) -> NameCase {
        P::name_case(self.dir)
    }

    /// The platform's answer ([`Platform::exclusive_rename`]), asked of
    /// the directory once.
    fn exclusive_rename(&mut self) -> ExclusiveRename {
        let dir = self.dir;
        *self
            .exclusive_rename
            .get_or_insert_with(|| P::exclusive_rename(dir))
    }

    fn sync_filesystem(&mut self, file: &OwnedFd) -> Result<(), Errno> {
        P::sync_filesystem(file.as_fd())
    }

    /// `renameat2(dir, from, dir, to, RENAME_NOREPLACE)`.
    fn rename_noreplace(&mut self, from: &[u8], to: &[u8]) -> Result<(), Errno> {
        let from = c_name(from)?;
        let from = CStr::from_bytes_with_nul(&from).map_err(|_| Errno::INVAL)?;
        with_name(to, |to| {
            rustix::fs::renameat_with(self.dir, from, self.dir, to, RenameFlags::NOREPLACE)
        })
    }

    /// `getdents64` over the directory.
    fn list(&mut self, visit: &mut dyn FnMut(&[u8])) -> Result<(), Errno> {
        let mut dir = rustix::fs::Dir::read_from(self.dir).map_err(errno)?;
        for entry in &mut dir {
            visit(entry.map_err(errno)?.file_name().to_bytes());
        }
        Ok(())
    }

    /// POSIX rules: nothing acts through a handle.
    fn handles(&mut self) -> Option<&mut dyn Handles<OwnedFd>> {
        None
    }
}

impl<P: Platform> Processes for UnixOs<'_, P> {
    fn probe(&mut self, pid: Pid) -> Liveness {
        probe(pid)
    }

    fn start_token(&mut self, pid: Pid) -> Option<StartToken> {
        P::start_token(pid)
    }

    fn runs_elsewhere(&mut self, pid: Pid, start: Decimal<'_>) -> bool {
        P::runs_elsewhere(pid, start)
    }

    fn begin_claim(&mut self, name: &[u8]) -> bool {
        swaplock_core::claims::begin(name)
    }

    fn end_claim(&mut self, name: &[u8]) {
        swaplock_core::claims::end(name)
    }
}

impl<P: Platform> Clock for UnixOs<'_, P> {
    /// [`monotonic_now`]: a clock that stops while the system sleeps.
    fn now(&mut self) -> Instant {
        monotonic_now()
    }

    /// `clock_gettime(CLOCK_REALTIME)`.
    fn wall(&mut self) -> FileTime {
        wall_now()
    }

    /// `nanosleep`.
    fn sleep(&mut self, duration: std::time::Duration) {
        std::thread::sleep(duration);
    }
}

impl<P: Platform> Entropy for UnixOs<'_, P> {
    fn token(&mut self) -> Token {
        P::token()
    }
}

/// `kill(pid, 0)` — whether process `pid` exists on this host, as the
/// core reads the answer.
///
/// # References
/// - [`kill(2)`](https://man7.org/linux/man-pages/man2/kill.2.html)
pub fn probe(pid: Pid) -> Liveness {
    match rustix::process::Pid::from_raw(pid.as_raw()) {
        Some(p) => Liveness::from_kill(rustix::process::test_kill_process(p).map_err(errno)),
        None => Liveness::Unknown(Errno::INVAL),
    }
}

/// The monotonic clock leases and grace periods are measured on, as
/// nanoseconds: one that stops while the system sleeps, as CPython's
/// `time.monotonic` does, so that a contender waking from a sleep longer
/// than a lease does not expire a live holder's lease at once.
/// `clock_gettime(CLOCK_MONOTONIC)` on Linux and Android (which does not
/// count suspend).
///
/// # References
/// - [`clock_gettime(2)`](https://man7.org/linux/man-pages/man2/clock_gettime.2.html)
#[cfg(not(target_vendor = "apple"))]
pub fn monotonic_now() -> Instant {
    let t = rustix::time::clock_gettime(ClockId::Monotonic);
    Instant(
        (t.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec as u64),
    )
}

/// The monotonic clock leases and grace periods are measured on, as
/// nanoseconds: `clock_gettime(CLOCK_UPTIME_RAW)` on Apple systems,
/// whose `CLOCK_MONOTONIC` counts the time the system sleeps (Libc's
/// `clock_gettime(3)`), and would expire a live holder's lease the moment a
/// Mac wakes from a sleep longer than the lease. `CLOCK_UPTIME_RAW` is the
/// clock `mach_absolute_time` reads, which CPython's `time.monotonic` uses
/// there.
///
/// # References
/// - [`clock_gettime(3)`](https://developer.apple.com/library/archive/documentation/System/Conceptual/ManPages_iPhoneOS/man3/clock_gettime.3.html)
#[cfg(target_vendor = "apple")]
pub fn monotonic_now() -> Instant {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid pointer to a timespec; the call
    // fails only for an unknown clock, leaving `t` zero.
    unsafe { libc::clock_gettime(libc::CLOCK_UPTIME_RAW, &mut t) };
    Instant(
        (t.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec as u64),
    )
}

/// `clock_gettime(CLOCK_REALTIME)` — the wall clock, as file times are.
///
/// # References
/// - [`clock_gettime(2)`](https://man7.org/linux/man-pages/man2/clock_gettime.2.html)
pub fn wall_now() -> FileTime {
    let t = rustix::time::clock_gettime(ClockId::Realtime);
    // tv_nsec is in 0..1_000_000_000.
    FileTime {
        sec: t.tv_sec,
        nsec: t.tv_nsec as u32,
    }
}

/// This process's PID.
pub fn current_pid() -> Pid {
    // getpid() is always in 1..=2^31-1.
    Pid::new(rustix::process::getpid().as_raw_nonzero().get() as u32)
        .unwrap_or_else(|| unreachable!())
}
