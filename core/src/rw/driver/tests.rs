//! The driver over an in-memory filesystem: the sequences filelock was
//! observed to write (PROTOCOL 16), eviction on the observer's clock, the
//! sweep, compaction, and where swaplock is stricter.

extern crate std;
use super::*;
use crate::decide::FileId;
use crate::errno::Errno;
use crate::rw::files::{Area, Files, FsError, Read};
use crate::rw::member::Beat;
use crate::rw::names::{generation_name, parse_generation_name, HEAD};
use crate::rw::record::{parse_snapshot, HolderRecord};
use crate::rw::Mode;
use std::collections::BTreeMap;
use std::string::String;
use std::vec;
use std::vec::Vec;

/// A filesystem in memory: names per directory, inodes with their bytes
/// and link counts, and counts of what was asked.
#[derive(Default)]
struct Mem {
    names: BTreeMap<(u8, Vec<u8>), u64>,
    inodes: BTreeMap<u64, (Vec<u8>, u32)>,
    next: u64,
    gen: bool,
    holders: bool,
    syncs: usize,
    links: usize,
    prepares: usize,
    /// Answers every listing of `gen/` with nothing (a stale cache).
    blind_listing: bool,
    /// Answers every read of HEAD as missing (a stale negative lookup).
    blind_head: bool,
    /// Answers a link that landed with `EEXIST` (an NFS retransmit).
    retransmit: bool,
    /// Runs before the next link: what peers do while the linker is
    /// stopped.
    before_link: Option<fn(&mut Mem)>,
    /// Runs after the next link made its name, before the two names'
    /// identities are taken: what peers do while the linker is stopped
    /// there.
    after_link: Option<fn(&mut Mem)>,
}

fn area(a: Area) -> u8 {
    match a {
        Area::Generations => 0,
        Area::Holders => 1,
    }
}

impl Mem {
    /// Makes the epoch, so that the next link a test watches is a
    /// commit's, not the epoch's.
    fn make_epoch(&mut self) {
        let epoch = crate::rw::record::encode_epoch(&Token([0xe0; 16]));
        self.create(Area::Generations, b"epoch", &epoch, true)
            .unwrap();
    }

    fn exists(&self, a: Area) -> bool {
        match a {
            Area::Generations => self.gen,
            Area::Holders => self.holders,
        }
    }

    fn get(&self, a: Area, name: &[u8]) -> Option<&Vec<u8>> {
        let ino = self.names.get(&(area(a), name.to_vec()))?;
        self.inodes.get(ino).map(|(d, _)| d)
    }

    fn generations(&self) -> Vec<u128> {
        self.names
            .keys()
            .filter(|(a, _)| *a == 0)
            .filter_map(|(_, n)| parse_generation_name(n))
            .collect()
    }

    fn gen(&self, n: u128) -> Option<String> {
        self.get(Area::Generations, &generation_name(n).unwrap())
            .map(|d| String::from_utf8(d.clone()).unwrap())
    }

    fn drop_name(&mut self, a: Area, name: &[u8]) -> bool {
        let Some(ino) = self.names.remove(&(area(a), name.to_vec())) else {
            return false;
        };
        if let Some(node) = self.inodes.get_mut(&ino) {
            node.1 -= 1;
            if node.1 == 0 {
                self.inodes.remove(&ino);
            }
        }
        true
    }

    fn count(&self, a: Area) -> usize {
        self.names.keys().filter(|(x, _)| *x == area(a)).count()
    }
}

fn id(ino: u64) -> FileId {
    FileId { dev: 1, ino }
}

