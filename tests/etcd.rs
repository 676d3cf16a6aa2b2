//! The etcd backend against a real etcd: one member, and a cluster of
//! three, plain (here) and secured with TLS and authentication
//! (`etcd/secured.rs`, feature `etcd-tls`). Contenders in several processes
//! take turns under an independent checker, a holder killed or stopped
//! loses the lock after its lease's TTL (a stopped one learns it when it
//! runs again, and `swaplock run` stops its command), the cluster's leader
//! is killed and restarted without wedging anyone, and `etcdctl lock` on
//! the same name excludes us and is excluded by us.
//!
//! The checker: each holder's command appends `start T`, `tick T` and
//! `end T` records (T its fencing token) to one file opened with
//! `O_APPEND`. Start tokens must rise strictly, and no record may carry a
//! token older than the latest start: that would be a holder acting after
//! the lock passed on, which a resource fenced by the token refuses.
//!
//! Every wait is on a process's exit or a file's content, polled with a
//! deadline; the deadlines are safety nets that turn a hang into a failure.

#![cfg(target_os = "linux")]

#[path = "etcd/cases.rs"]
mod cases;
mod common;
#[path = "etcd/harness.rs"]
mod harness;
#[cfg(feature = "etcd-tls")]
#[path = "etcd/pki.rs"]
mod pki;
#[path = "etcd/review.rs"]
mod review;
#[cfg(feature = "etcd-tls")]
#[path = "etcd/secured.rs"]
pub(crate) mod secured;

use common::swaplock;
use harness::*;
use std::fs;
use std::process::Command;
use std::time::Duration;
use swaplock::etcd::EtcdLock;
use swaplock::soft::Compromise;

#[test]
fn contenders_in_several_processes_take_turns_with_rising_fencing_tokens() {
    let etcd = Etcd::start(1);
    let dir = tempfile::tempdir().unwrap();
    cases::contenders(&etcd.access(), "turns", 8, 20, dir.path());
}

#[test]
fn a_killed_holder_passes_the_lock_after_its_ttl() {
    let etcd = Etcd::start(1);
    let dir = tempfile::tempdir().unwrap();
    cases::killed_holder(&etcd.access(), "killed", dir.path());
}

#[test]
fn a_stopped_holder_learns_when_it_resumes_that_it_lost_the_lock() {
    let etcd = Etcd::start(1);
    let dir = tempfile::tempdir().unwrap();
    cases::stopped_holder(&etcd.access(), "stopped", dir.path());
}

#[test]
fn etcdctl_lock_and_ours_exclude_each_other_both_ways() {
    let etcd = Etcd::start(1);
    let dir = tempfile::tempdir().unwrap();
    cases::etcdctl_interop(&etcd.access(), "shared", dir.path());
}

#[test]
fn a_cluster_whose_leader_is_killed_and_restarted_never_wedges_a_contender() {
    let mut etcd = Etcd::start(3);
    let access = etcd.access();
    let dir = tempfile::tempdir().unwrap();
    cases::leader_killed(&mut etcd, &access, "cluster", dir.path());
}

#[test]
fn the_library_guard_waits_fails_and_fences_as_the_file_locks_do() {
    let etcd = Etcd::start(1);
    let url = etcd.members[0].client.clone();
    let lock = EtcdLock::new([url.clone()], "library").lease_ttl(Duration::from_secs(2));
    let first = lock.lock().unwrap();
    assert_eq!(first.key(), format!("library/{:x}", first.lease_id()));
    assert_eq!(first.revision(), first.fencing_token());
    assert_eq!(first.lease_lost(), None);
    let busy = lock.try_lock().unwrap_err();
    assert_eq!(busy.kind(), std::io::ErrorKind::WouldBlock, "{busy}");
    let late = lock.lock_timeout(Duration::ZERO).unwrap_err();
    assert_eq!(late.kind(), std::io::ErrorKind::TimedOut, "{late}");
    // Those left no key behind: the holder is alone.
    let holder = lock.holder().unwrap().expect("held");
    assert_eq!((holder.key.as_str(), holder.waiting), (first.key(), 0));
    let token = first.fencing_token();
    // The keep-alive holds the lease past its TTL while this thread waits.
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = lock.clone();
    let second = std::thread::spawn(move || {
        let guard = waiter.lock();
        let _ = tx.send(());
        guard
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(5)).is_err(),
        "still held after 2.5 TTLs"
    );
    assert_eq!(first.lease_lost(), None);
    first.release().unwrap();
    let second = second.join().unwrap().unwrap();
    assert!(second.fencing_token() > token);
    // Our key removed under us: the holder learns it.
    let out = Command::new(program("etcdctl"))
        .args(["--endpoints", &url, "del", second.key()])
        .env("ETCDCTL_API", "3")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(second.lease_lost(), Some(Compromise::MarkerMissing));
    drop(second);
    assert_eq!(lock.holder().unwrap(), None);
}

