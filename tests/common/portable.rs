//! Helpers of the integration tests that every platform builds: the Unix
//! tests reach them through `common`, the tests Windows runs (its own and
//! those of every platform) with `#[path = "common/portable.rs"] mod
//! portable;`. What differs between platforms stays inside a helper here.

#![allow(dead_code, unreachable_pub)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{mpsc, Mutex};

/// Debian chiark-utils-bin's with-lock-ex, the reference.
pub const REFERENCE: &str = "/usr/bin/with-lock-ex";

/// The swaplock command this package built.
pub fn swaplock() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_swaplock"))
}

/// The names in `dir` other than those in `keep`, sorted: what a lock
/// left behind.
pub fn others(dir: &Path, keep: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect();
    names.sort();
    names
}

/// A loopback port nobody listens on now (free when asked; the server that
/// asked binds it next).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("a loopback port")
        .local_addr()
        .expect("its address")
        .port()
}

/// Whether `FileLock::new` takes open file description locks here: on
/// 64-bit Linux and Android (every kernel the tests run on has them, from
/// Linux 3.15), unless `SWAPLOCK_FCNTL_OFD=0` turns them off, as on a
/// kernel before 3.15.
pub fn ofd() -> bool {
    cfg!(all(
        any(target_os = "linux", target_os = "android"),
        target_pointer_width = "64"
    )) && std::env::var_os("SWAPLOCK_FCNTL_OFD").is_none_or(|v| v != "0")
}

/// A thread that takes a lock (`take`) and holds it until told, then lets
/// go (`release`); answers once the lock is held: the go-ahead, and the
/// thread.
pub fn held_by_a_thread<G>(
    take: impl FnOnce() -> G + Send + 'static,
    release: impl FnOnce(G) + Send + 'static,
) -> (mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (held_tx, held_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let guard = take();
        held_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        release(guard);
    });
    held_rx.recv().expect("the holding thread took the lock");
    (go_tx, thread)
}

/// A command that runs `binary` with `argv[0]` set to `arg0` (on Unix;
/// Windows has no `argv[0]` of its own to set). One of this package's own
/// binaries runs through `SWAPLOCK_TEST_RUNNER` when that is set: an
/// emulator such as `qemu-aarch64-static` when the tests are built for
/// another architecture, since the kernel cannot exec them itself. Host
/// programs (the reference, Python, the shell) run directly.
pub fn command(binary: &Path, arg0: &str) -> Command {
    match std::env::var_os("SWAPLOCK_TEST_RUNNER") {
        Some(runner) if binary != Path::new(REFERENCE) => {
            let mut cmd = Command::new(runner);
            cmd.arg("-0").arg(arg0).arg(binary);
            cmd
        }
        _ => {
            #[cfg_attr(not(unix), allow(unused_mut))]
            let mut cmd = Command::new(binary);
            #[cfg(unix)]
            std::os::unix::process::CommandExt::arg0(&mut cmd, arg0);
            cmd
        }
    }
}

/// Wine 8.0's CreateProcess fails now and then with ERROR_INTERNAL_ERROR
/// (1359, "Internal error.") when the tests' threads start processes at
/// once (one run in 40 here): [`run_swaplock`] runs each command to its
/// end in its turn.
static TURN: Mutex<()> = Mutex::new(());

/// Runs `swaplock ARGS...` to its end, one command of this test process
/// at a time, and answers what it did.
pub fn run_swaplock(args: &[&str]) -> Output {
    let _turn = TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    command(&swaplock(), "swaplock")
        .args(args)
        .output()
        .unwrap()
}

pub fn reference() -> PathBuf {
    let path = PathBuf::from(REFERENCE);
    assert!(
        path.exists(),
        "{REFERENCE} is missing: run scripts/setup (it installs chiark-utils-bin)"
    );
    path
}

/// Runs `binary` as `with-lock-ex` (the name its messages print) in `dir`.
pub fn run(binary: &Path, dir: &Path, args: &[&str]) -> Output {
    command(binary, "with-lock-ex")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("spawn with-lock-ex")
}

/// Whether the reference with-lock-ex, another process, finds the `fcntl`
/// lock on `dir/name` held (`-f`: exit 255) rather than free (it runs
/// `true`: exit 0).
pub fn held_for_the_reference(dir: &Path, name: &str) -> bool {
    let out = run(&reference(), dir, &["-f", name, "true"]);
    match out.status.code() {
        Some(0) => false,
        Some(255) => true,
        _ => panic!("{out:?}"),
    }
}

/// `path` opened for reading and writing, created if missing, never
/// truncated: a lock file as a caller opens it.
pub fn open_rw(path: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap()
}

/// Whether another process finds the kernel lock on `path` held, of
/// `kind` `fcntl` or `flock`. On Linux and Android the real peers: the
/// reference with-lock-ex for `fcntl` (see [`held_for_the_reference`]),
/// util-linux `flock -n` for `flock`. On Windows, where both kinds are one
/// `LockFileEx` lock and no such peer runs, this package's `swaplock
/// status` (exit 1 when held).
pub fn held_elsewhere(kind: &str, path: &Path) -> bool {
    #[cfg(windows)]
    {
        let out = run_swaplock(&["status", "--kind", kind, path.to_str().unwrap()]);
        match out.status.code() {
            Some(0) => false,
            Some(1) => true,
            _ => panic!("{out:?}"),
        }
    }
    #[cfg(not(windows))]
    {
        let dir = path.parent().unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        if kind == "fcntl" {
            return held_for_the_reference(dir, name);
        }
        let out = Command::new("flock")
            .args(["-n", "-E", "255"])
            .arg(path)
            .arg("true")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        match out.status.code() {
            Some(0) => false,
            Some(255) => true,
            _ => panic!("{out:?}"),
        }
    }
}
