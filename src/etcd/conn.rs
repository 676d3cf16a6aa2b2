//! The lock's connection to etcd: a client made with the credentials as
//! they are on disk, made anew when they change (PROTOCOL 15.1), and the
//! requests made through it, each bounded by the request timeout, tried
//! again where another try may succeed and reported, with their cause,
//! where it cannot.

use super::diagnose::{Cause, Judged};
use super::*;
use swaplock_core::etcd::refusal::{Next, Refusal};

/// A client of some endpoints, and the credential files it was made with.
pub(super) struct Conn {
    endpoints: Vec<String>,
    current: Mutex<(Client, Files)>,
    /// Whether its clients authenticate as the lock's user: not where the
    /// cluster has authentication off (etcdctl then goes on without).
    pub(super) as_user: bool,
}

impl Conn {
    /// The client now.
    pub(super) fn client(&self) -> Client {
        crate::sync::lock(&self.current).0.clone()
    }

    /// After a request failed: if the credential files differ from those
    /// the client was made with (a certificate renewed, a CA bundle
    /// replaced), a client made with them takes its place, so that the
    /// next connection presents the new certificate. Whether it did.
    pub(super) async fn renew(&self, lock: &EtcdLock) -> bool {
        let Some(tls) = &lock.tls else {
            return false;
        };
        let Ok(files) = tls.read() else {
            // Being replaced as we read, or gone: the client keeps what
            // it has, and the next failure looks again.
            return false;
        };
        if crate::sync::lock(&self.current).1 == files {
            return false;
        }
        let Ok(options) = lock.options(&files, self.as_user) else {
            return false;
        };
        // Authenticating may meet a member that froze: a bounded try,
        // which the next failure makes again.
        let made = tokio::time::timeout(
            (lock.request_timeout / 3).max(Duration::from_millis(500)),
            lock.open(self.endpoints.clone(), options, &files),
        );
        match made.await {
            Ok(Ok(client)) => {
                *crate::sync::lock(&self.current) = (client, files);
                true
            }
            _ => false,
        }
    }
}

impl EtcdLock {
    /// A connection to every endpoint of the lock.
    pub(super) async fn connect(&self) -> io::Result<Arc<Conn>> {
        self.connect_to(&self.endpoints).await.map(Arc::new)
    }

