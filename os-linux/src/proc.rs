//! The `/proc` reads that a start token and the PID-namespace scan share:
//! this boot's identity, whether `starttime` is read without a time
//! namespace's offset, `/proc` opened once, a process's start token, and
//! this process's PID namespace; and what of them a forked child forgets.

// `stat` field types differ between targets (a 32-bit `st_ino` on some):
// the casts widen where needed and are no-ops elsewhere.
#![allow(clippy::unnecessary_cast)]

use rustix::fd::{BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use std::sync::atomic::{AtomicU64, Ordering};
use swaplock_core::start::{
    parse_boot_id, parse_ns_link, parse_stat_starttime, timens_offsets_unshifted, StartToken,
};

/// The inode of the namespace the link `path` (`/proc/self/ns/<kind>`)
/// names: read from the link's text, which costs half of a `stat` through
/// the link into the namespace filesystem (an acquire asks for its time
/// namespace every time); through that `stat` where the `readlink` fails
/// (a policy may refuse it alone) or its text is not the kernel's
/// `<kind>:[<inode>]`, so that the answer, or the error, is the `stat`'s.
pub(crate) fn ns_inode(path: &std::ffi::CStr) -> rustix::io::Result<u64> {
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 64];
    if let Ok((text, _)) = rustix::fs::readlinkat_raw(rustix::fs::CWD, path, &mut buf) {
        if let Some(ino) = parse_ns_link(text) {
            return Ok(ino);
        }
    }
    swaplock_unix::stat::stat_path(path, true).map(|st| st.st_ino as u64)
}

/// This boot's identity, read once. Not a `OnceLock`: a child forked while
/// another thread was reading it would find the `OnceLock` being
/// initialised for good, and wait on it at its first start token. Here a
/// thread never waits: the first to finish publishes the value, and until
/// one has (or in such a child) each reads it afresh.
pub(crate) fn boot_id() -> u128 {
    use std::sync::atomic::AtomicU8;
    /// 0: not read yet, 1: being published, 2: published.
    static STATE: AtomicU8 = AtomicU8::new(0);
    static HIGH: AtomicU64 = AtomicU64::new(0);
    static LOW: AtomicU64 = AtomicU64::new(0);
    if STATE.load(Ordering::Acquire) == 2 {
        return (u128::from(HIGH.load(Ordering::Relaxed)) << 64)
            | u128::from(LOW.load(Ordering::Relaxed));
    }
    let id = std::fs::read("/proc/sys/kernel/random/boot_id")
        .map(|t| parse_boot_id(&t))
        .unwrap_or(0);
    if STATE
        .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
    {
        HIGH.store((id >> 64) as u64, Ordering::Relaxed);
        LOW.store(id as u64, Ordering::Relaxed);
        STATE.store(2, Ordering::Release);
    }
    id
}

/// Whether this process reads `starttime` without a time-namespace offset
/// (PROTOCOL 4.2), asked afresh as filelock does.
pub(crate) fn starttime_unshifted() -> bool {
    const INITIAL_TIME_NAMESPACE: u64 = 0xEFFF_FFFA;
    let ns = match ns_inode(c"/proc/self/ns/time") {
        Ok(ino) => ino,
        Err(rustix::io::Errno::NOENT) => return true,
        Err(_) => return false,
    };
    if ns == INITIAL_TIME_NAMESPACE {
        return true;
    }
    match ns_inode(c"/proc/self/ns/time_for_children") {
        Ok(ino) if ino == ns => {}
        _ => return false,
    }
    let mut buf = [0u8; 512];
    read_small(rustix::fs::CWD, "/proc/self/timens_offsets", &mut buf)
        .is_some_and(timens_offsets_unshifted)
}

