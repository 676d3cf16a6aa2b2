//! The etcd tests' harness: clusters of real etcd members on loopback
//! (plain, or with TLS and client certificates), how clients reach them
//! (`Access`: the endpoints, and the flags and environment of swaplock and
//! etcdctl), the holders' scripts and the independent checker.

use crate::common::{self, free_port, swaplock};
use std::ffi::OsString;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;
use swaplock::etcd::EtcdLock;

/// How long anything here may take before the test counts it hung.
pub(crate) const SAFETY: Duration = Duration::from_secs(40);
/// The lease TTL of the holders here, in seconds: short, to keep the run
/// short.
pub(crate) const TTL: &str = "2";
/// The exit status of `swaplock run` whose lease was lost.
pub(crate) const LEASE_LOST: i32 = 75;

/// A program on `PATH`; the tests fail, rather than skip, without it.
pub(crate) fn program(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "{name} not found: run scripts/setup (it installs etcd-server, etcd-client and \
                 openssl)"
            )
        })
}

/// Polls `done` until it holds, or fails the test after [`SAFETY`].
pub(crate) fn wait_for(what: &str, done: impl FnMut() -> bool) {
    common::poll_until(SAFETY, what, done);
}

/// Waits for `child` to exit, failing the test after [`SAFETY`].
pub(crate) fn exit_of(child: &mut Child, what: &str) -> ExitStatus {
    let mut status = None;
    wait_for(&format!("{what} to exit"), || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    status.expect("an exit status")
}

/// The TLS files of a client: the CA bundle, and a certificate and key.
#[derive(Clone, Debug)]
pub(crate) struct Tls {
    pub(crate) ca: PathBuf,
    pub(crate) identity: Option<(PathBuf, PathBuf)>,
}

/// How a client reaches a cluster.
#[derive(Clone, Debug)]
pub(crate) struct Access {
    /// The endpoints, comma-separated.
    pub(crate) endpoints: String,
    pub(crate) tls: Option<Tls>,
    /// A user and password (swaplock gets the password in
    /// `ETCDCTL_PASSWORD`, etcdctl after the name).
    pub(crate) user: Option<(String, String)>,
}

impl Access {
    pub(crate) fn plain(endpoints: String) -> Access {
        Access {
            endpoints,
            tls: None,
            user: None,
        }
    }

    /// The same cluster with `tls`.
    #[cfg_attr(not(feature = "etcd-tls"), allow(dead_code))]
    pub(crate) fn with_tls(&self, tls: Tls) -> Access {
        Access {
            tls: Some(tls),
            ..self.clone()
        }
    }

    /// The same cluster as `user`.
    #[cfg_attr(not(feature = "etcd-tls"), allow(dead_code))]
    pub(crate) fn as_user(&self, name: &str, password: &str) -> Access {
        Access {
            user: Some((name.into(), password.into())),
            ..self.clone()
        }
    }

    /// The TLS flags, as etcdctl and swaplock both take them.
    fn tls_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        if let Some(tls) = &self.tls {
            args.extend(["--cacert".into(), tls.ca.clone().into()]);
            if let Some((cert, key)) = &tls.identity {
                args.extend(["--cert".into(), cert.clone().into()]);
                args.extend(["--key".into(), key.clone().into()]);
            }
        }
        args
    }

    /// `swaplock SUB --etcd ENDPOINTS [TLS flags] [--user NAME]`, the
    /// password in the environment.
    pub(crate) fn swaplock(&self, sub: &str) -> Command {
        let mut cmd = Command::new(swaplock());
        cmd.args([sub, "--etcd", &self.endpoints])
            .args(self.tls_args())
            .env_remove("ETCDCTL_PASSWORD");
        if let Some((name, password)) = &self.user {
            cmd.args(["--user", name]).env("ETCDCTL_PASSWORD", password);
        }
        cmd
    }

    /// `etcdctl --endpoints ENDPOINTS [TLS flags] [--user NAME:PASSWORD]`.
    pub(crate) fn etcdctl(&self) -> Command {
        let mut cmd = Command::new(program("etcdctl"));
        cmd.args(["--endpoints", &self.endpoints])
            .args(self.tls_args())
            .env("ETCDCTL_API", "3")
            .stdin(Stdio::null());
        if let Some((name, password)) = &self.user {
            cmd.args(["--user", &format!("{name}:{password}")]);
        }
        cmd
    }

    /// The library's lock `name`.
    pub(crate) fn lock(&self, name: &str) -> EtcdLock {
        let mut lock = EtcdLock::new(self.endpoints.split(','), name);
        #[cfg(feature = "etcd-tls")]
        if let Some(tls) = &self.tls {
            let mut settings = swaplock::etcd::EtcdTls::new().ca(&tls.ca);
            if let Some((cert, key)) = &tls.identity {
                settings = settings.client_cert(cert, key);
            }
            lock = lock.tls(settings);
        }
        if let Some((name, password)) = &self.user {
            lock = lock.user(name, password);
        }
        lock
    }
}

