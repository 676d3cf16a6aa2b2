//! The host queue of soft waiters (PROTOCOL 7.20) is an optimisation
//! only: whatever happens to its members or its side file, the marker
//! alone grants the lock and every live waiter still takes it.
//!
//! - 16 processes take one lock while random ones (holders and waiters,
//!   queue heads among them) are SIGKILLed or SIGSTOPped and later
//!   continued; an independent witness (an exclusive create in a directory
//!   of its own) and a checker of the entries' order find no overlap, and
//!   every process not killed finishes.
//! - A side file that cannot be made (a directory or a FIFO at its name)
//!   or that is removed and replaced while waiters queue on it leaves
//!   every waiter taking the lock.
//! - Waiters that queue leave no side file once the last has gone.
//! - Joiners that find no side file together all open it with its mark.
//! - A member whose turn came as the one ahead took the lock watches that
//!   holder's exit: killed while it holds, it is taken over without a poll.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use swaplock::soft::{Kind, SoftLock};

/// The environment variable that makes this test binary a worker:
/// `KIND<US>LOCK<US>WITNESS<US>ITERATIONS`. Each worker appends its entries
/// and exits to `WITNESS.log` too, one `write(2)` on an `O_APPEND` file
/// each, in the order they happened: the checker reads that.
const WORKER: &str = "SWAPLOCK_QUEUE_WORKER";
/// A worker's exit status when it found another holder inside.
const OVERLAP: i32 = 3;
/// A worker's poll interval: the bound of a wait whose queue's head is
/// stopped.
const POLL: Duration = Duration::from_millis(10);

/// The body of each child process: takes the lock ITERATIONS times,
/// printing `E i` once inside (after the witness is made) and `X i`
/// before it lets go (after the witness is removed).
#[test]
#[ignore = "entry point of the queue tests' child processes"]
fn worker() {
    let Ok(spec) = std::env::var(WORKER) else {
        return;
    };
    let parts: Vec<&str> = spec.split('\u{1f}').collect();
    let [kind, lock, witness, iters] = parts[..] else {
        panic!("bad worker spec {spec:?}")
    };
    // `KIND+hold`: polls once an hour, and holds its first take until
    // killed; `KIND+once`: polls once an hour.
    let (kind, mode) = kind.split_once('+').unwrap_or((kind, ""));
    let kind = match kind {
        "soft" => Kind::Soft,
        "marker" => Kind::Marker,
        _ => Kind::Lease,
    };
    let poll = match mode {
        "" => POLL,
        _ => Duration::from_secs(3600),
    };
    let lock = SoftLock::new(kind, lock).poll_interval(poll);
    let mut out = std::io::stdout().lock();
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(format!("{witness}.log"))
        .unwrap();
    let pid = std::process::id();
    for i in 0..iters.parse::<u32>().unwrap() {
        let guard = lock.lock().unwrap();
        if !enter(witness, pid) {
            std::process::exit(OVERLAP);
        }
        log.write_all(format!("E {pid} {i}\n").as_bytes()).unwrap();
        writeln!(out, "E {i}").unwrap();
        out.flush().unwrap();
        if mode == "hold" {
            loop {
                std::thread::park();
            }
        }
        if std::fs::remove_file(witness).is_err() {
            std::process::exit(OVERLAP);
        }
        log.write_all(format!("X {pid} {i}\n").as_bytes()).unwrap();
        writeln!(out, "X {i}").unwrap();
        out.flush().unwrap();
        guard.release().unwrap();
    }
}

/// Makes the witness, naming this worker; `false` if another live worker
/// is inside. A worker SIGKILLed inside leaves its witness behind: once
/// it is dead (gone, or a zombie the test has not reaped yet) the witness
/// is its leftover, removed and made again.
fn enter(witness: &str, pid: u32) -> bool {
    for _ in 0..2 {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(witness)
        {
            Ok(mut f) => {
                f.write_all(pid.to_string().as_bytes()).unwrap();
                return true;
            }
            Err(_) => {
                let inside = std::fs::read_to_string(witness).unwrap_or_default();
                let state = std::fs::read_to_string(format!("/proc/{}/stat", inside.trim()))
                    .ok()
                    .and_then(|st| {
                        st.rsplit_once(") ")
                            .and_then(|(_, rest)| rest.chars().next())
                    });
                // Another holder inside that still lives, stopped or not;
                // or a witness not yet written: two holders either way.
                if inside.is_empty() || !matches!(state, None | Some('Z' | 'X')) {
                    return false;
                }
                let _ = std::fs::remove_file(witness);
            }
        }
    }
    false
}

