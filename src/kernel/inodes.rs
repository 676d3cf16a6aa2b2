//! Thread exclusion for classic `fcntl` locks, where the kernel has no
//! open file description locks (Apple systems, 32-bit Linux and Android,
//! Linux before 3.15).
//!
//! A classic lock belongs to the process: a second lock of the same file by
//! another thread (or the same one) merges with the first instead of
//! waiting, and closing *any* descriptor of the file releases it (POSIX).
//! So that a [`FileLock`](crate::FileLock) still excludes the threads of its
//! process there, this process keeps one entry per locked file, by its
//! (device, inode), as SQLite's unix VFS does:
//!
//! - a lock call is made only once the file is reserved here, and a thread
//!   whose lock would conflict with one this process holds (or is taking)
//!   waits on a condition variable, never in the kernel;
//! - a descriptor of a file with an entry is never closed while the entry
//!   lives: it is kept, and closed when the last holder releases, after the
//!   unlock, so that no close releases a lock another guard holds;
//! - the kernel lock is released only when the last guard of the file in
//!   this process goes (shared guards share one kernel read lock).
//!
//! Descriptors the program opens itself are beyond its reach: closing one
//! still releases the process's lock (see the [module docs](crate::kernel)).

use crate::adapter::kernel as os;
use crate::kernel::Wait;
use crate::sync::{Condvar, MutexGuard};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use swaplock_core::decide::{FileId, FileTime};
use swaplock_core::kernel::KernelOs;
use swaplock_core::wait::Clock;
use swaplock_core::Errno;

/// A file this process holds (or is taking) a classic lock on.
#[derive(Debug)]
struct Entry {
    id: FileId,
    /// An exclusive guard holds it.
    exclusive: bool,
    /// How many shared guards hold it.
    shared: usize,
    /// A thread is in its lock call, between reserving and holding.
    taking: bool,
    /// Descriptors of the file that closing would release the lock
    /// through: closed when the entry goes.
    kept: Vec<OwnedFd>,
}

impl Entry {
    fn admits(&self, shared: bool) -> bool {
        !self.taking && !self.exclusive && (shared || self.shared == 0)
    }

    fn idle(&self) -> bool {
        !self.taking && !self.exclusive && self.shared == 0
    }
}

#[derive(Debug)]
struct Files {
    /// The process these entries are of: a child forked while they were
    /// held holds none of their classic locks (they are not inherited),
    /// and starts afresh.
    pid: crate::pid::Me,
    entries: Vec<Entry>,
    /// Descriptors whose file could not be told (a failed `fstat`): any
    /// entry's file might be theirs, so they are closed only once this
    /// process holds no entry.
    unknown: Vec<OwnedFd>,
}

impl Files {
    fn find(&mut self, id: FileId) -> Option<usize> {
        self.entries.iter().position(|e| e.id == id)
    }
}

static FILES: crate::lists::ProcessMutex<Files> = crate::lists::ProcessMutex::new(Files {
    pid: crate::pid::Me::NONE,
    entries: Vec::new(),
    unknown: Vec::new(),
});
/// Signalled whenever an entry changes towards admitting a waiter.
static CHANGED: Condvar = Condvar::new();

fn files() -> MutexGuard<'static, Files> {
    let mut files = FILES.lock();
    let pid = crate::pid::id();
    if files.pid != pid {
        // A forked child (or the first use): nothing of the parent's is
        // held here. Its descriptors are forgotten, not closed: the child
        // may have closed them since and reused their numbers for files of
        // its own, whose classic locks a close would drop.
        files.pid = pid;
        for entry in files.entries.drain(..) {
            entry.kept.into_iter().for_each(std::mem::forget);
        }
        files.unknown.drain(..).for_each(std::mem::forget);
    }
    files
}

/// A descriptor of file `id` kept open while this process holds a lock on
/// it, taken for reuse (and given back by [`close`] or a guard): opening
/// the file again instead would keep one more descriptor until the last
/// holder releases.
pub(crate) fn take_kept(id: FileId) -> Option<OwnedFd> {
    let mut files = files();
    let i = files.find(id)?;
    files.entries[i].kept.pop()
}

