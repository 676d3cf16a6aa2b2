//! The exchange takeover under POSIX rules (PROTOCOL 7.8, 7.9): our
//! complete marker, written under a private break name, is exchanged with
//! the lock path in one step; we keep the lock only if the file we took is
//! the one we judged, and otherwise put it back.
//!
//! Invariants kept here:
//! - I3: the lock path is never empty: the stale marker is exchanged for
//!   ours, never unlinked first.
//! - I4: the taken file must be the judged one in inode and mtime, or it
//!   goes back.
//! - I11: without an exchange, nothing moves.
//! - I14: our break name carries our PID, so a breaker killed mid-swap
//!   leaves a record naming itself for recovery.
//! - I16: exchange-back always takes our file off the lock path, waits a
//!   bounded time for nested breakers otherwise, and never exchanges the
//!   lock path while it holds another process's file, but to swap straight
//!   back a file its own exchange fed aside.

use super::config::{own_record, Config, Error};
use super::marker::{
    encode_placeholder, encode_placeholder_over, publish_aside, publish_synced, settle_names,
    unlink_if_same,
};
use super::os::Os;
use super::recovery::{Recovery, Stranded};
use super::types::{Breaker, Held, Judged, Takeover};
use crate::errno::Errno;
use crate::mutant::{active, Mutant};
use crate::names::pid_break_name;
use crate::record::{MAX_RECORD_LEN, RELEASED};
use core::time::Duration;

/// The exchange takeover of the judged marker `judged`, whose writer (or
/// placeholder's breaker) is `breaker`. The caller holds the pin
/// throughout.
pub(super) fn take_over_by_exchange<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    judged: &Judged,
    breaker: Option<&Breaker>,
) -> Result<Takeover<O::File>, Error> {
    match os.lstat(cfg.lock) {
        Ok(st) if judged.is(&st) => {}
        _ => return Ok(Takeover::Busy),
    }
    if let Some(breaker) = breaker.filter(|_| !active(Mutant::NoRecovery)) {
        let recovery = Recovery {
            os: &mut *os,
            cfg,
            judged,
            breaker: breaker.digits(),
        };
        if recovery.run()? == Stranded::Held && !active(Mutant::RecoveryHeldIgnored) {
            return Ok(Takeover::Busy);
        }
    }
    let token = os.token();
    let aside = pid_break_name(cfg.lock, cfg.pid, &token)?;
    let published = publish_aside(
        os,
        cfg,
        &aside,
        &token,
        cfg.marker_mode(),
        Mutant::BreakFileWrittenInPlace,
        // Our record reaches the disk before its break name, and so
        // before the lock path, names it (7.8 step 3): a power cut during
        // the hold keeps our whole marker, not an empty one.
        |os, file| publish_synced(os, cfg, file),
    )?;
    let Some((file, id)) = published else {
        return Ok(Takeover::Busy);
    };
    // A peer acted during the scan or the write: leave everything as it is.
    match os.lstat(cfg.lock) {
        Ok(st) if judged.is(&st) => {}
        _ if active(Mutant::NoRecheckBeforeExchange) => {}
        _ => {
            abandon(os, cfg, file, &aside, PutBack::No);
            return Ok(Takeover::Busy);
        }
    }
    // Invariant I3: the lock path is never empty; I11: no exchange, no move.
    // An exchange answered with an error may have been made all the same
    // (a FUSE server's EINTR after it acted, a lost NFS reply): our break
    // name tells. Our own file there: nothing moved. The judged file there
    // and ours at the lock path: we took it, as a successful exchange
    // does. Anything else (a marker a peer published between our look and
    // our exchange, a server's exchange left half done), or no answer: only
    // a put-back returns what it may hold to the lock path.
    if os.exchange(&aside, cfg.lock).is_err() {
        let put_back = match os.lstat(&aside) {
            _ if active(Mutant::ExchangeErrorNeverMade) => Some(PutBack::No),
            Ok(st) if st.id == id => Some(PutBack::No),
            Ok(st) if judged.is(&st) && os.lstat(cfg.lock).is_ok_and(|at| at.id == id) => None,
            _ => Some(PutBack::Yes),
        };
        if let Some(put_back) = put_back {
            abandon(os, cfg, file, &aside, put_back);
            return Ok(Takeover::Busy);
        }
    }
    // FAT: the exchange on disk before anything else is (13.2).
    settle_names(os, cfg, &file);
    // Invariant I4: we hold the lock only if we took the judged file.
    match os.lstat(&aside) {
        Ok(taken) if judged.is(&taken) => {}
        _ if active(Mutant::NoTakenCheck) => {}
        _ => {
            abandon(os, cfg, file, &aside, PutBack::Yes);
            return Ok(Takeover::Busy);
        }
    }
    if os.unlink(&aside).is_err() {
        abandon(os, cfg, file, &aside, PutBack::Judged);
        return Ok(Takeover::Busy);
    }
    settle_names(os, cfg, &file);
    // Our marker must still exist: a contender that paused here longer than
    // a lease would find that a peer expired it, took it over and removed it
    // meanwhile. A peer's check may hold it aside for an instant, which keeps
    // it linked, so the link count, not the lock path, tells.
    if !os.fstat(&file).is_ok_and(|st| st.nlink > 0) && !active(Mutant::NoLinkCountAfterTakeover) {
        os.close(file);
        return Ok(Takeover::Busy);
    }
    Ok(Takeover::Took(Held { file, id }))
}

