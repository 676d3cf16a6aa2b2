//! The kernel-lock driver's tests, over a fake lock file and clock.

use super::*;
use crate::decide::{FileTime, Instant};
use crate::wait::Deadline;

/// The `flock` fallback's opens (PROTOCOL 7.1, 7.17).
mod fallback;

/// A lock file held by someone else for `busy_for`, on a clock that
/// moves only when the driver sleeps.
struct Fake {
    now: Duration,
    busy_for: Duration,
    /// What the lock call answers once the lock is free.
    free: Result<(), Errno>,
    /// What an exclusive open answers (`EEXIST`: the file is there).
    exclusive_open: Result<(), Errno>,
    /// What an open of the existing file answers.
    existing_open: Result<(), Errno>,
    /// How many exclusive opens find the file made by a peer since the
    /// plain open found none.
    appeared: u32,
    /// Every plain open finds the file missing, and every exclusive open
    /// finds it there: a dangling symlink.
    dangling: bool,
    /// How many lock calls answer `EINTR` first.
    interrupts: u32,
    /// How many opens answer first, and with what (`EAGAIN`: a peer
    /// deleting the file, on Windows).
    refused_opens: (u32, Errno),
    /// Calls so far; an attempt that never ends fails the test.
    calls: u32,
    pauses: [Duration; 16],
    slept: usize,
    attempts: u32,
    path: FileId,
    /// How many `stat`s of the path find another file there first (a
    /// holder replaced the file we locked), and then what the rest
    /// answer.
    replaced: u32,
    stat_error: Option<Errno>,
    /// Which step answers `ESTALE` first, and how many times.
    stale: Option<(Step, u32)>,
    /// Hand-offs to removed files: at each of so many lock calls, the
    /// file was removed and a new one is at the path, and the step named
    /// (the lock itself, or the `fstat` after it) answers `ESTALE`.
    handoffs: Option<(Step, u32)>,
    /// The `fstat` to come answers `ESTALE` once.
    fstat_stale: bool,
    /// How many `stat`s of the path find nothing there first (a holder
    /// removed the file we locked, and nobody made a new one yet).
    removed: u32,
    /// A client that caches names (NFS): what its server names at the
    /// path (`None`: nothing), while `path` is the client's cached answer,
    /// made current by an exclusive create.
    server: Option<Option<FileId>>,
    /// What an exclusive create answers instead, where names are cached.
    create_error: Option<Errno>,
    /// The client holds a delegation of the file its cache names at the
    /// path (`path`): an exclusive create answers `EEXIST` from that cache
    /// without asking the server, until a listing of the directory shows
    /// the client the server's name (NFSv4, a second superblock of the
    /// client that removed the file).
    delegated: bool,
    /// The adapter reads the directory's listing where a delegation may
    /// answer the name, and what its reading answers instead.
    listing: bool,
    listing_error: Option<Errno>,
    /// What every listing answers instead of the server's name (a
    /// symlink, or an export that lists the name in another case).
    listing_answer: Option<Listed>,
    listings: u32,
    closes: u32,
}

impl Fake {
    fn new(busy_for: Duration) -> Self {
        Fake {
            now: Duration::ZERO,
            busy_for,
            free: Ok(()),
            exclusive_open: Ok(()),
            existing_open: Ok(()),
            appeared: 0,
            dangling: false,
            interrupts: 0,
            refused_opens: (0, Errno::AGAIN),
            calls: 0,
            pauses: [Duration::ZERO; 16],
            slept: 0,
            attempts: 0,
            path: ID,
            replaced: 0,
            stat_error: None,
            stale: None,
            handoffs: None,
            fstat_stale: false,
            removed: 0,
            server: None,
            create_error: None,
            delegated: false,
            listing: false,
            listing_error: None,
            listing_answer: None,
            listings: 0,
            closes: 0,
        }
    }
}

const ID: FileId = FileId { dev: 1, ino: 2 };

