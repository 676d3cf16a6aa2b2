//! Sizes the exhaustive exploration for given budgets.
use swaplock_core::soft::Kind;
use swaplock_sim::*;

fn main() {
    let args: Vec<u32> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap())
        .collect();
    let (k, c, attempts) = (args[0], args[1], args[2]);
    let mut sc = Scenario::new(Kind::Soft);
    sc.files.push((LOCK.to_vec(), b"999\nh1\n".to_vec()));
    for pid in [101, 102] {
        sc.processes.push(Process {
            host: 0,
            pid,
            attempts,
            hold_steps: 1,
            policy: Policy::Ours,
            enosys_fallback: false,
            poll: POLL,
            hold_pause: std::time::Duration::ZERO,
            beat: std::time::Duration::ZERO,
        });
    }
    let t = std::time::Instant::now();
    match explore(&sc, k, c, 5000) {
        Ok((s, n)) => println!(
            "preemptions {k} crashes {c} attempts {attempts}: {s} schedules, {n} nodes, {:?}",
            t.elapsed()
        ),
        Err(v) => println!("{v}"),
    }
}
