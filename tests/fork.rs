//! A guard used in a child forked while it was held: the lock is the
//! parent's, so the child's `release` and `remove` are refused
//! with an error of kind `InvalidInput`, and neither they nor dropping the
//! guard in the child release the parent's lock or remove its marker.
//! (Without the check, the child's unlock of an open file description or
//! `flock` lock, which the two share, would release the parent's lock.)

#![cfg(unix)]

mod common;

use std::io::ErrorKind;
use std::path::Path;
use swaplock::{FileLock, SoftLock};

/// Runs `$child` in a forked child, which exits with its answer (0: as
/// expected), and waits for it: the child's answer. The child only calls
/// into the library and leaves through `_exit`, running none of the
/// parent's exit hooks. (A macro, so that the child may consume a guard
/// the parent goes on using.)
macro_rules! in_forked_child {
    ($child:expr) => {{
        // SAFETY: the child evaluates `$child` and leaves through `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let code: i32 = $child;
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(code) }
        }
        wait_for(pid)
    }};
}

fn wait_for(pid: libc::pid_t) -> i32 {
    let mut status = 0;
    // SAFETY: `status` is a valid out-pointer; `pid` is our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "child status {status}");
    libc::WEXITSTATUS(status)
}

fn refused(r: std::io::Result<()>) -> i32 {
    match r {
        Err(e) if e.kind() == ErrorKind::InvalidInput => 0,
        Err(_) => 1,
        Ok(()) => 2,
    }
}

/// Whether another process (the reference with-lock-ex) finds the lock
/// held.
fn held_elsewhere(dir: &Path) -> bool {
    common::held_for_the_reference(dir, "a.lock")
}

#[test]
fn a_forked_child_cannot_release_its_parents_lock() {
    let kinds: [fn(&Path) -> FileLock; 3] = [
        |p| FileLock::new(p),
        |p| FileLock::new(p).owned_by_process(),
        |p| FileLock::flock(p),
    ];
    for (n, new) in kinds.into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let guard = new(&path).lock().unwrap();
        assert_eq!(in_forked_child!(refused(guard.release())), 0, "kind {n}");
        assert_eq!(in_forked_child!(refused(guard.remove())), 0, "kind {n}");
        assert_eq!(
            in_forked_child!({
                drop(guard);
                0
            }),
            0,
            "kind {n}"
        );
        assert!(path.exists(), "kind {n}");
        if n != 2 {
            // fcntl locks: the reference sees them (flock ones it does not).
            assert!(held_elsewhere(dir.path()), "kind {n}");
        } else {
            let e = FileLock::flock(&path).try_lock().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
        }
        guard.remove().unwrap();
        assert!(!path.exists(), "kind {n}");
    }
}

#[test]
fn a_forked_child_never_removes_its_parents_marker() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let kinds: [fn(&Path) -> SoftLock; 3] = [
        |p| SoftLock::soft(p),
        |p| SoftLock::marker(p),
        // A lease has a heartbeat thread, which the child has not.
        |p| SoftLock::lease(p),
    ];
    for (n, new) in kinds.into_iter().enumerate() {
        let guard = new(&path).try_lock().unwrap();
        let before = std::fs::read(&path).unwrap();
        assert_eq!(in_forked_child!(refused(guard.release())), 0, "kind {n}");
        assert_eq!(
            in_forked_child!({
                drop(guard);
                0
            }),
            0,
            "kind {n}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), before, "kind {n}");
        let e = new(&path).try_lock().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "kind {n}: {e}");
        guard.release().unwrap();
        assert!(!path.exists(), "kind {n}");
    }
}

/// A pipe: the parent writes a byte when the child may go on.
fn pipe() -> (libc::c_int, libc::c_int) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    (fds[0], fds[1])
}

fn wait_byte(fd: libc::c_int) {
    let mut b = 0u8;
    // SAFETY: reads one byte into `b`.
    unsafe { libc::read(fd, (&raw mut b).cast(), 1) };
}

