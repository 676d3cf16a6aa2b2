//! The process-wide lists of this crate (the held kernel and soft locks,
//! the thread registry of classic locks, the soft waiters and reentrant
//! holds, the release count) are each behind a mutex. A thread that forks
//! while another thread holds one of them would leave it locked for good
//! in the child, which has no such thread: the child's first lock would
//! wait forever. So the forking thread takes them all just before the fork
//! and lets them go just after, in the parent and in the child
//! (`pthread_atfork`), as C libraries guard their own locks.

use std::any::Any;
use std::cell::RefCell;
use std::sync::Once;

std::thread_local! {
    /// The guards the forking thread holds across `fork`.
    static HELD_ACROSS_FORK: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
}

/// Registers the handlers, once per process, before the lists are first
/// used.
pub(crate) fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: the handlers are `extern "C"` functions that stay valid
        // for the life of the process.
        unsafe { libc::pthread_atfork(Some(prepare), Some(resume), Some(resume)) };
    });
}

/// Takes every list's mutex. No code of this crate holds one of them
/// while it takes another, so taking them in any order cannot deadlock
/// with a thread that holds one.
extern "C" fn prepare() {
    let guards = [
        crate::kernel::lock_for_fork(),
        crate::soft::lock_for_fork(),
        crate::kernel::inodes::lock_for_fork(),
        crate::kernel::wait::lock_for_fork(),
    ];
    HELD_ACROSS_FORK.with(|held| held.borrow_mut().extend(guards.into_iter().flatten()));
}

/// Lets them go, in the parent and in the child.
extern "C" fn resume() {
    HELD_ACROSS_FORK.with(|held| held.borrow_mut().clear());
}
