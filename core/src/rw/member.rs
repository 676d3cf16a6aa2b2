//! A participant's decisions (PROTOCOL 16.6-16.8): one attempt of an
//! acquire, from the latest snapshot and the ledger's verdicts to the
//! successor to commit; the leave; the ledger's rule of staleness; the
//! sweep's choices; and what a heartbeat comes to.
//!
//! Invariants kept here:
//! - RW4: a grant is itself a commit: a writer's names no reader, a
//!   reader's names no live writer ([`attempt`]).
//! - RW5: a writer enters the snapshot before it drains the readers, which
//!   keeps new readers out ([`attempt`]).
//! - RW7: liveness is unchanged bytes on the observer's own monotonic
//!   clock, from its own first look, for the longer of its threshold and
//!   the record's lease ([`Seen::observe`], [`stale_after`]).
//! - RW8: a contender refreshes on every attempt, and its poll is shorter
//!   than its threshold (the caller's loop; [`valid_intervals`]).

use super::names::{is_temporary_name, parse_holder_name};
use super::Mode;
use crate::decide::Instant;
use crate::errno::Errno;
use crate::mutant::{active, Mutant};
use crate::names::Token;
use crate::soft::Compromise;
use core::time::Duration;

/// The members of a snapshot, as the decisions read them.
pub trait Members {
    /// The writer, if any.
    fn writer(&self) -> Option<Token>;
    /// The readers, in any order, each once.
    fn readers(&self) -> impl Iterator<Item = Token> + '_;
    /// Whether `token` is the writer or a reader.
    fn is_member(&self, token: &Token) -> bool {
        self.writer().as_ref() == Some(token) || self.readers().any(|r| r == *token)
    }
}

impl Members for super::record::Snapshot<'_> {
    fn writer(&self) -> Option<Token> {
        self.writer
    }

    fn readers(&self) -> impl Iterator<Item = Token> + '_ {
        super::record::Snapshot::readers(self)
    }
}

/// What one attempt does after reading the latest snapshot `S`, judging
/// its members and refreshing its own record (PROTOCOL 16.6 steps 4-8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Step {
    /// The poll ends without a grant and without a commit.
    Wait,
    /// Not yet entered and a live writer is named: commit the successor,
    /// which only evicts the stale members; whatever its outcome, the poll
    /// ends without a grant.
    Evict,
    /// Commit the successor. If it is won, this participant is entered,
    /// and granted when `grant` (the poll then ends either way); if it is
    /// lost, the next attempt follows at once.
    Commit {
        /// Whether winning this commit grants the lock.
        grant: bool,
    },
}

/// An attempt's decision: the [`Step`] and the successor it commits, whose
/// readers are `S`'s readers less the stale ones, plus `add_reader`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Plan {
    /// What to do.
    pub step: Step,
    /// The successor's writer.
    pub writer: Option<Token>,
    /// A reader the successor adds: this participant, entering to read.
    pub add_reader: Option<Token>,
}

/// One attempt (PROTOCOL 16.6): `me`, acquiring in `mode`, facing the
/// latest snapshot `s`, where `stale` says which members the ledger found
/// stale (never asked about `me`). A participant is entered when `s` names
/// it: the snapshot, not what this participant remembers committing, is
/// the truth (a commit reported lost may have landed; a peer may have
/// evicted it).
pub fn attempt<M: Members>(s: &M, me: &Token, mode: Mode, stale: &dyn Fn(&Token) -> bool) -> Plan {
    let is_stale = |t: &Token| t != me && stale(t);
    let any_stale = s.writer().iter().any(is_stale) || s.readers().any(|t| is_stale(&t));
    let writer = s.writer().filter(|w| !is_stale(w));
    let readers_left = s.readers().any(|t| !is_stale(&t));
    let entered = s.is_member(me);
    if !entered {
        if let Some(w) = writer {
            // A live writer keeps both modes out; only an eviction is worth
            // committing.
            let step = match any_stale {
                true => Step::Evict,
                false => Step::Wait,
            };
            return Plan {
                step,
                writer: Some(w),
                add_reader: None,
            };
        }
        return match mode {
            Mode::Write if readers_left && active(Mutant::RwWriterWaitsOutside) => Plan {
                step: Step::Wait,
                writer: None,
                add_reader: None,
            },
            // A writer enters at once, which keeps new readers out (RW5),
            // and is granted by this commit only if no reader is left (RW4).
            Mode::Write => Plan {
                step: Step::Commit {
                    grant: !readers_left || active(Mutant::RwGrantBesideReaders),
                },
                writer: Some(*me),
                add_reader: None,
            },
            Mode::Read => Plan {
                step: Step::Commit { grant: true },
                writer: None,
                add_reader: Some(*me),
            },
        };
    }
    let grant = mode == Mode::Read || !readers_left || active(Mutant::RwGrantBesideReaders);
    let step = match (any_stale, grant) {
        (false, false) => Step::Wait,
        _ => Step::Commit { grant },
    };
    Plan {
        step,
        writer,
        add_reader: None,
    }
}

