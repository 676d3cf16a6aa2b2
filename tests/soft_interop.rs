//! Soft locks against the real Python filelock 4.2.11, in both directions,
//! with real processes (PROTOCOL 10): live holders block, records are
//! byte-exact, killed holders are broken in the first attempt without the
//! lock path ever going missing, malformed markers age out after 2 s and
//! not before, foreign and recordless markers are never evicted, recycled
//! PIDs are seen through, a killed breaker's stranded marker is put back,
//! displaced holders write the released record, and leases expire only
//! when their holder stops refreshing.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use common::{peer, peer_command, swaplock, Holder};
use serde_json::Value;
use std::io::{BufRead, ErrorKind};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use swaplock::soft::{Kind, SoftLock};

const KINDS: [(&str, Kind); 3] = [
    ("soft", Kind::Soft),
    ("marker", Kind::Marker),
    ("lease", Kind::Lease),
];

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A Python holder of `kind` on `path`; returns it and its JSON hello.
fn python_holder(kind: &str, path: &Path, extra: &[&str]) -> (Holder, Value) {
    let mut args = vec!["hold", kind, s(path)];
    args.extend_from_slice(extra);
    let (holder, line) = Holder::spawn(peer_command(&args));
    (holder, serde_json::from_str(&line).unwrap())
}

/// A Rust holder process: `swaplock run --kind KIND PATH sh -c HOLD`. The
/// lock's holder is the swaplock process itself.
fn rust_holder(kind: &str, path: &Path, extra: &[&str]) -> Holder {
    let mut cmd = common::command(&swaplock(), "swaplock");
    cmd.args(["run", "--kind", kind])
        .args(extra)
        .args([s(path), "sh", "-c", common::HOLD]);
    Holder::spawn(cmd).0
}

fn kill(holder: Holder) {
    let mut holder = holder;
    holder.child.kill().unwrap();
    holder.child.wait().unwrap();
}

/// This host's name as filelock writes it in a record.
fn host() -> String {
    peer(&["identity", "1"])["host"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Watches `path` from another thread until stopped; reports whether it
/// was ever missing.
struct Watcher {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<usize>,
}

impl Watcher {
    fn start(path: &Path) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let path = path.to_path_buf();
        let thread = std::thread::spawn(move || {
            let mut missing = 0;
            while !flag.load(Ordering::Relaxed) {
                if std::fs::symlink_metadata(&path).is_err() {
                    missing += 1;
                }
            }
            missing
        });
        Watcher { stop, thread }
    }

    fn missing(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

#[test]
fn live_holders_block_in_both_directions() {
    for (name, kind) in KINDS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let (holder, _) = python_holder(name, &path, &[]);
        let before = (
            std::fs::read(&path).unwrap(),
            std::fs::metadata(&path).unwrap().ino(),
        );
        let err = SoftLock::new(kind, &path).try_lock().unwrap_err();
        assert_eq!(
            err.kind(),
            ErrorKind::WouldBlock,
            "{name}: a Python holder must block us"
        );
        let after = (
            std::fs::read(&path).unwrap(),
            std::fs::metadata(&path).unwrap().ino(),
        );
        assert_eq!(before, after, "{name}: the holder's marker was touched");
        drop(holder);

        let holder = rust_holder(name, &path, &[]);
        let answer = peer(&["try", name, s(&path), "0"]);
        assert_eq!(
            answer["result"], "timeout",
            "{name}: our holder must block Python"
        );
        assert_eq!(
            answer["message"],
            format!("The file lock '{}' could not be acquired.", path.display())
        );
        drop(holder);
    }
}

#[test]
fn records_are_byte_exact() {
    let host = host();
    for (name, _) in KINDS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let holder = rust_holder(name, &path, &[]);
        let pid = holder.child.id();
        let start = peer(&["identity", &pid.to_string()])["start"]
            .as_str()
            .unwrap()
            .to_owned();
        let bytes = String::from_utf8(std::fs::read(&path).unwrap()).unwrap();
        let owner = peer(&["owner", s(&path)]);
        match name {
            "soft" => {
                assert_eq!(bytes, format!("{pid}\n{host}\n{start}\n"));
                assert_eq!(owner["soft_pid"], pid);
            }
            "marker" => {
                assert_eq!(
                    bytes,
                    format!("filelock/2\npid={pid}\nhost={host}\nmode=exclusive\nstart={start}\n")
                );
                assert_eq!(owner["owner"]["mode"], "exclusive");
            }
            _ => {
                let token = owner["owner"]["token"].as_str().unwrap().to_owned();
                assert!(token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit()));
                assert_eq!(
                    bytes,
                    format!("filelock/2\npid={pid}\nhost={host}\nmode=lease\ntoken={token}\nduration=30.0\nstart={start}\n")
                );
                assert_eq!(owner["owner"]["duration"], 30.0);
            }
        }
        if name != "soft" {
            assert_eq!(owner["owner"]["pid"], pid);
            assert_eq!(owner["owner"]["host"], host);
            assert_eq!(
                owner["owner"]["start"], start,
                "Python computes the start token we wrote"
            );
        }
        drop(holder);
    }
}

