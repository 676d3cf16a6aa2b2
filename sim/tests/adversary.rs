//! Adversarial races against the exchange-back (review of c40f1ca).

use swaplock_sim::script::{Lost, Script};
use swaplock_sim::{scenarios, Policy};

fn scenario(name: &str) -> usize {
    scenarios(Policy::Ours)
        .iter()
        .position(|(n, _, _)| *n == name)
        .unwrap_or_else(|| panic!("no scenario {name}"))
}

fn tail(s: &Script, n: usize) -> String {
    let t = s.sim().trace();
    let v: Vec<&str> = t.lines().collect();
    v[v.len().saturating_sub(n)..].join("\n")
}

/// The race of `placeholder_taken_aside`, where the breaker p stops not
/// before its check but inside its exchange-back, between its look that
/// the lock path shows its own file and its exchange: q takes p's file
/// over and enters, and p's exchange then feeds q's marker aside.
fn toctou_feed() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "lease: 2 s mtimes, 10 ms change times, a holder stopped past its lease",
    ));
    s.until(0, "ENTERS", 200)?;
    s.until(0, "leaves the critical section", 200)?;
    let p = s.turns_until(&[1, 2], "rename a.lock.write", 5_000)?;
    let q = 3 - p;
    s.until(p, "lstat a.lock", 5)?;
    s.until(0, "exchange a.lock.break.101", 50)?;
    s.until(p, "exchange", 5)?;
    // p's check, then its exchange-back's look at its break name and at
    // the lock path, which shows p's own file.
    s.until(p, "lstat a.lock.break", 5)?;
    s.until(p, "lstat a.lock.break", 10)?;
    s.until(p, "lstat a.lock ->", 5)?;
    s.until(q, "ENTERS", 5_000)?;
    s.until(p, "exchange", 5)?;
    s.until_violation(0, 50)?;
    s.until_violation(p, 3_000)?;
    Ok(s)
}

/// The kept schedule of [`toctou_feed`].
const KEPT: &str = "findings/adversary/a-lease-taken-over-inside-an-exchange-back-feeds-its-marker-aside.bin";

#[test]
fn toctou_feeding_exchange_back() {
    let s = toctou_feed().unwrap_or_else(|l| panic!("lost: {}", l.0));
    let t = s.sim().trace();
    for l in t.lines().rev().take(30).collect::<Vec<_>>().into_iter().rev() {
        eprintln!("{}", &l[..l.len().min(200)]);
    }
    eprintln!("overslept: {}", s.sim().overslept());
    let v = s.violation().expect("the shipped protocol passes the race");
    eprintln!("violation: {}", v.what);
    assert!(!s.sim().overslept());
    let schedule = s.schedule();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(KEPT);
    if std::env::var_os("SWAPLOCK_ADV_KEEP").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &schedule).unwrap();
    }
    assert_eq!(std::fs::read(&path).ok().as_deref(), Some(schedule.as_slice()));
    // The kept bytes replay the violation on the shipped protocol.
    let replayed = swaplock_sim::mutants::replay(&schedule).expect("the kept schedule replays clean");
    eprintln!("replayed: {replayed}");
}

/// The same race before c40f1ca (its behaviour is the mutant
/// aside-kept-when-path-missing): does the old code pass it?
#[test]
fn toctou_feeding_exchange_back_old_code() {
    use swaplock_sim::mutants::{select, Entry, Mutant};
    let _on = select(&Entry {
        mutants: &[Mutant::AsideKeptWhenPathMissing],
    });
    match toctou_feed() {
        Ok(mut s) => {
            if s.violation().is_none() {
                s.finish();
            }
            let t = s.sim().trace();
            let v: Vec<&str> = t.lines().collect();
            for l in &v[v.len().saturating_sub(25)..] {
                eprintln!("{}", &l[..l.len().min(220)]);
            }
            eprintln!("OLD violation: {:?}", s.violation().map(|v| v.what));
            eprintln!("overslept: {}", s.sim().overslept());
        }
        Err(l) => panic!("lost: {}", l.0),
    }
}

