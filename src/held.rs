//! Which locks this process holds, by key, with the thread that took each,
//! for kernel and soft locks alike: a thread that waits with no timeout
//! for a lock it already holds through another guard would wait forever,
//! and gets an error of kind `Deadlock` instead. A guard counts as its
//! acquiring thread's, even once moved to another thread.

use crate::sync::thread::{self, ThreadId};

/// The locks of one family this process holds: keys, acquiring threads,
/// and the process that entered each (a forked child inherits the list,
/// but none of it is its own).
pub(crate) type Held<K> = crate::lists::ProcessMutex<Vec<(K, ThreadId, crate::pid::Me)>>;

/// Whether this thread holds a lock of `held` whose key `is` accepts.
pub(crate) fn by_this_thread<K: Send + 'static>(
    held: &'static Held<K>,
    mut is: impl FnMut(&K) -> bool,
) -> bool {
    let me = thread::current().id();
    let pid = crate::pid::id();
    held.lock()
        .iter()
        .any(|(k, t, p)| *t == me && *p == pid && is(k))
}

/// Whether any thread of this process holds a lock of `held` whose key
/// `is` accepts.
#[cfg(unix)]
pub(crate) fn by_this_process<K: Send + 'static>(
    held: &'static Held<K>,
    mut is: impl FnMut(&K) -> bool,
) -> bool {
    let pid = crate::pid::id();
    held.lock().iter().any(|(k, _, p)| *p == pid && is(k))
}

/// A guard's entry in its family's list, removed when it drops.
#[derive(Debug)]
pub(crate) struct Registered<K: PartialEq + Send + 'static> {
    held: &'static Held<K>,
    key: K,
    thread: ThreadId,
    /// The process that entered it: a forked child leaves the list alone
    /// (its lock may have been held by a thread that is not there).
    pid: crate::pid::Me,
}

impl<K: PartialEq + Clone + Send + 'static> Registered<K> {
    /// The key entered.
    pub(crate) fn key(&self) -> &K {
        &self.key
    }

    /// Enters `key` as held by this thread.
    pub(crate) fn new(held: &'static Held<K>, key: K) -> Self {
        let thread = thread::current().id();
        held.lock().push((key.clone(), thread, crate::pid::id()));
        Registered {
            held,
            key,
            thread,
            pid: crate::pid::id(),
        }
    }
}

impl<K: PartialEq + Send + 'static> Drop for Registered<K> {
    fn drop(&mut self) {
        if self.pid != crate::pid::id() {
            return;
        }
        let mut held = self.held.lock();
        if let Some(i) = held
            .iter()
            .position(|(k, t, _)| *t == self.thread && *k == self.key)
        {
            held.swap_remove(i);
        }
    }
}
