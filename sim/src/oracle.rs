//! The invariants, apart from the model, as loom keeps a test's assertions
//! apart from its mock primitives: after every step the oracle reads, in
//! order, the [`Event`]s recorded since its last look, and the world as
//! the step left it, and keeps the first violation. One function per
//! invariant, with the exemptions the protocol's assumptions allow beside
//! it:
//!
//! - [`Oracle::no_live_marker_removed`]: no process unlinks a live holder's
//!   marker, under any name, or renames it off the lock path;
//! - [`Oracle::mutual_exclusion`]: at most one live process believes it
//!   holds the lock;
//! - [`Oracle::holder_marker_linked`]: a live holder's marker is linked;
//! - [`Oracle::victim_keeps_one_name`]: a file no contender judged keeps its
//!   single name;
//! - [`Oracle::displacement_needs_a_kill_or_pause`]: a holder leaves with its
//!   marker at the lock path, unless a peer was killed or paused mid-break;
//! - [`Oracle::release_reports_no_error`]: the model fails no removal, so a
//!   release has nothing to report.
//!
//! And the bookkeeping those exemptions read: who holds which marker (from
//! the `Enter`, `Leave` and `Killed` events), which markers each process
//! created, when each lease was last refreshed and which holders lost
//! theirs ([`Oracle::lease_refreshed`], [`Oracle::leases_lapse`]), which
//! holders lost their marker to a lifetime break
//! ([`Oracle::lifetime_break`]), whether
//! a process paused mid-attempt ([`Oracle::pause_noted`]), and whether a
//! release placeholder overslept ([`Oracle::placeholder_overslept`]).

use crate::event::{Call, Event, Log, Name, Target, What};
use crate::scenario::{Scenario, LEASE, LOCK, VICTIM};
use crate::world::{name, World};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use swaplock_core::soft::{self, Kind};

/// How long a breaker waits for a nested breaker to undo its exchange
/// before giving up its exchange-back (invariant I16): a process paused
/// that long mid-break may leave a holder's marker displaced.
const BREAKER_PATIENCE: Duration = Duration::from_secs(2);

/// The invariants' judge, and what it has learnt from the events so far.
pub(crate) struct Oracle {
    /// The lifetime, when markers are broken by age: a lifetime break
    /// takes a marker older than it, whoever holds it.
    lifetime: Option<Duration>,
    /// The lease duration, for leases: a holder whose marker went
    /// unrefreshed that long may lose it, and is compromised, not wronged.
    lease: Option<Duration>,
    /// The [`VICTIM`] file's inode, when the scenario has one.
    victim: Option<u64>,
    /// Per process: the marker it believes it holds.
    holds: Vec<Option<u64>>,
    /// Per process: whether it lost its lease (or its marker to a
    /// lifetime break) while holding.
    compromised: Vec<bool>,
    /// Per process: whether it is in an attempt or a release.
    attempting: Vec<bool>,
    /// Per process: the inodes it created (its markers).
    own: Vec<BTreeSet<u64>>,
    /// Per process: when its last syscall ran.
    last_step: Vec<u64>,
    /// When each marker was last created, written, touched or exchanged in
    /// while at the lock path: a lease is refreshed only there (a heartbeat
    /// that lands on a marker a peer already took aside refreshes nothing).
    refreshed: BTreeMap<u64, i128>,
    /// Which inode is at the lock path, and since when.
    at_lock: (Option<u64>, u64),
    /// Whether a process went without a step for [`BREAKER_PATIENCE`] in
    /// the middle of an attempt or a release.
    paused: bool,
    /// The first process whose release placeholder stayed at the lock path
    /// longer than the malformed grace period (see
    /// [`Oracle::placeholder_overslept`]).
    pub(crate) overslept: Option<usize>,
    /// The first violation seen.
    pub(crate) violation: Option<String>,
    /// How many holders left with their marker displaced.
    pub(crate) displacements: u64,
}

impl Oracle {
    /// The judge of a run of `scenario` from `world`, its starting state.
    pub(crate) fn new(scenario: &Scenario, world: &World) -> Self {
        let n = world.procs.len();
        Oracle {
            lifetime: scenario.lifetime,
            lease: (scenario.kind == Kind::Lease).then_some(LEASE),
            victim: world.fs.ino(VICTIM),
            holds: vec![None; n],
            compromised: vec![false; n],
            attempting: vec![false; n],
            own: vec![BTreeSet::new(); n],
            last_step: vec![world.time; n],
            refreshed: BTreeMap::new(),
            at_lock: (None, 0),
            paused: false,
            overslept: None,
            violation: None,
            displacements: 0,
        }
    }

