//! The strict lock's vectors: the records and verdicts observed from
//! filelock 4.2.11 (PROTOCOL-RW 2.3, 5.2.1), its names, and the doorway's
//! decisions.

extern crate std;
use super::claim::*;
use super::doorway::*;
use super::names::*;
use super::occupant::*;
use super::*;
use crate::decide::{FileTime, HeldBecause, Liveness};
use crate::decimal::Decimal;
use crate::errno::Errno;
use crate::names::Token;
use crate::pid::Pid;
use crate::soft::{Processes, Standing};
use crate::start::StartToken;
use std::format;
use std::string::String;
use std::vec::Vec;

const OBSERVED: &[u8] = b"filelock-strict-v1\n134be3102adef1d913f9a5a2ffcfd0ad\n915\n766d\n4924781436517889003167699673054697897733501106152911627251\n";
const OBSERVED_START: &str = "4924781436517889003167699673054697897733501106152911627251";

fn token(hex: &str) -> Token {
    Token::parse_hex(hex.as_bytes()).unwrap()
}

fn observed_token() -> Token {
    token("134be3102adef1d913f9a5a2ffcfd0ad")
}

/// The observed record with one field replaced (0 magic .. 4 start).
fn with_field(field: usize, value: &str) -> Vec<u8> {
    let text = core::str::from_utf8(OBSERVED).unwrap();
    let mut fields: Vec<&str> = text.split('\n').collect();
    fields[field] = value;
    fields.join("\n").into_bytes()
}

fn parse(record: &[u8]) -> Result<(u32, String, Option<String>), MalformedClaim> {
    parse_claim(&observed_token(), record).map(|c| {
        (
            c.pid.get(),
            String::from(c.host()),
            c.start.map(|s| String::from(s.as_str())),
        )
    })
}

#[test]
fn the_observed_record_parses_and_encodes_to_the_same_bytes() {
    assert_eq!(OBSERVED.len(), 120);
    assert_eq!(
        parse(OBSERVED),
        Ok((915, "vm".into(), Some(OBSERVED_START.into())))
    );
    let mut buf = [0u8; RECORD_LIMIT];
    let start = Decimal::parse(OBSERVED_START.as_bytes());
    let n = encode_claim(
        &observed_token(),
        Pid::new(915).unwrap(),
        "vm",
        start,
        &mut buf,
    )
    .unwrap();
    assert_eq!(&buf[..n], OBSERVED);
    // Without a start token the field is empty, and still six fields.
    let n = encode_claim(
        &observed_token(),
        Pid::new(1).unwrap(),
        "vm",
        None,
        &mut buf,
    )
    .unwrap();
    assert_eq!(
        &buf[..n],
        b"filelock-strict-v1\n134be3102adef1d913f9a5a2ffcfd0ad\n1\n766d\n\n"
    );
    assert_eq!(parse(&buf[..n]), Ok((1, "vm".into(), None)));
}

#[test]
fn a_start_token_we_compute_encodes_as_filelock_writes_it() {
    // A 192-bit Linux token (PROTOCOL 4.2): its decimal digits, read back.
    let token = StartToken::linux(0xc8d9_1e07_0000_0000_0000_0000_0000_0000, 222195);
    let mut digits = [0u8; crate::start::START_DIGITS_MAX];
    let decimal = token.to_decimal(&mut digits);
    let mut buf = [0u8; RECORD_LIMIT];
    let n = encode_claim(
        &observed_token(),
        Pid::new(7).unwrap(),
        "vm",
        Some(decimal),
        &mut buf,
    )
    .unwrap();
    let claim = parse_claim(&observed_token(), &buf[..n]).unwrap();
    assert_eq!(claim.start, Some(decimal));
}

