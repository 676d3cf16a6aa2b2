//! Syscalls per uncontended acquire and release, counted by strace: the
//! identity (host name, start token, namespaces) is computed once per
//! process, not at every acquire, and each kind stays within its budget.
//! The cycle measured is a process's third, so one-time work (the boot id,
//! the first directory open of the runtime) is not counted.

#![cfg(any(target_os = "linux", target_os = "android"))]

use std::path::Path;
use std::process::Command;
use swaplock::{FileLock, SoftLock};

/// The child's marks around the cycle: stats of names that do not exist,
/// which strace shows with their path.
const BEGIN: &str = "/swaplock-syscalls-begin";
const END: &str = "/swaplock-syscalls-end";

/// The child: three cycles of `kind` on `path`, the last between marks;
/// or (`timed-fcntl`, `timed-flock`, `soft-wait-MS`) a timed wait that times
/// out on a lock this process holds through another open file or lock
/// object, between marks.
fn cycles(kind: &str, path: &Path) {
    if let Some(ms) = kind.strip_prefix("soft-wait-") {
        let _held = SoftLock::soft(path).lock().unwrap();
        let _ = std::fs::symlink_metadata(BEGIN);
        let waited = SoftLock::soft(path)
            .poll_interval(std::time::Duration::from_millis(2))
            .lock_timeout(std::time::Duration::from_millis(ms.parse().unwrap()));
        let _ = std::fs::symlink_metadata(END);
        assert_eq!(waited.unwrap_err().kind(), std::io::ErrorKind::TimedOut);
        return;
    }
    if let Some(kind) = kind.strip_prefix("timed-") {
        let lock = || match kind {
            "flock" => FileLock::flock(path),
            _ => FileLock::new(path),
        };
        let _held = lock().lock().unwrap();
        let _ = std::fs::symlink_metadata(BEGIN);
        let waited = lock().lock_timeout(std::time::Duration::from_millis(300));
        let _ = std::fs::symlink_metadata(END);
        assert_eq!(waited.unwrap_err().kind(), std::io::ErrorKind::TimedOut);
        return;
    }
    let soft = |p: &Path| match kind {
        "soft" => SoftLock::soft(p),
        "soft-volatile" => SoftLock::soft(p).durable(false),
        "marker" => SoftLock::marker(p),
        _ => SoftLock::lease(p),
    };
    // A kernel lock object reads the umask when made (the mode of a file
    // it may create): made once, as a program that locks often keeps it.
    let kernel = match kind {
        "flock" => FileLock::flock(path),
        "fcntl-local" => FileLock::new(path).allow_client_local(true),
        _ => FileLock::new(path),
    };
    for n in 0..3 {
        if n == 2 {
            let _ = std::fs::symlink_metadata(BEGIN);
        }
        match kind {
            "fcntl" | "fcntl-local" | "flock" => kernel.lock().unwrap().release().unwrap(),
            _ => soft(path).lock().unwrap().release().unwrap(),
        }
        if n == 2 {
            let _ = std::fs::symlink_metadata(END);
        }
    }
}

/// The child's trace: each line a thread's ID and a call.
fn traced(kind: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    let status = Command::new("strace")
        .args(["-f", "-qq", "-o"])
        .arg(&trace)
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--include-ignored"])
        .env("SWAPLOCK_SYSCALLS_CHILD", kind)
        .env("SWAPLOCK_SYSCALLS_PATH", dir.path().join("l.lock"))
        .stdout(std::process::Stdio::null())
        .status()
        .expect("strace (Debian strace) runs the child: scripts/setup installs it");
    assert!(status.success());
    std::fs::read_to_string(trace).unwrap()
}

