//! What a run of the read-write lock starts from, as types: the hosts and
//! where the files live, the processes and their lives, the timing, the
//! faults the schedule may inject, and the state the log starts in
//! ([`Scenario`]); [`super::scenario`] fills them in.

use std::time::Duration;
use swaplock_core::rw::Mode;

/// The intervals every participant of a scenario runs on (filelock's
/// ratios, scaled down so that a run is a few thousand steps).
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// How often a holder refreshes its record.
    pub heartbeat: Duration,
    /// How long a record must stay unchanged before its holder is stale
    /// (and the lease our records ask).
    pub threshold: Duration,
    /// The pause between polls.
    pub poll: Duration,
    /// The longest lease honoured.
    pub max_lease: Duration,
    /// How long a stop (`SIGSTOP`) or a host's suspend lasts, when not
    /// past every threshold and lease ([`Timing::pause`]).
    pub stop: Option<Duration>,
}

impl Timing {
    /// The default: heartbeat 100 ms, threshold 400 ms, poll 50 ms, leases
    /// honoured up to 2 s.
    pub const DEFAULT: Timing = Timing {
        heartbeat: Duration::from_millis(100),
        threshold: Duration::from_millis(400),
        poll: Duration::from_millis(50),
        max_lease: Duration::from_secs(2),
        stop: None,
    };

    /// How long a pause (`SIGSTOP`) or a host's suspend lasts: past any
    /// threshold and lease the scenarios use, unless [`Timing::stop`] says.
    pub fn pause(&self) -> Duration {
        self.stop.unwrap_or(self.max_lease + self.threshold * 2)
    }
}

/// What a process does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A participant of ours: `rounds` acquisitions in `mode`, each
    /// given up after `patience` polls, each held for `hold` with
    /// heartbeats.
    Participant {
        /// Read or write.
        mode: Mode,
        /// How many acquisitions, one after another.
        rounds: u32,
        /// Polls before an acquisition gives up.
        patience: u32,
        /// How long each hold lasts.
        hold: Duration,
    },
    /// An operator who removes `gen/` (`rm -rf`), once.
    RemoveGen,
}

/// A simulated process to start.
#[derive(Clone, Copy, Debug)]
pub struct Process {
    /// Its host (an index into [`Scenario::hosts`]).
    pub host: usize,
    /// Its PID on that host.
    pub pid: u32,
    /// When it begins, after the run's start.
    pub start: Duration,
    /// What it does.
    pub role: Role,
    /// Its own intervals, where they differ from the scenario's (a peer
    /// configured with a longer threshold writes a longer lease).
    pub timing: Option<Timing>,
}

/// What the schedule may inject, and how often at most in one run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    /// `SIGKILL` of a process between two of its file operations.
    pub kills: u32,
    /// `SIGSTOP` of a process for [`Timing::pause`].
    pub pauses: u32,
    /// A host suspended for [`Timing::pause`] (its monotonic clock stops).
    pub suspends: u32,
    /// A crash of the host whose disk holds the files, losing what was not
    /// synced.
    pub crashes: u32,
}

/// The state the log's directory starts in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Start {
    /// Nothing.
    Empty,
    /// A live log past its first window: generations `at − 63 ..= at`, a
    /// bound HEAD, a valid epoch. `blind`: this host last revalidated
    /// `gen/` after its epoch was made and before anything was committed
    /// (its listing shows no generation, its lookup of HEAD nothing), as a
    /// client that looked while the log was new and has not looked since
    /// (C-RW1).
    LiveLog {
        /// The newest generation.
        at: u128,
        /// The host whose caches are that old.
        blind: Option<usize>,
    },
    /// [`Start::LiveLog`] under an epoch that holds no token (its creator
    /// killed before its write), as swaplock participants run it: HEAD
    /// holds the epoch's bytes (none) and the newest snapshot, which
    /// filelock never writes or trusts there. `blind`'s view shows HEAD
    /// and no generation, as a listing cached while the log was new (the
    /// confirmation's HEAD standing, nothing linked) would, its read of
    /// HEAD reaching today's bytes (C-RW1 under a torn epoch).
    TornLiveLog {
        /// The newest generation.
        at: u128,
        /// The host whose listing is that old.
        blind: Option<usize>,
    },
    /// A log at generation 1 naming a dead writer whose record asks a
    /// lease of `lease` seconds (C-RW8: filelock honours any).
    DeadWriter {
        /// The lease its record asks.
        lease: f64,
    },
}

/// A starting state and the processes that run from it.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Its name, which kept schedules are filed under.
    pub name: &'static str,
    /// Host names.
    pub hosts: Vec<&'static str>,
    /// The host whose local disk holds the files, if they are local to
    /// one (a crash of it may lose what was not synced); else a file
    /// server that keeps everything it answered.
    pub disk_host: Option<usize>,
    /// How long a host's client caches may answer instead of the server
    /// (zero: no caches).
    pub cache_for: Duration,
    /// Whether a link that landed may be answered `EEXIST`.
    pub retransmits: bool,
    /// Whether the file server's replies to a change carry the
    /// directory's attributes before and after (NFSv3 `wcc_data`, NFSv4
    /// `change_info4`), so that a client's own change revalidates its
    /// caches of the directory. Without them (servers may omit them) a
    /// client trusts its own reply for the name it changed and keeps its
    /// view of the rest until it expires.
    pub wcc: bool,
    /// The processes.
    pub processes: Vec<Process>,
    /// The intervals.
    pub timing: Timing,
    /// What the schedule may inject.
    pub faults: Faults,
    /// The state the directory starts in.
    pub start: Start,
    /// The process whose lock (its memory, its prepared directories) the
    /// progress check's fresh acquisition runs on, if it is still alive at
    /// the end: a long-lived instance (C-RW7). Otherwise a new lock.
    pub progress_on: Option<usize>,
}
