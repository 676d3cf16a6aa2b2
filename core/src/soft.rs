//! The soft-lock protocol: acquire, judge a stale marker under a pin, take
//! it over by an atomic exchange, put back what a killed breaker stranded,
//! release, and refresh a lease (PROTOCOL 7).
//!
//! The protocol is written once, here, over the [`Os`] trait. Every method
//! of that trait is one syscall on the lock's directory (or one input: a
//! liveness probe, a clock reading, a random token, a pause), so the Linux
//! adapter, the deterministic simulator and fault-injecting test adapters
//! all run this same code, and whatever the simulator proves is what ships.
//!
//! The invariants it keeps (PROTOCOL 9), where they are kept:
//! - I1, I2: [`try_acquire`] creates with `O_EXCL` and publishes a complete
//!   record; on a failed write it removes its own file while the descriptor
//!   is open ([`remove_own_file`]), never by name after close.
//! - I3, I4, I11: a stale marker is replaced by an exchange with our complete
//!   marker, never unlinked first; the file taken must be the judged one in
//!   inode and mtime, or it goes back; without an exchange nothing moves.
//! - I5, I6: the judged file is pinned from before the read until the
//!   takeover ends, and inodes are compared only while pinned.
//! - I7, I17: a file is removed by name only while the remover holds it open
//!   and the name shows the same file; a displaced holder writes the released
//!   record instead of unlinking.
//! - I8: verdicts fail closed ([`judge_owner`]).
//! - I9, I10: malformed markers age out on the monotonic watch keyed on
//!   mtime, inode and ctime; empty markers and the strict sentinel never do.
//! - I13, I14, I15, I16: break and restore names carry random tokens and the
//!   breaker's PID; a stranded record is claimed by rename, restored when its
//!   owner may live, and exchanged back with a bounded wait.
//!
//! Where swaplock is stricter than filelock 4.2.11 (each gap found by the
//! simulator in `sim/`; the bytes on disk are the same):
//! - release swaps its marker out through a placeholder instead of `lstat`
//!   then `unlink`, which a peer's exchange can slip between;
//! - release never retries a removal by name after closing its marker
//!   (filelock does, for shares that refuse to delete an open file);
//! - exchange-back never exchanges the lock path while it holds another
//!   process's file (filelock's "feeding" exchange can capture a marker a
//!   new holder created after a ring of breakers formed), and removes its
//!   aside name only if it holds our own file;
//! - an acquire counts as held only if our marker is still linked once its
//!   record is complete: a writer paused mid-record past the malformed grace
//!   period, or a contender paused past a lease mid-takeover, would otherwise
//!   hold a marker a peer has evicted;
//! - stranded-record recovery puts another breaker's placeholder back at
//!   the lock path instead of deleting it as malformed: that breaker may
//!   be alive, holding a live marker aside, and needs its placeholder back
//!   to return it.
//! - I18, I19: a lease heartbeat touches its own inode after checking the
//!   path, and reports a compromise only on the second consecutive miss.
//!
//! Where open files cannot be moved or deleted by others (Windows, see
//! [`Semantics::Handles`]), the same judgement runs, but a stale marker is
//! renamed aside and deleted through a handle on the judged file itself,
//! and our marker is deleted through the handle we hold it by: no name is
//! ever acted on that a peer could have replaced in between, so filelock's
//! link-back of a recreated marker (and the planted-symlink race it had)
//! does not arise. A live holder's marker, open without delete sharing,
//! refuses the handle, so it is never broken there, whatever its lease.

use crate::decide::{
    judge_owner, lease_expired, lifetime_expired, needs_current_start, FileId, FileTime, Instant,
    Liveness, UnchangedWatch, Verdict, WatchKey, MALFORMED_GRACE,
};
use crate::decimal::Decimal;
use crate::errno::Errno;
use crate::host::HostName;
use crate::names::{
    break_name, parse_derived, pid_break_name, restore_name, Derived, Name, NameTooLong, Token,
};
use crate::pid::Pid;
use crate::record::{
    classify, parse_placeholder, Classified, Content, Mode, Owner, Reader, Record, V1Record,
    V2Record, MAX_RECORD_LEN, READ_LIMIT, RELEASED,
};
use crate::start::{StartToken, START_DIGITS_MAX};
use core::fmt;
use core::time::Duration;

/// What kind of node a name refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum NodeKind {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A symbolic link (only `lstat` reports one).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

/// What the protocol needs of a `stat` result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Stat {
    /// `(st_dev, st_ino)`.
    pub id: FileId,
    /// The node's type.
    pub kind: NodeKind,
    /// `st_nlink`.
    pub nlink: u64,
    /// `st_mtime` with nanoseconds.
    pub mtime: FileTime,
    /// `st_ctime` with nanoseconds.
    pub ctime: FileTime,
}

impl Stat {
    /// Whether `self` and `other` are the same file (`dev` and `ino`).
    pub fn same_file(&self, other: &Stat) -> bool {
        self.id == other.id
    }

    /// Whether this is the file a verdict judged: the same inode number and
    /// the same mtime, compared for equality (invariant I6).
    fn is_judged(&self, judged: &Stat) -> bool {
        self.id.ino == judged.id.ino && self.mtime == judged.mtime
    }

    fn watch_key(&self) -> WatchKey {
        WatchKey {
            mtime: self.mtime,
            ino: self.id.ino,
            ctime: self.ctime,
        }
    }
}

/// How the platform's filesystem lets one process move or delete a file
/// another process has open, which decides how a stale marker is taken over
/// and how a marker is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Semantics {
    /// POSIX: any name can be renamed or unlinked whoever has the file open.
    /// A stale marker is taken over by exchanging names with ours (where the
    /// filesystem refuses the exchange, nothing moves), and a file is
    /// removed by name while its remover holds it open.
    Posix,
    /// Windows: a file open without delete sharing, as every marker is for
    /// its holder's whole hold, cannot be renamed or deleted by anyone. A
    /// stale marker is moved aside and deleted through a handle that holds
    /// it (so the file moved is the file judged), and our own marker is
    /// deleted through the handle we hold it by. There is no exchange.
    Handles,
}

/// The operations the protocol performs, each one syscall on the lock's
/// directory or one input from the world. Names are final components inside
/// the lock's directory.
///
/// An implementation performs exactly what each method's doc says and
/// nothing more: no retries, no decisions. Errors are the OS's `errno`.
pub trait Os {
    /// An open descriptor.
    type File;

