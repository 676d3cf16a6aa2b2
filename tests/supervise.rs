//! `swaplock run` for soft kinds, where a parent process holds the marker
//! and supervises the command: it never leaves the command, or anything the
//! command started, running outside the lock; it never spins, whatever
//! signal dispositions it inherits; it stops the command when a lease is
//! lost; and it says what went wrong, with distinct exit statuses for a
//! lost lease (75) and a failed release (74).
//!
//! Every wait here is on a process's exit or a pipe; the timeouts are
//! safety nets that turn a hang into a failure.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use common::swaplock;
use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use swaplock::soft::SoftLock;

/// How long any process here may take before the test counts it hung.
const SAFETY: Duration = Duration::from_secs(30);

/// The exit status of `swaplock run` whose lease was lost.
const LEASE_LOST: i32 = 75;
/// The exit status of `swaplock run` whose command succeeded but whose
/// release failed.
const RELEASE_FAILED: i32 = 74;

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `swaplock ARGS...`, with its output piped.
fn swaplock_command(args: &[&str]) -> Command {
    let mut cmd = common::command(&swaplock(), "swaplock");
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// A finished process: its status and what it wrote to its piped stderr.
struct Finished {
    status: ExitStatus,
    stderr: String,
}

/// Waits for `child` to exit and collects its piped output; `None` (after
/// killing it) if it is still running after [`SAFETY`].
fn finish(child: Child) -> Option<Finished> {
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(SAFETY) {
        Ok(out) => {
            let out = out.unwrap();
            Some(Finished {
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            })
        }
        Err(_) => {
            // SAFETY: signalling a child of this test, which is not reaped
            // yet (the waiting thread has not returned), so its PID is ours.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            None
        }
    }
}

fn run_to_end(args: &[&str]) -> Finished {
    let child = swaplock_command(args).spawn().unwrap();
    finish(child).unwrap_or_else(|| panic!("swaplock {args:?} hung"))
}

/// Sets `signals` to be ignored in a command's process before it execs,
/// as a parent that ignores them (`nohup`, a daemon) leaves them.
fn ignoring(cmd: &mut Command, signals: &'static [libc::c_int]) {
    disposing(cmd, signals, libc::SIG_IGN);
}

/// Starts `cmd` with `signals` at their default disposition, whatever the
/// test itself inherited (a run under `nohup` ignores SIGHUP).
fn defaulting(cmd: &mut Command, signals: &'static [libc::c_int]) {
    disposing(cmd, signals, libc::SIG_DFL);
}

fn disposing(cmd: &mut Command, signals: &'static [libc::c_int], how: libc::sighandler_t) {
    // SAFETY: signal(2) is async-signal-safe; the closure allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            for &signal in signals {
                if libc::signal(signal, how) == libc::SIG_ERR {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// The signals a process ignores, from `SigIgn:` in its `/proc/PID/status`
/// as `grep SigIgn /proc/self/status` prints it: bit `n - 1` for signal `n`.
fn ignored_mask(grep_output: &str) -> u64 {
    let hex = grep_output
        .trim()
        .strip_prefix("SigIgn:")
        .unwrap_or_else(|| panic!("not a SigIgn line: {grep_output:?}"))
        .trim();
    u64::from_str_radix(hex, 16).unwrap()
}

fn bit(signal: libc::c_int) -> u64 {
    1 << (signal - 1)
}

/// Whether process `pid` exists (a zombie counts).
fn exists(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Kills a process the test started indirectly, if a failing test leaves
/// it running.
struct KillOnDrop(libc::pid_t);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if exists(self.0) {
            // SAFETY: signalling a process this test's command started.
            unsafe { libc::kill(self.0, libc::SIGKILL) };
        }
    }
}

/// Spawns `swaplock run ... sh -c SCRIPT`, whose script prints one line
/// once it runs; returns the child and that line.
fn spawn_announcing(mut cmd: Command) -> (Child, String) {
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(!line.is_empty(), "the command exited before it announced");
    (child, line.trim_end().to_owned())
}

/// `swaplock run --kind KIND PATH sh -c SCRIPT`, its stderr discarded,
/// once the script has printed its first line: a PID.
fn run_announcing_pid(kind: &str, path: &Path, script: &str) -> (Child, libc::pid_t) {
    let mut cmd = swaplock_command(&["run", "--kind", kind, s(path), "sh", "-c", script]);
    cmd.stderr(Stdio::null());
    let (child, line) = spawn_announcing(cmd);
    (child, line.parse().unwrap())
}

#[test]
fn a_supervisor_that_inherits_sigchld_ignored_still_waits_releases_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let mut cmd = swaplock_command(&[
        "run",
        "--kind",
        "marker",
        s(&path),
        "grep",
        "SigIgn",
        "/proc/self/status",
    ]);
    ignoring(&mut cmd, &[libc::SIGCHLD]);
    let out = finish(cmd.spawn().unwrap())
        .expect("swaplock run hung: it cannot wait for its command with SIGCHLD ignored");
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    assert!(!path.exists(), "the marker stayed");
}

#[test]
fn signals_inherited_as_ignored_stay_ignored_in_the_command() {
    if std::env::var_os("SWAPLOCK_TEST_RUNNER").is_some() {
        // An emulator keeps the emulated process's dispositions to itself:
        // the host command it execs starts with the host's defaults.
        eprintln!("skipped under an emulator: it does not pass ignored signals to exec");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    for kind in ["soft", "marker", "lease"] {
        let mut cmd = swaplock_command(&[
            "run",
            "--kind",
            kind,
            s(&path),
            "grep",
            "SigIgn",
            "/proc/self/status",
        ]);
        ignoring(&mut cmd, &[libc::SIGHUP, libc::SIGINT, libc::SIGTERM]);
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{kind}: {out:?}");
        let mask = ignored_mask(&String::from_utf8_lossy(&out.stdout));
        for (name, signal) in [
            ("SIGHUP", libc::SIGHUP),
            ("SIGINT", libc::SIGINT),
            ("SIGTERM", libc::SIGTERM),
        ] {
            assert_ne!(
                mask & bit(signal),
                0,
                "{kind}: the command no longer ignores {name} (SigIgn {mask:x})"
            );
        }
        // Signals that were not ignored are not ignored in the command.
        let mut cmd = swaplock_command(&[
            "run",
            "--kind",
            kind,
            s(&path),
            "grep",
            "SigIgn",
            "/proc/self/status",
        ]);
        defaulting(&mut cmd, &[libc::SIGHUP, libc::SIGINT, libc::SIGTERM]);
        let out = cmd.output().unwrap();
        let mask = ignored_mask(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(
            mask & (bit(libc::SIGHUP) | bit(libc::SIGTERM)),
            0,
            "{kind}: SigIgn {mask:x}"
        );
    }
}

#[test]
fn sigterm_to_the_supervisor_ends_the_commands_background_children_before_release() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let (child, grandchild) = run_announcing_pid("marker", &path, "sleep 1000 & echo $!; wait");
    let _cleanup = KillOnDrop(grandchild);
    assert!(path.exists());
    // SAFETY: signalling our own, unreaped child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let out = finish(child).expect("swaplock run hung after SIGTERM");
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM));
    assert!(!path.exists(), "the marker stayed");
    // The supervisor released only once its command's group was gone (and
    // reaped the orphans it adopted), so this holds at its exit already.
    assert!(
        !exists(grandchild),
        "the command's background child {grandchild} outlived the lock"
    );
}

