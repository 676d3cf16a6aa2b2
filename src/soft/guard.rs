//! A held soft lock: its guard, its release, the hand-over to a waiting
//! thread, and the heartbeat that refreshes a lease.

use super::*;

/// A held soft lock. Dropping it releases the lock; [`release`](Self::release)
/// reports errors. Guards of a [reentrant](SoftLock::reentrant) lock may
/// share one hold: the last of them releases it.
pub struct SoftLockGuard {
    /// Taken only by [`release`](Self::release).
    pub(super) hold: Option<HoldRef>,
}

/// A guard's hold: its own (no allocation), or shared with other guards of
/// a reentrant lock.
// Inline, not boxed: an uncontended lock and release allocate nothing
// (tests/alloc_budget.rs).
#[allow(clippy::large_enum_variant)]
pub(super) enum HoldRef {
    Own(Hold),
    Shared(Arc<Hold>),
}

/// One hold of the lock: its marker, heartbeat and registration, released
/// when it drops.
pub(super) struct Hold {
    pub(super) lock: SoftLock,
    pub(super) dir: Dir,
    pub(super) me: Identity,
    /// The process that took it: a forked child's copy is the parent's
    /// ([`crate::pid::Me`], not the record's PID, which a child given the
    /// PID of an exited ancestor would share).
    pub(super) process: crate::pid::Me,
    pub(super) held: Option<Held<File>>,
    pub(super) lease: Option<LeaseTerms>,
    pub(super) heartbeat: Option<Heartbeat>,
    pub(super) registered: Option<Registered<Arc<Path>>>,
}

pub(super) struct Heartbeat {
    pub(super) beat: Beat,
    pub(super) compromise: Arc<Mutex<Option<Compromise>>>,
}

impl std::fmt::Debug for SoftLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SoftLockGuard")
            .field("path", &self.hold().lock.path)
            .finish_non_exhaustive()
    }
}

impl SoftLockGuard {
    pub(super) fn hold(&self) -> &Hold {
        match self.hold.as_ref().expect("taken only by release") {
            HoldRef::Own(hold) => hold,
            HoldRef::Shared(hold) => hold,
        }
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.hold().lock.path
    }

    /// The lease's claim token (32 hex digits), for a lease.
    ///
    /// ```
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("nightly.lock");
    /// let guard = SoftLock::lease(&path).lock()?;
    /// let token = guard.token().expect("a lease has a token");
    /// assert_eq!(token.len(), 32);
    /// assert!(std::fs::read_to_string(&path)?.contains(&format!("\ntoken={token}\n")));
    /// # Ok(())
    /// # }
    /// ```
    pub fn token(&self) -> Option<String> {
        self.hold().token()
    }

    /// Whether the heartbeat found the lease compromised, and why.
    ///
    /// ```no_run
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let guard = SoftLock::lease("/mnt/nfs/jobs/nightly.lock").lock()?;
    /// for batch in 0..16 {
    ///     if let Some(why) = guard.compromise() {
    ///         eprintln!("lease lost ({why:?}): stopping before batch {batch}");
    ///         break;
    ///     }
    ///     println!("batch {batch}");
    /// }
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn compromise(&self) -> Option<Compromise> {
        self.hold().compromise()
    }

    /// Whether the lease is lost now, looking again rather than waiting for
    /// the heartbeat: what the heartbeat found, or the lock path no longer
    /// showing our marker at two looks a moment apart (one miss may be a
    /// peer's check holding it aside for an instant, I19). For a holder
    /// about to release, which must know whether its work ran under the
    /// lock: a holder stopped longer than its lease learns it here even
    /// when the heartbeat, stopped with it, has not yet run again. `None`
    /// for a lock that is not a lease, or when nothing can be told.
    ///
    /// ```no_run
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let guard = SoftLock::lease("/mnt/nfs/jobs/nightly.lock").lock()?;
    /// // ... work ...
    /// if let Some(why) = guard.lease_lost() {
    ///     eprintln!("the work may have overlapped another holder: {why:?}");
    /// }
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lease_lost(&self) -> Option<Compromise> {
        self.hold().lease_lost()
    }

