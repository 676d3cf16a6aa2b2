use std::ffi::OsString;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::time::Duration;
use swaplock::core::decide::HeldBecause;
use swaplock::core::soft::Standing;
use swaplock::soft::{Advice, Kind, Leftover, LeftoverKind, SoftLock, MISMATCH_AFTER};
use swaplock::FileLock;

#[cfg(unix)]
use posix::run;
#[cfg(windows)]
use windows::run;

mod break_lock;
mod etcd_flags;
#[cfg(unix)]
mod rw;
mod status;
#[cfg(unix)]
mod strict;
mod take;
#[cfg(windows)]
mod windows;

use break_lock::*;
#[cfg(unix)]
use rw::*;
use status::*;
use take::*;

/// The exit status of `run` when a lease was lost while its command ran
/// (`EX_TEMPFAIL`): the command was stopped.
const LEASE_LOST: i32 = 75;
/// The exit status of `run` when its command succeeded but the lock could
/// not be released (`EX_IOERR`).
const RELEASE_FAILED: i32 = 74;

/// The help text: usage, exit statuses, and the limits of supervision.
pub(crate) const USAGE: &str = "usage: swaplock run [OPTIONS] LOCKFILE COMMAND [ARGS...]
       swaplock run [OPTIONS] LOCKFILE -c 'SHELL COMMAND'
       swaplock status [--kind KIND] [--json] LOCKFILE
       swaplock run --kind rw [-s] [--lease SECS] LOCKFILE COMMAND [ARGS...]
       swaplock run --etcd [URL[,URL...]] [ETCD OPTIONS] [OPTIONS] NAME COMMAND [ARGS...]
       swaplock status --etcd [URL[,URL...]] [ETCD OPTIONS] [--json] NAME
       swaplock break [--kind KIND] [--lease SECS] [--force] LOCKFILE
       swaplock --help | --version      swaplock COMMAND --help