    /// After a step that leaves its process suspended before its next
    /// syscall: the step's events, then the state it left.
    pub(crate) fn check(&mut self, w: &mut World) {
        self.read_events(w);
        self.check_state(w);
    }

    /// The events recorded since the last look, in order; the log is then
    /// cleared, keeping its capacity. After a process's last step only its
    /// events are read: the next step's check sees the state it left.
    pub(crate) fn read_events(&mut self, w: &mut World) {
        let mut log = std::mem::take(&mut w.log);
        for e in &log.events {
            self.event(w, &log, e);
        }
        log.clear();
        w.log = log;
    }

    fn event(&mut self, w: &mut World, log: &Log, e: &Event) {
        let who = e.who;
        match &e.what {
            What::Call(call, result) => {
                self.pause_noted(w, who, e.at);
                if result.is_ok() {
                    self.call(w, log, who, call);
                }
            }
            What::Attempting(on) => self.attempting[who] = *on,
            What::Enter(ino) => {
                // Checked as it enters: it may leave within the same step.
                self.holds[who] = Some(*ino);
                self.check_state(w);
            }
            What::Leave => {
                self.displacement_needs_a_kill_or_pause(w, who);
                self.holds[who] = None;
            }
            What::ReleaseFailed(e) => self.release_reports_no_error(who, *e),
            What::Killed => self.holds[who] = None,
        }
    }

    /// A call that succeeded.
    fn call(&mut self, w: &mut World, log: &Log, who: usize, call: &Call) {
        let is_lock = |n: &Name| log.bytes(*n) == LOCK;
        match call {
            Call::Create { name, ino } => {
                if let Some(ino) = ino {
                    self.own[who].insert(*ino);
                }
                if is_lock(name) {
                    self.lease_refreshed(w, who);
                }
            }
            Call::Write { ino } | Call::Touch { ino }
                if ino.is_some() && *ino == w.fs.ino(LOCK) =>
            {
                self.lease_refreshed(w, who);
            }
            Call::Exchange {
                a,
                a_file,
                b,
                b_file,
            } if is_lock(a) || is_lock(b) => {
                let moved_off = if is_lock(a) { *a_file } else { *b_file };
                self.lifetime_break(w, who, moved_off);
                // Our marker exchanged into the lock path starts its lease.
                self.lease_refreshed(w, who);
            }
            Call::Rename { from, moved } if is_lock(from) => {
                self.no_live_marker_removed(w, who, LOCK, *moved, "renames");
            }
            Call::Unlink { name, removed } => {
                self.no_live_marker_removed(w, who, log.bytes(*name), *removed, "unlinks");
            }
            Call::RenameFile {
                moved: Some((from, moved)),
            } if is_lock(from) => {
                self.no_live_marker_removed(w, who, LOCK, Some(*moved), "renames");
            }
            Call::RemoveFile {
                removed: Some((n, removed)),
            } => {
                self.no_live_marker_removed(w, who, log.bytes(*n), Some(*removed), "deletes");
            }
            _ => {}
        }
    }

    /// The invariants on the state a step left.
    fn check_state(&mut self, w: &mut World) {
        self.victim_keeps_one_name(w);
        self.placeholder_overslept(w);
        self.leases_lapse(w);
        self.holder_marker_linked(w);
        self.mutual_exclusion(w);
    }

    fn fail(&mut self, what: String) {
        // Outside the protocol's timing assumption, nothing is promised.
        if self.violation.is_none() && self.overslept.is_none() {
            self.violation = Some(what);
        }
    }

    /// No process removes a live holder's marker: it never unlinks or
    /// deletes it (under any name) or renames it off the lock path (the
    /// caller passes only renames from there). Exempt: a marker older
    /// than the lifetime by its mtime ([`Oracle::lifetime_break`]), and
    /// one whose lease lapsed; either holder is compromised, not wronged.
    fn no_live_marker_removed(
        &mut self,
        w: &mut World,
        me: usize,
        n: &[u8],
        target: Option<Target>,
        verb: &str,
    ) {
        self.lifetime_break(w, me, target);
        let Some(Target { ino, .. }) = target else {
            return;
        };
        let Some(h) = self.live_holder(w, me, ino) else {
            return;
        };
        if self.lease_lapsed(w, ino) {
            self.compromise(w, h, "lease expired");
            return;
        }
        self.fail(format!(
            "p{me} {verb} {} (inode {ino}), the marker of live holder p{h}",
            name(n)
        ));
    }