/// [`toctou_feed`], where the fed holder q leaves (and releases) while
/// the breaker p waits right after its exchange-back: p's next create
/// then comes after q's hold. Whether the shipped and the old code pass.
fn toctou_feed_holder_leaves() -> Result<Script, Lost> {
    let mut s = Script::new(scenario(
        "lease: 2 s mtimes, 10 ms change times, a holder stopped past its lease",
    ));
    s.until(0, "ENTERS", 200)?;
    s.until(0, "leaves the critical section", 200)?;
    let p = s.turns_until(&[1, 2], "rename a.lock.write", 5_000)?;
    let q = 3 - p;
    s.until(p, "lstat a.lock", 5)?;
    s.until(0, "exchange a.lock.break.101", 50)?;
    s.until(p, "exchange", 5)?;
    s.until(p, "lstat a.lock.break", 5)?;
    s.until(p, "lstat a.lock.break", 10)?;
    s.until(p, "lstat a.lock ->", 5)?;
    s.until(q, "ENTERS", 5_000)?;
    s.until(p, "exchange", 5)?;
    s.until(0, "released", 50)?;
    s.until(p, "ENOENT", 10)?;
    s.until(p, "lstat a.lock.break", 5)?;
    // The unlink of the shipped code, the fstat of the old.
    s.step(p)?;
    s.until(q, "released", 2_000)?;
    s.until_violation(p, 3_000)?;
    Ok(s)
}

#[test]
fn toctou_feed_holder_leaves_shipped_and_old() {
    use swaplock_sim::mutants::{select, Entry, Mutant};
    for old in [false, true] {
        let _on = select(&Entry {
            mutants: if old { &[Mutant::AsideKeptWhenPathMissing] } else { &[] },
        });
        match toctou_feed_holder_leaves() {
            Ok(mut s) => {
                if s.violation().is_none() {
                    s.finish();
                }
                let t = s.sim().trace();
                let v: Vec<&str> = t.lines().collect();
                for l in &v[v.len().saturating_sub(12)..] {
                    eprintln!("{}", &l[..l.len().min(180)]);
                }
                eprintln!(
                    "old={old}: violation {:?}, overslept {}",
                    s.violation().map(|v| v.what),
                    s.sim().overslept()
                );
                if !old {
                    eprintln!("schedule {:?}", s.schedule().len());
                }
            }
            Err(l) => eprintln!("old={old}: lost: {}", l.0),
        }
    }
}

/// The kept schedule of [`toctou_feed_holder_leaves`], steered on the old
/// code (aside-kept-when-path-missing on): the old code passes it, the
/// shipped code fails it (p1 unlinks p2's marker while p2 holds).
const KEPT_LEAVES: &str =
    "findings/adversary/a-fed-holders-marker-unlinked-by-s9-while-it-holds.bin";

#[test]
fn old_code_passes_what_shipped_fails() {
    use swaplock_sim::mutants::{replay, select, Entry, Mutant};
    let schedule = {
        let _on = select(&Entry {
            mutants: &[Mutant::AsideKeptWhenPathMissing],
        });
        let mut s = toctou_feed_holder_leaves().unwrap_or_else(|l| panic!("lost: {}", l.0));
        assert!(!s.finish(), "the old code fails the race");
        assert!(!s.sim().overslept());
        let schedule = s.schedule();
        assert_eq!(replay(&schedule), None, "the old code fails the kept bytes");
        schedule
    };
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(KEPT_LEAVES);
    if std::env::var_os("SWAPLOCK_ADV_KEEP").is_some() {
        std::fs::write(&path, &schedule).unwrap();
    }
    assert_eq!(std::fs::read(&path).ok().as_deref(), Some(schedule.as_slice()));
    let shipped = replay(&schedule).expect("the shipped code passes the kept bytes");
    eprintln!("shipped: {shipped}");
}
