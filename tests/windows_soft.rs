//! Soft locks on Windows (run under Wine in CI): a marker held open without
//! delete sharing excludes every other process and cannot be moved or
//! deleted by anyone; a dead holder's marker is broken through a handle on
//! it, and a live holder's never is, an expired lease included; processes
//! take turns without losing an increment. Worker processes are this test
//! executable, started again with `SWAPLOCK_WINDOWS_WORKER` set.

#![cfg(windows)]

#[path = "common/portable.rs"]
mod portable;
mod workers;

use portable::others;
use std::io::ErrorKind;
use std::path::Path;
use std::process::Child;
use std::time::Duration;
use swaplock::soft::{Kind, SoftLock};
use workers::{hold_until_told, let_go, worker_process, WORKER};

fn kind(name: &str) -> Kind {
    match name {
        "soft" => Kind::Soft,
        "marker" => Kind::Marker,
        "lease" => Kind::Lease,
        other => panic!("no kind {other}"),
    }
}

fn lock(kind: Kind, path: &str) -> SoftLock {
    let lock = SoftLock::new(kind, path);
    if kind == Kind::Lease {
        lock.lease_duration(Duration::from_millis(600))
    } else {
        lock
    }
}

/// Run in a worker process: `hold KIND PATH` takes the lock, prints `held`
/// and waits for a line on stdin, then releases; `die KIND PATH` takes the
/// lock and exits without releasing; `count KIND PATH N` increments the
/// number in `PATH.count` N times, each under the lock.
#[test]
#[ignore = "run only as a worker process"]
fn worker() {
    let spec = std::env::var(WORKER).unwrap();
    let parts: Vec<&str> = spec.split('|').collect();
    match parts[..] {
        ["hold", k, path] => {
            let guard = lock(kind(k), path).lock().unwrap();
            hold_until_told();
            guard.release().unwrap();
        }
        ["die", k, path] => {
            let guard = lock(kind(k), path).lock().unwrap();
            std::mem::forget(guard);
            std::process::exit(0);
        }
        ["count", k, path, n] => {
            let lock = lock(kind(k), path).poll_interval(Duration::from_millis(5));
            let counter = format!("{path}.count");
            for _ in 0..n.parse::<u32>().unwrap() {
                let guard = lock.lock().unwrap();
                workers::increment(&counter);
                guard.release().unwrap();
            }
        }
        _ => panic!("bad worker spec {spec:?}"),
    }
}

/// A worker holding a `kind` lock on `path`, once it said so.
fn holder(kind: &str, path: &Path) -> Child {
    workers::holder(&format!("hold|{kind}|{}", path.display()))
}

/// A live holder's marker keeps everyone else out, and nobody can delete
/// or move it while its holder has it open. Apart from the Unix tests of
/// live holders (`soft_interop.rs`, against filelock's processes): there
/// any process may unlink or rename a marker.
#[test]
fn a_held_marker_excludes_others_and_cannot_be_moved() {
    for k in ["soft", "marker", "lease"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let child = holder(k, &path);
        let e = lock(kind(k), path.to_str().unwrap())
            .try_lock()
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{k}: {e}");
        // The holder keeps its marker open without delete sharing.
        assert!(std::fs::remove_file(&path).is_err(), "{k}: deleted");
        assert!(
            std::fs::rename(&path, dir.path().join("moved")).is_err(),
            "{k}: renamed"
        );
        let owner = SoftLock::new(kind(k), &path).owner().unwrap().unwrap();
        assert_eq!(owner.pid, Some(child.id()), "{k}: {owner:?}");
        assert!(owner.start.is_some(), "{k}: no start token in {owner:?}");
        let_go(child);
        assert!(!path.exists(), "{k}: release leaves the marker");
        let guard = lock(kind(k), path.to_str().unwrap()).try_lock().unwrap();
        guard.release().unwrap();
        assert_eq!(others(dir.path(), &[]), Vec::<String>::new(), "{k}");
    }
}

