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
//! - **They belong to the process, not to the descriptor.** Two
//!   [`FileLock`]s for one file in the same process do not exclude each
//!   other, and closing *any* descriptor of the file in the process (say, a
//!   `std::fs::read` of the lock file) releases the lock at once. Keep one
//!   lock object per file per process, and do not open the lock file
//!   elsewhere; use [`FileLock::flock`] where threads of one process must
//!   exclude each other.
//! - **They are not inherited across `fork`.** The child of a holder does
//!   not hold the lock. (An `exec` keeps it, which is how the `with-lock-ex`
//!   command hands the lock to its command.) `flock` locks belong to the open
//!   file description and are shared with children.
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

use crate::adapter::kernel::{self as os, LockCall, UnixKernel};
use crate::error::{LockError, Step};
use crate::soft::{SoftLock, SoftLockGuard};
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use swaplock_core::decide::with_lock_ex_mode;
use swaplock_core::kernel::{self as protocol, Outcome};
use swaplock_core::Errno;

/// Which kernel lock a [`FileLock`] takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An `fcntl` write lock on byte 0: the with-lock-ex protocol, shared
    /// with `with-lock-ex`, Python's `fcntl.lockf` and most C programs.
    Fcntl,
    /// An `flock` exclusive lock: excludes other open file descriptions of
    /// the same process too, and is shared with forked children.
    Flock,
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
///         guard.unlock()?;
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
    c_path: Arc<CStr>,
    kind: Kind,
    mode: u32,
    follow_symlinks: bool,
    /// Set for good once `flock` answered `ENOSYS`: from then on this lock
    /// is a `SoftFileLock`, as filelock switches.
    soft: Arc<AtomicBool>,
}

/// How long an attempt may wait.
#[derive(Clone, Copy)]
enum Wait {
    No,
    Forever,
    Until(Instant),
}

/// The shortest and longest pause between two attempts while waiting with
/// a deadline: the kernel has no timed wait for these locks.
const POLL_MIN: Duration = Duration::from_millis(1);
const POLL_MAX: Duration = Duration::from_millis(25);

impl FileLock {
    /// An `fcntl` lock (the with-lock-ex protocol) on `path`.
    ///
    /// The file is created if missing, with the mode with-lock-ex uses: read
    /// and write for each class of user the umask grants write to (0660
    /// under umask 002, 0600 under 022), unless [`mode`](Self::mode) says
    /// otherwise. A path with a NUL byte fails at the first lock call.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::with_kind(path.into(), Kind::Fcntl)
    }

    /// An `flock` lock on `path`, with the same identity check.
    pub fn flock(path: impl Into<PathBuf>) -> Self {
        Self::with_kind(path.into(), Kind::Flock)
    }

    fn with_kind(path: PathBuf, kind: Kind) -> Self {
        // A NUL byte cannot reach the kernel; keep an empty C path, which
        // every call refuses with ENOENT, and report the real path.
        let c_path = CString::new(path.as_os_str().as_bytes()).unwrap_or_default();
        let umask = os::read_umask().unwrap_or_else(|| {
            // Kernels before 4.7 show no umask in /proc: read it the old
            // way, which briefly changes it for the whole process.
            let old = os::umask(0o077);
            os::umask(old);
            old
        });
        FileLock {
            path: path.into(),
            c_path: c_path.into(),
            kind,
            mode: with_lock_ex_mode(umask),
            follow_symlinks: false,
            soft: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The mode a newly created lock file gets (before the umask applies).
    pub fn mode(mut self, mode: u32) -> Self {
        self.mode = mode & 0o7777;
        self
    }

    /// Whether a symlink at the path is followed to the file it names
    /// (`with-lock-ex` does). By default it is not: opening fails with
    /// `ELOOP`, so a planted link cannot redirect the lock.
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
    pub fn lock(&self) -> io::Result<FileLockGuard> {
        self.acquire(Wait::Forever)
    }

    /// Takes the lock if it is free; an error of kind
    /// [`WouldBlock`](io::ErrorKind::WouldBlock) if another process holds it.
    pub fn try_lock(&self) -> io::Result<FileLockGuard> {
        self.acquire(Wait::No)
    }

    /// Waits up to `timeout` for the lock; an error of kind
    /// [`TimedOut`](io::ErrorKind::TimedOut) if it stays held. The kernel
    /// has no timed wait for these locks, so this polls, pausing 1 ms at
    /// first and at most 25 ms between attempts.
    pub fn lock_timeout(&self, timeout: Duration) -> io::Result<FileLockGuard> {
        match Instant::now().checked_add(timeout) {
            Some(deadline) => self.acquire(Wait::Until(deadline)),
            None => self.acquire(Wait::Forever),
        }
    }

    fn err(&self, step: Step, errno: Errno) -> io::Error {
        LockError::errno(&self.path, step, errno)
    }

    fn acquire(&self, wait: Wait) -> io::Result<FileLockGuard> {
        if self.soft.load(Ordering::Relaxed) {
            return self.acquire_soft(wait);
        }
        let mut kernel = UnixKernel {
            path: &self.c_path,
            follow: self.follow_symlinks,
            mode: self.mode,
            call: match self.kind {
                Kind::Fcntl => LockCall::Fcntl,
                Kind::Flock => LockCall::Flock,
            },
        };
        let mut pause = POLL_MIN;
        loop {
            let outcome = protocol::attempt(
                &mut kernel,
                matches!(wait, Wait::Forever),
                self.kind == Kind::Flock,
            );
            let busy = match outcome {
                Ok(Outcome::Held(fd, _)) => {
                    return Ok(FileLockGuard(Inner::Kernel {
                        fd,
                        kind: self.kind,
                        path: Arc::clone(&self.path),
                        c_path: Arc::clone(&self.c_path),
                        follow_symlinks: self.follow_symlinks,
                    }))
                }
                Ok(Outcome::Busy(e)) => e,
                Ok(Outcome::Unsupported { file, created }) => {
                    // flock is not available here: remove the empty file this
                    // attempt created while it is still open (never a peer's
                    // soft marker), then be a SoftFileLock from now on.
                    if created {
                        let _ = SoftLock::soft(&*self.path).remove_own_file(&file);
                    }
                    drop(file);
                    self.soft.store(true, Ordering::Relaxed);
                    return self.acquire_soft(wait);
                }
                Err((step, e)) => {
                    let step = match step {
                        protocol::Step::Open => Step::Open,
                        protocol::Step::Lock => Step::Lock,
                        protocol::Step::Fstat => Step::Fstat,
                        protocol::Step::Stat => Step::Stat,
                    };
                    return Err(self.err(step, e));
                }
            };
            match wait {
                // Forever waits in the kernel; a busy answer there (an fcntl
                // lock may say EACCES) is reported like a non-blocking one.
                Wait::No | Wait::Forever => {
                    let source = io::Error::from_raw_os_error(busy.raw());
                    return Err(LockError::io(
                        &self.path,
                        Step::Lock,
                        io::ErrorKind::WouldBlock,
                        source,
                    ));
                }
                Wait::Until(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        let source = io::Error::from(io::ErrorKind::TimedOut);
                        return Err(LockError::io(
                            &self.path,
                            Step::Lock,
                            io::ErrorKind::TimedOut,
                            source,
                        ));
                    }
                    std::thread::sleep(pause.min(deadline - now));
                    pause = (pause * 2).min(POLL_MAX);
                }
            }
        }
    }

    fn acquire_soft(&self, wait: Wait) -> io::Result<FileLockGuard> {
        let lock = SoftLock::soft(&*self.path);
        let guard = match wait {
            Wait::No => lock.try_lock(),
            Wait::Forever => lock.lock(),
            Wait::Until(deadline) => {
                lock.lock_timeout(deadline.saturating_duration_since(Instant::now()))
            }
        }?;
        Ok(FileLockGuard(Inner::Soft(Box::new(guard))))
    }

    /// Whether `flock` answered `ENOSYS` here, so this lock is now a soft
    /// lock (filelock's `SoftFileLock`, protocol 1).
    pub fn fell_back_to_soft(&self) -> bool {
        self.soft.load(Ordering::Relaxed)
    }
}

