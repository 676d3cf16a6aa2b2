//! Mixed chaos on one read-write lock: Rust readers and writers (this
//! package's `SoftRwLock`, in worker processes) and Python readers and
//! writers (filelock 4.2.11's `SoftReadWriteLock`, `tests/peer/rw_peer.py
//! loop`) take turns on one lock while a conductor SIGKILLs members and
//! SIGSTOPs them for less than the stale threshold, starting a new member
//! in the place of each killed one.
//!
//! The witness is independent of the lock: each member, once it holds,
//! appends `E MODE SIDE WHO GENERATION NS` to a log on a local filesystem,
//! pauses, appends `X ...` and only then releases; the conductor appends
//! `K - - WHO - NS` once it has reaped a member it killed (a dead process
//! does nothing more inside). Each line is one `write(2)` on an `O_APPEND`
//! descriptor of a local file, so the log's order is the order in which
//! the lines were made: two members whose stretches between `E` and `X`
//! overlapped in time show as an entry while the other is inside, which
//! [`replay`] finds however briefly they overlapped. It also checks the
//! fencing tokens: a writer's generation exceeds every generation entered
//! before it, and every entry after a writer has a greater one.

use super::rw::{python_command, rust_command, Side, Terms};
use serde_json::Value;
use std::collections::HashMap;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What a chaos run asks of its members and its conductor.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Heartbeat, stale threshold and poll, seconds, of every member.
    pub terms: Terms,
    /// Holds per member.
    pub rounds: usize,
    /// A member's longest wait for one hold, seconds: a wait that outlasts
    /// it fails, and is counted.
    pub wait: f64,
    /// The longest pause inside a hold, milliseconds.
    pub hold_ms: f64,
    /// How long blows land from the start (zero: none).
    pub chaos: Duration,
    /// The longest SIGSTOP: below the threshold less a heartbeat, with a
    /// margin, so that no live member is evicted.
    pub longest_stop: Duration,
    /// One blow in this many is a SIGKILL, the others SIGSTOPs (one in
    /// half as many, of the blows aimed at a member inside its hold).
    pub kill_one_in: u64,
    /// The seed of the blows (reported, so that a run can be repeated).
    pub seed: u64,
}

/// A member's side and mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Role {
    pub side: Side,
    pub mode: &'static str,
}

/// A Rust reader, a Rust writer, a Python reader, a Python writer.
pub const ROLES: [Role; 4] = [
    Role {
        side: Side::Rust,
        mode: "read",
    },
    Role {
        side: Side::Rust,
        mode: "write",
    },
    Role {
        side: Side::Python,
        mode: "read",
    },
    Role {
        side: Side::Python,
        mode: "write",
    },
];

impl Role {
    /// The words of a member of this role (after the program and its
    /// harness arguments for Rust, after `rw_peer.py` for Python).
    pub fn args(&self, lock: &Path, log: &Path, plan: &Plan) -> Vec<String> {
        let (h, s, p) = plan.terms;
        let mut args: Vec<String> = vec![
            "loop".into(),
            self.mode.into(),
            lock.to_str().unwrap().into(),
            log.to_str().unwrap().into(),
            plan.rounds.to_string(),
            plan.wait.to_string(),
            plan.hold_ms.to_string(),
        ];
        match self.side {
            Side::Rust => args.extend([h, s, p].map(|v| v.to_string())),
            Side::Python => {
                for (name, v) in [("--heartbeat", h), ("--stale", s), ("--poll", p)] {
                    args.extend([name.to_owned(), v.to_string()]);
                }
            }
        }
        args
    }

