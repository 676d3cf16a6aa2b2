//! The read-write lock against the real Python filelock 4.2.11's
//! `SoftReadWriteLock`, both ways, with real processes (PROTOCOL 16): the
//! records are byte for byte the same, a writer excludes, readers share,
//! writers are preferred, a commit storm of both sides never lets two
//! writers in, HEAD in any state misleads neither side, a malformed
//! generation stops both, a wiped log starts again, and a filesystem
//! without hard links is refused by both. The timed cases (eviction,
//! leases, pauses, the sweep) are in `tests/rw_liveness.rs`.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use common::poll_until;
use common::rw::{
    generations, holders, log_dir, newest, next_line, python_command, python_latest, snapshot,
    Side::{Python, Rust},
    Terms,
};
use serde_json::{json, Value};
use std::io::{BufReader, ErrorKind, Write};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;
use swaplock::rw::{Compromise, SoftRwLock};

/// The body of the Rust participants' processes: not a test of its own.
#[test]
#[ignore = "entry point of the read-write interop tests' worker processes"]
fn worker() {
    common::rw::worker();
}

/// Quick polls, filelock's heartbeat: nobody is evicted here.
const QUICK: Terms = (30.0, 90.0, 0.02);

fn ours(path: &Path) -> SoftRwLock {
    SoftRwLock::new(path).poll_interval(Duration::from_millis(20))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// filelock's encodings of the given snapshots and holder records.
fn python_bytes(request: Value) -> Value {
    let mut child = python_command(&["bytes"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    common::rw::json_line(&out.stdout)
}

fn unhex(v: &Value) -> Vec<u8> {
    let s = v.as_str().unwrap();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Every token any snapshot on disk names.
fn named_tokens(path: &Path) -> Vec<String> {
    let mut all = Vec::new();
    for g in generations(path) {
        let (w, r) = snapshot(path, g).unwrap();
        all.extend(w);
        all.extend(r);
    }
    all
}

#[test]
fn records_are_byte_exact_both_ways() {
    for (side, terms, lease) in [
        (Rust, (30.0, 90.0, 0.25), "90.0"),
        (Rust, (1.5, 4.5, 0.25), "4.5"),
        (Python, (1.5, 4.5, 0.25), "4.5"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let (holder, hello) = side.hold("write", &path, terms);
        let token = hello["token"].as_str().unwrap().to_owned();
        let record = std::fs::read(log_dir(&path).join("holders").join(&token)).unwrap();
        let text = String::from_utf8(record.clone()).unwrap();
        let nonce = text.lines().find_map(|l| l.strip_prefix("nonce=")).unwrap();
        let pid = hello["pid"].as_u64().unwrap();
        let python = python_bytes(json!({"snapshots": [], "holders": [[token, nonce, terms.1]]}));
        let theirs = String::from_utf8(unhex(&python["holders"][0])).unwrap();
        // filelock writes its own PID; the rest must be the same bytes.
        let theirs: Vec<&str> = theirs.lines().filter(|l| !l.starts_with("pid=")).collect();
        let mine: Vec<&str> = text.lines().filter(|l| !l.starts_with("pid=")).collect();
        assert_eq!(mine, theirs, "{side:?}");
        assert!(text.contains(&format!("\npid={pid}\n")));
        assert!(text.contains(&format!("\nlease={lease}\n")), "{text}");
        // The epoch and HEAD.
        let epoch = std::fs::read(log_dir(&path).join("gen/epoch")).unwrap();
        assert_eq!(epoch.len(), 33);
        assert!(epoch[..32]
            .iter()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        let g = newest(&path);
        let gen = std::fs::read(log_dir(&path).join(format!("gen/{g:020}"))).unwrap();
        let head = std::fs::read(log_dir(&path).join("gen/HEAD")).unwrap();
        assert_eq!(head, [&epoch[..], &gen[..]].concat(), "{side:?}");
        drop(holder);
    }
}

#[test]
fn snapshots_of_both_sides_are_filelocks_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let (python, hello) = Python.hold("read", &path, QUICK);
    let ours = ours(&path).read().unwrap();
    let g = newest(&path);
    let (writer, readers) = snapshot(&path, g).unwrap();
    assert_eq!(writer, None);
    let mut expected = vec![hello["token"].as_str().unwrap().to_owned(), ours.token()];
    expected.sort();
    assert_eq!(readers, expected, "both readers, ascending");
    // filelock, given the readers the other way round, writes the same bytes.
    let reversed: Vec<&String> = expected.iter().rev().collect();
    let python_bytes =
        python_bytes(json!({"snapshots": [[g as u64, null, reversed]], "holders": []}));
    let on_disk = std::fs::read(log_dir(&path).join(format!("gen/{g:020}"))).unwrap();
    assert_eq!(
        hex(&on_disk),
        python_bytes["snapshots"][0].as_str().unwrap()
    );
    drop(ours);
    assert!(python.release().success());
}

#[test]
fn a_writer_excludes_the_other_side_which_leaves_no_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let (python, hello) = Python.hold("write", &path, QUICK);
    let theirs = hello["token"].as_str().unwrap().to_owned();
    let lock = ours(&path);
    assert_eq!(lock.try_read().unwrap_err().kind(), ErrorKind::WouldBlock);
    assert_eq!(lock.try_write().unwrap_err().kind(), ErrorKind::WouldBlock);
    let err = lock.read_timeout(Duration::from_millis(300)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert!(
        named_tokens(&path).iter().all(|t| *t == theirs),
        "no snapshot names us"
    );
    assert_eq!(holders(&path), vec![theirs.clone()], "our record is gone");
    assert!(python.release().success());

    let guard = lock.write().unwrap();
    let answer = Python.attempt("read", &path, 0.5, QUICK);
    assert_eq!(answer["result"], "timeout");
    assert_eq!(
        answer["message"],
        format!("The file lock '{}' could not be acquired.", path.display())
    );
    assert_eq!(
        Python.attempt("write", &path, 0.0, QUICK)["result"],
        "timeout"
    );
    let named = named_tokens(&path);
    assert!(
        named.iter().all(|t| *t == theirs || *t == guard.token()),
        "{named:?}"
    );
    assert_eq!(holders(&path), vec![guard.token()]);
    guard.release().unwrap();
    assert!(holders(&path).is_empty());
    assert_eq!(snapshot(&path, newest(&path)), Some((None, vec![])));
}

#[test]
fn readers_of_both_sides_share_and_leave_in_either_order() {
    for python_first in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let (python, _) = Python.hold("read", &path, QUICK);
        let guard = ours(&path).read().unwrap();
        let (_, readers) = snapshot(&path, newest(&path)).unwrap();
        assert_eq!(readers.len(), 2);
        if python_first {
            assert!(python.release().success());
            guard.release().unwrap();
        } else {
            guard.release().unwrap();
            assert!(python.release().success());
        }
        assert_eq!(snapshot(&path, newest(&path)), Some((None, vec![])));
        assert!(holders(&path).is_empty());
    }
}

#[test]
fn a_waiting_writer_keeps_new_readers_out_then_is_granted_by_its_own_commit() {
    for (reader, writer) in [(Python, Rust), (Rust, Python)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let (holder, _) = reader.hold("read", &path, QUICK);
        let mut waiting = writer.waiter("write", &path, QUICK);
        poll_until(
            Duration::from_secs(20),
            "the writer enters",
            || matches!(snapshot(&path, newest(&path)), Some((Some(_), r)) if r.len() == 1),
        );
        let entered = newest(&path);
        assert_eq!(
            reader.attempt("read", &path, 0.5, QUICK)["result"],
            "timeout",
            "{reader:?}: a new reader waits behind the writer"
        );
        assert!(holder.release().success());
        let mut out = BufReader::new(waiting.stdout.take().unwrap());
        let hello = next_line(&mut out);
        let g: u128 = match &hello["generation"] {
            Value::String(s) => s.parse().unwrap(),
            v => v.as_u64().unwrap().into(),
        };
        let w = hello["token"].as_str().unwrap().to_owned();
        assert_eq!(snapshot(&path, entered).unwrap().0.as_ref(), Some(&w));
        assert_eq!(
            g,
            entered + 2,
            "{writer:?}: the reader left, then the grant"
        );
        assert_eq!(snapshot(&path, g - 1), Some((Some(w.clone()), vec![])));
        assert_eq!(
            snapshot(&path, g),
            snapshot(&path, g - 1),
            "the same membership"
        );
        drop(waiting.stdin.take());
        assert!(waiting.wait().unwrap().success());
    }
}

#[test]
fn a_commit_storm_of_both_sides_grants_each_generation_once() {
    const HOLDS: usize = 50;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let witness = dir.path().join("in-writer");
    let storm: Terms = (30.0, 90.0, 0.01);
    let began = std::time::Instant::now();
    let children: Vec<_> = [Python, Rust, Python, Rust, Python, Rust]
        .into_iter()
        .map(|side| (side, side.storm(&path, HOLDS, &witness, storm)))
        .collect();
    let mut all = Vec::new();
    for (side, child) in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{side:?}");
        let v = common::rw::json_line(&out.stdout);
        assert_eq!(v["collisions"], 0, "{side:?}: two writers at once");
        let gens: Vec<u128> = v["generations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| match g {
                Value::String(s) => s.parse().unwrap(),
                g => g.as_u64().unwrap().into(),
            })
            .collect();
        assert_eq!(gens.len(), HOLDS);
        assert!(gens.windows(2).all(|w| w[0] < w[1]), "{side:?}: {gens:?}");
        all.extend(gens);
    }
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "every generation granted once");
    let kept = generations(&path).len();
    assert!(kept == 64 || kept == 65, "{kept} generations kept");
    let latest = newest(&path);
    let epoch = std::fs::read(log_dir(&path).join("gen/epoch")).unwrap();
    let gen = std::fs::read(log_dir(&path).join(format!("gen/{latest:020}"))).unwrap();
    let head = std::fs::read(log_dir(&path).join("gen/HEAD")).unwrap();
    assert_eq!(head, [&epoch[..], &gen[..]].concat());
    assert!(holders(&path).is_empty());
    eprintln!(
        "commit storm: {n} write holds of 3 Python and 3 Rust processes in {:.1?}, 0 collisions, {} generations",
        began.elapsed(),
        latest
    );
}

/// HEAD's bytes made for the newest generation (`None`: no HEAD).
type HeadAt<'a> = Box<dyn Fn(u128) -> Option<Vec<u8>> + 'a>;

#[test]
fn head_in_any_state_misleads_neither_side() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let lock = ours(&path);
    for _ in 0..3 {
        drop(lock.write().unwrap());
    }
    let gen = log_dir(&path).join("gen");
    let epoch = std::fs::read(gen.join("epoch")).unwrap();
    let variants: [(&str, HeadAt); 4] = [
        ("deleted", Box::new(|_| None)),
        ("truncated", Box::new(|_| Some(epoch[..20].to_vec()))),
        ("older", {
            let (gen, epoch) = (gen.clone(), epoch.clone());
            Box::new(move |n| {
                let old = std::fs::read(gen.join(format!("{:020}", n - 2))).unwrap();
                Some([&epoch[..], &old[..]].concat())
            })
        }),
        ("another epoch", {
            let gen = gen.clone();
            Box::new(move |n| {
                let cur = std::fs::read(gen.join(format!("{n:020}"))).unwrap();
                Some([&b"00000000000000000000000000000000\n"[..], &cur[..]].concat())
            })
        }),
    ];
    for (what, head) in &variants {
        for side in [Rust, Python] {
            let n = newest(&path);
            match head(n) {
                None => {
                    let _ = std::fs::remove_file(gen.join("HEAD"));
                }
                Some(bytes) => std::fs::write(gen.join("HEAD"), bytes).unwrap(),
            }
            let latest = python_latest(&path);
            assert_eq!(
                latest["generation"], n as u64,
                "filelock reads past a {what} HEAD"
            );
            let got = side.attempt("read", &path, 0.0, QUICK);
            assert_eq!(got["result"], "acquired", "{side:?}, {what} HEAD: {got}");
            let g: u128 = match &got["generation"] {
                Value::String(s) => s.parse().unwrap(),
                v => v.as_u64().unwrap().into(),
            };
            assert_eq!(
                g,
                n + 1,
                "{side:?} found the true latest past a {what} HEAD"
            );
        }
    }
}

