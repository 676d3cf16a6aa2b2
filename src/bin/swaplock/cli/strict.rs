//! `status` and `break` of a strict lock: every claim with how its holder
//! stands, and what sits at the lock path; the break of the claims of
//! holders this host proves gone, or of every claim by force.

use super::*;
use swaplock::strict::{ClaimInfo, ClaimState, LockPath, StrictLock};

/// How a claim's holder stands, in `status`'s words.
fn standing(claim: &ClaimInfo) -> &'static str {
    describe_holder(claim.standing)
}

fn state(claim: &ClaimInfo) -> &'static str {
    match claim.state {
        ClaimState::Held => "held",
        _ => "intent",
    }
}

/// The claim whose holder holds the lock, or is taking it: the held claim
/// of the smallest token, else the smallest intent.
fn main_claim(claims: &[ClaimInfo]) -> Option<&ClaimInfo> {
    claims
        .iter()
        .min_by_key(|c| (c.state != ClaimState::Held, c.token.clone()))
}

/// What blocks the strict lock at `path`, as `status` and `run -v` name
/// it: the main claim's holder, or what sits at the lock path.
pub(super) fn holder(path: &std::path::Path) -> std::io::Result<Option<Found>> {
    let lock = StrictLock::new(path);
    let claims = lock.claims()?;
    if let Some(c) = main_claim(&claims) {
        return Ok(Some(Found {
            pid: Some(i64::from(c.pid)),
            host: Some(c.host.clone()),
            mode: state(c).into(),
            reason: None,
            age: c.age,
            lease: None,
            standing: standing(c),
        }));
    }
    Ok(match lock.occupant()? {
        LockPath::Occupied { description, .. } => Some(Found {
            pid: None,
            host: None,
            mode: "occupied".into(),
            reason: Some(description),
            age: None,
            lease: None,
            standing: "cannot tell",
        }),
        _ => None,
    })
}

/// `status --kind strict`: exit 0 free, 1 held, 2 error.
pub(super) fn status(opts: &Options) -> i32 {
    let path = PathBuf::from(&opts.rest[0]);
    let fs = filesystem(&path);
    let lock = StrictLock::new(&path);
    let read = lock
        .claims()
        .and_then(|claims| Ok((claims, lock.occupant()?)));
    let (claims, at_path) = match read {
        Ok(read) => read,
        Err(e) => {
            eprintln!("swaplock: {e}");
            if let Some((text, _)) = &fs {
                eprintln!("swaplock: {text}");
            }
            return 2;
        }
    };
    let occupied = matches!(at_path, LockPath::Occupied { .. });
    let held = !claims.is_empty() || occupied;
    let age = |c: &ClaimInfo| c.age.map(|a| a.as_secs_f64());
    if opts.json {
        let claims_json: Vec<String> = claims
            .iter()
            .map(|c| {
                format!(
                    "{{\"name\":{},\"state\":{},\"token\":{},\"pid\":{},\"host\":{},\"start\":{},\
                     \"age_seconds\":{},\"standing\":{}}}",
                    json_string(&c.name),
                    json_string(state(c)),
                    json_string(&c.token),
                    c.pid,
                    json_string(&c.host),
                    c.start.as_deref().map_or("null".into(), json_string),
                    age(c).map_or("null".into(), |a| format!("{a:.3}")),
                    json_string(standing(c)),
                )
            })
            .collect();
        let holder = match main_claim(&claims) {
            None => "null".to_owned(),
            Some(c) => format!(
                "{{\"pid\":{},\"host\":{},\"mode\":{},\"reason\":null,\"age_seconds\":{},\
                 \"lease_seconds\":null,\"standing\":{}}}",
                c.pid,
                json_string(&c.host),
                json_string(state(c)),
                age(c).map_or("null".into(), |a| format!("{a:.3}")),
                json_string(standing(c)),
            ),
        };
        let lock_path = match &at_path {
            LockPath::Missing => {
                "{\"state\":\"missing\",\"description\":null,\"fails\":null}".into()
            }
            LockPath::Sentinel => {
                "{\"state\":\"sentinel\",\"description\":null,\"fails\":null}".into()
            }
            LockPath::Occupied { description, fails } => format!(
                "{{\"state\":\"occupied\",\"description\":{},\"fails\":{fails}}}",
                json_string(description)
            ),
            _ => "null".into(),
        };
        println!(
            "{{\"path\":{},\"kind\":\"strict\",\"held\":{held},\"holder\":{holder},\"claims\":[{}],\
             \"lock_path\":{lock_path},\"filesystem\":{}}}",
            json_string(&path.to_string_lossy()),
            claims_json.join(","),
            fs.map_or("null".into(), |(_, json)| json),
        );
        return i32::from(held);
    }
    match claims.is_empty() {
        true if !occupied => println!("free"),
        true => println!("held: by what sits at the lock path"),
        false => {
            for (i, c) in claims.iter().enumerate() {
                println!(
                    "{}claim {} state {} pid {} host {} age {} holder {}",
                    if i == 0 { "held: " } else { "      " },
                    c.name,
                    state(c),
                    c.pid,
                    c.host,
                    age(c).map_or("?".into(), |a| format!("{a:.1}s")),
                    standing(c),
                );
            }
        }
    }
    match at_path {
        LockPath::Missing => println!("lock path: nothing (the first lock makes the sentinel)"),
        LockPath::Sentinel => println!("lock path: the strict sentinel"),
        LockPath::Occupied { description, fails } => println!(
            "lock path: {description} (every strict contender {})",
            match fails {
                true => "fails on it; remove it once nothing holds it",
                false => "waits for it",
            }
        ),
        _ => {}
    }
    if let Some((text, _)) = fs {
        println!("{text}");
    }
    i32::from(held)
}

/// `break --kind strict`: the claims of holders this host proves gone,
/// or every claim with `--force`. Exit 0 once no claim is left, 1 when
/// some stay or the break fails.
pub(super) fn break_claims(opts: &Options) -> i32 {
    let lock = StrictLock::new(PathBuf::from(&opts.rest[0]));
    let path = lock.path().display().to_string();
    if opts.force {
        return match lock.force_break_all() {
            Ok(removed) => {
                for name in removed {
                    println!("removed {name}");
                }
                println!("broken by force");
                0
            }
            Err(e) => {
                eprintln!("swaplock: {e}");
                1
            }
        };
    }
    let report = match lock.break_dead() {
        Ok(report) => report,
        Err(e) => {
            eprintln!("swaplock: {e}");
            return 1;
        }
    };
    for c in &report.removed {
        println!(
            "removed {} (pid {} on {}: {})",
            c.name,
            c.pid,
            c.host,
            standing(c)
        );
    }
    for c in &report.kept {
        let why = match standing(c) {
            "alive" => "which is alive".to_owned(),
            _ => "which this host cannot judge (another host's, or its probe failed); once it \
                  is known gone, --force removes every claim"
                .to_owned(),
        };
        eprintln!(
            "swaplock: {path}: refusing to break claim {} of pid {} on {}, {why}",
            c.name, c.pid, c.host
        );
    }
    if !report.kept.is_empty() {
        return 1;
    }
    if let Ok(LockPath::Occupied { description, .. }) = lock.occupant() {
        eprintln!(
            "swaplock: {path}: {description} sits at the lock path, which a strict lock never \
             removes: remove it once nothing holds it"
        );
        return 1;
    }
    println!("free");
    0
}