fn send_byte(fd: libc::c_int) {
    // SAFETY: writes one byte from a valid buffer.
    assert_eq!(unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) }, 1);
}

/// A child forked while its parent held locks (in this thread, and in
/// another that has no counterpart in the child) takes the lock once the
/// parent released it: nothing of the parent's holds stays in the child.
#[test]
fn a_forked_child_takes_the_lock_its_parent_released() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let other = dir.path().join("b.lock");
    let guard = FileLock::new(&path).lock().unwrap();
    let (go_tx, thread) = {
        let other = other.clone();
        common::held_by_a_thread(
            move || FileLock::new(&other).lock().unwrap(),
            |g| g.release().unwrap(),
        )
    };
    let (rx, tx) = pipe();
    // SAFETY: the child only calls into the library and leaves by _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let refused = refused(guard.release());
        wait_byte(rx);
        let t = std::time::Duration::from_secs(10);
        let took = FileLock::new(&path).lock_timeout(t).is_ok()
            && FileLock::new(&other).lock_timeout(t).is_ok();
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(if refused == 0 && took { 0 } else { 1 }) }
    }
    guard.release().unwrap();
    go_tx.send(()).unwrap();
    thread.join().unwrap();
    send_byte(tx);
    assert_eq!(wait_for(pid), 0);
}

/// A guard of a lock on an open file, dropped in a forked child, leaves
/// the parent's lock held (the child shares its open file description).
#[test]
fn a_forked_child_cannot_release_a_lock_on_an_open_file() {
    use swaplock::OpenFileLock;
    for flock in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.lock");
        let open = || common::open_rw(&path);
        let new = |f| {
            if flock {
                OpenFileLock::flock(f)
            } else {
                OpenFileLock::new(f)
            }
        };
        let mut lock = new(open());
        let guard = lock.lock().unwrap();
        assert_eq!(in_forked_child!(refused(guard.release())), 0);
        assert_eq!(
            in_forked_child!({
                drop(guard);
                0
            }),
            0
        );
        let e = new(open()).try_lock().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "flock {flock}: {e}");
        guard.release().unwrap();
        new(open()).try_lock().unwrap();
    }
}

/// Threads that lock and release all the time (a marker, an exclusive and a
/// shared kernel lock, each on its own file in `dir`) until `stop`.
fn busy_threads(
    dir: &Path,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    use std::sync::atomic::Ordering;
    (0..3)
        .map(|t| {
            let (dir, stop) = (dir.to_path_buf(), stop.clone());
            std::thread::spawn(move || {
                let path = dir.join(format!("busy{t}.lock"));
                while !stop.load(Ordering::Relaxed) {
                    match t {
                        0 => drop(SoftLock::marker(&path).lock().unwrap()),
                        1 => drop(FileLock::new(&path).lock().unwrap()),
                        _ => drop(FileLock::new(&path).lock_shared().unwrap()),
                    }
                }
            })
        })
        .collect()
}

/// Forks a child that takes free locks of every kind on `free` (a stuck
/// one is ended by its alarm): its answer, 0 if it took them all.
fn fork_a_child_taking_free_locks(free: &Path) -> i32 {
    in_forked_child!({
        // SAFETY: a stuck child ends by SIGALRM.
        unsafe { libc::alarm(10) };
        let t = std::time::Duration::from_secs(5);
        let soft = SoftLock::marker(free).lock_timeout(t).is_ok();
        let kernel = FileLock::new(free).lock_timeout(t).is_ok();
        let shared = FileLock::new(free).lock_shared_timeout(t).is_ok();
        i32::from(!(soft && kernel && shared))
    })
}

/// Children forked while other threads of the parent lock and release all
/// the time (so that one of them may hold a list's mutex at the fork) take
/// free locks of every kind: none is stuck on a mutex its parent's thread
/// held. (A stuck child is ended by its alarm, which fails the test.)
#[test]
fn children_forked_amid_locking_threads_are_never_stuck() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let busy = busy_threads(dir.path(), &stop);
    for n in 0..200 {
        let free = dir.path().join(format!("free{n}.lock"));
        assert_eq!(fork_a_child_taking_free_locks(&free), 0, "child {n}");
    }
    stop.store(true, Ordering::Relaxed);
    for t in busy {
        t.join().unwrap();
    }
}

