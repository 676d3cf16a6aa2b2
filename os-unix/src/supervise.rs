//! The process control of the commands that run a program under a lock:
//! `swaplock run`'s supervisor, which runs its command in a process group
//! of its own, passes signals on to it and hands it the terminal; the
//! supervisor's warden, which ends that group should the supervisor die;
//! and `with-lock-ex`'s `execvp`. Each function is a forward to one call
//! (rustix's where rustix has it safe, else `libc`'s), as in the other
//! modules: what to call, and when, is the commands' decision.
//!
//! Signals and process IDs are plain numbers here (`c_int` and `pid_t`
//! are 32 bits on every system this crate serves), with the signal
//! numbers as constants ([`SIGINT`] and so on).
//!
//! # Async-signal safety
//! Some of these calls run where only async-signal-safe functions may: in
//! a signal handler, and in the child of a `fork` of a process that may
//! have threads (the warden, and the command's child between `fork` and
//! `exec`). Those that may are marked *Async-signal-safe*: each makes its
//! system call and nothing else (no allocation, no lock, no panic; an
//! error is an [`Errno`] value).
//!
//! Three functions are `unsafe`, for a rule Rust cannot check that their
//! caller must keep, each stated in its `# Safety`: [`fork`] and
//! [`before_exec`] run the caller's code in such a child, which must call
//! only async-signal-safe functions, and [`close_all_but`] closes
//! descriptors that other code may own, which must never be used again.
//! The others are safe whatever their caller does: [`catch`]'s handler
//! writes only to the descriptor [`wake_to`] took and never closes, and
//! the rest take or borrow their descriptors as Rust's I/O safety has it.

use rustix::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, OwnedFd};
use rustix::process::{Pid, Signal};
use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;
use swaplock_core::Errno;

pub use rustix::process::WaitStatus;

/// `SIGINT`: a terminal's interrupt (^C).
pub const SIGINT: i32 = libc::SIGINT;
/// `SIGQUIT`: a terminal's quit (^\).
pub const SIGQUIT: i32 = libc::SIGQUIT;
/// `SIGTERM`: a request to end.
pub const SIGTERM: i32 = libc::SIGTERM;
/// `SIGHUP`: a hang-up of the terminal.
pub const SIGHUP: i32 = libc::SIGHUP;
/// `SIGTSTP`: a terminal's stop (^Z).
pub const SIGTSTP: i32 = libc::SIGTSTP;
/// `SIGTTIN`: a background group read the terminal.
pub const SIGTTIN: i32 = libc::SIGTTIN;
/// `SIGTTOU`: a background group wrote to, or set, the terminal.
pub const SIGTTOU: i32 = libc::SIGTTOU;
/// `SIGPIPE`: a write to a pipe without a reader.
pub const SIGPIPE: i32 = libc::SIGPIPE;
/// `SIGUSR1`.
pub const SIGUSR1: i32 = libc::SIGUSR1;
/// `SIGUSR2`.
pub const SIGUSR2: i32 = libc::SIGUSR2;
/// `SIGCHLD`: a child ended or stopped.
pub const SIGCHLD: i32 = libc::SIGCHLD;
/// `SIGCONT`: continue a stopped process.
pub const SIGCONT: i32 = libc::SIGCONT;
/// `SIGSTOP`: stop, which cannot be caught or ignored.
pub const SIGSTOP: i32 = libc::SIGSTOP;
/// `SIGKILL`: end, which cannot be caught or ignored.
pub const SIGKILL: i32 = libc::SIGKILL;

fn errno(e: rustix::io::Errno) -> Errno {
    Errno::from_raw(e.raw_os_error())
}

