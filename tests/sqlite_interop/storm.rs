//! The mixed storm: Python's `ReadWriteLock` and ours (open file
//! description and classic locks), in processes of their own, taking
//! random read and write holds at once. Each holder checks an independent
//! witness: inside, a writer creates `in-write` with `O_EXCL` and finds no
//! `in-read-*`; a reader creates its own `in-read-*` and finds no
//! `in-write`, and notes whether other readers are inside with it.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Holds per Python process, and per thread of ours (two threads each).
const PYTHON_ROUNDS: usize = 40;
const RUST_ROUNDS: usize = 20;
/// The variable that carries a worker's job: path, witness, rounds, seed,
/// flavour, one per line.
const JOB: &str = "SWAPLOCK_SQLITE_WORKER";

/// A worker process, started and told when to go.
struct Worker {
    child: Child,
    stdout: BufReader<ChildStdout>,
    name: String,
}

impl Worker {
    fn spawn(mut cmd: Command, name: String) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut w = Worker {
            child,
            stdout,
            name,
        };
        w.line("storm-ready");
        w
    }

    /// The first line that starts with `prefix`, after it.
    fn line(&mut self, prefix: &str) -> String {
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(
                n > 0,
                "{} ended before {prefix} (wedged?): {:?}",
                self.name,
                self.child.wait()
            );
            if let Some(rest) = line.trim_end().strip_prefix(prefix) {
                return rest.trim().to_owned();
            }
        }
    }
}

pub(super) fn run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let witness = dir.path().join("witness");
    std::fs::create_dir(&witness).unwrap();
    let began = std::time::Instant::now();
    let mut workers = Vec::new();
    for seed in 0..3 {
        let mut cmd = peer_command(&[
            "storm",
            s(&path),
            s(&witness),
            &PYTHON_ROUNDS.to_string(),
            &seed.to_string(),
        ]);
        cmd.stderr(Stdio::inherit());
        workers.push(Worker::spawn(cmd, format!("python {seed}")));
    }
    for (seed, flavour) in [(10, "default"), (11, "default"), (12, "classic")] {
        let mut cmd = common::command(&std::env::current_exe().unwrap(), "sqlite_interop");
        cmd.args(common::worker::WORKER_ARGS).env(
            JOB,
            format!(
                "{}\n{}\n{RUST_ROUNDS}\n{seed}\n{flavour}",
                s(&path),
                s(&witness)
            ),
        );
        workers.push(Worker::spawn(cmd, format!("rust {flavour} {seed}")));
    }
    // All are ready: let them go at once. A storm that has not ended
    // within a minute is wedged: its workers are killed, and it fails.
    let pids: Vec<i32> = workers.iter().map(|w| w.child.id() as i32).collect();
    let (ended, deadline) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let wedged = matches!(
            deadline.recv_timeout(Duration::from_secs(60)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout)
        );
        if wedged {
            for pid in pids {
                // SAFETY: a plain signal to our own children.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        wedged
    });
    for w in &mut workers {
        writeln!(w.child.stdin.as_mut().unwrap(), "go").unwrap();
    }
    let mut total = [0u64; 4];
    for w in &mut workers {
        let report: Value = serde_json::from_str(&w.line("storm:")).unwrap();
        for (i, key) in ["collisions", "shared", "reads", "writes"]
            .iter()
            .enumerate()
        {
            total[i] += report[key].as_u64().unwrap();
        }
        eprintln!("{}: {report}", w.name);
        assert!(w.child.wait().unwrap().success(), "{}", w.name);
    }
    drop(ended);
    assert!(!watchdog.join().unwrap(), "the storm was wedged");
    let [collisions, shared, reads, writes] = total;
    eprintln!(
        "storm: {reads} reads and {writes} writes in {:.2} s, {shared} reads shared, \
         {collisions} collisions",
        began.elapsed().as_secs_f64()
    );
    assert_eq!(collisions, 0, "two holders overlapped");
    assert_eq!(reads + writes, (3 * PYTHON_ROUNDS + 6 * RUST_ROUNDS) as u64);
    assert!(shared > 0, "readers never observed sharing");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    assert_eq!(std::fs::read_dir(&witness).unwrap().count(), 0);
    no_strays(dir.path(), "a.db");
}

/// A small deterministic generator (xorshift64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[derive(Default)]
struct Tally {
    collisions: AtomicUsize,
    shared: AtomicUsize,
    reads: AtomicUsize,
    writes: AtomicUsize,
}

fn readers_in(witness: &Path) -> usize {
    std::fs::read_dir(witness)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().starts_with("in-read-")
        })
        .count()
}

/// One hold's visit to the critical section.
fn visit(witness: &Path, write: bool, me: &str, tally: &Tally) {
    let create = |name: &str| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(witness.join(name))
            .map(drop)
    };
    let writer = witness.join("in-write");
    let mut collisions = 0;
    if write {
        collisions += usize::from(create("in-write").is_err());
        collisions += readers_in(witness);
    } else {
        create(&format!("in-read-{me}")).unwrap();
        collisions += usize::from(writer.exists());
        if readers_in(witness) > 1 {
            tally.shared.fetch_add(1, Ordering::SeqCst);
        }
    }
    // The hold's work: 5 ms inside, as Python's.
    std::thread::sleep(Duration::from_millis(5));
    if write {
        collisions += readers_in(witness);
        std::fs::remove_file(&writer).unwrap();
        tally.writes.fetch_add(1, Ordering::SeqCst);
    } else {
        collisions += usize::from(writer.exists());
        std::fs::remove_file(witness.join(format!("in-read-{me}"))).unwrap();
        tally.reads.fetch_add(1, Ordering::SeqCst);
    }
    tally.collisions.fetch_add(collisions, Ordering::SeqCst);
}

pub(super) fn worker() {
    let Ok(job) = std::env::var(JOB) else {
        return;
    };
    let job: Vec<&str> = job.lines().collect();
    let (path, witness) = (PathBuf::from(job[0]), PathBuf::from(job[1]));
    let rounds: usize = job[2].parse().unwrap();
    let seed: u64 = job[3].parse().unwrap();
    let lock = match job[4] {
        "classic" => SqliteRwLock::new(&path).owned_by_process(),
        _ => SqliteRwLock::new(&path),
    };
    println!("storm-ready");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    let tally = Arc::new(Tally::default());
    let threads: Vec<_> = (0..2u64)
        .map(|t| {
            let (lock, witness, tally) = (lock.clone(), witness.clone(), Arc::clone(&tally));
            std::thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (seed << 8 | t));
                let me = format!("rs-{}-{t}", std::process::id());
                for _ in 0..rounds {
                    let write = rng.below(10) < 3;
                    let guard = match write {
                        true => lock.write(),
                        false => lock.read(),
                    }
                    .unwrap();
                    visit(&witness, write, &me, &tally);
                    guard.release().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let n = |a: &AtomicUsize| a.load(Ordering::SeqCst);
    println!(
        "storm: {{\"collisions\": {}, \"shared\": {}, \"reads\": {}, \"writes\": {}}}",
        n(&tally.collisions),
        n(&tally.shared),
        n(&tally.reads),
        n(&tally.writes)
    );
}
