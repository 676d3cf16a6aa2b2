//! The takeover of a judged stale marker, the platform's way: by an
//! atomic exchange of names under POSIX rules (`exchange`), or through a
//! handle on the judged file under Windows rules (`handle`).

use super::config::{Config, Error};
use super::exchange::take_over_by_exchange;
use super::handle::take_over_by_handle;
use super::os::{Os, Semantics};
use super::types::{Breaker, Judged, Takeover};

/// Takes over the judged marker `judged`, whose writer (or placeholder's
/// breaker) is `breaker`, the platform's way. The caller holds the pin
/// (`None` if pinning failed) throughout.
pub(super) fn take_over<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    judged: &Judged,
    pin: Option<&O::File>,
    breaker: Option<&Breaker>,
) -> Result<Takeover<O::File>, Error> {
    match os.semantics() {
        Semantics::Posix => take_over_by_exchange(os, cfg, judged, breaker),
        Semantics::Handles => take_over_by_handle(os, cfg, judged, pin),
    }
}
