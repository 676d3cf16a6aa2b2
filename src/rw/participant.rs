//! One participant of the log (PROTOCOL 16.6-16.8): its holder record, its
//! attempts, its leave and its heartbeat, over the lock's shared log and
//! ledger. Every decision is the core's (`swaplock_core::rw::member`); this
//! file performs the reads and commits they ask for.

use super::error::RwError;
use super::log::{Committed, Log, State};
use crate::adapter::soft::{monotonic_now, random_token};
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use swaplock_core::decide::{FileId, Instant};
use swaplock_core::host::HostName;
use swaplock_core::names::Token;
use swaplock_core::rw::files::{missing, Area, Files, FsError, Read};
use swaplock_core::rw::member::{
    attempt, beat, is_stale, leave, next_sweep, sweep_due, swept_holder, swept_temporary, Beat,
    Members, Refreshed, Seen, Step, Value,
};
use swaplock_core::rw::names::{ATTEMPTS_PER_POLL, READ_LIMIT};
use swaplock_core::rw::record::{holder_lease, HolderRecord};
use swaplock_core::rw::Mode;
use swaplock_core::{Errno, Pid};

const HOLDERS: Area = Area::Holders;
const GEN: Area = Area::Generations;

/// A ledger key: a member's record, a non-member's record the sweep
/// watches, or a temporary in `gen/` (filelock's `<token>`,
/// `holder:<token>` and `temporary:<name>`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    Member(Token),
    Holder(Token),
    Temporary(Vec<u8>),
}

/// What a contender has seen of the records it watches, on its own clock.
pub(crate) type Ledger = HashMap<Key, Seen>;

/// What a lock keeps across its acquisitions: the files, the log's memory
/// and the ledger (RW7: a contender's clock starts at its own first look,
/// and every attempt of the lock shares what was seen).
pub(crate) struct Ctx<F> {
    pub(crate) files: F,
    pub(crate) log: Log,
    pub(crate) ledger: Ledger,
    buf: Vec<u8>,
}

impl<F: Files> Ctx<F> {
    pub(crate) fn new(files: F) -> Self {
        Ctx {
            files,
            log: Log::new(),
            ledger: HashMap::new(),
            buf: vec![0u8; READ_LIMIT],
        }
    }

    /// Reads `name` in `area`: its bytes, or `None` when missing.
    fn read(&mut self, area: Area, name: &[u8]) -> Result<Option<&[u8]>, RwError> {
        Ok(match self.files.read(area, name, &mut self.buf)? {
            Read::Missing => None,
            Read::Bytes(n) => Some(&self.buf[..n]),
        })
    }

    /// Whether the record `name` has stayed the same under `key` for the
    /// longer of `threshold` and its own lease (at most `most`).
    fn unchanged_for_its_lease(
        &mut self,
        key: Key,
        area: Area,
        name: &[u8],
        threshold: Duration,
        most: Duration,
    ) -> Result<bool, RwError> {
        let asked = monotonic_now();
        let record = self.read(area, name)?;
        let (value, lease) = (Value::of(record), record.and_then(holder_lease));
        let mut seen = self.ledger.get(&key).copied();
        let age = Seen::observe(&mut seen, value, monotonic_now(), asked);
        if let Some(seen) = seen {
            self.ledger.insert(key, seen);
        }
        Ok(is_stale(age, threshold, lease, most))
    }
}

/// The terms a participant runs on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Terms {
    pub(crate) threshold: Duration,
    pub(crate) max_lease: Duration,
}

/// One acquisition, from its holder record to its leave.
pub(crate) struct Participant {
    pub(crate) token: Token,
    pub(crate) mode: Mode,
    /// The generation whose commit granted the hold.
    pub(crate) generation: Option<u128>,
    holder: Option<FileId>,
    next_sweep: Instant,
    terms: Terms,
    pid: Pid,
    host: HostName,
}

impl Participant {
    pub(crate) fn new(mode: Mode, terms: Terms, pid: Pid, host: HostName) -> Self {
        Participant {
            token: random_token(),
            mode,
            generation: None,
            holder: None,
            next_sweep: monotonic_now(),
            terms,
            pid,
            host,
        }
    }

    fn name(&self) -> [u8; 32] {
        self.token.hex()
    }

