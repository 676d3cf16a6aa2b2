//! Network filesystems between two hosts, on loopback (tests/common/netfs.rs
//! builds the testbed): an SFTP server mounted with sshfs, and an SMB
//! server mounted with smbnetfs, each by two "hosts" (processes in their
//! own namespaces, each with its own client mount of one export).
//!
//! First the facts the soft locks must live with, measured and asserted
//! (each printed as a `netfs fact | FILESYSTEM | FACT | VALUE` line): how an
//! `O_EXCL` create race between the two mounts ends, `RENAME_EXCHANGE`,
//! `flock` and `fcntl` locks across mounts, inode numbers, mtime
//! granularity. Then the soft locks under chaos across the two hosts over
//! sshfs: no two holders, and progress; and the read-write lock's Rust and
//! Python members under chaos there (tests/netfs/rw.rs).
//!
//! Run as root (the namespaces, FUSE, the servers), one test at a time:
//! `cargo test --test netfs -- --test-threads=1`.

#![cfg(target_os = "linux")]

mod common;
#[path = "netfs/rw.rs"]
mod rw;

use common::netfs::{self, measure, monotonic_ns, Caches, Facts, Host, Sftp, Smb};
use common::stress::Rng;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use swaplock::soft::{Kind, SoftLock};

/// The variable that makes this test executable a worker on a host.
const WORKER: &str = "SWAPLOCK_NETFS_WORKER";

/// `O_EXCL` create races per filesystem.
const RACES: usize = 200;

/// The body of the child processes: not a test of its own.
#[test]
#[ignore = "entry point of the netfs tests' worker processes"]
fn worker() {
    // A read-write lock's member that an agent started.
    if std::env::var_os(common::rw::WORKER).is_some() {
        return common::rw::worker();
    }
    let Ok(spec) = std::env::var(WORKER) else {
        return;
    };
    let parts: Vec<&str> = spec.split('\u{1f}').collect();
    match parts[..] {
        ["session", root] => netfs::serve(Path::new(root)),
        ["agent", kind, lock, log, workers, end, seed] => agent(
            kind,
            lock,
            log,
            workers.parse().unwrap(),
            end.parse().unwrap(),
            seed.parse().unwrap(),
        ),
        ["reuse", root] => reuse_after_mkdir(Path::new(root)),
        ["rwagent", lock, log, seed] => rw::agent(lock, log, seed.parse().unwrap()),
        ["rwlinks", root] => rw::links(root),
        ["chaos", kind, lock, log, end, seed] => {
            chaos_worker(kind, lock, log, end.parse().unwrap(), seed.parse().unwrap())
        }
        _ => panic!("bad worker spec {spec:?}"),
    }
}

fn exe() -> PathBuf {
    std::env::current_exe().unwrap()
}

fn sshfs_facts(caches: Caches) -> Facts {
    let server = Sftp::start();
    let (a, b) = (server.host("host-a", caches), server.host("host-b", caches));
    let mut sa = a.session(&exe(), WORKER);
    let mut sb = b.session(&exe(), WORKER);
    measure(server.export(), &mut sa, &mut sb, RACES)
}

/// sshfs with its caches off: `O_EXCL` is atomic across mounts, but the
/// loser of a true race gets `EPERM` (SFTP's generic failure), not
/// `EEXIST`; the rest as on every FUSE client.
#[test]
fn sshfs_facts_between_two_hosts_caches_off() {
    let facts = sshfs_facts(Caches::Off);
    facts.print("sshfs (caches off)");
    assert_eq!(facts.doubles, 0, "{facts:?}");
    assert_eq!(facts.neither, 0, "{facts:?}");
    assert!(
        facts.losers.get("EPERM").copied().unwrap_or(0) > 0,
        "{facts:?}"
    );
    assert!(
        facts.losers.keys().all(|e| e == "EPERM" || e == "EEXIST"),
        "{facts:?}"
    );
    assert_eq!(facts.exchange, "EINVAL");
    assert!(facts.flock_both && facts.fcntl_both, "{facts:?}");
    assert!(facts.ino_differs > 0, "{facts:?}");
    assert_eq!(facts.granularity(), "1 s");
    assert!(facts.other_sees_mtime, "{facts:?}");
}

