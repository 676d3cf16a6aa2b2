//! The derived-name parser on an arbitrary lock name and directory entry:
//! no panic, and a recognised entry is exactly the name rebuilt from its
//! parts. The same entry goes through the strict lock's recognisers: a
//! claim name, a private file's or a probe's, rebuilt alike.
#![no_main]

use libfuzzer_sys::fuzz_target;
use swaplock_core::names::{
    break_name, parse_derived, restore_name, Derived, NameTooLong, Token, NAME_MAX,
};
use swaplock_core::strict::names::{
    claims_entry, is_probe_name, private_name, private_public_name, probe_name, Entry,
    PROBE_PREFIX, TMP_SUFFIX,
};

/// The strict lock's names: a recognised one is exactly the name rebuilt.
fn strict_entry(entry: &[u8]) {
    match claims_entry(entry) {
        Entry::Claim(name) => assert_eq!(name.encode().as_bytes(), entry),
        Entry::Unknown => assert!(!entry.starts_with(b".")),
        Entry::Litter | Entry::Ignored => assert!(entry.starts_with(b".")),
    }
    if is_probe_name(entry) {
        let hex = &entry[PROBE_PREFIX.len()..entry.len() - TMP_SUFFIX.len()];
        let token = Token::parse_hex(hex).expect("a probe's token");
        assert_eq!(probe_name(&token).as_slice(), entry);
    }
    if let Some(public) = private_public_name(entry) {
        let hex = &entry[entry.len() - TMP_SUFFIX.len() - 32..entry.len() - TMP_SUFFIX.len()];
        let token = Token::parse_hex(hex).expect("a private name's token");
        match private_name(public, &token) {
            Ok(name) => assert_eq!(name.as_slice(), entry),
            Err(NameTooLong) => assert!(entry.len() > NAME_MAX),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let (base, entry) = rest.split_at(usize::from(split).min(rest.len()));
    strict_entry(entry);
    let Some(derived) = parse_derived(base, entry) else {
        return;
    };
    let rebuilt = match derived {
        Derived::Break { breaker, token } => break_name(base, breaker, &token),
        Derived::Restore { recoverer, token } => {
            // A restore PID may carry leading zeros; the rebuilt name has none.
            match restore_name(base, recoverer, &token) {
                Ok(name) => assert_eq!(parse_derived(base, &name), Some(derived)),
                Err(NameTooLong) => assert!(entry.len() > NAME_MAX),
            }
            return;
        }
    };
    match rebuilt {
        Ok(name) => assert_eq!(name.as_slice(), entry),
        // The parser reads entries of any length; only the builder is capped.
        Err(NameTooLong) => assert!(entry.len() > NAME_MAX),
    }
});
