//! Kernel locks by the with-lock-ex protocol.
//!
//! The lock is held by the process that holds an `fcntl` write lock on the
//! first byte of the plain file the path names. Only a holder may delete the
//! file or make the name refer to another file, and it stops holding the lock
//! as soon as it does. To acquire, a process opens the path (creating the
//! file if needed, never truncating it), takes the lock, and then compares
//! `fstat` of its descriptor with `stat` of the path: the same device and
//! inode means the lock is held; another file, or none, means a holder
//! removed the file after we opened it, so we close and start again. This is
//! what makes it safe to delete lock files: see [`FileLockGuard::remove`].
//!
//! # Properties of `fcntl` locks to know
//!
//! - **Who owns them.** On Linux (3.15 and later) and Android,
//!   [`FileLock::new`] takes an *open file description* lock
//!   (`F_OFD_SETLK`): it belongs to the lock's own open file, so two
//!   [`FileLock`]s for one file exclude each other in one process as
//!   between processes (threads included), and closing another descriptor
//!   of the file leaves it held. It still conflicts with every classic
//!   `fcntl` lock, so `with-lock-ex` and Python's `fcntl.lockf` stay
//!   excluded; `F_GETLK` reports its holder as PID -1.
//!   [`FileLock::owned_by_process`] takes the classic lock instead, as the
//!   `with-lock-ex` command does: a classic lock belongs to the process,
//!   so two such locks for one file in one process do not exclude each
//!   other, and closing *any* descriptor of the file in the process (say,
//!   a `std::fs::read` of the lock file) releases it at once.
//! - **Where the kernel has no open file description locks** (Apple
//!   systems, whose `F_OFD_SETLK` from macOS 14 is refused with `ENOTSUP`
//!   on non-local filesystems; 32-bit Linux and Android; Linux before 3.15,
//!   detected at the first lock; `SWAPLOCK_FCNTL_OFD=0` in the environment
//!   chooses it too), [`FileLock::new`] takes the classic lock and this process keeps
//!   a registry of the files it locks, by device and inode: a second lock
//!   of a held file, by any thread, waits for the first as another
//!   process would (or fails at once, or times out); descriptors this
//!   crate opens on a held file (failed attempts, `FileLock::holder` (Unix),
//!   [`OpenFileLock`](crate::OpenFileLock)s) are kept open until the last
//!   holder releases, so they never release it; shared guards share one
//!   read lock, released with the last of them. A descriptor the program
//!   opens and closes itself still releases the lock: do not open the
//!   lock file elsewhere in the process, or use [`FileLock::flock`].
//! - **Across `fork` and `exec`.** A classic lock is not inherited by the
//!   child of a fork; an open file description lock, like an `flock` lock,
//!   belongs to the open file, which a forked child shares. The lock stays
//!   the parent's: the child's guard refuses to unlock or remove it and
//!   only closes its descriptor on drop, and the parent's release (drop
//!   included) unlocks explicitly, so a child that keeps the descriptor
//!   does not keep the lock. Both kinds survive `exec` on a descriptor
//!   without close-on-exec, which is how the `with-lock-ex` command hands
//!   the lock to its command.
//! - **Readers can block the lock.** Anyone who can open the file, even read
//!   only, can take a conflicting read lock; keep lock files from being
//!   world-readable.
//! - **`fcntl` and `flock` locks do not see each other** on Linux: a holder of
//!   one kind does not exclude a contender of the other. All processes on a
//!   path must use the same kind.
//!
//! # Deadlocks
//!
//! There is no deadlock detection across lock files. Give the locks of a
//! system an order and always acquire in that order: for locks `A > B`,
//! never acquire `A` while holding `B`; release `B` first, then take `A`
//! and `B` in that order.
//!
//! ```no_run
//! use swaplock::FileLock;
//! # fn main() -> std::io::Result<()> {
//! // Hierarchy: the index lock ranks above every shard lock.
//! let index = FileLock::new("/var/lib/app/index.lock");
//! let shard = FileLock::new("/var/lib/app/shard-7.lock");
//! let _i = index.lock()?; // higher first
//! let _s = shard.lock()?; // then lower
//! # Ok(())
//! # }
//! ```

use crate::adapter::kernel as os;
use crate::error::{LockError, Step};
use crate::held::{self, Held, Registered};
#[cfg(unix)]
use crate::inodes;
#[cfg(unix)]
use crate::kernel_wait;
#[cfg(unix)]
use crate::soft::{SoftLock, SoftLockGuard};
use std::io;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use swaplock_core::decide::{with_lock_ex_mode, FileId};
use swaplock_core::kernel as protocol;
#[cfg(windows)]
use swaplock_core::kernel::{Backoff, Outcome};
#[cfg(windows)]
use swaplock_core::wait::Deadline;
use swaplock_core::Errno;

/// A path as the adapter's calls take it: a C string on POSIX systems
/// (empty when the path holds a NUL, which every call refuses with
/// `ENOENT`), NUL-terminated UTF-16 on Windows.
#[cfg(unix)]
pub(crate) type SysPath = std::ffi::CStr;
#[cfg(windows)]
pub(crate) type SysPath = [u16];

#[cfg(unix)]
fn sys_path(path: &Path) -> Arc<SysPath> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes())
        .unwrap_or_default()
        .into()
}

#[cfg(windows)]
fn sys_path(path: &Path) -> Arc<SysPath> {
    os::wide_path(path).into()
}

/// The open lock file: a descriptor (released through [`inodes`] where
/// that excludes this process's threads), or a handle on Windows.
#[cfg(unix)]
type LockFile = crate::inodes::GuardFd;
#[cfg(windows)]
type LockFile = swaplock_windows::kernel::LockHandle;

/// The adapter's kernel-lock operations on one path, which the core's
/// driver runs.
#[cfg(unix)]
pub(crate) fn kernel_os(
    path: &SysPath,
    follow: bool,
    mode: u32,
    scope: Scope,
) -> os::UnixKernel<'_> {
    os::UnixKernel {
        path,
        follow,
        mode,
        call: scope.call(),
        shared: scope.shared,
    }
}

/// A kernel lock's kind, and for `fcntl` who owns it. (Only 64-bit Linux
/// and Android tell the owners apart, and Windows has one lock for both
/// kinds.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    not(all(
        any(target_os = "linux", target_os = "android"),
        target_pointer_width = "64"
    )),
    allow(dead_code)
)]
pub(crate) struct Scope {
    kind: Kind,
    /// A classic `fcntl` lock, owned by the process
    /// ([`FileLock::owned_by_process`]).
    process_owned: bool,
    /// The shared (read) lock rather than the exclusive one.
    pub(crate) shared: bool,
}