/// `errno` of the last call that failed, without allocating.
fn last_errno() -> Errno {
    Errno::from_raw(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

/// A process or group ID as rustix takes it: `None` unless positive (a
/// negative one would name a group, or every process, in `kill`).
fn to_pid(raw: i32) -> Option<Pid> {
    if raw > 0 {
        Pid::from_raw(raw)
    } else {
        None
    }
}

/// A signal as rustix takes it, or `EINVAL` for a number it has no name
/// for.
fn to_signal(raw: i32) -> Result<Signal, Errno> {
    Signal::from_named_raw(raw).ok_or(Errno::INVAL)
}

// Pipes and descriptors.

/// `pipe()` — a new pipe, as its read end and its write end (neither
/// closed on exec nor non-blocking yet).
///
/// # References
/// - [`pipe(2)`](https://man7.org/linux/man-pages/man2/pipe.2.html)
pub fn pipe() -> Result<(OwnedFd, OwnedFd), Errno> {
    rustix::pipe::pipe().map_err(errno)
}

/// `fcntl(fd, F_SETFD, FD_CLOEXEC)` — closes `fd` on exec, so that no
/// program this process runs holds it.
///
/// # References
/// - [`fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html)
pub fn set_cloexec(fd: impl AsFd) -> Result<(), Errno> {
    rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC).map_err(errno)
}

/// `fcntl(fd, F_GETFL)` then `fcntl(fd, F_SETFL, flags | O_NONBLOCK)` —
/// makes reads and writes on `fd` fail with `EAGAIN` instead of waiting.
///
/// # References
/// - [`fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html)
pub fn set_nonblocking(fd: impl AsFd) -> Result<(), Errno> {
    let flags = rustix::fs::fcntl_getfl(&fd).map_err(errno)?;
    rustix::fs::fcntl_setfl(&fd, flags | rustix::fs::OFlags::NONBLOCK).map_err(errno)
}

/// `poll({fd, POLLIN}, 1, timeout)` — waits up to `timeout` (for ever if
/// `None`) for `fd` to be readable; returns whether it is. A signal ends
/// the wait early (`EINTR`).
///
/// # References
/// - [`poll(2)`](https://man7.org/linux/man-pages/man2/poll.2.html)
pub fn poll_readable(fd: impl AsFd, timeout: Option<Duration>) -> Result<bool, Errno> {
    let timeout = timeout.map(|t| rustix::time::Timespec {
        tv_sec: t.as_secs() as _,
        tv_nsec: t.subsec_nanos() as _,
    });
    let mut fds = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::IN,
    )];
    rustix::event::poll(&mut fds, timeout.as_ref())
        .map(|n| n > 0)
        .map_err(errno)
}

/// `read(fd, buf, buf.len())` — the number of bytes read, 0 at the end of
/// the file. Async-signal-safe.
///
/// # References
/// - [`read(2)`](https://man7.org/linux/man-pages/man2/read.2.html)
pub fn read(fd: impl AsFd, buf: &mut [u8]) -> Result<usize, Errno> {
    rustix::io::read(fd, buf).map_err(errno)
}

/// `write(fd, buf, buf.len())` — the number of bytes written (all of them,
/// for up to `PIPE_BUF` bytes to a pipe). Async-signal-safe.
///
/// # References
/// - [`write(2)`](https://man7.org/linux/man-pages/man2/write.2.html)
pub fn write(fd: impl AsFd, buf: &[u8]) -> Result<usize, Errno> {
    rustix::io::write(fd, buf).map_err(errno)
}

/// `dup2(fd, 0)` — makes descriptor 0 (standard input) another descriptor
/// of `fd`'s file. Async-signal-safe.
///
/// # References
/// - [`dup2(2)`](https://man7.org/linux/man-pages/man2/dup2.2.html)
pub fn dup2_stdin(fd: impl AsFd) -> Result<(), Errno> {
    rustix::stdio::dup2_stdin(fd).map_err(errno)
}

/// Descriptor 0, standard input, borrowed. No call.
pub fn stdin() -> BorrowedFd<'static> {
    rustix::stdio::stdin()
}

