//! Schedules found violating the protocol (by the fuzzer, by random
//! schedules, or by the progress check), kept as regression tests: each
//! one failed before its fix and must now run clean. A file's first byte
//! is its scenario's index in the catalogue (kept below the catalogue's
//! length, so that scenarios added at its end leave it alone), then one
//! decision per byte.
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
//! - `a-holder-killed-mid-release-leaves-an-empty-placeholder.bin` (the
//!   progress check): a holder killed in its release between creating its
//!   placeholder and writing it left its record at the lock path and an
//!   empty file under its break name; the next contender's recovery took
//!   the empty file for a live recordless holder's marker and put it at
//!   the lock path, where nobody evicts it. Fixed by marking the marker
//!   released before the placeholder is made.
//! - `a-release-whose-fstat-fails-reports-ok.bin` (failing syscalls): a
//!   release whose `fstat` of its own marker failed removed nothing and
//!   returned `Ok`, leaving a marker that names its live process. Fixed
//!   by reporting the error.
//! - `a-release-whose-mark-fails-leaves-an-empty-placeholder.bin` (failing
//!   syscalls): the same wedge as the killed releaser's, once the mark
//!   itself failed. Fixed by removing the marker by name when it could not
//!   be marked, as when no placeholder can be made.
//! - `an-unwritten-marker-removed-through-a-placeholder-*.bin` (failing
//!   syscalls, kills): a contender whose write failed removed its own
//!   empty marker through a placeholder exchange and was killed, or failed,
//!   before unlinking it from its break name; a recovery restored the
//!   empty file to the lock path. Fixed by marking the file released
//!   before it is removed.
//! - `an-abandoned-takeover-leaves-its-empty-file-under-its-break-name.bin`
//!   (failing syscalls): a takeover whose write and then `fstat` failed
//!   left its empty file under its break name; once its later record at the
//!   lock path was a dead one, recovery restored the empty file there.
//!   Fixed by marking released a file an abandoned takeover never
//!   exchanged, whenever it cannot tell that the file is gone.
//! - `a-killed-takeover-of-its-own-lease-leaves-an-empty-break-file.bin`
//!   (failing syscalls): a process took over a file at the lock path that
//!   named it (its own record, left by a release that failed) and was
//!   killed between creating its file under its break name and writing it;
//!   once it was gone, recovery took the empty file for a live recordless
//!   marker and put it at the lock path, where nobody evicts it. Fixed by
//!   giving a break name only a complete file: linked from an unnamed file,
//!   or written under a write name and renamed.
//! - `a-release-placeholder-whose-write-fails-stays-empty-under-its-break-name.bin`
//!   (the fuzzer, failing syscalls): a process removing its own marker
//!   created its placeholder under its break name; the write failed, and
//!   so did the unlink, leaving an empty file there. It later held the
//!   lock again and was killed; a recovery of its names took the empty
//!   file for a live recordless marker and put it at the lock path, where
//!   nobody evicts it. Fixed by giving a placeholder its break name only
//!   complete, as a takeover's record.
//! - `an-abandoned-takeover-leaves-its-record-at-the-lock-path.bin` (the
//!   fuzzer, failing syscalls): a takeover whose check of the file it took
//!   failed (`EINTR`) abandoned it, and its exchange-back failed too
//!   (`fstat`, `EIO`): its complete record stayed at the lock path, naming
//!   a live process that did not hold the lock, and its release of a later
//!   hold returned `Ok` beside it. Fixed by overwriting an abandoned file
//!   left at the lock path with our placeholder, which ages out and leads
//!   a recovery to what we took.
//! - `an-abandoned-record-at-the-lock-path-and-a-blind-recovery-let-two-hold.bin`
//!   (the fuzzer, failing syscalls): the same abandoned record, with a live
//!   holder's marker under the abandoning process's break name; once that
//!   process was killed, a contender's recovery could not `lstat` the
//!   break name (`EACCES`), skipped it, and took the lock beside the
//!   holder. Fixed both by the placeholder above and by counting the lock
//!   as held when recovery cannot look at a candidate.
//! - `a-release-paused-past-its-lease-unlinks-a-new-holders-marker.bin`
//!   (the fuzzer, failing syscalls): a lease holder's release whose mark
//!   failed (`EIO`) fell back to unlinking its marker by name; it had
//!   stopped past its lease, a peer took its marker over and released,
//!   and a third process published its marker between the release's
//!   `lstat` and its `unlink`, which removed it. Fixed by touching our
//!   marker before that look, which restarts its age for every peer.
//! - `a-release-touch-within-a-coarse-mtime-unlinks-a-new-holders-marker.bin`
//!   (random schedules, 2 s mtimes and 10 ms change times): the same
//!   release by name, whose touch fell within its marker's 2 s mtime and
//!   changed only the change time; a peer that had judged the lease
//!   expired before it compared inode and mtime, took the marker over
//!   between the release's look and its unlink, and lost its marker to
//!   that unlink. Fixed by touching again until the mtime moves.
//! - `a-contender-paused-past-the-lifetime-before-it-enters.bin` (the
//!   fuzzer; an oracle fix): a contender paused past the lifetime between
//!   its takeover and its entry; a peer broke its marker by age, as the
//!   lifetime allows, and the oracle, which excused a holder so broken but
//!   not a contender about to enter, called the entry a violation. A
//!   lifetime break voids the guarantee of whoever owns the marker, and
//!   the oracle now says so for both.
//! - `a-breaker-killed-after-taking-aside-an-unwritten-marker.bin` (the
//!   fuzzer in CI; an oracle fix): a breaker paused between its last look
//!   at the lock path and its exchange; meanwhile the stale marker was
//!   taken over and released, and a contender created its marker the
//!   filelock way (create, then write). The exchange took that empty
//!   marker aside, and both were killed. The fresh contender's recovery
//!   put the empty file back at the lock path, as it must (it may be a
//!   live writer's, 7.11 step 6), and the oracle called that a wedge of
//!   the recovery's making. A writer killed between create and write
//!   leaves that wedge wherever its file sits (7.2 step 4, I10); the
//!   oracle now exempts an empty file first created at the lock path.
//! - `a-contender-killed-after-its-write-failed-leaves-its-marker-unwritten.bin`
//!   (the fuzzer in CI; an oracle fix): the same race, but the
//!   contender's write of its record failed (an injected `EACCES`) just
//!   before it was killed. The oracle followed an unwritten marker only
//!   until its creator's next call but a look, so the failed write ended
//!   it, and the restored empty file was called the recovery's wedge. A
//!   call that failed changed nothing, and leaves the marker as empty as
//!   it was: the oracle now follows it on past one.
//! - `a-contender-paused-after-its-look-takes-a-live-lease-under-coarse-mtimes.bin`
//!   (random schedules of the scenario with 2 s mtimes and 10 ms change
//!   times): a lease contender read
//!   a live holder's marker, was paused for most of a lease before it
//!   judged it, and counted the pause as time the marker stood unchanged.
//!   The holder's heartbeats meanwhile changed only the change time (2 s
//!   mtimes), which neither the look again before the exchange nor the
//!   check of the file taken compares, so the contender took the lease
//!   over beside its holder. Fixed by measuring the unchanged time to the
//!   look that read the marker.
//! - `a-breaker-stopped-past-the-lifetime-removes-its-file-under-a-recovery.bin`
//!   (a directed race, `swaplock_sim::directed`): a lifetime breaker's
//!   exchange took a new holder's marker aside and the breaker stopped;
//!   once its own marker at the lock path was older than the lifetime, a
//!   third contender's recovery of its names claimed the holder's marker.
//!   The breaker woke, counted its exchange-back settled because its break
//!   name was gone, and removed its own file from the lock path, so the
//!   recovery handed the marker back under the break name and the path was
//!   empty: the breaker created the lock file and entered beside the
//!   holder. Fixed by leaving our file untouched at the lock path when
//!   what we took was claimed from our break name (PROTOCOL 12.1 S8).
//! - `a-recordless-marker-left-aside-when-the-lock-path-goes-missing.bin`
//!   (a directed race, `swaplock_sim::directed`; the progress check): a
//!   breaker's exchange took a recordless holder's marker aside, and a
//!   nested breaker took the breaker's file aside and was killed. Within
//!   the breaker's exchange-back wait the recordless holder's hold ended
//!   and it unlinked the lock path by name, so the exchange-back found the
//!   path missing and left the empty file, no one's now, under its break
//!   name. The breaker later held the lock and was killed holding; the
//!   fresh contender's recovery of its names put the empty file at the
//!   lock path, where nobody evicts it. Fixed by removing the file we took
//!   from our break name when an exchange-back ends on the lock path
//!   missing (PROTOCOL 12.1 S9).
//! - `a-recovery-deletes-a-dead-breakers-record-stranding-a-live-marker.bin`
//!   (the schedule fuzzer in CI, failing syscalls, kills): three breakers
//!   of one dead marker; the first took it over and entered, the second's
//!   late exchange took that new marker aside, the third's took the
//!   second's record aside. The second was killed, the third's
//!   exchange-back failed (`EIO`) and its placeholder at the lock path
//!   aged out; the recovery of the third's names found the second's
//!   record under its break name, judged the second dead and removed the
//!   record, so nothing led any recovery to the second's break name and
//!   the live marker there: the third entered beside the first. Fixed by
//!   putting back at the lock path any record but the dead writer's own,
//!   alive or not (PROTOCOL 12.1 S15).
//! - `a-paused-swap-back-takes-a-new-holders-marker-aside.bin` (a review
//!   of S15: the steps of a fuzzer's kill of `no-recheck-before-exchange`
//!   reordered into a schedule of the shipped protocol; no fault, no
//!   kill): an exchange-back's exchange fed a nested breaker's file aside
//!   and its process paused; meanwhile the holder it had put back
//!   released and a new holder created its marker. The swap-back, blind,
//!   took that marker aside, and a contender entered beside its holder.
//!   Fixed by withdrawing that swap back (PROTOCOL 12.1 S16).
//! - `a-swap-back-looks-at-a-reused-inode-and-takes-a-new-marker-aside.bin`
//!   and `a-swap-back-after-a-pinned-look-takes-a-new-marker-aside.bin`
//!   (reviews of that fix): a look before the swap back, by inode number
//!   and mtime, passed a new marker that got the released file's number
//!   within a coarse mtime; a look under a pin passed, and a 31 ms pause
//!   between it and the swap gave the same ending. No look closes the
//!   window, so the swap back is withdrawn: a fed file stays aside
//!   (PROTOCOL 12.1 S16).
//! - `a-paused-restore-swap-back-takes-a-new-holders-marker-aside.bin`
//!   (a review of S16; one kill, no fault): a recovery's restore
//!   exchange fed aside a late breaker's file that had replaced the
//!   judged record, and its swap back came 93 ms later, after the
//!   restored holder had released and the late breaker had entered: it
//!   took that breaker's marker aside and handed it back under the dead
//!   breaker's name, and the recoverer later entered beside it. Fixed by
//!   handing the fed file back with the claim (PROTOCOL 12.1 S17).

