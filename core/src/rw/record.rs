//! The records of the log, byte for byte as filelock 4.2.11 writes and
//! reads them (PROTOCOL 16.2): the snapshot `gen/name(N)`, the epoch, HEAD
//! and the holder record `holders/<token>`.
//!
//! Parsers borrow from their input, never allocate and never panic; the
//! encoders refuse any record a reader would not parse back to the same
//! fields (invariant RW2: nothing malformed is ever published, since a
//! malformed generation blocks every participant until an operator
//! removes it).

use super::names::{MAX_GENERATION, MAX_RECORD, PROTOCOL};
use crate::mutant::{active, Mutant};
use crate::names::Token;
use crate::pid::Pid;
use crate::pyfloat;
use core::fmt;

/// Why a snapshot record is malformed (PROTOCOL 16.2).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Malformed {
    /// No bytes at all (a non-regular file reads as none).
    Empty,
    /// Longer than [`MAX_RECORD`] bytes.
    TooLong,
    /// A byte outside ASCII.
    NotAscii,
    /// The first line is not exactly `filelock-rw/1`.
    NotProtocol,
    /// The record does not end in `\n`: a torn or unfinished write.
    NoFinalNewline,
    /// A line that is not `generation=`, `writer=` or `reader=` (an empty
    /// line, one without `=`, an unknown key).
    UnknownLine,
    /// `generation` is not 1 to 20 digits in canonical form, or repeated.
    BadGeneration,
    /// No `generation` line.
    NoGeneration,
    /// `writer` is not a token, or repeated.
    BadWriter,
    /// A `reader` is not a token, or repeated.
    BadReader,
    /// A well-formed snapshot under another generation's name.
    WrongGeneration,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Malformed::Empty => "empty",
            Malformed::TooLong => "longer than 1 MiB",
            Malformed::NotAscii => "not ASCII",
            Malformed::NotProtocol => "first line is not filelock-rw/1",
            Malformed::NoFinalNewline => "does not end in a newline",
            Malformed::UnknownLine => "a line is not generation=, writer= or reader=",
            Malformed::BadGeneration => "generation is not canonical decimal, or repeated",
            Malformed::NoGeneration => "no generation",
            Malformed::BadWriter => "writer is not a token, or repeated",
            Malformed::BadReader => "a reader is not a token, or repeated",
            Malformed::WrongGeneration => "its generation is not the one its name says",
        })
    }
}

/// A parsed snapshot: the lock's state at one generation. The readers are
/// read from the record's own lines, in the record's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot<'a> {
    /// The generation the record says it is.
    pub generation: u128,
    /// The writer, if any.
    pub writer: Option<Token>,
    /// The lines after the protocol line, each ending in `\n`.
    body: &'a [u8],
}

/// The readers of a [`Snapshot`], in the record's order.
#[derive(Clone, Debug)]
pub struct Readers<'a> {
    lines: core::slice::Split<'a, u8, fn(&u8) -> bool>,
}

impl Iterator for Readers<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        self.lines
            .by_ref()
            .find_map(|line| line.strip_prefix(b"reader=").and_then(Token::parse_hex))
    }
}

impl<'a> Snapshot<'a> {
    /// The readers, in the record's order (not necessarily sorted).
    pub fn readers(&self) -> Readers<'a> {
        fn newline(b: &u8) -> bool {
            *b == b'\n'
        }
        Readers {
            lines: self.body.split(newline as fn(&u8) -> bool),
        }
    }

    /// Whether `token` is the writer or a reader.
    pub fn is_member(&self, token: &Token) -> bool {
        self.writer.as_ref() == Some(token) || self.readers().any(|r| r == *token)
    }
}

/// The lines of a record's body.
fn lines_of(body: &[u8]) -> impl Iterator<Item = &[u8]> {
    body.split(|&b| b == b'\n')
}

