//! Python's `repr(float)`, the spelling filelock writes a lease duration in.
//!
//! `repr` gives the shortest digit string that reads back to the same
//! double, written positionally when the decimal exponent `e` satisfies
//! `-4 <= e < 16` (with at least one fractional digit, `30.0`) and in
//! scientific form otherwise (`1e+20`, `2.5e-07`: an explicit sign and at
//! least two exponent digits). Rust's `{:e}` yields the shortest
//! round-tripping digit count; where several spellings of that length read
//! back, Python takes the nearest, ties to even, which is Rust's exact
//! formatting at that length whenever that reads back. This module then lays
//! the digits out as Python does.

use core::fmt::{self, Write};

/// The longest `repr` of a finite double: 17 digits, a sign, a point and a
/// positional layout of up to 16 integer digits, or `e-324`.
pub const MAX_REPR_LEN: usize = 32;

/// Python's `repr(value)` for a double. Non-finite values give `inf`, `-inf`
/// and `nan`, as Python spells them.
pub fn repr(value: f64) -> heapless::String<MAX_REPR_LEN> {
    let mut out = heapless::String::new();
    // The buffer is sized for the longest repr; a failure here would be a bug
    // in MAX_REPR_LEN, and it can only truncate the text, never panic.
    let _ = write_repr(&mut out, value);
    out
}

/// Writes Python's `repr(value)` into `out`.
pub fn write_repr<W: Write>(out: &mut W, value: f64) -> fmt::Result {
    if value.is_nan() {
        return out.write_str("nan");
    }
    if value.is_infinite() {
        return out.write_str(if value < 0.0 { "-inf" } else { "inf" });
    }
    // `{:e}` gives "[-]d[.ddd]e<exp>" with the shortest round-trip digits.
    // Of the spellings of that length that read back, Python takes the one
    // nearest the double, ties to even: the exact formatting at that length,
    // unless that falls outside the rounding interval (which is lopsided
    // at a power of two), where the shortest spelling is the nearest one.
    let mut shortest: heapless::String<MAX_REPR_LEN> = heapless::String::new();
    write!(shortest, "{value:e}")?;
    let digits = shortest
        .bytes()
        .take_while(|&b| b != b'e')
        .filter(u8::is_ascii_digit)
        .count();
    let mut exact: heapless::String<MAX_REPR_LEN> = heapless::String::new();
    write!(exact, "{value:.prec$e}", prec = digits.saturating_sub(1))?;
    let sci = if exact
        .parse::<f64>()
        .is_ok_and(|back| back.to_bits() == value.to_bits())
    {
        exact
    } else {
        shortest
    };
    let (negative, body) = match sci.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, sci.as_str()),
    };
    let (mantissa, exp) = body.split_once('e').ok_or(fmt::Error)?;
    let exp: i32 = exp.parse().map_err(|_| fmt::Error)?;
    let (lead, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if negative {
        out.write_char('-')?;
    }
    if (-4..16).contains(&exp) {
        write_positional(out, lead, frac, exp)
    } else {
        out.write_str(lead)?;
        if !frac.is_empty() {
            out.write_char('.')?;
            out.write_str(frac)?;
        }
        let sign = if exp < 0 { '-' } else { '+' };
        write!(out, "e{sign}{:02}", exp.unsigned_abs())
    }
}

fn write_positional<W: Write>(out: &mut W, lead: &str, frac: &str, exp: i32) -> fmt::Result {
    // The digits are lead ++ frac with the point after the first; move it by exp.
    let digits = lead.bytes().chain(frac.bytes());
    let count = lead.len() + frac.len();
    if exp < 0 {
        out.write_str("0.")?;
        for _ in 0..(-exp - 1) {
            out.write_char('0')?;
        }
        for d in digits {
            out.write_char(char::from(d))?;
        }
        return Ok(());
    }
    // exp is in 0..16 here.
    let int_len = exp as usize + 1;
    for (i, d) in digits.enumerate() {
        if i == int_len {
            out.write_char('.')?;
        }
        out.write_char(char::from(d))?;
    }
    for _ in count..int_len {
        out.write_char('0')?;
    }
    if count <= int_len {
        out.write_str(".0")?;
    }
    Ok(())
}

/// Whether `text` matches the grammar filelock accepts for a duration:
/// `[0-9]+(\.[0-9]+)?(e[+-][0-9]+)?`, all of it.
pub fn is_duration_text(text: &[u8]) -> bool {
    fn digits(s: &[u8]) -> usize {
        s.iter().take_while(|b| b.is_ascii_digit()).count()
    }
    let mut rest = text;
    let n = digits(rest);
    if n == 0 {
        return false;
    }
    rest = &rest[n..];
    if let Some(after) = rest.strip_prefix(b".") {
        let n = digits(after);
        if n == 0 {
            return false;
        }
        rest = &after[n..];
    }
    if let Some(after) = rest.strip_prefix(b"e") {
        let Some(after) = after
            .strip_prefix(b"+")
            .or_else(|| after.strip_prefix(b"-"))
        else {
            return false;
        };
        let n = digits(after);
        if n == 0 {
            return false;
        }
        rest = &after[n..];
    }
    rest.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observed_spellings() {
        for (value, text) in [
            (30.0, "30.0"),
            (1.5, "1.5"),
            (0.0001, "0.0001"),
            (1e-05, "1e-05"),
            (1e20, "1e+20"),
            (2.5e-7, "2.5e-07"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (0.1, "0.1"),
            // 2^-1008: the nearest 16-digit spelling lies outside the
            // rounding interval, which is narrower below a power of two.
            (
                f64::from_bits(0x0100_0000_0000_0000),
                "7.291122019556398e-304",
            ),
            // 1358402440549237.25: a tie between two 17-digit spellings.
            (f64::from_bits(0x43134dd6dbb94dd5), "1358402440549237.2"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
        ] {
            assert_eq!(repr(value).as_str(), text, "{value:e}");
        }
    }

    #[test]
    fn duration_grammar() {
        for ok in ["30", "30.0", "1e+20", "1.5e-07", "007.50"] {
            assert!(is_duration_text(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "", "1e20", ".5", "1.", "1.5E+2", "+1", "1 ", "inf", "1e+", "1_0", "１",
        ] {
            assert!(!is_duration_text(bad.as_bytes()), "{bad}");
        }
    }
}