impl Files for Mem {
    fn prepare(&mut self, force: bool) -> Result<(), FsError> {
        if self.prepares > 0 && !force {
            return Ok(());
        }
        self.prepares += 1;
        self.gen = true;
        self.holders = true;
        Ok(())
    }
    fn read(&mut self, a: Area, name: &[u8], buf: &mut [u8]) -> Result<Read, FsError> {
        if a == Area::Generations && name == HEAD && self.blind_head {
            return Ok(Read::Missing);
        }
        Ok(match self.get(a, name) {
            None => Read::Missing,
            Some(d) => {
                let n = d.len().min(buf.len());
                buf[..n].copy_from_slice(&d[..n]);
                Read::Bytes(n)
            }
        })
    }
    fn create(
        &mut self,
        a: Area,
        name: &[u8],
        data: &[u8],
        _durable: bool,
    ) -> Result<FileId, FsError> {
        if !self.exists(a) {
            return Err(FsError::Os(Errno::NOENT));
        }
        if self.names.contains_key(&(area(a), name.to_vec())) {
            return Err(FsError::Os(Errno::EXIST));
        }
        self.next += 1;
        self.inodes.insert(self.next, (data.to_vec(), 1));
        self.names.insert((area(a), name.to_vec()), self.next);
        Ok(id(self.next))
    }
    fn overwrite(
        &mut self,
        a: Area,
        name: &[u8],
        data: &[u8],
        want: FileId,
    ) -> Result<bool, FsError> {
        let Some(&ino) = self.names.get(&(area(a), name.to_vec())) else {
            return Ok(false);
        };
        let node = self.inodes.get_mut(&ino).unwrap();
        if id(ino) != want || node.1 != 1 {
            return Ok(false);
        }
        node.0 = data.to_vec();
        Ok(true)
    }
    fn link(&mut self, a: Area, from: &[u8], to: &[u8]) -> Result<bool, FsError> {
        if let Some(peers) = self.before_link.take() {
            peers(self);
        }
        self.links += 1;
        let Some(&ino) = self.names.get(&(area(a), from.to_vec())) else {
            return Err(FsError::Os(Errno::NOENT));
        };
        if self.names.contains_key(&(area(a), to.to_vec())) {
            return Ok(false);
        }
        self.names.insert((area(a), to.to_vec()), ino);
        self.inodes.get_mut(&ino).unwrap().1 += 1;
        if let Some(peers) = self.after_link.take() {
            peers(self);
        }
        let from_id = self.names.get(&(area(a), from.to_vec())).map(|&i| id(i));
        let to_id = self.names.get(&(area(a), to.to_vec())).map(|&i| id(i));
        let call = match self.retransmit {
            true => Err(Errno::EXIST),
            false => Ok(()),
        };
        crate::rw::files::link_outcome(call, from_id, to_id)
    }
    fn replace(&mut self, a: Area, from: &[u8], to: &[u8]) -> Result<bool, FsError> {
        let Some(ino) = self.names.remove(&(area(a), from.to_vec())) else {
            return Err(FsError::Os(Errno::NOENT));
        };
        self.drop_name(a, to);
        self.names.insert((area(a), to.to_vec()), ino);
        Ok(true)
    }
    fn unlink(&mut self, a: Area, name: &[u8]) -> Result<(), FsError> {
        self.drop_name(a, name);
        Ok(())
    }
    fn list(&mut self, a: Area, visit: &mut dyn FnMut(&[u8])) -> Result<(), FsError> {
        if a == Area::Generations && self.blind_listing {
            return Ok(());
        }
        for (_, n) in self.names.keys().filter(|(x, _)| *x == area(a)) {
            visit(n);
        }
        Ok(())
    }
    fn sync(&mut self, _: Area) -> Result<(), FsError> {
        self.syncs += 1;
        Ok(())
    }
}

/// A clock that moves only when told, and tokens from a counter.
struct Clock {
    now: u64,
    drawn: u64,
}

impl Env for Clock {
    fn now(&mut self) -> Instant {
        Instant(self.now)
    }
    fn token(&mut self) -> Token {
        self.drawn += 1;
        let mut t = [0u8; 16];
        t[8..].copy_from_slice(&self.drawn.to_be_bytes());
        t[0] = 0x5e;
        Token(t)
    }
}