/// Set, to a directory, in the processes the next test starts.
const FIRST_LOCKS_DIR: &str = "SWAPLOCK_TEST_FORK_FIRST_LOCKS_DIR";

/// Children forked while the parent's threads take the first locks of the
/// process (when the library first registers its fork handlers and fills
/// its one-time caches) are never stuck either: a fork racing that first
/// use must not leave the child a registration or a cache being filled by
/// a thread it has not. Each first use happens once per process, so the
/// test runs itself afresh in many processes, each of which forks children
/// at once while its threads take their first locks.
#[test]
fn children_forked_as_the_first_locks_are_taken_are_never_stuck() {
    use std::sync::atomic::{AtomicBool, Ordering};
    const NAME: &str = "children_forked_as_the_first_locks_are_taken_are_never_stuck";
    if let Some(dir) = std::env::var_os(FIRST_LOCKS_DIR) {
        // A fresh process: forks at once, amid the threads' first locks.
        let dir = Path::new(&dir);
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let busy = busy_threads(dir, &stop);
        for n in 0..4 {
            let free = dir.join(format!("free{n}.lock"));
            assert_eq!(fork_a_child_taking_free_locks(&free), 0, "child {n}");
        }
        stop.store(true, Ordering::Relaxed);
        for t in busy {
            t.join().unwrap();
        }
        return;
    }
    let exe = std::env::current_exe().unwrap();
    for run in 0..100 {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(&exe)
            .args(["--exact", NAME, "--test-threads=1", "--nocapture"])
            .env(FIRST_LOCKS_DIR, dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "process {run}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A child's release of one of several guards sharing a reentrant hold is
/// refused too (the hold is the parent's, however many guards share it).
#[test]
fn a_forked_childs_release_of_a_shared_reentrant_guard_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let first = SoftLock::marker(&path).reentrant(true).lock().unwrap();
    let second = SoftLock::marker(&path).reentrant(true).lock().unwrap();
    assert_eq!(in_forked_child!(refused(second.release())), 0);
    assert!(path.exists());
    second.release().unwrap();
    assert!(path.exists());
    first.release().unwrap();
    assert!(!path.exists());
}

/// A child that took the lock after its parent released it keeps it when
/// it drops the guard it inherited; and a parent that drops its guard
/// releases at once, though a forked child still has the descriptor.
#[test]
fn inherited_guards_neither_keep_nor_release_what_is_not_theirs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let guard = FileLock::new(&path).lock().unwrap();
    let (to_child, from_parent) = {
        let (r, w) = pipe();
        (w, r)
    };
    let (to_parent, from_child) = {
        let (r, w) = pipe();
        (w, r)
    };
    // SAFETY: the child only calls into the library and leaves by _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: a stuck child ends by SIGALRM.
        unsafe { libc::alarm(20) };
        wait_byte(from_parent);
        let Ok(mine) = FileLock::new(&path).lock_timeout(std::time::Duration::from_secs(10)) else {
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(1) }
        };
        drop(guard);
        send_byte(to_parent);
        wait_byte(from_parent);
        drop(mine);
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(0) }
    }
    // Dropped, not unlocked: the child's copy of the descriptor must not
    // keep it.
    drop(guard);
    FileLock::new(&path).try_lock().unwrap().release().unwrap();
    send_byte(to_child);
    wait_byte(from_child);
    let e = FileLock::new(&path).try_lock().unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::WouldBlock,
        "the child's own lock went: {e}"
    );
    send_byte(to_child);
    assert_eq!(wait_for(pid), 0);
    FileLock::new(&path).try_lock().unwrap();
}

