//! `flock` answering `ENOSYS` (Android storage, some FUSE filesystems):
//! the lock falls back to a soft lock, filelock's `SoftFileLock`, after
//! removing the empty file its own attempt created while that file is
//! still open, and never a peer's soft marker found at the path.
//!
//! End to end, the `swaplock` command runs under a seccomp filter that
//! makes `flock(2)` fail with `ENOSYS`; at the seam, a peer replaces our
//! placeholder just before the failure.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use common::{peer, peer_command, swaplock, Holder};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use swaplock::core::decide::FileId;
use swaplock::core::kernel::{attempt, fall_back, KernelOs, Outcome};
use swaplock::core::soft::{Config, Kind};
use swaplock::core::Errno;
use swaplock_linux::kernel::{LockCall, UnixKernel};
use swaplock_linux::soft::{current_pid, host_name, open_dir, LinuxOs};

/// Makes `flock(2)` fail with `ENOSYS` in the calling process and its
/// children.
fn deny_flock() -> std::io::Result<()> {
    common::seccomp::deny(libc::SYS_flock, libc::ENOSYS)
}

use common::seccomp::deny_fcntl_locks;

/// `fcntl` answering `ENOSYS` is an error, reported as the reference
/// with-lock-ex reports it, never a switch to a soft lock beside the empty
/// file the attempt left (which no soft contender would ever evict).
#[test]
fn without_fcntl_locks_with_lock_ex_fails_as_the_reference_does() {
    let dir = tempfile::tempdir().unwrap();
    for mode in ["-w", "-f"] {
        let run = |binary: &Path| {
            let mut cmd = common::command(binary, "with-lock-ex");
            cmd.args([mode, "a.lock", "true"]).current_dir(dir.path());
            // SAFETY: deny_fcntl_locks only calls prctl, which is
            // async-signal-safe.
            unsafe { cmd.pre_exec(deny_fcntl_locks) };
            bounded(cmd)
        };
        let (ours, reference) = (run(&common::ours()), run(&common::reference()));
        assert_eq!(
            (ours.status.code(), String::from_utf8_lossy(&ours.stderr)),
            (
                reference.status.code(),
                String::from_utf8_lossy(&reference.stderr)
            ),
            "{mode}"
        );
        assert_eq!(ours.status.code(), Some(255), "{mode}");
        std::fs::remove_file(dir.path().join("a.lock")).unwrap();
    }
    // The swaplock command says the same, at once, even when told to wait.
    let mut cmd = common::command(&swaplock(), "swaplock");
    cmd.args([
        "run",
        "--kind",
        "fcntl",
        "--timeout",
        "30",
        "b.lock",
        "true",
    ])
    .current_dir(dir.path());
    // SAFETY: as above.
    unsafe { cmd.pre_exec(deny_fcntl_locks) };
    let out = bounded(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(255), "{stderr}");
    assert!(
        stderr.contains(&std::io::Error::from_raw_os_error(libc::ENOSYS).to_string()),
        "{stderr}"
    );
}

