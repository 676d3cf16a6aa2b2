//! Participants of a read-write lock in processes of their own: the real
//! Python filelock (`tests/peer/rw_peer.py`) and ours (the test binary
//! started again as a worker, `SWAPLOCK_RW_WORKER` saying what to do).
//! Each prints JSON lines: once it holds, on a compromise, on release.

use super::{python, Holder};
use serde_json::{json, Value};
use std::io::BufRead;
use std::ops::ControlFlow;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use swaplock::rw::SoftRwLock;

/// The variable that makes the test binary a worker.
pub const WORKER: &str = "SWAPLOCK_RW_WORKER";

/// Intervals as `(heartbeat, stale, poll)` seconds.
pub type Terms = (f64, f64, f64);

/// filelock's defaults.
pub const DEFAULTS: Terms = (30.0, 90.0, 0.25);

/// A lock on `path` with these intervals.
pub fn lock(path: &str, (heartbeat, stale, poll): Terms) -> SoftRwLock {
    SoftRwLock::new(path)
        .heartbeat_interval(Duration::from_secs_f64(heartbeat))
        .stale_threshold(Duration::from_secs_f64(stale))
        .poll_interval(Duration::from_secs_f64(poll))
}

fn say(v: Value) {
    println!("{v}");
}

fn terms(parts: &[&str]) -> Terms {
    (
        parts[0].parse().unwrap(),
        parts[1].parse().unwrap(),
        parts[2].parse().unwrap(),
    )
}

fn acquire(
    l: &SoftRwLock,
    mode: &str,
    timeout: Option<Duration>,
) -> std::io::Result<swaplock::SoftRwGuard> {
    let go = |_: &swaplock::rw::RwWaitStatus<'_>| ControlFlow::Continue(());
    match (mode, timeout) {
        ("read", Some(t)) if t.is_zero() => l.try_read(),
        ("write", Some(t)) if t.is_zero() => l.try_write(),
        ("read", _) => l.read_with(timeout, go),
        _ => l.write_with(timeout, go),
    }
}

/// The body of a worker process (the test binary's ignored `worker` test).
pub fn worker() {
    let Ok(spec) = std::env::var(WORKER) else {
        return;
    };
    let parts: Vec<&str> = spec.split('\u{1f}').collect();
    match parts[..] {
        ["hold", mode, path, ref t @ ..] => {
            let l = lock(path, terms(t))
                .on_compromise(|c| say(json!({"compromise": format!("{c:?}")})));
            let began = Instant::now();
            let g = acquire(&l, mode, None).unwrap();
            say(json!({
                "generation": g.generation().to_string(),
                "token": g.token(),
                "pid": std::process::id(),
                "waited": began.elapsed().as_secs_f64(),
            }));
            let mut line = String::new();
            let _ = std::io::stdin().lock().read_line(&mut line);
            let lost = g.compromise().map(|c| format!("{c:?}"));
            g.release().unwrap();
            say(json!({"released": true, "lost": lost}));
        }
        ["try", mode, path, timeout, ref t @ ..] => {
            let l = lock(path, terms(t));
            let began = Instant::now();
            let timeout = Duration::from_secs_f64(timeout.parse().unwrap());
            match acquire(&l, mode, Some(timeout)) {
                Ok(g) => {
                    let elapsed = began.elapsed().as_secs_f64();
                    let generation = g.generation().to_string();
                    g.release().unwrap();
                    say(
                        json!({"result": "acquired", "elapsed": elapsed, "generation": generation}),
                    );
                }
                Err(e) => say(json!({
                    "result": format!("{:?}", e.kind()),
                    "elapsed": began.elapsed().as_secs_f64(),
                    "message": e.to_string(),
                })),
            }
        }
        ["storm", path, count, witness, ref t @ ..] => {
            let l = lock(path, terms(t));
            let (mut generations, mut collisions) = (Vec::new(), 0);
            for _ in 0..count.parse().unwrap() {
                let g = l.write().unwrap();
                generations.push(g.generation().to_string());
                match std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(witness)
                {
                    Ok(_) => {
                        std::thread::sleep(Duration::from_millis(5));
                        std::fs::remove_file(witness).unwrap();
                    }
                    Err(_) => collisions += 1,
                }
                g.release().unwrap();
            }
            say(json!({"generations": generations, "collisions": collisions}));
        }
        ["loop", mode, path, log, rounds, wait, hold, ref t @ ..] => super::rw_chaos::member(
            mode,
            path,
            log,
            rounds.parse().unwrap(),
            wait.parse().unwrap(),
            hold.parse().unwrap(),
            terms(t),
        ),
        _ => panic!("bad worker spec {spec:?}"),
    }
}

fn t(terms: Terms) -> [String; 3] {
    [
        terms.0.to_string(),
        terms.1.to_string(),
        terms.2.to_string(),
    ]
}