    /// Our record, with a fresh nonce.
    fn record(&self) -> Result<Vec<u8>, RwError> {
        let record = HolderRecord {
            token: self.token,
            pid: self.pid,
            host: &self.host,
            lease: self.terms.threshold.as_secs_f64(),
            nonce: random_token(),
        };
        let mut buf = vec![0u8; record.encoded_len()];
        record.encode(&mut buf).map_err(RwError::Encode)?;
        Ok(buf)
    }

    /// Creates the holder record peers watch (RW6: before the token is in
    /// any snapshot); once more after preparing the directories anew if
    /// they are gone.
    fn create_holder<F: Files>(&mut self, ctx: &mut Ctx<F>) -> Result<(), RwError> {
        let record = self.record()?;
        let id = match ctx.files.create(HOLDERS, &self.name(), &record, false) {
            Err(FsError::Os(e)) if missing(e) => {
                ctx.files.prepare(true)?;
                ctx.files.create(HOLDERS, &self.name(), &record, false)?
            }
            other => other?,
        };
        self.holder = Some(id);
        Ok(())
    }

    /// Prepares the directories and publishes the holder record.
    pub(crate) fn publish<F: Files>(&mut self, ctx: &mut Ctx<F>) -> Result<(), RwError> {
        ctx.files.prepare(false)?;
        self.create_holder(ctx)
    }

    /// Rewrites the nonce through the record created (RW9); `false` when
    /// it is gone or replaced.
    fn refresh<F: Files>(&self, ctx: &mut Ctx<F>) -> Result<bool, FsError> {
        let Some(id) = self.holder else {
            return Ok(false);
        };
        let record = self.record().map_err(|_| FsError::Os(Errno::INVAL))?;
        ctx.files.overwrite(HOLDERS, &self.name(), &record, id)
    }

    /// One poll: up to four attempts, a lost commit tried again at once
    /// (PROTOCOL 16.6). `true` once granted; `latest` gets the last
    /// snapshot read.
    pub(crate) fn advance<F: Files>(
        &mut self,
        ctx: &mut Ctx<F>,
        latest: &mut Option<State>,
    ) -> Result<bool, RwError> {
        for _ in 0..ATTEMPTS_PER_POLL {
            if let Some(granted) = self.attempt(ctx, latest)? {
                return Ok(granted);
            }
        }
        Ok(false)
    }

    /// One attempt: `None` when its commit was lost.
    fn attempt<F: Files>(
        &mut self,
        ctx: &mut Ctx<F>,
        latest: &mut Option<State>,
    ) -> Result<Option<bool>, RwError> {
        let s = ctx.log.latest(&mut ctx.files)?;
        *latest = Some(s.clone());
        // Refreshed on every attempt, so a patient contender never reads
        // as dead (RW8); taken again if an evictor or a sweep took it.
        if !self.refresh(ctx)? {
            match self.create_holder(ctx) {
                Err(RwError::Fs(FsError::Os(e))) if e == Errno::EXIST => {}
                other => other?,
            }
        }
        self.sweep(ctx, &s)?;
        let mut stale = HashSet::new();
        for t in s.members().filter(|t| *t != self.token).collect::<Vec<_>>() {
            let (threshold, most) = (self.terms.threshold, self.terms.max_lease);
            if ctx.unchanged_for_its_lease(Key::Member(t), HOLDERS, &t.hex(), threshold, most)? {
                stale.insert(t);
            }
        }
        let plan = attempt(&s, &self.token, self.mode, &|t| stale.contains(t));
        let readers = s
            .readers()
            .filter(|t| !stale.contains(t))
            .chain(plan.add_reader)
            .collect();
        let successor = State::with(s.generation + 1, plan.writer, readers);
        match plan.step {
            Step::Wait => Ok(Some(false)),
            Step::Evict => {
                self.commit(ctx, &successor, &stale)?;
                Ok(Some(false))
            }
            Step::Commit { grant } => {
                if !self.commit(ctx, &successor, &stale)? {
                    return Ok(None);
                }
                if grant {
                    self.generation = Some(successor.generation);
                }
                Ok(Some(grant))
            }
        }
    }

