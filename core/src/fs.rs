//! What a filesystem offers a lock (PROTOCOL 13.5): whether its kernel
//! locks exclude processes of other hosts or only those of this client,
//! whether an exclusive create is atomic between clients, whether it
//! exchanges two names. Pure: the adapter reads `statfs` and, for the
//! filesystems whose answer depends on the mount, the mount table
//! ([`parse_mountinfo_line`]); the decisions that follow are
//! [`kernel_lock_refusal`] and [`soft_lock_refusal`].

/// `statfs` `f_type` values the decisions read.
pub mod magic {
    /// FUSE: any userspace filesystem; its subtype (`fuse.sshfs`) names it.
    pub const FUSE: u64 = 0x6573_5546;
    /// NFS, every version.
    pub const NFS: u64 = 0x6969;
    /// The CIFS client (SMB 1 to 3), before and after its rename to smb.
    pub const CIFS: u64 = 0xFF53_4D42;
    /// The SMB 2/3 client's own magic (Linux 5.x and later).
    pub const SMB2: u64 = 0xFE53_4D42;
    /// The old smbfs.
    pub const SMB: u64 = 0x517B;
    /// 9p (v9fs).
    pub const V9FS: u64 = 0x0102_1997;
    /// CephFS.
    pub const CEPH: u64 = 0x00C3_6400;
    /// AFS (kAFS).
    pub const AFS: u64 = 0x5346_414F;
    /// ext2, ext3 and ext4.
    pub const EXT4: u64 = 0xEF53;
    /// XFS.
    pub const XFS: u64 = 0x5846_5342;
    /// Btrfs.
    pub const BTRFS: u64 = 0x9123_683E;
    /// tmpfs.
    pub const TMPFS: u64 = 0x0102_1994;
    /// F2FS (Android's data partitions).
    pub const F2FS: u64 = 0xF2F5_2010;
    /// FAT: vfat and msdos (SD cards, USB sticks).
    pub const FAT: u64 = 0x4D44;
    /// exFAT.
    pub const EXFAT: u64 = 0x2011_BAB0;
    /// overlayfs.
    pub const OVERLAY: u64 = 0x794C_7630;
}

/// The usual name of the filesystem of `f_type`, where this table knows
/// it.
pub fn magic_name(f_type: u64) -> Option<&'static str> {
    Some(match f_type {
        magic::FUSE => "fuse",
        magic::NFS => "nfs",
        magic::CIFS => "cifs",
        magic::SMB2 => "smb3",
        magic::SMB => "smbfs",
        magic::V9FS => "9p",
        magic::CEPH => "ceph",
        magic::AFS => "afs",
        magic::EXT4 => "ext4",
        magic::XFS => "xfs",
        magic::BTRFS => "btrfs",
        magic::TMPFS => "tmpfs",
        magic::F2FS => "f2fs",
        magic::FAT => "vfat",
        magic::EXFAT => "exfat",
        magic::OVERLAY => "overlay",
        _ => return None,
    })
}

/// How a filesystem renames without replacing (`renameat2(RENAME_NOREPLACE)`),
/// as the publication of a marker by an exclusive rename needs it
/// (PROTOCOL 7.2 step 3b).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExclusiveRename {
    /// Not trusted: a network filesystem's client checks its own cache of
    /// the directory (a name another host made may be missing from it) or
    /// refuses the flag; FUSE hands it to a daemon nothing here knows;
    /// overlayfs copies names up between layers; and any filesystem this
    /// table does not know.
    Untrusted,
    /// The kernel refuses an existing name under the directory's lock, and
    /// the rename is journaled (or lives in memory): ext4, XFS, Btrfs,
    /// F2FS, tmpfs.
    Journaled,
    /// The kernel refuses an existing name under the directory's lock, but
    /// nothing orders what the rename writes: FAT and exFAT give the new
    /// name an entry whose size and first cluster follow when the file is
    /// written back, and remove the old entry when the directory is; a
    /// power cut between leaves two entries on the same clusters, which the
    /// boot's check truncates. The filesystem is synced after the rename.
    Unjournaled,
}

