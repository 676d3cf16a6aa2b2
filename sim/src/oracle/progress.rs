//! Never a wedge: the progress check's bound and exemptions, its verdict,
//! and the directory it leaves (PROTOCOL 13.3), with the bookkeeping only
//! the exemptions read (which marker a killed writer left unwritten).

use super::{describe, describe_lock, owner_of, Oracle};
use crate::cast::LOCK;
use crate::event::{Call, Log};
use crate::model::Node;
use crate::world::{name, World};
use std::collections::BTreeSet;
use std::time::Duration;
use swaplock_core::decide::MALFORMED_GRACE;
use swaplock_core::names::{parse_derived, Derived};
use swaplock_core::record::{classify, Classified, Content, Mode, Owner};
use swaplock_core::soft::Kind;
use swaplock_core::Errno;

/// What the progress check made of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Not judged: the run was cut short, broke an invariant, left the
    /// timing assumption, or ran the naive policy (judged on safety only).
    NotJudged,
    /// The lock path holds what the protocol must never evict; the reason.
    Exempt(&'static str),
    /// A fresh contender took the lock in `attempts` of the `bound` it had.
    Took {
        /// Attempts it made.
        attempts: u32,
        /// Attempts it was allowed.
        bound: u32,
    },
}

impl Oracle {
    /// Follows the marker `who` created at the lock path and has not
    /// written yet: any call but a look or a failed one ends it (unless
    /// the process holds its markers empty by design), and an exclusive
    /// create at the lock path starts it, or ends it when it failed.
    pub(super) fn unwritten_noted(
        &mut self,
        log: &Log,
        who: usize,
        call: &Call,
        result: Result<(), Errno>,
    ) {
        // A call that failed (its write, say) changed nothing: the marker
        // is as empty as it was.
        let changed = !matches!(call, Call::Look) && result.is_ok();
        if changed && !self.holds_empty[who] {
            self.unwritten[who] = None;
        }
        if let Call::Create {
            name, generation, ..
        } = call
        {
            if log.bytes(*name) == LOCK {
                self.unwritten[who] = *generation;
            }
        }
    }

    /// Whether the lock path holds an empty marker whose creator made it
    /// there the filelock way (create, then write) and was killed before
    /// writing it.
    pub(crate) fn unwritten_marker(&self, w: &World) -> bool {
        w.fs.ino(LOCK).is_some_and(|ino| {
            let i = &w.fs.inodes[&ino];
            self.killed_unwritten.contains(&i.generation)
                && !self.taken_back.contains(&i.generation)
                && i.node == Node::File(Vec::new())
        })
    }

    /// A power cut ([`Sim::power_cut`](crate::Sim::power_cut)): every
    /// process died (their kills are read), and the files whose data the
    /// disk did not hold are `taken_back`. One of them left empty at the
    /// lock path names nobody and is never evicted (I10): a wedge for good,
    /// which the protocol must never leave (PROTOCOL 13.2).
    pub(crate) fn power_cut(&mut self, w: &World, mut taken_back: BTreeSet<u64>) {
        // A marker created by name and not yet synced: the window that
        // creating by name leaves (7.2 step 4), exempt as a killed
        // creator's unwritten marker is.
        for (generation, _) in std::mem::take(&mut self.by_name_unsynced) {
            if taken_back.remove(&generation) {
                self.killed_unwritten.insert(generation);
            }
        }
        self.taken_back.extend(taken_back);
        let Some(ino) = w.fs.ino(LOCK) else {
            return;
        };
        let i = &w.fs.inodes[&ino];
        if i.node == Node::File(Vec::new()) && self.taken_back.contains(&i.generation) {
            self.fail(format!(
                "wedge: a power cut left an empty marker at the lock path (inode {ino}): its \
                 record was never synced, and an empty marker is never evicted (I10)"
            ));
        }
    }

    /// Whether an empty file at the lock path once the run is over is one
    /// the protocol could not help leaving, and so exempt: one of the
    /// scenario's files, one a process holds empty by design (a
    /// recordless holder, a holder by name, a kernel lock's file), one
    /// whose creator was killed, or any where syscalls failed (the calls
    /// that remove a marker whose write failed may fail too). A live
    /// process that leaves its empty marker behind has wedged the lock
    /// (I10, 7.2 step 4).
    pub(crate) fn empty_left_of_necessity(&self, w: &World) -> bool {
        let Some(ino) = w.fs.ino(LOCK) else {
            return true;
        };
        let generation = w.fs.inodes[&ino].generation;
        if self.taken_back.contains(&generation) {
            // Emptied by a power cut: the protocol's doing, not a peer's.
            return false;
        }
        match self.created_by.get(&generation) {
            None => true,
            Some(&who) => self.holds_empty[who] || self.killed[who] || self.syscall_faults,
        }
    }