    /// Commits `successor`; once won, the evicted members' records go. A
    /// log whose `gen/` was removed is prepared again (filelock's
    /// long-lived instances wedge there until a new one prepares it).
    fn commit<F: Files>(
        &self,
        ctx: &mut Ctx<F>,
        successor: &State,
        stale: &HashSet<Token>,
    ) -> Result<bool, RwError> {
        match ctx.log.commit(&mut ctx.files, successor, random_token)? {
            Committed::Won => {}
            Committed::Lost => return Ok(false),
            Committed::NoLog => {
                ctx.files.prepare(true)?;
                return Ok(false);
            }
        }
        for t in stale {
            ctx.files.unlink(HOLDERS, &t.hex())?;
            ctx.ledger.remove(&Key::Member(*t));
        }
        Ok(true)
    }

    /// Collects the records no snapshot names and the temporaries no commit
    /// finished, once unchanged for their lease (PROTOCOL 16.7), at most
    /// every half threshold.
    fn sweep<F: Files>(&mut self, ctx: &mut Ctx<F>, s: &State) -> Result<(), RwError> {
        let now = monotonic_now();
        if !sweep_due(now, self.next_sweep) {
            return Ok(());
        }
        self.next_sweep = next_sweep(now, self.terms.threshold);
        let mut watched: HashSet<Key> = s.members().map(Key::Member).collect();
        let mut names = Vec::new();
        ctx.files.list(HOLDERS, &mut |n| names.push(n.to_vec()))?;
        let holders: Vec<(Key, Vec<u8>)> = names
            .into_iter()
            .filter_map(|n| swept_holder(&n, &self.token, s).map(|t| (Key::Holder(t), n)))
            .collect();
        let mut names = Vec::new();
        ctx.files.list(GEN, &mut |n| names.push(n.to_vec()))?;
        let temporaries = names
            .into_iter()
            .filter(|n| swept_temporary(n))
            .map(|n| (Key::Temporary(n.clone()), n));
        let (threshold, most) = (self.terms.threshold, self.terms.max_lease);
        for (area, (key, name)) in holders
            .into_iter()
            .map(|h| (HOLDERS, h))
            .chain(temporaries.map(|t| (GEN, t)))
            .collect::<Vec<_>>()
        {
            watched.insert(key.clone());
            if ctx.unchanged_for_its_lease(key.clone(), area, &name, threshold, most)? {
                ctx.files.unlink(area, &name)?;
                ctx.ledger.remove(&key);
            }
        }
        ctx.ledger.retain(|k, _| watched.contains(k));
        Ok(())
    }

    /// One heartbeat (PROTOCOL 16.8): refresh, then look for ourselves in
    /// the latest snapshot.
    pub(crate) fn heartbeat<F: Files>(&mut self, ctx: &mut Ctx<F>) -> Beat {
        let refreshed = match self.refresh(ctx) {
            Ok(true) => Refreshed::Yes,
            Ok(false) | Err(FsError::TreeReplaced { .. }) => Refreshed::Gone,
            Err(FsError::Os(e) | FsError::NoHardLinks(e)) => Refreshed::Failed(e),
            Err(_) => Refreshed::Failed(Errno::IO),
        };
        if refreshed != Refreshed::Yes {
            return beat(refreshed, None);
        }
        let named = match ctx.log.latest(&mut ctx.files) {
            Ok(s) => match self.sweep(ctx, &s) {
                Ok(()) => Some(s.is_member(&self.token)),
                Err(_) => None,
            },
            Err(_) => None,
        };
        beat(refreshed, named)
    }

    /// Commits this participant out of the log, then removes its record
    /// (PROTOCOL 16.6): evicting nobody, touching no other token. A tree
    /// that was replaced leaves nothing this participant can reach.
    pub(crate) fn leave<F: Files>(&mut self, ctx: &mut Ctx<F>) -> Result<(), RwError> {
        let out = (|| loop {
            let s = ctx.log.latest(&mut ctx.files)?;
            let Some(writer) = leave(&s, &self.token) else {
                return Ok(());
            };
            let readers = s.readers.iter().copied().filter(|t| *t != self.token);
            let successor = State::with(s.generation + 1, writer, readers.collect());
            match ctx.log.commit(&mut ctx.files, &successor, random_token)? {
                Committed::Won => return Ok(()),
                Committed::Lost => {}
                // No log: nothing names us any more.
                Committed::NoLog => return Ok(()),
            }
        })();
        self.generation = None;
        let removed = ctx.files.unlink(HOLDERS, &self.name());
        match out.and(removed.map_err(RwError::from)) {
            Err(RwError::Fs(FsError::TreeReplaced { .. })) => Ok(()),
            other => other,
        }
    }
}
