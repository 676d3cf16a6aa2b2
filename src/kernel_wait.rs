//! Timed waits for kernel locks, in the kernel.
//!
//! `fcntl` and `flock` have a blocking lock call (`F_OFD_SETLKW`,
//! `F_SETLKW`, `LOCK_EX`) but no timed one. Rather than poll, a timed wait
//! hands the blocking acquire to a *waiting thread*: it runs the core's
//! acquire loop in the kernel, on a descriptor of its own, and the waiter
//! sleeps on a condition variable until that thread reports or the
//! deadline passes. The lock, once taken, is the waiter's: an open file
//! description or `flock` lock belongs to the descriptor, which the waiting
//! thread hands over; a classic `fcntl` lock belongs to the process, which
//! both threads are. So the waiter returns as soon as the kernel grants the
//! lock, whoever released it and however (an unlock, a close, an exit).
//!
//! A waiter that gives up leaves its waiting thread blocked in the kernel:
//! nothing can interrupt that call but a signal, which a library must not
//! take over. The thread stays for that lock (path, kind and mode), and
//! the next timed wait for the same lock in this process waits on it
//! rather than starting another, so at most one such thread waits per lock
//! a process waits for. When the kernel grants it the lock and no waiter
//! is left, it releases the lock at once and ends.
//!
//! Where no thread can be started, or the kernel reports a deadlock
//! between processes (`EDEADLK`, classic locks only), the waiter polls for
//! the time left, as the core's [`Backoff`] says.
//!
//! [`Backoff`]: swaplock_core::kernel::Backoff

use crate::inodes::{self, Threads};
use crate::kernel::{kernel_os, Reached, Scope, SysPath};
use crate::soft::SoftLock;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Waker;
use std::time::Instant;
use swaplock_core::kernel::{self as protocol, Backoff, Outcome};
use swaplock_core::wait::Deadline;
use swaplock_core::Errno;

impl Reached {
    /// The core's outcome, on the operations that reached it.
    pub(crate) fn of<O: inodes::Calls>(
        kernel: &Threads<O>,
        outcome: Result<Outcome<OwnedFd>, (protocol::Step, Errno)>,
    ) -> Self {
        match outcome {
            Ok(Outcome::Held(fd, id)) => Reached::Held(kernel.guard_fd(fd), id),
            Ok(Outcome::Busy(e)) => Reached::Busy(e),
            Ok(Outcome::Unsupported { file, created }) => Reached::Unsupported(file, created),
            Err((step, e)) => Reached::Failed(step, e),
        }
    }
}

/// One lock, as a waiting thread acquires it: everything it needs, owned.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    pub(crate) path: Arc<Path>,
    pub(crate) sys_path: Arc<SysPath>,
    pub(crate) follow: bool,
    pub(crate) mode: u32,
    pub(crate) scope: Scope,
    pub(crate) may_fall_back: bool,
}

impl Job {
    /// Whether a waiting thread for `other` takes this very lock.
    fn same(&self, other: &Job) -> bool {
        *self.sys_path == *other.sys_path
            && self.follow == other.follow
            && self.mode == other.mode
            && self.scope == other.scope
            && self.may_fall_back == other.may_fall_back
    }

    /// The core's acquire, on this lock's operations: in the kernel or
    /// not, once or until `until` (forever without a deadline).
    pub(crate) fn acquire(
        &self,
        until: inodes::Until,
        wait_in_kernel: bool,
        once: bool,
    ) -> Reached {
        let os = kernel_os(&self.sys_path, self.follow, self.mode, self.scope);
        let mut kernel = Threads::new(os, self.scope.excludes_own_process(), until);
        let outcome = match (once, until) {
            (true, _) => protocol::acquire(
                &mut kernel,
                wait_in_kernel,
                self.may_fall_back,
                &mut Deadline::once(),
            ),
            (false, inodes::Until::Deadline(deadline)) => {
                let left = deadline.saturating_duration_since(Instant::now());
                protocol::acquire(
                    &mut kernel,
                    wait_in_kernel,
                    self.may_fall_back,
                    &mut Backoff::new(left),
                )
            }
            (false, _) => protocol::acquire(
                &mut kernel,
                wait_in_kernel,
                self.may_fall_back,
                &mut Backoff::forever(),
            ),
        };
        Reached::of(&kernel, outcome)
    }

