//! A filesystem in memory: one directory of names pointing at inodes, with
//! what the protocol's races depend on.
//!
//! - An inode stays allocated while a name links it or a descriptor holds it
//!   open (a pin included); once neither does, its number is freed, and the
//!   next file gets the **lowest freed number**, as ext4 hands them out.
//! - Modification and change times come from the filesystem's clock, cut to
//!   a settable granularity (NFS and FAT store coarse times), the change
//!   time to its own where it is finer (Linux vfat from 4.19 to 5.18 kept
//!   mtimes to 2 s and change times to 10 ms; since 5.19 its change time
//!   is the mtime); an owner may set any mtime.
//! - `O_EXCL` creation, `O_NOFOLLOW` opens (a symlink gives `ELOOP`, except
//!   to an `O_PATH` pin, which holds the link itself), rename, unlink,
//!   exchange of two names, or a filesystem that refuses the exchange.
//! - Faults to inject: short writes, `EIO` and `ENOSPC` from writes, and
//!   (applied by `SimOs` before the model sees the call) any syscall but
//!   `close` failing with one of [`SYSCALL_FAULTS`].
//! - Power loss, where [`Faults::power`] is set (`disk`): a disk beside
//!   what the processes see, holding the journal's last commit and each
//!   file's data as of its last sync; a cut puts it back.
//! - Windows rules, when [`Fs::windows`] is set: a descriptor records
//!   whether it has delete access and whether it shares delete; a file open
//!   without delete sharing cannot be renamed, deleted or opened with delete
//!   access by anyone (a sharing violation, `EACCES`), a file can be renamed
//!   or deleted through a handle with delete access, and there is no
//!   exchange. A delete takes the name at once, as POSIX-semantics deletes
//!   do (a classic delete leaves it "pending" until the last handle closes,
//!   which only refuses creates at the deleted name for that long).

mod disk;

use std::collections::{BTreeMap, BTreeSet};
use swaplock_core::decide::{FileId, FileTime};
use swaplock_core::soft::{NodeKind, Stat};
use swaplock_core::Errno;

/// The device number every file in the model has.
pub const DEV: u64 = 7;

/// What an inode is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// A regular file and its bytes.
    File(Vec<u8>),
    /// A symbolic link and its target.
    Symlink(Vec<u8>),
}

/// One inode.
#[derive(Clone, Debug)]
pub struct Inode {
    /// Its content.
    pub node: Node,
    /// Names linking it.
    pub nlink: u32,
    /// Descriptors holding it open.
    pub open: u32,
    /// Modification time.
    pub mtime: FileTime,
    /// Change time.
    pub ctime: FileTime,
    /// Which incarnation this is: a number no other inode ever had.
    pub generation: u64,
    /// Created unnamed and never linked yet: `linkat` may give it a name.
    pub linkable: bool,
}

/// How a descriptor was opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// For writing.
    Write,
    /// For reading (with a read offset).
    Read(usize),
    /// `O_PATH`: a pin.
    Path,
}

/// An open descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Desc {
    /// The inode.
    pub ino: u64,
    /// How it was opened.
    pub access: Access,
    /// Windows: opened with delete access.
    pub delete: bool,
    /// Windows: shares delete with other handles.
    pub share_delete: bool,
}

