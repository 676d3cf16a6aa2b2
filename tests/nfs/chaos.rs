//! The soft kinds between two NFS client hosts under chaos, and the
//! attribute cache a lease's judgement reads through (PROTOCOL 13.5).
//!
//! Every takeover needs the exchange, which NFS refuses (`EINVAL`): a
//! marker whose holder was killed stays until an operator's forced break.
//! The conductor plays that operator, as the messages tell one to: it
//! breaks a marker only once `swaplock break` on the killed holder's own
//! host has said the holder is gone and named `swaplock break --force`,
//! and a contender on the other host has said where the holder is.

use super::{fresh, note, Client, Report, Witness, MOUNTS};
use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Read};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};
use swaplock::SoftLock;

/// How long the chaos lasts on each mount and kind.
const CHAOS: Duration = Duration::from_secs(5);
/// Workers per client host.
const PER_HOST: usize = 2;
/// With no critical section entered for this long, and no worker stopped,
/// the lock is taken to be wedged by a killed holder's marker.
const STILL: Duration = Duration::from_millis(2_500);
/// The lease of the lease kind under chaos.
const LEASE: Duration = Duration::from_secs(6);

/// A small deterministic generator, seeded per run (the seed is reported).
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A worker of the chaos and the client host it runs on.
struct Worker {
    host: usize,
    child: Child,
}

/// What the chaos did to one lock.
#[derive(Default)]
struct Tally {
    stops: u32,
    kills: u32,
    /// Markers of killed holders broken by the operator.
    breaks: u32,
    /// Killed workers that were inside the critical section.
    died_inside: u32,
}

/// The lock of `kind` at `path`, as every worker and the operator take it.
fn soft_lock(kind: &str, path: &Path) -> SoftLock {
    match kind {
        "soft" => SoftLock::soft(path),
        "marker" => SoftLock::marker(path),
        _ => SoftLock::lease(path).lease_duration(LEASE),
    }
}

