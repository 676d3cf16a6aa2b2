//! The ledger's judgements (PROTOCOL 16.7): each member of the latest
//! snapshot by an attempt, and the sweep of records no snapshot names and
//! of temporaries no commit finished.

use super::participant::{bit, parsed};
use super::{Entry, Env, Error, Instance, Key, Ledger, Participant};
use crate::names::Token;
use crate::rw::files::{Area, Files, Read};
use crate::rw::member::{
    is_stale, next_sweep, sweep_due, swept_holder, swept_temporary, Seen, Value,
};
use crate::rw::names::READ_LIMIT;
use crate::rw::record::holder_lease;

/// The longest name a directory holds (`NAME_MAX`).
const NAME_MAX: usize = 255;
/// How many holder records one sweep judges at most.
const HOLDER_BATCH: usize = 32;
/// How many temporaries one sweep judges at most.
const TEMPORARY_BATCH: usize = 8;

type Name = heapless::Vec<u8, NAME_MAX>;

/// Where the sweep resumes in each directory when it found more names than
/// it judges at once: past the last one judged (names in byte order), until
/// a sweep reaches the end and starts again from the first.
#[derive(Clone, Debug, Default)]
pub(super) struct Cursors {
    holders: Option<Token>,
    temporaries: Option<Name>,
}

/// Inserts `item` into the ascending `batch`, keeping the smallest; whether
/// one was left out.
fn keep_smallest<T: Ord, const N: usize>(batch: &mut heapless::Vec<T, N>, item: T) -> bool {
    let at = batch.partition_point(|b| *b < item);
    if batch.is_full() {
        if at == N {
            return true;
        }
        batch.pop();
        // Room was just made.
        let _ = batch.insert(at, item);
        return true;
    }
    // Not full.
    let _ = batch.insert(at, item);
    false
}

/// Whether `key` is one of the sweep's (not a member's).
fn area_of(key: &Key) -> Option<Area> {
    match key {
        Key::Member(_) => None,
        Key::Holder(_) => Some(Area::Holders),
        Key::Temporary(_) => Some(Area::Generations),
    }
}

impl<L: Ledger, B: AsMut<[u8]> + AsRef<[u8]>> Instance<L, B> {
    /// Whether the record `name` in `area` has stayed the same under `key`
    /// for the longer of our threshold and its own lease (RW7), on our own
    /// clock from our first look; the entry is stored with this sweep's
    /// round.
    fn unchanged_for_its_lease(
        &mut self,
        files: &mut impl Files,
        env: &mut impl Env,
        key: Key,
        area: Area,
        name: &[u8],
    ) -> Result<bool, Error> {
        // Asked before the read: a pause after it adds nothing.
        let asked = env.now();
        let buf = self.bufs.scratch.as_mut();
        let room = buf.len().min(READ_LIMIT);
        let record = match files.read(area, name, &mut buf[..room])? {
            Read::Missing => None,
            Read::Bytes(n) => Some(&buf[..n.min(room)]),
        };
        let (value, lease) = (Value::of(record), record.and_then(holder_lease));
        let mut seen = self.ledger.get(&key).map(|e| e.seen);
        let age = Seen::observe(&mut seen, value, env.now(), asked);
        if let Some(seen) = seen {
            let round = self.round;
            self.ledger.put(key, Entry { seen, round });
        }
        Ok(is_stale(
            age,
            self.config.threshold,
            lease,
            self.config.max_lease,
        ))
    }

    /// Judges every member of the latest snapshot but `p` (PROTOCOL 16.6
    /// step 4) into the staleness map.
    pub(super) fn judge_members(
        &mut self,
        files: &mut impl Files,
        env: &mut impl Env,
        p: &Participant,
    ) -> Result<(), Error> {
        self.stale.fill(0);
        let held = self.held()?;
        let count = 1 + parsed(self.bufs.snapshots[held.at].as_ref(), &held)?
            .readers()
            .count();
        // The snapshot is parsed again for each member (it borrows the
        // buffer the reads must not touch): quadratic in the members, which
        // a lock of a few dozen never notices.
        for i in 0..count {
            let s = parsed(self.bufs.snapshots[held.at].as_ref(), &held)?;
            let member = match i {
                0 => s.writer,
                _ => s.readers().nth(i - 1),
            };
            let Some(t) = member.filter(|t| *t != p.token()) else {
                continue;
            };
            // A token both writer and reader is judged once.
            let stale = match (i > 0 && s.writer == Some(t), bit(&self.stale, 0)) {
                (true, writer_stale) => writer_stale,
                (false, _) => self.unchanged_for_its_lease(
                    files,
                    env,
                    Key::Member(t),
                    Area::Holders,
                    &t.hex(),
                )?,
            };
            if stale {
                self.stale[i / 64] |= 1 << (i % 64);
            }
        }
        Ok(())
    }

