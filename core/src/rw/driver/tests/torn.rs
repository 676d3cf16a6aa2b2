//! An epoch that holds no token (a creator killed between its in-place
//! create and its write, as filelock makes it): HEAD bound to its exact
//! bytes, for swaplock alone, as a sign that the log is not new and never
//! as a generation to start from; a HEAD written into a log made again
//! since, removed; and swaplock's own epoch, linked whole (PROTOCOL 16.9).

use super::review::commit_next;
use super::*;
use crate::rw::record;

/// A log run by swaplock participants under an epoch that holds no token
/// (`epoch` bytes), compacted past its first window: 140 commits.
pub(super) fn torn_log_at_140(epoch: &[u8]) -> (Mem, Clock) {
    let mut fs = Mem::default();
    let mut env = Clock::new();
    fs.prepare(false).unwrap();
    fs.create(Area::Generations, b"epoch", epoch, true).unwrap();
    let mut live = lock(90.0);
    for _ in 0..140 {
        assert_eq!(
            commit_next(&mut live, &mut fs, &mut env, None),
            commit::Committed::Won
        );
    }
    assert!(fs.gen(64).is_none(), "compacted past the probe");
    (fs, env)
}

#[test]
fn a_client_with_a_stale_listing_never_commits_generation_one_beside_a_log_whose_epoch_is_torn() {
    // Under an epoch without a token filelock never writes or trusts HEAD,
    // and its confirmation's empty HEAD reads as torn: a client whose
    // listing of gen/ is stale would take the live log for new and commit
    // generation 1 beside it. swaplock's commits bind HEAD to the torn
    // epoch's exact bytes, so the blind client's first commit finds the log
    // not new, and it joins the log once its listing shows it.
    for torn in [&b""[..], b"5e210ab5", b"5e210ab54e14cb9b9798c552ff0af2d"] {
        let (mut fs, mut env) = torn_log_at_140(torn);
        let head = fs.get(Area::Generations, HEAD).unwrap().clone();
        assert_eq!(head, [torn, fs.gen(140).unwrap().as_bytes()].concat());
        assert_eq!(record::head_generation(&head, Some(torn)), None);
        fs.blind_listing = true;
        let mut blind = lock(90.0);
        let mut w = blind.publish(&mut fs, &mut env, Mode::Write).unwrap();
        for _ in 0..3 {
            assert_eq!(blind.advance(&mut fs, &mut env, &mut w), Ok(false));
        }
        assert!(fs.gen(1).is_none(), "generation 1 beside the live log");
        fs.blind_listing = false;
        assert_eq!(blind.advance(&mut fs, &mut env, &mut w), Ok(true));
        assert_eq!(w.generation(), Some(141), "joined the live log");
    }
}

#[test]
fn the_epoch_is_linked_whole_never_created_in_place() {
    // Killed between an in-place create and its write, a creator would
    // leave an epoch without a token for good (filelock does): the epoch
    // is a temporary holding a valid one, linked to its name.
    let mut fs = Mem::default();
    let mut env = Clock::new();
    fs.prepare(false).unwrap();
    fs.before_link = Some(|m: &mut Mem| {
        assert!(
            m.get(Area::Generations, b"epoch").is_none(),
            "made in place"
        );
        let temps: Vec<Vec<u8>> = m
            .names
            .iter()
            .filter(|((a, n), _)| *a == 0 && crate::rw::names::is_temporary_name(n))
            .filter_map(|(_, ino)| m.inodes.get(ino).map(|(d, _)| d.clone()))
            .collect();
        assert!(temps.iter().all(|t| crate::rw::record::is_valid_epoch(t)));
        assert_eq!(temps.len(), 1);
    });
    let mut l = lock(90.0);
    let mut w = l.publish(&mut fs, &mut env, Mode::Write).unwrap();
    assert_eq!(l.advance(&mut fs, &mut env, &mut w), Ok(true));
    let epoch = fs.get(Area::Generations, b"epoch").unwrap().clone();
    assert!(crate::rw::record::is_valid_epoch(&epoch));
    assert_eq!(l.epoch(), Some(&epoch[..]));
    assert_eq!(w.generation(), Some(1));
}

#[test]
fn a_blind_confirmation_is_lost_under_a_head_bound_to_a_torn_epoch() {
    // A blind client that reached the commit of generation 1 all the same
    // (its read of HEAD answered from a cache older than HEAD): the
    // exclusive create finds HEAD, bound to the torn epoch, and the commit
    // is lost.
    let (mut fs, _) = torn_log_at_140(b"");
    let mut blind = lock(90.0);
    blind.epoch = Some(Epoch::of(b""));
    assert_eq!(
        blind.confirm_new_log(&mut fs).map(|(c, _)| c),
        Ok(commit::Committed::Lost)
    );
}

