//! Never wedged: a lock that no live process holds can always be taken.
//! Each test reaches, on a real filesystem, a case where a release or a
//! break used to fail and leave a marker behind that no contender would
//! ever evict: a lock name whose derived names cannot exist, a filesystem
//! out of inodes, a holder out of descriptors.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use common::others;

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};

use swaplock::core::names::MAX_LOCK_NAME;
use swaplock::SoftLock;

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
                others(dir.path(), &[]).is_empty(),
                "{kind:?} {len}: created {:?}",
                others(dir.path(), &[])
            );
        }
        let lock = SoftLock::new(kind, dir.path().join("n".repeat(MAX_LOCK_NAME)));
        lock.try_lock().unwrap().release().unwrap();
        assert!(
            others(dir.path(), &[]).is_empty(),
            "{kind:?}: left {:?}",
            others(dir.path(), &[])
        );
    }
}

/// Creates files in `dir` until the filesystem has no inode left.
fn exhaust_inodes(dir: &Path) -> usize {
    for n in 0.. {
        match std::fs::File::create(dir.join(format!("filler-{n}"))) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => return n,
            Err(e) => panic!("creating a filler file: {e}"),
        }
    }
    unreachable!()
}

/// A release needs no new file: with no inode left (`ENOSPC` on create),
/// it still removes the marker, as filelock does, and the next contender
/// takes the lock.
#[test]
fn a_release_without_a_free_inode_still_removes_the_marker() {
    let fs = common::Tmpfs::mount("nr_inodes=16,size=1m");
    let path = fs.0.path().join("jobs.lock");
    for kind in [
        swaplock::soft::Kind::Soft,
        swaplock::soft::Kind::Marker,
        swaplock::soft::Kind::Lease,
    ] {
        let lock = SoftLock::new(kind, &path);
        let guard = lock.try_lock().unwrap();
        let fillers = exhaust_inodes(fs.0.path());
        assert!(fillers > 0);
        guard
            .release()
            .unwrap_or_else(|e| panic!("{kind:?}: release at ENOSPC: {e}"));
        assert!(!path.exists(), "{kind:?}: the marker stayed");
        for n in 0..fillers {
            std::fs::remove_file(fs.0.path().join(format!("filler-{n}"))).unwrap();
        }
        lock.try_lock().unwrap().release().unwrap();
    }
}

