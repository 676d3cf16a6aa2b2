//! A read-write lock shared with Python filelock's `ReadWriteLock` (the one
//! built on SQLite), without SQLite (PROTOCOL 17).
//!
//! filelock's `ReadWriteLock` holds an SQLite transaction open on a
//! database that stays empty: a reader's `BEGIN` and `SELECT`, a writer's
//! `BEGIN EXCLUSIVE`. What excludes is not SQLite's code but the `fcntl`
//! byte-range locks its unix VFS takes on the file: a read lock on the
//! SHARED range (510 bytes from 1 GiB + 2) for a reader, write locks on the
//! PENDING and RESERVED bytes and the SHARED range for a writer, in an
//! order that gives a waiting writer the lock before any new reader. An
//! [`SqliteRwLock`] takes the same locks in the same order
//! ([`swaplock_core::sqlite::Ladder`]), so it excludes and is excluded by
//! filelock's `ReadWriteLock`, by `sqlite3` connections of any program
//! (`BEGIN IMMEDIATE` and `BEGIN EXCLUSIVE` included), and by other
//! [`SqliteRwLock`]s, in this process as in others.
//!
//! - **It never writes**: the database stays as it is (empty, as filelock
//!   leaves it); no journal, WAL or other file is made beside it.
//! - **Its file must be a lock's own**: a regular file, empty or an SQLite
//!   database in rollback-journal mode. A WAL-mode database is refused (its
//!   readers never wait for a writer), as filelock refuses it, and so is a
//!   file that is no database. A symlink at the path is refused too.
//! - **The name must stay**: before and after the lock is taken, the path
//!   must still name the file locked, or the acquire fails ("unlinked or
//!   replaced while acquiring"), as filelock's does. Never delete or
//!   replace the database of a live lock.
//! - **A waiting writer keeps new readers out** (SQLite's PENDING lock):
//!   readers that arrive after it wait, or are refused at once by
//!   `try_read`, until the writer has had its turn.
//!
//! # Platforms
//!
//! - **Linux (3.15 and later, 64-bit) and Android**: open file description
//!   locks (`F_OFD_SETLK`), which conflict with SQLite's classic ones
//!   (checked against Python's `sqlite3`). Each acquire has its own open
//!   file, so threads of one process exclude each other as processes do,
//!   and closing another descriptor of the file in the process never drops
//!   a lock. `F_GETLK` names their holder as PID -1.
//! - **Elsewhere (macOS, 32-bit Linux and Android, older Linux), and with
//!   [`owned_by_process`](SqliteRwLock::owned_by_process)**: classic
//!   `fcntl` locks, as SQLite itself takes them, through one descriptor per
//!   file per process: readers of one process share its read lock, a
//!   writer waits for the process's other holders, and no descriptor of a
//!   held file that this crate opened is closed before the last holder
//!   leaves. A descriptor of the file the program opens and closes itself
//!   (an `sqlite3` connection to it included) still drops the process's
//!   locks: keep the database to the lock.
//! - **Windows**: not available. SQLite's Windows VFS locks the same bytes
//!   with `LockFileEx`, but its reader takes the SHARED range only after an
//!   exclusive lock on PENDING, which no `fcntl`-style ladder reproduces;
//!   until a peer for it is tested against SQLite on Windows, there is
//!   none.
//!
//! ```no_run
//! use std::time::Duration;
//! use swaplock::SqliteRwLock;
//! # fn main() -> std::io::Result<()> {
//! // The file a Python `ReadWriteLock("/var/lib/app/data.lock")` uses.
//! let lock = SqliteRwLock::new("/var/lib/app/data.lock");
//! {
//!     let _reading = lock.read()?; // shared with other readers
//! }
//! let writing = lock.write_timeout(Duration::from_secs(5))?;
//! // ... no reader or other writer, Rust or Python, until released ...
//! writing.release()?;
//! # Ok(())
//! # }
//! ```

mod registry;

use crate::adapter::{kernel as os, sqlite as db};
use crate::error::{LockError, Step};
use registry::Entered;
use std::ffi::CStr;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use swaplock_core::decide::FileId;
use swaplock_core::kernel::Backoff;
use swaplock_core::sqlite::{self as protocol, Call, Climbed, Header, Named, Seen, Span, RELEASE};
pub use swaplock_core::sqlite::{Holding, Mode};
use swaplock_core::wait::{Clock, Patience, Wait};
use swaplock_core::Errno;

/// The mode a database this lock creates gets (before the umask), as
/// filelock creates it.
const CREATE_MODE: u32 = 0o600;

