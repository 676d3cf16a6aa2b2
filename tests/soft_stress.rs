//! Mutual exclusion of soft locks under stress: for each kind, 8 processes
//! take the lock 2,000 times each (`SWAPLOCK_STRESS_ITERS` overrides) on
//! tmpfs and on the default filesystem, some holders are SIGKILLed while
//! holding it (their markers must be broken by the others), and an
//! independent checker reads the log of entries and exits. No break or
//! restore name may be left behind.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use common::stress;
use std::path::Path;
use std::time::Duration;
use swaplock::soft::{Kind, SoftLock};

/// The body of each child process: not a test of its own, but the worker
/// the stress tests run (`--ignored --exact worker` with the worker spec).
#[test]
#[ignore = "entry point of the stress test's child processes"]
fn worker() {
    let Some(spec) = stress::worker_spec() else {
        return;
    };
    let kind = match spec.kind.as_str() {
        "soft" => Kind::Soft,
        "marker" => Kind::Marker,
        _ => Kind::Lease,
    };
    let lock = SoftLock::new(kind, &spec.lock).poll_interval(Duration::from_millis(1));
    stress::work(
        &spec,
        || lock.lock().unwrap(),
        |guard, _| guard.release().unwrap(),
    );
}

fn all_kinds(dir: &Path, place: &str) {
    for kind in ["soft", "marker", "lease"] {
        let sub = dir.join(kind);
        std::fs::create_dir(&sub).unwrap();
        stress::report(kind, &sub, place);
        let left = common::others(&sub, &["stress.log", "stress.lock"]);
        assert!(left.is_empty(), "{kind}: left {left:?}");
    }
}

#[test]
fn soft_locks_exclude_under_stress_on_tmpfs() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    all_kinds(dir.path(), "tmpfs");
}

#[test]
fn soft_locks_exclude_under_stress_on_the_default_filesystem() {
    let dir = tempfile::tempdir().unwrap();
    all_kinds(dir.path(), "the default filesystem");
}
