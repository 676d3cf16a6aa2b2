//! The records' tests: the verdicts observed from filelock 4.2.11 for each
//! format, the classification, and the encoder's refusals.

extern crate std;
use super::*;
use std::format;

fn v1(text: &str) -> Result<(u32, &str, Option<&str>), Malformed> {
    V1Record::parse(text).map(|r| (r.pid.get(), r.host, r.start.map(|s| s.as_str())))
}

#[test]
fn protocol1_observed_verdicts() {
    assert_eq!(v1("123\nvm\n"), Ok((123, "vm", None)));
    assert_eq!(v1("123\nvm"), Err(Malformed::NoTrailingNewline));
    assert_eq!(v1("  123\nvm\n"), Ok((123, "vm", None)));
    assert_eq!(v1("123\r\nvm\r\n"), Ok((123, "vm", None)));
    assert_eq!(v1("123\nvm\n\n\n"), Ok((123, "vm", None)));
    assert_eq!(v1("123\n\nvm\n"), Err(Malformed::BadStart));
    assert_eq!(v1("0\nvm\n"), Err(Malformed::PidOutOfRange));
    assert_eq!(v1("2147483648\nvm\n"), Err(Malformed::PidOutOfRange));
    assert_eq!(v1("2147483647\nvm\n"), Ok((2147483647, "vm", None)));
    assert_eq!(v1("+1\nvm\n"), Err(Malformed::BadPid));
    assert_eq!(v1("1_0\nvm\n"), Err(Malformed::BadPid));
    assert_eq!(v1("\u{ff11}\nvm\n"), Err(Malformed::BadPid));
    assert_eq!(v1("007\nvm\n"), Ok((7, "vm", None)));
    assert_eq!(v1("1\nmy host\n"), Ok((1, "my host", None)));
    assert_eq!(v1("1\nvm\n-5\n"), Err(Malformed::BadStart));
    assert_eq!(v1("1\x0bvm\n"), Ok((1, "vm", None)));
    assert_eq!(v1("1\x1cvm\n"), Ok((1, "vm", None)));
    assert_eq!(v1("\u{feff}1\nvm\n"), Err(Malformed::BadPid));
    assert_eq!(v1("1\n\u{a0}\n"), Err(Malformed::LineCount));
    assert_eq!(v1("1\nvm \n"), Ok((1, "vm", None)));
    assert_eq!(v1("1\nvm \n5\n"), Ok((1, "vm ", Some("5"))));
    assert_eq!(v1("1\n\n5\n"), Ok((1, "", Some("5"))));
    assert_eq!(v1("1\nvm\n0005\n"), Ok((1, "vm", Some("5"))));
}

#[test]
fn protocol2_observed_verdicts() {
    let base = "filelock/2\npid=7\nhost=vm\n";
    let parse = |tail: &str| {
        let mut text: heapless::String<256> = heapless::String::new();
        text.push_str(base).unwrap();
        text.push_str(tail).unwrap();
        V2Record::parse(&text).map(|r| (r.mode.as_str() == "", r.duration))
    };
    assert_eq!(parse("mode=\n"), Ok((true, None)));
    assert_eq!(
        parse("mode=exclusive\nduration=30\n"),
        Ok((false, Some(30.0)))
    );
    assert_eq!(
        parse("mode=exclusive\nduration=1e+20\n"),
        Ok((false, Some(1e20)))
    );
    assert_eq!(parse("mode=exclusive\nfoo=bar\n\n"), Ok((false, None)));
    assert_eq!(
        parse("mode=lease\nduration=1.5\n"),
        Err(Malformed::LeaseWithoutToken)
    );
    assert_eq!(
        parse("mode=lease\ntoken=\nduration=1.5\n"),
        Err(Malformed::LeaseWithoutToken)
    );
    assert_eq!(
        parse("mode=lease\ntoken=t\nduration=1e20\n"),
        Err(Malformed::BadDuration)
    );
    assert_eq!(
        parse("mode=lease\ntoken=t\nduration=.5\n"),
        Err(Malformed::BadDuration)
    );
    assert_eq!(
        parse("mode=lease\ntoken=t\nduration=1.5E+2\n"),
        Err(Malformed::BadDuration)
    );
    assert_eq!(
        parse("mode=lease\ntoken=t\nduration=0.0\n"),
        Err(Malformed::LeaseWithoutDuration)
    );
    assert_eq!(
        parse("mode=lease\ntoken=t\nduration=1e+400\n"),
        Err(Malformed::LeaseWithoutDuration)
    );
    assert_eq!(
        parse("mode=lease\ntoken=t\nduration=1e400\n"),
        Err(Malformed::BadDuration)
    );
    assert_eq!(
        parse("mode=exclusive\nduration=1e+400\n"),
        Ok((false, Some(f64::INFINITY)))
    );
    assert_eq!(
        parse("mode=exclusive\nnoequals\n"),
        Err(Malformed::MissingEquals)
    );
    assert_eq!(parse("mode=exclusive\nstart=x\n"), Err(Malformed::BadStart));
    assert_eq!(
        parse("mode=exclusive\npid=0\n"),
        Err(Malformed::PidOutOfRange)
    );
    assert_eq!(
        V2Record::parse("filelock/2 \npid=1\nhost=a\nmode=exclusive\n"),
        Err(Malformed::NotProtocol2)
    );
    assert_eq!(
        V2Record::parse("filelock/3\npid=1\nhost=a\nmode=exclusive\n"),
        Err(Malformed::NotProtocol2)
    );
    let r = V2Record::parse("filelock/2\r\npid=1\r\npid=2\r\nhost=a=b\r\nmode=shared\r\n").unwrap();
    assert_eq!(
        (r.pid.get(), r.host, r.mode),
        (2, "a=b", Mode::Unknown("shared"))
    );
    assert_eq!(
        V2Record::parse("filelock/2\npid=1\nhost=\nmode=exclusive\n"),
        Err(Malformed::MissingHost)
    );
}

