//! Host-name escaping, duration spelling and the start-token and `/proc`
//! parsers on arbitrary input: no panic, and what they promise holds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use swaplock_core::host::{host_name, HOST_NAME_LIMIT};
use swaplock_core::pyfloat;
use swaplock_core::start::{
    parse_boot_id, parse_stat_starttime, timens_offsets_unshifted, StartToken,
};

fuzz_target!(|data: &[u8]| {
    // A host name is printable, non-empty and within the limit, whatever the bytes.
    let ns = data
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    let name = host_name(data, ns.filter(|n| n % 3 != 0));
    assert!(!name.is_empty() && name.len() <= HOST_NAME_LIMIT);
    assert!(name.bytes().all(|b| (0x21..=0x7e).contains(&b)));

    // Any finite double is spelled so that it reads back to itself, and a
    // non-negative one so that the duration grammar accepts it.
    if let Some(bits) = data.get(..8) {
        let x = f64::from_bits(u64::from_le_bytes(bits.try_into().expect("8 bytes")));
        if x.is_finite() {
            let text = pyfloat::repr(x);
            assert_eq!(
                text.parse::<f64>().map(f64::to_bits),
                Ok(x.to_bits()),
                "{text}"
            );
            if x.is_sign_positive() {
                assert!(pyfloat::is_duration_text(text.as_bytes()), "{text}");
            }
        }
    }
    // Grammar-valid duration text always parses.
    if pyfloat::is_duration_text(data) {
        let text = core::str::from_utf8(data).expect("the grammar is ASCII");
        assert!(text.parse::<f64>().is_ok());
    }

    let _ = StartToken::linux(parse_boot_id(data), parse_stat_starttime(data).unwrap_or(0));
    let _ = timens_offsets_unshifted(data);
});
