//! The read-write lock's shipped driver under the simulator: random
//! schedules of every scenario (kills, stops, suspends, crashes, stale
//! caches, retransmitted links) and every schedule of small cases within
//! a budget find no violation, and every run ends with the progress check
//! judging it.
//!
//! `SWAPLOCK_RW_SCHEDULES` sets the number of random schedules (default
//! 8,000, shared among the scenarios); `SWAPLOCK_RW_PREEMPTIONS` the
//! preemption bound of the exhaustive cases (default 2).

use swaplock_sim::rw::{explore, run_seed, scenarios, Progress, Role, Scenario};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One fault decision in this many.
const FAULT_ONE_IN: u64 = 400;

#[test]
fn random_schedules_of_every_scenario_find_no_violation_and_every_run_is_judged() {
    let all = scenarios();
    let per = env("SWAPLOCK_RW_SCHEDULES", 8_000) / all.len() as u64;
    let mut total = (0, 0, 0, 0);
    for (i, scenario) in all.iter().enumerate() {
        let (mut steps, mut grants, mut fenced, mut stale, mut judged) = (0, 0, 0, 0, 0);
        for n in 0..per {
            let seed = ((i as u64) << 40) + n;
            match run_seed(scenario, seed, FAULT_ONE_IN) {
                Ok(o) => {
                    steps += o.steps;
                    grants += o.grants;
                    fenced += o.fenced;
                    stale += o.stale;
                    judged += u64::from(o.progress == Progress::Took);
                }
                Err(v) => panic!("{v}"),
            }
        }
        eprintln!(
            "{:<40} {per} schedules, {steps} steps, {grants} grants ({fenced} beside an evicted holder, fenced), {stale} stale answers",
            scenario.name
        );
        assert_eq!(
            judged, per,
            "{}: runs the progress check could not judge",
            scenario.name
        );
        assert!(grants >= per, "{}: fewer grants than runs", scenario.name);
        total = (
            total.0 + per,
            total.1 + steps,
            total.2 + grants,
            total.3 + fenced,
        );
    }
    eprintln!(
        "read-write: {} random schedules, {} steps, {} grants, {} fenced",
        total.0, total.1, total.2, total.3
    );
}

/// The scenario `name`, each participant making `rounds` acquisitions.
fn small(name: &str, rounds: u32) -> Scenario {
    let mut s = scenarios().into_iter().find(|s| s.name == name).unwrap();
    for p in &mut s.processes {
        if let Role::Participant { rounds: r, .. } = &mut p.role {
            *r = rounds;
        }
    }
    s
}

#[test]
fn exhaustive_every_schedule_of_small_cases_within_the_budgets_finds_no_violation() {
    let preemptions = env("SWAPLOCK_RW_PREEMPTIONS", 2) as u32;
    let cases = [
        // Every interleaving of two writers' one acquisition each.
        (small("two-writers", 1), preemptions, 0),
        // A kill or a stop anywhere, with one switch.
        (small("two-writers", 1), 1, 1),
        // A crash of the disk's host at every point of every run with no
        // switch but the ones sleeps force.
        (small("a-host-crash", 1), 0, 1),
        // A blind client's every answer from cache or server.
        (small("a-blind-client-joins-a-live-log", 1), 1, 0),
    ];
    let mut total = 0;
    for (scenario, p, f) in cases {
        match explore(&scenario, p, f, 30_000) {
            Ok(n) => {
                eprintln!(
                    "{:<40} {p} preemptions, {f} faults: {n} schedules",
                    scenario.name
                );
                assert!(
                    n > 10,
                    "{}: the exploration ran only {n} schedules",
                    scenario.name
                );
                total += n;
            }
            Err(v) => panic!("{v}"),
        }
    }
    eprintln!("read-write: {total} exhaustive schedules");
}
