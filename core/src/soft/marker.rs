//! Reading and writing marker files: filelock's bounded read (PROTOCOL
//! 3.1) and the publication of our complete record (invariant I2).

use super::config::{own_record, Config, Error, Op};
use super::os::{Dir, NodeKind, Stat};
use crate::decide::FileId;
use crate::errno::Errno;
use crate::record::{Content, MAX_RECORD_LEN, READ_LIMIT};

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