#[test]
fn the_observed_malformed_records_are_refused() {
    // A seventh field, a token mismatch, uppercase hex (PROTOCOL-RW 2.3).
    let mut seventh = OBSERVED.to_vec();
    seventh.extend_from_slice(b"x\n");
    assert_eq!(parse(&seventh), Err(MalformedClaim::FieldCount));
    assert_eq!(
        parse(&with_field(1, "234be3102adef1d913f9a5a2ffcfd0ad")),
        Err(MalformedClaim::TokenMismatch)
    );
    assert_eq!(parse(&with_field(3, "766D")), Err(MalformedClaim::Host));
    // And PROTOCOL-RW 5.2.1's: pid 0 or +5, a start with a leading zero.
    assert_eq!(parse(&with_field(2, "0")), Err(MalformedClaim::Pid));
    assert_eq!(parse(&with_field(2, "+5")), Err(MalformedClaim::Pid));
    assert_eq!(parse(&with_field(4, "05")), Err(MalformedClaim::Start));
}

#[test]
fn every_field_is_read_as_filelock_reads_it() {
    let ok = |field, value: &str| parse(&with_field(field, value)).is_ok();
    // pid: canonical decimal in 1..=2^31-1.
    assert!(ok(2, "1"));
    assert!(ok(2, "2147483647"));
    for bad in [
        "2147483648",
        "007",
        "-5",
        " 5",
        "5 ",
        "",
        "1_0",
        "99999999999999999999999",
    ] {
        assert!(!ok(2, bad), "pid {bad:?}");
    }
    // start: empty, or canonical non-negative decimal of any length.
    assert!(ok(4, ""));
    assert!(ok(4, "0"));
    assert!(ok(4, &"9".repeat(400)));
    for bad in ["00", "-0", "+1", "1 ", "x"] {
        assert!(!ok(4, bad), "start {bad:?}");
    }
    // host: canonical lowercase hex of printable UTF-8 without whitespace.
    assert!(ok(3, ""), "an empty host is Python's empty string");
    assert!(ok(3, "6361666ec3a9")); // "café"
    assert!(ok(3, "763f7069646e732d66303030303135320a"[..32].as_ref())); // "v?pidns-f0000152"
    for bad in [
        "766",      // odd length
        "7g",       // not hex
        "612062",   // "a b": a space
        "610962",   // a tab
        "61c2a062", // U+00A0, a no-break space
        "e2808b",   // U+200B, a format character
        "ee8080",   // U+E000, private use
        "ff",       // not UTF-8
        "00",       // a control
        "76 6d",    // Python's fromhex takes spaces; its check refuses them
    ] {
        assert!(!ok(3, bad), "host {bad:?}");
    }
    // magic, the record's shape and size.
    assert_eq!(
        parse(&with_field(0, "filelock-strict-v2")),
        Err(MalformedClaim::Magic)
    );
    assert_eq!(parse(&OBSERVED[..119]), Err(MalformedClaim::FieldCount));
    assert_eq!(parse(b""), Err(MalformedClaim::FieldCount));
    let crlf = String::from_utf8(OBSERVED.to_vec())
        .unwrap()
        .replace('\n', "\r\n");
    assert!(parse(crlf.as_bytes()).is_err());
    assert_eq!(
        parse(&with_field(3, "766d\u{e9}")),
        Err(MalformedClaim::NotAscii)
    );
    let long = with_field(4, &"1".repeat(RECORD_LIMIT));
    assert_eq!(parse(&long), Err(MalformedClaim::TooLong));
    // Exactly the limit is fine; one byte more is not.
    let start = RECORD_LIMIT - (OBSERVED.len() - OBSERVED_START.len());
    assert_eq!(with_field(4, &"1".repeat(start)).len(), RECORD_LIMIT);
    assert!(parse(&with_field(4, &"1".repeat(start))).is_ok());
    assert_eq!(
        parse(&with_field(4, &"1".repeat(start + 1))),
        Err(MalformedClaim::TooLong)
    );
    // A seventh field, empty (a trailing empty line) or without its own
    // newline.
    let mut trailing = OBSERVED.to_vec();
    trailing.push(b'\n');
    assert_eq!(parse(&trailing), Err(MalformedClaim::FieldCount));
    let mut unended = OBSERVED.to_vec();
    unended.push(b'x');
    assert_eq!(parse(&unended), Err(MalformedClaim::FieldCount));
    // The reasons print as filelock's words, with the cause.
    assert_eq!(
        format!("{}", MalformedClaim::Pid),
        "malformed claim record (no PID in 1..2147483647)"
    );
}

