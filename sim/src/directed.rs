//! Directed schedules: races too narrow for the random searches and the
//! fuzzer, steered step by step with a [`Script`] ("run p1 until its
//! exchange, then p2 until it enters, then kill p3"), each under the
//! protocol mutant it kills (PROTOCOL 13.4). `tests/directed.rs` checks
//! that each still kills its mutant and that the shipped protocol passes
//! its schedule; the kept schedules in `sim/findings/mutants/` are what
//! `cargo test` replays under every catalogue entry, and the mutation run
//! ([`crate::mutants::hunt`]) tries these races as one of its searches.

use crate::script::{scenario, Lost, Script};
use swaplock_core::mutant::Mutant;

/// A directed race and the mutant it was written to kill.
pub struct Directed {
    /// What the race is.
    pub name: &'static str,
    /// The mutant it kills.
    pub mutant: Mutant,
    /// Steers the race under whatever mutants are on: the script, with
    /// the violation it found, if any.
    pub steer: fn() -> Result<Script, Lost>,
}

/// Every directed race.
pub const ALL: &[Directed] = &[
    Directed {
        name: "an unpinned judgement's takeover of a reused inode number",
        mutant: Mutant::UnpinnedTakeover,
        steer: unpinned_judgement,
    },
    Directed {
        name: "a judged file freed and its inode number reused",
        mutant: Mutant::NoPinCheck,
        steer: judged_file_reused,
    },
    Directed {
        name: "a takeover stopped past a lease before its last look",
        mutant: Mutant::NoLinkCountAfterTakeover,
        steer: takeover_stopped_past_lease,
    },
    Directed {
        name: "a marker write failing after its eviction",
        mutant: Mutant::UnlinkAfterClose,
        steer: write_failing_after_eviction,
    },
    Directed {
        name: "an abandoned placeholder under a killed breaker's name",
        mutant: Mutant::RecoveryDeletesPlaceholders,
        steer: abandoned_placeholder_stranded,
    },
    Directed {
        name: "a holder by name's file where a judged marker was",
        mutant: Mutant::NoMoverCheck,
        steer: held_by_name_where_judged,
    },
    Directed {
        name: "a recordless holder's marker stranded by a killed breaker",
        mutant: Mutant::RecoveryDeletesRecordless,
        steer: recordless_marker_stranded,
    },
    Directed {
        name: "a lease taken over between a release's look and its touch",
        mutant: Mutant::NoLookAfterTouch,
        steer: crate::directed_planned::takeover_before_the_touch,
    },
    Directed {
        name: "a lease taken over after a release's touch failed",
        mutant: Mutant::UnlinkDespiteTouchFailure,
        steer: crate::directed_planned::takeover_after_a_failed_touch,
    },
    Directed {
        name: "a recovery whose listing fails while a live marker is stranded",
        mutant: Mutant::RecoveryListErrorClear,
        steer: crate::directed_planned::listing_fails_while_stranded,
    },
    Directed {
        name: "a release's placeholder taken aside by a breaker taken over in turn",
        mutant: Mutant::PlaceholderUnlinkBlind,
        steer: placeholder_taken_aside,
    },
    Directed {
        name: "a lock path replaced between a restore's look and its exchange",
        mutant: Mutant::RestoreNoSwapBack,
        steer: lock_path_replaced_before_the_restore,
    },
    Directed {
        name: "a stranded marker claimed between a peer's listing and its look",
        mutant: Mutant::VanishedCandidateSkipped,
        steer: claimed_between_listing_and_look,
    },
    Directed {
        name: "a released placeholder fed back over a new holder's marker",
        mutant: Mutant::FeedingExchangeBack,
        steer: crate::directed_nested::placeholder_fed_back,
    },
    Directed {
        name: "a live recoverer's claim taken by a recovery of another breaker's names",
        mutant: Mutant::LiveRecovererIgnored,
        steer: crate::directed_nested::claim_stolen_across_breakers,
    },
    Directed {
        name: "a lifetime breaker stopped after its exchange, its break name claimed",
        mutant: Mutant::ClaimedAsideSettles,
        steer: crate::directed_nested::claimed_from_a_stopped_breaker,
    },
    Directed {
        name: "a recordless marker left aside when the lock path goes missing",
        mutant: Mutant::AsideKeptWhenPathMissing,
        steer: crate::directed_nested::aside_left_when_the_path_goes_missing,
    },
    Directed {
        name: "a placeholder restored over a new holder's marker, its swap-back failing",
        mutant: Mutant::RestoreOverAnything,
        steer: crate::directed_planned::restored_over_a_new_holders_marker,
    },
    Directed {
        name: "a lease taken over after a release's touch left its mtime as it was",
        mutant: Mutant::UnlinkDespiteUnchangedMtime,
        steer: crate::directed_planned::takeover_after_an_unseen_touch,
    },
];

