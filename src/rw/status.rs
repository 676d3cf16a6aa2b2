//! What an operator sees and does (PROTOCOL 16.10): the latest snapshot
//! with each member's record ([`SoftRwLock::status`]), and the eviction of
//! members that cannot be holding any more, by the protocol's own commit
//! ([`SoftRwLock::break_stale`]).

use super::error::{IntoIo, RwError};
use super::hold::{canonical, pause, root_of};
use super::participant::{instance, Ledger, Lock, StdEnv, Terms};
use super::SoftRwLock;
use crate::adapter::soft::{host_name, monotonic_now, probe, RwFiles};
use crate::error::{LockError, Step};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use swaplock_core::decide::FileId;
use swaplock_core::names::Token;
use swaplock_core::rw::files::{Area, Files, FsError, Read};
pub use swaplock_core::rw::member::Look;
use swaplock_core::rw::member::{evict_at_once, is_stale, look, look_again, Seen, Value};
use swaplock_core::rw::names::READ_LIMIT;
use swaplock_core::rw::record::holder_info;
use swaplock_core::{Errno, Pid};

/// A member of the latest snapshot, as its record shows it.
#[derive(Clone, Debug)]
pub struct RwMember {
    /// Its token (32 hex digits).
    pub token: String,
    /// Whether it is the writer (else a reader).
    pub writer: bool,
    /// The PID its record names.
    pub pid: Option<u32>,
    /// The host its record names.
    pub host: Option<String>,
    /// The lease its record asks for, in seconds.
    pub lease: Option<f64>,
    /// How long ago its record was last rewritten, by the record's mtime
    /// and this host's clock (a report only: the protocol compares no
    /// clocks).
    pub age: Option<Duration>,
    /// What a look at once finds.
    pub look: Look,
}

/// The log as `status` shows it.
#[derive(Clone, Debug)]
pub struct RwStatus {
    /// The latest generation.
    pub generation: u128,
    /// The writer, entered or granted.
    pub writer: Option<RwMember>,
    /// The readers.
    pub readers: Vec<RwMember>,
}

/// What a break did.
#[derive(Clone, Debug, Default)]
pub struct RwBreak {
    /// The members it evicted.
    pub evicted: Vec<RwMember>,
    /// The members it left, being alive (without force).
    pub refused: Vec<RwMember>,
    /// The generation of its eviction commit, if it made one.
    pub generation: Option<u128>,
}

/// The log's files, read only: a report creates no epoch and trims
/// nothing.
struct ReadOnly(RwFiles);

impl Files for ReadOnly {
    fn prepare(&mut self, _: bool) -> Result<(), FsError> {
        Ok(())
    }
    fn read(&mut self, area: Area, name: &[u8], buf: &mut [u8]) -> Result<Read, FsError> {
        self.0.read(area, name, buf)
    }
    fn create(&mut self, _: Area, _: &[u8], _: &[u8], _: bool) -> Result<FileId, FsError> {
        Err(FsError::Os(Errno::NOENT))
    }
    fn overwrite(&mut self, _: Area, _: &[u8], _: &[u8], _: FileId) -> Result<bool, FsError> {
        Ok(false)
    }
    fn link(&mut self, _: Area, _: &[u8], _: &[u8]) -> Result<bool, FsError> {
        Ok(false)
    }
    fn replace(&mut self, _: Area, _: &[u8], _: &[u8]) -> Result<bool, FsError> {
        Ok(false)
    }
    fn unlink(&mut self, _: Area, _: &[u8]) -> Result<(), FsError> {
        Ok(())
    }
    fn list(&mut self, area: Area, visit: &mut dyn FnMut(&[u8])) -> Result<(), FsError> {
        self.0.list(area, visit)
    }
    fn sync(&mut self, _: Area) -> Result<(), FsError> {
        // A report links nothing, so it has nothing to make durable.
        Ok(())
    }
}