/// sshfs with its default caches: the same, but the other mount's
/// attribute cache still shows the old mtime.
#[test]
fn sshfs_facts_between_two_hosts_default_caches() {
    let facts = sshfs_facts(Caches::Default);
    facts.print("sshfs (default caches)");
    assert_eq!(facts.doubles, 0, "{facts:?}");
    assert_eq!(facts.neither, 0, "{facts:?}");
    assert!(
        facts.losers.keys().all(|e| e == "EPERM" || e == "EEXIST"),
        "{facts:?}"
    );
    assert_eq!(facts.exchange, "EINVAL");
    assert!(facts.flock_both && facts.fcntl_both, "{facts:?}");
    assert!(facts.ino_differs > 0, "{facts:?}");
    assert_eq!(facts.granularity(), "1 s");
    assert!(!facts.other_sees_mtime, "{facts:?}");
}

/// smbnetfs, the adversarial case: `O_EXCL` is not atomic across mounts
/// (both creates "win"), and nothing else helps either.
#[test]
fn smbnetfs_facts_between_two_hosts() {
    let server = Smb::start();
    let (a, b) = (server.host("host-a"), server.host("host-b"));
    let mut sa = a.session(&exe(), WORKER);
    let mut sb = b.session(&exe(), WORKER);
    let facts = measure(server.export(), &mut sa, &mut sb, RACES);
    facts.print("smbnetfs");
    assert!(facts.doubles > 0, "{facts:?}");
    assert_eq!(facts.exchange, "EINVAL");
    assert!(facts.flock_both && facts.fcntl_both, "{facts:?}");
    assert!(facts.ino_differs > 0, "{facts:?}");
}

/// Contenders per host in the chaos runs.
const CONTENDERS: usize = 3;
/// How long each kind's chaos runs.
const CHAOS: Duration = Duration::from_secs(8);
/// A contender that waits this long for the lock counts as wedged.
const WEDGE: Duration = Duration::from_secs(30);
/// The lease duration in the chaos runs (heartbeat: a third of it).
const LEASE: Duration = Duration::from_secs(6);

fn kind_of(name: &str) -> Kind {
    match name {
        "soft" => Kind::Soft,
        "marker" => Kind::Marker,
        _ => Kind::Lease,
    }
}

fn soft_lock(kind: &str, path: &str) -> SoftLock {
    let lock = SoftLock::new(kind_of(kind), path).poll_interval(Duration::from_millis(5));
    match kind_of(kind) {
        Kind::Lease => lock.lease_duration(LEASE),
        _ => lock,
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_owned()
}

fn append(log: &str, record: &str) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(log)
        .unwrap();
    // One write(2) per record, on an O_APPEND file on the local disk.
    f.write_all(record.as_bytes()).unwrap();
}

