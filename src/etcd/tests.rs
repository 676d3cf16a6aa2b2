//! The settings an etcd lock refuses before it connects, and what it
//! reads of its credential files, without a server (tests/etcd has the
//! cases that need one).

use super::*;

fn refusal(lock: EtcdLock) -> String {
    let e = lock.try_lock().expect_err("refused");
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    e.to_string()
}

#[test]
fn tls_options_with_a_plain_endpoint_or_a_tls_endpoint_without_them_are_refused() {
    let tls = EtcdTls::new().ca("ca.pem");
    let said = refusal(EtcdLock::new(["http://127.0.0.1:1"], "x").tls(tls.clone()));
    assert!(
        said.contains("http://127.0.0.1:1 is plain HTTP") && said.contains("https://127.0.0.1:1"),
        "{said}"
    );
    let said = refusal(EtcdLock::new(["https://127.0.0.1:1"], "x"));
    assert!(
        said.contains("https://127.0.0.1:1 serves TLS") && said.contains("--cacert"),
        "{said}"
    );
    let said = refusal(EtcdLock::new(["https://127.0.0.1:1"], "x").tls(EtcdTls::new()));
    assert!(said.contains("CA bundle"), "{said}");
}

#[cfg(not(feature = "etcd-tls"))]
#[test]
fn tls_in_a_build_without_it_names_the_feature() {
    let lock = EtcdLock::new(["https://127.0.0.1:1"], "x").tls(EtcdTls::new().ca("ca.pem"));
    let said = refusal(lock);
    assert!(said.contains("etcd-tls"), "{said}");
}

#[cfg(feature = "etcd-tls")]
#[test]
fn a_credential_file_that_cannot_be_read_is_named_before_any_request() {
    let dir = std::env::temp_dir().join(format!("swaplock-etcd-{}", std::process::id()));
    let missing = dir.join("missing.pem");
    let lock = EtcdLock::new(["https://127.0.0.1:1"], "x").tls(EtcdTls::new().ca(&missing));
    let said = refusal(lock);
    assert!(
        said.contains("cannot read the CA bundle")
            && said.contains(&missing.display().to_string())
            && said.contains("https://127.0.0.1:1"),
        "{said}"
    );
}

#[cfg(feature = "etcd-tls")]
#[test]
fn a_client_certificate_out_of_its_validity_or_a_file_without_pem_is_refused() {
    const EXPIRED: &[u8] = include_bytes!("testdata/expired.pem");
    const EXPIRED_KEY: &[u8] = include_bytes!("testdata/expired.key");
    const LASTING: &[u8] = include_bytes!("testdata/lasting.pem");
    const LASTING_KEY: &[u8] = include_bytes!("testdata/lasting.key");
    const CA: &[u8] = include_bytes!("testdata/ca.pem");
    let tls = EtcdTls::new()
        .ca("ca.pem")
        .client_cert("client.pem", "client.key");
    let files = |ca: &[u8], cert: &[u8], key: &[u8]| Files {
        ca: ca.to_vec(),
        identity: Some((cert.to_vec(), key.to_vec())),
    };
    let said = tls::options(&tls, &files(CA, EXPIRED, EXPIRED_KEY)).expect_err("expired");
    assert_eq!(
        said,
        "the client certificate client.pem (CN=locker, issued by CN=fixture CA) expired at \
         2026-12-04 01:48:45 UTC: renew it"
    );
    assert!(tls::options(&tls, &files(CA, LASTING, LASTING_KEY)).is_ok());
    let said = tls::options(&tls, &files(b"no PEM here", LASTING, LASTING_KEY)).unwrap_err();
    assert!(
        said.contains("the CA bundle ca.pem holds no PEM certificate"),
        "{said}"
    );
    let said = tls::options(&tls, &files(CA, LASTING_KEY, LASTING_KEY)).unwrap_err();
    assert!(
        said.contains("client.pem holds no PEM certificate"),
        "{said}"
    );
    let said = tls::options(&tls, &files(CA, LASTING, LASTING)).unwrap_err();
    assert!(
        said.contains("client.key holds no PEM private key"),
        "{said}"
    );
    assert_eq!(tls::common_name(LASTING).as_deref(), Some("locker"));
}

#[test]
fn the_password_shows_in_no_debug_output() {
    let lock = EtcdLock::new(["http://127.0.0.1:1"], "x").user("locker", "s3cret-pw");
    let shown = format!("{lock:?}");
    assert!(
        shown.contains("locker") && !shown.contains("s3cret-pw"),
        "{shown}"
    );
    assert_eq!(lock.user_name(), Some("locker"));
}
