//! The process's side of a read-write lock (PROTOCOL 16.10): one
//! participant per canonical path at a time, shared by every lock object
//! of the path, its holds nested by level; the acquire that waits for this
//! process's own hold before it joins the log; the heartbeat thread; and
//! the guard.

use super::error::{IntoIo, RwError};
use super::participant::{instance, Latest, Ledger, Lock, StdEnv, Terms};
use super::{Compromise, Mode, RwWaitStatus, SoftRwGuard, SoftRwLock, DEFAULT_MAX_LEASE};
use crate::adapter::soft::{monotonic_now, RwFiles};
use crate::beat::Tick;
use crate::error::{LockError, Step};
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::thread::ThreadId;
use crate::sync::{lock, thread, wait_timeout, Condvar, Mutex};
use std::io;
use std::ops::ControlFlow;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use swaplock_core::names::Token;
use swaplock_core::rw::driver::Participant;
use swaplock_core::rw::member::{Beat, BeatWatch};

/// The log's files, the driver's instance (its memory of the log, its
/// ledger), and the participant of the hold being taken, held or left.
pub(crate) struct Engine {
    pub(crate) files: RwFiles,
    pub(crate) lock: Lock,
    pub(crate) participant: Option<Participant>,
}

/// Every lock object of this process on one canonical path.
pub(crate) struct Shared {
    /// The lock path as first given, for messages.
    pub(crate) path: Arc<Path>,
    /// The log's root, `<canonical L>.rw`.
    pub(crate) root: PathBuf,
    pub(crate) engine: Mutex<Engine>,
    slot: Mutex<Slot>,
    changed: Condvar,
}

/// Where the path's one participant stands.
enum Slot {
    /// No participant.
    Free,
    /// A thread is acquiring or leaving.
    Busy,
    /// Held.
    Held(Hold),
}

/// Who took a level of a hold: a thread, whose acquires nest in its own
/// hold, or one awaited acquire (feature `tokio`): a task moves between
/// threads, so each of its acquires is an owner of its own, which never
/// nests in a hold it took before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    Thread(ThreadId),
    #[cfg(feature = "tokio")]
    Task(u64),
}

impl Owner {
    fn this_thread() -> Owner {
        Owner::Thread(thread::current().id())
    }
}

/// A granted hold of this process.
struct Hold {
    mode: Mode,
    /// The owner a write hold is pinned to.
    writer: Option<Owner>,
    /// Read levels per acquiring owner.
    depths: Vec<(Owner, usize)>,
    level: usize,
    generation: u128,
    token: Token,
    lost: Arc<Mutex<Option<Compromise>>>,
    heartbeat: Option<Heartbeat>,
}

struct Heartbeat {
    beat: crate::beat::Beat,
    /// Set once the hold is released: a late beat reports nothing.
    released: Arc<AtomicBool>,
}

/// The threads of the participants' heartbeats, kept a while for the
/// process's next hold ([`crate::beat`]).
static HEARTBEATS: crate::beat::Beats =
    crate::beat::Beats::new(|| format!("filelock-heartbeat-{}", crate::pid::number()));

/// The canonical paths this process has locks on (and the process that
/// made each: a forked child's locks are its own).
static SHARED: crate::lists::ProcessMutex<Vec<(PathBuf, crate::pid::Me, Weak<Shared>)>> =
    crate::lists::ProcessMutex::new(Vec::new());

/// The ledgers of logs whose last lock object went while they still
/// watched something (PROTOCOL 16.9, C-RW9): the ledger belongs to the
/// path, so a caller that builds a new lock object for each attempt still
/// ages a dead holder. Keyed by the log's root and the process.
static LEDGERS: crate::lists::ProcessMutex<Vec<(PathBuf, crate::pid::Me, Ledger)>> =
    crate::lists::ProcessMutex::new(Vec::new());

impl Drop for Shared {
    fn drop(&mut self) {
        let ledger = std::mem::take(lock(&self.engine).lock.ledger_mut());
        if !ledger.is_empty() {
            LEDGERS
                .lock()
                .push((self.root.clone(), crate::pid::id(), ledger));
        }
    }
}