/// What the workers report: a line, or their end.
enum Event {
    Line(String),
    Ended(u32, ExitStatus),
}

/// Starts `n` workers on `lock`, each taking it `iters` times; their pids
/// and the channel of their events.
fn start(
    kind: &str,
    lock: &Path,
    witness: &Path,
    n: usize,
    iters: u32,
) -> (Vec<u32>, mpsc::Receiver<Event>) {
    let exe = std::env::current_exe().unwrap();
    let spec = [
        kind,
        lock.to_str().unwrap(),
        witness.to_str().unwrap(),
        &iters.to_string(),
    ]
    .join("\u{1f}");
    let (tx, rx) = mpsc::channel();
    let mut pids = Vec::new();
    for _ in 0..n {
        let mut child = common::command(&exe, "worker")
            .args(["--ignored", "--exact", "worker", "--test-threads=1", "-q"])
            .env(WORKER, &spec)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        pids.push(pid);
        let out = BufReader::new(child.stdout.take().unwrap());
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in out.lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(Event::Line(line));
            }
            let status = child.wait().unwrap();
            let _ = tx.send(Event::Ended(pid, status));
        });
    }
    (pids, rx)
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: a signal to a child of this test, which is not yet reaped
    // (its thread reaps it only after its output ends).
    unsafe { libc::kill(pid as i32, sig) };
}

/// Kills the workers still alive when a failed check ends the test, so
/// that none stays stopped or waiting.
struct Reap(Vec<u32>);
impl Drop for Reap {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for pid in &self.0 {
                signal(*pid, libc::SIGKILL);
            }
        }
    }
}

/// xorshift64*: the test's choices, from a fixed seed.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// How long without any entry before the test looks at why: a stopped
/// holder (then it continues everyone stopped), or a wedge.
const STALL: Duration = Duration::from_secs(2);
/// How long without any entry, and no stopped holder, is a wedge: far
/// past any wait's bound here (the poll, 10 ms), for a loaded machine.
const WEDGE: Duration = Duration::from_secs(60);

/// Runs `n` workers while the test kills and stops random ones; checks
/// the order of entries, and that every worker it did not kill finished.
/// How many it killed and stopped.
fn storm(kind: &str, dir: &Path, n: usize, iters: u32, seed: u64) -> (usize, usize) {
    let lock = dir.join("storm.lock");
    let witness_dir = dir.join("witness");
    std::fs::create_dir(&witness_dir).unwrap();
    let witness = witness_dir.join("inside");
    let (pids, events) = start(kind, &lock, &witness, n, iters);
    let _reap = Reap(pids.clone());
    let mut rng = Rng(seed);
    let mut running: HashSet<u32> = pids.iter().copied().collect();
    let mut killed = HashSet::new();
    // The stopped, each with the count of entries after which it goes on.
    let mut stopped: HashMap<u32, usize> = HashMap::new();
    let mut stops = 0;
    let mut entries = 0usize;
    let mut done = 0;
    let mut quiet = Duration::ZERO;
    while done < pids.len() {
        let event = match events.recv_timeout(STALL) {
            Ok(e) => e,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let holder = SoftLock::soft(&lock)
                    .owner()
                    .ok()
                    .flatten()
                    .and_then(|o| o.pid);
                if holder.is_some_and(|h| stopped.contains_key(&h))
                    || stopped.len() == running.len()
                {
                    // A stopped holder keeps everyone out, as it must.
                    for (pid, _) in stopped.drain() {
                        signal(pid, libc::SIGCONT);
                    }
                    quiet = Duration::ZERO;
                    continue;
                }
                quiet += STALL;
                assert!(
                    quiet < WEDGE,
                    "{kind}: no entry for {quiet:?}, the holder {holder:?} not stopped (stopped: {:?}): a wedge",
                    stopped.keys().collect::<Vec<_>>()
                );
                continue;
            }
            Err(e) => panic!("{kind}: the workers' channel: {e}"),
        };
        quiet = Duration::ZERO;
        match event {
            Event::Line(line) => {
                // The test harness's own lines aside.
                let Some((what @ ("E" | "X"), _)) = line.split_once(' ') else {
                    continue;
                };
                if what == "E" {
                    entries += 1;
                }
                // Those stopped long enough go on.
                let due: Vec<u32> = stopped
                    .iter()
                    .filter(|(_, at)| **at <= entries)
                    .map(|(p, _)| *p)
                    .collect();
                for pid in due {
                    stopped.remove(&pid);
                    signal(pid, libc::SIGCONT);
                }
                if what == "E" && entries.is_multiple_of(25) {
                    let live: Vec<u32> = running
                        .iter()
                        .copied()
                        .filter(|p| !stopped.contains_key(p))
                        .collect();
                    let victim = live[rng.below(live.len() as u64) as usize];
                    if rng.below(3) == 0 && killed.len() < n / 4 {
                        killed.insert(victim);
                        signal(victim, libc::SIGKILL);
                    } else {
                        stops += 1;
                        stopped.insert(victim, entries + 40 + rng.below(80) as usize);
                        signal(victim, libc::SIGSTOP);
                    }
                }
            }
            Event::Ended(pid, status) => {
                done += 1;
                running.remove(&pid);
                // Stopped as it exited: the signal came too late.
                stopped.remove(&pid);
                if killed.contains(&pid) {
                    assert_eq!(
                        status.signal(),
                        Some(libc::SIGKILL),
                        "{kind}: {pid}: {status:?}"
                    );
                } else {
                    assert_ne!(
                        status.code(),
                        Some(OVERLAP),
                        "{kind}: {pid} found another holder inside"
                    );
                    assert!(status.success(), "{kind}: {pid} failed: {status:?}");
                }
            }
        }
    }
    check_log(kind, &witness, &killed);
    (killed.len(), stops)
}

