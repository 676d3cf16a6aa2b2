//! The ledger's storage (PROTOCOL 16.7): what this lock has seen of each
//! record it judges, and when it first saw it. The rule of staleness is
//! [`Seen::observe`](crate::rw::member::Seen::observe) and
//! [`is_stale`](crate::rw::member::is_stale); this is only where the
//! entries live, so that the facade can keep them in a map of any size
//! and the core in a fixed one.

use crate::names::Token;
use crate::rw::member::Seen;

/// What a ledger entry is about (filelock's keys `<token>`,
/// `holder:<token>` and `temporary:<name>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    /// A member's holder record, judged by attempts.
    Member(Token),
    /// A record no snapshot names, judged by the sweep.
    Holder(Token),
    /// A temporary in `gen/`, judged by the sweep: its name's SHA-256
    /// (a name may be up to 255 bytes).
    Temporary([u8; 32]),
}

impl Key {
    /// The key of the temporary named `name`.
    pub fn temporary(name: &[u8]) -> Self {
        use sha2::Digest;
        Key::Temporary(sha2::Sha256::digest(name).into())
    }
}

/// A ledger entry: what was seen and since when, and the sweep that last
/// saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The value and when it was first seen.
    pub seen: Seen,
    /// The sweep round that last observed it (0 for attempts).
    pub round: u32,
}

/// Where a lock keeps its ledger.
pub trait Ledger {
    /// The entry of `key`.
    fn get(&self, key: &Key) -> Option<Entry>;
    /// Stores `entry` under `key`; `false` when there is no room (the
    /// record is then judged afresh each time, and never found stale: a
    /// ledger must have room for every member and stray the lock meets).
    fn put(&mut self, key: Key, entry: Entry) -> bool;
    /// Forgets `key`.
    fn forget(&mut self, key: &Key);
    /// Keeps only the entries `keep` accepts.
    fn retain(&mut self, keep: &mut dyn FnMut(&Key, &Entry) -> bool);
}

/// A ledger of at most `N` entries, without allocation.
#[derive(Clone, Debug, Default)]
pub struct BoundedLedger<const N: usize> {
    entries: heapless::Vec<(Key, Entry), N>,
}

impl<const N: usize> BoundedLedger<N> {
    /// An empty ledger.
    pub const fn new() -> Self {
        BoundedLedger {
            entries: heapless::Vec::new(),
        }
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<const N: usize> Ledger for BoundedLedger<N> {
    fn get(&self, key: &Key) -> Option<Entry> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, e)| *e)
    }

    fn put(&mut self, key: Key, entry: Entry) -> bool {
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some((_, e)) => {
                *e = entry;
                true
            }
            None => self.entries.push((key, entry)).is_ok(),
        }
    }

    fn forget(&mut self, key: &Key) {
        self.entries.retain(|(k, _)| k != key);
    }

    fn retain(&mut self, keep: &mut dyn FnMut(&Key, &Entry) -> bool) {
        self.entries.retain(|(k, e)| keep(k, e));
    }
}