/// The syscalls the child's thread made between its marks, as strace shows
/// them.
fn counted(kind: &str) -> Vec<String> {
    let trace = traced(kind);
    let begin = trace.lines().position(|l| l.contains(BEGIN)).unwrap();
    let end = trace.lines().position(|l| l.contains(END)).unwrap();
    let tid = trace.lines().nth(begin).unwrap().split(' ').next().unwrap();
    trace
        .lines()
        .take(end)
        .skip(begin + 1)
        .filter(|l| l.split(' ').next() == Some(tid))
        .filter_map(|l| l.split_once(' ').map(|(_, call)| call.trim_start()))
        // "<... read resumed>" halves of calls another thread interrupted.
        .filter(|c| !c.starts_with("<..."))
        // Debug builds of std check that a descriptor is open before
        // closing it.
        .filter(|c| !(c.starts_with("fcntl") && c.contains("F_GETFD")))
        // Memory, signal-mask and futex calls are the allocator's and threads'
        // start-up's (a lease's heartbeat), which differ between C
        // libraries, not the lock's.
        .filter(|c| {
            let name = c.split('(').next().unwrap_or_default();
            !matches!(
                name,
                "mmap"
                    | "mmap2"
                    | "munmap"
                    | "mprotect"
                    | "brk"
                    | "madvise"
                    | "rt_sigprocmask"
                    | "futex"
            )
        })
        .map(str::to_owned)
        .collect()
}

/// Every thread's calls between the child's marks, as strace shows them.
fn every_thread_between_marks(trace: &str) -> Vec<&str> {
    let lines: Vec<&str> = trace.lines().collect();
    let begin = lines.iter().position(|l| l.contains(BEGIN)).unwrap();
    let end = lines.iter().position(|l| l.contains(END)).unwrap();
    lines[begin + 1..end]
        .iter()
        .filter_map(|l| l.split_once(' ').map(|(_, call)| call.trim_start()))
        .collect()
}

#[test]
#[ignore = "the child the counting tests run under strace"]
fn child() {
    if let (Ok(kind), Some(path)) = (
        std::env::var("SWAPLOCK_SYSCALLS_CHILD"),
        std::env::var_os("SWAPLOCK_SYSCALLS_PATH"),
    ) {
        cycles(&kind, Path::new(&path));
    }
}

#[test]
fn an_uncontended_cycle_stays_within_its_syscall_budget() {
    if std::env::var_os("SWAPLOCK_TEST_RUNNER").is_some() {
        // An emulator cannot be traced this way.
        return;
    }
    // The budgets: what each kind's protocol needs, as measured (a
    // regression guard). `getpid` calls are a handful of the counted: the
    // fork checks ask for the PID afresh. 32-bit Linux takes classic
    // `fcntl` locks with the process's registry between threads, and its
    // C library may split a call in two.
    let wide = cfg!(target_pointer_width = "64");
    for (kind, budget) in [
        ("fcntl", if wide { 14 } else { 22 }),
        ("flock", if wide { 15 } else { 16 }),
        ("soft", 40),
        ("soft-volatile", 39),
        ("marker", 40),
        ("lease", if wide { 46 } else { 48 }),
    ] {
        let calls = counted(kind);
        // The marker's record is synced before its link (PROTOCOL 7.2
        // step 3), and the release's placeholder before its own (7.10).
        let syncs = calls.iter().filter(|c| c.starts_with("fsync(")).count();
        let expected = 2 * usize::from(matches!(kind, "soft" | "marker" | "lease"));
        assert_eq!(syncs, expected, "{kind}: {calls:#?}");
        let names: Vec<&str> = calls
            .iter()
            .map(|c| c.split('(').next().unwrap_or_default())
            .collect();
        println!("{kind}: {} syscalls: {}", calls.len(), names.join(" "));
        assert!(
            calls.len() <= budget || std::env::var_os("SWAPLOCK_SYSCALLS_SHOW").is_some(),
            "{kind}: {} syscalls per uncontended cycle, over its budget of {budget}: {calls:#?}",
            calls.len()
        );
        // The identity is the process's, computed once: no namespace but
        // the time namespace (which `setns` can change) and no start time
        // is looked up again.
        for call in &calls {
            assert!(
                !call.contains("/proc/self/ns/pid")
                    && !call.contains("/stat\"")
                    && !call.contains("/proc/self/status"),
                "{kind}: looked up its identity again: {call}"
            );
        }
    }
}

