//! A heartbeat: work that ticks every interval on a kept thread
//! ([`crate::kept`]) until it is stopped or ends itself, and that is
//! stopped for sure. Once [`Beat::stop`] returns, no tick runs and none
//! will, a report under way has ended, and the work (its descriptors) is
//! dropped, as a join of a thread of its own would have it; but the
//! thread is not joined, and serves the process's next heartbeat: a
//! lease's (PROTOCOL 7.15), a read-write lock's participant's (16.8).

use crate::kept::Kept;
use crate::sync::{lock, thread, Condvar, Mutex};
use std::io;
use std::sync::Arc;
use std::time::Duration;

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

/// A beat started; [`stop`](Self::stop) it. Dropped without a stop, the
/// beat goes on (a forked child's copy of its parent's).
pub(crate) struct Beat {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

struct State {
    /// The work, until the beat is stopped or ends.
    ticks: Option<Ticks>,
    stopped: bool,
    /// The thread that runs the beat's last report, while it runs.
    reporting: Option<thread::ThreadId>,
}

impl Beat {
    /// Starts `ticks`, every `interval`, on a thread of `threads`; an
    /// error if none could run it.
    pub(crate) fn start(
        threads: &'static Kept,
        interval: Duration,
        ticks: Ticks,
    ) -> io::Result<Beat> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                ticks: Some(ticks),
                stopped: false,
                reporting: None,
            }),
            changed: Condvar::new(),
        });
        let theirs = Arc::clone(&shared);
        threads.run(Box::new(move || theirs.beat(interval)))?;
        Ok(Beat { shared })
    }

    /// Stops the beat: waits for a tick under way, and for a report under
    /// way unless this thread is the one that runs it (a report that
    /// stops its own beat); then drops the work.
    pub(crate) fn stop(self) {
        let me = thread::current().id();
        let mut state = lock(&self.shared.state);
        state.stopped = true;
        self.shared.changed.notify_all();
        while state.reporting.is_some_and(|t| t != me) {
            state = self
                .shared
                .changed
                .wait(state)
                .unwrap_or_else(|p| p.into_inner());
        }
        let ticks = state.ticks.take();
        drop(state);
        drop(ticks);
    }
}

impl Shared {
    /// The beat's thread: a tick every `interval` (each under the lock, so
    /// that a stop waits for it), until stopped or the work ends. Whether
    /// the thread may serve more work: not once it ran a report, the
    /// caller's code ([`crate::kept::Work`]).
    fn beat(&self, interval: Duration) -> bool {
        let mut state = lock(&self.state);
        loop {
            // Under the model the beat never ticks (its clock never moves
            // by an interval): the wait ends at the stop.
            #[cfg(swaplock_model)]
            let _ = interval;
            #[cfg(swaplock_model)]
            {
                state = self
                    .changed
                    .wait_while(state, |s| !s.stopped)
                    .unwrap_or_else(|p| p.into_inner());
            }
            #[cfg(not(swaplock_model))]
            {
                state =
                    crate::sync::wait_timeout_while(&self.changed, state, interval, |s| !s.stopped);
            }
            if state.stopped {
                return true;
            }
            let Some(ticks) = state.ticks.as_mut() else {
                return true;
            };
            let report = match ticks() {
                Tick::Again => continue,
                Tick::End(report) => report,
            };
            let ended = state.ticks.take();
            state.reporting = Some(thread::current().id());
            drop(state);
            drop(ended);
            let kept = report.is_none();
            if let Some(report) = report {
                // A report that panics (a hook's) ends here, as it would
                // end a thread of its own.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(report));
            }
            lock(&self.state).reporting = None;
            self.changed.notify_all();
            return kept;
        }
    }
}

#[cfg(all(test, not(swaplock_model)))]
mod tests {
    use super::*;
    use crate::sync::atomic::{AtomicUsize, Ordering};
    use crate::sync::mpsc;

    static THREADS: Kept = Kept::new(|| "swaplock-test-beat".into(), None, usize::MAX);

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
}
