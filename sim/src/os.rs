//! The one seam between the shipped protocol and the model: [`SimOs`], the
//! [`Os`](swaplock_core::soft::Os) of one simulated process. Each syscall
//! suspends to the scheduler, applies the operation to the model
//! filesystem, traces it, and records an [`Event`](crate::event::Event)
//! of what it acted on and what it returned; inputs (liveness probes,
//! clocks, tokens, claims) answer from the world at once. When the
//! scenario injects syscall faults, any call but `close` may instead fail
//! before it is applied, with an error the world's random source draws.
//! Nothing here judges: the oracle reads the events.

use crate::cast::LOCK;
use crate::event::{Call, Event, Name, Target, What};
#[cfg(doc)]
use crate::model::Faults;
use crate::model::{Node, SYSCALL_FAULTS};
use crate::world::{name, World};
use corosensei::Yielder;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use swaplock_core::decide::{FileId, FileTime, Instant, Liveness};
use swaplock_core::kernel::{KernelOs, Step};
use swaplock_core::names::Token;
use swaplock_core::soft::{self, Clock, Dir, Entropy, Handles, Processes, Stat};
use swaplock_core::start::StartToken;
use swaplock_core::{Decimal, Errno, Pid};

/// Simulated time that one syscall takes.
const STEP: u64 = 1_000_000;

/// The [`Os`](swaplock_core::soft::Os) of one simulated process: each call
/// suspends to the scheduler, then runs on the model.
pub struct SimOs<'y> {
    pub(crate) world: Rc<RefCell<World>>,
    pub(crate) me: usize,
    yielder: &'y Yielder<(), ()>,
    /// The next call only looks at a file (`fstat`, `fchmod`): recorded as
    /// [`Call::Look`] even when an injected fault answers it.
    looks: bool,
}

/// Whether a syscall's answer is a success, as an event records it.
trait Status {
    fn status(&self) -> Result<(), Errno>;
}

impl<T> Status for Result<T, Errno> {
    fn status(&self) -> Result<(), Errno> {
        self.as_ref().map(|_| ()).map_err(|e| *e)
    }
}

impl Status for () {
    fn status(&self) -> Result<(), Errno> {
        Ok(())
    }
}

impl Status for Errno {
    fn status(&self) -> Result<(), Errno> {
        Err(*self)
    }
}

/// A syscall's answer that can be a failure: what an injected fault
/// returns instead of applying the call.
trait Fallible {
    fn failed(e: Errno) -> Self;
}

impl<T> Fallible for Result<T, Errno> {
    fn failed(e: Errno) -> Self {
        Err(e)
    }
}

impl<'y> SimOs<'y> {
    pub(crate) fn new(world: Rc<RefCell<World>>, me: usize, yielder: &'y Yielder<(), ()>) -> Self {
        SimOs {
            world,
            me,
            yielder,
            looks: false,
        }
    }

    /// The ghost step of declaring that this process holds the markers it
    /// creates empty, by design.
    pub(crate) fn holds_empty(&mut self) {
        self.world.borrow_mut().record(self.me, What::HoldsEmpty);
    }

    /// One syscall: suspend until scheduled, let a step of time pass, apply
    /// `op` to the world, and record what it did.
    fn syscall<T: std::fmt::Debug + Status>(
        &mut self,
        what: std::fmt::Arguments<'_>,
        op: impl FnOnce(&mut World, usize) -> (T, Call),
    ) -> T {
        self.apply(what, None, op)
    }

    /// A syscall that may fail before it is applied, when the scenario
    /// injects syscall faults ([`Faults::syscall_one_in`]).
    fn fallible<T: std::fmt::Debug + Status + Fallible>(
        &mut self,
        what: std::fmt::Arguments<'_>,
        op: impl FnOnce(&mut World, usize) -> (T, Call),
    ) -> T {
        self.apply(what, Some(T::failed), op)
    }

