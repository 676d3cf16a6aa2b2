//! A guard used in a child forked while it was held: the lock is the
//! parent's, so the child's `unlock`, `remove` and `release` are refused
//! with an error of kind `InvalidInput`, and neither they nor dropping the
//! guard in the child release the parent's lock or remove its marker.
//! (Without the check, the child's unlock of an open file description or
//! `flock` lock, which the two share, would release the parent's lock.)

#![cfg(unix)]

mod common;

use std::io::ErrorKind;
use std::path::Path;
use swaplock::{FileLock, SoftLock};

/// Runs `$child` in a forked child, which exits with its answer (0: as
/// expected), and waits for it: the child's answer. The child only calls
/// into the library and leaves through `_exit`, running none of the
/// parent's exit hooks. (A macro, so that the child may consume a guard
/// the parent goes on using.)
macro_rules! in_forked_child {
    ($child:expr) => {{
        // SAFETY: the child evaluates `$child` and leaves through `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let code: i32 = $child;
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(code) }
        }
        wait_for(pid)
    }};
}

fn wait_for(pid: libc::pid_t) -> i32 {
    let mut status = 0;
    // SAFETY: `status` is a valid out-pointer; `pid` is our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "child status {status}");
    libc::WEXITSTATUS(status)
}

fn refused(r: std::io::Result<()>) -> i32 {
    match r {
        Err(e) if e.kind() == ErrorKind::InvalidInput => 0,
        Err(_) => 1,
        Ok(()) => 2,
    }
}

/// Whether another process (the reference with-lock-ex) finds the lock
/// held.
fn held_elsewhere(dir: &Path) -> bool {
    let out = common::run(&common::reference(), dir, &["-f", "a.lock", "true"]);
    match out.status.code() {
        Some(0) => false,
        Some(255) => true,
        _ => panic!("{out:?}"),
    }
}

#[test]
fn a_forked_child_cannot_release_its_parents_lock() {
    let kinds: [fn(&Path) -> FileLock; 3] = [
        |p| FileLock::new(p),
        |p| FileLock::new(p).owned_by_process(),
        |p| FileLock::flock(p),
    ];
    for (n, new) in kinds.into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let guard = new(&path).lock().unwrap();
        assert_eq!(in_forked_child!(refused(guard.unlock())), 0, "kind {n}");
        assert_eq!(in_forked_child!(refused(guard.remove())), 0, "kind {n}");
        assert_eq!(
            in_forked_child!({
                drop(guard);
                0
            }),
            0,
            "kind {n}"
        );
        assert!(path.exists(), "kind {n}");
        if n != 2 {
            // fcntl locks: the reference sees them (flock ones it does not).
            assert!(held_elsewhere(dir.path()), "kind {n}");
        } else {
            let e = FileLock::flock(&path).try_lock().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
        }
        guard.remove().unwrap();
        assert!(!path.exists(), "kind {n}");
    }
}

#[test]
fn a_forked_child_never_removes_its_parents_marker() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let kinds: [fn(&Path) -> SoftLock; 3] = [
        |p| SoftLock::soft(p),
        |p| SoftLock::marker(p),
        // A lease has a heartbeat thread, which the child has not.
        |p| SoftLock::lease(p),
    ];
    for (n, new) in kinds.into_iter().enumerate() {
        let guard = new(&path).try_lock().unwrap();
        let before = std::fs::read(&path).unwrap();
        assert_eq!(in_forked_child!(refused(guard.release())), 0, "kind {n}");
        assert_eq!(
            in_forked_child!({
                drop(guard);
                0
            }),
            0,
            "kind {n}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), before, "kind {n}");
        let e = new(&path).try_lock().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "kind {n}: {e}");
        guard.release().unwrap();
        assert!(!path.exists(), "kind {n}");
    }
}