/// A contender on a host: until `end` (CLOCK_MONOTONIC, ns) takes the
/// lock, logs `E HOST PID N`, holds it a moment, logs `X HOST PID N` and
/// releases it; now and then it dies by SIGKILL while holding it.
fn chaos_worker(kind: &str, path: &str, log: &str, end: u64, seed: u64) {
    let lock = soft_lock(kind, path);
    let (host, pid) = (hostname(), std::process::id());
    let mut rng = Rng(seed | 1);
    let mut n = 0;
    while monotonic_ns() < end {
        let guard = lock
            .lock_timeout(WEDGE)
            .unwrap_or_else(|e| panic!("{host} pid {pid}, turn {n}: {e}"));
        append(log, &format!("E {host} {pid} {n}\n"));
        if rng.below(50) == 0 {
            // SAFETY: signalling our own process; no memory is involved.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
        let until = monotonic_ns() + rng.below(2_000_000);
        while monotonic_ns() < until {
            std::thread::yield_now();
        }
        append(log, &format!("X {host} {pid} {n}\n"));
        guard
            .release()
            .unwrap_or_else(|e| panic!("{host} pid {pid}, turn {n}: release: {e}"));
        n += 1;
    }
}

/// A host's init: runs `workers` contenders until `end`, SIGKILLs and
/// SIGSTOPs (for up to 0.6 s) them at random, and replaces the killed. On
/// a filesystem that cannot exchange names a dead holder's marker never
/// moves, so the agent does what an operator would: once it has reaped a
/// contender killed by SIGKILL it logs `K HOST PID`, and breaks by force
/// the marker only if it names that contender (its PID on this host). A
/// contender killed while writing its record leaves a marker with no
/// complete record, which no contender ever removes there either: the
/// agent breaks it once it has stayed unchanged for [`ORPHAN_GRACE`].
/// Prints one summary line.
fn agent(kind: &str, lock: &str, log: &str, workers: usize, end: u64, seed: u64) {
    let host = hostname();
    let (done, finished) = mpsc::channel();
    let mut next_seed = seed * 1000;
    let mut spawn = |live: &mut HashSet<u32>| {
        next_seed += 1;
        let spec = [
            "chaos",
            kind,
            lock,
            log,
            &end.to_string(),
            &next_seed.to_string(),
        ]
        .join("\u{1f}");
        let child = std::process::Command::new(exe())
            .args(common::worker::WORKER_ARGS)
            .env(WORKER, spec)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        live.insert(child.id());
        let done = done.clone();
        // Reaped at once: a zombie would still answer kill(pid, 0).
        std::thread::spawn(move || {
            let pid = child.id();
            let out = child.wait_with_output().unwrap();
            let report = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            let _ = done.send((pid, out.status, report));
        });
    };
    let mut live = HashSet::new();
    for _ in 0..workers {
        spawn(&mut live);
    }
    let mut rng = Rng(seed | 1);
    let mut stopped: Vec<(u32, u64)> = Vec::new();
    let (mut kills, mut stops, mut breaks, mut orphans) = (0, 0, 0, 0);
    let mut watch: Option<(Snapshot, Instant)> = None;
    let mut failures = Vec::new();
    let mut next_chaos = monotonic_ns();
    while !live.is_empty() {
        if let Ok((pid, status, report)) = finished.recv_timeout(Duration::from_millis(5)) {
            live.remove(&pid);
            stopped.retain(|(p, _)| *p != pid);
            if status.signal() == Some(libc::SIGKILL) {
                kills += 1;
                let breaks_before = breaks;
                append(log, &format!("K {host} {pid}\n"));
                let lock = soft_lock(kind, lock);
                if let Ok(Some(owner)) = lock.owner() {
                    // The record's host name carries this PID namespace's
                    // mark (`?pidns-...`) after the host name.
                    let mine = owner
                        .host
                        .as_deref()
                        .map(|h| h.split('?').next() == Some(&host));
                    if owner.pid == Some(pid) && mine == Some(true) {
                        lock.force_break().unwrap();
                        breaks += 1;
                    }
                }
                if breaks_before == breaks {
                    // Not a complete record naming it: a record it was
                    // writing when killed is watched.
                    watch = marker_snapshot(lock.path())
                        .filter(|_| unowned(&lock))
                        .map(|seen| (seen, Instant::now()));
                }
                if monotonic_ns() < end {
                    spawn(&mut live);
                }
            } else if !status.success() {
                failures.push(format!("pid {pid}: {status}\n{report}"));
            }
        }
        if let Some((seen, since)) = &watch {
            let lock = soft_lock(kind, lock);
            match marker_snapshot(lock.path()) {
                Some(now) if now == *seen && unowned(&lock) => {
                    if since.elapsed() >= ORPHAN_GRACE
                        && marker_snapshot(lock.path()).as_ref() == Some(seen)
                    {
                        lock.force_break().unwrap();
                        breaks += 1;
                        orphans += 1;
                        watch = None;
                    }
                }
                _ => watch = None,
            }
        }
        let now = monotonic_ns();
        for (pid, _) in stopped.iter().filter(|(_, at)| *at <= now || now >= end) {
            // SAFETY: signalling our own child; no memory is involved.
            unsafe { libc::kill(*pid as libc::pid_t, libc::SIGCONT) };
        }
        stopped.retain(|(_, at)| *at > now && now < end);
        if now >= next_chaos && now < end {
            next_chaos = now + 20_000_000 + rng.below(150_000_000);
            let running: Vec<u32> = live
                .iter()
                .copied()
                .filter(|p| !stopped.iter().any(|(s, _)| s == p))
                .collect();
            if !running.is_empty() {
                let pid = running[rng.below(running.len() as u64) as usize];
                if rng.below(4) == 0 {
                    // SAFETY: signalling our own child; no memory is involved.
                    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                } else {
                    // SAFETY: as above.
                    unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
                    stopped.push((pid, now + rng.below(600_000_000)));
                    stops += 1;
                }
            }
        }
    }
    println!(
        "agent {host}: kills {kills} stops {stops} breaks {breaks} (of unfinished records {orphans})"
    );
    assert!(failures.is_empty(), "{host}: {}", failures.join("\n"));
}

/// How long an unfinished record left at the lock path after a contender
/// of this host died must stay unchanged before the agent breaks it: far
/// longer than a live writer takes, even one stopped by the chaos.
const ORPHAN_GRACE: Duration = Duration::from_secs(3);

/// The marker at `path` as this mount shows it: inode number (a new file
/// gets a new one), size, mtime and bytes.
type Snapshot = (u64, u64, i64, Vec<u8>);

fn marker_snapshot(path: &Path) -> Option<Snapshot> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let bytes = std::fs::read(path).ok()?;
    Some((meta.ino(), meta.size(), meta.mtime(), bytes))
}

