//! An adversarial review of the etcd backend's credentials and etcdctl
//! conventions: each test is one claim of the documentation put to the
//! test, against the real etcdctl where it is about etcdctl's behaviour.

use crate::common::swaplock;
use crate::harness::*;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::process::{Command, Stdio};

/// A password that is not UTF-8 text: its readable part must show in no
/// message.
const SECRET: &[u8] = b"S3cret-pw\xff";

fn secret() -> OsString {
    OsString::from_vec(SECRET.to_vec())
}

/// `swaplock run --etcd URL` with no ETCDCTL_* variable but those given.
fn ours(url: &str) -> Command {
    let mut cmd = Command::new(swaplock());
    cmd.args(["run", "--etcd", url]).stdin(Stdio::null());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("ETCDCTL_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

#[test]
fn a_password_that_is_not_text_shows_in_no_error() {
    // Refused before any connection: no etcd needed.
    let url = "http://127.0.0.1:9";
    let mut by_flag = ours(url);
    let mut user = OsString::from("--user=locker:");
    user.push(secret());
    by_flag.arg(user).args(["locks/x", "true"]);
    let mut by_user_var = ours(url);
    let mut user = OsString::from("locker:");
    user.push(secret());
    by_user_var
        .env("ETCDCTL_USER", user)
        .args(["locks/x", "true"]);
    let mut by_password_var = ours(url);
    by_password_var
        .env("ETCDCTL_PASSWORD", secret())
        .args(["--user", "locker", "locks/x", "true"]);
    for (what, mut cmd) in [
        ("--user NAME:PASSWORD", by_flag),
        ("ETCDCTL_USER=NAME:PASSWORD", by_user_var),
        ("ETCDCTL_PASSWORD", by_password_var),
    ] {
        let out = cmd.output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {said}");
        assert!(
            said.contains("must be text") && !said.contains("S3cret-pw"),
            "{what}: the password shows: {said}"
        );
    }
}

#[test]
fn etcdctls_variables_set_empty_or_false_are_taken_as_etcdctl_takes_them() {
    let etcd = Etcd::start(1);
    let url = etcd.members[0].client.clone();
    let vars: &[(&str, &str)] = &[
        // etcdctl ignores a variable set empty ...
        ("ETCDCTL_USER", ""),
        // ... and verifies the members when asked not to skip it.
        ("ETCDCTL_INSECURE_SKIP_TLS_VERIFY", "false"),
    ];
    for (var, value) in vars {
        let theirs = Command::new(program("etcdctl"))
            .args(["--endpoints", &url, "put", "review/x", "1"])
            .env("ETCDCTL_API", "3")
            .env(var, value)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            theirs.status.success(),
            "etcdctl with {var}={value:?}: {theirs:?}"
        );
        let mine = ours(&url)
            .env(var, value)
            .args(["review/x", "true"])
            .output()
            .unwrap();
        assert!(
            mine.status.success(),
            "swaplock with {var}={value:?}: {}",
            String::from_utf8_lossy(&mine.stderr)
        );
    }
    // Set to true, it is still refused: skipping verification is asked
    // for by name only.
    let out = ours(&url)
        .env("ETCDCTL_INSECURE_SKIP_TLS_VERIFY", "true")
        .args(["review/x", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// A client key that is not the certificate's (a rotation that renewed
/// one file of the two): refused at once, in one sentence that names the
/// key, never retried until the request timeout.
#[cfg(feature = "etcd-tls")]
#[test]
fn a_client_key_that_does_not_match_its_certificate_is_one_sentence_at_once() {
    use crate::pki::Pki;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(&dir.path().join("pki"));
    pki.ca("ca");
    pki.member("member", "ca");
    pki.client("locker", "ca", "locker", 30);
    pki.client("other", "ca", "other", 30);
    let setup = Setup {
        tls: Some(ServerTls {
            cert: pki.pem("member"),
            key: pki.key("member"),
            trusted_ca: pki.pem("ca"),
        }),
        extra: Vec::new(),
    };
    let etcd = Etcd::start_with(1, setup, Some(pki.tls("ca", Some("locker"))));
    let mismatched = etcd.admin.with_tls(Tls {
        ca: pki.pem("ca"),
        identity: Some((pki.pem("locker"), pki.key("other"))),
    });
    let began = Instant::now();
    let out = mismatched
        .swaplock("run")
        .args(["locks/x", "true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let took = began.elapsed();
    let said = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "a mismatched key ({:.2} s): {}",
        took.as_secs_f64(),
        said.trim()
    );
    assert_eq!(out.status.code(), Some(255), "{said}");
    assert_eq!(said.trim().lines().count(), 1, "{said}");
    let key = pki.key("other").display().to_string();
    assert!(said.contains(&key), "the key is not named: {said}");
    assert!(
        took < Duration::from_secs(4),
        "retried for {took:?}: {said}"
    );
}

/// `--user NAME:PASSWORD` typed while `ETCDCTL_PASSWORD` is set (left
/// in the environment, say): etcdctl's rule takes the whole value as the
/// name. The part after the colon is then a password the user typed,
/// which must show neither in the error (etcdctl's names no user) nor in
/// `ps` while it runs.
#[cfg(feature = "etcd-tls")]
#[test]
#[ignore = "finding: --user NAME:PASSWORD with ETCDCTL_PASSWORD set echoes the typed password in the error, and leaves it in ps"]
fn a_password_typed_after_the_user_while_the_variable_is_set_is_not_echoed() {
    use crate::secured::{secured_member, PASSWORD};
    let dir = tempfile::tempdir().unwrap();
    let (etcd, pki) = secured_member(&dir.path().join("pki"));
    let cert = etcd.admin.with_tls(pki.tls("ca", Some("locker")));
    let typed = format!("locker:{PASSWORD}");
    let out = cert
        .swaplock("run")
        .args(["--user", &typed, "locks/x", "true"])
        .env("ETCDCTL_PASSWORD", "left-over")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    let theirs = cert
        .etcdctl()
        .args(["--user", &typed, "get", "locks/x"])
        .env("ETCDCTL_PASSWORD", "left-over")
        .output()
        .unwrap();
    let theirs_said = String::from_utf8_lossy(&theirs.stderr);
    assert!(!theirs.status.success(), "{theirs_said}");
    assert!(!theirs_said.contains(PASSWORD), "etcdctl: {theirs_said}");
    assert!(!said.contains(PASSWORD), "the typed password shows: {said}");
}
