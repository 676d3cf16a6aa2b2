//! What ends a soft-lock waiter's pause early, besides its poll: on Linux
//! and Android, a change of its lock path that the directory's inotify
//! reports (another process released or took the lock) or a bell another
//! thread of this process rings when it releases or hands over a soft lock
//! (`swaplock_linux::watch`). Elsewhere the waiter waits on the process's
//! release condition variable and polls for other processes' releases.
//!
//! A wake-up is only a reason to look again: the protocol decides.
//!
//! Under the model checker (`--cfg swaplock_model`) the waiter takes the
//! condition variable's way on every system, unless its test turns watches
//! on (`sync::model::watches`): then it watches as on Linux, and its wait
//! is a loop of looks at the watch that never block
//! ([`crate::sync::poll_until`]), since the watch's `poll` would block the
//! checker's one thread.

#[cfg(any(target_os = "linux", target_os = "android"))]
mod imp {
    pub(crate) use crate::adapter::watch::ZOMBIE_PAUSE;
    use crate::adapter::watch::{self, Armed, Bell, Watch};
    use std::os::fd::AsFd;
    use std::path::Path;
    use std::time::Duration;
    use swaplock_core::soft::Error;

    /// The bells of this process's waiters that watch their lock path (and,
    /// in a forked child, its parent's, which ring nothing there).
    static BELLS: crate::lists::ProcessMutex<Vec<Bell>> =
        crate::lists::ProcessMutex::new(Vec::new());

    /// The adapter's spare watches' mutex, for the fork handlers.
    static SPARES: crate::lists::ForkHook = crate::lists::ForkHook::new(watch::lock_for_fork);

    /// How many waiters of this process have a bell (for the model's
    /// tests).
    #[cfg(all(test, swaplock_model))]
    pub(crate) fn bells() -> usize {
        BELLS.lock().len()
    }

    /// Wakes every waiter of this process that watches its lock path.
    pub(crate) fn ring_all() {
        for bell in BELLS.lock().iter() {
            bell.ring();
        }
    }

    /// Whether an acquire failed for want of descriptors (`EMFILE`,
    /// `ENFILE`), which a watch's own may have taken.
    pub(crate) fn short_of_descriptors(e: &Error) -> bool {
        matches!(e, Error::Os { errno, .. }
            if errno.raw() == libc::EMFILE || errno.raw() == libc::ENFILE)
    }

    /// At most this many times in a row the marker a busy attempt found is
    /// gone before its watch took hold, each a reason to look again at
    /// once; then a millisecond passes between looks until one holds.
    const GONE_IN_A_ROW: u32 = 64;

    /// What the caller does next.
    pub(crate) enum Next {
        /// Looks again at once: the watch is new (a change before it raised
        /// no event), or the marker left before its watch took hold.
        Now,
        /// Looks again after this pause (the marker keeps leaving).
        After(Duration),
        /// Waits for an event, the bell, or its poll.
        Wait,
    }

    /// One waiter's watch of its lock path, set up at its first pause.
    pub(crate) enum Watcher {
        /// Not set up yet.
        Idle,
        /// Watching, its bell in [`BELLS`]; how many times in a row the
        /// marker was gone when armed.
        Watching(Watch, u32),
        /// The kernel refused (no inotify, no descriptors left), or the
        /// watch was given up: polls only.
        Refused,
    }

    impl Watcher {
        pub(crate) fn new() -> Self {
            Watcher::Idle
        }

        /// Sets the watch up at the first pause, then at each watches the
        /// marker now at the lock path.
        pub(crate) fn start(
            &mut self,
            dir: &super::super::Dir,
            dir_path: &Path,
            name: &[u8],
        ) -> Next {
            self.start_seen(dir, dir_path, name, None)
        }

        /// As [`start`](Self::start), for a wait that knows the lock was
        /// taken since its last attempt (its queue's turn came as a member
        /// ahead took it), with the inode `ino` of the marker it made: armed
        /// on that very marker, the watch waits for it to leave, as an
        /// attempt would only find it busy. Another marker there (that one
        /// left and another holder came, whom nobody has judged), none, or
        /// no watch: the caller looks at once.
        pub(crate) fn start_after_take(
            &mut self,
            dir: &super::super::Dir,
            dir_path: &Path,
            name: &[u8],
            ino: u64,
        ) -> Next {
            self.start_seen(dir, dir_path, name, Some(ino))
        }

