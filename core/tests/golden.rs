//! swaplock-core against the real Python filelock 4.2.11.
//!
//! `tests/peer/golden.py` asks filelock for the markers its soft lock kinds
//! write, its parsers' verdicts on hostile and torn inputs, its host names,
//! float spellings, start-token comparisons and staleness verdicts; this test
//! checks that the core agrees with every one and re-encodes every record
//! byte for byte.
//!
//! The interpreter is `$SWAPLOCK_PYTHON`, or `.venv/bin/python` at the
//! workspace root, as `scripts/setup` creates it.
//!
//! Not built for Windows: the peer is a host (Linux) Python, which a test
//! running under Wine cannot start. Nothing the cases check is specific to
//! an OS.

#![cfg(not(windows))]

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use swaplock_core::decide::{judge_owner, Liveness, Verdict};
use swaplock_core::host::host_name;
use swaplock_core::names::Token;
use swaplock_core::record::{
    classify, decode, parse_placeholder, Classified, Content, Mode, Reader, Record, V1Record,
    V2Record, RELEASED, STRICT_SENTINEL,
};
use swaplock_core::start::{
    parse_boot_id, parse_stat_starttime, same_start, StartToken, START_DIGITS_MAX,
};
use swaplock_core::strict::claim::{encode_claim, parse_claim, ClaimName};
use swaplock_core::strict::names::{is_probe_name, private_public_name};
use swaplock_core::{pyfloat, Decimal, Errno, Pid};

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("SWAPLOCK_PYTHON") {
        return p.into();
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    assert!(
        venv.exists(),
        "no Python with filelock 4.2.11: run scripts/setup, or set SWAPLOCK_PYTHON (looked for {})",
        venv.display()
    );
    venv
}

fn golden() -> Value {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("golden.json");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peer/golden.py");
    let status = Command::new(python())
        .arg(&script)
        .arg(&out)
        .current_dir(dir.path())
        .status()
        .expect("run python");
    assert!(status.success(), "golden.py failed: {status}");
    serde_json::from_slice(&std::fs::read(&out).expect("golden output")).expect("golden JSON")
}

fn hex(v: &Value) -> Vec<u8> {
    let s = v.as_str().expect("hex string");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn opt_str(v: &Value) -> Option<&str> {
    v.as_str()
}

fn decimal(s: &str) -> Decimal<'_> {
    Decimal::parse(s.as_bytes()).expect("decimal")
}

/// A 192-bit token from its decimal spelling.
fn token(s: &str) -> StartToken {
    let (high, low) = decimal(s).to_u192().expect("fits 192 bits");
    StartToken { high, low }
}

fn encode(record: Record<'_>) -> Vec<u8> {
    let mut buf = [0u8; 1024];
    let n = record.encode(&mut buf).expect("encodable");
    buf[..n].to_vec()
}

