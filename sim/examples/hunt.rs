//! Hunts one scenario with random schedules and prints the first violation;
//! with a third argument, writes that schedule there as a finding (the
//! scenario's index, then one byte per decision, as
//! `sim/examples/replay.rs` and `sim/tests/findings.rs` replay it, with the
//! world's seed 1), skipping schedules whose kills cannot be written so.
//!
//! `SWAPLOCK_MUTANT=name` hunts under that protocol mutant (a kill to
//! keep in `sim/findings/mutants/`).
//!
//! ```text
//! cargo run --release -p swaplock-sim --example hunt -- "soft: a malformed" 1000000 [OUT.bin [FIRST_SEED]]
//! ```
use swaplock_sim::mutants::Mutant;
use swaplock_sim::{run, run_seed, scenarios, FromBytes, Policy, Random, Recording};

fn main() {
    if let Ok(name) = std::env::var("SWAPLOCK_MUTANT") {
        let m = Mutant::named(&name).unwrap_or_else(|| panic!("no mutant named {name}"));
        swaplock_core::mutant::select(&[m]);
    }
    let args: Vec<String> = std::env::args().collect();
    let prefix = args.get(1).map(String::as_str).unwrap_or("");
    let n: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let out = args.get(3);
    let first: u64 = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(0);
    for (index, (what, scenario, crash_one_in)) in scenarios(Policy::Ours)
        .into_iter()
        .enumerate()
        .filter(|s| s.1 .0.starts_with(prefix))
    {
        for seed in first..first + n {
            let Some(out) = out else {
                if let Err(v) = run_seed(&scenario, seed, crash_one_in, 2) {
                    println!("{what}: {v}");
                    return;
                }
                continue;
            };
            // A finding replays with the world's seed 1: hunt with it.
            let mut rec = Recording::new(Random::for_scenario(&scenario, seed, crash_one_in, 2));
            if run(&scenario, 1, &mut rec, false, 20_000)
                .violation()
                .is_none()
            {
                continue;
            }
            let Some(bytes) = rec.bytes else { continue };
            let sim = run(&scenario, 1, &mut FromBytes::new(&bytes), true, 20_000);
            let Some(v) = sim.violation() else { continue };
            println!("{what}: seed {seed}: {v}");
            let mut data = vec![index as u8];
            data.extend(bytes);
            std::fs::write(out, data).expect("write the finding");
            println!("schedule written to {out}");
            return;
        }
        println!("{what}: no violation in {n} schedules");
    }
}