    /// A member of this role on this machine.
    pub fn local(&self, lock: &Path, log: &Path, plan: &Plan) -> Command {
        let args = self.args(lock, log, plan);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        match self.side {
            Side::Rust => rust_command(&args),
            Side::Python => python_command(&args),
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the
/// machine (Python's `time.monotonic_ns`), namespaces or not.
pub fn monotonic_ns() -> u64 {
    // SAFETY: an all-zero timespec is a valid value for the call to fill.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid clock and a timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// This host's name (its UTS namespace's).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_owned()
}

/// Appends `line` to `log` in one `write(2)`.
pub fn note(log: &Path, line: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(log)
        .unwrap();
    f.write_all(line.as_bytes()).unwrap();
}

/// The Rust member: `rounds` holds in `mode`, each witnessed in `log`;
/// prints a JSON summary as `rw_peer.py loop` does.
#[allow(clippy::too_many_arguments)]
pub fn member(
    mode: &str,
    path: &str,
    log: &str,
    rounds: usize,
    wait: f64,
    hold_ms: f64,
    terms: Terms,
) {
    use std::sync::{Arc, Mutex};
    let who = format!("{}:{}", hostname(), std::process::id());
    let compromises = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&compromises);
    let lock = super::rw::lock(path, terms)
        .on_compromise(move |c| seen.lock().unwrap().push(format!("{c:?}")));
    let log = Path::new(log);
    let mut rng = super::stress::Rng(u64::from(std::process::id()) | 1);
    let (mut done, mut errors, mut longest) = (0, Vec::new(), 0f64);
    let limit = Duration::from_secs_f64(wait);
    for _ in 0..rounds {
        let began = Instant::now();
        let held = match mode {
            "read" => lock.read_timeout(limit),
            _ => lock.write_timeout(limit),
        };
        let guard = match held {
            Ok(guard) => guard,
            Err(e) => {
                errors.push(format!("{who}: {:?}: {e}", e.kind()));
                continue;
            }
        };
        longest = longest.max(began.elapsed().as_secs_f64());
        let g = guard.generation();
        note(
            log,
            &format!("E {mode} rust {who} {g} {}\n", monotonic_ns()),
        );
        let pause = rng.below((hold_ms * 1000.0) as u64 + 1);
        std::thread::sleep(Duration::from_micros(pause));
        note(
            log,
            &format!("X {mode} rust {who} {g} {}\n", monotonic_ns()),
        );
        if let Err(e) = guard.release() {
            errors.push(format!("{who}: release: {e}"));
        }
        done += 1;
    }
    let compromises = compromises.lock().unwrap().clone();
    println!(
        "{}",
        serde_json::json!({
            "who": who,
            "rounds": done,
            "errors": errors,
            "compromises": compromises,
            "longest_wait": longest,
        })
    );
}

/// A member the conductor runs.
struct Live {
    /// Its place in the conductor's list.
    place: usize,
    role: Role,
    host: String,
    child: Child,
    /// Stopped until then.
    stopped: Option<Instant>,
    /// Killed by the conductor, at this monotonic instant.
    killed: Option<u64>,
}

/// Who is inside a hold, as the witness log says so far.
#[derive(Default)]
struct Inside {
    read: usize,
    who: std::collections::HashSet<String>,
}

impl Inside {
    /// Reads the lines added since the last look.
    fn update(&mut self, log: &Path) {
        let Ok(text) = std::fs::read(log) else {
            return;
        };
        // Whole lines only: a line being written is read next time.
        let end = text[self.read..]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(self.read, |i| self.read + i + 1);
        for line in String::from_utf8_lossy(&text[self.read..end]).lines() {
            let f: Vec<&str> = line.split(' ').collect();
            match f[..] {
                ["E", _, _, who, ..] => {
                    self.who.insert(who.to_owned());
                }
                [_, _, _, who, ..] => {
                    self.who.remove(who);
                }
                _ => {}
            }
        }
        self.read = end;
    }

    fn holds(&self, host: &str, pid: u32) -> bool {
        self.who.contains(&format!("{host}:{pid}"))
    }
}

/// What a conductor did and saw.
#[derive(Debug, Default)]
pub struct Conducted {
    pub kills: usize,
    pub stops: usize,
    /// Members started, the replacements of killed ones included.
    pub started: usize,
    /// The summaries of the members that ended by themselves.
    pub finished: Vec<Value>,
    /// Members that failed, fell short of their rounds, failed a wait, or
    /// were still running at the deadline.
    pub failures: Vec<String>,
    /// Waits that failed (timed out or erred), as the members counted
    /// them.
    pub failed_waits: usize,
    /// filelock 4.2.11's members ended by its own `OSError` ESTALE (a
    /// network filesystem's stale handle of a generation a peer removed,
    /// which filelock does not read as missing), each replaced as a
    /// killed member is.
    pub peer_estale: usize,
    pub took: Duration,
    /// When the first member was started (CLOCK_MONOTONIC, ns).
    pub began: u64,
}

impl Conducted {
    /// As one JSON line, for a conductor in another process (a host's).
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "kills": self.kills,
            "stops": self.stops,
            "started": self.started,
            "finished": self.finished,
            "failures": self.failures,
            "failed_waits": self.failed_waits,
            "peer_estale": self.peer_estale,
            "took": self.took.as_secs_f64(),
            "began": self.began,
        })
    }

    /// The sum of several conductors' runs, from their JSON lines (the
    /// longest run's time).
    pub fn sum(parts: &[Value]) -> Conducted {
        let mut all = Conducted::default();
        for v in parts {
            let n = |k: &str| v[k].as_u64().unwrap_or(0) as usize;
            all.kills += n("kills");
            all.stops += n("stops");
            all.started += n("started");
            all.failed_waits += n("failed_waits");
            all.peer_estale += n("peer_estale");
            all.finished
                .extend(v["finished"].as_array().into_iter().flatten().cloned());
            all.failures.extend(
                v["failures"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|f| f.as_str().unwrap_or_default().to_owned()),
            );
            let took = Duration::from_secs_f64(v["took"].as_f64().unwrap_or(0.0));
            all.took = all.took.max(took);
            let began = v["began"].as_u64().unwrap_or(0);
            if all.began == 0 || began < all.began {
                all.began = began;
            }
        }
        all
    }

    /// The compromises the finished members reported.
    pub fn compromises(&self) -> Vec<Value> {
        self.finished
            .iter()
            .flat_map(|v| v["compromises"].as_array().into_iter().flatten().cloned())
            .collect()
    }

    /// The longest wait of a finished member, seconds.
    pub fn longest_wait(&self) -> f64 {
        self.finished
            .iter()
            .filter_map(|v| v["longest_wait"].as_f64())
            .fold(0f64, f64::max)
    }
}

