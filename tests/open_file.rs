//! Locks on a file the caller opened ([`OpenFileLock`]): they exclude other
//! processes (the reference `with-lock-ex` for `fcntl`, util-linux
//! `flock(1)` for `flock`; on Windows, where both kinds are one
//! `LockFileEx` lock, this package's `swaplock status`) and the other
//! locks of this process, threads included, and shared guards of one
//! object share one kernel lock until the last of them goes.

#![cfg(any(target_os = "linux", target_os = "android", windows))]

#[path = "common/portable.rs"]
mod portable;

use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;
use swaplock::{FileLock, OpenFileLock};

fn open(path: &Path) -> File {
    portable::open_rw(path)
}

/// Whether another process finds the lock held.
fn held_elsewhere(flock: bool, path: &Path) -> bool {
    portable::held_elsewhere(if flock { "flock" } else { "fcntl" }, path)
}

/// A lock object on the path, `flock` or `fcntl`.
fn by_path(flock: bool, path: &Path) -> FileLock {
    if flock {
        FileLock::flock(path)
    } else {
        FileLock::new(path)
    }
}

/// A lock object on the open file, `flock` or `fcntl`.
fn on_file(flock: bool, file: File) -> OpenFileLock {
    if flock {
        OpenFileLock::flock(file)
    } else {
        OpenFileLock::new(file)
    }
}

#[test]
fn an_open_file_locks_against_processes_and_this_process() {
    for flock in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let mut lock = on_file(flock, open(&path));
        {
            let guard = lock.try_lock().unwrap();
            let mut file = guard.file();
            file.write_all(b"record\n").unwrap();
            assert!(held_elsewhere(flock, &path));
            let e = by_path(flock, &path).try_lock().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
            // Another open of the file, in another thread.
            let other = std::thread::scope(|s| {
                s.spawn(|| {
                    let mut other = on_file(flock, open(&path));
                    let e = other.try_lock().unwrap_err();
                    let t = other.lock_timeout(Duration::from_millis(5)).unwrap_err();
                    (e.kind(), t.kind())
                })
                .join()
                .unwrap()
            });
            assert_eq!(other, (ErrorKind::WouldBlock, ErrorKind::TimedOut));
            assert!(
                held_elsewhere(flock, &path),
                "another object's attempts keep it"
            );
        }
        assert!(!held_elsewhere(flock, &path));
        let path_guard = by_path(flock, &path).try_lock().unwrap();
        let e = lock.try_lock().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
        drop(path_guard);
        let guard = lock.lock().unwrap();
        guard.release().unwrap();
        let mut file = lock.into_inner();
        file.seek(SeekFrom::Start(0)).unwrap();
        let mut text = String::new();
        file.read_to_string(&mut text).unwrap();
        assert_eq!(text, "record\n");
    }
}

#[test]
fn shared_guards_of_one_object_share_one_lock() {
    for flock in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let lock = on_file(flock, open(&path));
        let first = lock.try_lock_shared().unwrap();
        let second = lock.lock_shared().unwrap();
        let third = lock.lock_shared_timeout(Duration::from_millis(5)).unwrap();
        // Other readers share it; writers wait.
        by_path(flock, &path)
            .try_lock_shared()
            .unwrap()
            .release()
            .unwrap();
        let e = by_path(flock, &path).try_lock().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
        first.release().unwrap();
        drop(third);
        assert!(
            held_elsewhere(flock, &path),
            "the second guard still holds it"
        );
        drop(second);
        assert!(!held_elsewhere(flock, &path));
        by_path(flock, &path).try_lock().unwrap().release().unwrap();
    }
}
