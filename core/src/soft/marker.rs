//! Reading and writing marker files: filelock's bounded read (PROTOCOL
//! 3.1), the publication of our complete record (invariant I2), and of
//! complete files under our break names (PROTOCOL 7.8 step 3, 7.10 step
//! 3.1; invariant I10 is why).

use super::config::{own_record, Config, Error, Op};
use super::exchange::unlink_if_same;
use super::os::{Dir, NodeKind, Stat};
use crate::decide::FileId;
use crate::errno::Errno;
use crate::mutant::{active, Mutant};
use crate::names::{write_name, Token};
use crate::record::{Content, Record, MAX_RECORD_LEN, READ_LIMIT};

/// The content read from a marker, in a fixed buffer.
pub(super) struct Read {
    buf: [u8; READ_LIMIT],
    len: usize,
    regular: bool,
    /// What `fstat` (or, for a non-regular node, `lstat`) said of it.
    pub(super) stat: Stat,
}

impl Read {
    /// The bytes read, or [`Content::NotRegular`].
    pub(super) fn content(&self) -> Content<'_> {
        if self.regular {
            Content::Bytes(&self.buf[..self.len])
        } else {
            Content::NotRegular
        }
    }
}

/// Reads a marker as filelock does (PROTOCOL 3.1): `lstat`, a non-following
/// open, `fstat`, at most [`READ_LIMIT`] bytes.
pub(super) fn read_marker<O: Dir + ?Sized>(os: &mut O, name: &[u8]) -> Result<Read, Errno> {
    let st = os.lstat(name)?;
    let mut read = Read {
        buf: [0; READ_LIMIT],
        len: 0,
        regular: false,
        stat: st,
    };
    if st.kind != NodeKind::Regular {
        return Ok(read);
    }
    let file = os.open_read(name)?;
    let result = (|| {
        let st = os.fstat(&file)?;
        read.stat = st;
        if st.kind != NodeKind::Regular {
            return Ok(());
        }
        read.regular = true;
        while read.len < READ_LIMIT {
            match os.read(&file, &mut read.buf[read.len..]) {
                Ok(0) => break,
                Ok(n) => read.len += n,
                Err(e) if e == Errno::INTR => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })();
    os.close(file);
    result.map(|()| read)
}

/// Writes all of `buf`, looping over short writes; a write of zero bytes
/// is `EIO`.
pub(super) fn write_all<O: Dir + ?Sized>(
    os: &mut O,
    file: &O::File,
    mut buf: &[u8],
) -> Result<(), Errno> {
    while !buf.is_empty() {
        match os.write(file, buf) {
            Ok(0) => return Err(Errno::IO),
            Ok(n) => buf = &buf[n.min(buf.len())..],
            Err(e) if e == Errno::INTR => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Publishes our record in `file`: `fstat`, apply the explicit mode, write
/// the whole record (PROTOCOL 7.2). Returns our marker's identity.
pub(super) fn publish<O: Dir + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    file: &O::File,
) -> Result<FileId, Error> {
    let id = os
        .fstat(file)
        .map_err(|errno| Error::Os {
            op: Op::Stat,
            errno,
        })?
        .id;
    if let Some(mode) = cfg.mode {
        match os.chmod(file, mode & !0o022) {
            Err(e) if e != Errno::PERM && e != Errno::ACCES => {
                return Err(Error::Os {
                    op: Op::Write,
                    errno: e,
                })
            }
            _ => {}
        }
    }
    let mut buf = [0u8; MAX_RECORD_LEN];
    let len = own_record(cfg, &mut buf)?;
    write_all(os, file, &buf[..len]).map_err(|errno| Error::Os {
        op: Op::Write,
        errno,
    })?;
    Ok(id)
}

/// A file published under a break name, open, with its identity for a
/// record (a placeholder's is never needed).
pub(super) type Published<F> = (F, Option<FileId>);

/// What a file published under one of our break names holds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Aside {
    /// Our complete record: a takeover's marker.
    Record,
    /// Our placeholder: a release's (PROTOCOL 7.10).
    Placeholder,
}

/// Writes `what` into `file`. Returns the identity of a record's file
/// (a placeholder's is never needed).
fn fill<O: Dir + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    file: &O::File,
    what: Aside,
) -> Result<Option<FileId>, Error> {
    if what == Aside::Record {
        return publish(os, cfg, file).map(Some);
    }
    let mut buf = [0u8; 40];
    let written = Record::Placeholder(cfg.pid)
        .encode(&mut buf)
        .map_err(|_| Errno::INVAL)
        .and_then(|n| write_all(os, file, &buf[..n]));
    let op = Op::Write;
    written.map_err(|errno| Error::Os { op, errno })?;
    Ok(None)
}

/// Gives `what` the break name `aside`, complete from its first instant
/// there: written into an unnamed file and linked, or,
/// where the directory has no unnamed files, written under our write name
/// and renamed. A process killed or failing before that leaves nothing
/// under its break name, or only a write name that no recovery ever
/// publishes. An empty or half-written file under a break name would read
/// as a live recordless marker that a recovery puts back at the lock
/// path, where nobody evicts it (I10). `None`: nothing was published.
/// With the file comes its identity, for a record.
pub(super) fn publish_aside<O: Dir + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    aside: &[u8],
    token: &Token,
    what: Aside,
) -> Result<Option<Published<O::File>>, Error> {
    let mode = match what {
        Aside::Record => cfg.marker_mode(),
        Aside::Placeholder => 0o600,
    };
    let in_place = match what {
        Aside::Record => active(Mutant::BreakFileWrittenInPlace),
        Aside::Placeholder => active(Mutant::PlaceholderWrittenInPlace),
    };
    if in_place {
        return Ok(written_in_place(os, cfg, aside, mode, what));
    }
    if let Ok(file) = os.create_unnamed(mode) {
        match fill(os, cfg, &file, what) {
            Ok(id) if os.link_unnamed(&file, aside).is_ok() => return Ok(Some((file, id))),
            // A failed write published nothing.
            Err(_) => {
                os.close(file);
                return Ok(None);
            }
            // A directory that cannot link it: write it by name instead.
            Ok(_) => os.close(file),
        }
    }
    let writing = write_name(cfg.lock, cfg.pid, token)?;
    let Ok(file) = os.create_new(&writing, mode, false) else {
        return Ok(None);
    };
    let published = match fill(os, cfg, &file, what) {
        Ok(id) if os.rename(&writing, aside).is_ok() => Some(id),
        _ => None,
    };
    match published {
        Some(id) => Ok(Some((file, id))),
        None => {
            if let Ok(own) = os.fstat(&file) {
                unlink_if_same(os, &writing, &own);
            }
            os.close(file);
            Ok(None)
        }
    }
}

/// filelock's way, kept as a protocol mutant: create the file under its
/// break name, then write it there.
fn written_in_place<O: Dir + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    aside: &[u8],
    mode: u32,
    what: Aside,
) -> Option<Published<O::File>> {
    let file = os.create_new(aside, mode, false).ok()?;
    match fill(os, cfg, &file, what) {
        Ok(id) => Some((file, id)),
        Err(_) => {
            let _ = os.unlink(aside);
            os.close(file);
            None
        }
    }
}
