//! The facade's thread-level protocols under the shuttle model checker,
//! as the library's own tests (`cargo test --lib` with `--cfg
//! swaplock_model`; scripts/test runs them so): the library's mutexes,
//! condition variables, atomics and threads are then shuttle's
//! ([`crate::sync`]), and each test below runs many times, each time in
//! another interleaving of its threads that the scheduler picks (random
//! and PCT schedules, from fixed seeds, so that a rerun of the test
//! reproduces a failure). The files are real, in a directory of each run's
//! own. The model's pauses never time out: a wake-up that never comes is a
//! deadlock it reports. With the `tokio` feature, the async waits'
//! tasks run on shuttle's executor beside the threads
//! ([`asynchronous`]), their timer the model's too. Soft waits take the
//! release condition variable's way unless a test turns Linux's inotify
//! watch on (`watch`).
//!
//! Each test states a promise; eleven name the defect they would have
//! caught (nine of round 2, two of them in the async waits; two of one of
//! round 3, in its two orders): with that fix undone, the test fails.

#[cfg(feature = "tokio")]
mod asynchronous;
#[cfg(any(target_os = "linux", target_os = "android"))]
mod queue;
#[cfg(any(target_os = "linux", target_os = "android"))]
mod watch;

use crate::SoftLock;
use shuttle::scheduler::{PctScheduler, RandomScheduler};
use shuttle::sync::atomic::{AtomicUsize, Ordering};
use shuttle::{thread, Config, Runner};
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Runs `test` under `schedules` random schedules and as many PCT ones
/// (depth 3), from fixed seeds. One test at a time in the process: the
/// library's process-wide lists are statics, which two explorations on
/// two test threads would share.
fn explore(schedules: usize, test: impl Fn() + Send + Sync + 'static) {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Kernel locks as where the kernel has no open file description locks
    // (read at the first lock file opened): see `kernel` below.
    std::env::set_var("SWAPLOCK_FCNTL_OFD", "0");
    let test = Arc::new(test);
    let t = Arc::clone(&test);
    // Each modelled thread's stack: shuttle's default (32 KiB) is less than
    // an unoptimised build of an async soft wait takes (a real thread has
    // 2 MiB; the host queue's, 64 KiB, runs none of it).
    let mut config = Config::new();
    config.stack_size = 256 * 1024;
    Runner::new(RandomScheduler::new_from_seed(1, schedules), config.clone()).run(move || t());
    Runner::new(PctScheduler::new_from_seed(7, 3, schedules), config).run(move || test());
}

/// Who is inside a critical section: the promise is that this is never
/// more than one.
#[derive(Default)]
struct Inside(AtomicUsize);

impl Inside {
    fn enter(&self) {
        let before = self.0.fetch_add(1, Ordering::SeqCst);
        assert_eq!(before, 0, "two holders");
        // A point where another thread may run while this one holds.
        thread::yield_now();
    }

