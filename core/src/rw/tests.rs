//! The read-write lock's records and decisions, against the verdicts and
//! bytes observed from filelock 4.2.11 (PROTOCOL 16).

extern crate std;
use super::log::*;
use super::member::*;
use super::names::*;
use super::record::*;
use super::Mode;
use crate::decide::Instant;
use crate::names::Token;
use crate::pid::Pid;
use core::time::Duration;
use std::vec::Vec;

const W: &str = "95fd9e24e6472ecd9484c2c53e72e1f4";
const R1: &str = "59cda89a64791d2d56804c3160d38f39";
const R2: &str = "7a396102a69a9bf370e9f3b87692aa8b";

fn t(hex: &str) -> Token {
    Token::parse_hex(hex.as_bytes()).unwrap()
}

fn snap(text: &str) -> Result<(u128, Option<Token>, Vec<Token>), Malformed> {
    parse_snapshot(text.as_bytes()).map(|s| (s.generation, s.writer, s.readers().collect()))
}

fn encode(generation: u128, writer: Option<Token>, readers: &mut [Token]) -> Vec<u8> {
    let n = normalize(readers);
    let record = SnapshotRecord {
        generation,
        writer,
        readers: &readers[..n],
    };
    let mut buf = std::vec![0u8; record.encoded_len()];
    let len = record.encode(&mut buf).unwrap();
    assert_eq!(len, buf.len());
    buf
}

#[test]
fn snapshots_encode_as_observed() {
    assert_eq!(
        encode(1, Some(t(W)), &mut []),
        b"filelock-rw/1\ngeneration=1\nwriter=95fd9e24e6472ecd9484c2c53e72e1f4\n"
    );
    assert_eq!(encode(1, Some(t(W)), &mut []).len(), 67);
    // Given out of order, listed ascending.
    assert_eq!(
        encode(2, None, &mut [t(R2), t(R1)]),
        std::format!("filelock-rw/1\ngeneration=2\nreader={R1}\nreader={R2}\n").as_bytes()
    );
    assert_eq!(encode(2, None, &mut []), b"filelock-rw/1\ngeneration=2\n");
    assert_eq!(encode(2, None, &mut []).len(), 27);
    // Repeats are one reader.
    assert_eq!(
        encode(3, Some(t(W)), &mut [t(R1), t(R1)]),
        std::format!("filelock-rw/1\ngeneration=3\nwriter={W}\nreader={R1}\n").as_bytes()
    );
    let max = encode(MAX_GENERATION, None, &mut []);
    assert_eq!(
        snap(core::str::from_utf8(&max).unwrap()).unwrap().0,
        MAX_GENERATION
    );
}

#[test]
fn the_encoder_refuses_what_a_reader_would_not_read_back() {
    let past = SnapshotRecord {
        generation: MAX_GENERATION + 1,
        writer: None,
        readers: &[],
    };
    assert_eq!(past.validate(), Err(Invalid::Generation));
    let unsorted = [t(R2), t(R1)];
    let record = SnapshotRecord {
        generation: 1,
        writer: None,
        readers: &unsorted,
    };
    assert_eq!(record.validate(), Err(Invalid::Readers));
    let crowd: Vec<Token> = (0..26_214u32)
        .map(|i| {
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&i.to_be_bytes());
            Token(b)
        })
        .collect();
    let record = SnapshotRecord {
        generation: 1,
        writer: None,
        readers: &crowd,
    };
    assert_eq!(record.validate(), Err(Invalid::TooLong), "past 1 MiB");
    let fits = SnapshotRecord {
        readers: &crowd[..26_213],
        ..record
    };
    assert_eq!(fits.validate(), Ok(()));
    let mut small = [0u8; 10];
    assert_eq!(
        SnapshotRecord {
            generation: 1,
            writer: None,
            readers: &[]
        }
        .encode(&mut small),
        Err(Invalid::BufferTooSmall(27))
    );
}

