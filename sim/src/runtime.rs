//! Running a scenario: each simulated process on its own coroutine (over
//! stacks reused across runs), stepped one syscall at a time or killed,
//! with the oracle's check after every step ([`Sim`]), and, once the run
//! is over, the progress check's fresh contender ([`Sim::check_progress`]).

use crate::actors;
use crate::cast::{Policy, Process, Scenario, LOCK};
use crate::event::What;
use crate::model::Fs;
use crate::oracle::{Oracle, Progress, FRESH_POLL, IDLE_OWNER, RECORDLESS};
use crate::os::SimOs;
use crate::world::{name, World};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use swaplock_core::soft::Kind;
use swaplock_core::Pid;

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

pub(crate) type Co = Coroutine<(), (), (), DefaultStack>;

/// A running simulation.
pub struct Sim {
    world: Rc<RefCell<World>>,
    oracle: Oracle,
    coroutines: Vec<Option<Co>>,
    /// The scenario's kind of lock and lifetime, for the fresh contender.
    kind: Kind,
    lifetime: Option<Duration>,
    /// Whether a process runs the naive policy: such runs are judged on
    /// safety only.
    naive: bool,
    /// The scenario's processes, which start again after a power cut.
    processes: Vec<Process>,
    /// The processes the last power cut's boot started: once their work is
    /// done they stay up, idle, as a device's services do, so that their
    /// PIDs run through the progress check.
    restarted: Vec<usize>,
    /// Whether the scenario injects syscall failures.
    syscall_faults: bool,
}

/// The PID the progress check's fresh contender starts from (the first
/// one no process has had, on any host, and not named at the lock path).
const FRESH_PID: u32 = 4242;

/// At most this many fresh contenders follow one another without
/// removing a file (see [`Sim::check_progress`]).
const PROGRESS_ROUNDS: usize = 4;

/// What the lock path holds: its inode and content (a symlink has none).
type LockState = Option<(u64, Option<Vec<u8>>)>;

/// What the lock path holds now.
fn lock_state(w: &World) -> LockState {
    w.fs.ino(LOCK)
        .map(|ino| (ino, w.fs.content(LOCK).map(<[u8]>::to_vec)))
}

/// At most this many steps for the fresh contender: far more than its
/// bounded attempts take alone; a run past it is a wedge.
const FRESH_STEPS: u64 = 200_000;

/// The stack each simulated process runs on.
const STACK: usize = 256 * 1024;

thread_local! {
    /// Stacks of finished simulations, reused: mapping a fresh stack for
    /// every process of every schedule would cost more than running it.
    static STACKS: RefCell<Vec<DefaultStack>> = const { RefCell::new(Vec::new()) };
}

pub(crate) fn take_stack() -> DefaultStack {
    STACKS
        .with(|s| s.borrow_mut().pop())
        .unwrap_or_else(|| DefaultStack::new(STACK).expect("a coroutine stack"))
}