/// Splits a middle line at its first `=`.
fn key_value(line: &[u8]) -> (&[u8], &[u8]) {
    match line.iter().position(|&b| b == b'=') {
        Some(i) => (&line[..i], &line[i + 1..]),
        None => (line, &[]),
    }
}

/// A generation as a record writes it: 1 to 20 ASCII digits, no leading
/// zero (`0` itself allowed). 20 digits exceed `u64`, hence `u128`.
fn generation_value(value: &[u8]) -> Option<u128> {
    let canonical = value.len() == 1 || value.first() != Some(&b'0');
    if value.is_empty() || value.len() > 20 || !canonical {
        return None;
    }
    super::names::parse_generation_name(&{
        let mut padded = [b'0'; 20];
        padded[20 - value.len()..].copy_from_slice(value);
        padded
    })
}

/// Parses a snapshot record (PROTOCOL 16.2). The caller checks that the
/// generation is the one its name says.
pub fn parse_snapshot(data: &[u8]) -> Result<Snapshot<'_>, Malformed> {
    if data.is_empty() {
        return Err(Malformed::Empty);
    }
    if data.len() > MAX_RECORD {
        return Err(Malformed::TooLong);
    }
    if !data.is_ascii() {
        return Err(Malformed::NotAscii);
    }
    let first_end = data.iter().position(|&b| b == b'\n');
    let first = &data[..first_end.unwrap_or(data.len())];
    if first != PROTOCOL.as_bytes() {
        return Err(Malformed::NotProtocol);
    }
    if data.last() != Some(&b'\n') {
        return Err(Malformed::NoFinalNewline);
    }
    // The record ends in '\n', so its first line does too; after it come
    // the middle lines, each ending in '\n' (none at all is no line).
    let after = &data[first.len() + 1..];
    let body = after.strip_suffix(b"\n").unwrap_or(after);
    let mut generation = None;
    let mut writer = None;
    let mut previous: Option<&[u8]> = None;
    let mut sorted = true;
    let lines = (!after.is_empty())
        .then(|| lines_of(body))
        .into_iter()
        .flatten();
    for (i, line) in lines.enumerate() {
        match key_value(line) {
            (b"generation", value) if generation.is_none() => {
                generation = Some(generation_value(value).ok_or(Malformed::BadGeneration)?);
            }
            (b"generation", _) => return Err(Malformed::BadGeneration),
            (b"writer", value) if writer.is_none() => {
                writer = Some(Token::parse_hex(value).ok_or(Malformed::BadWriter)?);
            }
            (b"writer", _) => return Err(Malformed::BadWriter),
            (b"reader", value) => {
                Token::parse_hex(value).ok_or(Malformed::BadReader)?;
                // Records are written sorted, so a repeat is found by the
                // line before; only a record out of order needs the scan.
                if sorted && previous.is_some_and(|p| p >= value) {
                    sorted = false;
                }
                let repeated = match sorted {
                    true => false,
                    false => lines_of(body)
                        .take(i)
                        .any(|l| key_value(l) == (b"reader" as &[u8], value)),
                };
                if repeated {
                    return Err(Malformed::BadReader);
                }
                previous = Some(value);
            }
            _ => return Err(Malformed::UnknownLine),
        }
    }
    Ok(Snapshot {
        generation: generation.ok_or(Malformed::NoGeneration)?,
        writer,
        body,
    })
}

/// Parses the record read from `gen/name(n)`: a snapshot of generation
/// `n` (PROTOCOL 16.2 step 5). Anything else is malformed, which nothing
/// repairs: every participant then refuses to go on (the caller reports it
/// with the generation's name).
pub fn parse_generation(data: &[u8], n: u128) -> Result<Snapshot<'_>, Malformed> {
    let snapshot = parse_snapshot(data)?;
    match snapshot.generation == n {
        true => Ok(snapshot),
        false => Err(Malformed::WrongGeneration),
    }
}

