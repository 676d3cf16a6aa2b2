//! The SQLite lock's decisions: the ladder's calls against SQLite's own
//! (as strace shows a Python `ReadWriteLock`'s), an exhaustive search of
//! ladders interleaved over a model of `fcntl` locks, and the header,
//! name and holder verdicts.

extern crate std;

use super::*;
use crate::decide::Instant;
use crate::kernel::Backoff;
use core::time::Duration;
use std::collections::{HashMap, HashSet, VecDeque};
use std::vec::Vec;

const R: Access = Access::Read;
const W: Access = Access::Write;
const U: Access = Access::Unlock;

fn call(access: Access, span: Span) -> Call {
    Call { access, span }
}

/// Climbs a ladder whose every call is granted; the calls made.
fn granted(mode: Mode) -> Vec<Call> {
    let mut ladder = Ladder::new(mode);
    let mut calls = std::vec![ladder.first()];
    loop {
        match ladder.answer(Ok(())) {
            Verdict::Call(next) => calls.push(next),
            Verdict::Held => return calls,
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_read_and_a_write_make_sqlites_own_calls_in_its_order() {
    // What strace shows of a Python ReadWriteLock (PROTOCOL 17.2).
    assert_eq!(
        granted(Mode::Read),
        [
            call(R, Span::PENDING),
            call(R, Span::SHARED),
            call(U, Span::PENDING)
        ]
    );
    assert_eq!(
        granted(Mode::Write),
        [
            call(R, Span::PENDING),
            call(R, Span::SHARED),
            call(U, Span::PENDING),
            call(W, Span::RESERVED),
            call(W, Span::PENDING),
            call(W, Span::SHARED)
        ]
    );
    assert_eq!(
        (Span::PENDING.start, Span::RESERVED.start, Span::SHARED),
        (
            1_073_741_824,
            1_073_741_825,
            Span {
                start: 1_073_741_826,
                len: 510
            }
        )
    );
    assert_eq!(
        RELEASE,
        call(
            U,
            Span {
                start: 1 << 30,
                len: 512
            }
        )
    );
}

/// Climbs `mode` with every call granted until `refused`, which is
/// answered `EAGAIN`: the verdict, and the ladder.
fn refused_at(mode: Mode, refused: Call) -> (Verdict, Ladder) {
    let mut ladder = Ladder::new(mode);
    let mut next = ladder.first();
    loop {
        let answer = if next == refused {
            Err(Errno::AGAIN)
        } else {
            Ok(())
        };
        match ladder.answer(answer) {
            Verdict::Call(c) if answer.is_ok() => next = c,
            v => return (v, ladder),
        }
    }
}

#[test]
fn a_refusal_keeps_what_a_waiting_writer_needs_and_drops_the_rest() {
    // Refused at the gate: nothing held, the gate is tried again.
    let (v, mut l) = refused_at(Mode::Read, call(R, Span::PENDING));
    assert_eq!(v, Verdict::Busy(call(R, Span::PENDING)));
    assert_eq!((l.level(), l.give_up()), (Level::Unlocked, None));
    // Refused SHARED with the gate open: everything is dropped first.
    let (v, l) = refused_at(Mode::Read, call(R, Span::SHARED));
    assert_eq!(v, Verdict::Call(RELEASE));
    let mut l2 = l;
    assert_eq!(l2.give_up(), Some(RELEASE), "the gate is held");
    let mut l = l;
    assert_eq!(l.answer(Ok(())), Verdict::Busy(call(R, Span::PENDING)));
    assert_eq!((l.level(), l.give_up()), (Level::Unlocked, None));
    // A writer refused RESERVED drops its SHARED before it waits.
    let (v, mut l) = refused_at(Mode::Write, call(W, Span::RESERVED));
    assert_eq!(v, Verdict::Call(RELEASE));
    assert_eq!(l.answer(Ok(())), Verdict::Busy(call(R, Span::PENDING)));
    // Refused PENDING or SHARED, it keeps what it holds and tries that
    // step again.
    let (v, l) = refused_at(Mode::Write, call(W, Span::PENDING));
    assert_eq!(
        (v, l.level()),
        (Verdict::Busy(call(W, Span::PENDING)), Level::Reserved)
    );
    let (v, mut l) = refused_at(Mode::Write, call(W, Span::SHARED));
    assert_eq!(
        (v, l.level()),
        (Verdict::Busy(call(W, Span::SHARED)), Level::Pending)
    );
    assert_eq!(l.answer(Ok(())), Verdict::Held);
    assert_eq!(l.level(), Level::Exclusive);
    assert_eq!(l.give_up(), Some(RELEASE));
}

#[test]
fn eacces_is_busy_eintr_repeats_and_other_errors_fail() {
    let mut l = Ladder::new(Mode::Write);
    assert!(matches!(l.answer(Err(Errno::ACCES)), Verdict::Busy(_)));
    assert_eq!(l.answer(Err(Errno::INTR)), Verdict::Call(l.first()));
    assert_eq!(l.answer(Ok(())), Verdict::Call(call(R, Span::SHARED)));
    assert_eq!(l.answer(Err(Errno::IO)), Verdict::Failed(Errno::IO));
    assert_eq!(l.give_up(), Some(RELEASE), "the gate is held");
}

/// The holders of one range: a lock type per owner (0: none, 1: read,
/// 2: write), as the kernel keeps one lock per owner and byte.
type Cells = [[u8; 4]; 3];

fn cells_of(span: Span) -> &'static [usize] {
    match span {
        Span::PENDING => &[0],
        Span::RESERVED => &[1],
        Span::SHARED => &[2],
        Span::ALL => &[0, 1, 2],
        other => panic!("no such span {other:?}"),
    }
}

/// `F_SETLK` of `owner` on the model: all or nothing, a conversion of the
/// owner's own lock where it has one.
fn set(cells: &mut Cells, owner: usize, c: Call) -> Result<(), Errno> {
    let want = match c.access {
        Access::Read => 1,
        Access::Write => 2,
        Access::Unlock => 0,
    };
    for &cell in cells_of(c.span) {
        let conflict = (0..4).any(|o| {
            o != owner && cells[cell][o] != 0 && want != 0 && (want == 2 || cells[cell][o] == 2)
        });
        if conflict {
            return Err(Errno::AGAIN);
        }
    }
    for &cell in cells_of(c.span) {
        cells[cell][owner] = want;
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Climbing(Ladder, Call),
    Holding,
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct World {
    cells: Cells,
    phases: Vec<Phase>,
}

/// Every state of `modes` climbing, holding once and releasing, in every
/// order, each refused climber either trying again or giving up. Fails on
/// two holders, a writer with company, a reader admitted past a pending
/// writer, a lock left behind, or a state from which no order of retries
/// ends everyone.
fn explore(modes: &[Mode]) -> usize {
    let start = World {
        cells: [[0; 4]; 3],
        phases: modes
            .iter()
            .map(|&m| {
                let l = Ladder::new(m);
                Phase::Climbing(l, l.first())
            })
            .collect(),
    };
    // Each state, with its successors by retries alone.
    let mut edges: HashMap<World, Vec<World>> = HashMap::new();
    let mut queue = VecDeque::from([start.clone()]);
    let mut seen = HashSet::from([start]);
    while let Some(world) = queue.pop_front() {
        let mut retries = Vec::new();
        let mut others = Vec::new();
        for (i, phase) in world.phases.iter().enumerate() {
            let mut next = world.clone();
            match *phase {
                Phase::Done => continue,
                Phase::Holding => {
                    set(&mut next.cells, i, RELEASE).unwrap();
                    next.phases[i] = Phase::Done;
                    retries.push(next);
                }
                Phase::Climbing(mut ladder, c) => {
                    let answer = set(&mut next.cells, i, c);
                    match ladder.answer(answer) {
                        Verdict::Call(c) => next.phases[i] = Phase::Climbing(ladder, c),
                        Verdict::Held => {
                            check_admission(&world, i, modes);
                            next.phases[i] = Phase::Holding;
                        }
                        Verdict::Busy(again) => {
                            let mut quit = next.clone();
                            let mut gave_up = ladder;
                            if let Some(undo) = gave_up.give_up() {
                                set(&mut quit.cells, i, undo).unwrap();
                            }
                            quit.phases[i] = Phase::Done;
                            others.push(quit);
                            next.phases[i] = Phase::Climbing(ladder, again);
                        }
                        Verdict::Failed(e) => panic!("{e:?}"),
                    }
                    retries.push(next);
                }
            }
        }
        check_holders(&world, modes);
        if world.phases.iter().all(|p| *p == Phase::Done) {
            assert_eq!(world.cells, [[0; 4]; 3], "a lock left behind");
        }
        for next in retries.iter().chain(&others) {
            if seen.insert(next.clone()) {
                queue.push_back(next.clone());
            }
        }
        edges.insert(world, retries);
    }
    // No wedge: from every state, retries alone end everyone.
    let done: Vec<&World> = edges
        .keys()
        .filter(|w| w.phases.iter().all(|p| *p == Phase::Done))
        .collect();
    let mut reverse: HashMap<&World, Vec<&World>> = HashMap::new();
    for (from, tos) in &edges {
        for to in tos {
            reverse.entry(to).or_default().push(from);
        }
    }
    let mut ends: HashSet<&World> = done.iter().copied().collect();
    let mut todo: Vec<&World> = done;
    while let Some(w) = todo.pop() {
        for &from in reverse.get(w).map(Vec::as_slice).unwrap_or(&[]) {
            if ends.insert(from) {
                todo.push(from);
            }
        }
    }
    let stuck: Vec<_> = edges.keys().filter(|w| !ends.contains(w)).collect();
    assert!(stuck.is_empty(), "wedged: {:?}", stuck.first());
    edges.len()
}

/// Never a writer with another holder.
fn check_holders(world: &World, modes: &[Mode]) {
    let holders: Vec<usize> = (0..modes.len())
        .filter(|&i| world.phases[i] == Phase::Holding)
        .collect();
    if holders.iter().any(|&i| modes[i] == Mode::Write) {
        assert_eq!(holders.len(), 1, "a writer with company: {world:?}");
    }
}

/// A reader is admitted only while no writer holds PENDING (writer
/// preference), and nobody while a writer holds the lock.
fn check_admission(before: &World, i: usize, modes: &[Mode]) {
    for (j, phase) in before.phases.iter().enumerate() {
        if j == i {
            continue;
        }
        if let Phase::Climbing(l, _) = phase {
            if modes[i] == Mode::Read && modes[j] == Mode::Write {
                assert!(
                    l.level() < Level::Pending,
                    "a reader passed a pending writer"
                );
            }
        }
    }
}

#[test]
fn interleaved_ladders_never_share_a_write_never_wedge_and_prefer_writers() {
    use Mode::{Read as Rd, Write as Wr};
    let mut states = 0;
    for modes in [
        &[Rd, Wr][..],
        &[Wr, Wr],
        &[Rd, Rd, Wr],
        &[Rd, Wr, Wr],
        &[Wr, Wr, Wr],
        &[Rd, Rd, Wr, Wr],
    ] {
        states += explore(modes);
    }
    assert!(states > 1000, "the search must reach many states: {states}");
}

/// A lock file whose every call is refused until `free_after` calls, on a
/// clock that moves only when the driver sleeps.
struct Fake {
    calls: Vec<Call>,
    free_after: usize,
    now: Duration,
}

impl Clock for Fake {
    fn now(&mut self) -> Instant {
        Instant(self.now.as_nanos() as u64)
    }
    fn wall(&mut self) -> crate::decide::FileTime {
        crate::decide::FileTime::default()
    }
    fn sleep(&mut self, d: Duration) {
        self.now += d;
    }
}

impl Rungs for Fake {
    type File = ();
    fn lock(&mut self, _: &(), call: Call) -> Result<(), Errno> {
        self.calls.push(call);
        match call.access {
            Access::Unlock => Ok(()),
            _ if self.calls.len() > self.free_after => Ok(()),
            _ => Err(Errno::AGAIN),
        }
    }
}

#[test]
fn a_climb_waits_as_patience_says_and_leaves_nothing_when_it_gives_up() {
    let ms = Duration::from_millis;
    let mut fake = Fake {
        calls: Vec::new(),
        free_after: 5,
        now: ms(0),
    };
    let got = climb(
        &mut fake,
        &(),
        Mode::Write,
        &mut Backoff::new(ms(100)),
        Instant(0),
    );
    assert_eq!(got, Ok(Climbed::Held));
    assert_eq!(fake.now, ms(1 + 2 + 4 + 8 + 16), "five pauses");
    // Refused for good: the climb gives up at its deadline, unlocking.
    let mut fake = Fake {
        calls: Vec::new(),
        free_after: usize::MAX,
        now: ms(0),
    };
    let got = climb(
        &mut fake,
        &(),
        Mode::Read,
        &mut Backoff::new(ms(30)),
        Instant(0),
    );
    assert_eq!(got, Ok(Climbed::Busy));
    assert_eq!(fake.now, ms(30));
    assert!(fake.calls.iter().all(|c| *c == call(R, Span::PENDING)));
    // One attempt: a writer waiting on readers drops its PENDING at once.
    let mut fake = Fake {
        calls: Vec::new(),
        free_after: usize::MAX,
        now: ms(0),
    };
    let mut ladder_calls = granted(Mode::Write);
    ladder_calls.pop();
    fake.calls.clear();
    struct ReadersIn(Fake);
    impl Clock for ReadersIn {
        fn now(&mut self) -> Instant {
            self.0.now()
        }
        fn wall(&mut self) -> crate::decide::FileTime {
            self.0.wall()
        }
        fn sleep(&mut self, d: Duration) {
            self.0.sleep(d)
        }
    }
    impl Rungs for ReadersIn {
        type File = ();
        fn lock(&mut self, _: &(), c: Call) -> Result<(), Errno> {
            self.0.calls.push(c);
            match c == call(W, Span::SHARED) {
                true => Err(Errno::AGAIN),
                false => Ok(()),
            }
        }
    }
    let mut readers = ReadersIn(fake);
    let got = climb(
        &mut readers,
        &(),
        Mode::Write,
        &mut Backoff::new(ms(0)),
        Instant(0),
    );
    assert_eq!(got, Ok(Climbed::Busy));
    ladder_calls.extend([call(W, Span::SHARED), RELEASE]);
    assert_eq!(readers.0.calls, ladder_calls);
}

#[test]
fn headers_are_judged_as_sqlite_and_filelock_judge_them() {
    // The vectors filelock 4.2.11 was run on (PROTOCOL 17.1).
    let mut table = [0u8; 100];
    table[..16].copy_from_slice(MAGIC);
    table[16..24].copy_from_slice(&[0x10, 0x00, 1, 1, 0, 64, 32, 32]);
    let mut wal = table;
    wal[18..20].copy_from_slice(&[2, 2]);
    let vectors: [(&[u8], Header); 12] = [
        (b"", Header::Empty),
        (b"hello world\n", Header::NotADatabase),
        (&[b'x'; 100], Header::NotADatabase),
        (MAGIC, Header::NotADatabase),
        (b"SQLite format 3\0\x10\x00\x02\x02", Header::Wal),
        (b"SQLite format 3\0\x10\x00\x02\x01", Header::Wal),
        (b"SQLite format 3\0\x10\x00\x01\x02", Header::Wal),
        (b"SQLite format 3\0\x10\x00\x01", Header::NotADatabase),
        (b"SQLite format 3\0\x10\x00\x02", Header::Wal),
        (&[0; 100], Header::NotADatabase),
        (&table, Header::Database),
        (&wal, Header::Wal),
    ];
    for (head, want) in vectors {
        assert_eq!(judge_header(head), want, "{head:?}");
    }
    let mut newer = table;
    newer[18] = 3;
    assert_eq!(judge_header(&newer), Header::Newer);
    let mut unknown_write = table;
    unknown_write[19] = 3;
    assert_eq!(judge_header(&unknown_write), Header::NotADatabase);
    for (size, ok) in [
        ([0x02, 0x00], true),
        ([0x00, 0x01], true),
        ([0x01, 0x00], false),
        ([0x03, 0x00], false),
        ([0x00, 0x00], false),
    ] {
        let mut h = table;
        h[16..18].copy_from_slice(&size);
        assert_eq!(judge_header(&h) == Header::Database, ok, "{size:?}");
    }
    let mut reserved = table;
    reserved[20] = 255;
    assert_eq!(
        judge_header(&reserved),
        Header::Database,
        "4096 - 255 >= 480"
    );
    reserved[16..18].copy_from_slice(&[0x02, 0x00]);
    reserved[20] = 33;
    assert_eq!(
        judge_header(&reserved),
        Header::NotADatabase,
        "512 - 33 < 480"
    );
    assert!(Header::Empty.usable() && Header::Database.usable());
    assert!(!Header::Wal.usable() && !Header::NotADatabase.usable() && !Header::Newer.usable());
}

proptest::proptest! {
    #[test]
    fn any_bytes_get_a_verdict(head in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
        let verdict = judge_header(&head);
        proptest::prop_assert_eq!(verdict == Header::Empty, head.is_empty());
        if verdict.usable() && !head.is_empty() {
            proptest::prop_assert!(head.starts_with(MAGIC));
        }
    }
}

#[test]
fn the_name_must_still_be_the_locked_file() {
    let id = FileId { dev: 1, ino: 2 };
    assert_eq!(named(id, Ok(id)), Named::Same);
    assert_eq!(named(id, Ok(FileId { dev: 1, ino: 3 })), Named::Replaced);
    assert_eq!(named(id, Ok(FileId { dev: 2, ino: 2 })), Named::Replaced);
    assert_eq!(named(id, Err(Errno::NOENT)), Named::Replaced);
    assert_eq!(named(id, Err(Errno::ACCES)), Named::Unknown(Errno::ACCES));
}

#[test]
fn three_probes_say_who_holds_what() {
    use Seen::{Free, Read, Write};
    assert!(!holding(Free, Free, Free).held());
    assert_eq!(
        holding(Write(7), Write(7), Write(7)),
        Holding {
            exclusive: Some(7),
            ..Holding::default()
        }
    );
    assert_eq!(
        holding(Write(8), Write(8), Read(5)),
        Holding {
            shared: Some(5),
            pending: Some(8),
            reserved: Some(8),
            exclusive: None
        }
    );
    assert_eq!(
        holding(Free, Write(9), Read(9)),
        Holding {
            shared: Some(9),
            reserved: Some(9),
            ..Holding::default()
        }
    );
    assert_eq!(
        holding(Read(4), Free, Free).shared,
        Some(4),
        "a reader at its gate"
    );
    assert_eq!(holding(Free, Free, Read(-1)).shared, Some(-1));
}
