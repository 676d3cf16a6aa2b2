//! The strict lock: Python filelock 4.2.11's `StrictSoftFileLock`, for
//! filesystems where kernel locks fail and no holder may ever be broken on
//! a guess (PROTOCOL 18).
//!
//! A permanent sentinel sits at the lock path; each contender publishes
//! an immutable claim under `<lock>.filelock/claims/`, by a hard link of a
//! complete private file, and wins through a two-phase doorway whose
//! smallest token wins. Nothing expires: a holder that dies keeps the
//! lock until an operator removes its claims ([`StrictLock::break_dead`],
//! `swaplock break --kind strict`), which this host does only for a holder
//! it proves gone. Python and Rust contenders of this kind exclude each
//! other on one path.
//!
//! **Do not mix kinds on one path.** Once the sentinel exists, soft locks
//! on the path never acquire it, and a strict lock refuses a soft lock's
//! marker there.
//!
//! ```
//! use swaplock::StrictLock;
//! # fn main() -> std::io::Result<()> {
//! let dir = tempfile::tempdir()?;
//! let lock = StrictLock::new(dir.path().join("deploy.lock"));
//! let guard = lock.lock()?;
//! // The claim this process published, and the sentinel, 24 bytes.
//! assert_eq!(lock.claims()?.len(), 2);
//! assert_eq!(std::fs::metadata(lock.path())?.len(), 24);
//! guard.release()?;
//! assert!(lock.claims()?.is_empty());
//! # Ok(())
//! # }
//! ```

use crate::adapter::soft::{self as os, SoftOs};
use crate::adapter::strict as sys;
use crate::error::{Explain, Explained, LockError, Step};
use crate::held::{self, Registered};
use std::ffi::CString;
use std::io;
use std::ops::ControlFlow;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use swaplock_core::decide::UnchangedWatch;
use swaplock_core::host::HostName;
use swaplock_core::names::{Name, Token};
use swaplock_core::start::StartToken;
use swaplock_core::strict::claim::ClaimName;
use swaplock_core::strict::doorway::Jittered;
use swaplock_core::strict::MAX_LOCK_NAME;
use swaplock_core::wait::Wait;
use swaplock_core::{Errno, Pid};

mod attempt;
mod guard;
mod inspect;
mod scan;

pub use guard::StrictLockGuard;
pub use inspect::{BreakReport, ClaimInfo, LockPath};
pub use swaplock_core::strict::claim::ClaimState;

/// The default pause between attempts, as filelock's `poll_interval`
/// (each pause is drawn at random around it: PROTOCOL 18.5).
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(50);

/// The strict locks this process holds, by canonical path: a thread that
/// waits for ever for one it holds is refused (`Deadlock`).
static HELD: held::Held<Arc<Path>> = crate::lists::ProcessMutex::new(Vec::new());

/// What a lock object remembers between its attempts.
#[derive(Default)]
struct Memory {
    /// How long the file at the lock path that no lock parses has been
    /// seen unchanged (PROTOCOL 18.6).
    watch: UnchangedWatch,
    /// Our claims an attempt could not remove: removed at the next.
    leftovers: Vec<ClaimName>,
}

/// A strict lock on a path (filelock's `StrictSoftFileLock`). Cloning it
/// is cheap; clones share what the lock remembers between attempts.
///
/// Threads contend for it as processes do, through its claims: a thread
/// that waits with no timeout for a path it already holds gets an error
/// of kind [`Deadlock`](io::ErrorKind::Deadlock) at once, as it would wait
/// forever.
#[derive(Clone)]
pub struct StrictLock {
    path: Arc<Path>,
    dir: Arc<CString>,
    dir_path: Arc<Path>,
    base: Name,
    poll_interval: Duration,
    mode: Option<u32>,
    memory: Arc<crate::sync::Mutex<Memory>>,
}

impl std::fmt::Debug for StrictLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StrictLock")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// This process, as its claims name it.
pub(crate) struct Me {
    pid: Pid,
    host: HostName,
    start: Option<StartToken>,
}

impl Me {
    fn now() -> Self {
        let pid = os::current_pid();
        Me {
            pid,
            host: os::host_name(),
            start: os::start_token(pid.get()),
        }
    }
}

