//! The dot names a strict lock creates and reaps (PROTOCOL 18.1, 18.4):
//! a record's private file before its link,
//! `.<public>.private-v1-<hex32>.tmp`, and an existence proof's link,
//! `.probe-v1-<hex32>.tmp`; and what a scan makes of each entry of the
//! claims' directory.

use super::claim::ClaimName;
use super::PRIVATE_GRACE;
use crate::decide::FileTime;
use crate::names::{Name, NameTooLong, Token};

/// What sits between a private file's public name and its random part.
pub const PRIVATE_MARKER: &[u8] = b".private-v1-";
/// The start of an existence proof's name.
pub const PROBE_PREFIX: &[u8] = b".probe-v1-";
/// The end of every private and probe name.
pub const TMP_SUFFIX: &[u8] = b".tmp";
/// How many bytes a private name adds to its public name.
pub const PRIVATE_OVERHEAD: usize = 1 + PRIVATE_MARKER.len() + 32 + TMP_SUFFIX.len();

/// `.<public>.private-v1-<hex32>.tmp`: where the record of `public` is
/// written before its link.
pub fn private_name(public: &[u8], random: &Token) -> Result<Name, NameTooLong> {
    let mut name = Name::new();
    for part in [
        b"." as &[u8],
        public,
        PRIVATE_MARKER,
        &random.hex(),
        TMP_SUFFIX,
    ] {
        name.extend_from_slice(part).map_err(|_| NameTooLong)?;
    }
    Ok(name)
}

/// `.probe-v1-<hex32>.tmp`: a link that proves a claim exists on the
/// server.
pub fn probe_name(random: &Token) -> Name {
    let mut name = Name::new();
    // 10 + 32 + 4 bytes: far below the capacity.
    for part in [PROBE_PREFIX, &random.hex(), TMP_SUFFIX] {
        let _ = name.extend_from_slice(part);
    }
    name
}

fn is_hex32(text: &[u8]) -> bool {
    text.len() == 32 && text.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The public name a private name is for, or `None` when `entry` is no
/// private name: `.`, the public name (possibly empty), the last
/// `.private-v1-` in it, 32 lowercase hex digits, `.tmp`.
pub fn private_public_name(entry: &[u8]) -> Option<&[u8]> {
    // The leading dot and the suffix do not overlap: `.tmp` is no private
    // name, as filelock's slicing of it finds none.
    let middle = entry.strip_prefix(b".")?.strip_suffix(TMP_SUFFIX)?;
    let at = middle
        .windows(PRIVATE_MARKER.len())
        .rposition(|w| w == PRIVATE_MARKER)?;
    is_hex32(&middle[at + PRIVATE_MARKER.len()..]).then_some(&middle[..at])
}

/// Whether `entry` is an existence proof's name.
pub fn is_probe_name(entry: &[u8]) -> bool {
    entry
        .strip_prefix(PROBE_PREFIX)
        .and_then(|rest| rest.strip_suffix(TMP_SUFFIX))
        .is_some_and(is_hex32)
}

/// What a scan makes of one entry of the claims' directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Entry {
    /// A public name that is a valid claim name.
    Claim(ClaimName),
    /// A public name (no leading dot) that is no claim name: the scan
    /// fails ("unknown claim name or protocol version").
    Unknown,
    /// A probe, or a private file of a claim: reaped when
    /// [`reap_private`] says so.
    Litter,
    /// Any other dot name: left alone.
    Ignored,
}

/// Classifies an entry of the claims' directory (`.` and `..` included,
/// which are ignored).
pub fn claims_entry(entry: &[u8]) -> Entry {
    if entry.first() != Some(&b'.') {
        return match ClaimName::parse(entry) {
            Some(name) => Entry::Claim(name),
            None => Entry::Unknown,
        };
    }
    let claim_private = private_public_name(entry).is_some_and(|p| ClaimName::parse(p).is_some());
    match is_probe_name(entry) || claim_private {
        true => Entry::Litter,
        false => Entry::Ignored,
    }
}

/// Whether an entry of the lock's directory is litter of the sentinel's
/// publication: a private file of `lock` (the lock path's final name).
pub fn is_sentinel_litter(entry: &[u8], lock: &[u8]) -> bool {
    private_public_name(entry) == Some(lock)
}

/// What to do with a piece of litter, from its `lstat`.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Reap {
    /// Leave it: a publication may still be under way.
    Keep,
    /// Unlink it.
    Remove,
    /// A node that is no regular file under a private name: the scan fails.
    NotRegular,
}

/// Whether to reap a private or probe file whose `lstat` shows `regular`,
/// `nlink` and `mtime`, given `now`, the filesystem's own clock (the mtime
/// of a file just written, so that no client's clock enters), or `None`
/// when none could be had. A file with another link was published (or is
/// a probe) and goes at once; one with a single link goes once
/// [`PRIVATE_GRACE`] old by the filesystem's clock, never without it.
pub fn reap_private(regular: bool, nlink: u64, mtime: FileTime, now: Option<FileTime>) -> Reap {
    if !regular {
        return Reap::NotRegular;
    }
    if nlink != 1 {
        return Reap::Remove;
    }
    match now.and_then(|now| now.since(mtime)) {
        Some(age) if age >= PRIVATE_GRACE => Reap::Remove,
        _ => Reap::Keep,
    }
}

/// Whether [`reap_private`] needs the filesystem's clock for this file:
/// only a regular file with a single link does.
pub fn needs_clock(regular: bool, nlink: u64) -> bool {
    regular && nlink == 1
}
