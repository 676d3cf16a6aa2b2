//! Process start tokens (PROTOCOL 4.2): what tells a live holder from a
//! process that reused its PID.
//!
//! On Linux a token is `(boot_id << 64) | starttime`, up to 192 bits; on
//! macOS the start time in microseconds; on Windows the creation FILETIME.
//! A recorded token is compared with the one read now by [`same_start`]: a
//! side that could not read the boot id is compared on `starttime` alone.
//! A token we publish must be exactly the value filelock computes, or a
//! peer would judge our live holder a recycled PID; where it cannot be
//! computed exactly, the record omits it.

use crate::decimal::Decimal;
use core::fmt;

/// A process start token, up to 192 bits: `high << 64 | low`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StartToken {
    /// The bits above 64: the boot id on Linux, zero elsewhere.
    pub high: u128,
    /// The low 64 bits: `starttime` on Linux, the whole token elsewhere.
    pub low: u64,
}

/// The longest decimal spelling of a 192-bit token.
pub const START_DIGITS_MAX: usize = 58;

impl StartToken {
    /// The Linux token: the boot id (0 when it could not be read) and field
    /// 22 of `/proc/<pid>/stat`.
    pub const fn linux(boot_id: u128, starttime: u64) -> Self {
        StartToken {
            high: boot_id,
            low: starttime,
        }
    }

    /// A token that fits in 64 bits (macOS microseconds, Windows FILETIME).
    pub const fn from_u64(value: u64) -> Self {
        StartToken {
            high: 0,
            low: value,
        }
    }

    /// Writes the token in decimal into `buf` and returns it as a [`Decimal`].
    pub fn to_decimal<'b>(&self, buf: &'b mut [u8; START_DIGITS_MAX]) -> Decimal<'b> {
        // Repeated division of the 192-bit value (three 64-bit limbs) by 10.
        let mut limbs = [(self.high >> 64) as u64, self.high as u64, self.low];
        let mut at = buf.len();
        loop {
            let mut rem: u128 = 0;
            for limb in limbs.iter_mut() {
                let cur = (rem << 64) | u128::from(*limb);
                *limb = (cur / 10) as u64;
                rem = cur % 10;
            }
            at -= 1;
            buf[at] = b'0' + rem as u8;
            if limbs == [0, 0, 0] {
                break;
            }
        }
        // The digits written are ASCII digits without leading zeros, so the
        // fallback is never taken.
        Decimal::parse(&buf[at..]).unwrap_or(Decimal::ZERO)
    }

    /// Whether a recorded token is exactly this one (filelock's
    /// `owner_is_current_process` compares this way).
    pub fn equals(&self, recorded: Decimal<'_>) -> bool {
        recorded.to_u192() == Some((self.high, self.low))
    }
}

impl fmt::Display for StartToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; START_DIGITS_MAX];
        f.write_str(self.to_decimal(&mut buf).as_str())
    }
}

/// filelock's `_same_start`: equal, or equal in the low 64 bits when either
/// side's high bits are zero (that side could not read the boot id).
pub fn same_start(current: StartToken, recorded: Decimal<'_>) -> bool {
    current.equals(recorded)
        || ((current.high == 0 || recorded.fits_u64()) && current.low == recorded.low_u64())
}

/// The boot id from `/proc/sys/kernel/random/boot_id`: the text stripped of
/// ASCII whitespace, without `-`, read as hex. Anything else gives 0, as a
/// failed read does.
pub fn parse_boot_id(text: &[u8]) -> u128 {
    let text = text.trim_ascii();
    let mut value: u128 = 0;
    let mut digits = 0;
    for &c in text {
        if c == b'-' {
            continue;
        }
        let Some(d) = char::from(c).to_digit(16) else {
            return 0;
        };
        digits += 1;
        if digits > 32 {
            return 0;
        }
        value = (value << 4) | u128::from(d);
    }
    if digits == 0 {
        0
    } else {
        value
    }
}

