use super::*;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::sync::atomic::{AtomicI32, Ordering};
use swaplock::soft::{Compromise, SoftLockGuard};
use swaplock::FileLockGuard;
use warden::Warden;

mod warden;

/// `run --etcd`: as a lease, with the variables `etcdctl lock`
/// exports.
#[cfg(feature = "etcd")]
pub(super) fn run_etcd(opts: Options, lock: fn(&Options) -> swaplock::etcd::EtcdLock) -> i32 {
    // The pipe exists before the lock, so that the keep-alive's
    // report can never come before it.
    let events = match Events::new() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("swaplock: cannot make a pipe: {e}");
            return 255;
        }
    };
    let lock = lock(&opts).on_compromise(|_| wake(LEASE_EVENT));
    let guard = match take(&opts, &lock) {
        Ok(g) => g,
        Err(code) => return code,
    };
    let name = format!("etcd lock {}", lock.name());
    supervise(&opts, &events, &name, guard)
}

pub(super) fn run(opts: Options) -> i32 {
    match opts.kind {
        LockKind::Fcntl | LockKind::Flock => run_kernel(opts),
        LockKind::Soft(kind) => run_soft(opts, kind),
    }
}

fn run_kernel(opts: Options) -> i32 {
    let path = PathBuf::from(&opts.rest[0]);
    // The command's lock, as with-lock-ex's: owned by the process, so
    // that it ends with the command even where a child it left keeps
    // the descriptor, and with-lock-ex -l names its holder.
    let lock = if opts.kind == LockKind::Flock {
        FileLock::flock(path)
    } else {
        FileLock::new(path).owned_by_process()
    }
    .allow_client_local(crate::client_local());
    let taken = if opts.shared {
        take(&opts, &Shared(&lock))
    } else {
        take(&opts, &lock)
    };
    let guard = match taken {
        Ok(g) => g,
        Err(code) => return code,
    };
    if lock.fell_back_to_soft() {
        // flock answered ENOSYS: the lock is a soft marker now, which
        // outlives no process by itself, so hold it from a parent.
        let events = match Events::new() {
            Ok(e) => e,
            Err(e) => {
                eprintln!("swaplock: cannot make a pipe: {e}");
                let _ = guard.release();
                return 255;
            }
        };
        let path = opts.rest[0].to_string_lossy().into_owned();
        return supervise(&opts, &events, &path, guard);
    }
    if let Err(e) = guard.inherit_on_exec() {
        // Named as the core names errno values.
        let errno = swaplock::core::Errno::from_raw(e.raw_os_error().unwrap_or(0));
        eprintln!("swaplock: fcntl F_SETFD: {errno}");
        return 255;
    }
    let e = std::process::Command::new(&opts.rest[1])
        .args(&opts.rest[2..])
        .exec();
    eprintln!(
        "swaplock: {}: unable to execute command: {e}",
        opts.rest[1].to_string_lossy()
    );
    255
}

/// How long what is left of the command's process group has to end
/// after SIGTERM before it gets SIGKILL.
const GRACE: Duration = Duration::from_secs(2);
/// The signals the supervisor passes on to the command's group.
const FORWARDED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
/// Stop signals the supervisor takes (those not inherited as ignored):
/// stopped alone, it would leave its command running while a lease
/// expires, so the command's group is stopped with it.
const STOPS: [libc::c_int; 3] = [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU];
/// The event the lease heartbeat sends when the lease is lost (no
/// signal has number 0).
const LEASE_EVENT: u8 = 0;

/// The write end of the supervisor's event pipe, for the signal
/// handlers and the lease heartbeat; -1 before it exists.
static WAKE: AtomicI32 = AtomicI32::new(-1);

