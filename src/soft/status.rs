//! What a lock's marker says of its holder: [`SoftLock::owner`],
//! [`SoftLock::status`], [`SoftLock::force_break`], and the report of a
//! busy lock.

use super::*;

impl SoftLock {
    /// The switch of a kernel lock on this path to this soft lock after
    /// `flock` answered `ENOSYS`: the core's [`fall_back`] removes the file
    /// at the lock path, open as `file`, if the kernel attempt `created`
    /// it (only then: it may be a peer's marker otherwise), and closes it.
    ///
    /// [`fall_back`]: swaplock_core::kernel::fall_back
    #[cfg(unix)]
    pub(crate) fn fall_back(&self, file: File, created: bool) -> io::Result<()> {
        let dir = self.open_dir()?;
        let me = Identity::now();
        let cfg = me.config(self, None);
        swaplock_core::kernel::fall_back(&mut SoftOs::on(&dir), &cfg, file, created)
            .map_err(|e| self.err(Step::Remove, e))
    }

    /// Removes the marker whoever holds it, as filelock's `break_lock()`.
    /// Mutual exclusion is lost if the holder is alive: reserve it for a
    /// marker whose holder is known to be gone, such as a stale one on a
    /// filesystem that cannot exchange names. On Windows a live holder's
    /// marker cannot be removed at all (its holder keeps it open without
    /// delete sharing): the call then fails with a permission error.
    ///
    /// ```no_run
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// // The holder's host is known to be down: its marker would never go.
    /// let lock = SoftLock::marker("/mnt/nfs/jobs.lock");
    /// if let Some(owner) = lock.owner()? {
    ///     eprintln!("breaking the lock of pid {:?} on {:?}", owner.pid, owner.host);
    ///     lock.force_break()?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn force_break(&self) -> io::Result<()> {
        /// Windows' `ERROR_SHARING_VIOLATION`, which std leaves uncategorised.
        const SHARING_VIOLATION: i32 = 32;
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                let kind = if cfg!(windows) && e.raw_os_error() == Some(SHARING_VIOLATION) {
                    io::ErrorKind::PermissionDenied
                } else {
                    e.kind()
                };
                Err(LockError::io(&self.path, Step::Remove, kind, e))
            }
            _ => Ok(()),
        }
    }

    /// Reads the marker through the adapter as a contender does (the
    /// core's [`look`]: `lstat`, a non-following, non-blocking open,
    /// `fstat`, at most [`READ_LIMIT`] bytes), so a symlink swapped in is
    /// never followed and a FIFO never waited on; `None` when there is no
    /// marker, or no directory. The lock's directory, opened for the read
    /// (and never created), comes with it.
    ///
    /// [`look`]: swaplock_core::soft::look
    /// [`READ_LIMIT`]: swaplock_core::record::READ_LIMIT
    pub(super) fn read_marker(&self) -> io::Result<Option<(Dir, Seen)>> {
        let dir = match os::open_dir(&self.dir) {
            Ok(dir) => dir,
            Err(e) if e == Errno::NOENT => return Ok(None),
            Err(e) => return Err(self.err(Step::Open, e)),
        };
        match protocol::look(&mut SoftOs::on(&dir), &self.base) {
            Ok(seen) => Ok(seen.map(|seen| (dir, seen))),
            Err(protocol::Error::Os { op, errno }) => Err(self.err(
                match op {
                    protocol::Op::Stat => Step::Stat,
                    _ => Step::Open,
                },
                errno,
            )),
            Err(e) => Err(self.protocol_error(e)),
        }
    }

    /// Who holds the lock now, as the marker says; `None` when there is no
    /// marker.
    ///
    /// ```
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let lock = SoftLock::marker(dir.path().join("jobs.lock"));
    /// assert_eq!(lock.owner()?, None); // no marker: free
    /// let _guard = lock.lock()?;
    /// let owner = lock.owner()?.expect("a marker");
    /// assert_eq!(owner.pid, Some(std::process::id()));
    /// println!("held by pid {:?} on {:?} for {:?}", owner.pid, owner.host, owner.age);
    /// # Ok(())
    /// # }
    /// ```
    pub fn owner(&self) -> io::Result<Option<OwnerInfo>> {
        let Some((dir, seen)) = self.read_marker()? else {
            return Ok(None);
        };
        let classified = classify(seen.content(), self.kind.reader());
        Ok(Some(OwnerInfo::from(classified, age(&dir, &seen))))
    }

    /// Who holds the lock now, as the marker says, and how a contender of
    /// this lock's kind stands toward that holder: the same judgement
    /// ([`standing`]) a contender makes before it would take a marker
    /// over, from one reading of the marker. `None` when there is no
    /// marker. The holder's PID is probed (and its start token read) only
    /// when the marker names this host; nothing is moved or removed.
    ///
    /// ```no_run
    /// use swaplock::core::soft::Standing;
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// match SoftLock::marker("/mnt/nfs/jobs/nightly.lock").status()? {
    ///     None => println!("free"),
    ///     Some((owner, Standing::Stale { .. })) => {
    ///         println!("pid {:?} is gone: the next contender takes over", owner.pid)
    ///     }
    ///     Some((owner, _)) => println!("held by pid {:?} on {:?}", owner.pid, owner.host),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// [`standing`]: swaplock_core::soft::standing
    pub fn status(&self) -> io::Result<Option<(OwnerInfo, swaplock_core::soft::Standing)>> {
        let Some((dir, seen)) = self.read_marker()? else {
            return Ok(None);
        };
        let content = seen.content();
        let reader = self.kind.reader();
        // The judgement probes processes only, through the adapter of the
        // directory the marker was read in.
        let me = Identity::now();
        let cfg = me.config(self, None);
        let standing = swaplock_core::soft::standing(&mut SoftOs::on(&dir), &cfg, content);
        let owner = OwnerInfo::from(classify(content, reader), age(&dir, &seen));
        Ok(Some((owner, standing)))
    }
}