#[test]
fn the_encoder_refuses_what_would_not_read_back() {
    let mut buf = [0u8; RECORD_LIMIT];
    let pid = Pid::new(1).unwrap();
    let t = observed_token();
    assert_eq!(
        encode_claim(&t, pid, "my host", None, &mut buf),
        Err(EncodeClaimError::Invalid(MalformedClaim::Host))
    );
    assert_eq!(
        encode_claim(&t, pid, "vm", None, &mut buf[..10]),
        Err(EncodeClaimError::TooLong)
    );
    // Our own host names (PROTOCOL 4.1) are printable ASCII: always encodable.
    let host = crate::host::host_name(b"x\n y\xff", Some(0xf000_0152));
    assert!(encode_claim(&t, pid, &host, None, &mut buf).is_ok());
}

#[test]
fn claim_names_are_exactly_filelocks() {
    let t = "134be3102adef1d913f9a5a2ffcfd0ad";
    let intent = format!("intent-v1-{t}.claim");
    let held = format!("held-v1-{t}.claim");
    let parsed = ClaimName::parse(intent.as_bytes()).unwrap();
    assert_eq!(parsed.state, ClaimState::Intent);
    assert_eq!(parsed.encode().as_str(), intent);
    assert_eq!(
        ClaimName::parse(held.as_bytes()).unwrap().encode().as_str(),
        held
    );
    for bad in [
        format!("intent-v2-{t}.claim"),
        format!("Intent-v1-{t}.claim"),
        format!("intent-v1-{}.claim", t.to_uppercase()),
        format!("intent-v1-{}.claim", &t[1..]),
        format!("intent-v1-{t}0.claim"),
        format!("intent-v1-{t}.claim.tmp"),
        format!("intent-v1-{t}"),
        format!("intent--v1-{t}.claim"),
        format!(".intent-v1-{t}.claim"),
        format!("owner-v1-{t}.claim"),
        String::from("foo"),
    ] {
        assert_eq!(ClaimName::parse(bad.as_bytes()), None, "{bad}");
    }
}

#[test]
fn litter_names_and_what_a_scan_makes_of_each_entry() {
    let t = "134be3102adef1d913f9a5a2ffcfd0ad";
    let h = "2ccc0000000000000000000000000000";
    let intent = format!("intent-v1-{t}.claim");
    let private = format!(".{intent}.private-v1-{h}.tmp");
    assert_eq!(
        private_public_name(private.as_bytes()),
        Some(intent.as_bytes())
    );
    assert_eq!(
        private_name(intent.as_bytes(), &token(h))
            .unwrap()
            .as_slice(),
        private.as_bytes()
    );
    assert_eq!(claims_entry(private.as_bytes()), Entry::Litter);
    let probe = format!(".probe-v1-{h}.tmp");
    assert!(is_probe_name(probe.as_bytes()));
    assert_eq!(probe_name(&token(h)).as_slice(), probe.as_bytes());
    assert_eq!(claims_entry(probe.as_bytes()), Entry::Litter);
    assert!(matches!(claims_entry(intent.as_bytes()), Entry::Claim(_)));
    assert_eq!(claims_entry(b"foo"), Entry::Unknown);
    for ignored in [
        ".whatever".into(),
        ".".into(),
        "..".into(),
        ".tmp".into(),
        "..tmp".into(),
        format!(".foo.private-v1-{h}.tmp"),
        format!(".{intent}.private-v1-{}.tmp", h.to_uppercase()),
        format!(".probe-v1-{}.tmp", &h[1..]),
        format!(".probe-v2-{h}.tmp"),
    ] {
        let ignored: String = ignored;
        assert_eq!(
            claims_entry(ignored.as_bytes()),
            Entry::Ignored,
            "{ignored}"
        );
    }
    for none in [
        &b""[..],
        b".",
        b".tmp",
        b"..tmp",
        b"a.private-v1-2ccc0000000000000000000000000000.tmp",
    ] {
        assert_eq!(private_public_name(none), None, "{none:?}");
    }
    assert_eq!(
        private_public_name(format!("..private-v1-{h}.tmp").as_bytes()),
        Some(&b""[..])
    );
    // The last marker decides, as Python's rpartition does.
    let nested = format!(".a.private-v1-{h}.private-v1-{h}.tmp");
    let inner = format!("a.private-v1-{h}");
    assert_eq!(
        private_public_name(nested.as_bytes()),
        Some(inner.as_bytes())
    );
    // The sentinel's litter lives beside the lock path.
    let sentinel_private = format!(".L.private-v1-{h}.tmp");
    assert!(is_sentinel_litter(sentinel_private.as_bytes(), b"L"));
    assert!(!is_sentinel_litter(sentinel_private.as_bytes(), b"M"));
    assert_eq!(MAX_LOCK_NAME, 206);
}