/// Whether an abandoned takeover had exchanged, so that what it took must
/// go back to the lock path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PutBack {
    /// What we took is not the judged file: it may be a live holder's
    /// marker, which a recovery of our names puts back only while the lock
    /// path shows our file.
    Yes,
    /// What we took is the judged file, and removing it from our break
    /// name failed. Gone from there later, it may be our own unlink that
    /// went through after all, which left our record at the lock path for
    /// a lock we do not hold: removed, as for a settled put-back.
    Judged,
    /// No exchange was made.
    No,
}

/// Abandons a takeover (PROTOCOL 7.9): put back what we took if asked, then
/// remove our file from whichever name holds it, then close it.
///
/// When the exchange-back did not settle, our file may still sit under a
/// nested breaker's name, and that breaker's own exchange-back (or a
/// recovery of its names) may later return it to the lock path. It holds
/// our complete record, which names this live process: published there, it
/// would keep every contender out until we exit. So before letting go of
/// it we overwrite it with our placeholder, which a contender reads as
/// malformed and evicts after the grace period. Not the released record:
/// what we took (a live holder's marker, if a nested breaker took our file
/// and was killed) may still wait under our break name, and only a record
/// naming us leads a recovery there; the placeholder names us as a breaker,
/// never as a holder. A file we never exchanged is marked released
/// whenever it may still be linked under our break name: left empty or
/// half-written there, a recovery of our names would take it for a live
/// recordless holder's marker and publish it at the lock path.
fn abandon<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    file: O::File,
    aside: &[u8],
    put_back: PutBack,
) {
    let settled = match put_back {
        PutBack::Yes | PutBack::Judged if active(Mutant::NoPutBack) => Settled::Yes,
        PutBack::Yes | PutBack::Judged => exchange_back(os, cfg.lock, aside, &file),
        PutBack::No => Settled::Yes,
    };
    // A recovery of our names holds what we took. Our file stays at the
    // lock path (removed, it would leave the path empty while what we took
    // waits aside: 12.1 S8), but not with our record: that recovery may
    // find what it claimed released or dead and remove it, and our record
    // would then name this live process, which holds nothing, at the lock
    // path for as long as it lives (12.1 S13). Our placeholder instead: a
    // recovery that looked before the write puts its claim back over it as
    // it would over our record; one that looks after sees the path
    // changed and hands its claim back under our break name, where the
    // contender that evicts the placeholder after the grace period
    // recovers it.
    if settled == Settled::Claimed && put_back == PutBack::Yes {
        if !active(Mutant::ClaimedLeavesRecord) {
            let _ = mark_placeholder(os, cfg, &file);
        }
        os.close(file);
        return;
    }
    let settled = settled != Settled::No;
    // Without an exchange our file was never at the lock path: if it may
    // still be linked, under our break name, it must not stay empty or
    // half-written there (a recovery of our names would take it for a
    // live recordless holder's marker and publish it at the lock path).
    let never_exchanged = put_back == PutBack::No;
    if let Ok(own) = os.fstat(&file) {
        if settled {
            unlink_if_same(os, cfg.lock, &own);
        }
        unlink_if_same(os, aside, &own);
        // Still linked: under another breaker's name, under ours if the
        // unlink failed, at the lock path, where an exchange-back that
        // failed (a transient error, say) left it, or, settled, under a
        // recoverer's restore name: a recovery of our names may claim our
        // own file from our break name once our exchange-back put it
        // there (12.1 S14). Our record must not stay anywhere a recovery
        // or a put-back may publish it, nor at the lock path: naming this
        // live process, it would keep every contender out until we exit.
        let left =
            active(Mutant::AbandonLeavesRecord) || (settled && active(Mutant::SettledLeavesRecord));
        if !left && !os.fstat(&file).is_ok_and(|st| st.nlink == 0) {
            let at_lock = os.lstat(cfg.lock).is_ok_and(|st| st.same_file(&own));
            // A settled exchange-back may have counted our break name
            // claimed as settled, and a recovery may hand what it claimed
            // back under our break name: only without an exchange is
            // nothing of a holder's there for a record naming us to lead a
            // recovery to.
            if (never_exchanged && !at_lock) || active(Mutant::AbandonMarksReleased) {
                let _ = mark_released(os, &file);
            } else {
                // What we took may wait under our break name (a live
                // holder's marker): the mark must still lead a recovery
                // there, so it names us, as a placeholder does; at the
                // lock path it ages out, and the contender that evicts it
                // recovers our break names.
                let _ = mark_placeholder(os, cfg, &file);
            }
        }
    } else if never_exchanged && !active(Mutant::AbandonLeavesRecord) {
        let _ = mark_released(os, &file);
    }
    os.close(file);
}

