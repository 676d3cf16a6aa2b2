//! Kept schedules of the read-write lock, its naive policy, and its
//! mutation run.
//!
//! - **Findings** (`sim/findings/rw/*.bin`): schedules on which the naive
//!   policy, the shipped driver with every guard where swaplock is
//!   stricter than filelock undone ([`NAIVE`], filelock 4.2.11's exact
//!   steps), breaks an invariant, and the shipped driver does not.
//! - **Mutants** (`sim/findings/rw/mutants/*.bin`): with one guard of the
//!   driver undone (a [`Mutant`] of [`Mutant::RW`]), a kept schedule finds
//!   a violation that the shipped driver does not ([`kill`]).
//!
//! A kept schedule is the scenario's index in [`scenarios`], then one
//! decision per byte ([`FromBytes`]).

use super::scenario::scenarios;
use super::schedule::{run, FromBytes, Random, Recording, MAX_STEPS};
use crate::runtime::Violation;
use std::path::{Path, PathBuf};
pub use swaplock_core::mutant::Mutant;

/// The naive policy: filelock's exact steps where swaplock is stricter.
pub const NAIVE: &[Mutant] = Mutant::RW_STRICTER;

/// Single mutants argued equivalent in PROTOCOL 16.12: no run the oracle judges tells them from the
/// shipped driver (or, within a group of [`GROUPS`], the others' guards
/// cover them).
pub const EQUIVALENT: &[Mutant] = &[
    // A landed link answered EEXIST is taken for lost: the next attempt
    // finds the participant named and commits again; a grant comes one
    // commit later, never beside another.
    Mutant::RwLinkByReturnCode,
    // Only a process outside the protocol makes a holder's name open
    // another file, or one with two names.
    Mutant::RwOverwriteUnchecked,
    // Covered by the predecessor check after the link ([`GROUPS`]).
    Mutant::RwNoPredecessorBefore,
    // Covered by the predecessor checks, which find a log grown again to
    // the same generation holding another record there ([`GROUPS`]).
    Mutant::RwCommitIgnoresEpoch,
    // Covered by the predecessor checks while compaction runs oldest
    // first, and by compaction's order while they hold ([`GROUPS`]).
    Mutant::RwNoLeadCheck,
    Mutant::RwCompactNewestFirst,
];

/// Groups of guards that cover each other: alone, each mutant survives
/// (another guard of the group holds); together they must be killed, or
/// be [`OPEN`].
pub const GROUPS: &[&[Mutant]] = &[
    // A commit into a slot compaction freed under a participant stopped
    // across a window: the check before the link and the one after cover
    // each other; the lead check is blind where the listing is a stale
    // cache (RW11).
    &[Mutant::RwNoPredecessorBefore, Mutant::RwNoPredecessorAfter],
    // A commit built on the log an operator removed, into the log grown
    // again: the epoch read again before the link, and the predecessor
    // compared with the record built on, cover each other (RW10).
    &[Mutant::RwCommitIgnoresEpoch, Mutant::RwPredecessorByName],
    // A commit into a slot a compaction stopped midway left free above a
    // generation it left: with compaction oldest first no such slot
    // exists, and without it the lead check refuses it (RW11, RW12).
    &[Mutant::RwNoLeadCheck, Mutant::RwCompactNewestFirst],
];

/// Entries no search has killed yet, each with what its race needs
/// (PROTOCOL 16.12). The kept-schedule test
/// reports them and fails once one is killed, so that this list stays
/// true.
pub const OPEN: &[&[Mutant]] = &[
    // HEAD moved back only costs probes unless a reader starting there
    // (patience 1) meets a hole below the head, and the shipped compaction
    // leaves none: its race needs a hole, so a compaction out of order too.
    &[Mutant::RwHeadOverNewer],
    // Three faults in one run: a winner stopped before its compaction, the
    // next one's compaction killed midway (newest first, leaving a slot free
    // above a generation), and a participant stopped across the window.
    &[Mutant::RwNoLeadCheck, Mutant::RwCompactNewestFirst],
];

/// Everything the read-write mutation run mutates: every single mutant not
/// argued equivalent, then the groups.
pub fn catalogue() -> Vec<&'static [Mutant]> {
    let single = Mutant::RW
        .iter()
        .filter(|m| !EQUIVALENT.contains(m))
        .map(std::slice::from_ref);
    single.chain(GROUPS.iter().copied()).collect()
}

/// An entry's name: its mutants' names joined by `+`.
pub fn name(entry: &[Mutant]) -> String {
    let names: Vec<&str> = entry.iter().map(|m| m.name()).collect();
    names.join("+")
}