impl Clock {
    fn new() -> Self {
        Clock {
            now: 1_000_000_000,
            drawn: 0,
        }
    }
    fn pass(&mut self, d: Duration) {
        self.now += d.as_nanos() as u64;
    }
}

type Lock = Instance<BoundedLedger<64>, Vec<u8>>;

fn lock(threshold: f64) -> Lock {
    let config = Config {
        threshold: Duration::from_secs_f64(threshold),
        max_lease: Duration::from_secs(24 * 3600),
        pid: Pid::new(4242).unwrap(),
        host: HostName::try_from("vm").unwrap(),
    };
    let buf = || vec![0u8; 4096];
    Instance::new(
        config,
        BoundedLedger::new(),
        Buffers::new(buf(), buf(), buf()),
    )
}

fn hex(t: Token) -> String {
    String::from_utf8(t.hex().to_vec()).unwrap()
}

#[test]
fn a_writer_on_a_new_log_is_granted_at_generation_one_and_leaves_at_two() {
    let (mut fs, mut env, mut l) = (Mem::default(), Clock::new(), lock(90.0));
    let mut w = l.publish(&mut fs, &mut env, Mode::Write).unwrap();
    assert!(
        fs.get(Area::Holders, &w.token().hex()).is_some(),
        "the record before any snapshot (RW6)"
    );
    assert_eq!(l.advance(&mut fs, &mut env, &mut w), Ok(true));
    assert_eq!(w.generation(), Some(1));
    assert_eq!(
        fs.gen(1).unwrap(),
        std::format!("filelock-rw/1\ngeneration=1\nwriter={}\n", hex(w.token()))
    );
    let epoch = fs.get(Area::Generations, b"epoch").unwrap().clone();
    assert_eq!(epoch.len(), 33);
    let head = fs.get(Area::Generations, HEAD).unwrap().clone();
    assert_eq!(head, [&epoch[..], fs.gen(1).unwrap().as_bytes()].concat());
    assert_eq!(fs.syncs, 1, "gen/ synced before the grant (C-RW5)");
    let record = fs.get(Area::Holders, &w.token().hex()).unwrap().clone();
    let expected = HolderRecord {
        token: w.token(),
        pid: Pid::new(4242).unwrap(),
        host: "vm",
        lease: 90.0,
        nonce: Token([0; 16]),
    };
    assert_eq!(record.len(), expected.encoded_len());
    assert!(record.starts_with(b"filelock-rw/1\ntoken="));
    l.leave(&mut fs, &mut env, &mut w).unwrap();
    assert_eq!(fs.gen(2).unwrap(), "filelock-rw/1\ngeneration=2\n");
    assert_eq!(fs.count(Area::Holders), 0);
    assert_eq!(w.generation(), None);
    assert_eq!(fs.syncs, 1, "a leave grants nothing");
    assert!(fs.names.keys().all(|(_, n)| !n.starts_with(b".commit-")));
}

