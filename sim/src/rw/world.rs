//! What the simulated participants share, as the kernels and the file
//! server see it: the model filesystem, each process's host, liveness and
//! wake time, the hosts' monotonic clocks, the random source, what each
//! process is about to do, the readable trace, and the [`Event`]s since
//! the oracle last read them. The world judges nothing.

use super::fs::{Fs, Key};
use crate::world::SplitMix64;
use std::fmt::Write as _;
use swaplock_core::rw::Mode;

/// Simulated time that one file operation takes, in nanoseconds.
pub(crate) const STEP: u64 = 1_000_000;

/// The simulated time a run starts at.
pub(crate) const START: u64 = 10_000_000_000;

/// What a process's next step does, as far as the scheduler must know: the
/// operations the model may answer in more than one way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// Not started yet, or a ghost step.
    Start,
    /// A read (a lookup by name) of a file.
    Read(Key),
    /// The open of a holder record's rewrite (a lookup by name).
    Open(Key),
    /// A listing.
    List(usize),
    /// A `link` call to `to`.
    Link(Key),
    /// Anything the model answers one way.
    Other,
}

/// One process, as the kernel knows it.
#[derive(Clone, Debug)]
pub(crate) struct Proc {
    pub(crate) pid: u32,
    pub(crate) host: usize,
    pub(crate) alive: bool,
    /// Not runnable before this time (asleep, stopped, its host
    /// suspended).
    pub(crate) wake: u64,
    /// What its next step does.
    pub(crate) pending: Op,
    /// Since when it has been runnable without being run.
    pub(crate) ready_since: u64,
    /// How long it waited, runnable, since its record was last written.
    pub(crate) late: u64,
    /// The files it has open.
    pub(crate) open: Vec<u64>,
}

/// What a process did, for the oracle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum What {
    /// It began an acquisition as `token`, its record published.
    Published { token: [u8; 16], mode: Mode },
    /// A poll of its acquisition began.
    PollStart,
    /// It was granted at `generation`.
    Granted { generation: u128 },
    /// Its heartbeat found the hold lost: it holds no more.
    Compromised,
    /// It ends its hold (release) or its wait (gave up after `polls`), and
    /// leaves the log.
    Leaving { gave_up: bool },
    /// Its leave is over.
    Left,
    /// Its acquisition failed with an error (then it leaves).
    Failed(String),
    /// It wrote the holder record `holders/<token>` (created or rewrote
    /// the file named so).
    WroteRecord([u8; 16]),
    /// A link of its landed at `gen/<name>`, in this incarnation of
    /// `gen/`.
    Linked(Vec<u8>, u64),
    /// It removed `holders/<name>`.
    RemovedRecord(Vec<u8>),
    /// It removed `gen/<name>`.
    RemovedGeneration(Vec<u8>),
    /// Its host answered it from a cache what the server would not have.
    StaleAnswer,
    /// It was killed.
    Killed,
    /// It was stopped (SIGSTOP) or its host suspended, until `until`.
    Stopped { until: u64 },
    /// It removed `gen/` (an operator): every hold ends there, by design.
    RemovedLog,
}

/// One thing a process did.
#[derive(Clone, Debug)]
pub(crate) struct Event {
    pub(crate) who: usize,
    pub(crate) what: What,
}

/// Everything the processes share.
pub(crate) struct World {
    pub(crate) fs: Fs,
    pub(crate) hosts: Vec<&'static str>,
    /// The host whose local disk holds the files (a crash of it loses
    /// what was not synced), if any; otherwise a file server.
    pub(crate) disk_host: Option<usize>,
    /// Per host, what its monotonic clock reads minus the world's time
    /// (a suspend stops a host's clock).
    pub(crate) mono: Vec<i128>,
    pub(crate) procs: Vec<Proc>,
    /// Simulated time, nanoseconds.
    pub(crate) time: u64,
    rng: SplitMix64,
    pub(crate) trace: String,
    tracing: bool,
    pub(crate) events: Vec<Event>,
    pub(crate) steps: u64,
    /// Which of its possible answers the step now running gives.
    pub(crate) variant: u8,
    /// Whether a landed link may be answered `EEXIST` (an NFS retransmit).
    pub(crate) retransmits: bool,
    /// Whether faults (caches, retransmits) are over: the progress check.
    pub(crate) calm: bool,
}