#[test]
fn a_killed_holder_is_broken_in_the_first_attempt() {
    for (name, kind) in KINDS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let (holder, _) = python_holder(name, &path, &[]);
        kill(holder);
        let watcher = Watcher::start(&path);
        let guard = SoftLock::new(kind, &path)
            .try_lock()
            .expect("a dead Python holder is broken at once");
        assert_eq!(
            watcher.missing(),
            0,
            "{name}: the lock path went missing during the takeover"
        );
        let content = std::fs::read_to_string(&path).unwrap();
        assert!(
            content.contains(&std::process::id().to_string()),
            "{name}: our record replaced it"
        );
        guard.release().unwrap();
        assert!(!path.exists());

        let holder = rust_holder(name, &path, &[]);
        kill(holder);
        let answer = peer(&["try", name, s(&path), "0"]);
        assert_eq!(
            answer["result"], "acquired",
            "{name}: Python breaks our dead holder at once: {answer}"
        );
        assert!(entries_beside(&path).is_empty());
    }
}

/// Names in the lock's directory other than the lock itself.
fn entries_beside(path: &Path) -> Vec<String> {
    let base = path.file_name().unwrap().to_str().unwrap();
    common::others(path.parent().unwrap(), &[base])
}

fn write_marker(path: &Path, content: &[u8]) {
    std::fs::write(path, content).unwrap();
}

#[test]
fn malformed_markers_age_out_after_two_seconds_unchanged() {
    type Make = Box<dyn Fn(&Path) + Send + Sync>;
    let cases: Vec<(&str, Make)> = vec![
        (
            "garbage",
            Box::new(|p: &Path| write_marker(p, b"garbage\n")),
        ),
        (
            "released",
            Box::new(|p: &Path| write_marker(p, b"filelock/released\n")),
        ),
        ("torn", Box::new(|p: &Path| write_marker(p, b"123\nvm"))),
        (
            "symlink",
            Box::new(|p: &Path| std::os::unix::fs::symlink("elsewhere", p).unwrap()),
        ),
        (
            "oversized",
            Box::new(|p: &Path| write_marker(p, &[b'1'; 1025])),
        ),
    ];
    let mut jobs: Vec<Box<dyn FnOnce() + Send + '_>> = Vec::new();
    for (what, make) in &cases {
        jobs.push(Box::new(move || {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("a.lock");
            make(&path);
            let lock = SoftLock::marker(&path).poll_interval(Duration::from_millis(10));
            let began = Instant::now();
            let err = lock.lock_timeout(Duration::from_millis(1500)).unwrap_err();
            assert_eq!(
                err.kind(),
                ErrorKind::TimedOut,
                "{what}: evicted before 2 s"
            );
            let guard = lock.lock_timeout(Duration::from_secs(10)).unwrap();
            assert!(
                began.elapsed() >= Duration::from_millis(1950),
                "{what}: evicted after {:?}",
                began.elapsed()
            );
            guard.release().unwrap();
            assert!(
                entries_beside(&path).is_empty(),
                "{what}: left {:?}",
                entries_beside(&path)
            );
        }));
    }
    // A change restarts the watch: touched at 1.2 s, evicted at 3.2 s at the earliest.
    jobs.push(Box::new(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        write_marker(&path, b"garbage\n");
        let lock = SoftLock::soft(&path).poll_interval(Duration::from_millis(10));
        let began = Instant::now();
        assert!(lock.lock_timeout(Duration::from_millis(1200)).is_err());
        std::fs::File::options()
            .append(true)
            .open(&path)
            .unwrap()
            .set_modified(std::time::SystemTime::now())
            .unwrap();
        let touched = began.elapsed();
        assert!(
            lock.lock_timeout(Duration::from_millis(1500)).is_err(),
            "the touch did not restart the watch"
        );
        let guard = lock.lock_timeout(Duration::from_secs(10)).unwrap();
        assert!(began.elapsed() >= touched + Duration::from_millis(1950));
        drop(guard);
    }));
    // Python ages out a marker the same way.
    jobs.push(Box::new(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        write_marker(&path, b"garbage\n");
        let answer = peer(&["try", "soft", s(&path), "10"]);
        assert_eq!(answer["result"], "acquired");
        assert!(answer["elapsed"].as_f64().unwrap() >= 1.95);
    }));
    side_by_side(jobs);
}

