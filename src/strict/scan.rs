//! Publication by private file and link (PROTOCOL 18.3), and the scan of
//! the claims: litter reaped on the filesystem's clock, each claim read,
//! proved to exist and parsed (PROTOCOL 18.4).

use super::*;
use std::os::fd::AsFd;
use swaplock_core::decide::{FileId, FileTime};
use swaplock_core::rw::files::no_hard_links;
use swaplock_core::soft::{Dir as _, Entropy, NodeKind};
use swaplock_core::strict::claim::parse_claim;
use swaplock_core::strict::doorway::Scan;
use swaplock_core::strict::names::{
    claims_entry, is_sentinel_litter, needs_clock, private_name, probe_name, reap_private, Entry,
    Reap,
};
use swaplock_core::strict::{CLAIM_READ_GRACE, READ_RETRY, RECORD_LIMIT};

/// How a publication ended.
pub(super) enum Published {
    /// The public name is our record.
    Linked,
    /// The public name is another file.
    Taken,
    /// A peer's scan reaped our private file before its link.
    Reclaimed,
    /// The public name was linked, then found to be another file.
    Replaced,
}

/// One claim a scan read: its name, record and file.
#[derive(Clone, Debug)]
pub(super) struct Found {
    pub(super) name: ClaimName,
    pub(super) pid: Pid,
    pub(super) host: String,
    pub(super) start: Option<String>,
    pub(super) mtime: FileTime,
    /// The record as read.
    pub(super) record: Vec<u8>,
}

/// The claims one scan found.
pub(super) struct Scanned(pub(super) Vec<Found>);

impl Scanned {
    /// The claims as the doorway's decisions take them.
    pub(super) fn doorway(&self) -> Scan {
        let mut scan = Scan::new();
        for found in &self.0 {
            scan.push(found.name);
        }
        scan
    }
}

/// The answer to a claim's read: its record, gone, or to be read again.
enum Read {
    Record(Vec<u8>, FileId, FileTime),
    Gone,
    Again(Errno),
}

impl StrictLock {
    /// Publishes `record` under `public` in `dir` (PROTOCOL 18.3).
    pub(super) fn publish(&self, dir: &Dir, public: &[u8], record: &[u8]) -> io::Result<Published> {
        let mut os = SoftOs::on(dir);
        let private = private_name(public, &os.token())
            .map_err(|_| self.err(Step::Open, Errno::from_raw(libc::ENAMETOOLONG)))?;
        let file = os
            .create_new(&private, self.file_mode(), false)
            .map_err(|e| self.err(Step::Open, e))?;
        let mut id = None;
        let outcome = (|| {
            let ours = os.fstat(&file)?.id;
            id = Some(ours);
            let mut written = 0;
            while written < record.len() {
                match os.write(&file, &record[written..]) {
                    Ok(0) => return Err(Errno::IO),
                    Ok(n) => written += n,
                    Err(e) if e == Errno::INTR => {}
                    Err(e) => return Err(e),
                }
            }
            sys::fsync(file.as_fd())?;
            Ok(ours)
        })();
        let ours = match outcome {
            Ok(ours) => ours,
            Err(e) => {
                drop(file);
                remove_private(&mut os, &private, id);
                return Err(self.err(Step::Open, e));
            }
        };
        drop(file);
        let names = c(&private).and_then(|from| Ok((from, c(public)?)));
        let linked = match names.and_then(|(from, to)| sys::link_at(dir.as_fd(), &from, &to)) {
            Ok(()) => Ok(()),
            Err(e) if e == Errno::EXIST => match os.lstat(public) {
                Ok(st) if st.id == ours => Ok(()),
                _ => {
                    remove_private(&mut os, &private, Some(ours));
                    return Ok(Published::Taken);
                }
            },
            Err(e) if e == Errno::NOENT && os.lstat(&private).is_err_and(|e| e == Errno::NOENT) => {
                return Ok(Published::Reclaimed)
            }
            Err(e) => Err(e),
        };
        let replaced = linked.is_ok() && !os.lstat(public).is_ok_and(|st| st.id == ours);
        remove_private(&mut os, &private, Some(ours));
        match linked {
            Err(e) if no_hard_links(e) => Err(self.no_hard_links(e)),
            Err(e) => Err(self.err(Step::Open, e)),
            Ok(()) if replaced => Ok(Published::Replaced),
            Ok(()) => Ok(Published::Linked),
        }
    }