/// Contenders on both hosts (two each) take the lock in turn while the
/// conductor stops (`SIGSTOP`, then `SIGCONT` within 1.2 s) and kills
/// (`SIGKILL`) random ones, starting a new worker on the host of each
/// killed one; an independent witness on the guest's own tmpfs counts
/// entries and overlaps. 0 overlaps, no failed wait, every wedge a killed
/// holder's marker that the messages name the remedy of, and the lock
/// taken again after each forced break.
pub(super) fn soft_chaos(clients: &[Client], report: &mut Report) {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    report.fact("all", "soft chaos: seed", seed);
    let mut rng = Rng(seed);
    let hosts: Vec<String> = clients.iter().map(host_name).collect();
    for mount in MOUNTS
        .iter()
        .filter(|m| matches!(m.dir, "v3" | "v42" | "v42a"))
    {
        for kind in ["soft", "marker", "lease"] {
            let name = format!("chaos-{kind}");
            let (on_server, on_client) = fresh(&name, mount);
            let witness = Witness::new(&format!("{name}-{}", mount.dir));
            let lock = on_client.join("lock");
            let spawn = |host: usize| Worker {
                host,
                child: clients[host]
                    .worker(&[
                        "chaos",
                        kind,
                        lock.to_str().unwrap(),
                        witness.0.to_str().unwrap(),
                    ])
                    .spawn()
                    .unwrap(),
            };
            let mut workers: Vec<Worker> = (0..clients.len())
                .flat_map(|h| std::iter::repeat_n(h, PER_HOST))
                .map(spawn)
                .collect();
            let what = format!("{kind} on {}", mount.label);
            let mut tally = Tally::default();
            // The killed workers, as their markers name them: (host, pid).
            let mut killed: Vec<(String, u32)> = Vec::new();
            let operator = Operator {
                clients,
                hosts: &hosts,
                kind,
                lock: &lock,
                truth: &on_server.join("lock"),
            };
            let mut progress = Progress::new(&witness);
            let started = Instant::now();
            while started.elapsed() < CHAOS {
                // The chaos's own rhythm (no wait for anything): the next
                // blow lands 50 to 300 ms after the last.
                std::thread::sleep(Duration::from_millis(50 + rng.below(250)));
                let i = rng.below(workers.len() as u64) as usize;
                let pid = workers[i].child.id() as i32;
                if rng.below(2) == 0 {
                    tally.stops += 1;
                    // SAFETY: kill has no memory effects; the worker is
                    // our unreaped child.
                    unsafe { libc::kill(pid, libc::SIGSTOP) };
                    // How long it stays stopped: the blow itself.
                    std::thread::sleep(Duration::from_millis(100 + rng.below(1_100)));
                    // SAFETY: as above.
                    unsafe { libc::kill(pid, libc::SIGCONT) };
                    progress.reset();
                } else {
                    tally.kills += 1;
                    let mut dead = workers.swap_remove(i);
                    let _ = dead.child.kill();
                    let _ = dead.child.wait();
                    killed.push((hosts[dead.host].clone(), dead.child.id()));
                    // Nobody can enter while its marker stays (no
                    // takeover without the exchange), so the witness's
                    // record of it inside is cleared before any break.
                    let who = format!("{} {}", killed.last().unwrap().0, dead.child.id());
                    if inside(&witness) == Some(who) {
                        fs::remove_file(witness.0.join("inside")).unwrap();
                        tally.died_inside += 1;
                    }
                    workers.push(spawn(dead.host));
                }
                if progress.still() {
                    tally.breaks += operator.unwedge(&killed, &what, report);
                    progress.reset();
                }
            }
            fs::write(witness.0.join("stop"), "").unwrap();
            // Every worker ends after its next turn; wedges left by the
            // last kills are broken as before, looked for whenever no
            // worker has ended for a while.
            let deadline = Instant::now() + super::WORKERS_LIMIT;
            let (tx, rx) = std::sync::mpsc::channel();
            let mut running = workers.len();
            for mut worker in workers {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    let _ = tx.send(worker.child.wait().unwrap());
                });
            }
            while running > 0 {
                assert!(
                    Instant::now() < deadline,
                    "{what}: {running} workers still running"
                );
                match rx.recv_timeout(Duration::from_millis(500)) {
                    Ok(status) => {
                        assert!(status.success(), "{what}: a worker failed: {status}");
                        running -= 1;
                    }
                    Err(_) if progress.still() => {
                        tally.breaks += operator.unwedge(&killed, &what, report);
                        progress.reset();
                    }
                    Err(_) => {}
                }
            }
            let entries = witness.lines("entries").len();
            let overlaps = witness.lines("overlaps");
            let errors = witness.lines("errors");
            report.fact(
                mount.label,
                &format!("{kind} lock under chaos, 2 hosts × {PER_HOST} contenders"),
                format!(
                    "{} overlaps in {entries} entries; {} stops, {} kills ({} inside), {} forced \
                     breaks of killed holders' markers; failed waits {}",
                    overlaps.len(),
                    tally.stops,
                    tally.kills,
                    tally.died_inside,
                    tally.breaks,
                    errors.len()
                ),
            );
            assert!(overlaps.is_empty(), "two holders: {what}: {overlaps:?}");
            assert!(errors.is_empty(), "{what}: {errors:?}");
            // Progress: the lock was taken, and every worker ended (the
            // drain above), whatever the machine's load made of the count.
            assert!(entries > 0, "{what}: no entry");
        }
    }
}

/// The host name of a client host, as its workers' records give it.
fn host_name(client: &Client) -> String {
    let out = client.command("hostname").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Who the witness has inside the critical section, if anyone.
pub(super) fn inside(witness: &Witness) -> Option<String> {
    let mut text = String::new();
    let mut file = match fs::File::open(witness.0.join("inside")) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return None,
        Err(e) => panic!("{e}"),
    };
    file.read_to_string(&mut text).unwrap();
    Some(text)
}

/// Whether the critical section has been entered lately.
struct Progress<'a> {
    witness: &'a Witness,
    entries: usize,
    since: Instant,
}

impl<'a> Progress<'a> {
    fn new(witness: &'a Witness) -> Self {
        Progress {
            witness,
            entries: 0,
            since: Instant::now(),
        }
    }

    fn reset(&mut self) {
        self.entries = self.witness.lines("entries").len();
        self.since = Instant::now();
    }

    /// No entry for [`STILL`].
    fn still(&mut self) -> bool {
        let entries = self.witness.lines("entries").len();
        if entries != self.entries {
            self.entries = entries;
            self.since = Instant::now();
        }
        self.since.elapsed() >= STILL
    }
}

/// The operator of a wedged lock.
struct Operator<'a> {
    clients: &'a [Client],
    hosts: &'a [String],
    kind: &'a str,
    lock: &'a Path,
    /// The lock path on the server's own filesystem.
    truth: &'a Path,
}