    /// What nobody waits for any more is let go: a held lock released, the
    /// placeholder of an `ENOSYS` attempt removed if it created it.
    fn discard(&self, reached: Reached) {
        match reached {
            Reached::Held(fd, _) => drop(fd),
            Reached::Unsupported(file, created) => {
                let _ = SoftLock::soft(&*self.path).fall_back(file, created);
            }
            Reached::Busy(_) | Reached::Failed(..) => {}
        }
    }
}

/// A waiting thread's report, and who waits for it.
#[derive(Debug, Default)]
struct Report {
    /// The waiters that will take the outcome.
    waiters: usize,
    /// The outcome, until a waiter takes it.
    reached: Option<Reached>,
    /// Whether the thread has reported (its outcome may be taken already).
    done: bool,
    /// The tasks waiting (an async wait's), woken with the report.
    wakers: Vec<Waker>,
}

/// What a waiter learned from its waiting thread.
enum Handed {
    /// The outcome: the lock, or why not.
    Reached(Reached),
    /// Another waiter took the thread's lock: wait on another thread.
    Again,
    /// The kernel refused the wait (`EDEADLK`): poll instead.
    Poll,
}

impl Report {
    /// The thread's outcome for this waiter, who leaves; `None` while the
    /// thread waits.
    fn take(&mut self) -> Option<Handed> {
        let handed = match self.reached.take() {
            Some(Reached::Failed(protocol::Step::Lock, e)) if e == Errno::DEADLK => Handed::Poll,
            Some(reached) => Handed::Reached(reached),
            None if self.done => Handed::Again,
            None => return None,
        };
        self.waiters -= 1;
        Some(handed)
    }
}

#[derive(Debug, Default)]
struct Slot {
    report: Mutex<Report>,
    changed: Condvar,
}

impl Slot {
    fn report(&self) -> MutexGuard<'_, Report> {
        self.report.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The waiting threads of this process, by the process that started them:
/// a forked child has none of its parent's threads.
static WAITING: Mutex<Vec<(u32, Job, Arc<Slot>)>> = Mutex::new(Vec::new());

fn waiting() -> MutexGuard<'static, Vec<(u32, Job, Arc<Slot>)>> {
    WAITING.lock().unwrap_or_else(|p| p.into_inner())
}

/// [`WAITING`]'s guard, for [`crate::atfork`].
pub(crate) fn lock_for_fork() -> Vec<Box<dyn std::any::Any>> {
    vec![Box::new(waiting())]
}

/// A timed acquire: one attempt, then a wait in the kernel on a waiting
/// thread until `deadline`.
pub(crate) fn until(job: &Job, deadline: Instant) -> Reached {
    let until = inodes::Until::Deadline(deadline);
    let first = job.acquire(until, false, true);
    if !matches!(first, Reached::Busy(_)) || Instant::now() >= deadline {
        return first;
    }
    match in_kernel(job, deadline) {
        Some(reached) => reached,
        // Polling, for the time left.
        None => job.acquire(until, false, false),
    }
}

