//! The etcd lock's decisions (PROTOCOL 15), which the facade's `etcd`
//! module drives over etcd's client: whether our key holds the lock,
//! whether it is still ours, and the keep-alive of our lease (when to send,
//! how long to await an answer, when the lease counts as lost by our own
//! clock, and which member to ask next). Times are durations since the
//! lease's grant was asked, on the holder's monotonic clock. Its modules
//! judge the connection's credentials (PROTOCOL 15.1): the client
//! certificate ([`cert`]) and etcd's refusals ([`refusal`]).

use crate::soft::Compromise;
use core::time::Duration;

pub mod cert;
pub mod refusal;

/// Whether our key, of create revision `mine`, holds the lock: the key
/// with the lowest create revision under the lock's name is `first`
/// (`None`: the read found none). A key created later waits.
pub fn holds(mine: i64, first: Option<i64>) -> bool {
    first.is_none_or(|first| first == mine)
}

/// Whether our key, of create revision `created`, is still ours, from the
/// create revision of the key read back under its name (`found`; `None`:
/// no key there): `None` while it is, [`Compromise::MarkerMissing`] once
/// it is gone, [`Compromise::OwnerChanged`] when a key of our lease's name
/// was made again since.
pub fn key_lost(created: i64, found: Option<i64>) -> Option<Compromise> {
    match found {
        Some(revision) if revision == created => None,
        Some(_) => Some(Compromise::OwnerChanged),
        None => Some(Compromise::MarkerMissing),
    }
}

/// What became of one keep-alive of our lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Answer {
    /// etcd renewed the lease, with this many seconds left (0 or less: it
    /// has expired).
    Left(i64),
    /// etcd no longer knows the lease.
    Unknown,
    /// No answer came within the time [`KeepAlive::send`] allowed.
    Silent,
    /// The request failed, or the stream of answers broke (a member went
    /// away).
    Broke,
}

/// The keep-alive of a lease (PROTOCOL 15, keep-alive and loss): every
/// third of the TTL from the grant on. An answered keep-alive moves the
/// lease's deadline to the time it was *sent* plus the TTL etcd answered,
/// so the holder's deadline is never later than etcd's. Once an attempt
/// failed, the stream is opened anew on each member in turn, so that a
/// member that froze is left behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct KeepAlive {
    period: Duration,
    deadline: Duration,
    next: Duration,
    turn: Option<usize>,
    members: usize,
}

impl KeepAlive {
    /// The keep-alive of a lease granted `ttl` (asked at time zero), among
    /// `members` endpoints.
    pub fn new(ttl: Duration, members: usize) -> Self {
        let period = ttl / 3;
        KeepAlive {
            period,
            deadline: ttl,
            next: period,
            turn: None,
            members: members.max(1),
        }
    }

    /// When the next keep-alive goes out.
    pub fn next(&self) -> Duration {
        self.next
    }

    /// When the lease counts as lost, by our clock, unless a keep-alive is
    /// answered first.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// The member whose own client opens the next stream: `None`, the
    /// client of every endpoint, until an attempt fails; then each member
    /// in turn.
    pub fn member(&self) -> Option<usize> {
        self.turn
    }

    /// A keep-alive about to go out at `sent`: until when its answer is
    /// awaited (at most half a period, or a third of the request timeout,
    /// and never past the deadline: a member answers in milliseconds, and
    /// one that froze leaves time for two others); or
    /// [`Compromise::Unreachable`] when the deadline has passed already (the
    /// holder was stopped, or etcd was away), reported at once rather than
    /// after one more request.
    pub fn send(&self, sent: Duration, request_timeout: Duration) -> Result<Duration, Compromise> {
        if sent >= self.deadline {
            return Err(Compromise::Unreachable);
        }
        Ok(self
            .deadline
            .min(sent + (self.period / 2).min(request_timeout / 3)))
    }

