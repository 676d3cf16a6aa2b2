//! `swaplock`: run a command under a lock of any kind, and inspect or break
//! soft locks.
//!
//! ```text
//! swaplock run [--kind fcntl|flock|soft|marker|lease] [--wait|--fail|--quiet]
//!              [--timeout SECS] [--lifetime SECS] [--lease SECS] LOCKFILE COMMAND [ARGS...]
//! swaplock status [--kind soft|marker|lease] LOCKFILE
//! swaplock break [--kind soft|marker|lease] [--force] LOCKFILE
//! ```
//!
//! `run` waits for the lock by default (`--fail`: exit 255 if it is held;
//! `--quiet`: exit 0 without running the command). Kernel kinds exec the
//! command with the lock held, as `with-lock-ex` does. Soft kinds keep a
//! parent process that holds the marker (and heartbeats a lease), forwards
//! SIGINT, SIGTERM and SIGHUP to the command, removes the marker when the
//! command ends and exits with its status; the command is killed if the
//! parent dies, so it never runs on outside the lock.
//!
//! `status` prints who holds the lock, judged as a contender judges it, and
//! exits 0 when it is free, 1 when it is held. `break` removes a stale marker by the same safe path a
//! contender uses, and refuses a live holder unless `--force`.

#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
fn main() {
    std::process::exit(cli::main(std::env::args_os().skip(1).collect()));
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_vendor = "apple")))]
fn main() {
    eprintln!("swaplock: not supported on this platform yet");
    std::process::exit(255);
}

#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
mod cli {
    use std::ffi::OsString;
    use std::io::ErrorKind;
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::time::Duration;
    use swaplock::core::decide::HeldBecause;
    use swaplock::core::soft::Standing;
    use swaplock::soft::{Kind, SoftLock};
    use swaplock::FileLock;

    const USAGE: &str =
        "usage: swaplock run [--kind fcntl|flock|soft|marker|lease] [--wait|--fail|--quiet]
                    [--timeout SECS] [--lifetime SECS] [--lease SECS] LOCKFILE COMMAND [ARGS...]
       swaplock status [--kind soft|marker|lease] LOCKFILE
       swaplock break [--kind soft|marker|lease] [--force] LOCKFILE";

    #[derive(Clone, Copy, PartialEq)]
    enum LockKind {
        Fcntl,
        Flock,
        Soft(Kind),
    }

    #[derive(Clone, Copy, PartialEq)]
    enum Busy {
        Wait,
        Fail,
        Quiet,
    }

    struct Options {
        kind: LockKind,
        busy: Busy,
        timeout: Option<Duration>,
        lifetime: Option<Duration>,
        lease: Option<Duration>,
        force: bool,
        rest: Vec<OsString>,
    }

    fn usage(why: &str) -> i32 {
        eprintln!("swaplock: {why}\n{USAGE}");
        2
    }

    fn seconds(value: Option<OsString>) -> Result<Duration, String> {
        let text = value.ok_or("an option needs a value")?;
        let text = text.to_str().ok_or("a number of seconds must be text")?;
        let secs: f64 = text
            .parse()
            .map_err(|_| format!("not a number of seconds: {text}"))?;
        Duration::try_from_secs_f64(secs).map_err(|_| format!("not a number of seconds: {text}"))
    }