/// The test `name` of this binary, alone, as a command of its own (through
/// `SWAPLOCK_TEST_RUNNER` when that is set).
#[cfg(target_os = "linux")]
fn this_test(name: &str) -> std::process::Command {
    let exe = std::env::current_exe().unwrap();
    let mut run = match std::env::var_os("SWAPLOCK_TEST_RUNNER") {
        Some(runner) => {
            let mut run = std::process::Command::new(runner);
            run.arg(exe);
            run
        }
        None => std::process::Command::new(exe),
    };
    run.args(["--exact", name, "--nocapture", "--test-threads=1"]);
    run
}

/// Where the scenario of
/// [`a_process_given_an_exited_ancestors_pid_inherits_none_of_its_holds`]
/// runs, inside the PID namespace the test makes for it.
#[cfg(target_os = "linux")]
const REUSED_PID_DIR: &str = "SWAPLOCK_FORK_REUSED_PID_DIR";

/// A process may be given the PID of an ancestor that has exited: in a PID
/// namespace of its own, the test has the kernel hand a grandchild the PID
/// of its grandparent, which held two soft locks when it forked and then
/// exited. The grandchild must not take the grandparent's reentrant hold
/// for its own (the lock is another process's by then), nor write the
/// grandparent's start token into its own marker (a peer would judge that
/// live marker stale and take the lock from it): both are kept per
/// process, and an ID alone does not tell the two processes apart.
#[cfg(target_os = "linux")]
#[test]
fn a_process_given_an_exited_ancestors_pid_inherits_none_of_its_holds() {
    if let Some(dir) = std::env::var_os(REUSED_PID_DIR) {
        reused_pid_scenario(Path::new(&dir));
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root, for a PID namespace and its next PID");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut unshare = std::process::Command::new("unshare");
    // The scenario's process is the namespace's first (its init), so that
    // the orphaned child is its to wait for, with /proc of the namespace.
    unshare.args(["--pid", "--fork", "--mount-proc"]);
    let inner = this_test("a_process_given_an_exited_ancestors_pid_inherits_none_of_its_holds");
    let out = unshare
        .arg(inner.get_program())
        .args(inner.get_args())
        .env(REUSED_PID_DIR, dir.path())
        .output()
        .expect("unshare (util-linux): scripts/setup installs it");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(said.contains("scenario: done"), "the scenario ran: {out:?}");
}

/// The scenario, as the PID namespace's first process (see the test).
#[cfg(target_os = "linux")]
fn reused_pid_scenario(dir: &Path) {
    let held = dir.join("held.lock");
    let other = dir.join("other.lock");
    let (child_r, child_w) = pipe();
    let (go_r, go_w) = pipe();
    let (holds_r, holds_w) = pipe();
    let (tried_r, tried_w) = pipe();
    // SAFETY: the child only calls into the library and `_exit`s.
    let grandparent = unsafe { libc::fork() };
    assert!(grandparent >= 0);
    if grandparent == 0 {
        // The grandparent: holds `held` (reentrant) and has its start
        // token kept, forks, and exits without releasing.
        let code = (|| {
            let grandparent_pid = std::process::id() as i32;
            let guard = SoftLock::soft(&held).reentrant(true).lock().ok()?;
            SoftLock::soft(&other).lock().ok()?.release().ok()?;
            // SAFETY: the child only calls into the library and `_exit`s.
            let child = unsafe { libc::fork() };
            if child == 0 {
                // SAFETY: ends the child at once.
                unsafe {
                    libc::_exit(child_in_between(
                        grandparent_pid,
                        guard,
                        go_r,
                        &held,
                        &other,
                        holds_w,
                        tried_r,
                    ))
                }
            }
            std::mem::forget(guard);
            // SAFETY: writes the child's PID from a valid buffer.
            unsafe { libc::write(child_w, (&raw const child).cast(), 4) };
            Some(())
        })();
        // SAFETY: ends the grandparent at once, its marker left.
        unsafe { libc::_exit(if code.is_some() { 0 } else { 10 }) }
    }
    // Only the processes below write these: a read ends at their exit.
    // SAFETY: closes this process's own ends, used nowhere else here.
    unsafe {
        libc::close(child_w);
        libc::close(holds_w);
    }
    let mut child: libc::pid_t = 0;
    // SAFETY: reads the child's PID into `child`.
    let read = unsafe { libc::read(child_r, (&raw mut child).cast(), 4) };
    assert_eq!(read, 4, "the grandparent forked the child");
    assert_eq!(wait_for(grandparent), 0, "the grandparent took its locks");
    // The grandparent is gone: its marker is stale, and taken over here.
    let mine = SoftLock::soft(&held)
        .try_lock()
        .expect("the exited grandparent's marker is taken over");
    // The next process of this namespace gets the grandparent's PID.
    std::fs::write(
        "/proc/sys/kernel/ns_last_pid",
        (grandparent - 1).to_string(),
    )
    .unwrap();
    send_byte(go_w);
    // The grandchild holds `other`: its marker names a live process.
    wait_byte(holds_r);
    let taken = SoftLock::soft(&other).try_lock();
    send_byte(tried_w);
    let code = wait_for(child);
    assert_ne!(code, 3, "the grandchild did not get the PID {grandparent}");
    assert_ne!(
        code, 1,
        "the grandchild took the grandparent's hold for its own"
    );
    assert_ne!(code, 5, "the grandchild released the grandparent's guard");
    assert_eq!(code, 0, "the grandchild's locks failed");
    let e = taken.expect_err("the grandchild's live marker was judged stale");
    assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    drop(mine);
    println!("scenario: done");
}

/// The child: forks the grandchild once the grandparent's PID is free,
/// and answers what it answered.
#[cfg(target_os = "linux")]
fn child_in_between(
    grandparent: i32,
    inherited: swaplock::SoftLockGuard,
    go: libc::c_int,
    held: &Path,
    other: &Path,
    holds: libc::c_int,
    tried: libc::c_int,
) -> i32 {
    // SAFETY: a stuck child ends by SIGALRM.
    unsafe { libc::alarm(30) };
    wait_byte(go);
    // A start token counts clock ticks: the grandchild starts at least
    // one tick after the grandparent did, so that their tokens differ.
    let ticks = || {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u128;
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid out-pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut t) };
        (t.tv_sec as u128 * 1_000_000_000 + t.tv_nsec as u128) * hz / 1_000_000_000
    };
    let started = ticks();
    while ticks() < started + 2 {
        std::thread::yield_now();
    }
    // SAFETY: the grandchild only calls into the library and `_exit`s.
    let grandchild = unsafe { libc::fork() };
    if grandchild == 0 {
        // SAFETY: a stuck grandchild ends by SIGALRM.
        unsafe { libc::alarm(30) };
        let code = if std::process::id() as i32 != grandparent {
            3
        } else {
            match SoftLock::soft(held).reentrant(true).try_lock() {
                // The guard it inherited is the grandparent's: its release
                // is refused, and releases nothing.
                Err(e) if e.kind() == ErrorKind::WouldBlock => match inherited.release() {
                    Err(e) if e.kind() == ErrorKind::InvalidInput => {
                        match SoftLock::soft(other).lock() {
                            Ok(guard) => {
                                send_byte(holds);
                                wait_byte(tried);
                                drop(guard);
                                0
                            }
                            Err(_) => 4,
                        }
                    }
                    _ => 5,
                },
                Ok(_) => 1,
                Err(_) => 2,
            }
        };
        if code != 0 {
            // The scenario waits for this byte whatever the answer.
            send_byte(holds);
        }
        // SAFETY: ends the grandchild at once.
        unsafe { libc::_exit(code) }
    }
    // SAFETY: the grandchild's end alone stays open.
    unsafe { libc::close(holds) };
    wait_for(grandchild)
}