/// How a filesystem of `f_type` renames without replacing.
pub fn exclusive_rename(f_type: u64) -> ExclusiveRename {
    match f_type {
        magic::EXT4 | magic::XFS | magic::BTRFS | magic::TMPFS | magic::F2FS => {
            ExclusiveRename::Journaled
        }
        magic::FAT | magic::EXFAT => ExclusiveRename::Unjournaled,
        _ => ExclusiveRename::Untrusted,
    }
}

/// Whether a filesystem's answer depends on what its mount table entry
/// says (its FUSE subtype, or its lock options), so the adapter reads it.
pub fn needs_mount_table(f_type: u64) -> bool {
    matches!(
        f_type,
        magic::FUSE | magic::NFS | magic::CIFS | magic::SMB2 | magic::SMB | magic::V9FS
    )
}

/// One line of `/proc/self/mountinfo` (proc(5)), the fields a decision
/// reads, borrowed from the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mount<'a> {
    /// The mounted device's `major:minor`, as `st_dev` of its files.
    pub dev: (u32, u32),
    /// The filesystem type: `ext4`, `nfs4`, `fuse.sshfs`, ...
    pub fstype: &'a [u8],
    /// The per-mount options (`rw,nosuid,...`).
    pub mount_options: &'a [u8],
    /// The per-superblock options (`vers=4.2,local_lock=none,...`).
    pub super_options: &'a [u8],
}

/// Reads one line of `/proc/self/mountinfo`: `ID PARENT MAJ:MIN ROOT
/// MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS`. `None`
/// for a line of another shape.
pub fn parse_mountinfo_line(line: &[u8]) -> Option<Mount<'_>> {
    // The kernel escapes blanks inside a field (`\040`): any blank
    // separates.
    let mut fields = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty());
    let _id = fields.next()?;
    let _parent = fields.next()?;
    let dev = fields.next()?;
    let _root = fields.next()?;
    let _mount_point = fields.next()?;
    let mount_options = fields.next()?;
    // Optional fields (`shared:1`, `master:2`, ...) up to the separator.
    fields.by_ref().find(|f| *f == b"-")?;
    let fstype = fields.next()?;
    let _source = fields.next()?;
    let super_options = fields.next().unwrap_or(b"");
    let colon = dev.iter().position(|&b| b == b':')?;
    let dev = (number(&dev[..colon])?, number(&dev[colon + 1..])?);
    Some(Mount {
        dev,
        fstype,
        mount_options,
        super_options,
    })
}

/// A decimal `u32`, all digits.
fn number(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u32, |n, &d| {
        if d.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u32::from(d - b'0'))
        } else {
            None
        }
    })
}

/// Who a filesystem's kernel locks exclude.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Reach {
    /// Every process that uses the file, on whichever host: a local
    /// filesystem, or a network one whose server keeps the locks.
    AllHosts,
    /// Only the processes that use this client mount: every host keeps
    /// its own locks (an SFTP or SMB client in userspace, NFS mounted
    /// `nolock`). A lock here lets another host hold it at once.
    ThisClient,
    /// Not known: a userspace filesystem this table does not name.
    Unknown,
}

/// Whether a filesystem does something, as far as its type tells.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Support {
    /// It does.
    Yes,
    /// It does not.
    No,
    /// Its type does not tell.
    Unknown,
}

