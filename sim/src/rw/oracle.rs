//! The read-write lock's invariants, apart from the model: after every
//! step the oracle reads the [`Event`]s recorded since its last look, and
//! the server's files as the step left them, and keeps the first
//! violation.
//!
//! - **Fencing** (`Oracle::fencing`): the generations granted under one
//!   epoch strictly increase, in the order the grants happen. A resource
//!   that refuses anything older than the highest it has seen then refuses
//!   every holder a later grant superseded.
//! - **Exclusion** (`Oracle::exclusion`): no writer holds beside another
//!   holder, unless the earlier one was stopped, suspended or late past
//!   its lease during its acquisition (an eviction filelock makes by
//!   design, C-RW4: it holds until its next heartbeat), and then the
//!   earlier one's generation is the smaller, in the same log (one
//!   incarnation of `gen/`: fencing tokens restart with a new one).
//! - **Punctual members stay** (`Oracle::linked`): a commit that drops a
//!   member, once it counts (a later generation is linked on it, or it
//!   grants its committer; a commit its committer refuses and removes
//!   first does not), or a removal of a participant's record by another
//!   process, never hits a live participant acquiring or holding that was
//!   never stopped, suspended or late (RW6, RW7, RW8).
//! - **Writers enter** (`Oracle::writer_entered`): a punctual writer that
//!   gives up, with no stale answer from its host, found some writer named
//!   during its wait (itself, entered before the drain, or a holder): a
//!   writer that never enters starves behind overlapping readers (RW5).
//! - **No error** : an acquire or a leave fails only where the scenario
//!   injects what makes it fail (none does).
//! - **Never a wedge, nothing lost** (`Oracle::progress_bound`, judged by
//!   [`Sim::check_progress`](super::Sim::check_progress)): once faults
//!   stop, a fresh writer alone is granted within the longest lease it
//!   must honour plus a few polls, holds long enough to sweep, leaves, and
//!   the directory then holds no record and no temporary, and no more
//!   generations than a window and one.

use super::cast::{Scenario, Timing};
use super::fs::{dir, Key};
use super::world::{Event, What, World};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;
use swaplock_core::names::Token;
use swaplock_core::rw::files::Area;
use swaplock_core::rw::names::{generation_name, parse_generation_name};
use swaplock_core::rw::record::{holder_lease, parse_generation};
use swaplock_core::rw::Mode;

/// What the driver says when every generation a find names is gone and
/// nothing past them reads ([`Error::NoSnapshot`](swaplock_core::rw::driver::Error)).
const NO_SNAPSHOT: &str = "generation log names no readable snapshot";

/// Where a process stands in its acquisition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not taking part.
    Idle,
    /// Published, polling.
    Acquiring,
    /// Granted.
    Holding,
    /// Leaving (or its hold lost, about to leave).
    Leaving,
}

/// What the oracle knows of one process.
#[derive(Clone, Debug)]
struct Life {
    alive: bool,
    token: Option<[u8; 16]>,
    mode: Mode,
    phase: Phase,
    /// The grant: generation, the log's incarnation, and the order its
    /// commit landed in.
    grant: Option<(u128, u64, u64)>,
    /// Stopped, suspended or late during this acquisition.
    excused: bool,
    /// A writer was named by a generation linked during this acquisition.
    writer_seen: bool,
    /// Its host answered it from a cache during this acquisition.
    stale: bool,
    /// An operator removed the log during this acquisition.
    removed: bool,
}

impl Life {
    fn new() -> Self {
        Life {
            alive: true,
            token: None,
            mode: Mode::Read,
            phase: Phase::Idle,
            grant: None,
            excused: false,
            writer_seen: false,
            stale: false,
            removed: false,
        }
    }
}

