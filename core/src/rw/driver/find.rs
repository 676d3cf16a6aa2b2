//! Finding the latest snapshot (PROTOCOL 16.4): the epoch, the listing
//! (trimmed to the newest window), the generations it names, the remembered
//! one and HEAD's, read newest first, then a probe forward by name.

use super::{cut, gen_name, Env, Epoch, Error, Held, Instance, Ledger};
use crate::mutant::{active, Mutant};
use crate::rw::files::{missing, Area, Files, FsError, Read};
use crate::rw::log::{accept_blind, named, patience, retain, Probe};
use crate::rw::names::{parse_generation_name, temporary_name, EPOCH, HEAD, READ_LIMIT, RETAINED};
use crate::rw::record::{
    encode_epoch, head_generation, head_record, parse_generation, Malformed, SnapshotRecord,
};

const GEN: Area = Area::Generations;

/// How many listed generations a find holds at once: past it, the oldest
/// are left for a later find to trim (filelock trims them all at once; the
/// window kept is the same).
const LISTED: usize = 2 * RETAINED as usize;

/// Keeps the newest of a full listing, making room: the oldest quarter is
/// dropped (left in place until a later find).
fn make_room(listed: &mut heapless::Vec<u128, LISTED>) {
    listed.sort_unstable();
    let drop = LISTED / 4;
    listed.copy_within(drop.., 0);
    listed.truncate(LISTED - drop);
}

