//! Directed schedules of the read-write lock's review that the shipped
//! driver does not pass yet: each is steered step by step over a scenario
//! of the catalogue, then run to its end as a kept schedule is.

use swaplock_sim::rw::index_of;
use swaplock_sim::rw::script::Script;

/// Two readers start a new log together: p1 creates HEAD (the new log's
/// confirmation) and its temporary, and stops before its link of
/// generation 1; p0 confirms, links its generation 1, and stops between
/// its link and its look at the two names. A third reader enters and
/// leaves until the log is a window on and compaction has removed
/// generation 1 (p0's temporary, unchanged for less than the threshold,
/// is not swept). p1 resumes and links into the freed name (its own
/// checks after the link would see the lead and remove it). p0 resumes
/// and looks: its link answered success and the names show two files, on
/// a model that shows hard links as one file. It is a lost commit; the
/// shipped driver fails it as a filesystem that cannot show hard links
/// (sshfs), which the oracle reports as the driver failing.
#[test]
fn a_commit_stopped_after_its_link_for_a_window_is_lost_not_refused() {
    let i = index_of("a-commit-stopped-after-its-link-for-a-window").unwrap();
    let mut s = Script::new(i);
    s.until(1, "create gen/.commit", 200).unwrap();
    s.until(0, "link gen/.commit", 200).unwrap();
    // The third reader, until compaction removes generation 1.
    s.until(2, "unlink gen/1 ->", 25_000).unwrap();
    s.until(1, "link gen/.commit", 5).unwrap();
    s.step(0).unwrap();
    s.finish();
    if let Some(v) = s.violation() {
        let tail: Vec<&str> = v.trace.lines().rev().take(8).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!("{}; the trace ended:\n{}", v.what, tail.join("\n"));
    }
}
