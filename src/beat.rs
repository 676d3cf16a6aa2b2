//! A heartbeat: work that ticks every interval on a thread of its kind
//! until it is stopped or ends itself, and that is stopped for sure. Once
//! [`Beat::stop`] returns, no tick runs and none will, a report under way
//! has ended, and the work (its descriptors) is dropped, as a join of a
//! thread of its own would have it; but the thread is not joined: it
//! serves the process's next heartbeat of its kind, a lease's (PROTOCOL
//! 7.15) or a read-write lock's participant's (16.8).
//!
//! Neither a start nor a stop wakes that thread, where it can be helped:
//! a lock held for a tenth of a millisecond would pay for two wake-ups of
//! another thread in each cycle (on a busy machine, two preemptions of the
//! holder). A stop takes the work and lists the thread's slot as idle; the
//! thread sleeps on until the tick it was waiting for (or
//! [`LONGEST_SLEEP`], if that comes first). A start gives its
//! work to an idle slot and wakes the thread only if its first tick is due
//! before the thread wakes anyway. A thread that wakes with no work leaves
//! once it has been idle [`KEPT_FOR`].

use crate::sync::atomic::{AtomicUsize, Ordering};
use crate::sync::{lock, thread, Condvar, Mutex, MutexGuard};
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a tick found.
pub(crate) enum Tick {
    /// Nothing to report: tick again after the interval.
    Again,
    /// The beat ends, after this report (run outside the beat's lock, so
    /// that it may stop the beat itself).
    End(Option<Box<dyn FnOnce() + Send>>),
}

impl Tick {
    /// The beat ends with a loss found: `c` is stored in `lost` at once,
    /// and the hook, if any, called with it as the report.
    pub(crate) fn lost<C: Copy + Send + 'static>(
        lost: &Mutex<Option<C>>,
        hook: Option<&Arc<dyn Fn(C) + Send + Sync>>,
        c: C,
    ) -> Tick {
        *lock(lost) = Some(c);
        let hook = hook.cloned();
        Tick::End(hook.map(|hook| Box::new(move || hook(c)) as Box<dyn FnOnce() + Send>))
    }
}

/// The work of one beat: a tick.
pub(crate) type Ticks = Box<dyn FnMut() -> Tick + Send>;

/// How long a thread with no work waits for the next beat's before it
/// leaves (counted from the end of its work, its stop or a loss with no
/// report; a thread asleep until its old tick leaves at that tick, if it
/// is later).
#[cfg(not(swaplock_model))]
pub(crate) const KEPT_FOR: Duration = Duration::from_secs(2);

/// The longest a thread with work sleeps before it looks again: a beat
/// due only in an age (a lease of `Duration::MAX` refreshes every third
/// of it) leaves its thread, once stopped, that long at most before it
/// sees that and leaves.
const LONGEST_SLEEP: Duration = Duration::from_secs(10);

/// The threads of one kind of beat, for a `static`.
pub(crate) struct Beats {
    name: fn() -> String,
    /// How many of its threads live (for tests).
    live: AtomicUsize,
    /// The slots whose thread has no work, this process's.
    #[cfg(not(swaplock_model))]
    idle: crate::lists::ProcessMutex<Idle>,
}

#[cfg(not(swaplock_model))]
struct Idle {
    pid: crate::pid::Me,
    slots: Vec<Arc<Slot>>,
}

/// A beat started; [`stop`](Self::stop) it. Dropped without a stop, the
/// beat goes on (a forked child's copy of its parent's).
pub(crate) struct Beat {
    beats: &'static Beats,
    slot: Arc<Slot>,
    /// Which of the slot's beats this is.
    nth: u64,
}

/// A thread's place: the beat it serves, if any.
struct Slot {
    state: Mutex<State>,
    changed: Condvar,
    /// How many stops wait for the slot's lock: a beat due again at once
    /// (an interval shorter than a tick) lets them in before its next
    /// tick, on [`let_in`](Self::let_in), which nothing else waits on.
    stopping: AtomicUsize,
    let_in: Condvar,
}

