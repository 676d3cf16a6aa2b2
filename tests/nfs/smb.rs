//! The kernel's own SMB client (cifs, SMB 3.1.1) between the two client
//! hosts of the NFS guest: the server shares `/srv/smb` with smbd, and each
//! host mounts it at `/mnt/smb` (the default caches: `actimeo=1`) and at
//! `/mnt/smba` (`actimeo=0`); c1 also at `/mnt/smbnobrl` (`nobrl`: its
//! byte-range locks stay on the client). tests/nfs/guest builds it; these
//! are scenarios of the conductor there.

use super::{judged, Client, Report, Witness, PEERS, RACES};
use crate::common::netfs::{errno_name, measure, monotonic_ns, Session};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// The share's directory on the server.
const SHARE: &str = "/srv/smb";

/// A cifs mount every client host has.
struct SmbMount {
    /// Its directory under `/mnt`.
    dir: &'static str,
    /// What the facts call it.
    label: &'static str,
    /// Mounted `actimeo=0`.
    no_cache: bool,
}

const MOUNTS: &[SmbMount] = &[
    SmbMount {
        dir: "smb",
        label: "SMB3 cifs",
        no_cache: false,
    },
    SmbMount {
        dir: "smba",
        label: "SMB3 cifs actimeo=0",
        no_cache: true,
    },
];

/// How long a group of workers on cifs may take before it is taken for
/// wedged (kept short: each run of [`SMB_ROUNDS`] takes seconds).
const SMB_LIMIT: Duration = Duration::from_secs(20);

/// Waits for every worker within `limit`, killing those still running
/// then: whether all ended, each successfully.
fn finish(workers: Vec<Child>, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut all = true;
    for mut worker in workers {
        loop {
            match worker.try_wait().unwrap() {
                Some(status) => {
                    all &= status.success();
                    break;
                }
                None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                None => {
                    let _ = worker.kill();
                    let _ = worker.wait();
                    all = false;
                    break;
                }
            }
        }
    }
    all
}

/// A directory of its own on the share for `name` and the mount `dir`:
/// its path on the server and on the client hosts.
fn fresh(name: &str, dir: &str) -> (PathBuf, PathBuf) {
    let sub = format!("{name}-{dir}");
    let on_server = Path::new(SHARE).join(&sub);
    fs::create_dir(&on_server).unwrap();
    (on_server, Path::new("/mnt").join(dir).join(sub))
}

