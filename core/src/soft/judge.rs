//! Pin and judgement (PROTOCOL 7.5-7.7, 7.12): pin the marker at the lock
//! path, read it, check that the file read is the file pinned, and judge
//! it by kind; a stale marker then goes to the takeover.
//!
//! Invariants kept here:
//! - I5, I6: the judged file is pinned from before the read until the
//!   takeover ends, and its inode is compared only while pinned: a
//!   [`Judged`] is minted only under the pin (or for a file its holder has
//!   open) and is borrowed, never copied, by every comparison.
//! - I8: staleness verdicts fail closed ([`standing`](fn@super::standing)).
//! - I9, I10: a malformed marker is evicted only after the grace period
//!   unchanged; an empty marker, the strict sentinel and an unknown mode
//!   never are.
//! - I20: a lease contender refuses a holder's different duration.

use super::config::{Config, Error, Kind, Op};
use super::marker::{read_marker, Seen};
use super::os::{NodeKind, Os};
use super::standing::{describe_holder, standing_of, Standing};
use super::takeover::take_over;
use super::types::{Attempt, Breaker, Contender, Held, Holder, Judged, Takeover};
use crate::decide::{lease_expired, lifetime_expired, Instant, MALFORMED_GRACE};
use crate::errno::Errno;
use crate::mutant::{active, Mutant};
use crate::record::{classify, parse_placeholder, Classified, Mode};
use core::time::Duration;

/// The stale step (PROTOCOL 7.7): pin, read, guard, judge per kind, take
/// over. OS errors end the step as contention, as filelock swallows them,
/// but for a read refused for want of descriptors (`EMFILE`, `ENFILE`),
/// which is the caller's error.
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
/// so its inode number proves nothing). A pin refused for want of
/// descriptors is the caller's error; any other failed pin but `ENOENT`
/// continues unpinned, as filelock does: the judgement still runs, to
/// say who holds the lock, but nothing is then moved
/// ([`take_over`] refuses), since nothing keeps the judged file's inode
/// number from a new holder's marker (PROTOCOL 7.5, 12.1 S18).
pub(super) fn under_pin<O: Os + ?Sized, T>(
    os: &mut O,
    cfg: &Config<'_>,
    idle: impl Fn() -> T,
    judge: impl FnOnce(&mut O, &Seen, &Judged, Option<&O::File>) -> Result<T, Error>,
) -> Result<T, Error> {
    let pin = match os.pin(cfg.lock) {
        Ok(pin) => Some(pin),
        Err(e) if e == Errno::NOENT => return Ok(idle()),
        // Out of descriptors: the caller's error, as for the read below.
        Err(errno) if errno == Errno::MFILE || errno == Errno::NFILE => {
            return Err(Error::Os {
                op: Op::Read,
                errno,
            })
        }
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
            let judged = Judged::pinned(read.stat);
            judge(os, &read, &judged, pin.as_ref())
        }
        // Out of descriptors: the caller hears it, never a marker it could
        // not read, which it would be told at every attempt while the
        // descriptors stay taken (a wait gives its watch's back on this
        // error, PROTOCOL 7.1, and takes over a dead holder's marker).
        Err(errno) if errno == Errno::MFILE || errno == Errno::NFILE => Err(Error::Os {
            op: Op::Read,
            errno,
        }),
        _ => Ok(idle()),
    };
    if let Some(pin) = pin {
        os.close(pin);
    }
    result
}

/// When the marker judged was seen as read: the watch measures how long it
/// stood unchanged up to that look, not up to the judgement (PROTOCOL 7.13).
fn looked<O: Os + ?Sized>(os: &mut O, read: &Seen) -> Instant {
    match active(Mutant::WatchTimedAtJudgement) {
        true => os.now(),
        false => read.at,
    }
}

/// Judges the marker read under the pin, per kind (PROTOCOL 7.7).
fn judge_read<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    contender: &mut Contender,
    read: &Seen,
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
            if contender.observe(judged.stat().watch_key(), looked(os, read)) < MALFORMED_GRACE
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
                    let unchanged = contender.observe(judged.stat().watch_key(), looked(os, read));
                    if lease_expired(unchanged, published) || active(Mutant::LeaseExpiredAtSight) {
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
            if !lifetime_expired(os.wall(), judged.stat().mtime, lifetime)
                && !active(Mutant::LifetimeIgnoresAge)
            {
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
