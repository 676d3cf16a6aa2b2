//! The process control of the commands that run a program under a lock:
//! the shared POSIX calls of [`swaplock_unix::supervise`], with what only
//! Linux and Android have: the parent-death signal, the child subreaper,
//! `close_range`, and the hiding of a secret in the command line that
//! `/proc` shows.

use rustix::fd::{AsRawFd, BorrowedFd};
use swaplock_core::Errno;
pub use swaplock_unix::supervise::*;

fn errno(e: rustix::io::Errno) -> Errno {
    Errno::from_raw(e.raw_os_error())
}

/// `prctl(PR_SET_PDEATHSIG, signal)` — has the kernel send `signal` to
/// this process when the thread that forked it ends (`EINVAL` for a
/// number that names no signal). Async-signal-safe.
///
/// # References
/// - [`PR_SET_PDEATHSIG(2const)`](https://man7.org/linux/man-pages/man2/PR_SET_PDEATHSIG.2const.html)
pub fn set_parent_death_signal(signal: i32) -> Result<(), Errno> {
    let signal = rustix::process::Signal::from_named_raw(signal).ok_or(Errno::INVAL)?;
    rustix::process::set_parent_process_death_signal(Some(signal)).map_err(errno)
}

/// `prctl(PR_SET_CHILD_SUBREAPER, 1)` — makes this process the one that
/// adopts the orphans of its descendants (instead of init), so that it
/// can wait for them.
///
/// # References
/// - [`PR_SET_CHILD_SUBREAPER(2const)`](https://man7.org/linux/man-pages/man2/PR_SET_CHILD_SUBREAPER.2const.html)
pub fn set_child_subreaper() -> Result<(), Errno> {
    // Any non-zero argument sets it; rustix passes the PID's value.
    rustix::process::set_child_subreaper(Some(rustix::process::Pid::INIT)).map_err(errno)
}

/// `close_range(0, keep - 1, 0)` and `close_range(keep + 1, ~0U, 0)` —
/// closes every descriptor of this process but `keep` (Linux 5.9; rustix
/// has no such call, so `syscall(SYS_close_range, ..)`); where the kernel
/// refuses, the portable way of [`swaplock_unix::supervise::close_all_but`]
/// (`close` one by one up to the limit). Async-signal-safe.
///
/// # Safety
/// As for [`swaplock_unix::supervise::close_all_but`]: the caller must
/// ensure that no descriptor but `keep` is used or closed again by
/// anything in this process (no owner of one dropped or used after the
/// call, no signal handler that uses one able to run, no other thread),
/// as in a forked child that ends by [`exit_now`] or exec, with the
/// handlers of [`catch`] reset or their signals blocked.
///
/// # References
/// - [`close_range(2)`](https://man7.org/linux/man-pages/man2/close_range.2.html)
pub unsafe fn close_all_but(keep: BorrowedFd<'_>) {
    // The arguments are unsigned ints.
    let fd = keep.as_raw_fd() as libc::c_uint;
    let range = |first: libc::c_uint, last: libc::c_uint| {
        // SAFETY: close_range(2) takes plain numbers; that nothing uses a
        // descriptor it closes afterwards is the caller's guarantee
        // (`# Safety`).
        unsafe { libc::syscall(libc::SYS_close_range, first, last, 0 as libc::c_uint) == 0 }
    };
    let below = fd == 0 || range(0, fd - 1);
    if below && range(fd + 1, libc::c_uint::MAX) {
        return;
    }
    // SAFETY: the same guarantee, which the caller gave for this call.
    unsafe { swaplock_unix::supervise::close_all_but(keep) };
}

/// Overwrites the last `secret` bytes of every argument of this process
/// that is `argument`, with `x`, in its command line as `/proc/PID/cmdline`
/// and `ps` show it: the memory between `arg_start` and `arg_end` of
/// `/proc/self/stat` (fields 48 and 49, Linux 3.5), which the kernel reads
/// for every other process that asks. How many arguments it changed. A
/// password given on the command line (`--user NAME:PASSWORD`) is so
/// hidden once read, as database clients hide theirs; it was visible
/// until then.
///
/// # Safety
/// No other thread may read this process's arguments meanwhile (Rust's
/// `std::env::args` reads that same memory): call it while the process has
/// one thread.
///
/// # References
/// - [`proc_pid_stat(5)`](https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html)
/// - [`proc_pid_cmdline(5)`](https://man7.org/linux/man-pages/man5/proc_pid_cmdline.5.html)
pub unsafe fn hide_in_command_line(argument: &[u8], secret: usize) -> Result<usize, Errno> {
    if secret == 0 || secret > argument.len() {
        return Ok(0);
    }
    let stat = std::fs::read("/proc/self/stat")
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(0)))?;
    // Fields after the command name's closing parenthesis start with the
    // third (the state): arg_start is the 46th of them, arg_end the 47th.
    let after = stat
        .iter()
        .rposition(|&b| b == b')')
        .map_or(&[][..], |i| &stat[i + 1..]);
    let mut fields = after
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
        .skip(45)
        .map(|f| {
            core::str::from_utf8(f)
                .ok()
                .and_then(|t| t.parse::<usize>().ok())
        });
    let (Some(Some(start)), Some(Some(end))) = (fields.next(), fields.next()) else {
        return Err(Errno::NOSYS);
    };
    if end <= start {
        return Ok(0);
    }
    // SAFETY: [arg_start, arg_end) holds this process's arguments, which
    // the kernel placed on the initial stack, mapped readable and writable
    // for the process's life; the caller keeps other threads from reading
    // them meanwhile, so this is the only access.
    let args = unsafe { core::slice::from_raw_parts_mut(start as *mut u8, end - start) };
    let mut hidden = 0;
    for arg in args.split_mut(|&b| b == 0) {
        if arg == argument {
            let len = arg.len();
            arg[len - secret..].fill(b'x');
            hidden += 1;
        }
    }
    Ok(hidden)
}