#[test]
fn litter_is_reaped_once_linked_or_old_by_the_filesystems_clock() {
    let at = |sec| FileTime { sec, nsec: 0 };
    assert_eq!(reap_private(true, 2, at(100), None), Reap::Remove);
    assert_eq!(reap_private(true, 1, at(100), None), Reap::Keep);
    assert_eq!(reap_private(true, 1, at(100), Some(at(101))), Reap::Keep);
    assert_eq!(reap_private(true, 1, at(100), Some(at(102))), Reap::Remove);
    // A file from the future (another clock) is never reaped on age.
    assert_eq!(reap_private(true, 1, at(100), Some(at(50))), Reap::Keep);
    assert_eq!(
        reap_private(false, 1, at(100), Some(at(200))),
        Reap::NotRegular
    );
    assert!(needs_clock(true, 1) && !needs_clock(true, 2) && !needs_clock(false, 1));
}

fn claim(state: ClaimState, hex: &str) -> ClaimName {
    ClaimName {
        state,
        token: token(hex),
    }
}

fn scan(claims: &[ClaimName]) -> Scan {
    let mut s = Scan::new();
    for c in claims {
        s.push(*c);
    }
    s
}

#[test]
fn the_doorway_decides_as_filelock() {
    use ClaimState::{Held, Intent};
    let a = "0aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let b = "0bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    let (ta, tb) = (token(a), token(b));
    // Step 3: any claim keeps a contender out.
    assert!(may_publish(&Scan::new()));
    assert!(!may_publish(&scan(&[claim(Intent, b)])));
    // Step 5: only the smallest intent, with no held claim, links.
    assert!(may_link_held(&scan(&[claim(Intent, a)]), &ta));
    assert!(may_link_held(
        &scan(&[claim(Intent, a), claim(Intent, b)]),
        &ta
    ));
    assert!(!may_link_held(
        &scan(&[claim(Intent, a), claim(Intent, b)]),
        &tb
    ));
    assert!(!may_link_held(
        &scan(&[claim(Intent, b), claim(Held, a)]),
        &tb
    ));
    assert!(!may_link_held(
        &scan(&[claim(Intent, a), claim(Held, b), claim(Intent, b)]),
        &ta
    ));
    assert!(
        !may_link_held(&Scan::new(), &ta),
        "our intent must be listed"
    );
    assert!(!may_link_held(&scan(&[claim(Intent, b)]), &ta));
    // Step 7: both our claims listed, and no smaller token of any state.
    let ours = [claim(Intent, a), claim(Held, a)];
    assert!(won(&scan(&ours), &ta));
    assert!(won(&scan(&[ours[0], ours[1], claim(Intent, b)]), &ta));
    assert!(!won(&scan(&[ours[0]]), &ta), "a held claim not yet listed");
    assert!(!won(&scan(&[ours[1]]), &ta), "an intent not listed");
    let theirs = [claim(Intent, b), claim(Held, b)];
    assert!(!won(&scan(&[theirs[0], theirs[1], claim(Intent, a)]), &tb));
    assert!(!won(&scan(&[theirs[0], theirs[1], claim(Held, a)]), &tb));
}