        fn start_seen(
            &mut self,
            dir: &super::super::Dir,
            dir_path: &Path,
            name: &[u8],
            taken: Option<u64>,
        ) -> Next {
            let new = matches!(self, Watcher::Idle);
            #[cfg(swaplock_model)]
            if new && !crate::sync::model::watching() {
                *self = Watcher::Refused;
                return Next::Wait;
            }
            if new {
                SPARES.install();
                match Watch::new(dir_path, name) {
                    Ok(watch) => {
                        BELLS.lock().push(watch.bell());
                        *self = Watcher::Watching(watch, 0);
                    }
                    Err(_) => *self = Watcher::Refused,
                }
            }
            let Watcher::Watching(watch, gone) = self else {
                return match taken {
                    Some(_) => Next::Now,
                    None => Next::Wait,
                };
            };
            match watch.arm(dir.as_fd()) {
                Armed::Watching if taken.is_some() => {
                    *gone = 0;
                    match watch.watched().map(|(_, ino)| ino) == taken {
                        true => Next::Wait,
                        false => Next::Now,
                    }
                }
                Armed::Unwatched if taken.is_some() => Next::Now,
                _ if new => Next::Now,
                Armed::Gone if *gone < GONE_IN_A_ROW => {
                    *gone += 1;
                    Next::Now
                }
                Armed::Gone => Next::After(Duration::from_millis(1)),
                Armed::Unwatched => Next::Wait,
                Armed::Watching => {
                    *gone = 0;
                    Next::Wait
                }
            }
        }

        /// Watches the exit of the holder the busy attempt named on this
        /// host (`pid`), so that the wait ends when it dies, which raises
        /// no event on the lock path; `None` stops watching. Whether to look
        /// again after [`watch::ZOMBIE_PAUSE`] instead of waiting: the
        /// holder has exited already but was still judged alive, a zombie
        /// its parent has not reaped yet.
        pub(crate) fn holder(&mut self, pid: Option<u32>) -> bool {
            let Watcher::Watching(watch, _) = self else {
                return false;
            };
            match pid.and_then(|p| i32::try_from(p).ok()) {
                Some(pid) => watch.watch_exit(pid) == watch::ExitWatch::Ended,
                None => {
                    watch.unwatch_exit();
                    false
                }
            }
        }

        /// Whether a watch stands in for the condition variable.
        pub(crate) fn watching(&self) -> bool {
            matches!(self, Watcher::Watching(..))
        }

        /// Forgets what happened before an attempt: the attempt sees it.
        pub(crate) fn before_attempt(&mut self, dir: &super::super::Dir) {
            if let Watcher::Watching(watch, _) = self {
                watch.drain(dir.as_fd());
            }
        }

        /// Forgets the bell (a release this thread made), and says whether
        /// the lock path changed meanwhile.
        pub(crate) fn path_changed(&mut self, dir: &super::super::Dir) -> bool {
            match self {
                Watcher::Watching(watch, _) => watch.drain_path(dir.as_fd()),
                _ => false,
            }
        }

        /// Waits up to `pause` for the lock path to change or the bell.
        pub(crate) fn wait(&mut self, dir: &super::super::Dir, pause: Duration) {
            if let Watcher::Watching(watch, _) = self {
                #[cfg(swaplock_model)]
                return crate::sync::poll_until(|| watch.wait(dir.as_fd(), Duration::ZERO), pause);
                #[cfg(not(swaplock_model))]
                watch.wait(dir.as_fd(), pause);
            }
        }