impl Fake {
    fn call(&mut self) {
        self.calls += 1;
        assert!(self.calls < 1000, "the attempt never ends");
    }

    /// Whether `step` answers `ESTALE` this time.
    fn stale(&mut self, step: Step) -> Result<(), Errno> {
        match &mut self.stale {
            Some((at, n)) if *at == step && *n > 0 => {
                *n -= 1;
                Err(Errno::STALE)
            }
            _ => Ok(()),
        }
    }
}

impl KernelOs for Fake {
    type File = FileId;
    fn open(&mut self, exclusive: bool) -> Result<FileId, Errno> {
        self.call();
        self.attempts += 1;
        if self.refused_opens.0 > 0 {
            self.refused_opens.0 -= 1;
            return Err(self.refused_opens.1);
        }
        self.stale(Step::Open)?;
        if let Some(server) = &mut self.server {
            if let (true, Some(e)) = (exclusive, self.create_error) {
                return Err(e);
            }
            // An exclusive create asks the server; a plain open takes the
            // cached name.
            return match (exclusive, *server) {
                (false, _) => Ok(self.path),
                (true, _) if self.delegated => Err(Errno::EXIST),
                (true, Some(there)) => {
                    self.path = there;
                    Err(Errno::EXIST)
                }
                (true, None) => {
                    let made = FileId { dev: 1, ino: 9 };
                    *server = Some(made);
                    self.path = made;
                    Ok(made)
                }
            };
        }
        if exclusive && self.appeared > 0 {
            // A peer made the file since the plain open found none, and
            // the next plain open finds it.
            self.appeared -= 1;
            self.existing_open = Ok(());
            return Err(Errno::EXIST);
        }
        match exclusive {
            true => self.exclusive_open.map(|()| ID),
            false => Ok(ID),
        }
    }
    fn open_existing(&mut self) -> Result<FileId, Errno> {
        self.call();
        self.attempts += 1;
        if self.dangling {
            return Err(Errno::NOENT);
        }
        self.existing_open.map(|()| ID)
    }
    fn lock(&mut self, _file: &FileId, _wait: bool) -> Result<(), Errno> {
        self.call();
        if self.interrupts > 0 {
            self.interrupts -= 1;
            return Err(Errno::INTR);
        }
        self.stale(Step::Lock)?;
        if let Some((at, left)) = &mut self.handoffs {
            if *left > 0 {
                *left -= 1;
                // The last hand-off is to the file the opens find.
                self.path = match *left {
                    0 => ID,
                    n => FileId {
                        dev: 1,
                        ino: 100 + u64::from(n),
                    },
                };
                match at {
                    Step::Lock => return Err(Errno::STALE),
                    _ => self.fstat_stale = true,
                }
            }
        }
        match self.now < self.busy_for {
            true => Err(Errno::AGAIN),
            false => self.free,
        }
    }
    fn fstat(&mut self, file: &FileId) -> Result<FileId, Errno> {
        self.stale(Step::Fstat)?;
        if core::mem::take(&mut self.fstat_stale) {
            return Err(Errno::STALE);
        }
        Ok(*file)
    }
    fn stat(&mut self) -> Result<FileId, Errno> {
        self.stale(Step::Stat)?;
        if self.removed > 0 {
            self.removed -= 1;
            return Err(Errno::NOENT);
        }
        if self.replaced > 0 {
            self.replaced -= 1;
            return Ok(FileId { dev: 1, ino: 3 });
        }
        self.stat_error.map_or(Ok(self.path), Err)
    }
    fn close(&mut self, _file: FileId) {
        self.closes += 1;
    }
    fn names_cached(&self) -> bool {
        self.server.is_some()
    }
    fn names_delegated(&self) -> bool {
        self.listing
    }
    fn listed(&mut self) -> Result<Listed, Errno> {
        self.call();
        self.listings += 1;
        if let Some(e) = self.listing_error {
            return Err(e);
        }
        if let Some(answer) = self.listing_answer {
            return Ok(answer);
        }
        let there = self.server.expect("a listing of a server's directory");
        // Reading the directory shows the client the server's names: its
        // cached entry for a file listed otherwise is dropped.
        self.delegated = false;
        if let Some(there) = there {
            self.path = there;
        }
        Ok(there.map_or(Listed::Absent, |id| Listed::Entry(id.ino)))
    }
}

