//! What the protocol asks of the world, as narrow traits: the lock's
//! directory ([`Dir`], with [`Handles`] where open files cannot move), the
//! processes of this host ([`Processes`]), the clocks ([`Clock`]) and a
//! random source ([`Entropy`]). [`Os`] is all four together.
//!
//! Every method is one syscall or one input, and an implementation
//! performs exactly what its doc says: no retries, no decisions. The Linux,
//! macOS and Windows adapters, the deterministic simulator and the
//! fault-injecting test seams implement these traits, so all of them run
//! the same protocol code.

use crate::decide::{FileId, FileTime, WatchKey};
use crate::errno::Errno;
use crate::mutant::{active, Mutant};
use crate::names::Token;
use crate::pid::Pid;
use crate::start::StartToken;
use crate::Decimal;

pub use crate::decide::Liveness;
pub use crate::wait::Clock;

/// What kind of node a name refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum NodeKind {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A symbolic link (only `lstat` reports one).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

/// What the protocol needs of a `stat` result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Stat {
    /// `(st_dev, st_ino)`.
    pub id: FileId,
    /// The node's type.
    pub kind: NodeKind,
    /// `st_nlink`.
    pub nlink: u64,
    /// `st_mtime` with nanoseconds.
    pub mtime: FileTime,
    /// `st_ctime` with nanoseconds.
    pub ctime: FileTime,
}

impl Stat {
    /// Whether `self` and `other` are the same file (`dev` and `ino`).
    pub fn same_file(&self, other: &Stat) -> bool {
        self.id == other.id
    }

    /// The key of the unchanged-marker watch (PROTOCOL 7.13).
    pub(super) fn watch_key(&self) -> WatchKey {
        WatchKey {
            mtime: self.mtime,
            ino: self.id.ino,
            ctime: match active(Mutant::CtimeDroppedFromWatch) {
                true => FileTime::default(),
                false => self.ctime,
            },
        }
    }
}

/// How the platform's filesystem lets one process move or delete a file
/// another process has open, which decides how a stale marker is taken over
/// and how a marker is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Semantics {
    /// POSIX: any name can be renamed or unlinked whoever has the file open.
    /// A stale marker is taken over by exchanging names with ours (where the
    /// filesystem refuses the exchange, nothing moves), and a file is
    /// removed by name while its remover holds it open.
    Posix,
    /// Windows: a file open without delete sharing, as every marker is for
    /// its holder's whole hold, cannot be renamed or deleted by anyone. A
    /// stale marker is moved aside and deleted through a handle that holds
    /// it (so the file moved is the file judged), and our own marker is
    /// deleted through the handle we hold it by. There is no exchange.
    Handles,
}

/// The lock's directory: each method one syscall on it. Names are final
/// components inside the directory; errors are the OS's `errno`.
pub trait Dir {
    /// An open descriptor (a handle on Windows).
    type File;