/// The independent checker: in the workers' log, an entry while another
/// holder that was not killed is inside is an overlap, and every exit
/// matches the entry before it.
fn check_log(kind: &str, witness: &Path, killed: &HashSet<u32>) {
    let text = std::fs::read_to_string(witness.with_extension("log")).unwrap();
    let mut inside: Option<(&str, &str)> = None;
    for (n, line) in text.lines().enumerate() {
        let mut f = line.split(' ');
        let (what, pid, i) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
        match what {
            "E" => {
                if let Some((holder, _)) = inside {
                    assert!(
                        killed.contains(&holder.parse().unwrap()),
                        "{kind}: line {n}: {pid} entered while {holder} was inside"
                    );
                }
                inside = Some((pid, i));
            }
            "X" => {
                assert_eq!(
                    inside,
                    Some((pid, i)),
                    "{kind}: line {n}: an exit without its entry"
                );
                inside = None;
            }
            other => panic!("{kind}: line {n}: unknown record {other:?}"),
        }
    }
}

#[test]
fn waiters_queued_on_one_host_survive_kills_and_stops_with_no_overlap_and_no_wedge() {
    for (kind, seed) in [("soft", 11), ("marker", 23), ("lease", 37)] {
        let dir = tempfile::tempdir().unwrap();
        let (kills, stops) = storm(kind, dir.path(), 16, 40, seed);
        eprintln!("{kind}: 16 processes, {kills} killed, {stops} stopped, no overlap, all others finished");
        assert!(
            kills > 0 && stops > 0,
            "{kind}: the storm killed {kills} and stopped {stops}"
        );
    }
}

/// Runs `n` workers to their end with nothing done to them.
fn calm(dir: &Path, n: usize, iters: u32) {
    let lock = dir.join("calm.lock");
    let witness_dir = dir.join("witness");
    std::fs::create_dir_all(&witness_dir).unwrap();
    let (pids, events) = start("soft", &lock, &witness_dir.join("inside"), n, iters);
    let mut ended = 0;
    let mut entries = 0;
    while ended < pids.len() {
        match events
            .recv_timeout(WEDGE)
            .expect("no entry for a minute: a wedge")
        {
            Event::Line(line) if line.starts_with("E ") => entries += 1,
            Event::Line(_) => {}
            Event::Ended(pid, status) => {
                ended += 1;
                assert!(status.success(), "{pid}: {status:?}");
            }
        }
    }
    assert_eq!(entries, n * iters as usize);
}

fn names(dir: &Path) -> Vec<String> {
    common::others(dir, &["witness"])
}

#[test]
fn the_last_waiter_to_leave_removes_the_side_file() {
    let dir = tempfile::tempdir().unwrap();
    calm(dir.path(), 8, 100);
    assert_eq!(
        names(dir.path()),
        Vec::<String>::new(),
        "files left beside the lock"
    );
}