impl Clock for Fake {
    fn now(&mut self) -> Instant {
        Instant(self.now.as_nanos() as u64)
    }
    fn wall(&mut self) -> FileTime {
        FileTime::default()
    }
    fn sleep(&mut self, duration: Duration) {
        self.pauses[self.slept] = duration;
        self.slept += 1;
        self.now += duration;
    }
}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_timed_wait_backs_off_from_1_to_25_ms_and_gives_up_at_the_deadline() {
    let mut os = Fake::new(ms(1000));
    let out = acquire(&mut os, false, false, &mut Backoff::new(ms(100)));
    assert!(matches!(out, Ok(Outcome::Busy(e)) if e == Errno::AGAIN));
    // 1+2+4+8+16+25+25 = 81, then the 19 ms left.
    let expected = [1, 2, 4, 8, 16, 25, 25, 19].map(ms);
    assert_eq!(&os.pauses[..os.slept], &expected);
    assert_eq!(os.attempts, 9, "one attempt after the last pause");
}

#[test]
fn a_stale_handle_is_a_file_gone_away_and_the_attempt_opens_it_anew() {
    for step in [Step::Open, Step::Lock, Step::Fstat, Step::Stat] {
        // A holder on another host removed the file: each step may be
        // the first to learn it, and the attempt starts again.
        let mut os = Fake::new(Duration::ZERO);
        os.stale = Some((step, 2));
        let out = acquire(&mut os, true, false, &mut Backoff::forever());
        assert!(
            matches!(out, Ok(Outcome::Held(id, _)) if id == ID),
            "{step:?}"
        );
        // The look at the path after a stale answer meets one of a stale
        // path's two answers itself.
        let opened = if step == Step::Stat { 2 } else { 3 };
        assert_eq!(os.attempts, opened, "{step:?}: opened anew after each");
        let closed = if step == Step::Open { 0 } else { opened - 1 };
        assert_eq!(os.closes, closed, "{step:?}: every stale file closed");
        // A handle that stays stale (the directory removed on the
        // server) is an error after a few, not a spin.
        let mut os = Fake::new(Duration::ZERO);
        os.stale = Some((step, u32::MAX));
        let out = acquire(&mut os, true, false, &mut Backoff::forever());
        assert!(
            matches!(out, Err((s, e)) if s == step && e == Errno::STALE),
            "{step:?}: {out:?}"
        );
        assert_eq!(os.attempts, STALE_AT_MOST + 1, "{step:?}");
        let closed = if step == Step::Open { 0 } else { os.attempts };
        assert_eq!(os.closes, closed, "{step:?}: nothing left open");
    }
}

#[test]
fn a_lock_on_a_file_removed_since_with_nothing_at_the_path_is_taken_again() {
    let mut os = Fake::new(Duration::ZERO);
    os.removed = 2;
    let out = acquire(&mut os, true, false, &mut Backoff::forever());
    assert!(
        matches!(out, Ok(Outcome::Held(id, _)) if id == ID),
        "{out:?}"
    );
    assert_eq!((os.attempts, os.closes), (3, 2), "each orphan closed");
}

#[test]
fn stale_handles_of_one_removed_file_after_another_never_fail_a_wait() {
    // A wait handed one removed file after another (delete on release on
    // another host), learning it at the lock or at the fstat: each time a
    // new file is at the path, so the stale answers are not "in a row".
    for at in [Step::Lock, Step::Fstat] {
        let mut os = Fake::new(Duration::ZERO);
        os.handoffs = Some((at, 3 * STALE_AT_MOST));
        let out = acquire(&mut os, true, false, &mut Backoff::forever());
        assert!(
            matches!(out, Ok(Outcome::Held(id, _)) if id == ID),
            "{at:?}: {out:?}"
        );
        assert_eq!(os.attempts, 3 * STALE_AT_MOST + 1, "{at:?}");
    }
}

