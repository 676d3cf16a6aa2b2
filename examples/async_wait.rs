//! Waiting for a lock in a tokio runtime without blocking it: another task
//! keeps ticking while this one waits, and the wait gives up after 10 s
//! (a dropped wait holds nothing).
//!
//! ```text
//! cargo run --example async_wait --features tokio -- a.lock
//! ```

use std::time::Duration;
use swaplock::FileLock;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "a.lock".into());
    let ticker = tokio::spawn(async {
        for n in 0.. {
            tokio::time::sleep(Duration::from_secs(1)).await;
            eprintln!("still responsive: {n} s");
        }
    });
    let lock = FileLock::new(&path);
    match tokio::time::timeout(Duration::from_secs(10), lock.lock_async()).await {
        Ok(guard) => {
            println!("{path}: locked");
            guard?.release()?;
        }
        Err(_) => println!("{path}: still held after 10 s; gave up"),
    }
    ticker.abort();
    Ok(())
}