    /// Suspends until scheduled, lets a step of time pass, then applies
    /// `op`, or, when `fail` is given and the world injects a fault, answers
    /// `fail(errno)` without applying anything; traces and records it.
    fn apply<T: std::fmt::Debug + Status>(
        &mut self,
        what: std::fmt::Arguments<'_>,
        fail: Option<fn(Errno) -> T>,
        op: impl FnOnce(&mut World, usize) -> (T, Call),
    ) -> T {
        self.yielder.suspend(());
        let mut w = self.world.borrow_mut();
        let me = self.me;
        w.time += STEP;
        w.fs.clock += i128::from(STEP);
        let at = w.time;
        let looks = std::mem::take(&mut self.looks);
        let injected = fail.and_then(|fail| {
            let (e, made) = w
                .planned_fault(me, what)
                .or_else(|| w.syscall_fault().map(|e| (e, false)))?;
            Some((fail(e), e, made))
        });
        // What the world saw (the events the oracle reads), and what the
        // caller is answered.
        let (result, call, status) = match injected {
            Some((result, e, false)) => {
                w.note(
                    me,
                    format_args!("{what} -> {result:?} (injected {})", fault_name(e)),
                );
                let status = result.status();
                (result, if looks { Call::Look } else { Call::Other }, status)
            }
            Some((result, e, true)) => {
                let (done, call) = op(&mut w, me);
                w.note(
                    me,
                    format_args!(
                        "{what} -> {done:?}, answered {result:?} (injected {}, the call made)",
                        fault_name(e)
                    ),
                );
                (result, call, done.status())
            }
            None => {
                let (result, call) = op(&mut w, me);
                w.note(me, format_args!("{what} -> {result:?}"));
                let status = result.status();
                (result, call, status)
            }
        };
        w.log.events.push(Event {
            who: me,
            at,
            what: What::Call(call, status),
        });
        result
    }

    /// One input from the world (no syscall: no time passes, nobody else
    /// runs).
    fn input<T: std::fmt::Debug>(
        &mut self,
        what: std::fmt::Arguments<'_>,
        op: impl FnOnce(&mut World, usize) -> T,
    ) -> T {
        let mut w = self.world.borrow_mut();
        let result = op(&mut w, self.me);
        w.note(self.me, format_args!("{what} -> {result:?}"));
        result
    }

    /// A ghost step of this process's life, recorded for the oracle.
    fn ghost(&mut self, what: What, note: std::fmt::Arguments<'_>) {
        let mut w = self.world.borrow_mut();
        w.note(self.me, note);
        w.record(self.me, what);
    }

    /// This process's PID, host name and start token.
    pub(crate) fn identity(&self) -> (Pid, &'static str, StartToken) {
        let w = self.world.borrow();
        let p = &w.procs[self.me];
        (p.pid, w.hosts[p.host], p.start)
    }

    /// The ghost step of beginning (`true`) or ending an attempt or a
    /// release.
    pub(crate) fn attempting(&mut self, on: bool) {
        self.world
            .borrow_mut()
            .record(self.me, What::Attempting(on));
    }

    /// The ghost step of entering the critical section with the marker of
    /// inode `ino`.
    pub(crate) fn enter(&mut self, ino: u64) {
        self.world.borrow_mut().acquisitions += 1;
        self.ghost(
            What::Enter(ino),
            format_args!("ENTERS the critical section with marker inode {ino}"),
        );
    }

    /// The ghost step of leaving the critical section.
    pub(crate) fn leave(&mut self) {
        self.ghost(What::Leave, format_args!("leaves the critical section"));
    }

    /// The ghost step of a release of the marker of inode `ino` that
    /// returned `result`.
    pub(crate) fn released(&mut self, ino: u64, result: Result<(), soft::Error>) {
        let error = result.err();
        match error {
            Some(e) => self.ghost(
                What::Released { ino, error },
                format_args!("release failed: {e}"),
            ),
            None => self.ghost(What::Released { ino, error }, format_args!("released")),
        }
    }

    /// The ghost step of a kernel lock's acquire that failed at `step`
    /// with `e`.
    pub(crate) fn kernel_failed(&mut self, step: Step, e: Errno) {
        self.ghost(
            What::KernelFailed(step, e),
            format_args!("kernel acquire failed at {step:?}: {e:?}"),
        );
    }

    /// The ghost step of an acquire attempt that returned `e`.
    pub(crate) fn acquire_failed(&mut self, e: soft::Error) {
        self.ghost(What::AcquireFailed(e), format_args!("acquire failed: {e}"));
    }

    /// A step that does nothing but let others run (time in the critical
    /// section).
    pub(crate) fn idle(&mut self) {
        self.syscall(format_args!("works"), |_, _| ((), Call::Other));
    }

    /// `flock(fd, LOCK_EX)` on a filesystem without it: `ENOSYS`.
    pub(crate) fn flock(&mut self, f: &u32) -> Errno {
        self.syscall(format_args!("flock fd {f}"), |_, _| {
            (Errno::NOSYS, Call::Other)
        })
    }