    fn parse(args: Vec<OsString>, default: LockKind) -> Result<Options, String> {
        let mut o = Options {
            kind: default,
            busy: Busy::Wait,
            timeout: None,
            lifetime: None,
            lease: None,
            force: false,
            rest: Vec::new(),
        };
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            match arg.to_str() {
                Some("--kind") => {
                    o.kind = match it.next().as_ref().and_then(|k| k.to_str()) {
                        Some("fcntl") => LockKind::Fcntl,
                        Some("flock") => LockKind::Flock,
                        Some("soft") => LockKind::Soft(Kind::Soft),
                        Some("marker") => LockKind::Soft(Kind::Marker),
                        Some("lease") => LockKind::Soft(Kind::Lease),
                        other => return Err(format!("unknown kind {other:?}")),
                    }
                }
                Some("--wait") => o.busy = Busy::Wait,
                Some("--fail") => o.busy = Busy::Fail,
                Some("--quiet") => o.busy = Busy::Quiet,
                Some("--force") => o.force = true,
                Some("--timeout") => o.timeout = Some(seconds(it.next())?),
                Some("--lifetime") => o.lifetime = Some(seconds(it.next())?),
                Some("--lease") => o.lease = Some(seconds(it.next())?),
                Some("--") => {
                    o.rest.extend(it);
                    break;
                }
                Some(s) if s.starts_with("--") => return Err(format!("unknown option {s}")),
                _ => {
                    o.rest.push(arg);
                    o.rest.extend(it);
                    break;
                }
            }
        }
        Ok(o)
    }

    pub(crate) fn main(args: Vec<OsString>) -> i32 {
        let mut args = args.into_iter();
        let command = args.next();
        let default = LockKind::Soft(Kind::Marker);
        let opts = match parse(args.collect(), default) {
            Ok(o) => o,
            Err(why) => return usage(&why),
        };
        match command.as_ref().and_then(|c| c.to_str()) {
            Some("run") if opts.rest.len() >= 2 => run(opts),
            Some("status") if opts.rest.len() == 1 => status(opts),
            Some("break") if opts.rest.len() == 1 => break_lock(opts),
            Some("--help" | "-h" | "help") => {
                println!("{USAGE}");
                0
            }
            _ => usage("missing or unknown arguments"),
        }
    }

    fn soft_lock(opts: &Options, kind: Kind) -> SoftLock {
        let mut lock = SoftLock::new(kind, PathBuf::from(&opts.rest[0]));
        if let Some(l) = opts.lifetime {
            lock = lock.lifetime(l);
        }
        if let Some(l) = opts.lease {
            lock = lock.lease_duration(l);
        }
        lock
    }

    /// Exit status for a busy lock: 255 with a message, or 0 when quiet.
    fn busy(opts: &Options, e: &std::io::Error) -> i32 {
        if opts.busy == Busy::Quiet {
            return 0;
        }
        eprintln!("swaplock: {e}");
        255
    }

    /// Takes a lock as the options say (wait, fail, quiet, timeout); on
    /// failure, the exit status (after printing why).
    fn take<G>(
        opts: &Options,
        lock: impl FnOnce() -> std::io::Result<G>,
        try_lock: impl FnOnce() -> std::io::Result<G>,
        lock_timeout: impl FnOnce(Duration) -> std::io::Result<G>,
    ) -> Result<G, i32> {
        let result = match (opts.busy, opts.timeout) {
            (_, Some(t)) => lock_timeout(t),
            (Busy::Wait, None) => lock(),
            _ => try_lock(),
        };
        result.map_err(|e| {
            if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
                busy(opts, &e)
            } else {
                eprintln!("swaplock: {e}");
                255
            }
        })
    }

    fn run(opts: Options) -> i32 {
        match opts.kind {
            LockKind::Fcntl | LockKind::Flock => run_kernel(opts),
            LockKind::Soft(kind) => run_soft(opts, kind),
        }
    }

    fn run_kernel(opts: Options) -> i32 {
        let path = PathBuf::from(&opts.rest[0]);
        let lock = if opts.kind == LockKind::Flock {
            FileLock::flock(path)
        } else {
            FileLock::new(path)
        };
        let guard = match take(
            &opts,
            || lock.lock(),
            || lock.try_lock(),
            |t| lock.lock_timeout(t),
        ) {
            Ok(g) => g,
            Err(code) => return code,
        };
        if lock.fell_back_to_soft() {
            // flock answered ENOSYS: the lock is a soft marker now, which
            // outlives no process by itself, so hold it from a parent.
            return supervise(&opts, || (guard.unlock(), None));
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

    static PENDING: AtomicI32 = AtomicI32::new(0);

    extern "C" fn remember(signal: libc::c_int) {
        PENDING.store(signal, Ordering::SeqCst);
    }

    fn run_soft(opts: Options, kind: Kind) -> i32 {
        let lock = soft_lock(&opts, kind);
        let guard = match take(
            &opts,
            || lock.lock(),
            || lock.try_lock(),
            |t| lock.lock_timeout(t),
        ) {
            Ok(g) => g,
            Err(code) => return code,
        };
        supervise(&opts, || {
            let compromised = guard.compromise();
            (guard.release(), compromised)
        })
    }

    /// Runs the command as a child while this process holds the lock:
    /// forwards SIGINT, SIGTERM and SIGHUP, has the child killed if this
    /// process dies, releases the lock when the child ends and returns its
    /// exit status (128 + the signal, if a signal ended it).
    fn supervise(
        opts: &Options,
        release: impl FnOnce() -> (std::io::Result<()>, Option<swaplock::soft::Compromise>),
    ) -> i32 {
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: the handler only stores to an atomic, which is
            // async-signal-safe; no SA_RESTART, so waitpid returns EINTR.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = remember as *const () as usize;
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
        let mut command = std::process::Command::new(&opts.rest[1]);
        command.args(&opts.rest[2..]);
        // Linux and Android only: macOS has no parent-death signal, so there
        // a command can outlive a killed `swaplock run`.
        // SAFETY: prctl is async-signal-safe; the closure allocates nothing.
        #[cfg(any(target_os = "linux", target_os = "android"))]
        unsafe {
            command.pre_exec(|| {
                // The command must not outlive its lock holder.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = match command.spawn() {
            Ok(c) => c,
            Err(e) => {
                eprintln!(
                    "swaplock: {}: unable to execute command: {e}",
                    opts.rest[1].to_string_lossy()
                );
                let _ = release();
                return 255;
            }
        };
        let pid = child.id() as libc::pid_t;
        let mut status: libc::c_int = 0;
        loop {
            // SAFETY: waiting for our own child with a valid status pointer.
            let r = unsafe { libc::waitpid(pid, &mut status, 0) };
            if r == pid {
                break;
            }
            let signal = PENDING.swap(0, Ordering::SeqCst);
            if signal != 0 {
                // SAFETY: signalling our own child.
                unsafe { libc::kill(pid, signal) };
            }
        }
        let (released, compromised) = release();
        if let Err(e) = released {
            eprintln!("swaplock: {e}");
        }
        if let Some(c) = compromised {
            eprintln!("swaplock: the lease was compromised while the command ran: {c:?}");
        }
        let status = std::process::ExitStatus::from_raw(status);
        status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
    }

    /// How a contender stands toward the recorded holder, for `status`:
    /// `alive`, `dead`, `pid reused` (alive, but another process: the
    /// start token differs) or `cannot tell` (another host, a failed
    /// probe, or a marker that names no holder a contender would judge).
    fn describe_holder(standing: Standing) -> &'static str {
        match standing {
            Standing::Held(HeldBecause::Alive) => "alive",
            Standing::Stale { recycled: true } => "pid reused",
            Standing::Stale { recycled: false } => "dead",
            _ => "cannot tell",
        }
    }

    fn status(opts: Options) -> i32 {
        let kind = match opts.kind {
            LockKind::Soft(k) => k,
            _ => {
                eprintln!("swaplock: status reads soft locks; use with-lock-ex -l for fcntl locks");
                return 2;
            }
        };
        let lock = soft_lock(&opts, kind);
        match lock.status() {
            Ok(None) => {
                println!("free");
                0
            }
            Ok(Some((owner, standing))) => {
                let holder = describe_holder(standing);
                let age = owner
                    .age
                    .map(|a| format!("{:.1}s", a.as_secs_f64()))
                    .unwrap_or_else(|| "?".into());
                println!(
                    "held: mode {} pid {} host {} age {age} holder {holder}{}",
                    owner.mode,
                    owner.pid.map_or("-".into(), |p| p.to_string()),
                    owner.host.as_deref().unwrap_or("-"),
                    owner
                        .lease_seconds
                        .map(|d| format!(" lease {d}s"))
                        .unwrap_or_default(),
                );
                1
            }
            Err(e) => {
                eprintln!("swaplock: {e}");
                2
            }
        }
    }

    fn break_lock(opts: Options) -> i32 {
        let kind = match opts.kind {
            LockKind::Soft(k) => k,
            _ => {
                eprintln!("swaplock: break applies to soft locks; kernel locks never go stale");
                return 2;
            }
        };
        let lock = soft_lock(&opts, kind);
        match lock.try_lock() {
            Ok(guard) => match guard.release() {
                Ok(()) => {
                    println!("free");
                    0
                }
                Err(e) => {
                    eprintln!("swaplock: {e}");
                    1
                }
            },
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if opts.force {
                    return match lock.force_break() {
                        Ok(()) => {
                            println!("broken by force");
                            0
                        }
                        Err(e) => {
                            eprintln!("swaplock: {e}");
                            1
                        }
                    };
                }
                eprintln!(
                    "swaplock: refusing to break a holder that may be alive (use --force): {e}"
                );
                1
            }
            Err(e) => {
                eprintln!("swaplock: {e}");
                1
            }
        }
    }
}
