//! The warden: a small process forked by `run`'s supervisor before the
//! command, whose one task is to end the command's whole process group
//! if the supervisor dies without saying it is done.
//!
//! The supervisor holds the write end of a pipe; the warden reads the
//! other. The command's child, before it execs, writes its PID (its
//! group's ID) into the pipe, so the warden knows the group before the
//! command runs a single instruction of its own. When the supervisor has
//! seen the group gone it writes one byte, and the warden exits. An end
//! of file before that byte means the supervisor died (SIGKILL, or any
//! signal it does not take): the warden sends SIGKILL to the group and
//! looks again until nothing of it is left, so that no background child
//! or subshell of the command runs on outside the lock.
//!
//! The warden leads a group of its own and ignores the signals a
//! terminal, a shell or `timeout(1)` sends to a job's group, so a signal
//! that kills the supervisor's group does not kill the warden with it.
//! It is forked from a process that may have threads, so it calls only
//! async-signal-safe functions and allocates nothing.

use super::os_error;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;
use swaplock::core::Errno;
use swaplock::supervise as sys;

/// The signals the warden ignores: those sent to a job or a session
/// (a terminal's ^C, ^\ and ^Z, a hang-up, `kill` of a job, `timeout`),
/// and SIGPIPE.
const IGNORED: [i32; 10] = [
    sys::SIGINT,
    sys::SIGQUIT,
    sys::SIGTERM,
    sys::SIGHUP,
    sys::SIGTSTP,
    sys::SIGTTIN,
    sys::SIGTTOU,
    sys::SIGPIPE,
    sys::SIGUSR1,
    sys::SIGUSR2,
];

/// How long the warden keeps looking for what is left of the group after
/// SIGKILL (a process in uninterruptible sleep dies when it wakes).
const KILL_PATIENCE: Duration = Duration::from_secs(2);
/// How often it looks.
const KILL_LOOK: Duration = Duration::from_millis(10);

/// How long the supervisor waits for a dismissed warden to exit.
const STAND_DOWN_PATIENCE: Duration = Duration::from_secs(1);

/// The supervisor's end of the warden.
pub(super) struct Warden {
    /// The write end: the command's child writes its PID into it before
    /// exec; [`Warden::stand_down`] writes the byte that dismisses the
    /// warden. Closed on exec, so the command never holds it.
    write: Arc<OwnedFd>,
    pid: i32,
}

impl Warden {
    /// Forks the warden. The error names the call that failed; the
    /// caller refuses to run the command without a warden.
    pub(super) fn start() -> Result<Warden, (&'static str, std::io::Error)> {
        let (read, write) = sys::pipe().map_err(|e| ("pipe", os_error(e)))?;
        for fd in [read.as_fd(), write.as_fd()] {
            // Neither end may reach the command or any other program
            // this one runs.
            sys::set_cloexec(fd).map_err(|e| ("fcntl F_SETFD", os_error(e)))?;
        }
        // The job signals stay blocked across the fork, so that none can
        // end the warden before it ignores them.
        let old = sys::block(&IGNORED);
        // SAFETY: the child runs only `watch`, which never returns: it ends
        // by `_exit`, so no value of this process is dropped or used in it
        // but the two ends of the pipe it is given. `watch` and `fill` call
        // only async-signal-safe functions, through forwards the adapter
        // marks so (system calls and nothing else: no allocation, no
        // lock): close, by dropping an `OwnedFd`; dup2; getrlimit and
        // close, or close_range; signal; setpgid; pthread_sigmask; read;
        // kill; nanosleep; _exit (getrlimit, close_range and nanosleep are
        // not on POSIX's list, but are bare system calls). They neither
        // allocate nor panic (their slices are indexed within bounds).
        let forked = unsafe { sys::fork() };
        if forked == Ok(0) {
            watch(read, write)
        }
        // This thread's mask back; setpgid on our child, which does the
        // same itself: whichever runs first, the warden leads its own
        // group before the command is started.
        sys::set_mask(&old);
        if let Ok(pid) = forked {
            let _ = sys::setpgid(pid, pid);
        }
        let pid = forked.map_err(|e| ("fork", os_error(e)))?;
        Ok(Warden {
            write: Arc::new(write),
            pid,
        })
    }

    /// The descriptor the command's child writes its PID to, before exec.
    pub(super) fn fd(&self) -> Arc<OwnedFd> {
        Arc::clone(&self.write)
    }

