//! swaplock's adapter for Linux and Android.
//!
//! Most operations are the POSIX ones of `swaplock-unix`, shared with the
//! macOS adapter; this crate adds what only Linux has: `O_PATH` pins, start
//! tokens and the PID-namespace scan from `/proc`, `getrandom`, reading
//! the umask without changing it, and the inotify watch that wakes a
//! soft-lock waiter when its lock path changes; and, for the commands, the
//! parent-death signal, the child subreaper and `close_range`. No protocol
//! decision is made here: decisions are the core's.
//!
//! On other targets this crate is empty.
// docs.rs labels each platform's and feature's items with what they need.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(not(any(target_os = "linux", target_os = "android")), no_std)]

#[cfg(any(target_os = "linux", target_os = "android"))]
pub mod elsewhere;
#[cfg(any(target_os = "linux", target_os = "android"))]
pub mod fork;
#[cfg(any(target_os = "linux", target_os = "android"))]
pub mod fs;
#[cfg(any(target_os = "linux", target_os = "android"))]
pub mod kernel;
#[cfg(any(target_os = "linux", target_os = "android"))]
mod proc;
#[cfg(any(target_os = "linux", target_os = "android"))]
pub mod queue;
#[cfg(any(target_os = "linux", target_os = "android"))]
pub mod soft;
/// The strict lock's directories, links and `fsync`: the shared POSIX calls.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub use swaplock_unix::strict;
#[cfg(any(target_os = "linux", target_os = "android"))]
pub mod sqlite {
    //! The SQLite lock's syscalls: the shared POSIX ones of
    //! [`swaplock_unix::sqlite`].
    pub use swaplock_unix::sqlite::*;
}
#[cfg(any(target_os = "linux", target_os = "android"))]
pub mod supervise;
#[cfg(any(target_os = "linux", target_os = "android"))]
pub mod watch;
