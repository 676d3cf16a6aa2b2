//! The etcd client certificate's reader on arbitrary bytes: no panic, and
//! the validity it reads back is the date it read (every time the reader
//! accepts turns into a calendar date and back to the same second).
#![no_main]

use libfuzzer_sys::fuzz_target;
use swaplock_core::etcd::cert::{read, Utc, Validity};

fuzz_target!(|data: &[u8]| {
    let Some(cert) = read(data) else {
        return;
    };
    for t in [cert.not_before, cert.not_after] {
        let utc = Utc::from_unix(t);
        assert!(
            (1..=12).contains(&utc.month) && (1..=31).contains(&utc.day),
            "{utc:?}"
        );
        assert!(
            utc.hour < 24 && utc.minute < 60 && utc.second < 60,
            "{utc:?}"
        );
    }
    // The validity at either end is never refused as outside it.
    if cert.not_before <= cert.not_after {
        assert_eq!(cert.validity(cert.not_before), Validity::Valid);
        assert_eq!(cert.validity(cert.not_after), Validity::Valid);
    }
    // A second past the end is past it, once the period has begun.
    let after = cert.not_after.saturating_add(1);
    if after >= cert.not_before && after > cert.not_after {
        assert_eq!(cert.validity(after), Validity::Expired);
    }
});
