//! The SQLite lock with classic `fcntl` locks (where the kernel has no
//! open file description locks, or [`SqliteRwLock::owned_by_process`]):
//! one entry per database file this process holds or is taking, by
//! (device, inode), as SQLite's own unix VFS keeps one per inode.
//!
//! A classic lock belongs to the process: two threads' locks on one file
//! merge instead of excluding each other, and closing *any* descriptor of
//! the file drops them all (C-DB1). So, for each file:
//!
//! - every lock call goes through one descriptor, the entry's, and the
//!   entry says what the process's guards hold: readers (sharing one
//!   kernel read lock), a writer climbing SQLite's ladder, or a writer
//!   holding the lock;
//! - one thread climbs at a time. A reader joins the process's read lock
//!   while no writer of the process climbs or holds, through the gate (no
//!   writer of another process waits either); a writer climbs even
//!   while readers of the process hold, taking PENDING in the kernel (no
//!   new reader of any process starts), but its write lock on the SHARED
//!   range waits until they have left ([`Calls`] answers it busy), since
//!   the kernel would merge it with their read lock;
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
use swaplock_core::sqlite::{Access, Call, Ladder, Mode, Span, Verdict, RELEASE};
use swaplock_core::Errno;

/// What a writer of this process does with a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Writer {
    None,
    Climbing,
    Holding,
}

/// A file this process holds (or is taking) the lock of.
#[derive(Debug)]
struct Entry {
    id: FileId,
    /// The descriptor every lock call of the file goes through.
    fd: Arc<OwnedFd>,
    /// How many read guards hold it (one kernel read lock).
    readers: usize,
    /// A reader is climbing (no one of the process holds yet).
    reader_climbing: bool,
    writer: Writer,
    /// The climbing or holding writer's ladder holds the SHARED range (a
    /// read lock merged with the readers', or its write lock).
    writer_shared: bool,
    /// Other descriptors of the file, which a close would drop the locks
    /// through.
    kept: Vec<OwnedFd>,
}

impl Entry {
    fn idle(&self) -> bool {
        self.readers == 0 && !self.reader_climbing && self.writer == Writer::None
    }
}

#[derive(Debug)]
struct Files {
    /// The process these entries are of: a forked child holds none of the
    /// parent's classic locks, and starts afresh.
    pid: crate::pid::Me,
    entries: Vec<Entry>,
    /// Descriptors whose file could not be told (a failed `fstat`): any
    /// entry's file might be theirs, so they are closed only once there
    /// is no entry.
    unknown: Vec<OwnedFd>,
}

static FILES: crate::lists::ProcessMutex<Files> = crate::lists::ProcessMutex::new(Files {
    pid: crate::pid::Me::NONE,
    entries: Vec::new(),
    unknown: Vec::new(),
});

fn files() -> MutexGuard<'static, Files> {
    let mut files = FILES.lock();
    let pid = crate::pid::id();
    if files.pid != pid {
        // Copies of the parent's descriptors, holding nothing of its:
        // forgotten, not closed, since the child may have closed them and
        // reused their numbers for files of its own, whose classic locks a
        // close would drop.
        files.pid = pid;
        for entry in files.entries.drain(..) {
            std::mem::forget(entry.fd);
            entry.kept.into_iter().for_each(std::mem::forget);
        }
        files.unknown.drain(..).for_each(std::mem::forget);
    }
    files
}

impl Files {
    fn find(&self, id: FileId) -> Option<usize> {
        self.entries.iter().position(|e| e.id == id)
    }

    /// Removes entry `i` if it is idle: its kernel locks released (what a
    /// given-up climb or a last reader left) and every descriptor closed,
    /// under the registry's lock, so that no thread locks the file anew
    /// before the last close.
    fn remove_if_idle(&mut self, i: usize) -> Result<(), Errno> {
        if !self.entries[i].idle() {
            return Ok(());
        }
        let entry = self.entries.swap_remove(i);
        if self.entries.is_empty() {
            self.unknown.clear();
        }
        crate::sync::syscall();
        let unlocked = os::fcntl_range(&*entry.fd, false, RELEASE);
        drop(entry);
        unlocked
    }
}

/// What this process's hold on a file lets a new acquire do.
#[derive(Debug)]
pub(super) enum Entered {
    /// A reader joined the read lock this process holds: it holds it.
    Joined,
    /// Climb the ladder through this descriptor, with [`Calls`]; then
    /// [`settle`].
    Climb(Arc<OwnedFd>),
    /// A thread of this process holds or takes the file in a way that
    /// keeps this acquire out for now.
    Busy,
}

fn admit(entry: &mut Entry, mode: Mode) -> Entered {
    if entry.writer != Writer::None || entry.reader_climbing {
        return Entered::Busy;
    }
    match mode {
        Mode::Read if entry.readers > 0 => return join_through_the_gate(entry),
        Mode::Read => entry.reader_climbing = true,
        Mode::Write => entry.writer = Writer::Climbing,
    }
    Entered::Climb(Arc::clone(&entry.fd))
}

