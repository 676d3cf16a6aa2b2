//! Who holds a kernel lock, as this process can find out.

use super::*;

/// Who holds a kernel lock that keeps an `fcntl` write lock on the whole
/// file from being taken, as `FileLock::holder` (Unix) finds it.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelHolder {
    /// The holder's PID as `F_GETLK` reports it: -1 for an open file
    /// description lock (Linux's `F_OFD_SETLK`), which no one process owns,
    /// and for an `flock` holder the kernel does not name; 0 for a holder
    /// in a PID namespace this process cannot see.
    pub pid: i32,
    /// Whether the lock is a read (shared) lock rather than a write lock.
    pub shared: bool,
}

impl KernelHolder {
    /// How a contender stands toward this holder, probed now: alive
    /// ([`HeldBecause::Alive`]), unless the process the query named is
    /// gone, having passed the lock on (a descriptor it shared with a child
    /// or sent) before it exited: then who holds it cannot be told
    /// ([`HeldBecause::CannotTell`]). A kernel lock is never stale: it ends
    /// with its last holder. The core's [`holder_standing`] decides.
    ///
    /// ```no_run
    /// use swaplock::core::decide::HeldBecause;
    /// use swaplock::core::soft::Standing;
    /// use swaplock::FileLock;
    /// # #[cfg(not(unix))]
    /// # fn main() {}
    /// # #[cfg(unix)]
    /// # fn main() -> std::io::Result<()> {
    /// if let Some(h) = FileLock::flock("/run/lock/backup.lock").holder()? {
    ///     match h.standing() {
    ///         Standing::Held(HeldBecause::Alive) => println!("held by {}", h.pid),
    ///         _ => println!("held, by a process {} passed it to", h.pid),
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// [`HeldBecause::Alive`]: swaplock_core::decide::HeldBecause::Alive
    /// [`HeldBecause::CannotTell`]: swaplock_core::decide::HeldBecause::CannotTell
    /// [`holder_standing`]: swaplock_core::kernel::holder_standing
    pub fn standing(&self) -> swaplock_core::soft::Standing {
        swaplock_core::kernel::holder_standing(self.pid, crate::adapter::soft::probe)
    }
}