/// How `killing_the_supervisor_ends_the_commands_whole_group` kills it.
#[derive(Clone, Copy, Debug)]
enum Kill {
    /// SIGKILL to the supervisor alone.
    Supervisor,
    /// SIGKILL to the supervisor's process group, as `timeout(1)` or a
    /// shell ending a job sends it.
    ItsGroup,
}

/// Runs a command whose background child, a subshell, keeps writing to
/// the run's standard output, SIGKILLs the supervisor as `how` says once
/// the subshell writes, and returns once every process holding that
/// output is gone (its end of file), or fails after [`SAFETY`].
fn kill_the_supervisor_of_a_writing_grandchild(kind: &str, how: Kill) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let script = "(while :; do echo tick; sleep 0.01; done) & wait";
    let mut cmd = swaplock_command(&["run", "--kind", kind, s(&path), "sh", "-c", script]);
    cmd.stderr(Stdio::null()).process_group(0);
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "tick\n", "{kind}: the subshell did not start");
    let pid = child.id() as libc::pid_t;
    let target = match how {
        Kill::Supervisor => pid,
        Kill::ItsGroup => -pid,
    };
    // SAFETY: signalling our own unreaped child, or the group it leads.
    assert_eq!(unsafe { libc::kill(target, libc::SIGKILL) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{kind} {how:?}");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut rest);
        let _ = tx.send(rest.len());
    });
    // If the subshell ran on, this test's exit closes the pipe and its
    // next write ends it with SIGPIPE.
    rx.recv_timeout(SAFETY).unwrap_or_else(|_| {
        panic!("{kind} {how:?}: the command's subshell ran on after its supervisor was killed")
    });
}

