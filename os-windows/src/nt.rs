//! `NtCreateFile`, the call every Win32 open is made of, made directly for
//! the one thing `CreateFileW` cannot ask: not to wait for oplock breaks.
//!
//! A file another opener holds an opportunistic lock on (the search
//! indexer, a cloud-files or antivirus filter, another SMB client caching
//! it) makes every conflicting open wait inside the kernel until that
//! opener acknowledges the break: past `try_lock`'s single attempt and
//! past `lock_timeout`'s deadline. With `FILE_COMPLETE_IF_OPLOCKED` the
//! open completes at once and answers `STATUS_OPLOCK_BREAK_IN_PROGRESS`
//! (a success status, with a usable handle) instead. filelock 4.2.11 opens
//! its Windows lock files this way too (PROTOCOL 7.18), and takes the
//! answer as contention.
//!
//! # References
//! - [`NtCreateFile`](https://learn.microsoft.com/en-us/windows/win32/api/winternl/nf-winternl-ntcreatefile)
//!   (`FILE_COMPLETE_IF_OPLOCKED`: "If the file is oplocked, the create
//!   completes with `STATUS_OPLOCK_BREAK_IN_PROGRESS` instead of waiting")
//! - [Opportunistic locks](https://learn.microsoft.com/en-us/windows/win32/fileio/opportunistic-locks)

use crate::win32::errno_from_win32;
use std::os::windows::io::{FromRawHandle, OwnedHandle};
use swaplock_core::Errno;
use windows_sys::Wdk::Foundation::OBJECT_ATTRIBUTES;
use windows_sys::Wdk::Storage::FileSystem::{
    NtCreateFile, FILE_COMPLETE_IF_OPLOCKED, FILE_SYNCHRONOUS_IO_NONALERT,
};
use windows_sys::Win32::Foundation::{
    RtlNtStatusToDosError, NTSTATUS, OBJ_CASE_INSENSITIVE, STATUS_OPLOCK_BREAK_IN_PROGRESS,
    UNICODE_STRING,
};
use windows_sys::Win32::Storage::FileSystem::{
    GetFullPathNameW, FILE_READ_ATTRIBUTES, SYNCHRONIZE,
};
use windows_sys::Win32::System::IO::IO_STATUS_BLOCK;

/// `STATUS_SHARING_VIOLATION`: the file is open elsewhere without the
/// sharing asked for.
pub(crate) const STATUS_SHARING_VIOLATION: NTSTATUS = 0xC000_0043_u32 as NTSTATUS;
/// `STATUS_DELETE_PENDING`: the file is being deleted, once its last
/// handle closes.
pub(crate) const STATUS_DELETE_PENDING: NTSTATUS = 0xC000_0056_u32 as NTSTATUS;

/// An open's answer.
#[derive(Debug)]
pub(crate) enum Opened {
    /// Opened.
    Handle(OwnedHandle),
    /// Opened, but another opener's oplock is being broken: the handle is
    /// usable, and the opener has not acknowledged yet.
    BreakInProgress(OwnedHandle),
}

