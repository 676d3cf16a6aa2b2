//! The soft-lock protocol's operations on Windows: each method of
//! [`swaplock_core::soft::Os`] as one Win32 call on a name in the lock's
//! directory, under [`Semantics::Handles`](swaplock_core::soft::Semantics::Handles).
//!
//! What makes soft locks safe here is the sharing mode of every handle:
//! - a marker is created with delete access, sharing read and write but not
//!   delete, and stays open for the whole hold, so nobody else can rename
//!   or delete it, or even open it with delete access, while its holder
//!   lives (filelock's markers are held the same way);
//! - a read shares everything, so it never disturbs a holder;
//! - a pin asks for delete access and so opens only a marker nobody holds,
//!   and shares read and write but not delete, so a second breaker's pin
//!   of the same file is refused while the first one breaks it;
//! - a stale marker is renamed aside and deleted through the pin
//!   (`SetFileInformationByHandle`), and our own marker is deleted through
//!   the handle we hold it by.
//!
//! Names are the core's bytes, read as UTF-8.

use crate::nt;
use crate::win32::{errno_from_win32, handle_id, information, last_error};
use std::os::windows::io::{AsHandle, AsRawHandle, OwnedHandle};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use swaplock_core::decide::{FileTime, Instant, Liveness};
use swaplock_core::host::HostName;
use swaplock_core::names::Token;
use swaplock_core::soft::{self, Clock, Entropy, Handles, NodeKind, Processes, Stat};
use swaplock_core::start::StartToken;
use swaplock_core::{Decimal, Errno, Pid};
use windows_sys::Win32::Foundation::{
    CloseHandle, GetLastError, ERROR_INVALID_PARAMETER, ERROR_NO_MORE_FILES, FILETIME,
    GENERIC_READ, GENERIC_WRITE, HANDLE, INVALID_HANDLE_VALUE, WAIT_OBJECT_0,
};
use windows_sys::Win32::Security::Cryptography::{
    BCryptGenRandom, BCRYPT_USE_SYSTEM_PREFERRED_RNG,
};
use windows_sys::Win32::Storage::FileSystem::{
    DeleteFileW, FileBasicInfo, FileDispositionInfo, FileEndOfFileInfo, FileRenameInfo,
    FileStandardInfo, FindClose, FindFirstFileW, FindNextFileW, GetFileInformationByHandleEx,
    MoveFileExW, ReadFile, SetFileInformationByHandle, SetFileTime, WriteFile, CREATE_NEW, DELETE,
    FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_NORMAL, FILE_ATTRIBUTE_READONLY,
    FILE_ATTRIBUTE_REPARSE_POINT, FILE_BASIC_INFO, FILE_DISPOSITION_INFO, FILE_END_OF_FILE_INFO,
    FILE_FLAG_OPEN_REPARSE_POINT, FILE_READ_ATTRIBUTES, FILE_RENAME_INFO, FILE_SHARE_DELETE,
    FILE_SHARE_READ, FILE_SHARE_WRITE, FILE_STANDARD_INFO, FILE_WRITE_ATTRIBUTES,
    MOVEFILE_REPLACE_EXISTING, OPEN_EXISTING, SYNCHRONIZE, WIN32_FIND_DATAW,
};
use windows_sys::Win32::System::SystemInformation::{
    ComputerNamePhysicalDnsHostname, GetComputerNameExW,
};
use windows_sys::Win32::System::Threading::{
    GetCurrentProcessId, GetProcessTimes, OpenProcess, WaitForSingleObject,
    PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SYNCHRONIZE,
};
use windows_sys::Win32::System::IO::OVERLAPPED;

pub use crate::win32::{monotonic_now, wall_now};

const SHARE_ALL: u32 = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;

fn check(ok: i32) -> Result<(), Errno> {
    if ok == 0 {
        Err(last_error())
    } else {
        Ok(())
    }
}

/// The lock's directory: its full path, which every name is joined to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dir {
    /// The directory's full path (`GetFullPathNameW`), UTF-16, without a
    /// trailing separator or NUL.
    full: Vec<u16>,
}

