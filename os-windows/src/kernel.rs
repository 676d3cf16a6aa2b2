//! The Win32 calls of the kernel-lock protocol: `CreateFileW`, `LockFileEx`
//! on byte 0, and the identity of a handle and of a path.

use crate::nt;
use crate::win32::{information, last_error};
use std::os::windows::io::{AsHandle, AsRawHandle, BorrowedHandle, FromRawHandle, OwnedHandle};
use std::time::Duration;
use swaplock_core::decide::{FileId, FileTime, Instant};
use swaplock_core::Errno;
use windows_sys::Win32::Foundation::{
    GetLastError, ERROR_NOT_LOCKED, ERROR_SHARING_VIOLATION, GENERIC_READ, GENERIC_WRITE, HANDLE,
    INVALID_HANDLE_VALUE,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, DeleteFileW, LockFileEx, UnlockFileEx, FILE_ATTRIBUTE_NORMAL,
    FILE_ATTRIBUTE_READONLY, FILE_ATTRIBUTE_REPARSE_POINT, FILE_FLAG_BACKUP_SEMANTICS,
    FILE_FLAG_OPEN_REPARSE_POINT, FILE_READ_ATTRIBUTES, FILE_SHARE_DELETE, FILE_SHARE_READ,
    FILE_SHARE_WRITE, LOCKFILE_EXCLUSIVE_LOCK, LOCKFILE_FAIL_IMMEDIATELY, OPEN_EXISTING,
};
use windows_sys::Win32::System::IO::OVERLAPPED;

pub use crate::win32::{errno_from_win32, handle_id, win32_code};

/// A path as `CreateFileW` takes it: UTF-16, NUL-terminated. A path with a
/// NUL inside gives an empty name, which every call refuses.
pub fn wide_path(path: &std::path::Path) -> Vec<u16> {
    use std::os::windows::ffi::OsStrExt;
    let mut wide: Vec<u16> = path.as_os_str().encode_wide().collect();
    if wide.contains(&0) {
        wide.clear();
    }
    wide.push(0);
    wide
}

pub(crate) fn owned(handle: HANDLE) -> Result<OwnedHandle, Errno> {
    if handle == INVALID_HANDLE_VALUE {
        Err(last_error())
    } else {
        // SAFETY: CreateFileW returned a valid handle that nothing else owns.
        Ok(unsafe { OwnedHandle::from_raw_handle(handle) })
    }
}

/// `NtCreateFile(path, GENERIC_READ|GENERIC_WRITE, FILE_SHARE_READ|FILE_SHARE_WRITE,
/// FILE_OPEN_IF or FILE_CREATE, FILE_NON_DIRECTORY_FILE|FILE_COMPLETE_IF_OPLOCKED
/// [|FILE_OPEN_REPARSE_POINT])` — open or create a lock file, never
/// truncating it, and never waiting for an oplock break (`crate::nt`): the
/// open `CreateFileW` makes, with that one option added, as filelock opens
/// its lock files.
///
/// Without delete sharing, nobody can delete or rename the file while it is
/// open here. Without `follow`, a reparse point (a symlink or junction) at
/// the path fails with `ELOOP`, as `O_NOFOLLOW` does. A `mode` without the
/// owner's write bit creates a read-only file. `exclusive` fails with
/// `EEXIST` unless this call creates the file.
///
/// Three answers mean a peer's work refuses the open for now, not that it
/// cannot be done, and are `EAGAIN`, which the core takes as contention
/// and waits out (filelock retries them too): the file is open elsewhere
/// without the sharing we ask (`STATUS_SHARING_VIOLATION`: an indexer, a
/// virus scanner, another SMB client), it is being deleted
/// (`STATUS_DELETE_PENDING`: a peer's `remove`, until its last handle
/// closes), or another opener's oplock is being broken
/// (`STATUS_OPLOCK_BREAK_IN_PROGRESS`; the handle is closed). Any other
/// failure is reported as `CreateFileW` reports it (a read-only file or an
/// ACL: `EACCES`).
///
/// # References
/// - [`NtCreateFile`](https://learn.microsoft.com/en-us/windows/win32/api/winternl/nf-winternl-ntcreatefile)
/// - [`DeleteFileW`](https://learn.microsoft.com/en-us/windows/win32/api/fileapi/nf-fileapi-deletefilew)
///   (remarks: the file is deleted when its last handle closes; opens
///   fail meanwhile)
pub fn open_lock_file(
    path: &[u16],
    follow: bool,
    mode: u32,
    exclusive: bool,
) -> Result<OwnedHandle, Errno> {
    use windows_sys::Wdk::Storage::FileSystem::{FILE_CREATE, FILE_OPEN_IF};
    open_with(
        path,
        follow,
        mode,
        if exclusive { FILE_CREATE } else { FILE_OPEN_IF },
    )
}