/// A held kernel lock (or, after an `flock` `ENOSYS` fallback, a soft
/// lock). Dropping it releases the lock; it owns everything it needs and
/// can move between threads.
#[derive(Debug)]
pub struct FileLockGuard(Inner);

#[derive(Debug)]
enum Inner {
    Kernel {
        fd: OwnedFd,
        kind: Kind,
        path: Arc<Path>,
        c_path: Arc<CStr>,
        follow_symlinks: bool,
    },
    // Boxed: only the ENOSYS fallback takes this path.
    Soft(Box<SoftLockGuard>),
}

impl FileLockGuard {
    /// The lock file's path.
    pub fn path(&self) -> &Path {
        match &self.0 {
            Inner::Kernel { path, .. } => path,
            Inner::Soft(guard) => guard.path(),
        }
    }

    /// Releases the lock and closes the descriptor, reporting a failure to
    /// release (which dropping the guard cannot).
    pub fn unlock(self) -> io::Result<()> {
        match self.0 {
            Inner::Kernel { fd, kind, path, .. } => {
                let result = match kind {
                    Kind::Fcntl => os::fcntl_unlock_byte0(fd.as_fd()),
                    Kind::Flock => os::flock_unlock(fd.as_fd()),
                };
                result.map_err(|e| LockError::errno(&path, Step::Unlock, e))
            }
            Inner::Soft(guard) => guard.release(),
        }
    }

    /// Deletes the lock file while holding the lock, which ends the hold:
    /// the safe way to clean up lock files (with-lock-ex's "acquire, then
    /// rm"). Waiters that had opened the old file notice, through the
    /// identity check, and lock the next file created at the path.
    ///
    /// The name is removed only if it still names the locked file, which
    /// no process following the protocol can change while we hold the lock.
    pub fn remove(self) -> io::Result<()> {
        match self.0 {
            Inner::Kernel {
                fd,
                path,
                c_path,
                follow_symlinks,
                ..
            } => {
                let err = |e| LockError::errno(&path, Step::Remove, e);
                let ours = os::fstat_id(fd.as_fd()).map_err(err)?;
                let named = os::stat_id(&c_path, follow_symlinks).map_err(err)?;
                if named != ours {
                    return Err(err(Errno::NOENT));
                }
                os::unlink(&c_path).map_err(err)
            }
            // A soft lock's release removes its marker.
            Inner::Soft(guard) => guard.release(),
        }
    }
}

impl AsFd for FileLockGuard {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match &self.0 {
            Inner::Kernel { fd, .. } => fd.as_fd(),
            Inner::Soft(guard) => guard.as_fd(),
        }
    }
}

// The guards own everything they need, so they move between threads.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<FileLockGuard>();
    send::<SoftLockGuard>();
};