/// Why a record cannot be encoded.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Invalid {
    /// The generation is past [`MAX_GENERATION`]: no name can carry it.
    Generation,
    /// The readers are not in strictly ascending order (see [`normalize`]).
    Readers,
    /// The record would pass [`MAX_RECORD`] bytes: readers would take it
    /// for malformed.
    TooLong,
    /// The host name is not ASCII, or holds a line break.
    Host,
    /// The lease is not finite and positive.
    Lease,
    /// The caller's buffer is too small for the record (its length).
    BufferTooSmall(usize),
}

/// Sorts `readers` and moves each repeated token out of the way; returns
/// how many come first, unique and ascending, as a snapshot lists them.
pub fn normalize(readers: &mut [Token]) -> usize {
    readers.sort_unstable_by_key(|t| t.0);
    let mut unique = 0;
    for i in 0..readers.len() {
        if unique == 0 || readers[unique - 1] != readers[i] {
            readers.swap(unique, i);
            unique += 1;
        }
    }
    unique
}

/// A snapshot to encode: its readers ascending and unique ([`normalize`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotRecord<'r> {
    /// The generation.
    pub generation: u128,
    /// The writer, if any.
    pub writer: Option<Token>,
    /// The readers, strictly ascending.
    pub readers: &'r [Token],
}

fn digits_of(n: u128, buf: &mut [u8; 39]) -> &[u8] {
    let mut at = buf.len();
    let mut rest = n;
    loop {
        at -= 1;
        // rest % 10 is below 10, so the cast cannot truncate.
        buf[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            return &buf[at..];
        }
    }
}

impl SnapshotRecord<'_> {
    fn emit<E>(&self, out: &mut dyn FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        let mut digits = [0u8; 39];
        out(PROTOCOL.as_bytes())?;
        out(b"\ngeneration=")?;
        out(digits_of(self.generation, &mut digits))?;
        out(b"\n")?;
        if let Some(w) = &self.writer {
            out(b"writer=")?;
            out(&w.hex())?;
            out(b"\n")?;
        }
        for r in self.readers {
            out(b"reader=")?;
            out(&r.hex())?;
            out(b"\n")?;
        }
        Ok(())
    }

    /// The encoded length: 26 bytes, the generation's digits, and 40 per
    /// member.
    pub fn encoded_len(&self) -> usize {
        let mut digits = [0u8; 39];
        let members = self.readers.len() + usize::from(self.writer.is_some());
        26 + digits_of(self.generation, &mut digits).len() + 40 * members
    }

    /// Checks that a reader would parse the encoded record back to these
    /// fields.
    pub fn validate(&self) -> Result<(), Invalid> {
        if self.generation > MAX_GENERATION {
            return Err(Invalid::Generation);
        }
        if self.readers.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(Invalid::Readers);
        }
        if self.encoded_len() > MAX_RECORD {
            return Err(Invalid::TooLong);
        }
        Ok(())
    }

    /// Encodes the record into `buf`; returns its length.
    pub fn encode(&self, buf: &mut [u8]) -> Result<usize, Invalid> {
        self.validate()?;
        let len = self.encoded_len();
        let dest = buf.get_mut(..len).ok_or(Invalid::BufferTooSmall(len))?;
        let mut at = 0;
        let _ = self.emit::<core::convert::Infallible>(&mut |bytes| {
            dest[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
            Ok(())
        });
        Ok(len)
    }

    /// Encodes the record into a writer.
    pub fn write_to<W: embedded_io::Write>(&self, out: &mut W) -> Result<(), WriteError<W::Error>> {
        self.validate().map_err(WriteError::Invalid)?;
        self.emit(&mut |bytes| out.write_all(bytes))
            .map_err(WriteError::Write)
    }
}

/// A failure to encode into a writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteError<E> {
    /// The record itself cannot be encoded.
    Invalid(Invalid),
    /// The writer failed.
    Write(E),
}

/// The epoch's length: a token and `\n`.
pub const EPOCH_LEN: usize = 33;

