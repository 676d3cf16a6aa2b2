//! Locks that tell the truth on network filesystems (PROTOCOL 13.5): a
//! kernel lock is refused where the filesystem's locks exclude only this
//! client's processes, and a soft lock where an exclusive create is not
//! atomic between clients, each with an error that names the filesystem
//! and the alternatives. The core decides ([`swaplock_core::fs`]); the
//! Linux adapter reads `statfs` and the mount table. Elsewhere nothing is
//! refused. [`filesystem`] tells what a directory's filesystem offers.

use std::io;
use std::path::Path;
use std::sync::Arc;

pub use swaplock_core::fs::{Family, Reach, Refusal, Support, Traits};

use crate::error::{LockError, Step};
use swaplock_core::kernel::Names;

/// A filesystem, and what it offers a lock.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filesystem {
    /// Its type as the mount table names it (`fuse.sshfs`, `nfs4`), where
    /// it was read (for network and userspace filesystems); else empty.
    pub name: String,
    /// `statfs`'s `f_type`.
    pub magic: u64,
    /// What it offers a lock.
    pub traits: Traits,
}

/// The filesystem that holds `path` (its directory, where `path` does not
/// exist), as the lock calls read it before a lock is taken there.
///
/// ```
/// use swaplock::netfs::{filesystem, Reach};
/// # fn main() -> std::io::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let fs = filesystem(&dir.path().join("job.lock"))?;
/// if fs.traits.fcntl == Reach::ThisClient {
///     println!("{}: kernel locks here exclude this host's processes only", fs.name);
/// }
/// # Ok(())
/// # }
/// ```
pub fn filesystem(path: &Path) -> io::Result<Filesystem> {
    let fs = swaplock_linux::fs::of_path(path)?;
    Ok(Filesystem {
        name: fs.fstype,
        magic: fs.f_type,
        traits: fs.traits,
    })
}

/// The error of a lock refused on `path`'s filesystem `fstype`, which
/// offers `traits`.
pub(crate) fn refused(
    path: &Arc<Path>,
    fstype: &str,
    traits: &Traits,
    refusal: Refusal,
    family: Option<Family>,
) -> io::Error {
    let fstype = if fstype.is_empty() {
        "this filesystem"
    } else {
        fstype
    };
    const ETCD: &str = "an etcd lock (swaplock::etcd::EtcdLock, or `swaplock run --etcd URL NAME \
                        COMMAND`, in a build with the `etcd` feature)";
    let allow = "or, if no other host uses this directory, allow a lock for this host alone \
                 (FileLock::allow_client_local(true), SWAPLOCK_ALLOW_CLIENT_LOCAL=1 for the \
                 commands)";
    let why = match (refusal, family) {
        (Refusal::LocksPerClient, family) => {
            let which = match family {
                Some(Family::Flock) => "flock",
                _ => "fcntl",
            };
            // The mount option that does it, where one does: the remedy
            // is a mount without it.
            let (by, remount) = match traits.local_locks_by {
                Some(by) => (
                    format!(" (it is mounted with `{by}`)"),
                    format!("remount it without `{by}`, "),
                ),
                None => (String::new(), String::new()),
            };
            format!(
                "{fstype} keeps {which} locks for this client mount only{by}, so a process on \
                 another host could hold this lock at the same time; {remount}use a lease lock \
                 (SoftLock::lease, `swaplock run --kind lease`), or {ETCD}, {allow}"
            )
        }
        (Refusal::ExclusiveCreateNotAtomic, _) => format!(
            "{fstype} does not create files exclusively between clients (two hosts can both \
             create the marker), so no soft lock is safe on it; use {ETCD}, or a directory on \
             a filesystem whose server arbitrates creates (NFSv3 or later, sshfs)"
        ),
        (Refusal::DeletesPending, _) => format!(
            "{fstype} (SMB) keeps a removed file's name while any client still has the file \
             open (delete pending), refusing every open of the name until the last one \
             closes, so a soft lock's release can fail and its contenders stall; use a classic \
             fcntl lock (FileLock::new(..).owned_by_process(), with-lock-ex), whose server \
             keeps the locks, or {ETCD}"
        ),
        (Refusal::OfdLocksShared, _) => format!(
            "{fstype} (SMB) lets the opens of one file by this host's processes share one \
             server handle, and locks that an open file description owns (flock, open file \
             description fcntl locks) on one handle do not reliably exclude each other, so \
             two processes of this host could hold this lock at once; use a classic fcntl \
             lock owned by the process (FileLock::new(..).owned_by_process(), as with-lock-ex \
             takes it, or `swaplock run --kind fcntl` under SWAPLOCK_FCNTL_OFD=0)"
        ),
        (_, Some(_)) => format!(
            "{fstype} (a network or userspace filesystem) is not in this process's mount \
             table (reached through another mount namespace, or unmounted), so whether its \
             locks reach other hosts cannot be told; lock it by a path of this mount \
             namespace, or use a lease lock or {ETCD}, {allow}"
        ),
        (_, None) => format!(
            "{fstype} (a userspace filesystem) is not in this process's mount table (reached \
             through another mount namespace, or unmounted), so whether it creates files \
             exclusively between clients cannot be told; lock it by a path of this mount \
             namespace, or use {ETCD}"
        ),
    };
    let kind = io::ErrorKind::Unsupported;
    LockError::io(path, Step::Filesystem, kind, io::Error::new(kind, why))
}

