//! Every record parser on arbitrary bytes: no panic, and whatever parses
//! and is encodable reads back to the same fields; and the SQLite lock's
//! header verdict (PROTOCOL 16.1), which never takes a file without the
//! magic for a database.
#![no_main]

use libfuzzer_sys::fuzz_target;
use swaplock_core::record::{
    classify, decode, parse_placeholder, Classified, Content, Reader, Record, V1Record, V2Record,
    MAX_RECORD_LEN,
};

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

fuzz_target!(|data: &[u8]| {
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
