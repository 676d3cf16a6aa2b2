//! The generation log driven over the adapter (PROTOCOL 16.4, 16.5):
//! finding the latest snapshot and committing the next, each step one
//! file operation and one of the core's decisions.

use super::error::RwError;
use crate::adapter::soft::random_token;
use swaplock_core::names::Token;
use swaplock_core::rw::files::{missing, Area, Files, FsError, Read};
use swaplock_core::rw::log::{
    accept_blind, after_link, extends, head_due, named, patience, retain, Compaction, Landed, Probe,
};
use swaplock_core::rw::member::Members;
use swaplock_core::rw::names::{
    generation_name, parse_generation_name, temporary_name, EPOCH, HEAD, READ_LIMIT, RETAINED,
};
use swaplock_core::rw::record::{
    encode_epoch, head_generation, head_record, is_valid_epoch, normalize, parse_generation,
    Invalid, Snapshot, SnapshotRecord,
};
use swaplock_core::Errno;

const GEN: Area = Area::Generations;

/// A snapshot as the facade keeps it: its readers ascending and unique.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct State {
    pub(crate) generation: u128,
    pub(crate) writer: Option<Token>,
    pub(crate) readers: Vec<Token>,
}

impl Members for State {
    fn writer(&self) -> Option<Token> {
        self.writer
    }

    fn readers(&self) -> impl Iterator<Item = Token> + '_ {
        self.readers.iter().copied()
    }
}

impl State {
    /// The empty log at `generation`.
    pub(crate) fn empty(generation: u128) -> Self {
        State {
            generation,
            writer: None,
            readers: Vec::new(),
        }
    }

    /// A parsed snapshot, its readers put in order.
    pub(crate) fn of(s: &Snapshot<'_>) -> Self {
        Self::with(s.generation, s.writer, s.readers().collect())
    }

    /// A state with these members, its readers put in order.
    pub(crate) fn with(generation: u128, writer: Option<Token>, mut readers: Vec<Token>) -> Self {
        let n = normalize(&mut readers);
        readers.truncate(n);
        State {
            generation,
            writer,
            readers,
        }
    }

    /// Every member: the writer, then the readers.
    pub(crate) fn members(&self) -> impl Iterator<Item = Token> + '_ {
        self.writer.into_iter().chain(self.readers.iter().copied())
    }

    /// The record's bytes, as filelock encodes them.
    pub(crate) fn encode(&self) -> Result<Vec<u8>, RwError> {
        let record = SnapshotRecord {
            generation: self.generation,
            writer: self.writer,
            readers: &self.readers,
        };
        record.validate().map_err(|why| match why {
            // Past 20 digits: the log is spent, whatever its members.
            Invalid::Generation => RwError::Exhausted,
            other => RwError::Encode(other),
        })?;
        let mut buf = vec![0u8; record.encoded_len()];
        record.encode(&mut buf).map_err(RwError::Encode)?;
        Ok(buf)
    }
}

/// What a commit came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub(crate) enum Committed {
    /// The generation is ours.
    Won,
    /// A peer's commit, or a check, stood in the way: read again.
    Lost,
    /// `gen/` is gone (the log was removed): prepare it again, then read.
    NoLog,
}

/// What the log remembers between reads: the epoch and the latest
/// snapshot read under it (RW10), and one read buffer.
pub(crate) struct Log {
    epoch: Option<Vec<u8>>,
    latest: Option<State>,
    buf: Vec<u8>,
}

/// The name of generation `n` (commits past 20 digits are refused before
/// they get here; a probe never asks past them).
fn name(n: u128) -> Result<[u8; 20], RwError> {
    generation_name(n).ok_or(RwError::Exhausted)
}

impl Log {
    pub(crate) fn new() -> Self {
        Log {
            epoch: None,
            latest: None,
            // Pages are mapped as reads reach them: a small log touches few.
            buf: vec![0u8; READ_LIMIT],
        }
    }