/// Whether the marker holds no complete record (empty, or cut short).
fn unowned(lock: &SoftLock) -> bool {
    match lock.owner() {
        Ok(Some(owner)) => owner.pid.is_none(),
        _ => false,
    }
}

/// What the log of one chaos run shows.
#[derive(Debug, Default)]
struct Tally {
    turns: HashMap<String, usize>,
    overlaps: Vec<String>,
}

/// Reads the log in order: an entry while another contender is inside
/// that has not been logged dead is an overlap; every exit must match the
/// entry before it.
fn check(log: &str) -> Tally {
    let mut tally = Tally::default();
    let mut inside: Option<(String, String, String)> = None;
    let mut dead = HashSet::new();
    for (n, line) in log.lines().enumerate() {
        let f: Vec<&str> = line.split(' ').collect();
        match f[..] {
            ["E", host, pid, turn] => {
                if let Some((h, p, _)) = &inside {
                    if !dead.contains(&(h.clone(), p.clone())) {
                        tally.overlaps.push(format!(
                            "line {n}: {host} {pid} entered while {h} {p} held it"
                        ));
                    }
                }
                inside = Some((host.into(), pid.into(), turn.into()));
                *tally.turns.entry(host.into()).or_default() += 1;
            }
            ["X", host, pid, turn] => {
                if inside != Some((host.into(), pid.into(), turn.into())) {
                    tally
                        .overlaps
                        .push(format!("line {n}: {line} without its entry ({inside:?})"));
                }
                inside = None;
            }
            ["K", host, pid] => {
                dead.insert((host.to_owned(), pid.to_owned()));
            }
            _ => panic!("line {n}: bad record {line:?}"),
        }
    }
    tally
}

/// Waits for `child` until `deadline`, killing it then.
fn wait_until(child: &mut Child, deadline: Instant) -> std::process::ExitStatus {
    let limit = deadline.saturating_duration_since(Instant::now());
    let mut status = None;
    if !common::poll_within(limit, || {
        status = child.try_wait().unwrap();
        status.is_some()
    }) {
        let _ = child.kill();
        let _ = child.wait();
        panic!("a host did not finish in time (wedged)");
    }
    status.unwrap()
}

