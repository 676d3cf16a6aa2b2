//! The kernel locks this process holds, by file identity and family.

use super::*;

/// The kernel locks this process holds whose second lock in this process
/// would wait for the first, by the locked file's identity ([`held`]).
/// Each with whether it is shared.
pub(super) static HELD: Held<(FileId, Family, bool)> = crate::lists::ProcessMutex::new(Vec::new());

/// Whether this kernel keeps `fcntl` and `flock` locks apart ([`Family::meets`]):
/// on Linux and Android a thread holding one kind waits for the other as
/// for any free lock; elsewhere (Apple systems, the BSDs, Windows) the two
/// kinds are one lock.
pub(crate) const FAMILIES_APART: bool = cfg!(any(target_os = "linux", target_os = "android"));

/// Whether this thread holds such a lock on the file `id()` names, in a
/// mode that excludes a lock of this one (`shared`; shared locks exclude
/// only the exclusive lock): `id` (a `stat` or an `fstat`) is asked only
/// if the thread holds any.
pub(crate) fn held_here(
    kind: Kind,
    shared: bool,
    id: impl FnOnce() -> Result<FileId, Errno>,
) -> bool {
    let family = kind.family();
    let excludes =
        |f: Family, h_shared: bool| f.meets(family, FAMILIES_APART) && !(h_shared && shared);
    held::by_this_thread(&HELD, |&(_, f, h_shared)| excludes(f, h_shared))
        && id().is_ok_and(|id| {
            held::by_this_thread(&HELD, |&(h, f, h_shared)| h == id && excludes(f, h_shared))
        })
}

/// Enters a lock of this thread on the file `id`, until the entry drops.
pub(crate) fn register(id: FileId, kind: Kind, shared: bool) -> Registered<(FileId, Family, bool)> {
    Registered::new(&HELD, (id, kind.family(), shared))
}

/// The error of a wait that could never end: this thread holds the
/// file already, through another guard.
pub(crate) fn deadlock_error(path: &Arc<Path>) -> io::Error {
    let kind = io::ErrorKind::Deadlock;
    let source = io::Error::new(
        kind,
        "Deadlock: this thread already holds the lock through another guard, so waiting \
         for it would never end: release that guard first, or wait with a timeout",
    );
    LockError::io(path, Step::Lock, kind, source)
}
