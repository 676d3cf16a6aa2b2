//! The safety invariants, one function each, with the exemptions the
//! protocol's assumptions allow beside it: what no step may ever do, judged
//! from the events and the state each step left.

use super::{describe_lock, owner_of, Oracle};
use crate::cast::LOCK;
use crate::event::Target;
use crate::world::{name, World};
use swaplock_core::soft;

impl Oracle {
    /// Where an exclusive create over an existing name fails with `EPERM`
    /// (an SFTP client) and no failure is injected, that refusal is
    /// contention, which an attempt reports as busy: an acquire that
    /// reports it as an error has taken a held lock for a broken one.
    pub(super) fn contention_is_no_error(&mut self, w: &World, me: usize, e: soft::Error) {
        let injected = w.fs.faults.injects_syscall_failures()
            || w.fs.faults.eio_one_in > 0
            || w.fs.faults.full_after.is_some();
        if w.fs.faults.exists_as_eperm && !injected {
            self.fail(format!(
                "p{me}'s acquire failed: {e}, where the create was refused over an existing name"
            ));
        }
    }

    /// No process removes a live holder's marker: it never unlinks or
    /// deletes it (under any name) or renames it off the lock path (the
    /// caller passes only renames from there). Exempt: a marker older
    /// than the lifetime by its mtime ([`Oracle::lifetime_break`]), and
    /// one whose lease lapsed; either holder is compromised, not wronged.
    pub(super) fn no_live_marker_removed(
        &mut self,
        w: &mut World,
        me: usize,
        n: &[u8],
        target: Option<Target>,
        verb: &str,
    ) {
        self.lifetime_break(w, me, target);
        let Some(Target { ino, .. }) = target else {
            return;
        };
        let Some(h) = self.live_holder(w, me, ino) else {
            return;
        };
        if self.lease_lapsed(w, ino) {
            self.compromise(w, h, "lease expired");
            return;
        }
        self.fail(format!(
            "p{me} {verb} {} (inode {ino}), the marker of live holder p{h}",
            name(n)
        ));
    }

    /// At most one live process believes it holds the lock (a holder that
    /// lost its lease, or its marker to a lifetime break, no longer
    /// counts).
    pub(super) fn mutual_exclusion(&mut self, w: &World) {
        let holding = |i: &usize| w.procs[*i].alive && self.holds[*i].is_some();
        if (0..self.holds.len()).filter(holding).count() > 1 {
            let holders: Vec<usize> = (0..self.holds.len()).filter(holding).collect();
            self.fail(format!(
                "mutual exclusion: processes {holders:?} all hold the lock"
            ));
        }
    }

    /// A live holder's marker is still linked. Exempt, under leases: a
    /// holder that paused past its lease (say, between its takeover and its
    /// first heartbeat) has lost it to a peer, and is compromised; but only
    /// once the lease has lapsed.
    pub(super) fn holder_marker_linked(&mut self, w: &mut World) {
        for h in 0..self.holds.len() {
            let Some(ino) = self.holds[h].filter(|_| w.procs[h].alive) else {
                continue;
            };
            if w.fs.inodes.get(&ino).is_none_or(|i| i.nlink == 0) {
                // Only a lease that lapsed may be lost so: a fresh marker
                // removed before its holder entered (after its last look)
                // is as wrong as one removed while it held.
                let lapsed = self.lease_lapsed(w, ino) || self.broken_by_age.contains(&ino);
                if self.lease.is_some() && lapsed {
                    self.compromise(w, h, "lease lost while paused");
                } else {
                    self.fail(format!(
                        "p{h} holds the lock but its marker (inode {ino}) was removed"
                    ));
                }
            }
        }
    }

    /// No process acts on a file it did not judge: the victim, which no
    /// contender ever judged, keeps its single name.
    pub(super) fn victim_keeps_one_name(&mut self, w: &World) {
        let Some(ino) = self.victim else { return };
        let linked = || w.fs.names.iter().filter(|(_, &i)| i == ino);
        if linked().count() != 1 {
            let names: Vec<String> = linked().map(|(n, _)| name(n).to_string()).collect();
            self.fail(format!(
                "the victim file (inode {ino}), which no contender judged, is linked as {names:?}"
            ));
        }
    }