/// Waits for a waiting thread's outcome until `deadline`; `None` where the
/// wait must poll instead.
fn in_kernel(job: &Job, deadline: Instant) -> Option<Reached> {
    loop {
        let slot = join(job)?;
        let mut report = slot.report();
        loop {
            match report.take() {
                Some(Handed::Reached(reached)) => return Some(reached),
                Some(Handed::Poll) => return None,
                Some(Handed::Again) => break,
                None => {}
            }
            let now = Instant::now();
            if now >= deadline {
                // The thread waits on; with no waiter left it releases
                // what it gets.
                report.waiters -= 1;
                return Some(Reached::Busy(Errno::AGAIN));
            }
            report = slot
                .changed
                .wait_timeout(report, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// Counts this waiter in on the waiting thread for `job`, starting one if
/// none waits; `None` if none could be started.
fn join(job: &Job) -> Option<Arc<Slot>> {
    let pid = std::process::id();
    let mut list = waiting();
    // A forked child's copy of its parent's list names threads it does not
    // have, whose slots a parent's thread may have held locked at the
    // fork: forgotten, never touched.
    if list.iter().any(|(p, ..)| *p != pid) {
        for entry in std::mem::take(&mut *list) {
            match entry.0 == pid {
                true => list.push(entry),
                false => std::mem::forget(entry),
            }
        }
    }
    if let Some((_, _, slot)) = list.iter().find(|(_, j, _)| j.same(job)) {
        slot.report().waiters += 1;
        return Some(Arc::clone(slot));
    }
    let slot = Arc::new(Slot::default());
    slot.report().waiters = 1;
    let (thread_job, thread_slot) = (job.clone(), Arc::clone(&slot));
    let started = std::thread::Builder::new()
        .name("swaplock-wait".into())
        .stack_size(128 * 1024)
        .spawn(move || wait_in_kernel(thread_job, thread_slot));
    match started {
        Ok(_) => {
            list.push((pid, job.clone(), Arc::clone(&slot)));
            Some(slot)
        }
        Err(_) => None,
    }
}

/// The waiting thread: acquires in the kernel, then hands the outcome to a
/// waiter, or lets it go if none is left.
fn wait_in_kernel(job: Job, slot: Arc<Slot>) {
    let reached = job.acquire(inodes::Until::Forever, true, false);
    // No waiter joins once the entry is gone.
    {
        let mut list = waiting();
        if let Some(at) = list.iter().position(|(_, _, s)| Arc::ptr_eq(s, &slot)) {
            list.swap_remove(at);
        }
    }
    let mut report = slot.report();
    report.done = true;
    if report.waiters == 0 {
        drop(report);
        return job.discard(reached);
    }
    report.reached = Some(reached);
    let wakers = std::mem::take(&mut report.wakers);
    drop(report);
    slot.changed.notify_all();
    wakers.into_iter().for_each(Waker::wake);
}

#[cfg(feature = "tokio")]
/// An async wait for a kernel lock: a place at the waiting thread for
/// its lock, as a future of the outcome; `None` where the wait must poll.
/// Dropped before the outcome is taken, it leaves: a lock the thread took
/// for nobody else is released.
pub(crate) struct Handover {
    job: Job,
    slot: Option<Arc<Slot>>,
}

#[cfg(feature = "tokio")]
impl Handover {
    pub(crate) fn new(job: Job) -> Self {
        Handover { job, slot: None }
    }
}

#[cfg(feature = "tokio")]
impl std::future::Future for Handover {
    type Output = Option<Reached>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Reached>> {
        use std::task::Poll;
        loop {
            if self.slot.is_none() {
                match join(&self.job) {
                    Some(slot) => self.slot = Some(slot),
                    None => return Poll::Ready(None),
                }
            }
            let slot = Arc::clone(self.slot.as_ref().expect("joined above"));
            let mut report = slot.report();
            match report.take() {
                Some(Handed::Reached(reached)) => {
                    drop(report);
                    self.slot = None;
                    return Poll::Ready(Some(reached));
                }
                Some(Handed::Poll) => {
                    drop(report);
                    self.slot = None;
                    return Poll::Ready(None);
                }
                Some(Handed::Again) => {
                    drop(report);
                    self.slot = None;
                }
                None => {
                    if !report.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                        report.wakers.push(cx.waker().clone());
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

#[cfg(feature = "tokio")]
impl Drop for Handover {
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else {
            return;
        };
        let mut report = slot.report();
        report.waiters -= 1;
        // The outcome came for the waiters, and none is left to take it.
        let orphan = match report.waiters {
            0 => report.reached.take(),
            _ => None,
        };
        drop(report);
        if let Some(reached) = orphan {
            self.job.discard(reached);
        }
    }
}