impl Dir {
    /// `dir\name`, NUL-terminated; `EINVAL` for a name that is not UTF-8
    /// or holds a NUL or separator.
    fn join(&self, name: &[u8]) -> Result<Vec<u16>, Errno> {
        let name = core::str::from_utf8(name).map_err(|_| Errno::INVAL)?;
        if name.is_empty() || name.contains(['\0', '\\', '/']) {
            return Err(Errno::INVAL);
        }
        let mut path = self.full.clone();
        // A drive's root keeps its separator (`C:\`): no second one, which
        // an NT path would read as an empty component.
        if path.last() != Some(&u16::from(b'\\')) {
            path.push(u16::from(b'\\'));
        }
        path.extend(name.encode_utf16());
        path.push(0);
        Ok(path)
    }

    /// The NT path of `dir\name`, as `FileRenameInfo` takes it (`\??\C:\…`
    /// or `\??\UNC\server\share\…`), without a NUL.
    fn nt_path(&self, name: &[u8]) -> Result<Vec<u16>, Errno> {
        Ok(nt::nt_path_of(&self.join(name)?))
    }
}

/// Resolves the lock's directory (`path`: UTF-16, NUL-terminated) to its
/// full path, and checks that it is a directory (`ENOENT` if missing,
/// `ENOTDIR` if not one).
///
/// # References
/// - [`GetFullPathNameW`](https://learn.microsoft.com/en-us/windows/win32/api/fileapi/nf-fileapi-getfullpathnamew)
pub fn open_dir(path: &[u16]) -> Result<Dir, Errno> {
    let mut buf = nt::full_path(path)?;
    while buf.len() > 3 && buf.last() == Some(&u16::from(b'\\')) {
        buf.pop();
    }
    let mut probe = buf.clone();
    probe.push(0);
    let handle = open(&probe, FILE_READ_ATTRIBUTES, SHARE_ALL, OPEN_EXISTING, 0)?;
    if information(&handle)?.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY == 0 {
        return Err(Errno::NOTDIR);
    }
    Ok(Dir { full: buf })
}

/// Opens `path` (a full DOS path, NUL-terminated) as `CreateFileW` with
/// backup semantics would (so a directory opens too), with its Win32
/// `disposition` and `flags` (`FILE_FLAG_OPEN_REPARSE_POINT` and file
/// attributes), but through `NtCreateFile`, so that it never waits for
/// another opener's oplock to be broken ([`nt`]): an open that meets a
/// break in progress keeps its handle, which reads and attribute queries
/// may use, and errors are the ones `CreateFileW` reports.
fn open(
    path: &[u16],
    access: u32,
    share: u32,
    disposition: u32,
    flags: u32,
) -> Result<OwnedHandle, Errno> {
    use windows_sys::Wdk::Storage::FileSystem::{
        FILE_CREATE, FILE_OPEN, FILE_OPEN_FOR_BACKUP_INTENT, FILE_OPEN_IF, FILE_OPEN_REPARSE_POINT,
    };
    let disposition = match disposition {
        CREATE_NEW => FILE_CREATE,
        OPEN_EXISTING => FILE_OPEN,
        _ => FILE_OPEN_IF,
    };
    let mut options = FILE_OPEN_FOR_BACKUP_INTENT;
    if flags & FILE_FLAG_OPEN_REPARSE_POINT != 0 {
        options |= FILE_OPEN_REPARSE_POINT;
    }
    let attributes = flags & 0xFFFF;
    match nt::create(
        &nt::nt_path_of(path),
        access,
        attributes,
        share,
        disposition,
        options,
    ) {
        Ok(nt::Opened::Handle(h) | nt::Opened::BreakInProgress(h)) => Ok(h),
        Err(status) => Err(nt::errno(status)),
    }
}

fn raw(handle: &impl AsHandle) -> HANDLE {
    handle.as_handle().as_raw_handle()
}

