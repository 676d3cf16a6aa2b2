//! The filesystem under a lock: `statfs`, and for the filesystems whose
//! answer depends on the mount (FUSE subtypes, NFS and SMB lock options)
//! the mount table entry of the file's device. The core decides what that
//! means ([`swaplock_core::fs`]).

use std::io::{self, BufRead};
use std::os::fd::AsFd;
use std::path::Path;

use swaplock_core::fs::{needs_mount_table, parse_mountinfo_line, traits, Traits};

/// A filesystem as `statfs` and the mount table name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filesystem {
    /// `statfs`'s `f_type`.
    pub f_type: u64,
    /// The mount table's type (`ext4`, `fuse.sshfs`, `nfs4`), where it was
    /// read; else empty.
    pub fstype: String,
    /// What it offers a lock.
    pub traits: Traits,
}

/// The filesystem that holds the open file `fd`.
pub fn of_file(fd: impl AsFd) -> io::Result<Filesystem> {
    let fd = fd.as_fd();
    let f_type = f_type(&rustix::fs::fstatfs(fd)?);
    describe(f_type, || Ok(rustix::fs::fstat(fd)?.st_dev))
}

/// The filesystem that holds the open file `fd`, whose `st_dev` is `dev`
/// (known already, from the `fstat` a lock makes).
pub fn of_file_on(fd: impl AsFd, dev: u64) -> io::Result<Filesystem> {
    let f_type = f_type(&rustix::fs::fstatfs(fd.as_fd())?);
    describe(f_type, || Ok(dev))
}

/// The filesystem that holds `path` (followed if a symlink), or, where
/// `path` does not exist (yet), its nearest ancestor that does: the
/// filesystem a file or directory made there would land on.
pub fn of_path(path: &Path) -> io::Result<Filesystem> {
    let at = |p: &Path| -> io::Result<Filesystem> {
        let f_type = f_type(&rustix::fs::statfs(p)?);
        describe(f_type, || Ok(rustix::fs::stat(p)?.st_dev))
    };
    let mut here = path;
    loop {
        match at(here) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                here = match here.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p,
                    // A relative path's first component: the working
                    // directory, unless that was the look that failed.
                    Some(_) if here != Path::new(".") => Path::new("."),
                    _ => return Err(e),
                };
            }
            other => return other,
        }
    }
}

/// `f_type`, a C long: every magic fits in 32 bits, and 32-bit targets
/// hold the larger ones as negative numbers.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn f_type(statfs: &rustix::fs::StatFs) -> u64 {
    u64::from(statfs.f_type as u32)
}

/// What the filesystem of `f_type` on device `dev()` offers, reading the
/// mount table only where the type alone does not tell. A mount table that
/// cannot be read for want of resources (`EMFILE`, `ENOMEM`) is an error,
/// never taken for an entry that is not there; one that does not exist (no
/// `/proc`) leaves the filesystem unseen.
fn describe(
    f_type: u64,
    dev: impl FnOnce() -> io::Result<rustix::fs::Dev>,
) -> io::Result<Filesystem> {
    let mut fstype = String::new();
    let traits = if needs_mount_table(f_type) {
        // The device is asked for only here: one call for a local file.
        let dev = dev()?;
        let dev = (rustix::fs::major(dev), rustix::fs::minor(dev));
        let line = mount_entry(dev)?;
        let mount = line
            .as_deref()
            .and_then(|l| parse_mountinfo_line(l.as_bytes()));
        if let Some(m) = &mount {
            fstype = String::from_utf8_lossy(m.fstype).into_owned();
        }
        traits(f_type, mount.as_ref())
    } else {
        traits(f_type, None)
    };
    Ok(Filesystem {
        f_type,
        fstype,
        traits,
    })
}

/// The line of `/proc/self/mountinfo` for device `dev`, if it has one.
fn mount_entry(dev: (u32, u32)) -> io::Result<Option<String>> {
    let file = match std::fs::File::open("/proc/self/mountinfo") {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    for line in io::BufReader::new(file).lines() {
        let line = line?;
        if parse_mountinfo_line(line.as_bytes()).is_some_and(|m| m.dev == dev) {
            return Ok(Some(line));
        }
    }
    Ok(None)
}
