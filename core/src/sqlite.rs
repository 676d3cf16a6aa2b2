//! The lock of Python filelock's `ReadWriteLock`, taken without SQLite
//! (PROTOCOL 17): SQLite's own byte-range locks on the database file, in
//! the order SQLite's unix VFS takes them, so that every SQLite connection
//! on the file (filelock's included) excludes and is excluded by us.
//!
//! - [`Ladder`]: the `fcntl` calls of a read or a write acquire, one at a
//!   time, and the verdict on each answer; [`climb`] runs it over an
//!   adapter's [`Rungs`] with the caller's patience.
//! - [`judge_header`]: whether the file's first bytes are a database such a
//!   lock may use (empty, or a rollback-journal database; never WAL).
//! - [`named`]: whether the path still names the locked file (DB3).
//! - [`holding`]: what three `F_GETLK` answers say of the lock's holders.
//!
//! Nothing here writes to the file: the lock never changes a byte of it
//! (DB2).

use crate::decide::FileId;
use crate::errno::Errno;
use crate::wait::{Clock, Patience};

/// The first byte past 1 GiB: SQLite's PENDING lock byte. No page of a
/// database is ever stored there, so locks on it never touch data.
pub const PENDING_BYTE: u64 = 0x4000_0000;
/// SQLite's RESERVED lock byte: a writer that means to write holds it.
pub const RESERVED_BYTE: u64 = PENDING_BYTE + 1;
/// The first byte of SQLite's SHARED range.
pub const SHARED_FIRST: u64 = PENDING_BYTE + 2;
/// The length of SQLite's SHARED range.
pub const SHARED_SIZE: u64 = 510;

/// A byte range of the database file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Span {
    /// The first byte.
    pub start: u64,
    /// How many bytes.
    pub len: u64,
}

impl Span {
    /// The PENDING byte.
    pub const PENDING: Span = Span {
        start: PENDING_BYTE,
        len: 1,
    };
    /// The RESERVED byte.
    pub const RESERVED: Span = Span {
        start: RESERVED_BYTE,
        len: 1,
    };
    /// The SHARED range.
    pub const SHARED: Span = Span {
        start: SHARED_FIRST,
        len: SHARED_SIZE,
    };
    /// All three, PENDING to the end of SHARED: what one unlock drops.
    pub const ALL: Span = Span {
        start: PENDING_BYTE,
        len: 2 + SHARED_SIZE,
    };
}

/// An `fcntl` lock type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Access {
    /// `F_RDLCK`: shared with other read locks.
    Read,
    /// `F_WRLCK`: excludes every other lock.
    Write,
    /// `F_UNLCK`.
    Unlock,
}

/// One non-blocking `fcntl` lock call (`F_SETLK`, or `F_OFD_SETLK`).
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Call {
    /// The lock type.
    pub access: Access,
    /// The range.
    pub span: Span,
}

/// The unlock a release makes: every byte the lock may hold, in one call.
pub const RELEASE: Call = Call {
    access: Access::Unlock,
    span: Span::ALL,
};

/// The lock asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Mode {
    /// A reader: SQLite's SHARED lock, which readers share.
    Read,
    /// A writer: SQLite's EXCLUSIVE lock.
    Write,
}

/// SQLite's lock levels, as the ladder has climbed them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Level {
    /// Nothing held.
    Unlocked,
    /// A read lock on the SHARED range.
    Shared,
    /// SHARED, and a write lock on the RESERVED byte.
    Reserved,
    /// RESERVED, and a write lock on the PENDING byte: no new reader may
    /// start (writer preference).
    Pending,
    /// A write lock on all three: no one else holds any.
    Exclusive,
}

/// Where the ladder stands: the call it asked for last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum Rung {
    /// `F_RDLCK` PENDING: refused while a writer holds or waits.
    Gate,
    /// `F_RDLCK` SHARED, through the gate.
    Share,
    /// `F_UNLCK` PENDING: the gate closes behind us.
    Pass,
    /// `F_WRLCK` RESERVED.
    Reserve,
    /// `F_WRLCK` PENDING.
    Pend,
    /// `F_WRLCK` SHARED.
    Exclude,
    /// `F_UNLCK` of everything, then busy: a step refused us, and what
    /// we hold would keep the holder out.
    Retreat,
    /// The lock is held.
    Held,
}

/// What the ladder says after an answer.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Verdict {
    /// Make this call next.
    Call(Call),
    /// The lock is held.
    Held,
    /// Another party holds what we need. To try again after a pause,
    /// make this call (the ladder kept what it holds: a writer waiting for
    /// readers keeps PENDING); to give up, make [`Ladder::give_up`]'s.
    Busy(Call),
    /// The call failed for another reason; [`Ladder::give_up`] says what
    /// to undo.
    Failed(Errno),
}

