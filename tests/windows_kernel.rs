//! The kernel lock on Windows (run under Wine in CI): `LockFileEx` on byte
//! 0 excludes other handles and other processes, a held lock file cannot be
//! deleted or renamed by anyone else, and `remove` deletes it once free.
//! Worker processes are this test executable, started again with
//! `SWAPLOCK_WINDOWS_WORKER` set.

#![cfg(windows)]

mod workers;

use std::io::ErrorKind;
use std::time::Duration;
use swaplock::FileLock;
use workers::{hold_until_told, holder, let_go, worker_process, WORKER};

/// Run in a worker process: `hold PATH` takes the lock, prints `held` and
/// waits for a line on stdin; `count PATH N` increments the number in
/// `PATH.count` N times, each under the lock.
#[test]
#[ignore = "run only as a worker process"]
fn worker() {
    let spec = std::env::var(WORKER).unwrap();
    let parts: Vec<&str> = spec.split('|').collect();
    match parts[..] {
        ["hold", path] => {
            let guard = FileLock::new(path).lock().unwrap();
            hold_until_told();
            guard.unlock().unwrap();
        }
        ["count", path, n] => {
            let lock = FileLock::new(path);
            let counter = format!("{path}.count");
            for _ in 0..n.parse::<u32>().unwrap() {
                let guard = lock.lock().unwrap();
                workers::increment(&counter);
                drop(guard);
            }
        }
        _ => panic!("bad worker spec {spec:?}"),
    }
}

#[test]
fn a_second_handle_in_this_process_is_excluded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let first = FileLock::new(&path).try_lock().unwrap();
    let e = FileLock::new(&path).try_lock().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    let e = FileLock::new(&path)
        .lock_timeout(Duration::from_millis(50))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
    first.unlock().unwrap();
    FileLock::new(&path).try_lock().unwrap();
}

#[test]
fn another_process_holds_it_until_it_lets_go() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.lock");
    let child = holder(&format!("hold|{}", path.display()));
    let e = FileLock::new(&path).try_lock().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    // No delete sharing: nobody can delete or rename a held lock file.
    assert!(std::fs::remove_file(&path).is_err());
    assert!(std::fs::rename(&path, dir.path().join("moved")).is_err());
    assert!(path.exists());
    let_go(child);
    let guard = FileLock::new(&path).try_lock().unwrap();
    guard.remove().unwrap();
    assert!(
        !path.exists(),
        "remove deletes a lock file nobody else has open"
    );
}

#[test]
fn remove_leaves_the_file_to_a_process_that_opened_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.lock");
    let guard = FileLock::new(&path).lock().unwrap();
    // A waiter in another process opens the file and blocks on the lock.
    let mut waiter = worker_process(&format!("count|{}|1", path.display()))
        .spawn()
        .unwrap();
    // Remove, once the waiter has the file open (it cannot be deleted
    // then); until then it may be deleted, and the waiter creates a new one.
    guard.remove().unwrap();
    assert!(waiter.wait().unwrap().success());
    let count = std::fs::read_to_string(dir.path().join("c.lock.count")).unwrap();
    assert_eq!(count, "1");
}

#[test]
fn processes_take_turns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.lock");
    let (workers, each) = (4, 50);
    workers::run_all(&format!("count|{}|{each}", path.display()), workers);
    let count = std::fs::read_to_string(dir.path().join("d.lock.count")).unwrap();
    assert_eq!(count, (workers * each).to_string(), "an increment was lost");
}
