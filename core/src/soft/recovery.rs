//! Recovery of a killed breaker's stranded record (PROTOCOL 5.3, 7.11):
//! before a marker whose writer is dead is taken over, the records that
//! writer may have left under its break names (a live holder's marker it
//! held aside when it died) are found, claimed and put back.
//!
//! Invariants kept here:
//! - I13: break and restore names carry random tokens.
//! - I15: a stranded record is claimed by a rename to our own restore name
//!   (one winner); a live claimer's restore name means the lock is held;
//!   one thread of a process claims a name at a time.
//! - A record that may be alive, and any record of another process, alive
//!   or not (it may lead a recovery to that process's own break names),
//!   goes back to the lock path only if the path still shows the dead
//!   breaker's record we judged; otherwise it is handed back under a fresh
//!   break name of that breaker.
//! - Nothing stays for good: another dead breaker's own complete record
//!   under its own break name (a takeover killed before its exchange, or
//!   while undoing it) is swept once claimed and no process runs under its
//!   PID (while one does, the name waits for a later sweep); anything else
//!   found there is handed back untouched.

use super::config::{Config, Error};
use super::marker::read_marker;
use super::os::{NodeKind, Os};
use super::standing::{is_stale, owner_standing, Standing};
use super::types::Judged;
use crate::errno::Errno;
use crate::mutant::{active, Mutant};
use crate::names::{break_name, parse_derived_in, restore_name, Derived, Name};
use crate::pid::Pid;
use crate::record::{classify, parse_placeholder, Classified, Content, Mode, Owner};
use crate::Decimal;

/// How many stranded candidates one recovery considers; more count as held
/// (fail closed) until some are dealt with.
const MAX_CANDIDATES: usize = 16;

/// How many other breakers' names one recovery sweeps; the rest wait for
/// the next takeover.
const MAX_LEFTOVERS: usize = 8;

/// What a recovery concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stranded {
    /// The lock counts as held: a live record went back to the lock path, a
    /// live recoverer is at work, or nothing can be concluded.
    Held,
    /// Nothing of the dead writer's stands in the way of the takeover.
    Clear,
}

/// Whose name a candidate is under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Claim {
    /// A break name of the dead writer, or a dead recoverer's restore
    /// name: claimed by renaming it to our own restore name.
    Rename,
    /// Our own restore name, left by an earlier recovery of ours: ours
    /// already.
    Adopt,
}

/// Whether `owner` is of this host and of another boot than ours: both
/// start tokens carry a boot id, and they differ. Such a holder is gone
/// for sure, whatever runs under its PID now (PROTOCOL 4.2, 13.2).
fn of_an_earlier_boot(cfg: &Config<'_>, owner: &Owner<'_>) -> bool {
    let ours = match cfg.start {
        Some(start) if start.high != 0 => start.high,
        _ => return false,
    };
    let boot = owner.start.and_then(|s| s.to_u192()).map(|(high, _)| high);
    owner.host == cfg.host && boot.is_some_and(|b| b != 0 && b != ours)
}

/// A stranded record to recover.
struct Candidate {
    name: Name,
    claim: Claim,
}

/// What a scan found: the dead writer's candidates, and other breakers'
/// break names to sweep if they hold their own dead breaker's record.
struct Scan {
    candidates: heapless::Vec<Candidate, MAX_CANDIDATES>,
    leftovers: heapless::Vec<Name, MAX_LEFTOVERS>,
}

/// A recovery of the records a dead writer (`breaker`) stranded, while the
/// caller holds the pin on `judged`, the dead writer's record at the lock
/// path.
pub(super) struct Recovery<'a, 'c, O: ?Sized> {
    /// The world.
    pub(super) os: &'a mut O,
    /// This attempt's configuration.
    pub(super) cfg: &'a Config<'c>,
    /// The dead writer's record at the lock path, pinned.
    pub(super) judged: &'a Judged,
    /// The dead writer's PID, as its break names carry it.
    pub(super) breaker: Decimal<'a>,
}

impl<O: Os + ?Sized> Recovery<'_, '_, O> {
    /// Scans the directory for the dead writer's break names and for
    /// restore names, and recovers each candidate in name order.
    pub(super) fn run(mut self) -> Result<Stranded, Error> {
        let Some(scan) = self.scan() else {
            return Ok(Stranded::Held);
        };
        for candidate in &scan.candidates {
            if self.recover(candidate)? == Stranded::Held {
                return Ok(Stranded::Held);
            }
        }
        for name in &scan.leftovers {
            self.sweep(name)?;
        }
        Ok(Stranded::Clear)
    }

