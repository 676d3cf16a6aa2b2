//! A strict lock's claims: their names (`intent-v1-<T>.claim`,
//! `held-v1-<T>.claim`) and their records (PROTOCOL 18.2), parsed as
//! filelock 4.2.11 parses them and encoded byte for byte as it writes them.
//!
//! ```text
//! filelock-strict-v1\n<T>\n<pid>\n<lowercase hex of the host name's UTF-8>\n<start token, or empty>\n
//! ```
//!
//! The parser refuses anything filelock refuses (a strict lock raises on
//! such a claim, it never reads it as "no claim": invariant ST5) and cannot
//! panic on any input.

use crate::decimal::Decimal;
use crate::names::Token;
use crate::pid::Pid;
use crate::pytext::is_py_space;
use core::fmt;

/// The first line of every claim record.
pub const CLAIM_MAGIC: &[u8] = b"filelock-strict-v1";

/// The longest host name a claim record can carry, in bytes: a record is
/// at most [`RECORD_LIMIT`](super::RECORD_LIMIT) bytes and spells each
/// byte of the host with two hex digits.
pub const CLAIM_HOST_MAX: usize = 512;
const _: () = assert!(2 * CLAIM_HOST_MAX == super::RECORD_LIMIT);

/// A claim's host name, decoded from its hex.
pub type ClaimHost = heapless::String<CLAIM_HOST_MAX>;

/// The phase a claim's name records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ClaimState {
    /// `held-v1-<T>.claim`: the claim owns the lock, once the final scan
    /// agrees. (`held` sorts before `intent`, as the names do.)
    Held,
    /// `intent-v1-<T>.claim`: published first, kept for the whole hold.
    Intent,
}

impl ClaimState {
    /// The state as its name spells it: `intent` or `held`.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimState::Intent => "intent",
            ClaimState::Held => "held",
        }
    }
}

/// A valid claim name: exactly `(intent|held)-v1-<32 lowercase hex>.claim`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ClaimName {
    /// The phase.
    pub state: ClaimState,
    /// The claim's token.
    pub token: Token,
}

/// A claim name as bytes (at most 48).
pub type ClaimNameBuf = heapless::String<48>;

const CLAIM_SUFFIX: &[u8] = b".claim";
const VERSION: &[u8] = b"-v1-";

impl ClaimName {
    /// Parses a directory entry as a claim name; `None` for anything else.
    pub fn parse(entry: &[u8]) -> Option<ClaimName> {
        let body = entry.strip_suffix(CLAIM_SUFFIX)?;
        let (state, rest) = if let Some(rest) = body.strip_prefix(b"intent") {
            (ClaimState::Intent, rest)
        } else {
            (ClaimState::Held, body.strip_prefix(b"held")?)
        };
        let token = Token::parse_hex(rest.strip_prefix(VERSION)?)?;
        Some(ClaimName { state, token })
    }

    /// The name, as filelock spells it.
    pub fn encode(&self) -> ClaimNameBuf {
        let mut name = ClaimNameBuf::new();
        let hex = self.token.hex();
        // 6 + 4 + 32 + 6 = 48 bytes at most: the capacity holds them, and
        // hex() writes ASCII only.
        for part in [
            self.state.as_str(),
            "-v1-",
            core::str::from_utf8(&hex).unwrap_or_default(),
            ".claim",
        ] {
            let _ = name.push_str(part);
        }
        name
    }

    /// The key filelock compares to find the winner: the name without its
    /// state, `v1-<T>.claim`, which orders as the token's bytes do.
    pub fn key(&self) -> [u8; 16] {
        self.token.0
    }
}

/// Why a claim record is malformed (filelock says only "malformed claim
/// record"; the reasons are for tests and logs).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MalformedClaim {
    /// More than [`RECORD_LIMIT`](super::RECORD_LIMIT) bytes.
    TooLong,
    /// A byte outside ASCII.
    NotAscii,
    /// Not exactly six `\n`-separated fields, the last one empty.
    FieldCount,
    /// The first line is not `filelock-strict-v1`.
    Magic,
    /// The token differs from the claim name's.
    TokenMismatch,
    /// The PID is not canonical decimal in 1..=2³¹−1.
    Pid,
    /// The start token is neither empty nor canonical decimal.
    Start,
    /// The host is not canonical lowercase hex of printable UTF-8 text
    /// without whitespace.
    Host,
}

impl fmt::Display for MalformedClaim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self {
            MalformedClaim::TooLong => "longer than 1024 bytes",
            MalformedClaim::NotAscii => "not ASCII",
            MalformedClaim::FieldCount => "not six newline-ended fields",
            MalformedClaim::Magic => "no filelock-strict-v1 line",
            MalformedClaim::TokenMismatch => "its token is not its name's",
            MalformedClaim::Pid => "no PID in 1..2147483647",
            MalformedClaim::Start => "a start token that is not a decimal number",
            MalformedClaim::Host => "a host that is not lowercase hex of a printable name",
        };
        write!(f, "malformed claim record ({why})")
    }
}

/// A parsed claim record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim<'a> {
    /// The claim's token (equal to its name's).
    pub token: Token,
    /// The PID of the process that published it.
    pub pid: Pid,
    host: ClaimHost,
    /// The publisher's start token, when its platform gave one.
    pub start: Option<Decimal<'a>>,
}

