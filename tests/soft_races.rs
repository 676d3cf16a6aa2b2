//! The races the soft-lock break protocol closes (the seed's list), each
//! reproduced at the adapter seam: a wrapper around the real Linux adapter
//! runs a peer's step just before one of our syscalls, at every position in
//! our sequence, on the real filesystem (ext4 hands a freed inode number to
//! the next file, so inode reuse is real here). Each test shows the wrong
//! outcome cannot happen.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use common::{dead_pid, others};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;
use swaplock::core::decide::{FileTime, Instant, Liveness};
use swaplock::core::names::Token;
use swaplock::core::soft::{
    self, Attempt, Clock, Config, Contender, Dir, Entropy, Handles, Held, Kind, Processes, Stat,
};
use swaplock::core::start::StartToken;
use swaplock::core::{Decimal, Errno, Pid};
use swaplock_linux::soft::{host_name, open_dir, LinuxOs};

type Action<'a> = Box<dyn FnMut(&mut LinuxOs<'_>, &str) -> Option<Errno> + 'a>;

/// The Linux adapter, with a peer's step run before our `at`-th operation.
/// The action sees the operation's name and may make it fail.
struct Seam<'d, 'a> {
    inner: LinuxOs<'d>,
    peer: LinuxOs<'d>,
    count: usize,
    at: usize,
    action: Action<'a>,
    fired: bool,
    /// Whether the directory offers unnamed files (`O_TMPFILE`); without
    /// them a marker is created by name and then written.
    unnamed: bool,
    /// Whether an exclusive rename may publish the marker where there are
    /// no unnamed files (as the adapter judges the filesystem).
    renames: bool,
    /// The operations seen, in order.
    ops: Vec<&'static str>,
}

impl<'d, 'a> Seam<'d, 'a> {
    fn new(dir: &'d OwnedFd, at: usize, action: Action<'a>) -> Self {
        Seam {
            inner: LinuxOs::new(dir.as_fd()),
            peer: LinuxOs::new(dir.as_fd()),
            count: 0,
            at,
            action,
            fired: false,
            unnamed: true,
            renames: false,
            ops: Vec::new(),
        }
    }

    /// The seam, running its step before every operation instead of one.
    fn every(dir: &'d OwnedFd, action: Action<'a>) -> Self {
        Seam {
            at: EVERY,
            ..Seam::new(dir, 0, action)
        }
    }

    fn step(&mut self, op: &'static str) -> Result<(), Errno> {
        self.ops.push(op);
        let n = self.count;
        self.count += 1;
        if n == self.at || self.at == EVERY {
            self.fired = true;
            if let Some(e) = (self.action)(&mut self.peer, op) {
                return Err(e);
            }
        }
        Ok(())
    }
}

/// `Seam::at` for a step before every operation.
const EVERY: usize = usize::MAX - 1;

macro_rules! seam {
    ($self:ident, $op:literal, $call:expr) => {{
        $self.step($op)?;
        $call
    }};
}

impl Dir for Seam<'_, '_> {
    type File = OwnedFd;
    fn create_new(&mut self, name: &[u8], mode: u32, truncate: bool) -> Result<OwnedFd, Errno> {
        seam!(self, "create", self.inner.create_new(name, mode, truncate))
    }
    fn create_unnamed(&mut self, mode: u32) -> Result<OwnedFd, Errno> {
        if !self.unnamed {
            return Err(Errno::OPNOTSUPP);
        }
        seam!(self, "create_unnamed", self.inner.create_unnamed(mode))
    }
    fn link_unnamed(&mut self, f: &OwnedFd, name: &[u8]) -> Result<(), Errno> {
        seam!(self, "link_unnamed", self.inner.link_unnamed(f, name))
    }
    fn exclusive_rename(&mut self) -> swaplock::core::fs::ExclusiveRename {
        match self.renames {
            true => self.inner.exclusive_rename(),
            false => swaplock::core::fs::ExclusiveRename::Untrusted,
        }
    }
    fn sync_filesystem(&mut self, f: &OwnedFd) -> Result<(), Errno> {
        seam!(self, "sync_filesystem", self.inner.sync_filesystem(f))
    }
    fn rename_noreplace(&mut self, from: &[u8], to: &[u8]) -> Result<(), Errno> {
        seam!(
            self,
            "rename_noreplace",
            self.inner.rename_noreplace(from, to)
        )
    }
    fn sync_file(&mut self, f: &OwnedFd) -> Result<(), Errno> {
        seam!(self, "sync_file", self.inner.sync_file(f))
    }
    fn open_read(&mut self, name: &[u8]) -> Result<OwnedFd, Errno> {
        seam!(self, "open_read", self.inner.open_read(name))
    }
    fn pin(&mut self, name: &[u8]) -> Result<OwnedFd, Errno> {
        seam!(self, "pin", self.inner.pin(name))
    }
    fn write(&mut self, f: &OwnedFd, buf: &[u8]) -> Result<usize, Errno> {
        seam!(self, "write", self.inner.write(f, buf))
    }
    fn write_at(&mut self, f: &OwnedFd, buf: &[u8], off: u64) -> Result<usize, Errno> {
        seam!(self, "write_at", self.inner.write_at(f, buf, off))
    }
    fn truncate(&mut self, f: &OwnedFd, len: u64) -> Result<(), Errno> {
        seam!(self, "truncate", self.inner.truncate(f, len))
    }
    fn chmod(&mut self, f: &OwnedFd, mode: u32) -> Result<(), Errno> {
        seam!(self, "chmod", self.inner.chmod(f, mode))
    }
    fn touch(&mut self, f: &OwnedFd) -> Result<(), Errno> {
        seam!(self, "touch", self.inner.touch(f))
    }
    fn read(&mut self, f: &OwnedFd, buf: &mut [u8]) -> Result<usize, Errno> {
        seam!(self, "read", self.inner.read(f, buf))
    }
    fn fstat(&mut self, f: &OwnedFd) -> Result<Stat, Errno> {
        seam!(self, "fstat", self.inner.fstat(f))
    }
    fn close(&mut self, f: OwnedFd) {
        let _ = self.step("close");
        self.inner.close(f)
    }
    fn lstat(&mut self, name: &[u8]) -> Result<Stat, Errno> {
        seam!(self, "lstat", self.inner.lstat(name))
    }
    fn exchange(&mut self, a: &[u8], b: &[u8]) -> Result<(), Errno> {
        seam!(self, "exchange", self.inner.exchange(a, b))
    }
    fn rename(&mut self, from: &[u8], to: &[u8]) -> Result<(), Errno> {
        seam!(self, "rename", self.inner.rename(from, to))
    }
    fn unlink(&mut self, name: &[u8]) -> Result<(), Errno> {
        seam!(self, "unlink", self.inner.unlink(name))
    }
    fn list(&mut self, visit: &mut dyn FnMut(&[u8])) -> Result<(), Errno> {
        seam!(self, "list", self.inner.list(visit))
    }
    fn handles(&mut self) -> Option<&mut dyn Handles<OwnedFd>> {
        None
    }
}