    /// What the keep-alive sent at `sent` came to, seen at `now` (`retry`:
    /// the pause before a stream that broke is opened again): `Some` ends
    /// the keep-alive with the loss to report.
    pub fn answer(
        &mut self,
        sent: Duration,
        now: Duration,
        answer: Answer,
        retry: Duration,
    ) -> Option<Compromise> {
        match answer {
            Answer::Left(left) if left <= 0 => return Some(Compromise::LeaseExpired),
            Answer::Unknown => return Some(Compromise::LeaseExpired),
            Answer::Left(left) => {
                self.deadline = sent + Duration::from_secs(left.unsigned_abs());
                self.next = sent + self.period;
            }
            Answer::Silent if now >= self.deadline => return Some(Compromise::Unreachable),
            Answer::Silent => {
                self.rotate();
                self.next = now;
            }
            Answer::Broke => {
                self.rotate();
                self.next = now + retry.min(self.period);
            }
        }
        None
    }

    /// The next member's turn.
    fn rotate(&mut self) {
        self.turn = Some(self.turn.map_or(0, |k| (k + 1) % self.members));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn the_first_key_holds_and_a_key_is_ours_while_its_revision_stands() {
        assert!(holds(7, None));
        assert!(holds(7, Some(7)));
        assert!(!holds(7, Some(5)));
        assert_eq!(key_lost(7, Some(7)), None);
        assert_eq!(key_lost(7, Some(9)), Some(Compromise::OwnerChanged));
        assert_eq!(key_lost(7, None), Some(Compromise::MarkerMissing));
    }

    #[test]
    fn an_answer_moves_the_deadline_to_its_sending_plus_the_ttl_left() {
        let mut k = KeepAlive::new(S(60), 3);
        assert_eq!((k.next(), k.deadline(), k.member()), (S(20), S(60), None));
        // Half a period, or a third of the request timeout.
        assert_eq!(k.send(S(20), S(6)), Ok(S(22)));
        assert_eq!(k.send(S(20), S(60)), Ok(S(30)));
        assert_eq!(k.answer(S(20), S(21), Answer::Left(59), S(1)), None);
        assert_eq!((k.next(), k.deadline(), k.member()), (S(40), S(79), None));
        // Never past the deadline.
        assert_eq!(k.send(S(75), S(60)), Ok(S(79)));
        assert_eq!(k.send(S(79), S(60)), Err(Compromise::Unreachable));
    }

    #[test]
    fn no_time_left_or_an_unknown_lease_is_expired() {
        let mut k = KeepAlive::new(S(30), 1);
        assert_eq!(
            k.answer(S(10), S(10), Answer::Left(0), S(1)),
            Some(Compromise::LeaseExpired)
        );
        assert_eq!(
            k.answer(S(10), S(10), Answer::Left(-1), S(1)),
            Some(Compromise::LeaseExpired)
        );
        assert_eq!(
            k.answer(S(10), S(10), Answer::Unknown, S(1)),
            Some(Compromise::LeaseExpired)
        );
    }

    #[test]
    fn silence_or_a_broken_stream_turns_to_the_next_member_until_the_deadline() {
        let mut k = KeepAlive::new(S(30), 2);
        assert_eq!(k.answer(S(10), S(12), Answer::Silent, S(1)), None);
        assert_eq!((k.next(), k.member()), (S(12), Some(0)), "again at once");
        assert_eq!(k.answer(S(12), S(13), Answer::Broke, S(1)), None);
        assert_eq!(
            (k.next(), k.member()),
            (S(14), Some(1)),
            "after the retry pause"
        );
        assert_eq!(k.answer(S(14), S(15), Answer::Broke, S(60)), None);
        assert_eq!(
            (k.next(), k.member()),
            (S(25), Some(0)),
            "the pause at most a period"
        );
        assert_eq!(
            k.answer(S(25), S(30), Answer::Silent, S(1)),
            Some(Compromise::Unreachable)
        );
        assert_eq!(k.deadline(), S(30));
    }
}