/// A lock named as another lock's side file, `<L>.queue`, held beside
/// `L`: `L`'s waiters queue without it (its marker does not begin with
/// the side file's mark), so its marker is neither written nor removed,
/// and it stays held. Without the mark, a waiter wrote its ticket counter
/// into that marker and, leaving as the only member, removed it: a second
/// holder of `<L>.queue` then took it at once.
#[test]
fn a_lock_named_as_a_side_file_is_never_taken_for_one() {
    let dir = tempfile::tempdir().unwrap();
    let other = SoftLock::soft(dir.path().join("x.queue"));
    let held_other = other.try_lock().unwrap();
    let before = std::fs::read(dir.path().join("x.queue")).unwrap();
    let held_x = SoftLock::soft(dir.path().join("x")).try_lock().unwrap();
    let x = dir.path().join("x");
    let waiter = std::thread::spawn(move || {
        SoftLock::soft(&x)
            .poll_interval(Duration::from_millis(10))
            .lock_timeout(Duration::from_millis(300))
            .map(|g| g.release())
    });
    let waited = waiter.join().unwrap();
    assert_eq!(
        waited.err().map(|e| e.kind()),
        Some(std::io::ErrorKind::TimedOut),
        "x is held: its waiter times out"
    );
    assert_eq!(
        std::fs::read(dir.path().join("x.queue")).ok(),
        Some(before),
        "the marker of x.queue was written or removed by x's waiter"
    );
    assert!(other.try_lock().is_err(), "x.queue was taken a second time");
    held_x.release().unwrap();
    held_other.release().unwrap();
}

/// Joiners that all find no side file make it at once, one of them
/// wins, and every one opens it with its mark: the file is made whole
/// before its name shows it. Made by an exclusive create and then marked,
/// a joiner that opened it between the two went without the queue for
/// its whole wait (and a test that waited for it to queue, forever).
#[test]
fn joiners_that_arrive_together_all_find_the_side_file_marked() {
    use std::os::fd::AsFd;
    use std::sync::{Arc, Barrier};
    const JOINERS: usize = 8;
    for round in 0..200 {
        let dir = tempfile::tempdir().unwrap();
        let at = Arc::new(std::fs::File::open(dir.path()).unwrap());
        let barrier = Arc::new(Barrier::new(JOINERS));
        let opened: Vec<_> = (0..JOINERS)
            .map(|_| {
                let (at, barrier) = (Arc::clone(&at), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    swaplock_linux::queue::open(at.as_fd(), b"x.queue", 0o644)
                        .map(|(fd, made)| (std::fs::File::from(fd), made))
                })
            })
            .collect();
        let opened: Vec<_> = opened.into_iter().map(|t| t.join().unwrap()).collect();
        let refused = opened.iter().filter(|o| o.is_err()).count();
        assert_eq!(refused, 0, "round {round}: {opened:?}");
        let made = opened.iter().filter(|o| matches!(o, Ok((_, true)))).count();
        assert_eq!(made, 1, "round {round}: one joiner makes the file");
    }
}

#[test]
fn a_side_file_that_cannot_be_made_leaves_waiters_waiting_as_before() {
    // A directory at its name (an open of it for writing fails), then a
    // FIFO (refused: not a regular file; never blocked on).
    for what in ["directory", "fifo"] {
        let dir = tempfile::tempdir().unwrap();
        let queue = dir.path().join("calm.lock.queue");
        match what {
            "directory" => std::fs::create_dir(&queue).unwrap(),
            _ => {
                let c = std::ffi::CString::new(queue.to_str().unwrap()).unwrap();
                // SAFETY: a plain mkfifo with a valid path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            }
        }
        calm(dir.path(), 8, 60);
        assert_eq!(
            names(dir.path()),
            vec!["calm.lock.queue".to_owned()],
            "{what}"
        );
    }
}

#[test]
fn a_side_file_removed_and_replaced_under_its_members_leaves_every_waiter_taking_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("calm.lock");
    let queue: PathBuf = dir.path().join("calm.lock.queue");
    let witness_dir = dir.path().join("witness");
    std::fs::create_dir(&witness_dir).unwrap();
    let (pids, events) = start("soft", &lock, &witness_dir.join("inside"), 8, 100);
    let mut ended = 0;
    let mut entries = 0;
    while ended < pids.len() {
        match events
            .recv_timeout(WEDGE)
            .expect("no entry for a minute: a wedge")
        {
            Event::Line(line) if line.starts_with("E ") => {
                entries += 1;
                // Every tenth entry: the side file removed, or replaced by
                // another file (with a counter of its own).
                match entries % 20 {
                    0 => drop(std::fs::remove_file(&queue)),
                    10 => {
                        let other = dir.path().join("other");
                        std::fs::write(&other, 7u64.to_le_bytes().repeat(2)).unwrap();
                        std::fs::rename(&other, &queue).unwrap();
                    }
                    _ => {}
                }
            }
            Event::Line(_) => {}
            Event::Ended(pid, status) => {
                ended += 1;
                assert!(status.success(), "{pid}: {status:?}");
            }
        }
    }
    assert_eq!(entries, 800);
}

