//! The contention curves (`cargo bench --bench locks -- --curves`): N
//! processes hammer one lock, each looping acquire, a tiny critical
//! section, release, for a fixed wall time. For each kind, beside raw
//! `flock(2)` and Python filelock 4.2.11's classes: the throughput (cycles
//! a second, all processes together), the wait from asking to holding (p50
//! and p99 over every cycle of every process), and Jain's fairness index
//! over the processes' cycle counts (1 when all ran as many cycles, 1/N
//! when one ran them all).
//!
//! The processes are this bench again (`--child curve KIND ...`) or Python
//! running `curve_child.py`. They start together: each reads its standard
//! input, one pipe shared by all, to its end, which comes when the bench
//! closes the pipe's only writer once every process has said it is ready.
//!
//! The critical section is the overlap witness, the same in every process:
//! an exclusive create (`O_EXCL`) of a file in a directory of its own (not
//! the lock's, whose changes wake soft waiters) and its unlink. A create
//! that finds the file there, or an unlink that does not, is two holders
//! at once: the process exits with [`OVERLAP`] and the run fails, naming
//! the kind.
//!
//! `--quick` runs 2 and 32 processes for a short while, the guarded kinds
//! in [`QUICK_ROUNDS`] rounds. Every run ends with the contention guard: a
//! soft kind whose throughput with 32 processes is under [`GUARD_RATIO`]
//! of its throughput with 2 (the median of the rounds' ratios) fails it
//! (exit status 1). `--only KEY,KEY` runs those rows alone; `--witness-check`
//! runs processes that take no lock, and passes if the witness catches
//! them. A run whose processes are still at work [`WEDGED_AFTER`] after its
//! end fails as a wedge.

use crate::linux::{c_path, flock_lock, python, soft_lock};
use std::ffi::CString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use swaplock::rw::SoftRwLock;
use swaplock::{FileLock, FileLockGuard, SoftLock, SoftLockGuard, SoftRwGuard};

/// The contention guard: a soft kind's throughput with [`GUARD_MANY`]
/// processes must be at least this share of its throughput with
/// [`GUARD_FEW`]. A waiter's wake-up that serves one of many waiters
/// keeps it; one that wakes them all to race for the marker does not.
pub(crate) const GUARD_RATIO: f64 = 0.5;
/// The guard's few processes.
const GUARD_FEW: usize = 2;
/// The guard's many processes.
const GUARD_MANY: usize = 32;
/// The kinds the guard checks: the soft lock's.
const GUARDED: [&str; 3] = ["soft", "marker", "lease"];

/// How long past the end of its time a run's processes may take to
/// finish (filelock's `SoftReadWriteLock` writers, 128 of them, took up to
/// 190 s to be served on a busy machine) before they count as wedged:
/// killed, the run fails.
const WEDGED_AFTER: Duration = Duration::from_secs(600);

/// The exit status of a process that found another holder inside.
const OVERLAP: i32 = 3;

/// The processes on one lock: the full run's, and the quick run's.
const FULL: [usize; 5] = [1, 2, 8, 32, 128];
const QUICK: [usize; 2] = [GUARD_FEW, GUARD_MANY];

/// The seconds each run of N processes lasts: the full run's, the quick
/// run's.
const FULL_SECONDS: f64 = 2.0;
const QUICK_SECONDS: f64 = 0.5;
/// The rounds of the quick run's guarded rows, whose median it keeps.
const QUICK_ROUNDS: usize = 3;

/// A row of the tables.
struct Row {
    /// As the tables name it.
    name: &'static str,
    /// As the child processes and the guard name it.
    key: &'static str,
    /// The filelock class its processes run; `None`: this bench's own.
    class: Option<&'static str>,
    /// The key of the row its throughput is compared with.
    peer: Option<&'static str>,
}

const fn row(
    name: &'static str,
    key: &'static str,
    class: Option<&'static str>,
    peer: Option<&'static str>,
) -> Row {
    Row {
        name,
        key,
        class,
        peer,
    }
}

