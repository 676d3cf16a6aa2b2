//! Handoff latency between two processes: this process holds a lock, a
//! child process (this program again) waits in `lock()`; the time from
//! the holder's release to the child's return, by the wall clock both
//! read, for the kernel `fcntl` lock (whose waiter the kernel wakes) and
//! each soft kind. Prints p50, p99 and the worst of `N` handoffs (default
//! 100) per kind, and the soft kinds' medians as ratios to `fcntl`'s,
//! measured in the same run.
//!
//! ```text
//! cargo run --release --example handoff_procs -- [N]
//! ```

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use swaplock::soft::SoftLock;
use swaplock::FileLock;

/// Nanoseconds since the epoch: the one clock both processes read.
fn now() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// A held lock of `kind` on `path`, and how to release it.
fn take(kind: &str, path: &Path) -> Box<dyn FnOnce()> {
    match kind {
        "fcntl" => {
            let g = FileLock::new(path).lock().unwrap();
            Box::new(move || g.unlock().unwrap())
        }
        _ => {
            let lock = match kind {
                "soft" => SoftLock::soft(path),
                "marker" => SoftLock::marker(path),
                _ => SoftLock::lease(path),
            };
            let g = lock.lock().unwrap();
            Box::new(move || g.release().unwrap())
        }
    }
}

/// The child: says it is about to wait, waits, prints when it got the lock.
fn child(kind: &str, path: &Path) {
    let mut out = std::io::stdout();
    writeln!(out, "waiting").unwrap();
    out.flush().unwrap();
    let release = take(kind, path);
    let got = now();
    release();
    writeln!(out, "{got}").unwrap();
}

fn handoffs(kind: &str, path: &Path, n: usize) -> Vec<Duration> {
    let me = std::env::current_exe().unwrap();
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let release = take(kind, path);
        let mut c = Command::new(&me)
            .args(["--child", kind])
            .arg(path)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(c.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "waiting");
        // Let the child reach its wait (a pause, not synchronisation: a
        // child that is late only makes the handoff look shorter).
        std::thread::sleep(Duration::from_millis(20));
        let released = now();
        release();
        let got: u128 = lines.next().unwrap().unwrap().parse().unwrap();
        c.wait().unwrap();
        times.push(Duration::from_nanos(got.saturating_sub(released) as u64));
    }
    times.sort();
    times
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        child(&args[2], Path::new(&args[3]));
        return;
    }
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100);
    let dir = tempfile::tempdir().unwrap();
    let at = |t: &[Duration], q: f64| t[((t.len() as f64 * q) as usize).min(t.len() - 1)];
    let mut fcntl = Duration::ZERO;
    for kind in ["fcntl", "soft", "marker", "lease"] {
        let times = handoffs(kind, &dir.path().join(format!("{kind}.lock")), n);
        let p50 = at(&times, 0.5);
        if kind == "fcntl" {
            fcntl = p50;
        }
        println!(
            "{kind}: p50 {p50:?}, p99 {:?}, worst {:?}, p50 {:.1}x fcntl's",
            at(&times, 0.99),
            times[times.len() - 1],
            p50.as_secs_f64() / fcntl.as_secs_f64()
        );
    }
}
