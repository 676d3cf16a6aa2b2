//! Platform behaviour a review found, reached for real where this machine
//! can: a kernel without `getrandom` (before Linux 3.17, as on many Android
//! 5-7 devices) is a seccomp filter that answers `ENOSYS`.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Every takeover, release and lease needs a random token. Without
/// `getrandom` it comes from `/dev/urandom`, as bionic's `getentropy` does,
/// instead of a panic at the first takeover.
#[test]
fn without_getrandom_tokens_come_from_dev_urandom() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let dead = {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    };
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
