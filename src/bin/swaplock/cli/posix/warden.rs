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

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// The signals the warden ignores: those sent to a job or a session
/// (a terminal's ^C, ^\ and ^Z, a hang-up, `kill` of a job, `timeout`),
/// and SIGPIPE.
const IGNORED: [libc::c_int; 10] = [
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
    libc::SIGPIPE,
    libc::SIGUSR1,
    libc::SIGUSR2,
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
    write: OwnedFd,
    pid: libc::pid_t,
}

impl Warden {
    /// Forks the warden. The error names the call that failed; the
    /// caller refuses to run the command without a warden.
    pub(super) fn start() -> Result<Warden, (&'static str, std::io::Error)> {
        let mut fds = [0; 2];
        // SAFETY: pipe(2) fills both descriptors on success.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } == -1 {
            return Err(("pipe", std::io::Error::last_os_error()));
        }
        // SAFETY: both are fresh descriptors this process owns.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        for fd in fds {
            // SAFETY: setting a flag on a descriptor we own: neither end
            // may reach the command or any other program this one runs.
            if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } == -1 {
                return Err(("fcntl F_SETFD", std::io::Error::last_os_error()));
            }
        }
        // The job signals stay blocked across the fork, so that none can
        // end the warden before it ignores them.
        // SAFETY: signal-mask calls with valid sets.
        let old = unsafe {
            let mut block: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut block);
            for signal in IGNORED {
                libc::sigaddset(&mut block, signal);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
            old
        };
        // SAFETY: the child runs only `watch`, which calls
        // async-signal-safe functions, and never returns.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            watch(read.as_raw_fd(), write.as_raw_fd())
        }
        let forked = std::io::Error::last_os_error();
        // SAFETY: restoring this thread's mask; setpgid on our child,
        // which does the same itself: whichever runs first, the warden
        // leads its own group before the command is started.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            if pid > 0 {
                libc::setpgid(pid, pid);
            }
        }
        if pid == -1 {
            return Err(("fork", forked));
        }
        Ok(Warden { write, pid })
    }

    /// The descriptor the command's child writes its PID to, before exec.
    pub(super) fn fd(&self) -> RawFd {
        self.write.as_raw_fd()
    }

    /// Tells the warden the group is gone, and reaps it. Called once
    /// nothing of the command's group is left, before the release: from
    /// then on the supervisor's death ends nothing. Waits for the warden's
    /// exit at most [`STAND_DOWN_PATIENCE`], with `pause` (which returns
    /// early on SIGCHLD): a warden stopped by a signal must not keep the
    /// lock held, and it holds no descriptor but its pipe, so one left
    /// running harms nothing and exits as soon as it runs again.
    pub(super) fn stand_down(self, mut pause: impl FnMut(Duration)) {
        let byte = 1u8;
        // SAFETY: writing one byte from a valid buffer to our pipe.
        unsafe { libc::write(self.write.as_raw_fd(), (&byte as *const u8).cast(), 1) };
        let start = std::time::Instant::now();
        loop {
            let mut status = 0;
            // SAFETY: a non-blocking look at our own child. Anything but
            // 0 ends the wait: reaped, or reaped already (ECHILD).
            if unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } != 0 {
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
pub(super) fn announce(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: plain queries and one write from a valid buffer; a write
    // of four bytes to a pipe is atomic.
    unsafe {
        let pgid = libc::getpgrp();
        if pgid != libc::getpid() {
            // Not yet its group's leader: the warden would end the
            // wrong group.
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        let bytes = pgid.to_ne_bytes();
        if libc::write(fd, bytes.as_ptr().cast(), bytes.len()) != bytes.len() as isize {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The warden's life: see the module's documentation.
fn watch(read: RawFd, write: RawFd) -> ! {
    // SAFETY: async-signal-safe calls only (close, dup2, close_range,
    // setpgid, signal, sigprocmask, read, kill, nanosleep, _exit) on this process's own descriptors
    // and group.
    unsafe {
        libc::close(write);
        // Only the pipe is kept, as descriptor 0: the warden holds no
        // one's output pipe, terminal, socket or lock file open.
        let read = if read == 0 || libc::dup2(read, 0) == -1 {
            read
        } else {
            libc::close(read);
            0
        };
        close_all_but(read);
        // A group of its own: a signal to the supervisor's group (a
        // shell's job, `timeout`) does not reach it.
        libc::setpgid(0, 0);
        // Ignored, then unblocked: one that came since the fork is
        // discarded.
        let mut unblock: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut unblock);
        for signal in IGNORED {
            libc::signal(signal, libc::SIG_IGN);
            libc::sigaddset(&mut unblock, signal);
        }
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &unblock, std::ptr::null_mut());
        let mut pgid = [0u8; 4];
        if fill(read, &mut pgid) < pgid.len() {
            // No command was started: nothing to end.
            libc::_exit(0);
        }
        let pgid = libc::pid_t::from_ne_bytes(pgid);
        let mut byte = [0u8; 1];
        if fill(read, &mut byte) == 1 || pgid <= 1 {
            libc::_exit(0);
        }
        // The supervisor is gone and did not dismiss us.
        let looks = KILL_PATIENCE.as_millis() / KILL_LOOK.as_millis();
        for _ in 0..looks {
            if libc::kill(-pgid, libc::SIGKILL) == -1 {
                break;
            }
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: KILL_LOOK.as_nanos() as _,
            };
            libc::nanosleep(&pause, std::ptr::null_mut());
        }
        libc::_exit(0)
    }
}

/// Reads into `buf` until it is full, the pipe's end or an error other
/// than EINTR; returns how many bytes came.
///
/// # Safety
/// `fd` is a descriptor this process may read.
unsafe fn fill(fd: RawFd, buf: &mut [u8]) -> usize {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reading into the unfilled rest of a valid buffer.
        let n = unsafe { libc::read(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        if n > 0 {
            got += n as usize;
        } else if n == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    got
}

/// Closes every descriptor but `keep`.
///
/// # Safety
/// Called only in the warden, which uses no other descriptor.
unsafe fn close_all_but(keep: RawFd) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: close_range(2) (Linux 5.9) on descriptors nothing else
    // uses; its arguments are unsigned ints.
    unsafe {
        let keep = keep as libc::c_uint;
        let below = keep == 0 || libc::syscall(libc::SYS_close_range, 0, keep - 1, 0) == 0;
        if below && libc::syscall(libc::SYS_close_range, keep + 1, libc::c_uint::MAX, 0) == 0 {
            return;
        }
    }
    // Older kernels and other systems: one by one, up to the limit (a
    // descriptor above 65,536 stays open until the warden exits).
    // SAFETY: getrlimit fills a valid struct; close on plain numbers.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        let top = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            (limit.rlim_cur as u64).clamp(1024, 65_536) as RawFd
        } else {
            1024
        };
        for fd in (0..top).filter(|&fd| fd != keep) {
            libc::close(fd);
        }
    }
}