impl World {
    /// A world of `hosts` over `fs`, whose random tokens come from `seed`.
    pub(crate) fn new(fs: Fs, hosts: Vec<&'static str>, seed: u64, tracing: bool) -> Self {
        let n = hosts.len();
        World {
            fs,
            hosts,
            disk_host: None,
            mono: (0..n)
                .map(|h| 1_000_000_000_000 * (h as i128 + 1))
                .collect(),
            procs: Vec::new(),
            time: START,
            rng: SplitMix64::new(seed ^ 0x7277),
            trace: String::new(),
            tracing,
            events: Vec::new(),
            steps: 0,
            variant: 0,
            retransmits: false,
            calm: false,
        }
    }

    /// Adds a process on `host`; its index.
    pub(crate) fn spawn(&mut self, pid: u32, host: usize) -> usize {
        self.procs.push(Proc {
            pid,
            host,
            alive: true,
            wake: self.time,
            pending: Op::Start,
            ready_since: self.time,
            late: 0,
            open: Vec::new(),
        });
        self.procs.len() - 1
    }

    /// Process `who` closes its descriptor of `ino`.
    pub(crate) fn close(&mut self, who: usize, ino: u64) {
        let open = &mut self.procs[who].open;
        if let Some(at) = open.iter().position(|&i| i == ino) {
            open.swap_remove(at);
            self.fs.unpin(ino);
        }
    }

    /// Process `who` is gone: the kernel closes its descriptors.
    pub(crate) fn exit(&mut self, who: usize) {
        self.procs[who].alive = false;
        for ino in std::mem::take(&mut self.procs[who].open) {
            self.fs.unpin(ino);
        }
    }

    /// 128 random bits.
    pub(crate) fn token(&mut self) -> [u8; 16] {
        let (a, b) = (self.rng.next(), self.rng.next());
        let mut t = [0u8; 16];
        t[..8].copy_from_slice(&a.to_be_bytes());
        t[8..].copy_from_slice(&b.to_be_bytes());
        t
    }

    /// Host `h`'s monotonic clock.
    pub(crate) fn mono(&self, h: usize) -> u64 {
        (i128::from(self.time) + self.mono[h]).max(0) as u64
    }

    /// Appends a line about process `who` to the trace, when tracing.
    pub(crate) fn note(&mut self, who: usize, what: std::fmt::Arguments<'_>) {
        if self.tracing {
            let p = &self.procs[who];
            let _ = writeln!(
                self.trace,
                "t={:>7.1}ms p{who} ({}@{}): {what}",
                (self.time - START) as f64 / 1e6,
                p.pid,
                self.hosts[p.host]
            );
        }
    }

    /// Appends a line about the world to the trace, when tracing.
    pub(crate) fn say(&mut self, what: std::fmt::Arguments<'_>) {
        if self.tracing {
            let _ = writeln!(
                self.trace,
                "t={:>7.1}ms {what}",
                (self.time - START) as f64 / 1e6
            );
        }
    }

    /// Whether traces are kept.
    pub(crate) fn tracing(&self) -> bool {
        self.tracing
    }

    /// Records that process `who` did `what`, now.
    pub(crate) fn record(&mut self, who: usize, what: What) {
        self.events.push(Event { who, what });
    }

    /// How many answers process `i`'s next step may give: two where a
    /// host's cache answers otherwise than the server (answer `1`: it
    /// revalidates first), or a landed link may be answered `EEXIST`
    /// (answer `1`); one otherwise.
    pub(crate) fn alternatives(&self, i: usize) -> u8 {
        if self.calm {
            return 1;
        }
        let p = &self.procs[i];
        let h = p.host;
        let two = match &p.pending {
            Op::Read(k) | Op::Open(k) => self.fs.stale_lookup(h, k).is_some(),
            Op::List(d) => self.fs.stale_listing(h, *d).is_some(),
            Op::Link(to) => self.retransmits && !self.fs.names.contains_key(to),
            Op::Start | Op::Other => false,
        };
        1 + u8::from(two)
    }
}
