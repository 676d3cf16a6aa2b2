//! Who runs next: the [`Chooser`]s (a seeded [`Random`] one, the
//! exhaustive [`Explorer`], a fuzzer's [`FromBytes`]) and the loops that
//! run a scenario under them ([`run`], [`run_seed`], [`explore`],
//! [`explore_free`]). Every loop ends a run that is over with the progress
//! check ([`Sim::check_progress`]).

use crate::cast::Scenario;
use crate::oracle::Progress;
use crate::runtime::{Sim, Violation};
use crate::world::SplitMix64;

/// What the scheduler does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Process `i` runs its next syscall.
    Step(usize),
    /// Process `i` is killed.
    Crash(usize),
    /// The power is cut ([`Faults::power`](crate::model::Faults::power)):
    /// every process dies, the filesystem keeps what its disk held, and
    /// the scenario's processes start again in the new boot. Where power
    /// is never lost, process `i` steps instead.
    PowerCut(usize),
    /// The filesystem's journal commits on its own (as ext4 does every
    /// five seconds). Where power is never lost, process `i` steps
    /// instead.
    Commit(usize),
}

/// Chooses what happens next: which process steps, and whether it is
/// killed instead.
pub trait Chooser {
    /// Picks an index into `options` (never empty).
    fn pick(&mut self, options: usize) -> usize;
    /// Whether to kill the process about to step.
    fn crash(&mut self) -> bool;
    /// The next action among the `runnable` processes (never empty).
    fn choose(&mut self, runnable: &[usize]) -> Action {
        let i = runnable[self.pick(runnable.len())];
        if self.crash() {
            Action::Crash(i)
        } else {
            Action::Step(i)
        }
    }
}

impl<C: Chooser + ?Sized> Chooser for Box<C> {
    fn pick(&mut self, options: usize) -> usize {
        (**self).pick(options)
    }
    fn crash(&mut self) -> bool {
        (**self).crash()
    }
    fn choose(&mut self, runnable: &[usize]) -> Action {
        (**self).choose(runnable)
    }
}

/// A seeded random chooser: kills with probability `1/crash_one_in`, at
/// most `max_crashes` times; where the scenario may lose power
/// ([`Random::for_scenario`]), also commits the journal one step in 10
/// and cuts the power one in 60, at most twice.
pub struct Random {
    state: SplitMix64,
    crash_one_in: u64,
    crashes_left: u32,
    cuts_left: u32,
    recordable: bool,
}

/// How often a random schedule cuts the power, where it may.
pub(crate) const CUT_ONE_IN: u64 = 60;
/// How often a random schedule commits the journal, where power may be lost.
pub(crate) const COMMIT_ONE_IN: u64 = 10;
/// Power cuts in one random schedule at most.
pub(crate) const MAX_CUTS: u32 = 2;

impl Random {
    /// A chooser from `seed`.
    pub fn new(seed: u64, crash_one_in: u64, max_crashes: u32) -> Self {
        Random {
            state: SplitMix64::new(seed ^ 0xD1B5_4A32_D192_ED03),
            crash_one_in,
            crashes_left: max_crashes,
            cuts_left: 0,
            recordable: false,
        }
    }

    /// Kills only the process a [`Recording`]'s byte can name (the one a
    /// byte of 0xff picks among those runnable), so that every schedule
    /// drawn can be kept: a search for a kill to keep draws no schedule it
    /// must throw away.
    pub fn recordable(mut self) -> Self {
        self.recordable = true;
        self
    }

    /// [`Random::new`], cutting the power and committing the journal where
    /// `scenario` may lose power (elsewhere it draws as `new` does).
    pub fn for_scenario(
        scenario: &Scenario,
        seed: u64,
        crash_one_in: u64,
        max_crashes: u32,
    ) -> Self {
        let mut r = Random::new(seed, crash_one_in, max_crashes);
        if scenario.faults.power {
            r.cuts_left = MAX_CUTS;
        }
        r
    }

