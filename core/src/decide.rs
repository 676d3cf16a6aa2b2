//! The decisions of the lock protocols, as pure functions of what the
//! adapter observed (PROTOCOL 4.3 to 4.5, 7.12 to 7.14; the with-lock-ex
//! identity check).
//!
//! Every input that comes from the world (a `kill(pid, 0)` answer, a start
//! token read now, a stat, the monotonic clock) is an argument, so the same
//! decisions run under a simulator and on a real kernel. All of them fail
//! closed: only a proven death or a proven recycled PID makes a holder
//! stale (invariant I8).

use crate::decimal::Decimal;
use crate::errno::Errno;
use crate::host::has_namespace_mark;
use crate::pid::Pid;
use crate::record::Owner;
use crate::start::{same_start, StartToken};
use core::time::Duration;

/// A reading of a monotonic clock, in nanoseconds from an arbitrary origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Instant(pub u64);

impl Instant {
    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

/// A file timestamp (or a wall-clock reading) as seconds and nanoseconds
/// since the Unix epoch; exact, unlike filelock's double.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FileTime {
    /// Whole seconds; negative before 1970.
    pub sec: i64,
    /// Nanoseconds, 0..1_000_000_000.
    pub nsec: u32,
}

impl FileTime {
    /// The time in nanoseconds since the epoch.
    pub fn as_nanos(self) -> i128 {
        i128::from(self.sec) * 1_000_000_000 + i128::from(self.nsec)
    }

    /// The time from `earlier` to `self`, as a marker's age is its mtime's
    /// distance from the wall clock; `None` when `earlier` is later (a
    /// time in the future).
    pub fn since(self, earlier: FileTime) -> Option<Duration> {
        let nanos = u128::try_from(self.as_nanos() - earlier.as_nanos()).ok()?;
        let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
        Some(Duration::new(secs, (nanos % 1_000_000_000) as u32))
    }
}

/// The identity of a file: `(st_dev, st_ino)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FileId {
    /// The device.
    pub dev: u64,
    /// The inode number on that device.
    pub ino: u64,
}

/// What a liveness probe of a PID on this host answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Liveness {
    /// The process exists (including one we may not signal: `EPERM`).
    Alive,
    /// No such process (`ESRCH`, or Windows error 87).
    Dead,
    /// The probe failed otherwise; nothing is proven.
    Unknown(Errno),
}

impl Liveness {
    /// Reads the result of `kill(pid, 0)`: success or `EPERM` is alive,
    /// `ESRCH` dead, any other error proves nothing.
    pub fn from_kill(result: Result<(), Errno>) -> Self {
        match result {
            Ok(()) => Liveness::Alive,
            Err(e) if e == Errno::PERM => Liveness::Alive,
            Err(e) if e == Errno::SRCH => Liveness::Dead,
            Err(e) => Liveness::Unknown(e),
        }
    }
}

/// Why a recorded owner still holds the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum HeldBecause {
    /// The record names another host, whose PIDs are never probed.
    OtherHost,
    /// The PID is alive and its start matches, or cannot be compared.
    Alive,
    /// The probe failed; the owner cannot be proven gone.
    CannotTell,
}

/// The staleness verdict on a recorded owner (PROTOCOL 4.5).
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Verdict {
    /// The owner holds the lock (or cannot be proven not to).
    Held(HeldBecause),
    /// The owner is dead, or its PID was recycled: the marker may be broken.
    Stale,
    /// Stale, unless an older writer in another PID namespace that shares
    /// this host name runs as this PID there. On Linux the adapter scans
    /// `/proc` with [`elsewhere_scan_applies`] and [`task_is_owner`];
    /// elsewhere this means [`Verdict::Stale`].
    StaleUnlessRunsElsewhere,
}

/// Judges a recorded owner, fail closed (PROTOCOL 4.5).
///
/// `this_host` is this process's [`host_name`](crate::host::host_name);
/// `probe` is the liveness of `owner.pid` on this host; `current_start` is
/// the start token of `owner.pid` read now (`None` if it cannot be read).
/// The start token is consulted only for a live owner whose record carries
/// one ([`needs_current_start`]), so a caller may skip reading it otherwise.
pub fn judge_owner(
    owner: &Owner<'_>,
    this_host: &str,
    probe: Liveness,
    current_start: Option<StartToken>,
) -> Verdict {
    if owner.host != this_host {
        return Verdict::Held(HeldBecause::OtherHost);
    }
    match probe {
        Liveness::Unknown(_) => return Verdict::Held(HeldBecause::CannotTell),
        Liveness::Alive => {
            let recycled = match (owner.start, current_start) {
                (Some(recorded), Some(current)) => !same_start(current, recorded),
                _ => false,
            };
            if !recycled {
                return Verdict::Held(HeldBecause::Alive);
            }
        }
        Liveness::Dead => {}
    }
    if has_namespace_mark(owner.host) {
        Verdict::Stale
    } else {
        Verdict::StaleUnlessRunsElsewhere
    }
}

