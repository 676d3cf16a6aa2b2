//! The catalogue of read-write scenarios. A kept schedule's first byte is
//! its scenario's index here: new scenarios go at the end.

use super::cast::{Faults, Process, Role, Scenario, Start, Timing};
use std::time::Duration;
use swaplock_core::rw::Mode;

const MS: fn(u64) -> Duration = Duration::from_millis;

/// A participant on `host`.
fn part(host: usize, pid: u32, mode: Mode, rounds: u32, hold_ms: u64, start_ms: u64) -> Process {
    Process {
        host,
        pid,
        start: MS(start_ms),
        role: Role::Participant {
            mode,
            rounds,
            patience: 60,
            hold: MS(hold_ms),
        },
        timing: None,
    }
}

/// [`part`], giving up after `patience` polls.
fn patient(mut p: Process, polls: u32) -> Process {
    if let Role::Participant { patience, .. } = &mut p.role {
        *patience = polls;
    }
    p
}

/// A scenario on one host's local disk, with these processes.
fn local(name: &'static str, processes: Vec<Process>, faults: Faults) -> Scenario {
    Scenario {
        name,
        hosts: vec!["a"],
        disk_host: Some(0),
        cache_for: Duration::ZERO,
        retransmits: false,
        wcc: true,
        processes,
        timing: Timing::DEFAULT,
        faults,
        start: Start::Empty,
        progress_on: None,
    }
}

/// A scenario on a file server, two client hosts caching for 300 ms (less
/// than the threshold, as NFS's `acdirmax` of 60 s is less than filelock's
/// 90 s: the protocol's timing assumption), whose link replies may be lost and retransmitted, and whose
/// change replies carry the directory's attributes.
fn nfs(name: &'static str, processes: Vec<Process>, faults: Faults) -> Scenario {
    Scenario {
        name,
        hosts: vec!["a", "b"],
        disk_host: None,
        cache_for: MS(300),
        retransmits: true,
        wcc: true,
        processes,
        timing: Timing::DEFAULT,
        faults,
        start: Start::Empty,
        progress_on: None,
    }
}

