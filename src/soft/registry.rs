//! The process-wide lists of soft locks: the holds of this process, the
//! reentrant holds, and the count of releases that waits watch.

use super::*;

/// The soft locks this process holds, by canonical path ([`held`]).
pub(super) static HELD: held::Held<Arc<Path>> = crate::lists::ProcessMutex::new(Vec::new());

/// Whether this thread holds the soft lock at `key`.
pub(super) fn held_by_this_thread(key: &Path) -> bool {
    held::by_this_thread(&HELD, |k| **k == *key)
}

/// The error of a guard used in a child forked while it was held.
pub(super) fn forked_error(path: &Arc<Path>, owner: Pid) -> io::Error {
    LockError::forked(path, Step::Unlock, owner, "the lock, with its marker,")
}

/// The holds of reentrant soft locks, by canonical path and the thread
/// that took them ([`SoftLock::reentrant`]).
/// (A forked child's threads are told apart by process too: the holds it
/// inherited in this list are its parent's.)
pub(super) type Reentrant = Vec<(
    Arc<Path>,
    (crate::sync::thread::ThreadId, crate::pid::Me),
    std::sync::Weak<Hold>,
)>;
pub(super) static REENTRANT: crate::lists::ProcessMutex<Reentrant> =
    crate::lists::ProcessMutex::new(Vec::new());

/// This thread's live reentrant hold of `key`, shared.
pub(super) fn reentered(key: &Path) -> Option<Arc<Hold>> {
    let me = (crate::sync::thread::current().id(), crate::pid::id());
    let mut holds = REENTRANT.lock();
    holds.retain(|(_, _, h)| h.strong_count() > 0);
    holds
        .iter()
        .filter(|(k, t, _)| *t == me && **k == *key)
        .find_map(|(_, _, h)| h.upgrade())
}

/// Enters a new reentrant hold of `key` as this thread's.
pub(super) fn enter_reentrant(key: Arc<Path>, hold: &Arc<Hold>) {
    let me = (crate::sync::thread::current().id(), crate::pid::id());
    let mut holds = REENTRANT.lock();
    holds.retain(|(_, _, h)| h.strong_count() > 0);
    holds.push((key, me, Arc::downgrade(hold)));
}

/// Tells this process's waiting threads that a soft lock was released.
pub(super) fn notify_release() {
    let (count, released) = &RELEASES;
    *count.lock() += 1;
    OWN_RELEASES.with(|own| own.set(own.get() + 1));
    released.notify_all();
    wake::ring_all();
    #[cfg(feature = "tokio")]
    crate::async_wait::wake_all(&mut release_wakers());
}

/// Wakes this process's waiters on the release condition variable, as a
/// release does, for a waiter whose turn came in its host's queue
/// ([`queue`](super::queue)); watchers' bells are not rung: their waits
/// are no business of the queue's.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) fn notify_turn() {
    let (count, released) = &RELEASES;
    *count.lock() += 1;
    released.notify_all();
}

/// Whether an acquire failed for want of descriptors (`EMFILE`,
/// `ENFILE`), which a watch's own may have taken.
#[cfg(feature = "tokio")]
pub(super) fn short_of_descriptors(e: &io::Error) -> bool {
    let raw = LockError::of(e).and_then(|l| l.os_error().raw_os_error());
    #[cfg(unix)]
    return raw.is_some_and(|r| r == libc::EMFILE || r == libc::ENFILE);
    #[cfg(windows)]
    return raw.is_some_and(|r| r == 4); // ERROR_TOO_MANY_OPEN_FILES
}

/// The tasks waiting for a release of this process ([`Released`]).
#[cfg(feature = "tokio")]
pub(super) static RELEASE_WAKERS: crate::lists::ProcessMutex<crate::async_wait::Wakers> =
    crate::lists::ProcessMutex::new(Vec::new());

#[cfg(feature = "tokio")]
pub(super) fn release_wakers() -> crate::sync::MutexGuard<'static, crate::async_wait::Wakers> {
    RELEASE_WAKERS.lock()
}

/// A task's pause without a watch: until this process releases a soft
/// lock after the count `seen`, or `pause` passes.
#[cfg(feature = "tokio")]
pub(super) struct Released {
    pub(super) seen: u64,
    pub(super) id: u64,
    pub(super) until: std::pin::Pin<Box<crate::sync::time::Sleep>>,
}

#[cfg(feature = "tokio")]
impl Released {
    pub(super) fn after(seen: u64, pause: Duration) -> Self {
        Released {
            seen,
            id: crate::async_wait::next_id(),
            until: Box::pin(crate::sync::time::sleep(pause)),
        }
    }

    pub(super) fn released(&self) -> bool {
        *RELEASES.0.lock() != self.seen
    }
}

#[cfg(feature = "tokio")]
impl std::future::Future for Released {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.released() || self.until.as_mut().poll(cx).is_ready() {
            return std::task::Poll::Ready(());
        }
        crate::async_wait::register(&mut release_wakers(), self.id, cx.waker());
        // A release between the look and the registration woke nobody.
        match self.released() {
            true => std::task::Poll::Ready(()),
            false => std::task::Poll::Pending,
        }
    }
}

#[cfg(feature = "tokio")]
impl Drop for Released {
    fn drop(&mut self) {
        crate::async_wait::unregister(&mut release_wakers(), self.id);
    }
}

/// How many soft locks this process has released, and the condition its
/// waiting threads wait on: a thread waiting for a lock another thread of
/// this process holds looks again as soon as that one is released, instead
/// of at its next poll.
pub(super) static RELEASES: (crate::lists::ProcessMutex<u64>, Condvar) =
    (crate::lists::ProcessMutex::new(0), Condvar::new());

crate::sync::thread_local! {
    /// How many of [`RELEASES`] this thread made: a wait's hook's own
    /// releases are no reason for the wait to look again.
    pub(super) static OWN_RELEASES: Cell<u64> = const { Cell::new(0) };
}