/// The invariants' judge, and what it has learnt so far.
pub(crate) struct Oracle {
    lives: Vec<Life>,
    /// Every grant: the order its commit landed in, its generation, the
    /// incarnation of `gen/` it landed in.
    granted: Vec<(u64, u128, u64)>,
    /// The order each process's landed links of generations came in, and
    /// the incarnation of `gen/` they landed in.
    landed: BTreeMap<(usize, u128), (u64, u64)>,
    links: u64,
    /// The progress check's fresh writer.
    fresh: Option<usize>,
    /// Generations linked that drop a punctual participant, until they
    /// count: once a later generation is linked on them, or their
    /// committer is granted by them (and forgotten if their committer
    /// removes them first, refusing its own commit).
    pending: BTreeMap<u128, String>,
    /// Acquisitions that failed because their host's view of gen/ was older
    /// than a window of commits.
    pub(crate) blind_errors: u64,
    /// How late (accumulated waits past its wake, since its record was
    /// last written) a process may run before it counts as paused.
    late_limit: u64,
    timing: Timing,
    pub(crate) violation: Option<String>,
    /// Grants so far.
    pub(crate) grants: u64,
    grants_by: BTreeMap<usize, u64>,
    /// Grants made while an excused earlier holder still held (fenced).
    pub(crate) fenced_overlaps: u64,
}

fn gen_key(n: u128) -> Key {
    (
        dir(Area::Generations),
        generation_name(n).unwrap_or_default().to_vec(),
    )
}

/// A snapshot's writer and readers, as raw tokens.
type Membership = (Option<[u8; 16]>, Vec<[u8; 16]>);

/// The members of the server's generation `n`, if it reads.
fn members(w: &World, n: u128) -> Option<Membership> {
    let bytes = w.fs.content(&gen_key(n))?;
    let s = parse_generation(bytes, n).ok()?;
    Some((s.writer.map(|t| t.0), s.readers().map(|t| t.0).collect()))
}

impl Oracle {
    pub(crate) fn new(scenario: &Scenario) -> Self {
        Oracle {
            lives: Vec::new(),
            granted: Vec::new(),
            landed: BTreeMap::new(),
            links: 0,
            fresh: None,
            pending: BTreeMap::new(),
            blind_errors: 0,
            late_limit: (scenario.timing.threshold.as_nanos() / 4) as u64,
            timing: scenario.timing,
            violation: None,
            grants: 0,
            grants_by: BTreeMap::new(),
            fenced_overlaps: 0,
        }
    }

    pub(crate) fn fail(&mut self, what: String) {
        if self.violation.is_none() {
            self.violation = Some(what);
        }
    }

    /// Reads the world's lateness, then the events since the last look.
    pub(crate) fn check(&mut self, w: &mut World) {
        while self.lives.len() < w.procs.len() {
            self.lives.push(Life::new());
        }
        // A process runnable but not run past the limit (since its record
        // was last written) counts as paused from now: a starved process is
        // a stopped one.
        for (i, p) in w.procs.iter().enumerate() {
            let waiting = match p.alive && p.wake <= w.time {
                true => w.time.saturating_sub(p.wake.max(p.ready_since)),
                false => 0,
            };
            let life = &mut self.lives[i];
            if p.late + waiting > self.late_limit && life.token.is_some() && !life.excused {
                life.excused = true;
                if w.tracing() {
                    let _ = writeln!(w.trace, "    (p{i} OVERSLEPT: it counts as paused)");
                }
            }
        }
        let events = std::mem::take(&mut w.events);
        for e in events {
            self.event(w, e);
        }
    }

