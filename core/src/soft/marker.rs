//! Reading and writing marker files: filelock's bounded read (PROTOCOL
//! 3.1), the publication of our complete record (invariant I2), and of
//! complete files under our break names (PROTOCOL 7.8 step 3, 7.10 step
//! 3.1; invariant I10 is why).

use super::config::{own_record, Config, Error, Op};
use super::os::{Clock, Dir, NodeKind, Stat};
use crate::decide::{FileId, Instant};
use crate::errno::Errno;
use crate::fs::ExclusiveRename;
use crate::mutant::{active, Mutant};
use crate::names::{write_name, Token};
use crate::record::{Content, Record, MAX_RECORD_LEN, PLACEHOLDER_PREFIX, READ_LIMIT};

/// A marker as one look saw it: the content read, in a fixed buffer, and
/// what `stat` said of it. [`look`] makes one for a report of the holder.
pub struct Seen {
    buf: [u8; READ_LIMIT],
    len: usize,
    regular: bool,
    /// What `fstat` (or, for a non-regular node, `lstat`) said of it.
    pub(super) stat: Stat,
    /// When it was seen so: the clock read just after that call. How
    /// long a marker has been seen unchanged is measured to here, never to
    /// a later decision: a peer paused between its look and its judgement
    /// must not count the pause as time the marker stood unchanged, since
    /// a change made meanwhile (a heartbeat within one coarse mtime, as on
    /// FAT) may show in no other field the takeover checks (PROTOCOL 7.13).
    pub(super) at: Instant,
}

impl Seen {
    /// The bytes read, or [`Content::NotRegular`].
    pub fn content(&self) -> Content<'_> {
        if self.regular {
            Content::Bytes(&self.buf[..self.len])
        } else {
            Content::NotRegular
        }
    }

    /// What `fstat` said of the file read (`lstat`, of a node that was
    /// not opened): its identity, kind and times.
    pub fn stat(&self) -> Stat {
        self.stat
    }
}

/// Reads a marker as filelock does (PROTOCOL 3.1): `lstat`, a non-following
/// open, `fstat`, at most [`READ_LIMIT`] bytes.
pub(super) fn read_marker<O: Dir + Clock + ?Sized>(os: &mut O, name: &[u8]) -> Result<Seen, Errno> {
    let mut seen = glance(os, name)?;
    if seen.stat.kind != NodeKind::Regular && !active(Mutant::SymlinkReadFails) {
        return Ok(seen);
    }
    read_into(os, name, &mut seen).map(|()| seen)
}

/// Reads the marker at `name` for a report of its holder, as a contender
/// reads it (PROTOCOL 3.1: no symlink followed, no FIFO waited on),
/// where a contender would pass over what it cannot read: `None` when
/// there is no marker, or it is removed between the `lstat` and the
/// open. A node swapped in meanwhile that a non-following, non-blocking
/// open refuses (a symlink: `ELOOP`; a socket: `ENXIO`) is reported as
/// what it is, no regular file, with the `lstat` of the file it replaced.
/// An error is the failed call and its `errno`: [`Op::Stat`] for the
/// `lstat`, [`Op::Read`] for the open, `fstat` or read.
pub fn look<O: Dir + Clock + ?Sized>(os: &mut O, name: &[u8]) -> Result<Option<Seen>, Error> {
    let mut seen = match glance(os, name) {
        Ok(seen) => seen,
        Err(e) if e == Errno::NOENT => return Ok(None),
        Err(errno) => {
            return Err(Error::Os {
                op: Op::Stat,
                errno,
            })
        }
    };
    if seen.stat.kind != NodeKind::Regular {
        return Ok(Some(seen));
    }
    match read_into(os, name, &mut seen) {
        Ok(()) => Ok(Some(seen)),
        Err(e) if e == Errno::NOENT => Ok(None),
        Err(e) if e == Errno::LOOP || e == Errno::NXIO => Ok(Some(seen)),
        Err(errno) => Err(Error::Os {
            op: Op::Read,
            errno,
        }),
    }
}

/// The `lstat` of a marker, nothing read yet.
fn glance<O: Dir + Clock + ?Sized>(os: &mut O, name: &[u8]) -> Result<Seen, Errno> {
    let st = os.lstat(name)?;
    Ok(Seen {
        buf: [0; READ_LIMIT],
        len: 0,
        regular: false,
        stat: st,
        at: os.now(),
    })
}