#[test]
fn an_overflowing_scan_never_admits() {
    let a = token("00000000000000000000000000000000");
    let mut s = Scan::new();
    s.push(ClaimName {
        state: ClaimState::Intent,
        token: a,
    });
    s.push(ClaimName {
        state: ClaimState::Held,
        token: a,
    });
    for i in 0..SCAN_CAPACITY {
        let mut t = [0xffu8; 16];
        t[0] = i as u8;
        s.push(ClaimName {
            state: ClaimState::Intent,
            token: Token(t),
        });
    }
    assert!(s.overflowed() && !s.is_empty());
    assert!(!may_publish(&s) && !may_link_held(&s, &a) && !won(&s, &a));
}

#[test]
fn retry_pauses_are_jittered_around_the_interval() {
    use core::time::Duration;
    let ms = Duration::from_millis;
    // The default 50 ms: within [25, 75] ms from the first pause on.
    assert_eq!(retry_pause(ms(50), 0, 0), ms(25));
    assert_eq!(
        retry_pause(ms(50), 0, u64::MAX),
        ms(25) + Duration::from_nanos(u64::MAX % 50_000_001)
    );
    for r in [0, 1, 12345, u64::MAX / 3, u64::MAX] {
        let p = retry_pause(ms(50), 3, r);
        assert!(p >= ms(25) && p <= ms(75), "{p:?}");
        // 10 ms widens 10, 20, 40, then 50 ms.
        assert!(retry_pause(ms(10), 0, r) <= ms(15));
        assert!(retry_pause(ms(10), 9, r) <= ms(55));
        assert!(retry_pause(ms(10), 9, r) >= ms(5));
    }
    // Two draws differ: contenders drift apart.
    assert_ne!(retry_pause(ms(50), 1, 7), retry_pause(ms(50), 1, 4_000_007));
    // Huge values saturate instead of overflowing.
    let _ = retry_pause(Duration::MAX, u32::MAX, u64::MAX);
    // No interval, no pause: the caller asked to spin.
    assert_eq!(retry_pause(Duration::ZERO, 5, 99), Duration::ZERO);
}

#[test]
fn a_patience_gives_up_at_its_deadline_and_jitters_until_then() {
    use crate::wait::Wait;
    use core::time::Duration;
    let ms = Duration::from_millis;
    let mut once = Jittered::new(Wait::No, ms(50));
    assert_eq!(once.busy(ms(0), 7), None);
    let mut until = Jittered::new(Wait::Until(ms(120)), ms(50));
    let first = until.busy(ms(0), 7).unwrap();
    assert!(first >= ms(25) && first <= ms(75));
    assert_eq!(until.busy(ms(110), u64::MAX), Some(ms(10)));
    assert_eq!(until.busy(ms(120), 7), None);
    assert_eq!(until.attempts, 3);
    let mut forever = Jittered::new(Wait::Forever, ms(50));
    assert!(forever.busy(ms(1 << 40), 3).is_some());
    assert_eq!(
        Jittered::new(Wait::Until(ms(0)), ms(50)).busy(ms(0), 1),
        None
    );
}

#[test]
fn directories_take_filelocks_modes() {
    assert_eq!(directory_mode(0o666), 0o777);
    assert_eq!(directory_mode(0o600), 0o700);
    assert_eq!(directory_mode(0o640), 0o750);
    assert_eq!(directory_mode(0o755), 0o755);
    assert_eq!(directory_mode(0o7644), 0o755);
    // mkdir under umask 022, then the sticky bit.
    assert_eq!(settled_directory_mode(0o40755, 0o777), Some(0o1755));
    assert_eq!(settled_directory_mode(0o41755, 0o777), None);
    assert_eq!(settled_directory_mode(0o40700, 0o700), Some(0o1700));
    // A wider directory narrows to the mode; set-gid stays.
    assert_eq!(settled_directory_mode(0o42777, 0o700), Some(0o3700));
}

/// Processes as a test tells them: who is alive, and start tokens.
struct Fake {
    alive: &'static [u32],
    unknown: &'static [u32],
    start: Option<StartToken>,
}

impl Processes for Fake {
    fn probe(&mut self, pid: Pid) -> Liveness {
        if self.unknown.contains(&pid.get()) {
            Liveness::Unknown(Errno::INVAL)
        } else if self.alive.contains(&pid.get()) {
            Liveness::Alive
        } else {
            Liveness::Dead
        }
    }
    fn start_token(&mut self, _: Pid) -> Option<StartToken> {
        self.start
    }
    fn runs_elsewhere(&mut self, _: Pid, _: Decimal<'_>) -> bool {
        false
    }
    fn begin_claim(&mut self, _: &[u8]) -> bool {
        true
    }
    fn end_claim(&mut self, _: &[u8]) {}
}

