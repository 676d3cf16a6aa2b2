//! The with-lock-ex command against Debian's chiark-utils-bin 7.0.0: the
//! same exit codes, stdout and stderr, byte for byte, and mutual exclusion
//! with it, with Python's fcntl.lockf, and across deletion of the lock file.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use common::{command, invocation, ours, reference, run, Holder, HOLD};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

fn both(dir: &std::path::Path, args: &[&str]) -> (Output, Output) {
    (run(&reference(), dir, args), run(&ours(), dir, args))
}

/// The reference's message as it would read built against the C library
/// this test is linked with. The reference is glibc's build; its `strerror`
/// texts (as glibc's Python reports them) become this libc's for the same
/// errno (musl's differ: "No error information" for 0, for instance).
fn in_local_libc(reference_text: &str) -> String {
    static TABLE: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let out = Command::new("python3")
            .args([
                "-c",
                "import os\nfor n in range(134): print(os.strerror(n))",
            ])
            .output()
            .expect("python3 for glibc's strerror texts");
        let glibc = String::from_utf8(out.stdout).unwrap();
        glibc
            .lines()
            .enumerate()
            .map(|(n, text)| {
                // SAFETY: strerror returns a pointer to a NUL-terminated
                // string, copied before any other call to strerror on this
                // thread.
                let local = unsafe { std::ffi::CStr::from_ptr(libc::strerror(n as i32)) };
                (
                    format!(": {text}\n"),
                    format!(": {}\n", local.to_string_lossy()),
                )
            })
            .collect()
    });
    let found = table
        .iter()
        .find(|(glibc, _)| reference_text.ends_with(glibc.as_str()));
    match found {
        Some((glibc, local)) => {
            let stem = &reference_text[..reference_text.len() - glibc.len()];
            format!("{stem}{local}")
        }
        None => reference_text.to_owned(),
    }
}

fn assert_same(case: &str, theirs: &Output, mine: &Output) {
    assert_eq!(
        theirs.status.code(),
        mine.status.code(),
        "exit status of {case}"
    );
    assert_eq!(
        in_local_libc(&String::from_utf8_lossy(&theirs.stderr)),
        String::from_utf8_lossy(&mine.stderr),
        "stderr of {case}"
    );
    assert_eq!(theirs.stdout, mine.stdout, "stdout of {case}");
}

#[test]
fn usage_options_and_errors_match_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[&[&str]] = &[
        &[],
        &["-w", "-f", "L", "true"],
        &["-wq", "L", "true"],
        &["-t", "5", "-w", "L", "true"],
        &["-t", "1", "-l", "L"],
        &["-t", "-1", "-f", "L", "true"],
        &["-t", "abc", "-f", "L", "true"],
        &["-t", "", "-f", "L", "true"],
        &["-t", "08", "-f", "L", "true"],
        &["-t", "0x", "-f", "L", "true"],
        &["-t", "99999999999999999999", "-f", "L", "true"],
        &["-t", "0x10", "-f", "L", "true"],
        &["-t", " 5", "-q", "L", "true"],
        &["-t5", "-f", "L", "true"],
        &["-ft", "0", "L", "true"],
        &["-x", "L", "true"],
        &["-t"],
        &["-f", "nodir/L", "true"],
        &["-f", "L", "/nonexistent-command"],
        &["-f", "L", "sh", "-c", "exit 7"],
        &["L", "sh", "-c", "exit 3"],
        &["-q", "L", "sh", "-c", "echo ran"],
        &["-w", "L", "sh", "-c", "echo \"$0\" \"$@\"", "-f", "-w"],
        &["--", "L", "true"],
        &["-f", "--", "L", "true"],
        &["-", "true"],
        &["-l", "nofile"],
        &["-l"],
    ];
    for args in cases {
        let (theirs, mine) = both(dir.path(), args);
        assert_same(&format!("{args:?}"), &theirs, &mine);
    }
    // A lock file that is a symlink is followed, as by the reference.
    std::os::unix::fs::symlink("target", dir.path().join("link")).unwrap();
    let (theirs, mine) = both(dir.path(), &["-f", "link", "true"]);
    assert_same("a symlinked lock file", &theirs, &mine);
    assert!(dir.path().join("target").exists());
}

#[test]
fn a_missing_command_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["L"][..], &["-f", "L"], &["-w", "L"]] {
        let out = run(&ours(), dir.path(), args);
        assert_eq!(out.status.code(), Some(255), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).starts_with("usage: with-lock-ex -w|-q|-f"),
            "{args:?}"
        );
    }
}

#[test]
fn creates_the_lock_file_with_the_reference_mode() {
    for umask in ["002", "022", "077", "000", "027"] {
        let mut modes = Vec::new();
        for binary in [reference(), ours()] {
            let dir = tempfile::tempdir().unwrap();
            let status = Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "umask {umask}; exec {} -f L true",
                    invocation(&binary)
                ))
                .current_dir(dir.path())
                .status()
                .unwrap();
            assert!(status.success());
            modes.push(
                std::fs::metadata(dir.path().join("L"))
                    .unwrap()
                    .permissions()
                    .mode()
                    & 0o777,
            );
        }
        assert_eq!(modes[0], modes[1], "umask {umask}");
    }
}

/// Holds `L` in `dir` with `holder_binary -w L sh -c HOLD`.
fn hold(holder_binary: &std::path::Path, dir: &std::path::Path) -> (Holder, String) {
    let mut cmd = command(holder_binary, "with-lock-ex");
    cmd.args(["-w", "L", "sh", "-c", HOLD]).current_dir(dir);
    Holder::spawn(cmd)
}

