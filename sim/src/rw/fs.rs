//! The model filesystem of the read-write lock: the log's three
//! directories on one server (names to inodes, link counts, bytes), what
//! a host crash keeps of it, and each client host's caches.
//!
//! - **Server.** Exclusive create, no-replace link, rename over, unlink,
//!   in-place write, listing and lookup are each applied at once, as one
//!   server operation. Inode numbers are handed out lowest free first, as
//!   ext4 does.
//! - **Crash of the host whose disk it is** (a local filesystem). The
//!   names are journaled in order and a crash keeps a prefix: every name
//!   operation since the last `fsync` (of any file or directory: a
//!   journaling filesystem commits its whole journal) may be lost, the
//!   newest first, as many as the schedule says. A file whose data was
//!   written since its last `fsync` reads back empty.
//! - **Client caches** (network filesystems: NFS with `lookupcache=all`
//!   and an attribute cache of `acdirmax`). A Linux client keeps a
//!   directory's listing and its lookups (positive and negative) valid
//!   while the directory's cached change attribute is, and revalidates
//!   that attribute at most `acdirmax` after it last did. So each host
//!   has, per directory, the time it last revalidated it, and for up to
//!   [`Fs::cache_for`] after that answers a listing or a lookup with the
//!   server's names as of then, unless the schedule has it revalidate
//!   early (and answer as the server does now). A cached file that
//!   the server removed answers `ESTALE` (missing). A host's own change of
//!   a name revalidates the directory. Data is never cached (close-to-open
//!   consistency).

use std::collections::BTreeMap;
use swaplock_core::rw::files::Area;
use swaplock_core::Errno;

/// A directory of the log: the root, `gen/`, `holders/`.
pub(crate) const ROOT: usize = 0;

/// The index of an area's directory.
pub(crate) fn dir(area: Area) -> usize {
    match area {
        Area::Generations => 1,
        Area::Holders => 2,
    }
}

/// A name in a directory of the log.
pub(crate) type Key = (usize, Vec<u8>);

/// A file on the server.
#[derive(Clone, Debug)]
pub(crate) struct Inode {
    pub(crate) data: Vec<u8>,
    pub(crate) nlink: u32,
    /// Whether its data is on disk (fsynced since its last write).
    pub(crate) durable: bool,
    /// When its data last changed (simulated time).
    pub(crate) changed: u64,
    /// How many open descriptors hold it (an open file is never freed,
    /// and its number never reused, while it is open).
    pub(crate) open: u32,
}

/// A name operation, as the journal undoes it.
#[derive(Clone, Debug)]
enum Undo {
    /// The name was added: remove it again.
    Added(Key),
    /// The name was removed: it named this inode.
    Removed(Key, u64),
    /// The name was renamed from `from` to `to` over `replaced`.
    Renamed {
        from: Key,
        to: Key,
        replaced: Option<u64>,
    },
    /// The directory was made.
    Made(usize),
}

/// The server's state and each host's caches.
#[derive(Clone, Debug)]
pub(crate) struct Fs {
    /// Whether the root, `gen/` and `holders/` exist.
    pub(crate) dirs: [bool; 3],
    /// How many times each directory was made: a log's incarnation is
    /// that of `gen/` (its epoch file's bytes may change within one, from
    /// empty to a token, when its creator writes it late).
    pub(crate) made: [u64; 3],
    pub(crate) names: BTreeMap<Key, u64>,
    pub(crate) inodes: BTreeMap<u64, Inode>,
    journal: Vec<Undo>,
    /// Every name change of the last [`Fs::cache_for`]: when, which name,
    /// and what it named before.
    history: Vec<(u64, Key, Option<u64>)>,
    /// Per host and directory, when the host last revalidated it: its
    /// cached names are the server's as of then.
    pub(crate) views: Vec<[Option<u64>; 3]>,
    /// Per host, the names it changed itself since it last revalidated
    /// their directory, as its own replies told it (what it trusts over
    /// its view, where the server sends no pre-operation attributes).
    own: Vec<BTreeMap<Key, Option<u64>>>,
    /// Whether a host's own change of a name revalidates the directory:
    /// the server's replies carry the directory's attributes before and
    /// after (NFSv3 `wcc_data`, NFSv4 `change_info4`), and a client that
    /// sees another's change in them drops its caches of the directory.
    pub(crate) wcc: bool,
    /// How long a host may answer from its caches; zero for a local
    /// filesystem.
    pub(crate) cache_for: u64,
    /// The time now, as the last operation set it.
    pub(crate) now: u64,
    /// The last file handle handed out, on a file server.
    next_ino: u64,
    /// Per host, how many answers it gave from its caches that the server
    /// would not have given.
    pub(crate) stale_answers: Vec<u64>,
}

