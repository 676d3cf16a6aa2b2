//! The with-lock-ex protocol's acquire loop, over the [`KernelOs`] trait:
//! open (creating), lock, then check the locked descriptor against the
//! path, and start again when a holder deleted or replaced the file.
//!
//! [`attempt`] is one such attempt; [`acquire`] repeats it for as long as
//! the caller's [`Patience`] lasts (a [`Backoff`] for a timed wait), on the
//! adapter's [`Clock`], so production and a simulation run the same wait.
//! [`check_remove`] is the check a holder makes before deleting the lock
//! file: only the file it locked, never a successor's.
//!
//! `flock` may answer `ENOSYS` (some FUSE filesystems, Android storage). The
//! loop then reports [`Outcome::Unsupported`] with the descriptor still
//! open and whether this attempt created the file; [`fall_back`] then
//! removes that placeholder while it is open, only if this attempt created
//! it (never a peer's soft marker found at the path: invariant I22), and
//! the caller continues with a soft lock.

use crate::decide::{check_kernel_lock, FileId, HeldBecause, KernelLockCheck, Liveness};
use crate::errno::Errno;
use crate::mutant::{active, Mutant};
use crate::pid::Pid;
use crate::soft::{self, Standing};
use crate::wait::{Clock, Patience, Wait};
use core::time::Duration;

/// The operations of a kernel lock on one path, each one syscall.
pub trait KernelOs {
    /// An open descriptor of the lock file.
    type File;
    /// `open(path, O_RDWR|O_CREAT[|O_EXCL])`, never truncating. `EAGAIN`
    /// says a peer's work refuses the open for now (Windows: the file is
    /// being deleted, or is open elsewhere without sharing), which the
    /// driver takes as contention.
    fn open(&mut self, exclusive: bool) -> Result<Self::File, Errno>;
    /// `open(path, O_RDWR)`: the lock file if it exists, never created
    /// (`ENOENT` otherwise).
    fn open_existing(&mut self) -> Result<Self::File, Errno>;
    /// Takes the lock (`fcntl` on byte 0, or `flock`), waiting or not.
    fn lock(&mut self, file: &Self::File, wait: bool) -> Result<(), Errno>;
    /// `fstat(file)`.
    fn fstat(&mut self, file: &Self::File) -> Result<FileId, Errno>;
    /// `stat(path)` (or `lstat`, where symlinks are not followed).
    fn stat(&mut self) -> Result<FileId, Errno>;
    /// `close(file)`.
    fn close(&mut self, file: Self::File);
    /// Whether the client may answer a lookup of the path from a cache of
    /// names that still names a file its server removed (an NFS client:
    /// its `stat` can name the file a holder on another host deleted): the
    /// identity check then makes the client ask the server ([`named`]).
    fn names_cached(&self) -> bool {
        false
    }
    /// Whether, besides, the client may hold a delegation of the file its
    /// cache names at the path, which lets it answer the name (even an
    /// exclusive create) from that cache without asking the server (an
    /// NFSv4 client): the server recalls a delegation when another client
    /// removes or renames the file, but not when the same client does,
    /// and a second superblock of that client (a second mount of the
    /// export, with `nosharecache` or other options) holds the removed
    /// file's name as current. [`named`] then reads the directory's listing
    /// too ([`listed`](Self::listed)).
    fn names_delegated(&self) -> bool {
        false
    }
    /// What the directory of the path lists under its last component, as
    /// the server has it now: the directory's entries read from the server
    /// (never from a cache the directory's unchanged attributes vouch for,
    /// nor a delegation of the file).
    fn listed(&mut self) -> Result<Listed, Errno> {
        Err(Errno::NOSYS)
    }
    /// `open(path, O_RDWR|O_CREAT|O_EXCL)`, then `fstat` and `close` of the
    /// file it made: what [`named`] asks the server with. A wrapper whose
    /// [`open`](Self::open) keeps books on the files it opens (a registry
    /// of the process's locks) opens here on the file system alone, and
    /// closes through its books.
    fn made_anew(&mut self) -> Result<FileId, Errno> {
        let made = self.open(true)?;
        let id = self.fstat(&made);
        self.close(made);
        id
    }
}

