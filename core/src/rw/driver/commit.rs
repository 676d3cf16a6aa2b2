//! Committing the next generation (PROTOCOL 16.5): the checks before, the
//! publication by a no-replace link, the checks after, HEAD and
//! compaction; and encoding the successor it publishes.

use super::{gen_name, Env, Epoch, Error, Instance, Ledger};
use crate::decide::FileId;
use crate::errno::Errno;
use crate::mutant::{active, Mutant};
use crate::names::Token;
use crate::rw::files::{missing, Area, Files, FsError, Read};
use crate::rw::log::{after_link, extends, head_due, Compaction, Landed};
use crate::rw::names::{temporary_name, HEAD, MAX_RECORD};
use crate::rw::record::{
    head_record, is_valid_epoch, parse_generation, Invalid, Snapshot, SnapshotRecord, EPOCH_LEN,
};

const GEN: Area = Area::Generations;

/// What a commit came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub(super) enum Committed {
    /// The generation is ours.
    Won,
    /// A peer's commit, or a check, stood in the way: read again.
    Lost,
    /// `gen/` is gone (the log was removed): prepare it again, then read.
    NoLog,
}

/// A successor ready to commit: encoded in snapshot buffer `at` (after
/// the epoch's room, `len` bytes) as generation `n`, built on the latest
/// snapshot read, which the other buffer holds (`built_on` bytes).
#[derive(Clone, Copy, Debug)]
pub(super) struct Draft {
    pub(super) at: usize,
    pub(super) len: usize,
    pub(super) built_on: usize,
    pub(super) n: u128,
}

/// The length of a reader's line: `reader=`, 32 hex digits, `\n`.
const READER_LINE: usize = 40;

/// Sorts the `width`-byte lines of `lines` in place (heapsort: no
/// allocation, and no quadratic case for a record of thousands of readers
/// written out of order by hand).
fn sort_lines(lines: &mut [u8], width: usize) {
    let n = lines.len() / width;
    let less = |l: &[u8], i: usize, j: usize| {
        l[i * width..(i + 1) * width] < l[j * width..(j + 1) * width]
    };
    let swap = |l: &mut [u8], i: usize, j: usize| {
        if i != j {
            let (lo, hi) = (i.min(j), i.max(j));
            let (a, b) = l.split_at_mut(hi * width);
            a[lo * width..(lo + 1) * width].swap_with_slice(&mut b[..width]);
        }
    };
    let sift = |l: &mut [u8], mut root: usize, end: usize| loop {
        let mut child = 2 * root + 1;
        if child >= end {
            return;
        }
        if child + 1 < end && less(l, child, child + 1) {
            child += 1;
        }
        if !less(l, root, child) {
            return;
        }
        swap(l, root, child);
        root = child;
    };
    for start in (0..n / 2).rev() {
        sift(lines, start, n);
    }
    for end in (1..n).rev() {
        swap(lines, 0, end);
        sift(lines, 0, end);
    }
}

/// Encodes the successor of `s` at generation `n` into `out`, after room
/// for the epoch ([`EPOCH_LEN`] bytes, for HEAD): `writer`, the readers of
/// `s` that `keep` accepts (by their index in the record), and `add`;
/// readers ascending, as filelock writes them. Its length. The record is
/// parsed back before it is returned (RW2: nothing a reader would refuse
/// is ever published).
pub(super) fn encode_successor(
    s: &Snapshot<'_>,
    n: u128,
    writer: Option<Token>,
    keep: &dyn Fn(usize, &Token) -> bool,
    add: Option<Token>,
    out: &mut [u8],
) -> Result<usize, Error> {
    let out = out
        .get_mut(EPOCH_LEN..)
        .ok_or(Error::Encode(Invalid::BufferTooSmall(EPOCH_LEN)))?;
    let header = SnapshotRecord {
        generation: n,
        writer,
        readers: &[],
    };
    let mut len = header.encode(out).map_err(|why| match why {
        // Past 20 digits: the log is spent, whatever its members.
        Invalid::Generation => Error::Exhausted,
        other => Error::Encode(other),
    })?;
    let first = len;
    let kept = s
        .readers()
        .enumerate()
        .filter(|(i, t)| keep(*i, t))
        .map(|(_, t)| t);
    for t in kept.chain(add) {
        let line = out
            .get_mut(len..len + READER_LINE)
            .ok_or(Error::Encode(Invalid::BufferTooSmall(len + READER_LINE)))?;
        line[..7].copy_from_slice(b"reader=");
        line[7..39].copy_from_slice(&t.hex());
        line[39] = b'\n';
        len += READER_LINE;
    }
    sort_lines(&mut out[first..len], READER_LINE);
    if len > MAX_RECORD {
        return Err(Error::Encode(Invalid::TooLong));
    }
    match parse_generation(&out[..len], n) {
        Ok(_) => Ok(len),
        // A repeated reader: never by the decisions (a participant that
        // adds itself is not named), but refused all the same.
        Err(_) => Err(Error::Encode(Invalid::Readers)),
    }
}