/// How long after `change` (a request to `a`) the other host's `b` sees
/// its effect on `name` in `stat` (`seen` says whether an answer shows
/// it), within `limit`: milliseconds, or `None`.
fn delay(
    a: &mut Session,
    b: &mut Session,
    change: &str,
    name: &str,
    seen: impl Fn(&str) -> bool,
    limit: Duration,
) -> Option<f64> {
    assert_eq!(a.ask(change), "ok", "{change}");
    let at = monotonic_ns();
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if seen(&b.ask(&format!("stat {name}"))) {
            return Some((monotonic_ns() - at) as f64 / 1e6);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

/// The names in the server's directory `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// What the kernel's cifs client shows between two client hosts: the
/// figures of the NFS facts, and how another host's create and unlink
/// show, what an unlink or rename of a file another host has open does,
/// and whether `nobrl` keeps locks on the client.
pub(crate) fn facts(clients: &[Client], report: &mut Report) {
    let [c1, c2] = clients else {
        panic!("two client hosts")
    };
    for mount in MOUNTS {
        let (on_server, on_client) = fresh("facts", mount.dir);
        let mut a = c1.session(&on_client);
        let mut b = c2.session(&on_client);
        let facts = measure(&on_server, &mut a, &mut b, RACES);
        let m = mount.label;
        let mut fact = |what: &str, value: String| report.fact(m, what, value);
        fact(
            "O_EXCL race: both created",
            format!("{} of {RACES}", facts.doubles),
        );
        let mut losers: Vec<_> = facts.losers.iter().collect();
        losers.sort();
        fact("O_EXCL race: loser's error", format!("{losers:?}"));
        fact("renameat2(RENAME_EXCHANGE)", facts.exchange.clone());
        fs::write(on_server.join("x3"), "3").unwrap();
        let noreplace = errno_name(&a.ask("noreplace x1 x3"));
        fact("renameat2(RENAME_NOREPLACE) onto a name", noreplace.clone());
        let noreplace_free = errno_name(&a.ask("noreplace x1 x4"));
        fact(
            "renameat2(RENAME_NOREPLACE) onto no name",
            noreplace_free.clone(),
        );
        fact("flock: both hosts hold it", facts.flock_both.to_string());
        fact("fcntl: both hosts hold it", facts.fcntl_both.to_string());
        fact(
            "st_ino differs between hosts",
            format!("{} of 4", facts.ino_differs),
        );
        fact("mtime granularity", facts.granularity().into());
        fact(
            "the other host's stat shows a new mtime at once",
            facts.other_sees_mtime.to_string(),
        );

        // Another host's create and unlink, after this host looked.
        let limit = Duration::from_secs(10);
        let show =
            |d: Option<f64>| d.map_or(format!("not within {limit:?}"), |ms| format!("{ms:.0} ms"));
        assert!(b.ask("stat v1").starts_with("err"), "v1 is not there yet");
        let created = delay(
            &mut a,
            &mut b,
            "write v1 x",
            "v1",
            |s| !s.starts_with("err"),
            limit,
        );
        fact("another host's create shows in stat after", show(created));
        let removed = delay(
            &mut a,
            &mut b,
            "unlink v1",
            "v1",
            |s| s.starts_with("err"),
            limit,
        );
        fact("another host's unlink shows in stat after", show(removed));

        // An open file removed or renamed over by the other host.
        assert_eq!(a.ask("write o1 x"), "ok");
        assert_eq!(b.ask("open o1"), "ok");
        let unlink = errno_name(&a.ask("unlink o1"));
        let after = listing(&on_server);
        let stat = errno_name(&a.ask("stat o1"));
        let stat = stat.split(' ').next().unwrap_or("").to_owned();
        b.ask("close");
        let closed = listing(&on_server);
        let left = |names: &[String]| {
            let left: Vec<&String> = names
                .iter()
                .filter(|n| n.contains("o1") || n.starts_with('.'))
                .collect();
            format!("{left:?}")
        };
        fact(
            "unlink of a file the other host has open",
            format!(
                "{unlink}; on the server then {}, its stat here {}; after the close {}",
                left(&after),
                if stat == "err" { "fails".into() } else { stat },
                left(&closed)
            ),
        );
        assert_eq!(a.ask("write o2 x"), "ok");
        assert_eq!(a.ask("write o3 y"), "ok");
        assert_eq!(b.ask("open o2"), "ok");
        let rename = errno_name(&a.ask("rename o3 o2"));
        b.ask("close");
        fact("rename over a file the other host has open", rename.clone());

        assert_eq!((facts.doubles, facts.neither), (0, 0), "{m}: {facts:?}");
        assert!(facts.losers.keys().all(|e| e == "EEXIST"), "{m}: {facts:?}");
        assert!(!facts.flock_both && !facts.fcntl_both, "{m}: {facts:?}");
        assert_eq!(facts.ino_differs, 0, "{m}: {facts:?}");
        if mount.no_cache {
            assert!(facts.other_sees_mtime, "{m}: {facts:?}");
        }
    }

    // nobrl on c1: its locks stay there, and c2's lock does not see them.
    let (on_server, _) = fresh("facts", "smbnobrl");
    fs::write(on_server.join("n.lock"), "").unwrap();
    let mut a = c1.session(&Path::new("/mnt/smbnobrl").join("facts-smbnobrl"));
    let mut b = c2.session(&Path::new("/mnt/smb").join("facts-smbnobrl"));
    for how in ["fcntl", "flock"] {
        assert_eq!(a.ask(&format!("{how} n.lock")), "ok", "{how} on nobrl");
        let both = b.ask(&format!("{how} n.lock")) == "ok";
        a.ask("unlock");
        b.ask("unlock");
        report.fact(
            "SMB3 cifs nobrl",
            &format!("{how}: the other host holds it too"),
            both,
        );
        assert!(both, "nobrl: {how} stays on the client");
    }
}

/// Who takes the lock in the delete-on-release runs on cifs, on which
/// mount: `FileLock::new` as a classic lock (as where the kernel has no
/// open file description locks). `flock` and an open file description
/// `fcntl` lock are refused there.
const RUNS: &[(&str, &str)] = &[("classic", "smb"), ("classic", "smba")];

/// Critical sections per worker on cifs, whose waits are slow (a
/// hand-over takes about half a second).
const SMB_ROUNDS: usize = 8;

/// The delete-on-release pattern on cifs, two hosts with two holders each
/// (as on NFS): every critical section is entered alone, no holder holds a
/// file the share no longer names, and no wait fails. The server keeps a
/// removed file's name while another handle has it open (delete pending),
/// and opens of it fail with `ENOENT` meanwhile (measured with removals:
/// 10 to 54 of 60 waits failed), so a guard's `remove` there releases the
/// lock and leaves the file. The locks an open file description owns are
/// refused (two processes of one host held them at once: `FileLock::new`'s
/// open file description lock in 10 of 60 critical sections in one run,
/// `FileLock::flock` in 1 of 32 with `actimeo=0`, 0 in other runs), and so
/// is a kernel lock on a `nobrl` mount, each naming the cause.
pub(crate) fn kernel_locks(clients: &[Client], report: &mut Report) {
    for &(peer, dir) in RUNS {
        let mount = MOUNTS.iter().find(|m| m.dir == dir).unwrap();
        let label = PEERS.iter().find(|p| p.0 == peer).unwrap().1;
        let name = format!("delete-{peer}");
        let (on_server, on_client) = fresh(&name, mount.dir);
        let witness = Witness::new(&format!("{name}-{}", mount.dir));
        let truth = on_server.join("lock");
        let lock = on_client.join("lock");
        let workers: Vec<Child> = clients
            .iter()
            .flat_map(|c| [c, c])
            .map(|c| {
                let spec = [
                    peer,
                    lock.to_str().unwrap(),
                    truth.to_str().unwrap(),
                    witness.0.to_str().unwrap(),
                    &SMB_ROUNDS.to_string(),
                ];
                let mut worker = c.worker(&spec);
                if peer == "classic" {
                    worker.env("SWAPLOCK_FCNTL_OFD", "0");
                }
                worker.spawn().unwrap()
            })
            .collect();
        let ended = finish(workers, SMB_LIMIT);
        let entries = witness.lines("entries").len();
        let overlaps = witness.lines("overlaps").len();
        let orphans = witness.lines("orphans").len();
        let errors = witness.lines("errors");
        let mut fact = |what: &str, value: String| {
            report.fact(
                mount.label,
                &format!("{label}, delete on release: {what}"),
                value,
            )
        };
        fact("overlaps", format!("{overlaps} of {entries}"));
        fact("removed files held", format!("{orphans} of {entries}"));
        let first: Vec<&String> = errors.iter().take(2).collect();
        fact(
            "failed waits",
            format!(
                "{} {first:?}; every worker done within {SMB_LIMIT:?}: {ended}",
                errors.len(),
            ),
        );
        let what = format!("{label} on {}", mount.label);
        assert_eq!((overlaps, orphans), (0, 0), "two holders: {what}");
        assert!(errors.is_empty(), "{what}: {errors:?}");
        assert!(entries > 0 && truth.exists(), "{what}: the lock file stays");
    }
    fresh("refused", "smb");
    for (kind, label) in [
        ("fcntl", "FileLock::new (open file description lock)"),
        ("flock", "FileLock::flock"),
    ] {
        let answer = judged(&clients[0], kind, Path::new("/mnt/smb/refused-smb/lock"));
        report.fact("SMB3 cifs", label, &answer);
        assert!(
            answer.contains("an open file description owns"),
            "{label}: {answer}"
        );
    }
    fresh("refused", "smbnobrl");
    let path = Path::new("/mnt/smbnobrl/refused-smbnobrl/lock");
    for kind in ["fcntl", "flock"] {
        let answer = judged(&clients[0], kind, path);
        report.fact("SMB3 cifs nobrl", &format!("{kind} lock"), &answer);
        assert!(
            answer.contains("this client mount only") && answer.contains("nobrl"),
            "nobrl: {kind}: {answer}"
        );
    }
}

/// The soft kinds on cifs are refused before anything is made: the
/// server keeps a removed marker's name while any client has it open
/// (delete pending), refusing every open of it, so a release fails and the
/// contenders stall (measured with the refusal lifted: the soft kind's four
/// holders made no entry in 20 s; marker and lease releases failed with
/// `ENOENT`). The refusal names the cause.
pub(crate) fn soft_locks(clients: &[Client], report: &mut Report) {
    let (on_server, on_client) = fresh("soft", "smb");
    for kind in ["soft", "marker", "lease"] {
        let lock = on_client.join(format!("{kind}.lock"));
        let out = clients[0]
            .command(env!("CARGO_BIN_EXE_swaplock"))
            .args(["run", "--kind", kind, "-w", "2"])
            .arg(&lock)
            .arg("true")
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        report.fact("SMB3 cifs", &format!("{kind} lock"), said.trim());
        assert!(!out.status.success(), "{kind}: {out:?}");
        assert!(said.contains("delete pending"), "{kind}: {said}");
    }
    assert_eq!(listing(&on_server), Vec::<String>::new(), "nothing made");
}

/// `swaplock status` on a cifs mount names SMB and whether its kernel
/// locks reach other hosts.
pub(crate) fn status(clients: &[Client], report: &mut Report) {
    let c1 = &clients[0];
    for (mount, says) in [
        ("smb", "fcntl locks reach all hosts"),
        ("smbnobrl", "fcntl locks reach this client only"),
    ] {
        let line = super::status_line(c1, mount, report);
        assert!(line.contains("SMB") && line.contains(says), "{line}");
    }
}