#[test]
fn valid_snapshots_of_the_observed_vectors() {
    let out_of_order = std::format!("filelock-rw/1\ngeneration=2\nreader={R2}\nreader={R1}\n");
    assert_eq!(snap(&out_of_order), Ok((2, None, std::vec![t(R2), t(R1)])));
    let generation_last = std::format!("filelock-rw/1\nreader={R1}\ngeneration=5\n");
    assert_eq!(snap(&generation_last), Ok((5, None, std::vec![t(R1)])));
    let both = std::format!("filelock-rw/1\ngeneration=3\nwriter={W}\nreader={W}\n");
    let parsed = parse_snapshot(both.as_bytes()).unwrap();
    assert!(parsed.is_member(&t(W)));
    assert_eq!(snap(&both), Ok((3, Some(t(W)), std::vec![t(W)])));
    assert_eq!(
        snap("filelock-rw/1\ngeneration=0\n"),
        Ok((0, None, std::vec![]))
    );
    assert_eq!(
        snap("filelock-rw/1\ngeneration=99999999999999999999\n"),
        Ok((99_999_999_999_999_999_999, None, std::vec![]))
    );
    assert!(99_999_999_999_999_999_999u128 > u128::from(u64::MAX));
}

#[test]
fn malformed_snapshots_of_the_observed_vectors() {
    let g = "filelock-rw/1\ngeneration=3\n";
    let cases: &[(std::string::String, Malformed)] = &[
        ("garbage".into(), Malformed::NotProtocol),
        (
            "filelock-rw/1\ngeneration=03\n".into(),
            Malformed::BadGeneration,
        ),
        (
            "filelock-rw/1\ngeneration=+3\n".into(),
            Malformed::BadGeneration,
        ),
        (
            "filelock-rw/1\ngeneration= 3\n".into(),
            Malformed::BadGeneration,
        ),
        (
            "filelock-rw/1\ngeneration=100000000000000000000\n".into(),
            Malformed::BadGeneration,
        ),
        (std::format!("{g}reader=ABC\n"), Malformed::BadReader),
        (
            "filelock-rw/1\ngeneration=3".into(),
            Malformed::NoFinalNewline,
        ),
        (std::format!("{g}foo=bar\n"), Malformed::UnknownLine),
        (
            std::format!("{g}writer={W}\nwriter={R1}\n"),
            Malformed::BadWriter,
        ),
        (
            std::format!("{g}reader={R1}\nreader={R1}\n"),
            Malformed::BadReader,
        ),
        (
            std::format!("{g}reader={R2}\nreader={R1}\nreader={R2}\n"),
            Malformed::BadReader,
        ),
        (
            "filelock-rw/1\r\ngeneration=3\r\n".into(),
            Malformed::NotProtocol,
        ),
        (
            "filelock-rw/1\ngeneration=3\r\n".into(),
            Malformed::BadGeneration,
        ),
        (std::format!("{g}\n"), Malformed::UnknownLine),
        (std::format!("{g}writer=\n"), Malformed::BadWriter),
        (
            "filelock-rw/2\ngeneration=3\n".into(),
            Malformed::NotProtocol,
        ),
        (
            " filelock-rw/1\ngeneration=3\n".into(),
            Malformed::NotProtocol,
        ),
        (
            "filelock-rw/1\n generation=3\n".into(),
            Malformed::UnknownLine,
        ),
        ("".into(), Malformed::Empty),
        ("filelock-rw/1\n".into(), Malformed::NoGeneration),
        (
            "filelock-rw/1\ngeneration=\n".into(),
            Malformed::BadGeneration,
        ),
        (
            "filelock-rw/1\ngeneration=3\ngeneration=3\n".into(),
            Malformed::BadGeneration,
        ),
        (std::format!("{g}reader\n"), Malformed::BadReader),
        (
            "filelock-rw/1\ngeneration=3\nreader=é\n".into(),
            Malformed::NotAscii,
        ),
        (
            std::format!("{g}writer={}\n", W.to_uppercase()),
            Malformed::BadWriter,
        ),
    ];
    for (text, why) in cases {
        assert_eq!(snap(text).map(|_| ()), Err(*why), "{text:?}");
    }
    let long = std::vec![b'a'; MAX_RECORD + 1];
    assert_eq!(parse_snapshot(&long).map(|_| ()), Err(Malformed::TooLong));
    assert_eq!(
        parse_generation(b"filelock-rw/1\ngeneration=3\n", 4).map(|_| ()),
        Err(Malformed::WrongGeneration),
        "a generation that differs from the name"
    );
    assert!(parse_generation(b"filelock-rw/1\ngeneration=3\n", 3).is_ok());
}