/// `getrlimit(RLIMIT_NOFILE)` and `close(fd)` of every descriptor from 0
/// below its soft limit (at least 1,024, at most 65,536; 1,024 if the
/// call fails) but `keep`: the portable way to close every descriptor of
/// this process but one. A descriptor above 65,536 stays open.
/// Async-signal-safe.
///
/// The Linux adapter's `close_all_but` tries `close_range` first, and
/// this where the kernel has none.
///
/// # Safety
/// The descriptors closed may belong to other code of this process (an
/// `OwnedFd`, a `File`, the pipe of [`wake_to`]), which would then read,
/// write or close a number that is no longer its own, and may by then
/// name another file. The caller must ensure that no descriptor but
/// `keep` is used or closed again by anything in this process: no owner
/// of one is dropped or used after the call, no signal handler that
/// uses one can run, and no other thread runs. In practice: a forked
/// child that ends by [`exit_now`] or exec, with the handlers of
/// [`catch`] reset or their signals blocked.
///
/// # References
/// - [`getrlimit(2)`](https://man7.org/linux/man-pages/man2/getrlimit.2.html)
/// - [`close(2)`](https://man7.org/linux/man-pages/man2/close.2.html)
pub unsafe fn close_all_but(keep: BorrowedFd<'_>) {
    let keep = keep.as_raw_fd();
    // libc's getrlimit rather than rustix's, which takes the call to be
    // infallible (and, failing, would panic in a debug build).
    // SAFETY: `rlimit` is a plain C struct of integers, all-zero valid; the
    // call fills it or fails, leaving it untouched.
    let top = unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            // `rlim_t` is 32 bits on some 32-bit targets: the cast widens.
            #[allow(clippy::unnecessary_cast)]
            let current = limit.rlim_cur as u64;
            current.clamp(1024, 65_536) as i32
        } else {
            1024
        }
    };
    for fd in (0..top).filter(|&fd| fd != keep) {
        // SAFETY: closing a plain number, open or not; that nothing uses
        // it afterwards is the caller's guarantee (`# Safety`).
        unsafe { libc::close(fd) };
    }
}

// Processes and process groups.

/// `getpid()` — this process's ID. Async-signal-safe.
///
/// # References
/// - [`getpid(2)`](https://man7.org/linux/man-pages/man2/getpid.2.html)
pub fn getpid() -> i32 {
    rustix::process::getpid().as_raw_nonzero().get()
}

/// `getppid()` — the parent's process ID; 0 if the parent is in another
/// PID namespace. Async-signal-safe.
///
/// # References
/// - [`getppid(2)`](https://man7.org/linux/man-pages/man2/getppid.2.html)
pub fn getppid() -> i32 {
    Pid::as_raw(rustix::process::getppid())
}

/// `getpgrp()` — this process's group ID. Async-signal-safe.
///
/// # References
/// - [`getpgrp(2)`](https://man7.org/linux/man-pages/man2/getpgrp.2.html)
pub fn getpgrp() -> i32 {
    rustix::process::getpgrp().as_raw_nonzero().get()
}

/// `setpgid(pid, pgid)` — moves process `pid` (0: this process) into
/// group `pgid` (0: the group whose ID is the process's own, which it then
/// leads). Async-signal-safe.
///
/// # References
/// - [`setpgid(2)`](https://man7.org/linux/man-pages/man2/setpgid.2.html)
pub fn setpgid(pid: i32, pgid: i32) -> Result<(), Errno> {
    rustix::process::setpgid(to_pid(pid), to_pid(pgid)).map_err(errno)
}

/// `kill(pid, signal)` — sends `signal` to process `pid`, which must be
/// positive (`EINVAL` otherwise). Async-signal-safe.
///
/// # References
/// - [`kill(2)`](https://man7.org/linux/man-pages/man2/kill.2.html)
pub fn kill(pid: i32, signal: i32) -> Result<(), Errno> {
    let target = to_pid(pid).ok_or(Errno::INVAL)?;
    rustix::process::kill_process(target, to_signal(signal)?).map_err(errno)
}

