//! Directed races over the scenarios with planned syscall faults
//! ([`crate::planned`]): one call of one process fails where the race
//! needs it, and the script steers the rest.

use crate::directed::scenario;
use crate::script::{Lost, Script};

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