    /// `open(name, O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC[|O_TRUNC], mode)`.
    fn create_new(&mut self, name: &[u8], mode: u32, truncate: bool) -> Result<Self::File, Errno>;
    /// `open(name, O_RDONLY|O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC)`.
    fn open_read(&mut self, name: &[u8]) -> Result<Self::File, Errno>;
    /// `open(name, O_PATH|O_NOFOLLOW|O_CLOEXEC)`, or where there is no
    /// `O_PATH` a read-only non-blocking `O_NOFOLLOW` open: a pin that keeps
    /// the inode allocated without reading it.
    fn pin(&mut self, name: &[u8]) -> Result<Self::File, Errno>;
    /// `write(file, buf)`.
    fn write(&mut self, file: &Self::File, buf: &[u8]) -> Result<usize, Errno>;
    /// `pwrite(file, buf, offset)`.
    fn write_at(&mut self, file: &Self::File, buf: &[u8], offset: u64) -> Result<usize, Errno>;
    /// `ftruncate(file, len)`.
    fn truncate(&mut self, file: &Self::File, len: u64) -> Result<(), Errno>;
    /// `fchmod(file, mode)`.
    fn chmod(&mut self, file: &Self::File, mode: u32) -> Result<(), Errno>;
    /// `futimens(file, NULL)`: set the file's times to now.
    fn touch(&mut self, file: &Self::File) -> Result<(), Errno>;
    /// `read(file, buf)`.
    fn read(&mut self, file: &Self::File, buf: &mut [u8]) -> Result<usize, Errno>;
    /// `fstat(file)`.
    fn fstat(&mut self, file: &Self::File) -> Result<Stat, Errno>;
    /// `close(file)`.
    fn close(&mut self, file: Self::File);
    /// `lstat(name)`.
    fn lstat(&mut self, name: &[u8]) -> Result<Stat, Errno>;
    /// `renameat2(a, b, RENAME_EXCHANGE)` (or `renameatx_np(RENAME_SWAP)`):
    /// swap two names in one step.
    fn exchange(&mut self, a: &[u8], b: &[u8]) -> Result<(), Errno>;
    /// `rename(from, to)`.
    fn rename(&mut self, from: &[u8], to: &[u8]) -> Result<(), Errno>;
    /// `unlink(name)`.
    fn unlink(&mut self, name: &[u8]) -> Result<(), Errno>;
    /// Lists the directory's entry names (`getdents`), calling `visit` for each.
    fn list(&mut self, visit: &mut dyn FnMut(&[u8])) -> Result<(), Errno>;
    /// Whether the process `pid` on this host is alive (`kill(pid, 0)`).
    fn probe(&mut self, pid: Pid) -> Liveness;
    /// The start token of process `pid` now, if it can be read exactly.
    fn start_token(&mut self, pid: Pid) -> Option<StartToken>;
    /// Whether a task in another PID namespace runs as `pid` with start
    /// token `start` (Linux's `/proc` scan; `false` elsewhere).
    fn runs_elsewhere(&mut self, pid: Pid, start: Decimal<'_>) -> bool;
    /// A monotonic clock reading.
    fn now(&mut self) -> Instant;
    /// The wall clock, as file times are.
    fn wall(&mut self) -> FileTime;
    /// Pause for `duration`.
    fn sleep(&mut self, duration: Duration);
    /// 128 bits from a cryptographic random source.
    fn token(&mut self) -> Token;
    /// Registers `name` in this process's set of claims in progress;
    /// `false` if another thread of this process has it.
    fn begin_claim(&mut self, name: &[u8]) -> bool;
    /// Removes `name` from this process's set of claims in progress.
    fn end_claim(&mut self, name: &[u8]);

    /// Which rules the filesystem follows ([`Semantics::Posix`] unless an
    /// adapter says otherwise).
    fn semantics(&self) -> Semantics {
        Semantics::Posix
    }
    /// [`Semantics::Handles`] only: renames the file `file` holds (opened by
    /// [`Os::create_new`] or [`Os::pin`], both with delete access there) to
    /// `to`, failing if `to` exists (`FileRenameInfo`, no replace).
    fn rename_file(&mut self, file: &Self::File, to: &[u8]) -> Result<(), Errno> {
        let _ = (file, to);
        Err(Errno::NOSYS)
    }
    /// [`Semantics::Handles`] only: deletes the file `file` holds
    /// (`FileDispositionInfo`).
    fn remove_file(&mut self, file: &Self::File) -> Result<(), Errno> {
        let _ = file;
        Err(Errno::NOSYS)
    }
}

/// Which soft lock, and so which record it writes and which it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Kind {
    /// `SoftFileLock`: protocol 1 records.
    Soft,
    /// `MarkerSoftFileLock`: protocol 2, `mode=exclusive`.
    Marker,
    /// `SoftFileLease`: protocol 2, `mode=lease`, expiring unless refreshed.
    Lease,
}

impl Kind {
    fn reader(self) -> Reader {
        match self {
            Kind::Soft => Reader::Protocol1,
            Kind::Marker | Kind::Lease => Reader::Protocol2,
        }
    }
}

/// The terms of a lease this process publishes.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LeaseTerms {
    /// The lease duration in seconds (finite, positive).
    pub duration: f64,
    /// This acquisition's claim token.
    pub token: Token,
}

/// Everything an attempt needs to know about the lock and this process.
#[derive(Clone, Copy, Debug)]
pub struct Config<'a> {
    /// The kind of soft lock.
    pub kind: Kind,
    /// The lock file's final path component.
    pub lock: &'a [u8],
    /// This process's PID.
    pub pid: Pid,
    /// This process's host name as records carry it.
    pub host: &'a str,
    /// This process's start token, when it can be computed exactly.
    pub start: Option<StartToken>,
    /// An explicit file mode for our markers (`None`: 0o666, less 0o022).
    pub mode: Option<u32>,
    /// The lease terms (required for [`Kind::Lease`]).
    pub lease: Option<LeaseTerms>,
    /// Break markers older than this by their mtime (Soft and Marker only).
    pub lifetime: Option<Duration>,
}

impl Config<'_> {
    fn marker_mode(&self) -> u32 {
        self.mode.unwrap_or(0o666) & !0o022
    }
}

/// An error that ends an acquire or release.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error {
    /// A syscall failed.
    Os {
        /// Which operation.
        op: Op,
        /// The error it returned.
        errno: Errno,
    },
    /// The lock path is a directory.
    IsDirectory,
    /// A derived name would be longer than the file-name limit.
    NameTooLong,
    /// Our own record cannot be encoded (a host or token a reader would
    /// not read back).
    Record,
    /// A lease holder published a duration other than ours (invariant I20).
    LeaseMismatch {
        /// The holder's duration in seconds.
        published: f64,
    },
}

/// The operation an [`Error::Os`] comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Op {
    /// Creating the marker.
    Create,
    /// Examining the lock path.
    Stat,
    /// Writing the record.
    Write,
    /// Removing the marker.
    Remove,
    /// Closing the marker.
    Close,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Os { op, errno } => write!(f, "{op:?} failed: {errno}"),
            Error::IsDirectory => f.write_str("the lock path is a directory"),
            Error::NameTooLong => f.write_str("a derived file name is too long"),
            Error::Record => f.write_str("this process's record cannot be encoded"),
            Error::LeaseMismatch { published } => {
                write!(f, "the holder's lease lasts {published}s")
            }
        }
    }
}

impl From<NameTooLong> for Error {
    fn from(_: NameTooLong) -> Self {
        Error::NameTooLong
    }
}

/// A held soft lock: our marker's descriptor, kept open for the whole hold
/// (it pins our inode), and its identity.
#[derive(Debug)]
pub struct Held<F> {
    /// Our marker, open.
    pub file: F,
    /// Our marker's `(dev, ino)`.
    pub id: FileId,
}

