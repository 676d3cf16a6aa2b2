//! The platform plumbing of kernel locks: paths as the adapter takes them,
//! the adapter's lock calls for a scope, file identities, and the umask.

use super::*;

/// A path as the adapter's calls take it: a C string on POSIX systems
/// (empty when the path holds a NUL, which every call refuses with
/// `ENOENT`), NUL-terminated UTF-16 on Windows.
#[cfg(unix)]
pub(crate) type SysPath = std::ffi::CStr;
#[cfg(windows)]
pub(crate) type SysPath = [u16];

#[cfg(unix)]
pub(super) fn sys_path(path: &Path) -> Arc<SysPath> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes())
        .unwrap_or_default()
        .into()
}

#[cfg(windows)]
pub(super) fn sys_path(path: &Path) -> Arc<SysPath> {
    os::wide_path(path).into()
}

/// The open lock file: a descriptor (released through [`inodes`] where
/// that excludes this process's threads), or a handle on Windows.
#[cfg(unix)]
pub(super) type LockFile = inodes::GuardFd;
#[cfg(windows)]
pub(super) type LockFile = swaplock_windows::kernel::LockHandle;

/// The adapter's kernel-lock operations on one path, which the core's
/// driver runs.
#[cfg(unix)]
pub(crate) fn kernel_os(
    path: &SysPath,
    follow: bool,
    mode: u32,
    scope: Scope,
    names: swaplock_core::kernel::Names,
) -> os::UnixKernel<'_> {
    os::UnixKernel {
        path,
        follow,
        mode,
        call: scope.call(),
        shared: scope.shared,
        names,
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
    pub(super) kind: Kind,
    /// A classic `fcntl` lock, owned by the process
    /// ([`FileLock::owned_by_process`]).
    pub(super) process_owned: bool,
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
pub(super) fn kernel_os(
    path: &SysPath,
    follow: bool,
    mode: u32,
    scope: Scope,
    _names: swaplock_core::kernel::Names,
) -> os::WindowsKernel<'_> {
    os::WindowsKernel {
        path,
        follow,
        mode,
        shared: scope.shared,
    }
}

/// The identity of the file `path` names now.
#[cfg(unix)]
pub(super) fn path_id(path: &SysPath, follow: bool) -> Result<FileId, Errno> {
    os::stat_id(path, follow)
}

#[cfg(windows)]
pub(super) fn path_id(path: &SysPath, follow: bool) -> Result<FileId, Errno> {
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
