//! The one seam between the facade and the thread primitives it
//! synchronises with: every mutex, condition variable, atomic, channel,
//! thread and thread-local of the facade comes from here. Built with
//! `--cfg swaplock_model`, they are the shuttle model checker's, so that
//! `src/model.rs` explores the interleavings of the facade's threads (as
//! tokio keeps loom behind one module); otherwise they are `std`'s,
//! re-exported unchanged. (`Arc`, `Weak`, `Once` and `OnceLock` are `std`'s
//! either way: they never block a thread of the model.) This module uses
//! nothing else of the crate.

#[cfg(not(swaplock_model))]
pub(crate) use std::{
    sync::{atomic, mpsc, Condvar, Mutex, MutexGuard, PoisonError},
    thread, thread_local,
};

#[cfg(swaplock_model)]
pub(crate) use shuttle::{
    sync::{atomic, mpsc, Condvar, Mutex, MutexGuard, PoisonError},
    thread, thread_local,
};

/// A point before a syscall whose order against other threads matters (a
/// close, a lock call), where the model checker may run another thread:
/// between two shuttle operations it runs none, and a race between an
/// unlocked check and a syscall would stay out of its sight. Nothing
/// outside the model.
#[cfg(unix)]
#[inline(always)]
pub(crate) fn syscall() {
    #[cfg(swaplock_model)]
    thread::yield_now();
}

/// Takes a mutex of one lock or guard (not a process-wide list), whatever
/// a panicking holder left.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
