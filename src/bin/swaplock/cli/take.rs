//! Taking the lock `run` holds: one interface over the lock kinds, and
//! the wait that says what it waits for.

use super::*;

pub(super) fn soft_lock(opts: &Options, kind: Kind) -> SoftLock {
    let mut lock = SoftLock::new(kind, PathBuf::from(&opts.rest[0]));
    if let Some(l) = opts.lifetime {
        lock = lock.lifetime(l);
    }
    if let Some(l) = opts.lease {
        lock = lock.lease_duration(l);
    }
    if opts.no_sync {
        lock = lock.durable(false);
    }
    lock
}

/// Exit status for a busy lock: 255 with a message, or 0 when quiet.
pub(super) fn busy(opts: &Options, e: &std::io::Error) -> i32 {
    if opts.busy == Busy::Quiet {
        return 0;
    }
    eprintln!("swaplock: {e}");
    opts.conflict
}

/// The ways `take` acquires a lock.
pub(super) trait Acquire {
    type Guard;
    fn lock(&self) -> std::io::Result<Self::Guard>;
    fn try_lock(&self) -> std::io::Result<Self::Guard>;
    fn lock_timeout(&self, timeout: Duration) -> std::io::Result<Self::Guard>;
    /// Waits (up to `timeout`), calling `hook` with the time waited
    /// while the lock is held.
    fn lock_with(
        &self,
        timeout: Option<Duration>,
        hook: &mut dyn FnMut(Duration) -> std::ops::ControlFlow<()>,
    ) -> std::io::Result<Self::Guard>;
    /// Whether a wait may be for a path another kind of lock uses, which
    /// the wait then names ([`SoftLock::mismatch`]).
    fn may_meet_other_kinds(&self) -> bool {
        false
    }
}

impl Acquire for FileLock {
    type Guard = swaplock::FileLockGuard;
    fn lock(&self) -> std::io::Result<Self::Guard> {
        FileLock::lock(self)
    }
    fn try_lock(&self) -> std::io::Result<Self::Guard> {
        FileLock::try_lock(self)
    }
    fn lock_timeout(&self, timeout: Duration) -> std::io::Result<Self::Guard> {
        FileLock::lock_timeout(self, timeout)
    }
    fn lock_with(
        &self,
        timeout: Option<Duration>,
        hook: &mut dyn FnMut(Duration) -> std::ops::ControlFlow<()>,
    ) -> std::io::Result<Self::Guard> {
        FileLock::lock_with(self, timeout, |wait| hook(wait.waited()))
    }
}

/// A kernel lock's shared form.
pub(super) struct Shared<'a>(pub(super) &'a FileLock);

impl Acquire for Shared<'_> {
    type Guard = swaplock::FileLockGuard;
    fn lock(&self) -> std::io::Result<Self::Guard> {
        self.0.lock_shared()
    }
    fn try_lock(&self) -> std::io::Result<Self::Guard> {
        self.0.try_lock_shared()
    }
    fn lock_timeout(&self, timeout: Duration) -> std::io::Result<Self::Guard> {
        self.0.lock_shared_timeout(timeout)
    }
    /// The hook is called once, when the wait begins.
    fn lock_with(
        &self,
        timeout: Option<Duration>,
        hook: &mut dyn FnMut(Duration) -> std::ops::ControlFlow<()>,
    ) -> std::io::Result<Self::Guard> {
        match self.try_lock() {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                let _ = hook(Duration::ZERO);
            }
            done => return done,
        }
        match timeout {
            Some(t) => self.lock_timeout(t),
            None => self.lock(),
        }
    }
}

impl Acquire for SoftLock {
    type Guard = swaplock::soft::SoftLockGuard;
    fn lock(&self) -> std::io::Result<Self::Guard> {
        SoftLock::lock(self)
    }
    fn try_lock(&self) -> std::io::Result<Self::Guard> {
        SoftLock::try_lock(self)
    }
    fn lock_timeout(&self, timeout: Duration) -> std::io::Result<Self::Guard> {
        SoftLock::lock_timeout(self, timeout)
    }
    fn lock_with(
        &self,
        timeout: Option<Duration>,
        hook: &mut dyn FnMut(Duration) -> std::ops::ControlFlow<()>,
    ) -> std::io::Result<Self::Guard> {
        SoftLock::lock_with(self, timeout, |wait| hook(wait.waited()))
    }
    fn may_meet_other_kinds(&self) -> bool {
        true
    }
}

