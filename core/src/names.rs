//! The names a soft lock derives from its lock path (PROTOCOL 5.2, 5.3).
//!
//! - `<lock>.break.<pid>.<token>`: a breaker's private file (its placeholder,
//!   or its complete marker before the exchange), named with the breaker's
//!   PID so that a contender can find what a killed breaker stranded;
//! - `<lock>.restore.<pid>.<token>`: a recoverer's claim on a stranded file,
//!   won by renaming the stranded file to it.
//!
//! The token is 128 random bits as 32 lowercase hex digits, so no other
//! process can predict, pre-create or hijack these names (invariant I13).
//! Names are bytes: on Unix a file name need not be UTF-8.

use crate::decimal::Decimal;
use crate::pid::Pid;
use core::fmt;

/// The longest file name this crate builds, in bytes (Linux `NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// The longest lock file name (final component) a soft lock accepts, in
/// bytes: its longest derived name, `<lock>.restore.<pid>.<token>`, adds
/// 52 bytes (`.restore.`, a PID of up to 10 digits, `.`, 32 hex digits)
/// and must still fit in [`NAME_MAX`]. A longer name would be acquired,
/// then fail to release or to be broken (`ENAMETOOLONG`), and wedge the
/// lock, so it is refused before anything is created.
pub const MAX_LOCK_NAME: usize = NAME_MAX - (RESTORE.len() + 10 + 1 + 32);

/// A file name built in a fixed buffer.
pub type Name = heapless::Vec<u8, NAME_MAX>;

/// 128 random bits that make a derived name unguessable.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Token(pub [u8; 16]);

impl Token {
    /// The 32 lowercase hex digits of the token.
    pub fn hex(&self) -> [u8; 32] {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 32];
        for (i, byte) in self.0.iter().enumerate() {
            out[2 * i] = DIGITS[usize::from(byte >> 4)];
            out[2 * i + 1] = DIGITS[usize::from(byte & 0xf)];
        }
        out
    }

    /// Parses exactly 32 lowercase hex digits.
    pub fn parse_hex(text: &[u8]) -> Option<Self> {
        fn nibble(c: u8) -> Option<u8> {
            match c {
                b'0'..=b'9' => Some(c - b'0'),
                b'a'..=b'f' => Some(c - b'a' + 10),
                _ => None,
            }
        }
        if text.len() != 32 {
            return None;
        }
        let mut out = [0u8; 16];
        for (i, pair) in text.chunks_exact(2).enumerate() {
            out[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
        }
        Some(Token(out))
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = self.hex();
        // hex() writes only ASCII hex digits.
        f.write_str(core::str::from_utf8(&hex).unwrap_or("?"))
    }
}

/// The derived name would be longer than [`NAME_MAX`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NameTooLong;

impl fmt::Display for NameTooLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "derived file name longer than {NAME_MAX} bytes")
    }
}

/// Writes `value` in decimal at the end of `buf` (at least 20 bytes for
/// any `u64`) and returns those digits.
pub fn format_u64(mut value: u64, buf: &mut [u8]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            return &buf[at..];
        }
    }
}

const BREAK: &[u8] = b".break.";
const RESTORE: &[u8] = b".restore.";
/// As long as [`BREAK`], so a write name fits wherever a break name does.
const WRITE: &[u8] = b".write.";

fn build(lock_base: &[u8], infix: &[u8], pid: &[u8], token: &Token) -> Result<Name, NameTooLong> {
    let mut name = Name::new();
    for part in [lock_base, infix, pid, b".", &token.hex()] {
        name.extend_from_slice(part).map_err(|_| NameTooLong)?;
    }
    Ok(name)
}

/// `<lock_base>.break.<breaker>.<token>`: a breaker's private name. The
/// breaker is this process when it breaks, or a dead breaker's PID when a
/// recoverer hands a claim back (which may be any number a placeholder held).
pub fn break_name(
    lock_base: &[u8],
    breaker: Decimal<'_>,
    token: &Token,
) -> Result<Name, NameTooLong> {
    build(lock_base, BREAK, breaker.as_str().as_bytes(), token)
}