impl Processes for Seam<'_, '_> {
    fn probe(&mut self, pid: Pid) -> Liveness {
        self.inner.probe(pid)
    }
    fn start_token(&mut self, pid: Pid) -> Option<StartToken> {
        self.inner.start_token(pid)
    }
    fn runs_elsewhere(&mut self, pid: Pid, start: Decimal<'_>) -> bool {
        self.inner.runs_elsewhere(pid, start)
    }
    fn begin_claim(&mut self, name: &[u8]) -> bool {
        self.inner.begin_claim(name)
    }
    fn end_claim(&mut self, name: &[u8]) {
        self.inner.end_claim(name)
    }
}

impl Clock for Seam<'_, '_> {
    fn now(&mut self) -> Instant {
        self.inner.now()
    }
    fn wall(&mut self) -> FileTime {
        self.inner.wall()
    }
    fn sleep(&mut self, d: Duration) {
        self.inner.sleep(d)
    }
}

impl Entropy for Seam<'_, '_> {
    fn token(&mut self) -> Token {
        self.inner.token()
    }
}

const LOCK: &[u8] = b"a.lock";

struct Me {
    pid: Pid,
    host: swaplock::core::host::HostName,
    start: Option<StartToken>,
}

fn me() -> Me {
    let pid = swaplock_linux::soft::current_pid();
    Me {
        pid,
        host: host_name(),
        start: swaplock_linux::soft::start_token(pid.get()),
    }
}

fn config<'a>(me: &'a Me, kind: Kind) -> Config<'a> {
    Config {
        kind,
        lock: LOCK,
        pid: me.pid,
        host: &me.host,
        start: me.start,
        mode: None,
        lease: None,
        lifetime: None,
        durable: true,
    }
}