    /// `link(from, to)`, following a symlink at `from` when `follow`.
    pub fn link(&mut self, from: &[u8], to: &[u8], follow: bool) -> Result<(), Errno> {
        self.syscall(
            format_args!("link {} {} (follow: {follow})", name(from), name(to)),
            |w, _| (w.fs.link(from, to, follow), Call::Other),
        )
    }

    /// `symlink(target, at)`.
    pub fn symlink(&mut self, target: &[u8], at: &[u8]) -> Result<(), Errno> {
        self.syscall(
            format_args!("symlink {} -> {}", name(at), name(target)),
            |w, _| {
                let made = w.fs.link_new(at, Node::Symlink(target.to_vec()));
                (made.map(|_| ()), Call::Other)
            },
        )
    }
}

/// How a trace names an injected fault.
fn fault_name(e: Errno) -> &'static str {
    SYSCALL_FAULTS
        .iter()
        .find(|f| f.0 == e)
        .map_or("fault", |f| f.1)
}

impl World {
    /// Draws whether the syscall about to run fails, and with which error
    /// ([`Faults::syscall_one_in`], [`SYSCALL_FAULTS`]), from the world's
    /// random source: a seed replays the same faults.
    fn syscall_fault(&mut self) -> Option<Errno> {
        let one_in = self.fs.faults.syscall_one_in;
        if one_in == 0 {
            return None;
        }
        let draw = self.next_random();
        // Reduced as a u64: a schedule must draw the same fault on every
        // target, and a 32-bit `usize` would cut the draw first.
        let pick = ((draw / one_in) % SYSCALL_FAULTS.len() as u64) as usize;
        draw.is_multiple_of(one_in)
            .then_some(SYSCALL_FAULTS[pick].0)
    }

    /// Whether the syscall `what` that process `who` is about to make is
    /// one the scenario plans to fail ([`Faults::planned`]), with which
    /// error and whether it is made all the same; counts it among the
    /// calls each plan watches.
    fn planned_fault(
        &mut self,
        who: usize,
        what: std::fmt::Arguments<'_>,
    ) -> Option<(Errno, bool)> {
        let planned = self.fs.faults.planned;
        if planned.is_empty() {
            return None;
        }
        if self.planned_calls.len() < planned.len() {
            self.planned_calls.resize(planned.len(), 0);
        }
        let line = std::fmt::format(what);
        let mut fault = None;
        for (i, plan) in planned.iter().enumerate() {
            if plan.who == who && line.starts_with(plan.call) {
                self.planned_calls[i] += 1;
                if self.planned_calls[i] == plan.nth {
                    fault = fault.or(Some((plan.errno, plan.made)));
                }
            }
        }
        fault
    }

    /// The file `n` links, as an operation on it would find it.
    fn target(&self, n: &[u8]) -> Option<Target> {
        let ino = self.fs.ino(n)?;
        let mtime = self.fs.inodes.get(&ino)?.mtime;
        Some(Target { ino, mtime })
    }

    /// The name linking the file that descriptor `fd` holds, and that file.
    fn handle_target(&mut self, fd: u32) -> Option<(Name, Target)> {
        let ino = self.fs.descs.get(&fd)?.ino;
        let (n, _) = self.fs.names.iter().find(|(_, &i)| i == ino)?;
        let target = self.target(n)?;
        Some((self.log.name(n), target))
    }

    /// The inode descriptor `fd` holds.
    fn fd_ino(&self, fd: u32) -> Option<u64> {
        self.fs.descs.get(&fd).map(|d| d.ino)
    }
}

/// Directory entries, traced as text.
struct Names(Vec<Vec<u8>>);

impl std::fmt::Debug for Names {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|n| name(n)))
            .finish()
    }
}