    fn leave(&self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Runs `turn` on three threads at once, each with its index, the lock's
/// path and the count of who is inside, and waits for them all.
fn take_turns(path: &Arc<Path>, turn: impl Fn(usize, &Path, &Inside) + Send + Sync + 'static) {
    let inside = Arc::new(Inside::default());
    let turn = Arc::new(turn);
    let threads: Vec<_> = (0..3)
        .map(|i| {
            let (path, inside, turn) = (Arc::clone(path), Arc::clone(&inside), Arc::clone(&turn));
            thread::spawn(move || turn(i, &path, &inside))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// Threads that wait without a timeout for one soft lock (a release hands
/// the hold to one of them, or a poll finds it free) take turns: never two
/// holders, every thread gets the lock, and no waiter or file is left.
#[test]
fn soft_lock_threads_take_turns_and_leave_nothing() {
    explore(300, threads_take_turns_and_leave_nothing);
}

/// The body of [`soft_lock_threads_take_turns_and_leave_nothing`], one run.
fn threads_take_turns_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path: Arc<Path> = dir.path().join("a.lock").into();
    take_turns(&path, |_, path, inside| {
        let guard = SoftLock::marker(path).lock().unwrap();
        inside.enter();
        inside.leave();
        guard.release().unwrap();
    });
    assert!(!path.exists(), "the marker was left");
    assert_eq!(crate::soft::waiting_threads(&path), 0, "a waiter was left");
    // Nothing of theirs holds it: free to take at once.
    SoftLock::marker(&*path)
        .try_lock()
        .unwrap()
        .release()
        .unwrap();
}

/// Timed and untimed waits for one soft lock take turns: a timed wait
/// pauses on the model's clock (its pauses never end here, as the
/// untimed wait's do not), is handed holds as an untimed wait is, and
/// never two hold at once. Every thread gets the lock, and no waiter or
/// marker is left.
#[test]
fn timed_and_untimed_soft_waits_take_turns() {
    explore(300, || {
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = dir.path().join("a.lock").into();
        take_turns(&path, |i, path, inside| {
            let lock = SoftLock::marker(path);
            let guard = match i {
                0 => lock.lock().unwrap(),
                _ => lock.lock_timeout(Duration::from_secs(3600)).unwrap(),
            };
            inside.enter();
            inside.leave();
            guard.release().unwrap();
        });
        assert!(!path.exists(), "the marker was left");
        assert_eq!(crate::soft::waiting_threads(&path), 0, "a waiter was left");
    });
}

/// With the model's timed waits timing out, a timed soft wait gives up
/// beside an untimed one, after as many pauses as its timeout holds polls
/// (its clock the model's, [`crate::sync::ahead`]), whatever the holder and
/// the untimed wait do meanwhile: it fails with `TimedOut` and holds
/// nothing, or was handed the hold as it gave up and returns it; the
/// untimed wait gets the lock; no two hold at once; and no waiter or
/// marker is left.
#[test]
fn a_timed_soft_wait_that_gives_up_leaves_no_waiter_and_holds_nothing() {
    // How many runs the timed wait gave up in: some must.
    static GAVE_UP: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    explore(300, || {
        crate::sync::model::timeouts(true);
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = dir.path().join("a.lock").into();
        let inside = Arc::new(Inside::default());
        let holder = {
            let inside = Arc::clone(&inside);
            held_elsewhere_then(&path, 2, move || {
                inside.enter();
                inside.leave();
            })
        };
        let untimed = {
            let (path, inside) = (Arc::clone(&path), Arc::clone(&inside));
            thread::spawn(move || {
                let guard = SoftLock::marker(&*path).lock().unwrap();
                inside.enter();
                // Held a while: the timed wait, queued behind this one
                // and served meanwhile, lets its pauses go by without an
                // attempt (PROTOCOL 7.20) and may reach its deadline here.
                for _ in 0..3 {
                    thread::yield_now();
                }
                inside.leave();
                guard.release().unwrap();
            })
        };
        // An hour, polled every twenty minutes: only the model's clock
        // comes that far.
        let timed = SoftLock::marker(&*path).poll_interval(Duration::from_secs(1200));
        match timed.lock_timeout(Duration::from_secs(3600)) {
            Ok(guard) => {
                inside.enter();
                inside.leave();
                guard.release().unwrap();
            }
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
                GAVE_UP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        holder.join().unwrap();
        untimed.join().unwrap();
        assert_eq!(crate::soft::waiting_threads(&path), 0, "a waiter was left");
        assert!(!path.exists(), "the marker was left");
        // Nothing of the timed wait holds it: free to take at once.
        SoftLock::marker(&*path)
            .try_lock()
            .unwrap()
            .release()
            .unwrap();
        crate::sync::model::timeouts(false);
    });
    let gave_up = GAVE_UP.load(std::sync::atomic::Ordering::Relaxed);
    assert!(gave_up > 0, "no timed wait gave up");
}

/// A thread that holds a soft lock and waits for it again, with no
/// timeout, through another lock object, gets `Deadlock`, whatever the
/// other threads do meanwhile; a thread that does not hold it waits.
#[test]
fn a_soft_lock_held_by_this_thread_is_a_deadlock_error() {
    explore(200, || {
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = dir.path().join("a.lock").into();
        let other = {
            let path = Arc::clone(&path);
            thread::spawn(move || {
                let guard = SoftLock::marker(&*path).lock().unwrap();
                guard.release().unwrap();
            })
        };
        let guard = SoftLock::marker(&*path).lock().unwrap();
        let e = SoftLock::marker(&*path).lock().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Deadlock, "{e}");
        guard.release().unwrap();
        other.join().unwrap();
        assert!(!path.exists());
    });
}

/// A thread that takes the soft lock of `path`, and lets it go after
/// `yields` points where others may run; returned once it holds.
fn held_elsewhere(path: &Arc<Path>, yields: usize) -> thread::JoinHandle<()> {
    held_elsewhere_then(path, yields, || {})
}

/// [`held_elsewhere`], the thread running `holding` first as it holds.
fn held_elsewhere_then(
    path: &Arc<Path>,
    yields: usize,
    holding: impl FnOnce() + Send + 'static,
) -> thread::JoinHandle<()> {
    let held = Arc::new(AtomicUsize::new(0));
    let holder = {
        let (path, held) = (Arc::clone(path), Arc::clone(&held));
        thread::spawn(move || {
            let guard = SoftLock::marker(&*path).lock().unwrap();
            held.store(1, Ordering::SeqCst);
            holding();
            for _ in 0..yields {
                thread::yield_now();
            }
            guard.release().unwrap();
        })
    };
    while held.load(Ordering::SeqCst) == 0 {
        thread::yield_now();
    }
    holder
}

/// A release by another thread while the waiting thread's hook runs ends
/// the wait: the wait must not count it as the hook's own and sleep on,
/// with no further release to wake it (round 2's lost release; the model's
/// pauses never time out, so a lost wake-up is a deadlock it reports).
#[test]
fn a_release_while_the_hook_runs_is_not_lost() {
    explore(300, release_while_the_hook_runs);
}

/// The body of [`a_release_while_the_hook_runs_is_not_lost`], one run.
fn release_while_the_hook_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path: Arc<Path> = dir.path().join("a.lock").into();
    let holder = held_elsewhere(&path, 1);
    let guard = SoftLock::marker(&*path)
        .lock_with(None, |_| {
            thread::yield_now();
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
    guard.release().unwrap();
    holder.join().unwrap();
    assert!(!path.exists());
}

/// A thread that takes and lets go another soft lock: a release of this
/// process, which wakes every soft wait to look again.
fn release_another(dir: &Path) -> thread::JoinHandle<()> {
    let other = dir.join("other.lock");
    thread::spawn(move || SoftLock::marker(&other).lock().unwrap().release().unwrap())
}

/// How a hook ends the wait at its second call.
#[derive(Clone, Copy)]
enum Ends {
    Cancels,
    Panics,
}

/// A wait whose hook ends it (at its second call, after a release elsewhere
/// woke the wait) holds nothing afterwards, even when the holder handed it
/// its hold while the hook ran: the acquire fails (`Interrupted`, or the
/// hook's panic), no waiter is left, and the lock is free. (Round 2: a
/// panicking hook left its wait among the waiters and wedged the lock, and
/// a cancel after a hand-over returned the lock.)
fn a_hook_that_ends_the_wait_leaves_nothing(ends: Ends) {
    explore(300, move || {
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = dir.path().join("a.lock").into();
        let holder = held_elsewhere(&path, 1);
        let waker = release_another(dir.path());
        let calls = AtomicUsize::new(0);
        let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            SoftLock::marker(&*path).lock_with(None, |_| {
                if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    return std::ops::ControlFlow::Continue(());
                }
                // The holder may hand its hold over now.
                thread::yield_now();
                match ends {
                    Ends::Cancels => std::ops::ControlFlow::Break(()),
                    Ends::Panics => panic!("the hook's own panic"),
                }
            })
        }));
        let ended = calls.load(Ordering::SeqCst) >= 2;
        match waited {
            Ok(Ok(guard)) => {
                assert!(!ended, "the wait was ended, yet holds the lock");
                guard.release().unwrap();
            }
            Ok(Err(e)) => {
                assert!(matches!(ends, Ends::Cancels) && ended, "{e}");
                assert_eq!(e.kind(), ErrorKind::Interrupted, "{e}");
            }
            Err(_) => assert!(matches!(ends, Ends::Panics) && ended),
        }
        holder.join().unwrap();
        waker.join().unwrap();
        assert_eq!(crate::soft::waiting_threads(&path), 0, "a waiter was left");
        // Free: nothing of the ended wait holds it.
        SoftLock::marker(&*path)
            .try_lock()
            .unwrap()
            .release()
            .unwrap();
        assert!(!path.exists());
    });
}

#[test]
fn a_hook_that_cancels_after_a_hand_over_holds_nothing() {
    a_hook_that_ends_the_wait_leaves_nothing(Ends::Cancels);
}

#[test]
fn a_hook_that_panics_leaves_no_waiter_and_no_hold() {
    a_hook_that_ends_the_wait_leaves_nothing(Ends::Panics);
}

/// A hook that takes and lets go another soft lock does not make the wait
/// look again for that release of its own: with no other release, the
/// wait calls the hook once per release that could have freed the lock.
/// (Round 2: the hook's own release woke its wait at once, which spun.)
#[test]
fn a_hooks_own_release_does_not_wake_its_wait() {
    explore(300, hooks_own_release);
}

/// The body of [`a_hooks_own_release_does_not_wake_its_wait`], one run.
fn hooks_own_release() {
    let dir = tempfile::tempdir().unwrap();
    let path: Arc<Path> = dir.path().join("a.lock").into();
    let other = dir.path().join("other.lock");
    // Lets the waiter run its hook as often as it would.
    let holder = held_elsewhere(&path, 4);
    let calls = AtomicUsize::new(0);
    let guard = SoftLock::marker(&*path)
        .lock_with(None, |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            SoftLock::marker(&other).lock().unwrap().release().unwrap();
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
    // The first busy attempt's call, and at most one more: after the
    // holder's release, when it came as the hook ran.
    let calls = calls.load(Ordering::SeqCst);
    assert!(calls <= 2, "the hook ran {calls} times for one release");
    guard.release().unwrap();
    holder.join().unwrap();
}

/// Kernel locks' thread registry: where the kernel has no open file
/// description locks, a classic `fcntl` lock is the process's, and closing
/// any descriptor of the file releases it; the registry
/// (src/kernel/inodes.rs) makes the process's threads exclude each other
/// and keeps every close from releasing a lock a guard holds. The runs
/// force that case (`SWAPLOCK_FCNTL_OFD=0`, as a kernel before 3.15 would)
/// on Linux, where an open file description lock's query sees the
/// process's classic lock: the test asks the kernel itself whether the
/// lock is still held.
#[cfg(target_os = "linux")]
mod kernel {
    use super::{explore, Inside};
    use crate::FileLock;
    use shuttle::thread;
    use std::fs::File;
    use std::io::ErrorKind;
    use std::os::fd::AsRawFd;
    use std::path::Path;
    use std::sync::Arc;

    /// Whether the kernel has a write lock on byte 0 of the file `probe` is
    /// open on: the query of an open file description lock conflicts with a
    /// classic lock even of its own process. (The probe's descriptor stays
    /// open for the whole run: its close would release the lock.)
    fn kernel_locked(probe: &File) -> bool {
        // SAFETY: an all-zero `flock` is a valid value of the plain C struct.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_WRLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_len = 1;
        // SAFETY: `fl` is a valid `flock` for the call to fill in, and the
        // descriptor is open for the call's length.
        let r = unsafe { libc::fcntl(probe.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) };
        assert_eq!(r, 0, "F_OFD_GETLK: {}", std::io::Error::last_os_error());
        fl.l_type != libc::F_UNLCK as libc::c_short
    }

    /// Holds the lock of `path` for a moment, checking that the kernel holds
    /// it for the process throughout and that no other guard holds it.
    fn hold(lock: &FileLock, probe: &File, inside: &Inside) {
        let guard = lock.lock().unwrap();
        inside.enter();
        assert!(kernel_locked(probe), "held, but not in the kernel");
        thread::yield_now();
        assert!(kernel_locked(probe), "a close released a held lock");
        inside.leave();
        guard.release().unwrap();
    }

    /// Threads take turns at a classic lock while another takes the file's
    /// `flock` lock, asks who holds the classic one and tries it, opening and
    /// closing the file meanwhile: never two guards at once, and while one
    /// holds the lock, no other thread's close releases it in the kernel.
    /// (Round 2: an `flock` guard's close released the process's classic lock,
    /// and a query's close raced a lock's registration.)
    #[test]
    fn no_close_of_another_thread_releases_a_held_classic_lock() {
        explore(300, || {
            let dir = tempfile::tempdir().unwrap();
            let path: Arc<Path> = dir.path().join("a.lock").into();
            File::create(&*path).unwrap();
            let probe = Arc::new(File::open(&*path).unwrap());
            let inside = Arc::new(Inside::default());
            let holders: Vec<_> = (0..2)
                .map(|_| {
                    let (path, probe, inside) =
                        (Arc::clone(&path), Arc::clone(&probe), Arc::clone(&inside));
                    thread::spawn(move || hold(&FileLock::new(&*path), &probe, &inside))
                })
                .collect();
            // An flock lock of the file never meets the fcntl one on Linux: its
            // close must not release the classic lock either.
            let flock = FileLock::flock(&*path).try_lock().unwrap();
            flock.release().unwrap();
            let lock = FileLock::new(&*path);
            lock.holder().unwrap();
            match lock.try_lock() {
                Ok(guard) => {
                    inside.enter();
                    assert!(kernel_locked(&probe));
                    inside.leave();
                    guard.release().unwrap();
                }
                Err(e) => assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}"),
            }
            lock.holder().unwrap();
            for h in holders {
                h.join().unwrap();
            }
            assert!(!kernel_locked(&probe), "released by all, yet held");
            // Nor does the registry keep an entry of theirs: free to take.
            FileLock::new(&*path).try_lock().unwrap().release().unwrap();
        });
    }

    /// A thread that holds the lock and waits for it again, with no
    /// timeout, through another lock object, gets `Deadlock`, whatever the
    /// other thread does meanwhile; that one waits its turn.
    #[test]
    fn a_kernel_lock_held_by_this_thread_is_a_deadlock_error() {
        explore(200, || {
            let dir = tempfile::tempdir().unwrap();
            let path: Arc<Path> = dir.path().join("a.lock").into();
            let other = {
                let path = Arc::clone(&path);
                thread::spawn(move || FileLock::new(&*path).lock().unwrap().release().unwrap())
            };
            let guard = FileLock::new(&*path).lock().unwrap();
            let e = FileLock::new(&*path).lock().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Deadlock, "{e}");
            guard.release().unwrap();
            other.join().unwrap();
        });
    }
}