/// A live process other than us, for peers' records.
struct Live(std::process::Child);
impl Live {
    fn spawn() -> Self {
        Live(
            std::process::Command::new("cat")
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        )
    }
    fn record(&self) -> String {
        format!("{}\n{}\n", self.0.id(), host_name())
    }
}
impl Drop for Live {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn set_mtime(path: &Path, like: &Path) {
    let t = std::fs::metadata(like).unwrap().modified().unwrap();
    std::fs::File::options()
        .append(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

/// The test directory `dir`, open as the adapter's directory handle.
fn dir_fd(dir: &Path) -> OwnedFd {
    let path = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
    open_dir(&path).unwrap()
}

/// Runs `scenario(at)` for every position `at` of our operations until the
/// peer's step no longer fires; returns how many positions were covered.
fn every_position(mut scenario: impl FnMut(usize) -> bool) -> usize {
    let mut at = 0;
    while scenario(at) {
        at += 1;
        assert!(at < 500, "the scenario never ends");
    }
    at
}

/// Race 2: the judged marker's inode number is reused. A peer removes the
/// stale marker and creates a live one with the same mtime, at every point
/// of our stale step. The live marker must never be taken or removed.
#[test]
fn a_reused_inode_never_passes_for_the_judged_marker() {
    let me = me();
    let live = Live::spawn();
    let covered = every_position(|at| {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("a.lock");
        let stale = format!("{}\n{}\n", dead_pid(), host_name());
        std::fs::write(&lock, &stale).unwrap();
        let stale_ino = std::fs::metadata(&lock).unwrap().ino();
        let fd = dir_fd(dir.path());
        let record = live.record();
        let lock2 = lock.clone();
        let mut reused = false;
        let mut os = Seam::new(
            &fd,
            at,
            Box::new(|_, _| {
                // A peer breaks the stale marker it judged, as the protocol
                // lets it, and publishes its own; once ours is at the path
                // it judges ours live and does nothing.
                if std::fs::read_to_string(&lock2).ok().as_deref() != Some(stale.as_str()) {
                    return None;
                }
                // Unlinking frees the stale inode unless something pins it,
                // and ext4 hands the freed number to the next file.
                let mtime = std::fs::metadata(&lock2).unwrap().modified().unwrap();
                std::fs::remove_file(&lock2).unwrap();
                std::fs::write(&lock2, &record).unwrap();
                std::fs::File::options()
                    .append(true)
                    .open(&lock2)
                    .unwrap()
                    .set_modified(mtime)
                    .unwrap();
                reused = std::fs::metadata(&lock2).unwrap().ino() == stale_ino;
                None
            }),
        );
        // Where a marker is created by name (no unnamed files), the create
        // and the pin come first.
        os.unnamed = false;
        let cfg = config(&me, Kind::Soft);
        let attempt = soft::try_acquire(&mut os, &cfg, &mut Contender::new()).unwrap();
        let fired = os.fired;
        drop(os);
        // Exactly one of us holds the lock: the peer's marker or ours is at
        // the path, whole, and never both believe they hold it.
        let content = std::fs::read_to_string(&lock).unwrap();
        match attempt {
            Attempt::Acquired(held) => {
                assert_ne!(
                    content,
                    live.record(),
                    "at {at}: took the lock beside a live holder"
                );
                assert_eq!(
                    std::fs::metadata(&lock).unwrap().ino(),
                    held.id.ino,
                    "at {at}"
                );
            }
            Attempt::Busy(_) => {
                assert_eq!(
                    content,
                    live.record(),
                    "at {at}: busy, yet the peer's marker is not there"
                );
                // Operations 0 and 1 (create, pin) come before the pin.
                assert!(
                    !reused || at <= 1,
                    "at {at}: the pinned inode number was handed out again"
                );
            }
        }
        assert!(
            others(dir.path(), &["a.lock"]).is_empty(),
            "at {at}: left {:?}",
            others(dir.path(), &["a.lock"])
        );
        fired
    });
    assert!(covered > 10, "only {covered} positions");
}

/// Race 6: the lock path must never stand empty while a stale marker is
/// broken. A peer tries an O_EXCL create of the lock path before every one
/// of our operations; it must never succeed.
#[test]
fn the_lock_path_is_never_empty_during_a_break() {
    let me = me();
    let covered = every_position(|at| {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("a.lock");
        std::fs::write(&lock, format!("{}\n{}\n", dead_pid(), host_name())).unwrap();
        let fd = dir_fd(dir.path());
        let mut created = false;
        let mut os = Seam::new(
            &fd,
            at,
            Box::new(|peer, _| {
                match peer.create_new(LOCK, 0o644, true) {
                    Ok(_) => created = true,
                    Err(e) => assert_eq!(e, Errno::EXIST),
                }
                None
            }),
        );
        let cfg = config(&me, Kind::Soft);
        let attempt = soft::try_acquire(&mut os, &cfg, &mut Contender::new()).unwrap();
        let fired = os.fired;
        drop(os);
        assert!(!created, "at {at}: the lock path was empty");
        if let Attempt::Acquired(held) = attempt {
            assert_eq!(std::fs::metadata(&lock).unwrap().ino(), held.id.ino);
        }
        fired
    });
    assert!(covered > 10);
}

/// Race 4: a failed acquire's rollback removed a successor's marker. Our
/// record write fails after a peer evicted our marker and published its own;
/// the rollback must leave the peer's marker alone. The same removal of our
/// own file is what the ENOSYS fallback relies on (race 5).
#[test]
fn a_failed_acquire_removes_only_its_own_marker() {
    let me = me();
    let live = Live::spawn();
    for (op, unnamed) in [
        ("write", false),
        ("fstat", false),
        ("write", true),
        ("fstat", true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("a.lock");
        let fd = dir_fd(dir.path());
        let record = live.record();
        let lock2 = lock.clone();
        let mut os = Seam::new(
            &fd,
            usize::MAX,
            Box::new(|_, _| {
                // Our marker, where it was created by name; nothing of
                // ours is visible while an unnamed one is written.
                let _ = std::fs::remove_file(&lock2);
                std::fs::write(&lock2, &record).unwrap();
                Some(Errno::IO)
            }),
        );
        let cfg = config(&me, Kind::Soft);
        // Our operations: create (by name, or unnamed), fstat, write: fire
        // at `op`.
        os.unnamed = unnamed;
        os.at = if op == "fstat" { 1 } else { 2 };
        let result = soft::try_acquire(&mut os, &cfg, &mut Contender::new());
        assert!(os.fired);
        drop(os);
        assert!(result.is_err(), "{op} {unnamed}: the failure must surface");
        assert_eq!(
            std::fs::read_to_string(&lock).unwrap(),
            live.record(),
            "{op} {unnamed}: the peer's marker was removed"
        );
        assert!(
            others(dir.path(), &["a.lock"]).is_empty(),
            "{op} {unnamed}: left {:?}",
            others(dir.path(), &["a.lock"])
        );
    }
    // And with nothing in the way, a failed write leaves no marker behind.
    let dir = tempfile::tempdir().unwrap();
    let fd = dir_fd(dir.path());
    // The write is our third operation (create, fstat, write).
    let mut os = Seam::new(&fd, 2, Box::new(|_, _| Some(Errno::NOSPC)));
    let cfg = config(&me, Kind::Soft);
    assert!(soft::try_acquire(&mut os, &cfg, &mut Contender::new()).is_err());
    drop(os);
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
}

/// Race 3: the malformed watch inherited another file's age. After we have
/// watched a malformed marker for most of the grace period, a peer replaces
/// it with a fresh one carrying the same mtime (and, on ext4, the same inode
/// number): the change time restarts the watch.
#[test]
fn a_recreated_malformed_marker_does_not_inherit_the_watch() {
    let me = me();
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("a.lock");
    std::fs::write(&lock, "garbage\n").unwrap();
    let fd = dir_fd(dir.path());
    let cfg = config(&me, Kind::Soft);
    let mut contender = Contender::new();
    let mut os = LinuxOs::new(fd.as_fd());
    assert!(matches!(
        soft::try_acquire(&mut os, &cfg, &mut contender).unwrap(),
        Attempt::Busy(_)
    ));
    // Let the watch age past the grace period without a look in between.
    let aged = std::time::Instant::now();
    while aged.elapsed() < Duration::from_millis(2100) {
        std::thread::yield_now();
    }
    let old = dir.path().join("old");
    std::fs::hard_link(&lock, &old).unwrap();
    std::fs::remove_file(&lock).unwrap();
    std::fs::write(&lock, "x\n").unwrap();
    set_mtime(&lock, &old);
    std::fs::remove_file(&old).unwrap();
    let attempt = soft::try_acquire(&mut os, &cfg, &mut contender).unwrap();
    assert!(
        matches!(attempt, Attempt::Busy(_)),
        "a fresh marker was evicted with the old one's age"
    );
    assert_eq!(std::fs::read(&lock).unwrap(), b"x\n");
}

/// Race 1: a restore followed a planted symlink. A symlink at the lock path
/// is read as itself (a malformed marker) and, once evicted, moved as
/// itself: its target is never read, linked, or removed.
#[test]
fn a_planted_symlink_is_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join("a.lock")).unwrap();
    let lock = swaplock::SoftLock::soft(dir.path().join("a.lock"))
        .poll_interval(Duration::from_millis(10));
    let guard = lock.lock_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious\n");
    assert!(std::fs::symlink_metadata(dir.path().join("a.lock"))
        .unwrap()
        .is_file());
    guard.release().unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious\n");
}

/// Race 8: the lifetime break judged a marker by a reused inode. A peer
/// replaces the expired marker with a live one carrying the same mtime at
/// every point of our lifetime break: the live one is never taken.
#[test]
fn the_lifetime_break_never_takes_a_replaced_marker() {
    let me = me();
    let live = Live::spawn();
    let covered = every_position(|at| {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("a.lock");
        let expired = live.record();
        std::fs::write(&lock, &expired).unwrap();
        let old_time = std::time::SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options()
            .append(true)
            .open(&lock)
            .unwrap()
            .set_modified(old_time)
            .unwrap();
        let fd = dir_fd(dir.path());
        let lock2 = lock.clone();
        let record = format!("{}\n{}\nfresh\n", live.0.id(), host_name());
        let mut os = Seam::new(
            &fd,
            at,
            Box::new(|_, _| {
                // A peer replaces the expired marker it judged with its own,
                // forging the old mtime; our fresh marker it leaves alone.
                if std::fs::read_to_string(&lock2).ok().as_deref() != Some(expired.as_str()) {
                    return None;
                }
                std::fs::remove_file(&lock2).unwrap();
                std::fs::write(&lock2, &record).unwrap();
                std::fs::File::options()
                    .append(true)
                    .open(&lock2)
                    .unwrap()
                    .set_modified(old_time)
                    .unwrap();
                None
            }),
        );
        let mut cfg = config(&me, Kind::Soft);
        cfg.lifetime = Some(Duration::from_secs(60));
        let attempt = soft::try_acquire(&mut os, &cfg, &mut Contender::new()).unwrap();
        let fired = os.fired;
        drop(os);
        let content = std::fs::read_to_string(&lock).unwrap();
        match attempt {
            // Taken before the peer acted, or the peer's file was never ours to take.
            Attempt::Acquired(Held { id, .. }) => {
                assert!(
                    !fired || !content.contains("fresh"),
                    "at {at}: took the replaced marker"
                );
                assert_eq!(std::fs::metadata(&lock).unwrap().ino(), id.ino);
            }
            Attempt::Busy(_) => assert!(
                content.contains("fresh"),
                "at {at}: the replacement was lost"
            ),
        }
        fired
    });
    assert!(covered > 5);
}

/// Race 7: a killed breaker stranded the marker it took, and two
/// recoverers race for it. Contender B's whole attempt runs before each of
/// contender A's operations; the live holder's marker must end at the lock
/// path, neither contender may hold the lock, and nothing may be left over.
#[test]
fn two_recoverers_never_undo_each_other() {
    let me_a = me();
    let holder = Live::spawn();
    let b_process = Live::spawn();
    let covered = every_position(|at| {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("a.lock");
        std::fs::write(&lock, holder.record()).unwrap();
        let holder_ino = std::fs::metadata(&lock).unwrap().ino();
        // The breaker was killed after its exchange: its record at the path,
        // the holder's under its break name.
        let breaker = dead_pid();
        let aside = dir
            .path()
            .join(format!("a.lock.break.{breaker}.{}", "ab".repeat(16)));
        std::fs::write(&aside, format!("{breaker}\n{}\n", host_name())).unwrap();
        let fd = dir_fd(dir.path());
        {
            let mut os = LinuxOs::new(fd.as_fd());
            os.exchange(
                aside.file_name().unwrap().to_str().unwrap().as_bytes(),
                LOCK,
            )
            .unwrap();
        }
        let me_b = Me {
            pid: Pid::new(b_process.0.id()).unwrap(),
            host: host_name(),
            start: None,
        };
        let mut b_result = None;
        let mut os = Seam::new(
            &fd,
            at,
            Box::new(|peer, _| {
                let cfg_b = config(&me_b, Kind::Soft);
                b_result = Some(matches!(
                    soft::try_acquire(peer, &cfg_b, &mut Contender::new()),
                    Ok(Attempt::Acquired(_))
                ));
                None
            }),
        );
        let cfg_a = config(&me_a, Kind::Soft);
        let a = soft::try_acquire(&mut os, &cfg_a, &mut Contender::new()).unwrap();
        let fired = os.fired;
        drop(os);
        assert!(
            matches!(a, Attempt::Busy(_)),
            "at {at}: A took the lock from a live holder"
        );
        assert!(
            !b_result.unwrap_or(false),
            "at {at}: B took the lock from a live holder"
        );
        assert_eq!(
            std::fs::metadata(&lock).unwrap().ino(),
            holder_ino,
            "at {at}: the holder's marker is not back"
        );
        // A claim handed back may remain for the next poll; a third attempt clears it.
        let mut os = LinuxOs::new(fd.as_fd());
        assert!(matches!(
            soft::try_acquire(&mut os, &cfg_a, &mut Contender::new()).unwrap(),
            Attempt::Busy(_)
        ));
        assert_eq!(std::fs::metadata(&lock).unwrap().ino(), holder_ino);
        assert!(
            others(dir.path(), &["a.lock"]).is_empty(),
            "at {at}: left {:?}",
            others(dir.path(), &["a.lock"])
        );
        fired
    });
    assert!(covered > 10, "only {covered} positions");
}

/// Without an exchange (NFS, SMB, FUSE filesystems that refuse it) a stale
/// marker is never moved: the contender stays out and the marker stays.
#[test]
fn without_an_exchange_a_stale_marker_stays() {
    let me = me();
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("a.lock");
    let record = format!("{}\n{}\n", dead_pid(), host_name());
    std::fs::write(&lock, &record).unwrap();
    let fd = dir_fd(dir.path());
    for refusal in [Errno::INVAL, Errno::NOSYS, Errno::XDEV, Errno::OPNOTSUPP] {
        // Refuse every exchange the attempt asks for.
        let mut refusing = Seam::every(
            &fd,
            Box::new(move |_, op| (op == "exchange").then_some(refusal)),
        );
        let cfg = config(&me, Kind::Soft);
        for _ in 0..3 {
            let attempt = soft::try_acquire(&mut refusing, &cfg, &mut Contender::new()).unwrap();
            assert!(matches!(attempt, Attempt::Busy(_)));
        }
        assert_eq!(
            std::fs::read_to_string(&lock).unwrap(),
            record,
            "{refusal:?}"
        );
        assert!(
            others(dir.path(), &["a.lock"]).is_empty(),
            "{refusal:?}: left {:?}",
            others(dir.path(), &["a.lock"])
        );
    }
}

/// A breaker that gives up its exchange-back (its marker sits under a
/// nested breaker's name past the 2 s limit, invariant I16) lets go of a
/// file holding its own complete record. When the nested breaker puts that
/// file back at the lock path, it must not name the live breaker, or every
/// contender would wait until the breaker exits: it is overwritten with the
/// breaker's placeholder, which ages out but still leads a recovery to
/// what the breaker took.
#[test]
fn an_abandoned_takeover_never_publishes_its_record() {
    let me = me();
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("a.lock");
    std::fs::write(&lock, format!("{}\n{}\n", dead_pid(), host_name())).unwrap();
    let live = Live::spawn();
    // What replaces the stale marker just before our exchange (a peer's
    // live marker), and a nested breaker's complete marker under its own
    // break name.
    let replacement = dir.path().join("replacement");
    std::fs::write(&replacement, live.record()).unwrap();
    std::fs::write(dir.path().join("nested"), live.record()).unwrap();
    let fd = dir_fd(dir.path());
    let mut phase = 0;
    let mut os = Seam::every(
        &fd,
        Box::new(|peer, op| {
            match (phase, op) {
                // A peer replaces the judged marker before our exchange, so
                // the file we take is not the one we judged.
                (0, "exchange") => {
                    peer.rename(b"replacement", LOCK).unwrap();
                    phase = 1;
                }
                // Before our check, the nested breaker takes our marker off
                // the lock path into its break name.
                (1, "lstat") => {
                    peer.exchange(b"nested", LOCK).unwrap();
                    phase = 2;
                }
                _ => {}
            }
            None
        }),
    );
    let cfg = config(&me, Kind::Soft);
    let attempt = soft::try_acquire(&mut os, &cfg, &mut Contender::new()).unwrap();
    assert!(matches!(attempt, Attempt::Busy(_)));
    drop(os);
    // The nested breaker undoes its exchange: our file returns to the path.
    LinuxOs::new(fd.as_fd()).exchange(b"nested", LOCK).unwrap();
    let at_path = std::fs::read(&lock).unwrap();
    // Our placeholder: malformed, so evicted after the grace period, yet
    // naming us, so the contender that evicts it recovers our break names.
    // Its PID is led by zeros to our record's length (PROTOCOL 2.4), so that
    // one write replaced the record whole.
    let text = String::from_utf8_lossy(&at_path);
    let digits = text
        .strip_prefix("filelock/break\n")
        .and_then(|t| t.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("the lock path holds {text:?}"));
    assert_eq!(
        digits.trim_start_matches('0'),
        me.pid.to_string(),
        "the lock path holds {text:?}"
    );
}

/// A node a peer puts at the lock path in place of the marker, for the
/// report tests below.
#[derive(Clone, Copy, Debug)]
enum Swap {
    /// A symlink to a file that holds another holder's record.
    Symlink,
    /// A FIFO, which nobody writes: a blocking open of it never returns.
    Fifo,
    /// Nothing: the marker is removed.
    Remove,
}

/// Puts `swap` at `lock` in one rename (or removes the marker), `other`
/// being the symlink's target.
fn swap_in(swap: Swap, lock: &Path, other: &Path) {
    let tmp = lock.with_extension("swap");
    match swap {
        Swap::Symlink => std::os::unix::fs::symlink(other, &tmp).unwrap(),
        Swap::Fifo => {
            let name = std::ffi::CString::new(tmp.to_str().unwrap()).unwrap();
            // SAFETY: a NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o644) }, 0);
        }
        Swap::Remove => return std::fs::remove_file(lock).unwrap(),
    }
    std::fs::rename(&tmp, lock).unwrap();
}

/// A report of the holder (`owner`, `status`) reads the marker with the
/// core's `look`. A peer swaps the marker, at every point of the look, for
/// a symlink to another record, a FIFO nobody writes, or nothing: the
/// symlink is never followed, the FIFO never waited on, and a marker
/// removed between the `lstat` and the open reads as none.
#[test]
fn a_look_at_the_marker_never_follows_or_waits_on_a_node_swapped_in() {
    use swaplock::core::record::Content;
    const OURS: &[u8] = b"1\nhost\n";
    for swap in [Swap::Symlink, Swap::Fifo, Swap::Remove] {
        let mut swapped_before_open = false;
        let covered = every_position(|at| {
            let dir = tempfile::tempdir().unwrap();
            let lock = dir.path().join("a.lock");
            let other = dir.path().join("other");
            std::fs::write(&lock, OURS).unwrap();
            std::fs::write(&other, b"2\nelsewhere\n").unwrap();
            let fd = dir_fd(dir.path());
            let mut os = Seam::new(
                &fd,
                at,
                Box::new(|_, _| {
                    swap_in(swap, &lock, &other);
                    None
                }),
            );
            let seen = soft::look(&mut os, LOCK).unwrap();
            let fired = os.fired;
            drop(os);
            match seen.as_ref().map(|s| s.content()) {
                // What was there before the peer acted, or after its swap.
                Some(Content::Bytes(bytes)) => {
                    assert_eq!(bytes, OURS, "{swap:?} at {at}: read another file")
                }
                Some(Content::NotRegular) => {
                    assert!(fired && !matches!(swap, Swap::Remove), "{swap:?} at {at}")
                }
                None => assert!(fired && matches!(swap, Swap::Remove), "{swap:?} at {at}"),
            }
            // The peer's step before operation 1 falls between the lstat
            // (0) and the open: the window a path-following read missed.
            if at == 1 {
                let expected = match swap {
                    Swap::Remove => None,
                    Swap::Symlink | Swap::Fifo => Some(Content::NotRegular),
                };
                assert_eq!(
                    seen.as_ref().map(|s| s.content()),
                    expected,
                    "{swap:?} at 1"
                );
                swapped_before_open = true;
            }
            fired
        });
        assert!(
            covered >= 3,
            "{swap:?}: the look makes an lstat, an open and a read"
        );
        assert!(
            swapped_before_open,
            "{swap:?}: no swap fell between the lstat and the open"
        );
    }
}

/// `SoftLock::owner` reads through that look: while a peer puts a symlink
/// to another holder's record in the marker's place and a regular marker
/// back, again and again, the owner reported is never the symlink's target.
#[test]
fn owner_never_reports_the_target_of_a_symlink_swapped_in() {
    use std::sync::atomic::{AtomicBool, Ordering};
    // A read that follows symlinks is caught within a few hundred swaps.
    const SWAPS: usize = 2_000;
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("a.lock");
    let other = dir.path().join("other");
    let fresh = dir.path().join("fresh");
    std::fs::write(&lock, b"1\nhost\n").unwrap();
    std::fs::write(&other, b"2\nelsewhere\n").unwrap();
    let done = AtomicBool::new(false);
    let looks = std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..SWAPS {
                swap_in(Swap::Symlink, &lock, &other);
                std::fs::write(&fresh, b"1\nhost\n").unwrap();
                std::fs::rename(&fresh, &lock).unwrap();
            }
            done.store(true, Ordering::Release);
        });
        let soft = swaplock::SoftLock::soft(&lock);
        let mut looks = 0;
        while !done.load(Ordering::Acquire) {
            let owner = soft.owner().unwrap().expect("a node is always at the path");
            assert_ne!(owner.pid, Some(2), "followed the symlink: {owner:?}");
            looks += 1;
        }
        looks
    });
    assert!(looks > 0);
}

