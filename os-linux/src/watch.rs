//! Waking a soft-lock waiter when its lock path changes, instead of at its
//! next poll: inotify on the marker at the lock path (its last link going,
//! which a release's unlink does; its being moved, which an exchange does),
//! and an eventfd "bell" that another thread of the process
//! rings when it releases or hands over a lock, which leaves no trace in
//! the directory. The marker's inode is watched, not the directory, so
//! that files coming and going beside it wake nobody. An event is a hint
//! to look again, never a verdict: the protocol decides, and the caller's
//! poll stays as the backstop for what raises no event here (a holder
//! killed in place, a release on another host of a network filesystem, a
//! lease running out).

// `stat` field types differ between targets (and between rustix's raw and
// libc backends); the casts widen where needed and are no-ops elsewhere.
#![allow(clippy::unnecessary_cast)]

use crate::fork::{self, Owner};
use rustix::event::{eventfd, poll, EventfdFlags, PollFd, PollFlags, Timespec};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;
use std::ffi::CString;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A watch on one lock path, and this waiter's bell.
pub struct Watch {
    /// Taken only by the drop.
    inotify: ManuallyDrop<OwnedFd>,
    /// The watch on the marker now at the lock path, once armed, and that
    /// marker's (device, inode).
    wd: Option<i32>,
    watched: Option<(u64, u64)>,
    /// The last drain looked at the lock path for an attribute change and
    /// found the marker in place.
    looked: bool,
    bell: Bell,
    /// The lock's name in its directory.
    name: CString,
    /// The lock path by the directory's path, for a kernel without `/proc`.
    by_path: Option<CString>,
    /// The process the marker names, watched for its exit: its PID and
    /// pidfd ([`Watch::watch_exit`]).
    exit: Option<(i32, OwnedFd)>,
    /// The last process whose exit a drain saw, and how many times since
    /// a waiter asked to watch it again (it was still judged alive: a
    /// zombie its parent has not reaped).
    ended: Option<(i32, u32)>,
}

/// How many times a waiter looks again, [`ZOMBIE_PAUSE`] apart, at a
/// holder whose exit was seen but that is still judged alive (a zombie,
/// until its parent reaps it), before it goes back to its poll: 200 ms.
const ZOMBIE_LOOKS: u32 = 2000;

/// The pause between those looks.
pub const ZOMBIE_PAUSE: Duration = Duration::from_micros(100);

/// What [`Watch::watch_exit`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitWatch {
    /// The wait ends when the process exits.
    Watching,
    /// The process has exited already, and is still judged alive: look
    /// again after [`ZOMBIE_PAUSE`] (its parent reaps it meanwhile).
    Ended,
    /// It cannot be watched: the wait polls.
    Unwatched,
}

/// What another thread rings to wake a [`Watch`]'s waiter.
#[derive(Clone)]
pub struct Bell {
    /// The process the eventfd belongs to: a forked child inherits its
    /// parent's bells, whose descriptor numbers it may since have closed
    /// and reused for files of its own.
    owner: Owner,
    fd: Arc<OwnedFd>,
}

impl Bell {
    /// Wakes the waiter (now, or at its next wait); a bell of another
    /// process (a forked child's inherited list) is left alone.
    pub fn ring(&self) {
        if !self.is_this_process() {
            return;
        }
        // EAGAIN only when the counter is about to overflow: it is rung
        // already.
        let _ = rustix::io::write(&*self.fd, &1u64.to_ne_bytes());
    }

    /// Whether `other` is this very bell.
    pub fn is(&self, other: &Bell) -> bool {
        Arc::ptr_eq(&self.fd, &other.fd)
    }

    /// Whether this process made it (not a forked child's inheritance).
    pub fn is_this_process(&self) -> bool {
        self.owner == fork::owner()
    }
}

/// An inotify instance a finished wait left, its watch removed, and the
/// process it belongs to (a forked child shares its parent's instances,
/// and with them their events).
struct Spare {
    owner: Owner,
    inotify: OwnedFd,
}

