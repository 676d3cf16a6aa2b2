//! Pin and judgement (PROTOCOL 7.5-7.7, 7.12): pin the marker at the lock
//! path, read it, check that the file read is the file pinned, and judge
//! it by kind; a stale marker then goes to the takeover.
//!
//! Invariants kept here:
//! - I5, I6: the judged file is pinned from before the read until the
//!   takeover ends, and its inode is compared only while pinned: a
//!   [`Judged`] is minted only under the pin (or for a file its holder has
//!   open) and is borrowed, never copied, by every comparison.
//! - I8: staleness verdicts fail closed ([`standing`]).
//! - I9, I10: a malformed marker is evicted only after the grace period
//!   unchanged; an empty marker, the strict sentinel and an unknown mode
//!   never are.
//! - I20: a lease contender refuses a holder's different duration.

use super::config::{Config, Error, Kind};
use super::marker::{read_marker, Read};
use super::os::{NodeKind, Os, Processes, Stat};
use super::takeover::{take_over, Takeover};
use super::types::{Attempt, Contender, Held, Holder};
use crate::decide::{
    judge_owner, lease_expired, lifetime_expired, needs_current_start, HeldBecause, Liveness,
    Verdict, MALFORMED_GRACE,
};
use crate::errno::Errno;
use crate::host::HostName;
use crate::mutant::{active, Mutant};
use crate::names::format_u64;
use crate::pid::Pid;
use crate::record::{
    classify, parse_placeholder, Classified, Content, Mode, Owner, Reader, V1Record, V2Record,
};
use crate::Decimal;
use core::time::Duration;

/// The file a judgement is about: its `stat`, taken while a pin (or its
/// holder's own descriptor) keeps its inode allocated. Only [`under_pin`]
/// and [`Judged::open_file`] mint one, and it is neither `Clone` nor
/// `Copy`: comparisons borrow it for as long as the pin holds (I5), and
/// compare inode and mtime together, for equality only (I6).
#[derive(Debug)]
pub(super) struct Judged {
    stat: Stat,
}

impl Judged {
    /// A file the caller itself holds open (our own marker or
    /// placeholder), whose descriptor pins its inode.
    pub(super) fn open_file(stat: Stat) -> Self {
        Judged { stat }
    }

    /// Whether `st` shows the judged file: the same inode number and the
    /// same mtime (invariant I6).
    pub(super) fn is(&self, st: &Stat) -> bool {
        st.id.ino == self.stat.id.ino
            && (st.mtime == self.stat.mtime || active(Mutant::InodeOnlyIdentity))
    }

    /// Whether `st` has the judged file's inode number.
    pub(super) fn same_ino(&self, st: &Stat) -> bool {
        st.id.ino == self.stat.id.ino
    }

    /// The judged file's `stat`.
    pub(super) fn stat(&self) -> &Stat {
        &self.stat
    }
}

/// The PID a dead writer's break names carry (PROTOCOL 5.3): its record's
/// PID, or the breaker a placeholder names, as decimal digits. A placeholder
/// PID of more than 24 digits names no process and no break file this
/// protocol writes, so it makes no breaker.
#[derive(Clone, Copy, Debug)]
pub(super) struct Breaker {
    buf: [u8; 24],
    at: usize,
}

impl Breaker {
    fn of_pid(pid: Pid) -> Self {
        let mut buf = [0u8; 24];
        let at = buf.len() - format_u64(u64::from(pid.get()), &mut buf).len();
        Breaker { buf, at }
    }

    fn of_digits(d: Decimal<'_>) -> Option<Self> {
        let src = d.as_str().as_bytes();
        let mut buf = [0u8; 24];
        let at = buf.len().checked_sub(src.len())?;
        buf[at..].copy_from_slice(src);
        Some(Breaker { buf, at })
    }

    /// The digits.
    pub(super) fn digits(&self) -> Decimal<'_> {
        // Both constructors store decimal digits, which parse again.
        Decimal::parse(&self.buf[self.at..]).unwrap_or(Decimal::ZERO)
    }
}