#[test]
fn a_malformed_generation_stops_both_sides_and_stays() {
    let vectors = [
        "garbage",
        "filelock-rw/1\ngeneration=9\n",
        "filelock-rw/1\ngeneration=03\n",
        "filelock-rw/1\r\ngeneration=N\r\n",
        "filelock-rw/1\ngeneration=N\n\n",
        "filelock-rw/1\ngeneration=N\nwriter=\n",
        "filelock-rw/1\ngeneration=N\nfoo=bar\n",
        "filelock-rw/2\ngeneration=N\n",
        "",
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    drop(ours(&path).write().unwrap());
    let n = newest(&path) + 1;
    let file = log_dir(&path).join(format!("gen/{n:020}"));
    for v in vectors {
        let bytes = v.replace('N', &n.to_string());
        std::fs::write(&file, &bytes).unwrap();
        let err = ours(&path).try_read().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidData, "{v:?}: {err}");
        assert!(err.to_string().contains(&format!("{n:020}")), "{err}");
        let theirs = Python.attempt("read", &path, 0.0, QUICK);
        assert_eq!(
            theirs["type"], "SoftFileLockProtocolError",
            "{v:?}: {theirs}"
        );
        assert_eq!(
            std::fs::read(&file).unwrap(),
            bytes.as_bytes(),
            "nobody repairs it"
        );
        assert!(holders(&path).is_empty(), "{v:?}: no record left behind");
    }
}

