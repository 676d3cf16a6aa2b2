//! swaplock's benchmarks, side by side with its peers, measured in one run
//! on one machine and printed as a Markdown table of ratios
//! (`docs/BENCHMARKS.md` keeps the last full run):
//!
//! - an uncontended acquire and release of each kind, against its syscall
//!   floor (the same calls made directly through libc), std's
//!   `File::lock`, fs2's, and Python filelock 4.2.11's class of that kind;
//! - the commands, whole-process wall time: `with-lock-ex -w L true`
//!   against chiark's and `flock(1)`, and `swaplock run`;
//! - the handoff from a releasing process to a process blocked in `lock()`,
//!   p50 and p99, for each kind;
//! - the takeover of a soft lock whose holder was killed (SIGKILL), from
//!   the kill to the waiter's return;
//! - heap allocations per uncontended cycle;
//! - the contention curves (`--curves`, `locks/curves.rs`): 1 to 128
//!   processes hammering one lock, for every kind beside raw `flock(2)` and
//!   filelock's classes: throughput, wait p50 and p99, Jain's fairness;
//! - the takeover after SIGKILL against the size of the lock's directory
//!   (`--scan`, `locks/scan.rs`), 0 to a million files beside the lock.
//!
//! ```text
//! cargo bench --bench locks                # the full run (about a minute)
//! cargo bench --bench locks -- --quick     # a smoke run, as CI runs it
//! cargo bench --bench locks -- --takeover  # only the takeovers after SIGKILL
//! cargo bench --bench locks -- --curves    # only the contention curves (16 minutes
//!                                          # on a busy 2-CPU machine), then the
//!                                          # contention guard: exit 1 if a soft kind's
//!                                          # throughput with 32 processes is under
//!                                          # half its throughput with 2
//! cargo bench --bench locks -- --curves --quick
//!                                          # 2 and 32 processes, short runs (the soft
//!                                          # kinds in three rounds), the guard
//! cargo bench --bench locks -- --curves --only soft,marker
//!                                          # those rows alone (keys: `curves::ROWS`)
//! cargo bench --bench locks -- --curves --rounds 3
//!                                          # every cell the median of three rounds
//!                                          # (the guard: the median of their ratios)
//! cargo bench --bench locks -- --curves --witness-check
//!                                          # processes without a lock: passes if the
//!                                          # overlap witness catches them
//! cargo bench --bench locks -- --scan      # only the takeovers against the
//!                                          # directory's size (a million files;
//!                                          # 13 minutes, filelock's most of them)
//! cargo bench --bench locks -- --scan --quick  # 0 and 10,000 files, 3 kills
//! ```
//!
//! `SWAPLOCK_BENCH_WITH_LOCK_EX` names another `with-lock-ex` to time (the
//! static musl build, say). Python comes from `SWAPLOCK_PYTHON` or the
//! workspace's `.venv` (`scripts/setup`).

#[cfg(any(target_os = "linux", target_os = "android"))]
#[path = "locks/curves.rs"]
mod curves;
#[cfg(any(target_os = "linux", target_os = "android"))]
#[path = "locks/scan.rs"]
mod scan;

#[cfg(any(target_os = "linux", target_os = "android"))]
mod linux {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::ffi::{CStr, CString};
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
    use swaplock::soft::SoftLock;
    use swaplock::FileLock;

    /// Counts heap allocations, for the allocations per cycle.
    struct Counting;

    static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

    // SAFETY: every call is passed on to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
            // SAFETY: the caller's contract is the system allocator's.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: as above.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
            // SAFETY: as above.
            unsafe { System.realloc(ptr, layout, new) }
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;

    /// The kinds of lock, as the table and the child processes name them.
    const KINDS: [&str; 5] = ["fcntl", "flock", "soft", "marker", "lease"];

    /// Mean time of one `cycle`, over `n` after a warm-up of `n / 10`.
    pub(crate) fn per_cycle(n: u32, mut cycle: impl FnMut()) -> Duration {
        for _ in 0..n / 10 {
            cycle();
        }
        let began = Instant::now();
        for _ in 0..n {
            cycle();
        }
        began.elapsed() / n
    }

    /// A path as a C string, for the libc floors.
    pub(crate) fn c_path(path: &Path) -> CString {
        CString::new(path.as_os_str().as_bytes()).unwrap()
    }