impl<L: Ledger, B: AsMut<[u8]> + AsRef<[u8]>> Instance<L, B> {
    /// The epoch (PROTOCOL 16.4 step 1): read, or made if missing and read
    /// again; `None` without `gen/`. Made whole: a temporary written and
    /// fsynced, then linked to `epoch` without replacing one a peer made
    /// first, so that a creator killed midway leaves no epoch without a
    /// token (filelock creates it in place and then writes it, PROTOCOL
    /// 16.9).
    fn incarnation(
        &mut self,
        files: &mut impl Files,
        env: &mut impl Env,
    ) -> Result<Option<Epoch>, Error> {
        if let Some(n) = self.read_scratch(files, GEN, EPOCH)? {
            return Ok(Some(Epoch::of(self.scratch(n))));
        }
        let temp = temporary_name(&env.token());
        match files.create(GEN, &temp, &encode_epoch(&env.token()), true) {
            Ok(_) => {}
            Err(FsError::Os(e)) if missing(e) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        let linked = files.link(GEN, &temp, EPOCH);
        let _ = files.unlink(GEN, &temp);
        match linked {
            // Ours, or a peer's made first; read below either way. Where a
            // link's names show two files (sshfs), the name holds a copy
            // of ours, and the first commit refuses the filesystem.
            Ok(_) | Err(FsError::LinkNotOneFile) => {}
            // `gen/` removed, or the temporary swept: read below.
            Err(FsError::Os(e)) if missing(e) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(self
            .read_scratch(files, GEN, EPOCH)?
            .map(|n| Epoch::of(self.scratch(n))))
    }

    /// The epoch as it reads now, without creating it.
    pub(super) fn epoch_now(&mut self, files: &mut impl Files) -> Result<Option<Epoch>, Error> {
        Ok(self
            .read_scratch(files, GEN, EPOCH)?
            .map(|n| Epoch::of(self.scratch(n))))
    }

    /// HEAD under the remembered epoch (RW10, RW13): whether it is bound
    /// to it, and the generation it names, if its record parses.
    pub(super) fn head(&mut self, files: &mut impl Files) -> Result<(bool, Option<u128>), Error> {
        let Some(n) = self.read_scratch(files, GEN, HEAD)? else {
            return Ok((false, None));
        };
        let epoch = self.epoch.as_ref().and_then(Epoch::bytes);
        let head = self.scratch(n);
        Ok((
            head_record(head, epoch).is_some(),
            head_generation(head, epoch),
        ))
    }

    /// Whether generation `n` exists (any bytes).
    pub(super) fn exists(&mut self, files: &mut impl Files, n: u128) -> Result<bool, Error> {
        Ok(self.read_scratch(files, GEN, &gen_name(n)?)?.is_some())
    }

    /// Reads generation `n` into snapshot buffer `at`: its length, `None`
    /// when it is missing; a malformed record is an error naming it.
    fn read_generation(
        &mut self,
        files: &mut impl Files,
        n: u128,
        at: usize,
    ) -> Result<Option<usize>, Error> {
        let name = gen_name(n)?;
        let buf = self.bufs.snapshots[at].as_mut();
        let room = buf.len().min(READ_LIMIT);
        let len = match files.read(GEN, &name, &mut buf[..room])? {
            Read::Missing => return Ok(None),
            Read::Bytes(len) => len.min(room),
        };
        let why = match cut(len, room) {
            true => Some(Malformed::TooLong),
            false => parse_generation(&buf[..len], n).err(),
        };
        match why {
            Some(why) => Err(Error::Malformed { generation: n, why }),
            None => Ok(Some(len)),
        }
    }

    /// Probes forward from `held` (PROTOCOL 16.4, `probe`): the latest
    /// readable generation before `patience` names in a row are missing.
    fn probe(
        &mut self,
        files: &mut impl Files,
        mut held: Held,
        patience: u32,
    ) -> Result<Held, Error> {
        let mut probe = Probe::new(held.generation, patience);
        while let Some(g) = probe.next() {
            let other = 1 - held.at;
            let found = self.read_generation(files, g, other)?;
            probe.found(found.is_some());
            if let Some(len) = found {
                held = Held {
                    at: other,
                    len,
                    generation: g,
                };
            }
        }
        Ok(held)
    }

    /// The listed generations, at most [`LISTED`], the newest kept.
    fn listed(files: &mut impl Files) -> Result<heapless::Vec<u128, LISTED>, Error> {
        let mut listed = heapless::Vec::new();
        files.list(GEN, &mut |name| {
            if let Some(g) = parse_generation_name(name) {
                if listed.is_full() {
                    make_room(&mut listed);
                }
                // Room was just made.
                let _ = listed.push(g);
            }
        })?;
        Ok(listed)
    }

    /// The newest listed generation.
    pub(super) fn listed_max(files: &mut impl Files) -> Result<Option<u128>, Error> {
        let mut max = None;
        files.list(GEN, &mut |name| {
            if let Some(g) = parse_generation_name(name) {
                max = max.max(Some(g));
            }
        })?;
        Ok(max)
    }

    /// One find (PROTOCOL 16.4 steps 1-5): the latest snapshot, or `None`
    /// when the generations named could not be read and nothing past them
    /// was found.
    fn find(&mut self, files: &mut impl Files, env: &mut impl Env) -> Result<Option<Held>, Error> {
        // 1. The incarnation binds what is remembered (RW10).
        let epoch = self.incarnation(files, env)?;
        if epoch != self.epoch {
            self.epoch = epoch;
            if !active(Mutant::RwMemoryOutlivesEpoch) {
                self.remembered = 0;
            }
        }
        // 2. The listing, trimmed to the newest window by any reader.
        let mut listed = Self::listed(files)?;
        let (trim, keep) = retain(&mut listed);
        for &g in trim {
            files.unlink(GEN, &gen_name(g)?)?;
        }
        // 3. What is named: the listing, the remembered latest, HEAD's.
        let (_, head) = self.head(files)?;
        let named = named(keep, self.remembered, head);
        // 4. The first readable one, newest first, then forward by name.
        for &g in &named {
            if let Some(len) = self.read_generation(files, g, 0)? {
                let start = Held {
                    at: 0,
                    len,
                    generation: g,
                };
                return self.probe(files, start, patience(g, head)).map(Some);
            }
        }
        // 5. Nothing readable: a blind probe past the newest named.
        let newest = named.first().copied().unwrap_or(0);
        let empty = SnapshotRecord {
            generation: newest,
            writer: None,
            readers: &[],
        };
        // The empty record of a generation within 20 digits (named ones
        // are) fits any buffer of at least 256 bytes.
        let len = empty
            .encode(self.bufs.snapshots[0].as_mut())
            .map_err(Error::Encode)?;
        let start = Held {
            at: 0,
            len,
            generation: newest,
        };
        let found = self.probe(files, start, RETAINED)?;
        Ok(accept_blind(newest, found.generation, named.is_empty()).then_some(found))
    }

    /// The latest snapshot (PROTOCOL 16.4, `latest`): a find, and a second
    /// if the first found nothing it could trust, then
    /// [`Error::NoSnapshot`]. Its generation; [`Instance::snapshot`] reads
    /// it. It becomes the remembered latest.
    pub fn latest(&mut self, files: &mut impl Files, env: &mut impl Env) -> Result<u128, Error> {
        let held = match self.find(files, env)? {
            Some(held) => held,
            None => self.find(files, env)?.ok_or(Error::NoSnapshot)?,
        };
        self.latest = Some(held);
        self.remembered = held.generation;
        Ok(held.generation)
    }
}