/// What a waiting acquire knows, for its [`StrictLock::lock_with`] hook.
pub struct StrictWait<'a> {
    lock: &'a StrictLock,
    waited: Duration,
}

impl StrictWait<'_> {
    /// How long the acquire has waited.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// The claims in the way now, read anew at each call
    /// ([`StrictLock::claims`]).
    pub fn claims(&self) -> io::Result<Vec<ClaimInfo>> {
        self.lock.claims()
    }

    /// The lock waited for.
    pub fn lock(&self) -> &StrictLock {
        self.lock
    }
}

/// A [`StrictLock::lock_with`] hook.
type Hook<'a> = dyn FnMut(&StrictWait<'_>) -> ControlFlow<()> + 'a;

impl StrictLock {
    /// An error of kind [`Unsupported`](io::ErrorKind::Unsupported): this
    /// filesystem cannot carry a strict lock, for `reason`.
    fn unsupported(&self, reason: String) -> io::Error {
        let kind = io::ErrorKind::Unsupported;
        let source = io::Error::new(
            kind,
            Explained(Box::new(Invalid {
                path: self.path.clone(),
                claim: None,
                reason,
            })),
        );
        LockError::io(&self.path, Step::Lock, kind, source)
    }

    /// The error of a filesystem whose `link` fails with `errno`.
    pub(super) fn no_hard_links(&self, errno: Errno) -> io::Error {
        self.unsupported(format!(
            "filesystem does not support atomic no-replace hard-link publication (link: \
             {errno}): a strict lock publishes every claim by a hard link; use another kind of \
             lock on this filesystem"
        ))
    }

    /// The error of a filesystem that keeps no Unix modes: `chmod` of a
    /// directory this account owns fails with `errno` (`EPERM` on vfat and
    /// exFAT), so the claims' directory cannot be settled (18.1).
    pub(super) fn no_unix_modes(&self, dir: &str, errno: Errno) -> io::Error {
        self.unsupported(format!(
            "filesystem keeps no Unix modes (chmod of {dir}, which this account owns: {errno}), \
             which a strict lock sets on its directories, and vfat and exFAT have no hard links \
             either, by which it publishes every claim; use another kind of lock on this \
             filesystem"
        ))
    }

