//! The read-write lock's rules within one process (PROTOCOL 16.10): read
//! holds nest and are shared by threads, a write hold nests on its thread
//! and makes other threads wait, upgrades and downgrades are refused at
//! once, the generation fences, a lost hold is reported and refuses to
//! nest, intervals are checked as filelock checks them, a record's lease
//! is honoured up to the bound, and a forked child leaves its parent's
//! hold alone.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use common::rw::{holders, log_dir, newest, snapshot};
use std::io::ErrorKind;
use std::ops::ControlFlow;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use swaplock::rw::{Compromise, Mode, SoftRwLock};

fn quick(path: &std::path::Path) -> SoftRwLock {
    SoftRwLock::new(path).poll_interval(Duration::from_millis(10))
}

#[test]
fn read_holds_nest_and_threads_share_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let lock = quick(&path);
    let a = lock.read().unwrap();
    let b = quick(&path).read().unwrap();
    assert_eq!((a.generation(), b.generation()), (1, 1), "one participant");
    let other = std::thread::scope(|s| {
        s.spawn(|| lock.try_read().map(|g| g.generation()))
            .join()
            .unwrap()
    });
    assert_eq!(other.unwrap(), 1, "another thread joins the read hold");
    assert_eq!(
        snapshot(&path, 1).unwrap().1.len(),
        1,
        "one reader in the log"
    );
    drop(a);
    assert_eq!(newest(&path), 1, "the last level leaves, not the first");
    drop(b);
    assert_eq!(snapshot(&path, 2), Some((None, vec![])));
    assert!(holders(&path).is_empty());
}

#[test]
fn upgrades_and_downgrades_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let lock = quick(&path);
    let r = lock.read().unwrap();
    let began = Instant::now();
    let e = lock.write().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Deadlock, "{e}");
    assert!(e.to_string().contains("upgrade not allowed"), "{e}");
    assert!(began.elapsed() < Duration::from_secs(5), "at once");
    drop(r);
    let w = lock.write().unwrap();
    let e = lock.read().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Deadlock);
    assert!(e.to_string().contains("downgrade not allowed"), "{e}");
    let again = lock.write().unwrap();
    assert_eq!(
        again.generation(),
        w.generation(),
        "a write hold nests on its thread"
    );
    assert_eq!(again.mode(), Mode::Write);
    drop(again);
    assert_eq!(
        snapshot(&path, newest(&path)).unwrap().0,
        Some(w.token()),
        "still held"
    );
    w.release().unwrap();
}

#[test]
fn other_threads_wait_for_a_write_hold_and_the_generation_grows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let lock = quick(&path);
    let w = lock.write().unwrap();
    let first = w.generation();
    std::thread::scope(|s| {
        let e = s.spawn(|| lock.try_read().unwrap_err()).join().unwrap();
        assert_eq!(e.kind(), ErrorKind::WouldBlock);
        let e = s
            .spawn(|| lock.write_timeout(Duration::from_millis(50)).unwrap_err())
            .join()
            .unwrap();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        let (tx, rx) = mpsc::channel();
        let waiter = s.spawn(move || {
            let lock = quick(&path);
            let g = lock
                .write_with(None, |_| {
                    let _ = tx.send(());
                    ControlFlow::Continue(())
                })
                .unwrap();
            g.generation()
        });
        rx.recv().unwrap();
        drop(w);
        let next = waiter.join().unwrap();
        assert!(next > first, "{first} then {next}");
    });
}

#[test]
fn a_cancelled_or_timed_out_wait_leaves_the_log_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let holder = quick(&path).read().unwrap();
    // Another participant: a child process waits as a writer behind us.
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        let lock = quick(&path);
        s.spawn(move || {
            // In-process, a second participant cannot exist: this thread
            // waits for our hold instead, and its hook cancels.
            let e = lock
                .write_with(None, |status| {
                    let _ = tx.send(status.waited());
                    ControlFlow::Break(())
                })
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Interrupted);
        });
    });
    assert!(rx.recv().is_ok());
    assert_eq!(holders(&path), vec![holder.token()]);
    assert_eq!(newest(&path), 1);
}

