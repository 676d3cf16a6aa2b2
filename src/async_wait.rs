//! What the async waits (`lock_async`, feature `tokio`) share.

use crate::error::{LockError, Step};
use std::io;
use std::path::Path;
use std::sync::Arc;

/// Whether the caller runs in a tokio runtime, whose reactor and timer the
/// wait needs (tokio panics without them): an error naming the remedy
/// otherwise.
pub(crate) fn in_runtime(path: &Arc<Path>) -> io::Result<()> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Ok(());
    }
    let kind = io::ErrorKind::Unsupported;
    let source = io::Error::new(
        kind,
        "lock_async runs in a tokio runtime with its IO and time drivers enabled \
         (#[tokio::main], or runtime::Builder::enable_all): call it from a task",
    );
    Err(LockError::io(path, Step::Lock, kind, source))
}