/// [`open_lock_file`] of a file that exists, never creating it (`ENOENT`
/// otherwise).
pub fn open_existing_lock_file(path: &[u16], follow: bool) -> Result<OwnedHandle, Errno> {
    use windows_sys::Wdk::Storage::FileSystem::FILE_OPEN;
    open_with(path, follow, 0o600, FILE_OPEN)
}

/// The open of [`open_lock_file`], with the create disposition given.
fn open_with(
    path: &[u16],
    follow: bool,
    mode: u32,
    disposition: u32,
) -> Result<OwnedHandle, Errno> {
    use windows_sys::Wdk::Storage::FileSystem::{FILE_NON_DIRECTORY_FILE, FILE_OPEN_REPARSE_POINT};
    let attributes = if mode & 0o200 == 0 {
        FILE_ATTRIBUTE_READONLY
    } else {
        FILE_ATTRIBUTE_NORMAL
    };
    let mut options = FILE_NON_DIRECTORY_FILE;
    if !follow {
        options |= FILE_OPEN_REPARSE_POINT;
    }
    let nt_path = nt::nt_path_of(&nt::full_path(path)?);
    let opened = nt::create(
        &nt_path,
        GENERIC_READ | GENERIC_WRITE,
        attributes,
        FILE_SHARE_READ | FILE_SHARE_WRITE,
        disposition,
        options,
    );
    let handle = match opened {
        Ok(nt::Opened::Handle(handle)) => handle,
        Ok(nt::Opened::BreakInProgress(handle)) => {
            drop(handle);
            return Err(Errno::AGAIN);
        }
        Err(nt::STATUS_SHARING_VIOLATION | nt::STATUS_DELETE_PENDING) => return Err(Errno::AGAIN),
        Err(status) => return Err(nt::errno(status)),
    };
    if !follow && information(&handle)?.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT != 0 {
        return Err(Errno::LOOP);
    }
    Ok(handle)
}

fn byte_zero() -> OVERLAPPED {
    // The all-zero OVERLAPPED names offset 0 and no event.
    // SAFETY: OVERLAPPED is plain data; all-zero is valid.
    unsafe { std::mem::zeroed() }
}

/// `LockFileEx(handle, LOCKFILE_EXCLUSIVE_LOCK[|LOCKFILE_FAIL_IMMEDIATELY],
/// byte 0, length 1)` — take the exclusive lock on the first byte.
///
/// Without `wait` a held lock fails with `EACCES` (Win32's
/// `ERROR_LOCK_VIOLATION`). The lock belongs to this handle: other handles,
/// in this process too, are excluded.
///
/// # References
/// - [`LockFileEx`](https://learn.microsoft.com/en-us/windows/win32/api/fileapi/nf-fileapi-lockfileex)
pub fn lock_byte0(handle: impl AsHandle, wait: bool) -> Result<(), Errno> {
    take_byte0(handle, wait, false)
}

/// [`lock_byte0`], or with `shared` the shared lock on the first byte
/// (`LockFileEx` without `LOCKFILE_EXCLUSIVE_LOCK`), which other shared
/// locks share and an exclusive one excludes.
pub fn take_byte0(handle: impl AsHandle, wait: bool, shared: bool) -> Result<(), Errno> {
    let mut flags = if shared { 0 } else { LOCKFILE_EXCLUSIVE_LOCK };
    if !wait {
        flags |= LOCKFILE_FAIL_IMMEDIATELY;
    }
    let mut at = byte_zero();
    // SAFETY: the handle is open and synchronous, so the call completes
    // before returning and `at` outlives it.
    let ok = unsafe { LockFileEx(handle.as_handle().as_raw_handle(), flags, 0, 1, 0, &mut at) };
    if ok == 0 {
        Err(last_error())
    } else {
        Ok(())
    }
}

