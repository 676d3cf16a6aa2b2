//! `run --kind sqlite`: the lock of Python filelock's `ReadWriteLock`,
//! held by this process (a supervisor, as for soft kinds) while the
//! command runs: the command never holds the database's descriptor, so
//! nothing it opens or closes can drop the lock.

use super::*;
use swaplock::sqlite::Mode;
use swaplock::{SqliteRwGuard, SqliteRwLock};

/// The lock `run` takes: its read lock with `--shared`, else its write
/// lock.
struct Side<'a>(&'a SqliteRwLock, Mode);

impl Acquire for Side<'_> {
    type Guard = SqliteRwGuard;
    fn lock(&self) -> std::io::Result<SqliteRwGuard> {
        match self.1 {
            Mode::Read => self.0.read(),
            Mode::Write => self.0.write(),
        }
    }
    fn try_lock(&self) -> std::io::Result<SqliteRwGuard> {
        match self.1 {
            Mode::Read => self.0.try_read(),
            Mode::Write => self.0.try_write(),
        }
    }
    fn lock_timeout(&self, timeout: Duration) -> std::io::Result<SqliteRwGuard> {
        match self.1 {
            Mode::Read => self.0.read_timeout(timeout),
            Mode::Write => self.0.write_timeout(timeout),
        }
    }
    /// The hook is called once, when the wait begins.
    fn lock_with(
        &self,
        timeout: Option<Duration>,
        hook: &mut dyn FnMut(Duration) -> std::ops::ControlFlow<()>,
    ) -> std::io::Result<SqliteRwGuard> {
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

impl Held for SqliteRwGuard {
    fn compromise(&self) -> Option<Compromise> {
        None
    }
    fn lease_lost(&self) -> Option<Compromise> {
        None
    }
    fn release(self) -> std::io::Result<()> {
        SqliteRwGuard::release(self)
    }
}

pub(super) fn run_sqlite(opts: Options) -> i32 {
    let events = match Events::new() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("swaplock: cannot make a pipe: {e}");
            return 255;
        }
    };
    // Classic locks, as SQLite's own: `status` names this process.
    let lock = SqliteRwLock::new(PathBuf::from(&opts.rest[0])).owned_by_process();
    let mode = match opts.shared {
        true => Mode::Read,
        false => Mode::Write,
    };
    let guard = match take(&opts, &Side(&lock, mode)) {
        Ok(g) => g,
        Err(code) => return code,
    };
    let path = lock.path().display().to_string();
    supervise(&opts, &events, &path, guard)
}
