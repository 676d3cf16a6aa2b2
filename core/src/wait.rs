//! Clocks and patience: how an acquire reads time, pauses, and decides
//! whether to try again. Both lock protocols wait through these, so the
//! production loop, the simulator and a caller's own policy (a deadline, a
//! progress report, a wake-up on release) share one driver.

use crate::decide::{FileTime, Instant};
use core::time::Duration;

/// The clocks and the pause an acquire needs.
pub trait Clock {
    /// A monotonic clock reading (never the wall clock: lease and grace
    /// periods are measured on it).
    fn now(&mut self) -> Instant;
    /// The wall clock, as file times are (lifetime breaks compare it with
    /// a marker's mtime).
    fn wall(&mut self) -> FileTime;
    /// Pause for `duration`.
    fn sleep(&mut self, duration: Duration);
}

/// A caller's patience: consulted after every attempt that found the lock
/// busy. `B` is what the attempt learned of the holder.
pub trait Patience<B: ?Sized> {
    /// An attempt is about to start.
    fn attempting(&mut self) {}

    /// The attempt found the lock busy (`holder`), `elapsed` after the
    /// acquire began: `Some(pause)` to try again after that pause, `None`
    /// to give up (the acquire then reports the lock busy).
    fn busy(&mut self, holder: &B, elapsed: Duration) -> Option<Duration>;
}

/// How long an acquire may wait: what a lock's calls come to (`try_lock`,
/// `lock`, `lock_timeout`), for every backend. `I` is the caller's
/// monotonic instant, or the time left to the deadline once the wait is
/// under way ([`Wait::left`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Wait<I> {
    /// One attempt (`try_lock`): a lock it finds taken is reported busy.
    No,
    /// Until the lock is taken (`lock`).
    Forever,
    /// Until this deadline (`lock_timeout`): a lock still taken then is a
    /// timeout.
    Until(I),
}

impl<I> Wait<I> {
    /// Whether a lock still taken when this wait gives up means that its
    /// deadline passed (a timeout), rather than that one attempt found it
    /// taken (busy). A wait without a deadline gives up only when the
    /// caller cancels it.
    pub fn timed(&self) -> bool {
        matches!(self, Wait::Until(_))
    }

    /// Whether an attempt of this wait may block in the kernel's lock call:
    /// only a wait with no deadline, since no lock call these locks have
    /// can be cut short at one (a timed wait waits in the kernel on a
    /// thread of its own, or polls).
    pub fn blocks(&self) -> bool {
        matches!(self, Wait::Forever)
    }

    /// Whether the wait may try more than once (it may then be handed a
    /// lock that another thread of the process releases, say).
    pub fn waits(&self) -> bool {
        !matches!(self, Wait::No)
    }

    /// This wait with its deadline given as the time `left` says is left
    /// to it.
    pub fn left(self, left: impl FnOnce(I) -> Duration) -> Wait<Duration> {
        match self {
            Wait::No => Wait::No,
            Wait::Forever => Wait::Forever,
            Wait::Until(deadline) => Wait::Until(left(deadline)),
        }
    }
}

/// The usual patience: a [`Wait`] given as the time left when the acquire
/// begins, with attempts every `poll` until it gives up (the last pause cut
/// to the time left).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Deadline {
    /// How long to keep trying, counted from the acquire's start. The first
    /// attempt always runs, even with no time left.
    pub wait: Wait<Duration>,
    /// The pause between attempts.
    pub poll: Duration,
}

impl Deadline {
    /// One attempt only.
    pub const fn once() -> Self {
        Deadline {
            wait: Wait::No,
            poll: Duration::ZERO,
        }
    }
}

impl<B: ?Sized> Patience<B> for Deadline {
    fn busy(&mut self, _holder: &B, elapsed: Duration) -> Option<Duration> {
        match self.wait {
            Wait::No => None,
            Wait::Forever => Some(self.poll),
            Wait::Until(timeout) => match timeout.saturating_sub(elapsed) {
                Duration::ZERO => None,
                left => Some(left.min(self.poll)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_times_out_only_with_a_deadline_and_carries_it_as_time_left() {
        let ms = Duration::from_millis;
        assert!(Wait::Until(7u64).timed());
        assert!(!Wait::<u64>::No.timed() && !Wait::<u64>::Forever.timed());
        assert!(Wait::<u64>::Forever.blocks());
        assert!(!Wait::<u64>::No.blocks() && !Wait::Until(7u64).blocks());
        assert!(Wait::<u64>::Forever.waits() && Wait::Until(7u64).waits());
        assert!(!Wait::<u64>::No.waits());
        let left = |deadline: u64| ms(deadline - 5);
        assert_eq!(Wait::Until(25u64).left(left), Wait::Until(ms(20)));
        assert_eq!(Wait::<u64>::No.left(left), Wait::No);
        assert_eq!(Wait::<u64>::Forever.left(left), Wait::Forever);
    }

    #[test]
    fn a_deadline_cuts_the_last_pause_to_the_time_left() {
        let mut d = Deadline {
            wait: Wait::Until(Duration::from_millis(120)),
            poll: Duration::from_millis(50),
        };
        let ms = Duration::from_millis;
        assert_eq!(Patience::<()>::busy(&mut d, &(), ms(0)), Some(ms(50)));
        assert_eq!(Patience::<()>::busy(&mut d, &(), ms(100)), Some(ms(20)));
        assert_eq!(Patience::<()>::busy(&mut d, &(), ms(120)), None);
        assert_eq!(Patience::<()>::busy(&mut d, &(), ms(500)), None);
        let mut none_left = Deadline {
            wait: Wait::Until(Duration::ZERO),
            poll: ms(50),
        };
        assert_eq!(Patience::<()>::busy(&mut none_left, &(), ms(0)), None);
        let mut once = Deadline::once();
        assert_eq!(Patience::<()>::busy(&mut once, &(), ms(0)), None);
        let mut forever = Deadline {
            wait: Wait::Forever,
            poll: ms(50),
        };
        assert_eq!(
            Patience::<()>::busy(&mut forever, &(), ms(1 << 40)),
            Some(ms(50))
        );
    }
}