#[test]
fn placeholder_observed() {
    let pid = |t| parse_placeholder(t).map(|d| d.as_str());
    assert_eq!(pid("filelock/break\n123\n"), Some("123"));
    assert_eq!(pid("filelock/break\n0\n"), Some("0"));
    assert_eq!(pid("filelock/break\n99999999999\n"), Some("99999999999"));
    assert_eq!(pid("filelock/break\n123\n\n"), None);
    assert_eq!(pid("filelock/break\n12 3\n"), None);
    assert_eq!(pid("filelock/break\n"), None);
}

#[test]
fn classification() {
    let c = |b: &'static [u8], r| classify(Content::Bytes(b), r);
    for r in [Reader::Protocol1, Reader::Protocol2] {
        assert_eq!(c(STRICT_SENTINEL, r), Classified::Sentinel);
        assert_eq!(c(b"", r), Classified::Recordless);
        assert!(matches!(c(b"1\nvm\n", r), Classified::V1(_)));
        assert_eq!(
            c(b"garbage\n", r),
            Classified::Malformed(Malformed::LineCount)
        );
        assert_eq!(c(RELEASED, r), Classified::Malformed(Malformed::LineCount));
        assert_eq!(
            c(&[0xff, b'\n'], r),
            Classified::Malformed(Malformed::NotUtf8)
        );
        assert_eq!(
            c(&[b'1'; READ_LIMIT], r),
            Classified::Malformed(Malformed::TooLong)
        );
        assert_eq!(
            classify(Content::NotRegular, r),
            Classified::Malformed(Malformed::NotRegular)
        );
    }
    let v2 = b"filelock/2\npid=1\nhost=vm\nmode=exclusive\n";
    // A protocol 1 reader judges a protocol 2 record as protocol 2 does,
    // where filelock's SoftFileLock would remove it as malformed.
    assert!(matches!(c(v2, Reader::Protocol1), Classified::V2(_)));
    assert!(matches!(c(v2, Reader::Protocol2), Classified::V2(_)));
    // So does it where the first line follows what Python strips as
    // whitespace, which filelock's protocol 2 parser takes (found by
    // core/tests/golden.rs's torn inputs).
    for led in [
        &b" filelock/2\npid=1\nhost=vm\nmode=exclusive\n"[..],
        b"\rfilelock/2\npid=1\nhost=vm\nmode=exclusive\n",
        b"\x1cfilelock/2\npid=1\nhost=vm\nmode=exclusive\n",
        b"\x1ffilelock/2\npid=1\nhost=vm\nmode=exclusive\n",
    ] {
        assert!(matches!(c(led, Reader::Protocol2), Classified::V2(_)));
        assert!(
            matches!(c(led, Reader::Protocol1), Classified::V2(_)),
            "{led:?}"
        );
    }
}

#[test]
fn a_protocol2_reader_says_why_a_protocol2_text_is_malformed() {
    let no_mode = b"filelock/2\npid=1\nhost=vm\n";
    assert_eq!(
        classify(Content::Bytes(no_mode), Reader::Protocol2),
        Classified::Malformed(Malformed::MissingMode)
    );
    assert_eq!(
        classify(Content::Bytes(no_mode), Reader::Protocol1),
        Classified::Malformed(Malformed::MissingMode)
    );
    let not_protocol2 = b"filelock/3\npid=1\nhost=vm\nmode=exclusive\n";
    assert_eq!(
        classify(Content::Bytes(not_protocol2), Reader::Protocol1),
        Classified::Malformed(Malformed::LineCount)
    );
}

