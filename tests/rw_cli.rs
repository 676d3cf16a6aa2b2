//! `swaplock run --kind rw`, `status --kind rw` and `break --kind rw`
//! (PROTOCOL 16.10), against the real Python filelock 4.2.11 where a peer
//! is involved: the command runs under the write lock (or, with `-s`, the
//! read lock) and gets the generation as its fencing token; `--lease` is
//! the record's lease; `status` names every member; `break` evicts a dead
//! member by a commit and refuses a live one unless forced; a lost hold
//! stops the command.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use common::rw::{holders, log_dir, newest, python_latest, snapshot, Side::Python};
use common::{swaplock, Holder};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const QUICK: common::rw::Terms = (30.0, 90.0, 0.02);

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `swaplock ARGS...`.
fn cli(args: &[&str]) -> Command {
    let mut cmd = common::command(&swaplock(), "swaplock");
    cmd.args(args);
    cmd
}

/// A `swaplock run --kind rw` holder whose command prints its fencing
/// token, then waits for its stdin to close.
fn rust_run(path: &Path, extra: &[&str]) -> (Holder, u128) {
    let mut cmd = cli(&["run", "--kind", "rw"]);
    cmd.args(extra)
        .args([s(path), "sh", "-c", "echo $SWAPLOCK_FENCING_TOKEN; read x"]);
    let (holder, line) = Holder::spawn(cmd);
    (holder, line.parse().unwrap())
}

fn json(mut cmd: Command) -> (i32, Value) {
    let out = cmd.stderr(Stdio::inherit()).output().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap(), v)
}

#[test]
fn run_holds_the_write_lock_and_gives_the_generation_to_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let (holder, token) = rust_run(&path, &["--lease", "4.5"]);
    assert_eq!(token, 1);
    let (writer, readers) = snapshot(&path, newest(&path)).unwrap();
    assert!(readers.is_empty());
    let writer = writer.unwrap();
    let record = std::fs::read_to_string(log_dir(&path).join("holders").join(&writer)).unwrap();
    assert!(record.contains("\nlease=4.5\n"), "{record}");
    assert!(
        record.contains(&format!("\npid={}\n", holder.child.id())),
        "the supervisor holds"
    );
    assert_eq!(
        Python.attempt("read", &path, 0.3, QUICK)["result"],
        "timeout"
    );
    assert!(holder.release().success());
    let after = Python.attempt("write", &path, 5.0, QUICK);
    assert!(after["generation"].as_u64().unwrap() as u128 > token);
}

#[test]
fn run_shared_reads_beside_a_python_reader_and_keeps_writers_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let (python, _) = Python.hold("read", &path, QUICK);
    let (ours, token) = rust_run(&path, &["-s"]);
    assert_eq!(snapshot(&path, token).unwrap().1.len(), 2, "two readers");
    assert_eq!(
        Python.attempt("write", &path, 0.0, QUICK)["result"],
        "timeout"
    );
    assert!(ours.release().success());
    assert!(python.release().success());
    assert_eq!(snapshot(&path, newest(&path)), Some((None, vec![])));
}

#[test]
fn status_names_the_writer_and_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let (code, v) = json(cli(&["status", "--kind", "rw", "--json", s(&path)]));
    assert_eq!((code, &v["held"]), (0, &Value::Bool(false)), "no log: free");
    let (python, hello) = Python.hold("read", &path, QUICK);
    let (ours, _) = rust_run(&path, &["-s"]);
    let (code, v) = json(cli(&["status", "--kind", "rw", "--json", s(&path)]));
    assert_eq!(code, 1);
    assert_eq!(v["kind"], "rw");
    assert_eq!(v["generation"].as_u64().unwrap() as u128, newest(&path));
    let readers = v["readers"].as_array().unwrap();
    assert_eq!(readers.len(), 2);
    let pids: Vec<u64> = readers.iter().map(|r| r["pid"].as_u64().unwrap()).collect();
    assert!(pids.contains(&hello["pid"].as_u64().unwrap()));
    assert!(pids.contains(&u64::from(ours.child.id())));
    for r in readers {
        assert_eq!(r["standing"], "alive");
        assert_eq!(r["role"], "reader");
        assert!(r["age_seconds"].as_f64().unwrap() < 60.0);
    }
    let out = cli(&["status", "--kind", "rw", s(&path)]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!("held: generation {}\nreader ", newest(&path))),
        "{text}"
    );
    assert_eq!(text.matches(" alive").count(), 2, "{text}");
    assert!(ours.release().success());
    assert!(python.release().success());
    let out = cli(&["status", "--kind", "rw", s(&path)]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("free: generation"));
}

