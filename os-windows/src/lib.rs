//! swaplock's adapter for Windows.
//!
//! It answers the core's steps with Win32 calls: `CreateFileW` without
//! `FILE_SHARE_DELETE` (so a live holder's marker cannot be renamed),
//! `LockFileEx` on byte 0, liveness through `OpenProcess`, the start token
//! from the process creation time.
//!
//! On other targets this crate is empty.
#![cfg_attr(not(windows), no_std)]