fn info_ex<T: Default>(handle: &impl AsHandle, class: i32) -> Result<T, Errno> {
    let mut out = T::default();
    let size = u32::try_from(core::mem::size_of::<T>()).map_err(|_| Errno::INVAL)?;
    // SAFETY: `out` is a writable `T` of `size` bytes, the struct `class`
    // fills.
    check(unsafe {
        GetFileInformationByHandleEx(raw(handle), class, (&raw mut out).cast(), size)
    })?;
    Ok(out)
}

fn set_info<T>(handle: &impl AsHandle, class: i32, value: &T, size: usize) -> Result<(), Errno> {
    let size = u32::try_from(size).map_err(|_| Errno::INVAL)?;
    // SAFETY: `value` points to at least `size` readable bytes laid out as
    // `class` requires.
    check(unsafe {
        SetFileInformationByHandle(raw(handle), class, (value as *const T).cast(), size)
    })
}

/// 100 ns ticks since 1601 as a file time since 1970.
fn file_time(ticks: i64) -> FileTime {
    const EPOCH_DIFF: i64 = 116_444_736_000_000_000;
    let since = ticks - EPOCH_DIFF;
    FileTime {
        sec: since.div_euclid(10_000_000),
        nsec: (since.rem_euclid(10_000_000) * 100) as u32,
    }
}

/// The protocol's view of an open file: identity from the volume serial
/// and file index, times from `FILE_BASIC_INFO` (the change time included),
/// and no links once a delete is pending.
fn stat_handle(handle: &impl AsHandle) -> Result<Stat, Errno> {
    let id = handle_id(handle)?;
    let basic: FILE_BASIC_INFO = info_ex(handle, FileBasicInfo)?;
    let standard: FILE_STANDARD_INFO = info_ex(handle, FileStandardInfo)?;
    let kind = if basic.FileAttributes & FILE_ATTRIBUTE_REPARSE_POINT != 0 {
        NodeKind::Symlink
    } else if basic.FileAttributes & FILE_ATTRIBUTE_DIRECTORY != 0 {
        NodeKind::Directory
    } else {
        NodeKind::Regular
    };
    Ok(Stat {
        id,
        kind,
        nlink: if standard.DeletePending {
            0
        } else {
            u64::from(standard.NumberOfLinks)
        },
        mtime: file_time(basic.LastWriteTime),
        ctime: file_time(basic.ChangeTime),
    })
}

fn transfer_len(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// `WriteFile`, at the file pointer or at `offset`.
fn write_file(file: &OwnedHandle, buf: &[u8], offset: Option<u64>) -> Result<usize, Errno> {
    let mut at = OVERLAPPED::default();
    let at_ptr: *mut OVERLAPPED = match offset {
        Some(offset) => {
            at.Anonymous.Anonymous.Offset = offset as u32;
            at.Anonymous.Anonymous.OffsetHigh = (offset >> 32) as u32;
            &mut at
        }
        None => std::ptr::null_mut(),
    };
    let mut done = 0u32;
    // SAFETY: the handle is open for synchronous writing; `buf` holds at
    // least the length passed; `at`, when given, outlives the call, which
    // completes before returning on a synchronous handle.
    check(unsafe {
        WriteFile(
            raw(file),
            buf.as_ptr(),
            transfer_len(buf.len()),
            &mut done,
            at_ptr,
        )
    })?;
    Ok(done as usize)
}

/// The soft-lock operations on one directory, the lock file's.
#[derive(Clone, Copy, Debug)]
pub struct WindowsOs<'d> {
    dir: &'d Dir,
}

impl<'d> WindowsOs<'d> {
    /// Operations on the directory `dir`.
    pub fn on(dir: &'d Dir) -> Self {
        WindowsOs { dir }
    }
}

/// The adapter's soft-lock operations, under the name every adapter uses.
pub type SoftOs<'d> = WindowsOs<'d>;