/// `realpath` of the lock's directory (made first if missing, as the first
/// participant makes it anyway) and the final component, unresolved: the
/// key filelock's singleton and root are named by.
pub(crate) fn canonical(path: &Path, create: bool) -> io::Result<(PathBuf, PathBuf)> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a lock path must end in a file name",
        )
    })?;
    if create {
        std::fs::create_dir_all(dir)?;
    }
    let dir = std::fs::canonicalize(dir)?;
    Ok((dir.join(name), dir))
}

/// A pause of `d` (cut short at most by a spurious wake-up): the seam's
/// timed wait, on a condition nobody signals.
pub(crate) fn pause(d: Duration) {
    let (quiet, never) = (Mutex::new(()), Condvar::new());
    drop(wait_timeout(&never, lock(&quiet), d));
}

/// The root of the log of the canonical lock path `canonical`.
pub(crate) fn root_of(canonical: &Path) -> PathBuf {
    let mut root = canonical.as_os_str().to_owned();
    root.push(swaplock_core::rw::names::ROOT_SUFFIX);
    root.into()
}

impl Shared {
    fn new(path: &Arc<Path>, canonical: &Path, dir: &Path) -> io::Result<Arc<Self>> {
        let root = root_of(canonical);
        let files = RwFiles::new(root.as_os_str().as_bytes(), dir.as_os_str().as_bytes())
            .map_err(|e| LockError::errno(path, Step::Open, e))?;
        let pid = crate::pid::id();
        let mut ledgers = LEDGERS.lock();
        ledgers.retain(|(_, p, _)| *p == pid);
        let ledger = match ledgers.iter().position(|(r, _, _)| *r == root) {
            Some(i) => ledgers.swap_remove(i).2,
            None => Ledger::default(),
        };
        drop(ledgers);
        // Each acquisition sets the terms of the lock object that asks.
        let terms = Terms {
            threshold: super::DEFAULT_HEARTBEAT.saturating_mul(3),
            max_lease: DEFAULT_MAX_LEASE,
        };
        Ok(Arc::new(Shared {
            path: Arc::clone(path),
            root,
            engine: Mutex::new(Engine {
                files,
                lock: instance(terms, ledger),
                participant: None,
            }),
            slot: Mutex::new(Slot::Free),
            changed: Condvar::new(),
        }))
    }

    /// This process's shared state of the lock at `path`.
    pub(crate) fn of(path: &Arc<Path>) -> io::Result<Arc<Self>> {
        let (canonical, dir) =
            canonical(path, true).map_err(|e| LockError::io(path, Step::Open, e.kind(), e))?;
        let pid = crate::pid::id();
        let mut all = SHARED.lock();
        all.retain(|(_, _, s)| s.strong_count() > 0);
        if let Some(s) = all
            .iter()
            .filter(|(k, p, _)| *k == canonical && *p == pid)
            .find_map(|(_, _, s)| s.upgrade())
        {
            return Ok(s);
        }
        let shared = Self::new(path, &canonical, &dir)?;
        all.push((canonical, pid, Arc::downgrade(&shared)));
        Ok(shared)
    }

    fn error(&self, e: RwError, step: Step) -> io::Error {
        e.into_io(&self.path, &self.root, step)
    }
}

