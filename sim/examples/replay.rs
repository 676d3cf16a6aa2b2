//! Replays a schedule (a fuzzer input: a scenario byte, then one byte per
//! decision, 0xff killing the chosen process) and prints its trace.
//!
//! ```text
//! cargo run -p swaplock-sim --example replay -- sim/findings/FILE.bin
//! ```
use swaplock_sim::{run, scenarios, FromBytes, Policy};

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: replay SCHEDULE_FILE");
        std::process::exit(2);
    };
    let data = std::fs::read(&path).expect("read the schedule");
    let Some((&which, schedule)) = data.split_first() else {
        return;
    };
    // The fuzz target's scenario list with SWAPLOCK_FUZZ_ALL=1: all of them.
    let all = scenarios(Policy::Ours);
    let (what, scenario, _) = &all[usize::from(which) % all.len()];
    let sim = run(scenario, 1, &mut FromBytes::new(schedule), true, 20_000);
    println!("scenario: {what}");
    match sim.violation() {
        Some(v) => println!("{v}"),
        None => println!(
            "no violation; {} holders left with their marker displaced",
            sim.displacements()
        ),
    }
}
