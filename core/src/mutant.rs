//! Protocol mutants: each one undoes a single guard of the soft-lock
//! protocol, of the kernel lock's or of the read-write lock's (an invariant check, a place where swaplock is stricter than
//! filelock 4.2.11, a syscall order, a liveness fix), so the simulator can
//! show that its searches notice the guard gone.
//!
//! Only builds with the `protocol-mutants` feature can switch mutants on
//! (one, or a pair whose guards cover each other), and only for the
//! current thread (`select`, with the feature); without it
//! [`active`] is a constant `false` that the compiler removes, and the
//! shipped protocol is exactly the one the simulator proves.
//!
//! The catalogue, each with the guard it removes and where that guard is
//! described, is [`Mutant::ALL`]; `docs/PROTOCOL.md` section 13.4 lists
//! which search kills each.

/// One guard of the protocol undone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mutant {
    /// Judge what was read even when it is not the pinned file (I5).
    NoPinCheck,
    /// Compare the judged file by inode only, not inode and mtime (I4,
    /// the seed's inode-reuse race).
    InodeOnlyIdentity,
    /// Evict a malformed marker at first sight, without the grace period
    /// (I9).
    NoMalformedGrace,
    /// Judge an empty marker like a malformed one (I10).
    RecordlessEvicted,
    /// Probe a record of another host on this one (I8).
    ForeignProbedLocally,
    /// Keep the lock after the exchange without checking that the file
    /// taken is the judged one (I4).
    NoTakenCheck,
    /// Exchange without looking again that the lock path still shows the
    /// judged file once our file is written (7.8 step 5).
    NoRecheckBeforeExchange,
    /// Hold after a takeover without checking that our marker is still
    /// linked (7.8 step 8).
    NoLinkCountAfterTakeover,
    /// Take over a dead writer's record without recovering what it may
    /// have stranded as a breaker (I14, 7.11).
    NoRecovery,
    /// Abandon a takeover without putting back what it took (7.9).
    NoPutBack,
    /// Create a takeover's file under its break name and then write it,
    /// as filelock does (7.8 step 3).
    BreakFileWrittenInPlace,
    /// Create a release's placeholder under its break name and then write
    /// it (7.10 step 3.1).
    PlaceholderWrittenInPlace,
    /// Abandon a takeover without first marking what may stay linked
    /// under our break name (7.9 step 3).
    AbandonLeavesRecord,
    /// Hold a marker created by name without checking that it is still
    /// linked once complete (I2, 7.2).
    NoLinkCountAfterCreate,
    /// Remove our own file by name after closing it, as filelock does (I7).
    UnlinkAfterClose,
    /// Release by `lstat` then `unlink`, as filelock does, instead of
    /// through a placeholder (7.4, 7.10).
    ReleaseByUnlink,
    /// Release without first marking the marker released (7.3, 7.4).
    ReleaseWithoutMark,
    /// Report a release whose `fstat` of our marker failed as done (7.4).
    ReleaseHidesFstatError,
    /// Leave our marker in place when no placeholder can be made, instead
    /// of falling back to unlinking it (7.10 step 3.1).
    NoReleaseFallback,
    /// Unlink our marker by name without first touching it, so that a
    /// peer's takeover of a marker whose lease passed can slip in between
    /// the look and the unlink (7.3 step 4, 12.1 S1).
    UnlinkWithoutTouch,
    /// Let recovery delete another live breaker's placeholder as malformed
    /// (7.11).
    RecoveryDeletesPlaceholders,
    /// Under Windows rules, move the file the open to move found at the
    /// lock path without checking that it is the judged, pinned file
    /// (7.19).
    NoMoverCheck,
    /// Key the unchanged-marker watch on mtime and inode only, without
    /// the change time, so that a fresh marker repeating another file's
    /// key inherits the time spent watching that file (7.13).
    CtimeDroppedFromWatch,
    /// Measure how long a marker stood unchanged up to the judgement
    /// instead of up to the look that read it (7.13).
    WatchTimedAtJudgement,
    /// Keep a kernel lock without checking that the path still names the
    /// file locked (the with-lock-ex protocol's `fstat` against `stat`,
    /// 7.16).
    KernelLockUnchecked,
    /// Give up with an error when the kernel lock is on a file a holder
    /// removed or replaced, instead of locking the file now at the path
    /// (7.16).
    KernelLockNoRetry,
    /// Report a kernel lock call interrupted by a signal (`EINTR`) as an
    /// error instead of making it again.
    KernelInterruptFails,
    /// On the switch to a soft lock after `flock` answered `ENOSYS`,
    /// remove the file at the lock path even when this attempt did not
    /// create it (7.17, I22).
    FallbackRemovesFoundFile,
    /// Link an unnamed marker at the lock path even when writing our record into it failed (7.2, I2).
    LinkUnfinishedUnnamed,
    /// Publish a marker written under a write name by a plain rename, which replaces a marker already at the lock path, instead of the exclusive one (7.2 step 3b).
    RenameReplaces,
    /// Publish a marker (or a release's placeholder) without syncing its record first, so that a power cut may keep the name and lose the bytes (7.2, 13.2).
    RecordUnsynced,
    /// Exchange a release's placeholder into the lock path without syncing it first (7.10, 13.2).
    PlaceholderUnsynced,
    /// Take a recorded start token as this process's when their start times match, whatever their boot ids (4.2, 13.2).
    StartIgnoresBoot,
    /// Judge another recoverer's restore name by its PID alone, even when the record it claims is of an earlier boot (7.11, 13.2).
    RestoreClaimByPidAlone,
    /// Claim the dead writer's break names without looking whether one is a live breaker's under the same PID: the file we judged taken aside, or that breaker's own live record (7.11, 13.2).
    BreakCandidateUnchecked,
    /// When an exchange-back finds our break name claimed while our file sits at the lock path, leave our complete record there instead of our placeholder: a recovery that then removes what it claimed (released, or dead) leaves the lock path naming a live process that holds nothing (7.9, 12.1 S13).
    ClaimedLeavesRecord,
    /// Leave our complete record in our file when a settled exchange-back's abandon finds it still linked, instead of marking it: a recovery that claimed it from our break name once our exchange-back put it there publishes it at the lock path, naming a live process that holds nothing (7.9, 12.1 S14).
    SettledLeavesRecord,
    /// Mark our file with our placeholder at its own length and cut the file to it, keeping the mix when the cut fails, instead of leading the placeholder's PID with zeros to our record's length so that one write replaces the record whole (7.9).
    TornPlaceholderKept,
    /// Take a takeover's exchange reported failed for one never made, and abandon without a put-back: one made all the same (a FUSE server's EINTR) leaves what it took under our break name while the abandon removes our file from the lock path (7.8 step 6).
    ExchangeErrorNeverMade,
    /// Let recovery delete a stranded record of another process proven gone, instead of putting it back at the lock path: that process may have been a breaker killed mid-takeover, whose own break names hold a live holder's marker that only a recovery led by its record at the lock path finds (7.11 step 6, 12.1 S15).
    RecoveryDeletesDeadOwners,
    /// Swap back at once a file an exchange-back's exchange fed aside, as 12.1 S10 once did: a process paused before the swap takes aside a marker made since, while its holder holds (7.9 step 2.3, 12.1 S16).
    SwapBack,
    /// Swap back at once a file a recovery's restore fed aside (the lock path replaced between its look and its exchange), instead of handing it back: a recovery paused before the swap takes aside a marker made since, while its holder holds (7.11 step 6, 12.1 S17).
    RestoreSwapBack,
    /// Take a marker over under POSIX rules when its pin failed, judging it unpinned, as 7.5 once let a judgement do: its inode number, freed by the break of a peer and given to a new holder's marker within the same mtime, passes for the judged file's at the takeover's looks (7.5, 12.1 S18).
    UnpinnedTakeover,
    /// Open a non-regular node at the lock path to read it, so that a symlink there fails the read (`ELOOP`) instead of reading as no marker, which ages out (3.1).
    SymlinkReadFails,
    /// Report an exclusive create refused with `EPERM` (an SFTP client's answer over an existing name) as an error, without looking whether the name exists (7.2, 13.5).
    EpermIsError,
    /// Unlink a name of our own open file without first looking that the name still shows that file (I7).
    UnlinkIfSameBlind,
    /// Leave the marker we created at the lock path when writing our record into it failed, instead of removing it while it is open (7.2 step 4, I2).
    FailedCreateLeavesMarker,
    /// Take a lease over without having seen its marker unchanged for the lease (7.14).
    LeaseExpiredAtSight,
    /// Break a marker under a lifetime whatever its age (7.12).
    LifetimeIgnoresAge,
    /// Go on with a takeover after a recovery concluded that the lock counts as held (7.11).
    RecoveryHeldIgnored,
    /// Exchange back while the lock path holds another process's file, as filelock does (7.9, 12.1 S3).
    FeedingExchangeBack,
    /// At the end of an exchange-back, unlink our break name whatever file it holds, as filelock does (7.9, 12.1 S4).
    ExchangeBackUnlinksAside,
    /// Mark an abandoned takeover's file with the released record where what it took may wait under our break name, instead of with our placeholder, which leads a recovery there (7.9 step 3).
    AbandonMarksReleased,
    /// Remove our own file through a placeholder even when marking it released failed (7.3).
    RemoveOwnWithoutMark,
    /// Unlink our marker by name after touching it without looking again that the lock path still shows it (7.3 step 4).
    NoLookAfterTouch,
    /// Unlink our marker by name even when touching it first failed (7.3 step 4).
    UnlinkDespiteTouchFailure,
    /// After a release's placeholder exchange, unlink what the break name took without checking that it is our marker (7.10 step 3.3).
    ReleaseNoGrabCheck,
    /// Unlink the lock path after a release's exchange without checking that it still shows our placeholder (7.10 step 3.3).
    PlaceholderUnlinkBlind,
    /// Retry a failed release's removal by name after closing the marker, as filelock does for shares that refuse to delete an open file (I7, 12.1 S2).
    ReleaseUnlinksAfterClose,
    /// Give a release up as failed when our marker is back at the lock path after a peer held it aside for an instant, instead of looking again (7.4).
    ReleaseNoLookAgain,
    /// Leave our marker unmarked when a peer holds it aside as we release, so that its record naming us may come back (7.4, I17).
    AsideLeftUnmarked,
    /// Count a recovery whose directory listing failed as finding nothing, instead of the lock as held (7.11).
    RecoveryListErrorClear,
    /// Skip a recovery candidate whose `lstat` failed, instead of counting the lock as held (7.11).
    RecoveryLstatErrorSkipped,
    /// Claim a live recoverer's restore name as a dead one's (7.11, I15).
    LiveRecovererIgnored,
    /// Count a claimed record that cannot be read as nothing in the way, instead of handing it back (7.11).
    RestoreReadErrorClear,
    /// Let recovery delete an empty stranded file, which may be a live recordless holder's marker (7.11, I10).
    RecoveryDeletesRecordless,
    /// Let recovery delete a stranded record whose holder is not proven gone (7.11 step 6).
    RecoveryDeletesLiveRecords,
    /// Put a stranded live record back at the lock path whatever the path holds, not only while it holds the dead writer's judged record (7.11).
    RestoreOverAnything,
    /// After putting a stranded record back, keep the exchange without checking that it took the judged record from the lock path (7.11).
    RestoreNoSwapBack,
    /// Delete a claimed record that must be handed back, instead of renaming it to a break name of its breaker (7.11).
    HandBackDeletes,
    /// Sweep another breaker's claimed name without judging again, once claimed, that it holds that dead breaker's own record (7.11).
    SweepUnjudged,
    /// Take our own restore name, left by an earlier recovery of ours, for a live recoverer's (7.11).
    NoAdoptOwnClaim,
    /// Keep a kernel lock when the `stat` of the path failed (7.16 step 3).
    KernelStatErrorHeld,
    /// On the switch to a soft lock after `flock` answered `ENOSYS`, close the file the attempt created and then unlink the path by name if it shows the same inode number (7.17).
    FallbackUnlinksAfterClose,
    /// Skip a recovery candidate gone between the listing and its `lstat`, instead of counting the lock as held: a peer's recovery may have claimed it under a restore name the listing missed (7.11, 12.1 S7).
    VanishedCandidateSkipped,
    /// Count an exchange-back settled when our break name is gone while our file sits at the lock path, so that abandon removes our file there under the recovery that claimed what we took (7.9, 12.1 S8).
    ClaimedAsideSettles,
    /// Leave the file we took under our break name when an exchange-back ends on the lock path missing, where its holder's hold has ended and a recovery of our names would put it back (7.9, 12.1 S9).
    AsideKeptWhenPathMissing,
    /// Unlink our marker by name after a touch that left its mtime as it was (within the mtime's granularity), which a peer that judged it before cannot tell from no touch, instead of touching again until the mtime moves (7.3 step 4, 12.1 S11).
    UnlinkDespiteUnchangedMtime,
    /// Decide whether a read-write commit's link landed by the call's return code, not by the identity of the two names (RW3).
    RwLinkByReturnCode,
    /// Commit generation N without first checking that N − 1 exists (RW11).
    RwNoPredecessorBefore,
    /// Keep a landed commit of N without checking again that N − 1 still exists (RW11).
    RwNoPredecessorAfter,
    /// Keep a landed commit of N whatever lead the listing or HEAD shows over it (RW11).
    RwNoLeadCheck,
    /// Check only that the predecessor of N exists, as filelock does, not that it is the very record the successor was built on (RW10, RW11).
    RwPredecessorByName,
    /// Commit without reading the epoch again first: a commit may land in a log that replaced the one read (RW10).
    RwCommitIgnoresEpoch,
    /// Keep the remembered latest generation when the epoch changes (RW10).
    RwMemoryOutlivesEpoch,
    /// Rewrite a holder record through whatever file its name opens, without checking that it is the one created, with one name (RW9).
    RwOverwriteUnchecked,
    /// Judge a member stale after the observer's own threshold, ignoring the longer lease its record asks (RW7).
    RwOwnThresholdOnly,
    /// Leave a waiting participant's record unrefreshed at its attempts (RW8).
    RwNoRefreshOnAttempt,
    /// Let a writer wait for the readers to drain before it enters the snapshot (RW5).
    RwWriterWaitsOutside,
    /// Grant a writer by a commit that still names readers (RW4).
    RwGrantBesideReaders,
    /// Compact the expired generations newest first (RW12).
    RwCompactNewestFirst,
    /// Move HEAD whatever generation it names, newer or not (RW13).
    RwHeadOverNewer,
    /// Commit generation 1 of a log that looks new without asking the server, by an exclusive create of HEAD, that no HEAD of this epoch exists, as filelock does (C-RW1).
    RwNoNewLogConfirm,
    /// Keep a landed commit of generation 1 without asking again, after the link, that the HEAD its confirmation created is still the file at HEAD (C-RW1).
    RwNoNewLogRecheck,
    /// Report a grant without first syncing gen/, so that a host crash may lose the link and the generation be granted again, as filelock does (C-RW5).
    RwNoSyncBeforeGrant,
    /// Fail an acquire when a commit's temporary was swept before its link, as filelock does, instead of counting the commit lost (C-RW6).
    RwSweptTempIsError,
    /// Never prepare the log's directories again when gen/ is gone, as filelock's long-lived instances do (C-RW7).
    RwNoReprepare,
    /// Honour any lease a holder record asks, as filelock does, so that a crashed holder asking 1e+20 keeps everyone out (C-RW8).
    RwLeaseUncapped,
    /// Bind HEAD only to a valid epoch, as filelock does: under an epoch that holds no token, HEAD is never written or trusted, and a client blind to the live log takes it for new (C-RW1).
    RwTornEpochUnbound,
}