/// How a client answers a lookup of the lock file's name, as an adapter's
/// identity check is told ([`KernelOs::names_cached`],
/// [`KernelOs::names_delegated`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Names {
    /// As the filesystem has it (a local filesystem).
    Trusted,
    /// Maybe from a cache of names that still names a file its server
    /// removed (a network filesystem).
    Cached,
    /// Also from a delegation of the file that the server may never
    /// recall (NFSv4).
    Delegated,
}

impl Names {
    /// Whether the check asks the server by an exclusive create.
    pub const fn cached(self) -> bool {
        !matches!(self, Names::Trusted)
    }

    /// Whether the check reads the directory's listing too.
    pub const fn delegated(self) -> bool {
        matches!(self, Names::Delegated)
    }
}

/// What a directory's listing shows under a name ([`KernelOs::listed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Listed {
    /// No entry of that name.
    Absent,
    /// An entry, with its inode number.
    Entry(u64),
    /// An entry whose file the listing does not show: a symlink that the
    /// lock follows.
    Link,
}

/// The file the path names now, for the identity check (`stat`, or
/// `lstat`). Where the client caches names ([`KernelOs::names_cached`]),
/// an exclusive create comes first: a client must ask the server whether
/// a name it creates exclusively is there (`EEXIST` where it is, which
/// leaves the client's entry for it as the server has it, for the `stat`
/// after it); a cached entry cannot answer it. Where the server has no
/// such name, the create makes the file, as a waiter's open would, and
/// that new file is what the path names. A refusal the client can give
/// only once the server said the name is not there (a directory this
/// process may not write to, a full or read-only filesystem, a quota)
/// leaves the `stat` to say; any other error (out of descriptors: the
/// client never asked) is the check's. Only the last component of the
/// path is asked about: where symlinks are followed, a removed target
/// named by its own path is still answered from the cache.
///
/// Where the client may also hold a delegation of the cached file
/// ([`KernelOs::names_delegated`]), neither the create nor the `stat` is
/// sure to have asked the server, and the directory's listing, read from
/// the server, has the last word on a file the `stat` found: another
/// file listed under the name is what the path names (by its inode
/// number, on the `stat`'s device), no entry says nothing is there
/// (`ENOENT`), and a followed symlink leaves the `stat`'s answer. A
/// listing that fails fails the check: the `stat` alone may name a
/// removed file. The listing comes last, so that whatever a peer does
/// meanwhile, it is at least as new as the `stat`: a file removed from
/// the name never comes back to it, so a listing that still shows the
/// locked file there shows it current.
pub fn named<O: KernelOs>(os: &mut O) -> Result<FileId, Errno> {
    look(os).0
}

/// [`named`]'s answer, and the file the `stat` found where the listing
/// then overruled it (no entry under the name, or an entry of another
/// inode number): the one answer that can repeat for good about a file
/// nobody removes (an export that lists the name in another case or
/// Unicode form; a file mounted over the name, whose directory lists the
/// file beneath).
fn look<O: KernelOs>(os: &mut O) -> (Result<FileId, Errno>, Option<FileId>) {
    if os.names_cached() {
        match os.made_anew() {
            Ok(made) => return (Ok(made), None),
            Err(e) if e == Errno::EXIST || asked_first(e) => {}
            Err(e) => return (Err(e), None),
        }
    }
    let found = match os.stat() {
        Ok(found) => found,
        Err(e) => return (Err(e), None),
    };
    if !os.names_delegated() {
        return (Ok(found), None);
    }
    match os.listed() {
        Ok(Listed::Entry(ino)) if ino != found.ino => (Ok(FileId { ino, ..found }), Some(found)),
        Ok(Listed::Entry(_)) => (Ok(found), None),
        Ok(Listed::Absent) => (Err(Errno::NOENT), Some(found)),
        Ok(Listed::Link) => (Ok(found), None),
        Err(e) => (Err(e), None),
    }
}

/// Whether an exclusive create's error comes only after the client asked
/// the server for the name.
fn asked_first(e: Errno) -> bool {
    [
        Errno::ACCES,
        Errno::PERM,
        Errno::ROFS,
        Errno::NOSPC,
        Errno::DQUOT,
    ]
    .contains(&e)
}