/// The lock a fresh process tries, for
/// [`a_child_in_a_new_pid_namespace_records_its_own_start`].
#[cfg(target_os = "linux")]
const PEER_TRIES: &str = "SWAPLOCK_FORK_PEER_TRIES";

/// A child forked after its parent moved its children to a new PID
/// namespace (and mounted that namespace's `/proc`) writes its own start
/// into its marker, read from the `/proc` it sees, not from the one its
/// parent had open: a fresh process of that namespace finds the marker's
/// holder alive, and does not take the lock from it.
#[cfg(target_os = "linux")]
#[test]
fn a_child_in_a_new_pid_namespace_records_its_own_start() {
    if let Some(path) = std::env::var_os(PEER_TRIES) {
        match SoftLock::soft(Path::new(&path)).try_lock() {
            Err(e) if e.kind() == ErrorKind::WouldBlock => println!("peer: busy"),
            Ok(_) => println!("peer: took"),
            Err(e) => println!("peer: {e}"),
        }
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root, for a PID namespace and its /proc");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.lock");
    let warm = dir.path().join("warm.lock");
    // SAFETY: the child only calls into the library and `_exit`s.
    let parent = unsafe { libc::fork() };
    assert!(parent >= 0);
    if parent == 0 {
        // SAFETY: a stuck child ends by SIGALRM.
        unsafe { libc::alarm(60) };
        // /proc opened and kept, as a lock's start token is read.
        let warmed = SoftLock::soft(&warm).lock().and_then(|g| g.release());
        // SAFETY: moves this process's next children to a new PID
        // namespace.
        if warmed.is_err() || unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(10) }
        }
        // SAFETY: the child only calls into the library and `_exit`s.
        let child = unsafe { libc::fork() };
        if child == 0 {
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(first_of_a_pid_namespace(&path)) }
        }
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(wait_for(child)) }
    }
    let code = wait_for(parent);
    assert_ne!(
        code, 1,
        "a fresh process took the lock from its live holder"
    );
    assert_eq!(code, 0, "the scenario failed at step {code}");
}

