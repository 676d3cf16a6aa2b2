//! Directed kills: races too narrow for the random searches and the
//! fuzzer, steered step by step ([`Script`]) under the mutant they kill,
//! and kept as schedules in `sim/findings/mutants/`, which
//! `tests/mutants.rs` replays under every catalogue entry. Each test
//! steers its race again and checks that the mutant fails it and the
//! shipped protocol does not; `SWAPLOCK_MUTANTS_KEEP=1` rewrites the kept
//! schedule (after a change of the protocol's syscall order, say).

use swaplock_sim::mutants::{replay, select, Entry, Mutant};
use swaplock_sim::scenarios;
use swaplock_sim::script::{Lost, Script};
use swaplock_sim::Policy;

/// The index of the scenario named `name` in the catalogue.
fn scenario(name: &str) -> usize {
    scenarios(Policy::Ours)
        .iter()
        .position(|(n, ..)| *n == name)
        .unwrap_or_else(|| panic!("no scenario {name:?}"))
}

/// Steers `script` with `mutant` on: it must find a violation, and its
/// schedule must replay it with the mutant on and pass with it off. Keeps
/// the schedule when asked.
fn kills(mutant: &'static [Mutant], steer: impl Fn() -> Result<Script, Lost>) {
    let entry = Entry { mutants: mutant };
    let schedule = {
        let _on = select(&entry);
        let script = steer().unwrap_or_else(|Lost(why)| panic!("{}: {why}", entry.name()));
        let v = script
            .violation()
            .unwrap_or_else(|| panic!("{}: the steered race found no violation", entry.name()));
        eprintln!("{}: {}", entry.name(), v.what);
        let schedule = script.schedule();
        assert!(
            replay(&schedule).is_some(),
            "{}: the kept bytes do not replay the kill",
            entry.name()
        );
        schedule
    };
    if let Some(v) = replay(&schedule) {
        panic!(
            "{}: the shipped protocol fails the schedule too: {v}",
            entry.name()
        );
    }
    if std::env::var_os("SWAPLOCK_MUTANTS_KEEP").is_some() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("findings/mutants");
        std::fs::write(dir.join(format!("{}.bin", entry.name())), &schedule).unwrap();
    }
}

/// A contender that took an expired lease over stops, between its exchange
/// and its last look, for longer than a lease; a peer expires the marker
/// it just published, takes it over and enters. Only the link count of
/// our marker after the takeover tells that it is gone.
#[test]
fn a_takeover_stopped_past_a_lease_before_its_check() {
    kills(&[Mutant::NoLinkCountAfterTakeover], || {
        let mut s = Script::new(scenario(
            "lease: a holder stopped past its lease, two contenders",
        ));
        // p0 holds, then stops; one of p1 and p2 takes its marker over and
        // stops right after its exchange; the other takes that over.
        s.until(0, "ENTERS", 200)?;
        let p = s.turns_until(&[1, 2], "exchange a.lock.break.10", 5_000)?;
        let q = 3 - p;
        s.until(q, "ENTERS", 5_000)?;
        s.until_violation(p, 50)?;
        Ok(s)
    });
}

/// A contender creates its marker by name and stops before writing it; a
/// peer evicts the empty marker after the grace period, as it may, and
/// enters; the stopped contender's write then fails. Its cleanup must
/// remove its own file while it is open, never the lock path by name after
/// closing, which now links the peer's marker. The failing write is one
/// the scenario's random source fails, so the race is steered from each of
/// a few prefixes until one draws it.
#[test]
fn a_marker_write_failing_after_its_eviction() {
    kills(&[Mutant::UnlinkAfterClose], || {
        let which =
            scenario("soft: markers written by name, torn and failing writes, patient contenders");
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
                    s.until_violation(p, 12)
                })();
                match steered {
                    Ok(true) => return Ok(s),
                    Ok(false) => why = Lost("no write failed, or no violation followed".into()),
                    Err(lost) => why = lost,
                }
            }
        }
        Err(why)
    });
}

/// Coarse file times, so that a freed inode number handed out again within
/// the same second is the same (inode, mtime) identity. A contender pins
/// the dead marker at the lock path; a peer takes that over and is killed
/// holding; the contender reads the killed peer's marker, which is not the
/// pinned file, and judges it. Meanwhile a third takes that marker over,
/// holds and releases, freeing its inode number, which a fourth's new
/// marker gets. The first's takeover then finds its judged identity at the
/// lock path and takes a live holder's marker. Only the pin check (the
/// file read must be the file pinned) refuses the judgement.
#[test]
fn a_judged_file_freed_and_its_number_reused() {
    kills(&[Mutant::NoPinCheck], || {
        let mut s = Script::new(scenario(
            "soft: a dead holder's marker, coarse times, four contenders",
        ));
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
    });
}
