//! The read-write lock's file operations on real files (PROTOCOL 16.3): the
//! walk refuses a symlinked, replaced or foreign-owned directory (RW14),
//! creates are exclusive and private, an overwrite goes only through the
//! file created with one name (RW9), a link's identity decides (RW3), and
//! missing names answer as filelock's do.

#![cfg(any(target_os = "linux", target_os = "android"))]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use swaplock_core::rw::files::{Area, Files, FsError, Read, Tree};
use swaplock_core::rw::names::READ_LIMIT;
use swaplock_core::Errno;
use swaplock_linux::soft::RwFiles;

const GEN: Area = Area::Generations;
const HOLDERS: Area = Area::Holders;

struct Log {
    _dir: tempfile::TempDir,
    root: PathBuf,
    files: RwFiles,
}

fn files_at(root: &Path) -> RwFiles {
    use std::os::unix::ffi::OsStrExt;
    let parent = root.parent().unwrap();
    RwFiles::new(root.as_os_str().as_bytes(), parent.as_os_str().as_bytes()).unwrap()
}

fn log() -> Log {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sub/a.lock.rw");
    let files = files_at(&root);
    Log {
        _dir: dir,
        root,
        files,
    }
}

fn read(files: &mut RwFiles, area: Area, name: &[u8]) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; READ_LIMIT];
    match files.read(area, name, &mut buf).unwrap() {
        Read::Missing => None,
        Read::Bytes(n) => Some(buf[..n].to_vec()),
    }
}

#[test]
fn prepare_makes_private_directories_and_reads_of_a_missing_log_find_nothing() {
    let mut l = log();
    assert_eq!(read(&mut l.files, GEN, b"epoch"), None, "no log yet");
    let mut names = Vec::new();
    l.files.list(GEN, &mut |n| names.push(n.to_vec())).unwrap();
    assert!(names.is_empty());
    l.files.unlink(HOLDERS, b"x").unwrap();
    assert_eq!(
        l.files.create(GEN, b"epoch", b"x\n", true),
        Err(FsError::Os(Errno::NOENT)),
        "nothing to create into before prepare"
    );
    l.files.prepare(false).unwrap();
    for d in ["", "gen", "holders"] {
        let meta = std::fs::symlink_metadata(l.root.join(d)).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.permissions().mode() & 0o777, 0o700, "{d}");
    }
    l.files.prepare(false).unwrap();
    l.files.prepare(true).unwrap();
}

