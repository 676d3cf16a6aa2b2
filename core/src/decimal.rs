//! Arbitrary-length decimal integers, held as their digits.
//!
//! Records carry PIDs and start tokens as plain ASCII digits with no limit on
//! their number, and filelock reads them into unbounded integers. Holding the
//! canonical digit string lets the core compare such values exactly, take
//! their low 64 bits and test whether they fit in 64 bits, without an
//! allocator and without a cap that a hostile record could overflow.

use core::fmt;

/// A non-negative integer of any size, as its decimal digits without leading
/// zeros (`"0"` for zero).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Decimal<'a>(&'a str);

impl Decimal<'static> {
    /// Zero.
    pub const ZERO: Decimal<'static> = Decimal("0");
}

impl<'a> Decimal<'a> {
    /// Parses one or more ASCII digits (leading zeros allowed). Anything else,
    /// including the empty string, a sign, `_` or whitespace, gives `None`.
    pub fn parse(digits: &'a [u8]) -> Option<Self> {
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let first = digits
            .iter()
            .position(|&b| b != b'0')
            .unwrap_or(digits.len() - 1);
        // All bytes are ASCII digits, so this is valid UTF-8.
        core::str::from_utf8(&digits[first..]).ok().map(Decimal)
    }

    /// The canonical digits: no leading zeros, `"0"` for zero.
    pub fn as_str(&self) -> &'a str {
        self.0
    }

    /// The value, when it fits in 64 bits.
    pub fn to_u64(&self) -> Option<u64> {
        if self.0.len() > 20 {
            return None;
        }
        let mut value: u64 = 0;
        for &d in self.0.as_bytes() {
            value = value.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        Some(value)
    }

    /// The value modulo 2⁶⁴.
    pub fn low_u64(&self) -> u64 {
        // Wrapping arithmetic in Z/2^64 is exactly the residue of the whole number.
        self.0.bytes().fold(0u64, |acc, d| {
            acc.wrapping_mul(10).wrapping_add(u64::from(d - b'0'))
        })
    }

    /// Whether the value is below 2⁶⁴, i.e. `value >> 64 == 0`.
    pub fn fits_u64(&self) -> bool {
        self.to_u64().is_some()
    }

    /// The value as 192 bits `(high 128, low 64)`, when it fits.
    pub fn to_u192(&self) -> Option<(u128, u64)> {
        let (mut hi, mut lo) = (0u128, 0u64);
        for &d in self.0.as_bytes() {
            // (hi, lo) * 10 + d, with the carry out of the low word moved into hi.
            let wide = u128::from(lo) * 10 + u128::from(d - b'0');
            lo = wide as u64;
            hi = hi.checked_mul(10)?.checked_add(wide >> 64)?;
        }
        Some((hi, lo))
    }
}

impl fmt::Debug for Decimal<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl fmt::Display for Decimal<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::format;

    #[test]
    fn a_decimal_prints_its_canonical_digits() {
        let d = Decimal::parse(b"007").unwrap();
        assert_eq!(format!("{d}"), "7");
        assert_eq!(format!("{d:?}"), "7");
    }
}