/// `kill(-pgid, signal)` — sends `signal` to every process of group
/// `pgid`, which must be above 1 (`EINVAL` otherwise: `kill(-1, ..)`
/// would signal every process this one may). Async-signal-safe.
///
/// # References
/// - [`kill(2)`](https://man7.org/linux/man-pages/man2/kill.2.html)
pub fn kill_group(pgid: i32, signal: i32) -> Result<(), Errno> {
    let group = to_pid(pgid).filter(|_| pgid > 1).ok_or(Errno::INVAL)?;
    rustix::process::kill_process_group(group, to_signal(signal)?).map_err(errno)
}

/// `kill(-pgid, 0)` — whether group `pgid` (above 1) has a process this
/// process may signal. Async-signal-safe.
///
/// # References
/// - [`kill(2)`](https://man7.org/linux/man-pages/man2/kill.2.html)
pub fn group_exists(pgid: i32) -> bool {
    match to_pid(pgid).filter(|_| pgid > 1) {
        Some(group) => rustix::process::test_kill_process_group(group).is_ok(),
        None => false,
    }
}

/// `waitpid(-1, &status, WNOHANG[|WUNTRACED])` — a child that ended (or,
/// with `stopped_too`, stopped), as its PID and wait status; `None` if
/// none did.
///
/// # References
/// - [`waitpid(2)`](https://man7.org/linux/man-pages/man2/waitpid.2.html)
pub fn try_wait_any(stopped_too: bool) -> Result<Option<(i32, WaitStatus)>, Errno> {
    let mut options = rustix::process::WaitOptions::NOHANG;
    if stopped_too {
        options |= rustix::process::WaitOptions::UNTRACED;
    }
    rustix::process::wait(options)
        .map(|r| r.map(|(pid, status)| (pid.as_raw_nonzero().get(), status)))
        .map_err(errno)
}

/// `waitpid(pid, &status, WNOHANG)` — the wait status of child `pid` if it
/// ended; `None` if it has not.
///
/// # References
/// - [`waitpid(2)`](https://man7.org/linux/man-pages/man2/waitpid.2.html)
pub fn try_wait(pid: i32) -> Result<Option<WaitStatus>, Errno> {
    let target = to_pid(pid).ok_or(Errno::INVAL)?;
    rustix::process::waitpid(Some(target), rustix::process::WaitOptions::NOHANG)
        .map(|r| r.map(|(_, status)| status))
        .map_err(errno)
}

/// `fork()` — a child of this process: its PID in the parent, 0 in the
/// child. The handlers registered with `pthread_atfork` run, as at any
/// `fork(3)`.
///
/// # Safety
/// The child has only the thread that forked; a lock another thread held
/// (the allocator's, stdio's, any `Mutex`'s) stays held in it for good.
/// The caller must ensure that, in the child (a return of `Ok(0)`), until
/// it execs or calls [`exit_now`], this process calls only
/// async-signal-safe functions (those of this module marked so, and
/// those of `signal-safety(7)`): it allocates and frees nothing, takes
/// no lock, does not panic or unwind, and does not return into code that
/// would go on as the parent would (dropping the parent's values, or
/// running its other work).
///
/// # References
/// - [`fork(2)`](https://man7.org/linux/man-pages/man2/fork.2.html)
/// - [`signal-safety(7)`](https://man7.org/linux/man-pages/man7/signal-safety.7.html)
pub unsafe fn fork() -> Result<i32, Errno> {
    // SAFETY: fork itself takes no argument; what the child does after it
    // is the caller's guarantee (`# Safety`).
    match unsafe { libc::fork() } {
        -1 => Err(last_errno()),
        pid => Ok(pid),
    }
}

/// `_exit(status)` — ends this process at once, running nothing of it
/// (no destructor, no `atexit` handler, no flush). Async-signal-safe.
///
/// # References
/// - [`_exit(2)`](https://man7.org/linux/man-pages/man2/_exit.2.html)
pub fn exit_now(status: i32) -> ! {
    // SAFETY: _exit takes any status and never returns.
    unsafe { libc::_exit(status) }
}

