use super::*;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::sync::Arc;
use swaplock::core::Errno;
use swaplock::soft::{Compromise, SoftLockGuard};
use swaplock::supervise as sys;
use swaplock::FileLockGuard;
use warden::Warden;

mod sqlite;
mod warden;

/// `run --etcd`: as a lease, with the variables `etcdctl lock`
/// exports.
#[cfg(feature = "etcd")]
pub(super) fn run_etcd(opts: Options, lock: swaplock::etcd::EtcdLock) -> i32 {
    // The pipe exists before the lock, so that the keep-alive's
    // report can never come before it.
    let events = match Events::new() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("swaplock: cannot make a pipe: {e}");
            return 255;
        }
    };
    let lock = lock.on_compromise(|_| sys::wake(LEASE_EVENT));
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
        LockKind::Sqlite => sqlite::run_sqlite(opts),
        LockKind::Soft(kind) => run_soft(opts, kind),
        LockKind::Rw => run_rw(opts),
        LockKind::Strict => run_strict(opts),
    }
}

/// `run --kind strict`: a supervisor holds the claims, as for a soft
/// kind (nothing expires, so nothing is lost while the command runs).
fn run_strict(opts: Options) -> i32 {
    let events = match Events::new() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("swaplock: cannot make a pipe: {e}");
            return 255;
        }
    };
    let lock = swaplock::StrictLock::new(PathBuf::from(&opts.rest[0]));
    let guard = match take(&opts, &lock) {
        Ok(g) => g,
        Err(code) => return code,
    };
    let path = guard.path().display().to_string();
    supervise(&opts, &events, &path, guard)
}

/// `run --kind rw`: held by the supervisor as a soft lock is, the command
/// told the generation that granted it.
fn run_rw(opts: Options) -> i32 {
    let events = match Events::new() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("swaplock: cannot make a pipe: {e}");
            return 255;
        }
    };
    let lock = rw_lock(&opts).on_compromise(|_| sys::wake(LEASE_EVENT));
    let guard = match take(
        &opts,
        &RwTake {
            lock: &lock,
            shared: opts.shared,
        },
    ) {
        Ok(g) => g,
        Err(code) => return code,
    };
    let path = lock.path().display().to_string();
    supervise(&opts, &events, &path, guard)
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
const FORWARDED: [i32; 3] = [sys::SIGINT, sys::SIGTERM, sys::SIGHUP];
/// Stop signals the supervisor takes (those not inherited as ignored):
/// stopped alone, it would leave its command running while a lease
/// expires, so the command's group is stopped with it.
const STOPS: [i32; 3] = [sys::SIGTSTP, sys::SIGTTIN, sys::SIGTTOU];
/// The event the lease heartbeat sends when the lease is lost (no
/// signal has number 0).
const LEASE_EVENT: u8 = 0;

/// An errno from the adapter as an I/O error, as the messages print it.
fn os_error(e: Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.raw())
}

/// The supervisor's event pipe: forwarded signals, SIGCHLD and a lost
/// lease each write a byte, so one `poll(2)` waits for all of them
/// and no event can slip in between a check and the wait.
struct Events {
    read: OwnedFd,
}

impl Events {
    fn new() -> std::io::Result<Self> {
        let (read, write) = sys::pipe().map_err(os_error)?;
        for fd in [read.as_fd(), write.as_fd()] {
            // Close on exec keeps them out of the command; non-blocking
            // keeps a full pipe from blocking a signal handler.
            let _ = sys::set_cloexec(fd);
            let _ = sys::set_nonblocking(fd);
        }
        // The signal handlers and the lease heartbeat write to it, for
        // the rest of the process's life.
        sys::wake_to(write);
        Ok(Events { read })
    }

    /// Waits up to `timeout` (for ever if `None`) for events, and
    /// returns those that came.
    fn wait(&self, timeout: Option<Duration>) -> Vec<u8> {
        let timeout = timeout.map(|t| Duration::from_millis(t.as_millis().clamp(1, 60_000) as u64));
        // EINTR (a signal) just returns.
        let _ = sys::poll_readable(&self.read, timeout);
        let mut events = Vec::new();
        let mut buf = [0u8; 64];
        while let Ok(n @ 1..) = sys::read(&self.read, &mut buf) {
            events.extend_from_slice(&buf[..n]);
        }
        events
    }
}

/// Takes `signal` with the handler that wakes the supervisor's loop
/// with the signal's number (without `SA_RESTART`); returns whether
/// the signal was inherited as ignored, in which case, with
/// `keep_ignored`, it is left ignored (a `nohup`ed run keeps ignoring
/// SIGHUP, as the command does under a kernel lock).
fn catch(signal: i32, keep_ignored: bool) -> bool {
    let ignored = sys::is_ignored(signal);
    if ignored && keep_ignored {
        return true;
    }
    let _ = sys::catch(signal);
    ignored
}

