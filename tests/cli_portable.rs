//! The `swaplock` command as every platform runs it (Windows under Wine in
//! CI): help and version, and a held lock's conflict status, of every
//! kind, told apart from the command's own. The rest: `cli.rs` on Linux,
//! `windows_cli.rs` on Windows.

#[path = "common/portable.rs"]
mod portable;

use portable::run_swaplock;
use std::path::Path;
use std::process::Output;
use swaplock::{FileLock, SoftLock};

const KINDS: [&str; 5] = ["fcntl", "flock", "soft", "marker", "lease"];

fn run(args: &[&str]) -> Output {
    run_swaplock(args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Holds `path` with a lock of `kind` in this process, a process other
/// than the commands the test runs; the answer lets go.
fn hold(kind: &str, path: &Path) -> Box<dyn FnOnce()> {
    match kind {
        "fcntl" | "flock" => {
            let lock = match kind {
                "fcntl" => FileLock::new(path),
                _ => FileLock::flock(path),
            };
            let guard = lock.lock().unwrap();
            Box::new(move || guard.release().unwrap())
        }
        _ => {
            let lock = match kind {
                "soft" => SoftLock::soft(path),
                "marker" => SoftLock::marker(path),
                _ => SoftLock::lease(path),
            };
            let guard = lock.lock().unwrap();
            Box::new(move || guard.release().unwrap())
        }
    }
}

#[test]
fn help_and_version() {
    for args in [
        &["--help"][..],
        &["-h"],
        &["run", "--help"],
        &["status", "-h"],
        &["break", "--help"],
    ] {
        let out = run(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        assert!(text(&out.stdout).starts_with("usage: swaplock"), "{args:?}");
    }
    let out = run(&["run", "--help"]);
    assert!(text(&out.stdout).contains("--conflict-exit-code"));
    let out = run(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        text(&out.stdout).trim(),
        format!("swaplock {}", env!("CARGO_PKG_VERSION"))
    );
}

/// `-E` sets the status of a held lock (255 unless set), told apart from
/// the command's own, which passes through.
#[test]
fn the_conflict_exit_code_tells_a_held_lock_apart() {
    let dir = tempfile::tempdir().unwrap();
    for kind in KINDS {
        let path = dir.path().join(format!("{kind}.lock"));
        let p = path.to_str().unwrap();
        let let_go = hold(kind, &path);
        let out = run(&[
            "run", "--kind", kind, "--fail", "-E", "7", p, "-c", "exit 0",
        ]);
        assert_eq!(out.status.code(), Some(7), "{kind}: {out:?}");
        let out = run(&[
            "run",
            "--kind",
            kind,
            "-w",
            "0.05",
            "--conflict-exit-code=9",
            p,
            "-c",
            "exit 0",
        ]);
        assert_eq!(out.status.code(), Some(9), "{kind}: {out:?}");
        let out = run(&["run", "--kind", kind, "--fail", p, "-c", "exit 0"]);
        assert_eq!(out.status.code(), Some(255), "{kind}: {out:?}");
        let out = run(&["status", "--kind", kind, p]);
        assert_eq!(out.status.code(), Some(1), "{kind}: {out:?}");
        let_go();
        let out = run(&[
            "run", "--kind", kind, "--fail", "-E", "7", p, "-c", "exit 3",
        ]);
        assert_eq!(
            out.status.code(),
            Some(3),
            "{kind}: the command's own status: {out:?}"
        );
        if !matches!(kind, "fcntl" | "flock") {
            assert!(!path.exists(), "{kind}: the marker was left");
        }
    }
}
