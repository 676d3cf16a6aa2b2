//! Directed races over the scenarios with planned syscall faults
//! ([`crate::planned`]): one call of one process fails where the race
//! needs it, and the script steers the rest.

use crate::script::{scenario, Lost, Script};

/// A lease holder stopped past its lease releases; the mark fails, so it
/// removes its marker by name: it sees its marker at the lock path, and
/// stops there. A peer, which watched the marker unchanged for the lease,
/// takes it over and enters. The holder's touch then lands on its own
/// file, now gone; only its look after the touch tells it that the lock
/// path shows the peer's marker, which its unlink would remove.
pub(crate) fn takeover_before_the_touch() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "lease: a holder stopped past its lease whose mark fails",
    )?);
    s.until(0, "ENTERS", 200)?;
    s.until(0, "pwrite", 200)?;
    // Its release looks, then its removal by name looks.
    s.until(0, "lstat a.lock", 3)?;
    s.until(0, "lstat a.lock", 1)?;
    s.until(1, "ENTERS", 5_000)?;
    s.until_violation(0, 50)?;
    Ok(s)
}

/// As [`takeover_before_the_touch`], but the holder's touch fails too,
/// and the holder stops after the look that follows it: the peer, which
/// judged the marker before, finds its mtime unchanged (the touch did
/// nothing), takes it over and enters. Only giving up when the touch
/// failed keeps the holder's unlink from removing the peer's marker.
pub(crate) fn takeover_after_a_failed_touch() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "lease: a holder stopped past its lease whose mark and touch fail",
    )?);
    s.until(0, "ENTERS", 200)?;
    s.until(0, "pwrite", 200)?;
    s.until(0, "lstat a.lock", 3)?;
    s.until(0, "lstat a.lock", 1)?;
    s.until(0, "futimens", 1)?;
    s.step(0)?;
    s.until(1, "ENTERS", 5_000)?;
    s.until_violation(0, 50)?;
    Ok(s)
}

/// As [`takeover_before_the_touch`], where mtimes are cut to 2 s and
/// change times to 10 ms. A peer watches the holder's marker, and once
/// the holder has stopped past its lease, judges it expired and stops
/// before its exchange. The holder's release touches its marker within
/// the two seconds of its last mtime, so that only the change time moves,
/// and looks again: its marker. The peer's look before its exchange and
/// its check of the file taken compare the inode and mtime, see the file
/// it judged, and it enters; an unlink by name now would remove its
/// marker. The holder must touch again until the mtime moves.
pub(crate) fn takeover_after_an_unseen_touch() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "lease: 2 s mtimes, 10 ms change times, a holder stopped past its lease whose mark fails",
    )?);
    s.until(0, "ENTERS", 200)?;
    // Its heartbeats, then it stops; the peer's first look at the marker
    // starts its watch.
    s.until(0, "sleeps", 50)?;
    s.until(1, "sleeps", 50)?;
    s.until(0, "leaves the critical section", 200)?;
    // Its next look finds it unchanged for the lease: it writes its
    // record under its break name.
    s.until(1, "create a.lock.write", 50)?;
    s.until(0, "pwrite", 5)?;
    // Its release looks, its removal by name looks, touches and looks.
    s.until(0, "lstat a.lock", 3)?;
    s.until(0, "lstat a.lock", 1)?;
    s.until(0, "futimens", 1)?;
    s.until(0, "lstat a.lock", 1)?;
    s.until(1, "ENTERS", 50)?;
    s.until_violation(0, 50)?;
    Ok(s)
}

/// The race of `recordless_marker_stranded` in [`crate::directed`]: a
/// breaker's exchange takes a recordless holder's marker aside and the
/// breaker is killed. The next contender's recovery of its names cannot
/// list the directory: only counting the lock as held then keeps it from
/// taking the killed breaker's record over while the recordless marker
/// waits under its name, its holder holding.
pub(crate) fn listing_fails_while_stranded() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "soft: a recordless holder beside breakers of a dead marker, a listing fails",
    )?);
    // With three runnable processes, the kill byte kills the first.
    let (b, taker, next, recordless) = (0, 1, 2, 3);
    s.until(b, "rename a.lock.write", 400)?;
    s.until(b, "lstat a.lock", 5)?;
    s.until(taker, "ENTERS", 400)?;
    s.until(taker, "): released", 200)?;
    s.until(recordless, "ENTERS", 50)?;
    s.until(b, "exchange a.lock.break.101", 5)?;
    s.kill(b)?;
    s.until(next, "list", 3_000)?;
    s.until_violation(next, 3_000)?;
    Ok(s)
}

/// A recovery that restores over whatever the lock path holds. Breakers
/// E and W judge the dead marker and pass their last look; a peer takes
/// it over, holds and releases; a recordless holder creates its empty
/// marker at the empty path and holds it. After more than a second, E's
/// exchange takes that marker aside, W's exchange takes E's file aside,
/// and W is killed. A recoverer C judges W's dead record at the lock path
/// and stops. Within E's exchange-back wait the recordless hold ends and
/// its unlink by name removes W's record: E finds the path missing,
/// removes the empty file from its break name (PROTOCOL 12.1 S9) and
/// marks its own file, under W's break name, with its placeholder. X
/// creates the lock file at the empty path and enters. C claims E's
/// placeholder from W's break name as live, and finds X's marker at the
/// lock path, not W's record it judged: it must hand the placeholder back.
/// Exchanged in regardless, with the exchange that undoes it failing
/// (planned), the placeholder stays at the lock path and X's marker goes
/// under W's break name; the placeholder ages out, and a contender that
/// evicts it recovers E's names, finds nothing, and enters beside X.
pub(crate) fn restored_over_a_new_holders_marker() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "soft: a recordless holder's unlink by name cuts a nested break short, a swap-back fails",
    )?);
    let (taker, w, e, c, x, recordless) = (0, 1, 2, 3, 4, 5);
    s.until(w, "rename a.lock.write", 400)?;
    s.until(w, "lstat a.lock", 5)?;
    s.until(e, "rename a.lock.write", 400)?;
    s.until(e, "lstat a.lock", 5)?;
    s.until(taker, "ENTERS", 400)?;
    s.until(taker, "): released", 200)?;
    s.until(recordless, "ENTERS", 50)?;
    // 1.2 s of the recordless holder's 3 s hold.
    for _ in 0..24 {
        s.until(recordless, "sleeps", 2)?;
    }
    s.until(e, "exchange a.lock.break.102", 5)?;
    s.until(w, "exchange a.lock.break.104", 5)?;
    // With five runnable processes, the kill byte kills the first.
    s.kill(w)?;
    s.until(e, "sleeps 500", 20)?;
    s.until(c, "probe 104", 400)?;
    s.until(c, "lstat a.lock", 3)?;
    s.until(recordless, "unlink a.lock ->", 100)?;
    s.until(e, "pwrite fd", 30)?;
    s.until(x, "ENTERS", 400)?;
    s.until(c, "rename a.lock.restore", 50)?;
    s.turns_until(&[c, e], "ENTERS", 20_000)?;
    s.until_violation(c, 1)?;
    Ok(s)
}