/// The figures of a run, in one line.
pub fn figures(plan: &Plan, done: &Conducted, seen: &Replay) -> String {
    format!(
        "{} holds ({}); overlaps {}; fencing {}; kills {} ({} inside a hold), stops {}; a killed \
         holder's successor entered after {}; longest wait {:.2} s, failed waits {}; members {} \
         started, {} finished all {} rounds; last generation {}; {:.1} s (the first hold after \
         {:.1} s, the last {:.1} s before the end); seed {}",
        seen.total(),
        seen.entry_figures(),
        seen.overlaps.len(),
        if seen.fencing.is_empty() {
            "ordered"
        } else {
            "VIOLATED"
        },
        done.kills,
        seen.killed_inside,
        done.stops,
        seen.eviction_figures(),
        done.longest_wait(),
        done.failed_waits,
        done.started,
        done.finished.len(),
        plan.rounds,
        seen.last_generation,
        done.took.as_secs_f64(),
        seen.first.saturating_sub(done.began) as f64 / 1e9,
        (done.began + done.took.as_nanos() as u64).saturating_sub(seen.last) as f64 / 1e9,
        plan.seed,
    )
}

/// The run's promises: no member failed, fell short or waited in vain,
/// no overlap, fencing in order, a well-formed log, no live member
/// evicted, and each of `places` (members of `roles` at once) ended with a
/// member through all its rounds.
pub fn assert_sound(label: &str, places: &[Role], plan: &Plan, done: &Conducted, seen: &Replay) {
    assert!(done.failures.is_empty(), "{label}: {:#?}", done.failures);
    assert!(seen.overlaps.is_empty(), "{label}: {:#?}", seen.overlaps);
    assert!(seen.fencing.is_empty(), "{label}: {:#?}", seen.fencing);
    assert!(seen.malformed.is_empty(), "{label}: {:#?}", seen.malformed);
    let compromises = done.compromises();
    assert!(
        compromises.is_empty(),
        "{label}: a live member was evicted (no stop reaches the threshold): {compromises:?}"
    );
    assert_eq!(
        done.finished.len(),
        places.len(),
        "{label}: a member of every place finished"
    );
    for role in ROLES {
        let side = match role.side {
            Side::Rust => "rust",
            Side::Python => "python",
        };
        let at_least = places.iter().filter(|p| **p == role).count() * plan.rounds;
        let n = seen.entries.get(&format!("{side} {}", role.mode));
        assert!(
            n.copied().unwrap_or(0) >= at_least,
            "{label}: {role:?}: {n:?} holds, fewer than {at_least}"
        );
    }
}