#[test]
fn writer_preference_as_observed() {
    // Reader at 1, writer enters at 2, reader leaves at 3, writer granted
    // at 4 with the membership of 3, writer leaves at 5; a second reader
    // arriving meanwhile is kept out.
    let mut fs = Mem::default();
    let mut env = Clock::new();
    let (mut lr, mut lw, mut lr2) = (lock(90.0), lock(90.0), lock(90.0));
    let mut r = lr.publish(&mut fs, &mut env, Mode::Read).unwrap();
    assert_eq!(lr.advance(&mut fs, &mut env, &mut r), Ok(true));
    assert_eq!(r.generation(), Some(1));
    let mut w = lw.publish(&mut fs, &mut env, Mode::Write).unwrap();
    assert_eq!(lw.advance(&mut fs, &mut env, &mut w), Ok(false));
    let two = parse_snapshot(fs.gen(2).unwrap().as_bytes())
        .unwrap()
        .writer;
    assert_eq!(
        two,
        Some(w.token()),
        "the writer enters before the drain (RW5)"
    );
    let mut r2 = lr2.publish(&mut fs, &mut env, Mode::Read).unwrap();
    assert_eq!(lr2.advance(&mut fs, &mut env, &mut r2), Ok(false));
    lr2.leave(&mut fs, &mut env, &mut r2).unwrap();
    assert_eq!(
        fs.generations().iter().max(),
        Some(&2),
        "a refused reader commits nothing"
    );
    assert_eq!(
        lw.advance(&mut fs, &mut env, &mut w),
        Ok(false),
        "still a reader"
    );
    lr.leave(&mut fs, &mut env, &mut r).unwrap();
    assert_eq!(
        fs.gen(3).unwrap(),
        std::format!("filelock-rw/1\ngeneration=3\nwriter={}\n", hex(w.token()))
    );
    assert_eq!(lw.advance(&mut fs, &mut env, &mut w), Ok(true));
    assert_eq!(w.generation(), Some(4));
    assert_eq!(fs.gen(4).unwrap().replace("=4", "=3"), fs.gen(3).unwrap());
    lw.leave(&mut fs, &mut env, &mut w).unwrap();
    assert_eq!(fs.gen(5).unwrap(), "filelock-rw/1\ngeneration=5\n");
}

#[test]
fn readers_share_and_are_listed_sorted() {
    let mut fs = Mem::default();
    let mut env = Clock::new();
    let (mut a, mut b) = (lock(90.0), lock(90.0));
    let mut ra = a.publish(&mut fs, &mut env, Mode::Read).unwrap();
    let mut rb = b.publish(&mut fs, &mut env, Mode::Read).unwrap();
    assert_eq!(b.advance(&mut fs, &mut env, &mut rb), Ok(true));
    assert_eq!(a.advance(&mut fs, &mut env, &mut ra), Ok(true));
    let mut both = [hex(ra.token()), hex(rb.token())];
    both.sort();
    assert_eq!(
        fs.gen(2).unwrap(),
        std::format!(
            "filelock-rw/1\ngeneration=2\nreader={}\nreader={}\n",
            both[0],
            both[1]
        )
    );
}

#[test]
fn a_dead_writer_is_evicted_after_the_threshold_on_the_observers_clock() {
    let mut fs = Mem::default();
    let mut env = Clock::new();
    let (mut dead, mut live) = (lock(1.5), lock(1.5));
    let mut d = dead.publish(&mut fs, &mut env, Mode::Write).unwrap();
    assert_eq!(dead.advance(&mut fs, &mut env, &mut d), Ok(true));
    // The contender's clock starts at its own first look.
    env.pass(Duration::from_secs(100));
    let mut w = live.publish(&mut fs, &mut env, Mode::Write).unwrap();
    assert_eq!(live.advance(&mut fs, &mut env, &mut w), Ok(false));
    env.pass(Duration::from_millis(1400));
    assert_eq!(
        live.advance(&mut fs, &mut env, &mut w),
        Ok(false),
        "1.4 s of 1.5"
    );
    env.pass(Duration::from_millis(100));
    assert_eq!(live.advance(&mut fs, &mut env, &mut w), Ok(true));
    assert_eq!(
        w.generation(),
        Some(2),
        "evicted and granted in one generation"
    );
    assert!(
        fs.get(Area::Holders, &d.token().hex()).is_none(),
        "the evicted record goes"
    );
    // The dead one's heartbeat, were it only paused, finds it out.
    assert_eq!(dead.heartbeat(&mut fs, &mut env, &mut d), Beat::Lost);
}

#[test]
fn the_longer_lease_wins() {
    let mut fs = Mem::default();
    let mut env = Clock::new();
    let (mut holder, mut contender) = (lock(3.0), lock(1.0));
    let mut h = holder.publish(&mut fs, &mut env, Mode::Read).unwrap();
    assert_eq!(holder.advance(&mut fs, &mut env, &mut h), Ok(true));
    let mut w = contender.publish(&mut fs, &mut env, Mode::Write).unwrap();
    assert_eq!(contender.advance(&mut fs, &mut env, &mut w), Ok(false));
    env.pass(Duration::from_millis(2900));
    assert_eq!(contender.advance(&mut fs, &mut env, &mut w), Ok(false));
    env.pass(Duration::from_millis(100));
    assert_eq!(contender.advance(&mut fs, &mut env, &mut w), Ok(true));
}