#[test]
fn a_held_lock_excludes_in_both_directions() {
    for holder_binary in [reference(), ours()] {
        let dir = tempfile::tempdir().unwrap();
        let (holder, pid) = hold(&holder_binary, dir.path());
        // The command runs in the with-lock-ex process itself: no process in between.
        assert_eq!(pid, holder.child.id().to_string());

        let cases: &[&[&str]] = &[
            &["-f", "L", "sh", "-c", "echo ran"],
            &["L", "sh", "-c", "echo ran"],
            &["-q", "L", "sh", "-c", "echo ran"],
            &["-t", "1", "-q", "L", "sh", "-c", "echo ran"],
            &["-t", "1", "-f", "L", "sh", "-c", "echo ran"],
            &["-l", "L"],
        ];
        for args in cases {
            let (theirs, mine) = both(dir.path(), args);
            assert_same(&format!("{args:?} against a holder"), &theirs, &mine);
            let stdout = String::from_utf8_lossy(&mine.stdout);
            assert!(
                !stdout.contains("ran"),
                "{args:?} ran its command while the lock was held"
            );
        }
        let busy = run(&ours(), dir.path(), &["-f", "L", "true"]);
        assert_eq!(
            String::from_utf8_lossy(&busy.stderr),
            "with-lock-ex true: could not acquire lock: Resource temporarily unavailable\n"
        );
        assert_eq!(busy.status.code(), Some(255));
        let list = run(&ours(), dir.path(), &["-l", "L"]);
        assert_eq!(
            String::from_utf8_lossy(&list.stdout),
            format!("write {pid}\n")
        );

        assert!(holder.release().success());
        let (theirs, mine) = both(dir.path(), &["-f", "L", "sh", "-c", "echo ran"]);
        assert_same("after release", &theirs, &mine);
        assert_eq!(mine.stdout, b"ran\n");
    }
}

#[test]
fn excludes_python_lockf_both_ways_but_not_flock() {
    let dir = tempfile::tempdir().unwrap();
    let python = "import fcntl, sys\nf = open('L', 'a')\nfcntl.lockf(f, fcntl.LOCK_EX)\nprint('locked', flush=True)\nsys.stdin.readline()\n";
    let mut cmd = Command::new("python3");
    cmd.args(["-c", python]).current_dir(dir.path());
    let (holder, _) = Holder::spawn(cmd);
    let out = run(&ours(), dir.path(), &["-f", "L", "true"]);
    assert_eq!(
        out.status.code(),
        Some(255),
        "a Python lockf holder must block us"
    );
    drop(holder);

    let (holder, _) = hold(&ours(), dir.path());
    let probe = "import fcntl\nf = open('L', 'a')\ntry:\n    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    print('acquired')\nexcept OSError:\n    print('busy')\n";
    let out = Command::new("python3")
        .args(["-c", probe])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "busy\n",
        "our holder must block Python's lockf"
    );
    drop(holder);

    // flock(1) takes a different kind of lock, which fcntl locks do not see.
    let mut cmd = Command::new("flock");
    cmd.args(["L", "sh", "-c", HOLD]).current_dir(dir.path());
    let (holder, _) = Holder::spawn(cmd);
    let out = run(&ours(), dir.path(), &["-f", "L", "true"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "an flock holder does not exclude an fcntl lock"
    );
    drop(holder);
}

/// Waits until `/proc/locks` shows `n` processes blocked on a POSIX lock of
/// the file with inode `ino`.
fn wait_for_waiters(ino: u64, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let locks = std::fs::read_to_string("/proc/locks").unwrap();
        let blocked = locks
            .lines()
            .filter(|l| l.contains("->") && l.contains("POSIX"))
            .filter(|l| {
                l.split_whitespace()
                    .any(|w| w.rsplit(':').next() == Some(&ino.to_string()))
            })
            .count();
        if blocked >= n {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "waiters never queued: {locks}"
        );
        std::thread::yield_now();
    }
}

#[test]
fn waiters_follow_a_deleted_lock_file_one_at_a_time() {
    use std::os::unix::fs::MetadataExt;
    for holder_binary in [reference(), ours()] {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = command(&holder_binary, "with-lock-ex");
        cmd.args(["-w", "L", "sh", "-c", "echo $$; read x; rm L"])
            .current_dir(dir.path());
        let (holder, _) = Holder::spawn(cmd);
        let old_ino = std::fs::metadata(dir.path().join("L")).unwrap().ino();

        // Each waiter, once inside, proves it is alone (noclobber creation of
        // "inside" fails if another is inside), records the file it locked,
        // and deletes the lock file too before leaving.
        let inside =
            "set -C; : > inside || { echo OVERLAP; exit 1; }; stat -c %i L >> seen; rm inside L";
        let waiters: Vec<_> = (0..4)
            .map(|i| {
                let binary = if i % 2 == 0 { ours() } else { reference() };
                command(&binary, "with-lock-ex")
                    .args(["-w", "L", "sh", "-c", inside])
                    .current_dir(dir.path())
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        wait_for_waiters(old_ino, 4);
        assert!(holder.release().success());
        for w in waiters {
            let out = w.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "waiter: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        let seen = std::fs::read_to_string(dir.path().join("seen")).unwrap();
        let inodes: Vec<&str> = seen.lines().collect();
        assert_eq!(inodes.len(), 4, "every waiter got the lock once: {seen}");
        assert!(!dir.path().join("L").exists() && !dir.path().join("inside").exists());
    }
}
