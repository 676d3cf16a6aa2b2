//! The one seam between the facade and the thread primitives it
//! synchronises with: every mutex, condition variable, atomic, channel,
//! thread and thread-local of the facade comes from here. Built with
//! `--cfg swaplock_model`, they are the shuttle model checker's, so that
//! `src/model.rs` explores the interleavings of the facade's threads (as
//! tokio keeps loom behind one module); otherwise they are `std`'s,
//! re-exported unchanged. (`Arc`, `Weak`, `Once` and `OnceLock` are `std`'s
//! either way: they never block a thread of the model.) So are the clock
//! and the pauses of the facade's timed waits ([`now`], `wait_timeout`,
//! [`wait_timeout_while`]), and, with the `tokio` feature, the async
//! waits' timer and runtime check (`time`). This module uses nothing
//! else of the crate.

#[cfg(not(swaplock_model))]
pub(crate) use std::{
    sync::{atomic, Condvar, Mutex, MutexGuard, PoisonError},
    thread, thread_local,
};

#[cfg(swaplock_model)]
pub(crate) use shuttle::{
    sync::{atomic, Condvar, Mutex, MutexGuard, PoisonError},
    thread, thread_local,
};

/// Channels: the etcd backend's, and tests'.
#[cfg(all(any(feature = "etcd", test), not(swaplock_model)))]
pub(crate) use std::sync::mpsc;

#[cfg(all(feature = "etcd", swaplock_model))]
pub(crate) use shuttle::sync::mpsc;

/// A point before a syscall whose order against other threads matters (a
/// close, a lock call), where the model checker may run another thread:
/// between two shuttle operations it runs none, and a race between an
/// unlocked check and a syscall would stay out of its sight. Nothing
/// outside the model.
#[cfg(unix)]
#[inline(always)]
pub(crate) fn syscall() {
    #[cfg(swaplock_model)]
    thread::yield_now();
}

/// Takes a mutex of one lock or guard (not a process-wide list), whatever
/// a panicking holder left.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A value a lock object computes once and then reads without a lock (its
/// canonical path, its shared state), set by one compare-and-swap of a
/// pointer: the first to publish wins, and the others get theirs back.
/// Not a `OnceLock`, whose `set` stores under a `Once`: a child forked
/// while another thread was inside that store finds the `Once` running
/// for good, and waits forever at its own `set`. (The standard library's
/// atomic, as the `OnceLock` was, under the model too: lock objects are
/// made and dropped outside its runs.)
pub(crate) struct Published<T> {
    value: std::sync::atomic::AtomicPtr<T>,
}

impl<T> Published<T> {
    /// Nothing published yet.
    pub(crate) fn new() -> Self {
        Published {
            value: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The value published, if any.
    pub(crate) fn get(&self) -> Option<&T> {
        let value = self.value.load(std::sync::atomic::Ordering::Acquire);
        // SAFETY: a published value is a `Box` leaked by `set`, freed only
        // by `drop`, which no borrow of `self` outlives.
        unsafe { value.as_ref() }
    }

    /// Publishes `value` unless one is published already (then `value`
    /// comes back).
    pub(crate) fn set(&self, value: T) -> Result<(), T> {
        let boxed = Box::into_raw(Box::new(value));
        match self.value.compare_exchange(
            std::ptr::null_mut(),
            boxed,
            std::sync::atomic::Ordering::AcqRel,
            std::sync::atomic::Ordering::Acquire,
        ) {
            Ok(_) => Ok(()),
            // SAFETY: `boxed` was not published: it is still only ours.
            Err(_) => Err(*unsafe { Box::from_raw(boxed) }),
        }
    }
}

impl<T> Drop for Published<T> {
    fn drop(&mut self) {
        let value = *self.value.get_mut();
        if !value.is_null() {
            // SAFETY: the `Box` `set` published, freed once, here.
            drop(unsafe { Box::from_raw(value) });
        }
    }
}

impl<T> std::fmt::Debug for Published<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.get().is_some() {
            "Published(..)"
        } else {
            "Published(none)"
        })
    }
}

