//! The read-write lock's driver under a fuzzer-chosen schedule: the first
//! byte picks a scenario of `swaplock_sim::rw::scenarios`, each further
//! byte what happens next (see `swaplock_sim::rw::schedule`: which process
//! runs, how the model answers, a kill, a stop, a suspend, a crash). Any
//! violation of the simulator's invariants is a crash, with the replayable
//! trace. `SWAPLOCK_FUZZ_ONLY=PREFIX` narrows the search to scenarios
//! whose name starts so; `SWAPLOCK_MUTANT=NAME[+NAME]` switches protocol
//! mutants on (`naive` names the naive policy's set), for the mutation
//! run and the hunt for gaps.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use swaplock_sim::rw::mutants::{Mutant, NAIVE};
use swaplock_sim::rw::{run, scenarios, FromBytes, Scenario};

/// The mutants `SWAPLOCK_MUTANT` names; an unknown name is an error.
fn mutants() -> &'static [Mutant] {
    static ON: OnceLock<Vec<Mutant>> = OnceLock::new();
    ON.get_or_init(|| {
        let Ok(names) = std::env::var("SWAPLOCK_MUTANT") else {
            return Vec::new();
        };
        names
            .split('+')
            .flat_map(|n| match n {
                "naive" => NAIVE.to_vec(),
                n => vec![Mutant::named(n).unwrap_or_else(|| panic!("no protocol mutant {n}"))],
            })
            .collect()
    })
}

fn all() -> &'static [(usize, Scenario)] {
    static ALL: OnceLock<Vec<(usize, Scenario)>> = OnceLock::new();
    ALL.get_or_init(|| {
        scenarios()
            .into_iter()
            .enumerate()
            .filter(|(_, s)| {
                std::env::var("SWAPLOCK_FUZZ_ONLY").map_or(true, |only| s.name.starts_with(&only))
            })
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, schedule)) = data.split_first() else {
        return;
    };
    swaplock_core::mutant::select(mutants());
    let (_, scenario) = &all()[usize::from(which) % all().len()];
    let sim = run(scenario, 1, &mut FromBytes::new(schedule), false, 30_000);
    if sim.failed() {
        let traced = run(scenario, 1, &mut FromBytes::new(schedule), true, 30_000);
        panic!(
            "{}: {}",
            scenario.name,
            traced
                .violation()
                .map(|v| v.to_string())
                .unwrap_or_default()
        );
    }
});
