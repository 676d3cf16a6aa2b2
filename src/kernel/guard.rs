//! A held kernel lock: its guard, its release, and its descriptor.

use super::*;

/// A held kernel lock (or, after an `flock` `ENOSYS` fallback, a soft
/// lock). Dropping it releases the lock; it owns everything it needs and
/// can move between threads.
#[derive(Debug)]
pub struct FileLockGuard(pub(super) Inner);

#[derive(Debug)]
pub(super) enum Inner {
    Kernel {
        fd: LockFile,
        /// Held only to be dropped with the guard, after `fd` (fields drop
        /// in order).
        #[allow(dead_code)]
        registered: Option<Registered<(FileId, Family, bool)>>,
        /// The process that took it: a forked child may not release it.
        pid: crate::pid::Me,
        scope: Scope,
        path: Arc<Path>,
        sys_path: Arc<SysPath>,
        follow_symlinks: bool,
        /// The mode a file the removal's check makes gets (where the
        /// server has no file by the name, the check makes one, as a
        /// waiter's open would: [`swaplock_core::kernel::named`]).
        mode: u32,
        names: swaplock_core::kernel::Names,
    },
    // Boxed: only the ENOSYS fallback takes this path.
    #[cfg(unix)]
    Soft(Box<dyn super::fallback::FallbackGuard>),
}

impl FileLockGuard {
    /// The lock file's path.
    pub fn path(&self) -> &Path {
        match &self.0 {
            Inner::Kernel { path, .. } => path,
            #[cfg(unix)]
            Inner::Soft(guard) => guard.path(),
        }
    }

    /// Releases the lock and closes the descriptor, reporting a failure to
    /// release (which dropping the guard cannot).
    ///
    /// In a child forked while this guard was held, the lock is its
    /// parent's: the descriptor is closed, the lock is left alone, and the
    /// answer is an error of kind
    /// [`InvalidInput`](io::ErrorKind::InvalidInput).
    ///
    /// ```
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let lock = FileLock::new(dir.path().join("backup.lock"));
    /// let guard = lock.lock()?;
    /// // ... the backup ...
    /// guard.release()?; // a failed unlock is an error here, unseen on drop
    /// assert!(lock.try_lock().is_ok());
    /// # Ok(())
    /// # }
    /// ```
    pub fn release(self) -> io::Result<()> {
        match self.0 {
            Inner::Kernel {
                fd,
                scope,
                path,
                pid,
                ..
            } => {
                #[cfg(unix)]
                if pid != crate::pid::id() {
                    fd.forget_lock();
                    return Err(forked(&path, Step::Unlock, pid.number()));
                }
                let log_id = Arc::as_ptr(&path).cast::<u8>() as usize;
                debug!("Attempting to release lock {log_id} on {}", path.display());
                #[cfg(unix)]
                let result = fd.unlock(|fd| scope.call().unlock(fd));
                #[cfg(windows)]
                let _ = pid;
                #[cfg(windows)]
                let result = {
                    let _ = scope;
                    os::unlock_byte0(&fd)
                };
                if result.is_ok() {
                    debug!("Lock {log_id} released on {}", path.display());
                }
                let _ = log_id;
                result.map_err(|e| LockError::errno(&path, Step::Unlock, e))
            }
            #[cfg(unix)]
            Inner::Soft(guard) => guard.release(),
        }
    }