/// A read-write lock on an SQLite database file, shared with Python
/// filelock's `ReadWriteLock` and every SQLite connection on the file; see
/// the [module docs](self). Building one allocates; it opens nothing until
/// the first acquire, which creates the file (empty, mode 0600 before the
/// umask) if it is missing.
#[derive(Clone, Debug)]
pub struct SqliteRwLock {
    path: Arc<Path>,
    sys_path: Arc<CStr>,
    by_process: bool,
    /// The device of the last database whose filesystem was judged to
    /// share `fcntl` locks between hosts (or not known to keep them per
    /// client); `u64::MAX` before.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fs_judged: Arc<crate::sync::atomic::AtomicU64>,
}

/// A held [`SqliteRwLock`]: released by [`release`](Self::release) or on
/// drop.
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct SqliteRwGuard {
    path: Arc<Path>,
    mode: Mode,
    held: Option<Held>,
    /// The process that took it: a forked child's copy releases nothing.
    pid: crate::pid::Me,
}

#[derive(Debug)]
enum Held {
    /// An open file description lock on this descriptor of the file.
    Description(OwnedFd, FileId),
    /// Classic locks, through the registry's entry for the file.
    Process(FileId),
}

/// What one attempt came to.
enum Attempt {
    Held(SqliteRwGuard),
    /// The climb's patience ran out.
    Busy,
    /// A thread of this process holds the file in a conflicting way
    /// (classic locks only): the acquire pauses and tries again.
    BusyHere,
}

/// The monotonic clock of one acquire, from its start.
struct Ticks(Instant);

impl Clock for Ticks {
    fn now(&mut self) -> swaplock_core::decide::Instant {
        let nanos = crate::sync::now()
            .saturating_duration_since(self.0)
            .as_nanos();
        swaplock_core::decide::Instant(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The ladder never reads the wall clock; this is the system's.
    fn wall(&mut self) -> swaplock_core::decide::FileTime {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        swaplock_core::decide::FileTime {
            sec: i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
            nsec: since.subsec_nanos(),
        }
    }

    fn sleep(&mut self, pause: Duration) {
        crate::sync::thread::sleep(pause);
    }
}

/// The ladder's lock calls: open file description locks on the adapter,
/// or classic ones through the registry.
struct Calls<'t> {
    ticks: &'t mut Ticks,
    classic: Option<registry::Calls>,
}

impl Clock for Calls<'_> {
    fn now(&mut self) -> swaplock_core::decide::Instant {
        self.ticks.now()
    }
    fn wall(&mut self) -> swaplock_core::decide::FileTime {
        self.ticks.wall()
    }
    fn sleep(&mut self, pause: Duration) {
        self.ticks.sleep(pause)
    }
}

impl protocol::Rungs for Calls<'_> {
    type File = OwnedFd;

    fn lock(&mut self, file: &OwnedFd, call: Call) -> Result<(), Errno> {
        match &self.classic {
            Some(registry) => registry.lock(file, call),
            None => {
                crate::sync::syscall();
                os::fcntl_range(file, true, call)
            }
        }
    }
}

impl SqliteRwLock {
    /// The lock whose database is `path` (filelock's `lock_file`). A path
    /// with a NUL byte fails at the first acquire.
    ///
    /// ```
    /// use swaplock::SqliteRwLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("data.lock");
    /// let lock = SqliteRwLock::new(&path);
    /// let a = lock.try_read()?;
    /// let b = lock.try_read()?; // readers share it
    /// assert!(lock.try_write().is_err());
    /// drop((a, b));
    /// lock.try_write()?.release()?;
    /// assert_eq!(std::fs::metadata(&path)?.len(), 0, "never written");
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(path: impl Into<PathBuf>) -> Self {
        use std::os::unix::ffi::OsStrExt;
        let path: Arc<Path> = path.into().into();
        let sys_path = std::ffi::CString::new(path.as_os_str().as_bytes())
            .unwrap_or_default()
            .into();
        SqliteRwLock {
            path,
            sys_path,
            by_process: false,
            #[cfg(any(target_os = "linux", target_os = "android"))]
            fs_judged: Arc::new(crate::sync::atomic::AtomicU64::new(u64::MAX)),
        }
    }

    /// Takes classic `fcntl` locks, owned by the process, as SQLite itself
    /// does, even where the kernel has open file description locks: their
    /// holder's PID shows in `F_GETLK` (`swaplock status`). See the
    /// [module docs](self) for what a classic lock asks of the process.
    pub fn owned_by_process(mut self) -> Self {
        self.by_process = true;
        self
    }

