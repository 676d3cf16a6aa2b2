//! The read-write lock's driver (PROTOCOL 16.4-16.8): the loop that asks
//! each of the log's and the participant's decisions in turn and performs
//! the file operation each one needs, written once for the facade and the
//! simulator. It is generic over [`Files`](crate::rw::files::Files) (the adapter's file
//! operations, one call per operation, so that the simulator can
//! interleave processes between any two of them) and [`Env`] (the
//! monotonic clock and the random tokens), and allocates nothing: the
//! caller lends the read buffers ([`Buffers`]) and the ledger's storage
//! ([`Ledger`]).
//!
//! | piece | what | invariants |
//! |---|---|---|
//! | [`Instance`] | what a lock keeps across its acquisitions: the epoch and latest generation it read (RW10), the ledger (RW7), the buffers | |
//! | [`Instance::latest`] | find the latest snapshot (16.4) | RW10, RW12, RW13 |
//! | `Instance::commit` | commit the next generation: checks, the link, HEAD, compaction (16.5) | RW1, RW2, RW3, RW11, RW12, RW13 |
//! | [`Instance::publish`], [`Instance::advance`], [`Instance::leave`] | one acquisition: its record, its polls, its leave (16.6) | RW4, RW5, RW6, RW8 |
//! | [`Instance::heartbeat`] | a holder's refresh and look at the log (16.8) | RW9 |
//! | [`Instance::evict`] | an operator's break: the log committed without the members it evicts (16.10) | RW1 |
//! | `sweep` | the collection of orphan records and temporaries (16.7) | RW7 |
//!
//! Where swaplock is stricter than filelock, without changing a byte on
//! disk (PROTOCOL 16.9 and 16.12): a generation 1 is committed only once
//! the server confirms, by an exclusive create of HEAD, that no HEAD of
//! the epoch exists, and counts only if that HEAD is still the file after
//! the link (C-RW1); a commit's predecessor must be the very record it was
//! built on, before and after its link (a log removed and grown again);
//! `gen/` is synced before a grant is reported (C-RW5); a commit whose
//! temporary was swept is lost, not an error (C-RW6); a log whose `gen/`
//! was removed is prepared again (C-RW7); a record's lease is honoured up
//! to [`Config::max_lease`] (C-RW8).
//!
//! How a caller drives one acquisition:
//!
//! ```text
//! let mut p = instance.publish(&mut files, &mut env, mode)?;   // the holder record
//! loop {
//!     match instance.advance(&mut files, &mut env, &mut p) {    // one poll
//!         Ok(true) => break,                                    // granted at p.generation()
//!         Ok(false) => sleep(poll) or give up,                  // then leave()
//!         Err(e) => { let _ = instance.leave(..); return Err(e) }
//!     }
//! }
//! every heartbeat interval: instance.heartbeat(&mut files, &mut env, &mut p) -> Beat
//! instance.leave(&mut files, &mut env, &mut p)?;                 // release, or give up
//! ```

mod commit;
mod find;
mod ledger;
mod participant;
mod sweep;
#[cfg(test)]
mod tests;

pub use ledger::{BoundedLedger, Entry, Key, Ledger};
pub use participant::Participant;

use super::files::FsError;
use super::names::READ_LIMIT;
use super::record::{Invalid, Malformed, Snapshot, EPOCH_LEN};
use crate::decide::Instant;
use crate::host::HostName;
use crate::names::Token;
use crate::pid::Pid;
use core::fmt;
use core::time::Duration;

/// What the driver reads besides the files: the monotonic clock and
/// randomness.
pub trait Env {
    /// The monotonic clock (`CLOCK_MONOTONIC`), the only clock the lock
    /// reads (RW7): it is compared only with its own earlier readings.
    fn now(&mut self) -> Instant;
    /// 128 random bits: a participant's token, a nonce, a temporary's
    /// name, a new epoch.
    fn token(&mut self) -> Token;
}