/// What a thread's acquire may do with the process's hold.
enum Join {
    /// Nest in it.
    Nest,
    /// Wait for it to end.
    Wait,
    /// Refuse: waiting would never end (`what` it would be).
    Refuse(&'static str),
}

impl Hold {
    fn join(&self, mode: Mode, me: Owner) -> Join {
        let reads = self.depths.iter().any(|(t, _)| *t == me);
        match (self.mode, mode) {
            (Mode::Read, Mode::Read) => Join::Nest,
            (Mode::Write, Mode::Write) if self.writer == Some(me) => Join::Nest,
            (Mode::Read, Mode::Write) if reads => Join::Refuse("upgrade"),
            (Mode::Write, Mode::Read) if self.writer == Some(me) => Join::Refuse("downgrade"),
            _ => Join::Wait,
        }
    }
}

/// How long an acquire waits.
#[derive(Clone, Copy)]
pub(crate) enum Patience {
    /// One poll.
    Once,
    Forever,
    Until(Instant),
}

/// A wait hook, as `read_with` and `write_with` take it.
pub(crate) type Hook<'h> = Option<&'h mut dyn FnMut(&RwWaitStatus<'_>) -> ControlFlow<()>>;

impl SoftRwLock {
    fn refusal(&self, kind: io::ErrorKind, text: String) -> io::Error {
        LockError::io(&self.path, Step::Lock, kind, io::Error::new(kind, text))
    }

    /// The error of a wait that ended without the lock.
    fn gave_up(&self, patience: Patience, cancelled: bool) -> io::Error {
        let kind = match (cancelled, patience) {
            (true, _) => io::ErrorKind::Interrupted,
            (false, Patience::Once) => io::ErrorKind::WouldBlock,
            (false, _) => io::ErrorKind::TimedOut,
        };
        let text = match cancelled {
            true => "the wait was cancelled by its hook".to_owned(),
            false => format!(
                "The file lock '{}' could not be acquired.",
                self.path.display()
            ),
        };
        self.refusal(kind, text)
    }

    /// Whether the wait may go on: `Err` when it ends now, else the pause
    /// before the next look (cut short at the deadline).
    fn next_pause(
        &self,
        patience: Patience,
        began: Instant,
        hook: &mut Hook<'_>,
        latest: Option<&Latest>,
    ) -> io::Result<Duration> {
        let left = match patience {
            Patience::Once => return Err(self.gave_up(patience, false)),
            Patience::Forever => None,
            Patience::Until(deadline) => {
                let now = crate::sync::now();
                if now >= deadline {
                    return Err(self.gave_up(patience, false));
                }
                Some(deadline - now)
            }
        };
        if let Some(hook) = hook {
            let status = RwWaitStatus {
                waited: crate::sync::now().saturating_duration_since(began),
                latest,
            };
            if hook(&status).is_break() {
                return Err(self.gave_up(patience, true));
            }
        }
        Ok(left.map_or(self.poll, |l| l.min(self.poll)))
    }

    /// What `owner`'s acquire in `mode` may do with the path's slot now:
    /// nest in the process's hold (the guard), refuse, wait, or take the
    /// slot (then busy) to join the log.
    fn claim(&self, shared: &Arc<Shared>, mode: Mode, owner: Owner) -> Claim {
        let mut slot = lock(&shared.slot);
        match &mut *slot {
            Slot::Free => {
                *slot = Slot::Busy;
                Claim::Claimed
            }
            Slot::Held(h) => match h.join(mode, owner) {
                Join::Nest => {
                    if let Some(c) = *lock(&h.lost) {
                        let text = format!(
                            "Cannot acquire {} lock on {}: the current hold was lost ({c:?}), \
                             release it before acquiring again",
                            mode.as_str(),
                            self.path.display()
                        );
                        return Claim::Refused(self.refusal(io::ErrorKind::Other, text));
                    }
                    h.level += 1;
                    if mode == Mode::Read {
                        match h.depths.iter_mut().find(|(t, _)| *t == owner) {
                            Some((_, d)) => *d += 1,
                            None => h.depths.push((owner, 1)),
                        }
                    }
                    Claim::Nested(SoftRwGuard::new(
                        shared,
                        mode,
                        owner,
                        h.generation,
                        h.token,
                        &h.lost,
                    ))
                }
                Join::Refuse(what) => {
                    let held = h.mode.as_str();
                    let text = format!(
                        "Cannot acquire {} lock on {}: this thread holds a {held} lock already \
                         ({what} not allowed): release it first",
                        mode.as_str(),
                        self.path.display()
                    );
                    Claim::Refused(self.refusal(io::ErrorKind::Deadlock, text))
                }
                Join::Wait => Claim::Wait,
            },
            Slot::Busy => Claim::Wait,
        }
    }

    /// Takes the lock in `mode` (PROTOCOL 16.10): nests in this process's
    /// hold where it may, waits for it to end otherwise, then joins the
    /// log as a new participant.
    pub(super) fn acquire(
        &self,
        mode: Mode,
        patience: Patience,
        mut hook: Hook<'_>,
    ) -> io::Result<SoftRwGuard> {
        let began = crate::sync::now();
        let terms = self.terms()?;
        let shared = self.shared()?;
        let me = Owner::this_thread();
        loop {
            match self.claim(&shared, mode, me) {
                Claim::Claimed => break,
                Claim::Nested(guard) => return Ok(guard),
                Claim::Refused(e) => return Err(e),
                Claim::Wait => {}
            }
            let pause = self.next_pause(patience, began, &mut hook, None)?;
            drop(wait_timeout(&shared.changed, lock(&shared.slot), pause));
        }
        // Whatever panics in the wait (the caller's hook, a logger called
        // from it), the participant leaves the log, a writer entered there
        // no longer keeps readers out, and the path is free for this
        // process's other threads, before the panic goes on.
        let taken = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.participate(&shared, mode, terms, patience, began, &mut hook)
        }));
        let taken = match taken {
            Ok(taken) => taken,
            Err(panic) => {
                let _ = leave(&shared);
                *lock(&shared.slot) = Slot::Free;
                shared.changed.notify_all();
                std::panic::resume_unwind(panic);
            }
        };
        settle(&shared, mode, me, taken)
    }

    /// Takes the lock in `mode` as [`acquire`](Self::acquire) waits for
    /// it, without blocking the thread between polls: each poll of the log
    /// runs in the task, the pauses are the runtime's timer. Dropped
    /// before it returns, it leaves the log and frees the path for the
    /// process's other acquires.
    #[cfg(feature = "tokio")]
    pub(super) async fn acquire_async(&self, mode: Mode) -> io::Result<SoftRwGuard> {
        crate::async_wait::in_runtime(&self.path)?;
        let terms = self.terms()?;
        let shared = self.shared()?;
        let me = Owner::Task(crate::async_wait::next_id());
        loop {
            match self.claim(&shared, mode, me) {
                Claim::Claimed => break,
                Claim::Nested(guard) => return Ok(guard),
                Claim::Refused(e) => return Err(e),
                // A release of this process's hold wakes the threads that
                // wait for it; a task looks again at its next poll.
                Claim::Wait => crate::sync::time::sleep(self.poll).await,
            }
        }
        let mut joining = Joining {
            shared: &shared,
            settled: false,
        };
        self.publish(&shared, mode, terms)?;
        loop {
            match poll(&shared).0 {
                Ok(true) => break,
                Ok(false) => crate::sync::time::sleep(self.poll).await,
                Err(e) => return Err(shared.error(e, Step::Lock)),
            }
        }
        let hold = self.granted(&shared, mode, me, terms);
        joining.settled = true;
        settle(&shared, mode, me, hold)
    }

    /// Joins the log: publish, poll until granted (or given up, leaving
    /// the log), then start the heartbeat.
    fn participate(
        &self,
        shared: &Arc<Shared>,
        mode: Mode,
        terms: Terms,
        patience: Patience,
        began: Instant,
        hook: &mut Hook<'_>,
    ) -> io::Result<Hold> {
        self.publish(shared, mode, terms)?;
        loop {
            let (polled, latest) = poll(shared);
            let failure = match polled {
                Ok(true) => break,
                Ok(false) => match self.next_pause(patience, began, hook, latest.as_ref()) {
                    Ok(pause) => {
                        // Nobody else changes the slot while it is busy: this
                        // is a pause.
                        drop(wait_timeout(&shared.changed, lock(&shared.slot), pause));
                        continue;
                    }
                    Err(e) => e,
                },
                Err(e) => shared.error(e, Step::Lock),
            };
            // Giving up: a contender must not stay named (a writer left in
            // the snapshot would keep every reader out until evicted).
            let _ = leave(shared);
            return Err(failure);
        }
        self.granted(shared, mode, Owner::this_thread(), terms)
    }

    /// Publishes this process's participant in the log, on `terms`.
    fn publish(&self, shared: &Arc<Shared>, mode: Mode, terms: Terms) -> io::Result<()> {
        let mut engine = lock(&shared.engine);
        let Engine {
            files,
            lock: log,
            participant,
        } = &mut *engine;
        *log.config_mut() = terms.config();
        match log.publish(files, &mut StdEnv, mode) {
            Ok(p) => *participant = Some(p),
            Err(e) => return Err(shared.error(e, Step::Lock)),
        }
        Ok(())
    }

    /// The hold of a participant just granted, its heartbeat started (or,
    /// where it cannot start, the log left and the error).
    fn granted(
        &self,
        shared: &Arc<Shared>,
        mode: Mode,
        me: Owner,
        terms: Terms,
    ) -> io::Result<Hold> {
        let (generation, token) = {
            let engine = lock(&shared.engine);
            let p = engine.participant.as_ref().expect("granted above");
            (p.generation().unwrap_or_default(), p.token())
        };
        let lost = Arc::new(Mutex::new(None));
        let heartbeat = match self.start_heartbeat(shared, terms, &lost) {
            Ok(h) => h,
            Err(e) => {
                let _ = leave(shared);
                return Err(LockError::io(&self.path, Step::Lock, e.kind(), e));
            }
        };
        Ok(Hold {
            mode,
            writer: (mode == Mode::Write).then_some(me),
            depths: match mode {
                Mode::Read => vec![(me, 1)],
                Mode::Write => Vec::new(),
            },
            level: 1,
            generation,
            token,
            lost,
            heartbeat: Some(heartbeat),
        })
    }

    /// Starts the thread that refreshes the record every heartbeat
    /// interval and reports a loss once (PROTOCOL 16.8).
    fn start_heartbeat(
        &self,
        shared: &Arc<Shared>,
        terms: Terms,
        lost: &Arc<Mutex<Option<Compromise>>>,
    ) -> io::Result<Heartbeat> {
        let released = Arc::new(AtomicBool::new(false));
        let (shared, lost, done) = (Arc::clone(shared), Arc::clone(lost), Arc::clone(&released));
        let (interval, hook) = (self.heartbeat, self.on_compromise.clone());
        let mut watch = BeatWatch::new(monotonic_now(), terms.threshold, interval);
        let beat = crate::beat::Beat::start(
            &HEARTBEATS,
            interval,
            Box::new(move || {
                let beat = {
                    let mut engine = lock(&shared.engine);
                    let Engine {
                        files,
                        lock: log,
                        participant,
                    } = &mut *engine;
                    match participant.as_mut() {
                        Some(p) => log.heartbeat(files, &mut StdEnv, p),
                        None => return Tick::End(None),
                    }
                };
                match watch.observe(beat, monotonic_now()) {
                    None => Tick::Again,
                    Some(_) if done.load(Ordering::Acquire) => Tick::End(None),
                    Some(c) => Tick::lost(&lost, hook.as_ref(), c),
                }
            }),
        )?;
        Ok(Heartbeat { beat, released })
    }
}