pub(crate) fn return_stack(mut co: Co) {
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
        let (kind, lifetime) = (scenario.kind, scenario.lifetime);
        let coroutines = scenario
            .processes
            .iter()
            .enumerate()
            .map(|(me, spec)| Some(coroutine(&world, me, spec.clone(), kind, lifetime)))
            .collect();
        Sim {
            world,
            oracle,
            coroutines,
            kind,
            lifetime,
            naive: scenario
                .processes
                .iter()
                .any(|p| matches!(p.policy, Policy::Naive(_))),
            processes: scenario.processes.clone(),
            restarted: Vec::new(),
            syscall_faults: scenario.faults.injects_syscall_failures(),
        }
    }

    /// The progress check, once the run is over (no process can step): every
    /// process has exited, and a fresh contender of our policy, with a new
    /// PID, on the host the record at the lock path names (if it is one of
    /// the scenario's hosts, else the first), with injected failures
    /// switched off, runs alone. It must take the lock within the bound the
    /// oracle sets ([`Oracle::progress_bound`]), unless the lock path holds
    /// what the protocol must never evict, and then leave the directory
    /// clean. Runs that broke an invariant or left the timing assumption,
    /// and runs of the naive policy, are not judged.
    ///
    /// A takeover's recovery may put back at the lock path a file that
    /// may be live, which the bound did not foresee: a placeholder (it ages
    /// out), or the record of another host under a break name whose PID it
    /// shares with the dead writer (break names carry no host), which only
    /// that host can judge (I8). So a fresh contender that changed what the
    /// lock path holds without taking the lock is followed by another, on
    /// the host the path names now, with the bound for what it holds. A
    /// round that changed nothing is a wedge, and so is a file the protocol
    /// never evicts that a recovery put back: only what a run left there is
    /// exempt. Each recovery consumes a file a killed or failing breaker
    /// stranded, so rounds go on while they remove files (a chain of
    /// stranded placeholders, each aging out at the lock path in turn,
    /// takes one round each), and at most [`PROGRESS_ROUNDS`] may remove
    /// none: the check ends, as the directory's files are finite.
    pub fn check_progress(&mut self) {
        // A kill that ended the run is recorded but not yet read.
        self.oracle.read_events(&mut self.world.borrow_mut());
        if self.coroutines.iter().any(Option::is_some)
            || self.naive
            || self.oracle.violation.is_some()
            || self.oracle.overslept.is_some()
        {
            return;
        }
        {
            let mut w = self.world.borrow_mut();
            for who in 0..w.procs.len() {
                // Where syscalls fail, a live process may leave its own
                // record behind by design (a release that fails says so):
                // those runs end with every process gone.
                let stays = self.restarted.contains(&who) && !self.syscall_faults;
                if w.procs[who].alive && !stays {
                    w.exit(who);
                    w.note(who, format_args!("exits"));
                }
            }
            w.fs.faults = w.fs.faults.without_failures();
        }
        let mut last: Option<(usize, LockState, usize)> = None;
        let mut idle = 0;
        loop {
            let mut w = self.world.borrow_mut();
            let state = lock_state(&w);
            let files = w.fs.names.len();
            if let Some((fresh, before, files_before)) = &last {
                if files >= *files_before {
                    idle += 1;
                }
                if *before == state || idle == PROGRESS_ROUNDS {
                    self.oracle.wedge(&mut w, *fresh, None);
                    return;
                }
            }
            let bound = match (self.oracle.progress_bound(&w), &last) {
                (Ok(bound), _) => bound,
                (Err(why), None)
                    if why == RECORDLESS && !self.oracle.empty_left_of_necessity(&w) =>
                {
                    self.oracle.fail(format!(
                        "wedge: the run left an empty marker at the lock path{}, which a live process created and left behind (I10)",
                        w.fs.ino(LOCK).map_or(String::new(), |i| format!(" (inode {i})"))
                    ));
                    return;
                }
                (Err(why), None) if why == IDLE_OWNER => {
                    self.oracle.fail(format!(
                        "wedge: the lock path{} holds the record of a live process that holds nothing, which keeps every contender out while it lives",
                        w.fs.ino(LOCK).map_or(String::new(), |i| format!(" (inode {i})"))
                    ));
                    return;
                }
                (Err(why), None) => {
                    self.oracle.progress = Progress::Exempt(why);
                    return;
                }
                // A contender's marker made the filelock way (created at
                // the lock path, then written) whose creator was killed
                // before writing it is a documented wedge (7.2 step 4,
                // I10), whichever way it went since: a breaker's exchange
                // may have taken it aside and been killed, and the recovery
                // of the breaker's names must put an empty file back, as it
                // may be a live writer's. The run left it, not the recovery.
                (Err(why), Some(_)) if self.oracle.unwritten_marker(&w) => {
                    self.oracle.progress = Progress::Exempt(why);
                    return;
                }
                (Err(why), Some((fresh, ..))) => {
                    self.oracle.wedge(&mut w, *fresh, Some(why));
                    return;
                }
            };
            let named = w.fs.content(LOCK).and_then(crate::oracle::owner_of);
            let host = named
                .and_then(|(_, host)| w.hosts.iter().position(|h| *h == host))
                .unwrap_or(0);
            // After a power cut, the record's owner of the boot before is
            // gone, and the fresh contender is a process of this boot with
            // its PID and start time (a device's service started again):
            // only the boot id tells them apart.
            // A token without a boot id (0: a peer that could not read it)
            // tells no boot from another, by design (4.2).
            let runs = |pid: u32| w.procs.iter().any(|p| p.alive && p.pid.get() == pid);
            let reborn = match named {
                Some((pid, h)) if w.boots > 0 && w.hosts[host] == h && !runs(pid) => {
                    w.fs.content(LOCK)
                        .and_then(crate::oracle::start_of)
                        .filter(|&(boot, _)| boot != 0 && boot != w.boot_id())
                        // A PID and start time name one process of a boot:
                        // none of this boot may have had them already.
                        .filter(|&(_, start)| {
                            !w.procs.iter().any(|p| {
                                p.pid.get() == pid
                                    && p.start.high == w.boot_id()
                                    && p.start.low == start
                            })
                        })
                        .map(|(_, start)| (pid, start))
                }
                _ => None,
            };
            let pid = match reborn {
                Some((pid, _)) => Some(pid),
                None => (FRESH_PID..).find(|&pid| {
                    !w.procs.iter().any(|p| p.pid.get() == pid)
                        && named.is_none_or(|(p, _)| p != pid)
                }),
            };
            let pid = pid.and_then(Pid::new).expect("a free PID");
            let fresh = match reborn {
                Some((_, start)) => w.spawn_started(pid, host, start),
                None => w.spawn(pid, host),
            };
            w.note(
                fresh,
                format_args!("PROGRESS: a fresh contender, alone, with {bound} attempts"),
            );
            self.oracle.admit(&w, bound);
            drop(w);
            let spec = Process {
                host,
                pid: pid.get(),
                attempts: bound,
                hold_steps: 2,
                policy: Policy::Ours,
                enosys_fallback: false,
                poll: FRESH_POLL,
                hold_pause: Duration::ZERO,
                beat: Duration::ZERO,
            };
            self.coroutines.push(Some(coroutine(
                &self.world,
                fresh,
                spec,
                self.kind,
                self.lifetime,
            )));
            let mut steps = 0;
            while self.coroutines[fresh].is_some()
                && steps < FRESH_STEPS
                && self.oracle.violation.is_none()
            {
                self.step(fresh);
                steps += 1;
            }
            if self.oracle.violation.is_some() {
                return;
            }
            let mut w = self.world.borrow_mut();
            w.exit(fresh);
            if self.oracle.progress(&mut w, fresh) {
                return;
            }
            last = Some((fresh, state, files));
        }
    }

    /// What the progress check made of the run.
    pub fn progress(&self) -> Progress {
        self.oracle.progress
    }

    /// Files the run left that no later takeover would remove (reported by
    /// the progress check; they keep nobody out), as `name: content`.
    pub fn accumulating(&self) -> &[String] {
        &self.oracle.accumulating
    }

    /// The processes that can still take a step.
    pub fn runnable(&self) -> Vec<usize> {
        let mut out = Vec::new();
        self.runnable_into(&mut out);
        out
    }

    /// [`Sim::runnable`] into `out`, which it clears first: a schedule
    /// asks before every step.
    pub fn runnable_into(&self, out: &mut Vec<usize>) {
        out.clear();
        out.extend((0..self.coroutines.len()).filter(|&i| self.coroutines[i].is_some()));
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
        w.exit(i);
        w.record(i, What::Killed);
        w.note(i, format_args!("is KILLED"));
    }

    /// The power is cut ([`Faults::power`](crate::model::Faults::power)):
    /// every process dies where it stands (nothing of it runs, as a kill);
    /// the filesystem is what its disk held ([`Fs::power_cut`]); the
    /// machine boots with a new boot id, and the scenario's processes
    /// start again, with the PIDs and start times they had in the boot
    /// before, as a device's services do; once done they stay up, idle,
    /// through the progress check (unless syscalls fail in the scenario).
    pub fn power_cut(&mut self) {
        for co in self.coroutines.iter_mut().filter_map(Option::take) {
            return_stack(co);
        }
        let mut w = self.world.borrow_mut();
        for who in 0..w.procs.len() {
            if w.procs[who].alive {
                w.exit(who);
                w.record(who, What::Killed);
            }
        }
        let taken_back = w.fs.power_cut();
        w.reboot();
        w.steps += 1;
        let kept = w.fs.names.len();
        w.note_machine(format_args!(
            "POWER CUT: the machine boots again, the disk keeping {kept} names"
        ));
        self.oracle.read_events(&mut w);
        self.oracle.power_cut(&w, taken_back);
        self.restarted.clear();
        for spec in &self.processes {
            let pid = Pid::new(spec.pid).expect("scenario PIDs are in range");
            let me = w.spawn(pid, spec.host);
            self.restarted.push(me);
            self.oracle.admit_restarted(&w);
            self.coroutines.push(Some(coroutine(
                &self.world,
                me,
                spec.clone(),
                self.kind,
                self.lifetime,
            )));
        }
        self.oracle.check(&mut w);
    }

    /// The filesystem's journal commits on its own
    /// ([`Fs::commit`]): a step of no process.
    pub fn commit(&mut self) {
        let mut w = self.world.borrow_mut();
        w.fs.commit();
        w.steps += 1;
        w.note_machine(format_args!("the journal commits"));
    }

    /// Whether a violation was found, without copying the trace.
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

    /// The trace so far (empty unless the simulation traces), one step a
    /// line: what a directed schedule steers by.
    pub fn trace(&self) -> String {
        self.world.borrow().trace.clone()
    }

    /// Whether process `i` has finished or died.
    pub fn done(&self, i: usize) -> bool {
        self.coroutines[i].is_none()
    }

    /// Power cuts so far.
    pub fn cuts(&self) -> u64 {
        self.world.borrow().boots
    }

    /// Steps run and critical sections entered.
    pub fn figures(&self) -> (u64, u64) {
        let w = self.world.borrow();
        (w.steps, w.acquisitions)
    }

    /// Whether the run left the protocol's timing assumption (then it is
    /// not judged from that point): a release placeholder stayed at the
    /// lock path past the malformed grace period, or a process acted on
    /// the lock path by name a lease or more after its own lease record
    /// there last changed (PROTOCOL 13.1).
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

/// The coroutine of process `me` of `world`, living as `spec` says.
fn coroutine(
    world: &Rc<RefCell<World>>,
    me: usize,
    spec: Process,
    kind: Kind,
    lifetime: Option<Duration>,
) -> Co {
    let world = Rc::clone(world);
    Coroutine::with_stack(take_stack(), move |yielder: &Yielder<(), ()>, ()| {
        let mut os = SimOs::new(world, me, yielder);
        actors::live(&mut os, &spec, kind, lifetime);
    })
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
        .map(|n| name(n).to_string())
        .collect()
}
