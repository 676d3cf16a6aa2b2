//! The soft-lock protocol under a fuzzer-chosen schedule: the first byte
//! picks a scenario, each further byte which process runs its next syscall
//! (0xff kills it instead, at most twice; in a scenario that may lose
//! power, 0xfe cuts the power, at most twice, and 0xfd commits the
//! filesystem's journal). Any violation of the simulator's
//! invariants is a crash, with the replayable trace.
//! `SWAPLOCK_FUZZ_ONLY=PREFIX` narrows the search to one scenario;
//! `SWAPLOCK_MUTANT=NAME[+NAME]` switches protocol mutants on (see
//! `swaplock_sim::mutants`), for the mutation run.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use swaplock_sim::mutants::Mutant;
use swaplock_sim::{run, scenarios, FromBytes, Policy, Scenario};

/// The mutants `SWAPLOCK_MUTANT` names; an unknown name is an error.
fn mutants() -> &'static [Mutant] {
    static ON: OnceLock<Vec<Mutant>> = OnceLock::new();
    ON.get_or_init(|| {
        let Ok(names) = std::env::var("SWAPLOCK_MUTANT") else {
            return Vec::new();
        };
        names
            .split('+')
            .map(|n| Mutant::named(n).unwrap_or_else(|| panic!("no protocol mutant {n}")))
            .collect()
    })
}

fn all() -> &'static [(&'static str, Scenario, u64)] {
    static ALL: OnceLock<Vec<(&'static str, Scenario, u64)>> = OnceLock::new();
    ALL.get_or_init(|| {
        scenarios(Policy::Ours)
            .into_iter()
            .filter(|s| {
                std::env::var("SWAPLOCK_FUZZ_ONLY").map_or(true, |only| s.0.starts_with(&only))
            })
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, schedule)) = data.split_first() else {
        return;
    };
    swaplock_core::mutant::select(mutants());
    let (what, scenario, _) = &all()[usize::from(which) % all().len()];
    let sim = run(scenario, 1, &mut FromBytes::new(schedule), false, 20_000);
    if sim.violation().is_some() {
        let traced = run(scenario, 1, &mut FromBytes::new(schedule), true, 20_000);
        panic!(
            "{what}: {}",
            traced
                .violation()
                .map(|v| v.to_string())
                .unwrap_or_default()
        );
    }
});