/// `UnlockFileEx(handle, byte 0, length 1)` — release the lock; a lock
/// already gone (`ERROR_NOT_LOCKED`) is not an error.
///
/// # References
/// - [`UnlockFileEx`](https://learn.microsoft.com/en-us/windows/win32/api/fileapi/nf-fileapi-unlockfileex)
pub fn unlock_byte0(handle: impl AsHandle) -> Result<(), Errno> {
    let mut at = byte_zero();
    // SAFETY: as for LockFileEx.
    let ok = unsafe { UnlockFileEx(handle.as_handle().as_raw_handle(), 0, 1, 0, &mut at) };
    // SAFETY: GetLastError reads this thread's last-error value.
    if ok == 0 && unsafe { GetLastError() } != ERROR_NOT_LOCKED {
        Err(last_error())
    } else {
        Ok(())
    }
}

/// The identity of the file a path names now: `CreateFileW` for attributes
/// only, sharing everything (so it never disturbs a holder), then
/// [`handle_id`]. Without `follow`, a reparse point is not followed.
pub fn path_id(path: &[u16], follow: bool) -> Result<FileId, Errno> {
    let mut flags = FILE_FLAG_BACKUP_SEMANTICS;
    if !follow {
        flags |= FILE_FLAG_OPEN_REPARSE_POINT;
    }
    // SAFETY: as in open_lock_file.
    let handle = owned(unsafe {
        CreateFileW(
            path.as_ptr(),
            FILE_READ_ATTRIBUTES,
            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
            std::ptr::null(),
            OPEN_EXISTING,
            flags,
            std::ptr::null_mut(),
        )
    })?;
    handle_id(&handle)
}

/// `DeleteFileW(path)` — remove a name unless a process has the file open:
/// `Ok(false)` when one does (`ERROR_SHARING_VIOLATION`, as every lock
/// holder and waiter keeps it open), and nothing was removed. Any other
/// failure, such as `ERROR_ACCESS_DENIED` for a read-only file, is an error.
///
/// # References
/// - [`DeleteFileW`](https://learn.microsoft.com/en-us/windows/win32/api/fileapi/nf-fileapi-deletefilew)
pub fn unlink_unless_open(path: &[u16]) -> Result<bool, Errno> {
    // SAFETY: `path` is NUL-terminated UTF-16.
    if unsafe { DeleteFileW(path.as_ptr()) } != 0 {
        return Ok(true);
    }
    // SAFETY: GetLastError reads this thread's last-error value.
    match unsafe { GetLastError() } {
        ERROR_SHARING_VIOLATION => Ok(false),
        code => Err(errno_from_win32(code)),
    }
}

/// The kernel-lock operations on one path, for
/// [`swaplock_core::kernel::attempt`], with the clocks and the pause
/// [`swaplock_core::kernel::acquire`] waits on.
#[derive(Clone, Copy, Debug)]
pub struct WindowsKernel<'p> {
    /// The lock file's path, NUL-terminated UTF-16 ([`wide_path`]).
    pub path: &'p [u16],
    /// Whether a reparse point at the path is followed.
    pub follow: bool,
    /// The mode a created file gets: only the owner's write bit counts.
    pub mode: u32,
    /// Whether it is the shared lock rather than the exclusive one.
    pub shared: bool,
}

/// An open lock file whose drop releases the lock on byte 0 before it
/// closes the handle: Windows releases a lock when its handle closes, but
/// Microsoft documents that this may happen only after a delay, so a peer
/// waiting for it could wait longer than the hold.
///
/// # References
/// - [`LockFileEx`](https://learn.microsoft.com/en-us/windows/win32/api/fileapi/nf-fileapi-lockfileex)
///   (remarks: "the time it takes for the operating system to unlock these
///   locks depends upon available system resources")
#[derive(Debug)]
pub struct LockHandle(OwnedHandle);

impl AsHandle for LockHandle {
    fn as_handle(&self) -> std::os::windows::io::BorrowedHandle<'_> {
        self.0.as_handle()
    }
}

