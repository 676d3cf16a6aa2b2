//! The verdict on a marker's owner (PROTOCOL 3.5, 4.5): how a contender
//! of a kind stands toward a marker, before any watch or takeover, which
//! contenders, `break` and `status` share, and the holder a contender
//! reports when it cannot probe the owner.
//!
//! Invariant kept here:
//! - I8: staleness verdicts fail closed; another host is never probed.

use super::config::{Config, Kind};
use super::os::Processes;
use super::types::Holder;
use crate::decide::{judge_owner, needs_current_start, HeldBecause, Liveness, Verdict};
use crate::host::HostName;
use crate::mutant::{active, Mutant};
use crate::record::{classify, Classified, Content, Mode, Owner, Reader, V1Record, V2Record};

/// How a contender of a kind stands toward a marker, before any watch or
/// takeover: what the protocol will do with it. `swaplock status` shows
/// exactly this, so it never disagrees with a contender.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Standing {
    /// An empty marker, the strict sentinel, or a protocol 2 mode this
    /// version does not know: never evicted (invariant I10).
    Never,
    /// Unreadable as this kind's record: evicted once seen unchanged for
    /// the 2 s grace period (invariant I9).
    Malformed,
    /// A holder that is, or cannot be proven not to be, alive: the lock is
    /// held (a lease still expires when it stops being refreshed).
    Held(HeldBecause),
    /// A holder on this host that is provably gone: the marker is taken
    /// over. `recycled`: its PID runs again, as another process.
    Stale {
        /// Whether the PID is alive as another process (its start differs).
        recycled: bool,
    },
}

impl Standing {
    /// What an operator can do about a marker that keeps contenders out,
    /// for a holder that stands so.
    pub fn remedy(self) -> Remedy {
        match self {
            Standing::Never => Remedy::ForceIfUnheld,
            Standing::Malformed => Remedy::Grace,
            Standing::Held(HeldBecause::Alive) => Remedy::Wait,
            Standing::Held(HeldBecause::OtherHost | HeldBecause::CannotTell) => {
                Remedy::ForceOnceGone
            }
            Standing::Stale { .. } => Remedy::ForceStale,
        }
    }
}

impl Holder {
    /// What an operator can do about the marker of a holder an attempt
    /// named: one that names no owner is never removed by contenders, and
    /// another host's cannot be judged here. `None` for a holder the
    /// attempt did not name.
    pub fn remedy(&self) -> Option<Remedy> {
        match self {
            Holder::Unknown | Holder::Local { .. } => None,
            Holder::Recordless => Some(Standing::Never.remedy()),
            Holder::Foreign { .. } => Some(Standing::Held(HeldBecause::OtherHost).remedy()),
        }
    }
}

/// What an operator can do about a marker that keeps contenders out, by
/// how a contender stands toward its holder ([`Standing::remedy`],
/// [`Holder::remedy`]): the one
/// remedy a busy lock's error and `swaplock break` name.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Remedy {
    /// The holder is alive: wait for its release. Removing its marker by
    /// force would lose mutual exclusion with it.
    Wait,
    /// Contenders remove the marker once they have seen it unchanged for
    /// the 2 s grace period (invariant I9); removing it by force does the
    /// same at once.
    Grace,
    /// The holder is provably gone, yet its marker stands: contenders take
    /// a stale marker over by exchanging names, so this filesystem cannot
    /// exchange them, and nothing will ever move the marker (PROTOCOL 7.8).
    /// Remove it by force once the holder is confirmed gone.
    ForceStale,
    /// The holder cannot be judged from this host (it is another host's,
    /// or its probe failed): remove the marker by force once it is known
    /// gone.
    ForceOnceGone,
    /// A marker contenders never remove (invariant I10: empty, the strict
    /// sentinel, a mode this version does not know): remove it by force if
    /// nothing holds it.
    ForceIfUnheld,
}

/// How a contender of `cfg.kind` stands toward a marker whose content is
/// `content` (PROTOCOL 3.5, 4.5): the one judgement contenders, `break`
/// and `status` share.
pub fn standing<O: Processes + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    content: Content<'_>,
) -> Standing {
    standing_of(os, cfg, &classify(content, cfg.kind.reader()))
}

