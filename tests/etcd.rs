//! The etcd backend against a real etcd: one member, and a cluster of
//! three. Contenders in several processes take turns under an independent
//! checker, a holder killed or stopped loses the lock after its lease's
//! TTL (a stopped one learns it when it runs again, and `swaplock run`
//! stops its command), the cluster's leader is killed and restarted without
//! wedging anyone, and `etcdctl lock` on the same name excludes us and is
//! excluded by us.
//!
//! The checker: each holder's command appends `start T`, `tick T` and
//! `end T` records (T its fencing token) to one file opened with
//! `O_APPEND`. Start tokens must rise strictly, and no record may carry a
//! token older than the latest start: that would be a holder acting after
//! the lock passed on, which a resource fenced by the token refuses.
//!
//! Every wait is on a process's exit or a file's content, polled with a
//! deadline; the deadlines are safety nets that turn a hang into a failure.

#![cfg(target_os = "linux")]

mod common;

use common::{free_port, swaplock};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use swaplock::etcd::EtcdLock;
use swaplock::soft::Compromise;

/// How long anything here may take before the test counts it hung.
const SAFETY: Duration = Duration::from_secs(40);
/// The lease TTL of the holders here, in seconds: short, to keep the run
/// short.
const TTL: &str = "2";
/// The exit status of `swaplock run` whose lease was lost.
const LEASE_LOST: i32 = 75;

/// A program on `PATH`; the tests fail, rather than skip, without it.
fn program(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!("{name} not found: run scripts/setup (it installs etcd-server and etcd-client)")
        })
}

/// Polls `done` until it holds, or fails the test after [`SAFETY`].
fn wait_for(what: &str, done: impl FnMut() -> bool) {
    common::poll_until(SAFETY, what, done);
}

