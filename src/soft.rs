//! Soft locks: marker files for filesystems where kernel locks fail (NFS,
//! SMB, Android storage, `flock` answering `ENOSYS`), byte-compatible with
//! Python filelock 4.2.11.
//!
//! A soft lock is held by whoever created the marker file at the lock path
//! (with `O_EXCL`) and wrote a complete record into it. Three kinds, as in
//! filelock:
//!
//! | swaplock | filelock | record | broken when |
//! |---|---|---|---|
//! | [`Kind::Soft`] | `SoftFileLock` | `<pid>\n<host>\n<start>\n` | the holder is dead (or its PID recycled) |
//! | [`Kind::Marker`] | `MarkerSoftFileLock` | `filelock/2`, `mode=exclusive` | the holder is dead |
//! | [`Kind::Lease`] | `SoftFileLease` | `filelock/2`, `mode=lease` | the holder is dead, or stopped refreshing for the lease duration |
//!
//! **All processes that use one path must use the same kind.** A
//! `SoftFileLock` reader takes a protocol 2 marker for a malformed one and
//! evicts it after 2 seconds, so mixing `Soft` with `Marker` or `Lease`
//! gives no mutual exclusion.
//!
//! A stale marker (its holder on this host is provably dead) is replaced in
//! one step: the contender writes its own complete marker under a private
//! name and exchanges it with the lock path (`renameat2(RENAME_EXCHANGE)`),
//! so the lock path is never empty, and it keeps the lock only if the file
//! it took is the one it judged. **Where the filesystem cannot exchange
//! names (NFS, SMB, some FUSE and overlay filesystems), a stale marker is
//! never moved**: contenders wait for their timeout, and an operator
//! removes it with [`SoftLock::force_break`] once its holder is known gone.
//! A marker naming another host is never judged stale (its PIDs cannot be
//! probed from here) unless it is a lease that stopped being refreshed.
//!
//! On Windows there is no exchange. A marker is held open without delete
//! sharing, so nobody can move or delete it while its holder lives; a stale
//! one is renamed aside and deleted through a handle on the judged file,
//! and the contender then creates its own. A live holder's marker (an
//! expired lease included) is never broken there.
//!
//! Pick a **lease** when holders may run on several hosts, or may hang
//! rather than die: a lease expires once its holder stops refreshing it
//! (a heartbeat thread refreshes it every third of its duration), measured
//! on the contender's own monotonic clock, never by comparing clocks.
//!
//! ```no_run
//! use swaplock::soft::SoftLock;
//! use std::time::Duration;
//! # fn main() -> std::io::Result<()> {
//! let lock = SoftLock::marker("/mnt/nfs/jobs/nightly.lock");
//! let guard = lock.lock_timeout(Duration::from_secs(10))?;
//! // ... exclusive work ...
//! guard.release()?;
//! # Ok(())
//! # }
//! ```

use crate::adapter::soft::{self as os, SoftOs};
use crate::error::{LockError, Step};
use crate::held::{self, Registered};
use std::cell::Cell;
use std::io;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;
use swaplock_core::decide::{FileId, HeldBecause};
use swaplock_core::host::HostName;
use swaplock_core::names::{Name, MAX_LOCK_NAME, NAME_MAX};
use swaplock_core::record::{classify, Classified, Content, Mode, READ_LIMIT};
use swaplock_core::soft::{
    self as protocol, Attempt, Clock, CompromiseWatch, Config, Contender, Held, Holder, LeaseTerms,
    Refresh, Standing,
};
pub use swaplock_core::soft::{Compromise, Kind};
use swaplock_core::start::StartToken;
use swaplock_core::wait::{Deadline, Patience};
use swaplock_core::{Errno, Pid};

#[cfg(unix)]
mod sys {
    //! The lock's directory and marker as POSIX descriptors.
    pub(super) use crate::adapter::kernel::dup;
    pub(super) use std::ffi::CString as DirName;
    pub(super) use std::os::fd::OwnedFd as Dir;
    pub(super) use std::os::fd::OwnedFd as File;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    /// The directory's path as `open_dir` takes it.
    pub(super) fn dir_name(dir: &Path) -> DirName {
        DirName::new(dir.as_os_str().as_bytes()).unwrap_or_default()
    }

    /// A final path component as protocol bytes.
    pub(super) fn name_bytes(name: &std::ffi::OsStr) -> &[u8] {
        name.as_bytes()
    }

    pub(super) fn dup_dir(dir: &Dir) -> Option<Dir> {
        dup(dir).ok()
    }

    pub(super) fn dup_file(file: &File) -> Option<File> {
        dup(file).ok()
    }

    /// What tells two opens of a directory apart: its identity.
    pub(super) type DirKey = swaplock_core::decide::FileId;

    pub(super) fn dir_key(dir: &Dir) -> Option<DirKey> {
        crate::adapter::kernel::fstat_id(dir).ok()
    }
}

#[cfg(windows)]
mod sys {
    //! The lock's directory as a full path, the marker as a handle.
    pub(super) use crate::adapter::soft::Dir;
    pub(super) use std::os::windows::io::OwnedHandle as File;
    use std::path::Path;

    /// A directory path as the adapter's `open_dir` takes it.
    pub(super) type DirName = Vec<u16>;

    pub(super) fn dir_name(dir: &Path) -> DirName {
        crate::adapter::kernel::wide_path(dir)
    }

    /// A final path component as protocol bytes: its UTF-8, or nothing
    /// (refused at the first lock call) if it is not Unicode.
    pub(super) fn name_bytes(name: &std::ffi::OsStr) -> &[u8] {
        name.to_str().map(str::as_bytes).unwrap_or_default()
    }

    pub(super) fn dup_dir(dir: &Dir) -> Option<Dir> {
        Some(dir.clone())
    }

    pub(super) fn dup_file(file: &File) -> Option<File> {
        file.try_clone().ok()
    }

    /// What tells two opens of a directory apart: its full path.
    pub(super) type DirKey = Dir;

    pub(super) fn dir_key(dir: &Dir) -> Option<DirKey> {
        Some(dir.clone())
    }
}

use sys::{Dir, DirName, File};

mod wake;

/// The default pause between attempts, as filelock's `poll_interval`.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(50);
/// The default lease duration, as filelock's `lease_duration`.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

type CompromiseHook = Arc<dyn Fn(Compromise) + Send + Sync>;

/// A soft lock on a path. Building one allocates, and so does its first
/// lock (the path is resolved); later uncontended locks and unlocks of a
/// `Soft` or `Marker` lock whose directory is given in canonical form do
/// not (a lease starts a heartbeat thread, and a
/// [reentrant](SoftLock::reentrant) lock's hold is shared through one
/// allocation).
///
/// A thread that waits with no timeout for a path it already holds, through
/// another guard, gets an error of kind
/// [`Deadlock`](std::io::ErrorKind::Deadlock) at once, as filelock raises
/// "Deadlock": its own marker would keep it waiting forever; a
/// [reentrant](SoftLock::reentrant) lock re-enters the hold instead. A
/// guard counts as its acquiring thread's, even once moved to another
/// thread; wait with a timeout where guards move.
///
/// A thread that waits (with or without a timeout) for a `Soft` or
/// `Marker` lock another thread of this process holds is handed the hold
/// when that thread releases: the marker stays at the lock path, only
/// touched (its age counts from the hand-over, as a new marker's would),
/// and the waiter holds it at once, without the file ever leaving the
/// path. Threads of this process are so served before other processes'
/// waiters, which poll. A lease is released and taken afresh instead: its
/// token and heartbeat are its holder's.
#[derive(Clone)]
pub struct SoftLock {
    path: Arc<Path>,
    dir: Arc<DirName>,
    dir_path: Arc<Path>,
    base: Name,
    kind: Kind,
    poll_interval: Duration,
    mode: Option<u32>,
    lifetime: Option<Duration>,
    lease: Duration,
    heartbeat: Option<Duration>,
    on_compromise: Option<CompromiseHook>,
    contender: Arc<Mutex<Contender>>,
    /// The lock's canonical path, once known: its key among the soft
    /// locks this process holds.
    key: Arc<OnceLock<Option<Arc<Path>>>>,
    /// Whether a thread that holds the path through a reentrant lock
    /// re-enters it ([`SoftLock::reentrant`]).
    reentrant: bool,
    /// Set once the lock's directory was found to create files exclusively
    /// between clients (or not known not to).
    fs_checked: Arc<AtomicBool>,
}