/// Why the driver stopped.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// A file operation failed.
    Fs(FsError),
    /// The record of a generation is malformed: every participant stays
    /// out until an operator removes it (PROTOCOL 16.2).
    Malformed {
        /// The generation whose record it is.
        generation: u128,
        /// What is wrong with it.
        why: Malformed,
    },
    /// The log names generations, none of which can be read, twice in a
    /// row (PROTOCOL 16.4).
    NoSnapshot,
    /// The next snapshot cannot be encoded (over 1 MiB of members).
    Encode(Invalid),
    /// The generations have run past 20 digits.
    Exhausted,
}

impl From<FsError> for Error {
    fn from(e: FsError) -> Self {
        Error::Fs(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Fs(e) => write!(f, "{e}"),
            Error::Malformed { generation, why } => {
                write!(f, "generation {generation}'s record is malformed ({why})")
            }
            Error::NoSnapshot => f.write_str("generation log names no readable snapshot"),
            Error::Encode(why) => write!(f, "the next snapshot cannot be encoded ({why:?})"),
            Error::Exhausted => f.write_str("the log's generations have reached 20 digits"),
        }
    }
}

/// What a lock runs on: its own threshold (also the lease its record
/// asks), the longest lease it honours, and the identity its records carry.
#[derive(Clone, Debug)]
pub struct Config {
    /// How long a record must stay unchanged before its holder is stale,
    /// at least; written into our own record as its lease.
    pub threshold: Duration,
    /// The longest lease honoured (PROTOCOL 16.9, C-RW8): a record asking
    /// more is stale once unchanged this long.
    pub max_lease: Duration,
    /// This process, as records name it.
    pub pid: Pid,
    /// This host, as records name it (PROTOCOL 4.1).
    pub host: HostName,
}

/// How long each buffer of [`Buffers`] should be: a whole record read
/// ([`READ_LIMIT`]) with room before it for the epoch HEAD carries. A
/// shorter buffer reads a record that fills it as too long (the simulator
/// lends short ones; its records are small).
pub const BUFFER: usize = READ_LIMIT + EPOCH_LEN;

/// The three buffers the driver reads and encodes into: one for any
/// record, two for snapshots (the latest read, and the next one being
/// read or encoded).
pub struct Buffers<B> {
    scratch: B,
    snapshots: [B; 2],
}

impl<B: AsMut<[u8]> + AsRef<[u8]>> Buffers<B> {
    /// Three buffers, each best [`BUFFER`] bytes long, at least 256.
    pub fn new(scratch: B, first: B, second: B) -> Self {
        Buffers {
            scratch,
            snapshots: [first, second],
        }
    }
}

/// The epoch as read: compared as raw bytes everywhere (by their SHA-256
/// past [`EPOCH_LEN`] bytes), and kept exactly when short enough to be
/// valid, for HEAD (PROTOCOL 16.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Epoch {
    len: usize,
    exact: [u8; EPOCH_LEN],
    digest: [u8; 32],
}

impl Epoch {
    /// The epoch whose record is `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        use sha2::Digest;
        let mut exact = [0u8; EPOCH_LEN];
        let short = bytes.len().min(EPOCH_LEN);
        exact[..short].copy_from_slice(&bytes[..short]);
        Epoch {
            len: bytes.len(),
            exact,
            digest: sha2::Sha256::digest(bytes).into(),
        }
    }

    /// The epoch's exact bytes, when it is short enough to be valid.
    pub fn bytes(&self) -> Option<&[u8]> {
        (self.len <= EPOCH_LEN).then(|| &self.exact[..self.len])
    }
}

/// Where the latest snapshot read is: which snapshot buffer, how long,
/// and its generation.
#[derive(Clone, Copy, Debug)]
struct Held {
    at: usize,
    len: usize,
    generation: u128,
}

