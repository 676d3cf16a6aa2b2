//! Threads of one kind kept a while after their work, for the next: a
//! thread costs more to start (a `clone`, its stack mapped, and a join at
//! its end) than the work some serve, a host queue member's kernel wait
//! (PROTOCOL 7.20), which come one after another in a process that takes
//! a lock in a loop. (Heartbeats keep their threads their own way,
//! [`crate::beat`], which wakes none at a start or a stop.) A kept thread waits
//! [`KEPT_FOR`] for work, then ends. Under the model checker no thread is
//! kept, since its runs must end: each piece of work has a thread of its
//! own.

use crate::sync::atomic::{AtomicUsize, Ordering};
use std::io;

/// One piece of work; it answers whether its thread may serve more. A
/// thread that ran the caller's code (a lease's compromise hook) is not
/// kept: what that code took counts as its thread's (a reentrant hold, a
/// lock's "held by this thread"), and must not pass to the next caller's
/// code run there.
pub(crate) type Work = Box<dyn FnOnce() -> bool + Send>;

/// The threads of one kind: how they are named and their stack, at most
/// how many live at once, and those idle.
pub(crate) struct Kept {
    name: fn() -> String,
    stack: Option<usize>,
    most: usize,
    live: AtomicUsize,
    #[cfg(not(swaplock_model))]
    idle: idle::Idle,
}

impl Kept {
    /// Threads named `name()`, with `stack` bytes of stack (`None`: std's
    /// default), `most` of them alive at once.
    pub(crate) const fn new(name: fn() -> String, stack: Option<usize>, most: usize) -> Self {
        Kept {
            name,
            stack,
            most,
            live: AtomicUsize::new(0),
            #[cfg(not(swaplock_model))]
            idle: idle::Idle::new(),
        }
    }

    /// How many threads of the kind live (the host queue's count them).
    #[cfg(any(target_os = "linux", target_os = "android", test))]
    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    /// Runs `work` on a thread of the kind: one idle now, or a new one. An
    /// error if none is idle and none can be started (`most` alive
    /// already, or the spawn failed: no memory, a thread limit); the work
    /// is then dropped, not run.
    pub(crate) fn run(&'static self, work: Work) -> io::Result<()> {
        #[cfg(not(swaplock_model))]
        let work = match self.idle.hand(work) {
            None => return Ok(()),
            Some(work) => work,
        };
        if self.live.fetch_add(1, Ordering::SeqCst) >= self.most {
            self.live.fetch_sub(1, Ordering::SeqCst);
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "as many of these threads as allowed live already",
            ));
        }
        let mut builder = crate::sync::thread::Builder::new().name((self.name)());
        if let Some(stack) = self.stack {
            builder = builder.stack_size(stack);
        }
        let started = builder.spawn(move || {
            #[cfg_attr(swaplock_model, allow(unused_variables))]
            let kept = work();
            #[cfg(not(swaplock_model))]
            if kept {
                while let Some(next) = self.idle.next() {
                    if !next() {
                        break;
                    }
                }
            }
            self.live.fetch_sub(1, Ordering::SeqCst);
        });
        if started.is_err() {
            self.live.fetch_sub(1, Ordering::SeqCst);
        }
        started.map(drop)
    }
}

/// How long an idle kept thread waits for work before it ends.
#[cfg(not(swaplock_model))]
pub(crate) const KEPT_FOR: std::time::Duration = std::time::Duration::from_secs(2);

#[cfg(not(swaplock_model))]
mod idle {
    use super::{Work, KEPT_FOR};
    use crate::lists::ProcessMutex;
    use crate::sync::Condvar;
    use std::time::Instant;

    /// The idle threads of one kind, and the work handed to them not yet
    /// taken.
    pub(super) struct Idle {
        list: ProcessMutex<List>,
        work: Condvar,
    }

    struct List {
        /// The process these are of: a forked child has none of them.
        pid: crate::pid::Me,
        /// Threads idle and not yet given work.
        idle: usize,
        work: Vec<Work>,
    }