impl std::fmt::Debug for SoftLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SoftLock")
            .field("path", &self.path)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl SoftLock {
    /// A soft lock of `kind` on `path`. A path whose final component is
    /// empty, or longer than
    /// [`MAX_LOCK_NAME`] (203) bytes,
    /// fails at the first lock call, before anything is created: the names
    /// a soft lock derives from it must fit in a file name too.
    ///
    /// ```
    /// use swaplock::soft::{Kind, SoftLock};
    ///
    /// let across_hosts = true; // say, from the configuration
    /// let kind = if across_hosts { Kind::Lease } else { Kind::Marker };
    /// let lock = SoftLock::new(kind, "/mnt/nfs/jobs.lock");
    /// assert_eq!(lock.kind(), Kind::Lease);
    /// ```
    pub fn new(kind: Kind, path: impl Into<PathBuf>) -> Self {
        let path: PathBuf = path.into();
        let dir_path = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let base = path.file_name().map(sys::name_bytes).unwrap_or_default();
        SoftLock {
            dir: Arc::new(sys::dir_name(&dir_path)),
            dir_path: dir_path.into(),
            base: Name::from_slice(base).unwrap_or_default(),
            path: path.into(),
            kind,
            poll_interval: DEFAULT_POLL_INTERVAL,
            mode: None,
            lifetime: None,
            lease: DEFAULT_LEASE,
            heartbeat: None,
            on_compromise: None,
            contender: Arc::new(Mutex::new(Contender::new())),
            key: Arc::new(OnceLock::new()),
            reentrant: false,
            fs_checked: Arc::new(AtomicBool::new(false)),
        }
    }

    /// filelock's `SoftFileLock`: protocol 1 records.
    ///
    /// ```
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("jobs.lock");
    /// let guard = SoftLock::soft(&path).lock()?;
    /// // The marker, as SoftFileLock writes it: the PID first, then the host.
    /// let record = std::fs::read_to_string(&path)?;
    /// assert_eq!(record.lines().next(), Some(&*std::process::id().to_string()));
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn soft(path: impl Into<PathBuf>) -> Self {
        Self::new(Kind::Soft, path)
    }

    /// filelock's `MarkerSoftFileLock`: protocol 2, `mode=exclusive`.
    ///
    /// ```
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("jobs.lock");
    /// let guard = SoftLock::marker(&path).lock()?;
    /// let record = std::fs::read_to_string(&path)?;
    /// assert!(record.starts_with(&format!("filelock/2\npid={}\n", std::process::id())));
    /// assert!(record.contains("\nmode=exclusive\n"));
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn marker(path: impl Into<PathBuf>) -> Self {
        Self::new(Kind::Marker, path)
    }

    /// filelock's `SoftFileLease`: protocol 2, `mode=lease`, 30 s by default.
    ///
    /// ```
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let lock = SoftLock::lease(dir.path().join("nightly.lock"));
    /// let guard = lock.lock()?; // a heartbeat thread refreshes it until released
    /// let owner = lock.owner()?.expect("a marker");
    /// assert_eq!((owner.mode.as_str(), owner.lease_seconds), ("lease", Some(30.0)));
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lease(path: impl Into<PathBuf>) -> Self {
        Self::new(Kind::Lease, path)
    }

    /// The pause between attempts while waiting (default 50 ms).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// // Try a busy lock every half second rather than every 50 ms.
    /// let lock = SoftLock::marker("/mnt/nfs/jobs.lock")
    ///     .poll_interval(Duration::from_millis(500));
    /// let _guard = lock.lock_timeout(Duration::from_secs(60))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// An explicit mode for the marker file (filelock's `mode`).
    pub fn mode(mut self, mode: u32) -> Self {
        self.mode = Some(mode & 0o777);
        self
    }

    /// Break any marker whose mtime is older than `lifetime`, whoever holds
    /// it (`Soft` and `Marker` only; filelock's `lifetime`). This can
    /// overlap a live holder; prefer a lease.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// // No job runs for two hours: a marker that old is broken, whoever holds it.
    /// let lock = SoftLock::marker("/mnt/nfs/jobs.lock")
    ///     .lifetime(Duration::from_secs(2 * 3600));
    /// let _guard = lock.lock()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lifetime(mut self, lifetime: Duration) -> Self {
        self.lifetime = Some(lifetime);
        self
    }

    /// The lease duration (`Lease` only; default 30 s). Every contender for
    /// a path must use the same one.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// // Every host that runs the job uses the same two minutes.
    /// let lock = SoftLock::lease("/mnt/nfs/jobs/nightly.lock")
    ///     .lease_duration(Duration::from_secs(120));
    /// let _guard = lock.lock()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lease_duration(mut self, duration: Duration) -> Self {
        self.lease = duration;
        self
    }

    /// How often the holder refreshes its lease (default: a third of the
    /// duration; must be shorter than the duration).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// // A 60 s lease, refreshed every 10 s rather than every 20 s.
    /// let lock = SoftLock::lease("/mnt/nfs/jobs/nightly.lock")
    ///     .lease_duration(Duration::from_secs(60))
    ///     .heartbeat_interval(Duration::from_secs(10));
    /// let _guard = lock.lock()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat = Some(interval);
        self
    }

    /// Makes the lock reentrant, as filelock's `is_singleton=True` makes
    /// it: a thread that holds the path through a reentrant lock of the
    /// same kind (this one or another instance) and locks it again gets a
    /// guard that shares that hold at once, and the marker is released
    /// only when the last of the hold's guards goes (filelock's
    /// `lock_counter`). A thread that holds it through a lock that is not
    /// reentrant gets the [`Deadlock`](io::ErrorKind::Deadlock) error as
    /// before; one holding it as another kind gets an error of kind
    /// [`InvalidInput`](io::ErrorKind::InvalidInput), as filelock refuses
    /// singletons with differing arguments. Holds belong to the thread
    /// that took them: another thread waits for the lock as usual.
    ///
    /// ```no_run
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// fn save(state: &str) -> std::io::Result<()> {
    ///     // Callable with or without the lock held by this thread.
    ///     let _guard = SoftLock::marker("/mnt/nfs/app.lock").reentrant(true).lock()?;
    ///     std::fs::write("/mnt/nfs/app.state", state)
    /// }
    /// let outer = SoftLock::marker("/mnt/nfs/app.lock").reentrant(true).lock()?;
    /// save("one")?; // re-enters the hold
    /// outer.release()?; // the marker goes here, with the last guard
    /// # Ok(())
    /// # }
    /// ```
    pub fn reentrant(mut self, reentrant: bool) -> Self {
        self.reentrant = reentrant;
        self
    }

    /// Called on the heartbeat thread when the lease may be lost.
    ///
    /// ```no_run
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use swaplock::SoftLock;
    ///
    /// static LOST: AtomicBool = AtomicBool::new(false);
    /// # fn main() -> std::io::Result<()> {
    /// let lock = SoftLock::lease("/mnt/nfs/jobs/nightly.lock").on_compromise(|why| {
    ///     eprintln!("the lease may be lost: {why:?}");
    ///     LOST.store(true, Ordering::Relaxed);
    /// });
    /// let guard = lock.lock()?;
    /// for batch in 0..16 {
    ///     if LOST.load(Ordering::Relaxed) {
    ///         break; // another holder may have the lock now
    ///     }
    ///     println!("batch {batch}");
    /// }
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_compromise(mut self, hook: impl Fn(Compromise) + Send + Sync + 'static) -> Self {
        self.on_compromise = Some(Arc::new(hook));
        self
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The kind of soft lock.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Waits for the lock.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let lock = SoftLock::marker(dir.path().join("jobs.lock"));
    /// let guard = lock.lock()?;
    /// // Waiting for its own marker, this thread would wait forever: refused at once.
    /// assert_eq!(lock.lock().unwrap_err().kind(), ErrorKind::Deadlock);
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock(&self) -> io::Result<SoftLockGuard> {
        self.acquire(None, true)
    }

    /// One attempt; an error of kind `WouldBlock` if the lock is held.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("jobs.lock");
    /// let _running = SoftLock::marker(&path).try_lock()?;
    /// let second = SoftLock::marker(&path).try_lock();
    /// assert_eq!(second.unwrap_err().kind(), ErrorKind::WouldBlock);
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_lock(&self) -> io::Result<SoftLockGuard> {
        self.acquire(None, false)
    }

    /// Waits up to `timeout`; an error of kind `TimedOut` if the lock stays
    /// held. The first attempt always runs, even with a zero timeout.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use std::time::Duration;
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("jobs.lock");
    /// let _running = SoftLock::marker(&path).lock()?;
    /// let err = SoftLock::marker(&path).lock_timeout(Duration::ZERO).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::TimedOut);
    /// eprintln!("{err}"); // names the path and its holder
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock_timeout(&self, timeout: Duration) -> io::Result<SoftLockGuard> {
        self.acquire(Some(timeout), true)
    }

    /// Waits for the lock (up to `timeout`, if given), calling `hook` after
    /// each attempt that found it held: at each release seen and at least
    /// every poll interval. The hook can say who holds the lock and for
    /// how long ([`WaitStatus::holder`]), for a progress line, and cancel
    /// the wait by returning [`ControlFlow::Break`]: the acquire then
    /// fails with an error of kind [`Interrupted`](io::ErrorKind::Interrupted),
    /// having taken nothing. (Another thread cancels by setting a flag the
    /// hook reads.)
    ///
    /// ```no_run
    /// use std::ops::ControlFlow;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use swaplock::SoftLock;
    ///
    /// static SHUTDOWN: AtomicBool = AtomicBool::new(false);
    /// # fn main() -> std::io::Result<()> {
    /// let guard = SoftLock::marker("/mnt/nfs/jobs.lock").lock_with(None, |wait| {
    ///     if let Ok(Some(holder)) = wait.holder() {
    ///         eprintln!("waiting {:.1?}: held by {:?} on {:?}", wait.waited(), holder.pid, holder.host);
    ///     }
    ///     match SHUTDOWN.load(Ordering::Relaxed) {
    ///         true => ControlFlow::Break(()),
    ///         false => ControlFlow::Continue(()),
    ///     }
    /// })?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock_with(
        &self,
        timeout: Option<Duration>,
        mut hook: impl FnMut(&WaitStatus<'_>) -> ControlFlow<()>,
    ) -> io::Result<SoftLockGuard> {
        self.acquire_with(timeout, true, Some(&mut hook))
    }

    /// Waits for the lock without blocking the thread, in a tokio runtime
    /// (feature `tokio`): between attempts the task sleeps until the lock
    /// path changes (on Linux and Android, the watch of the blocking wait,
    /// polled by the runtime's reactor), another lock of this process is
    /// released, or the poll interval passes. Each attempt itself is a few
    /// quick file calls, made on the task's thread.
    ///
    /// Cancel-safe: a future dropped before it returns has taken nothing
    /// and left no marker. For a timeout, wrap it in
    /// `tokio::time::timeout`. The runtime needs its IO and time drivers
    /// (`#[tokio::main]`, or `Builder::enable_all`); outside a runtime the
    /// call fails with an error of kind
    /// [`Unsupported`](io::ErrorKind::Unsupported). A
    /// [reentrant](Self::reentrant) lock cannot be awaited (an error of
    /// kind [`InvalidInput`](io::ErrorKind::InvalidInput)): its holds are a
    /// thread's, and a task moves between threads. A task that awaits a
    /// lock it holds waits for ever: no deadlock is detected.
    ///
    /// # Panics
    ///
    /// In a runtime without its IO or time driver: tokio's reactor and
    /// timer panic. (tokio cannot be asked whether a driver is enabled.)
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use swaplock::SoftLock;
    /// # async fn run() -> std::io::Result<()> {
    /// let lock = SoftLock::soft("/mnt/nfs/jobs.lock");
    /// let guard = tokio::time::timeout(Duration::from_secs(30), lock.lock_async())
    ///     .await
    ///     .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    /// // ... the lock is held ...
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn lock_async(&self) -> io::Result<SoftLockGuard> {
        crate::async_wait::in_runtime(&self.path)?;
        if self.reentrant {
            let source = io::Error::new(
                io::ErrorKind::InvalidInput,
                "a reentrant lock's holds are a thread's, and a task moves between threads: \
                 await a lock made without reentrant(true)",
            );
            return Err(LockError::io(
                &self.path,
                Step::Lock,
                io::ErrorKind::InvalidInput,
                source,
            ));
        }
        let mut watcher = wake::Watcher::new();
        loop {
            let dir = self.open_dir()?;
            watcher.before_attempt(&dir);
            // A release of this process after this shows in the count.
            let seen = *RELEASES.0.lock().unwrap_or_else(|p| p.into_inner());
            match self.acquire(None, false) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if watcher.watching() && short_of_descriptors(&e) => {
                    // The watch's own descriptors may be what ran short:
                    // the wait goes on without them.
                    watcher.give_up();
                    continue;
                }
                done => return done,
            }
            match watcher.start(&dir, &self.dir_path, &self.base) {
                wake::Next::Now => continue,
                wake::Next::After(pause) => tokio::time::sleep(pause).await,
                wake::Next::Wait if watcher.watching() => {
                    watcher.wait_async(&dir, self.poll_interval).await
                }
                // No watch: the poll, or a release of this process.
                wake::Next::Wait => Released::after(seen, self.poll_interval).await,
            }
        }
    }

    fn err(&self, step: Step, errno: Errno) -> io::Error {
        LockError::errno(&self.path, step, errno)
    }

    /// The lock object's identity in log messages (filelock's `id(self)`):
    /// the same for its clones.
    #[cfg(feature = "log")]
    fn log_id(&self) -> usize {
        Arc::as_ptr(&self.contender) as usize
    }

    /// Opens the lock's directory, creating it if missing, on a
    /// filesystem judged fit for a soft lock (PROTOCOL 13.5): a directory
    /// yet to be made is judged by its nearest existing ancestor's
    /// filesystem before anything is made, and the directory opened by its
    /// own.
    fn open_dir(&self) -> io::Result<Dir> {
        let dir = match os::open_dir(&self.dir) {
            Ok(fd) => fd,
            Err(e) if e == Errno::NOENT => {
                #[cfg(any(target_os = "linux", target_os = "android"))]
                crate::netfs::check_soft(&self.path, &self.dir_path)?;
                // As filelock does, create the lock's directory once per acquire.
                std::fs::create_dir_all(&self.dir_path)
                    .map_err(|e| LockError::io(&self.path, Step::Open, e.kind(), e))?;
                os::open_dir(&self.dir).map_err(|e| self.err(Step::Open, e))?
            }
            Err(e) => return Err(self.err(Step::Open, e)),
        };
        self.judge_dir(&dir)?;
        Ok(dir)
    }

    /// Refuses this lock where its open directory `dir` is on a filesystem
    /// whose exclusive create two hosts can both win, or one that cannot
    /// be told: no soft lock is safe there (PROTOCOL 13.5). Once per lock
    /// object; a look that could not read the filesystem fails the attempt
    /// and is made again at the next.
    fn judge_dir(&self, dir: &Dir) -> io::Result<()> {
        if self.fs_checked.load(Ordering::Relaxed) {
            return Ok(());
        }
        #[cfg(any(target_os = "linux", target_os = "android"))]
        crate::netfs::check_soft_dir(&self.path, dir)?;
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let _ = dir;
        self.fs_checked.store(true, Ordering::Relaxed);
        Ok(())
    }

    fn acquire(&self, timeout: Option<Duration>, blocking: bool) -> io::Result<SoftLockGuard> {
        self.acquire_with(timeout, blocking, None)
    }

    fn acquire_with<'h>(
        &'h self,
        timeout: Option<Duration>,
        blocking: bool,
        hook: Option<&'h mut WaitHook<'h>>,
    ) -> io::Result<SoftLockGuard> {
        #[cfg(unix)]
        crate::atfork::install();
        if self
            .path
            .file_name()
            .is_some_and(|n| n.len() > MAX_LOCK_NAME)
        {
            return Err(self.protocol_error(protocol::Error::NameTooLong));
        }
        if self.base.is_empty() {
            return Err(self.err(Step::Open, Errno::INVAL));
        }
        let lease = match self.kind {
            Kind::Lease => {
                let interval = self.heartbeat.unwrap_or(self.lease / 3);
                if self.lease.is_zero() || interval.is_zero() || interval >= self.lease {
                    let source = io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "heartbeat must be within (0, lease)",
                    );
                    return Err(LockError::io(
                        &self.path,
                        Step::Lock,
                        io::ErrorKind::InvalidInput,
                        source,
                    ));
                }
                Some((
                    LeaseTerms {
                        duration: self.lease.as_secs_f64(),
                        token: os::random_token(),
                    },
                    interval,
                ))
            }
            _ => None,
        };
        let dir = self.open_dir()?;
        let key = self.key();
        if let Some(key) = key.as_ref().filter(|_| self.reentrant) {
            if let Some(hold) = reentered(key) {
                if hold.lock.kind != self.kind {
                    return Err(self.reentered_as(hold.lock.kind));
                }
                return Ok(SoftLockGuard {
                    hold: Some(HoldRef::Shared(hold)),
                });
            }
        }
        if blocking && timeout.is_none() {
            if let Some(key) = key.as_ref().filter(|k| held_by_this_thread(k)) {
                return Err(self.deadlock(key));
            }
        }
        let me = Identity::now();
        let cfg = me.config(self, lease.map(|l| l.0));
        let mut sys = SoftOs::on(&dir);
        // The instance's memory of the marker it watches, copied: the
        // instance's mutex is not held while this acquire waits, so that
        // another thread's attempt on the same instance (its holder's
        // `try_lock`, say) never waits for this one.
        let mut contender = *self.contender.lock().unwrap_or_else(|p| p.into_inner());
        // A thread that waits may be handed the hold of a thread of this
        // process that releases (of its kind; never a lease's, whose token
        // and heartbeat are its holder's).
        let waiting = match (&key, blocking) {
            (Some(key), true) => Some(Waiting::new(Arc::clone(key), self.kind, &dir)),
            _ => None,
        };
        let mut patience = WakeOnRelease::new(
            Deadline {
                blocking,
                timeout,
                poll: self.poll_interval,
            },
            waiting,
            (&dir, &self.dir_path, &self.base),
        );
        patience.hook = hook.map(|hook| (hook, self));
        #[cfg(feature = "log")]
        {
            patience.soft = Some(self);
        }
        let started = std::time::Instant::now();
        // Whatever panics in the wait (a logger called from it, say), the
        // wait leaves the waiters a release hands its hold to, and gives
        // back a hold handed over meanwhile, before the panic goes on.
        let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut outcome = protocol::acquire(&mut sys, &cfg, &mut contender, &mut patience);
            if let Err(e) = &outcome {
                if patience.watcher.watching() && wake::short_of_descriptors(e) {
                    // The watch's own descriptors may be what ran short:
                    // the wait goes on without them, polling, for the
                    // time left.
                    patience.watcher.give_up();
                    patience.deadline.timeout =
                        timeout.map(|t| t.saturating_sub(started.elapsed()));
                    outcome = protocol::acquire(&mut sys, &cfg, &mut contender, &mut patience);
                }
            }
            outcome
        }));
        let outcome = match waited {
            Ok(outcome) => outcome,
            Err(panic) => {
                patience.cancelled = true;
                patience.panicked = Some(panic);
                Err(protocol::Error::Os {
                    op: protocol::Op::Create,
                    errno: Errno::INTR,
                })
            }
        };
        *self.contender.lock().unwrap_or_else(|p| p.into_inner()) = contender;
        let handed = patience.waiting.as_mut().and_then(Waiting::leave);
        // A cancelled wait holds nothing, even a hold handed over since.
        let handed = match handed {
            Some(held) if patience.cancelled => {
                let _ = protocol::release(&mut sys, &cfg, held);
                notify_release();
                None
            }
            handed => handed,
        };
        if let Some(panic) = patience.panicked.take() {
            std::panic::resume_unwind(panic);
        }
        let outcome = match (outcome, handed) {
            (Ok(Attempt::Acquired(held)), Some(extra)) => {
                // Handed a hold while an attempt took the lock afresh (the
                // handed marker was broken meanwhile): that one goes.
                let _ = protocol::release(&mut sys, &cfg, extra);
                Ok(Attempt::Acquired(held))
            }
            (_, Some(held)) => Ok(Attempt::Acquired(held)),
            (outcome, None) => outcome,
        };
        #[cfg(feature = "log")]
        match &outcome {
            Ok(Attempt::Acquired(_)) => {
                debug!("Lock {} acquired on {}", self.log_id(), self.path.display())
            }
            Ok(Attempt::Busy(_)) if patience.cancelled => debug!(
                "Cancellation requested for lock {} on {}",
                self.log_id(),
                self.path.display()
            ),
            Ok(Attempt::Busy(_)) if blocking => debug!(
                "Timeout on acquiring lock {} on {}",
                self.log_id(),
                self.path.display()
            ),
            Ok(Attempt::Busy(_)) => debug!(
                "Failed to immediately acquire lock {} on {}",
                self.log_id(),
                self.path.display()
            ),
            Err(_) => {}
        }
        match outcome {
            Ok(Attempt::Acquired(held)) => {
                let registered = key.clone().map(|key| Registered::new(&HELD, key));
                let hold = Hold::new(self, dir, me, held, lease, registered);
                let hold = match key.filter(|_| self.reentrant) {
                    Some(key) => {
                        let hold = Arc::new(hold);
                        enter_reentrant(key, &hold);
                        HoldRef::Shared(hold)
                    }
                    None => HoldRef::Own(hold),
                };
                Ok(SoftLockGuard { hold: Some(hold) })
            }
            Ok(Attempt::Busy(_)) if patience.cancelled => {
                let kind = io::ErrorKind::Interrupted;
                let source = io::Error::new(kind, "the wait was cancelled by its hook");
                Err(LockError::io(&self.path, Step::Lock, kind, source))
            }
            Ok(Attempt::Busy(holder)) => {
                let kind = if blocking {
                    io::ErrorKind::TimedOut
                } else {
                    io::ErrorKind::WouldBlock
                };
                // A holder this host can probe is judged once more, only to
                // say who it is and why its marker stays.
                let judged = match holder {
                    Holder::Unknown => self.status().ok().flatten(),
                    _ => None,
                };
                let source = io::Error::new(
                    kind,
                    Busy {
                        path: self.path.clone(),
                        holder,
                        judged,
                    },
                );
                Err(LockError::io(&self.path, Step::Lock, kind, source))
            }
            Err(e) => Err(self.protocol_error(e)),
        }
    }

    /// The lock's canonical path (its directory resolved, its own name
    /// kept); `None` if the directory cannot be resolved. Kept once found
    /// only for a directory given in canonical form already, which nothing
    /// can make name another one later; a relative or symlinked directory
    /// is resolved at every acquire (a `chdir`, or a link pointed
    /// elsewhere, changes what it names).
    fn key(&self) -> Option<Arc<Path>> {
        if let Some(key) = self.key.get() {
            return key.clone();
        }
        let dir = std::fs::canonicalize(&self.dir_path).ok()?;
        let key: Arc<Path> = dir.join(self.path.file_name()?).into();
        if dir == *self.dir_path {
            let _ = self.key.set(Some(Arc::clone(&key)));
        }
        Some(key)
    }

    /// The error of a reentrant lock whose thread holds the path as
    /// another kind.
    fn reentered_as(&self, held: Kind) -> io::Error {
        let kind = io::ErrorKind::InvalidInput;
        let source = io::Error::new(
            kind,
            format!(
                "this thread holds the lock already, as a {held:?} lock, which a {:?} lock \
                 cannot re-enter: use one kind for the path",
                self.kind
            ),
        );
        LockError::io(&self.path, Step::Lock, kind, source)
    }

    /// The error of a guard used in a child forked while it was held.
    fn forked(&self, owner: Pid) -> io::Error {
        forked_error(&self.path, owner)
    }

    /// The error of a wait that could never end: this thread holds the
    /// path already, through another guard.
    fn deadlock(&self, key: &Path) -> io::Error {
        let kind = io::ErrorKind::Deadlock;
        let source = io::Error::new(
            kind,
            format!(
                "Deadlock: lock '{}' is already held by a different guard in this thread, so \
                 waiting for it would never end: release that guard first, or wait with a timeout",
                key.display()
            ),
        );
        LockError::io(&self.path, Step::Lock, kind, source)
    }

    fn protocol_error(&self, e: protocol::Error) -> io::Error {
        match e {
            protocol::Error::Os { errno, .. } => self.err(Step::Lock, errno),
            protocol::Error::IsDirectory => self.err(Step::Open, Errno::ISDIR),
            protocol::Error::NameTooLong => {
                let kind = io::ErrorKind::InvalidFilename;
                let source = io::Error::new(
                    kind,
                    format!(
                        "the lock file name is {} bytes; a soft lock accepts at most {}, since \
                         its break and restore names add up to {} bytes: choose a shorter name",
                        self.path.file_name().map_or(0, |n| n.len()),
                        MAX_LOCK_NAME,
                        NAME_MAX - MAX_LOCK_NAME,
                    ),
                );
                LockError::io(&self.path, Step::Open, kind, source)
            }
            protocol::Error::LeaseMismatch { published } => {
                let kind = io::ErrorKind::InvalidData;
                let source = io::Error::new(
                    kind,
                    format!(
                        "the holder's lease lasts {published} s and this lock's {} s; every \
                         contender must use the same duration: pass --lease {published} \
                         (`lease_duration` in the API)",
                        self.lease.as_secs_f64(),
                    ),
                );
                LockError::io(&self.path, Step::Lock, kind, source)
            }
            other => {
                let source = io::Error::new(io::ErrorKind::InvalidData, other.to_string());
                LockError::io(&self.path, Step::Lock, io::ErrorKind::InvalidData, source)
            }
        }
    }

    /// The switch of a kernel lock on this path to this soft lock after
    /// `flock` answered `ENOSYS`: the core's [`fall_back`] removes the file
    /// at the lock path, open as `file`, if the kernel attempt `created`
    /// it (only then: it may be a peer's marker otherwise), and closes it.
    ///
    /// [`fall_back`]: swaplock_core::kernel::fall_back
    #[cfg(unix)]
    pub(crate) fn fall_back(&self, file: File, created: bool) -> io::Result<()> {
        let dir = self.open_dir()?;
        let me = Identity::now();
        let cfg = me.config(self, None);
        swaplock_core::kernel::fall_back(&mut SoftOs::on(&dir), &cfg, file, created)
            .map_err(|e| self.err(Step::Remove, e))
    }

    /// Removes the marker whoever holds it, as filelock's `break_lock()`.
    /// Mutual exclusion is lost if the holder is alive: reserve it for a
    /// marker whose holder is known to be gone, such as a stale one on a
    /// filesystem that cannot exchange names. On Windows a live holder's
    /// marker cannot be removed at all (its holder keeps it open without
    /// delete sharing): the call then fails with a permission error.
    ///
    /// ```no_run
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// // The holder's host is known to be down: its marker would never go.
    /// let lock = SoftLock::marker("/mnt/nfs/jobs.lock");
    /// if let Some(owner) = lock.owner()? {
    ///     eprintln!("breaking the lock of pid {:?} on {:?}", owner.pid, owner.host);
    ///     lock.force_break()?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn force_break(&self) -> io::Result<()> {
        /// Windows' `ERROR_SHARING_VIOLATION`, which std leaves uncategorised.
        const SHARING_VIOLATION: i32 = 32;
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                let kind = if cfg!(windows) && e.raw_os_error() == Some(SHARING_VIOLATION) {
                    io::ErrorKind::PermissionDenied
                } else {
                    e.kind()
                };
                Err(LockError::io(&self.path, Step::Remove, kind, e))
            }
            _ => Ok(()),
        }
    }

    /// Reads the marker as a reader does (at most [`READ_LIMIT`] bytes, not
    /// following a symlink): its bytes, whether it is a regular file, and
    /// its age by mtime; `None` when there is no marker.
    fn read_marker(&self) -> io::Result<Option<MarkerRead>> {
        let meta = match std::fs::symlink_metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(LockError::io(&self.path, Step::Stat, e.kind(), e)),
        };
        let mut bytes = Vec::with_capacity(READ_LIMIT);
        if meta.is_file() {
            use std::io::Read;
            let file = std::fs::File::open(&self.path)
                .map_err(|e| LockError::io(&self.path, Step::Open, e.kind(), e))?;
            file.take(READ_LIMIT as u64)
                .read_to_end(&mut bytes)
                .map_err(|e| LockError::io(&self.path, Step::Open, e.kind(), e))?;
        }
        Ok(Some(MarkerRead {
            bytes,
            regular: meta.is_file(),
            age: meta.modified().ok().and_then(|m| m.elapsed().ok()),
        }))
    }

    /// Who holds the lock now, as the marker says; `None` when there is no
    /// marker.
    ///
    /// ```
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let lock = SoftLock::marker(dir.path().join("jobs.lock"));
    /// assert_eq!(lock.owner()?, None); // no marker: free
    /// let _guard = lock.lock()?;
    /// let owner = lock.owner()?.expect("a marker");
    /// assert_eq!(owner.pid, Some(std::process::id()));
    /// println!("held by pid {:?} on {:?} for {:?}", owner.pid, owner.host, owner.age);
    /// # Ok(())
    /// # }
    /// ```
    pub fn owner(&self) -> io::Result<Option<OwnerInfo>> {
        let Some(read) = self.read_marker()? else {
            return Ok(None);
        };
        let classified = classify(read.content(), self.kind.reader());
        Ok(Some(OwnerInfo::from(classified, read.age)))
    }

    /// Who holds the lock now, as the marker says, and how a contender of
    /// this lock's kind stands toward that holder: the same judgement
    /// ([`standing`]) a contender makes before it would take a marker
    /// over, from one reading of the marker. `None` when there is no
    /// marker. The holder's PID is probed (and its start token read) only
    /// when the marker names this host; nothing is moved or removed.
    ///
    /// ```no_run
    /// use swaplock::core::soft::Standing;
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// match SoftLock::marker("/mnt/nfs/jobs/nightly.lock").status()? {
    ///     None => println!("free"),
    ///     Some((owner, Standing::Stale { .. })) => {
    ///         println!("pid {:?} is gone: the next contender takes over", owner.pid)
    ///     }
    ///     Some((owner, _)) => println!("held by pid {:?} on {:?}", owner.pid, owner.host),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// [`standing`]: swaplock_core::soft::standing
    pub fn status(&self) -> io::Result<Option<(OwnerInfo, swaplock_core::soft::Standing)>> {
        let Some(read) = self.read_marker()? else {
            return Ok(None);
        };
        let (content, age) = (read.content(), read.age);
        let reader = self.kind.reader();
        // The judgement probes processes only; the directory is opened
        // because the adapter answers for a directory, and never created.
        let dir = os::open_dir(&self.dir).map_err(|e| self.err(Step::Open, e))?;
        let me = Identity::now();
        let cfg = me.config(self, None);
        let standing = swaplock_core::soft::standing(&mut SoftOs::on(&dir), &cfg, content);
        let owner = OwnerInfo::from(classify(content, reader), age);
        Ok(Some((owner, standing)))
    }
}

