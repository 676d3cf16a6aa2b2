//! A deterministic simulator of the soft-lock protocol.
//!
//! Several processes, on one or two hosts, run the real protocol code of
//! `swaplock-core` (its [`acquire`](swaplock_core::soft::acquire) driver
//! and [`release`](swaplock_core::soft::release)) over a model filesystem
//! ([`model::Fs`]) through the same [`Os`](swaplock_core::soft::Os) traits the Linux adapter
//! implements. Each process runs on its own coroutine and suspends before
//! every syscall, so a scheduler decides which process's next syscall runs,
//! and may kill any process between any two of its syscalls. Everything is
//! a function of the schedule: a seed (or a fuzzer's bytes) replays exactly.
//!
//! After every step the simulator checks that at most one live process
//! believes it holds the lock, and that no live holder's marker has been
//! removed; when a process enters its critical section, the lock path must
//! name its marker.

pub mod model;
pub mod naive;
mod scenario;
mod schedule;

pub use scenario::{
    contenders, enosys_fallback_race, scenarios, windows_symlink_race, Policy, Process, Scenario,
    FALLBACK_STALL, LOCK, VICTIM,
};
pub use schedule::{
    explore, explore_free, run, run_seed, Action, Chooser, Explorer, FromBytes, Random,
};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use model::{Fs, Node};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::rc::Rc;
use std::time::Duration;
use swaplock_core::decide::{FileTime, Instant, Liveness};
use swaplock_core::names::Token;
use swaplock_core::soft::{
    self, Attempt, Clock, Config, Contender, Dir, Entropy, Handles, Holder, Kind, Processes, Stat,
};
use swaplock_core::start::StartToken;
use swaplock_core::wait::Patience;
use swaplock_core::{Decimal, Errno, Pid};

/// One process's state in the world.
#[derive(Clone, Debug)]
struct Proc {
    pid: Pid,
    host: usize,
    alive: bool,
    start: StartToken,
    fds: BTreeSet<u32>,
    claims: BTreeSet<Vec<u8>>,
    holds: Option<u64>,
    /// In an attempt or a release.
    in_attempt: bool,
    compromised: bool,
    /// Inodes this process created (its markers).
    own: BTreeSet<u64>,
    finished: bool,
    /// When its last syscall ran.
    last_step: u64,
}

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

/// Everything the processes share.
pub struct World {
    /// The filesystem.
    pub fs: Fs,
    hosts: Vec<&'static str>,
    wall_offsets: Vec<i128>,
    procs: Vec<Proc>,
    /// Start tokens handed out so far.
    tokens: u64,
    /// Monotonic time, nanoseconds.
    time: u64,
    rng: u64,
    trace: String,
    tracing: bool,
    /// The lifetime, when markers are broken by age: a lifetime break
    /// overlaps live holders by design, so only `guard_holders` applies.
    lifetime: Option<Duration>,
    /// The lease duration, for leases: a holder whose marker went
    /// unrefreshed that long may lose it, and is compromised, not wronged.
    lease: Option<Duration>,
    /// When each marker was last created, written, touched or exchanged in
    /// while at the lock path: a lease is refreshed only there (a heartbeat
    /// that lands on a marker a peer already took aside refreshes nothing).
    refreshed: std::collections::BTreeMap<u64, i128>,
    /// The first violation seen.
    pub violation: Option<String>,
    /// Steps run.
    pub steps: u64,
    /// How many times a process entered its critical section.
    pub acquisitions: u64,
    /// How many holders left with their marker displaced (see `leave`).
    pub displacements: u64,
    /// The first process whose release placeholder stayed at the lock path
    /// longer than the malformed grace period. Soft locks assume a release
    /// finishes well within it: a peer may then evict the placeholder (it
    /// reads as malformed) and publish its own marker, which the paused
    /// releaser's by-name unlink would remove, as no POSIX call unlinks a
    /// name only if it still links a given inode. With a lifetime, the same
    /// holds once the placeholder is older than the lifetime by its mtime
    /// (it is written before it is exchanged in): a lifetime break takes
    /// any marker that old. From then on the run is outside the protocol's
    /// timing assumption and is not judged.
    pub overslept: Option<usize>,
    /// Which inode is at the lock path, and since when.
    at_lock: (Option<u64>, u64),
    /// Whether a process went without a step for [`BREAKER_PATIENCE`] in
    /// the middle of an attempt or a release.
    paused: bool,
    /// The [`VICTIM`] file's inode, when the scenario has one.
    victim: Option<u64>,
}