struct State {
    /// The beat's work, until it is stopped or ends.
    work: Option<Work>,
    /// How many beats the slot was given: a stop of an earlier one finds
    /// another number, and leaves the slot alone.
    nth: u64,
    /// The thread that runs a beat's last report, while it runs.
    reporting: Option<thread::ThreadId>,
    /// Until when the thread sleeps, if it does with a timeout: a start
    /// whose first tick comes earlier wakes it.
    asleep_until: Option<Instant>,
    /// Since when the slot has had no work.
    #[cfg_attr(swaplock_model, allow(dead_code))]
    idle_since: Option<Instant>,
    /// Whether the slot is in its kind's idle list.
    #[cfg_attr(swaplock_model, allow(dead_code))]
    listed: bool,
    /// Whether its thread left or leaves: no work is given to it again.
    #[cfg_attr(swaplock_model, allow(dead_code))]
    retired: bool,
}

struct Work {
    ticks: Ticks,
    interval: Duration,
    /// When the next tick is due; `None`: never (an interval past what
    /// the clock counts).
    due: Option<Instant>,
}

impl Beats {
    /// The threads of a kind of beat, named by `name`.
    pub(crate) const fn new(name: fn() -> String) -> Self {
        Beats {
            name,
            live: AtomicUsize::new(0),
            #[cfg(not(swaplock_model))]
            idle: crate::lists::ProcessMutex::new(Idle {
                pid: crate::pid::Me::NONE,
                slots: Vec::new(),
            }),
        }
    }

