//! Encoding then parsing is the identity, for every record kind and every
//! derived name (property tests).

use proptest::prelude::*;
use swaplock_core::names::{break_name, parse_derived, restore_name, Derived, Token};
use swaplock_core::record::{
    classify, parse_placeholder, Classified, Content, Mode, Reader, Record, V1Record, V2Record,
};
use swaplock_core::start::{StartToken, START_DIGITS_MAX};
use swaplock_core::{pyfloat, Decimal, Pid};

fn pid() -> impl Strategy<Value = Pid> {
    (1..=Pid::MAX).prop_map(|p| Pid::new(p).unwrap())
}

/// Host-like text: mostly what host_name() writes, sometimes spaces,
/// '=' and non-ASCII, which the formats carry too.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[!-~&&[^?]]{1,40}",
        1 => "[a-z =?\u{e9}\u{a0}\u{3000}]{0,12}",
    ]
}

fn digits() -> impl Strategy<Value = String> {
    "[1-9][0-9]{0,70}|0"
}

fn duration() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<u64>()
            .prop_map(|b| f64::from_bits(b >> 1))
            .prop_filter("finite", |d| d.is_finite()),
        (1u32..100_000).prop_map(|n| f64::from(n) / 10.0),
    ]
}

fn mode() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("exclusive".to_owned()),
        Just("lease".to_owned()),
        "[a-z]{0,8}"
    ]
}

fn parse_mode(m: &str) -> Mode<'_> {
    match m {
        "exclusive" => Mode::Exclusive,
        "lease" => Mode::Lease,
        other => Mode::Unknown(other),
    }
}