    /// Releases the lock, reporting a failure to remove the marker. A
    /// guard that shares its hold with others (a
    /// [reentrant](SoftLock::reentrant) lock's) only leaves it, and the
    /// last of them releases it.
    ///
    /// In a child forked while the lock was held, the lock is its
    /// parent's: the marker is left alone (as on drop there), the
    /// descriptor closed, and the answer is an error of kind
    /// [`InvalidInput`](io::ErrorKind::InvalidInput).
    ///
    /// ```
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("jobs.lock");
    /// let guard = SoftLock::marker(&path).lock()?;
    /// // ... exclusive work ...
    /// guard.release()?; // a marker that could not be removed is an error here
    /// assert!(!path.exists());
    /// # Ok(())
    /// # }
    /// ```
    pub fn release(mut self) -> io::Result<()> {
        let owner = self.hold().me.pid;
        if self.hold().process != crate::pid::id() {
            // A forked child: whether or not other guards share the hold,
            // it is the parent's (dropping it here leaves the marker).
            let path = Arc::clone(&self.hold().lock.path);
            drop(self.hold.take());
            return Err(forked_error(&path, owner));
        }
        let hold = match self.hold.take() {
            Some(HoldRef::Own(hold)) => Some(hold),
            Some(HoldRef::Shared(hold)) => Arc::into_inner(hold),
            None => None,
        };
        match hold {
            Some(mut hold) => hold.release_inner(),
            None => Ok(()),
        }
    }
}

impl Hold {
    pub(super) fn new(
        lock: &SoftLock,
        dir: Dir,
        me: Identity,
        held: Held<File>,
        lease: Option<(LeaseTerms, Duration)>,
        registered: Option<Registered<Arc<Path>>>,
    ) -> io::Result<Self> {
        let heartbeat =
            lease.map(|(terms, interval)| start_heartbeat(lock, &dir, &me, &held, terms, interval));
        let (heartbeat, failed) = match heartbeat {
            Some(Ok(h)) => (Some(h), None),
            Some(Err(e)) => (None, Some(e)),
            None => (None, None),
        };
        let mut hold = Hold {
            lock: lock.clone(),
            dir,
            me,
            process: crate::pid::id(),
            held: Some(held),
            lease: lease.map(|l| l.0),
            heartbeat,
            registered,
        };
        let Some(failed) = failed else {
            return Ok(hold);
        };
        // A lease that no heartbeat refreshes is taken over by a peer once
        // its duration passes, its holder never told: it is not kept.
        let kind = failed.kind();
        let released = hold.release_inner().err();
        let source = io::Error::new(
            kind,
            match released {
                None => format!(
                    "the lease's heartbeat could not start ({failed}), so the lease was \
                     released at once; free descriptors or threads and try again"
                ),
                Some(r) => format!(
                    "the lease's heartbeat could not start ({failed}), and the lease's \
                     release failed too ({r})"
                ),
            },
        );
        Err(LockError::io(&lock.path, Step::Lock, kind, source))
    }

    pub(super) fn token(&self) -> Option<String> {
        self.lease
            .map(|t| String::from_utf8_lossy(&t.token.hex()).into_owned())
    }

    pub(super) fn compromise(&self) -> Option<Compromise> {
        self.heartbeat
            .as_ref()
            .and_then(|h| *crate::sync::lock(&h.compromise))
    }

    pub(super) fn lease_lost(&self) -> Option<Compromise> {
        if let Some(c) = self.compromise() {
            return Some(c);
        }
        let (terms, held) = (self.lease?, self.held.as_ref()?);
        let cfg = self.me.config(&self.lock, Some(terms));
        protocol::lost(&mut SoftOs::on(&self.dir), &cfg, held)
    }

    pub(super) fn release_inner(&mut self) -> io::Result<()> {
        if self.held.is_some() && self.process != crate::pid::id() {
            // A child forked while the lock was held: the marker names the
            // parent, which holds the lock still. Its heartbeat thread is
            // not in this process (joining it would never return).
            std::mem::forget(self.heartbeat.take());
            drop(self.held.take());
            drop(self.registered.take());
            return Err(self.lock.forked(self.me.pid));
        }
        if self.hand_over() {
            return Ok(());
        }
        if let Some(h) = self.heartbeat.take() {
            h.beat.stop();
        }
        let Some(held) = self.held.take() else {
            return Ok(());
        };
        debug!(
            "Attempting to release lock {} on {}",
            self.lock.log_id(),
            self.lock.path.display()
        );
        let cfg = self.me.config(&self.lock, self.lease);
        let mut sys = SoftOs::on(&self.dir);
        let released = protocol::release(&mut sys, &cfg, held).map_err(|e| match e {
            protocol::Error::Os { errno, .. } => self.lock.err(Step::Unlock, errno),
            other => self.lock.protocol_error(other),
        });
        if released.is_ok() {
            debug!(
                "Lock {} released on {}",
                self.lock.log_id(),
                self.lock.path.display()
            );
        }
        // Released (or failing to): no longer this thread's to wait for,
        // and this process's waiters look again now (RELEASES).
        drop(self.registered.take());
        notify_release();
        released
    }
}

