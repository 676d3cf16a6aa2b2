//! The protocol-mutation run: with one guard of the protocol undone (a
//! [`Mutant`] of `swaplock-core`, or a pair whose guards cover each
//! other), the searches must find a violation. [`catalogue`] lists what is
//! mutated; [`replay_kept`] replays the kept schedules, which is what
//! `cargo test` runs for every entry; [`hunt`] searches afresh (kept
//! schedules, then random schedules of every scenario, then the fuzz
//! corpus, then the directed races of [`crate::directed`]) and returns the
//! first kill with a schedule that replays it. A schedule the shipped
//! protocol fails too is no kill ([`kill`]): a race steered under another
//! mutant than its own may reach a gap the shipped protocol has (PROTOCOL
//! 12.3), and counting it would report a mutant killed that nothing kills.

use crate::cast::Policy;
use crate::runtime::Violation;
use crate::scenario::scenarios;
use crate::schedule::{run, Draw, FromBytes, Recording};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
pub use swaplock_core::mutant::Mutant;

/// What is mutated: one guard, or a pair whose guards cover each other
/// (each alone is equivalent; PROTOCOL 13.4 says which covers which).
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// The guards undone together.
    pub mutants: &'static [Mutant],
}

impl Entry {
    /// The entry's name: its mutants' names joined by `+`.
    pub fn name(&self) -> String {
        let names: Vec<&str> = self.mutants.iter().map(|m| m.name()).collect();
        names.join("+")
    }
}

/// Pairs of guards that cover each other: alone, each mutant of a pair
/// survives (the other guard holds); together they must be killed.
pub const PAIRS: &[&[Mutant]] = &[
    // Marked released first, our marker's mtime changes: a peer that
    // judged it before backs off, so filelock's lstat-then-unlink can
    // remove only a file whose takeover then fails.
    &[Mutant::ReleaseByUnlink, Mutant::ReleaseWithoutMark],
];

/// Single mutants argued equivalent in PROTOCOL 13.4: no run the oracle
/// judges can tell them from the shipped protocol (or, within a pair of
/// [`PAIRS`], the other guard covers them). `release-by-unlink`, once
/// argued so, is killed alone where mtimes are coarser than change times,
/// and its pair stays.
pub const EQUIVALENT: &[Mutant] = &[
    // Our own restore name taken for a live recoverer's answers "held",
    // the fail-closed answer: nothing is moved or removed, and once we
    // exit the name is a dead recoverer's that any recovery claims. Only
    // our own progress while we live differs, which no oracle judges.
    Mutant::NoAdoptOwnClaim,
    // A foreign file under our break name at the end of an exchange-back
    // is the file we took, and only once the lock path went missing, where
    // the shipped exchange-back removes it too (12.1 S9): at every other
    // exit the aside holds our own file or nothing.
    Mutant::ExchangeBackUnlinksAside,
];

/// Mutants no search has killed yet, each with what its race needs
/// (PROTOCOL 13.4). The kept-schedule test reports them and fails once
/// one is killed, so that this list stays true.
pub const OPEN: &[Mutant] = &[];

/// Everything the mutation run mutates: every single mutant of the soft
/// and kernel locks not argued equivalent, then the pairs (the read-write
/// lock's, [`Mutant::RW`], are [`crate::rw::mutants`]').
pub fn catalogue() -> Vec<Entry> {
    let single = Mutant::ALL
        .iter()
        .filter(|m| !EQUIVALENT.contains(m) && !Mutant::RW.contains(m))
        .map(|m| Entry {
            mutants: std::slice::from_ref(m),
        });
    single
        .chain(PAIRS.iter().map(|&mutants| Entry { mutants }))
        .collect()
}

/// Switches `entry`'s mutants on for this thread until the returned value
/// is dropped.
pub fn select(entry: &Entry) -> Selected {
    swaplock_core::mutant::select(entry.mutants);
    Selected(())
}

/// Mutants on for this thread; dropping it switches them off.
pub struct Selected(());

impl Drop for Selected {
    fn drop(&mut self) {
        swaplock_core::mutant::select(&[]);
    }
}

/// The directories of kept schedules: the findings, and the schedules
/// that killed mutants.
pub fn kept_dirs() -> [PathBuf; 2] {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("findings");
    [root.join("mutants"), root]
}

/// The schedule files of `dir`, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    out.retain(|p| p.is_file() && p.extension().is_some_and(|e| e == "bin"));
    out.sort();
    out
}

/// Runs one kept schedule (the scenario's index in the catalogue, then a
/// decision per byte); the violation, if any, as `scenario: violation`.
pub fn replay(data: &[u8]) -> Option<String> {
    replay_traced(data).map(|(scenario, v)| format!("{scenario}: {}", v.what))
}

/// [`replay`], with the scenario's name and the violation's trace.
pub fn replay_traced(data: &[u8]) -> Option<(&'static str, Violation)> {
    let (&which, schedule) = data.split_first()?;
    let all = scenarios(Policy::Ours);
    let (what, scenario, _) = &all[usize::from(which) % all.len()];
    let sim = run(scenario, 1, &mut FromBytes::new(schedule), false, 20_000);
    if !sim.failed() {
        return None;
    }
    let traced = run(scenario, 1, &mut FromBytes::new(schedule), true, 20_000);
    traced.violation().map(|v| (*what, v))
}