    /// How many threads of this kind live.
    #[cfg(all(test, not(swaplock_model)))]
    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    /// The idle list, this process's (a forked child's copy of its
    /// parent's lists slots whose threads are not in the child: forgotten).
    #[cfg(not(swaplock_model))]
    fn idle(&'static self) -> crate::sync::MutexGuard<'static, Idle> {
        let mut idle = self.idle.lock();
        let pid = crate::pid::id();
        if idle.pid != pid {
            for slot in std::mem::take(&mut idle.slots) {
                std::mem::forget(slot);
            }
            idle.pid = pid;
        }
        idle
    }

    /// Lists `slot` as idle; the caller holds its state, whose `listed`
    /// it sets.
    #[cfg(not(swaplock_model))]
    fn list(&'static self, slot: &Arc<Slot>) {
        self.idle().slots.push(Arc::clone(slot));
    }

    /// Takes `slot` off the idle list: whether it was on it (if not, a
    /// start took it and gives it work).
    #[cfg(not(swaplock_model))]
    fn unlist(&'static self, slot: &Arc<Slot>) -> bool {
        let mut idle = self.idle();
        match idle.slots.iter().position(|s| Arc::ptr_eq(s, slot)) {
            Some(at) => {
                idle.slots.swap_remove(at);
                true
            }
            None => false,
        }
    }

    /// Waits on `slot` until notified, or until `until` if any (which a
    /// start reads: a beat due before it wakes the thread).
    fn sleep<'a>(
        slot: &'a Slot,
        mut state: MutexGuard<'a, State>,
        until: Option<Instant>,
    ) -> MutexGuard<'a, State> {
        state.asleep_until = until;
        state = match until {
            Some(until) => {
                let left = until.saturating_duration_since(Instant::now());
                crate::sync::wait_timeout(&slot.changed, state, left)
            }
            None => slot.changed.wait(state).unwrap_or_else(|p| p.into_inner()),
        };
        state.asleep_until = None;
        state
    }

    /// The thread of `slot`: ticks its beats' work, each tick under the
    /// slot's lock (so that a stop waits for it), until it has had no work
    /// for [`KEPT_FOR`] or ran a report (the caller's code: the thread is
    /// not kept after it).
    // Under the model, where no thread is kept, a loop that ends with the
    // work.
    #[cfg_attr(swaplock_model, allow(clippy::while_let_loop))]
    fn serve(&'static self, slot: Arc<Slot>) {
        let mut state = lock(&slot.state);
        loop {
            let Some(work) = state.work.as_mut() else {
                // Under the model no thread is kept: it leaves at its stop.
                #[cfg(swaplock_model)]
                break;
                #[cfg(not(swaplock_model))]
                {
                    let now = Instant::now();
                    if !state.listed {
                        // Its work ended without a report (no stop took it).
                        state.listed = true;
                        state.idle_since = Some(now);
                        self.list(&slot);
                    }
                    let until = state.idle_since.unwrap_or(now) + KEPT_FOR;
                    if now >= until {
                        if self.unlist(&slot) {
                            state.listed = false;
                            state.retired = true;
                            break;
                        }
                        // A start took the slot: its work comes under the
                        // lock this wait lets go.
                        state = Self::sleep(&slot, state, None);
                        continue;
                    }
                    state = Self::sleep(&slot, state, Some(until));
                    continue;
                }
            };
            let now = Instant::now();
            // Under the model the beat never ticks (its clock never moves
            // by an interval): the wait ends at the stop.
            let look = now + LONGEST_SLEEP;
            let sleep = match work.due {
                _ if cfg!(swaplock_model) => Some(None),
                Some(due) if now >= due => None,
                due => Some(Some(due.map_or(look, |due| due.min(look)))),
            };
            if let Some(until) = sleep {
                state = Self::sleep(&slot, state, until);
                continue;
            }
            // A tick that panics (none of the library's does) ends its
            // beat, with no report, and its thread: kept, it would take
            // what the panic left half done to the next beat.
            let ticked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (work.ticks)()));
            let (report, kept) = match ticked {
                Ok(Tick::Again) => {
                    work.due = Instant::now().checked_add(work.interval);
                    // Due again at once, the loop would tick without ever
                    // letting go of the lock a stop waits for.
                    if slot.stopping.load(Ordering::SeqCst) > 0 {
                        state = slot
                            .let_in
                            .wait_while(state, |_| slot.stopping.load(Ordering::SeqCst) > 0)
                            .unwrap_or_else(|p| p.into_inner());
                    }
                    continue;
                }
                Ok(Tick::End(report)) => {
                    let kept = report.is_none();
                    (report, kept)
                }
                Err(_) => (None, false),
            };
            // The work ends: a stop from now on waits until it is dropped
            // and its report, if any, has run (unless the report stops
            // the beat itself).
            let ended = state.work.take();
            state.reporting = Some(thread::current().id());
            state.retired = !kept;
            drop(state);
            // Nothing may keep `reporting` set for good, which every later
            // stop would wait for.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(ended)));
            if let Some(report) = report {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(report));
            }
            state = lock(&slot.state);
            state.reporting = None;
            slot.changed.notify_all();
            if !kept {
                break;
            }
        }
        drop(state);
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Beat {
    /// Starts `ticks`, every `interval`, on a thread of `beats`; an error
    /// if none could run it (the work is then dropped, unrun).
    pub(crate) fn start(
        beats: &'static Beats,
        interval: Duration,
        ticks: Ticks,
    ) -> io::Result<Beat> {
        let work = Work {
            ticks,
            interval,
            due: Instant::now().checked_add(interval),
        };
        #[cfg(not(swaplock_model))]
        let work = loop {
            let Some(slot) = beats.idle().slots.pop() else {
                break work;
            };
            let mut state = lock(&slot.state);
            state.listed = false;
            if state.retired {
                continue;
            }
            // Woken only if its first tick comes before the thread wakes
            // anyway (asleep with no timeout: at once).
            if state
                .asleep_until
                .is_none_or(|t| work.due.is_some_and(|due| t > due))
            {
                slot.changed.notify_all();
            }
            state.nth += 1;
            state.idle_since = None;
            let nth = state.nth;
            state.work = Some(work);
            drop(state);
            return Ok(Beat { beats, slot, nth });
        };
        beats.live.fetch_add(1, Ordering::SeqCst);
        let slot = Arc::new(Slot {
            state: Mutex::new(State {
                work: Some(work),
                nth: 1,
                reporting: None,
                asleep_until: None,
                idle_since: None,
                listed: false,
                retired: false,
            }),
            changed: Condvar::new(),
            stopping: AtomicUsize::new(0),
            let_in: Condvar::new(),
        });
        let theirs = Arc::clone(&slot);
        let started = thread::Builder::new()
            .name((beats.name)())
            .spawn(move || beats.serve(theirs));
        if let Err(e) = started {
            beats.live.fetch_sub(1, Ordering::SeqCst);
            // The work, with its descriptors, goes now.
            drop(lock(&slot.state).work.take());
            return Err(e);
        }
        Ok(Beat {
            beats,
            slot,
            nth: 1,
        })
    }

    /// Stops the beat: waits for a tick under way, and for a report under
    /// way unless this thread is the one that runs it (a report that
    /// stops its own beat); then drops the work. The thread is not woken:
    /// its slot is listed idle, for the next beat's work.
    pub(crate) fn stop(self) {
        let me = thread::current().id();
        self.slot.stopping.fetch_add(1, Ordering::SeqCst);
        let mut state = lock(&self.slot.state);
        self.slot.stopping.fetch_sub(1, Ordering::SeqCst);
        self.slot.let_in.notify_all();
        // A report of a later beat on the slot (its work ended, and the
        // slot serves another beat now) is not this beat's to wait for:
        // the caller's code of another lock, which may wait for this
        // thread.
        while state.nth == self.nth && state.reporting.is_some_and(|t| t != me) {
            state = self
                .slot
                .changed
                .wait(state)
                .unwrap_or_else(|p| p.into_inner());
        }
        if state.nth != self.nth {
            return;
        }
        let work = state.work.take();
        #[cfg(swaplock_model)]
        {
            let _ = self.beats;
            self.slot.changed.notify_all();
        }
        #[cfg(not(swaplock_model))]
        if work.is_some() && !state.retired && !state.listed {
            state.listed = true;
            state.idle_since = Some(Instant::now());
            self.beats.list(&self.slot);
        }
        drop(state);
        drop(work);
    }
}

