//! Scenarios with planned syscall faults ([`Planned`]): races that need
//! one call of one process to fail at one place (or to be made and
//! answered with an error), for the directed races of [`crate::directed`]
//! and for random schedules. They come last in the catalogue, so that the
//! kept schedules of the scenarios before them keep their index.

use crate::cast::{contenders, Policy, Process, Scenario, LEASE, LOCK};
use crate::model::{Faults, Planned};
use std::time::Duration;
use swaplock_core::soft::Kind;
use swaplock_core::Errno;

/// A dead holder's protocol 1 record.
const DEAD: &[u8] = b"999\nh1\n";

/// The first write of the release's mark fails: the holder (p0) removes
/// its marker by name (PROTOCOL 7.3 step 4).
const MARK_FAILS: Planned = Planned {
    who: 0,
    call: "pwrite",
    nth: 1,
    errno: Errno::IO,
    made: false,
};

/// Appends the scenarios with planned faults to `all`.
pub(crate) fn push(all: &mut Vec<(&'static str, Scenario, u64)>, policy: Policy) {
    // A lease holder stopped past its lease whose release cannot mark its
    // marker released, so that it touches it, looks again and unlinks it
    // by name while peers may take it over.
    let mut sc = Scenario::new(Kind::Lease);
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 40);
    sc.processes[0].hold_pause = LEASE + Duration::from_millis(50);
    sc.faults = Faults {
        planned: &[MARK_FAILS],
        ..Faults::default()
    };
    all.push((
        "lease: a holder stopped past its lease whose mark fails",
        sc,
        0,
    ));
    // The same, where the touch before the unlink by name fails too.
    let mut sc = Scenario::new(Kind::Lease);
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 40);
    sc.processes[0].hold_pause = LEASE + Duration::from_millis(50);
    sc.faults = Faults {
        planned: &[
            MARK_FAILS,
            Planned {
                who: 0,
                call: "futimens",
                nth: TOUCH_OF_RELEASE,
                errno: Errno::IO,
                made: false,
            },
        ],
        ..Faults::default()
    };
    all.push((
        "lease: a holder stopped past its lease whose mark and touch fail",
        sc,
        0,
    ));
    // Breakers of a dead marker beside a recordless holder (as in
    // "soft: a recordless holder beside breakers of a dead marker"), where
    // the first listing of the third breaker fails: a recovery that cannot
    // list may not conclude that nothing is stranded.
    let mut sc = Scenario::new(Kind::Soft);
    sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 12);
    sc.processes.push(Process {
        host: 0,
        pid: 100,
        attempts: 200,
        hold_steps: 0,
        policy: Policy::Recordless,
        enosys_fallback: false,
        poll: crate::POLL,
        hold_pause: Duration::ZERO,
        beat: Duration::ZERO,
    });
    sc.faults = Faults {
        planned: &[Planned {
            who: 2,
            call: "list",
            nth: 1,
            errno: Errno::IO,
            made: false,
        }],
        ..Faults::default()
    };
    all.push((
        "soft: a recordless holder beside breakers of a dead marker, a listing fails",
        sc,
        25,
    ));
}

/// Appends the scenarios with planned faults that came after the rest of
/// the catalogue, at its end, so that every kept schedule keeps its index.
pub(crate) fn push_last(all: &mut Vec<(&'static str, Scenario, u64)>, policy: Policy) {
    // A lease holder stopped past its lease whose mark fails (as above),
    // where mtimes are cut to 2 s and change times to 10 ms: its touch
    // before the unlink by name, within the two seconds of its marker's
    // last mtime, changes the change time only.
    let mut sc = Scenario::new(Kind::Lease);
    sc.granularity = 2_000_000_000;
    sc.ctime_granularity = Some(10_000_000);
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 40);
    sc.processes[0].hold_pause = LEASE + Duration::from_millis(50);
    sc.faults = Faults {
        planned: &[MARK_FAILS],
        ..Faults::default()
    };
    all.push((
        "lease: 2 s mtimes, 10 ms change times, a holder stopped past its lease whose mark fails",
        sc,
        0,
    ));

    // No unnamed files but exclusive renames (vfat, exFAT: PROTOCOL 7.2
    // step 3b): markers written under write names and renamed to the lock
    // path, beside a dead holder's marker, with torn and failing writes,
    // then with any syscall failing, and contenders killed.
    for (kind, dead, faults, name) in [
        (
            Kind::Soft,
            &b"999\nh1\n"[..],
            Faults {
                exclusive_rename: true,
                short_writes: 5,
                eio_one_in: 4,
                ..Faults::default()
            },
            "soft: exclusive renames, a dead holder's marker, torn and failing writes",
        ),
        (
            Kind::Marker,
            &b"filelock/2\npid=999\nhost=h1\nmode=exclusive\n"[..],
            Faults {
                exclusive_rename: true,
                syscall_one_in: 20,
                ..Faults::default()
            },
            "marker: exclusive renames, a dead holder's marker, failing syscalls",
        ),
    ] {
        let mut sc = Scenario::new(kind);
        sc.files.push((crate::cast::LOCK.to_vec(), dead.to_vec()));
        sc.faults = faults;
        contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 20);
        all.push((name, sc, 40));
    }
}

/// Which touch of the stopped lease holder is its release's: the
/// heartbeats of its hold come first.
const TOUCH_OF_RELEASE: u32 = 3;

/// Appends, after the power cuts, the scenarios of calls that fail where
/// a takeover must not be fooled (PROTOCOL 7.8 step 6, 7.9): an exchange
/// made but answered with an error, as a FUSE
/// server's `EINTR` after it acted; and an exchange-back that fails with
/// our file at the lock path, whose placeholder then cannot be cut to
/// its length. Holders stay 3 s and contenders poll long enough to evict
/// a malformed marker beside them.
pub(crate) fn push_lost_replies(all: &mut Vec<(&'static str, Scenario, u64)>, policy: Policy) {
    const MADE_BUT_INTERRUPTED: &[Planned] = &[Planned {
        who: 1,
        call: "exchange a.lock.break",
        nth: 1,
        errno: Errno::INTR,
        made: true,
    }];
    const UNDO_AND_CUT_FAIL: &[Planned] = &[
        Planned {
            who: 1,
            call: "exchange a.lock.break",
            nth: 2,
            errno: Errno::IO,
            made: false,
        },
        Planned {
            who: 1,
            call: "ftruncate",
            nth: 1,
            errno: Errno::IO,
            made: false,
        },
    ];
    for (name, planned) in [
        (
            "soft: a dead holder's marker, a takeover's exchange made but answered EINTR",
            MADE_BUT_INTERRUPTED,
        ),
        (
            "soft: a dead holder's marker, an exchange-back fails and its placeholder cannot be cut",
            UNDO_AND_CUT_FAIL,
        ),
    ] {
        let mut sc = Scenario::new(Kind::Soft);
        sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
        sc.faults.planned = planned;
        contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 80);
        for p in [0, 2] {
            sc.processes[p].hold_pause = Duration::from_secs(3);
        }
        all.push((name, sc, 0));
    }
}
