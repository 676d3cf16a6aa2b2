//! `swaplock`: run a command under a lock of any kind, and inspect or break
//! soft locks.
//!
//! ```text
//! swaplock run [--kind fcntl|flock|soft|marker|lease] [--wait|--fail|--quiet]
//!              [--shared|-s] [--timeout SECS] [--lifetime SECS] [--lease SECS]
//!              LOCKFILE COMMAND [ARGS...]
//! swaplock status [--kind soft|marker|lease] LOCKFILE
//! swaplock run --etcd URL[,URL...] [--lease SECS] [...] NAME COMMAND [ARGS...]
//! swaplock status --etcd URL[,URL...] NAME
//! swaplock break [--kind soft|marker|lease] [--force] LOCKFILE
//! ```
//!
//! `run` waits for the lock by default (`--fail`: exit 255 if it is held;
//! `--quiet`: exit 0 without running the command). Kernel kinds exec the
//! command with the lock held, as `with-lock-ex` does. Soft kinds keep a
//! parent process, the supervisor, that holds the marker (and heartbeats a
//! lease) and runs the command in a process group of its own: it forwards
//! SIGINT, SIGTERM and SIGHUP to the group (a signal inherited as ignored
//! stays ignored, in the command too), stops the group if the lease is
//! lost, and once the command ends ends the rest of its group (SIGTERM,
//! then SIGKILL after 2 s) before it releases the lock; the command is
//! killed if the supervisor dies (Linux and Android). `--etcd` (feature
//! `etcd`) takes an etcd lock by etcd's own recipe instead, supervised as a
//! lease is, with the variables `etcdctl lock` exports. `swaplock --help` lists
//! the exit statuses and what can still escape the lock.
//!
//! `status` prints who holds the lock, judged as a contender judges it, and
//! exits 0 when it is free, 1 when it is held. `break` removes a stale
//! marker by the same safe path a contender uses, explains by the same
//! judgement why a marker stays, and refuses a live holder unless `--force`.

/// Whether `SWAPLOCK_ALLOW_CLIENT_LOCAL=1` accepts kernel locks on a
/// filesystem that keeps them per client mount (no other host uses it).
fn client_local() -> bool {
    std::env::var_os("SWAPLOCK_ALLOW_CLIENT_LOCAL").is_some_and(|v| v == "1")
}

fn main() {
    std::process::exit(cli::main(std::env::args_os().skip(1).collect()));
}

mod cli {
    use std::ffi::OsString;
    use std::io::ErrorKind;
    use std::path::PathBuf;
    use std::time::Duration;
    use swaplock::core::decide::HeldBecause;
    use swaplock::core::soft::Standing;
    use swaplock::soft::{Kind, SoftLock};
    use swaplock::FileLock;

    #[cfg(unix)]
    use posix::run;

    /// The help text: usage, exit statuses, and the limits of supervision.
    pub(crate) const USAGE: &str = "usage: swaplock run [OPTIONS] LOCKFILE COMMAND [ARGS...]
       swaplock run [OPTIONS] LOCKFILE -c 'SHELL COMMAND'
       swaplock status [--kind KIND] [--json] LOCKFILE
       swaplock run --etcd URL[,URL...] [OPTIONS] NAME COMMAND [ARGS...]
       swaplock status --etcd URL[,URL...] [--json] NAME
       swaplock break [--kind KIND] [--force] LOCKFILE
       swaplock --help | --version      swaplock COMMAND --help

Runs a command while holding a lock, or says who holds one.
KIND is fcntl, flock, soft, marker (the default) or lease; see
`swaplock run --help` for the options and exit statuses, and swaplock(1).";

