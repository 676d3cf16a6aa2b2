//! The binaries are built on the facade alone: no file under `src/bin/`
//! names an OS adapter crate. What a binary needs of an adapter becomes
//! facade API, so that the facade stays the one place that drives them.

use std::path::{Path, PathBuf};

const ADAPTERS: [&str; 4] = [
    "swaplock_linux",
    "swaplock_macos",
    "swaplock_unix",
    "swaplock_windows",
];

fn files_under(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, found);
        } else {
            found.push(path);
        }
    }
}

#[test]
fn the_binaries_name_no_adapter_crate() {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join("bin");
    let mut files = Vec::new();
    files_under(&bin, &mut files);
    assert!(
        !files.is_empty(),
        "no binaries found under {}",
        bin.display()
    );
    let mut offences = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            // Dashes too, as a Cargo.toml or a comment would spell them.
            let line = line.replace('-', "_");
            for adapter in ADAPTERS {
                if line.contains(adapter) {
                    offences.push(format!("{}:{}: {adapter}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(
        offences.is_empty(),
        "binaries must use only the facade's API:\n{}",
        offences.join("\n")
    );
}

/// The Windows tests, which run under Wine here, start no process but
/// their own executable (`tests/workers`) and this package's Windows
/// binaries (`swaplock()`: cargo's `CARGO_BIN_EXE_` for the same target),
/// all Wine processes: a native process on the same lock directory would
/// share the host name but not the PID space, so each side would judge
/// the other's live markers by a PID that means nothing to it.
#[test]
fn the_windows_tests_start_only_themselves() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files = Vec::new();
    files_under(&tests, &mut files);
    let windows: Vec<PathBuf> = files
        .into_iter()
        .filter(|f| {
            let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            name.starts_with("windows_") || f.parent().is_some_and(|p| p.ends_with("workers"))
        })
        .collect();
    assert!(windows.len() >= 3, "Windows tests not found: {windows:?}");
    // `swaplock()` is this package's command when the file defines it so,
    // or takes it from the shared helpers, which do.
    let portable = std::fs::read_to_string(tests.join("common/portable.rs")).unwrap();
    let shared_is_own = portable.contains("env!(\"CARGO_BIN_EXE_swaplock\")");
    let mut offences = Vec::new();
    for file in &windows {
        let text = std::fs::read_to_string(file).unwrap();
        let swaplock_is_own = text.contains("env!(\"CARGO_BIN_EXE_swaplock\")")
            || (shared_is_own && text.contains("use portable::swaplock;"));
        for (n, line) in text.lines().enumerate() {
            let spawns = line.contains("Command::new(") || line.contains("process::Command");
            let own = line.contains("Command::new(std::env::current_exe()")
                || (line.contains("Command::new(swaplock())") && swaplock_is_own);
            if spawns && !own {
                offences.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(offences.is_empty(), "{}", offences.join("\n"));
}

/// The library's thread primitives come from one module, `src/sync.rs`,
/// which the model checker's build swaps for shuttle's (`tests/model.rs`):
/// a `std` mutex, condition variable, atomic, channel, thread or
/// thread-local taken anywhere else in the library would be out of the
/// model's sight, its interleavings unexplored (and a blocking one would
/// stop the model's single thread). `Arc`, `Weak`, `Once`, `OnceLock` and
/// `PoisonError` never block, and stay `std`'s.
#[test]
fn the_librarys_threads_synchronise_through_its_one_seam() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    files_under(&src, &mut files);
    let seam = src.join("sync.rs");
    let bin = src.join("bin");
    let allowed = ["Arc", "Weak", "Once", "OnceLock", "PoisonError"];
    let mut offences = Vec::new();
    for file in files.iter().filter(|f| **f != seam && !f.starts_with(&bin)) {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            let mut rest = code;
            while let Some(at) = rest.find("std::") {
                rest = &rest[at + "std::".len()..];
                let named: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | ':' | '{' | ',' | ' '))
                    .collect();
                let bad = if let Some(items) = named.strip_prefix("sync::") {
                    let items = items.trim_start_matches('{');
                    items
                        .split(',')
                        .map(|i| i.trim().split("::").next().unwrap_or(""))
                        .any(|i| !i.is_empty() && !allowed.contains(&i))
                } else {
                    named.starts_with("thread")
                };
                if bad {
                    offences.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        offences.is_empty(),
        "take these from crate::sync instead:\n{}",
        offences.join("\n")
    );
}
