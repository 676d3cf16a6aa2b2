//! The end of an exclusive create at the lock path (PROTOCOL 7.2): our
//! record published in the marker just created, which the attempt and the
//! takeover through a handle both make.
//!
//! Invariant kept here:
//! - I2: the lock is held only once our record is complete and our marker
//!   still linked; a failed write removes our file while it is open,
//!   never by name after close.

use super::config::{Config, Error};
use super::marker::publish_synced;
use super::os::Os;
use super::release::remove_own_file;
use super::types::{Attempt, Held, Holder};
use crate::mutant::{active, Mutant};

/// Publishes our record in the marker just created at the lock path as
/// `file`; held only if the marker is still linked once complete.
pub(super) fn finish_create<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    file: O::File,
) -> Result<Attempt<O::File>, Error> {
    // Synced once written, as a record is before any name publishes it:
    // here the name came first (7.2 step 4), so a power cut between the
    // create and the end of the sync may still keep the name without the
    // record, but not for the writeback delay after it (PROTOCOL 13.2).
    match publish_synced(os, cfg, &file) {
        // A writer paused mid-record longer than the malformed grace period
        // has its half-written marker evicted (invariant I9): it holds the
        // lock only if its marker, complete now, is still linked. Complete,
        // it names a live process and cannot be evicted any more.
        Ok(_)
            if !os.fstat(&file).is_ok_and(|st| st.nlink > 0)
                && !active(Mutant::NoLinkCountAfterCreate) =>
        {
            os.close(file);
            Ok(Attempt::Busy(Holder::Unknown))
        }
        Ok(id) => Ok(Attempt::Acquired(Held { file, id })),
        Err(e) => {
            // Invariant I2: remove our file while it is open, never by name
            // after close, so a successor's marker is never taken for ours.
            if active(Mutant::UnlinkAfterClose) {
                os.close(file);
                let _ = os.unlink(cfg.lock);
                return Err(e);
            }
            if !active(Mutant::FailedCreateLeavesMarker) {
                let _ = remove_own_file(os, cfg, &file);
            }
            os.close(file);
            Err(e)
        }
    }
}
