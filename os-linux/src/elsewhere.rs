//! Whether a record's owner runs in another PID namespace (PROTOCOL 4.5):
//! a scan of every task of `/proc`, and what a scan made while a holder
//! was still alive can answer once it has died, so that a takeover does
//! not wait for one.

use crate::proc::{boot_id, proc_dir, read_start_token, starttime_unshifted};
use rustix::fs::{Mode, OFlags};
use std::io::Read;
use std::sync::Mutex;
use swaplock_core::decide::{
    elsewhere_scan_applies, parse_nspid, scanned, task_is_owner, NsPid, Scanned,
};
use swaplock_core::start::START_DIGITS_MAX;
use swaplock_core::start::{parse_stat_starttime, StartToken};
use swaplock_core::{Decimal, Pid};

/// What one scan of every task saw: when it began, in clock ticks since
/// boot ([`ticks_now`]), every task of another PID namespace with its
/// innermost PID, and every task's number, ascending; and the forks
/// counted before the process that made it ([`crate::fork`]): a child's
/// PID namespace may not be its parent's, nor its `/proc`.
struct Scan {
    forks: u32,
    began: u64,
    others: Vec<(u64, NsPid)>,
    seen: Vec<u64>,
}

/// The last scan. Only ever tried, never waited for: a child forked while
/// another thread held it scans afresh.
static LAST: Mutex<Option<Scan>> = Mutex::new(None);

/// Clock ticks since boot, now, rounded down, on the clock `starttime`
/// counts: `CLOCK_BOOTTIME` (proc(5): "the time the process started after
/// system boot"; Linux takes it from the same clock, suspended time
/// included).
fn ticks_now() -> u64 {
    let hz = u128::from(rustix::param::clock_ticks_per_second());
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    let ns = u128::from(t.tv_sec as u64) * 1_000_000_000 + u128::from(t.tv_nsec as u64);
    u64::try_from(ns * hz / 1_000_000_000).unwrap_or(u64::MAX)
}

/// Calls `visit` with the number of every task `/proc` lists; `false`
/// where it cannot be listed.
fn tasks(mut visit: impl FnMut(u64)) -> bool {
    let Some(proc) = proc_dir() else {
        return false;
    };
    let Ok(mut dir) = rustix::fs::Dir::read_from(proc) else {
        return false;
    };
    for entry in &mut dir {
        let Ok(entry) = entry else {
            return false;
        };
        let name = entry.file_name().to_bytes();
        if let Some(task) = Decimal::parse(name).and_then(|d| d.to_u64()) {
            visit(task);
        }
    }
    true
}

/// What a read of a task's `/proc` file came to.
enum Proc<T> {
    Read(T),
    /// `ENOENT`, `ESRCH`: the task is gone, and can match nothing any more;
    /// or `EACCES`, `EPERM`: a security module keeps it from this process
    /// for good, which counts as `hidepid` does (a task not shown is not
    /// counted: PROTOCOL 13.2).
    Gone,
    /// Any other failure (`EMFILE`, `ENFILE`, `ENOMEM`, a read cut short):
    /// nothing can be concluded now.
    Unreadable,
}

/// `/proc/<task>/<file>`, read whole (a `status` has a `Groups:` line,
/// before `NSpid:`, of no bound).
fn read_task(task: u64, file: &str) -> Proc<Vec<u8>> {
    let mut path = heapless::String::<40>::new();
    if std::fmt::Write::write_fmt(&mut path, format_args!("{task}/{file}")).is_err() {
        return Proc::Unreadable;
    }
    let Some(proc) = proc_dir() else {
        return Proc::Unreadable;
    };
    let fd = match rustix::fs::openat(
        proc,
        path.as_str(),
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(
            rustix::io::Errno::NOENT
            | rustix::io::Errno::SRCH
            | rustix::io::Errno::ACCESS
            | rustix::io::Errno::PERM,
        ) => return Proc::Gone,
        Err(_) => return Proc::Unreadable,
    };
    let mut text = Vec::with_capacity(1024);
    match std::fs::File::from(fd).read_to_end(&mut text) {
        Ok(_) => Proc::Read(text),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::SRCH.raw_os_error()) => Proc::Gone,
        Err(_) => Proc::Unreadable,
    }
}

/// The innermost PID of `task`, from its `status`.
fn innermost(task: u64) -> Proc<NsPid> {
    match read_task(task, "status") {
        Proc::Read(status) => Proc::Read(parse_nspid(&status)),
        Proc::Gone => Proc::Gone,
        Proc::Unreadable => Proc::Unreadable,
    }
}