/// The step that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Step {
    /// Opening or creating the lock file.
    Open,
    /// Taking the lock.
    Lock,
    /// `fstat` of the locked descriptor.
    Fstat,
    /// `stat` of the path.
    Stat,
    /// The identity check, over and over: the path's open kept giving one
    /// file that the check kept finding the path does not name
    /// ([`UNNAMED_AT_MOST`] times in a row), as where an NFSv4 directory's
    /// listing spells the name otherwise than the path does (an export
    /// that folds case or normalizes names).
    Named,
}

/// How many times in a row one attempt starts again on the same file
/// because the directory's listing, under the name by which the `stat`
/// found that file, showed no entry or another file's. A holder's
/// delete-on-release makes the `stat` itself find another file or none,
/// which never counts; only a listing that disagrees with the `stat` for
/// good (an export that lists the name in another case or Unicode form, a
/// file mounted over the name) shows the same file again and again.
pub const UNNAMED_AT_MOST: u32 = 8;

/// The outcome of one attempt.
#[must_use]
#[derive(Debug)]
pub enum Outcome<F> {
    /// The lock is held on this file.
    Held(F, FileId),
    /// Another process holds the lock (`EAGAIN` or `EACCES`).
    Busy(Errno),
    /// The filesystem has no such lock (`ENOSYS`); the file is still open.
    Unsupported {
        /// The descriptor.
        file: F,
        /// Whether this attempt created the file.
        created: bool,
    },
}

/// How many times in a row a fallback attempt finds the file gone for its
/// plain open and there for its exclusive create before it opens as a
/// plain open with create would (a dangling symlink it follows stays so
/// for ever).
const VANISHED_AT_MOST: u32 = 8;

/// How many times in a row one attempt starts again after an `ESTALE`: a
/// network filesystem's answer for a file handle whose file its server no
/// longer has (a holder on another host removed the lock file). The file
/// went away, as a holder's delete-on-release removes it; the attempt opens
/// the path anew rather than fail. A handle that stays stale (the lock's
/// directory itself removed on the server) is reported after that many.
const STALE_AT_MOST: u32 = 8;

/// The stale handles one attempt met: how many in a row, and what the path
/// named at the last of them.
#[derive(Default)]
struct Stale {
    count: u32,
    seen: Option<Result<FileId, Errno>>,
}

impl Stale {
    /// Whether the attempt starts again after `e`: only an `ESTALE`, at
    /// most [`STALE_AT_MOST`] times in a row about one file. A look at the
    /// path tells hand-offs apart: a wait handed one removed file after
    /// another sees a new file (or none) at the path each time, which
    /// starts the count again; a directory gone from the server, or a
    /// server whose every answer is stale, shows the same each time.
    fn went_away<O: KernelOs>(&mut self, os: &mut O, e: Errno) -> bool {
        if e != Errno::STALE {
            return false;
        }
        let now = os.stat();
        let moved = !matches!(now, Err(e) if e == Errno::STALE)
            && self.seen.is_some_and(|seen| seen != now);
        if moved {
            self.count = 0;
        }
        self.seen = Some(now);
        let again = self.count < STALE_AT_MOST;
        self.count += u32::from(again);
        again
    }
}

