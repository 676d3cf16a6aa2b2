//! The one mutex type of this crate's process-wide lists (the held kernel
//! and soft locks, the thread registry of classic locks, the soft waiters
//! and reentrant holds, the release count): a mutex that a panicking
//! holder leaves usable (each list stays consistent at every step a panic
//! could interrupt), and that, on POSIX systems, enters itself with the
//! fork handlers ([`crate::atfork`]) the first time it is taken, so that a
//! fork never leaves it locked in the child.

use crate::sync::{lock, Mutex, MutexGuard};

#[cfg(unix)]
use crate::sync::atomic::{AtomicBool, Ordering};

/// A process-wide list's mutex; see the module's documentation.
#[derive(Debug)]
pub(crate) struct ProcessMutex<T> {
    mutex: Mutex<T>,
    /// Whether the fork handlers take it already.
    #[cfg(unix)]
    registered: AtomicBool,
}

impl<T: Send + 'static> ProcessMutex<T> {
    /// A mutex around `value`, for a `static`.
    pub(crate) const fn new(value: T) -> Self {
        ProcessMutex {
            mutex: Mutex::new(value),
            #[cfg(unix)]
            registered: AtomicBool::new(false),
        }
    }

    /// Takes the mutex, whatever a panicking holder left.
    pub(crate) fn lock(&'static self) -> MutexGuard<'static, T> {
        #[cfg(unix)]
        if !self.registered.load(Ordering::Acquire) {
            crate::atfork::register(self);
            self.registered.store(true, Ordering::Release);
        }
        lock(&self.mutex)
    }
}

#[cfg(unix)]
impl<T: Send + 'static> crate::atfork::ForkLock for ProcessMutex<T> {
    fn lock_for_fork(&'static self) -> Box<dyn std::any::Any> {
        Box::new(lock(&self.mutex))
    }
}

/// A lock the fork handlers take that is not a [`ProcessMutex`] (an
/// adapter's own list), entered with them by [`install`](Self::install)
/// before its first use.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) struct ForkHook {
    lock: fn() -> Box<dyn std::any::Any>,
    registered: AtomicBool,
}

#[cfg(any(target_os = "linux", target_os = "android"))]
impl ForkHook {
    /// The hook that takes a lock by `lock`, returning its guard.
    pub(crate) const fn new(lock: fn() -> Box<dyn std::any::Any>) -> Self {
        ForkHook {
            lock,
            registered: AtomicBool::new(false),
        }
    }

    /// Enters the hook with the fork handlers, once.
    pub(crate) fn install(&'static self) {
        if !self.registered.load(Ordering::Acquire) {
            crate::atfork::register(self);
            self.registered.store(true, Ordering::Release);
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
impl crate::atfork::ForkLock for ForkHook {
    fn lock_for_fork(&'static self) -> Box<dyn std::any::Any> {
        (self.lock)()
    }
}
