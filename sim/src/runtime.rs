//! Running a scenario: each simulated process on its own coroutine (over
//! stacks reused across runs), stepped one syscall at a time or killed,
//! with the oracle's check after every step ([`Sim`]).

use crate::actors;
use crate::event::What;
use crate::model::Fs;
use crate::oracle::Oracle;
use crate::os::SimOs;
use crate::scenario::{Scenario, LOCK};
use crate::world::{name, World};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::RefCell;
use std::rc::Rc;

/// A protocol violation, with the schedule that produced it.
#[derive(Clone, Debug)]
pub struct Violation {
    /// What went wrong.
    pub what: String,
    /// Every step up to it, one per line.
    pub trace: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}\ntrace:\n{}", self.what, self.trace)
    }
}

type Co = Coroutine<(), (), (), DefaultStack>;

/// A running simulation.
pub struct Sim {
    world: Rc<RefCell<World>>,
    oracle: Oracle,
    coroutines: Vec<Option<Co>>,
}

/// The stack each simulated process runs on.
const STACK: usize = 256 * 1024;

thread_local! {
    /// Stacks of finished simulations, reused: mapping a fresh stack for
    /// every process of every schedule would cost more than running it.
    static STACKS: RefCell<Vec<DefaultStack>> = const { RefCell::new(Vec::new()) };
}

fn take_stack() -> DefaultStack {
    STACKS
        .with(|s| s.borrow_mut().pop())
        .unwrap_or_else(|| DefaultStack::new(STACK).expect("a coroutine stack"))
}

fn return_stack(mut co: Co) {
    // Unwinds a killed process's stack without running more of its
    // syscalls (a no-op for one that finished).
    co.force_unwind();
    let stack = co.into_stack();
    STACKS.with(|s| s.borrow_mut().push(stack));
}

impl Sim {
    /// Sets up `scenario`; `seed` feeds the random tokens; `tracing` keeps
    /// a readable trace of every step.
    pub fn new(scenario: &Scenario, seed: u64, tracing: bool) -> Self {
        let world = World::new(scenario, seed, tracing);
        let oracle = Oracle::new(scenario, &world);
        let world = Rc::new(RefCell::new(world));
        let coroutines = scenario
            .processes
            .iter()
            .enumerate()
            .map(|(me, spec)| {
                let world = Rc::clone(&world);
                let spec = spec.clone();
                let (kind, lifetime) = (scenario.kind, scenario.lifetime);
                let stack = take_stack();
                Some(Coroutine::with_stack(
                    stack,
                    move |yielder: &Yielder<(), ()>, ()| {
                        let mut os = SimOs::new(world, me, yielder);
                        actors::live(&mut os, &spec, kind, lifetime);
                    },
                ))
            })
            .collect();
        Sim {
            world,
            oracle,
            coroutines,
        }
    }

    /// The processes that can still take a step.
    pub fn runnable(&self) -> Vec<usize> {
        (0..self.coroutines.len())
            .filter(|&i| self.coroutines[i].is_some())
            .collect()
    }

    /// Runs process `i` up to its next syscall (which then runs when it is
    /// next chosen), and checks the invariants.
    pub fn step(&mut self, i: usize) {
        let Some(co) = self.coroutines[i].as_mut() else {
            return;
        };
        let done = matches!(co.resume(()), CoroutineResult::Return(()));
        let mut w = self.world.borrow_mut();
        w.steps += 1;
        if done {
            self.oracle.read_events(&mut w);
            drop(w);
            if let Some(co) = self.coroutines[i].take() {
                return_stack(co);
            }
        } else {
            self.oracle.check(&mut w);
        }
    }

    /// Kills process `i` (SIGKILL): it runs no further; the kernel closes
    /// its descriptors; it holds nothing; its PID is free.
    pub fn crash(&mut self, i: usize) {
        if let Some(co) = self.coroutines[i].take() {
            return_stack(co);
        }
        let mut w = self.world.borrow_mut();
        let fds: Vec<u32> = std::mem::take(&mut w.procs[i].fds).into_iter().collect();
        for fd in fds {
            w.fs.close(fd);
        }
        w.procs[i].alive = false;
        w.record(i, What::Killed);
        w.note(i, format_args!("is KILLED"));
    }

    /// The first violation, with the trace so far.
    pub fn violation(&self) -> Option<Violation> {
        let w = self.world.borrow();
        self.oracle.violation.as_ref().map(|what| Violation {
            what: what.clone(),
            trace: w.trace.clone(),
        })
    }

    /// Steps run and critical sections entered.
    pub fn figures(&self) -> (u64, u64) {
        let w = self.world.borrow();
        (w.steps, w.acquisitions)
    }

    /// Whether a release placeholder stayed at the lock path past the
    /// malformed grace period, taking the run outside the protocol's timing
    /// assumption (then it is not judged from that point).
    pub fn overslept(&self) -> bool {
        self.oracle.overslept.is_some()
    }

    /// Holders that left with their marker displaced (see the oracle's
    /// `displacement_needs_a_kill_or_pause`).
    pub fn displacements(&self) -> u64 {
        self.oracle.displacements
    }

    /// The filesystem now.
    pub fn fs(&self) -> std::cell::Ref<'_, Fs> {
        std::cell::Ref::map(self.world.borrow(), |w| &w.fs)
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        for co in self.coroutines.iter_mut().filter_map(Option::take) {
            return_stack(co);
        }
    }
}

/// Everything a scenario's processes left in the directory besides the
/// lock file, by name.
pub fn leftovers(sim: &Sim) -> Vec<String> {
    sim.fs()
        .names
        .keys()
        .filter(|n| n.as_slice() != LOCK)
        .map(|n| name(n))
        .collect()
}
