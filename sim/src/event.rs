//! What the oracle reads: one [`Event`] for each syscall a simulated
//! process makes (who, when, the names and inodes it acted on, and whether
//! it succeeded) and for each ghost step of its life (an attempt begun or
//! ended, its critical section entered or left, a release and what it
//! returned, a kill).
//!
//! Events are small `Copy` values with names kept inline, in a log the
//! oracle clears after each look, so recording them allocates nothing. An
//! event records only what some invariant reads; a call no invariant reads
//! is [`Call::Other`].

use std::fmt;
use swaplock_core::decide::FileTime;
use swaplock_core::soft;
use swaplock_core::Errno;

/// A name in the model directory, kept inline.
#[derive(Clone, Copy)]
pub(crate) struct Name {
    len: u8,
    bytes: [u8; Name::CAP],
}

impl Name {
    /// Every name the simulator makes fits: the longest is a restore name,
    /// the lock's name, `.restore.`, a PID and a 32-digit token.
    const CAP: usize = 64;

    pub(crate) fn new(n: &[u8]) -> Self {
        debug_assert!(
            n.len() <= Self::CAP,
            "a name longer than any the simulator makes"
        );
        let len = n.len().min(Self::CAP);
        let mut bytes = [0; Self::CAP];
        bytes[..len].copy_from_slice(&n[..len]);
        Name {
            len: len as u8,
            bytes,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl PartialEq<&[u8]> for Name {
    fn eq(&self, other: &&[u8]) -> bool {
        self.as_bytes() == *other
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.as_bytes()))
    }
}

/// A file as an operation found it, just before acting on it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    /// Its inode.
    pub(crate) ino: u64,
    /// Its modification time then.
    pub(crate) mtime: FileTime,
}

/// One thing a simulated process did.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Event {
    /// The process (an index into the scenario's processes).
    pub(crate) who: usize,
    /// The monotonic time it happened at, in nanoseconds.
    pub(crate) at: u64,
    /// What it did.
    pub(crate) what: What,
}

/// What a process did.
#[derive(Clone, Copy, Debug)]
pub(crate) enum What {
    /// A syscall, and whether it succeeded.
    Call(Call, Result<(), Errno>),
    /// It began (`true`) or ended (`false`) an attempt or a release.
    Attempting(bool),
    /// It entered its critical section, holding the marker of this inode.
    Enter(u64),
    /// It left its critical section.
    Leave,
    /// Its release of the marker of inode `ino` returned, with this error
    /// if it reported one.
    Released {
        ino: u64,
        error: Option<soft::Error>,
    },
    /// It was killed.
    Killed,
}

/// A syscall, with the names and inodes it acted on.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Call {
    /// `open(name, O_CREAT|O_EXCL)`, and the inode it created.
    Create { name: Name, ino: Option<u64> },
    /// `open(".", O_TMPFILE)`, and the inode it created.
    CreateUnnamed { ino: Option<u64> },
    /// `linkat` of an open file to `name`.
    Link { name: Name },
    /// `write` through a descriptor of this inode.
    Write { ino: Option<u64> },
    /// `futimens` through a descriptor of this inode.
    Touch { ino: Option<u64> },
    /// `renameat2(a, b, RENAME_EXCHANGE)`, and the files `a` and `b`
    /// linked.
    Exchange {
        a: Name,
        a_file: Option<Target>,
        b: Name,
        b_file: Option<Target>,
    },
    /// `rename(from, ...)`, and the file it moved from `from`.
    Rename { from: Name, moved: Option<Target> },
    /// `unlink(name)`, and the file `name` linked.
    Unlink { name: Name, removed: Option<Target> },
    /// A rename through a handle, and the name and file it moved.
    RenameFile { moved: Option<(Name, Target)> },
    /// A delete through a handle, and the name and file it removed.
    RemoveFile { removed: Option<(Name, Target)> },
    /// A call no invariant reads: reads, stats, opens, closes, links,
    /// listings, sleeps, work in the critical section.
    Other,
}