/// The race written for `abandon-leaves-record` ([`abandoned_record_restored`]),
/// kept out of [`ALL`]: a witness of the wedge of PROTOCOL 12.3 G1, which
/// the shipped protocol reaches on its schedule too, so that it kills
/// nothing, and the hunt must count none of its schedules
/// (`tests/mutants.rs`). Since the abandon's placeholder is one write,
/// the schedule steered under that mutant reaches it on the shipped
/// protocol as well; the mutant's kill is the kept schedule of
/// `settled-leaves-record` (PROTOCOL 12.1 S14), where a live, idle process
/// that left its record wedges the lock.
pub const G1_WITNESS: Directed = Directed {
    name: "an abandoned takeover's record restored over its process's marker",
    mutant: Mutant::AbandonLeavesRecord,
    steer: abandoned_record_restored,
};

/// Coarse file times, so that a freed inode number handed out again within
/// the same second is the same (inode, mtime) identity. A contender pins
/// the dead marker at the lock path; a peer takes that over and is killed
/// holding; the contender reads the killed peer's marker, which is not the
/// pinned file, and judges it. Meanwhile a third takes that marker over,
/// holds and releases, freeing its inode number, which a fourth's new
/// marker gets. The first's takeover then finds its judged identity at the
/// lock path and takes a live holder's marker. Only the pin check (the
/// file read must be the file pinned) refuses the judgement.
fn judged_file_reused() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "soft: a dead holder's marker, coarse times, four contenders",
    )?);
    // The kill byte kills the fourth of four runnable processes.
    let (a, c, d, b) = (0, 1, 2, 3);
    s.until(a, "pin a.lock -> Ok", 10)?;
    s.until(b, "ENTERS", 300)?;
    s.kill(b)?;
    s.until(a, "probe 104", 10)?;
    s.until(c, "ENTERS", 300)?;
    s.until(c, "): released", 100)?;
    s.until(d, "ENTERS", 100)?;
    s.until_violation(a, 300)?;
    Ok(s)
}

/// A lease contender that took an expired lease over stops between its
/// exchange and its last look for longer than a lease; a peer expires the
/// marker it just published, takes it over and enters. Only the link count
/// of our marker after the takeover tells that it is gone.
fn takeover_stopped_past_lease() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "lease: a holder stopped past its lease, two contenders",
    )?);
    // p0 holds, then stops; one of p1 and p2 takes its marker over and
    // stops right after its exchange; the other takes that over.
    s.until(0, "ENTERS", 200)?;
    let p = s.turns_until(&[1, 2], "exchange a.lock.break.10", 5_000)?;
    let q = 3 - p;
    s.until(q, "ENTERS", 5_000)?;
    s.until_violation(p, 50)?;
    Ok(s)
}