/// Whether [`judge_owner`] will look at the current start token.
pub fn needs_current_start(owner: &Owner<'_>, this_host: &str, probe: Liveness) -> bool {
    owner.host == this_host && probe == Liveness::Alive && owner.start.is_some()
}

/// Whether filelock's `owner_is_current_process` holds: the record names
/// this PID and host, and its start token (if any) is exactly ours.
pub fn owner_is_current(
    owner: &Owner<'_>,
    my_pid: Pid,
    this_host: &str,
    my_start: Option<StartToken>,
) -> bool {
    owner.pid == my_pid
        && owner.host == this_host
        && match (owner.start, my_start) {
            (None, _) => true,
            (Some(recorded), Some(mine)) => mine.equals(recorded),
            (Some(_), None) => false,
        }
}

/// Whether the `/proc` scan for an owner in another PID namespace applies
/// to a record with this start token, given this process's boot id (0 when
/// unknown): only a recorded token from this boot, or one without a boot id,
/// can match a task here.
pub fn elsewhere_scan_applies(recorded: Option<Decimal<'_>>, boot_id: u128) -> bool {
    let Some(recorded) = recorded else {
        return false;
    };
    if boot_id == 0 {
        return true;
    }
    matches!(recorded.to_u192(), Some((high, _)) if high == 0 || high == boot_id)
}

/// What a scan of every task that began at `began` (clock ticks since
/// boot, rounded down, on the clock `starttime` counts) still answers for
/// a record started at `recorded` (PROTOCOL 4.5), asked at any time after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Scanned {
    /// The recorded tick ended before the scan began (`recorded < began`):
    /// a task that matches the record started within it, so the task,
    /// alive when asked about, was alive through the whole scan and was
    /// seen by it. Only the tasks of other PID namespaces the scan saw can
    /// be the owner.
    Answers,
    /// The record's tick is the scan's own: a match may also be a task
    /// started within that tick after the scan began, which has a number
    /// the scan did not see. (A number the scan saw, freed and taken again
    /// by a task started within the same tick, would need the host to go
    /// through every PID of `pid_max` in one tick.) Those tasks, and the
    /// ones of other PID namespaces the scan saw, can be the owner.
    AnswersButNewTasks,
    /// Started after the scan's tick, or ticks that do not fit: scan again.
    Stale,
}

/// What a scan that began at `began` answers for a record started at
/// `recorded` ([`Scanned`]).
pub fn scanned(began: u64, recorded: Decimal<'_>) -> Scanned {
    match recorded.to_u192() {
        Some((_, ticks)) if ticks < began => Scanned::Answers,
        Some((_, ticks)) if ticks == began => Scanned::AnswersButNewTasks,
        _ => Scanned::Stale,
    }
}

/// The innermost PID a `/proc/<task>/status` file gives its task: the last
/// field of the `NSpid:` line (lines split on `\n` only, since a task's name
/// may hold other separators).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum NsPid {
    /// The innermost PID.
    Pid(u64),
    /// No `NSpid:` line (kernels before 4.1).
    Missing,
    /// The line does not end in a number: nothing can be concluded.
    Unparsable,
}

/// Reads the `NSpid:` line of a `/proc/<task>/status` file.
pub fn parse_nspid(status: &[u8]) -> NsPid {
    let Some(line) = status
        .split(|&b| b == b'\n')
        .find(|l| l.starts_with(b"NSpid:"))
    else {
        return NsPid::Missing;
    };
    let last = line
        .split(|b| b.is_ascii_whitespace() || *b == 0x0b)
        .rfind(|w| !w.is_empty());
    match last.and_then(Decimal::parse).and_then(|d| d.to_u64()) {
        Some(pid) => NsPid::Pid(pid),
        None => NsPid::Unparsable,
    }
}