/// A marker as [`SoftLock::owner`] and [`SoftLock::status`] read it.
struct MarkerRead {
    bytes: Vec<u8>,
    regular: bool,
    /// The time since its mtime.
    age: Option<Duration>,
}

impl MarkerRead {
    /// Its bytes as the core reads them.
    fn content(&self) -> Content<'_> {
        if self.regular {
            Content::Bytes(&self.bytes)
        } else {
            Content::NotRegular
        }
    }
}

/// What a marker says of its holder.
#[derive(Clone, Debug, PartialEq)]
pub struct OwnerInfo {
    /// `"soft"`, `"exclusive"`, `"lease"`, another protocol 2 mode,
    /// `"recordless"`, `"strict"` or `"malformed"`.
    pub mode: String,
    /// The holder's PID, when the record names one.
    pub pid: Option<u32>,
    /// The holder's host.
    pub host: Option<String>,
    /// The holder's start token, in decimal.
    pub start: Option<String>,
    /// The lease duration in seconds.
    pub lease_seconds: Option<f64>,
    /// The time since the marker was last written or refreshed.
    pub age: Option<Duration>,
}

impl OwnerInfo {
    fn from(c: Classified<'_>, age: Option<Duration>) -> Self {
        let mut info = OwnerInfo {
            mode: String::new(),
            pid: None,
            host: None,
            start: None,
            lease_seconds: None,
            age,
        };
        match c {
            Classified::Sentinel => info.mode = "strict".into(),
            Classified::Recordless => info.mode = "recordless".into(),
            Classified::Malformed(why) => info.mode = format!("malformed ({why})"),
            Classified::V1(r) => {
                info.mode = "soft".into();
                info.pid = Some(r.pid.get());
                info.host = Some(r.host.into());
                info.start = r.start.map(|s| s.to_string());
            }
            Classified::V2(r) => {
                info.mode = r.mode.as_str().into();
                if let Mode::Unknown(m) = r.mode {
                    info.mode = format!("unknown ({m})");
                }
                info.pid = Some(r.pid.get());
                info.host = Some(r.host.into());
                info.start = r.start.map(|s| s.to_string());
                info.lease_seconds = r.duration;
            }
        }
        info
    }
}