/// Overwrites our own open file with the released record (PROTOCOL 2.5),
/// so that nothing that later moves it reads a record naming us.
pub(super) fn mark_released<O: Os + ?Sized>(os: &mut O, file: &O::File) -> Result<(), Errno> {
    os.write_at(file, RELEASED, 0)
        .and_then(|_| os.truncate(file, RELEASED.len() as u64))
}

/// Overwrites our own open file, which holds our record, with our
/// placeholder (PROTOCOL 2.4), `filelock/break\n<our pid>\n`: no record
/// naming us as a holder, yet it names us, so whoever evicts it at the lock
/// path (malformed, after the grace period) recovers our break names, where
/// a marker we took may wait. Its PID is led by zeros to our record's
/// length, so one write replaces every byte of the record and no cut is
/// needed: a placeholder cut short would mix with the rest of our record
/// into a file that names no breaker, evicted after the grace period with
/// no recovery of our names, beside a live holder whose marker waits under
/// one.
fn mark_placeholder<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    file: &O::File,
) -> Result<(), Errno> {
    if active(Mutant::TornPlaceholderKept) {
        let mut buf = [0u8; 40];
        let bytes = encode_placeholder(cfg, &mut buf)?;
        return os
            .write_at(file, bytes, 0)
            .and_then(|_| os.truncate(file, bytes.len() as u64));
    }
    let mut record = [0u8; MAX_RECORD_LEN];
    let record_len = own_record(cfg, &mut record).unwrap_or(0);
    let mut buf = [0u8; MAX_RECORD_LEN];
    let bytes = encode_placeholder_over(cfg, record_len, &mut buf)?;
    let marked = write_whole_at(os, file, bytes);
    if marked.is_err() && record_len > 0 {
        // Written in part, the mark mixes with our record into a file that
        // names no breaker: our record back whole instead, which keeps the
        // lock path, at worst, for as long as we live.
        if write_whole_at(os, file, &record[..record_len]).is_ok() && record_len < bytes.len() {
            let _ = os.truncate(file, record_len as u64);
        }
    }
    marked
}

