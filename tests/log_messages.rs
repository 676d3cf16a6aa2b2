//! The `log` feature: swaplock's debug messages are filelock's, word for
//! word, for the same acquires and releases, checked against Python
//! filelock 4.2.11's own (logger `filelock`), with the object ids and the
//! path taken out.

#![cfg(all(feature = "log", unix))]

mod common;

use std::sync::Mutex;
use swaplock::SoftLock;

/// The messages logged on the target `swaplock`.
static LOGGED: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.target() == "swaplock" && m.level() == log::Level::Debug
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            LOGGED.lock().unwrap().push(record.args().to_string());
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

#[test]
fn the_messages_are_filelocks() {
    log::set_logger(&Capture).unwrap();
    log::set_max_level(log::LevelFilter::Debug);
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