/// Whether `/proc/<task>` shows the recorded owner running in another PID
/// namespace: another task, started at the recorded token (unless this
/// reader's `starttime` is shifted, when tokens cannot be compared), whose
/// innermost PID is the recorded one. [`NsPid::Unparsable`] counts as a
/// match: it cannot be ruled out, and the verdict fails closed.
/// `innermost` reads the task's `status` ([`parse_nspid`]), asked only
/// once the PID and the start leave the task in question: a scan of every
/// task on the host then reads one small file of most of them, not two.
pub fn task_is_owner(
    task: u64,
    owner: Pid,
    reader_unshifted: bool,
    task_start: Option<StartToken>,
    recorded: Decimal<'_>,
    innermost: impl FnOnce() -> NsPid,
) -> bool {
    if task == u64::from(owner.get()) {
        return false;
    }
    if reader_unshifted && !task_start.is_some_and(|t| same_start(t, recorded)) {
        return false;
    }
    match innermost() {
        NsPid::Pid(pid) => pid == u64::from(owner.get()),
        NsPid::Missing => false,
        NsPid::Unparsable => true,
    }
}

/// How long a malformed marker must stay unchanged before a contender
/// evicts it (invariant I9).
pub const MALFORMED_GRACE: Duration = Duration::from_secs(2);

/// What identifies one state of a marker for the unchanged watch: its
/// modification time, inode and change time. No process can set the change
/// time, so a recreated marker never inherits an old one's age.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct WatchKey {
    /// `st_mtime` with nanoseconds.
    pub mtime: FileTime,
    /// `st_ino`.
    pub ino: u64,
    /// `st_ctime` with nanoseconds.
    pub ctime: FileTime,
}

/// How long a contender has seen the marker unchanged, timed on its own
/// monotonic clock, never against another host's (PROTOCOL 7.13).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UnchangedWatch {
    seen: Option<(WatchKey, Instant)>,
}

impl UnchangedWatch {
    /// A watch that has seen nothing.
    pub const fn new() -> Self {
        UnchangedWatch { seen: None }
    }

    /// Records a look at the marker at `now` and returns how long it has
    /// been seen with this key: zero on the first look and after any change.
    pub fn observe(&mut self, key: WatchKey, now: Instant) -> Duration {
        match self.seen {
            Some((seen, since)) if seen == key => now.since(since),
            _ => {
                self.seen = Some((key, now));
                Duration::ZERO
            }
        }
    }

    /// Forgets what was seen.
    pub fn reset(&mut self) {
        self.seen = None;
    }
}

/// Whether a lease seen unchanged for `unchanged_for` has expired under a
/// duration of `lease_seconds` (PROTOCOL 7.14).
pub fn lease_expired(unchanged_for: Duration, lease_seconds: f64) -> bool {
    unchanged_for.as_secs_f64() >= lease_seconds
}

/// Whether a marker whose modification time is `mtime` has outlived
/// `lifetime` at wall-clock time `now` (PROTOCOL 7.12; sensitive to clock
/// skew between hosts, which is why leases do not use it).
pub fn lifetime_expired(now: FileTime, mtime: FileTime, lifetime: Duration) -> bool {
    now.as_nanos() - mtime.as_nanos() >= lifetime.as_nanos() as i128
}

/// The outcome of the with-lock-ex identity check after a kernel lock call
/// succeeded.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum KernelLockCheck {
    /// The locked descriptor is the file the path names: the lock is held.
    Held,
    /// A holder removed or replaced the file meanwhile: close and start again.
    Retry,
    /// The path cannot be checked: give up with this error.
    Fail(Errno),
}

/// The with-lock-ex check: `fstat` of the locked descriptor against `stat`
/// of the path. The same `(dev, ino)` means held; another file, `ENOENT`,
/// or `ESTALE` (a network filesystem's name for a file its server no
/// longer has) means a holder deleted or replaced the lock file after we
/// opened it, so our lock is on an orphan; any other error fails.
pub fn check_kernel_lock(locked: FileId, path: Result<FileId, Errno>) -> KernelLockCheck {
    match path {
        Ok(id) if id == locked => KernelLockCheck::Held,
        Ok(_) => KernelLockCheck::Retry,
        Err(e) if e == Errno::NOENT || e == Errno::STALE => KernelLockCheck::Retry,
        Err(e) => KernelLockCheck::Fail(e),
    }
}

