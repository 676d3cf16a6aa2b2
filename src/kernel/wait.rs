//! Timed waits for kernel locks, in the kernel.
//!
//! `fcntl` and `flock` have a blocking lock call (`F_OFD_SETLKW`,
//! `F_SETLKW`, `LOCK_EX`) but no timed one. Rather than poll, a timed wait
//! hands the blocking acquire to a *waiting thread*: it runs the core's
//! acquire loop in the kernel, on a descriptor of its own, and the waiter
//! sleeps on a condition variable until that thread reports or the
//! deadline passes. The lock, once taken, is the waiter's: an open file
//! description or `flock` lock belongs to the descriptor, which the waiting
//! thread hands over. So the waiter returns as soon as the kernel grants
//! the lock, whoever released it and however (an unlock, a close, an exit).
//!
//! Only such locks are waited for so. A classic `fcntl` lock (one owned by
//! the process, and the registry's stand-in for open file description
//! locks where the kernel has none) is the process's: a thread left
//! waiting for one would merge with, and by its close release, another
//! guard's lock of the process; would make the kernel's deadlock check
//! fail another process's wait; and would keep the registry's reservation
//! from this process's readers. Those waits poll.
//!
//! A waiter that gives up leaves its waiting thread blocked in the kernel:
//! nothing can interrupt that call but a signal, which a library must not
//! take over. The thread stays for that lock (path, kind and mode), and
//! the next wait for the same lock in this process waits on it rather than
//! starting another, so at most one such thread waits per lock a process
//! waits for, and at most [`MOST_THREADS`] in all. An untimed wait
//! ([`forever`]) waits on such a thread too, so that it never blocks
//! beside one. When the
//! kernel grants it the lock and no waiter is left, it releases the lock
//! at once and ends; and if the lock file was replaced meanwhile, it opens
//! (and so creates) the new one only while someone still waits. A waiter
//! may give up between that check and the open: a file the open made then
//! is made for nobody, and the thread removes it again, as its holder (its
//! exclusive lock taken without waiting, the path still naming it). A
//! waiter that gives up after the open, before the kernel grants the
//! thread the lock, still leaves the file made: empty and unlocked, which
//! no kernel lock minds.
//!
//! Where no thread can be started (or [`MOST_THREADS`] wait already), the
//! waiter polls for the time left, as the core's [`Backoff`] says.
//!
//! [`Backoff`]: swaplock_core::kernel::Backoff

use super::inodes::{self, Threads};
use crate::adapter::kernel as os;
use crate::kernel::{kernel_os, time_left, Reached, Scope, SysPath, Wait};
use crate::sync::{Condvar, Mutex, MutexGuard};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use swaplock_core::kernel::{self as protocol, Backoff, Outcome};
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
    /// The soft lock an `flock` attempt that meets `ENOSYS` falls back to.
    pub(super) fallback: Option<&'static super::fallback::SoftFallback>,
    /// [`os::UnixKernel::names`].
    pub(crate) names: swaplock_core::kernel::Names,
}

impl Job {
    /// Whether an attempt that meets `ENOSYS` falls back to a soft lock.
    fn may_fall_back(&self) -> bool {
        self.fallback.is_some()
    }

    /// Whether a waiting thread for `other` takes this very lock.
    fn same(&self, other: &Job) -> bool {
        *self.sys_path == *other.sys_path
            && self.follow == other.follow
            && self.mode == other.mode
            && self.scope == other.scope
            && self.may_fall_back() == other.may_fall_back()
    }

    /// The core's acquire, on this lock's operations: in the kernel or
    /// not, once or until `until` (forever without a deadline).
    pub(crate) fn acquire(&self, until: Wait, wait_in_kernel: bool, once: bool) -> Reached {
        self.acquire_gated(until, wait_in_kernel, once, None)
    }

