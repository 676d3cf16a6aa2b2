//! The `swaplock` command as a user meets it on Linux: options spelled as
//! flock(1) spells them (`--opt=value`, `--`, `-c`, `-w`), unknown options
//! refused, `status` of every kind naming its holder (as text and as
//! JSON), and `--verbose` naming the holder while it waits. What every
//! platform tests alike (help and version, the conflict status):
//! `cli_portable.rs`.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use common::{command, swaplock, Holder, HOLD};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn cli() -> Command {
    command(&swaplock(), "swaplock")
}

fn run(args: &[&str]) -> Output {
    cli().args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Holds `path` with `swaplock run --kind KIND`, the command printing its
/// PID and waiting: the holder, and the PID that holds the lock (the
/// command's, which kernel kinds exec; soft kinds' supervisor is its
/// parent).
fn held_by_command(kind: &str, path: &Path) -> (Holder, u32) {
    let mut cmd = cli();
    cmd.args(["run", "--kind", kind])
        .arg(path)
        .args(["sh", "-c", HOLD]);
    let (holder, line) = Holder::spawn(cmd);
    let pid: u32 = line.parse().unwrap();
    let holding = match kind {
        "fcntl" | "flock" => pid,
        _ => {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            after.split(' ').nth(1).unwrap().parse().unwrap()
        }
    };
    (holder, holding)
}

#[test]
fn options_are_refused_or_taken_as_flock_takes_them() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("o.lock");
    let lock = lock.to_str().unwrap();
    // An unknown option is an error, never a lock file.
    let out = run(&["run", "-x", lock, "true"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(text(&out.stderr).contains("-x"), "{out:?}");
    // -w is the timeout, as in flock(1): a lock file is no number.
    let out = run(&["run", "-w", lock, "true"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        text(&out.stderr).contains("not a number of seconds"),
        "{out:?}"
    );
    // --opt=value, and -- before the command.
    let out = run(&[
        "run",
        "--kind=fcntl",
        "--timeout=5",
        lock,
        "--",
        "echo",
        "ran",
    ]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(text(&out.stdout), "ran\n");
    // Options after the lock file belong to the command.
    let out = run(&["run", "--kind", "fcntl", lock, "echo", "-s", "--kind"]);
    assert_eq!(text(&out.stdout), "-s --kind\n");
    // An option of another command.
    let out = run(&["status", "--force", lock]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// `-c` runs a shell command under the lock, which another process sees
/// held meanwhile. Kernel kinds exec the command, which then holds the
/// lock itself and cannot see it held: the shell asks from a child of its
/// own. (On Windows `run` keeps the lock and starts the command as its
/// child, which asks itself: `windows_cli.rs`.)
#[test]
fn a_shell_command_runs_under_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let me = swaplock();
    // The command, through the emulator when the tests run under one.
    let me = match std::env::var("SWAPLOCK_TEST_RUNNER") {
        Ok(runner) => format!("{runner} {}", me.display()),
        Err(_) => me.display().to_string(),
    };
    // A path per kind: every process on a path must use the same kind.
    for kind in ["fcntl", "flock", "marker"] {
        let lock = dir.path().join(format!("{kind}.lock"));
        let lock = lock.to_str().unwrap();
        let inner = format!("{me} status --kind {kind} {lock} >/dev/null; echo $?");
        let out = run(&["run", "--kind", kind, lock, "-c", &inner]);
        assert!(out.status.success(), "{kind}: {out:?}");
        assert_eq!(
            text(&out.stdout),
            "1\n",
            "{kind}: the lock was not held: {out:?}"
        );
        let out = run(&["run", "-c", "true", "--kind", kind, lock]);
        assert!(
            out.status.success(),
            "{kind}: -c before the lock file: {out:?}"
        );
    }
}

/// `status` of every kind names the holder's PID; `--json` says the same
/// as one object.
#[test]
fn status_of_every_kind_names_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["fcntl", "flock", "soft", "marker", "lease"] {
        let path = dir.path().join(format!("{kind}.lock"));
        let p = path.to_str().unwrap();
        let out = run(&["status", "--kind", kind, p]);
        assert_eq!(out.status.code(), Some(0), "{kind}: {out:?}");
        let stdout = text(&out.stdout);
        let mut lines = stdout.lines();
        assert_eq!(lines.next(), Some("free"), "{stdout}");
        // The filesystem, and what it offers a lock: a local one here.
        #[cfg(target_os = "linux")]
        {
            let fs = lines.next().unwrap_or_default();
            assert!(fs.starts_with("filesystem: "), "{stdout}");
            assert!(fs.contains("fcntl locks reach all hosts"), "{stdout}");
        }
        assert_eq!(lines.next(), None, "{stdout}");
        let out = run(&["status", "--kind", kind, "--json", p]);
        let free: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        #[cfg(target_os = "linux")]
        assert_eq!(free["filesystem"]["remote"], "no", "{free}");
        assert_eq!(free["held"], false, "{kind}");
        assert_eq!(free["holder"], serde_json::Value::Null, "{kind}");
        assert_eq!(free["kind"], kind);

        let (holder, pid) = held_by_command(kind, &path);
        let out = run(&["status", "--kind", kind, p]);
        assert_eq!(out.status.code(), Some(1), "{kind}: {out:?}");
        assert!(
            text(&out.stdout).contains(&format!("pid {pid}")),
            "{kind}: {out:?}"
        );
        let out = run(&["status", "--kind", kind, "--json", p]);
        assert_eq!(out.status.code(), Some(1), "{kind}: {out:?}");
        let held: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(held["held"], true, "{kind}");
        assert_eq!(held["path"], p);
        assert_eq!(held["holder"]["pid"], pid, "{kind}: {held}");
        assert_eq!(held["holder"]["standing"], "alive", "{kind}: {held}");
        assert!(holder.release().success());
    }
}

/// `--verbose` says who holds the lock while it waits, then that it took
/// it.
#[test]
fn verbose_names_the_holder_while_waiting() {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["flock", "marker"] {
        let path = dir.path().join(format!("v-{kind}.lock"));
        let (holder, pid) = held_by_command(kind, &path);
        let mut waiter = cli()
            .args(["run", "-v", "--kind", kind])
            .arg(&path)
            .arg("true")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(waiter.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        assert!(line.contains("waiting for"), "{kind}: {line}");
        assert!(
            line.contains(&format!("held by pid {pid}")),
            "{kind}: {line}"
        );
        assert!(holder.release().success());
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
        assert!(waiter.wait().unwrap().success());
        assert!(rest.contains("took"), "{kind}: {rest}");
    }
}

/// An `flock` holder the kernel's lock table does not name to this
/// process (another PID namespace), or names by a process that has exited
/// since (a shell's `flock 9`, whose child holds the descriptor): `status`
/// still finds the lock held, with what can be said of its holder.
#[test]
fn status_finds_an_flock_holder_the_lock_table_does_not_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("n.lock");
    let p = path.to_str().unwrap();
    // flock(1) locks the shell's descriptor and exits.
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &format!("exec 9>'{p}'; flock 9; echo $$; read x")]);
    let (holder, _) = Holder::spawn(cmd);
    let out = run(&["status", "--kind", "flock", "--json", p]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let held: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(held["held"], true);
    assert_eq!(held["holder"]["standing"], "cannot tell", "{held}");
    // From another PID namespace the table names nobody: the probe finds
    // the holder, unnamed.
    let mut unshare = Command::new("unshare");
    unshare.args(["--pid", "--fork", "--mount-proc"]);
    // Through the emulator when the tests run under one.
    if let Some(runner) = std::env::var_os("SWAPLOCK_TEST_RUNNER") {
        unshare.arg(runner);
    }
    let out = unshare
        .arg(swaplock())
        .args(["status", "--kind", "flock", "--json", p])
        .output()
        .expect("unshare (util-linux) runs the status: scripts/setup installs it");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let held: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(held["holder"]["pid"], -1, "{held}");
    assert!(holder.release().success());
    let out = run(&["status", "--kind", "flock", p]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// `-n` never waits, a timeout given or not, as flock(1)'s.
#[test]
fn fail_wins_over_a_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.lock");
    let (holder, _) = held_by_command("flock", &path);
    let mut child = cli()
        .args(["run", "--kind", "flock", "-n", "-w", "3600"])
        .arg(&path)
        .arg("true")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let pid = child.id();
    let waiter = std::thread::spawn(move || {
        let status = child.wait().unwrap();
        tx.send(()).unwrap();
        status
    });
    if rx.recv_timeout(std::time::Duration::from_secs(60)).is_err() {
        // SAFETY: signals our own child, which waited for the lock.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        panic!("-n waited for the timeout");
    }
    assert_eq!(waiter.join().unwrap().code(), Some(255));
    assert!(holder.release().success());
}

/// A marker's mode that the reader does not know is reported as
/// `unknown`, with the mode as written as its reason, parentheses and all.
#[test]
fn status_json_keeps_an_unknown_modes_words_as_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.lock");
    std::fs::write(&path, "filelock/2\npid=1\nhost=vm\nmode=weird (x)\n").unwrap();
    let out = run(&[
        "status",
        "--kind",
        "lease",
        "--json",
        path.to_str().unwrap(),
    ]);
    let held: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(held["holder"]["mode"], "unknown", "{held}");
    assert_eq!(held["holder"]["reason"], "weird (x)", "{held}");
}

/// For each way a marker keeps contenders out, a busy soft lock's error and
/// `swaplock break` name the same remedy, the core's for how a contender
/// stands toward its holder, and neither removes the marker.
#[test]
fn the_busy_error_and_break_name_the_same_remedy() {
    use swaplock::core::soft::Remedy;
    use swaplock::soft::Advice;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.lock");
    let p = path.to_str().unwrap();
    let live = format!(
        "{}\n{}\n",
        std::process::id(),
        swaplock_linux::soft::host_name()
    );
    let cases: [(&str, &str, Remedy); 4] = [
        ("empty", "", Remedy::ForceIfUnheld),
        ("malformed", "not a record\n", Remedy::Grace),
        (
            "another host's",
            "123\nanother-host\n",
            Remedy::ForceOnceGone,
        ),
        ("a live holder's", &live, Remedy::Wait),
    ];
    for (what, content, remedy) in cases {
        std::fs::write(&path, content).unwrap();
        let advice = Advice::new(remedy, &path).to_string();
        assert!(
            advice.contains(&format!("swaplock break --force {p}")),
            "{what}: {advice}"
        );
        let err = swaplock::SoftLock::soft(&path).try_lock().unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock, "{what}");
        // A live holder's busy error names no remedy: it waits.
        if remedy != Remedy::Wait {
            assert!(err.to_string().contains(&advice), "{what}: {err}");
        }
        let out = run(&["break", "--kind", "soft", p]);
        assert_eq!(out.status.code(), Some(1), "{what}: {out:?}");
        assert!(
            text(&out.stderr).contains(&advice),
            "{what}: {}",
            text(&out.stderr)
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            content,
            "{what}: removed"
        );
    }
}

/// `swaplock break --kind lease` judges a lease on the duration its marker
/// publishes: a live holder's 6 s lease is refused as alive (not as a
/// duration mismatch, which no operator can act on), and `--force`
/// removes it without `--lease`.
#[test]
fn break_judges_a_lease_on_its_published_duration() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.lock");
    let p = path.to_str().unwrap();
    let guard = swaplock::SoftLock::lease(&path)
        .lease_duration(std::time::Duration::from_secs(6))
        .lock()
        .unwrap();
    let out = run(&["break", "--kind", "lease", p]);
    let said = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("refusing to break a holder that is alive"),
        "{said}"
    );
    assert!(path.exists(), "the live holder's marker stays");
    let out = run(&["break", "--kind", "lease", "--force", p]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!path.exists(), "broken by force");
    drop(guard);
}