/// Runs `jobs` at once, each on a thread of its own; under emulation
/// (`SWAPLOCK_TEST_RUNNER`), one after another: a child that qemu-user
/// forks to start a peer while another thread is inside an emulated call
/// can hang before its exec, with qemu's own locks held in the child.
fn side_by_side<'a>(jobs: Vec<Box<dyn FnOnce() + Send + 'a>>) {
    if std::env::var_os("SWAPLOCK_TEST_RUNNER").is_some() {
        jobs.into_iter().for_each(|job| job());
        return;
    }
    std::thread::scope(|scope| {
        for job in jobs {
            scope.spawn(job);
        }
    });
}

#[test]
fn foreign_recordless_and_unknown_markers_are_never_evicted() {
    let unknown_mode = format!("filelock/2\npid=1\nhost={}\nmode=future\n", host());
    let cases: [(&str, &[u8], &str); 5] = [
        ("empty", b"", " It is held by an owner that recorded no PID (a filelock release before 3.22, or one still writing its record), which this host cannot probe."),
        // filelock names the sentinel's "holder" as it parses: pid 1 on a foreign host.
        ("sentinel", b"1\nfilelock-strict-v1\x00\n0\n", " It is held by pid 1 on filelock-strict-v1\0, which this host cannot probe."),
        ("foreign", b"123\nother-host\n", " It is held by pid 123 on other-host, which this host cannot probe."),
        ("foreign v2", b"filelock/2\npid=123\nhost=other\nmode=exclusive\n", " It is held by pid 123 on other, which this host cannot probe."),
        ("unknown mode", unknown_mode.as_bytes(), ""),
    ];
    let mut jobs: Vec<Box<dyn FnOnce() + Send + '_>> = Vec::new();
    for (what, content, suffix) in cases {
        jobs.push(Box::new(move || {
            let content: &[u8] = content;
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("a.lock");
            write_marker(&path, content);
            let kind = if what.contains("v2") || what.contains("mode") {
                "marker"
            } else {
                "soft"
            };
            let lock = SoftLock::new(
                if kind == "marker" {
                    Kind::Marker
                } else {
                    Kind::Soft
                },
                &path,
            )
            .poll_interval(Duration::from_millis(20));
            let err = lock.lock_timeout(Duration::from_millis(2500)).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::TimedOut, "{what}");
            let ours = swaplock::LockError::of(&err)
                .unwrap()
                .os_error()
                .to_string();
            let answer = peer(&["try", kind, s(&path), "2.5"]);
            assert_eq!(answer["result"], "timeout", "{what}: Python evicted it");
            let expected = format!(
                "The file lock '{}' could not be acquired.{suffix}",
                path.display()
            );
            assert_eq!(
                answer["message"],
                expected.as_str(),
                "{what}: Python's message"
            );
            assert_eq!(ours, expected, "{what}: our message matches Python's");
            assert_eq!(
                std::fs::read(&path).unwrap(),
                content,
                "{what}: the marker was changed"
            );
        }));
    }
    side_by_side(jobs);
}

