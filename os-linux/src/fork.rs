//! What this adapter keeps per process, told apart from what a forked
//! child inherits. A child may be given the ID of an ancestor that has
//! exited, and inherits, through the processes between them, what that
//! ancestor kept (its inotify instances and bells, its start token, its
//! `/proc` and its scan of other PID namespaces): an ID alone does not
//! tell them from its own. So each such object is tagged with an
//! `Owner`, the ID and the count of forks [`forget_after_fork`] saw,
//! which an ancestor never shares with a descendant.

use rustix::process::Pid;
use std::sync::atomic::{AtomicU32, Ordering};

/// How many forks lie between the program's first process and this one,
/// as counted by [`forget_after_fork`] in each child.
static FORKS: AtomicU32 = AtomicU32::new(0);

/// A process, as this adapter's per-process objects name the one they are
/// of: see the module's documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Owner {
    pid: Pid,
    forks: u32,
}

impl Owner {
    /// The owner of `pid` after `forks` forks, for the watch's tests.
    #[cfg(all(test, target_os = "linux"))]
    pub(crate) fn of(pid: Pid, forks: u32) -> Owner {
        Owner { pid, forks }
    }
}

/// This process.
pub(crate) fn owner() -> Owner {
    Owner {
        pid: rustix::process::getpid(),
        forks: forks(),
    }
}

/// How many forks [`forget_after_fork`] counted before this process.
pub(crate) fn forks() -> u32 {
    FORKS.load(Ordering::Relaxed)
}

/// For the child's fork handler (`pthread_atfork`), in a child just
/// forked: counts the fork, so that nothing the parent kept passes for the
/// child's own, and drops the caches of this process's identity that are
/// plain words (the PID namespace's inode, the `/proc` descriptor). Only
/// atomic operations and a `close`, as a child of a multithreaded process
/// may make.
pub fn forget_after_fork() {
    FORKS.fetch_add(1, Ordering::Relaxed);
    crate::proc::forget_pid_namespace();
    crate::proc::forget_proc_dir();
}
