//! The `flock` `ENOSYS` fallback to a soft lock (PROTOCOL 7.17), reached
//! through a table of functions that only [`FileLock::flock`] gives a lock:
//! a program that takes only `fcntl` locks (`with-lock-ex`) never reaches
//! the soft lock from its kernel locks, and its static build links none of
//! it (about 60 KB of `with-lock-ex`'s).

use super::*;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The soft lock's part in a kernel lock that fell back to it.
#[derive(Debug)]
pub(super) struct SoftFallback {
    /// The core's `fall_back`: removes the file at the lock path, open as
    /// the descriptor, if the kernel attempt created it (the flag), and
    /// closes it. Its error is not the caller's: the switch goes on.
    pub(super) fall_back: fn(&Path, OwnedFd, bool),
    /// One acquire of the soft lock on the path, as `Wait` says.
    pub(super) acquire: fn(&Path, Wait) -> io::Result<FileLockGuard>,
    /// The soft lock's waiting acquire within the timeout, calling the
    /// hook as its wait goes on.
    pub(super) lock_with: fn(&Path, Option<Duration>, Hook<'_>) -> io::Result<FileLockGuard>,
}

/// A waiting acquire's hook: called as the wait goes on, it may stop it.
pub(super) type Hook<'a> = &'a mut dyn FnMut() -> ControlFlow<()>;

/// The table [`FileLock::flock`] hands its locks.
pub(super) static SOFT: SoftFallback = SoftFallback {
    fall_back: |path, file, created| {
        let _ = SoftLock::soft(path).fall_back(file, created);
    },
    acquire: |path, wait| {
        let lock = SoftLock::soft(path);
        let guard = match wait {
            Wait::No => lock.try_lock(),
            Wait::Forever => lock.lock(),
            Wait::Until(deadline) => lock.lock_timeout(time_left(deadline)),
        }?;
        Ok(soft_guard(guard))
    },
    lock_with: |path, timeout, hook| {
        let guard = SoftLock::soft(path).lock_with(timeout, |_| hook())?;
        Ok(soft_guard(guard))
    },
};

/// A kernel lock's guard for the soft lock's `guard`.
pub(super) fn soft_guard(guard: SoftLockGuard) -> FileLockGuard {
    FileLockGuard(Inner::Soft(Box::new(guard)))
}

/// What a kernel lock's guard asks of the soft lock's guard it holds
/// after a fallback: behind a pointer to it, so that only a program that
/// makes one links its release.
pub(super) trait FallbackGuard: std::fmt::Debug + Send + Sync {
    fn path(&self) -> &Path;
    fn release(self: Box<Self>) -> io::Result<()>;
    fn fd(&self) -> BorrowedFd<'_>;
}

impl FallbackGuard for SoftLockGuard {
    fn path(&self) -> &Path {
        SoftLockGuard::path(self)
    }
    fn release(self: Box<Self>) -> io::Result<()> {
        SoftLockGuard::release(*self)
    }
    fn fd(&self) -> BorrowedFd<'_> {
        self.as_fd()
    }
}