    /// A strict lock on `path`. A path whose final component is empty, or
    /// longer than [`MAX_LOCK_NAME`] (206) bytes, fails at the first lock
    /// call, before anything is created.
    ///
    /// ```
    /// use swaplock::StrictLock;
    /// let lock = StrictLock::new("/mnt/nfs/deploy.lock");
    /// assert_eq!(lock.path(), std::path::Path::new("/mnt/nfs/deploy.lock"));
    /// ```
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path: PathBuf = path.into();
        let dir_path = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let base = path.file_name().map(OsStrExt::as_bytes).unwrap_or_default();
        StrictLock {
            dir: Arc::new(CString::new(dir_path.as_os_str().as_bytes()).unwrap_or_default()),
            dir_path: dir_path.into(),
            base: Name::from_slice(base).unwrap_or_default(),
            path: path.into(),
            poll_interval: DEFAULT_POLL_INTERVAL,
            mode: None,
            memory: Arc::default(),
        }
    }

    /// The pause between attempts while waiting (default 50 ms); each
    /// pause is drawn at random around it.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use swaplock::StrictLock;
    /// # fn main() -> std::io::Result<()> {
    /// let lock = StrictLock::new("/mnt/nfs/deploy.lock").poll_interval(Duration::from_millis(200));
    /// let _guard = lock.lock_timeout(Duration::from_secs(60))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// An explicit mode for the sentinel and claims (filelock's `mode`;
    /// the umask applies); the directories get it with search permission
    /// wherever it grants read. Without one, `0o666`.
    ///
    /// ```
    /// use std::os::unix::fs::PermissionsExt;
    /// use swaplock::StrictLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let lock = StrictLock::new(dir.path().join("private.lock")).mode(0o600);
    /// lock.lock()?.release()?;
    /// let claims = dir.path().join("private.lock.filelock/claims");
    /// assert_eq!(std::fs::metadata(claims)?.permissions().mode() & 0o7777, 0o1700);
    /// # Ok(())
    /// # }
    /// ```
    pub fn mode(mut self, mode: u32) -> Self {
        self.mode = Some(mode & 0o777);
        self
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits for the lock.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use swaplock::StrictLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let lock = StrictLock::new(dir.path().join("deploy.lock"));
    /// let guard = lock.lock()?;
    /// // Waiting for its own claims, this thread would wait forever.
    /// assert_eq!(lock.lock().unwrap_err().kind(), ErrorKind::Deadlock);
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock(&self) -> io::Result<StrictLockGuard> {
        self.acquire(Wait::Forever, None)
    }

    /// One attempt; an error of kind `WouldBlock` if the lock is held.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use swaplock::StrictLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("deploy.lock");
    /// let _running = StrictLock::new(&path).try_lock()?;
    /// let second = StrictLock::new(&path).try_lock();
    /// assert_eq!(second.unwrap_err().kind(), ErrorKind::WouldBlock);
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_lock(&self) -> io::Result<StrictLockGuard> {
        self.acquire(Wait::No, None)
    }

    /// Waits up to `timeout`; an error of kind `TimedOut` if the lock stays
    /// held, which names its holder. The first attempt always runs.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use std::time::Duration;
    /// use swaplock::StrictLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("deploy.lock");
    /// let _running = StrictLock::new(&path).lock()?;
    /// let err = StrictLock::new(&path).lock_timeout(Duration::ZERO).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::TimedOut);
    /// assert!(err.to_string().contains("which is alive"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock_timeout(&self, timeout: Duration) -> io::Result<StrictLockGuard> {
        self.acquire(Wait::Until(timeout), None)
    }

    /// Waits for the lock (up to `timeout`, if given), calling `hook` after
    /// each attempt that found it held. The hook can look at the claims in
    /// the way ([`StrictWait::claims`]) and cancel the wait by returning
    /// [`ControlFlow::Break`]: the acquire then fails with an error of kind
    /// [`Interrupted`](io::ErrorKind::Interrupted), having taken nothing.
    ///
    /// ```no_run
    /// use std::ops::ControlFlow;
    /// use swaplock::StrictLock;
    /// # fn main() -> std::io::Result<()> {
    /// let guard = StrictLock::new("/mnt/nfs/deploy.lock").lock_with(None, |wait| {
    ///     for claim in wait.claims().unwrap_or_default() {
    ///         eprintln!("waiting {:.1?}: {} of pid {} on {}", wait.waited(), claim.name, claim.pid, claim.host);
    ///     }
    ///     ControlFlow::Continue(())
    /// })?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock_with(
        &self,
        timeout: Option<Duration>,
        mut hook: impl FnMut(&StrictWait<'_>) -> ControlFlow<()>,
    ) -> io::Result<StrictLockGuard> {
        let wait = timeout.map_or(Wait::Forever, Wait::Until);
        self.acquire(wait, Some(&mut hook))
    }

    /// Waits for the lock without blocking the thread, in a tokio runtime
    /// (feature `tokio`): between attempts the task sleeps for the poll's
    /// random pause. Each attempt is a few quick file calls, made on the
    /// task's thread. Cancel-safe: a future dropped before it returns has
    /// taken nothing and left no claim. A task that awaits a lock it holds
    /// waits for ever. Outside a runtime the call fails with an error of
    /// kind [`Unsupported`](io::ErrorKind::Unsupported).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use swaplock::StrictLock;
    /// # async fn run() -> std::io::Result<()> {
    /// let lock = StrictLock::new("/mnt/nfs/deploy.lock");
    /// let guard = tokio::time::timeout(Duration::from_secs(30), lock.lock_async())
    ///     .await
    ///     .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn lock_async(&self) -> io::Result<StrictLockGuard> {
        crate::async_wait::in_runtime(&self.path)?;
        let mut patience = Jittered::new(Wait::Forever, self.poll_interval);
        loop {
            match self.acquire(Wait::No, None) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return done,
            }
            let pause = patience
                .busy(Duration::ZERO, random_u64())
                .unwrap_or(self.poll_interval);
            crate::sync::time::sleep(pause).await;
        }
    }

    /// The lock's canonical path, its key among the locks this process
    /// holds: its directory resolved, its own name joined.
    fn key(&self) -> Arc<Path> {
        match std::fs::canonicalize(&*self.dir_path) {
            Ok(dir) => dir.join(std::ffi::OsStr::from_bytes(&self.base)).into(),
            Err(_) => self.path.clone(),
        }
    }

    /// The mode of the files it creates (before the umask).
    fn file_mode(&self) -> u32 {
        self.mode.unwrap_or(0o666)
    }

    fn acquire(
        &self,
        wait: Wait<Duration>,
        mut hook: Option<&mut Hook<'_>>,
    ) -> io::Result<StrictLockGuard> {
        if self.base.is_empty() || self.base.len() > MAX_LOCK_NAME {
            let kind = io::ErrorKind::InvalidInput;
            let source = io::Error::new(
                kind,
                format!(
                    "a strict lock's file name must be 1 to {MAX_LOCK_NAME} bytes: its \
                     sentinel's private name adds 49 and must fit in a file name"
                ),
            );
            return Err(LockError::io(&self.path, Step::Open, kind, source));
        }
        let key = self.key();
        if wait == Wait::Forever && held::by_this_thread(&HELD, |k| **k == *key) {
            let kind = io::ErrorKind::Deadlock;
            let source = io::Error::new(
                kind,
                "Deadlock: this thread holds this strict lock already, and would wait for ever \
                 for its own claims",
            );
            return Err(LockError::io(&self.path, Step::Lock, kind, source));
        }
        let me = Me::now();
        let began = Instant::now();
        let mut patience = Jittered::new(wait, self.poll_interval);
        loop {
            let blocker = match self.attempt(&me)? {
                attempt::Attempt::Won(hold) => {
                    let registered = Registered::new(&HELD, key);
                    return Ok(StrictLockGuard::new(self.clone(), hold, registered));
                }
                attempt::Attempt::Busy(blocker) => blocker,
            };
            let Some(pause) = patience.busy(began.elapsed(), random_u64()) else {
                return Err(self.busy(wait, blocker));
            };
            if let Some(hook) = hook.as_mut() {
                let status = StrictWait {
                    lock: self,
                    waited: began.elapsed(),
                };
                if hook(&status).is_break() {
                    let kind = io::ErrorKind::Interrupted;
                    let source = io::Error::new(kind, "the wait was cancelled by its hook");
                    return Err(LockError::io(&self.path, Step::Lock, kind, source));
                }
            }
            crate::sync::thread::sleep(pause);
        }
    }

    /// An OS error of step `step`, as the facade reports them.
    fn err(&self, step: Step, errno: Errno) -> io::Error {
        LockError::errno(&self.path, step, errno)
    }

    /// A state of the lock's files that no attempt can get past: an error
    /// in filelock's words, `Invalid strict soft-lock state at <L>: ...`.
    fn invalid(&self, claim: Option<&[u8]>, reason: String) -> io::Error {
        let kind = io::ErrorKind::InvalidData;
        let source = io::Error::new(
            kind,
            Explained(Box::new(Invalid {
                path: self.path.clone(),
                claim: claim.map(|c| String::from_utf8_lossy(c).into_owned()),
                reason,
            })),
        );
        LockError::io(&self.path, Step::Lock, kind, source)
    }
}

/// A name as the adapter's calls take it. The names a strict lock acts
/// on are built by it or listed from a directory: none holds a NUL.
fn c(name: &[u8]) -> Result<CString, Errno> {
    CString::new(name).map_err(|_| Errno::INVAL)
}

/// 64 random bits, for a pause.
fn random_u64() -> u64 {
    let Token(bytes) = os::random_token();
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(word)
}

/// A state of the lock's files that fails every attempt, in filelock's
/// words (its `SoftFileLockProtocolError`).
#[derive(Debug)]
struct Invalid {
    path: Arc<Path>,
    claim: Option<String>,
    reason: String,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Invalid strict soft-lock state at {}: ",
            self.path.display()
        )?;
        if let Some(claim) = &self.claim {
            write!(f, "claim '{claim}': ")?;
        }
        f.write_str(&self.reason)
    }
}

impl Explain for Invalid {
    fn explain(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Invalid {}

/// An open directory, closed when dropped.
type Dir = OwnedFd;

/// The lock's directories, open for one attempt.
struct Dirs {
    /// The lock path's directory.
    lock: Dir,
    /// `<lock>.filelock/claims`.
    claims: Dir,
}