#[test]
fn a_recycled_pid_is_seen_through() {
    let host = host();
    let mut live = Command::new("cat")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = live.id().to_string();
    let start = peer(&["identity", &pid])["start"]
        .as_str()
        .unwrap()
        .to_owned();
    let wrong = (start.parse::<u128>().map(|v| v.wrapping_add(1).to_string()))
        .unwrap_or_else(|_| "1".into());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    for (token, broken) in [
        (Some(wrong.as_str()), true),
        (Some(start.as_str()), false),
        (None, false),
    ] {
        let record = match token {
            Some(t) => format!("{pid}\n{host}\n{t}\n"),
            None => format!("{pid}\n{host}\n"),
        };
        write_marker(&path, record.as_bytes());
        let status = common::command(&swaplock(), "swaplock")
            .args(["status", "--kind", "soft"])
            .arg(&path)
            .output()
            .unwrap();
        let expected = if broken {
            "holder pid reused"
        } else {
            "holder alive"
        };
        let text = String::from_utf8_lossy(&status.stdout);
        assert!(text.contains(expected), "token {token:?}: {text}");
        let result = SoftLock::soft(&path).try_lock();
        assert_eq!(result.is_ok(), broken, "token {token:?}");
        drop(result);
        let _ = std::fs::remove_file(&path);
    }
    live.kill().unwrap();
    live.wait().unwrap();
}

fn token_hex() -> String {
    let bytes: Vec<u8> = std::fs::read("/proc/sys/kernel/random/uuid").unwrap();
    String::from_utf8(bytes).unwrap().trim().replace('-', "")
}

/// Strands `holder_path`'s marker the way a breaker killed after its
/// exchange leaves it: `at_path` ends at the lock path, the holder's marker
/// under `<lock>.break.<dead>.<hex>`.
fn strand(path: &Path, dead: u32, at_path: &[u8]) -> PathBuf {
    let aside = PathBuf::from(format!("{}.break.{dead}.{}", path.display(), token_hex()));
    write_marker(&aside, at_path);
    assert_eq!(peer(&["exchange", s(&aside), s(path)])["exchanged"], true);
    aside
}

#[test]
fn a_killed_breakers_stranded_marker_is_put_back() {
    let host = host();
    // A placeholder at the path: restored after the 2 s watch, then held.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let (holder, _) = python_holder("soft", &path, &[]);
    let ino = std::fs::metadata(&path).unwrap().ino();
    let dead = common::dead_pid();
    strand(&path, dead, format!("filelock/break\n{dead}\n").as_bytes());
    let lock = SoftLock::soft(&path).poll_interval(Duration::from_millis(20));
    let err = lock.lock_timeout(Duration::from_millis(2600)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_eq!(
        std::fs::metadata(&path).unwrap().ino(),
        ino,
        "the holder's marker is back at the path"
    );
    assert!(
        entries_beside(&path).is_empty(),
        "left {:?}",
        entries_beside(&path)
    );
    assert!(holder.release().success());
    assert!(
        !path.exists(),
        "the restored holder's release removed its marker"
    );

    // A complete dead-breaker record at the path: restored on the first attempt.
    let (holder, _) = python_holder("marker", &path, &[]);
    let ino = std::fs::metadata(&path).unwrap().ino();
    let dead = common::dead_pid();
    strand(
        &path,
        dead,
        format!("filelock/2\npid={dead}\nhost={host}\nmode=exclusive\n").as_bytes(),
    );
    let err = SoftLock::marker(&path).try_lock().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WouldBlock);
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), ino);
    assert!(entries_beside(&path).is_empty());
    drop(holder);

    // A dead stranded holder: its record goes back to the lock path too,
    // where it may lead a recovery to its own break names (PROTOCOL 12.1
    // S15); judged dead there, the next attempt takes it over.
    let dead_holder = common::dead_pid();
    let record = format!("{dead_holder}\n{host}\n");
    write_marker(&path, record.as_bytes());
    let dead = common::dead_pid();
    strand(&path, dead, format!("{dead}\n{host}\n").as_bytes());
    let err = SoftLock::soft(&path).try_lock().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WouldBlock);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), record);
    assert!(entries_beside(&path).is_empty());
    let guard = SoftLock::soft(&path)
        .try_lock()
        .expect("nothing live was stranded");
    assert!(entries_beside(&path).is_empty());
    guard.release().unwrap();

    // A live recoverer's claim: the contender must not take over.
    let mut live = Command::new("cat")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let dead = common::dead_pid();
    write_marker(&path, format!("{dead}\n{host}\n").as_bytes());
    let claim = PathBuf::from(format!(
        "{}.restore.{}.{}",
        path.display(),
        live.id(),
        token_hex()
    ));
    write_marker(&claim, b"whatever\n");
    let err = SoftLock::soft(&path).try_lock().unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::WouldBlock,
        "a live recoverer is at work"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        format!("{dead}\n{host}\n").as_bytes()
    );
    live.kill().unwrap();
    live.wait().unwrap();
}

