//! The credentials of an etcd lock's connections (PROTOCOL 15.1): TLS
//! (the CA bundle that verifies the members, a client certificate and key,
//! the name to verify) and an etcd user. The files are read again each
//! time a client is made, so that a certificate rotated on disk is the one
//! the next connection presents.

use super::*;
use std::path::{Path, PathBuf};

/// The TLS settings of an etcd lock's connections, as etcdctl's
/// `--cacert`, `--cert` and `--key`: the CA bundle that verifies the
/// members' certificates, and the client certificate and key of mutual TLS
/// (a member started with `--client-cert-auth` requires one). Connecting
/// with them needs the cargo feature `etcd-tls`.
///
/// The files are PEM, and read when a connection is made, again at each
/// reconnection: a certificate renewed on disk is presented from the next
/// connection on, without restarting a holder.
///
/// ```
/// use swaplock::etcd::{EtcdLock, EtcdTls};
/// let lock = EtcdLock::new(["https://10.0.0.1:2379"], "jobs/nightly").tls(
///     EtcdTls::new()
///         .ca("/etc/etcd/ca.pem")
///         .client_cert("/etc/etcd/client.pem", "/etc/etcd/client-key.pem")
///         .server_name("etcd.example.com"),
/// );
/// assert!(lock.tls_settings().is_some());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EtcdTls {
    ca: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    server_name: Option<String>,
    skip_verify: bool,
}

impl EtcdTls {
    /// No settings yet: give at least [`ca`](Self::ca).
    pub fn new() -> Self {
        EtcdTls::default()
    }

    /// The CA bundle (PEM, one or more certificates) that verifies the
    /// members' certificates (etcdctl's `--cacert`). The system's trust
    /// store is not consulted: an etcd cluster's CA is its own.
    pub fn ca(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca = Some(path.into());
        self
    }

    /// The client certificate (PEM; intermediates may follow it) and its
    /// private key (PEM: PKCS#8, PKCS#1 or SEC1), for a cluster that
    /// requires them (etcdctl's `--cert` and `--key`). Where the cluster
    /// has authentication on and no user is given, the certificate's common
    /// name is the etcd user.
    pub fn client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.cert = Some(cert.into());
        self.key = Some(key.into());
        self
    }

    /// The name the members' certificates must carry, where it is not the
    /// endpoints' host: endpoints given by IP address whose certificates
    /// name a host, or members behind one name. Sent as the TLS server
    /// name too.
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// Accepts any certificate a member presents, as etcdctl's
    /// `--insecure-skip-tls-verify`: for a test cluster only. The traffic
    /// is still encrypted, and the handshake's signature checked against
    /// the certificate the member presented, but nothing says that member
    /// is the cluster's: anyone who can answer at the endpoints can grant
    /// the lock to every contender at once. A CA bundle, if given, is not
    /// used.
    pub fn insecure_skip_verify(mut self) -> Self {
        self.skip_verify = true;
        self
    }

    /// Whether the members' certificates go unverified.
    pub fn skips_verify(&self) -> bool {
        self.skip_verify
    }

    /// The CA bundle's path.
    pub fn ca_path(&self) -> Option<&Path> {
        self.ca.as_deref()
    }

    /// The client certificate's path.
    pub fn cert_path(&self) -> Option<&Path> {
        self.cert.as_deref()
    }

    /// The client key's path.
    pub fn key_path(&self) -> Option<&Path> {
        self.key.as_deref()
    }

    /// The server name to verify, if given.
    pub fn server_name_given(&self) -> Option<&str> {
        self.server_name.as_deref()
    }

    /// Refuses settings that cannot work, before anything is read.
    pub(super) fn check(&self) -> Result<(), String> {
        if self.ca.is_none() && !self.skip_verify {
            return Err(
                "TLS needs the CA bundle that signed the members' certificates \
                 (--cacert, EtcdTls::ca)"
                    .into(),
            );
        }
        if self.cert.is_some() != self.key.is_some() {
            return Err(
                "a client certificate needs its key, and a key its certificate \
                 (--cert and --key together)"
                    .into(),
            );
        }
        Ok(())
    }

    /// The files, as they are now.
    pub(super) fn read(&self) -> Result<Files, String> {
        let read = |what: &str, path: &Path| {
            let cannot = |e: io::Error| format!("cannot read the {what} {}: {e}", path.display());
            // A pipe gives its contents once, and a named one with no
            // writer blocks a read: the lock's thread, which keeps the
            // lease alive, would wait on it at the next reconnection.
            if !std::fs::metadata(path).map_err(cannot)?.is_file() {
                return Err(format!(
                    "the {what} {} is not a regular file (a pipe?): it is read again at \
                     every connection; give a file",
                    path.display()
                ));
            }
            std::fs::read(path).map_err(cannot)
        };
        let ca = match &self.ca {
            Some(path) if !self.skip_verify => read("CA bundle", path)?,
            _ => Vec::new(),
        };
        let identity = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                Some((read("client certificate", cert)?, read("client key", key)?))
            }
            _ => None,
        };
        Ok(Files { ca, identity })
    }
}