#[test]
fn a_wiped_log_starts_again_and_a_long_lived_lock_follows_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let (tx, rx) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    let lock = SoftRwLock::new(&path)
        .heartbeat_interval(Duration::from_millis(100))
        .stale_threshold(Duration::from_millis(300))
        .poll_interval(Duration::from_millis(20))
        .on_compromise(move |c| tx.lock().unwrap().send(c).unwrap());
    for _ in 0..3 {
        drop(lock.write().unwrap());
    }
    let guard = lock.write().unwrap();
    assert!(guard.generation() > 5);
    let old_epoch = std::fs::read(log_dir(&path).join("gen/epoch")).unwrap();
    std::fs::remove_dir_all(log_dir(&path)).unwrap();
    let theirs = Python.attempt("write", &path, 10.0, QUICK);
    assert_eq!(theirs["result"], "acquired");
    assert_eq!(theirs["generation"], 1, "a new log starts at 1");
    assert_ne!(
        std::fs::read(log_dir(&path).join("gen/epoch")).unwrap(),
        old_epoch
    );
    let lost = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(lost, Compromise::Evicted);
    assert_eq!(guard.compromise(), Some(Compromise::Evicted));
    guard.release().unwrap();
    // The same lock object goes on in the new log.
    let n = newest(&path);
    let again = lock.write().unwrap();
    assert_eq!(
        again.generation(),
        n + 1,
        "numbered in the new log, not the old"
    );
    drop(again);
    // Only gen/ removed: we make it again, and corrupt nothing.
    std::fs::remove_dir_all(log_dir(&path).join("gen")).unwrap();
    let fresh = lock.write_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(fresh.generation(), 1);
    drop(fresh);
    assert_eq!(python_latest(&path)["generation"], 2);
    assert_eq!(Python.attempt("write", &path, 5.0, QUICK)["generation"], 3);
}

