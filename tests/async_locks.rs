//! `lock_async` (feature `tokio`): a task that waits for a lock never
//! blocks its runtime's thread, wakes when the lock is released, and a
//! wait dropped before it ends leaves nothing behind.
//!
//! Each test runs a current-thread runtime on a thread of its own and
//! fails if that runtime has not finished within a minute: a wait that
//! blocked the runtime's only thread would keep it from ever finishing.

#![cfg(feature = "tokio")]

#[cfg(any(target_os = "linux", target_os = "android"))]
mod common;

use std::future::Future;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;
use swaplock::{FileLock, SoftLock};

const KINDS: [&str; 5] = ["fcntl", "flock", "soft", "marker", "lease"];

/// The soft locks' poll. On Linux and Android a long one: only a wake-up,
/// never the poll, ends a soft wait in time. Elsewhere a task polls.
const POLL: Duration = match cfg!(any(target_os = "linux", target_os = "android")) {
    true => Duration::from_secs(3600),
    false => Duration::from_millis(10),
};

fn soft(kind: &str, path: &Path) -> SoftLock {
    let lock = match kind {
        "soft" => SoftLock::soft(path),
        "marker" => SoftLock::marker(path),
        _ => SoftLock::lease(path),
    };
    lock.poll_interval(POLL)
}

fn kernel(kind: &str, path: &Path) -> FileLock {
    match kind {
        "fcntl" => FileLock::new(path),
        _ => FileLock::flock(path),
    }
}

/// A held lock of `kind` (by another lock object), and its release.
fn hold(kind: &str, path: &Path) -> Box<dyn FnOnce() + Send> {
    match kind {
        "fcntl" | "flock" => {
            let g = kernel(kind, path).lock().unwrap();
            Box::new(move || g.release().unwrap())
        }
        _ => {
            let g = soft(kind, path).lock().unwrap();
            Box::new(move || g.release().unwrap())
        }
    }
}

/// Awaits the lock of `kind` as a task would; a guard's release.
async fn take_async(kind: &str, path: &Path) -> std::io::Result<Box<dyn FnOnce() + Send>> {
    Ok(match kind {
        "fcntl" | "flock" => {
            let g = kernel(kind, path).lock_async().await?;
            Box::new(move || g.release().unwrap())
        }
        _ => {
            let g = soft(kind, path).lock_async().await?;
            Box::new(move || g.release().unwrap())
        }
    })
}

/// Runs `test` in a current-thread runtime on its own thread; fails if it
/// has not finished within a minute.
fn in_runtime<F>(test: impl FnOnce() -> F + Send + 'static)
where
    F: std::future::Future<Output = ()>,
{
    let (done_tx, done_rx) = mpsc::channel();
    let runner = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(test());
        done_tx.send(()).unwrap();
    });
    match done_rx.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => runner.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(runner.join().unwrap_err())
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("the runtime did not finish: a wait blocked its thread, or never woke")
        }
    }
}

/// While one task waits for a held lock, another task of the same
/// single-threaded runtime runs, and it is the one that releases the
/// lock: the waiter then takes it.
#[test]
fn a_waiting_task_leaves_its_runtime_running() {
    for kind in KINDS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        in_runtime(move || async move {
            let release = hold(kind, &path);
            let waiter = {
                let path = path.clone();
                tokio::spawn(async move { take_async(kind, &path).await })
            };
            let mut turns = 0;
            for _ in 0..20 {
                tokio::task::yield_now().await;
                turns += 1;
            }
            assert_eq!(turns, 20);
            assert!(!waiter.is_finished(), "{kind}: taken while held");
            release();
            let release = waiter.await.unwrap().unwrap();
            release();
        });
    }
}

