//! Hunts one scenario with random schedules and prints the first violation.
//!
//! ```text
//! cargo run --release -p swaplock-sim --example hunt -- "soft: a malformed" 1000000
//! ```
use swaplock_sim::{run_seed, scenarios, Policy};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let prefix = args.get(1).map(String::as_str).unwrap_or("");
    let n: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    for (what, scenario, crash_one_in) in scenarios(Policy::Ours)
        .into_iter()
        .filter(|s| s.0.starts_with(prefix))
    {
        for seed in 0..n {
            if let Err(v) = run_seed(&scenario, seed, crash_one_in, 2) {
                println!("{what}: {v}");
                return;
            }
        }
        println!("{what}: no violation in {n} schedules");
    }
}
