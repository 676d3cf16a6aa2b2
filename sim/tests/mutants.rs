//! Protocol mutants: with any one guard of the shipped protocol undone
//! (or a pair whose guards cover each other), a kept schedule finds a
//! violation. The schedules live in `sim/findings/` (the findings, each of
//! which killed its fix's mutant first) and `sim/findings/mutants/` (the
//! kills the mutation run kept).
//!
//! The mutation run itself searches afresh and reports, per mutant, which
//! search killed it and how fast:
//!
//! ```text
//! cargo test -p swaplock-sim --release --test mutants -- --ignored --nocapture
//! ```
//!
//! `SWAPLOCK_MUTANTS_KEEP=1` writes each new kill's schedule to
//! `sim/findings/mutants/<mutant>.bin`; `SWAPLOCK_MUTANTS_RANDOM` sets the
//! random schedules per scenario (default 2,000); `SWAPLOCK_MUTANTS_FRESH=1`
//! ignores the kept schedules, to time the searches from nothing;
//! `SWAPLOCK_MUTANTS_ONLY=<mutant>` hunts one entry, and
//! `SWAPLOCK_MUTANTS_SCENARIO=<text>` draws random schedules of the
//! scenarios whose names contain the text only, from the schedule
//! `SWAPLOCK_MUTANTS_FIRST` (default 0) on, so that hunts in several
//! processes draw different ones. The random schedules are drawn in
//! turns uniformly, with long pauses and by PCT's changing priorities;
//! `SWAPLOCK_MUTANTS_DRAW=uniform`, `pausing` or `pct` draws them all so.

use swaplock_sim::mutants::{
    catalogue, hunt, kept_dirs, kill, replay, replay_kept, replay_shipped, select, Entry, Mutant,
    EQUIVALENT, OPEN,
};
use swaplock_sim::{scenarios, Policy};

#[test]
fn every_protocol_mutant_is_killed_by_a_kept_schedule() {
    let (mut survivors, mut killed_open) = (Vec::new(), Vec::new());
    let mut killed = 0;
    // SWAPLOCK_MUTANTS_ONLY=name runs one entry.
    let only = std::env::var("SWAPLOCK_MUTANTS_ONLY").ok();
    for entry in catalogue() {
        if only.as_ref().is_some_and(|o| *o != entry.name()) {
            continue;
        }
        let _on = select(&entry);
        let open = entry.mutants.len() == 1 && OPEN.contains(&entry.mutants[0]);
        match replay_kept(&kept_dirs()) {
            Some((path, what)) => {
                killed += 1;
                eprintln!(
                    "  {}: killed by {}: {what}",
                    entry.name(),
                    path.file_name().unwrap_or_default().to_string_lossy()
                );
                if open {
                    killed_open.push(entry.name());
                }
            }
            None if open => eprintln!("  {}: open (PROTOCOL 13.4)", entry.name()),
            None => survivors.push(entry.name()),
        }
    }
    eprintln!(
        "{killed} of {} catalogue entries killed by kept schedules, {} open",
        catalogue().len(),
        OPEN.len()
    );
    assert!(
        survivors.is_empty(),
        "protocol mutants no kept schedule kills: {survivors:?}; run the mutation run (see this file's header) with SWAPLOCK_MUTANTS_KEEP=1"
    );
    assert!(
        killed_open.is_empty(),
        "now killed, so no longer open: {killed_open:?}; take them off OPEN in sim/src/mutants.rs and PROTOCOL 13.4"
    );
}

/// The kept schedules pass with no mutant on: the kills are the mutants'.
#[test]
fn the_kept_schedules_pass_without_a_mutant() {
    assert!(replay_kept(&kept_dirs()).is_none());
}