/// Who keeps the lock from us, as far as an attempt saw.
// The core has no allocator, so a foreign host is reported by value.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Holder {
    /// Nothing more is known (a live local holder, a malformed marker being
    /// watched, a race with a peer).
    Unknown,
    /// An empty marker, which names no owner and is never broken.
    Recordless,
    /// A holder on another host, which this host cannot probe.
    Foreign {
        /// Its PID there.
        pid: Pid,
        /// Its host.
        host: HostName,
    },
}

/// The outcome of one attempt.
#[allow(clippy::large_enum_variant)]
#[must_use]
#[derive(Debug)]
pub enum Attempt<F> {
    /// The lock is ours.
    Acquired(Held<F>),
    /// Someone else holds it; try again later.
    Busy(Holder),
}

/// A contender's memory between attempts: the unchanged-marker watch.
#[derive(Clone, Copy, Debug, Default)]
pub struct Contender {
    watch: UnchangedWatch,
}

impl Contender {
    /// A contender that has seen nothing.
    pub const fn new() -> Self {
        Contender {
            watch: UnchangedWatch::new(),
        }
    }
}

/// Looks at a marker with the contender's unchanged-marker watch: how long
/// it has been seen with this key (zero on a change). For simulations of
/// other policies; [`try_acquire`] keeps the watch itself.
pub fn observe_watch(contender: &mut Contender, key: WatchKey, now: Instant) -> Duration {
    contender.watch.observe(key, now)
}

/// One attempt to acquire (PROTOCOL 7.2): create the marker exclusively and
/// write our record; if a marker exists, judge it and take it over when it
/// is stale.
pub fn try_acquire<O: Os>(
    os: &mut O,
    cfg: &Config<'_>,
    contender: &mut Contender,
) -> Result<Attempt<O::File>, Error> {
    if let Some(lifetime) = cfg.lifetime {
        if cfg.kind != Kind::Lease {
            if let Some(held) = break_expired(os, cfg, lifetime)? {
                return Ok(Attempt::Acquired(held));
            }
        }
    }
    let file = match os.create_new(cfg.lock, cfg.marker_mode(), true) {
        Ok(file) => file,
        Err(e) if e == Errno::EXIST => return judge_stale(os, cfg, contender),
        // A marker deleted while a reader still has it open stays "delete
        // pending" under its name until that reader closes it; creating
        // over it is refused with EACCES. Someone is at work: contention.
        Err(e) if e == Errno::ACCES && os.semantics() == Semantics::Handles => {
            return Ok(Attempt::Busy(Holder::Unknown))
        }
        Err(errno) => {
            return Err(Error::Os {
                op: Op::Create,
                errno,
            })
        }
    };
    finish_create(os, cfg, file)
}

/// Publishes our record in the marker just created at the lock path as
/// `file`; held only if the marker is still linked once complete.
fn finish_create<O: Os>(
    os: &mut O,
    cfg: &Config<'_>,
    file: O::File,
) -> Result<Attempt<O::File>, Error> {
    match publish(os, cfg, &file) {
        // A writer paused mid-record longer than the malformed grace period
        // has its half-written marker evicted (invariant I9): it holds the
        // lock only if its marker, complete now, is still linked. Complete,
        // it names a live process and cannot be evicted any more.
        Ok(_) if !os.fstat(&file).is_ok_and(|st| st.nlink > 0) => {
            os.close(file);
            Ok(Attempt::Busy(Holder::Unknown))
        }
        Ok(id) => Ok(Attempt::Acquired(Held { file, id })),
        Err(e) => {
            // Invariant I2: remove our file while it is open, never by name
            // after close, so a successor's marker is never taken for ours.
            let _ = remove_own_file(os, cfg, &file);
            os.close(file);
            Err(e)
        }
    }
}

/// The acquire driver: attempts until the lock is ours, the caller gives
/// up (`blocking == false` after the first attempt, or `timeout` elapsed),
/// pausing `poll` between attempts (cut to the time left). The first
/// attempt always runs. Production and the simulator both run this loop;
/// a wake-on-change mechanism would replace only the pause.
pub fn acquire<O: Os>(
    os: &mut O,
    cfg: &Config<'_>,
    contender: &mut Contender,
    blocking: bool,
    timeout: Option<Duration>,
    poll: Duration,
) -> Result<Attempt<O::File>, Error> {
    let started = os.now();
    loop {
        let holder = match try_acquire(os, cfg, contender)? {
            Attempt::Acquired(held) => return Ok(Attempt::Acquired(held)),
            Attempt::Busy(holder) => holder,
        };
        let remaining = timeout.map(|t| t.saturating_sub(os.now().since(started)));
        if !blocking || remaining == Some(Duration::ZERO) {
            return Ok(Attempt::Busy(holder));
        }
        os.sleep(remaining.map_or(poll, |r| r.min(poll)));
    }
}

/// fstat, apply the explicit mode, write the whole record.
fn publish<O: Os>(os: &mut O, cfg: &Config<'_>, file: &O::File) -> Result<FileId, Error> {
    let id = os
        .fstat(file)
        .map_err(|errno| Error::Os {
            op: Op::Stat,
            errno,
        })?
        .id;
    if let Some(mode) = cfg.mode {
        match os.chmod(file, mode & !0o022) {
            Err(e) if e != Errno::PERM && e != Errno::ACCES => {
                return Err(Error::Os {
                    op: Op::Write,
                    errno: e,
                })
            }
            _ => {}
        }
    }
    let mut buf = [0u8; MAX_RECORD_LEN];
    let len = own_record(cfg, &mut buf)?;
    write_all(os, file, &buf[..len]).map_err(|errno| Error::Os {
        op: Op::Write,
        errno,
    })?;
    Ok(id)
}

/// Encodes this process's record for its kind into `buf`.
pub fn own_record(cfg: &Config<'_>, buf: &mut [u8; MAX_RECORD_LEN]) -> Result<usize, Error> {
    let mut start_digits = [0u8; START_DIGITS_MAX];
    let start = cfg.start.map(|s| s.to_decimal(&mut start_digits));
    let token_hex;
    let record = match cfg.kind {
        Kind::Soft => Record::V1(V1Record {
            pid: cfg.pid,
            host: cfg.host,
            start,
        }),
        Kind::Marker => Record::V2(V2Record {
            pid: cfg.pid,
            host: cfg.host,
            mode: Mode::Exclusive,
            token: None,
            duration: None,
            start,
        }),
        Kind::Lease => {
            let terms = cfg.lease.ok_or(Error::Record)?;
            token_hex = terms.token.hex();
            Record::V2(V2Record {
                pid: cfg.pid,
                host: cfg.host,
                mode: Mode::Lease,
                token: Some(core::str::from_utf8(&token_hex).map_err(|_| Error::Record)?),
                duration: Some(terms.duration),
                start,
            })
        }
    };
    record.encode(buf).map_err(|_| Error::Record)
}

