//! The kernel lock on Windows (run under Wine in CI): `LockFileEx` on byte
//! 0 excludes other processes, a held lock file cannot be deleted or
//! renamed by anyone else, and `remove` deletes it once free. Other
//! handles of this process are excluded as on every platform, in
//! `kernel_in_process.rs`, and locks on a file the caller opened in
//! `open_file.rs`.
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
            guard.release().unwrap();
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

/// Another process's lock keeps this one out until it lets go, and nobody
/// can delete or rename the held file. Apart from the Unix tests of
/// another process's lock (`with_lock_ex.rs`, against the reference):
/// there any process may unlink or rename a held lock file.
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

/// Processes take turns without losing an increment. The Unix tests of
/// the same (`kernel_stress.rs`) also kill holders with SIGKILL while they
/// hold, which Windows has no counterpart of.
#[test]
fn processes_take_turns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.lock");
    let (workers, each) = (4, 50);
    workers::run_all(&format!("count|{}|{each}", path.display()), workers);
    let count = std::fs::read_to_string(dir.path().join("d.lock.count")).unwrap();
    assert_eq!(count, (workers * each).to_string(), "an increment was lost");
}

/// An open that another process's work refuses for now is contention, not
/// an error: the file open elsewhere without sharing (an indexer, a virus
/// scanner) answers `ERROR_SHARING_VIOLATION`; a file being deleted (a
/// peer's `remove` while a handle is still open) answers
/// `ERROR_ACCESS_DENIED` until its last handle closes. Either used to
/// fail `lock()` with `PermissionDenied`.
#[test]
fn an_open_refused_while_a_peer_works_is_waited_out() {
    use std::os::windows::fs::OpenOptionsExt;
    const FILE_SHARE_READ: u32 = 1;
    const FILE_SHARE_WRITE: u32 = 2;
    const FILE_SHARE_DELETE: u32 = 4;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    std::fs::write(&path, b"").unwrap();

    // Open elsewhere without sharing.
    let exclusive = std::fs::OpenOptions::new()
        .read(true)
        .share_mode(0)
        .open(&path)
        .unwrap();
    let e = FileLock::new(&path).try_lock().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    let e = FileLock::new(&path)
        .lock_timeout(Duration::from_millis(50))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
    drop(exclusive);
    FileLock::new(&path).try_lock().unwrap().release().unwrap();

    // Being deleted: a handle that shares delete keeps the deleted file
    // pending until it closes. Where the system deletes with POSIX
    // semantics (recent Windows 10 and later on NTFS, and Wine), the name is
    // gone at once and a new file is locked; only older systems and other
    // filesystems reach the pending state, which this machine cannot.
    let pending = std::fs::OpenOptions::new()
        .read(true)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
        .open(&path)
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    match FileLock::new(&path).try_lock() {
        Ok(guard) => guard.release().unwrap(),
        Err(e) => assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}"),
    }
    drop(pending);
    FileLock::new(&path).lock().unwrap().release().unwrap();
}