/// Waits until `id` admits a lock of this mode (no entry, or a compatible
/// one), or `until` gives up: the registry, locked, and whether it admits.
fn wait_admitted(
    mut files: MutexGuard<'static, Files>,
    id: FileId,
    shared: bool,
    until: Wait,
) -> (MutexGuard<'static, Files>, bool) {
    loop {
        let admits = match files.find(id) {
            None => true,
            Some(i) => files.entries[i].admits(shared),
        };
        if admits {
            return (files, true);
        }
        files = match until {
            Wait::No => return (files, false),
            Wait::Forever => CHANGED.wait(files).unwrap_or_else(|p| p.into_inner()),
            Wait::Until(deadline) => {
                let Some(left) = deadline
                    .checked_duration_since(crate::sync::now())
                    .filter(|l| !l.is_zero())
                else {
                    return (files, false);
                };
                crate::sync::wait_timeout(&CHANGED, files, left)
            }
        };
    }
}

/// Closes `fd`, a descriptor of file `id` (`None`: not known), which holds
/// a lock of the given mode (`Some(shared)`) or none: kept instead while
/// this process holds or takes a lock on the file, else closed, and with
/// the last holder the kernel lock is released (`unlock`, whose error is
/// reported) and every kept descriptor closed.
fn put_down(
    id: Option<FileId>,
    fd: OwnedFd,
    holding: Option<bool>,
    unlock: impl FnOnce(BorrowedFd<'_>) -> Result<(), Errno>,
) -> Result<(), Errno> {
    let mut files = files();
    let Some(id) = id else {
        if files.entries.is_empty() {
            close_now(fd);
        } else {
            files.unknown.push(fd);
        }
        return Ok(());
    };
    let Some(i) = files.find(id) else {
        close_now(fd);
        return Ok(());
    };
    let entry = &mut files.entries[i];
    match holding {
        Some(true) => entry.shared = entry.shared.saturating_sub(1),
        Some(false) => entry.exclusive = false,
        None => {}
    }
    if !entry.idle() {
        entry.kept.push(fd);
        return Ok(());
    }
    // The last holder: unlock, then close every descriptor of the file,
    // all under the registry's lock, so that no thread takes a new lock of
    // it before the last close.
    let unlocked = match holding {
        Some(_) => {
            crate::sync::syscall();
            unlock(fd.as_fd())
        }
        None => Ok(()),
    };
    let entry = files.entries.swap_remove(i);
    close_now(fd);
    entry.kept.into_iter().for_each(close_now);
    if files.entries.is_empty() {
        files.unknown.drain(..).for_each(close_now);
    }
    CHANGED.notify_all();
    unlocked
}

/// Closes a descriptor of a lock file that holds no lock (a query's),
/// through the registry: while this process holds a classic lock on the
/// file, closing it would release that lock.
pub(crate) fn close(fd: OwnedFd) {
    {
        // Checked and closed under the registry's lock: a thread that
        // enters the file meanwhile takes its lock after this close.
        let files = files();
        if files.entries.is_empty() {
            close_now(fd);
            return drop(files);
        }
    }
    let id = os::fstat_id(&fd).ok();
    let _ = put_down(id, fd, None, |_| Ok(()));
}

/// An adapter's operations for a check made outside an attempt (a
/// removal's, [`swaplock_core::kernel::check_remove`]): as the adapter's,
/// but the file the name check makes is closed through the registry, so
/// that another thread of this process that locked it meanwhile keeps its
/// classic lock.
pub(crate) struct Checked<O>(pub(crate) O);

impl<O: KernelOs<File = OwnedFd>> KernelOs for Checked<O> {
    type File = OwnedFd;

    fn open(&mut self, exclusive: bool) -> Result<OwnedFd, Errno> {
        self.0.open(exclusive)
    }

    fn open_existing(&mut self) -> Result<OwnedFd, Errno> {
        self.0.open_existing()
    }

    fn lock(&mut self, file: &OwnedFd, wait: bool) -> Result<(), Errno> {
        self.0.lock(file, wait)
    }

    fn fstat(&mut self, file: &OwnedFd) -> Result<FileId, Errno> {
        self.0.fstat(file)
    }

    fn stat(&mut self) -> Result<FileId, Errno> {
        self.0.stat()
    }

    fn close(&mut self, file: OwnedFd) {
        close(file)
    }

    fn names_cached(&self) -> bool {
        self.0.names_cached()
    }

    fn names_delegated(&self) -> bool {
        self.0.names_delegated()
    }

    fn listed(&mut self) -> Result<swaplock_core::kernel::Listed, Errno> {
        self.0.listed()
    }

    fn made_anew(&mut self) -> Result<FileId, Errno> {
        made_anew_registered(&mut self.0)
    }
}

/// [`KernelOs::made_anew`] by `os`'s own open (never a registry's, which
/// would wait for the file the caller holds), its descriptor put down
/// through the registry's books: where another thread of this process
/// opened and locked the new file meanwhile, it is kept rather than closed
/// (a close would release that thread's classic lock).
fn made_anew_registered<O: KernelOs<File = OwnedFd>>(os: &mut O) -> Result<FileId, Errno> {
    let made = os.open(true)?;
    let id = os.fstat(&made);
    let _ = put_down(id.as_ref().ok().copied(), made, None, |_| Ok(()));
    id
}

/// The lock call, waiting or not. Under the model checker a waiting call
/// is a loop of attempts that lets another thread run between them: the
/// kernel's blocking call would stop the model's single thread, and the
/// loop ends, as the call does, once the lock is released.
pub(crate) fn lock_call<O: KernelOs>(os: &mut O, file: &O::File, wait: bool) -> Result<(), Errno> {
    #[cfg(swaplock_model)]
    if wait {
        let mut blocked = false;
        loop {
            crate::sync::syscall();
            match os.lock(file, false) {
                Err(e) if e == Errno::AGAIN || e == Errno::ACCES => {
                    if !blocked {
                        blocked = true;
                        crate::sync::model::block(1);
                    }
                }
                done => {
                    if blocked {
                        crate::sync::model::block(-1);
                    }
                    return done;
                }
            }
        }
    }
    crate::sync::syscall();
    os.lock(file, wait)
}

/// Closes `fd` now: a classic lock's release where it is the process's
/// last lock of the file, so a point where the model checker may run
/// another thread first.
fn close_now(fd: OwnedFd) {
    crate::sync::syscall();
    drop(fd);
}

/// Whether `FileLock::new` locks are open file description locks in this
/// process: 0 not yet known, 1 yes, 2 no. Probed on the first lock file
/// opened; `SWAPLOCK_FCNTL_OFD=0` in the environment says no, as a kernel
/// before 3.15 would.
#[cfg(all(
    any(target_os = "linux", target_os = "android"),
    target_pointer_width = "64"
))]
static OFD: crate::sync::atomic::AtomicU8 = crate::sync::atomic::AtomicU8::new(0);

