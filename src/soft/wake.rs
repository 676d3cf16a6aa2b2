//! What ends a soft-lock waiter's pause early, besides its poll: on Linux
//! and Android, a change of its lock path that the directory's inotify
//! reports (another process released or took the lock) or a bell another
//! thread of this process rings when it releases or hands over a soft lock
//! (`swaplock_linux::watch`). Elsewhere the waiter waits on the process's
//! release condition variable and polls for other processes' releases.
//!
//! A wake-up is only a reason to look again: the protocol decides.

#[cfg(any(target_os = "linux", target_os = "android"))]
mod imp {
    use crate::adapter::watch::{Bell, Watch};
    use std::os::fd::AsFd;
    use std::path::Path;
    use std::sync::Mutex;
    use std::time::Duration;

    /// The bells of this process's waiters that watch their lock path.
    static BELLS: Mutex<Vec<Bell>> = Mutex::new(Vec::new());

    /// Wakes every waiter of this process that watches its lock path.
    pub(crate) fn ring_all() {
        for bell in BELLS.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            bell.ring();
        }
    }

    /// The adapter's spare watches' mutex held, for the fork handlers.
    pub(crate) fn spares_lock() -> Box<dyn std::any::Any> {
        crate::adapter::watch::lock_for_fork()
    }

    /// The list's mutex held, for the fork handlers.
    pub(crate) fn list_lock() -> Box<dyn std::any::Any> {
        Box::new(BELLS.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// One waiter's watch of its lock path, set up at its first pause.
    pub(crate) enum Watcher {
        /// Not set up yet.
        Idle,
        /// Watching, its bell in [`BELLS`].
        Watching(Watch),
        /// The kernel refused (no inotify, no watches left): polls only.
        Refused,
    }

    impl Watcher {
        pub(crate) fn new() -> Self {
            Watcher::Idle
        }

        /// Sets the watch up at the first pause: `true` if it was just
        /// set up, when the caller looks again at once, since what
        /// changed before the watch existed raised no event.
        pub(crate) fn start(
            &mut self,
            dir: &super::super::Dir,
            dir_path: &Path,
            name: &[u8],
        ) -> bool {
            if !matches!(self, Watcher::Idle) {
                return false;
            }
            match Watch::new(dir.as_fd(), dir_path, name) {
                Ok(watch) => {
                    BELLS
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(watch.bell());
                    *self = Watcher::Watching(watch);
                    true
                }
                Err(_) => {
                    *self = Watcher::Refused;
                    false
                }
            }
        }

        /// Whether a watch stands in for the condition variable.
        pub(crate) fn watching(&self) -> bool {
            matches!(self, Watcher::Watching(_))
        }

        /// Forgets what happened before an attempt: the attempt sees it.
        pub(crate) fn before_attempt(&mut self) {
            if let Watcher::Watching(watch) = self {
                watch.drain();
            }
        }

        /// Waits up to `pause` for the lock path to change or the bell.
        pub(crate) fn wait(&mut self, pause: Duration) {
            if let Watcher::Watching(watch) = self {
                watch.wait(pause);
            }
        }
    }

    impl Drop for Watcher {
        fn drop(&mut self) {
            if let Watcher::Watching(watch) = self {
                let bell = watch.bell();
                BELLS
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .retain(|b| !b.is(&bell));
            }
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod imp {
    use std::path::Path;
    use std::time::Duration;

    /// Nothing to ring: waiters wait on the condition variable.
    pub(crate) fn ring_all() {}

    /// No list to guard across `fork`.
    #[cfg(unix)]
    pub(crate) fn list_lock() -> Box<dyn std::any::Any> {
        Box::new(())
    }

    /// No spare watches to guard across `fork`.
    #[cfg(unix)]
    pub(crate) fn spares_lock() -> Box<dyn std::any::Any> {
        Box::new(())
    }

    /// No watch: the waiter polls.
    pub(crate) struct Watcher;

    impl Watcher {
        pub(crate) fn new() -> Self {
            Watcher
        }

        pub(crate) fn start(&mut self, _: &super::super::Dir, _: &Path, _: &[u8]) -> bool {
            false
        }

        pub(crate) fn watching(&self) -> bool {
            false
        }

        pub(crate) fn before_attempt(&mut self) {}

        pub(crate) fn wait(&mut self, _: Duration) {}
    }
}

pub(crate) use imp::*;
