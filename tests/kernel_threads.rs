//! One process, many locks: on 64-bit Linux and Android an `fcntl` [`FileLock`]
//! is an open file description lock, so a second lock object of the same
//! file, in another thread or the same one, is excluded as another process
//! is, and closing some other descriptor of the file keeps the lock. The
//! classic lock, owned by the process, stays available (and is what
//! `with-lock-ex` takes), and the two exclude each other.

// Open file description locks only where `off_t` is 64 bits.
#![cfg(all(
    any(target_os = "linux", target_os = "android"),
    target_pointer_width = "64"
))]

mod common;

use std::io::ErrorKind;
use std::time::Duration;
use swaplock::FileLock;

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
        std::thread::spawn(move || FileLock::new(&path).lock().and_then(|g| g.unlock()))
    };
    first.unlock().unwrap();
    waiter.join().unwrap().unwrap();
    FileLock::new(&path).try_lock().unwrap();
}

#[test]
fn closing_another_descriptor_of_the_file_keeps_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let guard = FileLock::new(&path).lock().unwrap();
    // Opens and closes the lock file: a classic lock would be gone now.
    std::fs::read(&path).unwrap();
    drop(std::fs::File::open(&path).unwrap());
    // The reference with-lock-ex, a classic lock in another process, is
    // still excluded.
    let out = common::run(&common::reference(), dir.path(), &["-f", "a.lock", "true"]);
    assert_eq!(out.status.code(), Some(255), "{out:?}");
    guard.unlock().unwrap();
    let out = common::run(&common::reference(), dir.path(), &["-f", "a.lock", "true"]);
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn a_process_owned_lock_is_the_classic_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let classic = FileLock::new(&path).owned_by_process().try_lock().unwrap();
    // Classic locks of one process do not exclude each other...
    let again = FileLock::new(&path).owned_by_process().try_lock().unwrap();
    // ...but an open file description lock conflicts with them.
    let e = FileLock::new(&path).try_lock().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    // Closing any descriptor of the file releases the process's lock.
    drop(again);
    FileLock::new(&path).try_lock().unwrap().unlock().unwrap();
    drop(classic);
}

/// A thread that waits with no timeout for a file it holds through another
/// guard would wait forever (the kernel has no deadlock detection for these
/// locks): it gets an error of kind `Deadlock` at once. A timed wait times
/// out; a shared lock's holder asking for the exclusive one is the same
/// case; another thread waits as usual.
#[test]
fn this_thread_waiting_for_a_lock_it_holds_is_a_deadlock_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let kinds: [fn(std::path::PathBuf) -> FileLock; 2] = [FileLock::new, FileLock::flock];
    for new in kinds {
        let held = new(path.clone()).lock().unwrap();
        let e = new(path.clone()).lock().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Deadlock, "{e}");
        let e = new(path.clone()).lock_shared().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Deadlock, "{e}");
        let e = new(path.clone())
            .lock_timeout(Duration::from_millis(20))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
        held.unlock().unwrap();
        let reader = new(path.clone()).lock_shared().unwrap();
        let e = new(path.clone()).lock().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Deadlock, "{e}");
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || new(path.clone()).lock().and_then(|g| g.unlock()))
        };
        drop(reader);
        waiter.join().unwrap().unwrap();
        new(path.clone()).lock().unwrap().unlock().unwrap();
    }
}