/// The time since the marker's mtime, as it was seen, by the wall clock
/// of the directory's adapter; `None` for an mtime in the future.
fn age(dir: &Dir, seen: &Seen) -> Option<Duration> {
    SoftOs::on(dir).wall().since(seen.stat().mtime)
}

/// What a marker says of its holder.
#[derive(Clone, Debug, PartialEq)]
pub struct OwnerInfo {
    /// `"soft"`, `"exclusive"`, `"lease"`, another protocol 2 mode,
    /// `"recordless"`, `"strict"` or `"malformed"`.
    pub mode: String,
    /// The holder's PID, when the record names one.
    pub pid: Option<u32>,
    /// The holder's host.
    pub host: Option<String>,
    /// The holder's start token, in decimal.
    pub start: Option<String>,
    /// The lease duration in seconds.
    pub lease_seconds: Option<f64>,
    /// The time since the marker was last written or refreshed.
    pub age: Option<Duration>,
}

impl OwnerInfo {
    /// The holder in words: `pid P on HOST`, or `a MODE marker` for a
    /// marker that names none.
    pub fn name(&self) -> String {
        match (self.pid, &self.host) {
            (Some(pid), Some(host)) => format!("pid {pid} on {host}"),
            _ => format!("a {} marker", self.mode),
        }
    }

    pub(super) fn from(c: Classified<'_>, age: Option<Duration>) -> Self {
        let mut info = OwnerInfo {
            mode: String::new(),
            pid: None,
            host: None,
            start: None,
            lease_seconds: None,
            age,
        };
        match c {
            Classified::Sentinel => info.mode = "strict".into(),
            Classified::Recordless => info.mode = "recordless".into(),
            Classified::Malformed(why) => info.mode = format!("malformed ({why})"),
            Classified::V1(r) => {
                info.mode = "soft".into();
                info.pid = Some(r.pid.get());
                info.host = Some(r.host.into());
                info.start = r.start.map(|s| s.to_string());
            }
            Classified::V2(r) => {
                info.mode = r.mode.as_str().into();
                if let Mode::Unknown(m) = r.mode {
                    info.mode = format!("unknown ({m})");
                }
                info.pid = Some(r.pid.get());
                info.host = Some(r.host.into());
                info.start = r.start.map(|s| s.to_string());
                info.lease_seconds = r.duration;
            }
        }
        info
    }
}

/// Why a lock was busy. Its `Display` is filelock's `Timeout` text, which
/// [`LockError::os_error`] shows; [`LockError`]'s own `Display` is
/// [`Busy::explain`], one sentence that also says who holds the lock and,
/// for a marker that should have been taken over, why it was not.
#[derive(Debug)]
pub(crate) struct Busy {
    pub(super) path: Arc<Path>,
    pub(super) holder: Holder,
    /// The marker as read after the attempt, and how a contender stands
    /// toward its holder; `None` for a holder the attempt already named,
    /// or a marker gone or unreadable since.
    pub(super) judged: Option<(OwnerInfo, Standing)>,
    /// Another kind of lock found at or beside the path, which explains
    /// why the wait could never end (PROTOCOL 2.9).
    pub(super) mismatch: Option<super::KindMismatch>,
}

