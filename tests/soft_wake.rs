//! A soft-lock waiter wakes when another process releases, not at its next
//! poll: on Linux and Android the lock's directory is watched (inotify).
//! Each waiter here polls once an hour and waits at most 30 s, at whose
//! end it looks once more: it returns holding the lock well before then
//! only if the release woke it. The holders
//! are other processes: Python filelock 4.2.11 (which releases by
//! unlinking its marker) and the `swaplock` command (which releases
//! through an exchange).

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use common::{command, peer_command, swaplock, Holder, HOLD};
use std::path::Path;
use std::time::{Duration, Instant};
use swaplock::soft::waiting_threads;
use swaplock::SoftLock;

/// Starts a thread waiting for `lock`, releases `holder` once it waits,
/// and checks that the waiter took the lock.
fn woken_by_release(lock: SoftLock, holder: Holder) {
    let path = lock.path().to_path_buf();
    let waiter = std::thread::spawn(move || {
        let lock = lock.poll_interval(Duration::from_secs(3600));
        let began = Instant::now();
        let got = lock.lock_timeout(Duration::from_secs(30));
        (got, began.elapsed())
    });
    while waiting_threads(&path) == 0 {
        assert!(
            !waiter.is_finished(),
            "the waiter returned while the lock was held: {:?}",
            waiter.join().unwrap().0.err()
        );
        std::thread::yield_now();
    }
    assert!(holder.release().success());
    let (got, waited) = waiter.join().unwrap();
    let guard = got.expect("the waiter took the lock");
    assert!(
        waited < Duration::from_secs(20),
        "the release did not wake the waiter: it took the lock at its timeout"
    );
    guard.release().unwrap();
    assert!(!path.exists());
}

fn new(kind: &str, path: &Path) -> SoftLock {
    match kind {
        "soft" => SoftLock::soft(path),
        "marker" => SoftLock::marker(path),
        _ => SoftLock::lease(path),
    }
}

fn by_filelock(kind: &str, path: &Path) -> Holder {
    Holder::spawn(peer_command(&["hold", kind, path.to_str().unwrap()])).0
}

fn by_command(kind: &str, path: &Path) -> Holder {
    // Through the emulator when the tests run under one.
    let mut cmd = command(&swaplock(), "swaplock");
    cmd.args(["run", "--kind", kind])
        .arg(path)
        .args(["sh", "-c", HOLD]);
    Holder::spawn(cmd).0
}

#[test]
fn a_filelock_release_wakes_a_waiter_of_each_kind() {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["soft", "marker", "lease"] {
        let path = dir.path().join(format!("{kind}.lock"));
        woken_by_release(new(kind, &path), by_filelock(kind, &path));
    }
}

#[test]
fn a_swaplock_release_wakes_a_waiter_of_each_kind() {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["soft", "marker", "lease"] {
        let path = dir.path().join(format!("{kind}.lock"));
        woken_by_release(new(kind, &path), by_command(kind, &path));
    }
}
