//! A soft wait without a watch (inotify refused, as when its instances run
//! out): another thread's release while the wait's hook runs still ends
//! the wait's pause, though the hook's own releases do not. Alone in its
//! process, so that no spare watch of another test stands in.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::ops::ControlFlow;
use std::sync::mpsc;
use std::time::Duration;
use swaplock::SoftLock;

#[test]
fn a_release_during_the_hook_is_not_lost() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.lock");
    let (gone_tx, gone_rx) = mpsc::channel::<()>();
    let (go_tx, holder) = {
        let path = path.clone();
        common::held_by_a_thread(
            move || SoftLock::soft(&path).lock().unwrap(),
            move |g| {
                g.release().unwrap();
                gone_tx.send(()).unwrap();
            },
        )
    };
    let waiter = std::thread::spawn(move || {
        // This thread only: its wait gets no inotify instance.
        common::seccomp::deny(libc::SYS_inotify_init1, libc::ENOSYS).unwrap();
        let mut first = true;
        SoftLock::soft(&path)
            .poll_interval(Duration::from_secs(3600))
            .lock_with(Some(Duration::from_secs(60)), |_| {
                if std::mem::take(&mut first) {
                    // The holder releases while the hook runs.
                    go_tx.send(()).unwrap();
                    gone_rx.recv().unwrap();
                }
                ControlFlow::Continue(())
            })
            .map(drop)
    });
    let (done_tx, done_rx) = mpsc::channel();
    let watcher = std::thread::spawn(move || {
        let taken = waiter.join().unwrap();
        done_tx.send(()).unwrap();
        taken
    });
    done_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the release during the hook was lost: the wait slept its poll");
    watcher.join().unwrap().unwrap();
    holder.join().unwrap();
}