    /// Reads `name` in `gen/`: its bytes, or `None` when it is missing.
    fn read(&mut self, files: &mut impl Files, name: &[u8]) -> Result<Option<Vec<u8>>, RwError> {
        Ok(match files.read(GEN, name, &mut self.buf)? {
            Read::Missing => None,
            Read::Bytes(n) => Some(self.buf[..n].to_vec()),
        })
    }

    /// Whether `name` exists in `gen/` (any bytes).
    fn exists(&mut self, files: &mut impl Files, name: &[u8]) -> Result<bool, RwError> {
        Ok(files.read(GEN, name, &mut self.buf)? != Read::Missing)
    }

    /// The snapshot at generation `n`, `None` when it is missing; a
    /// malformed one is an error naming it (PROTOCOL 16.2).
    fn generation(&mut self, files: &mut impl Files, n: u128) -> Result<Option<State>, RwError> {
        let Read::Bytes(len) = files.read(GEN, &name(n)?, &mut self.buf)? else {
            return Ok(None);
        };
        match parse_generation(&self.buf[..len], n) {
            Ok(s) => Ok(Some(State::of(&s))),
            Err(why) => Err(RwError::Malformed { generation: n, why }),
        }
    }

    /// The epoch's bytes, created if missing (`O_EXCL`, `fsync`); `None`
    /// without `gen/` (PROTOCOL 16.4 step 1).
    fn incarnation(&mut self, files: &mut impl Files) -> Result<Option<Vec<u8>>, RwError> {
        if let Some(epoch) = self.read(files, EPOCH)? {
            return Ok(Some(epoch));
        }
        match files.create(GEN, EPOCH, &encode_epoch(&random_token()), true) {
            Ok(_) => {}
            Err(FsError::Os(e)) if e == Errno::EXIST => {}
            Err(FsError::Os(e)) if missing(e) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        self.read(files, EPOCH)
    }

    /// HEAD's bytes, if any.
    fn head(&mut self, files: &mut impl Files) -> Result<Option<Vec<u8>>, RwError> {
        self.read(files, HEAD)
    }

    /// The generation HEAD names under the remembered epoch.
    fn head_generation(&mut self, files: &mut impl Files) -> Result<Option<u128>, RwError> {
        let epoch = self.epoch.clone();
        Ok(self
            .head(files)?
            .and_then(|h| head_generation(&h, epoch.as_deref())))
    }

    /// Whether a HEAD bound to the remembered epoch exists.
    fn head_bound(&mut self, files: &mut impl Files) -> Result<bool, RwError> {
        let epoch = self.epoch.clone();
        Ok(self
            .head(files)?
            .is_some_and(|h| head_record(&h, epoch.as_deref()).is_some()))
    }

    /// The listed generations (unsorted).
    fn listed(files: &mut impl Files) -> Result<Vec<u128>, RwError> {
        let mut listed = Vec::new();
        files.list(GEN, &mut |n| listed.extend(parse_generation_name(n)))?;
        Ok(listed)
    }

    /// Reads forward from `start` (PROTOCOL 16.4, `probe`).
    fn probe(
        &mut self,
        files: &mut impl Files,
        start: State,
        patience: u32,
    ) -> Result<State, RwError> {
        let mut latest = start;
        let mut probe = Probe::new(latest.generation, patience);
        while let Some(g) = probe.next() {
            let found = self.generation(files, g)?;
            probe.found(found.is_some());
            latest = found.unwrap_or(latest);
        }
        Ok(latest)
    }

    /// One find (PROTOCOL 16.4 steps 1-5).
    fn find(&mut self, files: &mut impl Files) -> Result<Option<State>, RwError> {
        let epoch = self.incarnation(files)?;
        if epoch != self.epoch {
            self.epoch = epoch;
            self.latest = None;
        }
        let mut listed = Self::listed(files)?;
        let (trim, keep) = retain(&mut listed);
        for &g in trim {
            files.unlink(GEN, &name(g)?)?;
        }
        let head = self.head_generation(files)?;
        let remembered = self.latest.as_ref().map_or(0, |s| s.generation);
        let named = named(keep, remembered, head);
        for &g in &named {
            if let Some(start) = self.generation(files, g)? {
                return self.probe(files, start, patience(g, head)).map(Some);
            }
        }
        let newest = named.first().copied().unwrap_or(0);
        let found = self.probe(files, State::empty(newest), RETAINED)?;
        Ok(accept_blind(newest, found.generation, named.is_empty()).then_some(found))
    }

    /// The latest snapshot: a find, and a second if the first found nothing
    /// it could trust; then an error (PROTOCOL 16.4).
    pub(crate) fn latest(&mut self, files: &mut impl Files) -> Result<State, RwError> {
        let found = match self.find(files)? {
            Some(s) => s,
            None => self.find(files)?.ok_or(RwError::NoSnapshot)?,
        };
        self.latest = Some(found.clone());
        Ok(found)
    }

    /// Whether the file server says no HEAD exists, or one not bound to our
    /// epoch, before a commit of generation 1 (PROTOCOL 16.9): an exclusive
    /// create is answered by the server, where a listing or a lookup may be
    /// a client's stale cache. The empty HEAD it may leave reads as a torn
    /// one to every reader.
    fn confirm_new_log(&mut self, files: &mut impl Files) -> Result<Committed, RwError> {
        match files.create(GEN, HEAD, b"", false) {
            Ok(_) => Ok(Committed::Won),
            Err(FsError::Os(e)) if e == Errno::EXIST => {
                let epoch = self.epoch.clone();
                Ok(match self.head(files)? {
                    Some(h) if head_record(&h, epoch.as_deref()).is_none() => Committed::Won,
                    // Bound to this epoch, or one this client cannot see yet.
                    _ => Committed::Lost,
                })
            }
            Err(FsError::Os(e)) if missing(e) => Ok(Committed::NoLog),
            Err(e) => Err(e.into()),
        }
    }

    /// Commits `successor` as the next generation (PROTOCOL 16.5). `tokens`
    /// draws the temporaries' names.
    pub(crate) fn commit(
        &mut self,
        files: &mut impl Files,
        successor: &State,
        mut tokens: impl FnMut() -> Token,
    ) -> Result<Committed, RwError> {
        let n = successor.generation;
        let data = successor.encode()?;
        let target = name(n)?;
        // 1. The same incarnation, and a predecessor (RW11).
        if self.read(files, EPOCH)? != self.epoch {
            return Ok(Committed::Lost);
        }
        let before = match n > 1 {
            true => self.exists(files, &name(n - 1)?)?,
            false => false,
        };
        if !extends(n, before, self.head_bound(files)?) {
            return Ok(Committed::Lost);
        }
        if n == 1 {
            match self.confirm_new_log(files)? {
                Committed::Won => {}
                other => return Ok(other),
            }
        }
        // 2. The record complete and on disk before its name (RW2), and
        // the link as the compare-and-swap (RW1, RW3).
        let temp = temporary_name(&tokens());
        match files.create(GEN, &temp, &data, true) {
            Ok(_) => {}
            Err(FsError::Os(e)) if missing(e) => return Ok(Committed::NoLog),
            Err(e) => return Err(e.into()),
        }
        let linked = files.link(GEN, &temp, &target);
        let _ = files.unlink(GEN, &temp);
        match linked {
            Ok(true) => {}
            Ok(false) => return Ok(Committed::Lost),
            // The temporary was swept from under a stalled commit.
            Err(FsError::Os(e)) if missing(e) => return Ok(Committed::Lost),
            Err(e) => return Err(e.into()),
        }
        // 3. The log is still the one read (RW10: a wipe and a new log
        // between the epoch's check and the link would take our link as
        // its next generation, decided on the old log's snapshot), nobody
        // leads by a window, and the predecessor survived (RW11).
        let same_log = self.read(files, EPOCH)? == self.epoch;
        let listed_max = Self::listed(files)?.into_iter().max();
        let head = self.head_generation(files)?;
        let still = match n > 1 {
            true => self.exists(files, &name(n - 1)?)?,
            false => false,
        };
        let extended = same_log && extends(n, still, self.head_bound(files)?);
        if let Landed::Lost { remove } = after_link(n, listed_max, head, extended) {
            if remove {
                files.unlink(GEN, &target)?;
            }
            return Ok(Committed::Lost);
        }
        self.latest = Some(successor.clone());
        // 5. HEAD, forward only (RW13); a failure costs readers a probe.
        let _ = self.move_head(files, n, &data, tokens());
        // 6. Compaction, oldest first (RW12); what it leaves, the next does.
        let _ = self.compact(files, n);
        Ok(Committed::Won)
    }

    /// Renames a temporary holding the epoch and `data` over HEAD, if due.
    fn move_head(
        &mut self,
        files: &mut impl Files,
        n: u128,
        data: &[u8],
        token: Token,
    ) -> Result<(), RwError> {
        let Some(epoch) = self.epoch.clone() else {
            return Ok(());
        };
        let unchanged = self.read(files, EPOCH)?.as_deref() == Some(&epoch[..]);
        let head = self.head_generation(files)?;
        if !head_due(is_valid_epoch(&epoch), unchanged, head, n) {
            return Ok(());
        }
        let temp = temporary_name(&token);
        files.create(GEN, &temp, &[&epoch[..], data].concat(), false)?;
        let placed = files.replace(GEN, &temp, HEAD);
        let _ = files.unlink(GEN, &temp);
        placed?;
        Ok(())
    }

    /// Removes the generations a window and one behind `n`.
    fn compact(&mut self, files: &mut impl Files, n: u128) -> Result<(), RwError> {
        let Some(mut c) = Compaction::after(n) else {
            return Ok(());
        };
        while let Some(g) = c.ask() {
            let yes = self.exists(files, &name(g)?)?;
            c.exists(yes);
        }
        for g in c.range() {
            files.unlink(GEN, &name(g)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::soft::RwFiles;
    use std::os::unix::ffi::OsStrExt;
    use swaplock_core::decide::FileId;

    /// A client whose listing of `gen/` and (when the flag says so) whose
    /// lookups of HEAD come from a stale cache: it sees neither
    /// (PROTOCOL 16.9).
    struct Stale(RwFiles, bool);

    impl Files for Stale {
        fn prepare(&mut self, force: bool) -> Result<(), FsError> {
            self.0.prepare(force)
        }
        fn read(&mut self, area: Area, name: &[u8], buf: &mut [u8]) -> Result<Read, FsError> {
            match self.1 && name == HEAD {
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
        fn list(&mut self, _: Area, _: &mut dyn FnMut(&[u8])) -> Result<(), FsError> {
            Ok(())
        }
        fn sync(&mut self, area: Area) -> Result<(), FsError> {
            self.0.sync(area)
        }
    }

    fn files(dir: &std::path::Path) -> RwFiles {
        let root = dir.join("a.lock.rw");
        let mut f = RwFiles::new(root.as_os_str().as_bytes(), dir.as_os_str().as_bytes()).unwrap();
        f.prepare(false).unwrap();
        f
    }

    /// A log advanced to `n` by empty commits.
    fn advance(log: &mut Log, files: &mut impl Files, n: u128) {
        let from = log.latest(files).unwrap().generation;
        for next in from + 1..=n {
            assert_eq!(
                log.commit(files, &State::empty(next), random_token)
                    .unwrap(),
                Committed::Won
            );
        }
    }

    #[test]
    fn a_client_blind_to_a_live_log_never_commits_generation_one_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = files(dir.path());
        advance(&mut Log::new(), &mut live, 140);
        let gen = dir.path().join("a.lock.rw/gen");
        assert!(
            !gen.join("00000000000000000064").exists(),
            "compacted past the probe"
        );
        let mut blind = Stale(files(dir.path()), true);
        let mut log = Log::new();
        let seen = log.latest(&mut blind).unwrap();
        assert_eq!(
            seen.generation, 0,
            "it takes the log for new, as filelock would"
        );
        assert_eq!(
            log.commit(
                &mut blind,
                &State::with(1, Some(random_token()), vec![]),
                random_token
            )
            .unwrap(),
            Committed::Lost
        );
        assert!(
            !gen.join("00000000000000000001").exists(),
            "no generation 1 beside the live log"
        );
        // The live log goes on, unharmed.
        let mut log = Log::new();
        assert_eq!(log.latest(&mut live).unwrap().generation, 140);
    }

    #[test]
    fn a_new_log_is_confirmed_and_its_first_commit_leaves_a_bound_head() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = files(dir.path());
        let mut log = Log::new();
        assert_eq!(log.latest(&mut f).unwrap(), State::empty(0));
        assert_eq!(
            log.commit(&mut f, &State::empty(1), random_token).unwrap(),
            Committed::Won
        );
        let head = std::fs::read(dir.path().join("a.lock.rw/gen/HEAD")).unwrap();
        let epoch = std::fs::read(dir.path().join("a.lock.rw/gen/epoch")).unwrap();
        assert_eq!(
            head,
            [&epoch[..], b"filelock-rw/1\ngeneration=1\n"].concat()
        );
        // A torn HEAD (a crash, or an empty one a confirmation left) does not
        // keep a new log from starting.
        let dir = tempfile::tempdir().unwrap();
        let mut f = files(dir.path());
        std::fs::write(dir.path().join("a.lock.rw/gen/HEAD"), b"").unwrap();
        let mut log = Log::new();
        assert_eq!(log.latest(&mut f).unwrap().generation, 0);
        assert_eq!(
            log.commit(&mut f, &State::empty(1), random_token).unwrap(),
            Committed::Won
        );
    }

    #[test]
    fn compaction_keeps_64_or_65_generations_and_a_reader_trims_to_64() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = files(dir.path());
        let mut log = Log::new();
        advance(&mut log, &mut f, 80);
        let count = || {
            std::fs::read_dir(dir.path().join("a.lock.rw/gen"))
                .unwrap()
                .filter(|e| {
                    parse_generation_name(e.as_ref().unwrap().file_name().as_bytes()).is_some()
                })
                .count()
        };
        assert_eq!(count(), 65, "16 to 80");
        Log::new().latest(&mut f).unwrap();
        assert_eq!(count(), 64, "17 to 80");
    }

    /// A participant killed between the epoch's create and its write leaves
    /// `gen/epoch` empty for good (filelock never repairs it): HEAD is then
    /// never written or trusted, and the first commit's confirmation
    /// leaves an empty HEAD that reads as torn. A client whose listing of
    /// `gen/` is stale (NFS `READDIR` from cache) is then blind without
    /// HEAD being hidden at all, and the confirmation, which reads that
    /// empty HEAD as "not bound to this epoch", lets it link generation 1
    /// beside the live log: filelock's C-RW1 double grant, which 16.9 says
    /// swaplock closes.
    #[test]
    #[ignore = "finding: a torn epoch reopens C-RW1: generation 1 is committed beside a live log"]
    fn a_client_with_a_stale_listing_never_commits_generation_one_beside_a_log_whose_epoch_is_torn()
    {
        let dir = tempfile::tempdir().unwrap();
        let mut live = files(dir.path());
        let gen = dir.path().join("a.lock.rw/gen");
        std::fs::write(gen.join("epoch"), b"").unwrap();
        advance(&mut Log::new(), &mut live, 140);
        assert!(!gen.join("00000000000000000064").exists());
        let mut blind = Stale(files(dir.path()), false);
        let mut log = Log::new();
        assert_eq!(log.latest(&mut blind).unwrap().generation, 0);
        let writer = State::with(1, Some(random_token()), vec![]);
        assert_eq!(
            log.commit(&mut blind, &writer, random_token).unwrap(),
            Committed::Lost,
            "a writer granted at generation 1 beside the live log at 140"
        );
    }

    /// A client whose first `create` of a temporary finds the log wiped
    /// (`rm -rf L.rw`) and made again by a peer that has reached the very
    /// generation it read in the old log.
    struct WipedMidCommit {
        files: RwFiles,
        dir: std::path::PathBuf,
        peer: Option<State>,
    }

    impl Files for WipedMidCommit {
        fn prepare(&mut self, force: bool) -> Result<(), FsError> {
            self.files.prepare(force)
        }
        fn read(&mut self, area: Area, name: &[u8], buf: &mut [u8]) -> Result<Read, FsError> {
            self.files.read(area, name, buf)
        }
        fn create(
            &mut self,
            area: Area,
            name: &[u8],
            data: &[u8],
            durable: bool,
        ) -> Result<FileId, FsError> {
            if let Some(top) = self.peer.take() {
                std::fs::remove_dir_all(self.dir.join("a.lock.rw")).unwrap();
                let mut peer = files(&self.dir);
                let mut log = Log::new();
                advance(&mut log, &mut peer, top.generation - 1);
                assert_eq!(
                    log.commit(&mut peer, &top, random_token).unwrap(),
                    Committed::Won
                );
            }
            self.files.create(area, name, data, durable)
        }
        fn overwrite(
            &mut self,
            area: Area,
            name: &[u8],
            data: &[u8],
            id: FileId,
        ) -> Result<bool, FsError> {
            self.files.overwrite(area, name, data, id)
        }
        fn link(&mut self, area: Area, from: &[u8], to: &[u8]) -> Result<bool, FsError> {
            self.files.link(area, from, to)
        }
        fn replace(&mut self, area: Area, from: &[u8], to: &[u8]) -> Result<bool, FsError> {
            self.files.replace(area, from, to)
        }
        fn unlink(&mut self, area: Area, name: &[u8]) -> Result<(), FsError> {
            self.files.unlink(area, name)
        }
        fn list(&mut self, area: Area, visit: &mut dyn FnMut(&[u8])) -> Result<(), FsError> {
            self.files.list(area, visit)
        }
        fn sync(&mut self, area: Area) -> Result<(), FsError> {
            self.files.sync(area)
        }
    }

    /// The epoch is checked before the link, never after (filelock's
    /// order): a log wiped and made again between the two, by a peer that
    /// has reached the generation this client read in the old log, takes
    /// the client's link as its next generation. The client's successor
    /// was decided on the old log's snapshot (no writer), so it is granted
    /// the write lock over the new log's live writer (RW1, RW4: a grant
    /// resting on a superseded snapshot, and a live holder evicted without
    /// ever being stale).
    #[test]
    fn a_commit_never_lands_in_a_log_made_again_since_it_was_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut old = files(dir.path());
        let mut log = Log::new();
        advance(&mut log, &mut old, 5);
        let live_writer = State::with(5, Some(random_token()), vec![]);
        let mut files = WipedMidCommit {
            files: old,
            dir: dir.path().to_path_buf(),
            peer: Some(live_writer.clone()),
        };
        let me = State::with(6, Some(random_token()), vec![]);
        let committed = log.commit(&mut files, &me, random_token).unwrap();
        let now = Log::new().latest(&mut files).unwrap();
        assert!(
            committed != Committed::Won,
            "granted at {} over the new log's writer at 5 (latest now names {:?}, the peer \
             still holds {:?})",
            me.generation,
            now.writer,
            live_writer.writer
        );
        assert_eq!(
            (now.generation, now.writer),
            (5, live_writer.writer),
            "the new log is left as its peer made it"
        );
    }
}