/// How long a breaker waits for a nested breaker to undo its exchange
/// before giving up its exchange-back (invariant I16): a process paused
/// that long mid-break may leave a holder's marker displaced.
const BREAKER_PATIENCE: Duration = Duration::from_secs(2);

/// Simulated time that one syscall takes.
const STEP: u64 = 1_000_000;

impl World {
    fn next_random(&mut self) -> u64 {
        // splitmix64
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn new_token(&mut self) -> StartToken {
        self.tokens += 1;
        StartToken::linux(0x5eed, self.tokens)
    }

    fn note(&mut self, who: usize, what: std::fmt::Arguments<'_>) {
        if self.tracing {
            let p = &self.procs[who];
            let _ = writeln!(
                self.trace,
                "t={:>6}ms p{who} (pid {}@{}): {what}",
                self.time / 1_000_000,
                p.pid,
                self.hosts[p.host]
            );
        }
    }

    fn fail(&mut self, what: String) {
        // Outside the protocol's timing assumption, nothing is promised.
        if self.violation.is_none() && self.overslept.is_none() {
            self.violation = Some(what);
        }
    }

    /// No process removes a live holder's marker: it never unlinks it
    /// (under any name) or renames it off the lock path, unless a lifetime
    /// is set and the marker is older than it (a lifetime break overlaps a
    /// live holder by design, but never takes a fresh marker).
    fn guard_holders(&mut self, me: usize, n: &[u8], verb: &str, renaming: bool) {
        if renaming && n != LOCK {
            return;
        }
        let Some(ino) = self.fs.ino(n) else { return };
        let holder = (0..self.procs.len())
            .find(|&i| i != me && self.procs[i].alive && self.procs[i].holds == Some(ino));
        let Some(h) = holder else { return };
        if let Some(lifetime) = self.lifetime {
            let mtime = self.fs.inodes[&ino].mtime.as_nanos();
            if self.fs.clock - mtime >= lifetime.as_nanos() as i128 {
                return;
            }
        }
        if self.lease_lapsed(ino) {
            self.compromise(h, "lease expired");
            return;
        }
        self.fail(format!(
            "p{me} {verb} {} (inode {ino}), the marker of live holder p{h}",
            name(n)
        ));
    }

    /// [`World::guard_holders`] for an act through handle `fd`, on the name
    /// that links its file.
    fn guard_handle(&mut self, me: usize, fd: u32, verb: &str, renaming: bool) {
        let Some(ino) = self.fs.descs.get(&fd).map(|d| d.ino) else {
            return;
        };
        let linked = self.fs.names.iter().find(|(_, &i)| i == ino);
        if let Some(n) = linked.map(|(n, _)| n.clone()) {
            self.guard_holders(me, &n, verb, renaming);
        }
    }

    /// Whether the lease on marker `ino` went unrefreshed by its holder for
    /// the whole lease duration (never, outside lease scenarios).
    fn lease_lapsed(&self, ino: u64) -> bool {
        let Some(lease) = self.lease else {
            return false;
        };
        let refreshed = self.refreshed.get(&ino).copied().unwrap_or(i128::MIN / 2);
        self.fs.clock - refreshed >= lease.as_nanos() as i128
    }

    /// Holder `h` has lost its lease: it no longer counts as a holder, and
    /// its heartbeat, once it runs, reports the compromise.
    fn compromise(&mut self, h: usize, why: &str) {
        self.procs[h].holds = None;
        self.procs[h].compromised = true;
        self.note(h, format_args!("{why}: compromised"));
    }

    /// Notes that process `me` refreshed the marker now at the lock path,
    /// if that marker is its own: only its holder refreshes a lease (a peer's
    /// exchange-back returning it to the path is no refresh).
    fn refresh_at_lock(&mut self, me: usize) {
        if let Some(ino) = self.fs.ino(LOCK) {
            if self.procs[me].own.contains(&ino) {
                let now = self.fs.clock;
                self.refreshed.insert(ino, now);
            }
        }
    }

    /// Notes a write or touch of `fd`'s file by `me`: a refresh if it is
    /// at the lock path.
    fn refresh_fd(&mut self, me: usize, fd: u32) {
        if let (Some(at), Ok(st)) = (self.fs.ino(LOCK), self.fs.fstat(fd)) {
            if at == st.id.ino {
                self.refresh_at_lock(me);
            }
        }
    }

    /// Checks the invariants that must hold after every step.
    fn check(&mut self) {
        if let Some(ino) = self.victim {
            // No process acts on a file it did not judge: the victim, which
            // no contender ever judged, keeps its single name.
            let names: Vec<String> = self
                .fs
                .names
                .iter()
                .filter(|(_, &i)| i == ino)
                .map(|(n, _)| name(n))
                .collect();
            if names.len() != 1 {
                self.fail(format!(
                    "the victim file (inode {ino}), which no contender judged, is linked as {names:?}"
                ));
            }
        }
        let here = self.fs.ino(LOCK);
        if here != self.at_lock.0 {
            self.at_lock = (here, self.time);
        }
        if let Some(ino) = here.filter(|_| self.overslept.is_none()) {
            let placeholder = self
                .fs
                .content(LOCK)
                .is_some_and(|c| c.starts_with(b"filelock/break\n"));
            let grace = swaplock_core::decide::MALFORMED_GRACE.as_nanos() as u64;
            let owner = (0..self.procs.len())
                .find(|&i| self.procs[i].alive && self.procs[i].own.contains(&ino));
            let lifetime_passed = self.lifetime.is_some_and(|l| {
                let mtime = self.fs.inodes[&ino].mtime.as_nanos();
                self.fs.clock - mtime >= l.as_nanos() as i128
            });
            if let (true, Some(owner)) = (placeholder, owner) {
                if self.time - self.at_lock.1 >= grace || lifetime_passed {
                    self.overslept = Some(owner);
                    self.note(owner, format_args!("OVERSLEPT: its placeholder stayed at the lock path past the grace period or the lifetime"));
                }
            }
        }
        if self.lifetime.is_some() {
            return;
        }
        for h in 0..self.procs.len() {
            let Some(ino) = self.procs[h].holds.filter(|_| self.procs[h].alive) else {
                continue;
            };
            if self.lease_lapsed(ino) {
                self.compromise(h, "lease expired unrefreshed");
                continue;
            }
            if self.fs.inodes.get(&ino).is_none_or(|i| i.nlink == 0) {
                if self.lease.is_some() {
                    // A lease holder that paused past its lease (here, between
                    // its takeover and its first heartbeat) has lost it to a
                    // peer.
                    self.compromise(h, "lease lost while paused");
                } else {
                    self.fail(format!(
                        "p{h} holds the lock but its marker (inode {ino}) was removed"
                    ));
                }
            }
        }
        let holders: Vec<usize> = (0..self.procs.len())
            .filter(|&i| self.procs[i].alive && self.procs[i].holds.is_some())
            .collect();
        if holders.len() > 1 {
            self.fail(format!(
                "mutual exclusion: processes {holders:?} all hold the lock"
            ));
        }
    }
}

/// The [`Os`](swaplock_core::soft::Os) of one simulated process: each call suspends to the
/// scheduler, then runs on the model.
pub struct SimOs<'y> {
    world: Rc<RefCell<World>>,
    me: usize,
    yielder: &'y Yielder<(), ()>,
}

