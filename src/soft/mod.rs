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
use crate::beat::{Beat, Beats, Tick};
use crate::error::{Explain, Explained, LockError, Step};
use crate::held::{self, Registered};
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::{Condvar, Mutex};
use std::cell::Cell;
use std::io;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use swaplock_core::decide::{FileId, HeldBecause};
use swaplock_core::host::HostName;
use swaplock_core::names::{Name, MAX_LOCK_NAME, NAME_MAX};
use swaplock_core::record::{classify, Classified, Mode};
use swaplock_core::soft::{
    self as protocol, Attempt, Clock, CompromiseWatch, Config, Contender, Held, Holder, LeaseTerms,
    Remedy, Seen, Standing,
};
pub use swaplock_core::soft::{Compromise, Kind};
use swaplock_core::start::StartToken;
use swaplock_core::wait::{Deadline, Patience};

/// How long a soft lock's acquire may wait: the time left when it begins.
type Wait = swaplock_core::wait::Wait<Duration>;
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

    pub(super) fn dup_dir(dir: &Dir) -> std::io::Result<Dir> {
        dup(dir).map_err(crate::error::os_error)
    }

    pub(super) fn dup_file(file: &File) -> std::io::Result<File> {
        dup(file).map_err(crate::error::os_error)
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

    pub(super) fn dup_dir(dir: &Dir) -> std::io::Result<Dir> {
        Ok(dir.clone())
    }

    pub(super) fn dup_file(file: &File) -> std::io::Result<File> {
        file.try_clone()
    }

    /// What tells two opens of a directory apart: its full path.
    pub(super) type DirKey = Dir;

    pub(super) fn dir_key(dir: &Dir) -> Option<DirKey> {
        Some(dir.clone())
    }
}

use sys::{Dir, DirName, File};

mod acquire;
mod guard;
mod leftovers;
mod mismatch;
mod queue;
mod registry;
mod status;
mod wait;
mod wake;

use acquire::*;
use guard::*;
use registry::*;
use wait::*;

pub use guard::SoftLockGuard;
pub use leftovers::{Leftover, LeftoverKind, Swept};
pub use mismatch::{KindMismatch, Mismatch};
#[doc(hidden)]
pub use queue::queue_threads;
use status::Busy;
pub use status::{Advice, OwnerInfo};
pub use wait::{waiting_threads, WaitStatus, MISMATCH_AFTER};
#[cfg(all(test, swaplock_model, any(target_os = "linux", target_os = "android")))]
pub(crate) use wake::bells;

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
    /// Whether a marker's record is synced before its name publishes it
    /// ([`SoftLock::durable`]).
    durable: bool,
    lease: Duration,
    heartbeat: Option<Duration>,
    on_compromise: Option<CompromiseHook>,
    contender: Arc<Mutex<Contender>>,
    /// The lock's canonical path, once known: its key among the soft
    /// locks this process holds.
    key: Arc<crate::sync::Published<Option<Arc<Path>>>>,
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
            durable: true,
            lease: DEFAULT_LEASE,
            heartbeat: None,
            on_compromise: None,
            contender: Arc::new(Mutex::new(Contender::new())),
            key: Arc::new(crate::sync::Published::new()),
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

    /// Whether the marker's record reaches stable storage before its name
    /// publishes it (default: yes). A power cut keeps a name the disk has
    /// and may lose the record written under it: an empty marker, which no
    /// contender ever evicts (its holder recorded nothing), so the lock
    /// stays taken across the reboot until an operator removes it
    /// (PROTOCOL 7.2 step 3, 13.2). It costs two `fsync`s a cycle, the
    /// record's and the release's placeholder's: an uncontended soft cycle
    /// took 0.52 ms durable and 0.11 ms not on an ext4 disk here (filelock's
    /// 0.19 ms); nothing on tmpfs. Turn it off where the lock's directory
    /// does not outlive a power cut (tmpfs, `/run`), or where a boot clears
    /// it.
    ///
    /// ```no_run
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// // /run is tmpfs: nothing of it survives a power cut to be ordered.
    /// let lock = SoftLock::soft("/run/lock/jobs.lock").durable(false);
    /// let _guard = lock.lock()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn durable(mut self, durable: bool) -> Self {
        self.durable = durable;
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
        self.acquire(Wait::Forever)
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
        self.acquire(Wait::No)
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
        self.acquire(Wait::Until(timeout))
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
        self.acquire_with(timeout.map_or(Wait::Forever, Wait::Until), Some(&mut hook))
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
            let seen = *RELEASES.0.lock();
            match self.acquire(Wait::No) {
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
                wake::Next::After(pause) => crate::sync::time::sleep(pause).await,
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
}