#[test]
fn a_live_holder_that_heartbeats_is_never_evicted() {
    let mut fs = Mem::default();
    let mut env = Clock::new();
    let (mut holder, mut contender) = (lock(1.5), lock(1.5));
    let mut h = holder.publish(&mut fs, &mut env, Mode::Write).unwrap();
    assert_eq!(holder.advance(&mut fs, &mut env, &mut h), Ok(true));
    let mut w = contender.publish(&mut fs, &mut env, Mode::Write).unwrap();
    for _ in 0..40 {
        env.pass(Duration::from_millis(250));
        assert_eq!(contender.advance(&mut fs, &mut env, &mut w), Ok(false));
        env.pass(Duration::from_millis(250));
        assert_eq!(holder.heartbeat(&mut fs, &mut env, &mut h), Beat::Ok);
    }
    assert!(fs.get(Area::Holders, &h.token().hex()).is_some());
    assert_eq!(h.generation(), Some(1));
}

#[test]
fn the_sweep_collects_orphans_after_their_lease_and_keeps_other_names() {
    let mut fs = Mem::default();
    let mut env = Clock::new();
    let mut l = lock(1.0);
    fs.prepare(false).unwrap();
    let orphan = Token([7; 16]);
    fs.create(
        Area::Holders,
        &orphan.hex(),
        b"filelock-rw/1\nlease=2.0\n",
        false,
    )
    .unwrap();
    fs.create(Area::Holders, b"junk", b"x", false).unwrap();
    fs.create(Area::Generations, b".commit-ffff", b"partial", false)
        .unwrap();
    fs.create(Area::Generations, b".other", b"x", false)
        .unwrap();
    let mut r = l.publish(&mut fs, &mut env, Mode::Read).unwrap();
    assert_eq!(l.advance(&mut fs, &mut env, &mut r), Ok(true));
    for _ in 0..3 {
        env.pass(Duration::from_millis(500));
        assert_eq!(l.heartbeat(&mut fs, &mut env, &mut r), Beat::Ok);
    }
    assert!(
        fs.get(Area::Generations, b".commit-ffff").is_none(),
        "after 1 s"
    );
    assert!(
        fs.get(Area::Holders, &orphan.hex()).is_some(),
        "its lease is 2 s"
    );
    for _ in 0..1 {
        env.pass(Duration::from_millis(500));
        assert_eq!(l.heartbeat(&mut fs, &mut env, &mut r), Beat::Ok);
    }
    assert!(fs.get(Area::Holders, &orphan.hex()).is_none());
    assert!(fs.get(Area::Holders, b"junk").is_some());
    assert!(fs.get(Area::Generations, b".other").is_some());
    assert!(
        fs.get(Area::Holders, &r.token().hex()).is_some(),
        "never our own"
    );
}

#[test]
fn compaction_keeps_64_or_65_generations_and_a_reader_trims_to_64() {
    let mut fs = Mem::default();
    let mut env = Clock::new();
    let mut l = lock(90.0);
    for _ in 0..40 {
        let mut r = l.publish(&mut fs, &mut env, Mode::Read).unwrap();
        assert_eq!(l.advance(&mut fs, &mut env, &mut r), Ok(true));
        l.leave(&mut fs, &mut env, &mut r).unwrap();
    }
    assert_eq!(fs.generations().len(), 65, "16 to 80");
    assert_eq!(fs.generations()[0], 16);
    lock(90.0).latest(&mut fs, &mut env).unwrap();
    assert_eq!(fs.generations().len(), 64, "17 to 80");
    // Probing: HEAD current costs one missing name.
    let mut fresh = lock(90.0);
    assert_eq!(fresh.latest(&mut fs, &mut env), Ok(80));
    fs.drop_name(Area::Generations, HEAD);
    assert_eq!(
        lock(90.0).latest(&mut fs, &mut env),
        Ok(80),
        "HEAD gone: the listing"
    );
}

