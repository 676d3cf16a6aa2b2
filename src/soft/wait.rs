//! The wait policy of a blocking acquire: pauses that end early on a
//! release in this process, the wait hook, and the hand-over slots of
//! waiting threads.

use super::*;

/// A wait's patience, as [`Deadline`] says, whose pauses end early when
/// any soft lock of this process is released, and which ends the wait
/// once a releasing thread handed this one its hold.
pub(super) struct WakeOnRelease<'d, 'h> {
    pub(super) deadline: Deadline,
    /// [`RELEASES`]'s count as the last attempt began: a release after it
    /// ends the pause at once.
    pub(super) seen: u64,
    pub(super) waiting: Option<Waiting<'d>>,
    /// This wait's place in its host's queue (PROTOCOL 7.20): behind its
    /// head, the wait does not watch the marker.
    pub(super) queue: queue::Queue<'d>,
    /// Whether the first attempt waits for its turn in the queue: this
    /// process left it last with others in it, and has since taken the
    /// lock back its batch of turns (PROTOCOL 7.20).
    pub(super) join_first: bool,
    /// The lock: its directory, open and by path, and its name.
    pub(super) lock: (&'d Dir, &'d Path, &'d [u8]),
    /// Where the kernel reports changes of the lock path, the pause ends
    /// at the first (Linux, Android).
    pub(super) watcher: wake::Watcher,
    /// The caller's hook ([`SoftLock::lock_with`]), and the lock it waits
    /// for.
    pub(super) hook: Option<(&'h mut WaitHook<'h>, &'h SoftLock)>,
    /// Whether the hook cancelled the wait (or panicked).
    pub(super) cancelled: bool,
    /// The panic of the hook (or a logger), resumed once the wait has left.
    pub(super) panicked: Option<Box<dyn std::any::Any + Send>>,
    /// The lock, for log messages.
    #[cfg(feature = "log")]
    pub(super) soft: Option<&'h SoftLock>,
    /// Whether the wait has looked for another kind of lock on the path
    /// (once, [`MISMATCH_AFTER`] into the wait), to log it.
    #[cfg(feature = "log")]
    pub(super) looked_for_mismatch: bool,
    /// Under the model, how far its clock ran ahead as the wait began
    /// ([`crate::sync::ahead`]): the time the core counts, read from the
    /// adapter's clock, misses what the model's timed pauses let pass.
    #[cfg(swaplock_model)]
    pub(super) ahead: Duration,
}

/// How long a wait goes on before it looks, once, for another kind of
/// lock on its path ([`SoftLock::mismatch`]) to log it: long enough that a
/// holder that is only passing through (a contender between its create and
/// its write) is not mistaken for one.
pub const MISMATCH_AFTER: Duration = Duration::from_secs(3);

/// A [`SoftLock::lock_with`] hook.
pub(super) type WaitHook<'a> = dyn FnMut(&WaitStatus<'_>) -> ControlFlow<()> + 'a;

/// What a waiting acquire knows, for its [`SoftLock::lock_with`] hook.
pub struct WaitStatus<'a> {
    pub(super) lock: &'a SoftLock,
    pub(super) waited: Duration,
}

impl WaitStatus<'_> {
    /// How long the acquire has waited.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Who holds the lock now, as its marker says (read anew at each
    /// call: [`SoftLock::owner`]).
    pub fn holder(&self) -> io::Result<Option<OwnerInfo>> {
        self.lock.owner()
    }

    /// The lock waited for.
    pub fn lock(&self) -> &SoftLock {
        self.lock
    }
}

impl<'d> WakeOnRelease<'d, '_> {
    pub(super) fn new(
        deadline: Deadline,
        waiting: Option<Waiting<'d>>,
        lock: (&'d Dir, &'d Path, &'d [u8]),
        queue: queue::Queue<'d>,
    ) -> Self {
        WakeOnRelease {
            deadline,
            seen: 0,
            waiting,
            queue,
            join_first: false,
            lock,
            watcher: wake::Watcher::new(),
            hook: None,
            cancelled: false,
            panicked: None,
            #[cfg(feature = "log")]
            soft: None,
            #[cfg(feature = "log")]
            looked_for_mismatch: false,
            #[cfg(swaplock_model)]
            ahead: crate::sync::ahead(),
        }
    }

    pub(super) fn handed(&self) -> bool {
        self.waiting.as_ref().is_some_and(Waiting::handed)
    }
}

