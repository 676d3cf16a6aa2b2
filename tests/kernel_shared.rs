//! Shared kernel locks: any number of holders share the read lock, which
//! excludes the exclusive lock both ways, against the real peers:
//! util-linux `flock(1)` for `flock` (`-s` shared, `-n` fail at once), the
//! reference `with-lock-ex` (a classic exclusive `fcntl` lock) for
//! `fcntl`. Between lock objects of one process: `kernel_in_process.rs`.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use std::process::Command;
use swaplock::FileLock;

/// `flock(1)` with `args` on `path`, running `true`: its exit code.
fn flock_tool(args: &[&str], path: &std::path::Path) -> Option<i32> {
    Command::new("flock")
        .args(args)
        .arg(path)
        .arg("true")
        .status()
        .unwrap()
        .code()
}

#[test]
fn a_shared_flock_is_shared_with_flock_s_and_excludes_flock_n() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let shared = FileLock::flock(&path).lock_shared().unwrap();
    assert_eq!(
        flock_tool(&["-s", "-n"], &path),
        Some(0),
        "flock -s shares it"
    );
    assert_eq!(flock_tool(&["-n"], &path), Some(1), "flock -n is excluded");
    shared.release().unwrap();
    assert_eq!(flock_tool(&["-n"], &path), Some(0));
}

#[test]
fn a_shared_fcntl_lock_excludes_with_lock_ex() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let shared = FileLock::new(&path).lock_shared().unwrap();
    let out = common::run(&common::reference(), dir.path(), &["-f", "a.lock", "true"]);
    assert_eq!(out.status.code(), Some(255), "{out:?}");
    shared.release().unwrap();
    let out = common::run(&common::reference(), dir.path(), &["-f", "a.lock", "true"]);
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn swaplock_run_shared_runs_beside_readers_and_not_beside_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let run = |args: &[&str]| {
        let mut cmd = common::command(&common::swaplock(), "swaplock");
        cmd.arg("run").args(args).arg(&path).args(["echo", "ran"]);
        cmd.output().unwrap()
    };
    for kind in ["fcntl", "flock"] {
        let reader = match kind {
            "fcntl" => FileLock::new(&path),
            _ => FileLock::flock(&path),
        }
        .lock_shared()
        .unwrap();
        let out = run(&["--kind", kind, "--shared", "--fail"]);
        assert_eq!(
            (out.status.code(), out.stdout.as_slice()),
            (Some(0), b"ran\n".as_slice()),
            "{kind}"
        );
        let out = run(&["--kind", kind, "-s", "--fail"]);
        assert_eq!(out.status.code(), Some(0), "{kind}");
        let out = run(&["--kind", kind, "--fail"]);
        assert_eq!(
            (out.status.code(), out.stdout.as_slice()),
            (Some(255), b"".as_slice()),
            "{kind}"
        );
        reader.release().unwrap();
    }
    let out = run(&["--kind", "soft", "--shared"]);
    assert_eq!(out.status.code(), Some(2), "soft kinds have no shared lock");
}