impl Drop for LockHandle {
    fn drop(&mut self) {
        // A handle that holds no lock answers ERROR_NOT_LOCKED, which
        // unlock_byte0 ignores; any other failure leaves the close to
        // release it.
        let _ = unlock_byte0(&self.0);
    }
}

impl swaplock_core::kernel::KernelOs for WindowsKernel<'_> {
    type File = LockHandle;

    fn open(&mut self, exclusive: bool) -> Result<LockHandle, Errno> {
        open_lock_file(self.path, self.follow, self.mode, exclusive).map(LockHandle)
    }

    fn open_existing(&mut self) -> Result<LockHandle, Errno> {
        open_existing_lock_file(self.path, self.follow).map(LockHandle)
    }

    fn lock(&mut self, file: &LockHandle, wait: bool) -> Result<(), Errno> {
        take_byte0(file, wait, self.shared)
    }

    fn fstat(&mut self, file: &LockHandle) -> Result<FileId, Errno> {
        handle_id(file)
    }

    fn stat(&mut self) -> Result<FileId, Errno> {
        path_id(self.path, self.follow)
    }

    fn close(&mut self, file: LockHandle) {
        drop(file);
    }
}

/// The clocks and the pause of the kernel-lock drivers, the same for each.
macro_rules! system_clock {
    ($kernel:ty) => {
        impl swaplock_core::wait::Clock for $kernel {
            /// `QueryPerformanceCounter` (through std's monotonic `Instant`).
            ///
            /// # References
            /// - [`QueryPerformanceCounter`](https://learn.microsoft.com/en-us/windows/win32/api/profileapi/nf-profileapi-queryperformancecounter)
            fn now(&mut self) -> Instant {
                crate::win32::monotonic_now()
            }

            /// `GetSystemTimePreciseAsFileTime` (through std's `SystemTime`),
            /// as time since the Unix epoch.
            ///
            /// # References
            /// - [`GetSystemTimePreciseAsFileTime`](https://learn.microsoft.com/en-us/windows/win32/api/sysinfoapi/nf-sysinfoapi-getsystemtimepreciseasfiletime)
            fn wall(&mut self) -> FileTime {
                crate::win32::wall_now()
            }

            /// `Sleep` — pause this thread.
            ///
            /// # References
            /// - [`Sleep`](https://learn.microsoft.com/en-us/windows/win32/api/synchapi/nf-synchapi-sleep)
            fn sleep(&mut self, duration: Duration) {
                std::thread::sleep(duration);
            }
        }
    };
}

system_clock!(WindowsKernel<'_>);

/// The kernel-lock operations on a file the caller opened, for
/// [`swaplock_core::kernel::acquire`]: each attempt locks a duplicate of
/// its handle (the same file object, which owns the lock), and the path
/// check compares the file with itself, as there is no path.
#[derive(Clone, Copy, Debug)]
pub struct OpenWindowsKernel<'f> {
    /// The caller's file.
    pub file: BorrowedHandle<'f>,
    /// Whether it is the shared lock rather than the exclusive one.
    pub shared: bool,
}

impl swaplock_core::kernel::KernelOs for OpenWindowsKernel<'_> {
    type File = LockHandle;

    /// `DuplicateHandle` of the caller's file.
    ///
    /// # References
    /// - [`DuplicateHandle`](https://learn.microsoft.com/en-us/windows/win32/api/handleapi/nf-handleapi-duplicatehandle)
    fn open(&mut self, _exclusive: bool) -> Result<LockHandle, Errno> {
        self.file
            .try_clone_to_owned()
            .map(LockHandle)
            .map_err(|e| errno_from_win32(e.raw_os_error().map_or(0, |c| c as u32)))
    }

    /// As `open`: the caller's file always exists.
    fn open_existing(&mut self) -> Result<LockHandle, Errno> {
        self.open(false)
    }

    fn lock(&mut self, file: &LockHandle, wait: bool) -> Result<(), Errno> {
        take_byte0(file, wait, self.shared)
    }

    fn fstat(&mut self, file: &LockHandle) -> Result<FileId, Errno> {
        handle_id(file)
    }

    /// The identity of the caller's file.
    fn stat(&mut self) -> Result<FileId, Errno> {
        handle_id(self.file)
    }

    fn close(&mut self, file: LockHandle) {
        drop(file);
    }
}

system_clock!(OpenWindowsKernel<'_>);
