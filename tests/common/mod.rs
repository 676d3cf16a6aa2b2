//! Helpers shared by the integration tests: running the reference and our
//! binaries, and holding a lock in a child process until told to let go.

#![allow(dead_code, unreachable_pub)]

#[cfg(target_os = "linux")]
pub mod netfs;
mod portable;
#[cfg(any(target_os = "linux", target_os = "android"))]
pub mod rw;
#[cfg(any(target_os = "linux", target_os = "android"))]
pub mod rw_chaos;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod seccomp;
pub mod stress;
pub mod worker;

// Each test uses some of them.
#[allow(unused_imports)]
pub use portable::{
    command, free_port, held_by_a_thread, held_for_the_reference, ofd, open_rw, others, reference,
    run, swaplock, REFERENCE,
};

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// Waits until `done` holds, looking again every few milliseconds, and
/// fails the test naming `what` after `limit`: for conditions outside the
/// test's reach (a server listening, a mount showing, a child's exit with
/// a deadline), which no pipe or exit can signal. The condition, not the
/// pause, is what the test waits for.
pub fn poll_until(limit: std::time::Duration, what: &str, done: impl FnMut() -> bool) {
    assert!(poll_within(limit, done), "{what}: not within {limit:?}");
}

/// [`poll_until`] that answers whether `done` held within `limit`.
pub fn poll_within(limit: std::time::Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while !done() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    true
}

/// This package's with-lock-ex: `$SWAPLOCK_WITH_LOCK_EX` when set (another
/// build of it, such as `scripts/build-small`'s), else cargo's.
pub fn ours() -> PathBuf {
    std::env::var_os("SWAPLOCK_WITH_LOCK_EX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_with-lock-ex")))
}

/// How a shell script runs one of this package's binaries: its path, after
/// `SWAPLOCK_TEST_RUNNER` when that is set (see [`command`]).
pub fn invocation(binary: &Path) -> String {
    match std::env::var("SWAPLOCK_TEST_RUNNER") {
        Ok(runner) if binary != Path::new(REFERENCE) => format!("{runner} {}", binary.display()),
        _ => binary.display().to_string(),
    }
}

/// `threads` threads each take a lock `rounds` times (`take(thread,
/// round)`), stay a moment in a critical section that notices company,
/// and let go (`release(guard, round)`): how many times two were inside
/// at once.
pub fn take_turns<G: 'static>(
    threads: usize,
    rounds: usize,
    take: impl Fn(usize, usize) -> G + Send + Sync + 'static,
    release: impl Fn(G, usize) + Send + Sync + 'static,
) -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let (take, release) = (Arc::new(take), Arc::new(release));
    let all: Vec<_> = (0..threads)
        .map(|t| {
            let (inside, overlaps) = (inside.clone(), overlaps.clone());
            let (take, release) = (take.clone(), release.clone());
            std::thread::spawn(move || {
                for i in 0..rounds {
                    let guard = take(t, i);
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    std::thread::yield_now();
                    inside.fetch_sub(1, Ordering::SeqCst);
                    release(guard, i);
                }
            })
        })
        .collect();
    for t in all {
        t.join().unwrap();
    }
    overlaps.load(Ordering::SeqCst)
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

    /// A holder from a child already spawned, its first line read.
    pub fn from_parts(
        child: Child,
        stdin: Option<ChildStdin>,
        stdout: BufReader<ChildStdout>,
    ) -> Self {
        Holder {
            child,
            stdin,
            stdout,
        }
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

/// The Python with filelock 4.2.11: `$SWAPLOCK_PYTHON`, or the workspace's
/// `.venv` that `scripts/setup` creates.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("SWAPLOCK_PYTHON") {
        return p.into();
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    assert!(
        venv.exists(),
        "no Python with filelock 4.2.11: run scripts/setup (looked for {})",
        venv.display()
    );
    venv
}

/// `python tests/peer/soft_peer.py ARGS...` as a command.
pub fn peer_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(python());
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peer/soft_peer.py"))
        .args(args);
    cmd
}

/// Runs the Python peer to completion and parses its JSON answer.
pub fn peer(args: &[&str]) -> serde_json::Value {
    let out = peer_command(args)
        .stderr(Stdio::inherit())
        .output()
        .expect("run the Python peer");
    assert!(
        out.status.success(),
        "soft_peer.py {args:?} failed: {}",
        out.status
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("soft_peer.py {args:?}: {e}: {:?}", out.stdout))
}

/// A loopback TCP port bound and not listened on, kept so while the
/// socket lives: a connection to it is refused, and no server another
/// test starts meanwhile can take it ([`free_port`]'s port is free only
/// when asked).
#[cfg(unix)]
pub fn refused_port() -> (std::os::fd::OwnedFd, u16) {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: a socket this function owns from its creation, and a
    // sockaddr_in of the size given, filled by getsockname.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0, "a socket: {}", std::io::Error::last_os_error());
        let fd = OwnedFd::from_raw_fd(fd);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let size = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let at = &mut addr as *mut libc::sockaddr_in as *mut libc::sockaddr;
        assert_eq!(libc::bind(fd.as_raw_fd(), at, size), 0, "bind");
        let mut len = size;
        assert_eq!(libc::getsockname(fd.as_raw_fd(), at, &mut len), 0);
        (fd, u16::from_be(addr.sin_port))
    }
}

/// The PID of a process that has exited: a record naming it is stale.
pub fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// A bindfs (FUSE) mount, which answers `renameat2(RENAME_EXCHANGE)` with
/// `EINVAL`, as NFS and SMB refuse it; unmounted on drop.
pub struct NoExchangeMount {
    pub mount: tempfile::TempDir,
    _source: tempfile::TempDir,
}

impl NoExchangeMount {
    pub fn new() -> Self {
        let source = tempfile::tempdir().unwrap();
        let mount = tempfile::tempdir().unwrap();
        let status = Command::new("bindfs")
            .arg(source.path())
            .arg(mount.path())
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "bindfs failed: run scripts/setup (it installs bindfs) as root, with /dev/fuse"
        );
        NoExchangeMount {
            mount,
            _source: source,
        }
    }
}

impl Drop for NoExchangeMount {
    fn drop(&mut self) {
        let _ = Command::new("fusermount")
            .arg("-u")
            .arg(self.mount.path())
            .status();
    }
}

/// A tmpfs mounted with `options` (for example `nr_inodes=16,size=1m`, or
/// `ro,size=1m`), unmounted on drop. The tests that mount run as root.
pub struct Tmpfs(pub tempfile::TempDir);

impl Tmpfs {
    pub fn mount(options: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(dir.path())
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "mounting a tmpfs failed: these tests run as root (scripts/test)"
        );
        Tmpfs(dir)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

/// Runs `swaplock ARGS...` under strace, which kills it with SIGKILL on
/// entry to its `nth` call of `syscall` (a crash at a chosen point);
/// returns strace's status, which ends as its tracee did. Emulated targets
/// cannot be traced this way: callers skip under `SWAPLOCK_TEST_RUNNER`.
pub fn swaplock_killed_at(
    syscall: &str,
    nth: u32,
    args: &[&std::ffi::OsStr],
) -> std::process::ExitStatus {
    Command::new("strace")
        .args(["-f", "-o", "/dev/null", "-e"])
        .arg(format!("inject={syscall}:signal=KILL:when={nth}"))
        .arg(swaplock())
        .args(args)
        .status()
        .expect("strace (Debian strace) runs swaplock")
}