/// What a filesystem offers a lock.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Traits {
    /// Whether its files live on another host (a network filesystem).
    pub remote: Support,
    /// Who its `fcntl` locks exclude.
    pub fcntl: Reach,
    /// Who its `flock` locks exclude.
    pub flock: Reach,
    /// Whether an exclusive create (`O_EXCL`) is atomic between clients:
    /// of two hosts creating one name, exactly one succeeds.
    pub exclusive_create: Support,
    /// Whether `renameat2(RENAME_EXCHANGE)` works.
    pub exchange: Support,
    /// Whether an exclusive create over an existing name fails with
    /// `EPERM` rather than `EEXIST` (an SFTP client).
    pub exists_as_eperm: bool,
    /// Whether what the filesystem is could be told: false for a type
    /// whose answer needs its mount table entry (FUSE, NFS, SMB, 9p) when
    /// that entry was not found (a file reached through another mount
    /// namespace, as `/proc/PID/root/...`; a lazily unmounted filesystem;
    /// no `/proc`).
    pub seen: bool,
    /// An NFS mount's version, as its options say.
    pub nfs: Option<Nfs>,
    /// The mount option that keeps this mount's kernel locks on this
    /// client (`nobrl` on SMB, `nolock` or `local_lock=...` on NFS), where
    /// one does: what a refusal names as the cause.
    pub local_locks_by: Option<&'static str>,
    /// Whether the server keeps a removed file's name while any client
    /// still has the file open, refusing every open of the name, a create
    /// included, until the last handle closes (SMB's "delete pending").
    pub deletes_pending: bool,
    /// Whether the client lets opens of one file that ask alike, by any
    /// process or thread of this host, share one server handle, and lets
    /// the locks of one handle that an open file description owns (`flock`,
    /// open file description `fcntl` locks) overlap (the kernel's SMB
    /// client): they may not exclude this host's processes.
    pub ofd_locks_shared: bool,
}

/// What an NFS mount's options say of its protocol (nfs(5)).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Nfs {
    /// `vers=` (or `nfsvers=`): the major and minor version; `None` where
    /// neither option is in the mount table.
    pub version: Option<(u8, u8)>,
    /// How late a regular file's attributes may show another host's
    /// change, in seconds: `acregmin` to `acregmax` (3 to 60 by default;
    /// `actimeo=N` sets both, `noac` makes both 0). A lease's watch reads
    /// through it (PROTOCOL 13.5).
    pub file_attributes: (u32, u32),
    /// The same for directories: `acdirmin` to `acdirmax` (30 to 60).
    pub dir_attributes: (u32, u32),
    /// `lookupcache=`: which answers of a name lookup the client keeps.
    pub lookups: Lookups,
}

/// Which answers of a lookup an NFS client keeps (nfs(5), `lookupcache=`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Lookups {
    /// Both "there" and "not there" (the default, `all`).
    All,
    /// Only "there" (`pos`, `positive`).
    Positive,
    /// None: every lookup asks the server (`none`).
    None,
}

/// How a kernel lock ends whose holder's whole host dies or is cut off
/// from the server (its process cannot release it).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DeadHost {
    /// The server releases it once the host's lease lapses (NFSv4: the
    /// server's lease time, 90 s by default).
    AfterLease,
    /// Only when the host restarts and its status monitor tells the
    /// server (NFSv2 and v3, whose lock manager has no lease): never while
    /// it stays away.
    WhenItRestarts,
    /// The version does not say.
    Unknown,
}

impl Nfs {
    /// The version in an NFS mount's options (`vers=4.2`, `nfsvers=3`).
    pub fn from_options(options: &[u8]) -> Nfs {
        let version = option_values(options).find_map(|o| {
            let v = o
                .strip_prefix(b"vers=")
                .or_else(|| o.strip_prefix(b"nfsvers="))?;
            let (major, minor) = match v.iter().position(|&b| b == b'.') {
                Some(dot) => (&v[..dot], &v[dot + 1..]),
                None => (v, &b"0"[..]),
            };
            let small = |d: &[u8]| u8::try_from(number(d)?).ok();
            Some((small(major)?, small(minor)?))
        });
        // Linux prints an attribute-cache bound only where it is not the
        // default, and `noac` or `actimeo=` as the bounds they set.
        let (mut file, mut dir) = ((3, 60), (30, 60));
        let mut lookups = Lookups::All;
        for option in option_values(options) {
            let (name, raw) = match option.iter().position(|&b| b == b'=') {
                Some(eq) => (&option[..eq], Some(&option[eq + 1..])),
                None => (option, None),
            };
            let value = raw.and_then(number);
            match (name, value) {
                (b"noac", _) => (file, dir) = ((0, 0), (0, 0)),
                (b"actimeo", Some(n)) => (file, dir) = ((n, n), (n, n)),
                (b"acregmin", Some(n)) => file.0 = n,
                (b"acregmax", Some(n)) => file.1 = n,
                (b"acdirmin", Some(n)) => dir.0 = n,
                (b"acdirmax", Some(n)) => dir.1 = n,
                (b"lookupcache", _) => {
                    lookups = match raw {
                        Some(b"none") => Lookups::None,
                        Some(b"pos" | b"positive") => Lookups::Positive,
                        _ => Lookups::All,
                    }
                }
                _ => {}
            }
        }
        Nfs {
            version,
            file_attributes: file,
            dir_attributes: dir,
            lookups,
        }
    }