    /// [`Job::acquire`], each open first allowed by `gate` (a waiting
    /// thread's: someone still waits).
    fn acquire_gated(
        &self,
        until: Wait,
        wait_in_kernel: bool,
        once: bool,
        gate: Option<&Slot>,
    ) -> Reached {
        let os = Gated {
            os: kernel_os(
                &self.sys_path,
                self.follow,
                self.mode,
                self.scope,
                self.names,
            ),
            gate,
        };
        let mut kernel = Threads::new(os, self.scope.excludes_own_process(), until);
        // The registry waits as `until` says; the core tries once, or as
        // long as `until` lets it.
        let tries = if once { Wait::No } else { until };
        let mut backoff = Backoff::of(tries.left(time_left));
        let outcome = protocol::acquire(
            &mut kernel,
            wait_in_kernel,
            self.may_fall_back(),
            &mut backoff,
        );
        Reached::of(&kernel, outcome)
    }

    /// What nobody waits for any more is let go: a held lock released, the
    /// placeholder of an `ENOSYS` attempt removed if it created it.
    fn discard(&self, reached: Reached) {
        match reached {
            Reached::Held(fd, _) => drop(fd),
            Reached::Unsupported(file, created) => {
                if let Some(soft) = self.fallback {
                    (soft.fall_back)(&self.path, file, created);
                }
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
    /// The tasks waiting (async waits), woken with the report.
    #[cfg(feature = "tokio")]
    wakers: crate::async_wait::Wakers,
}

/// What a waiter learned from its waiting thread.
enum Handed {
    /// The outcome: the lock, or why not.
    Reached(Reached),
    /// Another waiter took the thread's lock: wait on another thread.
    Again,
}

impl Report {
    /// The thread's outcome for this waiter, who leaves; `None` while the
    /// thread waits.
    fn take(&mut self) -> Option<Handed> {
        let handed = match self.reached.take() {
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
        crate::sync::lock(&self.report)
    }
}

/// The adapter's operations on the lock path, whose opens a waiting
/// thread's slot may refuse: once nobody waits, a thread that found the
/// lock file replaced does not create the new one.
struct Gated<'a> {
    os: os::UnixKernel<'a>,
    gate: Option<&'a Slot>,
}

impl Gated<'_> {
    /// Whether an open may be made: an error once nobody waits (not
    /// `EAGAIN`, which would be taken for a busy lock).
    fn allowed(&self) -> Result<(), Errno> {
        match self.gate.is_some_and(|slot| !still_awaited(slot)) {
            true => Err(Errno::INTR),
            false => Ok(()),
        }
    }
}

impl Gated<'_> {
    /// Removes again the lock file this thread made for nobody, as its
    /// holder: only if its exclusive lock can be taken at once, whatever
    /// the mode of the wait (a peer that opened it since may hold it, a
    /// reader too, and only an exclusive holder may remove the file), and
    /// the path still names it.
    fn unmake(&mut self, file: OwnedFd) {
        use swaplock_core::kernel::KernelOs;
        let mut exclusive = os::UnixKernel {
            shared: false,
            ..self.os
        };
        if inodes::lock_call(&mut exclusive, &file, false).is_ok()
            && protocol::check_remove(&mut self.os, &file).is_ok()
        {
            let _ = os::unlink(self.os.path);
        }
        self.close(file);
    }
}

impl swaplock_core::kernel::KernelOs for Gated<'_> {
    type File = OwnedFd;

    /// A waiting thread's open learns whether it makes the file: a waiter
    /// may give up between the check that someone waits and the open, and
    /// a file made then is made for nobody, which must not stay (a holder
    /// that removed the lock file would find it back).
    fn open(&mut self, exclusive: bool) -> Result<OwnedFd, Errno> {
        self.allowed()?;
        let Some(slot) = self.gate else {
            return self.os.open(exclusive);
        };
        let (file, made) = match self.os.open(true) {
            Ok(file) => (file, true),
            Err(e) if e == Errno::EXIST && !exclusive => (self.os.open(false)?, false),
            Err(e) => return Err(e),
        };
        if made && !still_awaited(slot) {
            self.unmake(file);
            return Err(Errno::INTR);
        }
        Ok(file)
    }

    fn open_existing(&mut self) -> Result<OwnedFd, Errno> {
        self.allowed()?;
        self.os.open_existing()
    }