    /// How many attempts a fresh contender, alone once the run is over,
    /// may need to take the lock, or why the lock path holds what the
    /// protocol must never evict (the check is then exempt). The wait is
    /// the longest that applies, plus [`PROGRESS_SLACK`] polls: nothing at
    /// the path, or a record whose owner is gone, is taken at once; a
    /// malformed marker once seen unchanged for the 2 s grace period
    /// (I9); with a lifetime, anything once older than the lifetime
    /// (7.12), which also ends every exemption but the missing exchange.
    /// A lease record of a gone holder is stale like any other, and a
    /// live lease holder would lose it after the lease; none is left live.
    pub(crate) fn progress_bound(&self, w: &World) -> Result<u32, &'static str> {
        let Some(ino) = w.fs.ino(LOCK) else {
            return Ok(attempts_within(Duration::ZERO));
        };
        let windows = w.fs.windows;
        if w.fs.faults.no_exchange && !windows {
            // I11: without an exchange nothing moves a marker, stale or
            // malformed; the remedy is an operator's forced break.
            return Err("no exchange: a marker stays until a forced break (I11)");
        }
        let content = match &w.fs.inodes[&ino].node {
            Node::File(bytes) => Content::Bytes(bytes),
            Node::Symlink(_) => Content::NotRegular,
        };
        let wait = match classify(content, self.kind.reader()) {
            // I10: an empty marker names no owner (an old filelock holder
            // records nothing, or a writer is between create and write).
            Classified::Recordless => Err(RECORDLESS),
            // I10: a strict lock's sentinel is held for ever.
            Classified::Sentinel => Err("the strict sentinel (I10)"),
            // I10: a contract this version does not know.
            Classified::V2(r) if matches!(r.mode, Mode::Unknown(_)) => {
                Err("a protocol 2 mode this version does not know (I10)")
            }
            // I9: evicted once seen unchanged for the grace period.
            Classified::Malformed(_) => Ok(MALFORMED_GRACE),
            Classified::V1(r) => self.owner_wait(w, &r.owner()),
            Classified::V2(r) => self.owner_wait(w, &r.owner()),
        };
        let lifetime = self.lifetime.filter(|_| self.kind != Kind::Lease);
        let wait = match (wait, lifetime) {
            // 7.12: a lifetime break takes anything that old, whatever it
            // holds; a host whose wall clock runs behind sees it later.
            (wait, Some(lifetime)) => {
                let behind = w.wall_offsets.iter().map(|o| o.unsigned_abs()).max();
                let lifetime = lifetime + Duration::from_nanos(behind.unwrap_or(0) as u64);
                Ok(wait.map_or(lifetime, |d| d.min(lifetime)))
            }
            (wait, None) => wait,
        };
        wait.map(attempts_within)
    }

    /// How long a fresh contender waits for a record's owner: nothing if
    /// it is gone (it is judged stale at once), an exemption if it is on a
    /// host the fresh contender is not on or alive.
    fn owner_wait(&self, w: &World, owner: &Owner<'_>) -> Result<Duration, &'static str> {
        let Some(host) = w.hosts.iter().position(|h| *h == owner.host) else {
            // I8: another host's PIDs are never probed; the fresh contender
            // runs on the record's host when the scenario has it.
            return Err("a record of a host the fresh contender is not on (I8)");
        };
        // The owner itself, not a process of another boot or a later one
        // that has its PID.
        let alive = w.procs.iter().position(|p| {
            p.alive
                && p.pid == owner.pid
                && p.host == host
                && owner.start.is_none_or(|s| p.start.equals(s))
        });
        match alive {
            // I8: a live holder keeps the lock. Once the run is over every
            // process has finished or died, but those a power cut started
            // again, which stay up idle as a device's services do.
            Some(who) if self.holds[who].is_some() || self.attempting[who] => {
                Err("a live holder (I8)")
            }
            // A live process that holds nothing: a lease it does not
            // refresh lapses after the lease duration (7.14), and any other
            // record of it would keep every contender out for as long as
            // it lives, itself included.
            Some(_) => match self.lease {
                Some(lease) => Ok(lease),
                None => Err(IDLE_OWNER),
            },
            None => Ok(Duration::ZERO),
        }
    }

    /// Never a wedge: whether the fresh contender `fresh` took the lock
    /// within its bound; if so, the directory is judged
    /// ([`Oracle::directory_left_clean`]). If not, the caller either starts
    /// another on the host the lock path names now, or calls
    /// [`Oracle::wedge`].
    pub(crate) fn progress(&mut self, w: &mut World, fresh: usize) -> bool {
        let (attempts, entered) = self.attempts[fresh];
        if !entered {
            return false;
        }
        let bound = self.bounds.get(&fresh).copied().unwrap_or(0);
        self.progress = Progress::Took { attempts, bound };
        self.directory_left_clean(w, fresh);
        true
    }

    /// A wedge: the fresh contender `fresh` could not take the lock within
    /// its bound, though the lock path held nothing the protocol must
    /// never evict when the run ended; `put_back` says what a fresh
    /// contender's recovery put there since, which nobody evicts.
    pub(crate) fn wedge(&mut self, w: &mut World, fresh: usize, put_back: Option<&str>) {
        let bound = self.bounds.get(&fresh).copied().unwrap_or(0);
        let ino =
            w.fs.ino(LOCK)
                .map_or(String::new(), |i| format!(" (inode {i})"));
        let since = put_back.map_or(String::new(), |why| {
            format!(", {why}, which a fresh contender's recovery put there")
        });
        self.fail(format!(
            "wedge: a fresh contender could not take the lock within {bound} attempts; the lock path holds {}{ino}{since}",
            describe_lock(w)
        ));
    }

    /// Once the fresh contender `fresh` has released, the lock path is
    /// empty and no name of its own is left (it ran alone, without faults).
    /// Names the run left are classified by [`Oracle::leftover`]: those
    /// that no later takeover removes are reported, not failed, since
    /// they keep nobody out (a wedge fails above).
    fn directory_left_clean(&mut self, w: &World, fresh: usize) {
        if w.fs.ino(LOCK).is_some() {
            self.fail(format!(
                "the fresh contender released and left {} at the lock path",
                describe_lock(w)
            ));
            return;
        }
        let pid = w.procs[fresh].pid.get();
        for n in w.fs.names.keys() {
            let by_fresh = match parse_derived(LOCK, n) {
                Some(Derived::Break { breaker, .. }) => breaker.to_u64() == Some(u64::from(pid)),
                Some(Derived::Restore { recoverer, .. }) => recoverer.get() == pid,
                None => false,
            };
            if by_fresh {
                self.fail(format!("the fresh contender left {}", name(n)));
                return;
            }
            if let Some(kept) = self.leftover(w, n) {
                self.accumulating.push(kept);
            }
        }
    }

    /// A name the run left beside the lock path, if no later takeover would
    /// remove it: `name: what it holds`. By design, and so not reported:
    /// - names that are not the protocol's (the scenario's own files: the
    ///   victim, a planter's symlink);
    /// - a dead recoverer's restore name: every later recovery takes it
    ///   up as a candidate (7.11 step 1);
    /// - a dead breaker's own record under its own break name: a later
    ///   recovery on its host sweeps it (7.11 step 8).
    ///
    /// Anything else under a break name (a placeholder, an empty file, the
    /// released record, another process's record) is looked at only by a
    /// recovery of that breaker's names, which runs only when the lock path
    /// holds a record naming that breaker: once the breaker is gone, never.
    fn leftover(&self, w: &World, n: &[u8]) -> Option<String> {
        let breaker = match parse_derived(LOCK, n)? {
            Derived::Restore { .. } => return None,
            Derived::Break { breaker, .. } => breaker.to_u64()?,
        };
        let content = w.fs.content(n);
        let own = content
            .and_then(owner_of)
            .is_some_and(|(pid, host)| u64::from(pid) == breaker && w.hosts.contains(&host));
        if own {
            return None;
        }
        Some(format!("{}: {}", name(n), describe(w, n)))
    }
}

/// The progress check's exemption for an empty marker at the lock path.
/// The lock path holds the record of a live process that holds nothing
/// and attempts nothing: never exempt.
pub(crate) const IDLE_OWNER: &str = "the record of a live process that holds nothing";

pub(crate) const RECORDLESS: &str = "an empty marker (I10, recordless)";

/// Polls a fresh contender may need beyond the wait that applies: its
/// first attempt, a recovery or a takeover that loses a round, slack.
const PROGRESS_SLACK: u32 = 5;

/// The pause between a fresh contender's attempts: coarser than a
/// scenario contender's [`POLL`](crate::POLL), so that waiting out the
/// grace period or a lifetime takes few steps; the bound counts in it.
pub(crate) const FRESH_POLL: Duration = Duration::from_millis(500);

/// The attempts, [`FRESH_POLL`] apart, that cover `wait`, plus
/// [`PROGRESS_SLACK`].
fn attempts_within(wait: Duration) -> u32 {
    let polls = wait.as_nanos().div_ceil(FRESH_POLL.as_nanos());
    u32::try_from(polls).unwrap_or(u32::MAX - PROGRESS_SLACK) + PROGRESS_SLACK
}