#[test]
fn where_names_are_cached_a_create_the_client_could_not_ask_about_fails_the_check() {
    // Out of descriptors, the client never asked the server: its cached
    // answer must not decide.
    let mut os = Fake::new(Duration::ZERO);
    os.server = Some(Some(FileId { dev: 1, ino: 5 }));
    os.refused_opens = (0, Errno::AGAIN);
    os.create_error = Some(Errno::from_raw(24));
    let out = acquire(&mut os, true, false, &mut Backoff::forever());
    assert!(
        matches!(out, Err((Step::Stat, e)) if e.raw() == 24),
        "{out:?}"
    );
    assert_eq!(check_remove(&mut os, &ID), Err(Errno::from_raw(24)));
    // A directory this process may not write to: the server was asked,
    // and the stat decides.
    os.create_error = Some(Errno::ACCES);
    os.path = ID;
    os.server = Some(Some(ID));
    let out = acquire(&mut os, true, false, &mut Backoff::forever());
    assert!(
        matches!(out, Ok(Outcome::Held(id, _)) if id == ID),
        "{out:?}"
    );
}

#[test]
fn where_names_are_cached_the_check_asks_the_server_and_takes_its_file() {
    // The client's cache still names the file we opened and locked; a
    // holder on another host removed it and a peer made a new one.
    let replaced = FileId { dev: 1, ino: 5 };
    let mut os = Fake::new(Duration::ZERO);
    os.server = Some(Some(replaced));
    let out = acquire(&mut os, true, false, &mut Backoff::forever());
    assert!(
        matches!(out, Ok(Outcome::Held(id, _)) if id == replaced),
        "the server's file: {out:?}"
    );
    assert_eq!(os.closes, 1, "the orphan closed");
    // The same cache answered by `stat` alone: the orphan is held (what
    // the check asks the server for).
    let mut os = Fake::new(Duration::ZERO);
    let out = acquire(&mut os, true, false, &mut Backoff::forever());
    assert!(matches!(out, Ok(Outcome::Held(id, _)) if id == ID));
}

#[test]
fn where_the_server_has_no_such_name_the_check_makes_the_file_a_waiter_makes() {
    let mut os = Fake::new(Duration::ZERO);
    os.server = Some(None);
    let out = acquire(&mut os, true, false, &mut Backoff::forever());
    let made = FileId { dev: 1, ino: 9 };
    assert!(
        matches!(out, Ok(Outcome::Held(id, _)) if id == made),
        "{out:?}"
    );
    assert_eq!(os.closes, 2, "the orphan and the check's own descriptor");
}

#[test]
fn a_holder_whose_cache_names_its_removed_file_does_not_remove_the_new_one() {
    let mut os = Fake::new(Duration::ZERO);
    os.server = Some(Some(FileId { dev: 1, ino: 5 }));
    assert_eq!(check_remove(&mut os, &ID), Err(Errno::NOENT));
    os.server = Some(Some(ID));
    assert_eq!(check_remove(&mut os, &ID), Ok(()));
}