/// Switches `ms` on for this thread until the returned value is dropped.
pub fn select(ms: &[Mutant]) -> Selected {
    swaplock_core::mutant::select(ms);
    Selected(())
}

/// Mutants on for this thread; dropping it switches them off.
pub struct Selected(());

impl Drop for Selected {
    fn drop(&mut self) {
        swaplock_core::mutant::select(&[]);
    }
}

/// The directory of the read-write findings.
pub fn findings_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("findings")
        .join("rw")
}

/// The directory of the schedules that killed read-write mutants.
pub fn mutants_dir() -> PathBuf {
    findings_dir().join("mutants")
}

/// The schedule files of `dir`, sorted.
pub fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    out.retain(|p| p.is_file() && p.extension().is_some_and(|e| e == "bin"));
    out.sort();
    out
}

/// Runs one kept schedule under the mutants switched on now; the
/// violation, if any, with its trace.
pub fn replay_traced(data: &[u8]) -> Option<Violation> {
    let (&which, schedule) = data.split_first()?;
    let all = scenarios();
    let scenario = &all[usize::from(which) % all.len()];
    let sim = run(scenario, 1, &mut FromBytes::new(schedule), false, MAX_STEPS);
    if !sim.failed() {
        return None;
    }
    let traced = run(scenario, 1, &mut FromBytes::new(schedule), true, MAX_STEPS);
    let mut v = traced.violation()?;
    v.what = format!("{}: {}", scenario.name, v.what);
    Some(v)
}

/// [`replay_traced`], the violation only.
pub fn replay(data: &[u8]) -> Option<String> {
    replay_traced(data).map(|v| v.what)
}

/// Replays `data` with the mutants `on` switched on, then switches back
/// those that were on.
pub fn replay_under(data: &[u8], on: &[Mutant]) -> Option<String> {
    let before: Vec<Mutant> = Mutant::ALL
        .iter()
        .copied()
        .filter(|&m| swaplock_core::mutant::active(m))
        .collect();
    swaplock_core::mutant::select(on);
    let found = replay(data);
    swaplock_core::mutant::select(&before);
    found
}

/// The violation `data` finds under the mutants switched on, if it is a
/// kill: the shipped driver must pass the same schedule.
pub fn kill(data: &[u8]) -> Option<String> {
    let v = replay(data)?;
    replay_under(data, &[]).is_none().then_some(v)
}

/// Replays every kept schedule of `dirs` under the mutants switched on;
/// the first that finds a violation, with it.
pub fn replay_kept(dirs: &[PathBuf]) -> Option<(PathBuf, String)> {
    dirs.iter()
        .flat_map(|d| files(d))
        .find_map(|p| replay(&std::fs::read(&p).ok()?).map(|v| (p, v)))
}

/// A schedule found to violate an invariant under the mutants switched
/// on, and passed by the shipped driver.
#[derive(Debug)]
pub struct Kill {
    /// The search that found it.
    pub by: &'static str,
    /// The violation.
    pub what: String,
    /// The schedule's bytes.
    pub schedule: Vec<u8>,
}

/// Searches random schedules of every scenario (`per_scenario` each, in
/// turns), then the fuzz corpus `corpus`, then the directed races, for a
/// kill under the mutants switched on.
pub fn hunt(per_scenario: u64, corpus: Option<&Path>) -> Option<Kill> {
    let all = scenarios();
    for n in 0..per_scenario {
        for (i, scenario) in all.iter().enumerate() {
            let seed = ((i as u64) << 40) + n;
            let mut chooser = Recording::new(Random::new(seed, 400));
            let sim = run(scenario, seed, &mut chooser, false, MAX_STEPS);
            if !sim.failed() {
                continue;
            }
            let Some(bytes) = chooser.bytes else { continue };
            let mut kept = vec![i as u8];
            kept.extend_from_slice(&bytes);
            if let Some(what) = kill(&kept) {
                return Some(Kill {
                    by: "random schedules",
                    what,
                    schedule: kept,
                });
            }
        }
    }
    for path in corpus.map(files).unwrap_or_default() {
        let Ok(data) = std::fs::read(&path) else {
            continue;
        };
        if let Some(what) = kill(&data) {
            return Some(Kill {
                by: "fuzz corpus",
                what,
                schedule: data,
            });
        }
    }
    for race in super::directed::ALL {
        let Ok(script) = (race.steer)() else { continue };
        let schedule = script.schedule();
        if let Some(what) = kill(&schedule) {
            return Some(Kill {
                by: "directed schedule",
                what: format!("{}: {what}", race.name),
                schedule,
            });
        }
    }
    None
}