    /// `open(name, O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC[|O_TRUNC], mode)`.
    fn create_new(&mut self, name: &[u8], mode: u32, truncate: bool) -> Result<Self::File, Errno>;
    /// `open(".", O_TMPFILE|O_WRONLY|O_CLOEXEC, mode)`: a new file in the
    /// directory that has no name yet and vanishes when closed unless
    /// [`Dir::link_unnamed`] names it. An error (`EOPNOTSUPP`, `EISDIR`,
    /// `EINVAL`, ...) where the platform or the filesystem has no such
    /// files: the protocol then creates its marker by name.
    fn create_unnamed(&mut self, mode: u32) -> Result<Self::File, Errno>;
    /// `linkat(AT_FDCWD, "/proc/self/fd/N", dir, name, AT_SYMLINK_FOLLOW)`:
    /// gives the unnamed file `file` the name `name`, failing with
    /// `EEXIST` if the name exists, so the file appears complete or not at
    /// all.
    fn link_unnamed(&mut self, file: &Self::File, name: &[u8]) -> Result<(), Errno>;
    /// `fsync(file)`: a marker's record on stable storage before a link or
    /// a rename names it, so that a power cut never leaves the name durable
    /// and its record lost (an empty marker, never evicted: I10).
    /// `EINVAL`, `ENOSYS` or `EOPNOTSUPP` where the file
    /// cannot be synced (nothing of it outlives a power cut there to be
    /// ordered).
    fn sync_file(&mut self, file: &Self::File) -> Result<(), Errno>;
    /// `open(name, O_RDONLY|O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC)`.
    fn open_read(&mut self, name: &[u8]) -> Result<Self::File, Errno>;
    /// `open(name, O_PATH|O_NOFOLLOW|O_CLOEXEC)`, or where there is no
    /// `O_PATH` a read-only non-blocking `O_NOFOLLOW` open: a pin that keeps
    /// the inode allocated without reading it.
    fn pin(&mut self, name: &[u8]) -> Result<Self::File, Errno>;
    /// `write(file, buf)`.
    fn write(&mut self, file: &Self::File, buf: &[u8]) -> Result<usize, Errno>;
    /// `pwrite(file, buf, offset)`.
    fn write_at(&mut self, file: &Self::File, buf: &[u8], offset: u64) -> Result<usize, Errno>;
    /// `ftruncate(file, len)`.
    fn truncate(&mut self, file: &Self::File, len: u64) -> Result<(), Errno>;
    /// `fchmod(file, mode)`.
    fn chmod(&mut self, file: &Self::File, mode: u32) -> Result<(), Errno>;
    /// `futimens(file, NULL)`: set the file's times to now.
    fn touch(&mut self, file: &Self::File) -> Result<(), Errno>;
    /// `read(file, buf)`.
    fn read(&mut self, file: &Self::File, buf: &mut [u8]) -> Result<usize, Errno>;
    /// `fstat(file)`.
    fn fstat(&mut self, file: &Self::File) -> Result<Stat, Errno>;
    /// `close(file)`.
    fn close(&mut self, file: Self::File);
    /// `lstat(name)`.
    fn lstat(&mut self, name: &[u8]) -> Result<Stat, Errno>;
    /// `renameat2(a, b, RENAME_EXCHANGE)` (or `renameatx_np(RENAME_SWAP)`):
    /// swap two names in one step.
    fn exchange(&mut self, a: &[u8], b: &[u8]) -> Result<(), Errno>;
    /// `rename(from, to)`.
    fn rename(&mut self, from: &[u8], to: &[u8]) -> Result<(), Errno>;
    /// `unlink(name)`.
    fn unlink(&mut self, name: &[u8]) -> Result<(), Errno>;
    /// Lists the directory's entry names (`getdents`), calling `visit` for each.
    fn list(&mut self, visit: &mut dyn FnMut(&[u8])) -> Result<(), Errno>;
    /// How the directory compares names, so that a scan finds break names
    /// a peer spelled the lock's name differently in (byte for byte unless
    /// the adapter knows better).
    fn name_case(&mut self) -> crate::names::NameCase {
        crate::names::NameCase::Exact
    }

    /// How the directory's filesystem renames without replacing
    /// ([`crate::fs::exclusive_rename`]): where it is trusted, the marker is
    /// published by an exclusive rename where the directory has no unnamed
    /// files (7.2 step 3b). Untrusted by default.
    fn exclusive_rename(&mut self) -> crate::fs::ExclusiveRename {
        crate::fs::ExclusiveRename::Untrusted
    }

    /// `syncfs(file)`: everything of the file's filesystem on stable
    /// storage, for a filesystem whose rename writes nothing in order
    /// ([`crate::fs::ExclusiveRename::Unjournaled`]). `EOPNOTSUPP` by
    /// default.
    fn sync_filesystem(&mut self, _file: &Self::File) -> Result<(), Errno> {
        Err(Errno::OPNOTSUPP)
    }

    /// `renameat2(dir, from, dir, to, RENAME_NOREPLACE)`: `EEXIST` if `to`
    /// exists. Asked for only where [`Dir::exclusive_rename`] trusts it.
    fn rename_noreplace(&mut self, _from: &[u8], _to: &[u8]) -> Result<(), Errno> {
        Err(Errno::OPNOTSUPP)
    }

