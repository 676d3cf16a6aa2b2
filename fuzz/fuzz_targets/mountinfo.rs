//! The mount table reader on an arbitrary line: no panic; a line it reads
//! yields fields without blanks, which read the same from a line of the
//! plainest shape; and what the filesystem offers never claims both that
//! its locks reach every host and that they reach this client only.
#![no_main]

use libfuzzer_sys::fuzz_target;
use swaplock_core::fs::{kernel_lock_refusal, magic, parse_mountinfo_line, traits, Family, Reach};

fuzz_target!(|data: &[u8]| {
    let Some(mount) = parse_mountinfo_line(data) else {
        return;
    };
    for field in [mount.fstype, mount.mount_options, mount.super_options] {
        assert!(!field.iter().any(u8::is_ascii_whitespace));
    }
    // The same fields in a line of the plainest shape read the same.
    let mut line = format!("1 2 {}:{} / / ", mount.dev.0, mount.dev.1).into_bytes();
    for part in [
        mount.mount_options,
        b" - ",
        mount.fstype,
        b" src ",
        mount.super_options,
    ] {
        line.extend_from_slice(part);
    }
    assert_eq!(parse_mountinfo_line(&line), Some(mount));
    for f_type in [magic::FUSE, magic::NFS, magic::CIFS, magic::EXT4] {
        let t = traits(f_type, Some(&mount));
        for (reach, family) in [(t.fcntl, Family::Fcntl), (t.flock, Family::Flock)] {
            assert_eq!(
                kernel_lock_refusal(&t, family).is_some(),
                reach == Reach::ThisClient
            );
        }
    }
});