#[test]
fn a_filesystem_without_hard_links_is_refused_by_both_leaving_no_record() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("fat.img");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let run = |cmd: &mut std::process::Command| {
        let status = cmd.status().unwrap();
        assert!(
            status.success(),
            "{cmd:?}: run scripts/setup (dosfstools, fusefat) as root"
        );
    };
    run(std::process::Command::new("truncate")
        .args(["-s", "8M"])
        .arg(&image));
    run(std::process::Command::new("mkfs.vfat")
        .arg("-n")
        .arg("RW")
        .arg(&image)
        .stdout(Stdio::null()));
    // vfat through FUSE (the kernel here may have no vfat): `link` answers
    // EPERM, as the kernel's vfat does.
    run(std::process::Command::new("fusefat")
        .args(["-o", "rw+"])
        .arg(&image)
        .arg(&mnt)
        .stdout(Stdio::null()));
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("fusermount")
                .arg("-u")
                .arg(self.0)
                .status();
        }
    }
    let _unmount = Unmount(&mnt);
    let path = mnt.join("a.lock");
    let err = ours(&path).try_write().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    assert!(err.to_string().contains("hard links"), "{err}");
    assert!(holders(&path).is_empty(), "our record is gone");
    let theirs = Python.attempt("write", &path, 0.0, QUICK);
    assert_eq!(theirs["type"], "PermissionError", "{theirs}");
    assert!(holders(&path).is_empty(), "theirs too");
    let gen = log_dir(&path).join("gen");
    let mut names: Vec<_> = std::fs::read_dir(&gen)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // No generation and no temporary: only the epoch filelock creates in
    // place (ours is linked whole, which the filesystem refuses first).
    assert_eq!(names, vec!["epoch"]);
    assert_eq!(std::fs::read(gen.join("epoch")).unwrap().len(), 33);
}