/// Faults the filesystem injects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// The filesystem refuses `RENAME_EXCHANGE` (as NFS and SMB do).
    pub no_exchange: bool,
    /// Writes write at most this many bytes (0: no limit).
    pub short_writes: usize,
    /// One write in this many fails, with `EIO` or `ENOSPC` (0: none).
    pub eio_one_in: u64,
    /// Never hand out a freed inode number again (isolates races that do
    /// not need inode reuse).
    pub fresh_inodes: bool,
    /// The directory offers unnamed files (`O_TMPFILE`, then `linkat`);
    /// without them a marker is created by name and then written.
    pub unnamed: bool,
    /// The filesystem renames exclusively (`RENAME_NOREPLACE`, as a local
    /// one such as vfat): without unnamed files a marker is written under
    /// a write name and renamed to the lock path.
    pub exclusive_rename: bool,
    /// One syscall in this many fails before it is applied, with an error
    /// drawn from [`SYSCALL_FAULTS`] (0: none). Every call of acquire,
    /// release, takeover, recovery and heartbeat may fail so, except
    /// `close`, which cannot.
    pub syscall_one_in: u64,
    /// From this long after the start (by the filesystem's clock) no new
    /// inode can be made: creating a file, named or unnamed, or a symlink
    /// fails with `ENOSPC` for good, as on a filesystem out of inodes.
    /// Names of existing files can still be made, moved and removed.
    pub full_after: Option<std::time::Duration>,
    /// An exclusive create over an existing name fails with `EPERM`, not
    /// `EEXIST`, as through an SFTP client (sshfs).
    pub exists_as_eperm: bool,
    /// One kernel lock call in this many answers `EINTR` (0: none): a
    /// signal handled while the call waited. Not a failure: the lock call
    /// is made again.
    pub interrupted_locks: u64,
    /// Syscall faults the scenario plans rather than draws: each fails
    /// one given call of one process, whatever the random source says.
    pub planned: &'static [Planned],
    /// The machine may lose power: the filesystem keeps what its journal
    /// last committed ([`Fs::commit`]), each file's data as it was last
    /// synced, and a schedule may cut the power ([`Fs::power_cut`]).
    pub power: bool,
}

/// A syscall fault a scenario plans: the `nth` call (counted from 1) of
/// process `who` whose trace line begins with `call` (`"pwrite"`,
/// `"futimens"`, `"list"`, `"rename a.lock.restore"`) fails with `errno`
/// before it is applied. For a race that needs one failure at one place,
/// which one in [`Faults::syscall_one_in`] would draw too rarely.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planned {
    /// The process, by its index in the scenario.
    pub who: usize,
    /// How the call's trace line begins.
    pub call: &'static str,
    /// Which of those calls fails, from 1.
    pub nth: u32,
    /// The error it answers.
    pub errno: Errno,
    /// Whether the call is made all the same, its reply lost: a FUSE
    /// server's `EINTR` after the server acted, an NFS reply lost after
    /// the server applied the call.
    pub made: bool,
}

impl Faults {
    /// Whether any syscall may fail by injection, drawn or planned: the
    /// oracle excuses a failing release only then.
    pub fn injects_syscall_failures(&self) -> bool {
        self.syscall_one_in > 0 || !self.planned.is_empty()
    }

    /// These faults with every injected failure switched off (failing
    /// writes and syscalls); what the filesystem is (no exchange, unnamed
    /// files, coarse times, short writes, fresh inodes) stays.
    pub fn without_failures(self) -> Self {
        Faults {
            eio_one_in: 0,
            syscall_one_in: 0,
            full_after: None,
            planned: &[],
            ..self
        }
    }
}

/// The errors an injected syscall fault returns, with their Linux numbers
/// (the core names only the ones it decides on): a full disk, no
/// descriptor left in the process or in the system, a name too long, a
/// failing disk, a signal, a permission refused.
pub const SYSCALL_FAULTS: [(Errno, &str); 7] = [
    (Errno::NOSPC, "ENOSPC"),
    (Errno::from_raw(24), "EMFILE"),
    (Errno::from_raw(23), "ENFILE"),
    (Errno::from_raw(36), "ENAMETOOLONG"),
    (Errno::IO, "EIO"),
    (Errno::INTR, "EINTR"),
    (Errno::ACCES, "EACCES"),
];