/// The slot a releasing thread puts its hold in for a waiting one.
pub(super) type Slot = Arc<Mutex<Option<Held<File>>>>;

/// A thread of this process waiting for a soft lock, which a releasing
/// thread of the same kind and directory may hand its hold to.
pub(super) struct Waiter {
    pub(super) key: Arc<Path>,
    pub(super) kind: Kind,
    /// The waiting process (a forked child inherits the list, but none of
    /// its threads).
    pub(super) pid: crate::pid::Me,
    pub(super) dir: sys::DirKey,
    pub(super) slot: Slot,
}

/// The threads of this process waiting for soft locks.
pub(super) static WAITERS: crate::lists::ProcessMutex<Vec<Waiter>> =
    crate::lists::ProcessMutex::new(Vec::new());

pub(super) fn waiters() -> crate::sync::MutexGuard<'static, Vec<Waiter>> {
    WAITERS.lock()
}

/// How many threads of this process wait for the soft lock at `path` in a
/// way a release can hand its hold to (for tests, which must know that a
/// waiter waits before they release).
#[doc(hidden)]
pub fn waiting_threads(path: &Path) -> usize {
    let Some(key) = SoftLock::soft(path).key() else {
        return 0;
    };
    let pid = crate::pid::id();
    waiters()
        .iter()
        .filter(|w| *w.key == *key && w.pid == pid)
        .count()
}

/// A waiting acquire's place among [`WAITERS`], entered at its first busy
/// attempt (an uncontended acquire allocates nothing).
pub(super) struct Waiting<'d> {
    pub(super) key: Arc<Path>,
    pub(super) kind: Kind,
    pub(super) dir: &'d Dir,
    pub(super) slot: Option<Slot>,
}

impl<'d> Waiting<'d> {
    pub(super) fn new(key: Arc<Path>, kind: Kind, dir: &'d Dir) -> Self {
        Waiting {
            key,
            kind,
            dir,
            slot: None,
        }
    }

    pub(super) fn enter(&mut self) {
        if self.slot.is_some() {
            return;
        }
        let Some(dir) = sys::dir_key(self.dir) else {
            return;
        };
        let slot = Slot::default();
        waiters().push(Waiter {
            key: Arc::clone(&self.key),
            kind: self.kind,
            pid: crate::pid::id(),
            dir,
            slot: Arc::clone(&slot),
        });
        self.slot = Some(slot);
    }

    pub(super) fn handed(&self) -> bool {
        self.slot
            .as_ref()
            .is_some_and(|s| crate::sync::lock(s).is_some())
    }

    /// Leaves [`WAITERS`]: the hold handed over meanwhile, if any. No hold
    /// is handed after this.
    pub(super) fn leave(&mut self) -> Option<Held<File>> {
        let slot = self.slot.take()?;
        waiters().retain(|w| !Arc::ptr_eq(&w.slot, &slot));
        let handed = crate::sync::lock(&slot).take();
        handed
    }
}

impl WakeOnRelease<'_, '_> {
    /// What the caller asked to hear of a busy attempt: the log message,
    /// and the hook, whose answer this is.
    pub(super) fn call_out(&mut self, elapsed: Duration, pause: Duration) -> ControlFlow<()> {
        #[cfg(feature = "log")]
        if let Some(lock) = self.soft {
            debug!(
                "Lock {} not acquired on {}, waiting {} seconds ...",
                lock.log_id(),
                lock.path.display(),
                pause.as_secs_f64()
            );
            if !self.looked_for_mismatch && elapsed >= MISMATCH_AFTER {
                self.looked_for_mismatch = true;
                if let Ok(Some(m)) = lock.mismatch() {
                    log::warn!(target: "swaplock", "Lock {} waits on a path another kind of lock uses: {m}", lock.log_id());
                }
            }
        }
        let _ = pause;
        match &mut self.hook {
            Some((hook, lock)) => hook(&WaitStatus {
                lock,
                waited: elapsed,
            }),
            None => ControlFlow::Continue(()),
        }
    }
}

