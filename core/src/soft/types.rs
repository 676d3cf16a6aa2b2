//! The values the soft-lock steps pass each other and return to their
//! callers: a held lock ([`Held`]), an attempt's outcome ([`Attempt`]) and
//! who keeps the lock from us ([`Holder`]), a contender's memory between
//! attempts ([`Contender`]), the file a judgement is about ([`Judged`]) and
//! the breaker its break names carry ([`Breaker`]), and a takeover's
//! outcome ([`Takeover`]). They live apart from the steps, so
//! that the steps and the acquire driver above them depend on these and
//! not on one another.

use super::os::Stat;
use crate::decide::{FileId, Instant, UnchangedWatch, WatchKey};
use crate::host::HostName;
use crate::mutant::{active, Mutant};
use crate::names::format_u64;
use crate::pid::Pid;
use crate::Decimal;
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
    /// Nothing more is known (a malformed marker being watched, a race with
    /// a peer).
    Unknown,
    /// A holder on this host, by the PID its record names: a waiter may
    /// wait for that process to end, and look again at once when it does.
    Local {
        /// The PID the record names.
        pid: Pid,
    },
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

/// The outcome of a takeover.
pub(super) enum Takeover<F> {
    /// The lock is ours: the judged file is gone and our marker is at the path.
    Took(Held<F>),
    /// Nothing was taken (or what was taken went back).
    Busy,
}

impl<F> Takeover<F> {
    pub(super) fn attempt(self) -> Attempt<F> {
        match self {
            Takeover::Took(held) => Attempt::Acquired(held),
            Takeover::Busy => Attempt::Busy(Holder::Unknown),
        }
    }
}

/// The file a judgement is about: its `stat`, taken while a pin (or its
/// holder's own descriptor) keeps its inode allocated. Only
/// [`under_pin`](super::judge::under_pin) (by [`Judged::pinned`]) and
/// [`Judged::open_file`] mint one, and it is neither `Clone` nor `Copy`:
/// comparisons borrow it for as long as the pin holds (I5), and compare
/// inode and mtime together, for equality only (I6).
#[derive(Debug)]
pub(super) struct Judged {
    stat: Stat,
}

impl Judged {
    /// The file read under a pin: for [`under_pin`](super::judge::under_pin)
    /// to call, and nothing else.
    pub(super) fn pinned(stat: Stat) -> Self {
        Judged { stat }
    }

    /// A file the caller itself holds open (our own marker or
    /// placeholder), whose descriptor pins its inode.
    pub(super) fn open_file(stat: Stat) -> Self {
        Judged { stat }
    }

    /// Whether `st` shows the judged file: the same inode number and the
    /// same mtime (invariant I6).
    pub(super) fn is(&self, st: &Stat) -> bool {
        st.id.ino == self.stat.id.ino
            && (st.mtime == self.stat.mtime || active(Mutant::InodeOnlyIdentity))
    }

    /// Whether `st` has the judged file's inode number.
    pub(super) fn same_ino(&self, st: &Stat) -> bool {
        st.id.ino == self.stat.id.ino
    }

    /// The judged file's `stat`.
    pub(super) fn stat(&self) -> &Stat {
        &self.stat
    }
}

/// The PID a dead writer's break names carry (PROTOCOL 5.3): its record's
/// PID, or the breaker a placeholder names, as decimal digits. A placeholder
/// PID of more than 24 digits names no process and no break file this
/// protocol writes, so it makes no breaker.
#[derive(Clone, Copy, Debug)]
pub(super) struct Breaker {
    buf: [u8; 24],
    at: usize,
}

impl Breaker {
    /// The breaker a record's PID names.
    pub(super) fn of_pid(pid: Pid) -> Self {
        let mut buf = [0u8; 24];
        let at = buf.len() - format_u64(u64::from(pid.get()), &mut buf).len();
        Breaker { buf, at }
    }

    /// The breaker a placeholder's digits name, if they fit.
    pub(super) fn of_digits(d: Decimal<'_>) -> Option<Self> {
        let src = d.as_str().as_bytes();
        let mut buf = [0u8; 24];
        let at = buf.len().checked_sub(src.len())?;
        buf[at..].copy_from_slice(src);
        Some(Breaker { buf, at })
    }

    /// The digits.
    pub(super) fn digits(&self) -> Decimal<'_> {
        // Both constructors store decimal digits, which parse again.
        Decimal::parse(&self.buf[self.at..]).unwrap_or(Decimal::ZERO)
    }
}