/// One attempt: open (creating if needed), lock, and keep the lock only if
/// the path still names the locked file. `may_fall_back`: the caller
/// switches to a soft lock where the lock call answers `ENOSYS` (`flock`,
/// as filelock's `UnixFileLock` does, PROTOCOL 7.17), so the attempt
/// creates the file only with `O_EXCL` (after a plain open found none), to
/// learn whether it created it, and reports
/// [`Outcome::Unsupported`]. Otherwise (`fcntl`, the with-lock-ex
/// protocol) `ENOSYS` is an error, as with-lock-ex reports it: a switch
/// without knowing who created the file would leave an empty file at the
/// path, which no soft contender ever evicts (invariant I10).
pub fn attempt<O: KernelOs>(
    os: &mut O,
    wait: bool,
    may_fall_back: bool,
) -> Result<Outcome<O::File>, (Step, Errno)> {
    // A stale handle (`ESTALE`) at the open, the lock, the `fstat` or the
    // look at the path: the file went away, so the attempt starts again, a
    // few times in a row about one file.
    let mut stale = Stale::default();
    // The file the last start-again was on, and how many times in a row.
    let mut unnamed: (Option<FileId>, u32) = (None, 0);
    'attempt: loop {
        let opened = match may_fall_back {
            // Whether this attempt created the file must be known for
            // sure: the file a plain open found may be a peer's marker,
            // which the fallback must never remove.
            // The plain open comes first: a lock file usually outlives its
            // holders, and then one open does (an exclusive create first
            // would cost a failed open on every acquire).
            true => {
                let mut appeared = 0;
                loop {
                    match os.open_existing() {
                        Ok(file) => break Ok((file, false)),
                        Err(e) if e == Errno::NOENT => match os.open(true) {
                            Ok(file) => break Ok((file, true)),
                            // Made by a peer between the two opens: open
                            // it as it is now, not created by us.
                            Err(e) if e == Errno::EXIST && appeared < VANISHED_AT_MOST => {
                                appeared += 1;
                            }
                            // Gone for the plain open and still there for
                            // the exclusive one: a symlink to a missing
                            // file (followed). The plain open with create
                            // makes its target, which is then not known
                            // to be ours.
                            Err(e) if e == Errno::EXIST => {
                                break os.open(false).map(|f| (f, false));
                            }
                            Err(e) => break Err(e),
                        },
                        Err(e) => break Err(e),
                    }
                }
            }
            false => os.open(false).map(|f| (f, false)),
        };
        let (file, created) = match opened {
            Ok(opened) => opened,
            // The adapter's answer for an open that a peer's work refuses
            // for now (on Windows: a peer deleting the file, or holding it
            // open without sharing): contention, as for the lock itself.
            Err(e) if e == Errno::AGAIN => return Ok(Outcome::Busy(e)),
            Err(e) if stale.went_away(os, e) => continue,
            Err(e) => return Err((Step::Open, e)),
        };
        loop {
            match os.lock(&file, wait) {
                Ok(()) => break,
                Err(e) if stale.went_away(os, e) => {
                    os.close(file);
                    continue 'attempt;
                }
                Err(e) if e == Errno::INTR && !active(Mutant::KernelInterruptFails) => continue,
                Err(e) if e == Errno::AGAIN || e == Errno::ACCES => {
                    os.close(file);
                    return Ok(Outcome::Busy(e));
                }
                Err(e) if e == Errno::NOSYS && may_fall_back => {
                    return Ok(Outcome::Unsupported { file, created })
                }
                Err(e) => {
                    os.close(file);
                    return Err((Step::Lock, e));
                }
            }
        }
        let locked = match os.fstat(&file) {
            Ok(id) => id,
            Err(e) => {
                os.close(file);
                if stale.went_away(os, e) {
                    continue;
                }
                return Err((Step::Fstat, e));
            }
        };
        if active(Mutant::KernelLockUnchecked) {
            return Ok(Outcome::Held(file, locked));
        }
        let (named, unlisted) = look(os);
        match named {
            Err(e) if e == Errno::STALE => {
                if !stale.went_away(os, e) {
                    os.close(file);
                    return Err((Step::Stat, e));
                }
            }
            _ => stale.count = 0,
        }
        let check = check_kernel_lock(locked, named);
        if active(Mutant::KernelLockNoRetry) {
            if let KernelLockCheck::Retry = check {
                os.close(file);
                return Err((Step::Stat, Errno::NOENT));
            }
        }
        if active(Mutant::KernelStatErrorHeld) {
            if let KernelLockCheck::Fail(_) = check {
                return Ok(Outcome::Held(file, locked));
            }
        }
        match check {
            KernelLockCheck::Held => return Ok(Outcome::Held(file, locked)),
            // A holder removed or replaced the file after we opened it: our
            // lock is on an orphan. Close it and lock the new file.
            // Only a start again because the listing overruled a `stat`
            // that found the locked file counts towards the bound (the
            // listing and the `stat` disagree for good where the listing
            // spells the name otherwise, or a file is mounted over the
            // name): a `stat` that finds another file, or none, saw a
            // peer remove the locked one, which is progress however the
            // filesystem numbers the next file (ext4 gives a file made
            // after a removal the freed inode number, so every file at a
            // busy path may carry the same one).
            KernelLockCheck::Retry => {
                os.close(file);
                unnamed = match unnamed {
                    _ if unlisted != Some(locked) => (None, 0),
                    (Some(id), n) if id == locked => (Some(id), n + 1),
                    _ => (Some(locked), 1),
                };
                if unnamed.1 > UNNAMED_AT_MOST {
                    return Err((Step::Named, Errno::NOENT));
                }
            }
            KernelLockCheck::Fail(e) => {
                os.close(file);
                return Err((Step::Stat, e));
            }
        }
    }
}