/// The controlling terminal, when this process's group has it in the
/// foreground: the command's group gets it while the command runs, so
/// that it can read the terminal and gets the terminal's signals.
struct Terminal(Arc<OwnedFd>);

impl Terminal {
    fn foreground() -> Option<Self> {
        let tty = sys::open_tty().ok()?;
        let ours = sys::foreground_group(&tty) == Some(sys::getpgrp());
        ours.then(|| Terminal(Arc::new(tty)))
    }

    /// The terminal's descriptor.
    fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }

    /// Gives the terminal to `pgid`. SIGTTOU is blocked meanwhile, since
    /// a caller in a background group would otherwise be stopped.
    /// Async-signal-safe: the command's child calls it before exec.
    fn give(tty: BorrowedFd<'_>, pgid: i32) {
        let old = sys::block(&[sys::SIGTTOU]);
        let _ = sys::set_foreground_group(tty, pgid);
        sys::set_mask(&old);
    }

    /// Takes the terminal back from a command that failed to start,
    /// whose group may have taken it before its exec failed.
    fn reclaim(&self) {
        Terminal::give(self.fd(), sys::getpgrp());
    }

    /// Takes the terminal back from the command's group `pgid`, if it
    /// still has it.
    fn take_back(&self, pgid: i32) {
        if sys::foreground_group(self.fd()) == Some(pgid) {
            Terminal::give(self.fd(), sys::getpgrp());
        }
    }
}

/// Whether any process of group `pgid` is left.
fn group_alive(pgid: i32) -> bool {
    sys::group_exists(pgid)
}

/// Signals every process of group `pgid`.
fn signal_group(pgid: i32, signal: i32) {
    let _ = sys::kill_group(pgid, signal);
}

