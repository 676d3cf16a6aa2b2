//! The lease heartbeat (PROTOCOL 7.14, 7.15): check that the lock path
//! still shows our marker, touch our own inode, and report a compromise
//! only when it is certain enough.
//!
//! Invariants kept here:
//! - I18: the heartbeat touches its own inode (through its descriptor)
//!   after checking the path, never a name a peer may have replaced.
//! - I19: a compromise is reported only on the second consecutive miss,
//!   since a peer's check may hold our marker aside for an instant.

use super::config::Config;
use super::os::Os;
use super::types::Held;
use crate::decide::Instant;
use crate::errno::Errno;
use core::time::Duration;

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
pub fn refresh<O: Os + ?Sized>(os: &mut O, cfg: &Config<'_>, held: &Held<O::File>) -> Refresh {
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

/// The heartbeat interval of a lease of `duration` (PROTOCOL 7.15):
/// `interval` if the holder chose one, else a third of the lease; `None`
/// when the terms cannot hold, for a zero lease or an interval not within
/// (0, `duration`): a heartbeat that never comes, or comes only after the
/// lease has lapsed.
pub fn heartbeat_interval(duration: Duration, interval: Option<Duration>) -> Option<Duration> {
    let interval = interval.unwrap_or(duration / 3);
    (!interval.is_zero() && interval < duration).then_some(interval)
}

/// How long a holder that asks whether its lease is lost waits between its
/// two looks ([`lost`]).
pub const CONFIRM_PAUSE: Duration = Duration::from_millis(1);

/// Whether a lease holder has lost its lease, asked between heartbeats (a
/// guard's `lease_lost`): one refresh (7.15), and on a miss a second after
/// [`CONFIRM_PAUSE`], reported only when both miss, by the heartbeat's own
/// [`CompromiseWatch`] (I19: a peer's check may hold our marker aside for an
/// instant). A refresh that succeeds, or fails for now, says nothing is
/// lost.
pub fn lost<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    held: &Held<O::File>,
) -> Option<Compromise> {
    // Only misses count here: a transient failure ends the check first.
    let mut watch = CompromiseWatch::new(os.now(), Duration::MAX, Duration::ZERO);
    loop {
        let result = refresh(os, cfg, held);
        if matches!(result, Refresh::Ok | Refresh::Transient(_)) {
            return None;
        }
        if let Some(compromise) = watch.observe(result, os.now()) {
            return Some(compromise);
        }
        os.sleep(CONFIRM_PAUSE);
    }
}

/// Why a lease holder learned it may have lost its lease.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Compromise {
    /// Our marker is gone (twice in a row); for an etcd lock, our key.
    MarkerMissing,
    /// Another file is at the lock path (twice in a row).
    OwnerChanged,
    /// Refreshes failed for longer than the lease allows.
    RefreshFailed(Errno),
    /// The lock service itself reports our lease gone: it expired or was
    /// revoked (an etcd lock's lease, whose keep-alive was answered with
    /// no time left).
    LeaseExpired,
    /// The lock service could not be reached for the whole lease, by the
    /// holder's own clock: the lease may have expired there (an etcd
    /// lock's keep-alive unanswered past its deadline).
    Unreachable,
    /// A peer evicted this holder: the read-write lock's latest snapshot
    /// no longer names it, or its holder record was removed or replaced
    /// (filelock's `reason='evicted'`).
    Evicted,
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
    fn the_heartbeat_is_a_third_of_the_lease_unless_chosen_and_within_it() {
        let s = Duration::from_secs;
        assert_eq!(heartbeat_interval(s(30), None), Some(s(10)));
        assert_eq!(heartbeat_interval(s(30), Some(s(29))), Some(s(29)));
        assert_eq!(
            heartbeat_interval(s(30), Some(s(30))),
            None,
            "never before the lease lapses"
        );
        assert_eq!(heartbeat_interval(s(30), Some(Duration::ZERO)), None);
        assert_eq!(
            heartbeat_interval(Duration::ZERO, None),
            None,
            "a zero lease"
        );
        assert_eq!(
            heartbeat_interval(Duration::from_nanos(2), None),
            None,
            "a third of it is zero"
        );
    }

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