#[cfg(all(test, not(swaplock_model)))]
mod tests {
    use super::*;
    use crate::sync::mpsc;

    static THREADS: Beats = Beats::new(|| "swaplock-test-beat".into());

    /// Counts its drops: the work's, once stopped.
    struct Dropped(Arc<AtomicUsize>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_stop_waits_for_the_tick_under_way_and_drops_the_work() {
        let (in_tick, entered) = mpsc::channel();
        let (go_on, wait) = mpsc::channel::<()>();
        let dropped = Arc::new(AtomicUsize::new(0));
        let ticked = Arc::new(AtomicUsize::new(0));
        let (guard, count) = (Dropped(Arc::clone(&dropped)), Arc::clone(&ticked));
        let beat = Beat::start(
            &THREADS,
            Duration::from_millis(1),
            Box::new(move || {
                let _ = &guard;
                if count.fetch_add(1, Ordering::SeqCst) == 0 {
                    in_tick.send(()).unwrap();
                    wait.recv().unwrap();
                }
                Tick::Again
            }),
        )
        .unwrap();
        entered.recv().unwrap();
        let stopper = crate::sync::thread::spawn(move || beat.stop());
        // The stop cannot end while the first tick waits.
        for _ in 0..1000 {
            crate::sync::thread::yield_now();
            assert!(!stopper.is_finished(), "stopped during a tick");
        }
        go_on.send(()).unwrap();
        stopper.join().unwrap();
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            1,
            "the work outlived its stop"
        );
        // Ticks after the first may have run before the stop took the
        // lock; none runs after it, its work dropped.
        let after = ticked.load(Ordering::SeqCst);
        assert!(after >= 1);
    }

