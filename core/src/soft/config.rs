//! What an attempt knows of the lock and of this process ([`Config`]),
//! the record it publishes ([`own_record`], PROTOCOL 2), and the errors
//! that end an acquire or a release.

use crate::errno::Errno;
use crate::names::{NameTooLong, Token};
use crate::pid::Pid;
use crate::record::{Mode, Reader, Record, V1Record, V2Record, MAX_RECORD_LEN};
use crate::start::{StartToken, START_DIGITS_MAX};
use core::fmt;
use core::time::Duration;

/// Which soft lock, and so which record it writes and which it reads.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Kind {
    /// `SoftFileLock`: protocol 1 records.
    Soft,
    /// `MarkerSoftFileLock`: protocol 2, `mode=exclusive`.
    Marker,
    /// `SoftFileLease`: protocol 2, `mode=lease`, expiring unless refreshed.
    Lease,
}

impl Kind {
    /// How this kind reads a marker (PROTOCOL 3.5).
    pub fn reader(self) -> Reader {
        match self {
            Kind::Soft => Reader::Protocol1,
            Kind::Marker | Kind::Lease => Reader::Protocol2,
        }
    }
}

/// The terms of a lease this process publishes.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LeaseTerms {
    /// The lease duration in seconds (finite, positive).
    pub duration: f64,
    /// This acquisition's claim token.
    pub token: Token,
}

/// Everything an attempt needs to know about the lock and this process.
#[derive(Clone, Copy, Debug)]
pub struct Config<'a> {
    /// The kind of soft lock.
    pub kind: Kind,
    /// The lock file's final path component.
    pub lock: &'a [u8],
    /// This process's PID.
    pub pid: Pid,
    /// This process's host name as records carry it.
    pub host: &'a str,
    /// This process's start token, when it can be computed exactly.
    pub start: Option<StartToken>,
    /// An explicit file mode for our markers (`None`: 0o666, less 0o022).
    pub mode: Option<u32>,
    /// The lease terms (required for [`Kind::Lease`]).
    pub lease: Option<LeaseTerms>,
    /// Break markers older than this by their mtime (Soft and Marker only).
    pub lifetime: Option<Duration>,
    /// Whether our record reaches stable storage before a name publishes
    /// it (PROTOCOL 7.2 step 3), so that a power cut never leaves our
    /// marker empty, a wedge (I10). Off, an acquire saves an `fsync`.
    pub durable: bool,
}

impl Config<'_> {
    /// The mode our marker files are created with (PROTOCOL 2.8).
    pub fn marker_mode(&self) -> u32 {
        self.mode.unwrap_or(0o666) & !0o022
    }
}

/// An error that ends an acquire or release.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error {
    /// A syscall failed.
    Os {
        /// Which operation.
        op: Op,
        /// The error it returned.
        errno: Errno,
    },
    /// The lock path is a directory.
    IsDirectory,
    /// The lock file's name is longer than
    /// [`MAX_LOCK_NAME`](crate::names::MAX_LOCK_NAME) bytes, so the names
    /// derived from it (break and restore names) would not fit in a file
    /// name.
    NameTooLong,
    /// Our own record cannot be encoded (a host or token a reader would
    /// not read back).
    Record,
    /// A lease holder published a duration other than ours (invariant I20).
    LeaseMismatch {
        /// The holder's duration in seconds.
        published: f64,
    },
}

/// The operation an [`Error::Os`] comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Op {
    /// Creating the marker.
    Create,
    /// Examining the lock path.
    Stat,
    /// Opening or reading the marker to learn its holder.
    Read,
    /// Writing the record.
    Write,
    /// Removing the marker.
    Remove,
    /// Closing the marker.
    Close,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Os { op, errno } => write!(f, "{op:?} failed: {errno}"),
            Error::IsDirectory => f.write_str("the lock path is a directory"),
            Error::NameTooLong => write!(
                f,
                "the lock file name is longer than {} bytes, so its break and restore names would not fit",
                crate::names::MAX_LOCK_NAME
            ),
            Error::Record => f.write_str("this process's record cannot be encoded"),
            Error::LeaseMismatch { published } => {
                write!(f, "the holder's lease lasts {published}s")
            }
        }
    }
}

impl From<NameTooLong> for Error {
    fn from(_: NameTooLong) -> Self {
        Error::NameTooLong
    }
}

/// Encodes this process's record for its kind into `buf` (PROTOCOL 2.1-2.3).
pub fn own_record(cfg: &Config<'_>, buf: &mut [u8; MAX_RECORD_LEN]) -> Result<usize, Error> {
    let mut start_digits = [0u8; START_DIGITS_MAX];
    let start = cfg.start.map(|s| s.to_decimal(&mut start_digits));
    let token_hex;
    let record = match cfg.kind {
        Kind::Soft => Record::V1(V1Record {
            pid: cfg.pid,
            host: cfg.host,
            start,
        }),
        Kind::Marker => Record::V2(V2Record {
            pid: cfg.pid,
            host: cfg.host,
            mode: Mode::Exclusive,
            token: None,
            duration: None,
            start,
        }),
        Kind::Lease => {
            let terms = cfg.lease.ok_or(Error::Record)?;
            token_hex = terms.token.hex();
            Record::V2(V2Record {
                pid: cfg.pid,
                host: cfg.host,
                mode: Mode::Lease,
                token: Some(core::str::from_utf8(&token_hex).map_err(|_| Error::Record)?),
                duration: Some(terms.duration),
                start,
            })
        }
    };
    record.encode(buf).map_err(|_| Error::Record)
}