/// The fork handlers: a thread that forks takes every list's mutex in
/// `prepare` and lets them go in `resume`, while other threads take and
/// release soft and kernel locks, which go through those lists. The
/// promise is that no code holds one list's mutex while it takes another
/// (`atfork.rs`): otherwise `prepare`, taking them in its own order, and
/// such a thread would wait for each other, a deadlock the model reports.
/// Each fork also finds every list free to take once `resume` has run.
#[cfg(unix)]
#[test]
fn a_fork_meanwhile_never_waits_for_a_list_held_by_another_thread() {
    explore(300, || {
        let dir = tempfile::tempdir().unwrap();
        let soft: Arc<Path> = dir.path().join("s.lock").into();
        let kernel: Arc<Path> = dir.path().join("k.lock").into();
        let users: Vec<_> = (0..2)
            .map(|i| {
                let (soft, kernel) = (Arc::clone(&soft), Arc::clone(&kernel));
                thread::spawn(move || {
                    let guard = SoftLock::marker(&*soft).reentrant(i == 1).lock().unwrap();
                    let held = crate::FileLock::new(&*kernel).lock().unwrap();
                    held.release().unwrap();
                    guard.release().unwrap();
                })
            })
            .collect();
        for _ in 0..2 {
            crate::atfork::prepare();
            thread::yield_now();
            crate::atfork::resume();
        }
        for u in users {
            u.join().unwrap();
        }
        assert!(!soft.exists());
        SoftLock::marker(&*soft)
            .try_lock()
            .unwrap()
            .release()
            .unwrap();
        crate::FileLock::new(&*kernel)
            .try_lock()
            .unwrap()
            .release()
            .unwrap();
    });
}