/// On a local filesystem the with-lock-ex check is chiark's `fstat` against
/// `stat`: no exclusive create asks a server about the name (as on a
/// network filesystem, PROTOCOL 7.16), also for a lock allowed to be this
/// client's alone, whose filesystem is not judged.
#[test]
fn on_a_local_filesystem_the_identity_check_asks_no_server() {
    if std::env::var_os("SWAPLOCK_TEST_RUNNER").is_some() {
        return;
    }
    for kind in ["fcntl", "fcntl-local"] {
        let calls = counted(kind);
        assert!(
            calls.iter().any(|c| c.starts_with("newfstatat")
                || c.starts_with("statx")
                || c.starts_with("stat")
                || c.starts_with("lstat")),
            "{kind}: the check's stat: {calls:#?}"
        );
        let asked: Vec<&String> = calls.iter().filter(|c| c.contains("O_EXCL")).collect();
        assert!(asked.is_empty(), "{kind}: {asked:#?}");
    }
}

/// A soft lock's wait judges the directory's filesystem once, however
/// many attempts it makes: each attempt looks at the lock path before
/// making its record only where the filesystem's exclusive rename is
/// trusted (PROTOCOL 7.2 step 3), and an open directory stays on the
/// filesystem it was opened on.
#[test]
fn a_soft_wait_judges_its_filesystem_once() {
    if std::env::var_os("SWAPLOCK_TEST_RUNNER").is_some() {
        return;
    }
    // A wait long enough for two attempts at least, under strace on a busy
    // machine.
    let mut attempts = 0;
    for ms in [200, 800, 3200] {
        let trace = traced(&format!("soft-wait-{ms}"));
        let calls = every_thread_between_marks(&trace);
        // An attempt that finds the lock held judges the marker there,
        // which it pins first: an `O_PATH` open of the lock path.
        attempts = calls
            .iter()
            .filter(|c| c.starts_with("openat(") && c.contains("O_PATH"))
            .count();
        let judged = calls.iter().filter(|c| c.starts_with("fstatfs(")).count();
        println!("soft-wait-{ms}: {attempts} attempts, {judged} fstatfs");
        // The new lock object's judgement of its directory (PROTOCOL
        // 13.5), and the wait's of how the filesystem renames.
        assert!(
            judged <= 2,
            "{judged} fstatfs in {attempts} attempts: {calls:#?}"
        );
        if attempts >= 2 {
            break;
        }
    }
    assert!(
        attempts >= 2,
        "{attempts} attempts in a wait of 3.2 s polling every 2 ms"
    );
}

/// A timed wait for a kernel lock waits in the kernel: between its first
/// attempt and its deadline it makes one blocking lock call (on a thread
/// of its own), where polling would make one attempt every few
/// milliseconds (about 15 in 300 ms). (An `flock` lock, and an `fcntl`
/// lock where it is an open file description lock: 64-bit Linux. A
/// classic lock's wait polls.)
#[test]
fn a_timed_wait_for_a_kernel_lock_does_not_poll() {
    if std::env::var_os("SWAPLOCK_TEST_RUNNER").is_some() {
        return;
    }
    let ofd = cfg!(target_pointer_width = "64");
    for kind in ["timed-fcntl", "timed-flock"] {
        if kind == "timed-fcntl" && !ofd {
            continue;
        }
        let trace = traced(kind);
        // Every thread's lock calls (a blocked call shows as unfinished).
        let calls: Vec<&str> = every_thread_between_marks(&trace)
            .into_iter()
            .filter(|c| c.starts_with("flock(") || (c.starts_with("fcntl(") && c.contains("SETLK")))
            .collect();
        println!("{kind}: {calls:#?}");
        let blocking = calls
            .iter()
            .filter(|c| c.contains("SETLKW") || (c.contains("LOCK_EX") && !c.contains("LOCK_NB")))
            .count();
        assert!(
            calls.len() <= 3,
            "{kind}: {} lock calls in a 300 ms timed wait: {calls:#?}",
            calls.len()
        );
        assert_eq!(blocking, 1, "{kind}: one blocking lock call: {calls:#?}");
    }
}