#[test]
fn a_fresh_participant_blind_to_a_live_log_commits_no_generation_one() {
    // C-RW1: the log is past its first window, this client's listing of
    // gen/ is an empty cache and its lookup of HEAD a stale negative one.
    let mut fs = Mem::default();
    let mut env = Clock::new();
    let mut l = lock(90.0);
    let mut holder = l.publish(&mut fs, &mut env, Mode::Read).unwrap();
    for _ in 0..70 {
        let mut r = l.publish(&mut fs, &mut env, Mode::Read).unwrap();
        assert_eq!(l.advance(&mut fs, &mut env, &mut r), Ok(true));
        l.leave(&mut fs, &mut env, &mut r).unwrap();
    }
    assert_eq!(l.advance(&mut fs, &mut env, &mut holder), Ok(true));
    assert!(fs.gen(1).is_none(), "compacted past the probe");
    let top = *fs.generations().iter().max().unwrap();
    fs.blind_listing = true;
    fs.blind_head = true;
    let mut blind = lock(90.0);
    let mut w = blind.publish(&mut fs, &mut env, Mode::Write).unwrap();
    assert_eq!(blind.advance(&mut fs, &mut env, &mut w), Ok(false));
    assert!(fs.gen(1).is_none(), "no generation 1 beside the live log");
    assert_eq!(*fs.generations().iter().max().unwrap(), top);
    // The same client once its cache is fresh: it waits behind the reader.
    fs.blind_listing = false;
    fs.blind_head = false;
    assert_eq!(blind.advance(&mut fs, &mut env, &mut w), Ok(false));
    let next = fs.gen(top + 1).unwrap();
    let latest = parse_snapshot(next.as_bytes()).unwrap();
    assert_eq!(latest.writer, Some(w.token()));
    assert!(latest.is_member(&holder.token()));
}

#[test]
fn a_first_commit_whose_confirmation_was_replaced_meanwhile_is_refused() {
    // A participant confirms a new log (its HEAD) and is stopped before
    // its link; meanwhile the log moves a window on, generation 1 is
    // compacted and HEAD replaced, and this client's listing stays a stale
    // cache. Its link of generation 1 lands; the HEAD it created is gone,
    // so the commit is refused and its generation 1 removed.
    let mut fs = Mem {
        blind_listing: true,
        ..Mem::default()
    };
    let mut env = Clock::new();
    let mut l = lock(90.0);
    let mut w = l.publish(&mut fs, &mut env, Mode::Write).unwrap();
    fs.make_epoch();
    fs.before_link = Some(|fs: &mut Mem| {
        let head = fs.get(Area::Generations, HEAD).unwrap().clone();
        assert!(head.is_empty(), "the confirmation's HEAD");
        // The log at 70, its HEAD bound to the epoch (generation 1 long
        // compacted).
        let seventy = b"filelock-rw/1\ngeneration=70\n";
        fs.create(
            Area::Generations,
            &generation_name(70).unwrap(),
            seventy,
            true,
        )
        .unwrap();
        let epoch = fs.get(Area::Generations, b"epoch").unwrap().clone();
        fs.next += 1;
        let ino = fs.next;
        fs.inodes.insert(ino, ([&epoch[..], seventy].concat(), 1));
        fs.drop_name(Area::Generations, HEAD);
        fs.names.insert((0, HEAD.to_vec()), ino);
    });
    assert_eq!(l.advance(&mut fs, &mut env, &mut w), Ok(true));
    assert!(fs.before_link.is_none(), "it linked");
    assert!(fs.gen(1).is_none(), "its generation 1 refused and removed");
    assert_eq!(w.generation(), Some(71), "granted in the live log");
}