impl Operator<'_> {
    /// A lock that nobody took for [`STILL`]: its marker must be a killed
    /// worker's. `swaplock break` on the holder's host says it is gone
    /// and names the forced break; a contender on the other host says
    /// where the holder is and names it too; then the forced break, from
    /// the holder's host. Returns the number of markers broken (0 or 1).
    fn unwedge(&self, killed: &[(String, u32)], what: &str, report: &mut Report) -> u32 {
        let owner = soft_lock(self.kind, self.truth).owner().unwrap();
        let Some(owner) = owner else {
            // Free: the turn was only slow.
            return 0;
        };
        let lock = self.lock.to_str().unwrap();
        let kind = ["--kind", self.kind];
        let (Some(pid), Some(host)) = (owner.pid, owner.host.clone()) else {
            // A worker killed between its create and its write: an empty
            // marker names nobody and is never evicted (I10); nobody
            // alive made it, since no live worker takes 2.5 s to write.
            let (out, said) = self.ask_break(&self.clients[0]);
            if out.status.success() {
                return 1;
            }
            assert!(
                said.contains(&format!("swaplock break --force {lock}")),
                "{what}: {} marker: {said}",
                owner.mode
            );
            self.force(&self.clients[0], what);
            report.line(&format!(
                "nfs note | {what}: broke a {} marker that names nobody",
                owner.mode
            ));
            return 1;
        };
        if !killed.contains(&(host.clone(), pid)) {
            // A live holder, only slow (a loaded machine): no break. One
            // that never lets go fails the drain's deadline instead.
            return 0;
        }
        let (own, other) = match self.hosts.iter().position(|h| *h == host) {
            Some(i) => (&self.clients[i], &self.clients[1 - i]),
            None => panic!("{what}: a holder on an unknown host {host}"),
        };
        let (out, said) = self.ask_break(own);
        assert_eq!(out.status.code(), Some(1), "{what}: break: {said}");
        assert!(said.contains("is gone"), "{what}: {said}");
        assert!(
            said.contains(&format!("swaplock break --force {lock}")),
            "{what}: {said}"
        );
        let out = other
            .command(env!("CARGO_BIN_EXE_swaplock"))
            .args(["run", "-w", "1"])
            .args(kind)
            .args(if self.kind == "lease" {
                &["--lease", "6"][..]
            } else {
                &[][..]
            })
            .args([lock, "true"])
            .output()
            .unwrap();
        let elsewhere = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(255), "{what}: {elsewhere}");
        assert!(
            elsewhere.contains(&host),
            "{what}: names the host: {elsewhere}"
        );
        assert!(
            elsewhere.contains("swaplock break --force"),
            "{what}: {elsewhere}"
        );
        self.force(own, what);
        report.line(&format!(
            "nfs note | {what}: broke the marker of killed pid {pid} on {host}"
        ));
        1
    }
}

impl Operator<'_> {
    /// `swaplock break` (without `--force`) from `client`, with what it
    /// said on its standard error.
    fn ask_break(&self, client: &Client) -> (std::process::Output, String) {
        let out = client
            .command(env!("CARGO_BIN_EXE_swaplock"))
            .args(["break", "--kind", self.kind])
            .arg(self.lock)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        (out, said)
    }

    /// `swaplock break --force` from `client`.
    fn force(&self, client: &Client, what: &str) {
        let out = client
            .command(env!("CARGO_BIN_EXE_swaplock"))
            .args(["break", "--force", "--kind", self.kind])
            .arg(self.lock)
            .output()
            .unwrap();
        assert!(out.status.success(), "{what}: {out:?}");
    }
}

/// A worker of the chaos: takes the lock, enters the critical section
/// (the witness's `inside`, made with its name in one step), leaves and
/// releases, until the conductor says stop.
pub(super) fn chaos_worker(kind: &str, lock: &Path, witness: &Path, who: &str) {
    let lock = soft_lock(kind, lock);
    let own = witness.join(format!("who-{}", std::process::id()));
    fs::write(&own, who).unwrap();
    let inside = witness.join("inside");
    while !witness.join("stop").exists() {
        let guard = match lock.lock() {
            Ok(guard) => guard,
            Err(e) => {
                note(witness, "errors", &format!("{who}: lock: {e}"));
                continue;
            }
        };
        note(witness, "entries", who);
        match fs::hard_link(&own, &inside) {
            Ok(()) => {
                let _ = fs::metadata(lock.path());
                let _ = OpenOptions::new()
                    .create(true)
                    .truncate(true)
                    .write(true)
                    .open(lock.path().with_extension("work"));
                fs::remove_file(&inside).unwrap();
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                let occupant = fs::read_to_string(&inside).unwrap_or_default();
                note(witness, "overlaps", &format!("{who} beside {occupant}"));
            }
            Err(e) => panic!("{e}"),
        }
        if let Err(e) = guard.release() {
            note(witness, "errors", &format!("{who}: release: {e}"));
        }
    }
}

