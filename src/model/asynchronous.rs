//! The async waits (feature `tokio`) under the model: their tasks run on
//! shuttle's executor, beside the model's threads, and their pauses are
//! the model's ([`crate::sync::time`]), which never end: a task that sleeps
//! on where a release should have woken it is a deadlock the model
//! reports. A soft-lock task waits on this process's release count (no
//! inotify watch under the model); a kernel-lock task waits on the waiting
//! thread that blocks in the kernel for it (src/kernel/wait.rs), which
//! hands it the lock. Each wait is polled through wakers the test counts
//! ([`Given`]), so that a test sees whether the library keeps any once the
//! wait ended or was dropped.

use super::{explore, held_elsewhere, Inside};
use crate::{FileLock, SoftLock};
use shuttle::future::{self, JoinError};
use shuttle::thread;
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Weak};
use std::task::{Context, Wake, Waker};

/// A waker given to an async wait, which wakes the task that polled it.
struct Relay(Waker);

impl Wake for Relay {
    fn wake(self: Arc<Self>) {
        self.0.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.wake_by_ref();
    }
}

/// The wakers an async wait was given, a new one at each poll: one that
/// is still alive after its poll returned is kept by the library (in a
/// list of waiting tasks), and with it the task.
#[derive(Clone, Default)]
struct Given(Arc<std::sync::Mutex<Vec<Weak<Relay>>>>);

impl Given {
    /// Awaits `wait`, giving it a waker of its own at each poll. (A poll
    /// may be cut short at any of the model's points, the waker still on
    /// its stack: the waker is counted once the poll returned.)
    async fn through<F: Future>(self, wait: F) -> F::Output {
        let mut wait = std::pin::pin!(wait);
        std::future::poll_fn(|cx| {
            let relay = Arc::new(Relay(cx.waker().clone()));
            let given = Arc::downgrade(&relay);
            let polled = wait
                .as_mut()
                .poll(&mut Context::from_waker(&Waker::from(relay)));
            self.0.lock().unwrap().push(given);
            polled
        })
        .await
    }

    /// How many of the wakers given are kept after their poll.
    fn kept(&self) -> usize {
        let given = self.0.lock().unwrap();
        given.iter().filter(|w| w.strong_count() > 0).count()
    }
}

/// A soft-lock task waits for a lock another thread of the process
/// holds: that thread's release wakes it, rather than its poll (which the
/// model never ends). A task without an inotify watch waits on the
/// process's release count as waiting threads do. (Round 2: a watchless
/// task slept its whole poll, missing its own process's releases.)
#[test]
fn an_async_soft_wait_is_woken_by_a_release_of_its_process() {
    explore(300, || {
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = dir.path().join("a.lock").into();
        let holder = held_elsewhere(&path, 1);
        let given = Given::default();
        let lock = SoftLock::marker(&*path);
        let guard = future::block_on(given.clone().through(lock.lock_async())).unwrap();
        assert_eq!(given.kept(), 0, "a waker was kept after the wait ended");
        guard.release().unwrap();
        holder.join().unwrap();
        assert!(!path.exists(), "the marker was left");
    });
}

/// Two tasks and a thread take turns at one soft lock, the thread by an
/// untimed blocking wait: never two holders, each gets the lock, and no
/// waker, waiter or marker is left.
#[test]
fn async_and_blocking_soft_waits_take_turns_and_leave_nothing() {
    explore(300, || {
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = dir.path().join("a.lock").into();
        let inside = Arc::new(Inside::default());
        let given = Given::default();
        let tasks: Vec<_> = (0..2)
            .map(|_| {
                let (path, inside, given) = (Arc::clone(&path), Arc::clone(&inside), given.clone());
                future::spawn(async move {
                    let lock = SoftLock::marker(&*path);
                    let guard = given.through(lock.lock_async()).await.unwrap();
                    inside.enter();
                    inside.leave();
                    guard.release().unwrap();
                })
            })
            .collect();
        let guard = SoftLock::marker(&*path).lock().unwrap();
        inside.enter();
        inside.leave();
        guard.release().unwrap();
        for task in tasks {
            future::block_on(task).unwrap();
        }
        assert_eq!(given.kept(), 0, "a waker was kept after the waits ended");
        assert_eq!(crate::soft::waiting_threads(&path), 0, "a waiter was left");
        assert!(!path.exists(), "the marker was left");
    });
}

/// A soft-lock task cancelled while it waits (its future dropped at a
/// point of the model's choosing, even as the holder lets go) holds
/// nothing afterwards and leaves no waker and no marker: the lock is free.
#[test]
fn a_cancelled_async_soft_wait_holds_nothing_and_leaves_no_waker() {
    explore(300, || {
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = dir.path().join("a.lock").into();
        let holder = held_elsewhere(&path, 1);
        let given = Given::default();
        let task = {
            let (path, given) = (Arc::clone(&path), given.clone());
            future::spawn(async move {
                let lock = SoftLock::marker(&*path);
                given.through(lock.lock_async()).await
            })
        };
        thread::yield_now();
        task.abort();
        match future::block_on(task) {
            Ok(guard) => guard.unwrap().release().unwrap(),
            Err(JoinError::Cancelled) => {}
        }
        assert_eq!(given.kept(), 0, "a cancelled wait's waker was kept");
        holder.join().unwrap();
        assert!(!path.exists(), "the marker was left");
        SoftLock::marker(&*path)
            .try_lock()
            .unwrap()
            .release()
            .unwrap();
    });
}

