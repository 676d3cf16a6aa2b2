//! The lock's instance of the read-write driver
//! (`swaplock_core::rw::driver`, PROTOCOL 16.4-16.8) and what the facade
//! lends it: this system's clock and random tokens, a ledger of any size,
//! and the read buffers. Every step of the log and every decision of a
//! participant is the driver's, the one the simulator runs; the facade
//! adds the threads, the waits and the guards around it.

use crate::adapter::soft::{current_pid, host_name, monotonic_now, random_token};
use std::collections::HashMap;
use std::time::Duration;
use swaplock_core::decide::Instant;
use swaplock_core::names::Token;
use swaplock_core::rw::driver::{self, Buffers, Config, Entry, Env, Instance, Key, BUFFER};
use swaplock_core::rw::record::Snapshot;

/// The monotonic clock and the random tokens the driver reads.
pub(crate) struct StdEnv;

impl Env for StdEnv {
    fn now(&mut self) -> Instant {
        monotonic_now()
    }
    fn token(&mut self) -> Token {
        random_token()
    }
}

/// What a lock has seen of the records it watches, on its own clock
/// (PROTOCOL 16.7): as many entries as it meets.
#[derive(Default)]
pub(crate) struct Ledger(HashMap<Key, Entry>);

impl Ledger {
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl driver::Ledger for Ledger {
    fn get(&self, key: &Key) -> Option<Entry> {
        self.0.get(key).copied()
    }
    fn put(&mut self, key: Key, entry: Entry) -> bool {
        self.0.insert(key, entry);
        true
    }
    fn forget(&mut self, key: &Key) {
        self.0.remove(key);
    }
    fn retain(&mut self, keep: &mut dyn FnMut(&Key, &Entry) -> bool) {
        self.0.retain(|k, e| keep(k, e));
    }
}

/// The driver as the facade runs it.
pub(crate) type Lock = Instance<Ledger, Box<[u8]>>;

/// The terms a participant runs on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Terms {
    pub(crate) threshold: Duration,
    pub(crate) max_lease: Duration,
}

impl Terms {
    /// The driver's configuration on these terms, for this process.
    pub(crate) fn config(self) -> Config {
        Config {
            threshold: self.threshold,
            max_lease: self.max_lease,
            pid: current_pid(),
            host: host_name(),
        }
    }
}

/// A lock's memory on `terms`, with `ledger` (a new one, or the one the
/// path's previous lock objects left).
pub(crate) fn instance(terms: Terms, ledger: Ledger) -> Lock {
    // Zeroed pages the system maps on first touch: a read touches only
    // what it reads.
    let buf = || vec![0u8; BUFFER].into_boxed_slice();
    Instance::new(terms.config(), ledger, Buffers::new(buf(), buf(), buf()))
}

/// The latest snapshot as a waiting acquire reports it.
#[derive(Clone, Debug)]
pub(crate) struct Latest {
    pub(crate) generation: u128,
    pub(crate) writer: Option<Token>,
    pub(crate) readers: usize,
}

impl Latest {
    pub(crate) fn of(s: &Snapshot<'_>) -> Self {
        Latest {
            generation: s.generation,
            writer: s.writer,
            readers: s.readers().count(),
        }
    }
}

#[cfg(test)]
mod tests {
    //! The driver over this system's files: what its tests in the core show
    //! over a model filesystem, here through real `O_EXCL` creates, links
    //! and listings.

    use super::*;
    use crate::adapter::soft::RwFiles;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;
    use swaplock_core::decide::FileId;
    use swaplock_core::rw::files::{Area, Files, FsError, Read};
    use swaplock_core::rw::names::{parse_generation_name, HEAD};
    use swaplock_core::rw::Mode;

    /// A client whose listing of `gen/` and whose lookups of HEAD come
    /// from a stale cache: it sees neither (PROTOCOL 16.9).
    struct Stale(RwFiles);