/// The innermost PID of `task` for a verdict: one that cannot be read
/// counts as a match ([`NsPid::Unparsable`]: fail closed); a task gone,
/// as none.
fn innermost_judged(task: u64) -> NsPid {
    match innermost(task) {
        Proc::Read(ns) => ns,
        Proc::Gone => NsPid::Missing,
        Proc::Unreadable => NsPid::Unparsable,
    }
}

/// Whether `task`, asked now, is the record's owner (`pid`, `start`):
/// [`task_is_owner`], with the task's start compared where this process's
/// `starttime` is `unshifted` and the task's can be read; one that cannot
/// be read (but for a task gone) leaves the verdict to the `NSpid:` line,
/// as a shifted reader's does.
fn is_owner(task: u64, pid: Pid, start: Decimal<'_>, unshifted: bool) -> bool {
    if !unshifted {
        return task_is_owner(task, pid, false, None, start, || innermost_judged(task));
    }
    let stat = read_task(task, "stat");
    let token = match &stat {
        Proc::Read(text) => parse_stat_starttime(text).map(|t| StartToken::linux(boot_id(), t)),
        Proc::Gone => return false,
        Proc::Unreadable => None,
    };
    match token {
        Some(t) => task_is_owner(task, pid, true, Some(t), start, || innermost_judged(task)),
        None => task_is_owner(task, pid, false, None, start, || innermost_judged(task)),
    }
}

/// The inode of a task's PID namespace (`/proc/<task>/ns/pid`), where this
/// process may look (another account's task answers `EACCES`).
fn pid_namespace(task: &str) -> Option<u64> {
    let mut path = heapless::String::<40>::new();
    std::fmt::Write::write_fmt(&mut path, format_args!("{task}/ns/pid")).ok()?;
    let st = rustix::fs::statat(proc_dir()?, path.as_str(), rustix::fs::AtFlags::empty()).ok()?;
    Some(st.st_ino as u64)
}

/// Every task of another PID namespace than this process's, as it is now.
fn scan() -> Option<Scan> {
    let began = ticks_now();
    let mine = pid_namespace("self");
    let (mut others, mut seen) = (Vec::new(), Vec::new());
    let listed = tasks(|task| {
        seen.push(task);
        let mut name = heapless::String::<20>::new();
        let _ = std::fmt::Write::write_fmt(&mut name, format_args!("{task}"));
        if mine.is_some() && pid_namespace(&name) == mine {
            return;
        }
        match innermost(task) {
            Proc::Read(NsPid::Pid(inner)) if inner == task => {}
            Proc::Read(NsPid::Missing) | Proc::Gone => {}
            Proc::Read(other) => others.push((task, other)),
            // Asked again at every verdict.
            Proc::Unreadable => others.push((task, NsPid::Unparsable)),
        }
    });
    seen.sort_unstable();
    listed.then_some(Scan {
        forks: crate::fork::forks(),
        began,
        others,
        seen,
    })
}

/// Warms the scan for a holder this process has begun to wait on: if the
/// last scan answers for the holder's record already, nothing; otherwise
/// scan now, while the holder lives, so that its takeover, should it die,
/// needs no scan (`runs_elsewhere`).
pub fn prepare(holder: u32) {
    if !starttime_unshifted() {
        return;
    }
    let Some(start) = read_start_token(u64::from(holder)) else {
        return;
    };
    let mut buf = [0u8; START_DIGITS_MAX];
    let start = start.to_decimal(&mut buf);
    let Ok(last) = LAST.try_lock() else {
        return;
    };
    let fresh = last.as_ref().is_some_and(|s| {
        s.forks == crate::fork::forks() && scanned(s.began, start) != Scanned::Stale
    });
    drop(last);
    if fresh {
        return;
    }
    let Some(scan) = scan() else {
        return;
    };
    if let Ok(mut last) = LAST.try_lock() {
        *last = Some(scan);
    }
}