impl soft::Dir for WindowsOs<'_> {
    type File = OwnedHandle;

    /// `CreateFileW(CREATE_NEW, GENERIC_READ|GENERIC_WRITE|DELETE, share
    /// read and write)`, not following a reparse point. The file is never
    /// made read-only, whatever `mode` says: Windows refuses to delete a
    /// read-only file even through a handle with delete access, and a
    /// marker its holder cannot delete would outlive its release.
    fn create_new(
        &mut self,
        name: &[u8],
        _mode: u32,
        _truncate: bool,
    ) -> Result<OwnedHandle, Errno> {
        let path = self.dir.join(name)?;
        let attributes = FILE_ATTRIBUTE_NORMAL;
        open(
            &path,
            GENERIC_READ | GENERIC_WRITE | DELETE,
            FILE_SHARE_READ | FILE_SHARE_WRITE,
            CREATE_NEW,
            attributes | FILE_FLAG_OPEN_REPARSE_POINT,
        )
    }

    /// Windows has no unnamed files here: a marker must be created by name,
    /// held open without delete sharing from its first instant.
    fn create_unnamed(&mut self, _mode: u32) -> Result<OwnedHandle, Errno> {
        Err(Errno::OPNOTSUPP)
    }

    /// Nothing is unnamed here (see `create_unnamed`).
    fn link_unnamed(&mut self, _file: &OwnedHandle, _name: &[u8]) -> Result<(), Errno> {
        Err(Errno::OPNOTSUPP)
    }

    /// Nothing is unnamed here, so nothing is synced before its link.
    fn sync_file(&mut self, _file: &OwnedHandle) -> Result<(), Errno> {
        Err(Errno::OPNOTSUPP)
    }

    /// `CreateFileW(OPEN_EXISTING, GENERIC_READ, share everything)`, not
    /// following a reparse point.
    fn open_read(&mut self, name: &[u8]) -> Result<OwnedHandle, Errno> {
        let path = self.dir.join(name)?;
        open(
            &path,
            GENERIC_READ,
            SHARE_ALL,
            OPEN_EXISTING,
            FILE_FLAG_OPEN_REPARSE_POINT,
        )
    }

    /// `CreateFileW(OPEN_EXISTING, DELETE|FILE_READ_ATTRIBUTES|SYNCHRONIZE,
    /// share read and write)`, not following a reparse point: refused with
    /// a sharing violation (`EACCES`) while anyone holds the file without
    /// delete sharing, as a live holder holds its marker and a breaker its
    /// pin.
    fn pin(&mut self, name: &[u8]) -> Result<OwnedHandle, Errno> {
        let path = self.dir.join(name)?;
        // Sharing everything, so that judging never stands in anyone's
        // way (a Python peer's release deletes through a new open).
        open(
            &path,
            FILE_READ_ATTRIBUTES | SYNCHRONIZE,
            SHARE_ALL,
            OPEN_EXISTING,
            FILE_FLAG_OPEN_REPARSE_POINT,
        )
    }

    fn write(&mut self, file: &OwnedHandle, buf: &[u8]) -> Result<usize, Errno> {
        write_file(file, buf, None)
    }

    fn write_at(&mut self, file: &OwnedHandle, buf: &[u8], offset: u64) -> Result<usize, Errno> {
        write_file(file, buf, Some(offset))
    }

    fn truncate(&mut self, file: &OwnedHandle, len: u64) -> Result<(), Errno> {
        let end = FILE_END_OF_FILE_INFO {
            EndOfFile: i64::try_from(len).map_err(|_| Errno::INVAL)?,
        };
        set_info(
            file,
            FileEndOfFileInfo,
            &end,
            core::mem::size_of::<FILE_END_OF_FILE_INFO>(),
        )
    }

    /// Windows keeps no permission bits, and a marker stays writable (see
    /// `create_new`).
    fn chmod(&mut self, _file: &OwnedHandle, _mode: u32) -> Result<(), Errno> {
        Ok(())
    }

    /// `SetFileTime` of the last write to now.
    fn touch(&mut self, file: &OwnedHandle) -> Result<(), Errno> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|_| Errno::INVAL)?;
        let ticks = now.as_nanos() / 100 + 116_444_736_000_000_000;
        let ticks = u64::try_from(ticks).map_err(|_| Errno::INVAL)?;
        let time = FILETIME {
            dwLowDateTime: ticks as u32,
            dwHighDateTime: (ticks >> 32) as u32,
        };
        // SAFETY: the handle is open with write-attributes access; `time`
        // outlives the call; null leaves the other times alone.
        check(unsafe { SetFileTime(raw(file), std::ptr::null(), std::ptr::null(), &time) })
    }

    fn read(&mut self, file: &OwnedHandle, buf: &mut [u8]) -> Result<usize, Errno> {
        let mut done = 0u32;
        // SAFETY: the handle is open for synchronous reading; `buf` is
        // writable for the length passed.
        check(unsafe {
            ReadFile(
                raw(file),
                buf.as_mut_ptr(),
                transfer_len(buf.len()),
                &mut done,
                std::ptr::null_mut(),
            )
        })?;
        Ok(done as usize)
    }

    fn fstat(&mut self, file: &OwnedHandle) -> Result<Stat, Errno> {
        stat_handle(file)
    }

    fn close(&mut self, file: OwnedHandle) {
        drop(file);
    }

    /// The stat of the name itself (a reparse point is not followed),
    /// through a handle for attributes only that shares everything.
    fn lstat(&mut self, name: &[u8]) -> Result<Stat, Errno> {
        let path = self.dir.join(name)?;
        let handle = open(
            &path,
            FILE_READ_ATTRIBUTES,
            SHARE_ALL,
            OPEN_EXISTING,
            FILE_FLAG_OPEN_REPARSE_POINT,
        )?;
        stat_handle(&handle)
    }

    /// Windows has no exchange of two names.
    fn exchange(&mut self, _a: &[u8], _b: &[u8]) -> Result<(), Errno> {
        Err(Errno::NOSYS)
    }

    /// `MoveFileExW(from, to, MOVEFILE_REPLACE_EXISTING)`.
    fn rename(&mut self, from: &[u8], to: &[u8]) -> Result<(), Errno> {
        let (from, to) = (self.dir.join(from)?, self.dir.join(to)?);
        // SAFETY: both paths are NUL-terminated UTF-16.
        check(unsafe { MoveFileExW(from.as_ptr(), to.as_ptr(), MOVEFILE_REPLACE_EXISTING) })
    }

    /// `DeleteFileW(name)`.
    fn unlink(&mut self, name: &[u8]) -> Result<(), Errno> {
        let path = self.dir.join(name)?;
        // SAFETY: the path is NUL-terminated UTF-16.
        check(unsafe { DeleteFileW(path.as_ptr()) })
    }

    /// `FindFirstFileW(dir\*)` and `FindNextFileW`; names that are not
    /// valid UTF-16 are skipped (no name this protocol writes is one).
    fn list(&mut self, visit: &mut dyn FnMut(&[u8])) -> Result<(), Errno> {
        let mut pattern = self.dir.full.clone();
        pattern.extend([u16::from(b'\\'), u16::from(b'*'), 0]);
        let mut data = WIN32_FIND_DATAW::default();
        // SAFETY: the pattern is NUL-terminated; `data` is writable.
        let find = unsafe { FindFirstFileW(pattern.as_ptr(), &mut data) };
        if find == INVALID_HANDLE_VALUE {
            return Err(last_error());
        }
        let result = loop {
            let len = data.cFileName.iter().position(|&c| c == 0).unwrap_or(260);
            if let Ok(name) = String::from_utf16(&data.cFileName[..len]) {
                visit(name.as_bytes());
            }
            // SAFETY: `find` is the open search; `data` is writable.
            if unsafe { FindNextFileW(find, &mut data) } == 0 {
                // SAFETY: GetLastError reads this thread's last-error value.
                let code = unsafe { GetLastError() };
                break if code == ERROR_NO_MORE_FILES {
                    Ok(())
                } else {
                    Err(errno_from_win32(code))
                };
            }
        };
        // SAFETY: `find` is an open search handle, closed once.
        unsafe { FindClose(find) };
        result
    }

    /// Windows rules: stale markers move, and ours are deleted, through
    /// handles.
    fn handles(&mut self) -> Option<&mut dyn Handles<OwnedHandle>> {
        Some(self)
    }
}