pub(super) fn standing_of<O: Processes + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    classified: &Classified<'_>,
) -> Standing {
    match classified {
        Classified::Recordless if active(Mutant::RecordlessEvicted) => Standing::Malformed,
        Classified::Sentinel | Classified::Recordless => Standing::Never,
        Classified::Malformed(_) => Standing::Malformed,
        // A contract this version does not know is never reclaimed.
        Classified::V2(r) if matches!(r.mode, Mode::Unknown(_)) => Standing::Never,
        Classified::V1(r) => owner_standing(os, cfg, &r.owner()),
        Classified::V2(r) => owner_standing(os, cfg, &r.owner()),
    }
}

/// The fail-closed verdict on a recorded owner (PROTOCOL 4.5, invariant
/// I8): another host is never probed.
pub(super) fn owner_standing<O: Processes + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    owner: &Owner<'_>,
) -> Standing {
    let host = match active(Mutant::ForeignProbedLocally) {
        true => owner.host,
        false => cfg.host,
    };
    owner_verdict(os, host, owner)
}

/// The fail-closed verdict on a recorded owner for a process on host
/// `this_host` (PROTOCOL 4.5, invariant I8), whatever the record's kind:
/// another host is never probed, and only a proven death or a recycled
/// PID is stale. The strict lock judges its claims' holders by it too.
pub fn owner_verdict<O: Processes + ?Sized>(
    os: &mut O,
    this_host: &str,
    owner: &Owner<'_>,
) -> Standing {
    let host = this_host;
    if owner.host != host {
        return Standing::Held(HeldBecause::OtherHost);
    }
    let probe = os.probe(owner.pid);
    let current = if needs_current_start(owner, host, probe) {
        os.start_token(owner.pid)
    } else {
        None
    };
    // Without its boot id, a token matches any boot's with its start time.
    let current = match active(Mutant::StartIgnoresBoot) {
        true => current.map(|t| crate::start::StartToken { high: 0, ..t }),
        false => current,
    };
    let stale = Standing::Stale {
        recycled: probe == Liveness::Alive,
    };
    match judge_owner(owner, host, probe, current) {
        Verdict::Held(why) => Standing::Held(why),
        Verdict::Stale => stale,
        Verdict::StaleUnlessRunsElsewhere => match owner.start {
            Some(start) if os.runs_elsewhere(owner.pid, start) => {
                Standing::Held(HeldBecause::Alive)
            }
            _ => stale,
        },
    }
}

/// Whether the recorded owner is provably gone.
pub(super) fn is_stale<O: Processes + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    owner: &Owner<'_>,
) -> bool {
    matches!(owner_standing(os, cfg, owner), Standing::Stale { .. })
}

/// Names the holder of a marker, as far as filelock's `Timeout` names one
/// (an empty marker, or a record, read as this kind reads it with protocol
/// 1 as the fallback, naming another host), or the PID of a holder on this
/// host, whose end a waiter may wait for.
pub fn describe_holder(content: Content<'_>, kind: Kind, this_host: &str) -> Holder {
    let Ok(text) = crate::record::decode(content) else {
        return Holder::Unknown;
    };
    if text.is_empty() {
        return Holder::Recordless;
    }
    let v2 = match kind.reader() {
        Reader::Protocol2 => V2Record::parse(text).ok().map(|r| r.owner()),
        Reader::Protocol1 => None,
    };
    let Some(owner) = v2.or_else(|| V1Record::parse(text).ok().map(|r| r.owner())) else {
        return Holder::Unknown;
    };
    if owner.host == this_host {
        return Holder::Local { pid: owner.pid };
    }
    let mut host = HostName::new();
    // A recorded host longer than a host name is cut for the report only.
    for c in owner.host.chars() {
        if host.push(c).is_err() {
            break;
        }
    }
    Holder::Foreign {
        pid: owner.pid,
        host,
    }
}
