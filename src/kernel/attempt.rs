//! What an attempt comes to, and the acquire driver that attempts, waits,
//! settles and falls back to a soft lock.

use super::*;

/// What an acquire came to, a lock taken already in its guard's file.
#[derive(Debug)]
pub(crate) enum Reached {
    /// The lock is held on this file.
    Held(LockFile, FileId),
    /// The lock stayed busy (the attempt's answer).
    Busy(Errno),
    /// `flock` answered `ENOSYS`; the file is open, and whether the
    /// attempt created it.
    #[cfg(unix)]
    Unsupported(std::os::fd::OwnedFd, bool),
    /// A step failed.
    Failed(protocol::Step, Errno),
}

/// What [`FileLock::settle`] came to.
pub(super) enum Settled {
    Done(io::Result<FileLockGuard>),
    /// `flock` answered `ENOSYS`: the lock is a soft lock from now on.
    #[cfg(unix)]
    FellBack,
}

impl FileLock {
    pub(super) fn err(&self, step: Step, errno: Errno) -> io::Error {
        LockError::errno(&self.path, step, errno)
    }

    /// The lock object's identity in log messages (filelock's `id(self)`):
    /// the same for its clones and its guards.
    #[cfg(feature = "log")]
    pub(super) fn log_id(&self) -> usize {
        Arc::as_ptr(&self.path).cast::<u8>() as usize
    }

    /// The error of a wait that could never end: this thread holds the
    /// file already, through another guard.
    pub(super) fn deadlock(&self) -> io::Error {
        deadlock_error(&self.path)
    }

    pub(super) fn acquire(&self, wait: Wait, shared: bool) -> io::Result<FileLockGuard> {
        self.acquire_logged(wait, shared, true)
    }

    /// [`acquire`](Self::acquire), logging its attempt and outcome (as
    /// filelock does) only if `logged`: [`lock_with`](Self::lock_with)'s
    /// steps log as one wait.
    pub(super) fn acquire_logged(
        &self,
        wait: Wait,
        shared: bool,
        logged: bool,
    ) -> io::Result<FileLockGuard> {
        #[cfg(unix)]
        if self.soft.load(Ordering::Relaxed) {
            if shared {
                return Err(self.err(Step::Lock, Errno::NOSYS));
            }
            return self.acquire_soft(wait);
        }
        self.check_filesystem()?;
        let scope = self.scope(shared);
        if logged {
            debug!(
                "Attempting to acquire lock {} on {}",
                self.log_id(),
                self.path.display()
            );
        }
        if matches!(wait, Wait::Forever) && scope.excludes_own_process() {
            // This thread waiting for a file it holds would wait forever.
            if held_here(self.kind, shared, || {
                path_id(&self.sys_path, self.follow_symlinks)
            }) {
                return Err(self.deadlock());
            }
        }
        #[cfg(unix)]
        let reached = {
            let job = self.job(shared);
            match wait {
                // A timed wait waits in the kernel, on a thread of its own.
                Wait::Until(deadline) => wait::until(&job, deadline),
                Wait::No => job.acquire(Wait::No, false, true),
                // A wait in the kernel that answers busy anyway (smbfs)
                // waits on.
                Wait::Forever => wait::forever(&job),
            }
        };
        #[cfg(windows)]
        let reached = {
            let may_fall_back = false;
            let mut kernel = kernel_os(
                &self.sys_path,
                self.follow_symlinks,
                self.mode,
                scope,
                self.names(),
            );
            // The core decides when to try again: never without a wait;
            // after a pause when a wait in the kernel answers busy all the
            // same; until the deadline with one.
            let mut backoff = Backoff::of(wait.left(time_left));
            let outcome =
                protocol::acquire(&mut kernel, wait.blocks(), may_fall_back, &mut backoff);
            match outcome {
                Ok(Outcome::Held(fd, id)) => Reached::Held(fd, id),
                Ok(Outcome::Busy(e)) => Reached::Busy(e),
                // The Windows adapter never answers ENOSYS.
                Ok(Outcome::Unsupported { .. }) => {
                    Reached::Failed(protocol::Step::Lock, Errno::NOSYS)
                }
                Err((step, e)) => Reached::Failed(step, e),
            }
        };
        #[cfg(feature = "log")]
        match (&reached, wait) {
            _ if !logged => {}
            (Reached::Held(..), _) => {
                debug!("Lock {} acquired on {}", self.log_id(), self.path.display())
            }
            (Reached::Busy(_), Wait::No) => debug!(
                "Failed to immediately acquire lock {} on {}",
                self.log_id(),
                self.path.display()
            ),
            (Reached::Busy(_), _) => debug!(
                "Timeout on acquiring lock {} on {}",
                self.log_id(),
                self.path.display()
            ),
            _ => {}
        }
        match self.settle(reached, shared, wait.timed()) {
            Settled::Done(result) => result,
            // flock is not available here: this lock is a soft lock now.
            #[cfg(unix)]
            Settled::FellBack => self.acquire_soft(wait),
        }
    }

