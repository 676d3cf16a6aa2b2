//! Worker processes for the Windows tests: the test executable started
//! again to run only its ignored `worker` test, with the job in the
//! `SWAPLOCK_WINDOWS_WORKER` variable.

#[path = "../common/worker.rs"]
mod worker;

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};

/// The variable that carries a worker's job.
pub(crate) const WORKER: &str = "SWAPLOCK_WINDOWS_WORKER";

/// This test executable, set to run its `worker` test on `spec`.
pub(crate) fn worker_process(spec: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(worker::WORKER_ARGS).env(WORKER, spec);
    cmd
}

/// A worker on `spec` that holds a lock until told to let go, once it
/// printed `held`.
pub(crate) fn holder(spec: &str) -> Child {
    let mut child = worker_process(spec)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !String::from_utf8_lossy(&seen).contains("held") {
        assert_eq!(out.read(&mut byte).unwrap(), 1, "the holder ended early");
        seen.push(byte[0]);
    }
    // Keep the pipe open: the worker still reports its test result.
    child.stdout = Some(out);
    child
}

/// Tells a [`holder`] to let go, and waits for it to succeed.
pub(crate) fn let_go(mut child: Child) {
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
}

/// In a worker: says `held`, then waits for a line on stdin.
pub(crate) fn hold_until_told() {
    println!("held");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
}

/// Runs `n` workers on `spec` at once and waits for all to succeed.
pub(crate) fn run_all(spec: &str, n: usize) {
    let children: Vec<Child> = (0..n)
        .map(|_| worker_process(spec).spawn().unwrap())
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
}

/// In a worker, under the lock: adds one to the number in `counter`,
/// yielding between the read and the write, so an overlapping holder
/// would lose an increment.
pub(crate) fn increment(counter: &str) {
    let now: u64 = std::fs::read_to_string(counter)
        .map(|t| t.trim().parse().unwrap())
        .unwrap_or(0);
    std::thread::yield_now();
    std::fs::write(counter, (now + 1).to_string()).unwrap();
}