/// Sends `event` to the supervisor's loop. Async-signal-safe: one
/// `write(2)` to a non-blocking pipe, with `errno` kept for the code
/// the signal interrupted.
fn wake(event: u8) {
    let fd = WAKE.load(Ordering::SeqCst);
    if fd < 0 {
        return;
    }
    // SAFETY: errno is thread-local; writing one byte from a valid
    // buffer to a descriptor that stays open for the process's life.
    unsafe {
        let errno = errno_location();
        let saved = *errno;
        libc::write(fd, (&event as *const u8).cast(), 1);
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

extern "C" fn on_signal(signal: libc::c_int) {
    wake(signal as u8);
}

/// The supervisor's event pipe: forwarded signals, SIGCHLD and a lost
/// lease each write a byte, so one `poll(2)` waits for all of them
/// and no event can slip in between a check and the wait.
struct Events {
    read: OwnedFd,
    _write: OwnedFd,
}

impl Events {
    fn new() -> std::io::Result<Self> {
        let mut fds = [0; 2];
        // SAFETY: pipe(2) fills both descriptors on success.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } == -1 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both are fresh descriptors this process owns.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        for fd in [fds[0], fds[1]] {
            // SAFETY: setting flags on descriptors we own. Close on
            // exec keeps them out of the command; non-blocking keeps
            // a full pipe from blocking a signal handler.
            unsafe {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                let flags = libc::fcntl(fd, libc::F_GETFL);
                libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
            }
        }
        WAKE.store(fds[1], Ordering::SeqCst);
        Ok(Events {
            read,
            _write: write,
        })
    }

    /// Waits up to `timeout` (for ever if `None`) for events, and
    /// returns those that came.
    fn wait(&self, timeout: Option<Duration>) -> Vec<u8> {
        let mut poll = libc::pollfd {
            fd: self.read.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.map_or(-1, |t| t.as_millis().clamp(1, 60_000) as libc::c_int);
        // SAFETY: one valid pollfd. EINTR (a signal) just returns.
        unsafe { libc::poll(&mut poll, 1, ms) };
        let mut events = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            // SAFETY: reading into a buffer of the given length.
            let n = unsafe { libc::read(poll.fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            events.extend_from_slice(&buf[..n as usize]);
        }
        events
    }
}

/// Installs `handler` for `signal`, without `SA_RESTART`; returns
/// whether the signal was inherited as ignored, in which case it is
/// left ignored (a `nohup`ed run keeps ignoring SIGHUP, as the
/// command does under a kernel lock).
fn catch(signal: libc::c_int, keep_ignored: bool) -> bool {
    // SAFETY: querying and setting a disposition with valid structs;
    // the handler only writes to a pipe, which is async-signal-safe.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut old);
        let ignored = old.sa_sigaction == libc::SIG_IGN;
        if ignored && keep_ignored {
            return true;
        }
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as *const () as usize;
        libc::sigaction(signal, &action, std::ptr::null_mut());
        ignored
    }
}

/// The controlling terminal, when this process's group has it in the
/// foreground: the command's group gets it while the command runs, so
/// that it can read the terminal and gets the terminal's signals.
struct Terminal(OwnedFd);

impl Terminal {
    fn foreground() -> Option<Self> {
        // SAFETY: opening a fixed path; the descriptor is owned below.
        let fd = unsafe {
            libc::open(
                c"/dev/tty".as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return None;
        }
        // SAFETY: a fresh descriptor this process owns.
        let tty = Terminal(unsafe { OwnedFd::from_raw_fd(fd) });
        // SAFETY: plain queries.
        let ours = unsafe { libc::tcgetpgrp(fd) == libc::getpgrp() };
        ours.then_some(tty)
    }

    /// Gives the terminal to `pgid`. SIGTTOU is blocked meanwhile, since
    /// a caller in a background group would otherwise be stopped.
    /// Async-signal-safe: the command's child calls it before exec.
    fn give(fd: libc::c_int, pgid: libc::pid_t) {
        // SAFETY: signal-mask calls with valid sets, and tcsetpgrp.
        unsafe {
            let mut block: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut block);
            libc::sigaddset(&mut block, libc::SIGTTOU);
            libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
            libc::tcsetpgrp(fd, pgid);
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        }
    }

    /// Takes the terminal back from a command that failed to start,
    /// whose group may have taken it before its exec failed.
    fn reclaim(&self) {
        // SAFETY: a plain query.
        let own = unsafe { libc::getpgrp() };
        Terminal::give(self.0.as_raw_fd(), own);
    }

    /// Takes the terminal back from the command's group `pgid`, if it
    /// still has it.
    fn take_back(&self, pgid: libc::pid_t) {
        let fd = self.0.as_raw_fd();
        // SAFETY: plain queries.
        if unsafe { libc::tcgetpgrp(fd) } == pgid {
            // SAFETY: a plain query.
            let own = unsafe { libc::getpgrp() };
            Terminal::give(fd, own);
        }
    }
}

/// Whether any process of group `pgid` is left.
fn group_alive(pgid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

/// Signals every process of group `pgid`.
fn signal_group(pgid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: the group is the command's, made for it at spawn.
    unsafe { libc::kill(-pgid, signal) };
}

/// How the lease was lost, in words.
fn lost_because(c: Compromise) -> String {
    match c {
        Compromise::MarkerMissing => "its marker was removed".into(),
        Compromise::OwnerChanged => "another marker replaced it".into(),
        Compromise::RefreshFailed(errno) => format!("it could not be refreshed: {errno}"),
        Compromise::LeaseExpired => "etcd says the lease expired".into(),
        Compromise::Unreachable => "etcd answered no keep-alive within the lease's TTL".into(),
        other => format!("{other:?}"),
    }
}

fn run_soft(opts: Options, kind: Kind) -> i32 {
    // The pipe exists before the lock, so that the lease heartbeat's
    // report can never come before it.
    let events = match Events::new() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("swaplock: cannot make a pipe: {e}");
            return 255;
        }
    };
    let lock = soft_lock(&opts, kind).on_compromise(|_| wake(LEASE_EVENT));
    let guard = match take(&opts, &lock) {
        Ok(g) => g,
        Err(code) => return code,
    };
    let path = guard.path().display().to_string();
    supervise(&opts, &events, &path, guard)
}

/// A lock `supervise` holds while the command runs.
trait Held {
    /// Why the lease was lost, if it was.
    fn compromise(&self) -> Option<Compromise>;
    /// Whether the lease is lost now, looking again (before a release).
    fn lease_lost(&self) -> Option<Compromise>;
    /// Releases the lock.
    fn release(self) -> std::io::Result<()>;
    /// The variables the command gets.
    fn env(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
}

/// An etcd lock, kept alive as a lease; the command learns its key
/// and revision as from `etcdctl lock`, and its fencing token.
#[cfg(feature = "etcd")]
impl Held for swaplock::etcd::EtcdLockGuard {
    fn compromise(&self) -> Option<Compromise> {
        swaplock::etcd::EtcdLockGuard::compromise(self)
    }
    fn lease_lost(&self) -> Option<Compromise> {
        swaplock::etcd::EtcdLockGuard::lease_lost(self)
    }
    fn release(self) -> std::io::Result<()> {
        swaplock::etcd::EtcdLockGuard::release(self)
    }
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("SWAPLOCK_FENCING_TOKEN", self.fencing_token().to_string()),
            ("ETCD_LOCK_KEY", self.key().to_owned()),
            ("ETCD_LOCK_REV", self.revision().to_string()),
        ]
    }
}