    /// Reaps the sentinel's litter in the lock's directory (PROTOCOL 18.5
    /// step 2), by the rule of a scan's litter.
    pub(super) fn reap_sentinel_litter(&self, dir: &Dir) -> io::Result<()> {
        let names = list(dir).map_err(|e| {
            self.invalid(
                None,
                format!("cannot reclaim sentinel private records: {e}"),
            )
        })?;
        let litter: Vec<_> = names
            .into_iter()
            .filter(|n| is_sentinel_litter(n, &self.base))
            .collect();
        self.reap(dir, &litter, &self.base, true).map_err(|why| {
            self.invalid(
                None,
                format!("cannot reclaim sentinel private records: {why}"),
            )
        })
    }

    /// Scans the claims' directory (PROTOCOL 18.4). A `thorough` scan, an
    /// attempt's, reads the filesystem's clock to reap old litter and
    /// proves each claim exists on the server; an inspection does neither.
    pub(super) fn scan(&self, dir: &Dir, thorough: bool) -> io::Result<Scanned> {
        let listed = list(dir)
            .map_err(|e| self.invalid(None, format!("cannot list claim directory: {e}")))?;
        let mut claims = Vec::new();
        let mut litter = Vec::new();
        for name in listed {
            match claims_entry(&name) {
                Entry::Claim(claim) => claims.push(claim),
                Entry::Unknown => {
                    let why = "unknown claim name or protocol version".into();
                    return Err(self.invalid(Some(&name), why));
                }
                Entry::Litter => litter.push(name),
                Entry::Ignored => {}
            }
        }
        let clock_name = ClaimName {
            state: ClaimState::Held,
            token: SoftOs::on(dir).token(),
        }
        .encode();
        self.reap(dir, &litter, clock_name.as_bytes(), thorough)
            .map_err(|why| self.invalid(None, format!("cannot list claim directory: {why}")))?;
        let records = self.read_claims(dir, &claims)?;
        let mut found = Vec::new();
        for (name, (record, id, mtime)) in claims.iter().zip(records) {
            let Some(record) = record else { continue };
            let encoded = name.encode();
            if thorough && !self.exists_on_server(dir, encoded.as_bytes(), id)? {
                continue;
            }
            let claim = parse_claim(&name.token, &record)
                .map_err(|why| self.invalid(Some(encoded.as_bytes()), why.to_string()))?;
            found.push(Found {
                name: *name,
                pid: claim.pid,
                host: claim.host().to_owned(),
                start: claim.start.map(|s| s.as_str().to_owned()),
                mtime,
                record,
            });
        }
        Ok(Scanned(found))
    }

    /// Reaps the private and probe files `litter` in `dir`: those linked
    /// at once, those with one link once 2 s old by the filesystem's clock,
    /// read (with `clock`) from a private file of `clock_name` written for
    /// it, at most once.
    fn reap(
        &self,
        dir: &Dir,
        litter: &[Vec<u8>],
        clock_name: &[u8],
        clock: bool,
    ) -> Result<(), String> {
        let mut os = SoftOs::on(dir);
        let mut now: Option<Option<FileTime>> = None;
        for name in litter {
            let st = match os.lstat(name) {
                Ok(st) => st,
                Err(e) if e == Errno::NOENT => continue,
                Err(e) => return Err(e.to_string()),
            };
            let regular = st.kind == NodeKind::Regular;
            let fs_now = match needs_clock(regular, st.nlink) && clock {
                true => *now.get_or_insert_with(|| filesystem_now(dir, clock_name)),
                false => None,
            };
            match reap_private(regular, st.nlink, st.mtime, fs_now) {
                Reap::Keep => {}
                Reap::NotRegular => {
                    let shown = String::from_utf8_lossy(name);
                    return Err(format!("{shown} is not a regular private record"));
                }
                Reap::Remove => match os.unlink(name) {
                    Ok(()) => {}
                    Err(e) if [Errno::NOENT, Errno::ACCES, Errno::PERM].contains(&e) => {}
                    Err(e) => return Err(e.to_string()),
                },
            }
        }
        Ok(())
    }

