//! The protocol's timing assumptions (PROTOCOL 13.1), as the oracle
//! watches them: a run that leaves one is marked ([`Oracle::overslept`])
//! and from then on not judged, since outside them nothing is promised.
//!
//! - [`Oracle::placeholder_overslept`]: a release's placeholder, or its
//!   marker marked released, leaves the lock path within the malformed
//!   grace period (and before it is older than the lifetime);
//! - [`Oracle::acts_within_lease`]: where a process looks at its own lease
//!   record at the lock path, after changing it, and then acts on the lock
//!   path by name (an exchange-back's exchange, a release's unlink by
//!   name), it acts before the lease could have passed.

use super::Oracle;
use crate::cast::LOCK;
use crate::model::Access;
use crate::world::World;
use swaplock_core::decide::MALFORMED_GRACE;
use swaplock_core::record::{classify, Classified, Content, Reader, RELEASED};

impl Oracle {
    /// Soft locks assume a release finishes well within the malformed grace
    /// period: a peer may evict its marker, once marked released, or its
    /// placeholder (both read as malformed) and publish its own marker,
    /// which the paused releaser's by-name unlink would remove, as no POSIX
    /// call unlinks a name only if it still links a given inode. With a
    /// lifetime, the same holds once the placeholder is older than the
    /// lifetime by its mtime (it is written before it is exchanged in): a
    /// lifetime break takes any marker that old. The first such file of a
    /// live process (a released marker: one in its release) found at the
    /// lock path past either, unchanged, takes the run outside the
    /// protocol's timing assumption, and from then on it is not judged.
    pub(super) fn placeholder_overslept(&mut self, w: &mut World) {
        let here = w.fs.ino(LOCK).map(|ino| {
            let i = &w.fs.inodes[&ino];
            (ino, i.mtime, i.ctime)
        });
        if here != self.at_lock.0 {
            self.at_lock = (here, w.time);
        }
        let Some((ino, mtime, _)) = here.filter(|_| self.overslept.is_none()) else {
            return;
        };
        let content = w.fs.content(LOCK).unwrap_or_default();
        let placeholder = content.starts_with(b"filelock/break\n");
        let released = content.starts_with(RELEASED);
        if !placeholder && !released {
            return;
        }
        // Only a file its owner still holds open for writing: that is the
        // remover whose by-name unlink the assumption protects (a file is
        // removed only while open, I7). A placeholder an abandoned takeover
        // let go of ages out at the lock path by design.
        let writes = |i: usize| {
            w.procs[i].fds.iter().any(|fd| {
                w.fs.descs
                    .get(fd)
                    .is_some_and(|d| d.ino == ino && d.access == Access::Write)
            })
        };
        let owner = (0..self.own.len()).find(|&i| {
            w.procs[i].alive
                && self.own[i].contains(&ino)
                && (placeholder || self.attempting[i])
                && writes(i)
        });
        let Some(owner) = owner else { return };
        let grace = MALFORMED_GRACE.as_nanos() as u64;
        let lifetime_passed = self
            .lifetime
            .is_some_and(|l| w.fs.clock - mtime.as_nanos() >= l.as_nanos() as i128);
        if w.time - self.at_lock.1 >= grace || lifetime_passed {
            self.overslept = Some(owner);
            w.note(owner, format_args!("OVERSLEPT: its placeholder or released marker stayed at the lock path past the grace period or the lifetime"));
        }
    }

    /// Notes that process `me`, in an attempt or a release, has just
    /// changed its own file at the lock path (created, linked, written,
    /// touched or exchanged it in): a look at the path from now on is
    /// timed from when the path last changed.
    pub(super) fn own_change_noted(&mut self, w: &World, me: usize) {
        let mine = w.fs.ino(LOCK).filter(|ino| self.own[me].contains(ino));
        if self.attempting[me] && mine.is_some() {
            self.changed[me] = mine;
        }
        self.looked[me] = None;
    }

    /// Notes a successful `lstat` of the lock path by `me` at time `at`:
    /// whether it showed `me`'s own lease record, which `me` changed
    /// during this attempt or release, and since when the path has shown
    /// it unchanged (the watch's key: inode, mtime, change time).
    pub(super) fn lock_looked_at(&mut self, w: &World, me: usize, at: u64) {
        self.looked[me] = None;
        let Some(ino) = w.fs.ino(LOCK).filter(|&ino| self.changed[me] == Some(ino)) else {
            return;
        };
        let content = w.fs.content(LOCK).unwrap_or_default();
        if !matches!(
            classify(Content::Bytes(content), Reader::Protocol2),
            Classified::V2(_)
        ) {
            return;
        }
        let i = &w.fs.inodes[&ino];
        let key = Some((ino, i.mtime, i.ctime));
        // The path changed in a step whose state no check has read yet
        // (a process's last step): timed from this look, later than the
        // change, which is the side of caution.
        let since = if self.at_lock.0 == key {
            self.at_lock.1
        } else {
            at
        };
        self.looked[me] = Some((ino, since));
    }

    /// Lease records assume that a process which looks at its own lease
    /// record at the lock path and then acts on the path by name acts
    /// before the lease has passed since the path last changed: a peer
    /// whose watch saw the record unchanged for the lease takes it over,
    /// and the act then lands on the peer's marker. An exchange-back's
    /// exchange, its record put there by the takeover's exchange, feeds
    /// the peer's marker aside (PROTOCOL 7.9); a release's unlink by name,
    /// after its touch, removes it (7.3 step 4). The protocol changes the
    /// record just before it looks (the exchange, the touch), so only a
    /// pause from that change to the act, longer than the lease, can
    /// leave the assumption; the change must be the process's own within
    /// the same attempt or release, or the look would time a record the
    /// protocol never refreshed (a release without its touch), which the
    /// assumption does not excuse. The first such act by `me` at time `at`
    /// takes the run outside the assumption.
    pub(super) fn acts_within_lease(&mut self, w: &mut World, me: usize, at: u64) {
        let looked = self.looked[me].take();
        let (Some(lease), Some((ino, since))) = (self.lease, looked) else {
            return;
        };
        if self.overslept.is_some() || !self.attempting[me] || at - since < lease.as_nanos() as u64
        {
            return;
        }
        self.overslept = Some(me);
        w.note(
            me,
            format_args!(
                "OVERSLEPT: acts on the lock path by name {:?} after its own lease record (inode {ino}) last changed there, past the lease",
                std::time::Duration::from_nanos(at - since)
            ),
        );
    }
}
