//! The SQLite lock against its real peers, both ways (PROTOCOL 17): Python
//! filelock 4.2.11's `ReadWriteLock` and plain `sqlite3` connections
//! (`BEGIN` and a read, `BEGIN IMMEDIATE`, `BEGIN EXCLUSIVE`, busy timeout
//! 0), with our open file description locks and with classic ones. Every
//! pair of holder and contender, writer preference, either side creating
//! the database, refusals (WAL, not a database, a replaced file),
//! filelock's link directory, descriptor hygiene, threads, the command,
//! and a mixed storm checked by an `O_EXCL` witness.

#![cfg(any(target_os = "linux", target_os = "android"))]

mod common;

use common::{poll_until, python, Holder};
use serde_json::Value;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;
use swaplock::SqliteRwLock;

#[path = "sqlite_interop/storm.rs"]
mod storm;

/// The Python ways of holding: filelock's two, and three plain `sqlite3`
/// transactions.
const PYTHON_HOLDS: [&str; 5] = ["read", "write", "shared", "immediate", "exclusive"];

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn peer_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(python());
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peer/sqlite_peer.py"))
        .args(args);
    cmd
}

/// A Python process holding `how` on `path`, and its JSON line.
fn python_holder(how: &str, path: &Path) -> (Holder, Value) {
    let (holder, line) = Holder::spawn(peer_command(&["hold", how, s(path)]));
    let hello: Value = serde_json::from_str(&line).unwrap();
    assert!(hello.get("error").is_none(), "{how}: {hello}");
    (holder, hello)
}