#[test]
fn a_displaced_holder_writes_the_released_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let other = dir.path().join("other");
    write_marker(&other, b"x");
    let guard = SoftLock::soft(&path).lock().unwrap();
    assert_eq!(peer(&["exchange", s(&other), s(&path)])["exchanged"], true);
    guard.release().unwrap();
    assert_eq!(std::fs::read(&other).unwrap(), b"filelock/released\n");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"x",
        "the lock path was left alone"
    );
}

fn read_line(holder: &mut Holder) -> Value {
    let mut line = String::new();
    holder.stdout.read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or(Value::Null)
}

#[test]
fn leases_expire_only_when_their_holder_stops_refreshing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let (mut holder, _) = python_holder("lease", &path, &["1.5", "0.5"]);
    let before = std::fs::metadata(&path).unwrap();
    let lease = SoftLock::lease(&path)
        .lease_duration(Duration::from_millis(1500))
        .poll_interval(Duration::from_millis(20));
    let err = lease.lock_timeout(Duration::from_millis(2000)).unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::TimedOut,
        "a refreshed lease must not expire"
    );
    let after = std::fs::metadata(&path).unwrap();
    assert_eq!(
        (before.ino(), std::fs::read(&path).unwrap().len() as u64),
        (after.ino(), after.len())
    );
    assert!(
        after.mtime_nsec() != before.mtime_nsec() || after.mtime() != before.mtime(),
        "the heartbeat touched it"
    );

    // A different duration is refused, as filelock refuses it.
    let err = SoftLock::lease(&path)
        .lease_duration(Duration::from_secs(2))
        .try_lock()
        .unwrap_err();
    assert!(err.to_string().contains("lease"), "{err}");

    // Stop the holder: the lease expires after its duration unrefreshed.
    let pid = holder.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    let began = Instant::now();
    let guard = lease
        .lock_timeout(Duration::from_secs(10))
        .expect("an unrefreshed lease expires");
    let took = began.elapsed();
    assert!(took < Duration::from_secs(4), "took {took:?}");
    assert!(Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .unwrap()
        .success());
    assert_eq!(read_line(&mut holder)["compromise"], "owner-changed");
    guard.release().unwrap();
    drop(holder);

    // The other way: our stopped lease holder loses to Python.
    let holder = rust_holder("lease", &path, &["--lease", "1.5"]);
    let pid = holder.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    let answer = peer(&["try", "lease", s(&path), "10", "1.5"]);
    assert_eq!(answer["result"], "acquired", "{answer}");
    assert!(Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .unwrap()
        .success());
    drop(holder);
}

#[test]
fn a_lease_contender_never_expires_an_exclusive_holder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let (holder, _) = python_holder("marker", &path, &[]);
    let lease = SoftLock::lease(&path)
        .lease_duration(Duration::from_secs(1))
        .poll_interval(Duration::from_millis(20));
    assert_eq!(
        lease
            .lock_timeout(Duration::from_millis(2500))
            .unwrap_err()
            .kind(),
        ErrorKind::TimedOut
    );
    kill(holder);
    lease
        .try_lock()
        .expect("a dead exclusive holder is broken at once")
        .release()
        .unwrap();
}

#[test]
fn without_an_exchange_neither_side_breaks_a_dead_holder() {
    let fs = common::NoExchangeMount::new();
    let path = fs.mount.path().join("a.lock");
    for (name, kind) in [("soft", Kind::Soft), ("marker", Kind::Marker)] {
        let (holder, _) = python_holder(name, &path, &[]);
        kill(holder);
        let before = std::fs::read(&path).unwrap();
        let err = SoftLock::new(kind, &path)
            .poll_interval(Duration::from_millis(20))
            .lock_timeout(Duration::from_millis(300));
        assert_eq!(
            err.unwrap_err().kind(),
            ErrorKind::TimedOut,
            "{name}: a stale marker was moved without an exchange"
        );
        let answer = peer(&["try", name, s(&path), "0.3"]);
        assert_eq!(
            answer["result"], "timeout",
            "{name}: Python moved it: {answer}"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "{name}: the marker changed"
        );
        assert!(
            entries_beside(&path).is_empty(),
            "{name}: left {:?}",
            entries_beside(&path)
        );
        // The operator's way out.
        SoftLock::new(kind, &path).force_break().unwrap();
        SoftLock::new(kind, &path)
            .try_lock()
            .unwrap()
            .release()
            .unwrap();
    }
}

