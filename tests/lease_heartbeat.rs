//! A lease's heartbeat (PROTOCOL 7.15): it reports a lost marker to the
//! lock's hook and its guard, a hook may release the guard from that
//! report, and a release stops the heartbeat for good
//! (`tests/lease_threads.rs`: its thread serves the next lease). The
//! waits here are on channels, under generous bounds that only a hang
//! reaches. Unix: under Windows rules a held marker cannot be removed or
//! replaced by another program, which the tests here do.

#![cfg(unix)]

use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use swaplock::soft::Compromise;
use swaplock::SoftLock;

/// How long a test waits for what the heartbeat reports before it fails.
const BOUND: Duration = Duration::from_secs(30);

/// A lease on `path` whose heartbeat beats every 10 ms, its hook sending
/// each report on a channel.
fn beating(path: &Path) -> (SoftLock, mpsc::Receiver<Compromise>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let lock = SoftLock::lease(path)
        .lease_duration(Duration::from_secs(60))
        .heartbeat_interval(Duration::from_millis(10))
        .on_compromise(move |c| {
            let _ = tx.lock().unwrap().send(c);
        });
    (lock, rx)
}

#[test]
fn a_marker_removed_under_a_lease_is_reported_to_its_hook_and_guard() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.lock");
    let (lock, reports) = beating(&path);
    let guard = lock.lock().unwrap();
    assert_eq!(guard.compromise(), None);
    std::fs::remove_file(&path).unwrap();
    let report = reports.recv_timeout(BOUND).expect("no report in time");
    assert_eq!(report, Compromise::MarkerMissing);
    assert_eq!(guard.compromise(), Some(Compromise::MarkerMissing));
    // One report: the heartbeat ended with it.
    assert!(reports.try_recv().is_err());
    // The lock is free: nothing of ours is at the path, and a release
    // touches nothing there.
    guard.release().unwrap();
    assert!(!path.exists());
    let next = SoftLock::lease(&path).try_lock().unwrap();
    next.release().unwrap();
}

#[test]
fn a_hook_may_release_its_own_guard() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.lock");
    let slot: Arc<Mutex<Option<swaplock::SoftLockGuard>>> = Arc::default();
    let (released, done) = mpsc::channel();
    let released = Mutex::new(released);
    let theirs = Arc::clone(&slot);
    let lock = SoftLock::lease(&path)
        .lease_duration(Duration::from_secs(60))
        .heartbeat_interval(Duration::from_millis(10))
        .on_compromise(move |c| {
            // The hook runs on the heartbeat's thread: the release stops
            // that heartbeat, which must not wait for this report.
            let guard = theirs.lock().unwrap().take();
            let result = guard.map(|g| g.release().map_err(|e| e.kind()));
            let _ = released.lock().unwrap().send((c, result));
        });
    *slot.lock().unwrap() = Some(lock.lock().unwrap());
    // Another program takes the path over: ours is not there any more.
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, "another program's\n").unwrap();
    let (report, result) = done.recv_timeout(BOUND).expect("the hook's release hung");
    assert_eq!(report, Compromise::OwnerChanged);
    assert_eq!(result, Some(Ok(())));
    // The release left the other program's file alone.
    assert_eq!(std::fs::read(&path).unwrap(), b"another program's\n");
}

/// A release stops the heartbeat for good: a marker removed after it is
/// reported by no one, and the next lease's heartbeat reports its own.
#[test]
fn a_released_lease_reports_nothing_after_its_release() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("a.lock"), dir.path().join("b.lock"));
    let (lock, first_reports) = beating(&first);
    let guard = lock.lock().unwrap();
    guard.release().unwrap();
    // A file of another program at the released path: a heartbeat still
    // beating would report the owner changed.
    std::fs::write(&first, "another program's\n").unwrap();
    let (lock, second_reports) = beating(&second);
    let guard = lock.lock().unwrap();
    std::fs::remove_file(&second).unwrap();
    let report = second_reports
        .recv_timeout(BOUND)
        .expect("no report in time");
    assert_eq!(report, Compromise::MarkerMissing);
    // The second heartbeat beat at least twice since the first lease's
    // release (two misses make a report), on the thread the first's may
    // still have been: the first reported nothing meanwhile.
    assert!(first_reports.try_recv().is_err());
    guard.release().unwrap();
    assert_eq!(std::fs::read(&first).unwrap(), b"another program's\n");
}