/// A holder asking whether its lease is lost between heartbeats
/// (`soft::lost`, the guard's `lease_lost`) reports a loss only when two
/// looks miss (I19): a peer's check that holds the marker aside, another
/// file at the lock path, at the first look only is no loss; a marker
/// replaced, or removed, for good is.
#[test]
fn a_lease_is_lost_only_when_two_looks_miss() {
    use std::cell::Cell;
    use swaplock::core::soft::Compromise;
    let me = me();
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("a.lock");
    let aside = dir.path().join("aside");
    let other = dir.path().join("other");
    let fd = dir_fd(dir.path());
    let cfg = config(&me, Kind::Soft);
    let mut os = LinuxOs::new(fd.as_fd());
    let Attempt::Acquired(held) = soft::try_acquire(&mut os, &cfg, &mut Contender::new()).unwrap()
    else {
        panic!("a free lock")
    };
    assert_eq!(
        soft::lost(&mut os, &cfg, &held),
        None,
        "the marker is in place"
    );

    // Held aside at the first look, back by the second.
    let looks = Cell::new(0);
    let mut seam = Seam::every(
        &fd,
        Box::new(|_, op| {
            if op == "lstat" {
                looks.set(looks.get() + 1);
                match looks.get() {
                    1 => {
                        std::fs::rename(&lock, &aside).unwrap();
                        std::fs::write(&lock, b"x").unwrap();
                    }
                    2 => {
                        std::fs::rename(&lock, &other).unwrap();
                        std::fs::rename(&aside, &lock).unwrap();
                    }
                    _ => {}
                }
            }
            None
        }),
    );
    assert_eq!(
        soft::lost(&mut seam, &cfg, &held),
        None,
        "a check's instant aside"
    );
    drop(seam);
    assert_eq!(looks.get(), 2, "a second look after the first missed");

    // Replaced at the first look, for good.
    let mut seam = Seam::new(
        &fd,
        0,
        Box::new(|_, _| {
            std::fs::rename(&lock, &aside).unwrap();
            std::fs::rename(&other, &lock).unwrap();
            None
        }),
    );
    assert_eq!(
        soft::lost(&mut seam, &cfg, &held),
        Some(Compromise::OwnerChanged)
    );
    drop(seam);

    // Gone from every name, and nothing in its place.
    std::fs::remove_file(&aside).unwrap();
    std::fs::remove_file(&lock).unwrap();
    assert_eq!(
        soft::lost(&mut os, &cfg, &held),
        Some(Compromise::MarkerMissing)
    );
}