/// Why a lock was busy. Its `Display` is filelock's `Timeout` text, which
/// [`LockError::os_error`] shows; [`LockError`]'s own `Display` is
/// [`Busy::explain`], one sentence that also says who holds the lock and,
/// for a marker that should have been taken over, why it was not.
#[derive(Debug)]
pub(crate) struct Busy {
    path: Arc<Path>,
    holder: Holder,
    /// The marker as read after the attempt, and how a contender stands
    /// toward its holder; `None` for a holder the attempt already named,
    /// or a marker gone or unreadable since.
    judged: Option<(OwnerInfo, Standing)>,
}

impl std::fmt::Display for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "The file lock '{}' could not be acquired.",
            self.path.display()
        )?;
        match &self.holder {
            Holder::Recordless => f.write_str(
                " It is held by an owner that recorded no PID (a filelock release before 3.22, or one still writing its record), which this host cannot probe.",
            ),
            Holder::Foreign { pid, host } => {
                write!(f, " It is held by pid {pid} on {host}, which this host cannot probe.")
            }
            Holder::Unknown => Ok(()),
        }
    }
}

impl Busy {
    /// One sentence: the path, the holder when known, and, for a stale
    /// marker left in place, the likely cause and the remedy.
    pub(crate) fn explain(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = self.path.display();
        write!(f, "The file lock '{path}' could not be acquired: ")?;
        match &self.holder {
            Holder::Recordless => {
                return f.write_str(
                    "it is held by an owner that recorded no PID (a filelock release before \
                     3.22, or one still writing its record), which this host cannot probe.",
                )
            }
            Holder::Foreign { pid, host } => {
                return write!(
                    f,
                    "it is held by pid {pid} on {host}, which this host cannot probe."
                )
            }
            Holder::Unknown => {}
        }
        let Some((owner, standing)) = &self.judged else {
            return f.write_str("it is held by another process.");
        };
        let who = match (owner.pid, &owner.host) {
            (Some(pid), Some(host)) => format!("pid {pid} on {host}"),
            _ => format!("a {} marker", owner.mode),
        };
        match standing {
            Standing::Held(HeldBecause::Alive) => write!(f, "it is held by {who}, which is alive."),
            Standing::Held(HeldBecause::OtherHost) => {
                write!(f, "it is held by {who}, which this host cannot probe.")
            }
            Standing::Held(_) => write!(
                f,
                "it is held by {who}, which cannot be proven gone (its probe failed)."
            ),
            // A contender takes a stale marker over at once by exchanging
            // names; one still in place means the exchange was refused.
            Standing::Stale { recycled } => write!(
                f,
                "its holder, {who}, looks gone{}, but the filesystem cannot exchange names, so \
                 the stale marker is never moved; if its holder ({who}) is gone, run \
                 `swaplock break --force {path}`.",
                if *recycled {
                    " (its PID now runs another process)"
                } else {
                    ""
                },
            ),
            Standing::Malformed => write!(
                f,
                "its marker holds no record this lock reads ({}); it is removed once seen \
                 unchanged for 2 s.",
                owner.mode
            ),
            _ => write!(
                f,
                "it is held by {who}, a marker that is never removed automatically; if nothing \
                 holds it, run `swaplock break --force {path}`."
            ),
        }
    }
}