// SAFETY: it hands out `&T` to every thread (`Sync` needed) and moves a
// `T` between threads at `set` and `drop` (`Send` needed), as `OnceLock`.
unsafe impl<T: Send + Sync> Sync for Published<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Published<T> {}

/// The monotonic clock of the kernel locks' deadline waits. Under the
/// model it runs ahead by the time the model's timed waits let pass
/// (`wait_timeout`, [`wait_timeout_while`], `time::sleep`).
pub(crate) fn now() -> std::time::Instant {
    let now = std::time::Instant::now();
    #[cfg(swaplock_model)]
    let now = now + ahead();
    now
}

/// Waits on `changed` until notified or `timeout` passes, whatever a
/// panicking holder of the mutex left. Shuttle's timed wait never times
/// out; under the model, once a test asks for it
/// (`model::timeouts`), every timed wait lets another thread run
/// and then ends, the clock ([`now`]) moved on by `timeout`.
pub(crate) fn wait_timeout<'a, T>(
    changed: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: std::time::Duration,
) -> MutexGuard<'a, T> {
    #[cfg(swaplock_model)]
    if model::TIMEOUTS.with(std::cell::Cell::get) {
        thread::yield_now();
        model::AHEAD.with(|ahead| ahead.set(ahead.get() + timeout));
        return guard;
    }
    changed
        .wait_timeout(guard, timeout)
        .unwrap_or_else(PoisonError::into_inner)
        .0
}

/// Waits on `changed` while `condition` holds, until `timeout` passes,
/// whatever a panicking holder of the mutex left: a soft wait's pause.
/// Under the model, once a test asks for timeouts (`model::timeouts`), a
/// wait whose condition holds lets another thread run and then ends, as
/// `wait_timeout` does, the clock ([`now`]) moved on by `timeout`.
pub(crate) fn wait_timeout_while<'a, T>(
    changed: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: std::time::Duration,
    condition: impl FnMut(&mut T) -> bool,
) -> MutexGuard<'a, T> {
    #[cfg(swaplock_model)]
    if model::TIMEOUTS.with(std::cell::Cell::get) {
        let (mut guard, mut condition) = (guard, condition);
        if condition(&mut guard) {
            thread::yield_now();
            model::AHEAD.with(|ahead| ahead.set(ahead.get() + timeout));
        }
        return guard;
    }
    changed
        .wait_timeout_while(guard, timeout, condition)
        .unwrap_or_else(PoisonError::into_inner)
        .0
}

/// How far the model's clock has run ahead of the system's, by the time
/// its timed waits let pass: a wait that reads the adapter's clock (a
/// soft lock's, through the core) adds what it ran ahead since the wait
/// began.
#[cfg(swaplock_model)]
pub(crate) fn ahead() -> std::time::Duration {
    model::AHEAD.with(std::cell::Cell::get)
}

/// A wait in the kernel's `poll` for what an inotify watch or its bell
/// reports, as the model makes it: the blocking call would stop the
/// model's single thread, so the wait is a loop of looks that never block
/// (`ready`: whether an event came, consumed), another thread run between
/// them, which ends, as the call does, once one came. A wake-up that never
/// comes fails the run at the model's step limit. Once the test asks for
/// timeouts (`model::timeouts`), the pause ends after one other thread
/// ran, the clock moved on by `pause`.
#[cfg(all(swaplock_model, any(target_os = "linux", target_os = "android")))]
pub(crate) fn poll_until(mut ready: impl FnMut() -> bool, pause: std::time::Duration) {
    while !ready() {
        thread::yield_now();
        if model::TIMEOUTS.with(std::cell::Cell::get) {
            model::AHEAD.with(|ahead| ahead.set(ahead.get() + pause));
            return;
        }
    }
}