    /// `swaplock run --help`.
    pub(crate) const RUN_USAGE: &str = "usage: swaplock run [OPTIONS] LOCKFILE COMMAND [ARGS...]
       swaplock run [OPTIONS] LOCKFILE -c 'SHELL COMMAND'

Runs COMMAND (or SHELL COMMAND, by sh -c) while holding the lock LOCKFILE.
With --etcd the lock is NAME in etcd instead, as `etcdctl lock NAME` takes it.

options:
  --kind KIND       fcntl | flock | soft | marker (default) | lease
  --wait            wait for the lock (the default)
  --fail, -n        exit with the conflict status at once if the lock is held
                    (even with --timeout, as flock(1)'s -n)
  --quiet           exit 0 without running the command if the lock is held
  --timeout SECS, -w SECS
                    wait at most SECS, then exit with the conflict status
  -E N, --conflict-exit-code N
                    the conflict status (default 255)
  -s, --shared      the shared (read) lock of a kernel kind: commands run
                    under it together, and none while an exclusive holder
                    has the lock
  -c CMD, --command CMD
                    run CMD by sh -c instead of COMMAND ARGS
  --lifetime SECS   soft kinds: a marker older than SECS is broken
  --lease SECS      lease: the lease duration (default 30); etcd: the lease
                    TTL (default 60)
  --etcd URL[,URL...]
                    the lock NAME in the etcd cluster at these endpoints
                    (http:// URLs), by etcd's recipe: etcdctl lock peers
                    exclude each other with it; the command gets
                    SWAPLOCK_FENCING_TOKEN, ETCD_LOCK_KEY and ETCD_LOCK_REV.
                    Keys live under NAME/: a name must not be another's
                    prefix up to a slash (a holder of a/b blocks a)
  -v, --verbose     say who holds the lock while waiting
  -h, --help        this help
Options take their value as --opt VALUE or --opt=VALUE; -- ends them.

exit status: the command's (128 + N if signal N ended it), or
  255  the lock is held (--fail, --timeout; unless -E says otherwise), it
       cannot be taken, or the command cannot be started
  0    the lock is held under --quiet
  75   soft kinds and etcd: the lease was lost while the command ran; the
       command was stopped (its group got SIGKILL at once)
  74   soft kinds and etcd: the command succeeded but the lock could not be released
       (a failed command keeps its status; the message is printed either way)
  2    usage error
Use -E to tell a held lock from the command's own statuses, as flock(1).

With soft kinds and etcd the command runs in its own process group under a
supervisor that holds the lock; the group gets SIGINT, SIGTERM and SIGHUP
(those not inherited as ignored), and whatever of it outlives the command
gets SIGTERM, then SIGKILL after 2 s, before the lock is released. Still
escaping: a process that leaves the group (setsid, setpgid, a daemon); and
if the supervisor itself is killed with SIGKILL, every process but the
command itself (which gets SIGKILL from the kernel on Linux and Android;
on macOS the command runs on too). A supervisor stopped (SIGSTOP) past
the lease while its command runs on cannot stop it: the next holder may
overlap it until the supervisor runs again; pass the fencing token to
what the command changes.";

    /// `swaplock status --help`.
    pub(crate) const STATUS_USAGE: &str = "usage: swaplock status [--kind KIND] [--json] LOCKFILE
       swaplock status --etcd URL[,URL...] [--json] NAME

Says who holds the lock LOCKFILE, judged as a contender judges it. KIND is
fcntl, flock, soft, marker (the default) or lease. For fcntl the holder is
the lock's query (F_GETLK: PID -1 for an open file description lock); for
flock, the kernel's lock table (/proc/locks) on Linux and Android.
With --etcd, says which key holds the etcd lock NAME (the one with the
lowest create revision under NAME/): its lease and create revision.
--json prints one JSON object (schema in swaplock(1)).

exit status: 0 free, 1 held, 2 error or usage error.";

    /// `swaplock break --help`.
    pub(crate) const BREAK_USAGE: &str = "usage: swaplock break [--kind KIND] [--force] LOCKFILE

Removes a stale soft-lock marker by the same safe path a contender uses,
and explains why a marker stays. KIND is soft, marker (the default) or
lease. --force removes the marker of a holder that may be alive: mutual
exclusion with it is lost.

exit status: 0 once the lock is free, 1 when it refuses or fails, 2 usage
error.";

    #[derive(Clone, Copy, PartialEq)]
    enum LockKind {
        Fcntl,
        Flock,
        Soft(Kind),
    }

    #[derive(Clone, Copy, PartialEq)]
    enum Busy {
        Wait,
        Fail,
        Quiet,
    }

    /// The subcommand.
    #[derive(Clone, Copy, PartialEq)]
    enum Sub {
        Run,
        Status,
        Break,
    }

    impl Sub {
        fn usage(self) -> &'static str {
            match self {
                Sub::Run => RUN_USAGE,
                Sub::Status => STATUS_USAGE,
                Sub::Break => BREAK_USAGE,
            }
        }
    }

    struct Options {
        kind: LockKind,
        busy: Busy,
        timeout: Option<Duration>,
        lifetime: Option<Duration>,
        lease: Option<Duration>,
        force: bool,
        shared: bool,
        /// The exit status when the lock is held (`-E`).
        conflict: i32,
        verbose: bool,
        json: bool,
        /// `--etcd`: the endpoints of an etcd lock, comma-separated.
        etcd: Option<String>,
        /// The lock file, then the command and its arguments.
        rest: Vec<OsString>,
    }

    /// What the options asked for.
    enum Parsed {
        Options(Options),
        Help,
    }

    fn usage(sub: Option<Sub>, why: &str) -> i32 {
        let first = match sub {
            Some(sub) => sub.usage().lines().next().unwrap_or_default(),
            None => "usage: swaplock run|status|break [OPTIONS] LOCKFILE ...",
        };
        eprintln!(
            "swaplock: {why}\n{first}\nTry 'swaplock{} --help' for more.",
            match sub {
                Some(Sub::Run) => " run",
                Some(Sub::Status) => " status",
                Some(Sub::Break) => " break",
                None => "",
            }
        );
        2
    }

    fn seconds(value: OsString) -> Result<Duration, String> {
        let text = value.to_str().ok_or("a number of seconds must be text")?;
        let secs: f64 = text
            .parse()
            .map_err(|_| format!("not a number of seconds: {text}"))?;
        Duration::try_from_secs_f64(secs).map_err(|_| format!("not a number of seconds: {text}"))
    }

    fn kind(value: OsString) -> Result<LockKind, String> {
        Ok(match value.to_str() {
            Some("fcntl") => LockKind::Fcntl,
            Some("flock") => LockKind::Flock,
            Some("soft") => LockKind::Soft(Kind::Soft),
            Some("marker") => LockKind::Soft(Kind::Marker),
            Some("lease") => LockKind::Soft(Kind::Lease),
            _ => {
                return Err(format!(
                    "unknown kind {}: fcntl, flock, soft, marker or lease",
                    value.to_string_lossy()
                ))
            }
        })
    }

    fn exit_code(value: OsString) -> Result<i32, String> {
        value
            .to_str()
            .and_then(|t| t.parse::<u8>().ok())
            .map(i32::from)
            .ok_or_else(|| format!("not an exit status (0-255): {}", value.to_string_lossy()))
    }

    fn parse(sub: Sub, args: Vec<OsString>) -> Result<Parsed, String> {
        use lexopt::prelude::*;
        let mut o = Options {
            kind: LockKind::Soft(Kind::Marker),
            busy: Busy::Wait,
            timeout: None,
            lifetime: None,
            lease: None,
            force: false,
            shared: false,
            conflict: 255,
            verbose: false,
            json: false,
            etcd: None,
            rest: Vec::new(),
        };
        let mut kind_given = false;
        let mut shell = None;
        let mut p = lexopt::Parser::from_args(args);
        let only = |name: &str, subs: &[Sub]| match subs.contains(&sub) {
            true => Ok(()),
            false => Err(format!("{name} is not an option of this command")),
        };
        while let Some(arg) = p.next().map_err(|e| e.to_string())? {
            let value = |p: &mut lexopt::Parser| p.value().map_err(|e| e.to_string());
            match arg {
                Short('h') | Long("help") => return Ok(Parsed::Help),
                Long("kind") => {
                    o.kind = kind(value(&mut p)?)?;
                    kind_given = true;
                }
                Long("etcd") => {
                    only("--etcd", &[Sub::Run, Sub::Status])?;
                    let urls = value(&mut p)?;
                    let urls = urls.to_str().ok_or("--etcd takes URLs, as text")?;
                    o.etcd = Some(urls.to_owned());
                }
                Long("wait") => {
                    only("--wait", &[Sub::Run])?;
                    o.busy = Busy::Wait;
                }
                Long("fail") | Short('n') => {
                    only("--fail", &[Sub::Run])?;
                    o.busy = Busy::Fail;
                }
                Long("quiet") => {
                    only("--quiet", &[Sub::Run])?;
                    o.busy = Busy::Quiet;
                }
                Long("force") => {
                    only("--force", &[Sub::Break])?;
                    o.force = true;
                }
                Long("json") => {
                    only("--json", &[Sub::Status])?;
                    o.json = true;
                }
                Long("shared") | Short('s') => {
                    only("--shared", &[Sub::Run])?;
                    o.shared = true;
                }
                Long("verbose") | Short('v') => {
                    only("--verbose", &[Sub::Run])?;
                    o.verbose = true;
                }
                Long("timeout") | Short('w') => {
                    only("--timeout", &[Sub::Run])?;
                    o.timeout = Some(seconds(value(&mut p)?)?);
                }
                Long("conflict-exit-code") | Short('E') => {
                    only("--conflict-exit-code", &[Sub::Run])?;
                    o.conflict = exit_code(value(&mut p)?)?;
                }
                Long("command") | Short('c') => {
                    only("--command", &[Sub::Run])?;
                    if shell.is_some() {
                        return Err("-c takes one shell command; it was given twice".into());
                    }
                    shell = Some(value(&mut p)?);
                }
                Long("lifetime") => {
                    only("--lifetime", &[Sub::Run, Sub::Status, Sub::Break])?;
                    o.lifetime = Some(seconds(value(&mut p)?)?);
                }
                Long("lease") => {
                    only("--lease", &[Sub::Run, Sub::Status, Sub::Break])?;
                    o.lease = Some(seconds(value(&mut p)?)?);
                }
                Value(v) => {
                    o.rest.push(v);
                    if sub == Sub::Run {
                        // The command and its arguments are its own, options
                        // included; `-c` may follow the lock file, as in
                        // flock(1).
                        let mut raw: Vec<OsString> =
                            p.raw_args().map_err(|e| e.to_string())?.collect();
                        if raw.first().is_some_and(|a| a == "--") {
                            raw.remove(0);
                        } else if shell.is_none() {
                            match raw.first().and_then(|a| a.to_str()) {
                                Some("-c" | "--command") if raw.len() == 2 => {
                                    shell = raw.pop();
                                    raw.clear();
                                }
                                Some("-c" | "--command") => {
                                    return Err("-c takes one shell command, in one argument".into())
                                }
                                _ => {}
                            }
                        }
                        o.rest.extend(raw);
                        break;
                    }
                }
                _ => return Err(arg.unexpected().to_string()),
            }
        }
        if let Some(shell) = shell {
            if o.rest.len() != 1 {
                return Err(
                    "-c takes the lock file and one shell command, no other command".into(),
                );
            }
            #[cfg(unix)]
            o.rest.extend(["sh".into(), "-c".into(), shell]);
            #[cfg(windows)]
            o.rest.extend(["cmd".into(), "/C".into(), shell]);
        }
        let wanted = match sub {
            Sub::Run if o.rest.is_empty() => Some("a lock file and a command"),
            Sub::Run if o.rest.len() < 2 => Some("a command to run under the lock"),
            Sub::Status | Sub::Break if o.rest.len() != 1 => Some("one lock file"),
            _ => None,
        };
        if let Some(wanted) = wanted {
            return Err(format!("missing or extra arguments: it takes {wanted}"));
        }
        if o.etcd.is_some() {
            if cfg!(not(feature = "etcd")) {
                return Err("--etcd: this swaplock was built without etcd support \
                            (the cargo feature `etcd`)"
                    .into());
            }
            if kind_given || o.lifetime.is_some() || o.shared {
                return Err("--etcd takes no --kind, --lifetime or --shared: \
                            an etcd lock is its own kind"
                    .into());
            }
            return Ok(Parsed::Options(o));
        }
        if o.lifetime.is_some() && !matches!(o.kind, LockKind::Soft(_)) {
            return Err("--lifetime applies to soft kinds: soft, marker or lease".into());
        }
        if o.lease.is_some() && o.kind != LockKind::Soft(Kind::Lease) {
            return Err("--lease needs --kind lease".into());
        }
        if o.shared && !matches!(o.kind, LockKind::Fcntl | LockKind::Flock) {
            return Err("--shared needs a kernel kind: --kind fcntl or --kind flock".into());
        }
        Ok(Parsed::Options(o))
    }

    pub(crate) fn main(args: Vec<OsString>) -> i32 {
        let mut args = args.into_iter();
        let sub = match args.next().as_ref().map(|c| c.to_str()) {
            Some(Some("run")) => Sub::Run,
            Some(Some("status")) => Sub::Status,
            Some(Some("break")) => Sub::Break,
            Some(Some("--help" | "-h" | "help")) => {
                println!("{USAGE}");
                return 0;
            }
            Some(Some("--version" | "-V")) => {
                println!("swaplock {}", env!("CARGO_PKG_VERSION"));
                return 0;
            }
            Some(other) => {
                return usage(
                    None,
                    &format!("unknown command {}", other.unwrap_or("(not text)")),
                )
            }
            None => return usage(None, "missing command: run, status or break"),
        };
        let opts = match parse(sub, args.collect()) {
            Ok(Parsed::Options(o)) => o,
            Ok(Parsed::Help) => {
                println!("{}", sub.usage());
                return 0;
            }
            Err(why) => return usage(Some(sub), &why),
        };
        match sub {
            #[cfg(feature = "etcd")]
            Sub::Run if opts.etcd.is_some() => etcd::run(opts),
            #[cfg(feature = "etcd")]
            Sub::Status if opts.etcd.is_some() => etcd::status(opts),
            Sub::Run => run(opts),
            Sub::Status => status(opts),
            Sub::Break => break_lock(opts),
        }
    }

    fn soft_lock(opts: &Options, kind: Kind) -> SoftLock {
        let mut lock = SoftLock::new(kind, PathBuf::from(&opts.rest[0]));
        if let Some(l) = opts.lifetime {
            lock = lock.lifetime(l);
        }
        if let Some(l) = opts.lease {
            lock = lock.lease_duration(l);
        }
        lock
    }

    /// Exit status for a busy lock: 255 with a message, or 0 when quiet.
    fn busy(opts: &Options, e: &std::io::Error) -> i32 {
        if opts.busy == Busy::Quiet {
            return 0;
        }
        eprintln!("swaplock: {e}");
        opts.conflict
    }

    /// The ways `take` acquires a lock.
    trait Acquire {
        type Guard;
        fn lock(&self) -> std::io::Result<Self::Guard>;
        fn try_lock(&self) -> std::io::Result<Self::Guard>;
        fn lock_timeout(&self, timeout: Duration) -> std::io::Result<Self::Guard>;
        /// Waits (up to `timeout`), calling `hook` with the time waited
        /// while the lock is held.
        fn lock_with(
            &self,
            timeout: Option<Duration>,
            hook: &mut dyn FnMut(Duration) -> std::ops::ControlFlow<()>,
        ) -> std::io::Result<Self::Guard>;
    }

    impl Acquire for FileLock {
        type Guard = swaplock::FileLockGuard;
        fn lock(&self) -> std::io::Result<Self::Guard> {
            FileLock::lock(self)
        }
        fn try_lock(&self) -> std::io::Result<Self::Guard> {
            FileLock::try_lock(self)
        }
        fn lock_timeout(&self, timeout: Duration) -> std::io::Result<Self::Guard> {
            FileLock::lock_timeout(self, timeout)
        }
        fn lock_with(
            &self,
            timeout: Option<Duration>,
            hook: &mut dyn FnMut(Duration) -> std::ops::ControlFlow<()>,
        ) -> std::io::Result<Self::Guard> {
            FileLock::lock_with(self, timeout, |wait| hook(wait.waited()))
        }
    }

    /// A kernel lock's shared form.
    struct Shared<'a>(&'a FileLock);

