//! The strict lock of Python filelock 4.2.11 (`StrictSoftFileLock`): a
//! permanent sentinel at the lock path and immutable claim files under
//! `<lock>.filelock/claims/`, won through a two-phase doorway whose
//! smallest token wins (PROTOCOL 18).
//!
//! What is here is the protocol's part that decides, as pure functions:
//! the bytes of the sentinel and of a claim ([`claim`]), the names a
//! strict lock creates and reaps ([`names`]), what a contender makes of
//! the file at the lock path ([`occupant`]), and who wins from a scan of
//! the claims, with the pause between attempts ([`doorway`]). The
//! facade's `StrictLock` performs the syscalls and asks these functions
//! at each step.
//!
//! Invariants kept here (PROTOCOL 18.9):
//! - ST3: a contender wins only from a scan in which its intent and its
//!   held claim are both listed and its token is the smallest;
//! - ST5: a claim this crate encodes parses back to the same fields, and
//!   the parser refuses every record filelock refuses, so no claim is read
//!   as "no claim";
//! - ST6: a claim's holder is judged dead only on proof, on this host
//!   (PROTOCOL 4.5), and only an operator's break acts on the verdict;
//! - ST7: litter is reaped only once linked, or old by the filesystem's
//!   clock.
//!
//! ```
//! use swaplock_core::names::Token;
//! use swaplock_core::strict::claim::{encode_claim, parse_claim, ClaimName, ClaimState};
//! use swaplock_core::Pid;
//!
//! let token = Token([0x13; 16]);
//! let mut buf = [0u8; 1024];
//! let n = encode_claim(&token, Pid::new(915).unwrap(), "vm", None, &mut buf).unwrap();
//! assert!(buf[..n].starts_with(b"filelock-strict-v1\n1313"));
//! let claim = parse_claim(&token, &buf[..n]).unwrap();
//! assert_eq!((claim.pid.get(), claim.host()), (915, "vm"));
//! let name = ClaimName { state: ClaimState::Intent, token };
//! assert_eq!(ClaimName::parse(name.encode().as_bytes()), Some(name));
//! ```

pub mod claim;
pub mod doorway;
pub mod names;
pub mod occupant;

#[cfg(test)]
mod tests;

use core::time::Duration;

/// The content of the sentinel a strict lock keeps at its lock path for
/// ever (24 bytes): the soft kinds read it as a holder that never goes
/// (PROTOCOL 2.6).
pub const SENTINEL: &[u8] = crate::record::STRICT_SENTINEL;

/// The suffix of the coordination directory beside the lock path:
/// `<lock>.filelock`.
pub const COORDINATION_SUFFIX: &[u8] = b".filelock";

/// The claims' directory inside the coordination directory.
pub const CLAIMS_DIR: &[u8] = b"claims";

/// The most bytes a claim record or the content at the lock path may have;
/// a reader reads one byte more to tell a longer one.
pub const RECORD_LIMIT: usize = 1024;

/// How long a private file with one link must be unchanged, by the
/// filesystem's own clock, before a scan reaps it.
pub const PRIVATE_GRACE: Duration = Duration::from_secs(2);

/// How long a file at the lock path that no lock parses must stay
/// unchanged before an attempt reports it (filelock's
/// `MALFORMED_LOCK_AGE_THRESHOLD`).
pub const UNPARSABLE_GRACE: Duration = crate::decide::MALFORMED_GRACE;

/// How long an attempt looks again at a node no lock writes (a directory,
/// a symlink, an unreadable file) at the lock path before it reports it:
/// a peer may be replacing the path.
pub const DAMAGED_GRACE: Duration = Duration::from_millis(500);

/// How long a scan retries a claim whose read answers `ESTALE` or
/// `EACCES` (NFS revalidating a name a peer unlinked), in all.
pub const CLAIM_READ_GRACE: Duration = Duration::from_millis(500);

/// The pause between two looks within [`DAMAGED_GRACE`] and
/// [`CLAIM_READ_GRACE`].
pub const READ_RETRY: Duration = Duration::from_millis(2);

/// The longest name, in bytes, of a strict lock's path: its sentinel's
/// private name, `.<lock>.private-v1-<hex32>.tmp`, adds 49 bytes and must
/// fit in [`NAME_MAX`](crate::names::NAME_MAX).
pub const MAX_LOCK_NAME: usize = crate::names::NAME_MAX - names::PRIVATE_OVERHEAD;