/// Tasks of one runtime, each with its own lock object, take turns: never
/// two inside at once.
#[test]
fn waiting_tasks_take_turns() {
    for kind in KINDS {
        let dir = tempfile::tempdir().unwrap();
        let path: PathBuf = dir.path().join("t.lock");
        in_runtime(move || async move {
            let inside = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let tasks: Vec<_> = (0..4)
                .map(|_| {
                    let (path, inside) = (path.clone(), std::sync::Arc::clone(&inside));
                    tokio::spawn(async move {
                        for _ in 0..10 {
                            let release = take_async(kind, &path).await.unwrap();
                            let before = inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            assert_eq!(before, 0, "{kind}: two holders");
                            tokio::task::yield_now().await;
                            inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                            release();
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
    }
}

/// A wait cut short by a timeout has taken nothing: the holder's release
/// leaves a soft lock's path empty, and a kernel lock free for another
/// lock object.
#[test]
fn a_dropped_wait_leaves_nothing_behind() {
    for kind in KINDS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.lock");
        in_runtime(move || async move {
            let release = hold(kind, &path);
            let waited =
                tokio::time::timeout(Duration::from_millis(30), take_async(kind, &path)).await;
            assert!(waited.is_err(), "{kind}: taken while held");
            release();
            match kind {
                "fcntl" | "flock" => {
                    // Another lock object (another mode: not the dropped
                    // wait's waiting thread) takes it.
                    let other = kernel(kind, &path).mode(0o600);
                    let g = other.lock_timeout(Duration::from_secs(30)).unwrap();
                    g.release().unwrap();
                }
                _ => {
                    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
                        .unwrap()
                        .map(|e| e.unwrap().file_name())
                        .collect();
                    assert!(names.is_empty(), "{kind}: left behind: {names:?}");
                }
            }
        });
    }
}

/// Outside a runtime the wait fails, naming the remedy, rather than
/// panicking; a reentrant soft lock cannot be awaited.
#[test]
fn misuse_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.lock");
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let kernel_lock = FileLock::new(&path);
    let mut wait = std::pin::pin!(kernel_lock.lock_async());
    match wait.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(Err(e)) => {
            assert_eq!(e.kind(), ErrorKind::Unsupported);
            assert!(e.to_string().contains("tokio runtime"), "{e}");
        }
        other => panic!("outside a runtime: {other:?}"),
    }
    let soft_lock = SoftLock::soft(&path);
    let mut wait = std::pin::pin!(soft_lock.lock_async());
    assert!(matches!(
        wait.as_mut().poll(&mut cx),
        std::task::Poll::Ready(Err(e)) if e.kind() == ErrorKind::Unsupported
    ));
    #[cfg(unix)]
    {
        let rw_lock = swaplock::rw::SoftRwLock::new(dir.path().join("rw.lock"));
        let mut wait = std::pin::pin!(rw_lock.write_async());
        match wait.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(Err(e)) => {
                assert_eq!(e.kind(), ErrorKind::Unsupported);
                assert!(e.to_string().contains("write_async"), "{e}");
            }
            other => panic!("outside a runtime: {other:?}"),
        }
        assert!(
            !dir.path().join("rw.lock.rw").exists(),
            "nothing is made outside a runtime"
        );
    }
    in_runtime(move || async move {
        let err = SoftLock::soft(&path)
            .reentrant(true)
            .lock_async()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    });
}

/// A soft lock released by another process (the `swaplock` command) wakes
/// a waiting task through the runtime's reactor, not at its poll (an
/// hour away): on Linux and Android, where the lock path is watched.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[test]
fn another_process_release_wakes_a_waiting_task() {
    for kind in ["soft", "marker", "lease"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.lock");
        in_runtime(move || async move {
            let mut cmd = common::command(&common::swaplock(), "swaplock");
            cmd.args(["run", "--kind", kind])
                .arg(&path)
                .args(["sh", "-c", common::HOLD]);
            let holder = common::Holder::spawn(cmd).0;
            let waiter = {
                let path = path.clone();
                tokio::spawn(async move { take_async(kind, &path).await })
            };
            for _ in 0..20 {
                tokio::task::yield_now().await;
            }
            assert!(!waiter.is_finished(), "{kind}: taken while held");
            assert!(holder.release().success());
            let release = waiter.await.unwrap().unwrap();
            release();
        });
    }
}

/// A wait dropped while the waiting thread waits takes its waker out: the
/// task's memory is not kept until the lock is released.
#[cfg(unix)]
#[test]
fn a_dropped_kernel_wait_keeps_no_waker() {
    use std::sync::Arc;
    use std::task::{Context, Wake, Waker};
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.lock");
    // Held by another lock object (its own open file).
    let held = FileLock::flock(&path).lock().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _inside = rt.enter();
    let wakers: Vec<Arc<Noop>> = (0..100).map(|_| Arc::new(Noop)).collect();
    for w in &wakers {
        let waker = Waker::from(Arc::clone(w));
        let lock = FileLock::flock(&path);
        let mut wait = std::pin::pin!(lock.lock_async());
        assert!(wait
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
    }
    let kept: usize = wakers.iter().map(|w| Arc::strong_count(w) - 1).sum();
    assert_eq!(kept, 0, "wakers of dropped waits kept");
    held.release().unwrap();
}

/// A strict lock: a task waiting for a held one leaves its runtime
/// running, takes it once released, and a wait cut short leaves no claim.
#[cfg(unix)]
#[test]
fn a_strict_lock_is_awaited_as_the_others_are() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.lock");
    in_runtime(move || async move {
        let lock = swaplock::StrictLock::new(&path).poll_interval(Duration::from_millis(10));
        let held = lock.lock().unwrap();
        let claims = || lock.claims().unwrap().len();
        let waited = tokio::time::timeout(Duration::from_millis(30), lock.lock_async()).await;
        assert!(waited.is_err(), "taken while held");
        assert_eq!(claims(), 2, "the dropped wait left a claim");
        let waiter = {
            let lock = lock.clone();
            tokio::spawn(async move { lock.lock_async().await })
        };
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        assert!(!waiter.is_finished(), "taken while held");
        held.release().unwrap();
        waiter.await.unwrap().unwrap().release().unwrap();
        assert_eq!(claims(), 0);
    });
}

/// The read-write lock's awaited acquires: readers of one runtime share a
/// hold, and a writer task waits for them without blocking the runtime's
/// only thread (the readers' release runs on it), then is granted a later
/// generation, its fencing token.
#[cfg(unix)]
#[test]
fn read_write_tasks_share_reads_and_a_writer_waits_for_them() {
    use swaplock::rw::SoftRwLock;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rw.lock");
    in_runtime(move || async move {
        let lock = |p: &Path| SoftRwLock::new(p).poll_interval(Duration::from_millis(10));
        let first = lock(&path).read_async().await.unwrap();
        let second = lock(&path).read_async().await.unwrap();
        assert_eq!(first.generation(), second.generation(), "readers share");
        let writer = {
            let path = path.clone();
            tokio::spawn(async move { lock(&path).write_async().await })
        };
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!writer.is_finished(), "written while read");
        let read_at = first.generation();
        first.release().unwrap();
        second.release().unwrap();
        let writing = writer.await.unwrap().unwrap();
        assert!(writing.generation() > read_at, "a later generation");
        // A read waits for the writer task in turn.
        let reader = {
            let path = path.clone();
            tokio::spawn(async move { lock(&path).read_async().await })
        };
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        assert!(!reader.is_finished(), "read while written");
        let written_at = writing.generation();
        writing.release().unwrap();
        let reading = reader.await.unwrap().unwrap();
        assert!(reading.generation() > written_at);
        reading.release().unwrap();
    });
}

/// A read-write wait for a lock another process holds: a writer waiting
/// behind a Python reader stays named in the log (new readers keep out, as
/// filelock's writer preference has it); cut short, it leaves the log as
/// it found it (this process reads beside the Python reader at once); a
/// writer awaited to the end is granted when the Python writer releases.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[test]
fn a_read_write_wait_behind_filelock_is_named_while_it_waits_and_leaves_when_dropped() {
    use common::rw::{python_latest, Side};
    use swaplock::rw::SoftRwLock;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rw.lock");
    let terms = (0.5, 2.5, 0.02);
    in_runtime(move || async move {
        let lock = || {
            SoftRwLock::new(&path)
                .heartbeat_interval(Duration::from_millis(500))
                .stale_threshold(Duration::from_millis(2500))
                .poll_interval(Duration::from_millis(20))
        };
        let (reader, _) = Side::Python.hold("read", &path, terms);
        {
            let waiting = lock();
            let wait = waiting.write_async();
            tokio::pin!(wait);
            // Until the writer is named in the latest snapshot (then the
            // wait is dropped, at the end of this block).
            loop {
                tokio::select! {
                    got = &mut wait => panic!("written while read: {got:?}"),
                    () = tokio::time::sleep(Duration::from_millis(20)) => {}
                }
                if python_latest(&path)["writer"].is_string() {
                    break;
                }
            }
        }
        // Dropped: nobody is named as writer, and a read shares at once.
        let latest = python_latest(&path);
        assert!(
            latest["writer"].is_null(),
            "the dropped wait stayed: {latest}"
        );
        lock().try_read().unwrap().release().unwrap();
        assert!(reader.release().success());
        let (writer, hello) = Side::Python.hold("write", &path, terms);
        let wait = tokio::spawn({
            let lock = lock();
            async move { lock.write_async().await }
        });
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        assert!(!wait.is_finished(), "written beside filelock's writer");
        assert!(writer.release().success());
        let writing = wait.await.unwrap().unwrap();
        let theirs: u128 = hello["generation"]
            .to_string()
            .trim_matches('"')
            .parse()
            .unwrap();
        assert!(writing.generation() > theirs);
        writing.release().unwrap();
    });
}
