//! The read-write soft lock (PROTOCOL 16): filelock 4.2.11's
//! `SoftReadWriteLock`, a log of immutable snapshots under `<L>.rw/`, each
//! naming one optional writer and a set of readers, advanced by a
//! no-replace hard link to the next generation's name.
//!
//! This module holds what is written and what is decided, never how a file
//! is reached:
//!
//! | module | what | invariants |
//! |---|---|---|
//! | [`names`] | `gen/<20 digits>`, `.commit-<hex32>`, holder names, the constants | |
//! | [`record`] | the snapshot, the epoch and HEAD, the holder record (16.2) | RW2 |
//! | [`log`] | which generations to read, the probe, commit checks, compaction (16.4, 16.5) | RW1, RW10, RW11, RW12, RW13 |
//! | [`member`] | a participant's attempt and leave, the ledger, the sweep, the heartbeat (16.6-16.8) | RW4, RW5, RW6, RW7, RW8 |
//! | [`files`] | the operations the adapter answers, and the verdicts it takes from here (16.3) | RW3, RW9, RW14 |
//! | [`driver`] | the loop that asks each of these decisions in turn over [`files::Files`], for the facade and the simulator alike | all of the above, in order |
//!
//! Everything but the driver is a pure function of its arguments: the
//! adapter (`swaplock-unix`'s `rw`) performs the file operations, and the
//! facade (`swaplock::rw`) runs the [`driver`] over it, as the simulator
//! runs it over its model filesystem.
//!
//! ```
//! use swaplock_core::rw::record::parse_snapshot;
//!
//! let bytes = b"filelock-rw/1\ngeneration=2\nwriter=3cf9212a581468c893270b7705e52dc6\n\
//!               reader=b2930009b5795f04e3d3c8fd7f4978d2\n";
//! let snapshot = parse_snapshot(bytes).unwrap();
//! assert_eq!(snapshot.generation, 2);
//! assert!(snapshot.writer.is_some());
//! assert_eq!(snapshot.readers().count(), 1);
//! ```

pub mod driver;
pub mod files;
pub mod log;
pub mod member;
pub mod names;
pub mod record;

#[cfg(test)]
mod tests;

/// A participant's mode: shared (read) or exclusive (write).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Mode {
    /// Any number of readers hold the lock together, and no writer.
    Read,
    /// One writer holds the lock, and no reader.
    Write,
}

impl Mode {
    /// `read` or `write`, as filelock names the modes in its messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Read => "read",
            Mode::Write => "write",
        }
    }
}
