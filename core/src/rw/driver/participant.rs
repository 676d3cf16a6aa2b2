//! One acquisition (PROTOCOL 16.6, 16.8): its holder record, its polls of
//! up to four attempts, its heartbeat, its leave.

use super::commit::{encode_successor, Committed, Draft};
use super::{Env, Error, Held, Instance, Ledger};
use crate::decide::{FileId, Instant};
use crate::errno::Errno;
use crate::mutant::{active, Mutant};
use crate::names::Token;
use crate::rw::files::{missing, Area, Files, FsError};
use crate::rw::member::{attempt, beat, leave, Beat, Refreshed, Step};
use crate::rw::names::ATTEMPTS_PER_POLL;
use crate::rw::record::{parse_snapshot, HolderRecord, Snapshot};
use crate::rw::Mode;

const HOLDERS: Area = Area::Holders;

/// The longest holder record: the protocol line, a token, a PID, a host
/// name of at most 253 bytes, a lease and a nonce.
const RECORD: usize = 512;

/// One acquisition: its token, its mode, the record it refreshes, and the
/// generation that granted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Participant {
    token: Token,
    mode: Mode,
    holder: Option<FileId>,
    next_sweep: Instant,
    generation: Option<u128>,
}

impl Participant {
    /// The token the snapshots and the holder record name it by.
    pub fn token(&self) -> Token {
        self.token
    }

    /// The mode it acquires in.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The generation whose commit granted the hold (the fencing token),
    /// once granted and until it leaves.
    pub fn generation(&self) -> Option<u128> {
        self.generation
    }

    /// The identity of the holder record it created, which it alone
    /// rewrites (RW9).
    pub fn holder(&self) -> Option<FileId> {
        self.holder
    }

    pub(super) fn next_sweep(&self) -> Instant {
        self.next_sweep
    }

    pub(super) fn set_next_sweep(&mut self, at: Instant) {
        self.next_sweep = at;
    }
}

/// The snapshot of `held`, from its buffer's bytes.
pub(super) fn parsed<'a>(bytes: &'a [u8], held: &Held) -> Result<Snapshot<'a>, Error> {
    // Every held snapshot was parsed when read, or encoded and parsed
    // back: this fails only if the buffer changed under it.
    parse_snapshot(&bytes[..held.len]).map_err(|why| Error::Malformed {
        generation: held.generation,
        why,
    })
}

/// Whether member `i` of the staleness map (0 the writer, `1 + j` the
/// reader `j` in the record's order) was found stale.
pub(super) fn bit(stale: &[u64], i: usize) -> bool {
    stale.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
}

impl<L: Ledger, B: AsMut<[u8]> + AsRef<[u8]>> Instance<L, B> {
    /// The latest snapshot read.
    pub(super) fn held(&self) -> Result<Held, Error> {
        self.latest.ok_or(Error::NoSnapshot)
    }

    /// Our record, with a fresh nonce, into `buf`; its length.
    fn record(&self, env: &mut impl Env, p: &Participant, buf: &mut [u8]) -> Result<usize, Error> {
        HolderRecord {
            token: p.token,
            pid: self.config.pid,
            host: &self.config.host,
            lease: self.config.threshold.as_secs_f64(),
            nonce: env.token(),
        }
        .encode(buf)
        .map_err(Error::Encode)
    }

    /// Creates the holder record peers watch (RW6: before the token is in
    /// any snapshot); once more after preparing the directories anew if
    /// they are gone.
    fn create_holder(
        &mut self,
        files: &mut impl Files,
        env: &mut impl Env,
        p: &mut Participant,
    ) -> Result<(), Error> {
        let mut buf = [0u8; RECORD];
        let len = self.record(env, p, &mut buf)?;
        let name = p.token.hex();
        let id = match files.create(HOLDERS, &name, &buf[..len], false) {
            Err(FsError::Os(e)) if missing(e) => {
                files.prepare(true)?;
                files.create(HOLDERS, &name, &buf[..len], false)?
            }
            other => other?,
        };
        p.holder = Some(id);
        Ok(())
    }

    /// Starts an acquisition in `mode` (PROTOCOL 16.6, `publish`): a fresh
    /// token, the directories, and the holder record.
    pub fn publish(
        &mut self,
        files: &mut impl Files,
        env: &mut impl Env,
        mode: Mode,
    ) -> Result<Participant, Error> {
        let mut p = Participant {
            token: env.token(),
            mode,
            holder: None,
            next_sweep: env.now(),
            generation: None,
        };
        files.prepare(false)?;
        self.create_holder(files, env, &mut p)?;
        Ok(p)
    }