/// The async waits' timer and runtime (feature `tokio`), beside the
/// threads' primitives: tokio's, re-exported unchanged; under the model,
/// the model's, since its tasks run on shuttle's executor, with no tokio
/// runtime. There a [`sleep`](time::sleep) never ends, as the model's
/// pauses never time out (a wake-up that never comes is a deadlock it
/// reports), unless the test asks for timeouts (`model::timeouts`): then it
/// lets another task run and ends, the clock ([`now`]) moved on by its
/// length. (The inotify watch's async wait takes tokio's timer and reactor
/// directly outside the model, and has a version of its own inside it.)
#[cfg(feature = "tokio")]
pub(crate) mod time {
    #[cfg(not(swaplock_model))]
    pub(crate) use tokio::time::{sleep, Sleep};

    /// Whether the caller runs in a tokio runtime.
    #[cfg(not(swaplock_model))]
    pub(crate) fn in_runtime() -> bool {
        tokio::runtime::Handle::try_current().is_ok()
    }

    /// Under the model: in a task of shuttle's executor, always.
    #[cfg(swaplock_model)]
    pub(crate) fn in_runtime() -> bool {
        true
    }

    /// [`poll_until`](super::poll_until), for a task: the looks are its
    /// polls, other tasks and threads run between them.
    #[cfg(all(swaplock_model, any(target_os = "linux", target_os = "android")))]
    pub(crate) async fn poll_until(mut ready: impl FnMut() -> bool, pause: std::time::Duration) {
        while !ready() {
            shuttle::future::yield_now().await;
            if super::model::TIMEOUTS.with(std::cell::Cell::get) {
                super::model::AHEAD.with(|ahead| ahead.set(ahead.get() + pause));
                return;
            }
        }
    }

    /// A pause of the model; see [`time`](self).
    #[cfg(swaplock_model)]
    pub(crate) struct Sleep(std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>);

    #[cfg(swaplock_model)]
    pub(crate) fn sleep(pause: std::time::Duration) -> Sleep {
        Sleep(Box::pin(async move {
            if !super::model::TIMEOUTS.with(std::cell::Cell::get) {
                return std::future::pending().await;
            }
            // Another task may run first.
            shuttle::future::yield_now().await;
            super::model::AHEAD.with(|ahead| ahead.set(ahead.get() + pause));
        }))
    }

    #[cfg(swaplock_model)]
    impl std::future::Future for Sleep {
        type Output = ();

        fn poll(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<()> {
            self.0.as_mut().poll(cx)
        }
    }
}

/// What a test of the model sets and sees: its clock, whether its timed
/// waits time out, whether its soft waits watch their lock path, how many
/// of its threads block in a kernel lock call.
/// Shuttle runs the threads of one test on the test's own thread, so a
/// `std` thread-local is one value for all of them and none of another
/// test's.
#[cfg(swaplock_model)]
pub(crate) mod model {
    use std::cell::Cell;
    use std::time::Duration;

    std::thread_local! {
        pub(super) static AHEAD: Cell<Duration> = const { Cell::new(Duration::ZERO) };
        pub(super) static TIMEOUTS: Cell<bool> = const { Cell::new(false) };
        static BLOCKED: Cell<usize> = const { Cell::new(0) };
        static WATCHES: Cell<bool> = const { Cell::new(false) };
    }

    /// Whether this test's soft waits watch their lock path with inotify
    /// (`src/soft/wake.rs`) rather than wait on the release condition
    /// variable, the way they take on Linux outside the model.
    pub(crate) fn watches(on: bool) {
        WATCHES.with(|w| w.set(on));
    }

    /// See [`watches`].
    pub(crate) fn watching() -> bool {
        WATCHES.with(Cell::get)
    }