/// The `fcntl` calls of one acquire, SQLite's unix VFS's order, one at a
/// time: the adapter makes [`Ladder::first`], then each call a
/// [`Verdict::Call`] names, feeding every answer to [`Ladder::answer`].
///
/// - A **read** takes SQLite's SHARED lock: a read lock on PENDING (which a
///   writer holding or waiting for the lock refuses), a read lock on the
///   SHARED range, then PENDING is dropped.
/// - A **write** takes SHARED the same way, then write locks on RESERVED
///   (one writer at a time), PENDING (no new readers from now on) and the
///   SHARED range (granted once the last reader left), which SQLite calls
///   EXCLUSIVE. Refused at RESERVED, it drops everything before it waits
///   (the writer that holds RESERVED waits for our SHARED to go); refused
///   at PENDING or SHARED, it keeps what it holds and tries that step
///   again, so a waiting writer keeps new readers out.
///
/// ```
/// use swaplock_core::sqlite::{Access, Ladder, Mode, Span, Verdict};
/// use swaplock_core::Errno;
///
/// let mut ladder = Ladder::new(Mode::Read);
/// assert_eq!(ladder.first().span, Span::PENDING);
/// // A writer holds PENDING: the reader is refused, holding nothing.
/// assert!(matches!(ladder.answer(Err(Errno::AGAIN)), Verdict::Busy(_)));
/// assert_eq!(ladder.give_up(), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Ladder {
    mode: Mode,
    rung: Rung,
    level: Level,
    /// Whether a read lock on PENDING is held (between `Gate` and `Pass`).
    gate: bool,
}

impl Ladder {
    /// A ladder for `mode`, holding nothing.
    pub const fn new(mode: Mode) -> Self {
        Ladder {
            mode,
            rung: Rung::Gate,
            level: Level::Unlocked,
            gate: false,
        }
    }

    /// The first call.
    pub const fn first(&self) -> Call {
        Self::call_of(Rung::Gate)
    }

    /// The level held now.
    pub const fn level(&self) -> Level {
        self.level
    }

    const fn call_of(rung: Rung) -> Call {
        let (access, span) = match rung {
            Rung::Gate => (Access::Read, Span::PENDING),
            Rung::Share => (Access::Read, Span::SHARED),
            Rung::Pass => (Access::Unlock, Span::PENDING),
            Rung::Reserve => (Access::Write, Span::RESERVED),
            Rung::Pend => (Access::Write, Span::PENDING),
            Rung::Exclude => (Access::Write, Span::SHARED),
            Rung::Retreat | Rung::Held => return RELEASE,
        };
        Call { access, span }
    }

    fn to(&mut self, rung: Rung) -> Verdict {
        self.rung = rung;
        Verdict::Call(Self::call_of(rung))
    }

    /// The verdict on the answer to the call last asked for. `EAGAIN` and
    /// `EACCES` (POSIX allows either) mean another party holds a
    /// conflicting lock; `EINTR` asks for the same call again; any other
    /// error fails the acquire.
    pub fn answer(&mut self, answer: Result<(), Errno>) -> Verdict {
        let busy = match answer {
            Ok(()) => false,
            Err(e) if e == Errno::AGAIN || e == Errno::ACCES => true,
            Err(e) if e == Errno::INTR => return Verdict::Call(Self::call_of(self.rung)),
            Err(e) => return Verdict::Failed(e),
        };
        match (self.rung, busy) {
            (Rung::Held, _) => Verdict::Held,
            (Rung::Gate, true) => Verdict::Busy(Self::call_of(Rung::Gate)),
            (Rung::Gate, false) => {
                self.gate = true;
                self.to(Rung::Share)
            }
            // Refused the SHARED range with the gate open: a writer holds
            // it (a peer's lock, or its own hot-journal path). Close the
            // gate before waiting, or that writer's successor waits on us.
            (Rung::Share, true) => self.to(Rung::Retreat),
            (Rung::Share, false) => {
                self.level = Level::Shared;
                self.to(Rung::Pass)
            }
            // An unlock is never refused; a refusal would be a kernel's
            // error, which `Failed` already covers.
            (Rung::Pass, _) => {
                self.gate = false;
                match self.mode {
                    Mode::Read => {
                        self.rung = Rung::Held;
                        Verdict::Held
                    }
                    Mode::Write => self.to(Rung::Reserve),
                }
            }
            // Another writer holds RESERVED and waits for our SHARED to go.
            (Rung::Reserve, true) => self.to(Rung::Retreat),
            (Rung::Reserve, false) => {
                self.level = Level::Reserved;
                self.to(Rung::Pend)
            }
            // A reader between its gate and its pass: try again soon.
            (Rung::Pend, true) => Verdict::Busy(Self::call_of(Rung::Pend)),
            (Rung::Pend, false) => {
                self.level = Level::Pending;
                self.to(Rung::Exclude)
            }
            // Readers hold SHARED: wait with PENDING held, so that no new
            // reader starts.
            (Rung::Exclude, true) => Verdict::Busy(Self::call_of(Rung::Exclude)),
            (Rung::Exclude, false) => {
                self.level = Level::Exclusive;
                self.rung = Rung::Held;
                Verdict::Held
            }
            (Rung::Retreat, _) => {
                self.level = Level::Unlocked;
                self.gate = false;
                self.rung = Rung::Gate;
                Verdict::Busy(Self::call_of(Rung::Gate))
            }
        }
    }

