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
//! - [`Oracle::release_leaves_no_record_of_its_own`]: a release that
//!   returns `Ok` leaves no marker of its own at the lock path that still
//!   names it;
//! - [`Oracle::release_fails_only_under_faults`]: without injected syscall
//!   faults the model fails no removal, so a release has nothing to report;
//! - [`Oracle::contention_is_no_error`]: where a create over an existing
//!   name is refused with `EPERM`, no acquire reports an error unless a
//!   failure was injected;
//! - [`Oracle::progress`]: once the run is over, a fresh contender alone
//!   takes the lock within a bound (never a wedge), unless the lock path
//!   holds what the protocol must never evict ([`Oracle::progress_bound`]
//!   names each exemption), and leaves the directory clean
//!   ([`Oracle::directory_left_clean`]), reporting the files of the run
//!   that no later takeover would remove ([`Oracle::leftover`]).
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
use crate::model::{Access, Node};
use crate::scenario::{Scenario, LEASE, LOCK, VICTIM};
use crate::world::{name, World};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use swaplock_core::decide::{FileTime, MALFORMED_GRACE};
use swaplock_core::names::{parse_derived, Derived};
use swaplock_core::record::{classify, Classified, Content, Mode, Owner, Reader, RELEASED};
use swaplock_core::soft::{self, Kind};

/// How long a breaker waits for a nested breaker to undo its exchange
/// before giving up its exchange-back (invariant I16): a process paused
/// that long mid-break may leave a holder's marker displaced.
const BREAKER_PATIENCE: Duration = Duration::from_secs(2);

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

/// The invariants' judge, and what it has learnt from the events so far.
pub(crate) struct Oracle {
    /// The kind of soft lock the contenders take.
    kind: Kind,
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
    /// The markers a lifetime break took: a contender paused past the
    /// lifetime between its takeover and its entry enters with one, and
    /// is compromised as a holder paused so would be.
    broken_by_age: BTreeSet<u64>,
    /// Per process: the inodes it created (its markers).
    own: Vec<BTreeSet<u64>>,
    /// Per process: its attempts before it first entered, and whether it
    /// entered.
    attempts: Vec<(u32, bool)>,
    /// Per process: the marker it created at the lock path by an exclusive
    /// create, while it has made no call since but to look at it (`fstat`,
    /// `fchmod`): a kill now leaves it empty for good, as it would a
    /// filelock peer's. Its inode's generation (numbers are reused).
    unwritten: Vec<Option<u64>>,
    /// Per process: it holds its marker empty by design (a recordless
    /// holder, a holder by name): its kill leaves the marker it created
    /// empty at any time.
    holds_empty: Vec<bool>,
    /// The generations of the markers created at the lock path by an
    /// exclusive create (made the filelock way, empty until written) whose
    /// creator was killed before it wrote them or did anything else with
    /// them but look at them.
    killed_unwritten: BTreeSet<u64>,
    /// Per fresh contender of the progress check: the attempts it had.
    bounds: BTreeMap<usize, u32>,
    /// Per process: when its last syscall ran.
    last_step: Vec<u64>,
    /// Per process: when its last syscall other than `close` ran.
    last_look: Vec<u64>,
    /// When each removed file lost its last name (by `unlink` or a delete
    /// through a handle).
    removed_at: BTreeMap<u64, u64>,
    /// When each marker was last created, written, touched or exchanged in
    /// while at the lock path: a lease is refreshed only there (a heartbeat
    /// that lands on a marker a peer already took aside refreshes nothing).
    refreshed: BTreeMap<u64, i128>,
    /// Which inode is at the lock path, with its mtime and ctime, and
    /// since when: a contender's watch times a marker from its last change.
    at_lock: (Option<(u64, FileTime, FileTime)>, u64),
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
    /// What the progress check made of the run.
    pub(crate) progress: Progress,
    /// Files the run left that no later takeover would remove, each as
    /// `name: content`.
    pub(crate) accumulating: Vec<String>,
}

impl Oracle {
    /// The judge of a run of `scenario` from `world`, its starting state.
    pub(crate) fn new(scenario: &Scenario, world: &World) -> Self {
        let n = world.procs.len();
        Oracle {
            kind: scenario.kind,
            lifetime: scenario.lifetime,
            lease: (scenario.kind == Kind::Lease).then_some(LEASE),
            victim: world.fs.ino(VICTIM),
            holds: vec![None; n],
            compromised: vec![false; n],
            attempting: vec![false; n],
            broken_by_age: BTreeSet::new(),
            own: vec![BTreeSet::new(); n],
            attempts: vec![(0, false); n],
            unwritten: vec![None; n],
            holds_empty: vec![false; n],
            killed_unwritten: BTreeSet::new(),
            bounds: BTreeMap::new(),
            last_step: vec![world.time; n],
            last_look: vec![world.time; n],
            removed_at: BTreeMap::new(),
            refreshed: BTreeMap::new(),
            at_lock: (None, 0),
            paused: false,
            overslept: None,
            violation: None,
            displacements: 0,
            progress: Progress::NotJudged,
            accumulating: Vec::new(),
        }
    }

