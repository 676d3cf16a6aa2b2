//! Why a request to etcd failed, in one sentence that names the endpoints,
//! the cause and the remedy (PROTOCOL 15.1): the TLS handshake's own
//! failures, read from the error's sources (a member's certificate that
//! this side refused, or an alert by which the member refused ours), and
//! etcd's refusals, which the core tells apart.

use super::*;
use swaplock_core::etcd::refusal::{refusal, Next, Refusal};

/// The cause of a failed request.
#[derive(Clone, Debug, PartialEq, Eq)]
// Without TLS, no TLS failure is met.
#[cfg_attr(not(feature = "etcd-tls"), allow(dead_code))]
pub(super) enum Cause {
    /// This side refused the member's certificate: signed by a CA not in
    /// the bundle.
    UnknownIssuer,
    /// The member's certificate does not carry the name connected to.
    WrongName { expected: String, presented: String },
    /// The member's certificate is past its validity.
    ServerExpired,
    /// The member's certificate was refused for another reason.
    ServerCert(String),
    /// The member sent a TLS alert: it refused our client certificate, or
    /// its absence.
    Alert(String),
    /// The member closed the connection during the TLS handshake: it
    /// serves no TLS there.
    HandshakeEof,
    /// The connection closed under the request: a member stopping, or one
    /// that refused our client certificate (it closes without an alert).
    Closed,
    /// etcd refused the request.
    Refused(Refusal, String),
    /// No member could be reached.
    Unreachable(String),
    /// The endpoints or settings do not parse.
    Input(String),
}

impl Cause {
    /// What to do after this cause has been met `repeats` times in a row.
    fn next(&self, repeats: u32) -> Next {
        match self {
            Cause::Refused(refused, _) => refused.next(),
            Cause::Unreachable(_) => Next::Retry,
            // A member killed as it shook hands may close that way once.
            Cause::HandshakeEof if repeats < 2 => Next::Retry,
            // A member stopping closes connections under requests too.
            Cause::Closed if repeats < 3 => Next::Retry,
            _ => Next::Report,
        }
    }

    /// The error kind of this cause.
    pub(super) fn kind(&self) -> io::ErrorKind {
        match self {
            Cause::Refused(Refusal::PermissionDenied, _) => io::ErrorKind::PermissionDenied,
            Cause::Refused(Refusal::Unreachable, _) | Cause::Unreachable(_) | Cause::Closed => {
                io::ErrorKind::NotConnected
            }
            Cause::Input(_) | Cause::HandshakeEof => io::ErrorKind::InvalidInput,
            Cause::Refused(Refusal::Other, _) => io::ErrorKind::Other,
            // Credentials that do not do: refused by one side or the other.
            _ => io::ErrorKind::PermissionDenied,
        }
    }
}

/// The causes met in a row by one request's attempts.
#[derive(Default)]
pub(super) struct Judged {
    last: Option<Cause>,
    repeats: u32,
}

impl Judged {
    /// What to do after `cause`.
    pub(super) fn next(&mut self, cause: Cause) -> Next {
        if self.last.as_ref() == Some(&cause) {
            self.repeats += 1;
        } else {
            self.repeats = 1;
        }
        let next = cause.next(self.repeats);
        self.last = Some(cause);
        next
    }

    /// The last cause met.
    pub(super) fn last(&self) -> Option<&Cause> {
        self.last.as_ref()
    }
}

/// The cause of `e`.
pub(super) fn cause(e: &etcd_client::Error) -> Cause {
    use etcd_client::Error as E;
    // etcd-client's error names no source: its inner error does.
    let inner: &(dyn std::error::Error + 'static) = match e {
        E::GRpcStatus(s) => s,
        E::TransportError(t) => t,
        E::IoError(io) => io,
        other => other,
    };
    #[cfg(feature = "etcd-tls")]
    if let Some(tls) = tls_cause(inner) {
        return tls;
    }
    match e {
        E::InvalidArgs(m) => Cause::Input(m.clone()),
        E::InvalidUri(u) => Cause::Input(u.to_string()),
        E::GRpcStatus(s) => {
            if is_closed(inner) {
                return Cause::Closed;
            }
            let message = s.message().to_owned();
            match refusal(s.code() as i32, &message) {
                Refusal::Unreachable => {
                    Cause::Unreachable(sources(&message, std::error::Error::source(s)))
                }
                refused => Cause::Refused(refused, message),
            }
        }
        E::TransportError(_) | E::IoError(_) => {
            Cause::Unreachable(sources(&inner.to_string(), inner.source()))
        }
        other => Cause::Refused(Refusal::Other, other.to_string()),
    }
}

