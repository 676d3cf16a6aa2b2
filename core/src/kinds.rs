//! Kinds that meet on one path (PROTOCOL 2.9): what a soft lock finds at
//! or beside its lock path that another kind of lock left, which would
//! otherwise keep it waiting without a word, or let the two kinds hold
//! the path at once.
//!
//! Kernel locks leave an empty file (2.7), which a soft lock reads as a
//! holder that recorded nothing and never removes (I10); filelock's
//! `SoftFileLock` removes a protocol 2 marker as malformed after 2 s, and
//! a protocol 2 lock's marker in turn is removed by such peers; the strict
//! lock's sentinel is held for ever; and filelock's read-write lock keeps
//! its log in `<L>.rw/`, never at `L`, so a marker at `L` does not exclude
//! it. None of these is a holder a contender can judge: each is named, with
//! what to do, by `status`, by a waiter and by a timeout's error.
//!
//! ```
//! use swaplock_core::kinds::{mismatch, Beside, KernelSeen, Mismatch};
//! use swaplock_core::record::{classify, Content, Reader};
//!
//! // An empty file at the lock path, which a kernel lock of pid 7 holds.
//! let at_path = classify(Content::Bytes(b""), Reader::Protocol1);
//! let held = KernelSeen::Held { flock: true, pid: 7 };
//! assert_eq!(
//!     mismatch(Reader::Protocol1, Some(&at_path), held, Beside::default()),
//!     Some(Mismatch::KernelLock { flock: true, pid: 7 })
//! );
//! ```

use crate::record::{Classified, Reader};

/// What a lock's contender found at or beside its lock path that another
/// kind of lock uses.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Mismatch {
    /// A kernel lock holds the file at the lock path now: the path is a
    /// kernel lock's (with-lock-ex, `flock(1)`, filelock's `FileLock`),
    /// and the two kinds do not exclude each other.
    KernelLock {
        /// Whether it is an `flock` lock rather than an `fcntl` one.
        flock: bool,
        /// Its holder's PID as the kernel's table gives it (-1 for an open
        /// file description lock, 0 for a holder in a PID namespace this
        /// process cannot see).
        pid: i32,
    },
    /// An empty file at the lock path that no kernel lock holds now, as
    /// far as this host can tell: what kernel locks leave behind, or a
    /// soft contender that died between its create and its write. Soft
    /// locks never remove it.
    EmptyFile {
        /// Whether the kernel's table of locks was read (Linux and
        /// Android); otherwise a kernel lock may hold it all the same.
        checked: bool,
    },
    /// A protocol 2 marker (`MarkerSoftFileLock`, `SoftFileLease`) under a
    /// protocol 1 lock (`SoftFileLock`): filelock's protocol 1 peers take
    /// it for malformed and remove it after 2 s unchanged.
    Protocol2Marker,
    /// A protocol 1 marker (`SoftFileLock`) under a protocol 2 lock: its
    /// kind's filelock peers take this lock's markers for malformed and
    /// remove them after 2 s unchanged.
    Protocol1Marker,
    /// The sentinel filelock's `StrictSoftFileLock` keeps at its lock path
    /// for ever: no soft lock acquires the path again.
    StrictSentinel,
    /// A read-write log (`<L>.rw/`, filelock's `SoftReadWriteLock`) beside
    /// the lock path: its readers and writers never look at `L`, so they
    /// do not exclude this lock's holders.
    ReadWriteLog,
}

/// What the kernel's table of locks says of the file at the lock path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum KernelSeen {
    /// A kernel lock holds it.
    Held {
        /// Whether it is an `flock` lock rather than an `fcntl` one.
        flock: bool,
        /// The holder's PID as the table gives it.
        pid: i32,
    },
    /// The table lists no lock on it.
    Free,
    /// There is no table to read here (or it could not be read).
    Unknown,
}

/// What lies beside the lock path, in its directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Beside {
    /// Whether `<L>.rw` exists.
    pub rw_log: bool,
}