/// PID 10 lives (start 5), 11 cannot be probed, every other is dead.
fn fake() -> Fake {
    Fake {
        alive: &[10],
        unknown: &[11],
        start: Some(StartToken { high: 0, low: 5 }),
    }
}

#[test]
fn what_sits_at_the_lock_path() {
    let judge = |look| judge_occupant(&mut fake(), "vm", look);
    assert_eq!(judge(Look::Content(SENTINEL)), Occupant::Sentinel);
    assert_eq!(SENTINEL.len(), 24);
    let held = judge(Look::Content(
        b"filelock/2\npid=10\nhost=vm\nmode=exclusive\n",
    ));
    assert!(matches!(held, Occupant::Held(m) if m.pid.get() == 10));
    assert_eq!(format!("{held}"), "a soft-lock marker held by pid 10 on vm");
    let gone = judge(Look::Content(b"12\nvm\n"));
    assert_eq!(
        format!("{gone}"),
        "a soft-lock marker left by pid 12 on vm, which has exited"
    );
    // Another host, a probe that cannot tell: held, never judged.
    assert!(matches!(
        judge(Look::Content(b"12\nother\n")),
        Occupant::Held(_)
    ));
    assert!(matches!(
        judge(Look::Content(b"11\nvm\n")),
        Occupant::Held(_)
    ));
    // A live PID with another start: a recycled PID, so its holder is gone.
    assert!(matches!(
        judge(Look::Content(b"10\nvm\n6\n")),
        Occupant::Exited(_)
    ));
    assert!(matches!(
        judge(Look::Content(b"10\nvm\n5\n")),
        Occupant::Held(_)
    ));
    // An unknown protocol 2 mode still names its holder.
    assert!(matches!(
        judge(Look::Content(b"filelock/2\npid=12\nhost=vm\nmode=shared\n")),
        Occupant::Exited(_)
    ));
    for unparsable in [
        &b""[..],
        b"garbage",
        b"12\nvm",
        b"1\nfilelock-strict-v1\x00\n0",
    ] {
        assert_eq!(judge(Look::Content(unparsable)), Occupant::Unparsable);
    }
    assert_eq!(format!("{}", judge(Look::Directory)), "a directory");
    assert_eq!(format!("{}", judge(Look::Symlink)), "a symlink");
    assert_eq!(format!("{}", judge(Look::Special)), "a special file");
    assert!(matches!(
        judge(Look::Unreadable(Errno::ACCES)),
        Occupant::Forbidden(_)
    ));
    assert!(matches!(
        judge(Look::Unreadable(Errno::IO)),
        Occupant::Damaged(_)
    ));
}

#[test]
fn a_claims_holder_is_judged_fail_closed() {
    let t = observed_token();
    let mut buf = [0u8; RECORD_LIMIT];
    let mut stand = |pid: u32, host: &str, start: Option<&str>| {
        let start = start.and_then(|s| Decimal::parse(s.as_bytes()));
        let n = encode_claim(&t, Pid::new(pid).unwrap(), host, start, &mut buf).unwrap();
        let claim = parse_claim(&t, &buf[..n]).unwrap();
        claim_standing(&mut fake(), "vm", &claim)
    };
    assert_eq!(
        stand(10, "vm", Some("5")),
        Standing::Held(HeldBecause::Alive)
    );
    assert_eq!(stand(10, "vm", None), Standing::Held(HeldBecause::Alive));
    assert_eq!(
        stand(10, "vm", Some("6")),
        Standing::Stale { recycled: true }
    );
    assert_eq!(stand(12, "vm", None), Standing::Stale { recycled: false });
    assert_eq!(
        stand(11, "vm", None),
        Standing::Held(HeldBecause::CannotTell)
    );
    assert_eq!(
        stand(12, "other", None),
        Standing::Held(HeldBecause::OtherHost)
    );
}
