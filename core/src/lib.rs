//! The core of swaplock: lock record formats, derived names, identity and
//! the decisions of the lock protocols, as pure functions.
//!
//! This crate performs no I/O, reads no clock and allocates nothing: every
//! syscall result, reading of a clock, random token and PID probe answer is
//! an argument. The OS adapters (`swaplock-linux`, `swaplock-macos`,
//! `swaplock-windows`) perform the syscalls; the `swaplock` crate offers the
//! user's API. Because the decisions live here, the same code decides on a
//! real kernel, under the deterministic simulator and under a fuzzer.
//!
//! - [`record`]: the soft-lock records of Python filelock 4.2.11 (protocol 1,
//!   protocol 2, the break placeholder, the released record, the strict
//!   sentinel), parsed and encoded byte for byte.
//! - [`names`]: `<lock>.break.<pid>.<token>` and `<lock>.restore.<pid>.<token>`.
//! - [`host`] and [`start`]: the holder identity a record carries.
//! - [`decide`]: staleness verdicts, the unchanged-marker watch, lifetime
//!   and lease expiry, and the with-lock-ex identity check.
//! - [`kinds`]: what a soft lock finds at its path that another kind of
//!   lock left.
//! - [`wait`]: the clocks and the caller's patience both acquire loops use.
//! - [`rw`]: the read-write soft lock's generation log (filelock's
//!   `SoftReadWriteLock`): its records, names and decisions.
//! - [`strict`]: filelock's strict lock: its sentinel and claim records,
//!   names, what sits at its lock path, and who wins its doorway.
//!
//! ```
//! use swaplock_core::record::{classify, Classified, Content, Reader};
//!
//! let marker = b"filelock/2\npid=14965\nhost=vm\nmode=exclusive\n";
//! match classify(Content::Bytes(marker), Reader::Protocol2) {
//!     Classified::V2(record) => assert_eq!(record.pid.get(), 14965),
//!     other => panic!("unexpected {other:?}"),
//! }
//! ```
// docs.rs labels each platform's and feature's items with what they need.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![no_std]
#![forbid(unsafe_code)]

pub mod claims;
pub mod decide;
pub mod decimal;
pub mod errno;
pub mod etcd;
pub mod fs;
pub mod host;
pub mod kernel;
pub mod kinds;
pub mod mutant;
pub mod names;
pub mod pid;
pub mod pyfloat;
pub mod pytext;
pub mod record;
pub mod rw;
pub mod soft;
pub mod sqlite;
pub mod start;
pub mod strict;
pub mod wait;

pub use decimal::Decimal;
pub use errno::Errno;
pub use pid::Pid;
