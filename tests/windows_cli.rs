//! The `swaplock` command on Windows (run under Wine in CI): `run` holds
//! the lock of every kind while its command runs as a child, which
//! `status` run as that command finds held. On Unix kernel kinds exec the
//! command, which then holds the lock itself, so `cli.rs` asks from a
//! shell's child instead. What every platform tests alike:
//! `cli_portable.rs`.

#![cfg(windows)]

use std::process::Output;

#[path = "common/portable.rs"]
mod portable;

use portable::{run_swaplock, swaplock};

fn run(args: &[&str]) -> Output {
    run_swaplock(args)
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
