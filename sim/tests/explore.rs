//! The soft-lock protocol under the simulator: random schedules of many
//! scenarios (drawn uniformly, with long pauses, and by PCT's changing
//! priorities, a third each) and an exhaustive exploration find no violation in ours; named
//! scenarios of the seed's races find the naive pre-fix policy letting two
//! processes hold the lock, and not ours.
//!
//! `SWAPLOCK_SIM_SCHEDULES` sets the number of random schedules (default
//! 1,000,000, shared among the scenarios); `SWAPLOCK_SIM_FREE_STEPS` the
//! bound of the every-interleaving search (default 20 steps);
//! `SWAPLOCK_SIM_DRAW=uniform`, `pausing` or `pct` draws every random
//! schedule so;
//! `SWAPLOCK_SIM_ONLY` keeps the random runs to the scenarios whose name
//! holds it (the schedules are still shared among all of them, so each
//! chosen scenario runs as many seeds as in a whole run).

use std::collections::BTreeMap;
use std::time::Duration;
use swaplock_core::soft::Kind;
use swaplock_sim::model::Faults;
use swaplock_sim::{
    contenders, enosys_fallback_race, explore, explore_free, naive, run_drawn, run_seed, scenarios,
    windows_symlink_race, Draw, Policy, Progress, Scenario, Sim, Violation, LOCK,
};

const DEAD: &[u8] = b"999\nh1\n";

