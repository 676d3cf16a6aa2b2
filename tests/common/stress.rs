//! Mutual exclusion under stress, shared by the kernel- and soft-lock
//! tests: worker processes take a lock many times, log each entry and exit
//! with one `write(2)` on an `O_APPEND` file, sometimes die by SIGKILL
//! while holding the lock; an independent checker reads the log.

use std::collections::HashSet;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::sync::mpsc;

/// The environment variable that makes a test binary a stress worker.
pub const WORKER: &str = "SWAPLOCK_STRESS_WORKER";
/// How many worker processes run at once.
pub const WORKERS: usize = 8;

/// Acquisitions per worker: 2,000 unless `SWAPLOCK_STRESS_ITERS` says otherwise.
pub fn iterations() -> u32 {
    std::env::var("SWAPLOCK_STRESS_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

/// xorshift64*: a small deterministic generator for the workers' choices.
pub struct Rng(pub u64);
impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// What a worker is told: which lock, where to log, how often, its seed.
pub struct Spec {
    pub kind: String,
    pub lock: String,
    pub log: String,
    pub iters: u32,
    pub seed: u64,
}

/// The worker's spec, when this process is a worker.
pub fn worker_spec() -> Option<Spec> {
    let spec = std::env::var(WORKER).ok()?;
    let parts: Vec<&str> = spec.split('\u{1f}').collect();
    let [kind, lock, log, iters, seed] = parts[..] else {
        panic!("bad worker spec {spec:?}")
    };
    Some(Spec {
        kind: kind.into(),
        lock: lock.into(),
        log: log.into(),
        iters: iters.parse().unwrap(),
        seed: seed.parse().unwrap(),
    })
}

/// The worker's loop: `hold()` takes the lock and returns something that
/// releases it when `release` consumes it; some holders die while holding.
pub fn work<G>(spec: &Spec, mut hold: impl FnMut() -> G, mut release: impl FnMut(G, &mut Rng)) {
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&spec.log)
        .unwrap();
    let mut rng = Rng(spec.seed | 1);
    let pid = std::process::id();
    for i in 0..spec.iters {
        let guard = hold();
        log.write_all(format!("E {pid} {i}\n").as_bytes()).unwrap();
        if rng.below(300) == 0 {
            // Die while holding: the protocol must let the others go on.
            // SAFETY: signalling our own process; no memory is involved.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
        log.write_all(format!("X {pid} {i}\n").as_bytes()).unwrap();
        release(guard, &mut rng);
    }
}

/// Totals of one stress run.
pub struct Figures {
    pub acquisitions: usize,
    pub kills: usize,
}

/// Runs `WORKERS` workers (this test binary, test `worker`) on a lock in
/// `dir`, respawning the work of any that die by SIGKILL, then checks the
/// log: an entry while another holder that was not killed is inside is an
/// overlap, and every exit matches the entry before it.
pub fn run(kind: &str, dir: &Path) -> Figures {
    let lock = dir.join("stress.lock");
    let log = dir.join("stress.log");
    let exe = std::env::current_exe().unwrap();
    let (done, finished) = mpsc::channel();
    let spawn = |iters: u32, seed: u64| {
        let spec = [
            kind,
            lock.to_str().unwrap(),
            log.to_str().unwrap(),
            &iters.to_string(),
            &seed.to_string(),
        ]
        .join("\u{1f}");
        let child = super::command(&exe, "worker")
            .args(["--ignored", "--exact", "worker", "--test-threads=1", "-q"])
            .env(WORKER, spec)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let done = done.clone();
        // One thread waits for each worker, so a dead holder is reaped at
        // once (a zombie still answers kill(pid, 0)).
        std::thread::spawn(move || {
            let pid = child.id();
            // The worker's own report (its panic, if any) comes on stdout.
            let out = child.wait_with_output().unwrap();
            let report = String::from_utf8_lossy(&out.stdout).into_owned();
            let _ = done.send((pid, out.status, iters, report));
        });
    };
    let iters = iterations();
    for w in 0..WORKERS {
        spawn(iters, 1 + w as u64);
    }
    let mut running = WORKERS;
    let mut killed = HashSet::new();
    let mut seed = 100;
    while running > 0 {
        let (pid, status, iters, report) = finished.recv().unwrap();
        running -= 1;
        if status.signal() == Some(libc::SIGKILL) {
            killed.insert(pid.to_string());
            let text = std::fs::read_to_string(&log).unwrap();
            let done = text
                .lines()
                .filter(|l| l.starts_with('X') && l.split(' ').nth(1) == Some(&pid.to_string()))
                .count();
            let left = iters - done as u32 - 1;
            seed += 1;
            if left > 0 {
                spawn(left, seed);
                running += 1;
            }
        } else {
            assert!(status.success(), "worker {pid} failed: {status}\n{report}");
        }
    }

    let text = std::fs::read_to_string(&log).unwrap();
    let mut inside: Option<(&str, &str)> = None;
    let mut acquisitions = 0;
    for (n, line) in text.lines().enumerate() {
        let mut f = line.split(' ');
        let (what, pid, i) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
        match what {
            "E" => {
                if let Some((holder, _)) = inside {
                    assert!(
                        killed.contains(holder),
                        "line {n}: {pid} entered while {holder} held the lock"
                    );
                }
                inside = Some((pid, i));
                acquisitions += 1;
            }
            "X" => {
                assert_eq!(
                    inside,
                    Some((pid, i)),
                    "line {n}: exit without matching entry"
                );
                inside = None;
            }
            other => panic!("line {n}: unknown record {other:?}"),
        }
    }
    assert!(acquisitions >= WORKERS * iterations() as usize);
    Figures {
        acquisitions,
        kills: killed.len(),
    }
}

/// Runs a stress test and reports its figures.
pub fn report(kind: &str, dir: &Path, place: &str) {
    let start = std::time::Instant::now();
    let f = run(kind, dir);
    eprintln!(
        "{kind} on {place}: {} acquisitions by {WORKERS} processes, {} holders SIGKILLed, no overlap, {:.2?}",
        f.acquisitions,
        f.kills,
        start.elapsed()
    );
}