/// Which other kind of lock uses the path, as a contender reading with
/// `reader` finds it: the file at the lock path classified for that
/// reader (`None`: no file there, and so nothing but a log beside it to
/// name), what the kernel's table says of that
/// file, and what lies beside it. A kernel lock on the file comes first (it
/// shows the path is a kernel lock's whatever the file holds); then the
/// content; then a log beside it.
pub fn mismatch(
    reader: Reader,
    at_path: Option<&Classified<'_>>,
    kernel: KernelSeen,
    beside: Beside,
) -> Option<Mismatch> {
    if let KernelSeen::Held { flock, pid } = kernel {
        return Some(Mismatch::KernelLock { flock, pid });
    }
    let found = match (at_path?, reader) {
        (Classified::Sentinel, _) => Some(Mismatch::StrictSentinel),
        (Classified::Recordless, _) => Some(Mismatch::EmptyFile {
            checked: kernel == KernelSeen::Free,
        }),
        (Classified::V2(_), Reader::Protocol1) => Some(Mismatch::Protocol2Marker),
        (Classified::V1(_), Reader::Protocol2) => Some(Mismatch::Protocol1Marker),
        _ => None,
    };
    found.or(beside.rw_log.then_some(Mismatch::ReadWriteLog))
}

/// [`mismatch`] where the lock path holds no file: only a log beside it
/// can be named.
pub fn mismatch_without_file(beside: Beside) -> Option<Mismatch> {
    beside.rw_log.then_some(Mismatch::ReadWriteLog)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{classify, Content, STRICT_SENTINEL};

    fn at(bytes: &[u8], reader: Reader) -> Option<Classified<'_>> {
        Some(classify(Content::Bytes(bytes), reader))
    }

    const V1: &[u8] = b"123\nvm\n";
    const V2: &[u8] = b"filelock/2\npid=1\nhost=vm\nmode=exclusive\n";

    #[test]
    fn each_kind_is_named() {
        let free = KernelSeen::Free;
        let none = Beside::default();
        let p1 = Reader::Protocol1;
        let p2 = Reader::Protocol2;
        assert_eq!(
            mismatch(p1, at(STRICT_SENTINEL, p1).as_ref(), free, none),
            Some(Mismatch::StrictSentinel)
        );
        assert_eq!(
            mismatch(p2, at(b"", p2).as_ref(), free, none),
            Some(Mismatch::EmptyFile { checked: true })
        );
        assert_eq!(
            mismatch(p2, at(b"", p2).as_ref(), KernelSeen::Unknown, none),
            Some(Mismatch::EmptyFile { checked: false })
        );
        assert_eq!(
            mismatch(p1, at(V2, p1).as_ref(), free, none),
            Some(Mismatch::Protocol2Marker)
        );
        assert_eq!(
            mismatch(p2, at(V1, p2).as_ref(), free, none),
            Some(Mismatch::Protocol1Marker)
        );
        // A kernel lock names the path whatever the file holds.
        let held = KernelSeen::Held {
            flock: false,
            pid: 9,
        };
        for content in [b"" as &[u8], V1, V2] {
            assert_eq!(
                mismatch(p2, at(content, p2).as_ref(), held, none),
                Some(Mismatch::KernelLock {
                    flock: false,
                    pid: 9
                })
            );
        }
    }

    #[test]
    fn a_marker_of_the_lock_own_kind_is_no_mismatch() {
        let free = KernelSeen::Free;
        let none = Beside::default();
        assert_eq!(
            mismatch(
                Reader::Protocol1,
                at(V1, Reader::Protocol1).as_ref(),
                free,
                none
            ),
            None
        );
        assert_eq!(
            mismatch(
                Reader::Protocol2,
                at(V2, Reader::Protocol2).as_ref(),
                free,
                none
            ),
            None
        );
        assert_eq!(
            mismatch(
                Reader::Protocol2,
                at(b"garbage\n", Reader::Protocol2).as_ref(),
                free,
                none
            ),
            None
        );
    }

    #[test]
    fn a_log_beside_is_named_after_what_is_at_the_path() {
        let rw = Beside { rw_log: true };
        let p2 = Reader::Protocol2;
        assert_eq!(
            mismatch(p2, at(V2, p2).as_ref(), KernelSeen::Free, rw),
            Some(Mismatch::ReadWriteLog)
        );
        assert_eq!(
            mismatch(p2, at(STRICT_SENTINEL, p2).as_ref(), KernelSeen::Free, rw),
            Some(Mismatch::StrictSentinel)
        );
    }
}