fn total_schedules() -> u64 {
    std::env::var("SWAPLOCK_SIM_SCHEDULES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

/// What the random schedules of one scenario made of the progress check,
/// and of the files runs left.
#[derive(Default)]
struct Tally {
    critical_sections: u64,
    took: u64,
    unjudged: u64,
    /// Runs with a power cut.
    cut: u64,
    exempt: BTreeMap<&'static str, u64>,
    /// Runs that left files no later takeover removes, with the first
    /// seed and what it left.
    accumulating: Option<(u64, u64, String)>,
}

impl Tally {
    fn add(&mut self, seed: u64, outcome: &swaplock_sim::Outcome) {
        self.critical_sections += outcome.acquisitions;
        self.cut += u64::from(outcome.cuts > 0);
        match outcome.progress {
            Progress::Took { .. } => self.took += 1,
            Progress::Exempt(why) => *self.exempt.entry(why).or_default() += 1,
            Progress::NotJudged => self.unjudged += 1,
        }
        if let Some(first) = outcome.accumulating.first() {
            let entry = self
                .accumulating
                .get_or_insert_with(|| (0, seed, first.clone()));
            entry.0 += 1;
            if seed < entry.1 {
                (entry.1, entry.2) = (seed, first.clone());
            }
        }
    }

    fn merge(&mut self, other: Tally) {
        self.critical_sections += other.critical_sections;
        self.took += other.took;
        self.unjudged += other.unjudged;
        self.cut += other.cut;
        for (why, n) in other.exempt {
            *self.exempt.entry(why).or_default() += n;
        }
        if let Some((runs, seed, first)) = other.accumulating {
            let entry = self
                .accumulating
                .get_or_insert_with(|| (0, seed, first.clone()));
            entry.0 += runs;
            if seed < entry.1 {
                (entry.1, entry.2) = (seed, first);
            }
        }
    }
}

/// Seeds a worker takes at a time.
const CHUNK: u64 = 500;

/// Runs `per` random schedules of each scenario `pick` selects (seeds
/// apart per scenario, by its index in the catalogue), failing on any
/// violation, on every core (schedules are independent and seeded, so the
/// outcome is the same on any number). Prints, per scenario, the progress
/// check's verdicts and the runs that left files no later takeover
/// removes.
fn random_runs(pick: impl Fn(&Scenario) -> bool + Sync, per: u64) {
    let list = scenarios(Policy::Ours);
    let only = std::env::var("SWAPLOCK_SIM_ONLY").unwrap_or_default();
    let forced = std::env::var("SWAPLOCK_SIM_DRAW").unwrap_or_default();
    let chosen: Vec<usize> = (0..list.len())
        .filter(|&i| pick(&list[i].1) && list[i].0.contains(only.as_str()))
        .collect();
    let chunks: Vec<(usize, u64)> = chosen
        .iter()
        .flat_map(|&i| (0..per.div_ceil(CHUNK)).map(move |c| (i, c * CHUNK)))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let started = std::time::Instant::now();
    let results: Vec<(u64, u64, BTreeMap<usize, Tally>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let list = scenarios(Policy::Ours);
                    let (mut schedules, mut steps) = (0u64, 0u64);
                    let mut tallies: BTreeMap<usize, Tally> = BTreeMap::new();
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&(i, from)) = chunks.get(k) else {
                            break;
                        };
                        let (what, sc, crash_one_in) = &list[i];
                        let tally = tallies.entry(i).or_default();
                        let base = (i as u64) << 40;
                        for seed in base + from..base + per.min(from + CHUNK) {
                            // A third of the schedules each: uniform,
                            // with long pauses, by changing priorities
                            // (the last two stop a process for whole
                            // cycles of the others).
                            let draw = Draw::nth(&forced, seed);
                            match run_drawn(draw, sc, seed, *crash_one_in, 2) {
                                Ok(outcome) => {
                                    steps += outcome.steps;
                                    tally.add(seed, &outcome);
                                }
                                Err(v) => panic!("{what} ({draw:?}): {v}"),
                            }
                            schedules += 1;
                        }
                    }
                    (schedules, steps, tallies)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let elapsed = started.elapsed();
    let (mut schedules, mut steps, mut acquisitions) = (0u64, 0u64, 0u64);
    let mut tallies: BTreeMap<usize, Tally> = BTreeMap::new();
    for (n, s, t) in results {
        schedules += n;
        steps += s;
        for (i, tally) in t {
            tallies.entry(i).or_default().merge(tally);
        }
    }
    for (i, tally) in &tallies {
        let (what, sc, _) = &list[*i];
        acquisitions += tally.critical_sections;
        if !sc.faults.no_exchange {
            assert!(
                tally.critical_sections > 0,
                "{what}: nobody ever took the lock"
            );
        }
        if sc.faults.power {
            // A power-cut scenario whose schedules never cut proves nothing.
            assert!(
                tally.cut * 2 > tally.took + tally.unjudged,
                "{what}: the power was cut in only {} runs",
                tally.cut
            );
        }
        eprintln!(
            "  {what}: progress: {} taken by a fresh contender, {} not judged, exempt: {:?}; {} runs cut the power",
            tally.took, tally.unjudged, tally.exempt, tally.cut
        );
        if let Some((runs, seed, first)) = &tally.accumulating {
            eprintln!(
                "  {what}: {runs} runs left files no later takeover removes (first: seed {seed}: {first})"
            );
        }
    }
    eprintln!(
        "random: {schedules} schedules, {steps} steps, {acquisitions} critical sections, no violation, {elapsed:.1?} on {workers} threads ({:.2}M steps/s per thread)",
        steps as f64 / elapsed.as_secs_f64() / workers as f64 / 1e6
    );
}

#[test]
fn random_schedules_find_no_violation() {
    let plain = |sc: &Scenario| !sc.faults.injects_syscall_failures();
    let count = scenarios(Policy::Ours)
        .iter()
        .filter(|s| plain(&s.1))
        .count() as u64;
    random_runs(plain, total_schedules() / count);
}

fn fault_schedules() -> u64 {
    std::env::var("SWAPLOCK_SIM_FAULT_SCHEDULES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

/// Failing syscalls: never two holders, a release that cannot remove its
/// marker says so, and never a wedge.
#[test]
fn random_schedules_with_failing_syscalls_never_wedge() {
    let faults = |sc: &Scenario| sc.faults.injects_syscall_failures();
    let count = scenarios(Policy::Ours)
        .iter()
        .filter(|s| faults(&s.1))
        .count() as u64;
    random_runs(faults, fault_schedules() / count);
}

#[test]
fn exhaustive_two_contenders_and_a_stale_marker() {
    for (kind, windows, unnamed) in [
        (Kind::Soft, false, false),
        (Kind::Marker, false, false),
        (Kind::Soft, true, false),
        (Kind::Marker, false, true),
    ] {
        let mut sc = Scenario::new(kind);
        sc.windows = windows;
        sc.faults.unnamed = unnamed;
        let marker = match kind {
            Kind::Soft => DEAD.to_vec(),
            _ => b"filelock/2\npid=999\nhost=h1\nmode=exclusive\n".to_vec(),
        };
        sc.files.push((LOCK.to_vec(), marker));
        contenders(&mut sc, Policy::Ours, &[(0, 101), (0, 102)], 2);
        let (preemptions, crashes) = if kind == Kind::Soft { (3, 1) } else { (2, 1) };
        let started = std::time::Instant::now();
        match explore(&sc, preemptions, crashes, 5000) {
            Ok((schedules, nodes)) => eprintln!(
                "exhaustive {kind:?}{}: every schedule with up to {preemptions} preemptions and {crashes} kill: {schedules} schedules, {nodes} states, no violation, {:.1?}",
                match (windows, unnamed) {
                    (true, _) => " (Windows rules)",
                    (_, true) => " (unnamed files)",
                    _ => "",
                },
                started.elapsed()
            ),
            Err(v) => panic!("{kind:?}: {v}"),
        }
    }
}

/// Every interleaving and every kill point within a bound of steps, not
/// only schedules with few preemptions: for the first `free` steps the two
/// contenders alternate in any order and either may be killed before any
/// of them; then each runs on to the end.
#[test]
fn exhaustive_every_interleaving_of_the_first_steps() {
    let free = std::env::var("SWAPLOCK_SIM_FREE_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let mut sc = Scenario::new(Kind::Soft);
    sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
    contenders(&mut sc, Policy::Ours, &[(0, 101), (0, 102)], 2);
    let started = std::time::Instant::now();
    match explore_free(&sc, free, 0, 1, 5000) {
        Ok((schedules, nodes)) => eprintln!(
            "exhaustive Soft: every interleaving and kill point of the first {free} steps: {schedules} schedules, {nodes} states, no violation, {:.1?}",
            started.elapsed()
        ),
        Err(v) => panic!("{v}"),
    }
}

/// Runs `scenario` under both policies for `seeds` seeds: the naive one
/// must produce a violation, ours none. Returns the naive violation.
fn naive_fails_ours_holds(
    what: &str,
    build: impl Fn(Policy) -> Scenario,
    seeds: u64,
    crash_one_in: u64,
) -> Violation {
    naive_fails_so_ours_holds(what, build, seeds, crash_one_in, |_| true)
}

/// [`naive_fails_ours_holds`], where the naive violation must be one that
/// `so` accepts (the race the scenario is about, not another flaw of the
/// naive policy that a schedule reaches first).
fn naive_fails_so_ours_holds(
    what: &str,
    build: impl Fn(Policy) -> Scenario,
    seeds: u64,
    crash_one_in: u64,
    so: impl Fn(&Violation) -> bool,
) -> Violation {
    let naive = build(Policy::Naive(naive::Flaws::default()));
    let found = (0..seeds).find_map(|seed| {
        run_seed(&naive, seed, crash_one_in, 2)
            .err()
            .filter(|v| so(v))
    });
    let found =
        found.unwrap_or_else(|| panic!("{what}: the naive policy survived {seeds} schedules so"));
    let ours = build(Policy::Ours);
    for seed in 0..seeds {
        if let Err(v) = run_seed(&ours, seed, crash_one_in, 2) {
            panic!("{what}: our policy failed: {v}");
        }
    }
    eprintln!(
        "{what}: naive fails ({}), ours holds over {seeds} schedules",
        found.what
    );
    found
}

#[test]
fn race_the_judged_markers_inode_is_reused() {
    // A stale marker, three contenders: a peer breaks it and creates a
    // marker on the freed inode number, which the naive check accepts.
    naive_fails_ours_holds(
        "inode reuse",
        |policy| {
            let mut sc = Scenario::new(Kind::Soft);
            sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
            contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 3);
            sc
        },
        20_000,
        0,
    );
}

#[test]
fn race_the_lock_path_stands_empty_during_a_break() {
    // Two hosts: a contender that finds the path empty while a naive break
    // checks the file it renamed aside creates its marker, and the renamed
    // live marker is put back over it.
    naive_fails_ours_holds(
        "empty path during a break",
        |policy| {
            let mut sc = Scenario::new(Kind::Soft);
            sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
            // No inode reuse: this race needs none.
            sc.faults = Faults {
                fresh_inodes: true,
                ..Faults::default()
            };
            contenders(
                &mut sc,
                policy,
                &[(0, 101), (0, 102), (0, 103), (0, 104)],
                4,
            );
            sc
        },
        20_000,
        0,
    );
}

#[test]
fn race_a_killed_breaker_strands_a_live_marker() {
    // Breakers are killed mid-break: the naive policy has no recovery.
    naive_fails_ours_holds(
        "killed breaker",
        |policy| {
            let mut sc = Scenario::new(Kind::Soft);
            sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
            contenders(
                &mut sc,
                policy,
                &[(0, 101), (0, 102), (0, 103), (0, 104)],
                6,
            );
            sc
        },
        20_000,
        15,
    );
}

#[test]
fn race_the_malformed_watch_inherits_another_files_age() {
    // Coarse times and torn writes: a fresh marker mid-write looks
    // malformed, repeats an evicted one's mtime and inode number, and the
    // naive watch (without the change time) evicts it at once.
    naive_fails_ours_holds(
        "malformed watch",
        |policy| {
            let mut sc = Scenario::new(Kind::Soft);
            sc.files.push((LOCK.to_vec(), b"garbage\n".to_vec()));
            sc.granularity = 1_000_000_000;
            sc.faults = Faults {
                short_writes: 3,
                ..Faults::default()
            };
            contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 60);
            sc
        },
        5_000,
        0,
    );
}

#[test]
fn race_a_failed_acquire_rolls_back_a_successors_marker() {
    // Writes fail at times: the naive rollback closes first, then unlinks
    // by name whatever shows the same inode number.
    naive_fails_ours_holds(
        "failed-acquire rollback",
        |policy| {
            let mut sc = Scenario::new(Kind::Soft);
            sc.files.push((LOCK.to_vec(), b"garbage\n".to_vec()));
            sc.faults = Faults {
                eio_one_in: 3,
                short_writes: 3,
                ..Faults::default()
            };
            contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 60);
            sc
        },
        5_000,
        0,
    );
}

/// A lifetime break may overlap a live holder by design (filelock warns of
/// it), but only a holder whose marker had passed the lifetime: it never
/// breaks a successor's fresh marker on the same inode number, and the
/// holders of fresh markers never overlap.
#[test]
fn race_the_lifetime_break_takes_a_reused_inode() {
    naive_fails_ours_holds(
        "lifetime break",
        |policy| {
            let mut sc = Scenario::new(Kind::Soft);
            sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
            // A lifetime far longer than any stall in a run, and a marker
            // well past it: only the judged, expired marker may be broken.
            sc.lifetime = Some(Duration::from_secs(10));
            sc.initial_age = 20_000_000_000;
            contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 8);
            sc
        },
        20_000,
        0,
    );
}

