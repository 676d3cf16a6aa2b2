//! Files a lock's contenders left beside it, under names derived from the
//! lock's ([`SoftLock::leftovers`]), and the sweep of those nothing will
//! ever read ([`SoftLock::sweep`]): what `swaplock status` reports and
//! `swaplock break` removes (PROTOCOL 13.2).

use super::*;
use swaplock_core::decide::Liveness;
use swaplock_core::names::{parse_derived_in, parse_write_name, Derived};
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
    /// For a write name that holds its writer's own record of this host:
    /// whether this host proves that writer gone. `None` for any other
    /// file: a record of another host (write names are made on network
    /// filesystems too, by a takeover or a release where there are no
    /// unnamed files), an unfinished record, or another lock's marker
    /// whose name reads as a write name of this one.
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
    /// out; a write name's writer is probed on this host when the file
    /// holds that writer's own record of this host.
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
        let Some((_, found)) = self.scan()? else {
            return Ok(Vec::new());
        };
        Ok(found.into_iter().map(|(_, l)| l).collect())
    }

    /// [`SoftLock::leftovers`], each with its name's bytes, and the
    /// directory they were listed in (`None` where there is none).
    fn scan(&self) -> io::Result<Option<(Dir, Found)>> {
        let dir = match os::open_dir(&self.dir) {
            Ok(dir) => dir,
            Err(e) if e == Errno::NOENT => return Ok(None),
            Err(e) => return Err(self.err(Step::Open, e)),
        };
        let me = Identity::now();
        let cfg = me.config(self, None);
        let mut sys = SoftOs::on(&dir);
        let case = sys.name_case();
        let base = self.base.as_slice();
        let mut names: Vec<Vec<u8>> = Vec::new();
        sys.list(&mut |n| {
            if n.len() > base.len() {
                names.push(n.to_vec());
            }
        })
        .map_err(|e| self.err(Step::Open, e))?;
        names.sort();
        let mut out = Vec::new();
        for n in names {
            let (kind, pid, gone) = if let Some(writer) = parse_write_name(base, &n) {
                (
                    LeftoverKind::Write,
                    Some(writer.get()),
                    writers_own(&mut sys, &cfg, &n, writer),
                )
            } else {
                match parse_derived_in(case, base, &n) {
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
        Ok(Some((dir, out)))
    }

    /// Removes the write names whose writers this host proves gone (a
    /// writer killed, or cut off by a power cut, between writing its
    /// marker and renaming it): each holds its writer's own complete record
    /// of this host, which nothing ever reads or publishes. Returns what it
    /// removed, and the error of each it could not remove. A live writer's
    /// name is left, and so is every other file ([`SoftLock::leftovers`]):
    /// an unfinished record, another host's, another lock's marker whose
    /// name reads as a write name of this one.
    ///
    /// A writer in another PID namespace sharing this directory is not
    /// seen: removing its name fails its rename, and its attempt then goes
    /// another way (7.2 step 4). Nothing is ever removed at the lock path.
    pub fn sweep(&self) -> io::Result<Swept> {
        let Some((dir, found)) = self.scan()? else {
            return Ok((Vec::new(), Vec::new()));
        };
        let mut sys = SoftOs::on(&dir);
        let (mut removed, mut failed) = (Vec::new(), Vec::new());
        for (n, l) in found {
            if l.kind != LeftoverKind::Write || l.gone != Some(true) {
                continue;
            }
            match sys.unlink(&n) {
                Ok(()) => removed.push(l),
                Err(e) if e == Errno::NOENT => {}
                Err(e) => {
                    let err = self.err(Step::Remove, e);
                    failed.push((l, err));
                }
            }
        }
        Ok((removed, failed))
    }
}

/// What [`SoftLock::sweep`] removed, and each file it could not remove
/// with the error.
pub type Swept = (Vec<Leftover>, Vec<(Leftover, io::Error)>);

/// What a scan found beside the lock: each file's name as bytes, and it.
type Found = Vec<(Vec<u8>, Leftover)>;

/// Whether the write name `name` holds `writer`'s own complete record of
/// this host and this host proves `writer` gone: `None` when it holds
/// anything else, or is no regular file.
fn writers_own(sys: &mut SoftOs<'_>, cfg: &Config<'_>, name: &[u8], writer: Pid) -> Option<bool> {
    let seen = protocol::look(sys, name).ok()??;
    if seen.stat().kind != swaplock_core::soft::NodeKind::Regular {
        return None;
    }
    let owner = match classify(seen.content(), swaplock_core::record::Reader::Protocol2) {
        Classified::V1(r) => r.owner(),
        Classified::V2(r) => r.owner(),
        _ => return None,
    };
    if owner.pid != writer || owner.host != cfg.host {
        return None;
    }
    Some(sys.probe(writer) == Liveness::Dead)
}
