//! One attempt (PROTOCOL 18.5): the directories, the sentinel and what
//! else sits at the lock path (18.6), the doorway, and the clean-up of a
//! lost attempt; and the busy lock's report.

use super::scan::Published;
use super::*;
use std::os::fd::AsFd;
use swaplock_core::decide::{FileId, WatchKey};
use swaplock_core::rw::files::{foreign_owner, no_hard_links, Owner};
use swaplock_core::soft::{Clock, Dir as _, NodeKind};
use swaplock_core::strict::claim::encode_claim;
use swaplock_core::strict::doorway::{
    directory_mode, may_link_held, may_publish, settled_directory_mode, won,
};
use swaplock_core::strict::occupant::{judge_occupant, Look, Occupant};
use swaplock_core::strict::{
    CLAIMS_DIR, COORDINATION_SUFFIX, DAMAGED_GRACE, READ_RETRY, RECORD_LIMIT, SENTINEL,
    UNPARSABLE_GRACE,
};

/// What an attempt came to.
pub(super) enum Attempt {
    /// The lock is ours.
    Won(Hold),
    /// It is not: what was in the way.
    Busy(Blocker),
}

/// What kept an attempt out.
pub(super) enum Blocker {
    /// Something other than the sentinel at the lock path (its
    /// description).
    Occupant(String),
    /// Claims: another contender's, or the doorway was lost.
    Claims,
    /// The sentinel came or went while the attempt looked at the lock
    /// path.
    Sentinel,
}

/// A won attempt: what the hold keeps.
pub(super) struct Hold {
    /// The sentinel, held open for the hold as filelock holds it (never
    /// read or locked: closing it is the release's last step).
    pub(super) _sentinel: OwnedFd,
    /// The claims' directory, through which release removes our claims.
    pub(super) claims: Dir,
    /// Our claims' token.
    pub(super) token: Token,
}

/// What an inspection of the lock path found.
pub(super) enum AtLock {
    /// Nothing.
    Missing,
    /// The sentinel, open.
    Sentinel(OwnedFd, FileId),
    /// Anything else: the verdict's description and how it stands, with
    /// the key of its unchanged watch.
    Other {
        description: String,
        state: Standing,
        key: WatchKey,
    },
}

/// How what sits at the lock path stands toward an attempt.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Standing {
    /// A holder: contention.
    Held,
    /// A holder this host proves gone: an error at once.
    Exited,
    /// Content no lock parses: an error once unchanged for 2 s.
    Unparsable,
    /// A node no lock writes: an error once it stays for 0.5 s.
    Damaged,
}

impl StrictLock {
    /// One attempt of `me`.
    pub(super) fn attempt(&self, me: &Me) -> io::Result<Attempt> {
        let dirs = self.open_dirs()?;
        self.remove_leftovers(&dirs.claims)?;
        let (sentinel, sentinel_id) = match self.sentinel(&dirs.lock, me)? {
            Ok(found) => found,
            Err(blocker) => return Ok(Attempt::Busy(blocker)),
        };
        if !may_publish(&self.scan(&dirs.claims, true)?.doorway()) {
            return Ok(Attempt::Busy(Blocker::Claims));
        }
        let token = os::random_token();
        let intent = ClaimName {
            state: ClaimState::Intent,
            token,
        };
        let held = ClaimName {
            state: ClaimState::Held,
            token,
        };
        let mut record = [0u8; RECORD_LIMIT];
        let mut digits = [0u8; swaplock_core::start::START_DIGITS_MAX];
        let start = me.start.as_ref().map(|s| s.to_decimal(&mut digits));
        let len = encode_claim(&token, me.pid, &me.host, start, &mut record)
            .map_err(|e| self.invalid(None, format!("cannot encode our claim: {e:?}")))?;
        match self.publish(&dirs.claims, intent.encode().as_bytes(), &record[..len])? {
            Published::Linked => {}
            // Another file has the name: not ours to remove.
            Published::Taken | Published::Reclaimed => return Ok(Attempt::Busy(Blocker::Claims)),
            Published::Replaced => {
                self.discard(&dirs.claims, &[intent])?;
                return Ok(Attempt::Busy(Blocker::Claims));
            }
        }
        // From here our claims go on every way out but a win.
        let mut ours = vec![held, intent];
        let outcome = self.doorway(&dirs, (&intent, &held), sentinel_id, &mut ours);
        match outcome {
            Ok(true) => Ok(Attempt::Won(Hold {
                _sentinel: sentinel,
                claims: dirs.claims,
                token,
            })),
            Ok(false) => {
                self.discard(&dirs.claims, &ours)?;
                Ok(Attempt::Busy(Blocker::Claims))
            }
            Err(e) => {
                // The first error is the one to report; one in the clean-up
                // leaves its claim to the next attempt.
                let _ = self.discard(&dirs.claims, &ours);
                Err(e)
            }
        }
    }