    /// The sweep (PROTOCOL 16.7), if due: on the first attempt, then at
    /// most every half threshold. Each record in `holders/` that is not
    /// ours and names no member, and each temporary in `gen/`, is removed
    /// once unchanged for the longer of our threshold and its lease. The
    /// ledger then keeps only the members and what this sweep judged.
    pub(super) fn sweep(
        &mut self,
        files: &mut impl Files,
        env: &mut impl Env,
        p: &mut Participant,
    ) -> Result<(), Error> {
        let now = env.now();
        if !sweep_due(now, p.next_sweep()) {
            return Ok(());
        }
        p.set_next_sweep(next_sweep(now, self.config.threshold));
        self.round = self.round.wrapping_add(1).max(1);
        let held = self.held()?;
        // The holder records to judge, the smallest past the cursor.
        let mut holders: heapless::Vec<TokenOrd, HOLDER_BATCH> = heapless::Vec::new();
        let mut more_holders = false;
        {
            let s = parsed(self.bufs.snapshots[held.at].as_ref(), &held)?;
            let after = self.cursors.holders;
            files.list(Area::Holders, &mut |name| {
                if let Some(t) = swept_holder(name, &p.token(), &s) {
                    if after.is_none_or(|a| t.0 > a.0) {
                        more_holders |= keep_smallest(&mut holders, TokenOrd(t));
                    }
                }
            })?;
        }
        // The temporaries to judge, likewise.
        let mut temporaries: heapless::Vec<Name, TEMPORARY_BATCH> = heapless::Vec::new();
        let mut more_temporaries = false;
        {
            let after = self.cursors.temporaries.clone();
            files.list(Area::Generations, &mut |name| {
                let past = after.as_ref().is_none_or(|a| name > a.as_slice());
                if swept_temporary(name) && past {
                    if let Ok(name) = Name::from_slice(name) {
                        more_temporaries |= keep_smallest(&mut temporaries, name);
                    }
                }
            })?;
        }
        let partial_holders = more_holders || self.cursors.holders.is_some();
        let partial_temporaries = more_temporaries || self.cursors.temporaries.is_some();
        self.cursors.holders = holders.last().filter(|_| more_holders).map(|t| t.0);
        self.cursors.temporaries = temporaries.last().filter(|_| more_temporaries).cloned();
        for TokenOrd(t) in holders {
            if self.unchanged_for_its_lease(files, env, Key::Holder(t), Area::Holders, &t.hex())? {
                files.unlink(Area::Holders, &t.hex())?;
                self.ledger.forget(&Key::Holder(t));
            }
        }
        for name in temporaries {
            let key = Key::temporary(&name);
            if self.unchanged_for_its_lease(files, env, key, Area::Generations, &name)? {
                files.unlink(Area::Generations, &name)?;
                self.ledger.forget(&key);
            }
        }
        // The ledger keeps the members and this sweep's keys, and, in a
        // directory judged only in part, every key of it.
        let Instance {
            bufs,
            ledger,
            round,
            ..
        } = self;
        let s = parsed(bufs.snapshots[held.at].as_ref(), &held)?;
        let round = *round;
        ledger.retain(&mut |key, entry| match (key, area_of(key)) {
            (Key::Member(t), _) => s.is_member(t),
            (_, Some(Area::Holders)) => partial_holders || entry.round == round,
            (_, _) => partial_temporaries || entry.round == round,
        });
        Ok(())
    }
}

/// A token ordered by its bytes (the order of its hex name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TokenOrd(Token);

impl PartialOrd for TokenOrd {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TokenOrd {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.0 .0.cmp(&other.0 .0)
    }
}
