//! swaplock's POSIX layer, shared by the Linux/Android adapter
//! (`swaplock-linux`) and the macOS adapter (`swaplock-macos`).
//!
//! Each function here is a short, documented forward to one syscall
//! (through `rustix`, or `libc` where rustix has no such call), answering
//! one step that `swaplock-core` asks for. No protocol decision is made
//! here: decisions are the core's. Errors come back as the core's
//! [`Errno`](swaplock_core::Errno), unchanged. What differs between the
//! systems is a [`soft::Platform`], which each adapter implements.
//! [`rw`] performs the read-write lock's file operations over the soft
//! kinds' own. [`supervise`] holds the same kind of forwards for the commands that run
//! a program under a lock: pipes, process groups, signals, the terminal;
//! [`strict`] the strict lock's directories, links and `fsync`.
//!
//! On other targets this crate is empty.
// docs.rs labels each platform's and feature's items with what they need.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(
    not(any(target_os = "linux", target_os = "android", target_vendor = "apple")),
    no_std
)]

#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
pub mod kernel;
#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
pub mod rw;
#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
pub mod soft;
#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
pub mod sqlite;
#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
pub mod stat;
#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
pub mod strict;
#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
pub mod supervise;
