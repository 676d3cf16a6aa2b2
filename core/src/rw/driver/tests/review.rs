//! The adversarial review's findings and the operator's break, over the
//! same model filesystem: a log wiped and made again under a commit, a
//! torn HEAD, the last generation, and a break's commit (a torn epoch:
//! `torn.rs`).

use super::*;

/// Commits the successor of the latest snapshot naming only `writer`, as a
/// peer that knows nothing of participants would.
pub(super) fn commit_next(
    l: &mut Lock,
    fs: &mut impl Files,
    env: &mut Clock,
    writer: Option<Token>,
) -> commit::Committed {
    let g = l.latest(fs, env).unwrap();
    let held = l.held().unwrap();
    let [first, second] = &mut l.bufs.snapshots;
    let (from, into) = match held.at {
        0 => (&*first, second),
        _ => (&*second, first),
    };
    let s = parse_snapshot(&from[..held.len]).unwrap();
    let len = commit::encode_successor(&s, g + 1, writer, &|_, _| false, None, into).unwrap();
    let draft = commit::Draft {
        at: 1 - held.at,
        len,
        built_on: held.len,
        n: g + 1,
    };
    l.commit(fs, env, draft, false).unwrap()
}

/// The live writer of the log a peer makes again (below).
const REGROWN_WRITER: Token = Token([0xab; 16]);

/// An operator's `rm -rf L.rw` and a peer that makes the log again and
/// commits it to generation 5, naming a live writer.
fn regrow_to_five(fs: &mut Mem) {
    let gens: Vec<Vec<u8>> = fs
        .names
        .keys()
        .filter(|(a, _)| *a == 0)
        .map(|(_, n)| n.clone())
        .collect();
    for n in gens {
        fs.drop_name(Area::Generations, &n);
    }
    let epoch = record::encode_epoch(&Token([0xcd; 16]));
    fs.create(Area::Generations, b"epoch", &epoch, true)
        .unwrap();
    for g in 1..=5u128 {
        let body = std::format!(
            "filelock-rw/1\ngeneration={g}\nwriter={}\n",
            hex(REGROWN_WRITER)
        );
        let name = generation_name(g).unwrap();
        fs.create(Area::Generations, &name, body.as_bytes(), true)
            .unwrap();
    }
}

#[test]
fn a_commit_never_lands_in_a_log_made_again_since_it_was_read() {
    // The log is wiped and made again between this commit's checks and its
    // link, by a peer that has reached the generation read in the old log
    // (5): the link of 6 lands on a predecessor that exists. The successor
    // was decided on the old log's snapshot (no writer), so counting it
    // would grant a writer over the new log's live one (RW1, RW4). The
    // predecessor read after the link is not the record the successor was
    // built on: the commit is lost, and its link removed.
    let mut fs = Mem::default();
    let mut env = Clock::new();
    let mut l = lock(90.0);
    fs.prepare(false).unwrap();
    for _ in 0..5 {
        assert_eq!(
            commit_next(&mut l, &mut fs, &mut env, None),
            commit::Committed::Won
        );
    }
    let mut w = l.publish(&mut fs, &mut env, Mode::Write).unwrap();
    fs.before_link = Some(regrow_to_five);
    assert_eq!(
        l.advance(&mut fs, &mut env, &mut w),
        Ok(false),
        "granted over the new log's writer"
    );
    assert!(fs.before_link.is_none(), "it linked");
    assert!(fs.gen(6).is_none(), "its link of 6 removed");
    let five = fs.gen(5).unwrap();
    assert_eq!(
        parse_snapshot(five.as_bytes()).unwrap().writer,
        Some(REGROWN_WRITER),
        "the new log as its peer made it"
    );
    assert_eq!(w.generation(), None);
}

#[test]
fn a_torn_head_does_not_keep_a_new_log_from_starting() {
    // A crash, or the empty HEAD a confirmation left.
    let mut fs = Mem::default();
    let mut env = Clock::new();
    fs.prepare(false).unwrap();
    fs.create(Area::Generations, HEAD, b"", false).unwrap();
    let mut l = lock(90.0);
    let mut w = l.publish(&mut fs, &mut env, Mode::Write).unwrap();
    assert_eq!(l.advance(&mut fs, &mut env, &mut w), Ok(true));
    assert_eq!(w.generation(), Some(1));
    let epoch = fs.get(Area::Generations, b"epoch").unwrap().clone();
    let head = fs.get(Area::Generations, HEAD).unwrap().clone();
    assert_eq!(head, [&epoch[..], fs.gen(1).unwrap().as_bytes()].concat());
}