impl SimOs<'_> {
    fn syscall<T: std::fmt::Debug>(
        &mut self,
        what: std::fmt::Arguments<'_>,
        op: impl FnOnce(&mut World, usize) -> T,
    ) -> T {
        self.yielder.suspend(());
        let mut w = self.world.borrow_mut();
        let me = self.me;
        w.time += STEP;
        w.fs.clock += i128::from(STEP);
        let pause = w.time - w.procs[me].last_step;
        if w.procs[me].in_attempt && pause >= BREAKER_PATIENCE.as_nanos() as u64 && !w.paused {
            w.paused = true;
            w.note(
                me,
                format_args!(
                    "PAUSED for {:?} in an attempt or a release",
                    Duration::from_nanos(pause)
                ),
            );
        }
        w.procs[me].last_step = w.time;
        let result = op(&mut w, me);
        w.note(me, format_args!("{what} -> {result:?}"));
        result
    }

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

    /// The ghost step of entering the critical section: nobody else may
    /// hold the lock.
    fn enter(&mut self, ino: u64) {
        let mut w = self.world.borrow_mut();
        let me = self.me;
        w.procs[me].holds = Some(ino);
        w.acquisitions += 1;
        w.note(
            me,
            format_args!("ENTERS the critical section with marker inode {ino}"),
        );
        w.check();
    }

    /// The ghost step of leaving the critical section. The lock path
    /// should name our marker; where it does not, and no live peer is in the
    /// middle of an attempt or a release (whose exchange may hold our marker
    /// aside for the length of its check), the marker was left displaced. The
    /// protocol allows that only once a breaker was killed mid-break: the
    /// holder's marker then waits under a break name for the next
    /// contender's recovery, and a breaker may give up its exchange-back
    /// after 2 s while a killed or paused one blocks a ring (invariant
    /// I16). Such a displacement is counted and traced; mutual exclusion
    /// holds throughout, and `check` enforces it. A displacement in a run
    /// where nobody was killed, or paused that long mid-attempt, is a
    /// violation.
    fn leave(&mut self) {
        let mut w = self.world.borrow_mut();
        let me = self.me;
        let ours = w.procs[me].holds;
        let at_path = w.fs.ino(LOCK);
        let peer_busy = w
            .procs
            .iter()
            .enumerate()
            .any(|(i, p)| i != me && p.alive && p.in_attempt);
        if at_path != ours && !peer_busy && w.lifetime.is_none() && !w.procs[me].compromised {
            if w.procs.iter().all(|p| p.alive) && !w.paused {
                w.fail(format!(
                    "p{me} leaves with its marker {ours:?} off the lock path ({at_path:?} is there), though nobody was killed or paused"
                ));
            }
            w.displacements += 1;
            w.note(
                me,
                format_args!(
                    "DISPLACED: the lock path names inode {at_path:?}, not our marker {ours:?}"
                ),
            );
        }
        w.procs[me].holds = None;
        w.note(me, format_args!("leaves the critical section"));
    }

    /// A step that does nothing but let others run (time in the critical
    /// section).
    fn idle(&mut self) {
        self.syscall(format_args!("works"), |_, _| ());
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

fn name(n: &[u8]) -> String {
    String::from_utf8_lossy(n).into_owned()
}

impl Dir for SimOs<'_> {
    type File = u32;

    fn create_new(&mut self, n: &[u8], _mode: u32, _truncate: bool) -> Result<u32, Errno> {
        self.syscall(format_args!("create {}", name(n)), |w, me| {
            let fd = w.fs.create_new(n)?;
            w.procs[me].fds.insert(fd);
            if let Some(ino) = w.fs.ino(n) {
                w.procs[me].own.insert(ino);
            }
            if n == LOCK {
                w.refresh_at_lock(me);
            }
            Ok(fd)
        })
    }
    fn open_read(&mut self, n: &[u8]) -> Result<u32, Errno> {
        self.syscall(format_args!("open_read {}", name(n)), |w, me| {
            let fd = w.fs.open_read(n)?;
            w.procs[me].fds.insert(fd);
            Ok(fd)
        })
    }
    fn pin(&mut self, n: &[u8]) -> Result<u32, Errno> {
        self.syscall(format_args!("pin {}", name(n)), |w, me| {
            let fd = w.fs.pin(n)?;
            w.procs[me].fds.insert(fd);
            Ok(fd)
        })
    }
    fn write(&mut self, f: &u32, buf: &[u8]) -> Result<usize, Errno> {
        self.syscall(format_args!("write fd {f} {:?}", name(buf)), |w, me| {
            let result = w.fs.write(*f, buf);
            w.refresh_fd(me, *f);
            result
        })
    }
    fn write_at(&mut self, f: &u32, buf: &[u8], off: u64) -> Result<usize, Errno> {
        self.syscall(
            format_args!("pwrite fd {f} {:?} at {off}", name(buf)),
            |w, _| w.fs.write_at(*f, buf, off as usize),
        )
    }
    fn truncate(&mut self, f: &u32, len: u64) -> Result<(), Errno> {
        self.syscall(format_args!("ftruncate fd {f} {len}"), |w, _| {
            w.fs.truncate(*f, len as usize)
        })
    }
    fn chmod(&mut self, f: &u32, _mode: u32) -> Result<(), Errno> {
        self.syscall(format_args!("fchmod fd {f}"), |w, _| {
            w.fs.fstat(*f).map(|_| ())
        })
    }
    fn touch(&mut self, f: &u32) -> Result<(), Errno> {
        self.syscall(format_args!("futimens fd {f}"), |w, me| {
            let result = w.fs.touch(*f);
            w.refresh_fd(me, *f);
            result
        })
    }
    fn read(&mut self, f: &u32, buf: &mut [u8]) -> Result<usize, Errno> {
        self.syscall(format_args!("read fd {f}"), |w, _| w.fs.read(*f, buf))
    }
    fn fstat(&mut self, f: &u32) -> Result<Stat, Errno> {
        self.syscall(format_args!("fstat fd {f}"), |w, _| w.fs.fstat(*f))
    }
    fn close(&mut self, f: u32) {
        self.syscall(format_args!("close fd {f}"), |w, me| {
            w.procs[me].fds.remove(&f);
            w.fs.close(f)
        })
    }
    fn lstat(&mut self, n: &[u8]) -> Result<Stat, Errno> {
        self.syscall(format_args!("lstat {}", name(n)), |w, _| w.fs.lstat(n))
    }
    fn exchange(&mut self, a: &[u8], b: &[u8]) -> Result<(), Errno> {
        self.syscall(format_args!("exchange {} {}", name(a), name(b)), |w, me| {
            let result = w.fs.exchange(a, b);
            if result.is_ok() && (a == LOCK || b == LOCK) {
                // Our marker exchanged into the lock path starts its lease.
                w.refresh_at_lock(me);
            }
            result
        })
    }
    fn rename(&mut self, from: &[u8], to: &[u8]) -> Result<(), Errno> {
        self.syscall(
            format_args!("rename {} {}", name(from), name(to)),
            |w, me| {
                // Under Windows rules a held marker refuses the rename.
                if w.fs.ino(from).is_some_and(|i| w.fs.deletable(i).is_ok()) {
                    w.guard_holders(me, from, "renames", true);
                }
                w.fs.rename(from, to)
            },
        )
    }
    fn unlink(&mut self, n: &[u8]) -> Result<(), Errno> {
        self.syscall(format_args!("unlink {}", name(n)), |w, me| {
            if w.fs.ino(n).is_some_and(|i| w.fs.deletable(i).is_ok()) {
                w.guard_holders(me, n, "unlinks", false);
            }
            w.fs.unlink(n)
        })
    }
    fn list(&mut self, visit: &mut dyn FnMut(&[u8])) -> Result<(), Errno> {
        let names = self.syscall(format_args!("list"), |w, _| {
            Names(w.fs.names.keys().cloned().collect())
        });
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
    fn rename_file(&mut self, f: &u32, to: &[u8]) -> Result<(), Errno> {
        self.syscall(format_args!("rename fd {f} to {}", name(to)), |w, me| {
            w.guard_handle(me, *f, "renames", true);
            w.fs.rename_file(*f, to)
        })
    }
    fn remove_file(&mut self, f: &u32) -> Result<(), Errno> {
        self.syscall(format_args!("delete fd {f}"), |w, me| {
            w.guard_handle(me, *f, "deletes", false);
            w.fs.remove_file(*f)
        })
    }
}

impl SimOs<'_> {
    /// `link(from, to)`, following a symlink at `from` when `follow`.
    pub fn link(&mut self, from: &[u8], to: &[u8], follow: bool) -> Result<(), Errno> {
        self.syscall(
            format_args!("link {} {} (follow: {follow})", name(from), name(to)),
            |w, _| w.fs.link(from, to, follow),
        )
    }

    /// `symlink(target, at)`.
    pub fn symlink(&mut self, target: &[u8], at: &[u8]) -> Result<(), Errno> {
        self.syscall(
            format_args!("symlink {} -> {}", name(at), name(target)),
            |w, _| {
                w.fs.link_new(at, Node::Symlink(target.to_vec()))
                    .map(|_| ())
            },
        )
    }
}

