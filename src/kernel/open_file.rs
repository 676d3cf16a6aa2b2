//! Kernel locks on a file the caller already has open, as std's
//! `File::lock`, fs4 and fd-lock offer them, with this crate's exclusion of
//! threads and its error kinds.

use crate::error::{LockError, Step};
use crate::held::Registered;
use crate::kernel::{self, Kind, Scope, Wait};
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::{Condvar, Mutex, MutexGuard};
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use swaplock_core::decide::FileId;
use swaplock_core::kernel::{self as protocol, Backoff, Outcome};
use swaplock_core::Errno;

#[cfg(unix)]
use super::inodes;
#[cfg(unix)]
use crate::adapter::kernel as os;
#[cfg(windows)]
use swaplock_windows::kernel as os;

/// The lock's descriptor while held: released through the registry of
/// [`inodes`] where that excludes this process's threads.
#[cfg(unix)]
type Held = inodes::GuardFd;
/// The lock's handle while held, whose drop unlocks.
#[cfg(windows)]
type Held = os::LockHandle;

/// A kernel lock on a file the caller opened: an `fcntl` lock on its first
/// byte ([`new`](Self::new)), or `flock` ([`flock`](Self::flock)); on
/// Windows `LockFileEx` on byte 0 for both. The lock is taken through a
/// duplicate of the file's descriptor (the same open file, so the same
/// lock), and released by the guard.
///
/// With no path, there is no check that the path still names the file
/// (see [`FileLock`](crate::FileLock)): do not delete or replace a file
/// locked this way while others may lock it by name. The exclusive lock
/// takes `&mut self`, so one lock object excludes itself at compile time;
/// two lock objects (say, on two opens of the file, in two threads)
/// exclude each other as two processes do, and a thread that waits for a
/// file it holds through another lock of this crate gets the
/// [`Deadlock`](io::ErrorKind::Deadlock) error. Shared guards of one object
/// share one kernel lock, released with the last of them. A guard used in
/// a child forked while it was held is refused, and leaves the parent's
/// lock alone; in the child, the object starts afresh. But an inherited
/// `File` shares its open file description with the parent's, and so do
/// an open file description or `flock` lock taken through it: a child
/// that must exclude its parent opens the file itself.
///
/// Where a classic `fcntl` lock stands in for open file description locks
/// (see [`FileLock`](crate::FileLock)), the file's descriptor is kept open
/// when the `OpenFileLock` drops while another lock of this process holds
/// the file (closing it would release that lock), until the last of them
/// releases: open the file once and keep the `OpenFileLock`, rather than
/// one per use, while such a lock is held.
///
/// ```no_run
/// use std::io::{Seek, SeekFrom, Write};
/// use swaplock::OpenFileLock;
/// # fn main() -> std::io::Result<()> {
/// let file = std::fs::OpenOptions::new().read(true).write(true).open("/var/lib/app/journal")?;
/// let mut lock = OpenFileLock::new(file);
/// {
///     let guard = lock.lock()?;
///     let mut file = guard.file();
///     file.seek(SeekFrom::End(0))?;
///     file.write_all(b"entry\n")?;
/// } // released here
/// let file = lock.into_inner();
/// # drop(file);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct OpenFileLock {
    /// Taken only by [`into_inner`](Self::into_inner) and drop.
    file: Option<File>,
    kind: Kind,
    /// The shared guards of this object and the lock they share, or the
    /// exclusive guard's lock.
    state: Mutex<State>,
    /// Signalled when a thread's taking of the shared lock ends.
    changed: Condvar,
    /// What error messages name: the file has no path here.
    name: Arc<Path>,
    /// Whether a filesystem that keeps locks per client mount is accepted
    /// ([`OpenFileLock::allow_client_local`]).
    client_local: bool,
    /// Set once the file's filesystem was found to share its locks
    /// between hosts (or not known to keep them per client).
    fs_checked: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    /// The process these are of (0 before the first lock).
    pid: crate::pid::Me,
    readers: usize,
    held: Option<Holding>,
    /// A thread is taking the shared lock, without this state's mutex.
    taking: bool,
}