    /// How the lock of a holder whose host dies ends on this mount.
    pub fn dead_host(&self) -> DeadHost {
        match self.version {
            Some((4, _)) => DeadHost::AfterLease,
            Some((2 | 3, _)) => DeadHost::WhenItRestarts,
            _ => DeadHost::Unknown,
        }
    }
}

const LOCAL: Traits = Traits {
    remote: Support::No,
    fcntl: Reach::AllHosts,
    flock: Reach::AllHosts,
    exclusive_create: Support::Yes,
    exchange: Support::Yes,
    exists_as_eperm: false,
    seen: true,
    nfs: None,
    local_locks_by: None,
    deletes_pending: false,
    ofd_locks_shared: false,
};

/// A network filesystem whose server keeps the locks and arbitrates
/// creates, but which has no exchange.
const SERVER_LOCKED: Traits = Traits {
    remote: Support::Yes,
    fcntl: Reach::AllHosts,
    flock: Reach::AllHosts,
    exclusive_create: Support::Yes,
    exchange: Support::No,
    exists_as_eperm: false,
    seen: true,
    nfs: None,
    local_locks_by: None,
    deletes_pending: false,
    ofd_locks_shared: false,
};

/// A userspace client of a remote store whose locks the kernel keeps for
/// this mount alone.
const CLIENT_LOCKED: Traits = Traits {
    remote: Support::Yes,
    fcntl: Reach::ThisClient,
    flock: Reach::ThisClient,
    exclusive_create: Support::Unknown,
    exchange: Support::No,
    exists_as_eperm: false,
    seen: true,
    nfs: None,
    local_locks_by: None,
    deletes_pending: false,
    ofd_locks_shared: false,
};

/// FUSE subtypes known to be clients of another host's files, which
/// implement no lock operations (the kernel then keeps locks per mount).
const REMOTE_FUSE: &[&[u8]] = &[
    b"sshfs",
    b"smbnetfs",
    b"s3fs",
    b"rclone",
    b"gcsfuse",
    b"goofys",
    b"curlftpfs",
    b"gvfsd-fuse",
    b"davfs2",
    b"webdavfs",
];

/// What the filesystem of `f_type` (and, where [`needs_mount_table`],
/// its mount table entry `mount`, `None` if it could not be read) offers.
pub fn traits(f_type: u64, mount: Option<&Mount<'_>>) -> Traits {
    Traits {
        seen: mount.is_some() || !needs_mount_table(f_type),
        ..named(f_type, mount)
    }
}

