//! `with-lock-ex`: run a command with a file locked, a drop-in for the one
//! in Debian's chiark-utils-bin.
//!
//! ```text
//! with-lock-ex -w|-q|-f [-t SECS] LOCKFILE COMMAND [ARGS...]
//! with-lock-ex -l LOCKFILE
//! with-lock-ex LOCKFILE COMMAND [ARGS...]        (as -f)
//! ```
//!
//! It locks LOCKFILE by the with-lock-ex protocol (an `fcntl` write lock on
//! byte 0, checked against the path) and then `exec`s COMMAND with the lock
//! descriptor open, so the lock lasts exactly as long as the command runs,
//! with no process in between. `-w` waits for the lock; `-f` fails with exit
//! status 255 if it is held; `-q` then exits 0 without running the command;
//! `-t SECS` (with `-f` or `-q`) waits up to SECS seconds first; `-l` prints
//! who holds the lock (`none`, `write PID` or `read PID`). Errors print
//! `with-lock-ex COMMAND: WHY: REASON` and exit 255.

#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
fn main() {
    cli::main()
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_vendor = "apple")))]
fn main() {
    eprintln!("with-lock-ex: not supported on this platform yet");
    std::process::exit(255);
}

#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
mod cli {
    use std::ffi::{CString, OsStr, OsString};
    use std::io::{self, ErrorKind, Write};
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::process::exit;
    use std::time::Duration;
    use swaplock::core::decide::with_lock_ex_mode;
    use swaplock::kernel::current_umask;
    use swaplock::supervise;
    use swaplock::{FileLock, LockError, Step};

    const USAGE: &str = "usage: with-lock-ex -w|-q|-f [-t <secs>] <lockfile> <command> <args>...\n       with-lock-ex -l       <lockfile>\n       with-lock-ex          <lockfile> <command> <args>...\n";

    fn bad_usage() -> ! {
        eprint!("{USAGE}");
        exit(255);
    }

    /// The text `strerror(3)` gives for an errno.
    fn strerror(errno: i32) -> String {
        let text = io::Error::from_raw_os_error(errno).to_string();
        match text.rfind(" (os error ") {
            Some(at) => text[..at].to_owned(),
            None => text,
        }
    }

    /// Prints `with-lock-ex CMD: WHY: STRERROR` and exits 255.
    fn fail(cmd: &OsStr, why: &[u8], errno: i32) -> ! {
        let mut err = io::stderr().lock();
        let _ = err.write_all(b"with-lock-ex ");
        let _ = err.write_all(cmd.as_bytes());
        let _ = err.write_all(b": ");
        let _ = err.write_all(why);
        let _ = writeln!(err, ": {}", strerror(errno));
        exit(255);
    }

    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Mode {
        None,
        Wait,
        Fail,
        Quiet,
        List,
    }

    /// What `strtol(text, &end, 0)` makes of a timeout: leading white space,
    /// a sign, then decimal, `0x` hex or `0` octal digits, all of the text.
    /// `Err(errno)` as the reference reports it: 0 for junk, `ERANGE`.
    fn parse_secs(text: &[u8]) -> Result<i64, i32> {
        let mut s = text;
        while let [b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r', rest @ ..] = s {
            s = rest;
        }
        let negative = matches!(s.first(), Some(b'-'));
        if let [b'+' | b'-', rest @ ..] = s {
            s = rest;
        }
        let (radix, digits) = match s {
            [b'0', b'x' | b'X', rest @ ..] if rest.first().is_some_and(u8::is_ascii_hexdigit) => {
                (16, rest)
            }
            [b'0', ..] => (8, s),
            _ => (10, s),
        };
        let count = digits
            .iter()
            .take_while(|b| char::from(**b).is_digit(radix))
            .count();
        if count == 0 || count != digits.len() {
            return Err(0);
        }
        let mut value: i128 = 0;
        for &b in digits {
            value =
                value * i128::from(radix) + i128::from(char::from(b).to_digit(radix).unwrap_or(0));
            if value > i128::from(i64::MAX) + 1 {
                return Err(libc::ERANGE);
            }
        }
        let value = if negative { -value } else { value };
        i64::try_from(value).map_err(|_| libc::ERANGE)
    }

    pub(crate) fn main() {
        let args: Vec<OsString> = std::env::args_os().collect();
        let argv0 = args
            .first()
            .map(|a| a.as_bytes().to_vec())
            .unwrap_or_else(|| b"with-lock-ex".to_vec());
        let mut mode = Mode::None;
        let mut secs: i64 = 0;
        let mut i = 1;
        // getopt(3) with "+wfqlt:": options stop at the first non-option or "--".
        'args: while let Some(arg) = args.get(i) {
            let arg = arg.as_bytes();
            if arg == b"--" {
                i += 1;
                break;
            }
            if arg.len() < 2 || arg[0] != b'-' {
                break;
            }
            let mut j = 1;
            while j < arg.len() {
                let c = arg[j];
                match c {
                    b'w' | b'f' | b'q' | b'l' => {
                        if mode != Mode::None {
                            bad_usage();
                        }
                        mode = match c {
                            b'w' => Mode::Wait,
                            b'f' => Mode::Fail,
                            b'q' => Mode::Quiet,
                            _ => Mode::List,
                        };
                    }
                    b't' => {
                        let value: &[u8] = if j + 1 < arg.len() {
                            &arg[j + 1..]
                        } else if let Some(next) = args.get(i + 1) {
                            i += 1;
                            next.as_bytes()
                        } else {
                            let mut err = io::stderr().lock();
                            let _ = err.write_all(&argv0);
                            let _ = err.write_all(b": option requires an argument -- 't'\n");
                            drop(err);
                            bad_usage();
                        };
                        secs = match parse_secs(value) {
                            Ok(secs) => secs,
                            // The reference names no command yet here.
                            Err(errno) => {
                                fail(OsStr::new("(null)"), b"parsing timeout value", errno)
                            }
                        };
                        if secs < 0 {
                            eprintln!("timeout value must be >=0");
                            exit(255);
                        }
                        i += 1;
                        continue 'args;
                    }
                    _ => {
                        let mut err = io::stderr().lock();
                        let _ = err.write_all(&argv0);
                        let _ = err.write_all(b": invalid option -- '");
                        let _ = err.write_all(&[c]);
                        let _ = err.write_all(b"'\n");
                        drop(err);
                        bad_usage();
                    }
                }
                j += 1;
            }
            i += 1;
        }