Runs a command while holding a lock, or says who holds one.
KIND is fcntl, flock, sqlite, soft, marker (the default), lease, rw (the
read-write lock of filelock's SoftReadWriteLock) or strict; see
`swaplock run --help` for the options and exit statuses, and swaplock(1).";

/// `swaplock run --help`.
pub(crate) const RUN_USAGE: &str = "usage: swaplock run [OPTIONS] LOCKFILE COMMAND [ARGS...]
       swaplock run [OPTIONS] LOCKFILE -c 'SHELL COMMAND'

Runs COMMAND (or SHELL COMMAND, by sh -c) while holding the lock LOCKFILE.
With --etcd the lock is NAME in etcd instead, as `etcdctl lock NAME` takes it.

options:
  --kind KIND       fcntl | flock | sqlite | soft | marker (default) | lease
                    | rw | strict; sqlite: the lock of Python filelock's
                    ReadWriteLock (SQLite's own locks on the database
                    LOCKFILE, which is never written), a writer, or a
                    reader with -s
  --wait            wait for the lock (the default)
  --fail, -n        exit with the conflict status at once if the lock is held
                    (even with --timeout, as flock(1)'s -n)
  --quiet           exit 0 without running the command if the lock is held
  --timeout SECS, -w SECS
                    wait at most SECS, then exit with the conflict status
  -E N, --conflict-exit-code N
                    the conflict status (default 255)
  -s, --shared      the shared (read) lock of a kernel kind, of sqlite or
                    of rw: commands run under it together, and none while
                    an exclusive holder has the lock (rw: or waits for it)
  -c CMD, --command CMD
                    run CMD by sh -c instead of COMMAND ARGS
  --lifetime SECS   soft kinds: a marker older than SECS is broken
  --no-sync         soft kinds: write markers without fsync (4 to 5 times
                    faster on a disk; a power cut may then leave an empty
                    marker that keeps the lock taken until `swaplock break
                    --force`): for tmpfs, or where power cuts never happen
  --lease SECS      lease: the lease duration (default 30); rw: the stale
                    threshold, written as the record's lease (default 90;
                    heartbeat a third of it); etcd: the lease TTL
                    (default 60)
  --etcd [URL[,URL...]]
                    the lock NAME in the etcd cluster at these endpoints
                    (http:// or https:// URLs, or HOST:PORT), by etcd's
                    recipe: etcdctl lock peers exclude each other with it;
                    the command gets SWAPLOCK_FENCING_TOKEN, ETCD_LOCK_KEY
                    and ETCD_LOCK_REV. Keys live under NAME/: a name must
                    not be another's prefix up to a slash (a holder of a/b
                    blocks a). Without URLs: --endpoints, ETCDCTL_ENDPOINTS
                    or 127.0.0.1:2379

etcd options, as etcdctl's (each also from its ETCDCTL_* variable, e.g.
ETCDCTL_CACERT; a flag and its own variable both set is an error, as in
etcdctl 3.4):
  --endpoints URL[,URL...]  the endpoints (ETCDCTL_ENDPOINTS)
  --cacert FILE     the CA bundle that verifies the members (TLS)
  --cert FILE, --key FILE
                    the client certificate and key (mutual TLS); without
                    --user, a cluster with authentication on takes the
                    certificate's common name as the user
  --user NAME[:PASSWORD]
                    authenticate as NAME; without a password, from
                    --password-file, ETCDCTL_PASSWORD or a prompt on the
                    terminal (echo off). A password given here is hidden
                    from ps once read, but was visible until then
  --password-file FILE
                    the password: the file's first line (not etcdctl's)
  --tls-server-name NAME
                    the name the members' certificates must carry, for
                    endpoints given by IP address (not etcdctl's)
  --insecure-skip-tls-verify
                    accept any certificate from the members (test clusters
                    only: whoever answers can grant the lock); only as this
                    flag, never from ETCDCTL_INSECURE_SKIP_TLS_VERIFY
  (etcdctl's --password is refused: it would show the password in ps)
  -v, --verbose     say who holds the lock while waiting
  -h, --help        this help
Options take their value as --opt VALUE or --opt=VALUE; -- ends them.

exit status: the command's (128 + N if signal N ended it), or
  255  the lock is held (--fail, --timeout; unless -E says otherwise), it
       cannot be taken, or the command cannot be started
  0    the lock is held under --quiet
  75   soft kinds, rw and etcd: the lease was lost while the command ran; the
       command was stopped (its group got SIGKILL at once)
  74   soft kinds, rw and etcd: the command succeeded but the lock could not be released
       (a failed command keeps its status; the message is printed either way)
  2    usage error (etcd: also conflicting settings, a password that cannot
       be read)
Use -E to tell a held lock from the command's own statuses, as flock(1).

With --kind rw the command gets SWAPLOCK_FENCING_TOKEN, the generation
that granted the lock: have what it changes refuse older ones.

With soft kinds, rw and etcd the command runs in its own process group under a
supervisor that holds the lock; the group gets SIGINT, SIGTERM and SIGHUP
(those not inherited as ignored), and whatever of it outlives the command
gets SIGTERM, then SIGKILL after 2 s, before the lock is released. If the
supervisor itself is killed (SIGKILL), a small warden process forked with
it sends the whole group SIGKILL. Still escaping: a process that leaves
the group (setsid, setpgid, a daemon), and everything if the supervisor
and its warden are both killed. A supervisor stopped (SIGSTOP) past
the lease while its command runs on cannot stop it: the next holder may
overlap it until the supervisor runs again; pass the fencing token to
what the command changes.";

/// `swaplock status --help`.
pub(crate) const STATUS_USAGE: &str = "usage: swaplock status [--kind KIND] [--json] LOCKFILE
       swaplock status --etcd [URL[,URL...]] [ETCD OPTIONS] [--json] NAME

Says who holds the lock LOCKFILE, judged as a contender judges it. KIND is
fcntl, flock, sqlite, soft, marker (the default), lease, rw or strict. For
rw: the latest generation, the writer and every reader, each with its PID,
host, the age of its record and whether it is alive (this host's processes
by PID, another host's by how recently its record changed). For strict:
every claim, and what sits at the lock path. For fcntl the holder is the
lock's query (F_GETLK: PID -1 for an open file description lock); for
flock, the kernel's lock table (/proc/locks) on Linux and Android; for
sqlite, F_GETLK on SQLite's lock bytes: a writer (exclusive), or readers
(shared, one PID) and a writer waiting for them (pending) or about to
(reserved).
With --etcd, says which key holds the etcd lock NAME (the one with the
lowest create revision under NAME/): its lease and create revision; the
etcd options are run's (see `swaplock run --help`).
--json prints one JSON object (schema in swaplock(1)).

exit status: 0 free, 1 held, 2 error or usage error.";

/// `swaplock break --help`.
pub(crate) const BREAK_USAGE: &str =
    "usage: swaplock break [--kind KIND] [--lease SECS] [--force] LOCKFILE

Removes a stale soft-lock marker by the same safe path a contender uses,
and explains why a marker stays. KIND is soft, marker (the default),
lease, rw or strict; a lease is judged with the duration its marker
publishes unless --lease gives one. --force removes the marker of a
holder that may be alive: mutual exclusion with it is lost.
For rw, stale members are evicted by a commit of the log without them, as
a contender evicts: one whose record is gone or whose process on this host
is dead at once, one of another host once its record has stayed unchanged
for --lease SECS (default 90) or its own lease if longer; a live one stays
unless --force.
A strict lock never expires: break removes the claims of holders this
host proves gone, and --force removes every claim.

exit status: 0 once the lock is free, 1 when it refuses or fails, 2 usage
error.";

#[derive(Clone, Copy, PartialEq)]
enum LockKind {
    Fcntl,
    Flock,
    /// Python filelock's `ReadWriteLock`: SQLite's locks on a database.
    #[cfg(unix)]
    Sqlite,
    Soft(Kind),
    /// The read-write soft lock (`swaplock::rw`).
    Rw,
    /// filelock's `StrictSoftFileLock` (POSIX systems only).
    Strict,
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
    /// `--no-sync`: soft markers are not synced ([`SoftLock::durable`]).
    no_sync: bool,
    force: bool,
    shared: bool,
    /// The exit status when the lock is held (`-E`).
    conflict: i32,
    verbose: bool,
    json: bool,
    /// `--etcd`: the endpoints of an etcd lock, comma-separated (empty:
    /// given by `--endpoints`, `ETCDCTL_ENDPOINTS` or etcdctl's default).
    etcd: Option<String>,
    /// etcdctl's connection flags (`--endpoints`, `--cacert`, ...).
    etcd_flags: Box<etcd_flags::EtcdFlags>,
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
        #[cfg(unix)]
        Some("sqlite") => LockKind::Sqlite,
        #[cfg(windows)]
        Some("sqlite") => {
            return Err(
                "the sqlite kind is not available on Windows: SQLite's Windows \
                        locks are not implemented here; take it from Linux, Android or macOS"
                    .into(),
            )
        }
        Some("rw") => LockKind::Rw,
        Some("strict") if cfg!(windows) => {
            return Err(
                "the strict kind is for POSIX systems: it needs hard links and \
                        directory descriptors"
                    .into(),
            )
        }
        Some("strict") => LockKind::Strict,
        _ => {
            return Err(format!(
                "unknown kind {}: fcntl, flock, sqlite, soft, marker, lease, rw or strict",
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
        no_sync: false,
        lease: None,
        force: false,
        shared: false,
        conflict: 255,
        verbose: false,
        json: false,
        etcd: None,
        etcd_flags: Default::default(),
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
                o.etcd = Some(etcd_flags::etcd_urls(&mut p)?);
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
            Long("no-sync") => {
                only("--no-sync", &[Sub::Run])?;
                o.no_sync = true;
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
                    let mut raw: Vec<OsString> = p.raw_args().map_err(|e| e.to_string())?.collect();
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
            Long(name) => {
                let name = name.to_owned();
                if !o.etcd_flags.take(&name, &mut p)? {
                    return Err(format!("invalid option '--{name}'"));
                }
                only(&format!("--{name}"), &[Sub::Run, Sub::Status])?;
            }
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    if let Some(shell) = shell {
        if o.rest.len() != 1 {
            return Err("-c takes the lock file and one shell command, no other command".into());
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
        if kind_given || o.lifetime.is_some() || o.shared || o.no_sync {
            return Err(
                "--etcd takes no --kind, --lifetime, --no-sync or --shared: \
                        an etcd lock is its own kind"
                    .into(),
            );
        }
        return Ok(Parsed::Options(o));
    }
    if let Some(flag) = o.etcd_flags.first() {
        return Err(format!("--{flag} applies to etcd locks: give --etcd"));
    }
    if o.lifetime.is_some() && !matches!(o.kind, LockKind::Soft(_)) {
        return Err("--lifetime applies to soft kinds: soft, marker or lease".into());
    }
    if o.no_sync && !matches!(o.kind, LockKind::Soft(_)) {
        return Err("--no-sync applies to soft kinds: soft, marker or lease".into());
    }
    if o.lease.is_some() && !matches!(o.kind, LockKind::Soft(Kind::Lease) | LockKind::Rw) {
        return Err("--lease needs --kind lease or --kind rw".into());
    }
    #[cfg(unix)]
    if let (LockKind::Rw, Some(lease)) = (o.kind, o.lease) {
        // filelock's poll must stay below the threshold (RW8), and the
        // heartbeat, a third of it, above zero.
        if lease <= swaplock::rw::DEFAULT_POLL {
            return Err(format!(
                "--lease {lease:?} is too short for --kind rw: it must exceed the poll of {:?}",
                swaplock::rw::DEFAULT_POLL
            ));
        }
    }
    let shares = match o.kind {
        LockKind::Fcntl | LockKind::Flock | LockKind::Rw => true,
        #[cfg(unix)]
        LockKind::Sqlite => true,
        LockKind::Soft(_) | LockKind::Strict => false,
    };
    if o.shared && !shares {
        return Err("--shared needs --kind fcntl, flock, sqlite or rw".into());
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

/// The etcd lock of `--etcd` (feature `etcd`).
#[cfg(feature = "etcd")]
mod etcd;

/// `run` on POSIX systems: kernel kinds exec the command with the lock
/// held; soft kinds keep a supervisor.
#[cfg(unix)]
mod posix;