/// Whether a lock taken by `call` belongs to its open file description
/// (an `flock` lock, an open file description `fcntl` lock where the
/// kernel has them), so that a descriptor taken by one thread hands it to
/// another: not a classic `fcntl` lock, which is the process's, nor the
/// registry's stand-in for open file description locks (`None`: not yet
/// known).
pub(crate) fn owned_by_description(call: os::LockCall) -> Option<bool> {
    match call {
        os::LockCall::Flock => Some(true),
        os::LockCall::Fcntl => Some(false),
        #[cfg(all(
            any(target_os = "linux", target_os = "android"),
            target_pointer_width = "64"
        ))]
        os::LockCall::FcntlOfd => needs_registry().map(|r| !r),
    }
}

/// Whether `fcntl` locks taken through `fd`, a descriptor of a lock file,
/// are open file description locks in this process: probed once, as for
/// [`FileLock::new`](crate::FileLock::new)'s (`SWAPLOCK_FCNTL_OFD=0` in
/// the environment says no); never on systems without them.
pub(crate) fn description_locks(fd: &OwnedFd) -> bool {
    match needs_registry() {
        Some(registry) => !registry,
        None => !probe(fd),
    }
}

/// Whether a lock that must exclude this process's threads needs the
/// registry: `Some(true)` where the kernel has no open file description
/// locks, `None` while that is not yet known.
fn needs_registry() -> Option<bool> {
    #[cfg(all(
        any(target_os = "linux", target_os = "android"),
        target_pointer_width = "64"
    ))]
    return match OFD.load(crate::sync::atomic::Ordering::Relaxed) {
        1 => Some(false),
        2 => Some(true),
        _ => None,
    };
    #[cfg(not(all(
        any(target_os = "linux", target_os = "android"),
        target_pointer_width = "64"
    )))]
    Some(true)
}