/// `pwrite` of all of `bytes` at offset 0, going on after a short count
/// and retrying `EINTR` a few times.
fn write_whole_at<O: Os + ?Sized>(os: &mut O, file: &O::File, bytes: &[u8]) -> Result<(), Errno> {
    let (mut at, mut interrupted) = (0, 0);
    while at < bytes.len() {
        match os.write_at(file, &bytes[at..], at as u64) {
            Ok(0) => return Err(Errno::IO),
            Ok(n) => at += n,
            Err(e) if e == Errno::INTR && interrupted < 4 => interrupted += 1,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// How long exchange-back waits while our file is not at the lock path
/// (invariant I16), and how long it pauses between looks.
const EXCHANGE_BACK_LIMIT: Duration = Duration::from_secs(2);
const EXCHANGE_BACK_PAUSE: Duration = Duration::from_micros(500);

/// Whether an exchange-back settled: our file is off both names it
/// touched, and what it took is back at the lock path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Settled {
    /// Settled: the aside name no longer holds our file.
    Yes,
    /// Not settled: a name went missing, a call failed, or nested breakers
    /// did not undo their exchanges in time.
    No,
    /// Our break name was claimed while our file sat at the lock path: a
    /// recovery of our names (our record judged past its lifetime, say)
    /// holds what we took, and puts it back only while the path still
    /// shows our file unchanged. Nothing is to be touched.
    Claimed,
}

/// Puts our own file (open as `file`) back under `aside`, so that what we
/// took returns to the lock path (PROTOCOL 7.9). While our file sits at the
/// lock path there is no deadline: it must come off. Otherwise it waits up
/// to 2 s for nested breakers to undo their exchanges. Unlike filelock, it
/// never exchanges while the lock path holds another file: the simulator
/// showed that such a "feeding" exchange can capture a marker a new holder
/// created after the ring formed, and a second holder then enters. A ring
/// left by a killed breaker is unwound by stranded-record recovery instead.
/// Its own exchange feeds too when the lock path changed between its look
/// and its exchange: what it fed stays aside (PROTOCOL 12.1 S10, S16). At
/// the end it removes the aside name only if it holds our own file, or, once
/// the lock path went missing, the file it took (12.1 S9).
pub(super) fn exchange_back<O: Os + ?Sized>(
    os: &mut O,
    lock: &[u8],
    aside: &[u8],
    file: &O::File,
) -> Settled {
    let Ok(own) = os.fstat(file) else {
        return Settled::No;
    };
    let start = os.now();
    // Whether the loop ended on the lock path missing.
    let mut path_missing = false;
    let mut at_aside = os.lstat(aside);
    loop {
        match at_aside {
            Ok(st) if st.same_file(&own) => break,
            Ok(_) => {}
            // What we took was claimed from our break name while our file
            // sits at the lock path. Removing our file there (as a settled
            // exchange-back lets abandon do) made that recovery hand the
            // claim back under our break name and left the path empty: a
            // new holder's marker we took stayed aside, and the next
            // contender entered beside its holder (PROTOCOL 12.1 S8).
            Err(e) if e == Errno::NOENT && !active(Mutant::ClaimedAsideSettles) => {
                if os.lstat(lock).is_ok_and(|st| st.same_file(&own)) {
                    return Settled::Claimed;
                }
                break;
            }
            Err(e) if e == Errno::NOENT => break,
            Err(_) => return Settled::No,
        }
        let ours = match os.lstat(lock) {
            Ok(st) => st.same_file(&own),
            Err(e) if e == Errno::NOENT => {
                path_missing = true;
                break;
            }
            Err(_) => return Settled::No,
        };
        if ours || active(Mutant::FeedingExchangeBack) {
            // Undo our own exchange: what we took goes back to the lock path,
            // our file comes off it.
            if os.exchange(aside, lock).is_err() {
                return Settled::No;
            }
            at_aside = os.lstat(aside);
            // Our break name should now hold our own file. Another file
            // there replaced ours at the lock path between our look and
            // our exchange, and we fed it aside (PROTOCOL 12.1 S10): inside
            // the timing assumption a nested breaker's file, a releaser's
            // placeholder or a recovery's restored record, each in the
            // middle of an exchange it means to undo. It stays there, and
            // our file is waited for as under a nested breaker's name. No
            // swap back: an exchange takes whatever the path holds when it
            // runs, and a process paused before it (within the 2 s a
            // breaker may take here, 13.1) took aside a marker a new holder
            // had made since, while that holder held, whatever it had
            // looked at first (12.1 S16).
            if ours
                && active(Mutant::SwapBack)
                && at_aside.as_ref().is_ok_and(|st| !st.same_file(&own))
            {
                let _ = os.exchange(aside, lock);
                at_aside = os.lstat(aside);
            }
            continue;
        } else if os.now().since(start) >= EXCHANGE_BACK_LIMIT {
            return Settled::No;
        } else {
            // Our file sits under a nested breaker's name: wait for that
            // breaker to undo its exchange, which puts our file back at the
            // lock path. Never exchange the lock path while it holds a file
            // that is not ours: that would take whatever is there now,
            // possibly a marker a new holder created after the ring formed.
            os.sleep(EXCHANGE_BACK_PAUSE);
        }
        at_aside = os.lstat(aside);
    }
    // Remove the aside name if it holds our own file. Another file there is
    // the file we took, and only once the lock path went missing: nobody
    // else creates our break name, and a recovery of our names only renames
    // it away. (Or a file we fed aside: see above.) Nothing but a create
    // fills a missing lock path, so if that file's holder still held,
    // whoever creates the path next would enter beside it wherever the
    // file is: removing it lets in nobody that leaving it would keep out. Where this happens, its holder ended its
    // hold by removing the lock path by name (a recordless holder, a holder
    // by name). Left here, the file would come back only through a
    // recovery of our names, and an empty one would then stay at the lock
    // path, where nobody evicts it (PROTOCOL 12.1 S9): it is removed, and
    // the exchange-back still reports it did not settle, since our own file
    // waits under a nested breaker's name. filelock unlinks whatever the
    // aside holds at every exit; elsewhere a foreign file is left in place.
    let settled = match os.lstat(aside) {
        Ok(st) if st.same_file(&own) => os.unlink(aside).is_ok(),
        Ok(_) if path_missing && !active(Mutant::AsideKeptWhenPathMissing) => {
            let _ = os.unlink(aside);
            false
        }
        Ok(_) if active(Mutant::ExchangeBackUnlinksAside) => os.unlink(aside).is_ok(),
        Ok(_) => false,
        Err(e) => e == Errno::NOENT,
    };
    if settled {
        Settled::Yes
    } else {
        Settled::No
    }
}