/// How the conductor starts the member of a place (its index and role):
/// its command (the role's [`Role::args`] given to the program of the
/// role's side, on the place's host), and the host name its witness lines
/// carry.
pub type Spawn<'a> = dyn FnMut(usize, Role) -> (Command, String) + 'a;

/// Runs a member in each of `places` on the lock (`spawn` knows where),
/// with the blows of `plan`, until every member has ended or `limit` has
/// passed (then every member left is killed and counted as wedged).
pub fn conduct(
    spawn: &mut Spawn<'_>,
    places: &[Role],
    plan: &Plan,
    log: &Path,
    limit: Duration,
) -> Conducted {
    let started = Instant::now();
    let chaos_end = started + plan.chaos;
    let deadline = started + limit;
    let mut rng = super::stress::Rng(plan.seed | 1);
    let mut out = Conducted {
        began: monotonic_ns(),
        ..Conducted::default()
    };
    let mut start = |place: usize, out: &mut Conducted| {
        let role = places[place];
        let (mut cmd, host) = spawn(place, role);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{role:?}: {e}"));
        out.started += 1;
        Live {
            place,
            role,
            host,
            child,
            stopped: None,
            killed: None,
        }
    };
    let mut live: Vec<Live> = (0..places.len())
        .map(|place| start(place, &mut out))
        .collect();
    let mut inside = Inside::default();
    let mut next_blow = started + Duration::from_millis(200 + rng.below(400));
    // Whether the next blow is aimed at a member inside its hold.
    let mut aim_at_holder: Option<bool> = None;
    while !live.is_empty() {
        let now = Instant::now();
        if now >= deadline {
            for mut m in live.drain(..) {
                let _ = m.child.kill();
                let _ = m.child.wait();
                out.failures.push(format!(
                    "{:?} {} {}: still running after {limit:?} (wedged)",
                    m.role.side,
                    m.role.mode,
                    m.child.id()
                ));
            }
            break;
        }
        // Reaped here, by the one thread that signals them: a PID is never
        // signalled once it could name another process.
        let mut i = 0;
        while i < live.len() {
            let Some(status) = live[i].child.try_wait().unwrap() else {
                i += 1;
                continue;
            };
            let mut m = live.swap_remove(i);
            let mut text = String::new();
            if let Some(mut stdout) = m.child.stdout.take() {
                let _ = stdout.read_to_string(&mut text);
            }
            let who = format!("{}:{}", m.host, m.child.id());
            match m.killed {
                Some(at) if status.signal() == Some(libc::SIGKILL) => {
                    note(log, &format!("K - - {who} - {at}\n"));
                    // Its place is taken, so that every place ends with a
                    // member that went through all its rounds.
                    live.push(start(m.place, &mut out));
                }
                _ if !status.success() => out.failures.push(format!(
                    "{:?} {} {who}: {status}: {text}",
                    m.role.side, m.role.mode
                )),
                _ => {
                    let summary = text
                        .lines()
                        .find(|l| l.starts_with('{'))
                        .and_then(|l| serde_json::from_str::<Value>(l).ok());
                    let errors = summary.as_ref().and_then(|v| v["errors"].as_array());
                    let estale_only = m.role.side == Side::Python
                        && errors.is_some_and(|e| {
                            !e.is_empty()
                                && e.iter()
                                    .all(|e| e.as_str().is_some_and(|e| e.contains("[Errno 116]")))
                        });
                    if estale_only {
                        out.peer_estale += 1;
                        live.push(start(m.place, &mut out));
                        continue;
                    }
                    if let Some(v) = &summary {
                        out.failed_waits += v["errors"].as_array().map_or(0, Vec::len);
                    }
                    match summary {
                        Some(v)
                            if v["rounds"] == plan.rounds
                                && v["errors"].as_array().is_some_and(Vec::is_empty) =>
                        {
                            out.finished.push(v)
                        }
                        _ => out.failures.push(format!(
                            "{:?} {} {who}: short of its {} rounds: {text}",
                            m.role.side, m.role.mode, plan.rounds
                        )),
                    }
                }
            }
        }
        for m in &mut live {
            if m.stopped
                .is_some_and(|until| until <= now || now >= chaos_end)
            {
                // SAFETY: kill has no memory effects; the child is not reaped.
                unsafe { libc::kill(m.child.id() as i32, libc::SIGCONT) };
                m.stopped = None;
            }
        }
        if now < chaos_end && now >= next_blow {
            inside.update(log);
            let running: Vec<usize> = (0..live.len())
                .filter(|&i| live[i].stopped.is_none() && live[i].killed.is_none())
                .collect();
            let holding: Vec<usize> = running
                .iter()
                .copied()
                .filter(|&i| inside.holds(&live[i].host, live[i].child.id()))
                .collect();
            // Every other blow falls on a member inside its hold (it waits
            // up to 300 ms for one to be): the kills that need an eviction,
            // the stops of a holder.
            let at_holder = *aim_at_holder.get_or_insert_with(|| rng.below(2) == 0)
                && now < next_blow + Duration::from_millis(300);
            let (among, kill_one_in) = match at_holder {
                true => (holding, plan.kill_one_in.div_ceil(2)),
                false => (running, plan.kill_one_in),
            };
            if !among.is_empty() {
                aim_at_holder = None;
                next_blow = now + Duration::from_millis(200 + rng.below(400));
                let m = &mut live[among[rng.below(among.len() as u64) as usize]];
                if rng.below(kill_one_in) == 0 {
                    m.killed = Some(monotonic_ns());
                    let _ = m.child.kill();
                    out.kills += 1;
                } else {
                    let most = plan.longest_stop.as_millis() as u64;
                    let pause = Duration::from_millis(most / 10 + rng.below(most - most / 10));
                    // SAFETY: as above.
                    unsafe { libc::kill(m.child.id() as i32, libc::SIGSTOP) };
                    m.stopped = Some(now + pause);
                    out.stops += 1;
                }
            }
        }
        // The conductor's own rhythm: it looks again every 5 ms.
        std::thread::sleep(Duration::from_millis(5));
    }
    out.took = started.elapsed();
    out
}