#[test]
fn epoch_and_head_bind_to_each_other() {
    let epoch = b"5e210ab54e14cb9b9798c552ff0af2de\n";
    assert_eq!(&encode_epoch(&t("5e210ab54e14cb9b9798c552ff0af2de")), epoch);
    assert!(is_valid_epoch(epoch));
    assert!(
        is_valid_epoch(&epoch[..32]),
        "one trailing newline is optional"
    );
    assert!(!is_valid_epoch(b""));
    assert!(!is_valid_epoch(b"5E210AB54E14CB9B9798C552FF0AF2DE\n"));
    let head: &[u8] = b"5e210ab54e14cb9b9798c552ff0af2de\nfilelock-rw/1\ngeneration=1\nwriter=95fd9e24e6472ecd9484c2c53e72e1f4\n";
    assert_eq!(head.len(), 100);
    assert_eq!(head_generation(head, Some(epoch)), Some(1));
    assert_eq!(head_generation(head, None), None, "no epoch");
    let other = b"00000000000000000000000000000000\n";
    assert_eq!(head_generation(head, Some(other)), None, "another epoch");
    assert_eq!(head_generation(&head[..70], Some(epoch)), None, "torn");
    assert!(
        head_record(&head[..70], Some(epoch)).is_some(),
        "torn, yet bound"
    );
    assert_eq!(head_record(b"", Some(epoch)), None, "empty");
    // An epoch without its newline never binds a HEAD.
    assert_eq!(head_generation(head, Some(&epoch[..32])), None);
}

#[test]
fn a_torn_epoch_binds_a_head_that_starts_with_it_and_holds_a_snapshot() {
    // swaplock's binding only (PROTOCOL 16.9): filelock binds nothing to
    // an epoch that holds no token. Such a HEAD says the log is not new,
    // and names no generation to start from.
    let record: &[u8] = b"filelock-rw/1\ngeneration=7\n";
    assert_eq!(head_record(record, Some(b"")), Some(record), "empty epoch");
    assert_eq!(head_generation(record, Some(b"")), None, "no generation");
    let torn = b"5e210ab5";
    let head = [&torn[..], record].concat();
    assert_eq!(head_record(&head, Some(torn)), Some(record), "a short one");
    assert_eq!(head_generation(&head, Some(torn)), None);
    assert_eq!(head_record(&head, Some(b"5e210ab6")), None, "another");
    assert_eq!(head_record(record, Some(torn)), None, "not its prefix");
    // A prefix alone, an empty HEAD, or a torn record: not bound, so a
    // confirmation left by a creator that died reads as torn still.
    assert_eq!(head_record(torn, Some(torn)), None);
    assert_eq!(head_record(b"", Some(b"")), None);
    assert_eq!(head_record(&record[..20], Some(b"")), None);
    // A valid epoch's HEAD under an empty epoch: the rest does not parse.
    let valid = b"5e210ab54e14cb9b9798c552ff0af2de\nfilelock-rw/1\ngeneration=1\n";
    assert_eq!(head_record(valid, Some(b"")), None);
    // Past the 33 bytes of an epoch, nothing binds.
    let long = [b'x'; 34];
    assert_eq!(
        head_record(&[&long[..], record].concat(), Some(&long)),
        None
    );
}

fn holder(lease: f64) -> Vec<u8> {
    let record = HolderRecord {
        token: t(W),
        pid: Pid::new(30227).unwrap(),
        host: "vm",
        lease,
        nonce: t("d815d2eb5f93cb0adde1ba755df21f9f"),
    };
    let mut buf = std::vec![0u8; record.encoded_len()];
    record.encode(&mut buf).unwrap();
    buf
}