const ROWS: [Row; 15] = [
    row("`FileLock::new` (fcntl)", "fcntl", None, Some("raw-flock")),
    row("`FileLock::flock`", "flock", None, Some("raw-flock")),
    row("`SoftLock::soft`", "soft", None, Some("py-soft")),
    row("`SoftLock::marker`", "marker", None, Some("py-marker")),
    row("`SoftLock::lease`", "lease", None, Some("py-lease")),
    row(
        "`SoftLock::soft`, not durable",
        "soft-v",
        None,
        Some("py-soft"),
    ),
    row(
        "`SoftLock::marker`, not durable",
        "marker-v",
        None,
        Some("py-marker"),
    ),
    row(
        "`SoftLock::lease`, not durable",
        "lease-v",
        None,
        Some("py-lease"),
    ),
    row("`SoftRwLock::write`", "rw", None, Some("py-rw")),
    row("raw `flock(2)`", "raw-flock", None, None),
    row("filelock `FileLock`", "py-flock", Some("FileLock"), None),
    row(
        "filelock `SoftFileLock`",
        "py-soft",
        Some("SoftFileLock"),
        None,
    ),
    row(
        "filelock `MarkerSoftFileLock`",
        "py-marker",
        Some("MarkerSoftFileLock"),
        None,
    ),
    row(
        "filelock `SoftFileLease`",
        "py-lease",
        Some("SoftFileLease"),
        None,
    ),
    row(
        "filelock `SoftReadWriteLock` (write)",
        "py-rw",
        Some("SoftReadWriteLock"),
        None,
    ),
];

/// The rows measured together (see `run`), each with its peer; every row
/// is in one.
const GROUPS: [&[&str]; 5] = [
    &["fcntl", "flock", "raw-flock", "py-flock"],
    &["soft", "soft-v", "py-soft"],
    &["marker", "marker-v", "py-marker"],
    &["lease", "lease-v", "py-lease"],
    &["rw", "py-rw"],
];

/// No lock at all: `--witness-check` runs it to see the witness catch
/// two holders at once.
const UNLOCKED: Row = row("no lock", "none", None, None);

/// A lock of a child process, made once, taken in every cycle (one per
/// process: the variants' sizes do not matter).
#[allow(clippy::large_enum_variant)]
enum Lock {
    Kernel(FileLock),
    Soft(SoftLock),
    Rw(SoftRwLock),
    /// Raw `flock(2)`: the syscall floor's sequence (`kernel_floor`).
    Raw(CString),
    /// Nothing ([`UNLOCKED`]).
    None,
}

/// A held [`Lock`] (one at a time, kept unboxed: no allocation of the
/// bench's own inside a cycle).
#[allow(clippy::large_enum_variant)]
enum Held {
    Kernel(FileLockGuard),
    Soft(SoftLockGuard),
    Rw(SoftRwGuard),
    Raw(i32),
    None,
}

impl Lock {
    fn of(key: &str, path: &Path) -> Result<Lock, String> {
        Ok(match key {
            "fcntl" => Lock::Kernel(FileLock::new(path)),
            "flock" => Lock::Kernel(FileLock::flock(path)),
            "soft" | "marker" | "lease" => Lock::Soft(soft_lock(key, path)),
            // Each soft kind without its syncs, as filelock writes its
            // markers (`SoftLock::durable(false)`).
            "soft-v" | "marker-v" | "lease-v" => {
                Lock::Soft(soft_lock(&key[..key.len() - 2], path).durable(false))
            }
            "rw" => Lock::Rw(SoftRwLock::new(path)),
            "raw-flock" => Lock::Raw(c_path(path)),
            "none" => Lock::None,
            _ => return Err(format!("no kind {key:?} in the curves")),
        })
    }

