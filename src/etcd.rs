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
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, LeaseKeepAliveStream,
    LeaseKeeper, PutOptions, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use std::fmt;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::sync::{mpsc as amsc, watch};
use tokio::time::Instant;

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

/// How an acquire waits.
#[derive(Clone, Copy)]
enum Wait {
    /// One attempt (`try_lock`).
    No,
    /// Until the lock is ours, or for at most this long.
    Up(Option<Duration>),
}

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
        self.acquire(Wait::Up(None))
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
        self.acquire(Wait::Up(Some(timeout)))
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
        let thread = std::thread::Builder::new()
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

/// Whether `e` says a member could not be reached, or had no leader
/// (gRPC's UNAVAILABLE): another try may reach another member.
fn unreachable(e: &etcd_client::Error) -> bool {
    use etcd_client::Error as E;
    match e {
        E::TransportError(_) | E::IoError(_) => true,
        E::GRpcStatus(s) => s.code() as i32 == 14,
        _ => false,
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

/// What an acquire took.
#[derive(Clone, Debug)]
struct Taken {
    key: String,
    lease_id: i64,
    create_revision: i64,
    revision: i64,
}

/// What the lock's thread and the guard share.
#[derive(Default)]
struct State {
    compromise: Mutex<Option<Compromise>>,
    /// Set once the lock is ours: a lease lost before is a waiter's, which
    /// queues again (and is no compromise of a hold).
    held: AtomicBool,
}

impl State {
    fn compromise(&self) -> Option<Compromise> {
        *crate::sync::lock(&self.compromise)
    }
}

/// What the guard asks of the lock's thread.
enum Order {
    /// Look at etcd again: is our key still there, as ours?
    Check(mpsc::Sender<Option<Compromise>>),
    /// Delete our key and revoke our lease.
    Release(mpsc::Sender<io::Result<()>>),
}

struct Session {
    orders: amsc::UnboundedSender<Order>,
    thread: JoinHandle<()>,
}

/// A held etcd lock. Dropping it releases the lock;
/// [`release`](Self::release) reports errors.
pub struct EtcdLockGuard {
    lock: EtcdLock,
    taken: Taken,
    state: Arc<State>,
    /// Taken only by release (or drop).
    session: Option<Session>,
    /// The process that took the lock: a child forked from it has no
    /// thread of the lock's, and leaves the lock alone.
    pid: u32,
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
    fn forked(&self) -> bool {
        std::process::id() != self.pid
    }

    fn release_inner(&mut self) -> io::Result<()> {
        if self.forked() {
            // The parent's lock, kept by the parent's thread: left alone.
            // (The session's thread handle is the parent's: not joined.)
            if let Some(session) = self.session.take() {
                std::mem::forget(session);
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "etcd lock {}: this guard was taken by process {}, which this process was \
                         forked from: the lock belongs to that process, and only it can release \
                         it; it is left alone",
                        self.lock.name, self.pid
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

fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// Runs `work` to its end on a runtime of a thread of its own (so that a
/// caller inside a runtime is not refused).
fn on_runtime<T: Send + 'static>(
    work: impl Future<Output = io::Result<T>> + Send + 'static,
) -> io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| runtime()?.block_on(work))
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the etcd lock's thread panicked")))
    })
}

/// The lock's thread: takes the lock (keeping the lease alive meanwhile),
/// answers the guard's orders, and releases.
async fn session(
    lock: EtcdLock,
    wait: Wait,
    state: Arc<State>,
    reply: mpsc::Sender<io::Result<Taken>>,
    mut orders: amsc::UnboundedReceiver<Order>,
) {
    let mut client = match lock.connect().await {
        Ok(c) => c,
        Err(e) => {
            let _ = reply.send(Err(e));
            return;
        }
    };
    // A lease lost while we wait (etcd out of reach for a whole TTL, say
    // while a new leader is elected) costs us our place in line, never the
    // wait: we held nothing, so a new lease queues us again, within the
    // same deadline.
    let deadline = match wait {
        Wait::Up(Some(t)) => Some(Instant::now() + t),
        _ => None,
    };
    let (keeper, key, taken, lost) = loop {
        let wait = match (wait, deadline) {
            (Wait::Up(_), Some(d)) => Wait::Up(Some(d.saturating_duration_since(Instant::now()))),
            _ => wait,
        };
        // The lease's deadline counts from before the grant was asked for.
        let asked = Instant::now();
        let (lease_id, granted_ttl) = match lock
            .ask("grant a lease", || {
                let mut client = client.clone();
                let ttl = lock.ttl_seconds();
                async move { client.lease_grant(ttl, None).await }
            })
            .await
        {
            Ok(l) if l.ttl() > 0 => (l.id(), l.ttl()),
            Ok(l) => {
                let _ = reply.send(Err(io::Error::other(format!(
                    "etcd lock {}: etcd granted no lease: {}",
                    lock.name,
                    l.error()
                ))));
                return;
            }
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let (lost_tx, mut lost) = watch::channel(None);
        let keeper = tokio::spawn(keep_alive(
            lock.clone(),
            client.clone(),
            lease_id,
            granted_ttl,
            asked,
            Arc::clone(&state),
            lost_tx,
        ));
        let key = format!("{}{:x}", lock.prefix(), lease_id);
        let (taken, lost_first) = tokio::select! {
            taken = take(&lock, &mut client, &key, lease_id, wait) => (taken, false),
            why = lost.wait_for(Option::is_some) => (Err(io::Error::other(format!(
                "etcd lock {}: our lease {lease_id:x} was lost while we waited ({:?})",
                lock.name,
                why.ok().and_then(|w| *w)
            ))), true),
        };
        match taken {
            Ok(t) => break (keeper, key, t, lost),
            Err(e) => {
                keeper.abort();
                // Leave no key behind to hold up the contenders after us.
                let _ = delete(&lock, &client, &key).await;
                let _ = revoke(&lock, &client, lease_id).await;
                let time_left = deadline.is_none_or(|d| Instant::now() < d);
                if lost_first && !matches!(wait, Wait::No) && time_left {
                    continue;
                }
                let _ = reply.send(Err(e));
                return;
            }
        }
    };
    // From here the lease is the hold's: its loss is reported.
    state.held.store(true, Ordering::SeqCst);
    let lost_already = *lost.borrow();
    if let Some(why) = lost_already {
        report(&lock, &state, why);
    }
    let created = taken.create_revision;
    if reply.send(Ok(taken.clone())).is_err() {
        keeper.abort();
        let _ = release(&lock, &mut client, &taken).await;
        return;
    }
    while let Some(order) = orders.recv().await {
        match order {
            Order::Check(tell) => {
                let found = check(&lock, &mut client, &key, created).await;
                let _ = tell.send(found);
            }
            Order::Release(tell) => {
                keeper.abort();
                let _ = tell.send(release(&lock, &mut client, &taken).await);
                return;
            }
        }
    }
    // The guard went without a word (it cannot: its drop releases).
    keeper.abort();
    let _ = release(&lock, &mut client, &taken).await;
}

/// Deletes `key`.
async fn delete(lock: &EtcdLock, client: &Client, key: &str) -> io::Result<()> {
    lock.ask("delete our key", || {
        let mut client = client.clone();
        async move { client.delete(key, None).await }
    })
    .await
    .map(drop)
}

/// Revokes lease `id`.
async fn revoke(lock: &EtcdLock, client: &Client, id: i64) -> io::Result<()> {
    lock.ask("revoke our lease", || {
        let mut client = client.clone();
        async move { client.lease_revoke(id).await }
    })
    .await
    .map(drop)
}

/// Reads `key`.
async fn read(lock: &EtcdLock, client: &Client, key: &str) -> io::Result<etcd_client::GetResponse> {
    lock.ask("read our key", || {
        let mut client = client.clone();
        async move { client.get(key, None).await }
    })
    .await
}

/// Deletes our key and revokes our lease (as `Mutex.Unlock` then
/// `Session.Close` do).
async fn release(lock: &EtcdLock, client: &mut Client, taken: &Taken) -> io::Result<()> {
    // Both at once: either releases, and a request held up by a member
    // that froze does not hold up the other.
    let (deleted, revoked) = tokio::join!(
        delete(lock, client, &taken.key),
        revoke(lock, client, taken.lease_id)
    );
    // A revoked lease takes its key with it: released either way. A
    // lease already gone is no failure either: its key went with it.
    match (deleted, revoked) {
        (_, Ok(())) | (Ok(()), _) => Ok(()),
        (Err(e), Err(_)) => Err(io::Error::new(
            e.kind(),
            format!("{e}; the lock is released when the lease expires"),
        )),
    }
}

/// Whether our key is still ours in etcd: `None` if it is, or if etcd
/// cannot tell now.
async fn check(
    lock: &EtcdLock,
    client: &mut Client,
    key: &str,
    created: i64,
) -> Option<Compromise> {
    let found = read(lock, client, key).await.ok()?;
    match found.kvs().first() {
        Some(kv) if kv.create_revision() == created => None,
        Some(_) => Some(Compromise::OwnerChanged),
        None => Some(Compromise::MarkerMissing),
    }
}

/// The recipe of `concurrency.Mutex`: put our key unless it exists, then
/// wait until no key created before ours remains.
async fn take(
    lock: &EtcdLock,
    client: &mut Client,
    key: &str,
    lease_id: i64,
    wait: Wait,
) -> io::Result<Taken> {
    let prefix = lock.prefix();
    let first = GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Ascend)
        .with_limit(1);
    let owner = TxnOp::get(prefix.as_str(), Some(first));
    let txn = Txn::new()
        .when([Compare::create_revision(key, CompareOp::Equal, 0)])
        .and_then([
            TxnOp::put(key, "", Some(PutOptions::new().with_lease(lease_id))),
            owner.clone(),
        ])
        .or_else([TxnOp::get(key, None), owner]);
    let resp = lock
        .ask("put our key", || {
            let (mut client, txn) = (client.clone(), txn.clone());
            async move { client.txn(txn).await }
        })
        .await?;
    let header = resp.header().map_or(0, |h| h.revision());
    let answers = resp.op_responses();
    let mine = if resp.succeeded() {
        header
    } else {
        match answers.first() {
            Some(TxnOpResponse::Get(g)) => g.kvs().first().map_or(0, |kv| kv.create_revision()),
            _ => 0,
        }
    };
    let holder = match answers.get(1) {
        Some(TxnOpResponse::Get(g)) => g.kvs().first().map(|kv| kv.create_revision()),
        _ => None,
    };
    if mine <= 0 {
        return Err(io::Error::other(format!(
            "etcd lock {}: etcd's answer did not show our key {key}",
            lock.name
        )));
    }
    let taken = |revision| Taken {
        key: key.to_owned(),
        lease_id,
        create_revision: mine,
        revision,
    };
    if holder.is_none_or(|h| h == mine) {
        return Ok(taken(header));
    }
    let timeout = match wait {
        Wait::No => {
            let _ = delete(lock, client, key).await;
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "etcd lock {} is held (the key with create revision {} is first under {prefix})",
                    lock.name,
                    holder.unwrap_or_default()
                ),
            ));
        }
        Wait::Up(timeout) => timeout,
    };
    let waited = async {
        wait_deletes(lock, client, &prefix, mine - 1).await?;
        // Our key must still be there: a lease lost while we waited took it.
        loop {
            match read(lock, client, key).await {
                Ok(g) => {
                    let header = g.header().map_or(0, |h| h.revision());
                    return match g.kvs().first() {
                        Some(kv) if kv.create_revision() == mine => Ok(taken(header)),
                        _ => Err(io::Error::other(format!(
                            "etcd lock {}: our key {key} went while we waited (our lease expired?)",
                            lock.name
                        ))),
                    };
                }
                Err(_) => tokio::time::sleep(RETRY_PAUSE).await,
            }
        }
    };
    match timeout {
        None => waited.await,
        Some(t) => tokio::time::timeout(t, waited).await.unwrap_or_else(|_| {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "etcd lock {}: still held after {:.1} s{}",
                    lock.name,
                    t.as_secs_f64(),
                    holder.map_or(String::new(), |h| format!(
                        " (by the key with create revision {h} under {prefix}, when we came)"
                    ))
                ),
            ))
        }),
    }
}