    #[test]
    fn a_report_may_stop_its_own_beat() {
        let beat: Arc<Mutex<Option<Beat>>> = Arc::new(Mutex::new(None));
        let (arm, armed) = mpsc::channel::<()>();
        let armed = Arc::new(Mutex::new(armed));
        let (done, stopped) = mpsc::channel();
        let theirs = Arc::clone(&beat);
        let started = Beat::start(
            &THREADS,
            Duration::from_millis(1),
            Box::new(move || {
                let (armed, theirs, done) = (Arc::clone(&armed), Arc::clone(&theirs), done.clone());
                Tick::End(Some(Box::new(move || {
                    armed.lock().unwrap().recv().unwrap();
                    let own = theirs.lock().unwrap().take().expect("the beat, armed");
                    own.stop();
                    done.send(()).unwrap();
                })))
            }),
        )
        .unwrap();
        *beat.lock().unwrap() = Some(started);
        arm.send(()).unwrap();
        stopped
            .recv_timeout(Duration::from_secs(10))
            .expect("a report that stops its own beat never returned");
    }

    #[test]
    fn a_report_that_panics_ends_the_beat_and_a_stop_still_returns() {
        let (reported, told) = mpsc::channel();
        let beat = Beat::start(
            &THREADS,
            Duration::from_millis(1),
            Box::new(move || {
                let reported = reported.clone();
                Tick::End(Some(Box::new(move || {
                    reported.send(()).unwrap();
                    panic!("a hook that panics");
                })))
            }),
        )
        .unwrap();
        told.recv().unwrap();
        beat.stop();
    }

    /// Spins (yielding) until `ready`, for ten seconds at most.
    fn until(mut ready: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ready() {
            assert!(Instant::now() < deadline, "not ready in ten seconds");
            thread::yield_now();
        }
    }

    /// A beat whose ticks send their thread's id.
    fn ticking(beats: &'static Beats, every: Duration) -> (Beat, mpsc::Receiver<thread::ThreadId>) {
        let (tx, rx) = mpsc::channel();
        let beat = Beat::start(
            beats,
            every,
            Box::new(move || {
                let _ = tx.send(thread::current().id());
                Tick::Again
            }),
        )
        .unwrap();
        (beat, rx)
    }

    #[test]
    fn a_stopped_beats_thread_ticks_the_next_beat() {
        static BEATS: Beats = Beats::new(|| "swaplock-test-next".into());
        let (first, ticks) = ticking(&BEATS, Duration::from_millis(5));
        let ran = ticks.recv().unwrap();
        first.stop();
        for _ in 0..3 {
            let (next, ticks) = ticking(&BEATS, Duration::from_millis(5));
            assert_eq!(ticks.recv().unwrap(), ran, "another thread ticked");
            next.stop();
        }
        assert_eq!(BEATS.live(), 1);
    }

    #[test]
    fn a_start_wakes_a_thread_asleep_past_its_first_tick() {
        static BEATS: Beats = Beats::new(|| "swaplock-test-wake".into());
        let (first, _) = ticking(&BEATS, Duration::from_secs(3600));
        let slot = Arc::clone(&first.slot);
        // Asleep until its tick, an hour away.
        until(|| lock(&slot.state).asleep_until.is_some());
        first.stop();
        let (next, ticks) = ticking(&BEATS, Duration::from_millis(5));
        assert!(
            Arc::ptr_eq(&next.slot, &slot),
            "the idle thread was not given the work"
        );
        ticks
            .recv_timeout(Duration::from_secs(10))
            .expect("the thread slept past the next beat's first tick");
        next.stop();
    }