/// A member whose turn comes as the member ahead of it takes the lock
/// does not attempt at once (it would find the lock taken): it watches
/// the marker and the exit of the process the queue names as the one
/// served. That holder SIGKILLed while it holds is taken over at once:
/// both workers poll once an hour, so a wait that watched no exit would
/// not end.
#[test]
fn a_member_whose_turn_came_as_the_lock_was_taken_watches_its_holders_exit() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("t.lock");
    let queue = dir.path().join("t.lock.queue");
    let witness_dir = dir.path().join("witness");
    std::fs::create_dir_all(&witness_dir).unwrap();
    let witness = witness_dir.join("inside");
    let first = SoftLock::soft(&lock).try_lock().unwrap();
    // The first worker heads the queue, the second queues behind it.
    let (holder, held) = start("soft+hold", &lock, &witness, 1, 1);
    let mut reap = Reap(holder.clone());
    await_tickets(&queue, 1);
    let (next, took) = start("soft+once", &lock, &witness, 1, 1);
    reap.0.extend(&next);
    await_tickets(&queue, 2);
    first.release().unwrap();
    loop {
        match held.recv_timeout(WEDGE) {
            Ok(Event::Line(line)) if line == "E 0" => break,
            Ok(Event::Line(_)) => {}
            Ok(Event::Ended(pid, status)) => panic!("the head {pid} ended: {status:?}"),
            Err(e) => panic!("the head did not take the lock: {e}"),
        }
    }
    signal(holder[0], libc::SIGKILL);
    loop {
        match took
            .recv_timeout(WEDGE)
            .expect("the holder was killed a minute ago: a wedge")
        {
            Event::Line(_) => {}
            Event::Ended(pid, status) => {
                assert!(status.success(), "{pid}: {status:?}");
                break;
            }
        }
    }
}

/// The next ticket of the side file at `queue` (1 before any is drawn).
fn next_ticket(queue: &Path) -> u64 {
    let bytes = std::fs::read(queue).unwrap_or_default();
    bytes
        .get(8..16)
        .map_or(1, |b| u64::from_le_bytes(b.try_into().unwrap()))
}

/// Waits, boundedly, until the side file at `queue` has handed out
/// `tickets` tickets.
fn await_tickets(queue: &Path, tickets: u64) {
    let since = std::time::Instant::now();
    while next_ticket(queue) <= tickets {
        assert!(
            since.elapsed() < WEDGE,
            "{tickets} tickets were not drawn: {}",
            next_ticket(queue) - 1
        );
        std::thread::yield_now();
    }
}

/// A child forked while threads of its parent are queued (one the head,
/// one behind it on its waiting thread) inherits their descriptors, not
/// their threads: its own wait still takes the lock once the parent's
/// threads are done, and theirs take it too.
#[test]
fn a_child_forked_while_its_parents_threads_are_queued_takes_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let first = SoftLock::soft(&path).try_lock().unwrap();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || {
                SoftLock::soft(&path)
                    .poll_interval(POLL)
                    .lock()
                    .unwrap()
                    .release()
                    .unwrap();
            })
        })
        .collect();
    // One waits behind the other on a waiting thread of the queue (the
    // queue file is made whole, so the second finds it with its mark).
    let since = std::time::Instant::now();
    while swaplock::soft::queue_threads() == 0 {
        assert!(
            since.elapsed() < Duration::from_secs(30),
            "neither waiter queued behind the other"
        );
        std::thread::yield_now();
    }
    // SAFETY: the child only calls into the library and leaves by _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let took = SoftLock::soft(&path)
            .poll_interval(POLL)
            .lock_timeout(Duration::from_secs(60))
            .and_then(|g| g.release());
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(i32::from(took.is_err())) }
    }
    first.release().unwrap();
    for t in threads {
        t.join().unwrap();
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child did not take the lock: {status:#x}"
    );
}
