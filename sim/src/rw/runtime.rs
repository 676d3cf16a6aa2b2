//! Running a scenario of the read-write lock: each process on its own
//! coroutine (stacks shared with the soft lock's simulator), stepped one
//! file operation at a time, killed, stopped, its host suspended or
//! crashed, with the oracle's check after every step ([`Sim`]); time
//! jumps ahead when every process sleeps; and, once the run is over, the
//! progress check's fresh writer ([`Sim::check_progress`]).

use super::actors::{self, Slot};
use super::cast::{Role, Scenario, Start, Timing};
use super::fs::{dir, Fs, Key};
use super::oracle::Oracle;
use super::world::{What, World};
use crate::runtime::{return_stack, take_stack, Co, Violation};
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::RefCell;
use std::rc::Rc;
use swaplock_core::names::Token;
use swaplock_core::rw::files::Area;
use swaplock_core::rw::names::{
    generation_name, is_temporary_name, parse_generation_name, EPOCH, HEAD, RETAINED,
};
use swaplock_core::rw::record::{encode_epoch, HolderRecord, SnapshotRecord};
use swaplock_core::rw::Mode;
use swaplock_core::Pid;

/// The PID of the progress check's fresh writer.
const FRESH_PID: u32 = 4242;

/// At most this many steps for the fresh writer: far more than its
/// bounded polls take alone; a run past it is a wedge.
const FRESH_STEPS: u64 = 100_000;

/// What the progress check made of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Not judged: a violation came first, or the run did not end.
    NotJudged,
    /// A fresh writer alone was granted, in this many polls' time, and the
    /// directory was clean after it.
    Took,
}

/// What faults a run has injected so far.
#[derive(Clone, Copy, Debug, Default)]
struct Used {
    kills: u32,
    pauses: u32,
    suspends: u32,
    crashes: u32,
}

/// A fault the schedule may inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// `SIGKILL` of a process.
    Kill,
    /// `SIGSTOP` of a process for a while.
    Pause,
    /// A host suspended for a while.
    Suspend,
    /// A crash of the host whose disk holds the files.
    Crash,
}

/// A running simulation of the read-write lock.
pub struct Sim {
    world: Rc<RefCell<World>>,
    oracle: Oracle,
    coroutines: Vec<Option<Co>>,
    slots: Vec<Rc<RefCell<Slot>>>,
    scenario: Scenario,
    used: Used,
    progress: Progress,
}

/// The coroutine of process `me`.
fn coroutine(
    world: &Rc<RefCell<World>>,
    me: usize,
    role: Role,
    start: std::time::Duration,
    timing: Timing,
    slot: &Rc<RefCell<Slot>>,
) -> Co {
    let (world, slot) = (Rc::clone(world), Rc::clone(slot));
    Coroutine::with_stack(take_stack(), move |yielder: &Yielder<(), ()>, ()| {
        actors::live(&world, me, role, start, timing, &slot, yielder);
    })
}

impl Sim {
    /// Sets up `scenario`; `seed` feeds the random tokens; `tracing` keeps
    /// a readable trace of every step.
    pub fn new(scenario: &Scenario, seed: u64, tracing: bool) -> Self {
        let cache_for = scenario.cache_for.as_nanos() as u64;
        let fs = Fs::new(scenario.hosts.len(), cache_for);
        let mut world = World::new(fs, scenario.hosts.clone(), seed, tracing);
        world.disk_host = scenario.disk_host;
        world.retransmits = scenario.retransmits;
        world.fs.wcc = scenario.wcc;
        setup(&mut world, scenario.start);
        for p in &scenario.processes {
            world.spawn(p.pid, p.host);
        }
        let world = Rc::new(RefCell::new(world));
        let slots: Vec<_> = scenario
            .processes
            .iter()
            .map(|_| Rc::new(RefCell::new(Slot::default())))
            .collect();
        let coroutines = scenario
            .processes
            .iter()
            .enumerate()
            .map(|(i, p)| {
                Some(coroutine(
                    &world,
                    i,
                    p.role,
                    p.start,
                    p.timing.unwrap_or(scenario.timing),
                    &slots[i],
                ))
            })
            .collect();
        let mut oracle = Oracle::new(scenario);
        oracle.check(&mut world.borrow_mut());
        // Each process runs up to its first file operation (or the sleep
        // until its start), which is where a schedule first meets it.
        let mut coroutines: Vec<Option<Co>> = coroutines;
        for slot in coroutines.iter_mut() {
            let finished = slot
                .as_mut()
                .is_some_and(|co| matches!(co.resume(()), CoroutineResult::Return(())));
            if finished {
                if let Some(co) = slot.take() {
                    return_stack(co);
                }
            }
        }
        Sim {
            world,
            oracle,
            coroutines,
            slots,
            scenario: scenario.clone(),
            used: Used::default(),
            progress: Progress::NotJudged,
        }
    }