    /// The database's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits for the read lock, shared with other readers.
    pub fn read(&self) -> io::Result<SqliteRwGuard> {
        self.acquire(Mode::Read, Wait::Forever)
    }

    /// Takes the read lock if no writer holds it or waits for it; an
    /// error of kind [`WouldBlock`](io::ErrorKind::WouldBlock) otherwise.
    pub fn try_read(&self) -> io::Result<SqliteRwGuard> {
        self.acquire(Mode::Read, Wait::No)
    }

    /// Waits at most `timeout` for the read lock; an error of kind
    /// [`TimedOut`](io::ErrorKind::TimedOut) then.
    pub fn read_timeout(&self, timeout: Duration) -> io::Result<SqliteRwGuard> {
        self.acquire(Mode::Read, within(timeout))
    }

    /// Waits for the write lock, which excludes every reader and writer.
    /// While it waits for readers to leave, no new reader starts.
    pub fn write(&self) -> io::Result<SqliteRwGuard> {
        self.acquire(Mode::Write, Wait::Forever)
    }

    /// Takes the write lock if nobody holds the lock; an error of kind
    /// [`WouldBlock`](io::ErrorKind::WouldBlock) otherwise.
    pub fn try_write(&self) -> io::Result<SqliteRwGuard> {
        self.acquire(Mode::Write, Wait::No)
    }

    /// Waits at most `timeout` for the write lock; an error of kind
    /// [`TimedOut`](io::ErrorKind::TimedOut) then.
    pub fn write_timeout(&self, timeout: Duration) -> io::Result<SqliteRwGuard> {
        self.acquire(Mode::Write, within(timeout))
    }

    /// Who holds the lock now, as `F_GETLK` shows it: a writer, readers
    /// (one of them named), a writer waiting or reserved; each a PID, -1
    /// for an open file description lock, and nobody in this process
    /// through classic locks (the query never sees its own process's).
    /// A missing file is free; the file is never created.
    ///
    /// ```
    /// use swaplock::SqliteRwLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let lock = SqliteRwLock::new(dir.path().join("data.lock"));
    /// assert!(!lock.holding()?.held());
    /// let _writing = lock.write()?;
    /// // This process's own open file description lock shows as PID -1
    /// // (its classic locks, where those are taken, do not show to it).
    /// assert!(matches!(lock.holding()?.exclusive, Some(-1) | None));
    /// # Ok(())
    /// # }
    /// ```
    pub fn holding(&self) -> io::Result<Holding> {
        let fd = match os::open_existing_read_only(&self.sys_path, false) {
            Ok(fd) => fd,
            Err(e) if e == Errno::NOENT => return Ok(Holding::default()),
            Err(e) => return Err(LockError::errno(&self.path, Step::Open, e)),
        };
        let seen = |span: Span| {
            os::fcntl_query_range(&fd, span).map(|c| match c {
                os::Conflict::None => Seen::Free,
                os::Conflict::Read(pid) => Seen::Read(pid),
                os::Conflict::Write(pid) => Seen::Write(pid),
            })
        };
        let probes = (|| {
            Ok((
                seen(Span::PENDING)?,
                seen(Span::RESERVED)?,
                seen(Span::SHARED)?,
            ))
        })();
        let id = os::fstat_id(&fd).ok();
        registry::close(fd, id);
        let (pending, reserved, shared) =
            probes.map_err(|e| LockError::errno(&self.path, Step::Lock, e))?;
        Ok(protocol::holding(pending, reserved, shared))
    }

    fn acquire(&self, mode: Mode, wait: Wait<Instant>) -> io::Result<SqliteRwGuard> {
        let mut ticks = Ticks(crate::sync::now());
        let started = ticks.now();
        let mut patience = Backoff::of(wait.left(|d| d.saturating_duration_since(ticks.0)));
        loop {
            let busy = match self.attempt(mode, &mut ticks, &mut patience, started)? {
                Attempt::Held(guard) => return Ok(guard),
                Attempt::Busy => None,
                Attempt::BusyHere => {
                    let elapsed = ticks.now().since(started);
                    patience.busy(&Errno::AGAIN, elapsed)
                }
            };
            match busy {
                Some(pause) => ticks.sleep(pause),
                None => return Err(self.busy(wait.timed())),
            }
        }
    }

    fn busy(&self, timed: bool) -> io::Error {
        let kind = match timed {
            true => io::ErrorKind::TimedOut,
            false => io::ErrorKind::WouldBlock,
        };
        let source = match timed {
            true => io::Error::from(kind),
            false => crate::error::os_error(Errno::AGAIN),
        };
        LockError::io(&self.path, Step::Lock, kind, source)
    }

