//! The etcd backend against etcd as production runs it: TLS with client
//! certificates (`--client-cert-auth`, and peer TLS in a cluster of
//! three), authentication on with a root user and a role limited to the
//! prefix `locks/`, and `simple` tokens that expire after a second. The
//! certificates are made here by openssl (`pki.rs`).
//!
//! - One member serves the chaos of the plain tests (contenders in several
//!   processes under the checker, holders killed and stopped, `etcdctl
//!   lock` both ways), by a client certificate's common name and by user
//!   and password.
//! - One member serves every credential failure, each with its sentence
//!   and exit status, the password's prompt and hiding, etcdctl's
//!   variables against etcdctl itself, and a token that expires mid-hold.
//! - One member has its CA and certificates rotated under two holders:
//!   the one whose files were renewed keeps its lock, the other loses it
//!   through the compromise path (exit 75).
//! - Three members with peer TLS have their leader killed and restarted.

use crate::cases;
use crate::harness::*;
use crate::pki::Pki;
use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The request timeout of `swaplock` (its library's default): a failure
/// that is not retried comes well before it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The password of user `locker`.
pub(crate) const PASSWORD: &str = "lock-pw-7";

/// The certificates: CAs `ca` and `other`; the members' `member`; clients
/// `root`, `locker` (a user with the role on `locks/`), `stranger` (a user
/// without), `nobody` (no such user), `expired` (CN locker, expired
/// yesterday) and `foreign` (CN locker, signed by `other`).
fn pki(dir: &Path) -> Pki {
    let pki = Pki::new(dir);
    pki.ca("ca");
    pki.ca("other");
    pki.member("member", "ca");
    for cn in ["root", "locker", "stranger", "nobody"] {
        pki.client(cn, "ca", cn, 30);
    }
    pki.client("expired", "ca", "locker", -1);
    pki.client("foreign", "other", "locker", 30);
    pki
}

/// How members are started: TLS for clients and peers with `member`'s
/// certificate and `ca` trusted; simple tokens of a second (the debug log
/// says when each is made and deleted).
fn setup(pki: &Pki, member: &str, ca: &str) -> Setup {
    Setup {
        tls: Some(ServerTls {
            cert: pki.pem(member),
            key: pki.key(member),
            trusted_ca: pki.pem(ca),
        }),
        extra: [
            "--auth-token",
            "simple",
            "--auth-token-ttl",
            "1",
            "--logger",
            "zap",
            "--log-level",
            "debug",
        ]
        .map(String::from)
        .to_vec(),
    }
}

/// Authentication on: users root, locker (with role `lockers`: readwrite
/// on the prefix `locks/`) and stranger (no role), by etcdctl as root.
fn enable_auth(admin: &Access) {
    let steps: &[&[&str]] = &[
        &["user", "add", "root", "--new-user-password=root-pw"],
        &["user", "grant-role", "root", "root"],
        &[
            "user",
            "add",
            "locker",
            &format!("--new-user-password={PASSWORD}"),
        ],
        &["role", "add", "lockers"],
        &[
            "role",
            "grant-permission",
            "lockers",
            "--prefix=true",
            "readwrite",
            "locks/",
        ],
        &["user", "grant-role", "locker", "lockers"],
        &["user", "add", "stranger", "--new-user-password=stranger-pw"],
        &["auth", "enable"],
    ];
    for step in steps {
        let out = admin.etcdctl().args(*step).output().unwrap();
        assert!(out.status.success(), "etcdctl {step:?}: {out:?}");
    }
}

/// A secured member, its certificates in `dir`.
pub(crate) fn secured_member(dir: &Path) -> (Etcd, Pki) {
    let pki = pki(dir);
    let etcd = Etcd::start_with(
        1,
        setup(&pki, "member", "ca"),
        Some(pki.tls("ca", Some("root"))),
    );
    enable_auth(&etcd.admin);
    (etcd, pki)
}

#[test]
fn a_secured_member_serves_contenders_and_killed_and_stopped_holders_and_etcdctl() {
    let dir = tempfile::tempdir().unwrap();
    let (etcd, pki) = secured_member(&dir.path().join("pki"));
    let began = Instant::now();
    // By the client certificate's common name (locker).
    let by_cert = etcd.admin.with_tls(pki.tls("ca", Some("locker")));
    // By user and password, over TLS with root's certificate: the user
    // decides, and its token expires every second.
    let by_password = etcd.admin.as_user("locker", PASSWORD);
    let sub = |name: &str| {
        let d = dir.path().join(name);
        fs::create_dir(&d).unwrap();
        d
    };
    cases::contenders(&by_cert, "locks/turns", 4, 6, &sub("turns"));
    cases::contenders(&by_password, "locks/turns-pw", 3, 4, &sub("turns-pw"));
    cases::killed_holder(&by_cert, "locks/killed", &sub("killed"));
    cases::stopped_holder(&by_password, "locks/stopped", &sub("stopped"));
    cases::etcdctl_interop(&by_cert, "locks/shared", &sub("shared"));
    eprintln!(
        "the secured chaos took {:.1} s",
        began.elapsed().as_secs_f64()
    );
}

/// `swaplock run` of `true` at lock `name` by `access`, with more flags
/// and variables: its output, and how long it took.
fn attempt(
    access: &Access,
    flags: &[&str],
    vars: &[(&str, &str)],
    name: &str,
) -> (Output, Duration) {
    let mut cmd = access.swaplock("run");
    cmd.args(flags).args([name, "true"]).stdin(Stdio::null());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let began = Instant::now();
    let out = cmd.output().unwrap();
    (out, began.elapsed())
}

/// Asserts that `out` exited `code` with one error line holding every one
/// of `says`.
fn refused(what: &str, (out, took): (Output, Duration), code: i32, says: &[&str]) {
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{what} ({:.2} s): {}", took.as_secs_f64(), said.trim());
    assert_eq!(out.status.code(), Some(code), "{what}: {said}");
    let first = said.lines().next().unwrap_or_default();
    for s in says {
        assert!(first.contains(s), "{what}: {s:?} not in {first:?}");
    }
}

#[test]
fn every_bad_credential_is_one_sentence_that_names_the_endpoint_and_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let (etcd, pki) = secured_member(&dir.path().join("pki"));
    let url = etcd.members[0].client.clone();
    let plain_url = url.replace("https://", "http://");
    let cert = etcd.admin.with_tls(pki.tls("ca", Some("locker")));
    let immediate = |what: &str, o: (Output, Duration), says: &[&str]| {
        let took = o.1;
        refused(what, o, 255, says);
        assert!(
            took < REQUEST_TIMEOUT,
            "{what} waited {took:?}: a retry until the timeout"
        );
    };
    // The certificates.
    let other = pki.pem("other").display().to_string();
    immediate(
        "an unknown CA",
        attempt(
            &etcd.admin.with_tls(pki.tls("other", Some("locker"))),
            &[],
            &[],
            "locks/x",
        ),
        &[
            &url,
            &format!("is not signed by a CA in {other} (unknown issuer)"),
            "--cacert",
        ],
    );
    immediate(
        "a wrong name",
        attempt(&cert, &["--tls-server-name", "wrong.test"], &[], "locks/x"),
        &[
            &url,
            "not valid for the name wrong.test (it names localhost, etcd.test, 127.0.0.1)",
        ],
    );
    let right = attempt(&cert, &["--tls-server-name", "etcd.test"], &[], "locks/x").0;
    assert!(
        right.status.success(),
        "the name the certificate carries: {right:?}"
    );
    let expired = pki.pem("expired").display().to_string();
    immediate(
        "an expired client certificate",
        attempt(
            &etcd.admin.with_tls(pki.tls("ca", Some("expired"))),
            &[],
            &[],
            "locks/x",
        ),
        &[
            &url,
            &format!("the client certificate {expired} (CN=locker, issued by CN=ca) expired at"),
            "renew it",
        ],
    );
    immediate(
        "no client certificate",
        attempt(
            &etcd.admin.with_tls(pki.tls("ca", None)),
            &[],
            &[],
            "locks/x",
        ),
        &[&url, "client certificate", "--cert and --key"],
    );
    immediate(
        "a client certificate from a CA the member does not trust",
        attempt(
            &etcd.admin.with_tls(pki.tls("ca", Some("foreign"))),
            &[],
            &[],
            "locks/x",
        ),
        &[&url, "(CN=locker, issued by CN=other)", "--trusted-ca-file"],
    );
    // The endpoints.
    immediate(
        "a plain-HTTP endpoint with TLS options",
        attempt(
            &Access {
                endpoints: plain_url.clone(),
                ..cert.clone()
            },
            &[],
            &[],
            "locks/x",
        ),
        &[
            &format!("the endpoint {plain_url} is plain HTTP, but TLS options were given"),
            &url,
        ],
    );
    immediate(
        "a TLS endpoint without TLS options",
        attempt(&Access::plain(url.clone()), &[], &[], "locks/x"),
        &[
            &format!("the endpoint {url} serves TLS, but no TLS options were given"),
            "--cacert",
        ],
    );
    // A plain-HTTP client at a TLS port learns nothing but a broken
    // connection: it says so at the request timeout.
    let (out, took) = attempt(&Access::plain(plain_url.clone()), &[], &[], "locks/x");
    refused(
        "a plain-HTTP client at a TLS endpoint",
        (out, took),
        255,
        &[
            &plain_url,
            "cannot be reached",
            "one that serves TLS is given as https://",
        ],
    );
    assert!(took < REQUEST_TIMEOUT + Duration::from_secs(2), "{took:?}");
    // The users.
    immediate(
        "a wrong password",
        attempt(
            &cert,
            &["--user", "locker"],
            &[("ETCDCTL_PASSWORD", "wrong")],
            "locks/x",
        ),
        &[
            &url,
            "refused user locker (etcdserver: authentication failed, invalid user ID or password)",
        ],
    );
    immediate(
        "a user without permission",
        attempt(
            &cert,
            &["--user", "stranger"],
            &[("ETCDCTL_PASSWORD", "stranger-pw")],
            "locks/x",
        ),
        &[
            &url,
            "user stranger has no permission on the key prefix locks/x/",
            "(etcd: permission denied)",
        ],
    );
    immediate(
        "a certificate whose common name is no user",
        attempt(&etcd.admin.with_tls(pki.tls("ca", Some("nobody"))), &[], &[], "locks/x"),
        &["user nobody (our client certificate's common name) has no permission on the key prefix locks/x/"],
    );
    immediate(
        "the locker outside its prefix",
        attempt(&cert, &[], &[], "elsewhere"),
        &["user locker (our client certificate's common name) has no permission on the key prefix elsewhere/"],
    );
    let out = cert.swaplock("status").arg("elsewhere").output().unwrap();
    refused(
        "status outside the prefix",
        (out, Duration::ZERO),
        2,
        &["permission denied"],
    );
    // The settings themselves.
    refused(
        "a password on the command line",
        attempt(&cert, &["--password", "x"], &[], "locks/x"),
        2,
        &["--password would show the password", "--password-file"],
    );
    // Skipping verification, asked for by name: no CA needed, and a
    // member of another CA is taken; from etcdctl's variable, refused.
    let unverified = Access {
        tls: Some(Tls {
            ca: pki.pem("other"),
            identity: pki.tls("ca", Some("locker")).identity,
        }),
        ..cert.clone()
    };
    let (out, _) = attempt(&unverified, &["--insecure-skip-tls-verify"], &[], "locks/x");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.contains("not verified"),
        "{out:?}"
    );
    refused(
        "skipping verification from the environment",
        attempt(
            &cert,
            &[],
            &[("ETCDCTL_INSECURE_SKIP_TLS_VERIFY", "true")],
            "locks/x",
        ),
        2,
        &[
            "ETCDCTL_INSECURE_SKIP_TLS_VERIFY is refused",
            "asked for by name",
        ],
    );
    password_prompt(&cert, dir.path());
    password_hidden(&cert, dir.path());
    etcdctl_variables(&etcd, &pki);
    token_expires_mid_hold(&etcd, &cert, dir.path());
}