    #[test]
    fn a_stop_wakes_no_thread_and_a_start_wakes_none_due_later() {
        static BEATS: Beats = Beats::new(|| "swaplock-test-unwoken".into());
        let (first, _) = ticking(&BEATS, Duration::from_secs(3600));
        let slot = Arc::clone(&first.slot);
        until(|| lock(&slot.state).asleep_until.is_some());
        let asleep = lock(&slot.state).asleep_until;
        first.stop();
        let (next, _) = ticking(&BEATS, Duration::from_secs(7200));
        assert!(Arc::ptr_eq(&next.slot, &slot));
        // Woken, the thread would wait anew (until the next beat's tick)
        // and its deadline would move.
        for _ in 0..1000 {
            thread::yield_now();
            assert_eq!(
                lock(&slot.state).asleep_until,
                asleep,
                "the thread was woken"
            );
        }
        next.stop();
    }

    #[test]
    fn a_beat_whose_interval_the_clock_cannot_count_never_ticks_and_stops() {
        static BEATS: Beats = Beats::new(|| "sl-never-ticks".into());
        let (beat, ticks) = ticking(&BEATS, Duration::MAX);
        let slot = Arc::clone(&beat.slot);
        assert!(lock(&slot.state)
            .work
            .as_ref()
            .is_some_and(|w| w.due.is_none()));
        // Asleep, its work never due (it looks again within LONGEST_SLEEP).
        #[cfg(target_os = "linux")]
        until(|| asleep("sl-never-ticks"));
        beat.stop();
        // The next beat, due, wakes it.
        let (next, next_ticks) = ticking(&BEATS, Duration::from_millis(5));
        next_ticks
            .recv_timeout(Duration::from_secs(10))
            .expect("the thread slept on past the next beat's first tick");
        next.stop();
        assert!(ticks.try_recv().is_err(), "a beat of no interval ticked");
    }

    #[test]
    fn a_tick_that_panics_ends_its_beat_and_thread_and_the_next_beat_ticks() {
        static BEATS: Beats = Beats::new(|| "swaplock-test-panic".into());
        let (tx, rx) = mpsc::channel();
        let beat = Beat::start(
            &BEATS,
            Duration::from_millis(1),
            Box::new(move || {
                let _ = tx.send(());
                panic!("a tick that panics");
            }),
        )
        .unwrap();
        rx.recv().unwrap();
        let slot = Arc::clone(&beat.slot);
        until(|| BEATS.live() == 0);
        assert!(
            lock(&slot.state).work.is_none(),
            "the work outlived its beat"
        );
        beat.stop();
        let (next, ticks) = ticking(&BEATS, Duration::from_millis(1));
        let dead = Arc::ptr_eq(&next.slot, &slot);
        let ticked = ticks.recv_timeout(Duration::from_secs(10));
        next.stop();
        assert!(
            ticked.is_ok() && !dead,
            "the next beat was given the slot of a thread that left"
        );
    }

    #[test]
    fn a_late_stop_waits_for_no_report_of_a_later_beat_on_its_slot() {
        static BEATS: Beats = Beats::new(|| "swaplock-test-late-stop".into());
        let (ended_tx, ended) = mpsc::channel();
        let first = Beat::start(
            &BEATS,
            Duration::from_millis(1),
            Box::new(move || {
                let _ = ended_tx.send(());
                Tick::End(None)
            }),
        )
        .unwrap();
        ended.recv().unwrap();
        let slot = Arc::clone(&first.slot);
        // Its thread lists the slot idle once the work ended.
        until(|| lock(&slot.state).listed);
        let (in_report, reporting) = mpsc::channel();
        let (go, go_rx) = mpsc::channel::<()>();
        let go_rx = Arc::new(Mutex::new(go_rx));
        let next = Beat::start(
            &BEATS,
            Duration::from_millis(1),
            Box::new(move || {
                let (in_report, go_rx) = (in_report.clone(), Arc::clone(&go_rx));
                Tick::End(Some(Box::new(move || {
                    in_report.send(()).unwrap();
                    let _ = lock(&go_rx).recv();
                })))
            }),
        )
        .unwrap();
        assert!(
            Arc::ptr_eq(&next.slot, &slot),
            "the idle slot was not reused"
        );
        reporting.recv().unwrap();
        let (stopped_tx, stopped) = mpsc::channel();
        let stopper = thread::spawn(move || {
            first.stop();
            stopped_tx.send(()).unwrap();
        });
        let returned = stopped.recv_timeout(Duration::from_secs(10));
        go.send(()).unwrap();
        stopper.join().unwrap();
        next.stop();
        returned.expect("the stop of an ended beat waited for a later beat's report");
    }