/// Every scenario, in the order kept schedules index them.
pub fn scenarios() -> Vec<Scenario> {
    use Mode::{Read, Write};
    let kill = Faults {
        kills: 1,
        ..Faults::default()
    };
    vec![
        // 0: two writers, twice each; one may be killed.
        local(
            "two-writers",
            vec![part(0, 11, Write, 2, 200, 0), part(0, 12, Write, 2, 200, 0)],
            kill,
        ),
        // 1: readers and a writer; kills and pauses.
        local(
            "readers-and-a-writer",
            vec![
                part(0, 11, Read, 2, 250, 0),
                part(0, 12, Read, 2, 250, 20),
                part(0, 13, Write, 2, 150, 10),
            ],
            Faults {
                kills: 1,
                pauses: 1,
                ..Faults::default()
            },
        ),
        // 2: overlapping readers, five times each, and a writer that must
        // get in before they are done (RW5).
        local(
            "a-writer-behind-overlapping-readers",
            vec![
                part(0, 11, Read, 5, 300, 0),
                part(0, 12, Read, 5, 300, 150),
                patient(part(0, 13, Write, 1, 100, 100), 20),
            ],
            Faults::default(),
        ),
        // 3: the disk's host crashes (C-RW5).
        local(
            "a-host-crash",
            vec![part(0, 11, Write, 2, 150, 0), part(0, 12, Read, 2, 150, 0)],
            Faults {
                crashes: 1,
                ..Faults::default()
            },
        ),
        // 4: a long-lived lock whose gen/ an operator removes (C-RW7).
        Scenario {
            progress_on: Some(0),
            ..local(
                "gen-removed-under-a-long-lived-lock",
                vec![
                    part(0, 11, Write, 3, 100, 0),
                    Process {
                        host: 0,
                        pid: 12,
                        start: MS(400),
                        role: Role::RemoveGen,
                        timing: None,
                    },
                ],
                Faults::default(),
            )
        },
        // 5: a crashed writer asking a lease of 1e+20 (C-RW8).
        Scenario {
            start: Start::DeadWriter { lease: 1e20 },
            ..local(
                "a-dead-writer-asking-for-ever",
                vec![part(0, 11, Read, 1, 100, 0)],
                Faults::default(),
            )
        },
        // 6: two hosts over NFS: caches, retransmits, kills, pauses,
        // suspends.
        nfs(
            "two-hosts",
            vec![
                part(0, 11, Write, 2, 150, 0),
                part(1, 21, Read, 2, 200, 0),
                part(1, 22, Write, 1, 150, 30),
            ],
            Faults {
                kills: 1,
                pauses: 1,
                suspends: 1,
                ..Faults::default()
            },
        ),
        // 7: a client that saw gen/ empty joins a live log past its first
        // window while a reader of the other host holds (C-RW1).
        Scenario {
            start: Start::LiveLog {
                at: 200,
                blind: Some(1),
            },
            wcc: false,
            ..nfs(
                "a-blind-client-joins-a-live-log",
                vec![part(0, 11, Read, 1, 400, 0), part(1, 21, Write, 1, 100, 5)],
                Faults::default(),
            )
        },
        // 8: many short holds on two hosts, through caches that their own
        // changes do not refresh: HEAD and listings behind (C-RW2, C-RW3).
        Scenario {
            wcc: false,
            ..nfs(
                "busy-log-through-caches",
                vec![
                    part(0, 11, Write, 4, 50, 0),
                    part(0, 12, Read, 4, 50, 0),
                    part(1, 21, Read, 4, 50, 0),
                    part(1, 22, Write, 4, 50, 0),
                ],
                kill,
            )
        },
        // 9: a committer stopped between its temporary and its link while a
        // peer sweeps (C-RW6).
        local(
            "a-stopped-committer",
            vec![part(0, 11, Write, 2, 100, 0), part(0, 12, Read, 3, 100, 0)],
            Faults {
                pauses: 1,
                ..Faults::default()
            },
        ),
        // 10: a holder configured with a longer threshold, which its record
        // asks as its lease, beats slower than a contender's threshold
        // (RW7).
        local(
            "a-holder-asking-a-longer-lease",
            vec![
                Process {
                    timing: Some(Timing {
                        heartbeat: MS(500),
                        threshold: MS(1500),
                        ..Timing::DEFAULT
                    }),
                    ..part(0, 11, Write, 1, 2000, 0)
                },
                patient(part(0, 12, Read, 1, 100, 50), 100),
            ],
            Faults::default(),
        ),
        // 11: a participant stopped across a whole window of commits, on a
        // host whose cache of gen/ outlives the stop (RW11); the cache stays
        // shorter than the threshold, as NFS's acdirmax (60 s) is shorter
        // than filelock's (90 s).
        Scenario {
            cache_for: MS(5000),
            wcc: false,
            timing: Timing {
                heartbeat: MS(1000),
                threshold: MS(6000),
                max_lease: MS(6000),
                stop: Some(MS(3000)),
                ..Timing::DEFAULT
            },
            ..nfs(
                "a-participant-stopped-across-a-window",
                vec![
                    part(0, 11, Write, 30, 0, 0),
                    part(0, 12, Write, 30, 0, 0),
                    part(1, 21, Read, 3, 50, 0),
                ],
                Faults {
                    pauses: 1,
                    kills: 1,
                    ..Faults::default()
                },
            )
        },
        // 12: a participant stopped between its read of the log and its
        // commit while an operator removes gen/ and others start a new log
        // (RW10).
        local(
            "a-participant-stopped-while-gen-is-removed",
            vec![
                part(0, 11, Write, 1, 0, 0),
                part(0, 12, Write, 1, 100, 150),
                Process {
                    host: 0,
                    pid: 13,
                    start: MS(300),
                    role: Role::RemoveGen,
                    timing: None,
                },
                part(0, 14, Read, 1, 5000, 350),
                part(0, 15, Read, 1, 5000, 400),
            ],
            Faults {
                pauses: 1,
                ..Faults::default()
            },
        ),
        // 13: two readers that start a new log together, and a reader that
        // comes back again and again, on a threshold long enough for a
        // window of commits to pass while a committer is stopped.
        Scenario {
            timing: Timing {
                heartbeat: Duration::from_secs(10),
                threshold: Duration::from_secs(30),
                poll: MS(50),
                max_lease: Duration::from_secs(60),
                stop: None,
            },
            ..local(
                "a-commit-stopped-after-its-link-for-a-window",
                vec![
                    part(0, 21, Read, 1, 0, 0),
                    part(0, 22, Read, 1, 0, 0),
                    part(0, 23, Read, 40, 0, 10),
                ],
                Faults::default(),
            )
        },
        // 14: C-RW1 under an epoch that holds no token: scenario 7, the
        // blind client's cache showing HEAD, which filelock never binds
        // there.
        Scenario {
            start: Start::TornLiveLog {
                at: 200,
                blind: Some(1),
            },
            wcc: false,
            ..nfs(
                "a-blind-client-joins-a-live-log-whose-epoch-is-torn",
                vec![part(0, 11, Read, 1, 400, 0), part(1, 21, Write, 1, 100, 5)],
                Faults::default(),
            )
        },
    ]
}

/// The index of the scenario named `name`.
pub fn index_of(name: &str) -> Option<usize> {
    scenarios().iter().position(|s| s.name == name)
}