/// Timed waits for an `flock` lock wait in the kernel on a waiting thread
/// that hands the lock over (src/kernel/wait.rs); under the model the
/// kernel's blocking call is a loop of attempts. Threads that take turns
/// by `lock` and `lock_timeout` never hold it two at once, all get it, and
/// no waiting thread is left once the last has let go.
#[cfg(unix)]
#[test]
fn timed_kernel_waits_take_turns_and_leave_no_waiting_thread() {
    explore(300, || {
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = dir.path().join("a.lock").into();
        take_turns(&path, |i, path, inside| {
            let lock = crate::FileLock::flock(path);
            let guard = match i {
                0 => lock.lock().unwrap(),
                _ => lock.lock_timeout(Duration::from_secs(3600)).unwrap(),
            };
            inside.enter();
            inside.leave();
            guard.release().unwrap();
        });
        assert_eq!(
            crate::kernel::wait::waiting_threads(),
            0,
            "a waiting thread was left"
        );
        crate::FileLock::flock(&*path)
            .try_lock()
            .unwrap()
            .release()
            .unwrap();
    });
}

/// With the model's timed waits timing out: takes the `flock` lock of
/// `path`, and lets a timed wait for it give up, which leaves its waiting
/// thread behind; the hold.
#[cfg(unix)]
fn left_behind(path: &Path) -> crate::FileLockGuard {
    crate::sync::model::timeouts(true);
    let first = crate::FileLock::flock(path).try_lock().unwrap();
    let e = crate::FileLock::flock(path)
        .lock_timeout(Duration::from_secs(3600))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
    first
}