#[test]
fn an_empty_head_under_a_torn_epoch_is_replaced_by_the_next_commit() {
    // A log a confirmation started (its empty HEAD) while the epoch held no
    // token, then run by peers that never write HEAD there (filelock): the
    // first commit of swaplock binds HEAD to the torn epoch.
    let mut fs = Mem::default();
    let mut env = Clock::new();
    fs.prepare(false).unwrap();
    fs.create(Area::Generations, b"epoch", b"", true).unwrap();
    fs.create(Area::Generations, HEAD, b"", false).unwrap();
    let body = b"filelock-rw/1\ngeneration=1\n";
    let name = generation_name(1).unwrap();
    fs.create(Area::Generations, &name, body, true).unwrap();
    let mut l = lock(90.0);
    assert_eq!(
        commit_next(&mut l, &mut fs, &mut env, None),
        commit::Committed::Won
    );
    let head = fs.get(Area::Generations, HEAD).unwrap().clone();
    assert_eq!(head, fs.gen(2).unwrap().as_bytes());
}

// The adversarial review of the binding: a HEAD that lags without bound
// (only swaplock moves it under a torn epoch), and one written into a log
// made again, whose torn epoch is the same bytes.

/// A live writer of the log filelock peers advance (below).
const FILELOCK_WRITER: Token = Token([0x77; 16]);

/// filelock peers commit `from..=to` under a torn epoch: they never write
/// HEAD there (PROTOCOL 16.9), and compact a window and one behind each
/// commit. The last generation names a live writer.
fn filelock_commits(fs: &mut Mem, from: u128, to: u128) {
    for g in from..=to {
        let body = match g == to {
            true => std::format!(
                "filelock-rw/1\ngeneration={g}\nwriter={}\n",
                hex(FILELOCK_WRITER)
            ),
            false => std::format!("filelock-rw/1\ngeneration={g}\n"),
        };
        fs.create(
            Area::Generations,
            &generation_name(g).unwrap(),
            body.as_bytes(),
            true,
        )
        .unwrap();
        if g > 65 {
            fs.drop_name(Area::Generations, &generation_name(g - 65).unwrap());
        }
    }
}

/// The setting of the test below: a swaplock log at 140 under an empty
/// epoch (HEAD bound there); a client that read it at 160 and remembers it;
/// filelock peers on to 240 (compacting through 175), the last naming a
/// live writer; and the leftover of a committer B that read 139, built 140
/// and was stopped across the window, linked into 140's compacted slot
/// (which B removes only after its own look at the log).
fn lagging_head_and_a_leftover(returning: &mut Lock) -> (Mem, Clock) {
    let (mut fs, mut env) = torn_log_at_140(b"");
    filelock_commits(&mut fs, 141, 160);
    assert_eq!(returning.latest(&mut fs, &mut env), Ok(160));
    filelock_commits(&mut fs, 161, 240);
    assert!(fs.gen(140).is_none() && fs.gen(160).is_none(), "compacted");
    fs.create(
        Area::Generations,
        &generation_name(140).unwrap(),
        b"filelock-rw/1\ngeneration=140\n",
        true,
    )
    .unwrap();
    (fs, env)
}

#[test]
fn a_client_is_never_granted_from_a_leftover_in_a_lagging_heads_slot() {
    // Under a torn epoch only swaplock moves HEAD; with filelock peers doing
    // the commits it lags the log by any number of windows. A client whose
    // listing of gen/ is stale (C-RW1) that started a probe of patience 1
    // from HEAD's 140 would read B's leftover there, take 140 for the
    // latest and commit 141 into the compacted slot beside the live writer
    // at 240. HEAD names no generation under a torn epoch: the returning
    // client probes from its remembered 160 across the gap to 240, and a
    // fresh one, finding nothing, is refused generation 1 by HEAD.
    let mut returning = lock(90.0);
    let (mut fs, mut env) = lagging_head_and_a_leftover(&mut returning);
    let head = fs.get(Area::Generations, HEAD).unwrap().clone();
    assert!(record::head_record(&head, Some(b"")).is_some(), "bound");
    assert_eq!(record::head_generation(&head, Some(b"")), None);
    fs.blind_listing = true;
    let live = parse_snapshot(fs.gen(240).unwrap().as_bytes())
        .unwrap()
        .writer;
    assert_eq!(live, Some(FILELOCK_WRITER), "the live writer at 240");
    let mut w = returning.publish(&mut fs, &mut env, Mode::Write).unwrap();
    assert_eq!(returning.advance(&mut fs, &mut env, &mut w), Ok(false));
    assert_eq!(returning.held().unwrap().generation, 240, "the live log");
    let mut fresh = lock(90.0);
    let mut f = fresh.publish(&mut fs, &mut env, Mode::Write).unwrap();
    assert_eq!(fresh.advance(&mut fs, &mut env, &mut f), Ok(false));
    assert!(
        fs.gen(141).is_none() && fs.gen(1).is_none(),
        "no second writer"
    );
}

/// [`Mem`] with hooks where a committer may be stopped while its peers act:
/// at its grant's `sync` of gen/ (between its win and its move of HEAD),
/// and just before or just after its rename onto HEAD. Each runs once.
pub(super) struct Hooked<'a> {
    pub(super) fs: &'a mut Mem,
    pub(super) on_sync: Option<fn(&mut Mem)>,
    pub(super) before_head: Option<fn(&mut Mem)>,
    pub(super) after_head: Option<fn(&mut Mem)>,
}