    /// The live process other than `me` that holds the marker `ino`.
    fn live_holder(&self, w: &World, me: usize, ino: u64) -> Option<usize> {
        (0..self.holds.len()).find(|&i| i != me && w.procs[i].alive && self.holds[i] == Some(ino))
    }

    /// A lifetime break overlaps a live holder by design, but only once its
    /// marker is older than the lifetime by its mtime: a holder whose
    /// marker that old another process moves off the lock path (by an
    /// exchange or a rename) or removes is compromised, as by a lapsed
    /// lease, and no longer counts as a holder. A fresh marker is never
    /// broken so: that is [`Oracle::no_live_marker_removed`]'s to judge,
    /// and [`Oracle::mutual_exclusion`]'s.
    fn lifetime_break(&mut self, w: &mut World, me: usize, target: Option<Target>) {
        let (Some(lifetime), Some(Target { ino, mtime })) = (self.lifetime, target) else {
            return;
        };
        if w.fs.clock - mtime.as_nanos() < lifetime.as_nanos() as i128 {
            return;
        }
        if let Some(h) = self.live_holder(w, me, ino) {
            self.compromise(w, h, "marker broken past its lifetime");
        }
    }

    /// At most one live process believes it holds the lock (a holder that
    /// lost its lease, or its marker to a lifetime break, no longer
    /// counts).
    fn mutual_exclusion(&mut self, w: &World) {
        let holders: Vec<usize> = (0..self.holds.len())
            .filter(|&i| w.procs[i].alive && self.holds[i].is_some())
            .collect();
        if holders.len() > 1 {
            self.fail(format!(
                "mutual exclusion: processes {holders:?} all hold the lock"
            ));
        }
    }

    /// A live holder's marker is still linked. Exempt, under leases: a
    /// holder that paused past its lease (say, between its takeover and its
    /// first heartbeat) has lost it to a peer, and is compromised.
    fn holder_marker_linked(&mut self, w: &mut World) {
        for h in 0..self.holds.len() {
            let Some(ino) = self.holds[h].filter(|_| w.procs[h].alive) else {
                continue;
            };
            if w.fs.inodes.get(&ino).is_none_or(|i| i.nlink == 0) {
                if self.lease.is_some() {
                    self.compromise(w, h, "lease lost while paused");
                } else {
                    self.fail(format!(
                        "p{h} holds the lock but its marker (inode {ino}) was removed"
                    ));
                }
            }
        }
    }

    /// No process acts on a file it did not judge: the victim, which no
    /// contender ever judged, keeps its single name.
    fn victim_keeps_one_name(&mut self, w: &World) {
        let Some(ino) = self.victim else { return };
        let names: Vec<String> =
            w.fs.names
                .iter()
                .filter(|(_, &i)| i == ino)
                .map(|(n, _)| name(n))
                .collect();
        if names.len() != 1 {
            self.fail(format!(
                "the victim file (inode {ino}), which no contender judged, is linked as {names:?}"
            ));
        }
    }

    /// A holder leaving its critical section finds the lock path naming its
    /// marker. Exempt while a live peer is in the middle of an attempt or a
    /// release (whose exchange may hold our marker aside for the length of
    /// its check), with a lifetime, and for a compromised holder.
    /// Otherwise the marker was left displaced, which the protocol allows
    /// only once a breaker was killed mid-break (the holder's marker then
    /// waits under a break name for the next contender's recovery), or
    /// paused mid-break past [`BREAKER_PATIENCE`] (a breaker may give up its
    /// exchange-back after 2 s while a killed or paused one blocks a ring:
    /// invariant I16). Such a displacement is counted and traced; mutual
    /// exclusion holds throughout, and is checked after every step.
    fn displacement_needs_a_kill_or_pause(&mut self, w: &mut World, me: usize) {
        let ours = self.holds[me];
        let at_path = w.fs.ino(LOCK);
        let peer_busy =
            (0..self.holds.len()).any(|i| i != me && w.procs[i].alive && self.attempting[i]);
        if at_path != ours && !peer_busy && self.lifetime.is_none() && !self.compromised[me] {
            if w.procs.iter().all(|p| p.alive) && !self.paused {
                self.fail(format!(
                    "p{me} leaves with its marker {ours:?} off the lock path ({at_path:?} is there), though nobody was killed or paused"
                ));
            }
            self.displacements += 1;
            w.note(
                me,
                format_args!(
                    "DISPLACED: the lock path names inode {at_path:?}, not our marker {ours:?}"
                ),
            );
        }
    }

