//! swaplock's adapter for Linux and Android.
//!
//! Each function here is a short, documented forward to one syscall
//! (through `rustix`, or `libc` where rustix has no such call), answering
//! one step that `swaplock-core` asks for. No protocol decision is made
//! here: decisions are the core's. Errors come back as the core's
//! [`Errno`](swaplock_core::Errno), unchanged.
//!
//! On other targets this crate is empty.
#![cfg_attr(not(any(target_os = "linux", target_os = "android")), no_std)]

#[cfg(any(target_os = "linux", target_os = "android"))]
pub mod kernel;
#[cfg(any(target_os = "linux", target_os = "android"))]
pub mod soft;