/// A soft-lock task dropped while it waits for a lock that stays held
/// leaves the list of tasks a release wakes at once: no waker of it is
/// kept (nor the task's memory with it) until some later release of the
/// process, whether or not a release elsewhere woke it to look again
/// meanwhile.
#[test]
fn a_dropped_async_soft_wait_leaves_no_waker() {
    explore(300, || {
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = dir.path().join("a.lock").into();
        let first = SoftLock::marker(&*path).try_lock().unwrap();
        let given = Given::default();
        let task = {
            let (path, given) = (Arc::clone(&path), given.clone());
            future::spawn(async move {
                let lock = SoftLock::marker(&*path);
                given.through(lock.lock_async()).await
            })
        };
        let waker = super::release_another(dir.path());
        // The task waits for a release, its waker kept for it.
        while given.kept() == 0 {
            thread::yield_now();
        }
        thread::yield_now();
        task.abort();
        assert!(
            matches!(future::block_on(task), Err(JoinError::Cancelled)),
            "the lock is held: the wait cannot have ended"
        );
        assert_eq!(given.kept(), 0, "a dropped wait's waker was kept");
        waker.join().unwrap();
        first.release().unwrap();
        SoftLock::marker(&*path)
            .try_lock()
            .unwrap()
            .release()
            .unwrap();
    });
}

/// Two tasks and a thread take turns at one `flock` lock, the thread by
/// an untimed wait: the tasks wait on the waiting thread that blocks in
/// the kernel, which hands them the lock and wakes them. Never two holders,
/// each gets the lock, and no waker or waiting thread is left.
#[cfg(unix)]
#[test]
fn async_kernel_waits_are_handed_the_lock_and_leave_nothing() {
    explore(300, || {
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = dir.path().join("a.lock").into();
        let inside = Arc::new(Inside::default());
        let given = Given::default();
        let tasks: Vec<_> = (0..2)
            .map(|_| {
                let (path, inside, given) = (Arc::clone(&path), Arc::clone(&inside), given.clone());
                future::spawn(async move {
                    let lock = FileLock::flock(&*path);
                    let guard = given.through(lock.lock_async()).await.unwrap();
                    inside.enter();
                    inside.leave();
                    guard.release().unwrap();
                })
            })
            .collect();
        let guard = FileLock::flock(&*path).lock().unwrap();
        inside.enter();
        inside.leave();
        guard.release().unwrap();
        for task in tasks {
            future::block_on(task).unwrap();
        }
        assert_eq!(given.kept(), 0, "a waker was kept after the waits ended");
        assert_eq!(
            crate::kernel::wait::waiting_threads(),
            0,
            "a waiting thread was left"
        );
        FileLock::flock(&*path)
            .try_lock()
            .unwrap()
            .release()
            .unwrap();
    });
}

/// A kernel-lock task cancelled while it waits on the waiting thread
/// leaves it at once: the thread keeps no waker of it (which would keep
/// the task's memory while the lock stays held) and counts no waiter for
/// it, and once the holder lets go, it releases the lock it took for
/// nobody and ends: the lock is free. (Round 2: the waiting thread kept a
/// dropped wait's waker until the lock was released.)
#[cfg(unix)]
#[test]
fn a_dropped_async_kernel_wait_leaves_no_waker_and_no_waiter() {
    explore(300, || {
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = dir.path().join("a.lock").into();
        let first = FileLock::flock(&*path).try_lock().unwrap();
        let given = Given::default();
        let task = {
            let (path, given) = (Arc::clone(&path), given.clone());
            future::spawn(async move {
                let lock = FileLock::flock(&*path);
                given.through(lock.lock_async()).await
            })
        };
        // The task waits on a waiting thread.
        while crate::kernel::wait::waiters() == 0 {
            thread::yield_now();
        }
        task.abort();
        assert!(
            matches!(future::block_on(task), Err(JoinError::Cancelled)),
            "the lock is held: the wait cannot have ended"
        );
        assert_eq!(
            given.kept(),
            0,
            "the waiting thread keeps a dropped wait's waker"
        );
        assert_eq!(
            crate::kernel::wait::waiters(),
            0,
            "a dropped wait still waits"
        );
        first.release().unwrap();
        // The waiting thread releases what it takes for nobody: the lock
        // comes free (the model fails a run that spins for ever).
        let free = loop {
            match FileLock::flock(&*path).try_lock() {
                Ok(guard) => break guard,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(
            crate::kernel::wait::waiting_threads(),
            0,
            "a waiting thread outlived the wait it was started for"
        );
        free.release().unwrap();
    });
}