#[test]
fn a_log_at_the_last_generation_says_so() {
    // filelock accepts and writes `generation=99999999999999999999`; the
    // next commit cannot be named, whatever the members.
    let mut fs = Mem::default();
    let mut env = Clock::new();
    fs.prepare(false).unwrap();
    let last = 99_999_999_999_999_999_999u128;
    let body = std::format!("filelock-rw/1\ngeneration={last}\n");
    fs.create(
        Area::Generations,
        &generation_name(last).unwrap(),
        body.as_bytes(),
        true,
    )
    .unwrap();
    let mut l = lock(90.0);
    let mut w = l.publish(&mut fs, &mut env, Mode::Write).unwrap();
    assert_eq!(l.advance(&mut fs, &mut env, &mut w), Err(Error::Exhausted));
    assert_eq!(
        l.evict(&mut fs, &mut env, &[w.token()]),
        Ok(last),
        "nobody named"
    );
}

#[test]
fn a_break_commits_the_log_without_the_members_it_evicts() {
    let mut fs = Mem::default();
    let mut env = Clock::new();
    let (mut lr, mut lw, mut op) = (lock(90.0), lock(90.0), lock(90.0));
    let mut r = lr.publish(&mut fs, &mut env, Mode::Read).unwrap();
    assert_eq!(lr.advance(&mut fs, &mut env, &mut r), Ok(true));
    let mut w = lw.publish(&mut fs, &mut env, Mode::Write).unwrap();
    assert_eq!(
        lw.advance(&mut fs, &mut env, &mut w),
        Ok(false),
        "entered behind the reader"
    );
    let records = fs.count(Area::Holders);
    assert_eq!(op.evict(&mut fs, &mut env, &[r.token()]), Ok(3));
    let three = fs.gen(3).unwrap();
    let three = parse_snapshot(three.as_bytes()).unwrap();
    assert_eq!(
        (three.writer, three.readers().count()),
        (Some(w.token()), 0)
    );
    assert!(
        fs.get(Area::Holders, &r.token().hex()).is_none(),
        "its record gone"
    );
    assert_eq!(
        fs.count(Area::Holders),
        records - 1,
        "no other record touched"
    );
    assert_eq!(fs.count(Area::Holders), 1);
    // Already gone: nothing to commit.
    assert_eq!(op.evict(&mut fs, &mut env, &[r.token()]), Ok(3));
    // The writer is granted at its next poll; the evicted reader learns it.
    assert_eq!(lw.advance(&mut fs, &mut env, &mut w), Ok(true));
    assert_eq!(lr.heartbeat(&mut fs, &mut env, &mut r), Beat::Lost);
}

/// A writer stopped between its link of generation 3 and the look at the
/// two names, while the log's generations are removed (an operator's
/// `rm -rf gen/*`, whose glob skips the writer's `.commit-` temporary, or
/// an `rm -rf gen` stopped before reaching it while peers recreate the log
/// in the directory it could not yet remove) and the log grows again, in
/// the same directory, to a writer granted at generation 3. The stopped
/// writer's link answered success and the two names now show two files:
/// that is a peer's generation, not sshfs. Removing it as its own takes
/// the granted writer's generation away; the log reads as generation 2
/// again, and a second writer is granted beside the first.
#[test]
fn a_link_replaced_after_it_landed_is_not_removed_as_our_own() {
    let mut fs = Mem::default();
    let mut env = Clock::new();
    let mut l = lock(90.0);
    // The old log: a reader enters at 1 and leaves at 2.
    let mut r = l.publish(&mut fs, &mut env, Mode::Read).unwrap();
    assert_eq!(l.advance(&mut fs, &mut env, &mut r), Ok(true));
    l.leave(&mut fs, &mut env, &mut r).unwrap();
    let mut w = l.publish(&mut fs, &mut env, Mode::Write).unwrap();
    fs.after_link = Some(|fs: &mut Mem| {
        let names: Vec<Vec<u8>> = fs
            .names
            .keys()
            .filter(|(a, n)| *a == 0 && !n.starts_with(b".commit-"))
            .map(|(_, n)| n.clone())
            .collect();
        for n in names {
            fs.drop_name(Area::Generations, &n);
        }
        // The new log: a reader enters at 1, leaves at 2, and a writer
        // is granted at 3 (tokens of their own).
        let mut env = Clock {
            now: 5_000_000_000,
            drawn: 1000,
        };
        let mut l = lock(90.0);
        let mut r = l.publish(fs, &mut env, Mode::Read).unwrap();
        assert_eq!(l.advance(fs, &mut env, &mut r), Ok(true));
        l.leave(fs, &mut env, &mut r).unwrap();
        let mut q = l.publish(fs, &mut env, Mode::Write).unwrap();
        assert_eq!(l.advance(fs, &mut env, &mut q), Ok(true));
        assert_eq!(q.generation(), Some(3), "the new log's writer");
    });
    let stopped = l.advance(&mut fs, &mut env, &mut w);
    assert!(fs.after_link.is_none(), "it linked");
    assert!(
        fs.gen(3).is_some(),
        "the granted writer's generation 3 was removed (the stopped writer's \
         advance: {stopped:?})"
    );
    // Whatever the stopped writer makes of it, a third writer stays out.
    let mut env = Clock {
        now: 9_000_000_000,
        drawn: 2000,
    };
    let mut l3 = lock(90.0);
    let mut third = l3.publish(&mut fs, &mut env, Mode::Write).unwrap();
    assert_eq!(
        l3.advance(&mut fs, &mut env, &mut third),
        Ok(false),
        "a second writer granted at {:?}",
        third.generation()
    );
}

