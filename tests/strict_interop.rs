//! The strict lock against the real Python filelock 4.2.11's
//! `StrictSoftFileLock`, in both directions, with real processes
//! (PROTOCOL 18): records and modes are byte-exact and read alike, a
//! holder excludes the other side, a storm of both sides never overlaps,
//! a killed holder blocks until its claims are broken, what sits at the
//! lock path gets the same verdict at the same time, litter is reaped
//! alike, a strict sentinel keeps soft locks out, and a filesystem
//! without hard links is refused. (Strict and `SoftReadWriteLock` use
//! disjoint names and do not exclude each other: nothing to test.)

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use common::{dead_pid, peer, peer_command, swaplock, Holder};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};
use swaplock::strict::{ClaimState, LockPath, StrictLock};
use swaplock::SoftLock;

/// The variable that makes this test binary a storm worker.
const WORKER: &str = "SWAPLOCK_STRICT_WORKER";

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn claims_dir(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}.filelock/claims", path.display()))
}

fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

/// A Python strict holder on `path`, and its hello (pid, host, start).
fn python_holder(path: &Path) -> (Holder, Value) {
    let (holder, line) = Holder::spawn(peer_command(&["strict-hold", s(path)]));
    (holder, serde_json::from_str(&line).unwrap())
}

/// A Rust strict holder: `swaplock run --kind strict PATH sh -c HOLD`,
/// whose swaplock process holds the claims.
fn rust_holder(path: &Path) -> Holder {
    let mut cmd = common::command(&swaplock(), "swaplock");
    cmd.args(["run", "--kind", "strict", s(path), "sh", "-c", common::HOLD]);
    Holder::spawn(cmd).0
}

fn kill(mut holder: Holder) {
    holder.child.kill().unwrap();
    holder.child.wait().unwrap();
}

fn python_try(path: &Path, timeout: f64) -> Value {
    peer(&["strict-try", s(path), &timeout.to_string()])
}

/// This process's view of the lock's claims, as Python reads them.
fn python_claims(path: &Path) -> Value {
    peer(&["strict-claims", s(path)])
}

/// What a lock path and its directories hold once every hold is over:
/// the sentinel, the coordination directory and an empty claims'
/// directory, no litter anywhere.
fn assert_released(path: &Path) {
    let dir = path.parent().unwrap();
    let base = path.file_name().unwrap().to_str().unwrap();
    let ours: BTreeSet<String> = names(dir)
        .into_iter()
        .filter(|n| n.starts_with(base) || n.starts_with(&format!(".{base}")))
        .collect();
    assert_eq!(
        ours,
        BTreeSet::from([base.to_owned(), format!("{base}.filelock")])
    );
    assert_eq!(
        names(&dir.join(format!("{base}.filelock"))),
        BTreeSet::from(["claims".to_owned()])
    );
    assert!(names(&claims_dir(path)).is_empty());
    assert_eq!(
        std::fs::read(path).unwrap(),
        b"1\nfilelock-strict-v1\x00\n0\n"
    );
}

