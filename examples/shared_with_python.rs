//! A soft lock that Python processes share through filelock 4.2.11's
//! `MarkerSoftFileLock` on the same path (on NFS, say): holds it for a
//! few seconds and prints what a Python process would read from the
//! marker.
//!
//! ```text
//! cargo run --example shared_with_python -- jobs.lock
//! # meanwhile, in Python:
//! #   from filelock import MarkerSoftFileLock
//! #   with MarkerSoftFileLock("jobs.lock", timeout=30): ...
//! ```

use std::time::Duration;
use swaplock::SoftLock;

fn main() -> std::io::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "jobs.lock".into());
    let lock = SoftLock::marker(&path);
    let guard = lock.lock_timeout(Duration::from_secs(30))?;
    if let Some(owner) = lock.owner()? {
        println!(
            "{path}: held, mode {} pid {:?} host {:?}",
            owner.mode, owner.pid, owner.host
        );
    }
    // Hold it a while, as a job would (an example, not synchronisation).
    std::thread::sleep(Duration::from_secs(3));
    guard.release()
}