/// The successor of a leave (PROTOCOL 16.6, `leave`): `None` when `s` does
/// not name `me` (nothing to commit); otherwise its writer, with `me` no
/// longer the writer, and `s`'s readers less `me`.
pub fn leave<M: Members>(s: &M, me: &Token) -> Option<Option<Token>> {
    s.is_member(me).then(|| s.writer().filter(|w| w != me))
}

/// What a record (or its absence) read as, for the ledger: its bytes are
/// compared whole, through their SHA-256 (a record may be up to 1 MiB).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    /// No file by that name.
    Missing,
    /// The bytes read (none for a file that is not a regular file).
    Bytes([u8; 32]),
}

impl Value {
    /// The value of a read: `None` for a missing file, else its bytes.
    pub fn of(read: Option<&[u8]>) -> Self {
        use sha2::Digest;
        match read {
            None => Value::Missing,
            Some(bytes) => Value::Bytes(sha2::Sha256::digest(bytes).into()),
        }
    }
}

/// A ledger entry (PROTOCOL 16.7): a value and when this observer first
/// saw it, on its own monotonic clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    /// The value.
    pub value: Value,
    /// When it was first seen.
    pub since: Instant,
}

impl Seen {
    /// Records `value` under the entry `seen` and says how long it has
    /// stayed the same: zero when it is new or changed (the entry restarts
    /// at `now`), else from its first sighting up to `asked`, the clock
    /// read before the value was fetched (a pause after the fetch adds
    /// nothing).
    pub fn observe(
        seen: &mut Option<Seen>,
        value: Value,
        now: Instant,
        asked: Instant,
    ) -> Duration {
        match seen {
            Some(s) if s.value == value => asked.since(s.since),
            _ => {
                *seen = Some(Seen { value, since: now });
                Duration::ZERO
            }
        }
    }
}

/// How long a record must stay unchanged before it is stale (RW7): the
/// observer's own `threshold`, or the record's `lease` if longer, but no
/// more than `most` (a lease of `1e+20` would otherwise keep a crashed
/// holder for ever: PROTOCOL 16.9).
pub fn stale_after(threshold: Duration, lease: Option<f64>, most: Duration) -> Duration {
    if active(Mutant::RwOwnThresholdOnly) {
        return threshold;
    }
    let most = match active(Mutant::RwLeaseUncapped) {
        true => Duration::MAX,
        false => most,
    };
    let lease = lease
        .and_then(|l| Duration::try_from_secs_f64(l).ok())
        .unwrap_or(match lease {
            // Finite and positive but past Duration: as long as can be.
            Some(_) => Duration::MAX,
            None => Duration::ZERO,
        });
    threshold.max(lease.min(most))
}

/// Whether a record unchanged for `age` is stale ([`stale_after`]).
pub fn is_stale(age: Duration, threshold: Duration, lease: Option<f64>, most: Duration) -> bool {
    age >= stale_after(threshold, lease, most)
}

/// Whether a sweep is due at `now` (PROTOCOL 16.7): at the first
/// attempt, then at most every half threshold.
pub fn sweep_due(now: Instant, next: Instant) -> bool {
    now.0 >= next.0
}

/// When the next sweep may run after one at `now`.
pub fn next_sweep(now: Instant, threshold: Duration) -> Instant {
    let half = u64::try_from((threshold / 2).as_nanos()).unwrap_or(u64::MAX);
    Instant(now.0.saturating_add(half))
}

/// Whether the sweep watches the holder record `name` (PROTOCOL 16.7
/// step 1): a token's name, not `me`'s, not a member of the latest
/// snapshot `s`. A member's record is judged by the attempt instead.
pub fn swept_holder<M: Members>(name: &[u8], me: &Token, s: &M) -> Option<Token> {
    parse_holder_name(name).filter(|t| t != me && !s.is_member(t))
}

/// Whether the sweep watches the name `name` of `gen/`: a publication's
/// temporary file (PROTOCOL 16.7 step 2).
pub fn swept_temporary(name: &[u8]) -> bool {
    is_temporary_name(name)
}

