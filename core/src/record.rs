//! The records a soft lock keeps in its marker file, byte-compatible with
//! Python filelock 4.2.11 (PROTOCOL 2 and 3).
//!
//! Parsing takes the bytes read from the marker (at most [`READ_LIMIT`]),
//! never panics, never allocates, borrows every field from the input, and
//! says why a record is malformed. Encoding refuses any record that a reader
//! would not parse back to the same fields, so this crate never publishes a
//! marker that a peer would age out as malformed.
//!
//! Kinds of content, as a contender sees them ([`classify`]):
//! - protocol 1 (`SoftFileLock`): `<pid>\n<host>\n[<start>\n]`;
//! - protocol 2 (`MarkerSoftFileLock`, `SoftFileLease`): `filelock/2` and
//!   `key=value` lines;
//! - the break placeholder `filelock/break\n<pid>\n`, which no parser accepts
//!   as a holder but which names a breaker that may have died;
//! - the released record `filelock/released\n`;
//! - the strict sentinel and the empty ("recordless") marker, held forever.

use crate::decimal::Decimal;
use crate::pid::Pid;
use crate::pyfloat;
use crate::pytext::{is_py_line_break, is_py_space, lines, strip};
use core::fmt;

/// The largest record a reader accepts, in bytes; a longer file is malformed.
pub const MAX_RECORD_LEN: usize = 1024;
/// How many bytes a reader reads at most: one more than [`MAX_RECORD_LEN`],
/// so that an over-long file is seen to be over-long.
pub const READ_LIMIT: usize = MAX_RECORD_LEN + 1;
/// The first line of a protocol 2 record.
pub const PROTOCOL_2: &str = "filelock/2";
/// The record a holder writes into its own file once a peer holds it aside.
pub const RELEASED: &[u8] = b"filelock/released\n";
/// The content of a strict lock's sentinel, which soft locks treat as a
/// permanent holder.
pub const STRICT_SENTINEL: &[u8] = b"1\nfilelock-strict-v1\x00\n0\n";
/// The first line of a break placeholder, with its line end.
pub const PLACEHOLDER_PREFIX: &str = "filelock/break\n";

/// Why a marker's content is not a record.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Malformed {
    /// The node at the lock path is not a regular file (a symlink, FIFO, ...).
    NotRegular,
    /// More than [`MAX_RECORD_LEN`] bytes.
    TooLong,
    /// Not strict UTF-8.
    NotUtf8,
    /// No content at all (only malformed to a parser; see [`classify`]).
    Empty,
    /// The last byte is not `\n`: a torn or unfinished write.
    NoTrailingNewline,
    /// Protocol 1 needs exactly 2 or 3 lines after stripping.
    LineCount,
    /// The PID is not ASCII digits.
    BadPid,
    /// The PID is outside 1..=2³¹−1.
    PidOutOfRange,
    /// The start token is not ASCII digits.
    BadStart,
    /// The first line is not exactly `filelock/2`.
    NotProtocol2,
    /// A protocol 2 line has no `=`.
    MissingEquals,
    /// A protocol 2 record has no `mode=` line.
    MissingMode,
    /// A protocol 2 record has no `host=` line, or an empty host.
    MissingHost,
    /// A protocol 2 record has no `pid=` line.
    MissingPid,
    /// The duration does not match `[0-9]+(\.[0-9]+)?(e[+-][0-9]+)?`.
    BadDuration,
    /// A lease without a non-empty token.
    LeaseWithoutToken,
    /// A lease without a duration, or one that is not finite and positive.
    LeaseWithoutDuration,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Malformed::NotRegular => "not a regular file",
            Malformed::TooLong => "longer than 1024 bytes",
            Malformed::NotUtf8 => "not UTF-8",
            Malformed::Empty => "empty",
            Malformed::NoTrailingNewline => "does not end in a newline",
            Malformed::LineCount => "not 2 or 3 lines",
            Malformed::BadPid => "PID is not decimal digits",
            Malformed::PidOutOfRange => "PID outside 1..=2147483647",
            Malformed::BadStart => "start token is not decimal digits",
            Malformed::NotProtocol2 => "first line is not filelock/2",
            Malformed::MissingEquals => "a line has no '='",
            Malformed::MissingMode => "no mode",
            Malformed::MissingHost => "no host",
            Malformed::MissingPid => "no pid",
            Malformed::BadDuration => "duration is not a decimal number",
            Malformed::LeaseWithoutToken => "lease without a token",
            Malformed::LeaseWithoutDuration => "lease without a finite positive duration",
        })
    }
}

