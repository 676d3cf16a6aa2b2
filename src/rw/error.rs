//! What stops a read-write lock, said with its cause and its remedy.

use crate::error::{LockError, Step};
use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;
use swaplock_core::rw::files::{FsError, Tree};
use swaplock_core::rw::names::generation_name;

/// A failure of the log's own steps: the driver's.
pub(crate) use swaplock_core::rw::driver::Error as RwError;

/// The sentence of an [`RwError`] that is not the system's own.
#[derive(Debug)]
struct Problem(String);

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Problem {}

fn problem(path: &Arc<Path>, step: Step, kind: io::ErrorKind, text: String) -> io::Error {
    LockError::io(path, step, kind, io::Error::new(kind, Problem(text)))
}

/// A failure of the log as the lock's caller sees it.
pub(crate) trait IntoIo {
    /// The error, said with its cause and remedy: `path` is the lock's,
    /// `root` its log's.
    fn into_io(self, path: &Arc<Path>, root: &Path, step: Step) -> io::Error;
}

impl IntoIo for RwError {
    fn into_io(self, path: &Arc<Path>, root: &Path, step: Step) -> io::Error {
        match self {
            RwError::Fs(FsError::Os(e)) => LockError::errno(path, step, e),
            RwError::Fs(FsError::TreeReplaced { tree, owner }) => {
                let dir = match tree {
                    Tree::Root => root.to_path_buf(),
                    Tree::Area(_) => root.join(tree.name()),
                };
                let why = match owner {
                    None => "exists but is not a directory or is a symlink".to_owned(),
                    Some(uid) => format!(
                        "belongs to uid {uid}, not to this process's account or its parent's owner"
                    ),
                };
                problem(
                    path,
                    step,
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "{} {why}; refusing to use it: remove it (or what replaced it) once no \
                         participant runs, and the lock makes it again",
                        dir.display()
                    ),
                )
            }
            RwError::Fs(FsError::NoHardLinks(e)) => problem(
                path,
                step,
                io::ErrorKind::Unsupported,
                format!(
                    "the filesystem of {} has no hard links ({e}), which the read-write lock \
                     commits by: put the lock on a filesystem that has them (not vfat or exFAT)",
                    root.display()
                ),
            ),
            RwError::Fs(FsError::LinkNotOneFile) => problem(
                path,
                step,
                io::ErrorKind::Unsupported,
                format!(
                    "the filesystem of {} shows a hard link's two names as two different files \
                     (sshfs gives each name an inode number of its own), so the read-write \
                     lock could never confirm a commit there: put the lock on a filesystem that \
                     shows hard links as one file (a local one, or NFS), or use a soft lock \
                     (kind soft, marker or lease) on this one",
                    root.display()
                ),
            ),
            RwError::Malformed { generation, why } => {
                let name = generation_name(generation).unwrap_or_default();
                problem(
                    path,
                    step,
                    io::ErrorKind::InvalidData,
                    format!(
                        "generation record {}/gen/{} is malformed ({why}): every participant stays \
                         out until an operator removes it",
                        root.display(),
                        String::from_utf8_lossy(&name)
                    ),
                )
            }
            RwError::NoSnapshot => problem(
                path,
                step,
                io::ErrorKind::InvalidData,
                format!(
                    "the generation log {}/gen names no readable snapshot: this host sees the log \
                     too far behind to trust it (a stale network filesystem cache); try again",
                    root.display()
                ),
            ),
            RwError::Encode(why) => problem(
                path,
                step,
                io::ErrorKind::Other,
                format!(
                    "the next snapshot cannot be written ({why:?}): more than 26213 members, \
                     which no reader would accept"
                ),
            ),
            RwError::Fs(other) => problem(path, step, io::ErrorKind::Other, other.to_string()),
            RwError::Exhausted => problem(
                path,
                step,
                io::ErrorKind::Other,
                "the log's generations have reached 20 digits: remove the log once no \
                 participant runs"
                    .to_owned(),
            ),
            other => problem(path, step, io::ErrorKind::Other, other.to_string()),
        }
    }
}
