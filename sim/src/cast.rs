//! What a run starts from, as types: the directory's files, the hosts
//! and their clocks, the faults, and the processes that contend
//! ([`Scenario`], [`Process`], [`Policy`]); the catalogue that fills them
//! in is [`crate::scenario`].

use crate::model::Faults;
use std::time::Duration;
use swaplock_core::soft::Kind;

/// The lock file's name in the model directory.
pub const LOCK: &[u8] = b"a.lock";

/// Which protocol a contender runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// swaplock's protocol, from `swaplock-core`.
    Ours,
    /// The protocol as it stood before the seed's fixes ([`naive`](crate::naive)).
    Naive(Flaws),
    /// Not a contender: a hostile process that, `attempts` times, lists the
    /// directory and replaces every break name it sees with a symlink to
    /// [`VICTIM`].
    Planter,
    /// Not a contender of ours: a holder that never writes its marker (an
    /// older filelock, or any tool that creates an empty lock file). It
    /// creates the lock file exclusively, holds it for [`RECORDLESS_HOLD`]
    /// (past the malformed grace period) and removes it. An empty marker
    /// names nobody and is never judged stale (I10).
    Recordless,
    /// Not a contender of ours: a holder by name (a shell's `noclobber`
    /// redirection, a tool that touches a lock file). It creates the lock
    /// file exclusively and closes it at once, trying up to `attempts`
    /// times a poll apart, holds the empty file by name for
    /// [`RECORDLESS_HOLD`] and unlinks it by name. Under Windows rules no
    /// handle keeps its file from being opened to move: only a breaker's
    /// check that the file it opened is the one it judged keeps the file.
    ByName,
    /// Not a soft contender: a with-lock-ex process. It takes the kernel
    /// lock on the lock file with the shipped driver
    /// ([`kernel::acquire`](swaplock_core::kernel::acquire)), trying
    /// `attempts` times a poll apart, holds it for its hold steps, and
    /// then removes the lock file while it still holds it, as a
    /// with-lock-ex user tidies up, once
    /// [`kernel::check_remove`](swaplock_core::kernel::check_remove)
    /// finds the path naming the file it locked.
    Classic,
}

/// Which pre-fix behaviours a [`Policy::Naive`] contender has switched on
/// (all of them by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flaws {
    /// Judge without a pin and accept an mtime no newer than the one read.
    pub unpinned: bool,
    /// Key the malformed watch on (mtime, inode) only.
    pub watch_without_ctime: bool,
}

impl Default for Flaws {
    fn default() -> Self {
        Flaws {
            unpinned: true,
            watch_without_ctime: true,
        }
    }
}

/// How long a [`Policy::Recordless`] holder holds its empty marker.
pub const RECORDLESS_HOLD: Duration = Duration::from_secs(3);

/// The file a [`Policy::Planter`] points its symlinks at: no contender
/// ever judges it, so none may ever give it another name.
pub const VICTIM: &[u8] = b"victim";

/// The lease duration of lease scenarios.
pub const LEASE: Duration = Duration::from_secs(1);

/// A simulated process to start.
#[derive(Clone, Debug)]
pub struct Process {
    /// Its host (an index into [`Scenario::hosts`]).
    pub host: usize,
    /// Its PID on that host.
    pub pid: u32,
    /// How many times it tries to take the lock (one attempt each, with a
    /// poll pause between).
    pub attempts: u32,
    /// How many steps it stays in its critical section.
    pub hold_steps: u32,
    /// The protocol it runs.
    pub policy: Policy,
    /// Whether it starts as a `flock` lock on a filesystem where `flock`
    /// fails with `ENOSYS` (Android storage): it creates the lock file,
    /// stalls for [`FALLBACK_STALL`], removes the file it created, and
    /// falls back to a soft lock (PROTOCOL 7.17).
    pub enosys_fallback: bool,
    /// The pause between its attempts: [`POLL`](crate::POLL) for a
    /// scenario's contenders.
    pub poll: Duration,
    /// How long it stays stopped in its critical section (say by
    /// `SIGSTOP`), with no heartbeat, in poll-sized steps so that peers
    /// run meanwhile: past a lease or a lifetime, peers take its marker
    /// over as they may, and it then releases while they do.
    pub hold_pause: Duration,
    /// A lease holder's pause before each heartbeat of its critical
    /// section (zero: none, the heartbeats follow one another).
    pub beat: Duration,
}

/// How long a [`Process::enosys_fallback`] process stalls between creating
/// the lock file and removing it: past a peer's patience.
pub const FALLBACK_STALL: Duration = Duration::from_secs(3);

/// A starting state and the processes that contend.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The kind of soft lock.
    pub kind: Kind,
    /// Host names.
    pub hosts: Vec<&'static str>,
    /// Each host's wall clock minus the filesystem's, in nanoseconds.
    pub wall_offsets: Vec<i128>,
    /// Files present at the start: name and content.
    pub files: Vec<(Vec<u8>, Vec<u8>)>,
    /// Symlinks present at the start: name, target.
    pub symlinks: Vec<(Vec<u8>, Vec<u8>)>,
    /// The contenders.
    pub processes: Vec<Process>,
    /// Faults the filesystem injects.
    pub faults: Faults,
    /// File-time granularity in nanoseconds.
    pub granularity: i128,
    /// Change-time granularity in nanoseconds, where it is finer than
    /// [`Scenario::granularity`]; `None`: the same.
    pub ctime_granularity: Option<i128>,
    /// Break markers older than this by their mtime (Soft and Marker).
    pub lifetime: Option<Duration>,
    /// How old the starting files are, in nanoseconds (their mtime is set
    /// back by this much).
    pub initial_age: i128,
    /// Whether the filesystem follows Windows rules (see [`model`]).
    pub windows: bool,
}

impl Scenario {
    /// A scenario on one host `h1`, exact file times, no faults.
    pub fn new(kind: Kind) -> Self {
        Scenario {
            kind,
            hosts: vec!["h1"],
            wall_offsets: vec![0],
            files: Vec::new(),
            symlinks: Vec::new(),
            processes: Vec::new(),
            faults: Faults::default(),
            granularity: 1,
            ctime_granularity: None,
            lifetime: None,
            initial_age: 0,
            windows: false,
        }
    }
}

/// Adds contenders running `policy` at `(host, pid)`, each trying the lock
/// `attempts` times and holding it for two steps.
pub fn contenders(sc: &mut Scenario, policy: Policy, hosts_pids: &[(usize, u32)], attempts: u32) {
    for &(host, pid) in hosts_pids {
        sc.processes.push(Process {
            host,
            pid,
            attempts,
            hold_steps: 2,
            policy,
            enosys_fallback: false,
            poll: crate::POLL,
            hold_pause: Duration::ZERO,
            beat: Duration::ZERO,
        });
    }
}
