//! Timed waits for kernel locks wait in the kernel, on a thread of the
//! crate's that hands the lock over (`src/kernel/wait.rs`): waiters take
//! turns without ever overlapping; one that timed out leaves its waiting
//! thread behind, which never wedges the lock (it releases what it gets
//! once nobody waits) and serves the next timed wait; a forked child never
//! waits on its parent's thread.

#![cfg(unix)]

use std::io::ErrorKind;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;
use swaplock::FileLock;

const LONG: Duration = Duration::from_secs(60);

/// A kind's name, and how a lock object of that kind is made.
type Make = (&'static str, fn(&Path) -> FileLock);

fn kinds() -> [Make; 2] {
    [
        ("fcntl", |p| FileLock::new(p)),
        ("flock", |p| FileLock::flock(p)),
    ]
}

/// Threads, each with its own lock object, take the lock in turns with
/// timed waits: never two inside at once, and every round done.
#[test]
fn timed_waiters_take_turns_and_never_overlap() {
    const THREADS: usize = 4;
    const ROUNDS: usize = 100;
    for (kind, make) in kinds() {
        let dir = tempfile::tempdir().unwrap();
        let path = Arc::new(dir.path().join("t.lock"));
        let inside = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let start = Arc::new(Barrier::new(THREADS));
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                let (path, inside, done, start) = (
                    Arc::clone(&path),
                    Arc::clone(&inside),
                    Arc::clone(&done),
                    Arc::clone(&start),
                );
                std::thread::spawn(move || {
                    let lock = make(&path);
                    start.wait();
                    for _ in 0..ROUNDS {
                        let guard = lock.lock_timeout(LONG).unwrap();
                        assert_eq!(
                            inside.fetch_add(1, Ordering::SeqCst),
                            0,
                            "{kind}: two holders"
                        );
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        done.fetch_add(1, Ordering::SeqCst);
                        guard.release().unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(done.load(Ordering::SeqCst), THREADS * ROUNDS, "{kind}");
    }
}

/// A wait that timed out leaves its waiting thread blocked in the kernel.
/// Once the holder releases, the next timed wait of the same lock is
/// handed the lock that thread took; and a lock of the same file the
/// thread does not serve (another mode: another lock object's wait) is
/// not kept out by it.
#[test]
fn a_wait_that_timed_out_wedges_nothing() {
    for (kind, make) in kinds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lock");
        // The same lock, twice: one waiting thread serves both.
        let holder = make(&path).lock().unwrap();
        let waiter = make(&path);
        let err = waiter.lock_timeout(Duration::from_millis(20)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut, "{kind}: {err}");
        holder.release().unwrap();
        let guard = waiter.lock_timeout(LONG).unwrap();
        guard.release().unwrap();

        // A waiting thread left with nobody to hand the lock to releases
        // it: another lock object (its own waiting thread) gets it.
        let holder = make(&path).lock().unwrap();
        let err = make(&path)
            .lock_timeout(Duration::from_millis(20))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut, "{kind}: {err}");
        holder.release().unwrap();
        let other = make(&path).mode(0o600);
        let guard = other.lock_timeout(LONG).unwrap();
        // And while held, the first lock object's thread waits again,
        // then gives way to the next wait.
        let err = make(&path)
            .lock_timeout(Duration::from_millis(20))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut, "{kind}: {err}");
        guard.release().unwrap();
        make(&path).lock_timeout(LONG).unwrap().release().unwrap();
    }
}

/// A lock file deleted by its holder while a timed waiter waits: the
/// waiter's thread locks the orphan, sees the path no longer names it, and
/// locks the new file; the waiter returns holding the file the path names.
#[test]
fn a_timed_wait_follows_a_deleted_lock_file() {
    for (kind, make) in kinds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lock");
        let holder = make(&path).lock().unwrap();
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || {
                let lock = make(&path);
                let guard = lock.lock_timeout(LONG).unwrap();
                let held = std::fs::metadata(&path).unwrap();
                (guard, held)
            })
        };
        holder.remove().unwrap();
        let (guard, held) = waiter.join().unwrap();
        use std::os::unix::fs::MetadataExt;
        let now = std::fs::metadata(&path).unwrap();
        assert_eq!((held.dev(), held.ino()), (now.dev(), now.ino()), "{kind}");
        guard.release().unwrap();
    }
}

/// A child forked while its parent's waiting thread waits has no such
/// thread: its timed wait starts its own, and takes the lock once the
/// parent releases it.
#[test]
fn a_forked_child_never_waits_on_its_parents_thread() {
    for (kind, make) in kinds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lock");
        let holder = make(&path).lock().unwrap();
        let err = make(&path)
            .lock_timeout(Duration::from_millis(20))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TimedOut, "{kind}: {err}");
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the child only calls into the library and leaves by
        // _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let mut b = 0u8;
            // SAFETY: reads one byte into `b`.
            unsafe { libc::read(fds[0], (&raw mut b).cast(), 1) };
            let took = make(&path).lock_timeout(LONG);
            let code = match took {
                Ok(g) => i32::from(g.release().is_err()),
                Err(e) if e.kind() == ErrorKind::TimedOut => 2,
                Err(_) => 3,
            };
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(code) }
        }
        holder.release().unwrap();
        // SAFETY: writes one byte from a valid buffer.
        assert_eq!(unsafe { libc::write(fds[1], b"x".as_ptr().cast(), 1) }, 1);
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer; `pid` is our child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "{kind}: child status {status}");
        assert_eq!(libc::WEXITSTATUS(status), 0, "{kind}: the child's wait");
        // SAFETY: closes the pipe's two ends, ours.
        unsafe { libc::close(fds[0]) };
        // SAFETY: as above.
        unsafe { libc::close(fds[1]) };
    }
}

/// A shared timed wait is handed a shared lock: two readers hold it
/// together once the writer is gone, and a writer's timed wait waits for
/// both.
#[test]
fn shared_timed_waits_share() {
    for (kind, make) in kinds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lock");
        let writer = make(&path).lock().unwrap();
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || make(&path).lock_shared_timeout(LONG).unwrap())
            })
            .collect();
        writer.release().unwrap();
        let guards: Vec<_> = readers.into_iter().map(|r| r.join().unwrap()).collect();
        let err = make(&path)
            .lock_timeout(Duration::from_millis(20))
            .unwrap_err();
        assert_eq!(
            err.kind(),
            ErrorKind::TimedOut,
            "{kind}: a writer among readers"
        );
        drop(guards);
        make(&path).lock_timeout(LONG).unwrap().release().unwrap();
    }
}