#[test]
fn killing_the_supervisor_ends_the_commands_whole_group() {
    for kind in ["marker", "lease"] {
        kill_the_supervisor_of_a_writing_grandchild(kind, Kill::Supervisor);
    }
}

#[test]
fn killing_the_supervisors_own_group_ends_the_commands_group_too() {
    for kind in ["marker", "lease"] {
        kill_the_supervisor_of_a_writing_grandchild(kind, Kill::ItsGroup);
    }
}

#[test]
fn a_background_child_left_by_the_command_is_ended_before_release() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    for kind in ["soft", "marker", "lease"] {
        // A child that ignores SIGTERM: only the KILL after the grace
        // period ends it.
        let script = "sh -c 'trap \"\" TERM; exec sleep 1000' & echo $!; exit 3";
        let (child, grandchild) = run_announcing_pid(kind, &path, script);
        let _cleanup = KillOnDrop(grandchild);
        let out = finish(child).expect("swaplock run hung");
        assert_eq!(out.status.code(), Some(3), "{kind}: the command's status");
        assert!(!path.exists(), "{kind}: the marker stayed");
        assert!(
            !exists(grandchild),
            "{kind}: the command's background child {grandchild} outlived the lock"
        );
    }
}

#[test]
fn a_lost_lease_stops_the_command_and_exits_75() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    // The command itself takes the marker away, as a peer that wrongly
    // broke the lease would.
    let script = format!("rm -f '{}' && exec sleep 1000", s(&path));
    let out = run_to_end(&[
        "run",
        "--kind",
        "lease",
        "--lease",
        "1",
        s(&path),
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(
        out.status.code(),
        Some(LEASE_LOST),
        "the command ran on after its lease was lost: {}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains(&format!("the lease on {} was lost", s(&path)))
            && out.stderr.contains("the command was stopped"),
        "{}",
        out.stderr
    );
}

/// Makes a directory immutable (`chattr +i`): nothing in it can be
/// created, renamed or removed, even by root. Undone on drop.
struct Immutable(PathBuf);

impl Immutable {
    fn command(dir: &Path) -> String {
        format!("chattr +i '{}'", s(dir))
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-i").arg(&self.0).status();
    }
}

#[test]
fn a_failed_release_exits_74_and_says_it_could_not_release() {
    let dir = tempfile::tempdir().unwrap();
    let probe = dir.path().join("probe");
    std::fs::create_dir(&probe).unwrap();
    let ok = Command::new("sh")
        .args(["-c", &Immutable::command(&probe)])
        .status()
        .unwrap()
        .success();
    drop(Immutable(probe));
    assert!(
        ok,
        "chattr +i fails here: these tests need a filesystem with immutable \
         directories (ext4, xfs, btrfs) under the temporary directory, and root"
    );
    for kind in ["soft", "marker", "lease"] {
        for (exit, expected) in [("0", RELEASE_FAILED), ("3", 3)] {
            let locks = dir.path().join(format!("{kind}-{exit}"));
            std::fs::create_dir(&locks).unwrap();
            let _undo = Immutable(locks.clone());
            let path = locks.join("a.lock");
            // The command makes the release fail: the lock's directory
            // becomes immutable while it runs.
            let script = format!("{} && exit {exit}", Immutable::command(&locks));
            let out = run_to_end(&["run", "--kind", kind, s(&path), "sh", "-c", &script]);
            assert_eq!(out.status.code(), Some(expected), "{kind}: {}", out.stderr);
            assert!(
                out.stderr.contains(s(&path)) && out.stderr.contains("could not release"),
                "{kind}: {}",
                out.stderr
            );
            assert!(
                !out.stderr.contains("acquire"),
                "{kind}: a release failure read as an acquire failure: {}",
                out.stderr
            );
        }
    }
}

#[test]
fn a_read_only_directory_is_an_error_that_names_the_path_and_the_errno() {
    let fs = common::Tmpfs::mount("ro,size=1m");
    for path in [fs.0.path().join("a.lock"), fs.0.path().join("sub/a.lock")] {
        for kind in ["soft", "marker", "lease"] {
            // Even --quiet reports it: the lock is not busy, it cannot be made.
            let out = run_to_end(&["run", "--quiet", "--kind", kind, s(&path), "true"]);
            assert_eq!(out.status.code(), Some(255), "{kind}: {}", out.stderr);
            assert!(
                out.stderr.contains(s(&path)) && out.stderr.contains("Read-only file system"),
                "{kind}: {}",
                out.stderr
            );
            assert!(
                !out.stderr.contains("could not be acquired"),
                "{kind}: an error read as a busy lock: {}",
                out.stderr
            );
        }
        let err = SoftLock::marker(&path).try_lock().unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ReadOnlyFilesystem, "{err}");
    }
}