/// A schedule the shipped protocol fails too is no kill. The race written
/// for `abandon-leaves-record`, steered under it, under
/// `live-recoverer-ignored` or under `exchange-back-unlinks-aside`,
/// reaches a wedge the shipped protocol has as well (PROTOCOL 12.3 G1):
/// the hunt must not report any of them killed by it. It finds nothing
/// for one argued equivalent (or open), and for the others only their own
/// kills.
#[test]
fn a_schedule_the_shipped_protocol_fails_is_no_kill() {
    let race = &swaplock_sim::directed::G1_WITNESS;
    static STEERED: [Mutant; 3] = [
        Mutant::AbandonLeavesRecord,
        Mutant::LiveRecovererIgnored,
        Mutant::ExchangeBackUnlinksAside,
    ];
    for m in &STEERED {
        let _on = select(&Entry {
            mutants: std::slice::from_ref(m),
        });
        let m = *m;
        let schedule = (race.steer)().unwrap().schedule();
        assert!(
            replay(&schedule).is_some(),
            "{}: the race no longer fails under it; this test needs another schedule the shipped protocol fails",
            m.name()
        );
        assert!(replay_shipped(&schedule).is_some(), "{}", m.name());
        assert!(kill(&schedule).is_none(), "{}", m.name());
        let unkilled = OPEN.contains(&m) || EQUIVALENT.contains(&m);
        let own_race = swaplock_sim::directed::ALL.iter().any(|r| r.mutant == m);
        match hunt(0, true, None) {
            Some(k) if unkilled || k.what.starts_with(race.name) => {
                panic!("{}: killed by {}: {}", m.name(), k.by, k.what);
            }
            None if !unkilled && own_race => {
                panic!("{}: its own race no longer kills it", m.name())
            }
            _ => {}
        }
        // The mutant is still on once the shipped protocol was replayed.
        assert!(swaplock_core::mutant::active(m));
    }
}

/// Every mutant is either in the catalogue alone or argued equivalent,
/// never both, and never both argued equivalent and open; the argument
/// for each equivalent one is in PROTOCOL 13.4.
#[test]
fn the_catalogue_covers_every_mutant() {
    let entries = catalogue();
    let protocol = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/PROTOCOL.md"),
    )
    .unwrap();
    let from = protocol.find("### 13.4").unwrap();
    let to = from + protocol[from..].find("### 13.5").unwrap();
    let section = &protocol[from..to];
    for m in Mutant::ALL.iter().filter(|m| !Mutant::RW.contains(m)) {
        let alone = entries.iter().any(|e| e.mutants == [*m]);
        let equivalent = EQUIVALENT.contains(m);
        assert!(
            alone != equivalent,
            "{} must be either mutated alone or argued equivalent",
            m.name()
        );
        assert!(
            !(equivalent && OPEN.contains(m)),
            "{} is both open and argued equivalent",
            m.name()
        );
        assert!(
            !equivalent || section.contains(&format!("`{}`", m.name())),
            "{} is argued equivalent, but PROTOCOL 13.4 does not name it",
            m.name()
        );
    }
}

#[test]
#[ignore = "the mutation run: minutes; see the header"]
fn mutation_run() {
    let per: u64 = std::env::var("SWAPLOCK_MUTANTS_RANDOM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let keep = std::env::var_os("SWAPLOCK_MUTANTS_KEEP").is_some();
    let fresh = std::env::var_os("SWAPLOCK_MUTANTS_FRESH").is_some();
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/schedule");
    // The first byte of a kept schedule indexes this many scenarios.
    eprintln!("scenarios: {}", scenarios(Policy::Ours).len());
    let mut survivors = Vec::new();
    // SWAPLOCK_MUTANTS_ONLY=name runs one entry.
    let only = std::env::var("SWAPLOCK_MUTANTS_ONLY").ok();
    for entry in catalogue() {
        if only.as_ref().is_some_and(|o| *o != entry.name()) {
            continue;
        }
        let _on = select(&entry);
        match hunt(per, fresh, Some(&corpus)) {
            Some(kill) => {
                eprintln!(
                    "{}: killed by {} after {:.2?}: {}",
                    entry.name(),
                    kill.by,
                    kill.after,
                    kill.what.lines().next().unwrap_or_default()
                );
                if let (true, Some(schedule)) = (keep, kill.schedule) {
                    let path = kept_dirs()[0].join(format!("{}.bin", entry.name()));
                    std::fs::write(&path, schedule).unwrap();
                }
            }
            None => {
                eprintln!("{}: SURVIVED", entry.name());
                survivors.push(entry.name());
            }
        }
    }
    assert!(survivors.is_empty(), "survivors: {survivors:?}");
}