    /// Steps 5 to 8 of the doorway, once our intent is published: whether
    /// we won. `ours` loses the held claim when its name turns out to be
    /// another file's.
    fn doorway(
        &self,
        dirs: &Dirs,
        (intent, held): (&ClaimName, &ClaimName),
        sentinel: FileId,
        ours: &mut Vec<ClaimName>,
    ) -> io::Result<bool> {
        let token = intent.token;
        if !may_link_held(&self.scan(&dirs.claims, true)?.doorway(), &token) {
            return Ok(false);
        }
        let (intent_name, held_name) = (intent.encode(), held.encode());
        let linked = c(intent_name.as_bytes()).and_then(|from| {
            let to = c(held_name.as_bytes())?;
            sys::link_at(dirs.claims.as_fd(), &from, &to)
        });
        match linked {
            Ok(()) => {}
            Err(e) if e == Errno::EXIST => {
                let mut os = SoftOs::on(&dirs.claims);
                let same = match (
                    os.lstat(held_name.as_bytes()),
                    os.lstat(intent_name.as_bytes()),
                ) {
                    (Ok(a), Ok(b)) => a.id == b.id,
                    _ => false,
                };
                if !same {
                    ours.retain(|c| c != held);
                    return Err(self.invalid(
                        Some(held_name.as_bytes()),
                        "another file has our held claim's name".into(),
                    ));
                }
            }
            // Our intent was broken by an operator: this attempt is lost.
            Err(e) if e == Errno::NOENT => return Ok(false),
            Err(e) if no_hard_links(e) => return Err(self.no_hard_links(e)),
            Err(e) => return Err(self.err(Step::Lock, e)),
        }
        if !won(&self.scan(&dirs.claims, true)?.doorway(), &token) {
            return Ok(false);
        }
        // The sentinel must still be the one this attempt opened: a soft
        // lock may have taken a path whose sentinel was removed.
        Ok(SoftOs::on(&dirs.lock)
            .lstat(&self.base)
            .is_ok_and(|st| st.id == sentinel))
    }

    /// Unlinks our claims `names` (held first); one that cannot be
    /// unlinked is remembered and removed at the next attempt.
    pub(super) fn discard(&self, claims: &Dir, names: &[ClaimName]) -> io::Result<()> {
        let mut os = SoftOs::on(claims);
        let mut failed = None;
        for name in names {
            match os.unlink(name.encode().as_bytes()) {
                Ok(()) => {}
                Err(e) if e == Errno::NOENT => {}
                Err(e) => {
                    crate::sync::lock(&self.memory).leftovers.push(*name);
                    failed.get_or_insert((*name, e));
                }
            }
        }
        match failed {
            None => Ok(()),
            Some((name, e)) => Err(self.invalid(
                Some(name.encode().as_bytes()),
                format!(
                    "cannot remove our own claim ({e}); it blocks every contender until this lock \
                     removes it at its next attempt, or `swaplock break --kind strict` once this \
                     process has exited"
                ),
            )),
        }
    }

    /// Removes the claims an earlier attempt could not.
    fn remove_leftovers(&self, claims: &Dir) -> io::Result<()> {
        let leftovers = std::mem::take(&mut crate::sync::lock(&self.memory).leftovers);
        match leftovers.is_empty() {
            true => Ok(()),
            false => self.discard(claims, &leftovers),
        }
    }

