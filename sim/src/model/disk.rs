//! Power loss ([`Faults::power`]): what the disk of the model filesystem
//! holds, and what a cut leaves of the directory.

#[cfg(doc)]
use super::Faults;
use super::{Fs, Inode, Node};
use std::collections::{BTreeMap, BTreeSet};
use swaplock_core::Errno;

/// The directory as a journaling filesystem (ext4 in its default
/// `data=ordered` mode, with delayed allocation) keeps it on disk: names
/// and inodes' metadata as of the last commit of its journal, the data of
/// each file only as of its last sync (a file never synced is empty: its
/// blocks were never allocated).
#[derive(Clone, Debug, Default)]
pub(super) struct Disk {
    names: BTreeMap<Vec<u8>, u64>,
    inodes: BTreeMap<u64, Inode>,
    /// The generations of the files whose data on disk is not what a
    /// process last wrote: what a cut now would take back.
    unsynced: BTreeSet<u64>,
}

/// Power loss ([`Faults::power`]); without it a sync changes nothing and a
/// commit keeps nothing.
impl Fs {
    /// A commit of the journal (every few seconds, and at every sync): the
    /// names and metadata of now become what the disk holds, each file's
    /// data as last synced.
    pub fn commit(&mut self) {
        if !self.faults.power {
            return;
        }
        let mut disk = Disk {
            names: self.names.clone(),
            ..Disk::default()
        };
        for &ino in self.names.values() {
            let mut kept = self.inodes[&ino].clone();
            kept.open = 0;
            kept.linkable = false;
            if let Node::File(_) = kept.node {
                let data = self.synced.get(&kept.generation).cloned();
                let data = data.unwrap_or(Node::File(Vec::new()));
                if data != kept.node {
                    disk.unsynced.insert(kept.generation);
                }
                kept.node = data;
            }
            disk.inodes.insert(ino, kept);
        }
        self.disk = disk;
    }

    /// `fsync(fd)`: the file's data is on disk, and, as ext4 commits its
    /// journal to do so, every name and metadata change before it.
    pub fn sync(&mut self, fd: u32) -> Result<(), Errno> {
        let ino = self.desc(fd)?.ino;
        if self.faults.power {
            let i = &self.inodes[&ino];
            self.synced.insert(i.generation, i.node.clone());
            self.commit();
        }
        Ok(())
    }

    /// `syncfs`: every file's data and every name on disk.
    pub fn sync_all(&mut self) {
        if !self.faults.power {
            return;
        }
        for i in self.inodes.values() {
            self.synced.insert(i.generation, i.node.clone());
        }
        self.commit();
    }

    /// The power is cut and the machine boots again: every descriptor and
    /// kernel lock is gone, and the directory is what the disk held. The
    /// generations of the files whose data the cut took back (a record
    /// written and never synced: empty, as delayed allocation leaves it).
    pub fn power_cut(&mut self) -> BTreeSet<u64> {
        let mut taken_back = self.disk.unsynced.clone();
        let now: BTreeMap<u64, &Node> = self
            .inodes
            .values()
            .map(|i| (i.generation, &i.node))
            .collect();
        for kept in self.disk.inodes.values() {
            if now.get(&kept.generation).is_some_and(|&n| *n != kept.node) {
                taken_back.insert(kept.generation);
            }
        }
        self.descs.clear();
        self.locks.clear();
        let disk = std::mem::take(&mut self.disk);
        self.names = disk.names.clone();
        self.inodes = disk.inodes.clone();
        self.free = (12..=self.next_ino)
            .filter(|n| !self.inodes.contains_key(n))
            .collect();
        self.disk = disk;
        // What the processes see now is what the disk holds.
        self.disk.unsynced.clear();
        taken_back
    }
}
