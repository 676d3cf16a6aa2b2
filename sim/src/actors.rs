//! The simulated processes' lives, run on the shipped protocol code through
//! [`SimOs`]: a contender (attempt, hold, release, by our policy or the
//! naive one), which may first try `flock` on a filesystem without it, and
//! the hostile planter. They record the ghost steps of their lives for the
//! oracle (an attempt begun or ended, the critical section entered or
//! left, a release and its result) and judge nothing.

use crate::cast::{Policy, Process, FALLBACK_STALL, LEASE, LOCK, RECORDLESS_HOLD, VICTIM};
use crate::model;
use crate::naive;
use crate::os::{KernelFile, SimOs};
use crate::world::World;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use swaplock_core::kernel;
use swaplock_core::names::Token;
use swaplock_core::soft::{self, Attempt, Clock, Config, Contender, Dir, Holder, Kind};
use swaplock_core::wait::Patience;

/// The poll pause between attempts.
pub const POLL: Duration = Duration::from_millis(50);

/// A process's life: a planter's, or a contender's.
pub(crate) fn live(os: &mut SimOs<'_>, spec: &Process, kind: Kind, lifetime: Option<Duration>) {
    match spec.policy {
        Policy::Planter => planter(os, spec.attempts),
        Policy::Recordless => recordless(os, spec.attempts),
        Policy::ByName => by_name(os, spec.attempts),
        Policy::Classic => classic(os, spec),
        _ => contender(os, spec, kind, lifetime),
    }
}

/// A [`Policy::Recordless`] holder's life: create the lock file
/// exclusively (up to `attempts` times, a poll apart), hold it empty for
/// [`RECORDLESS_HOLD`], remove it while it is open (it names nobody, so no
/// peer ever judges it), close.
fn recordless(os: &mut SimOs<'_>, attempts: u32) {
    os.holds_empty();
    let mut left = attempts;
    let file = loop {
        if let Ok(file) = os.create_new(LOCK, 0o644, true) {
            break file;
        }
        left = left.saturating_sub(1);
        if left == 0 {
            return;
        }
        os.sleep(POLL);
    };
    let Ok(own) = os.fstat(&file) else {
        os.close(file);
        return;
    };
    os.enter(own.id.ino);
    // In poll-sized steps, so that contenders look at it meanwhile.
    for _ in 0..RECORDLESS_HOLD.as_millis() / POLL.as_millis() {
        os.sleep(POLL);
    }
    os.leave();
    let _ = os.unlink(LOCK);
    os.close(file);
}

/// A [`Policy::Classic`] process's life: the kernel lock by the shipped
/// driver, held, and the lock file removed while still locked once the
/// path is seen to name the file locked.
fn classic(os: &mut SimOs<'_>, spec: &Process) {
    // Its lock file is empty by design, as with-lock-ex leaves it.
    os.holds_empty();
    let mut patience = Attempts {
        world: Rc::clone(&os.world),
        me: os.me,
        left: spec.attempts,
        poll: spec.poll,
    };
    let taken = kernel::acquire(
        &mut KernelFile { os, nosys: false },
        false,
        false,
        &mut patience,
    );
    os.attempting(false);
    let (file, id) = match taken {
        Ok(kernel::Outcome::Held(file, id)) => (file, id),
        Ok(kernel::Outcome::Busy(_)) => return,
        Ok(kernel::Outcome::Unsupported { file, .. }) => return os.close(file),
        Err((step, e)) => return os.kernel_failed(step, e),
    };
    os.enter(id.ino);
    for _ in 0..spec.hold_steps {
        os.idle();
    }
    // Held until the unlink, which ends the hold: out of the critical
    // section just before it (the oracle wants a holder's file linked).
    let removable = kernel::check_remove(&mut KernelFile { os, nosys: false }, &file).is_ok();
    os.leave();
    if removable {
        let _ = os.unlink(LOCK);
    }
    os.close(file);
}

/// A [`Policy::ByName`] holder's life: create the lock file exclusively
/// and close it at once (up to `attempts` times, a poll apart), hold it
/// empty for [`RECORDLESS_HOLD`], then unlink it by name.
fn by_name(os: &mut SimOs<'_>, attempts: u32) {
    os.holds_empty();
    let mut left = attempts;
    let own = loop {
        if let Ok(file) = os.create_new(LOCK, 0o644, true) {
            let own = os.fstat(&file);
            os.close(file);
            match own {
                Ok(own) => break own,
                Err(_) => return,
            }
        }
        left = left.saturating_sub(1);
        if left == 0 {
            return;
        }
        os.sleep(POLL);
    };
    os.enter(own.id.ino);
    for _ in 0..RECORDLESS_HOLD.as_millis() / POLL.as_millis() {
        os.sleep(POLL);
    }
    os.leave();
    let _ = os.unlink(LOCK);
}

/// The `flock` attempt on a filesystem without `flock`, and the removal of
/// the file it created before the switch to a soft lock: ours runs the
/// shipped [`kernel::fall_back`], which removes it while it is open, so a
/// peer's marker found at the path stays; the naive way closes it, then
/// unlinks the path by name if it shows the same inode number.
fn flock_fallback(os: &mut SimOs<'_>, policy: Policy, cfg: &Config<'_>) {
    if let Policy::Ours = policy {
        // The shipped attempt: it learns whether it created the file.
        let attempt = kernel::attempt(&mut KernelFile { os, nosys: true }, false, true);
        if let Ok(kernel::Outcome::Unsupported { file, created }) = attempt {
            os.sleep(FALLBACK_STALL);
            let _ = kernel::fall_back(os, cfg, file, created);
        }
        return;
    }
    let Ok(fd) = os.create_new(LOCK, 0o644, false) else {
        // A file that existed may be a peer's soft marker: left alone.
        return;
    };
    let _ = os.flock(&fd);
    os.sleep(FALLBACK_STALL);
    match policy {
        Policy::Naive(_) => {
            let own = os.fstat(&fd);
            os.close(fd);
            if let Ok(own) = own {
                if os.lstat(LOCK).is_ok_and(|st| st.id == own.id) {
                    let _ = os.unlink(LOCK);
                }
            }
        }
        // The attempt created the file: its `O_EXCL` create succeeded.
        _ => {
            let _ = kernel::fall_back(os, cfg, fd, true);
        }
    }
}