/// Waits for `child` to exit, failing the test after [`SAFETY`].
fn exit_of(child: &mut Child, what: &str) -> ExitStatus {
    let mut status = None;
    wait_for(&format!("{what} to exit"), || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    status.expect("an exit status")
}

/// One etcd member: its own process, data directory and log file.
struct Member {
    name: String,
    client: String,
    peer: String,
    data: PathBuf,
    log: PathBuf,
    cluster: String,
    child: Option<Child>,
}

impl Member {
    fn start(&mut self) {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("the member's log");
        let child = Command::new(program("etcd"))
            .arg("--data-dir")
            .arg(&self.data)
            .args(["--name", &self.name])
            .args(["--listen-client-urls", &self.client])
            .args(["--advertise-client-urls", &self.client])
            .args(["--listen-peer-urls", &self.peer])
            .args(["--initial-advertise-peer-urls", &self.peer])
            .args(["--initial-cluster", &self.cluster])
            .args(["--initial-cluster-token", "swaplock-test"])
            .stdin(Stdio::null())
            // Never the test's own output: it would stay open.
            .stdout(log.try_clone().expect("a second handle"))
            .stderr(log)
            .spawn()
            .expect("etcd starts");
        self.child = Some(child);
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// An etcd cluster of one or more members on free loopback ports, in a
/// temporary directory; killed when dropped.
struct Etcd {
    members: Vec<Member>,
    _dir: tempfile::TempDir,
}

impl Etcd {
    fn start(size: usize) -> Etcd {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let ports: Vec<(u16, u16)> = (0..size).map(|_| (free_port(), free_port())).collect();
        let cluster = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut members: Vec<Member> = ports
            .iter()
            .enumerate()
            .map(|(i, (client, peer))| Member {
                name: format!("m{i}"),
                client: format!("http://127.0.0.1:{client}"),
                peer: format!("http://127.0.0.1:{peer}"),
                data: dir.path().join(format!("m{i}.etcd")),
                log: dir.path().join(format!("m{i}.log")),
                cluster: cluster.clone(),
                child: None,
            })
            .collect();
        for m in &mut members {
            m.start();
        }
        let etcd = Etcd { members, _dir: dir };
        for i in 0..size {
            etcd.wait_serving(i);
        }
        etcd
    }

    /// Every member's client URL, comma-separated.
    fn endpoints(&self) -> String {
        let urls: Vec<&str> = self.members.iter().map(|m| m.client.as_str()).collect();
        urls.join(",")
    }

    /// Waits until member `i` answers with a leader in its cluster.
    fn wait_serving(&self, i: usize) {
        let lock = EtcdLock::new([self.members[i].client.clone()], "health")
            .request_timeout(Duration::from_secs(1));
        let log = &self.members[i].log;
        if !common::poll_within(SAFETY, || lock.holder().is_ok()) {
            panic!(
                "etcd member {i} does not serve: {:?}\n{}",
                lock.holder().err(),
                fs::read_to_string(log).unwrap_or_default()
            );
        }
    }

    /// The member that leads the cluster now, asked of the live members.
    fn leader(&self) -> Option<usize> {
        let ids: Vec<Option<(u64, u64)>> = self
            .members
            .iter()
            .map(|m| {
                m.child.as_ref()?;
                let out = Command::new(program("etcdctl"))
                    .args(["--endpoints", &m.client, "endpoint", "status", "-w", "json"])
                    .env("ETCDCTL_API", "3")
                    .stderr(Stdio::null())
                    .output()
                    .ok()?;
                let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
                let status = &v[0]["Status"];
                Some((
                    status["header"]["member_id"].as_u64()?,
                    status["leader"].as_u64()?,
                ))
            })
            .collect();
        ids.iter()
            .position(|id| id.is_some_and(|(me, leader)| me == leader && leader != 0))
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        for m in &mut self.members {
            m.kill();
        }
    }
}

/// `swaplock run --etcd ENDPOINTS --lease TTL [args] NAME sh -c SCRIPT`,
/// with `LOG` (the checker's file) and `DIR` in its environment.
fn run(endpoints: &str, args: &[&str], name: &str, script: &str, dir: &Path) -> Command {
    let mut cmd = Command::new(swaplock());
    cmd.args(["run", "--etcd", endpoints, "--lease", TTL])
        .args(args)
        .args([name, "sh", "-c", script])
        .env("LOG", dir.join("log"))
        .env("DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// A turn: start, a tick, end.
const TURN: &str = r#"printf 'start %s\n' "$SWAPLOCK_FENCING_TOKEN" >> "$LOG"
printf 'tick %s\n' "$SWAPLOCK_FENCING_TOKEN" >> "$LOG"
printf 'end %s\n' "$SWAPLOCK_FENCING_TOKEN" >> "$LOG""#;

/// A holder that never ends by itself: it starts, says so in
/// `$DIR/$1.ready` with its process ID, and ticks until `$DIR/$1.go` appears.
const HOLD: &str = r#"printf 'start %s\n' "$SWAPLOCK_FENCING_TOKEN" >> "$LOG"
echo $$ > "$DIR/$0.ready.tmp" && mv "$DIR/$0.ready.tmp" "$DIR/$0.ready"
while [ ! -e "$DIR/$0.go" ]; do
  printf 'tick %s\n' "$SWAPLOCK_FENCING_TOKEN" >> "$LOG"
  sleep 0.05
done
printf 'end %s\n' "$SWAPLOCK_FENCING_TOKEN" >> "$LOG""#;

/// `run` of [`HOLD`] as holder `who`.
fn hold(endpoints: &str, args: &[&str], name: &str, who: &str, dir: &Path) -> Command {
    let mut cmd = run(endpoints, args, name, HOLD, dir);
    // sh -c SCRIPT NAME: $0 is the holder's name.
    cmd.arg(who);
    cmd
}

/// What the checker found in the records.
#[derive(Debug, Default)]
struct Checked {
    /// Turns begun, and ended.
    starts: usize,
    ends: usize,
    /// Records of a holder older than the latest start.
    overlaps: usize,
    /// Start tokens that did not rise.
    not_rising: usize,
    /// The start tokens, in order.
    tokens: Vec<i64>,
}

fn check(log: &Path) -> Checked {
    let text = fs::read_to_string(log).unwrap_or_default();
    let mut c = Checked::default();
    let mut latest: Option<i64> = None;
    for line in text.lines() {
        let (what, token) = line.split_once(' ').expect("a record: WHAT TOKEN");
        let token: i64 = token.parse().expect("a fencing token");
        match what {
            "start" => {
                if latest.is_some_and(|l| token <= l) {
                    c.not_rising += 1;
                }
                latest = Some(token);
                c.starts += 1;
                c.tokens.push(token);
            }
            "tick" | "end" => {
                if latest != Some(token) {
                    c.overlaps += 1;
                }
                c.ends += usize::from(what == "end");
            }
            other => panic!("unknown record {other}"),
        }
    }
    c
}

fn stderr_of(child: &mut Child) -> String {
    let mut text = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut text);
    }
    text
}

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: a plain kill(2) of a process this test started.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, signal) }, 0);
}

