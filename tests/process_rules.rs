//! Android's process rules, on Linux: contenders of other accounts (an
//! app's UID), a `/proc` mounted `hidepid=2` (another account's
//! `/proc/<pid>` is invisible, as on Android since 7), and the liveness
//! probe's three answers under them (PROTOCOL 4.3, 13.2): a holder this
//! process cannot see is never judged dead for that, and one whose PID is
//! gone is (`kill(pid, 0)` answers `ESRCH` whatever `/proc` shows).
//!
//! Needs root (to take other accounts, and to mount `/proc` in a mount
//! namespace of its own), `setpriv` and `unshare` (util-linux).

#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// The holder's account and the contender's: neither is root, and they
/// are not each other.
const HOLDER: u32 = 43_211;
const CONTENDER: u32 = 43_212;

const SWAPLOCK: &str = env!("CARGO_BIN_EXE_swaplock");

/// `cmd` as account `uid` (no groups but its own).
fn as_account(uid: u32, cmd: &[&str]) -> Command {
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .arg("--clear-groups")
        .arg("--")
        .args(cmd)
        .current_dir("/");
    c
}

/// `script` (sh) as account `uid`, in a mount namespace of its own whose
/// `/proc` is a new instance mounted `hidepid=2`, in this PID namespace.
fn behind_hidepid(uid: u32, script: &str) -> Output {
    in_mount_namespace("mount -t proc -o hidepid=2 proc /proc", uid, script)
}

/// `script` (sh) as account `uid`, in a mount namespace of its own that
/// `setup` (sh, as root) prepares first.
fn in_mount_namespace(setup: &str, uid: u32, script: &str) -> Output {
    let inner = format!(
        "{setup} && exec setpriv --reuid={uid} --regid={uid} --clear-groups -- sh -c \"$0\"",
    );
    Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            &inner,
            script,
        ])
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .expect("unshare (util-linux): scripts/setup installs it")
}

/// A `swaplock run` holding the soft lock `lock` as account `uid`, and its
/// PID; it holds until its input closes.
fn holder(uid: u32, lock: &Path) -> (Child, u32) {
    let mut child = as_account(
        uid,
        &[SWAPLOCK, "run", "--kind", "soft", lock.to_str().unwrap()],
    )
    .args(["-c", "echo held; read x"])
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .spawn()
    .expect("setpriv (util-linux): scripts/setup installs it");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "held\n");
    let pid = child.id();
    (child, pid)
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}, out {:?}, err {:?}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_holder_of_another_account_behind_hidepid_is_never_broken_until_its_pid_is_gone() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root, to take other accounts and mount /proc");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let lock = dir.path().join("app.lock");
    let (mut held, pid) = holder(HOLDER, &lock);
    let marker = std::fs::read_to_string(&lock).unwrap();
    assert!(marker.contains(&pid.to_string()), "{marker:?}");

    // The setting is real: the holder's /proc entry is hidden from the
    // contender, and a signal to it is refused (EPERM: it exists).
    let look = behind_hidepid(
        CONTENDER,
        &format!("test -e /proc/{pid} && echo visible || echo hidden; kill -0 {pid} 2>&1 || true"),
    );
    let seen = String::from_utf8_lossy(&look.stdout);
    assert!(seen.starts_with("hidden\n"), "{}", text(&look));
    assert!(
        seen.contains("ermitted") || String::from_utf8_lossy(&look.stderr).contains("ermitted"),
        "{}",
        text(&look)
    );

    // Busy, not broken: the probe says the PID exists, and the start token
    // it cannot read cannot say another process took it.
    let lock_arg = lock.to_str().unwrap();
    let attempt = format!("{SWAPLOCK} run --kind soft -n {lock_arg} -c 'echo ran'");
    let busy = behind_hidepid(CONTENDER, &attempt);
    assert_eq!(busy.status.code(), Some(255), "{}", text(&busy));
    assert!(!String::from_utf8_lossy(&busy.stdout).contains("ran"));
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), marker, "untouched");
    let status = behind_hidepid(
        CONTENDER,
        &format!("{SWAPLOCK} status --kind soft {lock_arg}"),
    );
    let said = String::from_utf8_lossy(&status.stdout).to_lowercase();
    assert!(said.contains(&pid.to_string()), "{}", text(&status));
    assert!(
        !said.contains("dead") && !said.contains("gone"),
        "{}",
        text(&status)
    );

    // The holder killed and reaped: its PID is gone (ESRCH), which
    // hidepid does not hide, and the contender takes the lock over.
    held.kill().unwrap();
    held.wait().unwrap();
    drop(held.stdin.take());
    let took = behind_hidepid(
        CONTENDER,
        &format!("{SWAPLOCK} run --kind soft -w 10 {lock_arg} -c 'echo ran'"),
    );
    assert_eq!(took.status.code(), Some(0), "{}", text(&took));
    assert_eq!(String::from_utf8_lossy(&took.stdout), "ran\n");
}

