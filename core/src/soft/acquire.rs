//! Acquire (PROTOCOL 7.1, 7.2): create the marker with `O_EXCL` and
//! publish our complete record; when a marker exists, judge it (see
//! `judge`) and take it over if stale; repeat as the caller's patience
//! says.
//!
//! Invariants kept here:
//! - I1: a soft lock begins only with a successful exclusive create.
//! - I2: the lock is held only once our record is complete and our marker
//!   still linked; a failed write removes our file while it is open,
//!   never by name after close.

use super::config::{Config, Error, Kind, Op};
use super::create::finish_create;
use super::judge::{break_expired, judge_stale};
use super::marker::{publish_synced, settle_names, unlink_if_same};
use super::os::{Os, Semantics};
use super::types::{Attempt, Contender, Held, Holder};
use crate::decide::{Instant, WatchKey};
use crate::errno::Errno;
use crate::fs::ExclusiveRename;
use crate::mutant::{active, Mutant};
use crate::names::{write_name, MAX_LOCK_NAME};
use crate::wait::Patience;
use core::time::Duration;

/// Looks at a marker with the contender's unchanged-marker watch: how long
/// it has been seen with this key (zero on a change). For simulations of
/// other policies; [`try_acquire`] keeps the watch itself.
pub fn observe_watch(contender: &mut Contender, key: WatchKey, now: Instant) -> Duration {
    contender.observe(key, now)
}

/// How many times an exclusive create refused with `EPERM` is followed by a
/// look at the lock path that finds nothing there, and made again, before
/// the refusal is taken for the OS's answer.
const PERM_LOOKS: u32 = 8;

/// One attempt to acquire (PROTOCOL 7.2): publish our complete marker at
/// the lock path (linked from an unnamed file where the directory has
/// them, else created exclusively and written); if a marker exists, judge
/// it and take it over when it is stale.
pub fn try_acquire<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    contender: &mut Contender,
) -> Result<Attempt<O::File>, Error> {
    // A name whose derived names cannot exist would be acquired and then
    // never released or broken: refuse it before creating anything.
    if cfg.lock.len() > MAX_LOCK_NAME {
        return Err(Error::NameTooLong);
    }
    if let Some(lifetime) = cfg.lifetime {
        if cfg.kind != Kind::Lease {
            if let Some(held) = break_expired(os, cfg, lifetime)? {
                return Ok(Attempt::Acquired(held));
            }
        }
    }
    if os.semantics() == Semantics::Posix {
        if let Some(attempt) = publish_unnamed(os, cfg, contender)? {
            return Ok(attempt);
        }
        if os.exclusive_rename() != ExclusiveRename::Untrusted {
            if let Some(attempt) = publish_renamed(os, cfg, contender)? {
                return Ok(attempt);
            }
        }
    }
    let mut looks = 0;
    let file = loop {
        let errno = match os.create_new(cfg.lock, cfg.marker_mode(), true) {
            Ok(file) => break file,
            Err(errno) => errno,
        };
        if errno == Errno::EXIST {
            return judge_stale(os, cfg, contender);
        }
        // A marker deleted while a reader still has it open stays "delete
        // pending" under its name until that reader closes it; creating
        // over it is refused with EACCES. Someone is at work: contention.
        if errno == Errno::ACCES && os.semantics() == Semantics::Handles {
            return Ok(Attempt::Busy(Holder::Unknown));
        }
        // An SFTP client (sshfs) answers an exclusive create over an
        // existing name with EPERM, its generic failure, not EEXIST. Look,
        // do not guess (PROTOCOL 7.2, 13.5): a name that exists is contention;
        // one that vanished meanwhile is created again, a bounded number
        // of times; otherwise the refusal is the OS's answer.
        if errno == Errno::PERM && looks < PERM_LOOKS && !active(Mutant::EpermIsError) {
            looks += 1;
            match os.lstat(cfg.lock) {
                Ok(_) => return judge_stale(os, cfg, contender),
                Err(e) if e == Errno::NOENT => continue,
                Err(_) => {}
            }
        }
        return Err(Error::Os {
            op: Op::Create,
            errno,
        });
    };
    finish_create(os, cfg, file)
}

