//! Kernel locks between lock objects of one process, the same test on
//! every platform (Windows under Wine in CI): open file description locks
//! on 64-bit Linux and Android, the process's registry elsewhere, and
//! `LockFileEx` on Windows.

use std::io::ErrorKind;
use std::time::Duration;
use swaplock::FileLock;

/// Shared guards of two lock objects share the lock; an exclusive one is
/// refused while they hold it and refuses them while it holds; a shared
/// guard cannot remove the file, the exclusive one can.
#[test]
fn shared_locks_share_and_exclude_the_exclusive_one() {
    for name in ["fcntl", "flock"] {
        let new = |p: &std::path::Path| match name {
            "fcntl" => FileLock::new(p),
            _ => FileLock::flock(p),
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let first = new(&path).try_lock_shared().unwrap();
        let second = new(&path).try_lock_shared().unwrap();
        let e = new(&path).try_lock().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{name}: {e}");
        let e = second.remove().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{name}: {e}");
        first.release().unwrap();
        let exclusive = new(&path).try_lock().unwrap();
        let e = new(&path).try_lock_shared().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{name}: {e}");
        let e = new(&path)
            .lock_shared_timeout(Duration::from_millis(20))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{name}: {e}");
        exclusive.remove().unwrap();
        assert!(!path.exists(), "{name}");
    }
}

/// A second lock object of the file is excluded as another process is:
/// at once, and after a timed wait; another thread waits for it and gets
/// it once the first lets go.
#[test]
fn a_second_lock_of_the_file_in_this_process_is_excluded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let first = FileLock::new(&path).try_lock().unwrap();
    let e = FileLock::new(&path).try_lock().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    let e = FileLock::new(&path)
        .lock_timeout(Duration::from_millis(20))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
    // Another thread waits for it, and gets it once the first lets go.
    let waiter = {
        let path = path.clone();
        std::thread::spawn(move || FileLock::new(&path).lock().and_then(|g| g.release()))
    };
    first.release().unwrap();
    waiter.join().unwrap().unwrap();
    FileLock::new(&path).try_lock().unwrap();
}
