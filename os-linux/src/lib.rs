//! swaplock's adapter for Linux and Android.
//!
//! Each function here is a short, documented forward to one syscall
//! (through `rustix`), answering one step that `swaplock-core` asks for:
//! open with `O_CREAT|O_EXCL`, pin with `O_PATH|O_NOFOLLOW`, exchange two
//! names with `renameat2(RENAME_EXCHANGE)`, probe a PID with `kill(pid, 0)`,
//! read the host name and the process start token. No protocol decision is
//! made here: decisions are the core's.
//!
//! On other targets this crate is empty.
#![cfg_attr(not(any(target_os = "linux", target_os = "android")), no_std)]