impl std::fmt::Display for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "The file lock '{}' could not be acquired.",
            self.path.display()
        )?;
        match &self.holder {
            Holder::Recordless => f.write_str(
                " It is held by an owner that recorded no PID (a filelock release before 3.22, or one still writing its record), which this host cannot probe.",
            ),
            Holder::Foreign { pid, host } => {
                write!(f, " It is held by pid {pid} on {host}, which this host cannot probe.")
            }
            Holder::Unknown | Holder::Local { .. } => Ok(()),
        }
    }
}

impl Explain for Busy {
    /// One sentence: the path, the holder when known, and, for a stale
    /// marker left in place, the likely cause and the remedy; then, where
    /// another kind of lock uses the path, a sentence that names it.
    fn explain(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.holder_sentence(f)?;
        match &self.mismatch {
            Some(m) => write!(f, " Another kind of lock uses this path: {m}."),
            None => Ok(()),
        }
    }
}

impl Busy {
    /// The first sentence of [`Explain::explain`].
    fn holder_sentence(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = self.path.display();
        write!(f, "The file lock '{path}' could not be acquired: ")?;
        let advice = |remedy| Advice::new(remedy, &self.path);
        match (&self.holder, self.holder.remedy()) {
            (Holder::Recordless, Some(remedy)) => {
                return write!(
                    f,
                    "it is held by an owner that recorded no PID (a filelock release before \
                     3.22, or one still writing its record), which this host cannot probe; {}.",
                    advice(remedy)
                )
            }
            (Holder::Foreign { pid, host }, Some(remedy)) => {
                return write!(
                    f,
                    "it is held by pid {pid} on {host}, which this host cannot probe; {}.",
                    advice(remedy)
                )
            }
            _ => {}
        }
        let Some((owner, standing)) = &self.judged else {
            return f.write_str("it is held by another process.");
        };
        let who = owner.name();
        let advice = advice(standing.remedy());
        match standing {
            Standing::Held(HeldBecause::Alive) => write!(f, "it is held by {who}, which is alive."),
            Standing::Held(HeldBecause::OtherHost) => {
                write!(
                    f,
                    "it is held by {who}, which this host cannot probe; {advice}."
                )
            }
            Standing::Held(_) => write!(
                f,
                "it is held by {who}, which cannot be proven gone (its probe failed); {advice}."
            ),
            Standing::Stale { recycled } => write!(
                f,
                "its holder, {who}, looks gone{}, but {advice}.",
                if *recycled {
                    " (its PID now runs another process)"
                } else {
                    ""
                },
            ),
            Standing::Malformed => write!(
                f,
                "its marker holds no record this lock reads ({}); {advice}.",
                owner.mode
            ),
            _ => write!(f, "it is held by {who}; {advice}."),
        }
    }
}

/// A [`Remedy`] in words, for the marker of a lock at a path: the clause a
/// busy lock's error and `swaplock break` end with, which names what to
/// run.
///
/// ```
/// use swaplock::core::soft::{Remedy, Standing};
/// use swaplock::soft::Advice;
/// use swaplock::SoftLock;
/// # fn main() -> std::io::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("jobs.lock");
/// std::fs::write(&path, "")?; // an empty marker: contenders never remove it
/// let lock = SoftLock::soft(&path);
/// let (owner, standing) = lock.status()?.expect("a marker");
/// assert_eq!(standing.remedy(), Remedy::ForceIfUnheld);
/// let advice = Advice::new(standing.remedy(), &path).to_string();
/// assert!(advice.ends_with(&format!("run `swaplock break --force {}`", path.display())));
/// # Ok(())
/// # }
/// ```
///
/// [`Remedy`]: swaplock_core::soft::Remedy
pub struct Advice<'a> {
    remedy: Remedy,
    path: &'a Path,
}

impl<'a> Advice<'a> {
    /// The advice of `remedy` for the marker of the lock at `path`.
    pub fn new(remedy: Remedy, path: &'a Path) -> Self {
        Advice { remedy, path }
    }
}

impl std::fmt::Display for Advice<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = self.path.display();
        let force = format!("`swaplock break --force {path}`");
        match self.remedy {
            Remedy::Wait => write!(
                f,
                "wait for its release: {force} breaks it anyway, and mutual exclusion with it is \
                 lost"
            ),
            Remedy::Grace => write!(
                f,
                "a contender removes it once seen unchanged for 2 s, or run {force}"
            ),
            Remedy::ForceStale => write!(
                f,
                "the filesystem cannot exchange names, so the stale marker is never moved; if its \
                 holder is gone, run {force}"
            ),
            Remedy::ForceOnceGone => write!(f, "once it is known gone, run {force}"),
            _ => write!(
                f,
                "its marker is never removed automatically; if nothing holds it, run {force}"
            ),
        }
    }
}

impl std::error::Error for Busy {}