/// Instances kept for the next waits. Closing an inotify instance waits
/// for the kernel's grace period (milliseconds, more under load), which a
/// waiter that just got its lock would pay before returning; removing a
/// watch does not. At most [`SPARES_KEPT`]: each is a descriptor, and
/// counts against the user's limit (`fs.inotify.max_user_instances`, 128
/// by default). Past it, an instance is closed on a thread of its own.
static SPARES: Mutex<Vec<Spare>> = Mutex::new(Vec::new());

/// How many spare instances a process keeps.
const SPARES_KEPT: usize = 2;

/// The spare instances' mutex held, for a fork handler: a thread that
/// forks while another holds it would leave it locked in the child.
pub fn lock_for_fork() -> Box<dyn std::any::Any> {
    Box::new(SPARES.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Closes the spare instances, here and now (when descriptors run short,
/// they must be free before the caller's next call). Those of another
/// process are forgotten, not closed: their numbers may be this process's
/// own files by now.
pub fn close_spares() {
    let mut spares = SPARES.lock().unwrap_or_else(|p| p.into_inner());
    own_spares(&mut spares, fork::owner());
    let mine = std::mem::take(&mut *spares);
    drop(spares);
    for s in mine {
        drop(s.inotify);
    }
}

/// Keeps only the spares of this process (`me`) in `spares`: those
/// inherited through a fork are forgotten (see [`close_spares`]).
fn own_spares(spares: &mut Vec<Spare>, me: Owner) {
    let (mine, others): (Vec<Spare>, Vec<Spare>) = spares.drain(..).partition(|s| s.owner == me);
    for s in others {
        std::mem::forget(s.inotify);
    }
    *spares = mine;
}

/// A spare instance of this process, if any; another process's are
/// forgotten (see [`close_spares`]).
fn spare() -> Option<OwnedFd> {
    let mut spares = SPARES.lock().unwrap_or_else(|p| p.into_inner());
    own_spares(&mut spares, fork::owner());
    spares.pop().map(|s| s.inotify)
}

/// Closes an inotify instance without making the caller wait for it: on a
/// thread of its own, or here if no thread can be started (`spawn` drops the
/// closure it could not run, and the instance with it).
fn close_aside(inotify: OwnedFd) {
    let _ = std::thread::Builder::new()
        .name("swaplock-close".into())
        .spawn(move || drop(inotify));
}

/// What [`Watch::arm`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Armed {
    /// The marker at the lock path is watched.
    Watching,
    /// Nothing is at the lock path now: look again at once.
    Gone,
    /// The kernel refused the watch: only the bell and the poll wake.
    Unwatched,
}

/// The events that free the lock path for sure, on the marker's own inode:
/// its being moved (an exchange, a rename), its last link gone, the watch
/// ending; and the queue overflowing.
fn frees_the_lock(flags: ReadFlags) -> bool {
    flags.intersects(
        ReadFlags::MOVE_SELF
            | ReadFlags::DELETE_SELF
            | ReadFlags::IGNORED
            | ReadFlags::QUEUE_OVERFLOW,
    )
}

/// An unlink changes the marker's link count, which inotify reports as a
/// change of its attributes: the only event an unlink raises while the
/// marker has another link, or another process holds it open (its last
/// link's `DELETE_SELF` waits for that). Its times or mode changing (a
/// lease's heartbeat, anyone's `touch` or `chmod`) raise the same event, so
/// it only leads to a look at the lock path.
fn may_free_the_lock(flags: ReadFlags) -> bool {
    flags.contains(ReadFlags::ATTRIB)
}

impl Watch {
    /// A watch for `name` in the directory at `dir_path`, armed by
    /// [`Watch::arm`] with the directory open. Errors are the kernel's: no
    /// inotify (`ENOSYS`, a seccomp filter), no instances or descriptors
    /// left (`EMFILE`, `ENFILE`); the caller then polls.
    pub fn new(dir_path: &std::path::Path, name: &[u8]) -> std::io::Result<Self> {
        let inotify = match spare() {
            Some(spare) => spare,
            None => inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?,
        };
        let bell = match eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK) {
            Ok(fd) => fd,
            Err(e) => {
                // Descriptors are short: this one must be free before the
                // caller's next call, not kept.
                drop(inotify);
                return Err(e.into());
            }
        };
        let by_path = {
            use std::os::unix::ffi::OsStrExt;
            let mut p = dir_path.as_os_str().as_bytes().to_vec();
            if p.is_empty() {
                p.push(b'.');
            }
            p.push(b'/');
            p.extend_from_slice(name);
            CString::new(p).ok()
        };
        let name = CString::new(name)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        let mut watch = Watch {
            inotify: ManuallyDrop::new(inotify),
            wd: None,
            watched: None,
            looked: false,
            bell: Bell {
                owner: fork::owner(),
                fd: Arc::new(bell),
            },
            name,
            by_path,
            exit: None,
            ended: None,
        };
        // What a spare instance still held is from before.
        watch.discard();
        Ok(watch)
    }

    fn inotify(&self) -> BorrowedFd<'_> {
        self.inotify.as_fd()
    }

    /// The descriptors [`Watch::wait`] polls, the inotify instance's and
    /// the bell's, for a waiter that polls them itself (an async
    /// runtime's reactor): readable when [`Watch::drain`] has something
    /// to consume.
    pub fn descriptors(&self) -> [BorrowedFd<'_>; 2] {
        [self.inotify(), self.bell.fd.as_fd()]
    }

    /// The pidfd of the process watched for its exit, for a waiter that
    /// polls the descriptors itself: readable once it has exited.
    pub fn exit_descriptor(&self) -> Option<BorrowedFd<'_>> {
        self.exit.as_ref().map(|(_, fd)| fd.as_fd())
    }

    /// `pidfd_open(pid, 0)` — watches process `pid` for its exit as well,
    /// instead of any other: the wait ends when it exits (a death raises
    /// no event on the lock path). [`ExitWatch::Ended`] where no such
    /// process is left (it exited and was reaped since the attempt that
    /// named it). [`ExitWatch::Unwatched`] where it cannot be watched: a
    /// kernel before Linux 5.3, no descriptor left; the wait then polls
    /// as before. Watching a PID that a new
    /// process has taken since the record was written watches that one,
    /// which only costs a look too many, or too few: the poll goes on.
    ///
    /// # References
    /// - [`pidfd_open(2)`](https://man7.org/linux/man-pages/man2/pidfd_open.2.html)
    pub fn watch_exit(&mut self, pid: i32) -> ExitWatch {
        if self.exit.as_ref().is_some_and(|(p, _)| *p == pid) {
            return ExitWatch::Watching;
        }
        if let Some((p, looks)) = &mut self.ended {
            if *p == pid {
                if *looks >= ZOMBIE_LOOKS {
                    return ExitWatch::Unwatched;
                }
                *looks += 1;
                return ExitWatch::Ended;
            }
        }
        self.ended = None;
        // rustix offers pidfd_open on Linux only: an Android waiter polls.
        #[cfg(target_os = "linux")]
        let opened = match rustix::process::Pid::from_raw(pid) {
            Some(p) => rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()),
            None => Err(Errno::INVAL),
        };
        #[cfg(not(target_os = "linux"))]
        let opened: Result<OwnedFd, Errno> = Err(Errno::NOSYS);
        match opened {
            Ok(fd) => {
                self.exit = Some((pid, fd));
                // Should it die, whether it runs in another PID namespace
                // is asked then: the scan that answers it is made now,
                // while it holds, off the takeover's path.
                crate::elsewhere::prepare(pid as u32);
                ExitWatch::Watching
            }
            // No such process: it exited and was reaped between the
            // attempt that named it and this call (its killer may reap it
            // at once), so its exit raises nothing more to wait for. The
            // marker is judged again, as after an exit seen, within the
            // same bound of looks.
            Err(Errno::SRCH) => {
                self.exit = None;
                self.ended = Some((pid, 0));
                ExitWatch::Ended
            }
            Err(_) => {
                self.exit = None;
                ExitWatch::Unwatched
            }
        }
    }

    /// Watches no process's exit any more.
    pub fn unwatch_exit(&mut self) {
        self.exit = None;
        self.ended = None;
    }

    /// Whether the watched process has exited (its pidfd is readable):
    /// then it is watched no more.
    fn exit_seen(&mut self) -> bool {
        let Some((pid, fd)) = &self.exit else {
            return false;
        };
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let ended = matches!(poll(&mut fds, Some(&zero)), Ok(n) if n > 0);
        if ended {
            self.ended = Some((*pid, 0));
            self.exit = None;
        }
        ended
    }

    /// Whether the last [`Watch::drain`] looked at the lock path for an
    /// attribute change and found the marker still there: another program
    /// may be touching it, and a waiter should pause a millisecond before
    /// waiting again, as [`Watch::wait`] does.
    pub fn looked(&self) -> bool {
        self.looked
    }

    /// This waiter's bell.
    pub fn bell(&self) -> Bell {
        self.bell.clone()
    }

    /// Watches the file now at the lock path in `dir` (the marker the last
    /// attempt found busy, unless a peer replaced it since: then the new
    /// one), and checks that it is still there once watched: a file that
    /// left before its watch took hold raises no event.
    pub fn arm(&mut self, dir: BorrowedFd<'_>) -> Armed {
        use rustix::fs::{Mode, OFlags};
        let pin = match rustix::fs::openat(
            dir,
            self.name.as_c_str(),
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(pin) => pin,
            Err(Errno::NOENT) => return Armed::Gone,
            Err(_) => return Armed::Unwatched,
        };
        let Ok(pinned) = rustix::fs::fstat(&pin) else {
            return Armed::Unwatched;
        };
        let flags = WatchFlags::MOVE_SELF | WatchFlags::DELETE_SELF | WatchFlags::ATTRIB;
        let by_pin = format!("/proc/self/fd/{}", rustix::fd::AsRawFd::as_raw_fd(&pin));
        let wd = match inotify::add_watch(self.inotify(), by_pin.as_str(), flags) {
            Ok(wd) => wd,
            // The pinned marker was removed since it was opened: `/proc`
            // leads nowhere for a file with no name left. It has left the
            // path, so the caller looks again: a wait here, with nothing
            // watched, would sleep through every release to come.
            Err(Errno::NOENT) if rustix::fs::fstat(&pin).is_ok_and(|st| st.st_nlink == 0) => {
                return Armed::Gone
            }
            // No `/proc`: by the directory's path, which may lead elsewhere
            // by now (a `chdir` under a relative path, the directory moved):
            // the watch counts only if that path still shows the pinned
            // file once watched.
            Err(_) => {
                let Some(path) = &self.by_path else {
                    return Armed::Unwatched;
                };
                let wd = match inotify::add_watch(
                    self.inotify(),
                    path.as_c_str(),
                    flags | WatchFlags::DONT_FOLLOW,
                ) {
                    Ok(wd) => wd,
                    // Nothing at the path now: the marker left; look again.
                    Err(Errno::NOENT) => return Armed::Gone,
                    Err(_) => return Armed::Unwatched,
                };
                let same = rustix::fs::lstat(path.as_c_str())
                    .is_ok_and(|st| st.st_dev == pinned.st_dev && st.st_ino == pinned.st_ino);
                if !same {
                    if self.wd != Some(wd) {
                        let _ = inotify::remove_watch(self.inotify(), wd);
                    }
                    return Armed::Unwatched;
                }
                wd
            }
        };
        if let Some(old) = self.wd.replace(wd).filter(|&old| old != wd) {
            let _ = inotify::remove_watch(self.inotify(), old);
        }
        self.watched = Some((pinned.st_dev as u64, pinned.st_ino as u64));
        if self.still_watched(dir) {
            Armed::Watching
        } else {
            // Gone or replaced while the watch was set up.
            Armed::Gone
        }
    }

    /// The marker watched, by device and inode, once armed.
    pub fn watched(&self) -> Option<(u64, u64)> {
        self.watched
    }

    /// Whether the lock path still shows the watched marker.
    fn still_watched(&self, dir: BorrowedFd<'_>) -> bool {
        let now = rustix::fs::statat(
            dir,
            self.name.as_c_str(),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        );
        matches!((now, self.watched), (Ok(st), Some(w)) if (st.st_dev as u64, st.st_ino as u64) == w)
    }

    /// Consumes what is pending, the bell included, without a look.
    fn discard(&mut self) {
        let mut rang = [0u8; 8];
        let _ = rustix::io::read(&*self.bell.fd, &mut rang);
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(self.inotify(), &mut buf);
        while let Ok(_) | Err(Errno::INTR) = reader.next().map(|_| ()) {}
    }

    /// Consumes what is pending, the bell included; whether any of it
    /// concerned the lock path (or could have: a queue overflow, an error).
    pub fn drain(&mut self, dir: BorrowedFd<'_>) -> bool {
        let (rang, path) = self.drain_apart(dir);
        rang || path
    }

    /// Consumes what is pending, the bell included; whether the lock path
    /// changed (or could have), the bell aside: for a waiter whose own
    /// thread released a lock meanwhile, which rang it.
    pub fn drain_path(&mut self, dir: BorrowedFd<'_>) -> bool {
        self.drain_apart(dir).1
    }

    /// Consumes what is pending: whether the bell rang, and whether the lock
    /// path changed (or could have).
    fn drain_apart(&mut self, dir: BorrowedFd<'_>) -> (bool, bool) {
        let mut rang = [0u8; 8];
        let bell = rustix::io::read(&*self.bell.fd, &mut rang).is_ok();
        let mut woken = false;
        let mut look = false;
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let wd = self.wd;
        let mut reader = inotify::Reader::new(self.inotify(), &mut buf);
        loop {
            match reader.next() {
                Ok(event) => {
                    let flags = event.events();
                    // An earlier watch of this instance may still report.
                    let ours = Some(event.wd()) == wd || flags.contains(ReadFlags::QUEUE_OVERFLOW);
                    woken |= ours && frees_the_lock(flags);
                    look |= ours && may_free_the_lock(flags);
                }
                Err(Errno::AGAIN) => break,
                Err(Errno::INTR) => continue,
                Err(_) => return (bell, true),
            }
        }
        self.looked = look;
        let ended = self.exit_seen();
        (bell, ended || woken || (look && !self.still_watched(dir)))
    }

    /// Waits up to `timeout` for an event on the lock path or the bell,
    /// consuming them; whether one came. Events from before the wait count.
    pub fn wait(&mut self, dir: BorrowedFd<'_>, timeout: Duration) -> bool {
        // `None`: a timeout too long to add, as good as for ever.
        let deadline = std::time::Instant::now().checked_add(timeout);
        loop {
            if self.drain(dir) {
                return true;
            }
            let left = deadline.map_or(Duration::MAX, |d| {
                d.saturating_duration_since(std::time::Instant::now())
            });
            if left.is_zero() {
                return false;
            }
            if self.looked {
                // Another program keeps touching the marker: each touch
                // costs a look, at most one a millisecond.
                std::thread::sleep(left.min(Duration::from_millis(1)));
                continue;
            }
            let left = Timespec::try_from(left).unwrap_or(Timespec {
                tv_sec: i64::MAX,
                tv_nsec: 0,
            });
            let exit = self.exit.as_ref().map(|(_, fd)| fd);
            let mut all = [
                PollFd::new(&*self.inotify, PollFlags::IN),
                PollFd::new(&*self.bell.fd, PollFlags::IN),
                PollFd::new(exit.unwrap_or(&*self.bell.fd), PollFlags::IN),
            ];
            let fds = if exit.is_some() {
                &mut all[..]
            } else {
                &mut all[..2]
            };
            match poll(fds, Some(&left)) {
                Ok(_) | Err(Errno::INTR) => {}
                // Polling failed: the caller's own pause takes over.
                Err(_) => return false,
            }
        }
    }
}