impl Dir for SimOs<'_> {
    type File = u32;

    fn create_new(&mut self, n: &[u8], _mode: u32, _truncate: bool) -> Result<u32, Errno> {
        self.fallible(format_args!("create {}", name(n)), |w, me| {
            let fd = w.fs.create_new(n);
            if let Ok(fd) = fd {
                w.procs[me].fds.insert(fd);
            }
            let ino = fd.as_ref().ok().and_then(|&fd| w.fd_ino(fd));
            let call = Call::Create {
                name: w.log.name(n),
                ino,
                generation: ino.map(|i| w.fs.inodes[&i].generation),
            };
            (fd, call)
        })
    }
    fn create_unnamed(&mut self, _mode: u32) -> Result<u32, Errno> {
        if !self.world.borrow().fs.faults.unnamed {
            // A platform without unnamed files: the adapter answers at
            // once, making no syscall (as on macOS).
            return Err(Errno::OPNOTSUPP);
        }
        self.fallible(format_args!("create unnamed"), |w, me| {
            let fd = w.fs.create_unnamed();
            if let Ok(fd) = fd {
                w.procs[me].fds.insert(fd);
            }
            let ino = fd.as_ref().ok().and_then(|&fd| w.fd_ino(fd));
            (fd, Call::CreateUnnamed { ino })
        })
    }
    fn link_unnamed(&mut self, f: &u32, n: &[u8]) -> Result<(), Errno> {
        self.fallible(format_args!("link fd {f} as {}", name(n)), |w, _| {
            let call = Call::Link {
                name: w.log.name(n),
            };
            (w.fs.link_fd(*f, n), call)
        })
    }
    fn sync_file(&mut self, f: &u32) -> Result<(), Errno> {
        if !self.world.borrow().fs.faults.power {
            // Not a step where power is never lost: nothing is lost but by
            // a kill there, so a sync changes nothing another process could
            // see, and the kept schedules stay step for step as they were.
            return Ok(());
        }
        self.fallible(format_args!("fsync fd {f}"), |w, _| {
            let ino = w.fd_ino(*f);
            (w.fs.sync(*f), Call::Sync { ino })
        })
    }
    fn open_read(&mut self, n: &[u8]) -> Result<u32, Errno> {
        self.fallible(format_args!("open_read {}", name(n)), |w, me| {
            let fd = w.fs.open_read(n);
            if let Ok(fd) = fd {
                w.procs[me].fds.insert(fd);
            }
            (fd, Call::Other)
        })
    }
    fn pin(&mut self, n: &[u8]) -> Result<u32, Errno> {
        self.fallible(format_args!("pin {}", name(n)), |w, me| {
            let fd = w.fs.pin(n);
            if let Ok(fd) = fd {
                w.procs[me].fds.insert(fd);
            }
            (fd, Call::Other)
        })
    }
    fn write(&mut self, f: &u32, buf: &[u8]) -> Result<usize, Errno> {
        self.fallible(format_args!("write fd {f} {:?}", name(buf)), |w, _| {
            let ino = w.fd_ino(*f);
            (w.fs.write(*f, buf), Call::Write { ino })
        })
    }
    fn write_at(&mut self, f: &u32, buf: &[u8], off: u64) -> Result<usize, Errno> {
        self.fallible(
            format_args!("pwrite fd {f} {:?} at {off}", name(buf)),
            |w, _| (w.fs.write_at(*f, buf, off as usize), Call::Other),
        )
    }
    fn truncate(&mut self, f: &u32, len: u64) -> Result<(), Errno> {
        self.fallible(format_args!("ftruncate fd {f} {len}"), |w, _| {
            (w.fs.truncate(*f, len as usize), Call::Other)
        })
    }
    fn chmod(&mut self, f: &u32, _mode: u32) -> Result<(), Errno> {
        self.looks = true;
        self.fallible(format_args!("fchmod fd {f}"), |w, _| {
            (w.fs.fstat(*f).map(|_| ()), Call::Look)
        })
    }
    fn touch(&mut self, f: &u32) -> Result<(), Errno> {
        self.fallible(format_args!("futimens fd {f}"), |w, _| {
            let ino = w.fd_ino(*f);
            (w.fs.touch(*f), Call::Touch { ino })
        })
    }
    fn read(&mut self, f: &u32, buf: &mut [u8]) -> Result<usize, Errno> {
        self.fallible(format_args!("read fd {f}"), |w, _| {
            (w.fs.read(*f, buf), Call::Other)
        })
    }
    fn fstat(&mut self, f: &u32) -> Result<Stat, Errno> {
        self.looks = true;
        self.fallible(format_args!("fstat fd {f}"), |w, _| {
            (w.fs.fstat(*f), Call::Look)
        })
    }
    fn close(&mut self, f: u32) {
        self.syscall(format_args!("close fd {f}"), |w, me| {
            w.procs[me].fds.remove(&f);
            w.fs.close(f);
            ((), Call::Close)
        })
    }
    fn lstat(&mut self, n: &[u8]) -> Result<Stat, Errno> {
        self.fallible(format_args!("lstat {}", name(n)), |w, _| {
            let call = Call::Lstat {
                name: w.log.name(n),
            };
            (w.fs.lstat(n), call)
        })
    }
    fn exchange(&mut self, a: &[u8], b: &[u8]) -> Result<(), Errno> {
        self.fallible(format_args!("exchange {} {}", name(a), name(b)), |w, _| {
            let call = Call::Exchange {
                a: w.log.name(a),
                a_file: w.target(a),
                b: w.log.name(b),
                b_file: w.target(b),
            };
            (w.fs.exchange(a, b), call)
        })
    }
    fn exclusive_rename(&mut self) -> swaplock_core::fs::ExclusiveRename {
        // What the filesystem is, as the adapter judges it: not a step.
        match self.world.borrow().fs.faults.exclusive_rename {
            true => swaplock_core::fs::ExclusiveRename::Journaled,
            false => swaplock_core::fs::ExclusiveRename::Untrusted,
        }
    }
    fn rename_noreplace(&mut self, from: &[u8], to: &[u8]) -> Result<(), Errno> {
        self.fallible(
            format_args!("rename_noreplace {} {}", name(from), name(to)),
            |w, _| {
                let call = Call::Rename {
                    from: w.log.name(from),
                    moved: w.target(from),
                };
                (w.fs.rename_noreplace(from, to), call)
            },
        )
    }
    fn rename(&mut self, from: &[u8], to: &[u8]) -> Result<(), Errno> {
        self.fallible(
            format_args!("rename {} {}", name(from), name(to)),
            |w, _| {
                let call = Call::Rename {
                    from: w.log.name(from),
                    moved: w.target(from),
                };
                (w.fs.rename(from, to), call)
            },
        )
    }
    fn unlink(&mut self, n: &[u8]) -> Result<(), Errno> {
        self.fallible(format_args!("unlink {}", name(n)), |w, _| {
            let call = Call::Unlink {
                name: w.log.name(n),
                removed: w.target(n),
            };
            (w.fs.unlink(n), call)
        })
    }
    fn list(&mut self, visit: &mut dyn FnMut(&[u8])) -> Result<(), Errno> {
        let names = self.fallible(format_args!("list"), |w, _| {
            (Ok(Names(w.fs.names.keys().cloned().collect())), Call::Other)
        })?;
        for n in &names.0 {
            visit(n);
        }
        Ok(())
    }
    fn handles(&mut self) -> Option<&mut dyn Handles<u32>> {
        if self.world.borrow().fs.windows {
            Some(self)
        } else {
            None
        }
    }
}