/// A holder of `kind` on `path`: `swaplock run` holding it until killed.
fn holder(kind: &str, path: &Path, extra: &[&str]) -> (Child, u32) {
    let mut args = vec!["run", "--kind", kind];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[s(path), "sh", "-c", "echo $$; exec sleep 1000"]);
    let mut cmd = swaplock_command(&args);
    cmd.stderr(Stdio::null());
    let (child, _) = spawn_announcing(cmd);
    let pid = child.id();
    (child, pid)
}

fn end(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn the_busy_message_is_one_sentence_naming_the_path_and_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    for kind in ["soft", "marker", "lease"] {
        let (child, pid) = holder(kind, &path, &[]);
        let out = run_to_end(&["run", "--fail", "--kind", kind, s(&path), "true"]);
        end(child);
        assert_eq!(out.status.code(), Some(255), "{kind}");
        let text = out.stderr.trim_end();
        assert_eq!(text.lines().count(), 1, "{kind}: {text}");
        assert_eq!(text.matches(s(&path)).count(), 1, "{kind}: {text}");
        assert!(
            !text.contains("could not acquire lock"),
            "{kind}: the message repeats itself: {text}"
        );
        assert!(
            text.contains(&format!("held by pid {pid} on ")),
            "{kind}: the holder is not named: {text}"
        );
    }
}