impl std::error::Error for Busy {}

/// This process's identity, computed afresh at each acquire as filelock does.
#[derive(Clone, Debug)]
struct Identity {
    pid: Pid,
    host: HostName,
    start: Option<StartToken>,
}

impl Identity {
    fn now() -> Self {
        let pid = os::current_pid();
        Identity {
            pid,
            host: os::host_name(),
            start: os::start_token(pid.get()),
        }
    }

    fn config<'a>(&'a self, lock: &'a SoftLock, lease: Option<LeaseTerms>) -> Config<'a> {
        Config {
            kind: lock.kind,
            lock: &lock.base,
            pid: self.pid,
            host: &self.host,
            start: self.start,
            mode: lock.mode,
            lease,
            lifetime: lock.lifetime,
        }
    }
}

/// The soft locks this process holds, by canonical path ([`held`]).
static HELD: held::Held<Arc<Path>> = Mutex::new(Vec::new());

/// Whether this thread holds the soft lock at `key`.
fn held_by_this_thread(key: &Path) -> bool {
    held::by_this_thread(&HELD, |k| **k == *key)
}

/// The guards of this module's lists, for [`crate::atfork`].
#[cfg(unix)]
pub(crate) fn lock_for_fork() -> Vec<Box<dyn std::any::Any>> {
    vec![
        Box::new(HELD.lock().unwrap_or_else(|p| p.into_inner())),
        Box::new(REENTRANT.lock().unwrap_or_else(|p| p.into_inner())),
        Box::new(waiters()),
        Box::new(RELEASES.0.lock().unwrap_or_else(|p| p.into_inner())),
        #[cfg(feature = "tokio")]
        Box::new(release_wakers()),
        wake::list_lock(),
        wake::spares_lock(),
    ]
}