/// What a read of the lock path returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Content<'a> {
    /// The node is not a regular file; nothing was read.
    NotRegular,
    /// The bytes read, up to [`READ_LIMIT`] of them.
    Bytes(&'a [u8]),
}

/// Decodes the bytes of a marker as a reader does: over [`MAX_RECORD_LEN`]
/// bytes or not strict UTF-8 (a byte-order mark is kept as U+FEFF) is
/// malformed.
pub fn decode(content: Content<'_>) -> Result<&str, Malformed> {
    match content {
        Content::NotRegular => Err(Malformed::NotRegular),
        Content::Bytes(bytes) if bytes.len() > MAX_RECORD_LEN => Err(Malformed::TooLong),
        Content::Bytes(bytes) => core::str::from_utf8(bytes).map_err(|_| Malformed::NotUtf8),
    }
}

fn nonempty_with_newline(text: &str) -> Result<(), Malformed> {
    if text.is_empty() {
        Err(Malformed::Empty)
    } else if !text.ends_with('\n') {
        Err(Malformed::NoTrailingNewline)
    } else {
        Ok(())
    }
}

fn parse_pid(digits: &str) -> Result<Pid, Malformed> {
    let value = Decimal::parse(digits.as_bytes()).ok_or(Malformed::BadPid)?;
    Pid::parse_decimal(value.as_str().as_bytes()).ok_or(Malformed::PidOutOfRange)
}

fn parse_start(digits: &str) -> Result<Decimal<'_>, Malformed> {
    Decimal::parse(digits.as_bytes()).ok_or(Malformed::BadStart)
}

/// The owner a record names: what the staleness verdict needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Owner<'a> {
    /// The holder's PID on its host.
    pub pid: Pid,
    /// The holder's host name, as `host_name()` wrote it.
    pub host: &'a str,
    /// The holder's process start token, when it recorded one.
    pub start: Option<Decimal<'a>>,
}

/// A protocol 1 record: `<pid>\n<host>\n[<start>\n]` (`SoftFileLock`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct V1Record<'a> {
    /// The holder's PID.
    pub pid: Pid,
    /// The holder's host name, verbatim.
    pub host: &'a str,
    /// The holder's start token, when the third line is present.
    pub start: Option<Decimal<'a>>,
}

impl<'a> V1Record<'a> {
    /// Parses a protocol 1 record from decoded text (PROTOCOL 3.2).
    pub fn parse(text: &'a str) -> Result<Self, Malformed> {
        nonempty_with_newline(text)?;
        let mut it = lines(strip(text));
        let (Some(pid), Some(host), start, None) = (it.next(), it.next(), it.next(), it.next())
        else {
            return Err(Malformed::LineCount);
        };
        let pid = parse_pid(pid)?;
        let start = start.map(parse_start).transpose()?;
        Ok(V1Record { pid, host, start })
    }

    /// The owner this record names.
    pub fn owner(&self) -> Owner<'a> {
        Owner {
            pid: self.pid,
            host: self.host,
            start: self.start,
        }
    }

    fn emit<E>(&self, put: &mut dyn FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        put_pid(put, self.pid)?;
        put(b"\n")?;
        put(self.host.as_bytes())?;
        put(b"\n")?;
        if let Some(start) = self.start {
            put(start.as_str().as_bytes())?;
            put(b"\n")?;
        }
        Ok(())
    }

    fn check(&self) -> Result<(), Invalid> {
        check_text(self.host)?;
        // Without a start line the host is the last line, and a trailing
        // blank or an empty host would be stripped away by a reader.
        if self.start.is_none() && (self.host.is_empty() || self.host.ends_with(is_py_space)) {
            return Err(Invalid::HostStripped);
        }
        Ok(())
    }
}

/// The contract a protocol 2 record declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Mode<'a> {
    /// `mode=exclusive`: held while the owner lives (`MarkerSoftFileLock`).
    Exclusive,
    /// `mode=lease`: held while the owner refreshes it (`SoftFileLease`).
    Lease,
    /// Any other value, the empty one included: a contract this version does
    /// not know, which is never reclaimed.
    Unknown(&'a str),
}

impl<'a> Mode<'a> {
    fn parse(value: &'a str) -> Self {
        match value {
            "exclusive" => Mode::Exclusive,
            "lease" => Mode::Lease,
            other => Mode::Unknown(other),
        }
    }