    /// Tells the warden the group is gone, and reaps it. Called once
    /// nothing of the command's group is left, before the release: from
    /// then on the supervisor's death ends nothing. Waits for the warden's
    /// exit at most [`STAND_DOWN_PATIENCE`], with `pause` (which returns
    /// early on SIGCHLD): a warden stopped by a signal must not keep the
    /// lock held, and it holds no descriptor but its pipe, so one left
    /// running harms nothing and exits as soon as it runs again.
    pub(super) fn stand_down(self, mut pause: impl FnMut(Duration)) {
        let _ = sys::write(&*self.write, &[1]);
        let start = std::time::Instant::now();
        loop {
            // A non-blocking look at our own child. Anything but "still
            // running" ends the wait: reaped, or reaped already (ECHILD).
            if !matches!(sys::try_wait(self.pid), Ok(None)) {
                return;
            }
            match STAND_DOWN_PATIENCE.checked_sub(start.elapsed()) {
                Some(left) if !left.is_zero() => pause(left),
                _ => return,
            }
        }
    }
}

/// Writes this process's PID, its group's ID, to the warden: called in
/// the command's child before exec, once the child leads its group.
/// Async-signal-safe.
pub(super) fn announce(fd: impl AsFd) -> Result<(), Errno> {
    let pgid = sys::getpgrp();
    if pgid != sys::getpid() {
        // Not yet its group's leader: the warden would end the wrong
        // group.
        return Err(Errno::INVAL);
    }
    // A write of four bytes to a pipe is atomic: all or nothing.
    let bytes = pgid.to_ne_bytes();
    match sys::write(fd, &bytes)? {
        n if n == bytes.len() => Ok(()),
        _ => Err(Errno::IO),
    }
}

/// The warden's life: see the module's documentation.
fn watch(read: OwnedFd, write: OwnedFd) -> ! {
    // Async-signal-safe calls only (close, dup2, getrlimit, close_range,
    // signal, setpgid, pthread_sigmask, read, kill, nanosleep, _exit) on
    // this process's own descriptors and group.
    drop(write);
    // Only the pipe is kept, as descriptor 0: the warden holds no one's
    // output pipe, terminal, socket or lock file open.
    let kept;
    let read = if read.as_raw_fd() == 0 || sys::dup2_stdin(&read).is_err() {
        kept = read;
        kept.as_fd()
    } else {
        drop(read);
        sys::stdin()
    };
    // The handler `run` put on SIGCHLD writes to the supervisor's event
    // pipe, closed below: the default (ignore) instead, which is all a
    // process without children needs.
    sys::set_default(sys::SIGCHLD);
    // SAFETY: no descriptor but `read` is used or closed again in this
    // process. It has one thread, this one; it ends by `_exit` below and
    // never returns, so no owner of a descriptor (the supervisor's event
    // pipe, the lock's file) is ever dropped in it, and none but
    // `read` is used from here. The only handlers of this process's own
    // that use a descriptor are those of `catch`, which write to the
    // event pipe: SIGCHLD's is reset above, and those of the forwarded
    // and stop signals (all in `IGNORED`) stay blocked, since the fork,
    // until they are ignored below.
    unsafe { sys::close_all_but(read) };
    // A group of its own: a signal to the supervisor's group (a shell's
    // job, `timeout`) does not reach it.
    let _ = sys::setpgid(0, 0);
    // Ignored, then unblocked: one that came since the fork is
    // discarded.
    for signal in IGNORED {
        sys::ignore(signal);
    }
    sys::unblock(&IGNORED);
    let mut pgid = [0u8; 4];
    if fill(read, &mut pgid) < pgid.len() {
        // No command was started: nothing to end.
        sys::exit_now(0);
    }
    let pgid = i32::from_ne_bytes(pgid);
    let mut byte = [0u8; 1];
    if fill(read, &mut byte) == 1 || pgid <= 1 {
        sys::exit_now(0);
    }
    // The supervisor is gone and did not dismiss us.
    let looks = KILL_PATIENCE.as_millis() / KILL_LOOK.as_millis();
    for _ in 0..looks {
        if sys::kill_group(pgid, sys::SIGKILL).is_err() {
            break;
        }
        sys::sleep(KILL_LOOK);
    }
    sys::exit_now(0)
}

/// Reads into `buf` until it is full, the pipe's end or an error other
/// than EINTR; returns how many bytes came.
fn fill(fd: BorrowedFd<'_>, buf: &mut [u8]) -> usize {
    let mut got = 0;
    while got < buf.len() {
        match sys::read(fd, &mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e == Errno::INTR => {}
            Err(_) => break,
        }
    }
    got
}