/// How many members a snapshot can name (a record is at most 1 MiB, 40
/// bytes a member): the size of the staleness map.
const MAX_MEMBERS: usize = super::names::MAX_RECORD / 40 + 1;

/// One lock's memory across its acquisitions, as filelock's lock instance
/// keeps it: the epoch and the latest generation read under it (RW10),
/// the ledger (RW7: a contender's clock starts at its own first look and
/// every acquisition of the lock shares it), and the buffers.
pub struct Instance<L, B> {
    config: Config,
    epoch: Option<Epoch>,
    remembered: u128,
    ledger: L,
    /// Which sweep is running (the ledger keeps what the last one saw).
    round: u32,
    bufs: Buffers<B>,
    latest: Option<Held>,
    /// Per member of the latest snapshot (the writer first, then the
    /// readers in the record's order), whether the last attempt found it
    /// stale.
    stale: [u64; MAX_MEMBERS.div_ceil(64)],
    /// Where the sweep resumes in each directory when it found more names
    /// than it judges at once.
    cursors: sweep::Cursors,
}

impl<L: Ledger, B: AsMut<[u8]> + AsRef<[u8]>> Instance<L, B> {
    /// A lock's memory, empty: no epoch, no generation, nothing seen.
    pub fn new(config: Config, ledger: L, bufs: Buffers<B>) -> Self {
        Instance {
            config,
            epoch: None,
            remembered: 0,
            ledger,
            round: 0,
            bufs,
            latest: None,
            stale: [0; MAX_MEMBERS.div_ceil(64)],
            cursors: sweep::Cursors::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The configuration, to change between acquisitions: a process whose
    /// lock objects on one path share one instance runs each acquisition
    /// on the terms of the object that asked for it.
    pub fn config_mut(&mut self) -> &mut Config {
        &mut self.config
    }

    /// The latest snapshot read, if any (for a waiting caller's report).
    pub fn snapshot(&self) -> Option<Snapshot<'_>> {
        let held = self.latest?;
        let bytes = &self.bufs.snapshots[held.at].as_ref()[..held.len];
        super::record::parse_snapshot(bytes).ok()
    }

    /// The epoch read last, as its raw bytes when it is short enough to be
    /// valid: with [`Participant::generation`], a fencing token that a log
    /// removed and made again cannot repeat.
    pub fn epoch(&self) -> Option<&[u8]> {
        self.epoch.as_ref().and_then(Epoch::bytes)
    }

    /// The ledger.
    pub fn ledger(&self) -> &L {
        &self.ledger
    }

    /// The ledger, for a caller that keeps it beyond this instance (the
    /// ledger belongs to the lock's path, not to one lock object: PROTOCOL
    /// 16.9).
    pub fn ledger_mut(&mut self) -> &mut L {
        &mut self.ledger
    }

    /// Reads `name` in `area` into the scratch buffer.
    fn read_scratch(
        &mut self,
        files: &mut impl super::files::Files,
        area: super::files::Area,
        name: &[u8],
    ) -> Result<Option<usize>, Error> {
        let buf = self.bufs.scratch.as_mut();
        let limit = buf.len().min(READ_LIMIT);
        Ok(match files.read(area, name, &mut buf[..limit])? {
            super::files::Read::Missing => None,
            super::files::Read::Bytes(n) => Some(n.min(limit)),
        })
    }

    /// The scratch buffer's first `len` bytes.
    fn scratch(&self, len: usize) -> &[u8] {
        &self.bufs.scratch.as_ref()[..len]
    }
}

/// Whether `bytes` read into a buffer of `room` bytes may have been cut
/// short: a buffer shorter than [`READ_LIMIT`] that the read filled.
fn cut(len: usize, room: usize) -> bool {
    room < READ_LIMIT && len >= room
}

/// The name of generation `n`.
fn gen_name(n: u128) -> Result<[u8; super::names::GENERATION_DIGITS], Error> {
    super::names::generation_name(n).ok_or(Error::Exhausted)
}