/// `<lock_base>.break.<pid>.<token>` for a breaker known by its [`Pid`]
/// (this process, when it breaks).
pub fn pid_break_name(lock_base: &[u8], breaker: Pid, token: &Token) -> Result<Name, NameTooLong> {
    let mut digits = [0u8; 10];
    build(
        lock_base,
        BREAK,
        format_u64(u64::from(breaker.get()), &mut digits),
        token,
    )
}

/// `<lock_base>.write.<pid>.<token>`: where a process writes a complete
/// file before renaming it, on a filesystem without unnamed files: a
/// breaker's or a releaser's file before its break name (7.8, 7.10), a
/// contender's marker before the lock path (7.2 step 3b). No reader or
/// recovery takes this name for anything: a writer killed mid-write
/// leaves a file nobody ever publishes (`swaplock break` removes it once
/// its writer is gone).
pub fn write_name(lock_base: &[u8], writer: Pid, token: &Token) -> Result<Name, NameTooLong> {
    let mut digits = [0u8; 10];
    build(
        lock_base,
        WRITE,
        format_u64(u64::from(writer.get()), &mut digits),
        token,
    )
}

/// What follows the lock's name in [`queue_name`].
pub const QUEUE: &[u8] = b".queue";

/// `<lock_base>.queue`: the side file where this host's waiters for a soft
/// lock queue in the kernel (PROTOCOL 7.20), so that one of them at a time
/// watches the marker. Never a marker: it holds the queue's ticket counter,
/// and its kernel locks order the waiters. No other name derived from the
/// lock's ends so, and the recovery scan takes it for none.
pub fn queue_name(lock_base: &[u8]) -> Result<Name, NameTooLong> {
    let mut name = Name::new();
    for part in [lock_base, QUEUE] {
        name.extend_from_slice(part).map_err(|_| NameTooLong)?;
    }
    Ok(name)
}

/// `<lock_base>.restore.<recoverer>.<token>`: a recoverer's claim name.
pub fn restore_name(lock_base: &[u8], recoverer: Pid, token: &Token) -> Result<Name, NameTooLong> {
    let mut digits = [0u8; 10];
    build(
        lock_base,
        RESTORE,
        format_u64(u64::from(recoverer.get()), &mut digits),
        token,
    )
}

/// A directory entry recognised as derived from a lock's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Derived<'a> {
    /// `<lock>.break.<breaker>.<token>`, the breaker's PID printed without
    /// leading zeros (any value: a placeholder's PID is not range-checked).
    Break {
        /// The breaker's PID.
        breaker: Decimal<'a>,
        /// The name's token.
        token: Token,
    },
    /// `<lock>.restore.<recoverer>.<token>`, the PID in 1..=2³¹−1 (leading
    /// zeros allowed, as filelock reads it).
    Restore {
        /// The recoverer's PID.
        recoverer: Pid,
        /// The name's token.
        token: Token,
    },
}

/// Splits `<digits>.<32 hex>`.
fn split_pid_token(rest: &[u8]) -> Option<(&[u8], Token)> {
    let split = rest.len().checked_sub(33)?;
    let (digits, tail) = rest.split_at(split);
    let hex = tail.strip_prefix(b".")?;
    Some((digits, Token::parse_hex(hex)?))
}

/// How a directory compares names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum NameCase {
    /// Byte for byte, as most POSIX filesystems do.
    #[default]
    Exact,
    /// ASCII letters without regard to case: APFS and HFS+ as macOS formats
    /// them by default, ext4 and f2fs directories with casefolding (as
    /// Android's shared storage is kept), NTFS and FAT. There `App.lock` and
    /// `app.lock` are one file, so a breaker that spelled the lock one way
    /// left break names that a recoverer spelling it the other way must
    /// find. Other bytes compare exactly: two spellings that differ beyond
    /// ASCII letters (another case of a non-ASCII letter, another Unicode
    /// normalization) are not recognized as one lock, and a name that is
    /// not UTF-8 is compared byte for byte, as Linux does.
    AsciiInsensitive,
}

/// Says whether the directory entry `entry` is a break or restore name of
/// the lock whose final path component is `lock_base`, and for which PID
/// (PROTOCOL 5.3). Nothing else matches: a longer lock name sharing a prefix,
/// a token that is not 32 lowercase hex digits, a sign, a break PID with
/// leading zeros, a restore PID outside 1..=2³¹−1.
pub fn parse_derived<'a>(lock_base: &[u8], entry: &'a [u8]) -> Option<Derived<'a>> {
    parse_derived_in(NameCase::Exact, lock_base, entry)
}