/// Opens the marker (not following a symlink, not blocking), `fstat`s it
/// and, if it is a regular file, reads its content into `seen`; a failed
/// open leaves `seen` as it was.
fn read_into<O: Dir + Clock + ?Sized>(
    os: &mut O,
    name: &[u8],
    seen: &mut Seen,
) -> Result<(), Errno> {
    let file = os.open_read(name)?;
    let result = (|| {
        let st = os.fstat(&file)?;
        seen.stat = st;
        seen.at = os.now();
        if st.kind != NodeKind::Regular {
            return Ok(());
        }
        seen.regular = true;
        while seen.len < READ_LIMIT {
            match os.read(&file, &mut seen.buf[seen.len..]) {
                Ok(0) => break,
                Ok(n) => seen.len += n,
                Err(e) if e == Errno::INTR => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })();
    os.close(file);
    result
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

/// [`publish`], then [`synced`]: our whole record, on stable storage
/// before any name shows it (or, created by name, right after). Returns
/// our marker's identity.
pub(super) fn publish_synced<O: Dir + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    file: &O::File,
) -> Result<FileId, Error> {
    let id = publish(os, cfg, file)?;
    synced(os, cfg, file)?;
    Ok(id)
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

/// Our placeholder (PROTOCOL 2.4), `filelock/break\n<our pid>\n`, encoded
/// into `buf` (forty bytes hold the prefix and any PID's digits).
pub(super) fn encode_placeholder<'b>(
    cfg: &Config<'_>,
    buf: &'b mut [u8; 40],
) -> Result<&'b [u8], Errno> {
    let n = Record::Placeholder(cfg.pid)
        .encode(buf)
        .map_err(|_| Errno::INVAL)?;
    Ok(&buf[..n])
}

/// Our placeholder, `filelock/break\n<pid>\n`, at least `len` bytes long
/// (up to [`MAX_RECORD_LEN`]): the PID's digits led by zeros, which
/// filelock 4.2.11's parser and ours read as the same PID (PROTOCOL 2.4).
/// Written at offset 0 over a record of `len` bytes, it replaces all of it
/// without a cut.
pub(super) fn encode_placeholder_over<'b>(
    cfg: &Config<'_>,
    len: usize,
    buf: &'b mut [u8; MAX_RECORD_LEN],
) -> Result<&'b [u8], Errno> {
    let n = Record::Placeholder(cfg.pid)
        .encode(buf)
        .map_err(|_| Errno::INVAL)?;
    let pad = len.saturating_sub(n).min(MAX_RECORD_LEN - n);
    let at = PLACEHOLDER_PREFIX.len();
    buf.copy_within(at..n, at + pad);
    buf[at..at + pad].fill(b'0');
    Ok(&buf[..n + pad])
}

/// Writes our placeholder into `file`, a release's break file (PROTOCOL
/// 7.10 step 3.1).
pub(super) fn write_placeholder<O: Dir + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    file: &O::File,
) -> Result<(), Error> {
    let mut buf = [0u8; 40];
    encode_placeholder(cfg, &mut buf)
        .and_then(|bytes| write_all(os, file, bytes))
        .map_err(|errno| Error::Os {
            op: Op::Write,
            errno,
        })
}