/// How a contender of a kind stands toward a marker, before any watch or
/// takeover: what the protocol will do with it. `swaplock status` shows
/// exactly this, so it never disagrees with a contender.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Standing {
    /// An empty marker, the strict sentinel, or a protocol 2 mode this
    /// version does not know: never evicted (invariant I10).
    Never,
    /// Unreadable as this kind's record: evicted once seen unchanged for
    /// the 2 s grace period (invariant I9).
    Malformed,
    /// A holder that is, or cannot be proven not to be, alive: the lock is
    /// held (a lease still expires when it stops being refreshed).
    Held(HeldBecause),
    /// A holder on this host that is provably gone: the marker is taken
    /// over. `recycled`: its PID runs again, as another process.
    Stale {
        /// Whether the PID is alive as another process (its start differs).
        recycled: bool,
    },
}

/// How a contender of `cfg.kind` stands toward a marker whose content is
/// `content` (PROTOCOL 3.5, 4.5): the one judgement contenders, `break`
/// and `status` share.
pub fn standing<O: Processes + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    content: Content<'_>,
) -> Standing {
    standing_of(os, cfg, &classify(content, cfg.kind.reader()))
}

fn standing_of<O: Processes + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    classified: &Classified<'_>,
) -> Standing {
    match classified {
        Classified::Recordless if active(Mutant::RecordlessEvicted) => Standing::Malformed,
        Classified::Sentinel | Classified::Recordless => Standing::Never,
        Classified::Malformed(_) => Standing::Malformed,
        // A contract this version does not know is never reclaimed.
        Classified::V2(r) if matches!(r.mode, Mode::Unknown(_)) => Standing::Never,
        Classified::V1(r) => owner_standing(os, cfg, &r.owner()),
        Classified::V2(r) => owner_standing(os, cfg, &r.owner()),
    }
}

/// The fail-closed verdict on a recorded owner (PROTOCOL 4.5, invariant
/// I8): another host is never probed.
pub(super) fn owner_standing<O: Processes + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    owner: &Owner<'_>,
) -> Standing {
    let host = match active(Mutant::ForeignProbedLocally) {
        true => owner.host,
        false => cfg.host,
    };
    if owner.host != host {
        return Standing::Held(HeldBecause::OtherHost);
    }
    let probe = os.probe(owner.pid);
    let current = if needs_current_start(owner, host, probe) {
        os.start_token(owner.pid)
    } else {
        None
    };
    let stale = Standing::Stale {
        recycled: probe == Liveness::Alive,
    };
    match judge_owner(owner, host, probe, current) {
        Verdict::Held(why) => Standing::Held(why),
        Verdict::Stale => stale,
        Verdict::StaleUnlessRunsElsewhere => match owner.start {
            Some(start) if os.runs_elsewhere(owner.pid, start) => {
                Standing::Held(HeldBecause::Alive)
            }
            _ => stale,
        },
    }
}

/// Whether the recorded owner is provably gone.
pub(super) fn is_stale<O: Processes + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    owner: &Owner<'_>,
) -> bool {
    matches!(owner_standing(os, cfg, owner), Standing::Stale { .. })
}

/// The stale step (PROTOCOL 7.7): pin, read, guard, judge per kind, take
/// over. OS errors end the step as contention, as filelock swallows them.
pub(super) fn judge_stale<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    contender: &mut Contender,
) -> Result<Attempt<O::File>, Error> {
    under_pin(
        os,
        cfg,
        || Attempt::Busy(Holder::Unknown),
        |os, read, judged, pin| judge_read(os, cfg, contender, read, judged, pin),
    )
}

