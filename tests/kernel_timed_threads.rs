//! The waiting threads that timed kernel-lock waits leave behind
//! (`src/kernel/wait.rs`), counted by name in `/proc/self/task`: one test,
//! alone in its process, so that no other test's threads are counted.
//!
//! - A classic `fcntl` lock (owned by the process) is never waited for on
//!   such a thread: its wait in the kernel would be the process's, merging
//!   with another guard's lock and releasing it on close.
//! - A thread left waiting for a lock file its holder removes does not
//!   create the file again once nobody waits.
//! - At most 16 such threads wait at once; further timed waits poll.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use std::io::ErrorKind;
use std::path::Path;
use std::time::{Duration, Instant};
use swaplock::FileLock;

/// The waiting threads of this process now.
fn waiting_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == "swaplock-wait")
        .count()
}

/// Yields until no waiting thread is left (they end once granted the lock
/// and nobody waits); fails after 30 s.
fn until_none_wait() {
    let began = Instant::now();
    while waiting_threads() > 0 {
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "a waiting thread stays"
        );
        std::thread::yield_now();
    }
}

fn timed_out(lock: &FileLock) {
    let err = lock.lock_timeout(Duration::from_millis(10)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut, "{err}");
}

/// Times out waits on `locks` until `n` waiting threads are named so; fails
/// after 30 s. A wait starts its thread only if its first attempt ends
/// before the deadline, which a loaded machine can miss; a later wait joins
/// a thread already there, so the retries start none beyond one per lock.
fn timed_out_until_waiting(locks: &[FileLock], n: usize) {
    let began = Instant::now();
    loop {
        for lock in locks {
            timed_out(lock);
        }
        if waiting_threads() >= n {
            return;
        }
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "fewer than {n} waiting threads"
        );
    }
}

#[test]
fn waiting_threads_stay_few_and_harmless() {
    if std::env::var_os("SWAPLOCK_TEST_RUNNER").is_some() {
        // Under an emulator the task list is the emulator's, whose threads
        // outlive the program's (seen under qemu-arm, loaded): counted by
        // the native runs (x86_64, i686).
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name);
    assert_eq!(waiting_threads(), 0);

    // A classic lock's timed wait polls: no thread is left. (Held by
    // another process: this one's classic lock would merge with it.)
    let mut cmd = common::command(&common::ours(), "with-lock-ex");
    cmd.arg("-w")
        .arg(at("classic.lock"))
        .args(["sh", "-c", common::HOLD]);
    let holder = common::Holder::spawn(cmd).0;
    timed_out(&FileLock::new(at("classic.lock")).owned_by_process());
    assert_eq!(waiting_threads(), 0, "a classic lock's wait left a thread");
    assert!(holder.release().success());

    // An open file description lock's does leave one (where the kernel
    // has them, and unless they are turned off), which ends once granted.
    let ofd = common::ofd();
    for (name, make) in [
        (
            "fcntl.lock",
            (|p: &Path| FileLock::new(p)) as fn(&Path) -> FileLock,
        ),
        ("flock.lock", |p: &Path| FileLock::flock(p)),
    ] {
        let path = at(name);
        let holder = make(&path).lock().unwrap();
        let by_thread = name == "flock.lock" || ofd;
        match by_thread {
            true => timed_out_until_waiting(&[make(&path)], 1),
            false => timed_out(&make(&path)),
        }
        assert_eq!(waiting_threads(), usize::from(by_thread), "{name}");
        // The holder removes the file: the thread locks the orphan, finds
        // the path empty, and leaves it so, nobody waiting.
        holder.remove().unwrap();
        until_none_wait();
        assert!(
            !path.exists(),
            "{name}: created again by a thread nobody waits on"
        );
    }

    // At most 16 threads wait; later timed waits poll, and still time out.
    let holders: Vec<_> = (0..20)
        .map(|i| {
            FileLock::flock(at(&format!("many-{i}.lock")))
                .lock()
                .unwrap()
        })
        .collect();
    let waits: Vec<_> = (0..20)
        .map(|i| FileLock::flock(at(&format!("many-{i}.lock"))))
        .collect();
    timed_out_until_waiting(&waits, 16);
    assert_eq!(waiting_threads(), 16);
    drop(holders);
    until_none_wait();
}
