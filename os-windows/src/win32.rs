//! The leaf of the adapter, which both protocols' calls and the `NtCreateFile`
//! open share: Win32 errors as the `errno` values the core decides on, the
//! identity of an open file, and the clocks.

use std::os::windows::io::{AsHandle, AsRawHandle};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use swaplock_core::decide::{FileId, FileTime, Instant};
use swaplock_core::Errno;
use windows_sys::Win32::Foundation::{
    GetLastError, ERROR_ACCESS_DENIED, ERROR_ALREADY_EXISTS, ERROR_FILE_EXISTS,
    ERROR_FILE_NOT_FOUND, ERROR_INVALID_PARAMETER, ERROR_LOCK_VIOLATION, ERROR_PATH_NOT_FOUND,
    ERROR_SHARING_VIOLATION,
};
use windows_sys::Win32::Storage::FileSystem::{
    GetFileInformationByHandle, BY_HANDLE_FILE_INFORMATION,
};

/// The C runtime's `errno` for the Win32 errors the core decides on (as
/// the CRT's own mapping gives them: a sharing or lock violation is
/// `EACCES`, which the core reads as "busy"); any other Win32 error as its
/// code negated, so it is never mistaken for an `errno` and
/// [`win32_code`] recovers it for the message.
pub fn errno_from_win32(code: u32) -> Errno {
    match code {
        ERROR_FILE_NOT_FOUND | ERROR_PATH_NOT_FOUND => Errno::NOENT,
        ERROR_ACCESS_DENIED | ERROR_SHARING_VIOLATION | ERROR_LOCK_VIOLATION => Errno::ACCES,
        ERROR_FILE_EXISTS | ERROR_ALREADY_EXISTS => Errno::EXIST,
        ERROR_INVALID_PARAMETER => Errno::INVAL,
        // Win32 codes are below 2^16 in practice; a larger one (an
        // HRESULT) is reported as EIO rather than wrapped.
        code => i32::try_from(code).map_or(Errno::IO, |c| Errno::from_raw(-c)),
    }
}

/// The Win32 code an [`Errno`] carries, if [`errno_from_win32`] kept one.
pub fn win32_code(errno: Errno) -> Option<u32> {
    (errno.raw() < 0).then(|| errno.raw().unsigned_abs())
}

pub(crate) fn last_error() -> Errno {
    // SAFETY: GetLastError reads this thread's last-error value.
    errno_from_win32(unsafe { GetLastError() })
}

pub(crate) fn information(handle: impl AsHandle) -> Result<BY_HANDLE_FILE_INFORMATION, Errno> {
    // SAFETY: the all-zero struct is valid; it is filled by the call.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: the handle is open for the call; `info` is writable.
    let ok = unsafe { GetFileInformationByHandle(handle.as_handle().as_raw_handle(), &mut info) };
    if ok == 0 {
        Err(last_error())
    } else {
        Ok(info)
    }
}

fn id_of(info: &BY_HANDLE_FILE_INFORMATION) -> FileId {
    FileId {
        dev: u64::from(info.dwVolumeSerialNumber),
        ino: (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow),
    }
}

/// `GetFileInformationByHandle` — the identity of an open file: its volume
/// serial number and file index.
///
/// # References
/// - [`GetFileInformationByHandle`](https://learn.microsoft.com/en-us/windows/win32/api/fileapi/nf-fileapi-getfileinformationbyhandle)
pub fn handle_id(handle: impl AsHandle) -> Result<FileId, Errno> {
    information(handle).map(|info| id_of(&info))
}

/// `GetSystemTimePreciseAsFileTime` (through std's `SystemTime`): the wall
/// clock, as file times are, as time since the Unix epoch.
///
/// # References
/// - [`GetSystemTimePreciseAsFileTime`](https://learn.microsoft.com/en-us/windows/win32/api/sysinfoapi/nf-sysinfoapi-getsystemtimepreciseasfiletime)
pub fn wall_now() -> FileTime {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    FileTime {
        sec: i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
        nsec: since.subsec_nanos(),
    }
}

/// A monotonic clock reading: time since this process first asked.
pub fn monotonic_now() -> Instant {
    static BASE: OnceLock<std::time::Instant> = OnceLock::new();
    let base = BASE.get_or_init(std::time::Instant::now);
    Instant(u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX))
}