/// The epoch record `<hex32>\n` for `token` (PROTOCOL 16.2).
pub fn encode_epoch(token: &Token) -> [u8; EPOCH_LEN] {
    let mut out = [b'\n'; EPOCH_LEN];
    out[..32].copy_from_slice(&token.hex());
    out
}

/// Whether the epoch's bytes name an incarnation HEAD can be bound to:
/// less one trailing `\n`, a token. (Every epoch is compared as raw bytes;
/// only a valid one is ever written into, or trusted from, HEAD.)
pub fn is_valid_epoch(epoch: &[u8]) -> bool {
    let text = epoch.strip_suffix(b"\n").unwrap_or(epoch);
    Token::parse_hex(text).is_some()
}

/// Whether filelock binds HEAD to `epoch`: it is valid, and ends with the
/// `\n` that ends HEAD's first line. (A token without its `\n` is valid,
/// yet no first line can equal it.)
pub fn filelock_binds(epoch: &[u8]) -> bool {
    is_valid_epoch(epoch) && epoch.ends_with(b"\n")
}

/// The record HEAD carries after the epoch `epoch`, if `head` is bound to
/// it (PROTOCOL 16.2). Where filelock binds ([`filelock_binds`]), as it
/// reads it: HEAD's first line, with its `\n`, is exactly the epoch; the
/// record itself may still be malformed. Under any other epoch of at most
/// [`EPOCH_LEN`] bytes (torn: a creator killed before its write, or cut
/// before its `\n`), which filelock never binds a HEAD to, swaplock's
/// binding: HEAD starts with the epoch's exact bytes and the rest parses
/// as a snapshot (the parse tells such a HEAD from an empty one, or from
/// one of a valid epoch). A HEAD of another incarnation, or one torn before
/// its first line ended, gives `None`.
pub fn head_record<'a>(head: &'a [u8], epoch: Option<&[u8]>) -> Option<&'a [u8]> {
    let epoch = epoch?;
    if !filelock_binds(epoch) {
        let rest = head.strip_prefix(epoch)?;
        let torn = epoch.len() <= EPOCH_LEN && !active(Mutant::RwTornEpochUnbound);
        return (torn && parse_snapshot(rest).is_ok()).then_some(rest);
    }
    let split = head
        .iter()
        .position(|&b| b == b'\n')
        .map_or(head.len(), |i| i + 1);
    (&head[..split] == epoch).then_some(&head[split..])
}

/// The generation HEAD names under the epoch `epoch`: [`head_record`],
/// parsed as a snapshot, only where filelock binds HEAD too. Only the
/// generation is ever taken from HEAD. A HEAD bound by swaplock alone
/// names none: only swaplock moves it under a torn epoch, so it may lag
/// the log by any number of windows (its generation would start a probe of
/// patience 1 far behind), and it says only that the log is not new
/// (PROTOCOL 16.9).
pub fn head_generation(head: &[u8], epoch: Option<&[u8]>) -> Option<u128> {
    let epoch = epoch.filter(|e| filelock_binds(e));
    parse_snapshot(head_record(head, epoch)?)
        .ok()
        .map(|s| s.generation)
}

/// A holder record `holders/<token>` to encode (PROTOCOL 16.2).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HolderRecord<'a> {
    /// The participant's token (the record's name).
    pub token: Token,
    /// The writing process.
    pub pid: Pid,
    /// Its host name (PROTOCOL 4.1).
    pub host: &'a str,
    /// Its own stale threshold in seconds, which evictors honour.
    pub lease: f64,
    /// What changes at each refresh.
    pub nonce: Token,
}

