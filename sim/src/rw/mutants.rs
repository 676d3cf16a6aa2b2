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

/// Mutants argued equivalent in PROTOCOL 16's section on where swaplock
/// is stricter: no run the oracle judges tells them from the shipped
/// driver.
pub const EQUIVALENT: &[Mutant] = &[];

/// Every read-write mutant not argued equivalent.
pub fn catalogue() -> Vec<Mutant> {
    Mutant::RW.iter().copied().filter(|m| !EQUIVALENT.contains(m)).collect()
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
    Path::new(env!("CARGO_MANIFEST_DIR")).join("findings").join("rw")
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
        let Ok(data) = std::fs::read(&path) else { continue };
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
