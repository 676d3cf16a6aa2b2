//! `lock_with`: a wait's hook is called while the lock is held, can name
//! the holder, and can cancel the wait (an `Interrupted` error that holds
//! nothing); a wait it lets go on takes the lock once released.

#[path = "common/portable.rs"]
mod portable;

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
        let (go_tx, holder) = held_elsewhere(kind, &path);
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
        let (go_tx, holder) = {
            let path = path.clone();
            portable::held_by_a_thread(
                move || make(&path).lock().unwrap(),
                |g| g.release().unwrap(),
            )
        };
        let mut calls = 0;
        let err = make(&path)
            .lock_with(None, |wait| {
                calls += 1;
                // A classic lock of this process is never seen by the
                // query (the registry stands in where the kernel has no
                // open file description locks).
                #[cfg(unix)]
                if kind == "flock" || portable::ofd() {
                    assert!(wait.holder().unwrap().is_some(), "{kind}: a holder");
                }
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

/// Holds a soft lock of `kind` in a thread of its own until told: the
/// go-ahead, and the thread.
fn held_elsewhere(
    kind: &'static str,
    path: &std::path::Path,
) -> (mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let path = path.to_path_buf();
    portable::held_by_a_thread(
        move || soft(kind, &path).lock().unwrap(),
        |g| g.release().unwrap(),
    )
}

/// A hook that panics leaves the wait for good: no release hands its hold
/// to the dead wait, and the lock is free once its holder releases.
#[test]
fn a_panicking_hook_leaves_no_waiter_behind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.lock");
    let (go, holder) = held_elsewhere("marker", &path);
    let waiter = {
        let path = path.clone();
        std::thread::spawn(move || {
            let mut calls = 0;
            soft("marker", &path).lock_with(None, |_| {
                calls += 1;
                assert!(calls < 2, "the hook's own panic");
                ControlFlow::Continue(())
            })
        })
    };
    assert!(
        waiter.join().is_err(),
        "the hook's panic reaches the caller"
    );
    assert_eq!(swaplock::soft::waiting_threads(&path), 0);
    go.send(()).unwrap();
    holder.join().unwrap();
    assert!(!path.exists(), "the release was handed to a dead wait");
}

/// A hook that cancels after a release handed this wait the hold: the
/// wait still holds nothing, and the lock is free.
#[test]
fn a_cancelled_wait_gives_back_a_hold_handed_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.lock");
    let (go, holder) = held_elsewhere("marker", &path);
    let mut holder = Some(holder);
    let mut calls = 0;
    let got = soft("marker", &path).lock_with(None, |_| {
        calls += 1;
        if calls == 2 {
            // The holder releases now, handing its hold to this wait,
            // which entered the waiters at its first busy attempt.
            go.send(()).unwrap();
            holder.take().unwrap().join().unwrap();
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    let err = got.map(drop).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted, "{err}");
    assert!(!path.exists(), "a cancelled wait kept the lock");
}

/// A hook that itself takes and releases another soft lock does not make
/// the wait spin: its own release is no reason to look again.
#[test]
fn a_hook_that_uses_another_soft_lock_waits_its_poll() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.lock");
    let other = dir.path().join("other.lock");
    let (go, holder) = held_elsewhere("marker", &path);
    let mut calls = 0;
    let err = SoftLock::marker(&path)
        .poll_interval(Duration::from_millis(100))
        .lock_with(Some(Duration::from_secs(1)), |_| {
            calls += 1;
            SoftLock::marker(&other).lock().unwrap().release().unwrap();
            ControlFlow::Continue(())
        })
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut, "{err}");
    // About ten polls in a second; a spin makes thousands.
    assert!(calls <= 40, "{calls} hook calls in 1 s");
    go.send(()).unwrap();
    holder.join().unwrap();
}
