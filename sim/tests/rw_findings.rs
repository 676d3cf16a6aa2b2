//! Where filelock 4.2.11's `SoftReadWriteLock` leaves a gap, shown by the
//! simulator and kept as replayable schedules in `sim/findings/rw/`: each
//! breaks an invariant under the naive policy (the shipped driver with
//! every guard where swaplock is stricter undone, which is filelock's
//! exact steps) and passes under the shipped driver. PROTOCOL 16.12 says
//! how each is closed without a byte of difference on disk.
//!
//! - `c-rw1-*`: a client whose cached view of `gen/` predates the first
//!   commit (no generation listed, no HEAD) joins a log past its first
//!   window; its probe of 1 to 64 finds nothing, it takes the log for new,
//!   and its commit of generation 1 passes every check while a reader of
//!   the other host holds at 201.
//! - `c-rw1-torn-*`: the same under an epoch that holds no token, where
//!   filelock never binds HEAD: the blind client's confirmation finds a
//!   HEAD, reads it as unbound, and commits generation 1.
//! - `c-rw5-*`: the disk's host crashes after a grant and loses the
//!   grant's link (directories are never synced); the next commit is
//!   granted the same generation in the same log.
//! - `c-rw6-*`: a committer stopped between its temporary and its link
//!   past the threshold has its temporary swept by a peer; its link fails
//!   with `ENOENT`, which escapes as an error.
//! - `c-rw7-*`: an operator removes `gen/` under a long-lived lock; its
//!   commits are refused for good, as it never prepares again.
//! - `c-rw8-*`: a crashed writer's record asks a lease of `1e+20`; nobody
//!   is ever granted again.
//! - `regrown-log-*` (not among PROTOCOL-RW's candidates): a writer that
//!   read the log at generation 2 and checked its epoch is stopped before
//!   its link; an operator removes `gen/` and two readers grow a new log to
//!   generation 2; the writer's link of 3 lands on a predecessor that
//!   exists (filelock checks no more) but is another record, and its
//!   snapshot, built on the old log's, drops the new log's live readers.
//!
//! The hunt that found them (random schedules of each gap's scenario under
//! the naive policy, kept once the shipped driver passes the same bytes):
//!
//! ```text
//! SWAPLOCK_RW_KEEP=1 cargo test -p swaplock-sim --release --test rw_findings -- --ignored --nocapture
//! ```
//!
//! `SWAPLOCK_RW_GAP=<prefix>` hunts that gap alone.

use swaplock_sim::rw::mutants::{files, findings_dir, replay_under, NAIVE};
use swaplock_sim::rw::{index_of, run, scenarios, Random, Recording};

/// Each gap the simulator confirms: its file prefix, its scenario, and
/// what the naive policy breaks there.
const GAPS: &[(&str, &str, &str)] = &[
    ("c-rw1", "a-blind-client-joins-a-live-log", "generation 1"),
    (
        "c-rw1-torn",
        "a-blind-client-joins-a-live-log-whose-epoch-is-torn",
        "generation 1",
    ),
    ("c-rw5", "a-host-crash", "fencing"),
    ("c-rw6", "a-stopped-committer", "ENOENT"),
    ("c-rw7", "gen-removed-under-a-long-lived-lock", "wedge"),
    ("c-rw8", "a-dead-writer-asking-for-ever", "wedge"),
    (
        "regrown-log",
        "a-participant-stopped-while-gen-is-removed",
        "drops",
    ),
];

#[test]
fn each_kept_finding_breaks_the_naive_policy_and_not_the_shipped_driver() {
    let kept = files(&findings_dir());
    assert!(!kept.is_empty());
    for path in &kept {
        let data = std::fs::read(path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy();
        let naive = replay_under(&data, NAIVE);
        let Some(naive) = naive else {
            panic!("{name}: the naive policy passes it");
        };
        if let Some((_, _, what)) = GAPS.iter().find(|(p, ..)| name.starts_with(p)) {
            assert!(naive.contains(what), "{name}: {naive}");
        }
        assert_eq!(
            replay_under(&data, &[]),
            None,
            "{name}: the shipped driver fails it"
        );
        eprintln!("{name}: naive: {naive}");
    }
}

#[test]
fn every_gap_the_simulator_confirms_has_a_kept_finding() {
    let kept: Vec<String> = files(&findings_dir())
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for (prefix, scenario, _) in GAPS {
        assert!(
            kept.iter().any(|k| k.starts_with(prefix)),
            "{prefix} ({scenario}) has no kept schedule; run the hunt (see this file's header)"
        );
    }
}

#[test]
#[ignore = "the hunt: seconds to minutes; see the header"]
fn hunt() {
    let keep = std::env::var_os("SWAPLOCK_RW_KEEP").is_some();
    let only = std::env::var("SWAPLOCK_RW_GAP").ok();
    let all = scenarios();
    for (prefix, name, what) in GAPS {
        if only.as_deref().is_some_and(|o| o != *prefix) {
            continue;
        }
        let i = index_of(name).unwrap();
        let found = (0..200_000u64).find_map(|seed| {
            let _on = swaplock_sim::rw::mutants::select(NAIVE);
            let mut chooser = Recording::new(Random::new(seed, 400));
            let sim = run(&all[i], seed, &mut chooser, false, 30_000);
            if !sim.failed() {
                return None;
            }
            let mut kept = vec![i as u8];
            kept.extend_from_slice(&chooser.bytes?);
            drop(_on);
            let naive = replay_under(&kept, NAIVE)?;
            (naive.contains(what) && replay_under(&kept, &[]).is_none())
                .then_some((seed, kept, naive))
        });
        let Some((seed, kept, naive)) = found else {
            eprintln!("{prefix}: not found");
            continue;
        };
        eprintln!("{prefix}: seed {seed}, {} bytes: {naive}", kept.len());
        if keep {
            let path = findings_dir().join(format!("{prefix}-{name}.bin"));
            std::fs::create_dir_all(findings_dir()).unwrap();
            std::fs::write(path, kept).unwrap();
        }
    }
}