impl Processes for WindowsOs<'_> {
    fn probe(&mut self, pid: Pid) -> Liveness {
        probe(pid)
    }

    fn start_token(&mut self, pid: Pid) -> Option<StartToken> {
        start_token(pid.get())
    }

    /// Windows has no PID namespaces.
    fn runs_elsewhere(&mut self, _pid: Pid, _start: Decimal<'_>) -> bool {
        false
    }

    fn begin_claim(&mut self, name: &[u8]) -> bool {
        swaplock_core::claims::begin(name)
    }

    fn end_claim(&mut self, name: &[u8]) {
        swaplock_core::claims::end(name)
    }
}

impl Clock for WindowsOs<'_> {
    fn now(&mut self) -> Instant {
        monotonic_now()
    }

    fn wall(&mut self) -> FileTime {
        wall_now()
    }

    fn sleep(&mut self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

impl Entropy for WindowsOs<'_> {
    fn token(&mut self) -> Token {
        random_token()
    }
}

impl Handles<OwnedHandle> for WindowsOs<'_> {
    /// `CreateFileW(dir\\name, DELETE|FILE_READ_ATTRIBUTES|
    /// FILE_WRITE_ATTRIBUTES|SYNCHRONIZE, FILE_SHARE_READ|FILE_SHARE_WRITE,
    /// OPEN_EXISTING, FILE_FLAG_OPEN_REPARSE_POINT)`: a sharing violation
    /// while any handle on the file denies delete sharing. Attribute access
    /// lets [`Handles::remove_file`] clear a read-only attribute (a filelock
    /// peer asked for mode 0o444, say) rather than leave the stale file
    /// under our break name.
    fn open_to_move(&mut self, name: &[u8]) -> Result<OwnedHandle, Errno> {
        let path = self.dir.join(name)?;
        open(
            &path,
            DELETE | FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES | SYNCHRONIZE,
            FILE_SHARE_READ | FILE_SHARE_WRITE,
            OPEN_EXISTING,
            FILE_FLAG_OPEN_REPARSE_POINT,
        )
    }

    /// `SetFileInformationByHandle(FileRenameInfo)` to `dir\to`, never
    /// replacing: the file the handle holds moves, whatever name a peer
    /// has put where it was.
    fn rename_file(&mut self, file: &OwnedHandle, to: &[u8]) -> Result<(), Errno> {
        let target = self.dir.nt_path(to)?;
        let head = core::mem::offset_of!(FILE_RENAME_INFO, FileName);
        let bytes = head + (target.len() + 1) * 2;
        // A u64 buffer keeps the struct's alignment.
        let mut buf = vec![0u64; bytes.div_ceil(8)];
        let info = buf.as_mut_ptr().cast::<FILE_RENAME_INFO>();
        // SAFETY: `buf` is zeroed, aligned for FILE_RENAME_INFO and `bytes`
        // long, room for the header and the name with its NUL; all-zero is
        // ReplaceIfExists = false and no root directory.
        unsafe {
            (*info).FileNameLength = u32::try_from(target.len() * 2).map_err(|_| Errno::INVAL)?;
            let name = (&raw mut (*info).FileName).cast::<u16>();
            std::ptr::copy_nonoverlapping(target.as_ptr(), name, target.len());
        }
        // SAFETY: `info` points into `buf`, `bytes` long.
        set_info(file, FileRenameInfo, unsafe { &*info }, bytes)
    }

    /// `SetFileInformationByHandle(FileDispositionInfo)`: the file the
    /// handle holds is deleted once its last handle closes (at once, as
    /// markers are held by one handle and read briefly).
    ///
    /// A read-only attribute (set on our marker by a backup tool or a user)
    /// refuses the delete with `ERROR_ACCESS_DENIED`: the attribute is then
    /// cleared through the same handle and the delete made again, since a
    /// marker left behind names this live process and keeps every
    /// contender, this one included, out until it exits. (A marker mapped
    /// into memory by another process cannot be deleted until it is
    /// unmapped; that failure is reported.)
    fn remove_file(&mut self, file: &OwnedHandle) -> Result<(), Errno> {
        let delete = || {
            let disposition = FILE_DISPOSITION_INFO { DeleteFile: true };
            set_info(
                file,
                FileDispositionInfo,
                &disposition,
                core::mem::size_of::<FILE_DISPOSITION_INFO>(),
            )
        };
        match delete() {
            Err(e) if e == Errno::ACCES && clear_read_only(file)? => delete(),
            done => done,
        }
    }
}