/// [`parse_derived`] in a directory that compares names as `case` says:
/// the lock's name is matched so (the derived parts are written the same
/// by every writer, and are matched exactly).
pub fn parse_derived_in<'a>(
    case: NameCase,
    lock_base: &[u8],
    entry: &'a [u8],
) -> Option<Derived<'a>> {
    let rest = match case {
        NameCase::Exact => entry.strip_prefix(lock_base)?,
        // Casefolding applies to names in UTF-8 only: Linux compares any
        // other name byte for byte, even in a casefolded directory.
        NameCase::AsciiInsensitive
            if core::str::from_utf8(lock_base).is_ok()
                && entry
                    .get(..lock_base.len())
                    .is_some_and(|head| core::str::from_utf8(head).is_ok()) =>
        {
            let (head, rest) = entry.split_at_checked(lock_base.len())?;
            if !head.eq_ignore_ascii_case(lock_base) {
                return None;
            }
            rest
        }
        NameCase::AsciiInsensitive => entry.strip_prefix(lock_base)?,
    };
    if let Some(rest) = rest.strip_prefix(BREAK) {
        let (digits, token) = split_pid_token(rest)?;
        let breaker = Decimal::parse(digits)?;
        // A breaker writes its PID as str(pid): the canonical digits only.
        if breaker.as_str().len() != digits.len() {
            return None;
        }
        return Some(Derived::Break { breaker, token });
    }
    let rest = rest.strip_prefix(RESTORE)?;
    let (digits, token) = split_pid_token(rest)?;
    let recoverer = Pid::parse_decimal(digits)?;
    Some(Derived::Restore { recoverer, token })
}