/// Under Windows rules a stale marker is renamed aside; filelock's restore
/// of a recreated one linked it back by name and followed a symlink a peer
/// put at the break name meanwhile, publishing an unrelated file at the
/// lock path. Ours renames and deletes the judged file through its own
/// handle and never links.
#[test]
fn race_a_restore_follows_a_planted_symlink() {
    let found = naive_fails_ours_holds("planted symlink", windows_symlink_race, 50_000, 0);
    assert!(
        found.what.contains("victim") && found.trace.contains("follow: true"),
        "the naive policy failed otherwise: {}",
        found.what
    );
}

/// `flock` fails with `ENOSYS`: the process that created the lock file
/// stalls, a soft peer breaks the old empty file by its lifetime and
/// publishes its marker on the freed inode number, and the naive fallback
/// (close, compare the inode number, unlink by name) removes that marker.
/// Ours removes its file while it is open and leaves a peer's in place.
#[test]
fn race_the_enosys_fallback_unlinks_a_peers_marker() {
    // The unlink may come before the peer enters, which then holds the
    // lock with its marker already removed.
    let fallback_unlinks = |v: &Violation| v.trace.contains("p0 (pid 101@h1): unlink a.lock -> Ok");
    let found = naive_fails_so_ours_holds(
        "ENOSYS fallback",
        enosys_fallback_race,
        20_000,
        0,
        fallback_unlinks,
    );
    assert!(fallback_unlinks(&found));
}