/// What the witness log shows.
#[derive(Debug, Default)]
pub struct Replay {
    /// Holds entered, per `SIDE MODE`.
    pub entries: HashMap<String, usize>,
    /// An entry while a conflicting member was inside.
    pub overlaps: Vec<String>,
    /// A generation out of the order the fencing promises.
    pub fencing: Vec<String>,
    /// Lines that do not pair up.
    pub malformed: Vec<String>,
    /// Members killed inside their hold.
    pub killed_inside: usize,
    /// For each member killed inside: seconds from its kill to the next
    /// entry it kept out (a writer for a reader, anyone for a writer),
    /// which its eviction let in.
    pub evictions: Vec<f64>,
    /// The highest generation entered.
    pub last_generation: u128,
    /// When the first and the last hold were entered (CLOCK_MONOTONIC, ns).
    pub first: u64,
    pub last: u64,
}

impl Replay {
    pub fn total(&self) -> usize {
        self.entries.values().sum()
    }

    /// `min/median/max` of the eviction delays, or `none`.
    pub fn eviction_figures(&self) -> String {
        let mut v = self.evictions.clone();
        if v.is_empty() {
            return "none".into();
        }
        v.sort_by(f64::total_cmp);
        format!(
            "{:.2}/{:.2}/{:.2} s (min/median/max of {})",
            v[0],
            v[v.len() / 2],
            v[v.len() - 1],
            v.len()
        )
    }