#[test]
fn holder_records_encode_as_observed() {
    let bytes = holder(90.0);
    assert_eq!(
        bytes,
        b"filelock-rw/1\ntoken=95fd9e24e6472ecd9484c2c53e72e1f4\npid=30227\nhost=vm\nlease=90.0\nnonce=d815d2eb5f93cb0adde1ba755df21f9f\n"
    );
    assert_eq!(bytes.len(), 121);
    for (lease, text) in [
        (4.5, "4.5"),
        (1e-05, "1e-05"),
        (1e20, "1e+20"),
        (1.5, "1.5"),
    ] {
        let bytes = holder(lease);
        let line = std::format!("\nlease={text}\n");
        assert!(bytes.windows(line.len()).any(|w| w == line.as_bytes()));
        assert_eq!(holder_lease(&bytes), Some(lease));
    }
    let info = holder_info(&bytes);
    assert_eq!(info.pid.map(Pid::get), Some(30227));
    assert_eq!(
        (info.host, info.token, info.lease),
        (Some("vm"), Some(W), Some(90.0))
    );
    let bad = |host, lease| HolderRecord {
        token: t(W),
        pid: Pid::new(1).unwrap(),
        host,
        lease,
        nonce: t(W),
    };
    assert_eq!(bad("vé", 1.0).validate(), Err(Invalid::Host));
    assert_eq!(bad("a\nb", 1.0).validate(), Err(Invalid::Host));
    assert_eq!(bad("vm", 0.0).validate(), Err(Invalid::Lease));
    assert_eq!(bad("vm", f64::INFINITY).validate(), Err(Invalid::Lease));
}

#[test]
fn the_lease_is_taken_only_as_repr_spells_it() {
    let with = |line: &str| std::format!("filelock-rw/1\ntoken={W}\n{line}\nnonce={W}\n");
    for (line, lease) in [
        ("lease=90.0", Some(90.0)),
        ("lease=1e+20", Some(1e20)),
        ("lease=1e-05", Some(1e-05)),
        ("lease=90", None),
        ("lease=1_0.0", None),
        ("lease= 90.0", None),
        ("lease=inf", None),
        ("lease=nan", None),
        ("lease=0.0", None),
        ("lease=-1.0", None),
        ("lease=0.00001", None),
        ("lease=+90.0", None),
        ("lease=90.0\r", None),
        ("lease=9e+15", None),
        ("lease=9000000000000000.0", Some(9e15)),
        ("lease=1.0\nlease=2.0", Some(1.0)),
        ("lease=x\nlease=2.0", None),
        ("release=3.0", None),
    ] {
        assert_eq!(holder_lease(with(line).as_bytes()), lease, "{line:?}");
    }
    assert_eq!(holder_lease(b"lease=90.0\n\xff"), None, "not ASCII");
    assert_eq!(holder_lease(b""), None);
}

#[test]
fn names_of_the_log() {
    assert_eq!(&generation_name(5).unwrap(), b"00000000000000000005");
    assert_eq!(
        &generation_name(MAX_GENERATION).unwrap(),
        b"99999999999999999999"
    );
    assert_eq!(generation_name(MAX_GENERATION + 1), None);
    assert_eq!(parse_generation_name(b"00000000000000000005"), Some(5));
    assert_eq!(
        parse_generation_name(b"0000000000000000005"),
        None,
        "19 digits"
    );
    assert_eq!(
        parse_generation_name(b"000000000000000000005"),
        None,
        "21 digits"
    );
    assert_eq!(
        parse_generation_name("0000000000000000000\u{ff15}".as_bytes()),
        None
    );
    assert_eq!(parse_generation_name(b"HEAD"), None);
    let temp = temporary_name(&t(W));
    assert_eq!(&temp[..], std::format!(".commit-{W}").as_bytes());
    assert!(is_temporary_name(&temp));
    assert!(
        is_temporary_name(b".commit-ffff"),
        "the prefix alone decides"
    );
    assert!(!is_temporary_name(b".other"));
    assert_eq!(parse_holder_name(W.as_bytes()), Some(t(W)));
    assert_eq!(parse_holder_name(b"junk"), None);
}

