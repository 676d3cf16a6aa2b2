//! The names under `<L>.rw/` and the protocol's constants (PROTOCOL 16.1).

use crate::names::Token;

/// The first line of every record of the log.
pub const PROTOCOL: &str = "filelock-rw/1";
/// What the lock path's canonical form is suffixed with to name the log's root.
pub const ROOT_SUFFIX: &str = ".rw";
/// The directory of the generations, the epoch and HEAD.
pub const GENERATIONS: &str = "gen";
/// The directory of the holder records.
pub const HOLDERS: &str = "holders";
/// The epoch's name in [`GENERATIONS`].
pub const EPOCH: &[u8] = b"epoch";
/// HEAD's name in [`GENERATIONS`].
pub const HEAD: &[u8] = b"HEAD";
/// The prefix of a publication's temporary file in [`GENERATIONS`].
pub const TEMPORARY_PREFIX: &[u8] = b".commit-";
/// A generation's name is its number, zero-padded to this many digits.
pub const GENERATION_DIGITS: usize = 20;
/// The largest generation a 20-digit name (and a snapshot) can carry.
pub const MAX_GENERATION: u128 = 99_999_999_999_999_999_999;
/// The largest record a reader accepts (filelock's `MAX_RECORD_SIZE`).
pub const MAX_RECORD: usize = 1 << 20;
/// How many bytes a read takes at most: one past [`MAX_RECORD`], so that
/// an over-long record is seen to be one.
pub const READ_LIMIT: usize = MAX_RECORD + 1;
/// How many generations the log keeps, and how far a probe looks past a
/// gap before it trusts that nothing newer exists.
pub const RETAINED: u32 = 64;
/// How many attempts one poll makes at most: a lost commit is tried again
/// at once, up to this many times, before the poll interval is waited.
pub const ATTEMPTS_PER_POLL: usize = 4;
/// The longest temporary name: the prefix and a token.
pub const TEMPORARY_LEN: usize = TEMPORARY_PREFIX.len() + 32;

/// `name(N)`: the generation `n` zero-padded to 20 digits; `None` past
/// [`MAX_GENERATION`], which no name can carry.
pub fn generation_name(n: u128) -> Option<[u8; GENERATION_DIGITS]> {
    if n > MAX_GENERATION {
        return None;
    }
    let mut out = [b'0'; GENERATION_DIGITS];
    let mut rest = n;
    for slot in out.iter_mut().rev() {
        // rest % 10 is below 10, so the cast cannot truncate.
        *slot = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    Some(out)
}

/// The generation a listed name stands for: exactly 20 ASCII digits
/// (leading zeros are the padding); any other name is not a generation.
pub fn parse_generation_name(name: &[u8]) -> Option<u128> {
    if name.len() != GENERATION_DIGITS || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        name.iter()
            .fold(0u128, |n, d| n * 10 + u128::from(d - b'0')),
    )
}

/// `.commit-<hex32>`: a publication's temporary file, unique by `token`.
pub fn temporary_name(token: &Token) -> [u8; TEMPORARY_LEN] {
    let mut out = [0u8; TEMPORARY_LEN];
    out[..TEMPORARY_PREFIX.len()].copy_from_slice(TEMPORARY_PREFIX);
    out[TEMPORARY_PREFIX.len()..].copy_from_slice(&token.hex());
    out
}

/// Whether a name in [`GENERATIONS`] is a publication's temporary file,
/// which the sweep collects: the prefix alone decides, as for filelock.
pub fn is_temporary_name(name: &[u8]) -> bool {
    name.starts_with(TEMPORARY_PREFIX)
}

/// The token a name in [`HOLDERS`] stands for: exactly 32 lowercase hex
/// digits; any other name (`junk`, a dot file) is not a holder record and
/// is never touched.
pub fn parse_holder_name(name: &[u8]) -> Option<Token> {
    Token::parse_hex(name)
}