/// What the last scan answers for the record (`pid`, `start`), if it still
/// answers for it ([`scanned`]): whether a task it saw in another PID
/// namespace, or one whose number it did not see, asked now, is the
/// owner. The tasks it did not see are listed afresh each time: started
/// since it began, or not shown to it (a task still being forked, or one
/// its thread's credentials could not see under `hidepid`).
fn from_last_scan(pid: Pid, start: Decimal<'_>) -> Option<bool> {
    let last = LAST.try_lock().ok()?;
    let scan = last.as_ref()?;
    if scan.forks != crate::fork::forks() || scanned(scan.began, start) == Scanned::Stale {
        return None;
    }
    let owner = u64::from(pid.get());
    // A task seen with another innermost PID keeps it; one that took its
    // number since started after the scan began, after the record.
    let seen_elsewhere = scan.others.iter().any(|&(task, seen)| match seen {
        NsPid::Pid(inner) if inner != owner => false,
        _ => is_owner(task, pid, start, true),
    });
    if seen_elsewhere {
        return Some(true);
    }
    let mut found = false;
    let listed = tasks(|task| {
        if !found && scan.seen.binary_search(&task).is_err() {
            found = is_owner(task, pid, start, true);
        }
    });
    listed.then_some(found)
}

/// Whether a task in another PID namespace runs as `pid` with the recorded
/// start `start` (PROTOCOL 4.5, `_owner_runs_elsewhere`): the last scan's
/// answer where it still answers for the record, else a scan of every
/// task.
pub(crate) fn runs_elsewhere(pid: Pid, start: Decimal<'_>) -> bool {
    if !elsewhere_scan_applies(Some(start), boot_id()) {
        return false;
    }
    let unshifted = starttime_unshifted();
    if unshifted {
        if let Some(answer) = from_last_scan(pid, start) {
            return answer;
        }
    }
    let mut found = false;
    tasks(|task| {
        if !found {
            found = is_owner(task, pid, start, unshifted);
        }
    });
    found
}

// Native only: under qemu-user a test cannot start itself again (no
// binfmt), and qemu's own descriptors share the table the EMFILE test
// fills.
#[cfg(all(test, any(target_arch = "x86_64", target_arch = "x86")))]
mod tests {
    use super::*;
    use std::process::{Child, Command, Stdio};

    /// `sleep` as PID 1 of a PID namespace of its own, and its number
    /// here; `None` where `unshare` cannot make one.
    fn elsewhere() -> Option<(Child, u64)> {
        let child = Command::new("unshare")
            .args([
                "--user",
                "--map-root-user",
                "--pid",
                "--fork",
                "--kill-child",
            ])
            .args(["sleep", "60"])
            .stdin(Stdio::null())
            .spawn()
            .ok()?;
        let children = format!("/proc/{0}/task/{0}/children", child.id());
        for _ in 0..2000 {
            let text = std::fs::read_to_string(&children).unwrap_or_default();
            if let Some(pid) = text.split_whitespace().next().and_then(|p| p.parse().ok()) {
                if innermost_judged(pid) == NsPid::Pid(1) {
                    return Some((child, pid));
                }
            }
            std::thread::yield_now();
        }
        None
    }

    fn start_of(task: u64) -> String {
        read_start_token(task).unwrap().to_string()
    }

    fn decimal(text: &str) -> Decimal<'_> {
        Decimal::parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn a_process_of_another_pid_namespace_is_found_by_a_scan_made_before_it_and_after() {
        let Some((mut first, task)) = elsewhere() else {
            eprintln!("skipped: unshare cannot make a PID namespace here");
            return;
        };
        assert!(starttime_unshifted());
        let one = Pid::new(1).unwrap();
        let start = start_of(task);
        assert!(runs_elsewhere(one, decimal(&start)), "a scan of every task");
        prepare(u32::try_from(task).unwrap());
        assert_eq!(from_last_scan(one, decimal(&start)), Some(true));
        assert!(runs_elsewhere(one, decimal(&start)));
        // Another start at PID 1: nobody, from the scan alone.
        assert_eq!(from_last_scan(one, decimal("5")), Some(false));
        // A process started after the scan: found, by the tasks the scan
        // did not see or by a scan of every task.
        let (mut second, later) = elsewhere().unwrap();
        let start = start_of(later);
        assert_ne!(from_last_scan(one, decimal(&start)), Some(false));
        assert!(runs_elsewhere(one, decimal(&start)));
        for child in [&mut first, &mut second] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    /// A scan made while this process is out of descriptors for a moment
    /// (a server at its `RLIMIT_NOFILE`, another thread's `accept` taking
    /// the last one) lists every task but reads no `status`: each task it
    /// cannot read is kept to be asked again at every verdict, so the
    /// owner, which ran through the whole scan, is found once descriptors
    /// are back (a failed read taken for a task gone would break a live
    /// holder's marker).
    #[test]
    fn a_scan_that_could_not_read_a_status_still_asks_that_task() {
        let Some((mut child, task)) = elsewhere() else {
            eprintln!("skipped: unshare cannot make a PID namespace here");
            return;
        };
        let one = Pid::new(1).unwrap();
        let start = start_of(task);
        // The full scan finds it; /proc and the boot id are now cached.
        assert!(runs_elsewhere(one, decimal(&start)));
        // Every descriptor but one taken, as by another thread.
        let mut fillers = Vec::new();
        loop {
            match rustix::fs::open("/dev/null", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()) {
                Ok(fd) => fillers.push(fd),
                Err(rustix::io::Errno::MFILE) => break,
                Err(e) => panic!("{e}"),
            }
        }
        drop(fillers.pop());
        // A waiter begins to watch some holder of this host (here: this
        // process, started after no scan): the scan is made now.
        prepare(std::process::id());
        drop(fillers);
        let kept = LAST
            .try_lock()
            .unwrap()
            .as_ref()
            .map(|s| (s.began, s.others.len(), s.seen.len()));
        eprintln!("kept scan (began, others, seen): {kept:?}");
        // The owner still runs, in another PID namespace, started before
        // the scan.
        assert_eq!(innermost_judged(task), NsPid::Pid(1));
        let answer = runs_elsewhere(one, decimal(&start));
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            answer,
            "the owner runs elsewhere, but the kept scan says it does not"
        );
    }
    /// Tells the test below that it runs again behind `hidepid=2`.
    const BEHIND_HIDEPID: &str = "SWAPLOCK_TEST_BEHIND_HIDEPID";

