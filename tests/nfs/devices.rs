//! The filesystems devices use, in the same guest (its kernel has them
//! where this host's may not): vfat (SD cards, USB sticks: no hard links,
//! 2-second times, inode numbers from a name's place, names without case)
//! and f2fs (Android's `/data`), each a disk of its own mounted in the
//! conductor's namespace. Every kind's acquire and release once, its
//! answer reported (works, or the error that names what the filesystem
//! lacks), and the kinds that work under contention: four processes at
//! once, every critical section witnessed on the guest's tmpfs; and the
//! soft kinds under chaos, random contenders stopped or killed.

use super::chaos::{inside, Rng};
use super::{finish, Report, Witness, WORKER};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The filesystems and where the guest's init mounted them.
const DEVICES: [(&str, &str); 2] = [("vfat", "/mnt/dev-vfat"), ("f2fs", "/mnt/dev-f2fs")];

/// Every file kind `swaplock run` takes.
const KINDS: [&str; 7] = ["fcntl", "flock", "soft", "marker", "lease", "rw", "strict"];

/// Critical sections per process under contention.
const ROUNDS: usize = 10;
/// Processes under contention.
const PROCESSES: usize = 4;
/// How long the chaos lasts on each filesystem and soft kind.
const CHAOS: Duration = Duration::from_secs(4);

/// Whether `kind` is expected to work on `fs`, and otherwise the words
/// its error must use: the read-write and strict locks commit by hard
/// links, which vfat has none of, and the strict lock sets its
/// directories' modes, which vfat keeps none of.
fn expected(fs: &str, kind: &str) -> Option<&'static str> {
    match (fs, kind) {
        ("vfat", "rw") => Some("no hard links"),
        ("vfat", "strict") => Some("keeps no Unix modes"),
        _ => None,
    }
}

/// This test executable as a worker given `spec`, in this namespace.
fn worker(spec: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(super::WORKER_ARGS)
        .env(WORKER, spec.join("\u{1f}"))
        .stdin(Stdio::null());
    cmd
}

pub(super) fn filesystems(_: &[super::Client], report: &mut Report) {
    let swaplock = env!("CARGO_BIN_EXE_swaplock");
    for (fs, dir) in DEVICES {
        // What swaplock judges of the filesystem (its exchange, its
        // locks' reach), as `status` says it.
        let status = Command::new(swaplock)
            .args(["status", "--kind", "soft"])
            .arg(Path::new(dir).join("status.lock"))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&status.stdout);
        let judged = said.lines().find_map(|l| l.strip_prefix("filesystem: "));
        report.fact(fs, "status: filesystem", judged.unwrap_or("(none)"));
        assert!(judged.is_some_and(|j| j.starts_with(fs)), "{said}");
        let mut working = Vec::new();
        for kind in KINDS {
            let lock = Path::new(dir).join(format!("once-{kind}.lock"));
            let out = Command::new(swaplock)
                .args(["run", "--kind", kind, "-w", "10"])
                .arg(&lock)
                .args(["sh", "-c", "echo ran"])
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            let ran = out.status.success() && out.stdout == b"ran\n";
            let said = match ran {
                true => "works".to_owned(),
                false => err.lines().next().unwrap_or("").to_owned(),
            };
            report.fact(fs, &format!("{kind}: one acquire and release"), &said);
            match expected(fs, kind) {
                None => assert!(ran, "{kind} on {fs}: {err}"),
                Some(words) => {
                    assert!(!ran, "{kind} on {fs} worked");
                    assert!(err.contains(words), "{kind} on {fs}: {err}");
                }
            }
            if ran && kind != "rw" && kind != "strict" {
                working.push(kind);
            }
        }
        for kind in working {
            let witness = Witness::new(&format!("dev-{fs}-{kind}"));
            let lock = Path::new(dir).join(format!("contended-{kind}.lock"));
            let (lock, w) = (lock.to_str().unwrap(), witness.0.to_str().unwrap());
            let rounds = ROUNDS.to_string();
            let workers: Vec<Child> = (0..PROCESSES)
                .map(|_| {
                    let spec: Vec<&str> = match kind {
                        "fcntl" | "flock" => vec![kind, lock, lock, w, &rounds],
                        _ => vec!["soft", kind, lock, w, &rounds],
                    };
                    worker(&spec).spawn().unwrap()
                })
                .collect();
            let what = format!("{kind} on {fs}");
            finish(workers, &what);
            let entries = witness.lines("entries").len();
            let overlaps = witness.lines("overlaps").len();
            let orphans = witness.lines("orphans").len();
            let errors = witness.lines("errors");
            report.fact(
                fs,
                &format!("{kind}, {PROCESSES} processes × {ROUNDS}: overlaps"),
                format!(
                    "{overlaps} of {entries}; removed files held {orphans}; failed {}",
                    errors.len()
                ),
            );
            assert_eq!(overlaps, 0, "two holders: {what}");
            assert_eq!(orphans, 0, "{what}");
            assert!(errors.is_empty(), "{what}: {errors:?}");
            assert_eq!(entries, PROCESSES * ROUNDS, "{what}");
        }
        for kind in ["soft", "marker", "lease"] {
            chaos(fs, dir, kind, report);
        }
    }
}