    fn lock(&mut self, file: &OwnedFd, wait: bool) -> Result<(), Errno> {
        inodes::lock_call(&mut self.os, file, wait)
    }

    fn fstat(&mut self, file: &OwnedFd) -> Result<swaplock_core::decide::FileId, Errno> {
        self.os.fstat(file)
    }

    fn stat(&mut self) -> Result<swaplock_core::decide::FileId, Errno> {
        self.os.stat()
    }

    fn close(&mut self, file: OwnedFd) {
        self.os.close(file)
    }

    fn names_cached(&self) -> bool {
        self.os.names_cached()
    }

    fn names_delegated(&self) -> bool {
        self.os.names_delegated()
    }

    fn listed(&mut self) -> Result<swaplock_core::kernel::Listed, Errno> {
        self.os.listed()
    }

    /// Gated as an open is: a file made once nobody waits is removed again.
    fn made_anew(&mut self) -> Result<swaplock_core::decide::FileId, Errno> {
        self.allowed()?;
        let made = self.os.open(true)?;
        if self.gate.is_some_and(|slot| !still_awaited(slot)) {
            self.unmake(made);
            return Err(Errno::INTR);
        }
        let id = self.os.fstat(&made);
        self.os.close(made);
        id
    }
}

impl swaplock_core::wait::Clock for Gated<'_> {
    fn now(&mut self) -> swaplock_core::decide::Instant {
        self.os.now()
    }

    fn wall(&mut self) -> swaplock_core::decide::FileTime {
        self.os.wall()
    }

    fn sleep(&mut self, duration: std::time::Duration) {
        self.os.sleep(duration)
    }
}

impl inodes::Calls for Gated<'_> {
    fn shared(&self) -> bool {
        self.os.shared()
    }

    fn call(&self) -> os::LockCall {
        self.os.call()
    }

    fn use_classic_call(&mut self) {
        self.os.use_classic_call()
    }

    fn owns_description(&self) -> bool {
        self.os.owns_description()
    }
}

/// Whether anyone still waits on the waiting thread of `slot`: if not,
/// its entry leaves the list (under the list's lock, so nobody joins
/// after) and the thread is done.
fn still_awaited(slot: &Slot) -> bool {
    let mut list = waiting();
    let mut report = slot.report();
    if report.waiters > 0 {
        return true;
    }
    report.done = true;
    drop(report);
    if let Some(at) = list.iter().position(|(_, _, s)| std::ptr::eq(&**s, slot)) {
        list.swap_remove(at);
    }
    false
}

/// At most this many waiting threads per process; further timed waits
/// poll. (Each keeps a descriptor and a small stack until its lock is
/// granted.)
pub(crate) const MOST_THREADS: usize = 16;

/// The waiting threads of this process, by the process that started them:
/// a forked child has none of its parent's threads.
static WAITING: crate::lists::ProcessMutex<Vec<(crate::pid::Me, Job, Arc<Slot>)>> =
    crate::lists::ProcessMutex::new(Vec::new());

fn waiting() -> MutexGuard<'static, Vec<(crate::pid::Me, Job, Arc<Slot>)>> {
    WAITING.lock()
}

/// How many waiting threads this process has (for the model's tests).
#[cfg(all(test, swaplock_model))]
pub(crate) fn waiting_threads() -> usize {
    waiting().len()
}

/// How many waiters wait on this process's waiting threads (for the
/// model's tests).
#[cfg(all(test, swaplock_model))]
pub(crate) fn waiters() -> usize {
    waiting()
        .iter()
        .map(|(_, _, slot)| slot.report().waiters)
        .sum()
}

