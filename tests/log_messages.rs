//! The `log` feature: swaplock's debug messages are filelock's, word for
//! word, for the same acquires and releases, checked against Python
//! filelock 4.2.11's own (logger `filelock`), with the object ids and the
//! path taken out.

#![cfg(all(feature = "log", unix))]

mod common;

use std::sync::Mutex;
use swaplock::SoftLock;

/// The debug messages logged on the target `swaplock`.
static LOGGED: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The warnings logged on the target `swaplock`.
static WARNED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// When set, the capture panics at the next "Attempting" message, as a
/// logger may.
static PANIC_AT_ATTEMPT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.target() == "swaplock" && matches!(m.level(), log::Level::Debug | log::Level::Warn)
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) && record.level() == log::Level::Warn {
            WARNED.lock().unwrap().push(record.args().to_string());
        } else if self.enabled(record.metadata()) {
            let message = record.args().to_string();
            let attempt = message.starts_with("Attempting to acquire");
            LOGGED.lock().unwrap().push(message);
            if attempt && PANIC_AT_ATTEMPT.swap(false, std::sync::atomic::Ordering::SeqCst) {
                panic!("a logger's own panic");
            }
        }
    }

    fn flush(&self) {}
}

/// A message with its object id and path replaced, as both sides say them.
fn shape(message: &str, path: &str) -> String {
    let message = message.replace(path, "<path>");
    message
        .split(' ')
        .map(|w| match w.parse::<u64>() {
            Ok(_) => "<id>",
            Err(_) => w,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// filelock's messages for an uncontended acquire and release, then a
/// failed non-blocking acquire, of a `SoftFileLock` on `path`.
fn filelock_messages(path: &str) -> Vec<String> {
    let script = r#"
import logging, sys
from filelock import SoftFileLock
logging.basicConfig(level=logging.DEBUG, format="%(name)s|%(message)s", stream=sys.stdout)
path = sys.argv[1]
a = SoftFileLock(path, is_singleton=False)
a.acquire(); a.release()
a.acquire()
try:
    SoftFileLock(path, is_singleton=False).acquire(blocking=False)
except Exception:
    pass
a.release()
"#;
    let out = std::process::Command::new(common::python())
        .args(["-c", script, path])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("filelock|"))
        .map(|m| shape(m, path))
        .collect()
}

/// Installs the capture, once for the process's tests, and keeps the
/// other tests, whose messages would mix with this one's, out until the
/// guard drops.
fn capture() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        log::set_logger(&Capture).unwrap();
        log::set_max_level(log::LevelFilter::Debug);
    });
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// A message's shape ([`shape`]'s), its pause's length out too.
fn kind_of(message: &str) -> String {
    message
        .split(' ')
        .map(|w| match w.parse::<f64>() {
            Ok(_) => "<n>",
            Err(_) => w,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `messages` is one wait that timed out, as filelock logs it: an
/// attempt, then pauses and attempts, then the timeout.
fn a_timed_out_wait(messages: &[String]) -> bool {
    let shapes: Vec<String> = messages.iter().map(|m| kind_of(m)).collect();
    let attempt = "Attempting to acquire lock <id> on <path>";
    let pause = "Lock <id> not acquired on <path>, waiting <n> seconds ...";
    let timeout = "Timeout on acquiring lock <id> on <path>";
    let n = shapes.len();
    n >= 4
        && shapes[0] == attempt
        && shapes[n - 1] == timeout
        && shapes[1..n - 1]
            .chunks(2)
            .all(|pair| pair.len() == 2 && pair[0] == pause && pair[1] == attempt)
}

/// A wait to run, which must time out.
type Wait = Box<dyn Fn() -> std::io::Result<()>>;

#[test]
fn a_wait_that_times_out_logs_as_filelocks() {
    let _alone = capture();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.lock");
    let p = path.to_str().unwrap();
    let script = r#"
import logging, sys
from filelock import SoftFileLock
logging.basicConfig(level=logging.DEBUG, format="%(name)s|%(message)s", stream=sys.stdout)
a = SoftFileLock(sys.argv[1], is_singleton=False)
a.acquire()
try:
    SoftFileLock(sys.argv[1], is_singleton=False, timeout=0.3, poll_interval=0.05).acquire()
except Exception:
    pass
a.release()
"#;
    let out = std::process::Command::new(common::python())
        .args(["-c", script, p])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let theirs: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("filelock|"))
        .map(|m| shape(m, p))
        .collect();
    // Theirs: the holder's two, the wait, the holder's release.
    assert!(
        a_timed_out_wait(&theirs[2..theirs.len() - 2]),
        "{theirs:#?}"
    );

    let held = std::thread::spawn({
        let path = path.clone();
        move || SoftLock::soft(&path).lock().unwrap()
    })
    .join()
    .unwrap();
    let kernel_path = dir.path().join("k.lock");
    let kernel_held = swaplock::FileLock::new(&kernel_path).lock().unwrap();
    let kp = kernel_path.to_str().unwrap();
    let waits: [(&str, Wait); 2] = [
        (p, {
            let path = path.clone();
            Box::new(move || {
                SoftLock::soft(&path)
                    .poll_interval(std::time::Duration::from_millis(50))
                    .lock_timeout(std::time::Duration::from_millis(300))
                    .map(drop)
            })
        }),
        (kp, {
            let path = kernel_path.clone();
            Box::new(move || {
                swaplock::FileLock::new(&path)
                    .lock_with(Some(std::time::Duration::from_millis(300)), |_| {
                        std::ops::ControlFlow::Continue(())
                    })
                    .map(drop)
            })
        }),
    ];
    for (p, wait) in waits {
        LOGGED.lock().unwrap().clear();
        let err = wait().unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        let ours: Vec<String> = LOGGED.lock().unwrap().iter().map(|m| shape(m, p)).collect();
        assert!(a_timed_out_wait(&ours), "{p}: {ours:#?}");
    }
    held.release().unwrap();
    kernel_held.release().unwrap();
}

#[test]
fn the_messages_are_filelocks() {
    let _alone = capture();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.lock");
    let p = path.to_str().unwrap();
    let theirs = filelock_messages(p);

    LOGGED.lock().unwrap().clear();
    SoftLock::soft(&path).lock().unwrap().release().unwrap();
    let a = SoftLock::soft(&path).lock().unwrap();
    let busy = SoftLock::soft(&path).try_lock().unwrap_err();
    assert_eq!(busy.kind(), std::io::ErrorKind::WouldBlock);
    a.release().unwrap();
    let ours: Vec<String> = LOGGED.lock().unwrap().iter().map(|m| shape(m, p)).collect();
    assert!(!ours.is_empty());
    assert_eq!(ours, theirs);
}

/// A logger that panics while a soft wait waits: the wait leaves the
/// waiters a release hands its hold to, so the lock is free once its
/// holder releases.
#[test]
fn a_panicking_logger_leaves_no_waiter_behind() {
    let _alone = capture();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.lock");
    let (go_tx, holder) = {
        let path = path.clone();
        common::held_by_a_thread(
            move || SoftLock::soft(&path).lock().unwrap(),
            |g| g.release().unwrap(),
        )
    };
    let waiter = {
        let path = path.clone();
        std::thread::spawn(move || {
            let mut calls = 0;
            SoftLock::soft(&path)
                .poll_interval(std::time::Duration::from_millis(5))
                .lock_with(None, |_| {
                    // After the first busy attempt the wait is among the
                    // waiters; its next attempt's message panics.
                    calls += 1;
                    if calls == 1 {
                        PANIC_AT_ATTEMPT.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    std::ops::ControlFlow::Continue(())
                })
                .map(drop)
        })
    };
    assert!(
        waiter.join().is_err(),
        "the logger's panic reaches the caller"
    );
    assert_eq!(swaplock::soft::waiting_threads(&path), 0);
    go_tx.send(()).unwrap();
    holder.join().unwrap();
    assert!(!path.exists(), "the release was handed to a dead wait");
}

#[test]
fn a_wait_on_another_kind_of_lock_warns_once() {
    let _alone = capture();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kernel.lock");
    // The empty file a kernel lock leaves: no soft contender removes it.
    std::fs::write(&path, "").unwrap();
    WARNED.lock().unwrap().clear();
    let err = SoftLock::marker(&path)
        .poll_interval(std::time::Duration::from_millis(100))
        .lock_timeout(swaplock::soft::MISMATCH_AFTER + std::time::Duration::from_millis(700))
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    let warned = WARNED.lock().unwrap().clone();
    assert_eq!(warned.len(), 1, "{warned:#?}");
    assert!(
        warned[0].contains("waits on a path another kind of lock uses")
            && warned[0].contains("is an empty file"),
        "{warned:#?}"
    );
    // A wait shorter than that says nothing.
    WARNED.lock().unwrap().clear();
    let _ = SoftLock::marker(&path)
        .lock_timeout(std::time::Duration::from_millis(200))
        .unwrap_err();
    assert!(WARNED.lock().unwrap().is_empty());
}