/// A timed wait that gives up leaves its waiting thread blocked in the
/// kernel. A later untimed wait of the process for the same lock is handed
/// the lock by that thread rather than blocking beside it: once it lets
/// go, no thread of the process takes the lock for nobody, and the lock is
/// free at once. The model's timed waits time out here
/// ([`crate::sync::wait_timeout`]). (Round 3: `lock` blocked beside the
/// thread, which could take the lock after its hold and keep a
/// `try_lock` out, seen in tests/kernel_threads.rs under qemu-aarch64.)
#[cfg(unix)]
#[test]
fn an_untimed_wait_is_handed_the_lock_by_a_waiting_thread_left_behind() {
    explore(300, || {
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = dir.path().join("a.lock").into();
        let first = left_behind(&path);
        // Its waiting thread waits on in the kernel (unless the wait gave
        // up before the thread's first open, and it left).
        while crate::kernel::wait::waiting_threads() == 1 && crate::sync::model::blocked() == 0 {
            thread::yield_now();
        }
        let blocked = crate::sync::model::blocked();
        let waiter = {
            let path = Arc::clone(&path);
            thread::spawn(move || {
                let guard = crate::FileLock::flock(&*path).lock().unwrap();
                // Taken from the waiting thread, or after it left: none
                // waits on to take the lock once this hold ends.
                assert_eq!(
                    crate::kernel::wait::waiting_threads(),
                    0,
                    "a waiting thread waits beside this hold, for nobody"
                );
                guard.release().unwrap();
            })
        };
        // The waiter waits: beside the waiting thread in the kernel, or on
        // it.
        while crate::sync::model::blocked() == blocked && crate::kernel::wait::waiters() == 0 {
            thread::yield_now();
        }
        first.release().unwrap();
        waiter.join().unwrap();
        assert_eq!(
            crate::kernel::wait::waiting_threads(),
            0,
            "the waiting thread outlived the wait it was left for"
        );
        crate::FileLock::flock(&*path)
            .try_lock()
            .unwrap()
            .release()
            .unwrap();
        crate::sync::model::timeouts(false);
    });
}