/// The first process of a new PID namespace: mounts its `/proc`, takes the
/// lock, and has a fresh process of the namespace try it: 0 if that found
/// it busy, 1 if it took it.
#[cfg(target_os = "linux")]
fn first_of_a_pid_namespace(path: &Path) -> i32 {
    // SAFETY: a new mount namespace for this process, made private, with
    // the PID namespace's own /proc mounted over the parent's.
    let mounted = unsafe {
        libc::unshare(libc::CLONE_NEWNS) == 0
            && libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) == 0
            && libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                0,
                std::ptr::null(),
            ) == 0
    };
    if !mounted {
        return 11;
    }
    let Ok(guard) = SoftLock::soft(path).lock() else {
        return 12;
    };
    let Ok(out) = this_test("a_child_in_a_new_pid_namespace_records_its_own_start")
        .env(PEER_TRIES, path)
        .output()
    else {
        return 13;
    };
    let said = String::from_utf8_lossy(&out.stdout);
    let code = if said.contains("peer: busy") {
        0
    } else if said.contains("peer: took") {
        1
    } else {
        14
    };
    drop(guard);
    code
}

/// The descriptor this process has open on `path`, by `/proc/self/fd`.
#[cfg(target_os = "linux")]
fn descriptor_of(path: &Path) -> Option<i32> {
    let path = path.canonicalize().ok()?;
    std::fs::read_dir("/proc/self/fd")
        .ok()?
        .flatten()
        .find(|e| std::fs::read_link(e.path()).ok().as_deref() == Some(path.as_path()))
        .and_then(|e| e.file_name().to_str()?.parse().ok())
}

/// Which registry [`a_childs_first_use_of_a_registry_closes_none_of_its_own_files`]
/// checks in a run of its own (the classic one needs classic locks, which
/// `SWAPLOCK_FCNTL_OFD=0` forces from the first lock of a process on).
#[cfg(target_os = "linux")]
const REGISTRY: &str = "SWAPLOCK_FORK_REGISTRY";

