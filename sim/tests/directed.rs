//! Directed kills (`swaplock_sim::directed`): each race, steered under the
//! mutant it was written for, finds a violation; its schedule replays the
//! kill and passes with no mutant on; and it is the schedule kept in
//! `sim/findings/mutants/`, which `tests/mutants.rs` replays under every
//! catalogue entry. `SWAPLOCK_MUTANTS_KEEP=1` rewrites the kept schedules
//! (after a change of the protocol's syscall order, say).

use std::path::Path;
use swaplock_sim::directed::ALL;
use swaplock_sim::mutants::{replay, select, Entry};

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
