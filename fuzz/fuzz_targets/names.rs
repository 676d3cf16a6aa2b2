//! The derived-name parser on an arbitrary lock name and directory entry:
//! no panic, and a recognised entry is exactly the name rebuilt from its
//! parts.
#![no_main]

use libfuzzer_sys::fuzz_target;
use swaplock_core::names::{
    break_name, parse_derived, restore_name, Derived, NameTooLong, NAME_MAX,
};

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let (base, entry) = rest.split_at(usize::from(split).min(rest.len()));
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
