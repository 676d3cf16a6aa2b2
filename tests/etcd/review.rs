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

/// A client key delivered through a named pipe (a secret kept off the
/// disk) is read once; the lock reads it again when it reconnects (its
/// keep-alive after a member restarts), and that read must not block the
/// lock's thread, which keeps the lease alive and reports its loss: the
/// holder either refuses the pipe at once, in one sentence that names it,
/// or stops its command (exit 75) before the next holder starts.
#[cfg(feature = "etcd-tls")]
#[test]
fn a_client_key_in_a_named_pipe_never_leaves_a_holder_running_after_its_lease() {
    use crate::pki::Pki;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pki = Pki::new(&d.join("pki"));
    pki.ca("ca");
    pki.member("member", "ca");
    pki.client("locker", "ca", "locker", 30);
    let setup = Setup {
        tls: Some(ServerTls {
            cert: pki.pem("member"),
            key: pki.key("member"),
            trusted_ca: pki.pem("ca"),
        }),
        extra: Vec::new(),
    };
    let mut etcd = Etcd::start_with(1, setup, Some(pki.tls("ca", Some("locker"))));
    let access = etcd.admin.clone();
    // The key, once, through a named pipe.
    let fifo = d.join("key.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) of a path in our temporary directory.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let key = std::fs::read(pki.key("locker")).unwrap();
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(fifo, key))
    };
    let piped = access.with_tls(Tls {
        ca: pki.pem("ca"),
        identity: Some((pki.pem("locker"), fifo.clone())),
    });
    let mut holder = hold(&piped, &[], "locks/pipe", "p", d).spawn().unwrap();
    let ready_file = d.join("p.ready");
    let mut exited = None;
    wait_for("the holder to hold or refuse", || {
        exited = holder.try_wait().unwrap();
        exited.is_some() || ready_file.exists()
    });
    // Unblock a writer nobody read from (an open that never waits).
    let _ = std::os::unix::fs::OpenOptionsExt::custom_flags(
        std::fs::OpenOptions::new().read(true),
        libc::O_NONBLOCK,
    )
    .open(&fifo);
    let _ = writer.join();
    if exited.is_some() {
        let said = stderr_of(&mut holder);
        assert!(said.contains(fifo.to_str().unwrap()), "{said}");
        assert_eq!(said.trim().lines().count(), 1, "{said}");
        return;
    }
    // The member restarts: the holder's keep-alive reconnects.
    etcd.members[0].kill();
    etcd.members[0].start();
    etcd.wait_serving(0);
    let mut next = run(&access, &[], "locks/pipe", TURN, d).spawn().unwrap();
    let log = d.join("log");
    wait_for("the next holder's turn, or the first holder's end", || {
        holder.try_wait().unwrap().is_some() || check(&log).starts > 1
    });
    let lost = exit_of(&mut holder, "the first holder");
    assert_eq!(lost.code(), Some(LEASE_LOST), "{}", stderr_of(&mut holder));
    exit_of(&mut next, "the next holder");
    let c = check(&log);
    assert_eq!((c.starts, c.overlaps, c.not_rising), (2, 0, 0), "{c:?}");
}