/// Clears the read-only attribute of the file `handle` holds, through the
/// handle (`FileBasicInfo`; zero times leave the times as they are);
/// whether it was set.
fn clear_read_only(handle: &OwnedHandle) -> Result<bool, Errno> {
    let mut basic: FILE_BASIC_INFO = info_ex(handle, FileBasicInfo)?;
    if basic.FileAttributes & FILE_ATTRIBUTE_READONLY == 0 {
        return Ok(false);
    }
    basic.FileAttributes &= !FILE_ATTRIBUTE_READONLY;
    if basic.FileAttributes == 0 {
        basic.FileAttributes = FILE_ATTRIBUTE_NORMAL;
    }
    basic.CreationTime = 0;
    basic.LastAccessTime = 0;
    basic.LastWriteTime = 0;
    basic.ChangeTime = 0;
    set_info(
        handle,
        FileBasicInfo,
        &basic,
        core::mem::size_of::<FILE_BASIC_INFO>(),
    )?;
    Ok(true)
}

/// Whether process `pid` is alive (PROTOCOL 4.3): `OpenProcess(SYNCHRONIZE)`;
/// a handle means alive unless the process has already exited; no handle
/// means alive unless the PID names no process (`ERROR_INVALID_PARAMETER`).
pub fn probe(pid: Pid) -> Liveness {
    // SAFETY: OpenProcess takes plain values.
    let handle = unsafe { OpenProcess(PROCESS_SYNCHRONIZE, 0, pid.get()) };
    if handle.is_null() {
        // SAFETY: GetLastError reads this thread's last-error value.
        return match unsafe { GetLastError() } {
            ERROR_INVALID_PARAMETER => Liveness::Dead,
            _ => Liveness::Alive,
        };
    }
    // SAFETY: `handle` is the process handle just opened.
    let exited = unsafe { WaitForSingleObject(handle, 0) } == WAIT_OBJECT_0;
    // SAFETY: closed once.
    unsafe { CloseHandle(handle) };
    if exited {
        Liveness::Dead
    } else {
        Liveness::Alive
    }
}

