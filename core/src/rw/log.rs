//! The log's decisions (PROTOCOL 16.4, 16.5): which generations to read to
//! find the latest snapshot, how far to probe past a gap, whether a commit
//! may be made and whether it counts once linked, where HEAD may move,
//! and which old generations compaction removes.
//!
//! Invariants kept here:
//! - RW10: the remembered snapshot and HEAD count only under the epoch they
//!   were read with (the caller forgets both when the epoch changes; HEAD
//!   is read through [`head_generation`](super::record::head_generation)).
//! - RW11: a commit extends the log only over an existing predecessor,
//!   before and after its link, and counts only if no listing or HEAD leads
//!   it by a whole window ([`extends`], [`after_link`]).
//! - RW12: compaction removes the oldest first, so the survivors stay
//!   contiguous ([`Compaction`]).
//! - RW13: HEAD only names a generation that must read back, and moves
//!   only forward ([`patience`], [`head_due`]).

use super::names::{MAX_GENERATION, RETAINED};

/// Sorts a listing of `gen/`'s generations and splits it into the older
/// ones, which any reader removes, and the [`RETAINED`] newest, which it
/// keeps (PROTOCOL 16.4 step 2).
pub fn retain(listed: &mut [u128]) -> (&[u128], &[u128]) {
    listed.sort_unstable();
    let keep = listed.len().min(RETAINED as usize);
    listed.split_at(listed.len() - keep)
}

/// The most generations a find names: the retained listing, the
/// remembered latest and HEAD's.
pub const MAX_NAMED: usize = RETAINED as usize + 2;

/// The generations a find reads, newest first (PROTOCOL 16.4 step 3): the
/// `kept` listing, the `remembered` latest generation (not generation 0,
/// the empty log, which has no record), and HEAD's (not 0 either).
pub fn named(
    kept: &[u128],
    remembered: u128,
    head: Option<u128>,
) -> heapless::Vec<u128, MAX_NAMED> {
    let mut out = heapless::Vec::new();
    let newest = &kept[kept.len().saturating_sub(RETAINED as usize)..];
    let extra = [Some(remembered), head]
        .into_iter()
        .flatten()
        .filter(|&g| g != 0);
    for g in newest.iter().copied().chain(extra) {
        if !out.contains(&g) {
            // At most 64 kept and two more fit MAX_NAMED.
            let _ = out.push(g);
        }
    }
    out.sort_unstable_by(|a, b| b.cmp(a));
    out
}

/// How far to probe past the first readable generation `start`
/// (PROTOCOL 16.4 step 4): one missing name ends the probe when `start` is
/// HEAD's generation, since compaction keeps the survivors contiguous
/// (RW12); a whole window otherwise.
pub fn patience(start: u128, head: Option<u128>) -> u32 {
    match head == Some(start) {
        true => 1,
        false => RETAINED,
    }
}

/// A forward probe by name (PROTOCOL 16.4, `probe`): read the generations
/// after `start` one by one until `patience` names in a row are missing;
/// the last readable one is the latest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Probe {
    next: u128,
    gap: u32,
    patience: u32,
    latest: u128,
}

impl Probe {
    /// A probe past the generation `start`.
    pub fn new(start: u128, patience: u32) -> Self {
        Probe {
            next: start.saturating_add(1),
            gap: 0,
            patience,
            latest: start,
        }
    }

    /// The generation to read next; `None` once the probe is over.
    pub fn next(&self) -> Option<u128> {
        (self.gap < self.patience && self.next <= MAX_GENERATION).then_some(self.next)
    }

    /// What the read of [`next`](Self::next) found: a readable snapshot of
    /// that generation, or a missing name.
    pub fn found(&mut self, readable: bool) {
        match readable {
            true => {
                self.latest = self.next;
                self.gap = 0;
            }
            false => self.gap += 1,
        }
        self.next = self.next.saturating_add(1);
    }

    /// The latest readable generation so far (`start` if none).
    pub fn latest(&self) -> u128 {
        self.latest
    }
}

/// Whether a find that read none of the generations it named takes what
/// its blind probe from `newest` found (PROTOCOL 16.4 step 5): something
/// past `newest`, or, when nothing was named at all, the empty log.
/// Otherwise the find has nothing (and the caller looks once more, then
/// fails: it can see no snapshot it may trust).
pub fn accept_blind(newest: u128, found: u128, nothing_named: bool) -> bool {
    found > newest || nothing_named
}

/// Whether generation `n` extends the log (RW11): for `n > 1` its
/// predecessor exists (any bytes); for the first, no HEAD bound to this
/// epoch exists (`head_bound`: [`head_record`](super::record::head_record)
/// found one), since HEAD only ever follows a commit.
pub fn extends(n: u128, predecessor_exists: bool, head_bound: bool) -> bool {
    match n > 1 {
        true => predecessor_exists,
        false => !head_bound,
    }
}

/// What a commit whose link landed comes to (PROTOCOL 16.5 step 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Landed {
    /// Generation N is ours.
    Won,
    /// The commit is refused; `remove`: unlink `name(N)` first, unless
    /// peers lead it by less than a window (the slot would otherwise come
    /// free early).
    Lost {
        /// Whether to unlink the generation just linked.
        remove: bool,
    },
}

/// Whether a commit of `n` that landed counts (RW11): no listed generation
/// (`listed_max`) nor HEAD's (`head`) leads it by a whole window, and it
/// still `extends` the log.
pub fn after_link(n: u128, listed_max: Option<u128>, head: Option<u128>, extends: bool) -> Landed {
    let newest = listed_max.unwrap_or(0).max(head.unwrap_or(0));
    // Both are at most 10^20, far inside i128.
    let lead = newest as i128 - n as i128;
    let window = i128::from(RETAINED);
    if lead >= window || !extends {
        return Landed::Lost {
            remove: !(0 < lead && lead < window),
        };
    }
    Landed::Won
}

/// Whether a winning commit of `n` moves HEAD (PROTOCOL 16.5 step 5, RW13):
/// only under a valid epoch that still reads the same, and only over a
/// HEAD naming an older generation (or none).
pub fn head_due(epoch_valid: bool, epoch_unchanged: bool, head: Option<u128>, n: u128) -> bool {
    epoch_valid && epoch_unchanged && head.unwrap_or(0) < n
}

/// The compaction after a winning commit (PROTOCOL 16.5 step 6, RW12):
/// the generations from the oldest still present up to `N − 65` are
/// removed, oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Compaction {
    oldest: u128,
    expired: u128,
    settled: bool,
}

impl Compaction {
    /// The compaction after winning `n`; `None` while the log is shorter
    /// than a window and one.
    pub fn after(n: u128) -> Option<Self> {
        let expired = n.checked_sub(u128::from(RETAINED) + 1).filter(|&x| x > 0)?;
        Some(Compaction {
            oldest: expired,
            expired,
            settled: false,
        })
    }

    /// The generation whose existence is asked next, while the search for
    /// the oldest still present goes down; `None` once it is found.
    pub fn ask(&self) -> Option<u128> {
        (!self.settled && self.oldest > 1).then(|| self.oldest - 1)
    }

    /// Whether the generation [`ask`](Self::ask) named exists.
    pub fn exists(&mut self, yes: bool) {
        match yes {
            true => self.oldest -= 1,
            false => self.settled = true,
        }
    }

    /// The generations to remove, oldest first.
    pub fn range(&self) -> core::ops::RangeInclusive<u128> {
        self.oldest..=self.expired
    }
}
