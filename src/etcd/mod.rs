//! Locks held in etcd (feature `etcd`), by etcd's own concurrency recipe,
//! so that `etcdctl lock NAME` and Go's `concurrency.Mutex` on the same
//! name exclude each other with us (PROTOCOL 15).
//!
//! A contender grants itself a lease and puts the key `NAME/<lease id in
//! hex>`, attached to the lease, unless it exists already. The holder is
//! the contender whose key under `NAME/` has the lowest create revision;
//! every other contender watches the key created just before its own and
//! looks again once that one is deleted. A holder's key goes when it
//! releases, or when its lease expires: the lease is kept alive every third
//! of its TTL while the lock is waited for and held, and a holder that
//! cannot keep it alive learns it through [`EtcdLock::on_compromise`] and
//! [`EtcdLockGuard::lease_lost`].
//!
//! The invariant kept: a guard exists only while its key is the lowest
//! under the prefix; once its lease may have expired (etcd says so, or it
//! went unanswered past its TTL by our own clock) the loss is reported.
//! A holder stopped longer than its TTL overlaps the next one until it
//! runs again: work that must not overlap carries the
//! [fencing token](EtcdLockGuard::fencing_token) to the resource it changes.
//!
//! The API is synchronous, as the file locks' is: each lock runs a private
//! single-threaded tokio runtime on a thread of its own, which keeps the
//! lease alive while the caller's thread does other work.
//!
//! ```no_run
//! use std::time::Duration;
//! use swaplock::etcd::EtcdLock;
//! # fn main() -> std::io::Result<()> {
//! let lock = EtcdLock::new(["http://127.0.0.1:2379"], "jobs/nightly")
//!     .lease_ttl(Duration::from_secs(10));
//! let guard = lock.lock_timeout(Duration::from_secs(30))?;
//! println!("holding {} with fencing token {}", guard.key(), guard.fencing_token());
//! // ... exclusive work, passing the fencing token along ...
//! guard.release()?;
//! # Ok(())
//! # }
//! ```

use crate::soft::Compromise;
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::thread::JoinHandle;
use crate::sync::{mpsc, Mutex};
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, LeaseKeepAliveStream,
    LeaseKeeper, PutOptions, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use std::fmt;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc as amsc, watch};
use tokio::time::Instant;

mod conn;
mod diagnose;
mod guard;
mod keepalive;
mod recipe;
mod session;
#[cfg(test)]
mod tests;
mod tls;

use conn::*;
use guard::*;
use keepalive::*;
use recipe::*;
use session::*;
use tls::*;

pub use guard::EtcdLockGuard;
pub use tls::EtcdTls;

/// The default lease TTL, as `concurrency.NewSession`'s.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(60);
/// The default time one request to etcd may take (connecting included).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause before a failed request to etcd is tried again while waiting.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// How often an idle connection to a member is pinged (HTTP/2).
const KEEPALIVE_PING: Duration = Duration::from_secs(1);
/// How long a ping may go unanswered before the connection is dropped.
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest a connection to a member may take: a member that froze
/// still completes TCP handshakes (its kernel does), never HTTP/2's, and
/// must not be waited on for long before another is tried.
const CONNECT_AT_MOST: Duration = Duration::from_secs(2);
/// The longest a watch of the key before ours is trusted without a look:
/// a watch on a member that froze may never speak, so the waiter reads
/// the keys again at this pace.
const WATCH_LOOK_AGAIN: Duration = Duration::from_secs(2);

type CompromiseHook = Arc<dyn Fn(Compromise) + Send + Sync>;

/// A lock named `name` in the etcd cluster at some endpoints.
///
/// Every contender for a name, `etcdctl lock` included, uses the same
/// keys: `NAME/<lease id in hex>`.
#[derive(Clone)]
pub struct EtcdLock {
    endpoints: Arc<[String]>,
    name: Arc<str>,
    ttl: Duration,
    request_timeout: Duration,
    on_compromise: Option<CompromiseHook>,
    tls: Option<Arc<EtcdTls>>,
    user: Option<Arc<EtcdUser>>,
}

impl fmt::Debug for EtcdLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The user's name, never the password.
        f.debug_struct("EtcdLock")
            .field("endpoints", &self.endpoints)
            .field("name", &self.name)
            .field("ttl", &self.ttl)
            .field("tls", &self.tls)
            .field("user", &self.user.as_ref().map(|u| &u.name))
            .finish_non_exhaustive()
    }
}

/// How an acquire waits: the core's request, on the monotonic clock.
type Wait = swaplock_core::wait::Wait<Instant>;

