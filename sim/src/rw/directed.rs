//! The directed races of the read-write lock: each steers one scenario
//! into a race too narrow for the random searches, for the guard it
//! names ([`Race::mutant`]), and is kept as bytes once it kills it.

use super::scenario::index_of;
use super::schedule::Action;
use super::script::{Lost, Script};
use swaplock_core::mutant::Mutant;

/// A directed race.
pub struct Race {
    /// Its name.
    pub name: &'static str,
    /// The guard it is written to need.
    pub mutant: Mutant,
    /// Steers the race; the script, ready to [`Script::finish`].
    pub steer: fn() -> Result<Script, Lost>,
}

/// Every directed race.
pub const ALL: &[Race] = &[
    Race {
        name: "a-commit-lands-in-a-log-that-replaced-the-one-read",
        mutant: Mutant::RwCommitIgnoresEpoch,
        steer: commit_in_a_new_log,
    },
    Race {
        name: "a-commit-checked-in-one-log-lands-in-the-next",
        mutant: Mutant::RwPredecessorByName,
        steer: link_into_a_new_log,
    },
];

fn scenario(name: &str) -> Result<Script, Lost> {
    let i = index_of(name).ok_or_else(|| Lost(format!("no scenario {name:?}")))?;
    Ok(Script::new(i))
}

/// A writer reads the log at generation 2 and is stopped before its
/// commit; an operator removes `gen/`; two readers start a new log and hold
/// at generation 2 of it. The writer resumes and commits generation 3 from
/// the old log's snapshot: the predecessor exists, and only the epoch read
/// again before the commit tells the logs apart (RW10). Without it the
/// writer is granted beside the readers.
fn commit_in_a_new_log() -> Result<Script, Lost> {
    new_log_under(false)
}

/// As [`commit_in_a_new_log`], but the writer is stopped after its commit
/// read the epoch and found the predecessor, just before its temporary
/// and its link: only the predecessor read again after the link, and
/// compared with the record the successor was built on, tells the logs
/// apart (RW10, RW11).
fn link_into_a_new_log() -> Result<Script, Lost> {
    new_log_under(true)
}

/// The race of both: the writer stopped before its commit, or (`checked`)
/// after its commit's checks before the link.
fn new_log_under(checked: bool) -> Result<Script, Lost> {
    let mut s = scenario("a-participant-stopped-while-gen-is-removed")?;
    // p0 holds and leaves: the old log is at 2, empty.
    s.until(0, "Left", 200)?;
    // p1 reads it, refreshes its record, sweeps; its commit is next.
    s.until(1, "open holders", 100)?;
    s.until(1, "list gen/", 10)?;
    if checked {
        s.until(1, "read gen/epoch", 5)?;
        s.until(1, "read gen/2", 5)?;
    }
    s.fault(Action::Pause(1))?;
    // The operator, then the new log's two readers.
    s.until(2, "OPERATOR", 5)?;
    s.until(3, "Granted", 300)?;
    s.until(4, "Granted", 300)?;
    Ok(s)
}