#[test]
fn records_modes_and_claims_are_alike_both_ways() {
    let host = peer(&["identity", "1"])["host"]
        .as_str()
        .unwrap()
        .to_owned();
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("rust.lock");
    let holder = rust_holder(&ours);
    let pid = holder.child.id();
    let start = peer(&["identity", &pid.to_string()])["start"].clone();
    let claims = names(&claims_dir(&ours));
    assert_eq!(claims.len(), 2, "{claims:?}");
    let token = claims
        .iter()
        .find_map(|n| n.strip_prefix("held-v1-"))
        .and_then(|n| n.strip_suffix(".claim"))
        .unwrap()
        .to_owned();
    let intent = claims_dir(&ours).join(format!("intent-v1-{token}.claim"));
    let held = claims_dir(&ours).join(format!("held-v1-{token}.claim"));
    let host_hex: String = host.bytes().map(|b| format!("{b:02x}")).collect();
    let expected = format!(
        "filelock-strict-v1\n{token}\n{pid}\n{host_hex}\n{}\n",
        start.as_str().unwrap_or("")
    );
    assert_eq!(std::fs::read_to_string(&intent).unwrap(), expected);
    let (i, h) = (intent.metadata().unwrap(), held.metadata().unwrap());
    assert_eq!(
        (i.ino(), i.nlink()),
        (h.ino(), 2),
        "held is a link of the intent"
    );
    // filelock reads our claims as we wrote them.
    let read = python_claims(&ours);
    assert_eq!(read["occupant"], Value::Null);
    let read = read["claims"].as_array().unwrap().clone();
    assert_eq!(read.len(), 2);
    for (claim, state) in read.iter().zip(["held", "intent"]) {
        assert_eq!(claim["state"], state);
        assert_eq!(claim["token"], token.as_str());
        assert_eq!(claim["pid"], pid);
        assert_eq!(claim["host"], host.as_str());
        assert_eq!(claim["start"], start);
    }

    // And we read Python's as it wrote them.
    let theirs = dir.path().join("python.lock");
    let (python, hello) = python_holder(&theirs);
    let claims = StrictLock::new(&theirs).claims().unwrap();
    assert_eq!(claims.len(), 2);
    for (claim, state) in claims.iter().zip([ClaimState::Held, ClaimState::Intent]) {
        assert_eq!(claim.state, state);
        assert_eq!(u64::from(claim.pid), hello["pid"].as_u64().unwrap());
        assert_eq!(claim.host, hello["host"].as_str().unwrap());
        assert_eq!(claim.start.as_deref(), hello["start"].as_str());
        assert_eq!(
            claim.standing,
            swaplock::core::soft::Standing::Held(swaplock::core::decide::HeldBecause::Alive)
        );
    }
    // Both trees have the same modes: sticky directories, claims and
    // sentinel as the umask leaves the file mode.
    let mode = |p: PathBuf| p.symlink_metadata().unwrap().permissions().mode() & 0o7777;
    for suffix in ["", ".filelock", ".filelock/claims"] {
        let (a, b) = (
            mode(PathBuf::from(format!("{}{suffix}", ours.display()))),
            mode(PathBuf::from(format!("{}{suffix}", theirs.display()))),
        );
        assert_eq!(a, b, "mode of {suffix:?}");
        if !suffix.is_empty() {
            assert_eq!(a & 0o1000, 0o1000, "{suffix} is sticky");
        }
    }
    let python_intent = names(&claims_dir(&theirs))
        .into_iter()
        .find(|n| n.starts_with("intent-"))
        .unwrap();
    assert_eq!(mode(intent), mode(claims_dir(&theirs).join(python_intent)));
    python.release();
    holder.release();
    assert_released(&ours);
    assert_released(&theirs);
}

#[test]
fn a_holder_excludes_the_other_side() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let holder = rust_holder(&path);
    let answer = python_try(&path, 0.3);
    assert_eq!(answer["result"], "timeout", "{answer}");
    assert_eq!(
        answer["message"],
        format!("The file lock '{}' could not be acquired.", path.display())
    );
    assert_eq!(
        names(&claims_dir(&path)).len(),
        2,
        "the waiter left nothing"
    );
    holder.release();
    assert_released(&path);

    let (holder, hello) = python_holder(&path);
    let lock = StrictLock::new(&path);
    assert_eq!(lock.try_lock().unwrap_err().kind(), ErrorKind::WouldBlock);
    let err = lock.lock_timeout(Duration::from_millis(200)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_eq!(
        err.to_string(),
        format!(
            "The file lock '{}' could not be acquired: it is held by pid {} on {} (claim {}), \
             which is alive.",
            path.display(),
            hello["pid"],
            hello["host"].as_str().unwrap(),
            lock.claims().unwrap()[0].token
        )
    );
    holder.release();
    assert_released(&path);
    // Once free, each side takes it.
    assert_eq!(python_try(&path, 0.0)["result"], "acquired");
    lock.try_lock().unwrap().release().unwrap();
    assert_released(&path);
}

/// A storm worker: takes the lock `holds` times, each time creating the
/// witness with `O_EXCL`, appending its PID to the log, holding it 5 ms,
/// removing it, and letting 0 to 10 ms pass before the next; prints how
/// many times the witness was already there.
#[test]
#[ignore]
fn worker() {
    let Ok(spec) = std::env::var(WORKER) else {
        return;
    };
    let parts: Vec<&str> = spec.split('\u{1f}').collect();
    let [path, witness, holds, poll_ms, log] = parts[..] else {
        panic!("bad worker spec {spec:?}")
    };
    let lock = StrictLock::new(path).poll_interval(Duration::from_millis(poll_ms.parse().unwrap()));
    let mut collisions = 0;
    let mut rng = common::stress::Rng(u64::from(std::process::id()) | 1);
    for _ in 0..holds.parse::<u32>().unwrap() {
        let guard = lock.lock().unwrap();
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(witness)
        {
            Ok(_) => {
                let mut log = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(log)
                    .unwrap();
                std::io::Write::write_all(&mut log, format!("{}\n", std::process::id()).as_bytes())
                    .unwrap();
                // The critical section's length, not a synchronisation.
                std::thread::sleep(Duration::from_millis(5));
                std::fs::remove_file(witness).unwrap();
            }
            Err(_) => collisions += 1,
        }
        guard.release().unwrap();
        // The time between holds, so that others get in.
        std::thread::sleep(Duration::from_micros(rng.below(10_000)));
    }
    println!("collisions {collisions}");
}

