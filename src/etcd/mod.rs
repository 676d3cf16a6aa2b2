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

mod guard;
mod keepalive;
mod recipe;
mod session;

use guard::*;
use keepalive::*;
use recipe::*;
use session::*;

pub use guard::EtcdLockGuard;

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
}

impl fmt::Debug for EtcdLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdLock")
            .field("endpoints", &self.endpoints)
            .field("name", &self.name)
            .field("ttl", &self.ttl)
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
        }
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
            let client = lock.connect().await?;
            let prefix = lock.prefix();
            let first = GetOptions::new()
                .with_prefix()
                .with_sort(SortTarget::Create, SortOrder::Ascend)
                .with_limit(1);
            let resp = lock
                .ask("read the holder", || {
                    let (mut client, first) = (client.clone(), first.clone());
                    let prefix = prefix.as_str();
                    async move { client.get(prefix, Some(first)).await }
                })
                .await?;
            let Some(kv) = resp.kvs().first() else {
                return Ok(None);
            };
            let count = lock
                .ask("count the contenders", || {
                    let mut client = client.clone();
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

    /// Connects to the endpoints (no request is sent yet).
    async fn connect(&self) -> io::Result<Client> {
        self.ask("connect", || self.connect_to(&self.endpoints))
            .await
    }

    /// A client of `endpoints` (all of the lock's, or one), connected.
    async fn connect_to(&self, endpoints: &[String]) -> Result<Client, etcd_client::Error> {
        let options = ConnectOptions::new()
            .with_connect_timeout(self.request_timeout.min(CONNECT_AT_MOST))
            // A member that froze, or whose traffic is dropped, breaks its
            // connections within seconds, as etcdctl's do; without this a
            // watch or a keep-alive on it would wait for ever.
            .with_keep_alive(KEEPALIVE_PING, KEEPALIVE_TIMEOUT)
            .with_keep_alive_while_idle(true)
            // A member cut off from its cluster refuses, rather than answers
            // from a stale view or keeps a watch silently.
            .with_require_leader(true);
        Client::connect(endpoints.to_vec(), Some(options)).await
    }

    /// One request to etcd, made by `request` (on a clone of the client),
    /// bounded by the request timeout; its failure as an error naming the
    /// endpoints and the remedy. A request that could not reach a member
    /// (a member down, no leader yet) is made again until the timeout: the
    /// client spreads requests over the endpoints, and one that met a dead
    /// member reaches a live one next. Every request made so is one that
    /// may be repeated (reads, deletes, revokes, the conditional put of our
    /// key, a grant whose lost answer only leaves a lease to expire).
    async fn ask<T, F>(&self, what: &str, mut request: impl FnMut() -> F) -> io::Result<T>
    where
        F: Future<Output = Result<T, etcd_client::Error>>,
    {
        let deadline = Instant::now() + self.request_timeout;
        // One attempt may hang on a member that froze: each gets a third
        // of the time, and the next may reach another member.
        let attempt = (self.request_timeout / 3).max(Duration::from_millis(500));
        loop {
            let until = (Instant::now() + attempt).min(deadline);
            match tokio::time::timeout_at(until, request()).await {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(e)) if unreachable(&e) && Instant::now() + RETRY_PAUSE < deadline => {
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                Ok(Err(e)) => return Err(self.failed(what, e)),
                Err(_) if Instant::now() < deadline => {}
                Err(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "etcd lock {}: etcd at {} did not answer within {:.1} s (trying to {what}): is etcd running there, and are the endpoints right?",
                            self.name,
                            self.endpoints.join(","),
                            self.request_timeout.as_secs_f64()
                        ),
                    ))
                }
            }
        }
    }

    fn failed(&self, what: &str, e: etcd_client::Error) -> io::Error {
        use etcd_client::Error as E;
        let (kind, remedy) = match &e {
            E::InvalidArgs(_) | E::InvalidUri(_) => (
                io::ErrorKind::InvalidInput,
                "give endpoints as URLs such as http://127.0.0.1:2379",
            ),
            E::TransportError(_) | E::IoError(_) => (
                io::ErrorKind::NotConnected,
                "is etcd running there, and are the endpoints right?",
            ),
            // gRPC's UNAVAILABLE.
            E::GRpcStatus(s) if s.code() as i32 == 14 => (
                io::ErrorKind::NotConnected,
                "is etcd running there, and does its cluster have a leader?",
            ),
            _ => (io::ErrorKind::Other, "etcd refused the request"),
        };
        io::Error::new(
            kind,
            format!(
                "etcd lock {}: cannot {what} at {}: {e} ({remedy})",
                self.name,
                self.endpoints.join(",")
            ),
        )
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