fn chaos(server: &Sftp, hosts: &[Host], kind: &str) -> Tally {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join(format!("{kind}.log"));
    let log = log.to_str().unwrap();
    let end = monotonic_ns() + CHAOS.as_nanos() as u64;
    let started = Instant::now();
    let mut agents: Vec<(Child, &Host)> = hosts
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let lock = host.root().join(format!("{kind}.lock"));
            let spec = [
                "agent",
                kind,
                lock.to_str().unwrap(),
                log,
                &CONTENDERS.to_string(),
                &end.to_string(),
                &(i as u64 + 1).to_string(),
            ]
            .join("\u{1f}");
            let child = host
                .command(&exe())
                .args(common::worker::WORKER_ARGS)
                .env(WORKER, spec)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (child, host)
        })
        .collect();
    let deadline = started + CHAOS + WEDGE + Duration::from_secs(30);
    let mut summaries = Vec::new();
    for (child, host) in &mut agents {
        let status = wait_until(child, deadline);
        let mut out = String::new();
        let mut err = String::new();
        use std::io::Read;
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(
            status.success(),
            "{kind}: host {} failed ({status}):\n{out}\n{err}",
            host.name()
        );
        summaries.extend(
            out.lines()
                .filter(|l| l.starts_with("agent "))
                .map(str::to_owned),
        );
    }
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let tally = check(&text);
    let mut turns: Vec<_> = tally.turns.iter().collect();
    turns.sort();
    eprintln!(
        "netfs chaos | sshfs (caches off) | {kind} | turns {turns:?} | overlaps {} | {} | {:.1?}",
        tally.overlaps.len(),
        summaries.join("; "),
        started.elapsed()
    );
    let left: Vec<String> = std::fs::read_dir(server.export())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(kind))
        .collect();
    eprintln!("netfs chaos | {kind} | left in the export: {left:?}");
    tally
}