/// Replays `data` on the shipped protocol (no mutant on), then switches
/// back on the mutants that were on: the violation, if any, as [`replay`].
pub fn replay_shipped(data: &[u8]) -> Option<String> {
    let on: Vec<Mutant> = Mutant::ALL
        .iter()
        .copied()
        .filter(|&m| swaplock_core::mutant::active(m))
        .collect();
    swaplock_core::mutant::select(&[]);
    let shipped = replay(data);
    swaplock_core::mutant::select(&on);
    shipped
}

/// The violation `data` finds under the mutants switched on, if it is a
/// kill: the shipped protocol must pass the same schedule, or the
/// violation is not the mutants' doing.
pub fn kill(data: &[u8]) -> Option<String> {
    let v = replay(data)?;
    replay_shipped(data).is_none().then_some(v)
}

/// Replays every kept schedule of `dirs` under the mutants switched on;
/// the first that finds a violation, with it.
pub fn replay_kept(dirs: &[PathBuf]) -> Option<(PathBuf, String)> {
    dirs.iter()
        .flat_map(|d| files(d))
        .find_map(|p| replay(&std::fs::read(&p).ok()?).map(|v| (p, v)))
}

/// A mutant found out.
#[derive(Debug)]
pub struct Kill {
    /// The search that found it.
    pub by: &'static str,
    /// How long that took, from the start of the hunt.
    pub after: Duration,
    /// The violation.
    pub what: String,
    /// A schedule that replays it, unless it was a kept one already.
    pub schedule: Option<Vec<u8>>,
}

/// Searches for a violation under the mutants switched on: the kept
/// schedules (unless `fresh`); then up to `per_scenario` random schedules
/// of each scenario, taken in turns and drawn in turns three ways
/// ([`Draw::nth`]), each killing only the process a kept
/// schedule's byte can name, so that every violation found can be kept;
/// then every input of the fuzz corpus in `corpus`; then the directed
/// races. Each found schedule counts only
/// if the shipped protocol passes it ([`kill`]); the kept ones do
/// (`tests/mutants.rs`).
pub fn hunt(per_scenario: u64, fresh: bool, corpus: Option<&Path>) -> Option<Kill> {
    let started = Instant::now();
    let kept = if fresh {
        None
    } else {
        replay_kept(&kept_dirs())
    };
    if let Some((path, what)) = kept {
        return Some(Kill {
            by: "kept schedule",
            after: started.elapsed(),
            what: format!("{}: {what}", path.display()),
            schedule: None,
        });
    }
    let all = scenarios(Policy::Ours);
    // SWAPLOCK_MUTANTS_SCENARIO=text: random schedules of the scenarios
    // whose names contain it only (a deep race's kill, searched where it
    // was found).
    let only = std::env::var("SWAPLOCK_MUTANTS_SCENARIO").ok();
    // SWAPLOCK_MUTANTS_FIRST=n: the first random schedule's number, so
    // that hunts in several processes draw different schedules.
    let first: u64 = std::env::var("SWAPLOCK_MUTANTS_FIRST")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // SWAPLOCK_MUTANTS_DRAW=uniform|pausing|pct: how the random schedules
    // are drawn (by default a third each, in turns).
    let forced = std::env::var("SWAPLOCK_MUTANTS_DRAW").unwrap_or_default();
    for n in first..first.saturating_add(per_scenario) {
        for (i, (what, scenario, crash_one_in)) in all.iter().enumerate() {
            if only.as_ref().is_some_and(|o| !what.contains(o.as_str())) {
                continue;
            }
            let seed = ((i as u64) << 40) + n;
            let draw = Draw::nth(&forced, n);
            let by = match draw {
                Draw::Uniform => "random schedules",
                Draw::Pausing => "random schedules with pauses",
                Draw::Pct => "PCT schedules",
            };
            let chooser = draw.chooser(scenario, seed, *crash_one_in, 2, true);
            let mut chooser = Recording::new(chooser);
            let sim = run(scenario, seed, &mut chooser, false, 20_000);
            if !sim.failed() {
                continue;
            }
            // Kept only if the bytes replay a violation (the world's
            // random source, seeded apart, may draw other faults).
            let Some(bytes) = chooser.bytes else { continue };
            let mut kept = vec![i as u8];
            kept.extend_from_slice(&bytes);
            if let Some(v) = kill(&kept) {
                return Some(Kill {
                    by,
                    after: started.elapsed(),
                    what: format!("{what} (seed {seed}): {v}"),
                    schedule: Some(kept),
                });
            }
        }
    }
    for path in corpus.map(files).unwrap_or_default() {
        let Ok(data) = std::fs::read(&path) else {
            continue;
        };
        if let Some(v) = kill(&data) {
            return Some(Kill {
                by: "fuzz corpus",
                after: started.elapsed(),
                what: v,
                schedule: Some(data),
            });
        }
    }
    for race in crate::directed::ALL {
        let Ok(script) = (race.steer)() else { continue };
        let schedule = script.schedule();
        if let Some(v) = kill(&schedule) {
            return Some(Kill {
                by: "directed schedule",
                after: started.elapsed(),
                what: format!("{}: {v}", race.name),
                schedule: Some(schedule),
            });
        }
    }
    None
}
