//! seccomp filters that make chosen syscalls fail with a chosen errno in
//! the calling process and its children, everything else allowed: how the
//! tests reach a kernel or filesystem that lacks a call (`flock` or
//! `getrandom` answering `ENOSYS`, `fcntl` locks refused).

const LD: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const RET: u16 = 0x06; // BPF_RET | BPF_K
const RET_ERRNO: u32 = 0x0005_0000;
const RET_TRAP: u32 = 0x0003_0000;
const RET_ALLOW: u32 = 0x7fff_0000;

fn op(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Makes syscall `nr` fail with `errno`. For `pre_exec`: it only calls
/// prctl, which is async-signal-safe.
pub fn deny(nr: libc::c_long, errno: i32) -> std::io::Result<()> {
    install(&[
        op(LD, 0, 0, 0),
        op(JEQ, 0, 1, nr as u32),
        op(RET, 0, 0, RET_ERRNO | errno as u32),
        op(RET, 0, 0, RET_ALLOW),
    ])
}

/// Makes syscall `nr` kill the process with `SIGSYS`, as Android's app
/// seccomp policy does for a call it does not allow
/// (`SECCOMP_RET_TRAP`). For `pre_exec`: it only calls prctl.
pub fn trap(nr: libc::c_long) -> std::io::Result<()> {
    install(&[
        op(LD, 0, 0, 0),
        op(JEQ, 0, 1, nr as u32),
        op(RET, 0, 0, RET_TRAP),
        op(RET, 0, 0, RET_ALLOW),
    ])
}

/// Makes `fcntl(2)` lock calls (`F_SETLK`, `F_SETLKW`, and the open file
/// description ones, `F_OFD_SETLK` and `F_OFD_SETLKW`) fail with `ENOSYS`;
/// other `fcntl` commands are allowed.
pub fn deny_fcntl_locks() -> std::io::Result<()> {
    const F_OFD_SETLK: u32 = 37;
    const F_OFD_SETLKW: u32 = 38;
    install(&[
        // The syscall number, then the low word of its second argument
        // (struct seccomp_data: nr, arch, ip, then args at offset 16).
        op(LD, 0, 0, 0),
        op(JEQ, 0, 5, libc::SYS_fcntl as u32),
        op(LD, 0, 0, 24),
        op(JEQ, 4, 0, libc::F_SETLK as u32),
        op(JEQ, 3, 0, libc::F_SETLKW as u32),
        op(JEQ, 2, 0, F_OFD_SETLK),
        op(JEQ, 1, 0, F_OFD_SETLKW),
        op(RET, 0, 0, RET_ALLOW),
        op(RET, 0, 0, RET_ERRNO | libc::ENOSYS as u32),
    ])
}

fn install(filter: &[libc::sock_filter]) -> std::io::Result<()> {
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut _,
    };
    // SAFETY: prctl with valid arguments; `prog` and `filter` outlive the call.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const _ as usize,
                0,
                0,
            ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