    impl List {
        /// The list as this process has it: a forked child's copy names
        /// its parent's threads, which are not in the child, and work its
        /// parent handed them, which is the parent's to run (not dropped
        /// here: its captures may be the parent's open files).
        fn of_this_process(&mut self) {
            let pid = crate::pid::id();
            if self.pid != pid {
                for work in std::mem::take(&mut self.work) {
                    std::mem::forget(work);
                }
                self.pid = pid;
                self.idle = 0;
            }
        }
    }

    impl Idle {
        pub(super) const fn new() -> Self {
            Idle {
                list: ProcessMutex::new(List {
                    pid: crate::pid::Me::NONE,
                    idle: 0,
                    work: Vec::new(),
                }),
                work: Condvar::new(),
            }
        }

        /// Gives `work` to an idle thread, if one is; else gives it back.
        pub(super) fn hand(&'static self, work: Work) -> Option<Work> {
            let mut list = self.list.lock();
            list.of_this_process();
            if list.idle == 0 {
                return Some(work);
            }
            list.idle -= 1;
            list.work.push(work);
            self.work.notify_one();
            None
        }

        /// How many threads are idle (for tests).
        #[cfg(test)]
        pub(super) fn idle_now(&'static self) -> usize {
            self.list.lock().idle
        }

        /// The next work for an idle thread; `None` once it has waited
        /// [`KEPT_FOR`] for none.
        pub(super) fn next(&'static self) -> Option<Work> {
            let until = Instant::now() + KEPT_FOR;
            let mut list = self.list.lock();
            list.of_this_process();
            list.idle += 1;
            loop {
                if let Some(work) = list.work.pop() {
                    return Some(work);
                }
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    list.idle -= 1;
                    return None;
                }
                list = self
                    .work
                    .wait_timeout(list, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
    }
}

#[cfg(all(test, not(swaplock_model)))]
mod tests {
    use super::*;
    use crate::sync::mpsc;
    use std::time::{Duration, Instant};

    /// Spins (yielding) until `ready`, for ten seconds at most.
    fn until(mut ready: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ready() {
            assert!(Instant::now() < deadline, "not ready in ten seconds");
            crate::sync::thread::yield_now();
        }
    }

    #[test]
    fn a_thread_idle_after_its_work_runs_the_next() {
        static THREADS: Kept = Kept::new(|| "swaplock-test-kept".into(), None, 4);
        let (tx, rx) = mpsc::channel();
        let first = tx.clone();
        THREADS
            .run(Box::new(move || {
                let me = crate::sync::thread::current();
                first.send((me.id(), me.name().map(str::to_owned))).unwrap();
                true
            }))
            .unwrap();
        let (ran, name) = rx.recv().unwrap();
        assert_eq!(name.as_deref(), Some("swaplock-test-kept"));
        until(|| THREADS.idle.idle_now() == 1);
        THREADS
            .run(Box::new(move || {
                tx.send((crate::sync::thread::current().id(), None)).is_ok()
            }))
            .unwrap();
        assert_eq!(rx.recv().unwrap().0, ran, "a new thread ran the work");
        assert_eq!(THREADS.live(), 1);
    }

    #[test]
    fn no_more_threads_live_than_allowed_and_refused_work_is_dropped_unrun() {
        static THREADS: Kept = Kept::new(|| "swaplock-test-most".into(), None, 1);
        let (go, wait) = mpsc::channel::<()>();
        let (done, finished) = mpsc::channel();
        THREADS
            .run(Box::new(move || {
                wait.recv().unwrap();
                done.send(()).unwrap();
                true
            }))
            .unwrap();
        let ran = std::sync::Arc::new(crate::sync::atomic::AtomicBool::new(false));
        let theirs = std::sync::Arc::clone(&ran);
        let refused = THREADS.run(Box::new(move || {
            theirs.store(true, Ordering::SeqCst);
            true
        }));
        assert_eq!(refused.unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert_eq!(
            std::sync::Arc::strong_count(&ran),
            1,
            "the refused work was kept"
        );
        go.send(()).unwrap();
        finished.recv().unwrap();
        until(|| THREADS.idle.idle_now() == 1);
        let (tx, rx) = mpsc::channel();
        THREADS.run(Box::new(move || tx.send(()).is_ok())).unwrap();
        rx.recv().unwrap();
        assert!(!ran.load(Ordering::SeqCst));
    }
}
