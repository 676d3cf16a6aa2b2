//! The filesystem judgement of a kernel lock (PROTOCOL 13.5): whether its
//! path's filesystem keeps such locks per client mount (refused), and how
//! its client may answer the lock file's name (the identity check's
//! [`Names`]).

use super::*;

/// How [`FileLock::names`] keeps a [`Names`].
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) const fn names_code(names: Names) -> u8 {
    match names {
        Names::Trusted => 0,
        Names::Cached => 1,
        Names::Delegated => 2,
    }
}

/// [`FileLock::fs_judged`] before any file was judged.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) const NOT_JUDGED: u64 = u64::MAX;

impl FileLock {
    /// The kernel lock family of this lock, as the filesystem judgement
    /// names it.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub(super) fn family(&self) -> Family {
        self.kind.family()
    }

    /// Refuses this lock before it is tried where the filesystem its path
    /// leads to keeps kernel locks per client mount (PROTOCOL 13.5): a
    /// wait there would be for a lock that excludes no other host. Until
    /// a file it took was judged ([`FileLock::judge_file`]), which settles
    /// it.
    pub(super) fn check_filesystem(&self) -> io::Result<()> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if self.fs_judged.load(Ordering::Relaxed) == NOT_JUDGED {
            let names = crate::netfs::check_kernel(
                &self.path,
                self.family(),
                self.ofd(),
                self.client_local,
            )?;
            self.names.store(names_code(names), Ordering::Relaxed);
        }
        Ok(())
    }

    /// Whether this lock's exclusive form is owned by an open file
    /// description (`flock`, an open file description `fcntl` lock), as
    /// far as known (the kernel's support for the latter is learnt at the
    /// first lock file this process opens).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub(super) fn ofd(&self) -> bool {
        inodes::owned_by_description(self.scope(false).call()) == Some(true)
    }

    /// How the lock file's name may be answered by its client
    /// ([`FileLock::names`]); elsewhere than Linux and Android, where the
    /// filesystem is not read, as the filesystem has it.
    pub(super) fn names(&self) -> Names {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        return match self.names.load(Ordering::Relaxed) {
            0 => Names::Trusted,
            1 => Names::Cached,
            _ => Names::Delegated,
        };
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        Names::Trusted
    }

    /// Judges the file a lock was just taken on (of device `dev`): where
    /// its filesystem keeps kernel locks per client mount, the lock is
    /// refused (the caller releases it). Whatever led there (a symlink, a
    /// mount namespace, a directory made since) the file itself is judged,
    /// once per device a lock object meets.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub(super) fn judge_file(&self, fd: std::os::fd::BorrowedFd<'_>, dev: u64) -> io::Result<()> {
        if self.fs_judged.load(Ordering::Relaxed) == dev {
            return Ok(());
        }
        let names = crate::netfs::check_kernel_file(
            &self.path,
            fd,
            dev,
            self.family(),
            self.ofd(),
            self.client_local,
        )?;
        self.names.store(names_code(names), Ordering::Relaxed);
        self.fs_judged.store(dev, Ordering::Relaxed);
        Ok(())
    }
}