/// The soft locks across two hosts over sshfs (caches off), under chaos:
/// three contenders on each host take the lock of each kind in turn for
/// 8 s while their hosts SIGKILL and SIGSTOP them at random. The log of
/// entries and exits, on the local disk, must show no two holders, and
/// both hosts must make progress.
#[test]
fn soft_locks_exclude_across_two_hosts_over_sshfs_under_chaos() {
    let server = Sftp::start();
    let hosts = [
        server.host("host-a", Caches::Off),
        server.host("host-b", Caches::Off),
    ];
    let mut failed = Vec::new();
    for kind in ["soft", "marker", "lease"] {
        let tally = chaos(&server, &hosts, kind);
        if !tally.overlaps.is_empty() {
            failed.push(format!("{kind}: {:?}", tally.overlaps));
        }
        for host in &hosts {
            if tally.turns.get(host.name()).copied().unwrap_or(0) == 0 {
                failed.push(format!("{kind}: no turn on {}", host.name()));
            }
        }
        // Every contender released or was broken: the lock is free.
        assert!(
            !server.export().join(format!("{kind}.lock")).exists(),
            "{kind}: the lock is still held"
        );
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// The export's inode numbers are the server's own; each mount's are not.
#[test]
fn the_export_is_one_directory_for_both_hosts() {
    let server = Sftp::start();
    let a = server.host("host-a", Caches::Off);
    let b = server.host("host-b", Caches::Off);
    let mut sa = a.session(&exe(), WORKER);
    let mut sb = b.session(&exe(), WORKER);
    assert_eq!(sa.ask("write shared hello"), "ok");
    let local = std::fs::metadata(server.export().join("shared")).unwrap();
    assert_eq!(local.size(), 5);
    assert_eq!(sb.ask("stat shared").split(' ').nth(3), Some("5"));
}

/// What a command run on `host` printed, and its status.
fn on_host(
    host: &Host,
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, String, String) {
    let mut cmd = host.command(Path::new(program));
    cmd.args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs a command on `host` that must be refused: exit 255, nothing on
/// stdout (the command never ran), and `says` in the error. Returns the
/// error for further checks.
fn refused_on(host: &Host, program: &str, args: &[&str], says: &str) -> String {
    let (code, out, err) = on_host(host, program, args, &[]);
    assert_eq!((code, out.as_str()), (Some(255), ""), "{args:?}: {err}");
    assert!(err.contains(says), "{args:?}: {err}");
    err
}

/// On sshfs, whose kernel locks exclude only this client mount's
/// processes: kernel locks are refused with an error that names the
/// filesystem and the alternatives (unless the caller vouches that no
/// other host uses it); soft locks work, a contender meeting a held
/// marker (which the client reports as EPERM) waits or is busy; status
/// names the filesystem and what it supports.
#[test]
fn sshfs_refuses_kernel_locks_and_serves_soft_ones() {
    let server = Sftp::start();
    let host = server.host("host-a", Caches::Off);
    let root = host.root().display().to_string();
    let lock = format!("{root}/kernel.lock");
    let swaplock = env!("CARGO_BIN_EXE_swaplock");
    let with_lock_ex = env!("CARGO_BIN_EXE_with-lock-ex");

    let err = refused_on(
        &host,
        with_lock_ex,
        &["-w", &lock, "echo", "ran"],
        "fuse.sshfs keeps fcntl locks for this client mount only",
    );
    assert!(
        err.contains("--kind lease") && err.contains("--etcd"),
        "{err}"
    );
    for kind in ["fcntl", "flock"] {
        refused_on(
            &host,
            swaplock,
            &["run", "--kind", kind, &lock, "echo", "ran"],
            &format!("fuse.sshfs keeps {kind} locks"),
        );
    }
    let vouched = [("SWAPLOCK_ALLOW_CLIENT_LOCAL", "1")];
    let (code, out, err) = on_host(&host, with_lock_ex, &["-w", &lock, "echo", "ran"], &vouched);
    assert_eq!((code, out.as_str()), (Some(0), "ran\n"), "{err}");

    // A held marker: the inner contender is busy (-E 7), not failed.
    let soft = format!("{root}/soft.lock");
    let inner = format!("{swaplock} run -n -E 7 --kind marker {soft} true; echo inner $?");
    let (code, out, err) = on_host(
        &host,
        swaplock,
        &["run", "--kind", "marker", &soft, "sh", "-c", &inner],
        &[],
    );
    assert_eq!((code, out.as_str()), (Some(0), "inner 7\n"), "{err}");
    assert!(err.contains("is held by pid"), "{err}");

    let (code, out, err) = on_host(&host, swaplock, &["status", "--kind", "marker", &soft], &[]);
    assert_eq!(code, Some(0), "{err}");
    let fs = out.lines().nth(1).unwrap_or_default();
    assert!(
        fs.starts_with("filesystem: fuse.sshfs: remote yes;"),
        "{out}"
    );
    assert!(fs.contains("fcntl locks reach this client only"), "{out}");
    assert!(
        fs.contains("exclusive create atomic (EPERM for an existing name)"),
        "{out}"
    );
    assert!(fs.contains("exchange no"), "{out}");
}

/// On smbnetfs, whose client drops O_EXCL: soft locks are refused too
/// (two hosts could both create the marker), as are kernel locks.
#[test]
fn smbnetfs_refuses_soft_and_kernel_locks() {
    let server = Smb::start();
    let host = server.host("host-a");
    let root = host.root().display().to_string();
    let swaplock = env!("CARGO_BIN_EXE_swaplock");
    for kind in ["soft", "marker", "lease"] {
        let lock = format!("{root}/{kind}.lock");
        refused_on(
            &host,
            swaplock,
            &["run", "--kind", kind, &lock, "echo", "ran"],
            "fuse.smbnetfs does not create files exclusively between clients",
        );
        assert!(
            !server.export().join(format!("{kind}.lock")).exists(),
            "{kind}: a marker was made"
        );
    }
    let lock = format!("{root}/kernel.lock");
    refused_on(
        &host,
        env!("CARGO_BIN_EXE_with-lock-ex"),
        &["-w", &lock, "true"],
        "fuse.smbnetfs keeps fcntl locks",
    );
    let (_, out, _) = on_host(&host, swaplock, &["status", "--json", &lock], &[]);
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["filesystem"]["type"], "fuse.smbnetfs", "{out}");
    assert_eq!(status["filesystem"]["exclusive_create"], "no", "{out}");
}

/// A lock object whose directory does not exist yet on sshfs, used again
/// once it does: refused both times.
fn reuse_after_mkdir(root: &Path) {
    let dir = root.join("later");
    let lock = swaplock::FileLock::new(dir.join("job.lock"));
    // Refused already by its nearest existing ancestor's filesystem.
    let first = lock.try_lock().map(drop).unwrap_err();
    assert_eq!(first.kind(), std::io::ErrorKind::Unsupported, "{first}");
    std::fs::create_dir(&dir).unwrap();
    match lock.try_lock() {
        Ok(_) => println!("taken"),
        Err(e) => println!("refused {:?}: {e}", e.kind()),
    }
}

/// Whatever leads a kernel lock to sshfs, the file it takes there is
/// judged: a lock object used again once its directory was made, a
/// dangling symlink on a local disk whose target the lock creates on the
/// mount, and the mount reached from outside its mount namespace
/// (`/proc/PID/root/...`), where this process's mount table does not
/// name it. A soft lock on smbnetfs is refused however deep the
/// directories it would make, which it leaves unmade.
#[test]
fn every_way_onto_a_client_local_filesystem_is_judged() {
    let server = Sftp::start();
    let host = server.host("host-a", Caches::Off);
    let root = host.root().display().to_string();
    let with_lock_ex = env!("CARGO_BIN_EXE_with-lock-ex");

    let mut reuse = host.command(&exe());
    reuse
        .args(common::worker::WORKER_ARGS)
        .env(WORKER, format!("reuse\u{1f}{root}"));
    let out = reuse.output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("refused Unsupported"), "{said}");
    assert!(said.contains("fuse.sshfs keeps fcntl locks"), "{said}");

    let local = tempfile::tempdir().unwrap();
    let link = local.path().join("link.lock");
    let script = format!(
        "ln -s {root}/dangling.lock {link} && exec {with_lock_ex} -w {link} echo ran",
        link = link.display()
    );
    refused_on(
        &host,
        "/bin/sh",
        &["-c", &script],
        "fuse.sshfs keeps fcntl locks",
    );

    // A host process that keeps the mount up until its stdin closes.
    let mut up = host.command(Path::new("/bin/sh"));
    up.args(["-c", "echo up; exec cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut up = up.spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(up.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "up\n");
    let through = format!("/proc/{}/root{root}/elsewhere.lock", up.id());
    let out = std::process::Command::new(with_lock_ex)
        .args(["-w", &through, "echo", "ran"])
        .output()
        .unwrap();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_swaplock"))
        .args(["status", "--json", &through])
        .output()
        .unwrap();
    drop(up.stdin.take());
    up.wait().unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["filesystem"]["seen"], false, "{status}");
    assert_eq!(status["filesystem"]["fcntl_locks"], "unknown", "{status}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(255), "{err}");
    assert!(
        err.contains("is not in this process's mount table"),
        "{err}"
    );
    drop(server);

    let smb = Smb::start();
    let host = smb.host("host-a");
    let root = host.root().display().to_string();
    let deep = format!("{root}/d1/d2/job.lock");
    let swaplock = env!("CARGO_BIN_EXE_swaplock");
    refused_on(
        &host,
        swaplock,
        &["run", "--kind", "marker", &deep, "true"],
        "fuse.smbnetfs does not create files exclusively",
    );
    assert!(
        !smb.export().join("d1").exists(),
        "the refused lock made its directories"
    );
}