/// The log of `path`, if its directory and root exist: its files, root
/// and the path for messages.
fn log_of(path: &Arc<Path>) -> io::Result<Option<(RwFiles, PathBuf)>> {
    let (canonical, dir) = match canonical(path, false) {
        Ok(found) => found,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LockError::io(path, Step::Open, e.kind(), e)),
    };
    let root = root_of(&canonical);
    if std::fs::symlink_metadata(&root).is_err() {
        return Ok(None);
    }
    let files = RwFiles::new(root.as_os_str().as_bytes(), dir.as_os_str().as_bytes())
        .map_err(|e| LockError::errno(path, Step::Open, e))?;
    Ok(Some((files, root)))
}

/// A member's record as read now: its bytes, if any.
fn record(files: &mut impl Files, token: &Token) -> Result<Option<Vec<u8>>, RwError> {
    let mut buf = vec![0u8; READ_LIMIT];
    Ok(match files.read(Area::Holders, &token.hex(), &mut buf)? {
        Read::Missing => None,
        Read::Bytes(n) => {
            buf.truncate(n);
            Some(buf)
        }
    })
}

/// A member, from its record and a look at once.
fn member(root: &Path, token: Token, writer: bool, bytes: Option<&[u8]>) -> RwMember {
    let hex = String::from_utf8_lossy(&token.hex()).into_owned();
    let info = bytes.map(holder_info).unwrap_or_default();
    let here = host_name();
    let probed = match (info.host, info.pid) {
        (Some(host), Some(pid)) if host == here.as_str() => Some(probe(pid)),
        _ => None,
    };
    let age = std::fs::symlink_metadata(root.join("holders").join(&hex))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok());
    RwMember {
        token: hex,
        writer,
        pid: info.pid.map(Pid::get),
        host: info.host.map(str::to_owned),
        lease: info.lease,
        age,
        look: look(bytes.is_some(), probed),
    }
}

impl SoftRwLock {
    /// The latest snapshot and its members, read without writing
    /// anything; `None` when the lock has no log.
    ///
    /// ```
    /// use swaplock::rw::SoftRwLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let lock = SoftRwLock::new(dir.path().join("catalog.lock"));
    /// assert!(lock.status()?.is_none(), "no log yet");
    /// let guard = lock.write()?;
    /// let status = lock.status()?.expect("a log");
    /// let writer = status.writer.expect("a writer");
    /// assert_eq!((writer.token, writer.pid), (guard.token(), Some(std::process::id())));
    /// # Ok(())
    /// # }
    /// ```
    pub fn status(&self) -> io::Result<Option<RwStatus>> {
        let Some((files, root)) = log_of(&self.path)? else {
            return Ok(None);
        };
        let mut files = ReadOnly(files);
        let fail = |e: RwError| e.into_io(&self.path, &root, Step::Stat);
        let mut log = self.log();
        let generation = log.latest(&mut files, &mut StdEnv).map_err(fail)?;
        let (writer, readers) = members(&log);
        let mut read = |t: Token, writer: bool| -> io::Result<RwMember> {
            let bytes = record(&mut files, &t).map_err(fail)?;
            Ok(member(&root, t, writer, bytes.as_deref()))
        };
        let writer = writer.map(|t| read(t, true)).transpose()?;
        let readers = readers
            .into_iter()
            .map(|t| read(t, false))
            .collect::<io::Result<_>>()?;
        Ok(Some(RwStatus {
            generation,
            writer,
            readers,
        }))
    }