/// The acquire driver: [`attempt`] until the lock is held, or until
/// `patience` gives up on a busy lock, pausing between attempts as it says
/// (on the adapter's [`Clock`]). The first attempt always runs.
///
/// `wait_in_kernel` makes each attempt block in the lock call (`F_SETLKW`,
/// `LOCK_EX`); the kernel has no timed wait for these locks, so a timed
/// wait polls with non-blocking attempts and a [`Backoff`]. A lock that
/// stays busy is reported as [`Outcome::Busy`] with the last attempt's
/// answer; any other outcome ends the loop at once.
pub fn acquire<O: KernelOs + Clock>(
    os: &mut O,
    wait_in_kernel: bool,
    may_fall_back: bool,
    patience: &mut impl Patience<Errno>,
) -> Result<Outcome<O::File>, (Step, Errno)> {
    let started = os.now();
    loop {
        patience.attempting();
        let busy = match attempt(os, wait_in_kernel, may_fall_back)? {
            Outcome::Busy(e) => e,
            done => return Ok(done),
        };
        let elapsed = os.now().since(started);
        match patience.busy(&busy, elapsed) {
            Some(pause) => os.sleep(pause),
            None => return Ok(Outcome::Busy(busy)),
        }
    }
}

/// The patience of a timed wait for a kernel lock: try again until
/// `timeout` has passed since the acquire began, pausing 1 ms after the
/// first busy attempt and twice as long after each next one, at most 25 ms
/// ([`Backoff::FIRST`], [`Backoff::LONGEST`]), and never past the timeout.
/// A short wait is thus noticed quickly, a long one costs few attempts.
///
/// ```
/// use core::time::Duration;
/// use swaplock_core::kernel::Backoff;
/// use swaplock_core::wait::Patience;
/// use swaplock_core::Errno;
///
/// let ms = Duration::from_millis;
/// let mut backoff = Backoff::new(ms(30));
/// assert_eq!(backoff.busy(&Errno::AGAIN, ms(0)), Some(ms(1)));
/// assert_eq!(backoff.busy(&Errno::AGAIN, ms(1)), Some(ms(2)));
/// assert_eq!(backoff.busy(&Errno::AGAIN, ms(28)), Some(ms(2)), "cut to the time left");
/// assert_eq!(backoff.busy(&Errno::AGAIN, ms(30)), None);
/// ```
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Backoff {
    /// How long after the acquire began to stop trying.
    pub deadline: Duration,
    /// The next pause.
    pause: Duration,
}

impl Backoff {
    /// The pause after the first busy attempt.
    pub const FIRST: Duration = Duration::from_millis(1);
    /// The longest pause between two attempts.
    pub const LONGEST: Duration = Duration::from_millis(25);

    /// Keep trying until `deadline` after the acquire began.
    pub const fn new(deadline: Duration) -> Self {
        Backoff {
            deadline,
            pause: Self::FIRST,
        }
    }

    /// Keep trying for as long as it takes: the patience of a wait in the
    /// kernel, which should never answer busy, but may (smbfs on macOS
    /// answers a blocking `flock` with `EWOULDBLOCK` while another local
    /// process holds it). A wait must go on waiting, not report the lock
    /// busy.
    pub const fn forever() -> Self {
        Self::new(Duration::MAX)
    }

    /// The patience of a kernel acquire that waits as `wait` says, its
    /// deadline given as the time left: one attempt ([`Wait::No`]: no time
    /// at all), [`forever`](Self::forever), or until the time left.
    pub const fn of(wait: Wait<Duration>) -> Self {
        match wait {
            Wait::No => Self::new(Duration::ZERO),
            Wait::Forever => Self::forever(),
            Wait::Until(left) => Self::new(left),
        }
    }
}