    fn hold(&self) -> std::io::Result<Held> {
        Ok(match self {
            Lock::Kernel(l) => Held::Kernel(l.lock()?),
            Lock::Soft(l) => Held::Soft(l.lock()?),
            Lock::Rw(l) => Held::Rw(l.write()?),
            Lock::None => Held::None,
            Lock::Raw(p) => {
                // SAFETY: plain syscalls on a descriptor this function
                // owns until the release, with buffers that outlive them.
                unsafe {
                    let fd = libc::open(
                        p.as_ptr(),
                        libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC,
                        0o600,
                    );
                    if fd < 0 || flock_lock(fd, true) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    let mut st: libc::stat = std::mem::zeroed();
                    libc::fstat(fd, &mut st);
                    libc::stat(p.as_ptr(), &mut st);
                    Held::Raw(fd)
                }
            }
        })
    }
}

impl Held {
    fn release(self) -> std::io::Result<()> {
        match self {
            Held::Kernel(g) => g.release(),
            Held::Soft(g) => g.release(),
            Held::Rw(g) => g.release(),
            Held::None => Ok(()),
            Held::Raw(fd) => {
                // SAFETY: the descriptor `hold` opened, closed once here.
                unsafe {
                    flock_lock(fd, false);
                    libc::close(fd);
                }
                Ok(())
            }
        }
    }
}

/// The critical section: the witness made exclusively and removed; an
/// error names what shows two holders at once.
fn witness(path: &CString) -> Result<(), &'static str> {
    // SAFETY: plain syscalls with a path that outlives them; the descriptor
    // is closed at once.
    unsafe {
        let fd = libc::open(
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
            0o600,
        );
        if fd < 0 {
            return Err(match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EEXIST) => "was there already",
                _ => "could not be made",
            });
        }
        libc::close(fd);
        if libc::unlink(path.as_ptr()) != 0 {
            return Err(match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::ENOENT) => "was gone before its unlink",
                _ => "could not be removed",
            });
        }
    }
    Ok(())
}