    /// Evicts the members of the latest snapshot that cannot be holding
    /// any more, by a commit of the log without them, as a contender's
    /// eviction is made (PROTOCOL 16.7), and removes their records. A
    /// member whose record is gone, or whose process on this host is
    /// dead, goes at once; one on another host is watched (`watching` is
    /// told) until its record has stayed unchanged for this lock's stale
    /// threshold or its own lease, whichever is longer, and goes, or
    /// changes, and stays. A member alive on this host stays. With
    /// `force`, every member goes, alive or not: mutual exclusion with a
    /// live one is lost (it learns it at its next heartbeat).
    pub fn break_stale(
        &self,
        force: bool,
        mut watching: impl FnMut(&RwMember),
    ) -> io::Result<RwBreak> {
        let Some((mut files, root)) = log_of(&self.path)? else {
            return Ok(RwBreak::default());
        };
        let fail = |e: RwError| e.into_io(&self.path, &root, Step::Unlock);
        let mut log = self.log();
        log.latest(&mut files, &mut StdEnv).map_err(fail)?;
        let mut out = RwBreak::default();
        let mut evict: Vec<(Token, RwMember)> = Vec::new();
        let mut watched: Vec<(Token, RwMember)> = Vec::new();
        let (writer, readers) = members(&log);
        let members: Vec<(Token, bool)> = writer
            .map(|w| (w, true))
            .into_iter()
            .chain(readers.into_iter().map(|r| (r, false)))
            .collect();
        for (t, writer) in members {
            let bytes = record(&mut files, &t).map_err(fail)?;
            let m = member(&root, t, writer, bytes.as_deref());
            match (force, evict_at_once(m.look), m.look) {
                (true, _, _) | (_, true, _) => evict.push((t, m)),
                (false, false, Look::Elsewhere) => watched.push((t, m)),
                _ => out.refused.push(m),
            }
        }
        let watches = !watched.is_empty();
        for (t, m) in watched {
            watching(&m);
            match self.watch(&mut files, &t).map_err(fail)? {
                true => evict.push((t, m)),
                false => out.refused.push(m),
            }
        }
        // A member found without a record, or with a dead process, may be
        // back by now: looked at again just before the commit.
        let mut kept = Vec::with_capacity(evict.len());
        for (t, m) in evict {
            if !look_again(m.look, watches, force) {
                kept.push((t, m));
                continue;
            }
            let bytes = record(&mut files, &t).map_err(fail)?;
            let again = member(&root, t, m.writer, bytes.as_deref());
            match evict_at_once(again.look) {
                true => kept.push((t, m)),
                false => out.refused.push(again),
            }
        }
        let evict = kept;
        if evict.is_empty() {
            return Ok(out);
        }
        let gone: Vec<Token> = evict.iter().map(|(t, _)| *t).collect();
        out.generation = Some(log.evict(&mut files, &mut StdEnv, &gone).map_err(fail)?);
        out.evicted = evict.into_iter().map(|(_, m)| m).collect();
        Ok(out)
    }

    /// Watches `token`'s record: `true` once unchanged for the longer of
    /// the threshold and its lease (bounded by `max_lease`), `false` as
    /// soon as it changes.
    fn watch(&self, files: &mut RwFiles, token: &Token) -> Result<bool, RwError> {
        let mut seen = None;
        loop {
            let asked = monotonic_now();
            let bytes = record(files, token)?;
            let value = Value::of(bytes.as_deref());
            let first = seen;
            let age = Seen::observe(&mut seen, value, monotonic_now(), asked);
            if first.is_some() && age.is_zero() {
                return Ok(false);
            }
            let lease = bytes
                .as_deref()
                .and_then(swaplock_core::rw::record::holder_lease);
            if is_stale(age, self.threshold(), lease, self.max_lease) {
                return Ok(true);
            }
            pause(self.poll);
        }
    }

    /// The driver on this lock's terms, for an operator's look or break:
    /// no participant, and a ledger of its own.
    fn log(&self) -> Lock {
        let terms = Terms {
            threshold: self.threshold(),
            max_lease: self.max_lease,
        };
        instance(terms, Ledger::default())
    }
}

/// The writer and the readers of the latest snapshot `log` read.
fn members(log: &Lock) -> (Option<Token>, Vec<Token>) {
    match log.snapshot() {
        Some(s) => (s.writer, s.readers().collect()),
        None => (None, Vec::new()),
    }
}