    /// Rewrites the nonce through the record created (RW9); `false` when
    /// it is gone or replaced.
    fn refresh(
        &self,
        files: &mut impl Files,
        env: &mut impl Env,
        p: &Participant,
    ) -> Result<bool, FsError> {
        let Some(id) = p.holder else {
            return Ok(false);
        };
        let mut buf = [0u8; RECORD];
        let len = self
            .record(env, p, &mut buf)
            .map_err(|_| FsError::Os(Errno::INVAL))?;
        files.overwrite(HOLDERS, &p.token.hex(), &buf[..len], id)
    }

    /// One poll (PROTOCOL 16.6, `advance`): up to four attempts, a lost
    /// commit tried again at once. `true` once granted, at
    /// [`Participant::generation`]; `false` when this poll ends without a
    /// grant (the caller waits its poll interval, or gives up and
    /// [leaves](Instance::leave)).
    pub fn advance(
        &mut self,
        files: &mut impl Files,
        env: &mut impl Env,
        p: &mut Participant,
    ) -> Result<bool, Error> {
        for _ in 0..ATTEMPTS_PER_POLL {
            if let Some(granted) = self.attempt(files, env, p)? {
                return Ok(granted);
            }
        }
        Ok(false)
    }

    /// One attempt: `None` when its commit was lost.
    fn attempt(
        &mut self,
        files: &mut impl Files,
        env: &mut impl Env,
        p: &mut Participant,
    ) -> Result<Option<bool>, Error> {
        self.latest(files, env)?;
        // Refreshed on every attempt, so that a patient contender never
        // reads as dead (RW8); made again if an evictor or a sweep took it.
        if !active(Mutant::RwNoRefreshOnAttempt) && !self.refresh(files, env, p)? {
            match self.create_holder(files, env, p) {
                Err(Error::Fs(FsError::Os(e))) if e == Errno::EXIST => {}
                other => other?,
            }
        }
        self.sweep(files, env, p)?;
        self.judge_members(files, env, p)?;
        let held = self.held()?;
        let n = held.generation + 1;
        let other = 1 - held.at;
        let [first, second] = &mut self.bufs.snapshots;
        let (from, into) = match held.at {
            0 => (&*first, second),
            _ => (&*second, first),
        };
        let s = parsed(from.as_ref(), &held)?;
        let stale = &self.stale;
        let is_stale = |t: &Token| {
            (s.writer.as_ref() == Some(t) && bit(stale, 0))
                || s.readers()
                    .enumerate()
                    .any(|(i, r)| r == *t && bit(stale, i + 1))
        };
        let plan = attempt(&s, &p.token, p.mode, &is_stale);
        let keep = |i: usize, _: &Token| !bit(stale, i + 1);
        let len = encode_successor(&s, n, plan.writer, &keep, plan.add_reader, into.as_mut())?;
        let draft = Draft {
            at: other,
            len,
            built_on: held.len,
            n,
        };
        match plan.step {
            Step::Wait => Ok(Some(false)),
            Step::Evict => {
                self.commit_evicting(files, env, draft, false)?;
                Ok(Some(false))
            }
            Step::Commit { grant } => match self.commit_evicting(files, env, draft, grant)? {
                true => {
                    if grant {
                        p.generation = Some(n);
                    }
                    Ok(Some(grant))
                }
                false => Ok(None),
            },
        }
    }

    /// Commits the successor; once won, the records of the members the
    /// attempt found stale go (PROTOCOL 16.7). A log whose `gen/` was
    /// removed is prepared again (filelock's long-lived instances wedge
    /// there until a new one prepares it: C-RW7).
    fn commit_evicting(
        &mut self,
        files: &mut impl Files,
        env: &mut impl Env,
        draft: Draft,
        grant: bool,
    ) -> Result<bool, Error> {
        match self.commit(files, env, draft, grant)? {
            Committed::Won => {}
            Committed::Lost => return Ok(false),
            Committed::NoLog => {
                if !active(Mutant::RwNoReprepare) {
                    files.prepare(true)?;
                }
                return Ok(false);
            }
        }
        let held = self.held()?;
        let Instance {
            bufs,
            ledger,
            stale,
            ..
        } = self;
        let s = parsed(bufs.snapshots[held.at].as_ref(), &held)?;
        let writer = s.writer.filter(|_| bit(stale, 0));
        let readers = s.readers().enumerate();
        let readers = readers.filter(|(i, _)| bit(stale, i + 1)).map(|(_, t)| t);
        for t in writer.into_iter().chain(readers) {
            files.unlink(HOLDERS, &t.hex())?;
            ledger.forget(&super::Key::Member(t));
        }
        Ok(true)
    }