    /// The call that drops what the ladder holds when the acquire gives up
    /// (busy, or failed), or `None` when it holds nothing. The ladder then
    /// stands at its start.
    pub fn give_up(&mut self) -> Option<Call> {
        let holds = self.level != Level::Unlocked || self.gate;
        *self = Ladder::new(self.mode);
        holds.then_some(RELEASE)
    }
}

/// The lock calls of a [`Ladder`], on one open file of the database.
pub trait Rungs: Clock {
    /// An open descriptor of the database.
    type File;
    /// Makes one non-blocking lock call (`F_OFD_SETLK`, or `F_SETLK`).
    fn lock(&mut self, file: &Self::File, call: Call) -> Result<(), Errno>;
}

/// How a [`climb`] ended.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Climbed {
    /// The lock is held.
    Held,
    /// The caller's patience ran out with the lock held by others; this
    /// climb holds nothing.
    Busy,
}

/// Climbs `mode`'s ladder on `file`, pausing (on the adapter's clock) as
/// `patience` says after each refusal, `started` being when the acquire
/// began. On busy or failure, what the climb holds is dropped before it
/// returns (an unlock's own failure is then not reported: the caller
/// closes the file, which drops it anyway).
pub fn climb<O: Rungs>(
    os: &mut O,
    file: &O::File,
    mode: Mode,
    patience: &mut impl Patience<Errno>,
    started: crate::decide::Instant,
) -> Result<Climbed, Errno> {
    let mut ladder = Ladder::new(mode);
    let mut call = ladder.first();
    loop {
        let answer = os.lock(file, call);
        call = match ladder.answer(answer) {
            Verdict::Call(next) => next,
            Verdict::Held => return Ok(Climbed::Held),
            Verdict::Busy(again) => {
                let elapsed = os.now().since(started);
                match patience.busy(&Errno::AGAIN, elapsed) {
                    Some(pause) => {
                        os.sleep(pause);
                        again
                    }
                    None => {
                        if let Some(undo) = ladder.give_up() {
                            let _ = os.lock(file, undo);
                        }
                        return Ok(Climbed::Busy);
                    }
                }
            }
            Verdict::Failed(e) => {
                if let Some(undo) = ladder.give_up() {
                    let _ = os.lock(file, undo);
                }
                return Err(e);
            }
        };
    }
}

/// The size of SQLite's database header.
pub const HEADER_LEN: usize = 100;

/// The header's first 16 bytes.
pub const MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// What the first bytes of the file say about its use as the lock's
/// database.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Header {
    /// An empty file: an empty database, as filelock leaves it.
    Empty,
    /// A rollback-journal database (someone's tables in it): SQLite locks
    /// it the same way, and filelock accepts it.
    Database,
    /// A WAL-mode database: its readers do not wait for a writer, so no
    /// lock can be built on it. Refused, as filelock refuses it.
    Wal,
    /// Not an SQLite database, or one SQLite itself refuses to open.
    NotADatabase,
    /// A database of a newer file format than SQLite 3 writes (read
    /// version above 2): SQLite opens it read only, so a writer fails.
    Newer,
}

impl Header {
    /// Whether the lock may be taken on such a file.
    pub const fn usable(self) -> bool {
        matches!(self, Header::Empty | Header::Database)
    }
}