impl Claim<'_> {
    /// The publisher's host name, as its `host_name()` computed it.
    pub fn host(&self) -> &str {
        &self.host
    }
}

/// A canonical decimal: `0`, or digits without a leading zero.
fn canonical_digits(text: &[u8]) -> Option<Decimal<'_>> {
    match text {
        [b'0', _, ..] => None,
        _ => Decimal::parse(text),
    }
}

/// Whether Python's `str.isprintable()` holds for `c`: not a control, a
/// format character, a private-use character or a separator (Unicode
/// 14.0's categories Cc, Cf, Co, Zs, Zl, Zp, as CPython 3.11 has them;
/// unassigned code points, which Python also refuses, are accepted here).
pub fn is_py_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    let cp = u32::from(c);
    let format = matches!(
        cp,
        0xAD | 0x600..=0x605
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x890..=0x891
            | 0x8E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x13438
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    );
    let private = matches!(cp, 0xE000..=0xF8FF | 0xF0000..=0xFFFFD | 0x100000..=0x10FFFD);
    // Every separator (Zs, Zl, Zp) is whitespace to Python.
    !(c.is_control() || format || private || is_py_space(c))
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// The host from its canonical lowercase hex, or `None`.
fn parse_host(hex: &[u8]) -> Option<ClaimHost> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    let mut bytes: heapless::Vec<u8, CLAIM_HOST_MAX> = heapless::Vec::new();
    for pair in hex.chunks_exact(2) {
        bytes
            .push((nibble(pair[0])? << 4) | nibble(pair[1])?)
            .ok()?;
    }
    let text = core::str::from_utf8(&bytes).ok()?;
    if !text.chars().all(|c| is_py_printable(c) && !is_py_space(c)) {
        return None;
    }
    let mut host = ClaimHost::new();
    host.push_str(text).ok()?;
    Some(host)
}

/// Parses a claim record read from the claim named with `token` (the
/// claim's own name decides its token: a record naming another is
/// malformed).
pub fn parse_claim<'a>(token: &Token, record: &'a [u8]) -> Result<Claim<'a>, MalformedClaim> {
    if record.len() > super::RECORD_LIMIT {
        return Err(MalformedClaim::TooLong);
    }
    if !record.is_ascii() {
        return Err(MalformedClaim::NotAscii);
    }
    let mut fields = record.split(|&b| b == b'\n');
    let mut next = || fields.next().ok_or(MalformedClaim::FieldCount);
    let (magic, named, pid, host, start, last) =
        (next()?, next()?, next()?, next()?, next()?, next()?);
    if !last.is_empty() || fields.next().is_some() {
        return Err(MalformedClaim::FieldCount);
    }
    if magic != CLAIM_MAGIC {
        return Err(MalformedClaim::Magic);
    }
    if named != token.hex() {
        return Err(MalformedClaim::TokenMismatch);
    }
    let pid = canonical_digits(pid)
        .and_then(|d| d.to_u64())
        .and_then(|v| u32::try_from(v).ok())
        .and_then(Pid::new)
        .ok_or(MalformedClaim::Pid)?;
    let start = match start {
        [] => None,
        digits => Some(canonical_digits(digits).ok_or(MalformedClaim::Start)?),
    };
    let host = parse_host(host).ok_or(MalformedClaim::Host)?;
    Ok(Claim {
        token: *token,
        pid,
        host,
        start,
    })
}

/// Why a claim record cannot be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EncodeClaimError {
    /// The record would not parse back to the same fields (a host with
    /// whitespace or a character Python does not print).
    Invalid(MalformedClaim),
    /// The record does not fit in the buffer.
    TooLong,
}

/// Writes the claim record of `token` for process `pid` on `host` with
/// start token `start` into `buf`, and returns its length. A record that
/// would not parse back to the same fields is refused, so no peer ever
/// reads our claim as malformed.
pub fn encode_claim(
    token: &Token,
    pid: Pid,
    host: &str,
    start: Option<Decimal<'_>>,
    buf: &mut [u8],
) -> Result<usize, EncodeClaimError> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut at = 0usize;
    let mut put = |bytes: &[u8]| -> Result<(), EncodeClaimError> {
        let end = at + bytes.len();
        buf.get_mut(at..end)
            .ok_or(EncodeClaimError::TooLong)?
            .copy_from_slice(bytes);
        at = end;
        Ok(())
    };
    let mut digits = [0u8; 20];
    put(CLAIM_MAGIC)?;
    put(b"\n")?;
    put(&token.hex())?;
    put(b"\n")?;
    put(crate::names::format_u64(u64::from(pid.get()), &mut digits))?;
    put(b"\n")?;
    for byte in host.bytes() {
        put(&[HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0xf)]])?;
    }
    put(b"\n")?;
    if let Some(start) = start {
        put(start.as_str().as_bytes())?;
    }
    put(b"\n")?;
    let parsed = parse_claim(token, &buf[..at]).map_err(EncodeClaimError::Invalid)?;
    if parsed.host() != host {
        return Err(EncodeClaimError::Invalid(MalformedClaim::Host));
    }
    Ok(at)
}
