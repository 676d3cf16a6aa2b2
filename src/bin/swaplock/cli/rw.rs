//! `--kind rw`: the read-write lock (filelock's SoftReadWriteLock) for
//! `run`, `status` and `break`.

use super::*;
use swaplock::rw::{Look, RwMember, RwStatus, SoftRwGuard, SoftRwLock};

/// The lock of `opts`: `--lease` is its stale threshold, its heartbeat a
/// third of it (filelock's defaults keep that ratio).
pub(super) fn rw_lock(opts: &Options) -> SoftRwLock {
    let lock = SoftRwLock::new(PathBuf::from(&opts.rest[0]));
    match opts.lease {
        Some(threshold) => lock
            .stale_threshold(threshold)
            .heartbeat_interval(threshold / 3),
        None => lock,
    }
}

/// The read or the write lock, as `run` takes it.
pub(super) struct RwTake<'a> {
    pub(super) lock: &'a SoftRwLock,
    pub(super) shared: bool,
}

impl Acquire for RwTake<'_> {
    type Guard = SoftRwGuard;
    fn lock(&self) -> std::io::Result<SoftRwGuard> {
        match self.shared {
            true => self.lock.read(),
            false => self.lock.write(),
        }
    }
    fn try_lock(&self) -> std::io::Result<SoftRwGuard> {
        match self.shared {
            true => self.lock.try_read(),
            false => self.lock.try_write(),
        }
    }
    fn lock_timeout(&self, timeout: Duration) -> std::io::Result<SoftRwGuard> {
        match self.shared {
            true => self.lock.read_timeout(timeout),
            false => self.lock.write_timeout(timeout),
        }
    }
    fn lock_with(
        &self,
        timeout: Option<Duration>,
        hook: &mut dyn FnMut(Duration) -> std::ops::ControlFlow<()>,
    ) -> std::io::Result<SoftRwGuard> {
        match self.shared {
            true => self.lock.read_with(timeout, |w| hook(w.waited())),
            false => self.lock.write_with(timeout, |w| hook(w.waited())),
        }
    }
}

/// How `status` names a member's standing: this host's by its process,
/// another host's by how recently its record changed (the record's mtime
/// against this host's clock: a report, not a judgement the protocol makes).
fn standing(m: &RwMember, threshold: Duration) -> &'static str {
    match m.look {
        Look::Alive => "alive",
        Look::Dead => "dead",
        Look::Missing => "missing",
        _ => {
            let lease = m.lease.and_then(|l| Duration::try_from_secs_f64(l).ok());
            let limit = threshold.max(lease.unwrap_or_default());
            match m.age {
                Some(age) if age >= limit => "stale",
                Some(_) => "refreshed",
                None => "cannot tell",
            }
        }
    }
}

fn role(m: &RwMember) -> &'static str {
    match m.writer {
        true => "writer",
        false => "reader",
    }
}

/// The members of a status, the writer first.
fn members(s: &RwStatus) -> impl Iterator<Item = &RwMember> {
    s.writer.iter().chain(&s.readers)
}

/// Who holds the lock, for `run --verbose`: the writer, else a reader.
pub(super) fn rw_holder(opts: &Options) -> std::io::Result<Option<Found>> {
    let lock = rw_lock(opts);
    let Some(s) = lock.status()? else {
        return Ok(None);
    };
    let found = members(&s).next().map(|m| Found {
        pid: m.pid.map(i64::from),
        host: m.host.clone(),
        mode: role(m).into(),
        reason: None,
        age: m.age,
        lease: m.lease,
        standing: standing(m, lock.threshold()),
    });
    Ok(found)
}

fn member_json(m: &RwMember, threshold: Duration) -> String {
    format!(
        "{{\"token\":{},\"role\":{},\"pid\":{},\"host\":{},\"age_seconds\":{},\"lease_seconds\":{},\
         \"standing\":{}}}",
        json_string(&m.token),
        json_string(role(m)),
        m.pid.map_or("null".into(), |p| p.to_string()),
        m.host.as_deref().map_or("null".into(), json_string),
        m.age
            .map_or("null".into(), |a| format!("{:.3}", a.as_secs_f64())),
        m.lease.map_or("null".into(), |l| l.to_string()),
        json_string(standing(m, threshold)),
    )
}

