//! swaplock's adapter for macOS.
//!
//! It answers the core's steps with Apple's syscalls: the exchange through
//! `renameatx_np(RENAME_SWAP)`, a pin through a non-blocking read-only
//! `O_NOFOLLOW` open (there is no `O_PATH`), the start token from
//! `sysctl(KERN_PROC_PID)`. What it shares with the Linux adapter goes
//! through `rustix` and `swaplock-core`, not through copies.
//!
//! On other targets this crate is empty.
#![cfg_attr(not(target_vendor = "apple"), no_std)]