/// The error of a guard used in a child forked while it was held.
fn forked_error(path: &Arc<Path>, owner: Pid) -> io::Error {
    LockError::forked(path, Step::Unlock, owner, "the lock, with its marker,")
}

/// The holds of reentrant soft locks, by canonical path and the thread
/// that took them ([`SoftLock::reentrant`]).
/// (A forked child's threads are told apart by process too: the holds it
/// inherited in this list are its parent's.)
type Reentrant = Vec<(
    Arc<Path>,
    (std::thread::ThreadId, u32),
    std::sync::Weak<Hold>,
)>;
static REENTRANT: Mutex<Reentrant> = Mutex::new(Vec::new());

/// This thread's live reentrant hold of `key`, shared.
fn reentered(key: &Path) -> Option<Arc<Hold>> {
    let me = (std::thread::current().id(), std::process::id());
    let mut holds = REENTRANT.lock().unwrap_or_else(|p| p.into_inner());
    holds.retain(|(_, _, h)| h.strong_count() > 0);
    holds
        .iter()
        .filter(|(k, t, _)| *t == me && **k == *key)
        .find_map(|(_, _, h)| h.upgrade())
}

/// Enters a new reentrant hold of `key` as this thread's.
fn enter_reentrant(key: Arc<Path>, hold: &Arc<Hold>) {
    let me = (std::thread::current().id(), std::process::id());
    let mut holds = REENTRANT.lock().unwrap_or_else(|p| p.into_inner());
    holds.retain(|(_, _, h)| h.strong_count() > 0);
    holds.push((key, me, Arc::downgrade(hold)));
}

/// Tells this process's waiting threads that a soft lock was released.
fn notify_release() {
    let (count, released) = &RELEASES;
    *count.lock().unwrap_or_else(|p| p.into_inner()) += 1;
    OWN_RELEASES.with(|own| own.set(own.get() + 1));
    released.notify_all();
    wake::ring_all();
    #[cfg(feature = "tokio")]
    crate::async_wait::wake_all(&mut release_wakers());
}

/// Whether an acquire failed for want of descriptors (`EMFILE`,
/// `ENFILE`), which a watch's own may have taken.
#[cfg(feature = "tokio")]
fn short_of_descriptors(e: &io::Error) -> bool {
    let raw = LockError::of(e).and_then(|l| l.os_error().raw_os_error());
    #[cfg(unix)]
    return raw.is_some_and(|r| r == libc::EMFILE || r == libc::ENFILE);
    #[cfg(windows)]
    return raw.is_some_and(|r| r == 4); // ERROR_TOO_MANY_OPEN_FILES
}

/// The tasks waiting for a release of this process ([`Released`]).
#[cfg(feature = "tokio")]
static RELEASE_WAKERS: Mutex<crate::async_wait::Wakers> = Mutex::new(Vec::new());

#[cfg(feature = "tokio")]
fn release_wakers() -> std::sync::MutexGuard<'static, crate::async_wait::Wakers> {
    RELEASE_WAKERS.lock().unwrap_or_else(|p| p.into_inner())
}

/// A task's pause without a watch: until this process releases a soft
/// lock after the count `seen`, or `pause` passes.
#[cfg(feature = "tokio")]
struct Released {
    seen: u64,
    id: u64,
    until: std::pin::Pin<Box<tokio::time::Sleep>>,
}

#[cfg(feature = "tokio")]
impl Released {
    fn after(seen: u64, pause: Duration) -> Self {
        Released {
            seen,
            id: crate::async_wait::next_id(),
            until: Box::pin(tokio::time::sleep(pause)),
        }
    }

    fn released(&self) -> bool {
        *RELEASES.0.lock().unwrap_or_else(|p| p.into_inner()) != self.seen
    }
}

#[cfg(feature = "tokio")]
impl std::future::Future for Released {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.released() || self.until.as_mut().poll(cx).is_ready() {
            return std::task::Poll::Ready(());
        }
        crate::async_wait::register(&mut release_wakers(), self.id, cx.waker());
        // A release between the look and the registration woke nobody.
        match self.released() {
            true => std::task::Poll::Ready(()),
            false => std::task::Poll::Pending,
        }
    }
}

#[cfg(feature = "tokio")]
impl Drop for Released {
    fn drop(&mut self) {
        crate::async_wait::unregister(&mut release_wakers(), self.id);
    }
}

/// How many soft locks this process has released, and the condition its
/// waiting threads wait on: a thread waiting for a lock another thread of
/// this process holds looks again as soon as that one is released, instead
/// of at its next poll.
static RELEASES: (Mutex<u64>, Condvar) = (Mutex::new(0), Condvar::new());

std::thread_local! {
    /// How many of [`RELEASES`] this thread made: a wait's hook's own
    /// releases are no reason for the wait to look again.
    static OWN_RELEASES: Cell<u64> = const { Cell::new(0) };
}

/// A wait's patience, as [`Deadline`] says, whose pauses end early when
/// any soft lock of this process is released, and which ends the wait
/// once a releasing thread handed this one its hold.
struct WakeOnRelease<'d, 'h> {
    deadline: Deadline,
    /// [`RELEASES`]'s count as the last attempt began: a release after it
    /// ends the pause at once.
    seen: u64,
    waiting: Option<Waiting<'d>>,
    /// The lock: its directory, open and by path, and its name.
    lock: (&'d Dir, &'d Path, &'d [u8]),
    /// Where the kernel reports changes of the lock path, the pause ends
    /// at the first (Linux, Android).
    watcher: wake::Watcher,
    /// The caller's hook ([`SoftLock::lock_with`]), and the lock it waits
    /// for.
    hook: Option<(&'h mut WaitHook<'h>, &'h SoftLock)>,
    /// Whether the hook cancelled the wait (or panicked).
    cancelled: bool,
    /// The panic of the hook (or a logger), resumed once the wait has left.
    panicked: Option<Box<dyn std::any::Any + Send>>,
    /// The lock, for log messages.
    #[cfg(feature = "log")]
    soft: Option<&'h SoftLock>,
}

/// A [`SoftLock::lock_with`] hook.
type WaitHook<'a> = dyn FnMut(&WaitStatus<'_>) -> ControlFlow<()> + 'a;

/// What a waiting acquire knows, for its [`SoftLock::lock_with`] hook.
pub struct WaitStatus<'a> {
    lock: &'a SoftLock,
    waited: Duration,
}

impl WaitStatus<'_> {
    /// How long the acquire has waited.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Who holds the lock now, as its marker says (read anew at each
    /// call: [`SoftLock::owner`]).
    pub fn holder(&self) -> io::Result<Option<OwnerInfo>> {
        self.lock.owner()
    }

    /// The lock waited for.
    pub fn lock(&self) -> &SoftLock {
        self.lock
    }
}

