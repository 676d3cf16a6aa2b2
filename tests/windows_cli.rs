//! The `swaplock` command on Windows (run under Wine in CI): `run` holds
//! the lock of every kind while its command runs as a child, `status`
//! reads every kind, and a held lock gives the conflict status.

#![cfg(windows)]

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Mutex;
use swaplock::{FileLock, SoftLock};

#[path = "common/portable.rs"]
mod portable;

use portable::swaplock;

/// Wine 8.0's CreateProcess fails now and then with ERROR_INTERNAL_ERROR
/// (1359, "Internal error.") when the tests' threads start processes at
/// once (one run in 40 here); each command runs to its end in its turn.
static TURN: Mutex<()> = Mutex::new(());

fn run(args: &[&str]) -> Output {
    let _turn = TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    Command::new(swaplock()).args(args).output().unwrap()
}

#[test]
fn version_and_help() {
    let out = run(&["--version"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("swaplock "));
    assert!(run(&["run", "--help"]).status.success());
}

/// The command runs with the lock held: the same command's `status`, run
/// as the command, finds it held (exit 1), as JSON too; afterwards it is
/// free.
#[test]
fn the_command_runs_under_the_lock_of_each_kind() {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["fcntl", "flock", "soft", "marker", "lease"] {
        let path = dir.path().join(format!("{kind}.lock"));
        let p = path.to_str().unwrap();
        let me = swaplock();
        let out = run(&[
            "run",
            "--kind",
            kind,
            p,
            me.to_str().unwrap(),
            "status",
            "--kind",
            kind,
            "--json",
            p,
        ]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{kind}: held while the command ran: {out:?}"
        );
        let json = String::from_utf8_lossy(&out.stdout);
        assert!(json.contains("\"held\":true"), "{kind}: {json}");
        let out = run(&["status", "--kind", kind, p]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{kind}: free afterwards: {out:?}"
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "free");
    }
}

/// A lock held elsewhere gives the conflict status (255, or `-E`'s), and
/// the command's own status passes through.
#[test]
fn a_held_lock_gives_the_conflict_status() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = dir.path().join("k.lock");
    let soft = dir.path().join("s.lock");
    let held_kernel = FileLock::new(&kernel).lock().unwrap();
    let held_soft = SoftLock::marker(&soft).lock().unwrap();
    for (kind, path) in [("fcntl", &kernel), ("marker", &soft)] {
        let p = path.to_str().unwrap();
        let out = run(&["run", "--kind", kind, "--fail", p, "cmd", "/C", "exit 0"]);
        assert_eq!(out.status.code(), Some(255), "{kind}: {out:?}");
        let out = run(&[
            "run", "--kind", kind, "-w", "0.05", "-E", "7", p, "cmd", "/C", "exit 0",
        ]);
        assert_eq!(out.status.code(), Some(7), "{kind}: {out:?}");
        let out = run(&["status", "--kind", kind, p]);
        assert_eq!(out.status.code(), Some(1), "{kind}: {out:?}");
    }
    held_kernel.release().unwrap();
    held_soft.release().unwrap();
    let p = kernel.to_str().unwrap();
    let out = run(&["run", "--kind", "fcntl", p, "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(!Path::new(&soft).exists());
}