    impl Files for Stale {
        fn prepare(&mut self, force: bool) -> Result<(), FsError> {
            self.0.prepare(force)
        }
        fn read(&mut self, area: Area, name: &[u8], buf: &mut [u8]) -> Result<Read, FsError> {
            match name == HEAD {
                true => Ok(Read::Missing),
                false => self.0.read(area, name, buf),
            }
        }
        fn create(
            &mut self,
            area: Area,
            name: &[u8],
            data: &[u8],
            durable: bool,
        ) -> Result<FileId, FsError> {
            self.0.create(area, name, data, durable)
        }
        fn overwrite(
            &mut self,
            area: Area,
            name: &[u8],
            data: &[u8],
            id: FileId,
        ) -> Result<bool, FsError> {
            self.0.overwrite(area, name, data, id)
        }
        fn link(&mut self, area: Area, from: &[u8], to: &[u8]) -> Result<bool, FsError> {
            self.0.link(area, from, to)
        }
        fn replace(&mut self, area: Area, from: &[u8], to: &[u8]) -> Result<bool, FsError> {
            self.0.replace(area, from, to)
        }
        fn unlink(&mut self, area: Area, name: &[u8]) -> Result<(), FsError> {
            self.0.unlink(area, name)
        }
        fn list(&mut self, area: Area, visit: &mut dyn FnMut(&[u8])) -> Result<(), FsError> {
            match area {
                Area::Generations => Ok(()),
                Area::Holders => self.0.list(area, visit),
            }
        }
        fn sync(&mut self, area: Area) -> Result<(), FsError> {
            self.0.sync(area)
        }
    }

    fn files(dir: &Path) -> RwFiles {
        let root = dir.join("a.lock.rw");
        RwFiles::new(root.as_os_str().as_bytes(), dir.as_os_str().as_bytes()).unwrap()
    }

    fn lock() -> Lock {
        let terms = Terms {
            threshold: Duration::from_secs(90),
            max_lease: Duration::from_secs(3600),
        };
        instance(terms, Ledger::default())
    }

    /// A reader's enter and leave, `n` times: two generations each.
    fn churn(files: &mut RwFiles, n: usize) {
        let mut l = lock();
        for _ in 0..n {
            let mut p = l.publish(files, &mut StdEnv, Mode::Read).unwrap();
            assert_eq!(l.advance(files, &mut StdEnv, &mut p), Ok(true));
            l.leave(files, &mut StdEnv, &mut p).unwrap();
        }
    }

    fn generations(dir: &Path) -> Vec<u128> {
        let mut all: Vec<u128> = std::fs::read_dir(dir.join("a.lock.rw/gen"))
            .unwrap()
            .filter_map(|e| parse_generation_name(e.unwrap().file_name().as_bytes()))
            .collect();
        all.sort_unstable();
        all
    }

    #[test]
    fn a_client_blind_to_a_live_log_never_commits_generation_one_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = files(dir.path());
        churn(&mut live, 70);
        assert_eq!(generations(dir.path()).first(), Some(&76), "compacted");
        let mut blind = Stale(files(dir.path()));
        let mut l = lock();
        let mut w = l.publish(&mut blind, &mut StdEnv, Mode::Write).unwrap();
        assert_eq!(l.advance(&mut blind, &mut StdEnv, &mut w), Ok(false));
        assert_eq!(w.generation(), None, "no grant beside the live log");
        assert_eq!(
            generations(dir.path()).first(),
            Some(&76),
            "no generation 1"
        );
        l.leave(&mut blind, &mut StdEnv, &mut w).unwrap();
        // The live log goes on, unharmed.
        churn(&mut live, 1);
        assert_eq!(generations(dir.path()).last(), Some(&142));
    }

    #[test]
    fn compaction_keeps_64_or_65_generations_and_a_reader_trims_to_64() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = files(dir.path());
        churn(&mut f, 40);
        assert_eq!(generations(dir.path()), (16..=80).collect::<Vec<_>>());
        // A generation left behind by hand: the next reader trims to 64.
        std::fs::write(
            dir.path().join("a.lock.rw/gen/00000000000000000003"),
            "filelock-rw/1\ngeneration=3\n",
        )
        .unwrap();
        lock().latest(&mut f, &mut StdEnv).unwrap();
        assert_eq!(generations(dir.path()), (17..=80).collect::<Vec<_>>());
    }
}