/// The kernel lock this object holds.
#[derive(Debug)]
struct Holding {
    file: Held,
    scope: Scope,
    /// The thread's entry among the kernel locks this process holds (for
    /// the `Deadlock` check), removed with it.
    #[allow(dead_code)]
    registered: Registered<(FileId, swaplock_core::fs::Family, bool)>,
    /// The process that took it: a forked child must not release it.
    pid: crate::pid::Me,
}

impl Holding {
    /// Releases the lock; in a forked child only closes the descriptor
    /// (the lock is the parent's), with the error that says so.
    fn release(self, name: &Arc<Path>) -> io::Result<()> {
        if self.pid != crate::pid::id() {
            #[cfg(unix)]
            self.file.forget_lock();
            return Err(LockError::forked(
                name,
                Step::Unlock,
                self.pid.number(),
                "the lock",
            ));
        }
        release(self.file, self.scope).map_err(|e| LockError::errno(name, Step::Unlock, e))
    }
}

impl OpenFileLock {
    /// An `fcntl` lock on the first byte of `file` (the with-lock-ex
    /// protocol's lock), which must be open for writing for the exclusive
    /// lock and for reading for the shared one, as `fcntl` requires.
    ///
    /// ```
    /// use std::fs::OpenOptions;
    /// use std::io::ErrorKind;
    /// use swaplock::OpenFileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("journal");
    /// let open = || OpenOptions::new().read(true).append(true).create(true).open(&path);
    /// let mut lock = OpenFileLock::new(open()?);
    /// let mut other = OpenFileLock::new(open()?); // another open of the file
    /// let _guard = lock.lock()?;
    /// assert_eq!(other.try_lock().unwrap_err().kind(), ErrorKind::WouldBlock);
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(file: File) -> Self {
        Self::with_kind(file, Kind::Fcntl)
    }

    /// An `flock` lock on `file`.
    ///
    /// ```no_run
    /// use std::fs::OpenOptions;
    /// use swaplock::OpenFileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let file = OpenOptions::new().read(true).write(true).open("/var/lib/app/journal")?;
    /// let mut lock = OpenFileLock::flock(file);
    /// let _guard = lock.lock()?; // `flock /var/lib/app/journal true` waits meanwhile
    /// # Ok(())
    /// # }
    /// ```
    pub fn flock(file: File) -> Self {
        Self::with_kind(file, Kind::Flock)
    }

    fn with_kind(file: File, kind: Kind) -> Self {
        OpenFileLock {
            file: Some(file),
            kind,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            name: Arc::from(Path::new("(an open file)")),
            client_local: false,
            fs_checked: AtomicBool::new(false),
        }
    }

    /// Accepts a file on a filesystem whose kernel locks exclude only the
    /// processes that use this client mount, as
    /// [`FileLock::allow_client_local`](crate::FileLock::allow_client_local)
    /// does; by default a lock there is refused.
    pub fn allow_client_local(mut self, allow: bool) -> Self {
        self.client_local = allow;
        self
    }

    /// Refuses a lock, once per object, where the file's filesystem keeps
    /// kernel locks per client mount (PROTOCOL 13.5).
    fn check_filesystem(&self) -> io::Result<()> {
        if self.client_local || self.fs_checked.load(Ordering::Relaxed) {
            return Ok(());
        }
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Ok(fs) = swaplock_linux::fs::of_file(self.file()) {
            let family = self.kind.family();
            if let Some(refusal) = swaplock_core::fs::kernel_lock_refusal(&fs.traits, family) {
                return Err(crate::netfs::refused(
                    &self.name,
                    &fs.fstype,
                    &fs.traits,
                    refusal,
                    Some(family),
                ));
            }
        }
        self.fs_checked.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// The file.
    pub fn file(&self) -> &File {
        self.file.as_ref().expect("taken only when consumed")
    }

    /// The file back, unlocked. (Where a classic `fcntl` lock stands in for
    /// open file description locks, closing it releases any `fcntl` lock
    /// this process holds on the file: see [`FileLock`](crate::FileLock).
    /// Dropping the `OpenFileLock` instead closes it safely.)
    ///
    /// ```
    /// use std::fs::OpenOptions;
    /// use std::io::Write;
    /// use swaplock::OpenFileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("journal");
    /// let file = OpenOptions::new().read(true).append(true).create(true).open(&path)?;
    /// let mut lock = OpenFileLock::new(file);
    /// lock.lock()?.file().write_all(b"entry\n")?; // the guard drops, releasing, here
    /// let file = lock.into_inner(); // the file back, unlocked
    /// file.sync_all()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn into_inner(mut self) -> File {
        self.unlock_leaked();
        self.file.take().expect("taken only when consumed")
    }

