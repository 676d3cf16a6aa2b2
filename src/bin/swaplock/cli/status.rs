//! `status`: who holds a lock, in words or as JSON.

use super::*;

/// How a contender stands toward the recorded holder, for `status`:
/// `alive`, `dead`, `pid reused` (alive, but another process: the
/// start token differs) or `cannot tell` (another host, a failed
/// probe, or a marker that names no holder a contender would judge).
pub(super) fn describe_holder(standing: Standing) -> &'static str {
    match standing {
        Standing::Held(HeldBecause::Alive) => "alive",
        Standing::Stale { recycled: true } => "pid reused",
        Standing::Stale { recycled: false } => "dead",
        _ => "cannot tell",
    }
}

/// `s` as a JSON string.
pub(super) fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// What `status` found: the holder, if any.
pub(super) struct Found {
    pub(super) pid: Option<i64>,
    pub(super) host: Option<String>,
    pub(super) mode: String,
    /// Why a marker is malformed, or what is unknown about it.
    pub(super) reason: Option<String>,
    pub(super) age: Option<Duration>,
    pub(super) lease: Option<f64>,
    pub(super) standing: &'static str,
}

pub(super) fn kind_name(kind: LockKind) -> &'static str {
    match kind {
        LockKind::Fcntl => "fcntl",
        LockKind::Flock => "flock",
        #[cfg(unix)]
        LockKind::Sqlite => "sqlite",
        LockKind::Soft(Kind::Soft) => "soft",
        LockKind::Soft(Kind::Marker) => "marker",
        LockKind::Soft(_) => "lease",
        LockKind::Rw => "rw",
        LockKind::Strict => "strict",
    }
}

/// Who holds the lock of `opts`, as a contender judges it (an etcd
/// lock's holder is no process: nobody is named).
pub(super) fn find_holder(opts: &Options) -> std::io::Result<Option<Found>> {
    if opts.etcd.is_some() {
        return Ok(None);
    }
    let path = PathBuf::from(&opts.rest[0]);
    let kernel = match opts.kind {
        LockKind::Fcntl => FileLock::new(&path),
        LockKind::Flock => FileLock::flock(&path),
        #[cfg(unix)]
        LockKind::Sqlite => return sqlite_holder(&path),
        LockKind::Soft(kind) => return soft_holder(soft_lock(opts, kind)),
        #[cfg(unix)]
        LockKind::Rw => return rw_holder(opts),
        #[cfg(windows)]
        LockKind::Rw => {
            let kind = std::io::ErrorKind::Unsupported;
            return Err(std::io::Error::new(
                kind,
                "the read-write lock is for POSIX systems",
            ));
        }
        #[cfg(unix)]
        LockKind::Strict => return strict::holder(&path),
        #[cfg(windows)]
        LockKind::Strict => return Ok(None),
    };
    // An fcntl query needs the file; a missing one is free.
    if opts.kind == LockKind::Fcntl && std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    #[cfg(windows)]
    return probe_kernel(&kernel, &path);
    #[cfg(unix)]
    match kernel.holder() {
        Ok(holder) => Ok(holder.map(|h| Found {
            // 0: a holder in a PID namespace this one cannot see.
            pid: (h.pid != 0).then_some(i64::from(h.pid)),
            host: None,
            mode: if h.shared { "shared" } else { "exclusive" }.into(),
            reason: None,
            age: None,
            lease: None,
            standing: describe_holder(h.standing()),
        })),
        // flock answered ENOSYS: the lock is a soft lock here, as
        // run --kind flock takes it (filelock's SoftFileLock).
        Err(e) if opts.kind == LockKind::Flock && is_enosys(&e) => {
            soft_holder(SoftLock::soft(&path))
        }
        Err(e) => Err(e),
    }
}

/// Who holds the SQLite lock on database `path`, as `F_GETLK` shows
/// it: a writer, or readers (one named), with a writer waiting for them
/// or about to, which the reason says.
#[cfg(unix)]
pub(super) fn sqlite_holder(path: &std::path::Path) -> std::io::Result<Option<Found>> {
    let held = swaplock::SqliteRwLock::new(path).holding()?;
    let found = |pid: i32, mode: &str, reason: Option<String>| Found {
        pid: Some(i64::from(pid)),
        host: None,
        mode: mode.into(),
        reason,
        age: None,
        lease: None,
        standing: "alive",
    };
    let pid = |p: i32| match p {
        -1 => "-1 (an open file description lock)".to_owned(),
        p => p.to_string(),
    };
    let writer = match (held.pending, held.reserved) {
        (Some(w), _) => Some(format!(
            "a writer waits for the readers, holding pending: pid {}",
            pid(w)
        )),
        (None, Some(w)) => Some(format!("a writer holds reserved: pid {}", pid(w))),
        (None, None) => None,
    };
    Ok(
        match (held.exclusive, held.shared, held.pending, held.reserved) {
            (Some(w), ..) => Some(found(w, "exclusive", None)),
            (None, Some(r), ..) => Some(found(r, "shared", writer)),
            (None, None, Some(w), _) => Some(found(w, "pending", None)),
            (None, None, None, Some(w)) => Some(found(w, "reserved", None)),
            (None, None, None, None) => None,
        },
    )
}