    /// The candidates, sorted, and other breakers' names; `None` when the
    /// lock counts as held (a failed listing, too many candidates, or a
    /// live recoverer at work).
    fn scan(&mut self) -> Option<Scan> {
        let (lock, breaker) = (self.cfg.lock, self.breaker);
        let case = self.os.name_case();
        let mut overflow = false;
        // Each name found, with the recoverer that claimed it, if any.
        let mut found: heapless::Vec<(Name, Option<Pid>), MAX_CANDIDATES> = heapless::Vec::new();
        let mut leftovers = heapless::Vec::new();
        let listed = self.os.list(&mut |entry| {
            let recoverer = match parse_derived_in(case, lock, entry) {
                Some(Derived::Break { breaker: b, .. }) if b == breaker => None,
                Some(Derived::Break { .. }) => {
                    // Best effort: more wait for the next takeover.
                    if let Ok(name) = Name::from_slice(entry) {
                        let _ = leftovers.push(name);
                    }
                    return;
                }
                Some(Derived::Restore { recoverer, .. }) => Some(recoverer),
                _ => return,
            };
            if let Ok(name) = Name::from_slice(entry) {
                overflow |= found.push((name, recoverer)).is_err();
            }
        });
        if (listed.is_err() && !active(Mutant::RecoveryListErrorClear)) || overflow {
            return None;
        }
        let mut candidates = heapless::Vec::new();
        for (name, recoverer) in found {
            // Only regular files, without following symlinks, are
            // candidates. A name we cannot look at may hold a live holder's
            // marker that the dead writer took aside: the lock counts as
            // held, as for a failed listing (the schedule fuzzer found a
            // takeover that went on past an `lstat` failing with `EACCES`
            // while the marker of a holder sat under that name).
            //
            // A name gone since the listing may have been claimed by a
            // peer's recovery, by a rename to a restore name this listing
            // did not see, while that peer still has a live holder's marker
            // in hand (or hands it back under a new break name): the lock
            // counts as held, and the next attempt lists again. Skipped, it
            // let the simulator's second recoverer find nothing and take
            // the lock over while the first held the stranded marker.
            match self.os.lstat(&name) {
                Ok(st) if st.kind == NodeKind::Regular => {}
                Ok(_) => continue,
                Err(e) if e == Errno::NOENT && active(Mutant::VanishedCandidateSkipped) => continue,
                Err(_) if active(Mutant::RecoveryLstatErrorSkipped) => continue,
                Err(_) => return None,
            }
            let claim = match recoverer {
                // The dead writer's PID may run again (a PID reused, the
                // boot after a power cut): its break names may then be a
                // live breaker's at work, which must not be taken for the
                // dead writer's (PROTOCOL 7.11 step 1, 13.2).
                None if self.a_live_breakers(&name) => return None,
                None => Claim::Rename,
                Some(r) if r == self.cfg.pid && !active(Mutant::NoAdoptOwnClaim) => Claim::Adopt,
                Some(r) => {
                    let owner = Owner {
                        pid: r,
                        host: self.cfg.host,
                        start: None,
                    };
                    if !is_stale(self.os, self.cfg, &owner)
                        && !self.claims_an_earlier_boots_record(&name)
                        && !active(Mutant::LiveRecovererIgnored)
                    {
                        // A live recoverer is at work: the lock counts as held.
                        return None;
                    }
                    Claim::Rename
                }
            };
            // `found` holds at most as many names as `candidates` can.
            let _ = candidates.push(Candidate { name, claim });
        }
        candidates.sort_unstable_by(|a: &Candidate, b: &Candidate| {
            a.name.cmp(&b.name).then(a.claim.cmp(&b.claim))
        });
        Some(Scan {
            candidates,
            leftovers,
        })
    }

    /// Sweeps `name`, another breaker's break name, if it holds that
    /// breaker's own record and the breaker is provably gone: its takeover
    /// was killed before its exchange (or while undoing it), so the record
    /// is at no lock path and nobody will ever need it. Claimed by a rename
    /// to our own restore name first (one winner, I15) and judged again
    /// there; anything else is handed back under a fresh break name of
    /// that breaker.
    fn sweep(&mut self, name: &Name) -> Result<(), Error> {
        let case = self.os.name_case();
        let Some(Derived::Break { breaker, .. }) = parse_derived_in(case, self.cfg.lock, name)
        else {
            return Ok(());
        };
        if !self.is_dead_breakers_own(name, breaker) {
            return Ok(());
        }
        let own = restore_name(self.cfg.lock, self.cfg.pid, &self.os.token())?;
        if !self.os.begin_claim(&own) {
            return Ok(());
        }
        if self.os.rename(name, &own).is_ok() {
            if active(Mutant::SweepUnjudged) || self.is_dead_breakers_own(&own, breaker) {
                let _ = self.os.unlink(&own);
            } else {
                self.hand_back(&own, breaker)?;
            }
        }
        self.os.end_claim(&own);
        Ok(())
    }

