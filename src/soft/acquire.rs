//! The acquire driver: the attempts of one acquire, its waits between
//! them, and the errors it reports.

use super::*;

impl SoftLock {
    pub(super) fn acquire(&self, wait: Wait) -> io::Result<SoftLockGuard> {
        self.acquire_with(wait, None)
    }

    /// One acquire: [`prepare`](Self::prepare), [`wait`](Self::wait) for
    /// the lock, [`settle`](Self::settle) what the wait came to.
    pub(super) fn acquire_with<'h>(
        &'h self,
        wait: Wait,
        hook: Option<&'h mut WaitHook<'h>>,
    ) -> io::Result<SoftLockGuard> {
        let prepared = match self.prepare(wait)? {
            Prepared::Reentered(hold) => {
                return Ok(SoftLockGuard {
                    hold: Some(HoldRef::Shared(hold)),
                })
            }
            Prepared::Attempt(prepared) => prepared,
        };
        let me = Identity::now();
        let (outcome, cancelled) = self.wait(&prepared, &me, wait, hook);
        self.settle(outcome, cancelled, wait, prepared, me)
    }

    /// What comes before the first attempt: the name and lease checked,
    /// the directory opened, a reentrant hold of this thread's shared, a
    /// wait that could never end refused.
    pub(super) fn prepare(&self, wait: Wait) -> io::Result<Prepared> {
        if self
            .path
            .file_name()
            .is_some_and(|n| n.len() > MAX_LOCK_NAME)
        {
            return Err(self.protocol_error(protocol::Error::NameTooLong));
        }
        if self.base.is_empty() {
            return Err(self.err(Step::Open, Errno::INVAL));
        }
        let lease = match self.kind {
            Kind::Lease => {
                let Some(interval) = protocol::heartbeat_interval(self.lease, self.heartbeat)
                else {
                    let source = io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "heartbeat must be within (0, lease)",
                    );
                    return Err(LockError::io(
                        &self.path,
                        Step::Lock,
                        io::ErrorKind::InvalidInput,
                        source,
                    ));
                };
                Some((
                    LeaseTerms {
                        duration: self.lease.as_secs_f64(),
                        token: os::random_token(),
                    },
                    interval,
                ))
            }
            _ => None,
        };
        let dir = self.open_dir()?;
        let key = self.key();
        if let Some(key) = key.as_ref().filter(|_| self.reentrant) {
            if let Some(hold) = reentered(key) {
                if hold.lock.kind != self.kind {
                    return Err(self.reentered_as(hold.lock.kind));
                }
                return Ok(Prepared::Reentered(hold));
            }
        }
        if wait.blocks() {
            if let Some(key) = key.as_ref().filter(|k| held_by_this_thread(k)) {
                return Err(self.deadlock(key));
            }
        }
        Ok(Prepared::Attempt(Attempting { lease, dir, key }))
    }

    /// The attempts, and the waits between them, until the lock is taken
    /// (or handed over by a releasing thread of this process), busy past
    /// the timeout, or the wait cancelled; whether it was cancelled.
    pub(super) fn wait<'h>(
        &'h self,
        prepared: &Attempting,
        me: &Identity,
        wait: Wait,
        hook: Option<&'h mut WaitHook<'h>>,
    ) -> (Result<Attempt<File>, protocol::Error>, bool) {
        let Attempting { lease, dir, key } = prepared;
        let cfg = me.config(self, lease.map(|l| l.0));
        let mut sys = SoftOs::on(dir);
        // The instance's memory of the marker it watches, copied: the
        // instance's mutex is not held while this acquire waits, so that
        // another thread's attempt on the same instance (its holder's
        // `try_lock`, say) never waits for this one.
        let mut contender = *crate::sync::lock(&self.contender);
        // A thread that waits may be handed the hold of a thread of this
        // process that releases (of its kind; never a lease's, whose token
        // and heartbeat are its holder's).
        let waiting = match &key {
            Some(key) if wait.waits() => Some(Waiting::new(Arc::clone(key), self.kind, dir)),
            _ => None,
        };
        let mut patience = WakeOnRelease::new(
            Deadline {
                wait,
                poll: self.poll_interval,
            },
            waiting,
            (dir, &self.dir_path, &self.base),
            queue::Queue::new(
                dir,
                &self.base,
                cfg.marker_mode(),
                key.clone(),
                wait.waits(),
            ),
        );
        patience.join_first = wait.waits() && key.as_deref().is_some_and(queue::contended);
        patience.hook = hook.map(|hook| (hook, self));
        #[cfg(feature = "log")]
        {
            patience.soft = Some(self);
        }
        let started = std::time::Instant::now();
        // Whatever panics in the wait (a logger called from it, say), the
        // wait leaves the waiters a release hands its hold to, and gives
        // back a hold handed over meanwhile, before the panic goes on.
        let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut outcome = protocol::acquire(&mut sys, &cfg, &mut contender, &mut patience);
            if let Err(e) = &outcome {
                if patience.watcher.watching() && wake::short_of_descriptors(e) {
                    // The watch's own descriptors may be what ran short:
                    // the wait goes on without them, polling, for the
                    // time left.
                    patience.watcher.give_up();
                    patience.deadline.wait = wait.left(|t| t.saturating_sub(started.elapsed()));
                    outcome = protocol::acquire(&mut sys, &cfg, &mut contender, &mut patience);
                }
            }
            outcome
        }));
        let outcome = match waited {
            Ok(outcome) => outcome,
            Err(panic) => {
                patience.cancelled = true;
                patience.panicked = Some(panic);
                Err(protocol::Error::Os {
                    op: protocol::Op::Create,
                    errno: Errno::INTR,
                })
            }
        };
        *crate::sync::lock(&self.contender) = contender;
        // The next waiter of this host watches from now on.
        if let Ok(Attempt::Acquired(held)) = &outcome {
            patience.queue.taken(held.id.ino);
        }
        patience.queue.leave();
        let handed = patience.waiting.as_mut().and_then(Waiting::leave);
        // A cancelled wait holds nothing, even a hold handed over since.
        let handed = match handed {
            Some(held) if patience.cancelled => {
                let _ = protocol::release(&mut sys, &cfg, held);
                notify_release();
                None
            }
            handed => handed,
        };
        if let Some(panic) = patience.panicked.take() {
            std::panic::resume_unwind(panic);
        }
        let outcome = match (outcome, handed) {
            (Ok(Attempt::Acquired(held)), Some(extra)) => {
                // Handed a hold while an attempt took the lock afresh (the
                // handed marker was broken meanwhile): that one goes.
                let _ = protocol::release(&mut sys, &cfg, extra);
                Ok(Attempt::Acquired(held))
            }
            (_, Some(held)) => Ok(Attempt::Acquired(held)),
            (outcome, None) => outcome,
        };
        (outcome, patience.cancelled)
    }

    /// What the wait came to: the guard of the lock taken, or the error
    /// that says why not.
    pub(super) fn settle(
        &self,
        outcome: Result<Attempt<File>, protocol::Error>,
        cancelled: bool,
        wait: Wait,
        prepared: Attempting,
        me: Identity,
    ) -> io::Result<SoftLockGuard> {
        let Attempting { lease, dir, key } = prepared;
        #[cfg(feature = "log")]
        match &outcome {
            Ok(Attempt::Acquired(_)) => {
                debug!("Lock {} acquired on {}", self.log_id(), self.path.display())
            }
            Ok(Attempt::Busy(_)) if cancelled => debug!(
                "Cancellation requested for lock {} on {}",
                self.log_id(),
                self.path.display()
            ),
            Ok(Attempt::Busy(_)) if wait.timed() => debug!(
                "Timeout on acquiring lock {} on {}",
                self.log_id(),
                self.path.display()
            ),
            Ok(Attempt::Busy(_)) => debug!(
                "Failed to immediately acquire lock {} on {}",
                self.log_id(),
                self.path.display()
            ),
            Err(_) => {}
        }
        match outcome {
            Ok(Attempt::Acquired(held)) => {
                let registered = key.clone().map(|key| Registered::new(&HELD, key));
                let hold = Hold::new(self, dir, me, held, lease, registered)?;
                let hold = match key.filter(|_| self.reentrant) {
                    Some(key) => {
                        let hold = Arc::new(hold);
                        enter_reentrant(key, &hold);
                        HoldRef::Shared(hold)
                    }
                    None => HoldRef::Own(hold),
                };
                Ok(SoftLockGuard { hold: Some(hold) })
            }
            Ok(Attempt::Busy(_)) if cancelled => {
                let kind = io::ErrorKind::Interrupted;
                let source = io::Error::new(kind, "the wait was cancelled by its hook");
                Err(LockError::io(&self.path, Step::Lock, kind, source))
            }
            Ok(Attempt::Busy(holder)) => {
                let kind = if wait.timed() {
                    io::ErrorKind::TimedOut
                } else {
                    io::ErrorKind::WouldBlock
                };
                // A holder this host can probe is judged once more, only to
                // say who it is and why its marker stays.
                let judged = match holder {
                    Holder::Unknown | Holder::Local { .. } => self.status().ok().flatten(),
                    _ => None,
                };
                let source = io::Error::new(
                    kind,
                    Explained(Box::new(Busy {
                        path: self.path.clone(),
                        holder,
                        judged,
                        mismatch: self.mismatch().ok().flatten(),
                    })),
                );
                Err(LockError::io(&self.path, Step::Lock, kind, source))
            }
            Err(e) => Err(self.protocol_error(e)),
        }
    }

    /// The lock's canonical path (its directory resolved, its own name
    /// kept); `None` if the directory cannot be resolved. Kept once found
    /// only for a directory given in canonical form already, which nothing
    /// can make name another one later; a relative or symlinked directory
    /// is resolved at every acquire (a `chdir`, or a link pointed
    /// elsewhere, changes what it names).
    pub(super) fn key(&self) -> Option<Arc<Path>> {
        if let Some(key) = self.key.get() {
            return key.clone();
        }
        let dir = std::fs::canonicalize(&self.dir_path).ok()?;
        let key: Arc<Path> = dir.join(self.path.file_name()?).into();
        if dir == *self.dir_path {
            let _ = self.key.set(Some(Arc::clone(&key)));
        }
        Some(key)
    }

    /// The error of a reentrant lock whose thread holds the path as
    /// another kind.
    pub(super) fn reentered_as(&self, held: Kind) -> io::Error {
        let kind = io::ErrorKind::InvalidInput;
        let source = io::Error::new(
            kind,
            format!(
                "this thread holds the lock already, as a {held:?} lock, which a {:?} lock \
                 cannot re-enter: use one kind for the path",
                self.kind
            ),
        );
        LockError::io(&self.path, Step::Lock, kind, source)
    }

    /// The error of a guard used in a child forked while it was held.
    pub(super) fn forked(&self, owner: Pid) -> io::Error {
        forked_error(&self.path, owner)
    }

    /// The error of a wait that could never end: this thread holds the
    /// path already, through another guard.
    pub(super) fn deadlock(&self, key: &Path) -> io::Error {
        let kind = io::ErrorKind::Deadlock;
        let source = io::Error::new(
            kind,
            format!(
                "Deadlock: lock '{}' is already held by a different guard in this thread, so \
                 waiting for it would never end: release that guard first, or wait with a timeout",
                key.display()
            ),
        );
        LockError::io(&self.path, Step::Lock, kind, source)
    }

    pub(super) fn protocol_error(&self, e: protocol::Error) -> io::Error {
        match e {
            protocol::Error::Os { errno, .. } => self.err(Step::Lock, errno),
            protocol::Error::IsDirectory => self.err(Step::Open, Errno::ISDIR),
            protocol::Error::NameTooLong => {
                let kind = io::ErrorKind::InvalidFilename;
                let source = io::Error::new(
                    kind,
                    format!(
                        "the lock file name is {} bytes; a soft lock accepts at most {}, since \
                         its break and restore names add up to {} bytes: choose a shorter name",
                        self.path.file_name().map_or(0, |n| n.len()),
                        MAX_LOCK_NAME,
                        NAME_MAX - MAX_LOCK_NAME,
                    ),
                );
                LockError::io(&self.path, Step::Open, kind, source)
            }
            protocol::Error::LeaseMismatch { published } => {
                let kind = io::ErrorKind::InvalidData;
                let source = io::Error::new(
                    kind,
                    format!(
                        "the holder's lease lasts {published} s and this lock's {} s; every \
                         contender must use the same duration: pass --lease {published} \
                         (`lease_duration` in the API)",
                        self.lease.as_secs_f64(),
                    ),
                );
                LockError::io(&self.path, Step::Lock, kind, source)
            }
            other => {
                let source = io::Error::new(io::ErrorKind::InvalidData, other.to_string());
                LockError::io(&self.path, Step::Lock, io::ErrorKind::InvalidData, source)
            }
        }
    }
}

