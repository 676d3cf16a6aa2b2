//! The SQLite lock with classic `fcntl` locks (where the kernel has no
//! open file description locks, or [`SqliteRwLock::owned_by_process`]):
//! one entry per database file this process holds or is taking, by
//! (device, inode), as SQLite's own unix VFS keeps one per inode.
//!
//! A classic lock belongs to the process: two threads' locks on one file
//! merge instead of excluding each other, and closing *any* descriptor of
//! the file drops them all (C-DB1). So, for each file:
//!
//! - the kernel locks are taken through one descriptor, the entry's;
//!   a reader of this process joins a read lock the process already
//!   holds (SQLite does the same), and a writer waits while any thread of
//!   the process holds or takes the file (busy, then the acquire's pause);
//! - a descriptor of a file with an entry is never closed while the entry
//!   lives: it is kept, and closed with the entry's, after the unlock, when
//!   the last holder leaves.
//!
//! [`SqliteRwLock::owned_by_process`]: super::SqliteRwLock::owned_by_process

use crate::adapter::kernel as os;
use crate::sync::MutexGuard;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use swaplock_core::decide::FileId;
use swaplock_core::sqlite::{Mode, RELEASE};
use swaplock_core::Errno;

/// A file this process holds (or is taking) the lock of.
#[derive(Debug)]
struct Entry {
    id: FileId,
    /// The descriptor every lock call of the file goes through.
    fd: Arc<OwnedFd>,
    /// How many read guards hold it (one kernel read lock).
    readers: usize,
    /// A write guard holds it.
    writer: bool,
    /// A thread is climbing SQLite's ladder on it.
    taking: bool,
    /// Other descriptors of the file, which a close would drop the locks
    /// through.
    kept: Vec<OwnedFd>,
}

#[derive(Debug)]
struct Files {
    /// The process these entries are of: a forked child holds none of the
    /// parent's classic locks, and starts afresh.
    pid: u32,
    entries: Vec<Entry>,
    /// Descriptors whose file could not be told (a failed `fstat`): any
    /// entry's file might be theirs, so they are closed only once there
    /// is no entry.
    unknown: Vec<OwnedFd>,
}

static FILES: crate::lists::ProcessMutex<Files> = crate::lists::ProcessMutex::new(Files {
    pid: 0,
    entries: Vec::new(),
    unknown: Vec::new(),
});

fn files() -> MutexGuard<'static, Files> {
    let mut files = FILES.lock();
    let pid = std::process::id();
    if files.pid != pid {
        // Copies of the parent's descriptors, holding nothing of its.
        files.pid = pid;
        files.entries.clear();
        files.unknown.clear();
    }
    files
}

impl Files {
    fn find(&self, id: FileId) -> Option<usize> {
        self.entries.iter().position(|e| e.id == id)
    }
}

/// What this process's hold on a file lets a new acquire do.
#[derive(Debug)]
pub(super) enum Entered {
    /// A reader joined the read lock this process holds: it holds it.
    Joined,
    /// Climb the ladder through this descriptor (the entry is marked as
    /// taking; [`settle`] ends that).
    Climb(Arc<OwnedFd>),
    /// A thread of this process holds or takes the file in a conflicting
    /// way.
    Busy,
}

/// Admits `mode` on file `id` if this process already has an entry for
/// it (no descriptor is opened): joined, or busy; `None` without one.
pub(super) fn join(id: FileId, mode: Mode) -> Option<Entered> {
    let mut files = files();
    let i = files.find(id)?;
    Some(admit(&mut files.entries[i], mode))
}

fn admit(entry: &mut Entry, mode: Mode) -> Entered {
    match mode {
        Mode::Read if entry.readers > 0 && !entry.writer && !entry.taking => {
            entry.readers += 1;
            Entered::Joined
        }
        _ => Entered::Busy,
    }
}

/// Enters `fd`, a new descriptor of file `id`: the entry's descriptor and
/// a climb where the file has no entry; otherwise the descriptor is kept
/// with the entry and `mode` admitted as [`join`] does.
pub(super) fn enter(fd: OwnedFd, id: FileId, mode: Mode) -> Entered {
    let mut files = files();
    if let Some(i) = files.find(id) {
        let entry = &mut files.entries[i];
        entry.kept.push(fd);
        return admit(entry, mode);
    }
    let fd = Arc::new(fd);
    files.entries.push(Entry {
        id,
        fd: Arc::clone(&fd),
        readers: 0,
        writer: false,
        taking: true,
        kept: Vec::new(),
    });
    Entered::Climb(fd)
}

/// Ends the climb [`enter`] started on file `id` through `climbed` (the
/// descriptor it gave): with `held`, the mode is held; otherwise, the
/// file's entry goes if nobody else holds it. `climbed` is dropped first,
/// so that the entry's own descriptor is the last, and closes with the
/// entry under the registry's lock.
pub(super) fn settle(climbed: Arc<OwnedFd>, id: FileId, mode: Mode, held: bool) {
    drop(climbed);
    let mut files = files();
    let Some(i) = files.find(id) else {
        return;
    };
    let entry = &mut files.entries[i];
    entry.taking = false;
    if held {
        match mode {
            Mode::Read => entry.readers += 1,
            Mode::Write => entry.writer = true,
        }
    }
    let _ = remove_if_idle(&mut files, i, false);
}

/// A guard of `mode` on file `id` leaves: with the last, the kernel lock
/// is released and every descriptor of the file closed.
pub(super) fn leave(id: FileId, mode: Mode) -> Result<(), Errno> {
    let mut files = files();
    let Some(i) = files.find(id) else {
        return Ok(());
    };
    let entry = &mut files.entries[i];
    match mode {
        Mode::Read => entry.readers = entry.readers.saturating_sub(1),
        Mode::Write => entry.writer = false,
    }
    remove_if_idle(&mut files, i, true)
}

/// Removes entry `i` if nobody holds or takes it, unlocking first if
/// `unlock`; all under the registry's lock, so that no thread locks the
/// file anew before the last close.
fn remove_if_idle(files: &mut Files, i: usize, unlock: bool) -> Result<(), Errno> {
    let entry = &files.entries[i];
    if entry.taking || entry.writer || entry.readers > 0 {
        return Ok(());
    }
    let entry = files.entries.swap_remove(i);
    if files.entries.is_empty() {
        files.unknown.clear();
    }
    crate::sync::syscall();
    let unlocked = match unlock {
        true => os::fcntl_range(&*entry.fd, false, RELEASE),
        false => Ok(()),
    };
    drop(entry);
    unlocked
}

/// Closes `fd`, a descriptor of file `id` (`None`: not known) that holds
/// no lock of its own: kept instead while this process has an entry for
/// the file (for any file, where it is not known).
pub(super) fn close(fd: OwnedFd, id: Option<FileId>) {
    let mut files = files();
    match id {
        _ if files.entries.is_empty() => {}
        None => return files.unknown.push(fd),
        Some(id) => {
            if let Some(i) = files.find(id) {
                return files.entries[i].kept.push(fd);
            }
        }
    }
    crate::sync::syscall();
    drop(fd);
}
