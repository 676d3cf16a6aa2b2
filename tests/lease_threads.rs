//! A lease's heartbeat thread (PROTOCOL 7.15) is kept for the process's
//! next lease rather than started at each acquire and joined at each
//! release, and a lease whose heartbeat cannot start is not kept. A file
//! of its own: the tests read the process's threads by name, which
//! another test's leases would add to.

#![cfg(target_os = "linux")]

use std::time::{Duration, Instant};
use swaplock::SoftLock;

/// The threads of this process named as lease heartbeats.
fn heartbeats() -> Vec<String> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let task = task.unwrap();
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.starts_with("filelock-lease") {
            found.push(task.file_name().to_string_lossy().into_owned());
        }
    }
    found.sort();
    found
}

/// The lease heartbeats of this process once one is there (a new thread
/// names itself once it runs); none after 10 s.
fn some_heartbeats() -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = heartbeats();
        if !found.is_empty() || Instant::now() > deadline {
            return found;
        }
        std::thread::yield_now();
    }
}

/// The thread of a released lease's heartbeat serves the process's next
/// lease: no thread is started and joined at each acquire and release.
#[test]
fn a_released_leases_heartbeat_thread_serves_the_next_lease() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.lock");
    let guard = SoftLock::lease(&path).lock().unwrap();
    let first = some_heartbeats();
    assert_eq!(first.len(), 1, "{first:?}");
    guard.release().unwrap();
    for _ in 0..5 {
        let guard = SoftLock::lease(&path).lock().unwrap();
        assert_eq!(heartbeats(), first, "a new thread beats for the next lease");
        guard.release().unwrap();
    }
}

/// A forked child's lease beats on a thread of the child's own: the
/// heartbeat thread its parent keeps idle is not in the child, and a lease
/// handed to it would go unrefreshed (a peer would take it over once its
/// duration passed, its holder never told).
#[test]
fn a_forked_childs_lease_beats_on_a_thread_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fork.lock");
    // The parent keeps this heartbeat's thread idle for its next lease.
    SoftLock::lease(&path).lock().unwrap().release().unwrap();
    // SAFETY: the child only calls into the library and the C library and
    // leaves through `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let beating = match SoftLock::lease(&path).lock() {
            Ok(guard) => {
                let beating = !some_heartbeats().is_empty();
                let _ = guard.release();
                beating
            }
            Err(_) => false,
        };
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(if beating { 0 } else { 1 }) }
    }
    let mut status = 0;
    // SAFETY: `status` is a valid out-pointer; `pid` is our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's lease had no heartbeat thread (status {status})"
    );
}

/// With the process's descriptors all but spent, a lease's acquire either
/// holds with its heartbeat beating, or fails, leaving no marker: never a
/// lease that nothing refreshes, which a peer would take over once its
/// duration passed while its holder, never told, went on. Each limit is
/// tried in a child of its own, which leaves its answer as its status.
#[test]
fn a_lease_whose_heartbeat_cannot_start_is_not_kept() {
    const BEATING: i32 = 0;
    const NOT_BEATING: i32 = 1;
    const REFUSED_CLEANLY: i32 = 2;
    const MARKER_LEFT: i32 = 3;
    const OTHER_ERROR: i32 = 4;
    let dir = tempfile::tempdir().unwrap();
    let mut answers = Vec::new();
    for spare in 0..12u64 {
        let path = dir.path().join(format!("{spare}.lock"));
        // SAFETY: the child only calls into the library and the C library
        // and leaves through `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let answer = (|| {
                // Exactly `spare` descriptors free above the highest open.
                let top = std::fs::read_dir("/proc/self/fd")
                    .unwrap()
                    .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
                    .max()
                    .unwrap();
                let mut limit = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                // SAFETY: a valid out-pointer, then plain calls.
                unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
                let before = limit;
                // SAFETY: plain calls.
                unsafe {
                    limit.rlim_cur = top + 1 + spare;
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return OTHER_ERROR;
                    }
                    // Fill the holes below the highest descriptor.
                    loop {
                        let fd = libc::dup(0);
                        if fd < 0 || fd as u64 > top {
                            if fd >= 0 {
                                libc::close(fd);
                            }
                            break;
                        }
                    }
                }
                let lock = SoftLock::lease(&path).lease_duration(Duration::from_secs(60));
                let taken = lock.try_lock();
                // What follows looks at the outcome with descriptors to spare.
                // SAFETY: a plain call.
                unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &before) };
                match taken {
                    Ok(guard) => {
                        let beating = !some_heartbeats().is_empty();
                        std::mem::forget(guard);
                        if beating {
                            BEATING
                        } else {
                            NOT_BEATING
                        }
                    }
                    Err(e) if e.to_string().contains("heartbeat could not start") => {
                        match std::fs::symlink_metadata(&path) {
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => REFUSED_CLEANLY,
                            _ => MARKER_LEFT,
                        }
                    }
                    Err(_) => OTHER_ERROR,
                }
            })();
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(answer) }
        }
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer; `pid` is our child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "child status {status}");
        answers.push((spare, libc::WEXITSTATUS(status)));
    }
    assert!(
        !answers
            .iter()
            .any(|(_, a)| *a == NOT_BEATING || *a == MARKER_LEFT),
        "(spare descriptors, answer): {answers:?}"
    );
    assert!(
        answers.iter().any(|(_, a)| *a == REFUSED_CLEANLY),
        "no limit made the heartbeat fail to start: {answers:?}"
    );
    assert!(
        answers.iter().any(|(_, a)| *a == BEATING),
        "no limit let the lease be taken: {answers:?}"
    );
}

