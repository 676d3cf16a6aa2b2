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
//!
//! The invariants of safety are in `safety`, the progress check and its
//! exemptions in `progress`; the reading of events and the bookkeeping
//! here.

mod progress;
mod safety;
mod timing;

pub use progress::Progress;
pub(crate) use progress::{FRESH_POLL, IDLE_OWNER, RECORDLESS};

use crate::cast::{Scenario, LEASE, LOCK, VICTIM};
use crate::event::{Call, Event, Log, Name, Target, What};
use crate::model::Node;
use crate::world::{name, World};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use swaplock_core::decide::FileTime;
use swaplock_core::record::{classify, Classified, Content, Reader};
use swaplock_core::soft::Kind;

/// How long a breaker waits for a nested breaker to undo its exchange
/// before giving up its exchange-back (invariant I16): a process paused
/// that long mid-break may leave a holder's marker displaced.
const BREAKER_PATIENCE: Duration = Duration::from_secs(2);

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
    /// Who created each file of the run (by its inode's generation),
    /// empty at first: by an exclusive create, or unnamed.
    created_by: BTreeMap<u64, usize>,
    /// Per process: it was killed.
    killed: Vec<bool>,
    /// Whether the run injects syscall failures, which may fail the
    /// calls that remove a marker whose write failed.
    syscall_faults: bool,
    /// The files whose data a power cut took back (their record was
    /// written but not synced), by generation: an empty marker of these at
    /// the lock path is the cut's doing, never exempt.
    pub(crate) taken_back: BTreeSet<u64>,
    /// Markers created by name at the lock path (the filelock way) and not
    /// yet synced, by generation, with their creator: a power cut there
    /// may keep the name without the record, the window creating by name
    /// cannot close (7.2 step 4, I10).
    by_name_unsynced: BTreeMap<u64, usize>,
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
    /// Per process: its own file at the lock path that it changed
    /// (created, linked, written, touched or exchanged in) during its
    /// current attempt or release.
    changed: Vec<Option<u64>>,
    /// Per process: its last look at the lock path since that change, if
    /// it showed that file holding a lease record: the inode, and since
    /// when the path had shown it unchanged.
    looked: Vec<Option<(u64, u64)>>,
    /// The first process that took the run outside the protocol's timing
    /// assumption (see `timing`): its release placeholder stayed at the
    /// lock path longer than the malformed grace period
    /// ([`Oracle::placeholder_overslept`]), or it acted on the lock path by
    /// name past its lease ([`Oracle::acts_within_lease`]).
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
            created_by: BTreeMap::new(),
            killed: vec![false; n],
            syscall_faults: scenario.faults.injects_syscall_failures(),
            taken_back: BTreeSet::new(),
            by_name_unsynced: BTreeMap::new(),
            bounds: BTreeMap::new(),
            last_step: vec![world.time; n],
            last_look: vec![world.time; n],
            removed_at: BTreeMap::new(),
            refreshed: BTreeMap::new(),
            at_lock: (None, 0),
            paused: false,
            changed: vec![None; n],
            looked: vec![None; n],
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
        self.admit_restarted(w);
    }

    /// Starts judging a process a power cut's boot started again (a
    /// scenario's process, with its attempts).
    pub(crate) fn admit_restarted(&mut self, w: &World) {
        self.holds.push(None);
        self.compromised.push(false);
        self.attempting.push(false);
        self.own.push(BTreeSet::new());
        self.attempts.push((0, false));
        self.unwritten.push(None);
        self.holds_empty.push(false);
        self.killed.push(false);
        self.changed.push(None);
        self.looked.push(None);
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
                self.unwritten_noted(log, who, call, *result);
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
                self.changed[who] = None;
                self.looked[who] = None;
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
            What::KernelFailed(step, e) => self.kernel_fails_only_under_faults(w, who, *step, *e),
            What::HoldsEmpty => self.holds_empty[who] = true,
            What::Killed => {
                self.killed[who] = true;
                self.holds[who] = None;
                if let Some(generation) = self.unwritten[who].take() {
                    self.killed_unwritten.insert(generation);
                }
            }
        }
    }

    /// A call that succeeded.
    fn call(&mut self, w: &mut World, log: &Log, who: usize, at: u64, call: &Call) {
        let is_lock = |n: &Name| log.bytes(*n) == LOCK;
        match call {
            Call::Create {
                name,
                ino,
                generation,
            } => {
                if let Some(ino) = ino {
                    self.own[who].insert(*ino);
                }
                if let Some(generation) = generation {
                    self.created_by.insert(*generation, who);
                }
                if is_lock(name) {
                    self.lease_refreshed(w, who);
                    self.own_change_noted(w, who);
                    if let Some(generation) = generation {
                        self.by_name_unsynced.insert(*generation, who);
                    }
                }
            }
            Call::Sync { ino: Some(ino) } => {
                if let Some(i) = w.fs.inodes.get(ino) {
                    self.by_name_unsynced.remove(&i.generation);
                }
            }
            Call::CreateUnnamed { ino: Some(ino) } => {
                self.own[who].insert(*ino);
                if let Some(i) = w.fs.inodes.get(ino) {
                    self.created_by.insert(i.generation, who);
                }
            }
            // Our complete marker linked at the lock path starts its lease.
            Call::Link { name } if is_lock(name) => {
                self.lease_refreshed(w, who);
                self.own_change_noted(w, who);
            }
            Call::Write { ino } | Call::Touch { ino }
                if ino.is_some() && *ino == w.fs.ino(LOCK) =>
            {
                self.lease_refreshed(w, who);
                self.own_change_noted(w, who);
            }
            Call::Lstat { name } if is_lock(name) => self.lock_looked_at(w, who, at),
            Call::Exchange {
                a,
                a_file,
                b,
                b_file,
            } if is_lock(a) || is_lock(b) => {
                self.acts_within_lease(w, who, at);
                let moved_off = if is_lock(a) { *a_file } else { *b_file };
                self.lifetime_break(w, who, moved_off);
                // Our marker exchanged into the lock path starts its lease.
                self.lease_refreshed(w, who);
                self.own_change_noted(w, who);
            }
            Call::Rename { from, moved } if is_lock(from) => {
                self.no_live_marker_removed(w, who, LOCK, *moved, "renames");
            }
            Call::Unlink { name, removed } => {
                if is_lock(name) {
                    self.acts_within_lease(w, who, at);
                }
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

    pub(crate) fn fail(&mut self, what: String) {
        // Outside the protocol's timing assumption, nothing is promised.
        if self.violation.is_none() && self.overslept.is_none() {
            self.violation = Some(what);
        }
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

/// The start token a record names, as (boot id, start time), if it
/// names one that fits.
pub(crate) fn start_of(bytes: &[u8]) -> Option<(u128, u64)> {
    let owner = match classify(Content::Bytes(bytes), Reader::Protocol2) {
        Classified::V1(r) => r.owner(),
        Classified::V2(r) => r.owner(),
        _ => return None,
    };
    owner.start.and_then(|s| s.to_u192())
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