/// A Python process that answers tries, so that each costs no start-up.
struct Tries {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Tries {
    fn new() -> Self {
        let mut child = peer_command(&["serve"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Tries {
            child,
            stdin,
            stdout,
        }
    }

    /// One try of `how`, never waiting: "acquired", "busy", or the error.
    fn try_(&mut self, how: &str, path: &Path) -> String {
        writeln!(self.stdin, "try {how} {}", s(path)).unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        match v["result"].as_str().unwrap() {
            "error" => format!("error {}: {}", v["type"], v["message"]),
            r => r.to_owned(),
        }
    }
}

impl Drop for Tries {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Our two kinds of lock: the default (open file description locks where
/// the target has them, [`common::ofd`]), and classic ones.
fn flavours(path: &Path) -> [(&'static str, SqliteRwLock); 2] {
    [
        ("default", SqliteRwLock::new(path)),
        ("classic", SqliteRwLock::new(path).owned_by_process()),
    ]
}

/// Whether `flavour`'s locks are open file description locks.
fn by_description(flavour: &str) -> bool {
    flavour == "default" && common::ofd()
}

/// One non-waiting try of ours: "acquired" or "busy".
fn rust_try(lock: &SqliteRwLock, write: bool) -> &'static str {
    let got = match write {
        true => lock.try_write(),
        false => lock.try_read(),
    };
    match got {
        Ok(guard) => {
            guard.release().unwrap();
            "acquired"
        }
        Err(e) if e.kind() == ErrorKind::WouldBlock => "busy",
        Err(e) => panic!("{e}"),
    }
}

/// Asks the kernel who holds SQLite's lock bytes, through a descriptor
/// kept open until dropped: closing one would drop this process's
/// classic locks on the file (C-DB1). Independent of the library under
/// test.
struct Probe(std::fs::File);

const PENDING: i64 = 0x4000_0000;

impl Probe {
    fn new(path: &Path) -> Self {
        Probe(std::fs::File::open(path).unwrap())
    }

    /// What `F_OFD_GETLK` says would refuse a write lock on
    /// `start..+len` (so that this process's classic locks show too; a
    /// classic `F_GETLK` where the target has no open file description
    /// locks, to which this process's own do not show): `None`, or the
    /// lock type and PID.
    fn at(&self, start: i64, len: i64) -> Option<(i16, i32)> {
        // SAFETY: `flock` is plain integers; all-zero is valid.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_WRLCK as i16;
        fl.l_whence = libc::SEEK_SET as i16;
        fl.l_start = start as libc::off_t;
        fl.l_len = len as libc::off_t;
        let query = if common::ofd() {
            36 // F_OFD_GETLK
        } else {
            libc::F_GETLK
        };
        // SAFETY: an open descriptor and a valid `struct flock`.
        let r = unsafe { libc::fcntl(self.0.as_raw_fd(), query, &mut fl) };
        assert_eq!(r, 0, "F_GETLK: {}", std::io::Error::last_os_error());
        (fl.l_type != libc::F_UNLCK as i16).then_some((fl.l_type, fl.l_pid))
    }

    /// The PID of the writer that holds PENDING, once one does (it waits
    /// for readers).
    fn until_pending(&self) -> i32 {
        let mut pid = 0;
        poll_until(Duration::from_secs(20), "a writer holds PENDING", || {
            self.at(PENDING, 1).is_some_and(|(t, p)| {
                pid = p;
                t == libc::F_WRLCK as i16
            })
        });
        pid
    }
}

/// A writer of ours that waits for `path`'s lock (at most 30 s), takes it
/// and lets go at once: a thread of this process where our locks are open
/// file description locks, which a [`Probe`] here sees (PID -1); else
/// `swaplock run --kind sqlite` in a process of its own, since this
/// process's classic locks never show to its own probe.
enum Waiting {
    Thread(std::thread::JoinHandle<std::io::Result<()>>),
    Command(Child),
}

impl Waiting {
    fn start(path: &Path) -> Self {
        if common::ofd() {
            let lock = SqliteRwLock::new(path);
            let timeout = Duration::from_secs(30);
            return Waiting::Thread(std::thread::spawn(move || {
                lock.write_timeout(timeout)?.release()
            }));
        }
        let mut cmd = common::command(&common::swaplock(), "swaplock");
        cmd.args(["run", "--kind", "sqlite", "-w", "30", s(path), "true"]);
        Waiting::Command(cmd.stderr(Stdio::piped()).spawn().unwrap())
    }

    /// The PID its PENDING lock shows with.
    fn pid(&self) -> i32 {
        match self {
            Waiting::Thread(_) => -1,
            Waiting::Command(child) => child.id() as i32,
        }
    }

    fn is_finished(&mut self) -> bool {
        match self {
            Waiting::Thread(t) => t.is_finished(),
            Waiting::Command(child) => child.try_wait().unwrap().is_some(),
        }
    }

    /// How it ended: held and released, or why not.
    fn finish(self) -> Result<(), String> {
        match self {
            Waiting::Thread(t) => t.join().unwrap().map_err(|e| e.to_string()),
            Waiting::Command(child) => {
                let out = child.wait_with_output().unwrap();
                match out.status.success() {
                    true => Ok(()),
                    false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
                }
            }
        }
    }
}

/// The lock kinds `/proc/locks` lists on `path`'s file ("POSIX",
/// "OFDLCK").
fn kernel_kinds(path: &Path) -> Vec<String> {
    let ino = std::fs::metadata(path).unwrap().ino();
    let table = std::fs::read_to_string("/proc/locks").unwrap();
    let mut kinds: Vec<String> = table
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(5)
                .is_some_and(|f| f.ends_with(&format!(":{ino}")))
        })
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_owned))
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

/// No stray file beside the database: no journal, WAL or link directory.
fn no_strays(dir: &Path, db: &str) {
    let names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != db && n != "witness")
        .collect();
    assert!(names.is_empty(), "strays beside {db}: {names:?}");
}

#[test]
fn python_and_sqlite3_holders_exclude_us_as_sqlite_says() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    // (holder, our read, our write)
    let expected = [
        ("read", "acquired", "busy"),
        ("write", "busy", "busy"),
        ("shared", "acquired", "busy"),
        ("immediate", "acquired", "busy"),
        ("exclusive", "busy", "busy"),
    ];
    for (how, read, write) in expected {
        let (holder, hello) = python_holder(how, &path);
        assert_eq!(
            kernel_kinds(&path),
            ["POSIX"],
            "{how}: Python's are classic"
        );
        for (flavour, lock) in flavours(&path) {
            let got = (rust_try(&lock, false), rust_try(&lock, true));
            assert_eq!(
                got,
                (read, write),
                "{how} held by Python, our {flavour} tries"
            );
        }
        let held = SqliteRwLock::new(&path).holding().unwrap();
        let pid = hello["pid"].as_i64().unwrap() as i32;
        match how {
            "write" | "exclusive" => assert_eq!(held.exclusive, Some(pid), "{how}"),
            "immediate" => assert_eq!((held.shared, held.reserved), (Some(pid), Some(pid))),
            _ => assert_eq!((held.shared, held.exclusive), (Some(pid), None), "{how}"),
        }
        holder.release();
    }
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    no_strays(dir.path(), "a.db");
}