/// The `flock` attempt on a filesystem without `flock`, and the removal of
/// the file it created before the switch to a soft lock: ours removes it
/// while it is open (`remove_own_file`), so a peer's marker found at the
/// path stays; the naive way closes it, then unlinks the path by name if
/// it shows the same inode number.
fn flock_fallback(os: &mut SimOs<'_>, policy: Policy, cfg: &Config<'_>) {
    let Ok(fd) = os.create_new(LOCK, 0o644, false) else {
        // A file that existed may be a peer's soft marker: left alone.
        return;
    };
    os.syscall(format_args!("flock fd {fd}"), |_, _| Errno::NOSYS);
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
        _ => {
            let _ = soft::remove_own_file(os, cfg, &fd);
            os.close(fd);
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

/// The poll pause between attempts.
pub const POLL: Duration = Duration::from_millis(50);
/// The lease duration of lease scenarios.
pub const LEASE: Duration = Duration::from_secs(1);

/// A contender's patience: `left` more attempts, [`POLL`] apart. It marks
/// the process as in an attempt from each attempt's start until the
/// attempt ends, for the oracle's pause and displacement exemptions.
struct Attempts {
    world: Rc<RefCell<World>>,
    me: usize,
    left: u32,
}

impl Patience<Holder> for Attempts {
    fn attempting(&mut self) {
        self.left = self.left.saturating_sub(1);
        self.world.borrow_mut().procs[self.me].in_attempt = true;
    }

    fn busy(&mut self, _holder: &Holder, _elapsed: Duration) -> Option<Duration> {
        self.world.borrow_mut().procs[self.me].in_attempt = false;
        (self.left > 0).then_some(POLL)
    }
}

/// A process's life: attempt the lock, hold it for a few steps, release.
fn contender(os: &mut SimOs<'_>, spec: &Process, kind: Kind, lifetime: Option<Duration>) {
    let (pid, host) = {
        let w = os.world.borrow();
        (w.procs[os.me].pid, w.hosts[w.procs[os.me].host])
    };
    let start = os.world.borrow().procs[os.me].start;
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
    };
    if spec.policy == Policy::Planter {
        planter(os, spec.attempts);
        return;
    }
    if spec.enosys_fallback {
        flock_fallback(os, spec.policy, &cfg);
    }
    let mut watch = Contender::new();
    let mut patience = Attempts {
        world: Rc::clone(&os.world),
        me: os.me,
        left: spec.attempts,
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
                patience.attempting();
                let taken = naive::try_acquire(os, &cfg, flaws, &mut watch);
                if taken.is_none() && patience.busy(&Holder::Unknown, Duration::ZERO).is_some() {
                    os.sleep(POLL);
                    continue;
                }
                Ok(taken)
            }
            Policy::Planter => Ok(None),
        };
        os.world.borrow_mut().procs[os.me].in_attempt = false;
        match outcome {
            Ok(Some(taken)) => break taken,
            Ok(None) => return,
            // A caller that retries after an error, while it has attempts left.
            Err(_) if patience.left > 0 => os.sleep(POLL),
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
            // The heartbeat: check the path, touch our own inode.
            let _ = soft::refresh(os, &cfg, &held);
        } else {
            os.idle();
        }
    }
    os.leave();
    // A release exchanges too: a peer leaving meanwhile may find its
    // marker held aside for the length of our check.
    os.world.borrow_mut().procs[os.me].in_attempt = true;
    match spec.policy {
        Policy::Ours => {
            // The model fails no removal, so a release has nothing to
            // report: an error means it gave up on a removal it could
            // have made.
            if let Err(e) = soft::release(os, &cfg, held) {
                let mut w = os.world.borrow_mut();
                let me = os.me;
                w.fail(format!("p{me}'s release failed: {e}"));
            }
        }
        Policy::Naive(flaws) => naive::release(os, &cfg, flaws, held),
        Policy::Planter => {}
    }
    os.world.borrow_mut().procs[os.me].in_attempt = false;
}