/// The model filesystem: one directory.
#[derive(Clone, Debug, Default)]
pub struct Fs {
    /// Names in the directory.
    pub names: BTreeMap<Vec<u8>, u64>,
    /// Allocated inodes by number.
    pub inodes: BTreeMap<u64, Inode>,
    /// Freed inode numbers, handed out lowest first.
    free: BTreeSet<u64>,
    next_ino: u64,
    /// Open descriptors by handle.
    pub descs: BTreeMap<u32, Desc>,
    next_desc: u32,
    generations: u64,
    /// The filesystem's clock, in nanoseconds since the epoch.
    pub clock: i128,
    /// The clock's reading at the start.
    start: i128,
    /// The granularity of file times, in nanoseconds (1: exact).
    pub granularity: i128,
    /// The granularity of change times, in nanoseconds: never coarser
    /// than [`Fs::granularity`], so that no mtime is later than its file's
    /// change time.
    pub ctime_granularity: i128,
    /// Injected faults.
    pub faults: Faults,
    /// The state of the fault injector's generator.
    pub fault_rng: u64,
    /// Whether Windows rules apply (see the module docs).
    pub windows: bool,
    /// Kernel locks (`fcntl` on byte 0, or `flock`) by inode: the
    /// descriptor that holds each. A lock belongs to its descriptor (an
    /// open file description's lock), so closing that descriptor, or the
    /// exit of its process, releases it. A simulated process holds one
    /// descriptor of the lock file at a time, so a classic lock, the
    /// process's, would act the same.
    pub locks: BTreeMap<u64, u32>,
    /// What a power cut leaves ([`Faults::power`]): the directory as the
    /// journal last committed it.
    disk: disk::Disk,
    /// Each file's data as it was last synced, by its inode's generation.
    synced: BTreeMap<u64, Node>,
}

impl Fs {
    /// An empty filesystem whose clock starts at `clock` nanoseconds.
    pub fn new(clock: i128, granularity: i128) -> Self {
        Fs {
            next_ino: 11,
            granularity: granularity.max(1),
            ctime_granularity: granularity.max(1),
            clock,
            start: clock,
            ..Default::default()
        }
    }

    fn now(&self) -> FileTime {
        self.cut(self.granularity)
    }

    /// The clock's reading cut to the change times' granularity.
    fn now_ctime(&self) -> FileTime {
        self.cut(self.ctime_granularity.clamp(1, self.granularity))
    }

    fn cut(&self, granularity: i128) -> FileTime {
        let t = self.clock - self.clock.rem_euclid(granularity);
        FileTime {
            sec: t.div_euclid(1_000_000_000) as i64,
            nsec: t.rem_euclid(1_000_000_000) as u32,
        }
    }

    fn alloc(&mut self, node: Node) -> u64 {
        let reuse = if self.faults.fresh_inodes {
            None
        } else {
            self.free.pop_first()
        };
        let ino = match reuse {
            Some(ino) => ino,
            None => {
                self.next_ino += 1;
                self.next_ino
            }
        };
        let (now, changed) = (self.now(), self.now_ctime());
        self.generations += 1;
        let generation = self.generations;
        self.inodes.insert(
            ino,
            Inode {
                node,
                nlink: 0,
                open: 0,
                mtime: now,
                ctime: changed,
                generation,
                linkable: false,
            },
        );
        ino
    }

    fn release(&mut self, ino: u64) {
        if let Some(i) = self.inodes.get(&ino) {
            if i.nlink == 0 && i.open == 0 {
                self.inodes.remove(&ino);
                self.free.insert(ino);
            }
        }
    }

    fn open_desc(&mut self, ino: u64, access: Access) -> u32 {
        // Outside Windows rules sharing is moot; under them, markers are
        // written through handles with delete access that deny delete
        // sharing, and pins and reads share everything.
        let marker = access == Access::Write;
        self.open_desc_sharing(ino, access, marker)
    }

