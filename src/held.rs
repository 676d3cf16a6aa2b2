//! Which locks this process holds, by key, with the thread that took each,
//! for kernel and soft locks alike: a thread that waits with no timeout
//! for a lock it already holds through another guard would wait forever,
//! and gets an error of kind `Deadlock` instead. A guard counts as its
//! acquiring thread's, even once moved to another thread.

use std::sync::Mutex;
use std::thread::ThreadId;

/// The locks of one family this process holds: keys and acquiring threads.
pub(crate) type Held<K> = Mutex<Vec<(K, ThreadId)>>;

/// Whether this thread holds a lock of `held` whose key `is` accepts.
pub(crate) fn by_this_thread<K>(held: &Held<K>, mut is: impl FnMut(&K) -> bool) -> bool {
    let me = std::thread::current().id();
    held.lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .any(|(k, t)| *t == me && is(k))
}

/// A guard's entry in its family's list, removed when it drops.
#[derive(Debug)]
pub(crate) struct Registered<K: PartialEq + 'static> {
    held: &'static Held<K>,
    key: K,
    thread: ThreadId,
}

impl<K: PartialEq + Clone + 'static> Registered<K> {
    /// The key entered.
    pub(crate) fn key(&self) -> &K {
        &self.key
    }

    /// Enters `key` as held by this thread.
    pub(crate) fn new(held: &'static Held<K>, key: K) -> Self {
        let thread = std::thread::current().id();
        held.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((key.clone(), thread));
        Registered { held, key, thread }
    }
}

impl<K: PartialEq + 'static> Drop for Registered<K> {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = held
            .iter()
            .position(|(k, t)| *t == self.thread && *k == self.key)
        {
            held.swap_remove(i);
        }
    }
}