/// A contender creates its marker by name, writes part of it and stops; a
/// peer evicts the half-written marker after the grace period, as it may,
/// and enters; the stopped contender's next write then fails. Its cleanup
/// must remove its own file while it is open, never the lock path by name
/// after closing, which now links the peer's marker. The failing write is
/// one the scenario's random source fails, so the race is steered in a few
/// orders until one draws it; the race is the same with or without the
/// mutant up to that write.
fn write_failing_after_eviction() -> Result<Script, Lost> {
    let which =
        scenario("soft: markers written by name, torn and failing writes, patient contenders")?;
    let mut why = Lost("no schedule tried".into());
    // The order the contenders take turns in, which create by name the
    // stopped writer makes, and after how many of its torn writes it
    // stops: each puts its failing write at another draw.
    let orders = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    for order in orders {
        for (nth, torn) in (1..3).flat_map(|n| (1..4).map(move |k| (n, k))) {
            let mut s = Script::new(which);
            let steered = (|| {
                let mut p = 0;
                for _ in 0..nth {
                    p = s.turns_until(&order, "create a.lock -> Ok", 20_000)?;
                }
                for _ in 0..torn {
                    s.until(p, "write fd", 3)?;
                }
                let others: Vec<usize> = order.into_iter().filter(|&i| i != p).collect();
                s.turns_until(&others, "ENTERS", 20_000)?;
                // The rest of the record, until a write fails.
                loop {
                    s.step(p)?;
                    let last = s.last_of(p);
                    if !last.contains(": write fd") {
                        return Ok(None);
                    }
                    if last.contains("-> Err") {
                        break;
                    }
                }
                s.until_violation(p, 12).map(Some)
            })();
            match steered {
                Ok(Some(_)) => return Ok(s),
                Ok(None) => why = Lost("no write failed after the peer entered".into()),
                Err(lost) => why = lost,
            }
        }
    }
    Err(why)
}

/// Three breakers judge one dead marker. H takes it over and holds; B's
/// exchange takes H's live marker aside under B's break name; N's exchange
/// takes B's file aside under N's, and N is killed. B's exchange-back gives
/// up after 2 s and marks its file, now under N's name, with its
/// placeholder, which names B. The next recovery of N's names (B's own
/// next attempt) must put that placeholder back at the lock path, whose
/// eviction later leads a recovery of B's names to H's marker. Deleted as
/// malformed, as filelock deletes it, nothing leads there: the recoverer
/// takes the lock beside H.
fn abandoned_placeholder_stranded() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "soft: a dead holder's marker, four patient contenders",
    )?);
    // The kill byte kills the fourth of four runnable processes.
    let (h, b, n) = (0, 1, 3);
    // Each publishes its break file and reaches the check before its
    // exchange (PROTOCOL 7.8 step 5).
    for p in [h, b, n] {
        s.until(p, "rename", 400)?;
        s.until(p, "lstat a.lock", 10)?;
    }
    s.until(h, "exchange", 5)?;
    s.until(h, "ENTERS", 20)?;
    s.until(b, "exchange", 5)?;
    s.until(n, "exchange", 5)?;
    s.kill(n)?;
    s.until_violation(b, 20_000)?;
    Ok(s)
}

/// Windows rules: a contender judges the dead marker stale and sees it
/// still linked; a peer breaks it first, holds and releases; a holder by name then creates its empty
/// file at the lock path and closes it. No handle keeps that file from
/// being opened to move, so the contender's open to move succeeds: only
/// its check that the opened file is the judged, pinned one keeps it from
/// moving the holder's file aside and entering beside it.
fn held_by_name_where_judged() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "soft (Windows rules): a dead holder's marker, a holder by name",
    )?);
    let (by_name, a, b) = (0, 1, 2);
    s.until(a, "probe 999", 20)?;
    // Its look that the pinned file is still linked, the last before its
    // open to move.
    s.until(a, "fstat fd", 1)?;
    s.until(b, "ENTERS", 300)?;
    s.until(b, "): released", 100)?;
    s.until(by_name, "ENTERS", 300)?;
    s.until_violation(a, 300)?;
    Ok(s)
}