impl Patience<Errno> for Backoff {
    fn busy(&mut self, _holder: &Errno, elapsed: Duration) -> Option<Duration> {
        let left = self
            .deadline
            .checked_sub(elapsed)
            .filter(|l| !l.is_zero())?;
        let pause = self.pause.min(left);
        self.pause = (self.pause * 2).min(Self::LONGEST);
        Some(pause)
    }
}

/// Before a holder deletes the lock file by name (with-lock-ex's "acquire,
/// then rm"): `Ok` only if the path still names the file it locked, by
/// `fstat` of its descriptor against `stat` of the path. No process that
/// follows the protocol can change the name while we hold the lock, so a
/// different file (or none) means the protocol was broken, and the file
/// there, maybe a successor's, is not ours to delete: `ENOENT`. A failed
/// `fstat` or `stat` is reported as is.
pub fn check_remove<O: KernelOs>(os: &mut O, file: &O::File) -> Result<(), Errno> {
    let locked = os.fstat(file)?;
    let named = named(os)?;
    if named == locked {
        Ok(())
    } else {
        Err(Errno::NOENT)
    }
}

/// The switch to a soft lock after `flock` answered `ENOSYS`
/// ([`Outcome::Unsupported`]): removes the file at the lock path while
/// `file` is still open, only if this attempt `created` it, then closes it.
/// The caller then acquires the soft lock (filelock's `SoftFileLock`,
/// `cfg.kind` [`soft::Kind::Soft`]) on the same path, for good.
///
/// It keeps, of PROTOCOL 7.17 (the `flock` fallback), the removal of our
/// own empty placeholder before the switch: left at the lock path it would
/// read as a recordless marker, which soft contenders wait on and never
/// judge stale. And it keeps invariant I22: a file this attempt did not
/// create may be a peer's soft marker and is left alone; the one it did
/// create is removed by [`soft::remove_own_file`] (PROTOCOL 7.3) while
/// still open, which swaps it out through a placeholder (or, without an
/// exchange, unlinks only if the path still shows it), so that a peer's
/// marker published at the path since our attempt is never taken for ours.
/// The descriptor is closed only after the removal, never before: a
/// removal by name after close could delete a successor's marker.
///
/// The error is the removal's; the file is closed either way.
pub fn fall_back<O: soft::Os + ?Sized>(
    os: &mut O,
    cfg: &soft::Config<'_>,
    file: O::File,
    created: bool,
) -> Result<(), Errno> {
    let created = if active(Mutant::FallbackRemovesFoundFile) {
        true
    } else {
        created
    };
    if active(Mutant::FallbackUnlinksAfterClose) {
        // The naive switch: close, then remove the path by name if it
        // shows the same inode number.
        let own = os.fstat(&file);
        os.close(file);
        if let (true, Ok(own)) = (created, own) {
            soft::unlink_if_same(os, cfg.lock, &own);
        }
        return Ok(());
    }
    let removed = match created {
        true => soft::remove_own_file(os, cfg, &file),
        false => Ok(()),
    };
    os.close(file);
    removed
}

/// How a contender stands toward a kernel lock's holder as a lock query
/// names it (PROTOCOL 7.16): `pid` is the PID the query reports (`F_GETLK`'s
/// `l_pid`, or the kernel's lock table for `flock`), and `probe` asks
/// whether a process lives (`kill(pid, 0)`, PROTOCOL 4.3). A kernel lock
/// ends with its holder, so the holder is alive, unless the process named
/// is provably gone: it passed the lock on (a descriptor it shared or sent)
/// and exited, and who holds the lock now cannot be told; a probe that
/// fails otherwise cannot tell either. A PID below 1 names no process to
/// probe, and the lock is held by a live one: 0 is a holder in a PID
/// namespace this one cannot see, -1 an open file description lock or an
/// `flock` holder the kernel does not name.
pub fn holder_standing(pid: i32, probe: impl FnOnce(Pid) -> Liveness) -> Standing {
    let named = u32::try_from(pid).ok().and_then(Pid::new);
    match named.map(probe) {
        None | Some(Liveness::Alive) => Standing::Held(HeldBecause::Alive),
        Some(Liveness::Dead | Liveness::Unknown(_)) => Standing::Held(HeldBecause::CannotTell),
    }
}

#[cfg(test)]
mod tests;