    fn next(&mut self) -> u64 {
        self.state.next()
    }
}

impl Chooser for Random {
    fn pick(&mut self, options: usize) -> usize {
        (self.next() % options as u64) as usize
    }
    fn crash(&mut self) -> bool {
        if self.crashes_left > 0
            && self.crash_one_in > 0
            && self.next().is_multiple_of(self.crash_one_in)
        {
            self.crashes_left -= 1;
            return true;
        }
        false
    }
    fn choose(&mut self, runnable: &[usize]) -> Action {
        let i = runnable[self.pick(runnable.len())];
        self.fault(runnable, i).unwrap_or(Action::Step(i))
    }
}

impl Random {
    /// What befalls process `i`, chosen among `runnable`, instead of its
    /// step, if anything: a power cut, a journal commit or a kill.
    fn fault(&mut self, runnable: &[usize], i: usize) -> Option<Action> {
        if self.cuts_left > 0 {
            // Named by the process its byte picks (no process acts), so
            // that a recording keeps it.
            let r = self.next();
            if r.is_multiple_of(CUT_ONE_IN) {
                self.cuts_left -= 1;
                return Some(Action::PowerCut(runnable[0xfe % runnable.len()]));
            }
            if (r >> 32).is_multiple_of(COMMIT_ONE_IN) {
                return Some(Action::Commit(runnable[0xfd % runnable.len()]));
            }
        }
        self.crash().then(|| match self.recordable {
            true => Action::Crash(runnable[255 % runnable.len()]),
            false => Action::Crash(i),
        })
    }
}

/// The most priority changes a [`Pct`] schedule makes.
pub(crate) const PCT_MAX_CHANGES: u64 = 4;

/// A PCT chooser (probabilistic concurrency testing: Burckhardt, Kothari,
/// Musuvathi and Nagarakatte, ASPLOS 2010). Each process draws a random
/// priority and the highest runnable one runs; at 2 to
/// [`PCT_MAX_CHANGES`] random steps the process about to run drops below
/// every other. A process so dropped stays where it stood, between the
/// look it made and the act it decided on, while the others run until
/// they end (a contender's attempts are bounded) or drop in turn, the
/// clock running on with their polls. Uniform choice keeps one of `n`
/// processes stopped for `k` steps once in `(n / (n - 1))^k` schedules.
/// Kills, power cuts and journal commits are drawn as
/// [`Random::recordable`] draws them, so that a [`Recording`] keeps every
/// schedule.
pub struct Pct {
    faults: Random,
    state: SplitMix64,
    /// Each process's priority, drawn when it is first runnable.
    priorities: Vec<u64>,
    /// The steps at which the process about to run drops, descending.
    changes: Vec<u64>,
    step: u64,
    /// The priority the next drop gives: below every drawn one and every
    /// earlier drop.
    lowest: u64,
}

impl Pct {
    /// A PCT schedule of `seed` for `scenario`: 2 to [`PCT_MAX_CHANGES`]
    /// changes, at steps drawn up to a horizon of 10 to 80 steps (drawn
    /// on a log scale), and faults as [`Random::for_scenario`] draws
    /// them. (Against the protocol mutants, changes early in a run kill
    /// more than changes spread over the hundreds of steps a run takes.)
    pub fn for_scenario(
        scenario: &Scenario,
        seed: u64,
        crash_one_in: u64,
        max_crashes: u32,
    ) -> Self {
        let faults = Random::for_scenario(scenario, seed, crash_one_in, max_crashes).recordable();
        let mut state = SplitMix64::new(seed ^ 0x5C7A_11E5_D0C4_0B1E);
        let horizon = 10u64 << (state.next() % 4);
        let n = 2 + state.next() % (PCT_MAX_CHANGES - 1);
        let mut changes: Vec<u64> = (0..n).map(|_| 1 + state.next() % horizon).collect();
        changes.sort_unstable_by(|a, b| b.cmp(a));
        Pct {
            faults,
            state,
            priorities: Vec::new(),
            changes,
            step: 0,
            lowest: PCT_MAX_CHANGES + 1,
        }
    }

