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

//!
//! What the lists and guards tag as this process's own is [`Me`]: the ID
//! and the number of forks between the program's first process and this
//! one, which the fork handlers count in each child. An ID alone would not
//! do: a process may be given the ID of an ancestor that has exited, and
//! inherit, through the processes between them, entries that ancestor made
//! (its reentrant holds, its heartbeats' idle threads) as if they were its
//! own. An ancestor is always fewer forks from the first process.

/// This process, as the lists and guards tell their own entries from
/// those a forked child inherited: see the module's documentation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Me {
    pid: u32,
    forks: u32,
}

impl Me {
    /// No process: what a list holds before its first entry.
    pub(crate) const NONE: Me = Me { pid: 0, forks: 0 };

    /// The process's ID.
    pub(crate) fn number(self) -> u32 {
        self.pid
    }
}

/// This process, as the lists and guards tag their entries.
#[inline]
pub(crate) fn id() -> Me {
    Me {
        pid: number(),
        #[cfg(unix)]
        forks: crate::atfork::forks(),
        #[cfg(not(unix))]
        forks: 0,
    }
}

/// This process's ID.
#[inline]
pub(crate) fn number() -> u32 {
    #[cfg(unix)]
    return crate::atfork::process_id();
    #[cfg(not(unix))]
    std::process::id()
}