#[test]
fn a_find_reads_the_retained_listing_memory_and_head_newest_first() {
    let mut listed: Vec<u128> = (1..=80).rev().collect();
    let (trim, keep) = retain(&mut listed);
    assert_eq!(trim, (1..=16).collect::<Vec<_>>());
    assert_eq!(keep, (17..=80).collect::<Vec<_>>());
    let mut few = [3u128, 1, 2];
    assert_eq!(retain(&mut few), (&[][..], &[1u128, 2, 3][..]));
    assert_eq!(&named(&[4, 5], 7, Some(5))[..], &[7, 5, 4]);
    assert_eq!(
        &named(&[], 0, Some(0))[..],
        &[] as &[u128],
        "generation 0 has no record"
    );
    assert_eq!(
        &named(&[0, 2], 0, None)[..],
        &[2, 0],
        "a listed name 0 is read"
    );
    assert_eq!(patience(6, Some(6)), 1);
    assert_eq!(patience(6, Some(4)), RETAINED);
    assert_eq!(patience(6, None), RETAINED);
}

/// The probe over a log whose readable generations are `present`.
fn probe(start: u128, patience: u32, present: &[u128]) -> (u128, usize) {
    let mut p = Probe::new(start, patience);
    let mut reads = 0;
    while let Some(g) = p.next() {
        reads += 1;
        p.found(present.contains(&g));
    }
    (p.latest(), reads)
}

#[test]
fn the_probe_stops_after_its_patience_of_missing_names() {
    assert_eq!(probe(6, 1, &[6]), (6, 1), "HEAD current: one failed open");
    assert_eq!(probe(4, 64, &[4, 5, 6]).0, 6);
    assert_eq!(
        probe(4, 64, &[4, 5, 6]).1,
        66,
        "64 failed opens past the head"
    );
    assert_eq!(probe(4, 64, &[4, 6]).0, 6, "across a gap");
    assert_eq!(probe(4, 1, &[4, 6]).0, 4, "patience 1 stops at a hole");
    assert_eq!(probe(0, 64, &[]), (0, 64), "an empty log");
    assert_eq!(probe(MAX_GENERATION, 64, &[]), (MAX_GENERATION, 0));
    assert!(accept_blind(3, 5, false));
    assert!(!accept_blind(5, 5, false));
    assert!(accept_blind(0, 0, true), "a new log");
}

#[test]
fn commit_checks_and_lead() {
    assert!(extends(5, true, false));
    assert!(!extends(5, false, true));
    assert!(
        extends(1, false, false),
        "the first generation: no bound HEAD"
    );
    assert!(!extends(1, true, true));
    assert_eq!(after_link(5, Some(5), Some(4), true), Landed::Won);
    assert_eq!(after_link(5, None, None, true), Landed::Won);
    assert_eq!(
        after_link(5, Some(5), None, false),
        Landed::Lost { remove: true },
        "the predecessor was compacted, nothing built on it"
    );
    assert_eq!(
        after_link(5, Some(9), None, false),
        Landed::Lost { remove: false },
        "peers lead by less than a window: the slot stays taken"
    );
    assert_eq!(
        after_link(5, Some(69), None, true),
        Landed::Lost { remove: true },
        "led by a whole window"
    );
    assert_eq!(after_link(5, Some(68), None, true), Landed::Won);
    assert_eq!(
        after_link(5, None, Some(69), true),
        Landed::Lost { remove: true }
    );
    assert!(head_due(true, true, Some(4), 5));
    assert!(head_due(true, true, None, 1));
    assert!(!head_due(true, true, Some(5), 5), "HEAD only moves forward");
    assert!(!head_due(false, true, None, 5));
    assert!(!head_due(true, false, None, 5));
}