/// A breaker B judges the dead marker and reaches the look before its
/// exchange; a peer takes the dead marker over, holds and releases; a
/// recordless holder (an older filelock, a tool that creates an empty lock
/// file) creates its empty marker at the empty path and holds it. B's
/// exchange takes that marker aside under B's break name, and B is killed
/// before it can put it back. The next contender judges B's dead record at
/// the lock path and recovers B's names: the empty file there names
/// nobody and may be a live holder's, so it goes back to the lock path.
/// Deleted, its holder holds a lock whose marker is gone.
fn recordless_marker_stranded() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "soft: a recordless holder beside breakers of a dead marker",
    )?);
    // With three runnable processes, the kill byte kills the first.
    let (b, taker, next, recordless) = (0, 1, 2, 3);
    s.until(b, "rename a.lock.write", 400)?;
    s.until(b, "lstat a.lock", 5)?;
    s.until(taker, "ENTERS", 400)?;
    s.until(taker, "): released", 200)?;
    s.until(recordless, "ENTERS", 50)?;
    s.until(b, "exchange a.lock.break.101", 5)?;
    s.kill(b)?;
    s.until_violation(next, 3_000)?;
    Ok(s)
}

/// As in [`recordless_marker_stranded`], a breaker's exchange takes a
/// recordless holder's marker aside and the breaker is killed. Two
/// contenders judge its dead record and recover its names at once: the
/// first lists the directory; the second lists it too and claims the
/// stranded marker by a rename to its restore name; the first then looks
/// at the name it listed and finds it gone. It must count the lock as
/// held: skipping the name, its recovery finds nothing, its takeover of
/// the dead record goes on and it enters, while the second, finding the
/// lock path changed, hands the marker back and the recordless holder
/// still holds.
fn claimed_between_listing_and_look() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "soft: a recordless holder beside breakers of a dead marker, two recoverers",
    )?);
    // With four runnable processes, the kill byte kills the last.
    let (taker, first, second, recordless, b) = (0, 1, 2, 3, 4);
    s.until(b, "rename a.lock.write", 400)?;
    s.until(b, "lstat a.lock", 5)?;
    s.until(taker, "ENTERS", 400)?;
    s.until(taker, "): released", 200)?;
    s.until(recordless, "ENTERS", 50)?;
    s.until(b, "exchange a.lock.break.104", 5)?;
    s.kill(b)?;
    s.until(first, "list", 3_000)?;
    s.until(second, "rename a.lock.break.104", 3_000)?;
    s.until_violation(first, 300)?;
    s.until_violation(second, 300)?;
    Ok(s)
}

/// Coarse mtimes, and a lease holder stopped past its lease that
/// releases: its mark changes only the change time. A peer that judged
/// the lapsed marker before the mark passes its last look and stops
/// there; the holder exchanges its placeholder in and stops before its
/// last unlink; the peer's exchange takes the placeholder aside and the
/// peer stops before its check. The third contender sees the peer's file
/// at the lock path unchanged for the lease, takes it over and enters.
/// Only the look that the lock path still shows our placeholder keeps
/// the releaser from unlinking the new holder's marker. (No pause here
/// reaches 2 s, the bound the timing assumption puts on each.)
fn placeholder_taken_aside() -> Result<Script, Lost> {
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
    s.until_violation(0, 50)?;
    Ok(s)
}

/// As in [`claimed_between_listing_and_look`], a killed breaker left a
/// recordless holder's marker under its break name. A contender claims it
/// and sees the killed breaker's record still at the lock path, ready to
/// put the marker back; meanwhile the recordless holder's hold ends, and
/// it unlinks the lock path by name (the killed breaker's record), and
/// another contender creates its marker at the empty path and enters. The
/// recoverer's exchange then takes that new marker aside: only its check
/// that the exchange took the judged record makes it swap straight back,
/// instead of unlinking the new holder's marker as the dead record.
fn lock_path_replaced_before_the_restore() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "soft: a recordless holder beside breakers of a dead marker, two recoverers",
    )?);
    // With four runnable processes, the kill byte kills the last.
    let (taker, recoverer, newcomer, recordless, b) = (0, 1, 2, 3, 4);
    s.until(b, "rename a.lock.write", 400)?;
    s.until(b, "lstat a.lock", 5)?;
    s.until(taker, "ENTERS", 400)?;
    s.until(taker, "): released", 200)?;
    s.until(recordless, "ENTERS", 50)?;
    s.until(b, "exchange a.lock.break.104", 5)?;
    s.kill(b)?;
    s.until(recoverer, "rename a.lock.break.104", 3_000)?;
    s.until(recoverer, "lstat a.lock ->", 20)?;
    s.until(recordless, "unlink a.lock ->", 200)?;
    s.until(newcomer, "ENTERS", 300)?;
    s.until_violation(recoverer, 300)?;
    Ok(s)
}