    /// A connection to `endpoints` (all of the lock's, or one), with the
    /// credential files as they are now; made again while a member cannot
    /// be reached, until the request timeout.
    pub(super) async fn connect_to(&self, endpoints: &[String]) -> io::Result<Conn> {
        let deadline = Instant::now() + self.request_timeout;
        let mut judged = Judged::default();
        let mut as_user = self.user.is_some();
        loop {
            let files = match &self.tls {
                Some(tls) => tls.read().map_err(|why| self.refused(&why))?,
                None => Files::default(),
            };
            let options = self
                .options(&files, as_user)
                .map_err(|why| self.refused(&why))?;
            let made =
                tokio::time::timeout_at(deadline, self.open(endpoints.to_vec(), options, &files))
                    .await;
            let e = match made {
                Ok(Ok(client)) => {
                    return Ok(Conn {
                        endpoints: endpoints.to_vec(),
                        current: Mutex::new((client, files)),
                        as_user,
                    })
                }
                Ok(Err(e)) => e,
                Err(_) => return Err(self.silent("connect", judged.last())),
            };
            let cause = diagnose::cause(&e);
            if as_user && matches!(cause, Cause::Refused(Refusal::AuthNotEnabled, _)) {
                // As etcdctl: a user given to a cluster with
                // authentication off goes unused.
                as_user = false;
                continue;
            }
            match judged.next(cause.clone()) {
                Next::Retry if Instant::now() + RETRY_PAUSE < deadline => {
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                _ => return Err(self.failed("connect", &cause)),
            }
        }
    }

    /// A client of member `k` alone, with the credential files as they are
    /// now, for the keep-alive: one attempt, which the keep-alive bounds.
    pub(super) async fn member(
        &self,
        k: usize,
        as_user: bool,
    ) -> Result<Client, etcd_client::Error> {
        let files = match &self.tls {
            Some(tls) => tls.read().map_err(etcd_client::Error::InvalidArgs)?,
            None => Files::default(),
        };
        let options = self
            .options(&files, as_user)
            .map_err(etcd_client::Error::InvalidArgs)?;
        self.open(self.endpoints[k..=k].to_vec(), options, &files)
            .await
    }

    /// A client of `endpoints` with `options`, made with `files`: over
    /// the channel of [`tls::Unverified`] where the members' certificates go
    /// unverified.
    async fn open(
        &self,
        endpoints: Vec<String>,
        options: ConnectOptions,
        files: &Files,
    ) -> Result<Client, etcd_client::Error> {
        #[cfg(feature = "etcd-tls")]
        if let Some(tls) = self.tls.as_deref().filter(|t| t.skips_verify()) {
            let tls = tls::options(tls, files).map_err(etcd_client::Error::InvalidArgs)?;
            let channel = tls::Unverified { tls };
            return Client::connect_with_balanced_channel(endpoints, Some(options), channel).await;
        }
        let _ = files;
        Client::connect(endpoints, Some(options)).await
    }

    /// The options of a client made with `files` (and the lock's user,
    /// who authenticates as it is made, if `as_user`); an error says why
    /// the files cannot do.
    pub(super) fn options(&self, files: &Files, as_user: bool) -> Result<ConnectOptions, String> {
        let mut options = ConnectOptions::new()
            .with_connect_timeout(self.request_timeout.min(CONNECT_AT_MOST))
            // A member that froze, or whose traffic is dropped, breaks its
            // connections within seconds, as etcdctl's do; without this a
            // watch or a keep-alive on it would wait for ever.
            .with_keep_alive(KEEPALIVE_PING, KEEPALIVE_TIMEOUT)
            .with_keep_alive_while_idle(true)
            // A member cut off from its cluster refuses, rather than answers
            // from a stale view or keeps a watch silently.
            .with_require_leader(true);
        if let Some(user) = self.user.as_ref().filter(|_| as_user) {
            // A token that expires during a long hold (etcd's
            // --auth-token-ttl) is renewed by authenticating again.
            options = options
                .with_user(user.name.clone(), user.password.clone())
                .with_auto_token_refresh(true);
        }
        #[cfg(feature = "etcd-tls")]
        if let Some(tls) = &self.tls {
            options = options.with_tls(tls::options(tls, files)?);
        }
        #[cfg(not(feature = "etcd-tls"))]
        let _ = files;
        Ok(options)
    }

    /// One request to etcd, made by `request` (on the connection's
    /// client), bounded by the request timeout; its failure as an error
    /// naming the endpoints, the cause and the remedy. A request that
    /// could not reach a member (a member down, no leader yet) is made
    /// again until the timeout: the client spreads requests over the
    /// endpoints, and one that met a dead member reaches a live one next;
    /// a refused token is renewed once. Every request made so is one that
    /// may be repeated (reads, deletes, revokes, the conditional put of our
    /// key, a grant whose lost answer only leaves a lease to expire).
    pub(super) async fn ask<T, F>(
        &self,
        conn: &Conn,
        what: &str,
        mut request: impl FnMut(Client) -> F,
    ) -> io::Result<T>
    where
        F: Future<Output = Result<T, etcd_client::Error>>,
    {
        let deadline = Instant::now() + self.request_timeout;
        // One attempt may hang on a member that froze: each gets a third
        // of the time, and the next may reach another member.
        let attempt = (self.request_timeout / 3).max(Duration::from_millis(500));
        let mut judged = Judged::default();
        let mut reauthenticated = false;
        loop {
            let until = (Instant::now() + attempt).min(deadline);
            let e = match tokio::time::timeout_at(until, request(conn.client())).await {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(e)) => e,
                Err(_) if Instant::now() < deadline => continue,
                Err(_) => return Err(self.silent(what, judged.last())),
            };
            let cause = diagnose::cause(&e);
            let next = judged.next(cause.clone());
            // Credentials renewed on disk since the client was made (a
            // certificate the member now refuses, a CA that no longer
            // verifies it): the request is made again with them.
            if next != Next::Reauthenticate && conn.renew(self).await && Instant::now() < deadline {
                continue;
            }
            match next {
                Next::Retry if Instant::now() + RETRY_PAUSE < deadline => {
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                Next::Reauthenticate if !reauthenticated => {
                    reauthenticated = true;
                    let client = conn.client();
                    let _ = tokio::time::timeout_at(deadline, client.refresh_token()).await;
                }
                _ => return Err(self.failed(what, &cause)),
            }
        }
    }

    /// The error of a request left unanswered until the request timeout:
    /// the cause of the last failure, if one came.
    fn silent(&self, what: &str, last: Option<&Cause>) -> io::Error {
        let why = match last {
            Some(cause) => format!(" (the last attempt: {})", self.sentence(cause)),
            None => String::new(),
        };
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "etcd lock {}: etcd at {} did not answer within {:.1} s (trying to {what}){why}: \
                 is etcd running there, and are the endpoints right?",
                self.name,
                self.endpoints.join(","),
                self.request_timeout.as_secs_f64()
            ),
        )
    }

    /// The error of a request that failed.
    pub(super) fn failed(&self, what: &str, cause: &Cause) -> io::Error {
        io::Error::new(
            cause.kind(),
            format!(
                "etcd lock {}: cannot {what}: {}",
                self.name,
                self.sentence(cause)
            ),
        )
    }

    /// The error of credentials that cannot be used (a file missing, a
    /// certificate expired), found before any request.
    pub(super) fn refused(&self, why: &str) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "etcd lock {}: cannot connect to {}: {why}",
                self.name,
                self.endpoints.join(",")
            ),
        )
    }
}
