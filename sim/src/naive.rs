//! The soft-lock protocol as it stood before the seed's fixes, as a small
//! separate state machine that exists only to be broken: the simulator must
//! find each race the seed describes against it, and none against
//! `swaplock-core`.
//!
//! What it does wrong, on purpose:
//! - judges a marker from a read it has already closed (no pin), and then
//!   accepts any file with the judged inode number and an mtime no newer
//!   than the one read;
//! - breaks by renaming the marker aside, checking only afterwards whether it
//!   was the judged one, and renames a recreated one back by name (which
//!   replaces whatever a third process created meanwhile), or under Windows
//!   rules links it back by a name it checked before, following a symlink
//!   a peer put there since;
//! - keys the malformed watch on (mtime, inode) only;
//! - rolls back a failed acquire, and releases, by name after closing;
//! - never looks for a killed breaker's stranded marker;
//! - breaks by lifetime on an `lstat` of the path.

pub use crate::cast::Flaws;
use crate::os::SimOs;
use swaplock_core::decide::{judge_owner, FileTime, Verdict, WatchKey, MALFORMED_GRACE};
use swaplock_core::names::pid_break_name;
use swaplock_core::record::{
    classify, Classified, Content, Reader, Record, V1Record, MAX_RECORD_LEN, READ_LIMIT,
};
use swaplock_core::soft::{
    Clock, Config, Contender, Dir, Entropy, Held, NodeKind, Processes, Semantics, Stat,
};

fn read(os: &mut SimOs<'_>, name: &[u8]) -> Option<(Vec<u8>, bool, Stat)> {
    let st = os.lstat(name).ok()?;
    if st.kind != NodeKind::Regular {
        return Some((Vec::new(), false, st));
    }
    let f = os.open_read(name).ok()?;
    let st = os.fstat(&f).ok();
    let mut buf = vec![0u8; READ_LIMIT];
    let n = os.read(&f, &mut buf).unwrap_or(0);
    os.close(f);
    buf.truncate(n);
    Some((buf, true, st?))
}

/// The pre-fix "same file" check: the inode number, and an mtime no newer.
fn looks_judged(st: &Stat, judged: &Stat) -> bool {
    st.id.ino == judged.id.ino && st.mtime <= judged.mtime
}

/// One attempt, the old way. Returns the marker's descriptor and inode
/// when the lock was taken.
pub fn try_acquire(
    os: &mut SimOs<'_>,
    cfg: &Config<'_>,
    flaws: Flaws,
    watch: &mut Contender,
) -> Option<(u32, u64)> {
    if let Some(lifetime) = cfg.lifetime {
        // Lifetime break on an lstat of the path.
        if let Ok(st) = os.lstat(cfg.lock) {
            if swaplock_core::decide::lifetime_expired(os.wall(), st.mtime, lifetime) {
                break_aside(os, cfg, &st);
            }
        }
    }
    match os.create_new(cfg.lock, 0o644, true) {
        Ok(fd) => return publish(os, cfg, fd),
        Err(e) if e == swaplock_core::Errno::EXIST => {}
        Err(_) => return None,
    }
    let (content, regular, judged) = read(os, cfg.lock)?;
    let content = if regular {
        Content::Bytes(&content)
    } else {
        Content::NotRegular
    };
    let stale = match classify(content, Reader::Protocol1) {
        Classified::Sentinel | Classified::Recordless | Classified::V2(_) => false,
        Classified::Malformed(_) => {
            let mut key = WatchKey {
                mtime: judged.mtime,
                ino: judged.id.ino,
                ctime: judged.ctime,
            };
            if flaws.watch_without_ctime {
                key.ctime = FileTime::default();
            }
            watch_observe(watch, key, os) >= MALFORMED_GRACE
        }
        Classified::V1(r) => {
            let owner = r.owner();
            let probe = os.probe(owner.pid);
            let current = os.start_token(owner.pid);
            matches!(
                judge_owner(&owner, cfg.host, probe, current),
                Verdict::Stale | Verdict::StaleUnlessRunsElsewhere
            )
        }
    };
    if stale {
        break_aside(os, cfg, &judged);
        // The path is free now (or so it seems): try again at once.
        if let Ok(fd) = os.create_new(cfg.lock, 0o644, true) {
            return publish(os, cfg, fd);
        }
    }
    None
}

fn watch_observe(watch: &mut Contender, key: WatchKey, os: &mut SimOs<'_>) -> core::time::Duration {
    swaplock_core::soft::observe_watch(watch, key, os.now())
}

/// Renames the marker aside, then checks it; a recreated one goes back by
/// rename, replacing whatever is at the path by then.
fn break_aside(os: &mut SimOs<'_>, cfg: &Config<'_>, judged: &Stat) {
    let Ok(current) = os.lstat(cfg.lock) else {
        return;
    };
    if !looks_judged(&current, judged) {
        return;
    }
    let token = os.token();
    let Ok(aside) = pid_break_name(cfg.lock, cfg.pid, &token) else {
        return;
    };
    if os.rename(cfg.lock, &aside).is_err() {
        return;
    }
    match os.lstat(&aside) {
        Ok(st) if looks_judged(&st, judged) => {
            let _ = os.unlink(&aside);
        }
        // Windows: a recreated marker goes back by a link, which never
        // replaces a name, but through a path that follows a symlink a
        // peer put at the break name after the lstat.
        Ok(st) if os.semantics() == Semantics::Handles && st.kind == NodeKind::Regular => {
            let _ = os.link(&aside, cfg.lock, true);
            let _ = os.unlink(&aside);
        }
        _ => {
            let _ = os.rename(&aside, cfg.lock);
        }
    }
}

fn publish(os: &mut SimOs<'_>, cfg: &Config<'_>, fd: u32) -> Option<(u32, u64)> {
    let id = os.fstat(&fd).ok()?.id;
    let mut buf = [0u8; MAX_RECORD_LEN];
    let record = Record::V1(V1Record {
        pid: cfg.pid,
        host: cfg.host,
        start: None,
    });
    let n = record.encode(&mut buf).ok()?;
    let mut at = 0;
    while at < n {
        match os.write(&fd, &buf[at..n]) {
            Ok(0) | Err(_) => {
                // Roll back the old way: close, then unlink by name if the
                // path still shows the same inode number.
                os.close(fd);
                if os.lstat(cfg.lock).is_ok_and(|st| st.id == id) {
                    let _ = os.unlink(cfg.lock);
                }
                return None;
            }
            Ok(k) => at += k,
        }
    }
    Some((fd, id.ino))
}

/// Releases the old way: close, then unlink by name if the path still
/// shows the same inode number.
pub fn release(os: &mut SimOs<'_>, cfg: &Config<'_>, _flaws: Flaws, held: Held<u32>) {
    let id = held.id;
    os.close(held.file);
    if os.lstat(cfg.lock).is_ok_and(|st| st.id == id) {
        let _ = os.unlink(cfg.lock);
    }
}
