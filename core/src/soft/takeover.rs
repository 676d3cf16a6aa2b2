//! The takeover of a judged stale marker, the platform's way: by an
//! atomic exchange of names under POSIX rules (`exchange`), or through a
//! handle on the judged file under Windows rules (`handle`).

use super::config::{Config, Error};
use super::exchange::take_over_by_exchange;
use super::handle::take_over_by_handle;
use super::os::{Os, Semantics};
use super::types::{Breaker, Judged, Takeover};
use crate::mutant::{active, Mutant};

/// Takes over the judged marker `judged`, whose writer (or placeholder's
/// breaker) is `breaker`, the platform's way, if the caller pinned it
/// (`pin` is `None` where pinning failed), holding the pin throughout.
pub(super) fn take_over<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    judged: &Judged,
    pin: Option<&O::File>,
    breaker: Option<&Breaker>,
) -> Result<Takeover<O::File>, Error> {
    // Without a pin nothing moves (7.5): the judged file's inode number
    // is then free for reuse, and a new holder's marker given it within
    // the same mtime would pass for the judged file at every look below
    // (12.1 S18).
    if pin.is_none() && !active(Mutant::UnpinnedTakeover) {
        return Ok(Takeover::Busy);
    }
    match os.semantics() {
        Semantics::Posix => take_over_by_exchange(os, cfg, judged, breaker),
        Semantics::Handles => take_over_by_handle(os, cfg, judged, pin),
    }
}