/// Judges the file's first bytes, `head` (as many as a read of
/// [`HEADER_LEN`] bytes at offset 0 returned), as SQLite does when it opens
/// the database, after filelock's own WAL check (a header with the magic
/// whose byte 18 or 19 is 2, judged on the bytes there are). Past the end of
/// a short file, bytes count as zero, as SQLite reads them.
///
/// ```
/// use swaplock_core::sqlite::{judge_header, Header};
/// assert_eq!(judge_header(b""), Header::Empty);
/// assert_eq!(judge_header(b"SQLite format 3\0\x10\0\x02\x02"), Header::Wal);
/// assert_eq!(judge_header(b"hello"), Header::NotADatabase);
/// ```
pub fn judge_header(head: &[u8]) -> Header {
    if head.is_empty() {
        return Header::Empty;
    }
    let magic = head.len() >= MAGIC.len() && head[..MAGIC.len()] == MAGIC[..];
    // filelock's refusal comes first, on the bytes it reads.
    if magic
        && head
            .get(18..20.min(head.len()))
            .is_some_and(|v| v.contains(&2))
    {
        return Header::Wal;
    }
    let mut page = [0u8; HEADER_LEN];
    let n = head.len().min(HEADER_LEN);
    page[..n].copy_from_slice(&head[..n]);
    if !magic || page[19] > 2 || page[21..24] != [64, 32, 32] {
        return Header::NotADatabase;
    }
    // Bytes 16 and 17: the page size, big-endian, with 1 for 65536.
    let size = (u32::from(page[16]) << 8) | (u32::from(page[17]) << 16);
    if !size.is_power_of_two() || !(512..=65536).contains(&size) {
        return Header::NotADatabase;
    }
    // Byte 20: bytes reserved at the end of each page.
    if size - u32::from(page[20]) < 480 {
        return Header::NotADatabase;
    }
    if page[18] > 2 {
        return Header::Newer;
    }
    Header::Database
}

/// Whether the path still names the file the lock is on (DB3), from the
/// file's identity and what `lstat` of the path answered.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Named {
    /// The same file: a lock on it excludes every later opener.
    Same,
    /// Another file, or nothing, is at the path now: a lock on this file
    /// excludes no one who opens the path from now on.
    Replaced,
    /// `lstat` failed otherwise: the name cannot be vouched for.
    Unknown(Errno),
}

/// Judges `lstat` of the path (`at_path`) against the locked file.
pub fn named(locked: FileId, at_path: Result<FileId, Errno>) -> Named {
    match at_path {
        Ok(id) if id == locked => Named::Same,
        Ok(_) => Named::Replaced,
        Err(e) if e == Errno::NOENT => Named::Replaced,
        Err(e) => Named::Unknown(e),
    }
}

/// One `F_GETLK` answer for a write lock on a range: the lock that would
/// refuse it, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Seen {
    /// No lock is in the way.
    Free,
    /// A read lock of this PID (-1: an open file description lock).
    Read(i32),
    /// A write lock of this PID (-1: an open file description lock).
    Write(i32),
}

/// Who holds the lock, as three `F_GETLK` probes (write locks on PENDING,
/// RESERVED and SHARED) show it; each field a PID (-1: an open file
/// description lock, whose process the kernel does not say).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Holding {
    /// A writer holds the lock (EXCLUSIVE).
    pub exclusive: Option<i32>,
    /// A reader holds it (SHARED): one of them, if several. A writer on
    /// its way holds SHARED too until it holds EXCLUSIVE.
    pub shared: Option<i32>,
    /// A writer that waits for the readers to leave, holding PENDING: no
    /// new reader starts.
    pub pending: Option<i32>,
    /// A writer holding RESERVED (on its way to PENDING, or an SQLite
    /// connection about to write).
    pub reserved: Option<i32>,
}

impl Holding {
    /// Whether anyone holds any part of the lock.
    pub const fn held(&self) -> bool {
        self.exclusive.is_some()
            || self.shared.is_some()
            || self.pending.is_some()
            || self.reserved.is_some()
    }
}

/// Reads the three probes. A write lock on SHARED is the whole lock
/// (EXCLUSIVE, whose holder holds PENDING and RESERVED too); a read lock on
/// PENDING alone is a reader passing its gate, counted as a reader.
pub fn holding(pending: Seen, reserved: Seen, shared: Seen) -> Holding {
    if let Seen::Write(pid) = shared {
        return Holding {
            exclusive: Some(pid),
            ..Holding::default()
        };
    }
    let pid_of_write = |s: Seen| match s {
        Seen::Write(pid) => Some(pid),
        _ => None,
    };
    let reader = match (shared, pending) {
        (Seen::Read(pid), _) | (Seen::Free, Seen::Read(pid)) => Some(pid),
        _ => None,
    };
    Holding {
        exclusive: None,
        shared: reader,
        pending: pid_of_write(pending),
        reserved: pid_of_write(reserved),
    }
}

#[cfg(test)]
mod tests;
