//! The read-write lock's liveness against the real Python filelock 4.2.11,
//! both ways, with real processes (PROTOCOL 16.7, 16.8): a killed holder is
//! evicted once its record has been still for the contender's threshold,
//! never sooner, and in the very commit that admits the contender; a
//! record's longer lease wins; a live holder, and a patient waiter, are
//! never evicted; a paused holder is evicted and learns it when it runs
//! again; orphaned records and temporaries are swept. Each test prints the
//! times it measured.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use common::poll_until;
use common::rw::{
    holders, log_dir, newest, next_line, snapshot,
    Side::{self, Python, Rust},
    Terms,
};
use serde_json::Value;
use std::io::BufReader;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

/// The body of the Rust participants' processes: not a test of its own.
#[test]
#[ignore = "entry point of the read-write liveness tests' worker processes"]
fn worker() {
    common::rw::worker();
}

/// Heartbeat 0.5 s, stale 1.5 s, quick polls.
const FAST: Terms = (0.5, 1.5, 0.05);
/// Heartbeat 0.2 s, stale 0.6 s.
const QUICKER: Terms = (0.2, 0.6, 0.05);

fn generation(v: &Value) -> u128 {
    match v {
        Value::String(s) => s.parse().unwrap(),
        v => v.as_u64().unwrap().into(),
    }
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill has no memory preconditions.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

#[test]
fn a_killed_holder_is_evicted_by_the_commit_that_admits_its_successor() {
    for dead in [Python, Rust] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let (mut holder, hello) = dead.hold("write", &path, FAST);
        let token = hello["token"].as_str().unwrap().to_owned();
        holder.child.kill().unwrap();
        holder.child.wait().unwrap();
        let got = dead.other().attempt("write", &path, 10.0, FAST);
        assert_eq!(got["result"], "acquired", "{got}");
        let elapsed = got["elapsed"].as_f64().unwrap();
        eprintln!(
            "{:?} evicted a killed {dead:?} writer after {elapsed:.3} s (stale 1.5 s, poll 0.05 s)",
            dead.other()
        );
        assert!(
            elapsed >= 1.45,
            "evicted after {elapsed} s, before the threshold"
        );
        assert!(elapsed < 1.5 + 10.0, "never evicted in time: {elapsed}");
        let g = generation(&got["generation"]);
        assert_eq!(
            snapshot(&path, g - 1).unwrap().0,
            Some(token.clone()),
            "named until then"
        );
        let admitted = snapshot(&path, g).unwrap().0.unwrap();
        assert_ne!(
            admitted, token,
            "the eviction and the admission are one commit"
        );
        assert!(holders(&path).is_empty(), "the dead record is gone");
    }
}

#[test]
fn the_longer_lease_of_a_record_wins() {
    for dead in [Python, Rust] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let (mut holder, _) = dead.hold("read", &path, (1.0, 3.0, 0.05));
        holder.child.kill().unwrap();
        holder.child.wait().unwrap();
        let got = dead.other().attempt("write", &path, 15.0, (0.3, 1.0, 0.05));
        assert_eq!(got["result"], "acquired", "{got}");
        let elapsed = got["elapsed"].as_f64().unwrap();
        eprintln!("{:?} (threshold 1.0 s) evicted a killed {dead:?} reader (lease 3.0 s) after {elapsed:.3} s", dead.other());
        assert!(
            elapsed >= 3.0,
            "the record's lease of 3 s was cut short: {elapsed}"
        );
    }
}

#[test]
fn a_live_holder_is_never_evicted_and_its_nonce_changes_in_place() {
    for live in [Rust, Python] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let (holder, hello) = live.hold("write", &path, QUICKER);
        let record = log_dir(&path)
            .join("holders")
            .join(hello["token"].as_str().unwrap());
        let contenders: Vec<_> = (0..4)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || live.other().attempt("write", &path, 2.0, QUICKER))
            })
            .collect();
        let first = std::fs::metadata(&record).unwrap();
        let mut last = std::fs::read(&record).unwrap();
        for _ in 0..3 {
            poll_until(Duration::from_secs(5), "the nonce changes", || {
                std::fs::read(&record).is_ok_and(|now| now != last)
            });
            let meta = std::fs::metadata(&record).unwrap();
            assert_eq!(
                (meta.ino(), meta.len()),
                (first.ino(), first.len()),
                "in place, same length"
            );
            last = std::fs::read(&record).unwrap();
        }
        for c in contenders {
            let got = c.join().unwrap();
            assert_eq!(got["result"], "timeout", "{live:?} holder evicted: {got}");
        }
        assert_eq!(
            snapshot(&path, newest(&path)).unwrap().0.as_deref(),
            hello["token"].as_str()
        );
        assert!(holder.release().success());
    }
}

