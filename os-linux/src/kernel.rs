//! The syscalls of the kernel-lock protocols: the shared POSIX ones of
//! [`swaplock_unix::kernel`], reading the umask from `/proc`, and the kernel's
//! table of locks.

pub use swaplock_unix::kernel::*;

/// The `Umask:` line of `/proc/self/status` (Linux 4.7 and later) — this
/// process's umask, read without changing it.
///
/// # References
/// - [`proc_pid_status(5)`](https://man7.org/linux/man-pages/man5/proc_pid_status.5.html)
pub fn read_umask() -> Option<u32> {
    let status = std::fs::read("/proc/self/status").ok()?;
    let line = status
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"Umask:"))?;
    let text = std::str::from_utf8(line).ok()?.trim();
    u32::from_str_radix(text, 8).ok()
}

/// An `flock` lock the kernel's lock table lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlockHolder {
    /// The PID that took it, in this process's PID namespace (0 where the
    /// holder's namespace is not visible from here).
    pub pid: i32,
    /// Whether it is a shared (`LOCK_SH`) lock rather than an exclusive one.
    pub shared: bool,
}

/// The kind of a lock in the kernel's lock table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableKind {
    /// `flock(2)`.
    Flock,
    /// A classic `fcntl` record lock (`F_SETLK`), owned by a process.
    Posix,
    /// An open file description lock (`F_OFD_SETLK`).
    Ofd,
}

/// A granted lock the kernel's lock table lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableLock {
    /// Its kind.
    pub kind: TableKind,
    /// The PID that took it, in this process's PID namespace (0 where the
    /// holder's namespace is not visible from here; -1 for an open file
    /// description lock, which no one process owns).
    pub pid: i32,
    /// Whether it is a shared (read) lock rather than an exclusive one.
    pub shared: bool,
}

/// The granted locks of every kind on file `id`, as `/proc/locks` lists
/// them, exclusive ones first; `None` without `/proc`.
///
/// # References
/// - [`proc_locks(5)`](https://man7.org/linux/man-pages/man5/proc_locks.5.html)
pub fn lock_holders(id: swaplock_core::decide::FileId) -> Option<Vec<TableLock>> {
    // The kernel gives the table a page a read, and a lock taken or let
    // go elsewhere between two reads shifts the lines after it: one of
    // ours may be skipped. A table that lists none on `id` is read again,
    // a few times, before it counts as none.
    let mut locks = Vec::new();
    for _ in 0..READS {
        let table = std::fs::read_to_string("/proc/locks").ok()?;
        locks = table
            .lines()
            .filter_map(|line| table_line(line, id))
            .collect();
        if !locks.is_empty() {
            break;
        }
    }
    locks.sort_by_key(|l| l.shared);
    Some(locks)
}

/// How many times [`lock_holders`] reads `/proc/locks` before it finds no
/// lock on a file.
const READS: usize = 3;

/// The `flock` locks held on file `id`, as `/proc/locks` lists them
/// (granted ones, not waiters), exclusive ones first; `None` without
/// `/proc`.
///
/// # References
/// - [`proc_locks(5)`](https://man7.org/linux/man-pages/man5/proc_locks.5.html)
pub fn flock_holders(id: swaplock_core::decide::FileId) -> Option<Vec<FlockHolder>> {
    let locks = lock_holders(id)?;
    Some(
        locks
            .into_iter()
            .filter(|l| l.kind == TableKind::Flock)
            .map(|l| FlockHolder {
                pid: l.pid,
                shared: l.shared,
            })
            .collect(),
    )
}

/// One line of `/proc/locks`, `N: KIND ADVISORY WRITE PID MAJ:MIN:INO
/// START END` (device numbers in hex, the inode in decimal), if it is a
/// granted lock on `id`.
fn table_line(line: &str, id: swaplock_core::decide::FileId) -> Option<TableLock> {
    let mut fields = line.split_whitespace().skip(1);
    let kind = match fields.next()? {
        "FLOCK" => TableKind::Flock,
        "POSIX" => TableKind::Posix,
        "OFDLCK" => TableKind::Ofd,
        // Another kind (a lease), or "->": a waiter, not a holder.
        _ => return None,
    };
    let _advisory = fields.next()?;
    let shared = match fields.next()? {
        "READ" => true,
        "WRITE" => false,
        _ => return None,
    };
    let pid = fields.next()?.parse().ok()?;
    let mut place = fields.next()?.split(':');
    let major = u32::from_str_radix(place.next()?, 16).ok()?;
    let minor = u32::from_str_radix(place.next()?, 16).ok()?;
    let ino: u64 = place.next()?.parse().ok()?;
    let dev = rustix::fs::makedev(major, minor);
    ((dev, ino) == (id.dev, id.ino)).then_some(TableLock { kind, pid, shared })
}

#[cfg(test)]
mod tests {
    use super::*;
    use swaplock_core::decide::FileId;

    #[test]
    fn lock_table_lines() {
        let id = FileId {
            dev: rustix::fs::makedev(0xfe, 0),
            ino: 10011334,
        };
        let line = "1: FLOCK  ADVISORY  WRITE 5138 fe:00:10011334 0 EOF";
        assert_eq!(
            table_line(line, id),
            Some(TableLock {
                kind: TableKind::Flock,
                pid: 5138,
                shared: false
            })
        );
        let read = "2: FLOCK  ADVISORY  READ 77 fe:00:10011334 0 EOF";
        assert_eq!(table_line(read, id).map(|h| h.shared), Some(true));
        let posix = "1: POSIX  ADVISORY  WRITE 5 fe:00:10011334 0 0";
        assert_eq!(
            table_line(posix, id).map(|h| (h.kind, h.pid)),
            Some((TableKind::Posix, 5))
        );
        let ofd = "3: OFDLCK ADVISORY  READ -1 fe:00:10011334 0 0";
        assert_eq!(
            table_line(ofd, id).map(|h| (h.kind, h.pid, h.shared)),
            Some((TableKind::Ofd, -1, true))
        );
        // Another file, a lease, a waiter.
        assert_eq!(
            table_line("1: FLOCK  ADVISORY  WRITE 5 fe:00:1 0 EOF", id),
            None
        );
        assert_eq!(
            table_line("4: LEASE  ACTIVE    READ 9 fe:00:10011334 0 EOF", id),
            None
        );
        assert_eq!(
            table_line("1: -> FLOCK  ADVISORY  WRITE 6 fe:00:10011334 0 EOF", id),
            None
        );
        assert_eq!(table_line("garbage", id), None);
    }
}
