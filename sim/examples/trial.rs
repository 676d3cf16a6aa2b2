//! A quick trial run: random schedules of one scenario.
use swaplock_core::soft::Kind;
use swaplock_sim::*;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let naive = args.get(1).is_some_and(|a| a == "naive");
    let n: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let policy = if naive {
        Policy::Naive(naive::Flaws::default())
    } else {
        Policy::Ours
    };
    let mut sc = Scenario::new(Kind::Soft);
    sc.files.push((LOCK.to_vec(), b"999\nh1\n".to_vec()));
    for pid in [101, 102, 103] {
        sc.processes.push(Process {
            host: 0,
            pid,
            attempts: 6,
            hold_steps: 2,
            policy,
            enosys_fallback: false,
            poll: POLL,
            hold_pause: std::time::Duration::ZERO,
            beat: std::time::Duration::ZERO,
        });
    }
    let t = std::time::Instant::now();
    let (mut steps, mut acq) = (0, 0);
    for seed in 0..n {
        match run_seed(&sc, seed, 40, 2) {
            Ok(outcome) => {
                steps += outcome.steps;
                acq += outcome.acquisitions;
            }
            Err(v) => {
                println!("{v}");
                return;
            }
        }
    }
    println!(
        "{n} schedules, {steps} steps, {acq} acquisitions, no violation, {:?}",
        t.elapsed()
    );
}
