//! One process, many locks: an `fcntl` [`FileLock`] excludes the threads of
//! its process as it excludes other processes. On 64-bit Linux and Android
//! it is an open file description lock, so a second lock object of the same
//! file, in another thread or the same one, is excluded as another process
//! is (tested on every platform in `kernel_in_process.rs`), and closing
//! some other descriptor of the file keeps the lock.
//! Elsewhere (and with `SWAPLOCK_FCNTL_OFD=0`, as on a kernel before 3.15)
//! it is a classic lock with the process's own registry between its
//! threads: the lock's own failed attempts and queries keep it, though a
//! descriptor the program opens and closes itself releases it. The
//! classic lock owned by the process stays available (and is what
//! `with-lock-ex` takes).

#![cfg(unix)]

mod common;

use std::io::ErrorKind;
use std::time::Duration;
use swaplock::FileLock;

/// Whether the reference with-lock-ex, another process, finds the lock
/// free.
fn free_to_another_process(dir: &std::path::Path) -> bool {
    !common::held_for_the_reference(dir, "a.lock")
}

/// This process's own failed attempts and queries open and close the lock
/// file: none of them releases a lock another guard of the process holds
/// (a classic lock would be released by the first close).
#[test]
fn failed_attempts_and_queries_keep_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let guard = FileLock::new(&path).lock().unwrap();
    for _ in 0..3 {
        let e = FileLock::new(&path).try_lock().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
        let e = FileLock::new(&path).try_lock_shared().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
        let e = FileLock::new(&path)
            .lock_timeout(Duration::from_millis(5))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
        FileLock::new(&path).holder().unwrap();
    }
    assert!(!free_to_another_process(dir.path()));
    guard.release().unwrap();
    assert!(free_to_another_process(dir.path()));
}

/// Shared guards of one process share one kernel read lock: it stays
/// until the last of them goes, whichever goes first.
#[test]
fn the_read_lock_stays_until_the_last_shared_guard_goes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    for first_goes_first in [true, false] {
        let first = FileLock::new(&path).lock_shared().unwrap();
        let second = FileLock::new(&path).lock_shared().unwrap();
        let (a, b) = if first_goes_first {
            (first, second)
        } else {
            (second, first)
        };
        a.release().unwrap();
        assert!(!free_to_another_process(dir.path()));
        let e = FileLock::new(&path).try_lock().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
        drop(b);
        assert!(free_to_another_process(dir.path()));
    }
}

/// Many threads of one process take turns on one lock file: never two at
/// once, counted by a critical section that notices an overlap.
#[test]
fn threads_take_turns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let lock_path = path.clone();
    let take = move |t: usize, i: usize| {
        let lock = FileLock::new(&lock_path);
        match (t + i) % 3 {
            0 => lock.lock().unwrap(),
            1 => lock.lock_timeout(Duration::from_secs(60)).unwrap(),
            _ => loop {
                match lock.try_lock() {
                    Ok(g) => break g,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::yield_now(),
                    Err(e) => panic!("{e}"),
                }
            },
        }
    };
    let release = |guard: swaplock::FileLockGuard, i: usize| {
        if i.is_multiple_of(50) {
            guard.remove().unwrap();
        }
    };
    assert_eq!(common::take_turns(4, 200, take, release), 0);
    assert!(free_to_another_process(dir.path()));
}

/// Where the lock is an open file description lock, closing a descriptor
/// the program opened itself keeps it; where it is a classic lock, that
/// close releases it, as POSIX says (the documented limit).
#[test]
fn closing_another_descriptor_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let guard = FileLock::new(&path).lock().unwrap();
    std::fs::read(&path).unwrap();
    drop(std::fs::File::open(&path).unwrap());
    assert_eq!(free_to_another_process(dir.path()), !common::ofd());
    guard.release().unwrap();
    assert!(free_to_another_process(dir.path()));
}

#[test]
fn a_process_owned_lock_is_the_classic_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let classic = FileLock::new(&path).owned_by_process().try_lock().unwrap();
    // Classic locks of one process do not exclude each other...
    let again = FileLock::new(&path).owned_by_process().try_lock().unwrap();
    if common::ofd() {
        // ...but an open file description lock conflicts with them.
        let e = FileLock::new(&path).try_lock().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    }
    // Closing any descriptor of the file releases the process's lock.
    drop(again);
    assert!(free_to_another_process(dir.path()));
    FileLock::new(&path).try_lock().unwrap().release().unwrap();
    drop(classic);
}

