//! Counts, per scenario, the random schedules that leave the protocol's
//! timing assumption (a release placeholder at the lock path past the
//! malformed grace period, or older than the lifetime; an act by name on
//! the lock path a lease or more after the actor's own lease record there
//! last changed) and so are not judged from that point: `cargo run
//! --release --example assumption [N [NAME]]`, N schedules each (50,000 by
//! default) of the scenarios whose name contains NAME.
use swaplock_sim::{run, scenarios, Policy, Random};

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50_000);
    // An optional second argument keeps the scenarios whose name has it.
    let only = std::env::args().nth(2).unwrap_or_default();
    for (what, scenario, crash_one_in) in scenarios(Policy::Ours) {
        if !what.contains(only.as_str()) {
            continue;
        }
        let outside = (0..n)
            .filter(|&seed| {
                run(
                    &scenario,
                    seed,
                    &mut Random::new(seed, crash_one_in, 2),
                    false,
                    20_000,
                )
                .overslept()
            })
            .count();
        println!("{what}: {outside} of {n} schedules outside the timing assumption");
    }
}