/// Who holds soft lock `lock`, as a contender judges it.
pub(super) fn soft_holder(lock: SoftLock) -> std::io::Result<Option<Found>> {
    Ok(lock.status()?.map(|(owner, standing)| {
        // "malformed (why)": the mode, and the reason apart.
        let (mode, reason) = match owner.mode.split_once(" (") {
            Some((mode, why)) => {
                let why = why.strip_suffix(')').unwrap_or(why);
                (mode.to_owned(), Some(why.to_owned()))
            }
            None => (owner.mode.clone(), None),
        };
        Found {
            pid: owner.pid.map(i64::from),
            host: owner.host.clone(),
            mode,
            reason,
            age: owner.age,
            lease: owner.lease_seconds,
            standing: describe_holder(standing),
        }
    }))
}

/// Whether `e` is the `ENOSYS` of a filesystem without `flock`.
#[cfg(unix)]
pub(super) fn is_enosys(e: &std::io::Error) -> bool {
    let raw = swaplock::LockError::of(e).and_then(|l| l.os_error().raw_os_error());
    raw == Some(swaplock::core::Errno::NOSYS.raw())
}

/// Windows has no query for `LockFileEx` locks: whether the lock is
/// held is learned by trying it, without creating the file; the holder
/// is not known.
#[cfg(windows)]
pub(super) fn probe_kernel(
    lock: &FileLock,
    path: &std::path::Path,
) -> std::io::Result<Option<Found>> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(None);
    }
    let held = |shared| Found {
        pid: None,
        host: None,
        mode: if shared { "shared" } else { "exclusive" }.into(),
        reason: None,
        age: None,
        lease: None,
        standing: "alive",
    };
    match lock.try_lock() {
        Ok(guard) => guard.release().map(|()| None),
        Err(e) if e.kind() == ErrorKind::WouldBlock => match lock.try_lock_shared() {
            Ok(guard) => guard.release().map(|()| Some(held(true))),
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(Some(held(false))),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// The lock's filesystem and what it offers (PROTOCOL 13.5), as
/// `status` shows it: text, and JSON.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) fn filesystem(path: &std::path::Path) -> Option<(String, String)> {
    use swaplock::netfs::{Reach, Support};
    let fs = swaplock::netfs::filesystem(path).ok()?;
    let name = match fs.name.as_str() {
        "" => swaplock::core::fs::magic_name(fs.magic)
            .map_or_else(|| format!("0x{:x}", fs.magic), str::to_owned),
        name => name.to_owned(),
    };
    let reach = |r: Reach| match r {
        Reach::AllHosts => "all hosts",
        Reach::ThisClient => "this client only",
        _ => "unknown",
    };
    let support = |s: Support| match s {
        Support::Yes => "yes",
        Support::No => "no",
        _ => "unknown",
    };
    let t = fs.traits;
    let shown = match t.seen {
        true => name.clone(),
        false => format!("{name} (not in this process's mount table: cannot be told)"),
    };
    let create = match (t.exclusive_create, t.exists_as_eperm) {
        (Support::Yes, true) => "atomic (EPERM for an existing name)",
        (Support::Yes, false) => "atomic",
        (Support::No, _) => "not atomic between clients",
        _ => "unknown",
    };
    // An NFS mount: its version, and how a lock ends whose holder's host
    // dies or is cut off from the server.
    let nfs = t.nfs.map(|nfs| {
        use swaplock::core::fs::DeadHost;
        let version = nfs.version.map_or_else(
            || "NFS (version unknown)".to_owned(),
            |(major, minor)| match major {
                4 => format!("NFSv4.{minor}"),
                _ => format!("NFSv{major}"),
            },
        );
        let dead_host = match nfs.dead_host() {
            DeadHost::AfterLease => {
                "released by the server once the host's lease lapses (90 s by default)"
            }
            DeadHost::WhenItRestarts => {
                "released only when the host restarts and its statd tells the server \
                 (never while it stays away)"
            }
            _ => "unknown",
        };
        use swaplock::core::fs::Lookups;
        let (min, max) = nfs.file_attributes;
        let cache = match (min, max) {
            (0, 0) => "a file's attributes asked of the server at each look".to_owned(),
            (min, max) => format!(
                "a file's attributes may show another host's change {min} to {max} s late \
                 (a lease must outlast its heartbeat by that)"
            ),
        };
        let lookups = match nfs.lookups {
            Lookups::None => "none",
            Lookups::Positive => "pos",
            _ => "all",
        };
        (version, dead_host, cache, lookups, (min, max))
    });
    let nfs_text =
        nfs.as_ref()
            .map_or_else(String::new, |(version, dead_host, cache, lookups, _)| {
                format!(
                    "{version}; a lock whose holder's host dies or is cut off is {dead_host}; \
                 {cache}; lookupcache={lookups}; "
                )
            });
    // The kernel's SMB client: SMB by name, and the option that keeps its
    // locks on this client, where it is mounted with it.
    use swaplock::core::fs::magic;
    let smb_text = match fs.magic {
        magic::CIFS | magic::SMB2 | magic::SMB => "SMB (the kernel's cifs client); ",
        _ => "",
    };
    let reach_by = |r: Reach| match (r, t.local_locks_by) {
        (Reach::ThisClient, Some(by)) => format!("{} (mounted {by})", reach(r)),
        _ => reach(r).to_owned(),
    };
    let text = format!(
        "filesystem: {shown}: {nfs_text}{smb_text}remote {}; fcntl locks reach {}; flock locks \
         reach {}; exclusive create {create}; exchange {}",
        support(t.remote),
        reach_by(t.fcntl),
        reach_by(t.flock),
        support(t.exchange),
    );
    let nfs_json = nfs.map_or_else(
        String::new,
        |(version, dead_host, _, lookups, (min, max))| {
            format!(
            ",\"nfs\":{{\"version\":{},\"dead_host\":{},\"attribute_cache_seconds\":[{min},{max}],\
             \"lookupcache\":{}}}",
            json_string(&version),
            json_string(dead_host),
            json_string(lookups)
        )
        },
    );
    let by_json = t.local_locks_by.map_or_else(String::new, |by| {
        format!(",\"local_locks_by\":{}", json_string(by))
    });
    let json = format!(
        "{{\"type\":{},\"remote\":{},\"fcntl_locks\":{},\"flock_locks\":{},\
         \"exclusive_create\":{},\"exists_as_eperm\":{},\"exchange\":{},\"seen\":{}{nfs_json}\
         {by_json}}}",
        json_string(&name),
        json_string(support(t.remote)),
        json_string(reach(t.fcntl)),
        json_string(reach(t.flock)),
        json_string(support(t.exclusive_create)),
        t.exists_as_eperm,
        json_string(support(t.exchange)),
        t.seen,
    );
    Some((text, json))
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(super) fn filesystem(_: &std::path::Path) -> Option<(String, String)> {
    None
}

/// Another kind of lock at or beside the path of a soft lock of `opts`
/// (`None` for the other kinds, and where it cannot be read).
pub(super) fn find_mismatch(opts: &Options) -> Option<swaplock::soft::KindMismatch> {
    match opts.kind {
        LockKind::Soft(kind) if opts.etcd.is_none() => {
            soft_lock(opts, kind).mismatch().ok().flatten()
        }
        _ => None,
    }
}

pub(super) fn status(opts: Options) -> i32 {
    #[cfg(unix)]
    if opts.kind == LockKind::Strict {
        return strict::status(&opts);
    }
    let path = opts.rest[0].to_string_lossy().into_owned();
    let fs = filesystem(std::path::Path::new(&opts.rest[0]));
    #[cfg(unix)]
    if opts.kind == LockKind::Rw {
        return rw_status(&opts, fs);
    }
    let mismatch = find_mismatch(&opts);
    let found = match find_holder(&opts) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("swaplock: {e}");
            if let Some((text, _)) = &fs {
                eprintln!("swaplock: {text}");
            }
            return 2;
        }
    };
    let held = i32::from(found.is_some());
    let leftovers = match opts.kind {
        LockKind::Soft(kind) => soft_lock(&opts, kind).leftovers().unwrap_or_else(|e| {
            eprintln!("swaplock: cannot list what is beside the lock: {e}");
            Vec::new()
        }),
        _ => Vec::new(),
    };
    if !opts.json {
        status_text(found);
        if let Some(m) = &mismatch {
            println!("another kind of lock: {m}");
        }
        for l in &leftovers {
            println!("beside the lock: {}", leftover_text(l));
        }
        if let Some((text, _)) = fs {
            println!("{text}");
        }
        return held;
    }
    {
        let holder = match &found {
            None => "null".to_owned(),
            Some(f) => format!(
                "{{\"pid\":{},\"host\":{},\"mode\":{},\"reason\":{},\"age_seconds\":{},\
                 \"lease_seconds\":{},\"standing\":{}}}",
                f.pid.map_or("null".into(), |p| p.to_string()),
                f.host.as_deref().map_or("null".into(), json_string),
                json_string(&f.mode),
                f.reason.as_deref().map_or("null".into(), json_string),
                f.age
                    .map_or("null".into(), |a| format!("{:.3}", a.as_secs_f64())),
                f.lease
                    .filter(|l| l.is_finite())
                    .map_or("null".into(), |l| l.to_string()),
                json_string(f.standing),
            ),
        };
        let mismatch = mismatch.map_or("null".into(), |m| {
            format!(
                "{{\"code\":{},\"message\":{}}}",
                json_string(m.code()),
                json_string(&m.to_string())
            )
        });
        let leftovers: Vec<String> = leftovers
            .iter()
            .map(|l| {
                format!(
                    "{{\"name\":{},\"kind\":{},\"pid\":{},\"gone\":{}}}",
                    json_string(&l.name),
                    json_string(match l.kind {
                        LeftoverKind::Write => "write",
                        LeftoverKind::Break => "break",
                        _ => "restore",
                    }),
                    l.pid.map_or("null".into(), |p| p.to_string()),
                    l.gone.map_or("null".into(), |g| g.to_string()),
                )
            })
            .collect();
        println!(
            "{{\"path\":{},\"kind\":{},\"held\":{},\"holder\":{holder},\"filesystem\":{},\
             \"mismatch\":{mismatch},\"leftovers\":[{}]}}",
            json_string(&path),
            json_string(kind_name(opts.kind)),
            found.is_some(),
            fs.map_or("null".into(), |(_, json)| json),
            leftovers.join(","),
        );
        held
    }
}