impl Scope {
    pub(crate) fn new(kind: Kind, process_owned: bool, shared: bool) -> Self {
        Scope {
            kind,
            process_owned,
            shared,
        }
    }

    /// Whether a second lock of this scope on the same file, in this
    /// process, waits for the first (an open file description `fcntl`
    /// lock, `flock`, Windows' `LockFileEx`): a classic `fcntl` lock
    /// instead merges with it.
    /// (Where the kernel has no open file description locks, a classic
    /// lock not owned by the process excludes this process's threads
    /// through [`inodes`].)
    pub(crate) fn excludes_own_process(self) -> bool {
        #[cfg(unix)]
        return !(self.kind == Kind::Fcntl && self.process_owned);
        #[cfg(windows)]
        return true;
    }

    /// The lock call of this scope: on 64-bit Linux and Android an `fcntl`
    /// lock is an open file description lock unless the process is to own
    /// it.
    #[cfg(unix)]
    pub(crate) fn call(self) -> os::LockCall {
        match self.kind {
            #[cfg(all(
                any(target_os = "linux", target_os = "android"),
                target_pointer_width = "64"
            ))]
            Kind::Fcntl if !self.process_owned => os::LockCall::FcntlOfd,
            Kind::Fcntl => os::LockCall::Fcntl,
            Kind::Flock => os::LockCall::Flock,
        }
    }
}

/// The adapter's kernel-lock operations on one path, which the core's
/// driver runs. Both kinds are `LockFileEx` on byte 0 here.
#[cfg(windows)]
fn kernel_os(path: &SysPath, follow: bool, mode: u32, scope: Scope) -> os::WindowsKernel<'_> {
    os::WindowsKernel {
        path,
        follow,
        mode,
        shared: scope.shared,
    }
}

/// The kernel locks this process holds whose second lock in this process
/// would wait for the first, by the locked file's identity ([`held`]).
/// Each with whether it is shared.
static HELD: Held<(FileId, Family, bool)> = std::sync::Mutex::new(Vec::new());

/// Which locks of a file exclude each other: on Linux and Android, `fcntl`
/// and `flock` locks never meet, so a thread holding one kind waits for
/// the other as for any free lock; elsewhere (Apple systems, the BSDs,
/// Windows) the two kinds are one lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Family(u8);

impl Family {
    pub(crate) fn of(kind: Kind) -> Self {
        match (kind, cfg!(any(target_os = "linux", target_os = "android"))) {
            (Kind::Flock, true) => Family(1),
            _ => Family(0),
        }
    }
}

/// Whether this thread holds such a lock on the file `id()` names, in a
/// mode that excludes a lock of this one (`shared`; shared locks exclude
/// only the exclusive lock): `id` (a `stat` or an `fstat`) is asked only
/// if the thread holds any.
pub(crate) fn held_here(
    kind: Kind,
    shared: bool,
    id: impl FnOnce() -> Result<FileId, Errno>,
) -> bool {
    let family = Family::of(kind);
    let excludes = |f: Family, h_shared: bool| f == family && !(h_shared && shared);
    held::by_this_thread(&HELD, |&(_, f, h_shared)| excludes(f, h_shared))
        && id().is_ok_and(|id| {
            held::by_this_thread(&HELD, |&(h, f, h_shared)| h == id && excludes(f, h_shared))
        })
}

/// [`HELD`]'s guard, for [`crate::atfork`].
#[cfg(unix)]
pub(crate) fn lock_for_fork() -> Vec<Box<dyn std::any::Any>> {
    vec![Box::new(HELD.lock().unwrap_or_else(|p| p.into_inner()))]
}

/// Enters a lock of this thread on the file `id`, until the entry drops.
pub(crate) fn register(id: FileId, kind: Kind, shared: bool) -> Registered<(FileId, Family, bool)> {
    Registered::new(&HELD, (id, Family::of(kind), shared))
}

/// The error of a wait that could never end: this thread holds the
/// file already, through another guard.
pub(crate) fn deadlock_error(path: &Arc<Path>) -> io::Error {
    let kind = io::ErrorKind::Deadlock;
    let source = io::Error::new(
        kind,
        "Deadlock: this thread already holds the lock through another guard, so waiting \
         for it would never end: release that guard first, or wait with a timeout",
    );
    LockError::io(path, Step::Lock, kind, source)
}

/// The identity of the file `path` names now.
#[cfg(unix)]
fn path_id(path: &SysPath, follow: bool) -> Result<FileId, Errno> {
    os::stat_id(path, follow)
}

#[cfg(windows)]
fn path_id(path: &SysPath, follow: bool) -> Result<FileId, Errno> {
    os::path_id(path, follow)
}

/// This process's umask: the file mode creation mask, whose bits are
/// cleared from the mode of every file it creates. [`FileLock::new`]
/// derives a new lock file's mode from it, as with-lock-ex does.
///
/// On Linux 4.7 and later it is read from `/proc/self/status`, without
/// changing it. Elsewhere it is read the old way, by setting it and
/// setting it back, which briefly changes it for the whole process: call
/// it while no other thread creates files (a command's start-up, say).
/// Windows has no umask: the answer there is `0o022`, so that a new lock
/// file is writable by its owner.
///
/// ```
/// use swaplock::core::decide::with_lock_ex_mode;
/// use swaplock::kernel::current_umask;
///
/// let umask = current_umask();
/// assert_eq!(umask & !0o777, 0);
/// // The mode with-lock-ex gives a new lock file (before the umask).
/// let mode = with_lock_ex_mode(umask);
/// assert_eq!(mode & !0o666, 0);
/// ```
#[cfg(unix)]
pub fn current_umask() -> u32 {
    os::read_umask().unwrap_or_else(|| {
        // Without /proc (or before Linux 4.7): read it the old way, which
        // briefly changes it for the whole process.
        let old = os::umask(0o077);
        os::umask(old);
        old
    })
}

/// This process's umask: the file mode creation mask, whose bits are
/// cleared from the mode of every file it creates. [`FileLock::new`]
/// derives a new lock file's mode from it, as with-lock-ex does.
///
/// Windows has no umask: the answer here is `0o022`, so that a new lock
/// file is writable by its owner.
///
/// ```
/// assert_eq!(swaplock::kernel::current_umask(), 0o022);
/// ```
#[cfg(windows)]
pub fn current_umask() -> u32 {
    0o022
}