#[test]
fn flock_holders_exclude_both_ways_and_the_file_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let python = format!(
        "import sys\nfrom filelock import FileLock\nl = FileLock({:?}, on_acquired=lambda fd: __import__('os').write(fd, b'hook'))\nl.acquire()\nprint('locked', flush=True)\nsys.stdin.readline()\nl.release()\n",
        s(&path)
    );
    let mut cmd = Command::new(common::python());
    cmd.args(["-c", &python]);
    let (holder, _) = Holder::spawn(cmd);
    let err = swaplock::FileLock::flock(&path).try_lock().unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::WouldBlock,
        "a Python FileLock holder must block our flock"
    );
    assert!(holder.release().success());
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"hook",
        "the file and its bytes are kept"
    );

    let guard = swaplock::FileLock::flock(&path).lock().unwrap();
    let probe = format!(
        "from filelock import FileLock, Timeout\ntry:\n    FileLock({:?}).acquire(timeout=0)\n    print('acquired')\nexcept Timeout:\n    print('busy')\n",
        s(&path)
    );
    let out = Command::new(common::python())
        .args(["-c", &probe])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "busy\n",
        "our flock must block Python's FileLock"
    );
    guard.release().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"hook", "never truncated");
}

#[test]
fn host_names_are_escaped_alike_in_other_namespaces() {
    // A host name with a space, in its own UTS namespace: both write my?20host.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let script = format!(
        "{} -c \"import socket; socket.sethostname('my host')\" && {} run --kind soft {} cat {} && {} {} identity 1",
        common::python().display(),
        common::invocation(&swaplock()),
        s(&path),
        s(&path),
        common::python().display(),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peer/soft_peer.py").display()
    );
    let out = Command::new("unshare")
        .args(["--uts", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "unshare --uts: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.nth(1), Some("my?20host"), "{text}");
    let identity: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(identity["host"], "my?20host");

    // In a PID namespace, both append ?pidns-<inode>.
    let script = format!(
        "{} run --kind marker {} cat {} && {} {} identity 1",
        common::invocation(&swaplock()),
        s(&path),
        s(&path),
        common::python().display(),
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/peer/soft_peer.py")
            .display()
    );
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "unshare --pid: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let host_line = text
        .lines()
        .find(|l| l.starts_with("host="))
        .unwrap()
        .to_owned();
    let identity: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert!(host_line.contains("?pidns-"), "{text}");
    assert_eq!(
        host_line,
        format!("host={}", identity["host"].as_str().unwrap())
    );
}

/// Waits (without sleeping) until process `pid` no longer exists.
fn wait_gone(pid: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new("/proc").join(pid).exists() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::yield_now();
    }
    true
}

#[test]
fn swaplock_run_forwards_signals_and_never_leaves_its_command_unlocked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    // SIGTERM to swaplock reaches the command; swaplock then releases and
    // exits with the command's status.
    let mut holder = rust_holder("marker", &path, &[]);
    // The marker names swaplock, the process that holds the lock.
    let marker = std::fs::read_to_string(&path).unwrap();
    assert!(
        marker.contains(&format!("pid={}\n", holder.child.id())),
        "{marker}"
    );
    assert!(Command::new("kill")
        .args(["-TERM", &holder.child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let status = holder.child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(128 + 15),
        "the command died of the forwarded SIGTERM"
    );
    assert!(
        !path.exists(),
        "swaplock released the lock after its command ended"
    );

    // If swaplock dies, its command is killed with it.
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
    let (holder, child_pid) = Holder::spawn(cmd);
    kill(holder);
    assert!(
        wait_gone(&child_pid),
        "the command outlived its lock holder"
    );
}

#[test]
fn a_directory_at_the_lock_path_is_an_error() {
    for (name, kind) in KINDS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        std::fs::create_dir(&path).unwrap();
        let err = SoftLock::new(kind, &path).try_lock().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::IsADirectory, "{name}: {err}");
        assert!(
            path.is_dir() && entries_beside(&path).is_empty(),
            "{name}: the directory was moved"
        );
    }
}