#[test]
fn a_duration_is_encoded_only_if_finite_and_not_negative() {
    let exclusive = |duration| {
        Record::V2(V2Record {
            pid: Pid::new(1).unwrap(),
            host: "vm",
            mode: Mode::Exclusive,
            token: None,
            duration: Some(duration),
            start: None,
        })
        .validate()
    };
    assert_eq!(exclusive(0.0), Ok(()));
    assert_eq!(exclusive(30.0), Ok(()));
    for bad in [-1.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
        assert_eq!(exclusive(bad), Err(Invalid::Duration), "{bad}");
    }
}

#[test]
fn an_unknown_mode_is_never_spelled_as_a_known_one() {
    let unknown = |name| {
        Record::V2(V2Record {
            pid: Pid::new(1).unwrap(),
            host: "vm",
            mode: Mode::Unknown(name),
            token: None,
            duration: None,
            start: None,
        })
        .validate()
    };
    assert_eq!(unknown("exclusive"), Err(Invalid::AmbiguousMode));
    assert_eq!(unknown("lease"), Err(Invalid::AmbiguousMode));
    assert_eq!(unknown("shared"), Ok(()));
}

#[test]
fn a_lease_is_encoded_only_with_a_positive_duration() {
    let lease = |duration| {
        Record::V2(V2Record {
            pid: Pid::new(1).unwrap(),
            host: "vm",
            mode: Mode::Lease,
            token: Some("t"),
            duration: Some(duration),
            start: None,
        })
        .validate()
    };
    assert_eq!(lease(f64::MIN_POSITIVE), Ok(()));
    assert_eq!(lease(0.0), Err(Invalid::Duration));
}

#[test]
fn encoding_accepts_exactly_the_1024_bytes_a_reader_reads() {
    let hosts = [b'a'; MAX_RECORD_LEN];
    let record = |host_len| {
        Record::V1(V1Record {
            pid: Pid::new(1).unwrap(),
            // ASCII letters only.
            host: core::str::from_utf8(&hosts[..host_len]).unwrap(),
            start: None,
        })
    };
    // "1\n" + host + "\n"
    let longest = record(MAX_RECORD_LEN - 3);
    assert_eq!(longest.encoded_len(), MAX_RECORD_LEN);
    let mut buf = [0u8; READ_LIMIT];
    let len = longest.encode(&mut buf).unwrap();
    assert!(matches!(
        classify(Content::Bytes(&buf[..len]), Reader::Protocol1),
        Classified::V1(_)
    ));
    assert_eq!(record(MAX_RECORD_LEN - 2).validate(), Err(Invalid::TooLong));
}

#[test]
fn errors_print_as_text() {
    assert_eq!(format!("{}", Malformed::MissingMode), "no mode");
    assert_eq!(
        format!("{}", Invalid::TooLong),
        "the record is longer than 1024 bytes"
    );
    let e: EncodeError<()> = EncodeError::Invalid(Invalid::LeaseToken);
    assert_eq!(
        format!("{e}"),
        "record not encodable: a lease needs a non-empty token"
    );
    let e: EncodeError<()> = EncodeError::BufferTooSmall(18);
    assert_eq!(format!("{e}"), "buffer too small: record needs 18 bytes");
    let e: EncodeError<()> = EncodeError::Write(());
    assert_eq!(format!("{e}"), "write failed: ()");
}

#[test]
fn encoding_refuses_what_would_not_read_back() {
    let pid = Pid::new(1).unwrap();
    let bad_host = Record::V1(V1Record {
        pid,
        host: "vm ",
        start: None,
    });
    assert_eq!(bad_host.validate(), Err(Invalid::HostStripped));
    let lf = Record::V1(V1Record {
        pid,
        host: "a\u{2028}b",
        start: None,
    });
    assert_eq!(lf.validate(), Err(Invalid::LineBreak));
    let lease = V2Record {
        pid,
        host: "vm",
        mode: Mode::Lease,
        token: None,
        duration: Some(1.0),
        start: None,
    };
    assert_eq!(Record::V2(lease).validate(), Err(Invalid::LeaseToken));
    let mut buf = [0u8; 8];
    assert_eq!(
        Record::Released.encode(&mut buf),
        Err(EncodeError::BufferTooSmall(RELEASED.len()))
    );
}