    /// Whether the restore name `name` holds a record of this host made in
    /// another boot than ours (its start token's boot id, when both tokens
    /// carry one): its holder is gone for sure, so every recoverer removes
    /// it, and the claim protects nothing, whoever runs under the
    /// recoverer's PID now. A restore name carries no start token of its
    /// own: after a power cut the PID it names may run a process of the new
    /// boot, whose claim it is not, for as long as that process lives
    /// (PROTOCOL 7.11, 13.2).
    fn claims_an_earlier_boots_record(&mut self, name: &[u8]) -> bool {
        if active(Mutant::RestoreClaimByPidAlone) {
            return false;
        }
        let Ok(read) = read_marker(self.os, name) else {
            return false;
        };
        match classify(read.content(), self.cfg.kind.reader()) {
            Classified::V1(r) => of_an_earlier_boot(self.cfg, &r.owner()),
            // A mode this version does not know is never taken (I10).
            Classified::V2(r) if matches!(r.mode, Mode::Unknown(_)) => false,
            Classified::V2(r) => of_an_earlier_boot(self.cfg, &r.owner()),
            _ => false,
        }
    }

    /// Whether the dead writer's break name `name` is a live breaker's
    /// that runs under the dead writer's PID: it holds the very file we
    /// judged at the lock path (that breaker's exchange took it aside
    /// after our judgement), or a record of this host naming that PID
    /// whose process lives (that breaker's own, not yet exchanged). A name
    /// holds one process's files for good (its token is that process's),
    /// so what this look finds settles whose the name is.
    fn a_live_breakers(&mut self, name: &[u8]) -> bool {
        if active(Mutant::BreakCandidateUnchecked) {
            return false;
        }
        // A name that cannot be read may be a live breaker's: held, as
        // `restore` would answer for a claim it cannot read.
        let Ok(read) = read_marker(self.os, name) else {
            return true;
        };
        if self.judged.is(&read.stat()) {
            return true;
        }
        let owner = match classify(read.content(), self.cfg.kind.reader()) {
            Classified::V1(r) => r.owner(),
            Classified::V2(r) => r.owner(),
            _ => return false,
        };
        // Only a start token tells the PID's process now from the dead
        // writer; a record without one is the dead writer's as before.
        self.breaker.to_u64() == Some(u64::from(owner.pid.get()))
            && owner.host == self.cfg.host
            && owner.start.is_some()
            && !is_stale(self.os, self.cfg, &owner)
    }

    /// Whether `name` holds a record of `breaker` on this host, provably
    /// gone, and no process runs under its PID now: a break name carries
    /// only the PID, so while one runs the name may be that process's, at
    /// work on a takeover of its own, with a record of the PID's earlier
    /// process aside (PROTOCOL 13.2). The sweep is best effort: such a
    /// name waits for a later one.
    fn is_dead_breakers_own(&mut self, name: &[u8], breaker: Decimal<'_>) -> bool {
        let Ok(read) = read_marker(self.os, name) else {
            return false;
        };
        let owner = match classify(read.content(), self.cfg.kind.reader()) {
            Classified::V1(r) => r.owner(),
            Classified::V2(r) => r.owner(),
            _ => return false,
        };
        breaker.to_u64() == Some(u64::from(owner.pid.get()))
            && owner.host == self.cfg.host
            && match owner_standing(self.os, self.cfg, &owner) {
                Standing::Stale { recycled } => !recycled,
                _ => false,
            }
    }

    /// Claims one candidate by renaming it to our own restore name (one
    /// winner), then restores or removes it.
    fn recover(&mut self, candidate: &Candidate) -> Result<Stranded, Error> {
        let own = match candidate.claim {
            Claim::Adopt => candidate.name.clone(),
            Claim::Rename => restore_name(self.cfg.lock, self.cfg.pid, &self.os.token())?,
        };
        if !self.os.begin_claim(&own) {
            return Ok(Stranded::Held);
        }
        let result =
            if candidate.claim == Claim::Rename && self.os.rename(&candidate.name, &own).is_err() {
                // A peer won the rename and holds the record now.
                Ok(Stranded::Held)
            } else {
                self.restore(&own)
            };
        self.os.end_claim(&own);
        result
    }