impl Processes for SimOs<'_> {
    fn probe(&mut self, pid: Pid) -> Liveness {
        self.input(format_args!("probe {pid}"), |w, me| {
            let host = w.procs[me].host;
            if w.procs
                .iter()
                .any(|p| p.alive && p.pid == pid && p.host == host)
            {
                Liveness::Alive
            } else {
                Liveness::Dead
            }
        })
    }
    fn start_token(&mut self, pid: Pid) -> Option<StartToken> {
        self.input(format_args!("start token of {pid}"), |w, me| {
            let host = w.procs[me].host;
            w.procs
                .iter()
                .find(|p| p.alive && p.pid == pid && p.host == host)
                .map(|p| p.start)
        })
    }
    fn runs_elsewhere(&mut self, _pid: Pid, _start: Decimal<'_>) -> bool {
        false
    }
    fn begin_claim(&mut self, n: &[u8]) -> bool {
        let me = self.me;
        self.world.borrow_mut().procs[me].claims.insert(n.to_vec())
    }
    fn end_claim(&mut self, n: &[u8]) {
        let me = self.me;
        self.world.borrow_mut().procs[me].claims.remove(n);
    }
}

/// The lock file [`LOCK`] as a kernel lock sees it
/// ([`KernelOs`]), each call a syscall of this process. The model's lock
/// call never waits: a process waits by trying again (the driver's timed
/// wait). With `nosys`, the filesystem has no lock call (`flock`
/// answering `ENOSYS`: some FUSE filesystems, Android storage).
pub(crate) struct KernelFile<'a, 'y> {
    pub(crate) os: &'a mut SimOs<'y>,
    pub(crate) nosys: bool,
}

impl KernelOs for KernelFile<'_, '_> {
    type File = u32;