fn compaction(n: u128, present: &[u128]) -> Option<(u128, u128)> {
    let mut c = Compaction::after(n)?;
    while let Some(g) = c.ask() {
        c.exists(present.contains(&g));
    }
    Some((*c.range().start(), *c.range().end()))
}

#[test]
fn compaction_removes_the_oldest_first_down_to_the_first_gap() {
    assert_eq!(compaction(65, &[]), None);
    assert_eq!(compaction(66, &[]), Some((1, 1)));
    let all: Vec<u128> = (1..=80).collect();
    assert_eq!(compaction(80, &all), Some((1, 15)));
    let from_5: Vec<u128> = (5..=80).collect();
    assert_eq!(compaction(80, &from_5), Some((5, 15)));
    assert_eq!(compaction(80, &[]), Some((15, 15)));
}

/// Members as a list: the writer, then the readers.
struct List(Option<Token>, Vec<Token>);

impl Members for List {
    fn writer(&self) -> Option<Token> {
        self.0
    }
    fn readers(&self) -> impl Iterator<Item = Token> + '_ {
        self.1.iter().copied()
    }
}

fn plan(s: &List, me: &str, mode: Mode, stale: &[&str]) -> (Step, Option<Token>, Option<Token>) {
    let stale: Vec<Token> = stale.iter().map(|h| t(h)).collect();
    let p = attempt(s, &t(me), mode, &|x| stale.contains(x));
    (p.step, p.writer, p.add_reader)
}

const ME: &str = "0123456789abcdef0123456789abcdef";

#[test]
fn a_new_participant_enters_unless_a_live_writer_is_named() {
    let empty = List(None, std::vec![]);
    assert_eq!(
        plan(&empty, ME, Mode::Read, &[]),
        (Step::Commit { grant: true }, None, Some(t(ME)))
    );
    assert_eq!(
        plan(&empty, ME, Mode::Write, &[]),
        (Step::Commit { grant: true }, Some(t(ME)), None)
    );
    let readers = List(None, std::vec![t(R1)]);
    assert_eq!(
        plan(&readers, ME, Mode::Write, &[]),
        (Step::Commit { grant: false }, Some(t(ME)), None),
        "a writer enters before it drains the readers"
    );
    assert_eq!(
        plan(&readers, ME, Mode::Write, &[R1]),
        (Step::Commit { grant: true }, Some(t(ME)), None),
        "evicting the last reader grants at once"
    );
    let writer = List(Some(t(W)), std::vec![t(R1)]);
    for mode in [Mode::Read, Mode::Write] {
        assert_eq!(plan(&writer, ME, mode, &[]), (Step::Wait, Some(t(W)), None));
        assert_eq!(
            plan(&writer, ME, mode, &[R1]),
            (Step::Evict, Some(t(W)), None),
            "a stale reader behind a live writer is evicted, and no more"
        );
    }
    assert_eq!(
        plan(&writer, ME, Mode::Read, &[W]),
        (Step::Commit { grant: true }, None, Some(t(ME))),
        "a stale writer is replaced in the same commit"
    );
}

#[test]
fn an_entered_participant_commits_only_a_grant_or_an_eviction() {
    let waiting = List(Some(t(ME)), std::vec![t(R1), t(R2)]);
    assert_eq!(
        plan(&waiting, ME, Mode::Write, &[]),
        (Step::Wait, Some(t(ME)), None)
    );
    assert_eq!(
        plan(&waiting, ME, Mode::Write, &[R1]),
        (Step::Commit { grant: false }, Some(t(ME)), None)
    );
    let drained = List(Some(t(ME)), std::vec![]);
    assert_eq!(
        plan(&drained, ME, Mode::Write, &[]),
        (Step::Commit { grant: true }, Some(t(ME)), None),
        "the grant is a commit of the same membership"
    );
    let reading = List(Some(t(W)), std::vec![t(ME)]);
    assert_eq!(
        plan(&reading, ME, Mode::Read, &[]),
        (Step::Commit { grant: true }, Some(t(W)), None)
    );
    // Never stale to itself, whatever the ledger says.
    assert_eq!(
        plan(&drained, ME, Mode::Write, &[ME]),
        (Step::Commit { grant: true }, Some(t(ME)), None)
    );
}