/// A timed acquire: one attempt, then a wait in the kernel on a waiting
/// thread until `deadline`.
pub(crate) fn until(job: &Job, deadline: Instant) -> Reached {
    let until = Wait::Until(deadline);
    let first = job.acquire(until, false, true);
    if !matches!(first, Reached::Busy(_)) || crate::sync::now() >= deadline {
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
        if crate::sync::now() >= deadline {
            return Some(Reached::Busy(Errno::AGAIN));
        }
        let slot = join(job)?;
        let mut report = slot.report();
        loop {
            match report.take() {
                Some(Handed::Reached(reached)) => return Some(reached),
                Some(Handed::Again) => break,
                None => {}
            }
            let now = crate::sync::now();
            if now >= deadline {
                // The thread waits on; with no waiter left it releases
                // what it gets.
                report.waiters -= 1;
                return Some(Reached::Busy(Errno::AGAIN));
            }
            report = crate::sync::wait_timeout(&slot.changed, report, deadline - now);
        }
    }
}

/// An untimed acquire: one attempt, then a wait in the kernel on the
/// waiting thread for this lock, as a timed wait's, but without a deadline.
/// So the process has one blocked call per lock, whichever of its waits
/// came first: a timed wait's thread blocked beside an untimed wait could
/// take the lock after that wait's hold, for nobody, and a `try_lock` of
/// this process or another would find it busy for a moment. Where no
/// waiting thread serves the lock (a classic lock, or none could be
/// started), this thread blocks in the kernel itself.
pub(crate) fn forever(job: &Job) -> Reached {
    let in_kernel = || job.acquire(Wait::Forever, true, false);
    if inodes::owned_by_description(job.scope.call()) != Some(true) {
        return in_kernel();
    }
    let first = job.acquire(Wait::Forever, false, true);
    if !matches!(first, Reached::Busy(_)) {
        return first;
    }
    loop {
        let Some(slot) = join(job) else {
            return in_kernel();
        };
        let mut report = slot.report();
        loop {
            match report.take() {
                Some(Handed::Reached(reached)) => return reached,
                Some(Handed::Again) => break,
                None => {}
            }
            report = slot.changed.wait(report).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Counts this waiter in on the waiting thread for `job`, starting one if
/// none waits; `None` if none could be started.
fn join(job: &Job) -> Option<Arc<Slot>> {
    if inodes::owned_by_description(job.scope.call()) != Some(true) {
        return None;
    }
    let pid = crate::pid::id();
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
    if list.len() >= MOST_THREADS {
        return None;
    }
    let slot = Arc::new(Slot::default());
    slot.report().waiters = 1;
    let (thread_job, thread_slot) = (job.clone(), Arc::clone(&slot));
    let started = crate::sync::thread::Builder::new()
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
    let acquired = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        job.acquire_gated(Wait::Forever, true, false, Some(&slot))
    }));
    // A panic is reported as a failed lock call, so that no waiter waits on
    // a thread that is gone.
    let reached = acquired.unwrap_or(Reached::Failed(protocol::Step::Lock, Errno::IO));
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
    #[cfg(feature = "tokio")]
    let mut wakers = std::mem::take(&mut report.wakers);
    drop(report);
    slot.changed.notify_all();
    #[cfg(feature = "tokio")]
    crate::async_wait::wake_all(&mut wakers);
}

#[cfg(feature = "tokio")]
/// An async wait for a kernel lock: a place at the waiting thread for
/// its lock, as a future of the outcome; `None` where the wait must poll.
/// Dropped before the outcome is taken, it leaves: a lock the thread took
/// for nobody else is released.
pub(crate) struct Handover {
    job: Job,
    slot: Option<Arc<Slot>>,
    /// This wait's id among the slot's wakers.
    id: u64,
}

#[cfg(feature = "tokio")]
impl Handover {
    pub(crate) fn new(job: Job) -> Self {
        Handover {
            job,
            slot: None,
            id: crate::async_wait::next_id(),
        }
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
            let handed = report.take();
            if handed.is_some() {
                crate::async_wait::unregister(&mut report.wakers, self.id);
            }
            match handed {
                Some(Handed::Reached(reached)) => {
                    drop(report);
                    self.slot = None;
                    return Poll::Ready(Some(reached));
                }
                Some(Handed::Again) => {
                    drop(report);
                    self.slot = None;
                }
                None => {
                    crate::async_wait::register(&mut report.wakers, self.id, cx.waker());
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
        crate::async_wait::unregister(&mut report.wakers, self.id);
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