impl Held for SoftLockGuard {
    fn compromise(&self) -> Option<Compromise> {
        SoftLockGuard::compromise(self)
    }
    fn lease_lost(&self) -> Option<Compromise> {
        SoftLockGuard::lease_lost(self)
    }
    fn release(self) -> std::io::Result<()> {
        SoftLockGuard::release(self)
    }
}

/// The `flock` fallback's lock, a soft marker: no lease.
impl Held for FileLockGuard {
    fn compromise(&self) -> Option<Compromise> {
        None
    }
    fn lease_lost(&self) -> Option<Compromise> {
        None
    }
    fn release(self) -> std::io::Result<()> {
        FileLockGuard::release(self)
    }
}

/// What the supervisor learned by the time the command's group is gone.
struct Outcome {
    /// The command's wait status; `None` if it could not be waited for.
    status: Option<libc::c_int>,
    /// Why the lease was lost, if the loss stopped the command.
    lost: Option<Compromise>,
}

/// Runs the command in a process group of its own while this process
/// holds the lock; forwards SIGINT, SIGTERM and SIGHUP (those not
/// inherited as ignored) to the group; stops the group if the lease is
/// lost; once the command ends, ends what is left of its group (SIGTERM,
/// then SIGKILL after [`GRACE`]); then releases the lock and returns
/// the exit status: the command's (128 + the signal, if a signal ended
/// it), [`LEASE_LOST`], or [`RELEASE_FAILED`].
///
/// Should this process die, its warden (forked before the command) ends
/// the command's whole group. On Linux and Android the command also gets
/// SIGKILL from the kernel then, and this process adopts the orphans of
/// the command's tree (a child subreaper), so that it sees them end
/// before it releases.
fn supervise(opts: &Options, events: &Events, path: &str, held: impl Held) -> i32 {
    let compromise = || held.compromise();
    let mut ignored = [false; FORWARDED.len()];
    for (signal, ignored) in FORWARDED.iter().zip(&mut ignored) {
        *ignored = catch(*signal, true);
    }
    let mut stops_ignored = [false; STOPS.len()];
    for (signal, ignored) in STOPS.iter().zip(&mut stops_ignored) {
        *ignored = catch(*signal, true);
    }
    // An inherited SIG_IGN would have the kernel reap the command, and
    // waitpid fail with ECHILD: take SIGCHLD, and give the command
    // back the disposition it would have inherited.
    let chld_ignored = catch(libc::SIGCHLD, false);
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: a plain prctl on this process.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
    }
    // Forked before the command, so that nothing of the command's
    // group ever runs without it.
    let warden = match Warden::start() {
        Ok(w) => w,
        Err((call, e)) => {
            eprintln!(
                "swaplock: {call}: {e}: cannot start the process that ends the command's \
                 group should this one die, so the command was not run"
            );
            if let Err(e) = held.release() {
                eprintln!("swaplock: {e}");
            }
            return 255;
        }
    };
    let announce_to = warden.fd();
    let terminal = Terminal::foreground();
    let tty = terminal.as_ref().map(|t| t.0.as_raw_fd());
    // SAFETY: a plain query.
    let supervisor = unsafe { libc::getpid() };
    let mut command = std::process::Command::new(&opts.rest[1]);
    command
        .args(&opts.rest[2..])
        .envs(held.env())
        .process_group(0);
    // SAFETY: the closure calls only async-signal-safe functions
    // (getpgrp, write, prctl, getppid, signal, sigprocmask, tcsetpgrp)
    // and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            // The warden learns the group before the command runs.
            warden::announce(announce_to)?;
            #[cfg(any(target_os = "linux", target_os = "android"))]
            {
                // The command must not outlive its lock holder.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                // A holder that died before the line above sends no
                // signal: do not start the command orphaned.
                if libc::getppid() != supervisor {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
            }
            #[cfg(not(any(target_os = "linux", target_os = "android")))]
            let _ = supervisor;
            for (&signal, &ignored) in FORWARDED
                .iter()
                .zip(&ignored)
                .chain(STOPS.iter().zip(&stops_ignored))
            {
                if !ignored {
                    libc::signal(signal, libc::SIG_DFL);
                }
            }
            let chld = if chld_ignored {
                libc::SIG_IGN
            } else {
                libc::SIG_DFL
            };
            libc::signal(libc::SIGCHLD, chld);
            if let Some(fd) = tty {
                Terminal::give(fd, libc::getpid());
            }
            Ok(())
        });
    }
    let child = match command.spawn() {
        Ok(c) => c,
        Err(e) => {
            if let Some(t) = &terminal {
                t.reclaim();
            }
            eprintln!(
                "swaplock: {}: unable to execute command: {e}",
                opts.rest[1].to_string_lossy()
            );
            warden.stand_down(|t| drop(events.wait(Some(t))));
            if let Err(e) = held.release() {
                eprintln!("swaplock: {e}");
            }
            return 255;
        }
    };
    // The child leads its own group: its PID is the group's ID.
    let pgid = child.id() as libc::pid_t;
    let outcome = watch(events, pgid, terminal.as_ref(), &compromise);
    warden.stand_down(|t| drop(events.wait(Some(t))));
    // A supervisor stopped longer than its lease (SIGSTOP cannot be
    // caught) finds out here, before its heartbeat runs again.
    let lost_late = if outcome.lost.is_none() {
        held.lease_lost()
    } else {
        None
    };
    let released = held.release();
    let mut code = match outcome.status {
        Some(status) => {
            let status = std::process::ExitStatus::from_raw(status);
            status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
        }
        None => 255,
    };
    if let Some(c) = outcome.lost {
        eprintln!(
            "swaplock: the lease on {path} was lost ({}): the command was stopped",
            lost_because(c)
        );
        code = LEASE_LOST;
    } else if let Some(c) = lost_late {
        eprintln!(
            "swaplock: the lease on {path} was lost ({}) before the command ended",
            lost_because(c)
        );
        code = LEASE_LOST;
    }
    if let Err(e) = released {
        eprintln!("swaplock: {e}");
        if code == 0 {
            code = RELEASE_FAILED;
        }
    }
    code
}