#[test]
fn a_leave_drops_only_its_own_token() {
    assert_eq!(
        leave(&List(Some(t(ME)), std::vec![t(R1)]), &t(ME)),
        Some(None)
    );
    assert_eq!(
        leave(&List(Some(t(W)), std::vec![t(ME)]), &t(ME)),
        Some(Some(t(W)))
    );
    assert_eq!(leave(&List(Some(t(W)), std::vec![t(R1)]), &t(ME)), None);
}

#[test]
fn the_ledger_ages_unchanged_values_from_the_first_look() {
    let at = |ms: u64| Instant(ms * 1_000_000);
    let mut seen = None;
    let a = Value::of(Some(b"a"));
    assert_eq!(Seen::observe(&mut seen, a, at(100), at(99)), Duration::ZERO);
    assert_eq!(
        Seen::observe(&mut seen, a, at(1600), at(1500)),
        Duration::from_millis(1400),
        "up to the reading taken before the fetch"
    );
    let b = Value::of(Some(b"b"));
    assert_eq!(
        Seen::observe(&mut seen, b, at(1700), at(1690)),
        Duration::ZERO
    );
    assert_eq!(
        Seen::observe(&mut seen, Value::Missing, at(1800), at(1800)),
        Duration::ZERO
    );
    assert_eq!(
        Seen::observe(&mut seen, Value::Missing, at(2800), at(2800)),
        Duration::from_secs(1),
        "a missing record ages like any other value"
    );
    assert_ne!(Value::of(Some(b"")), Value::Missing);
    let s = Duration::from_secs;
    assert!(is_stale(s(90), s(90), None, s(3600)));
    assert!(!is_stale(s(89), s(90), None, s(3600)));
    assert!(
        !is_stale(s(2), s(1), Some(3.0), s(3600)),
        "the longer lease wins"
    );
    assert!(is_stale(s(3), s(1), Some(3.0), s(3600)));
    assert!(
        is_stale(s(3600), s(1), Some(1e20), s(3600)),
        "an absurd lease is capped"
    );
    assert_eq!(stale_after(s(1), Some(1e20), Duration::MAX), Duration::MAX);
}

#[test]
fn the_sweep_watches_non_members_and_temporaries() {
    let s = List(Some(t(W)), std::vec![t(R1)]);
    assert_eq!(swept_holder(R2.as_bytes(), &t(ME), &s), Some(t(R2)));
    assert_eq!(swept_holder(R1.as_bytes(), &t(ME), &s), None, "a member");
    assert_eq!(swept_holder(ME.as_bytes(), &t(ME), &s), None, "our own");
    assert_eq!(swept_holder(b"junk", &t(ME), &s), None);
    assert!(swept_temporary(b".commit-ffff"));
    assert!(!swept_temporary(b".other"));
    let now = Instant(1_000_000_000);
    assert!(sweep_due(now, now));
    let next = next_sweep(now, Duration::from_secs(2));
    assert_eq!(next, Instant(2_000_000_000));
    assert!(!sweep_due(Instant(1_999_999_999), next));
}

#[test]
fn intervals_as_filelock_checks_them() {
    let s = Duration::from_secs;
    assert_eq!(
        valid_intervals(s(30), s(90), Duration::from_millis(250)),
        Ok(())
    );
    assert_eq!(valid_intervals(s(0), s(90), s(1)), Err(Interval::Heartbeat));
    assert_eq!(
        valid_intervals(s(1), s(1), Duration::from_millis(10)),
        Err(Interval::Threshold)
    );
    assert_eq!(valid_intervals(s(30), s(90), s(100)), Err(Interval::Poll));
    assert_eq!(valid_intervals(s(30), s(90), s(0)), Err(Interval::Poll));
}

