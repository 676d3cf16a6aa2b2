//! Process identifiers as the lock records carry them.

use core::fmt;
use core::num::NonZeroU32;

/// A process ID in the range every record format accepts: 1 to 2³¹−1.
///
/// Zero and negative values never name one process to `kill(2)` (they name
/// process groups), so a record carrying one is malformed rather than a
/// holder; this type makes such a value unrepresentable.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Pid(NonZeroU32);

impl Pid {
    /// The largest PID a record may carry: 2³¹−1.
    pub const MAX: u32 = i32::MAX as u32;

    /// The PID `raw`, or `None` when it is outside 1..=2³¹−1.
    pub const fn new(raw: u32) -> Option<Self> {
        if raw > Self::MAX {
            return None;
        }
        match NonZeroU32::new(raw) {
            Some(nz) => Some(Pid(nz)),
            None => None,
        }
    }

    /// The PID as an unsigned integer.
    pub const fn get(self) -> u32 {
        self.0.get()
    }

    /// The PID as the signed `pid_t` the kernel takes; always positive.
    pub const fn as_raw(self) -> i32 {
        // `new` keeps the value at or below i32::MAX, so this never wraps.
        self.0.get() as i32
    }

    /// Parses a PID written as a record writes it: ASCII digits only, leading
    /// zeros allowed, no sign, no spaces, value in 1..=2³¹−1.
    pub fn parse_decimal(digits: &[u8]) -> Option<Self> {
        let value = crate::decimal::Decimal::parse(digits)?.to_u64()?;
        u32::try_from(value).ok().and_then(Pid::new)
    }
}

impl fmt::Debug for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pid({})", self.0)
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}
