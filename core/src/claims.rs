//! This process's set of stranded-record claims in progress (invariant
//! I15): threads of one process must not recover the same record at once,
//! and the rename that claims it does not tell two threads of one process
//! apart.
//!
//! The set is process-wide and guarded by a `critical-section`, so it works
//! in `no_std` firmware and, with `critical-section`'s `std` implementation,
//! in ordinary processes.

use crate::names::Name;
use core::cell::RefCell;
use critical_section::Mutex;

/// How many claims one process may work on at once; more are refused (and
/// the lock counts as held for that attempt).
pub const MAX_CLAIMS: usize = 16;

static CLAIMS: Mutex<RefCell<heapless::Vec<Name, MAX_CLAIMS>>> =
    Mutex::new(RefCell::new(heapless::Vec::new()));

/// Registers `name`; `false` if another thread has it (or the set is full).
pub fn begin(name: &[u8]) -> bool {
    let Ok(name) = Name::from_slice(name) else {
        return false;
    };
    critical_section::with(|cs| {
        let mut claims = CLAIMS.borrow_ref_mut(cs);
        if claims.contains(&name) {
            return false;
        }
        claims.push(name).is_ok()
    })
}

/// Unregisters `name`.
pub fn end(name: &[u8]) {
    critical_section::with(|cs| {
        let mut claims = CLAIMS.borrow_ref_mut(cs);
        claims.retain(|n| n.as_slice() != name);
    })
}
