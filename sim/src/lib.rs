//! A deterministic simulator of the soft-lock protocol.
//!
//! Several processes, on one or two hosts, run the real protocol code of
//! `swaplock-core` (its [`acquire`](swaplock_core::soft::acquire) driver
//! and [`release`](swaplock_core::soft::release)) over a model filesystem
//! ([`model::Fs`]) through the same [`Os`](swaplock_core::soft::Os) traits
//! the Linux adapter implements. Each process runs on its own coroutine and
//! suspends before every syscall, so a scheduler decides which process's
//! next syscall runs, and may kill any process between any two of its
//! syscalls. Everything is a function of the schedule: a seed (or a
//! fuzzer's bytes) replays exactly.
//!
//! The model only applies operations and records what they did; the
//! invariants are judged apart, from those records, after every step: at
//! most one live process believes it holds the lock, no live holder's
//! marker is removed, a holder's marker is linked while it holds, and a
//! release that returns `Ok` leaves no marker of its own naming it.
//!
//! Never a wedge: once a run is over (no process can step, no violation,
//! within the timing assumption), every process exits and a fresh
//! contender of our policy, with a new PID, on the host the record at the
//! lock path names, with injected failures off, runs alone. It must take
//! the lock within `wait / 500 ms + 5` attempts (its polls are 500 ms
//! apart), `wait` being the longest that
//! applies: none for an empty path or a gone owner's record, the 2 s
//! malformed grace period, the lifetime (plus the hosts' clock offsets).
//! Exempt is what the protocol must never evict, as the run left it: an
//! empty marker, the strict sentinel, an unknown protocol 2 mode (I10), a
//! record of a host the scenario lacks or a live holder (I8), and any
//! marker on a filesystem without exchange (I11). When the contender's
//! recovery changed the lock path without taking it, another follows with
//! the new bound, while each removes a file, and up to four that remove
//! none. Then the lock path must be empty and no name
//! of the fresh contender's left; files of the run that no later takeover
//! removes are reported ([`Sim::accumulating`]), not failed. PROTOCOL 13.3
//! says the same at length.
//!
//! Faults: short and failing writes, a filesystem without exchange or
//! with unnamed files, power cuts (the disk keeps the journal's last
//! commit and each file's data as last synced; every process dies, and
//! the scenario's processes start again in a new boot with the PIDs and
//! start times they had: [`model::Faults::power`], PROTOCOL 13.2), and
//! any syscall but `close` failing, one in
//! `Faults::syscall_one_in`, with `ENOSPC`, `EMFILE`, `ENFILE`,
//! `ENAMETOOLONG`, `EIO`, `EINTR` or `EACCES`, drawn by the world's
//! random source ([`model::SYSCALL_FAULTS`]); or, in the scenarios of
//! `planned`, one given call of one process failing, where a directed race
//! needs that failure at that place ([`model::Planned`]).
//!
//! | module | what it holds |
//! |---|---|
//! | `cast` | what a run starts from: the processes, files and faults, as types |
//! | `scenario` | the catalogue of starting states |
//! | `planned` | the scenarios whose syscall faults are planned, not drawn |
//! | `world` | the shared state: filesystem, processes, time, tokens, trace |
//! | `os` | [`SimOs`], the seam: each syscall applied and recorded |
//! | `event` | the records the oracle reads |
//! | `oracle` | the invariants, one function each, with their exemptions, and the progress check's bound |
//! | `actors` | the processes' lives: contender, `flock` fallback, planter |
//! | `runtime` | coroutines and their stacks, [`Sim`], the progress check's fresh contenders |
//! | `schedule` | the choosers and the loops that run them |
//! | [`script`] | directed schedules, steered step by step and kept as bytes |
//! | [`directed`], `directed_planned`, `directed_nested` | the directed races that kill the protocol mutants no search reaches |
//! | [`model`] | the model filesystem |
//! | [`naive`] | the deliberately broken pre-fix policy |
//! | [`mutants`] | the protocol-mutation run: each guard of the shipped protocol undone, and the searches that must notice |
//! | [`rw`] | the read-write lock's simulator, apart: its model filesystem, oracle, scenarios, searches and mutants, sharing only the coroutine stacks |

mod actors;
mod cast;
pub mod directed;
mod directed_nested;
mod directed_planned;
mod event;
pub mod model;
pub mod mutants;
pub mod naive;
mod oracle;
mod os;
mod planned;
mod runtime;
pub mod rw;
mod scenario;
mod schedule;
pub mod script;
mod world;

pub use actors::POLL;
pub use cast::{
    contenders, Policy, Process, Scenario, FALLBACK_STALL, LEASE, LOCK, RECORDLESS_HOLD, VICTIM,
};
pub use oracle::Progress;
pub use os::SimOs;
pub use runtime::{leftovers, Sim, Violation};
pub use scenario::{enosys_fallback_race, scenarios, windows_symlink_race};
pub use schedule::{
    explore, explore_free, run, run_drawn, run_seed, Action, Chooser, Draw, Explorer, FromBytes,
    Outcome, Pausing, Pct, Random, Recording,
};