    /// Reads every claim of `claims`, retrying `ESTALE`, `EACCES` and
    /// `EPERM` for [`CLAIM_READ_GRACE`] in all; `None` for a claim gone.
    #[allow(clippy::type_complexity)]
    fn read_claims(
        &self,
        dir: &Dir,
        claims: &[ClaimName],
    ) -> io::Result<Vec<(Option<Vec<u8>>, FileId, FileTime)>> {
        let none = (None, FileId { dev: 0, ino: 0 }, FileTime::default());
        let mut records = vec![none; claims.len()];
        let mut pending: Vec<usize> = (0..claims.len()).collect();
        let mut deadline: Option<Instant> = None;
        let mut os = SoftOs::on(dir);
        loop {
            let mut again = Vec::new();
            for &i in &pending {
                let name = claims[i].encode();
                match read_claim(&mut os, name.as_bytes()) {
                    Ok(Read::Record(bytes, id, mtime)) => records[i] = (Some(bytes), id, mtime),
                    Ok(Read::Gone) => {}
                    Ok(Read::Again(e)) => again.push((i, e)),
                    Err(why) => {
                        return Err(self
                            .invalid(Some(name.as_bytes()), format!("cannot read claim: {why}")))
                    }
                }
            }
            if again.is_empty() {
                return Ok(records);
            }
            let deadline = *deadline.get_or_insert_with(|| Instant::now() + CLAIM_READ_GRACE);
            if Instant::now() >= deadline {
                // A stale handle is a claim the server no longer has; a
                // claim still unreadable, and still listed, fails the scan.
                for (i, e) in again {
                    let name = claims[i].encode();
                    if e != Errno::STALE && os.lstat(name.as_bytes()).is_ok() {
                        return Err(
                            self.invalid(Some(name.as_bytes()), format!("cannot read claim: {e}"))
                        );
                    }
                }
                return Ok(records);
            }
            pending = again.into_iter().map(|(i, _)| i).collect();
            crate::sync::thread::sleep(READ_RETRY);
        }
    }

    /// Whether the claim `name`, read as file `id`, exists on the server:
    /// a link to it under a probe name, removed at once.
    fn exists_on_server(&self, dir: &Dir, name: &[u8], id: FileId) -> io::Result<bool> {
        let mut os = SoftOs::on(dir);
        let probe = probe_name(&os.token());
        let names = c(name).and_then(|from| Ok((from, c(&probe)?)));
        match names.and_then(|(from, to)| sys::link_at(dir.as_fd(), &from, &to)) {
            Ok(()) => {}
            Err(e) if e == Errno::NOENT || e == Errno::STALE => return Ok(false),
            Err(e) if e == Errno::EXIST && os.lstat(&probe).is_ok_and(|st| st.id == id) => {}
            Err(e) => return Err(self.invalid(Some(name), format!("cannot verify claim: {e}"))),
        }
        match os.unlink(&probe) {
            Ok(()) => Ok(true),
            Err(e) if e == Errno::NOENT => Ok(true),
            Err(e) => Err(self.invalid(Some(name), format!("cannot remove claim probe: {e}"))),
        }
    }
}