#[test]
fn intervals_are_checked_as_filelock_checks_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let s = Duration::from_secs;
    for (lock, says) in [
        (
            SoftRwLock::new(&path).heartbeat_interval(s(0)),
            "heartbeat_interval",
        ),
        (
            SoftRwLock::new(&path)
                .heartbeat_interval(s(2))
                .stale_threshold(s(2)),
            "stale_threshold must exceed heartbeat_interval",
        ),
        (
            SoftRwLock::new(&path).poll_interval(s(100)),
            "poll_interval must be",
        ),
    ] {
        let e = lock.try_read().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert!(e.to_string().contains(says), "{e}");
    }
    assert!(!log_dir(&path).exists(), "refused before anything is made");
}

#[test]
fn a_hold_whose_record_is_taken_is_reported_evicted_and_refuses_to_nest() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let (tx, rx) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    let lock = SoftRwLock::new(&path)
        .heartbeat_interval(Duration::from_millis(50))
        .stale_threshold(Duration::from_millis(200))
        .poll_interval(Duration::from_millis(10))
        .on_compromise(move |c| tx.lock().unwrap().send(c).unwrap());
    let r = lock.read().unwrap();
    std::fs::remove_file(log_dir(&path).join("holders").join(r.token())).unwrap();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(20)).unwrap(),
        Compromise::Evicted
    );
    assert_eq!(r.compromise(), Some(Compromise::Evicted));
    let e = lock.read().unwrap_err();
    assert!(e.to_string().contains("the current hold was lost"), "{e}");
    r.release().unwrap();
    // Released, the lock is taken afresh.
    let again = lock.read().unwrap();
    assert_eq!(again.compromise(), None);
}

/// A planted writer whose record never changes, asking for `lease`.
fn plant_dead_writer(path: &std::path::Path, lease: &str) -> String {
    let token = "0123456789abcdef0123456789abcdef";
    let root = log_dir(path);
    drop(quick(path).read().unwrap());
    let n = newest(path) + 1;
    std::fs::write(
        root.join("holders").join(token),
        format!(
            "filelock-rw/1\ntoken={token}\npid=1\nhost=elsewhere\nlease={lease}\nnonce={token}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        root.join(format!("gen/{n:020}")),
        format!("filelock-rw/1\ngeneration={n}\nwriter={token}\n"),
    )
    .unwrap();
    token.to_owned()
}

#[test]
fn an_absurd_lease_is_honoured_only_up_to_the_bound() {
    let lock = |path: &std::path::Path| {
        SoftRwLock::new(path)
            .heartbeat_interval(Duration::from_millis(100))
            .stale_threshold(Duration::from_millis(300))
            .poll_interval(Duration::from_millis(20))
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    plant_dead_writer(&path, "1e+20");
    let e = lock(&path)
        .read_timeout(Duration::from_secs(1))
        .unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::TimedOut,
        "a lease of 1e+20 s is honoured past our threshold"
    );
    // Another log, the bound at 1 s (its ledger starts afresh).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let dead = plant_dead_writer(&path, "1e+20");
    let began = Instant::now();
    let g = lock(&path)
        .max_lease(Duration::from_secs(1))
        .read()
        .unwrap();
    let waited = began.elapsed();
    assert!(
        waited >= Duration::from_secs(1),
        "no sooner than the bound: {waited:?}"
    );
    eprintln!("a crashed holder asking lease=1e+20 evicted after {waited:.2?} (bound 1 s)");
    assert!(!holders(&path).contains(&dead));
    drop(g);
}

#[test]
fn a_forked_child_leaves_its_parents_hold_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let lock = quick(&path);
    let guard = lock.write().unwrap();
    let before = (newest(&path), holders(&path));
    // SAFETY: the child only calls into the library and leaves through _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let refused = match guard.release() {
            Err(e) if e.kind() == ErrorKind::InvalidInput => 0,
            _ => 1,
        };
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(refused) }
    }
    let mut status = 0;
    // SAFETY: a valid out-pointer; `pid` is our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status}"
    );
    assert_eq!(
        (newest(&path), holders(&path)),
        before,
        "the log is the parent's"
    );
    assert_eq!(
        snapshot(&path, newest(&path)).unwrap().0,
        Some(guard.token())
    );
    guard.release().unwrap();
}