/// [`traits`], the entry's absence aside.
fn named(f_type: u64, mount: Option<&Mount<'_>>) -> Traits {
    let options = |name: &[u8]| {
        mount.is_some_and(|m| {
            option_values(m.super_options)
                .chain(option_values(m.mount_options))
                .any(|o| o == name)
        })
    };
    match f_type {
        magic::FUSE => {
            let subtype = mount
                .and_then(|m| m.fstype.strip_prefix(b"fuse."))
                .unwrap_or(b"");
            match subtype {
                // Measured (PROTOCOL 13.5): O_EXCL is atomic, but the
                // loser is told EPERM; no exchange; locks per mount.
                b"sshfs" => Traits {
                    exclusive_create: Support::Yes,
                    exists_as_eperm: true,
                    ..CLIENT_LOCKED
                },
                // Measured: the client drops O_EXCL (FILE_OVERWRITE_IF),
                // so two hosts both create, the second truncating.
                b"smbnetfs" => Traits {
                    exclusive_create: Support::No,
                    ..CLIENT_LOCKED
                },
                s if REMOTE_FUSE.contains(&s) => CLIENT_LOCKED,
                // bindfs, a local FUSE filesystem, or one not named here.
                _ => Traits {
                    remote: Support::Unknown,
                    fcntl: Reach::Unknown,
                    flock: Reach::Unknown,
                    exclusive_create: Support::Unknown,
                    exchange: Support::Unknown,
                    exists_as_eperm: false,
                    seen: true,
                    nfs: None,
                    local_locks_by: None,
                    deletes_pending: false,
                    ofd_locks_shared: false,
                },
            }
        }
        magic::NFS => {
            // nfs(5): `nolock` (v2/v3) and `local_lock=` keep locks on
            // this client; NFSv2 has no exclusive create.
            let all = options(b"local_lock=all") || options(b"nolock");
            let by = [
                "nolock",
                "local_lock=all",
                "local_lock=posix",
                "local_lock=flock",
            ]
            .into_iter()
            .find(|o| options(o.as_bytes()));
            let reach = |local: bool| {
                if all || local {
                    Reach::ThisClient
                } else {
                    Reach::AllHosts
                }
            };
            Traits {
                fcntl: reach(options(b"local_lock=posix")),
                flock: reach(options(b"local_lock=flock")),
                exclusive_create: if options(b"vers=2") || options(b"nfsvers=2") {
                    Support::No
                } else {
                    Support::Yes
                },
                nfs: Some(Nfs::from_options(
                    mount.map_or(&b""[..], |m| m.super_options),
                )),
                local_locks_by: by,
                ..SERVER_LOCKED
            }
        }
        magic::CIFS | magic::SMB2 | magic::SMB => {
            // mount.cifs(8): `nobrl` sends no byte-range locks to the
            // server.
            let nobrl = options(b"nobrl");
            let reach = if nobrl {
                Reach::ThisClient
            } else {
                Reach::AllHosts
            };
            Traits {
                fcntl: reach,
                flock: reach,
                local_locks_by: nobrl.then_some("nobrl"),
                // Measured (PROTOCOL 13.5): a file one client removes while
                // another has it open keeps its name, and opens of the
                // name fail with ENOENT, until the last handle closes.
                deletes_pending: true,
                // Measured: open file description locks of two processes
                // of one host overlapped (10 of 60 critical sections), and
                // flock locks (1 of 32).
                ofd_locks_shared: true,
                ..SERVER_LOCKED
            }
        }
        magic::V9FS | magic::AFS => Traits {
            fcntl: Reach::Unknown,
            flock: Reach::Unknown,
            exclusive_create: Support::Unknown,
            ..SERVER_LOCKED
        },
        magic::CEPH => SERVER_LOCKED,
        magic::EXT4 | magic::XFS | magic::BTRFS | magic::TMPFS | magic::F2FS => LOCAL,
        // overlayfs and other local filesystems: locks are this host's,
        // which is every process that can reach the file; whether it
        // exchanges depends on what lies beneath.
        _ => Traits {
            exchange: Support::Unknown,
            ..LOCAL
        },
    }
}

/// The comma-separated options of a mount table field.
fn option_values(field: &[u8]) -> impl Iterator<Item = &[u8]> {
    field.split(|&b| b == b',')
}

/// A kernel lock's family: what a filesystem's refusal is about, and which
/// locks of one file exclude each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Family {
    /// `fcntl` record locks (`with-lock-ex`, `FileLock::new`).
    Fcntl,
    /// `flock` locks.
    Flock,
}