    /// One heartbeat of a hold (PROTOCOL 16.8 step 2): refresh the record,
    /// then look for ourselves in the latest snapshot (and sweep). The
    /// caller feeds the answer to a
    /// [`BeatWatch`](crate::rw::member::BeatWatch).
    pub fn heartbeat(
        &mut self,
        files: &mut impl Files,
        env: &mut impl Env,
        p: &mut Participant,
    ) -> Beat {
        let refreshed = match self.refresh(files, env, p) {
            Ok(true) => Refreshed::Yes,
            Ok(false) | Err(FsError::TreeReplaced { .. }) => Refreshed::Gone,
            Err(FsError::Os(e) | FsError::NoHardLinks(e)) => Refreshed::Failed(e),
            Err(FsError::LinkNotOneFile) => Refreshed::Failed(Errno::NOTSUP),
        };
        if refreshed != Refreshed::Yes {
            return beat(refreshed, None);
        }
        let named = match self.latest(files, env) {
            Ok(_) => match self.sweep(files, env, p) {
                Ok(()) => self.snapshot().map(|s| s.is_member(&p.token)),
                Err(_) => None,
            },
            Err(_) => None,
        };
        beat(refreshed, named)
    }

    /// Ends an acquisition (PROTOCOL 16.6, `leave`): commits the log
    /// without this participant (evicting nobody, touching no other
    /// token) until it is no member, then removes its record. For a
    /// release, and for an acquire that gives up or failed. A tree that
    /// was replaced leaves nothing this participant can reach: not an
    /// error.
    pub fn leave(
        &mut self,
        files: &mut impl Files,
        env: &mut impl Env,
        p: &mut Participant,
    ) -> Result<(), Error> {
        let out = self.leave_log(files, env, p);
        p.generation = None;
        let removed = files.unlink(HOLDERS, &p.token.hex());
        match out.and(removed.map_err(Error::from)) {
            Err(Error::Fs(FsError::TreeReplaced { .. })) => Ok(()),
            other => other,
        }
    }

    /// An operator's break (PROTOCOL 16.10): commits the latest snapshot
    /// without the members in `gone`, as a contender's eviction is made,
    /// reading again after a lost commit, and once it is won removes their
    /// records and their ledger entries. No participant: it keeps no record
    /// and grants nothing. The generation of its commit, or of a latest
    /// snapshot that already names none of them; 0 when the log is gone.
    pub fn evict(
        &mut self,
        files: &mut impl Files,
        env: &mut impl Env,
        gone: &[Token],
    ) -> Result<u128, Error> {
        loop {
            let generation = self.latest(files, env)?;
            let held = self.held()?;
            let n = generation + 1;
            let [first, second] = &mut self.bufs.snapshots;
            let (from, into) = match held.at {
                0 => (&*first, second),
                _ => (&*second, first),
            };
            let s = parsed(from.as_ref(), &held)?;
            if !gone.iter().any(|t| s.is_member(t)) {
                return Ok(generation);
            }
            let writer = s.writer.filter(|w| !gone.contains(w));
            let keep = |_: usize, t: &Token| !gone.contains(t);
            let len = encode_successor(&s, n, writer, &keep, None, into.as_mut())?;
            let draft = Draft {
                at: 1 - held.at,
                len,
                built_on: held.len,
                n,
            };
            match self.commit(files, env, draft, false)? {
                Committed::Won => {
                    for t in gone {
                        files.unlink(HOLDERS, &t.hex())?;
                        self.ledger.forget(&super::Key::Member(*t));
                    }
                    return Ok(n);
                }
                Committed::Lost => {}
                Committed::NoLog => return Ok(0),
            }
        }
    }

    fn leave_log(
        &mut self,
        files: &mut impl Files,
        env: &mut impl Env,
        p: &Participant,
    ) -> Result<(), Error> {
        loop {
            self.latest(files, env)?;
            let held = self.held()?;
            let n = held.generation + 1;
            let [first, second] = &mut self.bufs.snapshots;
            let (from, into) = match held.at {
                0 => (&*first, second),
                _ => (&*second, first),
            };
            let s = parsed(from.as_ref(), &held)?;
            let Some(writer) = leave(&s, &p.token) else {
                return Ok(());
            };
            let keep = |_: usize, t: &Token| *t != p.token;
            let len = encode_successor(&s, n, writer, &keep, None, into.as_mut())?;
            let draft = Draft {
                at: 1 - held.at,
                len,
                built_on: held.len,
                n,
            };
            match self.commit(files, env, draft, false)? {
                Committed::Won => return Ok(()),
                Committed::Lost => {}
                // No log: nothing names us any more.
                Committed::NoLog => return Ok(()),
            }
        }
    }
}