    /// Opens the lock's directory, creating it if missing, then makes and
    /// settles the coordination and claims' directories (PROTOCOL 18.1).
    pub(super) fn open_dirs(&self) -> io::Result<Dirs> {
        let lock = match os::open_dir(&self.dir) {
            Ok(fd) => fd,
            Err(e) if e == Errno::NOENT => {
                std::fs::create_dir_all(&self.dir_path)
                    .map_err(|e| LockError::io(&self.path, Step::Open, e.kind(), e))?;
                os::open_dir(&self.dir).map_err(|e| self.err(Step::Open, e))?
            }
            Err(e) => return Err(self.err(Step::Open, e)),
        };
        let mode = directory_mode(self.file_mode());
        let mut coordination = Name::new();
        let _ = coordination.extend_from_slice(&self.base);
        coordination
            .extend_from_slice(COORDINATION_SUFFIX)
            .map_err(|_| self.err(Step::Open, Errno::from_raw(libc::ENAMETOOLONG)))?;
        let coordination = self.settled_dir(&lock, &coordination, mode)?;
        let claims = self.settled_dir(&coordination, CLAIMS_DIR, mode)?;
        Ok(Dirs { lock, claims })
    }

    /// Makes directory `name` below `parent` (or finds it), opens it
    /// without following a symlink, refuses another account's under a
    /// sticky parent, and sets the mode of one this account owns.
    fn settled_dir(&self, parent: &Dir, name: &[u8], mode: u32) -> io::Result<Dir> {
        let shown = String::from_utf8_lossy(name);
        let made = c(name).and_then(|n| sys::mkdir_at(parent.as_fd(), &n, mode));
        match made {
            Ok(()) => {}
            Err(e) if e == Errno::EXIST => {}
            Err(e) => return Err(self.invalid(None, format!("cannot create {shown}: {e}"))),
        }
        let dir = match c(name).and_then(|n| sys::open_dir_nofollow(parent.as_fd(), &n)) {
            Ok(dir) => dir,
            Err(e) if e == Errno::LOOP || e == Errno::NOTDIR => {
                return Err(self.invalid(None, format!("{shown} is not a real directory")))
            }
            Err(e) => return Err(self.invalid(None, format!("cannot open {shown}: {e}"))),
        };
        let looked = sys::owner_and_mode(&dir).and_then(|d| Ok((d, sys::owner_and_mode(parent)?)));
        let ((uid, st_mode), (parent_uid, parent_mode)) =
            looked.map_err(|e| self.invalid(None, format!("cannot inspect {shown}: {e}")))?;
        let euid = sys::effective_uid();
        let owner = |uid, mode: u32| Owner {
            uid,
            sticky: mode & 0o1000 != 0,
        };
        if foreign_owner(owner(uid, st_mode), owner(parent_uid, parent_mode), euid).is_some() {
            return Err(self.invalid(
                None,
                format!(
                    "{shown} belongs to uid {uid}, not to this process's account or the parent's \
                     owner"
                ),
            ));
        }
        if uid == euid {
            if let Some(settled) = settled_directory_mode(st_mode, mode) {
                SoftOs::on(parent)
                    .chmod(&dir, settled)
                    .map_err(|e| match e {
                        // Its owner may always set a directory's mode, but
                        // where the filesystem keeps none (vfat, exFAT).
                        e if e == Errno::PERM => self.no_unix_modes(&shown, e),
                        e => self.invalid(None, format!("cannot set the mode of {shown}: {e}")),
                    })?;
            }
        }
        Ok(dir)
    }

    /// Step 2: the sentinel, open, made if the path is free; or what keeps
    /// the attempt out.
    fn sentinel(&self, dir: &Dir, me: &Me) -> io::Result<Result<(OwnedFd, FileId), Blocker>> {
        let mut published = false;
        let mut damaged_since: Option<Instant> = None;
        loop {
            let (description, state, key) = match self.look(dir, me)? {
                AtLock::Sentinel(fd, id) => return Ok(Ok((fd, id))),
                AtLock::Missing if published => return Ok(Err(Blocker::Sentinel)),
                AtLock::Missing => {
                    self.reap_sentinel_litter(dir)?;
                    match self.publish(dir, &self.base, SENTINEL)? {
                        Published::Linked | Published::Taken => {}
                        Published::Reclaimed | Published::Replaced => {
                            return Ok(Err(Blocker::Sentinel))
                        }
                    }
                    published = true;
                    continue;
                }
                AtLock::Other {
                    description,
                    state,
                    key,
                } => (description, state, key),
            };
            let found =
                || format!("expected the strict sentinel at the lock path, found {description}");
            match state {
                Standing::Held => return Ok(Err(Blocker::Occupant(description))),
                Standing::Exited => return Err(self.invalid(None, found())),
                Standing::Unparsable => {
                    let now = SoftOs::on(dir).now();
                    let unchanged = crate::sync::lock(&self.memory).watch.observe(key, now);
                    if unchanged >= UNPARSABLE_GRACE {
                        let reason = format!("{}, unchanged for 2 seconds", found());
                        return Err(self.invalid(None, reason));
                    }
                    return Ok(Err(Blocker::Occupant(description)));
                }
                Standing::Damaged => {
                    let since = *damaged_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= DAMAGED_GRACE {
                        return Err(self.invalid(None, found()));
                    }
                    crate::sync::thread::sleep(READ_RETRY);
                }
            }
        }
    }

