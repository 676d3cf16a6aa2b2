//! `lock_with`: a wait's hook is called while the lock is held, can name
//! the holder, and can cancel the wait (an `Interrupted` error that holds
//! nothing); a wait it lets go on takes the lock once released.

use std::io::ErrorKind;
use std::ops::ControlFlow;
use std::sync::mpsc;
use std::time::Duration;
use swaplock::{FileLock, SoftLock};

const SOFT: [&str; 3] = ["soft", "marker", "lease"];

/// A kernel kind's name, and how a lock object of it is made.
type Make = (&'static str, fn(&std::path::Path) -> FileLock);

fn soft(kind: &str, path: &std::path::Path) -> SoftLock {
    let lock = match kind {
        "soft" => SoftLock::soft(path),
        "marker" => SoftLock::marker(path),
        _ => SoftLock::lease(path),
    };
    lock.poll_interval(Duration::from_millis(5))
}

#[test]
fn a_soft_wait_hook_names_the_holder_and_cancels() {
    for kind in SOFT {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.lock");
        // Held by another thread: this one would deadlock on itself.
        let (held_tx, held_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let holder = {
            let path = path.clone();
            std::thread::spawn(move || {
                let g = soft(kind, &path).lock().unwrap();
                held_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                g.release().unwrap();
            })
        };
        held_rx.recv().unwrap();
        let mut calls = 0;
        let mut seen = None;
        let err = soft(kind, &path)
            .lock_with(None, |wait| {
                calls += 1;
                seen = wait.holder().unwrap().and_then(|h| h.pid);
                match calls {
                    3 => ControlFlow::Break(()),
                    _ => ControlFlow::Continue(()),
                }
            })
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Interrupted, "{kind}: {err}");
        assert_eq!(calls, 3, "{kind}");
        assert_eq!(seen, Some(std::process::id()), "{kind}");
        // Nothing of the cancelled wait's is left beside the holder's
        // marker.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "{kind}: {names:?}");
        go_tx.send(()).unwrap();
        holder.join().unwrap();
        assert!(!path.exists(), "{kind}");
    }
}

#[test]
fn a_soft_wait_the_hook_lets_go_on_takes_the_lock() {
    for kind in SOFT {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.lock");
        let held = soft(kind, &path).lock().unwrap();
        let (tx, rx) = mpsc::channel();
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || {
                soft(kind, &path).lock_with(Some(Duration::from_secs(60)), |wait| {
                    let _ = tx.send(wait.waited());
                    ControlFlow::Continue(())
                })
            })
        };
        rx.recv().unwrap();
        held.release().unwrap();
        let guard = waiter.join().unwrap().unwrap();
        guard.release().unwrap();
    }
}

#[test]
fn a_kernel_wait_hook_names_the_holder_and_cancels() {
    let kinds: [Make; 2] = [
        ("fcntl", |p| FileLock::new(p)),
        ("flock", |p| FileLock::flock(p)),
    ];
    for (kind, make) in kinds {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.lock");
        // Held by another thread: this one would deadlock on itself.
        let (held_tx, held_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let holder = {
            let path = path.clone();
            std::thread::spawn(move || {
                let g = make(&path).lock().unwrap();
                held_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                g.release().unwrap();
            })
        };
        held_rx.recv().unwrap();
        let mut calls = 0;
        let err = make(&path)
            .lock_with(None, |wait| {
                calls += 1;
                #[cfg(unix)]
                assert!(wait.holder().unwrap().is_some(), "{kind}: a holder");
                let _ = wait;
                match calls {
                    2 => ControlFlow::Break(()),
                    _ => ControlFlow::Continue(()),
                }
            })
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Interrupted, "{kind}: {err}");
        // A wait the hook lets go on takes the lock once released.
        let (called_tx, called_rx) = mpsc::channel();
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || {
                make(&path).lock_with(Some(Duration::from_secs(60)), |_| {
                    let _ = called_tx.send(());
                    ControlFlow::Continue(())
                })
            })
        };
        called_rx.recv().unwrap();
        go_tx.send(()).unwrap();
        holder.join().unwrap();
        waiter.join().unwrap().unwrap().release().unwrap();
    }
}

#[test]
fn a_kernel_wait_for_a_lock_this_thread_holds_is_a_deadlock_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.lock");
    let held = FileLock::new(&path).lock().unwrap();
    let err = FileLock::new(&path)
        .lock_with(None, |_| ControlFlow::Continue(()))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Deadlock, "{err}");
    held.release().unwrap();
}
