//! What the simulated processes share, as the kernel sees it: the model
//! filesystem, each process's PID, host, start token, open descriptors
//! and claims, the monotonic clock, the source of random tokens, the
//! readable trace, and the log of [`Event`]s since the oracle last read
//! it. The world judges nothing; the oracle does.

use crate::cast::Scenario;
use crate::event::{Event, Log, What};
use crate::model::{Fs, Node};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use swaplock_core::decide::FileTime;
use swaplock_core::start::StartToken;
use swaplock_core::Pid;

/// One process, as the kernel knows it.
#[derive(Clone, Debug)]
pub(crate) struct Proc {
    pub(crate) pid: Pid,
    pub(crate) host: usize,
    pub(crate) alive: bool,
    pub(crate) start: StartToken,
    pub(crate) fds: BTreeSet<u32>,
    pub(crate) claims: BTreeSet<Vec<u8>>,
}

/// Everything the processes share.
pub(crate) struct World {
    /// The filesystem.
    pub(crate) fs: Fs,
    pub(crate) hosts: Vec<&'static str>,
    /// Each host's wall clock minus the filesystem's, in nanoseconds.
    pub(crate) wall_offsets: Vec<i128>,
    pub(crate) procs: Vec<Proc>,
    /// Start tokens handed out since the last boot.
    tokens: u64,
    /// Boots since the start (power cuts): each boot has its own boot id.
    pub(crate) boots: u64,
    /// Monotonic time, nanoseconds.
    pub(crate) time: u64,
    /// The source of random tokens.
    rng: SplitMix64,
    pub(crate) trace: String,
    tracing: bool,
    /// What the processes did since the oracle last looked.
    pub(crate) log: Log,
    /// Steps run.
    pub(crate) steps: u64,
    /// How many times a process entered its critical section.
    pub(crate) acquisitions: u64,
    /// Per planned fault of the scenario, how many of the calls it
    /// watches were made so far.
    pub(crate) planned_calls: Vec<u32>,
}

impl World {
    /// The world at the start of `scenario`; `seed` feeds the random tokens
    /// and the fault injector.
    pub(crate) fn new(scenario: &Scenario, seed: u64, tracing: bool) -> Self {
        let mut fs = Fs::new(1_700_000_000_000_000_000, scenario.granularity);
        if let Some(g) = scenario.ctime_granularity {
            fs.ctime_granularity = g.max(1);
        }
        fs.faults = scenario.faults;
        fs.windows = scenario.windows;
        fs.fault_rng = seed ^ 0x5151;
        for (n, content) in &scenario.files {
            let _ = fs.link_new(n, Node::File(content.clone()));
            let t = fs.clock - scenario.initial_age;
            let mtime = FileTime {
                sec: t.div_euclid(1_000_000_000) as i64,
                nsec: t.rem_euclid(1_000_000_000) as u32,
            };
            let _ = fs.set_mtime(n, mtime);
        }
        for (n, target) in &scenario.symlinks {
            let _ = fs.link_new(n, Node::Symlink(target.clone()));
        }
        // The starting files are on disk.
        fs.sync_all();
        let mut world = World {
            fs,
            hosts: scenario.hosts.clone(),
            wall_offsets: scenario.wall_offsets.clone(),
            procs: Vec::new(),
            tokens: 0,
            boots: 0,
            time: 1_000_000_000_000,
            rng: SplitMix64::new(seed),
            trace: String::new(),
            tracing,
            log: Log::default(),
            steps: 0,
            acquisitions: 0,
            planned_calls: Vec::new(),
        };
        for p in &scenario.processes {
            world.spawn(Pid::new(p.pid).expect("scenario PIDs are in range"), p.host);
        }
        world
    }

    pub(crate) fn next_random(&mut self) -> u64 {
        self.rng.next()
    }

    /// Adds a process, started now, on `host` as `pid`; returns its index.
    pub(crate) fn spawn(&mut self, pid: Pid, host: usize) -> usize {
        let start = self.new_token();
        self.procs.push(Proc {
            pid,
            host,
            alive: true,
            start,
            fds: BTreeSet::new(),
            claims: BTreeSet::new(),
        });
        self.procs.len() - 1
    }

    /// [`World::spawn`], with the start time `starttime` in this boot
    /// (a process of a boot after a power cut that started as early as a
    /// process of the boot before).
    pub(crate) fn spawn_started(&mut self, pid: Pid, host: usize, starttime: u64) -> usize {
        let who = self.spawn(pid, host);
        self.procs[who].start.low = starttime;
        who
    }

    /// Process `who` has exited (or been killed): the kernel closes its
    /// descriptors, and its PID is free.
    pub(crate) fn exit(&mut self, who: usize) {
        let fds: Vec<u32> = std::mem::take(&mut self.procs[who].fds)
            .into_iter()
            .collect();
        for fd in fds {
            self.fs.close(fd);
        }
        self.procs[who].alive = false;
    }

    fn new_token(&mut self) -> StartToken {
        self.tokens += 1;
        StartToken::linux(self.boot_id(), self.tokens)
    }

    /// This boot's id.
    pub(crate) fn boot_id(&self) -> u128 {
        0x5eed + u128::from(self.boots)
    }

    /// The machine boots again after a power cut: a new boot id, and start
    /// times counted from the boot (a process started as early in this
    /// boot as one of the last has its start time: only the boot id tells
    /// them apart).
    pub(crate) fn reboot(&mut self) {
        self.boots += 1;
        self.tokens = 0;
    }

    /// Appends a line about process `who` to the trace, when tracing.
    pub(crate) fn note(&mut self, who: usize, what: std::fmt::Arguments<'_>) {
        if self.tracing {
            let p = &self.procs[who];
            let _ = writeln!(
                self.trace,
                "t={:>6}ms p{who} (pid {}@{}): {what}",
                self.time / 1_000_000,
                p.pid,
                self.hosts[p.host]
            );
        }
    }

    /// Appends a line about the machine (no process) to the trace, when
    /// tracing.
    pub(crate) fn note_machine(&mut self, what: std::fmt::Arguments<'_>) {
        if self.tracing {
            let _ = writeln!(
                self.trace,
                "t={:>6}ms machine: {what}",
                self.time / 1_000_000
            );
        }
    }

    /// Records that process `who` did `what`, now.
    pub(crate) fn record(&mut self, who: usize, what: What) {
        let at = self.time;
        self.log.events.push(Event { who, at, what });
    }
}

/// splitmix64, the random source of the world's tokens and of the
/// random scheduler: fast, and a function of its seed alone.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A name, for traces and messages. Formatted only when shown: every
/// syscall passes its names to a trace line that is written only when
/// the run traces.
pub(crate) fn name(n: &[u8]) -> Shown<'_> {
    Shown(n)
}

/// Bytes shown as (lossy) UTF-8; see [`name`].
#[derive(Clone, Copy)]
pub(crate) struct Shown<'a>(&'a [u8]);

impl std::fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&String::from_utf8_lossy(self.0), f)
    }
}

impl std::fmt::Debug for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&String::from_utf8_lossy(self.0), f)
    }
}