/// Which kernel lock a [`FileLock`] takes.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An `fcntl` write lock on byte 0: the with-lock-ex protocol, shared
    /// with `with-lock-ex`, Python's `fcntl.lockf` and most C programs.
    Fcntl,
    /// An `flock` exclusive lock: excludes other open file descriptions of
    /// the same process too, and is shared with forked children. (On
    /// Windows both kinds are `LockFileEx` on byte 0, which behaves so.)
    Flock,
}

/// A kernel file lock on a path. Building one allocates; locking and
/// unlocking do not.
///
/// ```no_run
/// use std::io::ErrorKind;
/// use swaplock::FileLock;
/// # fn main() -> std::io::Result<()> {
/// let lock = FileLock::new("/run/lock/backup.lock");
/// match lock.try_lock() {
///     Ok(guard) => {
///         // ... the lock is held until `guard` is dropped ...
///         guard.release()?;
///     }
///     Err(e) if e.kind() == ErrorKind::WouldBlock => eprintln!("backup already running"),
///     Err(e) => return Err(e),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct FileLock {
    path: Arc<Path>,
    sys_path: Arc<SysPath>,
    kind: Kind,
    process_owned: bool,
    mode: u32,
    follow_symlinks: bool,
    /// Set for good once `flock` answered `ENOSYS`: from then on this lock
    /// is a `SoftFileLock`, as filelock switches.
    soft: Arc<AtomicBool>,
    /// Whether a filesystem that keeps locks per client mount is accepted
    /// ([`FileLock::allow_client_local`]).
    client_local: bool,
    /// The device of the last file this lock was taken on whose filesystem
    /// was judged to share its locks between hosts (or not known to keep
    /// them per client); [`NOT_JUDGED`] before.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fs_judged: Arc<std::sync::atomic::AtomicU64>,
}

/// [`FileLock::fs_judged`] before any file was judged.
#[cfg(any(target_os = "linux", target_os = "android"))]
const NOT_JUDGED: u64 = u64::MAX;

/// What an acquire came to, a lock taken already in its guard's file.
#[derive(Debug)]
pub(crate) enum Reached {
    /// The lock is held on this file.
    Held(LockFile, FileId),
    /// The lock stayed busy (the attempt's answer).
    Busy(Errno),
    /// `flock` answered `ENOSYS`; the file is open, and whether the
    /// attempt created it.
    #[cfg(unix)]
    Unsupported(std::os::fd::OwnedFd, bool),
    /// A step failed.
    Failed(protocol::Step, Errno),
}

/// What [`FileLock::settle`] came to.
enum Settled {
    Done(io::Result<FileLockGuard>),
    /// `flock` answered `ENOSYS`: the lock is a soft lock from now on.
    #[cfg(unix)]
    FellBack,
}

/// How long an attempt may wait.
#[derive(Clone, Copy)]
enum Wait {
    No,
    Forever,
    Until(Instant),
}

/// What a waiting acquire knows, for its [`FileLock::lock_with`] hook.
pub struct WaitStatus<'a> {
    lock: &'a FileLock,
    waited: Duration,
}

impl WaitStatus<'_> {
    /// How long the acquire has waited.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Who holds the lock now ([`FileLock::holder`], queried anew at each
    /// call).
    #[cfg(unix)]
    pub fn holder(&self) -> io::Result<Option<KernelHolder>> {
        self.lock.holder()
    }

    /// The lock waited for.
    pub fn lock(&self) -> &FileLock {
        self.lock
    }
}

/// Who holds a kernel lock that keeps an `fcntl` write lock on the whole
/// file from being taken, as `FileLock::holder` (Unix) finds it.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelHolder {
    /// The holder's PID as `F_GETLK` reports it: -1 for an open file
    /// description lock (Linux's `F_OFD_SETLK`), which no one process owns,
    /// and for an `flock` holder the kernel does not name; 0 for a holder
    /// in a PID namespace this process cannot see.
    pub pid: i32,
    /// Whether the lock is a read (shared) lock rather than a write lock.
    pub shared: bool,
}