/// Waits until no key under `prefix` has a create revision up to `max`:
/// watches the latest of them until it is deleted, and looks again
/// (`waitDeletes` of etcd's recipe). A failed request or a broken watch is
/// tried again, while our lease lives: a restarted member or a new leader
/// never wedges the wait.
async fn wait_deletes(
    lock: &EtcdLock,
    client: &mut Client,
    prefix: &str,
    max: i64,
) -> io::Result<()> {
    let last = GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Descend)
        .with_max_create_revision(max)
        .with_limit(1);
    loop {
        let resp = match lock
            .ask("read the keys before ours", || {
                let (mut client, last) = (client.clone(), last.clone());
                async move { client.get(prefix, Some(last)).await }
            })
            .await
        {
            Ok(r) => r,
            Err(_) => {
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
        };
        let Some(kv) = resp.kvs().first() else {
            return Ok(());
        };
        let before = kv.key().to_vec();
        let from = resp.header().map_or(0, |h| h.revision());
        if !wait_delete(client, before, from).await {
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
}

/// Watches `key` from revision `from` until it is deleted (`true`), or the
/// watch breaks (`false`: look again).
async fn wait_delete(client: &mut Client, key: Vec<u8>, from: i64) -> bool {
    let options = WatchOptions::new().with_start_revision(from);
    let watch = tokio::time::timeout(WATCH_LOOK_AGAIN, client.watch(key, Some(options)));
    let Ok(Ok(mut stream)) = watch.await else {
        return false;
    };
    loop {
        let Ok(message) = tokio::time::timeout(WATCH_LOOK_AGAIN, stream.message()).await else {
            // Silent for a while: the member may have frozen; look again.
            return false;
        };
        match message {
            Ok(Some(resp)) => {
                if resp
                    .events()
                    .iter()
                    .any(|e| e.event_type() == EventType::Delete)
                {
                    return true;
                }
                if resp.canceled() {
                    // Compacted past `from`, or refused: look again.
                    return false;
                }
            }
            Ok(None) | Err(_) => return false,
        }
    }
}

/// Keeps the lease alive every third of its TTL, until aborted; reports a
/// loss once etcd answers with no time left, or leaves the lease
/// unanswered until its deadline by our clock (counted from when each
/// answered keep-alive was sent, so never later than etcd's own).
async fn keep_alive(
    lock: EtcdLock,
    client: Client,
    lease_id: i64,
    granted_ttl: i64,
    granted: Instant,
    state: Arc<State>,
    lost: watch::Sender<Option<Compromise>>,
) {
    let ttl = Duration::from_secs(granted_ttl.unsigned_abs());
    let period = ttl / 3;
    // Where the keep-alive goes: the client of every endpoint at first;
    // after an attempt that failed, each member in turn, by a client of
    // its own, so that a member that froze (whose connection the shared
    // client may keep choosing) is left behind at the next attempt.
    let mut turn: Option<usize> = None;
    let mut members: Vec<Option<Client>> = vec![None; lock.endpoints.len()];
    let mut deadline = granted + ttl;
    let mut next = granted + period;
    let mut stream: Option<(LeaseKeeper, LeaseKeepAliveStream)> = None;
    let why = loop {
        tokio::time::sleep_until(next).await;
        let sent = Instant::now();
        // Past the deadline (we were stopped, or etcd was away): the lease
        // may be another's by now, and the holder must hear it at once,
        // not after one more request.
        if sent >= deadline {
            break Compromise::Unreachable;
        }
        // One answer is awaited at most half a period (or a third of the
        // request timeout): a member answers a keep-alive in milliseconds,
        // and one that froze leaves time for two others before the
        // deadline; the stream is then opened anew, on another.
        let limit = deadline.min(sent + (period / 2).min(lock.request_timeout / 3));
        let answer = tokio::time::timeout_at(limit, async {
            let (keeper, answers) = match &mut stream {
                Some(s) => s,
                None => {
                    let mut via = match turn {
                        None => client.clone(),
                        Some(k) => match &members[k] {
                            Some(c) => c.clone(),
                            None => {
                                let c = lock.connect_to(&lock.endpoints[k..=k]).await?;
                                members[k] = Some(c.clone());
                                c
                            }
                        },
                    };
                    // Opening the stream sends the first keep-alive and
                    // reads its answer: the lease was renewed to its whole
                    // TTL (a lease not found is an error).
                    let opened = via.lease_keep_alive(lease_id).await?;
                    return Ok::<_, etcd_client::Error>((Some(granted_ttl), Some(opened)));
                }
            };
            keeper.keep_alive().await?;
            Ok((answers.message().await?.map(|a| a.ttl()), None))
        })
        .await;
        let expired = match &answer {
            Ok(Ok((Some(left), _))) => *left <= 0,
            // Opening the stream found the lease gone.
            Ok(Err(etcd_client::Error::LeaseKeepAliveError(m))) => m.contains("not found"),
            _ => false,
        };
        if expired {
            break Compromise::LeaseExpired;
        }
        match answer {
            Err(_) if Instant::now() >= deadline => break Compromise::Unreachable,
            Err(_) => {
                // No answer within the limit: another stream, soon, to
                // the next member.
                stream = None;
                turn = Some(turn.map_or(0, |k| (k + 1) % members.len()));
                next = Instant::now();
            }
            Ok(Ok((Some(left), opened))) => {
                if opened.is_some() {
                    stream = opened;
                }
                deadline = sent + Duration::from_secs(left.unsigned_abs());
                next = sent + period;
            }
            Ok(Ok((None, _)) | Err(_)) => {
                // The stream broke (a member went away): open another
                // soon, to the next member.
                stream = None;
                turn = Some(turn.map_or(0, |k| (k + 1) % members.len()));
                next = Instant::now() + RETRY_PAUSE.min(period);
            }
        }
    };
    let _ = lost.send(Some(why));
    if state.held.load(Ordering::SeqCst) {
        report(&lock, &state, why);
    }
}

/// Records the loss of a held lock's lease and tells the hook, once.
fn report(lock: &EtcdLock, state: &State, why: Compromise) {
    {
        let mut seen = crate::sync::lock(&state.compromise);
        if seen.is_some() {
            return;
        }
        *seen = Some(why);
    }
    if let Some(hook) = &lock.on_compromise {
        hook(why);
    }
}
