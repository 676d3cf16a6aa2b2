//! `SoftLock::lock_async` without a watch (inotify refused, as when its
//! instances run out): a release of this process still wakes the waiting
//! task at once, not at its poll an hour away. Alone in its process, so
//! that no spare watch of another test stands in.

#![cfg(all(feature = "tokio", target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::time::Duration;
use swaplock::SoftLock;

#[test]
fn a_task_without_a_watch_wakes_on_a_release_of_this_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.lock");
    std::thread::spawn(move || {
        // This thread only: its runtime's tasks get no inotify instance.
        common::seccomp::deny(libc::SYS_inotify_init1, libc::ENOSYS).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            for kind in ["soft", "marker", "lease"] {
                let lock = |p: &std::path::Path| match kind {
                    "soft" => SoftLock::soft(p),
                    "marker" => SoftLock::marker(p),
                    _ => SoftLock::lease(p),
                };
                let holder = lock(&path).lock().unwrap();
                let waiter = {
                    let lock = lock(&path).poll_interval(Duration::from_secs(3600));
                    tokio::spawn(async move { lock.lock_async().await.map(drop) })
                };
                for _ in 0..20 {
                    tokio::task::yield_now().await;
                }
                assert!(!waiter.is_finished(), "{kind}: taken while held");
                holder.release().unwrap();
                tokio::time::timeout(Duration::from_secs(30), waiter)
                    .await
                    .unwrap_or_else(|_| panic!("{kind}: the release did not wake the task"))
                    .unwrap()
                    .unwrap();
            }
        });
    })
    .join()
    .unwrap();
}