#[test]
fn where_a_delegation_answers_the_name_the_listing_has_the_last_word() {
    // The client's cache names the file we locked, which the same client
    // removed through another mount, and its delegation of that file
    // answers the exclusive create: the server has a new file there.
    let replaced = FileId { dev: 1, ino: 5 };
    let orphaned = || {
        let mut os = Fake::new(Duration::ZERO);
        os.server = Some(Some(replaced));
        os.delegated = true;
        os
    };
    // Without the listing, the orphan is held: the defect.
    let mut os = orphaned();
    let out = acquire(&mut os, true, false, &mut Backoff::forever());
    assert!(matches!(out, Ok(Outcome::Held(id, _)) if id == ID));
    // With it, the orphan is let go, and the server's file locked.
    let mut os = orphaned();
    os.listing = true;
    let out = acquire(&mut os, true, false, &mut Backoff::forever());
    assert!(
        matches!(out, Ok(Outcome::Held(id, _)) if id == replaced),
        "the server's file: {out:?}"
    );
    assert_eq!(os.closes, 1, "the orphan closed");
    assert_eq!(os.listings, 2, "one listing per check");
    // A holder of the orphan does not remove the new file.
    let mut os = orphaned();
    os.listing = true;
    assert_eq!(check_remove(&mut os, &ID), Err(Errno::NOENT));
    // Nothing at the name on the server: nothing is held.
    let mut os = orphaned();
    os.listing = true;
    os.server = Some(None);
    assert_eq!(named(&mut os), Err(Errno::NOENT));
    // The file we locked is the one listed: held, and removable.
    let mut os = orphaned();
    os.listing = true;
    os.server = Some(Some(ID));
    assert_eq!(check_remove(&mut os, &ID), Ok(()));
}

#[test]
fn a_listing_that_fails_fails_the_check_and_a_followed_symlink_keeps_the_stat() {
    let mut os = Fake::new(Duration::ZERO);
    os.server = Some(Some(ID));
    os.delegated = true;
    os.listing = true;
    os.listing_error = Some(Errno::ACCES);
    let out = acquire(&mut os, true, false, &mut Backoff::forever());
    assert!(
        matches!(out, Err((Step::Stat, e)) if e == Errno::ACCES),
        "{out:?}"
    );
    assert_eq!(os.closes, 1, "the locked file closed");
    assert_eq!(check_remove(&mut os, &ID), Err(Errno::ACCES));
    // The stat's own error comes first: no listing is read.
    let mut os = Fake::new(Duration::ZERO);
    os.server = Some(Some(ID));
    os.listing = true;
    os.stat_error = Some(Errno::from_raw(24));
    assert_eq!(named(&mut os), Err(Errno::from_raw(24)));
    assert_eq!(os.listings, 0);
    // A symlink at the name: the listing cannot show its target.
    let mut os = Fake::new(Duration::ZERO);
    os.server = Some(Some(ID));
    os.listing = true;
    os.listing_answer = Some(Listed::Link);
    assert_eq!(named(&mut os), Ok(ID));
}

#[test]
fn an_adapter_that_says_nothing_of_delegations_reads_no_listing() {
    let mut os = Plain(Fake::new(Duration::ZERO));
    assert_eq!(os.listed(), Err(Errno::NOSYS));
    assert!(!os.names_delegated());
}

#[test]
fn a_timed_wait_takes_the_lock_once_it_is_free() {
    let mut os = Fake::new(ms(10));
    let out = acquire(&mut os, false, false, &mut Backoff::new(ms(100)));
    assert!(matches!(out, Ok(Outcome::Held(id, _)) if id == ID));
    assert_eq!(&os.pauses[..os.slept], &[1, 2, 4, 8].map(ms));
}

#[test]
fn one_attempt_only_never_pauses_even_with_a_zero_deadline() {
    let mut os = Fake::new(ms(10));
    let out = acquire(&mut os, false, false, &mut Deadline::once());
    assert!(matches!(out, Ok(Outcome::Busy(_))));
    let out = acquire(&mut os, false, false, &mut Backoff::new(Duration::ZERO));
    assert!(matches!(out, Ok(Outcome::Busy(_))));
    assert_eq!((os.attempts, os.slept), (2, 0));
}

#[test]
fn a_wait_in_the_kernel_answered_busy_keeps_waiting() {
    let mut os = Fake::new(ms(100));
    let out = acquire(&mut os, true, false, &mut Backoff::forever());
    assert!(matches!(out, Ok(Outcome::Held(id, _)) if id == ID));
    assert!(os.now >= ms(100), "it waited until the holder let go");
}

