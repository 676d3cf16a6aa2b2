//! Schedules the fuzzer found violating the protocol, kept as regression
//! tests: each one failed before its fix and must now run clean.
//!
//! - `nested-breakers-capture-a-new-holders-marker.bin`: two breakers stuck
//!   in exchange-back kept "feeding" exchanges of the lock path; one swapped
//!   in a marker a new holder had just created, rotations brought a killed
//!   holder's record to the path, and a third process took it over beside
//!   the new holder. Fixed by never exchanging the lock path unless it holds
//!   our own file.
//! - `ring-rotation-unlinks-a-live-marker.bin`: the same rotations put a live
//!   holder's marker at the lock path between a peer's lstat and unlink.
//! - `a-paused-writer-keeps-an-evicted-marker.bin`: a process paused in the
//!   middle of writing its record for longer than the malformed grace period
//!   had its half-written marker evicted, finished writing, and entered.
//!   Fixed by holding only if the marker is still linked once complete.
//! - `a-release-retries-unlink-after-close.bin`: a release whose removal
//!   failed retried by name after closing its marker, as filelock does for
//!   shares that refuse to delete open files, and unlinked the marker a peer
//!   had just published. Fixed by never removing by name after the close.
//! - `a-recovery-deletes-a-live-breakers-placeholder.bin`: a releasing
//!   process's placeholder exchange took a new holder's marker aside, a
//!   breaker then took that placeholder aside and was killed, and a third
//!   process's recovery of the killed breaker's names deleted the
//!   placeholder as malformed. The releaser could no longer undo its
//!   exchange, the holder's marker stayed aside, and the third process
//!   took the lock beside the holder. Fixed by counting another
//!   breaker's placeholder as live in recovery, so it goes back.

use swaplock_sim::{run, scenarios, FromBytes, Policy};

#[test]
fn found_schedules_run_clean() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("findings");
    let all = scenarios(Policy::Ours);
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let Some((&which, schedule)) = data.split_first() else {
            continue;
        };
        let (what, scenario, _) = &all[usize::from(which) % all.len()];
        let sim = run(scenario, 1, &mut FromBytes::new(schedule), true, 20_000);
        if let Some(v) = sim.violation() {
            panic!("{}: {what}: {v}", path.display());
        }
        replayed += 1;
    }
    assert!(
        replayed >= 2,
        "the findings are missing from {}",
        dir.display()
    );
}

/// A random schedule the release check found: a release whose marker a
/// peer's exchange held aside for the length of its check found it back at
/// the lock path after its removal had found it away, and reported a
/// failure (`EIO`) instead of looking again. The stress test showed the
/// same on ext4 under load.
#[test]
fn a_release_looks_again_when_its_marker_comes_back() {
    let (what, scenario, crash_one_in) = &scenarios(Policy::Ours)[0];
    if let Err(v) = swaplock_sim::run_seed(scenario, 64, *crash_one_in, 2) {
        panic!("{what}: {v}");
    }
}