#[test]
fn our_holders_exclude_python_and_sqlite3_both_kinds_of_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let mut tries = Tries::new();
    for (flavour, lock) in flavours(&path) {
        for write in [false, true] {
            let guard = match write {
                true => lock.try_write(),
                false => lock.try_read(),
            }
            .unwrap();
            // Open file description locks against Python's classic ones:
            // the kernel lists ours as OFDLCK, theirs as POSIX.
            let ours = if by_description(flavour) {
                "OFDLCK"
            } else {
                "POSIX"
            };
            assert_eq!(kernel_kinds(&path), [ours]);
            for how in PYTHON_HOLDS {
                let shares = !write && matches!(how, "read" | "shared" | "immediate");
                let want = if shares { "acquired" } else { "busy" };
                assert_eq!(
                    tries.try_(how, &path),
                    want,
                    "our {flavour} {} held, Python tries {how}",
                    if write { "write" } else { "read" }
                );
            }
            guard.release().unwrap();
        }
    }
    for how in PYTHON_HOLDS {
        assert_eq!(tries.try_(how, &path), "acquired", "{how} once we let go");
    }
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    no_strays(dir.path(), "a.db");
}

#[test]
fn a_waiting_writer_keeps_new_readers_out_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let mut tries = Tries::new();
    // Python reads; our writer waits, holding PENDING.
    let (reader, _) = python_holder("read", &path);
    let probe = Probe::new(&path);
    let mut writer = Waiting::start(&path);
    assert_eq!(probe.until_pending(), writer.pid(), "our writer");
    assert_eq!(tries.try_("read", &path), "busy", "a new Python reader");
    assert_eq!(tries.try_("shared", &path), "busy", "a new sqlite3 reader");
    for (_, lock) in flavours(&path) {
        assert_eq!(rust_try(&lock, false), "busy", "a new reader of ours");
    }
    assert!(!writer.is_finished());
    reader.release();
    writer.finish().unwrap();

    // We read; Python's writer waits, holding PENDING.
    for (flavour, lock) in flavours(&path) {
        let reading = lock.try_read().unwrap();
        let mut writer = peer_command(&["hold", "write", s(&path)])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = probe.until_pending();
        assert_eq!(pid, writer.id() as i32, "{flavour}: Python's writer");
        assert_eq!(
            SqliteRwLock::new(&path).holding().unwrap().pending,
            Some(pid)
        );
        assert_eq!(
            rust_try(&SqliteRwLock::new(&path), false),
            "busy",
            "{flavour}"
        );
        // A reader of the holder's own kind: for classic locks, one that
        // would join this process's read lock, past the gate.
        assert_eq!(rust_try(&lock, false), "busy", "{flavour}: joining");
        assert_eq!(tries.try_("read", &path), "busy", "{flavour}");
        reading.release().unwrap();
        let mut line = String::new();
        let mut out = BufReader::new(writer.stdout.take().unwrap());
        out.read_line(&mut line).unwrap();
        assert!(
            line.contains("\"pid\""),
            "{flavour}: Python's writer holds: {line}"
        );
        assert_eq!(rust_try(&lock, false), "busy", "{flavour}");
        drop(writer.stdin.take());
        writer.wait().unwrap();
    }
    no_strays(dir.path(), "a.db");
}

