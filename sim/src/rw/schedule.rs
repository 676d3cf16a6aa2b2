//! Who runs next, and what the world does meanwhile: the [`Chooser`]s (a
//! seeded [`Random`] one, the exhaustive [`Explorer`], a fuzzer's or a
//! kept schedule's [`FromBytes`], and [`Recording`], which writes any
//! chooser's decisions down as bytes) and the loops that run a scenario
//! under them ([`run`], [`run_seed`], [`explore`]). Every loop ends a run
//! that is over with the progress check.
//!
//! A schedule's bytes, one decision each, with `n` processes runnable:
//!
//! | byte | decision |
//! |---|---|
//! | `0x00..=0xef` | process `runnable[(b & 0x1f) % n]` runs its next operation, with answer `(b >> 5) % alternatives` (0: the server's) |
//! | `0xf0..=0xf3` | `SIGKILL` of `runnable[(b - 0xf0) % n]` |
//! | `0xf4..=0xf7` | `SIGSTOP` of `runnable[(b - 0xf4) % n]` for the scenario's pause |
//! | `0xf8..=0xfb` | host `(b - 0xf8) % hosts` suspended for the scenario's pause |
//! | `0xfc..=0xff` | the disk's host crashes, losing the newest `(b - 0xfc)` unsynced name operations (`0xff`: all) |
//!
//! A fault the scenario does not allow (or whose budget is spent) is a
//! step of `runnable[(b & 0x1f) % n]` instead. Once the bytes run out, the
//! first runnable process runs, answered by the server.

use super::cast::Scenario;
use super::runtime::{Fault, Progress, Sim};
use crate::runtime::Violation;
use crate::world::SplitMix64;

/// What the scheduler does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Process `i` runs its next operation, with answer `v`.
    Step(usize, u8),
    /// Process `i` is killed.
    Kill(usize),
    /// Process `i` is stopped for a while.
    Pause(usize),
    /// Host `h` is suspended for a while.
    Suspend(usize),
    /// The disk's host crashes, losing the newest `n` unsynced name
    /// operations.
    Crash(usize),
}

/// Chooses what happens next.
pub trait Chooser {
    /// The next action among the `runnable` processes (never empty).
    fn choose(&mut self, sim: &Sim, runnable: &[usize]) -> Action;
}

/// Applies `action` to `sim`.
pub fn apply(sim: &mut Sim, action: Action) {
    match action {
        Action::Step(i, v) => sim.step(i, v),
        Action::Kill(i) => sim.kill(i),
        Action::Pause(i) => sim.pause(i),
        Action::Suspend(h) => sim.suspend(h),
        Action::Crash(n) => sim.crash(n),
    }
}

/// A seeded random chooser: each decision injects a fault the scenario
/// allows with probability one in `fault_one_in`, and answers from a
/// cache, where one may, one time in two.
pub struct Random {
    state: SplitMix64,
    fault_one_in: u64,
}

impl Random {
    /// A chooser from `seed`.
    pub fn new(seed: u64, fault_one_in: u64) -> Self {
        Random {
            state: SplitMix64::new(seed ^ 0x5eed_0072_7700),
            fault_one_in: fault_one_in.max(1),
        }
    }

    fn below(&mut self, n: u64) -> u64 {
        self.state.next() % n.max(1)
    }
}

impl Chooser for Random {
    fn choose(&mut self, sim: &Sim, runnable: &[usize]) -> Action {
        let i = runnable[self.below(runnable.len() as u64) as usize];
        if self.below(self.fault_one_in) == 0 {
            let fault =
                [Fault::Kill, Fault::Pause, Fault::Suspend, Fault::Crash][self.below(4) as usize];
            if sim.can(fault) {
                return match fault {
                    Fault::Kill => Action::Kill(i),
                    Fault::Pause => Action::Pause(i),
                    Fault::Suspend => Action::Suspend(self.below(sim.hosts() as u64) as usize),
                    // As many as a kept schedule can say: 0, 1, 2, or all.
                    Fault::Crash => Action::Crash([0, 1, 2, usize::MAX][self.below(4) as usize]),
                };
            }
        }
        let v = match sim.alternatives(i) {
            1 => 0,
            n => self.below(u64::from(n)) as u8,
        };
        Action::Step(i, v)
    }
}

/// Decisions read from bytes (see the module's table).
pub struct FromBytes<'a> {
    bytes: &'a [u8],
}

impl<'a> FromBytes<'a> {
    /// Decisions from `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        FromBytes { bytes }
    }
}

