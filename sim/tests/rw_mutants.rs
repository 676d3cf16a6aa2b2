//! The read-write lock's mutants: with any one guard of the shipped driver
//! undone ([`Mutant::RW`]), a kept schedule finds a violation the shipped
//! driver does not. The schedules live in `sim/findings/rw/` (the gaps of
//! filelock, each of which its guard closes) and `sim/findings/rw/mutants/`
//! (the kills the mutation run kept).
//!
//! The mutation run searches afresh (random schedules of every scenario,
//! the fuzz corpus, the directed races) and reports, per mutant, which
//! search killed it:
//!
//! ```text
//! cargo test -p swaplock-sim --release --test rw_mutants -- --ignored --nocapture
//! ```
//!
//! `SWAPLOCK_RW_MUTANTS_KEEP=1` writes each new kill's schedule to
//! `sim/findings/rw/mutants/<mutant>.bin`; `SWAPLOCK_RW_MUTANTS_RANDOM`
//! sets the random schedules per scenario (default 500).

use swaplock_sim::rw::mutants::{
    catalogue, findings_dir, hunt, kill, mutants_dir, name, replay_kept, select, Mutant,
    EQUIVALENT, GROUPS, OPEN,
};

#[test]
fn every_read_write_mutant_is_killed_by_a_kept_schedule() {
    let dirs = [findings_dir(), mutants_dir()];
    let (mut survivors, mut killed_open, mut killed) = (Vec::new(), Vec::new(), 0);
    for entry in catalogue() {
        let _on = select(entry);
        let open = OPEN.contains(&entry);
        match replay_kept(&dirs) {
            Some((path, what)) => {
                let file = path
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                let data = std::fs::read(&path).unwrap();
                assert!(
                    kill(&data).is_some(),
                    "{}: the shipped driver fails {file} too",
                    name(entry)
                );
                eprintln!(
                    "  {}: killed by {file}: {}",
                    name(entry),
                    what.lines().next().unwrap_or("")
                );
                killed += 1;
                if open {
                    killed_open.push(name(entry));
                }
            }
            None if open => eprintln!("  {}: open (PROTOCOL 16.12)", name(entry)),
            None => survivors.push(name(entry)),
        }
    }
    eprintln!(
        "{killed} of {} read-write catalogue entries killed by kept schedules, {} open, {} single mutants argued equivalent",
        catalogue().len(),
        OPEN.len(),
        EQUIVALENT.len()
    );
    assert!(
        survivors.is_empty(),
        "read-write mutants no kept schedule kills: {survivors:?}; run the mutation run (see this file's header) with SWAPLOCK_RW_MUTANTS_KEEP=1"
    );
    assert!(
        killed_open.is_empty(),
        "now killed, so no longer open: {killed_open:?}; take them off OPEN in sim/src/rw/mutants.rs and PROTOCOL 16.12"
    );
}

#[test]
fn the_kept_schedules_pass_without_a_mutant() {
    assert_eq!(replay_kept(&[findings_dir(), mutants_dir()]), None);
}

/// Every read-write mutant is mutated or argued equivalent, never both,
/// and PROTOCOL 16.12 names each equivalent one.
#[test]
fn the_catalogue_covers_every_read_write_mutant() {
    let protocol = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/PROTOCOL.md"),
    )
    .unwrap();
    let from = protocol.find("### 16.12").expect("PROTOCOL 16.12");
    let section = &protocol[from..];
    for m in Mutant::RW {
        let mutated = catalogue().contains(&std::slice::from_ref(m));
        let equivalent = EQUIVALENT.contains(m);
        assert!(mutated != equivalent, "{}", m.name());
        assert!(
            !equivalent || section.contains(&format!("`{}`", m.name())),
            "{} is argued equivalent, but PROTOCOL 16.12 does not name it",
            m.name()
        );
    }
    for m in swaplock_sim::rw::mutants::NAIVE
        .iter()
        .chain(GROUPS.iter().copied().flatten())
    {
        assert!(Mutant::RW.contains(m));
    }
}

#[test]
#[ignore = "the mutation run: minutes; see the header"]
fn mutation_run() {
    let per: u64 = std::env::var("SWAPLOCK_RW_MUTANTS_RANDOM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let keep = std::env::var_os("SWAPLOCK_RW_MUTANTS_KEEP").is_some();
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/rw_schedule");
    let only = std::env::var("SWAPLOCK_MUTANTS_ONLY").ok();
    let mut survivors = Vec::new();
    for m in catalogue() {
        if only.as_ref().is_some_and(|o| *o != name(m)) || OPEN.contains(&m) {
            continue;
        }
        let _on = select(m);
        let started = std::time::Instant::now();
        match hunt(per, Some(&corpus)) {
            Some(k) => {
                eprintln!(
                    "{}: killed by {} after {:.2?}: {}",
                    name(m),
                    k.by,
                    started.elapsed(),
                    k.what.lines().next().unwrap_or_default()
                );
                if keep {
                    std::fs::create_dir_all(mutants_dir()).unwrap();
                    std::fs::write(mutants_dir().join(format!("{}.bin", name(m))), k.schedule)
                        .unwrap();
                }
            }
            None => {
                eprintln!("{}: SURVIVED", name(m));
                survivors.push(name(m));
            }
        }
    }
    assert!(survivors.is_empty(), "survivors: {survivors:?}");
}