/// `nanosleep(duration)` — sleeps for `duration`, or until a signal is
/// handled. Async-signal-safe.
///
/// # References
/// - [`nanosleep(2)`](https://man7.org/linux/man-pages/man2/nanosleep.2.html)
pub fn sleep(duration: Duration) {
    let request = rustix::time::Timespec {
        tv_sec: duration.as_secs() as _,
        tv_nsec: duration.subsec_nanos() as _,
    };
    let _ = rustix::thread::nanosleep(&request);
}

/// `CommandExt::pre_exec(f)` — has `command`'s child run `f` after `fork`
/// and before `exec`; an error from `f` fails the spawn with it.
///
/// # Safety
/// `f` runs in the child of a `fork` of a process that may have threads,
/// with the child's copy of what it captured. The caller must ensure that
/// `f` calls only async-signal-safe functions (those of this module
/// marked so, and those of `signal-safety(7)`), allocates and frees
/// nothing, takes no lock and does not panic, as [`fork`] says; and that
/// the descriptors it uses are open in the child (held by what `f`
/// captured, say).
///
/// # References
/// - [`CommandExt::pre_exec`](https://doc.rust-lang.org/std/os/unix/process/trait.CommandExt.html#tymethod.pre_exec)
pub unsafe fn before_exec(
    command: &mut Command,
    mut f: impl FnMut() -> Result<(), Errno> + Send + Sync + 'static,
) {
    // SAFETY: what `f` does between fork and exec is the caller's
    // guarantee (`# Safety`); the error made of its errno allocates
    // nothing.
    unsafe {
        command.pre_exec(move || f().map_err(|e| std::io::Error::from_raw_os_error(e.raw())));
    }
}

/// `execvp(argv[0], argv)` — replaces this process with the program
/// `argv[0]`, looked for in `PATH`, keeping what `exec` keeps: the signal
/// mask and ignored signals among them (std's `exec` resets the mask).
/// Returns only if it fails, with the `errno`; an empty `argv` fails with
/// `EINVAL`.
///
/// # References
/// - [`execvp(3)`](https://man7.org/linux/man-pages/man3/execvp.3.html)
pub fn execvp(argv: &[CString]) -> Errno {
    let Some(program) = argv.first() else {
        return Errno::INVAL;
    };
    let mut pointers: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    pointers.push(std::ptr::null());
    // SAFETY: a program name and a null-terminated array of pointers into
    // `argv`, which outlive the call; execvp returns only on failure.
    unsafe { libc::execvp(program.as_ptr(), pointers.as_ptr()) };
    last_errno()
}

// The terminal.

/// `open("/dev/tty", O_RDWR|O_NOCTTY|O_CLOEXEC)` — this process's
/// controlling terminal (`ENXIO` without one).
///
/// # References
/// - [`tty(4)`](https://man7.org/linux/man-pages/man4/tty.4.html)
pub fn open_tty() -> Result<OwnedFd, Errno> {
    use rustix::fs::{Mode, OFlags};
    rustix::fs::open(
        c"/dev/tty",
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno)
}

/// `tcgetpgrp(tty)` — the terminal's foreground process group; `None` if
/// the call fails. Async-signal-safe.
///
/// # References
/// - [`tcgetpgrp(3)`](https://man7.org/linux/man-pages/man3/tcgetpgrp.3.html)
pub fn foreground_group(tty: impl AsFd) -> Option<i32> {
    rustix::termios::tcgetpgrp(tty)
        .ok()
        .map(|p| p.as_raw_nonzero().get())
}

/// `tcsetpgrp(tty, pgid)` — makes group `pgid` the terminal's foreground
/// group. A caller in a background group gets `SIGTTOU` for it unless
/// that is blocked or ignored. Async-signal-safe.
///
/// # References
/// - [`tcsetpgrp(3)`](https://man7.org/linux/man-pages/man3/tcsetpgrp.3.html)
pub fn set_foreground_group(tty: impl AsFd, pgid: i32) -> Result<(), Errno> {
    let group = to_pid(pgid).ok_or(Errno::INVAL)?;
    rustix::termios::tcsetpgrp(tty, group).map_err(errno)
}

/// The attributes of a terminal (`struct termios`), as
/// [`quiet_terminal`] found them, to restore with [`restore_terminal`].
pub struct TerminalMode(rustix::termios::Termios);