fn encode(record: &Record<'_>) -> Vec<u8> {
    let mut buf = [0u8; 1024];
    let n = record.encode(&mut buf).unwrap();
    // The writer path produces the same bytes.
    let mut sink = [0u8; 1024];
    let mut writer: &mut [u8] = &mut sink;
    record.write_to(&mut writer).unwrap();
    let written = 1024 - writer.len();
    assert_eq!(&sink[..written], &buf[..n]);
    buf[..n].to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn protocol1_round_trips(pid in pid(), host in text(), start in proptest::option::of(digits())) {
        let r = V1Record { pid, host: &host, start: start.as_deref().map(|s| Decimal::parse(s.as_bytes()).unwrap()) };
        prop_assume!(Record::V1(r).validate().is_ok());
        let bytes = encode(&Record::V1(r));
        prop_assert_eq!(V1Record::parse(std::str::from_utf8(&bytes).unwrap()), Ok(r));
        prop_assert_eq!(classify(Content::Bytes(&bytes), Reader::Protocol1), Classified::V1(r));
    }

    #[test]
    fn protocol2_round_trips(
        pid in pid(),
        host in text(),
        mode in mode(),
        token in proptest::option::of("[0-9a-f]{32}|[!-~]{0,10}"),
        duration in proptest::option::of(duration()),
        start in proptest::option::of(digits()),
    ) {
        let r = V2Record {
            pid,
            host: &host,
            mode: parse_mode(&mode),
            token: token.as_deref(),
            duration,
            start: start.as_deref().map(|s| Decimal::parse(s.as_bytes()).unwrap()),
        };
        prop_assume!(Record::V2(r).validate().is_ok());
        let bytes = encode(&Record::V2(r));
        prop_assert_eq!(V2Record::parse(std::str::from_utf8(&bytes).unwrap()), Ok(r));
        prop_assert_eq!(classify(Content::Bytes(&bytes), Reader::Protocol2), Classified::V2(r));
    }

    #[test]
    fn leases_with_a_token_always_encode(pid in pid(), host in "[!-~&&[^?]]{1,60}", d in 1e-300f64..1e300) {
        let token = "0123456789abcdef0123456789abcdef";
        let r = V2Record { pid, host: &host, mode: Mode::Lease, token: Some(token), duration: Some(d), start: None };
        let bytes = encode(&Record::V2(r));
        prop_assert_eq!(V2Record::parse(std::str::from_utf8(&bytes).unwrap()), Ok(r));
    }

    #[test]
    fn placeholder_round_trips(pid in pid()) {
        let bytes = encode(&Record::Placeholder(pid));
        let text = std::str::from_utf8(&bytes).unwrap();
        prop_assert_eq!(parse_placeholder(text).and_then(|d| d.to_u64()), Some(u64::from(pid.get())));
        // No parser takes a placeholder for a holder.
        prop_assert!(matches!(classify(Content::Bytes(&bytes), Reader::Protocol2), Classified::Malformed(_)));
    }

    #[test]
    fn break_names_round_trip(base in proptest::collection::vec(any::<u8>(), 0..140), pid in digits(), token in any::<[u8; 16]>()) {
        let breaker = Decimal::parse(pid.as_bytes()).unwrap();
        let token = Token(token);
        let name = break_name(&base, breaker, &token).unwrap();
        prop_assert_eq!(parse_derived(&base, &name), Some(Derived::Break { breaker, token }));
    }

    #[test]
    fn restore_names_round_trip(base in proptest::collection::vec(any::<u8>(), 0..150), pid in pid(), token in any::<[u8; 16]>()) {
        let token = Token(token);
        let name = restore_name(&base, pid, &token).unwrap();
        prop_assert_eq!(parse_derived(&base, &name), Some(Derived::Restore { recoverer: pid, token }));
        // A name derived from another lock name never matches this one.
        let mut other = base.clone();
        other.push(b'x');
        prop_assert_eq!(parse_derived(&other, &name), None);
    }

    #[test]
    fn start_tokens_round_trip(high in any::<u128>(), low in any::<u64>()) {
        let t = StartToken { high, low };
        let mut buf = [0u8; START_DIGITS_MAX];
        let d = t.to_decimal(&mut buf);
        prop_assert_eq!(d.to_u192(), Some((high, low)));
        prop_assert!(t.equals(d));
        prop_assert_eq!(d.low_u64(), low);
        prop_assert_eq!(d.fits_u64(), high == 0);
    }

    #[test]
    fn float_repr_reads_back(bits in any::<u64>()) {
        let x = f64::from_bits(bits);
        prop_assume!(x.is_finite());
        let text = pyfloat::repr(x);
        prop_assert_eq!(text.parse::<f64>().unwrap().to_bits(), bits, "{}", text);
        if x >= 0.0 && x.is_sign_positive() {
            prop_assert!(pyfloat::is_duration_text(text.as_bytes()), "{}", text);
        }
    }

    #[test]
    fn read_write_snapshots_round_trip(
        generation in prop_oneof![0u128..1000, 0..=swaplock_core::rw::names::MAX_GENERATION],
        writer in proptest::option::of(any::<[u8; 16]>()),
        readers in proptest::collection::vec(any::<[u8; 16]>(), 0..12),
    ) {
        use swaplock_core::rw::record::{normalize, parse_snapshot, SnapshotRecord};
        let writer = writer.map(Token);
        let mut readers: Vec<Token> = readers.into_iter().map(Token).collect();
        let n = normalize(&mut readers);
        let record = SnapshotRecord { generation, writer, readers: &readers[..n] };
        let mut buf = vec![0u8; record.encoded_len()];
        let len = record.encode(&mut buf).unwrap();
        let back = parse_snapshot(&buf[..len]).unwrap();
        prop_assert_eq!((back.generation, back.writer), (generation, writer));
        prop_assert_eq!(back.readers().collect::<Vec<_>>(), readers[..n].to_vec());
        // The writer path produces the same bytes.
        let mut sink = vec![0u8; len];
        let mut out: &mut [u8] = &mut sink;
        record.write_to(&mut out).unwrap();
        prop_assert_eq!(&sink, &buf);
    }

    #[test]
    fn read_write_holder_leases_round_trip(lease in duration(), token in any::<[u8; 16]>(), pid in pid()) {
        use swaplock_core::rw::record::{holder_lease, HolderRecord};
        prop_assume!(lease > 0.0);
        let record = HolderRecord { token: Token(token), pid, host: "vm", lease, nonce: Token(token) };
        let mut buf = [0u8; 256];
        let len = record.encode(&mut buf).unwrap();
        prop_assert_eq!(holder_lease(&buf[..len]).map(f64::to_bits), Some(lease.to_bits()));
    }
}