    /// A holder leaving its critical section finds the lock path naming its
    /// marker. Exempt while a live peer is in the middle of an attempt or a
    /// release (whose exchange may hold our marker aside for the length of
    /// its check), with a lifetime, and for a compromised holder.
    /// Otherwise the marker was left displaced, which the protocol allows
    /// only once a breaker was killed mid-break (the holder's marker then
    /// waits under a break name for the next contender's recovery), or
    /// paused mid-break past [`BREAKER_PATIENCE`](super::BREAKER_PATIENCE)
    /// (a breaker may give up its exchange-back after 2 s while a killed or
    /// paused one blocks a ring: invariant I16), or once syscalls may fail (a breaker whose exchange
    /// or check fails mid-break leaves what it took under its break name,
    /// as a killed one does). Such a displacement is counted and traced; mutual
    /// exclusion holds throughout, and is checked after every step.
    pub(super) fn displacement_needs_a_kill_or_pause(&mut self, w: &mut World, me: usize) {
        let ours = self.holds[me];
        let at_path = w.fs.ino(LOCK);
        let peer_busy =
            (0..self.holds.len()).any(|i| i != me && w.procs[i].alive && self.attempting[i]);
        if at_path != ours && !peer_busy && self.lifetime.is_none() && !self.compromised[me] {
            // A breaker whose syscall failed mid-break abandons as a killed
            // one would be stopped: injected syscall faults count as kills.
            let killed = !w.procs.iter().all(|p| p.alive) || w.fs.faults.injects_syscall_failures();
            if !killed && !self.paused {
                self.fail(format!(
                    "p{me} leaves with its marker {ours:?} off the lock path ({at_path:?} is there), though nobody was killed or paused"
                ));
            }
            self.displacements += 1;
            w.note(
                me,
                format_args!(
                    "DISPLACED: the lock path names inode {at_path:?}, not our marker {ours:?}"
                ),
            );
        }
    }

    /// A release that returned `Ok` (of the marker of inode `ino`) left no
    /// marker of its own at the lock path that still names it: its caller
    /// believes the lock free, and a record naming a live process would
    /// keep every contender out until it exits. Its file may still be
    /// there with the released record or as a placeholder's content (a
    /// peer's check held it aside and put it back): those age out.
    /// Checked as the release returns, before any peer runs.
    pub(super) fn release_leaves_no_record_of_its_own(&mut self, w: &World, me: usize, ino: u64) {
        let Some(at_path) = w.fs.ino(LOCK).filter(|i| self.own[me].contains(i)) else {
            return;
        };
        let names_me = match w.fs.content(LOCK) {
            Some(bytes) => owner_of(bytes).is_some_and(|(pid, host)| {
                pid == w.procs[me].pid.get() && host == w.hosts[w.procs[me].host]
            }),
            None => false,
        };
        if names_me {
            self.fail(format!(
                "p{me}'s release of inode {ino} returned Ok, but its marker (inode {at_path}) at the lock path still names it: {}",
                describe_lock(w)
            ));
        }
    }

    /// Without injected syscall faults the model fails no removal, so a
    /// release has nothing to report: an error means it gave up on a
    /// removal it could have made. With faults, a release may fail; its
    /// marker then names its process, and the progress check shows that
    /// the next contender breaks it once that process is gone.
    pub(super) fn release_fails_only_under_faults(&mut self, w: &World, me: usize, e: soft::Error) {
        if !w.fs.faults.injects_syscall_failures() {
            self.fail(format!(
                "p{me}'s release failed: {e}, though no syscall fault was injected"
            ));
        }
    }

    /// A kernel lock's acquire fails only where syscalls fail: a lock
    /// file a holder removed or replaced is locked anew, and a lock call
    /// a signal interrupted is made again.
    pub(super) fn kernel_fails_only_under_faults(
        &mut self,
        w: &World,
        me: usize,
        step: swaplock_core::kernel::Step,
        e: swaplock_core::Errno,
    ) {
        if !w.fs.faults.injects_syscall_failures() {
            self.fail(format!(
                "p{me}'s kernel lock failed at {step:?} with {e:?}, though no syscall fault was injected"
            ));
        }
    }
}