/// How a cluster's members are started: TLS for clients and peers, and
/// more flags.
#[derive(Clone, Debug, Default)]
pub(crate) struct Setup {
    /// The members' certificate and key, and the CA that their peers and
    /// clients must be signed by (`--client-cert-auth`).
    pub(crate) tls: Option<ServerTls>,
    pub(crate) extra: Vec<String>,
}

#[derive(Clone, Debug)]
pub(crate) struct ServerTls {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    pub(crate) trusted_ca: PathBuf,
}

/// One etcd member: its own process, data directory and log file.
pub(crate) struct Member {
    pub(crate) name: String,
    pub(crate) client: String,
    peer: String,
    data: PathBuf,
    pub(crate) log: PathBuf,
    cluster: String,
    pub(crate) setup: Setup,
    pub(crate) child: Option<Child>,
}

impl Member {
    pub(crate) fn start(&mut self) {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("the member's log");
        let mut cmd = Command::new(program("etcd"));
        cmd.arg("--data-dir")
            .arg(&self.data)
            .args(["--name", &self.name])
            .args(["--listen-client-urls", &self.client])
            .args(["--advertise-client-urls", &self.client])
            .args(["--listen-peer-urls", &self.peer])
            .args(["--initial-advertise-peer-urls", &self.peer])
            .args(["--initial-cluster", &self.cluster])
            .args(["--initial-cluster-token", "swaplock-test"]);
        if let Some(tls) = &self.setup.tls {
            for (side, auth) in [
                ("", "--client-cert-auth"),
                ("peer-", "--peer-client-cert-auth"),
            ] {
                cmd.arg(format!("--{side}cert-file"))
                    .arg(&tls.cert)
                    .arg(format!("--{side}key-file"))
                    .arg(&tls.key)
                    .arg(format!("--{side}trusted-ca-file"))
                    .arg(&tls.trusted_ca)
                    .arg(auth);
            }
        }
        let child = cmd
            .args(&self.setup.extra)
            .stdin(Stdio::null())
            // Never the test's own output: it would stay open.
            .stdout(log.try_clone().expect("a second handle"))
            .stderr(log)
            .spawn()
            .expect("etcd starts");
        self.child = Some(child);
    }

    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// An etcd cluster of one or more members on free loopback ports, in a
/// temporary directory; killed when dropped.
pub(crate) struct Etcd {
    pub(crate) members: Vec<Member>,
    /// How the tests' own checks reach it (root's certificate, once
    /// authentication is on).
    pub(crate) admin: Access,
    _dir: tempfile::TempDir,
}

impl Etcd {
    /// A plain cluster of `size` members.
    pub(crate) fn start(size: usize) -> Etcd {
        Etcd::start_with(size, Setup::default(), None)
    }

