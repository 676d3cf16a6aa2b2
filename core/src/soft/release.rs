//! Release (PROTOCOL 7.3, 7.4, 7.10): remove our marker only while we hold
//! it open and only if the lock path still shows it, by exchanging a
//! placeholder in; a marker a peer holds aside is marked released instead.
//!
//! Invariants kept here:
//! - I7: a file is removed by name only while the remover holds it open
//!   and the name shows the same file; never by name after close.
//! - I11: without an exchange, `break_lock_file` moves nothing.
//! - I17: a displaced holder writes the released record instead of
//!   unlinking, so nothing restores a record that names it.

use super::config::{Config, Error, Op};
use super::exchange::{exchange_back, mark_released};
use super::marker::{publish_aside, settle_names, synced, unlink_if_same, write_placeholder};
use super::os::{Os, Semantics, Stat};
use super::types::{Held, Judged};
use crate::errno::Errno;
use crate::mutant::{active, Mutant};
use crate::names::pid_break_name;
use core::time::Duration;

/// Removes our own file while it is open (PROTOCOL 7.3): mark it released,
/// then swap it out through a placeholder, so that a peer's marker found
/// at the lock path goes back, or, where nothing can be exchanged (or the
/// mark failed), unlink it only if the path still shows it.
pub fn remove_own_file<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    file: &O::File,
) -> Result<(), Errno> {
    if let Some(handles) = os.handles() {
        // Our handle denies delete sharing, so the file is still ours, at
        // the lock path: delete exactly it.
        return match handles.remove_file(file) {
            Err(e) if e != Errno::NOENT => Err(e),
            _ => Ok(()),
        };
    }
    // Marked released first, as a release does: killed once its
    // placeholder is exchanged in, we would leave this file (empty, or
    // half-written) under our break name beside a placeholder naming us,
    // and a recovery of our names would take it for a live recordless
    // holder's marker and publish it at the lock path, where nobody
    // evicts it. Unmarked, it is unlinked by name only.
    let marked = mark_released(os, file).is_ok();
    let own = os.fstat(file)?;
    match marked || active(Mutant::RemoveOwnWithoutMark) {
        true => remove_own(os, cfg, file, &own),
        false => unlink_own(os, cfg, file, &own),
    }
}

/// [`remove_own_file`] for our open file whose stat is `own`.
fn remove_own<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    file: &O::File,
    own: &Stat,
) -> Result<(), Errno> {
    match break_lock_file(os, cfg, &Judged::open_file(*own)) {
        Err(e) if e != Errno::NOENT => return Err(e),
        _ => {}
    }
    unlink_own(os, cfg, file, own)
}

/// Unlinks the lock path if it still shows our open file `file`, whose
/// stat is `own` (PROTOCOL 7.3 step 4).
///
/// Between the look and the unlink, only a peer's legitimate takeover of
/// our marker (its lease or lifetime passed: it went unchanged that long)
/// can put another file at the lock path, which the unlink would then
/// remove (12.1 S1). So once the path shows our file, we touch it first:
/// that restarts its age for every peer, so none may take it over until
/// the unlink is done (under the timing assumption, 13.1). A peer that
/// judged it before may still be on its way to its exchange: only the
/// mtime tells it, in its look before the exchange or its check of the
/// file taken, that the file changed since (inode and mtime, I4; the
/// exchange itself changes the change time). So we look again: if the
/// path no longer shows our file, a peer took it over and nothing is
/// ours to remove; if it shows our file with the mtime it had before the
/// touch, the touch fell within the mtime's granularity (2 s on vfat,
/// where change times are finer, or one tick of the kernel's clock) and
/// such a peer would not see it: we pause and touch again until the
/// mtime moves (12.1 S11). If the touch fails, or the mtime has not moved
/// 2 s after the first touch, our marker stays and the caller reports the
/// error: a marker naming us is stale once we exit (and a lease record
/// expires), while a wrong unlink lets two processes hold the lock.
fn unlink_own<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    file: &O::File,
    own: &Stat,
) -> Result<(), Errno> {
    let before = match os.lstat(cfg.lock) {
        Ok(st) if st.same_file(own) => st,
        _ => return Ok(()),
    };
    if !active(Mutant::UnlinkWithoutTouch) {
        let start = os.now();
        loop {
            let at = os.now();
            let touched = match os.touch(file) {
                Err(_) if active(Mutant::UnlinkDespiteTouchFailure) => false,
                Err(e) => return Err(e),
                Ok(()) => true,
            };
            let after = match os.lstat(cfg.lock) {
                Ok(st) if st.same_file(own) => st,
                // A peer took our marker over (and may hold the lock).
                _ if !active(Mutant::NoLookAfterTouch) => return Ok(()),
                _ => break,
            };
            // The touch shows in the mtime: a peer that judged our marker
            // before it backs off, and one that judges it from now on
            // waits out its whole lease or lifetime.
            if after.mtime != before.mtime
                || !touched
                || active(Mutant::UnlinkDespiteUnchangedMtime)
            {
                break;
            }
            // The mtime did not move, so it still reads as a peer may have
            // judged it. A touch made 2 s after the first falls in another
            // mtime wherever mtimes are cut to 2 s or less: past that,
            // this filesystem does not show our touches.
            if at.since(start) >= TOUCH_SHOWN_LIMIT {
                return Err(Errno::AGAIN);
            }
            os.sleep(TOUCH_PAUSE);
        }
    }
    match os.unlink(cfg.lock) {
        Err(e) if e != Errno::NOENT => Err(e),
        _ => Ok(()),
    }
}

