//! Directed races of breakers and recoverers at work at once: a breaker
//! stuck in its exchange-back while a new holder's marker reaches the
//! lock path (PROTOCOL 7.9, 12.1 S3), two recoveries of different
//! breakers' names, one reaching the other's claim (7.11, I15), a
//! recovery claiming what a stopped lifetime breaker took (12.1 S8), and
//! a breaker whose exchange-back finds the lock path missing (12.1 S9).

use crate::script::{scenario, Lost, Script};

/// The race of `placeholder_taken_aside` in [`crate::directed`]: a
/// releaser's placeholder taken aside by a breaker whose own file is then
/// taken over by a third contender, which enters. The breaker's
/// exchange-back finds the new holder's marker at the lock path and the
/// placeholder under its break name. A feeding exchange puts the
/// placeholder back at the path and the new holder's marker under the
/// break name; the releaser, which sees its placeholder at the path
/// again, unlinks it (its own file). The path is missing, so the
/// exchange-back ends and removes what waits under its break name
/// (PROTOCOL 12.1 S9): the holder's marker, taken while its holder holds.
/// (Before S9 it stayed aside, and the breaker's next attempt created the
/// lock file and entered beside the holder.) Only never exchanging while
/// the path holds another process's file keeps the holder's marker at the
/// path: the breaker waits, gives up, and its next attempt finds the
/// lock held.
pub(crate) fn placeholder_fed_back() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "lease: 2 s mtimes, 10 ms change times, a holder stopped past its lease",
    )?);
    s.until(0, "ENTERS", 200)?;
    s.until(0, "leaves the critical section", 200)?;
    let p = s.turns_until(&[1, 2], "rename a.lock.write", 5_000)?;
    let q = 3 - p;
    s.until(p, "lstat a.lock", 5)?;
    s.until(0, "exchange a.lock.break.101", 50)?;
    s.until(p, "exchange", 5)?;
    s.until(q, "ENTERS", 5_000)?;
    s.until(p, "exchange", 20)?;
    s.until(0, "unlink a.lock ->", 10)?;
    s.until_violation(p, 3_000)?;
    Ok(s)
}

/// Two recoveries of different breakers' names at once. A contender
/// judges the dead marker and stops before its recovery's listing; a
/// breaker passes its last look, a peer takes the dead marker over and
/// enters, and the breaker's exchange takes the new holder's marker aside
/// and it is killed. A recoverer of the killed breaker's names claims
/// that marker and stops. The first contender's listing then finds the
/// claim under the live recoverer's restore name: the lock counts as
/// held. Claimed instead, the marker is judged against the first
/// contender's own judgement (the original dead marker, gone from the
/// lock path), so it is handed back under a break name of the original
/// dead writer, where no recovery of the killed breaker's names looks:
/// the robbed recoverer's next attempt finds the killed breaker's record
/// alone and enters beside the holder.
pub(crate) fn claim_stolen_across_breakers() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "soft: a recordless holder beside breakers of a dead marker, two recoverers",
    )?);
    // With five runnable processes, the kill byte kills the first.
    let (b, holder, first, _recordless, thief) = (0, 1, 2, 3, 4);
    s.until(thief, "probe 999", 400)?;
    s.until(thief, "lstat a.lock", 5)?;
    s.until(b, "rename a.lock.write", 400)?;
    s.until(b, "lstat a.lock", 5)?;
    s.until(holder, "ENTERS", 400)?;
    s.until(b, "exchange a.lock.break.101", 5)?;
    s.kill(b)?;
    s.until(first, "rename a.lock.break.101", 3_000)?;
    s.until(thief, "a.lock.break.999", 60)?;
    s.until_violation(first, 3_000)?;
    Ok(s)
}

