//! The host queue of soft waiters (PROTOCOL 7.20) under the model: threads
//! of one process queue on the side file as processes do (each wait has
//! its own open file description, whose locks are the kernel's, of the
//! real file), each behind one waits for its turn on a waiting thread of
//! its own (its blocking lock call a loop of attempts here), and a turn
//! that never comes fails the run (the model's pauses never end unless a
//! test lets them).

use super::{explore, Inside};
use crate::SoftLock;
use shuttle::thread;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Waits until no waiting thread of the queue lives: one whose waiter
/// left ends once the place before it is free, which the last leaver
/// made so.
fn no_queue_thread_left() {
    while crate::soft::queue_threads() != 0 {
        thread::yield_now();
    }
}

/// What the queue leaves once every wait is over: no waiting thread, no
/// side file, and a lock anyone takes at once.
fn nothing_left(path: &Path) {
    no_queue_thread_left();
    let queue = path.with_extension("lock.queue");
    assert!(!queue.exists(), "the side file was left");
    assert!(!path.exists(), "the marker was left");
    assert_eq!(crate::soft::waiting_threads(path), 0, "a waiter was left");
    SoftLock::marker(path)
        .try_lock()
        .unwrap()
        .release()
        .unwrap();
}

/// `threads` threads take one lock `rounds` times each, each holding it
/// for `yields` yields: a thread whose wait left others queued takes it
/// again once at its first attempt, then joins the queue before its first
/// attempt (the model's batch of turns is one). Never two holders, every
/// thread gets the lock each time, and nothing is left.
fn take_turns(threads: usize, rounds: usize, yields: usize) {
    take_turns_of(|p| SoftLock::marker(p), threads, rounds, yields);
}

/// [`take_turns`] with locks `lock` makes.
fn take_turns_of(lock: fn(&Path) -> SoftLock, threads: usize, rounds: usize, yields: usize) {
    let dir = tempfile::tempdir().unwrap();
    let path: Arc<Path> = dir.path().join("a.lock").into();
    let inside = Arc::new(Inside::default());
    let threads: Vec<_> = (0..threads)
        .map(|_| {
            let (path, inside) = (Arc::clone(&path), Arc::clone(&inside));
            thread::spawn(move || {
                for _ in 0..rounds {
                    let guard = lock(&path).lock().unwrap();
                    inside.enter();
                    for _ in 0..yields {
                        thread::yield_now();
                    }
                    inside.leave();
                    guard.release().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    nothing_left(&path);
}

/// How many waiting threads the queue started so far: a test's runs must
/// have queued some waiter behind a head.
fn started() -> usize {
    crate::sync::model::queue_threads_started()
}

#[test]
fn queued_soft_waits_take_turns_and_leave_no_thread_or_side_file() {
    let before = started();
    explore(300, || take_turns(3, 3, 0));
    assert!(started() > before, "no waiter queued behind a head");
}

/// The same, the head watching the marker with inotify.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[test]
fn queued_watched_soft_waits_take_turns_and_leave_no_thread_or_side_file() {
    let before = started();
    explore(300, || {
        crate::sync::model::watches(true);
        take_turns(3, 3, 0);
        crate::sync::model::watches(false);
    });
    assert!(started() > before, "no waiter queued behind a head");
}

/// With the model's timed waits timing out, a timed wait that gives up
/// while queued (behind a head, or as the head) leaves its place: the
/// untimed waiter behind or beside it still gets the lock, no two hold at
/// once, and nothing is left once its waiting thread has ended.
#[test]
fn a_timed_wait_that_gives_up_while_queued_leaves_its_place() {
    explore(300, || {
        crate::sync::model::timeouts(true);
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = dir.path().join("a.lock").into();
        let inside = Arc::new(Inside::default());
        let first = SoftLock::marker(&*path).try_lock().unwrap();
        let untimed = {
            let (path, inside) = (Arc::clone(&path), Arc::clone(&inside));
            thread::spawn(move || {
                let guard = SoftLock::marker(&*path).lock().unwrap();
                inside.enter();
                inside.leave();
                guard.release().unwrap();
            })
        };
        let timed = {
            let (path, inside) = (Arc::clone(&path), Arc::clone(&inside));
            thread::spawn(move || {
                let lock = SoftLock::marker(&*path).poll_interval(Duration::from_secs(1200));
                match lock.lock_timeout(Duration::from_secs(3600)) {
                    Ok(guard) => {
                        inside.enter();
                        inside.leave();
                        guard.release().unwrap();
                    }
                    Err(e) => assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}"),
                }
            })
        };
        thread::yield_now();
        inside.enter();
        inside.leave();
        first.release().unwrap();
        untimed.join().unwrap();
        timed.join().unwrap();
        nothing_left(&path);
        crate::sync::model::timeouts(false);
    });
}

/// With the model's timed waits timing out, four threads take one lock
/// twice each: members behind the head find the queue served at the end
/// of a pause and let it go by without an attempt (PROTOCOL 7.20), in
/// some runs. Never two holders, every thread gets the lock each time,
/// and nothing is left.
#[test]
fn members_behind_a_served_queue_skip_their_pauses_and_still_take_the_lock() {
    let before = crate::sync::model::queue_pauses_skipped();
    explore(300, || {
        crate::sync::model::timeouts(true);
        take_turns(4, 2, 1);
        crate::sync::model::timeouts(false);
    });
    assert!(
        crate::sync::model::queue_pauses_skipped() > before,
        "no member behind the head skipped a pause"
    );
}

/// With the model's timed waits timing out, three threads take one lease
/// three times each (a lease's hold is never handed to a waiting thread,
/// so a thread that asks again at once can take it back at its first
/// attempt and spend its batch of turns, one under the model): a wait
/// that then joins the queue before its first attempt lets its pause go
/// by while members ahead are served, as any member behind does
/// (PROTOCOL 7.20), in some runs. Never two holders, every thread gets the
/// lock each time, and nothing is left.
#[test]
fn a_wait_that_queues_first_skips_its_pause_while_the_queue_is_served() {
    let before = crate::sync::model::queue_first_pauses_skipped();
    explore(300, || {
        crate::sync::model::timeouts(true);
        take_turns_of(|p| SoftLock::lease(p), 3, 3, 1);
        crate::sync::model::timeouts(false);
    });
    assert!(
        crate::sync::model::queue_first_pauses_skipped() > before,
        "no wait that queued first skipped a pause"
    );
}

/// Watching, three threads take one lock twice each: a member whose turn
/// came as the one ahead took the lock watches the marker instead of
/// attempting (PROTOCOL 7.20, a turn after a take), in some runs. Never
/// two holders, every thread gets the lock each time, and nothing is
/// left: the watch's wake-up (the marker's removal) ends that wait, or
/// the model would report it never comes.
#[test]
fn a_turn_after_a_take_watches_the_marker_and_still_takes_the_lock() {
    let before = crate::sync::model::queue_turns_watched();
    explore(300, || {
        crate::sync::model::watches(true);
        take_turns(3, 2, 1);
        crate::sync::model::watches(false);
    });
    assert!(
        crate::sync::model::queue_turns_watched() > before,
        "no turn after a take was watched"
    );
}