/// The start token of process `pid` (PROTOCOL 4.2): its creation time from
/// `GetProcessTimes`, as `(high << 32) | low` in 100 ns ticks since 1601.
pub fn start_token(pid: u32) -> Option<StartToken> {
    // SAFETY: OpenProcess takes plain values.
    let handle = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if handle.is_null() {
        return None;
    }
    let mut times = [FILETIME::default(); 4];
    let [created, exited, kernel, user] = &mut times;
    // SAFETY: `handle` is open with query access; the four outputs are
    // writable.
    let ok = unsafe { GetProcessTimes(handle, created, exited, kernel, user) };
    // SAFETY: closed once.
    unsafe { CloseHandle(handle) };
    (ok != 0).then(|| {
        StartToken::from_u64(
            (u64::from(times[0].dwHighDateTime) << 32) | u64::from(times[0].dwLowDateTime),
        )
    })
}

/// This process's PID.
pub fn current_pid() -> Pid {
    // SAFETY: GetCurrentProcessId takes nothing.
    let pid = unsafe { GetCurrentProcessId() };
    // A user process's ID is a nonzero multiple of 4 far below 2^31.
    Pid::new(pid).unwrap_or_else(|| unreachable!("process ID {pid}"))
}

/// This host's name as records carry it (PROTOCOL 4.1): the physical DNS
/// host name, as UTF-8, escaped; never a PID-namespace suffix.
pub fn host_name() -> HostName {
    let mut buf = [0u16; 256];
    let mut len = buf.len() as u32;
    // SAFETY: `buf` holds `len` units; `len` is updated to the length.
    let ok =
        unsafe { GetComputerNameExW(ComputerNamePhysicalDnsHostname, buf.as_mut_ptr(), &mut len) };
    let raw = if ok == 0 {
        String::new()
    } else {
        String::from_utf16_lossy(&buf[..(len as usize).min(buf.len())])
    };
    swaplock_core::host::host_name(raw.as_bytes(), None)
}

