//! The read-write lock over sshfs. Its commits are hard links whose
//! outcome the identity of the two names decides (PROTOCOL 16, RW3), and
//! sshfs gives each name of a file its own inode number and a link count
//! of 1: no commit can be confirmed. filelock 4.2.11 commits generation
//! after generation until its timeout; our writer is refused at its first
//! commit, with the cause and the remedy. The facts are measured and
//! printed (`netfs fact | sshfs | ...`); the chaos run below is what the
//! lock must pass there if it ever confirms a commit on such a
//! filesystem: on each host (its
//! own namespaces and client mount) an agent runs a Rust reader, a Rust
//! writer, a Python reader and a Python writer on one lock of the export,
//! SIGKILLs and SIGSTOPs them at random and replaces the killed
//! (tests/common/rw_chaos.rs); the witness, a log on the local disk that
//! both hosts append to, must show no writer beside anyone, on either
//! host, and every place served.

use super::common::rw_chaos::{
    assert_sound, conduct, figures, hostname, replay, seed, Conducted, Plan, Role, ROLES,
};
use super::common::{self, netfs::Caches, rw::Side, worker::WORKER_ARGS};
use super::{exe, wait_until, Sftp, WORKER};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Heartbeat 0.5 s, stale 2.5 s, poll 50 ms; SIGSTOPs of up to 0.8 s, so
/// that no live member's record is still for the threshold; blows for 6 s.
fn plan(seed: u64) -> Plan {
    Plan {
        terms: (0.5, 2.5, 0.05),
        rounds: 10,
        wait: 45.0,
        hold_ms: 25.0,
        chaos: Duration::from_secs(6),
        longest_stop: Duration::from_millis(800),
        kill_one_in: 4,
        seed,
    }
}

/// A host's members still running after this are wedged.
const LIMIT: Duration = Duration::from_secs(150);

/// A host's agent (its namespace's init): conducts its four members on
/// `lock`, and prints what it did as one JSON line.
pub(super) fn agent(lock: &str, log: &str, seed: u64) {
    let plan = plan(seed);
    let host = hostname();
    let (lock, log) = (Path::new(lock), Path::new(log));
    let mut spawn = |_, role: Role| {
        let mut cmd = role.local(lock, log, &plan);
        // A member, not another agent.
        cmd.env_remove(WORKER);
        (cmd, host.clone())
    };
    let done = conduct(&mut spawn, &ROLES, &plan, log, LIMIT);
    println!("{}", done.to_json());
}

/// What a host sees of a hard link on sshfs, and what each side's write
/// acquire comes to there within 3 s (a worker on the host prints it as
/// JSON).
pub(super) fn links(root: &str) {
    use std::os::unix::fs::MetadataExt;
    let root = Path::new(root);
    std::fs::write(root.join("link-a"), "a").unwrap();
    std::fs::hard_link(root.join("link-a"), root.join("link-b")).unwrap();
    let (a, b) = (
        std::fs::metadata(root.join("link-a")).unwrap(),
        std::fs::metadata(root.join("link-b")).unwrap(),
    );
    let terms = (0.5, 2.5, 0.05);
    let mut out = serde_json::json!({
        "ino_equal": a.ino() == b.ino(),
        "nlink": [a.nlink(), b.nlink()],
    });
    for side in [Side::Rust, Side::Python] {
        let lock = root.join(format!("{side:?}.lock"));
        let got = side.attempt("write", &lock, 3.0, terms);
        let log = common::rw::log_dir(&lock).join("gen");
        // Generation names only (beside them: HEAD, the epoch).
        let generations = std::fs::read_dir(log).map_or(0, |d| {
            d.filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().bytes().all(|b| b.is_ascii_digit())
            })
            .count()
        });
        out[format!("{side:?}")] = serde_json::json!({
            "result": got["result"],
            "elapsed": got["elapsed"],
            "message": got["message"],
            "generations": generations,
        });
    }
    println!("{out}");
}