/// `tcgetattr(tty)`, then `tcsetattr(tty, TCSAFLUSH)` without `ECHO` and
/// `ISIG` — what is typed on the terminal shows nothing, and ^C or ^Z is
/// read as a character instead of signalling (so that no signal can leave
/// the terminal silent): for a password prompt. The attributes before, to
/// restore. `ENOTTY` if `tty` is no terminal.
///
/// # References
/// - [`termios(3)`](https://man7.org/linux/man-pages/man3/termios.3.html)
pub fn quiet_terminal(tty: impl AsFd) -> Result<TerminalMode, Errno> {
    use rustix::termios::{LocalModes, OptionalActions};
    let before = rustix::termios::tcgetattr(&tty).map_err(errno)?;
    let mut quiet = before.clone();
    quiet.local_modes &= !(LocalModes::ECHO | LocalModes::ISIG);
    rustix::termios::tcsetattr(&tty, OptionalActions::Flush, &quiet).map_err(errno)?;
    Ok(TerminalMode(before))
}

/// `tcsetattr(tty, TCSANOW, mode)` — gives the terminal back the
/// attributes [`quiet_terminal`] found.
///
/// # References
/// - [`termios(3)`](https://man7.org/linux/man-pages/man3/termios.3.html)
pub fn restore_terminal(tty: impl AsFd, mode: &TerminalMode) -> Result<(), Errno> {
    use rustix::termios::OptionalActions;
    rustix::termios::tcsetattr(tty, OptionalActions::Now, &mode.0).map_err(errno)
}

// Signals.

/// A signal mask (`sigset_t`): what [`block`] returns, to restore with
/// [`set_mask`].
#[derive(Clone, Copy)]
pub struct SignalMask(libc::sigset_t);

impl std::fmt::Debug for SignalMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SignalMask")
    }
}

/// The set of `signals` (`sigemptyset`, then `sigaddset` of each; a number
/// that names no signal is left out).
fn signal_set(signals: &[i32]) -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set it is given, and sigaddset
    // adds to an initialised set or fails with EINVAL.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &signal in signals {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

/// `pthread_sigmask(SIG_BLOCK, {signals}, &old)` — blocks `signals` in this
/// thread; returns the mask before. The call fails only for an invalid
/// `how`, which this never passes. Async-signal-safe.
///
/// # References
/// - [`pthread_sigmask(3)`](https://man7.org/linux/man-pages/man3/pthread_sigmask.3.html)
pub fn block(signals: &[i32]) -> SignalMask {
    let set = signal_set(signals);
    // SAFETY: a valid set, and an all-zero `sigset_t` (a plain C value)
    // for the call to fill.
    unsafe {
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        SignalMask(old)
    }
}

/// `pthread_sigmask(SIG_UNBLOCK, {signals}, NULL)` — unblocks `signals` in
/// this thread. Async-signal-safe.
///
/// # References
/// - [`pthread_sigmask(3)`](https://man7.org/linux/man-pages/man3/pthread_sigmask.3.html)
pub fn unblock(signals: &[i32]) {
    let set = signal_set(signals);
    // SAFETY: a valid set; no old mask is asked for.
    unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
}

/// `pthread_sigmask(SIG_SETMASK, mask, NULL)` — makes `mask` this
/// thread's signal mask. Async-signal-safe.
///
/// # References
/// - [`pthread_sigmask(3)`](https://man7.org/linux/man-pages/man3/pthread_sigmask.3.html)
pub fn set_mask(mask: &SignalMask) {
    // SAFETY: a valid set; no old mask is asked for.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &mask.0, std::ptr::null_mut()) };
}

/// `signal(signal, SIG_DFL)` — gives `signal` its default action.
/// Async-signal-safe.
///
/// # References
/// - [`signal(2)`](https://man7.org/linux/man-pages/man2/signal.2.html)
pub fn set_default(signal: i32) {
    // SAFETY: the default disposition runs no code of this process.
    unsafe { libc::signal(signal, libc::SIG_DFL) };
}