impl<L: Ledger, B: AsMut<[u8]> + AsRef<[u8]>> Instance<L, B> {
    /// Whether the predecessor of `n` is still the very record the
    /// successor in snapshot buffer `at` was built on (the other buffer
    /// holds it, `built_on` bytes): filelock asks only that it exist, which
    /// a log removed and grown again to the same generation also passes
    /// (PROTOCOL 16, "Where swaplock is stricter"). For the first, there is
    /// none to ask about.
    fn predecessor(
        &mut self,
        files: &mut impl Files,
        n: u128,
        at: usize,
        built_on: usize,
    ) -> Result<bool, Error> {
        if n <= 1 {
            return Ok(false);
        }
        let Some(len) = self.read_scratch(files, GEN, &gen_name(n - 1)?)? else {
            return Ok(false);
        };
        let read = &self.bufs.snapshots[1 - at].as_ref()[..built_on];
        Ok(self.scratch(len) == read || active(Mutant::RwPredecessorByName))
    }

    /// Whether the first generation may be committed: the server says no
    /// HEAD exists (an exclusive create, answered by the server, where a
    /// listing or a lookup may be a client's stale cache: C-RW1), or the
    /// HEAD there is not bound to our epoch. The empty HEAD it may leave
    /// reads as a torn one to every reader, and the first commit's HEAD
    /// replaces it. With it, the identity of the HEAD it created, which the
    /// commit asks again after its link.
    pub(super) fn confirm_new_log(
        &mut self,
        files: &mut impl Files,
    ) -> Result<(Committed, Option<FileId>), Error> {
        match files.create(GEN, HEAD, b"", false) {
            Ok(id) => Ok((Committed::Won, Some(id))),
            Err(FsError::Os(e)) if e == Errno::EXIST => {
                let epoch = self.epoch.as_ref().and_then(Epoch::bytes);
                let buf = self.bufs.scratch.as_mut();
                let room = buf.len().min(crate::rw::names::READ_LIMIT);
                let verdict = match files.read(GEN, HEAD, &mut buf[..room])? {
                    Read::Bytes(n) if head_record(&buf[..n.min(room)], epoch).is_none() => {
                        Committed::Won
                    }
                    // Bound to this epoch, or one this client cannot see
                    // yet.
                    _ => Committed::Lost,
                };
                Ok((verdict, None))
            }
            Err(FsError::Os(e)) if missing(e) => Ok((Committed::NoLog, None)),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether the log is still new once generation 1 is linked: the HEAD
    /// this commit's confirmation created is still the file at `HEAD`
    /// (asked through the rewrite's open, which checks the identity and
    /// goes to the server). Any commit since would have replaced it: a
    /// participant stopped between its confirmation and its link while
    /// the log moved a window on (compacting generation 1) finds it
    /// replaced, where its listing, a stale cache, may show no lead.
    fn still_new(
        &mut self,
        files: &mut impl Files,
        confirmed: Option<FileId>,
    ) -> Result<bool, Error> {
        match confirmed {
            Some(id) if !active(Mutant::RwNoNewLogRecheck) => {
                Ok(files.overwrite(GEN, HEAD, b"", id)?)
            }
            _ => Ok(true),
        }
    }

    /// Commits `draft` (PROTOCOL 16.5). `grant`: winning it grants a hold,
    /// so its link is made durable before it counts (C-RW5).
    pub(super) fn commit(
        &mut self,
        files: &mut impl Files,
        env: &mut impl Env,
        draft: Draft,
        grant: bool,
    ) -> Result<Committed, Error> {
        let Draft {
            at,
            len,
            built_on,
            n,
        } = draft;
        let target = gen_name(n)?;
        // 1. The same incarnation (RW10), and a predecessor (RW11).
        if !active(Mutant::RwCommitIgnoresEpoch) && self.epoch_now(files)? != self.epoch {
            return Ok(Committed::Lost);
        }
        let before =
            self.predecessor(files, n, at, built_on)? || active(Mutant::RwNoPredecessorBefore);
        let bound = n == 1 && self.head(files)?.0;
        if !extends(n, before, bound) {
            return Ok(Committed::Lost);
        }
        let mut confirmed = None;
        if n == 1 && !active(Mutant::RwNoNewLogConfirm) {
            match self.confirm_new_log(files)? {
                (Committed::Won, id) => confirmed = id,
                (other, _) => return Ok(other),
            }
        }
        // 2. The record complete and on disk before its name (RW2), and
        // the link as the compare-and-swap (RW1), decided by identity (RW3).
        let temp = temporary_name(&env.token());
        let data = &self.bufs.snapshots[at].as_ref()[EPOCH_LEN..EPOCH_LEN + len];
        match files.create(GEN, &temp, data, true) {
            Ok(_) => {}
            Err(FsError::Os(e)) if missing(e) => return Ok(Committed::NoLog),
            Err(e) => return Err(e.into()),
        }
        let linked = files.link(GEN, &temp, &target);
        let _ = files.unlink(GEN, &temp);
        match linked {
            Ok(true) => {}
            Ok(false) => return Ok(Committed::Lost),
            // The call made the name, and the name shows another file now:
            // a filesystem that shows a hard link's names as two files
            // (sshfs), or a peer's link made there since ours was removed
            // (a committer stopped for a window of commits, a log wiped in
            // place). The bytes tell: a peer's record never equals ours,
            // which names our fresh token, one no peer adds (PROTOCOL
            // 16.9). Ours: removed, so that no peer reads it, and the
            // filesystem refused. A peer's: a lost commit, left alone.
            Err(FsError::LinkNotOneFile) => {
                let ours = match self.read_scratch(files, GEN, &target) {
                    Ok(Some(n)) => {
                        let data = &self.bufs.snapshots[at].as_ref()[EPOCH_LEN..EPOCH_LEN + len];
                        self.scratch(n) == data
                    }
                    Ok(None) | Err(_) => false,
                };
                if !ours {
                    return Ok(Committed::Lost);
                }
                let _ = files.unlink(GEN, &target);
                return Err(FsError::LinkNotOneFile.into());
            }
            // The temporary was swept from under a stalled commit (C-RW6),
            // or `gen/` went: either way not ours.
            Err(FsError::Os(e)) if missing(e) && !active(Mutant::RwSweptTempIsError) => {
                return Ok(Committed::Lost)
            }
            Err(e) => return Err(e.into()),
        }
        // 3. Nobody leads by a window, and the predecessor survived (RW11).
        let listed_max = Self::listed_max(files)?;
        let (bound, head) = self.head(files)?;
        let still = match n {
            1 => self.still_new(files, confirmed)?,
            _ => self.predecessor(files, n, at, built_on)? || active(Mutant::RwNoPredecessorAfter),
        };
        let (listed_max, head) = match active(Mutant::RwNoLeadCheck) {
            true => (None, None),
            false => (listed_max, head),
        };
        // The first generation has no predecessor: its confirmation's HEAD
        // stands for one.
        let extended = extends(n, still, bound) && (n > 1 || still);
        if let Landed::Lost { remove } = after_link(n, listed_max, head, extended) {
            if remove {
                files.unlink(GEN, &target)?;
            }
            return Ok(Committed::Lost);
        }
        // 4. Ours.
        self.remembered = n;
        // The link of a generation handed out as a fencing token outlives a
        // crash of this host (C-RW5): a later commit cannot reuse it.
        if grant && !active(Mutant::RwNoSyncBeforeGrant) {
            files.sync(GEN)?;
        }
        // 5. HEAD, forward only (RW13); a failure costs readers a probe.
        let _ = self.move_head(files, env, at, len, n);
        // 6. Compaction, oldest first (RW12); what it leaves, the next does.
        let _ = self.compact(files, n);
        Ok(Committed::Won)
    }

    /// Renames a temporary holding the epoch and the snapshot just won over
    /// HEAD, if it is due (PROTOCOL 16.5 step 5, RW13).
    fn move_head(
        &mut self,
        files: &mut impl Files,
        env: &mut impl Env,
        at: usize,
        len: usize,
        n: u128,
    ) -> Result<(), Error> {
        let Some(epoch) = self.epoch else {
            return Ok(());
        };
        // A torn epoch binds HEAD too, for swaplock's readers only
        // (PROTOCOL 16.9): filelock's ignore it.
        let bindable = |e: &&[u8]| is_valid_epoch(e) || !active(Mutant::RwTornEpochUnbound);
        let Some(bytes) = epoch.bytes().filter(bindable) else {
            return Ok(());
        };
        let unchanged = self.epoch_now(files)? == Some(epoch);
        let head = match active(Mutant::RwHeadOverNewer) {
            true => None,
            false => self.head(files)?.1,
        };
        if !head_due(true, unchanged, head, n) {
            return Ok(());
        }
        let buf = self.bufs.snapshots[at].as_mut();
        let from = EPOCH_LEN - bytes.len();
        buf[from..EPOCH_LEN].copy_from_slice(bytes);
        let temp = temporary_name(&env.token());
        files.create(GEN, &temp, &buf[from..EPOCH_LEN + len], false)?;
        let placed = files.replace(GEN, &temp, HEAD);
        let _ = files.unlink(GEN, &temp);
        placed?;
        Ok(())
    }

    /// Removes the generations a window and one behind `n`, oldest first
    /// (PROTOCOL 16.5 step 6, RW12).
    fn compact(&mut self, files: &mut impl Files, n: u128) -> Result<(), Error> {
        let Some(mut c) = Compaction::after(n) else {
            return Ok(());
        };
        while let Some(g) = c.ask() {
            let yes = self.exists(files, g)?;
            c.exists(yes);
        }
        match active(Mutant::RwCompactNewestFirst) {
            true => {
                for g in c.range().rev() {
                    files.unlink(GEN, &gen_name(g)?)?;
                }
            }
            false => {
                for g in c.range() {
                    files.unlink(GEN, &gen_name(g)?)?;
                }
            }
        }
        Ok(())
    }
}
