//! Reentrant soft locks (filelock's `is_singleton=True` and `lock_counter`):
//! a thread that holds a path through a reentrant lock re-enters it from
//! any reentrant instance, and the marker stays until the hold's last
//! guard goes; other threads, non-reentrant locks and other kinds are
//! excluded or refused as before.

#![cfg(unix)]

use std::io::ErrorKind;
use std::path::Path;
use std::time::Duration;
use swaplock::SoftLock;

/// Whether another thread of this process finds the lock held.
fn held_for_another_thread(path: &Path) -> bool {
    let path = path.to_path_buf();
    std::thread::spawn(move || match SoftLock::soft(&path).try_lock() {
        Ok(g) => {
            g.release().unwrap();
            false
        }
        Err(e) if e.kind() == ErrorKind::WouldBlock => true,
        Err(e) => panic!("{e}"),
    })
    .join()
    .unwrap()
}

#[test]
fn a_reentrant_hold_lasts_until_its_last_guard() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    for kind in [SoftLock::soft, SoftLock::marker, SoftLock::lease] {
        let outer = kind(path.clone()).reentrant(true).lock().unwrap();
        let marker = std::fs::read(&path).unwrap();
        // Another instance, spelled another way; each way to lock.
        let spelled = dir.path().join(".").join("a.lock");
        let inner = kind(spelled).reentrant(true).lock().unwrap();
        let tried = kind(path.clone()).reentrant(true).try_lock().unwrap();
        let timed = kind(path.clone())
            .reentrant(true)
            .lock_timeout(Duration::ZERO)
            .unwrap();
        assert_eq!(inner.token(), outer.token(), "one hold, one lease");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            marker,
            "the marker is untouched"
        );
        outer.release().unwrap();
        drop(tried);
        timed.release().unwrap();
        assert!(path.exists());
        assert!(held_for_another_thread(&path));
        inner.release().unwrap();
        assert!(!path.exists(), "the last guard released it");
        assert!(!held_for_another_thread(&path));
    }
}

#[test]
fn only_reentrant_locks_of_the_same_kind_in_the_same_thread_re_enter() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let held = SoftLock::marker(&path).reentrant(true).lock().unwrap();
    // A lock that is not reentrant: filelock's Deadlock.
    let e = SoftLock::marker(&path).lock().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Deadlock, "{e}");
    // Another kind: refused, as filelock refuses differing singletons.
    let e = SoftLock::soft(&path).reentrant(true).lock().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    // Another thread: excluded, reentrant or not.
    let other = {
        let path = path.clone();
        std::thread::spawn(move || {
            let e = SoftLock::marker(&path)
                .reentrant(true)
                .try_lock()
                .unwrap_err();
            e.kind()
        })
        .join()
        .unwrap()
    };
    assert_eq!(other, ErrorKind::WouldBlock);
    held.release().unwrap();
    // A hold taken without reentry is not re-entered.
    let plain = SoftLock::marker(&path).lock().unwrap();
    let e = SoftLock::marker(&path).reentrant(true).lock().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Deadlock, "{e}");
    plain.release().unwrap();
    assert!(!path.exists());
}
