//! A soft lock that a thread already holds, through another guard, and
//! then waits for with no timeout would wait forever: its own marker names
//! a live process, this one. It fails at once with an error of kind
//! `Deadlock`, as filelock raises "Deadlock"; with a timeout it times out,
//! and another thread waits for it as for any holder.

#![cfg(unix)]

use std::io::ErrorKind;
use std::time::Duration;
use swaplock::SoftLock;

#[test]
fn waiting_forever_for_a_path_this_thread_holds_is_a_deadlock_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let guard = SoftLock::soft(&path).lock().unwrap();
    for spelled in [path.clone(), dir.path().join(".").join("a.lock")] {
        let e = SoftLock::soft(&spelled).lock().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Deadlock, "{e}");
        assert!(e.to_string().contains("Deadlock"), "{e}");
    }
    let e = SoftLock::soft(&path)
        .lock_timeout(Duration::from_millis(20))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
    let e = SoftLock::soft(&path).try_lock().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    // Another thread is no deadlock: it waits, and takes it once released.
    let waiter = {
        let path = path.clone();
        std::thread::spawn(move || SoftLock::soft(&path).lock().and_then(|g| g.release()))
    };
    guard.release().unwrap();
    waiter.join().unwrap().unwrap();
    // Released: this thread may wait for it again.
    SoftLock::soft(&path).lock().unwrap().release().unwrap();
}

/// A relative path names another file once the working directory changes:
/// holding it in one directory is no reason to refuse it in another.
#[test]
fn a_relative_path_is_resolved_at_every_lock() {
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let back = std::env::current_dir().unwrap();
    std::env::set_current_dir(first.path()).unwrap();
    let lock = SoftLock::soft("rel.lock");
    let held = lock.lock().unwrap();
    std::env::set_current_dir(second.path()).unwrap();
    let other = lock.lock().unwrap();
    assert!(second.path().join("rel.lock").exists());
    std::env::set_current_dir(back).unwrap();
    other.release().unwrap();
    held.release().unwrap();
    assert!(!first.path().join("rel.lock").exists());
}