/// A child process of the curves: `KIND LOCK WITNESS SECONDS`. Says it is
/// ready, waits at the barrier (its standard input's end), loops, prints
/// its count of cycles and every wait in nanoseconds; its exit status.
pub(crate) fn child(args: &[String]) -> i32 {
    let [key, lock, witness_path, seconds] = args else {
        eprintln!("usage: --child curve KIND LOCK WITNESS SECONDS");
        return 2;
    };
    let lock = match Lock::of(key, Path::new(lock)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let Ok(seconds) = seconds.parse::<f64>() else {
        eprintln!("the seconds must be a number, not {seconds:?}");
        return 2;
    };
    let witness_c = c_path(Path::new(witness_path));
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready").unwrap();
    out.flush().unwrap();
    let mut rest = Vec::new();
    std::io::stdin().read_to_end(&mut rest).unwrap();
    let began = Instant::now();
    let deadline = began + Duration::from_secs_f64(seconds);
    let mut waits = Vec::new();
    let mut count = 0u64;
    loop {
        let asked = Instant::now();
        if asked >= deadline {
            break;
        }
        let held = match lock.hold() {
            Ok(h) => h,
            Err(e) => {
                eprintln!("{key}: the lock failed: {e}");
                return 1;
            }
        };
        let got = Instant::now();
        if let Err(what) = witness(&witness_c) {
            eprintln!("{key}: two holders at once: the witness {witness_path} {what}");
            std::process::exit(OVERLAP);
        }
        if let Err(e) = held.release() {
            eprintln!("{key}: the release failed: {e}");
            return 1;
        }
        waits.push((got - asked).as_nanos() as u64);
        if got < deadline {
            count += 1;
        }
    }
    writeln!(out, "count {count}").unwrap();
    write!(out, "waits").unwrap();
    for w in &waits {
        write!(out, " {w}").unwrap();
    }
    writeln!(out).unwrap();
    out.flush().unwrap();
    0
}

/// One run's figures.
struct Run {
    /// Each process's cycles within the time.
    cycles: Vec<u64>,
    /// Every wait, sorted.
    waits: Vec<Duration>,
    seconds: f64,
}

impl Run {
    fn throughput(&self) -> f64 {
        self.cycles.iter().sum::<u64>() as f64 / self.seconds
    }

    /// Jain's fairness index over the processes' cycle counts.
    fn jain(&self) -> f64 {
        let sum: f64 = self.cycles.iter().map(|&c| c as f64).sum();
        let squares: f64 = self.cycles.iter().map(|&c| (c as f64).powi(2)).sum();
        if squares == 0.0 {
            return 0.0;
        }
        sum * sum / (self.cycles.len() as f64 * squares)
    }

    fn wait(&self, q: f64) -> Option<Duration> {
        (!self.waits.is_empty()).then(|| crate::linux::quantile(&self.waits, q))
    }
}

/// The run of median throughput among a cell's rounds.
fn median(mut rounds: Vec<Run>) -> Run {
    assert!(!rounds.is_empty(), "every row is in a group");
    rounds.sort_by(|a, b| a.throughput().total_cmp(&b.throughput()));
    rounds.swap_remove(rounds.len() / 2)
}

/// The median of `values` (not empty).
fn median_of(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The barrier: a pipe whose read end every child has as its standard
/// input; both ends close on exec, so the bench's end is the only writer.
fn barrier() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `pipe2` fills the two descriptors, which are then owned once.
    unsafe {
        assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0);
        (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
    }
}

/// Ends the children still running (a failed run's), by their handles.
fn end(children: &mut [(Child, BufReader<ChildStdout>)]) {
    for (c, _) in children {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// `n` processes of `row` on one lock in `dir`, for `seconds`.
fn measure(
    row: &Row,
    n: usize,
    dir: &Path,
    seconds: f64,
    py: Option<&Path>,
) -> Result<Run, String> {
    measure_beside(row, n, None, dir, seconds, py).map(|(run, _)| run)
}

/// `n` processes of `row` and, with `beside`, one more of that row (a
/// filelock class) on the same lock in `dir`, for `seconds`: the run of
/// the `n`, and that of the one beside them.
fn measure_beside(
    row: &Row,
    n: usize,
    beside: Option<&Row>,
    dir: &Path,
    seconds: f64,
    py: Option<&Path>,
) -> Result<(Run, Option<Run>), String> {
    let what = format!("{}, {n} processes", row.name);
    let lock_dir = dir.join("lock");
    std::fs::create_dir_all(&lock_dir).unwrap();
    let lock = lock_dir.join("curve.lock");
    let witness = dir.join("witness");
    let (read, write) = barrier();
    let mut children = Vec::with_capacity(n + 1);
    let all = n + usize::from(beside.is_some());
    for k in 0..all {
        let row = if k < n { row } else { beside.unwrap_or(row) };
        let mut c = match (row.class, py) {
            (Some(class), Some(py)) => {
                let mut c = Command::new(py);
                c.args(["-c", include_str!("curve_child.py"), class]);
                c
            }
            _ => {
                let mut c = Command::new(std::env::current_exe().unwrap());
                c.args(["--child", "curve", row.key]);
                c
            }
        };
        c.arg(&lock)
            .arg(&witness)
            .arg(seconds.to_string())
            .stdin(Stdio::from(read.try_clone().unwrap()))
            .stdout(Stdio::piped());
        let mut child = match c.spawn() {
            Ok(c) => c,
            Err(e) => {
                end(&mut children);
                return Err(format!("{what}: cannot start a process: {e}"));
            }
        };
        let out = BufReader::new(child.stdout.take().unwrap());
        children.push((child, out));
    }
    for i in 0..children.len() {
        let mut line = String::new();
        let _ = children[i].1.read_line(&mut line);
        if line.trim_end() != "ready" {
            end(&mut children);
            return Err(format!("{what}: a process ended before it was ready"));
        }
    }
    drop(read);
    // The barrier opens: every child's read of its standard input ends.
    drop(write);
    let mut cycles = Vec::with_capacity(n);
    let mut waits = Vec::new();
    let (mut beside_cycles, mut beside_waits) = (Vec::new(), Vec::new());
    let mut failed = None;
    // The processes not yet reaped, which the watchdog may end: a PID is
    // taken out of it before its process is reaped, so it names no other.
    let unreaped = Mutex::new(
        children
            .iter()
            .map(|(c, _)| Some(c.id()))
            .collect::<Vec<_>>(),
    );
    let wedged = AtomicBool::new(false);
    let (done, finished) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let (unreaped, wedged) = (&unreaped, &wedged);
        scope.spawn(move || {
            let limit = Duration::from_secs_f64(seconds) + WEDGED_AFTER;
            if finished.recv_timeout(limit) == Err(RecvTimeoutError::Timeout) {
                let pids = unreaped.lock().unwrap();
                wedged.store(true, Ordering::Relaxed);
                for pid in pids.iter().flatten() {
                    // SAFETY: a plain kill of a process this run started
                    // and has not reaped.
                    unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
                }
            }
        });
        for (k, (c, out)) in children.iter_mut().enumerate() {
            let mut text = String::new();
            let _ = out.read_to_string(&mut text);
            unreaped.lock().unwrap()[k] = None;
            let status = c.wait().unwrap();
            if !status.success() {
                failed.get_or_insert(match status.code() {
                    Some(OVERLAP) => {
                        format!("{what}: two holders at once (the overlap witness)")
                    }
                    _ if wedged.load(Ordering::Relaxed) => format!(
                        "{what}: a process still ran {WEDGED_AFTER:?} after the run's end, \
                         and was killed: a wedged lock?"
                    ),
                    _ => format!("{what}: a process failed ({status})"),
                });
                continue;
            }
            let (cycles, waits) = match k < n {
                true => (&mut cycles, &mut waits),
                false => (&mut beside_cycles, &mut beside_waits),
            };
            for line in text.lines() {
                let mut words = line.split(' ');
                match words.next() {
                    Some("count") => {
                        cycles.push(words.next().and_then(|w| w.parse().ok()).unwrap())
                    }
                    Some("waits") => {
                        waits.extend(words.map(|w| Duration::from_nanos(w.parse().unwrap())))
                    }
                    _ => {}
                }
            }
        }
        let _ = done.send(());
    });
    if let Some(f) = failed {
        return Err(f);
    }
    assert_eq!(cycles.len(), n, "{what}: a process printed no count");
    waits.sort();
    beside_waits.sort();
    let beside = beside.map(|_| Run {
        cycles: beside_cycles,
        waits: beside_waits,
        seconds,
    });
    Ok((
        Run {
            cycles,
            waits,
            seconds,
        },
        beside,
    ))
}

/// A duration in the unit that suits it.
pub(crate) fn short(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1e-3 {
        format!("{:.0} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// The curves, their tables and the guard; the exit status.
pub(crate) fn run(root: &Path, quick: bool) -> i32 {
    let (ns, seconds): (&[usize], f64) = if quick {
        (&QUICK, QUICK_SECONDS)
    } else {
        (&FULL, FULL_SECONDS)
    };
    if std::env::args().any(|a| a == "--witness-check") {
        return witness_check(root);
    }
    // `--only KEY,KEY`: those rows alone (their keys: `ROWS`).
    let args: Vec<String> = std::env::args().collect();
    let only: Option<Vec<&str>> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(|keys| keys.split(',').collect());
    if let Some(unknown) = only
        .iter()
        .flatten()
        .find(|k| !ROWS.iter().any(|r| r.key == **k))
    {
        let keys: Vec<&str> = ROWS.iter().map(|r| r.key).collect();
        eprintln!("--only: no row {unknown:?}; the rows: {}", keys.join(", "));
        return 2;
    }
    // `--rounds K`: every row in K rounds, each cell the median of its K
    // runs (the quick run: its guarded rows in `QUICK_ROUNDS`).
    let asked = match args.iter().position(|a| a == "--rounds") {
        None => None,
        Some(i) => match args.get(i + 1).and_then(|k| k.parse::<usize>().ok()) {
            Some(k @ 1..=9) => Some(k),
            _ => {
                eprintln!("--rounds: give a number of rounds from 1 to 9");
                return 2;
            }
        },
    };
    let py = python();
    if std::env::args().any(|a| a == "--poller") {
        return poller(root, quick, py.as_deref());
    }
    if py.is_none() {
        println!(
            "(filelock's rows are left out: no Python with filelock 4.2.11; \
             set SWAPLOCK_PYTHON or run scripts/setup)\n"
        );
    }
    let rows: Vec<&Row> = ROWS
        .iter()
        .filter(|r| r.class.is_none() || py.is_some())
        .filter(|r| only.as_ref().is_none_or(|o| o.contains(&r.key)))
        .collect();
    // Each row's runs, in the order of `ns`, measured a group at a time,
    // each number of processes for the whole group before the next: a row
    // and its peer run seconds apart, and so do a row's few and many
    // processes, whatever else the machine does meanwhile. The quick run
    // measures the guarded rows in `QUICK_ROUNDS` rounds and keeps the
    // median: a burst of other work in one round decides nothing.
    let rounds = |row: &Row| match (asked, quick && GUARDED.contains(&row.key)) {
        (Some(k), _) => k,
        (None, true) => QUICK_ROUNDS,
        (None, false) => 1,
    };
    let most_rounds = rows.iter().map(|r| rounds(r)).max().unwrap_or(1);
    let mut cells: Vec<Vec<Vec<Run>>> = rows
        .iter()
        .map(|_| ns.iter().map(|_| Vec::new()).collect())
        .collect();
    for round in 0..most_rounds {
        for group in GROUPS {
            for (j, &n) in ns.iter().enumerate() {
                for (i, row) in rows.iter().enumerate() {
                    if !group.contains(&row.key) || round >= rounds(row) {
                        continue;
                    }
                    let dir = root.join(format!("curve-{}-{n}", row.key));
                    let began = Instant::now();
                    match measure(row, n, &dir, seconds, py.as_deref()) {
                        Ok(r) => {
                            eprintln!(
                                "curves: {}, {n} processes: {:.0} cycles/s, {:.1} s",
                                row.name,
                                r.throughput(),
                                began.elapsed().as_secs_f64()
                            );
                            cells[i][j].push(r);
                        }
                        Err(e) => {
                            eprintln!("{e}");
                            return 2;
                        }
                    }
                    let _ = std::fs::remove_dir_all(&dir);
                }
            }
        }
    }
    // The guard's ratios, each of one round's few and many processes,
    // measured seconds apart: medians of the cells taken apart would pair
    // a round's few with another's many, and another load.
    let ratios: Vec<(&Row, Vec<(f64, f64)>)> = rows
        .iter()
        .zip(&cells)
        .filter_map(|(row, rs)| {
            let at = |n| ns.iter().position(|&m| m == n).map(|i| &rs[i]);
            let (few, many) = (at(GUARD_FEW)?, at(GUARD_MANY)?);
            let pairs = few.iter().zip(many);
            Some((
                *row,
                pairs
                    .map(|(f, m)| (f.throughput(), m.throughput()))
                    .collect(),
            ))
        })
        .collect();
    let runs: Vec<(&Row, Vec<Run>)> = rows
        .into_iter()
        .zip(cells)
        .map(|(row, rs)| (row, rs.into_iter().map(median).collect()))
        .collect();
    print_tables(&runs, ns, seconds);
    guard(&ratios)
}

/// How long each `--poller` run lasts: a filelock waiter attempts once
/// every 50 ms, a hundred times in 5 s.
const POLLER_SECONDS: f64 = 5.0;

/// `--poller`: one filelock process of each soft kind's class among 32
/// and 128 (with `--quick`, 32 for 2 s) processes of that kind, on one
/// lock. filelock's waiters poll: one that never got the lock while
/// swaplock's waiters took turns would be starved. The exit status.
fn poller(root: &Path, quick: bool, py: Option<&Path>) -> i32 {
    let Some(py) = py else {
        eprintln!(
            "--poller needs a Python with filelock 4.2.11: set SWAPLOCK_PYTHON or run scripts/setup"
        );
        return 2;
    };
    let (ns, seconds): (&[usize], f64) = match quick {
        true => (&[GUARD_MANY], 2.0),
        false => (&[GUARD_MANY, 128], POLLER_SECONDS),
    };
    println!("\n## A filelock poller among soft waiters ({seconds} s a run)\n");
    println!(
        "| kind | processes | their cycles/s | their fairness | the poller | its cycles | \
         its fair share | its wait p50 / longest |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut starved = Vec::new();
    for key in GUARDED {
        let row = ROWS.iter().find(|r| r.key == key).unwrap();
        let peer = ROWS.iter().find(|r| Some(r.key) == row.peer).unwrap();
        for &n in ns {
            let dir = root.join(format!("poller-{key}-{n}"));
            let (ours, theirs) = match measure_beside(row, n, Some(peer), &dir, seconds, Some(py)) {
                Ok((ours, Some(theirs))) => (ours, theirs),
                Ok(_) => unreachable!("a run beside a poller measures the poller"),
                Err(e) => {
                    eprintln!("{e}");
                    return 2;
                }
            };
            let _ = std::fs::remove_dir_all(&dir);
            let polled: u64 = theirs.cycles.iter().sum();
            let all = ours.cycles.iter().sum::<u64>() + polled;
            let waits = match (theirs.wait(0.5), theirs.waits.last()) {
                (Some(p50), Some(&longest)) => format!("{} / {}", short(p50), short(longest)),
                _ => "none".to_owned(),
            };
            println!(
                "| {} | {n} | {:.0} | {:.2} | {} | {polled} | {:.1} | {waits} |",
                row.name,
                ours.throughput(),
                ours.jain(),
                peer.name,
                all as f64 / (n + 1) as f64,
            );
            if polled == 0 {
                starved.push(format!("{} among {n} {}", peer.name, row.name));
            }
        }
    }
    if starved.is_empty() {
        println!("\nNo poller starved: each got the lock beside every soft kind.");
        return 0;
    }
    eprintln!(
        "starved: a filelock poller never got the lock in {seconds} s: {}",
        starved.join("; ")
    );
    1
}

/// Eight processes without a lock: the run must fail, the witness
/// finding two holders at once; the exit status.
fn witness_check(root: &Path) -> i32 {
    match measure(&UNLOCKED, 8, &root.join("witness-check"), 0.2, None) {
        Err(e) if e.contains("two holders at once") => {
            println!("The overlap witness caught two holders at once: {e}");
            0
        }
        Err(e) => {
            eprintln!("the witness check failed otherwise: {e}");
            1
        }
        Ok(r) => {
            eprintln!(
                "the overlap witness missed {} unlocked cycles of 8 processes",
                r.cycles.iter().sum::<u64>()
            );
            1
        }
    }
}

fn print_tables(runs: &[(&Row, Vec<Run>)], ns: &[usize], seconds: f64) {
    let header = |title: &str, last: &str| {
        println!("\n## Contention: {title} ({seconds} s a run)\n");
        let cols: Vec<String> = ns.iter().map(|n| format!("{n}")).collect();
        println!("| kind | {} |{last}", cols.join(" | "));
        println!(
            "|---|{}{}",
            "---|".repeat(ns.len()),
            "---|".repeat(last.matches('|').count())
        );
    };
    let peer_of = |row: &Row| {
        row.peer
            .and_then(|p| runs.iter().find(|(r, _)| r.key == p))
            .map(|(_, r)| r)
    };
    // The ratios to the few processes' throughput: of the guard's many,
    // and of the most processes measured, if more.
    let most = ns.iter().copied().max().unwrap_or(GUARD_MANY);
    let manys: Vec<usize> = ns
        .iter()
        .copied()
        .filter(|&n| n == GUARD_MANY || (n == most && n > GUARD_MANY))
        .collect();
    let few_many = |rs: &[Run]| {
        let at = |n| ns.iter().position(|&m| m == n).map(|i| rs[i].throughput());
        manys
            .iter()
            .map(|&n| match (at(GUARD_FEW), at(n)) {
                (Some(f), Some(m)) if f > 0.0 => format!(" {:.2}x |", m / f),
                _ => " |".to_owned(),
            })
            .collect::<String>()
    };
    let columns: String = manys
        .iter()
        .map(|n| format!(" {n} vs {GUARD_FEW} |"))
        .collect();
    header("throughput, cycles a second (vs its peer)", &columns);
    for (row, rs) in runs {
        let peer = peer_of(row);
        let cells: Vec<String> = rs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let t = r.throughput();
                match peer.map(|p| p[i].throughput()) {
                    Some(p) if p > 0.0 => format!("{t:.0} ({:.2}x)", t / p),
                    _ => format!("{t:.0}"),
                }
            })
            .collect();
        println!("| {} | {} |{}", row.name, cells.join(" | "), few_many(rs));
    }
    header("wait from asking to holding, p50 / p99", "");
    for (row, rs) in runs {
        let cells: Vec<String> = rs
            .iter()
            .map(|r| match (r.wait(0.5), r.wait(0.99)) {
                (Some(a), Some(b)) => format!("{} / {}", short(a), short(b)),
                _ => "none".to_owned(),
            })
            .collect();
        println!("| {} | {} |", row.name, cells.join(" | "));
    }
    header("Jain's fairness over the processes' cycles", "");
    for (row, rs) in runs {
        let cells: Vec<String> = rs.iter().map(|r| format!("{:.2}", r.jain())).collect();
        println!("| {} | {} |", row.name, cells.join(" | "));
    }
}

/// The contention guard over the soft kinds, given each row's rounds of
/// throughput with few and many processes; the exit status.
fn guard(ratios: &[(&Row, Vec<(f64, f64)>)]) -> i32 {
    if ratios.is_empty() {
        return 0;
    }
    println!(
        "\nContention guard: each soft kind's throughput with {GUARD_MANY} processes \
         at least {GUARD_RATIO:.2}x its throughput with {GUARD_FEW} (the median of its rounds)."
    );
    let mut status = 0;
    for (row, rounds) in ratios.iter().filter(|(r, _)| GUARDED.contains(&r.key)) {
        let each: Vec<f64> = rounds
            .iter()
            .map(|&(f, m)| if f > 0.0 { m / f } else { 0.0 })
            .collect();
        let ratio = median_of(each.clone());
        let shown: Vec<String> = rounds
            .iter()
            .zip(&each)
            .map(|((f, m), r)| format!("{m:.0} / {f:.0} = {r:.2}x"))
            .collect();
        let verdict = if ratio < GUARD_RATIO {
            "FAILED"
        } else {
            "passed"
        };
        println!(
            "- {}: {ratio:.2}x, {verdict} (cycles/s with {GUARD_MANY} / with {GUARD_FEW}: {})",
            row.name,
            shown.join("; ")
        );
        if ratio < GUARD_RATIO {
            eprintln!(
                "contention guard failed: {}: its throughput with {GUARD_MANY} processes is \
                 {ratio:.2}x its throughput with {GUARD_FEW}, under {GUARD_RATIO:.2}x \
                 (cycles/s: {})",
                row.name,
                shown.join("; ")
            );
            status = 1;
        }
    }
    status
}
