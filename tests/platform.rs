//! Platform behaviour a review found, reached for real where this machine
//! can: a kernel without `getrandom` (before Linux 3.17, as on many Android
//! 5-7 devices) is a seccomp filter that answers `ENOSYS`; Android 8-10's
//! app policy, which kills a process that calls `statx`, is a filter that
//! traps it.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::os::unix::process::CommandExt;

/// Every takeover, release and lease needs a random token. Without
/// `getrandom` it comes from `/dev/urandom`, as bionic's `getentropy` does,
/// instead of a panic at the first takeover.
#[test]
fn without_getrandom_tokens_come_from_dev_urandom() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let dead = common::dead_pid();
    let host = swaplock_linux::soft::host_name();
    for errno in [libc::ENOSYS, libc::EPERM] {
        // A dead holder's marker: `break` takes it over (a break name with a
        // token), then releases (a placeholder with another).
        std::fs::write(&path, format!("{dead}\n{host}\n")).unwrap();
        let mut cmd = common::command(&common::swaplock(), "swaplock");
        cmd.args(["break", "--kind", "soft"]).arg(&path);
        // SAFETY: the filter only calls prctl, which is async-signal-safe.
        unsafe { cmd.pre_exec(move || common::seccomp::deny(libc::SYS_getrandom, errno)) };
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "errno {errno}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!path.exists(), "errno {errno}: the stale marker stayed");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "errno {errno}: left {left:?}");
    }
}

/// Android 8.0 to 10 kill an app that calls `statx` (`SECCOMP_RET_TRAP`,
/// `SIGSYS`), which 32-bit rustix makes for every stat; the Android adapter
/// stats through bionic there (`swaplock_unix::stat`). Here the same filter
/// shows that no stat of any lock kind or command is a `statx`, and GNU
/// `stat`, which calls it, shows that the filter bites. Only in the musl
/// build: std for glibc sizes every `fs::read` with `statx`, which std for
/// Android and musl does not.
#[test]
#[cfg(target_env = "musl")]
fn no_lock_kind_calls_statx() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Command;
    let dir = tempfile::tempdir().unwrap();
    let trapped = |mut cmd: Command| {
        // SAFETY: the filter only calls prctl, which is async-signal-safe.
        unsafe { cmd.pre_exec(|| common::seccomp::trap(libc::SYS_statx)) };
        cmd.output().unwrap()
    };
    let mut probe = Command::new("stat");
    probe.arg(dir.path());
    // GNU stat calls statx (coreutils 8.32 and later).
    let out = trapped(probe);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGSYS),
        "the filter does not trap statx"
    );
    for kind in ["fcntl", "flock", "soft", "marker", "lease"] {
        // A lock file of its own each: a kernel lock's file stays, and a
        // soft kind would take it for a recordless holder's marker.
        let lock = dir.path().join(format!("{kind}.lock"));
        let mut cmd = common::command(&common::swaplock(), "swaplock");
        cmd.args(["run", "--kind", kind])
            .arg(&lock)
            .args(["sh", "-c", "echo held"]);
        let out = trapped(cmd);
        assert_eq!(
            (
                out.status.signal(),
                out.status.code(),
                out.stdout.as_slice()
            ),
            (None, Some(0), b"held\n".as_slice()),
            "{kind}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let lock = dir.path().join("stale.lock");
    let dead = common::dead_pid();
    let host = swaplock_linux::soft::host_name();
    std::fs::write(&lock, format!("{dead}\n{host}\n")).unwrap();
    for args in [
        &["status", "--kind", "soft"][..],
        &["break", "--kind", "soft"][..],
    ] {
        let mut cmd = common::command(&common::swaplock(), "swaplock");
        cmd.args(args).arg(&lock);
        let out = trapped(cmd);
        assert_eq!(out.status.signal(), None, "{args:?} was killed");
    }
    assert!(!lock.exists(), "break left the stale marker");
    let mut cmd = common::command(&common::ours(), "with-lock-ex");
    cmd.arg("-w").arg(&lock).arg("true");
    let out = trapped(cmd);
    assert!(out.status.success(), "with-lock-ex: {:?}", out.status);
}
