//! The values the soft-lock steps pass each other and return to their
//! callers: a held lock ([`Held`]), an attempt's outcome ([`Attempt`]) and
//! who keeps the lock from us ([`Holder`]), and a contender's memory
//! between attempts ([`Contender`]). They live apart from the steps, so
//! that the steps and the acquire driver above them depend on these and
//! not on one another.

use crate::decide::{FileId, Instant, UnchangedWatch, WatchKey};
use crate::host::HostName;
use crate::pid::Pid;
use core::time::Duration;

/// A held soft lock: our marker's descriptor, kept open for the whole hold
/// (it pins our inode), and its identity.
#[derive(Debug)]
pub struct Held<F> {
    /// Our marker, open.
    pub file: F,
    /// Our marker's `(dev, ino)`.
    pub id: FileId,
}

/// Who keeps the lock from us, as far as an attempt saw.
// The core has no allocator, so a foreign host is reported by value.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Holder {
    /// Nothing more is known (a live local holder, a malformed marker being
    /// watched, a race with a peer).
    Unknown,
    /// An empty marker, which names no owner and is never broken.
    Recordless,
    /// A holder on another host, which this host cannot probe.
    Foreign {
        /// Its PID there.
        pid: Pid,
        /// Its host.
        host: HostName,
    },
}

/// The outcome of one attempt.
#[allow(clippy::large_enum_variant)]
#[must_use]
#[derive(Debug)]
pub enum Attempt<F> {
    /// The lock is ours.
    Acquired(Held<F>),
    /// Someone else holds it; try again later.
    Busy(Holder),
}

/// A contender's memory between attempts: the unchanged-marker watch
/// (PROTOCOL 7.13).
#[derive(Clone, Copy, Debug, Default)]
pub struct Contender {
    watch: UnchangedWatch,
}

impl Contender {
    /// A contender that has seen nothing.
    pub const fn new() -> Self {
        Contender {
            watch: UnchangedWatch::new(),
        }
    }

    /// How long the marker with `key` has been seen unchanged (zero on a
    /// change), on the contender's monotonic clock.
    pub(super) fn observe(&mut self, key: WatchKey, now: Instant) -> Duration {
        self.watch.observe(key, now)
    }
}