/// Keeps an instance whose watch is gone for a next wait, or closes it
/// aside when enough are kept.
fn put_away(inotify: OwnedFd) {
    let mut spares = SPARES.lock().unwrap_or_else(|p| p.into_inner());
    let me = fork::owner();
    own_spares(&mut spares, me);
    if spares.len() < SPARES_KEPT {
        spares.push(Spare { owner: me, inotify });
    } else {
        drop(spares);
        close_aside(inotify);
    }
}

impl Drop for Watch {
    /// Keeps the instance for a next wait, its watch removed (the marker's
    /// removal may have removed it already).
    fn drop(&mut self) {
        // SAFETY: taken once, here, and not used after.
        let inotify = unsafe { ManuallyDrop::take(&mut self.inotify) };
        if let Some(wd) = self.wd {
            let _ = inotify::remove_watch(&inotify, wd);
        }
        if self.bell.is_this_process() {
            put_away(inotify);
        } else {
            // A forked child's copy of its parent's watch.
            std::mem::forget(inotify);
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::{ExitWatch, Watch};
    use rustix::fs::inotify::{self, CreateFlags};
    use std::os::fd::FromRawFd;

    fn watch() -> Watch {
        Watch::new(&std::env::temp_dir(), b"swaplock-watch-test.lock").unwrap()
    }

    /// A bell whose owner has this process's PID but fewer forks counted
    /// (what a descendant given an exited ancestor's PID finds of that
    /// ancestor's) is not this process's, so `ring` leaves it alone; a
    /// spare instance of such an owner is forgotten, its number left open.
    #[test]
    fn what_the_same_pid_made_fewer_forks_ago_is_not_this_processs() {
        use crate::fork::{forks, owner, Owner};
        let watch = watch();
        let mut bell = watch.bell();
        assert!(bell.is_this_process());
        let ancestor = Owner::of(rustix::process::getpid(), forks().wrapping_sub(1));
        assert_ne!(ancestor, owner());
        bell.owner = ancestor;
        assert!(!bell.is_this_process());
        let inotify = inotify::init(CreateFlags::CLOEXEC).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&inotify);
        let mut spares = vec![super::Spare {
            owner: ancestor,
            inotify,
        }];
        super::own_spares(&mut spares, owner());
        assert!(spares.is_empty());
        // Forgotten, not closed: the number is still open here.
        // SAFETY: the descriptor was forgotten, never closed.
        let open = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        assert!(rustix::io::fcntl_getfd(&open).is_ok());
    }

    /// A holder killed and reaped before its waiter asks to watch it has
    /// nothing left to raise: the waiter looks again at once (the bounded
    /// looks of an exit seen), rather than waiting for its poll.
    #[test]
    fn a_process_reaped_before_it_is_watched_has_ended() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        child.wait().unwrap();
        let mut watch = watch();
        assert_eq!(watch.watch_exit(pid), ExitWatch::Ended);
        assert_eq!(watch.watch_exit(pid), ExitWatch::Ended);
    }

    /// A live process is watched; once it exits, the wait ends.
    #[test]
    fn a_live_process_is_watched() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let mut watch = watch();
        assert_eq!(watch.watch_exit(pid), ExitWatch::Watching);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(watch.exit_seen());
        assert_eq!(watch.watch_exit(pid), ExitWatch::Ended);
    }
}