impl Fs {
    /// An empty server for `hosts` client hosts, which cache for
    /// `cache_for` nanoseconds (zero: a local filesystem).
    pub(crate) fn new(hosts: usize, cache_for: u64) -> Self {
        Fs {
            dirs: [false; 3],
            made: [0; 3],
            names: BTreeMap::new(),
            inodes: BTreeMap::new(),
            journal: Vec::new(),
            history: Vec::new(),
            views: vec![[None; 3]; hosts],
            own: vec![BTreeMap::new(); hosts],
            wcc: true,
            cache_for,
            now: 0,
            next_ino: 0,
            stale_answers: vec![0; hosts],
        }
    }

    /// The inode `name` names on the server.
    pub(crate) fn lookup(&self, key: &Key) -> Option<u64> {
        self.names.get(key).copied()
    }

    /// The bytes of what `name` names on the server.
    pub(crate) fn content(&self, key: &Key) -> Option<&[u8]> {
        let ino = self.lookup(key)?;
        self.inodes.get(&ino).map(|i| i.data.as_slice())
    }

    /// The names of directory `d` on the server.
    pub(crate) fn list(&self, d: usize) -> Vec<Vec<u8>> {
        self.names
            .keys()
            .filter(|(x, _)| *x == d)
            .map(|(_, n)| n.clone())
            .collect()
    }

    /// A number for a new file: the lowest free one on a local disk, as
    /// ext4 hands them out; on a file server a new one each time, as a file
    /// handle carries a generation number that a reused inode number does
    /// not repeat (a client's cached handle of a removed file answers
    /// `ESTALE`, never another file).
    fn free_ino(&mut self) -> u64 {
        if self.cache_for > 0 {
            self.next_ino += 1;
            return self.next_ino;
        }
        (1..)
            .find(|i| !self.inodes.contains_key(i))
            .expect("inode numbers are unbounded")
    }

    /// Drops `ino` once nothing names it and no undo could name it again.
    fn release(&mut self, ino: u64) {
        let held = self
            .inodes
            .get(&ino)
            .is_some_and(|i| i.nlink > 0 || i.open > 0)
            || self.journal.iter().any(|u| match u {
                Undo::Removed(_, i) => *i == ino,
                Undo::Renamed { replaced, .. } => *replaced == Some(ino),
                _ => false,
            });
        if !held {
            self.inodes.remove(&ino);
        }
    }

    /// `mkdir` of directory `d`.
    pub(crate) fn mkdir(&mut self, d: usize) -> Result<(), Errno> {
        if d != ROOT && !self.dirs[ROOT] {
            return Err(Errno::NOENT);
        }
        if self.dirs[d] {
            return Err(Errno::EXIST);
        }
        self.dirs[d] = true;
        self.made[d] += 1;
        self.journal.push(Undo::Made(d));
        Ok(())
    }

    /// Whether directory `d` and its parents exist.
    pub(crate) fn reachable(&self, d: usize) -> bool {
        self.dirs[ROOT] && self.dirs[d]
    }

    /// Exclusive create of an empty file at `key`, at time `now`.
    pub(crate) fn create(&mut self, key: &Key, now: u64) -> Result<u64, Errno> {
        if !self.reachable(key.0) {
            return Err(Errno::NOENT);
        }
        if self.names.contains_key(key) {
            return Err(Errno::EXIST);
        }
        let ino = self.free_ino();
        self.inodes.insert(
            ino,
            Inode {
                data: Vec::new(),
                nlink: 1,
                durable: false,
                changed: now,
                open: 0,
            },
        );
        self.changed(key, None);
        self.names.insert(key.clone(), ino);
        self.journal.push(Undo::Added(key.clone()));
        Ok(ino)
    }

    /// Writes `data` at offset 0 of `ino`, without truncating.
    pub(crate) fn write(&mut self, ino: u64, data: &[u8], now: u64) {
        if let Some(i) = self.inodes.get_mut(&ino) {
            if i.data.len() < data.len() {
                i.data.resize(data.len(), 0);
            }
            i.data[..data.len()].copy_from_slice(data);
            i.durable = false;
            i.changed = now;
        }
    }