/// A lease guard says its lease is lost once its marker is gone, or
/// another file stands at the lock path, and not before.
#[test]
fn a_lease_guard_sees_its_marker_removed_or_replaced() {
    use swaplock::core::soft::Compromise;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.lock");
    let guard = swaplock::SoftLock::lease(&path).lock().unwrap();
    assert_eq!(guard.lease_lost(), None);
    std::fs::rename(&path, dir.path().join("aside")).unwrap();
    std::fs::write(&path, b"another\n").unwrap();
    assert_eq!(guard.lease_lost(), Some(Compromise::OwnerChanged));
    std::fs::remove_file(dir.path().join("aside")).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(guard.lease_lost(), Some(Compromise::MarkerMissing));
}

/// Where the directory has no unnamed files but renames exclusively (vfat,
/// exFAT: PROTOCOL 7.2 step 3b), the marker is written and synced under a
/// write name and renamed to the lock path: held with nothing else left; a
/// peer's marker made just before the rename is judged, never replaced; a
/// failed sync publishes nothing; a rename that fails for another reason
/// (no such flag, a directory without room for both names) falls back to
/// the create by name.
#[test]
fn an_exclusive_rename_publishes_a_whole_marker_or_nothing() {
    let me = me();
    let live = Live::spawn();
    // (the step, what a peer or the OS does there, what the attempt ends as)
    for (step, case) in [
        ("none", "uncontended"),
        ("rename_noreplace", "a peer's marker"),
        ("sync_file", "a failed sync"),
        ("rename_noreplace", "a refused rename"),
        ("rename_noreplace", "a directory out of room"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join(std::str::from_utf8(LOCK).unwrap());
        let fd = dir_fd(dir.path());
        let (record, lock2) = (live.record(), lock.clone());
        let mut os = Seam::every(
            &fd,
            Box::new(move |_, op| match (op == step, case) {
                (true, "a peer's marker") => {
                    std::fs::write(&lock2, &record).unwrap();
                    None
                }
                (true, "a failed sync") => Some(Errno::IO),
                (true, "a refused rename") => Some(Errno::INVAL),
                (true, "a directory out of room") => Some(Errno::NOSPC),
                _ => None,
            }),
        );
        os.unnamed = false;
        os.renames = true;
        let cfg = config(&me, Kind::Soft);
        let attempt = soft::try_acquire(&mut os, &cfg, &mut Contender::new());
        let ops = std::mem::take(&mut os.ops);
        drop(os);
        assert!(
            ops.contains(&"rename_noreplace") || case == "a failed sync",
            "{case}: no exclusive rename in {ops:?} (is the test directory on a local filesystem?)"
        );
        let content = std::fs::read_to_string(&lock).ok();
        match (case, attempt) {
            (
                "uncontended" | "a refused rename" | "a directory out of room",
                Ok(Attempt::Acquired(held)),
            ) => {
                let ino = std::fs::metadata(&lock).unwrap().ino();
                assert_eq!(ino, held.id.ino, "{case}");
                let content = content.unwrap();
                assert!(
                    content.starts_with(&format!("{}\n", me.pid)),
                    "{case}: {content:?}"
                );
                // The write name's create, and after a refused rename the
                // marker's own create by name.
                let creates = ops.iter().filter(|op| **op == "create").count();
                let expected = if case == "uncontended" { 1 } else { 2 };
                assert_eq!(creates, expected, "{case}: {ops:?}");
            }
            ("a peer's marker", Ok(Attempt::Busy(_))) => {
                assert_eq!(content.as_deref(), Some(&*live.record()), "{case}");
            }
            ("a failed sync", Err(_)) => {
                assert_eq!(content, None, "{case}: a marker was published");
                assert!(ops.contains(&"sync_file"), "{case}: {ops:?}");
            }
            (case, other) => panic!("{case}: {:?}", other.map(|_| ())),
        }
        // No write name is ever left behind.
        let names = std::str::from_utf8(LOCK).unwrap();
        assert!(
            others(dir.path(), &[names]).is_empty(),
            "{case}: left {:?}",
            others(dir.path(), &[names])
        );
    }
}

/// The look before the record (PROTOCOL 7.2 step 3), where the directory's
/// names are the kernel's own (its exclusive rename trusted): a peer that
/// takes the lock, or one that releases it, before any of our operations
/// never makes two holders, and leaves no file of ours beside the lock; an
/// attempt that found the lock taken and then free leaves it to be taken
/// by the next attempt (no wedge).
#[test]
fn the_look_before_the_record_never_makes_two_holders() {
    let me = me();
    let live = Live::spawn();
    for peer in ["takes", "releases"] {
        let covered = every_position(|at| {
            let dir = tempfile::tempdir().unwrap();
            let lock = dir.path().join(std::str::from_utf8(LOCK).unwrap());
            if peer == "releases" {
                std::fs::write(&lock, live.record()).unwrap();
            }
            let fd = dir_fd(dir.path());
            let took = std::cell::Cell::new(false);
            let (record, lock2) = (live.record(), lock.clone());
            let mut os = Seam::new(
                &fd,
                at,
                Box::new(|_, _| {
                    if peer == "releases" {
                        let _ = std::fs::remove_file(&lock2);
                    } else if let Ok(mut file) = std::fs::File::options()
                        .write(true)
                        .create_new(true)
                        .open(&lock2)
                    {
                        std::io::Write::write_all(&mut file, record.as_bytes()).unwrap();
                        took.set(true);
                    }
                    None
                }),
            );
            os.renames = true;
            let cfg = config(&me, Kind::Soft);
            let attempt = soft::try_acquire(&mut os, &cfg, &mut Contender::new());
            let (fired, ops) = (os.fired, std::mem::take(&mut os.ops));
            drop(os);
            if peer == "releases" && !fired {
                // The marker stayed: the look answered, nothing was written.
                assert!(
                    ops.contains(&"lstat") && !ops.contains(&"write"),
                    "no look before the record in {ops:?} (is the test directory on a local filesystem?)"
                );
            }
            let content = std::fs::read_to_string(&lock).ok();
            match attempt {
                Ok(Attempt::Acquired(held)) => {
                    assert!(!took.get(), "{peer} at {at}: two holders ({ops:?})");
                    assert_eq!(std::fs::metadata(&lock).unwrap().ino(), held.id.ino);
                    let content = content.unwrap();
                    assert!(content.starts_with(&format!("{}\n", me.pid)), "{content:?}");
                }
                Ok(Attempt::Busy(_)) => match content {
                    Some(content) => assert_eq!(content, live.record(), "{peer} at {at}"),
                    // Released after the attempt looked: the next attempt
                    // takes it.
                    None => {
                        let mut plain = swaplock_linux::soft::LinuxOs::new(fd.as_fd());
                        let next = soft::try_acquire(&mut plain, &cfg, &mut Contender::new());
                        assert!(
                            matches!(next, Ok(Attempt::Acquired(_))),
                            "{peer} at {at}: the lock stays free and untaken"
                        );
                    }
                },
                Err(e) => panic!("{peer} at {at}: {e:?} ({ops:?})"),
            }
            let names = std::str::from_utf8(LOCK).unwrap();
            assert!(
                others(dir.path(), &[names]).is_empty(),
                "{peer} at {at}: left {:?}",
                others(dir.path(), &[names])
            );
            fired
        });
        eprintln!("{peer}: {covered} positions");
        assert!(covered >= 3, "{peer}: {covered} positions");
    }
}

/// A marker the stale step cannot read for want of descriptors (`EMFILE`,
/// `ENFILE`) is the attempt's error, not contention (PROTOCOL 7.6):
/// answered busy at every attempt while its descriptors stay taken, a
/// wait would never give its watch's back (7.1), and a dead holder's
/// marker would stay. Any other failed read is contention, as filelock
/// takes it.
#[test]
fn a_marker_unread_for_want_of_descriptors_is_an_error() {
    let me = me();
    for (errno, error) in [
        (Errno::MFILE, true),
        (Errno::NFILE, true),
        (Errno::IO, false),
        (Errno::ACCES, false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join(std::str::from_utf8(LOCK).unwrap());
        let stale = format!("{}\n{}\n", dead_pid(), host_name());
        std::fs::write(&lock, &stale).unwrap();
        let fd = dir_fd(dir.path());
        let mut os = Seam::every(
            &fd,
            Box::new(move |_, op| (op == "open_read").then_some(errno)),
        );
        let cfg = config(&me, Kind::Soft);
        let attempt = soft::try_acquire(&mut os, &cfg, &mut Contender::new());
        let ops = std::mem::take(&mut os.ops);
        drop(os);
        assert!(ops.contains(&"open_read"), "{errno:?}: {ops:?}");
        match (error, attempt) {
            (true, Err(soft::Error::Os { errno: e, .. })) => assert_eq!(e, errno),
            (false, Ok(Attempt::Busy(_))) => {}
            (_, other) => panic!("{errno:?}: {:?}", other.map(|_| ())),
        }
        // Nothing was taken or moved: the dead holder's marker is there.
        assert_eq!(std::fs::read_to_string(&lock).unwrap(), stale, "{errno:?}");
        let names = std::str::from_utf8(LOCK).unwrap();
        assert!(others(dir.path(), &[names]).is_empty(), "{errno:?}");
    }
}
