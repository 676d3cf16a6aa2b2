//! `break`: removes a stale marker by the path a contender takes, or a
//! live holder's with `--force`.

use super::*;

pub(super) fn break_lock(opts: Options) -> i32 {
    let kind = match opts.kind {
        LockKind::Soft(k) => k,
        #[cfg(unix)]
        LockKind::Rw => return rw_break(&opts),
        #[cfg(unix)]
        LockKind::Strict => return strict::break_claims(&opts),
        _ => {
            eprintln!("swaplock: break applies to soft locks; kernel locks never go stale");
            return 2;
        }
    };
    let mut lock = soft_lock(&opts, kind);
    // A lease is judged on its holder's own terms: without `--lease`, the
    // duration the marker publishes, so that neither the safe path nor
    // `--force` needs the operator to know it.
    if kind == Kind::Lease && opts.lease.is_none() {
        if let Ok(Some(seconds)) = lock.owner().map(|o| o.and_then(|o| o.lease_seconds)) {
            if let Ok(published) = Duration::try_from_secs_f64(seconds) {
                lock = lock.lease_duration(published);
            }
        }
    }
    let path = lock.path().display().to_string();
    // The write names of writers this host proves gone: nothing reads them.
    match lock.sweep() {
        Ok((removed, failed)) => {
            for l in removed {
                println!("removed {}: {}", l.name, l.kind.describe());
            }
            for (l, e) in failed {
                eprintln!("swaplock: {} stays: {e}", l.name);
            }
        }
        Err(e) => eprintln!("swaplock: cannot list what is beside the lock: {e}"),
    }
    // Then the contender's safe path: it takes a stale marker over.
    match lock.try_lock() {
        Ok(guard) => {
            return match guard.release() {
                Ok(()) => {
                    println!("free");
                    0
                }
                Err(e) => {
                    eprintln!("swaplock: {e}");
                    1
                }
            }
        }
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Err(e) => {
            eprintln!("swaplock: {e}");
            return 1;
        }
    }
    if opts.force {
        return match lock.force_break() {
            Ok(()) => {
                println!("broken by force");
                0
            }
            Err(e) => {
                eprintln!("swaplock: {e}");
                1
            }
        };
    }
    // Then the judgement `status` prints, to say why the marker stays.
    let (owner, standing) = match lock.status() {
        Ok(Some(judged)) => judged,
        Ok(None) => {
            println!("free");
            return 0;
        }
        Err(e) => {
            eprintln!("swaplock: {e}");
            return 1;
        }
    };
    let who = owner.name();
    let advice = Advice::new(standing.remedy(), lock.path());
    match standing {
        Standing::Stale { .. } => eprintln!(
            "swaplock: {path}: the holder ({who}) is gone, but its marker could not be taken \
             over: {advice}"
        ),
        Standing::Malformed => eprintln!(
            "swaplock: {path}: the marker holds no record this kind reads ({}); {advice}",
            owner.mode
        ),
        Standing::Held(HeldBecause::Alive) => {
            eprintln!(
                "swaplock: {path}: refusing to break a holder that is alive ({who}); {advice}"
            )
        }
        _ => eprintln!(
            "swaplock: {path}: refusing to break a holder this host cannot judge ({who}, \
             holder {}); {advice}",
            describe_holder(standing)
        ),
    }
    1
}