/// A file beside the lock, and what becomes of it.
pub(super) fn leftover_text(l: &Leftover) -> String {
    let pid = l.pid.map_or(String::new(), |p| format!(" (pid {p})"));
    let fate = match (l.kind, l.gone) {
        (LeftoverKind::Write, Some(true)) => "its writer is gone: `swaplock break` removes it",
        (LeftoverKind::Write, Some(false)) => "its writer's PID runs: kept",
        (LeftoverKind::Write, None) => {
            "not its writer's own record of this host: kept (another host's, unfinished, \
             or another lock's marker)"
        }
        (LeftoverKind::Break, _) => {
            "keeps nobody out (a record there is recovered by the next takeover)"
        }
        _ => "keeps nobody out (the next recovery takes it up)",
    };
    format!("{}: {}{pid}; {fate}", l.name, l.kind.describe())
}

/// `status`'s first line: `free`, or who holds the lock.
pub(super) fn status_text(found: Option<Found>) {
    match found {
        None => {
            println!("free");
        }
        Some(f) => {
            let age = f
                .age
                .map(|a| format!("{:.1}s", a.as_secs_f64()))
                .unwrap_or_else(|| "?".into());
            let mode = match &f.reason {
                Some(why) => format!("{} ({why})", f.mode),
                None => f.mode.clone(),
            };
            // A marker has an age; a kernel lock has none.
            match f.age.is_some() {
                true => println!(
                    "held: mode {mode} pid {} host {} age {age} holder {}{}",
                    f.pid.map_or("-".into(), |p| p.to_string()),
                    f.host.as_deref().unwrap_or("-"),
                    f.standing,
                    f.lease.map(|d| format!(" lease {d}s")).unwrap_or_default(),
                ),
                false => println!(
                    "held: mode {mode} pid {}{}",
                    f.pid.map_or("-".into(), |p| p.to_string()),
                    match (f.pid, f.standing) {
                        (Some(-1), _) =>
                            " (no one process: an open file description lock, \
                                          or a holder the kernel does not name)",
                        (_, "cannot tell") => " (exited: a process it passed the lock to holds it)",
                        _ => "",
                    }
                ),
            }
        }
    }
}
