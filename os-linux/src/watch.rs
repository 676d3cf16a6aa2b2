//! Waking a soft-lock waiter when its lock path changes, instead of at its
//! next poll: inotify on the lock's directory for the lock's own name
//! leaving or arriving (a release unlinks the marker, a takeover exchanges
//! it), and an eventfd "bell" that another thread of the process rings when
//! it releases or hands over a lock, which leaves no trace in the
//! directory. An event is a hint to look again, never a verdict: the
//! protocol decides, and the caller's poll stays as the backstop for what
//! raises no event here (a holder killed in place, a release on another
//! host of a network filesystem, a lease running out).

use rustix::event::{eventfd, poll, EventfdFlags, PollFd, PollFlags, Timespec};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;
use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A watch on one lock path, and this waiter's bell.
pub struct Watch {
    inotify: OwnedFd,
    /// The watch on the lock's directory.
    wd: i32,
    bell: Bell,
    /// The lock's file name, as inotify reports it.
    name: Box<[u8]>,
}

/// An inotify instance and a bell a finished wait left, its watch
/// removed, and the process it belongs to (a forked child shares its
/// parent's instances, and with them their events).
struct Spare {
    pid: rustix::process::Pid,
    inotify: OwnedFd,
    bell: Bell,
}

/// Spares kept for the next waits. Closing an inotify instance waits for
/// the kernel's grace period (milliseconds), which a waiter that just got
/// its lock would pay before returning; removing a watch does not. At most
/// [`SPARES_KEPT`]: instances count against the user's limit
/// (`fs.inotify.max_user_instances`, 128 by default).
static SPARES: Mutex<Vec<Spare>> = Mutex::new(Vec::new());

/// How many spares a process keeps.
const SPARES_KEPT: usize = 4;

/// [`SPARES`]'s mutex held, for a fork handler: a thread that forks while
/// another holds it would leave it locked in the child.
pub fn lock_for_fork() -> Box<dyn std::any::Any> {
    Box::new(SPARES.lock().unwrap_or_else(|p| p.into_inner()))
}

/// A spare of this process, if any; another process's go (closing them
/// here is quick: the process they came from holds them too).
fn spare() -> Option<(OwnedFd, Bell)> {
    let me = rustix::process::getpid();
    let mut spares = SPARES.lock().unwrap_or_else(|p| p.into_inner());
    spares.retain(|s| s.pid == me);
    spares.pop().map(|s| (s.inotify, s.bell))
}

/// What another thread rings to wake a [`Watch`]'s waiter.
#[derive(Clone)]
pub struct Bell(Arc<OwnedFd>);

impl Bell {
    /// Wakes the waiter (now, or at its next wait).
    pub fn ring(&self) {
        // EAGAIN only when the counter is about to overflow: it is rung
        // already.
        let _ = rustix::io::write(&*self.0, &1u64.to_ne_bytes());
    }

    /// Whether `other` is this very bell.
    pub fn is(&self, other: &Bell) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// The events that can free the lock path: its name unlinked or moved
/// away or in (a release, a takeover's exchange, a rename), the directory
/// itself removed or moved. Creations and writes cannot free it.
fn concerns_the_lock(flags: ReadFlags) -> bool {
    flags.intersects(
        ReadFlags::DELETE
            | ReadFlags::MOVED_FROM
            | ReadFlags::MOVED_TO
            | ReadFlags::DELETE_SELF
            | ReadFlags::MOVE_SELF
            | ReadFlags::IGNORED
            | ReadFlags::QUEUE_OVERFLOW,
    )
}

impl Watch {
    /// Watches the directory open as `dir` (through `/proc/self/fd`, or
    /// `dir_path` where `/proc` is missing) for `name`. Errors are the
    /// kernel's: no inotify (`ENOSYS`, a seccomp filter), no watches or
    /// instances left (`ENOSPC`, `EMFILE`); the caller then polls.
    pub fn new(
        dir: BorrowedFd<'_>,
        dir_path: &std::path::Path,
        name: &[u8],
    ) -> std::io::Result<Self> {
        let (inotify, bell) = match spare() {
            Some(spare) => spare,
            None => (
                inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?,
                Bell(Arc::new(eventfd(
                    0,
                    EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK,
                )?)),
            ),
        };
        let flags = WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR;
        let by_fd = format!("/proc/self/fd/{}", rustix::fd::AsRawFd::as_raw_fd(&dir));
        let wd = match inotify::add_watch(&inotify, by_fd.as_str(), flags) {
            Ok(wd) => wd,
            Err(_) => {
                let dir_path = if dir_path.as_os_str().is_empty() {
                    std::path::Path::new(".")
                } else {
                    dir_path
                };
                inotify::add_watch(&inotify, dir_path, flags)?
            }
        };
        let mut watch = Watch {
            inotify,
            wd,
            bell,
            name: name.into(),
        };
        // What a spare instance or bell still held is from before.
        watch.drain();
        Ok(watch)
    }

    /// This waiter's bell.
    pub fn bell(&self) -> Bell {
        self.bell.clone()
    }

    /// Consumes what is pending, the bell included; whether any of it
    /// concerned the lock path (or could have: a queue overflow, an error).
    pub fn drain(&mut self) -> bool {
        let mut rang = [0u8; 8];
        let mut woken = rustix::io::read(&*self.bell.0, &mut rang).is_ok();
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(self.inotify.as_fd(), &mut buf);
        loop {
            match reader.next() {
                Ok(event) => {
                    // A spare instance's earlier watch may still report.
                    let ours =
                        event.wd() == self.wd || event.events().contains(ReadFlags::QUEUE_OVERFLOW);
                    let named = event
                        .file_name()
                        .is_none_or(|n| n.to_bytes() == &*self.name);
                    woken |= ours && named && concerns_the_lock(event.events());
                }
                Err(Errno::AGAIN) => return woken,
                Err(Errno::INTR) => continue,
                Err(_) => return true,
            }
        }
    }

    /// Waits up to `timeout` for an event on the lock path or the bell,
    /// consuming them; whether one came. Events from before the wait count.
    pub fn wait(&mut self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if self.drain() {
                return true;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            let left = Timespec::try_from(left).unwrap_or(Timespec {
                tv_sec: i64::MAX,
                tv_nsec: 0,
            });
            let mut fds = [
                PollFd::new(&self.inotify, PollFlags::IN),
                PollFd::new(&*self.bell.0, PollFlags::IN),
            ];
            match poll(&mut fds, Some(&left)) {
                Ok(_) | Err(Errno::INTR) => {}
                // Polling failed: the caller's own pause takes over.
                Err(_) => return false,
            }
        }
    }
}

impl Drop for Watch {
    /// Keeps the instance and the bell for a next wait, its watch removed
    /// (the directory's removal may have removed it already).
    fn drop(&mut self) {
        let _ = inotify::remove_watch(&self.inotify, self.wd);
        let mut spares = SPARES.lock().unwrap_or_else(|p| p.into_inner());
        if spares.len() >= SPARES_KEPT {
            return;
        }
        let Ok(inotify) = rustix::io::dup(&self.inotify) else {
            return;
        };
        spares.push(Spare {
            pid: rustix::process::getpid(),
            inotify,
            bell: self.bell.clone(),
        });
    }
}
