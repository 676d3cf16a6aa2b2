//! The read-write lock's file operations on a POSIX system: each method of
//! [`swaplock_core::rw::files::Files`] as a walk from the log's root that
//! follows no symlink, then the syscalls the core's docs name, relative to
//! the directory opened. What a name's opens, reads and writes are is the
//! soft kinds' own ([`UnixOs`]); this module adds the walk, `mkdirat`,
//! `linkat`, `fsync` and the owner of a directory. Every verdict (a
//! replaced tree, a foreign owner, an overwrite that would miss, a link
//! that landed, a filesystem without hard links) is the core's.

// `stat` field types differ between targets (and between rustix's raw and
// libc backends); the casts widen where needed and are no-ops elsewhere.
#![allow(clippy::unnecessary_cast)]

use crate::soft::{Platform, UnixOs};
use core::marker::PhantomData;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags, CWD};
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use swaplock_core::decide::FileId;
use swaplock_core::rw::files::{
    foreign_owner, link_outcome, missing, no_hard_links, overwrite_fits, refused_by_walk, Area,
    Files, FsError, Owner, Read, Tree,
};
use swaplock_core::soft::{Dir, NodeKind};
use swaplock_core::Errno;

fn errno(e: rustix::io::Errno) -> Errno {
    Errno::from_raw(e.raw_os_error())
}

fn c_name(name: &[u8]) -> Result<CString, Errno> {
    CString::new(name).map_err(|_| Errno::INVAL)
}

/// A directory's identity and owner, from a raw `stat`.
fn owned(st: &crate::stat::RawStat) -> (FileId, Owner, bool) {
    let id = FileId {
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
    };
    let mode = st.st_mode as u32;
    let owner = Owner {
        uid: st.st_uid as u32,
        sticky: mode & 0o1000 != 0,
    };
    let directory = mode & 0o170000 == 0o040000;
    (id, owner, directory)
}

/// `openat(at, name, O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC)` — a
/// directory of the log, refusing a symlink (`ELOOP`) or a file
/// (`ENOTDIR`).
///
/// # References
/// - [`open(2)`](https://man7.org/linux/man-pages/man2/open.2.html)
pub fn open_dir_nofollow(at: BorrowedFd<'_>, name: &CStr) -> Result<OwnedFd, Errno> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(at, name, flags, Mode::empty()).map_err(errno)
}

/// `mkdirat(at, name, mode)` — a directory of the log.
///
/// # References
/// - [`mkdir(2)`](https://man7.org/linux/man-pages/man2/mkdir.2.html)
pub fn mkdir_at(at: BorrowedFd<'_>, name: &CStr, mode: u32) -> Result<(), Errno> {
    rustix::fs::mkdirat(at, name, crate::soft::permissions(mode)).map_err(errno)
}

/// `linkat(dir, from, dir, to, 0)` — a second name for `from`, never
/// replacing `to` and never following a symlink at `from`.
///
/// # References
/// - [`link(2)`](https://man7.org/linux/man-pages/man2/link.2.html)
pub fn link_at(dir: BorrowedFd<'_>, from: &CStr, to: &CStr) -> Result<(), Errno> {
    rustix::fs::linkat(dir, from, dir, to, AtFlags::empty()).map_err(errno)
}

/// `fsync(fd)` — the file's data on stable storage.
///
/// # References
/// - [`fsync(2)`](https://man7.org/linux/man-pages/man2/fsync.2.html)
pub fn fsync(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    rustix::fs::fsync(fd).map_err(errno)
}

/// `openat(dir, name, O_WRONLY|O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC)` — a holder
/// record to rewrite; `O_NONBLOCK` so that a FIFO planted there answers
/// `ENXIO` instead of blocking.
///
/// # References
/// - [`open(2)`](https://man7.org/linux/man-pages/man2/open.2.html)
pub fn open_write(dir: BorrowedFd<'_>, name: &CStr) -> Result<OwnedFd, Errno> {
    let flags = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    rustix::fs::openat(dir, name, flags, Mode::empty()).map_err(errno)
}