/// A writer stopped between its link of generation 3 and the look at the
/// two names, for as long as the log takes to move a window on (its
/// `.commit-` temporary is swept only after the stale threshold), while
/// a peer that built generation 3 on the same generation 2 is stopped
/// between its checks (generation 2 there, the very record) and its link:
/// compaction removes generations 1 to 3, oldest first, and the peer's
/// link into the freed name 3 succeeds (its own checks after the link see
/// the lead and remove it). The stopped writer then looks: its link
/// answered success, and the two names show two files, on a filesystem
/// that shows hard links as one file. That is a lost commit, not sshfs:
/// it should read again, not fail naming the filesystem as the cause
/// (nor remove the peer's link as its own).
#[test]
fn a_link_replaced_a_window_later_is_a_lost_commit_not_a_refusal() {
    let mut fs = Mem::default();
    let mut env = Clock::new();
    let mut l = lock(90.0);
    let mut r = l.publish(&mut fs, &mut env, Mode::Read).unwrap();
    assert_eq!(l.advance(&mut fs, &mut env, &mut r), Ok(true));
    l.leave(&mut fs, &mut env, &mut r).unwrap();
    let mut w = l.publish(&mut fs, &mut env, Mode::Write).unwrap();
    fs.after_link = Some(|fs: &mut Mem| {
        // Peers commit 4 to 68; the commit of 68 compacts 1 to 3.
        for g in 4..=68u128 {
            let record = std::format!("filelock-rw/1\ngeneration={g}\n");
            let name = generation_name(g).unwrap();
            fs.create(Area::Generations, &name, record.as_bytes(), true)
                .unwrap();
        }
        for g in 1..=3u128 {
            fs.drop_name(Area::Generations, &generation_name(g).unwrap());
        }
        // The stopped peer's link of its generation 3.
        let record = b"filelock-rw/1\ngeneration=3\n";
        fs.create(
            Area::Generations,
            &generation_name(3).unwrap(),
            record,
            true,
        )
        .unwrap();
    });
    let looked = l.advance(&mut fs, &mut env, &mut w);
    assert!(fs.after_link.is_none(), "it linked");
    assert!(
        !matches!(looked, Err(Error::Fs(FsError::LinkNotOneFile))),
        "a lost commit refused as a filesystem without hard links: {looked:?}"
    );
}

/// A filesystem that shows a hard link's two names as two files (sshfs:
/// each name its own inode number, a link count of 1): the link answers
/// success, and the new name holds this commit's own record as another
/// file. No commit could ever be confirmed there: the writer is refused
/// with the filesystem named, and the generation it linked is removed, so
/// that no peer reads a generation naming a participant that failed.
#[test]
fn a_link_shown_as_a_copy_of_our_record_is_refused_and_removed() {
    let mut fs = Mem::default();
    let mut env = Clock::new();
    let mut l = lock(90.0);
    let mut w = l.publish(&mut fs, &mut env, Mode::Write).unwrap();
    fs.make_epoch();
    fs.after_link = Some(|fs: &mut Mem| {
        // The newest generation name, given a copy of its file.
        let (key, ino) = fs
            .names
            .iter()
            .filter(|((a, n), _)| *a == 0 && n.iter().all(u8::is_ascii_digit))
            .max()
            .map(|(k, &i)| (k.clone(), i))
            .unwrap();
        let bytes = fs.inodes[&ino].0.clone();
        fs.drop_name(Area::Generations, &key.1);
        fs.next += 1;
        let copy = fs.next;
        fs.inodes.insert(copy, (bytes, 1));
        fs.names.insert(key, copy);
    });
    let refused = l.advance(&mut fs, &mut env, &mut w);
    assert!(fs.after_link.is_none(), "it linked");
    assert_eq!(refused, Err(Error::Fs(FsError::LinkNotOneFile)));
    assert_eq!(
        fs.gen(1),
        None,
        "the refused link is left for peers to read"
    );
}