    /// The entries per side and mode, in one line.
    pub fn entry_figures(&self) -> String {
        let mut all: Vec<_> = self.entries.iter().collect();
        all.sort();
        all.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Reads the witness log in its order (see the module's comment).
pub fn replay(text: &str) -> Replay {
    let mut r = Replay::default();
    // Who is inside: mode and generation.
    let mut inside: HashMap<String, (String, u128)> = HashMap::new();
    let (mut highest, mut last_writer) = (0u128, 0u128);
    // Members killed inside, not yet followed by an entry they kept out.
    let mut pending: Vec<(String, u64)> = Vec::new();
    let conflict = |a: &str, b: &str| a == "write" || b == "write";
    for (n, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split(' ').collect();
        let [what, mode, side, who, generation, ns] = f[..] else {
            r.malformed.push(format!("line {n}: {line:?}"));
            continue;
        };
        let Ok(ns) = ns.parse::<u64>() else {
            r.malformed.push(format!("line {n}: {line:?}"));
            continue;
        };
        match what {
            "E" => {
                let Ok(g) = generation.parse::<u128>() else {
                    r.malformed.push(format!("line {n}: {line:?}"));
                    continue;
                };
                for (other, (m, og)) in &inside {
                    if conflict(mode, m) {
                        r.overlaps.push(format!(
                            "line {n}: {side} {mode} {who} (generation {g}) entered while \
                             {m} {other} (generation {og}) was inside"
                        ));
                    }
                }
                if mode == "write" && g <= highest {
                    r.fencing.push(format!(
                        "line {n}: writer {who} at generation {g}, not above {highest} entered before"
                    ));
                }
                if g <= last_writer {
                    r.fencing.push(format!(
                        "line {n}: {mode} {who} at generation {g}, not above the writer's {last_writer} before"
                    ));
                }
                highest = highest.max(g);
                if mode == "write" {
                    last_writer = g;
                }
                pending.retain(|(killed, at)| {
                    if conflict(killed, mode) {
                        r.evictions.push(ns.saturating_sub(*at) as f64 / 1e9);
                        false
                    } else {
                        true
                    }
                });
                if inside.insert(who.into(), (mode.into(), g)).is_some() {
                    r.malformed.push(format!("line {n}: {who} entered twice"));
                }
                *r.entries.entry(format!("{side} {mode}")).or_default() += 1;
                if r.first == 0 {
                    r.first = ns;
                }
                r.last = ns;
            }
            "X" => {
                let g = generation.parse::<u128>().ok();
                match inside.remove(who) {
                    Some((m, og)) if m == mode && Some(og) == g => {}
                    other => r
                        .malformed
                        .push(format!("line {n}: {line:?} leaves, inside: {other:?}")),
                }
            }
            "K" => {
                if let Some((m, _)) = inside.remove(who) {
                    r.killed_inside += 1;
                    pending.push((m, ns));
                }
            }
            _ => r.malformed.push(format!("line {n}: {line:?}")),
        }
    }
    for (who, (m, g)) in inside {
        r.malformed.push(format!(
            "{m} {who} (generation {g}) never left, nor was killed"
        ));
    }
    r.last_generation = highest;
    r
}

/// The type of the filesystem `dir` is on, as the mount table names it.
pub fn filesystem(dir: &Path) -> String {
    let out = Command::new("findmnt")
        .args(["-n", "-o", "FSTYPE", "-T"])
        .arg(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().next().unwrap_or("unknown").trim().to_owned()
}

/// A seed for the blows, from the clock (reported with the figures).
pub fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}
