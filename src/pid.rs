//! This process's ID, as the fork checks of every guard and list read it:
//! a forked child inherits the parent's guards and lists, none of which is
//! its own, and tells so by its own process ID. An uncontended cycle reads
//! it about ten times, and `getpid` is a system call (glibc stopped
//! caching it in 2.25), as dear as the lock call itself on a virtual
//! machine; so on POSIX systems it is kept after the first read
//! ([`crate::atfork::process_id`]).
//!
//! The kept ID is forgotten in the child by the fork handlers, and kept
//! only where they are registered as the program starts, before any thread
//! of it could fork: a handler registered at a first use could miss a fork
//! that raced it (musl's `fork` runs none it has not seen yet), and the
//! child would keep its parent's ID. Elsewhere, and on Windows (where the
//! ID is read from the thread's own block, without a system call), every
//! read asks the system.
//!
//! A child made without the handlers (`vfork`, `_Fork`, a raw `clone`)
//! may call only async-signal-safe functions until it `exec`s or exits, as
//! POSIX says: no lock of this crate, no guard's drop, so no read here.

/// This process's ID.
#[inline]
pub(crate) fn id() -> u32 {
    #[cfg(unix)]
    return crate::atfork::process_id();
    #[cfg(not(unix))]
    std::process::id()
}