/// The mode with-lock-ex creates a lock file with, before the kernel applies
/// the umask: read and write for each class of user for which the umask
/// grants write (`0666 & !(umask | ((umask & 0222) << 1))`).
pub const fn with_lock_ex_mode(umask: u32) -> u32 {
    0o666 & !(umask | ((umask & 0o222) << 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_time_is_so_long_since_an_earlier_one_and_never_since_a_later() {
        let t = |sec, nsec| FileTime { sec, nsec };
        let since = |a, b| t(a, 0).since(t(b, 0));
        assert_eq!(since(10, 4), Some(Duration::from_secs(6)));
        assert_eq!(since(4, 4), Some(Duration::ZERO));
        assert_eq!(since(4, 10), None, "a time in the future");
        assert_eq!(
            since(3, -2),
            Some(Duration::from_secs(5)),
            "across the epoch"
        );
        assert_eq!(
            t(7, 100).since(t(5, 999_999_900)),
            Some(Duration::new(1, 200)),
            "nanoseconds borrowed from the seconds"
        );
        assert_eq!(
            t(1_000_000, 5).since(t(0, 0)),
            Some(Duration::new(1_000_000, 5))
        );
    }

    fn owner(host: &'static str, start: Option<&'static str>) -> Owner<'static> {
        Owner {
            pid: Pid::new(42).unwrap(),
            host,
            start: start.map(|s| Decimal::parse(s.as_bytes()).unwrap()),
        }
    }

    #[test]
    fn verdict_table() {
        let here = "vm";
        let tok = StartToken::linux(0, 7);
        assert_eq!(
            judge_owner(&owner("other", None), here, Liveness::Dead, None),
            Verdict::Held(HeldBecause::OtherHost)
        );
        assert_eq!(
            judge_owner(&owner(here, Some("7")), here, Liveness::Alive, Some(tok)),
            Verdict::Held(HeldBecause::Alive)
        );
        assert_eq!(
            judge_owner(&owner(here, None), here, Liveness::Alive, Some(tok)),
            Verdict::Held(HeldBecause::Alive)
        );
        assert_eq!(
            judge_owner(&owner(here, Some("8")), here, Liveness::Alive, None),
            Verdict::Held(HeldBecause::Alive)
        );
        assert_eq!(
            judge_owner(&owner(here, Some("8")), here, Liveness::Alive, Some(tok)),
            Verdict::StaleUnlessRunsElsewhere
        );
        assert_eq!(
            judge_owner(&owner(here, None), here, Liveness::Dead, None),
            Verdict::StaleUnlessRunsElsewhere
        );
        assert_eq!(
            judge_owner(
                &owner(here, None),
                here,
                Liveness::Unknown(Errno::INVAL),
                None
            ),
            Verdict::Held(HeldBecause::CannotTell)
        );
        let ns = "vm?pidns-f0000152";
        assert_eq!(
            judge_owner(&owner(ns, None), ns, Liveness::Dead, None),
            Verdict::Stale
        );
        assert_eq!(Liveness::from_kill(Err(Errno::PERM)), Liveness::Alive);
        assert_eq!(Liveness::from_kill(Err(Errno::SRCH)), Liveness::Dead);
    }

    #[test]
    fn a_file_time_adds_its_nanoseconds_to_its_seconds() {
        assert_eq!(FileTime { sec: 2, nsec: 5 }.as_nanos(), 2_000_000_005);
        assert_eq!(FileTime { sec: -1, nsec: 5 }.as_nanos(), -999_999_995);
        let t = |sec, nsec| FileTime { sec, nsec };
        assert!(lifetime_expired(t(10, 1), t(5, 1), Duration::from_secs(5)));
        assert!(!lifetime_expired(t(10, 0), t(5, 1), Duration::from_secs(5)));
    }

    #[test]
    fn a_kill_probe_proves_a_death_only_by_esrch() {
        assert_eq!(Liveness::from_kill(Ok(())), Liveness::Alive);
        assert_eq!(Liveness::from_kill(Err(Errno::PERM)), Liveness::Alive);
        assert_eq!(Liveness::from_kill(Err(Errno::SRCH)), Liveness::Dead);
        for e in [Errno::INVAL, Errno::ACCES, Errno::from_raw(9999)] {
            assert_eq!(Liveness::from_kill(Err(e)), Liveness::Unknown(e));
        }
    }

    #[test]
    fn the_current_start_is_needed_exactly_when_the_verdict_reads_it() {
        let here = "vm";
        let current = Some(StartToken::linux(0, 7));
        for host in [here, "other"] {
            for probe in [
                Liveness::Alive,
                Liveness::Dead,
                Liveness::Unknown(Errno::INVAL),
            ] {
                for start in [None, Some("8")] {
                    let o = owner(host, start);
                    let needed = needs_current_start(&o, here, probe);
                    let expected = host == here && probe == Liveness::Alive && start.is_some();
                    assert_eq!(needed, expected, "{host} {probe:?} {start:?}");
                    if !needed {
                        assert_eq!(
                            judge_owner(&o, here, probe, current),
                            judge_owner(&o, here, probe, None),
                            "{host} {probe:?} {start:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_owner_is_current_only_with_our_pid_our_host_and_exactly_our_start() {
        let here = "vm";
        let me = Pid::new(42).unwrap();
        let other = Pid::new(43).unwrap();
        let mine = Some(StartToken::linux(0, 7));
        assert!(owner_is_current(&owner(here, None), me, here, mine));
        assert!(owner_is_current(&owner(here, None), me, here, None));
        assert!(owner_is_current(&owner(here, Some("7")), me, here, mine));
        assert!(!owner_is_current(&owner(here, Some("8")), me, here, mine));
        assert!(
            !owner_is_current(&owner(here, Some("7")), me, here, None),
            "a recorded start we cannot read is not ours"
        );
        assert!(
            !owner_is_current(
                &owner(here, Some("7")),
                me,
                here,
                Some(StartToken::linux(5, 7))
            ),
            "compared exactly, not as same_start does"
        );
        assert!(!owner_is_current(&owner(here, None), other, here, mine));
        assert!(!owner_is_current(&owner("other", None), me, here, mine));
        assert!(!owner_is_current(&owner("other", None), other, here, mine));
    }

    #[test]
    fn the_elsewhere_scan_applies_to_a_token_of_this_boot_or_of_no_boot() {
        let mut buf = [0u8; crate::start::START_DIGITS_MAX];
        let boot_7 = StartToken::linux(7, 3).to_decimal(&mut buf);
        let no_boot = Decimal::parse(b"3").unwrap();
        assert!(!elsewhere_scan_applies(None, 7));
        assert!(
            elsewhere_scan_applies(Some(boot_7), 0),
            "a reader without a boot id cannot rule it out"
        );
        assert!(elsewhere_scan_applies(Some(boot_7), 7));
        assert!(!elsewhere_scan_applies(Some(boot_7), 8), "another boot");
        assert!(elsewhere_scan_applies(Some(no_boot), 8));
    }

    #[test]
    fn a_reset_watch_counts_again_from_its_next_look() {
        let key = WatchKey {
            mtime: FileTime { sec: 1, nsec: 0 },
            ino: 5,
            ctime: FileTime { sec: 1, nsec: 0 },
        };
        let mut w = UnchangedWatch::new();
        assert_eq!(w.observe(key, Instant(0)), Duration::ZERO);
        assert_eq!(w.observe(key, Instant(5)), Duration::from_nanos(5));
        w.reset();
        assert_eq!(w, UnchangedWatch::new());
        assert_eq!(w.observe(key, Instant(10)), Duration::ZERO);
        assert_eq!(w.observe(key, Instant(12)), Duration::from_nanos(2));
    }

    #[test]
    fn with_lock_ex_grants_read_and_write_to_each_class_the_umask_lets_write() {
        for (umask, mode) in [
            (0o000, 0o666),
            (0o002, 0o660),
            (0o004, 0o662),
            (0o020, 0o606),
            (0o022, 0o600),
            (0o066, 0o600),
            (0o077, 0o600),
            (0o777, 0o000),
        ] {
            assert_eq!(with_lock_ex_mode(umask), mode, "umask {umask:o}");
        }
    }

    #[test]
    fn watch_restarts_on_any_change() {
        let key = WatchKey {
            mtime: FileTime { sec: 1, nsec: 0 },
            ino: 5,
            ctime: FileTime { sec: 1, nsec: 0 },
        };
        let mut w = UnchangedWatch::new();
        assert_eq!(w.observe(key, Instant(100)), Duration::ZERO);
        assert_eq!(
            w.observe(key, Instant(2_000_000_100)),
            Duration::from_secs(2)
        );
        let changed = WatchKey {
            ctime: FileTime { sec: 1, nsec: 1 },
            ..key
        };
        assert_eq!(w.observe(changed, Instant(3_000_000_000)), Duration::ZERO);
        assert_eq!(
            w.observe(changed, Instant(3_500_000_000)),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn kernel_identity() {
        let a = FileId { dev: 1, ino: 2 };
        assert_eq!(check_kernel_lock(a, Ok(a)), KernelLockCheck::Held);
        assert_eq!(
            check_kernel_lock(a, Ok(FileId { dev: 1, ino: 3 })),
            KernelLockCheck::Retry
        );
        assert_eq!(
            check_kernel_lock(a, Err(Errno::NOENT)),
            KernelLockCheck::Retry
        );
        assert_eq!(
            check_kernel_lock(a, Err(Errno::STALE)),
            KernelLockCheck::Retry
        );
        assert_eq!(
            check_kernel_lock(a, Err(Errno::ACCES)),
            KernelLockCheck::Fail(Errno::ACCES)
        );
        assert_eq!(with_lock_ex_mode(0o002), 0o660);
        assert_eq!(with_lock_ex_mode(0o022), 0o600);
    }

    #[test]
    fn nspid_and_elsewhere() {
        assert_eq!(parse_nspid(b"Name:\tx\nNSpid:\t900\t1\n"), NsPid::Pid(1));
        assert_eq!(parse_nspid(b"Name:\tx\n"), NsPid::Missing);
        assert_eq!(parse_nspid(b"NSpid:\n"), NsPid::Unparsable);
        let d = |s: &'static str| Decimal::parse(s.as_bytes()).unwrap();
        assert!(!elsewhere_scan_applies(None, 0));
        assert!(elsewhere_scan_applies(Some(d("5")), 9));
        let pid = Pid::new(1).unwrap();
        assert!(task_is_owner(
            900,
            pid,
            true,
            Some(StartToken::from_u64(5)),
            d("5"),
            || NsPid::Pid(1)
        ));
        // Another start, or the owner's own PID: its status is not read.
        let unread = || -> NsPid { panic!("the status of a task ruled out was read") };
        assert!(!task_is_owner(
            900,
            pid,
            true,
            Some(StartToken::from_u64(6)),
            d("5"),
            unread
        ));
        assert!(!task_is_owner(900, pid, true, None, d("5"), unread));
        assert!(task_is_owner(900, pid, false, None, d("5"), || NsPid::Pid(
            1
        )));
        assert!(!task_is_owner(
            900,
            pid,
            false,
            None,
            d("5"),
            || NsPid::Pid(2)
        ));
        assert!(task_is_owner(900, pid, false, None, d("5"), || {
            NsPid::Unparsable
        }));
        assert!(!task_is_owner(900, pid, false, None, d("5"), || {
            NsPid::Missing
        }));
        assert!(!task_is_owner(1, pid, false, None, d("5"), unread));
    }

    #[test]
    fn a_scan_answers_for_records_started_before_its_tick_or_within_it() {
        let d = |s: &'static str| Decimal::parse(s.as_bytes()).unwrap();
        assert_eq!(scanned(1_000, d("997")), Scanned::Answers);
        assert_eq!(scanned(1_000, d("999")), Scanned::Answers);
        assert_eq!(scanned(1_000, d("1000")), Scanned::AnswersButNewTasks);
        assert_eq!(scanned(1_000, d("1001")), Scanned::Stale);
        assert_eq!(scanned(0, d("0")), Scanned::AnswersButNewTasks);
        // A Linux token: the boot id above the 64 bits of ticks.
        let mut buf = [0u8; crate::start::START_DIGITS_MAX];
        let token = StartToken::linux(0xabc, 997).to_decimal(&mut buf);
        assert_eq!(scanned(1_000, token), Scanned::Answers);
        let mut buf = [0u8; crate::start::START_DIGITS_MAX];
        let token = StartToken::linux(0xabc, 5_000).to_decimal(&mut buf);
        assert_eq!(scanned(1_000, token), Scanned::Stale);
        let huge = d("10000000000000000000000000000000000000000000000000000000000");
        assert_eq!(scanned(u64::MAX, huge), Scanned::Stale, "past 192 bits");
    }

    #[test]
    fn lifetime_and_lease() {
        let t = |sec| FileTime { sec, nsec: 0 };
        assert!(lifetime_expired(t(10), t(5), Duration::from_secs(5)));
        assert!(!lifetime_expired(t(10), t(6), Duration::from_secs(5)));
        assert!(
            !lifetime_expired(t(10), t(20), Duration::ZERO),
            "an mtime in the future is not expired"
        );
        assert!(lease_expired(Duration::from_millis(1500), 1.5));
        assert!(!lease_expired(Duration::from_millis(1499), 1.5));
    }
}
