//! The process-wide lists of this crate (the held kernel and soft locks,
//! the thread registry of classic locks, the soft waiters and reentrant
//! holds, the release count) are each behind a mutex. A thread that forks
//! while another thread holds one of them would leave it locked for good
//! in the child, which has no such thread: the child's first lock would
//! wait forever. So the forking thread takes them all just before the fork
//! and lets them go just after, in the parent and in the child
//! (`pthread_atfork`), as C libraries guard their own locks.
//!
//! Each list's mutex enters itself here the first time it is taken
//! ([`crate::lists::ProcessMutex`]): this module names none of them.

#[cfg(not(swaplock_model))]
use crate::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use crate::sync::{Mutex, PoisonError};
use std::any::Any;
use std::cell::RefCell;
use std::sync::Once;

crate::sync::thread_local! {
    /// The guards the forking thread holds across `fork`.
    static HELD_ACROSS_FORK: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
}

/// A lock the fork handlers take.
pub(crate) trait ForkLock: Sync {
    /// Takes the lock, returning its guard, to hold across the fork.
    fn lock_for_fork(&'static self) -> Box<dyn Any>;
}

/// The locks entered so far. The forking thread holds this list's own
/// mutex across the fork too, so that a lock entered meanwhile is entered
/// after it (and, in the child, by the child's first use).
static LOCKS: Mutex<Vec<&'static dyn ForkLock>> = Mutex::new(Vec::new());

/// Registers the handlers, once per process, before the lists are first
/// used: at the program's start (see [`INSTALL_AT_START`]), or else at the
/// first use of a list.
fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: the handlers are `extern "C"` functions that stay valid
        // for the life of the process.
        unsafe { libc::pthread_atfork(Some(prepare), Some(resume), Some(resume_child)) };
    });
}

/// Set once [`INSTALL_AT_START`] has registered the handlers, as the
/// program started: never where the constructor section is not known.
#[cfg(not(swaplock_model))]
static FROM_START: AtomicBool = AtomicBool::new(false);

/// The process's ID read since the last fork, 0 before the first read.
#[cfg(not(swaplock_model))]
static PID: AtomicU32 = AtomicU32::new(0);

/// How many forks run with the handlers lie between the program's first
/// process and this one ([`crate::pid::Me`]): each child adds one.
#[cfg(not(swaplock_model))]
static FORKS: AtomicU32 = AtomicU32::new(0);

/// How many forks lie between the program's first process and this one
/// (none under the model checker, which forks nothing).
#[inline]
pub(crate) fn forks() -> u32 {
    #[cfg(not(swaplock_model))]
    return FORKS.load(Ordering::Relaxed);
    #[cfg(swaplock_model)]
    0
}

/// This process's ID ([`crate::pid`]): kept after its first read where the
/// handlers were registered as the program started (and so run at every
/// fork since, and forget it in the child); read from the system
/// otherwise, and always under the model checker.
#[inline]
pub(crate) fn process_id() -> u32 {
    #[cfg(not(swaplock_model))]
    if FROM_START.load(Ordering::Acquire) {
        let kept = PID.load(Ordering::Relaxed);
        if kept != 0 {
            return kept;
        }
        let id = std::process::id();
        PID.store(id, Ordering::Relaxed);
        return id;
    }
    std::process::id()
}

/// Registers the handlers as the program starts, before `main` and any
/// thread of it, so that no fork can race their registration. Registered
/// at a list's first use instead, they would race the forks of the
/// program's other threads, and a child could be left stuck: musl's `fork`
/// looks for handlers without its lock and runs none when there are none
/// yet, so a thread that registers them meanwhile and takes a list's mutex
/// leaves it locked in the child; and a child forked while a thread was
/// inside the registration's `Once` finds it running for good, and waits
/// on it at its own first lock. (Where the constructor section is not
/// known, the handlers are registered at first use.)
#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_os = "freebsd",
    target_os = "netbsd",
    target_os = "openbsd",
    target_os = "dragonfly",
    target_os = "illumos",
    target_os = "solaris",
    target_vendor = "apple"
))]
#[used]
#[cfg_attr(not(target_vendor = "apple"), link_section = ".init_array")]
#[cfg_attr(target_vendor = "apple", link_section = "__DATA,__mod_init_func")]
static INSTALL_AT_START: extern "C" fn() = {
    extern "C" fn install_at_start() {
        install();
        #[cfg(not(swaplock_model))]
        FROM_START.store(true, Ordering::Release);
    }
    install_at_start
};

/// Enters `lock` with the handlers (once: entering it again does nothing),
/// before it is first taken.
pub(crate) fn register(lock: &'static dyn ForkLock) {
    install();
    let mut locks = LOCKS.lock().unwrap_or_else(PoisonError::into_inner);
    if !locks.iter().any(|l| std::ptr::addr_eq(*l, lock)) {
        locks.push(lock);
    }
}

/// Takes every list's mutex. No code of this crate holds one of them
/// while it takes another, so taking them in any order cannot deadlock
/// with a thread that holds one.
pub(crate) extern "C" fn prepare() {
    let locks = LOCKS.lock().unwrap_or_else(PoisonError::into_inner);
    let guards: Vec<Box<dyn Any>> = locks.iter().map(|l| l.lock_for_fork()).collect();
    HELD_ACROSS_FORK.with(|held| {
        let mut held = held.borrow_mut();
        held.extend(guards);
        held.push(Box::new(locks));
    });
}

/// Lets them go, in the parent and in the child.
pub(crate) extern "C" fn resume() {
    HELD_ACROSS_FORK.with(|held| held.borrow_mut().clear());
}

/// In the child: forgets the parent's process ID and counts the fork,
/// then lets the lists go; the adapter forgets what it kept of the
/// parent's identity.
extern "C" fn resume_child() {
    #[cfg(not(swaplock_model))]
    PID.store(0, Ordering::Relaxed);
    #[cfg(not(swaplock_model))]
    FORKS.fetch_add(1, Ordering::Relaxed);
    resume();
    #[cfg(any(target_os = "linux", target_os = "android"))]
    crate::adapter::fork::forget_after_fork();
}