/// `swaplock run` whose descriptor limit is lowered while its command runs
/// (`EMFILE` on any new open) still releases the soft lock when the command
/// ends, and the next contender takes it.
#[test]
fn a_holder_out_of_descriptors_still_releases() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.lock");
    for kind in ["soft", "marker", "lease"] {
        let mut run = common::command(&common::swaplock(), "swaplock")
            .args(["run", "--kind", kind])
            .arg(&path)
            .args(["sh", "-c", "echo ready; read line"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(run.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n");
        assert!(path.exists());
        // A limit at the lowest free descriptor number: the holder's next
        // open fails with EMFILE.
        let open: Vec<usize> = std::fs::read_dir(format!("/proc/{}/fd", run.id()))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_str().unwrap().parse().unwrap())
            .collect();
        let free = (0..).find(|fd| !open.contains(fd)).unwrap();
        let status = Command::new("prlimit")
            .arg(format!("--pid={}", run.id()))
            .arg(format!("--nofile={free}:{free}"))
            .status()
            .unwrap();
        assert!(status.success(), "prlimit failed");
        run.stdin.take().unwrap().write_all(b"done\n").unwrap();
        let status = run.wait().unwrap();
        assert!(status.success(), "{kind}: swaplock run exited {status}");
        assert!(!path.exists(), "{kind}: the marker stayed");
        let kind = match kind {
            "soft" => swaplock::soft::Kind::Soft,
            "marker" => swaplock::soft::Kind::Marker,
            _ => swaplock::soft::Kind::Lease,
        };
        SoftLock::new(kind, &path)
            .try_lock()
            .unwrap()
            .release()
            .unwrap();
    }
}

/// Writes at `path` a protocol 1 record of a process of this host that has
/// exited: a marker the next contender takes over.
fn write_stale_soft_marker(path: &Path) {
    let host = swaplock_linux::soft::host_name();
    let dead = common::dead_pid();
    std::fs::write(path, format!("{dead}\n{host}\n")).unwrap();
}

/// A breaker killed between creating its break file (its complete record)
/// and its exchange leaves that file under its break name. The next
/// takeover sweeps it: nothing a dead process left stays forever.
#[test]
fn a_breaker_killed_before_its_exchange_leaves_nothing_for_good() {
    // SIGKILL on entry to its exchange (renameat2) kills the breaker with
    // its break file written.
    let Some(dir) = breaker_killed_at("renameat2", 1) else {
        return;
    };
    let left = others(dir.path(), &[]);
    assert_eq!(left.len(), 2, "the killed breaker's file: {left:?}");
    assert!(left[1].starts_with("a.lock.break."), "{left:?}");
    taken_and_left_clean(dir.path());
}

/// `swaplock break --kind soft` on a stale marker `a.lock` in a new
/// directory, killed at its `nth` call of `syscall`; `None` under an
/// emulator, where strace follows the emulator's host syscalls, not the
/// target's.
fn breaker_killed_at(syscall: &str, nth: u32) -> Option<tempfile::TempDir> {
    if std::env::var_os("SWAPLOCK_TEST_RUNNER").is_some() {
        eprintln!("skipped under an emulator: strace cannot stop the emulated breaker");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    write_stale_soft_marker(&path);
    let args = [
        "break".as_ref(),
        "--kind".as_ref(),
        "soft".as_ref(),
        path.as_os_str(),
    ];
    let status = common::swaplock_killed_at(syscall, nth, &args);
    // strace ends as its tracee did.
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
    Some(dir)
}

/// Whether a soft attempt in `dir` looks at the lock path before it writes
/// a record: where the directory's filesystem renames exclusively, as the
/// adapter judges it (PROTOCOL 7.2 step 3).
fn looks_before_writing(dir: &Path) -> bool {
    use std::os::fd::AsFd;
    use swaplock::core::fs::ExclusiveRename;
    use swaplock::core::soft::Dir;
    let name = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
    let fd = swaplock_linux::soft::open_dir(&name).unwrap();
    let judged = swaplock_linux::soft::LinuxOs::new(fd.as_fd()).exclusive_rename();
    judged != ExclusiveRename::Untrusted
}

/// A soft lock on `dir/a.lock` is taken and released, and leaves `dir`
/// empty.
fn taken_and_left_clean(dir: &Path) {
    SoftLock::soft(dir.join("a.lock"))
        .try_lock()
        .unwrap()
        .release()
        .unwrap();
    assert!(others(dir, &[]).is_empty(), "left {:?}", others(dir, &[]));
}

/// A contender killed between creating its marker and writing its record
/// used to leave an empty marker, which no contender ever evicts (it names
/// no owner, invariant I10). Where the directory has unnamed files
/// (`O_TMPFILE`), the marker is written before it gets its name, so a kill
/// at the write leaves nothing, and the next contender takes the lock.
#[test]
fn a_contender_killed_at_its_record_write_leaves_no_marker() {
    if std::env::var_os("SWAPLOCK_TEST_RUNNER").is_some() {
        eprintln!("skipped under an emulator: strace cannot stop the emulated contender");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    for kind in ["soft", "marker", "lease"] {
        // The first write(2) of `swaplock run` is its record's.
        let status = common::swaplock_killed_at(
            "write",
            1,
            &[
                "run".as_ref(),
                "--kind".as_ref(),
                kind.as_ref(),
                path.as_os_str(),
                "true".as_ref(),
            ],
        );
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{kind}: {status}");
        assert!(
            others(dir.path(), &[]).is_empty(),
            "{kind}: left {:?}",
            others(dir.path(), &[])
        );
        let out = common::command(&common::swaplock(), "swaplock")
            .args(["run", "--kind", kind, "--fail"])
            .arg(&path)
            .arg("true")
            .output()
            .unwrap();
        assert!(out.status.success(), "{kind}: {out:?}");
    }
}

/// A breaker killed between creating its file and writing its record used
/// to leave that file empty under its break name, where a recovery takes it
/// for a live recordless holder's marker and may put it at the lock path,
/// where nobody evicts it. A break name now only ever holds a complete
/// file (linked from an unnamed file here), so the kill leaves nothing.
#[test]
fn a_breaker_killed_at_its_record_write_leaves_no_empty_break_file() {
    // The breaker's first write(2) is its record's for the takeover where
    // its attempt looks at the lock path before writing (PROTOCOL 7.2 step
    // 3: a filesystem whose exclusive rename is trusted) and judges the
    // stale marker there at once; elsewhere its second (the first, into
    // an unnamed file, found the lock path taken at its link).
    let nth = if looks_before_writing(&std::env::temp_dir()) {
        1
    } else {
        2
    };
    let Some(dir) = breaker_killed_at("write", nth) else {
        return;
    };
    assert_eq!(
        others(dir.path(), &[]),
        ["a.lock"],
        "the killed breaker left a file"
    );
    taken_and_left_clean(dir.path());
}
