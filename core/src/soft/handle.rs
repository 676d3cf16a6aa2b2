//! The takeover where open files cannot be moved (Windows rules, PROTOCOL
//! 7.10 step 4 made exact, invariant I12): the stale marker is renamed
//! aside and deleted through a handle on the judged file itself, then our
//! marker is created at the freed path.

use super::acquire::{finish_create, Attempt};
use super::config::{Config, Error};
use super::judge::Judged;
use super::os::Os;
use super::takeover::Takeover;
use crate::names::pid_break_name;

/// The pin is a handle with delete access that does not share delete, so
/// it opened only because nobody holds the file without delete sharing (no
/// live holder has it), and no other breaker can pin the file while we
/// hold it. The judged file is renamed aside through that handle, then
/// deleted through it, and our marker is created at the freed path.
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
    // Without a handle on the judged file nothing moves: the pin fails while
    // a live holder keeps the marker open.
    let Some(pin) = pin else {
        return Ok(Takeover::Busy);
    };
    match os.fstat(pin) {
        Ok(st) if judged.is(&st) && st.nlink > 0 => {}
        _ => return Ok(Takeover::Busy),
    }
    let token = os.token();
    let aside = pid_break_name(cfg.lock, cfg.pid, &token)?;
    let Some(handles) = os.handles() else {
        return Ok(Takeover::Busy);
    };
    if handles.rename_file(pin, &aside).is_err() {
        return Ok(Takeover::Busy);
    }
    // A failed delete leaves the stale file under our break name, which no
    // reader takes for a marker; the lock path is free either way.
    let _ = handles.remove_file(pin);
    let Ok(file) = os.create_new(cfg.lock, cfg.marker_mode(), true) else {
        return Ok(Takeover::Busy);
    };
    Ok(match finish_create(os, cfg, file)? {
        Attempt::Acquired(held) => Takeover::Took(held),
        Attempt::Busy(_) => Takeover::Busy,
    })
}
