//! The directed races of the read-write lock: each steers one scenario
//! into a race too narrow for the random searches, for the guard it
//! names ([`Race::mutant`]), and is kept as bytes once it kills it.

use super::script::{Lost, Script};
use swaplock_core::mutant::Mutant;

/// A directed race.
pub struct Race {
    /// Its name.
    pub name: &'static str,
    /// The guard it is written to need.
    pub mutant: Mutant,
    /// Steers the race; the script, ready to [`Script::finish`].
    pub steer: fn() -> Result<Script, Lost>,
}

/// Every directed race.
pub const ALL: &[Race] = &[];
