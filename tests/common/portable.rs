//! Helpers of the integration tests that every platform builds: the Unix
//! tests reach them through `common`, the Windows ones with
//! `#[path = "common/portable.rs"] mod portable;`.

#![allow(dead_code, unreachable_pub)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};

/// The swaplock command this package built.
pub fn swaplock() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_swaplock"))
}

/// The names in `dir` other than those in `keep`: what a lock left behind.
pub fn others(dir: &Path, keep: &[&str]) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect()
}

/// A loopback port nobody listens on now (free when asked; the server that
/// asked binds it next).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("a loopback port")
        .local_addr()
        .expect("its address")
        .port()
}
