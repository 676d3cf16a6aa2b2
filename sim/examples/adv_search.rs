//! Adversary's random search: uniform and sticky (bursty) schedules over
//! the scenarios near the exchange-back, counting violations.
use swaplock_sim::{run, scenarios, Action, Chooser, Policy, Random};

/// Runs the same process for a geometric burst, so that others pause long.
struct Sticky {
    r: Random,
    last: Option<usize>,
    stay: u64,
    crash_one_in: u64,
    crashes: u32,
    x: u64,
}
impl Sticky {
    fn next(&mut self) -> u64 {
        self.x ^= self.x << 13;
        self.x ^= self.x >> 7;
        self.x ^= self.x << 17;
        self.x
    }
}
impl Chooser for Sticky {
    fn pick(&mut self, options: usize) -> usize {
        self.r.pick(options)
    }
    fn crash(&mut self) -> bool {
        if self.crashes > 0 && self.crash_one_in > 0 && self.next() % self.crash_one_in == 0 {
            self.crashes -= 1;
            return true;
        }
        false
    }
    fn choose(&mut self, runnable: &[usize]) -> Action {
        let roll = self.next() % self.stay != 0;
        let i = match self.last {
            Some(l) if runnable.contains(&l) && roll => l,
            _ => runnable[self.pick(runnable.len())],
        };
        self.last = Some(i);
        if self.crash() {
            Action::Crash(i)
        } else {
            Action::Step(i)
        }
    }
}

fn sticky(seed: u64, mode: u64, crash_one_in: u64) -> Sticky {
    Sticky {
        r: Random::new(seed.wrapping_mul(7919) + mode, 0, 0),
        last: None,
        stay: if mode == 1 { 30 } else { 400 },
        crash_one_in: crash_one_in * 4,
        crashes: 2,
        x: seed.wrapping_mul(0x9E3779B97F4A7C15) | 1,
    }
}

fn main() {
    if std::env::var_os("ADV_REPLAY").is_some() {
        // ADV_REPLAY=1 adv_search <seed> <mode> <scenario substring> [old]
        let a: Vec<String> = std::env::args().collect();
        let (seed, mode): (u64, u64) = (a[1].parse().unwrap(), a[2].parse().unwrap());
        let _on = if a.len() > 4 {
            use swaplock_sim::mutants::{select, Entry, Mutant};
            Some(select(&Entry { mutants: &[Mutant::AsideKeptWhenPathMissing] }))
        } else {
            None
        };
        for (what, scenario, crash_one_in) in scenarios(Policy::Ours) {
            if !what.contains(a[3].as_str()) {
                continue;
            }
            let sim = if mode == 0 {
                run(&scenario, seed, &mut Random::new(seed, crash_one_in, 2), true, 20_000)
            } else {
                run(&scenario, seed, &mut sticky(seed, mode, crash_one_in), true, 20_000)
            };
            let t = sim.trace();
            let v: Vec<&str> = t.lines().collect();
            for l in &v[v.len().saturating_sub(std::env::var("ADV_LINES").ok().and_then(|v| v.parse().ok()).unwrap_or(120))..] {
                println!("{}", &l[..l.len().min(170)]);
            }
            println!("{what}: violation {:?} overslept {}", sim.violation().map(|v| v.what), sim.overslept());
        }
        return;
    }
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let filter: Vec<String> = std::env::args().skip(2).collect();
    let mut total = 0u64;
    let (mut steps, mut acqs) = (0u64, 0u64);
    for (what, scenario, crash_one_in) in scenarios(Policy::Ours) {
        if !filter.is_empty() && !filter.iter().any(|f| what.contains(f.as_str())) {
            continue;
        }
        let mut bad = 0;
        let mut over = 0;
        for seed in 0..n {
            for mode in 0..3u64 {
                let sim = if mode == 0 {
                    run(&scenario, seed, &mut Random::new(seed, crash_one_in, 2), false, 20_000)
                } else {
                    let stay = if mode == 1 { 30 } else { 400 };
                    let mut c = Sticky {
                        r: Random::new(seed.wrapping_mul(7919) + mode, 0, 0),
                        last: None,
                        stay,
                        crash_one_in: crash_one_in * 4,
                        crashes: 2,
                        x: seed.wrapping_mul(0x9E3779B97F4A7C15) | 1,
                    };
                    run(&scenario, seed, &mut c, false, 20_000)
                };
                total += 1;
                let (st, acq) = sim.figures();
                steps += st;
                acqs += acq;
                if sim.overslept() {
                    over += 1;
                }
                if sim.failed() {
                    bad += 1;
                    if bad <= 3 {
                        let what_v = sim.violation().map(|v| v.what).unwrap_or_default();
                        println!("  VIOLATION {what} seed {seed} mode {mode}: {what_v}");
                    }
                }
            }
        }
        println!("{what}: {bad} violations, {over} overslept, of {} runs", n * 3);
    }
    println!("total runs {total}, steps {steps}, critical sections {acqs}");
}
