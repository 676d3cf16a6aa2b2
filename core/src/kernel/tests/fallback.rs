//! The `flock` attempt's opens where `ENOSYS` may turn it into a soft
//! lock: whether it created the file decides whether the fallback may
//! remove it (PROTOCOL 7.1, 7.17).

use super::*;

#[test]
fn enosys_is_a_fallback_only_for_a_caller_that_falls_back() {
    let mut os = Fake::new(Duration::ZERO);
    os.free = Err(Errno::NOSYS);
    os.existing_open = Err(Errno::NOENT);
    let out = acquire(&mut os, false, true, &mut Deadline::once());
    assert!(matches!(
        out,
        Ok(Outcome::Unsupported { created: true, .. })
    ));
    // fcntl, the with-lock-ex protocol: an error, never a soft lock
    // beside an empty file nobody knows who created.
    let out = acquire(&mut os, false, false, &mut Deadline::once());
    assert!(matches!(out, Err((Step::Lock, e)) if e == Errno::NOSYS));
}

#[test]
fn a_fallback_attempt_opens_a_file_already_there_as_not_created_in_one_open() {
    let mut os = Fake::new(Duration::ZERO);
    os.free = Err(Errno::NOSYS);
    os.exclusive_open = Err(Errno::EXIST);
    let out = attempt(&mut os, false, true);
    assert!(matches!(
        out,
        Ok(Outcome::Unsupported { created: false, .. })
    ));
    assert_eq!(os.attempts, 1, "no exclusive create beside a file there");
}

#[test]
fn a_fallback_attempt_that_finds_no_file_creates_it_and_says_so() {
    let mut os = Fake::new(Duration::ZERO);
    os.free = Err(Errno::NOSYS);
    os.existing_open = Err(Errno::NOENT);
    let out = attempt(&mut os, false, true);
    assert!(matches!(
        out,
        Ok(Outcome::Unsupported { created: true, .. })
    ));
    assert_eq!(os.attempts, 2, "plain, then exclusive");
}

#[test]
fn a_fallback_attempt_that_finds_the_file_made_between_its_opens_did_not_create_it() {
    let mut os = Fake::new(Duration::ZERO);
    os.free = Err(Errno::NOSYS);
    os.existing_open = Err(Errno::NOENT);
    os.appeared = 1;
    let out = attempt(&mut os, false, true);
    assert!(matches!(
        out,
        Ok(Outcome::Unsupported { created: false, .. })
    ));
    assert_eq!(os.attempts, 3, "plain, exclusive, plain again");
}

#[test]
fn a_fallback_attempt_on_a_dangling_symlink_ends() {
    let mut os = Fake::new(Duration::ZERO);
    os.free = Err(Errno::NOSYS);
    os.exclusive_open = Err(Errno::EXIST);
    os.dangling = true;
    let out = attempt(&mut os, false, true);
    // The target created by a plain open is not known to be ours.
    assert!(matches!(
        out,
        Ok(Outcome::Unsupported { created: false, .. })
    ));
    assert_eq!(os.attempts, 2 * (VANISHED_AT_MOST + 1) + 1);
}

#[test]
fn a_fallback_attempt_reports_any_other_error_of_its_plain_open() {
    let mut os = Fake::new(Duration::ZERO);
    os.existing_open = Err(Errno::ACCES);
    let out = attempt(&mut os, false, true);
    assert!(matches!(out, Err((Step::Open, e)) if e == Errno::ACCES));
    assert_eq!(os.attempts, 1, "no exclusive create");
}

#[test]
fn a_fallback_attempt_reports_any_other_error_of_its_exclusive_open() {
    let mut os = Fake::new(Duration::ZERO);
    os.existing_open = Err(Errno::NOENT);
    os.exclusive_open = Err(Errno::ACCES);
    let out = attempt(&mut os, false, true);
    assert!(matches!(out, Err((Step::Open, e)) if e == Errno::ACCES));
    assert_eq!(os.attempts, 2, "plain, then exclusive");
}