    /// Deletes the lock file while holding the lock, which ends the hold:
    /// the safe way to clean up lock files (with-lock-ex's "acquire, then
    /// rm"). Waiters that had opened the old file notice, through the
    /// identity check, and lock the next file created at the path.
    ///
    /// The name is removed only if it still names the locked file, which
    /// no process following the protocol can change while we hold the lock.
    ///
    /// On Windows a file cannot be deleted while any process has it open,
    /// and every holder and waiter does: the lock is released first, and
    /// the file is deleted only if no other process has opened it by then.
    /// Otherwise it stays for the next holder, and this still returns
    /// `Ok`: the hold has ended either way.
    ///
    /// On the kernel's SMB client (Linux `cifs`) the server keeps a removed
    /// file's name while any other handle has it open ("delete pending"),
    /// and every open of the name fails meanwhile, so the waiters' would:
    /// the lock is released and the file stays for the next holder, as on
    /// Windows, and this returns `Ok`.
    ///
    /// A shared guard fails with [`InvalidInput`](io::ErrorKind::InvalidInput)
    /// and keeps nothing: others may hold the lock too. So does a guard in
    /// a child forked while it was held (the lock and the file are its
    /// parent's).
    ///
    /// ```
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("backup.lock");
    /// let guard = FileLock::new(&path).lock()?;
    /// // ... the backup ...
    /// guard.remove()?; // the hold ends, and the file is gone
    /// assert!(!path.exists());
    /// # Ok(())
    /// # }
    /// ```
    pub fn remove(self) -> io::Result<()> {
        match self.0 {
            Inner::Kernel {
                fd,
                scope,
                path,
                sys_path,
                follow_symlinks,
                pid,
                mode,
                names,
                ..
            } => {
                #[cfg(unix)]
                if pid != crate::pid::id() {
                    fd.forget_lock();
                    return Err(forked(&path, Step::Remove, pid.number()));
                }
                #[cfg(windows)]
                let _ = pid;
                if scope.shared {
                    // Other holders may share it: only an exclusive holder
                    // may remove the file (a waiter would lock a new file
                    // while they still held the old one).
                    let source = io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "a shared lock cannot remove its file: other holders may share it; \
                         take the exclusive lock to remove it",
                    );
                    return Err(LockError::io(
                        &path,
                        Step::Remove,
                        io::ErrorKind::InvalidInput,
                        source,
                    ));
                }
                // SMB's delete pending (PROTOCOL 13.5): the file stays.
                #[cfg(any(target_os = "linux", target_os = "android"))]
                if swaplock_linux::fs::of_file(fd.file()).is_ok_and(|fs| fs.traits.deletes_pending)
                {
                    drop(fd);
                    return Ok(());
                }
                let err = |e| LockError::errno(&path, Step::Remove, e);
                let kernel = kernel_os(&sys_path, follow_symlinks, mode, scope, names);
                #[cfg(unix)]
                protocol::check_remove(&mut inodes::Checked(kernel), fd.file()).map_err(err)?;
                #[cfg(windows)]
                protocol::check_remove(&mut { kernel }, &fd).map_err(err)?;
                #[cfg(unix)]
                return os::unlink(&sys_path).map_err(err);
                #[cfg(windows)]
                {
                    drop(fd);
                    // Ok(false): another process opened it, and it is
                    // theirs now.
                    os::unlink_unless_open(&sys_path)
                        .map(|_removed| ())
                        .map_err(err)
                }
            }
            // A soft lock's release removes its marker.
            #[cfg(unix)]
            Inner::Soft(guard) => guard.release(),
        }
    }
}

#[cfg(unix)]
impl FileLockGuard {
    /// Lets the lock's descriptor survive `exec` (clears its close-on-exec
    /// flag, `fcntl(F_SETFD)`), so that a command this process becomes
    /// holds the lock for as long as it runs, with no process in between:
    /// what `with-lock-ex` does. A classic `fcntl` lock is kept across
    /// `exec` by the process; an open file description `fcntl` lock and an
    /// `flock` lock by the open file description, which forked children
    /// share too.
    ///
    /// The error is the OS's. A lock that fell back to a soft lock
    /// ([`FileLock::fell_back_to_soft`]) is not held by a descriptor, so
    /// nothing can hand it over: an error of kind
    /// [`Unsupported`](io::ErrorKind::Unsupported).
    ///
    /// ```no_run
    /// use std::os::unix::process::CommandExt;
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let guard = FileLock::new("/run/lock/backup.lock").lock()?;
    /// guard.inherit_on_exec()?;
    /// // The backup runs holding the lock; the lock ends when it exits.
    /// let e = std::process::Command::new("backup").exec();
    /// # Err(e)
    /// # }
    /// ```
    pub fn inherit_on_exec(&self) -> io::Result<()> {
        match &self.0 {
            Inner::Kernel { fd, .. } => {
                os::clear_cloexec(fd).map_err(|e| io::Error::from_raw_os_error(e.raw()))
            }
            Inner::Soft(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a soft lock is not held by a descriptor that exec could keep",
            )),
        }
    }
}

#[cfg(unix)]
impl std::os::fd::AsFd for FileLockGuard {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match &self.0 {
            Inner::Kernel { fd, .. } => fd.as_fd(),
            Inner::Soft(guard) => guard.fd(),
        }
    }
}

#[cfg(windows)]
impl std::os::windows::io::AsHandle for FileLockGuard {
    fn as_handle(&self) -> std::os::windows::io::BorrowedHandle<'_> {
        match &self.0 {
            Inner::Kernel { fd, .. } => fd.as_handle(),
        }
    }
}

// The guards own everything they need, so they move between threads.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<FileLockGuard>();
    #[cfg(unix)]
    send::<SoftLockGuard>();
};