#[cfg(unix)]
impl std::os::fd::AsFd for SoftLockGuard {
    /// The marker's descriptor.
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        let hold = self.hold();
        match &hold.held {
            Some(held) => std::os::fd::AsFd::as_fd(&held.file),
            // Only release takes `held`, and it consumes the guard.
            None => std::os::fd::AsFd::as_fd(&hold.dir),
        }
    }
}

impl Hold {
    /// Hands this hold to a thread of this process waiting for the same
    /// lock, of the same kind, in the same directory, if there is one: the
    /// marker stays at the lock path, only touched (so that its age counts
    /// from now, as a new marker's would), and that thread holds it from
    /// now on. Not a lease (its token and heartbeat are its holder's), and
    /// only while the lock path still shows our marker.
    pub(super) fn hand_over(&mut self) -> bool {
        if self.lease.is_some() || self.held.is_none() {
            return false;
        }
        let Some(key) = self.registered.as_ref().map(|r| Arc::clone(r.key())) else {
            return false;
        };
        let kind = self.lock.kind;
        let pid = crate::pid::id();
        let wanted = |w: &Waiter| *w.key == *key && w.kind == kind && w.pid == pid;
        if !waiters().iter().any(wanted) {
            return false;
        }
        let (Some(dir), Some(held)) = (sys::dir_key(&self.dir), self.held.as_ref()) else {
            return false;
        };
        let cfg = self.me.config(&self.lock, None);
        if !protocol::keep_for_handover(&mut SoftOs::on(&self.dir), &cfg, held) {
            return false;
        }
        let waiting = waiters();
        let Some(slot) = waiting
            .iter()
            .filter(|w| wanted(w) && w.dir == dir)
            .find_map(|w| {
                let slot = crate::sync::lock(&w.slot);
                slot.is_none().then_some(slot)
            })
        else {
            return false;
        };
        let mut slot = slot;
        *slot = self.held.take();
        drop(slot);
        drop(waiting);
        drop(self.registered.take());
        notify_release();
        true
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let _ = self.release_inner();
    }
}

/// The threads of lease heartbeats, kept a while for the process's next
/// lease ([`crate::beat`]).
static HEARTBEATS: Beats = Beats::new(|| format!("filelock-lease-{}", crate::pid::number()));

/// Starts the lease heartbeat on its own descriptors, so it outlives no
/// borrow of the guard.
pub(super) fn start_heartbeat(
    lock: &SoftLock,
    dir: &Dir,
    me: &Identity,
    held: &Held<File>,
    terms: LeaseTerms,
    interval: Duration,
) -> io::Result<Heartbeat> {
    let dir = sys::dup_dir(dir)?;
    let file = sys::dup_file(&held.file)?;
    let id: FileId = held.id;
    let compromise = Arc::new(Mutex::new(None));
    let report = Arc::clone(&compromise);
    let hook = lock.on_compromise.clone();
    let held = Held { file, id };
    let mut watch = CompromiseWatch::new(SoftOs::on(&dir).now(), lock.lease, interval);
    let (lock, me) = (lock.clone(), me.clone());
    let beat = Beat::start(
        &HEARTBEATS,
        interval,
        Box::new(move || {
            let cfg = me.config(&lock, Some(terms));
            let mut sys = SoftOs::on(&dir);
            let result = protocol::refresh(&mut sys, &cfg, &held);
            match watch.observe(result, sys.now()) {
                None => Tick::Again,
                Some(c) => Tick::lost(&report, hook.as_ref(), c),
            }
        }),
    )?;
    Ok(Heartbeat { beat, compromise })
}