#[test]
fn a_lease_duration_mismatch_names_the_lease_option() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let (child, _) = holder("lease", &path, &["--lease", "30"]);
    let out = run_to_end(&[
        "run",
        "--fail",
        "--kind",
        "lease",
        "--lease",
        "10",
        s(&path),
        "true",
    ]);
    end(child);
    assert_eq!(out.status.code(), Some(255));
    assert!(
        out.stderr.contains("lasts 30 s") && out.stderr.contains("pass --lease 30"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_stale_marker_that_cannot_be_exchanged_is_explained_with_the_remedy() {
    let fs = common::NoExchangeMount::new();
    let path = fs.mount.path().join("a.lock");
    for kind in ["soft", "marker"] {
        // A holder killed outright leaves its marker, naming a dead PID.
        let (mut child, pid) = holder(kind, &path, &[]);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(path.exists());
        let remedy = format!("swaplock break --force {}", s(&path));

        let out = run_to_end(&["run", "--kind", kind, "--timeout", "0.2", s(&path), "true"]);
        assert_eq!(out.status.code(), Some(255), "{kind}: {}", out.stderr);
        assert!(
            out.stderr.contains("cannot exchange names") && out.stderr.contains(&remedy),
            "{kind}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains(&format!("pid {pid} on ")),
            "{kind}: {}",
            out.stderr
        );

        let status = swaplock_command(&["status", "--kind", kind, s(&path)])
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&status.stdout).contains("holder dead"),
            "{kind}: {status:?}"
        );

        // break judges as status does: the holder is dead, so it does not
        // call it alive; it says why the marker stays and what to run.
        let out = run_to_end(&["break", "--kind", kind, s(&path)]);
        assert_eq!(out.status.code(), Some(1), "{kind}: {}", out.stderr);
        assert!(
            !out.stderr.contains("may be alive")
                && out.stderr.contains("cannot exchange names")
                && out.stderr.contains(&remedy),
            "{kind}: {}",
            out.stderr
        );
        assert!(path.exists());

        let out = run_to_end(&["break", "--force", "--kind", kind, s(&path)]);
        assert_eq!(out.status.code(), Some(0), "{kind}: {}", out.stderr);
        assert!(!path.exists(), "{kind}: the marker stayed");
    }
}

#[test]
fn break_refuses_a_live_holder_and_says_it_is_alive() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let (child, pid) = holder("marker", &path, &[]);
    let out = run_to_end(&["break", "--kind", "marker", s(&path)]);
    end(child);
    assert_eq!(out.status.code(), Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("pid {pid} on ")) && out.stderr.contains("alive"),
        "{}",
        out.stderr
    );
}

/// The state letter of process `pid` (`/proc/PID/stat`): `T` when stopped.
fn state(pid: libc::pid_t) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name, which ends with the last ')'.
    stat.rsplit(')')
        .next()
        .and_then(|rest| rest.trim_start().chars().next())
        .unwrap_or('?')
}

/// Waits, without sleeping, until `pid` is in a state `want` says yes to,
/// or [`SAFETY`] passes.
fn until_state(pid: libc::pid_t, want: impl Fn(char) -> bool) -> char {
    let start = std::time::Instant::now();
    loop {
        let now = state(pid);
        if want(now) || start.elapsed() > SAFETY {
            return now;
        }
        std::thread::yield_now();
    }
}

/// A supervisor stopped alone (SIGTSTP sent to it, not to its command's
/// group) would leave its command running while a lease expires: the
/// command's group stops with it, and goes on with it.
#[test]
fn a_stop_sent_to_the_supervisor_stops_its_command_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let (supervisor, command) = run_announcing_pid("marker", &path, "echo $$; exec sleep 1000");
    let _guard = KillOnDrop(command);
    let pid = supervisor.id() as libc::pid_t;
    // SAFETY: signalling the supervisor this test started.
    unsafe { libc::kill(pid, libc::SIGTSTP) };
    assert_eq!(
        until_state(pid, |c| c == 'T'),
        'T',
        "the supervisor did not stop"
    );
    // The group's SIGSTOP went out before the supervisor stopped itself;
    // the command acts on it as soon as it is scheduled.
    assert_eq!(
        until_state(command, |c| c == 'T'),
        'T',
        "the command ran on while its supervisor was stopped"
    );
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert_ne!(
        until_state(command, |c| c != 'T'),
        'T',
        "the command did not go on"
    );
    end(supervisor);
}