/// The participant leaves the log (errors are the caller's to ignore: a
/// contender giving up has an error of its own to report).
fn leave(shared: &Shared) -> Result<(), RwError> {
    let mut engine = lock(&shared.engine);
    let Engine {
        files,
        lock: log,
        participant,
    } = &mut *engine;
    match participant.take() {
        Some(mut p) => log.leave(files, &mut StdEnv, &mut p),
        None => Ok(()),
    }
}

/// What an acquire may do with the path's slot ([`SoftRwLock::claim`]).
enum Claim {
    /// The slot is this acquire's (busy): it joins the log.
    Claimed,
    /// It nested in the process's hold.
    Nested(SoftRwGuard),
    Refused(io::Error),
    /// The process's hold, or another acquire, is in the way.
    Wait,
}

/// One poll of the participant: whether it is granted, and the latest
/// snapshot it read.
fn poll(shared: &Shared) -> (Result<bool, RwError>, Option<Latest>) {
    let mut engine = lock(&shared.engine);
    let Engine {
        files,
        lock: log,
        participant,
    } = &mut *engine;
    let p = participant
        .as_mut()
        .expect("published; only the slot's acquire takes it");
    let polled = log.advance(files, &mut StdEnv, p);
    (polled, log.snapshot().map(|s| Latest::of(&s)))
}