    /// How many waiting threads the host queue of soft waiters started
    /// (`src/soft/queue.rs`), in every run so far: a counter of the
    /// process, not of the model, so that a test sees its runs queue some
    /// waiter behind a head.
    static QUEUE_STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    /// The host queue started a waiting thread.
    pub(crate) fn queue_thread_started() {
        QUEUE_STARTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// How many pauses a member behind the head of a host queue let go by
    /// without an attempt, the queue served meanwhile, in every run so far.
    static QUEUE_SKIPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    /// A member behind the head let a pause go by (`src/soft/wait.rs`).
    pub(crate) fn queue_pause_skipped() {
        QUEUE_SKIPPED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// See [`queue_pause_skipped`].
    pub(crate) fn queue_pauses_skipped() -> usize {
        QUEUE_SKIPPED.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many waits that joined the queue before their first attempt
    /// (their batch of turns spent) let a pause go by, the queue served
    /// meanwhile, in every run so far.
    static QUEUE_FIRST_SKIPPED: std::sync::atomic::AtomicUsize =
        std::sync::atomic::AtomicUsize::new(0);

    /// A wait that joined first let a pause go by (`src/soft/wait.rs`).
    pub(crate) fn queue_first_pause_skipped() {
        QUEUE_FIRST_SKIPPED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// See [`queue_first_pause_skipped`].
    pub(crate) fn queue_first_pauses_skipped() -> usize {
        QUEUE_FIRST_SKIPPED.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many waits whose queue turn came as a member ahead took the
    /// lock watched for it to leave instead of attempting, in every run so
    /// far.
    static QUEUE_TURNS_WATCHED: std::sync::atomic::AtomicUsize =
        std::sync::atomic::AtomicUsize::new(0);

    /// A turn after a take was watched (`src/soft/wait.rs`).
    pub(crate) fn queue_turn_watched() {
        QUEUE_TURNS_WATCHED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// See [`queue_turn_watched`].
    pub(crate) fn queue_turns_watched() -> usize {
        QUEUE_TURNS_WATCHED.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// See [`queue_thread_started`].
    pub(crate) fn queue_threads_started() -> usize {
        QUEUE_STARTED.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many threads are in a waiting lock call and have found the lock
    /// taken (`src/kernel/inodes.rs`'s `lock_call`).
    pub(crate) fn blocked() -> usize {
        BLOCKED.with(Cell::get)
    }

    /// A thread's waiting lock call found the lock taken (`by` 1), or ended
    /// after that (`by` -1).
    pub(crate) fn block(by: isize) {
        BLOCKED.with(|b| b.set(b.get().wrapping_add_signed(by)));
    }

    /// Whether this test's timed waits time out (see
    /// [`wait_timeout`](super::wait_timeout)).
    pub(crate) fn timeouts(on: bool) {
        TIMEOUTS.with(|t| t.set(on));
    }
}

#[cfg(all(test, not(swaplock_model)))]
mod tests {
    use super::Published;
    use std::sync::Arc;

    /// The first value published stays; a later one comes back; every
    /// value is dropped once (the published one with the cell).
    #[test]
    fn the_first_value_published_stays_and_each_is_dropped_once() {
        let first = Arc::new(1);
        let second = Arc::new(2);
        let cell = Published::new();
        assert!(cell.get().is_none());
        assert!(cell.set(Arc::clone(&first)).is_ok());
        let back = cell.set(Arc::clone(&second)).unwrap_err();
        assert_eq!(*back, 2);
        drop(back);
        assert_eq!(cell.get().map(|v| **v), Some(1));
        assert_eq!(Arc::strong_count(&first), 2);
        assert_eq!(Arc::strong_count(&second), 1);
        drop(cell);
        assert_eq!(Arc::strong_count(&first), 1);
    }

    /// Threads racing to publish agree on one value.
    #[test]
    fn racing_threads_read_the_one_value_published() {
        let cell = Arc::new(Published::new());
        let seen: Vec<usize> = (0..8)
            .map(|n| {
                let cell = Arc::clone(&cell);
                std::thread::spawn(move || {
                    let _ = cell.set(n);
                    *cell.get().unwrap()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        assert!(seen.iter().all(|&v| v == seen[0]), "{seen:?}");
    }
}
