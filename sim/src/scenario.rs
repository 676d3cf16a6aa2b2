//! The catalogue of scenarios the random search, the fuzzer and the seed
//! races cover ([`scenarios`], [`enosys_fallback_race`],
//! [`windows_symlink_race`]), built of the types of [`crate::cast`].

use crate::cast::{contenders, Policy, Process, Scenario, LEASE, LOCK, VICTIM};
use crate::model::Faults;
use std::time::Duration;
use swaplock_core::soft::Kind;

/// The scenarios the random exploration and the fuzzer cover, with their
/// names and how often a random schedule kills a process (one step in so
/// many).
pub fn scenarios(policy: Policy) -> Vec<(&'static str, Scenario, u64)> {
    const DEAD: &[u8] = b"999\nh1\n";
    const DEAD_V2: &[u8] = b"filelock/2\npid=999\nhost=h1\nmode=exclusive\n";
    fn two_hosts(sc: &mut Scenario) {
        sc.hosts = vec!["h1", "h2"];
        // The second host's clock runs 3 s behind.
        sc.wall_offsets = vec![0, -3_000_000_000];
    }
    let mut all = Vec::new();

    let mut sc = Scenario::new(Kind::Soft);
    sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 6);
    all.push(("soft: a dead holder's marker, three contenders", sc, 40));

    let mut sc = Scenario::new(Kind::Marker);
    two_hosts(&mut sc);
    sc.files.push((LOCK.to_vec(), DEAD_V2.to_vec()));
    contenders(
        &mut sc,
        policy,
        &[(0, 101), (0, 102), (1, 101), (1, 102), (0, 104)],
        6,
    );
    all.push(("marker: five contenders on two hosts", sc, 30));

    let mut sc = Scenario::new(Kind::Soft);
    sc.files.push((LOCK.to_vec(), b"garbage\n".to_vec()));
    sc.granularity = 1_000_000_000;
    sc.faults = Faults {
        short_writes: 4,
        ..Faults::default()
    };
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 50);
    all.push((
        "soft: a malformed marker, torn writes, coarse times",
        sc,
        60,
    ));

    let mut sc = Scenario::new(Kind::Lease);
    two_hosts(&mut sc);
    contenders(
        &mut sc,
        policy,
        &[(0, 101), (1, 102), (1, 103), (0, 104)],
        30,
    );
    all.push(("lease: four contenders on two hosts, clocks apart", sc, 50));

    let mut sc = Scenario::new(Kind::Soft);
    // A recycled PID: the marker names pid 101, which a contender now has.
    sc.files.push((LOCK.to_vec(), b"101\nh1\n1\n".to_vec()));
    sc.faults = Faults {
        eio_one_in: 25,
        ..Faults::default()
    };
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 6);
    all.push(("soft: a recycled PID, failing writes", sc, 40));

    let mut sc = Scenario::new(Kind::Marker);
    sc.files.push((LOCK.to_vec(), DEAD_V2.to_vec()));
    sc.faults = Faults {
        no_exchange: true,
        ..Faults::default()
    };
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 4);
    all.push(("marker: a filesystem without exchange", sc, 40));

    let mut sc = Scenario::new(Kind::Soft);
    sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
    // A lifetime far longer than any stall in a run, and a marker well past it.
    sc.lifetime = Some(Duration::from_secs(10));
    sc.initial_age = 20_000_000_000;
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 6);
    all.push(("soft: lifetime breaks", sc, 40));

    let mut sc = Scenario::new(Kind::Soft);
    // A symlink planted at the lock path: read as itself, evicted as itself.
    sc.symlinks.push((LOCK.to_vec(), b"/etc/passwd".to_vec()));
    contenders(&mut sc, policy, &[(0, 101), (0, 102)], 50);
    all.push(("soft: a planted symlink at the lock path", sc, 60));

    all.push((
        "soft: flock fails with ENOSYS, a stalled fallback, lifetime breaks",
        enosys_fallback_race(policy),
        60,
    ));

    let mut sc = windows_symlink_race(policy);
    sc.kind = Kind::Marker;
    sc.files[0].1 = DEAD_V2.to_vec();
    all.push((
        "windows marker: a dead holder's marker, symlinks planted at break names",
        sc,
        40,
    ));

    let mut sc = Scenario::new(Kind::Lease);
    sc.windows = true;
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 30);
    all.push(("windows lease: three contenders", sc, 50));

    let mut sc = Scenario::new(Kind::Marker);
    sc.files.push((LOCK.to_vec(), DEAD_V2.to_vec()));
    sc.faults = Faults {
        unnamed: true,
        short_writes: 8,
        eio_one_in: 25,
        ..Faults::default()
    };
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 6);
    all.push((
        "marker: unnamed files, a dead holder's marker, torn and failing writes",
        sc,
        40,
    ));

    let mut sc = Scenario::new(Kind::Lease);
    two_hosts(&mut sc);
    sc.faults.unnamed = true;
    contenders(&mut sc, policy, &[(0, 101), (1, 102), (0, 103)], 30);
    all.push((
        "lease: unnamed files, three contenders on two hosts",
        sc,
        50,
    ));

    // Syscall faults (any call but close may fail, PROTOCOL 7): never two
    // holders, never a wedge, and a release that cannot remove its marker
    // says so. New scenarios go last: the fuzz target's first byte and the
    // kept findings index this list.
    let mut sc = Scenario::new(Kind::Marker);
    sc.files.push((LOCK.to_vec(), DEAD_V2.to_vec()));
    sc.faults = Faults {
        unnamed: true,
        syscall_one_in: 20,
        ..Faults::default()
    };
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 8);
    all.push((
        "marker: unnamed files, a dead holder's marker, failing syscalls",
        sc,
        40,
    ));

    let mut sc = Scenario::new(Kind::Lease);
    two_hosts(&mut sc);
    sc.faults = Faults {
        syscall_one_in: 25,
        ..Faults::default()
    };
    contenders(&mut sc, policy, &[(0, 101), (1, 102), (0, 103)], 30);
    all.push(("lease: two hosts, failing syscalls", sc, 50));

    let mut sc = Scenario::new(Kind::Soft);
    sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
    sc.lifetime = Some(Duration::from_secs(10));
    sc.initial_age = 20_000_000_000;
    sc.faults = Faults {
        syscall_one_in: 20,
        ..Faults::default()
    };
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 8);
    all.push(("soft: lifetime breaks, failing syscalls", sc, 40));

    let mut sc = Scenario::new(Kind::Soft);
    sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
    sc.faults = Faults {
        syscall_one_in: 20,
        ..Faults::default()
    };
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 8);
    all.push(("soft: a dead holder's marker, failing syscalls", sc, 40));

    // A live holder whose marker stays empty for longer than the malformed
    // grace period: never evicted (I10).
    let mut sc = Scenario::new(Kind::Soft);
    sc.processes.push(Process {
        host: 0,
        pid: 100,
        attempts: 1,
        hold_steps: 0,
        policy: Policy::Recordless,
        enosys_fallback: false,
        poll: crate::POLL,
        hold_pause: Duration::ZERO,
        beat: Duration::ZERO,
    });
    contenders(&mut sc, policy, &[(0, 101), (0, 102)], 80);
    all.push(("soft: a recordless holder, two contenders", sc, 0));

    // The filesystem runs out of inodes while the lock is likely held: a
    // release must still remove the marker (it needs no resource the
    // hold did not have), and no release may fail.
    for (kind, unnamed, name) in [
        (Kind::Soft, false, "soft: out of inodes mid-run"),
        (
            Kind::Marker,
            true,
            "marker: unnamed files, out of inodes mid-run",
        ),
    ] {
        let mut sc = Scenario::new(kind);
        sc.faults = Faults {
            unnamed,
            full_after: Some(Duration::from_millis(30)),
            ..Faults::default()
        };
        contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 8);
        for p in &mut sc.processes {
            p.hold_steps = 6;
        }
        all.push((name, sc, 0));
    }

    // Coarse file times: every file of the run has the same mtime, so a
    // freed inode number handed out again is the same (inode, mtime)
    // identity, and only the pin keeps a judged file's number from reuse.
    let mut sc = Scenario::new(Kind::Soft);
    sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
    sc.granularity = 1_000_000_000;
    contenders(
        &mut sc,
        policy,
        &[(0, 101), (0, 102), (0, 103), (0, 104)],
        8,
    );
    all.push((
        "soft: a dead holder's marker, coarse times, four contenders",
        sc,
        25,
    ));

    // A lease holder stopped past its lease: peers take its marker over,
    // as they may, and it releases while they do.
    let mut sc = Scenario::new(Kind::Lease);
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 40);
    sc.processes[0].hold_pause = LEASE + Duration::from_millis(50);
    all.push((
        "lease: a holder stopped past its lease, two contenders",
        sc,
        0,
    ));

    // Markers made by name and then written, torn and failing writes, and
    // contenders patient enough to evict a half-written marker after the
    // malformed grace period: a writer stopped mid-record comes back to a
    // failing write after a peer took the lock.
    let mut sc = Scenario::new(Kind::Soft);
    sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
    sc.faults = Faults {
        short_writes: 5,
        eio_one_in: 4,
        ..Faults::default()
    };
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 60);
    all.push((
        "soft: markers written by name, torn and failing writes, patient contenders",
        sc,
        40,
    ));
    // Four contenders patient enough to wait out the exchange-back limit
    // and the malformed grace period: rings of nested breakers, one of them
    // killed, and the recoveries that unwind them.
    let mut sc = Scenario::new(Kind::Soft);
    sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
    contenders(
        &mut sc,
        policy,
        &[(0, 101), (0, 102), (0, 103), (0, 104)],
        100,
    );
    all.push((
        "soft: a dead holder's marker, four patient contenders",
        sc,
        40,
    ));

    // Windows rules: a dead holder's marker, two contenders, and a holder
    // by name whose empty file no handle holds: a breaker that judged the
    // dead marker must not move it.
    let mut sc = Scenario::new(Kind::Soft);
    sc.windows = true;
    sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
    sc.processes.push(Process {
        host: 0,
        pid: 100,
        attempts: 80,
        hold_steps: 0,
        policy: Policy::ByName,
        enosys_fallback: false,
        poll: crate::POLL,
        hold_pause: Duration::ZERO,
        beat: Duration::ZERO,
    });
    contenders(&mut sc, policy, &[(0, 101), (0, 102)], 80);
    all.push((
        "soft (Windows rules): a dead holder's marker, a holder by name",
        sc,
        0,
    ));
    // Appended last: a kept schedule names its scenario by index.
    let mut sc = Scenario::new(Kind::Marker);
    two_hosts(&mut sc);
    sc.files.push((LOCK.to_vec(), DEAD_V2.to_vec()));
    sc.granularity = 1_000_000_000;
    sc.faults = Faults {
        no_exchange: true,
        exists_as_eperm: true,
        ..Faults::default()
    };
    contenders(&mut sc, policy, &[(0, 101), (1, 102), (0, 103)], 4);
    all.push((
        "marker: an SFTP client on two hosts (EPERM for an existing name, no exchange)",
        sc,
        40,
    ));
    // Mtimes to 2 s and change times to 10 ms (as Linux vfat kept them
    // from 4.19 to 5.18, though vfat itself has no exchange). A heartbeat
    // within the same two seconds leaves the mtime as it was and changes
    // only the change time, which is all that tells a watching peer that
    // the lease is alive.
    let mut sc = Scenario::new(Kind::Lease);
    sc.granularity = 2_000_000_000;
    sc.ctime_granularity = Some(10_000_000);
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 40);
    for p in &mut sc.processes {
        p.hold_steps = 6;
        p.beat = LEASE / 4;
    }
    all.push((
        "lease: 2 s mtimes, 10 ms change times, heartbeats within one mtime",
        sc,
        0,
    ));
    // The with-lock-ex protocol: three processes take the kernel lock,
    // and each removes the lock file as it leaves, so that a peer that
    // opened it first finds its lock on a removed file, or on one that
    // another process created since; some lock calls are interrupted by
    // a signal.
    let mut sc = Scenario::new(Kind::Soft);
    sc.faults.interrupted_locks = 5;
    contenders(
        &mut sc,
        Policy::Classic,
        &[(0, 101), (0, 102), (0, 103)],
        40,
    );
    all.push((
        "kernel: with-lock-ex, three processes that remove the lock file as they leave",
        sc,
        40,
    ));
    // A `flock` lock on a filesystem without `flock` among soft holders:
    // its attempt may find a holder's marker at the lock path, which its
    // switch to a soft lock must leave there.
    let mut sc = Scenario::new(Kind::Soft);
    contenders(&mut sc, policy, &[(0, 102), (0, 103)], 80);
    for p in &mut sc.processes {
        p.hold_steps = 8;
    }
    contenders(&mut sc, policy, &[(0, 101)], 40);
    sc.processes[2].enosys_fallback = true;
    all.push((
        "soft: a flock lock on a filesystem without flock (ENOSYS) among soft holders",
        sc,
        0,
    ));
    // The with-lock-ex protocol where syscalls fail: a lock is kept only
    // on the file the path names, whatever the `stat` that compares them
    // answers.
    let mut sc = Scenario::new(Kind::Soft);
    sc.faults.syscall_one_in = 8;
    contenders(
        &mut sc,
        Policy::Classic,
        &[(0, 101), (0, 102), (0, 103), (0, 104)],
        40,
    );
    all.push((
        "kernel: with-lock-ex, four processes that remove the lock file, failing syscalls",
        sc,
        40,
    ));
    // A lease holder stopped past its lease whose release's calls may
    // fail: a release whose mark failed removes its marker by name,
    // touching it first, while peers may take it over.
    let mut sc = Scenario::new(Kind::Lease);
    sc.faults.syscall_one_in = 10;
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 40);
    sc.processes[0].hold_pause = LEASE + Duration::from_millis(50);
    all.push((
        "lease: a holder stopped past its lease, failing syscalls",
        sc,
        0,
    ));
    // A recordless holder that takes the lock whenever the path is empty,
    // beside breakers of a dead marker that may be killed: a breaker's
    // exchange may take the recordless marker aside and strand it.
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
    all.push((
        "soft: a recordless holder beside breakers of a dead marker",
        sc,
        25,
    ));
    // Mtimes to 2 s, change times to 10 ms, and a lease holder stopped
    // past its lease: the mark that begins its release changes only the
    // change time, which a peer's takeover does not compare, so a
    // takeover judged before the mark goes on while the holder releases.
    let mut sc = Scenario::new(Kind::Lease);
    sc.granularity = 2_000_000_000;
    sc.ctime_granularity = Some(10_000_000);
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 40);
    sc.processes[0].hold_pause = LEASE + Duration::from_millis(50);
    all.push((
        "lease: 2 s mtimes, 10 ms change times, a holder stopped past its lease",
        sc,
        0,
    ));
    crate::planned::push(&mut all, policy);
    // The recordless holder beside breakers of a dead marker, with two
    // contenders left to recover a killed breaker's names at once. The
    // breaker comes last, so that a kill byte reaches it.
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
    contenders(&mut sc, policy, &[(0, 104)], 12);
    all.push((
        "soft: a recordless holder beside breakers of a dead marker, two recoverers",
        sc.clone(),
        25,
    ));
    // The same, where the second recoverer's exchange that undoes a
    // restore over another file fails (planned).
    sc.faults.planned = &[crate::model::Planned {
        who: 2,
        call: "exchange a.lock.restore",
        nth: 2,
        errno: swaplock_core::Errno::NOSPC,
        made: false,
    }];
    all.push((
        "soft: a recordless holder beside breakers of a dead marker, two recoverers, a swap-back fails",
        sc,
        25,
    ));
    // Lifetime breaks, and a peer that only polls the lock path with
    // exclusive creates (a recordless holder that never gets in), so that
    // time passes while the others are stopped: a breaker stopped past
    // the lifetime right after its exchange (PROTOCOL 12.1 S8). Inode
    // numbers are never reused, so that a new marker is never taken for
    // the dead marker broken by age.
    let mut sc = Scenario::new(Kind::Soft);
    sc.faults.fresh_inodes = true;
    sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
    sc.lifetime = Some(Duration::from_secs(10));
    sc.initial_age = 20_000_000_000;
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 6);
    sc.processes.push(Process {
        host: 0,
        pid: 100,
        attempts: 400,
        hold_steps: 0,
        policy: Policy::Recordless,
        enosys_fallback: false,
        poll: crate::POLL,
        hold_pause: Duration::ZERO,
        beat: Duration::ZERO,
    });
    all.push(("soft: lifetime breaks, a poller lets time pass", sc, 40));
    // The recordless holder beside breakers of a dead marker, with a
    // contender for each part of a nested break that the holder's unlink
    // by name cuts short: one takes the dead marker over first, two break
    // it (the first of them comes first, so that a kill byte reaches it),
    // one recovers the killed breaker's names, and its exchange that undoes
    // a restore over another file fails (planned), one enters at the
    // emptied path. They poll long enough to wait out the grace period of
    // a placeholder at the lock path.
    let mut sc = Scenario::new(Kind::Soft);
    sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
    contenders(
        &mut sc,
        policy,
        &[(0, 101), (0, 104), (0, 102), (0, 103), (0, 105)],
        40,
    );
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
    sc.faults.planned = &[crate::model::Planned {
        who: 3,
        call: "exchange a.lock.restore",
        nth: 2,
        errno: swaplock_core::Errno::NOSPC,
        made: false,
    }];
    all.push((
        "soft: a recordless holder's unlink by name cuts a nested break short, a swap-back fails",
        sc,
        25,
    ));
    crate::planned::push_last(&mut all, policy);

    // Power cuts (PROTOCOL 13.2): the disk keeps what the journal
    // committed and each file's data as last synced; after a cut the
    // contenders start again with the PIDs and start times of the boot
    // before, which only the boot id tells apart. No empty marker may be
    // left at the lock path but in the window creating by name leaves,
    // and the old boot's records must be taken. ext4 has unnamed files
    // and renames exclusively (a failed link falls back to the write
    // name); a filesystem with neither creates markers by name.
    let ext4 = Faults {
        unnamed: true,
        exclusive_rename: true,
        power: true,
        ..Faults::default()
    };
    for (kind, dead, faults, name) in [
        (
            Kind::Soft,
            DEAD,
            ext4,
            "soft: power cuts, ext4, a dead holder's marker",
        ),
        (
            Kind::Marker,
            DEAD_V2,
            Faults {
                unnamed: false,
                ..ext4
            },
            "marker: power cuts, exclusive renames (no unnamed files), a dead holder's marker",
        ),
        (
            Kind::Lease,
            DEAD_V2,
            ext4,
            "lease: power cuts, ext4, a dead holder's marker",
        ),
        (
            Kind::Soft,
            DEAD,
            Faults {
                syscall_one_in: 25,
                ..ext4
            },
            "soft: power cuts, ext4, failing syscalls",
        ),
        (
            Kind::Marker,
            DEAD_V2,
            Faults {
                unnamed: false,
                exclusive_rename: false,
                ..ext4
            },
            "marker: power cuts, markers created by name (neither unnamed files nor exclusive renames)",
        ),
    ] {
        let mut sc = Scenario::new(kind);
        sc.files.push((LOCK.to_vec(), dead.to_vec()));
        sc.faults = faults;
        contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 8);
        all.push((name, sc, 50));
    }
    crate::planned::push_lost_replies(&mut all, policy);
    // Coarse file times (every file of the run has the same mtime), where
    // the first pin of p0 fails with EIO (a FUSE or NFS server's answer)
    // while its read succeeds: the judgement goes on unpinned, and the
    // takeover must not (7.5, 12.1 S18).
    let mut sc = Scenario::new(Kind::Soft);
    sc.files.push((LOCK.to_vec(), DEAD.to_vec()));
    sc.granularity = 1_000_000_000;
    sc.faults.planned = &[crate::model::Planned {
        who: 0,
        call: "pin",
        nth: 1,
        errno: swaplock_core::Errno::IO,
        made: false,
    }];
    contenders(
        &mut sc,
        policy,
        &[(0, 101), (0, 102), (0, 103), (0, 104)],
        8,
    );
    all.push((
        "soft: a dead holder's marker, coarse times, four contenders, a pin fails",
        sc,
        25,
    ));
    all
}

