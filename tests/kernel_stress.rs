//! Mutual exclusion of kernel locks under stress: 8 processes take the lock
//! 2,000 times each (`SWAPLOCK_STRESS_ITERS` overrides), some holders
//! delete the lock file while holding it, some are SIGKILLed while holding
//! it, and an independent checker reads the append-only log of entries and
//! exits: no entry may follow another holder's entry until that holder
//! exits or is dead.

#![cfg(any(target_os = "linux", target_os = "android"))]

use std::collections::HashSet;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use swaplock::FileLock;

const WORKER: &str = "SWAPLOCK_STRESS_WORKER";
const WORKERS: usize = 8;

fn iterations() -> u32 {
    std::env::var("SWAPLOCK_STRESS_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

/// xorshift64*: a small deterministic generator for the workers' choices.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// The worker process: not a test of its own, but the body the stress test
/// runs in each child (`--ignored --exact worker` with `SWAPLOCK_STRESS_WORKER`).
#[test]
#[ignore = "entry point of the stress test's child processes"]
fn worker() {
    let Ok(spec) = std::env::var(WORKER) else {
        return;
    };
    let parts: Vec<&str> = spec.split('\u{1f}').collect();
    let [kind, lock_path, log_path, iters, seed] = parts[..] else {
        panic!("bad worker spec {spec:?}")
    };
    let lock = match kind {
        "fcntl" => FileLock::new(lock_path),
        _ => FileLock::flock(lock_path),
    };
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(log_path)
        .unwrap();
    let mut rng = Rng(seed.parse::<u64>().unwrap() | 1);
    let pid = std::process::id();
    for i in 0..iters.parse::<u32>().unwrap() {
        let guard = lock.lock().unwrap();
        // One write(2) per line on an O_APPEND file: lines never interleave.
        log.write_all(format!("E {pid} {i}\n").as_bytes()).unwrap();
        if rng.below(300) == 0 {
            // Die while holding: the kernel must release the lock.
            // SAFETY: signalling our own process; no memory is involved.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
        log.write_all(format!("X {pid} {i}\n").as_bytes()).unwrap();
        if rng.below(4) == 0 {
            guard.remove().unwrap();
        } else {
            drop(guard);
        }
    }
}

struct Figures {
    acquisitions: usize,
    kills: usize,
}

fn stress(kind: &str, dir: &Path) -> Figures {
    let lock_path = dir.join("stress.lock");
    let log_path = dir.join("stress.log");
    let exe = std::env::current_exe().unwrap();
    let spawn = |iters: u32, seed: u64| {
        let spec = [
            kind,
            lock_path.to_str().unwrap(),
            log_path.to_str().unwrap(),
            &iters.to_string(),
            &seed.to_string(),
        ]
        .join("\u{1f}");
        Command::new(&exe)
            .args(["--ignored", "--exact", "worker", "--test-threads=1", "-q"])
            .env(WORKER, spec)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let iters = iterations();
    let mut running: Vec<(std::process::Child, u32)> = (0..WORKERS)
        .map(|w| (spawn(iters, 1 + w as u64), iters))
        .collect();
    let mut killed = HashSet::new();
    let mut seed = 100;
    while let Some((mut child, iters)) = running.pop() {
        let pid = child.id();
        let status = child.wait().unwrap();
        if status.signal() == Some(libc::SIGKILL) {
            killed.insert(pid.to_string());
            // Respawn for what the killed worker left undone.
            let log = std::fs::read_to_string(&log_path).unwrap();
            let done = log
                .lines()
                .filter(|l| l.starts_with('X') && l.split(' ').nth(1) == Some(&pid.to_string()))
                .count();
            let left = iters - done as u32 - 1;
            seed += 1;
            if left > 0 {
                running.insert(0, (spawn(left, seed), left));
            }
        } else {
            assert!(status.success(), "worker {pid} failed: {status}");
        }
    }

    // The checker: an entry while another live holder is inside is an overlap.
    let log = std::fs::read_to_string(&log_path).unwrap();
    let mut inside: Option<(&str, &str)> = None;
    let mut acquisitions = 0;
    for (n, line) in log.lines().enumerate() {
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
    Figures {
        acquisitions,
        kills: killed.len(),
    }
}

fn run(kind: &str, dir: &Path, where_: &str) {
    let start = std::time::Instant::now();
    let f = stress(kind, dir);
    eprintln!(
        "{kind} on {where_}: {} acquisitions by {WORKERS} processes, {} holders SIGKILLed, no overlap, {:.2?}",
        f.acquisitions,
        f.kills,
        start.elapsed()
    );
    assert!(f.acquisitions >= WORKERS * iterations() as usize);
}

#[test]
fn fcntl_locks_exclude_under_stress_on_the_default_filesystem() {
    let dir = tempfile::tempdir().unwrap();
    run("fcntl", dir.path(), "the default filesystem");
}

#[test]
fn flock_locks_exclude_under_stress_on_tmpfs() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    run("flock", dir.path(), "tmpfs");
}