/// Refuses a kernel lock of `family` on `path` where the filesystem keeps
/// its locks per client, before the lock is tried: a wait there would be
/// for nothing. Where `path` does not exist yet, its nearest ancestor's
/// filesystem is read. A filesystem that cannot be read is not refused
/// here: [`check_kernel_file`] judges the file the lock opened. `Ok`
/// says how a client may answer the lock file's name: from a cache, or a
/// delegation ([`names`]). A lock `allowed` to be this client's alone
/// ([`FileLock::allow_client_local`](crate::FileLock::allow_client_local))
/// is not refused where locks reach this client only.
pub(crate) fn check_kernel(
    path: &Arc<Path>,
    family: Family,
    ofd: bool,
    allowed: bool,
) -> io::Result<Names> {
    let Ok(fs) = swaplock_linux::fs::of_path(path) else {
        return Ok(Names::Cached);
    };
    judged(path, &fs.fstype, &fs.traits, family, ofd, allowed)
}

/// A kernel lock of `family` (`ofd`: one an open file description owns,
/// `flock` or an open file description `fcntl` lock) on a filesystem of `traits`: refused, or how its name check must
/// ask the server. Where the lock is allowed on a filesystem whose locks
/// reach this client only, every contender is this client's (the caller
/// said no other host uses the directory), and its cache answers them all
/// alike; an open file description lock that may not exclude this host's
/// own processes is refused all the same.
fn judged(
    path: &Arc<Path>,
    fstype: &str,
    traits: &Traits,
    family: Family,
    ofd: bool,
    allowed: bool,
) -> io::Result<Names> {
    let refusal = swaplock_core::fs::kernel_lock_refusal(traits, family);
    if let (Some(refusal), false) = (refusal, allowed) {
        return Err(refused(path, fstype, traits, refusal, Some(family)));
    }
    if let Some(shared) = ofd
        .then(|| swaplock_core::fs::ofd_lock_refusal(traits))
        .flatten()
    {
        return Err(refused(path, fstype, traits, shared, Some(family)));
    }
    match refusal {
        None => Ok(names(traits)),
        Some(Refusal::LocksPerClient) => Ok(Names::Trusted),
        Some(_) => Ok(match names(traits) {
            Names::Trusted => Names::Cached,
            names => names,
        }),
    }
}

/// How a client of a filesystem with `traits` may answer a lookup of a
/// name: from a cache that still names a file its server removed, on any
/// filesystem not known to be local; and from a delegation of the file
/// that its server may never recall, on NFSv4
/// ([`swaplock_core::fs::delegates_files`]).
fn names(traits: &Traits) -> Names {
    if traits.remote == Support::No {
        Names::Trusted
    } else if swaplock_core::fs::delegates_files(traits) {
        Names::Delegated
    } else {
        Names::Cached
    }
}

/// Refuses a kernel lock of `family` taken on the open file `fd` (of
/// device `dev`) where its filesystem keeps locks per client: the file
/// the lock opened is judged, wherever a symlink or a mount namespace led.
/// A filesystem that cannot be read (`fstatfs` failed) is refused too.
/// `Ok` says how a client may answer the lock file's name ([`names`]).
pub(crate) fn check_kernel_file(
    path: &Arc<Path>,
    fd: std::os::fd::BorrowedFd<'_>,
    dev: u64,
    family: Family,
    ofd: bool,
    allowed: bool,
) -> io::Result<Names> {
    let fs = swaplock_linux::fs::of_file_on(fd, dev)
        .map_err(|e| LockError::io(path, Step::Filesystem, e.kind(), e))?;
    judged(path, &fs.fstype, &fs.traits, family, ofd, allowed)
}

/// Refuses a soft lock whose directory `dir`, not made yet, would be made
/// on (its nearest existing ancestor's) filesystem without an exclusive
/// create between clients, or one that cannot be told. A filesystem that
/// cannot be read is not refused here: the open directory is judged too
/// ([`check_soft_dir`]).
pub(crate) fn check_soft(path: &Arc<Path>, dir: &Path) -> io::Result<()> {
    let Ok(fs) = swaplock_linux::fs::of_path(dir) else {
        return Ok(());
    };
    match swaplock_core::fs::soft_lock_refusal(&fs.traits) {
        None => Ok(()),
        Some(refusal) => Err(refused(path, &fs.fstype, &fs.traits, refusal, None)),
    }
}

/// Refuses a soft lock whose open directory `dir` is on a filesystem
/// without an exclusive create between clients, or one that cannot be
/// told. A filesystem that cannot be read now (`EMFILE` reading the mount
/// table, say) fails this attempt with that error: no marker is made on a
/// filesystem not judged.
pub(crate) fn check_soft_dir(path: &Arc<Path>, dir: &std::os::fd::OwnedFd) -> io::Result<()> {
    let fs = swaplock_linux::fs::of_file(dir)
        .map_err(|e| LockError::io(path, Step::Filesystem, e.kind(), e))?;
    match swaplock_core::fs::soft_lock_refusal(&fs.traits) {
        None => Ok(()),
        Some(refusal) => Err(refused(path, &fs.fstype, &fs.traits, refusal, None)),
    }
}
