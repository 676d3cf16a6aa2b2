//! The simulator of the read-write lock (PROTOCOL 16): several readers and
//! writers, on one host's disk or on two hosts of a file server, run the
//! shipped driver of `swaplock-core`
//! ([`Instance`](swaplock_core::rw::driver::Instance)) over a model
//! filesystem through the same [`Files`](swaplock_core::rw::files::Files)
//! trait the POSIX adapter implements. Each process runs on its own
//! coroutine and suspends before every file operation, so the scheduler
//! decides whose operation runs next and how the model answers it, and may
//! kill or stop any process, suspend a host, or crash the disk's host,
//! between any two operations. Everything is a function of the schedule:
//! a seed, or a fuzzer's or a kept schedule's bytes, replays exactly.
//!
//! The model applies exclusive create, no-replace link, rename over,
//! unlink, in-place write, listing and lookup; serves stale listings and
//! stale lookups from each host's cache for a bounded time; loses the
//! newest unsynced name operations and unsynced data in a crash; and keeps
//! one monotonic clock per host, which a suspend stops ([`fs`]). The
//! oracle ([`oracle`]) judges after every step: fencing tokens strictly
//! increase per epoch, no writer beside another holder but one evicted
//! while stopped (and then the fencing token orders them), no punctual
//! member evicted, writers enter before readers drain; and once a run is
//! over, a fresh writer alone is granted within its bound and leaves
//! nothing behind (never a wedge, nothing lost).
//!
//! | module | what it holds |
//! |---|---|
//! | [`cast`] | what a run starts from: hosts, processes, timing, faults, the starting log |
//! | [`scenario`] | the catalogue of scenarios |
//! | `fs` | the model filesystem: server, crash journal, client caches |
//! | `world` | the shared state: the filesystem, processes, clocks, tokens, trace, events |
//! | `files` | the seam: each file operation suspended, applied and recorded |
//! | `actors` | the processes' lives on the shipped driver |
//! | `oracle` | the invariants |
//! | [`runtime`] | coroutines, [`Sim`], the progress check |
//! | [`schedule`] | the choosers and the loops that run them |
//! | [`script`], [`directed`] | directed schedules, steered step by step and kept as bytes |
//! | [`mutants`] | the kept schedules, the naive policy and the mutation run |

mod actors;
pub mod cast;
pub mod directed;
mod files;
mod fs;
pub mod mutants;
mod oracle;
pub mod runtime;
pub mod scenario;
pub mod schedule;
pub mod script;
mod world;

pub use cast::{Faults, Process, Role, Scenario, Start, Timing};
pub use runtime::{Fault, Progress, Sim};
pub use scenario::{index_of, scenarios};
pub use schedule::{
    apply, explore, run, run_seed, Action, Chooser, Explorer, FromBytes, Outcome, Random, Recording,
};