#[test]
fn a_link_answered_eexist_that_landed_is_won() {
    // RW3: an NFS retransmit answers a landed link with EEXIST.
    let mut fs = Mem {
        retransmit: true,
        ..Mem::default()
    };
    let mut env = Clock::new();
    let mut l = lock(90.0);
    let mut w = l.publish(&mut fs, &mut env, Mode::Write).unwrap();
    fs.make_epoch();
    assert_eq!(l.advance(&mut fs, &mut env, &mut w), Ok(true));
    assert_eq!(w.generation(), Some(1));
    assert_eq!(fs.links, 1);
}

#[test]
fn a_malformed_generation_stops_everyone_and_stays() {
    let mut fs = Mem::default();
    let mut env = Clock::new();
    let mut l = lock(90.0);
    let mut r = l.publish(&mut fs, &mut env, Mode::Read).unwrap();
    assert_eq!(l.advance(&mut fs, &mut env, &mut r), Ok(true));
    let two = generation_name(2).unwrap();
    fs.create(Area::Generations, &two, b"garbage", false)
        .unwrap();
    let mut w = lock(90.0);
    let mut p = w.publish(&mut fs, &mut env, Mode::Write).unwrap();
    assert!(matches!(
        w.advance(&mut fs, &mut env, &mut p),
        Err(Error::Malformed { generation: 2, .. })
    ));
    assert!(fs.gen(2).is_some());
}

#[test]
fn a_removed_gen_directory_is_prepared_again() {
    // C-RW7: a long-lived instance whose gen/ is removed goes on.
    let mut fs = Mem::default();
    let mut env = Clock::new();
    let mut l = lock(90.0);
    let mut w = l.publish(&mut fs, &mut env, Mode::Write).unwrap();
    assert_eq!(l.advance(&mut fs, &mut env, &mut w), Ok(true));
    l.leave(&mut fs, &mut env, &mut w).unwrap();
    let gens: Vec<Vec<u8>> = fs
        .names
        .keys()
        .filter(|(a, _)| *a == 0)
        .map(|(_, n)| n.clone())
        .collect();
    for n in gens {
        fs.drop_name(Area::Generations, &n);
    }
    fs.gen = false;
    let mut w = l.publish(&mut fs, &mut env, Mode::Write).unwrap();
    assert_eq!(fs.prepares, 1, "prepared once per lock");
    assert_eq!(l.advance(&mut fs, &mut env, &mut w), Ok(true));
    assert_eq!(
        fs.prepares, 2,
        "gen/ made again by the commit that found it gone"
    );
    assert_eq!(w.generation(), Some(1), "a new epoch, numbered from 1");
}

#[test]
fn successors_list_readers_ascending_whatever_order_they_came_in() {
    let tokens: Vec<Token> = (0..40u8).map(|i| Token([i.wrapping_mul(97); 16])).collect();
    let mut record = String::from("filelock-rw/1\ngeneration=7\n");
    for t in &tokens {
        record.push_str(&std::format!("reader={}\n", hex(*t)));
    }
    let s = parse_snapshot(record.as_bytes()).unwrap();
    let mut out = vec![0u8; 4096];
    let keep = |i: usize, _: &Token| !i.is_multiple_of(3);
    let len =
        commit::encode_successor(&s, 8, None, &keep, Some(Token([0xff; 16])), &mut out).unwrap();
    let back = parse_snapshot(&out[record::EPOCH_LEN..record::EPOCH_LEN + len]).unwrap();
    let readers: Vec<Token> = back.readers().collect();
    let mut want: Vec<Token> = tokens
        .iter()
        .enumerate()
        .filter(|(i, _)| !i.is_multiple_of(3))
        .map(|(_, t)| *t)
        .collect();
    want.push(Token([0xff; 16]));
    want.sort_by_key(|t| t.0);
    assert_eq!(readers, want);
}

use super::super::record;

mod review;
mod torn;
mod torn_review;
