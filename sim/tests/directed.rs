//! Directed kills (`swaplock_sim::directed`): each race, steered under the
//! mutant it was written for, finds a violation; its schedule replays the
//! kill and passes with no mutant on; and it is the schedule kept in
//! `sim/findings/mutants/`, which `tests/mutants.rs` replays under every
//! catalogue entry. `SWAPLOCK_MUTANTS_KEEP=1` rewrites the kept schedules
//! (after a change of the protocol's syscall order, say).

use std::path::Path;
use swaplock_sim::directed::ALL;
use swaplock_sim::mutants::{replay, select, Entry};
use swaplock_sim::{run, scenarios, FromBytes, Policy};

/// Whether the kept schedule `data` runs to its end within the protocol's
/// timing assumption (the oracle judges all of it).
fn judged(data: &[u8]) -> bool {
    let all = scenarios(Policy::Ours);
    let (_, scenario, _) = &all[usize::from(data[0])];
    !run(scenario, 1, &mut FromBytes::new(&data[1..]), false, 20_000).overslept()
}

#[test]
fn every_directed_race_kills_its_mutant_and_is_kept() {
    let keep = std::env::var_os("SWAPLOCK_MUTANTS_KEEP").is_some();
    for race in ALL {
        let entry = Entry {
            mutants: std::slice::from_ref(&race.mutant),
        };
        let name = entry.name();
        let schedule = {
            let _on = select(&entry);
            let script = (race.steer)().unwrap_or_else(|lost| panic!("{name}: {}", lost.0));
            let v = script
                .violation()
                .unwrap_or_else(|| panic!("{name}: {} found no violation", race.name));
            eprintln!("{name}: {}: {}", race.name, v.what);
            let schedule = script.schedule();
            assert!(
                replay(&schedule).is_some(),
                "{name}: the schedule does not replay the kill"
            );
            schedule
        };
        if let Some(v) = replay(&schedule) {
            panic!("{name}: the shipped protocol fails the schedule too: {v}");
        }
        // The shipped protocol must be judged on the race, not excused by
        // a run that left the timing assumption: on the kept schedule, or,
        // where the schedule diverges once the guard acts, on the race
        // steered again without the mutant.
        if !judged(&schedule) {
            let steered = (race.steer)().unwrap_or_else(|lost| {
                panic!("{name}: the kept schedule leaves the timing assumption without the mutant, and the race cannot be steered without it: {}", lost.0)
            });
            assert!(
                steered.violation().is_none() && !steered.sim().overslept(),
                "{name}: without the mutant the steered race is not judged clean"
            );
        }
        let kept = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("findings/mutants")
            .join(format!("{name}.bin"));
        if keep {
            std::fs::write(&kept, &schedule).unwrap();
        }
        assert_eq!(
            std::fs::read(&kept).ok().as_deref(),
            Some(schedule.as_slice()),
            "{name}: {} is not the kept schedule; rerun with SWAPLOCK_MUTANTS_KEEP=1",
            kept.display()
        );
    }
}
