//! The filesystems devices use, in the same guest (its kernel has them
//! where this host's may not): vfat (SD cards, USB sticks: no hard links,
//! 2-second times, inode numbers from a name's place, names without case)
//! and f2fs (Android's `/data`), each a disk of its own mounted in the
//! conductor's namespace. Every kind's acquire and release once, its
//! answer reported (works, or the error that names what the filesystem
//! lacks), and the kinds that work under contention: four processes at
//! once, every critical section witnessed on the guest's tmpfs.

use super::{finish, Report, Witness, WORKER};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The filesystems and where the guest's init mounted them.
const DEVICES: [(&str, &str); 2] = [("vfat", "/mnt/dev-vfat"), ("f2fs", "/mnt/dev-f2fs")];

/// Every file kind `swaplock run` takes.
const KINDS: [&str; 7] = ["fcntl", "flock", "soft", "marker", "lease", "rw", "strict"];

/// Critical sections per process under contention.
const ROUNDS: usize = 10;
/// Processes under contention.
const PROCESSES: usize = 4;

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
    }
}