#[test]
fn under_an_epoch_without_a_token_both_sides_go_on_and_only_ours_bind_head() {
    // A creator killed between its create and its write leaves the epoch
    // empty for good (filelock creates it in place). filelock then never
    // writes or trusts HEAD; swaplock binds HEAD to the epoch's exact bytes
    // (PROTOCOL 16.9), which filelock reads past.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    drop(ours(&path).write().unwrap());
    let gen = log_dir(&path).join("gen");
    std::fs::write(gen.join("epoch"), b"").unwrap();
    std::fs::remove_file(gen.join("HEAD")).unwrap();
    let granted = |got: &Value| -> u128 {
        match &got["generation"] {
            Value::String(s) => s.parse().unwrap(),
            v => v.as_u64().unwrap().into(),
        }
    };
    for round in 0..3 {
        for side in [Rust, Python] {
            let n = newest(&path);
            assert_eq!(python_latest(&path)["generation"], n as u64);
            let before = std::fs::read(gen.join("HEAD")).ok();
            let got = side.attempt("write", &path, 0.0, QUICK);
            assert_eq!(got["result"], "acquired", "{side:?}, round {round}: {got}");
            assert_eq!(granted(&got), n + 1, "{side:?} found the true latest");
            let head = std::fs::read(gen.join("HEAD")).ok();
            match side {
                // Our commits (the grant's, and the leave's after it) bind
                // HEAD to the empty epoch: the record alone.
                Rust => {
                    let newest = newest(&path);
                    let record = std::fs::read(gen.join(format!("{newest:020}"))).unwrap();
                    assert_eq!(head, Some(record), "round {round}");
                }
                // filelock's leave it where our last commit put it.
                Python => assert_eq!(head, before, "round {round}"),
            }
        }
    }
    assert_eq!(std::fs::read(gen.join("epoch")).unwrap(), b"");
}