        /// Waits up to `pause` for the lock path to change or the bell,
        /// without blocking the thread: the watch's descriptors polled by
        /// the tokio runtime's reactor. (Without a watch: the pause.)
        #[cfg(all(feature = "tokio", not(swaplock_model)))]
        pub(crate) async fn wait_async(&mut self, dir: &super::super::Dir, pause: Duration) {
            use std::future::Future;
            use std::os::fd::AsRawFd;
            use std::task::Poll;
            use tokio::io::unix::AsyncFd;
            use tokio::io::Interest;
            // A pause too long to add (`poll_interval(Duration::MAX)`) is
            // as good as for ever: thirty years.
            let now = tokio::time::Instant::now();
            let deadline = now
                .checked_add(pause)
                .unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 86_400));
            let mut until = std::pin::pin!(tokio::time::sleep_until(deadline));
            let Watcher::Watching(watch, _) = self else {
                return until.await;
            };
            /// A descriptor of the watch, by number: the watch is drained
            /// while the reactor polls it.
            struct Raw(std::os::fd::RawFd);
            impl std::os::fd::AsRawFd for Raw {
                fn as_raw_fd(&self) -> std::os::fd::RawFd {
                    self.0
                }
            }
            let [inotify, bell] = watch.descriptors().map(|fd| Raw(fd.as_raw_fd()));
            // SAFETY: the descriptors are the watch's, which keeps them open
            // and unchanged for longer than the registrations live (they
            // drop at the end of this function; the watch is borrowed
            // until then).
            let registered = unsafe {
                (
                    AsyncFd::register_with_interest(inotify, Interest::READABLE),
                    AsyncFd::register_with_interest(bell, Interest::READABLE),
                )
            };
            let (Ok(inotify), Ok(bell)) = registered else {
                return until.await;
            };
            loop {
                if watch.drain(dir.as_fd()) {
                    return;
                }
                if watch.looked() {
                    // Another program keeps touching the marker: each touch
                    // costs a look, at most one a millisecond.
                    let soon = tokio::time::Instant::now() + Duration::from_millis(1);
                    tokio::time::sleep_until(soon.min(deadline)).await;
                    if tokio::time::Instant::now() >= deadline {
                        return;
                    }
                    continue;
                }
                let woken = std::future::poll_fn(|cx| {
                    if until.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(false);
                    }
                    let mut woken = false;
                    for fd in [&inotify, &bell] {
                        match fd.poll_read_ready(cx) {
                            // Consumed by the drain that follows.
                            Poll::Ready(Ok(mut ready)) => {
                                ready.clear_ready();
                                woken = true;
                            }
                            // The reactor failed this descriptor: the
                            // pause's end wakes the waiter.
                            Poll::Ready(Err(_)) | Poll::Pending => {}
                        }
                    }
                    match woken {
                        true => Poll::Ready(true),
                        false => Poll::Pending,
                    }
                })
                .await;
                if !woken {
                    return;
                }
            }
        }

        /// Under the model, whose tasks have no reactor: looks at the watch
        /// between polls ([`crate::sync::time::poll_until`]); without one,
        /// the model's pause.
        #[cfg(all(feature = "tokio", swaplock_model))]
        pub(crate) async fn wait_async(&mut self, dir: &super::super::Dir, pause: Duration) {
            match self {
                Watcher::Watching(watch, _) => {
                    let ready = || watch.drain(dir.as_fd());
                    crate::sync::time::poll_until(ready, pause).await
                }
                _ => crate::sync::time::sleep(pause).await,
            }
        }

        /// Gives the watch and the process's spare ones up, when
        /// descriptors run short: the waiter polls from then on.
        pub(crate) fn give_up(&mut self) {
            self.forget_bell();
            *self = Watcher::Refused;
            watch::close_spares();
        }

        fn forget_bell(&self) {
            if let Watcher::Watching(watch, _) = self {
                let bell = watch.bell();
                BELLS.lock().retain(|b| !b.is(&bell));
            }
        }
    }

    impl Drop for Watcher {
        fn drop(&mut self) {
            self.forget_bell();
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod imp {
    /// Unused here: no holder's exit is watched.
    pub(crate) const ZOMBIE_PAUSE: std::time::Duration = std::time::Duration::from_millis(1);
    use std::path::Path;
    use std::time::Duration;

    /// Nothing to ring: waiters wait on the condition variable.
    pub(crate) fn ring_all() {}

    /// No watch takes descriptors here.
    pub(crate) fn short_of_descriptors(_: &swaplock_core::soft::Error) -> bool {
        false
    }

    /// What the caller does next: here, always its wait.
    #[allow(dead_code)] // The Linux watch's other answers, never given here.
    pub(crate) enum Next {
        Now,
        After(Duration),
        Wait,
    }

    /// No watch: the waiter polls.
    pub(crate) struct Watcher;

    impl Watcher {
        pub(crate) fn new() -> Self {
            Watcher
        }

        pub(crate) fn start(&mut self, _: &super::super::Dir, _: &Path, _: &[u8]) -> Next {
            Next::Wait
        }

        /// Never called here: no queue gives a turn.
        pub(crate) fn start_after_take(
            &mut self,
            _: &super::super::Dir,
            _: &Path,
            _: &[u8],
            _: u64,
        ) -> Next {
            Next::Now
        }

        /// No watch of a holder's exit here: the wait polls.
        pub(crate) fn holder(&mut self, _: Option<u32>) -> bool {
            false
        }

        pub(crate) fn give_up(&mut self) {}

        pub(crate) fn watching(&self) -> bool {
            false
        }

        pub(crate) fn before_attempt(&mut self, _: &super::super::Dir) {}

        pub(crate) fn path_changed(&mut self, _: &super::super::Dir) -> bool {
            false
        }

        pub(crate) fn wait(&mut self, _: &super::super::Dir, _: Duration) {}

        /// The pause, without blocking the thread.
        #[cfg(feature = "tokio")]
        pub(crate) async fn wait_async(&mut self, _: &super::super::Dir, pause: Duration) {
            crate::sync::time::sleep(pause).await
        }
    }
}

pub(crate) use imp::*;