/// `script` (sh) as account `uid`, in a mount namespace of its own where
/// the `/proc` entries of process `pid` that the liveness probe reads
/// (`stat`, `status`) are an unreadable file: a read a security policy
/// refuses (SELinux answers `EACCES`) while the process's directory stays
/// visible and `kill(pid, 0)` still answers.
fn behind_denied_reads(uid: u32, pid: u32, denied: &Path, script: &str) -> Output {
    let denied = denied.to_str().unwrap();
    let setup = format!(
        "mount --bind {denied} /proc/{pid}/stat && mount --bind {denied} /proc/{pid}/status"
    );
    in_mount_namespace(&setup, uid, script)
}

#[test]
fn a_holder_whose_proc_reads_are_denied_is_never_broken_until_its_pid_is_gone() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root, to take other accounts and mount over /proc");
        return;
    }
    // The holder of the contender's own account (its signal is allowed: the
    // probe says alive) and of another (refused: the probe says it exists).
    for holder_uid in [CONTENDER, HOLDER] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let denied = dir.path().join("denied");
        std::fs::write(&denied, "").unwrap();
        std::fs::set_permissions(&denied, std::fs::Permissions::from_mode(0o000)).unwrap();
        let lock = dir.path().join("app.lock");
        let (mut held, pid) = holder(holder_uid, &lock);
        let marker = std::fs::read_to_string(&lock).unwrap();
        let case = format!("holder of account {holder_uid}");

        // The setting is real: the directory is there, its reads refused.
        let look = behind_denied_reads(
            CONTENDER,
            pid,
            &denied,
            &format!("test -d /proc/{pid} && echo visible; cat /proc/{pid}/stat >/dev/null 2>&1 || echo denied"),
        );
        assert_eq!(
            String::from_utf8_lossy(&look.stdout),
            "visible\ndenied\n",
            "{case}: {}",
            text(&look)
        );

        // Busy, not broken: the start token it cannot read cannot say
        // another process took the PID.
        let lock_arg = lock.to_str().unwrap();
        let attempt = format!("{SWAPLOCK} run --kind soft -n {lock_arg} -c 'echo ran'");
        let busy = behind_denied_reads(CONTENDER, pid, &denied, &attempt);
        assert_eq!(busy.status.code(), Some(255), "{case}: {}", text(&busy));
        assert_eq!(
            std::fs::read_to_string(&lock).unwrap(),
            marker,
            "{case}: untouched"
        );
        let status = behind_denied_reads(
            CONTENDER,
            pid,
            &denied,
            &format!("{SWAPLOCK} status --kind soft {lock_arg}"),
        );
        let said = String::from_utf8_lossy(&status.stdout).to_lowercase();
        assert!(said.contains(&pid.to_string()), "{case}: {}", text(&status));
        assert!(
            !said.contains("dead") && !said.contains("gone") && !said.contains("reused"),
            "{case}: {}",
            text(&status)
        );

        // Killed and reaped: ESRCH, and the contender takes the lock over
        // (the denied files are mounted on a /proc entry that is gone).
        held.kill().unwrap();
        held.wait().unwrap();
        let took = Command::new("setpriv")
            .arg(format!("--reuid={CONTENDER}"))
            .arg(format!("--regid={CONTENDER}"))
            .args([
                "--clear-groups",
                "--",
                SWAPLOCK,
                "run",
                "--kind",
                "soft",
                "-w",
                "10",
            ])
            .arg(&lock)
            .args(["-c", "echo ran"])
            .current_dir("/")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(took.status.code(), Some(0), "{case}: {}", text(&took));
        assert_eq!(String::from_utf8_lossy(&took.stdout), "ran\n", "{case}");
    }
}
