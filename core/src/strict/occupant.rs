//! What a strict lock makes of the file at its lock path (PROTOCOL 18.6),
//! and how its claims' holders stand (PROTOCOL 18.7).
//!
//! Only the sentinel lets an attempt go on. A soft lock's marker whose
//! holder may live is contention; one whose holder this host proves gone,
//! a node no lock writes, or content no lock parses (once unchanged for
//! the grace period) is an error for an operator: a strict lock never
//! removes what it finds at its lock path.

use super::claim::Claim;
use super::SENTINEL;
use crate::decide::HeldBecause;
use crate::errno::Errno;
use crate::pid::Pid;
use crate::record::{classify, Classified, Content, Owner, Reader};
use crate::soft::{owner_verdict, Processes, Standing};
use core::fmt;

/// What an inspection of the lock path found, before any judgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Look<'a> {
    /// A directory.
    Directory,
    /// A symbolic link (never followed).
    Symlink,
    /// Another kind of node (a FIFO, a socket, a device).
    Special,
    /// A regular file whose open or read failed with this error, or that
    /// was replaced while opened (`EAGAIN` stands for that), or is longer
    /// than the record limit (`EFBIG`).
    Unreadable(Errno),
    /// A regular file's content (at most [`RECORD_LIMIT`](super::RECORD_LIMIT) bytes).
    Content(&'a [u8]),
}

/// A soft lock's marker at the lock path: whose it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Marker<'a> {
    /// The holder's PID.
    pub pid: Pid,
    /// The holder's host.
    pub host: &'a str,
}

/// The verdict on what sits at the lock path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Occupant<'a> {
    /// Exactly the sentinel: the attempt goes on.
    Sentinel,
    /// A soft lock's marker whose holder lives, or may (another host, a
    /// probe that cannot tell): contention.
    Held(Marker<'a>),
    /// A file this process may not read: its holder may be another
    /// account's soft lock, so contention.
    Forbidden(Errno),
    /// A soft lock's marker whose holder this host proves gone: an error
    /// at once (a strict lock never acts on an inferred death).
    Exited(Marker<'a>),
    /// Content no lock parses, the empty file of a kernel lock included: an
    /// error once unchanged for [`UNPARSABLE_GRACE`](super::UNPARSABLE_GRACE),
    /// contention until then (a soft lock may be between its create and its
    /// write).
    Unparsable,
    /// A node no lock writes, or a file that cannot be read: an error once
    /// it stays so for [`DAMAGED_GRACE`](super::DAMAGED_GRACE).
    Damaged(Look<'a>),
}

impl fmt::Display for Occupant<'_> {
    /// The occupant as filelock describes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Occupant::Sentinel => f.write_str("the strict sentinel"),
            Occupant::Held(m) => {
                write!(f, "a soft-lock marker held by pid {} on {}", m.pid, m.host)
            }
            Occupant::Exited(m) => write!(
                f,
                "a soft-lock marker left by pid {} on {}, which has exited",
                m.pid, m.host
            ),
            Occupant::Forbidden(e) => write!(f, "a file it cannot read ({e})"),
            Occupant::Unparsable => f.write_str(
                "a file that is neither the sentinel nor a soft-lock marker it can parse",
            ),
            Occupant::Damaged(Look::Directory) => f.write_str("a directory"),
            Occupant::Damaged(Look::Symlink) => f.write_str("a symlink"),
            Occupant::Damaged(Look::Unreadable(e)) => write!(f, "a file it cannot read ({e})"),
            Occupant::Damaged(_) => f.write_str("a special file"),
        }
    }
}

/// Judges what sits at the lock path, for a process on host `this_host`,
/// probing a marker's holder through `os` (PROTOCOL 4.5: another host's
/// holder is never probed).
pub fn judge_occupant<'a, O: Processes + ?Sized>(
    os: &mut O,
    this_host: &str,
    look: Look<'a>,
) -> Occupant<'a> {
    let content = match look {
        Look::Content(content) => content,
        Look::Unreadable(e) if e == Errno::ACCES || e == Errno::PERM => {
            return Occupant::Forbidden(e)
        }
        other => return Occupant::Damaged(other),
    };
    if content == SENTINEL {
        return Occupant::Sentinel;
    }
    // A protocol 2 reader, which falls back to protocol 1: filelock's
    // strict lock tries both.
    let owner: Owner<'a> = match classify(Content::Bytes(content), Reader::Protocol2) {
        Classified::V2(record) => record.owner(),
        Classified::V1(record) => record.owner(),
        _ => return Occupant::Unparsable,
    };
    let marker = Marker {
        pid: owner.pid,
        host: owner.host,
    };
    match owner_verdict(os, this_host, &owner) {
        Standing::Stale { .. } => Occupant::Exited(marker),
        _ => Occupant::Held(marker),
    }
}

/// How a claim's holder stands, for a process on host `this_host`: alive,
/// provably gone (dead, or its PID runs another process), or not to be
/// judged from here. Only [`Standing::Stale`] lets an operator's break
/// remove the claim without force.
pub fn claim_standing<O: Processes + ?Sized>(
    os: &mut O,
    this_host: &str,
    claim: &Claim<'_>,
) -> Standing {
    let owner = Owner {
        pid: claim.pid,
        host: claim.host(),
        start: claim.start,
    };
    match owner_verdict(os, this_host, &owner) {
        Standing::Held(why) => Standing::Held(why),
        Standing::Stale { recycled } => Standing::Stale { recycled },
        // owner_verdict gives no other answer on a recorded owner.
        _ => Standing::Held(HeldBecause::CannotTell),
    }
}
