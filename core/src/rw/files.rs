//! What the log asks of the filesystem (PROTOCOL 16.3): the operations on
//! the files under `<L>.rw/`, each reached by a walk that follows no
//! symlink, and the verdicts the adapter takes from here while it performs
//! them.
//!
//! Invariants kept here:
//! - RW3: a link's outcome is decided by the identity of the two names,
//!   never by the call's return code ([`link_landed`]).
//! - RW9: a holder record is rewritten only through a regular file that is
//!   still the one created, with one name ([`overwrite_fits`]).
//! - RW14: the walk never follows a symlink ([`refused_by_walk`]) and
//!   refuses a directory another account controls ([`foreign_owner`]).

use crate::decide::FileId;
use crate::errno::Errno;
use crate::mutant::{active, Mutant};
use crate::soft::{NodeKind, Stat};
use core::fmt;

/// Which directory of the log a name is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Area {
    /// `gen/`: generations, the epoch, HEAD and temporaries.
    Generations,
    /// `holders/`: the holder records.
    Holders,
}

/// One of the log's three directories.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Tree {
    /// The root, `<L>.rw`.
    Root,
    /// `gen/` or `holders/`.
    Area(Area),
}

impl Tree {
    /// The directory's name under the root (`""` for the root itself).
    pub fn name(self) -> &'static str {
        match self {
            Tree::Root => "",
            Tree::Area(Area::Generations) => super::names::GENERATIONS,
            Tree::Area(Area::Holders) => super::names::HOLDERS,
        }
    }
}

/// Why an operation failed.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FsError {
    /// A directory of the log is not a real directory (a symlink, a file)
    /// or another account controls it (RW14). `owner` is that account.
    TreeReplaced {
        /// Which directory.
        tree: Tree,
        /// The foreign owner, when that is the reason.
        owner: Option<u32>,
    },
    /// `link` was refused in a way that means the filesystem has no hard
    /// links (`ENOSYS`, `EXDEV`, `ENOTSUP`, `EPERM`): the log cannot be
    /// advanced here at all.
    NoHardLinks(Errno),
    /// `link` answered success, and the two names it joined show two
    /// different files: the filesystem does not show a hard link's names
    /// as one file (sshfs gives each name an inode number of its own), so
    /// no commit could ever be confirmed here (RW3).
    LinkNotOneFile,
    /// Any other error of the system.
    Os(Errno),
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsError::TreeReplaced { tree, owner: None } => write!(
                f,
                "{} is not a directory or is a symlink; refusing to use it",
                match tree {
                    Tree::Root => "the log's root",
                    Tree::Area(_) => tree.name(),
                }
            ),
            FsError::TreeReplaced {
                tree,
                owner: Some(uid),
            } => write!(
                f,
                "{} belongs to uid {uid}, not to this process's account or the parent's owner",
                match tree {
                    Tree::Root => "the log's root",
                    Tree::Area(_) => tree.name(),
                }
            ),
            FsError::NoHardLinks(e) => write!(
                f,
                "filesystem does not support atomic no-replace hard-link publication ({e})"
            ),
            FsError::LinkNotOneFile => write!(
                f,
                "filesystem shows a hard link's two names as two different files"
            ),
            FsError::Os(e) => write!(f, "{e}"),
        }
    }
}

/// What a read found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Read {
    /// No file by that name (`ENOENT`, `ESTALE`).
    Missing,
    /// The bytes read, at the start of the caller's buffer (a node that is
    /// not a regular file reads as no bytes).
    Bytes(usize),
}

/// The operations of the log, each on a name in one of its directories,
/// each reached by a walk from the root that follows no symlink (RW14).
/// The adapter performs them as documented and decides nothing but what
/// this module's verdicts say.
pub trait Files {
    /// Creates the root, `gen/` and `holders/` (`mkdir` 0700, an existing
    /// one kept) and checks each is a real directory this account
    /// controls. Once per lock, again with `force` after a create found a
    /// directory missing.
    fn prepare(&mut self, force: bool) -> Result<(), FsError>;
    /// Reads the file: `open(O_RDONLY|O_NOFOLLOW|O_NONBLOCK)`, up to
    /// `buf.len()` bytes, which must be [`READ_LIMIT`](super::names::READ_LIMIT).
    fn read(&mut self, area: Area, name: &[u8], buf: &mut [u8]) -> Result<Read, FsError>;
    /// Creates the file with exactly `data` (`O_EXCL|O_NOFOLLOW`, 0600),
    /// `fsync`ed if `durable`; its identity. A failure after the create
    /// removes the name again. `EEXIST` when the name exists.
    fn create(
        &mut self,
        area: Area,
        name: &[u8],
        data: &[u8],
        durable: bool,
    ) -> Result<FileId, FsError>;
    /// Rewrites the file from offset 0 without truncating, only if it is
    /// still the regular file `id` with one link ([`overwrite_fits`]);
    /// `false` if it is missing or not that file.
    fn overwrite(
        &mut self,
        area: Area,
        name: &[u8],
        data: &[u8],
        id: FileId,
    ) -> Result<bool, FsError>;
    /// Links `from` to the new name `to` (`linkat`, no follow, never
    /// replacing); `true` when `to` names `from`'s file afterwards, whatever
    /// the call answered ([`link_landed`]).
    fn link(&mut self, area: Area, from: &[u8], to: &[u8]) -> Result<bool, FsError>;
    /// Renames `from` over `to` (`renameat`); `false` where the platform
    /// refuses to replace a file in use.
    fn replace(&mut self, area: Area, from: &[u8], to: &[u8]) -> Result<bool, FsError>;
    /// Removes the name; one already gone is not an error.
    fn unlink(&mut self, area: Area, name: &[u8]) -> Result<(), FsError>;
    /// Calls `visit` with each name of the directory; a missing directory
    /// has none.
    fn list(&mut self, area: Area, visit: &mut dyn FnMut(&[u8])) -> Result<(), FsError>;
    /// Makes the directory's names durable (`fsync` of the directory):
    /// after it, a host crash keeps every link, rename and unlink made in
    /// it so far. filelock never syncs a directory; swaplock syncs `gen/`
    /// before it reports a grant, so that a crash cannot lose the link of
    /// a generation handed out as a fencing token (PROTOCOL 16, C-RW5).
    fn sync(&mut self, area: Area) -> Result<(), FsError>;
}