impl<'d> WakeOnRelease<'d, '_> {
    fn new(
        deadline: Deadline,
        waiting: Option<Waiting<'d>>,
        lock: (&'d Dir, &'d Path, &'d [u8]),
    ) -> Self {
        WakeOnRelease {
            deadline,
            seen: 0,
            waiting,
            lock,
            watcher: wake::Watcher::new(),
            hook: None,
            cancelled: false,
            panicked: None,
            #[cfg(feature = "log")]
            soft: None,
        }
    }

    fn handed(&self) -> bool {
        self.waiting.as_ref().is_some_and(Waiting::handed)
    }
}

/// The slot a releasing thread puts its hold in for a waiting one.
type Slot = Arc<Mutex<Option<Held<File>>>>;

/// A thread of this process waiting for a soft lock, which a releasing
/// thread of the same kind and directory may hand its hold to.
struct Waiter {
    key: Arc<Path>,
    kind: Kind,
    /// The waiting process (a forked child inherits the list, but none of
    /// its threads).
    pid: u32,
    dir: sys::DirKey,
    slot: Slot,
}

/// The threads of this process waiting for soft locks.
static WAITERS: Mutex<Vec<Waiter>> = Mutex::new(Vec::new());

fn waiters() -> std::sync::MutexGuard<'static, Vec<Waiter>> {
    WAITERS.lock().unwrap_or_else(|p| p.into_inner())
}

/// How many threads of this process wait for the soft lock at `path` in a
/// way a release can hand its hold to (for tests, which must know that a
/// waiter waits before they release).
#[doc(hidden)]
pub fn waiting_threads(path: &Path) -> usize {
    let Some(key) = SoftLock::soft(path).key() else {
        return 0;
    };
    let pid = std::process::id();
    waiters()
        .iter()
        .filter(|w| *w.key == *key && w.pid == pid)
        .count()
}

/// A waiting acquire's place among [`WAITERS`], entered at its first busy
/// attempt (an uncontended acquire allocates nothing).
struct Waiting<'d> {
    key: Arc<Path>,
    kind: Kind,
    dir: &'d Dir,
    slot: Option<Slot>,
}

impl<'d> Waiting<'d> {
    fn new(key: Arc<Path>, kind: Kind, dir: &'d Dir) -> Self {
        Waiting {
            key,
            kind,
            dir,
            slot: None,
        }
    }

    fn enter(&mut self) {
        if self.slot.is_some() {
            return;
        }
        let Some(dir) = sys::dir_key(self.dir) else {
            return;
        };
        let slot = Slot::default();
        waiters().push(Waiter {
            key: Arc::clone(&self.key),
            kind: self.kind,
            pid: std::process::id(),
            dir,
            slot: Arc::clone(&slot),
        });
        self.slot = Some(slot);
    }

    fn handed(&self) -> bool {
        self.slot
            .as_ref()
            .is_some_and(|s| s.lock().unwrap_or_else(|p| p.into_inner()).is_some())
    }

    /// Leaves [`WAITERS`]: the hold handed over meanwhile, if any. No hold
    /// is handed after this.
    fn leave(&mut self) -> Option<Held<File>> {
        let slot = self.slot.take()?;
        waiters().retain(|w| !Arc::ptr_eq(&w.slot, &slot));
        let handed = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        handed
    }
}

impl WakeOnRelease<'_, '_> {
    /// What the caller asked to hear of a busy attempt: the log message,
    /// and the hook, whose answer this is.
    fn call_out(&mut self, elapsed: Duration, pause: Duration) -> ControlFlow<()> {
        #[cfg(feature = "log")]
        if let Some(lock) = self.soft {
            debug!(
                "Lock {} not acquired on {}, waiting {} seconds ...",
                lock.log_id(),
                lock.path.display(),
                pause.as_secs_f64()
            );
        }
        let _ = pause;
        match &mut self.hook {
            Some((hook, lock)) => hook(&WaitStatus {
                lock,
                waited: elapsed,
            }),
            None => ControlFlow::Continue(()),
        }
    }
}

impl Patience<Holder> for WakeOnRelease<'_, '_> {
    fn attempting(&mut self) {
        #[cfg(feature = "log")]
        if let Some(lock) = self.soft {
            debug!(
                "Attempting to acquire lock {} on {}",
                lock.log_id(),
                lock.path.display()
            );
        }
        self.watcher.before_attempt(self.lock.0);
        self.seen = *RELEASES.0.lock().unwrap_or_else(|p| p.into_inner());
    }

    fn busy(&mut self, holder: &Holder, elapsed: Duration) -> Option<Duration> {
        let pause = self.deadline.busy(holder, elapsed)?;
        // The caller's code (the hook, a logger) runs caught: its panic
        // must not leave this wait among the waiters a release hands its
        // hold to. The acquire unwinds once this wait has left.
        let own_before = OWN_RELEASES.with(Cell::get);
        let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.call_out(elapsed, pause)
        }));
        match called {
            Ok(ControlFlow::Continue(())) => {}
            Ok(ControlFlow::Break(())) => {
                self.cancelled = true;
                return None;
            }
            Err(panic) => {
                self.cancelled = true;
                self.panicked = Some(panic);
                return None;
            }
        }
        if self.hook.is_some() {
            // Releases the hook's own code made (another soft lock) are no
            // reason to look again, and its bell is forgotten; another
            // thread's release meanwhile still is (the count moved
            // further), as is a change of this lock's path.
            self.seen += OWN_RELEASES.with(Cell::get) - own_before;
            if self.watcher.path_changed(self.lock.0) {
                return Some(Duration::ZERO);
            }
        }
        if let Some(waiting) = &mut self.waiting {
            waiting.enter();
        }
        if self.handed() {
            return None;
        }
        let (dir, dir_path, name) = self.lock;
        match self.watcher.start(dir, dir_path, name) {
            // What changed before the watch existed raised no event, or
            // the marker left before its watch took hold.
            wake::Next::Now => return Some(Duration::ZERO),
            wake::Next::After(d) => return Some(d.min(pause)),
            wake::Next::Wait => {}
        }
        let (count, released) = &RELEASES;
        let guard = count.lock().unwrap_or_else(|p| p.into_inner());
        let seen = self.seen;
        if self.watcher.watching() {
            // A release of this process after `seen` either shows in the
            // count now or rings the bell, which was in place before.
            let released_since = *guard != seen;
            drop(guard);
            if !released_since {
                self.watcher.wait(dir, pause);
            }
        } else {
            // A hand-over counts as a release, so none is missed here.
            let _ = released
                .wait_timeout_while(guard, pause, |now| *now == seen)
                .unwrap_or_else(|p| p.into_inner());
        }
        if self.handed() {
            return None;
        }
        // The pause is over: the driver's own sleep is none.
        Some(Duration::ZERO)
    }
}

/// A held soft lock. Dropping it releases the lock; [`release`](Self::release)
/// reports errors. Guards of a [reentrant](SoftLock::reentrant) lock may
/// share one hold: the last of them releases it.
pub struct SoftLockGuard {
    /// Taken only by [`release`](Self::release).
    hold: Option<HoldRef>,
}

/// A guard's hold: its own (no allocation), or shared with other guards of
/// a reentrant lock.
// Inline, not boxed: an uncontended lock and release allocate nothing
// (tests/alloc_budget.rs).
#[allow(clippy::large_enum_variant)]
enum HoldRef {
    Own(Hold),
    Shared(Arc<Hold>),
}

/// One hold of the lock: its marker, heartbeat and registration, released
/// when it drops.
struct Hold {
    lock: SoftLock,
    dir: Dir,
    me: Identity,
    held: Option<Held<File>>,
    lease: Option<LeaseTerms>,
    heartbeat: Option<Heartbeat>,
    registered: Option<Registered<Arc<Path>>>,
}

struct Heartbeat {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<()>,
    compromise: Arc<Mutex<Option<Compromise>>>,
}

impl std::fmt::Debug for SoftLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SoftLockGuard")
            .field("path", &self.hold().lock.path)
            .finish_non_exhaustive()
    }
}

impl SoftLockGuard {
    fn hold(&self) -> &Hold {
        match self.hold.as_ref().expect("taken only by release") {
            HoldRef::Own(hold) => hold,
            HoldRef::Shared(hold) => hold,
        }
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.hold().lock.path
    }

    /// The lease's claim token (32 hex digits), for a lease.
    ///
    /// ```
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("nightly.lock");
    /// let guard = SoftLock::lease(&path).lock()?;
    /// let token = guard.token().expect("a lease has a token");
    /// assert_eq!(token.len(), 32);
    /// assert!(std::fs::read_to_string(&path)?.contains(&format!("\ntoken={token}\n")));
    /// # Ok(())
    /// # }
    /// ```
    pub fn token(&self) -> Option<String> {
        self.hold().token()
    }

    /// Whether the heartbeat found the lease compromised, and why.
    ///
    /// ```no_run
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let guard = SoftLock::lease("/mnt/nfs/jobs/nightly.lock").lock()?;
    /// for batch in 0..16 {
    ///     if let Some(why) = guard.compromise() {
    ///         eprintln!("lease lost ({why:?}): stopping before batch {batch}");
    ///         break;
    ///     }
    ///     println!("batch {batch}");
    /// }
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn compromise(&self) -> Option<Compromise> {
        self.hold().compromise()
    }