    /// The value as written after `mode=`.
    pub fn as_str(&self) -> &'a str {
        match self {
            Mode::Exclusive => "exclusive",
            Mode::Lease => "lease",
            Mode::Unknown(other) => other,
        }
    }
}

/// A protocol 2 record (`MarkerSoftFileLock`, `SoftFileLease`).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct V2Record<'a> {
    /// The holder's PID.
    pub pid: Pid,
    /// The holder's host name; never empty.
    pub host: &'a str,
    /// The declared contract.
    pub mode: Mode<'a>,
    /// The lease's claim token (a lease always has a non-empty one).
    pub token: Option<&'a str>,
    /// The lease duration in seconds (a lease always has a finite positive one).
    pub duration: Option<f64>,
    /// The holder's start token, when it recorded one.
    pub start: Option<Decimal<'a>>,
}

impl<'a> V2Record<'a> {
    /// Parses a protocol 2 record from decoded text (PROTOCOL 3.3).
    pub fn parse(text: &'a str) -> Result<Self, Malformed> {
        nonempty_with_newline(text)?;
        let mut it = lines(strip(text));
        if it.next() != Some(PROTOCOL_2) {
            return Err(Malformed::NotProtocol2);
        }
        let (mut pid, mut host, mut mode, mut token, mut duration, mut start) =
            (None, None, None, None, None, None);
        for line in it {
            let (key, value) = line.split_once('=').ok_or(Malformed::MissingEquals)?;
            // A repeated key keeps its last value; unknown keys are a newer
            // writer's fields and are ignored.
            match key {
                "pid" => pid = Some(value),
                "host" => host = Some(value),
                "mode" => mode = Some(value),
                "token" => token = Some(value),
                "duration" => duration = Some(value),
                "start" => start = Some(value),
                _ => {}
            }
        }
        let mode = Mode::parse(mode.ok_or(Malformed::MissingMode)?);
        let host = host
            .filter(|h| !h.is_empty())
            .ok_or(Malformed::MissingHost)?;
        let pid = parse_pid(pid.ok_or(Malformed::MissingPid)?)?;
        let duration = match duration {
            None => None,
            Some(text) if pyfloat::is_duration_text(text.as_bytes()) => {
                // The grammar is a subset of what `f64::from_str` reads, with
                // correct rounding; an out-of-range value reads as infinity.
                Some(text.parse::<f64>().map_err(|_| Malformed::BadDuration)?)
            }
            Some(_) => return Err(Malformed::BadDuration),
        };
        let start = start.map(parse_start).transpose()?;
        if mode == Mode::Lease {
            if token.is_none_or(str::is_empty) {
                return Err(Malformed::LeaseWithoutToken);
            }
            if !duration.is_some_and(|d| d.is_finite() && d > 0.0) {
                return Err(Malformed::LeaseWithoutDuration);
            }
        }
        Ok(V2Record {
            pid,
            host,
            mode,
            token,
            duration,
            start,
        })
    }

    /// The owner this record names.
    pub fn owner(&self) -> Owner<'a> {
        Owner {
            pid: self.pid,
            host: self.host,
            start: self.start,
        }
    }

    fn emit<E>(&self, put: &mut dyn FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        put(PROTOCOL_2.as_bytes())?;
        put(b"\npid=")?;
        put_pid(put, self.pid)?;
        put(b"\nhost=")?;
        put(self.host.as_bytes())?;
        put(b"\nmode=")?;
        put(self.mode.as_str().as_bytes())?;
        put(b"\n")?;
        if let Some(token) = self.token {
            put(b"token=")?;
            put(token.as_bytes())?;
            put(b"\n")?;
        }
        if let Some(duration) = self.duration {
            put(b"duration=")?;
            put(pyfloat::repr(duration).as_bytes())?;
            put(b"\n")?;
        }
        if let Some(start) = self.start {
            put(b"start=")?;
            put(start.as_str().as_bytes())?;
            put(b"\n")?;
        }
        Ok(())
    }

    fn check(&self) -> Result<(), Invalid> {
        check_text(self.host)?;
        check_text(self.mode.as_str())?;
        if let Some(token) = self.token {
            check_text(token)?;
        }
        if self.host.is_empty() {
            return Err(Invalid::HostStripped);
        }
        if let Mode::Unknown(name) = self.mode {
            if name == "exclusive" || name == "lease" {
                return Err(Invalid::AmbiguousMode);
            }
        }
        if let Some(d) = self.duration {
            // Only a finite, non-negative double has a repr the grammar reads.
            if !d.is_finite() || d.is_sign_negative() {
                return Err(Invalid::Duration);
            }
        }
        if self.mode == Mode::Lease {
            if self.token.is_none_or(str::is_empty) {
                return Err(Invalid::LeaseToken);
            }
            if !self.duration.is_some_and(|d| d > 0.0) {
                return Err(Invalid::Duration);
            }
        }
        // The last line must survive the reader's strip().
        let last = match (self.start, self.duration, self.token) {
            (Some(_), _, _) | (None, Some(_), _) => "",
            (None, None, Some(token)) => token,
            (None, None, None) => self.mode.as_str(),
        };
        if last.ends_with(is_py_space) {
            return Err(Invalid::TrailingSpace);
        }
        Ok(())
    }
}

