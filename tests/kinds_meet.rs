//! Kinds that meet on one path are told apart (PROTOCOL 2.9): a soft lock
//! whose path holds what another kind of lock left (a kernel lock's file,
//! held or not, a marker of the other soft protocol, the strict sentinel,
//! a read-write log beside it) names it, with what to do, in `status`, in
//! a timeout's error, and on stderr while `swaplock run` waits, instead of
//! waiting without a word or sharing the path with the other kind.
//!
//! The other kinds are the real ones: filelock 4.2.11's `FileLock`,
//! `SoftFileLock`, `SoftReadWriteLock`, and our own `marker` holders.

#![cfg(unix)]

mod common;

use common::{peer, peer_command, swaplock, Holder};
use serde_json::Value;
use std::io::ErrorKind;
use std::path::Path;
use std::time::Duration;
use swaplock::soft::Mismatch;
use swaplock::SoftLock;

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A Python filelock holder of `kind` on `path`, and its PID.
fn python_holder(kind: &str, path: &Path) -> (Holder, u32) {
    let (holder, line) = Holder::spawn(peer_command(&["hold", kind, s(path)]));
    let hello: Value = serde_json::from_str(&line).unwrap();
    (holder, hello["pid"].as_u64().unwrap() as u32)
}

/// `swaplock status --kind KIND --json PATH`, parsed.
fn status_json(kind: &str, path: &Path) -> Value {
    let out = common::command(&swaplock(), "swaplock")
        .args(["status", "--kind", kind, "--json", s(path)])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("status --json: {e}: {:?}", out.stdout))
}

/// The error of one attempt of a soft lock of `kind` on `path`, as text.
fn refusal(lock: &SoftLock) -> String {
    let e = lock.try_lock().expect_err("the path is another kind's");
    assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    e.to_string()
}

#[cfg(any(target_os = "linux", target_os = "android"))]
#[test]
fn a_kernel_lock_holder_is_named_with_its_pid() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.lock");
    let (holder, pid) = python_holder("filelock", &path);
    let lock = SoftLock::marker(&path);
    let found = lock.mismatch().unwrap().expect("a kernel lock");
    assert_eq!(
        found.mismatch(),
        Mismatch::KernelLock {
            flock: true,
            pid: pid as i32
        }
    );
    let said = refusal(&lock);
    assert!(
        said.contains(&format!("kernel lock (flock, by pid {pid})"))
            && said.contains("--kind flock"),
        "{said}"
    );
    let status = status_json("marker", &path);
    assert_eq!(status["mismatch"]["code"], "kernel-lock", "{status}");
    drop(holder);
    // Released, the file stays, empty: what kernel locks leave.
    let found = lock.mismatch().unwrap().expect("an empty file");
    assert_eq!(found.mismatch(), Mismatch::EmptyFile { checked: true });
}

#[test]
fn a_run_that_waits_on_an_empty_file_says_so_then_times_out_saying_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.lock");
    std::fs::write(&path, "").unwrap();
    let out = common::command(&swaplock(), "swaplock")
        .args(["run", "--kind", "soft", "--timeout", "4", s(&path), "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(255), "{stderr}");
    let waiting = format!(
        "swaplock: waiting for {}: another kind of lock uses this path: '{}' is an empty file",
        path.display(),
        path.display()
    );
    assert!(stderr.contains(&waiting), "{stderr}");
    assert!(
        stderr.contains("Another kind of lock uses this path:")
            && stderr.contains("swaplock break --force"),
        "{stderr}"
    );
    // A quick wait (under MISMATCH_AFTER) says nothing while it waits.
    let out = common::command(&swaplock(), "swaplock")
        .args([
            "run",
            "--kind",
            "soft",
            "--timeout",
            "0.2",
            s(&path),
            "true",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("swaplock: waiting for"), "{stderr}");
}

#[test]
fn a_soft_contender_never_takes_a_live_protocol_2_holder_which_filelock_soft_takes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.lock");
    let mut cmd = common::command(&swaplock(), "swaplock");
    cmd.args([
        "run",
        "--kind",
        "marker",
        s(&path),
        "sh",
        "-c",
        common::HOLD,
    ]);
    let (holder, _) = Holder::spawn(cmd);
    let marker = std::fs::read(&path).unwrap();
    // Past the 2 s grace period of a malformed marker: still held.
    let lock = SoftLock::soft(&path);
    let e = lock
        .lock_timeout(Duration::from_millis(2500))
        .expect_err("a live protocol 2 holder");
    assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
    let said = e.to_string();
    assert!(said.contains("holds a protocol 2 marker"), "{said}");
    assert_eq!(std::fs::read(&path).unwrap(), marker);
    // filelock's own SoftFileLock takes it for malformed, and removes it:
    // the two kinds do not exclude each other, which is why it is named.
    let taken = peer(&["try", "soft", s(&path), "5"]);
    assert_eq!(taken["result"], "acquired", "{taken}");
    drop(holder);
}

#[test]
fn a_protocol_1_marker_under_a_protocol_2_lock_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.lock");
    let (holder, _) = python_holder("soft", &path);
    let found = SoftLock::marker(&path).mismatch().unwrap();
    assert_eq!(found.map(|m| m.mismatch()), Some(Mismatch::Protocol1Marker));
    let status = status_json("lease", &path);
    assert_eq!(status["mismatch"]["code"], "protocol-1-marker", "{status}");
    // Its own kind reads it as its own: nothing to name.
    assert_eq!(SoftLock::soft(&path).mismatch().unwrap(), None);
    drop(holder);
}

#[test]
fn the_strict_sentinel_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.lock");
    std::fs::write(&path, b"1\nfilelock-strict-v1\x00\n0\n").unwrap();
    for lock in [SoftLock::soft(&path), SoftLock::marker(&path)] {
        let said = refusal(&lock);
        assert!(said.contains("the sentinel of a strict lock"), "{said}");
    }
    let out = common::command(&swaplock(), "swaplock")
        .args(["status", "--kind", "soft", s(&path)])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("another kind of lock: '") && stdout.contains("strict lock"),
        "{stdout}"
    );
}

#[test]
fn a_read_write_log_beside_the_path_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.lock");
    let (writer, _) = python_holder("rw", &path);
    assert!(dir.path().join("jobs.lock.rw").is_dir());
    // Nothing at the path: the soft lock is free beside the writer, which
    // is what must be said.
    let status = status_json("marker", &path);
    assert_eq!(status["held"], false, "{status}");
    assert_eq!(status["mismatch"]["code"], "read-write-log", "{status}");
    let guard = SoftLock::marker(&path).try_lock().expect("free beside it");
    let found = SoftLock::marker(&path).mismatch().unwrap();
    assert_eq!(found.map(|m| m.mismatch()), Some(Mismatch::ReadWriteLog));
    drop(guard);
    drop(writer);
}

#[test]
fn a_lock_of_the_path_own_kind_is_no_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.lock");
    let lock = SoftLock::marker(&path);
    assert_eq!(lock.mismatch().unwrap(), None);
    let _guard = lock.lock().unwrap();
    assert_eq!(lock.mismatch().unwrap(), None);
    let status = status_json("marker", &path);
    assert_eq!(status["mismatch"], Value::Null, "{status}");
}
