//! The read-write lock under mixed chaos on this machine's filesystems:
//! Rust readers, Rust writers, Python readers and Python writers
//! (filelock 4.2.11), two of each (one on FUSE), on one lock, SIGKILLed and SIGSTOPped at
//! random, each killed one replaced (tests/common/rw_chaos.rs). An
//! independent witness, a log on the local disk, must show no writer
//! beside anyone, fencing tokens that order every writer, every member
//! that was not killed through its rounds without a failed wait, and the
//! lock free for a writer at the end: killed members were evicted, not
//! left to wedge it. Each run prints its figures as a line
//! `rw chaos | FILESYSTEM | ...`.
//!
//! On the default temporary directory (ext4 here), on tmpfs, and on a
//! FUSE filesystem that refuses the exchange (bindfs: the lock needs only
//! hard links). Two hosts over sshfs are in `tests/netfs.rs`, two NFS
//! client hosts in `tests/nfs/rw.rs`.

#![cfg(target_os = "linux")]

mod common;

use common::rw::Side;
use common::rw_chaos::{assert_sound, conduct, figures, replay, seed, Plan, Role, ROLES};
use std::path::Path;
use std::time::Duration;

/// The body of the Rust members' processes: not a test of its own.
#[test]
#[ignore = "entry point of the read-write chaos tests' worker processes"]
fn worker() {
    common::rw::worker();
}

/// Heartbeat 0.5 s, stale 2.5 s, poll `poll` s; SIGSTOPs of up to 0.8 s
/// (a stopped member's record is then still for at most 1.3 s), blows
/// every 200 to 600 ms for 6 s, half of them at a member inside its hold
/// (one in two of those a SIGKILL, one in four of the others).
fn plan(rounds: usize, poll: f64) -> Plan {
    Plan {
        terms: (0.5, 2.5, poll),
        rounds,
        wait: 45.0,
        hold_ms: 25.0,
        chaos: Duration::from_secs(6),
        longest_stop: Duration::from_millis(800),
        kill_one_in: 4,
        seed: seed(),
    }
}

/// A member still running after this is wedged.
const LIMIT: Duration = Duration::from_secs(120);

/// One chaos run on a lock in `dir`, its witness on the local disk. Under
/// an emulator (`SWAPLOCK_TEST_RUNNER`), whose Rust members run several
/// times slower, one member of each role and half the rounds.
fn chaos_in(dir: &Path, label: &str, copies: usize, mut plan: Plan) {
    let copies = match std::env::var_os("SWAPLOCK_TEST_RUNNER") {
        Some(_) => {
            plan.rounds /= 2;
            1
        }
        None => copies,
    };
    let label = format!("{label}, {}", common::rw_chaos::filesystem(dir));
    let witness = tempfile::tempdir().unwrap();
    let log = witness.path().join("witness");
    let lock = dir.join("chaos.lock");
    let mut spawn = |_, role: Role| (role.local(&lock, &log, &plan), common::rw_chaos::hostname());
    let places: Vec<Role> = (0..copies).flat_map(|_| ROLES).collect();
    let done = conduct(&mut spawn, &places, &plan, &log, LIMIT);
    let seen = replay(&std::fs::read_to_string(&log).unwrap_or_default());
    eprintln!("rw chaos | {label} | {}", figures(&plan, &done, &seen));
    assert_sound(&label, &places, &plan, &done, &seen);
    // Whatever the last kills left named, a writer gets the lock within a
    // few thresholds.
    let (_, threshold, _) = plan.terms;
    let got = Side::Python.attempt("write", &lock, 4.0 * threshold, plan.terms);
    assert_eq!(
        got["result"], "acquired",
        "{label}: the lock at the end: {got}"
    );
}

#[test]
fn mixed_chaos_on_the_default_temporary_directory() {
    let dir = tempfile::tempdir().unwrap();
    chaos_in(dir.path(), "temporary directory", 2, plan(20, 0.025));
}

#[test]
fn mixed_chaos_on_tmpfs() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    chaos_in(dir.path(), "tmpfs (/dev/shm)", 2, plan(20, 0.025));
}

#[test]
fn mixed_chaos_on_a_fuse_filesystem_without_the_exchange() {
    let mount = common::NoExchangeMount::new();
    // Every operation is a round trip to the FUSE daemon, and a waiter
    // opens about ten files at each poll: one member of each role, and
    // slower polls.
    chaos_in(
        mount.mount.path(),
        "FUSE without exchange (bindfs)",
        1,
        plan(20, 0.05),
    );
}