#[test]
fn core_agrees_with_filelock_4_2_11() {
    let g = golden();
    let mut cases = 0usize;
    let pid = Pid::new(g["pid"].as_u64().unwrap() as u32).unwrap();
    let host = g["host"].as_str().unwrap();
    let start = opt_str(&g["start"]);

    // Markers each kind wrote, parsed to the right fields and re-encoded byte for byte.
    for m in g["markers"].as_array().unwrap() {
        let bytes = hex(&m["bytes"]);
        let text = decode(Content::Bytes(&bytes)).unwrap();
        match m["kind"].as_str().unwrap() {
            "soft" => {
                let r = V1Record::parse(text).unwrap();
                assert_eq!(
                    (r.pid, r.host, r.start.map(|s| s.as_str())),
                    (pid, host, start)
                );
                assert!(matches!(
                    classify(Content::Bytes(&bytes), Reader::Protocol1),
                    Classified::V1(_)
                ));
                assert_eq!(encode(Record::V1(r)), bytes);
            }
            kind => {
                let r = V2Record::parse(text).unwrap();
                assert_eq!(
                    (r.pid, r.host, r.start.map(|s| s.as_str())),
                    (pid, host, start)
                );
                if kind == "lease" {
                    assert_eq!(r.mode, Mode::Lease);
                    assert_eq!(r.token, m["token"].as_str());
                    let duration: f64 = m["duration"].as_str().unwrap().parse().unwrap();
                    assert_eq!(r.duration, Some(duration));
                    assert_eq!(
                        pyfloat::repr(duration).as_str(),
                        m["duration"].as_str().unwrap()
                    );
                } else {
                    assert_eq!((r.mode, r.token, r.duration), (Mode::Exclusive, None, None));
                }
                assert!(matches!(
                    classify(Content::Bytes(&bytes), Reader::Protocol2),
                    Classified::V2(_)
                ));
                // filelock's SoftFileLock takes it for malformed; a protocol 1
                // reader of ours judges it as protocol 2 does (PROTOCOL 3.5).
                assert!(matches!(
                    classify(Content::Bytes(&bytes), Reader::Protocol1),
                    Classified::V2(_)
                ));
                assert_eq!(encode(Record::V2(r)), bytes);
            }
        }
        cases += 1;
    }

    // The placeholder and the released record.
    let placeholder = hex(&g["placeholder"]);
    assert_eq!(encode(Record::Placeholder(pid)), placeholder);
    let text = std::str::from_utf8(&placeholder).unwrap();
    assert_eq!(
        parse_placeholder(text).map(|d| d.as_str().to_owned()),
        Some(pid.to_string())
    );
    assert_eq!(hex(&g["released"]), RELEASED);
    assert_eq!(encode(Record::Released), RELEASED);
    cases += 2;

    // The parsers' verdicts on hostile, torn and mutated inputs.
    for v in g["verdicts"].as_array().unwrap() {
        let bytes = hex(&v["bytes"]);
        let text = decode(Content::Bytes(&bytes)).ok();
        let what = String::from_utf8_lossy(&bytes).into_owned();
        let ours_v1 = text.and_then(|t| V1Record::parse(t).ok());
        match (&v["v1"], ours_v1) {
            (Value::Null, None) => {}
            (Value::Array(want), Some(r)) => {
                assert_eq!(r.pid.get() as u64, want[0].as_u64().unwrap(), "{what:?}");
                assert_eq!(r.host, want[1].as_str().unwrap(), "{what:?}");
                assert_eq!(r.start.map(|s| s.as_str()), opt_str(&want[2]), "{what:?}");
                // Whatever parses and is encodable reads back the same.
                if Record::V1(r).validate().is_ok() {
                    let again = encode(Record::V1(r));
                    assert_eq!(
                        V1Record::parse(std::str::from_utf8(&again).unwrap()),
                        Ok(r),
                        "{what:?}"
                    );
                }
            }
            (want, got) => panic!("protocol 1 verdict on {what:?}: filelock {want}, core {got:?}"),
        }
        let ours_v2 = text.and_then(|t| V2Record::parse(t).ok());
        match (&v["v2"], ours_v2) {
            (Value::Null, None) => {}
            (Value::Object(want), Some(r)) => {
                assert_eq!(
                    r.pid.get() as u64,
                    want["pid"].as_u64().unwrap(),
                    "{what:?}"
                );
                assert_eq!(r.host, want["host"].as_str().unwrap(), "{what:?}");
                let mode = match r.mode {
                    Mode::Exclusive => "exclusive",
                    Mode::Lease => "lease",
                    Mode::Unknown(_) => "unknown",
                };
                assert_eq!(mode, want["mode"].as_str().unwrap(), "{what:?}");
                assert_eq!(r.token, opt_str(&want["token"]), "{what:?}");
                let duration = opt_str(&want["duration"])
                    .map(|h| f64::from_bits(u64::from_str_radix(h, 16).unwrap()));
                assert_eq!(
                    r.duration.map(f64::to_bits),
                    duration.map(f64::to_bits),
                    "{what:?}"
                );
                assert_eq!(
                    r.start.map(|s| s.as_str()),
                    opt_str(&want["start"]),
                    "{what:?}"
                );
                if Record::V2(r).validate().is_ok() {
                    let again = encode(Record::V2(r));
                    assert_eq!(
                        V2Record::parse(std::str::from_utf8(&again).unwrap()),
                        Ok(r),
                        "{what:?}"
                    );
                }
            }
            (want, got) => panic!("protocol 2 verdict on {what:?}: filelock {want}, core {got:?}"),
        }
        let ours_ph = text
            .and_then(parse_placeholder)
            .map(|d| d.as_str().to_owned());
        assert_eq!(
            ours_ph.as_deref(),
            opt_str(&v["placeholder"]),
            "placeholder {what:?}"
        );
        let sentinel = v["sentinel"].as_bool().unwrap();
        assert_eq!(bytes == STRICT_SENTINEL, sentinel, "{what:?}");
        // The classification follows from the parsers (PROTOCOL 3.5).
        let c1 = classify(Content::Bytes(&bytes), Reader::Protocol1);
        let expect1 = if sentinel {
            matches!(c1, Classified::Sentinel)
        } else if bytes.is_empty() {
            matches!(c1, Classified::Recordless)
        } else if v["v1"].is_array() {
            matches!(c1, Classified::V1(_))
        } else if v["v2"].is_object() {
            // Malformed to filelock's SoftFileLock, a protocol 2 record to
            // ours, judged as protocol 2 judges it (PROTOCOL 3.5).
            matches!(c1, Classified::V2(_))
        } else {
            matches!(c1, Classified::Malformed(_))
        };
        assert!(expect1, "classification of {what:?}: {c1:?}");
        cases += 1;
    }

    // Lease durations are spelled as Python's repr.
    for r in g["reprs"].as_array().unwrap() {
        let bits = u64::from_str_radix(r[0].as_str().unwrap(), 16).unwrap();
        assert_eq!(
            pyfloat::repr(f64::from_bits(bits)).as_str(),
            r[1].as_str().unwrap(),
            "{bits:#x}"
        );
        cases += 1;
    }

    // host_name() for raw host names and PID namespaces.
    for h in g["hosts"].as_array().unwrap() {
        let raw = hex(&h[0]);
        let ns = h[1].as_u64();
        assert_eq!(
            host_name(&raw, ns).as_str(),
            h[2].as_str().unwrap(),
            "{raw:x?} {ns:?}"
        );
        cases += 1;
    }

    // This process's start token, from the same files filelock reads.
    if let (Some(boot), Some(stat), Some(start)) =
        (g.get("boot_id_text"), g.get("stat_text"), start)
    {
        let t = StartToken::linux(
            parse_boot_id(&hex(boot)),
            parse_stat_starttime(&hex(stat)).unwrap(),
        );
        let mut buf = [0u8; START_DIGITS_MAX];
        assert_eq!(t.to_decimal(&mut buf).as_str(), start);
        cases += 1;
    }

    for p in g["same_start"].as_array().unwrap() {
        let (a, b) = (p[0].as_str().unwrap(), p[1].as_str().unwrap());
        assert_eq!(
            same_start(token(a), decimal(b)),
            p[2].as_bool().unwrap(),
            "{a} vs {b}"
        );
        cases += 1;
    }

    // Staleness verdicts for given probe answers.
    for s in g["stale"].as_array().unwrap() {
        let owner = swaplock_core::record::Owner {
            pid: Pid::new(42).unwrap(),
            host: s["host"].as_str().unwrap(),
            start: opt_str(&s["recorded"]).map(decimal),
        };
        let probe = match s["probe"].as_str().unwrap() {
            "alive" => Liveness::Alive,
            "dead" => Liveness::Dead,
            _ => Liveness::Unknown(Errno::INVAL),
        };
        let current = opt_str(&s["current"]).map(token);
        let verdict = match judge_owner(&owner, s["here"].as_str().unwrap(), probe, current) {
            Verdict::Held(_) => "held",
            // The golden run patches the /proc scan to find nothing.
            Verdict::Stale | Verdict::StaleUnlessRunsElsewhere => "stale",
        };
        assert_eq!(verdict, s["verdict"].as_str().unwrap(), "{s}");
        cases += 1;
    }

    cases += strict_cases(&g, pid, host, start);

    eprintln!("golden cases checked against filelock 4.2.11: {cases}");
    assert!(cases > 5000, "golden.py produced too few cases: {cases}");
}

