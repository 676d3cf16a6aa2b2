//! The read-write lock's invariants, apart from the model: after every
//! step the oracle reads the [`Event`]s recorded since its last look, and
//! the server's files as the step left them, and keeps the first
//! violation.
//!
//! - **Fencing** ([`Oracle::fencing`]): the generations granted under one
//!   epoch strictly increase, in the order the grants happen. A resource
//!   that refuses anything older than the highest it has seen then refuses
//!   every holder a later grant superseded.
//! - **Exclusion** ([`Oracle::exclusion`]): no writer holds beside another
//!   holder, unless the earlier one was stopped, suspended or late past
//!   its lease during its acquisition (an eviction filelock makes by
//!   design, C-RW4: it holds until its next heartbeat), and then the
//!   earlier one's generation is the smaller, under the same epoch.
//! - **Punctual members stay** ([`Oracle::eviction`]): a commit that drops
//!   a member, or a removal of a participant's record by another process,
//!   never hits a live participant acquiring or holding that was never
//!   stopped, suspended or late (RW6, RW7, RW8).
//! - **Writers enter** ([`Oracle::writer_entered`]): a punctual writer that
//!   gives up, with no stale answer from its host, found some writer named
//!   during its wait (itself, entered before the drain, or a holder): a
//!   writer that never enters starves behind overlapping readers (RW5).
//! - **No error** : an acquire or a leave fails only where the scenario
//!   injects what makes it fail (none does).
//! - **Never a wedge, nothing lost** ([`Oracle::progress_bound`], judged by
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
use swaplock_core::names::Token;
use swaplock_core::rw::files::Area;
use std::time::Duration;
use swaplock_core::rw::names::{generation_name, parse_generation_name};
use swaplock_core::rw::record::{holder_lease, parse_generation};
use swaplock_core::rw::Mode;

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
    /// The grant: generation, epoch, and the order its commit landed in.
    grant: Option<(u128, Option<Vec<u8>>, u64)>,
    /// Stopped, suspended or late during this acquisition.
    excused: bool,
    /// A writer was named by a generation linked during this acquisition.
    writer_seen: bool,
    /// Its host answered it from a cache during this acquisition.
    stale: bool,
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
        }
    }
}

/// The invariants' judge, and what it has learnt so far.
pub(crate) struct Oracle {
    lives: Vec<Life>,
    /// Every grant: the order its commit landed in, its generation, its
    /// epoch (the server's bytes).
    granted: Vec<(u64, u128, Option<Vec<u8>>)>,
    /// The order each process's landed links of generations came in.
    landed: BTreeMap<(usize, u128), u64>,
    links: u64,
    /// The progress check's fresh writer.
    fresh: Option<usize>,
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
    (dir(Area::Generations), generation_name(n).unwrap_or_default().to_vec())
}

/// The members of the server's generation `n`, if it reads.
fn members(w: &World, n: u128) -> Option<(Option<[u8; 16]>, Vec<[u8; 16]>)> {
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

    /// Reads the events since the last look, then the world.
    pub(crate) fn check(&mut self, w: &mut World) {
        while self.lives.len() < w.procs.len() {
            self.lives.push(Life::new());
        }
        let events = std::mem::take(&mut w.events);
        for e in events {
            self.event(w, e);
        }
        for (i, p) in w.procs.iter().enumerate() {
            if p.late > self.late_limit && self.lives[i].token.is_some() && !self.lives[i].excused {
                self.lives[i].excused = true;
                if w.tracing() {
                    let _ = writeln!(w.trace, "    (p{i} OVERSLEPT: it counts as paused)");
                }
            }
        }
    }

    fn event(&mut self, w: &mut World, e: Event) {
        let who = e.who;
        match e.what {
            What::Published { token, mode } => {
                let alive = self.lives[who].alive;
                self.lives[who] = Life {
                    alive,
                    token: Some(token),
                    mode,
                    phase: Phase::Acquiring,
                    ..Life::new()
                };
                w.procs[who].late = 0;
            }
            What::PollStart => {}
            What::Granted { generation, epoch } => {
                self.grants += 1;
                *self.grants_by.entry(who).or_default() += 1;
                // A grant happens when its commit lands, not when its
                // process, perhaps stopped since, reports it.
                let seq = self.landed.get(&(who, generation)).copied().unwrap_or(self.links);
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
            What::Failed(why) => self.fail(format!("p{who}: the driver failed: {why}")),
            What::WroteRecord(t) => {
                if self.lives[who].token == Some(t) {
                    w.procs[who].late = 0;
                }
            }
            What::Linked(name) => {
                if let Some(n) = parse_generation_name(&name) {
                    self.links += 1;
                    self.landed.insert((who, n), self.links);
                    self.linked(w, who, n);
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
        }
    }

    /// Fencing: the generations granted under one epoch strictly increase
    /// in the order their commits landed.
    fn fencing(&mut self, who: usize, generation: u128, epoch: &Option<Vec<u8>>, seq: u64) {
        let clash = self.granted.iter().find(|(s, g, e)| {
            e == epoch && ((*s < seq && *g >= generation) || (*s > seq && *g <= generation))
        });
        if let Some((_, g, _)) = clash {
            let g = *g;
            self.fail(format!(
                "fencing: p{who} was granted at generation {generation}, and another grant under the same epoch at {g}, in the other order: the fencing token repeats or goes back"
            ));
            return;
        }
        self.granted.push((seq, generation, epoch.clone()));
    }

    /// Exclusion: a new grant beside a holder, with a writer among them,
    /// only where the one whose commit landed first was excused and the
    /// fencing token orders it first.
    fn exclusion(&mut self, who: usize, generation: u128, epoch: &Option<Vec<u8>>, seq: u64) {
        let mode = self.lives[who].mode;
        let excused = self.lives[who].excused;
        for (i, other) in self.lives.iter().enumerate() {
            if i == who || other.phase != Phase::Holding || !other.alive {
                continue;
            }
            if mode == Mode::Read && other.mode == Mode::Read {
                continue;
            }
            let Some((g, e, s)) = &other.grant else { continue };
            let what = format!(
                "p{who} granted {} at generation {generation} while p{i} holds {} since generation {g}",
                mode.as_str(),
                other.mode.as_str()
            );
            let (first_excused, first_g, then_g) = match *s < seq {
                true => (other.excused, *g, generation),
                false => (excused, generation, *g),
            };
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
                    self.fail(format!(
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
            let lease = w
                .fs
                .content(&(dir(Area::Holders), n.clone()))
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

    /// How many times process `who` was granted.
    pub(crate) fn grants_of(&self, who: usize) -> u64 {
        self.grants_by.get(&who).copied().unwrap_or(0)
    }
}
