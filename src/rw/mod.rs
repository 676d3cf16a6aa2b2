//! The read-write soft lock: Python filelock 4.2.11's `SoftReadWriteLock`,
//! any number of readers or one writer, across processes and hosts, on
//! filesystems where kernel locks fail (NFS, Lustre, cluster storage).
//!
//! The lock's whole state is a log of immutable snapshots under
//! `<lock>.rw/gen/`, each naming the writer and the readers at one
//! generation; every acquire, release and eviction publishes the next
//! generation by a hard link that only one participant can make. Nothing is
//! created at the lock path itself. Each participant keeps a record under
//! `<lock>.rw/holders/` whose nonce its heartbeat thread rewrites; a
//! contender evicts a member whose record has not changed for the stale
//! threshold on the contender's own monotonic clock, so no two hosts'
//! clocks are ever compared. Rust and Python participants share one lock:
//! the files are filelock's byte for byte (PROTOCOL 16).
//!
//! Writers are preferred: a writer enters the snapshot as soon as no live
//! writer is named, which keeps new readers out, then waits for the named
//! readers to leave.
//!
//! **A holder paused past the stale threshold is evicted**, and holds on
//! until its next heartbeat reports the loss ([`SoftRwLock::on_compromise`],
//! [`SoftRwGuard::compromise`]). Pass [`SoftRwGuard::generation`] to what
//! the lock protects and have it refuse anything older than the highest it
//! has seen: that refuses such a holder. Generations start again at 1 when
//! the log is removed.
//!
//! ```no_run
//! use std::time::Duration;
//! use swaplock::rw::SoftRwLock;
//! # fn main() -> std::io::Result<()> {
//! let lock = SoftRwLock::new("/mnt/nfs/shared/catalog.lock");
//! {
//!     let reading = lock.read_timeout(Duration::from_secs(30))?;
//!     println!("reading at generation {}", reading.generation());
//! }
//! let writing = lock.write()?;
//! // Tell the store which generation writes: it refuses older ones.
//! let fence = writing.generation();
//! # let _ = fence;
//! writing.release()?;
//! # Ok(())
//! # }
//! ```

mod error;
mod hold;
mod participant;
mod status;

use crate::error::{LockError, Step};
use hold::{Patience, Shared};
pub use status::{Look, RwBreak, RwMember, RwStatus};
use std::io;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
pub use swaplock_core::rw::Mode;
pub use swaplock_core::soft::Compromise;

/// filelock's default heartbeat interval.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(30);
/// filelock's default pause between polls.
pub const DEFAULT_POLL: Duration = Duration::from_millis(250);
/// The longest lease a holder's record is honoured for by default
/// (PROTOCOL 16.9).
pub const DEFAULT_MAX_LEASE: Duration = Duration::from_secs(24 * 3600);

type CompromiseHook = Arc<dyn Fn(Compromise) + Send + Sync>;

/// A read-write soft lock on a path: its log lives at `<path>.rw`.
///
/// Every `SoftRwLock` on one canonical path in a process is one
/// participant at a time, as filelock's singleton is: a thread that holds a
/// read lock and reads again, or holds the write lock and writes again,
/// nests in its hold (released with the last guard); other threads join a
/// read hold, and wait for a write hold to end. A thread that holds the read
/// lock and asks for the write lock (or the reverse) gets an error of kind
/// [`Deadlock`](io::ErrorKind::Deadlock) at once: there is no upgrade or
/// downgrade.
#[derive(Clone)]
pub struct SoftRwLock {
    path: Arc<Path>,
    heartbeat: Duration,
    stale: Option<Duration>,
    poll: Duration,
    max_lease: Duration,
    on_compromise: Option<CompromiseHook>,
    /// The path's shared state, once looked up, with the process that did.
    shared: Arc<crate::sync::Published<(crate::pid::Me, Arc<Shared>)>>,
}

impl std::fmt::Debug for SoftRwLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SoftRwLock")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// What a waiting acquire knows, for the hook of
/// [`read_with`](SoftRwLock::read_with) and
/// [`write_with`](SoftRwLock::write_with).
pub struct RwWaitStatus<'a> {
    waited: Duration,
    latest: Option<&'a participant::Latest>,
}