    /// Whether the lease is lost now, looking again rather than waiting for
    /// the heartbeat: what the heartbeat found, or the lock path no longer
    /// showing our marker at two looks a moment apart (one miss may be a
    /// peer's check holding it aside for an instant, I19). For a holder
    /// about to release, which must know whether its work ran under the
    /// lock: a holder stopped longer than its lease learns it here even
    /// when the heartbeat, stopped with it, has not yet run again. `None`
    /// for a lock that is not a lease, or when nothing can be told.
    ///
    /// ```no_run
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let guard = SoftLock::lease("/mnt/nfs/jobs/nightly.lock").lock()?;
    /// // ... work ...
    /// if let Some(why) = guard.lease_lost() {
    ///     eprintln!("the work may have overlapped another holder: {why:?}");
    /// }
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lease_lost(&self) -> Option<Compromise> {
        self.hold().lease_lost()
    }

    /// Releases the lock, reporting a failure to remove the marker. A
    /// guard that shares its hold with others (a
    /// [reentrant](SoftLock::reentrant) lock's) only leaves it, and the
    /// last of them releases it.
    ///
    /// In a child forked while the lock was held, the lock is its
    /// parent's: the marker is left alone (as on drop there), the
    /// descriptor closed, and the answer is an error of kind
    /// [`InvalidInput`](io::ErrorKind::InvalidInput).
    ///
    /// ```
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("jobs.lock");
    /// let guard = SoftLock::marker(&path).lock()?;
    /// // ... exclusive work ...
    /// guard.release()?; // a marker that could not be removed is an error here
    /// assert!(!path.exists());
    /// # Ok(())
    /// # }
    /// ```
    pub fn release(mut self) -> io::Result<()> {
        let owner = self.hold().me.pid;
        if owner != os::current_pid() {
            // A forked child: whether or not other guards share the hold,
            // it is the parent's (dropping it here leaves the marker).
            let path = Arc::clone(&self.hold().lock.path);
            drop(self.hold.take());
            return Err(forked_error(&path, owner));
        }
        let hold = match self.hold.take() {
            Some(HoldRef::Own(hold)) => Some(hold),
            Some(HoldRef::Shared(hold)) => Arc::into_inner(hold),
            None => None,
        };
        match hold {
            Some(mut hold) => hold.release_inner(),
            None => Ok(()),
        }
    }
}

impl Hold {
    fn new(
        lock: &SoftLock,
        dir: Dir,
        me: Identity,
        held: Held<File>,
        lease: Option<(LeaseTerms, Duration)>,
        registered: Option<Registered<Arc<Path>>>,
    ) -> Self {
        let heartbeat = lease
            .and_then(|(terms, interval)| start_heartbeat(lock, &dir, &me, &held, terms, interval));
        Hold {
            lock: lock.clone(),
            dir,
            me,
            held: Some(held),
            lease: lease.map(|l| l.0),
            heartbeat,
            registered,
        }
    }

    fn token(&self) -> Option<String> {
        self.lease
            .map(|t| String::from_utf8_lossy(&t.token.hex()).into_owned())
    }

    fn compromise(&self) -> Option<Compromise> {
        self.heartbeat
            .as_ref()
            .and_then(|h| *h.compromise.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn lease_lost(&self) -> Option<Compromise> {
        if let Some(c) = self.compromise() {
            return Some(c);
        }
        let (terms, held) = (self.lease?, self.held.as_ref()?);
        let cfg = self.me.config(&self.lock, Some(terms));
        let mut sys = SoftOs::on(&self.dir);
        let mut missed = None;
        for look in 0..2 {
            missed = match protocol::refresh(&mut sys, &cfg, held) {
                Refresh::MarkerMissing => Some(Compromise::MarkerMissing),
                Refresh::OwnerChanged => Some(Compromise::OwnerChanged),
                Refresh::Ok | Refresh::Transient(_) => return None,
            };
            if look == 0 {
                sys.sleep(Duration::from_millis(1));
            }
        }
        missed
    }

    fn release_inner(&mut self) -> io::Result<()> {
        if self.held.is_some() && os::current_pid() != self.me.pid {
            // A child forked while the lock was held: the marker names the
            // parent, which holds the lock still. Its heartbeat thread is
            // not in this process (joining it would never return).
            std::mem::forget(self.heartbeat.take());
            drop(self.held.take());
            drop(self.registered.take());
            return Err(self.lock.forked(self.me.pid));
        }
        if self.hand_over() {
            return Ok(());
        }
        if let Some(h) = self.heartbeat.take() {
            drop(h.stop);
            let _ = h.thread.join();
        }
        let Some(held) = self.held.take() else {
            return Ok(());
        };
        debug!(
            "Attempting to release lock {} on {}",
            self.lock.log_id(),
            self.lock.path.display()
        );
        let cfg = self.me.config(&self.lock, self.lease);
        let mut sys = SoftOs::on(&self.dir);
        let released = protocol::release(&mut sys, &cfg, held).map_err(|e| match e {
            protocol::Error::Os { errno, .. } => self.lock.err(Step::Unlock, errno),
            other => self.lock.protocol_error(other),
        });
        if released.is_ok() {
            debug!(
                "Lock {} released on {}",
                self.lock.log_id(),
                self.lock.path.display()
            );
        }
        // Released (or failing to): no longer this thread's to wait for,
        // and this process's waiters look again now (RELEASES).
        drop(self.registered.take());
        notify_release();
        released
    }
}

#[cfg(unix)]
impl std::os::fd::AsFd for SoftLockGuard {
    /// The marker's descriptor.
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        let hold = self.hold();
        match &hold.held {
            Some(held) => std::os::fd::AsFd::as_fd(&held.file),
            // Only release takes `held`, and it consumes the guard.
            None => std::os::fd::AsFd::as_fd(&hold.dir),
        }
    }
}

impl Hold {
    /// Hands this hold to a thread of this process waiting for the same
    /// lock, of the same kind, in the same directory, if there is one: the
    /// marker stays at the lock path, only touched (so that its age counts
    /// from now, as a new marker's would), and that thread holds it from
    /// now on. Not a lease (its token and heartbeat are its holder's), and
    /// only while the lock path still shows our marker.
    fn hand_over(&mut self) -> bool {
        if self.lease.is_some() || self.held.is_none() {
            return false;
        }
        let Some(key) = self.registered.as_ref().map(|r| Arc::clone(r.key())) else {
            return false;
        };
        let kind = self.lock.kind;
        let pid = std::process::id();
        let wanted = |w: &Waiter| *w.key == *key && w.kind == kind && w.pid == pid;
        if !waiters().iter().any(wanted) {
            return false;
        }
        let (Some(dir), Some(held)) = (sys::dir_key(&self.dir), self.held.as_ref()) else {
            return false;
        };
        let cfg = self.me.config(&self.lock, None);
        if !protocol::keep_for_handover(&mut SoftOs::on(&self.dir), &cfg, held) {
            return false;
        }
        let waiting = waiters();
        let Some(slot) = waiting
            .iter()
            .filter(|w| wanted(w) && w.dir == dir)
            .find_map(|w| {
                let slot = w.slot.lock().unwrap_or_else(|p| p.into_inner());
                slot.is_none().then_some(slot)
            })
        else {
            return false;
        };
        let mut slot = slot;
        *slot = self.held.take();
        drop(slot);
        drop(waiting);
        drop(self.registered.take());
        notify_release();
        true
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let _ = self.release_inner();
    }
}

/// Starts the lease heartbeat on its own descriptors, so it outlives no
/// borrow of the guard.
fn start_heartbeat(
    lock: &SoftLock,
    dir: &Dir,
    me: &Identity,
    held: &Held<File>,
    terms: LeaseTerms,
    interval: Duration,
) -> Option<Heartbeat> {
    let dir = sys::dup_dir(dir)?;
    let file = sys::dup_file(&held.file)?;
    let id: FileId = held.id;
    let (stop, stopped) = mpsc::channel::<()>();
    let compromise = Arc::new(Mutex::new(None));
    let report = Arc::clone(&compromise);
    let hook = lock.on_compromise.clone();
    let lock = lock.clone();
    let me = me.clone();
    let thread = std::thread::Builder::new()
        .name(format!("filelock-lease-{}", me.pid))
        .spawn(move || {
            let cfg = me.config(&lock, Some(terms));
            let mut sys = SoftOs::on(&dir);
            let held = Held { file, id };
            let mut watch = CompromiseWatch::new(sys.now(), lock.lease, interval);
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                let result = protocol::refresh(&mut sys, &cfg, &held);
                if let Some(c) = watch.observe(result, sys.now()) {
                    *report.lock().unwrap_or_else(|p| p.into_inner()) = Some(c);
                    if let Some(hook) = &hook {
                        hook(c);
                    }
                    break;
                }
            }
        })
        .ok()?;
    Some(Heartbeat {
        stop,
        thread,
        compromise,
    })
}
