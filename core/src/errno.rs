//! Operating-system error numbers, as values.
//!
//! [`Errno`] is a transparent newtype over the host's raw `errno`: an adapter
//! may hand the core any value its kernel returns, including ones this crate
//! has no name for, and the core's decisions compare against the named
//! constants. The constants follow the numbering of the target the core is
//! compiled for (Linux numbering on Linux, Android and bare-metal targets,
//! the BSD numbering on Apple targets, the C runtime's on Windows), so an
//! adapter passes `errno` through without translating it.

use core::fmt;

/// A raw `errno` value reported by the operating system.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Errno(i32);

macro_rules! errnos {
    ($( $(#[$doc:meta])* $name:ident = linux $l:literal, apple $a:literal, windows $w:literal; )*) => {
        impl Errno {
            $(
                $(#[$doc])*
                #[cfg(not(any(target_vendor = "apple", windows)))]
                pub const $name: Errno = Errno($l);
                $(#[$doc])*
                #[cfg(target_vendor = "apple")]
                pub const $name: Errno = Errno($a);
                $(#[$doc])*
                #[cfg(windows)]
                pub const $name: Errno = Errno($w);
            )*

            /// The symbolic name of a known error number, such as `"ENOENT"`.
            pub fn name(self) -> Option<&'static str> {
                $( if self == Self::$name { return Some(concat!("E", stringify!($name))); } )*
                None
            }
        }
    };
}

errnos! {
    /// `EPERM`: operation not permitted.
    PERM = linux 1, apple 1, windows 1;
    /// `ENOENT`: no such file or directory.
    NOENT = linux 2, apple 2, windows 2;
    /// `ESRCH`: no such process.
    SRCH = linux 3, apple 3, windows 3;
    /// `EINTR`: interrupted system call.
    INTR = linux 4, apple 4, windows 4;
    /// `EIO`: input/output error.
    IO = linux 5, apple 5, windows 5;
    /// `ENXIO`: no such device or address (what opening a socket gives).
    NXIO = linux 6, apple 6, windows 6;
    /// `EBADF`: bad file descriptor.
    BADF = linux 9, apple 9, windows 9;
    /// `EAGAIN` (`EWOULDBLOCK`): resource temporarily unavailable.
    AGAIN = linux 11, apple 35, windows 11;
    /// `EACCES`: permission denied.
    ACCES = linux 13, apple 13, windows 13;
    /// `EEXIST`: file exists.
    EXIST = linux 17, apple 17, windows 17;
    /// `EXDEV`: cross-device link.
    XDEV = linux 18, apple 18, windows 18;
    /// `ENOTDIR`: not a directory.
    NOTDIR = linux 20, apple 20, windows 20;
    /// `EISDIR`: is a directory.
    ISDIR = linux 21, apple 21, windows 21;
    /// `EINVAL`: invalid argument.
    INVAL = linux 22, apple 22, windows 22;
    /// `ENFILE`: the system's table of open files is full.
    NFILE = linux 23, apple 23, windows 23;
    /// `EMFILE`: the process has as many descriptors open as it may.
    MFILE = linux 24, apple 24, windows 24;
    /// `EDEADLK`: a blocking classic `fcntl` lock would deadlock with
    /// another process's.
    DEADLK = linux 35, apple 11, windows 36;
    /// `EMLINK`: too many links (what FreeBSD's `O_NOFOLLOW` gives on a
    /// symlink).
    MLINK = linux 31, apple 31, windows 31;
    /// `EROFS`: read-only file system.
    ROFS = linux 30, apple 30, windows 30;
    /// `EDQUOT`: disk quota exceeded (Windows has none; Winsock's number
    /// is used, which no file call gives).
    DQUOT = linux 122, apple 69, windows 10069;
    /// `ENOSPC`: no space left on device.
    NOSPC = linux 28, apple 28, windows 28;
    /// `ENOSYS`: function not implemented.
    NOSYS = linux 38, apple 78, windows 40;
    /// `ELOOP`: too many levels of symbolic links (what `O_NOFOLLOW` gives on a symlink).
    LOOP = linux 40, apple 62, windows 114;
    /// `EOPNOTSUPP`: operation not supported (on Linux the same number as `ENOTSUP`).
    OPNOTSUPP = linux 95, apple 102, windows 130;
    /// `ESTALE`: a file handle of a network filesystem that names a file
    /// the server no longer has (Windows has no such error; Winsock's
    /// number is used, which no file call gives).
    STALE = linux 116, apple 70, windows 10070;
    /// `ENOTSUP`: not supported.
    NOTSUP = linux 95, apple 45, windows 129;
}

impl Errno {
    /// Wraps a raw `errno` value.
    pub const fn from_raw(raw: i32) -> Self {
        Errno(raw)
    }

    /// The raw `errno` value.
    pub const fn raw(self) -> i32 {
        self.0
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "Errno({name})"),
            None => write!(f, "Errno({})", self.0),
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "errno {}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::format;

    #[test]
    fn a_raw_value_comes_back_as_it_went_in() {
        for raw in [0, 2, -1, 9999, i32::MIN] {
            assert_eq!(Errno::from_raw(raw).raw(), raw);
        }
        assert_eq!(Errno::NOENT.raw(), 2);
    }

    #[test]
    fn a_known_error_prints_its_name_and_an_unknown_one_its_number() {
        assert_eq!(format!("{}", Errno::NOENT), "ENOENT");
        assert_eq!(format!("{:?}", Errno::NOENT), "Errno(ENOENT)");
        assert_eq!(format!("{}", Errno::from_raw(9999)), "errno 9999");
        assert_eq!(format!("{:?}", Errno::from_raw(9999)), "Errno(9999)");
    }
}