/// Runs `cmd` to the end, killing it if it runs a minute: a wedged lock
/// must fail the test, not hang it.
fn bounded(mut cmd: Command) -> std::process::Output {
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let guard = std::thread::spawn(move || {
        if wait
            .recv_timeout(std::time::Duration::from_secs(60))
            .is_err()
        {
            // SAFETY: signalling a child of this test.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let out = child.wait_with_output().unwrap();
    let _ = done.send(());
    guard.join().unwrap();
    out
}

fn swaplock_without_flock(args: &[&str]) -> Command {
    let mut cmd = common::command(&swaplock(), "swaplock");
    cmd.args(args);
    // SAFETY: deny_flock only calls prctl, which is async-signal-safe.
    unsafe { cmd.pre_exec(deny_flock) };
    cmd
}

#[test]
fn without_flock_the_lock_is_a_soft_file_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let p = path.to_str().unwrap();
    // The lock file while the command runs is a SoftFileLock marker naming swaplock.
    let mut cmd = swaplock_without_flock(&[
        "run",
        "--kind",
        "flock",
        p,
        "sh",
        "-c",
        &format!("cat {p}; {}", common::HOLD),
    ]);
    cmd.stdout(std::process::Stdio::piped())
        .stdin(std::process::Stdio::piped());
    let (holder, first) = Holder::spawn(cmd);
    assert_eq!(
        first,
        holder.child.id().to_string(),
        "the marker names the lock holder"
    );
    let owner = peer(&["owner", p]);
    assert_eq!(
        owner["soft_pid"],
        holder.child.id(),
        "Python's SoftFileLock reads our marker"
    );
    let answer = peer(&["try", "soft", p, "0"]);
    assert_eq!(
        answer["result"], "timeout",
        "Python's SoftFileLock is kept out"
    );
    assert!(holder.release().success());
    assert!(!path.exists(), "the soft lock's release removed its marker");

    // A Python SoftFileLock holder keeps the fallen-back lock out, and its
    // marker, which the attempt did not create, is left alone.
    let (holder, _) = Holder::spawn(peer_command(&["hold", "soft", p]));
    let before = std::fs::read(&path).unwrap();
    let out = swaplock_without_flock(&["run", "--kind", "flock", "--fail", p, "true"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(255),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    drop(holder);
}

/// The Linux kernel-lock operations, with `flock` answering `ENOSYS` after
/// a peer's step.
struct NoFlock<'p, F: FnMut()> {
    inner: UnixKernel<'p>,
    peer: F,
    /// A file made, with these bytes, as soon as a plain open finds none
    /// (a soft contender creating its marker between the attempt's two
    /// opens).
    made_between: Option<(&'p Path, &'static str)>,
}

impl<F: FnMut()> KernelOs for NoFlock<'_, F> {
    type File = OwnedFd;
    fn open(&mut self, exclusive: bool) -> Result<OwnedFd, Errno> {
        self.inner.open(exclusive)
    }
    fn open_existing(&mut self) -> Result<OwnedFd, Errno> {
        let opened = self.inner.open_existing();
        if opened.as_ref().is_err_and(|e| *e == Errno::NOENT) {
            if let Some((path, bytes)) = self.made_between.take() {
                std::fs::write(path, bytes).unwrap();
            }
        }
        opened
    }
    fn lock(&mut self, _: &OwnedFd, _: bool) -> Result<(), Errno> {
        (self.peer)();
        Err(Errno::NOSYS)
    }
    fn fstat(&mut self, file: &OwnedFd) -> Result<FileId, Errno> {
        self.inner.fstat(file)
    }
    fn stat(&mut self) -> Result<FileId, Errno> {
        self.inner.stat()
    }
    fn close(&mut self, file: OwnedFd) {
        self.inner.close(file)
    }
}

/// The core's fallback over the Linux adapter: remove the file if this
/// attempt created it, then close it.
fn fallback_cleanup(dir: &Path, file: OwnedFd, created: bool) {
    let host = host_name();
    let cfg = Config {
        kind: Kind::Soft,
        lock: b"a.lock",
        pid: current_pid(),
        host: &host,
        start: None,
        mode: None,
        lease: None,
        lifetime: None,
        durable: true,
    };
    let dirfd = open_dir(&std::ffi::CString::new(dir.to_str().unwrap()).unwrap()).unwrap();
    fall_back(
        &mut LinuxOs::new(std::os::fd::AsFd::as_fd(&dirfd)),
        &cfg,
        file,
        created,
    )
    .unwrap();
}

#[test]
fn the_fallback_removes_only_its_own_placeholder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let kernel = UnixKernel {
        path: &c_path,
        follow: false,
        mode: 0o644,
        call: LockCall::Flock,
        shared: false,
        names: swaplock_core::kernel::Names::Trusted,
    };

    // Alone: the placeholder this attempt created is removed.
    let mut os = NoFlock {
        inner: kernel,
        peer: || {},
        made_between: None,
    };
    match attempt(&mut os, false, true).unwrap() {
        Outcome::Unsupported { file, created } => {
            assert!(created);
            fallback_cleanup(dir.path(), file, created);
        }
        other => panic!("expected ENOSYS, got {other:?}"),
    }
    assert!(!path.exists());

    // A soft peer evicts our placeholder and publishes its marker before we
    // clean up: its marker must survive.
    let record = format!("{}\n{}\n", std::process::id(), host_name());
    let mut os = NoFlock {
        inner: kernel,
        peer: || {
            std::fs::remove_file(&path).unwrap();
            std::fs::write(&path, &record).unwrap();
        },
        made_between: None,
    };
    match attempt(&mut os, false, true).unwrap() {
        Outcome::Unsupported { file, created } => {
            assert!(created);
            fallback_cleanup(dir.path(), file, created);
        }
        other => panic!("expected ENOSYS, got {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        record,
        "the peer's marker was deleted"
    );

    // A marker that was there before the attempt is not ours: left alone.
    let mut os = NoFlock {
        inner: kernel,
        peer: || {},
        made_between: None,
    };
    match attempt(&mut os, false, true).unwrap() {
        Outcome::Unsupported { file, created } => {
            assert!(!created);
            fallback_cleanup(dir.path(), file, created);
        }
        other => panic!("expected ENOSYS, got {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        record,
        "a marker the attempt found was deleted"
    );
    let others: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(others.len(), 1, "left {others:?}");
}

/// The plain open finds no file, and a soft contender makes its marker
/// before the attempt's exclusive create: the attempt opens that file as
/// not its own, and the fallback leaves the peer's marker in place.
#[test]
fn a_file_made_between_the_two_opens_is_a_peers_and_stays() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let marker = "a peer's marker, made between the opens";
    let mut os = NoFlock {
        inner: UnixKernel {
            path: &cpath,
            follow: false,
            mode: 0o644,
            call: LockCall::Flock,
            shared: false,
            names: swaplock_core::kernel::Names::Trusted,
        },
        peer: || {},
        made_between: Some((&path, marker)),
    };
    match attempt(&mut os, false, true).unwrap() {
        Outcome::Unsupported { file, created } => {
            assert!(!created, "the peer's file was taken for the attempt's own");
            fallback_cleanup(dir.path(), file, created);
        }
        other => panic!("expected ENOSYS, got {other:?}"),
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), marker);
}

/// A shared `flock` has no soft form: without `flock` it reports `ENOSYS`,
/// and removes the empty file its attempt created, which a later exclusive
/// lock's soft fallback would otherwise take for a holder that recorded no
/// PID, for good.
#[test]
fn without_flock_a_shared_lock_fails_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.lock");
    let run = |args: &[&str]| {
        let mut cmd = common::command(&swaplock(), "swaplock");
        cmd.arg("run").args(args).arg(&path).args(["echo", "ran"]);
        // SAFETY: the filter only calls prctl, which is async-signal-safe.
        unsafe { cmd.pre_exec(deny_flock) };
        cmd.output().unwrap()
    };
    let out = run(&["--kind", "flock", "--shared", "--fail"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(255), "{stderr}");
    assert!(
        stderr.contains(&std::io::Error::from_raw_os_error(libc::ENOSYS).to_string()),
        "{stderr}"
    );
    assert!(!path.exists(), "the shared attempt left its empty file");
    // An exclusive lock then falls back to a soft lock and takes it.
    let out = run(&["--kind", "flock", "--fail"]);
    assert_eq!(
        (out.status.code(), out.stdout.as_slice()),
        (Some(0), b"ran\n".as_slice()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An `flock` lock that follows symlinks, at a symlink to a missing file:
/// the exclusive open finds the link, the open of the existing file finds
/// no target. The attempt ends, creating the target as a plain open does,
/// rather than trying the two opens for ever.
#[test]
fn a_followed_dangling_symlink_ends_the_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let target = dir.path().join("missing");
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let locker = {
        let path = path.clone();
        std::thread::spawn(move || {
            let taken = swaplock::FileLock::flock(&path)
                .follow_symlinks(true)
                .try_lock()
                .map(|g| g.release());
            done_tx.send(()).unwrap();
            taken
        })
    };
    done_rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the attempt never ended");
    locker.join().unwrap().unwrap().unwrap();
    assert!(target.exists(), "the plain open created the link's target");
}
