//! Directed races for the exchange-back's guards (PROTOCOL 7.9, 12.1 S3,
//! S4): a breaker stuck in its exchange-back while a new holder's marker
//! reaches the lock path, and the path then goes missing.

use crate::directed::scenario;
use crate::script::{Lost, Script};

/// The race of `placeholder_taken_aside` in [`crate::directed`]: a
/// releaser's placeholder taken aside by a breaker whose own file is then
/// taken over by a third contender, which enters. The breaker's
/// exchange-back finds the new holder's marker at the lock path and the
/// placeholder under its break name. A feeding exchange puts the
/// placeholder back at the path and the new holder's marker under the
/// break name; the releaser, which sees its placeholder at the path
/// again, unlinks it (its own file). The path is missing, so the
/// exchange-back ends, leaving the holder's marker aside, and the
/// breaker's next attempt creates the lock file and enters beside the
/// holder. Only never exchanging while the path holds another process's
/// file keeps the holder's marker at the path: the breaker waits, gives
/// up, and its next attempt finds the lock held.
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