    /// The calls that act through a handle, where the filesystem follows
    /// [`Semantics::Handles`]; `None` under POSIX rules.
    fn handles(&mut self) -> Option<&mut dyn Handles<Self::File>>;

    /// Which rules the filesystem follows: [`Semantics::Handles`] exactly
    /// when [`Dir::handles`] offers the calls through a handle.
    fn semantics(&mut self) -> Semantics {
        match self.handles() {
            Some(_) => Semantics::Handles,
            None => Semantics::Posix,
        }
    }
}

/// The calls through a handle of [`Semantics::Handles`] (Windows), where
/// a file open without delete sharing cannot be moved by name.
pub trait Handles<F> {
    /// Opens `name` with delete access, sharing read and write but not
    /// delete, without following a reparse point: refused (`EACCES`, a
    /// sharing violation) while any handle on the file denies delete
    /// sharing, as a holder's does, and it then keeps others from deleting
    /// or moving the file, or opening it so.
    fn open_to_move(&mut self, name: &[u8]) -> Result<F, Errno>;
    /// Renames the file `file` holds (opened by [`Dir::create_new`] or
    /// [`Handles::open_to_move`], both with delete access) to `to`, failing
    /// if `to` exists (`FileRenameInfo`, no replace).
    fn rename_file(&mut self, file: &F, to: &[u8]) -> Result<(), Errno>;
    /// Deletes the file `file` holds (`FileDispositionInfo`).
    fn remove_file(&mut self, file: &F) -> Result<(), Errno>;
}

/// The processes of this host, as a judgement needs them, and this
/// process's own claims in progress.
pub trait Processes {
    /// Whether the process `pid` on this host is alive (`kill(pid, 0)`).
    fn probe(&mut self, pid: Pid) -> Liveness;
    /// The start token of process `pid` now, if it can be read exactly.
    fn start_token(&mut self, pid: Pid) -> Option<StartToken>;
    /// Whether a task in another PID namespace runs as `pid` with start
    /// token `start` (Linux's `/proc` scan; `false` elsewhere).
    fn runs_elsewhere(&mut self, pid: Pid, start: Decimal<'_>) -> bool;
    /// Registers `name` in this process's set of claims in progress;
    /// `false` if another thread of this process has it (invariant I15).
    fn begin_claim(&mut self, name: &[u8]) -> bool;
    /// Removes `name` from this process's set of claims in progress.
    fn end_claim(&mut self, name: &[u8]);
}

/// A cryptographic random source.
pub trait Entropy {
    /// 128 bits for a break, restore or lease token (invariant I13).
    fn token(&mut self) -> Token;
}

/// Everything the soft-lock protocol performs: the directory, the
/// processes, the clocks and the random source.
pub trait Os: Dir + Processes + Clock + Entropy {}

impl<T: Dir + Processes + Clock + Entropy + ?Sized> Os for T {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::{Instant, UnchangedWatch};
    use core::time::Duration;

    /// A file that repeats a watched file's inode number and mtime (its
    /// owner set the time, the filesystem reused the number) but not its
    /// change time restarts the watch: it inherits no age (PROTOCOL 7.13).
    #[test]
    fn a_file_repeating_only_mtime_and_inode_restarts_the_watch() {
        let watched = Stat {
            id: FileId { dev: 1, ino: 5 },
            kind: NodeKind::Regular,
            nlink: 1,
            mtime: FileTime { sec: 100, nsec: 0 },
            ctime: FileTime { sec: 200, nsec: 0 },
        };
        let fresh = Stat {
            ctime: FileTime { sec: 203, nsec: 0 },
            ..watched
        };
        let mut watch = UnchangedWatch::new();
        let at = |s: u64| Instant(s * 1_000_000_000);
        watch.observe(watched.watch_key(), at(0));
        assert_eq!(
            watch.observe(watched.watch_key(), at(3)),
            Duration::from_secs(3)
        );
        assert_eq!(watch.observe(fresh.watch_key(), at(3)), Duration::ZERO);
    }
}