/// The slot after a participant's acquire: the hold, and its guard, or
/// free again.
fn settle(
    shared: &Arc<Shared>,
    mode: Mode,
    me: Owner,
    taken: io::Result<Hold>,
) -> io::Result<SoftRwGuard> {
    let mut slot = lock(&shared.slot);
    let guard = taken.map(|hold| {
        let guard = SoftRwGuard::new(shared, mode, me, hold.generation, hold.token, &hold.lost);
        *slot = Slot::Held(hold);
        guard
    });
    if guard.is_err() {
        *slot = Slot::Free;
    }
    shared.changed.notify_all();
    guard
}

/// An awaited acquire between its claim of the slot and its hold: dropped
/// unsettled (the future dropped, or an error), the participant leaves the
/// log and the slot is free again.
#[cfg(feature = "tokio")]
struct Joining<'a> {
    shared: &'a Arc<Shared>,
    settled: bool,
}

#[cfg(feature = "tokio")]
impl Drop for Joining<'_> {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let _ = leave(self.shared);
        *lock(&self.shared.slot) = Slot::Free;
        self.shared.changed.notify_all();
    }
}

impl SoftRwGuard {
    fn new(
        shared: &Arc<Shared>,
        mode: Mode,
        thread: Owner,
        generation: u128,
        token: Token,
        lost: &Arc<Mutex<Option<Compromise>>>,
    ) -> Self {
        SoftRwGuard {
            shared: Some(Arc::clone(shared)),
            mode,
            thread,
            pid: crate::pid::id(),
            generation,
            token,
            lost: Arc::clone(lost),
        }
    }