/// Waits for the command `pgid` (which leads its group) while
/// forwarding signals, and until nothing of its group is left.
fn watch(
    events: &Events,
    pgid: libc::pid_t,
    terminal: Option<&Terminal>,
    compromise: &dyn Fn() -> Option<Compromise>,
) -> Outcome {
    let mut outcome = Outcome {
        status: None,
        lost: None,
    };
    // With the terminal given to the command, a stop (^Z) of the
    // command stops this process too, as a shell expects of its job.
    let flags = if terminal.is_some() {
        libc::WNOHANG | libc::WUNTRACED
    } else {
        libc::WNOHANG
    };
    'running: loop {
        // Reap every child: the command, and orphans of its tree
        // adopted as their subreaper.
        loop {
            let mut status = 0;
            // SAFETY: waiting for our own children with a valid pointer.
            let r = unsafe { libc::waitpid(-1, &mut status, flags) };
            if r == pgid {
                if libc::WIFSTOPPED(status) {
                    if let Some(t) = terminal {
                        t.take_back(pgid);
                        // SAFETY: stopping this process; it resumes on SIGCONT.
                        unsafe { libc::kill(libc::getpid(), libc::SIGSTOP) };
                        // SAFETY: plain queries.
                        if unsafe { libc::tcgetpgrp(t.0.as_raw_fd()) == libc::getpgrp() } {
                            Terminal::give(t.0.as_raw_fd(), pgid);
                        }
                    }
                    signal_group(pgid, libc::SIGCONT);
                    continue;
                }
                outcome.status = Some(status);
                break 'running;
            }
            if r > 0 {
                continue;
            }
            if r == -1 {
                let e = std::io::Error::last_os_error();
                if e.kind() == ErrorKind::Interrupted {
                    continue;
                }
                // Never spin: the command's status is lost, but its
                // group is still ended below before the release.
                eprintln!("swaplock: cannot wait for the command: {e}");
                break 'running;
            }
            break;
        }
        for event in events.wait(None) {
            match event as libc::c_int {
                e if e == LEASE_EVENT as libc::c_int => {
                    outcome.lost = compromise();
                    if outcome.lost.is_some() {
                        break 'running;
                    }
                }
                libc::SIGCHLD => {}
                libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU => {
                    // Stopped alone, this process would leave its
                    // command running while the lease expires: the
                    // command's group stops first, and goes on with it.
                    signal_group(pgid, libc::SIGSTOP);
                    // SAFETY: stopping this process; it resumes on SIGCONT.
                    unsafe { libc::kill(libc::getpid(), libc::SIGSTOP) };
                    signal_group(pgid, libc::SIGCONT);
                }
                signal => signal_group(pgid, signal),
            }
        }
    }
    if let Some(t) = terminal {
        t.take_back(pgid);
    }
    end_group(events, pgid, &mut outcome);
    outcome
}

