//! What the async waits (`lock_async`, feature `tokio`) share.

use crate::error::{LockError, Step};
use std::io;
use std::path::Path;
use std::sync::Arc;

/// Whether the caller runs in a tokio runtime, whose reactor and timer the
/// wait needs (tokio panics without them): an error naming the remedy
/// otherwise.
pub(crate) fn in_runtime(path: &Arc<Path>) -> io::Result<()> {
    if crate::sync::time::in_runtime() {
        return Ok(());
    }
    let kind = io::ErrorKind::Unsupported;
    let source = io::Error::new(
        kind,
        "an awaited lock (lock_async, read_async, write_async) runs in a tokio runtime with \
         its IO and time drivers enabled \
         (#[tokio::main], or runtime::Builder::enable_all): call it from a task",
    );
    Err(LockError::io(path, Step::Lock, kind, source))
}

/// The tasks waiting on something, each by an id of its own, so that a
/// task's wait that ends or is dropped takes its waker out (a waker keeps
/// its task's memory alive).
pub(crate) type Wakers = Vec<(u64, std::task::Waker)>;

/// A new waiter id.
pub(crate) fn next_id() -> u64 {
    use crate::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Puts waiter `id`'s waker in `list`, in place of the one it left before.
pub(crate) fn register(list: &mut Wakers, id: u64, waker: &std::task::Waker) {
    match list.iter_mut().find(|(i, _)| *i == id) {
        Some((_, w)) if w.will_wake(waker) => {}
        Some((_, w)) => w.clone_from(waker),
        None => list.push((id, waker.clone())),
    }
}

/// Takes waiter `id` out of `list`.
pub(crate) fn unregister(list: &mut Wakers, id: u64) {
    list.retain(|(i, _)| *i != id);
}

/// Wakes every waiter of `list`, which is emptied.
pub(crate) fn wake_all(list: &mut Wakers) {
    for (_, waker) in std::mem::take(list) {
        waker.wake();
    }
}