/// Reads the breaker PID out of a break placeholder (PROTOCOL 3.4): the
/// content must start with `filelock/break\n`, end with `\n`, and hold only
/// ASCII digits between the two. No range check applies, so `0` and PIDs
/// beyond 2³¹−1 are returned too; they still name break files to look for.
pub fn parse_placeholder(text: &str) -> Option<Decimal<'_>> {
    let body = text.strip_prefix(PLACEHOLDER_PREFIX)?.strip_suffix('\n')?;
    Decimal::parse(body.as_bytes())
}

/// Which records a contender reads: filelock's `SoftFileLock` knows only
/// protocol 1; `MarkerSoftFileLock` and `SoftFileLease` read protocol 2 and
/// fall back to protocol 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Reader {
    /// A protocol 1 reader (`SoftFileLock`).
    Protocol1,
    /// A protocol 2 reader (`MarkerSoftFileLock`, `SoftFileLease`).
    Protocol2,
}

/// What a contender makes of the content at the lock path (PROTOCOL 3.5).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Classified<'a> {
    /// Exactly the strict sentinel: held forever, never judged stale.
    Sentinel,
    /// An empty file: held forever, never judged stale (an owner that
    /// records nothing, or one between its create and its write).
    Recordless,
    /// A protocol 1 record: judge its owner.
    V1(V1Record<'a>),
    /// A protocol 2 record (protocol 2 readers only): judge per mode.
    V2(V2Record<'a>),
    /// Anything else: evict once unchanged for the malformed grace period.
    Malformed(Malformed),
}

/// Classifies the content at the lock path for a reader (PROTOCOL 3.5).
pub fn classify(content: Content<'_>, reader: Reader) -> Classified<'_> {
    let text = match decode(content) {
        Ok(text) => text,
        Err(why) => return Classified::Malformed(why),
    };
    let v2_error = match reader {
        Reader::Protocol2 => match V2Record::parse(text) {
            Ok(record) => return Classified::V2(record),
            Err(why) => Some(why),
        },
        Reader::Protocol1 => None,
    };
    if text.as_bytes() == STRICT_SENTINEL {
        return Classified::Sentinel;
    }
    if text.is_empty() {
        return Classified::Recordless;
    }
    match V1Record::parse(text) {
        Ok(record) => Classified::V1(record),
        Err(why) => match (reader, v2_error, text.starts_with(PROTOCOL_2)) {
            // A protocol 1 reader that finds a valid protocol 2 record judges
            // it as a protocol 2 reader would, where filelock's SoftFileLock
            // takes it for malformed and removes it after 2 s unchanged: a
            // MarkerSoftFileLock holder writes once, so that would be a
            // second holder beside a live one (PROTOCOL 3.5, 12.2).
            // Whatever precedes its first line: filelock's protocol 2
            // parser strips what Python takes for whitespace there (`\r`,
            // `\x1c` to `\x1f`), and so does ours.
            (Reader::Protocol1, None, looks_v2) => match (V2Record::parse(text), looks_v2) {
                (Ok(record), _) => Classified::V2(record),
                (Err(v2), true) => Classified::Malformed(v2),
                (Err(_), false) => Classified::Malformed(why),
            },
            // A protocol 2 reader reports why the text is not protocol 2 when
            // it does not even look like protocol 1.
            (_, Some(v2), true) => Classified::Malformed(v2),
            _ => Classified::Malformed(why),
        },
    }
}

/// Why a record cannot be encoded: a reader would not parse it back to the
/// same fields.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Invalid {
    /// A field holds a character that a reader takes as a line break.
    LineBreak,
    /// The host is empty or, as the last line, ends in whitespace a reader strips.
    HostStripped,
    /// The last line ends in whitespace a reader strips.
    TrailingSpace,
    /// `Mode::Unknown` holding `exclusive` or `lease`.
    AmbiguousMode,
    /// A lease without a non-empty token.
    LeaseToken,
    /// A duration that is not finite and non-negative (positive for a lease).
    Duration,
    /// Longer than [`MAX_RECORD_LEN`].
    TooLong,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Invalid::LineBreak => "a field holds a line break",
            Invalid::HostStripped => "the host would be stripped by a reader",
            Invalid::TrailingSpace => "the last line ends in whitespace",
            Invalid::AmbiguousMode => "an unknown mode spelled as a known one",
            Invalid::LeaseToken => "a lease needs a non-empty token",
            Invalid::Duration => "the duration is not finite and positive",
            Invalid::TooLong => "the record is longer than 1024 bytes",
        })
    }
}