    /// The processes that can take a step now, into `out`. When none can
    /// but some sleep or are stopped, time jumps to the first that wakes.
    pub fn runnable_into(&mut self, out: &mut Vec<usize>) {
        out.clear();
        let mut w = self.world.borrow_mut();
        let live: Vec<usize> = (0..self.coroutines.len())
            .filter(|&i| self.coroutines[i].is_some())
            .collect();
        if let Some(wake) = live.iter().map(|&i| w.procs[i].wake).min() {
            if wake > w.time {
                w.time = wake;
                w.fs.now = wake;
            }
        }
        out.extend(live.into_iter().filter(|&i| w.procs[i].wake <= w.time));
    }

    /// The processes that can take a step now.
    pub fn runnable(&mut self) -> Vec<usize> {
        let mut out = Vec::new();
        self.runnable_into(&mut out);
        out
    }

    /// How many answers process `i`'s next step may give (see
    /// [`Sim::step`]).
    pub fn alternatives(&self, i: usize) -> u8 {
        self.world.borrow().alternatives(i)
    }

    /// The hosts.
    pub fn hosts(&self) -> usize {
        self.scenario.hosts.len()
    }

    /// Runs process `i`'s next file operation, giving answer `variant`
    /// (where [`Sim::alternatives`] says there are two: 0, the host's cache
    /// while its view holds, or the link's own answer; 1, the server's
    /// after an early revalidation, or `EEXIST` for a link that landed),
    /// then
    /// up to its next operation; then the invariants.
    pub fn step(&mut self, i: usize, variant: u8) {
        let Some(co) = self.coroutines[i].as_mut() else {
            return;
        };
        {
            let mut w = self.world.borrow_mut();
            let p = &w.procs[i];
            let ready = p.wake.max(p.ready_since);
            let late = w.time.saturating_sub(ready);
            w.procs[i].late += late;
            w.variant = variant;
        }
        let done = matches!(co.resume(()), CoroutineResult::Return(()));
        let mut w = self.world.borrow_mut();
        let now = w.time;
        w.procs[i].ready_since = now;
        w.variant = 0;
        self.oracle.check(&mut w);
        drop(w);
        if done {
            if let Some(co) = self.coroutines[i].take() {
                return_stack(co);
            }
        }
    }

    /// Whether the scenario allows one more `fault`.
    pub fn can(&self, fault: Fault) -> bool {
        let f = &self.scenario.faults;
        match fault {
            Fault::Kill => self.used.kills < f.kills,
            Fault::Pause => self.used.pauses < f.pauses,
            Fault::Suspend => self.used.suspends < f.suspends,
            Fault::Crash => self.used.crashes < f.crashes && self.scenario.disk_host.is_some(),
        }
    }

    fn end(&mut self, i: usize) {
        if let Some(co) = self.coroutines[i].take() {
            return_stack(co);
        }
        let mut w = self.world.borrow_mut();
        w.exit(i);
        w.record(i, What::Killed);
        w.note(i, format_args!("is KILLED"));
    }

    /// Kills process `i` (`SIGKILL`): it runs no further.
    pub fn kill(&mut self, i: usize) {
        self.used.kills += 1;
        self.end(i);
        self.oracle.check(&mut self.world.borrow_mut());
    }

    /// Stops process `i` (`SIGSTOP`) for the scenario's pause.
    pub fn pause(&mut self, i: usize) {
        self.used.pauses += 1;
        let mut w = self.world.borrow_mut();
        let until = w.time + self.scenario.timing.pause().as_nanos() as u64;
        w.procs[i].wake = w.procs[i].wake.max(until);
        w.record(i, What::Stopped { until });
        w.note(
            i,
            format_args!("is STOPPED for {:?}", self.scenario.timing.pause()),
        );
        self.oracle.check(&mut w);
    }

    /// Suspends host `h` for the scenario's pause: its processes stop, and
    /// its monotonic clock with them.
    pub fn suspend(&mut self, h: usize) {
        self.used.suspends += 1;
        let d = self.scenario.timing.pause().as_nanos() as u64;
        let mut w = self.world.borrow_mut();
        let until = w.time + d;
        w.mono[h] -= i128::from(d);
        for i in 0..w.procs.len() {
            if w.procs[i].host == h && self.coroutines[i].is_some() {
                w.procs[i].wake = w.procs[i].wake.max(until);
                w.record(i, What::Stopped { until });
            }
        }
        let name = w.hosts[h];
        w.say(format_args!("host {name} is SUSPENDED for {d} ns"));
        self.oracle.check(&mut w);
    }