impl EtcdLock {
    /// The lock `name` in the cluster at `endpoints` (URLs such as
    /// `http://127.0.0.1:2379`; plain HTTP). An empty name or endpoint list,
    /// or a URL that does not parse, fails at the first lock call, before
    /// anything is created.
    ///
    /// ```
    /// use swaplock::etcd::EtcdLock;
    /// let lock = EtcdLock::new(["http://10.0.0.1:2379", "http://10.0.0.2:2379"], "jobs/nightly");
    /// assert_eq!(lock.prefix(), "jobs/nightly/");
    /// ```
    pub fn new<I, S>(endpoints: I, name: impl Into<String>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        EtcdLock {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            name: name.into().into(),
            ttl: DEFAULT_LEASE_TTL,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            on_compromise: None,
            tls: None,
            user: None,
        }
    }

    /// Connects over TLS with these settings (feature `etcd-tls`): the
    /// endpoints must be `https://` URLs (or bare `HOST:PORT`, as etcdctl
    /// takes them). The files are read at each connection.
    ///
    /// ```no_run
    /// use swaplock::etcd::{EtcdLock, EtcdTls};
    /// # fn main() -> std::io::Result<()> {
    /// let lock = EtcdLock::new(["https://10.0.0.1:2379"], "jobs/nightly")
    ///     .tls(EtcdTls::new().ca("ca.pem").client_cert("client.pem", "client-key.pem"));
    /// let guard = lock.lock()?;
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn tls(mut self, tls: EtcdTls) -> Self {
        self.tls = Some(Arc::new(tls));
        self
    }

    /// Authenticates as etcd user `name` with `password` (etcd's
    /// `Authenticate`, as etcdctl's `--user`); the token etcd answers is
    /// renewed when it expires during a long hold. The user needs
    /// `readwrite` on the lock's [prefix](Self::prefix). Without a user, a
    /// cluster with authentication on takes the common name of the client
    /// certificate (`EtcdTls::client_cert`) as the user. The password is
    /// kept in memory for the renewals, and shows in no `Debug` output nor
    /// error.
    ///
    /// ```no_run
    /// use swaplock::etcd::EtcdLock;
    /// # fn main() -> std::io::Result<()> {
    /// let password = std::fs::read_to_string("/run/secrets/etcd-password")?;
    /// let lock = EtcdLock::new(["http://127.0.0.1:2379"], "jobs/nightly")
    ///     .user("locker", password.trim_end());
    /// let guard = lock.lock()?;
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn user(mut self, name: impl Into<String>, password: impl Into<String>) -> Self {
        self.user = Some(Arc::new(EtcdUser {
            name: name.into(),
            password: password.into(),
        }));
        self
    }

    /// The TLS settings, if any.
    pub fn tls_settings(&self) -> Option<&EtcdTls> {
        self.tls.as_deref()
    }

    /// The etcd user's name, if one was given.
    pub fn user_name(&self) -> Option<&str> {
        self.user.as_ref().map(|u| u.name.as_str())
    }

    /// The lease's TTL (default 60 s), in whole seconds as etcd grants it
    /// (rounded up; at least 1 s, and etcd may raise it to its minimum).
    /// A holder that stops, or cannot reach etcd, for this long loses the
    /// lock to the next contender.
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How long one request to etcd may take, connecting included
    /// (default 5 s): an unreachable cluster fails an acquire after this.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Called on the lock's own thread when the lease may be lost: etcd
    /// answered a keep-alive with no time left
    /// ([`Compromise::LeaseExpired`]), or left keep-alives unanswered
    /// until the lease's deadline by our clock ([`Compromise::Unreachable`]).
    ///
    /// ```no_run
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use swaplock::etcd::EtcdLock;
    ///
    /// static LOST: AtomicBool = AtomicBool::new(false);
    /// # fn main() -> std::io::Result<()> {
    /// let lock = EtcdLock::new(["http://127.0.0.1:2379"], "jobs/nightly").on_compromise(|why| {
    ///     eprintln!("the lock may be lost: {why:?}");
    ///     LOST.store(true, Ordering::Relaxed);
    /// });
    /// let guard = lock.lock()?;
    /// for batch in 0..16 {
    ///     if LOST.load(Ordering::Relaxed) {
    ///         break;
    ///     }
    ///     println!("batch {batch}");
    /// }
    /// guard.release()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_compromise(mut self, hook: impl Fn(Compromise) + Send + Sync + 'static) -> Self {
        self.on_compromise = Some(Arc::new(hook));
        self
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The endpoints.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// The prefix of the contenders' keys: the name and a slash, as
    /// `concurrency.NewMutex` makes it.
    pub fn prefix(&self) -> String {
        format!("{}/", self.name)
    }

    /// Waits for the lock.
    pub fn lock(&self) -> io::Result<EtcdLockGuard> {
        self.acquire(Wait::Forever)
    }

    /// One attempt; an error of kind `WouldBlock` if the lock is held (our
    /// key is deleted again, as `Mutex.TryLock` does).
    pub fn try_lock(&self) -> io::Result<EtcdLockGuard> {
        self.acquire(Wait::No)
    }

    /// Waits up to `timeout`; an error of kind `TimedOut` if the lock stays
    /// held (our key is deleted and our lease revoked). The first attempt
    /// always runs, even with a zero timeout.
    pub fn lock_timeout(&self, timeout: Duration) -> io::Result<EtcdLockGuard> {
        self.acquire(
            Instant::now()
                .checked_add(timeout)
                .map_or(Wait::Forever, Wait::Until),
        )
    }

