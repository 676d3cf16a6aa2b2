//! A thread of this process waiting for a soft lock that another thread
//! releases is handed the hold: the marker stays at the lock path (only
//! its mtime changes), so no other process can slip in between, and the
//! waiter holds it at once. Leases are not handed over (their token and
//! heartbeat are their holder's).

#![cfg(unix)]

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;
use swaplock::soft::waiting_threads;
use swaplock::SoftLock;

/// Holds a lock made by `new` in this thread, starts a thread that waits
/// for it (`timed`: with a timeout), releases once that thread waits, and
/// says whether the marker the waiter then holds is the first holder's
/// (the same file, still linked at the lock path) and what it holds.
fn handed_over(path: &Path, new: fn(&Path) -> SoftLock, timed: bool) -> (bool, Vec<u8>) {
    let first = new(path).lock().unwrap();
    let record = std::fs::read(path).unwrap();
    let marker = std::fs::File::open(path).unwrap();
    let waiter = {
        let path = path.to_path_buf();
        std::thread::spawn(move || {
            let lock = new(&path);
            let guard = if timed {
                lock.lock_timeout(Duration::from_secs(60)).unwrap()
            } else {
                lock.lock().unwrap()
            };
            let at_path = std::fs::metadata(&path).unwrap().ino();
            let record = std::fs::read(&path).unwrap();
            (guard, at_path, record)
        })
    };
    // Released only once the other thread waits.
    while waiting_threads(path) == 0 {
        assert!(
            !waiter.is_finished(),
            "the waiter took the lock while it was held"
        );
        std::thread::yield_now();
    }
    first.release().unwrap();
    let (guard, at_path, held_record) = waiter.join().unwrap();
    let old = marker.metadata().unwrap();
    let same = old.nlink() == 1 && old.ino() == at_path;
    // A handed-over marker keeps its record (a lease's new one has a new
    // token).
    assert_eq!(same, held_record == record);
    guard.release().unwrap();
    assert!(!path.exists());
    assert_eq!(waiting_threads(path), 0);
    (same, held_record)
}

#[test]
fn a_waiting_thread_is_handed_the_hold() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    for timed in [false, true] {
        let kinds: [fn(&Path) -> SoftLock; 2] = [|p| SoftLock::soft(p), |p| SoftLock::marker(p)];
        for new in kinds {
            let (same, _) = handed_over(&path, new, timed);
            assert!(same, "timed {timed}: the marker was not handed over");
        }
    }
}

#[test]
fn a_lease_is_not_handed_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let new: fn(&Path) -> SoftLock = |p| SoftLock::lease(p).poll_interval(Duration::from_millis(5));
    let (same, record) = handed_over(&path, new, false);
    assert!(!same);
    assert!(String::from_utf8(record).unwrap().contains("mode=lease"));
}

/// Threads of one process take turns on one soft lock, handing it over
/// among them: never two at once.
#[test]
fn threads_take_turns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let lock_path = path.clone();
    let take = move |t: usize, i: usize| {
        let lock = SoftLock::marker(&lock_path).reentrant((t + i) % 2 == 1);
        match (t + i) % 3 {
            0 => lock.lock().unwrap(),
            1 => lock.lock_timeout(Duration::from_secs(60)).unwrap(),
            _ => loop {
                match lock.try_lock() {
                    Ok(g) => break g,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::yield_now()
                    }
                    Err(e) => panic!("{e}"),
                }
            },
        }
    };
    let release = |guard: swaplock::SoftLockGuard, _| guard.release().unwrap();
    assert_eq!(common::take_turns(4, 100, take, release), 0);
    assert!(!path.exists());
    assert_eq!(waiting_threads(&path), 0);
}

/// Waits for `waiter`, failing (not hanging) after a minute.
fn join_within<T: Send + 'static>(waiter: std::thread::JoinHandle<T>) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(waiter.join()));
    rx.recv_timeout(Duration::from_secs(60))
        .expect("still waiting after a minute")
        .unwrap()
}

/// While a thread waits on one lock instance, another attempt on the same
/// instance (its holder's `try_lock`, say) answers at once: the instance
/// is not locked for the length of a wait.
#[test]
fn a_waiter_does_not_block_other_attempts_on_its_instance() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let lock = SoftLock::marker(&path);
    let guard = lock.lock().unwrap();
    let waiter = {
        let lock = lock.clone();
        std::thread::spawn(move || lock.lock().map(|g| g.release()))
    };
    while waiting_threads(&path) == 0 {
        assert!(!waiter.is_finished());
        std::thread::yield_now();
    }
    let attempt = {
        let lock = lock.clone();
        std::thread::spawn(move || lock.try_lock().map(drop).unwrap_err().kind())
    };
    assert_eq!(join_within(attempt), std::io::ErrorKind::WouldBlock);
    let timed = {
        let lock = lock.clone();
        std::thread::spawn(move || {
            lock.lock_timeout(Duration::from_millis(10))
                .map(drop)
                .unwrap_err()
                .kind()
        })
    };
    assert_eq!(join_within(timed), std::io::ErrorKind::TimedOut);
    guard.release().unwrap();
    join_within(waiter).unwrap().unwrap();
    assert!(!path.exists());
}

/// A marker moved off the lock path (by something outside the protocol)
/// is not handed over: the waiter makes its own marker at the lock path,
/// which excludes others again.
#[test]
fn a_marker_no_longer_at_the_lock_path_is_not_handed_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let guard = SoftLock::marker(&path).lock().unwrap();
    let waiter = {
        let path = path.clone();
        std::thread::spawn(move || {
            let g = SoftLock::marker(&path).lock().unwrap();
            let at_path = path.exists();
            let other = std::thread::scope(|s| {
                s.spawn(|| {
                    SoftLock::marker(&path)
                        .try_lock()
                        .map(drop)
                        .unwrap_err()
                        .kind()
                })
                .join()
                .unwrap()
            });
            g.release().unwrap();
            (at_path, other)
        })
    };
    while waiting_threads(&path) == 0 {
        assert!(!waiter.is_finished());
        std::thread::yield_now();
    }
    std::fs::rename(&path, dir.path().join("aside")).unwrap();
    guard.release().unwrap();
    let (at_path, other) = join_within(waiter);
    assert!(at_path, "the waiter holds no marker at the lock path");
    assert_eq!(other, std::io::ErrorKind::WouldBlock);
}