#[test]
fn an_open_refused_for_now_is_contention_and_waited_out() {
    let mut os = Fake::new(Duration::ZERO);
    os.refused_opens = (3, Errno::AGAIN);
    let out = acquire(&mut os, false, false, &mut Deadline::once());
    assert!(matches!(out, Ok(Outcome::Busy(e)) if e == Errno::AGAIN));
    let out = acquire(&mut os, false, false, &mut Backoff::new(ms(100)));
    assert!(matches!(out, Ok(Outcome::Held(id, _)) if id == ID));
    assert_eq!(os.attempts, 4, "two refused, then held");
}

#[test]
fn any_other_open_error_is_reported() {
    let mut os = Fake::new(Duration::ZERO);
    os.refused_opens = (1, Errno::ACCES);
    let out = acquire(&mut os, false, false, &mut Backoff::new(ms(100)));
    assert!(matches!(out, Err((Step::Open, e)) if e == Errno::ACCES));
    assert_eq!(os.attempts, 1, "not tried again");
}

#[test]
fn an_interrupted_lock_call_is_made_again() {
    let mut os = Fake::new(Duration::ZERO);
    os.interrupts = 2;
    let out = attempt(&mut os, true, false);
    assert!(matches!(out, Ok(Outcome::Held(id, _)) if id == ID));
    assert_eq!(
        (os.interrupts, os.attempts),
        (0, 1),
        "on the same open file"
    );
}

#[test]
fn a_lock_on_a_file_a_holder_replaced_is_taken_again_on_the_new_one() {
    let mut os = Fake::new(Duration::ZERO);
    os.replaced = 2;
    assert!(matches!(
        attempt(&mut os, true, false),
        Ok(Outcome::Held(ID, ID))
    ));
    assert_eq!(os.attempts, 3, "two orphans, then the file at the path");
}

#[test]
fn a_listing_that_names_another_file_for_good_fails_instead_of_looping() {
    // The path opens and `stat`s one file, and the listing shows another
    // inode number under the name for good (a file mounted over the name:
    // the directory lists the file beneath).
    let mut os = Fake::new(Duration::ZERO);
    os.server = Some(Some(ID));
    os.listing = true;
    os.listing_answer = Some(Listed::Entry(ID.ino + 7));
    let out = attempt(&mut os, true, false);
    assert!(
        matches!(out, Err((Step::Named, e)) if e == Errno::NOENT),
        "{out:?}"
    );
    assert_eq!(os.listings, UNNAMED_AT_MOST + 1);
}

#[test]
fn a_busy_path_whose_every_file_has_one_inode_number_is_taken_in_the_end() {
    // Holders remove file after file under the waiter, and each new file
    // gets the freed inode number again (ext4 does): every start again is
    // a peer's removal, which is progress, never the listing's
    // disagreement that the bound is for.
    let starts = 3 * (UNNAMED_AT_MOST + 1);
    for (removed, replaced) in [(starts, 0), (0, starts), (starts, starts)] {
        let mut os = Fake::new(Duration::ZERO);
        os.removed = removed;
        os.replaced = replaced;
        let out = attempt(&mut os, true, false);
        assert!(matches!(out, Ok(Outcome::Held(ID, ID))), "{out:?}");
        assert_eq!(os.attempts, removed + replaced + 1);
        assert_eq!(os.closes, removed + replaced, "every orphan closed");
    }
}

#[test]
fn a_failed_stat_of_the_path_is_reported_never_held() {
    let mut os = Fake::new(Duration::ZERO);
    os.stat_error = Some(Errno::IO);
    assert!(matches!(
        attempt(&mut os, true, false),
        Err((Step::Stat, e)) if e == Errno::IO
    ));
}

#[test]
fn removal_needs_the_path_to_name_the_locked_file() {
    let mut os = Fake::new(Duration::ZERO);
    assert_eq!(check_remove(&mut os, &ID), Ok(()));
    os.path = FileId { dev: 1, ino: 3 };
    assert_eq!(check_remove(&mut os, &ID), Err(Errno::NOENT));
}

