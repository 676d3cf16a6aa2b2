//! The simulated processes' lives, on the shipped driver through
//! [`SimFiles`]: a participant's acquisitions (publish, polls, the hold with
//! its heartbeats, the leave), the operator who removes `gen/`, and the
//! progress check's fresh writer. They record the ghost steps of their
//! lives for the oracle and judge nothing.

use super::cast::{Role, Timing};
use super::files::{SimEnv, SimFiles};
use super::fs::dir;
use super::world::{What, World, STEP};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use swaplock_core::host::HostName;
use swaplock_core::rw::driver::{BoundedLedger, Buffers, Config, Env, Instance};
use swaplock_core::rw::files::Area;
use swaplock_core::rw::member::BeatWatch;
use swaplock_core::Pid;

/// A simulated lock: the driver's memory with small buffers (the model's
/// records are small) and a ledger with room for every scenario.
pub(crate) type SimInstance = Instance<BoundedLedger<128>, Vec<u8>>;

/// A lock that outlives its process's life, for the progress check: its
/// memory and whether its directories were prepared.
#[derive(Default)]
pub(crate) struct Slot {
    pub(crate) instance: Option<SimInstance>,
    pub(crate) prepared: bool,
}

/// The length of each of a simulated lock's buffers.
const BUFFER: usize = 8 * 1024;

/// A new lock for process `me` of `world`.
pub(crate) fn instance(world: &World, me: usize, timing: &Timing) -> SimInstance {
    let p = &world.procs[me];
    let config = Config {
        threshold: timing.threshold,
        max_lease: timing.max_lease,
        pid: Pid::new(p.pid).expect("scenario PIDs are in range"),
        host: HostName::try_from(world.hosts[p.host]).expect("short host names"),
    };
    let buf = || vec![0u8; BUFFER];
    Instance::new(
        config,
        BoundedLedger::new(),
        Buffers::new(buf(), buf(), buf()),
    )
}

/// Process `me`'s life.
pub(crate) fn live(
    world: &Rc<RefCell<World>>,
    me: usize,
    role: Role,
    start: Duration,
    timing: Timing,
    slot: &Rc<RefCell<Slot>>,
    yielder: &corosensei::Yielder<(), ()>,
) {
    let prepared = slot.borrow().prepared;
    let mut files = SimFiles::new(Rc::clone(world), me, yielder, prepared);
    if !start.is_zero() {
        files.sleep_from_start(start);
    }
    match role {
        Role::RemoveGen => {
            files.remove(dir(Area::Generations));
        }
        Role::Participant {
            mode,
            rounds,
            patience,
            hold,
        } => {
            let taken = slot.borrow_mut().instance.take();
            let mut lock = taken.unwrap_or_else(|| instance(&world.borrow(), me, &timing));
            let mut env = SimEnv {
                world: Rc::clone(world),
                me,
            };
            for _ in 0..rounds {
                acquisition(
                    &mut files, &mut env, &mut lock, mode, patience, hold, &timing,
                );
            }
            let mut slot = slot.borrow_mut();
            slot.instance = Some(lock);
            slot.prepared = files.prepared;
        }
    }
}

/// One acquisition: publish, poll until granted or out of patience, hold
/// with heartbeats, leave.
fn acquisition(
    files: &mut SimFiles<'_>,
    env: &mut SimEnv,
    lock: &mut SimInstance,
    mode: swaplock_core::rw::Mode,
    patience: u32,
    hold: Duration,
    timing: &Timing,
) {
    let mut p = match lock.publish(files, env, mode) {
        Ok(p) => p,
        Err(e) => {
            files.ghost(What::Failed(e.to_string()));
            return;
        }
    };
    files.ghost(What::Published {
        token: p.token().0,
        mode,
    });
    let mut granted = false;
    for poll in 0..patience {
        files.ghost(What::PollStart);
        match lock.advance(files, env, &mut p) {
            Ok(true) => {
                granted = true;
                files.ghost(What::Granted {
                    generation: p.generation().unwrap_or(0),
                });
                break;
            }
            Ok(false) if poll + 1 < patience => files.sleep(timing.poll),
            Ok(false) => {}
            Err(e) => {
                files.ghost(What::Failed(e.to_string()));
                break;
            }
        }
    }
    if granted {
        let mut watch = BeatWatch::new(env.now(), timing.threshold, timing.heartbeat);
        let beats = hold.as_nanos().div_ceil(timing.heartbeat.as_nanos().max(1));
        for _ in 0..beats {
            files.sleep(timing.heartbeat);
            let beat = lock.heartbeat(files, env, &mut p);
            if watch.observe(beat, env.now()).is_some() {
                files.ghost(What::Compromised);
                break;
            }
        }
    }
    files.ghost(What::Leaving { gave_up: !granted });
    if let Err(e) = lock.leave(files, env, &mut p) {
        files.ghost(What::Failed(e.to_string()));
    }
    files.ghost(What::Left);
}

impl SimFiles<'_> {
    /// An operator's `rm -rf` of directory `d`, as one step.
    pub(crate) fn remove(&mut self, d: usize) {
        self.world.borrow_mut().procs[self.me].pending = super::world::Op::Other;
        self.suspend();
        let mut w = self.world.borrow_mut();
        w.time += STEP;
        w.fs.now = w.time;
        w.steps += 1;
        w.fs.remove_dir(d);
        w.note(
            self.me,
            format_args!("OPERATOR removes directory {d} and all in it"),
        );
        let me = self.me;
        w.record(me, What::RemovedLog);
    }
}