    /// Whether the hold is lost now: what the heartbeat found, or else a
    /// heartbeat's look made at once (our record refreshed, the latest
    /// snapshot read). `None` in a forked child, or when nothing is lost.
    pub(super) fn lost_now(&self) -> Option<Compromise> {
        if let Some(c) = *lock(&self.lost) {
            return Some(c);
        }
        let shared = self
            .shared
            .as_ref()
            .filter(|_| self.pid == crate::pid::id())?;
        let mut engine = lock(&shared.engine);
        let Engine {
            files,
            lock: log,
            participant,
        } = &mut *engine;
        let p = participant.as_mut().filter(|p| p.token() == self.token)?;
        match log.heartbeat(files, &mut StdEnv, p) {
            Beat::Lost => Some(Compromise::Evicted),
            _ => None,
        }
    }

    /// Gives back this guard's level; the last one leaves the log.
    pub(super) fn release_inner(&mut self) -> io::Result<()> {
        let Some(shared) = self.shared.take() else {
            return Ok(());
        };
        if self.pid != crate::pid::id() {
            // A forked child: the hold, and its participant, are the parent's.
            let what = "the lock's hold, with its place in the log,";
            return Err(LockError::forked(
                &shared.path,
                Step::Unlock,
                self.pid.number(),
                what,
            ));
        }
        let mut slot = lock(&shared.slot);
        let Slot::Held(h) = &mut *slot else {
            return Ok(());
        };
        h.level -= 1;
        if let Some(i) = h.depths.iter().position(|(t, _)| *t == self.thread) {
            h.depths[i].1 -= 1;
            if h.depths[i].1 == 0 {
                h.depths.swap_remove(i);
            }
        }
        if h.level > 0 {
            return Ok(());
        }
        let Slot::Held(hold) = std::mem::replace(&mut *slot, Slot::Busy) else {
            unreachable!("matched as held above");
        };
        drop(slot);
        // The heartbeat stops first, so that no late beat reads the log
        // this participant is leaving; its hook may be what releases.
        if let Some(h) = hold.heartbeat {
            h.released.store(true, Ordering::Release);
            h.beat.stop();
        }
        let left = leave(&shared);
        *lock(&shared.slot) = Slot::Free;
        shared.changed.notify_all();
        left.map_err(|e| shared.error(e, Step::Unlock))
    }
}

impl Drop for SoftRwGuard {
    fn drop(&mut self) {
        if self.pid == crate::pid::id() {
            let _ = self.release_inner();
        }
    }
}