/// A reader joins the read lock the process's readers hold only through
/// the gate a first reader passes (a read lock on PENDING, taken and
/// dropped): a writer of another process waiting for those readers holds
/// PENDING, and keeps new readers of this process out too (writer
/// preference; SQLite itself lets them join).
fn join_through_the_gate(entry: &mut Entry) -> Entered {
    let mut gate = Ladder::new(Mode::Read);
    crate::sync::syscall();
    let answer = os::fcntl_range(&*entry.fd, false, gate.first());
    match gate.answer(answer) {
        Verdict::Call(_) => {
            let pass = Call {
                access: Access::Unlock,
                span: Span::PENDING,
            };
            let _ = os::fcntl_range(&*entry.fd, false, pass);
            entry.readers += 1;
            Entered::Joined
        }
        // Refused (or failed): busy for now, holding nothing new.
        _ => Entered::Busy,
    }
}

/// Admits `mode` on file `id` if this process already has an entry for
/// it (no descriptor is opened); `None` without one.
pub(super) fn join(id: FileId, mode: Mode) -> Option<Entered> {
    let mut files = files();
    let i = files.find(id)?;
    Some(admit(&mut files.entries[i], mode))
}

/// Enters `fd`, a new descriptor of file `id`: the entry's descriptor
/// where the file has no entry; otherwise it is kept with the entry. Then
/// `mode` is admitted as [`join`] does.
pub(super) fn enter(fd: OwnedFd, id: FileId, mode: Mode) -> Entered {
    let mut files = files();
    let i = match files.find(id) {
        Some(i) => {
            files.entries[i].kept.push(fd);
            i
        }
        None => {
            files.entries.push(Entry {
                id,
                fd: Arc::new(fd),
                readers: 0,
                reader_climbing: false,
                writer: Writer::None,
                writer_shared: false,
                kept: Vec::new(),
            });
            files.entries.len() - 1
        }
    };
    admit(&mut files.entries[i], mode)
}

/// The lock calls of a climb of `mode` on file `id`, made under the
/// registry's lock, which thus knows what the process holds in the
/// kernel: a writer's write lock on the SHARED range is busy while
/// readers of this process hold it, and the unlock of a writer that
/// gives up keeps their read lock.
pub(super) struct Calls {
    pub(super) id: FileId,
    pub(super) mode: Mode,
}

impl Calls {
    pub(super) fn lock(&self, fd: &OwnedFd, call: Call) -> Result<(), Errno> {
        let mut files = files();
        let Some(i) = files.find(self.id) else {
            // Only settle removes a climber's entry.
            return Err(Errno::INVAL);
        };
        let entry = &mut files.entries[i];
        let writer = self.mode == Mode::Write;
        let (call, holds_shared) = match call {
            // Readers of this process hold the SHARED range until they
            // leave: only they can, while this writer climbs.
            Call {
                access: Access::Write,
                span: Span::SHARED,
            } if entry.readers > 0 => return Err(Errno::AGAIN),
            // Drop PENDING and RESERVED only, as SQLite drops to SHARED.
            RELEASE if entry.readers > 0 => (
                Call {
                    access: Access::Unlock,
                    span: Span {
                        start: Span::PENDING.start,
                        len: 2,
                    },
                },
                Some(false),
            ),
            RELEASE => (RELEASE, Some(false)),
            Call {
                access: Access::Read | Access::Write,
                span: Span::SHARED,
            } => (call, Some(true)),
            call => (call, None),
        };
        crate::sync::syscall();
        let done = os::fcntl_range(fd, false, call);
        if let (true, Some(holds), true) = (writer, holds_shared, done.is_ok()) {
            entry.writer_shared = holds;
        }
        done
    }
}

/// Ends the climb of `mode` on file `id` through `climbed` (the descriptor
/// [`Entered::Climb`] gave): with `held`, the mode is held; otherwise,
/// the entry goes if nobody else holds it. `climbed` is dropped first, so
/// that the entry's own descriptor is the last, and closes with the
/// entry under the registry's lock.
pub(super) fn settle(climbed: Arc<OwnedFd>, id: FileId, mode: Mode, held: bool) {
    drop(climbed);
    let mut files = files();
    let Some(i) = files.find(id) else {
        return;
    };
    let entry = &mut files.entries[i];
    match (mode, held) {
        (Mode::Read, _) => {
            entry.reader_climbing = false;
            entry.readers += usize::from(held);
        }
        (Mode::Write, true) => entry.writer = Writer::Holding,
        (Mode::Write, false) => {
            entry.writer = Writer::None;
            entry.writer_shared = false;
        }
    }
    let _ = files.remove_if_idle(i);
}

/// A guard of `mode` on file `id` leaves: with the last holder of the
/// process, the kernel lock is released and every descriptor of the file
/// closed.
pub(super) fn leave(id: FileId, mode: Mode) -> Result<(), Errno> {
    let mut files = files();
    let Some(i) = files.find(id) else {
        return Ok(());
    };
    let entry = &mut files.entries[i];
    match mode {
        Mode::Read => entry.readers = entry.readers.saturating_sub(1),
        Mode::Write => {
            entry.writer = Writer::None;
            entry.writer_shared = false;
        }
    }
    if entry.readers == 0 && entry.writer == Writer::Climbing && !entry.writer_shared {
        // The last reader leaves while a writer climbs that holds no read
        // lock of its own (refused at its gate, say, by another process's
        // writer, which waits for this very read lock): it goes.
        crate::sync::syscall();
        let shared = Call {
            access: Access::Unlock,
            span: Span::SHARED,
        };
        return os::fcntl_range(&*entry.fd, false, shared);
    }
    files.remove_if_idle(i)
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