    fn priority(&mut self, i: usize) -> u64 {
        while self.priorities.len() <= i {
            // Above every drop: drops count down from PCT_MAX_CHANGES.
            let p = self.state.next() | 1 << 63;
            self.priorities.push(p);
        }
        self.priorities[i]
    }
}

impl Chooser for Pct {
    fn pick(&mut self, options: usize) -> usize {
        (self.state.next() % options as u64) as usize
    }
    fn crash(&mut self) -> bool {
        self.faults.crash()
    }
    fn choose(&mut self, runnable: &[usize]) -> Action {
        self.step += 1;
        let top = |me: &mut Self| {
            let mut best = runnable[0];
            for &i in runnable {
                if me.priority(i) > me.priority(best) {
                    best = i;
                }
            }
            best
        };
        let mut i = top(self);
        while self.changes.last() == Some(&self.step) {
            self.changes.pop();
            self.lowest -= 1;
            self.priorities[i] = self.lowest;
            i = top(self);
        }
        self.faults.fault(runnable, i).unwrap_or(Action::Step(i))
    }
}

/// Runs `scenario` to the end under `chooser`, stopping at the first
/// violation; `max_steps` bounds a run. A run that ends with no process
/// left to step and no violation then has its progress checked.
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
        match chooser.choose(&runnable) {
            Action::Step(i) => sim.step(i),
            Action::Crash(i) => sim.crash(i),
            Action::PowerCut(i) | Action::Commit(i) if !scenario.faults.power => sim.step(i),
            Action::PowerCut(_) => sim.power_cut(),
            Action::Commit(_) => sim.commit(),
        }
        steps += 1;
    }
    sim.check_progress();
    sim
}

/// What a run that found no violation did.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Steps run.
    pub steps: u64,
    /// Critical sections entered.
    pub acquisitions: u64,
    /// What the progress check made of it.
    pub progress: Progress,
    /// Files it left that no later takeover would remove.
    pub accumulating: Vec<String>,
    /// Power cuts in it.
    pub cuts: u64,
}

/// A chooser that draws as [`Random`] does, and now and then stops the
/// process about to run for a while: that process stays where it stood,
/// between a look and the act it decided on, while the others run on
/// (and the clock with their polls) for 4 to 1,024 of their steps.
pub struct Pausing {
    faults: Random,
    state: SplitMix64,
    /// Per process, the step until which it is stopped.
    until: Vec<u64>,
    step: u64,
    one_in: u64,
    left: u32,
    free: Vec<usize>,
}

impl Pausing {
    /// A pausing schedule of `seed` for `scenario`: up to 3 pauses, each
    /// begun at a step with a chance of 1 in 8 to 64 (drawn per schedule),
    /// and faults as [`Random::for_scenario`] draws them.
    pub fn for_scenario(
        scenario: &Scenario,
        seed: u64,
        crash_one_in: u64,
        max_crashes: u32,
    ) -> Self {
        let faults = Random::for_scenario(scenario, seed, crash_one_in, max_crashes).recordable();
        let mut state = SplitMix64::new(seed ^ 0x7A05_E5D1_A3B2_9C41);
        let one_in = 8u64 << (state.next() % 4);
        Pausing {
            faults,
            state,
            until: Vec::new(),
            step: 0,
            one_in,
            left: 3,
            free: Vec::new(),
        }
    }
}

