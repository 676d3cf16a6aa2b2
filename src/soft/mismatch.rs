//! Kinds that meet on one path (PROTOCOL 2.9): [`SoftLock::mismatch`],
//! and the sentence that names another kind's file with what to do.

use super::*;
use swaplock_core::kinds::{self, Beside, KernelSeen};

pub use swaplock_core::kinds::Mismatch;

/// Another kind of lock found at or beside a soft lock's path
/// ([`SoftLock::mismatch`]). Its `Display` is one sentence that names it
/// and says what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindMismatch {
    mismatch: Mismatch,
    path: PathBuf,
    kind: Kind,
}

impl KindMismatch {
    /// What was found.
    pub fn mismatch(&self) -> Mismatch {
        self.mismatch
    }

    /// A short name of what was found, for machine-readable reports
    /// (`swaplock status --json`): `kernel-lock`, `empty-file`,
    /// `protocol-2-marker`, `protocol-1-marker`, `strict-sentinel` or
    /// `read-write-log`.
    pub fn code(&self) -> &'static str {
        match self.mismatch {
            Mismatch::KernelLock { .. } => "kernel-lock",
            Mismatch::EmptyFile { .. } => "empty-file",
            Mismatch::Protocol2Marker => "protocol-2-marker",
            Mismatch::Protocol1Marker => "protocol-1-marker",
            Mismatch::StrictSentinel => "strict-sentinel",
            Mismatch::ReadWriteLog => "read-write-log",
            _ => "other",
        }
    }
}

/// The `swaplock --kind` word of a soft kind.
fn kind_word(kind: Kind) -> &'static str {
    match kind {
        Kind::Soft => "soft",
        Kind::Marker => "marker",
        Kind::Lease => "lease",
        _ => "soft",
    }
}

impl std::fmt::Display for KindMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = self.path.display();
        let this = kind_word(self.kind);
        match self.mismatch {
            Mismatch::KernelLock { flock, pid } => {
                let how = if flock { "flock" } else { "fcntl" };
                let who = match pid {
                    -1 => "an open file description".to_owned(),
                    0 => "a process of another PID namespace".to_owned(),
                    pid => format!("pid {pid}"),
                };
                write!(
                    f,
                    "'{path}' is held by a kernel lock ({how}, by {who}): it is a kernel lock's \
                     path (with-lock-ex, flock(1), FileLock, filelock's FileLock), and a {this} \
                     lock neither excludes it nor is excluded by it; take it with \
                     `swaplock run --kind {how}` (or with-lock-ex) instead"
                )
            }
            Mismatch::EmptyFile { checked } => write!(
                f,
                "'{path}' is an empty file, as kernel locks (with-lock-ex, flock(1), FileLock, \
                 filelock's FileLock) leave one, or a soft contender killed before writing its \
                 record: a {this} lock never removes it; {}if no process uses it as a kernel \
                 lock, run `swaplock break --force {path}`, or take it with `swaplock run --kind \
                 fcntl` if it is a kernel lock's path",
                if checked {
                    "no kernel lock holds it now; "
                } else {
                    ""
                }
            ),
            Mismatch::Protocol2Marker => write!(
                f,
                "'{path}' holds a protocol 2 marker (filelock's MarkerSoftFileLock or \
                 SoftFileLease, `--kind marker` or `--kind lease`) while this lock is protocol 1 \
                 (SoftFileLock, `--kind soft`): filelock's SoftFileLock takes it for malformed \
                 and removes it after 2 s, so the two kinds do not exclude each other; use one \
                 kind for one path"
            ),
            Mismatch::Protocol1Marker => write!(
                f,
                "'{path}' holds a protocol 1 marker (filelock's SoftFileLock, `--kind soft`) \
                 while this lock is protocol 2 (`--kind {this}`): filelock's SoftFileLock takes \
                 a protocol 2 marker for malformed and removes it after 2 s, so the two kinds do \
                 not exclude each other; use one kind for one path"
            ),
            Mismatch::StrictSentinel => write!(
                f,
                "'{path}' is the sentinel of a strict lock (filelock's StrictSoftFileLock), \
                 which stays at its path for ever: no {this} lock acquires it; take it as a \
                 strict lock (`StrictLock`, `--kind strict`), or, if no strict lock uses it \
                 any more, run `swaplock break --force {path}`"
            ),
            Mismatch::ReadWriteLog => write!(
                f,
                "'{path}.rw' is the log of a read-write lock (filelock's SoftReadWriteLock, \
                 `--kind rw`) on the same path: its readers and writers never look at \
                 '{path}', so they and this {this} lock do not exclude each other; use one \
                 kind for one path"
            ),
            _ => write!(f, "'{path}' is used by another kind of lock"),
        }
    }
}

impl SoftLock {
    /// Which other kind of lock uses this lock's path, if any: a kernel
    /// lock on the file at the path (from the kernel's table of locks, on
    /// Linux and Android), the empty file kernel locks leave, a marker of
    /// the other soft protocol, the strict lock's sentinel, or a
    /// read-write lock's log beside it (PROTOCOL 2.9). Such a file is no
    /// holder a contender can judge: a waiter would wait without a word,
    /// or the two kinds would hold the path at once. Nothing is moved,
    /// created or locked.
    ///
    /// ```
    /// use swaplock::SoftLock;
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("jobs.lock");
    /// std::fs::write(&path, "")?; // as with-lock-ex leaves it
    /// let found = SoftLock::marker(&path).mismatch()?.expect("an empty file");
    /// assert_eq!(found.code(), "empty-file");
    /// println!("{found}"); // what it is, and what to do
    /// # Ok(())
    /// # }
    /// ```
    pub fn mismatch(&self) -> io::Result<Option<KindMismatch>> {
        let reader = self.kind.reader();
        let found = match self.read_marker()? {
            Some((dir, seen)) => {
                let beside = self.beside(&dir);
                let at_path = classify(seen.content(), reader);
                let kernel = kernel_seen(seen.stat().id);
                kinds::mismatch(reader, Some(&at_path), kernel, beside)
            }
            None => match os::open_dir(&self.dir) {
                Ok(dir) => kinds::mismatch_without_file(self.beside(&dir)),
                Err(_) => None,
            },
        };
        Ok(found.map(|mismatch| KindMismatch {
            mismatch,
            path: self.path.to_path_buf(),
            kind: self.kind,
        }))
    }

    /// What lies beside the lock path in its directory `dir`.
    fn beside(&self, dir: &Dir) -> Beside {
        let mut rw = self.base.clone();
        let rw_log = rw.extend_from_slice(b".rw").is_ok()
            && swaplock_core::soft::os::Dir::lstat(&mut SoftOs::on(dir), &rw)
                .is_ok_and(|st| st.kind == swaplock_core::soft::os::NodeKind::Directory);
        Beside { rw_log }
    }
}

/// What the kernel's table of locks says of file `id`.
fn kernel_seen(id: FileId) -> KernelSeen {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use crate::adapter::kernel::{lock_holders, TableKind};
        match lock_holders(id) {
            Some(locks) => match locks.first() {
                Some(l) => KernelSeen::Held {
                    flock: l.kind == TableKind::Flock,
                    pid: l.pid,
                },
                None => KernelSeen::Free,
            },
            None => KernelSeen::Unknown,
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = id;
        KernelSeen::Unknown
    }
}
