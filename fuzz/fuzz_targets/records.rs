//! Every record parser on arbitrary bytes: no panic, and whatever parses
//! and is encodable reads back to the same fields (the soft kinds' markers,
//! and the read-write lock's snapshots and holder records); a strict claim
//! record, which carries its token, is read as the claim of the token its
//! second line names (or of a fixed one), and re-encodes to the same bytes;
//! and the SQLite lock's header verdict (PROTOCOL 17.1), which never takes
//! a file without the magic for a database.
#![no_main]

use libfuzzer_sys::fuzz_target;
use swaplock_core::names::Token;
use swaplock_core::record::{
    classify, decode, parse_placeholder, Classified, Content, Reader, Record, V1Record, V2Record,
    MAX_RECORD_LEN,
};
use swaplock_core::rw::record::{
    holder_lease, normalize, parse_snapshot, HolderRecord, SnapshotRecord,
};
use swaplock_core::strict::claim::{encode_claim, parse_claim};
use swaplock_core::strict::RECORD_LIMIT;
use swaplock_core::Pid;

fn round_trip(record: Record<'_>) {
    if record.validate().is_err() {
        return;
    }
    let mut buf = [0u8; MAX_RECORD_LEN];
    let n = record
        .encode(&mut buf)
        .expect("a valid record fits the cap");
    let text = core::str::from_utf8(&buf[..n]).expect("records are UTF-8");
    match record {
        Record::V1(r) => assert_eq!(V1Record::parse(text), Ok(r)),
        Record::V2(r) => {
            let back = V2Record::parse(text).expect("a valid protocol 2 record parses");
            // NaN never parses, so field equality is the right comparison.
            assert_eq!(back, r);
        }
        Record::Placeholder(_) | Record::Released => {}
    }
}

/// A strict claim record: no panic; a parsed one encodes back to its
/// exact bytes (the parser takes canonical fields only).
fn strict_claim(data: &[u8]) {
    let named = data.split(|&b| b == b'\n').nth(1);
    let token = named
        .and_then(Token::parse_hex)
        .unwrap_or(Token([0x5a; 16]));
    let Ok(claim) = parse_claim(&token, data) else {
        return;
    };
    let mut buf = [0u8; RECORD_LIMIT];
    let n = encode_claim(&token, claim.pid, claim.host(), claim.start, &mut buf)
        .expect("a parsed claim encodes");
    assert_eq!(&buf[..n], data);
}

/// A snapshot that parses re-encodes, sorted, to one that parses back to
/// the same generation and members; a lease that reads from a record reads
/// back from ours.
fn read_write_records(data: &[u8]) {
    if let Ok(s) = parse_snapshot(data) {
        let mut readers: Vec<Token> = s.readers().collect();
        let n = normalize(&mut readers);
        assert_eq!(n, readers.len(), "a parsed snapshot repeats no reader");
        let record = SnapshotRecord {
            generation: s.generation,
            writer: s.writer,
            readers: &readers,
        };
        let mut buf = vec![0u8; record.encoded_len()];
        let len = record
            .encode(&mut buf)
            .expect("a parsed snapshot is encodable");
        let back = parse_snapshot(&buf[..len]).expect("our encoding parses");
        assert_eq!((back.generation, back.writer), (s.generation, s.writer));
        assert_eq!(back.readers().collect::<Vec<_>>(), readers);
        if data.len() == len {
            // Same size and same members: only the order of lines differs.
            let mut a = data.to_vec();
            let mut b = buf[..len].to_vec();
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b);
        }
    }
    if let Some(lease) = holder_lease(data) {
        assert!(lease.is_finite() && lease > 0.0);
        let record = HolderRecord {
            token: Token([7; 16]),
            pid: Pid::new(1).expect("1 is a PID"),
            host: "host",
            lease,
            nonce: Token([9; 16]),
        };
        let mut buf = [0u8; 256];
        let len = record.encode(&mut buf).expect("a read lease is encodable");
        assert_eq!(holder_lease(&buf[..len]), Some(lease));
    }
}

fuzz_target!(|data: &[u8]| {
    strict_claim(data);
    read_write_records(data);
    let content = Content::Bytes(data);
    for reader in [Reader::Protocol1, Reader::Protocol2] {
        match classify(content, reader) {
            Classified::V1(r) => round_trip(Record::V1(r)),
            Classified::V2(r) => {
                assert_eq!(reader, Reader::Protocol2);
                round_trip(Record::V2(r));
            }
            Classified::Sentinel | Classified::Recordless | Classified::Malformed(_) => {}
        }
    }
    if let Ok(text) = decode(content) {
        if let Ok(r) = V1Record::parse(text) {
            round_trip(Record::V1(r));
        }
        if let Ok(r) = V2Record::parse(text) {
            round_trip(Record::V2(r));
        }
        if let Some(pid) = parse_placeholder(text) {
            assert!(pid.as_str().bytes().all(|b| b.is_ascii_digit()));
        }
    }
    let header = swaplock_core::sqlite::judge_header(data);
    if header.usable() && !data.is_empty() {
        assert!(data.starts_with(swaplock_core::sqlite::MAGIC));
    }
});