    /// A descriptor of `ino`; with `delete`, it has delete access and
    /// denies delete sharing (Windows rules).
    fn open_desc_sharing(&mut self, ino: u64, access: Access, delete: bool) -> u32 {
        self.next_desc += 1;
        self.descs.insert(
            self.next_desc,
            Desc {
                ino,
                access,
                delete,
                share_delete: !delete,
            },
        );
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.open += 1;
        }
        self.next_desc
    }

    fn desc(&self, fd: u32) -> Result<Desc, Errno> {
        self.descs.get(&fd).copied().ok_or(Errno::BADF)
    }

    fn stat_of(&self, ino: u64) -> Stat {
        let i = &self.inodes[&ino];
        Stat {
            id: FileId { dev: DEV, ino },
            kind: match i.node {
                Node::File(_) => NodeKind::Regular,
                Node::Symlink(_) => NodeKind::Symlink,
            },
            nlink: u64::from(i.nlink),
            mtime: i.mtime,
            ctime: i.ctime,
        }
    }

    fn touch_change(&mut self, ino: u64, data: bool) {
        let (now, changed) = (self.now(), self.now_ctime());
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.ctime = changed;
            if data {
                i.mtime = now;
            }
        }
    }

    /// Links a new inode of `node` under `name`, as `O_CREAT|O_EXCL` or
    /// `symlink(2)` would.
    pub fn link_new(&mut self, name: &[u8], node: Node) -> Result<u64, Errno> {
        if self.names.contains_key(name) {
            return Err(Errno::EXIST);
        }
        self.inode_left()?;
        let ino = self.alloc(node);
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.nlink = 1;
        }
        self.names.insert(name.to_vec(), ino);
        Ok(ino)
    }

    /// `ENOSPC` once the filesystem is out of inodes
    /// ([`Faults::full_after`]).
    fn inode_left(&self) -> Result<(), Errno> {
        match self.faults.full_after {
            Some(after) if self.clock - self.start >= after.as_nanos() as i128 => Err(Errno::NOSPC),
            _ => Ok(()),
        }
    }

    /// `open(name, O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW)`.
    pub fn create_new(&mut self, name: &[u8]) -> Result<u32, Errno> {
        let ino = self
            .link_new(name, Node::File(Vec::new()))
            .map_err(|e| match e {
                e if e == Errno::EXIST && self.faults.exists_as_eperm => Errno::PERM,
                e => e,
            })?;
        Ok(self.open_desc(ino, Access::Write))
    }

    /// `open(".", O_TMPFILE|O_WRONLY)`: a file with no name, which vanishes
    /// on its last close unless [`Fs::link_fd`] names it.
    pub fn create_unnamed(&mut self) -> Result<u32, Errno> {
        if !self.faults.unnamed {
            return Err(Errno::OPNOTSUPP);
        }
        self.inode_left()?;
        let ino = self.alloc(Node::File(Vec::new()));
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.linkable = true;
        }
        Ok(self.open_desc(ino, Access::Write))
    }

    /// `linkat("/proc/self/fd/N", name, AT_SYMLINK_FOLLOW)`: names the file
    /// `fd` holds, never replacing `name`. A file with no name left can be
    /// linked only if it was created unnamed and never linked (`ENOENT`
    /// otherwise, as Linux answers).
    pub fn link_fd(&mut self, fd: u32, name: &[u8]) -> Result<(), Errno> {
        let ino = self.desc(fd)?.ino;
        let i = &self.inodes[&ino];
        if i.nlink == 0 && !i.linkable {
            return Err(Errno::NOENT);
        }
        if self.names.contains_key(name) {
            return Err(Errno::EXIST);
        }
        self.names.insert(name.to_vec(), ino);
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.nlink += 1;
            i.linkable = false;
        }
        self.touch_change(ino, false);
        Ok(())
    }

    /// `open(name, O_RDONLY|O_NOFOLLOW)`.
    pub fn open_read(&mut self, name: &[u8]) -> Result<u32, Errno> {
        let ino = *self.names.get(name).ok_or(Errno::NOENT)?;
        if let Node::Symlink(_) = self.inodes[&ino].node {
            return Err(Errno::LOOP);
        }
        Ok(self.open_desc(ino, Access::Read(0)))
    }

    /// `open(name, O_RDWR|O_CREAT|O_NOFOLLOW)`: the file at `name`, created
    /// empty where there is none; and whether this open created it. An
    /// existing file is opened for reading: the model's lock call needs
    /// no more.
    pub fn open_or_create(&mut self, name: &[u8]) -> Result<(u32, bool), Errno> {
        match self.names.contains_key(name) {
            true => self.open_read(name).map(|fd| (fd, false)),
            false => self.create_new(name).map(|fd| (fd, true)),
        }
    }

    /// A kernel lock of `fd`'s file, not waiting: `EAGAIN` while another
    /// descriptor holds it.
    pub fn lock(&mut self, fd: u32) -> Result<(), Errno> {
        let ino = self.desc(fd)?.ino;
        match self.locks.get(&ino) {
            Some(&holder) if holder != fd => Err(Errno::AGAIN),
            _ => {
                self.locks.insert(ino, fd);
                Ok(())
            }
        }
    }

    /// `open(name, O_PATH|O_NOFOLLOW)`: holds the inode, even a symlink's.
    /// Under Windows rules, a read open that shares everything.
    pub fn pin(&mut self, name: &[u8]) -> Result<u32, Errno> {
        let ino = *self.names.get(name).ok_or(Errno::NOENT)?;
        Ok(self.open_desc(ino, Access::Path))
    }

    /// Windows: an open of `name` with delete access that shares read and
    /// write, refused while someone holds the file without delete sharing
    /// (a holder, or another breaker's such open).
    pub fn open_to_move(&mut self, name: &[u8]) -> Result<u32, Errno> {
        if !self.windows {
            return Err(Errno::INVAL);
        }
        let ino = *self.names.get(name).ok_or(Errno::NOENT)?;
        self.deletable(ino)?;
        Ok(self.open_desc_sharing(ino, Access::Path, true))
    }

    /// Under Windows rules, `EACCES` (a sharing violation) if a handle
    /// denies delete sharing on `ino`.
    pub fn deletable(&self, ino: u64) -> Result<(), Errno> {
        if self.windows && self.descs.values().any(|d| d.ino == ino && !d.share_delete) {
            return Err(Errno::ACCES);
        }
        Ok(())
    }

    /// The name linking the file a handle with delete access holds.
    fn handle_name(&self, fd: u32) -> Result<Vec<u8>, Errno> {
        let d = self.desc(fd)?;
        if !self.windows || !d.delete {
            return Err(Errno::ACCES);
        }
        self.names
            .iter()
            .find(|(_, &ino)| ino == d.ino)
            .map(|(n, _)| n.clone())
            .ok_or(Errno::NOENT)
    }

    /// Windows: renames the file `fd` holds to `to`, never replacing.
    pub fn rename_file(&mut self, fd: u32, to: &[u8]) -> Result<(), Errno> {
        let from = self.handle_name(fd)?;
        if self.names.contains_key(to) {
            return Err(Errno::EXIST);
        }
        // The handle's delete access was granted at its open: other
        // handles' sharing no longer matters.
        self.move_name(&from, to)
    }

    /// Windows: deletes the file `fd` holds.
    pub fn remove_file(&mut self, fd: u32) -> Result<(), Errno> {
        let name = self.handle_name(fd)?;
        self.unlink_name(&name)
    }

    /// `link(from, to)`: a new name for the file `from` links, never
    /// replacing `to`; with `follow`, a symlink at `from` is followed to
    /// the file its target names (`AT_SYMLINK_FOLLOW`).
    pub fn link(&mut self, from: &[u8], to: &[u8], follow: bool) -> Result<(), Errno> {
        let mut ino = *self.names.get(from).ok_or(Errno::NOENT)?;
        if follow {
            if let Node::Symlink(target) = &self.inodes[&ino].node {
                ino = *self.names.get(target.as_slice()).ok_or(Errno::NOENT)?;
            }
        }
        if self.names.contains_key(to) {
            return Err(Errno::EXIST);
        }
        self.names.insert(to.to_vec(), ino);
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.nlink += 1;
        }
        self.touch_change(ino, false);
        Ok(())
    }

    /// `write(fd, buf)`, appending.
    pub fn write(&mut self, fd: u32, buf: &[u8]) -> Result<usize, Errno> {
        let d = self.desc(fd)?;
        if d.access != Access::Write {
            return Err(Errno::BADF);
        }
        if self.faults.eio_one_in > 0 {
            self.fault_rng = self
                .fault_rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if (self.fault_rng >> 33).is_multiple_of(self.faults.eio_one_in) {
                // A full disk and a failing one, by another bit of the draw.
                return Err(if self.fault_rng >> 63 == 0 {
                    Errno::IO
                } else {
                    Errno::NOSPC
                });
            }
        }
        let n = match self.faults.short_writes {
            0 => buf.len(),
            limit => buf.len().min(limit),
        };
        if let Some(Inode {
            node: Node::File(data),
            ..
        }) = self.inodes.get_mut(&d.ino)
        {
            data.extend_from_slice(&buf[..n]);
        }
        self.touch_change(d.ino, true);
        Ok(n)
    }

    /// `pwrite(fd, buf, offset)`.
    pub fn write_at(&mut self, fd: u32, buf: &[u8], offset: usize) -> Result<usize, Errno> {
        let d = self.desc(fd)?;
        if d.access != Access::Write {
            return Err(Errno::BADF);
        }
        if let Some(Inode {
            node: Node::File(data),
            ..
        }) = self.inodes.get_mut(&d.ino)
        {
            if data.len() < offset + buf.len() {
                data.resize(offset + buf.len(), 0);
            }
            data[offset..offset + buf.len()].copy_from_slice(buf);
        }
        self.touch_change(d.ino, true);
        Ok(buf.len())
    }

    /// `ftruncate(fd, len)`.
    pub fn truncate(&mut self, fd: u32, len: usize) -> Result<(), Errno> {
        let d = self.desc(fd)?;
        if let Some(Inode {
            node: Node::File(data),
            ..
        }) = self.inodes.get_mut(&d.ino)
        {
            data.resize(len, 0);
        }
        self.touch_change(d.ino, true);
        Ok(())
    }

    /// `futimens(fd, NULL)`.
    pub fn touch(&mut self, fd: u32) -> Result<(), Errno> {
        let d = self.desc(fd)?;
        self.touch_change(d.ino, true);
        Ok(())
    }

    /// Sets an inode's mtime, as its owner may (`utime`).
    pub fn set_mtime(&mut self, name: &[u8], mtime: FileTime) -> Result<(), Errno> {
        let ino = *self.names.get(name).ok_or(Errno::NOENT)?;
        self.touch_change(ino, false);
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.mtime = mtime;
        }
        Ok(())
    }

    /// `read(fd, buf)`.
    pub fn read(&mut self, fd: u32, buf: &mut [u8]) -> Result<usize, Errno> {
        let d = self.desc(fd)?;
        let Access::Read(offset) = d.access else {
            return Err(Errno::BADF);
        };
        let Node::File(data) = &self.inodes[&d.ino].node else {
            return Err(Errno::INVAL);
        };
        // The file may have shrunk under the reader (a released record).
        let start = offset.min(data.len());
        let n = (data.len() - start).min(buf.len());
        buf[..n].copy_from_slice(&data[start..start + n]);
        self.descs.insert(
            fd,
            Desc {
                access: Access::Read(offset + n),
                ..d
            },
        );
        Ok(n)
    }

    /// `fstat(fd)`.
    pub fn fstat(&self, fd: u32) -> Result<Stat, Errno> {
        Ok(self.stat_of(self.desc(fd)?.ino))
    }

    /// `close(fd)`: the inode is freed if nothing else holds it.
    pub fn close(&mut self, fd: u32) {
        self.locks.retain(|_, holder| *holder != fd);
        if let Some(d) = self.descs.remove(&fd) {
            if let Some(i) = self.inodes.get_mut(&d.ino) {
                i.open -= 1;
            }
            self.release(d.ino);
        }
    }

    /// `lstat(name)`.
    pub fn lstat(&self, name: &[u8]) -> Result<Stat, Errno> {
        self.names
            .get(name)
            .map(|&ino| self.stat_of(ino))
            .ok_or(Errno::NOENT)
    }

    /// `renameat2(a, b, RENAME_EXCHANGE)`.
    pub fn exchange(&mut self, a: &[u8], b: &[u8]) -> Result<(), Errno> {
        if self.faults.no_exchange || self.windows {
            return Err(Errno::INVAL);
        }
        let ia = *self.names.get(a).ok_or(Errno::NOENT)?;
        let ib = *self.names.get(b).ok_or(Errno::NOENT)?;
        self.names.insert(a.to_vec(), ib);
        self.names.insert(b.to_vec(), ia);
        self.touch_change(ia, false);
        self.touch_change(ib, false);
        Ok(())
    }

    /// `rename(from, to)`, replacing `to`.
    pub fn rename(&mut self, from: &[u8], to: &[u8]) -> Result<(), Errno> {
        let ino = *self.names.get(from).ok_or(Errno::NOENT)?;
        self.deletable(ino)?;
        if let Some(&old) = self.names.get(to) {
            self.deletable(old)?;
        }
        self.move_name(from, to)
    }

    /// `renameat2(from, to, RENAME_NOREPLACE)`: `EEXIST` if `to` exists.
    pub fn rename_noreplace(&mut self, from: &[u8], to: &[u8]) -> Result<(), Errno> {
        if !self.faults.exclusive_rename || self.windows {
            return Err(Errno::INVAL);
        }
        let ino = *self.names.get(from).ok_or(Errno::NOENT)?;
        self.deletable(ino)?;
        if self.names.contains_key(to) {
            return Err(Errno::EXIST);
        }
        self.move_name(from, to)
    }

    /// Moves the name `from` to `to`, replacing `to`.
    fn move_name(&mut self, from: &[u8], to: &[u8]) -> Result<(), Errno> {
        let ino = self.names.remove(from).ok_or(Errno::NOENT)?;
        if let Some(old) = self.names.insert(to.to_vec(), ino) {
            if let Some(i) = self.inodes.get_mut(&old) {
                i.nlink -= 1;
            }
            self.release(old);
        }
        self.touch_change(ino, false);
        Ok(())
    }

    /// `unlink(name)`.
    pub fn unlink(&mut self, name: &[u8]) -> Result<(), Errno> {
        let ino = *self.names.get(name).ok_or(Errno::NOENT)?;
        self.deletable(ino)?;
        self.unlink_name(name)
    }

    fn unlink_name(&mut self, name: &[u8]) -> Result<(), Errno> {
        let ino = self.names.remove(name).ok_or(Errno::NOENT)?;
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.nlink -= 1;
        }
        self.touch_change(ino, false);
        self.release(ino);
        Ok(())
    }

    /// The bytes of the file a name links, if it is a regular file.
    pub fn content(&self, name: &[u8]) -> Option<&[u8]> {
        match &self.inodes.get(self.names.get(name)?)?.node {
            Node::File(data) => Some(data),
            Node::Symlink(_) => None,
        }
    }

    /// The inode a name links.
    pub fn ino(&self, name: &[u8]) -> Option<u64> {
        self.names.get(name).copied()
    }
}

impl Fs {
    /// The incarnation of the inode a name links.
    pub fn generation(&self, name: &[u8]) -> Option<u64> {
        self.inodes.get(self.names.get(name)?).map(|i| i.generation)
    }
}
