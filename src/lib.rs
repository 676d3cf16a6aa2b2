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
//! # What each kind guarantees, and what it cannot
//!
//! - **Kernel locks** ([`FileLock`]) end with their holder: the kernel
//!   releases them the instant it dies, and nothing is left but the lock
//!   file. A hung or stopped holder holds on. Across hosts they exclude
//!   only where the filesystem forwards locks (NFS with its lock manager),
//!   not on FUSE filesystems such as sshfs.
//! - **Soft and marker locks** ([`SoftLock::soft`], [`SoftLock::marker`])
//!   outlive a dead holder until the next contender on its host judges the
//!   marker stale and takes it over, by an atomic exchange that never
//!   leaves the path empty. A hung or stopped holder holds on. A marker of
//!   another host is never judged stale. On a filesystem that cannot
//!   exchange names a stale marker is never moved: [`SoftLock::force_break`]
//!   removes it once its holder is known gone.
//! - **Leases** ([`SoftLock::lease`]) also expire when their holder stops
//!   refreshing for the lease duration, on any host; a holder stopped that
//!   long learns it has lost the lease only when it runs again
//!   ([`SoftLock::on_compromise`]).
//! - **Strict locks** (`StrictLock`, Unix; filelock's
//!   `StrictSoftFileLock`) never expire: a holder that dies keeps its
//!   claims until an operator removes them (`StrictLock::break_dead`
//!   removes only those of a holder this host proves dead). A hung holder
//!   holds on.
//! - **Never a wedge**: a soft lock's name must leave room for its derived
//!   names (at most [`core::names::MAX_LOCK_NAME`] bytes, refused before
//!   anything is created otherwise); a contender killed while it publishes
//!   leaves nothing where the directory has unnamed files (Linux
//!   `O_TMPFILE`); a release needs no new file or descriptor; a killed
//!   breaker's leftovers are put back or swept by the next takeover. The
//!   simulator in the repository checks that a fresh contender can always
//!   take a lock nobody holds.
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
// docs.rs labels each platform's and feature's items with what they need.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use swaplock_core as core;

#[cfg(feature = "tokio")]
mod async_wait;
/// A debug message of the `log` feature, on the target `swaplock` (as
/// filelock logs each acquire and release, at debug level, on its logger
/// `filelock`); nothing, its arguments unevaluated, without the feature.
macro_rules! debug {
    ($($arg:tt)+) => {{
        #[cfg(feature = "log")]
        {
            log::debug!(target: "swaplock", $($arg)+);
        }
    }};
}

#[cfg(unix)]
mod atfork;
mod beat;
mod error;
mod held;
#[cfg(any(target_os = "linux", target_os = "android"))]
mod kept;
mod lists;
#[cfg(all(test, swaplock_model))]
mod model;
#[cfg(any(target_os = "linux", target_os = "android"))]
#[cfg_attr(docsrs, doc(cfg(any(target_os = "linux", target_os = "android"))))]
pub mod netfs;
mod pid;
mod sync;
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
pub use kernel::open_file::{OpenFileGuard, OpenFileLock};
pub use kernel::{FileLock, FileLockGuard};
#[cfg(unix)]
#[cfg_attr(docsrs, doc(cfg(unix)))]
pub mod rw;
#[cfg(unix)]
pub use rw::{SoftRwGuard, SoftRwLock};
pub mod soft;
pub use soft::{SoftLock, SoftLockGuard};
#[cfg(unix)]
#[cfg_attr(docsrs, doc(cfg(unix)))]
pub mod sqlite;
#[cfg(unix)]
pub use sqlite::{SqliteRwGuard, SqliteRwLock};
#[cfg(unix)]
#[cfg_attr(docsrs, doc(cfg(unix)))]
pub mod strict;
#[cfg(unix)]
pub use strict::{StrictLock, StrictLockGuard};
#[cfg(feature = "etcd")]
#[cfg_attr(docsrs, doc(cfg(feature = "etcd")))]
pub mod etcd;
#[cfg(feature = "etcd")]
#[cfg_attr(docsrs, doc(cfg(feature = "etcd")))]
pub use etcd::{EtcdLock, EtcdLockGuard};

/// The process control of the commands that run a program under a lock
/// (`swaplock run`'s supervisor and its warden, `with-lock-ex`'s exec):
/// the OS adapter's forwards to pipes, process groups, signals and the
/// terminal, which the commands use instead of calling the system
/// themselves.
///
/// It exists for this crate's own commands, `swaplock` and
/// `with-lock-ex`, and is public only because they are other crates of
/// the same package. It is not part of the library's API: it is hidden
/// from the documentation, and may change or go in any release, with no
/// stability promise.
#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
#[doc(hidden)]
pub use adapter::supervise;