/// A message, and those of the chain of sources that follows it, joined.
fn sources(first: &str, mut next: Option<&(dyn std::error::Error + 'static)>) -> String {
    let mut text = first.to_owned();
    while let Some(s) = next {
        let said = s.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        next = s.source();
    }
    text
}

/// Whether the connection closed under the request (hyper's "connection
/// closed", which gRPC reports as cancelled).
fn is_closed(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(s) = next {
        if s.to_string() == "connection closed" {
            return true;
        }
        next = s.source();
    }
    false
}

/// The TLS failure in `e`'s sources, if any.
#[cfg(feature = "etcd-tls")]
fn tls_cause(e: &(dyn std::error::Error + 'static)) -> Option<Cause> {
    use rustls::{CertificateError as C, Error as R};
    let mut next = Some(e);
    while let Some(s) = next {
        let rustls = s.downcast_ref::<R>().or_else(|| {
            s.downcast_ref::<io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<R>())
        });
        match rustls {
            Some(R::InvalidCertificate(C::UnknownIssuer)) => return Some(Cause::UnknownIssuer),
            Some(R::InvalidCertificate(C::NotValidForName)) => {
                return Some(Cause::WrongName {
                    expected: String::new(),
                    presented: String::new(),
                })
            }
            Some(R::InvalidCertificate(C::NotValidForNameContext {
                expected,
                presented,
            })) => {
                return Some(Cause::WrongName {
                    expected: names(&format!("{expected:?}")),
                    presented: presented
                        .iter()
                        .map(|n| names(n))
                        .collect::<Vec<_>>()
                        .join(", "),
                })
            }
            Some(R::InvalidCertificate(C::Expired | C::ExpiredContext { .. })) => {
                return Some(Cause::ServerExpired)
            }
            Some(R::InvalidCertificate(other)) => {
                return Some(Cause::ServerCert(format!("{other:?}")))
            }
            Some(R::AlertReceived(alert)) => return Some(Cause::Alert(format!("{alert:?}"))),
            Some(other) => return Some(Cause::ServerCert(other.to_string())),
            None => {}
        }
        let said = s.to_string();
        if let Some(alert) = said.strip_prefix("received fatal alert: ") {
            return Some(Cause::Alert(alert.to_owned()));
        }
        if said == "tls handshake eof" {
            return Some(Cause::HandshakeEof);
        }
        next = s.source();
    }
    None
}

/// A name as rustls debugs it (`DnsName("etcd.test")`, `IpAddress(127.0.0.1)`),
/// bare.
#[cfg(feature = "etcd-tls")]
fn names(debugged: &str) -> String {
    let mut bare = debugged;
    for wrapper in [
        "DnsName(",
        "IpAddress(",
        "V4(",
        "V6(",
        "Ipv4Addr(",
        "Ipv6Addr(",
    ] {
        bare = bare.strip_prefix(wrapper).unwrap_or(bare);
    }
    bare.trim_end_matches(')').trim_matches('"').to_owned()
}

impl EtcdLock {
    /// Who the requests are made as, for a refusal's message: the user,
    /// the client certificate's common name, or nobody.
    fn who(&self) -> String {
        if let Some(user) = &self.user {
            return format!("user {}", user.name);
        }
        #[cfg(feature = "etcd-tls")]
        if let Some(cn) = self
            .tls
            .as_ref()
            .and_then(|t| t.read().ok())
            .and_then(|f| f.identity)
            .and_then(|(cert, _)| tls::common_name(&cert))
        {
            return format!("user {cn} (our client certificate's common name)");
        }
        "a request with no user".into()
    }

    /// Our client certificate, for a message: its path, subject and issuer.
    fn our_cert(&self) -> Option<String> {
        let tls = self.tls.as_ref()?;
        let path = tls.cert_path()?.display().to_string();
        #[cfg(feature = "etcd-tls")]
        let about = tls
            .read()
            .ok()
            .and_then(|f| f.identity)
            .map(|(cert, _)| tls::describe(&cert))
            .unwrap_or_default();
        #[cfg(not(feature = "etcd-tls"))]
        let about = String::new();
        Some(format!("{path}{about}"))
    }

    /// The sentence that says what `cause` is, where, and what to do.
    pub(super) fn sentence(&self, cause: &Cause) -> String {
        let at = self.endpoints.join(",");
        let ca = self
            .tls
            .as_ref()
            .and_then(|t| t.ca_path())
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let prefix = self.prefix();
        match cause {
            Cause::UnknownIssuer => format!(
                "the certificate of etcd at {at} is not signed by a CA in {ca} (unknown issuer): \
                 give the CA that signed the members' certificates (--cacert)"
            ),
            Cause::WrongName {
                expected,
                presented,
            } if presented.is_empty() => format!(
                "the certificate of etcd at {at} is not valid for the name connected to{}: \
                 connect by a name it carries, or give the name to verify (--tls-server-name)",
                if expected.is_empty() {
                    String::new()
                } else {
                    format!(" ({expected})")
                }
            ),
            Cause::WrongName {
                expected,
                presented,
            } => format!(
                "the certificate of etcd at {at} is not valid for the name {expected} (it names \
                 {presented}): connect by a name it carries, or give the name to verify \
                 (--tls-server-name)"
            ),
            Cause::ServerExpired => format!(
                "the certificate of etcd at {at} has expired: the member's certificate must be \
                 renewed (or this host's clock is wrong)"
            ),
            Cause::ServerCert(why) => {
                format!(
                    "the certificate of etcd at {at} was refused ({why}): check the CA bundle {ca}"
                )
            }
            Cause::Alert(alert) => match self.our_cert() {
                None => format!(
                    "etcd at {at} requires a client certificate (TLS alert {alert}: the cluster \
                     runs with --client-cert-auth): give one (--cert and --key)"
                ),
                Some(cert) if alert == "CertificateExpired" => format!(
                    "etcd at {at} refused our client certificate {cert} as expired (TLS alert \
                     {alert}): renew it"
                ),
                Some(cert) => format!(
                    "etcd at {at} refused our client certificate {cert} (TLS alert {alert}): is \
                     its issuer in the members' --trusted-ca-file?"
                ),
            },
            Cause::HandshakeEof => format!(
                "etcd at {at} closed the connection during the TLS handshake: it serves no TLS \
                 there (give a plain-HTTP endpoint as http://, without TLS options)"
            ),
            Cause::Closed => match self.our_cert() {
                Some(cert) => format!(
                    "etcd at {at} closed the connection as it opened, as a member does that \
                     refuses a client certificate: is the issuer of {cert} in the members' \
                     --trusted-ca-file?"
                ),
                None if self.endpoints.iter().any(|e| e.starts_with("https://")) => format!(
                    "etcd at {at} closed the connection as it opened: does the cluster require a \
                     client certificate (--cert and --key)?"
                ),
                None => format!(
                    "etcd at {at} closed the connection as it opened: if it serves TLS, give it \
                     as https:// with its CA bundle (--cacert)"
                ),
            },
            Cause::Refused(Refusal::PermissionDenied, _) => format!(
                "{} has no permission on the key prefix {prefix} at {at} (etcd: permission \
                 denied): grant a role of it readwrite on the prefix (etcdctl role \
                 grant-permission ROLE --prefix=true readwrite {prefix})",
                self.who()
            ),
            Cause::Refused(Refusal::BadCredentials, message) => format!(
                "etcd at {at} refused {} ({message}): check the user name and password",
                self.who()
            ),
            Cause::Refused(Refusal::NoUser, _) => format!(
                "etcd at {at} requires authentication: give a user (--user), or a client \
                 certificate whose common name is a user"
            ),
            Cause::Refused(Refusal::AuthNotEnabled, _) => format!(
                "etcd at {at} has authentication off, but a user was given: give no user, or \
                 enable authentication (etcdctl auth enable)"
            ),
            Cause::Refused(Refusal::TokenExpired | Refusal::OldAuthRevision, message) => format!(
                "etcd at {at} refused our token even after we authenticated again ({message})"
            ),
            Cause::Refused(_, message) => format!("etcd at {at} refused the request: {message}"),
            Cause::Unreachable(message) => format!(
                "etcd at {at} cannot be reached ({message}): is etcd running there, and are the \
                 endpoints right{}?",
                if self.endpoints.iter().any(|e| e.starts_with("http://")) {
                    " (one that serves TLS is given as https://, with --cacert)"
                } else {
                    ""
                }
            ),
            Cause::Input(message) => format!(
                "{message}: give endpoints as URLs such as http://127.0.0.1:2379 or \
                 https://etcd.example.com:2379"
            ),
        }
    }
}