/// Steps process `p` until the last line it traced contains `what`.
fn step_until(sim: &mut Sim, p: usize, what: &str, max: usize) {
    let tag = format!(" p{p} ");
    for _ in 0..max {
        sim.step(p);
        let trace = sim.trace();
        let last = trace.lines().rev().find(|l| l.contains(&tag)).unwrap_or("");
        if last.contains(what) {
            return;
        }
        assert!(!sim.done(p), "p{p} finished before {what}");
    }
    panic!("p{p} never reached {what}");
}

/// A directed schedule beyond the random search's reach: three breakers
/// judge one dead marker; H takes it over and holds; B's exchange takes
/// H's live marker under B's break name; N's exchange takes B's file under
/// N's; N is killed. B's exchange-back gives up after 2 s and lets go of its
/// file, now under N's name. Whatever B writes into it must still lead a
/// recovery to B's break name, where H's marker waits: the released record
/// names nobody, so the recovery of N's names deleted it, cleared the way,
/// and B entered beside H. B's placeholder names B.
#[test]
fn an_abandoned_breakers_file_still_leads_recovery_to_what_it_took() {
    let all = scenarios(Policy::Ours);
    let (_, sc, _) = &all[0];
    let mut sim = Sim::new(sc, 1, true);
    let (h, b, n) = (0, 1, 2);
    // Each publishes its break file and reaches the check before its
    // exchange (7.8 step 5).
    for p in [h, b, n] {
        step_until(&mut sim, p, "rename", 400);
        step_until(&mut sim, p, "lstat a.lock", 10);
    }
    step_until(&mut sim, h, "exchange", 5);
    step_until(&mut sim, h, "ENTERS", 20);
    step_until(&mut sim, b, "exchange", 5);
    step_until(&mut sim, n, "exchange", 5);
    sim.crash(n);
    for _ in 0..200_000 {
        if sim.done(b) || sim.violation().is_some() {
            break;
        }
        sim.step(b);
    }
    assert!(sim.violation().is_none(), "{}", sim.violation().unwrap());
}
