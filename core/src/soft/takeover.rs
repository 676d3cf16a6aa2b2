//! The takeover of a judged stale marker, the platform's way: by an
//! atomic exchange of names under POSIX rules (`exchange`), or through a
//! handle on the judged file under Windows rules (`handle`).

use super::config::{Config, Error};
use super::exchange::take_over_by_exchange;
use super::handle::take_over_by_handle;
use super::judge::{Breaker, Judged};
use super::os::{Os, Semantics};
use super::types::{Attempt, Held, Holder};

/// The outcome of a takeover.
pub(super) enum Takeover<F> {
    /// The lock is ours: the judged file is gone and our marker is at the path.
    Took(Held<F>),
    /// Nothing was taken (or what was taken went back).
    Busy,
}

impl<F> Takeover<F> {
    pub(super) fn attempt(self) -> Attempt<F> {
        match self {
            Takeover::Took(held) => Attempt::Acquired(held),
            Takeover::Busy => Attempt::Busy(Holder::Unknown),
        }
    }
}

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
