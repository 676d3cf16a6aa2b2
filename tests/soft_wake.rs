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

/// The cycle a contending child runs (see
/// `contenders_that_poll_once_an_hour_never_miss_a_release`): `ROUNDS`
/// acquires and releases of `KIND` on `PATH`, each waiting at most 20 s;
/// exits 1 when a wait took 10 s or more: with four peers holding for
/// microseconds, only a release it slept through takes that long (its last
/// look, at the timeout, then finds the lock free).
#[test]
#[ignore = "a child of the contention test"]
fn cycling_child() {
    let (Ok(kind), Some(path), Ok(rounds)) = (
        std::env::var("SWAPLOCK_WAKE_KIND"),
        std::env::var_os("SWAPLOCK_WAKE_PATH"),
        std::env::var("SWAPLOCK_WAKE_ROUNDS"),
    ) else {
        return;
    };
    let lock = new(&kind, Path::new(&path)).poll_interval(Duration::from_secs(3600));
    for _ in 0..rounds.parse::<u32>().unwrap() {
        let began = Instant::now();
        match lock.lock_timeout(Duration::from_secs(20)) {
            Ok(guard) => guard.release().unwrap(),
            Err(e) => {
                eprintln!("{kind}: {e}");
                std::process::exit(1);
            }
        }
        if began.elapsed() >= Duration::from_secs(10) {
            eprintln!(
                "{kind}: waited {:?} for a lock held for microseconds",
                began.elapsed()
            );
            std::process::exit(1);
        }
    }
}

/// Several processes take turns on one lock, each polling once an hour:
/// every release must wake a waiter, through the exchanges, placeholders
/// and released markers of the releases in between, or a waiter sleeps
/// until its 20 s timeout and its process fails. A waiter that armed its
/// watch on a marker already leaving the path, or gave up looking after a
/// few such markers, did so within a few hundred rounds.
#[test]
fn contenders_that_poll_once_an_hour_never_miss_a_release() {
    let emulated = std::env::var_os("SWAPLOCK_TEST_RUNNER").is_some();
    let rounds = if emulated { "30" } else { "400" };
    for kind in ["soft", "marker", "lease"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let children: Vec<_> = (0..5)
            .map(|_| {
                command(&std::env::current_exe().unwrap(), "soft_wake")
                    .args(["--exact", "cycling_child", "--ignored", "--nocapture"])
                    .env("SWAPLOCK_WAKE_KIND", kind)
                    .env("SWAPLOCK_WAKE_PATH", &path)
                    .env("SWAPLOCK_WAKE_ROUNDS", rounds)
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut child in children {
            assert!(
                child.wait().unwrap().success(),
                "{kind}: a contender slept through a release until its timeout"
            );
        }
        assert!(!path.exists());
    }
}

/// An unlink of a marker that has another link (a backup's `cp -al`, an
/// `ln`) raises no "deleted" event, only a change of its link count: a
/// waiter looks at the lock path then, and wakes. filelock releases by
/// unlinking.
#[test]
fn a_release_wakes_a_waiter_though_the_marker_has_another_link() {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["soft", "marker", "lease"] {
        let path = dir.path().join(format!("{kind}.lock"));
        let holder = by_filelock(kind, &path);
        std::fs::hard_link(&path, dir.path().join(format!("{kind}.bak"))).unwrap();
        woken_by_release(new(kind, &path), holder);
    }
}

/// A holder of this host that dies raises no event on the lock path: the
/// waiter watches its process (a pidfd) and judges the marker again when it
/// exits, so it takes over long before its hourly poll. Python's holders
/// and ours, of each kind, are killed with SIGKILL; a Python holder is its
/// own process, ours is the `swaplock run` supervisor.
#[test]
fn a_killed_holder_of_this_host_wakes_a_waiter_of_each_kind() {
    for kind in ["soft", "marker", "lease"] {
        for by in [by_filelock, by_command] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("k.lock");
            let holder = by(kind, &path);
            let lock = new(kind, &path);
            let waiter = std::thread::spawn(move || {
                let lock = lock.poll_interval(Duration::from_secs(3600));
                let began = Instant::now();
                let got = lock.lock_timeout(Duration::from_secs(30));
                (got, began.elapsed())
            });
            while waiting_threads(&path) == 0 {
                assert!(!waiter.is_finished(), "{kind}: the waiter returned early");
                std::thread::yield_now();
            }
            let mut holder = holder;
            holder.child.kill().unwrap();
            holder.child.wait().unwrap();
            let (got, waited) = waiter.join().unwrap();
            let guard = got.unwrap_or_else(|e| panic!("{kind}: no takeover: {e}"));
            assert!(
                waited < Duration::from_secs(20),
                "{kind}: the death did not wake the waiter: it took over at its timeout"
            );
            guard.release().unwrap();
        }
    }
}