/// The other order: an untimed wait waits first, and a timed wait for the
/// same lock gives up beside it. Both wait on one waiting thread, which
/// hands the lock to the untimed wait: none is left to take it afterwards.
#[cfg(unix)]
#[test]
fn a_timed_wait_that_gives_up_beside_an_untimed_one_leaves_no_thread() {
    explore(300, || {
        crate::sync::model::timeouts(true);
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = dir.path().join("a.lock").into();
        let first = crate::FileLock::flock(&*path).try_lock().unwrap();
        let waiter = {
            let path = Arc::clone(&path);
            thread::spawn(move || {
                let guard = crate::FileLock::flock(&*path).lock().unwrap();
                assert_eq!(
                    crate::kernel::wait::waiting_threads(),
                    0,
                    "a waiting thread waits beside this hold, for nobody"
                );
                guard.release().unwrap();
            })
        };
        // The untimed wait waits: on a waiting thread, or in the kernel.
        while crate::kernel::wait::waiters() == 0 && crate::sync::model::blocked() == 0 {
            thread::yield_now();
        }
        let e = crate::FileLock::flock(&*path)
            .lock_timeout(Duration::from_secs(3600))
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
        first.release().unwrap();
        waiter.join().unwrap();
        assert_eq!(crate::kernel::wait::waiting_threads(), 0);
        crate::FileLock::flock(&*path)
            .try_lock()
            .unwrap()
            .release()
            .unwrap();
        crate::sync::model::timeouts(false);
    });
}

/// A timed wait that gives up leaves its waiting thread blocked in the
/// kernel on the lock file. When the holder then removes that file, the
/// thread, granted the lock on the removed file, finds the path changed
/// and would open the path again, making a new lock file for nobody: it
/// opens it only while someone still waits, so the removed file stays
/// removed. (Round 2: a waiting thread made a removed lock file again.)
#[cfg(unix)]
#[test]
fn a_waiting_thread_left_behind_never_makes_a_removed_lock_file_again() {
    explore(300, || {
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = dir.path().join("a.lock").into();
        let first = left_behind(&path);
        first.remove().unwrap();
        while crate::kernel::wait::waiting_threads() != 0 {
            thread::yield_now();
        }
        assert!(
            !path.exists(),
            "a waiting thread left behind made the removed lock file again"
        );
        crate::sync::model::timeouts(false);
    });
}