/// What a hook takes counts as its thread's (a reentrant hold, a lock
/// "held by this thread"): the heartbeat thread that ran one lease's hook
/// never runs the next lease's, or the second hook would re-enter a hold
/// that the first handed to another thread.
#[test]
fn hooks_of_two_leases_never_share_what_a_thread_holds() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared.lock");
    let (tx, rx) = mpsc::channel();
    let tx = Arc::new(Mutex::new(tx));
    let lease = |name: &str, first: bool| {
        let (tx, shared) = (Arc::clone(&tx), shared.clone());
        SoftLock::lease(dir.path().join(name))
            .lease_duration(Duration::from_secs(60))
            .heartbeat_interval(Duration::from_millis(10))
            .on_compromise(move |_| {
                let lock = SoftLock::marker(&shared).reentrant(true);
                let got = if first { lock.lock() } else { lock.try_lock() };
                let _ = tx.lock().unwrap().send(got.map_err(|e| e.kind()));
            })
    };
    let a = lease("a.lock", true).lock().unwrap();
    std::fs::remove_file(dir.path().join("a.lock")).unwrap();
    // The first hook's hold, now this thread's to keep.
    let held = rx
        .recv_timeout(BOUND)
        .expect("no report in time")
        .expect("the first hook took the shared lock");
    // Returns once the report ended.
    a.release().unwrap();
    let b = lease("b.lock", false).lock().unwrap();
    std::fs::remove_file(dir.path().join("b.lock")).unwrap();
    let second = rx.recv_timeout(BOUND).expect("no report in time");
    assert_eq!(
        second.map(drop),
        Err(std::io::ErrorKind::WouldBlock),
        "the second hook entered a lock held by this thread"
    );
    held.release().unwrap();
    b.release().unwrap();
}

/// A lease whose heartbeat interval is past what the clock can add (a
/// duration the builder accepts) is taken and released, without a panic
/// that would leave its marker at the path: such a heartbeat never comes.
#[test]
fn a_lease_refreshed_once_in_an_age_neither_panics_nor_stays() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("age.lock");
    let lock = SoftLock::lease(&path)
        .lease_duration(Duration::MAX)
        .heartbeat_interval(Duration::from_secs(i64::MAX as u64));
    let taken = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        lock.lock().and_then(|g| g.release())
    }));
    let left = path.exists();
    assert!(
        matches!(taken, Ok(Ok(()))),
        "the acquire panicked or failed (marker left at the path: {left})"
    );
    assert!(!left, "the marker stayed");
}

/// A lease whose heartbeat interval is a nanosecond (0 < interval <
/// duration: accepted) refreshes as often as its heartbeat may, every
/// millisecond; its release still stops the heartbeat.
#[test]
fn a_lease_refreshed_at_every_instant_is_released() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("instant.lock");
    let guard = SoftLock::lease(&path)
        .lease_duration(Duration::from_secs(60))
        .heartbeat_interval(Duration::from_nanos(1))
        .lock()
        .unwrap();
    // Its heartbeat refreshes (the marker's time moves).
    let first = std::fs::metadata(&path).unwrap().modified().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(&path).unwrap().modified().unwrap() == first {
        assert!(std::time::Instant::now() < deadline, "no refresh");
        std::thread::yield_now();
    }
    let (done_tx, done) = mpsc::channel();
    std::thread::spawn(move || {
        let released = guard.release();
        let _ = done_tx.send(released.is_ok());
    });
    let released = done.recv_timeout(Duration::from_secs(10));
    assert_eq!(
        released,
        Ok(true),
        "the release waited for a heartbeat that never let go of its lock, or failed"
    );
}