    fn attempt(
        &self,
        mode: Mode,
        ticks: &mut Ticks,
        patience: &mut Backoff,
        started: swaplock_core::decide::Instant,
    ) -> io::Result<Attempt> {
        if !self.by_process {
            let (fd, id) = self.open()?;
            if crate::kernel::inodes::description_locks(&fd) {
                let mut rungs = Calls {
                    ticks,
                    classic: None,
                };
                let climbed = protocol::climb(&mut rungs, &fd, mode, patience, started);
                return match climbed {
                    Ok(Climbed::Held) => self.after(Held::Description(fd, id), mode),
                    Ok(Climbed::Busy) => {
                        registry::close(fd, Some(id));
                        Ok(Attempt::Busy)
                    }
                    Err(e) => {
                        registry::close(fd, Some(id));
                        Err(LockError::errno(&self.path, Step::Lock, e))
                    }
                };
            }
            // The kernel has no open file description locks: classic ones.
            registry::close(fd, Some(id));
        }
        // Classic locks: a file this process has an entry for is admitted
        // without a new descriptor.
        if let Ok(id) = os::stat_id(&self.sys_path, false) {
            let entered = registry::join(id, mode);
            if let Some(entered) = entered {
                return self.classic(entered, id, mode, ticks, patience, started);
            }
        }
        let (fd, id) = self.open()?;
        let entered = registry::enter(fd, id, mode);
        self.classic(entered, id, mode, ticks, patience, started)
    }

    /// A classic-lock attempt, once the registry admitted it.
    fn classic(
        &self,
        entered: Entered,
        id: FileId,
        mode: Mode,
        ticks: &mut Ticks,
        patience: &mut Backoff,
        started: swaplock_core::decide::Instant,
    ) -> io::Result<Attempt> {
        let fd = match entered {
            Entered::Joined => return self.after(Held::Process(id), mode),
            Entered::Busy => return Ok(Attempt::BusyHere),
            Entered::Climb(fd) => fd,
        };
        let mut rungs = Calls {
            ticks,
            classic: Some(registry::Calls { id, mode }),
        };
        let climbed = protocol::climb(&mut rungs, &*fd, mode, patience, started);
        registry::settle(fd, id, mode, climbed == Ok(Climbed::Held));
        match climbed {
            Ok(Climbed::Held) => self.after(Held::Process(id), mode),
            Ok(Climbed::Busy) => Ok(Attempt::Busy),
            Err(e) => Err(LockError::errno(&self.path, Step::Lock, e)),
        }
    }

    /// Opens the database as filelock does, and checks it before any lock
    /// is taken: a regular file, a usable header, still named by the path.
    fn open(&self) -> io::Result<(OwnedFd, FileId)> {
        let fd = db::open_database(&self.sys_path, CREATE_MODE)
            .map_err(|e| LockError::errno(&self.path, Step::Open, e))?;
        let (id, regular) = match db::identify(&fd) {
            Ok(found) => found,
            Err(e) => {
                registry::close(fd, None);
                return Err(LockError::errno(&self.path, Step::Fstat, e));
            }
        };
        if let Err(e) = self.judge_filesystem(&fd, id.dev) {
            registry::close(fd, Some(id));
            return Err(e);
        }
        let mut head = [0u8; protocol::HEADER_LEN];
        let refusal = match regular {
            false => Some(Refusal::NotRegular),
            true => match db::read_head(&fd, &mut head) {
                Err(e) => Some(Refusal::Read(e)),
                Ok(n) => match protocol::judge_header(&head[..n]) {
                    verdict if verdict.usable() => None,
                    verdict => Some(Refusal::Header(verdict)),
                },
            },
        };
        let refusal = refusal.or_else(|| {
            let named = protocol::named(id, os::stat_id(&self.sys_path, false));
            (named != Named::Same).then_some(Refusal::Named(named))
        });
        match refusal {
            None => Ok((fd, id)),
            Some(why) => {
                registry::close(fd, Some(id));
                Err(self.refused(why))
            }
        }
    }

    /// Refuses a database on a filesystem that keeps `fcntl` locks per
    /// client mount (sshfs; NFS mounted `nolock` or `local_lock=posix`;
    /// PROTOCOL 13.5), where the lock would exclude no other host (C-DB2),
    /// or that refuses open file description locks (the kernel's SMB
    /// client), once per device the lock meets.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn judge_filesystem(&self, fd: &OwnedFd, dev: u64) -> io::Result<()> {
        use crate::sync::atomic::Ordering;
        use std::os::fd::AsFd;
        if self.fs_judged.load(Ordering::Relaxed) == dev {
            return Ok(());
        }
        let ofd = !self.by_process && crate::kernel::inodes::description_locks(fd);
        let family = swaplock_core::fs::Family::Fcntl;
        crate::netfs::check_kernel_file(&self.path, fd.as_fd(), dev, family, ofd, false)?;
        self.fs_judged.store(dev, Ordering::Relaxed);
        Ok(())
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn judge_filesystem(&self, _fd: &OwnedFd, _dev: u64) -> io::Result<()> {
        Ok(())
    }