#[test]
fn a_kernel_holder_is_alive_unless_the_process_named_is_gone() {
    let alive = Standing::Held(HeldBecause::Alive);
    let cannot_tell = Standing::Held(HeldBecause::CannotTell);
    assert_eq!(holder_standing(42, |_| Liveness::Alive), alive);
    assert_eq!(holder_standing(42, |_| Liveness::Dead), cannot_tell);
    assert_eq!(
        holder_standing(42, |_| Liveness::Unknown(Errno::INVAL)),
        cannot_tell
    );
    // The probe is asked of the PID named, and of none below 1.
    let mut asked = None;
    let _ = holder_standing(42, |pid| {
        asked = Some(pid.get());
        Liveness::Dead
    });
    assert_eq!(asked, Some(42));
    for unnamed in [0, -1, i32::MIN] {
        let standing = holder_standing(unnamed, |_| panic!("probed PID {unnamed}"));
        assert_eq!(standing, alive, "PID {unnamed}");
    }
}

#[test]
fn the_backoff_of_a_wait_tries_once_forever_or_until_the_time_left() {
    let ms = Duration::from_millis;
    let mut once = Backoff::of(Wait::No);
    assert_eq!(once.busy(&Errno::AGAIN, ms(0)), None, "one attempt");
    let mut forever = Backoff::of(Wait::Forever);
    assert_eq!(forever, Backoff::forever());
    assert_eq!(
        forever.busy(&Errno::AGAIN, ms(1 << 40)),
        Some(Backoff::FIRST)
    );
    let mut until = Backoff::of(Wait::Until(ms(30)));
    assert_eq!(until, Backoff::new(ms(30)));
    assert_eq!(until.busy(&Errno::AGAIN, ms(29)), Some(ms(1)));
    assert_eq!(until.busy(&Errno::AGAIN, ms(30)), None);
}

/// An adapter that says nothing of a cache of names: the default.
struct Plain(Fake);

impl KernelOs for Plain {
    type File = FileId;
    fn open(&mut self, exclusive: bool) -> Result<FileId, Errno> {
        self.0.open(exclusive)
    }
    fn open_existing(&mut self) -> Result<FileId, Errno> {
        self.0.open_existing()
    }
    fn lock(&mut self, file: &FileId, wait: bool) -> Result<(), Errno> {
        self.0.lock(file, wait)
    }
    fn fstat(&mut self, file: &FileId) -> Result<FileId, Errno> {
        self.0.fstat(file)
    }
    fn stat(&mut self) -> Result<FileId, Errno> {
        self.0.stat()
    }
    fn close(&mut self, file: FileId) {
        self.0.close(file)
    }
}

#[test]
fn an_adapter_that_says_nothing_of_cached_names_checks_by_stat_alone() {
    let mut os = Plain(Fake::new(Duration::ZERO));
    let out = attempt(&mut os, true, false);
    assert!(
        matches!(out, Ok(Outcome::Held(id, _)) if id == ID),
        "{out:?}"
    );
    assert_eq!(os.0.attempts, 1, "one open, no exclusive create");
    assert_eq!(check_remove(&mut os, &ID), Ok(()));
    assert_eq!(os.0.attempts, 1, "the removal's check makes none either");
}

#[test]
fn a_check_that_never_names_the_opened_file_fails_instead_of_looping() {
    // The path opens and `stat`s one file, and the listing never shows
    // the name (an export that lists it in another case): without a
    // bound the attempt would start again for ever, on a free lock.
    let mut os = Fake::new(Duration::ZERO);
    os.server = Some(Some(ID));
    os.listing = true;
    os.listing_answer = Some(Listed::Absent);
    let out = attempt(&mut os, true, false);
    assert!(
        matches!(out, Err((Step::Named, e)) if e == Errno::NOENT),
        "{out:?}"
    );
    let starts = UNNAMED_AT_MOST + 1;
    assert_eq!(os.closes, starts, "every locked file closed");
    assert_eq!(os.listings, starts);
}