#[test]
fn a_patient_writer_is_neither_evicted_nor_swept_while_it_waits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let (reader, _) = Python.hold("read", &path, QUICKER);
    let mut writer = Rust.waiter("write", &path, QUICKER);
    poll_until(
        Duration::from_secs(20),
        "the writer enters",
        || matches!(snapshot(&path, newest(&path)), Some((Some(_), r)) if r.len() == 1),
    );
    let entered = snapshot(&path, newest(&path)).unwrap().0.unwrap();
    // A third participant waits three thresholds behind it.
    let third = Python.attempt("read", &path, 1.8, QUICKER);
    assert_eq!(third["result"], "timeout");
    assert_eq!(
        snapshot(&path, newest(&path)).unwrap().0,
        Some(entered.clone()),
        "still named"
    );
    assert!(
        holders(&path).contains(&entered),
        "its record is still there"
    );
    assert!(reader.release().success());
    let mut out = BufReader::new(writer.stdout.take().unwrap());
    let hello = next_line(&mut out);
    assert_eq!(hello["token"], entered.as_str());
    eprintln!(
        "a Rust writer waited {:.3} s behind a Python reader",
        hello["waited"].as_f64().unwrap()
    );
    drop(writer.stdin.take());
    assert!(writer.wait().unwrap().success());
}

/// The word a side uses for an eviction.
fn evicted(side: Side) -> &'static str {
    match side {
        Python => "evicted",
        Rust => "Evicted",
    }
}

#[test]
fn a_paused_holder_is_evicted_and_learns_it_when_it_runs_again() {
    for paused in [Rust, Python] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let (mut holder, hello) = paused.hold("write", &path, FAST);
        let before = generation(&hello["generation"]);
        signal(holder.child.id(), libc::SIGSTOP);
        let (taker, taken) = paused.other().hold("write", &path, FAST);
        let after = generation(&taken["generation"]);
        assert!(
            after > before,
            "the fencing token grows: {before} then {after}"
        );
        let resumed = Instant::now();
        signal(holder.child.id(), libc::SIGCONT);
        let report = next_line(&mut holder.stdout);
        assert_eq!(report["compromise"], evicted(paused), "{report}");
        eprintln!(
            "a paused {paused:?} holder learnt of its eviction {:.3} s after it ran again (heartbeat 0.5 s)",
            resumed.elapsed().as_secs_f64()
        );
        assert!(resumed.elapsed() < Duration::from_secs(10));
        // Its release leaves the log as the new holder has it.
        assert!(holder.release().success());
        assert_eq!(
            snapshot(&path, newest(&path)).unwrap().0.as_deref(),
            taken["token"].as_str()
        );
        assert!(taker.release().success());
    }
}

#[test]
fn orphans_are_swept_once_still_for_their_lease_and_foreign_names_stay() {
    for (holding, orphaned) in [(Rust, Python), (Python, Rust)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let terms = (0.3, 1.0, 0.05);
        let (holder, hello) = holding.hold("write", &path, terms);
        // A reader behind the writer is not entered: killed, its record
        // is an orphan no snapshot names.
        let mut waiter = orphaned.waiter("read", &path, terms);
        poll_until(Duration::from_secs(20), "the waiter's record", || {
            holders(&path).len() == 2
        });
        waiter.kill().unwrap();
        waiter.wait().unwrap();
        let orphan = holders(&path)
            .into_iter()
            .find(|t| t != hello["token"].as_str().unwrap())
            .unwrap();
        let root = log_dir(&path);
        let temp = root.join("gen/.commit-ffffffffffffffffffffffffffffffff");
        std::fs::write(&temp, b"filelock-rw/1\ngen").unwrap();
        std::fs::write(root.join("holders/junk"), b"").unwrap();
        std::fs::write(root.join("gen/.other"), b"").unwrap();
        let planted = Instant::now();
        poll_until(Duration::from_secs(20), "the sweep", || {
            !root.join("holders").join(&orphan).exists() && !temp.exists()
        });
        eprintln!(
            "a {holding:?} holder swept a {orphaned:?} orphan within {:.3} s (threshold 1.0 s)",
            planted.elapsed().as_secs_f64()
        );
        assert!(root.join("holders/junk").exists());
        assert!(root.join("gen/.other").exists());
        assert!(holder.release().success());
    }
}