/// Pins the lock path, reads the marker, and runs `judge` on what it read,
/// holding the pin until `judge` returns (invariant I5). `idle` is the
/// answer when there is nothing to judge: no marker, a failed read, or a
/// file read that is not the pinned one (the path was replaced in between,
/// so its inode number proves nothing). A failed pin other than `ENOENT`
/// continues unpinned, as filelock does: the judgement still runs, but
/// under [`Semantics::Handles`](super::Semantics::Handles) nothing is then
/// moved (there the takeover needs the pin to keep the judged file's
/// identity in use).
pub(super) fn under_pin<O: Os + ?Sized, T>(
    os: &mut O,
    cfg: &Config<'_>,
    idle: impl Fn() -> T,
    judge: impl FnOnce(&mut O, &Read, &Judged, Option<&O::File>) -> Result<T, Error>,
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
        Ok(read)
            if pinned.is_none_or(|ino| ino == read.stat.id.ino) || active(Mutant::NoPinCheck) =>
        {
            let judged = Judged { stat: read.stat };
            judge(os, &read, &judged, pin.as_ref())
        }
        _ => Ok(idle()),
    };
    if let Some(pin) = pin {
        os.close(pin);
    }
    result
}

/// Judges the marker read under the pin, per kind (PROTOCOL 7.7).
fn judge_read<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    contender: &mut Contender,
    read: &Read,
    judged: &Judged,
    pin: Option<&O::File>,
) -> Result<Attempt<O::File>, Error> {
    let busy = || Attempt::Busy(describe_holder(read.content(), cfg.kind, cfg.host));
    let classified = classify(read.content(), cfg.kind.reader());
    let breaker = match standing_of(os, cfg, &classified) {
        // Invariant I10: never judged stale.
        Standing::Never => return Ok(busy()),
        Standing::Malformed => {
            // Invariant I9: evict only after the grace period unchanged.
            if contender.observe(judged.stat().watch_key(), os.now()) < MALFORMED_GRACE
                && !active(Mutant::NoMalformedGrace)
            {
                return Ok(busy());
            }
            // A placeholder names a breaker that may have stranded a marker.
            let text = crate::record::decode(read.content()).ok();
            text.and_then(parse_placeholder)
                .and_then(Breaker::of_digits)
        }
        Standing::Stale { .. } => match &classified {
            Classified::V1(r) => Some(Breaker::of_pid(r.pid)),
            Classified::V2(r) => Some(Breaker::of_pid(r.pid)),
            _ => None,
        },
        Standing::Held(_) => {
            if let Classified::V2(record) = &classified {
                if cfg.kind == Kind::Lease && record.mode == Mode::Lease {
                    let own = cfg.lease.map_or(f64::NAN, |t| t.duration);
                    let published = record.duration.unwrap_or(f64::NAN);
                    // filelock compares the two doubles exactly (invariant I20).
                    #[allow(clippy::float_cmp)]
                    if published != own {
                        return Err(Error::LeaseMismatch { published });
                    }
                    // A live lease holder keeps the lease only while it refreshes.
                    let unchanged = contender.observe(judged.stat().watch_key(), os.now());
                    if lease_expired(unchanged, published) {
                        return Ok(take_over(os, cfg, judged, pin, None)?.attempt());
                    }
                }
            }
            return Ok(busy());
        }
    };
    Ok(take_over(os, cfg, judged, pin, breaker.as_ref())?.attempt())
}

/// The lifetime break (PROTOCOL 7.12): a marker older than `lifetime` by
/// its mtime is taken over whatever it holds, under the same pin and by
/// the same exchange as a stale one.
pub(super) fn break_expired<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    lifetime: Duration,
) -> Result<Option<Held<O::File>>, Error> {
    under_pin(
        os,
        cfg,
        || None,
        |os, read, judged, pin| {
            if !lifetime_expired(os.wall(), judged.stat().mtime, lifetime) {
                return Ok(None);
            }
            let breaker = match classify(read.content(), cfg.kind.reader()) {
                Classified::V1(r) => Some(Breaker::of_pid(r.pid)),
                Classified::V2(r) => Some(Breaker::of_pid(r.pid)),
                _ => None,
            };
            Ok(match take_over(os, cfg, judged, pin, breaker.as_ref())? {
                Takeover::Took(held) => Some(held),
                Takeover::Busy => None,
            })
        },
    )
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