/// The credential files as one client was made with them: a client made
/// with other contents is made anew.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Files {
    pub(super) ca: Vec<u8>,
    /// The client certificate and key.
    pub(super) identity: Option<(Vec<u8>, Vec<u8>)>,
}

/// An etcd user and password (etcd's `Authenticate`; the token it
/// answers is renewed when it expires). The password shows in no
/// `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct EtcdUser {
    pub(super) name: String,
    pub(super) password: String,
}

impl fmt::Debug for EtcdUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdUser")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// What the client certificate says of itself, for the error messages:
/// ` (CN=locker, issued by CN=etcd-ca)`.
#[cfg(feature = "etcd-tls")]
pub(super) fn describe(cert_pem: &[u8]) -> String {
    let Some(der) = first_der(cert_pem) else {
        return String::new();
    };
    let Some(cert) = swaplock_core::etcd::cert::read(&der) else {
        return String::new();
    };
    let cn = |name: Option<&[u8]>| name.map(|n| String::from_utf8_lossy(n).into_owned());
    match (cn(cert.subject_cn), cn(cert.issuer_cn)) {
        (Some(s), Some(i)) => format!(" (CN={s}, issued by CN={i})"),
        (Some(s), None) => format!(" (CN={s})"),
        (None, Some(i)) => format!(" (issued by CN={i})"),
        (None, None) => String::new(),
    }
}

/// The subject's common name of the client certificate, if any.
#[cfg(feature = "etcd-tls")]
pub(super) fn common_name(cert_pem: &[u8]) -> Option<String> {
    let der = first_der(cert_pem)?;
    let cert = swaplock_core::etcd::cert::read(&der)?;
    cert.subject_cn
        .map(|n| String::from_utf8_lossy(n).into_owned())
}

/// The DER of the first certificate in a PEM file.
#[cfg(feature = "etcd-tls")]
fn first_der(pem: &[u8]) -> Option<Vec<u8>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    CertificateDer::pem_slice_iter(pem)
        .next()?
        .ok()
        .map(|c| c.to_vec())
}