/// A process whose `flock` fails with `ENOSYS` and which stalls before
/// removing the file it created, and two soft peers that break markers
/// older than 2 s (so the stalled process's empty file is broken under
/// it): the seed's race of a fallback that unlinks a peer's marker.
pub fn enosys_fallback_race(policy: Policy) -> Scenario {
    let mut sc = Scenario::new(Kind::Soft);
    sc.lifetime = Some(Duration::from_secs(2));
    sc.processes.push(Process {
        host: 0,
        pid: 101,
        attempts: 4,
        hold_steps: 2,
        policy,
        enosys_fallback: true,
        poll: crate::POLL,
        hold_pause: Duration::ZERO,
        beat: Duration::ZERO,
    });
    contenders(&mut sc, policy, &[(0, 102), (0, 103)], 80);
    for p in &mut sc.processes[1..] {
        p.hold_steps = 8;
    }
    sc
}

/// Windows rules, a dead holder's Soft marker, three contenders that
/// release at once, and a [`Policy::Planter`] replacing break names with
/// symlinks to [`VICTIM`]: the seed's race of a restore that follows a
/// planted symlink. Inode numbers are never reused, to isolate that race.
pub fn windows_symlink_race(policy: Policy) -> Scenario {
    let mut sc = Scenario::new(Kind::Soft);
    sc.windows = true;
    sc.faults.fresh_inodes = true;
    sc.files.push((LOCK.to_vec(), b"999\nh1\n".to_vec()));
    sc.files.push((VICTIM.to_vec(), b"not a marker\n".to_vec()));
    contenders(&mut sc, policy, &[(0, 101), (0, 102), (0, 103)], 8);
    for p in &mut sc.processes {
        p.hold_steps = 0;
    }
    sc.processes.push(Process {
        host: 0,
        pid: 200,
        attempts: 40,
        hold_steps: 0,
        policy: Policy::Planter,
        enosys_fallback: false,
        poll: crate::POLL,
        hold_pause: Duration::ZERO,
        beat: Duration::ZERO,
    });
    sc
}