/// A holder that exits without releasing leaves a marker the next taker
/// breaks, leaving nothing aside. Apart from the Unix test of killed
/// holders (`soft_interop.rs`): that one runs against filelock's
/// processes, which no Wine test may start (`layering.rs`), and the break
/// there is an exchange of names, here a rename through a handle.
#[test]
fn a_dead_holders_marker_is_broken() {
    for k in ["soft", "marker", "lease"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.lock");
        let status = worker_process(&format!("die|{k}|{}", path.display()))
            .status()
            .unwrap();
        assert!(status.success());
        let before = SoftLock::new(kind(k), &path).owner().unwrap();
        assert!(
            before.as_ref().is_some_and(|o| o.pid.is_some()),
            "{k}: the dead holder left no marker: {before:?}"
        );
        let guard = lock(kind(k), path.to_str().unwrap())
            .lock_timeout(Duration::from_secs(10))
            .unwrap();
        let owner = SoftLock::new(kind(k), &path).owner().unwrap().unwrap();
        assert_eq!(owner.pid, Some(std::process::id()), "{k}");
        // The stale file was renamed aside and deleted: nothing is left.
        assert_eq!(others(dir.path(), &["b.lock"]), Vec::<String>::new(), "{k}");
        guard.release().unwrap();
    }
}

#[test]
fn a_live_lease_is_never_broken_here() {
    // The holder's heartbeat runs, but even a lease past its duration could
    // not be taken: its marker is open without delete sharing.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.lock");
    let child = holder("lease", &path);
    let e = lock(Kind::Lease, path.to_str().unwrap())
        .lock_timeout(Duration::from_millis(1500))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
    let_go(child);
    lock(Kind::Lease, path.to_str().unwrap())
        .try_lock()
        .unwrap()
        .release()
        .unwrap();
}

/// Processes take turns without losing an increment. The Unix tests of
/// the same (`soft_stress.rs`) also kill holders with SIGKILL while they
/// hold, which Windows has no counterpart of.
#[test]
fn processes_take_turns() {
    for k in ["soft", "marker"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.lock");
        let (workers, each) = (4, 40);
        workers::run_all(&format!("count|{k}|{}|{each}", path.display()), workers);
        let count = std::fs::read_to_string(dir.path().join("d.lock.count")).unwrap();
        assert_eq!(
            count,
            (workers * each).to_string(),
            "{k}: an increment was lost"
        );
        assert_eq!(
            others(dir.path(), &["d.lock.count"]),
            Vec::<String>::new(),
            "{k}"
        );
    }
}

#[test]
fn a_marker_asked_to_be_read_only_is_still_removed() {
    // Windows refuses to delete a read-only file; markers stay writable.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.lock");
    let guard = SoftLock::marker(&path).mode(0o444).try_lock().unwrap();
    guard.release().unwrap();
    assert!(!path.exists(), "the release left the marker");
}

#[test]
fn a_dead_holders_read_only_marker_is_broken_without_leftovers() {
    // A filelock holder asked for mode 0o444 leaves a read-only marker;
    // the takeover renames it aside and must still delete it.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ro.lock");
    let status = worker_process(&format!("die|soft|{}", path.display()))
        .status()
        .unwrap();
    assert!(status.success());
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&path, perms).unwrap();
    let guard = SoftLock::soft(&path)
        .lock_timeout(Duration::from_secs(10))
        .unwrap();
    assert_eq!(others(dir.path(), &["ro.lock"]), Vec::<String>::new());
    guard.release().unwrap();
}

#[test]
fn a_marker_made_read_only_while_held_is_still_removed() {
    // A backup tool or a user may set the read-only attribute on a held
    // marker; Windows then refuses its delete. Left behind, it would name
    // this live process and keep everyone out, this process included.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.lock");
    let guard = SoftLock::soft(&path).try_lock().unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&path, perms).unwrap();
    assert!(std::fs::metadata(&path).unwrap().permissions().readonly());
    guard.release().unwrap();
    assert!(!path.exists(), "the release left the marker");
    SoftLock::soft(&path).try_lock().unwrap().release().unwrap();
}

#[test]
fn a_marker_deleted_while_someone_reads_it_is_contention() {
    // A reader that shares delete keeps a deleted marker "delete pending"
    // under its name until it closes; creating over it is refused with
    // access denied, which is contention, not an error.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.lock");
    let guard = SoftLock::marker(&path).try_lock().unwrap();
    let reader = std::fs::File::open(&path).unwrap();
    guard.release().unwrap();
    let e = SoftLock::marker(&path).try_lock().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    drop(reader);
    SoftLock::marker(&path)
        .try_lock()
        .unwrap()
        .release()
        .unwrap();
    assert!(!path.exists());
}

/// On Unix `force_break` removes the marker whoever holds it
/// (`soft_interop.rs` uses it where no exchange can break a dead
/// holder's); here a live holder's handle, open without delete sharing,
/// refuses it.
#[test]
fn force_break_cannot_remove_a_live_marker() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.lock");
    let child = holder("marker", &path);
    let e = SoftLock::marker(&path).force_break().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{e}");
    assert!(path.exists());
    let_go(child);
}