/// Gives a file the break name `aside`, complete from its first instant
/// there: created with `mode`, filled by `fill` (our record, or our
/// placeholder), then linked from an unnamed file, or, where the directory
/// has no unnamed files, written under our write name and renamed. A
/// process killed or failing before that leaves nothing under its break
/// name, or only a write name that no recovery ever publishes. An empty or
/// half-written file under a break name would read as a live recordless
/// marker that a recovery puts back at the lock path, where nobody evicts
/// it (I10). `None`: nothing was published; otherwise the open file and
/// what `fill` returned. `in_place` names the protocol mutant that undoes
/// this.
pub(super) fn publish_aside<O: Dir + ?Sized, T>(
    os: &mut O,
    cfg: &Config<'_>,
    aside: &[u8],
    token: &Token,
    mode: u32,
    in_place: Mutant,
    mut fill: impl FnMut(&mut O, &O::File) -> Result<T, Error>,
) -> Result<Option<(O::File, T)>, Error> {
    if active(in_place) {
        // filelock's way, kept as a protocol mutant: create the file under
        // its break name, then write it there.
        let Ok(file) = os.create_new(aside, mode, false) else {
            return Ok(None);
        };
        return Ok(match fill(os, &file) {
            Ok(made) => Some((file, made)),
            Err(_) => {
                let _ = os.unlink(aside);
                os.close(file);
                None
            }
        });
    }
    if let Ok(file) = os.create_unnamed(mode) {
        match fill(os, &file) {
            Ok(made) if os.link_unnamed(&file, aside).is_ok() => return Ok(Some((file, made))),
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
    let published = match fill(os, &file) {
        Ok(made) if os.rename(&writing, aside).is_ok() => Some(made),
        _ => None,
    };
    match published {
        Some(made) => Ok(Some((file, made))),
        None => {
            if let Ok(own) = os.fstat(&file) {
                unlink_if_same(os, &writing, &own);
            }
            os.close(file);
            Ok(None)
        }
    }
}

/// How many times [`synced`] makes again a sync a signal interrupted.
const SYNC_TRIES: u32 = 4;

/// Puts a file's record on stable storage before a name makes it visible
/// (7.2 step 3, 7.8 step 3): a power cut after the link or rename keeps
/// the name, and without this could lose the record under it, leaving an
/// empty file that reads as a recordless marker nobody evicts (I10). A
/// file that cannot be synced (`EINVAL`, `ENOSYS`, `EOPNOTSUPP`) has
/// nothing a cut keeps; a failed sync (`EIO`, `ENOSPC`) is the write's
/// error, with nothing named; an interrupted one is made again.
pub(super) fn synced<O: Dir + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    file: &O::File,
) -> Result<(), Error> {
    if !cfg.durable || active(Mutant::RecordUnsynced) {
        return Ok(());
    }
    // A signal may interrupt a sync (a FUSE filesystem mounted `intr`):
    // made again, a few times.
    let mut tries = 0;
    loop {
        match os.sync_file(file) {
            Ok(()) | Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => return Ok(()),
            Err(Errno::INTR) if tries < SYNC_TRIES => tries += 1,
            Err(errno) => {
                return Err(Error::Os {
                    op: Op::Write,
                    errno,
                })
            }
        }
    }
}

/// On a filesystem whose renames nothing orders (FAT and exFAT,
/// [`ExclusiveRename::Unjournaled`]), writes the whole filesystem out after
/// a step that moved names at the lock path (a publication by rename, a
/// takeover's exchange and unlink, a release), so that a power cut, or
/// another process's `fsync` that writes the directory or the allocation
/// table, never keeps half of the step: FAT then leaves two entries on one
/// file's clusters, and the boot's check truncates one to an empty marker
/// (PROTOCOL 13.2). Durable locks only; a failure changes nothing another
/// process sees.
pub(super) fn settle_names<O: Dir + ?Sized>(os: &mut O, cfg: &Config<'_>, file: &O::File) {
    if cfg.durable && os.exclusive_rename() == ExclusiveRename::Unjournaled {
        let _ = os.sync_filesystem(file);
    }
}

/// Unlinks `name` if it names the open file whose stat is `own` (I7: the
/// caller holds that file open).
pub(crate) fn unlink_if_same<O: Dir + ?Sized>(os: &mut O, name: &[u8], own: &Stat) {
    if active(Mutant::UnlinkIfSameBlind) || os.lstat(name).is_ok_and(|st| st.same_file(own)) {
        let _ = os.unlink(name);
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::pid::Pid;
    use crate::record::parse_placeholder;
    use crate::soft::Kind;
    use std::format;
    use std::string::ToString;

    fn cfg(pid: u32) -> Config<'static> {
        Config {
            kind: Kind::Soft,
            lock: b"a.lock",
            pid: Pid::new(pid).expect("a PID"),
            host: "h1",
            start: None,
            mode: None,
            lease: None,
            lifetime: None,
            durable: true,
        }
    }

    /// A placeholder led by zeros to a record's length names the same PID,
    /// and one no longer than its own length is the plain placeholder.
    #[test]
    fn a_placeholder_over_a_record_is_as_long_and_names_the_same_pid() {
        let mut buf = [0u8; MAX_RECORD_LEN];
        for (pid, len) in [
            (102, 0),
            (102, 19),
            (102, 32),
            (4_194_304, 200),
            (1, MAX_RECORD_LEN),
        ] {
            let cfg = cfg(pid);
            let bytes = encode_placeholder_over(&cfg, len, &mut buf).expect("encodes");
            let plain = format!("filelock/break\n{pid}\n");
            assert_eq!(bytes.len(), len.max(plain.len()), "{pid} over {len}");
            if len <= plain.len() {
                assert_eq!(bytes, plain.as_bytes());
            }
            let text = core::str::from_utf8(bytes).expect("text");
            let named = parse_placeholder(text).map(|d| d.as_str());
            assert_eq!(named, Some(pid.to_string().as_str()), "{text:?}");
        }
    }
}
