//! The read-write lock's records against the real Python filelock 4.2.11
//! (PROTOCOL 16.2): `tests/peer/rw_golden.py` asks filelock's own
//! `_soft_rw` functions for their snapshot verdicts, snapshot and holder
//! bytes, lease readings and HEAD generations, and the core must agree
//! with every one, byte for byte.
//!
//! Not built for Windows: the peer is a host (Linux) Python, which a test
//! running under Wine cannot start.

#![cfg(not(windows))]

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use swaplock_core::names::Token;
use swaplock_core::rw::record::{
    filelock_binds, head_generation, head_record, holder_lease, normalize, parse_snapshot,
    HolderRecord, SnapshotRecord,
};
use swaplock_core::Pid;

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
    let out = dir.path().join("rw_golden.json");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peer/rw_golden.py");
    let status = Command::new(python())
        .arg(&script)
        .arg(&out)
        .status()
        .expect("run python");
    assert!(status.success(), "rw_golden.py failed: {status}");
    serde_json::from_slice(&std::fs::read(&out).expect("golden output")).expect("golden JSON")
}

fn hex(v: &Value) -> Vec<u8> {
    let s = v.as_str().expect("hex string");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn token(v: &Value) -> Token {
    Token::parse_hex(v.as_str().expect("token").as_bytes()).expect("a token")
}

fn float(v: &Value) -> f64 {
    f64::from_be_bytes(hex(v).try_into().expect("8 bytes"))
}

fn encode(generation: u128, writer: Option<Token>, readers: &mut [Token]) -> Vec<u8> {
    let n = normalize(readers);
    let record = SnapshotRecord {
        generation,
        writer,
        readers: &readers[..n],
    };
    let mut buf = vec![0u8; record.encoded_len()];
    record.encode(&mut buf).expect("encodable");
    buf
}

#[test]
fn the_core_agrees_with_filelock_on_every_case() {
    let g = golden();

    let snapshots = g["snapshots"].as_array().unwrap();
    assert!(snapshots.len() > 3000);
    let mut valid = 0;
    for case in snapshots {
        let bytes = hex(&case["bytes"]);
        let ours = parse_snapshot(&bytes);
        match &case["verdict"] {
            Value::Null => assert!(
                ours.is_err(),
                "{:?}: filelock refuses it",
                String::from_utf8_lossy(&bytes)
            ),
            v => {
                valid += 1;
                let s = ours.unwrap_or_else(|e| {
                    panic!(
                        "{:?}: filelock parses it, we say {e}",
                        String::from_utf8_lossy(&bytes)
                    )
                });
                assert_eq!(s.generation.to_string(), v["generation"].as_str().unwrap());
                assert_eq!(
                    s.writer,
                    (!v["writer"].is_null()).then(|| token(&v["writer"]))
                );
                let mut readers: Vec<Token> = s.readers().collect();
                let expected: Vec<Token> =
                    v["readers"].as_array().unwrap().iter().map(token).collect();
                let n = normalize(&mut readers);
                assert_eq!(&readers[..n], &expected[..]);
                assert_eq!(n, readers.len(), "no repeated reader parses");
                // Re-encoding gives filelock's bytes.
                assert_eq!(
                    encode(s.generation, s.writer, &mut readers),
                    hex(&v["encoded"])
                );
            }
        }
    }
    assert!(
        valid > 100,
        "the mutations keep some records valid: {valid}"
    );

    for case in g["encodes"].as_array().unwrap() {
        let generation: u128 = case["generation"].as_str().unwrap().parse().unwrap();
        let writer = (!case["writer"].is_null()).then(|| token(&case["writer"]));
        let mut readers: Vec<Token> = case["readers"]
            .as_array()
            .unwrap()
            .iter()
            .map(token)
            .collect();
        assert_eq!(
            encode(generation, writer, &mut readers),
            hex(&case["bytes"])
        );
    }

    let (pid, host) = (g["pid"].as_u64().unwrap(), g["host"].as_str().unwrap());
    let holders = g["holders"].as_array().unwrap();
    assert!(holders.len() > 3000);
    for case in holders {
        let record = HolderRecord {
            token: token(&case["token"]),
            pid: Pid::new(u32::try_from(pid).unwrap()).unwrap(),
            host,
            lease: float(&case["lease"]),
            nonce: token(&case["nonce"]),
        };
        let mut buf = vec![0u8; record.encoded_len()];
        record.encode(&mut buf).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&buf),
            String::from_utf8_lossy(&hex(&case["bytes"])),
            "lease {}",
            record.lease
        );
        assert_eq!(
            holder_lease(&buf),
            Some(record.lease),
            "our lease reads back"
        );
    }

    for case in g["leases"].as_array().unwrap() {
        let bytes = hex(&case["bytes"]);
        let expected = (!case["lease"].is_null()).then(|| float(&case["lease"]));
        assert_eq!(
            holder_lease(&bytes).map(f64::to_bits),
            expected.map(f64::to_bits),
            "{:?}",
            String::from_utf8_lossy(&bytes)
        );
    }

    for case in g["heads"].as_array().unwrap() {
        let epoch = (!case["epoch"].is_null()).then(|| hex(&case["epoch"]));
        let head = hex(&case["head"]);
        let generation = head_generation(&head, epoch.as_deref()).map(|n| n.to_string());
        if let Some(torn) = epoch
            .as_deref()
            .filter(|e| !filelock_binds(e) && e.len() <= 33)
        {
            // filelock never binds HEAD to an epoch that holds no token;
            // swaplock binds it to the epoch's exact bytes followed by a
            // snapshot (PROTOCOL 16.9), as a sign that the log is not new,
            // which filelock ignores.
            assert_eq!(case["generation"].as_str(), None, "filelock binds none");
            assert_eq!(case["bound"].as_bool(), Some(false));
            // It names no generation there, for swaplock either.
            assert_eq!(generation, None);
            let after = head.strip_prefix(torn).map(parse_snapshot);
            let ours = after.is_some_and(|s| s.is_ok());
            assert_eq!(
                head_record(&head, Some(torn)).is_some(),
                ours,
                "{:?}",
                String::from_utf8_lossy(&head)
            );
            continue;
        }
        assert_eq!(
            generation.as_deref(),
            case["generation"].as_str(),
            "{:?} under {:?}",
            String::from_utf8_lossy(&head),
            epoch.as_deref().map(String::from_utf8_lossy)
        );
        assert_eq!(
            head_record(&head, epoch.as_deref()).is_some(),
            case["bound"].as_bool().unwrap()
        );
    }
}