    /// A cluster of `size` members started with `setup`; `admin` is how the
    /// tests reach it (given the endpoints), plain HTTP without it.
    pub(crate) fn start_with(size: usize, setup: Setup, admin: Option<Tls>) -> Etcd {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let scheme = if setup.tls.is_some() { "https" } else { "http" };
        let ports: Vec<(u16, u16)> = (0..size).map(|_| (free_port(), free_port())).collect();
        let cluster = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}={scheme}://127.0.0.1:{peer}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut members: Vec<Member> = ports
            .iter()
            .enumerate()
            .map(|(i, (client, peer))| Member {
                name: format!("m{i}"),
                client: format!("{scheme}://127.0.0.1:{client}"),
                peer: format!("{scheme}://127.0.0.1:{peer}"),
                data: dir.path().join(format!("m{i}.etcd")),
                log: dir.path().join(format!("m{i}.log")),
                cluster: cluster.clone(),
                setup: setup.clone(),
                child: None,
            })
            .collect();
        for m in &mut members {
            m.start();
        }
        let endpoints: Vec<&str> = members.iter().map(|m| m.client.as_str()).collect();
        let admin = Access {
            endpoints: endpoints.join(","),
            tls: admin,
            user: None,
        };
        let etcd = Etcd {
            members,
            admin,
            _dir: dir,
        };
        etcd.wait_all();
        etcd
    }

    fn wait_all(&self) {
        for i in 0..self.members.len() {
            self.wait_serving(i);
        }
    }

    /// Every member's client URL, comma-separated.
    pub(crate) fn endpoints(&self) -> String {
        self.admin.endpoints.clone()
    }

    /// How the plain tests reach it.
    pub(crate) fn access(&self) -> Access {
        Access::plain(self.endpoints())
    }

    /// Waits until member `i` answers with a leader in its cluster.
    pub(crate) fn wait_serving(&self, i: usize) {
        let one = Access {
            endpoints: self.members[i].client.clone(),
            ..self.admin.clone()
        };
        let lock = one.lock("health").request_timeout(Duration::from_secs(1));
        let log = &self.members[i].log;
        if !common::poll_within(SAFETY, || lock.holder().is_ok()) {
            panic!(
                "etcd member {i} does not serve: {:?}\n{}",
                lock.holder().err(),
                fs::read_to_string(log).unwrap_or_default()
            );
        }
    }

    /// The member that leads the cluster now, asked of the live members.
    pub(crate) fn leader(&self) -> Option<usize> {
        let ids: Vec<Option<(u64, u64)>> = self
            .members
            .iter()
            .map(|m| {
                m.child.as_ref()?;
                let one = Access {
                    endpoints: m.client.clone(),
                    ..self.admin.clone()
                };
                let out = one
                    .etcdctl()
                    .args(["endpoint", "status", "-w", "json"])
                    .stderr(Stdio::null())
                    .output()
                    .ok()?;
                let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
                let status = &v[0]["Status"];
                Some((
                    status["header"]["member_id"].as_u64()?,
                    status["leader"].as_u64()?,
                ))
            })
            .collect();
        ids.iter()
            .position(|id| id.is_some_and(|(me, leader)| me == leader && leader != 0))
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        for m in &mut self.members {
            m.kill();
        }
    }
}

