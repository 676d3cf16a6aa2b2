//! Whether a record's owner runs in another PID namespace (PROTOCOL 4.5):
//! a scan of every task of `/proc`, and what a scan made while a holder
//! was still alive can answer once it has died, so that a takeover does
//! not wait for one.

use crate::soft::{boot_id, proc_dir, read_start_token, starttime_unshifted};
use rustix::fs::{Mode, OFlags};
use std::io::Read;
use std::sync::Mutex;
use swaplock_core::decide::{
    elsewhere_scan_applies, parse_nspid, scanned, task_is_owner, NsPid, Scanned,
};
use swaplock_core::start::START_DIGITS_MAX;
use swaplock_core::{Decimal, Pid};

/// What one scan of every task saw: when it began, in clock ticks since
/// boot ([`ticks_now`]), every task of another PID namespace with its
/// innermost PID, and every task's number, ascending.
struct Scan {
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

/// The innermost PID of `task`, from its `status`.
fn innermost(task: u64) -> NsPid {
    let mut path = heapless::String::<32>::new();
    if std::fmt::Write::write_fmt(&mut path, format_args!("{task}/status")).is_err() {
        return NsPid::Unparsable;
    }
    // Read whole: its `Groups:` line, before `NSpid:`, has no bound.
    let status = proc_dir().and_then(|p| {
        let fd = rustix::fs::openat(
            p,
            path.as_str(),
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        );
        let mut text = Vec::with_capacity(2048);
        std::fs::File::from(fd.ok()?).read_to_end(&mut text).ok()?;
        Some(text)
    });
    match status {
        Some(status) => parse_nspid(&status),
        // Gone: it can match nothing any more.
        None => NsPid::Missing,
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
            NsPid::Pid(inner) if inner == task => {}
            NsPid::Missing => {}
            other => others.push((task, other)),
        }
    });
    seen.sort_unstable();
    listed.then_some(Scan {
        began,
        others,
        seen,
    })
}

/// Warms the scan for a holder this process has begun to wait on: if the
/// last scan answers for the holder's record already, nothing; otherwise
/// scan now, while the holder lives, so that its takeover, should it die,
/// needs no scan ([`runs_elsewhere`]).
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
    let fresh = last
        .as_ref()
        .is_some_and(|s| scanned(s.began, start) != Scanned::Stale);
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

/// Whether `task`, asked now, is the record's owner (`pid`, `start`).
fn is_owner(task: u64, pid: Pid, start: Decimal<'_>) -> bool {
    task_is_owner(task, pid, true, read_start_token(task), start, || {
        innermost(task)
    })
}

/// What the last scan answers for the record (`pid`, `start`), if it still
/// answers for it ([`scanned`]): whether a task it saw in another PID
/// namespace, or one it did not see (where the record's tick is the
/// scan's own), asked now, is the owner.
fn from_last_scan(pid: Pid, start: Decimal<'_>) -> Option<bool> {
    let last = LAST.try_lock().ok()?;
    let scan = last.as_ref()?;
    let new_tasks = match scanned(scan.began, start) {
        Scanned::Answers => false,
        Scanned::AnswersButNewTasks => true,
        Scanned::Stale => return None,
    };
    let owner = u64::from(pid.get());
    // A task seen with another innermost PID keeps it; one that took its
    // number since started after the scan began.
    let seen_elsewhere = scan.others.iter().any(|&(task, seen)| match seen {
        NsPid::Pid(inner) if inner != owner => false,
        _ => is_owner(task, pid, start),
    });
    if seen_elsewhere || !new_tasks {
        return Some(seen_elsewhere);
    }
    let mut found = false;
    let listed = tasks(|task| {
        if !found && scan.seen.binary_search(&task).is_err() {
            found = is_owner(task, pid, start);
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
        if found {
            return;
        }
        let task_start = match unshifted {
            true => read_start_token(task),
            false => None,
        };
        found = task_is_owner(task, pid, unshifted, task_start, start, || innermost(task));
    });
    found
}

#[cfg(test)]
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
                if innermost(pid) == NsPid::Pid(1) {
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
}