/// 128 bits from the system's preferred random generator
/// (`BCryptGenRandom`). A failure, which Windows documents as impossible
/// for that generator, aborts rather than hand out a predictable name.
pub fn random_token() -> Token {
    let mut t = [0u8; 16];
    // SAFETY: `t` is writable for 16 bytes; no algorithm handle with the
    // system-preferred flag.
    let status = unsafe {
        BCryptGenRandom(
            std::ptr::null_mut(),
            t.as_mut_ptr(),
            t.len() as u32,
            BCRYPT_USE_SYSTEM_PREFERRED_RNG,
        )
    };
    assert!(status >= 0, "BCryptGenRandom failed: {status:#x}");
    Token(t)
}

#[cfg(test)]
mod tests {
    use super::{open_dir, WindowsOs};
    use crate::kernel::wide_path;
    use crate::nt::nt_path_of;
    use swaplock_core::soft::{Dir as _, Handles as _};
    use swaplock_core::Errno;

    /// A fresh directory under the system's temporary directory.
    fn scratch(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("swaplock-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        dir
    }

    /// Judging never stands in a peer's way: a Python holder releases by
    /// closing its marker, then deleting it through a new open that shares
    /// everything, which must succeed while a contender's pin is open.
    /// Only the open to move a file is exclusive: refused while a holder
    /// has it, and while another breaker's is open.
    #[test]
    fn a_pin_never_refuses_a_peers_delete_and_only_one_breaker_moves() {
        let root = scratch("pin");
        let dir = open_dir(&wide_path(&root)).unwrap();
        let mut os = WindowsOs::on(&dir);
        std::fs::write(root.join("a.lock"), b"999\nh\n").unwrap();
        let pin = os.pin(b"a.lock").unwrap();
        std::fs::remove_file(root.join("a.lock")).unwrap();
        drop(pin);

        let held = os.create_new(b"b.lock", 0o644, false).unwrap();
        let pin = os.pin(b"b.lock").unwrap();
        assert_eq!(os.open_to_move(b"b.lock").err(), Some(Errno::ACCES));
        drop(held);
        let mover = os.open_to_move(b"b.lock").unwrap();
        assert_eq!(os.open_to_move(b"b.lock").err(), Some(Errno::ACCES));
        assert!(std::fs::remove_file(root.join("b.lock")).is_err());
        drop((mover, pin));
        std::fs::remove_file(root.join("b.lock")).unwrap();
        drop(dir);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_name_in_a_drive_root_gets_one_separator() {
        let root = super::Dir {
            full: "C:\\".encode_utf16().collect(),
        };
        let joined = root.join(b"a.lock").unwrap();
        assert_eq!(
            String::from_utf16(&joined[..joined.len() - 1]).unwrap(),
            r"C:\a.lock"
        );
        let nt = String::from_utf16(&root.nt_path(b"a.lock").unwrap()).unwrap();
        assert_eq!(nt, r"\??\C:\a.lock");
    }

    #[test]
    fn every_dos_path_form_has_its_nt_path() {
        let cases = [
            (r"C:\locks\a.lock", r"\??\C:\locks\a.lock"),
            (r"\\?\C:\locks\a.lock", r"\??\C:\locks\a.lock"),
            (r"\\.\C:\locks\a.lock", r"\??\C:\locks\a.lock"),
            (r"\\server\share\a.lock", r"\??\UNC\server\share\a.lock"),
            (
                r"\\?\UNC\server\share\a.lock",
                r"\??\UNC\server\share\a.lock",
            ),
        ];
        for (dos, nt) in cases {
            let wide: Vec<u16> = dos.encode_utf16().chain([0]).collect();
            assert_eq!(String::from_utf16(&nt_path_of(&wide)).unwrap(), nt, "{dos}");
        }
    }
}