/// `--no-sync` takes a soft lock whose markers are never synced (no
/// `fsync` at all, where a durable lock syncs its record and its release's
/// placeholder), and only a soft kind's.
#[test]
fn no_sync_writes_soft_markers_without_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("n.lock");
    let lock = lock.to_str().unwrap();
    for refused in [
        &["--kind", "fcntl"][..],
        &["--kind", "rw"],
        &["--kind", "strict"],
    ] {
        let mut args = vec!["run"];
        args.extend_from_slice(refused);
        args.extend(["--no-sync", lock, "true"]);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(
            text(&out.stderr).contains("--no-sync applies to soft kinds"),
            "{out:?}"
        );
    }
    let out = run(&["status", "--no-sync", lock]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    if std::env::var_os("SWAPLOCK_TEST_RUNNER").is_some() {
        // An emulator cannot be traced this way.
        return;
    }
    // The syscalls of `run` and of the command it starts, by strace.
    let fsyncs = |extra: &[&str]| {
        let trace = dir.path().join("trace");
        let mut cmd = Command::new("strace");
        cmd.args(["-f", "-qq", "-e", "trace=fsync,fdatasync", "-o"])
            .arg(&trace)
            .arg(swaplock())
            .args(["run", "--kind", "marker"])
            .args(extra)
            .args([lock, "cat", lock]);
        let out = cmd
            .output()
            .expect("strace (Debian strace) runs swaplock: scripts/setup installs it");
        assert!(out.status.success(), "{out:?}");
        // The command read the record while the lock was held.
        assert!(text(&out.stdout).contains("mode=exclusive"), "{out:?}");
        std::fs::read_to_string(&trace)
            .unwrap()
            .lines()
            .filter(|l| l.contains("fsync(") || l.contains("fdatasync("))
            .count()
    };
    assert_eq!(
        fsyncs(&[]),
        2,
        "a durable cycle syncs its record and placeholder"
    );
    assert_eq!(fsyncs(&["--no-sync"]), 0);
    assert!(!Path::new(lock).exists());
}