impl Family {
    /// Whether a lock of this family and one of `other` on the same file
    /// are the same lock, so that one waits for the other: always, where
    /// the kernel keeps the families together (`apart` false: Apple
    /// systems, the BSDs, and Windows, where both are `LockFileEx` on byte
    /// 0); only within a family where it keeps them apart (`apart`: Linux
    /// and Android, where `fcntl` and `flock` locks never meet).
    pub fn meets(self, other: Family, apart: bool) -> bool {
        self == other || !apart
    }
}

/// Why a lock is refused on a filesystem.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Refusal {
    /// The filesystem's kernel locks of this family exclude only the
    /// processes of this client: another host could hold the lock at the
    /// same time.
    LocksPerClient,
    /// An exclusive create is not atomic between clients: two hosts could
    /// both create the marker.
    ExclusiveCreateNotAtomic,
    /// The filesystem's mount table entry, which tells what it offers, is
    /// not in this process's mount table ([`Traits::seen`]).
    CannotTell,
    /// A removed marker's name stays, refusing every open of it, while any
    /// client has the marker open ([`Traits::deletes_pending`]): a release
    /// can fail, and contenders that read the marker keep the name taken.
    DeletesPending,
    /// Locks owned by an open file description (`flock`, open file
    /// description `fcntl` locks) may not exclude this host's own
    /// processes and threads ([`Traits::ofd_locks_shared`]).
    OfdLocksShared,
}

/// Whether a kernel lock of `family` must be refused on a filesystem of
/// `traits`: where its locks exclude this client's processes only, a lock
/// would silently let another host hold it too; and where what the
/// filesystem is cannot be told (its mount entry unseen). A filesystem
/// seen, whose reach is unknown (a userspace filesystem this table does
/// not name, bindfs for one) is not refused: the caller documents it.
pub fn kernel_lock_refusal(traits: &Traits, family: Family) -> Option<Refusal> {
    if !traits.seen {
        return Some(Refusal::CannotTell);
    }
    let reach = match family {
        Family::Fcntl => traits.fcntl,
        Family::Flock => traits.flock,
    };
    (reach == Reach::ThisClient).then_some(Refusal::LocksPerClient)
}

/// Whether a lock that an open file description owns (`flock`, Linux's
/// `F_OFD_SETLK`) must be refused on a filesystem of `traits`, beyond
/// [`kernel_lock_refusal`]: where the client may let two of this host's
/// processes hold it at once. A classic `fcntl` lock, owned by the
/// process, excludes there.
pub fn ofd_lock_refusal(traits: &Traits) -> Option<Refusal> {
    traits.ofd_locks_shared.then_some(Refusal::OfdLocksShared)
}

/// Whether a soft lock (a marker created exclusively) must be refused on
/// a filesystem of `traits`: where an exclusive create is known not to be
/// atomic between clients, two hosts could both hold the lock; where a
/// removed marker's name stays taken while any client has it open (SMB),
/// releases fail and contenders stall; and on an unseen filesystem whose
/// create may be such.
pub fn soft_lock_refusal(traits: &Traits) -> Option<Refusal> {
    if traits.deletes_pending {
        return Some(Refusal::DeletesPending);
    }
    match traits.exclusive_create {
        Support::No => Some(Refusal::ExclusiveCreateNotAtomic),
        // An unseen userspace filesystem may be one whose create is not
        // atomic (smbnetfs): fail closed.
        Support::Unknown if !traits.seen => Some(Refusal::CannotTell),
        _ => None,
    }
}

/// Whether a client of a filesystem of `traits` may be delegated a file
/// by its server, and then answer the file's name from its own cache
/// even after the same client removed the file through another of its
/// mounts (PROTOCOL 13.5): an NFSv4 mount, or an NFS mount whose version
/// its options do not tell. A kernel lock's identity check there reads
/// the directory's listing too ([`crate::kernel::named`]).
pub fn delegates_files(traits: &Traits) -> bool {
    match traits.nfs {
        Some(nfs) => !matches!(nfs.version, Some((major, _)) if major < 4),
        None => false,
    }
}

#[cfg(test)]
mod tests;