/// Every name in `dir`.
pub(super) fn list(dir: &Dir) -> Result<Vec<Vec<u8>>, Errno> {
    let mut names = Vec::new();
    SoftOs::on(dir).list(&mut |name| names.push(name.to_vec()))?;
    Ok(names)
}

/// One read of a claim: `lstat`, a non-following open, `fstat`, at most
/// 1025 bytes. An error that is the claim's own (not a regular file,
/// replaced while opened, too long, a read error) is returned as its
/// words.
fn read_claim(os: &mut SoftOs<'_>, name: &[u8]) -> Result<Read, String> {
    let retry = |e: Errno| [Errno::STALE, Errno::ACCES, Errno::PERM].contains(&e);
    let st = match os.lstat(name) {
        Ok(st) => st,
        Err(e) if e == Errno::NOENT => return Ok(Read::Gone),
        Err(e) if retry(e) => return Ok(Read::Again(e)),
        Err(e) => return Err(e.to_string()),
    };
    if st.kind != NodeKind::Regular {
        return Err("not a regular file".into());
    }
    let fd = match os.open_read(name) {
        Ok(fd) => fd,
        Err(e) if e == Errno::NOENT => return Ok(Read::Gone),
        Err(e) if retry(e) => return Ok(Read::Again(e)),
        Err(e) => return Err(e.to_string()),
    };
    let mut buf = [0u8; RECORD_LIMIT + 1];
    match read_same(os, &fd, st.id, &mut buf) {
        Ok(n) => Ok(Read::Record(buf[..n].to_vec(), st.id, st.mtime)),
        // Opened, then removed by another NFS client: the server no longer
        // has the file our handle names (NFSv3 keeps no open state), as
        // the look and the open answer once it is gone.
        Err(e) if e == Errno::STALE => Ok(Read::Again(e)),
        Err(e) if e == Errno::AGAIN => Err("changed while opening".into()),
        Err(e) if e.raw() == libc::EFBIG => Err(format!("exceeds {RECORD_LIMIT} bytes")),
        Err(e) => Err(e.to_string()),
    }
}

/// The filesystem's clock: the mtime of a private file of `public`
/// written for it in `dir`, and removed; `None` if none can be made.
fn filesystem_now(dir: &Dir, public: &[u8]) -> Option<FileTime> {
    let mut os = SoftOs::on(dir);
    let name = private_name(public, &os.token()).ok()?;
    let file = os.create_new(&name, 0o600, false).ok()?;
    let mtime = os
        .write(&file, b"\n")
        .and_then(|_| os.fstat(&file))
        .map(|st| st.mtime);
    drop(file);
    let _ = os.unlink(&name);
    mtime.ok()
}

/// Unlinks our private file `name`, if it is still the file `id` (or
/// unconditionally, when its identity was never read).
fn remove_private(os: &mut SoftOs<'_>, name: &[u8], id: Option<FileId>) {
    let ours = match id {
        None => true,
        Some(id) => os.lstat(name).is_ok_and(|st| st.id == id),
    };
    if ours {
        // A private file left behind is litter the next scan reaps.
        let _ = os.unlink(name);
    }
}

/// Reads at most `buf`'s length from `fd`, which `fstat` must show to be
/// the regular file `id`: `EAGAIN` if it is another (replaced while
/// opened), `EFBIG` for more than [`RECORD_LIMIT`] bytes.
pub(super) fn read_same(
    os: &mut SoftOs<'_>,
    fd: &OwnedFd,
    id: FileId,
    buf: &mut [u8; RECORD_LIMIT + 1],
) -> Result<usize, Errno> {
    let st = os.fstat(fd)?;
    if st.kind != NodeKind::Regular || st.id != id {
        return Err(Errno::AGAIN);
    }
    let mut n = 0;
    while n < buf.len() {
        match os.read(fd, &mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e == Errno::INTR => {}
            Err(e) => return Err(e),
        }
    }
    match n > RECORD_LIMIT {
        true => Err(Errno::from_raw(libc::EFBIG)),
        false => Ok(n),
    }
}