    /// The kept scan is made with the credentials of the thread that
    /// begins to watch, and answers later for every thread. Under a
    /// `/proc` mounted `hidepid=2`, a thread whose user and groups are
    /// another account's (file servers such as Samba switch them per
    /// thread) does not even list root's tasks; a root thread's takeover
    /// must still find a root-owned holder in a container, which its own
    /// listing shows: the tasks a scan did not see are asked at every
    /// verdict. The test runs itself again in a mount namespace of its own
    /// whose `/proc` is mounted `hidepid=2`.
    #[test]
    fn a_scan_made_with_one_threads_credentials_answers_for_another() {
        if std::env::var_os(BEHIND_HIDEPID).is_none() {
            let name =
                "elsewhere::tests::a_scan_made_with_one_threads_credentials_answers_for_another";
            let script = format!(
                "mount -t proc -o hidepid=2 proc /proc && exec \"$0\" --exact {name} --nocapture"
            );
            let out = Command::new("unshare")
                .args(["--mount", "--propagation", "private", "sh", "-c", &script])
                .arg(std::env::current_exe().unwrap())
                .env(BEHIND_HIDEPID, "1")
                .output()
                .expect("unshare (util-linux): scripts/setup installs it");
            let said = String::from_utf8_lossy(&out.stdout);
            let err = String::from_utf8_lossy(&out.stderr);
            if err.contains("unshare failed") {
                eprintln!("skipped: no mount namespace here (needs root): {err}");
                return;
            }
            assert!(out.status.success(), "{said}{err}");
            assert!(said.contains("behind hidepid: found"), "{said}{err}");
            return;
        }
        let Some((mut child, task)) = elsewhere() else {
            eprintln!("skipped: unshare cannot make a PID namespace here");
            return;
        };
        let one = Pid::new(1).unwrap();
        let start = start_of(task);
        assert!(
            runs_elsewhere(one, decimal(&start)),
            "root's own scan finds it"
        );
        std::thread::spawn(|| {
            // SAFETY: the raw system call (not glibc's, which changes
            // every thread) changes this thread's credentials only; it
            // ends here.
            unsafe {
                assert_eq!(
                    libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<u32>()),
                    0
                );
                assert_eq!(libc::syscall(libc::SYS_setresgid, 65534, 65534, 65534), 0);
                assert_eq!(libc::syscall(libc::SYS_setresuid, 65534, 65534, 65534), 0);
            }
            prepare(std::process::id());
        })
        .join()
        .unwrap();
        let kept = LAST
            .try_lock()
            .unwrap()
            .as_ref()
            .map(|s| (s.began, s.others.len(), s.seen.len()));
        eprintln!("kept scan (began, others, seen): {kept:?}");
        let answer = runs_elsewhere(one, decimal(&start));
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            answer,
            "the owner runs elsewhere, but the kept scan says it does not"
        );
        let hidden = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .any(|l| {
                l.contains(" /proc ") && l.contains("hidepid=2") || l.contains("hidepid=invisible")
            });
        assert!(hidden, "/proc is mounted hidepid=2 here");
        println!("behind hidepid: found");
    }
}
