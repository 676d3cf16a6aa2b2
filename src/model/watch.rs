//! Soft waits that watch their lock path with inotify (Linux, Android),
//! under the model: the test turns watches on (`sync::model::watches`),
//! and a waiter then waits as it does outside the model, for an event of
//! its marker or the bell another thread of the process rings as it
//! releases or hands over a lock, looking at the watch in a loop that lets
//! other threads run ([`crate::sync::poll_until`]) rather than blocking in
//! `poll`. The events are the kernel's, of the real files. A wake-up that
//! never comes fails the run at the model's step limit.

use super::explore;
use crate::SoftLock;
use shuttle::thread;
use std::path::Path;
use std::sync::Arc;

/// Runs `run` with watches on.
fn watched(run: impl Fn()) {
    crate::sync::model::watches(true);
    run();
    crate::sync::model::watches(false);
}

/// Threads that wait, watching, for one soft lock take turns: a release
/// or hand-over rings the bells of the others, or the marker's removal
/// wakes them. Never two holders, every thread gets the lock, and no
/// waiter, bell or marker is left.
#[test]
fn watched_soft_waits_take_turns_and_leave_nothing() {
    explore(300, || {
        watched(super::threads_take_turns_and_leave_nothing);
        assert_eq!(crate::soft::bells(), 0, "a bell was left");
    });
}

/// A release by another thread while the watching wait's hook runs ends
/// the wait: the hook's bell is forgotten as its own release's, yet the
/// lock path's change is not (the model reports a wake-up that never
/// comes).
#[test]
fn a_release_while_the_hook_runs_wakes_a_watched_wait() {
    explore(300, || watched(super::release_while_the_hook_runs));
}

/// A hook's own release of another lock, which rings the watching wait's
/// bell, does not make it look again: once per release that could have
/// freed the lock.
#[test]
fn a_hooks_own_release_does_not_wake_its_watched_wait() {
    explore(300, || watched(super::hooks_own_release));
}

/// Another program's release, which rings no bell and counts no release
/// of this process, wakes a watching wait, a thread's or a task's: the
/// kernel's event of its marker (an empty file, which contenders never
/// remove, unlinked outside the library). Without the watch, the model
/// would report the wake-up that never comes.
fn another_programs_release_wakes_a_watched_wait(task: bool) {
    explore(300, move || {
        watched(|| {
            let dir = tempfile::tempdir().unwrap();
            let path: Arc<Path> = dir.path().join("a.lock").into();
            std::fs::write(&*path, b"").unwrap();
            let other = {
                let path = Arc::clone(&path);
                thread::spawn(move || {
                    thread::yield_now();
                    std::fs::remove_file(&*path).unwrap();
                })
            };
            let lock = SoftLock::marker(&*path);
            let guard = match task {
                #[cfg(feature = "tokio")]
                true => shuttle::future::block_on(lock.lock_async()),
                _ => lock.lock(),
            };
            guard.unwrap().release().unwrap();
            other.join().unwrap();
            assert!(!path.exists(), "the marker was left");
        });
        assert_eq!(crate::soft::bells(), 0, "a bell was left");
    });
}

#[test]
fn another_programs_release_wakes_a_watched_thread() {
    another_programs_release_wakes_a_watched_wait(false);
}

#[cfg(feature = "tokio")]
#[test]
fn another_programs_release_wakes_a_watched_task() {
    another_programs_release_wakes_a_watched_wait(true);
}

/// Two tasks and a thread take turns at one soft lock, all watching: the
/// tasks look at their watch between polls (the model's tasks have no
/// reactor). Never two holders, each gets the lock, and no bell, waiter
/// or marker is left.
#[cfg(feature = "tokio")]
#[test]
fn watched_async_and_blocking_soft_waits_take_turns() {
    explore(300, || {
        watched(|| {
            let dir = tempfile::tempdir().unwrap();
            let path: Arc<Path> = dir.path().join("a.lock").into();
            let inside = Arc::new(super::Inside::default());
            let tasks: Vec<_> = (0..2)
                .map(|_| {
                    let (path, inside) = (Arc::clone(&path), Arc::clone(&inside));
                    shuttle::future::spawn(async move {
                        let guard = SoftLock::marker(&*path).lock_async().await.unwrap();
                        inside.enter();
                        inside.leave();
                        guard.release().unwrap();
                    })
                })
                .collect();
            let guard = SoftLock::marker(&*path).lock().unwrap();
            inside.enter();
            inside.leave();
            thread::yield_now();
            guard.release().unwrap();
            for task in tasks {
                shuttle::future::block_on(task).unwrap();
            }
            assert_eq!(crate::soft::waiting_threads(&path), 0, "a waiter was left");
            assert!(!path.exists(), "the marker was left");
        });
        assert_eq!(crate::soft::bells(), 0, "a bell was left");
    });
}