    fn open(&mut self, exclusive: bool) -> Result<u32, Errno> {
        self.os.fallible(
            format_args!("open {} O_RDWR|O_CREAT (O_EXCL: {exclusive})", name(LOCK)),
            |w, me| {
                let opened = match exclusive {
                    true => w.fs.create_new(LOCK).map(|fd| (fd, true)),
                    false => w.fs.open_or_create(LOCK),
                };
                let call = match opened {
                    // An empty file at the lock path, like a recordless
                    // holder's: the oracle follows it as one.
                    Ok((fd, true)) => {
                        let ino = w.fd_ino(fd);
                        Call::Create {
                            name: w.log.name(LOCK),
                            ino,
                            generation: ino.map(|i| w.fs.inodes[&i].generation),
                        }
                    }
                    _ => Call::Other,
                };
                if let Ok((fd, _)) = opened {
                    w.procs[me].fds.insert(fd);
                }
                (opened.map(|(fd, _)| fd), call)
            },
        )
    }
    fn open_existing(&mut self) -> Result<u32, Errno> {
        self.os
            .fallible(format_args!("open {} O_RDWR", name(LOCK)), |w, me| {
                let fd = w.fs.open_read(LOCK);
                if let Ok(fd) = fd {
                    w.procs[me].fds.insert(fd);
                }
                (fd, Call::Other)
            })
    }
    fn lock(&mut self, f: &u32, _wait: bool) -> Result<(), Errno> {
        if self.nosys {
            return Err(self.os.flock(f));
        }
        self.os.fallible(format_args!("lock fd {f}"), |w, _| {
            let one_in = w.fs.faults.interrupted_locks;
            let locked = match one_in > 0 && w.next_random().is_multiple_of(one_in) {
                true => Err(Errno::INTR),
                false => w.fs.lock(*f),
            };
            (locked, Call::Other)
        })
    }
    fn fstat(&mut self, f: &u32) -> Result<FileId, Errno> {
        Dir::fstat(self.os, f).map(|st| st.id)
    }
    fn stat(&mut self) -> Result<FileId, Errno> {
        self.os.lstat(LOCK).map(|st| st.id)
    }
    fn close(&mut self, f: u32) {
        Dir::close(self.os, f)
    }
}

impl Clock for KernelFile<'_, '_> {
    fn now(&mut self) -> Instant {
        self.os.now()
    }
    fn wall(&mut self) -> FileTime {
        self.os.wall()
    }
    fn sleep(&mut self, d: Duration) {
        self.os.sleep(d)
    }
}

impl Clock for SimOs<'_> {
    fn now(&mut self) -> Instant {
        Instant(self.world.borrow().time)
    }
    fn wall(&mut self) -> FileTime {
        let w = self.world.borrow();
        let t = w.fs.clock + w.wall_offsets[w.procs[self.me].host];
        FileTime {
            sec: t.div_euclid(1_000_000_000) as i64,
            nsec: t.rem_euclid(1_000_000_000) as u32,
        }
    }
    fn sleep(&mut self, d: Duration) {
        // Time passes for everyone while this process sleeps.
        self.syscall(format_args!("sleeps {d:?}"), |w, _| {
            w.time += d.as_nanos() as u64;
            w.fs.clock += d.as_nanos() as i128;
            ((), Call::Other)
        })
    }
}

impl Entropy for SimOs<'_> {
    fn token(&mut self) -> Token {
        let mut w = self.world.borrow_mut();
        let (a, b) = (w.next_random(), w.next_random());
        let mut t = [0u8; 16];
        t[..8].copy_from_slice(&a.to_le_bytes());
        t[8..].copy_from_slice(&b.to_le_bytes());
        Token(t)
    }
}

impl Handles<u32> for SimOs<'_> {
    fn open_to_move(&mut self, n: &[u8]) -> Result<u32, Errno> {
        self.fallible(format_args!("open to move {}", name(n)), |w, me| {
            let fd = w.fs.open_to_move(n);
            if let Ok(fd) = fd {
                w.procs[me].fds.insert(fd);
            }
            (fd, Call::Other)
        })
    }
    fn rename_file(&mut self, f: &u32, to: &[u8]) -> Result<(), Errno> {
        self.fallible(format_args!("rename fd {f} to {}", name(to)), |w, _| {
            let call = Call::RenameFile {
                moved: w.handle_target(*f),
            };
            (w.fs.rename_file(*f, to), call)
        })
    }
    fn remove_file(&mut self, f: &u32) -> Result<(), Errno> {
        self.fallible(format_args!("delete fd {f}"), |w, _| {
            let call = Call::RemoveFile {
                removed: w.handle_target(*f),
            };
            (w.fs.remove_file(*f), call)
        })
    }
}