impl HolderRecord<'_> {
    fn emit<E>(&self, out: &mut dyn FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        let mut pid = [0u8; 20];
        out(PROTOCOL.as_bytes())?;
        out(b"\ntoken=")?;
        out(&self.token.hex())?;
        out(b"\npid=")?;
        out(crate::names::format_u64(
            u64::from(self.pid.get()),
            &mut pid,
        ))?;
        out(b"\nhost=")?;
        out(self.host.as_bytes())?;
        out(b"\nlease=")?;
        out(pyfloat::repr(self.lease).as_bytes())?;
        out(b"\nnonce=")?;
        out(&self.nonce.hex())?;
        out(b"\n")
    }

    /// The encoded length.
    pub fn encoded_len(&self) -> usize {
        let mut n = 0;
        let _ = self.emit::<core::convert::Infallible>(&mut |b| {
            n += b.len();
            Ok(())
        });
        n
    }

    /// Checks that a reader takes the record as written: an ASCII host on
    /// one line, and a lease [`holder_lease`] reads back.
    pub fn validate(&self) -> Result<(), Invalid> {
        if !self.host.is_ascii() || self.host.contains('\n') {
            return Err(Invalid::Host);
        }
        if !(self.lease.is_finite() && self.lease > 0.0) {
            return Err(Invalid::Lease);
        }
        if self.encoded_len() > MAX_RECORD {
            return Err(Invalid::TooLong);
        }
        Ok(())
    }

    /// Encodes the record into `buf`; returns its length.
    pub fn encode(&self, buf: &mut [u8]) -> Result<usize, Invalid> {
        self.validate()?;
        let len = self.encoded_len();
        let dest = buf.get_mut(..len).ok_or(Invalid::BufferTooSmall(len))?;
        let mut at = 0;
        let _ = self.emit::<core::convert::Infallible>(&mut |bytes| {
            dest[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
            Ok(())
        });
        Ok(len)
    }
}

/// The ASCII lines of a holder record, or `None` for a record that is not
/// ASCII (filelock then reads nothing from it).
fn ascii_lines(record: &[u8]) -> Option<impl Iterator<Item = &[u8]>> {
    record.is_ascii().then(|| record.split(|&b| b == b'\n'))
}

/// The lease a holder record carries (PROTOCOL 16.2): the first line
/// starting `lease=`, a finite duration above zero spelt exactly as
/// Python's `repr` spells it; `None` otherwise (`90`, `1_0.0`, ` 90.0`,
/// `inf`, `0.0`, a record that is not ASCII).
pub fn holder_lease(record: &[u8]) -> Option<f64> {
    let text = ascii_lines(record)?.find_map(|l| l.strip_prefix(b"lease="))?;
    // ASCII, so UTF-8.
    let text = core::str::from_utf8(text).ok()?;
    let value: f64 = text.parse().ok()?;
    let exact = value.is_finite() && value > 0.0 && pyfloat::repr(value).as_str() == text;
    exact.then_some(value)
}

/// What a holder record says of its writer, for a report: the first
/// `token=`, `pid=` and `host=` lines, and [`holder_lease`]. The protocol
/// itself reads only the lease.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HolderInfo<'a> {
    /// The `token=` value, as written.
    pub token: Option<&'a str>,
    /// The `pid=` value, when it is a PID.
    pub pid: Option<Pid>,
    /// The `host=` value.
    pub host: Option<&'a str>,
    /// The lease ([`holder_lease`]).
    pub lease: Option<f64>,
}

/// Reads a holder record for a report ([`HolderInfo`]).
pub fn holder_info(record: &[u8]) -> HolderInfo<'_> {
    let mut info = HolderInfo {
        lease: holder_lease(record),
        ..HolderInfo::default()
    };
    let Some(lines) = ascii_lines(record) else {
        return info;
    };
    for line in lines {
        match key_value(line) {
            // ASCII, so UTF-8.
            (b"token", v) if info.token.is_none() => info.token = core::str::from_utf8(v).ok(),
            (b"pid", v) if info.pid.is_none() => info.pid = Pid::parse_decimal(v),
            (b"host", v) if info.host.is_none() => info.host = core::str::from_utf8(v).ok(),
            _ => {}
        }
    }
    info
}