/// Ends what is left of the command's group: SIGTERM, then SIGKILL
/// after [`GRACE`], and returns once no process of it is left (or,
/// past another grace period after SIGKILL, with a warning: what is
/// left then can no longer run). Reaps the command if it was still
/// running, and every orphan it adopted.
fn end_group(events: &Events, pgid: libc::pid_t, outcome: &mut Outcome) {
    if !group_alive(pgid) {
        return;
    }
    // A lost lease may already be another process's: no grace, which
    // could outlast the lease itself (a short lease expires within a
    // third of its duration of the loss being reported).
    let mut killed = outcome.lost.is_some();
    let first = if killed { libc::SIGKILL } else { libc::SIGTERM };
    signal_group(pgid, first);
    // SIGCONT too: a stopped process acts on SIGTERM only once continued.
    signal_group(pgid, libc::SIGCONT);
    let start = std::time::Instant::now();
    loop {
        loop {
            let mut status = 0;
            // SAFETY: waiting for our own children with a valid pointer.
            let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if r <= 0 {
                break;
            }
            if r == pgid && outcome.status.is_none() && outcome.lost.is_none() {
                outcome.status = Some(status);
            }
        }
        if !group_alive(pgid) {
            return;
        }
        let elapsed = start.elapsed();
        if !killed && elapsed >= GRACE {
            signal_group(pgid, libc::SIGKILL);
            killed = true;
        } else if killed && elapsed >= 2 * GRACE {
            eprintln!(
                "swaplock: processes of the command's group {pgid} remain after SIGKILL \
             (exiting, or in uninterruptible sleep); releasing the lock"
            );
            return;
        }
        // Processes of the group that are not this process's children
        // send no SIGCHLD here: look again at short intervals.
        for event in events.wait(Some(Duration::from_millis(50))) {
            match event as libc::c_int {
                e if e == LEASE_EVENT as libc::c_int || e == libc::SIGCHLD => {}
                signal => signal_group(pgid, signal),
            }
        }
    }
}
