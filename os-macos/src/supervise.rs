//! The process control of the commands that run a program under a lock:
//! the shared POSIX calls of [`swaplock_unix::supervise`], which are all
//! that macOS offers of them (it has no parent-death signal, no child
//! subreaper and no `close_range`).

pub use swaplock_unix::supervise::*;