/// On Linux and Android `fcntl` and `flock` locks never meet: a thread
/// that holds one kind of a file takes the other kind too, rather than
/// being told it would wait for itself.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[test]
fn a_thread_holding_one_kind_takes_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let fcntl = FileLock::new(&path).lock().unwrap();
    let flock = FileLock::flock(&path).lock().unwrap();
    flock.release().unwrap();
    let shared = FileLock::flock(&path).lock_shared().unwrap();
    drop(fcntl);
    let fcntl = FileLock::new(&path).lock().unwrap();
    drop((fcntl, shared));
}

/// A thread that waits with no timeout for a file it holds through another
/// guard would wait forever (the kernel has no deadlock detection for these
/// locks): it gets an error of kind `Deadlock` at once. A timed wait times
/// out; a shared lock's holder asking for the exclusive one is the same
/// case; another thread waits as usual.
#[test]
fn this_thread_waiting_for_a_lock_it_holds_is_a_deadlock_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let kinds: [fn(std::path::PathBuf) -> FileLock; 2] = [FileLock::new, FileLock::flock];
    for new in kinds {
        let held = new(path.clone()).lock().unwrap();
        let e = new(path.clone()).lock().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Deadlock, "{e}");
        let e = new(path.clone()).lock_shared().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Deadlock, "{e}");
        let e = new(path.clone())
            .lock_timeout(Duration::from_millis(20))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
        held.release().unwrap();
        let reader = new(path.clone()).lock_shared().unwrap();
        let e = new(path.clone()).lock().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Deadlock, "{e}");
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || new(path.clone()).lock().and_then(|g| g.release()))
        };
        drop(reader);
        waiter.join().unwrap().unwrap();
        new(path.clone()).lock().unwrap().release().unwrap();
    }
}

/// How many descriptors this process has open.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Repeated attempts, queries and shared guards while the lock is held
/// keep a bounded number of descriptors open: those a classic lock makes
/// the process keep are reused, not opened anew each time. (Other tests
/// of this file run meanwhile, so the bound is loose: unbounded growth is
/// one descriptor per cycle.)
#[test]
#[cfg(any(target_os = "linux", target_os = "android"))]
fn descriptors_stay_bounded_while_the_lock_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let reader = FileLock::new(&path).lock_shared().unwrap();
    let before = open_descriptors();
    for _ in 0..400 {
        drop(FileLock::new(&path).lock_shared().unwrap());
        let e = FileLock::new(&path).try_lock().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
        FileLock::new(&path).holder().unwrap();
    }
    let after = open_descriptors();
    assert!(after < before + 100, "{before} descriptors, then {after}");
    assert!(!free_to_another_process(dir.path()));
    drop(reader);
    assert!(free_to_another_process(dir.path()));
}

/// An `flock` lock of the same file, taken and dropped while the `fcntl`
/// lock is held, leaves the `fcntl` lock held (its descriptor is not
/// closed under it).
#[test]
fn another_kind_on_the_file_keeps_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let guard = FileLock::new(&path).lock().unwrap();
    for _ in 0..3 {
        drop(FileLock::flock(&path).try_lock().unwrap());
        let e = FileLock::new(&path).try_lock().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    }
    assert!(!free_to_another_process(dir.path()));
    guard.release().unwrap();
    assert!(free_to_another_process(dir.path()));
}

/// A thread that holds a file through a `FileLock` and waits for it
/// through an `OpenFileLock`, or the other way round, gets the `Deadlock`
/// error instead of waiting forever.
#[test]
fn a_lock_on_the_open_file_that_this_thread_holds_is_a_deadlock_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let open = || common::open_rw(&path);
    let held = FileLock::new(&path).lock().unwrap();
    let mut other = swaplock::OpenFileLock::new(open());
    let e = other.lock().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Deadlock, "{e}");
    drop(held);
    let guard = other.lock().unwrap();
    let e = FileLock::new(&path).lock().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Deadlock, "{e}");
    drop(guard);
    FileLock::new(&path).lock().unwrap().release().unwrap();
}
