//! Handoff latency between two threads of one process: one holds a lock,
//! the other waits in `lock()`; the time from the holder's release to the
//! waiter's return, for each soft kind and, as the floor to compare with,
//! the kernel `fcntl` lock, whose waiter the kernel wakes. Prints the
//! median and the worst of `N` handoffs (default 50) and the soft kinds'
//! medians as ratios to the kernel lock's, measured in the same run.
//!
//! ```text
//! cargo run --release --example handoff -- [N]
//! ```

use std::sync::mpsc;
use std::time::{Duration, Instant};
use swaplock::soft::SoftLock;
use swaplock::FileLock;

/// The handoff times of `n` rounds: `hold` takes the lock and returns a
/// release function; a second thread waits with `wait`.
fn handoffs<G: Send + 'static>(
    n: usize,
    take: impl Fn() -> G + Send + Sync + Clone + 'static,
    release: impl Fn(G) + Send + Sync + Clone + 'static,
) -> Vec<Duration> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let held = take();
        let (ready, waiting) = mpsc::channel();
        let (done, got) = mpsc::channel();
        let (take2, release2) = (take.clone(), release.clone());
        let waiter = std::thread::spawn(move || {
            ready.send(()).unwrap();
            let g = take2();
            done.send(Instant::now()).unwrap();
            release2(g);
        });
        waiting.recv().unwrap();
        // Let the waiter reach its wait (a pause, not synchronisation: a
        // waiter that is late only makes the handoff look shorter).
        std::thread::sleep(Duration::from_millis(5));
        let released = Instant::now();
        release(held);
        let acquired = got.recv().unwrap();
        times.push(acquired.saturating_duration_since(released));
        waiter.join().unwrap();
    }
    times.sort();
    times
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50);
    let dir = tempfile::tempdir().unwrap();
    let fcntl_path = dir.path().join("k.lock");
    let kernel = handoffs(
        n,
        move || FileLock::new(&fcntl_path).lock().unwrap(),
        |g| g.release().unwrap(),
    );
    let median = |t: &[Duration]| t[t.len() / 2];
    println!(
        "fcntl: median {:?}, worst {:?}",
        median(&kernel),
        kernel[kernel.len() - 1]
    );
    for (name, make) in [
        ("soft", SoftLock::soft as fn(std::path::PathBuf) -> SoftLock),
        ("marker", SoftLock::marker),
    ] {
        let path = dir.path().join(format!("{name}.lock"));
        let times = handoffs(
            n,
            move || make(path.clone()).lock().unwrap(),
            |g| g.release().unwrap(),
        );
        println!(
            "{name}: median {:?}, worst {:?}, median {:.1}x fcntl's",
            median(&times),
            times[times.len() - 1],
            median(&times).as_secs_f64() / median(&kernel).as_secs_f64()
        );
    }
}