        if secs != 0 && matches!(mode, Mode::List | Mode::Wait) {
            eprintln!("-t only allowed with -q or -f.");
            exit(255);
        }
        let rest = &args[i.min(args.len())..];
        let Some(lockfile) = rest.first() else {
            bad_usage()
        };
        let cmd: &OsStr = rest.get(1).map_or(OsStr::new("(null)"), |c| c.as_os_str());

        if mode == Mode::List {
            list(lockfile, cmd);
        }
        // The reference would exec a null command and crash: say how to use it.
        if rest.len() < 2 {
            bad_usage();
        }

        // Single-threaded here, so reading the umask by setting it (where
        // it cannot be read otherwise) is safe.
        let umask = current_umask();
        // A classic lock owned by the process, as chiark's: -l elsewhere
        // reports this process (and, after exec, the command).
        let lock = FileLock::new(lockfile)
            .owned_by_process()
            .follow_symlinks(true)
            .mode(with_lock_ex_mode(umask))
            // A filesystem whose locks reach this client mount only is
            // refused unless the caller vouches that no other host uses it.
            .allow_client_local(
                std::env::var_os("SWAPLOCK_ALLOW_CLIENT_LOCAL").is_some_and(|v| v == "1"),
            );
        let result = match (mode, secs) {
            (Mode::Wait, _) => lock.lock(),
            (_, 0) => lock.try_lock(),
            (_, secs) => lock.lock_timeout(Duration::from_secs(secs.unsigned_abs())),
        };
        let guard = match result {
            Ok(guard) => guard,
            Err(e) => {
                let errno = LockError::of(&e)
                    .and_then(|l| l.os_error().raw_os_error())
                    .unwrap_or(0);
                if e.kind() == ErrorKind::TimedOut {
                    if mode == Mode::Quiet {
                        exit(0);
                    }
                    let mut err = io::stderr().lock();
                    let _ = err.write_all(b"with-lock-ex ");
                    let _ = err.write_all(cmd.as_bytes());
                    let _ = err.write_all(b": timer expired while trying to acquire lock\n");
                    exit(255);
                }
                if mode == Mode::Quiet && (errno == libc::EAGAIN || errno == libc::EBUSY) {
                    exit(0);
                }
                let step = LockError::of(&e).map(LockError::step);
                if step == Some(Step::Filesystem) {
                    // Which filesystem, why, and what to use instead.
                    let mut err = io::stderr().lock();
                    let _ = writeln!(err, "with-lock-ex: {e}");
                    exit(255);
                }
                let why: &[u8] = match step {
                    Some(Step::Open) => lockfile.as_bytes(),
                    Some(Step::Fstat) => b"could not fstat lock fd",
                    Some(Step::Stat) => b"could not stat lockfile",
                    _ => b"could not acquire lock",
                };
                fail(cmd, why, errno);
            }
        };

        if let Err(e) = guard.inherit_on_exec() {
            fail(cmd, b"fcntl F_SETFD", e.raw_os_error().unwrap_or(0));
        }
        exec(&rest[1..], cmd);
    }

    /// `-l`: print which lock conflicts with a write lock on the file.
    fn list(lockfile: &OsStr, cmd: &OsStr) -> ! {
        let holder = match FileLock::new(lockfile).follow_symlinks(true).holder() {
            Ok(holder) => holder,
            Err(e) => {
                let errno = LockError::of(&e)
                    .and_then(|l| l.os_error().raw_os_error())
                    .unwrap_or(0);
                let why: &[u8] = match LockError::of(&e).map(LockError::step) {
                    Some(Step::Open) => lockfile.as_bytes(),
                    _ => b"could not acquire lock",
                };
                fail(cmd, why, errno)
            }
        };
        // A PID of -1 (an open file description lock) prints as the
        // reference prints it, through unsigned long (32 bits on 32-bit
        // targets).
        let shown = |pid: i32| pid as std::os::raw::c_ulong;
        let line = match holder {
            None => "none".to_owned(),
            Some(h) if h.shared => format!("read {}", shown(h.pid)),
            Some(h) => format!("write {}", shown(h.pid)),
        };
        let mut out = io::stdout().lock();
        if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
            fail(cmd, b"print to stdout\n", e.raw_os_error().unwrap_or(0));
        }
        exit(0);
    }

    /// `execvp(3)` the command with the lock descriptor open.
    fn exec(argv: &[OsString], cmd: &OsStr) -> ! {
        let c_args: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.clone().into_vec()).unwrap_or_default())
            .collect();
        // The default disposition of SIGPIPE, which the Rust runtime
        // ignores at start-up, so the command gets the usual one.
        supervise::set_default(supervise::SIGPIPE);
        let errno = supervise::execvp(&c_args);
        fail(cmd, b"unable to execute command", errno.raw());
    }
}