/// `status --kind rw`: exit 0 free, 1 held, 2 error.
pub(super) fn rw_status(opts: &Options, fs: Option<(String, String)>) -> i32 {
    let lock = rw_lock(opts);
    let threshold = lock.threshold();
    let s = match lock.status() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("swaplock: {e}");
            return 2;
        }
    };
    let held = s.as_ref().is_some_and(|s| members(s).next().is_some());
    if opts.json {
        let (generation, writer, readers) = match &s {
            None => ("0".to_owned(), "null".to_owned(), String::new()),
            Some(s) => (
                s.generation.to_string(),
                s.writer
                    .as_ref()
                    .map_or("null".into(), |w| member_json(w, threshold)),
                s.readers
                    .iter()
                    .map(|r| member_json(r, threshold))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        };
        println!(
            "{{\"path\":{},\"kind\":\"rw\",\"held\":{held},\"generation\":{generation},\
             \"writer\":{writer},\"readers\":[{readers}],\"filesystem\":{}}}",
            json_string(&opts.rest[0].to_string_lossy()),
            fs.map_or("null".into(), |(_, json)| json),
        );
        return i32::from(held);
    }
    match &s {
        Some(s) if held => {
            println!("held: generation {}", s.generation);
            for m in members(s) {
                println!(
                    "{} {} pid {} host {} age {} {}{}",
                    role(m),
                    m.token,
                    m.pid.map_or("-".into(), |p| p.to_string()),
                    m.host.as_deref().unwrap_or("-"),
                    m.age
                        .map_or("?".into(), |a| format!("{:.1}s", a.as_secs_f64())),
                    standing(m, threshold),
                    m.lease.map(|l| format!(" lease {l}s")).unwrap_or_default(),
                );
            }
        }
        Some(s) => println!("free: generation {}", s.generation),
        None => println!("free"),
    }
    if let Some((text, _)) = fs {
        println!("{text}");
    }
    i32::from(held)
}

fn who(m: &RwMember) -> String {
    format!(
        "{} {} (pid {} on {})",
        role(m),
        m.token,
        m.pid.map_or("?".into(), |p| p.to_string()),
        m.host.as_deref().unwrap_or("?")
    )
}

/// `break --kind rw`: exit 0 once no member it may not evict is left, 1
/// when a live one stays or the break fails.
pub(super) fn rw_break(opts: &Options) -> i32 {
    let lock = rw_lock(opts);
    let threshold = lock.threshold();
    let done = lock.break_stale(opts.force, |m| {
        eprintln!(
            "swaplock: watching the record of {} for up to {:.0} s (or its lease, if longer): \
             it is evicted if it stays unchanged",
            who(m),
            threshold.as_secs_f64()
        )
    });
    let done = match done {
        Ok(d) => d,
        Err(e) => {
            eprintln!("swaplock: {e}");
            return 1;
        }
    };
    for m in &done.evicted {
        let why = match (opts.force, m.look) {
            (_, Look::Dead) => "its process is gone",
            (_, Look::Missing) => "its record is gone",
            (true, Look::Alive) => "by force, alive: mutual exclusion with it is lost",
            (true, _) => "by force",
            _ => "its record stayed unchanged past the threshold",
        };
        println!(
            "evicted {} at generation {}: {why}",
            who(m),
            done.generation.unwrap_or_default()
        );
    }
    for m in &done.refused {
        let why = match m.look {
            Look::Alive => "its process on this host is alive",
            _ => "its record changed while watched: it is alive",
        };
        eprintln!(
            "swaplock: {}: refusing to evict {}: {why}; --force evicts it, and mutual exclusion \
             with it is lost",
            opts.rest[0].to_string_lossy(),
            who(m)
        );
    }
    match done.refused.is_empty() {
        true => {
            println!("free");
            0
        }
        false => 1,
    }
}