    /// Releases a lock only a leaked guard can have left.
    fn unlock_leaked(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        state.readers = 0;
        if let Some(holding) = state.held.take() {
            let _ = holding.release(&self.name);
        }
    }

    /// Waits for the exclusive lock; see [`FileLock::lock`](crate::FileLock::lock).
    ///
    /// ```
    /// use std::fs::OpenOptions;
    /// use std::io::Write;
    /// use swaplock::OpenFileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("journal");
    /// let file = OpenOptions::new().read(true).append(true).create(true).open(&path)?;
    /// let mut lock = OpenFileLock::new(file);
    /// let guard = lock.lock()?;
    /// guard.file().write_all(b"entry\n")?;
    /// guard.release()?;
    /// assert_eq!(std::fs::read(&path)?, b"entry\n");
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock(&mut self) -> io::Result<OpenFileGuard<'_>> {
        self.acquire(Wait::Forever, false)
    }

    /// Takes the exclusive lock if it is free; an error of kind
    /// [`WouldBlock`](io::ErrorKind::WouldBlock) otherwise.
    ///
    /// ```no_run
    /// use std::fs::OpenOptions;
    /// use std::io::{ErrorKind, Write};
    /// use swaplock::OpenFileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let file = OpenOptions::new().read(true).append(true).open("/var/lib/app/journal")?;
    /// let mut lock = OpenFileLock::new(file);
    /// match lock.try_lock() {
    ///     Ok(guard) => guard.file().write_all(b"entry\n")?,
    ///     Err(e) if e.kind() == ErrorKind::WouldBlock => eprintln!("the journal is busy"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_lock(&mut self) -> io::Result<OpenFileGuard<'_>> {
        self.acquire(Wait::No, false)
    }

    /// Waits up to `timeout` for the exclusive lock; an error of kind
    /// [`TimedOut`](io::ErrorKind::TimedOut) if it stays held.
    ///
    /// ```no_run
    /// use std::fs::OpenOptions;
    /// use std::time::Duration;
    /// use swaplock::OpenFileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let file = OpenOptions::new().read(true).write(true).open("/var/lib/app/journal")?;
    /// let mut lock = OpenFileLock::new(file);
    /// let _guard = lock.lock_timeout(Duration::from_secs(5))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock_timeout(&mut self, timeout: Duration) -> io::Result<OpenFileGuard<'_>> {
        self.acquire(kernel::within(timeout), false)
    }

    /// Waits for the shared lock.
    ///
    /// ```
    /// use std::fs::File;
    /// use std::io::Read;
    /// use swaplock::OpenFileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("index");
    /// std::fs::write(&path, "v1")?;
    /// let lock = OpenFileLock::new(File::open(&path)?); // read only: enough to share
    /// let guard = lock.lock_shared()?;
    /// let mut text = String::new();
    /// guard.file().read_to_string(&mut text)?;
    /// assert_eq!(text, "v1");
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock_shared(&self) -> io::Result<OpenFileGuard<'_>> {
        self.acquire(Wait::Forever, true)
    }

    /// Takes the shared lock if no exclusive holder has it; an error of
    /// kind [`WouldBlock`](io::ErrorKind::WouldBlock) otherwise.
    pub fn try_lock_shared(&self) -> io::Result<OpenFileGuard<'_>> {
        self.acquire(Wait::No, true)
    }

    /// Waits up to `timeout` for the shared lock.
    pub fn lock_shared_timeout(&self, timeout: Duration) -> io::Result<OpenFileGuard<'_>> {
        self.acquire(kernel::within(timeout), true)
    }

    fn busy(&self, wait: Wait, source: io::Error) -> io::Error {
        let kind = match wait.timed() {
            true => io::ErrorKind::TimedOut,
            false => io::ErrorKind::WouldBlock,
        };
        LockError::io(&self.name, Step::Lock, kind, source)
    }

    /// This object's state, of this process: in a child forked while the
    /// object held a lock, the hold and the count are the parent's, and
    /// start afresh (the child's descriptor of the lock is closed, the
    /// lock left to the parent).
    fn state(&self) -> MutexGuard<'_, State> {
        let mut state = crate::sync::lock(&self.state);
        let pid = crate::pid::id();
        if state.pid != pid {
            state.pid = pid;
            state.readers = 0;
            state.taking = false;
            if let Some(holding) = state.held.take() {
                #[cfg(unix)]
                holding.file.forget_lock();
                #[cfg(windows)]
                drop(holding);
            }
        }
        state
    }

    fn acquire(&self, wait: Wait, shared: bool) -> io::Result<OpenFileGuard<'_>> {
        self.check_filesystem()?;
        let guard = |shared| OpenFileGuard {
            lock: self,
            shared,
            pid: crate::pid::id(),
        };
        let scope = Scope::new(self.kind, false, shared);
        let mut state = self.state();
        loop {
            if shared && state.readers > 0 && !state.taking {
                // This object holds the shared lock already.
                state.readers += 1;
                return Ok(guard(shared));
            }
            if !state.taking && state.held.is_none() {
                break;
            }
            // Another thread is taking this object's shared lock (the
            // exclusive one takes `&mut self`): its answer decides.
            state = match wait {
                Wait::No => return Err(self.busy(wait, io::ErrorKind::WouldBlock.into())),
                Wait::Forever => self.changed.wait(state).unwrap_or_else(|p| p.into_inner()),
                Wait::Until(deadline) => {
                    let left = kernel::time_left(deadline);
                    if left.is_zero() {
                        return Err(self.busy(wait, io::ErrorKind::TimedOut.into()));
                    }
                    let (state, _) = self
                        .changed
                        .wait_timeout(state, left)
                        .unwrap_or_else(|p| p.into_inner());
                    state
                }
            };
        }
        if matches!(wait, Wait::Forever) {
            // This thread waiting for a file it holds would wait forever.
            if kernel::held_here(self.kind, shared, || file_id(self.file())) {
                return Err(kernel::deadlock_error(&self.name));
            }
        }
        // Taken without the state's mutex held: other threads' attempts on
        // this object answer meanwhile, and a fork meanwhile finds it free.
        state.taking = true;
        drop(state);
        let (held, outcome) = self.attempt(scope, wait);
        let mut state = self.state();
        state.taking = false;
        self.changed.notify_all();
        match outcome {
            Ok(true) => {
                let (file, id) = held.expect("held when taken");
                state.held = Some(Holding {
                    file,
                    scope,
                    registered: kernel::register(id, self.kind, shared),
                    pid: crate::pid::id(),
                });
                state.readers = usize::from(shared);
                Ok(guard(shared))
            }
            Ok(false) => Err(self.busy(wait, io::ErrorKind::WouldBlock.into())),
            Err(e) => Err(LockError::errno(&self.name, Step::Lock, e)),
        }
    }

    /// Runs the core's acquire on a duplicate of the file: the lock's
    /// handle if taken (`Ok(true)`), `Ok(false)` if it stayed busy.
    fn attempt(&self, scope: Scope, wait: Wait) -> (Option<(Held, FileId)>, Result<bool, Errno>) {
        #[cfg(unix)]
        let mut kernel = {
            use std::os::fd::AsFd;
            let os = os::OpenKernel {
                file: self.file().as_fd(),
                call: scope.call(),
                shared: scope.shared,
            };
            inodes::Threads::new(os, scope.excludes_own_process(), wait)
        };
        #[cfg(windows)]
        let mut kernel = {
            use std::os::windows::io::AsHandle;
            os::OpenWindowsKernel {
                file: self.file().as_handle(),
                shared: scope.shared,
            }
        };
        let mut backoff = Backoff::of(wait.left(kernel::time_left));
        let outcome = protocol::acquire(&mut kernel, wait.blocks(), false, &mut backoff);
        match outcome {
            #[cfg(unix)]
            Ok(Outcome::Held(fd, id)) => (Some((kernel.guard_fd(fd), id)), Ok(true)),
            #[cfg(windows)]
            Ok(Outcome::Held(handle, id)) => (Some((handle, id)), Ok(true)),
            Ok(Outcome::Busy(_)) => (None, Ok(false)),
            // Not offered to the core: ENOSYS is an error here.
            Ok(Outcome::Unsupported { .. }) => (None, Err(Errno::NOSYS)),
            Err((_, e)) => (None, Err(e)),
        }
    }
}