/// An error from encoding a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EncodeError<E> {
    /// The record would not read back as written.
    Invalid(Invalid),
    /// The caller's buffer is too small; the record needs this many bytes.
    BufferTooSmall(usize),
    /// The writer failed.
    Write(E),
}

impl<E: fmt::Debug> fmt::Display for EncodeError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::Invalid(why) => write!(f, "record not encodable: {why}"),
            EncodeError::BufferTooSmall(n) => write!(f, "buffer too small: record needs {n} bytes"),
            EncodeError::Write(e) => write!(f, "write failed: {e:?}"),
        }
    }
}

fn check_text(field: &str) -> Result<(), Invalid> {
    if field.contains(is_py_line_break) {
        Err(Invalid::LineBreak)
    } else {
        Ok(())
    }
}

fn put_pid<E>(put: &mut dyn FnMut(&[u8]) -> Result<(), E>, pid: Pid) -> Result<(), E> {
    let mut buf = [0u8; 10];
    put(crate::names::format_u64(u64::from(pid.get()), &mut buf))
}

/// A record this crate writes into a marker file.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Record<'a> {
    /// Protocol 1, for `SoftFileLock`.
    V1(V1Record<'a>),
    /// Protocol 2, for `MarkerSoftFileLock` and `SoftFileLease`.
    V2(V2Record<'a>),
    /// The break placeholder `filelock/break\n<pid>\n`, naming the breaker.
    Placeholder(Pid),
    /// `filelock/released\n`.
    Released,
}

impl Record<'_> {
    fn emit<E>(&self, put: &mut dyn FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        match self {
            Record::V1(r) => r.emit(put),
            Record::V2(r) => r.emit(put),
            Record::Placeholder(pid) => {
                put(PLACEHOLDER_PREFIX.as_bytes())?;
                put_pid(put, *pid)?;
                put(b"\n")
            }
            Record::Released => put(RELEASED),
        }
    }

    /// The encoded length in bytes (whether or not the record is valid).
    pub fn encoded_len(&self) -> usize {
        let mut n = 0;
        let _ = self.emit::<core::convert::Infallible>(&mut |bytes| {
            n += bytes.len();
            Ok(())
        });
        n
    }

    /// Checks that a reader would parse the encoded record back to these fields.
    pub fn validate(&self) -> Result<(), Invalid> {
        match self {
            Record::V1(r) => r.check()?,
            Record::V2(r) => r.check()?,
            Record::Placeholder(_) | Record::Released => {}
        }
        if self.encoded_len() > MAX_RECORD_LEN {
            return Err(Invalid::TooLong);
        }
        Ok(())
    }

    /// Encodes the record into `buf`, returning the number of bytes written.
    pub fn encode(&self, buf: &mut [u8]) -> Result<usize, EncodeError<core::convert::Infallible>> {
        self.validate().map_err(EncodeError::Invalid)?;
        let len = self.encoded_len();
        let Some(dest) = buf.get_mut(..len) else {
            return Err(EncodeError::BufferTooSmall(len));
        };
        let mut at = 0;
        let _ = self.emit::<core::convert::Infallible>(&mut |bytes| {
            dest[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
            Ok(())
        });
        Ok(len)
    }

    /// Encodes the record into a writer with `write_all` calls.
    pub fn write_to<W: embedded_io::Write>(
        &self,
        out: &mut W,
    ) -> Result<(), EncodeError<W::Error>> {
        self.validate().map_err(EncodeError::Invalid)?;
        self.emit(&mut |bytes| out.write_all(bytes))
            .map_err(EncodeError::Write)
    }
}

#[cfg(test)]
mod tests;