impl Chooser for FromBytes<'_> {
    fn choose(&mut self, sim: &Sim, runnable: &[usize]) -> Action {
        let Some((&b, rest)) = self.bytes.split_first() else {
            return Action::Step(runnable[0], 0);
        };
        self.bytes = rest;
        let n = runnable.len();
        let pick = |k: u8| runnable[usize::from(k) % n];
        let fault = match b {
            0xf0..=0xf3 if sim.can(Fault::Kill) => Some(Action::Kill(pick(b - 0xf0))),
            0xf4..=0xf7 if sim.can(Fault::Pause) => Some(Action::Pause(pick(b - 0xf4))),
            0xf8..=0xfb if sim.can(Fault::Suspend) => {
                Some(Action::Suspend(usize::from(b - 0xf8) % sim.hosts()))
            }
            0xff if sim.can(Fault::Crash) => Some(Action::Crash(usize::MAX)),
            0xfc..=0xfe if sim.can(Fault::Crash) => Some(Action::Crash(usize::from(b - 0xfc))),
            _ => None,
        };
        if let Some(action) = fault {
            return action;
        }
        let i = pick(b & 0x1f);
        let v = match b < 0xf0 {
            true => (b >> 5) % sim.alternatives(i),
            false => 0,
        };
        Action::Step(i, v)
    }
}

/// A chooser that runs another and writes its decisions down as the bytes
/// [`FromBytes`] reads back; `None` once one cannot be written (a process
/// past the 32nd runnable, a kill or stop of one past the 4th).
pub struct Recording<C> {
    inner: C,
    /// The decisions so far.
    pub bytes: Option<Vec<u8>>,
}

impl<C: Chooser> Recording<C> {
    /// Records the decisions of `inner`.
    pub fn new(inner: C) -> Self {
        Recording {
            inner,
            bytes: Some(Vec::new()),
        }
    }
}

impl<C: Chooser> Chooser for Recording<C> {
    fn choose(&mut self, sim: &Sim, runnable: &[usize]) -> Action {
        let action = self.inner.choose(sim, runnable);
        let at = |i: usize| {
            runnable
                .iter()
                .position(|&r| r == i)
                .and_then(|p| u8::try_from(p).ok())
        };
        let byte = match action {
            Action::Step(i, v) => at(i).filter(|&p| p < 32 && v < 7).map(|p| p | (v << 5)),
            Action::Kill(i) => at(i).filter(|&p| p < 4).map(|p| 0xf0 + p),
            Action::Pause(i) => at(i).filter(|&p| p < 4).map(|p| 0xf4 + p),
            Action::Suspend(h) => u8::try_from(h).ok().filter(|&h| h < 4).map(|h| 0xf8 + h),
            Action::Crash(n) if n >= sim.unsynced() => Some(0xff),
            Action::Crash(n) => u8::try_from(n).ok().filter(|&n| n < 3).map(|n| 0xfc + n),
        };
        match (byte, self.bytes.as_mut()) {
            (Some(b), Some(bytes)) => bytes.push(b),
            _ => self.bytes = None,
        }
        action
    }
}

/// The most steps a run takes.
pub const MAX_STEPS: u64 = 30_000;

/// Runs `scenario` to the end under `chooser`, stopping at the first
/// violation; `max_steps` bounds a run. A run that ends with no violation
/// then has its progress checked.
pub fn run(
    scenario: &Scenario,
    seed: u64,
    chooser: &mut dyn Chooser,
    tracing: bool,
    max_steps: u64,
) -> Sim {
    let mut sim = Sim::new(scenario, seed, tracing);
    let mut steps = 0;
    let mut runnable = Vec::new();
    loop {
        sim.runnable_into(&mut runnable);
        if runnable.is_empty() || steps >= max_steps || sim.failed() {
            break;
        }
        let action = chooser.choose(&sim, &runnable);
        apply(&mut sim, action);
        steps += 1;
    }
    sim.check_progress();
    sim
}

/// What a run that found no violation did.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    /// Steps run.
    pub steps: u64,
    /// Grants.
    pub grants: u64,
    /// Grants beside a stopped holder, ordered by the fencing token.
    pub fenced: u64,
    /// Stale answers the caches gave.
    pub stale: u64,
    /// What the progress check made of it.
    pub progress: Progress,
}

