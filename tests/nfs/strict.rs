//! The strict lock between two NFS client hosts: Rust (this package's
//! `StrictLock`) and Python (filelock 4.2.11's `StrictSoftFileLock`)
//! contenders on both hosts at once, each critical section witnessed on
//! the guest's own tmpfs. PROTOCOL-RW's C-ST1 asks whether a client's
//! cached listing of `claims/` can admit a second holder: here the
//! mounts that cache (attributes and listings for up to a minute) are
//! the ones run.

use super::{finish, fresh, Client, Report, Witness, MOUNTS};
use std::fs::File;
use std::path::Path;
use std::process::{Child, Stdio};

/// Holds per contender.
const HOLDS: usize = 40;
/// Contenders per host: one of each side.
const SIDES: usize = 2;

/// Rounds of the listing fact per mount.
const LOOKS: usize = 20;

/// What C-ST1 rests on, per caching mount: c2 holds `d/` open (as an
/// attempt holds `claims/`) and lists it as a scan does, through a fresh
/// `openat(".")`; c1 makes a name there. Counted: c2's listing misses it
/// right after (the client's cache served), and after c2 has changed the
/// directory itself (a contender's deciding scans, PROTOCOL 18.5 steps 5
/// and 7, follow its own publication and link in `claims/`). The second
/// must be 0 (the reply to a change carries the directory's change
/// attribute from before it, and a client whose cache predates that drops
/// it); the first is what this kernel's close-to-open check on each open
/// gives.
pub(super) fn listings(clients: &[Client], report: &mut Report) {
    let [c1, c2] = clients else {
        panic!("two client hosts")
    };
    for mount in MOUNTS
        .iter()
        .filter(|m| matches!(m.dir, "v3" | "v40" | "v42"))
    {
        let (on_server, on_client) = fresh("strict-listing", mount);
        let (mut a, mut b) = (c1.session(&on_client), c2.session(&on_client));
        let (mut stale, mut stale_after_own) = (0, 0);
        for i in 0..LOOKS {
            let dir = format!("d{i}");
            std::fs::create_dir(on_server.join(&dir)).unwrap();
            assert_eq!(b.ask(&format!("opendir {dir}")), "ok");
            assert_eq!(b.ask("listat"), "[]");
            assert_eq!(a.ask(&format!("create {dir}/x 0")), "ok");
            if !b.ask("listat").contains('x') {
                stale += 1;
            }
            assert_eq!(b.ask(&format!("create {dir}/y 0")), "ok");
            if b.ask("listat") != "[x,y]" {
                stale_after_own += 1;
            }
        }
        report.fact(
            mount.label,
            "a scan's listing misses the other host's new name: at once / after a change of its own",
            format!("{stale} / {stale_after_own} of {LOOKS}"),
        );
        assert_eq!(stale_after_own, 0, "{}: C-ST1's stale listing", mount.label);
    }
}

/// Both client hosts, each with a Rust and a Python contender, on NFSv3,
/// v4.0 and v4.2 with the client's caches on: every hold alone, every
/// contender through its holds.
pub(super) fn contenders(clients: &[Client], report: &mut Report) {
    for mount in MOUNTS
        .iter()
        .filter(|m| matches!(m.dir, "v3" | "v40" | "v42"))
    {
        let (_, on_client) = fresh("strict", mount);
        let witness = Witness::new(&format!("strict-{}", mount.dir));
        let lock = on_client.join("lock");
        let inside = witness.0.join("inside");
        let (lock_s, witness_s) = (lock.to_str().unwrap(), witness.0.to_str().unwrap());
        let mut workers: Vec<Child> = Vec::new();
        for (h, client) in clients.iter().enumerate() {
            let spec = ["strict", lock_s, witness_s, &HOLDS.to_string()];
            workers.push(client.worker(&spec).stderr(Stdio::piped()).spawn().unwrap());
            // filelock's own storm: the same witness file, its holds
            // logged apart, its collisions printed.
            let out = File::create(witness.0.join(format!("python-{h}.json"))).unwrap();
            let log = witness.0.join("python");
            let mut cmd = client.command(super::common::python());
            cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peer/soft_peer.py"))
                .args(["strict-storm", lock_s, inside.to_str().unwrap()])
                .args([&HOLDS.to_string(), "0.05", log.to_str().unwrap()])
                .stdout(Stdio::from(out))
                .stderr(Stdio::piped());
            workers.push(cmd.spawn().unwrap());
        }
        let what = format!("strict lock on {}", mount.label);
        finish(workers, &what);
        let mut collisions = 0;
        for h in 0..clients.len() {
            let out = std::fs::read(witness.0.join(format!("python-{h}.json"))).unwrap();
            let answer: serde_json::Value = serde_json::from_slice(&out)
                .unwrap_or_else(|e| panic!("{what}: filelock's storm said {out:?}: {e}"));
            assert_eq!(answer["holds"], HOLDS, "{what}: {answer}");
            collisions += answer["collisions"].as_u64().unwrap() as usize;
        }
        let python = std::fs::read_to_string(witness.0.join("python")).unwrap_or_default();
        let entries = witness.lines("entries").len() + python.lines().count() + collisions;
        let overlaps = witness.lines("overlaps").len() + collisions;
        let errors = witness.lines("errors");
        report.fact(
            mount.label,
            "strict lock, 2 hosts × (Rust, Python): overlaps",
            format!("{overlaps} of {entries}; failed waits {}", errors.len()),
        );
        assert_eq!(entries, clients.len() * SIDES * HOLDS, "{what}: {errors:?}");
        assert_eq!(overlaps, 0, "two holders: {what}");
        assert!(errors.is_empty(), "{what}: {errors:?}");
    }
}
