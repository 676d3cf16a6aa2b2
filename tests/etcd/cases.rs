//! The cases that run against a plain cluster and a secured one alike,
//! given how to reach it: contenders in several processes, a holder killed
//! or stopped, `etcdctl lock` on the same name both ways, and the cluster's
//! leader killed and restarted. Each checks the records with the
//! independent checker and says its figures.

use crate::harness::*;
use std::fs;
use std::path::Path;
use std::time::Instant;

/// `processes` processes take `turns` turns each at lock `name`, with
/// rising fencing tokens and no overlap; the lock is free after.
pub(crate) fn contenders(access: &Access, name: &str, processes: usize, turns: usize, dir: &Path) {
    let began = Instant::now();
    let workers: Vec<_> = (0..processes)
        .map(|_| {
            let (access, dir, name) = (access.clone(), dir.to_owned(), name.to_owned());
            std::thread::spawn(move || {
                for _ in 0..turns {
                    let mut child = run(&access, &["-w", "30"], &name, TURN, &dir)
                        .spawn()
                        .unwrap();
                    let status = exit_of(&mut child, "a turn");
                    assert!(status.success(), "{status}: {}", stderr_of(&mut child));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let c = check(&dir.join("log"));
    eprintln!(
        "{name}: {} turns by {processes} processes in {:.1} s: overlaps {}, not rising {}",
        c.starts,
        began.elapsed().as_secs_f64(),
        c.overlaps,
        c.not_rising
    );
    assert_eq!((c.starts, c.ends), (processes * turns, processes * turns));
    assert_eq!((c.overlaps, c.not_rising), (0, 0));
    assert_eq!(status(access, name), (0, "free".to_owned()));
}

/// A holder killed (SIGKILL) passes the lock after its TTL; its command
/// dies with it.
pub(crate) fn killed_holder(access: &Access, name: &str, dir: &Path) {
    let mut a = hold(access, &[], name, "a", dir).spawn().unwrap();
    let command = ready(dir, "a");
    let mut b = run(access, &["-w", "30"], name, TURN, dir).spawn().unwrap();
    wait_for("b to wait behind a", || waiting(access, name) == Some(1));
    signal(a.id(), libc::SIGKILL);
    let killed = Instant::now();
    let _ = a.wait();
    let status = exit_of(&mut b, "b");
    let takeover = killed.elapsed();
    assert!(status.success(), "{status}: {}", stderr_of(&mut b));
    // The command died with its supervisor (PR_SET_PDEATHSIG).
    wait_for("a's command to die with its supervisor", || gone(command));
    let c = check(&dir.join("log"));
    eprintln!(
        "{name}: takeover {:.2} s after SIGKILL, lease TTL {TTL} s: {c:?}",
        takeover.as_secs_f64()
    );
    assert_eq!((c.starts, c.overlaps, c.not_rising), (2, 0, 0));
}

/// A holder stopped (SIGSTOP) past its TTL loses the lock to the next; it
/// learns so when it runs again, stops its command and exits 75.
pub(crate) fn stopped_holder(access: &Access, name: &str, dir: &Path) {
    let mut a = hold(access, &[], name, "a", dir).spawn().unwrap();
    let command = ready(dir, "a");
    // The whole holder stops: its supervisor and its command's group.
    signal(a.id(), libc::SIGSTOP);
    // SAFETY: stopping the command's group, which this test started.
    assert_eq!(unsafe { libc::kill(-command, libc::SIGSTOP) }, 0);
    let stopped = Instant::now();
    let mut b = run(access, &["-w", "30"], name, TURN, dir).spawn().unwrap();
    let status = exit_of(&mut b, "b");
    let takeover = stopped.elapsed();
    assert!(status.success(), "{status}: {}", stderr_of(&mut b));
    // The supervisor runs again, alone: it must stop its command before
    // that runs another step.
    signal(a.id(), libc::SIGCONT);
    let status = exit_of(&mut a, "a");
    let said = stderr_of(&mut a);
    assert_eq!(status.code(), Some(LEASE_LOST), "{status}: {said}");
    assert!(said.contains("was lost"), "{said}");
    // SAFETY: signal 0 only asks whether any process of the group exists.
    assert_eq!(unsafe { libc::kill(-command, 0) }, -1, "a's group is gone");
    let c = check(&dir.join("log"));
    eprintln!(
        "{name}: takeover {:.2} s after SIGSTOP, lease TTL {TTL} s; a said: {}; {c:?}",
        takeover.as_secs_f64(),
        said.trim()
    );
    assert_eq!((c.starts, c.ends, c.overlaps, c.not_rising), (2, 1, 0, 0));
}

/// `etcdctl lock NAME` and ours exclude each other, both ways, and ours
/// exports what etcdctl's does.
pub(crate) fn etcdctl_interop(access: &Access, name: &str, d: &Path) {
    // etcdctl holds; ours waits.
    let mut theirs = access
        .etcdctl()
        .args(["lock", name, "--"])
        .args([
            "sh",
            "-c",
            r#"echo "$ETCD_LOCK_KEY $ETCD_LOCK_REV" > "$DIR/theirs.tmp" && mv "$DIR/theirs.tmp" "$DIR/theirs"
while [ ! -e "$DIR/theirs.go" ]; do sleep 0.05; done"#,
        ])
        .env("DIR", d)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let held = d.join("theirs");
    wait_for("etcdctl to hold the lock", || held.exists());
    let text = fs::read_to_string(&held).unwrap();
    let (their_key, their_rev) = text.trim().split_once(' ').unwrap();
    let (code, line) = status(access, name);
    assert_eq!(code, 1);
    assert!(
        line.starts_with(&format!("held: key {their_key} ")),
        "{line}"
    );
    let busy = run(access, &["-n"], name, "true", d).output().unwrap();
    assert_eq!(busy.status.code(), Some(255), "{busy:?}");
    let mut ours = run(
        access,
        &[],
        name,
        r#"env > "$DIR/ours.env"; printf 'start %s\n' "$SWAPLOCK_FENCING_TOKEN" >> "$LOG""#,
        d,
    )
    .spawn()
    .unwrap();
    wait_for("ours to wait behind etcdctl", || {
        waiting(access, name) == Some(1)
    });
    assert!(!d.join("ours.env").exists(), "ours ran while etcdctl held");
    fs::write(d.join("theirs.go"), "").unwrap();
    assert!(exit_of(&mut theirs, "etcdctl").success());
    let status = exit_of(&mut ours, "ours");
    assert!(status.success(), "{status}: {}", stderr_of(&mut ours));
    let env = fs::read_to_string(d.join("ours.env")).unwrap();
    let var = |var: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{var}=")))
            .unwrap_or_else(|| panic!("{var} exported"))
            .to_owned()
    };
    let token: i64 = var("SWAPLOCK_FENCING_TOKEN").parse().unwrap();
    assert!(token > their_rev.parse::<i64>().unwrap());
    let key = var("ETCD_LOCK_KEY");
    let lease = key
        .strip_prefix(&format!("{name}/"))
        .expect("etcdctl's prefix");
    assert!(
        !lease.is_empty()
            && lease
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "{key}: NAME/<lease id in lower-case hex>, as etcdctl's"
    );
    // We waited: the revision is the cluster's when we took it, as etcdctl's.
    assert!(var("ETCD_LOCK_REV").parse::<i64>().unwrap() >= token);

    // Ours holds; etcdctl waits.
    let mut ours = hold(access, &[], name, "ours", d).spawn().unwrap();
    ready(d, "ours");
    let mut theirs = access
        .etcdctl()
        .args(["lock", name, "--"])
        .args(["sh", "-c", r#"echo "$ETCD_LOCK_KEY" > "$DIR/theirs2""#])
        .env("DIR", d)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("etcdctl to wait behind ours", || {
        waiting(access, name) == Some(1)
    });
    assert!(!d.join("theirs2").exists(), "etcdctl ran while we held");
    fs::write(d.join("ours.go"), "").unwrap();
    assert!(exit_of(&mut ours, "ours").success());
    assert!(exit_of(&mut theirs, "etcdctl").success());
    assert!(fs::read_to_string(d.join("theirs2"))
        .unwrap()
        .starts_with(&format!("{name}/")));
    let c = check(&d.join("log"));
    assert_eq!((c.overlaps, c.not_rising), (0, 0), "{c:?}");
}

/// The leader of a three-member cluster killed and restarted while one
/// holds and another waits: nobody wedges, and every member serves turns
/// afterwards.
pub(crate) fn leader_killed(etcd: &mut Etcd, access: &Access, name: &str, d: &Path) {
    let mut a = hold(access, &["--lease", "4"], name, "a", d)
        .spawn()
        .unwrap();
    ready(d, "a");
    let mut b = run(access, &["-w", "30"], name, TURN, d).spawn().unwrap();
    wait_for("b to wait behind a", || waiting(access, name) == Some(1));
    let mut leader = None;
    wait_for("a leader", || {
        leader = etcd.leader();
        leader.is_some()
    });
    let leader = leader.unwrap();
    etcd.members[leader].kill();
    let killed = Instant::now();
    let mut elected = None;
    wait_for("a new leader", || {
        elected = etcd.leader();
        elected.is_some()
    });
    let election = killed.elapsed();
    etcd.members[leader].start();
    etcd.wait_serving(leader);
    fs::write(d.join("a.go"), "").unwrap();
    let a_status = exit_of(&mut a, "a");
    let a_said = stderr_of(&mut a);
    // A lease may end with its leader: then a says so and exits 75.
    assert!(
        a_status.success() || a_status.code() == Some(LEASE_LOST),
        "{a_status}: {a_said}"
    );
    let status = exit_of(&mut b, "b");
    assert!(status.success(), "{status}: {}", stderr_of(&mut b));
    // Every member serves turns afterwards, the restarted one too.
    for m in &etcd.members {
        let one = Access {
            endpoints: m.client.clone(),
            ..access.clone()
        };
        let out = run(&one, &["-n"], name, TURN, d).output().unwrap();
        assert!(out.status.success(), "{}: {out:?}", m.name);
    }
    let c = check(&d.join("log"));
    eprintln!(
        "{name}: leader m{leader} killed; new leader m{} after {:.2} s; a exited {a_status}; {c:?}",
        elected.unwrap(),
        election.as_secs_f64()
    );
    assert_eq!((c.starts, c.overlaps, c.not_rising), (5, 0, 0));
}