/// Learns, on an open lock file, whether the kernel has open file
/// description locks (once per process).
#[cfg(all(
    any(target_os = "linux", target_os = "android"),
    target_pointer_width = "64"
))]
fn probe(fd: &OwnedFd) -> bool {
    let forced_off = std::env::var_os("SWAPLOCK_FCNTL_OFD").is_some_and(|v| v == "0");
    let ofd = !forced_off && os::fcntl_ofd_supported(fd);
    OFD.store(
        if ofd { 1 } else { 2 },
        crate::sync::atomic::Ordering::Relaxed,
    );
    !ofd
}

#[cfg(not(all(
    any(target_os = "linux", target_os = "android"),
    target_pointer_width = "64"
)))]
fn probe(_fd: &OwnedFd) -> bool {
    true
}

/// The kernel-lock operations [`Threads`] wraps: on a path, or on a file
/// the caller opened.
pub(crate) trait Calls: KernelOs<File = OwnedFd> + Clock {
    /// Whether the lock taken is the shared one.
    fn shared(&self) -> bool;
    /// The lock call made.
    fn call(&self) -> os::LockCall;
    /// Makes the classic `fcntl` call from now on.
    fn use_classic_call(&mut self);
    /// Whether each attempt's descriptor has an open file description of
    /// its own (a new open), not a caller's (a duplicate).
    fn owns_description(&self) -> bool;
}

impl Calls for os::UnixKernel<'_> {
    fn shared(&self) -> bool {
        self.shared
    }

    fn call(&self) -> os::LockCall {
        self.call
    }

    fn use_classic_call(&mut self) {
        self.call = os::LockCall::Fcntl;
    }

    fn owns_description(&self) -> bool {
        true
    }
}

impl Calls for os::OpenKernel<'_> {
    fn shared(&self) -> bool {
        self.shared
    }

    fn call(&self) -> os::LockCall {
        self.call
    }

    fn use_classic_call(&mut self) {
        self.call = os::LockCall::Fcntl;
    }

    fn owns_description(&self) -> bool {
        false
    }
}

/// The kernel-lock operations of one acquire, with the registry's
/// exclusion where the lock needs it: the adapter's, otherwise untouched.
pub(crate) struct Threads<O> {
    pub(crate) os: O,
    /// Whether the registry is used: `None` until the probe answers.
    on: Option<bool>,
    until: Wait,
    /// The identity of the file of the last lock call, and whether that
    /// call took the lock.
    last: Option<(FileId, bool)>,
}

impl<O: Calls> Threads<O> {
    /// `excludes`: whether the lock must exclude this process's threads
    /// (an `fcntl` lock not owned by the process); `until`: how long an
    /// acquire that does not wait in the kernel may wait for them.
    pub(crate) fn new(os: O, excludes: bool, until: Wait) -> Self {
        let on = match excludes && os.call() != os::LockCall::Flock {
            true => needs_registry(),
            false => Some(false),
        };
        let mut threads = Threads {
            os,
            on,
            until,
            last: None,
        };
        if on == Some(true) {
            // The registry stands in for open file description locks.
            threads.os.use_classic_call();
        }
        threads
    }

    /// The descriptor of a lock just taken, for its guard: released
    /// through the registry when the registry took part.
    pub(crate) fn guard_fd(&self, fd: OwnedFd) -> GuardFd {
        let registered = match (self.on, self.last) {
            (Some(true), Some((id, true))) => Some((id, self.os.shared())),
            _ => None,
        };
        GuardFd {
            fd: Some(fd),
            registered,
            call: self.os.call(),
            pid: crate::pid::id(),
        }
    }
}