impl FileLock {
    /// Whether `flock` answered `ENOSYS` here, so this lock is now a soft
    /// lock (filelock's `SoftFileLock`, protocol 1).
    ///
    /// ```no_run
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// let lock = FileLock::flock("/mnt/nfs/jobs.lock");
    /// let _guard = lock.lock()?;
    /// if lock.fell_back_to_soft() {
    ///     eprintln!("no flock on this filesystem: holding a SoftFileLock marker instead");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn fell_back_to_soft(&self) -> bool {
        self.soft.load(Ordering::Relaxed)
    }

    /// Who holds the lock now, or `None` when it is free.
    ///
    /// For an `fcntl` lock, as with-lock-ex's `-l` reports it: the lock
    /// that would keep a write lock on the whole file from being taken
    /// (`F_GETLK`). The file must exist (it is opened read only, never
    /// created: an error of step [`Step::Open`] otherwise); a failed query
    /// is of step [`Step::Lock`]. An open file description lock (this
    /// process's own included) is reported with PID -1.
    ///
    /// For an `flock` lock, which has no query call, as the kernel's lock
    /// table (`/proc/locks`) lists it on Linux and Android: an exclusive
    /// holder, else one of the shared ones. Its PID is that of the process
    /// that took the lock, which may have exited since (a child that
    /// inherited the descriptor holds it then). Where the table names no
    /// holder (elsewhere, without `/proc`, or for a holder in a PID
    /// namespace this process cannot see), a probe takes the lock without
    /// waiting, shared and then exclusive, on a descriptor of its own, and
    /// lets it go at once: a holder it finds has PID -1 (unknown), and a
    /// concurrent attempt may find the lock busy meanwhile. A missing file
    /// is free; a filesystem without `flock` answers the `ENOSYS` error.
    ///
    /// For `fcntl`: A classic lock of this process is never seen (it does
    /// not conflict with the query), and closing the query's descriptor
    /// releases it: do not call this in a process that holds a classic
    /// lock on the file (see the [module docs](crate::kernel)).
    ///
    /// ```no_run
    /// use swaplock::FileLock;
    /// # fn main() -> std::io::Result<()> {
    /// match FileLock::new("/run/lock/backup.lock").holder()? {
    ///     None => println!("free"),
    ///     Some(h) if h.shared => println!("read-locked by {}", h.pid),
    ///     Some(h) => println!("held by {}", h.pid),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(unix)]
    pub fn holder(&self) -> io::Result<Option<KernelHolder>> {
        if self.kind == Kind::Flock {
            return self.flock_holder();
        }
        // A descriptor this process keeps for the file (see the module
        // docs) serves, rather than one more kept until the lock's release.
        let kept = path_id(&self.sys_path, self.follow_symlinks)
            .ok()
            .and_then(inodes::take_kept);
        let fd = match kept {
            Some(fd) => fd,
            None => os::open_existing_read_only(&self.sys_path, self.follow_symlinks)
                .map_err(|e| self.err(Step::Open, e))?,
        };
        let conflict = loop {
            match os::fcntl_query(&fd) {
                Ok(conflict) => break conflict,
                Err(e) if e == Errno::INTR => continue,
                Err(e) => {
                    inodes::close(fd);
                    return Err(self.err(Step::Lock, e));
                }
            }
        };
        // Closed through the registry: while this process holds a classic
        // lock on the file, a plain close would release it.
        inodes::close(fd);
        Ok(match conflict {
            os::Conflict::None => None,
            os::Conflict::Write(pid) => Some(KernelHolder { pid, shared: false }),
            os::Conflict::Read(pid) => Some(KernelHolder { pid, shared: true }),
        })
    }

    /// [`holder`](Self::holder) of an `flock` lock: the kernel's lock
    /// table; or, where it names no holder (none, or one this process's PID
    /// namespace cannot see) or there is none, a probe.
    #[cfg(unix)]
    pub(super) fn flock_holder(&self) -> io::Result<Option<KernelHolder>> {
        let id = match path_id(&self.sys_path, self.follow_symlinks) {
            Ok(id) => id,
            Err(e) if e == Errno::NOENT => return Ok(None),
            Err(e) => return Err(self.err(Step::Stat, e)),
        };
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let listed = os::flock_holders(id);
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(h) = listed.as_ref().and_then(|h| h.first().copied()) {
            return Ok(Some(KernelHolder {
                pid: h.pid,
                shared: h.shared,
            }));
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let listed: Option<()> = None;
        // This process's own holds are known without a probe, whose lock
        // calls could change them where flock is emulated with the
        // process's record locks (NFS).
        for shared in [false, true] {
            let own = |&(h, f, s): &(FileId, Family, bool)| {
                h == id && f.meets(Family::Flock, FAMILIES_APART) && s == shared
            };
            if held::by_this_process(&HELD, own) {
                let pid = crate::pid::number() as i32;
                return Ok(Some(KernelHolder { pid, shared }));
            }
        }
        // The probe: the lock taken without waiting, shared, then
        // exclusive, on a descriptor of its own, and let go at once.
        let fd = match os::open_existing_read_only(&self.sys_path, self.follow_symlinks) {
            Ok(fd) => fd,
            // Unreadable here: the lock table, which listed no holder,
            // answers.
            Err(e) if listed.is_some() && (e == Errno::ACCES || e == Errno::PERM) => {
                return Ok(None)
            }
            Err(e) => return Err(self.err(Step::Open, e)),
        };
        let held = |shared| match os::flock_take(&fd, false, shared) {
            Ok(()) => os::LockCall::Flock.unlock(&fd).map(|()| false),
            Err(e) if e == Errno::AGAIN => Ok(true),
            Err(e) => Err(e),
        };
        let found = match held(true) {
            Ok(true) => Ok(Some(KernelHolder {
                pid: -1,
                shared: false,
            })),
            Ok(false) => held(false).map(|shared| {
                shared.then_some(KernelHolder {
                    pid: -1,
                    shared: true,
                })
            }),
            Err(e) => Err(e),
        };
        inodes::close(fd);
        found.map_err(|e| self.err(Step::Lock, e))
    }
}