    /// Who holds the lock now: the key with the lowest create revision
    /// under the prefix, and how many contenders wait behind it. `None`
    /// when nobody holds or waits for it.
    pub fn holder(&self) -> io::Result<Option<EtcdHolder>> {
        self.check()?;
        let lock = self.clone();
        on_runtime(async move {
            let conn = lock.connect().await?;
            let prefix = lock.prefix();
            let first = GetOptions::new()
                .with_prefix()
                .with_sort(SortTarget::Create, SortOrder::Ascend)
                .with_limit(1);
            let resp = lock
                .ask(&conn, "read the holder", |mut client| {
                    let first = first.clone();
                    let prefix = prefix.as_str();
                    async move { client.get(prefix, Some(first)).await }
                })
                .await?;
            let Some(kv) = resp.kvs().first() else {
                return Ok(None);
            };
            let count = lock
                .ask(&conn, "count the contenders", |mut client| {
                    let prefix = prefix.as_str();
                    let count = GetOptions::new().with_prefix().with_count_only();
                    async move { client.get(prefix, Some(count)).await }
                })
                .await?
                .count();
            Ok(Some(EtcdHolder {
                key: String::from_utf8_lossy(kv.key()).into_owned(),
                lease_id: kv.lease(),
                create_revision: kv.create_revision(),
                waiting: usize::try_from(count.saturating_sub(1)).unwrap_or(0),
            }))
        })
    }

    /// Refuses what cannot work, before anything is created.
    fn check(&self) -> io::Result<()> {
        if self.name.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an etcd lock needs a name: it was empty",
            ));
        }
        if self.endpoints.is_empty() || self.endpoints.iter().any(|e| e.trim().is_empty()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "etcd lock {}: no endpoint given (or an empty one): give URLs such as http://127.0.0.1:2379",
                    self.name
                ),
            ));
        }
        let refuse = |why: String| {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("etcd lock {}: {why}", self.name),
            ))
        };
        for endpoint in self.endpoints.iter() {
            if self.tls.is_some() && endpoint.starts_with("http://") {
                return refuse(format!(
                    "the endpoint {endpoint} is plain HTTP, but TLS options were given: give it \
                     as https://{} (or give no --cacert, --cert or --key)",
                    &endpoint["http://".len()..]
                ));
            }
            if self.tls.is_none() && endpoint.starts_with("https://") {
                return refuse(format!(
                    "the endpoint {endpoint} serves TLS, but no TLS options were given: give the \
                     CA bundle that signed the members' certificates (--cacert; and --cert and \
                     --key where the cluster requires client certificates)"
                ));
            }
        }
        if let Some(tls) = &self.tls {
            if let Err(why) = tls.check() {
                return refuse(format!(
                    "cannot connect to {}: {why}",
                    self.endpoints.join(",")
                ));
            }
            if cfg!(not(feature = "etcd-tls")) {
                return refuse(format!(
                    "cannot connect to {} over TLS: this build has no TLS support (the cargo \
                     feature etcd-tls)",
                    self.endpoints.join(",")
                ));
            }
        }
        Ok(())
    }

    fn acquire(&self, wait: Wait) -> io::Result<EtcdLockGuard> {
        self.check()?;
        let (reply, replied) = mpsc::channel();
        let (orders, ordered) = amsc::unbounded_channel();
        let state = Arc::new(State::default());
        let lock = self.clone();
        let shared = Arc::clone(&state);
        let thread = crate::sync::thread::Builder::new()
            .name("swaplock-etcd".into())
            .spawn(move || {
                let runtime = match runtime() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = reply.send(Err(e));
                        return;
                    }
                };
                runtime.block_on(session(lock, wait, shared, reply, ordered));
            })?;
        match replied.recv() {
            Ok(Ok(taken)) => Ok(EtcdLockGuard {
                lock: self.clone(),
                taken,
                state,
                session: Some(Session { orders, thread }),
                pid: std::process::id(),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(io::Error::other(format!(
                    "etcd lock {}: the lock's thread ended before it answered",
                    self.name
                )))
            }
        }
    }

    /// The lease TTL in whole seconds, as etcd grants it.
    fn ttl_seconds(&self) -> i64 {
        let secs = self.ttl.as_secs() + u64::from(self.ttl.subsec_nanos() > 0);
        i64::try_from(secs.max(1)).unwrap_or(i64::MAX)
    }
}

/// Who holds an etcd lock ([`EtcdLock::holder`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EtcdHolder {
    /// The holder's key: `NAME/<lease id in hex>`.
    pub key: String,
    /// The holder's lease.
    pub lease_id: i64,
    /// The key's create revision: the holder's fencing token.
    pub create_revision: i64,
    /// How many contenders wait behind the holder.
    pub waiting: usize,
}
