//! Who wins from a scan of the claims (PROTOCOL 18.5): the decisions of
//! the doorway's steps 3, 5 and 7 over the set of claims a scan proved to
//! exist, the pause between attempts, and the directories' modes.
//!
//! The safety of the doorway rests on names that stay: a contender's
//! intent exists, unchanged, from before its second scan until its
//! release, so any scan that begins after it is published lists it. Two
//! contenders that both reach step 7 therefore both see both intents, and
//! only the smaller token wins (invariant ST3).

use super::claim::{ClaimName, ClaimState};
use crate::names::Token;
use crate::wait::Wait;
use core::time::Duration;

/// How many claims a scan keeps. A scan that proves more to exist is
/// [`overflowed`](Scan::overflowed): no step can win from it, which is
/// right, since more than one contender's claims are then present.
pub const SCAN_CAPACITY: usize = 64;

/// The claims one scan listed, read, proved to exist and parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    claims: heapless::Vec<ClaimName, SCAN_CAPACITY>,
    overflowed: bool,
}

impl Scan {
    /// An empty scan.
    pub const fn new() -> Self {
        Scan {
            claims: heapless::Vec::new(),
            overflowed: false,
        }
    }

    /// Adds a claim the scan proved to exist.
    pub fn push(&mut self, claim: ClaimName) {
        if self.claims.push(claim).is_err() {
            self.overflowed = true;
        }
    }

    /// Whether the scan found no claim at all.
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty() && !self.overflowed
    }

    /// Whether the scan found more claims than it keeps.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// The claims kept.
    pub fn claims(&self) -> &[ClaimName] {
        &self.claims
    }
}

/// Step 3: whether an attempt may publish its intent. Any claim at all
/// keeps it out, and it publishes nothing (invariant ST2).
pub fn may_publish(scan: &Scan) -> bool {
    scan.is_empty()
}

/// Step 5, after publishing the intent of `token`: whether to link the
/// held claim. Only when no claim is held and the smallest claim name is
/// our intent.
pub fn may_link_held(scan: &Scan, token: &Token) -> bool {
    if scan.overflowed() || scan.claims.iter().any(|c| c.state == ClaimState::Held) {
        return false;
    }
    // No held claim is listed, so every name is an intent's, and the
    // smallest name is the smallest token's.
    let smallest = scan.claims.iter().min_by_key(|c| c.key());
    smallest.is_some_and(|c| c.token == *token)
}

/// Step 7, after linking the held claim of `token`: whether the attempt
/// won. Only when both our intent and our held claim are listed and no
/// claim of any state carries a smaller token.
pub fn won(scan: &Scan, token: &Token) -> bool {
    // A listing names each claim once: two claims of our token are our
    // intent and our held claim.
    let ours = scan.claims.iter().filter(|c| c.token == *token).count();
    !scan.overflowed() && ours == 2 && scan.claims.iter().all(|c| c.key() >= token.0)
}

/// The pause before attempt `attempt` (0 for the pause after the first
/// attempt) with a poll interval of `poll`, from 64 random bits.
///
/// filelock draws a jittered pause only when the interval is below 50 ms
/// and otherwise keeps a fixed cadence, on which two contenders that lose
/// to each other (each sees the other's smaller token or held claim, and
/// both retry) can keep meeting (PROTOCOL 18.8). Here every pause is drawn
/// from a window that starts at half the interval and widens, doubling per
/// attempt, to `max(interval, 50 ms)`: the mean stays near the interval,
/// and contenders drift apart.
pub fn retry_pause(poll: Duration, attempt: u32, random: u64) -> Duration {
    const CAP: Duration = Duration::from_millis(50);
    let widest = poll.max(CAP);
    let window = poll
        .checked_mul(1u32 << attempt.min(20))
        .map_or(widest, |w| w.min(widest));
    let nanos = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
    let offset = match nanos {
        0 => 0,
        n => random % n.saturating_add(1),
    };
    (poll / 2).saturating_add(Duration::from_nanos(offset))
}

/// A strict lock's patience: how long an acquire may wait, counted from
/// its start, with a [`retry_pause`] between attempts (the last one cut
/// to the time left). The first attempt always runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Jittered {
    /// How long to keep trying.
    pub wait: Wait<Duration>,
    /// The poll interval the pauses are drawn around.
    pub poll: Duration,
    /// Attempts found busy so far.
    pub attempts: u32,
}

impl Jittered {
    /// A patience that has seen no attempt.
    pub const fn new(wait: Wait<Duration>, poll: Duration) -> Self {
        Jittered {
            wait,
            poll,
            attempts: 0,
        }
    }

    /// After an attempt that found the lock busy `elapsed` into the
    /// acquire: the pause before the next one, drawn from `random`, or
    /// `None` to give up.
    pub fn busy(&mut self, elapsed: Duration, random: u64) -> Option<Duration> {
        let pause = retry_pause(self.poll, self.attempts, random);
        self.attempts = self.attempts.saturating_add(1);
        match self.wait {
            Wait::No => None,
            Wait::Forever => Some(pause),
            Wait::Until(timeout) => match timeout.saturating_sub(elapsed) {
                Duration::ZERO => None,
                left => Some(left.min(pause)),
            },
        }
    }
}

/// The mode the coordination and claims' directories are made with, for
/// the file mode `file_mode` (0o666 unless the lock says otherwise): the
/// file mode plus search permission wherever it grants read.
pub const fn directory_mode(file_mode: u32) -> u32 {
    let m = file_mode & 0o777;
    m | ((m & 0o444) >> 2)
}

/// The mode a directory this account owns is set to, from its current
/// `st_mode` and the [`directory_mode`] it was made with: its special
/// bits, only the permissions both grant, and the sticky bit, so that
/// only a claim's owner may remove it. `None` when it has that mode.
pub const fn settled_directory_mode(st_mode: u32, dir_mode: u32) -> Option<u32> {
    const STICKY: u32 = 0o1000;
    let settled = (st_mode & 0o7000) | (st_mode & dir_mode & 0o777) | STICKY;
    if settled == st_mode & 0o7777 {
        None
    } else {
        Some(settled)
    }
}