/// Whether an error means the name is missing (`ENOENT`, or `ESTALE`: a
/// network filesystem's handle of a file a peer removed).
pub fn missing(e: Errno) -> bool {
    e == Errno::NOENT || e == Errno::STALE
}

/// Whether an error of the walk's `open(O_DIRECTORY|O_NOFOLLOW)` means the
/// name is not a real directory: `ELOOP` (a symlink), `EMLINK` (a symlink,
/// on FreeBSD), `ENOTDIR`.
pub fn refused_by_walk(e: Errno) -> bool {
    e == Errno::LOOP || e == Errno::MLINK || e == Errno::NOTDIR
}

/// The owner of a directory, and whether its parent is sticky, as the
/// ownership rule reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    /// `st_uid`.
    pub uid: u32,
    /// Whether `S_ISVTX` is set (only asked of the parent).
    pub sticky: bool,
}

/// The account that controls `dir` when that is neither this process's
/// (`euid`) nor the owner of its sticky `parent` (RW14): under a sticky
/// parent such as `/tmp` only the owner can rename a directory away, so one
/// owned by another account is outside the lock's control. Without the
/// sticky bit anyone who could plant it could move ours too: `None`.
pub fn foreign_owner(dir: Owner, parent: Owner, euid: u32) -> Option<u32> {
    (parent.sticky && dir.uid != euid && dir.uid != parent.uid).then_some(dir.uid)
}

/// Whether a holder record may be rewritten through the descriptor whose
/// `fstat` is `st` (RW9): a regular file, the one created (`id`), with
/// one name. A second name marks a file that inherited a removed record's
/// inode number.
pub fn overwrite_fits(st: &Stat, id: FileId) -> bool {
    if active(Mutant::RwOverwriteUnchecked) {
        return true;
    }
    st.kind == NodeKind::Regular && st.id == id && st.nlink == 1
}

/// Whether a link landed (RW3): both names lead to one file. An NFS
/// retransmit can report a link that landed as `EEXIST`, and an `EEXIST`
/// can be this very link answered twice: the identity decides.
pub fn link_landed(from: Option<FileId>, to: Option<FileId>) -> bool {
    from.is_some() && from == to
}

/// What a `link` of `from` to `to` came to (RW3), from the call's answer
/// and the identities the two names show afterwards (`lstat`, `None` for
/// a name that is missing): `true` when it landed ([`link_landed`]),
/// whatever the call answered; `false` when it did not and the call
/// answered `EEXIST` (a peer's link holds the name), or success while a
/// name is missing (our temporary swept from under a stalled commit); an
/// error otherwise: [`FsError::NoHardLinks`] where the filesystem has none
/// ([`no_hard_links`]), which the identities are not asked about, and
/// [`FsError::LinkNotOneFile`] where the call answered success and both
/// names stand, as two files: a filesystem that shows a hard link's names
/// as two files (sshfs), or a peer's link made in the name after ours was
/// removed (a committer stopped for a window of commits, a log wiped in
/// place). The commit tells them apart by the bytes at the name.
pub fn link_outcome(
    call: Result<(), Errno>,
    from: Option<FileId>,
    to: Option<FileId>,
) -> Result<bool, FsError> {
    if let Err(e) = call {
        if no_hard_links(e) {
            return Err(FsError::NoHardLinks(e));
        }
    }
    if active(Mutant::RwLinkByReturnCode) {
        return match call {
            Ok(()) => Ok(true),
            Err(e) if e == Errno::EXIST => Ok(false),
            Err(e) => Err(FsError::Os(e)),
        };
    }
    if link_landed(from, to) {
        return Ok(true);
    }
    match call {
        Ok(()) if from.is_some() && to.is_some() => Err(FsError::LinkNotOneFile),
        Ok(()) => Ok(false),
        Err(e) if e == Errno::EXIST => Ok(false),
        Err(e) => Err(FsError::Os(e)),
    }
}

/// Whether a `link` error means the filesystem has no hard links: `ENOSYS`,
/// `EXDEV`, `ENOTSUP`/`EOPNOTSUPP`, and `EPERM`, which Linux returns where
/// the filesystem has no `link` operation (vfat, exFAT). filelock reads
/// `EPERM` as a plain permission error (PROTOCOL 16.9); on our own
/// temporary file, just created, it can mean nothing else.
pub fn no_hard_links(e: Errno) -> bool {
    e == Errno::NOSYS
        || e == Errno::XDEV
        || e == Errno::NOTSUP
        || e == Errno::OPNOTSUPP
        || e == Errno::PERM
}