/// `--user NAME` alone: a prompt with echo off on the terminal, and a
/// clear refusal without one.
fn password_prompt(access: &Access, dir: &Path) {
    let mut cmd = access.swaplock("status");
    cmd.args(["--user", "locker", "locks/prompted"]);
    let (code, screen) = on_terminal(cmd, PASSWORD);
    assert_eq!((code, screen.contains(PASSWORD)), (0, false), "{screen}");
    assert!(
        screen.contains("Password: ") && screen.contains("free"),
        "{screen}"
    );
    let (out, _) = attempt(access, &["--user", "locker"], &[], "locks/prompted");
    refused(
        "no terminal to ask on",
        (out, Duration::ZERO),
        2,
        &[
            "--user locker without a password: standard input is no terminal",
            "--password-file",
        ],
    );
    // A password file's first line.
    let file = dir.join("password");
    fs::write(&file, format!("{PASSWORD}\nsecond line\n")).unwrap();
    let (out, _) = attempt(
        access,
        &[
            "--user",
            "locker",
            "--password-file",
            file.to_str().unwrap(),
        ],
        &[],
        "locks/prompted",
    );
    assert!(out.status.success(), "{out:?}");
}

/// Runs `cmd` on a new pseudo-terminal, typing `typed` once it asks for a
/// password: its exit status and everything the terminal showed.
fn on_terminal(mut cmd: Command, typed: &str) -> (i32, String) {
    use std::io::{Read, Write};
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty(3) fills in two descriptors, which are owned below.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty");
    // SAFETY: both descriptors were just opened, and are owned once each.
    let (mut master, slave) =
        unsafe { (fs::File::from_raw_fd(master), fs::File::from_raw_fd(slave)) };
    cmd.stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave);
    let mut child = cmd.spawn().unwrap();
    // The parent's copy of the slave is in `cmd`: dropped with it, so that
    // the master reads EIO once the child is gone.
    drop(cmd);
    // A child that never finishes (a prompt that lost what was typed) is
    // killed after the safety net, which ends the reads below.
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let pid = child.id() as libc::pid_t;
    let watchdog = std::thread::spawn(move || {
        let late = finished.recv_timeout(SAFETY);
        if late == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
            // SAFETY: a signal to our own child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let mut screen = Vec::new();
    let mut typed_yet = false;
    let mut buf = [0u8; 256];
    loop {
        match master.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => screen.extend_from_slice(&buf[..n]),
        }
        if !typed_yet && String::from_utf8_lossy(&screen).contains("Password: ") {
            master.write_all(format!("{typed}\n").as_bytes()).unwrap();
            typed_yet = true;
        }
    }
    let status = exit_of(&mut child, "the prompted command");
    drop(done);
    watchdog.join().unwrap();
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&screen).into_owned(),
    )
}