/// A lifetime breaker stopped past the lifetime right after its exchange
/// took a new holder's marker aside (PROTOCOL 12.1 S8). The breaker
/// writes its marker and makes its last look at the dead marker; a poller
/// lets time pass; a peer breaks the dead marker and enters; the
/// breaker's exchange takes the peer's fresh marker aside, and it stops.
/// Once the breaker's own marker at the lock path is older than the
/// lifetime, a third contender breaks it, recovers the breaker's names
/// and claims the holder's marker. The breaker wakes to find its break
/// name gone. Counted settled, its abandon removed its own file from the
/// lock path, so the recovery, no longer seeing the file it judged there,
/// handed the holder's marker back under the breaker's break name and
/// the path was empty: the breaker's next create entered beside the
/// holder, whose marker was still younger than the lifetime. Leaving its
/// file untouched at the path lets the recovery put the holder's marker
/// back.
pub(crate) fn claimed_from_a_stopped_breaker() -> Result<Script, Lost> {
    let mut s = Script::new(scenario("soft: lifetime breaks, a poller lets time pass")?);
    let (breaker, holder, third, poller) = (0, 1, 2, 3);
    s.until(breaker, "rename a.lock.write", 400)?;
    s.until(breaker, "lstat a.lock", 5)?;
    // Two seconds between the breaker's marker and the holder's.
    for _ in 0..40 {
        s.until(poller, "sleeps", 5)?;
    }
    s.until(holder, "ENTERS", 400)?;
    s.until(breaker, "exchange a.lock.break.101", 5)?;
    // Past the lifetime of the breaker's marker, not of the holder's.
    for _ in 0..160 {
        s.until(poller, "sleeps", 5)?;
    }
    s.until(third, "rename a.lock.break.101", 200)?;
    s.until_violation(breaker, 300)?;
    Ok(s)
}

/// A recordless holder's hold ends while its marker waits under a
/// breaker's break name, inside that breaker's exchange-back wait. As in
/// PROTOCOL 12.3 G1, a takeover T's exchange takes the recordless marker
/// aside and a breaker B's exchange takes T's file aside, and B is
/// killed; but here the recordless holder entered more than a second
/// before, so its 3 s hold ends within T's 2 s wait, and its unlink by
/// name removes B's record: T finds the lock path missing. The empty file
/// under T's break name names nobody now, and is no one's. Left there, it
/// reads as a live recordless marker to a recovery of T's names, which
/// comes once T has held the lock again and is killed holding: it goes
/// back to the lock path, where nobody evicts it. Removed by T's
/// exchange-back, nothing is left to restore and the next contender
/// enters.
pub(crate) fn aside_left_when_the_path_goes_missing() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "soft: a recordless holder beside breakers of a dead marker, two recoverers",
    )?);
    let (taker, t, recordless, b) = (0, 1, 3, 4);
    s.until(b, "rename a.lock.write", 400)?;
    s.until(b, "lstat a.lock", 5)?;
    s.until(t, "rename a.lock.write", 400)?;
    s.until(t, "lstat a.lock", 5)?;
    s.until(taker, "ENTERS", 400)?;
    s.until(taker, "): released", 200)?;
    s.until(recordless, "ENTERS", 50)?;
    // 1.2 s of the recordless holder's 3 s hold.
    for _ in 0..24 {
        s.until(recordless, "sleeps", 2)?;
    }
    s.until(t, "exchange a.lock.break.102", 5)?;
    // With four runnable processes, the kill byte kills the last.
    s.until(b, "exchange a.lock.break.104", 5)?;
    s.kill(b)?;
    // T waits for its file to come back to the lock path.
    s.until(t, "sleeps 500", 20)?;
    s.until(recordless, "unlink a.lock ->", 100)?;
    s.until(t, "ENTERS", 300)?;
    // The others end (the last contender's attempts all find T holding),
    // so that the recovery of T's names is the progress check's.
    let r = 2;
    s.until_violation(recordless, 20)?;
    s.until_violation(r, 3_000)?;
    s.kill(t)?;
    s.finish();
    Ok(s)
}
