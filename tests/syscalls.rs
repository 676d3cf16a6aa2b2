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

/// The child: three cycles of `kind` on `path`, the last between marks.
fn cycles(kind: &str, path: &Path) {
    let soft = |p: &Path| match kind {
        "soft" => SoftLock::soft(p),
        "marker" => SoftLock::marker(p),
        _ => SoftLock::lease(p),
    };
    // A kernel lock object reads the umask when made (the mode of a file
    // it may create): made once, as a program that locks often keeps it.
    let kernel = match kind {
        "flock" => FileLock::flock(path),
        _ => FileLock::new(path),
    };
    for n in 0..3 {
        if n == 2 {
            let _ = std::fs::symlink_metadata(BEGIN);
        }
        match kind {
            "fcntl" | "flock" => kernel.lock().unwrap().unlock().unwrap(),
            _ => soft(path).lock().unwrap().release().unwrap(),
        }
        if n == 2 {
            let _ = std::fs::symlink_metadata(END);
        }
    }
}

/// The syscalls the child made between its marks, as strace shows them.
fn counted(kind: &str) -> Vec<String> {
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
    let trace = std::fs::read_to_string(trace).unwrap();
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
        ("marker", 40),
        ("lease", if wide { 46 } else { 48 }),
    ] {
        let calls = counted(kind);
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
