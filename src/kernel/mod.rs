//! Kernel locks by the with-lock-ex protocol.
//!
//! The lock is held by the process that holds an `fcntl` write lock on the
//! first byte of the plain file the path names. Only a holder may delete the
//! file or make the name refer to another file, and it stops holding the lock
//! as soon as it does. To acquire, a process opens the path (creating the
//! file if needed, never truncating it), takes the lock, and then compares
//! `fstat` of its descriptor with `stat` of the path: the same device and
//! inode means the lock is held; another file, or none, means a holder
//! removed the file after we opened it, so we close and start again. This is
//! what makes it safe to delete lock files: see [`FileLockGuard::remove`].
//!
//! # Properties of `fcntl` locks to know
//!
//! - **Who owns them.** On Linux (3.15 and later) and Android,
//!   [`FileLock::new`] takes an *open file description* lock
//!   (`F_OFD_SETLK`): it belongs to the lock's own open file, so two
//!   [`FileLock`]s for one file exclude each other in one process as
//!   between processes (threads included), and closing another descriptor
//!   of the file leaves it held. It still conflicts with every classic
//!   `fcntl` lock, so `with-lock-ex` and Python's `fcntl.lockf` stay
//!   excluded; `F_GETLK` reports its holder as PID -1.
//!   [`FileLock::owned_by_process`] takes the classic lock instead, as the
//!   `with-lock-ex` command does: a classic lock belongs to the process,
//!   so two such locks for one file in one process do not exclude each
//!   other, and closing *any* descriptor of the file in the process (say,
//!   a `std::fs::read` of the lock file) releases it at once.
//! - **Where the kernel has no open file description locks** (Apple
//!   systems, whose `F_OFD_SETLK` from macOS 14 is refused with `ENOTSUP`
//!   on non-local filesystems; 32-bit Linux and Android; Linux before 3.15,
//!   detected at the first lock; `SWAPLOCK_FCNTL_OFD=0` in the environment
//!   chooses it too), [`FileLock::new`] takes the classic lock and this process keeps
//!   a registry of the files it locks, by device and inode: a second lock
//!   of a held file, by any thread, waits for the first as another
//!   process would (or fails at once, or times out); descriptors this
//!   crate opens on a held file (failed attempts, `FileLock::holder` (Unix),
//!   [`OpenFileLock`](crate::OpenFileLock)s) are kept open until the last
//!   holder releases, so they never release it; shared guards share one
//!   read lock, released with the last of them. A descriptor the program
//!   opens and closes itself still releases the lock: do not open the
//!   lock file elsewhere in the process, or use [`FileLock::flock`].
//! - **Across `fork` and `exec`.** A classic lock is not inherited by the
//!   child of a fork; an open file description lock, like an `flock` lock,
//!   belongs to the open file, which a forked child shares. The lock stays
//!   the parent's: the child's guard refuses to unlock or remove it and
//!   only closes its descriptor on drop, and the parent's release (drop
//!   included) unlocks explicitly, so a child that keeps the descriptor
//!   does not keep the lock. Both kinds survive `exec` on a descriptor
//!   without close-on-exec, which is how the `with-lock-ex` command hands
//!   the lock to its command.
//! - **Readers can block the lock.** Anyone who can open the file, even read
//!   only, can take a conflicting read lock; keep lock files from being
//!   world-readable.
//! - **`fcntl` and `flock` locks do not see each other** on Linux: a holder of
//!   one kind does not exclude a contender of the other. All processes on a
//!   path must use the same kind.
//!
//! # Deadlocks
//!
//! There is no deadlock detection across lock files. Give the locks of a
//! system an order and always acquire in that order: for locks `A > B`,
//! never acquire `A` while holding `B`; release `B` first, then take `A`
//! and `B` in that order.
//!
//! ```no_run
//! use swaplock::FileLock;
//! # fn main() -> std::io::Result<()> {
//! // Hierarchy: the index lock ranks above every shard lock.
//! let index = FileLock::new("/var/lib/app/index.lock");
//! let shard = FileLock::new("/var/lib/app/shard-7.lock");
//! let _i = index.lock()?; // higher first
//! let _s = shard.lock()?; // then lower
//! # Ok(())
//! # }
//! ```

