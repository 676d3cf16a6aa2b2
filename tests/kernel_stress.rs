//! Mutual exclusion of kernel locks under stress: 8 processes take the lock
//! 2,000 times each (`SWAPLOCK_STRESS_ITERS` overrides), some holders
//! delete the lock file while holding it, some are SIGKILLed while holding
//! it, and an independent checker reads the log of entries and exits.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use common::stress;
use swaplock::FileLock;

/// The body of each child process: not a test of its own, but the worker
/// the stress tests run (`--ignored --exact worker` with the worker spec).
#[test]
#[ignore = "entry point of the stress test's child processes"]
fn worker() {
    let Some(spec) = stress::worker_spec() else {
        return;
    };
    let lock = if spec.kind == "fcntl" {
        FileLock::new(&spec.lock)
    } else {
        FileLock::flock(&spec.lock)
    };
    stress::work(
        &spec,
        || lock.lock().unwrap(),
        |guard, rng| {
            // A quarter of the holders delete the lock file as they leave.
            if rng.below(4) == 0 {
                guard.remove().unwrap();
            } else {
                drop(guard);
            }
        },
    );
}

#[test]
fn fcntl_locks_exclude_under_stress_on_the_default_filesystem() {
    let dir = tempfile::tempdir().unwrap();
    stress::report("fcntl", dir.path(), "the default filesystem");
}

#[test]
fn flock_locks_exclude_under_stress_on_tmpfs() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    stress::report("flock", dir.path(), "tmpfs");
}