/// sshfs's hard links as the lock sees them: two names of one file with
/// two inode numbers and a link count of 1 each (the server's own disk
/// says 2). Each side's write acquire there, alone, is measured.
#[test]
fn rw_lock_facts_over_sshfs() {
    use std::os::unix::fs::MetadataExt;
    let server = Sftp::start();
    let host = server.host("host-a", Caches::Off);
    let out = host
        .command(&exe())
        .args(WORKER_ARGS)
        .env(WORKER, format!("rwlinks\u{1f}{}", host.root().display()))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let facts = common::rw::json_line(&out.stdout);
    let on_disk = std::fs::metadata(server.export().join("link-b")).unwrap();
    let fact =
        |what: &str, value: String| eprintln!("netfs fact | sshfs (caches off) | {what} | {value}");
    fact(
        "a hard link's two names: one inode number",
        facts["ino_equal"].to_string(),
    );
    fact(
        "a hard link's two names: link counts",
        facts["nlink"].to_string(),
    );
    fact(
        "the same link on the server's disk: link count",
        on_disk.nlink().to_string(),
    );
    for side in ["Rust", "Python"] {
        fact(
            &format!("read-write lock, a lone {side} writer within 3 s"),
            format!(
                "{} after {:.2} s, {} generations left in the log",
                facts[side]["result"],
                facts[side]["elapsed"].as_f64().unwrap_or(f64::NAN),
                facts[side]["generations"]
            ),
        );
    }
    assert_eq!(facts["ino_equal"], false, "{facts}");
    assert_eq!(facts["nlink"], serde_json::json!([1, 1]), "{facts}");
    assert_eq!(on_disk.nlink(), 2);
    // Our writer is refused at its first commit, with the cause and the
    // remedy, where filelock's commits until its timeout.
    let ours = &facts["Rust"];
    assert_eq!(ours["result"], "unsupported", "{facts}");
    let message = ours["message"].as_str().unwrap();
    assert!(
        message.contains("two different files") && message.contains("soft lock"),
        "{message}"
    );
    assert!(ours["elapsed"].as_f64().unwrap() < 2.0, "{facts}");
    // What it linked, it removed: no peer reads a generation naming it.
    assert_eq!(ours["generations"], 0, "{facts}");
}

/// Two hosts over sshfs with its caches off, each with a member of every
/// role, under chaos.
#[test]
#[ignore = "the read-write lock refuses sshfs: it cannot confirm a commit there (RW3: each name has its own inode number)"]
fn rw_lock_under_mixed_chaos_across_two_hosts_over_sshfs() {
    let server = Sftp::start();
    let hosts = [
        server.host("host-a", Caches::Off),
        server.host("host-b", Caches::Off),
    ];
    let witness = tempfile::tempdir().unwrap();
    let log = witness.path().join("witness");
    let seed = seed();
    let started = Instant::now();
    let mut agents: Vec<_> = hosts
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let lock = host.root().join("rw.lock");
            let spec = [
                "rwagent",
                lock.to_str().unwrap(),
                log.to_str().unwrap(),
                &(seed + i as u64).to_string(),
            ]
            .join("\u{1f}");
            let child = host
                .command(&exe())
                .args(WORKER_ARGS)
                .env(WORKER, spec)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            (child, host.name().to_owned())
        })
        .collect();
    let deadline = started + LIMIT + Duration::from_secs(30);
    let mut parts = Vec::new();
    for (child, name) in &mut agents {
        let status = wait_until(child, deadline);
        let mut out = String::new();
        use std::io::Read;
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert!(status.success(), "host {name}: {status}: {out}");
        parts.push(common::rw::json_line(out.as_bytes()));
    }
    let done = Conducted::sum(&parts);
    let plan = plan(seed);
    let seen = replay(&std::fs::read_to_string(&log).unwrap_or_default());
    let label = "sshfs (caches off), 2 hosts";
    eprintln!(
        "netfs rw chaos | {label} | {} | hosts' seeds {seed} and {}",
        figures(&plan, &done, &seen),
        seed + 1
    );
    let places: Vec<Role> = hosts.iter().flat_map(|_| ROLES).collect();
    assert_sound(label, &places, &plan, &done, &seen);
    // Whatever the last kills left named, a writer on the server's own
    // disk gets the lock within a few thresholds.
    let (_, threshold, _) = plan.terms;
    let got = Side::Python.attempt(
        "write",
        &server.export().join("rw.lock"),
        4.0 * threshold,
        plan.terms,
    );
    assert_eq!(got["result"], "acquired", "the lock at the end: {got}");
}
