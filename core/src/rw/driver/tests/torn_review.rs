//! The second adversarial review of the torn-epoch binding: a committer
//! stopped across a window of commits before or after its move of HEAD
//! (its late HEAD, moving back, still says the log is not new, so a blind
//! client stays out), and an epoch cut before its newline.

use super::review::commit_next;
use super::torn::{torn_log_at_140, Hooked};
use super::*;
use crate::rw::record;

/// The live writer the peers' last commit names.
const LIVE_WRITER: Token = Token([0x99; 16]);

/// swaplock peers commit a window and one past the stopped committer's
/// 141 (through 207, compacting 141), the last naming a live writer that
/// holds on.
fn a_window_of_swaplock_commits(fs: &mut Mem) {
    let mut env = Clock {
        now: 2_000_000_000,
        drawn: 1 << 40,
    };
    let mut peer = lock(90.0);
    for g in 142..=207u128 {
        let writer = (g == 207).then_some(LIVE_WRITER);
        assert_eq!(
            commit_next(&mut peer, fs, &mut env, writer),
            commit::Committed::Won
        );
    }
    assert!(fs.gen(141).is_none(), "141 compacted");
    let head = fs.get(Area::Generations, HEAD).unwrap().clone();
    assert_eq!(head, fs.gen(207).unwrap().as_bytes(), "the live HEAD");
}

/// A's commit of 141 in the torn log at 140 (say its leave), with `hook`
/// set up by `arm`; then what a client whose listing of gen/ is stale
/// (C-RW1) is granted.
fn a_stopped_committer_then_a_blind_client(
    arm: fn(&mut Hooked<'_>),
) -> (Mem, Result<bool, Error>, Option<u128>) {
    let (mut fs, mut env) = torn_log_at_140(b"");
    let mut a = lock(90.0);
    {
        let mut hooked = Hooked::new(&mut fs);
        arm(&mut hooked);
        assert_eq!(a.latest(&mut hooked, &mut env), Ok(140));
        assert_eq!(
            commit_next(&mut a, &mut hooked, &mut env, None),
            commit::Committed::Won
        );
        assert!(hooked.before_head.is_none() && hooked.after_head.is_none());
    }
    let live = parse_snapshot(fs.gen(207).unwrap().as_bytes())
        .unwrap()
        .writer;
    assert_eq!(live, Some(LIVE_WRITER), "the live writer at 207");
    fs.blind_listing = true;
    let mut blind = lock(90.0);
    let mut w = blind.publish(&mut fs, &mut env, Mode::Write).unwrap();
    let granted = blind.advance(&mut fs, &mut env, &mut w);
    (fs, granted, w.generation())
}

#[test]
fn a_late_head_moving_back_still_keeps_a_blind_client_out() {
    // A (leaving, or a reader joining: no eviction needed for the log to
    // move on) wins 141 and is stopped before its rename of HEAD. Under a
    // torn epoch HEAD names no generation, so head_due passes whatever
    // HEAD holds; peers meanwhile commit through 207 (compacting 141) and
    // HEAD binds 207. A's rename puts HEAD back at 141: still bound to the
    // torn epoch, it still says the log is not new. (A read-back that
    // removed HEAD once 141 was gone let the blind client in here.)
    let (fs, granted, generation) = a_stopped_committer_then_a_blind_client(|h| {
        h.before_head = Some(a_window_of_swaplock_commits);
    });
    let head = fs.get(Area::Generations, HEAD).cloned();
    assert!(
        fs.gen(1).is_none(),
        "a second writer at generation 1 ({granted:?}, {generation:?}) beside the live writer at 207; HEAD then {head:?}"
    );
    assert_eq!(granted, Ok(false), "waits until its listing shows the log");
}

#[test]
fn a_committer_stopped_after_its_head_leaves_the_later_ones_in_place() {
    // The same, A stopped just after its rename: peers' commits replace
    // A's HEAD with theirs (at 207) and compact 141, and A takes nothing
    // back.
    let (fs, granted, generation) = a_stopped_committer_then_a_blind_client(|h| {
        h.after_head = Some(a_window_of_swaplock_commits);
    });
    let head = fs.get(Area::Generations, HEAD).cloned();
    assert!(
        fs.gen(1).is_none(),
        "a second writer at generation 1 ({granted:?}, {generation:?}) beside the live writer at 207; HEAD then {head:?}"
    );
    assert_eq!(granted, Ok(false), "waits until its listing shows the log");
}

#[test]
fn a_client_with_a_stale_listing_never_commits_generation_one_under_an_epoch_cut_before_its_newline(
) {
    // A creator whose write stopped one byte short leaves the token without
    // its `\n`. is_valid_epoch (and filelock's _valid_epoch) take it for a
    // token, so HEAD is written as the epoch's bytes and the snapshot, with
    // no newline between; filelock binds HEAD by its first line, which then
    // never equals the epoch. swaplock binds it as under a torn epoch.
    let torn = b"5e210ab54e14cb9b9798c552ff0af2d0";
    assert!(record::is_valid_epoch(torn));
    let (mut fs, mut env) = torn_log_at_140(torn);
    let head = fs.get(Area::Generations, HEAD).unwrap().clone();
    assert!(!record::filelock_binds(torn));
    assert!(record::head_record(&head, Some(torn)).is_some(), "bound");
    assert_eq!(record::head_generation(&head, Some(torn)), None);
    fs.blind_listing = true;
    let mut blind = lock(90.0);
    let mut w = blind.publish(&mut fs, &mut env, Mode::Write).unwrap();
    let granted = blind.advance(&mut fs, &mut env, &mut w);
    assert!(
        fs.gen(1).is_none(),
        "a writer granted at generation 1 ({granted:?}) beside the live log at 140"
    );
    assert_eq!(granted, Ok(false));
}