    /// The model fails no removal, so a release has nothing to report: an
    /// error means it gave up on a removal it could have made.
    fn release_reports_no_error(&mut self, me: usize, e: soft::Error) {
        self.fail(format!("p{me}'s release failed: {e}"));
    }

    /// Notes that process `me` refreshed the marker now at the lock path,
    /// if that marker is its own: only its holder refreshes a lease (a
    /// peer's exchange-back returning it to the path is no refresh).
    fn lease_refreshed(&mut self, w: &World, me: usize) {
        if let Some(ino) = w.fs.ino(LOCK) {
            if self.own[me].contains(&ino) {
                self.refreshed.insert(ino, w.fs.clock);
            }
        }
    }

    /// Whether the lease on marker `ino` went unrefreshed by its holder for
    /// the whole lease duration (never, outside lease scenarios).
    fn lease_lapsed(&self, w: &World, ino: u64) -> bool {
        let Some(lease) = self.lease else {
            return false;
        };
        let refreshed = self.refreshed.get(&ino).copied().unwrap_or(i128::MIN / 2);
        w.fs.clock - refreshed >= lease.as_nanos() as i128
    }

    /// A live holder whose marker went unrefreshed for the lease duration
    /// is compromised: it no longer counts as a holder.
    fn leases_lapse(&mut self, w: &mut World) {
        for h in 0..self.holds.len() {
            let Some(ino) = self.holds[h].filter(|_| w.procs[h].alive) else {
                continue;
            };
            if self.lease_lapsed(w, ino) {
                self.compromise(w, h, "lease expired unrefreshed");
            }
        }
    }

    /// Holder `h` has lost its lease: it no longer counts as a holder, and
    /// its heartbeat, once it runs, reports the compromise.
    fn compromise(&mut self, w: &mut World, h: usize, why: &str) {
        self.holds[h] = None;
        self.compromised[h] = true;
        w.note(h, format_args!("{why}: compromised"));
    }

    /// Notes a syscall of `who` at time `at`, and whether it came after a
    /// pause of [`BREAKER_PATIENCE`] in the middle of an attempt or a
    /// release.
    fn pause_noted(&mut self, w: &mut World, who: usize, at: u64) {
        let pause = at - self.last_step[who];
        if self.attempting[who] && pause >= BREAKER_PATIENCE.as_nanos() as u64 && !self.paused {
            self.paused = true;
            w.note(
                who,
                format_args!(
                    "PAUSED for {:?} in an attempt or a release",
                    Duration::from_nanos(pause)
                ),
            );
        }
        self.last_step[who] = at;
    }

    /// Soft locks assume a release finishes well within the malformed grace
    /// period: a peer may then evict its placeholder (it reads as
    /// malformed) and publish its own marker, which the paused releaser's
    /// by-name unlink would remove, as no POSIX call unlinks a name only if
    /// it still links a given inode. With a lifetime, the same holds once
    /// the placeholder is older than the lifetime by its mtime (it is
    /// written before it is exchanged in): a lifetime break takes any
    /// marker that old. The first placeholder found at the lock path past
    /// either takes the run outside the protocol's timing assumption, and
    /// from then on it is not judged.
    fn placeholder_overslept(&mut self, w: &mut World) {
        let here = w.fs.ino(LOCK);
        if here != self.at_lock.0 {
            self.at_lock = (here, w.time);
        }
        let Some(ino) = here.filter(|_| self.overslept.is_none()) else {
            return;
        };
        let placeholder =
            w.fs.content(LOCK)
                .is_some_and(|c| c.starts_with(b"filelock/break\n"));
        let grace = swaplock_core::decide::MALFORMED_GRACE.as_nanos() as u64;
        let owner = (0..self.own.len()).find(|&i| w.procs[i].alive && self.own[i].contains(&ino));
        let lifetime_passed = self.lifetime.is_some_and(|l| {
            let mtime = w.fs.inodes[&ino].mtime.as_nanos();
            w.fs.clock - mtime >= l.as_nanos() as i128
        });
        if let (true, Some(owner)) = (placeholder, owner) {
            if w.time - self.at_lock.1 >= grace || lifetime_passed {
                self.overslept = Some(owner);
                w.note(owner, format_args!("OVERSLEPT: its placeholder stayed at the lock path past the grace period or the lifetime"));
            }
        }
    }
}