    /// Crashes the host whose disk holds the files: its processes die, the
    /// newest `lose` name operations not yet synced are lost, and data not
    /// synced reads back empty.
    pub fn crash(&mut self, lose: usize) {
        let Some(h) = self.scenario.disk_host else {
            return;
        };
        self.used.crashes += 1;
        let on: Vec<usize> = (0..self.coroutines.len())
            .filter(|&i| self.coroutines[i].is_some() && self.world.borrow().procs[i].host == h)
            .collect();
        for i in on {
            self.end(i);
        }
        let mut w = self.world.borrow_mut();
        let unsynced = w.fs.unsynced();
        w.fs.crash(lose);
        w.fs.forget(h);
        let name = w.hosts[h];
        let lost = lose.min(unsynced);
        w.say(format_args!(
            "host {name} CRASHES, losing {lost} of {unsynced} unsynced name operations"
        ));
        self.oracle.check(&mut w);
    }

    /// How many name operations a crash could lose now.
    pub fn unsynced(&self) -> usize {
        self.world.borrow().fs.unsynced()
    }

    /// The progress check, once the run is over (no process can step):
    /// faults stop (no cache answers any more), and a fresh writer runs
    /// alone: on the lock of [`Scenario::progress_on`] if that process
    /// lived to its end, else on a new lock, on the host of the disk (or
    /// the first). It must be granted within [`Oracle::progress_bound`]
    /// polls, hold long enough for its sweeps to collect what the run left
    /// (twice the threshold), and leave; then no record, no temporary and
    /// no more than a window and one of generations may be left.
    pub fn check_progress(&mut self) {
        self.oracle.settle(&self.world.borrow());
        if self.coroutines.iter().any(Option::is_some) || self.oracle.violation.is_some() {
            return;
        }
        let timing = self.scenario.timing;
        let (fresh, slot, bound) = {
            let mut w = self.world.borrow_mut();
            w.calm = true;
            for h in 0..w.hosts.len() {
                w.fs.forget(h);
            }
            let bound = self.oracle.progress_bound(&w);
            let adopted = self
                .scenario
                .progress_on
                .filter(|&i| w.procs[i].alive && self.slots[i].borrow().instance.is_some());
            let (pid, host, slot) = match adopted {
                Some(i) => (w.procs[i].pid, w.procs[i].host, Rc::clone(&self.slots[i])),
                None => (
                    FRESH_PID,
                    self.scenario.disk_host.unwrap_or(0),
                    Rc::new(RefCell::new(Slot::default())),
                ),
            };
            let fresh = w.spawn(pid, host);
            w.note(
                fresh,
                format_args!("PROGRESS: a fresh writer, alone, with {bound} polls"),
            );
            (fresh, slot, bound)
        };
        let role = Role::Participant {
            mode: Mode::Write,
            rounds: 1,
            patience: bound,
            hold: timing.threshold * 2 + timing.heartbeat,
        };
        let co = coroutine(
            &self.world,
            fresh,
            role,
            std::time::Duration::ZERO,
            timing,
            &slot,
        );
        self.coroutines.push(Some(co));
        self.oracle.fresh(fresh);
        let mut steps = 0;
        let mut runnable = Vec::new();
        while steps < FRESH_STEPS && self.oracle.violation.is_none() {
            self.runnable_into(&mut runnable);
            let Some(&i) = runnable.first() else { break };
            self.step(i, 0);
            steps += 1;
        }
        if self.oracle.violation.is_some() {
            return;
        }
        if self.coroutines[fresh].is_some() {
            self.oracle.fail(format!(
                "wedge: the fresh writer was still running after {FRESH_STEPS} steps"
            ));
            return;
        }
        if self.oracle.grants_of(fresh) == 0 {
            self.oracle.fail(format!(
                "wedge: a fresh writer alone was not granted in {bound} polls"
            ));
            return;
        }
        let w = self.world.borrow();
        let gens = w.fs.list(dir(Area::Generations));
        let temporaries: Vec<String> = gens
            .iter()
            .filter(|n| is_temporary_name(n))
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .collect();
        let records = w.fs.list(dir(Area::Holders));
        let generations = gens
            .iter()
            .filter(|n| parse_generation_name(n).is_some())
            .count();
        let lost = match (
            temporaries.is_empty(),
            records.is_empty(),
            generations <= RETAINED as usize + 1,
        ) {
            (false, _, _) => Some(format!("temporaries {temporaries:?}")),
            (_, false, _) => Some(format!("{} holder records", records.len())),
            (_, _, false) => Some(format!("{generations} generations")),
            _ => None,
        };
        drop(w);
        match lost {
            Some(what) => self.oracle.fail(format!(
                "nothing lost: after the fresh writer's sweeps and leave, {what} are left"
            )),
            None => self.progress = Progress::Took,
        }
    }

