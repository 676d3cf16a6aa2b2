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
//! marker is removed, and a holder's marker is linked while it holds.
//!
//! | module | what it holds |
//! |---|---|
//! | `scenario` | starting states, the processes, the catalogue |
//! | `world` | the shared state: filesystem, processes, time, tokens, trace |
//! | `os` | [`SimOs`], the seam: each syscall applied and recorded |
//! | `event` | the records the oracle reads |
//! | `oracle` | the invariants, one function each, with their exemptions |
//! | `actors` | the processes' lives: contender, `flock` fallback, planter |
//! | `runtime` | coroutines and their stacks, [`Sim`] |
//! | `schedule` | the choosers and the loops that run them |
//! | [`model`] | the model filesystem |
//! | [`naive`] | the deliberately broken pre-fix policy |

mod actors;
mod event;
pub mod model;
pub mod naive;
mod oracle;
mod os;
mod runtime;
mod scenario;
mod schedule;
mod world;

pub use actors::POLL;
pub use os::SimOs;
pub use runtime::{leftovers, Sim, Violation};
pub use scenario::{
    contenders, enosys_fallback_race, scenarios, windows_symlink_race, Policy, Process, Scenario,
    FALLBACK_STALL, LEASE, LOCK, VICTIM,
};
pub use schedule::{
    explore, explore_free, run, run_seed, Action, Chooser, Explorer, FromBytes, Random,
};
