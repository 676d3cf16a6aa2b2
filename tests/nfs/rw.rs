//! The read-write lock between two NFS client hosts: Rust (this package's
//! `SoftRwLock`) and Python (filelock 4.2.11's `SoftReadWriteLock`)
//! readers and writers on both hosts at once, witnessed on the guest's own
//! tmpfs (tests/common/rw_chaos.rs); and a writer's whole host crashing
//! while it holds, which the other host's writer must evict.

use super::common::rw::{self, Side};
use super::common::rw_chaos::{assert_sound, conduct, figures, replay, Plan, Role, ROLES};
use super::common::worker::WORKER_ARGS;
use super::{fresh, Client, Report, MOUNTS, WORKERS_LIMIT};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `args` (a role's, or a `hold` spec) run on `client` by `side`: this test
/// executable as the Rust worker, or `rw_peer.py`.
fn on(client: &Client, side: Side, args: &[String]) -> Command {
    match side {
        Side::Rust => {
            let mut cmd = client.command(std::env::current_exe().unwrap());
            cmd.args(WORKER_ARGS)
                .env(rw::WORKER, args.join("\u{1f}"))
                .stderr(Stdio::inherit());
            cmd
        }
        Side::Python => {
            let mut cmd = client.command(super::common::python());
            cmd.arg(rw::peer_script()).args(args);
            cmd
        }
    }
}

/// The host name of a client host.
fn host_name(client: &Client) -> String {
    let out = client.command("hostname").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Heartbeat 1 s, stale 5 s (the guest's one processor runs eight members
/// and the server), filelock's poll of 0.25 s (quicker polls only load that
/// processor: 0.1 s made the runs half as slow again); no blows.
fn plan() -> Plan {
    Plan {
        terms: (1.0, 5.0, 0.25),
        rounds: 4,
        wait: 120.0,
        hold_ms: 20.0,
        chaos: Duration::ZERO,
        longest_stop: Duration::ZERO,
        kill_one_in: 1,
        seed: 1,
    }
}

/// Both client hosts, each with a Rust reader, a Rust writer, a Python
/// reader and a Python writer, on NFSv3, v4.2 and v4.2 with `actimeo=0`
/// (a lock on each): no overlap, no failed wait, every
/// member through its rounds.
pub(super) fn rounds(clients: &[Client], report: &mut Report) {
    let hosts: Vec<String> = clients.iter().map(host_name).collect();
    let plan = plan();
    let places: Vec<Role> = clients.iter().flat_map(|_| ROLES).collect();
    let runs: Vec<_> = MOUNTS
        .iter()
        .filter(|m| matches!(m.dir, "v3" | "v42" | "v42a"))
        .map(|mount| {
            let (_, on_client) = fresh("rw-rounds", mount);
            let witness = Path::new("/tmp").join(format!("rw-rounds-{}", mount.dir));
            std::fs::create_dir(&witness).unwrap();
            (mount, on_client.join("lock"), witness.join("witness"))
        })
        .collect();
    // One after another: the guest's one processor is what the runs wait
    // for (at once, the three took as long).
    let done: Vec<_> = runs
        .iter()
        .map(|(_, lock, log)| {
            let mut spawn = |place: usize, role: Role| {
                let host = place / ROLES.len();
                (
                    on(&clients[host], role.side, &role.args(lock, log, &plan)),
                    hosts[host].clone(),
                )
            };
            conduct(&mut spawn, &places, &plan, log, WORKERS_LIMIT)
        })
        .collect();
    let mut failed = Vec::new();
    for ((mount, _, log), done) in runs.iter().zip(done) {
        let seen = replay(&std::fs::read_to_string(log).unwrap_or_default());
        report.fact(
            mount.label,
            "rw lock, 2 hosts × (Rust reader, Rust writer, Python reader, Python writer)",
            figures(&plan, &done, &seen),
        );
        report.fact(
            mount.label,
            "rw lock: filelock's members ended by its own ESTALE, and replaced",
            done.peer_estale,
        );
        let what = format!("rw lock on {}", mount.label);
        // Every mount is reported before any fails the scenario.
        let sound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            assert_sound(&what, &places, &plan, &done, &seen);
        }));
        if let Err(panic) = sound {
            let why = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a panic");
            failed.push(why.to_owned());
        }
    }
    // One line: the host reads the conductor's results line by line.
    assert!(
        failed.is_empty(),
        "{}",
        failed.join("; ").replace('\n', " ")
    );
}