/// How long [`unlink_own`] touches our marker again for its mtime to move
/// (vfat cuts mtimes to 2 s), and how long it pauses between touches (a
/// tick of a kernel clock that file times are taken from).
const TOUCH_SHOWN_LIMIT: Duration = Duration::from_secs(2);
const TOUCH_PAUSE: Duration = Duration::from_millis(10);

/// filelock's removal, kept as a protocol mutant: `lstat`, then `unlink`.
fn unlink_seen<O: Os + ?Sized>(os: &mut O, cfg: &Config<'_>, own: &Stat) -> Result<(), Errno> {
    match os.lstat(cfg.lock) {
        Ok(st) if st.same_file(own) => match os.unlink(cfg.lock) {
            Err(e) if e != Errno::NOENT => Err(e),
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Takes the file judged by `judged` off the lock path through an exchange
/// with a placeholder naming this process (PROTOCOL 7.10), so the path is
/// empty only once the judged file is gone. Without an exchange it does
/// nothing (invariant I11), and so without a placeholder: where none can be
/// made (no inode or descriptor left, `ENOSPC`, `EMFILE`, a name too long),
/// the caller's removal falls back to unlinking the path if it still shows
/// the judged file, as on a filesystem without exchange and as filelock
/// always does. A release must not depend on a resource the hold did not
/// already have: a marker left behind would wedge the lock until its holder
/// exits.
fn break_lock_file<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    judged: &Judged,
) -> Result<(), Errno> {
    let current = os.lstat(cfg.lock)?;
    if !judged.is(&current) {
        return Ok(());
    }
    let token = os.token();
    let Ok(brk) = pid_break_name(cfg.lock, cfg.pid, &token) else {
        return Ok(());
    };
    let published = publish_aside(
        os,
        cfg,
        &brk,
        &token,
        0o600,
        Mutant::PlaceholderWrittenInPlace,
        // Synced before its name, as a record is (7.10): exchanged into
        // the lock path, it stands there until our unlink, and a journal
        // commit another process's fsync forces between the two would keep
        // it there across a power cut, empty if its bytes were not yet
        // written: an empty marker, a wedge.
        |os, file| {
            write_placeholder(os, cfg, file).and_then(|()| {
                match active(Mutant::PlaceholderUnsynced) {
                    true => Ok(()),
                    false => synced(os, cfg, file),
                }
            })
        },
    );
    let Ok(Some((file, ()))) = published else {
        if active(Mutant::NoReleaseFallback) {
            return Err(Errno::NOSPC);
        }
        return Ok(());
    };
    let exchanged = os.exchange(&brk, cfg.lock).is_ok();
    if !exchanged {
        // Only if the break name still shows our placeholder (I7): an
        // exchange that was done but reported failing (a FUSE server's
        // EINTR) left a peer's marker there, which must stay for the
        // recovery our placeholder at the lock path leads to.
        if let Ok(ph) = os.fstat(&file) {
            unlink_if_same(os, &brk, &ph);
        }
        os.close(file);
        return Ok(());
    }
    match os.lstat(&brk) {
        Ok(grabbed) if judged.is(&grabbed) || active(Mutant::ReleaseNoGrabCheck) => {
            let _ = os.unlink(&brk);
            // Our descriptor keeps the placeholder's inode, so a match at
            // the path is still ours.
            if active(Mutant::PlaceholderUnlinkBlind) {
                let _ = os.unlink(cfg.lock);
            } else if let Ok(ph) = os.fstat(&file) {
                unlink_if_same(os, cfg.lock, &ph);
            }
        }
        _ => {
            let _ = exchange_back(os, cfg.lock, &brk, &file);
        }
    }
    os.close(file);
    Ok(())
}

/// Before a hold passes to another holder in this process, without the
/// marker leaving the lock path (the facade's hand-over between threads):
/// whether the lock path still shows our marker, by identity, which is
/// then touched so that its age counts from now, as a new marker's would.
/// A failure, or another file (or none) at the lock path, says no: the
/// hold is then released as usual, and the next holder makes its own
/// marker.
pub fn keep_for_handover<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    held: &Held<O::File>,
) -> bool {
    matches!(os.lstat(cfg.lock), Ok(st) if st.id == held.id) && os.touch(&held.file).is_ok()
}

/// Releases a held soft lock (PROTOCOL 7.4): mark our marker released,
/// then remove it only if the lock path still shows our file, and then by
/// exchanging a placeholder in (stricter than filelock's lstat-then-unlink,
/// which a peer's exchange can slip between); if a peer holds our file
/// aside, it keeps the released record, so nothing restores a record that
/// names us (invariant I17). The descriptor is closed in every case.
pub fn release<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    held: Held<O::File>,
) -> Result<(), Error> {
    let Held { file, .. } = held;
    let failure = if os.semantics() == Semantics::Handles {
        // Nobody can have moved a file we hold without delete sharing:
        // delete it through our handle, then close (filelock closes first
        // and deletes by name, retrying while the close settles).
        remove_own_file(os, cfg, &file).err()
    } else {
        // Our record turns into the released record before anything else,
        // so that a kill at any later step leaves nothing that names us:
        // released, our marker ages out after the grace period wherever it
        // is, and no recovery of our names ever runs for it. (A marker
        // still naming us would lead one to our break names, where a
        // half-made file of ours could be taken for a live holder's.)
        // If the mark fails, the placeholder's window stays shut: our
        // marker, which names us, is unlinked by name instead, as where no
        // placeholder can be made (PROTOCOL 7.10 step 3.1).
        let marked = active(Mutant::ReleaseWithoutMark) || mark_released(os, &file).is_ok();
        // Without our file's identity nothing can be removed safely: say
        // so, rather than report a release that left our marker in place.
        match os.fstat(&file) {
            Ok(own) => release_posix(os, cfg, &file, &own, marked).err(),
            Err(_) if active(Mutant::ReleaseHidesFstatError) => None,
            Err(e) => Some(e),
        }
    };
    // No retry by name after the close, as filelock makes for shares that
    // refuse to delete an open file: once closed, the name may link a peer's
    // marker (invariant I7). A marker left behind names this process, and
    // reads as stale once it exits.
    os.close(file);
    if failure.is_some() && active(Mutant::ReleaseUnlinksAfterClose) {
        let _ = os.unlink(cfg.lock);
    }
    match failure {
        Some(errno) => Err(Error::Os {
            op: Op::Remove,
            errno,
        }),
        None => Ok(()),
    }
}