    /// Starts judging a process added to the world after the start: the
    /// progress check's fresh contender, with `bound` attempts.
    pub(crate) fn admit(&mut self, w: &World, bound: u32) {
        self.bounds.insert(self.holds.len(), bound);
        self.holds.push(None);
        self.compromised.push(false);
        self.attempting.push(false);
        self.own.push(BTreeSet::new());
        self.attempts.push((0, false));
        self.unwritten.push(None);
        self.holds_empty.push(false);
        self.last_step.push(w.time);
        self.last_look.push(w.time);
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
                self.unwritten_noted(log, who, call);
                self.pause_noted(w, who, e.at);
                if !matches!(call, Call::Close) {
                    self.last_look[who] = e.at;
                }
                if result.is_ok() {
                    self.call(w, log, who, e.at, call);
                }
            }
            What::Attempting(on) => {
                self.attempting[who] = *on;
                if *on && !self.attempts[who].1 {
                    self.attempts[who].0 += 1;
                }
            }
            // The protocol's last look before it enters is at its marker's
            // link count (only the pin's close may follow): a marker
            // removed before then is one it would have seen gone. A
            // contender stopped past a lease or a lifetime after that look
            // may lose it to a peer's takeover, and is compromised below.
            What::Enter(ino)
                if self
                    .removed_at
                    .get(ino)
                    .is_some_and(|&at| at < self.last_look[who])
                    && w.fs.inodes.get(ino).is_none_or(|i| i.nlink == 0) =>
            {
                self.attempts[who].1 = true;
                self.fail(format!(
                    "p{who} enters with its marker (inode {ino}) already removed, which its last look would have seen"
                ));
            }
            What::Enter(ino) if self.broken_by_age.contains(ino) => {
                self.attempts[who].1 = true;
                self.compromise(w, who, "entered with a marker broken past its lifetime");
            }
            What::Enter(ino) => {
                // Checked as it enters: it may leave within the same step.
                self.holds[who] = Some(*ino);
                self.attempts[who].1 = true;
                self.check_state(w);
            }
            What::Leave => {
                self.displacement_needs_a_kill_or_pause(w, who);
                self.holds[who] = None;
            }
            What::Released { ino, error: None } => {
                self.release_leaves_no_record_of_its_own(w, who, *ino);
            }
            What::Released { error: Some(e), .. } => {
                self.release_fails_only_under_faults(w, who, *e);
            }
            What::AcquireFailed(e) => self.contention_is_no_error(w, who, *e),
            What::HoldsEmpty => self.holds_empty[who] = true,
            What::Killed => {
                self.holds[who] = None;
                if let Some(generation) = self.unwritten[who].take() {
                    self.killed_unwritten.insert(generation);
                }
            }
        }
    }

    /// Follows the marker `who` created at the lock path and has not
    /// written yet: any call but a look ends it (unless the process holds
    /// its markers empty by design), and an exclusive create at the lock
    /// path starts it, or ends it when it failed.
    fn unwritten_noted(&mut self, log: &Log, who: usize, call: &Call) {
        if !matches!(call, Call::Look) && !self.holds_empty[who] {
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
            self.killed_unwritten.contains(&i.generation) && i.node == Node::File(Vec::new())
        })
    }

    /// Where an exclusive create over an existing name fails with `EPERM`
    /// (an SFTP client) and no failure is injected, that refusal is
    /// contention, which an attempt reports as busy: an acquire that
    /// reports it as an error has taken a held lock for a broken one.
    fn contention_is_no_error(&mut self, w: &World, me: usize, e: soft::Error) {
        let injected = w.fs.faults.syscall_one_in > 0
            || w.fs.faults.eio_one_in > 0
            || w.fs.faults.full_after.is_some();
        if w.fs.faults.exists_as_eperm && !injected {
            self.fail(format!(
                "p{me}'s acquire failed: {e}, where the create was refused over an existing name"
            ));
        }
    }

    /// A call that succeeded.
    fn call(&mut self, w: &mut World, log: &Log, who: usize, at: u64, call: &Call) {
        let is_lock = |n: &Name| log.bytes(*n) == LOCK;
        match call {
            Call::Create { name, ino, .. } => {
                if let Some(ino) = ino {
                    self.own[who].insert(*ino);
                }
                if is_lock(name) {
                    self.lease_refreshed(w, who);
                }
            }
            Call::CreateUnnamed { ino: Some(ino) } => {
                self.own[who].insert(*ino);
            }
            // Our complete marker linked at the lock path starts its lease.
            Call::Link { name } if is_lock(name) => self.lease_refreshed(w, who),
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
                self.removal(w, at, removed.map(|t| t.ino));
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
                self.removal(w, at, Some(removed.ino));
                self.no_live_marker_removed(w, who, log.bytes(*n), Some(*removed), "deletes");
            }
            _ => {}
        }
    }

    /// Notes when a file that a call unlinked or deleted lost its last
    /// name.
    fn removal(&mut self, w: &World, at: u64, ino: Option<u64>) {
        if let Some(ino) = ino.filter(|i| w.fs.inodes.get(i).is_none_or(|i| i.nlink == 0)) {
            self.removed_at.insert(ino, at);
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
        self.broken_by_age.insert(ino);
        if let Some(h) = self.live_holder(w, me, ino) {
            self.compromise(w, h, "marker broken past its lifetime");
        }
    }

    /// At most one live process believes it holds the lock (a holder that
    /// lost its lease, or its marker to a lifetime break, no longer
    /// counts).
    fn mutual_exclusion(&mut self, w: &World) {
        let holding = |i: &usize| w.procs[*i].alive && self.holds[*i].is_some();
        if (0..self.holds.len()).filter(holding).count() > 1 {
            let holders: Vec<usize> = (0..self.holds.len()).filter(holding).collect();
            self.fail(format!(
                "mutual exclusion: processes {holders:?} all hold the lock"
            ));
        }
    }

    /// A live holder's marker is still linked. Exempt, under leases: a
    /// holder that paused past its lease (say, between its takeover and its
    /// first heartbeat) has lost it to a peer, and is compromised; but only
    /// once the lease has lapsed.
    fn holder_marker_linked(&mut self, w: &mut World) {
        for h in 0..self.holds.len() {
            let Some(ino) = self.holds[h].filter(|_| w.procs[h].alive) else {
                continue;
            };
            if w.fs.inodes.get(&ino).is_none_or(|i| i.nlink == 0) {
                // Only a lease that lapsed may be lost so: a fresh marker
                // removed before its holder entered (after its last look)
                // is as wrong as one removed while it held.
                let lapsed = self.lease_lapsed(w, ino) || self.broken_by_age.contains(&ino);
                if self.lease.is_some() && lapsed {
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
        let linked = || w.fs.names.iter().filter(|(_, &i)| i == ino);
        if linked().count() != 1 {
            let names: Vec<String> = linked().map(|(n, _)| name(n).to_string()).collect();
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
    /// invariant I16), or once syscalls may fail (a breaker whose exchange
    /// or check fails mid-break leaves what it took under its break name,
    /// as a killed one does). Such a displacement is counted and traced; mutual
    /// exclusion holds throughout, and is checked after every step.
    fn displacement_needs_a_kill_or_pause(&mut self, w: &mut World, me: usize) {
        let ours = self.holds[me];
        let at_path = w.fs.ino(LOCK);
        let peer_busy =
            (0..self.holds.len()).any(|i| i != me && w.procs[i].alive && self.attempting[i]);
        if at_path != ours && !peer_busy && self.lifetime.is_none() && !self.compromised[me] {
            // A breaker whose syscall failed mid-break abandons as a killed
            // one would be stopped: injected syscall faults count as kills.
            let killed = !w.procs.iter().all(|p| p.alive) || w.fs.faults.syscall_one_in > 0;
            if !killed && !self.paused {
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

    /// A release that returned `Ok` (of the marker of inode `ino`) left no
    /// marker of its own at the lock path that still names it: its caller
    /// believes the lock free, and a record naming a live process would
    /// keep every contender out until it exits. Its file may still be
    /// there with the released record or as a placeholder's content (a
    /// peer's check held it aside and put it back): those age out.
    /// Checked as the release returns, before any peer runs.
    fn release_leaves_no_record_of_its_own(&mut self, w: &World, me: usize, ino: u64) {
        let Some(at_path) = w.fs.ino(LOCK).filter(|i| self.own[me].contains(i)) else {
            return;
        };
        let names_me = match w.fs.content(LOCK) {
            Some(bytes) => owner_of(bytes).is_some_and(|(pid, host)| {
                pid == w.procs[me].pid.get() && host == w.hosts[w.procs[me].host]
            }),
            None => false,
        };
        if names_me {
            self.fail(format!(
                "p{me}'s release of inode {ino} returned Ok, but its marker (inode {at_path}) at the lock path still names it: {}",
                describe_lock(w)
            ));
        }
    }

    /// Without injected syscall faults the model fails no removal, so a
    /// release has nothing to report: an error means it gave up on a
    /// removal it could have made. With faults, a release may fail; its
    /// marker then names its process, and the progress check shows that
    /// the next contender breaks it once that process is gone.
    fn release_fails_only_under_faults(&mut self, w: &World, me: usize, e: soft::Error) {
        if w.fs.faults.syscall_one_in == 0 {
            self.fail(format!(
                "p{me}'s release failed: {e}, though no syscall fault was injected"
            ));
        }
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
    /// period: a peer may evict its marker, once marked released, or its
    /// placeholder (both read as malformed) and publish its own marker,
    /// which the paused releaser's by-name unlink would remove, as no POSIX
    /// call unlinks a name only if it still links a given inode. With a
    /// lifetime, the same holds once the placeholder is older than the
    /// lifetime by its mtime (it is written before it is exchanged in): a
    /// lifetime break takes any marker that old. The first such file of a
    /// live process (a released marker: one in its release) found at the
    /// lock path past either, unchanged, takes the run outside the
    /// protocol's timing assumption, and from then on it is not judged.
    fn placeholder_overslept(&mut self, w: &mut World) {
        let here = w.fs.ino(LOCK).map(|ino| {
            let i = &w.fs.inodes[&ino];
            (ino, i.mtime, i.ctime)
        });
        if here != self.at_lock.0 {
            self.at_lock = (here, w.time);
        }
        let Some((ino, mtime, _)) = here.filter(|_| self.overslept.is_none()) else {
            return;
        };
        let content = w.fs.content(LOCK).unwrap_or_default();
        let placeholder = content.starts_with(b"filelock/break\n");
        let released = content.starts_with(RELEASED);
        if !placeholder && !released {
            return;
        }
        // Only a file its owner still holds open for writing: that is the
        // remover whose by-name unlink the assumption protects (a file is
        // removed only while open, I7). A placeholder an abandoned takeover
        // let go of ages out at the lock path by design.
        let writes = |i: usize| {
            w.procs[i].fds.iter().any(|fd| {
                w.fs.descs
                    .get(fd)
                    .is_some_and(|d| d.ino == ino && d.access == Access::Write)
            })
        };
        let owner = (0..self.own.len()).find(|&i| {
            w.procs[i].alive
                && self.own[i].contains(&ino)
                && (placeholder || self.attempting[i])
                && writes(i)
        });
        let Some(owner) = owner else { return };
        let grace = MALFORMED_GRACE.as_nanos() as u64;
        let lifetime_passed = self
            .lifetime
            .is_some_and(|l| w.fs.clock - mtime.as_nanos() >= l.as_nanos() as i128);
        if w.time - self.at_lock.1 >= grace || lifetime_passed {
            self.overslept = Some(owner);
            w.note(owner, format_args!("OVERSLEPT: its placeholder or released marker stayed at the lock path past the grace period or the lifetime"));
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
            Classified::Recordless => Err("an empty marker (I10, recordless)"),
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
        let alive = w
            .procs
            .iter()
            .any(|p| p.alive && p.pid == owner.pid && p.host == host);
        if alive {
            // I8: a live holder keeps the lock. None is left once the run
            // is over: every process has finished or died.
            return Err("a live holder (I8)");
        }
        Ok(Duration::ZERO)
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

/// The owner (PID, host) a record names, read as a protocol 2 reader
/// reads (which falls back to protocol 1).
pub(crate) fn owner_of(bytes: &[u8]) -> Option<(u32, &str)> {
    match classify(Content::Bytes(bytes), Reader::Protocol2) {
        Classified::V1(r) => Some((r.pid.get(), r.host)),
        Classified::V2(r) => Some((r.pid.get(), r.host)),
        _ => None,
    }
}

/// What the lock path holds, for a message.
fn describe_lock(w: &World) -> String {
    describe(w, LOCK)
}

/// What a name holds, for a message: nothing, a symlink, or a file's
/// bytes.
fn describe(w: &World, n: &[u8]) -> String {
    let Some(ino) = w.fs.ino(n) else {
        return "nothing".to_owned();
    };
    match &w.fs.inodes[&ino].node {
        Node::File(bytes) => format!("{:?}", String::from_utf8_lossy(bytes)),
        Node::Symlink(target) => format!("a symlink to {}", name(target)),
    }
}