    fn event(&mut self, w: &mut World, e: Event) {
        let who = e.who;
        match e.what {
            What::Published { token, mode } => {
                let alive = self.lives[who].alive;
                // A writer named already when it starts counts as seen.
                let newest =
                    w.fs.list(dir(Area::Generations))
                        .iter()
                        .filter_map(|n| parse_generation_name(n))
                        .max();
                let writer_seen = newest
                    .and_then(|n| members(w, n))
                    .is_some_and(|(writer, _)| writer.is_some());
                self.lives[who] = Life {
                    alive,
                    token: Some(token),
                    mode,
                    phase: Phase::Acquiring,
                    writer_seen,
                    ..Life::new()
                };
                w.procs[who].late = 0;
            }
            What::PollStart => {}
            What::Granted { generation } => {
                let now = w.fs.made[dir(Area::Generations)];
                self.grants += 1;
                *self.grants_by.entry(who).or_default() += 1;
                // A grant happens when its commit lands, in the log it
                // lands in, not when its process, perhaps stopped since,
                // reports it.
                let (seq, epoch) = self
                    .landed
                    .get(&(who, generation))
                    .copied()
                    .unwrap_or((self.links, now));
                if let Some(v) = self.pending.remove(&generation) {
                    self.fail(v);
                }
                self.fencing(who, generation, &epoch, seq);
                self.exclusion(who, generation, &epoch, seq);
                let life = &mut self.lives[who];
                life.phase = Phase::Holding;
                life.grant = Some((generation, epoch, seq));
            }
            What::Compromised => self.lives[who].phase = Phase::Leaving,
            What::Leaving { gave_up } => {
                if gave_up {
                    self.writer_entered(who);
                }
                self.lives[who].phase = Phase::Leaving;
            }
            What::Left => {
                let life = &mut self.lives[who];
                life.phase = Phase::Idle;
                life.token = None;
                life.grant = None;
            }
            // A host whose view of gen/ is older than a whole window of
            // commits finds none of the generations it names, twice: the
            // driver reports it, as filelock does (PROTOCOL 16.4), and the
            // caller tries again once the cache expires. A liveness cost of
            // stale caches, not a violation.
            What::Failed(why) if why == NO_SNAPSHOT && self.lives[who].stale => {
                self.blind_errors += 1;
            }
            What::Failed(why) => self.fail(format!("p{who}: the driver failed: {why}")),
            What::WroteRecord(t) => {
                if self.lives[who].token == Some(t) {
                    w.procs[who].late = 0;
                }
            }
            What::Linked(name, epoch) => {
                if let Some(n) = parse_generation_name(&name) {
                    self.links += 1;
                    self.landed.insert((who, n), (self.links, epoch));
                    // Built on n − 1: an eviction it made counts.
                    if let Some(v) = n.checked_sub(1).and_then(|p| self.pending.remove(&p)) {
                        self.fail(v);
                    }
                    self.linked(w, who, n);
                }
            }
            What::RemovedGeneration(name) => {
                if let Some(n) = parse_generation_name(&name) {
                    self.pending.remove(&n);
                }
            }
            What::RemovedRecord(name) => {
                if let Some(t) = Token::parse_hex(&name) {
                    self.record_removed(who, t.0);
                }
            }
            What::StaleAnswer => self.lives[who].stale = true,
            What::Killed => {
                let life = &mut self.lives[who];
                life.alive = false;
                life.phase = Phase::Idle;
            }
            What::Stopped { .. } => self.lives[who].excused = true,
            What::RemovedLog => {
                // A removal ends every hold and wait by design (PROTOCOL
                // 16.9): those evicted so learn it at their next look.
                for life in &mut self.lives {
                    if life.token.is_some() {
                        life.removed = true;
                        life.excused = true;
                    }
                }
            }
        }
    }

    /// Fencing: the generations granted in one log strictly increase
    /// in the order their commits landed.
    fn fencing(&mut self, who: usize, generation: u128, epoch: &u64, seq: u64) {
        let clash = self.granted.iter().find(|(s, g, e)| {
            e == epoch && ((*s < seq && *g >= generation) || (*s > seq && *g <= generation))
        });
        if let Some((_, g, _)) = clash {
            let g = *g;
            self.fail(format!(
                "fencing: p{who} was granted at generation {generation}, and another grant in the same log (one incarnation of gen/) at {g}, in the other order: the fencing token repeats or goes back"
            ));
            return;
        }
        self.granted.push((seq, generation, *epoch));
    }

    /// Exclusion: a new grant beside a holder, with a writer among them,
    /// only where the one whose commit landed first was excused and the
    /// fencing token orders it first.
    fn exclusion(&mut self, who: usize, generation: u128, epoch: &u64, seq: u64) {
        let mode = self.lives[who].mode;
        let excused = self.lives[who].excused;
        for (i, other) in self.lives.iter().enumerate() {
            if i == who || other.phase != Phase::Holding || !other.alive {
                continue;
            }
            if mode == Mode::Read && other.mode == Mode::Read {
                continue;
            }
            let Some((g, e, s)) = &other.grant else {
                continue;
            };
            let what = format!(
                "p{who} granted {} at generation {generation} while p{i} holds {} since generation {g}",
                mode.as_str(),
                other.mode.as_str()
            );
            let (first_excused, first_g, then_g, first_removed) = match *s < seq {
                true => (other.excused, *g, generation, other.removed),
                false => (excused, generation, *g, self.lives[who].removed),
            };
            if first_removed && e != epoch {
                // Held in a log an operator removed: unordered by design.
                continue;
            }
            if !first_excused {
                let v = format!("exclusion: {what}, the first never stopped, suspended or late");
                self.violation.get_or_insert(v);
                return;
            }
            if e != epoch || first_g >= then_g {
                let v = format!("exclusion: {what}, and the fencing token does not order them");
                self.violation.get_or_insert(v);
                return;
            }
            self.fenced_overlaps += 1;
        }
    }