#[test]
fn heartbeats_report_an_eviction_at_once_and_failures_past_the_margin() {
    use crate::errno::Errno;
    use crate::soft::Compromise;
    assert_eq!(beat(Refreshed::Yes, Some(true)), Beat::Ok);
    assert_eq!(
        beat(Refreshed::Yes, None),
        Beat::Ok,
        "an unreadable log says nothing"
    );
    assert_eq!(beat(Refreshed::Yes, Some(false)), Beat::Lost);
    assert_eq!(beat(Refreshed::Gone, None), Beat::Lost);
    assert_eq!(
        beat(Refreshed::Failed(Errno::IO), Some(true)),
        Beat::Transient(Errno::IO)
    );
    let secs = |s: u64| Instant(s * 1_000_000_000);
    let mut w = BeatWatch::new(secs(0), Duration::from_secs(90), Duration::from_secs(30));
    assert_eq!(w.observe(Beat::Transient(Errno::IO), secs(59)), None);
    assert_eq!(w.observe(Beat::Ok, secs(60)), None);
    assert_eq!(w.observe(Beat::Transient(Errno::IO), secs(119)), None);
    assert_eq!(
        w.observe(Beat::Transient(Errno::IO), secs(120)),
        Some(Compromise::RefreshFailed(Errno::IO))
    );
    assert_eq!(w.observe(Beat::Lost, secs(121)), Some(Compromise::Evicted));
}

#[test]
fn an_operators_look_evicts_at_once_only_the_dead_and_the_recordless() {
    use crate::decide::Liveness;
    use crate::errno::Errno;
    assert_eq!(look(false, Some(Liveness::Alive)), Look::Missing);
    assert_eq!(look(true, Some(Liveness::Alive)), Look::Alive);
    assert_eq!(look(true, Some(Liveness::Dead)), Look::Dead);
    assert_eq!(
        look(true, Some(Liveness::Unknown(Errno::INVAL))),
        Look::Elsewhere
    );
    assert_eq!(look(true, None), Look::Elsewhere);
    assert!(evict_at_once(Look::Dead) && evict_at_once(Look::Missing));
    assert!(!evict_at_once(Look::Alive) && !evict_at_once(Look::Elsewhere));
}

#[test]
fn a_break_looks_again_only_at_what_it_would_evict_at_once_after_a_watch() {
    for l in [Look::Missing, Look::Dead] {
        assert!(
            look_again(l, true, false),
            "{l:?} may be back after a watch"
        );
        assert!(
            !look_again(l, false, false),
            "{l:?}: no watch, no time to come back"
        );
        assert!(
            !look_again(l, true, true),
            "{l:?}: forced, evicted whatever it does"
        );
    }
    for l in [Look::Alive, Look::Elsewhere] {
        assert!(!look_again(l, true, false), "{l:?} is not evicted at once");
    }
}

/// RW3: the two names' identities decide a link, whatever the call
/// answered; a success that left two files behind is a filesystem that
/// cannot show a hard link (sshfs), refused rather than read as a peer's
/// commit, which would have a writer commit generation after generation.
#[test]
fn a_link_is_decided_by_identity_and_two_files_after_a_success_are_refused() {
    use super::files::{link_outcome, FsError};
    use crate::decide::FileId;
    use crate::errno::Errno;
    let (a, b) = (FileId { dev: 1, ino: 7 }, FileId { dev: 1, ino: 8 });
    // Landed, answered either way (a retransmit answers EEXIST).
    assert_eq!(link_outcome(Ok(()), Some(a), Some(a)), Ok(true));
    assert_eq!(link_outcome(Err(Errno::EXIST), Some(a), Some(a)), Ok(true));
    // A peer's link holds the name.
    assert_eq!(link_outcome(Err(Errno::EXIST), Some(a), Some(b)), Ok(false));
    // Our temporary swept from under a stalled commit.
    assert_eq!(link_outcome(Ok(()), None, Some(b)), Ok(false));
    // Success, and two files.
    assert_eq!(
        link_outcome(Ok(()), Some(a), Some(b)),
        Err(FsError::LinkNotOneFile)
    );
    // No hard links at all.
    assert_eq!(
        link_outcome(Err(Errno::PERM), Some(a), None),
        Err(FsError::NoHardLinks(Errno::PERM))
    );
}
