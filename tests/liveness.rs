//! Never wedged: a lock that no live process holds can always be taken.
//! Each test reaches, on a real filesystem, a case where a release or a
//! break used to fail and leave a marker behind that no contender would
//! ever evict: a lock name whose derived names cannot exist, a filesystem
//! out of inodes, a holder out of descriptors.

#![cfg(any(target_os = "linux", target_os = "android"))]

use std::io::ErrorKind;
use std::path::Path;
use swaplock::core::names::MAX_LOCK_NAME;
use swaplock::SoftLock;

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A name of `len` bytes whose derived names would pass `NAME_MAX` is
/// refused before anything is created, with an error that says why; the
/// longest accepted name works through a whole acquire and release.
#[test]
fn a_lock_name_too_long_for_its_derived_names_is_refused_before_anything_is_created() {
    let dir = tempfile::tempdir().unwrap();
    for kind in [
        swaplock::soft::Kind::Soft,
        swaplock::soft::Kind::Marker,
        swaplock::soft::Kind::Lease,
    ] {
        for len in [MAX_LOCK_NAME + 1, 230, 255] {
            let lock = SoftLock::new(kind, dir.path().join("n".repeat(len)));
            let err = lock.try_lock().expect_err("an over-long name is refused");
            assert_eq!(err.kind(), ErrorKind::InvalidFilename, "{kind:?} {len}");
            let text = err.to_string();
            assert!(
                text.contains(&format!("{len} bytes")) && text.contains("at most 203"),
                "{kind:?} {len}: {text}"
            );
            assert!(
                entries(dir.path()).is_empty(),
                "{kind:?} {len}: created {:?}",
                entries(dir.path())
            );
        }
        let lock = SoftLock::new(kind, dir.path().join("n".repeat(MAX_LOCK_NAME)));
        lock.try_lock().unwrap().release().unwrap();
        assert!(
            entries(dir.path()).is_empty(),
            "{kind:?}: left {:?}",
            entries(dir.path())
        );
    }
}
