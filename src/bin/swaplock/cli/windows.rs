//! `run` on Windows: this process holds the lock while the command runs
//! as its child.

use super::*;

/// `run` on Windows: this process holds the lock (any kind) while the
/// command runs as its child, and exits with the command's status. A
/// lost lease ends the command (`TerminateProcess`) and exits 75.
#[cfg(windows)]
pub(super) fn run(opts: Options) -> i32 {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use swaplock::soft::Compromise;
    /// How often a lease's state is looked at while the command runs.
    const LOOK: Duration = Duration::from_millis(20);
    let path = PathBuf::from(&opts.rest[0]);
    let mut command = std::process::Command::new(&opts.rest[1]);
    command.args(&opts.rest[2..]);
    enum Guard {
        Kernel(swaplock::FileLockGuard),
        Soft(Box<swaplock::soft::SoftLockGuard>),
    }
    let lost = Arc::new(AtomicBool::new(false));
    let guard = match opts.kind {
        LockKind::Fcntl | LockKind::Flock => {
            let lock = match opts.kind {
                LockKind::Flock => FileLock::flock(path),
                _ => FileLock::new(path),
            }
            .allow_client_local(crate::client_local());
            let taken = match opts.shared {
                true => take(&opts, &Shared(&lock)),
                false => take(&opts, &lock),
            };
            match taken {
                Ok(g) => Guard::Kernel(g),
                Err(code) => return code,
            }
        }
        LockKind::Rw => {
            eprintln!("swaplock: --kind rw: the read-write lock is for POSIX systems");
            return 2;
        }
        // Refused by the option parser on Windows.
        LockKind::Strict => return 2,
        LockKind::Soft(kind) => {
            let flag = Arc::clone(&lost);
            let lock = soft_lock(&opts, kind)
                .on_compromise(move |_: Compromise| flag.store(true, Ordering::SeqCst));
            match take(&opts, &lock) {
                Ok(g) => Guard::Soft(Box::new(g)),
                Err(code) => return code,
            }
        }
    };
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!(
                "swaplock: {}: unable to execute command: {e}",
                opts.rest[1].to_string_lossy()
            );
            return 255;
        }
    };
    // Only a lease can be lost while held: other kinds just wait.
    let leased = matches!(opts.kind, LockKind::Soft(Kind::Lease));
    let status = loop {
        if !leased {
            match child.wait() {
                Ok(status) => break status,
                Err(e) => {
                    eprintln!("swaplock: waiting for the command: {e}");
                    return 255;
                }
            }
        }
        if lost.load(Ordering::SeqCst) {
            let _ = child.kill();
            let _ = child.wait();
            eprintln!(
                "swaplock: {}: the lease was lost; the command was stopped",
                opts.rest[0].to_string_lossy()
            );
            return LEASE_LOST;
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {
                // The wait for the command, with a look at the lease
                // between: the pause is the look's period.
                std::thread::sleep(LOOK);
            }
            Err(e) => {
                eprintln!("swaplock: waiting for the command: {e}");
                let _ = child.kill();
                break child.wait().unwrap_or_default();
            }
        }
    };
    let code = status.code().unwrap_or(255);
    let released = match guard {
        Guard::Kernel(g) => g.release(),
        Guard::Soft(g) => match g.lease_lost() {
            Some(_) => {
                eprintln!(
                    "swaplock: {}: the lease was lost while the command ran",
                    opts.rest[0].to_string_lossy()
                );
                return LEASE_LOST;
            }
            None => g.release(),
        },
    };
    match released {
        Ok(()) => code,
        Err(e) => {
            eprintln!("swaplock: {e}");
            if code == 0 {
                RELEASE_FAILED
            } else {
                code
            }
        }
    }
}