#[test]
fn either_side_may_create_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let mut tries = Tries::new();
    // Ours first: an empty file, mode 0600 as filelock makes it.
    let ours = dir.path().join("ours.db");
    SqliteRwLock::new(&ours)
        .try_write()
        .unwrap()
        .release()
        .unwrap();
    let made = std::fs::metadata(&ours).unwrap();
    assert_eq!((made.len(), made.permissions().mode() & 0o777), (0, 0o600));
    for how in PYTHON_HOLDS {
        assert_eq!(tries.try_(how, &ours), "acquired", "{how} on our file");
    }
    // Python's first.
    let theirs = dir.path().join("theirs.db");
    assert_eq!(tries.try_("read", &theirs), "acquired");
    let made = std::fs::metadata(&theirs).unwrap();
    assert_eq!((made.len(), made.permissions().mode() & 0o777), (0, 0o600));
    for (flavour, lock) in flavours(&theirs) {
        assert_eq!(rust_try(&lock, true), "acquired", "{flavour}");
        assert_eq!(rust_try(&lock, false), "acquired", "{flavour}");
    }
    for file in [&ours, &theirs] {
        assert_eq!(std::fs::metadata(file).unwrap().len(), 0);
    }
}

/// `sqlite3` run by Python on `path`: `script` (statements).
fn sqlite3(path: &Path, script: &str) {
    let code = format!(
        "import sqlite3; c = sqlite3.connect({:?}); c.executescript({script:?}); c.close()",
        s(path)
    );
    let status = Command::new(python()).args(["-c", &code]).status().unwrap();
    assert!(status.success());
}