    impl Acquire for Shared<'_> {
        type Guard = swaplock::FileLockGuard;
        fn lock(&self) -> std::io::Result<Self::Guard> {
            self.0.lock_shared()
        }
        fn try_lock(&self) -> std::io::Result<Self::Guard> {
            self.0.try_lock_shared()
        }
        fn lock_timeout(&self, timeout: Duration) -> std::io::Result<Self::Guard> {
            self.0.lock_shared_timeout(timeout)
        }
        /// The hook is called once, when the wait begins.
        fn lock_with(
            &self,
            timeout: Option<Duration>,
            hook: &mut dyn FnMut(Duration) -> std::ops::ControlFlow<()>,
        ) -> std::io::Result<Self::Guard> {
            match self.try_lock() {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    let _ = hook(Duration::ZERO);
                }
                done => return done,
            }
            match timeout {
                Some(t) => self.lock_timeout(t),
                None => self.lock(),
            }
        }
    }

    impl Acquire for SoftLock {
        type Guard = swaplock::soft::SoftLockGuard;
        fn lock(&self) -> std::io::Result<Self::Guard> {
            SoftLock::lock(self)
        }
        fn try_lock(&self) -> std::io::Result<Self::Guard> {
            SoftLock::try_lock(self)
        }
        fn lock_timeout(&self, timeout: Duration) -> std::io::Result<Self::Guard> {
            SoftLock::lock_timeout(self, timeout)
        }
        fn lock_with(
            &self,
            timeout: Option<Duration>,
            hook: &mut dyn FnMut(Duration) -> std::ops::ControlFlow<()>,
        ) -> std::io::Result<Self::Guard> {
            SoftLock::lock_with(self, timeout, |wait| hook(wait.waited()))
        }
    }

    /// The etcd lock of `--etcd` (feature `etcd`).
    #[cfg(feature = "etcd")]
    mod etcd {
        use super::*;
        use swaplock::etcd::EtcdLock;

        /// The lock `--etcd URLS NAME` names.
        pub(super) fn lock(opts: &Options) -> EtcdLock {
            let urls = opts.etcd.as_deref().unwrap_or_default();
            let endpoints = urls.split(',').map(str::trim);
            let mut lock = EtcdLock::new(endpoints, opts.rest[0].to_string_lossy());
            if let Some(ttl) = opts.lease {
                lock = lock.lease_ttl(ttl);
            }
            lock
        }

        impl Acquire for EtcdLock {
            type Guard = swaplock::etcd::EtcdLockGuard;
            fn lock(&self) -> std::io::Result<Self::Guard> {
                EtcdLock::lock(self)
            }
            fn try_lock(&self) -> std::io::Result<Self::Guard> {
                EtcdLock::try_lock(self)
            }
            fn lock_timeout(&self, timeout: Duration) -> std::io::Result<Self::Guard> {
                EtcdLock::lock_timeout(self, timeout)
            }
            /// The hook is called once, when the wait begins.
            fn lock_with(
                &self,
                timeout: Option<Duration>,
                hook: &mut dyn FnMut(Duration) -> std::ops::ControlFlow<()>,
            ) -> std::io::Result<Self::Guard> {
                let began = std::time::Instant::now();
                match self.try_lock() {
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        let _ = hook(Duration::ZERO);
                    }
                    done => return done,
                }
                match timeout {
                    Some(t) => self.lock_timeout(t.saturating_sub(began.elapsed())),
                    None => self.lock(),
                }
            }
        }

        /// `run --etcd`: the lock held by this process, the command
        /// supervised as a lease's is.
        #[cfg(unix)]
        pub(super) fn run(opts: Options) -> i32 {
            super::posix::run_etcd(opts, lock)
        }

        #[cfg(windows)]
        pub(super) fn run(_opts: Options) -> i32 {
            eprintln!("swaplock: run --etcd needs a POSIX system: its supervision stops the command's process group");
            255
        }

        /// `status --etcd`: the holder's key, lease and create revision.
        pub(super) fn status(opts: Options) -> i32 {
            let lock = lock(&opts);
            let holder = match lock.holder() {
                Ok(h) => h,
                Err(e) => {
                    eprintln!("swaplock: {e}");
                    return 2;
                }
            };
            if opts.json {
                let found = match &holder {
                    None => "null".to_owned(),
                    Some(h) => format!(
                        "{{\"key\":{},\"lease\":{},\"lease_hex\":\"{:x}\",\"create_revision\":{},\"waiting\":{}}}",
                        json_string(&h.key),
                        h.lease_id,
                        h.lease_id,
                        h.create_revision,
                        h.waiting
                    ),
                };
                println!(
                    "{{\"name\":{},\"kind\":\"etcd\",\"held\":{},\"holder\":{found}}}",
                    json_string(lock.name()),
                    holder.is_some()
                );
                return i32::from(holder.is_some());
            }
            match holder {
                None => {
                    println!("free");
                    0
                }
                Some(h) => {
                    println!(
                        "held: key {} lease {:x} revision {} waiting {}",
                        h.key, h.lease_id, h.create_revision, h.waiting
                    );
                    1
                }
            }
        }
    }

    /// Takes a lock as the options say (wait, fail, quiet, timeout); on
    /// failure, the exit status (after printing why). `--fail` never waits,
    /// a timeout given or not, as flock(1)'s `-n`.
    fn take<A: Acquire>(opts: &Options, lock: &A) -> Result<A::Guard, i32> {
        let result = match (opts.busy, opts.timeout) {
            (Busy::Fail, _) => lock.try_lock(),
            (Busy::Wait, timeout) if opts.verbose => {
                let began = std::time::Instant::now();
                let mut aloud = Aloud::new(opts);
                let taken = lock.lock_with(timeout, &mut |waited| aloud.say(waited));
                if aloud.said && taken.is_ok() {
                    eprintln!(
                        "swaplock: took {} after {:.1} s",
                        opts.rest[0].to_string_lossy(),
                        began.elapsed().as_secs_f64()
                    );
                }
                taken
            }
            (_, Some(t)) => lock.lock_timeout(t),
            (Busy::Wait, None) => lock.lock(),
            (Busy::Quiet, None) => lock.try_lock(),
        };
        result.map_err(|e| {
            if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
                busy(opts, &e)
            } else {
                eprintln!("swaplock: {e}");
                255
            }
        })
    }

    /// `--verbose`: says on stderr who holds the lock and for how long,
    /// when the wait begins, when the holder changes, and every 10 s.
    struct Aloud<'a> {
        opts: &'a Options,
        /// Who was last said to hold it (`None`: nobody could be named).
        last: Option<(Option<i64>, Option<String>)>,
        /// When it was last said.
        when: Option<std::time::Instant>,
        /// Whether anything was said.
        said: bool,
    }

    impl<'a> Aloud<'a> {
        const EVERY: Duration = Duration::from_secs(10);

        fn new(opts: &'a Options) -> Self {
            Aloud {
                opts,
                last: None,
                when: None,
                said: false,
            }
        }

        fn say(&mut self, waited: Duration) -> std::ops::ControlFlow<()> {
            let found = find_holder(self.opts).ok().flatten();
            let who = found.as_ref().map(|f| (f.pid, f.host.clone()));
            let due = self.when.is_none_or(|w| w.elapsed() >= Self::EVERY);
            if !self.said || self.last != who || due {
                let holder = match &found {
                    Some(f) => {
                        let mut h = match (f.pid, &f.host) {
                            (Some(pid), Some(host)) => format!("held by pid {pid} on {host}"),
                            (Some(pid), None) => format!("held by pid {pid}"),
                            _ => format!("held ({} marker)", f.mode),
                        };
                        if let Some(age) = f.age {
                            h.push_str(&format!(" for {:.1} s", age.as_secs_f64()));
                        }
                        h
                    }
                    None => "held".to_owned(),
                };
                eprintln!(
                    "swaplock: waiting for {}: {holder} (waited {:.1} s)",
                    self.opts.rest[0].to_string_lossy(),
                    waited.as_secs_f64()
                );
                self.last = who;
                self.when = Some(std::time::Instant::now());
                self.said = true;
            }
            std::ops::ControlFlow::Continue(())
        }
    }

    /// `run` on Windows: this process holds the lock (any kind) while the
    /// command runs as its child, and exits with the command's status. A
    /// lost lease ends the command (`TerminateProcess`) and exits 75.
    #[cfg(windows)]
    fn run(opts: Options) -> i32 {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        use swaplock::soft::Compromise;
        /// How often a lease's state is looked at while the command runs.
        const LOOK: Duration = Duration::from_millis(20);
        let path = PathBuf::from(&opts.rest[0]);
        let mut command = std::process::Command::new(&opts.rest[1]);
        command.args(&opts.rest[2..]);
        enum Guard {
            Kernel(swaplock::FileLockGuard),
            Soft(Box<swaplock::soft::SoftLockGuard>),
        }
        let lost = Arc::new(AtomicBool::new(false));
        let guard = match opts.kind {
            LockKind::Fcntl | LockKind::Flock => {
                let lock = match opts.kind {
                    LockKind::Flock => FileLock::flock(path),
                    _ => FileLock::new(path),
                }
                .allow_client_local(crate::client_local());
                let taken = match opts.shared {
                    true => take(&opts, &Shared(&lock)),
                    false => take(&opts, &lock),
                };
                match taken {
                    Ok(g) => Guard::Kernel(g),
                    Err(code) => return code,
                }
            }
            LockKind::Soft(kind) => {
                let flag = Arc::clone(&lost);
                let lock = soft_lock(&opts, kind)
                    .on_compromise(move |_: Compromise| flag.store(true, Ordering::SeqCst));
                match take(&opts, &lock) {
                    Ok(g) => Guard::Soft(Box::new(g)),
                    Err(code) => return code,
                }
            }
        };
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                eprintln!(
                    "swaplock: {}: unable to execute command: {e}",
                    opts.rest[1].to_string_lossy()
                );
                return 255;
            }
        };
        // Only a lease can be lost while held: other kinds just wait.
        let leased = matches!(opts.kind, LockKind::Soft(Kind::Lease));
        let status = loop {
            if !leased {
                match child.wait() {
                    Ok(status) => break status,
                    Err(e) => {
                        eprintln!("swaplock: waiting for the command: {e}");
                        return 255;
                    }
                }
            }
            if lost.load(Ordering::SeqCst) {
                let _ = child.kill();
                let _ = child.wait();
                eprintln!(
                    "swaplock: {}: the lease was lost; the command was stopped",
                    opts.rest[0].to_string_lossy()
                );
                return LEASE_LOST;
            }
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {
                    // The wait for the command, with a look at the lease
                    // between: the pause is the look's period.
                    std::thread::sleep(LOOK);
                }
                Err(e) => {
                    eprintln!("swaplock: waiting for the command: {e}");
                    let _ = child.kill();
                    break child.wait().unwrap_or_default();
                }
            }
        };
        let code = status.code().unwrap_or(255);
        let released = match guard {
            Guard::Kernel(g) => g.release(),
            Guard::Soft(g) => match g.lease_lost() {
                Some(_) => {
                    eprintln!(
                        "swaplock: {}: the lease was lost while the command ran",
                        opts.rest[0].to_string_lossy()
                    );
                    return LEASE_LOST;
                }
                None => g.release(),
            },
        };
        match released {
            Ok(()) => code,
            Err(e) => {
                eprintln!("swaplock: {e}");
                if code == 0 {
                    RELEASE_FAILED
                } else {
                    code
                }
            }
        }
    }

    /// The exit status of `run` when a lease was lost while its command
    /// ran (`EX_TEMPFAIL`): the command was stopped.
    #[cfg(windows)]
    const LEASE_LOST: i32 = 75;
    /// The exit status of `run` when its command succeeded but the lock
    /// could not be released (`EX_IOERR`).
    #[cfg(windows)]
    const RELEASE_FAILED: i32 = 74;

    /// `run` on POSIX systems: kernel kinds exec the command with the lock
    /// held; soft kinds keep a supervisor.
    #[cfg(unix)]
    mod posix {
        use super::*;
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        use std::sync::atomic::{AtomicI32, Ordering};
        use swaplock::soft::{Compromise, SoftLockGuard};
        use swaplock::FileLockGuard;

        /// `run --etcd`: as a lease, with the variables `etcdctl lock`
        /// exports.
        #[cfg(feature = "etcd")]
        pub(super) fn run_etcd(
            opts: Options,
            lock: fn(&Options) -> swaplock::etcd::EtcdLock,
        ) -> i32 {
            // The pipe exists before the lock, so that the keep-alive's
            // report can never come before it.
            let events = match Events::new() {
                Ok(e) => e,
                Err(e) => {
                    eprintln!("swaplock: cannot make a pipe: {e}");
                    return 255;
                }
            };
            let lock = lock(&opts).on_compromise(|_| wake(LEASE_EVENT));
            let guard = match take(&opts, &lock) {
                Ok(g) => g,
                Err(code) => return code,
            };
            let name = format!("etcd lock {}", lock.name());
            supervise(&opts, &events, &name, guard)
        }

        pub(super) fn run(opts: Options) -> i32 {
            match opts.kind {
                LockKind::Fcntl | LockKind::Flock => run_kernel(opts),
                LockKind::Soft(kind) => run_soft(opts, kind),
            }
        }

        fn run_kernel(opts: Options) -> i32 {
            let path = PathBuf::from(&opts.rest[0]);
            // The command's lock, as with-lock-ex's: owned by the process, so
            // that it ends with the command even where a child it left keeps
            // the descriptor, and with-lock-ex -l names its holder.
            let lock = if opts.kind == LockKind::Flock {
                FileLock::flock(path)
            } else {
                FileLock::new(path).owned_by_process()
            }
            .allow_client_local(crate::client_local());
            let taken = if opts.shared {
                take(&opts, &Shared(&lock))
            } else {
                take(&opts, &lock)
            };
            let guard = match taken {
                Ok(g) => g,
                Err(code) => return code,
            };
            if lock.fell_back_to_soft() {
                // flock answered ENOSYS: the lock is a soft marker now, which
                // outlives no process by itself, so hold it from a parent.
                let events = match Events::new() {
                    Ok(e) => e,
                    Err(e) => {
                        eprintln!("swaplock: cannot make a pipe: {e}");
                        let _ = guard.release();
                        return 255;
                    }
                };
                let path = opts.rest[0].to_string_lossy().into_owned();
                return supervise(&opts, &events, &path, guard);
            }
            if let Err(e) = guard.inherit_on_exec() {
                // Named as the core names errno values.
                let errno = swaplock::core::Errno::from_raw(e.raw_os_error().unwrap_or(0));
                eprintln!("swaplock: fcntl F_SETFD: {errno}");
                return 255;
            }
            let e = std::process::Command::new(&opts.rest[1])
                .args(&opts.rest[2..])
                .exec();
            eprintln!(
                "swaplock: {}: unable to execute command: {e}",
                opts.rest[1].to_string_lossy()
            );
            255
        }

        /// The exit status of `run` when a lease was lost while its command
        /// ran (`EX_TEMPFAIL`): the command was stopped.
        const LEASE_LOST: i32 = 75;
        /// The exit status of `run` when its command succeeded but the lock
        /// could not be released (`EX_IOERR`).
        const RELEASE_FAILED: i32 = 74;
        /// How long what is left of the command's process group has to end
        /// after SIGTERM before it gets SIGKILL.
        const GRACE: Duration = Duration::from_secs(2);
        /// The signals the supervisor passes on to the command's group.
        const FORWARDED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
        /// Stop signals the supervisor takes (those not inherited as ignored):
        /// stopped alone, it would leave its command running while a lease
        /// expires, so the command's group is stopped with it.
        const STOPS: [libc::c_int; 3] = [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU];
        /// The event the lease heartbeat sends when the lease is lost (no
        /// signal has number 0).
        const LEASE_EVENT: u8 = 0;

        /// The write end of the supervisor's event pipe, for the signal
        /// handlers and the lease heartbeat; -1 before it exists.
        static WAKE: AtomicI32 = AtomicI32::new(-1);

        /// Sends `event` to the supervisor's loop. Async-signal-safe: one
        /// `write(2)` to a non-blocking pipe, with `errno` kept for the code
        /// the signal interrupted.
        fn wake(event: u8) {
            let fd = WAKE.load(Ordering::SeqCst);
            if fd < 0 {
                return;
            }
            // SAFETY: errno is thread-local; writing one byte from a valid
            // buffer to a descriptor that stays open for the process's life.
            unsafe {
                let errno = errno_location();
                let saved = *errno;
                libc::write(fd, (&event as *const u8).cast(), 1);
                *errno = saved;
            }
        }

        #[cfg(target_os = "linux")]
        unsafe fn errno_location() -> *mut libc::c_int {
            // SAFETY: always valid for the calling thread.
            unsafe { libc::__errno_location() }
        }

        #[cfg(target_os = "android")]
        unsafe fn errno_location() -> *mut libc::c_int {
            // SAFETY: always valid for the calling thread.
            unsafe { libc::__errno() }
        }

        #[cfg(target_vendor = "apple")]
        unsafe fn errno_location() -> *mut libc::c_int {
            // SAFETY: always valid for the calling thread.
            unsafe { libc::__error() }
        }

        extern "C" fn on_signal(signal: libc::c_int) {
            wake(signal as u8);
        }

        /// The supervisor's event pipe: forwarded signals, SIGCHLD and a lost
        /// lease each write a byte, so one `poll(2)` waits for all of them
        /// and no event can slip in between a check and the wait.
        struct Events {
            read: OwnedFd,
            _write: OwnedFd,
        }

        impl Events {
            fn new() -> std::io::Result<Self> {
                let mut fds = [0; 2];
                // SAFETY: pipe(2) fills both descriptors on success.
                if unsafe { libc::pipe(fds.as_mut_ptr()) } == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                // SAFETY: both are fresh descriptors this process owns.
                let (read, write) =
                    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
                for fd in [fds[0], fds[1]] {
                    // SAFETY: setting flags on descriptors we own. Close on
                    // exec keeps them out of the command; non-blocking keeps
                    // a full pipe from blocking a signal handler.
                    unsafe {
                        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                        let flags = libc::fcntl(fd, libc::F_GETFL);
                        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
                    }
                }
                WAKE.store(fds[1], Ordering::SeqCst);
                Ok(Events {
                    read,
                    _write: write,
                })
            }

            /// Waits up to `timeout` (for ever if `None`) for events, and
            /// returns those that came.
            fn wait(&self, timeout: Option<Duration>) -> Vec<u8> {
                let mut poll = libc::pollfd {
                    fd: self.read.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                let ms = timeout.map_or(-1, |t| t.as_millis().clamp(1, 60_000) as libc::c_int);
                // SAFETY: one valid pollfd. EINTR (a signal) just returns.
                unsafe { libc::poll(&mut poll, 1, ms) };
                let mut events = Vec::new();
                let mut buf = [0u8; 64];
                loop {
                    // SAFETY: reading into a buffer of the given length.
                    let n = unsafe { libc::read(poll.fd, buf.as_mut_ptr().cast(), buf.len()) };
                    if n <= 0 {
                        break;
                    }
                    events.extend_from_slice(&buf[..n as usize]);
                }
                events
            }
        }

        /// Installs `handler` for `signal`, without `SA_RESTART`; returns
        /// whether the signal was inherited as ignored, in which case it is
        /// left ignored (a `nohup`ed run keeps ignoring SIGHUP, as the
        /// command does under a kernel lock).
        fn catch(signal: libc::c_int, keep_ignored: bool) -> bool {
            // SAFETY: querying and setting a disposition with valid structs;
            // the handler only writes to a pipe, which is async-signal-safe.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                libc::sigaction(signal, std::ptr::null(), &mut old);
                let ignored = old.sa_sigaction == libc::SIG_IGN;
                if ignored && keep_ignored {
                    return true;
                }
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as *const () as usize;
                libc::sigaction(signal, &action, std::ptr::null_mut());
                ignored
            }
        }

        /// The controlling terminal, when this process's group has it in the
        /// foreground: the command's group gets it while the command runs, so
        /// that it can read the terminal and gets the terminal's signals.
        struct Terminal(OwnedFd);

        impl Terminal {
            fn foreground() -> Option<Self> {
                // SAFETY: opening a fixed path; the descriptor is owned below.
                let fd = unsafe {
                    libc::open(
                        c"/dev/tty".as_ptr(),
                        libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
                    )
                };
                if fd < 0 {
                    return None;
                }
                // SAFETY: a fresh descriptor this process owns.
                let tty = Terminal(unsafe { OwnedFd::from_raw_fd(fd) });
                // SAFETY: plain queries.
                let ours = unsafe { libc::tcgetpgrp(fd) == libc::getpgrp() };
                ours.then_some(tty)
            }

            /// Gives the terminal to `pgid`. SIGTTOU is blocked meanwhile, since
            /// a caller in a background group would otherwise be stopped.
            /// Async-signal-safe: the command's child calls it before exec.
            fn give(fd: libc::c_int, pgid: libc::pid_t) {
                // SAFETY: signal-mask calls with valid sets, and tcsetpgrp.
                unsafe {
                    let mut block: libc::sigset_t = std::mem::zeroed();
                    let mut old: libc::sigset_t = std::mem::zeroed();
                    libc::sigemptyset(&mut block);
                    libc::sigaddset(&mut block, libc::SIGTTOU);
                    libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
                    libc::tcsetpgrp(fd, pgid);
                    libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
                }
            }

            /// Takes the terminal back from a command that failed to start,
            /// whose group may have taken it before its exec failed.
            fn reclaim(&self) {
                // SAFETY: a plain query.
                let own = unsafe { libc::getpgrp() };
                Terminal::give(self.0.as_raw_fd(), own);
            }

            /// Takes the terminal back from the command's group `pgid`, if it
            /// still has it.
            fn take_back(&self, pgid: libc::pid_t) {
                let fd = self.0.as_raw_fd();
                // SAFETY: plain queries.
                if unsafe { libc::tcgetpgrp(fd) } == pgid {
                    // SAFETY: a plain query.
                    let own = unsafe { libc::getpgrp() };
                    Terminal::give(fd, own);
                }
            }
        }

        /// Whether any process of group `pgid` is left.
        fn group_alive(pgid: libc::pid_t) -> bool {
            // SAFETY: signal 0 only checks for existence.
            unsafe { libc::kill(-pgid, 0) == 0 }
        }

        /// Signals every process of group `pgid`.
        fn signal_group(pgid: libc::pid_t, signal: libc::c_int) {
            // SAFETY: the group is the command's, made for it at spawn.
            unsafe { libc::kill(-pgid, signal) };
        }

        /// How the lease was lost, in words.
        fn lost_because(c: Compromise) -> String {
            match c {
                Compromise::MarkerMissing => "its marker was removed".into(),
                Compromise::OwnerChanged => "another marker replaced it".into(),
                Compromise::RefreshFailed(errno) => format!("it could not be refreshed: {errno}"),
                Compromise::LeaseExpired => "etcd says the lease expired".into(),
                Compromise::Unreachable => {
                    "etcd answered no keep-alive within the lease's TTL".into()
                }
                other => format!("{other:?}"),
            }
        }

        fn run_soft(opts: Options, kind: Kind) -> i32 {
            // The pipe exists before the lock, so that the lease heartbeat's
            // report can never come before it.
            let events = match Events::new() {
                Ok(e) => e,
                Err(e) => {
                    eprintln!("swaplock: cannot make a pipe: {e}");
                    return 255;
                }
            };
            let lock = soft_lock(&opts, kind).on_compromise(|_| wake(LEASE_EVENT));
            let guard = match take(&opts, &lock) {
                Ok(g) => g,
                Err(code) => return code,
            };
            let path = guard.path().display().to_string();
            supervise(&opts, &events, &path, guard)
        }

        /// A lock `supervise` holds while the command runs.
        trait Held {
            /// Why the lease was lost, if it was.
            fn compromise(&self) -> Option<Compromise>;
            /// Whether the lease is lost now, looking again (before a release).
            fn lease_lost(&self) -> Option<Compromise>;
            /// Releases the lock.
            fn release(self) -> std::io::Result<()>;
            /// The variables the command gets.
            fn env(&self) -> Vec<(&'static str, String)> {
                Vec::new()
            }
        }

        /// An etcd lock, kept alive as a lease; the command learns its key
        /// and revision as from `etcdctl lock`, and its fencing token.
        #[cfg(feature = "etcd")]
        impl Held for swaplock::etcd::EtcdLockGuard {
            fn compromise(&self) -> Option<Compromise> {
                swaplock::etcd::EtcdLockGuard::compromise(self)
            }
            fn lease_lost(&self) -> Option<Compromise> {
                swaplock::etcd::EtcdLockGuard::lease_lost(self)
            }
            fn release(self) -> std::io::Result<()> {
                swaplock::etcd::EtcdLockGuard::release(self)
            }
            fn env(&self) -> Vec<(&'static str, String)> {
                vec![
                    ("SWAPLOCK_FENCING_TOKEN", self.fencing_token().to_string()),
                    ("ETCD_LOCK_KEY", self.key().to_owned()),
                    ("ETCD_LOCK_REV", self.revision().to_string()),
                ]
            }
        }

        impl Held for SoftLockGuard {
            fn compromise(&self) -> Option<Compromise> {
                SoftLockGuard::compromise(self)
            }
            fn lease_lost(&self) -> Option<Compromise> {
                SoftLockGuard::lease_lost(self)
            }
            fn release(self) -> std::io::Result<()> {
                SoftLockGuard::release(self)
            }
        }

        /// The `flock` fallback's lock, a soft marker: no lease.
        impl Held for FileLockGuard {
            fn compromise(&self) -> Option<Compromise> {
                None
            }
            fn lease_lost(&self) -> Option<Compromise> {
                None
            }
            fn release(self) -> std::io::Result<()> {
                FileLockGuard::release(self)
            }
        }

        /// What the supervisor learned by the time the command's group is gone.
        struct Outcome {
            /// The command's wait status; `None` if it could not be waited for.
            status: Option<libc::c_int>,
            /// Why the lease was lost, if the loss stopped the command.
            lost: Option<Compromise>,
        }

        /// Runs the command in a process group of its own while this process
        /// holds the lock; forwards SIGINT, SIGTERM and SIGHUP (those not
        /// inherited as ignored) to the group; stops the group if the lease is
        /// lost; once the command ends, ends what is left of its group (SIGTERM,
        /// then SIGKILL after [`GRACE`]); then releases the lock and returns
        /// the exit status: the command's (128 + the signal, if a signal ended
        /// it), [`LEASE_LOST`], or [`RELEASE_FAILED`].
        ///
        /// On Linux and Android the command gets SIGKILL if this process dies,
        /// and this process adopts the orphans of the command's tree (a child
        /// subreaper), so that it sees them end before it releases.
        fn supervise(opts: &Options, events: &Events, path: &str, held: impl Held) -> i32 {
            let compromise = || held.compromise();
            let mut ignored = [false; FORWARDED.len()];
            for (signal, ignored) in FORWARDED.iter().zip(&mut ignored) {
                *ignored = catch(*signal, true);
            }
            let mut stops_ignored = [false; STOPS.len()];
            for (signal, ignored) in STOPS.iter().zip(&mut stops_ignored) {
                *ignored = catch(*signal, true);
            }
            // An inherited SIG_IGN would have the kernel reap the command, and
            // waitpid fail with ECHILD: take SIGCHLD, and give the command
            // back the disposition it would have inherited.
            let chld_ignored = catch(libc::SIGCHLD, false);
            #[cfg(any(target_os = "linux", target_os = "android"))]
            // SAFETY: a plain prctl on this process.
            unsafe {
                libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
            }
            let terminal = Terminal::foreground();
            let tty = terminal.as_ref().map(|t| t.0.as_raw_fd());
            // SAFETY: a plain query.
            let supervisor = unsafe { libc::getpid() };
            let mut command = std::process::Command::new(&opts.rest[1]);
            command
                .args(&opts.rest[2..])
                .envs(held.env())
                .process_group(0);
            // SAFETY: the closure calls only async-signal-safe functions
            // (prctl, getppid, signal, sigprocmask, tcsetpgrp) and allocates
            // nothing.
            unsafe {
                command.pre_exec(move || {
                    #[cfg(any(target_os = "linux", target_os = "android"))]
                    {
                        // The command must not outlive its lock holder.
                        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                            return Err(std::io::Error::last_os_error());
                        }
                        // A holder that died before the line above sends no
                        // signal: do not start the command orphaned.
                        if libc::getppid() != supervisor {
                            return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                        }
                    }
                    #[cfg(not(any(target_os = "linux", target_os = "android")))]
                    let _ = supervisor;
                    for (&signal, &ignored) in FORWARDED
                        .iter()
                        .zip(&ignored)
                        .chain(STOPS.iter().zip(&stops_ignored))
                    {
                        if !ignored {
                            libc::signal(signal, libc::SIG_DFL);
                        }
                    }
                    let chld = if chld_ignored {
                        libc::SIG_IGN
                    } else {
                        libc::SIG_DFL
                    };
                    libc::signal(libc::SIGCHLD, chld);
                    if let Some(fd) = tty {
                        Terminal::give(fd, libc::getpid());
                    }
                    Ok(())
                });
            }
            let child = match command.spawn() {
                Ok(c) => c,
                Err(e) => {
                    if let Some(t) = &terminal {
                        t.reclaim();
                    }
                    eprintln!(
                        "swaplock: {}: unable to execute command: {e}",
                        opts.rest[1].to_string_lossy()
                    );
                    if let Err(e) = held.release() {
                        eprintln!("swaplock: {e}");
                    }
                    return 255;
                }
            };
            // The child leads its own group: its PID is the group's ID.
            let pgid = child.id() as libc::pid_t;
            let outcome = watch(events, pgid, terminal.as_ref(), &compromise);
            // A supervisor stopped longer than its lease (SIGSTOP cannot be
            // caught) finds out here, before its heartbeat runs again.
            let lost_late = if outcome.lost.is_none() {
                held.lease_lost()
            } else {
                None
            };
            let released = held.release();
            let mut code = match outcome.status {
                Some(status) => {
                    let status = std::process::ExitStatus::from_raw(status);
                    status
                        .code()
                        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
                }
                None => 255,
            };
            if let Some(c) = outcome.lost {
                eprintln!(
                    "swaplock: the lease on {path} was lost ({}): the command was stopped",
                    lost_because(c)
                );
                code = LEASE_LOST;
            } else if let Some(c) = lost_late {
                eprintln!(
                    "swaplock: the lease on {path} was lost ({}) before the command ended",
                    lost_because(c)
                );
                code = LEASE_LOST;
            }
            if let Err(e) = released {
                eprintln!("swaplock: {e}");
                if code == 0 {
                    code = RELEASE_FAILED;
                }
            }
            code
        }

        /// Waits for the command `pgid` (which leads its group) while
        /// forwarding signals, and until nothing of its group is left.
        fn watch(
            events: &Events,
            pgid: libc::pid_t,
            terminal: Option<&Terminal>,
            compromise: &dyn Fn() -> Option<Compromise>,
        ) -> Outcome {
            let mut outcome = Outcome {
                status: None,
                lost: None,
            };
            // With the terminal given to the command, a stop (^Z) of the
            // command stops this process too, as a shell expects of its job.
            let flags = if terminal.is_some() {
                libc::WNOHANG | libc::WUNTRACED
            } else {
                libc::WNOHANG
            };
            'running: loop {
                // Reap every child: the command, and orphans of its tree
                // adopted as their subreaper.
                loop {
                    let mut status = 0;
                    // SAFETY: waiting for our own children with a valid pointer.
                    let r = unsafe { libc::waitpid(-1, &mut status, flags) };
                    if r == pgid {
                        if libc::WIFSTOPPED(status) {
                            if let Some(t) = terminal {
                                t.take_back(pgid);
                                // SAFETY: stopping this process; it resumes on SIGCONT.
                                unsafe { libc::kill(libc::getpid(), libc::SIGSTOP) };
                                // SAFETY: plain queries.
                                if unsafe { libc::tcgetpgrp(t.0.as_raw_fd()) == libc::getpgrp() } {
                                    Terminal::give(t.0.as_raw_fd(), pgid);
                                }
                            }
                            signal_group(pgid, libc::SIGCONT);
                            continue;
                        }
                        outcome.status = Some(status);
                        break 'running;
                    }
                    if r > 0 {
                        continue;
                    }
                    if r == -1 {
                        let e = std::io::Error::last_os_error();
                        if e.kind() == ErrorKind::Interrupted {
                            continue;
                        }
                        // Never spin: the command's status is lost, but its
                        // group is still ended below before the release.
                        eprintln!("swaplock: cannot wait for the command: {e}");
                        break 'running;
                    }
                    break;
                }
                for event in events.wait(None) {
                    match event as libc::c_int {
                        e if e == LEASE_EVENT as libc::c_int => {
                            outcome.lost = compromise();
                            if outcome.lost.is_some() {
                                break 'running;
                            }
                        }
                        libc::SIGCHLD => {}
                        libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU => {
                            // Stopped alone, this process would leave its
                            // command running while the lease expires: the
                            // command's group stops first, and goes on with it.
                            signal_group(pgid, libc::SIGSTOP);
                            // SAFETY: stopping this process; it resumes on SIGCONT.
                            unsafe { libc::kill(libc::getpid(), libc::SIGSTOP) };
                            signal_group(pgid, libc::SIGCONT);
                        }
                        signal => signal_group(pgid, signal),
                    }
                }
            }
            if let Some(t) = terminal {
                t.take_back(pgid);
            }
            end_group(events, pgid, &mut outcome);
            outcome
        }

        /// Ends what is left of the command's group: SIGTERM, then SIGKILL
        /// after [`GRACE`], and returns once no process of it is left (or,
        /// past another grace period after SIGKILL, with a warning: what is
        /// left then can no longer run). Reaps the command if it was still
        /// running, and every orphan it adopted.
        fn end_group(events: &Events, pgid: libc::pid_t, outcome: &mut Outcome) {
            if !group_alive(pgid) {
                return;
            }
            // A lost lease may already be another process's: no grace, which
            // could outlast the lease itself (a short lease expires within a
            // third of its duration of the loss being reported).
            let mut killed = outcome.lost.is_some();
            let first = if killed { libc::SIGKILL } else { libc::SIGTERM };
            signal_group(pgid, first);
            // SIGCONT too: a stopped process acts on SIGTERM only once continued.
            signal_group(pgid, libc::SIGCONT);
            let start = std::time::Instant::now();
            loop {
                loop {
                    let mut status = 0;
                    // SAFETY: waiting for our own children with a valid pointer.
                    let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
                    if r <= 0 {
                        break;
                    }
                    if r == pgid && outcome.status.is_none() && outcome.lost.is_none() {
                        outcome.status = Some(status);
                    }
                }
                if !group_alive(pgid) {
                    return;
                }
                let elapsed = start.elapsed();
                if !killed && elapsed >= GRACE {
                    signal_group(pgid, libc::SIGKILL);
                    killed = true;
                } else if killed && elapsed >= 2 * GRACE {
                    eprintln!(
                        "swaplock: processes of the command's group {pgid} remain after SIGKILL \
                     (exiting, or in uninterruptible sleep); releasing the lock"
                    );
                    return;
                }
                // Processes of the group that are not this process's children
                // send no SIGCHLD here: look again at short intervals.
                for event in events.wait(Some(Duration::from_millis(50))) {
                    match event as libc::c_int {
                        e if e == LEASE_EVENT as libc::c_int || e == libc::SIGCHLD => {}
                        signal => signal_group(pgid, signal),
                    }
                }
            }
        }
    }

    /// How a contender stands toward the recorded holder, for `status`:
    /// `alive`, `dead`, `pid reused` (alive, but another process: the
    /// start token differs) or `cannot tell` (another host, a failed
    /// probe, or a marker that names no holder a contender would judge).
    fn describe_holder(standing: Standing) -> &'static str {
        match standing {
            Standing::Held(HeldBecause::Alive) => "alive",
            Standing::Stale { recycled: true } => "pid reused",
            Standing::Stale { recycled: false } => "dead",
            _ => "cannot tell",
        }
    }

    /// `s` as a JSON string.
    fn json_string(s: &str) -> String {
        let mut out = String::with_capacity(s.len() + 2);
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    /// What `status` found: the holder, if any.
    struct Found {
        pid: Option<i64>,
        host: Option<String>,
        mode: String,
        /// Why a marker is malformed, or what is unknown about it.
        reason: Option<String>,
        age: Option<Duration>,
        lease: Option<f64>,
        standing: &'static str,
    }

    fn kind_name(kind: LockKind) -> &'static str {
        match kind {
            LockKind::Fcntl => "fcntl",
            LockKind::Flock => "flock",
            LockKind::Soft(Kind::Soft) => "soft",
            LockKind::Soft(Kind::Marker) => "marker",
            LockKind::Soft(_) => "lease",
        }
    }

    /// Who holds the lock of `opts`, as a contender judges it (an etcd
    /// lock's holder is no process: nobody is named).
    fn find_holder(opts: &Options) -> std::io::Result<Option<Found>> {
        if opts.etcd.is_some() {
            return Ok(None);
        }
        let path = PathBuf::from(&opts.rest[0]);
        let kernel = match opts.kind {
            LockKind::Fcntl => FileLock::new(&path),
            LockKind::Flock => FileLock::flock(&path),
            LockKind::Soft(kind) => return soft_holder(soft_lock(opts, kind)),
        };
        // An fcntl query needs the file; a missing one is free.
        if opts.kind == LockKind::Fcntl && std::fs::symlink_metadata(&path).is_err() {
            return Ok(None);
        }
        #[cfg(windows)]
        return probe_kernel(&kernel, &path);
        #[cfg(unix)]
        match kernel.holder() {
            Ok(holder) => Ok(holder.map(|h| Found {
                // 0: a holder in a PID namespace this one cannot see.
                pid: (h.pid != 0).then_some(i64::from(h.pid)),
                host: None,
                mode: if h.shared { "shared" } else { "exclusive" }.into(),
                reason: None,
                age: None,
                lease: None,
                // A kernel lock ends with its holder; the process the
                // lock table names may have passed it on and exited.
                standing: match h.pid {
                    // SAFETY: signal 0 only asks whether the PID exists.
                    pid if pid > 0
                        && unsafe { libc::kill(pid, 0) } == -1
                        && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) =>
                    {
                        "cannot tell"
                    }
                    _ => "alive",
                },
            })),
            // flock answered ENOSYS: the lock is a soft lock here, as
            // run --kind flock takes it (filelock's SoftFileLock).
            Err(e) if opts.kind == LockKind::Flock && is_enosys(&e) => {
                soft_holder(SoftLock::soft(&path))
            }
            Err(e) => Err(e),
        }
    }

    /// Who holds soft lock `lock`, as a contender judges it.
    fn soft_holder(lock: SoftLock) -> std::io::Result<Option<Found>> {
        Ok(lock.status()?.map(|(owner, standing)| {
            // "malformed (why)": the mode, and the reason apart.
            let (mode, reason) = match owner.mode.split_once(" (") {
                Some((mode, why)) => {
                    let why = why.strip_suffix(')').unwrap_or(why);
                    (mode.to_owned(), Some(why.to_owned()))
                }
                None => (owner.mode.clone(), None),
            };
            Found {
                pid: owner.pid.map(i64::from),
                host: owner.host.clone(),
                mode,
                reason,
                age: owner.age,
                lease: owner.lease_seconds,
                standing: describe_holder(standing),
            }
        }))
    }

    /// Whether `e` is the `ENOSYS` of a filesystem without `flock`.
    #[cfg(unix)]
    fn is_enosys(e: &std::io::Error) -> bool {
        let raw = swaplock::LockError::of(e).and_then(|l| l.os_error().raw_os_error());
        raw == Some(libc::ENOSYS)
    }

    /// Windows has no query for `LockFileEx` locks: whether the lock is
    /// held is learned by trying it, without creating the file; the holder
    /// is not known.
    #[cfg(windows)]
    fn probe_kernel(lock: &FileLock, path: &std::path::Path) -> std::io::Result<Option<Found>> {
        if std::fs::symlink_metadata(path).is_err() {
            return Ok(None);
        }
        let held = |shared| Found {
            pid: None,
            host: None,
            mode: if shared { "shared" } else { "exclusive" }.into(),
            reason: None,
            age: None,
            lease: None,
            standing: "alive",
        };
        match lock.try_lock() {
            Ok(guard) => guard.release().map(|()| None),
            Err(e) if e.kind() == ErrorKind::WouldBlock => match lock.try_lock_shared() {
                Ok(guard) => guard.release().map(|()| Some(held(true))),
                Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(Some(held(false))),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    /// The lock's filesystem and what it offers (PROTOCOL 13.5), as
    /// `status` shows it: text, and JSON.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn filesystem(path: &std::path::Path) -> Option<(String, String)> {
        use swaplock::netfs::{Reach, Support};
        let fs = swaplock::netfs::filesystem(path).ok()?;
        let name = match fs.name.as_str() {
            "" => swaplock::core::fs::magic_name(fs.magic)
                .map_or_else(|| format!("0x{:x}", fs.magic), str::to_owned),
            name => name.to_owned(),
        };
        let reach = |r: Reach| match r {
            Reach::AllHosts => "all hosts",
            Reach::ThisClient => "this client only",
            _ => "unknown",
        };
        let support = |s: Support| match s {
            Support::Yes => "yes",
            Support::No => "no",
            _ => "unknown",
        };
        let t = fs.traits;
        let shown = match t.seen {
            true => name.clone(),
            false => format!("{name} (not in this process's mount table: cannot be told)"),
        };
        let create = match (t.exclusive_create, t.exists_as_eperm) {
            (Support::Yes, true) => "atomic (EPERM for an existing name)",
            (Support::Yes, false) => "atomic",
            (Support::No, _) => "not atomic between clients",
            _ => "unknown",
        };
        let text = format!(
            "filesystem: {shown}: remote {}; fcntl locks reach {}; flock locks reach {}; \
             exclusive create {create}; exchange {}",
            support(t.remote),
            reach(t.fcntl),
            reach(t.flock),
            support(t.exchange),
        );
        let json = format!(
            "{{\"type\":{},\"remote\":{},\"fcntl_locks\":{},\"flock_locks\":{},\
             \"exclusive_create\":{},\"exists_as_eperm\":{},\"exchange\":{},\"seen\":{}}}",
            json_string(&name),
            json_string(support(t.remote)),
            json_string(reach(t.fcntl)),
            json_string(reach(t.flock)),
            json_string(support(t.exclusive_create)),
            t.exists_as_eperm,
            json_string(support(t.exchange)),
            t.seen,
        );
        Some((text, json))
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn filesystem(_: &std::path::Path) -> Option<(String, String)> {
        None
    }

    fn status(opts: Options) -> i32 {
        let path = opts.rest[0].to_string_lossy().into_owned();
        let fs = filesystem(std::path::Path::new(&opts.rest[0]));
        let found = match find_holder(&opts) {
            Ok(found) => found,
            Err(e) => {
                eprintln!("swaplock: {e}");
                if let Some((text, _)) = &fs {
                    eprintln!("swaplock: {text}");
                }
                return 2;
            }
        };
        let held = i32::from(found.is_some());
        if !opts.json {
            status_text(found);
            if let Some((text, _)) = fs {
                println!("{text}");
            }
            return held;
        }
        {
            let holder = match &found {
                None => "null".to_owned(),
                Some(f) => format!(
                    "{{\"pid\":{},\"host\":{},\"mode\":{},\"reason\":{},\"age_seconds\":{},\
                     \"lease_seconds\":{},\"standing\":{}}}",
                    f.pid.map_or("null".into(), |p| p.to_string()),
                    f.host.as_deref().map_or("null".into(), json_string),
                    json_string(&f.mode),
                    f.reason.as_deref().map_or("null".into(), json_string),
                    f.age
                        .map_or("null".into(), |a| format!("{:.3}", a.as_secs_f64())),
                    f.lease
                        .filter(|l| l.is_finite())
                        .map_or("null".into(), |l| l.to_string()),
                    json_string(f.standing),
                ),
            };
            println!(
                "{{\"path\":{},\"kind\":{},\"held\":{},\"holder\":{holder},\"filesystem\":{}}}",
                json_string(&path),
                json_string(kind_name(opts.kind)),
                found.is_some(),
                fs.map_or("null".into(), |(_, json)| json),
            );
            held
        }
    }

    /// `status`'s first line: `free`, or who holds the lock.
    fn status_text(found: Option<Found>) {
        match found {
            None => {
                println!("free");
            }
            Some(f) => {
                let age = f
                    .age
                    .map(|a| format!("{:.1}s", a.as_secs_f64()))
                    .unwrap_or_else(|| "?".into());
                let mode = match &f.reason {
                    Some(why) => format!("{} ({why})", f.mode),
                    None => f.mode.clone(),
                };
                // A marker has an age; a kernel lock has none.
                match f.age.is_some() {
                    true => println!(
                        "held: mode {mode} pid {} host {} age {age} holder {}{}",
                        f.pid.map_or("-".into(), |p| p.to_string()),
                        f.host.as_deref().unwrap_or("-"),
                        f.standing,
                        f.lease.map(|d| format!(" lease {d}s")).unwrap_or_default(),
                    ),
                    false => println!(
                        "held: mode {mode} pid {}{}",
                        f.pid.map_or("-".into(), |p| p.to_string()),
                        match (f.pid, f.standing) {
                            (Some(-1), _) =>
                                " (no one process: an open file description lock, \
                                              or a holder the kernel does not name)",
                            (_, "cannot tell") =>
                                " (exited: a process it passed the lock to holds it)",
                            _ => "",
                        }
                    ),
                }
            }
        }
    }

    /// Who a marker names, in a message: `pid N on HOST`, or its mode.
    fn name_holder(owner: &swaplock::soft::OwnerInfo) -> String {
        match (owner.pid, &owner.host) {
            (Some(pid), Some(host)) => format!("pid {pid} on {host}"),
            _ => format!("a {} marker", owner.mode),
        }
    }

    fn break_lock(opts: Options) -> i32 {
        let kind = match opts.kind {
            LockKind::Soft(k) => k,
            _ => {
                eprintln!("swaplock: break applies to soft locks; kernel locks never go stale");
                return 2;
            }
        };
        let lock = soft_lock(&opts, kind);
        let path = lock.path().display().to_string();
        // First the contender's safe path: it takes a stale marker over.
        match lock.try_lock() {
            Ok(guard) => {
                return match guard.release() {
                    Ok(()) => {
                        println!("free");
                        0
                    }
                    Err(e) => {
                        eprintln!("swaplock: {e}");
                        1
                    }
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => {
                eprintln!("swaplock: {e}");
                return 1;
            }
        }
        if opts.force {
            return match lock.force_break() {
                Ok(()) => {
                    println!("broken by force");
                    0
                }
                Err(e) => {
                    eprintln!("swaplock: {e}");
                    1
                }
            };
        }
        // Then the judgement `status` prints, to say why the marker stays.
        let (owner, standing) = match lock.status() {
            Ok(Some(judged)) => judged,
            Ok(None) => {
                println!("free");
                return 0;
            }
            Err(e) => {
                eprintln!("swaplock: {e}");
                return 1;
            }
        };
        let who = name_holder(&owner);
        let holder = describe_holder(standing);
        match standing {
            Standing::Stale { .. } => eprintln!(
                "swaplock: {path}: the holder ({who}) is gone, but its marker could not be \
                 taken over: the filesystem cannot exchange names, so the stale marker is never \
                 moved; if its holder ({who}) is gone, run `swaplock break --force {path}`"
            ),
            Standing::Malformed => eprintln!(
                "swaplock: {path}: the marker holds no record this kind reads ({}); a contender \
                 removes it once seen unchanged for 2 s, or run `swaplock break --force {path}`",
                owner.mode
            ),
            Standing::Held(HeldBecause::Alive) => eprintln!(
                "swaplock: {path}: refusing to break a holder that is alive ({who}); \
                 --force breaks it anyway, and mutual exclusion with it is lost"
            ),
            _ => eprintln!(
                "swaplock: {path}: refusing to break a holder this host cannot judge ({who}, \
                 holder {holder}); once it is known gone, run `swaplock break --force {path}`"
            ),
        }
        1
    }
}
