//! The host queue of a soft lock's waiters (PROTOCOL 7.20): waiters of
//! this host queue in the kernel on a side file beside the lock, so that
//! only the queue's head watches the marker and races for it at a
//! release; the others wait, without a watch, for their turn, a release
//! or hand-over of their own process, or their poll. A release then wakes
//! one waiter of the host, not all of them (the thundering herd).
//!
//! The queue only chooses who looks first: the marker's exclusive create
//! still grants the lock, and every waiter still attempts at least once a
//! poll interval, unless a member ahead of it took the lock during that
//! interval (64 intervals at most). Any failure (the side file cannot be
//! made or locked, a thread cannot be started, a fork) leaves the wait as
//! it was without a queue.

#[cfg(any(target_os = "linux", target_os = "android"))]
mod imp {
    use super::super::Dir;
    use crate::adapter::queue as os;
    use crate::kept::Kept;
    use crate::sync::Mutex;
    use std::os::fd::{AsFd, OwnedFd};
    use std::path::Path;
    use std::sync::Arc;
    use swaplock_core::names::{queue_name, Name};
    use swaplock_core::Errno;

    /// Where a waiter stands in the queue.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Standing {
        /// The head: it watches the marker, as every waiter did before.
        Head,
        /// Behind the head: it waits for its turn, a release or hand-over
        /// of this process, or its poll, without watching.
        Behind,
        /// No queue for this wait: it waits as without one.
        Off,
    }

    /// The turn of one member, as its waiting thread and its waiter see it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Turn {
        /// The waiting thread waits in the kernel: for a ticket, or for
        /// the member before it to leave.
        Waiting,
        /// The turn is this member's: it is the head.
        Mine,
        /// The waiting thread's lock call failed: no turn comes.
        Failed,
        /// The waiter left: the waiting thread gives up what it gets.
        Left,
    }

    /// One member: its open of the side file (its locks are the open file
    /// description's), and where it is.
    struct Member {
        fd: OwnedFd,
        at: Mutex<At>,
    }

    struct At {
        turn: Turn,
        /// Its ticket, once drawn, until it leaves its place.
        ticket: Option<u64>,
    }

    /// A wait's place in its host's queue.
    pub(crate) struct Queue<'d> {
        /// The lock's directory and the side file's name; `None`: no queue.
        at: Option<(&'d Dir, Name)>,
        mode: u32,
        /// The lock's canonical path, which [`CONTENDED`] lists.
        key: Option<Arc<Path>>,
        state: State,
        /// The member last served when this member last looked.
        served: Option<u64>,
    }

    /// A lock (by canonical path) this process last left a queue of with
    /// another member still in it: how many times it took that lock since
    /// without queueing, and when it left.
    struct Streak {
        pid: crate::pid::Me,
        key: Arc<Path>,
        taken: u32,
        since: std::time::Instant,
    }

    /// The locks this process's streaks are of. Once a streak reaches
    /// [`TURN_BATCH`] takes or lasted [`TURN_TIME`], the next wait joins
    /// the queue before its first attempt, behind those already queued: a
    /// releaser may take the lock back at once a few times (no waiter is
    /// woken for it), but not more, nor for long, so the turn passes in
    /// order. A wait that leaves as the only member takes its lock off. At
    /// most [`MOST_CONTENDED`], the oldest dropped first.
    static CONTENDED: crate::lists::ProcessMutex<Vec<Streak>> =
        crate::lists::ProcessMutex::new(Vec::new());
    const MOST_CONTENDED: usize = 16;

    /// How many times in a row a process that left others queued may take
    /// the lock again without queueing behind them (PROTOCOL 7.20): each
    /// time saves the wake-up of another process, and the queue's turns
    /// stay in order (under the model, one, so that its short runs queue
    /// first too).
    const TURN_BATCH: u32 = if cfg!(swaplock_model) { 1 } else { 8 };

    /// How long after it left others queued a process may still take the
    /// lock again without queueing: a batch of turns saves wake-ups where
    /// the lock is held briefly, and must not make those queued wait eight
    /// holds where each is long (never under the model, whose runs must
    /// not depend on the clock).
    const TURN_TIME: std::time::Duration = if cfg!(swaplock_model) {
        std::time::Duration::MAX
    } else {
        std::time::Duration::from_millis(4)
    };

    /// How many pauses in a row a member behind the head lets go by without
    /// an attempt while the queue moves (PROTOCOL 7.20).
    pub(crate) const MOST_SKIPS: usize = 64;

    /// Whether this process's waits for `key` join the queue first.
    pub(crate) fn contended(key: &Path) -> bool {
        let pid = crate::pid::id();
        CONTENDED.lock().iter().any(|s| {
            s.pid == pid
                && *s.key == *key
                && (s.taken >= TURN_BATCH || s.since.elapsed() >= TURN_TIME)
        })
    }

    /// A wait for `key` ended without joining its queue: one more in the
    /// streak of a lock left with others queued.
    fn again(key: &Path) {
        let pid = crate::pid::id();
        if let Some(streak) = CONTENDED
            .lock()
            .iter_mut()
            .find(|s| s.pid == pid && *s.key == *key)
        {
            streak.taken = streak.taken.saturating_add(1);
        }
    }

    fn mark(key: &Arc<Path>, on: bool) {
        let pid = crate::pid::id();
        let mut list = CONTENDED.lock();
        // A forked child's copy names its parent's.
        list.retain(|s| s.pid == pid && *s.key != **key);
        if on {
            if list.len() >= MOST_CONTENDED {
                list.remove(0);
            }
            list.push(Streak {
                pid,
                key: Arc::clone(key),
                taken: 0,
                since: std::time::Instant::now(),
            });
        }
    }

    enum State {
        /// Not joined yet: joins at its first busy attempt.
        Out,
        /// A member, of the process that joined.
        In(Arc<Member>, crate::pid::Me),
        /// No queue for this wait.
        Off,
    }

    /// The waiting threads of this process: each waits for a turn in the
    /// kernel, and one whose waiter left waits on until the turn comes (a
    /// head that is stopped keeps it); past [`MOST_THREADS`] alive, a wait
    /// goes without the queue. A thread whose wait is over is kept a while
    /// for the process's next one ([`crate::kept`]): starting a thread
    /// costs more than the wait's own calls.
    static THREADS: Kept = Kept::new(|| "swaplock-queue".into(), Some(64 * 1024), MOST_THREADS);
    const MOST_THREADS: usize = 64;

    /// How many waiting threads live (for tests).
    #[doc(hidden)]
    pub fn queue_threads() -> usize {
        THREADS.live()
    }

    /// How many times a joiner opens the side file again when it was
    /// removed or replaced under it.
    const REOPENS: u32 = 3;

    impl<'d> Queue<'d> {
        /// The queue of the lock `base` in `dir`, whose markers have
        /// `mode` (the side file gets it too); `enabled` false: none.
        pub(crate) fn new(
            dir: &'d Dir,
            base: &[u8],
            mode: u32,
            key: Option<Arc<Path>>,
            enabled: bool,
        ) -> Self {
            let at = match enabled && os::QUEUES {
                true => queue_name(base).ok().map(|name| (dir, name)),
                false => None,
            };
            Queue {
                at,
                mode,
                key,
                state: State::Out,
                served: None,
            }
        }

        /// Where this wait stands, joining the queue at the first call.
        pub(crate) fn standing(&mut self) -> Standing {
            if let State::Out = self.state {
                self.state = self.join();
                if let State::In(member, _) = &self.state {
                    self.served = os::served(member.fd.as_fd());
                }
            }
            let State::In(member, pid) = &self.state else {
                return Standing::Off;
            };
            if *pid != crate::pid::id() {
                // A forked child's copy of its parent's place: the open file
                // description is the parent's, and so are its locks.
                self.forget();
                return Standing::Off;
            }
            let turn = crate::sync::lock(&member.at).turn;
            match turn {
                Turn::Mine => Standing::Head,
                Turn::Waiting => Standing::Behind,
                Turn::Failed | Turn::Left => {
                    self.leave();
                    Standing::Off
                }
            }
        }

        /// Whether the queue moved toward this member since it last looked:
        /// the member last served (the ticket it wrote as it took the
        /// lock) is another, and one ahead of this member. A turn served
        /// behind it (a member that took the lock at its poll, past one
        /// stopped ahead) is no sign that this member's turn comes.
        pub(crate) fn moved(&mut self) -> bool {
            let State::In(member, _) = &self.state else {
                return false;
            };
            let Some(mine) = crate::sync::lock(&member.at).ticket else {
                return false;
            };
            crate::sync::syscall();
            let now = os::served(member.fd.as_fd());
            let before = std::mem::replace(&mut self.served, now);
            now.is_some_and(|served| served < mine) && before != now
        }

        /// This member's turn came because a member ahead of it took the
        /// lock since it last looked (see [`moved`](Self::moved)): the
        /// process that holds it, as the queue says (`None` for this
        /// process or one not written), and the inode of the marker it
        /// made; `None` if the turn came otherwise (a member ahead left
        /// without the lock) or the queue cannot say.
        pub(crate) fn turn_after_take(&mut self) -> Option<(Option<u32>, u64)> {
            if self.standing() != Standing::Head || !self.moved() {
                return None;
            }
            let State::In(member, pid) = &self.state else {
                return None;
            };
            crate::sync::syscall();
            let (by, ino) = os::served_by(member.fd.as_fd())?;
            Some((by.filter(|p| *p != pid.number()), ino))
        }

        /// The lock was taken, its marker the inode `marker`: a member with
        /// a ticket writes it as the one last served, for those behind it
        /// (see [`moved`](Self::moved)), with its process and that inode.
        pub(crate) fn taken(&mut self, marker: u64) {
            if let State::In(member, pid) = &self.state {
                let ticket = crate::sync::lock(&member.at).ticket;
                if let (true, Some(ticket)) = (*pid == crate::pid::id(), ticket) {
                    crate::sync::syscall();
                    os::serve(member.fd.as_fd(), ticket, pid.number(), marker);
                }
            }
        }

        fn join(&self) -> State {
            let Some((dir, name)) = &self.at else {
                return State::Off;
            };
            for _ in 0..REOPENS {
                crate::sync::syscall();
                let Ok((fd, made)) = os::open(dir.as_fd(), name, self.mode) else {
                    return State::Off;
                };
                // A lock call refused (a kernel before 3.15, a filesystem
                // without them): no queue, and a side file this wait made
                // goes, as no member will ever remove it.
                let refused = |fd: OwnedFd| {
                    if made && os::still_there(dir.as_fd(), name, fd.as_fd()) {
                        let _ = os::remove(dir.as_fd(), name);
                    }
                    State::Off
                };
                match os::join(fd.as_fd()) {
                    Ok(()) => {}
                    // The last member removes the file: open it anew.
                    Err(e) if e == Errno::AGAIN || e == Errno::ACCES => continue,
                    Err(_) => return refused(fd),
                }
                if !os::still_there(dir.as_fd(), name, fd.as_fd()) {
                    continue;
                }
                crate::sync::syscall();
                let (turn, ticket) = match os::draw(fd.as_fd(), false) {
                    Ok(ticket) => match os::ahead_left(fd.as_fd(), ticket, false) {
                        Ok(true) => (Turn::Mine, Some(ticket)),
                        Ok(false) => (Turn::Waiting, Some(ticket)),
                        Err(_) => {
                            let _ = os::leave(fd.as_fd(), ticket);
                            return refused(fd);
                        }
                    },
                    // Another draws now: the waiting thread draws after it.
                    Err(e) if e == Errno::AGAIN || e == Errno::ACCES => (Turn::Waiting, None),
                    Err(_) => return refused(fd),
                };
                let member = Arc::new(Member {
                    fd,
                    at: Mutex::new(At { turn, ticket }),
                });
                if turn == Turn::Waiting && !wait_for_turn(&member) {
                    member.leave();
                    let _ = self.let_go(member);
                    return State::Off;
                }
                return State::In(member, crate::pid::id());
            }
            State::Off
        }

        /// Leaves the queue: gives up its turn, or the turn its waiting
        /// thread gets; the last member removes the file.
        pub(crate) fn leave(&mut self) {
            let member = match std::mem::replace(&mut self.state, State::Off) {
                State::In(member, pid) => (member, pid),
                State::Out => {
                    if let Some(key) = &self.key {
                        again(key);
                    }
                    return;
                }
                State::Off => return,
            };
            let (member, pid) = member;
            if pid != crate::pid::id() {
                self.state = State::In(member, pid);
                return self.forget();
            }
            member.leave();
            let alone = self.let_go(member);
            if let Some(key) = &self.key {
                mark(key, !alone);
            }
        }

        /// Removes the side file if this member is its last, or else stops
        /// being a member (its waiting thread, still blocked in the kernel,
        /// may keep the descriptor open a while: it counts as none); then
        /// closes this open of the file, once that thread is done with it.
        /// Whether it was the last.
        fn let_go(&self, member: Arc<Member>) -> bool {
            let Some((dir, name)) = &self.at else {
                return true;
            };
            crate::sync::syscall();
            let alone = os::alone(member.fd.as_fd());
            if alone && os::still_there(dir.as_fd(), name, member.fd.as_fd()) {
                let _ = os::remove(dir.as_fd(), name);
            }
            if !alone {
                let _ = os::quit(member.fd.as_fd());
            }
            alone
        }

        /// A forked child's place: its descriptor is left open, never
        /// closed, unlocked or used (its number may be reused by the child's
        /// own files if the child closed it).
        fn forget(&mut self) {
            if let State::In(member, _) = std::mem::replace(&mut self.state, State::Off) {
                std::mem::forget(member);
            }
        }
    }

    impl Drop for Queue<'_> {
        fn drop(&mut self) {
            self.leave();
        }
    }

    /// Starts the thread that waits in the kernel for `member`'s turn (or
    /// hands the work to an idle one); `false` if none could be started.
    fn wait_for_turn(member: &Arc<Member>) -> bool {
        #[cfg(all(test, swaplock_model))]
        crate::sync::model::queue_thread_started();
        let theirs = Arc::clone(member);
        THREADS
            .run(Box::new(move || {
                wait_in_kernel(&theirs);
                true
            }))
            .is_ok()
    }

    impl Member {
        /// Leaves its place: the member after it may go ahead.
        fn leave(&self) {
            let mut at = crate::sync::lock(&self.at);
            at.turn = Turn::Left;
            if let Some(ticket) = at.ticket.take() {
                crate::sync::syscall();
                let _ = os::leave(self.fd.as_fd(), ticket);
            }
        }
    }

    /// Waits in the kernel for a ticket (if the waiter could not draw one
    /// at once) and for the member before it to leave, then hands the turn
    /// to the waiter; what it gets after the waiter left, it gives up.
    fn wait_in_kernel(member: &Member) {
        let drawn = crate::sync::lock(&member.at).ticket;
        let ticket = match drawn {
            Some(ticket) => Ok(ticket),
            None => blocking(member, os::draw),
        };
        let ticket = ticket.and_then(|ticket| {
            let mut at = crate::sync::lock(&member.at);
            if at.turn != Turn::Waiting {
                // The waiter left: the place goes too.
                let _ = os::leave(member.fd.as_fd(), ticket);
                return Err(Errno::AGAIN);
            }
            at.ticket = Some(ticket);
            Ok(ticket)
        });
        let ahead = ticket.and_then(|t| {
            blocking(member, |fd, wait| match os::ahead_left(fd, t, wait) {
                Ok(true) => Ok(()),
                Ok(false) => Err(Errno::AGAIN),
                Err(e) => Err(e),
            })
        });
        let mut at = crate::sync::lock(&member.at);
        if at.turn == Turn::Waiting {
            at.turn = match ahead {
                Ok(()) => Turn::Mine,
                Err(_) => Turn::Failed,
            };
        }
        drop(at);
        super::super::notify_turn();
    }

    /// A waiting lock call, `call(fd, wait)`, again after `EINTR`. Under
    /// the model checker it is a loop of attempts that lets another thread
    /// run between them, as the kernel lock's (`src/kernel/inodes.rs`),
    /// and ends once the waiter left.
    fn blocking<T>(
        member: &Member,
        call: impl Fn(std::os::fd::BorrowedFd<'_>, bool) -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        #[cfg(swaplock_model)]
        {
            let mut blocked = false;
            loop {
                crate::sync::syscall();
                match call(member.fd.as_fd(), false) {
                    Err(e) if e == Errno::AGAIN || e == Errno::ACCES => {
                        if !blocked {
                            blocked = true;
                            crate::sync::model::block(1);
                        }
                        if crate::sync::lock(&member.at).turn == Turn::Left {
                            crate::sync::model::block(-1);
                            return Err(e);
                        }
                    }
                    done => {
                        if blocked {
                            crate::sync::model::block(-1);
                        }
                        return done;
                    }
                }
            }
        }
        #[cfg(not(swaplock_model))]
        loop {
            match call(member.fd.as_fd(), true) {
                Err(e) if e == Errno::INTR => continue,
                done => return done,
            }
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod imp {
    use super::super::Dir;

    /// Where a waiter stands: here, always without a queue.
    #[allow(dead_code)] // The queue's answers, never given here.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Standing {
        Head,
        Behind,
        Off,
    }

    /// No host queue here: waiters poll.
    pub(crate) struct Queue<'d>(std::marker::PhantomData<&'d Dir>);

    impl<'d> Queue<'d> {
        pub(crate) fn new(
            _: &'d Dir,
            _: &[u8],
            _: u32,
            _: Option<std::sync::Arc<std::path::Path>>,
            _: bool,
        ) -> Self {
            Queue(std::marker::PhantomData)
        }

        pub(crate) fn standing(&mut self) -> Standing {
            Standing::Off
        }

        pub(crate) fn leave(&mut self) {}

        pub(crate) fn taken(&mut self, _: u64) {}

        pub(crate) fn moved(&mut self) -> bool {
            false
        }

        pub(crate) fn turn_after_take(&mut self) -> Option<(Option<u32>, u64)> {
            None
        }
    }

    pub(crate) const MOST_SKIPS: usize = 0;

    /// No queue here, so none is joined first.
    pub(crate) fn contended(_: &std::path::Path) -> bool {
        false
    }

    /// No waiting threads here.
    #[doc(hidden)]
    pub fn queue_threads() -> usize {
        0
    }
}

pub use imp::queue_threads;
pub(crate) use imp::{contended, Queue, Standing, MOST_SKIPS};