#[cfg(unix)]
impl Acquire for swaplock::StrictLock {
    type Guard = swaplock::StrictLockGuard;
    fn lock(&self) -> std::io::Result<Self::Guard> {
        swaplock::StrictLock::lock(self)
    }
    fn try_lock(&self) -> std::io::Result<Self::Guard> {
        swaplock::StrictLock::try_lock(self)
    }
    fn lock_timeout(&self, timeout: Duration) -> std::io::Result<Self::Guard> {
        swaplock::StrictLock::lock_timeout(self, timeout)
    }
    fn lock_with(
        &self,
        timeout: Option<Duration>,
        hook: &mut dyn FnMut(Duration) -> std::ops::ControlFlow<()>,
    ) -> std::io::Result<Self::Guard> {
        swaplock::StrictLock::lock_with(self, timeout, |wait| hook(wait.waited()))
    }
}

/// Takes a lock as the options say (wait, fail, quiet, timeout); on
/// failure, the exit status (after printing why). `--fail` never waits,
/// a timeout given or not, as flock(1)'s `-n`.
pub(super) fn take<A: Acquire>(opts: &Options, lock: &A) -> Result<A::Guard, i32> {
    let result = match (opts.busy, opts.timeout) {
        (Busy::Fail, _) => lock.try_lock(),
        (Busy::Wait, timeout) if opts.verbose => {
            let began = std::time::Instant::now();
            let mut aloud = Aloud::new(opts);
            let mut kinds = OtherKinds::default();
            let taken = lock.lock_with(timeout, &mut |waited| {
                kinds.look(opts, waited);
                aloud.say(waited)
            });
            if aloud.said && taken.is_ok() {
                eprintln!(
                    "swaplock: took {} after {:.1} s",
                    opts.rest[0].to_string_lossy(),
                    began.elapsed().as_secs_f64()
                );
            }
            taken
        }
        (Busy::Wait, timeout) if lock.may_meet_other_kinds() => {
            let mut kinds = OtherKinds::default();
            lock.lock_with(timeout, &mut |waited| {
                kinds.look(opts, waited);
                std::ops::ControlFlow::Continue(())
            })
        }
        (_, Some(t)) => lock.lock_timeout(t),
        (Busy::Wait, None) => lock.lock(),
        (Busy::Quiet, None) => lock.try_lock(),
    };
    result.map_err(|e| {
        if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
            busy(opts, &e)
        } else {
            eprintln!("swaplock: {e}");
            255
        }
    })
}

/// Says once on stderr, [`MISMATCH_AFTER`] into a wait, that another kind
/// of lock uses the path waited for, if one does: the wait may then never
/// end, or not exclude the other kind's holders.
#[derive(Default)]
pub(super) struct OtherKinds {
    looked: bool,
}

impl OtherKinds {
    pub(super) fn look(&mut self, opts: &Options, waited: Duration) {
        if self.looked || waited < MISMATCH_AFTER {
            return;
        }
        self.looked = true;
        if let Some(m) = find_mismatch(opts) {
            eprintln!(
                "swaplock: waiting for {}: another kind of lock uses this path: {m}",
                opts.rest[0].to_string_lossy()
            );
        }
    }
}

/// `--verbose`: says on stderr who holds the lock and for how long,
/// when the wait begins, when the holder changes, and every 10 s.
pub(super) struct Aloud<'a> {
    pub(super) opts: &'a Options,
    /// Who was last said to hold it (`None`: nobody could be named).
    pub(super) last: Option<(Option<i64>, Option<String>)>,
    /// When it was last said.
    pub(super) when: Option<std::time::Instant>,
    /// Whether anything was said.
    pub(super) said: bool,
}

impl<'a> Aloud<'a> {
    const EVERY: Duration = Duration::from_secs(10);

    pub(super) fn new(opts: &'a Options) -> Self {
        Aloud {
            opts,
            last: None,
            when: None,
            said: false,
        }
    }

    pub(super) fn say(&mut self, waited: Duration) -> std::ops::ControlFlow<()> {
        let found = find_holder(self.opts).ok().flatten();
        let who = found.as_ref().map(|f| (f.pid, f.host.clone()));
        let due = self.when.is_none_or(|w| w.elapsed() >= Self::EVERY);
        if !self.said || self.last != who || due {
            let holder = match &found {
                Some(f) => {
                    let mut h = match (f.pid, &f.host) {
                        (Some(pid), Some(host)) => format!("held by pid {pid} on {host}"),
                        (Some(pid), None) => format!("held by pid {pid}"),
                        _ => format!("held ({} marker)", f.mode),
                    };
                    if let Some(age) = f.age {
                        h.push_str(&format!(" for {:.1} s", age.as_secs_f64()));
                    }
                    h
                }
                None => "held".to_owned(),
            };
            eprintln!(
                "swaplock: waiting for {}: {holder} (waited {:.1} s)",
                self.opts.rest[0].to_string_lossy(),
                waited.as_secs_f64()
            );
            self.last = who;
            self.when = Some(std::time::Instant::now());
            self.said = true;
        }
        std::ops::ControlFlow::Continue(())
    }
}