    /// The lock is held: it stays held only if the path still names its
    /// file (DB3); otherwise it is released and the acquire fails.
    fn after(&self, held: Held, mode: Mode) -> io::Result<Attempt> {
        let id = match &held {
            Held::Description(_, id) | Held::Process(id) => *id,
        };
        let guard = SqliteRwGuard {
            path: Arc::clone(&self.path),
            mode,
            held: Some(held),
            pid: crate::pid::id(),
        };
        match protocol::named(id, os::stat_id(&self.sys_path, false)) {
            Named::Same => Ok(Attempt::Held(guard)),
            named => {
                let _ = guard.release();
                Err(self.refused(Refusal::Named(named)))
            }
        }
    }

    fn refused(&self, why: Refusal) -> io::Error {
        let (step, kind, text) = match why {
            Refusal::Read(e) => return LockError::errno(&self.path, Step::Open, e),
            Refusal::Named(Named::Unknown(e)) => {
                return LockError::errno(&self.path, Step::Stat, e)
            }
            Refusal::NotRegular => (
                Step::Open,
                io::ErrorKind::InvalidInput,
                "not a regular file: an SQLite lock's database must be one",
            ),
            Refusal::Header(Header::Wal) => (
                Step::Open,
                io::ErrorKind::InvalidData,
                "a WAL-mode database, whose readers never wait for a writer: no lock can be \
                 built on it; give the lock a file of its own",
            ),
            Refusal::Header(Header::Newer) => (
                Step::Open,
                io::ErrorKind::InvalidData,
                "an SQLite database of a newer file format, which SQLite opens read only; \
                 give the lock a file of its own",
            ),
            Refusal::Header(_) => (
                Step::Open,
                io::ErrorKind::InvalidData,
                "neither empty nor an SQLite database; give the lock a file of its own",
            ),
            Refusal::Named(_) => (
                Step::Stat,
                io::ErrorKind::Other,
                "the lock database was unlinked or replaced while acquiring; leave it in place",
            ),
        };
        LockError::io(&self.path, step, kind, io::Error::new(kind, text))
    }
}

/// Why a database is not locked.
enum Refusal {
    NotRegular,
    Read(Errno),
    Header(Header),
    Named(Named),
}

/// The wait of a timeout from now: until its deadline, or forever where
/// that instant is past the clock's range.
fn within(timeout: Duration) -> Wait<Instant> {
    crate::sync::now()
        .checked_add(timeout)
        .map_or(Wait::Forever, Wait::Until)
}

impl SqliteRwGuard {
    /// Whether it is the read or the write lock.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The database's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Releases the lock (what a drop does, with the error reported). In
    /// a child forked while the guard was held, the lock is the parent's:
    /// nothing is released, and the error says so.
    pub fn release(mut self) -> io::Result<()> {
        if self.pid != crate::pid::id() {
            self.forget();
            return Err(LockError::forked(
                &self.path,
                Step::Unlock,
                self.pid.number(),
                "the lock",
            ));
        }
        self.unlock()
            .map_err(|e| LockError::errno(&self.path, Step::Unlock, e))
    }

    fn unlock(&mut self) -> Result<(), Errno> {
        match self.held.take() {
            None => Ok(()),
            Some(Held::Description(fd, id)) => {
                crate::sync::syscall();
                let unlocked = os::fcntl_range(&fd, true, RELEASE);
                registry::close(fd, Some(id));
                unlocked
            }
            Some(Held::Process(id)) => registry::leave(id, self.mode),
        }
    }

    /// Closes what a forked child's copy of the guard holds, releasing
    /// nothing: an open file description lock stays the parent's while
    /// the parent's descriptor is open, and a classic one is not the
    /// child's.
    fn forget(&mut self) {
        if let Some(Held::Description(fd, id)) = self.held.take() {
            registry::close(fd, Some(id));
        }
    }
}

impl Drop for SqliteRwGuard {
    fn drop(&mut self) {
        match self.pid == crate::pid::id() {
            true => {
                let _ = self.unlock();
            }
            false => self.forget(),
        }
    }
}