/// Reads a small file (a `/proc` entry) into `buf` without allocating:
/// `openat(dir, path)`, then `read` until end of file or a full buffer.
fn read_small<'b>(dir: BorrowedFd<'_>, path: &str, buf: &'b mut [u8]) -> Option<&'b [u8]> {
    let fd = rustix::fs::openat(dir, path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let mut len = 0;
    while len < buf.len() {
        match rustix::io::read(&fd, &mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    }
    Some(&buf[..len])
}

/// `/proc`, opened once. Start tokens are read relative to it: a user-mode
/// emulator (qemu-user) rewrites opens of `/proc/self/stat` and
/// `/proc/<own pid>/stat` by their path, and its `starttime` is not the
/// kernel's, which a native peer reads; a relative open reaches the kernel.
///
/// Not a `OnceLock`, for the reason [`boot_id`] gives: the first thread to
/// open it publishes its descriptor, and a thread that lost the race
/// closes its own.
pub(crate) fn proc_dir() -> Option<BorrowedFd<'static>> {
    use std::os::fd::{FromRawFd, IntoRawFd};
    let mut fd = PROC.load(Ordering::Acquire);
    if fd < 0 {
        let mine = rustix::fs::open(
            "/proc",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?
        .into_raw_fd();
        fd = match PROC.compare_exchange(-1, mine, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => mine,
            Err(published) => {
                // SAFETY: `mine` was just opened here and is owned by no one.
                drop(unsafe { OwnedFd::from_raw_fd(mine) });
                published
            }
        };
    }
    // SAFETY: a published descriptor is closed only by
    // [`forget_proc_dir`], in a child just forked, where no other thread
    // runs and the forking one borrows none.
    Some(unsafe { BorrowedFd::borrow_raw(fd) })
}

/// The descriptor [`proc_dir`] published, or -1 while none is.
static PROC: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// In a child just forked ([`crate::fork::forget_after_fork`]): closes the
/// parent's `/proc`, which names the processes of the parent's PID
/// namespace: a child forked after its parent's `unshare(CLONE_NEWPID)`
/// runs in another, and would read another process's start for its own.
/// The next use opens `/proc` afresh, as the child sees it.
pub(crate) fn forget_proc_dir() {
    let fd = PROC.swap(-1, Ordering::AcqRel);
    if fd >= 0 {
        // libc's `close`, whose error is the caller's to read: rustix's
        // asserts (in debug builds) that the close succeeded. Another
        // thread of the parent may have opened and published the
        // descriptor after the kernel copied the descriptor table for the
        // child, before it copied this memory: then the number is free
        // here, and the close fails (EBADF), which it may.
        // SAFETY: no thread of this child borrows it (see `proc_dir`).
        unsafe { libc::close(fd) };
    }
}

/// The cache of [`own_pid_namespace`]: the PID in the high half, the inode in
/// the low; 0 while none is kept.
static PID_NAMESPACE: AtomicU64 = AtomicU64::new(0);

/// In a child just forked ([`crate::fork::forget_after_fork`]): the PID
/// namespace kept is the parent's, which a child given the parent's PID in
/// another namespace would take for its own.
pub(crate) fn forget_pid_namespace() {
    PID_NAMESPACE.store(0, Ordering::Relaxed);
}

/// The identity of this process's PID namespace (the inode of
/// `/proc/self/ns/pid`), looked up once per process: no call changes the
/// namespace a process itself runs in (`unshare` and `setns` move its
/// children), and a forked child has a PID of its own, so the cache is
/// keyed by PID. Packed with the PID in one word (namespace inodes are
/// 32-bit numbers), so no lock is taken that a fork could leave held.
pub(crate) fn own_pid_namespace() -> Option<u64> {
    let pid = rustix::process::getpid().as_raw_nonzero().get() as u32;
    let cached = PID_NAMESPACE.load(Ordering::Relaxed);
    if cached != 0 && (cached >> 32) as u32 == pid {
        return Some(cached & 0xffff_ffff);
    }
    let ns = ns_inode(c"/proc/self/ns/pid").ok()?;
    if let Ok(small) = u32::try_from(ns) {
        PID_NAMESPACE.store((u64::from(pid) << 32) | u64::from(small), Ordering::Relaxed);
    }
    Some(ns)
}

pub(crate) fn read_start_token(pid: u64) -> Option<StartToken> {
    let mut path = heapless::String::<32>::new();
    std::fmt::Write::write_fmt(&mut path, format_args!("{pid}/stat")).ok()?;
    // A stat line is a few hundred bytes: the command name is at most 64.
    let mut buf = [0u8; 1024];
    let stat = read_small(proc_dir()?, &path, &mut buf)?;
    Some(StartToken::linux(boot_id(), parse_stat_starttime(stat)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_links_text_names_the_inode_a_stat_through_it_gives() {
        for link in [
            c"/proc/self/ns/pid",
            c"/proc/self/ns/time",
            c"/proc/self/ns/time_for_children",
            c"/proc/self/ns/mnt",
        ] {
            let Ok(st) = swaplock_unix::stat::stat_path(link, true) else {
                continue;
            };
            assert_eq!(ns_inode(link), Ok(st.st_ino as u64), "{link:?}");
        }
        assert_eq!(
            ns_inode(c"/proc/self/ns/no-such-kind"),
            Err(rustix::io::Errno::NOENT)
        );
    }
}