/// A child that closed what it inherited (as a daemon does) and reused a
/// number for a lock file of its own keeps its lock when it first uses a
/// registry its parent had entries in: the parent's descriptors there are
/// forgotten in the child, not closed, since their numbers may be the
/// child's files by now (closing one would drop the child's classic lock).
/// Both registries: the SQLite lock's, and the classic lock's, which
/// `FileLock::new` uses where open file description locks are missing.
#[cfg(target_os = "linux")]
#[test]
fn a_childs_first_use_of_a_registry_closes_none_of_its_own_files() {
    const NAME: &str = "a_childs_first_use_of_a_registry_closes_none_of_its_own_files";
    match std::env::var(REGISTRY).as_deref() {
        Ok("classic") => {
            // Two shared guards, one dropped: its descriptor is kept in
            // the registry while the other holds.
            registry_scenario(
                "classic",
                |p| {
                    let lock = FileLock::new(p);
                    let kept = lock.lock_shared().unwrap();
                    let held = lock.lock_shared().unwrap();
                    drop(kept);
                    Box::new(held)
                },
                |p| drop(FileLock::new(p).try_lock()),
            );
            println!("registry: checked");
            return;
        }
        Ok(other) => panic!("no registry {other}"),
        Err(_) => {}
    }
    registry_scenario(
        "sqlite",
        |p| {
            Box::new(
                swaplock::SqliteRwLock::new(p)
                    .owned_by_process()
                    .read()
                    .unwrap(),
            )
        },
        |p| drop(swaplock::SqliteRwLock::new(p).try_read()),
    );
    let out = this_test(NAME)
        .env(REGISTRY, "classic")
        .env("SWAPLOCK_FCNTL_OFD", "0")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        said.contains("registry: checked"),
        "the classic run ran: {out:?}"
    );
}

/// The scenario of [`a_childs_first_use_of_a_registry_closes_none_of_its_own_files`]
/// for one registry: `hold` takes what lists the parent's descriptors in
/// it, `first_use` is the child's first use of it.
#[cfg(target_os = "linux")]
fn registry_scenario(name: &str, hold: fn(&Path) -> Box<dyn std::any::Any>, first_use: fn(&Path)) {
    let dir = tempfile::tempdir().unwrap();
    let parents = dir.path().join("parents.db");
    let childs = dir.path().join("childs.lock");
    let held = hold(&parents);
    let inherited = descriptor_of(&parents).expect("the parent's descriptor");
    let (to_parent_r, to_parent_w) = pipe();
    let (to_child_r, to_child_w) = pipe();
    // SAFETY: the child only calls into the library and `_exit`s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: a stuck child ends by SIGALRM.
        unsafe { libc::alarm(30) };
        // Every descriptor of the parents' file closed, as a daemon
        // closes what it inherited.
        while let Some(fd) = descriptor_of(&parents) {
            // SAFETY: closes a descriptor this child inherited.
            unsafe { libc::close(fd) };
        }
        let Ok(mine) = FileLock::new(&childs).owned_by_process().lock() else {
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(1) }
        };
        let reused = descriptor_of(&childs) == Some(inherited);
        first_use(&dir.path().join("other"));
        send_byte(to_parent_w);
        wait_byte(to_child_r);
        std::mem::forget(mine);
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(if reused { 0 } else { 2 }) }
    }
    // Only the child writes to the parent: a child gone early ends the
    // read.
    // SAFETY: closes this process's own copy, used nowhere else.
    unsafe { libc::close(to_parent_w) };
    wait_byte(to_parent_r);
    let taken = FileLock::new(&childs).try_lock();
    send_byte(to_child_w);
    let code = wait_for(pid);
    // SAFETY: the pipes' other ends, used nowhere else.
    unsafe {
        libc::close(to_parent_r);
        libc::close(to_child_r);
        libc::close(to_child_w);
    }
    drop(held);
    assert_ne!(
        code, 2,
        "{name}: the child's lock file did not get the number {inherited}"
    );
    assert_eq!(code, 0, "{name}: the child's lock failed");
    let e = taken.expect_err("the child's lock was dropped by the registry");
    assert_eq!(e.kind(), ErrorKind::WouldBlock, "{name}: {e}");
}