impl WakeOnRelease<'_, '_> {
    /// Before the first attempt of a lock this process left others queued
    /// for, once its batch of turns is spent: joins the queue and, behind
    /// its head, waits for the turn, a
    /// release of this process, or one pause (PROTOCOL 7.20), so that a
    /// waiter that just let the lock go does not take it again ahead of
    /// those that waited.
    fn wait_for_turn_first(&mut self) {
        let Some(pause) =
            Patience::<Holder>::busy(&mut self.deadline, &Holder::Unknown, Duration::ZERO)
        else {
            return;
        };
        // Read before the turn is: a turn given since rings the count.
        let seen = *RELEASES.0.lock();
        if self.queue.standing() != queue::Standing::Behind {
            return;
        }
        // Its attempt waits as a member behind the head's does: while
        // those ahead take the lock in turn, it would only race them.
        let _behind = self.behind(&Holder::Unknown, Duration::ZERO, pause, seen);
        #[cfg(swaplock_model)]
        if _behind.is_some_and(|b| b.skipped > 0) {
            crate::sync::model::queue_first_pause_skipped();
        }
    }

    /// Behind the head of this host's queue (PROTOCOL 7.20): waits for the
    /// turn, a release or hand-over of this process (the count past
    /// `seen`), or the pause; and lets each pause go by while members
    /// ahead of it take the lock in turn, [`queue::MOST_SKIPS`] at most;
    /// `None` if the hold was handed over meanwhile.
    fn behind(
        &mut self,
        holder: &Holder,
        elapsed: Duration,
        mut pause: Duration,
        seen: u64,
    ) -> Option<Behind> {
        let (count, released) = &RELEASES;
        #[cfg(not(swaplock_model))]
        let began = std::time::Instant::now();
        #[cfg(swaplock_model)]
        let mut waited = elapsed;
        let mut skipped = 0;
        loop {
            let guard = count.lock();
            let guard = crate::sync::wait_timeout_while(released, guard, pause, |now| *now == seen);
            let turned = *guard != seen;
            let counted = *guard;
            drop(guard);
            if self.handed() {
                return None;
            }
            #[cfg(not(swaplock_model))]
            let waited = elapsed + began.elapsed();
            let over = turned
                || skipped == queue::MOST_SKIPS
                || self.hook.is_some()
                || !self.queue.moved();
            if !over {
                skipped += 1;
                #[cfg(swaplock_model)]
                crate::sync::model::queue_pause_skipped();
                #[cfg(swaplock_model)]
                {
                    waited += pause;
                }
                if let Some(next) = self.deadline.busy(holder, waited) {
                    pause = next;
                    continue;
                }
            }
            return Some(Behind {
                turned,
                counted,
                waited,
                skipped,
            });
        }
    }
}

/// How a wait behind the head of its host's queue ended
/// ([`WakeOnRelease::behind`]).
#[derive(Clone, Copy)]
struct Behind {
    /// Whether the count of this process's releases and turns moved.
    turned: bool,
    /// The count last seen.
    counted: u64,
    /// The time waited, from the wait's start: on the wait's own clock, so
    /// that pauses ended late add what they took (the model's clock moves
    /// by each pause let go by).
    waited: Duration,
    /// How many pauses it let go by, the queue served meanwhile (counted
    /// by the model's tests).
    #[cfg_attr(not(swaplock_model), allow(dead_code))]
    skipped: usize,
}

impl Patience<Holder> for WakeOnRelease<'_, '_> {
    fn attempting(&mut self) {
        if std::mem::take(&mut self.join_first) {
            self.wait_for_turn_first();
        }
        #[cfg(feature = "log")]
        if let Some(lock) = self.soft {
            debug!(
                "Attempting to acquire lock {} on {}",
                lock.log_id(),
                lock.path.display()
            );
        }
        self.watcher.before_attempt(self.lock.0);
        self.seen = *RELEASES.0.lock();
    }

