//! A held etcd lock: what its acquire took, the state its session
//! shares with it, and its guard.

use super::*;

/// What an acquire took.
#[derive(Clone, Debug)]
pub(super) struct Taken {
    pub(super) key: String,
    pub(super) lease_id: i64,
    pub(super) create_revision: i64,
    pub(super) revision: i64,
}

/// What the lock's thread and the guard share.
#[derive(Default)]
pub(super) struct State {
    pub(super) compromise: Mutex<Option<Compromise>>,
    /// Set once the lock is ours: a lease lost before is a waiter's, which
    /// queues again (and is no compromise of a hold).
    pub(super) held: AtomicBool,
}

impl State {
    pub(super) fn compromise(&self) -> Option<Compromise> {
        *crate::sync::lock(&self.compromise)
    }
}

/// What the guard asks of the lock's thread.
pub(super) enum Order {
    /// Look at etcd again: is our key still there, as ours?
    Check(mpsc::Sender<Option<Compromise>>),
    /// Delete our key and revoke our lease.
    Release(mpsc::Sender<io::Result<()>>),
}

pub(super) struct Session {
    pub(super) orders: amsc::UnboundedSender<Order>,
    pub(super) thread: JoinHandle<()>,
}

/// A held etcd lock. Dropping it releases the lock;
/// [`release`](Self::release) reports errors.
pub struct EtcdLockGuard {
    pub(super) lock: EtcdLock,
    pub(super) taken: Taken,
    pub(super) state: Arc<State>,
    /// Taken only by release (or drop).
    pub(super) session: Option<Session>,
    /// The process that took the lock: a child forked from it has no
    /// thread of the lock's, and leaves the lock alone.
    pub(super) pid: crate::pid::Me,
}

impl fmt::Debug for EtcdLockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdLockGuard")
            .field("key", &self.taken.key)
            .field("lease_id", &self.taken.lease_id)
            .field("fencing_token", &self.taken.create_revision)
            .finish_non_exhaustive()
    }
}

impl EtcdLockGuard {
    /// Our key: `NAME/<lease id in hex>`, as `etcdctl lock` exports it in
    /// `ETCD_LOCK_KEY`.
    pub fn key(&self) -> &str {
        &self.taken.key
    }

    /// Our lease.
    pub fn lease_id(&self) -> i64 {
        self.taken.lease_id
    }

    /// The fencing token: our key's create revision. Every later holder's
    /// is greater, so a resource that remembers the greatest token it has
    /// seen can refuse a holder that lost the lock without knowing it.
    pub fn fencing_token(&self) -> i64 {
        self.taken.create_revision
    }

    /// The cluster's revision when the lock was taken, as `etcdctl lock`
    /// exports it in `ETCD_LOCK_REV` (its `Mutex.Header().Revision`). It
    /// equals the fencing token when the lock was free, and is greater
    /// when we waited.
    pub fn revision(&self) -> i64 {
        self.taken.revision
    }

    /// The lock this guard holds.
    pub fn lock(&self) -> &EtcdLock {
        &self.lock
    }

    /// Whether the keep-alive found the lease lost, and why.
    pub fn compromise(&self) -> Option<Compromise> {
        self.state.compromise()
    }

    /// Whether the lock is lost now, looking again rather than waiting for
    /// the keep-alive: what it found, or our key gone from etcd
    /// ([`Compromise::MarkerMissing`]) or no longer ours. For a holder
    /// about to release, which must know whether its work ran under the
    /// lock. `None` when nothing can be told (etcd unreachable, for less
    /// than the lease).
    pub fn lease_lost(&self) -> Option<Compromise> {
        if let Some(c) = self.compromise() {
            return Some(c);
        }
        if self.forked() {
            // The lock's thread is the parent's; only it can look.
            return None;
        }
        let session = self.session.as_ref()?;
        let (tell, told) = mpsc::channel();
        session.orders.send(Order::Check(tell)).ok()?;
        told.recv().ok().flatten().or_else(|| self.compromise())
    }

    /// Releases the lock: deletes our key and revokes our lease. An error
    /// if etcd could not be told; the lease then expires after its TTL.
    pub fn release(mut self) -> io::Result<()> {
        self.release_inner()
    }

    /// Whether this process was forked from the one that took the lock.
    pub(super) fn forked(&self) -> bool {
        crate::pid::id() != self.pid
    }

    pub(super) fn release_inner(&mut self) -> io::Result<()> {
        if self.forked() {
            // The parent's lock, kept by the parent's thread: left alone.
            // (The session's thread handle is the parent's: not joined.)
            if let Some(session) = self.session.take() {
                std::mem::forget(session);
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "etcd lock {}: this guard was taken by process {} before this process \
                         was forked from it (or from a child of it): the lock belongs to that \
                         process, and only it can release it; it is left alone",
                        self.lock.name,
                        self.pid.number()
                    ),
                ));
            }
            return Ok(());
        }
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        let (tell, told) = mpsc::channel();
        let answer = match session.orders.send(Order::Release(tell)) {
            Ok(()) => told.recv().unwrap_or(Ok(())),
            Err(_) => Ok(()),
        };
        let _ = session.thread.join();
        answer
    }
}

impl Drop for EtcdLockGuard {
    fn drop(&mut self) {
        let _ = self.release_inner();
    }
}