/// The state letter of thread `tid` of this process (`S`: asleep).
fn state_of(tid: &str) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    stat.rsplit(')').next()?.trim().chars().next()
}

/// A lease lost with no hook ends its heartbeat by itself, and the thread
/// serves the next lease. When that lease is lost too and its hook waits
/// for the application's mutex, the release of the first lease by that
/// mutex's holder must not wait for the hook: two unrelated leases, each
/// with a heartbeat of its own before, never deadlocked so.
#[test]
fn a_lost_leases_release_waits_for_no_other_leases_hook() {
    use std::sync::{mpsc, Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.lock"), dir.path().join("b.lock"));
    let first = SoftLock::lease(&a)
        .lease_duration(Duration::from_secs(60))
        .heartbeat_interval(Duration::from_millis(10))
        .lock()
        .unwrap();
    let beats = some_heartbeats();
    assert_eq!(beats.len(), 1, "{beats:?}");
    std::fs::remove_file(&a).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while first.compromise().is_none() {
        assert!(Instant::now() < deadline, "no loss found");
        std::thread::yield_now();
    }
    // Its thread, its work ended, lists itself idle and sleeps.
    while state_of(&beats[0]) != Some('S') {
        assert!(Instant::now() < deadline, "the thread never slept");
        std::thread::yield_now();
    }
    let app = Arc::new(Mutex::new(()));
    let (entered_tx, entered) = mpsc::channel();
    let entered_tx = Mutex::new(entered_tx);
    let theirs = Arc::clone(&app);
    let second = SoftLock::lease(&b)
        .lease_duration(Duration::from_secs(60))
        .heartbeat_interval(Duration::from_millis(10))
        .on_compromise(move |_| {
            let _ = entered_tx.lock().unwrap().send(());
            drop(theirs.lock().unwrap());
        })
        .lock()
        .unwrap();
    assert_eq!(
        heartbeats(),
        beats,
        "the second lease got a thread of its own"
    );
    let (holding_tx, holding) = mpsc::channel();
    let (go_tx, go) = mpsc::channel::<()>();
    let (done_tx, done) = mpsc::channel();
    let mine = Arc::clone(&app);
    std::thread::spawn(move || {
        let _app = mine.lock().unwrap();
        holding_tx.send(()).unwrap();
        go.recv().unwrap();
        let _ = first.release();
        done_tx.send(()).unwrap();
    });
    holding.recv().unwrap();
    std::fs::remove_file(&b).unwrap();
    entered
        .recv_timeout(Duration::from_secs(30))
        .expect("the second lease's hook never ran");
    go_tx.send(()).unwrap();
    let released = done.recv_timeout(Duration::from_secs(10));
    if released.is_err() {
        // Its release would wait for the hook, which waits for the
        // deadlocked release: left, for the test to end.
        std::mem::forget(second);
    }
    released.expect("the first lease's release waited for the second lease's hook: a deadlock");
}