/// How many times a release looks again when its marker is back at the
/// lock path after a removal that found it away.
const RELEASE_ROUNDS: u32 = 16;

/// The POSIX release of our open marker `file`, whose stat is `own`;
/// through a placeholder only once it is `marked` released.
fn release_posix<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    file: &O::File,
    own: &Stat,
    marked: bool,
) -> Result<(), Errno> {
    let mut round = 0;
    loop {
        let seen = match os.lstat(cfg.lock) {
            Ok(st) => st.same_file(own),
            Err(e) if e == Errno::NOENT => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut removal = Ok(());
        if seen {
            // Not a plain unlink: a peer's exchange may put its marker at the
            // lock path between our lstat and our unlink, and a peer whose
            // takeover is legitimate (our lease expired) would then hold the
            // lock with no marker. Swapping ours out through a placeholder
            // puts any such marker back.
            removal = if active(Mutant::ReleaseByUnlink) {
                unlink_seen(os, cfg, own)
            } else if marked {
                remove_own(os, cfg, file, own)
            } else {
                unlink_own(os, cfg, file, own)
            };
        }
        // Where our file is now: unlinked everywhere (done), at the lock
        // path, or held aside by a peer.
        let st = os.fstat(file)?;
        if st.nlink == 0 {
            // FAT: the release on disk at once, not half of it (13.2).
            settle_names(os, cfg, file);
            return Ok(());
        }
        if os.lstat(cfg.lock).is_ok_and(|st| st.same_file(own)) {
            // Back at the lock path: a peer whose check held it aside for an
            // instant (its exchange took our marker, not the file it judged)
            // has put it back while we looked. Look again.
            round += 1;
            if round < RELEASE_ROUNDS && !active(Mutant::ReleaseNoLookAgain) {
                continue;
            }
            return Err(removal.err().unwrap_or(Errno::IO));
        }
        // Held aside: mark it released in place, so nothing restores a
        // record that names us (invariant I17).
        if active(Mutant::AsideLeftUnmarked) {
            return Ok(());
        }
        return mark_released(os, file);
    }
}
