//! The syscalls of the kernel-lock protocols: the shared POSIX ones of
//! [`swaplock_unix::kernel`].

pub use swaplock_unix::kernel::*;

/// This process's umask, read without changing it: macOS has no such
/// call (no `/proc`), so the answer is always `None` and a caller falls
/// back to [`umask`] set-and-restore.
pub fn read_umask() -> Option<u32> {
    None
}