#[test]
fn bad_input_and_an_unreachable_cluster_are_errors_that_say_why() {
    let empty = EtcdLock::new(["http://127.0.0.1:1"], "")
        .try_lock()
        .unwrap_err();
    assert_eq!(empty.kind(), std::io::ErrorKind::InvalidInput);
    let none = EtcdLock::new(Vec::<String>::new(), "x")
        .try_lock()
        .unwrap_err();
    assert_eq!(none.kind(), std::io::ErrorKind::InvalidInput);
    let bad = EtcdLock::new(["ht tp://nowhere"], "x")
        .try_lock()
        .unwrap_err();
    assert_eq!(bad.kind(), std::io::ErrorKind::InvalidInput, "{bad}");
    // A port kept bound: one only free when asked was taken once by an
    // etcd another test started, and the command below then ran.
    let (_kept, port) = common::refused_port();
    let url = format!("http://127.0.0.1:{port}");
    let away = EtcdLock::new([url.clone()], "x")
        .request_timeout(Duration::from_secs(1))
        .lock()
        .unwrap_err();
    let said = away.to_string();
    assert!(
        said.contains(&url) && said.contains("is etcd running"),
        "{said}"
    );
    let out = Command::new(swaplock())
        .args(["run", "--etcd", &url, "x", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(255));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&url));
}

/// One member of three frozen (SIGSTOP: a paused VM, or its traffic
/// dropped) costs no holder its lock and wedges no waiter: the keep-alive
/// and the waits leave a member that stops answering for another, as a
/// member that refuses. Six holders on six names, each with a waiter
/// behind it, the member frozen for more than three lease TTLs.
#[test]
fn a_frozen_member_costs_no_holder_its_lock_and_wedges_no_waiter() {
    const NAMES: usize = 6;
    let etcd = Etcd::start(3);
    let access = etcd.access();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut holders = Vec::new();
    let mut waiters = Vec::new();
    for i in 0..NAMES {
        let (name, who) = (format!("frozen-{i}"), format!("h{i}"));
        // One log per name: the checker judges one lock's turns.
        let log = d.join(format!("log{i}"));
        let mut holder = hold(&access, &[], &name, &who, d);
        holders.push(holder.env("LOG", &log).spawn().unwrap());
        ready(d, &who);
        let mut waiter = run(&access, &["-w", "60"], &name, TURN, d);
        waiters.push(waiter.env("LOG", &log).spawn().unwrap());
        wait_for("the waiter to queue", || waiting(&access, &name) == Some(1));
    }
    let mut leader = None;
    wait_for("a leader", || {
        leader = etcd.leader();
        leader.is_some()
    });
    let frozen = (0..3).find(|&i| Some(i) != leader).unwrap();
    let member = etcd.members[frozen].child.as_ref().unwrap().id();
    signal(member, libc::SIGSTOP);
    let thawed = Stopped(member);
    // The holders' own clocks: 3 TTLs (TTL 2 s) of ticks after the freeze.
    let logs: Vec<_> = (0..NAMES).map(|i| d.join(format!("log{i}"))).collect();
    let tokens: Vec<String> = logs
        .iter()
        .map(|log| {
            let text = fs::read_to_string(log).unwrap();
            let first = text.lines().next().unwrap_or_default().to_owned();
            first.strip_prefix("start ").unwrap().to_owned()
        })
        .collect();
    let before: Vec<usize> = (0..NAMES).map(|i| ticks(&logs[i], &tokens[i])).collect();
    wait_for("3 TTLs of every holder's ticks", || {
        (0..NAMES).all(|i| ticks(&logs[i], &tokens[i]) >= before[i] + 120)
    });
    for i in 0..NAMES {
        fs::write(d.join(format!("h{i}.go")), "").unwrap();
    }
    // Every holder kept its lock to the end and released it; every waiter
    // then had its turn; all while the member stayed frozen.
    for (i, h) in holders.iter_mut().enumerate() {
        let status = exit_of(h, "a holder");
        assert!(status.success(), "holder {i}: {status}: {}", stderr_of(h));
    }
    for (i, w) in waiters.iter_mut().enumerate() {
        let status = exit_of(w, "a waiter");
        assert!(status.success(), "waiter {i}: {status}: {}", stderr_of(w));
    }
    drop(thawed);
    for log in &logs {
        let c = check(log);
        assert_eq!((c.starts, c.overlaps, c.not_rising), (2, 0, 0), "{c:?}");
    }
}

/// A guard used in a child forked from its holder leaves the lock alone:
/// the child's release is an error that says so, its drop returns at once,
/// and the parent still holds and releases the lock.
#[test]
fn a_guard_in_a_forked_child_leaves_the_lock_to_its_parent() {
    let etcd = Etcd::start(1);
    let url = etcd.members[0].client.clone();
    let lock = EtcdLock::new([url], "forked").lease_ttl(Duration::from_secs(2));
    let guard = lock.lock().unwrap();
    // SAFETY: the child only releases a guard and exits, by _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = match guard.release() {
            Err(e) if e.to_string().contains("forked from") => 0,
            _ => 1,
        };
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    assert!(pid > 0);
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status}"
    );
    assert_eq!(guard.lease_lost(), None);
    assert_eq!(
        lock.holder().unwrap().map(|h| h.key),
        Some(guard.key().to_owned())
    );
    guard.release().unwrap();
    assert_eq!(lock.holder().unwrap(), None);
}