/// Publishes our complete marker at the lock path in one step (invariants
/// I1, I2 made atomic): written into an unnamed file, then linked to the
/// lock path, which fails if a marker exists. Readers, filelock's
/// included, never see our marker empty or half-written, and a process
/// killed at any point leaves nothing behind. `None` where the directory
/// has no unnamed files (or cannot link one): the caller then creates the
/// marker by name and writes it there, as filelock does.
fn publish_unnamed<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    contender: &mut Contender,
) -> Result<Option<Attempt<O::File>>, Error> {
    let Ok(file) = os.create_unnamed(cfg.marker_mode()) else {
        return Ok(None);
    };
    // A marker at the lock path now would refuse the link: judge it
    // without writing and syncing a record first (7.2 step 3), as the
    // link's EEXIST would have at this moment. A waiter woken by a
    // release mostly finds the marker taken again already, and the sync
    // is most of a failed attempt's cost on a disk. Only where the kernel
    // itself answers for the directory's names (the filesystems whose
    // exclusive rename is trusted): a client's or a daemon's cache may
    // still show a name another host removed. Any other answer (none
    // there, or a failed look) leaves the link to decide.
    if os.exclusive_rename() != ExclusiveRename::Untrusted && os.lstat(cfg.lock).is_ok() {
        os.close(file);
        return judge_stale(os, cfg, contender).map(Some);
    }
    // The record reaches the disk before the name does (7.2 step 3).
    let published = publish_synced(os, cfg, &file);
    let linked = match published {
        Ok(_) => os.link_unnamed(&file, cfg.lock),
        Err(_) if active(Mutant::LinkUnfinishedUnnamed) => os.link_unnamed(&file, cfg.lock),
        Err(_) => Ok(()),
    };
    match (published, linked) {
        (Ok(id), Ok(())) => Ok(Some(Attempt::Acquired(Held { file, id }))),
        (Ok(_), Err(e)) if e == Errno::EXIST => {
            os.close(file);
            judge_stale(os, cfg, contender).map(Some)
        }
        // Nothing was ever visible: a write error is the caller's, and
        // a directory that cannot link the file gets a marker by name.
        (Err(e), _) => {
            os.close(file);
            Err(e)
        }
        (Ok(_), Err(_)) => {
            os.close(file);
            Ok(None)
        }
    }
}

/// Publishes our complete marker by an exclusive rename (PROTOCOL 7.2
/// step 3b), where the directory has no unnamed files (vfat, exFAT) but
/// its filesystem renames without replacing, atomically: written and
/// synced under our write name, then renamed to the lock path, which fails
/// if a marker exists. As with an unnamed file, no reader sees our marker
/// empty or half-written, and a process killed before the rename leaves
/// only its write name, which nothing ever publishes. `None`: nothing was
/// published (no write name could be made, or the rename failed for
/// another reason); the caller creates the marker by name.
fn publish_renamed<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    contender: &mut Contender,
) -> Result<Option<Attempt<O::File>>, Error> {
    let token = os.token();
    let writing = write_name(cfg.lock, cfg.pid, &token)?;
    let Ok(file) = os.create_new(&writing, cfg.marker_mode(), false) else {
        return Ok(None);
    };
    // A filesystem that cuts names short (msdos's 8.3 names) made the
    // write name the lock path itself: this was the exclusive create by
    // name, and the attempt goes on as one (steps 5 to 7).
    let aliased = match (os.fstat(&file), os.lstat(cfg.lock)) {
        (Ok(own), Ok(at_lock)) => at_lock.same_file(&own),
        _ => false,
    };
    if aliased {
        return finish_create(os, cfg, file).map(Some);
    }
    let published = publish_synced(os, cfg, &file);
    let renamed = match published {
        Ok(_) if active(Mutant::RenameReplaces) => os.rename(&writing, cfg.lock),
        Ok(_) => os.rename_noreplace(&writing, cfg.lock),
        Err(_) => Ok(()),
    };
    if let (Ok(id), Ok(())) = (&published, renamed) {
        // FAT gives the new name an empty entry, whose size and first
        // cluster follow when the file is written back, and removes the
        // write name's entry when the directory is: a power cut between
        // leaves two entries on our clusters, and the boot's check
        // truncates the later one, perhaps the lock path's, to an empty
        // marker. Syncing the filesystem narrows that window to this call.
        settle_names(os, cfg, &file);
        return Ok(Some(Attempt::Acquired(Held { file, id: *id })));
    }
    // Our write name still shows our file (I7): remove it, then close.
    if let Ok(own) = os.fstat(&file) {
        unlink_if_same(os, &writing, &own);
    }
    os.close(file);
    match (published, renamed) {
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) if e == Errno::EXIST => judge_stale(os, cfg, contender).map(Some),
        // Any other failure (no such flag after all, ENOSYS before Linux
        // 3.15; a directory with room for the write name but not for
        // both, ENOSPC; a security policy, EPERM) published nothing, and
        // our write name is gone: the create by name, which a lock must
        // not be refused for want of.
        _ => Ok(None),
    }
}

/// The acquire driver (PROTOCOL 7.1): attempts until the lock is ours or
/// `patience` gives up, pausing as it says between attempts. The first
/// attempt always runs. Production and the simulator both run this loop;
/// a wake-on-change mechanism replaces only the pause.
pub fn acquire<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    contender: &mut Contender,
    patience: &mut (impl Patience<Holder> + ?Sized),
) -> Result<Attempt<O::File>, Error> {
    let started = os.now();
    loop {
        patience.attempting();
        let holder = match try_acquire(os, cfg, contender)? {
            Attempt::Acquired(held) => return Ok(Attempt::Acquired(held)),
            Attempt::Busy(holder) => holder,
        };
        match patience.busy(&holder, os.now().since(started)) {
            Some(pause) => os.sleep(pause),
            None => return Ok(Attempt::Busy(holder)),
        }
    }
}