/// Heartbeat 1 s, stale 3 s, poll 0.1 s.
const CRASH: rw::Terms = (1.0, 3.0, 0.1);
/// The NFSv4 server's lease in the guest (tests/nfs/guest), seconds.
const SERVER_LEASE: f64 = 10.0;

/// A `hold write` participant of `side` on `client`, its output not read.
fn holder(client: &Client, side: Side, lock: &Path) -> Child {
    let (h, s, p) = CRASH;
    let mut args: Vec<String> = vec!["hold".into(), "write".into(), lock.display().to_string()];
    match side {
        Side::Rust => args.extend([h, s, p].map(|v| v.to_string())),
        Side::Python => {
            for (name, v) in [("--heartbeat", h), ("--stale", s), ("--poll", p)] {
                args.extend([name.to_owned(), v.to_string()]);
            }
        }
    }
    on(client, side, &args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The JSON lines a participant prints, as they come.
fn lines(child: &mut Child) -> mpsc::Receiver<Value> {
    let out = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                if tx.send(v).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

fn generation(v: &Value) -> u128 {
    match v {
        Value::String(s) => s.parse().unwrap(),
        v => v.as_u64().unwrap().into(),
    }
}

/// A writer holds on c1 when c1's whole host crashes: its link to the
/// server goes down and every process of the lock on it is killed, so its
/// record stops changing. c2's writer, waiting, evicts it once the record
/// has been still for the threshold (3 s) and takes the lock, in the same
/// commit, at a higher generation (the fencing token). On NFSv4 the
/// commit's last step, the rename over `gen/HEAD`, waits while the server
/// recalls the crashed host's delegation of HEAD, if it holds one, until
/// the host's lease lapses (seen: the rename took 13.5 s, with the guest's
/// 10 s lease); so the bound is the threshold and twice the lease. On
/// NFSv4.2 a Rust holder and a Python evictor, on NFSv3 the other way
/// round.
pub(super) fn host_crash(clients: &[Client], report: &mut Report) {
    let [c1, c2] = clients else {
        panic!("two client hosts")
    };
    let link = |state: &str| {
        let status = c1
            .command("ip")
            .args(["link", "set", &c1.link, state])
            .status()
            .unwrap();
        assert!(status.success(), "ip link set {} {state}", c1.link);
    };
    for (n, (dir, crashed, evictor)) in [
        ("v42", Side::Rust, Side::Python),
        ("v3", Side::Python, Side::Rust),
    ]
    .into_iter()
    .enumerate()
    {
        let mount = MOUNTS.iter().find(|m| m.dir == dir).unwrap();
        let (on_server, on_client) = fresh(&format!("rw-crash{n}"), mount);
        let lock = on_client.join("lock");
        let truth = on_server.join("lock");
        let mut held = holder(c1, crashed, &lock);
        let said = lines(&mut held);
        let hello = said
            .recv_timeout(Duration::from_secs(60))
            .expect("c1's writer holds");
        let before = generation(&hello["generation"]);
        let mut waiting = holder(c2, evictor, &lock);
        let taken = lines(&mut waiting);
        // The waiter's record is made: it is waiting.
        super::common::poll_until(Duration::from_secs(60), "c2's writer waits", || {
            rw::holders(&truth).len() == 2
        });
        let crashed_at = Instant::now();
        link("down");
        let _ = held.kill();
        let got = taken.recv_timeout(Duration::from_secs(60));
        let after_s = crashed_at.elapsed().as_secs_f64();
        link("up");
        let _ = held.wait();
        let got = got.expect("c2's writer took the lock within 60 s of the crash");
        let after = generation(&got["generation"]);
        let named = rw::snapshot(&truth, after).and_then(|(w, _)| w);
        report.fact(
            mount.label,
            &format!(
                "rw lock: a {crashed:?} writer's host crashed (link down, killed): the other \
                 host's {evictor:?} writer took the lock (stale threshold 3 s)"
            ),
            format!("after {after_s:.1} s, at generation {after} (the crashed one's {before})"),
        );
        drop(waiting.stdin.take());
        let released = waiting.wait().unwrap();
        assert!(
            after > before,
            "{}: fencing: {after} after {before}",
            mount.label
        );
        assert_eq!(
            named.as_ref(),
            got["token"].as_str().map(str::to_owned).as_ref(),
            "{}",
            mount.label
        );
        assert!(
            after_s < CRASH.1 + 2.0 * SERVER_LEASE,
            "{}: the lock was taken {after_s:.1} s after the crash",
            mount.label
        );
        assert!(
            released.success(),
            "{}: c2's writer: {released}",
            mount.label
        );
    }
}