    /// What the progress check made of the run.
    pub fn progress(&self) -> Progress {
        self.progress
    }

    /// Whether a violation was found.
    pub fn failed(&self) -> bool {
        self.oracle.violation.is_some()
    }

    /// The first violation, with the trace so far.
    pub fn violation(&self) -> Option<Violation> {
        let w = self.world.borrow();
        self.oracle.violation.as_ref().map(|what| Violation {
            what: what.clone(),
            trace: w.trace.clone(),
        })
    }

    /// The trace so far (empty unless the simulation traces).
    pub fn trace(&self) -> String {
        self.world.borrow().trace.clone()
    }

    /// Whether process `i` has finished or died.
    pub fn done(&self, i: usize) -> bool {
        self.coroutines.get(i).is_none_or(Option::is_none)
    }

    /// Steps run, grants, and grants beside an evicted (stopped) holder
    /// that only the fencing token ordered.
    pub fn figures(&self) -> (u64, u64, u64) {
        let w = self.world.borrow();
        (w.steps, self.oracle.grants, self.oracle.fenced_overlaps)
    }

    /// The stale answers the hosts' caches gave.
    pub fn stale_answers(&self) -> u64 {
        self.world.borrow().fs.stale_answers.iter().sum()
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        for co in self.coroutines.iter_mut().filter_map(Option::take) {
            return_stack(co);
        }
    }
}

/// The token of the `i`th member a [`Start`] plants.
fn planted(i: u8) -> Token {
    Token([0xa0 | i; 16])
}

/// Builds the state `start` names.
fn setup(w: &mut World, start: Start) {
    let gen = |n: u128| -> Key {
        (
            dir(Area::Generations),
            generation_name(n).unwrap_or_default().to_vec(),
        )
    };
    let put = |w: &mut World, k: Key, data: &[u8]| {
        let now = w.time;
        if let Ok(ino) = w.fs.create(&k, now) {
            w.fs.write(ino, data, now);
            w.fs.fsync(ino);
        }
    };
    let snapshot = |n: u128, writer: Option<Token>| -> Vec<u8> {
        let r = SnapshotRecord {
            generation: n,
            writer,
            readers: &[],
        };
        let mut buf = vec![0u8; r.encoded_len()];
        let _ = r.encode(&mut buf);
        buf
    };
    if matches!(start, Start::Empty) {
        return;
    }
    // The directories and the epoch a moment before the rest.
    w.fs.now = w.time - 2_000_000;
    for d in 0..3 {
        let _ = w.fs.mkdir(d);
    }
    let epoch = match start {
        Start::TornLiveLog { .. } => Vec::new(),
        _ => encode_epoch(&planted(0xe)).to_vec(),
    };
    put(w, (dir(Area::Generations), EPOCH.to_vec()), &epoch);
    w.fs.now = w.time;
    match start {
        Start::Empty => {}
        Start::TornLiveLog { at, blind } => {
            // HEAD before the view, the generations after it.
            w.fs.now = w.time - 1_500_000;
            let head = [&epoch[..], &snapshot(at, None)].concat();
            put(w, (dir(Area::Generations), HEAD.to_vec()), &head);
            if let Some(h) = blind {
                w.fs.set_view(h, dir(Area::Generations), w.time - 1_000_000);
            }
            w.fs.now = w.time;
            for n in at.saturating_sub(u128::from(RETAINED) - 1).max(1)..=at {
                put(w, gen(n), &snapshot(n, None));
            }
        }
        Start::LiveLog { at, blind } => {
            for n in at.saturating_sub(u128::from(RETAINED) - 1).max(1)..=at {
                put(w, gen(n), &snapshot(n, None));
            }
            let head = [&epoch[..], &snapshot(at, None)].concat();
            put(w, (dir(Area::Generations), HEAD.to_vec()), &head);
            if let Some(h) = blind {
                // The host looked after the epoch was made, before the
                // first commit.
                let since = w.time - 1_000_000;
                w.fs.set_view(h, dir(Area::Generations), since);
            }
        }
        Start::DeadWriter { lease } => {
            let dead = planted(1);
            put(w, gen(1), &snapshot(1, Some(dead)));
            let head = [&epoch[..], &snapshot(1, Some(dead))].concat();
            put(w, (dir(Area::Generations), HEAD.to_vec()), &head);
            let record = HolderRecord {
                token: dead,
                pid: Pid::new(77).expect("a PID"),
                host: w.hosts[0],
                lease,
                nonce: planted(2),
            };
            let mut buf = vec![0u8; record.encoded_len()];
            let _ = record.encode(&mut buf);
            put(w, (dir(Area::Holders), dead.hex().to_vec()), &buf);
        }
    }
    w.fs.barrier();
}
