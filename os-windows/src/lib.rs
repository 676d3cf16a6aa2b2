//! swaplock's adapter for Windows.
//!
//! It answers the core's kernel-lock steps with Win32 calls: an open
//! (`NtCreateFile`, as `CreateFileW` opens, but never waiting for an oplock
//! break) sharing read and write but not delete (so a held lock file cannot be
//! deleted or renamed under its holder), refusing reparse points unless
//! asked to follow them, `LockFileEx` on byte 0, and the identity check by
//! volume serial number and file index. Win32 errors reach the core as the
//! C runtime's `errno` values where the core decides on them; any other
//! error keeps its Win32 code (see [`kernel::errno_from_win32`]).
//!
//! It answers the core's soft-lock steps too ([`soft`]), under the core's
//! `Semantics::Handles`: markers held open without delete sharing, and a
//! stale marker moved and deleted only through a handle on it.
//!
//! On other targets this crate is empty.
// docs.rs labels each platform's and feature's items with what they need.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(not(windows), no_std)]

#[cfg(windows)]
pub mod kernel;
#[cfg(windows)]
mod nt;
#[cfg(windows)]
pub mod soft;
#[cfg(windows)]
mod win32;