    /// The guard, or the error, an acquire came to (`timed`: a deadline
    /// passed if the lock stayed busy); or the switch to a soft lock, made.
    /// The guard counts as this thread's ([`held_here`]).
    pub(super) fn settle(&self, reached: Reached, shared: bool, timed: bool) -> Settled {
        let scope = self.scope(shared);
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let refused = match &reached {
            Reached::Held(fd, id) => {
                use std::os::fd::AsFd;
                self.judge_file(fd.as_fd(), id.dev).err()
            }
            _ => None,
        };
        let guard = Settled::Done(match reached {
            Reached::Held(fd, id) => Ok(FileLockGuard(Inner::Kernel {
                fd,
                pid: crate::pid::id(),
                registered: scope
                    .excludes_own_process()
                    .then(|| self::register(id, self.kind, shared)),
                scope,
                path: Arc::clone(&self.path),
                sys_path: Arc::clone(&self.sys_path),
                follow_symlinks: self.follow_symlinks,
                mode: self.mode,
                names: self.names(),
            })),
            // A deadline passed while the lock stayed held.
            Reached::Busy(_) if timed => {
                let source = io::Error::from(io::ErrorKind::TimedOut);
                Err(LockError::io(
                    &self.path,
                    Step::Lock,
                    io::ErrorKind::TimedOut,
                    source,
                ))
            }
            // One attempt only, and the lock is held.
            Reached::Busy(busy) => {
                let source = crate::error::os_error(busy);
                Err(LockError::io(
                    &self.path,
                    Step::Lock,
                    io::ErrorKind::WouldBlock,
                    source,
                ))
            }
            #[cfg(unix)]
            Reached::Unsupported(file, created) if shared => {
                // The empty file this attempt may have created must not
                // stay: a later exclusive lock's soft fallback would take
                // it for a holder that recorded no PID, for good.
                if let Some(soft) = self.fallback {
                    (soft.fall_back)(&self.path, file, created);
                }
                Err(self.err(Step::Lock, Errno::NOSYS))
            }
            #[cfg(unix)]
            Reached::Unsupported(file, created) => {
                // flock is not available here: the core removes the file
                // this attempt created (never a peer's soft marker), and
                // this lock is a SoftFileLock from now on. A placeholder
                // that could not be removed does not stop the switch.
                if let Some(soft) = self.fallback {
                    (soft.fall_back)(&self.path, file, created);
                }
                self.soft.store(true, Ordering::Relaxed);
                return Settled::FellBack;
            }
            Reached::Failed(protocol::Step::Named, _) => {
                let source = io::Error::other(format!(
                    "the path kept opening a file that its name check found the path does \
                         not name, {} times in a row; on NFSv4 the directory's listing has the \
                         last word, so a name the export lists in another case or Unicode form \
                         never matches: spell the path as the directory lists it",
                    protocol::UNNAMED_AT_MOST + 1
                ));
                Err(LockError::io(
                    &self.path,
                    Step::Stat,
                    io::ErrorKind::Other,
                    source,
                ))
            }
            Reached::Failed(step, e) => {
                let step = match step {
                    protocol::Step::Open => Step::Open,
                    protocol::Step::Lock => Step::Lock,
                    protocol::Step::Fstat => Step::Fstat,
                    protocol::Step::Stat | protocol::Step::Named => Step::Stat,
                };
                Err(self.err(step, e))
            }
        });
        // A lock taken on a filesystem that keeps it for this client alone
        // is let go at once (the guard's release), and refused.
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(e) = refused {
            drop(guard);
            return Settled::Done(Err(e));
        }
        guard
    }

    /// This lock's acquire, for [`wait`].
    #[cfg(unix)]
    pub(super) fn job(&self, shared: bool) -> wait::Job {
        wait::Job {
            path: Arc::clone(&self.path),
            sys_path: Arc::clone(&self.sys_path),
            follow: self.follow_symlinks,
            mode: self.mode,
            scope: self.scope(shared),
            // Every flock attempt learns whether it created the file, so
            // that one that meets ENOSYS removes only its own (a shared
            // one too, which then reports ENOSYS: a soft lock has no
            // shared form).
            fallback: self.fallback,
            names: self.names(),
        }
    }

    #[cfg(unix)]
    pub(super) fn acquire_soft(&self, wait: Wait) -> io::Result<FileLockGuard> {
        match self.fallback {
            Some(soft) => (soft.acquire)(&self.path, wait),
            // Only an flock lock falls back (a kernel attempt reaches
            // ENOSYS only where it may).
            None => Err(self.err(Step::Lock, Errno::NOSYS)),
        }
    }
}

/// The wait of a timeout from now: until its deadline, or forever where
/// that instant is past the clock's range.
pub(super) fn within(timeout: Duration) -> Wait {
    crate::sync::now()
        .checked_add(timeout)
        .map_or(Wait::Forever, Wait::Until)
}

/// The time left to `deadline`, none once it has passed.
pub(super) fn time_left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(crate::sync::now())
}

/// The error of a guard used in a child forked while it was held: the
/// lock is the parent's.
#[cfg(unix)]
pub(super) fn forked(path: &Arc<Path>, step: Step, owner: u32) -> io::Error {
    LockError::forked(path, step, owner, "the lock")
}
