//! swaplock's adapter for macOS (and the other Apple systems).
//!
//! Most operations are the POSIX ones of `swaplock-unix`, shared with the
//! Linux adapter: `fcntl` and `flock` locks, and the soft-lock exchange,
//! which rustix makes `renameatx_np(.., RENAME_SWAP)` here. This crate adds
//! what differs: a pin is a non-blocking read-only `O_NOFOLLOW` open (there
//! is no `O_PATH`), the start token comes from `sysctl(KERN_PROC_PID)`,
//! randomness from `arc4random_buf`, and the host name has no PID-namespace
//! suffix. No protocol decision is made here: decisions are the core's.
//!
//! On other targets this crate is empty.
// docs.rs labels each platform's and feature's items with what they need.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(not(target_vendor = "apple"), no_std)]

#[cfg(target_vendor = "apple")]
pub mod kernel;
#[cfg(target_vendor = "apple")]
pub mod soft;
/// The strict lock's directories, links and `fsync`: the shared POSIX calls.
#[cfg(target_vendor = "apple")]
pub use swaplock_unix::strict;
#[cfg(target_vendor = "apple")]
pub mod sqlite {
    //! The SQLite lock's syscalls: the shared POSIX ones of
    //! [`swaplock_unix::sqlite`].
    pub use swaplock_unix::sqlite::*;
}
#[cfg(target_vendor = "apple")]
pub mod supervise;