/// Checks a lock's intervals as filelock's constructor does: a heartbeat
/// above zero, a threshold above the heartbeat (a holder refreshes before
/// it is stale), a poll above zero and below the threshold (a waiting
/// contender refreshes at each poll, RW8). The error says which.
pub fn valid_intervals(
    heartbeat: Duration,
    threshold: Duration,
    poll: Duration,
) -> Result<(), Interval> {
    if heartbeat.is_zero() {
        return Err(Interval::Heartbeat);
    }
    if threshold <= heartbeat {
        return Err(Interval::Threshold);
    }
    if poll.is_zero() || poll >= threshold {
        return Err(Interval::Poll);
    }
    Ok(())
}

/// Which interval [`valid_intervals`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interval {
    /// The heartbeat is zero.
    Heartbeat,
    /// The stale threshold is not above the heartbeat.
    Threshold,
    /// The poll is zero, or not below the stale threshold.
    Poll,
}

/// How a holder's refresh of its own record went (PROTOCOL 16.8 step 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refreshed {
    /// The record was rewritten in place.
    Yes,
    /// The record is gone, or its name leads to another file, or the tree
    /// was replaced: someone took it.
    Gone,
    /// The rewrite failed (`ESTALE`, `EIO`, ...): maybe for now.
    Failed(Errno),
}

/// What one heartbeat found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Beat {
    /// The record was refreshed and the latest snapshot names us (or could
    /// not be read, which says nothing against us).
    Ok,
    /// We were evicted.
    Lost,
    /// The refresh failed.
    Transient(Errno),
}

/// A heartbeat's verdict from its refresh and from whether the latest
/// snapshot names us (`None`: the log could not be read).
pub fn beat(refreshed: Refreshed, named: Option<bool>) -> Beat {
    match (refreshed, named) {
        (Refreshed::Gone, _) | (Refreshed::Yes, Some(false)) => Beat::Lost,
        (Refreshed::Failed(e), _) => Beat::Transient(e),
        (Refreshed::Yes, _) => Beat::Ok,
    }
}

/// Turns heartbeats into a compromise report (PROTOCOL 16.8 step 3): an
/// eviction at once; failed refreshes once they have lasted `threshold −
/// interval` since the last success, a margin before a peer could evict.
#[derive(Clone, Copy, Debug)]
pub struct BeatWatch {
    last_ok: Instant,
    grace: Duration,
}

impl BeatWatch {
    /// A watch for a hold granted at `now`.
    pub fn new(now: Instant, threshold: Duration, interval: Duration) -> Self {
        BeatWatch {
            last_ok: now,
            grace: threshold.saturating_sub(interval),
        }
    }

    /// Feeds one heartbeat; `Some` once the hold must be reported lost.
    pub fn observe(&mut self, beat: Beat, now: Instant) -> Option<Compromise> {
        match beat {
            Beat::Ok => {
                self.last_ok = now;
                None
            }
            Beat::Lost => Some(Compromise::Evicted),
            Beat::Transient(e) => {
                (now.since(self.last_ok) >= self.grace).then_some(Compromise::RefreshFailed(e))
            }
        }
    }
}

/// How an operator's look (`swaplock status`, `swaplock break`) finds a
/// member at once, before any watch of its record (PROTOCOL 16.10).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Look {
    /// Its process on this host is alive (by PID: no start token is
    /// recorded, so a reused PID reads as alive).
    Alive,
    /// Its process on this host is gone.
    Dead,
    /// Its record is gone: it cannot refresh, and peers evict it once
    /// that has lasted their threshold.
    Missing,
    /// Another host's (or a PID that cannot be probed): only a watch of its
    /// record over the threshold can tell.
    Elsewhere,
}

/// A member as an operator's look finds it: its record's presence, and
/// the probe of its PID when the record names this host (`None`
/// otherwise).
pub fn look(record: bool, here: Option<crate::decide::Liveness>) -> Look {
    use crate::decide::Liveness;
    match (record, here) {
        (false, _) => Look::Missing,
        (true, Some(Liveness::Alive)) => Look::Alive,
        (true, Some(Liveness::Dead)) => Look::Dead,
        (true, _) => Look::Elsewhere,
    }
}

/// Whether a break evicts a member it found so without watching it: a
/// missing record or a dead process. A live one only by force; one
/// elsewhere only once watched unchanged for its lease ([`is_stale`]).
pub fn evict_at_once(look: Look) -> bool {
    matches!(look, Look::Missing | Look::Dead)
}

/// Whether a break looks once more, just before its commit, at a member it
/// found to evict at once ([`evict_at_once`]): when it watched another
/// member meanwhile, and unless forced. A participant keeps its token for
/// its whole acquisition and makes its record again once it finds it gone,
/// so a member found without one may be back, alive, by then (PROTOCOL
/// 16.10).
pub fn look_again(look: Look, watched: bool, force: bool) -> bool {
    !force && watched && evict_at_once(look)
}