    /// A kernel lock's floor: what the with-lock-ex protocol must call,
    /// directly: open, lock (`lock(fd, true)`), the deletion check's
    /// `fstat` and `stat`, unlock (`lock(fd, false)`), close.
    pub(crate) fn kernel_floor(path: &Path, lock: impl Fn(i32, bool) -> i32) {
        let p = c_path(path);
        // SAFETY: plain syscalls on a descriptor this function owns, with
        // buffers that outlive the calls.
        unsafe {
            let fd = libc::open(
                p.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC,
                0o600,
            );
            assert!(fd >= 0);
            assert_eq!(lock(fd, true), 0);
            let mut st: libc::stat = std::mem::zeroed();
            libc::fstat(fd, &mut st);
            libc::stat(p.as_ptr(), &mut st);
            lock(fd, false);
            libc::close(fd);
        }
    }

    /// `fcntl`'s lock and unlock: an open file description lock on byte 0.
    fn ofd_lock(fd: i32, lock: bool) -> i32 {
        // SAFETY: a plain fcntl on a descriptor the caller owns, with a
        // struct that outlives the call.
        unsafe {
            let mut fl: libc::flock = std::mem::zeroed();
            fl.l_type = if lock { libc::F_WRLCK } else { libc::F_UNLCK } as _;
            fl.l_whence = libc::SEEK_SET as _;
            fl.l_len = 1;
            let cmd = if lock {
                libc::F_OFD_SETLKW
            } else {
                libc::F_OFD_SETLK
            };
            libc::fcntl(fd, cmd, &fl)
        }
    }

    /// `flock`'s lock and unlock.
    pub(crate) fn flock_lock(fd: i32, lock: bool) -> i32 {
        // SAFETY: a plain flock on a descriptor the caller owns.
        unsafe { libc::flock(fd, if lock { libc::LOCK_EX } else { libc::LOCK_UN }) }
    }

    /// The soft floor: create the marker exclusively, write a record, remove
    /// it, close (filelock's own sequence, without any of its checks).
    fn soft_floor(path: &Path) {
        let p = c_path(path);
        let record = b"filelock/2\npid=1\nhost=h\nmode=exclusive\nstart=1\n";
        // SAFETY: as in `kernel_floor`.
        unsafe {
            let fd = libc::open(
                p.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o644,
            );
            assert!(fd >= 0);
            libc::write(fd, record.as_ptr().cast(), record.len());
            libc::unlink(p.as_ptr());
            libc::close(fd);
        }
    }

