//! The soft-lock protocol: acquire, judge a stale marker under a pin, take
//! it over by an atomic exchange, put back what a killed breaker stranded,
//! release, and refresh a lease (PROTOCOL 7).
//!
//! The protocol is written once, here, over the narrow traits of [`os`]:
//! [`Dir`] (the lock's directory), [`Processes`], [`Clock`] and
//! [`Entropy`], together [`Os`]. Every method is one syscall or one input
//! (a liveness probe, a clock reading, a random token, a pause), so the
//! Linux, macOS and Windows adapters, the deterministic simulator and
//! fault-injecting test adapters all run this same code, and whatever the
//! simulator proves is what ships.
//!
//! Where each step lives (the invariants of PROTOCOL 9 each module keeps
//! are listed in its own docs):
//!
//! | module | protocol steps | invariants |
//! |---|---|---|
//! | [`os`] | the traits the world answers | |
//! | `config` | the record we publish, errors | |
//! | `marker` | reading a marker (3.1), publishing ours (7.2) | I2 |
//! | `types` | the values the steps share: a held lock, an attempt's outcome, a contender's memory, the judged file, a takeover's outcome | |
//! | `acquire` | the attempt (7.2) and the driver loop (7.1) | I1, I2 |
//! | `create` | our record in the marker just created (7.2) | I2 |
//! | `standing` | the verdict on a marker's owner (3.5, 4.5), shared with `break` and `status` | I8 |
//! | `judge` | pin (7.5), guard (7.6), judgement by kind (7.7), lifetime (7.12), watch (7.13) | I5, I6, I8, I9, I10, I20 |
//! | `takeover` | the platform's takeover | |
//! | `exchange` | the exchange takeover (7.8), abandon and exchange-back (7.9) | I3, I4, I11, I14, I16 |
//! | `handle` | the takeover through a handle (Windows rules) | I12 |
//! | `recovery` | a killed breaker's stranded record (5.3, 7.11) | I13, I15 |
//! | `release` | remove our own file (7.3), release (7.4), break through a placeholder (7.10) | I7, I11, I17 |
//! | `lease` | heartbeat and compromise (7.14, 7.15) | I18, I19 |
//!
//! Where swaplock is stricter than filelock 4.2.11 (each gap found by the
//! simulator in `sim/`; the bytes on disk are the same):
//! - release swaps its marker out through a placeholder instead of `lstat`
//!   then `unlink`, which a peer's exchange can slip between;
//! - release never retries a removal by name after closing its marker
//!   (filelock does, for shares that refuse to delete an open file);
//! - exchange-back never exchanges the lock path while it holds another
//!   process's file (filelock's "feeding" exchange can capture a marker a
//!   new holder created after a ring of breakers formed), and removes its
//!   aside name only if it holds our own file;
//! - an acquire counts as held only if our marker is still linked once its
//!   record is complete: a writer paused mid-record past the malformed grace
//!   period, or a contender paused past a lease mid-takeover, would otherwise
//!   hold a marker a peer has evicted;
//! - stranded-record recovery puts another breaker's placeholder back at
//!   the lock path instead of deleting it as malformed: that breaker may
//!   be alive, holding a live marker aside, and needs its placeholder back
//!   to return it.
//!
//! Where open files cannot be moved or deleted by others (Windows, see
//! [`Semantics::Handles`]), the same judgement runs, but a stale marker is
//! renamed aside and deleted through a handle on the judged file itself,
//! and our marker is deleted through the handle we hold it by: no name is
//! ever acted on that a peer could have replaced in between, so filelock's
//! link-back of a recreated marker (and the planted-symlink race it had)
//! does not arise. A live holder's marker, open without delete sharing,
//! refuses the handle, so it is never broken there, whatever its lease.

mod acquire;
mod config;
mod create;
mod exchange;
mod handle;
mod judge;
mod lease;
mod marker;
pub mod os;
mod recovery;
mod release;
mod standing;
mod takeover;
mod types;

pub use acquire::{acquire, observe_watch, try_acquire};
pub use config::{own_record, Config, Error, Kind, LeaseTerms, Op};
pub use lease::{
    heartbeat_interval, lost, refresh, Compromise, CompromiseWatch, Refresh, CONFIRM_PAUSE,
};
pub(crate) use marker::unlink_if_same;
pub use marker::{look, Seen};
pub use os::{Clock, Dir, Entropy, Handles, NodeKind, Os, Processes, Semantics, Stat};
pub use release::{keep_for_handover, release, remove_own_file};
pub use standing::{describe_holder, owner_verdict, standing, Remedy, Standing};
pub use types::{Attempt, Contender, Held, Holder};