impl FileLock {
    /// An `fcntl` lock (the with-lock-ex protocol) on `path`.
    ///
    /// The file is created if missing, with the mode with-lock-ex uses: read
    /// and write for each class of user the umask grants write to (0660
    /// under umask 002, 0600 under 022), unless [`mode`](Self::mode) says
    /// otherwise. A path with a NUL byte fails at the first lock call.
    ///
    /// ```
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("backup.lock");
    /// let guard = FileLock::new(&path).lock()?;
    /// assert!(path.exists()); // created by the first lock
    /// guard.release()?;
    /// assert!(path.exists()); // and left for the next holder
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::with_kind(path.into(), Kind::Fcntl)
    }

    /// An `flock` lock on `path`, with the same identity check.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("jobs.lock");
    /// let _guard = FileLock::flock(&path).lock()?;
    /// // Held, it excludes another flock lock of the file, even in this process:
    /// let again = FileLock::flock(&path).try_lock();
    /// assert_eq!(again.unwrap_err().kind(), ErrorKind::WouldBlock);
    /// # Ok(())
    /// # }
    /// ```
    pub fn flock(path: impl Into<PathBuf>) -> Self {
        Self::with_kind(path.into(), Kind::Flock)
    }

    fn with_kind(path: PathBuf, kind: Kind) -> Self {
        FileLock {
            sys_path: sys_path(&path),
            path: path.into(),
            kind,
            process_owned: false,
            mode: with_lock_ex_mode(current_umask()),
            follow_symlinks: false,
            soft: Arc::new(AtomicBool::new(false)),
            client_local: false,
            #[cfg(any(target_os = "linux", target_os = "android"))]
            fs_judged: Arc::new(std::sync::atomic::AtomicU64::new(NOT_JUDGED)),
        }
    }

    /// Accepts a filesystem whose kernel locks exclude only the processes
    /// that use this client mount: an SFTP or SMB client in userspace
    /// (`fuse.sshfs`, `fuse.smbnetfs`, ...), NFS mounted `nolock` or
    /// `local_lock=`, SMB mounted `nobrl` (PROTOCOL 13.5). By default a
    /// lock there is refused (`ErrorKind::Unsupported`, [`Step::Filesystem`]),
    /// because a process on another host could hold it at the same time;
    /// accept it only when no other host uses the directory. Linux and
    /// Android read the filesystem; elsewhere nothing is refused.
    ///
    /// ```no_run
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// // A laptop's sshfs mount of a build directory that only it uses.
    /// let _guard = FileLock::new("mnt/build/.lock").allow_client_local(true).lock()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn allow_client_local(mut self, allow: bool) -> Self {
        self.client_local = allow;
        self
    }

    /// The kernel lock family of this lock, as the filesystem judgement
    /// names it.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn family(&self) -> swaplock_core::fs::Family {
        match self.kind {
            Kind::Flock => swaplock_core::fs::Family::Flock,
            _ => swaplock_core::fs::Family::Fcntl,
        }
    }

    /// Refuses this lock before it is tried where the filesystem its path
    /// leads to keeps kernel locks per client mount (PROTOCOL 13.5): a
    /// wait there would be for a lock that excludes no other host. Until
    /// a file it took was judged ([`FileLock::judge_file`]), which settles
    /// it.
    fn check_filesystem(&self) -> io::Result<()> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if !self.client_local && self.fs_judged.load(Ordering::Relaxed) == NOT_JUDGED {
            crate::netfs::check_kernel(&self.path, self.family())?;
        }
        Ok(())
    }

    /// Judges the file a lock was just taken on (of device `dev`): where
    /// its filesystem keeps kernel locks per client mount, the lock is
    /// refused (the caller releases it). Whatever led there (a symlink, a
    /// mount namespace, a directory made since) the file itself is judged,
    /// once per device a lock object meets.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn judge_file(&self, fd: std::os::fd::BorrowedFd<'_>, dev: u64) -> io::Result<()> {
        if self.client_local || self.fs_judged.load(Ordering::Relaxed) == dev {
            return Ok(());
        }
        crate::netfs::check_kernel_file(&self.path, fd, dev, self.family())?;
        self.fs_judged.store(dev, Ordering::Relaxed);
        Ok(())
    }

    /// Makes an `fcntl` lock a classic POSIX record lock, owned by the
    /// process, as `with-lock-ex` and C programs take it, instead of (on
    /// Linux and Android, the default there) an open file description lock
    /// owned by this lock's open file. Owned by the process, the lock does
    /// not exclude another lock of this process on the same file, and
    /// closing *any* descriptor of the file in the process releases it; in
    /// exchange `F_GETLK` (`with-lock-ex -l`, `FileLock::holder` on Unix) reports
    /// this process's PID rather than -1. Elsewhere (macOS and the other
    /// BSDs, Linux before 3.15) every `fcntl` lock is owned by the process.
    /// Both exclude each other across processes. No effect on `flock`.
    ///
    /// ```no_run
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// // As with-lock-ex holds it: -l elsewhere names this process.
    /// let _guard = FileLock::new("/var/lock/job.lock").owned_by_process().lock()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn owned_by_process(mut self) -> Self {
        self.process_owned = true;
        self
    }

    fn scope(&self, shared: bool) -> Scope {
        Scope::new(self.kind, self.process_owned, shared)
    }

    /// The mode a newly created lock file gets (before the umask applies).
    ///
    /// ```no_run
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// // Only the owner may open a new lock file (a reader could block the lock).
    /// let _guard = FileLock::new("/run/lock/backup.lock").mode(0o600).lock()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn mode(mut self, mode: u32) -> Self {
        self.mode = mode & 0o7777;
        self
    }

    /// Whether a symlink at the path is followed to the file it names
    /// (`with-lock-ex` does). By default it is not: opening fails with
    /// `ELOOP`, so a planted link cannot redirect the lock.
    ///
    /// ```no_run
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// // /run/lock/app.lock is a symlink to the lock file on the data volume.
    /// let _guard = FileLock::new("/run/lock/app.lock").follow_symlinks(true).lock()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn follow_symlinks(mut self, follow: bool) -> Self {
        self.follow_symlinks = follow;
        self
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The kind of kernel lock taken.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Waits for the lock and holds it until the guard is dropped.
    ///
    /// Where a second lock of the file in this process waits for the first
    /// (an open file description `fcntl` lock, `flock`, Windows), a thread
    /// that waits so for a file it already holds through another guard
    /// gets an error of kind [`Deadlock`](io::ErrorKind::Deadlock) at once
    /// instead of waiting forever. A guard counts as its acquiring
    /// thread's, even once moved to another thread: wait with a timeout
    /// where guards move.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let lock = FileLock::new(dir.path().join("backup.lock"));
    /// let guard = lock.lock()?;
    /// // Waiting for it again on this thread would never end: refused at once.
    /// assert_eq!(lock.lock().unwrap_err().kind(), ErrorKind::Deadlock);
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock(&self) -> io::Result<FileLockGuard> {
        self.acquire(Wait::Forever, false)
    }

    /// Takes the lock if it is free; an error of kind
    /// [`WouldBlock`](io::ErrorKind::WouldBlock) if another process holds it.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("backup.lock");
    /// let _running = FileLock::new(&path).try_lock()?;
    /// // Another lock of the file finds it taken, without waiting:
    /// let second = FileLock::new(&path).try_lock();
    /// assert_eq!(second.unwrap_err().kind(), ErrorKind::WouldBlock);
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_lock(&self) -> io::Result<FileLockGuard> {
        self.acquire(Wait::No, false)
    }

    /// Waits for the shared (read) lock: any number of holders share it,
    /// and it excludes the exclusive lock, both ways. An `fcntl` read lock
    /// on the first byte (`with-lock-ex -l` reports `read PID`, -1 for an
    /// open file description lock), `flock(LOCK_SH)` (as `flock -s` takes
    /// it), or `LockFileEx` without the exclusive flag on Windows; with the
    /// same identity check as the exclusive lock. A shared guard cannot
    /// [`remove`](FileLockGuard::remove) the file: others may hold it too.
    /// The file is opened for writing (and created if missing), as for the
    /// exclusive lock: a read-only file or filesystem is an open error,
    /// where `flock -s` would open it read only.
    /// An `flock` lock on a filesystem without `flock` has no soft
    /// fallback when shared: it fails with the `ENOSYS` error.
    ///
    /// ```no_run
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let config = FileLock::new("/etc/app/config.lock");
    /// let _readers = config.lock_shared()?; // other readers may hold it too
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock_shared(&self) -> io::Result<FileLockGuard> {
        self.acquire(Wait::Forever, true)
    }

    /// Takes the shared lock if no exclusive holder has the lock; an error
    /// of kind [`WouldBlock`](io::ErrorKind::WouldBlock) otherwise.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("config.lock");
    /// let _reader = FileLock::new(&path).try_lock_shared()?;
    /// let _other_reader = FileLock::new(&path).try_lock_shared()?; // readers share it
    /// let writer = FileLock::new(&path).try_lock();
    /// assert_eq!(writer.unwrap_err().kind(), ErrorKind::WouldBlock);
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_lock_shared(&self) -> io::Result<FileLockGuard> {
        self.acquire(Wait::No, true)
    }

    /// Waits up to `timeout` for the shared lock; an error of kind
    /// [`TimedOut`](io::ErrorKind::TimedOut) if an exclusive holder keeps
    /// it.
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use std::time::Duration;
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("config.lock");
    /// let _writer = FileLock::new(&path).lock()?;
    /// let reader = FileLock::new(&path).lock_shared_timeout(Duration::from_millis(50));
    /// assert_eq!(reader.unwrap_err().kind(), ErrorKind::TimedOut);
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock_shared_timeout(&self, timeout: Duration) -> io::Result<FileLockGuard> {
        match Instant::now().checked_add(timeout) {
            Some(deadline) => self.acquire(Wait::Until(deadline), true),
            None => self.acquire(Wait::Forever, true),
        }
    }

    /// Waits up to `timeout` for the lock; an error of kind
    /// [`TimedOut`](io::ErrorKind::TimedOut) if it stays held.
    ///
    /// The kernel has no timed wait for these locks. For a lock that
    /// belongs to its open file (`flock`; `fcntl` on 64-bit Linux and
    /// Android, unless [owned by the process](Self::owned_by_process))
    /// the wait is made in the kernel all the same, on a thread of this
    /// crate that waits in the blocking lock call and hands the lock over,
    /// so this returns as soon as the kernel grants it. A wait that times
    /// out leaves that thread waiting (at most 16 such threads per
    /// process); the next timed wait for the same lock in this process
    /// waits on it, and once the lock is granted with nobody waiting any
    /// more, the thread releases it at once and ends. A classic `fcntl`
    /// lock is the process's, which such a thread would share: its timed
    /// wait polls, as do waits beyond those 16 and on Windows, pausing
    /// 1 ms at first and at most 25 ms between attempts (the
    /// [core's `Backoff`](swaplock_core::kernel::Backoff)).
    ///
    /// ```
    /// use std::io::ErrorKind;
    /// use std::time::Duration;
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("backup.lock");
    /// let _running = FileLock::new(&path).lock()?;
    /// let waited = FileLock::new(&path).lock_timeout(Duration::from_millis(50));
    /// assert_eq!(waited.unwrap_err().kind(), ErrorKind::TimedOut);
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock_timeout(&self, timeout: Duration) -> io::Result<FileLockGuard> {
        match Instant::now().checked_add(timeout) {
            Some(deadline) => self.acquire(Wait::Until(deadline), false),
            None => self.acquire(Wait::Forever, false),
        }
    }

    /// Waits for the lock (up to `timeout`, if given), calling `hook`
    /// while it is held: after the first attempt, then every 100 ms. The
    /// hook can say who holds the lock (`WaitStatus::holder`, on Unix) and
    /// for how long the acquire has waited, for a progress line, and cancel the
    /// wait by returning [`ControlFlow::Break`]: the acquire then fails
    /// with an error of kind [`Interrupted`](io::ErrorKind::Interrupted),
    /// holding nothing. (Another thread cancels by setting a flag the hook
    /// reads.) Without a timeout, a thread that holds the lock through
    /// another guard gets the [`Deadlock`](io::ErrorKind::Deadlock) error,
    /// as from [`lock`](Self::lock).
    ///
    /// ```no_run
    /// use std::ops::ControlFlow;
    /// use std::time::Duration;
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let lock = FileLock::new("/run/lock/backup.lock");
    /// let guard = lock.lock_with(Some(Duration::from_secs(60)), |wait| {
    ///     eprintln!("waited {:.1?} so far", wait.waited());
    ///     #[cfg(unix)]
    ///     if let Ok(Some(h)) = wait.holder() {
    ///         eprintln!("held by pid {}", h.pid);
    ///     }
    ///     ControlFlow::Continue(())
    /// })?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock_with(
        &self,
        timeout: Option<Duration>,
        mut hook: impl FnMut(&WaitStatus<'_>) -> ControlFlow<()>,
    ) -> io::Result<FileLockGuard> {
        /// How often the hook is called while the lock stays held.
        const EVERY: Duration = Duration::from_millis(100);
        let began = Instant::now();
        if timeout.is_none()
            && self.scope(false).excludes_own_process()
            && held_here(self.kind, false, || {
                path_id(&self.sys_path, self.follow_symlinks)
            })
        {
            return Err(self.deadlock());
        }
        let mut wait = Wait::No;
        loop {
            // A soft lock since flock answered ENOSYS: the soft lock's own
            // wait, which logs and calls the hook as a soft wait does.
            #[cfg(unix)]
            if self.soft.load(Ordering::Relaxed) {
                let left = timeout.map(|t| t.saturating_sub(began.elapsed()));
                let guard = SoftLock::soft(&*self.path).lock_with(left, |_| {
                    hook(&WaitStatus {
                        lock: self,
                        waited: began.elapsed(),
                    })
                })?;
                return Ok(FileLockGuard(Inner::Soft(Box::new(guard))));
            }
            debug!(
                "Attempting to acquire lock {} on {}",
                self.log_id(),
                self.path.display()
            );
            let guard = self.acquire_logged(wait, false, false);
            match guard {
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                done => {
                    if done.is_ok() {
                        debug!("Lock {} acquired on {}", self.log_id(), self.path.display());
                    }
                    return done;
                }
            }
            let waited = began.elapsed();
            if hook(&WaitStatus { lock: self, waited }).is_break() {
                debug!(
                    "Cancellation requested for lock {} on {}",
                    self.log_id(),
                    self.path.display()
                );
                let kind = io::ErrorKind::Interrupted;
                let source = io::Error::new(kind, "the wait was cancelled by its hook");
                return Err(LockError::io(&self.path, Step::Lock, kind, source));
            }
            let left = timeout.map(|t| t.saturating_sub(waited));
            if left == Some(Duration::ZERO) {
                debug!(
                    "Timeout on acquiring lock {} on {}",
                    self.log_id(),
                    self.path.display()
                );
                let kind = io::ErrorKind::TimedOut;
                return Err(LockError::io(&self.path, Step::Lock, kind, kind.into()));
            }
            let pause = left.map_or(EVERY, |l| l.min(EVERY));
            debug!(
                "Lock {} not acquired on {}, waiting {} seconds ...",
                self.log_id(),
                self.path.display(),
                pause.as_secs_f64()
            );
            // The next attempt waits that long in the kernel.
            let deadline = Instant::now().checked_add(pause);
            wait = deadline.map_or(Wait::Forever, Wait::Until);
        }
    }

    /// Waits for the lock without blocking the thread, in a tokio runtime
    /// (feature `tokio`). After a first attempt, the wait is made in the
    /// kernel on a thread of this crate, as [`lock_timeout`]'s is, and the
    /// task is woken when the kernel grants the lock; on Windows the task
    /// polls, sleeping between attempts as [`lock_timeout`] pauses.
    ///
    /// Cancel-safe: a future dropped before it returns holds nothing, and
    /// a lock the waiting thread takes for it afterwards is released at
    /// once. For a timeout, wrap it in `tokio::time::timeout`. The runtime
    /// needs its IO and time drivers (`#[tokio::main]`, or
    /// `Builder::enable_all`); outside a runtime the call fails with an
    /// error of kind [`Unsupported`](io::ErrorKind::Unsupported). A task
    /// that awaits a lock it holds waits for ever: unlike [`lock`], no
    /// deadlock is detected, since a task is no thread.
    ///
    /// # Panics
    ///
    /// Where it polls (Windows, classic locks), in a runtime without its
    /// time driver: tokio's timer panics. (tokio cannot be asked whether
    /// a driver is enabled.)
    ///
    /// [`lock_timeout`]: Self::lock_timeout
    /// [`lock`]: Self::lock
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use swaplock::FileLock;
    /// # async fn run() -> std::io::Result<()> {
    /// let lock = FileLock::new("/run/lock/backup.lock");
    /// let guard = tokio::time::timeout(Duration::from_secs(30), lock.lock_async())
    ///     .await
    ///     .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    /// // ... the lock is held ...
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn lock_async(&self) -> io::Result<FileLockGuard> {
        self.acquire_async(false).await
    }

    /// Waits for the shared lock without blocking the thread, as
    /// [`lock_async`](Self::lock_async) waits for the exclusive one.
    #[cfg(feature = "tokio")]
    pub async fn lock_shared_async(&self) -> io::Result<FileLockGuard> {
        self.acquire_async(true).await
    }

    #[cfg(feature = "tokio")]
    async fn acquire_async(&self, shared: bool) -> io::Result<FileLockGuard> {
        use swaplock_core::wait::Patience;
        crate::async_wait::in_runtime(&self.path)?;
        // The pauses where the task polls (Windows; no thread to wait on).
        let mut pauses = swaplock_core::kernel::Backoff::forever();
        loop {
            #[cfg(unix)]
            if self.soft.load(Ordering::Relaxed) && !shared {
                let guard = SoftLock::soft(&*self.path).lock_async().await?;
                return Ok(FileLockGuard(Inner::Soft(Box::new(guard))));
            }
            match self.acquire(Wait::No, shared) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return done,
            }
            // flock answered ENOSYS: a soft lock now, awaited as one (no
            // kernel attempt on it any more).
            #[cfg(unix)]
            if self.soft.load(Ordering::Relaxed) {
                continue;
            }
            #[cfg(unix)]
            if let Some(reached) = kernel_wait::Handover::new(self.job(shared)).await {
                match self.settle(reached, shared, false) {
                    Settled::Done(Err(e)) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Settled::Done(done) => return done,
                    // A soft lock now: awaited as one.
                    Settled::FellBack => continue,
                }
            }
            let pause = pauses
                .busy(&Errno::AGAIN, Duration::ZERO)
                .unwrap_or(swaplock_core::kernel::Backoff::LONGEST);
            tokio::time::sleep(pause).await;
        }
    }

    fn err(&self, step: Step, errno: Errno) -> io::Error {
        LockError::errno(&self.path, step, errno)
    }

    /// The lock object's identity in log messages (filelock's `id(self)`):
    /// the same for its clones and its guards.
    #[cfg(feature = "log")]
    fn log_id(&self) -> usize {
        Arc::as_ptr(&self.path).cast::<u8>() as usize
    }

    /// The error of a wait that could never end: this thread holds the
    /// file already, through another guard.
    fn deadlock(&self) -> io::Error {
        deadlock_error(&self.path)
    }

    fn acquire(&self, wait: Wait, shared: bool) -> io::Result<FileLockGuard> {
        self.acquire_logged(wait, shared, true)
    }

    /// [`acquire`](Self::acquire), logging its attempt and outcome (as
    /// filelock does) only if `logged`: [`lock_with`](Self::lock_with)'s
    /// steps log as one wait.
    fn acquire_logged(&self, wait: Wait, shared: bool, logged: bool) -> io::Result<FileLockGuard> {
        #[cfg(unix)]
        crate::atfork::install();
        #[cfg(unix)]
        if self.soft.load(Ordering::Relaxed) {
            if shared {
                return Err(self.err(Step::Lock, Errno::NOSYS));
            }
            return self.acquire_soft(wait);
        }
        self.check_filesystem()?;
        let scope = self.scope(shared);
        if logged {
            debug!(
                "Attempting to acquire lock {} on {}",
                self.log_id(),
                self.path.display()
            );
        }
        if matches!(wait, Wait::Forever) && scope.excludes_own_process() {
            // This thread waiting for a file it holds would wait forever.
            if held_here(self.kind, shared, || {
                path_id(&self.sys_path, self.follow_symlinks)
            }) {
                return Err(self.deadlock());
            }
        }
        #[cfg(unix)]
        let reached = {
            let job = self.job(shared);
            match wait {
                // A timed wait waits in the kernel, on a thread of its own.
                Wait::Until(deadline) => kernel_wait::until(&job, deadline),
                Wait::No => job.acquire(inodes::Until::No, false, true),
                // A wait in the kernel that answers busy anyway (smbfs)
                // waits on.
                Wait::Forever => job.acquire(inodes::Until::Forever, true, false),
            }
        };
        #[cfg(windows)]
        let reached = {
            let may_fall_back = false;
            let mut kernel = kernel_os(&self.sys_path, self.follow_symlinks, self.mode, scope);
            // The core decides when to try again: never without a wait;
            // after a pause when a wait in the kernel answers busy all the
            // same; until the deadline with one.
            let outcome = match wait {
                Wait::No => {
                    protocol::acquire(&mut kernel, false, may_fall_back, &mut Deadline::once())
                }
                Wait::Forever => {
                    protocol::acquire(&mut kernel, true, may_fall_back, &mut Backoff::forever())
                }
                Wait::Until(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    protocol::acquire(&mut kernel, false, may_fall_back, &mut Backoff::new(left))
                }
            };
            match outcome {
                Ok(Outcome::Held(fd, id)) => Reached::Held(fd, id),
                Ok(Outcome::Busy(e)) => Reached::Busy(e),
                // The Windows adapter never answers ENOSYS.
                Ok(Outcome::Unsupported { .. }) => {
                    Reached::Failed(protocol::Step::Lock, Errno::NOSYS)
                }
                Err((step, e)) => Reached::Failed(step, e),
            }
        };
        #[cfg(feature = "log")]
        match (&reached, wait) {
            _ if !logged => {}
            (Reached::Held(..), _) => {
                debug!("Lock {} acquired on {}", self.log_id(), self.path.display())
            }
            (Reached::Busy(_), Wait::No) => debug!(
                "Failed to immediately acquire lock {} on {}",
                self.log_id(),
                self.path.display()
            ),
            (Reached::Busy(_), _) => debug!(
                "Timeout on acquiring lock {} on {}",
                self.log_id(),
                self.path.display()
            ),
            _ => {}
        }
        match self.settle(reached, shared, matches!(wait, Wait::Until(_))) {
            Settled::Done(result) => result,
            // flock is not available here: this lock is a soft lock now.
            #[cfg(unix)]
            Settled::FellBack => self.acquire_soft(wait),
        }
    }

    /// The guard, or the error, an acquire came to (`timed`: a deadline
    /// passed if the lock stayed busy); or the switch to a soft lock, made.
    /// The guard counts as this thread's ([`held_here`]).
    fn settle(&self, reached: Reached, shared: bool, timed: bool) -> Settled {
        let scope = self.scope(shared);
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let refused = match &reached {
            Reached::Held(fd, id) => {
                use std::os::fd::AsFd;
                self.judge_file(fd.as_fd(), id.dev).err()
            }
            _ => None,
        };
        let guard = Settled::Done(match reached {
            Reached::Held(fd, id) => Ok(FileLockGuard(Inner::Kernel {
                fd,
                pid: std::process::id(),
                registered: scope
                    .excludes_own_process()
                    .then(|| self::register(id, self.kind, shared)),
                scope,
                path: Arc::clone(&self.path),
                sys_path: Arc::clone(&self.sys_path),
                follow_symlinks: self.follow_symlinks,
            })),
            // A deadline passed while the lock stayed held.
            Reached::Busy(_) if timed => {
                let source = io::Error::from(io::ErrorKind::TimedOut);
                Err(LockError::io(
                    &self.path,
                    Step::Lock,
                    io::ErrorKind::TimedOut,
                    source,
                ))
            }
            // One attempt only, and the lock is held.
            Reached::Busy(busy) => {
                let source = crate::error::os_error(busy);
                Err(LockError::io(
                    &self.path,
                    Step::Lock,
                    io::ErrorKind::WouldBlock,
                    source,
                ))
            }
            #[cfg(unix)]
            Reached::Unsupported(file, created) if shared => {
                // The empty file this attempt may have created must not
                // stay: a later exclusive lock's soft fallback would take
                // it for a holder that recorded no PID, for good.
                let _ = SoftLock::soft(&*self.path).fall_back(file, created);
                Err(self.err(Step::Lock, Errno::NOSYS))
            }
            #[cfg(unix)]
            Reached::Unsupported(file, created) => {
                // flock is not available here: the core removes the file
                // this attempt created (never a peer's soft marker), and
                // this lock is a SoftFileLock from now on. A placeholder
                // that could not be removed does not stop the switch.
                let _ = SoftLock::soft(&*self.path).fall_back(file, created);
                self.soft.store(true, Ordering::Relaxed);
                return Settled::FellBack;
            }
            Reached::Failed(step, e) => {
                let step = match step {
                    protocol::Step::Open => Step::Open,
                    protocol::Step::Lock => Step::Lock,
                    protocol::Step::Fstat => Step::Fstat,
                    protocol::Step::Stat => Step::Stat,
                };
                Err(self.err(step, e))
            }
        });
        // A lock taken on a filesystem that keeps it for this client alone
        // is let go at once (the guard's release), and refused.
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(e) = refused {
            drop(guard);
            return Settled::Done(Err(e));
        }
        guard
    }

    /// This lock's acquire, for [`kernel_wait`].
    #[cfg(unix)]
    fn job(&self, shared: bool) -> kernel_wait::Job {
        kernel_wait::Job {
            path: Arc::clone(&self.path),
            sys_path: Arc::clone(&self.sys_path),
            follow: self.follow_symlinks,
            mode: self.mode,
            scope: self.scope(shared),
            // Every flock attempt learns whether it created the file, so
            // that one that meets ENOSYS removes only its own (a shared
            // one too, which then reports ENOSYS: a soft lock has no
            // shared form).
            may_fall_back: self.kind == Kind::Flock,
        }
    }

    #[cfg(unix)]
    fn acquire_soft(&self, wait: Wait) -> io::Result<FileLockGuard> {
        let lock = SoftLock::soft(&*self.path);
        let guard = match wait {
            Wait::No => lock.try_lock(),
            Wait::Forever => lock.lock(),
            Wait::Until(deadline) => {
                lock.lock_timeout(deadline.saturating_duration_since(Instant::now()))
            }
        }?;
        Ok(FileLockGuard(Inner::Soft(Box::new(guard))))
    }

    /// Whether `flock` answered `ENOSYS` here, so this lock is now a soft
    /// lock (filelock's `SoftFileLock`, protocol 1).
    ///
    /// ```no_run
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let lock = FileLock::flock("/mnt/nfs/jobs.lock");
    /// let _guard = lock.lock()?;
    /// if lock.fell_back_to_soft() {
    ///     eprintln!("no flock on this filesystem: holding a SoftFileLock marker instead");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn fell_back_to_soft(&self) -> bool {
        self.soft.load(Ordering::Relaxed)
    }

    /// Who holds the lock now, or `None` when it is free.
    ///
    /// For an `fcntl` lock, as with-lock-ex's `-l` reports it: the lock
    /// that would keep a write lock on the whole file from being taken
    /// (`F_GETLK`). The file must exist (it is opened read only, never
    /// created: an error of step [`Step::Open`] otherwise); a failed query
    /// is of step [`Step::Lock`]. An open file description lock (this
    /// process's own included) is reported with PID -1.
    ///
    /// For an `flock` lock, which has no query call, as the kernel's lock
    /// table (`/proc/locks`) lists it on Linux and Android: an exclusive
    /// holder, else one of the shared ones. Its PID is that of the process
    /// that took the lock, which may have exited since (a child that
    /// inherited the descriptor holds it then). Where the table names no
    /// holder (elsewhere, without `/proc`, or for a holder in a PID
    /// namespace this process cannot see), a probe takes the lock without
    /// waiting, shared and then exclusive, on a descriptor of its own, and
    /// lets it go at once: a holder it finds has PID -1 (unknown), and a
    /// concurrent attempt may find the lock busy meanwhile. A missing file
    /// is free; a filesystem without `flock` answers the `ENOSYS` error.
    ///
    /// For `fcntl`: A classic lock of this process is never seen (it does
    /// not conflict with the query), and closing the query's descriptor
    /// releases it: do not call this in a process that holds a classic
    /// lock on the file (see the [module docs](self)).
    ///
    /// ```no_run
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// match FileLock::new("/run/lock/backup.lock").holder()? {
    ///     None => println!("free"),
    ///     Some(h) if h.shared => println!("read-locked by {}", h.pid),
    ///     Some(h) => println!("held by {}", h.pid),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(unix)]
    pub fn holder(&self) -> io::Result<Option<KernelHolder>> {
        if self.kind == Kind::Flock {
            return self.flock_holder();
        }
        // A descriptor this process keeps for the file (see the module
        // docs) serves, rather than one more kept until the lock's release.
        let kept = path_id(&self.sys_path, self.follow_symlinks)
            .ok()
            .and_then(inodes::take_kept);
        let fd = match kept {
            Some(fd) => fd,
            None => os::open_existing_read_only(&self.sys_path, self.follow_symlinks)
                .map_err(|e| self.err(Step::Open, e))?,
        };
        let conflict = loop {
            match os::fcntl_query(&fd) {
                Ok(conflict) => break conflict,
                Err(e) if e == Errno::INTR => continue,
                Err(e) => {
                    inodes::close(fd);
                    return Err(self.err(Step::Lock, e));
                }
            }
        };
        // Closed through the registry: while this process holds a classic
        // lock on the file, a plain close would release it.
        inodes::close(fd);
        Ok(match conflict {
            os::Conflict::None => None,
            os::Conflict::Write(pid) => Some(KernelHolder { pid, shared: false }),
            os::Conflict::Read(pid) => Some(KernelHolder { pid, shared: true }),
        })
    }

    /// [`holder`](Self::holder) of an `flock` lock: the kernel's lock
    /// table; or, where it names no holder (none, or one this process's PID
    /// namespace cannot see) or there is none, a probe.
    #[cfg(unix)]
    fn flock_holder(&self) -> io::Result<Option<KernelHolder>> {
        let id = match path_id(&self.sys_path, self.follow_symlinks) {
            Ok(id) => id,
            Err(e) if e == Errno::NOENT => return Ok(None),
            Err(e) => return Err(self.err(Step::Stat, e)),
        };
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let listed = os::flock_holders(id);
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(h) = listed.as_ref().and_then(|h| h.first().copied()) {
            return Ok(Some(KernelHolder {
                pid: h.pid,
                shared: h.shared,
            }));
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let listed: Option<()> = None;
        // This process's own holds are known without a probe, whose lock
        // calls could change them where flock is emulated with the
        // process's record locks (NFS).
        let family = Family::of(Kind::Flock);
        for shared in [false, true] {
            let own = |&(h, f, s): &(FileId, Family, bool)| h == id && f == family && s == shared;
            if held::by_this_process(&HELD, own) {
                let pid = std::process::id() as i32;
                return Ok(Some(KernelHolder { pid, shared }));
            }
        }
        // The probe: the lock taken without waiting, shared, then
        // exclusive, on a descriptor of its own, and let go at once.
        let fd = match os::open_existing_read_only(&self.sys_path, self.follow_symlinks) {
            Ok(fd) => fd,
            // Unreadable here: the lock table, which listed no holder,
            // answers.
            Err(e) if listed.is_some() && (e == Errno::ACCES || e == Errno::PERM) => {
                return Ok(None)
            }
            Err(e) => return Err(self.err(Step::Open, e)),
        };
        let held = |shared| match os::flock_take(&fd, false, shared) {
            Ok(()) => os::LockCall::Flock.unlock(&fd).map(|()| false),
            Err(e) if e == Errno::AGAIN => Ok(true),
            Err(e) => Err(e),
        };
        let found = match held(true) {
            Ok(true) => Ok(Some(KernelHolder {
                pid: -1,
                shared: false,
            })),
            Ok(false) => held(false).map(|shared| {
                shared.then_some(KernelHolder {
                    pid: -1,
                    shared: true,
                })
            }),
            Err(e) => Err(e),
        };
        inodes::close(fd);
        found.map_err(|e| self.err(Step::Lock, e))
    }
}