impl Mutant {
    /// Every mutant, in catalogue order.
    pub const ALL: &'static [Mutant] = &[
        Mutant::NoPinCheck,
        Mutant::InodeOnlyIdentity,
        Mutant::NoMalformedGrace,
        Mutant::RecordlessEvicted,
        Mutant::ForeignProbedLocally,
        Mutant::NoTakenCheck,
        Mutant::NoRecheckBeforeExchange,
        Mutant::NoLinkCountAfterTakeover,
        Mutant::NoRecovery,
        Mutant::NoPutBack,
        Mutant::BreakFileWrittenInPlace,
        Mutant::PlaceholderWrittenInPlace,
        Mutant::AbandonLeavesRecord,
        Mutant::NoLinkCountAfterCreate,
        Mutant::UnlinkAfterClose,
        Mutant::ReleaseByUnlink,
        Mutant::ReleaseWithoutMark,
        Mutant::ReleaseHidesFstatError,
        Mutant::NoReleaseFallback,
        Mutant::UnlinkWithoutTouch,
        Mutant::RecoveryDeletesPlaceholders,
        Mutant::NoMoverCheck,
        Mutant::CtimeDroppedFromWatch,
        Mutant::WatchTimedAtJudgement,
        Mutant::KernelLockUnchecked,
        Mutant::KernelLockNoRetry,
        Mutant::KernelInterruptFails,
        Mutant::FallbackRemovesFoundFile,
        Mutant::LinkUnfinishedUnnamed,
        Mutant::SymlinkReadFails,
        Mutant::EpermIsError,
        Mutant::UnlinkIfSameBlind,
        Mutant::FailedCreateLeavesMarker,
        Mutant::LeaseExpiredAtSight,
        Mutant::LifetimeIgnoresAge,
        Mutant::RecoveryHeldIgnored,
        Mutant::FeedingExchangeBack,
        Mutant::ExchangeBackUnlinksAside,
        Mutant::AbandonMarksReleased,
        Mutant::RemoveOwnWithoutMark,
        Mutant::NoLookAfterTouch,
        Mutant::UnlinkDespiteTouchFailure,
        Mutant::ReleaseNoGrabCheck,
        Mutant::PlaceholderUnlinkBlind,
        Mutant::ReleaseUnlinksAfterClose,
        Mutant::ReleaseNoLookAgain,
        Mutant::AsideLeftUnmarked,
        Mutant::RecoveryListErrorClear,
        Mutant::RecoveryLstatErrorSkipped,
        Mutant::LiveRecovererIgnored,
        Mutant::RestoreReadErrorClear,
        Mutant::RecoveryDeletesRecordless,
        Mutant::RecoveryDeletesLiveRecords,
        Mutant::RestoreOverAnything,
        Mutant::RestoreNoSwapBack,
        Mutant::HandBackDeletes,
        Mutant::SweepUnjudged,
        Mutant::NoAdoptOwnClaim,
        Mutant::KernelStatErrorHeld,
        Mutant::FallbackUnlinksAfterClose,
        Mutant::VanishedCandidateSkipped,
        Mutant::ClaimedAsideSettles,
        Mutant::AsideKeptWhenPathMissing,
        Mutant::UnlinkDespiteUnchangedMtime,
        Mutant::RenameReplaces,
        Mutant::RecordUnsynced,
        Mutant::PlaceholderUnsynced,
        Mutant::StartIgnoresBoot,
        Mutant::RestoreClaimByPidAlone,
        Mutant::BreakCandidateUnchecked,
        Mutant::ClaimedLeavesRecord,
        Mutant::SettledLeavesRecord,
        Mutant::TornPlaceholderKept,
        Mutant::ExchangeErrorNeverMade,
        Mutant::RecoveryDeletesDeadOwners,
        Mutant::SwapBack,
        Mutant::RestoreSwapBack,
        Mutant::UnpinnedTakeover,
        Mutant::RwLinkByReturnCode,
        Mutant::RwNoPredecessorBefore,
        Mutant::RwNoPredecessorAfter,
        Mutant::RwNoLeadCheck,
        Mutant::RwPredecessorByName,
        Mutant::RwCommitIgnoresEpoch,
        Mutant::RwMemoryOutlivesEpoch,
        Mutant::RwOverwriteUnchecked,
        Mutant::RwOwnThresholdOnly,
        Mutant::RwNoRefreshOnAttempt,
        Mutant::RwWriterWaitsOutside,
        Mutant::RwGrantBesideReaders,
        Mutant::RwCompactNewestFirst,
        Mutant::RwHeadOverNewer,
        Mutant::RwNoNewLogConfirm,
        Mutant::RwNoNewLogRecheck,
        Mutant::RwNoSyncBeforeGrant,
        Mutant::RwSweptTempIsError,
        Mutant::RwNoReprepare,
        Mutant::RwLeaseUncapped,
        Mutant::RwTornEpochUnbound,
    ];

    /// The read-write lock's mutants (a tail of [`Mutant::ALL`]): the
    /// read-write simulator's catalogue, apart from the soft lock's.
    pub const RW: &'static [Mutant] = &[
        Mutant::RwLinkByReturnCode,
        Mutant::RwNoPredecessorBefore,
        Mutant::RwNoPredecessorAfter,
        Mutant::RwNoLeadCheck,
        Mutant::RwPredecessorByName,
        Mutant::RwCommitIgnoresEpoch,
        Mutant::RwMemoryOutlivesEpoch,
        Mutant::RwOverwriteUnchecked,
        Mutant::RwOwnThresholdOnly,
        Mutant::RwNoRefreshOnAttempt,
        Mutant::RwWriterWaitsOutside,
        Mutant::RwGrantBesideReaders,
        Mutant::RwCompactNewestFirst,
        Mutant::RwHeadOverNewer,
        Mutant::RwNoNewLogConfirm,
        Mutant::RwNoNewLogRecheck,
        Mutant::RwNoSyncBeforeGrant,
        Mutant::RwSweptTempIsError,
        Mutant::RwNoReprepare,
        Mutant::RwLeaseUncapped,
        Mutant::RwTornEpochUnbound,
    ];

    /// The read-write lock's guards where swaplock is stricter than
    /// filelock 4.2.11: with all of them undone, the driver takes
    /// filelock's exact steps (the simulator's naive policy).
    pub const RW_STRICTER: &'static [Mutant] = &[
        Mutant::RwNoNewLogConfirm,
        Mutant::RwNoNewLogRecheck,
        Mutant::RwPredecessorByName,
        Mutant::RwNoSyncBeforeGrant,
        Mutant::RwSweptTempIsError,
        Mutant::RwNoReprepare,
        Mutant::RwLeaseUncapped,
        Mutant::RwTornEpochUnbound,
    ];

    /// The mutant's name, as kept findings and reports spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Mutant::NoPinCheck => "no-pin-check",
            Mutant::InodeOnlyIdentity => "inode-only-identity",
            Mutant::NoMalformedGrace => "no-malformed-grace",
            Mutant::RecordlessEvicted => "recordless-evicted",
            Mutant::ForeignProbedLocally => "foreign-probed-locally",
            Mutant::NoTakenCheck => "no-taken-check",
            Mutant::NoRecheckBeforeExchange => "no-recheck-before-exchange",
            Mutant::NoLinkCountAfterTakeover => "no-link-count-after-takeover",
            Mutant::NoRecovery => "no-recovery",
            Mutant::NoPutBack => "no-put-back",
            Mutant::BreakFileWrittenInPlace => "break-file-written-in-place",
            Mutant::PlaceholderWrittenInPlace => "placeholder-written-in-place",
            Mutant::AbandonLeavesRecord => "abandon-leaves-record",
            Mutant::NoLinkCountAfterCreate => "no-link-count-after-create",
            Mutant::UnlinkAfterClose => "unlink-after-close",
            Mutant::ReleaseByUnlink => "release-by-unlink",
            Mutant::ReleaseWithoutMark => "release-without-mark",
            Mutant::ReleaseHidesFstatError => "release-hides-fstat-error",
            Mutant::NoReleaseFallback => "no-release-fallback",
            Mutant::UnlinkWithoutTouch => "unlink-without-touch",
            Mutant::RecoveryDeletesPlaceholders => "recovery-deletes-placeholders",
            Mutant::NoMoverCheck => "no-mover-check",
            Mutant::CtimeDroppedFromWatch => "ctime-dropped-from-watch",
            Mutant::WatchTimedAtJudgement => "watch-timed-at-judgement",
            Mutant::KernelLockUnchecked => "kernel-lock-unchecked",
            Mutant::KernelLockNoRetry => "kernel-lock-no-retry",
            Mutant::KernelInterruptFails => "kernel-interrupt-fails",
            Mutant::FallbackRemovesFoundFile => "fallback-removes-found-file",
            Mutant::LinkUnfinishedUnnamed => "link-unfinished-unnamed",
            Mutant::RenameReplaces => "rename-replaces",
            Mutant::RecordUnsynced => "record-unsynced",
            Mutant::PlaceholderUnsynced => "placeholder-unsynced",
            Mutant::StartIgnoresBoot => "start-ignores-boot",
            Mutant::RestoreClaimByPidAlone => "restore-claim-by-pid-alone",
            Mutant::BreakCandidateUnchecked => "break-candidate-unchecked",
            Mutant::ClaimedLeavesRecord => "claimed-leaves-record",
            Mutant::SettledLeavesRecord => "settled-leaves-record",
            Mutant::TornPlaceholderKept => "torn-placeholder-kept",
            Mutant::ExchangeErrorNeverMade => "exchange-error-never-made",
            Mutant::RecoveryDeletesDeadOwners => "recovery-deletes-dead-owners",
            Mutant::SwapBack => "swap-back",
            Mutant::RestoreSwapBack => "restore-swap-back",
            Mutant::UnpinnedTakeover => "unpinned-takeover",
            Mutant::SymlinkReadFails => "symlink-read-fails",
            Mutant::EpermIsError => "eperm-is-error",
            Mutant::UnlinkIfSameBlind => "unlink-if-same-blind",
            Mutant::FailedCreateLeavesMarker => "failed-create-leaves-marker",
            Mutant::LeaseExpiredAtSight => "lease-expired-at-sight",
            Mutant::LifetimeIgnoresAge => "lifetime-ignores-age",
            Mutant::RecoveryHeldIgnored => "recovery-held-ignored",
            Mutant::FeedingExchangeBack => "feeding-exchange-back",
            Mutant::ExchangeBackUnlinksAside => "exchange-back-unlinks-aside",
            Mutant::AbandonMarksReleased => "abandon-marks-released",
            Mutant::RemoveOwnWithoutMark => "remove-own-without-mark",
            Mutant::NoLookAfterTouch => "no-look-after-touch",
            Mutant::UnlinkDespiteTouchFailure => "unlink-despite-touch-failure",
            Mutant::ReleaseNoGrabCheck => "release-no-grab-check",
            Mutant::PlaceholderUnlinkBlind => "placeholder-unlink-blind",
            Mutant::ReleaseUnlinksAfterClose => "release-unlinks-after-close",
            Mutant::ReleaseNoLookAgain => "release-no-look-again",
            Mutant::AsideLeftUnmarked => "aside-left-unmarked",
            Mutant::RecoveryListErrorClear => "recovery-list-error-clear",
            Mutant::RecoveryLstatErrorSkipped => "recovery-lstat-error-skipped",
            Mutant::LiveRecovererIgnored => "live-recoverer-ignored",
            Mutant::RestoreReadErrorClear => "restore-read-error-clear",
            Mutant::RecoveryDeletesRecordless => "recovery-deletes-recordless",
            Mutant::RecoveryDeletesLiveRecords => "recovery-deletes-live-records",
            Mutant::RestoreOverAnything => "restore-over-anything",
            Mutant::RestoreNoSwapBack => "restore-no-swap-back",
            Mutant::HandBackDeletes => "hand-back-deletes",
            Mutant::SweepUnjudged => "sweep-unjudged",
            Mutant::NoAdoptOwnClaim => "no-adopt-own-claim",
            Mutant::KernelStatErrorHeld => "kernel-stat-error-held",
            Mutant::FallbackUnlinksAfterClose => "fallback-unlinks-after-close",
            Mutant::VanishedCandidateSkipped => "vanished-candidate-skipped",
            Mutant::ClaimedAsideSettles => "claimed-aside-settles",
            Mutant::AsideKeptWhenPathMissing => "aside-kept-when-path-missing",
            Mutant::UnlinkDespiteUnchangedMtime => "unlink-despite-unchanged-mtime",
            Mutant::RwLinkByReturnCode => "rw-link-by-return-code",
            Mutant::RwNoPredecessorBefore => "rw-no-predecessor-before",
            Mutant::RwNoPredecessorAfter => "rw-no-predecessor-after",
            Mutant::RwNoLeadCheck => "rw-no-lead-check",
            Mutant::RwPredecessorByName => "rw-predecessor-by-name",
            Mutant::RwCommitIgnoresEpoch => "rw-commit-ignores-epoch",
            Mutant::RwMemoryOutlivesEpoch => "rw-memory-outlives-epoch",
            Mutant::RwOverwriteUnchecked => "rw-overwrite-unchecked",
            Mutant::RwOwnThresholdOnly => "rw-own-threshold-only",
            Mutant::RwNoRefreshOnAttempt => "rw-no-refresh-on-attempt",
            Mutant::RwWriterWaitsOutside => "rw-writer-waits-outside",
            Mutant::RwGrantBesideReaders => "rw-grant-beside-readers",
            Mutant::RwCompactNewestFirst => "rw-compact-newest-first",
            Mutant::RwHeadOverNewer => "rw-head-over-newer",
            Mutant::RwNoNewLogConfirm => "rw-no-new-log-confirm",
            Mutant::RwNoNewLogRecheck => "rw-no-new-log-recheck",
            Mutant::RwNoSyncBeforeGrant => "rw-no-sync-before-grant",
            Mutant::RwSweptTempIsError => "rw-swept-temp-is-error",
            Mutant::RwNoReprepare => "rw-no-reprepare",
            Mutant::RwLeaseUncapped => "rw-lease-uncapped",
            Mutant::RwTornEpochUnbound => "rw-torn-epoch-unbound",
        }
    }

    /// This mutant's bit in a set of mutants.
    #[cfg(feature = "protocol-mutants")]
    fn bit(self) -> u128 {
        let at = Mutant::ALL.iter().position(|&m| m == self).unwrap_or(127);
        1 << at
    }

    /// The mutant named `name`.
    pub fn named(name: &str) -> Option<Mutant> {
        Mutant::ALL.iter().copied().find(|m| m.name() == name)
    }
}

#[cfg(feature = "protocol-mutants")]
mod switch {
    extern crate std;
    use super::Mutant;
    use core::cell::Cell;

    std::thread_local! {
        /// The mutants switched on, one bit each by catalogue position.
        static ON: Cell<u128> = const { Cell::new(0) };
    }

    pub(super) fn select(ms: &[Mutant]) {
        ON.with(|on| on.set(ms.iter().fold(0, |bits, m| bits | m.bit())));
    }

    pub(super) fn active(m: Mutant) -> bool {
        ON.with(|on| on.get() & m.bit() != 0)
    }
}

/// Switches the mutants `ms` on for the current thread, and every other
/// off (none: the shipped protocol). Only with the `protocol-mutants`
/// feature.
#[cfg(feature = "protocol-mutants")]
pub fn select(ms: &[Mutant]) {
    switch::select(ms);
}

/// Whether mutant `m` is switched on for the current thread: always
/// `false` without the `protocol-mutants` feature.
#[inline(always)]
pub fn active(m: Mutant) -> bool {
    #[cfg(feature = "protocol-mutants")]
    {
        switch::active(m)
    }
    #[cfg(not(feature = "protocol-mutants"))]
    {
        let _ = m;
        false
    }
}