/// What contenders left beside the lock: `status` names each file and
/// what becomes of it, and `break` removes the write names that hold
/// their writer's own record of this host and whose writer is gone, and
/// nothing else: not a live writer's, not an unfinished one, not another
/// lock's marker whose name reads as a write name of this lock.
#[test]
fn status_reports_what_contenders_left_and_break_sweeps_dead_writers_names() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("s.lock");
    let lock = lock.to_str().unwrap();
    // The host name swaplock records, from a marker it writes.
    let out = run(&["run", "--kind", "marker", lock, "cat", lock]);
    let said = text(&out.stdout);
    let host = said
        .lines()
        .find_map(|l| l.strip_prefix("host="))
        .unwrap_or_else(|| panic!("{out:?}"))
        .to_owned();
    let record = |pid: u32| format!("filelock/2\npid={pid}\nhost={host}\nmode=exclusive\n");
    let token = "0123456789abcdef0123456789abcdef";
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let live = std::process::id();
    let dead_writer = format!("s.lock.write.{dead}.{token}");
    let live_writer = format!("s.lock.write.{live}.{token}");
    let unfinished = format!("s.lock.write.{dead}.{}", token.replace('0', "1"));
    // Another lock's marker, held by a live process, named like a write
    // name of this lock.
    let other_lock = format!("s.lock.write.{dead}.{}", token.replace('0', "2"));
    let breaker = format!("s.lock.break.{dead}.{token}");
    let foreign = format!("t.lock.write.{dead}.{token}");
    for (name, content) in [
        (&dead_writer, record(dead)),
        (&live_writer, record(live)),
        (&unfinished, String::new()),
        (&other_lock, record(live)),
        (&breaker, "filelock/break\n1\n".to_owned()),
        (&foreign, record(dead)),
    ] {
        std::fs::write(dir.path().join(name), content).unwrap();
    }
    let out = run(&["status", lock]);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let line = |name: &str| {
        said.lines()
            .find(|l| l.starts_with("beside the lock: ") && l.contains(name))
            .unwrap_or_else(|| panic!("{name} not reported: {said}"))
            .to_owned()
    };
    assert!(
        line(&dead_writer).contains("`swaplock break` removes it"),
        "{said}"
    );
    assert!(line(&live_writer).contains("PID runs: kept"), "{said}");
    for kept in [&unfinished, &other_lock] {
        assert!(line(kept).contains("not its writer's own record"), "{said}");
    }
    assert!(line(&breaker).contains("keeps nobody out"), "{said}");
    assert!(!said.contains(&foreign), "{said}");
    let out = run(&["status", "--json", lock]);
    let json = text(&out.stdout);
    assert!(
        json.contains(&format!(
            "{{\"name\":\"{dead_writer}\",\"kind\":\"write\",\"pid\":{dead},\"gone\":true}}"
        )),
        "{json}"
    );
    let out = run(&["break", lock]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text(&out.stdout).contains(&format!("removed {dead_writer}")),
        "{out:?}"
    );
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    let mut kept = vec![breaker, live_writer, unfinished, other_lock, foreign];
    kept.sort();
    assert_eq!(left, kept);
}