impl<'a> Hooked<'a> {
    pub(super) fn new(fs: &'a mut Mem) -> Self {
        Hooked {
            fs,
            on_sync: None,
            before_head: None,
            after_head: None,
        }
    }
}

impl Files for Hooked<'_> {
    fn prepare(&mut self, force: bool) -> Result<(), FsError> {
        self.fs.prepare(force)
    }
    fn read(&mut self, a: Area, name: &[u8], buf: &mut [u8]) -> Result<Read, FsError> {
        self.fs.read(a, name, buf)
    }
    fn create(&mut self, a: Area, name: &[u8], data: &[u8], d: bool) -> Result<FileId, FsError> {
        self.fs.create(a, name, data, d)
    }
    fn overwrite(&mut self, a: Area, n: &[u8], data: &[u8], id: FileId) -> Result<bool, FsError> {
        self.fs.overwrite(a, n, data, id)
    }
    fn link(&mut self, a: Area, from: &[u8], to: &[u8]) -> Result<bool, FsError> {
        self.fs.link(a, from, to)
    }
    fn replace(&mut self, a: Area, from: &[u8], to: &[u8]) -> Result<bool, FsError> {
        let head = to == HEAD;
        if let Some(peers) = self.before_head.take_if(|_| head) {
            peers(self.fs);
        }
        let out = self.fs.replace(a, from, to);
        if let Some(peers) = self.after_head.take_if(|_| head) {
            peers(self.fs);
        }
        out
    }
    fn unlink(&mut self, a: Area, name: &[u8]) -> Result<(), FsError> {
        self.fs.unlink(a, name)
    }
    fn list(&mut self, a: Area, visit: &mut dyn FnMut(&[u8])) -> Result<(), FsError> {
        self.fs.list(a, visit)
    }
    fn sync(&mut self, a: Area) -> Result<(), FsError> {
        if let Some(peers) = self.on_sync.take() {
            peers(self.fs);
        }
        self.fs.sync(a)
    }
}

/// The log at 140 under an empty epoch; a writer wins 141 and is stopped
/// at its grant's sync, before its move of HEAD, while an operator removes
/// gen/ and a filelock peer makes the log again and is killed between its
/// create of the epoch and its write. Then three swaplock readers of the
/// new log, ten minutes apart: what each advance answered.
fn late_head_into_a_log_made_again_under_a_torn_epoch() -> (Mem, Vec<Result<bool, Error>>) {
    let (mut fs, mut env) = torn_log_at_140(b"");
    let mut p = lock(90.0);
    {
        let mut hooked = Hooked::new(&mut fs);
        hooked.on_sync = Some(|fs: &mut Mem| {
            let names: Vec<Vec<u8>> = fs
                .names
                .keys()
                .filter(|(a, _)| *a == 0)
                .map(|(_, n)| n.clone())
                .collect();
            for n in names {
                fs.drop_name(Area::Generations, &n);
            }
            fs.create(Area::Generations, b"epoch", b"", true).unwrap();
        });
        let mut w = p.publish(&mut hooked, &mut env, Mode::Write).unwrap();
        assert_eq!(p.advance(&mut hooked, &mut env, &mut w), Ok(true));
        assert!(hooked.on_sync.is_none(), "stopped at its sync");
        assert_eq!(w.generation(), Some(141));
    }
    assert!(
        fs.generations().is_empty(),
        "the new log holds no generation"
    );
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        env.pass(Duration::from_secs(600));
        let mut q = lock(90.0);
        let mut r = q.publish(&mut fs, &mut env, Mode::Read).unwrap();
        outcomes.push(q.advance(&mut fs, &mut env, &mut r));
    }
    (fs, outcomes)
}

#[test]
fn a_head_written_late_into_a_log_made_again_under_the_same_torn_bytes_waits_for_its_removal() {
    // Left open (PROTOCOL 16.9): the stopped writer's check that the
    // epoch is unchanged passes (both empty), and its rename puts HEAD,
    // bound to the empty bytes, into the new log, where it keeps every
    // first commit of swaplock's out. Taking it back after a look at the
    // log cannot tell this log from the same log a window on, where
    // removing HEAD lets a blind client in (torn_review.rs); filelock peers
    // start the log regardless, and an operator's removal of gen/HEAD lets
    // swaplock's start it.
    let (mut fs, outcomes) = late_head_into_a_log_made_again_under_a_torn_epoch();
    assert_eq!(outcomes, [Ok(false), Ok(false), Ok(false)]);
    let head = fs.get(Area::Generations, HEAD).unwrap().clone();
    assert!(record::head_record(&head, Some(b"")).is_some());
    fs.drop_name(Area::Generations, HEAD);
    let mut env = Clock::new();
    let mut q = lock(90.0);
    let mut r = q.publish(&mut fs, &mut env, Mode::Read).unwrap();
    assert_eq!(q.advance(&mut fs, &mut env, &mut r), Ok(true));
    assert_eq!(r.generation(), Some(1));
}