/// The TLS options of a client, from the files as read: refuses, with the
/// cause, a bundle with no certificate, a client certificate that is not
/// one, or one outside its validity period (which a member would refuse
/// by closing the connection, without a word).
#[cfg(feature = "etcd-tls")]
pub(super) fn options(tls: &EtcdTls, files: &Files) -> Result<etcd_client::TlsOptions, String> {
    use etcd_client::{Certificate, Identity, TlsOptions};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    use swaplock_core::etcd::cert::Validity;
    let shown = |p: &Option<PathBuf>| p.as_deref().map(Path::display).map(|d| d.to_string());
    let ca_path = shown(&tls.ca).unwrap_or_default();
    let mut options = TlsOptions::new();
    if !tls.skip_verify {
        let bundle = CertificateDer::pem_slice_iter(&files.ca)
            .filter(Result::is_ok)
            .count();
        if bundle == 0 {
            return Err(format!(
                "the CA bundle {ca_path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
            ));
        }
        options = options.ca_certificate(Certificate::from_pem(&files.ca));
    }
    if let Some((cert, key)) = &files.identity {
        let cert_path = shown(&tls.cert).unwrap_or_default();
        let der = first_der(cert).ok_or_else(|| {
            format!("the client certificate {cert_path} holds no PEM certificate")
        })?;
        let read = swaplock_core::etcd::cert::read(&der).ok_or_else(|| {
            format!("the client certificate {cert_path} is not an X.509 certificate")
        })?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let about = describe(cert);
        match read.validity(now) {
            Validity::Valid => {}
            Validity::Expired => {
                return Err(format!(
                    "the client certificate {cert_path}{about} expired at {}: renew it",
                    utc(read.not_after)
                ))
            }
            Validity::NotYetValid => {
                return Err(format!(
                    "the client certificate {cert_path}{about} is not valid before {} \
                     (is this host's clock right?)",
                    utc(read.not_before)
                ))
            }
        }
        let key_path = shown(&tls.key).unwrap_or_default();
        let Ok(key_der) = rustls::pki_types::PrivateKeyDer::from_pem_slice(key) else {
            return Err(format!(
                "the client key {key_path} holds no PEM private key"
            ));
        };
        // A key that is not the certificate's (one file of the two
        // renewed) fails the handshake with a cause that blames the member.
        // (A certificate webpki cannot parse, such as an X.509 v1 one, goes
        // unchecked: the member decides.)
        #[allow(deprecated)]
        let provider = rustls::crypto::ring::default_provider();
        let signing = provider
            .key_provider
            .load_private_key(key_der)
            .map_err(|e| format!("the client key {key_path} cannot be used: {e}"))?;
        let chain = CertificateDer::pem_slice_iter(cert)
            .filter_map(Result::ok)
            .collect();
        let mismatch = rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch);
        if rustls::sign::CertifiedKey::new(chain, signing).keys_match() == Err(mismatch) {
            return Err(format!(
                "the client key {key_path} is not the key of the client certificate \
                 {cert_path}{about}: give the key it was made with"
            ));
        }
        options = options.identity(Identity::from_pem(cert, key));
    }
    if let Some(name) = &tls.server_name {
        options = options.domain_name(name.clone());
    }
    Ok(options)
}

/// A time as `2026-12-05 01:39:16 UTC`.
#[cfg(feature = "etcd-tls")]
fn utc(secs: i64) -> String {
    let t = swaplock_core::etcd::cert::Utc::from_unix(secs);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

/// The balanced channel of `--insecure-skip-tls-verify`: etcd-client's own
/// (tonic's), whose endpoints, as etcd-client makes them, have their TLS
/// made again with `tls` and a verifier that accepts any certificate.
#[cfg(feature = "etcd-tls")]
pub(super) struct Unverified {
    pub(super) tls: etcd_client::TlsOptions,
}

#[cfg(feature = "etcd-tls")]
impl etcd_client::BalancedChannelBuilder for Unverified {
    type Error = etcd_client::Error;

    fn balanced_channel(
        self,
        capacity: usize,
    ) -> Result<
        (
            etcd_client::Channel,
            tokio::sync::mpsc::Sender<
                tonic::transport::channel::Change<
                    tonic::codegen::http::Uri,
                    tonic::transport::Endpoint,
                >,
            >,
        ),
        Self::Error,
    > {
        use tonic::transport::channel::Change;
        let (channel, inner) = tonic::transport::Channel::balance_channel(capacity);
        let (tx, mut rx) =
            tokio::sync::mpsc::channel::<Change<_, tonic::transport::Endpoint>>(capacity);
        // The provider tonic's `tls-ring` makes its connections with (rustls
        // deprecates it for its key exchanges; only its signature
        // algorithms serve here).
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier: Arc<dyn rustls::client::danger::ServerCertVerifier> =
            Arc::new(AnyCertificate(provider));
        // Lives as long as the client that holds `tx`.
        tokio::spawn(async move {
            while let Some(change) = rx.recv().await {
                let change = match change {
                    Change::Insert(uri, endpoint) => {
                        match endpoint.tls_config_with_verifier(self.tls.clone(), verifier.clone())
                        {
                            Ok(endpoint) => Change::Insert(uri, endpoint),
                            // Never reached: etcd-client made it with TLS.
                            Err(_) => continue,
                        }
                    }
                    other => other,
                };
                if inner.send(change).await.is_err() {
                    break;
                }
            }
        });
        Ok((etcd_client::Channel::Tonic(channel), tx))
    }
}

/// A verifier that takes any certificate as the member's, and checks only
/// that the handshake was signed with its key.
#[cfg(feature = "etcd-tls")]
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

#[cfg(feature = "etcd-tls")]
impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