/// `--user NAME:PASSWORD`: the password is gone from the supervisor's
/// command line while it holds, and from its command's.
fn password_hidden(access: &Access, dir: &Path) {
    let mut holder = run(
        access,
        &["--user", &format!("locker:{PASSWORD}")],
        "locks/hidden",
        HOLD,
        dir,
    );
    let mut holder = holder
        .arg("hidden")
        .env_remove("ETCDCTL_PASSWORD")
        .spawn()
        .unwrap();
    let command = ready(dir, "hidden");
    let cmdline = |pid: u32| fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let ours = String::from_utf8_lossy(&cmdline(holder.id())).replace('\0', " ");
    let theirs = String::from_utf8_lossy(&cmdline(command as u32)).replace('\0', " ");
    assert!(
        !ours.contains(PASSWORD) && ours.contains("locker:xxxxxxxxx"),
        "{ours}"
    );
    assert!(!theirs.contains(PASSWORD), "{theirs}");
    fs::write(dir.join("hidden.go"), "").unwrap();
    let status = exit_of(&mut holder, "the holder");
    assert!(status.success(), "{status}: {}", stderr_of(&mut holder));
}

/// etcdctl's variables: taken alone, and refused with their flag, by
/// etcdctl and by us alike.
fn etcdctl_variables(etcd: &Etcd, pki: &Pki) {
    let url = etcd.members[0].client.clone();
    let vars: Vec<(&str, String)> = vec![
        ("ETCDCTL_ENDPOINTS", url.clone()),
        ("ETCDCTL_CACERT", pki.pem("ca").display().to_string()),
        ("ETCDCTL_CERT", pki.pem("root").display().to_string()),
        ("ETCDCTL_KEY", pki.key("root").display().to_string()),
        ("ETCDCTL_USER", "locker".into()),
        ("ETCDCTL_PASSWORD", PASSWORD.into()),
    ];
    let with_vars = |cmd: &mut Command| {
        cmd.env("ETCDCTL_API", "3").stdin(Stdio::null());
        for (k, v) in &vars {
            cmd.env(k, v);
        }
    };
    // Alone: both take them (the user decides: locker may write locks/).
    let mut ctl = Command::new(program("etcdctl"));
    with_vars(&mut ctl);
    let out = ctl
        .args(["put", "locks/by-variables", "1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "etcdctl: {out:?}");
    let mut ours = Command::new(crate::common::swaplock());
    with_vars(&mut ours);
    let out = ours
        .args(["run", "--etcd", "locks/by-variables", "true"])
        .output()
        .unwrap();
    assert!(out.status.success(), "swaplock: {out:?}");
    // With their flags too: both refuse.
    for (flag, var) in [
        ("--endpoints", "ETCDCTL_ENDPOINTS"),
        ("--cacert", "ETCDCTL_CACERT"),
        ("--user", "ETCDCTL_USER"),
    ] {
        let value = vars.iter().find(|(k, _)| *k == var).unwrap().1.clone();
        let mut ctl = Command::new(program("etcdctl"));
        with_vars(&mut ctl);
        let theirs = ctl.args([flag, &value, "get", "locks/x"]).output().unwrap();
        let mut ours = Command::new(crate::common::swaplock());
        with_vars(&mut ours);
        let mine = ours
            .args(["run", "--etcd", flag, &value, "locks/x", "true"])
            .output()
            .unwrap();
        let (theirs_said, mine_said) = (
            String::from_utf8_lossy(&theirs.stderr).into_owned(),
            String::from_utf8_lossy(&mine.stderr).into_owned(),
        );
        assert!(
            !theirs.status.success()
                && theirs_said.contains(&format!("conflicting environment variable \"{var}\"")),
            "etcdctl {flag}: {theirs_said}"
        );
        assert_eq!(mine.status.code(), Some(2), "{mine_said}");
        assert!(
            mine_said.contains(&format!(
                "conflicting environment variable {var} is shadowed by the flag {flag}"
            )),
            "{mine_said}"
        );
    }
}

/// A holder by user and password keeps its lock while its token expires
/// (simple tokens of a second, which keep-alives do not renew), and
/// releases it with a new one: the member's log shows the first token
/// deleted mid-hold and the user authenticated again after.
fn token_expires_mid_hold(etcd: &Etcd, access: &Access, dir: &Path) {
    let log = &etcd.members[0].log;
    let from = fs::metadata(log).unwrap().len() as usize;
    let new_lines = || {
        let text = fs::read(log).unwrap();
        String::from_utf8_lossy(&text[from.min(text.len())..]).into_owned()
    };
    let token_of = |line: &str| {
        line.split("\"token\":\"")
            .nth(1)
            .and_then(|t| t.split('"').next())
            .map(str::to_owned)
    };
    let user = access.as_user("locker", PASSWORD);
    let mut holder = hold(&user, &[], "locks/token", "token", dir)
        .spawn()
        .unwrap();
    ready(dir, "token");
    let first = new_lines()
        .lines()
        .find(|l| l.contains("authenticated a user") && l.contains("\"user-name\":\"locker\""))
        .and_then(token_of)
        .expect("the holder authenticated");
    let deleted = format!(
        "\"msg\":\"deleted a simple token\",\"user-name\":\"locker\",\"token\":\"{first}\""
    );
    wait_for("the holder's token to expire", || {
        new_lines().contains(&deleted)
    });
    fs::write(dir.join("token.go"), "").unwrap();
    let status = exit_of(&mut holder, "the holder");
    let said = stderr_of(&mut holder);
    assert!(status.success() && said.is_empty(), "{status}: {said}");
    let text = new_lines();
    let after = &text[text.find(&deleted).unwrap()..];
    let again = after
        .lines()
        .filter(|l| l.contains("authenticated a user") && l.contains("\"user-name\":\"locker\""))
        .count();
    eprintln!("token {first} expired mid-hold; locker authenticated {again} times after");
    assert!(again >= 1, "no new token after the first expired");
    assert_eq!(status_of(&user, "locks/token"), 0);
}

fn status_of(access: &Access, name: &str) -> i32 {
    status(access, name).0
}

#[test]
fn a_holder_whose_certificates_are_rotated_on_disk_keeps_its_lock_and_one_whose_are_not_loses_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pki = Pki::new(&d.join("pki"));
    pki.ca("ca");
    pki.member("member", "ca");
    pki.client("locker", "ca", "locker", 30);
    pki.ca("ca2");
    pki.member("member2", "ca2");
    pki.client("locker2", "ca2", "locker", 30);
    let mut etcd = Etcd::start_with(
        1,
        setup(&pki, "member", "ca"),
        Some(pki.tls("ca", Some("locker"))),
    );
    // The renewed holder's files live where the renewal writes them.
    let live = d.join("live");
    fs::create_dir(&live).unwrap();
    let put = |from: &Path, to: &str| {
        let tmp = live.join(format!("{to}.tmp"));
        fs::copy(from, &tmp).unwrap();
        fs::rename(&tmp, live.join(to)).unwrap();
    };
    put(&pki.pem("ca"), "ca.pem");
    put(&pki.pem("locker"), "client.pem");
    put(&pki.key("locker"), "client.key");
    let renewed = etcd.admin.with_tls(Tls {
        ca: live.join("ca.pem"),
        identity: Some((live.join("client.pem"), live.join("client.key"))),
    });
    let stale = etcd.admin.clone();
    let (rd, sd) = (d.join("renewed"), d.join("stale"));
    fs::create_dir(&rd).unwrap();
    fs::create_dir(&sd).unwrap();
    let mut r = hold(&renewed, &["--lease", "5"], "locks/renewed", "r", &rd)
        .spawn()
        .unwrap();
    let mut s = hold(&stale, &["--lease", "5"], "locks/stale", "s", &sd)
        .spawn()
        .unwrap();
    ready(&rd, "r");
    ready(&sd, "s");
    // A new CA, new member certificates, new client certificates: on disk
    // first, then the member restarts with them.
    put(&pki.pem("ca2"), "ca.pem");
    put(&pki.pem("locker2"), "client.pem");
    put(&pki.key("locker2"), "client.key");
    etcd.members[0].kill();
    let restarted = Instant::now();
    etcd.members[0].setup = setup(&pki, "member2", "ca2");
    etcd.admin = etcd.admin.with_tls(pki.tls("ca2", Some("locker2")));
    etcd.members[0].start();
    etcd.wait_serving(0);
    // The stale holder cannot reach the member any more: its lease goes,
    // and it says so as any loss (exit 75), its command stopped.
    let lost = exit_of(&mut s, "the stale holder");
    let said = stderr_of(&mut s);
    eprintln!(
        "the stale holder exited {lost} {:.1} s after the restart: {}",
        restarted.elapsed().as_secs_f64(),
        said.trim()
    );
    assert_eq!(lost.code(), Some(LEASE_LOST), "{said}");
    assert!(said.contains("was lost"), "{said}");
    // The renewed one still holds, by the member's own word.
    let (code, line) = status(&renewed, "locks/renewed");
    assert_eq!(code, 1, "{line}");
    fs::write(rd.join("r.go"), "").unwrap();
    let kept = exit_of(&mut r, "the renewed holder");
    assert!(kept.success(), "{kept}: {}", stderr_of(&mut r));
    for log in [rd.join("log"), sd.join("log")] {
        let c = check(&log);
        assert_eq!((c.starts, c.overlaps, c.not_rising), (1, 0, 0), "{c:?}");
    }
    // The old files are refused now: the rotation was real.
    let out = stale
        .swaplock("status")
        .arg("locks/renewed")
        .output()
        .unwrap();
    refused("the old CA", (out, Duration::ZERO), 2, &["unknown issuer"]);
}

#[test]
fn a_secured_cluster_whose_leader_is_killed_and_restarted_never_wedges_a_contender() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(&dir.path().join("pki"));
    let mut etcd = Etcd::start_with(
        3,
        setup(&pki, "member", "ca"),
        Some(pki.tls("ca", Some("root"))),
    );
    enable_auth(&etcd.admin);
    let access = etcd.admin.with_tls(pki.tls("ca", Some("locker")));
    let d = dir.path().join("cluster");
    fs::create_dir(&d).unwrap();
    cases::leader_killed(&mut etcd, &access, "locks/cluster", &d);
}