impl RwWaitStatus<'_> {
    /// How long the acquire has waited.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// The latest generation read, once the acquire has read the log.
    pub fn generation(&self) -> Option<u128> {
        self.latest.map(|s| s.generation)
    }

    /// The writer the latest snapshot names (its token, 32 hex digits).
    pub fn writer(&self) -> Option<String> {
        self.latest
            .and_then(|s| s.writer)
            .map(|t| String::from_utf8_lossy(&t.hex()).into_owned())
    }

    /// How many readers the latest snapshot names.
    pub fn readers(&self) -> usize {
        self.latest.map_or(0, |s| s.readers)
    }
}

/// A held read or write lock. Dropping it gives back its level (the last
/// leaves the log); [`release`](Self::release) reports errors.
pub struct SoftRwGuard {
    shared: Option<Arc<Shared>>,
    mode: Mode,
    thread: hold::Owner,
    pid: crate::pid::Me,
    generation: u128,
    token: swaplock_core::names::Token,
    lost: Arc<crate::sync::Mutex<Option<Compromise>>>,
}

impl std::fmt::Debug for SoftRwGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SoftRwGuard")
            .field("mode", &self.mode)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl SoftRwGuard {
    /// The generation whose commit granted the hold: the fencing token.
    /// Readers who joined a hold of this process share it. Unique per
    /// transition of the log; it starts again at 1 if the log is removed.
    ///
    /// ```
    /// use swaplock::rw::SoftRwLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let guard = SoftRwLock::new(dir.path().join("catalog.lock")).write()?;
    /// assert_eq!(guard.generation(), 1, "the first commit of a new log");
    /// # Ok(())
    /// # }
    /// ```
    pub fn generation(&self) -> u128 {
        self.generation
    }

    /// Whether this is a read or a write hold.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The participant's token, as the snapshots and its holder record
    /// name it (32 hex digits).
    pub fn token(&self) -> String {
        String::from_utf8_lossy(&self.token.hex()).into_owned()
    }

    /// How the hold was lost, if its heartbeat found it lost: a peer
    /// evicted it ([`Compromise::Evicted`]), or refreshes failed long
    /// enough that a peer could have ([`Compromise::RefreshFailed`]).
    pub fn compromise(&self) -> Option<Compromise> {
        *crate::sync::lock(&self.lost)
    }

    /// Whether the hold is lost now, looking again rather than waiting for
    /// the heartbeat: what the heartbeat found, or a refresh of our record
    /// and a read of the latest snapshot made now. For a holder about to
    /// release, which must know whether its work ran under the lock.
    pub fn lease_lost(&self) -> Option<Compromise> {
        self.lost_now()
    }

    /// Gives back this guard's level, reporting a failure of the leave
    /// that the last one makes. In a child forked while the lock was held
    /// the hold is the parent's: the log is left alone, and the answer is
    /// an error of kind [`InvalidInput`](io::ErrorKind::InvalidInput).
    ///
    /// ```
    /// use swaplock::rw::SoftRwLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let guard = SoftRwLock::new(dir.path().join("catalog.lock")).read()?;
    /// guard.release()?; // a failure to leave the log is an error here
    /// # Ok(())
    /// # }
    /// ```
    pub fn release(mut self) -> io::Result<()> {
        self.release_inner()
    }
}