#[test]
fn break_evicts_a_dead_member_by_a_commit_and_refuses_a_live_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    // A live Python reader and a killed Rust writer waiting behind it.
    let (python, _) = Python.hold("read", &path, QUICK);
    let mut writer = cli(&["run", "--kind", "rw"])
        .args([s(&path), "sleep", "100"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    common::poll_until(Duration::from_secs(20), "the writer enters", || {
        matches!(snapshot(&path, newest(&path)), Some((Some(_), _)))
    });
    let before = newest(&path);
    writer.kill().unwrap();
    writer.wait().unwrap();
    let out = cli(&["break", "--kind", "rw", s(&path)]).output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "a live reader stays: {stdout} {stderr}"
    );
    assert!(
        stdout.contains("evicted writer") && stdout.contains("its process is gone"),
        "{stdout}"
    );
    assert!(stderr.contains("refusing to evict reader"), "{stderr}");
    assert_eq!(newest(&path), before + 1, "one eviction commit");
    let latest = python_latest(&path);
    assert_eq!(
        (
            latest["writer"].is_null(),
            latest["readers"].as_array().unwrap().len()
        ),
        (true, 1)
    );
    assert_eq!(holders(&path).len(), 1, "the dead writer's record is gone");
    // Forced, the live reader goes too, and learns it.
    let out = cli(&["break", "--kind", "rw", "--force", s(&path)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("by force"));
    assert!(holders(&path).is_empty());
    drop(python);
}

#[test]
fn break_watches_another_hosts_member_for_its_lease_before_evicting_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    drop(swaplock::rw::SoftRwLock::new(&path).read().unwrap());
    let token = "0123456789abcdef0123456789abcdef";
    let n = newest(&path) + 1;
    let root = log_dir(&path);
    std::fs::write(
        root.join("holders").join(token),
        format!("filelock-rw/1\ntoken={token}\npid=7\nhost=elsewhere\nlease=1.5\nnonce={token}\n"),
    )
    .unwrap();
    std::fs::write(
        root.join(format!("gen/{n:020}")),
        format!("filelock-rw/1\ngeneration={n}\nwriter={token}\n"),
    )
    .unwrap();
    let began = Instant::now();
    let out = cli(&["break", "--kind", "rw", "--lease", "1", s(&path)])
        .output()
        .unwrap();
    let waited = began.elapsed();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        waited >= Duration::from_millis(1500),
        "its lease of 1.5 s was honoured: {waited:?}"
    );
    eprintln!("break evicted another host's unchanged record after {waited:.2?} (lease 1.5 s)");
    assert!(String::from_utf8_lossy(&out.stderr).contains("watching the record of writer"));
    assert_eq!(snapshot(&path, n + 1), Some((None, vec![])));
}

#[test]
fn a_lost_hold_stops_the_command_with_status_75() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let (mut holder, _) = {
        let mut cmd = cli(&["run", "--kind", "rw", "--lease", "0.6"]);
        cmd.args([
            s(&path),
            "sh",
            "-c",
            "echo $SWAPLOCK_FENCING_TOKEN; exec sleep 100",
        ]);
        Holder::spawn(cmd)
    };
    let token = holders(&path).pop().unwrap();
    std::fs::remove_file(log_dir(&path).join("holders").join(token)).unwrap();
    let status = holder.child.wait().unwrap();
    assert_eq!(status.code(), Some(75));
}