/// The lease of the attribute-cache check, its heartbeat (short, so that
/// the cache's delay shows beside it), and how long it is watched.
pub(super) const CACHE_LEASE: Duration = Duration::from_secs(6);
pub(super) const CACHE_BEAT: Duration = Duration::from_secs(1);
const CACHE_WATCH: Duration = Duration::from_secs(20);

/// The attribute cache against a lease's judgement (PROTOCOL 13.5): a
/// lease holder on one host refreshes its marker every second,
/// and a watcher on the other host looks at it every 50 ms, as a
/// contender's unchanged-marker watch does (`lstat`: mtime, ctime and
/// inode), recording the longest time it saw no change. That is the
/// heartbeat interval plus the cache's delay *C*; a contender would judge
/// the live lease expired only if it reached the lease. Every mount at
/// once, so the check costs one watch.
pub(super) fn lease_cache(clients: &[Client], report: &mut Report) {
    let [c1, c2] = clients else {
        panic!("two client hosts")
    };
    let interval = CACHE_BEAT;
    let runs: Vec<_> = MOUNTS
        .iter()
        .filter(|m| matches!(m.dir, "v3" | "v42" | "v3a" | "v42a"))
        .map(|mount| {
            let (_, on_client) = fresh("lease-cache", mount);
            let lock = on_client.join("lock");
            let holder = c1.holding_with(&["hold", "lease", lock.to_str().unwrap()]);
            let watcher = c2
                .worker(&[
                    "watch",
                    lock.to_str().unwrap(),
                    &CACHE_WATCH.as_millis().to_string(),
                ])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (mount, holder, watcher)
        })
        .collect();
    for (mount, mut holder, watcher) in runs {
        let out = watcher.wait_with_output().unwrap();
        drop(holder.stdin.take());
        let _ = holder.wait();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let longest: u64 = stdout
            .lines()
            .find_map(|l| l.strip_prefix("longest unchanged ms: "))
            .unwrap_or_else(|| panic!("{}: {out:?}", mount.label))
            .parse()
            .unwrap();
        let longest = Duration::from_millis(longest);
        report.fact(
            mount.label,
            &format!(
                "a {CACHE_LEASE:?} lease refreshed every {interval:?}: the longest the other \
                 host saw its marker unchanged"
            ),
            format!(
                "{:.1} s (cache delay about {:.1} s)",
                longest.as_secs_f64(),
                longest.saturating_sub(interval).as_secs_f64()
            ),
        );
        assert!(
            longest < CACHE_LEASE,
            "{}: a live lease would be judged expired: unchanged for {longest:?}",
            mount.label
        );
        if mount.no_cache {
            assert!(
                longest < interval + Duration::from_secs(1),
                "{}: no cache, yet unchanged for {longest:?}",
                mount.label
            );
        }
    }
}

/// The watcher of [`lease_cache`]: `lstat`s `lock` every 50 ms for `ms`
/// and prints the longest time its (mtime, ctime, inode) stayed the same.
pub(super) fn watch(lock: &Path, ms: u64) {
    use std::os::unix::fs::MetadataExt;
    let key = |m: &fs::Metadata| {
        (
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
            m.ino(),
        )
    };
    let end = Instant::now() + Duration::from_millis(ms);
    let mut last = None;
    let mut since = Instant::now();
    let mut longest = Duration::ZERO;
    while Instant::now() < end {
        let seen = fs::symlink_metadata(lock).ok().map(|m| key(&m));
        if seen != last {
            last = seen;
            since = Instant::now();
        }
        longest = longest.max(since.elapsed());
        // The watch's own interval, as a contender polls: a measurement's
        // sampling, not a wait for anything.
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("longest unchanged ms: {}", longest.as_millis());
}