#[test]
fn nothing_is_written_and_wal_and_strangers_are_refused_by_both() {
    let dir = tempfile::tempdir().unwrap();
    let mut tries = Tries::new();
    // Someone's rollback-journal database: locked, never changed.
    let tables = dir.path().join("tables.db");
    sqlite3(&tables, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    let before = std::fs::read(&tables).unwrap();
    for (_, lock) in flavours(&tables) {
        assert_eq!(
            (rust_try(&lock, false), rust_try(&lock, true)),
            ("acquired", "acquired")
        );
    }
    assert_eq!(std::fs::read(&tables).unwrap(), before, "never written");
    // WAL mode: both refuse, for reads and writes.
    let wal = dir.path().join("wal.db");
    sqlite3(&wal, "PRAGMA journal_mode=WAL; CREATE TABLE t(x);");
    let before = std::fs::read(&wal).unwrap();
    for (_, lock) in flavours(&wal) {
        for e in [lock.try_read().unwrap_err(), lock.try_write().unwrap_err()] {
            assert_eq!(e.kind(), ErrorKind::InvalidData, "{e}");
            assert!(e.to_string().contains("WAL-mode"), "{e}");
        }
    }
    for how in ["read", "write"] {
        let got = tries.try_(how, &wal);
        assert!(got.starts_with("error \"ValueError\""), "{how}: {got}");
    }
    assert_eq!(std::fs::read(&wal).unwrap(), before);
    // Core's header verdict on what it judges (filelock's WAL check and
    // SQLite's header checks): the same answer as filelock's.
    let database = std::fs::read(&tables).unwrap();
    let mut newer_write = database.clone();
    newer_write[19] = 3;
    let mut odd_page = database.clone();
    odd_page[16..18].copy_from_slice(&[0x03, 0x00]);
    let vectors: [&[u8]; 9] = [
        b"",
        b"hello world\n",
        b"SQLite format 3\0",
        b"SQLite format 3\0\x10\x00\x02\x01",
        b"SQLite format 3\0\x10\x00\x01",
        &[0; 4096],
        &database,
        &newer_write,
        &odd_page,
    ];
    for (i, bytes) in vectors.iter().enumerate() {
        let path = dir.path().join(format!("v{i}.db"));
        std::fs::write(&path, bytes).unwrap();
        let ours = SqliteRwLock::new(&path).try_read().map(drop).is_ok();
        let theirs = tries.try_("read", &path);
        assert_eq!(
            ours,
            theirs == "acquired",
            "vector {i}: Python says {theirs}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), *bytes);
    }
    // A symlink at the path is refused, its target untouched.
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&tables, &link).unwrap();
    assert!(SqliteRwLock::new(&link).try_read().is_err());
}

#[test]
fn a_database_replaced_while_acquiring_fails_the_acquire_on_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let other = dir.path().join("other.db");
    // Our writer waits on a Python reader; the file is replaced meanwhile.
    let (reader, _) = python_holder("read", &path);
    let probe = Probe::new(&path);
    let writer = Waiting::start(&path);
    assert_eq!(probe.until_pending(), writer.pid());
    std::fs::write(&other, b"").unwrap();
    std::fs::rename(&other, &path).unwrap();
    reader.release();
    let e = writer.finish().unwrap_err();
    assert!(e.contains("unlinked or replaced while acquiring"), "{e}");
    // Python's writer waits on our reader, and fails the same way.
    let reading = SqliteRwLock::new(&path).try_read().unwrap();
    let writer = peer_command(&["hold", "write", s(&path)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Kept open to the end: its close would drop this process's classic
    // locks, where ours are.
    let probe = Probe::new(&path);
    assert_eq!(probe.until_pending(), writer.id() as i32);
    std::fs::write(&other, b"").unwrap();
    std::fs::rename(&other, &path).unwrap();
    reading.release().unwrap();
    let out = writer.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("was unlinked or replaced while acquiring"),
        "{said}"
    );
}

#[test]
fn python_through_its_link_directory_and_we_on_the_file_exclude_each_other() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let path = dir.path().join("a.db");
    for (how, read) in [("write", "busy"), ("read", "acquired")] {
        let (holder, hello) = python_holder(how, &path);
        assert_eq!(
            hello["nlink"], 2,
            "{how}: Python connects through a private link"
        );
        for (flavour, lock) in flavours(&path) {
            let got = (rust_try(&lock, false), rust_try(&lock, true));
            assert_eq!(got, (read, "busy"), "{how} through the link, our {flavour}");
        }
        holder.release();
        assert_eq!(std::fs::metadata(&path).unwrap().nlink(), 1);
    }
    // And the other way: Python's tries through its link find us.
    let mut tries = Tries::new();
    for (flavour, lock) in flavours(&path) {
        let reading = lock.try_read().unwrap();
        assert_eq!(tries.try_("read", &path), "acquired", "{flavour}");
        assert_eq!(tries.try_("write", &path), "busy", "{flavour}");
        reading.release().unwrap();
        let writing = lock.try_write().unwrap();
        assert_eq!(tries.try_("read", &path), "busy", "{flavour}");
        writing.release().unwrap();
    }
    assert_eq!(std::fs::metadata(&path).unwrap().nlink(), 1);
    no_strays(dir.path(), "a.db");
}

#[test]
fn closing_another_descriptor_of_the_file_leaves_our_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let mut tries = Tries::new();
    for (flavour, lock) in flavours(&path) {
        let guard = lock.try_write().unwrap();
        // Descriptors this library opens and closes (a status query, a
        // refused try) never drop a lock, whichever kind it is.
        assert!(lock.holding().is_ok());
        assert_eq!(rust_try(&lock, false), "busy");
        assert_eq!(tries.try_("write", &path), "busy", "{flavour}");
        // One the program opens and closes itself leaves an open file
        // description lock, and drops a classic one (PROTOCOL 17.4).
        drop(std::fs::File::open(&path).unwrap());
        let want = if by_description(flavour) {
            "busy"
        } else {
            "acquired"
        };
        assert_eq!(tries.try_("write", &path), want, "{flavour}");
        guard.release().unwrap();
    }
}