type Co = Coroutine<(), (), (), DefaultStack>;

/// A running simulation.
pub struct Sim {
    world: Rc<RefCell<World>>,
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
        let mut fs = Fs::new(1_700_000_000_000_000_000, scenario.granularity);
        fs.faults = scenario.faults;
        fs.windows = scenario.windows;
        fs.fault_rng = seed ^ 0x5151;
        for (n, content) in &scenario.files {
            let _ = fs.link_new(n, Node::File(content.clone()));
            let t = fs.clock - scenario.initial_age;
            let mtime = FileTime {
                sec: t.div_euclid(1_000_000_000) as i64,
                nsec: t.rem_euclid(1_000_000_000) as u32,
            };
            let _ = fs.set_mtime(n, mtime);
        }
        for (n, target) in &scenario.symlinks {
            let _ = fs.link_new(n, Node::Symlink(target.clone()));
        }
        let mut world = World {
            fs,
            hosts: scenario.hosts.clone(),
            wall_offsets: scenario.wall_offsets.clone(),
            procs: Vec::new(),
            tokens: 0,
            time: 1_000_000_000_000,
            rng: seed,
            trace: String::new(),
            tracing,
            lifetime: scenario.lifetime,
            lease: (scenario.kind == Kind::Lease).then_some(LEASE),
            refreshed: std::collections::BTreeMap::new(),
            violation: None,
            steps: 0,
            acquisitions: 0,
            displacements: 0,
            overslept: None,
            at_lock: (None, 0),
            paused: false,
            victim: None,
        };
        world.victim = world.fs.ino(VICTIM);
        for p in &scenario.processes {
            let start = world.new_token();
            world.procs.push(Proc {
                pid: Pid::new(p.pid).expect("scenario PIDs are in range"),
                host: p.host,
                alive: true,
                start,
                fds: BTreeSet::new(),
                claims: BTreeSet::new(),
                holds: None,
                in_attempt: false,
                compromised: false,
                own: BTreeSet::new(),
                finished: false,
                last_step: world.time,
            });
        }
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
                        let mut os = SimOs { world, me, yielder };
                        contender(&mut os, &spec, kind, lifetime);
                    },
                ))
            })
            .collect();
        Sim { world, coroutines }
    }

    /// The processes that can still take a step.
    pub fn runnable(&self) -> Vec<usize> {
        (0..self.coroutines.len())
            .filter(|&i| self.coroutines[i].is_some())
            .collect()
    }

    /// Runs process `i` up to its next syscall (which then runs when it is
    /// next chosen).
    pub fn step(&mut self, i: usize) {
        let Some(co) = self.coroutines[i].as_mut() else {
            return;
        };
        let done = matches!(co.resume(()), CoroutineResult::Return(()));
        let mut w = self.world.borrow_mut();
        w.steps += 1;
        if done {
            w.procs[i].finished = true;
            drop(w);
            if let Some(co) = self.coroutines[i].take() {
                return_stack(co);
            }
        } else {
            w.check();
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
        w.procs[i].holds = None;
        w.note(i, format_args!("is KILLED"));
    }

    /// The first violation, with the trace so far.
    pub fn violation(&self) -> Option<Violation> {
        let w = self.world.borrow();
        w.violation.as_ref().map(|what| Violation {
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
        self.world.borrow().overslept.is_some()
    }

    /// Holders that left with their marker displaced (see `SimOs::leave`).
    pub fn displacements(&self) -> u64 {
        self.world.borrow().displacements
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