/// `swaplock run --etcd ... --lease TTL [args] NAME sh -c SCRIPT`, with
/// `LOG` (the checker's file) and `DIR` in its environment.
pub(crate) fn run(access: &Access, args: &[&str], name: &str, script: &str, dir: &Path) -> Command {
    let mut cmd = access.swaplock("run");
    cmd.args(["--lease", TTL])
        .args(args)
        .args([name, "sh", "-c", script])
        .env("LOG", dir.join("log"))
        .env("DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// A turn: start, a tick, end.
pub(crate) const TURN: &str = r#"printf 'start %s\n' "$SWAPLOCK_FENCING_TOKEN" >> "$LOG"
printf 'tick %s\n' "$SWAPLOCK_FENCING_TOKEN" >> "$LOG"
printf 'end %s\n' "$SWAPLOCK_FENCING_TOKEN" >> "$LOG""#;

/// A holder that never ends by itself: it starts, says so in
/// `$DIR/$1.ready` with its process ID, and ticks until `$DIR/$1.go` appears.
pub(crate) const HOLD: &str = r#"printf 'start %s\n' "$SWAPLOCK_FENCING_TOKEN" >> "$LOG"
echo $$ > "$DIR/$0.ready.tmp" && mv "$DIR/$0.ready.tmp" "$DIR/$0.ready"
while [ ! -e "$DIR/$0.go" ]; do
  printf 'tick %s\n' "$SWAPLOCK_FENCING_TOKEN" >> "$LOG"
  sleep 0.05
done
printf 'end %s\n' "$SWAPLOCK_FENCING_TOKEN" >> "$LOG""#;

/// `run` of [`HOLD`] as holder `who`.
pub(crate) fn hold(access: &Access, args: &[&str], name: &str, who: &str, dir: &Path) -> Command {
    let mut cmd = run(access, args, name, HOLD, dir);
    // sh -c SCRIPT NAME: $0 is the holder's name.
    cmd.arg(who);
    cmd
}

/// What the checker found in the records.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    /// Turns begun, and ended.
    pub(crate) starts: usize,
    pub(crate) ends: usize,
    /// Records of a holder older than the latest start.
    pub(crate) overlaps: usize,
    /// Start tokens that did not rise.
    pub(crate) not_rising: usize,
    /// The start tokens, in order.
    pub(crate) tokens: Vec<i64>,
}

pub(crate) fn check(log: &Path) -> Checked {
    let text = fs::read_to_string(log).unwrap_or_default();
    let mut c = Checked::default();
    let mut latest: Option<i64> = None;
    for line in text.lines() {
        let (what, token) = line.split_once(' ').expect("a record: WHAT TOKEN");
        let token: i64 = token.parse().expect("a fencing token");
        match what {
            "start" => {
                if latest.is_some_and(|l| token <= l) {
                    c.not_rising += 1;
                }
                latest = Some(token);
                c.starts += 1;
                c.tokens.push(token);
            }
            "tick" | "end" => {
                if latest != Some(token) {
                    c.overlaps += 1;
                }
                c.ends += usize::from(what == "end");
            }
            other => panic!("unknown record {other}"),
        }
    }
    c
}

pub(crate) fn stderr_of(child: &mut Child) -> String {
    let mut text = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut text);
    }
    text
}

pub(crate) fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: a plain kill(2) of a process this test started.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, signal) }, 0);
}

/// Whether process `pid` has ended (a zombie nobody reaped counts).
pub(crate) fn gone(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the command name's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

/// The process ID `who` wrote in its ready file, once it holds the lock.
pub(crate) fn ready(dir: &Path, who: &str) -> i32 {
    let path = dir.join(format!("{who}.ready"));
    wait_for(&format!("{who} to hold the lock"), || path.exists());
    fs::read_to_string(&path)
        .expect("the ready file")
        .trim()
        .parse()
        .expect("a process ID")
}

/// The line `swaplock status --etcd` prints, and its exit status.
pub(crate) fn status(access: &Access, name: &str) -> (i32, String) {
    let out = access
        .swaplock("status")
        .arg(name)
        .output()
        .expect("swaplock status runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
    )
}

/// How many contenders wait behind the holder, by `status --etcd --json`.
pub(crate) fn waiting(access: &Access, name: &str) -> Option<u64> {
    let out = access
        .swaplock("status")
        .args(["--json", name])
        .output()
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v["holder"]["waiting"].as_u64()
}

/// Continues a stopped process even if the test panics.
pub(crate) struct Stopped(pub u32);

impl Drop for Stopped {
    fn drop(&mut self) {
        signal(self.0, libc::SIGCONT);
    }
}

/// The ticks of the holder of fencing token `token` in `log` so far (one
/// every 50 ms while it holds).
pub(crate) fn ticks(log: &Path, token: &str) -> usize {
    let tick = format!("tick {token}");
    fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == tick)
        .count()
}
