//! Helpers shared by the integration tests: running the reference and our
//! binaries, and holding a lock in a child process until told to let go.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};

/// Debian chiark-utils-bin's with-lock-ex, the reference.
pub const REFERENCE: &str = "/usr/bin/with-lock-ex";

pub fn ours() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_with-lock-ex"))
}

pub fn reference() -> PathBuf {
    let path = PathBuf::from(REFERENCE);
    assert!(
        path.exists(),
        "{REFERENCE} is missing: run scripts/setup (it installs chiark-utils-bin)"
    );
    path
}

/// Runs `binary` as `with-lock-ex` (the name its messages print) in `dir`.
pub fn run(binary: &Path, dir: &Path, args: &[&str]) -> Output {
    Command::new(binary)
        .arg0("with-lock-ex")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("spawn with-lock-ex")
}

/// A child process that holds a lock until dropped or released: it prints
/// a line once it holds the lock, then waits for its stdin to close.
pub struct Holder {
    pub child: Child,
    stdin: Option<ChildStdin>,
    pub stdout: BufReader<ChildStdout>,
}

impl Holder {
    /// Spawns `program args...`, which must print one line once it holds the
    /// lock and then block reading stdin, and waits for that line.
    pub fn spawn(mut cmd: Command) -> (Holder, String) {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn holder");
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("holder's ready line");
        assert!(
            !line.is_empty(),
            "holder exited before holding the lock: {:?}",
            child.wait()
        );
        (
            Holder {
                child,
                stdin,
                stdout,
            },
            line.trim_end().to_owned(),
        )
    }

    /// Tells the holder to finish and waits for it.
    pub fn release(mut self) -> std::process::ExitStatus {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"\n");
        }
        self.child.wait().expect("wait holder")
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A shell command that announces its PID once running and then waits for
/// a line on stdin (the holder's lifetime).
pub const HOLD: &str = "echo $$; read x";