    /// Deals with the record we claimed as `own`: removes it if nobody
    /// live needs it, or puts it back at the lock path.
    fn restore(&mut self, own: &Name) -> Result<Stranded, Error> {
        let Ok(read) = read_marker(self.os, own) else {
            if active(Mutant::RestoreReadErrorClear) {
                return Ok(Stranded::Clear);
            }
            self.hand_back(own, self.breaker)?;
            return Ok(Stranded::Held);
        };
        if !self.goes_back(read.content()) {
            let _ = self.os.unlink(own);
            return Ok(Stranded::Clear);
        }
        // Put the live record back at the lock path, if the path still holds
        // the dead breaker's record we judged.
        let lock = self.cfg.lock;
        if (active(Mutant::RestoreOverAnything)
            || self.os.lstat(lock).is_ok_and(|st| self.judged.is(&st)))
            && self.os.exchange(own, lock).is_ok()
        {
            if active(Mutant::RestoreNoSwapBack)
                || self.os.lstat(own).is_ok_and(|st| self.judged.same_ino(&st))
            {
                let _ = self.os.unlink(own);
                return Ok(Stranded::Held);
            }
            // A peer replaced the path in between, and our exchange fed its
            // file aside under our claim: inside the timing assumption a
            // nested breaker's file, mid-exchange. It is handed back below,
            // not swapped back: an exchange takes whatever the path holds
            // when it runs, and a recovery paused before it took aside a
            // marker made since, while its holder held (12.1 S17, as S16
            // for the exchange-back).
            if active(Mutant::RestoreSwapBack) {
                let _ = self.os.exchange(own, lock);
            }
        }
        self.hand_back(own, self.breaker)?;
        Ok(Stranded::Held)
    }

    /// Hands a claim back under a fresh break name of the dead `breaker`.
    fn hand_back(&mut self, own: &Name, breaker: Decimal<'_>) -> Result<(), Error> {
        let token = self.os.token();
        let name = break_name(self.cfg.lock, breaker, &token)?;
        if active(Mutant::HandBackDeletes) {
            let _ = self.os.unlink(own);
            return Ok(());
        }
        // A failure leaves the claim under our PID; the next poll adopts it.
        let _ = self.os.rename(own, &name);
        Ok(())
    }

    /// Whether a stranded record goes back to the lock path (PROTOCOL 7.11
    /// step 6): a record that may name a live holder, and a record of any
    /// process but the dead writer, alive or not. A dead process's record
    /// aside may be the one it exchanged into the lock path as a breaker
    /// killed mid-takeover (a nested breaker then took it aside), whose own
    /// break names hold what that exchange took, perhaps a live holder's
    /// marker: only its record at the lock path, judged stale there, leads
    /// a recovery of its names to it (12.1 S15). Removed here, nothing
    /// would: the schedule fuzzer found a contender entering beside that
    /// holder. Only the dead writer's own record, its own placeholder and
    /// what no holder can own (a released mark, malformed content) go.
    fn goes_back(&mut self, content: Content<'_>) -> bool {
        let (cfg, breaker) = (self.cfg, self.breaker);
        let is_breakers = |owner: &Owner<'_>| {
            breaker.to_u64() == Some(u64::from(owner.pid.get())) && owner.host == cfg.host
        };
        match classify(content, cfg.kind.reader()) {
            Classified::Sentinel | Classified::Recordless => {
                !active(Mutant::RecoveryDeletesRecordless)
            }
            // Another breaker's placeholder, in the middle of its break or its
            // release: that breaker, if alive, needs it back at the lock path to
            // undo its own exchange, which returns whatever it took (a live
            // holder's marker, say) to the path. filelock deletes it as
            // malformed, and the simulator found that this strands the marker
            // the live breaker holds aside: a second holder then entered. A
            // placeholder names no host, so its breaker cannot be probed: it
            // counts as live and goes back; if its breaker is gone, it ages out
            // at the lock path as any malformed marker does.
            Classified::Malformed(_) if active(Mutant::RecoveryDeletesPlaceholders) => false,
            Classified::Malformed(_) => crate::record::decode(content)
                .ok()
                .and_then(parse_placeholder)
                .is_some_and(|pid| pid.to_u64() != breaker.to_u64()),
            _ if active(Mutant::RecoveryDeletesLiveRecords) => false,
            Classified::V1(r) => !is_breakers(&r.owner()) && !self.deleted_as_dead(&r.owner()),
            Classified::V2(r) => {
                matches!(r.mode, Mode::Unknown(_))
                    || (!is_breakers(&r.owner()) && !self.deleted_as_dead(&r.owner()))
            }
        }
    }

    /// The mutant's removal of a record whose owner is proven gone (of this
    /// host and another boot than ours, or stale), as recovery did before
    /// 12.1 S15; never otherwise.
    fn deleted_as_dead(&mut self, owner: &Owner<'_>) -> bool {
        active(Mutant::RecoveryDeletesDeadOwners)
            && (of_an_earlier_boot(self.cfg, owner) || is_stale(self.os, self.cfg, owner))
    }
}