impl Chooser for Pausing {
    fn pick(&mut self, options: usize) -> usize {
        (self.state.next() % options as u64) as usize
    }
    fn crash(&mut self) -> bool {
        self.faults.crash()
    }
    fn choose(&mut self, runnable: &[usize]) -> Action {
        self.step += 1;
        let need = runnable.iter().max().map_or(0, |&m| m + 1);
        if self.until.len() < need {
            self.until.resize(need, 0);
        }
        let mut free = std::mem::take(&mut self.free);
        free.clear();
        free.extend(
            runnable
                .iter()
                .copied()
                .filter(|&i| self.until[i] <= self.step),
        );
        if free.is_empty() {
            // Every runnable process is stopped: the one whose pause ends
            // first goes on.
            let first = *runnable.iter().min_by_key(|&&i| self.until[i]).unwrap();
            self.until[first] = 0;
            free.push(first);
        }
        let i = free[(self.state.next() % free.len() as u64) as usize];
        if self.left > 0 && free.len() > 1 && self.state.next().is_multiple_of(self.one_in) {
            self.left -= 1;
            let len = 4u64 << (self.state.next() % 9);
            self.until[i] = self.step + len;
            let j = free.iter().copied().find(|&j| j != i).unwrap();
            self.free = free;
            return self.faults.fault(runnable, j).unwrap_or(Action::Step(j));
        }
        self.free = free;
        self.faults.fault(runnable, i).unwrap_or(Action::Step(i))
    }
}

/// How a seed's schedule is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Draw {
    /// Each step's process uniformly among the runnable ([`Random`]).
    Uniform,
    /// By priorities that change a few times ([`Pct`]).
    Pct,
    /// Uniformly, with a few long pauses ([`Pausing`]).
    Pausing,
}

impl Draw {
    /// The draw of the `n`th schedule: the one `forced` names (`uniform`,
    /// `pausing` or `pct`, from a search's environment), or, where it is
    /// empty, the three in turns. Panics on any other name, so that a
    /// misspelt one never runs a search other than the one asked for.
    pub fn nth(forced: &str, n: u64) -> Draw {
        match (forced, n % 3) {
            ("uniform", _) | ("", 0) => Draw::Uniform,
            ("pausing", _) | ("", 1) => Draw::Pausing,
            ("pct", _) | ("", _) => Draw::Pct,
            (other, _) => panic!("no draw {other:?}: uniform, pausing or pct"),
        }
    }

    /// The chooser of `seed`'s schedule of `scenario`; a `recordable` one
    /// kills only the process a kept schedule's byte can name
    /// ([`Random::recordable`]; the other draws always do).
    pub fn chooser(
        self,
        scenario: &Scenario,
        seed: u64,
        crash_one_in: u64,
        max_crashes: u32,
        recordable: bool,
    ) -> Box<dyn Chooser> {
        match self {
            Draw::Uniform => {
                let random = Random::for_scenario(scenario, seed, crash_one_in, max_crashes);
                match recordable {
                    true => Box::new(random.recordable()),
                    false => Box::new(random),
                }
            }
            Draw::Pct => Box::new(Pct::for_scenario(scenario, seed, crash_one_in, max_crashes)),
            Draw::Pausing => Box::new(Pausing::for_scenario(
                scenario,
                seed,
                crash_one_in,
                max_crashes,
            )),
        }
    }
}

/// Runs `scenario` under the random schedule of `seed`; on a violation,
/// runs it again with a trace and returns it.
pub fn run_seed(
    scenario: &Scenario,
    seed: u64,
    crash_one_in: u64,
    max_crashes: u32,
) -> Result<Outcome, Violation> {
    run_drawn(Draw::Uniform, scenario, seed, crash_one_in, max_crashes)
}

/// Runs `scenario` under the schedule `draw` makes of `seed`; on a
/// violation, runs it again with a trace and returns it.
pub fn run_drawn(
    draw: Draw,
    scenario: &Scenario,
    seed: u64,
    crash_one_in: u64,
    max_crashes: u32,
) -> Result<Outcome, Violation> {
    let sim = run(
        scenario,
        seed,
        &mut *draw.chooser(scenario, seed, crash_one_in, max_crashes, false),
        false,
        20_000,
    );
    if sim.violation().is_none() {
        let (steps, acquisitions) = sim.figures();
        return Ok(Outcome {
            steps,
            acquisitions,
            progress: sim.progress(),
            accumulating: sim.accumulating().to_vec(),
            cuts: sim.cuts(),
        });
    }
    let traced = run(
        scenario,
        seed,
        &mut *draw.chooser(scenario, seed, crash_one_in, max_crashes, false),
        true,
        20_000,
    );
    let mut v = traced
        .violation()
        .expect("the same seed replays the same violation");
    v.what = format!("seed {seed}: {}", v.what);
    Err(v)
}