impl<O: Calls> KernelOs for Threads<O> {
    type File = OwnedFd;

    fn open(&mut self, exclusive: bool) -> Result<OwnedFd, Errno> {
        self.open_by(|os| os.open(exclusive))
    }

    fn open_existing(&mut self) -> Result<OwnedFd, Errno> {
        self.open_by(O::open_existing)
    }

    fn lock(&mut self, file: &OwnedFd, wait: bool) -> Result<(), Errno> {
        self.lock_by(file, wait)
    }

    fn fstat(&mut self, file: &OwnedFd) -> Result<FileId, Errno> {
        self.os.fstat(file)
    }

    fn stat(&mut self) -> Result<FileId, Errno> {
        self.os.stat()
    }

    fn close(&mut self, file: OwnedFd) {
        self.close_by(file)
    }

    fn names_cached(&self) -> bool {
        self.os.names_cached()
    }

    fn names_delegated(&self) -> bool {
        self.os.names_delegated()
    }

    fn listed(&mut self) -> Result<swaplock_core::kernel::Listed, Errno> {
        self.os.listed()
    }

    /// Where the registry takes part: [`made_anew_registered`].
    fn made_anew(&mut self) -> Result<FileId, Errno> {
        match self.on {
            Some(true) => made_anew_registered(&mut self.os),
            _ => self.os.made_anew(),
        }
    }
}

impl<O: Calls> Threads<O> {
    /// An attempt's open, by `open`: where the registry takes part, it
    /// waits while this process holds the file, and reuses a descriptor
    /// kept for it.
    fn open_by(
        &mut self,
        open: impl FnOnce(&mut O) -> Result<OwnedFd, Errno>,
    ) -> Result<OwnedFd, Errno> {
        if self.on == Some(true) {
            // Waits while this process holds the file the path names, so
            // that a busy attempt opens (and keeps) no descriptor.
            if let Ok(id) = self.os.stat() {
                let (mut files, admitted) =
                    wait_admitted(files(), id, self.os.shared(), self.until);
                if !admitted {
                    return Err(Errno::AGAIN);
                }
                // A descriptor of the file kept while others of this
                // process hold it is reused (a read-write one: either lock
                // may be taken through it), so that repeated attempts do
                // not each keep one more.
                if let Some(entry) = files.find(id).map(|i| &mut files.entries[i]) {
                    if let Some(at) = entry.kept.iter().position(os::opened_read_write) {
                        return Ok(entry.kept.swap_remove(at));
                    }
                }
            }
        }
        let fd = open(&mut self.os)?;
        if self.on.is_none() {
            let on = probe(&fd);
            self.on = Some(on);
            if on {
                self.os.use_classic_call();
            }
        }
        Ok(fd)
    }

    fn lock_by(&mut self, file: &OwnedFd, wait: bool) -> Result<(), Errno> {
        self.last = None;
        if self.on != Some(true) {
            return lock_call(&mut self.os, file, wait);
        }
        let id = self.os.fstat(file)?;
        let shared = self.os.shared();
        let until = if wait { Wait::Forever } else { self.until };
        let (mut registry, admitted) = wait_admitted(files(), id, shared, until);
        if !admitted {
            self.last = Some((id, false));
            return Err(Errno::AGAIN);
        }
        match registry.find(id) {
            Some(i) => registry.entries[i].taking = true,
            None => registry.entries.push(Entry {
                id,
                exclusive: false,
                shared: 0,
                taking: true,
                kept: Vec::new(),
            }),
        }
        drop(registry);
        let locked = lock_call(&mut self.os, file, wait);
        let mut files = files();
        // Reserved: nobody removes the entry while it is taking.
        let i = files.find(id).expect("a reserved entry stays");
        let entry = &mut files.entries[i];
        entry.taking = false;
        match (&locked, shared) {
            (Ok(()), true) => entry.shared += 1,
            (Ok(()), false) => entry.exclusive = true,
            (Err(_), _) => {}
        }
        if entry.idle() {
            // The lock call failed and nobody else holds the file: the
            // descriptors kept meanwhile hold nothing.
            let entry = files.entries.swap_remove(i);
            entry.kept.into_iter().for_each(close_now);
            if files.entries.is_empty() {
                files.unknown.drain(..).for_each(close_now);
            }
        }
        CHANGED.notify_all();
        self.last = Some((id, locked.is_ok()));
        locked
    }

