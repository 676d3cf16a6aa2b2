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

/// A reader of another host, planted.
const READER: &str = "0123456789abcdef0123456789abcdef";

/// Plants generation `n` naming `reader` with a fresh record asking for
/// `lease` (a live peer of another host, as far as any observer can tell
/// within the lease).
fn plant_reader(path: &Path, n: u128, reader: &str, lease: &str) {
    let root = log_dir(path);
    std::fs::create_dir_all(root.join("gen")).unwrap();
    std::fs::create_dir_all(root.join("holders")).unwrap();
    std::fs::write(
        root.join("holders").join(reader),
        format!(
            "filelock-rw/1\ntoken={reader}\npid=1\nhost=elsewhere\nlease={lease}\nnonce={reader}\n"
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
    plant_reader(&path, 1, READER, "90.0");
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
        let out = common::command(&common::swaplock(), "swaplock")
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

/// `swaplock break --kind rw` decides at once to evict a member whose
/// record is gone, then watches another host's member for its lease, and
/// only then commits. A participant keeps its token for its whole
/// acquisition and makes its record again when it finds it gone (an
/// evictor took it while it was paused), so the member found without a
/// record can be back, alive, long before that commit: the break must not
/// evict it then, since it was not forced.
#[test]
fn break_never_evicts_a_member_whose_record_came_back_while_another_was_watched() {
    use std::io::BufRead;
    const BACK: &str = "fedcba9876543210fedcba9876543210";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let root = log_dir(&path);
    // Generation 1: a writer whose record is gone, waiting behind a reader
    // of another host whose record nothing refreshes.
    plant_reader(&path, 1, READER, "1.0");
    std::fs::write(
        root.join("gen/00000000000000000001"),
        format!("filelock-rw/1\ngeneration=1\nwriter={BACK}\nreader={READER}\n"),
    )
    .unwrap();
    let mut breaker = common::command(&common::swaplock(), "swaplock")
        .args(["break", "--kind", "rw", "--lease", "3"])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(breaker.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("watching the record of reader") {
        line.clear();
        assert_ne!(stderr.read_line(&mut line).unwrap(), 0, "no watch began");
    }
    // The writer is back: its record made again, under its token.
    std::fs::write(
        root.join("holders").join(BACK),
        format!("filelock-rw/1\ntoken={BACK}\npid=1\nhost=elsewhere\nlease=90.0\nnonce={BACK}\n"),
    )
    .unwrap();
    let out = breaker.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (writer, _) = snapshot(&path, newest(&path)).unwrap();
    assert_eq!(
        writer.as_deref(),
        Some(BACK),
        "a live writer evicted without --force: {stdout}"
    );
    assert!(
        holders(&path).contains(&BACK.to_owned()),
        "its record taken"
    );
}

/// PROTOCOL 16.9 (C-RW9): "the ledger belongs to the path, not to a lock
/// object: ... a caller that builds a new lock object for each short
/// attempt still ages a dead holder". A caller that does exactly that,
/// each object dropped after its one poll, must evict a crashed writer
/// once its record has stayed unchanged for the threshold.
#[test]
fn a_new_lock_object_for_each_attempt_still_evicts_a_dead_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let root = log_dir(&path);
    const DEAD: &str = "00112233445566778899aabbccddeeff";
    std::fs::create_dir_all(root.join("gen")).unwrap();
    std::fs::create_dir_all(root.join("holders")).unwrap();
    std::fs::write(
        root.join("holders").join(DEAD),
        format!("filelock-rw/1\ntoken={DEAD}\npid=1\nhost=elsewhere\nlease=0.3\nnonce={DEAD}\n"),
    )
    .unwrap();
    std::fs::write(
        root.join("gen/00000000000000000001"),
        format!("filelock-rw/1\ngeneration=1\nwriter={DEAD}\n"),
    )
    .unwrap();
    let threshold = Duration::from_millis(300);
    let began = std::time::Instant::now();
    let mut attempts = 0;
    let granted = loop {
        attempts += 1;
        let lock = SoftRwLock::new(&path)
            .heartbeat_interval(Duration::from_millis(100))
            .stale_threshold(threshold)
            .poll_interval(Duration::from_millis(20));
        match lock.try_write() {
            Ok(g) => break Some(g.generation()),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
        if began.elapsed() > threshold * 20 {
            break None;
        }
        // The caller's own pause between its attempts.
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!(
        "{attempts} attempts over {:.2?}: {granted:?}",
        began.elapsed()
    );
    assert!(
        granted.is_some(),
        "a writer dead for {:.1?} (20 thresholds) was never evicted",
        began.elapsed()
    );
}
