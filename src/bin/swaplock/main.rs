//! `swaplock`: run a command under a lock of any kind, and inspect or break
//! soft locks.
//!
//! ```text
//! swaplock run [--kind fcntl|flock|sqlite|soft|marker|lease|rw|strict]
//!              [--wait|--fail|--quiet] [--shared|-s] [--timeout SECS]
//!              [--lifetime SECS] [--lease SECS] [--no-sync]
//!              LOCKFILE COMMAND [ARGS...]
//! swaplock status [--kind KIND] LOCKFILE
//! swaplock run --etcd URL[,URL...] [--lease SECS] [...] NAME COMMAND [ARGS...]
//! swaplock status --etcd URL[,URL...] NAME
//! swaplock break [--kind soft|marker|lease|rw|strict] [--force] LOCKFILE
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
//! `--kind rw` is the read-write soft lock (filelock's `SoftReadWriteLock`):
//! `run -s` reads, `run` writes, and the command gets the generation as
//! `SWAPLOCK_FENCING_TOKEN`.
//!
//! `status` prints who holds the lock, judged as a contender judges it, and
//! exits 0 when it is free, 1 when it is held. `break` removes a stale
//! marker by the same safe path a contender uses, explains by the same
//! judgement why a marker stays, and refuses a live holder unless `--force`;
//! of a strict lock it removes the claims of holders this host proves gone.

/// Whether `SWAPLOCK_ALLOW_CLIENT_LOCAL=1` accepts kernel locks on a
/// filesystem that keeps them per client mount (no other host uses it).
fn client_local() -> bool {
    std::env::var_os("SWAPLOCK_ALLOW_CLIENT_LOCAL").is_some_and(|v| v == "1")
}

fn main() {
    std::process::exit(cli::main(std::env::args_os().skip(1).collect()));
}

mod cli;