/// `geteuid()` — the account the ownership rule compares with.
///
/// # References
/// - [`geteuid(2)`](https://man7.org/linux/man-pages/man2/geteuid.2.html)
pub fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw() as u32
}

/// Writes all of `data` at the file's offset, as many calls as it takes.
fn write_all<P: Platform>(os: &mut UnixOs<'_, P>, fd: &OwnedFd, data: &[u8]) -> Result<(), Errno> {
    let mut at = 0;
    while at < data.len() {
        match os.write(fd, &data[at..]) {
            Ok(0) => return Err(Errno::IO),
            Ok(n) => at += n,
            Err(e) if e == Errno::INTR => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The files of one log, `<L>.rw`, on the system `P`.
pub struct RwFiles<P> {
    /// The root's absolute path.
    root: CString,
    /// Its parent's, whose owner the root's is judged against.
    parent: CString,
    /// The root, `gen/` and `holders/` as last admitted by the ownership
    /// rule: a directory seen before need not be judged again.
    admitted: [Option<FileId>; 3],
    prepared: bool,
    platform: PhantomData<P>,
}

fn slot(tree: Tree) -> usize {
    match tree {
        Tree::Root => 0,
        Tree::Area(Area::Generations) => 1,
        Tree::Area(Area::Holders) => 2,
    }
}

fn area_name(area: Area) -> &'static CStr {
    match area {
        Area::Generations => c"gen",
        Area::Holders => c"holders",
    }
}

/// An error of the walk: a replaced directory, or the system's.
fn walked(tree: Tree, e: Errno) -> FsError {
    match refused_by_walk(e) {
        true => FsError::TreeReplaced { tree, owner: None },
        false => FsError::Os(e),
    }
}

impl<P: Platform> RwFiles<P> {
    /// The files of the log whose root is the absolute path `root`
    /// (`canonical(L) + ".rw"`), with `parent` its directory.
    pub fn new(root: &[u8], parent: &[u8]) -> Result<Self, Errno> {
        Ok(RwFiles {
            root: c_name(root)?,
            parent: c_name(parent)?,
            admitted: [None; 3],
            prepared: false,
            platform: PhantomData,
        })
    }

    /// Admits the directory open as `dir` under the ownership rule,
    /// against its parent: the descriptor `parent`, or (for the root) the
    /// parent's path, followed as the system resolves it.
    fn admit(
        &mut self,
        tree: Tree,
        dir: BorrowedFd<'_>,
        parent: Option<BorrowedFd<'_>>,
    ) -> Result<(), FsError> {
        let st = crate::stat::fstat(dir).map_err(|e| FsError::Os(errno(e)))?;
        let (id, owner, _) = owned(&st);
        if self.admitted[slot(tree)] == Some(id) {
            return Ok(());
        }
        let above = match parent {
            Some(fd) => crate::stat::fstat(fd),
            None => crate::stat::stat_path(&self.parent, true),
        }
        .map_err(|e| FsError::Os(errno(e)))?;
        if let Some(uid) = foreign_owner(owner, owned(&above).1, effective_uid()) {
            return Err(FsError::TreeReplaced {
                tree,
                owner: Some(uid),
            });
        }
        self.admitted[slot(tree)] = Some(id);
        Ok(())
    }

    /// Opens the root, admitted.
    fn open_root(&mut self) -> Result<OwnedFd, FsError> {
        let root = open_dir_nofollow(CWD, &self.root).map_err(|e| walked(Tree::Root, e))?;
        self.admit(Tree::Root, root.as_fd(), None)?;
        Ok(root)
    }

    /// The walk (RW14): the root, then `area` relative to it, each
    /// without following a symlink and admitted by the ownership rule.
    fn walk(&mut self, area: Area) -> Result<OwnedFd, FsError> {
        let root = self.open_root()?;
        let tree = Tree::Area(area);
        let dir = open_dir_nofollow(root.as_fd(), area_name(area)).map_err(|e| walked(tree, e))?;
        self.admit(tree, dir.as_fd(), Some(root.as_fd()))?;
        Ok(dir)
    }

    /// Makes the directory `name` at `at` (kept if it exists) and checks
    /// what the name leads to: a real directory this account controls.
    fn make(
        &mut self,
        tree: Tree,
        at: BorrowedFd<'_>,
        name: &CStr,
        parent: Option<BorrowedFd<'_>>,
    ) -> Result<(), FsError> {
        match mkdir_at(at, name, 0o700) {
            Err(e) if e != Errno::EXIST => return Err(FsError::Os(e)),
            _ => {}
        }
        // mkdir has no O_NOFOLLOW: look at what the name is now.
        let st = crate::stat::statat(at, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| FsError::Os(errno(e)))?;
        let (id, owner, directory) = owned(&st);
        if !directory {
            return Err(FsError::TreeReplaced { tree, owner: None });
        }
        let above = match parent {
            Some(fd) => crate::stat::fstat(fd),
            None => crate::stat::stat_path(&self.parent, true),
        }
        .map_err(|e| FsError::Os(errno(e)))?;
        if let Some(uid) = foreign_owner(owner, owned(&above).1, effective_uid()) {
            return Err(FsError::TreeReplaced {
                tree,
                owner: Some(uid),
            });
        }
        self.admitted[slot(tree)] = Some(id);
        Ok(())
    }
}

impl<P: Platform> Files for RwFiles<P> {
    /// `mkdir -p` of the root's parent, then `mkdirat` 0700 of the root,
    /// `gen` and `holders`, each checked with `fstatat(AT_SYMLINK_NOFOLLOW)`.
    fn prepare(&mut self, force: bool) -> Result<(), FsError> {
        if self.prepared && !force {
            return Ok(());
        }
        if force {
            self.admitted = [None; 3];
        }
        let parent = std::path::Path::new(std::ffi::OsStr::from_bytes(self.parent.to_bytes()));
        std::fs::create_dir_all(parent)
            .map_err(|e| FsError::Os(Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))))?;
        let root = self.root.clone();
        self.make(Tree::Root, CWD, &root, None)?;
        let root = self.open_root()?;
        for area in [Area::Generations, Area::Holders] {
            self.make(
                Tree::Area(area),
                root.as_fd(),
                area_name(area),
                Some(root.as_fd()),
            )?;
        }
        self.prepared = true;
        Ok(())
    }

    /// The walk, then `openat(O_RDONLY|O_NOFOLLOW|O_NONBLOCK)`, `fstat`,
    /// and `read` until end of file or a full buffer.
    fn read(&mut self, area: Area, name: &[u8], buf: &mut [u8]) -> Result<Read, FsError> {
        let dir = match self.walk(area) {
            Err(FsError::Os(e)) if missing(e) => return Ok(Read::Missing),
            other => other?,
        };
        let mut os = UnixOs::<P>::on(&dir);
        let file = match os.open_read(name) {
            Err(e) if missing(e) => return Ok(Read::Missing),
            other => other.map_err(FsError::Os)?,
        };
        // A name a peer removed after the open answers ESTALE here on a
        // network filesystem whose server keeps no open state (NFSv3): it
        // is missing, as at the open.
        match os.fstat(&file) {
            Ok(st) if st.kind != NodeKind::Regular => return Ok(Read::Bytes(0)),
            Ok(_) => {}
            Err(e) if missing(e) => return Ok(Read::Missing),
            Err(e) => return Err(FsError::Os(e)),
        }
        let mut len = 0;
        while len < buf.len() {
            match os.read(&file, &mut buf[len..]) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e == Errno::INTR => {}
                Err(e) if missing(e) => return Ok(Read::Missing),
                Err(e) => return Err(FsError::Os(e)),
            }
        }
        Ok(Read::Bytes(len))
    }

    /// The walk, `openat(O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0600)`,
    /// `write`, `fsync` if durable, `fstat`; `unlinkat` of the name on a
    /// failure after the create (the name is unique to this call).
    fn create(
        &mut self,
        area: Area,
        name: &[u8],
        data: &[u8],
        durable: bool,
    ) -> Result<FileId, FsError> {
        let dir = self.walk(area)?;
        let mut os = UnixOs::<P>::on(&dir);
        let file = os.create_new(name, 0o600, false).map_err(FsError::Os)?;
        let written = write_all(&mut os, &file, data)
            .and_then(|()| match durable {
                true => fsync(file.as_fd()),
                false => Ok(()),
            })
            .and_then(|()| os.fstat(&file));
        drop(file);
        match written {
            Ok(st) => Ok(st.id),
            Err(e) => {
                let _ = os.unlink(name);
                Err(FsError::Os(e))
            }
        }
    }

    /// The walk, `openat(O_WRONLY|O_NOFOLLOW|O_NONBLOCK)`, `fstat`, and
    /// `write` from offset 0 only through the file created (RW9).
    fn overwrite(
        &mut self,
        area: Area,
        name: &[u8],
        data: &[u8],
        id: FileId,
    ) -> Result<bool, FsError> {
        let dir = match self.walk(area) {
            Err(FsError::Os(e)) if missing(e) => return Ok(false),
            other => other?,
        };
        let mut os = UnixOs::<P>::on(&dir);
        let file = match open_write(dir.as_fd(), &c_name(name).map_err(FsError::Os)?) {
            Err(e) if missing(e) || e == Errno::NXIO => return Ok(false),
            other => other.map_err(FsError::Os)?,
        };
        if !overwrite_fits(&os.fstat(&file).map_err(FsError::Os)?, id) {
            return Ok(false);
        }
        write_all(&mut os, &file, data).map_err(FsError::Os)?;
        Ok(true)
    }

    /// The walk, `linkat(dir, from, dir, to, 0)`, then `fstatat` of both
    /// names: the identities decide (RW3).
    fn link(&mut self, area: Area, from: &[u8], to: &[u8]) -> Result<bool, FsError> {
        let dir = self.walk(area)?;
        let (c_from, c_to) = (
            c_name(from).map_err(FsError::Os)?,
            c_name(to).map_err(FsError::Os)?,
        );
        let call = link_at(dir.as_fd(), &c_from, &c_to);
        if let Err(e) = call {
            if no_hard_links(e) {
                return Err(FsError::NoHardLinks(e));
            }
        }
        let mut os = UnixOs::<P>::on(&dir);
        let identity = |os: &mut UnixOs<'_, P>, name| os.lstat(name).ok().map(|st| st.id);
        let (from_id, to_id) = (identity(&mut os, from), identity(&mut os, to));
        link_outcome(call, from_id, to_id)
    }

    /// The walk, then `fsync` of the directory.
    fn sync(&mut self, area: Area) -> Result<(), FsError> {
        let dir = self.walk(area)?;
        fsync(dir.as_fd()).map_err(FsError::Os)
    }

    /// The walk, `renameat(dir, from, dir, to)`; `EPERM` and `EACCES` are
    /// a refusal to replace, answered `false`.
    fn replace(&mut self, area: Area, from: &[u8], to: &[u8]) -> Result<bool, FsError> {
        let dir = self.walk(area)?;
        match UnixOs::<P>::on(&dir).rename(from, to) {
            Ok(()) => Ok(true),
            Err(e) if e == Errno::PERM || e == Errno::ACCES => Ok(false),
            Err(e) => Err(FsError::Os(e)),
        }
    }

    /// The walk, `unlinkat(dir, name, 0)`; a name already gone, or one the
    /// system will not let us remove, is left.
    fn unlink(&mut self, area: Area, name: &[u8]) -> Result<(), FsError> {
        let dir = match self.walk(area) {
            Err(FsError::Os(e)) if missing(e) => return Ok(()),
            other => other?,
        };
        match UnixOs::<P>::on(&dir).unlink(name) {
            Err(e) if !(missing(e) || e == Errno::PERM || e == Errno::ACCES) => Err(FsError::Os(e)),
            _ => Ok(()),
        }
    }

    /// The walk, then `getdents64` (without `.` and `..`).
    fn list(&mut self, area: Area, visit: &mut dyn FnMut(&[u8])) -> Result<(), FsError> {
        let dir = match self.walk(area) {
            Err(FsError::Os(e)) if missing(e) => return Ok(()),
            other => other?,
        };
        UnixOs::<P>::on(&dir)
            .list(&mut |name| {
                if name != b"." && name != b".." {
                    visit(name);
                }
            })
            .map_err(FsError::Os)
    }
}