/// `signal(signal, SIG_IGN)` — ignores `signal`. Async-signal-safe.
///
/// # References
/// - [`signal(2)`](https://man7.org/linux/man-pages/man2/signal.2.html)
pub fn ignore(signal: i32) {
    // SAFETY: ignoring runs no code of this process.
    unsafe { libc::signal(signal, libc::SIG_IGN) };
}

/// `sigaction(signal, NULL, &old)` — whether `signal` is ignored
/// (`SIG_IGN`); `false` if the call fails.
///
/// # References
/// - [`sigaction(2)`](https://man7.org/linux/man-pages/man2/sigaction.2.html)
pub fn is_ignored(signal: i32) -> bool {
    // SAFETY: `sigaction` is a plain C struct, all-zero valid (the default
    // disposition), which the query fills or leaves.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut old);
        old.sa_sigaction == libc::SIG_IGN
    }
}

/// The write end of the wake pipe ([`wake_to`]); -1 before there is one.
static WAKE: AtomicI32 = AtomicI32::new(-1);

/// Makes `fd`, the write end of a non-blocking pipe, the one [`wake`] and
/// the handler of [`catch`] write to. It stays open for the rest of the
/// process's life (a later call leaves the earlier one open too), so that
/// a late signal never writes to a descriptor reused for another file. No
/// call.
pub fn wake_to(fd: OwnedFd) {
    WAKE.store(fd.into_raw_fd(), Ordering::SeqCst);
}

/// `write(fd, &event, 1)` to the pipe of [`wake_to`], if there is one,
/// keeping `errno` for the code a signal interrupted. A full pipe drops
/// the byte. Async-signal-safe.
///
/// # References
/// - [`write(2)`](https://man7.org/linux/man-pages/man2/write.2.html)
pub fn wake(event: u8) {
    let fd = WAKE.load(Ordering::SeqCst);
    if fd < 0 {
        return;
    }
    // SAFETY: a descriptor `wake_to` took from its owner and never
    // closes: no safe code can close it (I/O safety), and the caller of
    // `close_all_but`, which can, guarantees no handler uses it after.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    // SAFETY: errno is thread-local, and its location valid for the
    // calling thread.
    unsafe {
        let errno = errno_location();
        let saved = *errno;
        let _ = rustix::io::write(fd, &[event]);
        *errno = saved;
    }
}

#[cfg(target_os = "linux")]
unsafe fn errno_location() -> *mut libc::c_int {
    // SAFETY: always valid for the calling thread.
    unsafe { libc::__errno_location() }
}

#[cfg(target_os = "android")]
unsafe fn errno_location() -> *mut libc::c_int {
    // SAFETY: always valid for the calling thread.
    unsafe { libc::__errno() }
}

#[cfg(target_vendor = "apple")]
unsafe fn errno_location() -> *mut libc::c_int {
    // SAFETY: always valid for the calling thread.
    unsafe { libc::__error() }
}

/// The handler of [`catch`]: the signal's number, as a byte, to [`wake`].
extern "C" fn on_signal(signal: libc::c_int) {
    wake(signal as u8);
}

/// `sigaction(signal, {handler, no flags, empty mask}, NULL)` — takes
/// `signal` with this module's handler, which [`wake`]s the pipe of
/// [`wake_to`] with the signal's number (a byte). Without `SA_RESTART`: a
/// call the signal interrupts fails with `EINTR`.
///
/// # References
/// - [`sigaction(2)`](https://man7.org/linux/man-pages/man2/sigaction.2.html)
pub fn catch(signal: i32) -> Result<(), Errno> {
    // SAFETY: `sigaction` is a plain C struct, all-zero valid (no flags,
    // an empty mask); the handler only writes to a pipe, which is
    // async-signal-safe.
    let r = unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as *const () as usize;
        libc::sigaction(signal, &action, std::ptr::null_mut())
    };
    if r == -1 {
        Err(last_errno())
    } else {
        Ok(())
    }
}
