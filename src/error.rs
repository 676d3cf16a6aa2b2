//! Errors that name the lock file and the step that failed.

// Only the Linux and Android lock types construct these so far.
#![cfg_attr(not(any(target_os = "linux", target_os = "android")), allow(dead_code))]

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

/// The step of a lock operation that failed.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Opening (or creating) the lock file.
    Open,
    /// Taking the lock (`fcntl` or `flock`).
    Lock,
    /// `fstat` of the locked descriptor.
    Fstat,
    /// `stat` of the lock file's path.
    Stat,
    /// Releasing the lock.
    Unlock,
    /// Removing the lock file.
    Remove,
    /// Checking what the lock's filesystem offers: the lock is refused
    /// there (a network filesystem whose locks, or exclusive creates, do
    /// not reach other hosts).
    Filesystem,
}

impl Step {
    fn describe(self) -> &'static str {
        match self {
            Step::Open => "cannot open lock file",
            Step::Lock => "could not acquire lock",
            Step::Fstat => "could not fstat lock fd",
            Step::Stat => "could not stat lockfile",
            Step::Unlock => "could not release lock",
            Step::Remove => "could not remove lock file",
            Step::Filesystem => "refused on this filesystem",
        }
    }
}

/// A lock operation's error: which step failed on which file, and why.
///
/// It travels inside an [`io::Error`] whose [`kind`](io::Error::kind) tells
/// the caller what happened (`WouldBlock` when busy, `TimedOut`, ...);
/// reach it with [`LockError::of`].
#[derive(Debug)]
pub struct LockError {
    path: Arc<Path>,
    step: Step,
    source: io::Error,
}

impl LockError {
    pub(crate) fn io(
        path: &Arc<Path>,
        step: Step,
        kind: io::ErrorKind,
        source: io::Error,
    ) -> io::Error {
        io::Error::new(
            kind,
            LockError {
                path: Arc::clone(path),
                step,
                source,
            },
        )
    }

    /// The error of a guard used in a child forked while it was held: the
    /// lock (`what`: "the lock", "the lock and its marker") is the parent
    /// process `owner`'s, which alone can release it, and is left alone.
    pub(crate) fn forked(
        path: &Arc<Path>,
        step: Step,
        owner: impl fmt::Display,
        what: &str,
    ) -> io::Error {
        let kind = io::ErrorKind::InvalidInput;
        let source = io::Error::new(
            kind,
            format!(
                "this guard was taken by process {owner} before this process was forked \
                 from it (or from a child of it): {what} belongs to that process, and only it \
                 can release it; it is left alone"
            ),
        );
        Self::io(path, step, kind, source)
    }

    pub(crate) fn errno(path: &Arc<Path>, step: Step, errno: swaplock_core::Errno) -> io::Error {
        let source = os_error(errno);
        Self::io(path, step, source.kind(), source)
    }

    /// The lock error inside an [`io::Error`] returned by this crate.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use swaplock::{FileLock, LockError, Step};
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("no-such-dir").join("backup.lock");
    /// let err = FileLock::new(&path).lock().unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::NotFound);
    /// let lock_err = LockError::of(&err).expect("an error of this crate");
    /// assert_eq!((lock_err.path(), lock_err.step()), (&*path, Step::Open));
    /// # Ok(())
    /// # }
    /// ```
    pub fn of(error: &io::Error) -> Option<&LockError> {
        error.get_ref().and_then(|e| e.downcast_ref())
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The step that failed.
    pub fn step(&self) -> Step {
        self.step
    }

    /// The underlying OS error (or a plain kind, for a timeout).
    pub fn os_error(&self) -> &io::Error {
        &self.source
    }
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A busy soft lock says it all in one sentence that names the path.
        if let Some(explained) = self
            .source
            .get_ref()
            .and_then(|e| e.downcast_ref::<Explained>())
        {
            return explained.0.explain(f);
        }
        write!(
            f,
            "{}: {}: {}",
            self.path.display(),
            self.step.describe(),
            self.source
        )
    }
}

/// An error that says it all in one sentence of its own, which names the
/// path (a busy soft lock's report): as the source of a [`LockError`],
/// that sentence is the [`LockError`]'s `Display`.
pub(crate) trait Explain: std::error::Error + Send + Sync + 'static {
    /// The sentence.
    fn explain(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

/// An [`Explain`] error as the source of an `io::Error`; it shows as the
/// error it holds.
pub(crate) struct Explained(pub(crate) Box<dyn Explain>);

impl fmt::Debug for Explained {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Explained {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Explained {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl std::error::Error for LockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// The OS error an adapter reported, as std shows it.
#[cfg(not(windows))]
pub(crate) fn os_error(errno: swaplock_core::Errno) -> io::Error {
    io::Error::from_raw_os_error(errno.raw())
}

/// The OS error an adapter reported, as std shows it: the Win32 error when
/// the adapter kept its code, otherwise the C runtime `errno` the core
/// decided on, by name.
#[cfg(windows)]
pub(crate) fn os_error(errno: swaplock_core::Errno) -> io::Error {
    use swaplock_core::Errno;
    if let Some(code) = swaplock_windows::kernel::win32_code(errno) {
        return io::Error::from_raw_os_error(code as i32);
    }
    let kind = match errno {
        Errno::NOENT => io::ErrorKind::NotFound,
        Errno::ACCES | Errno::PERM => io::ErrorKind::PermissionDenied,
        Errno::EXIST => io::ErrorKind::AlreadyExists,
        Errno::INVAL => io::ErrorKind::InvalidInput,
        Errno::AGAIN => io::ErrorKind::WouldBlock,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, format!("{errno:?}"))
}