use swaplock_sim::mutants::replay_traced;
use swaplock_sim::{scenarios, Policy};

/// Replays every schedule kept in `dir`: the scenario's index in the
/// catalogue, then one decision per byte. Returns how many ran, and the
/// first violation.
fn replay_all(dir: &std::path::Path) -> (usize, Option<String>) {
    let mut replayed = 0;
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    entries.sort();
    for path in entries {
        let data = std::fs::read(&path).unwrap();
        if let Some((what, v)) = replay_traced(&data) {
            return (replayed, Some(format!("{}: {what}: {v}", path.display())));
        }
        replayed += 1;
    }
    (replayed, None)
}

#[test]
fn found_schedules_run_clean() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("findings");
    let (replayed, violation) = replay_all(&dir);
    if let Some(v) = violation {
        panic!("{v}");
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

/// Gaps left open (PROTOCOL 12.3): each schedule in `findings/open/` still
/// wedges the shipped protocol the way that section says, a recordless
/// holder's marker put back at the lock path by a recovery once its holder
/// has gone. A schedule that runs clean, or fails otherwise, means the
/// section is out of date: a closed gap's schedule moves to `findings/`
/// and its entry to 12.1.
#[test]
fn open_gaps_still_wedge_as_documented() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("findings/open");
    let mut kept: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    kept.sort();
    assert!(!kept.is_empty(), "no schedules in {}", dir.display());
    for path in kept {
        let data = std::fs::read(&path).unwrap();
        let Some((_, v)) = replay_traced(&data) else {
            panic!("{} runs clean: the gap is closed", path.display());
        };
        assert!(
            v.what.starts_with("wedge")
                && v.what.contains("an empty marker (I10, recordless), which a fresh contender's recovery put there"),
            "{}: {}",
            path.display(),
            v.what
        );
    }
}