/// A takeover T reaches its last look before the exchange, as does a
/// breaker B; a peer takes the dead marker over, holds and releases; a
/// recordless holder creates its empty marker at the empty path. T's
/// exchange takes that marker aside, B's exchange takes T's file aside,
/// and B is killed. T's exchange-back gives up after 2 s with its file
/// under B's break name, which it must mark with its placeholder: left
/// as T's complete record, it names live T. A recoverer of B's names
/// claims it as live and sees B's record still at the lock path; the
/// recordless holder's hold ends and it unlinks the lock path by name; T
/// creates its marker at the empty path and enters. The recoverer's
/// exchange takes T's marker aside and its exchange back fails
/// (planned), so T's old file stays at the lock path and T's marker is
/// handed back under a break name of B. T's release then finds its marker
/// aside and reports done, while the lock path shows a record naming T;
/// a placeholder there names T as a breaker only, and ages out.
///
/// Steered without its mutant (under another one, as the mutation run
/// steers it, or none), or replayed from the schedule steered under it,
/// the race wedges the shipped protocol too: the abandon then writes its
/// placeholder, which takes a step more, and
/// the recordless holder's unlink by name removes B's record while its
/// own marker waits under T's break name. Its hold over, that empty file
/// names nobody; once the placeholder naming T at the lock path ages out,
/// the fresh contender's recovery of T's names must put it back (it may
/// be a live holder's, I10), where nobody evicts it. That is a gap the
/// exchange-based break leaves beside any holder that removes its marker
/// by name (PROTOCOL 12.3 G1), not this mutant's kill, and the hunt
/// counts no schedule the shipped protocol fails.
fn abandoned_record_restored() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "soft: a recordless holder beside breakers of a dead marker, two recoverers, a swap-back fails",
    )?);
    let (taker, t, r, recordless, b) = (0, 1, 2, 3, 4);
    s.until(b, "rename a.lock.write", 400)?;
    s.until(b, "lstat a.lock", 5)?;
    s.until(t, "rename a.lock.write", 400)?;
    s.until(t, "lstat a.lock", 5)?;
    s.until(taker, "ENTERS", 400)?;
    s.until(taker, "): released", 200)?;
    s.until(recordless, "ENTERS", 50)?;
    s.until(t, "exchange a.lock.break.102", 5)?;
    s.until(b, "exchange a.lock.break.104", 5)?;
    s.kill(b)?;
    s.until(t, "sleeps 50ms", 40_000)?;
    s.until(r, "rename a.lock.break.104", 3_000)?;
    s.until(r, "lstat a.lock ->", 20)?;
    s.until(recordless, "unlink a.lock ->", 400)?;
    s.until(t, "ENTERS", 300)?;
    s.until(r, "rename a.lock.restore", 50)?;
    s.until_violation(t, 300)?;
    Ok(s)
}

/// A judgement whose pin failed (7.5 lets it go on unpinned) reads the
/// dead marker and stops; a peer takes the marker over, enters and
/// releases, freeing its inode number, and a new holder's marker gets
/// that number within the same second (coarse times): the takeover's
/// looks (7.8 steps 1, 5, 7) compare inode and mtime only and would take
/// the new holder's marker (12.1 S18).
fn unpinned_judgement() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "soft: a dead holder's marker, coarse times, four contenders, a pin fails",
    )?);
    let (a, b, c) = (0, 1, 2);
    s.until(a, "pin a.lock", 10)?;
    s.until(a, "probe 999", 10)?;
    s.until(b, "ENTERS", 300)?;
    s.until(b, "): released", 100)?;
    s.until(c, "ENTERS", 300)?;
    s.until_violation(a, 300)?;
    Ok(s)
}
