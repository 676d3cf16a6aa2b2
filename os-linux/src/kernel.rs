//! The syscalls of the kernel-lock protocols: the shared POSIX ones of
//! [`swaplock_unix::kernel`], and reading the umask from `/proc`.

pub use swaplock_unix::kernel::*;

/// The `Umask:` line of `/proc/self/status` (Linux 4.7 and later) — this
/// process's umask, read without changing it.
///
/// # References
/// - [`proc_pid_status(5)`](https://man7.org/linux/man-pages/man5/proc_pid_status.5.html)
pub fn read_umask() -> Option<u32> {
    let status = std::fs::read("/proc/self/status").ok()?;
    let line = status
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"Umask:"))?;
    let text = std::str::from_utf8(line).ok()?.trim();
    u32::from_str_radix(text, 8).ok()
}