/// How the lease was lost, in words.
fn lost_because(c: Compromise) -> String {
    match c {
        Compromise::MarkerMissing => "its marker was removed".into(),
        Compromise::OwnerChanged => "another marker replaced it".into(),
        Compromise::RefreshFailed(errno) => format!("it could not be refreshed: {errno}"),
        Compromise::LeaseExpired => "etcd says the lease expired".into(),
        Compromise::Unreachable => "etcd answered no keep-alive within the lease's TTL".into(),
        Compromise::Evicted => "a peer evicted it from the lock's log".into(),
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
    let lock = soft_lock(&opts, kind).on_compromise(|_| sys::wake(LEASE_EVENT));
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

/// A read-write lock's hold: lost when evicted; the command gets the
/// generation that granted it as its fencing token.
impl Held for swaplock::SoftRwGuard {
    fn compromise(&self) -> Option<Compromise> {
        swaplock::SoftRwGuard::compromise(self)
    }
    fn lease_lost(&self) -> Option<Compromise> {
        swaplock::SoftRwGuard::lease_lost(self)
    }
    fn release(self) -> std::io::Result<()> {
        swaplock::SoftRwGuard::release(self)
    }
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![("SWAPLOCK_FENCING_TOKEN", self.generation().to_string())]
    }
}

/// A strict lock: nothing expires, so nothing is lost while held.
impl Held for swaplock::StrictLockGuard {
    fn compromise(&self) -> Option<Compromise> {
        None
    }
    fn lease_lost(&self) -> Option<Compromise> {
        None
    }
    fn release(self) -> std::io::Result<()> {
        swaplock::StrictLockGuard::release(self)
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
    status: Option<i32>,
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
    let chld_ignored = catch(sys::SIGCHLD, false);
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let _ = sys::set_child_subreaper();
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
    let tty = terminal.as_ref().map(|t| Arc::clone(&t.0));
    let supervisor = sys::getpid();
    let mut command = std::process::Command::new(&opts.rest[1]);
    command
        .args(&opts.rest[2..])
        .envs(held.env())
        .process_group(0);
    // What the command's child does between fork and exec, with
    // async-signal-safe calls only (see the SAFETY comment below).
    let in_child = move || -> Result<(), Errno> {
        // The warden learns the group before the command runs.
        warden::announce(&announce_to)?;
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            // The command must not outlive its lock holder.
            sys::set_parent_death_signal(sys::SIGKILL)?;
            // A holder that died before the line above sends no
            // signal: do not start the command orphaned.
            if sys::getppid() != supervisor {
                return Err(Errno::SRCH);
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
                sys::set_default(signal);
            }
        }
        if chld_ignored {
            sys::ignore(sys::SIGCHLD);
        } else {
            sys::set_default(sys::SIGCHLD);
        }
        if let Some(tty) = &tty {
            Terminal::give(tty.as_fd(), sys::getpid());
        }
        Ok(())
    };
    // SAFETY: `in_child` runs between fork and exec. It calls only
    // async-signal-safe functions, through forwards the adapter marks so
    // (system calls and nothing else: no allocation, no lock): getpgrp,
    // getpid and write (`warden::announce`); prctl (not on POSIX's list,
    // but a bare system call) and getppid, on Linux and Android; signal;
    // pthread_sigmask and tcsetpgrp (`Terminal::give`). Otherwise it only
    // reads what it captured (numbers, arrays of flags, two `Arc`s it
    // never clones or drops) and returns an `Errno`: it allocates nothing
    // and cannot panic. The two descriptors it uses, the warden's pipe
    // and the terminal, are held open by the `Arc`s it owns.
    unsafe { sys::before_exec(&mut command, in_child) };
    let spawned = command.spawn();
    // The closure holds the warden's pipe and the terminal: they go with
    // it, so that from here the supervisor alone holds them.
    drop(command);
    let child = match spawned {
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
    let pgid = child.id() as i32;
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
    pgid: i32,
    terminal: Option<&Terminal>,
    compromise: &dyn Fn() -> Option<Compromise>,
) -> Outcome {
    let mut outcome = Outcome {
        status: None,
        lost: None,
    };
    // With the terminal given to the command, a stop (^Z) of the
    // command stops this process too, as a shell expects of its job.
    let stopped_too = terminal.is_some();
    'running: loop {
        // Reap every child: the command, and orphans of its tree
        // adopted as their subreaper.
        loop {
            match sys::try_wait_any(stopped_too) {
                Ok(Some((pid, status))) if pid == pgid => {
                    if status.stopped() {
                        if let Some(t) = terminal {
                            t.take_back(pgid);
                            // Stops this process; it resumes on SIGCONT.
                            let _ = sys::kill(sys::getpid(), sys::SIGSTOP);
                            if sys::foreground_group(t.fd()) == Some(sys::getpgrp()) {
                                Terminal::give(t.fd(), pgid);
                            }
                        }
                        signal_group(pgid, sys::SIGCONT);
                        continue;
                    }
                    outcome.status = Some(status.as_raw());
                    break 'running;
                }
                Ok(Some(_)) => continue,
                Ok(None) => break,
                Err(e) if e == Errno::INTR => continue,
                Err(e) => {
                    // Never spin: the command's status is lost, but its
                    // group is still ended below before the release.
                    eprintln!("swaplock: cannot wait for the command: {}", os_error(e));
                    break 'running;
                }
            }
        }
        for event in events.wait(None) {
            match i32::from(event) {
                e if e == i32::from(LEASE_EVENT) => {
                    outcome.lost = compromise();
                    if outcome.lost.is_some() {
                        break 'running;
                    }
                }
                sys::SIGCHLD => {}
                sys::SIGTSTP | sys::SIGTTIN | sys::SIGTTOU => {
                    // Stopped alone, this process would leave its
                    // command running while the lease expires: the
                    // command's group stops first, and goes on with it.
                    signal_group(pgid, sys::SIGSTOP);
                    // Stops this process; it resumes on SIGCONT.
                    let _ = sys::kill(sys::getpid(), sys::SIGSTOP);
                    signal_group(pgid, sys::SIGCONT);
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
fn end_group(events: &Events, pgid: i32, outcome: &mut Outcome) {
    if !group_alive(pgid) {
        return;
    }
    // A lost lease may already be another process's: no grace, which
    // could outlast the lease itself (a short lease expires within a
    // third of its duration of the loss being reported).
    let mut killed = outcome.lost.is_some();
    let first = if killed { sys::SIGKILL } else { sys::SIGTERM };
    signal_group(pgid, first);
    // SIGCONT too: a stopped process acts on SIGTERM only once continued.
    signal_group(pgid, sys::SIGCONT);
    let start = std::time::Instant::now();
    loop {
        while let Ok(Some((pid, status))) = sys::try_wait_any(false) {
            if pid == pgid && outcome.status.is_none() && outcome.lost.is_none() {
                outcome.status = Some(status.as_raw());
            }
        }
        if !group_alive(pgid) {
            return;
        }
        let elapsed = start.elapsed();
        if !killed && elapsed >= GRACE {
            signal_group(pgid, sys::SIGKILL);
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
            match i32::from(event) {
                e if e == i32::from(LEASE_EVENT) || e == sys::SIGCHLD => {}
                signal => signal_group(pgid, signal),
            }
        }
    }
}