/// `NtCreateFile(nt_path, access|SYNCHRONIZE|FILE_READ_ATTRIBUTES,
/// OBJ_CASE_INSENSITIVE, attributes, share, disposition,
/// options|FILE_SYNCHRONOUS_IO_NONALERT|FILE_COMPLETE_IF_OPLOCKED)`: as
/// `CreateFileW` opens (it adds the same access and case rule), but never
/// waiting for an oplock break. `nt_path` is an NT path (`\??\C:\...`,
/// [`nt_path_of`]) without a terminating NUL; `disposition` and `options`
/// are `NtCreateFile`'s (`FILE_OPEN_IF`, `FILE_OPEN_REPARSE_POINT`, ...).
/// A failure is its NTSTATUS.
pub(crate) fn create(
    nt_path: &[u16],
    access: u32,
    attributes: u32,
    share: u32,
    disposition: u32,
    options: u32,
) -> Result<Opened, NTSTATUS> {
    const STATUS_NAME_TOO_LONG: NTSTATUS = 0xC000_0106_u32 as NTSTATUS;
    let bytes = u16::try_from(nt_path.len() * 2).map_err(|_| STATUS_NAME_TOO_LONG)?;
    let name = UNICODE_STRING {
        Length: bytes,
        MaximumLength: bytes,
        Buffer: nt_path.as_ptr().cast_mut(),
    };
    let object = OBJECT_ATTRIBUTES {
        Length: core::mem::size_of::<OBJECT_ATTRIBUTES>() as u32,
        RootDirectory: std::ptr::null_mut(),
        ObjectName: &name,
        Attributes: OBJ_CASE_INSENSITIVE,
        SecurityDescriptor: std::ptr::null(),
        SecurityQualityOfService: std::ptr::null(),
    };
    let mut handle = std::ptr::null_mut();
    let mut io = IO_STATUS_BLOCK::default();
    // SAFETY: every pointer is valid for the call: `name` borrows
    // `nt_path`, which outlives it, with its length in bytes; `handle` and
    // `io` are writable; no allocation size and no extended attributes.
    let status = unsafe {
        NtCreateFile(
            &mut handle,
            access | SYNCHRONIZE | FILE_READ_ATTRIBUTES,
            &object,
            &mut io,
            std::ptr::null(),
            attributes,
            share,
            disposition,
            options | FILE_SYNCHRONOUS_IO_NONALERT | FILE_COMPLETE_IF_OPLOCKED,
            std::ptr::null(),
            0,
        )
    };
    if status < 0 {
        return Err(status);
    }
    // SAFETY: a success status comes with a valid handle nothing else owns.
    let handle = unsafe { OwnedHandle::from_raw_handle(handle) };
    Ok(if status == STATUS_OPLOCK_BREAK_IN_PROGRESS {
        Opened::BreakInProgress(handle)
    } else {
        Opened::Handle(handle)
    })
}

/// The `errno` of a failed open, through its Win32 error, as `CreateFileW`
/// would have reported it.
pub(crate) fn errno(status: NTSTATUS) -> Errno {
    // SAFETY: a pure conversion of a status value.
    errno_from_win32(unsafe { RtlNtStatusToDosError(status) })
}

/// The NT path of a full DOS path (UTF-16, with or without its NUL): a
/// verbatim (`\\?\`) or device (`\\.\`) path keeps what follows its
/// prefix, a UNC path (`\\server\share`) goes under `\??\UNC\`, a drive
/// path under `\??\`. No NUL is kept.
pub(crate) fn nt_path_of(dos: &[u16]) -> Vec<u16> {
    let dos = match dos.iter().position(|&c| c == 0) {
        Some(nul) => &dos[..nul],
        None => dos,
    };
    let wide = |s: &str| s.encode_utf16().collect::<Vec<u16>>();
    let (prefix, rest) = if dos.starts_with(&wide(r"\\?\")) || dos.starts_with(&wide(r"\\.\")) {
        (wide(r"\??\"), &dos[4..])
    } else if dos.starts_with(&wide(r"\\")) {
        (wide(r"\??\UNC\"), &dos[2..])
    } else {
        (wide(r"\??\"), dos)
    };
    let mut nt = prefix;
    nt.extend_from_slice(rest);
    nt
}

/// The full DOS path of `path` (UTF-16, NUL-terminated), without a NUL:
/// a relative path is resolved against the current directory.
///
/// # References
/// - [`GetFullPathNameW`](https://learn.microsoft.com/en-us/windows/win32/api/fileapi/nf-fileapi-getfullpathnamew)
pub(crate) fn full_path(path: &[u16]) -> Result<Vec<u16>, Errno> {
    let mut buf = vec![0u16; 512];
    let len = loop {
        let cap = u32::try_from(buf.len()).map_err(|_| Errno::INVAL)?;
        // SAFETY: `path` is NUL-terminated; `buf` holds `cap` units.
        let n =
            unsafe { GetFullPathNameW(path.as_ptr(), cap, buf.as_mut_ptr(), std::ptr::null_mut()) };
        match n {
            0 => return Err(crate::win32::last_error()),
            n if (n as usize) < buf.len() => break n as usize,
            n => buf.resize(n as usize + 1, 0),
        }
    };
    buf.truncate(len);
    Ok(buf)
}
