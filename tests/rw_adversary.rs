//! The read-write lock against states planted on disk and callers that
//! misbehave: each test plants what a peer, a crash or a caller can leave
//! and checks the promise (never two holders, never a wedge, errors that
//! name their cause) still holds.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use common::rw::{holders, log_dir, newest, snapshot};
use std::io::ErrorKind;
use std::path::Path;
use std::time::Duration;
use swaplock::rw::SoftRwLock;

/// A reader that a planted record keeps alive for the default threshold
/// (90 s, far past the test).
const READER: &str = "0123456789abcdef0123456789abcdef";

/// Plants generation `n` naming `reader` with a fresh record (a live peer
/// in another process, as far as any observer can tell within 90 s).
fn plant_reader(path: &Path, n: u128, reader: &str) {
    let root = log_dir(path);
    std::fs::create_dir_all(root.join("gen")).unwrap();
    std::fs::create_dir_all(root.join("holders")).unwrap();
    std::fs::write(
        root.join("holders").join(reader),
        format!(
            "filelock-rw/1\ntoken={reader}\npid=1\nhost=elsewhere\nlease=90.0\nnonce={reader}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        root.join(format!("gen/{n:020}")),
        format!("filelock-rw/1\ngeneration={n}\nreader={reader}\n"),
    )
    .unwrap();
}

/// A wait hook that panics (a logger, a metrics call, an assertion in the
/// caller's code) must not leave the process's participant behind: the
/// soft and kernel kinds catch it, leave the wait, and let the panic go on
/// (`a_panicking_hook_leaves_no_waiter_behind` in `tests/wait_hook.rs`).
/// Here a writer entered the log (keeping readers out) and its hook
/// panicked: its entry must be committed away, and this process must be
/// able to take the lock again.
#[test]
fn a_panicking_wait_hook_leaves_neither_a_writer_in_the_log_nor_a_busy_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    plant_reader(&path, 1, READER);
    let lock = SoftRwLock::new(&path).poll_interval(Duration::from_millis(10));
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        lock.write_with(None, |_| panic!("the caller's hook panics"))
    }));
    assert!(panicked.is_err(), "the hook's panic reaches the caller");
    // The writer entered at 2 (writer + the planted reader) before its hook
    // ran: it must have left the log again.
    let (writer, _) = snapshot(&path, newest(&path)).unwrap();
    assert_eq!(
        writer,
        None,
        "the panicked writer is still named at generation {}: every reader stays out \
         until its record ages out",
        newest(&path)
    );
    assert_eq!(
        holders(&path),
        vec![READER.to_owned()],
        "its holder record stays behind"
    );
    // The process itself is not wedged: another reader of this process is
    // admitted beside the planted one.
    let other = SoftRwLock::new(&path);
    let g = other
        .try_read()
        .expect("this process's lock stays busy for ever after a hook's panic");
    drop(g);
}

/// A log whose generations reach 20 digits (a state filelock itself
/// accepts and writes: `generation=99999999999999999999` is valid) stops
/// every commit. The error must say so, not blame the number of members.
#[test]
fn a_log_at_the_last_generation_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let root = log_dir(&path);
    std::fs::create_dir_all(root.join("gen")).unwrap();
    std::fs::create_dir_all(root.join("holders")).unwrap();
    let last = "99999999999999999999";
    std::fs::write(
        root.join("gen").join(last),
        format!("filelock-rw/1\ngeneration={last}\n"),
    )
    .unwrap();
    let e = SoftRwLock::new(&path).try_write().unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("20 digits") && !text.contains("members"),
        "the error names the wrong cause: {text}"
    );
    assert_ne!(e.kind(), ErrorKind::WouldBlock, "{text}");
}

/// `swaplock run --kind rw --lease SECS` sets the stale threshold, its
/// heartbeat a third of it, and keeps filelock's poll of 0.25 s, which must
/// stay below the threshold. A lease too short for that is the user's
/// `--lease`, and the message must say so: not `poll_interval` or
/// `heartbeat_interval`, which the command line never sets.
#[test]
fn a_lease_too_short_for_the_read_write_lock_names_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    for lease in ["0", "0.2", "0.25"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_swaplock"))
            .args(["run", "--kind", "rw", "--lease", lease])
            .arg(&path)
            .arg("true")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "a usage error: {err}");
        assert!(
            err.contains("--lease") && !err.contains("_interval"),
            "--lease {lease}: {err}"
        );
    }
    assert!(!log_dir(&path).exists(), "refused before anything is made");
}
