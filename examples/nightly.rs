//! A job that must never run twice at once, with a kernel lock: waits up
//! to a minute, says who is in the way meanwhile, and removes the lock
//! file when done (safe: the with-lock-ex protocol's identity check).
//!
//! ```text
//! cargo run --example nightly -- nightly.lock
//! ```

use std::ops::ControlFlow;
use std::time::Duration;
use swaplock::FileLock;

fn main() -> std::io::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "nightly.lock".into());
    let lock = FileLock::new(&path);
    let guard = lock.lock_with(Some(Duration::from_secs(60)), |wait| {
        #[cfg(unix)]
        if let Ok(Some(holder)) = wait.holder() {
            eprintln!(
                "{path}: held by pid {} for {:.1?} so far",
                holder.pid,
                wait.waited()
            );
        }
        #[cfg(not(unix))]
        let _ = wait;
        ControlFlow::Continue(())
    })?;
    println!("{path}: running the job");
    // ... the job ...
    guard.remove()
}