/// A [`Policy::Planter`]'s life: replace every break name it sees with a
/// symlink to [`VICTIM`], `rounds` times.
fn planter(os: &mut SimOs<'_>, rounds: u32) {
    const PLANT: &[u8] = b"plant";
    for _ in 0..rounds {
        let _ = os.symlink(VICTIM, PLANT);
        let mut seen = Vec::new();
        let _ = os.list(&mut |n| {
            if n.windows(7).any(|w| w == b".break.") {
                seen.push(n.to_vec());
            }
        });
        for n in seen {
            if os.rename(PLANT, &n).is_ok() {
                let _ = os.symlink(VICTIM, PLANT);
            }
        }
    }
}

/// A contender's patience: `left` more attempts, `poll` apart. It
/// records when each attempt begins and ends, for the oracle's pause and
/// displacement exemptions.
struct Attempts {
    world: Rc<RefCell<World>>,
    me: usize,
    left: u32,
    poll: Duration,
}

impl Attempts {
    fn attempting(&mut self, on: bool) {
        self.world
            .borrow_mut()
            .record(self.me, crate::event::What::Attempting(on));
    }
}

/// The same patience for a soft lock (a [`Holder`]) and a kernel lock (an
/// `Errno`).
impl<H> Patience<H> for Attempts {
    fn attempting(&mut self) {
        self.left = self.left.saturating_sub(1);
        Attempts::attempting(self, true);
    }

    fn busy(&mut self, _holder: &H, _elapsed: Duration) -> Option<Duration> {
        Attempts::attempting(self, false);
        (self.left > 0).then_some(self.poll)
    }
}

/// A contender's life: attempt the lock, hold it for a few steps, release.
fn contender(os: &mut SimOs<'_>, spec: &Process, kind: Kind, lifetime: Option<Duration>) {
    let (pid, host, start) = os.identity();
    let lease = (kind == Kind::Lease).then_some(soft::LeaseTerms {
        duration: LEASE.as_secs_f64(),
        token: Token([7; 16]),
    });
    let cfg = Config {
        kind,
        lock: LOCK,
        pid,
        host,
        start: Some(start),
        mode: None,
        lease,
        lifetime,
        durable: true,
    };
    if spec.enosys_fallback {
        flock_fallback(os, spec.policy, &cfg);
    }
    let mut watch = Contender::new();
    let mut patience = Attempts {
        world: Rc::clone(&os.world),
        me: os.me,
        left: spec.attempts,
        poll: spec.poll,
    };
    let (file, ino) = loop {
        if patience.left == 0 {
            return;
        }
        let outcome = match spec.policy {
            // The shipped driver, as the facade runs it.
            Policy::Ours => soft::acquire(os, &cfg, &mut watch, &mut patience).map(|a| match a {
                Attempt::Acquired(held) => Some((held.file, held.id.ino)),
                Attempt::Busy(_) => None,
            }),
            Policy::Naive(flaws) => {
                Patience::<Holder>::attempting(&mut patience);
                let taken = naive::try_acquire(os, &cfg, flaws, &mut watch);
                if taken.is_none() && patience.busy(&Holder::Unknown, Duration::ZERO).is_some() {
                    os.sleep(spec.poll);
                    continue;
                }
                Ok(taken)
            }
            Policy::Planter | Policy::Recordless | Policy::ByName | Policy::Classic => Ok(None),
        };
        os.attempting(false);
        if let Err(e) = outcome {
            os.acquire_failed(e);
        }
        match outcome {
            Ok(Some(taken)) => break taken,
            Ok(None) => return,
            // A caller that retries after an error, while it has attempts left.
            Err(_) if patience.left > 0 => os.sleep(spec.poll),
            Err(_) => return,
        }
    };
    os.enter(ino);
    let held = soft::Held {
        file,
        id: swaplock_core::decide::FileId {
            dev: model::DEV,
            ino,
        },
    };
    for _ in 0..spec.hold_steps {
        if kind == Kind::Lease {
            if !spec.beat.is_zero() {
                os.sleep(spec.beat);
            }
            // The heartbeat: check the path, touch our own inode.
            let _ = soft::refresh(os, &cfg, &held);
        } else {
            os.idle();
        }
    }
    // Stopped: no heartbeat, in poll-sized steps so that peers run.
    for _ in 0..spec.hold_pause.as_millis() / spec.poll.as_millis().max(1) {
        os.sleep(spec.poll);
    }
    os.leave();
    // A release exchanges too: a peer leaving meanwhile may find its
    // marker held aside for the length of our check.
    os.attempting(true);
    match spec.policy {
        Policy::Ours => {
            let released = soft::release(os, &cfg, held);
            os.released(ino, released);
        }
        Policy::Naive(flaws) => naive::release(os, &cfg, flaws, held),
        Policy::Planter | Policy::Recordless | Policy::ByName | Policy::Classic => {}
    }
    os.attempting(false);
}