/// Runs `scenario` under the random schedule of `seed`; on a violation,
/// runs it again with a trace and returns it.
pub fn run_seed(scenario: &Scenario, seed: u64, fault_one_in: u64) -> Result<Outcome, Violation> {
    let sim = run(
        scenario,
        seed,
        &mut Random::new(seed, fault_one_in),
        false,
        MAX_STEPS,
    );
    if !sim.failed() {
        let (steps, grants, fenced) = sim.figures();
        return Ok(Outcome {
            steps,
            grants,
            fenced,
            stale: sim.stale_answers(),
            progress: sim.progress(),
        });
    }
    let traced = run(
        scenario,
        seed,
        &mut Random::new(seed, fault_one_in),
        true,
        MAX_STEPS,
    );
    let mut v = traced
        .violation()
        .expect("the same seed replays the same violation");
    v.what = format!("{} seed {seed}: {}", scenario.name, v.what);
    Err(v)
}

/// Exhaustive exploration by re-execution: it replays a prefix of
/// decisions, then keeps running the current process with the server's
/// answers; running another while the current one can run costs a
/// preemption, a cache's answer costs one too, and a fault costs one of
/// the fault budget.
pub struct Explorer {
    prefix: Vec<usize>,
    pos: usize,
    current: Option<usize>,
    preemptions: u32,
    faults: u32,
    /// Each decision made: (chosen option, number of options).
    pub log: Vec<(usize, usize)>,
}

impl Explorer {
    /// A chooser replaying `prefix` with these budgets.
    pub fn new(prefix: Vec<usize>, preemptions: u32, faults: u32) -> Self {
        Explorer {
            prefix,
            pos: 0,
            current: None,
            preemptions,
            faults,
            log: Vec::new(),
        }
    }

    /// The next prefix to explore after this run, or `None` when every
    /// schedule within the budgets has been run.
    pub fn next_prefix(&self) -> Option<Vec<usize>> {
        let k = self.log.iter().rposition(|&(c, n)| c + 1 < n)?;
        let mut next: Vec<usize> = self.log[..k].iter().map(|&(c, _)| c).collect();
        next.push(self.log[k].0 + 1);
        Some(next)
    }
}

impl Chooser for Explorer {
    fn choose(&mut self, sim: &Sim, runnable: &[usize]) -> Action {
        let mut options: Vec<(Action, bool)> = Vec::new();
        let current = self.current.filter(|c| runnable.contains(c));
        if let Some(c) = current {
            options.push((Action::Step(c, 0), false));
        }
        for &i in runnable {
            let switch = current.is_some() && Some(i) != current;
            if switch && self.preemptions == 0 {
                continue;
            }
            if current.is_none() || switch {
                options.push((Action::Step(i, 0), switch));
            }
            if self.preemptions > 0 {
                for v in 1..sim.alternatives(i) {
                    options.push((Action::Step(i, v), true));
                }
            }
        }
        if self.faults > 0 {
            for &i in runnable {
                for (f, a) in [
                    (Fault::Kill, Action::Kill(i)),
                    (Fault::Pause, Action::Pause(i)),
                ] {
                    if sim.can(f) {
                        options.push((a, false));
                    }
                }
            }
            if sim.can(Fault::Suspend) {
                options.extend((0..sim.hosts()).map(|h| (Action::Suspend(h), false)));
            }
            if sim.can(Fault::Crash) {
                options.push((Action::Crash(usize::MAX), false));
                if sim.unsynced() > 1 {
                    options.push((Action::Crash(1), false));
                }
            }
        }
        let choice = match self.pos < self.prefix.len() {
            true => self.prefix[self.pos].min(options.len() - 1),
            false => 0,
        };
        self.pos += 1;
        self.log.push((choice, options.len()));
        let (action, costs) = options[choice];
        if costs {
            self.preemptions -= 1;
        }
        match action {
            Action::Step(i, _) => self.current = Some(i),
            _ => self.faults -= 1,
        }
        action
    }
}

/// Explores every schedule of `scenario` within the budgets; the number
/// of schedules run, or the first violation.
pub fn explore(
    scenario: &Scenario,
    preemptions: u32,
    faults: u32,
    max_steps: u64,
) -> Result<u64, Violation> {
    let mut prefix = Some(Vec::new());
    let mut schedules = 0u64;
    while let Some(p) = prefix {
        let mut chooser = Explorer::new(p.clone(), preemptions, faults);
        let sim = run(scenario, 1, &mut chooser, false, max_steps);
        schedules += 1;
        if sim.failed() {
            let mut again = Explorer::new(p, preemptions, faults);
            let traced = run(scenario, 1, &mut again, true, max_steps);
            let mut v = traced.violation().expect("a replay repeats the violation");
            v.what = format!("{}: {}", scenario.name, v.what);
            return Err(v);
        }
        prefix = chooser.next_prefix();
    }
    Ok(schedules)
}