/// Whether process `pid` has ended (a zombie nobody reaped counts).
fn gone(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the command name's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

/// The process ID `who` wrote in its ready file, once it holds the lock.
fn ready(dir: &Path, who: &str) -> i32 {
    let path = dir.join(format!("{who}.ready"));
    wait_for(&format!("{who} to hold the lock"), || path.exists());
    fs::read_to_string(&path)
        .expect("the ready file")
        .trim()
        .parse()
        .expect("a process ID")
}

/// The line `swaplock status --etcd` prints, and its exit status.
fn status(endpoints: &str, name: &str) -> (i32, String) {
    let out = Command::new(swaplock())
        .args(["status", "--etcd", endpoints, name])
        .output()
        .expect("swaplock status runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
    )
}

/// How many contenders wait behind the holder, by `status --etcd --json`.
fn waiting(endpoints: &str, name: &str) -> Option<u64> {
    let out = Command::new(swaplock())
        .args(["status", "--json", "--etcd", endpoints, name])
        .output()
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v["holder"]["waiting"].as_u64()
}

#[test]
fn contenders_in_several_processes_take_turns_with_rising_fencing_tokens() {
    let etcd = Etcd::start(1);
    let endpoints = etcd.endpoints();
    let dir = tempfile::tempdir().unwrap();
    const PROCESSES: usize = 8;
    const TURNS: usize = 20;
    let began = Instant::now();
    let workers: Vec<_> = (0..PROCESSES)
        .map(|_| {
            let (endpoints, dir) = (endpoints.clone(), dir.path().to_owned());
            std::thread::spawn(move || {
                for _ in 0..TURNS {
                    let mut child = run(&endpoints, &["-w", "30"], "turns", TURN, &dir)
                        .spawn()
                        .unwrap();
                    let status = exit_of(&mut child, "a turn");
                    assert!(status.success(), "{status}: {}", stderr_of(&mut child));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let c = check(&dir.path().join("log"));
    eprintln!(
        "{} turns by {PROCESSES} processes in {:.1} s: {c:?}",
        c.starts,
        began.elapsed().as_secs_f64()
    );
    assert_eq!((c.starts, c.ends), (PROCESSES * TURNS, PROCESSES * TURNS));
    assert_eq!((c.overlaps, c.not_rising), (0, 0));
    assert_eq!(status(&endpoints, "turns"), (0, "free".to_owned()));
}

#[test]
fn a_killed_holder_passes_the_lock_after_its_ttl() {
    let etcd = Etcd::start(1);
    let endpoints = etcd.endpoints();
    let dir = tempfile::tempdir().unwrap();
    let mut a = hold(&endpoints, &[], "killed", "a", dir.path())
        .spawn()
        .unwrap();
    let command = ready(dir.path(), "a");
    let mut b = run(&endpoints, &["-w", "30"], "killed", TURN, dir.path())
        .spawn()
        .unwrap();
    wait_for("b to wait behind a", || {
        waiting(&endpoints, "killed") == Some(1)
    });
    signal(a.id(), libc::SIGKILL);
    let killed = Instant::now();
    let _ = a.wait();
    let status = exit_of(&mut b, "b");
    let takeover = killed.elapsed();
    assert!(status.success(), "{status}: {}", stderr_of(&mut b));
    // The command died with its supervisor (PR_SET_PDEATHSIG).
    wait_for("a's command to die with its supervisor", || gone(command));
    let c = check(&dir.path().join("log"));
    eprintln!(
        "takeover {:.2} s after SIGKILL, lease TTL {TTL} s: {c:?}",
        takeover.as_secs_f64()
    );
    assert_eq!((c.starts, c.overlaps, c.not_rising), (2, 0, 0));
}

#[test]
fn a_stopped_holder_learns_when_it_resumes_that_it_lost_the_lock() {
    let etcd = Etcd::start(1);
    let endpoints = etcd.endpoints();
    let dir = tempfile::tempdir().unwrap();
    let mut a = hold(&endpoints, &[], "stopped", "a", dir.path())
        .spawn()
        .unwrap();
    let command = ready(dir.path(), "a");
    // The whole holder stops: its supervisor and its command's group.
    signal(a.id(), libc::SIGSTOP);
    // SAFETY: stopping the command's group, which this test started.
    assert_eq!(unsafe { libc::kill(-command, libc::SIGSTOP) }, 0);
    let stopped = Instant::now();
    let mut b = run(&endpoints, &["-w", "30"], "stopped", TURN, dir.path())
        .spawn()
        .unwrap();
    let status = exit_of(&mut b, "b");
    let takeover = stopped.elapsed();
    assert!(status.success(), "{status}: {}", stderr_of(&mut b));
    // The supervisor runs again, alone: it must stop its command before
    // that runs another step.
    signal(a.id(), libc::SIGCONT);
    let status = exit_of(&mut a, "a");
    let said = stderr_of(&mut a);
    assert_eq!(status.code(), Some(LEASE_LOST), "{status}: {said}");
    assert!(said.contains("was lost"), "{said}");
    // SAFETY: signal 0 only asks whether any process of the group exists.
    assert_eq!(unsafe { libc::kill(-command, 0) }, -1, "a's group is gone");
    let c = check(&dir.path().join("log"));
    eprintln!(
        "takeover {:.2} s after SIGSTOP, lease TTL {TTL} s; a said: {}; {c:?}",
        takeover.as_secs_f64(),
        said.trim()
    );
    assert_eq!((c.starts, c.ends, c.overlaps, c.not_rising), (2, 1, 0, 0));
}

#[test]
fn etcdctl_lock_and_ours_exclude_each_other_both_ways() {
    let etcd = Etcd::start(1);
    let endpoints = etcd.endpoints();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    // etcdctl holds; ours waits.
    let mut theirs = Command::new(program("etcdctl"))
        .args(["--endpoints", &endpoints, "lock", "shared", "--"])
        .args([
            "sh",
            "-c",
            r#"echo "$ETCD_LOCK_KEY $ETCD_LOCK_REV" > "$DIR/theirs.tmp" && mv "$DIR/theirs.tmp" "$DIR/theirs"
while [ ! -e "$DIR/theirs.go" ]; do sleep 0.05; done"#,
        ])
        .env("ETCDCTL_API", "3")
        .env("DIR", d)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let held = d.join("theirs");
    wait_for("etcdctl to hold the lock", || held.exists());
    let text = fs::read_to_string(&held).unwrap();
    let (their_key, their_rev) = text.trim().split_once(' ').unwrap();
    let (code, line) = status(&endpoints, "shared");
    assert_eq!(code, 1);
    assert!(
        line.starts_with(&format!("held: key {their_key} ")),
        "{line}"
    );
    let busy = run(&endpoints, &["-n"], "shared", "true", d)
        .output()
        .unwrap();
    assert_eq!(busy.status.code(), Some(255), "{busy:?}");
    let mut ours = run(
        &endpoints,
        &[],
        "shared",
        r#"env > "$DIR/ours.env"; printf 'start %s\n' "$SWAPLOCK_FENCING_TOKEN" >> "$LOG""#,
        d,
    )
    .spawn()
    .unwrap();
    wait_for("ours to wait behind etcdctl", || {
        waiting(&endpoints, "shared") == Some(1)
    });
    assert!(!d.join("ours.env").exists(), "ours ran while etcdctl held");
    fs::write(d.join("theirs.go"), "").unwrap();
    assert!(exit_of(&mut theirs, "etcdctl").success());
    let status = exit_of(&mut ours, "ours");
    assert!(status.success(), "{status}: {}", stderr_of(&mut ours));
    let env = fs::read_to_string(d.join("ours.env")).unwrap();
    let var = |name: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} exported"))
            .to_owned()
    };
    let token: i64 = var("SWAPLOCK_FENCING_TOKEN").parse().unwrap();
    assert!(token > their_rev.parse::<i64>().unwrap());
    let key = var("ETCD_LOCK_KEY");
    let lease = key.strip_prefix("shared/").expect("etcdctl's prefix");
    assert!(
        !lease.is_empty()
            && lease
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "{key}: NAME/<lease id in lower-case hex>, as etcdctl's"
    );
    // We waited: the revision is the cluster's when we took it, as etcdctl's.
    assert!(var("ETCD_LOCK_REV").parse::<i64>().unwrap() >= token);

    // Ours holds; etcdctl waits.
    let mut ours = hold(&endpoints, &[], "shared", "ours", d).spawn().unwrap();
    ready(d, "ours");
    let mut theirs = Command::new(program("etcdctl"))
        .args(["--endpoints", &endpoints, "lock", "shared", "--"])
        .args(["sh", "-c", r#"echo "$ETCD_LOCK_KEY" > "$DIR/theirs2""#])
        .env("ETCDCTL_API", "3")
        .env("DIR", d)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("etcdctl to wait behind ours", || {
        waiting(&endpoints, "shared") == Some(1)
    });
    assert!(!d.join("theirs2").exists(), "etcdctl ran while we held");
    fs::write(d.join("ours.go"), "").unwrap();
    assert!(exit_of(&mut ours, "ours").success());
    assert!(exit_of(&mut theirs, "etcdctl").success());
    assert!(fs::read_to_string(d.join("theirs2"))
        .unwrap()
        .starts_with("shared/"));
    let c = check(&d.join("log"));
    assert_eq!((c.overlaps, c.not_rising), (0, 0), "{c:?}");
}

#[test]
fn a_cluster_whose_leader_is_killed_and_restarted_never_wedges_a_contender() {
    let mut etcd = Etcd::start(3);
    let endpoints = etcd.endpoints();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut a = hold(&endpoints, &["--lease", "4"], "cluster", "a", d)
        .spawn()
        .unwrap();
    ready(d, "a");
    let mut b = run(&endpoints, &["-w", "30"], "cluster", TURN, d)
        .spawn()
        .unwrap();
    wait_for("b to wait behind a", || {
        waiting(&endpoints, "cluster") == Some(1)
    });
    let mut leader = None;
    wait_for("a leader", || {
        leader = etcd.leader();
        leader.is_some()
    });
    let leader = leader.unwrap();
    etcd.members[leader].kill();
    let killed = Instant::now();
    let mut elected = None;
    wait_for("a new leader", || {
        elected = etcd.leader();
        elected.is_some()
    });
    let election = killed.elapsed();
    etcd.members[leader].start();
    etcd.wait_serving(leader);
    fs::write(d.join("a.go"), "").unwrap();
    let a_status = exit_of(&mut a, "a");
    let a_said = stderr_of(&mut a);
    // A lease may end with its leader: then a says so and exits 75.
    assert!(
        a_status.success() || a_status.code() == Some(LEASE_LOST),
        "{a_status}: {a_said}"
    );
    let status = exit_of(&mut b, "b");
    assert!(status.success(), "{status}: {}", stderr_of(&mut b));
    // Every member serves turns afterwards, the restarted one too.
    for m in &etcd.members {
        let out = run(&m.client, &["-n"], "cluster", TURN, d)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}: {out:?}", m.name);
    }
    let c = check(&d.join("log"));
    eprintln!(
        "leader m{leader} killed; new leader m{} after {:.2} s; a exited {a_status}; {c:?}",
        elected.unwrap(),
        election.as_secs_f64()
    );
    assert_eq!((c.starts, c.overlaps, c.not_rising), (5, 0, 0));
}

#[test]
fn the_library_guard_waits_fails_and_fences_as_the_file_locks_do() {
    let etcd = Etcd::start(1);
    let url = etcd.members[0].client.clone();
    let lock = EtcdLock::new([url.clone()], "library").lease_ttl(Duration::from_secs(2));
    let first = lock.lock().unwrap();
    assert_eq!(first.key(), format!("library/{:x}", first.lease_id()));
    assert_eq!(first.revision(), first.fencing_token());
    assert_eq!(first.lease_lost(), None);
    let busy = lock.try_lock().unwrap_err();
    assert_eq!(busy.kind(), std::io::ErrorKind::WouldBlock, "{busy}");
    let late = lock.lock_timeout(Duration::ZERO).unwrap_err();
    assert_eq!(late.kind(), std::io::ErrorKind::TimedOut, "{late}");
    // Those left no key behind: the holder is alone.
    let holder = lock.holder().unwrap().expect("held");
    assert_eq!((holder.key.as_str(), holder.waiting), (first.key(), 0));
    let token = first.fencing_token();
    // The keep-alive holds the lease past its TTL while this thread waits.
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = lock.clone();
    let second = std::thread::spawn(move || {
        let guard = waiter.lock();
        let _ = tx.send(());
        guard
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(5)).is_err(),
        "still held after 2.5 TTLs"
    );
    assert_eq!(first.lease_lost(), None);
    first.release().unwrap();
    let second = second.join().unwrap().unwrap();
    assert!(second.fencing_token() > token);
    // Our key removed under us: the holder learns it.
    let out = Command::new(program("etcdctl"))
        .args(["--endpoints", &url, "del", second.key()])
        .env("ETCDCTL_API", "3")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(second.lease_lost(), Some(Compromise::MarkerMissing));
    drop(second);
    assert_eq!(lock.holder().unwrap(), None);
}

#[test]
fn bad_input_and_an_unreachable_cluster_are_errors_that_say_why() {
    let empty = EtcdLock::new(["http://127.0.0.1:1"], "")
        .try_lock()
        .unwrap_err();
    assert_eq!(empty.kind(), std::io::ErrorKind::InvalidInput);
    let none = EtcdLock::new(Vec::<String>::new(), "x")
        .try_lock()
        .unwrap_err();
    assert_eq!(none.kind(), std::io::ErrorKind::InvalidInput);
    let bad = EtcdLock::new(["ht tp://nowhere"], "x")
        .try_lock()
        .unwrap_err();
    assert_eq!(bad.kind(), std::io::ErrorKind::InvalidInput, "{bad}");
    let url = format!("http://127.0.0.1:{}", free_port());
    let away = EtcdLock::new([url.clone()], "x")
        .request_timeout(Duration::from_secs(1))
        .lock()
        .unwrap_err();
    let said = away.to_string();
    assert!(
        said.contains(&url) && said.contains("is etcd running"),
        "{said}"
    );
    let out = Command::new(swaplock())
        .args(["run", "--etcd", &url, "x", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(255));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&url));
}

/// Continues a stopped process even if the test panics.
struct Stopped(u32);

impl Drop for Stopped {
    fn drop(&mut self) {
        signal(self.0, libc::SIGCONT);
    }
}

/// The ticks of the holder of fencing token `token` in `log` so far (one
/// every 50 ms while it holds).
fn ticks(log: &Path, token: &str) -> usize {
    let tick = format!("tick {token}");
    fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == tick)
        .count()
}

/// One member of three frozen (SIGSTOP: a paused VM, or its traffic
/// dropped) costs no holder its lock and wedges no waiter: the keep-alive
/// and the waits leave a member that stops answering for another, as a
/// member that refuses. Six holders on six names, each with a waiter
/// behind it, the member frozen for more than three lease TTLs.
#[test]
fn a_frozen_member_costs_no_holder_its_lock_and_wedges_no_waiter() {
    const NAMES: usize = 6;
    let etcd = Etcd::start(3);
    let endpoints = etcd.endpoints();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut holders = Vec::new();
    let mut waiters = Vec::new();
    for i in 0..NAMES {
        let (name, who) = (format!("frozen-{i}"), format!("h{i}"));
        // One log per name: the checker judges one lock's turns.
        let log = d.join(format!("log{i}"));
        let mut holder = hold(&endpoints, &[], &name, &who, d);
        holders.push(holder.env("LOG", &log).spawn().unwrap());
        ready(d, &who);
        let mut waiter = run(&endpoints, &["-w", "60"], &name, TURN, d);
        waiters.push(waiter.env("LOG", &log).spawn().unwrap());
        wait_for("the waiter to queue", || {
            waiting(&endpoints, &name) == Some(1)
        });
    }
    let mut leader = None;
    wait_for("a leader", || {
        leader = etcd.leader();
        leader.is_some()
    });
    let frozen = (0..3).find(|&i| Some(i) != leader).unwrap();
    let member = etcd.members[frozen].child.as_ref().unwrap().id();
    signal(member, libc::SIGSTOP);
    let thawed = Stopped(member);
    // The holders' own clocks: 3 TTLs (TTL 2 s) of ticks after the freeze.
    let logs: Vec<_> = (0..NAMES).map(|i| d.join(format!("log{i}"))).collect();
    let tokens: Vec<String> = logs
        .iter()
        .map(|log| {
            let text = fs::read_to_string(log).unwrap();
            let first = text.lines().next().unwrap_or_default().to_owned();
            first.strip_prefix("start ").unwrap().to_owned()
        })
        .collect();
    let before: Vec<usize> = (0..NAMES).map(|i| ticks(&logs[i], &tokens[i])).collect();
    wait_for("3 TTLs of every holder's ticks", || {
        (0..NAMES).all(|i| ticks(&logs[i], &tokens[i]) >= before[i] + 120)
    });
    for i in 0..NAMES {
        fs::write(d.join(format!("h{i}.go")), "").unwrap();
    }
    // Every holder kept its lock to the end and released it; every waiter
    // then had its turn; all while the member stayed frozen.
    for (i, h) in holders.iter_mut().enumerate() {
        let status = exit_of(h, "a holder");
        assert!(status.success(), "holder {i}: {status}: {}", stderr_of(h));
    }
    for (i, w) in waiters.iter_mut().enumerate() {
        let status = exit_of(w, "a waiter");
        assert!(status.success(), "waiter {i}: {status}: {}", stderr_of(w));
    }
    drop(thawed);
    for log in &logs {
        let c = check(log);
        assert_eq!((c.starts, c.overlaps, c.not_rising), (2, 0, 0), "{c:?}");
    }
}

/// A guard used in a child forked from its holder leaves the lock alone:
/// the child's release is an error that says so, its drop returns at once,
/// and the parent still holds and releases the lock.
#[test]
fn a_guard_in_a_forked_child_leaves_the_lock_to_its_parent() {
    let etcd = Etcd::start(1);
    let url = etcd.members[0].client.clone();
    let lock = EtcdLock::new([url], "forked").lease_ttl(Duration::from_secs(2));
    let guard = lock.lock().unwrap();
    // SAFETY: the child only releases a guard and exits, by _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = match guard.release() {
            Err(e) if e.to_string().contains("forked from") => 0,
            _ => 1,
        };
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    assert!(pid > 0);
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status}"
    );
    assert_eq!(guard.lease_lost(), None);
    assert_eq!(
        lock.holder().unwrap().map(|h| h.key),
        Some(guard.key().to_owned())
    );
    guard.release().unwrap();
    assert_eq!(lock.holder().unwrap(), None);
}
