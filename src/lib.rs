//! swaplock: file locks that stay correct under every race we can name.
//!
//! Two designs, one implementation:
//!
//! - **Kernel locks** by the with-lock-ex protocol ([`FileLock`]): an
//!   `fcntl` write lock on the first byte of a lock file, with the check of
//!   the locked descriptor against the path that makes deleting lock files
//!   safe; `flock` too.
//! - **Soft locks** for filesystems where kernel locks fail (NFS, SMB,
//!   Android storage): marker files byte-compatible with Python filelock
//!   4.2.11, broken when stale without ever leaving the lock path empty.
//!
//! The formats and decisions live in [`swaplock_core`], re-exported here as
//! [`core`]: both lock protocols are written once there, over traits that
//! the OS adapters answer one syscall at a time.
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! use std::time::Duration;
//! use swaplock::{FileLock, SoftLock};
//! // A kernel lock, shared with with-lock-ex and fcntl.lockf users:
//! let guard = FileLock::new("/run/lock/app.lock").lock()?;
//! drop(guard);
//! // A soft lock, shared with Python filelock's MarkerSoftFileLock users:
//! let guard = SoftLock::marker("/mnt/nfs/app.lock").lock_timeout(Duration::from_secs(5))?;
//! guard.release()?;
//! # Ok(())
//! # }
//! ```
//!
//! # Platforms
//!
//! - **Linux** (glibc and static musl, x86_64 and aarch64) and **Android**:
//!   kernel and soft locks.
//! - **macOS**: kernel and soft locks through the shared POSIX adapter; the
//!   exchange is `renameatx_np(RENAME_SWAP)`.
//! - **Windows**: the kernel lock ([`FileLock`], `LockFileEx` on byte 0)
//!   and soft locks ([`SoftLock`]). A marker is held open without delete
//!   sharing, as filelock holds it, so nobody can move or delete a live
//!   holder's marker; a stale one (its holder exited) is renamed aside and
//!   deleted through a handle on the judged file. A live holder's marker is
//!   never broken there, an expired lease included.

pub use swaplock_core as core;

mod error;
pub use error::{LockError, Step};

/// The OS adapter the facade drives: its syscalls, one per step.
#[cfg(any(target_os = "linux", target_os = "android"))]
use swaplock_linux as adapter;
#[cfg(target_vendor = "apple")]
use swaplock_macos as adapter;
#[cfg(windows)]
use swaplock_windows as adapter;

#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_vendor = "apple",
    windows
)))]
compile_error!("swaplock has adapters for Linux, Android, Apple systems and Windows only");

pub mod kernel;
pub use kernel::{FileLock, FileLockGuard};
pub mod soft;
pub use soft::{SoftLock, SoftLockGuard};
