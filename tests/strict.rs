//! The strict lock on its own (PROTOCOL 18): threads of one process take
//! turns through the claims; names that would not fit, and a directory
//! swapped for a symlink, are refused before anything is made; and a
//! contender killed at any link or unlink of its attempt leaves nothing
//! that the next contender, or `break` of a holder proven dead, cannot get
//! past.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use std::io::ErrorKind;
use std::path::Path;
use std::time::Duration;
use swaplock::strict::{LockPath, StrictLock};

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn threads_of_one_process_take_turns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.lock");
    let overlaps = common::take_turns(
        4,
        25,
        move |_, _| {
            StrictLock::new(&path)
                .poll_interval(Duration::from_millis(5))
                .lock()
                .unwrap()
        },
        |guard, _| guard.release().unwrap(),
    );
    assert_eq!(overlaps, 0);
    assert_eq!(
        names(&dir.path().join("threads.lock.filelock/claims")).len(),
        0
    );
}

#[test]
fn a_name_that_would_not_fit_is_refused_before_anything_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let long = dir.path().join("a".repeat(207));
    let err = StrictLock::new(&long).try_lock().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(names(dir.path()).is_empty());
    // 206 bytes fit: the sentinel's private name is then 255.
    let longest = dir.path().join("a".repeat(206));
    StrictLock::new(&longest).lock().unwrap().release().unwrap();
}

#[test]
fn a_claims_directory_swapped_for_a_symlink_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    std::fs::create_dir(dir.path().join("a.lock.filelock")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("a.lock.filelock/claims"))
        .unwrap();
    let err = StrictLock::new(&path).try_lock().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidData, "{err}");
    assert!(
        err.to_string().contains("claims is not a real directory"),
        "{err}"
    );
    assert!(
        names(elsewhere.path()).is_empty(),
        "nothing written through the link"
    );
}

/// Kills `swaplock run --kind strict` at its `nth` call of `syscall` and
/// returns whether it was killed (a call it never made lets it finish).
fn killed_at(path: &Path, syscall: &str, nth: u32) -> bool {
    let args = [
        "run",
        "--kind",
        "strict",
        "-n",
        path.to_str().unwrap(),
        "true",
    ];
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    let status = common::swaplock_killed_at(syscall, nth, &args);
    !status.success()
}

#[test]
fn a_contender_killed_anywhere_in_its_doorway_never_wedges_the_lock() {
    if std::env::var_os("SWAPLOCK_TEST_RUNNER").is_some() {
        return; // an emulated target cannot be traced
    }
    let mut kills = 0;
    for syscall in ["linkat", "unlinkat", "fsync"] {
        for nth in 1.. {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("a.lock");
            if !killed_at(&path, syscall, nth) {
                break;
            }
            kills += 1;
            let lock = StrictLock::new(&path);
            // What the killed contender left blocks only as its claims do,
            // and break removes those: its holder is proven dead.
            let report = lock.break_dead().unwrap();
            assert!(report.kept.is_empty(), "{syscall} #{nth}: {report:?}");
            let guard = lock
                .try_lock()
                .unwrap_or_else(|e| panic!("{syscall} #{nth}: {e}"));
            assert_eq!(lock.occupant().unwrap(), LockPath::Sentinel);
            guard.release().unwrap();
        }
    }
    eprintln!("strict contenders killed at a link, unlink or fsync: {kills}");
    assert!(
        kills >= 10,
        "the attempt made too few calls to kill at: {kills}"
    );
}