/// A chooser for exhaustive exploration by re-execution: it replays a
/// prefix of decisions, then keeps running the current process; switching
/// to another process while the current one can run costs one preemption,
/// and killing a process costs one crash, each within a budget. It records
/// every decision and how many it could have made, for backtracking.
pub struct Explorer {
    prefix: Vec<usize>,
    pos: usize,
    current: Option<usize>,
    preemptions: u32,
    crashes: u32,
    /// Decisions before this one switch processes freely.
    free: usize,
    /// Each decision made: (chosen option, number of options).
    pub log: Vec<(usize, usize)>,
}

impl Explorer {
    /// A chooser replaying `prefix` with these budgets.
    pub fn new(prefix: Vec<usize>, preemptions: u32, crashes: u32) -> Self {
        Self::with_free_steps(prefix, preemptions, crashes, 0)
    }

    /// A chooser whose first `free` decisions may switch to any process
    /// without spending the preemption budget, and kill any process: every
    /// interleaving and every kill point of the first `free` steps, then
    /// at most `preemptions` switches and no kill.
    pub fn with_free_steps(
        prefix: Vec<usize>,
        preemptions: u32,
        crashes: u32,
        free: usize,
    ) -> Self {
        Explorer {
            prefix,
            pos: 0,
            current: None,
            preemptions,
            crashes,
            free,
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
    fn pick(&mut self, _options: usize) -> usize {
        0
    }
    fn crash(&mut self) -> bool {
        false
    }
    fn choose(&mut self, runnable: &[usize]) -> Action {
        // Options: continue the current process (free, when it can run),
        // switch to each other process (a preemption, or free when the
        // current one cannot run), kill each process (a crash).
        let mut options: Vec<Action> = Vec::new();
        let current_runs = self.current.is_some_and(|c| runnable.contains(&c));
        let free = self.pos < self.free;
        if let Some(c) = self.current.filter(|_| current_runs) {
            options.push(Action::Step(c));
        }
        if !current_runs || free || self.preemptions > 0 {
            options.extend(
                runnable
                    .iter()
                    .filter(|&&i| Some(i) != self.current || !current_runs)
                    .map(|&i| Action::Step(i)),
            );
        }
        // With free steps, kills come only among them.
        if self.crashes > 0 && (self.free == 0 || free) {
            options.extend(runnable.iter().map(|&i| Action::Crash(i)));
        }
        let choice = if self.pos < self.prefix.len() {
            self.prefix[self.pos].min(options.len() - 1)
        } else {
            0
        };
        self.pos += 1;
        self.log.push((choice, options.len()));
        let action = options[choice];
        match action {
            Action::Step(i) => {
                if current_runs && !free && Some(i) != self.current {
                    self.preemptions -= 1;
                }
                self.current = Some(i);
            }
            Action::Crash(_) => self.crashes -= 1,
            Action::PowerCut(_) | Action::Commit(_) => {}
        }
        action
    }
}

/// Explores every schedule of `scenario` within the budgets; returns the
/// number of schedules run and of decisions taken (distinct nodes of the
/// schedule tree), or the first violation.
pub fn explore(
    scenario: &Scenario,
    preemptions: u32,
    crashes: u32,
    max_steps: u64,
) -> Result<(u64, u64), Violation> {
    explore_free(scenario, 0, preemptions, crashes, max_steps)
}

/// [`explore`], with every interleaving of the first `free` steps (no
/// preemption budget spent there).
pub fn explore_free(
    scenario: &Scenario,
    free: usize,
    preemptions: u32,
    crashes: u32,
    max_steps: u64,
) -> Result<(u64, u64), Violation> {
    let mut prefix = Some(Vec::new());
    let (mut schedules, mut nodes) = (0u64, 0u64);
    while let Some(p) = prefix {
        let replayed = p.len();
        let mut chooser = Explorer::with_free_steps(p.clone(), preemptions, crashes, free);
        let sim = run(scenario, 1, &mut chooser, false, max_steps);
        schedules += 1;
        nodes += (chooser.log.len().saturating_sub(replayed.saturating_sub(1))) as u64;
        if sim.violation().is_some() {
            let mut again = Explorer::with_free_steps(p, preemptions, crashes, free);
            let traced = run(scenario, 1, &mut again, true, max_steps);
            return Err(traced.violation().expect("a replay repeats the violation"));
        }
        prefix = chooser.next_prefix();
    }
    Ok((schedules, nodes))
}

/// A chooser that runs another and writes its decisions down as bytes
/// [`FromBytes`] replays, so a random schedule can be kept as a finding.
/// A kill is kept only if [`FromBytes`] would kill the same process
/// (`0xff` picks `runnable[255 % len]`); otherwise the bytes are lost.
pub struct Recording<C> {
    inner: C,
    /// The decisions so far, or `None` once one cannot be written.
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
    fn pick(&mut self, options: usize) -> usize {
        self.inner.pick(options)
    }
    fn crash(&mut self) -> bool {
        self.inner.crash()
    }
    fn choose(&mut self, runnable: &[usize]) -> Action {
        let action = self.inner.choose(runnable);
        let byte = match action {
            Action::Step(i) => runnable.iter().position(|&r| r == i).map(|p| p as u8),
            Action::Crash(i) => (runnable[255 % runnable.len()] == i).then_some(0xff),
            Action::PowerCut(i) => (runnable[0xfe % runnable.len()] == i).then_some(0xfe),
            Action::Commit(i) => (runnable[0xfd % runnable.len()] == i).then_some(0xfd),
        };
        match (byte, self.bytes.as_mut()) {
            (Some(b), Some(bytes)) => bytes.push(b),
            _ => self.bytes = None,
        }
        action
    }
}

/// A chooser that reads its decisions from bytes (a fuzzer's input): each
/// byte picks a process; a byte of 0xff kills it instead, at most twice;
/// where the scenario may lose power, a byte of 0xfe cuts it, at most
/// twice, and one of 0xfd commits the journal (elsewhere the
/// process they pick steps). When the bytes run out, the lowest runnable
/// process runs.
pub struct FromBytes<'a> {
    bytes: &'a [u8],
    crashes_left: u32,
    cuts_left: u32,
}

impl<'a> FromBytes<'a> {
    /// Decisions from `bytes`, with up to two kills.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self::with_kills(bytes, 2)
    }

    /// Decisions from `bytes`, with up to `kills` kills.
    pub fn with_kills(bytes: &'a [u8], kills: u32) -> Self {
        FromBytes {
            bytes,
            crashes_left: kills,
            cuts_left: MAX_CUTS,
        }
    }
}

impl Chooser for FromBytes<'_> {
    fn pick(&mut self, _options: usize) -> usize {
        0
    }
    fn crash(&mut self) -> bool {
        false
    }
    fn choose(&mut self, runnable: &[usize]) -> Action {
        let Some((&b, rest)) = self.bytes.split_first() else {
            return Action::Step(runnable[0]);
        };
        self.bytes = rest;
        let i = runnable[usize::from(b) % runnable.len()];
        if b == 0xff && self.crashes_left > 0 {
            self.crashes_left -= 1;
            return Action::Crash(i);
        }
        if b == 0xfe && self.cuts_left > 0 {
            self.cuts_left -= 1;
            return Action::PowerCut(i);
        }
        if b == 0xfd {
            return Action::Commit(i);
        }
        Action::Step(i)
    }
}