    /// Whether a thread of this process named `name` (15 bytes at most,
    /// as the kernel keeps it) is asleep (the state letter of `/proc`:
    /// `S`).
    #[cfg(target_os = "linux")]
    fn asleep(name: &str) -> bool {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .any(|task| {
                let path = task.path();
                let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
                let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
                comm.trim() == name
                    && stat
                        .rsplit(')')
                        .next()
                        .and_then(|s| s.trim().chars().next())
                        == Some('S')
            })
    }

    #[test]
    fn a_stop_of_a_beat_asked_to_tick_at_every_instant_returns() {
        static BEATS: Beats = Beats::new(|| "swaplock-test-always-due".into());
        let (beat, ticks) = ticking(&BEATS, Duration::from_nanos(1));
        ticks.recv().unwrap();
        drop(ticks);
        let (stopped_tx, stopped) = mpsc::channel();
        thread::spawn(move || {
            beat.stop();
            stopped_tx.send(()).unwrap();
        });
        stopped
            .recv_timeout(Duration::from_secs(10))
            .expect("the stop of a beat due at every look never returned");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_thread_of_a_beat_never_due_leaves_after_its_stop() {
        static BEATS: Beats = Beats::new(|| "sl-never-leaves".into());
        let (beat, _ticks) = ticking(&BEATS, Duration::MAX);
        // Asleep, its work never due (it looks again within LONGEST_SLEEP).
        until(|| asleep("sl-never-leaves"));
        beat.stop();
        let deadline = Instant::now() + KEPT_FOR + LONGEST_SLEEP + Duration::from_secs(10);
        while BEATS.live() != 0 {
            assert!(
                Instant::now() < deadline,
                "the idle thread of a never-due beat stayed"
            );
            thread::yield_now();
        }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_thread_of_a_beat_due_only_in_an_age_leaves_after_its_stop() {
        static BEATS: Beats = Beats::new(|| "sl-age-leaves".into());
        let (beat, _ticks) = ticking(&BEATS, Duration::MAX / 3);
        assert!(lock(&beat.slot.state)
            .work
            .as_ref()
            .is_some_and(|w| w.due.is_some()));
        until(|| asleep("sl-age-leaves"));
        beat.stop();
        let deadline = Instant::now() + KEPT_FOR + LONGEST_SLEEP + Duration::from_secs(10);
        while BEATS.live() != 0 {
            assert!(
                Instant::now() < deadline,
                "the idle thread of a beat due in an age stayed"
            );
            thread::yield_now();
        }
    }

    #[test]
    fn a_thread_with_no_work_leaves() {
        static BEATS: Beats = Beats::new(|| "swaplock-test-leaves".into());
        let (beat, ticks) = ticking(&BEATS, Duration::from_millis(5));
        ticks.recv().unwrap();
        beat.stop();
        let deadline = Instant::now() + KEPT_FOR + Duration::from_secs(10);
        while BEATS.live() != 0 {
            assert!(Instant::now() < deadline, "an idle thread stayed");
            thread::yield_now();
        }
        assert!(
            BEATS.idle().slots.is_empty(),
            "a slot of no thread is listed"
        );
    }
}