/// Writes all of `buf`, looping over short writes; a write of zero bytes
/// is `EIO`.
fn write_all<O: Os>(os: &mut O, file: &O::File, mut buf: &[u8]) -> Result<(), Errno> {
    while !buf.is_empty() {
        match os.write(file, buf) {
            Ok(0) => return Err(Errno::IO),
            Ok(n) => buf = &buf[n.min(buf.len())..],
            Err(e) if e == Errno::INTR => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The content read from a marker, in a fixed buffer.
struct Read {
    buf: [u8; READ_LIMIT],
    len: usize,
    regular: bool,
    stat: Stat,
}

impl Read {
    fn content(&self) -> Content<'_> {
        if self.regular {
            Content::Bytes(&self.buf[..self.len])
        } else {
            Content::NotRegular
        }
    }
}

/// Reads a marker as filelock does (PROTOCOL 3.1): `lstat`, a non-following
/// open, `fstat`, at most [`READ_LIMIT`] bytes.
fn read_marker<O: Os>(os: &mut O, name: &[u8]) -> Result<Read, Errno> {
    let st = os.lstat(name)?;
    let mut read = Read {
        buf: [0; READ_LIMIT],
        len: 0,
        regular: false,
        stat: st,
    };
    if st.kind != NodeKind::Regular {
        return Ok(read);
    }
    let file = os.open_read(name)?;
    let result = (|| {
        let st = os.fstat(&file)?;
        read.stat = st;
        if st.kind != NodeKind::Regular {
            return Ok(());
        }
        read.regular = true;
        while read.len < READ_LIMIT {
            match os.read(&file, &mut read.buf[read.len..]) {
                Ok(0) => break,
                Ok(n) => read.len += n,
                Err(e) if e == Errno::INTR => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })();
    os.close(file);
    result.map(|()| read)
}

/// The outcome of a takeover.
enum Takeover<F> {
    /// The lock is ours: the judged file is gone and our marker is at the path.
    Took(Held<F>),
    /// Nothing was taken (or what was taken went back).
    Busy,
}

impl<F> Takeover<F> {
    fn attempt(self) -> Attempt<F> {
        match self {
            Takeover::Took(held) => Attempt::Acquired(held),
            Takeover::Busy => Attempt::Busy(Holder::Unknown),
        }
    }
}

/// The stale step (PROTOCOL 7.7): pin, read, guard, judge per kind, take
/// over. OS errors end the step as contention, as filelock swallows them.
fn judge_stale<O: Os>(
    os: &mut O,
    cfg: &Config<'_>,
    contender: &mut Contender,
) -> Result<Attempt<O::File>, Error> {
    under_pin(
        os,
        cfg,
        || Attempt::Busy(Holder::Unknown),
        |os, read, pin| judge_read(os, cfg, contender, read, pin),
    )
}

/// Pins the lock path, reads the marker, and runs `judge` on what it read,
/// holding the pin until `judge` returns (invariant I5). `idle` is the
/// answer when there is nothing to judge: no marker, a failed read, or a
/// file read that is not the pinned one (the path was replaced in between,
/// so its inode number proves nothing). A failed pin other than `ENOENT`
/// continues unpinned, as filelock does: the judgement still runs, but
/// under [`Semantics::Handles`] nothing is then moved (there the pin fails
/// exactly while a live holder or another breaker holds the file).
fn under_pin<O: Os, T>(
    os: &mut O,
    cfg: &Config<'_>,
    idle: impl Fn() -> T,
    judge: impl FnOnce(&mut O, &Read, Option<&O::File>) -> Result<T, Error>,
) -> Result<T, Error> {
    let pin = match os.pin(cfg.lock) {
        Ok(pin) => Some(pin),
        Err(e) if e == Errno::NOENT => return Ok(idle()),
        Err(_) => None,
    };
    let pinned = match &pin {
        Some(p) => os.fstat(p).ok().map(|st| st.id.ino),
        None => None,
    };
    let result = match read_marker(os, cfg.lock) {
        // A directory is nobody's marker: an error, never judged or moved.
        Ok(read) if read.stat.kind == NodeKind::Directory => Err(Error::IsDirectory),
        Ok(read) if pinned.is_none_or(|ino| ino == read.stat.id.ino) => {
            judge(os, &read, pin.as_ref())
        }
        _ => Ok(idle()),
    };
    if let Some(pin) = pin {
        os.close(pin);
    }
    result
}

/// Judges the marker read under the pin, per kind (PROTOCOL 7.7).
fn judge_read<O: Os>(
    os: &mut O,
    cfg: &Config<'_>,
    contender: &mut Contender,
    read: &Read,
    pin: Option<&O::File>,
) -> Result<Attempt<O::File>, Error> {
    let judged = read.stat;
    let busy = |read: &Read| describe_holder(read.content(), cfg.kind, cfg.host);
    let mut pid_buf = [0u8; 10];
    let mut digits = [0u8; 24];
    let owner = match classify(read.content(), cfg.kind.reader()) {
        // Invariant I10: never judged stale.
        Classified::Sentinel | Classified::Recordless => return Ok(Attempt::Busy(busy(read))),
        Classified::Malformed(_) => {
            // Invariant I9: evict only after the grace period unchanged.
            if contender.watch.observe(judged.watch_key(), os.now()) < MALFORMED_GRACE {
                return Ok(Attempt::Busy(busy(read)));
            }
            // A placeholder names a breaker that may have stranded a marker.
            let text = core::str::from_utf8(&read.buf[..read.len]).ok();
            let breaker = text
                .and_then(parse_placeholder)
                .and_then(|d| copy_decimal(d, &mut digits));
            return Ok(
                take_over(os, cfg, &judged, pin, breaker.as_ref().map(BreakerRef::get))?.attempt(),
            );
        }
        Classified::V1(record) => record.owner(),
        Classified::V2(record) => {
            if let Mode::Unknown(_) = record.mode {
                // A contract this version does not know is never reclaimed.
                return Ok(Attempt::Busy(busy(read)));
            }
            record.owner()
        }
    };
    let stale = is_stale(os, cfg, &owner);
    if !stale {
        if let Classified::V2(record) = classify(read.content(), cfg.kind.reader()) {
            if cfg.kind == Kind::Lease && record.mode == Mode::Lease {
                let own = cfg.lease.map_or(f64::NAN, |t| t.duration);
                let published = record.duration.unwrap_or(f64::NAN);
                // filelock compares the two doubles exactly (invariant I20).
                #[allow(clippy::float_cmp)]
                if published != own {
                    return Err(Error::LeaseMismatch { published });
                }
                // A live lease holder keeps the lease only while it refreshes.
                let unchanged = contender.watch.observe(judged.watch_key(), os.now());
                if lease_expired(unchanged, published) {
                    return Ok(take_over(os, cfg, &judged, pin, None)?.attempt());
                }
            }
        }
        return Ok(Attempt::Busy(busy(read)));
    }
    let breaker = copy_decimal(pid_decimal(owner.pid, &mut pid_buf), &mut digits);
    Ok(take_over(os, cfg, &judged, pin, breaker.as_ref().map(BreakerRef::get))?.attempt())
}

/// A breaker PID copied out of a record or placeholder buffer.
struct BreakerRef<'b> {
    digits: Decimal<'b>,
}

impl<'b> BreakerRef<'b> {
    fn get(&self) -> Decimal<'b> {
        self.digits
    }
}

fn copy_decimal<'b>(d: Decimal<'_>, buf: &'b mut [u8; 24]) -> Option<BreakerRef<'b>> {
    // A breaker PID longer than 24 digits names no process and no break
    // file this protocol writes: treat it as no breaker.
    let src = d.as_str().as_bytes();
    let dst = buf.get_mut(..src.len())?;
    dst.copy_from_slice(src);
    Decimal::parse(dst).map(|digits| BreakerRef { digits })
}

fn pid_decimal(pid: Pid, buf: &mut [u8; 10]) -> Decimal<'_> {
    let mut at = buf.len();
    let mut v = pid.get();
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    Decimal::parse(&buf[at..]).unwrap_or(Decimal::ZERO)
}

/// Names the holder of a marker whose owner this host cannot probe, as
/// filelock's `Timeout` does: an empty marker, or a record (read as this
/// kind reads it, protocol 1 as the fallback) naming another host.
pub fn describe_holder(content: Content<'_>, kind: Kind, this_host: &str) -> Holder {
    let Ok(text) = crate::record::decode(content) else {
        return Holder::Unknown;
    };
    if text.is_empty() {
        return Holder::Recordless;
    }
    let v2 = match kind.reader() {
        Reader::Protocol2 => V2Record::parse(text).ok().map(|r| r.owner()),
        Reader::Protocol1 => None,
    };
    let Some(owner) = v2.or_else(|| V1Record::parse(text).ok().map(|r| r.owner())) else {
        return Holder::Unknown;
    };
    if owner.host == this_host {
        return Holder::Unknown;
    }
    let mut host = HostName::new();
    // A recorded host longer than a host name is cut for the report only.
    for c in owner.host.chars() {
        if host.push(c).is_err() {
            break;
        }
    }
    Holder::Foreign {
        pid: owner.pid,
        host,
    }
}

/// Whether the recorded owner is provably gone (PROTOCOL 4.5).
fn is_stale<O: Os>(os: &mut O, cfg: &Config<'_>, owner: &Owner<'_>) -> bool {
    if owner.host != cfg.host {
        return false;
    }
    let probe = os.probe(owner.pid);
    let current = if needs_current_start(owner, cfg.host, probe) {
        os.start_token(owner.pid)
    } else {
        None
    };
    match judge_owner(owner, cfg.host, probe, current) {
        Verdict::Held(_) => false,
        Verdict::Stale => true,
        Verdict::StaleUnlessRunsElsewhere => match owner.start {
            Some(start) => !os.runs_elsewhere(owner.pid, start),
            None => true,
        },
    }
}

/// The lifetime break (PROTOCOL 7.12): a marker older than `lifetime` by
/// its mtime is taken over whatever it holds, under the same pin and by
/// the same exchange as a stale one.
fn break_expired<O: Os>(
    os: &mut O,
    cfg: &Config<'_>,
    lifetime: Duration,
) -> Result<Option<Held<O::File>>, Error> {
    under_pin(
        os,
        cfg,
        || None,
        |os, read, pin| {
            if !lifetime_expired(os.wall(), read.stat.mtime, lifetime) {
                return Ok(None);
            }
            let mut digits = [0u8; 24];
            let mut pid_buf = [0u8; 10];
            let breaker = match classify(read.content(), cfg.kind.reader()) {
                Classified::V1(r) => copy_decimal(pid_decimal(r.pid, &mut pid_buf), &mut digits),
                Classified::V2(r) => copy_decimal(pid_decimal(r.pid, &mut pid_buf), &mut digits),
                _ => None,
            };
            Ok(
                match take_over(
                    os,
                    cfg,
                    &read.stat,
                    pin,
                    breaker.as_ref().map(BreakerRef::get),
                )? {
                    Takeover::Took(held) => Some(held),
                    Takeover::Busy => None,
                },
            )
        },
    )
}

/// Takes over the judged marker `judged`, whose writer (or placeholder's
/// breaker) is `breaker`, the platform's way. The caller holds the pin
/// (`None` if pinning failed) throughout.
fn take_over<O: Os>(
    os: &mut O,
    cfg: &Config<'_>,
    judged: &Stat,
    pin: Option<&O::File>,
    breaker: Option<Decimal<'_>>,
) -> Result<Takeover<O::File>, Error> {
    match os.semantics() {
        Semantics::Posix => take_over_by_exchange(os, cfg, judged, breaker),
        Semantics::Handles => take_over_by_handle(os, cfg, judged, pin),
    }
}

/// The takeover where open files cannot be moved (PROTOCOL 7.10 step 4,
/// made exact). The pin is a handle with delete access that does not share
/// delete, so it opened only because nobody holds the file without delete
/// sharing (no live holder has it), and no other breaker can pin the file
/// while we hold it. The judged file is renamed aside
/// through that handle, then deleted through it, and our marker is created
/// at the freed path. filelock renames by name and, when the file it moved
/// proves to be a recreated one, links it back; renaming the handle's file
/// never moves anything but the file judged, so nothing ever needs linking
/// back, and no name a peer may replace (with a symlink, say) is followed.
/// The lock path is empty between the delete and our create, as it is in
/// filelock's break there; only a file nobody holds is ever removed.
fn take_over_by_handle<O: Os>(
    os: &mut O,
    cfg: &Config<'_>,
    judged: &Stat,
    pin: Option<&O::File>,
) -> Result<Takeover<O::File>, Error> {
    // Without a handle on the judged file nothing moves: the pin fails while
    // a live holder keeps the marker open.
    let Some(pin) = pin else {
        return Ok(Takeover::Busy);
    };
    match os.fstat(pin) {
        Ok(st) if st.is_judged(judged) && st.nlink > 0 => {}
        _ => return Ok(Takeover::Busy),
    }
    let token = os.token();
    let aside = pid_break_name(cfg.lock, cfg.pid, &token)?;
    if os.rename_file(pin, &aside).is_err() {
        return Ok(Takeover::Busy);
    }
    // A failed delete leaves the stale file under our break name, which no
    // reader takes for a marker; the lock path is free either way.
    let _ = os.remove_file(pin);
    let Ok(file) = os.create_new(cfg.lock, cfg.marker_mode(), true) else {
        return Ok(Takeover::Busy);
    };
    Ok(match finish_create(os, cfg, file)? {
        Attempt::Acquired(held) => Takeover::Took(held),
        Attempt::Busy(_) => Takeover::Busy,
    })
}

/// The exchange takeover (PROTOCOL 7.8) of the judged marker `judged`,
/// whose writer (or placeholder's breaker) is `breaker`. The caller holds
/// the pin throughout.
fn take_over_by_exchange<O: Os>(
    os: &mut O,
    cfg: &Config<'_>,
    judged: &Stat,
    breaker: Option<Decimal<'_>>,
) -> Result<Takeover<O::File>, Error> {
    match os.lstat(cfg.lock) {
        Ok(st) if st.is_judged(judged) => {}
        _ => return Ok(Takeover::Busy),
    }
    if let Some(breaker) = breaker {
        if recover_stranded(os, cfg, judged, breaker)? {
            return Ok(Takeover::Busy);
        }
    }
    let token = os.token();
    let aside = pid_break_name(cfg.lock, cfg.pid, &token)?;
    let Ok(file) = os.create_new(&aside, cfg.marker_mode(), false) else {
        return Ok(Takeover::Busy);
    };
    let Ok(id) = publish(os, cfg, &file) else {
        abandon(os, cfg, file, &aside, false);
        return Ok(Takeover::Busy);
    };
    // A peer acted during the scan or the write: leave everything as it is.
    match os.lstat(cfg.lock) {
        Ok(st) if st.is_judged(judged) => {}
        _ => {
            abandon(os, cfg, file, &aside, false);
            return Ok(Takeover::Busy);
        }
    }
    // Invariant I3: the lock path is never empty; I11: no exchange, no move.
    if os.exchange(&aside, cfg.lock).is_err() {
        abandon(os, cfg, file, &aside, false);
        return Ok(Takeover::Busy);
    }
    // Invariant I4: we hold the lock only if we took the judged file.
    match os.lstat(&aside) {
        Ok(taken) if taken.is_judged(judged) => {}
        _ => {
            abandon(os, cfg, file, &aside, true);
            return Ok(Takeover::Busy);
        }
    }
    if os.unlink(&aside).is_err() {
        abandon(os, cfg, file, &aside, true);
        return Ok(Takeover::Busy);
    }
    // Our marker must still exist: a contender that paused here longer than
    // a lease would find that a peer expired it, took it over and removed it
    // meanwhile. A peer's check may hold it aside for an instant, which keeps
    // it linked, so the link count, not the lock path, tells.
    if !os.fstat(&file).is_ok_and(|st| st.nlink > 0) {
        os.close(file);
        return Ok(Takeover::Busy);
    }
    Ok(Takeover::Took(Held { file, id }))
}

/// Abandons a takeover (PROTOCOL 7.9): put back what we took if asked, then
/// remove our file from whichever name holds it, then close it.
fn abandon<O: Os>(os: &mut O, cfg: &Config<'_>, file: O::File, aside: &[u8], put_back: bool) {
    let done = if put_back {
        exchange_back(os, cfg.lock, aside, &file)
    } else {
        true
    };
    if let Ok(own) = os.fstat(&file) {
        if done {
            unlink_if_same(os, cfg.lock, &own);
        }
        unlink_if_same(os, aside, &own);
    }
    os.close(file);
}

/// Unlinks `name` if it names the open file whose stat is `own` (I7: the
/// caller holds that file open).
fn unlink_if_same<O: Os>(os: &mut O, name: &[u8], own: &Stat) {
    if os.lstat(name).is_ok_and(|st| st.same_file(own)) {
        let _ = os.unlink(name);
    }
}

/// How long exchange-back waits while our file is not at the lock path
/// (invariant I16), and how long it pauses between looks.
const EXCHANGE_BACK_LIMIT: Duration = Duration::from_secs(2);
const EXCHANGE_BACK_PAUSE: Duration = Duration::from_micros(500);

/// Puts our own file (open as `file`) back under `aside`, so that what we
/// took returns to the lock path (PROTOCOL 7.9). While our file sits at the
/// lock path there is no deadline: it must come off. Otherwise it waits up
/// to 2 s for nested breakers to undo their exchanges. Unlike filelock, it
/// never exchanges while the lock path holds another file: the simulator
/// showed that such a "feeding" exchange can capture a marker a new holder
/// created after the ring formed, and a second holder then enters. A ring
/// left by a killed breaker is unwound by stranded-record recovery instead.
/// At the end it removes the aside name only if it holds our own file.
fn exchange_back<O: Os>(os: &mut O, lock: &[u8], aside: &[u8], file: &O::File) -> bool {
    let Ok(own) = os.fstat(file) else {
        return false;
    };
    let start = os.now();
    loop {
        match os.lstat(aside) {
            Ok(st) if st.same_file(&own) => break,
            Ok(_) => {}
            Err(e) if e == Errno::NOENT => break,
            Err(_) => return false,
        }
        let ours = match os.lstat(lock) {
            Ok(st) => st.same_file(&own),
            Err(e) if e == Errno::NOENT => break,
            Err(_) => return false,
        };
        if ours {
            // Undo our own exchange: what we took goes back to the lock path,
            // our file comes off it.
            if os.exchange(aside, lock).is_err() {
                return false;
            }
        } else if os.now().since(start) >= EXCHANGE_BACK_LIMIT {
            return false;
        } else {
            // Our file sits under a nested breaker's name: wait for that
            // breaker to undo its exchange, which puts our file back at the
            // lock path. Never exchange the lock path while it holds a file
            // that is not ours: that would take whatever is there now,
            // possibly a marker a new holder created after the ring formed.
            os.sleep(EXCHANGE_BACK_PAUSE);
        }
    }
    // Remove the aside name only if it holds our own file: when a name went
    // missing above (say the lock path was removed), the aside may hold the
    // file we took, which may be a live holder's marker. filelock unlinks it
    // without looking; a foreign file is left in place here, and the
    // exchange-back reports it did not settle.
    match os.lstat(aside) {
        Ok(st) if st.same_file(&own) => os.unlink(aside).is_ok(),
        Ok(_) => false,
        Err(e) => e == Errno::NOENT,
    }
}

/// Removes our own file while it is open (PROTOCOL 7.3): swap it out
/// through a placeholder, so that a peer's marker found at the lock path
/// goes back, or, where nothing can be exchanged, unlink it only if the
/// path still shows it.
pub fn remove_own_file<O: Os>(os: &mut O, cfg: &Config<'_>, file: &O::File) -> Result<(), Errno> {
    if os.semantics() == Semantics::Handles {
        // Our handle denies delete sharing, so the file is still ours, at
        // the lock path: delete exactly it.
        return match os.remove_file(file) {
            Err(e) if e != Errno::NOENT => Err(e),
            _ => Ok(()),
        };
    }
    let own = os.fstat(file)?;
    remove_own(os, cfg, &own)
}

/// [`remove_own_file`] for our open file whose stat is `own`.
fn remove_own<O: Os>(os: &mut O, cfg: &Config<'_>, own: &Stat) -> Result<(), Errno> {
    match break_lock_file(os, cfg, own) {
        Err(e) if e != Errno::NOENT => return Err(e),
        _ => {}
    }
    match os.lstat(cfg.lock) {
        Ok(st) if st.same_file(own) => match os.unlink(cfg.lock) {
            Err(e) if e != Errno::NOENT => Err(e),
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Takes the file judged by `judged` off the lock path through an exchange
/// with a placeholder naming this process (PROTOCOL 7.10), so the path is
/// empty only once the judged file is gone. Without an exchange it does
/// nothing (invariant I11).
fn break_lock_file<O: Os>(os: &mut O, cfg: &Config<'_>, judged: &Stat) -> Result<(), Errno> {
    let current = os.lstat(cfg.lock)?;
    if !current.is_judged(judged) {
        return Ok(());
    }
    let token = os.token();
    let brk = pid_break_name(cfg.lock, cfg.pid, &token).map_err(|_| Errno::INVAL)?;
    let file = os.create_new(&brk, 0o600, false)?;
    let mut buf = [0u8; 40];
    let exchanged = match Record::Placeholder(cfg.pid).encode(&mut buf) {
        Ok(n) => write_all(os, &file, &buf[..n])
            .and_then(|()| os.exchange(&brk, cfg.lock))
            .is_ok(),
        Err(_) => false,
    };
    if !exchanged {
        let _ = os.unlink(&brk);
        os.close(file);
        return Ok(());
    }
    match os.lstat(&brk) {
        Ok(grabbed) if grabbed.is_judged(judged) => {
            let _ = os.unlink(&brk);
            // Our descriptor keeps the placeholder's inode, so a match at
            // the path is still ours.
            if let Ok(ph) = os.fstat(&file) {
                unlink_if_same(os, cfg.lock, &ph);
            }
        }
        _ => {
            exchange_back(os, cfg.lock, &brk, &file);
        }
    }
    os.close(file);
    Ok(())
}

/// How many stranded candidates one recovery considers; more count as held
/// (fail closed) until some are dealt with.
const MAX_CANDIDATES: usize = 16;

/// Recovery of a killed breaker's stranded record (PROTOCOL 7.11). Returns
/// `true` when the lock counts as held (a live record was put back, a live
/// recoverer is at work, or nothing can be concluded).
fn recover_stranded<O: Os>(
    os: &mut O,
    cfg: &Config<'_>,
    judged: &Stat,
    breaker: Decimal<'_>,
) -> Result<bool, Error> {
    let mut candidates: heapless::Vec<(Name, bool), MAX_CANDIDATES> = heapless::Vec::new();
    let mut held = false;
    let mut overflow = false;
    let mut found: heapless::Vec<(Name, Option<Pid>), MAX_CANDIDATES> = heapless::Vec::new();
    let listed = os.list(&mut |entry| match parse_derived(cfg.lock, entry) {
        Some(Derived::Break { breaker: b, .. }) if b == breaker => {
            if let Ok(name) = Name::from_slice(entry) {
                overflow |= found.push((name, None)).is_err();
            }
        }
        Some(Derived::Restore { recoverer, .. }) => {
            if let Ok(name) = Name::from_slice(entry) {
                overflow |= found.push((name, Some(recoverer))).is_err();
            }
        }
        _ => {}
    });
    if listed.is_err() || overflow {
        return Ok(true);
    }
    for (name, recoverer) in found {
        // Only regular files, without following symlinks, are candidates.
        if !os.lstat(&name).is_ok_and(|st| st.kind == NodeKind::Regular) {
            continue;
        }
        let adopt = match recoverer {
            None => false,
            Some(r) if r == cfg.pid => true,
            Some(r) => {
                let owner = Owner {
                    pid: r,
                    host: cfg.host,
                    start: None,
                };
                if !is_stale(os, cfg, &owner) {
                    // A live recoverer is at work: the lock counts as held.
                    held = true;
                    break;
                }
                false
            }
        };
        let _ = candidates.push((name, adopt));
    }
    if held {
        return Ok(true);
    }
    candidates.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    for (path, adopt) in &candidates {
        if recover_claimed(os, cfg, judged, breaker, path, *adopt)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Claims one candidate by renaming it to our own restore name (one
/// winner), then restores or removes it. `true` means held.
fn recover_claimed<O: Os>(
    os: &mut O,
    cfg: &Config<'_>,
    judged: &Stat,
    breaker: Decimal<'_>,
    path: &Name,
    adopt: bool,
) -> Result<bool, Error> {
    let own = if adopt {
        path.clone()
    } else {
        restore_name(cfg.lock, cfg.pid, &os.token())?
    };
    if !os.begin_claim(&own) {
        return Ok(true);
    }
    let result = (|| {
        if !adopt && os.rename(path, &own).is_err() {
            // A peer won the rename and holds the record now.
            return Ok(true);
        }
        restore_claimed(os, cfg, judged, breaker, &own)
    })();
    os.end_claim(&own);
    result
}

fn restore_claimed<O: Os>(
    os: &mut O,
    cfg: &Config<'_>,
    judged: &Stat,
    breaker: Decimal<'_>,
    own: &Name,
) -> Result<bool, Error> {
    let Ok(read) = read_marker(os, own) else {
        return_claim(os, cfg, breaker, own)?;
        return Ok(true);
    };
    if !record_is_live(os, cfg, read.content(), breaker) {
        let _ = os.unlink(own);
        return Ok(false);
    }
    // Put the live record back at the lock path, if the path still holds the
    // dead breaker's record we judged.
    if os.lstat(cfg.lock).is_ok_and(|st| st.is_judged(judged)) && os.exchange(own, cfg.lock).is_ok()
    {
        if os.lstat(own).is_ok_and(|st| st.id.ino == judged.id.ino) {
            let _ = os.unlink(own);
            return Ok(true);
        }
        // A peer replaced the path in between: swap straight back.
        let _ = os.exchange(own, cfg.lock);
    }
    return_claim(os, cfg, breaker, own)?;
    Ok(true)
}

/// Hands a claim back under a fresh break name of the dead breaker.
fn return_claim<O: Os>(
    os: &mut O,
    cfg: &Config<'_>,
    breaker: Decimal<'_>,
    own: &Name,
) -> Result<(), Error> {
    let token = os.token();
    let name = break_name(cfg.lock, breaker, &token)?;
    // A failure leaves the claim under our PID; the next poll adopts it.
    let _ = os.rename(own, &name);
    Ok(())
}

/// Whether a stranded record names a holder that may be alive: not the
/// breaker's own record, and not provably stale (PROTOCOL 7.11 step 6).
fn record_is_live<O: Os>(
    os: &mut O,
    cfg: &Config<'_>,
    content: Content<'_>,
    breaker: Decimal<'_>,
) -> bool {
    let is_breakers = |owner: &Owner<'_>| {
        breaker.to_u64() == Some(u64::from(owner.pid.get())) && owner.host == cfg.host
    };
    match classify(content, cfg.kind.reader()) {
        Classified::Sentinel | Classified::Recordless => true,
        // Another breaker's placeholder, in the middle of its break or its
        // release: that breaker, if alive, needs it back at the lock path to
        // undo its own exchange, which returns whatever it took (a live
        // holder's marker, say) to the path. filelock deletes it as
        // malformed, and the simulator found that this strands the marker
        // the live breaker holds aside: a second holder then entered. A
        // placeholder names no host, so its breaker cannot be probed: it
        // counts as live and goes back; if its breaker is gone, it ages out
        // at the lock path as any malformed marker does.
        Classified::Malformed(_) => crate::record::decode(content)
            .ok()
            .and_then(parse_placeholder)
            .is_some_and(|pid| pid.to_u64() != breaker.to_u64()),
        Classified::V1(r) => !is_breakers(&r.owner()) && !is_stale(os, cfg, &r.owner()),
        Classified::V2(r) => {
            matches!(r.mode, Mode::Unknown(_))
                || (!is_breakers(&r.owner()) && !is_stale(os, cfg, &r.owner()))
        }
    }
}

/// Releases a held soft lock (PROTOCOL 7.4): remove the marker only if the
/// lock path still shows our file, and then by exchanging a placeholder in
/// (stricter than filelock's lstat-then-unlink, which a peer's exchange can
/// slip between); if a peer holds our file aside, write the released record
/// into it instead, so nothing restores a record that names us (invariant
/// I17). The descriptor is closed in every case.
pub fn release<O: Os>(os: &mut O, cfg: &Config<'_>, held: Held<O::File>) -> Result<(), Error> {
    let Held { file, .. } = held;
    let mut failure = None;
    if os.semantics() == Semantics::Handles {
        // Nobody can have moved a file we hold without delete sharing:
        // delete it through our handle, then close (filelock closes first
        // and deletes by name, retrying while the close settles).
        failure = remove_own_file(os, cfg, &file).err();
    } else if let Ok(own) = os.fstat(&file) {
        failure = release_posix(os, cfg, &file, &own).err();
    }
    // No retry by name after the close, as filelock makes for shares that
    // refuse to delete an open file: once closed, the name may link a peer's
    // marker (invariant I7). A marker left behind names this process, and
    // reads as stale once it exits.
    os.close(file);
    match failure {
        Some(errno) => Err(Error::Os {
            op: Op::Remove,
            errno,
        }),
        None => Ok(()),
    }
}

/// How many times a release looks again when its marker is back at the
/// lock path after a removal that found it away.
const RELEASE_ROUNDS: u32 = 16;

/// The POSIX release of our open marker `file`, whose stat is `own`.
fn release_posix<O: Os>(
    os: &mut O,
    cfg: &Config<'_>,
    file: &O::File,
    own: &Stat,
) -> Result<(), Errno> {
    let mut round = 0;
    loop {
        let seen = match os.lstat(cfg.lock) {
            Ok(st) => st.same_file(own),
            Err(e) if e == Errno::NOENT => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut removal = Ok(());
        if seen {
            // Not a plain unlink: a peer's exchange may put its marker at the
            // lock path between our lstat and our unlink, and a peer whose
            // takeover is legitimate (our lease expired) would then hold the
            // lock with no marker. Swapping ours out through a placeholder
            // puts any such marker back.
            removal = remove_own(os, cfg, own);
        }
        // Where our file is now: unlinked everywhere (done), at the lock
        // path, or held aside by a peer.
        let st = os.fstat(file)?;
        if st.nlink == 0 {
            return Ok(());
        }
        if os.lstat(cfg.lock).is_ok_and(|st| st.same_file(own)) {
            // Back at the lock path: a peer whose check held it aside for an
            // instant (its exchange took our marker, not the file it judged)
            // has put it back while we looked. Look again.
            round += 1;
            if round < RELEASE_ROUNDS {
                continue;
            }
            return Err(removal.err().unwrap_or(Errno::IO));
        }
        // Held aside: mark it released in place, so nothing restores a
        // record that names us (invariant I17).
        return os
            .write_at(file, RELEASED, 0)
            .and_then(|_| os.truncate(file, RELEASED.len() as u64));
    }
}

/// What one heartbeat refresh of a lease found (PROTOCOL 7.15).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Refresh {
    /// Our marker is at the lock path and was touched.
    Ok,
    /// Our marker is gone from every name.
    MarkerMissing,
    /// Another file is at the lock path.
    OwnerChanged,
    /// The refresh failed for now.
    Transient(Errno),
}

/// One heartbeat: check that the lock path still shows our marker, then
/// touch our own inode through the descriptor (invariant I18).
pub fn refresh<O: Os>(os: &mut O, cfg: &Config<'_>, held: &Held<O::File>) -> Refresh {
    match os.lstat(cfg.lock) {
        Ok(st) if st.id != held.id => return Refresh::OwnerChanged,
        Ok(_) => {}
        Err(e) if e == Errno::NOENT => match os.fstat(&held.file) {
            Err(e) => return Refresh::Transient(e),
            Ok(st) if st.nlink == 0 => return Refresh::MarkerMissing,
            // The directory was renamed: our marker still exists.
            Ok(_) => {}
        },
        Err(e) => return Refresh::Transient(e),
    }
    match os.touch(&held.file) {
        Ok(()) => Refresh::Ok,
        Err(e) => Refresh::Transient(e),
    }
}

/// Why a lease holder learned it may have lost its lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Compromise {
    /// Our marker is gone (twice in a row).
    MarkerMissing,
    /// Another file is at the lock path (twice in a row).
    OwnerChanged,
    /// Refreshes failed for longer than the lease allows.
    RefreshFailed(Errno),
}

/// Turns heartbeat results into a compromise report (PROTOCOL 7.15): the
/// second consecutive miss is reported (a peer's break may hold our marker
/// aside for an instant, I19), and transient failures only once they have
/// lasted longer than `duration − interval`.
#[derive(Clone, Copy, Debug)]
pub struct CompromiseWatch {
    missed: bool,
    last_ok: Instant,
    grace: Duration,
}

impl CompromiseWatch {
    /// A watch for a lease acquired at `now`.
    pub fn new(now: Instant, duration: Duration, interval: Duration) -> Self {
        CompromiseWatch {
            missed: false,
            last_ok: now,
            grace: duration.saturating_sub(interval),
        }
    }

    /// Feeds one refresh result; `Some` once a compromise must be reported.
    pub fn observe(&mut self, result: Refresh, now: Instant) -> Option<Compromise> {
        match result {
            Refresh::Ok => {
                self.missed = false;
                self.last_ok = now;
                None
            }
            Refresh::MarkerMissing | Refresh::OwnerChanged => {
                if !self.missed {
                    self.missed = true;
                    return None;
                }
                Some(if result == Refresh::MarkerMissing {
                    Compromise::MarkerMissing
                } else {
                    Compromise::OwnerChanged
                })
            }
            Refresh::Transient(e) => {
                (now.since(self.last_ok) >= self.grace).then_some(Compromise::RefreshFailed(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compromise_needs_two_misses_and_transients_past_the_grace() {
        let secs = |s: u64| Instant(s * 1_000_000_000);
        let mut w = CompromiseWatch::new(secs(0), Duration::from_secs(30), Duration::from_secs(10));
        assert_eq!(
            w.observe(Refresh::OwnerChanged, secs(10)),
            None,
            "one miss may be a peer's check"
        );
        assert_eq!(
            w.observe(Refresh::Ok, secs(20)),
            None,
            "a success clears the miss"
        );
        assert_eq!(w.observe(Refresh::MarkerMissing, secs(30)), None);
        assert_eq!(
            w.observe(Refresh::MarkerMissing, secs(40)),
            Some(Compromise::MarkerMissing)
        );

        let mut w = CompromiseWatch::new(secs(0), Duration::from_secs(30), Duration::from_secs(10));
        let eio = Refresh::Transient(Errno::IO);
        assert_eq!(w.observe(eio, secs(10)), None);
        assert_eq!(
            w.observe(eio, secs(19)),
            None,
            "within duration - interval of the last success"
        );
        assert_eq!(
            w.observe(eio, secs(20)),
            Some(Compromise::RefreshFailed(Errno::IO))
        );
    }
}