    fn busy(&mut self, holder: &Holder, elapsed: Duration) -> Option<Duration> {
        #[cfg(swaplock_model)]
        let elapsed = elapsed + crate::sync::ahead().saturating_sub(self.ahead);
        let pause = self.deadline.busy(holder, elapsed)?;
        // The caller's code (the hook, a logger) runs caught: its panic
        // must not leave this wait among the waiters a release hands its
        // hold to. The acquire unwinds once this wait has left.
        let own_before = OWN_RELEASES.with(Cell::get);
        let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.call_out(elapsed, pause)
        }));
        match called {
            Ok(ControlFlow::Continue(())) => {}
            Ok(ControlFlow::Break(())) => {
                self.cancelled = true;
                return None;
            }
            Err(panic) => {
                self.cancelled = true;
                self.panicked = Some(panic);
                return None;
            }
        }
        if self.hook.is_some() {
            // Releases the hook's own code made (another soft lock) are no
            // reason to look again, and its bell is forgotten; another
            // thread's release meanwhile still is (the count moved
            // further), as is a change of this lock's path.
            self.seen += OWN_RELEASES.with(Cell::get) - own_before;
            if self.watcher.path_changed(self.lock.0) {
                return Some(Duration::ZERO);
            }
        }
        if let Some(waiting) = &mut self.waiting {
            waiting.enter();
        }
        if self.handed() {
            return None;
        }
        // Set when this wait's turn came as a member ahead took the lock:
        // the process that holds it and its marker's inode, as the queue
        // says.
        let mut after_take = None;
        let mut pause = pause;
        if self.queue.standing() == queue::Standing::Behind {
            // Behind the head of this host's queue (PROTOCOL 7.20): no
            // watch, so that a release wakes the head alone. The turn
            // counts as a release of this process, as does a hand-over,
            // so neither is missed here; the pause bounds the wait as
            // without the queue.
            //
            // A pause over finds the marker again only if the queue did not
            // move meanwhile: while members ahead take the lock in turn,
            // this one's turn comes, and its attempt would only race them
            // (one that does not see yet the marker it loses to writes and
            // syncs a record first, PROTOCOL 7.2). A queue that stands
            // still (its head stopped, or gone from the queue's view) is
            // attempted as without the queue.
            let Behind {
                turned,
                counted,
                waited,
                ..
            } = self.behind(holder, elapsed, pause, self.seen)?;
            // The turn came as a member ahead took the lock: it is held
            // (or was let go since, which the watch's arming sees), so an
            // attempt now would only find it busy (after writing and
            // syncing a record, if the marker was not linked yet when it
            // looked, PROTOCOL 7.2). As the queue's head, the wait watches that
            // member's marker (if it is the one at the path still) and its
            // process's exit instead. The count the turn moved is seen; a
            // release of this process since still ends the wait at once.
            // Any other end of the pause: an attempt.
            match self.queue.turn_after_take() {
                Some(by) if turned && self.hook.is_none() => {
                    // The watch's pause, from the time waited so far: the
                    // deadline is kept.
                    match self.deadline.busy(holder, waited) {
                        Some(next) => pause = next,
                        None => return Some(Duration::ZERO),
                    }
                    self.seen = counted;
                    after_take = Some(by);
                }
                _ => return Some(Duration::ZERO),
            }
        }
        let (dir, dir_path, name) = self.lock;
        let next = match after_take {
            Some((_, ino)) => self.watcher.start_after_take(dir, dir_path, name, ino),
            None => self.watcher.start(dir, dir_path, name),
        };
        #[cfg(all(test, swaplock_model))]
        if after_take.is_some() && matches!(next, wake::Next::Wait) {
            crate::sync::model::queue_turn_watched();
        }
        match next {
            // What changed before the watch existed raised no event, or
            // the marker left before its watch took hold.
            wake::Next::Now => return Some(Duration::ZERO),
            wake::Next::After(d) => return Some(d.min(pause)),
            wake::Next::Wait => {}
        }
        // A holder of this host ends the wait when it exits, which raises
        // no event on the lock path: its marker is judged again at once.
        let local = match (after_take, holder) {
            (Some((by, _)), _) => by,
            (None, Holder::Local { pid }) => Some(pid.get()),
            (None, _) => None,
        };
        if self.watcher.holder(local) {
            return Some(wake::ZOMBIE_PAUSE.min(pause));
        }
        let (count, released) = &RELEASES;
        let guard = count.lock();
        let seen = self.seen;
        if self.watcher.watching() {
            // A release of this process after `seen` either shows in the
            // count now or rings the bell, which was in place before.
            let released_since = *guard != seen;
            drop(guard);
            if !released_since {
                self.watcher.wait(dir, pause);
            }
        } else {
            // A hand-over counts as a release, so none is missed here.
            drop(crate::sync::wait_timeout_while(
                released,
                guard,
                pause,
                |now| *now == seen,
            ));
        }
        if self.handed() {
            return None;
        }
        // The pause is over: the driver's own sleep is none.
        Some(Duration::ZERO)
    }
}