/// Three Python and three Rust processes take the lock 30 times each,
/// with a poll interval of `poll_ms`: how many times the witness was
/// found taken, how many times the holder changed, and how long the storm
/// lasted.
fn storm(poll_ms: u64) -> (u64, usize, Duration) {
    const HOLDS: u64 = 30;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("storm.lock");
    let witness = dir.path().join("in-strict");
    let log = dir.path().join("holders");
    let began = Instant::now();
    let poll = format!("{}", poll_ms as f64 / 1000.0);
    let pythons: Vec<_> = (0..3)
        .map(|_| {
            peer_command(&[
                "strict-storm",
                s(&path),
                s(&witness),
                &HOLDS.to_string(),
                &poll,
                s(&log),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    let spec = format!(
        "{}\u{1f}{}\u{1f}{HOLDS}\u{1f}{poll_ms}\u{1f}{}",
        s(&path),
        s(&witness),
        s(&log)
    );
    let rusts: Vec<_> = (0..3)
        .map(|_| {
            common::command(&std::env::current_exe().unwrap(), "worker")
                .args([
                    "--ignored",
                    "--exact",
                    "worker",
                    "--test-threads=1",
                    "-q",
                    "--nocapture",
                ])
                .env(WORKER, &spec)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut collisions = 0;
    for child in pythons {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "a Python worker failed: {out:?}");
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(answer["holds"], HOLDS);
        collisions += answer["collisions"].as_u64().unwrap();
    }
    for child in rusts {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "a Rust worker failed: {out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("collisions "))
            .unwrap();
        collisions += line.parse::<u64>().unwrap();
    }
    let elapsed = began.elapsed();
    assert_released(&path);
    let holders: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(holders.len() as u64, 6 * HOLDS - collisions);
    assert_eq!(
        holders.iter().collect::<BTreeSet<_>>().len(),
        6,
        "every worker held"
    );
    let changes = holders.windows(2).filter(|w| w[0] != w[1]).count();
    (collisions, changes, elapsed)
}

#[test]
fn a_storm_of_both_sides_never_overlaps() {
    for poll_ms in [50, 10] {
        let (collisions, changes, elapsed) = storm(poll_ms);
        eprintln!(
            "strict storm, poll {poll_ms} ms: 180 holds (3 Python + 3 Rust x 30), \
             {collisions} collisions, the holder changed {changes} times, {:.1} s",
            elapsed.as_secs_f64()
        );
        assert_eq!(collisions, 0, "two holders at once (poll {poll_ms} ms)");
    }
}

#[test]
fn a_killed_holder_blocks_until_its_claims_are_broken() {
    let dir = tempfile::tempdir().unwrap();
    // A killed Python holder: Rust waits for good, and names the cure.
    let path = dir.path().join("python.lock");
    let (holder, hello) = python_holder(&path);
    kill(holder);
    let lock = StrictLock::new(&path);
    for _ in 0..2 {
        let err = lock.lock_timeout(Duration::from_millis(150)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut);
        assert!(
            err.to_string()
                .contains(&format!("its holder, pid {}", hello["pid"]))
                && err.to_string().contains("swaplock break --kind strict"),
            "{err}"
        );
    }
    let claims = lock.claims().unwrap();
    lock.force_break(&claims[0].name).unwrap(); // the held claim only
    assert_eq!(lock.try_lock().unwrap_err().kind(), ErrorKind::WouldBlock);
    lock.force_break(&claims[1].name).unwrap();
    lock.try_lock().unwrap().release().unwrap();

    // A killed Rust holder: Python waits for good; breaking only the held
    // claim still blocks, breaking both admits.
    let path = dir.path().join("rust.lock");
    kill(rust_holder(&path));
    for _ in 0..2 {
        assert_eq!(python_try(&path, 0.15)["result"], "timeout");
    }
    let claims = python_claims(&path)["claims"].as_array().unwrap().clone();
    peer(&[
        "strict-break",
        s(&path),
        claims[0]["name"].as_str().unwrap(),
    ]);
    assert_eq!(python_try(&path, 0.15)["result"], "timeout");
    peer(&[
        "strict-break",
        s(&path),
        claims[1]["name"].as_str().unwrap(),
    ]);
    assert_eq!(python_try(&path, 0.0)["result"], "acquired");

    // swaplock break removes a dead Python holder's claims, and refuses a
    // live one's unless forced.
    let path = dir.path().join("break.lock");
    let (live, _) = python_holder(&path);
    let cli = |force: bool| {
        let mut cmd = common::command(&swaplock(), "swaplock");
        cmd.args(["break", "--kind", "strict"]);
        if force {
            cmd.arg("--force");
        }
        cmd.arg(&path).output().unwrap()
    };
    let refused = cli(false);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("which is alive"));
    assert_eq!(names(&claims_dir(&path)).len(), 2);
    kill(live);
    let broken = cli(false);
    assert_eq!(broken.status.code(), Some(0), "{broken:?}");
    assert!(names(&claims_dir(&path)).is_empty());
    let (live, _) = python_holder(&path);
    assert_eq!(cli(true).status.code(), Some(0));
    assert!(
        names(&claims_dir(&path)).is_empty(),
        "--force breaks a live holder"
    );
    live.release();
}

/// One row of PROTOCOL 18.6: what is put at the lock path, and whether
/// both sides fail on it (else they time out).
struct Row {
    name: &'static str,
    fails: bool,
    plant: Box<dyn Fn(&Path) + Send>,
}

#[test]
fn what_sits_at_the_lock_path_gets_the_same_verdict_on_both_sides() {
    let host = peer(&["identity", "1"])["host"]
        .as_str()
        .unwrap()
        .to_owned();
    let (me, dead) = (std::process::id(), dead_pid());
    let file = |content: String| -> Box<dyn Fn(&Path) + Send> {
        Box::new(move |p: &Path| std::fs::write(p, &content).unwrap())
    };
    let rows = vec![
        Row {
            name: "a live marker of this host",
            fails: false,
            plant: file(format!(
                "filelock/2\npid={me}\nhost={host}\nmode=exclusive\n"
            )),
        },
        Row {
            name: "a marker of another host",
            fails: false,
            plant: file("filelock/2\npid=1\nhost=elsewhere\nmode=exclusive\n".into()),
        },
        Row {
            name: "a dead marker",
            fails: true,
            plant: file(format!("{dead}\n{host}\n")),
        },
        Row {
            name: "an empty file",
            fails: true,
            plant: file(String::new()),
        },
        Row {
            name: "garbage",
            fails: true,
            plant: file("garbage\n".into()),
        },
        Row {
            name: "a directory",
            fails: true,
            plant: Box::new(|p: &Path| std::fs::create_dir(p).unwrap()),
        },
        Row {
            name: "a symlink",
            fails: true,
            plant: Box::new(|p: &Path| std::os::unix::fs::symlink("nowhere", p).unwrap()),
        },
    ];
    // Every row and side at once, each in a directory of its own.
    let dir = tempfile::tempdir().unwrap();
    let runs: Vec<_> = rows
        .into_iter()
        .enumerate()
        .map(|(i, row)| {
            let python_path = dir.path().join(format!("p{i}.lock"));
            let rust_path = dir.path().join(format!("r{i}.lock"));
            (row.plant)(&python_path);
            (row.plant)(&rust_path);
            let python = std::thread::spawn(move || python_try(&python_path, 2.6));
            let rust = std::thread::spawn(move || {
                let lock = StrictLock::new(&rust_path);
                let described = lock.occupant().unwrap();
                let began = Instant::now();
                let err = lock.lock_timeout(Duration::from_millis(2600)).unwrap_err();
                (described, err, began.elapsed())
            });
            (row, python, rust)
        })
        .collect();
    for (i, (row, python, rust)) in runs.into_iter().enumerate() {
        let theirs = python.join().unwrap();
        let (described, ours, elapsed) = rust.join().unwrap();
        let name = row.name;
        eprintln!(
            "{name}: Python {} after {:.2} s, Rust {:?} after {:.2} s",
            theirs["result"],
            theirs["elapsed"].as_f64().unwrap(),
            ours.kind(),
            elapsed.as_secs_f64()
        );
        // The same description of the occupant.
        let python_view = python_claims(&dir.path().join(format!("p{i}.lock")));
        let LockPath::Occupied { description, fails } = described else {
            panic!("{name}: {described:?}")
        };
        assert_eq!(python_view["occupant"], description.as_str(), "{name}");
        assert_eq!(fails, row.fails, "{name}");
        match row.fails {
            false => {
                assert_eq!(theirs["result"], "timeout", "{name}: {theirs}");
                assert_eq!(ours.kind(), ErrorKind::TimedOut, "{name}: {ours}");
            }
            true => {
                assert_eq!(
                    theirs["type"], "SoftFileLockProtocolError",
                    "{name}: {theirs}"
                );
                assert_eq!(ours.kind(), ErrorKind::InvalidData, "{name}: {ours}");
                // The same words, for the same path.
                let ours = ours
                    .to_string()
                    .replace(&format!("r{i}.lock"), &format!("p{i}.lock"));
                assert_eq!(theirs["message"], ours.as_str(), "{name}");
                // At the same time: a dead marker at once, a node no lock
                // writes after 0.5 s, content no lock parses after 2 s.
                let grace = match name {
                    "a dead marker" => 0.0,
                    "a directory" | "a symlink" => 0.5,
                    _ => 2.0,
                };
                for (side, t) in [
                    ("Python", theirs["elapsed"].as_f64().unwrap()),
                    ("Rust", elapsed.as_secs_f64()),
                ] {
                    assert!(
                        t >= grace * 0.95 && t < grace + 0.45,
                        "{name}: {side} failed after {t:.2} s"
                    );
                }
            }
        }
    }
}

/// Plants a file `name` in `dir` with `links` links (the others in
/// `aside`), aged `age`.
fn plant(dir: &Path, aside: &Path, name: &str, links: u32, age: Duration) {
    let path = dir.join(name);
    std::fs::write(&path, b"x").unwrap();
    for i in 1..links {
        std::fs::hard_link(&path, aside.join(format!("{name}.{i}"))).unwrap();
    }
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

#[test]
fn litter_is_reaped_alike_by_both_sides() {
    const HEX: &str = "2ccc0000000000000000000000000000";
    const CLAIM: &str = "intent-v1-134be3102adef1d913f9a5a2ffcfd0ad.claim";
    let old = Duration::from_secs(10);
    let new = Duration::ZERO;
    for side in ["python", "rust"] {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("a.lock");
        let aside = root.path().join("aside");
        std::fs::create_dir(&aside).unwrap();
        let take = || match side {
            "python" => assert_eq!(python_try(&path, 0.0)["result"], "acquired"),
            _ => StrictLock::new(&path)
                .try_lock()
                .unwrap()
                .release()
                .unwrap(),
        };
        // The sentinel's private files, reaped as the sentinel is made.
        plant(
            root.path(),
            &aside,
            &format!(".a.lock.private-v1-{HEX}.tmp"),
            1,
            old,
        );
        plant(
            root.path(),
            &aside,
            &format!(".a.lock.private-v1-{}.tmp", &HEX.replace('2', "3")),
            1,
            new,
        );
        take();
        let left: Vec<_> = names(root.path())
            .into_iter()
            .filter(|n| n.contains(".private-v1-"))
            .collect();
        assert_eq!(
            left,
            [format!(".a.lock.private-v1-{}.tmp", HEX.replace('2', "3"))],
            "{side}"
        );
        // The claims' litter: probes and private files of claims, linked
        // or not, old or new; other dot names stay.
        let claims = claims_dir(&path);
        let probe = |tag: char| format!(".probe-v1-{}.tmp", HEX.replace('2', &tag.to_string()));
        let private = |tag: char| {
            format!(
                ".{CLAIM}.private-v1-{}.tmp",
                HEX.replace('2', &tag.to_string())
            )
        };
        let kept = [
            probe('a'),
            private('c'),
            ".whatever".into(),
            format!(".foo.private-v1-{HEX}.tmp"),
        ];
        plant(&claims, &aside, &kept[0], 1, new);
        plant(&claims, &aside, &probe('b'), 1, old);
        plant(&claims, &aside, &kept[1], 1, new);
        plant(&claims, &aside, &private('d'), 1, old);
        plant(&claims, &aside, &private('e'), 2, new);
        plant(&claims, &aside, &probe('f'), 2, new);
        plant(&claims, &aside, &kept[2], 1, old);
        plant(&claims, &aside, &kept[3], 1, old);
        take();
        assert_eq!(
            names(&claims),
            BTreeSet::from(kept.clone()),
            "{side} reaped otherwise"
        );
        // A public name that is no claim stops every acquire, on both sides.
        std::fs::write(claims.join("foo"), b"").unwrap();
        let theirs = python_try(&path, 0.0);
        let ours = StrictLock::new(&path).try_lock().unwrap_err();
        assert_eq!(theirs["type"], "SoftFileLockProtocolError");
        assert_eq!(ours.kind(), ErrorKind::InvalidData);
        assert_eq!(theirs["message"], ours.to_string().as_str());
        assert!(
            ours.to_string().contains("claim 'foo': unknown claim name"),
            "{ours}"
        );
    }
}

#[test]
fn a_strict_sentinel_keeps_every_soft_lock_out() {
    let dir = tempfile::tempdir().unwrap();
    for (maker, path) in [
        ("rust", dir.path().join("r.lock")),
        ("python", dir.path().join("p.lock")),
    ] {
        match maker {
            "rust" => StrictLock::new(&path).lock().unwrap().release().unwrap(),
            _ => assert_eq!(python_try(&path, 0.0)["result"], "acquired"),
        }
        for kind in ["soft", "marker"] {
            let answer = peer(&["try", kind, s(&path), "0.2"]);
            assert_eq!(
                answer["result"], "timeout",
                "{maker}'s sentinel, Python {kind}"
            );
        }
        for lock in [SoftLock::soft(&path), SoftLock::marker(&path)] {
            let err = lock.try_lock().unwrap_err();
            assert_eq!(
                err.kind(),
                ErrorKind::WouldBlock,
                "{maker}'s sentinel, {lock:?}"
            );
        }
        assert_released(&path);
    }
}

/// Makes `link(2)` and `linkat(2)` fail with `errno` in the calling
/// process and its children: a filesystem without hard links, as FAT's
/// `EPERM` (this kernel has no FAT driver to mount), or one that refuses
/// them otherwise.
#[cfg(target_arch = "x86_64")]
fn deny_links(errno: i32) -> std::io::Result<()> {
    common::seccomp::deny(libc::SYS_linkat, errno)?;
    common::seccomp::deny(libc::SYS_link, errno)
}

#[cfg(target_arch = "x86_64")]
#[test]
fn a_filesystem_without_hard_links_is_refused_by_both_sides() {
    use std::os::unix::process::CommandExt;
    let errnos = [
        (libc::EPERM, "PermissionError"),
        (libc::ENOSYS, "SoftFileLockProtocolError"),
        (libc::EXDEV, "SoftFileLockProtocolError"),
        (libc::EOPNOTSUPP, "SoftFileLockProtocolError"),
    ];
    for (errno, python_error) in errnos {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let mut ours = common::command(&swaplock(), "swaplock");
        ours.args(["run", "--kind", "strict", "-n", s(&path), "true"]);
        let mut theirs = peer_command(&["strict-try", s(&path), "0"]);
        for cmd in [&mut ours, &mut theirs] {
            // SAFETY: deny_links only calls prctl, which is
            // async-signal-safe.
            unsafe { cmd.pre_exec(move || deny_links(errno)) };
        }
        let ours = ours.output().unwrap();
        let stderr = String::from_utf8_lossy(&ours.stderr);
        assert_eq!(ours.status.code(), Some(255), "errno {errno}: {stderr}");
        assert!(
            stderr.contains("does not support atomic no-replace hard-link publication"),
            "errno {errno}: {stderr}"
        );
        let out = theirs.output().unwrap();
        let theirs: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(theirs["type"], python_error, "errno {errno}: {theirs}");
        // Neither side left a sentinel or a private file.
        for dir in [dir.path().to_path_buf(), claims_dir(&path)] {
            let litter: Vec<_> = names(&dir)
                .into_iter()
                .filter(|n| n == "a.lock" || n.contains("private-v1"))
                .collect();
            assert!(
                litter.is_empty(),
                "errno {errno}: {litter:?} in {}",
                dir.display()
            );
        }
    }
}