/// A worker process of ours: `args` after the command.
pub fn rust_command(args: &[&str]) -> Command {
    // Through the emulator, when the tests are built for another
    // architecture.
    let mut cmd = super::command(&std::env::current_exe().unwrap(), "rw-worker");
    cmd.args(super::worker::WORKER_ARGS)
        .env(WORKER, args.join("\u{1f}"))
        .stderr(Stdio::inherit());
    cmd
}

/// The Python peer's script.
pub fn peer_script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peer/rw_peer.py")
}

/// `rw_peer.py ARGS...`.
pub fn python_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(python());
    cmd.arg(peer_script()).args(args).stderr(Stdio::inherit());
    cmd
}

/// Which side a participant runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Python,
    Rust,
}

impl Side {
    pub fn other(self) -> Side {
        match self {
            Side::Python => Side::Rust,
            Side::Rust => Side::Python,
        }
    }

    fn command(self, cmd: &str, rest: &[&str], terms: Terms) -> Command {
        let [h, s, p] = t(terms);
        let mut args = vec![cmd];
        args.extend_from_slice(rest);
        match self {
            Side::Rust => {
                args.extend([h.as_str(), s.as_str(), p.as_str()]);
                rust_command(&args)
            }
            Side::Python => {
                args.extend(["--heartbeat", &h, "--stale", &s, "--poll", &p]);
                python_command(&args)
            }
        }
    }

    /// A holder in `mode`: once it holds, its first word.
    pub fn hold(self, mode: &str, path: &Path, terms: Terms) -> (Holder, Value) {
        let mut cmd = self.command("hold", &[mode, path.to_str().unwrap()], terms);
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let hello = next_line(&mut stdout);
        (Holder::from_parts(child, stdin, stdout), hello)
    }

    /// A holder that may wait: spawned, its first line not read yet.
    pub fn waiter(self, mode: &str, path: &Path, terms: Terms) -> std::process::Child {
        self.command("hold", &[mode, path.to_str().unwrap()], terms)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// One acquire with `timeout` seconds (0: one poll), released at once:
    /// `result` is `acquired`, or why not.
    pub fn attempt(self, mode: &str, path: &Path, timeout: f64, terms: Terms) -> Value {
        let out = self
            .command(
                "try",
                &[mode, path.to_str().unwrap(), &timeout.to_string()],
                terms,
            )
            .output()
            .unwrap();
        assert!(out.status.success(), "{self:?} try: {}", out.status);
        let mut v = json_line(&out.stdout);
        if self == Side::Rust {
            // The two sides' words for the same outcome.
            let r = match v["result"].as_str().unwrap() {
                "WouldBlock" | "TimedOut" => "timeout".to_owned(),
                other => other.to_lowercase(),
            };
            v["result"] = r.into();
        }
        v
    }

    /// `count` write holds, each creating `witness` exclusively.
    pub fn storm(
        self,
        path: &Path,
        count: usize,
        witness: &Path,
        terms: Terms,
    ) -> std::process::Child {
        let (p, w) = (path.to_str().unwrap(), witness.to_str().unwrap());
        self.command("storm", &[p, &count.to_string(), w], terms)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

/// What filelock reads as the latest snapshot of the lock at `path`.
pub fn python_latest(path: &Path) -> Value {
    let out = python_command(&["latest", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    json_line(&out.stdout)
}

/// The JSON line of a participant's output (a worker's test harness
/// speaks around it).
pub fn json_line(out: &[u8]) -> Value {
    let text = String::from_utf8_lossy(out);
    let line = text
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON in {text:?}"));
    serde_json::from_str(line).unwrap()
}

/// The snapshot at generation `n`, read from disk: `(writer, readers)`.
pub fn snapshot(path: &Path, n: u128) -> Option<(Option<String>, Vec<String>)> {
    let file = log_dir(path).join("gen").join(format!("{n:020}"));
    let text = std::fs::read_to_string(file).ok()?;
    let mut writer = None;
    let mut readers = Vec::new();
    for line in text.lines() {
        if let Some(w) = line.strip_prefix("writer=") {
            writer = Some(w.to_owned());
        }
        if let Some(r) = line.strip_prefix("reader=") {
            readers.push(r.to_owned());
        }
    }
    Some((writer, readers))
}

/// The log's root.
pub fn log_dir(path: &Path) -> std::path::PathBuf {
    let mut root = path.as_os_str().to_owned();
    root.push(".rw");
    root.into()
}

/// The names in `holders/`.
pub fn holders(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(log_dir(path).join("holders"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The generations in `gen/`, ascending.
pub fn generations(path: &Path) -> Vec<u128> {
    let mut gens: Vec<u128> = std::fs::read_dir(log_dir(path).join("gen"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            (name.len() == 20).then(|| name.parse().ok()).flatten()
        })
        .collect();
    gens.sort();
    gens
}

/// The newest generation on disk.
pub fn newest(path: &Path) -> u128 {
    generations(path).last().copied().unwrap_or(0)
}

/// Reads a child's next JSON line.
pub fn next_line(stdout: &mut impl BufRead) -> Value {
    loop {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the participant ended without a word");
        if line.starts_with('{') {
            return serde_json::from_str(&line).unwrap();
        }
    }
}