#[test]
fn threads_of_one_process_exclude_each_other_as_processes_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let mut tries = Tries::new();
    for (flavour, lock) in flavours(&path) {
        let (a, b) = (lock.try_read().unwrap(), lock.try_read().unwrap());
        assert_eq!(rust_try(&lock, true), "busy", "{flavour}");
        drop(a);
        assert_eq!(
            tries.try_("write", &path),
            "busy",
            "{flavour}: one reader left"
        );
        drop(b);
        let w = lock.try_write().unwrap();
        assert_eq!(rust_try(&lock, false), "busy", "{flavour}");
        assert_eq!(rust_try(&lock, true), "busy", "{flavour}");
        // A writer waiting on another thread's reader keeps new readers
        // of this process out too.
        drop(w);
        let r = lock.try_read().unwrap();
        let waiting = {
            let lock = lock.clone();
            std::thread::spawn(move || lock.write_timeout(Duration::from_secs(30)).map(drop))
        };
        poll_until(Duration::from_secs(20), "the writer waits", || {
            rust_try(&lock, false) == "busy"
        });
        drop(r);
        waiting.join().unwrap().unwrap();
        assert_eq!(
            tries.try_("write", &path),
            "acquired",
            "{flavour}: all let go"
        );
    }
}

#[test]
fn swaplock_run_holds_the_lock_and_status_names_its_holders() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let mut tries = Tries::new();
    let status = || {
        let out = common::command(&common::swaplock(), "swaplock")
            .args(["status", "--kind", "sqlite", s(&path)])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .to_owned();
        (out.status.code(), text)
    };
    assert_eq!(status(), (Some(0), "free".to_owned()));
    for shared in [false, true] {
        let mut cmd = common::command(&common::swaplock(), "swaplock");
        cmd.args(["run", "--kind", "sqlite"]);
        if shared {
            cmd.arg("-s");
        }
        cmd.args([s(&path), "sh", "-c", common::HOLD]);
        let (holder, _) = Holder::spawn(cmd);
        let pid = holder.child.id();
        let mode = if shared { "shared" } else { "exclusive" };
        assert_eq!(status(), (Some(1), format!("held: mode {mode} pid {pid}")));
        let want = if shared { "acquired" } else { "busy" };
        assert_eq!(tries.try_("read", &path), want);
        assert_eq!(tries.try_("write", &path), "busy");
        if shared {
            // A Python writer waits: status names it.
            let mut writer = peer_command(&["hold", "write", s(&path)])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            Probe::new(&path).until_pending();
            let (code, text) = status();
            assert_eq!(code, Some(1));
            assert_eq!(
                text,
                format!(
                    "held: mode shared (a writer waits for the readers, holding pending: \
                     pid {}) pid {pid}",
                    writer.id()
                )
            );
            writer.kill().unwrap();
            writer.wait().unwrap();
        }
        assert!(holder.release().success());
    }
    assert_eq!(status(), (Some(0), "free".to_owned()));
    let busy = common::command(&common::swaplock(), "swaplock")
        .args([
            "run",
            "--kind",
            "sqlite",
            "--shared",
            "-n",
            s(&path),
            "true",
        ])
        .status()
        .unwrap();
    assert!(busy.success());
}

#[test]
fn a_mixed_storm_never_overlaps_and_readers_share() {
    storm::run();
}

/// A worker process of the storm (started again from this executable).
#[test]
#[ignore = "a worker of a_mixed_storm_never_overlaps_and_readers_share"]
fn worker() {
    storm::worker();
}