use crate::adapter::kernel as os;
use crate::error::{LockError, Step};
use crate::held::{self, Held, Registered};
#[cfg(unix)]
use crate::soft::{SoftLock, SoftLockGuard};
use crate::sync::atomic::{AtomicBool, Ordering};
use std::io;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use swaplock_core::decide::{with_lock_ex_mode, FileId};
use swaplock_core::fs::Family;
use swaplock_core::kernel as protocol;
use swaplock_core::kernel::Names;
#[cfg(windows)]
use swaplock_core::kernel::{Backoff, Outcome};
use swaplock_core::Errno;

/// How long a kernel lock's acquire may wait: the core's request, on the
/// monotonic clock of [`crate::sync::now`].
pub(crate) type Wait = swaplock_core::wait::Wait<Instant>;

mod attempt;
#[cfg(unix)]
mod fallback;
mod fs_check;
mod guard;
mod holder;
#[cfg(unix)]
pub(crate) mod inodes;
pub(crate) mod open_file;
mod platform;
mod registry;
#[cfg(unix)]
pub(crate) mod wait;

use attempt::*;
use guard::*;
use platform::*;
use registry::*;

pub use guard::FileLockGuard;
pub use holder::KernelHolder;
pub use platform::current_umask;

/// Which kernel lock a [`FileLock`] takes.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An `fcntl` write lock on byte 0: the with-lock-ex protocol, shared
    /// with `with-lock-ex`, Python's `fcntl.lockf` and most C programs.
    Fcntl,
    /// An `flock` exclusive lock: excludes other open file descriptions of
    /// the same process too, and is shared with forked children. (On
    /// Windows both kinds are `LockFileEx` on byte 0, which behaves so.)
    Flock,
}

impl Kind {
    /// The family of this kind's locks.
    pub(crate) fn family(self) -> Family {
        match self {
            Kind::Fcntl => Family::Fcntl,
            Kind::Flock => Family::Flock,
        }
    }
}

/// A kernel file lock on a path. Building one allocates; locking and
/// unlocking do not.
///
/// ```no_run
/// use std::io::ErrorKind;
/// use swaplock::FileLock;
/// # fn main() -> std::io::Result<()> {
/// let lock = FileLock::new("/run/lock/backup.lock");
/// match lock.try_lock() {
///     Ok(guard) => {
///         // ... the lock is held until `guard` is dropped ...
///         guard.release()?;
///     }
///     Err(e) if e.kind() == ErrorKind::WouldBlock => eprintln!("backup already running"),
///     Err(e) => return Err(e),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct FileLock {
    path: Arc<Path>,
    sys_path: Arc<SysPath>,
    kind: Kind,
    process_owned: bool,
    mode: u32,
    follow_symlinks: bool,
    /// Set for good once `flock` answered `ENOSYS`: from then on this lock
    /// is a `SoftFileLock`, as filelock switches.
    soft: Arc<AtomicBool>,
    /// The soft lock an `flock` lock falls back to (only
    /// [`FileLock::flock`] gives one).
    #[cfg(unix)]
    fallback: Option<&'static fallback::SoftFallback>,
    /// Whether a filesystem that keeps locks per client mount is accepted
    /// ([`FileLock::allow_client_local`]).
    client_local: bool,
    /// The device of the last file this lock was taken on whose filesystem
    /// was judged to share its locks between hosts (or not known to keep
    /// them per client); [`fs_check::NOT_JUDGED`] before.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fs_judged: Arc<crate::sync::atomic::AtomicU64>,
    /// Whether the filesystem of the lock file may answer a lookup of its
    /// name from a client's cache (a network filesystem, or one not told),
    /// or from a delegation of the file (NFSv4): the identity check then
    /// asks the server, and reads the directory's listing (PROTOCOL 7.16).
    /// Until a filesystem was read, it may ([`fs_check::names_code`]).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    names: Arc<crate::sync::atomic::AtomicU8>,
}

/// What a waiting acquire knows, for its [`FileLock::lock_with`] hook.
pub struct WaitStatus<'a> {
    lock: &'a FileLock,
    waited: Duration,
}

impl WaitStatus<'_> {
    /// How long the acquire has waited.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Who holds the lock now ([`FileLock::holder`], queried anew at each
    /// call).
    #[cfg(unix)]
    pub fn holder(&self) -> io::Result<Option<KernelHolder>> {
        self.lock.holder()
    }

    /// The lock waited for.
    pub fn lock(&self) -> &FileLock {
        self.lock
    }
}