    /// A generation `n` that process `who` linked: who it drops, and
    /// whether it names a writer.
    fn linked(&mut self, w: &World, who: usize, n: u128) {
        let Some((writer, readers)) = members(w, n) else {
            return;
        };
        if writer.is_some() {
            for life in &mut self.lives {
                if life.phase == Phase::Acquiring {
                    life.writer_seen = true;
                }
            }
        }
        let Some((before_w, before_r)) = n.checked_sub(1).and_then(|p| members(w, p)) else {
            return;
        };
        let now: Vec<[u8; 16]> = writer.into_iter().chain(readers).collect();
        for t in before_w.into_iter().chain(before_r) {
            if now.contains(&t) {
                continue;
            }
            if let Some(i) = self.punctual_owner(t) {
                if i != who {
                    self.pending.entry(n).or_insert_with(|| format!(
                        "eviction: p{who}'s generation {n} drops p{i}, a live participant that was never stopped, suspended or late (RW7)"
                    ));
                }
            }
        }
    }

    /// The process acquiring or holding as `t`, never excused, if any.
    fn punctual_owner(&self, t: [u8; 16]) -> Option<usize> {
        self.lives.iter().position(|l| {
            l.alive
                && l.token == Some(t)
                && matches!(l.phase, Phase::Acquiring | Phase::Holding)
                && !l.excused
        })
    }

    /// Process `who` removed the record `holders/<t>`.
    fn record_removed(&mut self, who: usize, t: [u8; 16]) {
        if let Some(i) = self.punctual_owner(t) {
            if i != who {
                self.fail(format!(
                    "eviction: p{who} removed the record of p{i}, a live participant that was never stopped, suspended or late (RW6, RW8)"
                ));
            }
        }
    }

    /// Process `who` is the progress check's fresh writer: a wait it gives
    /// up is a wedge, which the check reports.
    pub(crate) fn fresh(&mut self, who: usize) {
        self.fresh = Some(who);
    }

    /// A writer that gives up must have seen some writer named (RW5).
    fn writer_entered(&mut self, who: usize) {
        let life = &self.lives[who];
        if self.fresh == Some(who) {
            return;
        }
        if life.mode == Mode::Write && !life.excused && !life.stale && !life.writer_seen {
            self.fail(format!(
                "writer preference: p{who} gave up writing without ever entering the log, and no writer was named meanwhile (RW5)"
            ));
        }
    }

    /// How many polls a fresh writer alone needs at most, now: the
    /// longest wait for a record's lease to run out (each capped by the
    /// lock's longest lease), and a margin of polls.
    pub(crate) fn progress_bound(&self, w: &World) -> u32 {
        let mut wait = self.timing.threshold;
        for n in w.fs.list(dir(Area::Holders)) {
            let lease =
                w.fs.content(&(dir(Area::Holders), n.clone()))
                    .and_then(holder_lease);
            // The shipped rule (stale_after), whatever mutant is on: the
            // bound is what the lock promises.
            let lease = lease
                .and_then(|l| Duration::try_from_secs_f64(l).ok())
                .unwrap_or(Duration::MAX);
            wait = wait.max(lease.min(self.timing.max_lease));
        }
        (wait.as_nanos() / self.timing.poll.as_nanos()) as u32 + 10
    }

    /// The evictions still pending once a run is over count if their
    /// generation is still there.
    pub(crate) fn settle(&mut self, w: &World) {
        let left: Vec<(u128, String)> = std::mem::take(&mut self.pending).into_iter().collect();
        for (n, v) in left {
            if members(w, n).is_some() {
                self.fail(v);
            }
        }
    }

    /// How many times process `who` was granted.
    pub(crate) fn grants_of(&self, who: usize) -> u64 {
        self.grants_by.get(&who).copied().unwrap_or(0)
    }
}