    fn close_by(&mut self, file: OwnedFd) {
        if self.on != Some(true) {
            return put_away(self.os.call(), file, self.os.owns_description());
        }
        let shared = self.os.shared();
        let (id, holding) = match self.last.take() {
            Some((id, held)) => (Some(id), held.then_some(shared)),
            None => (os::fstat_id(&file).ok(), None),
        };
        let _ = put_down(id, file, holding, |fd| os::fcntl_unlock_byte0(fd));
    }
}

impl<O: Calls> Clock for Threads<O> {
    fn now(&mut self) -> swaplock_core::decide::Instant {
        self.os.now()
    }

    fn wall(&mut self) -> FileTime {
        self.os.wall()
    }

    fn sleep(&mut self, duration: std::time::Duration) {
        self.os.sleep(duration)
    }
}

/// A kernel lock's descriptor, as its guard holds it: where the registry
/// took part, closing it goes through the registry, which releases the
/// kernel lock with the file's last guard.
#[derive(Debug)]
pub(crate) struct GuardFd {
    fd: Option<OwnedFd>,
    /// The file's identity and whether the lock is shared.
    registered: Option<(FileId, bool)>,
    /// The lock call that took it.
    call: os::LockCall,
    /// The process that took it: in a forked child the descriptor is
    /// closed, and nothing else is done.
    pid: crate::pid::Me,
}

impl GuardFd {
    /// Releases the lock (`unlock`, or through the registry) and closes
    /// the descriptor.
    pub(crate) fn unlock(
        mut self,
        unlock: impl FnOnce(BorrowedFd<'_>) -> Result<(), Errno>,
    ) -> Result<(), Errno> {
        let fd = self.fd.take().expect("only drop and unlock take it");
        match self.registered {
            Some((id, shared)) => {
                put_down(Some(id), fd, Some(shared), |fd| os::fcntl_unlock_byte0(fd))
            }
            None => {
                let unlocked = unlock(fd.as_fd());
                close(fd);
                unlocked
            }
        }
    }

    /// The descriptor.
    pub(crate) fn file(&self) -> &OwnedFd {
        self.fd.as_ref().expect("only drop and unlock take it")
    }

    /// Closes the descriptor without releasing the lock: in a forked
    /// child, whose parent holds it (a classic lock is not inherited, and
    /// an open file description lock stays while the parent's descriptor
    /// is open).
    pub(crate) fn forget_lock(mut self) {
        if let Some(fd) = self.fd.take() {
            close(fd);
        }
    }
}

impl AsFd for GuardFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd
            .as_ref()
            .expect("only drop and unlock take it")
            .as_fd()
    }
}

impl Drop for GuardFd {
    fn drop(&mut self) {
        let Some(fd) = self.fd.take() else {
            return;
        };
        if self.pid != crate::pid::id() {
            // A forked child: the lock is the parent's, and nothing of the
            // parent's registry is the child's; but the child's own locks
            // on the file must outlive this close.
            return close(fd);
        }
        match self.registered {
            Some((id, shared)) => {
                let _ = put_down(Some(id), fd, Some(shared), |fd| os::fcntl_unlock_byte0(fd));
            }
            None => put_away(self.call, fd, true),
        }
    }
}

/// Closes the descriptor of a lock the registry has no part in (`flock`,
/// an open file description lock, a classic lock owned by the process).
/// With `unlock` (the descriptor's open file description is this lock's
/// own, not a caller's file), an `flock` or open file description lock is
/// released explicitly first: a child forked meanwhile shares the
/// description, and would otherwise keep the lock until it exits. (A
/// classic lock is the process's and is not inherited: the close releases
/// it.) The close goes through the registry, whose files it may hold.
fn put_away(call: os::LockCall, fd: OwnedFd, unlock: bool) {
    if unlock && call != os::LockCall::Fcntl {
        let _ = call.unlock(&fd);
    }
    close(fd);
}