impl FileLock {
    /// An `fcntl` lock (the with-lock-ex protocol) on `path`.
    ///
    /// The file is created if missing, with the mode with-lock-ex uses: read
    /// and write for each class of user the umask grants write to (0660
    /// under umask 002, 0600 under 022), unless [`mode`](Self::mode) says
    /// otherwise. A path with a NUL byte fails at the first lock call.
    ///
    /// ```
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("backup.lock");
    /// let guard = FileLock::new(&path).lock()?;
    /// assert!(path.exists()); // created by the first lock
    /// guard.release()?;
    /// assert!(path.exists()); // and left for the next holder
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::with_kind(path.into(), Kind::Fcntl)
    }

    /// An `flock` lock on `path`, with the same identity check.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("jobs.lock");
    /// let _guard = FileLock::flock(&path).lock()?;
    /// // Held, it excludes another flock lock of the file, even in this process:
    /// let again = FileLock::flock(&path).try_lock();
    /// assert_eq!(again.unwrap_err().kind(), ErrorKind::WouldBlock);
    /// # Ok(())
    /// # }
    /// ```
    pub fn flock(path: impl Into<PathBuf>) -> Self {
        #[allow(unused_mut)]
        let mut lock = Self::with_kind(path.into(), Kind::Flock);
        #[cfg(unix)]
        {
            lock.fallback = Some(&fallback::SOFT);
        }
        lock
    }

    fn with_kind(path: PathBuf, kind: Kind) -> Self {
        FileLock {
            sys_path: sys_path(&path),
            path: path.into(),
            kind,
            process_owned: false,
            mode: with_lock_ex_mode(current_umask()),
            follow_symlinks: false,
            soft: Arc::new(AtomicBool::new(false)),
            #[cfg(unix)]
            fallback: None,
            client_local: false,
            #[cfg(any(target_os = "linux", target_os = "android"))]
            fs_judged: Arc::new(crate::sync::atomic::AtomicU64::new(fs_check::NOT_JUDGED)),
            #[cfg(any(target_os = "linux", target_os = "android"))]
            names: Arc::new(crate::sync::atomic::AtomicU8::new(fs_check::names_code(
                Names::Cached,
            ))),
        }
    }

    /// Accepts a filesystem whose kernel locks exclude only the processes
    /// that use this client mount: an SFTP or SMB client in userspace
    /// (`fuse.sshfs`, `fuse.smbnetfs`, ...), NFS mounted `nolock` or
    /// `local_lock=`, SMB mounted `nobrl` (PROTOCOL 13.5). By default a
    /// lock there is refused (`ErrorKind::Unsupported`, [`Step::Filesystem`]),
    /// because a process on another host could hold it at the same time;
    /// accept it only when no other host uses the directory. Linux and
    /// Android read the filesystem; elsewhere nothing is refused.
    ///
    /// ```no_run
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// // A laptop's sshfs mount of a build directory that only it uses.
    /// let _guard = FileLock::new("mnt/build/.lock").allow_client_local(true).lock()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn allow_client_local(mut self, allow: bool) -> Self {
        self.client_local = allow;
        self
    }

    /// Makes an `fcntl` lock a classic POSIX record lock, owned by the
    /// process, as `with-lock-ex` and C programs take it, instead of (on
    /// Linux and Android, the default there) an open file description lock
    /// owned by this lock's open file. Owned by the process, the lock does
    /// not exclude another lock of this process on the same file, and
    /// closing *any* descriptor of the file in the process releases it; in
    /// exchange `F_GETLK` (`with-lock-ex -l`, `FileLock::holder` on Unix) reports
    /// this process's PID rather than -1. Elsewhere (macOS and the other
    /// BSDs, Linux before 3.15) every `fcntl` lock is owned by the process.
    /// Both exclude each other across processes. No effect on `flock`.
    ///
    /// ```no_run
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// // As with-lock-ex holds it: -l elsewhere names this process.
    /// let _guard = FileLock::new("/var/lock/job.lock").owned_by_process().lock()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn owned_by_process(mut self) -> Self {
        self.process_owned = true;
        self
    }

    fn scope(&self, shared: bool) -> Scope {
        Scope::new(self.kind, self.process_owned, shared)
    }

    /// The mode a newly created lock file gets (before the umask applies).
    ///
    /// ```no_run
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// // Only the owner may open a new lock file (a reader could block the lock).
    /// let _guard = FileLock::new("/run/lock/backup.lock").mode(0o600).lock()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn mode(mut self, mode: u32) -> Self {
        self.mode = mode & 0o7777;
        self
    }

    /// Whether a symlink at the path is followed to the file it names
    /// (`with-lock-ex` does). By default it is not: opening fails with
    /// `ELOOP`, so a planted link cannot redirect the lock.
    ///
    /// ```no_run
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// // /run/lock/app.lock is a symlink to the lock file on the data volume.
    /// let _guard = FileLock::new("/run/lock/app.lock").follow_symlinks(true).lock()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn follow_symlinks(mut self, follow: bool) -> Self {
        self.follow_symlinks = follow;
        self
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The kind of kernel lock taken.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Waits for the lock and holds it until the guard is dropped.
    ///
    /// After a first attempt, the wait is made in the kernel. For a lock
    /// that belongs to its open file (`flock`; `fcntl` on 64-bit Linux and
    /// Android, unless [owned by the process](Self::owned_by_process)) it
    /// is made on the waiting thread that [`lock_timeout`](Self::lock_timeout)
    /// waits on too, so that the process never has two blocked calls for
    /// one lock (one could take it after the other's hold, for nobody).
    ///
    /// Where a second lock of the file in this process waits for the first
    /// (an open file description `fcntl` lock, `flock`, Windows), a thread
    /// that waits so for a file it already holds through another guard
    /// gets an error of kind [`Deadlock`](io::ErrorKind::Deadlock) at once
    /// instead of waiting forever. A guard counts as its acquiring
    /// thread's, even once moved to another thread: wait with a timeout
    /// where guards move.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let lock = FileLock::new(dir.path().join("backup.lock"));
    /// let guard = lock.lock()?;
    /// // Waiting for it again on this thread would never end: refused at once.
    /// assert_eq!(lock.lock().unwrap_err().kind(), ErrorKind::Deadlock);
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock(&self) -> io::Result<FileLockGuard> {
        self.acquire(Wait::Forever, false)
    }

    /// Takes the lock if it is free; an error of kind
    /// [`WouldBlock`](io::ErrorKind::WouldBlock) if another process holds it.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("backup.lock");
    /// let _running = FileLock::new(&path).try_lock()?;
    /// // Another lock of the file finds it taken, without waiting:
    /// let second = FileLock::new(&path).try_lock();
    /// assert_eq!(second.unwrap_err().kind(), ErrorKind::WouldBlock);
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_lock(&self) -> io::Result<FileLockGuard> {
        self.acquire(Wait::No, false)
    }

    /// Waits for the shared (read) lock: any number of holders share it,
    /// and it excludes the exclusive lock, both ways. An `fcntl` read lock
    /// on the first byte (`with-lock-ex -l` reports `read PID`, -1 for an
    /// open file description lock), `flock(LOCK_SH)` (as `flock -s` takes
    /// it), or `LockFileEx` without the exclusive flag on Windows; with the
    /// same identity check as the exclusive lock. A shared guard cannot
    /// [`remove`](FileLockGuard::remove) the file: others may hold it too.
    /// The file is opened for writing (and created if missing), as for the
    /// exclusive lock: a read-only file or filesystem is an open error,
    /// where `flock -s` would open it read only.
    /// An `flock` lock on a filesystem without `flock` has no soft
    /// fallback when shared: it fails with the `ENOSYS` error.
    ///
    /// ```no_run
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let config = FileLock::new("/etc/app/config.lock");
    /// let _readers = config.lock_shared()?; // other readers may hold it too
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock_shared(&self) -> io::Result<FileLockGuard> {
        self.acquire(Wait::Forever, true)
    }

    /// Takes the shared lock if no exclusive holder has the lock; an error
    /// of kind [`WouldBlock`](io::ErrorKind::WouldBlock) otherwise.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("config.lock");
    /// let _reader = FileLock::new(&path).try_lock_shared()?;
    /// let _other_reader = FileLock::new(&path).try_lock_shared()?; // readers share it
    /// let writer = FileLock::new(&path).try_lock();
    /// assert_eq!(writer.unwrap_err().kind(), ErrorKind::WouldBlock);
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_lock_shared(&self) -> io::Result<FileLockGuard> {
        self.acquire(Wait::No, true)
    }

    /// Waits up to `timeout` for the shared lock; an error of kind
    /// [`TimedOut`](io::ErrorKind::TimedOut) if an exclusive holder keeps
    /// it.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use std::time::Duration;
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("config.lock");
    /// let _writer = FileLock::new(&path).lock()?;
    /// let reader = FileLock::new(&path).lock_shared_timeout(Duration::from_millis(50));
    /// assert_eq!(reader.unwrap_err().kind(), ErrorKind::TimedOut);
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock_shared_timeout(&self, timeout: Duration) -> io::Result<FileLockGuard> {
        self.acquire(within(timeout), true)
    }

    /// Waits up to `timeout` for the lock; an error of kind
    /// [`TimedOut`](io::ErrorKind::TimedOut) if it stays held.
    ///
    /// The kernel has no timed wait for these locks. For a lock that
    /// belongs to its open file (`flock`; `fcntl` on 64-bit Linux and
    /// Android, unless [owned by the process](Self::owned_by_process))
    /// the wait is made in the kernel all the same, on a thread of this
    /// crate that waits in the blocking lock call and hands the lock over,
    /// so this returns as soon as the kernel grants it. A wait that times
    /// out leaves that thread waiting (at most 16 such threads per
    /// process); the next wait for the same lock in this process, timed
    /// or not, waits on it, and once the lock is granted with nobody waiting any
    /// more, the thread releases it at once and ends. A classic `fcntl`
    /// lock is the process's, which such a thread would share: its timed
    /// wait polls, as do waits beyond those 16 and on Windows, pausing
    /// 1 ms at first and at most 25 ms between attempts (the
    /// [core's `Backoff`](swaplock_core::kernel::Backoff)).
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use std::time::Duration;
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("backup.lock");
    /// let _running = FileLock::new(&path).lock()?;
    /// let waited = FileLock::new(&path).lock_timeout(Duration::from_millis(50));
    /// assert_eq!(waited.unwrap_err().kind(), ErrorKind::TimedOut);
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock_timeout(&self, timeout: Duration) -> io::Result<FileLockGuard> {
        self.acquire(within(timeout), false)
    }

    /// Waits for the lock (up to `timeout`, if given), calling `hook`
    /// while it is held: after the first attempt, then every 100 ms. The
    /// hook can say who holds the lock (`WaitStatus::holder`, on Unix) and
    /// for how long the acquire has waited, for a progress line, and cancel the
    /// wait by returning [`ControlFlow::Break`]: the acquire then fails
    /// with an error of kind [`Interrupted`](io::ErrorKind::Interrupted),
    /// holding nothing. (Another thread cancels by setting a flag the hook
    /// reads.) Without a timeout, a thread that holds the lock through
    /// another guard gets the [`Deadlock`](io::ErrorKind::Deadlock) error,
    /// as from [`lock`](Self::lock).
    ///
    /// ```no_run
    /// use std::ops::ControlFlow;
    /// use std::time::Duration;
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let lock = FileLock::new("/run/lock/backup.lock");
    /// let guard = lock.lock_with(Some(Duration::from_secs(60)), |wait| {
    ///     eprintln!("waited {:.1?} so far", wait.waited());
    ///     #[cfg(unix)]
    ///     if let Ok(Some(h)) = wait.holder() {
    ///         eprintln!("held by pid {}", h.pid);
    ///     }
    ///     ControlFlow::Continue(())
    /// })?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock_with(
        &self,
        timeout: Option<Duration>,
        mut hook: impl FnMut(&WaitStatus<'_>) -> ControlFlow<()>,
    ) -> io::Result<FileLockGuard> {
        /// How often the hook is called while the lock stays held.
        const EVERY: Duration = Duration::from_millis(100);
        let began = Instant::now();
        if timeout.is_none()
            && self.scope(false).excludes_own_process()
            && held_here(self.kind, false, || {
                path_id(&self.sys_path, self.follow_symlinks)
            })
        {
            return Err(self.deadlock());
        }
        let mut wait = Wait::No;
        loop {
            // A soft lock since flock answered ENOSYS: the soft lock's own
            // wait, which logs and calls the hook as a soft wait does.
            #[cfg(unix)]
            if let (true, Some(soft)) = (self.soft.load(Ordering::Relaxed), self.fallback) {
                let left = timeout.map(|t| t.saturating_sub(began.elapsed()));
                return (soft.lock_with)(&self.path, left, &mut || {
                    hook(&WaitStatus {
                        lock: self,
                        waited: began.elapsed(),
                    })
                });
            }
            debug!(
                "Attempting to acquire lock {} on {}",
                self.log_id(),
                self.path.display()
            );
            let guard = self.acquire_logged(wait, false, false);
            match guard {
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                done => {
                    if done.is_ok() {
                        debug!("Lock {} acquired on {}", self.log_id(), self.path.display());
                    }
                    return done;
                }
            }
            let waited = began.elapsed();
            if hook(&WaitStatus { lock: self, waited }).is_break() {
                debug!(
                    "Cancellation requested for lock {} on {}",
                    self.log_id(),
                    self.path.display()
                );
                let kind = io::ErrorKind::Interrupted;
                let source = io::Error::new(kind, "the wait was cancelled by its hook");
                return Err(LockError::io(&self.path, Step::Lock, kind, source));
            }
            let left = timeout.map(|t| t.saturating_sub(waited));
            if left == Some(Duration::ZERO) {
                debug!(
                    "Timeout on acquiring lock {} on {}",
                    self.log_id(),
                    self.path.display()
                );
                let kind = io::ErrorKind::TimedOut;
                return Err(LockError::io(&self.path, Step::Lock, kind, kind.into()));
            }
            let pause = left.map_or(EVERY, |l| l.min(EVERY));
            debug!(
                "Lock {} not acquired on {}, waiting {} seconds ...",
                self.log_id(),
                self.path.display(),
                pause.as_secs_f64()
            );
            // The next attempt waits that long in the kernel.
            wait = within(pause);
        }
    }

    /// Waits for the lock without blocking the thread, in a tokio runtime
    /// (feature `tokio`). After a first attempt, the wait is made in the
    /// kernel on a thread of this crate, as [`lock_timeout`]'s is, and the
    /// task is woken when the kernel grants the lock; on Windows the task
    /// polls, sleeping between attempts as [`lock_timeout`] pauses.
    ///
    /// Cancel-safe: a future dropped before it returns holds nothing, and
    /// a lock the waiting thread takes for it afterwards is released at
    /// once. For a timeout, wrap it in `tokio::time::timeout`. The runtime
    /// needs its IO and time drivers (`#[tokio::main]`, or
    /// `Builder::enable_all`); outside a runtime the call fails with an
    /// error of kind [`Unsupported`](io::ErrorKind::Unsupported). A task
    /// that awaits a lock it holds waits for ever: unlike [`lock`], no
    /// deadlock is detected, since a task is no thread.
    ///
    /// # Panics
    ///
    /// Where it polls (Windows, classic locks), in a runtime without its
    /// time driver: tokio's timer panics. (tokio cannot be asked whether
    /// a driver is enabled.)
    ///
    /// [`lock_timeout`]: Self::lock_timeout
    /// [`lock`]: Self::lock
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use swaplock::FileLock;
    /// # async fn run() -> std::io::Result<()> {
    /// let lock = FileLock::new("/run/lock/backup.lock");
    /// let guard = tokio::time::timeout(Duration::from_secs(30), lock.lock_async())
    ///     .await
    ///     .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    /// // ... the lock is held ...
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn lock_async(&self) -> io::Result<FileLockGuard> {
        self.acquire_async(false).await
    }

    /// Waits for the shared lock without blocking the thread, as
    /// [`lock_async`](Self::lock_async) waits for the exclusive one.
    #[cfg(feature = "tokio")]
    pub async fn lock_shared_async(&self) -> io::Result<FileLockGuard> {
        self.acquire_async(true).await
    }

    #[cfg(feature = "tokio")]
    async fn acquire_async(&self, shared: bool) -> io::Result<FileLockGuard> {
        use swaplock_core::wait::Patience;
        crate::async_wait::in_runtime(&self.path)?;
        // The pauses where the task polls (Windows; no thread to wait on).
        let mut pauses = swaplock_core::kernel::Backoff::forever();
        loop {
            #[cfg(unix)]
            if self.soft.load(Ordering::Relaxed) && !shared {
                let guard = SoftLock::soft(&*self.path).lock_async().await?;
                return Ok(fallback::soft_guard(guard));
            }
            match self.acquire(Wait::No, shared) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return done,
            }
            // flock answered ENOSYS: a soft lock now, awaited as one (no
            // kernel attempt on it any more).
            #[cfg(unix)]
            if self.soft.load(Ordering::Relaxed) {
                continue;
            }
            #[cfg(unix)]
            if let Some(reached) = wait::Handover::new(self.job(shared)).await {
                match self.settle(reached, shared, false) {
                    Settled::Done(Err(e)) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Settled::Done(done) => return done,
                    // A soft lock now: awaited as one.
                    Settled::FellBack => continue,
                }
            }
            let pause = pauses
                .busy(&Errno::AGAIN, Duration::ZERO)
                .unwrap_or(swaplock_core::kernel::Backoff::LONGEST);
            crate::sync::time::sleep(pause).await;
        }
    }
}
