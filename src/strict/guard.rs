//! A held strict lock: its guard and its release (PROTOCOL 18.7).

use super::attempt::Hold;
use super::*;
use swaplock_core::soft::Dir as _;

/// A held strict lock. Dropping it releases the lock;
/// [`release`](Self::release) reports errors.
pub struct StrictLockGuard {
    lock: StrictLock,
    /// Taken by the release.
    hold: Option<Hold>,
    /// The process that took it: a forked child leaves the claims alone.
    pid: crate::pid::Me,
    _registered: Registered<Arc<Path>>,
}

impl std::fmt::Debug for StrictLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StrictLockGuard")
            .field("path", &self.lock.path)
            .field("token", &self.token())
            .finish_non_exhaustive()
    }
}

impl StrictLockGuard {
    pub(super) fn new(lock: StrictLock, hold: Hold, registered: Registered<Arc<Path>>) -> Self {
        StrictLockGuard {
            lock,
            hold: Some(hold),
            pid: crate::pid::id(),
            _registered: registered,
        }
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.lock.path
    }

    /// The token of our claims (32 hex digits): they are
    /// `intent-v1-<token>.claim` and `held-v1-<token>.claim`.
    ///
    /// ```
    /// use swaplock::StrictLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("deploy.lock");
    /// let guard = StrictLock::new(&path).lock()?;
    /// let held = dir.path().join(format!("deploy.lock.filelock/claims/held-v1-{}.claim", guard.token()));
    /// assert!(held.exists());
    /// # Ok(())
    /// # }
    /// ```
    pub fn token(&self) -> String {
        self.hold
            .as_ref()
            .map(|h| String::from_utf8_lossy(&h.token.hex()).into_owned())
            .unwrap_or_default()
    }

    /// Releases the lock: our held claim, then our intent, are removed
    /// (one already gone, broken by an operator, is fine), and the
    /// sentinel is closed; it stays at the lock path, with the
    /// directories.
    ///
    /// In a child forked while the lock was held, the lock is its
    /// parent's: the claims are left alone, the descriptors closed, and
    /// the answer is an error of kind
    /// [`InvalidInput`](io::ErrorKind::InvalidInput).
    ///
    /// ```
    /// use swaplock::StrictLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let lock = StrictLock::new(dir.path().join("deploy.lock"));
    /// lock.lock()?.release()?;
    /// assert!(lock.claims()?.is_empty());
    /// assert!(lock.path().exists(), "the sentinel stays");
    /// # Ok(())
    /// # }
    /// ```
    pub fn release(mut self) -> io::Result<()> {
        self.let_go()
    }

    fn let_go(&mut self) -> io::Result<()> {
        let Some(hold) = self.hold.take() else {
            return Ok(());
        };
        if self.pid != crate::pid::id() {
            return Err(LockError::forked(
                &self.lock.path,
                Step::Unlock,
                self.pid.number(),
                "the lock, with its claims,",
            ));
        }
        let mut os = SoftOs::on(&hold.claims);
        let mut failed = None;
        for state in [ClaimState::Held, ClaimState::Intent] {
            let name = ClaimName {
                state,
                token: hold.token,
            };
            match os.unlink(name.encode().as_bytes()) {
                Ok(()) => {}
                Err(e) if e == Errno::NOENT => {}
                Err(e) => {
                    failed.get_or_insert((name, e));
                }
            }
        }
        drop(hold);
        match failed {
            None => Ok(()),
            Some((name, e)) => {
                let kind = crate::error::os_error(e).kind();
                let source = io::Error::new(
                    kind,
                    format!(
                        "cannot remove our claim {} ({e}): it keeps every contender out; once \
                         this process has exited, `swaplock break --kind strict` removes it",
                        name.encode()
                    ),
                );
                Err(LockError::io(&self.lock.path, Step::Unlock, kind, source))
            }
        }
    }
}

impl Drop for StrictLockGuard {
    fn drop(&mut self) {
        let _ = self.let_go();
    }
}
