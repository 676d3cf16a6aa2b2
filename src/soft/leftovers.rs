//! Files a lock's contenders left beside it, under names derived from the
//! lock's ([`SoftLock::leftovers`]), and the sweep of those nothing will
//! ever read ([`SoftLock::sweep`]): what `swaplock status` reports and
//! `swaplock break` removes (PROTOCOL 13.2).

use super::*;
use swaplock_core::decide::Liveness;
use swaplock_core::names::{parse_derived, parse_write_name, Derived};
use swaplock_core::soft::{Dir as _, Processes as _};

/// A file beside a soft lock under a name derived from the lock's, which
/// a contender made and left: a breaker or a writer killed (or cut off by
/// a power cut) mid-step, or a recoverer's claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leftover {
    /// Its name in the lock's directory.
    pub name: String,
    /// What made it.
    pub kind: LeftoverKind,
    /// The PID its name carries.
    pub pid: Option<u32>,
    /// For a write name: whether this host proves its writer gone (a write
    /// name is made only on a local filesystem, by a process of this
    /// host). `None` where the name's PID may be another host's.
    pub gone: Option<bool>,
}

/// What made a [`Leftover`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeftoverKind {
    /// `<lock>.write.<pid>.<token>`: a marker written to be renamed to the
    /// lock path (where the filesystem has no unnamed files) and never
    /// published. Nothing reads it; once its writer is gone,
    /// [`SoftLock::sweep`] removes it.
    Write,
    /// `<lock>.break.<pid>.<token>`: a breaker's name. A record there is a
    /// takeover's, which a later takeover recovers; a placeholder or an
    /// empty file keeps nobody out.
    Break,
    /// `<lock>.restore.<pid>.<token>`: a recoverer's claim, which every
    /// later recovery takes up.
    Restore,
}

impl LeftoverKind {
    /// In words, for a report.
    pub fn describe(self) -> &'static str {
        match self {
            LeftoverKind::Write => "a marker written and never published",
            LeftoverKind::Break => "a breaker's file",
            LeftoverKind::Restore => "a recoverer's claim",
        }
    }
}

impl SoftLock {
    /// The files beside the lock under names derived from its own, by
    /// name; none where the directory does not exist. They keep nobody
    /// out; a write name's writer is probed on this host.
    ///
    /// ```
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let lock = SoftLock::marker(dir.path().join("jobs.lock"));
    /// drop(lock.lock()?);
    /// assert!(lock.leftovers()?.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn leftovers(&self) -> io::Result<Vec<Leftover>> {
        Ok(self.scan()?.into_iter().map(|(_, l)| l).collect())
    }

    /// [`SoftLock::leftovers`], each with its name's bytes.
    fn scan(&self) -> io::Result<Vec<(Vec<u8>, Leftover)>> {
        let dir = match os::open_dir(&self.dir) {
            Ok(dir) => dir,
            Err(e) if e == Errno::NOENT => return Ok(Vec::new()),
            Err(e) => return Err(self.err(Step::Open, e)),
        };
        let mut sys = SoftOs::on(&dir);
        let mut names: Vec<Vec<u8>> = Vec::new();
        let base = self.base.as_slice();
        sys.list(&mut |n| {
            if n.starts_with(base) && n.len() > base.len() {
                names.push(n.to_vec());
            }
        })
        .map_err(|e| self.err(Step::Open, e))?;
        names.sort();
        let mut out = Vec::new();
        for n in names {
            let (kind, pid, gone) = if let Some(writer) = parse_write_name(base, &n) {
                let gone = sys.probe(writer) == Liveness::Dead;
                (LeftoverKind::Write, Some(writer.get()), Some(gone))
            } else {
                match parse_derived(base, &n) {
                    Some(Derived::Break { breaker, .. }) => (
                        LeftoverKind::Break,
                        breaker.to_u64().and_then(|p| u32::try_from(p).ok()),
                        None,
                    ),
                    Some(Derived::Restore { recoverer, .. }) => {
                        (LeftoverKind::Restore, Some(recoverer.get()), None)
                    }
                    None => continue,
                }
            };
            let name = String::from_utf8_lossy(&n).into_owned();
            out.push((
                n,
                Leftover {
                    name,
                    kind,
                    pid,
                    gone,
                },
            ));
        }
        Ok(out)
    }

    /// Removes the write names whose writers this host proves gone (a
    /// writer killed, or cut off by a power cut, between writing its
    /// marker and renaming it to the lock path): nothing ever reads or
    /// publishes them. Returns what it removed. A live writer's name is
    /// left, and so is every other file ([`SoftLock::leftovers`]).
    ///
    /// A writer in another PID namespace sharing this directory is not
    /// seen: removing its name fails its rename, and its attempt then
    /// creates its marker by name instead. Nothing is ever removed at the
    /// lock path itself.
    pub fn sweep(&self) -> io::Result<Vec<Leftover>> {
        let gone: Vec<(Vec<u8>, Leftover)> = self
            .scan()?
            .into_iter()
            .filter(|(_, l)| l.kind == LeftoverKind::Write && l.gone == Some(true))
            .collect();
        if gone.is_empty() {
            return Ok(Vec::new());
        }
        let dir = os::open_dir(&self.dir).map_err(|e| self.err(Step::Open, e))?;
        let mut sys = SoftOs::on(&dir);
        let mut removed = Vec::new();
        for (n, l) in gone {
            match sys.unlink(&n) {
                Ok(()) => removed.push(l),
                Err(e) if e == Errno::NOENT => {}
                Err(e) => return Err(self.err(Step::Remove, e)),
            }
        }
        Ok(removed)
    }
}