    /// The soft kinds' own floor: the syscalls of an uncontended cycle of
    /// the protocol both swaplock and filelock 4.2.11 run where the
    /// directory has unnamed files and an exchange (PROTOCOL 7.2 step 3,
    /// 7.4, 7.10), with none of the checks or bookkeeping around them:
    /// the record written into an unnamed file and linked at the lock
    /// path; at the release, the released record over it, a placeholder
    /// linked under a break name and exchanged in, then both names
    /// removed. `durable`: each of the two files synced before its name
    /// (`SoftLock::durable`). The lock's directory stays open across
    /// cycles.
    fn soft_protocol_floor(dir: i32, name: &CStr, brk: &CStr, durable: bool) {
        let record = b"4242\nvm\n6870303619024644360502512345\n1733541234.5\nexclusive\n12345678\n";
        let placeholder = b"filelock/break\n4242\n";
        let released = b"filelock/released\n";
        // SAFETY: plain syscalls on descriptors this function owns (the
        // directory's, the caller's), with buffers that outlive the calls.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            let unnamed = |mode: libc::c_uint| {
                let fd = libc::openat(
                    dir,
                    c".".as_ptr(),
                    libc::O_WRONLY | libc::O_TMPFILE | libc::O_CLOEXEC,
                    mode,
                );
                assert!(
                    fd >= 0,
                    "no unnamed files here: {}",
                    std::io::Error::last_os_error()
                );
                fd
            };
            let link = |fd: i32, to: &CStr| {
                let from = CString::new(format!("/proc/self/fd/{fd}")).unwrap();
                libc::linkat(
                    libc::AT_FDCWD,
                    from.as_ptr(),
                    dir,
                    to.as_ptr(),
                    libc::AT_SYMLINK_FOLLOW,
                )
            };
            // Acquire.
            let marker = unnamed(0o644);
            libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW);
            libc::fstat(marker, &mut st);
            libc::write(marker, record.as_ptr().cast(), record.len());
            if durable {
                libc::fsync(marker);
            }
            assert_eq!(link(marker, name), 0);
            // Release.
            libc::pwrite(marker, released.as_ptr().cast(), released.len(), 0);
            libc::ftruncate(marker, released.len() as _);
            libc::fstat(marker, &mut st);
            libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW);
            let ph = unnamed(0o600);
            libc::write(ph, placeholder.as_ptr().cast(), placeholder.len());
            if durable {
                libc::fsync(ph);
            }
            assert_eq!(link(ph, brk), 0);
            assert_eq!(
                libc::syscall(
                    libc::SYS_renameat2,
                    dir,
                    brk.as_ptr(),
                    dir,
                    name.as_ptr(),
                    libc::RENAME_EXCHANGE
                ),
                0
            );
            libc::fstatat(dir, brk.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW);
            libc::unlinkat(dir, brk.as_ptr(), 0);
            libc::fstat(ph, &mut st);
            libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW);
            libc::unlinkat(dir, name.as_ptr(), 0);
            libc::close(ph);
            libc::fstat(marker, &mut st);
            libc::close(marker);
        }
    }

    pub(crate) fn soft_lock(kind: &str, path: &Path) -> SoftLock {
        match kind {
            "soft" => SoftLock::soft(path),
            // The record not synced before its link (`durable(false)`).
            "soft-volatile" => SoftLock::soft(path).durable(false),
            "marker" => SoftLock::marker(path),
            _ => SoftLock::lease(path),
        }
    }

    /// A held lock of `kind` on `path`, and how to release it.
    /// (`fcntl-timed` and `flock-timed`: by a wait with a timeout.)
    fn take(kind: &str, path: &Path) -> Box<dyn FnOnce()> {
        match kind {
            "fcntl" | "flock" | "fcntl-timed" | "flock-timed" => {
                let lock = if kind.starts_with("fcntl") {
                    FileLock::new(path)
                } else {
                    FileLock::flock(path)
                };
                let g = match kind.ends_with("-timed") {
                    true => lock.lock_timeout(Duration::from_secs(60)).unwrap(),
                    false => lock.lock().unwrap(),
                };
                Box::new(move || g.release().unwrap())
            }
            _ => {
                let g = soft_lock(kind, path).lock().unwrap();
                Box::new(move || g.release().unwrap())
            }
        }
    }

    /// Nanoseconds since the epoch: the one clock two processes both read.
    fn wall_now() -> u128 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    }

    /// The child of a handoff or a takeover: says it is about to wait (or
    /// holds), waits, prints when it got the lock.
    fn child(role: &str, kind: &str, path: &Path) {
        let mut out = std::io::stdout();
        if role == "hold" {
            let _held = take(kind, path);
            writeln!(out, "held").unwrap();
            out.flush().unwrap();
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
            return;
        }
        writeln!(out, "waiting").unwrap();
        out.flush().unwrap();
        let release = take(kind, path);
        let got = wall_now();
        release();
        writeln!(out, "{got}").unwrap();
    }

    fn spawn_child(role: &str, kind: &str, path: &Path) -> (std::process::Child, impl BufRead) {
        let mut c = Command::new(std::env::current_exe().unwrap())
            .args(["--child", role, kind])
            .arg(path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(c.stdout.take().unwrap());
        (c, out)
    }

    fn read_line(out: &mut impl BufRead) -> String {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        line.trim_end().to_owned()
    }

    /// The time from this process's release to a waiting child's return.
    fn handoffs(kind: &str, path: &Path, n: usize) -> Vec<Duration> {
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let release = take(kind, path);
            let (mut c, mut out) = spawn_child("wait", kind, path);
            assert_eq!(read_line(&mut out), "waiting");
            // Let the child reach its wait: a pause, not synchronisation; a
            // child that is late only makes the handoff look shorter.
            std::thread::sleep(Duration::from_millis(20));
            let released = wall_now();
            release();
            let got: u128 = read_line(&mut out).parse().unwrap();
            c.wait().unwrap();
            times.push(Duration::from_nanos(got.saturating_sub(released) as u64));
        }
        times.sort();
        times
    }

    /// The time from killing a child that holds a soft lock to this process's
    /// return from `lock()`, waiting since before the kill.
    pub(crate) fn takeovers(kind: &str, path: &Path, n: usize) -> Vec<Duration> {
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let (mut c, mut out) = spawn_child("hold", kind, path);
            assert_eq!(read_line(&mut out), "held");
            let lock = soft_lock(kind, path);
            let (killed_at, killed) = std::sync::mpsc::channel();
            let killer = std::thread::spawn(move || {
                // The waiter below is in its first pause by now (a pause, not
                // synchronisation: a late waiter only shortens the figure).
                std::thread::sleep(Duration::from_millis(20));
                let at = Instant::now();
                c.kill().unwrap();
                // Reaped, as its parent would: a zombie's PID still runs.
                c.wait().unwrap();
                killed_at.send(at).unwrap();
            });
            let g = lock.lock().unwrap();
            let got = Instant::now();
            let at = killed.recv().unwrap();
            killer.join().unwrap();
            times.push(got.saturating_duration_since(at));
            g.release().unwrap();
        }
        times.sort();
        times
    }

    pub(crate) fn quantile(t: &[Duration], q: f64) -> Duration {
        t[((t.len() as f64 * q) as usize).min(t.len() - 1)]
    }

    pub(crate) fn us(d: Duration) -> String {
        format!("{:.1} µs", d.as_secs_f64() * 1e6)
    }

    pub(crate) fn ms(d: Duration) -> String {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    }

    pub(crate) fn ratio(a: Duration, b: Duration) -> String {
        format!("{:.2}x", a.as_secs_f64() / b.as_secs_f64())
    }

    /// The Python with filelock 4.2.11, if there is one.
    pub(crate) fn python() -> Option<PathBuf> {
        let p = std::env::var_os("SWAPLOCK_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
        p.exists().then_some(p)
    }

    /// filelock's uncontended cycle per class, in the same run.
    fn filelock_cycles(dir: &Path, n: u32) -> Option<Vec<(String, Duration)>> {
        let script = r#"
    import sys, time
    from filelock import UnixFileLock, SoftFileLock, MarkerSoftFileLock, SoftFileLease
    d, n = sys.argv[1], int(sys.argv[2])
    for name, cls in [("flock", UnixFileLock), ("soft", SoftFileLock), ("marker", MarkerSoftFileLock), ("lease", SoftFileLease)]:
        lock = cls(d + "/py-" + name + ".lock")
        for _ in range(max(n // 10, 1)):
            lock.acquire(); lock.release()
        t = time.perf_counter()
        for _ in range(n):
            lock.acquire(); lock.release()
        print(name, (time.perf_counter() - t) / n)
    "#;
        // The script's lines, without this module's indentation.
        let script: Vec<&str> = script
            .lines()
            .map(|l| l.strip_prefix("    ").unwrap_or(l))
            .collect();
        let out = Command::new(python()?)
            .args(["-c", &script.join("\n")])
            .arg(dir)
            .arg(n.to_string())
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!("filelock: {}", String::from_utf8_lossy(&out.stderr));
            return None;
        }
        Some(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| {
                    let (name, secs) = l.split_once(' ')?;
                    Some((name.to_owned(), Duration::from_secs_f64(secs.parse().ok()?)))
                })
                .collect(),
        )
    }

    /// Mean wall time of running `cmd` to completion, `n` times.
    fn per_run(n: u32, mut cmd: impl FnMut() -> Command) -> Option<Duration> {
        let mut run = || {
            cmd()
                .stdout(Stdio::null())
                .status()
                .ok()
                .filter(|s| s.success())
        };
        run()?;
        let began = Instant::now();
        for _ in 0..n {
            run()?;
        }
        Some(began.elapsed() / n)
    }

    /// The run the arguments ask for; its exit status.
    pub(crate) fn main() -> i32 {
        let args: Vec<String> = std::env::args().collect();
        if args.get(1).map(String::as_str) == Some("--child") {
            if args[2] == "curve" {
                return crate::curves::child(&args[3..]);
            }
            child(&args[2], &args[3], Path::new(&args[4]));
            return 0;
        }
        let quick = args.iter().any(|a| a == "--quick");
        let (cycles, runs, handoffs_n) = if quick {
            (200, 10, 5)
        } else {
            (20_000, 300, 100)
        };
        let dir = tempfile::tempdir().unwrap();
        if args.iter().any(|a| a == "--takeover") {
            print_takeovers(dir.path(), handoffs_n);
            return 0;
        }
        if args.iter().any(|a| a == "--curves") {
            return crate::curves::run(dir.path(), quick);
        }
        if args.iter().any(|a| a == "--scan") {
            return crate::scan::run(dir.path(), quick);
        }
        let at = |name: &str| dir.path().join(name);

        println!("## Uncontended acquire and release ({cycles} cycles, mean)\n");
        let py = filelock_cycles(dir.path(), if quick { 100 } else { 5_000 });
        let py_of = |kind: &str| {
            py.as_ref()
                .and_then(|p| p.iter().find(|(k, _)| k == kind).map(|(_, d)| *d))
        };
        println!("| kind | swaplock | syscall floor | vs floor | std `File::lock` | fs2 | filelock 4.2.11 | vs filelock | allocations |");
        println!("|---|---|---|---|---|---|---|---|---|");
        for kind in KINDS.into_iter().chain(["soft-volatile"]) {
            let path = at(&format!("{kind}.lock"));
            let kernel = match kind {
                "fcntl" => Some(FileLock::new(&path)),
                "flock" => Some(FileLock::flock(&path)),
                _ => None,
            };
            let mut cycle = || match &kernel {
                Some(lock) => lock.lock().unwrap().release().unwrap(),
                None => soft_lock(kind, &path).lock().unwrap().release().unwrap(),
            };
            let ours = per_cycle(cycles, &mut cycle);
            let before = ALLOCATIONS.load(Ordering::Relaxed);
            cycle();
            let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
            let floor_path = at(&format!("{kind}-floor.lock"));
            let floor = per_cycle(cycles, || match kind {
                "fcntl" => kernel_floor(&floor_path, ofd_lock),
                "flock" => kernel_floor(&floor_path, flock_lock),
                _ => soft_floor(&floor_path),
            });
            let (std_lock, fs2_lock) = if kind == "flock" {
                let p = at("std.lock");
                // A peer, std's own lock (Rust 1.89): the benchmarks run on
                // the current toolchain, not the crates' minimum.
                #[allow(clippy::incompatible_msrv)]
                let std_lock = per_cycle(cycles, || {
                    let f = std::fs::File::create(&p).unwrap();
                    f.lock().unwrap();
                    f.unlock().unwrap();
                });
                let p = at("fs2.lock");
                let fs2_lock = per_cycle(cycles, || {
                    let f = std::fs::File::create(&p).unwrap();
                    fs2::FileExt::lock_exclusive(&f).unwrap();
                    fs2::FileExt::unlock(&f).unwrap();
                });
                (us(std_lock), us(fs2_lock))
            } else {
                ("".to_owned(), "".to_owned())
            };
            let (py_cell, vs_py) = match py_of(kind) {
                Some(d) => (us(d), ratio(ours, d)),
                None => ("".to_owned(), "".to_owned()),
            };
            println!(
                "| {kind} | {} | {} | {} | {std_lock} | {fs2_lock} | {py_cell} | {vs_py} | {allocations} |",
                us(ours),
                us(floor),
                ratio(ours, floor),
            );
        }

        println!("\n## Soft kinds against their own syscalls ({cycles} cycles, mean)\n");
        println!("The syscalls alone of one uncontended cycle, with none of the checks or bookkeeping around them: swaplock's protocol (the record linked from an unnamed file, PROTOCOL 7.2 step 3; the released record, then a placeholder exchanged in, 7.4, 7.10) and filelock 4.2.11's (an exclusive create, the write, `lstat`, `unlink`, the close). Each implementation's cycle against its own.\n");
        println!("| kind | swaplock | its protocol's syscalls | vs them | filelock 4.2.11 | its syscalls | vs them |");
        println!("|---|---|---|---|---|---|---|");
        let floor_dir = at("protocol-floor");
        std::fs::create_dir_all(&floor_dir).unwrap();
        let dir_fd = std::fs::File::open(&floor_dir).unwrap();
        let theirs_path = at("filelock-floor.lock");
        let theirs = per_cycle(cycles, || soft_floor(&theirs_path));
        for (kind, durable) in [("soft", true), ("soft-volatile", false)] {
            let path = at(&format!("{kind}-vs-protocol.lock"));
            let ours = per_cycle(cycles, || {
                soft_lock(kind, &path).lock().unwrap().release().unwrap()
            });
            let floor = per_cycle(cycles, || {
                soft_protocol_floor(
                    std::os::fd::AsRawFd::as_raw_fd(&dir_fd),
                    c"p.lock",
                    c"p.lock.break.4242.0123456789abcdef0123456789abcdef",
                    durable,
                )
            });
            let (py_cell, py_vs) = match py_of("soft") {
                Some(d) => (us(d), ratio(d, theirs)),
                None => ("".to_owned(), "".to_owned()),
            };
            println!(
                "| {kind} | {} | {} | {} | {py_cell} | {} | {py_vs} |",
                us(ours),
                us(floor),
                ratio(ours, floor),
                us(theirs),
            );
        }

        println!("\n## Commands, whole-process wall time ({runs} runs, mean)\n");
        let ours_wle = std::env::var_os("SWAPLOCK_BENCH_WITH_LOCK_EX")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_with-lock-ex")));
        let lock = at("cmd.lock");
        let wle = |bin: PathBuf| {
            let lock = lock.clone();
            move || {
                let mut c = Command::new(&bin);
                c.args(["-w"]).arg(&lock).arg("true");
                c
            }
        };
        let ours = per_run(runs, wle(ours_wle.clone()));
        let chiark = per_run(runs, wle(PathBuf::from("/usr/bin/with-lock-ex")));
        let flock1 = per_run(runs, || {
            let mut c = Command::new("flock");
            c.arg(&lock).arg("true");
            c
        });
        let run = per_run(runs, || {
            let mut c = Command::new(env!("CARGO_BIN_EXE_swaplock"));
            c.args(["run", "--kind", "fcntl"]).arg(&lock).arg("true");
            c
        });
        let cell = |d: Option<Duration>| d.map_or("missing".to_owned(), us);
        println!("| command | wall | vs chiark's `with-lock-ex` |");
        println!("|---|---|---|");
        for (name, d) in [
            (
                format!("`with-lock-ex -w L true` ({})", ours_wle.display()),
                ours,
            ),
            ("chiark's `with-lock-ex -w L true`".to_owned(), chiark),
            ("`flock L true` (util-linux)".to_owned(), flock1),
            ("`swaplock run --kind fcntl L true`".to_owned(), run),
        ] {
            let vs = match (d, chiark) {
                (Some(d), Some(c)) => ratio(d, c),
                _ => "".to_owned(),
            };
            println!("| {name} | {} | {vs} |", cell(d));
        }

        println!("\n## Handoff between processes ({handoffs_n} handoffs)\n");
        println!("| kind | p50 | p99 | worst |");
        println!("|---|---|---|---|");
        for kind in KINDS.iter().chain(&["fcntl-timed", "flock-timed"]) {
            let t = handoffs(kind, &at(&format!("h-{kind}.lock")), handoffs_n);
            println!(
                "| {kind} | {} | {} | {} |",
                ms(quantile(&t, 0.5)),
                ms(quantile(&t, 0.99)),
                ms(t[t.len() - 1])
            );
        }

        print_takeovers(dir.path(), handoffs_n);
        0
    }

    /// The takeover table: `n` kills of each soft kind's holder.
    fn print_takeovers(dir: &Path, n: usize) {
        println!("\n## Takeover after the holder's SIGKILL ({n} kills)\n");
        println!("| kind | p50 | p99 | worst |");
        println!("|---|---|---|---|");
        for kind in ["soft", "marker", "lease", "soft-volatile"] {
            let t = takeovers(kind, &dir.join(format!("k-{kind}.lock")), n);
            println!(
                "| {kind} | {} | {} | {} |",
                ms(quantile(&t, 0.5)),
                ms(quantile(&t, 0.99)),
                ms(t[t.len() - 1])
            );
        }
    }
}

fn main() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    std::process::exit(linux::main());
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    eprintln!("the benchmarks run on Linux and Android");
}