/// The error of a guard used in a child forked while it was held: the
/// lock is the parent's.
#[cfg(unix)]
fn forked(path: &Arc<Path>, step: Step, owner: u32) -> io::Error {
    LockError::forked(path, step, owner, "the lock")
}

/// A held kernel lock (or, after an `flock` `ENOSYS` fallback, a soft
/// lock). Dropping it releases the lock; it owns everything it needs and
/// can move between threads.
#[derive(Debug)]
pub struct FileLockGuard(Inner);

#[derive(Debug)]
enum Inner {
    Kernel {
        fd: LockFile,
        /// Held only to be dropped with the guard, after `fd` (fields drop
        /// in order).
        #[allow(dead_code)]
        registered: Option<Registered<(FileId, Family, bool)>>,
        /// The process that took it: a forked child may not release it.
        pid: u32,
        scope: Scope,
        path: Arc<Path>,
        sys_path: Arc<SysPath>,
        follow_symlinks: bool,
    },
    // Boxed: only the ENOSYS fallback takes this path.
    #[cfg(unix)]
    Soft(Box<SoftLockGuard>),
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
                if pid != std::process::id() {
                    fd.forget_lock();
                    return Err(forked(&path, Step::Unlock, pid));
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
                ..
            } => {
                #[cfg(unix)]
                if pid != std::process::id() {
                    fd.forget_lock();
                    return Err(forked(&path, Step::Remove, pid));
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
                let err = |e| LockError::errno(&path, Step::Remove, e);
                // The mode only matters to an open, which the check makes
                // none of.
                let mut kernel = kernel_os(&sys_path, follow_symlinks, 0, scope);
                #[cfg(unix)]
                protocol::check_remove(&mut kernel, fd.file()).map_err(err)?;
                #[cfg(windows)]
                protocol::check_remove(&mut kernel, &fd).map_err(err)?;
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
            Inner::Soft(guard) => guard.as_fd(),
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