/// The identity of an open file.
#[cfg(unix)]
fn file_id(file: &File) -> Result<FileId, Errno> {
    os::fstat_id(file)
}

#[cfg(windows)]
fn file_id(file: &File) -> Result<FileId, Errno> {
    os::handle_id(file)
}

/// Releases a lock this object took.
fn release(held: Held, scope: Scope) -> Result<(), Errno> {
    #[cfg(unix)]
    return held.unlock(|fd| scope.call().unlock(fd));
    #[cfg(windows)]
    {
        let _ = scope;
        os::unlock_byte0(&held).map(|()| drop(held))
    }
}

/// A held lock on an [`OpenFileLock`]'s file, which it gives as `&File`;
/// dropping it releases the lock (a shared one with this object's last
/// shared guard).
#[derive(Debug)]
pub struct OpenFileGuard<'a> {
    lock: &'a OpenFileLock,
    shared: bool,
    /// The process that took it.
    pid: crate::pid::Me,
}

impl OpenFileGuard<'_> {
    /// The locked file.
    pub fn file(&self) -> &File {
        self.lock.file()
    }

    /// Releases the lock, reporting a failure to release (which dropping
    /// the guard cannot).
    ///
    /// ```
    /// use std::fs::OpenOptions;
    /// use swaplock::OpenFileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("journal");
    /// let file = OpenOptions::new().read(true).append(true).create(true).open(&path)?;
    /// let mut lock = OpenFileLock::new(file);
    /// let guard = lock.lock()?;
    /// guard.release()?; // a failed unlock is an error here, unseen on drop
    /// let _again = lock.try_lock()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn release(self) -> io::Result<()> {
        let result = self.release_held();
        std::mem::forget(self);
        result
    }

    fn release_held(&self) -> io::Result<()> {
        let mut state = self.lock.state();
        if self.pid != state.pid {
            // A forked child: the state dropped the parent's hold.
            return Err(LockError::forked(
                &self.lock.name,
                Step::Unlock,
                self.pid.number(),
                "the lock",
            ));
        }
        if self.shared {
            state.readers = state.readers.saturating_sub(1);
            if state.readers > 0 {
                return Ok(());
            }
        }
        match state.held.take() {
            Some(holding) => holding.release(&self.lock.name),
            None => Ok(()),
        }
    }
}

impl std::ops::Deref for OpenFileGuard<'_> {
    type Target = File;

    fn deref(&self) -> &File {
        self.lock.file()
    }
}

impl Drop for OpenFileGuard<'_> {
    fn drop(&mut self) {
        let _ = self.release_held();
    }
}

impl Drop for OpenFileLock {
    fn drop(&mut self) {
        self.unlock_leaked();
        // Closed through the registry: where a classic lock stands in for
        // open file description locks, a plain close would release this
        // process's other locks on the file.
        #[cfg(unix)]
        if let Some(file) = self.file.take() {
            inodes::close(file.into());
        }
    }
}