/// The writer of `<lock_base>.write.<pid>.<token>`, as [`write_name`]
/// spells it (the PID's canonical digits, in 1..=2³¹−1): a write name a
/// writer left, which nothing else ever reads, takes or publishes.
pub fn parse_write_name(lock_base: &[u8], entry: &[u8]) -> Option<Pid> {
    let rest = entry.strip_prefix(lock_base)?.strip_prefix(WRITE)?;
    let (digits, _) = split_pid_token(rest)?;
    let writer = Decimal::parse(digits)?;
    if writer.as_str().len() != digits.len() {
        return None;
    }
    Pid::new(u32::try_from(writer.to_u64()?).ok()?)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::format;

    const HEX: &str = "0123456789abcdef0123456789abcdef";

    fn entry(s: &str) -> heapless::Vec<u8, 128> {
        heapless::Vec::from_slice(s.as_bytes()).unwrap()
    }

    /// (is a break name, the PID's digits, the token), owned.
    type Seen = (bool, heapless::String<16>, Token);

    fn seen(name: &str) -> Option<Seen> {
        let bytes = entry(name);
        parse_derived(b"l.lock", &bytes).map(|d| match d {
            Derived::Break { breaker, token } => {
                (true, breaker.as_str().try_into().unwrap(), token)
            }
            Derived::Restore { recoverer, token } => {
                let mut s = heapless::String::new();
                core::fmt::write(&mut s, format_args!("{recoverer}")).unwrap();
                (false, s, token)
            }
        })
    }

    #[test]
    fn a_write_name_names_its_writer_and_nothing_else_does() {
        let token = Token::parse_hex(HEX.as_bytes()).unwrap();
        let made = write_name(b"l.lock", Pid::new(4242).unwrap(), &token).unwrap();
        assert_eq!(parse_write_name(b"l.lock", &made), Pid::new(4242));
        let writer = |name: &str| parse_write_name(b"l.lock", name.as_bytes());
        assert_eq!(writer(&alloc_fmt(&["l.lock.write.1.", HEX])), Pid::new(1));
        assert_eq!(
            writer(&alloc_fmt(&["l.lock.write.2147483647.", HEX])),
            Pid::new(2_147_483_647)
        );
        for not_one in [
            alloc_fmt(&["l.lock.write.2147483648.", HEX]),
            alloc_fmt(&["l.lock.write.0.", HEX]),
            alloc_fmt(&["l.lock.write.042.", HEX]),
            alloc_fmt(&["l.lock.write.4x2.", HEX]),
            alloc_fmt(&["l.lock.write..", HEX]),
            alloc_fmt(&["l.lock.write.42.", &HEX[1..]]),
            alloc_fmt(&["l.lock.write.42-", HEX]),
            alloc_fmt(&["l.lock.break.42.", HEX]),
            alloc_fmt(&["m.lock.write.42.", HEX]),
            alloc_fmt(&["l.lockwrite.42.", HEX]),
        ] {
            assert_eq!(writer(&not_one), None, "{not_one}");
        }
    }

    #[test]
    fn a_case_insensitive_directory_matches_the_lock_name_in_any_ascii_case() {
        let name = alloc_fmt(&["App.Lock.break.15856.", HEX]);
        let restore = alloc_fmt(&["APP.LOCK.restore.77.", HEX]);
        let insensitive = NameCase::AsciiInsensitive;
        assert!(matches!(
            parse_derived_in(insensitive, b"app.lock", name.as_bytes()),
            Some(Derived::Break { breaker, .. }) if breaker.as_str() == "15856"
        ));
        assert!(matches!(
            parse_derived_in(insensitive, b"app.lock", restore.as_bytes()),
            Some(Derived::Restore { .. })
        ));
        assert_eq!(parse_derived(b"app.lock", name.as_bytes()), None);
        // Only the lock's name folds; a longer name, another name, and
        // non-ASCII letters in another case do not match.
        for other in [
            alloc_fmt(&["app.locks.break.15856.", HEX]),
            alloc_fmt(&["app.lock.BREAK.15856.", HEX]),
            alloc_fmt(&["bpp.lock.break.15856.", HEX]),
        ] {
            assert_eq!(
                parse_derived_in(insensitive, b"app.lock", other.as_bytes()),
                None,
                "{other}"
            );
        }
        let accented = alloc_fmt(&["\u{c9}t\u{e9}.lock.break.15856.", HEX]);
        assert_eq!(
            parse_derived_in(
                insensitive,
                "\u{e9}t\u{e9}.lock".as_bytes(),
                accented.as_bytes()
            ),
            None
        );
        assert!(parse_derived_in(
            insensitive,
            "\u{c9}T\u{e9}.LOCK".as_bytes(),
            accented.as_bytes()
        )
        .is_some());
        // A name that is not UTF-8 is compared byte for byte, as Linux
        // compares it in a casefolded directory: two such names that differ
        // in ASCII case are two locks.
        let mut raw = heapless::Vec::<u8, 128>::new();
        raw.extend_from_slice(b"\xffApp.lock.break.15856.").unwrap();
        raw.extend_from_slice(HEX.as_bytes()).unwrap();
        assert_eq!(parse_derived_in(insensitive, b"\xffapp.lock", &raw), None);
        assert!(parse_derived_in(insensitive, b"\xffApp.lock", &raw).is_some());
    }

    #[test]
    fn matches_exactly_the_derived_names() {
        let tok = Token::parse_hex(HEX.as_bytes()).unwrap();
        let brk = |pid: &str| seen(&alloc_fmt(&["l.lock.break.", pid, ".", HEX]));
        assert_eq!(brk("15856"), Some((true, "15856".try_into().unwrap(), tok)));
        assert_eq!(brk("0").map(|s| s.1), Some("0".try_into().unwrap()));
        assert_eq!(
            brk("99999999999").map(|s| s.1),
            Some("99999999999".try_into().unwrap())
        );
        assert!(brk("0015856").is_none());
        assert!(brk("+1").is_none());
        assert!(brk("").is_none());
        let rst = |pid: &str| seen(&alloc_fmt(&["l.lock.restore.", pid, ".", HEX]));
        assert_eq!(rst("0042"), Some((false, "42".try_into().unwrap(), tok)));
        assert!(rst("0").is_none());
        assert!(rst("2147483648").is_none());
        assert!(rst("2147483647").is_some());
        assert!(rst("-1").is_none());
        assert!(seen(&alloc_fmt(&["l.lockx.break.1.", HEX])).is_none());
        assert!(seen(&alloc_fmt(&["l.loc.break.1.", HEX])).is_none());
        assert!(seen(&alloc_fmt(&[
            "l.lock.break.1.",
            &HEX.to_ascii_uppercase_static()
        ]))
        .is_none());
        assert!(seen("l.lock.break.1.0123456789abcdef0123456789abcde").is_none());
        assert!(seen(&alloc_fmt(&["l.lock.break.1.", HEX, "0"])).is_none());
        assert!(seen(&alloc_fmt(&["l.lock.break.1-", HEX])).is_none());
        assert!(seen(&alloc_fmt(&["l.lock.other.1.", HEX])).is_none());
    }

    trait Upper {
        fn to_ascii_uppercase_static(&self) -> heapless::String<32>;
    }
    impl Upper for str {
        fn to_ascii_uppercase_static(&self) -> heapless::String<32> {
            self.chars().map(|c| c.to_ascii_uppercase()).collect()
        }
    }

    fn alloc_fmt(parts: &[&str]) -> heapless::String<128> {
        let mut s = heapless::String::new();
        for p in parts {
            s.push_str(p).unwrap();
        }
        s
    }

    #[test]
    fn a_lock_name_of_max_lock_name_bytes_leaves_room_for_every_derived_name() {
        let token = Token([0xab; 16]);
        let widest = Pid::new(Pid::MAX).unwrap();
        let longest = [b'a'; MAX_LOCK_NAME + 1];
        let name = restore_name(&longest[..MAX_LOCK_NAME], widest, &token).unwrap();
        assert_eq!(name.len(), NAME_MAX, "the restore name is the longest");
        let name = pid_break_name(&longest[..MAX_LOCK_NAME], widest, &token).unwrap();
        assert!(name.len() < NAME_MAX);
        assert_eq!(restore_name(&longest, widest, &token), Err(NameTooLong));
    }

    #[test]
    fn the_queue_name_fits_and_is_no_name_the_recovery_scan_takes() {
        let longest = [b'a'; MAX_LOCK_NAME];
        let name = queue_name(&longest).unwrap();
        assert!(name.len() < NAME_MAX);
        let name = queue_name(b"l.lock").unwrap();
        assert_eq!(name.as_slice(), b"l.lock.queue");
        assert_eq!(parse_derived(b"l.lock", &name), None);
        assert_eq!(
            parse_derived_in(NameCase::AsciiInsensitive, b"l.lock", &name),
            None
        );
        // Nor is another lock's marker or derived name its queue: a lock
        // named `l.lock.queue` is a lock of its own, whose own queue is
        // `l.lock.queue.queue`.
        assert_eq!(queue_name(&name).unwrap().as_slice(), b"l.lock.queue.queue");
    }

    #[test]
    fn a_break_name_spells_the_breaker_pid_in_decimal() {
        let token = Token::parse_hex(HEX.as_bytes()).unwrap();
        let pid = Pid::new(15856).unwrap();
        let name = pid_break_name(b"l.lock", pid, &token).unwrap();
        assert_eq!(
            name.as_slice(),
            alloc_fmt(&["l.lock.break.15856.", HEX]).as_bytes()
        );
        let digits = Decimal::parse(b"15856").unwrap();
        assert_eq!(break_name(b"l.lock", digits, &token), Ok(name));
        let long = [b'a'; 250];
        assert_eq!(pid_break_name(&long, pid, &token), Err(NameTooLong));
    }

    #[test]
    fn a_token_and_a_too_long_name_print_as_text() {
        let token = Token::parse_hex(HEX.as_bytes()).unwrap();
        assert_eq!(format!("{token:?}"), HEX);
        assert_eq!(
            format!("{NameTooLong}"),
            "derived file name longer than 255 bytes"
        );
    }

    #[test]
    fn builds_what_it_parses() {
        let token = Token([0xab; 16]);
        let pid = Pid::new(77).unwrap();
        let name = restore_name(b"x", pid, &token).unwrap();
        assert_eq!(
            parse_derived(b"x", &name),
            Some(Derived::Restore {
                recoverer: pid,
                token
            })
        );
        let long = [b'a'; 250];
        assert_eq!(restore_name(&long, pid, &token), Err(NameTooLong));
    }
}