    /// What sits at the lock path (PROTOCOL 18.6): an `lstat`, then for a
    /// regular file a non-following, non-blocking open, an `fstat` that
    /// must show the same file, and a read of at most 1025 bytes.
    pub(super) fn look(&self, dir: &Dir, me: &Me) -> io::Result<AtLock> {
        let mut os = SoftOs::on(dir);
        let st = match os.lstat(&self.base) {
            Ok(st) => st,
            Err(e) if e == Errno::NOENT => return Ok(AtLock::Missing),
            Err(e) => return Err(self.err(Step::Stat, e)),
        };
        let key = WatchKey {
            mtime: st.mtime,
            ino: st.id.ino,
            ctime: st.ctime,
        };
        let mut buf = [0u8; RECORD_LIMIT + 1];
        let mut opened = None;
        let look = match st.kind {
            NodeKind::Directory => Look::Directory,
            NodeKind::Symlink => Look::Symlink,
            NodeKind::Other => Look::Special,
            NodeKind::Regular => match os.open_read(&self.base) {
                Err(e) if e == Errno::NOENT => return Ok(AtLock::Missing),
                Err(e) => Look::Unreadable(e),
                Ok(fd) => match super::scan::read_same(&mut os, &fd, st.id, &mut buf) {
                    Ok(n) => {
                        opened = Some(fd);
                        Look::Content(&buf[..n])
                    }
                    Err(e) => Look::Unreadable(e),
                },
            },
        };
        let verdict = judge_occupant(&mut os, &me.host, look);
        let state = match verdict {
            Occupant::Sentinel => match opened {
                Some(fd) => return Ok(AtLock::Sentinel(fd, st.id)),
                None => Standing::Damaged,
            },
            Occupant::Held(_) | Occupant::Forbidden(_) => Standing::Held,
            Occupant::Exited(_) => Standing::Exited,
            Occupant::Unparsable => Standing::Unparsable,
            Occupant::Damaged(_) => Standing::Damaged,
        };
        Ok(AtLock::Other {
            description: verdict.to_string(),
            state,
            key,
        })
    }

    /// The error of an acquire that gave up on a busy lock: filelock's
    /// timeout text, and a sentence that names what was in the way.
    pub(super) fn busy(&self, wait: Wait<Duration>, blocker: Blocker) -> io::Error {
        let kind = if wait.timed() {
            io::ErrorKind::TimedOut
        } else {
            io::ErrorKind::WouldBlock
        };
        let why = match blocker {
            Blocker::Occupant(description) => format!(
                "{description} sits at the lock path in place of the strict sentinel (a strict \
                 lock and a soft lock must not share a path)"
            ),
            Blocker::Claims => self.holder_sentence(),
            Blocker::Sentinel => "the sentinel at the lock path was being made or removed by \
                                  another process"
                .into(),
        };
        let source = io::Error::new(
            kind,
            Explained(Box::new(Busy {
                path: self.path.clone(),
                why,
            })),
        );
        LockError::io(&self.path, Step::Lock, kind, source)
    }
}

/// A busy strict lock. Its `Display` is filelock's `Timeout` text; its
/// explanation says what was in the way.
#[derive(Debug)]
struct Busy {
    path: Arc<Path>,
    why: String,
}

impl std::fmt::Display for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "The file lock '{}' could not be acquired.",
            self.path.display()
        )
    }
}

impl Explain for Busy {
    fn explain(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "The file lock '{}' could not be acquired: {}.",
            self.path.display(),
            self.why
        )
    }
}

impl std::error::Error for Busy {}