/// The strict lock: the sentinel and a claim as filelock wrote them, its
/// claim parser's verdicts, and its name recognisers'. Returns the number
/// of cases.
fn strict_cases(g: &Value, pid: Pid, host: &str, start: Option<&str>) -> usize {
    let mut cases = 0;
    assert_eq!(hex(&g["strict_sentinel"]), STRICT_SENTINEL);
    let written = &g["strict_claim"];
    let name = ClaimName::parse(written["name"].as_str().unwrap().as_bytes()).unwrap();
    let bytes = hex(&written["bytes"]);
    let mut buf = [0u8; 1024];
    let n = encode_claim(&name.token, pid, host, start.map(decimal), &mut buf).unwrap();
    assert_eq!(&buf[..n], bytes, "a claim encodes as filelock writes it");
    cases += 2;
    for c in g["strict_claims"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let token = ClaimName::parse(name.as_bytes()).unwrap().token;
        let bytes = hex(&c["bytes"]);
        let ours = parse_claim(&token, &bytes).ok();
        let what = String::from_utf8_lossy(&bytes).into_owned();
        match (&c["claim"], ours) {
            (Value::Null, None) => {}
            // The one difference: an unassigned code point in the host,
            // which filelock refuses (PROTOCOL 18.2).
            (Value::Null, Some(_)) if c["unassigned"].as_bool().unwrap() => {}
            (Value::Object(want), Some(claim)) => {
                assert_eq!(
                    u64::from(claim.pid.get()),
                    want["pid"].as_u64().unwrap(),
                    "{what:?}"
                );
                assert_eq!(claim.host(), want["host"].as_str().unwrap(), "{what:?}");
                assert_eq!(
                    claim.start.map(|s| s.as_str()),
                    opt_str(&want["start"]),
                    "{what:?}"
                );
                let n =
                    encode_claim(&token, claim.pid, claim.host(), claim.start, &mut buf).unwrap();
                assert_eq!(
                    &buf[..n],
                    bytes,
                    "a parsed claim re-encodes exactly: {what:?}"
                );
            }
            (want, got) => panic!("claim verdict on {what:?}: filelock {want}, core {got:?}"),
        }
        cases += 1;
    }
    for v in g["strict_names"].as_array().unwrap() {
        let name = v["name"].as_str().unwrap();
        let ours = ClaimName::parse(name.as_bytes()).map(|c| (c.state.as_str(), c.token));
        let theirs = v["claim"].as_array().map(|p| {
            let token = Token::parse_hex(p[1].as_str().unwrap().as_bytes()).unwrap();
            (p[0].as_str().unwrap(), token)
        });
        assert_eq!(ours, theirs, "claim name {name:?}");
        let private = private_public_name(name.as_bytes()).map(|p| std::str::from_utf8(p).unwrap());
        assert_eq!(private, opt_str(&v["private"]), "private name {name:?}");
        assert_eq!(
            is_probe_name(name.as_bytes()),
            v["probe"].as_bool().unwrap(),
            "{name:?}"
        );
        cases += 1;
    }
    cases
}