    /// `fsync` of a file: its data on disk, and (a journaling
    /// filesystem) every name operation so far.
    pub(crate) fn fsync(&mut self, ino: u64) {
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.durable = true;
        }
        self.barrier();
    }

    /// `fsync` of a directory: every name operation so far on disk.
    pub(crate) fn barrier(&mut self) {
        let undone: Vec<u64> = self
            .journal
            .iter()
            .filter_map(|u| match u {
                Undo::Removed(_, i) => Some(*i),
                Undo::Renamed { replaced, .. } => *replaced,
                _ => None,
            })
            .collect();
        self.journal.clear();
        for ino in undone {
            self.release(ino);
        }
    }

    /// An open descriptor of `ino`.
    pub(crate) fn pin(&mut self, ino: u64) {
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.open += 1;
        }
    }

    /// The close of a descriptor of `ino`.
    pub(crate) fn unpin(&mut self, ino: u64) {
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.open = i.open.saturating_sub(1);
        }
        self.release(ino);
    }

    /// `link(from, to)` in one directory, never replacing.
    pub(crate) fn link(&mut self, from: &Key, to: &Key) -> Result<(), Errno> {
        if !self.reachable(from.0) {
            return Err(Errno::NOENT);
        }
        let ino = self.lookup(from).ok_or(Errno::NOENT)?;
        if self.names.contains_key(to) {
            return Err(Errno::EXIST);
        }
        self.changed(to, None);
        self.names.insert(to.clone(), ino);
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.nlink += 1;
        }
        self.journal.push(Undo::Added(to.clone()));
        Ok(())
    }

    /// `rename(from, to)` in one directory, replacing.
    pub(crate) fn rename(&mut self, from: &Key, to: &Key) -> Result<(), Errno> {
        if !self.reachable(from.0) {
            return Err(Errno::NOENT);
        }
        let ino = self.lookup(from).ok_or(Errno::NOENT)?;
        if from == to {
            return Ok(());
        }
        self.changed(from, Some(ino));
        let before = self.lookup(to);
        self.changed(to, before);
        self.names.remove(from);
        let replaced = self.names.insert(to.clone(), ino);
        if let Some(old) = replaced {
            if let Some(i) = self.inodes.get_mut(&old) {
                i.nlink -= 1;
            }
        }
        self.journal.push(Undo::Renamed {
            from: from.clone(),
            to: to.clone(),
            replaced,
        });
        if let Some(old) = replaced {
            self.release(old);
        }
        Ok(())
    }

    /// `unlink(key)`.
    pub(crate) fn unlink(&mut self, key: &Key) -> Result<(), Errno> {
        if !self.reachable(key.0) {
            return Err(Errno::NOENT);
        }
        let ino = self.names.remove(key).ok_or(Errno::NOENT)?;
        self.changed(key, Some(ino));
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.nlink -= 1;
        }
        self.journal.push(Undo::Removed(key.clone(), ino));
        self.release(ino);
        Ok(())
    }

    /// An operator's `rm -rf` of directory `d`, at once and on disk.
    pub(crate) fn remove_dir(&mut self, d: usize) {
        let names: Vec<Key> = self.names.keys().filter(|k| k.0 == d).cloned().collect();
        for k in names {
            let _ = self.unlink(&k);
        }
        self.dirs[d] = false;
        self.barrier();
    }

    /// How many name operations a crash could lose now.
    pub(crate) fn unsynced(&self) -> usize {
        self.journal.len()
    }

    /// A crash of the host whose disk this is: the newest `lose` name
    /// operations since the last barrier are lost, and every file whose
    /// data was not fsynced since its last write reads back empty.
    pub(crate) fn crash(&mut self, lose: usize) {
        let lose = lose.min(self.journal.len());
        // A crash ends every client's view: the local host's caches go
        // with it.
        let before = self.names.clone();
        for _ in 0..lose {
            let Some(undo) = self.journal.pop() else {
                break;
            };
            match undo {
                Undo::Added(k) => {
                    if let Some(ino) = self.names.remove(&k) {
                        if let Some(i) = self.inodes.get_mut(&ino) {
                            i.nlink -= 1;
                        }
                    }
                }
                Undo::Removed(k, ino) => {
                    self.names.insert(k, ino);
                    if let Some(i) = self.inodes.get_mut(&ino) {
                        i.nlink += 1;
                    }
                }
                Undo::Renamed { from, to, replaced } => {
                    if let Some(ino) = self.names.remove(&to) {
                        self.names.insert(from, ino);
                    }
                    if let Some(old) = replaced {
                        self.names.insert(to, old);
                        if let Some(i) = self.inodes.get_mut(&old) {
                            i.nlink += 1;
                        }
                    }
                }
                Undo::Made(d) => self.dirs[d] = false,
            }
        }
        self.journal.clear();
        let keys: std::collections::BTreeSet<Key> =
            before.keys().chain(self.names.keys()).cloned().collect();
        for k in keys {
            if before.get(&k) != self.names.get(&k) {
                self.history
                    .push((self.now, k.clone(), before.get(&k).copied()));
            }
        }
        let dead: Vec<u64> = self
            .inodes
            .iter()
            .filter(|(_, i)| i.nlink == 0 && i.open == 0)
            .map(|(&n, _)| n)
            .collect();
        for ino in dead {
            self.inodes.remove(&ino);
        }
        for i in self.inodes.values_mut() {
            if !i.durable {
                i.data.clear();
                i.durable = true;
            }
        }
    }

    /// Records that `key` changed now; it named `before`.
    fn changed(&mut self, key: &Key, before: Option<u64>) {
        if self.cache_for == 0 {
            return;
        }
        let horizon = self.now.saturating_sub(self.cache_for);
        if self.history.first().is_some_and(|(t, ..)| *t < horizon) {
            self.history.retain(|(t, ..)| *t >= horizon);
        }
        self.history.push((self.now, key.clone(), before));
    }

    /// What `key` named on the server at time `at`.
    fn named_at(&self, key: &Key, at: u64) -> Option<u64> {
        self.history
            .iter()
            .find(|(t, k, _)| *t > at && k == key)
            .map_or_else(|| self.lookup(key), |(_, _, before)| *before)
    }

    /// Since when host `h`'s view of directory `d` holds, if it may still
    /// answer now.
    fn view(&self, h: usize, d: usize) -> Option<u64> {
        let at = self.views.get(h)?[d]?;
        (self.now.saturating_sub(at) < self.cache_for).then_some(at)
    }

    /// Whether host `h`'s view of directory `d` still holds.
    pub(crate) fn viewing(&self, h: usize, d: usize) -> bool {
        self.view(h, d).is_some()
    }

    /// What host `h`'s lookup of `key` may answer from its cache instead
    /// of the server, now: the name as the server had it when the host
    /// last revalidated the directory (a file since removed answers
    /// `ESTALE`: missing); `None` when that is what the server says now.
    pub(crate) fn stale_lookup(&self, h: usize, key: &Key) -> Option<Option<u64>> {
        let at = self.view(h, key.0)?;
        let cached = match self.own[h].get(key) {
            Some(own) => *own,
            None => self.named_at(key, at),
        };
        let cached = cached.filter(|i| self.inodes.get(i).is_some_and(|n| n.nlink > 0));
        (cached != self.lookup(key)).then_some(cached)
    }

    /// What host `h`'s listing of directory `d` may answer from its cache
    /// instead of the server, now: the names as of its last revalidation.
    pub(crate) fn stale_listing(&self, h: usize, d: usize) -> Option<Vec<Vec<u8>>> {
        let at = self.view(h, d)?;
        let own = &self.own[h];
        let mut keys: Vec<&Key> = self.names.keys().filter(|k| k.0 == d).collect();
        keys.extend(
            self.history
                .iter()
                .filter(|(t, k, _)| *t > at && k.0 == d)
                .map(|(_, k, _)| k),
        );
        keys.extend(own.keys().filter(|k| k.0 == d));
        keys.sort();
        keys.dedup();
        let cached: Vec<Vec<u8>> = keys
            .into_iter()
            .filter(|k| {
                own.get(*k)
                    .copied()
                    .unwrap_or_else(|| self.named_at(k, at))
                    .is_some()
            })
            .map(|k| k.1.clone())
            .collect();
        let mut fresh = self.list(d);
        fresh.sort();
        (cached != fresh).then_some(cached)
    }

    /// Host `h` revalidated directory `d` now (an answer from the server,
    /// or its own change of a name there): its view is the server's now.
    pub(crate) fn revalidate(&mut self, h: usize, d: usize) {
        if self.cache_for == 0 {
            return;
        }
        let now = self.now;
        if let Some(v) = self.views.get_mut(h) {
            v[d] = Some(now);
        }
        if let Some(own) = self.own.get_mut(h) {
            own.retain(|k, _| k.0 != d);
        }
    }

    /// Host `h` asked the server to change `key` (`done`: and it did):
    /// with [`Fs::wcc`] the reply revalidates the directory; without, a
    /// change done tells the host that name alone and it keeps its view of
    /// the rest (a refused one tells it nothing).
    pub(crate) fn own_change(&mut self, h: usize, key: &Key, done: bool) {
        if self.cache_for == 0 {
            return;
        }
        match (self.wcc, done) {
            (true, _) => self.revalidate(h, key.0),
            (false, false) => {}
            (false, true) => {
                let now = self.lookup(key);
                if let Some(own) = self.own.get_mut(h) {
                    own.insert(key.clone(), now);
                }
            }
        }
    }

    /// Host `h`'s view of directory `d` dates from `at`.
    pub(crate) fn set_view(&mut self, h: usize, d: usize, at: u64) {
        if let Some(v) = self.views.get_mut(h) {
            v[d] = Some(at);
        }
    }

    /// Host `h`'s caches are lost (it crashed, or faults stop).
    pub(crate) fn forget(&mut self, h: usize) {
        if let Some(v) = self.views.get_mut(h) {
            *v = [None; 3];
        }
        if let Some(own) = self.own.get_mut(h) {
            own.clear();
        }
    }
}
