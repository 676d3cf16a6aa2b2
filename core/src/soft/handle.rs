//! The takeover where open files cannot be moved (Windows rules, PROTOCOL
//! 7.10 step 4 made exact, invariant I12): the stale marker is renamed
//! aside and deleted through a handle on the judged file itself, then our
//! marker is created at the freed path.

use super::config::{Config, Error};
use super::create::finish_create;
use super::os::Os;
use super::types::{Attempt, Judged, Takeover};
use crate::mutant::{active, Mutant};
use crate::names::pid_break_name;

/// The pin is a read handle that shares everything, so that judging a
/// marker never stands in a peer's way (filelock releases by closing its
/// marker and then deleting it through a new open, which a pin refusing
/// delete sharing would make fail). Once the judged file is found stale, a
/// handle with delete access that does not share delete is opened at the
/// lock path: it opens only if nobody holds the file there without delete
/// sharing (no live holder has it), and no other breaker can open one
/// while we hold it. It must hold the judged file itself, which the pin
/// keeps in existence, so no other file can have its identity meanwhile.
/// The judged file is renamed aside through that handle, then deleted
/// through it, and our marker is created at the freed path.
/// filelock renames by name and, when the file it moved proves to be a
/// recreated one, links it back; renaming the handle's file never moves
/// anything but the file judged, so nothing ever needs linking back, and no
/// name a peer may replace (with a symlink, say) is followed. The lock path
/// is empty between the delete and our create, as it is in filelock's
/// break there; only a file nobody holds is ever removed.
pub(super) fn take_over_by_handle<O: Os + ?Sized>(
    os: &mut O,
    cfg: &Config<'_>,
    judged: &Judged,
    pin: Option<&O::File>,
) -> Result<Takeover<O::File>, Error> {
    // Without a handle on the judged file nothing moves.
    let Some(pin) = pin else {
        return Ok(Takeover::Busy);
    };
    match os.fstat(pin) {
        Ok(st) if judged.is(&st) && st.nlink > 0 => {}
        _ => return Ok(Takeover::Busy),
    }
    let token = os.token();
    let aside = pid_break_name(cfg.lock, cfg.pid, &token)?;
    // Refused while a live holder (or another breaker) has the file open
    // without delete sharing.
    let mover = match os.handles().map(|h| h.open_to_move(cfg.lock)) {
        Some(Ok(mover)) => mover,
        _ => return Ok(Takeover::Busy),
    };
    let same = match (os.fstat(pin), os.fstat(&mover)) {
        _ if active(Mutant::NoMoverCheck) => true,
        (Ok(pinned), Ok(at_path)) => {
            judged.is(&at_path) && pinned.same_file(&at_path) && at_path.nlink > 0
        }
        _ => false,
    };
    let moved = same
        && os.handles().is_some_and(|h| {
            let renamed = h.rename_file(&mover, &aside).is_ok();
            // A failed delete leaves the stale file under our break name,
            // which no reader takes for a marker; the lock path is free
            // either way.
            if renamed {
                let _ = h.remove_file(&mover);
            }
            renamed
        });
    os.close(mover);
    if !moved {
        return Ok(Takeover::Busy);
    }
    let Ok(file) = os.create_new(cfg.lock, cfg.marker_mode(), true) else {
        return Ok(Takeover::Busy);
    };
    Ok(match finish_create(os, cfg, file)? {
        Attempt::Acquired(held) => Takeover::Took(held),
        Attempt::Busy(_) => Takeover::Busy,
    })
}