/// What [`SoftLock::prepare`] came to.
pub(super) enum Prepared {
    /// A reentrant hold of this thread's, to share: the acquire is over.
    Reentered(Arc<Hold>),
    /// The lock to attempt.
    Attempt(Attempting),
}

/// What an acquire attempts: the lease's terms and heartbeat interval (a
/// lease's), the lock's directory, open, and its canonical path.
pub(super) struct Attempting {
    lease: Option<(LeaseTerms, Duration)>,
    dir: Dir,
    key: Option<Arc<Path>>,
}

/// This process's identity, computed afresh at each acquire as filelock does.
#[derive(Clone, Debug)]
pub(super) struct Identity {
    pub(super) pid: Pid,
    pub(super) host: HostName,
    pub(super) start: Option<StartToken>,
}

impl Identity {
    pub(super) fn now() -> Self {
        let pid = os::current_pid();
        Identity {
            pid,
            host: os::host_name(),
            start: os::start_token(pid.get()),
        }
    }

    pub(super) fn config<'a>(
        &'a self,
        lock: &'a SoftLock,
        lease: Option<LeaseTerms>,
    ) -> Config<'a> {
        Config {
            kind: lock.kind,
            lock: &lock.base,
            pid: self.pid,
            host: &self.host,
            start: self.start,
            mode: lock.mode,
            lease,
            lifetime: lock.lifetime,
            durable: lock.durable,
        }
    }
}