#[test]
fn creates_are_exclusive_private_and_read_back() {
    let mut l = log();
    l.files.prepare(false).unwrap();
    let id = l.files.create(HOLDERS, b"t1", b"record\n", false).unwrap();
    let meta = std::fs::metadata(l.root.join("holders/t1")).unwrap();
    assert_eq!((meta.dev(), meta.ino()), (id.dev, id.ino));
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(
        l.files.create(HOLDERS, b"t1", b"other\n", false),
        Err(FsError::Os(Errno::EXIST))
    );
    assert_eq!(
        read(&mut l.files, HOLDERS, b"t1").as_deref(),
        Some(&b"record\n"[..])
    );
    // At most one past the limit is read.
    let big = vec![b'a'; READ_LIMIT + 100];
    std::fs::write(l.root.join("gen/big"), &big).unwrap();
    assert_eq!(read(&mut l.files, GEN, b"big").unwrap().len(), READ_LIMIT);
    // A FIFO reads as no bytes, at once.
    let fifo = std::ffi::CString::new(l.root.join("gen/fifo").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    assert_eq!(read(&mut l.files, GEN, b"fifo"), Some(vec![]));
    // A symlink is never followed.
    std::os::unix::fs::symlink(l.root.join("holders/t1"), l.root.join("gen/link")).unwrap();
    assert!(matches!(
        l.files.read(GEN, b"link", &mut vec![0u8; READ_LIMIT]),
        Err(FsError::Os(e)) if e == Errno::LOOP
    ));
}

#[test]
fn an_overwrite_goes_only_through_the_file_created_with_one_name() {
    let mut l = log();
    l.files.prepare(false).unwrap();
    let id = l.files.create(HOLDERS, b"t", b"nonce=1\n", false).unwrap();
    assert!(l.files.overwrite(HOLDERS, b"t", b"nonce=2\n", id).unwrap());
    assert_eq!(read(&mut l.files, HOLDERS, b"t").unwrap(), b"nonce=2\n");
    assert_eq!(
        std::fs::metadata(l.root.join("holders/t")).unwrap().ino(),
        id.ino,
        "in place"
    );
    // A second name: a file that may have inherited a removed record's inode.
    std::fs::hard_link(l.root.join("holders/t"), l.root.join("holders/t2")).unwrap();
    assert!(!l.files.overwrite(HOLDERS, b"t", b"nonce=3\n", id).unwrap());
    std::fs::remove_file(l.root.join("holders/t2")).unwrap();
    // Another file renamed over the name (made while the record still
    // existed, so that it cannot have inherited its inode number).
    std::fs::write(l.root.join("holders/other"), b"planted\n").unwrap();
    std::fs::rename(l.root.join("holders/other"), l.root.join("holders/t")).unwrap();
    assert!(!l.files.overwrite(HOLDERS, b"t", b"nonce=5\n", id).unwrap());
    assert_eq!(read(&mut l.files, HOLDERS, b"t").unwrap(), b"planted\n");
    // The name missing.
    std::fs::remove_file(l.root.join("holders/t")).unwrap();
    assert!(
        !l.files.overwrite(HOLDERS, b"t", b"nonce=4\n", id).unwrap(),
        "missing"
    );
    // A FIFO answers at once.
    let fifo = std::ffi::CString::new(l.root.join("holders/t").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    assert!(!l.files.overwrite(HOLDERS, b"t", b"nonce=6\n", id).unwrap());
}

#[test]
fn a_link_is_decided_by_identity_and_never_replaces() {
    let mut l = log();
    l.files.prepare(false).unwrap();
    l.files.create(GEN, b".commit-a", b"one\n", true).unwrap();
    assert!(l
        .files
        .link(GEN, b".commit-a", b"00000000000000000001")
        .unwrap());
    // Linking again onto the same file: EEXIST, yet the link is there.
    assert!(l
        .files
        .link(GEN, b".commit-a", b"00000000000000000001")
        .unwrap());
    l.files.create(GEN, b".commit-b", b"two\n", true).unwrap();
    assert!(!l
        .files
        .link(GEN, b".commit-b", b"00000000000000000001")
        .unwrap());
    assert_eq!(
        read(&mut l.files, GEN, b"00000000000000000001").unwrap(),
        b"one\n"
    );
    assert_eq!(
        l.files.link(GEN, b".commit-gone", b"00000000000000000002"),
        Err(FsError::Os(Errno::NOENT)),
        "a temporary swept away: the caller's to judge"
    );
    assert!(l.files.replace(GEN, b".commit-b", b"HEAD").unwrap());
    assert_eq!(read(&mut l.files, GEN, b"HEAD").unwrap(), b"two\n");
    l.files.unlink(GEN, b".commit-a").unwrap();
    l.files.unlink(GEN, b".commit-a").unwrap();
    let mut names = Vec::new();
    l.files.list(GEN, &mut |n| names.push(n.to_vec())).unwrap();
    names.sort();
    assert_eq!(
        names,
        vec![b"00000000000000000001".to_vec(), b"HEAD".to_vec()]
    );
}

#[test]
fn the_walk_refuses_a_replaced_tree() {
    for (what, tree) in [("gen", Tree::Area(GEN)), ("", Tree::Root)] {
        // A symlink where a directory belongs.
        let mut l = log();
        l.files.prepare(false).unwrap();
        let target = l.root.parent().unwrap().join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        let victim = match what {
            "" => l.root.clone(),
            d => l.root.join(d),
        };
        std::fs::rename(&victim, l.root.parent().unwrap().join("aside")).unwrap();
        std::os::unix::fs::symlink(&target, &victim).unwrap();
        let replaced = FsError::TreeReplaced { tree, owner: None };
        assert_eq!(
            l.files.create(GEN, b"x", b"x", false),
            Err(replaced),
            "{what}"
        );
        assert!(matches!(
            l.files.read(GEN, b"epoch", &mut vec![0u8; READ_LIMIT]),
            Err(e) if e == replaced
        ));
        assert_eq!(l.files.prepare(true), Err(replaced));
        assert!(
            std::fs::read_dir(&target).unwrap().next().is_none(),
            "nothing written through it"
        );
    }
    // A file where gen/ belongs.
    let mut l = log();
    l.files.prepare(false).unwrap();
    std::fs::remove_dir(l.root.join("gen")).unwrap();
    std::fs::write(l.root.join("gen"), b"").unwrap();
    let replaced = FsError::TreeReplaced {
        tree: Tree::Area(GEN),
        owner: None,
    };
    assert_eq!(l.files.unlink(GEN, b"x"), Err(replaced));
    assert_eq!(l.files.prepare(true), Err(replaced));
}

#[test]
fn a_directory_another_account_owns_under_a_sticky_parent_is_refused() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "this test runs as root (scripts/test)");
    let dir = tempfile::tempdir().unwrap();
    let sticky = dir.path().join("tmp");
    std::fs::create_dir(&sticky).unwrap();
    std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let root = sticky.join("a.lock.rw");
    std::fs::create_dir(&root).unwrap();
    let chown = |p: &Path, uid: u32| {
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::lchown(c.as_ptr(), uid, uid) }, 0);
    };
    chown(&root, 65534);
    let mut files = files_at(&root);
    assert_eq!(
        files.prepare(false),
        Err(FsError::TreeReplaced {
            tree: Tree::Root,
            owner: Some(65534)
        })
    );
    // Ours, but gen/ is another's: its parent (ours) is not sticky, so
    // whoever planted it could move ours as well; it is used.
    chown(&root, 0);
    std::fs::create_dir(root.join("gen")).unwrap();
    chown(&root.join("gen"), 65534);
    files.prepare(true).unwrap();
    // The parent's owner may own it: the sticky directory belongs to 65534.
    chown(&sticky, 65534);
    chown(&root, 65534);
    files.prepare(true).unwrap();
}
