//! What the oracle reads: one [`Event`] for each syscall a simulated
//! process makes (who, when, the names and inodes it acted on, and whether
//! it succeeded) and for each ghost step of its life (an attempt begun or
//! ended, its critical section entered or left, a release and what it
//! returned, a kill, that it holds its markers empty by design).
//!
//! Events are small `Copy` values, their names kept in the [`Log`]'s
//! bytes, which the oracle clears after each look, so recording them
//! allocates nothing once a run has warmed up. An
//! event records only what some invariant reads; a call no invariant reads
//! is [`Call::Other`].

use swaplock_core::decide::FileTime;
use swaplock_core::soft;
use swaplock_core::Errno;

/// A name an event acted on: its place in the [`Log`]'s name bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Name {
    start: u32,
    len: u32,
}

/// The events since the oracle's last look, and the bytes of the names
/// they acted on. Both are cleared after each look and keep their
/// capacity, so recording allocates nothing once a run has warmed up, and
/// an event stays a few words long however long its names.
#[derive(Default)]
pub(crate) struct Log {
    pub(crate) events: Vec<Event>,
    names: Vec<u8>,
}

impl Log {
    /// Keeps the bytes of name `n`, for an event to refer to.
    pub(crate) fn name(&mut self, n: &[u8]) -> Name {
        let start = self.names.len() as u32;
        self.names.extend_from_slice(n);
        Name {
            start,
            len: n.len() as u32,
        }
    }

    /// The bytes of a name an event refers to.
    pub(crate) fn bytes(&self, n: Name) -> &[u8] {
        &self.names[n.start as usize..(n.start + n.len) as usize]
    }

    /// Forgets every event and name, keeping the capacity.
    pub(crate) fn clear(&mut self) {
        self.events.clear();
        self.names.clear();
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
    /// An attempt of its acquire returned this error.
    AcquireFailed(soft::Error),
    /// Its kernel lock's acquire failed at this step with this error.
    KernelFailed(swaplock_core::kernel::Step, Errno),
    /// It holds the markers it creates empty, by design (a recordless
    /// holder, a holder by name).
    HoldsEmpty,
    /// It was killed.
    Killed,
}

/// A syscall, with the names and inodes it acted on.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Call {
    /// `open(name, O_CREAT|O_EXCL)`, and the inode it created, with its
    /// generation (inode numbers are reused).
    Create {
        name: Name,
        ino: Option<u64>,
        generation: Option<u64>,
    },
    /// `open(".", O_TMPFILE)`, and the inode it created.
    CreateUnnamed { ino: Option<u64> },
    /// `linkat` of an open file to `name`.
    Link { name: Name },
    /// `write` through a descriptor of this inode.
    Write { ino: Option<u64> },
    /// `futimens` through a descriptor of this inode.
    Touch { ino: Option<u64> },
    /// `fsync` through a descriptor of this inode (recorded where power
    /// may be lost, the one place a sync is a step).
    Sync { ino: Option<u64> },
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
    /// `lstat(name)`: a look at a name, which changes nothing.
    Lstat { name: Name },
    /// A rename through a handle, and the name and file it moved.
    RenameFile { moved: Option<(Name, Target)> },
    /// A delete through a handle, and the name and file it removed.
    RemoveFile { removed: Option<(Name, Target)> },
    /// `fstat` or `fchmod`, even when an injected fault failed it: a call
    /// that only looks at a file, and leaves a marker just created as
    /// unwritten as it was.
    Look,
    /// `close`: the one call a process makes after its last look before
    /// it enters (the pin's close), which judges nothing.
    Close,
    /// A call no invariant reads: reads, opens, links, listings,
    /// sleeps, work in the critical section.
    Other,
}