impl SoftRwLock {
    /// A read-write lock on `path`, with filelock's defaults: heartbeat
    /// 30 s, stale threshold 90 s, poll 0.25 s.
    ///
    /// ```
    /// use swaplock::rw::SoftRwLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let lock = SoftRwLock::new(dir.path().join("catalog.lock"));
    /// let guard = lock.write()?;
    /// // The log lives beside the lock path; nothing is made at the path itself.
    /// assert!(dir.path().join("catalog.lock.rw/gen").is_dir());
    /// assert!(!dir.path().join("catalog.lock").exists());
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SoftRwLock {
            path: path.into().into(),
            heartbeat: DEFAULT_HEARTBEAT,
            stale: None,
            poll: DEFAULT_POLL,
            max_lease: DEFAULT_MAX_LEASE,
            on_compromise: None,
            shared: Arc::new(crate::sync::Published::new()),
        }
    }

    /// How often a holder refreshes its record (default 30 s).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use swaplock::rw::SoftRwLock;
    /// // A dead holder is evicted after 15 s instead of 90 s.
    /// let lock = SoftRwLock::new("/mnt/nfs/catalog.lock")
    ///     .heartbeat_interval(Duration::from_secs(5))
    ///     .stale_threshold(Duration::from_secs(15));
    /// # let _ = lock;
    /// ```
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat = interval;
        self
    }

    /// How long a record may stay unchanged before this lock evicts its
    /// holder (default three heartbeats); written into our own record as
    /// its lease, which every peer honours. Must exceed the heartbeat.
    pub fn stale_threshold(mut self, threshold: Duration) -> Self {
        self.stale = Some(threshold);
        self
    }

    /// The pause between polls while waiting (default 0.25 s); below the
    /// stale threshold, since a waiting contender refreshes its record at
    /// each poll.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll = interval;
        self
    }

    /// The longest lease a peer's record is honoured for (default 24 h):
    /// a record asking more is evicted once unchanged this long
    /// (PROTOCOL 16.9). [`Duration::MAX`] honours any lease, as filelock
    /// does, and lets a crashed holder asking `lease=1e+20` keep everyone
    /// out.
    pub fn max_lease(mut self, most: Duration) -> Self {
        self.max_lease = most;
        self
    }

    /// Called on the heartbeat thread when the hold is lost.
    ///
    /// ```no_run
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use swaplock::rw::SoftRwLock;
    ///
    /// static LOST: AtomicBool = AtomicBool::new(false);
    /// # fn main() -> std::io::Result<()> {
    /// let lock = SoftRwLock::new("/mnt/nfs/catalog.lock").on_compromise(|why| {
    ///     eprintln!("the hold is lost: {why:?}");
    ///     LOST.store(true, Ordering::Relaxed);
    /// });
    /// let guard = lock.write()?;
    /// while !LOST.load(Ordering::Relaxed) {
    ///     // ... one step of the work, fenced by guard.generation() ...
    ///     # break;
    /// }
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_compromise(mut self, hook: impl Fn(Compromise) + Send + Sync + 'static) -> Self {
        self.on_compromise = Some(Arc::new(hook));
        self
    }

    /// The lock path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stale threshold in force.
    pub fn threshold(&self) -> Duration {
        self.stale.unwrap_or(self.heartbeat.saturating_mul(3))
    }

    /// The intervals, checked as filelock checks them.
    fn terms(&self) -> io::Result<participant::Terms> {
        use swaplock_core::rw::member::{valid_intervals, Interval};
        let threshold = self.threshold();
        let why = match valid_intervals(self.heartbeat, threshold, self.poll) {
            Ok(()) => {
                return Ok(participant::Terms {
                    threshold,
                    max_lease: self.max_lease,
                })
            }
            Err(Interval::Heartbeat) => "heartbeat_interval must be positive".to_owned(),
            Err(Interval::Threshold) => format!(
                "stale_threshold must exceed heartbeat_interval ({:?}), got {threshold:?}",
                self.heartbeat
            ),
            Err(Interval::Poll) => format!(
                "poll_interval must be positive and below stale_threshold ({threshold:?}), got {:?}",
                self.poll
            ),
        };
        let kind = io::ErrorKind::InvalidInput;
        Err(LockError::io(
            &self.path,
            Step::Lock,
            kind,
            io::Error::new(kind, why),
        ))
    }

    /// This process's shared state of the path, looked up once per process.
    fn shared(&self) -> io::Result<Arc<Shared>> {
        let pid = crate::pid::id();
        if let Some((p, s)) = self.shared.get() {
            if *p == pid {
                return Ok(Arc::clone(s));
            }
        }
        let shared = Shared::of(&self.path)?;
        let _ = self.shared.set((pid, Arc::clone(&shared)));
        Ok(shared)
    }

    /// Waits for the read lock.
    ///
    /// ```
    /// use swaplock::rw::SoftRwLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let lock = SoftRwLock::new(dir.path().join("catalog.lock"));
    /// let first = lock.read()?;
    /// let second = lock.read()?; // nests in the same hold
    /// assert_eq!(first.generation(), second.generation());
    /// # Ok(())
    /// # }
    /// ```
    pub fn read(&self) -> io::Result<SoftRwGuard> {
        self.acquire(Mode::Read, Patience::Forever, None)
    }

    /// One poll for the read lock (up to four attempts); an error of kind
    /// [`WouldBlock`](io::ErrorKind::WouldBlock) if a writer holds or
    /// waits.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use swaplock::rw::SoftRwLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("catalog.lock");
    /// let writing = SoftRwLock::new(&path).write()?;
    /// // Another thread finds the lock written.
    /// let read = std::thread::spawn(move || SoftRwLock::new(path).try_read().map(drop));
    /// assert_eq!(read.join().unwrap().unwrap_err().kind(), ErrorKind::WouldBlock);
    /// writing.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_read(&self) -> io::Result<SoftRwGuard> {
        self.acquire(Mode::Read, Patience::Once, None)
    }

    /// Waits up to `timeout` for the read lock; an error of kind
    /// [`TimedOut`](io::ErrorKind::TimedOut) then. The first poll always
    /// runs.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use swaplock::rw::SoftRwLock;
    /// # fn main() -> std::io::Result<()> {
    /// let guard = SoftRwLock::new("/mnt/nfs/catalog.lock").read_timeout(Duration::from_secs(10))?;
    /// # drop(guard);
    /// # Ok(())
    /// # }
    /// ```
    pub fn read_timeout(&self, timeout: Duration) -> io::Result<SoftRwGuard> {
        self.acquire(Mode::Read, until(timeout), None)
    }

    /// Waits for the read lock (up to `timeout`, if given), calling `hook`
    /// after each poll that found it held; [`ControlFlow::Break`] cancels
    /// the wait (an error of kind [`Interrupted`](io::ErrorKind::Interrupted)),
    /// leaving the log as it found it.
    ///
    /// ```no_run
    /// use std::ops::ControlFlow;
    /// use swaplock::rw::SoftRwLock;
    /// # fn main() -> std::io::Result<()> {
    /// let guard = SoftRwLock::new("/mnt/nfs/catalog.lock").read_with(None, |wait| {
    ///     if let Some(writer) = wait.writer() {
    ///         eprintln!("waited {:.1?}: writer {writer} at generation {:?}", wait.waited(), wait.generation());
    ///     }
    ///     ControlFlow::Continue(())
    /// })?;
    /// # drop(guard);
    /// # Ok(())
    /// # }
    /// ```
    pub fn read_with(
        &self,
        timeout: Option<Duration>,
        mut hook: impl FnMut(&RwWaitStatus<'_>) -> ControlFlow<()>,
    ) -> io::Result<SoftRwGuard> {
        self.acquire(
            Mode::Read,
            timeout.map_or(Patience::Forever, until),
            Some(&mut hook),
        )
    }

    /// Waits for the write lock.
    ///
    /// ```
    /// use swaplock::rw::SoftRwLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let lock = SoftRwLock::new(dir.path().join("catalog.lock"));
    /// let first = lock.write()?.generation();
    /// let second = lock.write()?.generation();
    /// assert!(second > first, "each grant is a later generation");
    /// # Ok(())
    /// # }
    /// ```
    pub fn write(&self) -> io::Result<SoftRwGuard> {
        self.acquire(Mode::Write, Patience::Forever, None)
    }

    /// One poll for the write lock; an error of kind
    /// [`WouldBlock`](io::ErrorKind::WouldBlock) if anyone else holds it
    /// (a waiting writer that gives up leaves the log as it was).
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use swaplock::rw::SoftRwLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("catalog.lock");
    /// let reading = SoftRwLock::new(&path).read()?;
    /// let write = std::thread::spawn(move || SoftRwLock::new(path).try_write().map(drop));
    /// assert_eq!(write.join().unwrap().unwrap_err().kind(), ErrorKind::WouldBlock);
    /// drop(reading);
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_write(&self) -> io::Result<SoftRwGuard> {
        self.acquire(Mode::Write, Patience::Once, None)
    }

    /// Waits up to `timeout` for the write lock.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use swaplock::rw::SoftRwLock;
    /// # fn main() -> std::io::Result<()> {
    /// let guard = SoftRwLock::new("/mnt/nfs/catalog.lock").write_timeout(Duration::from_secs(60))?;
    /// println!("writing under fencing token {}", guard.generation());
    /// # Ok(())
    /// # }
    /// ```
    pub fn write_timeout(&self, timeout: Duration) -> io::Result<SoftRwGuard> {
        self.acquire(Mode::Write, until(timeout), None)
    }

    /// Waits for the write lock (up to `timeout`, if given), calling `hook`
    /// after each poll that found it held, as [`read_with`](Self::read_with).
    ///
    /// ```no_run
    /// use std::ops::ControlFlow;
    /// use std::time::Duration;
    /// use swaplock::rw::SoftRwLock;
    /// # fn main() -> std::io::Result<()> {
    /// let guard = SoftRwLock::new("/mnt/nfs/catalog.lock").write_with(Some(Duration::from_secs(600)), |wait| {
    ///     eprintln!("{} readers to drain", wait.readers());
    ///     ControlFlow::Continue(())
    /// })?;
    /// # drop(guard);
    /// # Ok(())
    /// # }
    /// ```
    pub fn write_with(
        &self,
        timeout: Option<Duration>,
        mut hook: impl FnMut(&RwWaitStatus<'_>) -> ControlFlow<()>,
    ) -> io::Result<SoftRwGuard> {
        self.acquire(
            Mode::Write,
            timeout.map_or(Patience::Forever, until),
            Some(&mut hook),
        )
    }
}

/// The awaited acquires (feature `tokio`).
#[cfg(feature = "tokio")]
impl SoftRwLock {
    /// Waits for the read lock without blocking the thread: each poll of
    /// the log runs in the task, and the pauses between polls (the poll
    /// interval) are the runtime's timer. The hold and its heartbeat are
    /// as [`read`](Self::read)'s: the heartbeat runs on a thread of its
    /// own, whatever the task does.
    ///
    /// Cancel-safe: a future dropped before it returns leaves the log as
    /// it found it (a writer that waited no longer keeps readers out) and
    /// holds nothing. For a timeout, wrap it in `tokio::time::timeout`.
    /// The runtime needs its time driver; outside a runtime the call fails
    /// with an error of kind [`Unsupported`](io::ErrorKind::Unsupported).
    /// A read shares a read hold this process has already, as a thread's
    /// does; a task moves between threads, so each awaited acquire is an
    /// owner of its own: a task that awaits a write lock it holds waits
    /// for ever (no deadlock is detected, since a task is no thread). In a
    /// task, take the lock only through these: the blocking calls
    /// ([`read`](Self::read), [`try_write`](Self::try_write), ...) nest by
    /// thread, so two tasks that run on one thread would share its write
    /// hold.
    ///
    /// # Panics
    ///
    /// In a runtime without its time driver: tokio's timer panics.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use swaplock::rw::SoftRwLock;
    /// # async fn run() -> std::io::Result<()> {
    /// let lock = SoftRwLock::new("/mnt/nfs/catalog.lock");
    /// let reading = tokio::time::timeout(Duration::from_secs(30), lock.read_async())
    ///     .await
    ///     .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    /// // ... read the catalog ...
    /// reading.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn read_async(&self) -> io::Result<SoftRwGuard> {
        self.acquire_async(Mode::Read).await
    }

    /// Waits for the write lock without blocking the thread, as
    /// [`read_async`](Self::read_async) waits for the read lock. While it
    /// waits, its participant stays in the log, so new readers of every
    /// process, Python's included, keep out as they do for
    /// [`write`](Self::write).
    ///
    /// ```no_run
    /// use swaplock::rw::SoftRwLock;
    /// # async fn run() -> std::io::Result<()> {
    /// let writing = SoftRwLock::new("/mnt/nfs/catalog.lock").write_async().await?;
    /// println!("writing under fencing token {}", writing.generation());
    /// writing.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn write_async(&self) -> io::Result<SoftRwGuard> {
        self.acquire_async(Mode::Write).await
    }
}

fn until(timeout: Duration) -> Patience {
    match crate::sync::now().checked_add(timeout) {
        Some(deadline) => Patience::Until(deadline),
        None => Patience::Forever,
    }
}
