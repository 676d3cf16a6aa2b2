//! Replays a kept schedule of the read-write simulator with its trace:
//!
//! ```text
//! cargo run -p swaplock-sim --release --example rw_replay -- FILE [naive|MUTANT[+MUTANT]]
//! ```
//!
//! `naive` switches on the naive policy (filelock's exact steps), a
//! mutant's name (`rw-no-lead-check`) that guard's mutant; otherwise the
//! shipped driver runs. Prints the violation and the whole trace, or that
//! the schedule passes.

use swaplock_sim::rw::mutants::{replay_traced, select, Mutant, NAIVE};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: rw_replay FILE [naive|MUTANT[+MUTANT]]");
        std::process::exit(2);
    };
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let on: Vec<Mutant> = match args.get(2).map(String::as_str) {
        None => Vec::new(),
        Some("naive") => NAIVE.to_vec(),
        Some(names) => names
            .split('+')
            .map(|n| Mutant::named(n).unwrap_or_else(|| panic!("no mutant {n}")))
            .collect(),
    };
    let _on = select(&on);
    match replay_traced(&data) {
        Some(v) => println!("{}\ntrace:\n{}", v.what, v.trace),
        None => println!("{path}: no violation"),
    }
}