/// Four contenders of `kind` take the lock on `dir` in turn while the
/// conductor stops (`SIGSTOP`, then `SIGCONT` within 1.2 s) and kills
/// (`SIGKILL`) random ones for [`CHAOS`], starting a new one for each
/// killed: 0 overlaps, no failed wait, and every contender ends within
/// the workers' bound once told to stop (a killed holder's marker, on this
/// host, is taken over: no wedge).
fn chaos(fs: &str, dir: &str, kind: &str, report: &mut Report) {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut rng = Rng(seed);
    let witness = Witness::new(&format!("dev-chaos-{fs}-{kind}"));
    let lock = Path::new(dir).join(format!("chaos-{kind}.lock"));
    let (lock, w) = (lock.to_str().unwrap(), witness.0.to_str().unwrap());
    let spawn = || worker(&["chaos", kind, lock, w]).spawn().unwrap();
    let mut workers: Vec<Child> = (0..PROCESSES).map(|_| spawn()).collect();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let (mut stops, mut kills, mut died_inside) = (0, 0, 0);
    let started = Instant::now();
    while started.elapsed() < CHAOS {
        // The chaos's own rhythm (no wait for anything): the next blow
        // lands 50 to 300 ms after the last.
        std::thread::sleep(Duration::from_millis(50 + rng.below(250)));
        let i = rng.below(workers.len() as u64) as usize;
        let pid = workers[i].id() as i32;
        if rng.below(2) == 0 {
            stops += 1;
            // SAFETY: kill has no memory effects; the worker is our
            // unreaped child.
            unsafe { libc::kill(pid, libc::SIGSTOP) };
            // How long it stays stopped: the blow itself.
            std::thread::sleep(Duration::from_millis(100 + rng.below(1_100)));
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGCONT) };
        } else {
            kills += 1;
            let mut dead = workers.swap_remove(i);
            let _ = dead.kill();
            let _ = dead.wait();
            // The witness's record of it inside is cleared: the next
            // holder takes its marker over.
            if inside(&witness) == Some(format!("{} {}", host.trim(), dead.id())) {
                std::fs::remove_file(witness.0.join("inside")).unwrap();
                died_inside += 1;
            }
            workers.push(spawn());
        }
    }
    std::fs::write(witness.0.join("stop"), "").unwrap();
    // Each ends after its next turn; one still waiting after the bound is
    // wedged (`finish` kills it and fails).
    finish(workers, &format!("{kind} under chaos on {fs}"));
    let entries = witness.lines("entries").len();
    let overlaps = witness.lines("overlaps");
    let errors = witness.lines("errors");
    report.fact(
        fs,
        &format!("{kind} under chaos, {PROCESSES} contenders, {CHAOS:?}"),
        format!(
            "{} overlaps in {entries} entries; {stops} stops, {kills} kills ({died_inside} \
             inside); failed waits {}; seed {seed}",
            overlaps.len(),
            errors.len()
        ),
    );
    assert!(
        overlaps.is_empty(),
        "two holders: {kind} on {fs}: {overlaps:?}"
    );
    assert!(errors.is_empty(), "{kind} on {fs}: {errors:?}");
    assert!(entries > 0, "{kind} on {fs}: no entry");
}
