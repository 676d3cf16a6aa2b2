//! The with-lock-ex protocol's acquire loop, over the [`KernelOs`] trait:
//! open (creating), lock, then check the locked descriptor against the
//! path, and start again when a holder deleted or replaced the file.
//!
//! `flock` may answer `ENOSYS` (some FUSE filesystems, Android storage). The
//! loop then reports [`Outcome::Unsupported`] with the descriptor still
//! open and whether this attempt created the file, so the caller can remove
//! its own placeholder while it is open (never a peer's soft marker found
//! at the path: invariant I22) and fall back to a soft lock.

use crate::decide::{check_kernel_lock, FileId, KernelLockCheck};
use crate::errno::Errno;

/// The operations of a kernel lock on one path, each one syscall.
pub trait KernelOs {
    /// An open descriptor of the lock file.
    type File;
    /// `open(path, O_RDWR|O_CREAT[|O_EXCL])`, never truncating.
    fn open(&mut self, exclusive: bool) -> Result<Self::File, Errno>;
    /// Takes the lock (`fcntl` on byte 0, or `flock`), waiting or not.
    fn lock(&mut self, file: &Self::File, wait: bool) -> Result<(), Errno>;
    /// `fstat(file)`.
    fn fstat(&mut self, file: &Self::File) -> Result<FileId, Errno>;
    /// `stat(path)` (or `lstat`, where symlinks are not followed).
    fn stat(&mut self) -> Result<FileId, Errno>;
    /// `close(file)`.
    fn close(&mut self, file: Self::File);
}

/// The step that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Step {
    /// Opening or creating the lock file.
    Open,
    /// Taking the lock.
    Lock,
    /// `fstat` of the locked descriptor.
    Fstat,
    /// `stat` of the path.
    Stat,
}

/// The outcome of one attempt.
#[must_use]
#[derive(Debug)]
pub enum Outcome<F> {
    /// The lock is held on this file.
    Held(F, FileId),
    /// Another process holds the lock (`EAGAIN` or `EACCES`).
    Busy(Errno),
    /// The filesystem has no such lock (`ENOSYS`); the file is still open.
    Unsupported {
        /// The descriptor.
        file: F,
        /// Whether this attempt created the file.
        created: bool,
    },
}

/// One attempt: open (creating if needed), lock, and keep the lock only if
/// the path still names the locked file. `know_creation` opens with
/// `O_EXCL` first, to learn whether this attempt created the file (which
/// the `flock` fallback needs); with-lock-ex does not.
pub fn attempt<O: KernelOs>(
    os: &mut O,
    wait: bool,
    know_creation: bool,
) -> Result<Outcome<O::File>, (Step, Errno)> {
    loop {
        let (file, created) = match know_creation {
            true => match os.open(true) {
                Ok(file) => (file, true),
                Err(e) if e == Errno::EXIST => {
                    (os.open(false).map_err(|e| (Step::Open, e))?, false)
                }
                Err(e) => return Err((Step::Open, e)),
            },
            false => (os.open(false).map_err(|e| (Step::Open, e))?, false),
        };
        loop {
            match os.lock(&file, wait) {
                Ok(()) => break,
                Err(e) if e == Errno::INTR => continue,
                Err(e) if e == Errno::AGAIN || e == Errno::ACCES => {
                    os.close(file);
                    return Ok(Outcome::Busy(e));
                }
                Err(e) if e == Errno::NOSYS => return Ok(Outcome::Unsupported { file, created }),
                Err(e) => {
                    os.close(file);
                    return Err((Step::Lock, e));
                }
            }
        }
        let locked = match os.fstat(&file) {
            Ok(id) => id,
            Err(e) => {
                os.close(file);
                return Err((Step::Fstat, e));
            }
        };
        match check_kernel_lock(locked, os.stat()) {
            KernelLockCheck::Held => return Ok(Outcome::Held(file, locked)),
            // A holder removed or replaced the file after we opened it: our
            // lock is on an orphan. Close it and lock the new file.
            KernelLockCheck::Retry => os.close(file),
            KernelLockCheck::Fail(e) => {
                os.close(file);
                return Err((Step::Stat, e));
            }
        }
    }
}