/// The inode number a namespace link of `/proc/<pid>/ns/` names, from the
/// link's text, `<kind>:[<inode>]` (`time:[4026531834]`): the inode a
/// `stat` through the link gives, for half the cost of that `stat`. `None`
/// for any other text.
pub fn parse_ns_link(text: &[u8]) -> Option<u64> {
    let at = text.iter().position(|&c| c == b':')?;
    let digits = text[at + 1..].strip_prefix(b"[")?.strip_suffix(b"]")?;
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    let mut value: u64 = 0;
    for &c in digits {
        let d = char::from(c).to_digit(10)?;
        value = value.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(value)
}

/// Field 22 (`starttime`) of a `/proc/<pid>/stat` file: element 19 of the
/// whitespace-split bytes after the last `)`, since the command name before
/// it may hold spaces and `)`.
pub fn parse_stat_starttime(stat: &[u8]) -> Option<u64> {
    let after = match stat.iter().rposition(|&b| b == b')') {
        Some(at) => &stat[at + 1..],
        None => stat,
    };
    let field = after
        .split(|b| b.is_ascii_whitespace() || *b == 0x0b)
        .filter(|f| !f.is_empty())
        .nth(19)?;
    Decimal::parse(field)?.to_u64()
}

/// The macOS token from the bytes `sysctl({CTL_KERN, KERN_PROC,
/// KERN_PROC_PID, pid})` returned (a `struct kinfo_proc`): the `i64`
/// seconds and `i32` microseconds of `kp_proc.p_starttime` at offset 0,
/// little-endian, as `seconds × 1 000 000 + microseconds`. `None` when
/// fewer than 12 bytes came back (the process is gone) or the time is
/// negative, which no token filelock publishes can match.
pub fn darwin_start_token(kinfo_proc: &[u8]) -> Option<StartToken> {
    let sec = i64::from_le_bytes(kinfo_proc.get(..8)?.try_into().ok()?);
    let usec = i32::from_le_bytes(kinfo_proc.get(8..12)?.try_into().ok()?);
    let micros = i128::from(sec) * 1_000_000 + i128::from(usec);
    u64::try_from(micros).ok().map(StartToken::from_u64)
}

/// Whether `/proc/self/timens_offsets` shows no boot-time offset: some line
/// reads `boottime 0 0` (or `7 0 0`, before Linux 5.8) when split on
/// whitespace. A shifted reader's `starttime` is not comparable with a
/// peer's, so it publishes and compares no token.
pub fn timens_offsets_unshifted(text: &[u8]) -> bool {
    // filelock reads the file as ASCII; anything else is an error, which
    // counts as shifted.
    let Some(text) = core::str::from_utf8(text).ok().filter(|t| t.is_ascii()) else {
        return false;
    };
    crate::pytext::lines(text).any(|line| {
        let mut words = line
            .split(crate::pytext::is_py_space)
            .filter(|w| !w.is_empty());
        let first = words.next();
        (first == Some("boottime") || first == Some("7"))
            && words.next() == Some("0")
            && words.next() == Some("0")
            && words.next().is_none()
    })
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::format;

    #[test]
    fn darwin_token_is_microseconds_of_p_starttime() {
        let mut buf = [0u8; 648];
        buf[..8].copy_from_slice(&1_700_000_000i64.to_le_bytes());
        buf[8..12].copy_from_slice(&123_456i32.to_le_bytes());
        let token = darwin_start_token(&buf).unwrap();
        let mut digits = [0u8; START_DIGITS_MAX];
        assert_eq!(token.to_decimal(&mut digits).as_str(), "1700000000123456");
        // A gone process returns no bytes; a short answer is no token.
        assert_eq!(darwin_start_token(&buf[..11]), None);
        assert_eq!(darwin_start_token(&[]), None);
        buf[..8].copy_from_slice(&(-1i64).to_le_bytes());
        assert_eq!(darwin_start_token(&buf), None);
    }

    #[test]
    fn a_namespace_links_text_gives_its_inode() {
        assert_eq!(parse_ns_link(b"time:[4026531834]"), Some(4_026_531_834));
        assert_eq!(parse_ns_link(b"pid:[1]"), Some(1));
        assert_eq!(parse_ns_link(b"time:[]"), None);
        assert_eq!(parse_ns_link(b"time:[12a]"), None);
        assert_eq!(parse_ns_link(b"time:[12"), None);
        assert_eq!(parse_ns_link(b"time[12]"), None);
        assert_eq!(parse_ns_link(b"time:[18446744073709551616]"), None);
        assert_eq!(parse_ns_link(b""), None);
    }

    #[test]
    fn observed_linux_token() {
        let boot = parse_boot_id(b"56fd0be6-e2e7-4c73-9e97-8556cce8b5bd\n");
        assert_eq!(boot, 0x56fd0be6e2e74c739e978556cce8b5bd);
        let token = StartToken::linux(boot, 34983);
        let mut buf = [0u8; START_DIGITS_MAX];
        assert_eq!(
            token.to_decimal(&mut buf).as_str(),
            "2132950903000782292828221800855864863249283694222725122215"
        );
        assert_eq!(parse_boot_id(b"not hex"), 0);
        assert_eq!(parse_boot_id(b""), 0);
        assert_eq!(format!("{token}"), token.to_decimal(&mut buf).as_str());
    }

    #[test]
    fn a_boot_id_has_at_most_32_hex_digits() {
        let at_most = b"ffffffff-ffff-ffff-ffff-ffffffffffff";
        assert_eq!(parse_boot_id(at_most), u128::MAX);
        let one_more = b"1ffffffff-ffff-ffff-ffff-ffffffffffff";
        assert_eq!(parse_boot_id(one_more), 0);
        assert_eq!(parse_boot_id(b"-"), 0);
    }

    #[test]
    fn same_start_rules() {
        let d = |s: &'static str| Decimal::parse(s.as_bytes()).unwrap();
        let full = StartToken::linux(5, 100);
        let recorded = (5u128 << 64) + 100;
        let mut buf = [0u8; 40];
        let text = {
            let mut v = recorded;
            let mut at = buf.len();
            while v > 0 {
                at -= 1;
                buf[at] = b'0' + (v % 10) as u8;
                v /= 10;
            }
            &buf[at..]
        };
        let rec = Decimal::parse(text).unwrap();
        assert!(same_start(full, rec));
        assert!(same_start(full, d("100")), "recorder without boot id");
        assert!(
            same_start(StartToken::linux(0, 100), rec),
            "reader without boot id"
        );
        assert!(!same_start(StartToken::linux(6, 100), rec), "another boot");
        assert!(!same_start(full, d("101")));
        // More than 192 bits never equals, but still compares on the low bits
        // against a reader without a boot id.
        let huge = d("99999999999999999999999999999999999999999999999999999999999999999");
        assert!(!same_start(full, huge));
        assert!(same_start(StartToken::from_u64(huge.low_u64()), huge));
    }

    #[test]
    fn proc_stat_field_22() {
        let stat = b"1234 (a) b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 34983 20\n";
        assert_eq!(parse_stat_starttime(stat), Some(34983));
        assert_eq!(parse_stat_starttime(b"1 (x) S 1 2"), None);
    }

    #[test]
    fn time_namespace_offsets() {
        assert!(timens_offsets_unshifted(b"monotonic 0 0\nboottime 0 0\n"));
        assert!(timens_offsets_unshifted(b"7 0 0\n"));
        assert!(!timens_offsets_unshifted(b"boottime 100 0\n"));
        assert!(!timens_offsets_unshifted(b""));
        assert!(timens_offsets_unshifted(b"boottime 0 0\n"));
        assert!(
            !timens_offsets_unshifted(b"monotonic 0 0\nboottime 5 0\n"),
            "only the boottime line counts"
        );
        assert!(!timens_offsets_unshifted(b"boottime\n"));
        assert!(!timens_offsets_unshifted(b"boottime 0 0 0\n"));
    }
}
