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

/// Whether a test file is built for Windows: its own `#![cfg(...)]`, if
/// it has one, names no Unix platform, or names Windows.
fn built_for_windows(text: &str) -> bool {
    match text.lines().find(|l| l.starts_with("#![cfg(")) {
        None => true,
        Some(cfg) => {
            cfg.contains("windows") || !(cfg.contains("unix") || cfg.contains("target_os"))
        }
    }
}

/// The Windows tests, which run under Wine here, start no process but
/// their own executable (`tests/workers`) and this package's Windows
/// binaries (`swaplock()`: cargo's `CARGO_BIN_EXE_` for the same target),
/// all Wine processes: a native process on the same lock directory would
/// share the host name but not the PID space, so each side would judge
/// the other's live markers by a PID that means nothing to it. The tests
/// of every platform are Windows tests too; this file, whose patterns
/// name what it looks for, is not one.
#[test]
fn the_windows_tests_start_only_themselves() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files = Vec::new();
    files_under(&tests, &mut files);
    let windows: Vec<PathBuf> = files
        .into_iter()
        .filter(|f| {
            let top = f.parent() == Some(tests.as_path())
                && f.extension().is_some_and(|e| e == "rs")
                && !f.ends_with("layering.rs")
                && built_for_windows(&std::fs::read_to_string(f).unwrap());
            top || f.parent().is_some_and(|p| p.ends_with("workers"))
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
/// which the model checker's build swaps for shuttle's (`src/model.rs`
/// and `src/model/`, the model's own tests, take shuttle's directly): a
/// `std` or `core` mutex, condition variable, atomic, channel, thread or
/// thread-local taken anywhere else in the library would be out of the
/// model's sight, its interleavings unexplored (and a blocking one would
/// stop the model's single thread). `Arc`, `Weak`, `Once`, `OnceLock` and
/// `PoisonError` never block a thread of the model, and stay `std`'s.
#[test]
fn the_librarys_threads_synchronise_through_its_one_seam() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    files_under(&src, &mut files);
    let exempt = [src.join("sync.rs"), src.join("model.rs")];
    let (bin, model) = (src.join("bin"), src.join("model"));
    let mut offences = Vec::new();
    for file in files
        .iter()
        .filter(|f| !exempt.contains(f) && !f.starts_with(&bin) && !f.starts_with(&model))
    {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, statement) in statements(&text) {
            if let Some(bad) = primitive_named(&statement) {
                offences.push(format!("{}:{}: {bad} in `{statement}`", file.display(), n));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "take these from crate::sync instead:\n{}",
        offences.join("\n")
    );
}

/// The code of `text` without comments, as statements: a `use` that spans
/// lines as one, every other line as itself; each with its first line.
fn statements(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("").trim();
        if code.is_empty() {
            continue;
        }
        match &mut open {
            Some((_, statement)) => statement.push_str(code),
            None if code.starts_with("use ") || code.starts_with("pub(crate) use ") => {
                open = Some((n + 1, code.to_string()))
            }
            None => {
                out.push((n + 1, code.to_string()));
                continue;
            }
        }
        if code.ends_with(';') {
            out.extend(open.take());
        }
    }
    out.extend(open);
    out
}

/// The first thread primitive of `std` or `core` that `statement` names,
/// whole paths and `use` groups alike, but those that never block.
fn primitive_named(statement: &str) -> Option<String> {
    const NEVER_BLOCK: [&str; 5] = ["Arc", "Weak", "Once", "OnceLock", "PoisonError"];
    let flat: String = statement.chars().filter(|c| !c.is_whitespace()).collect();
    for root in ["std::", "core::"] {
        let mut rest = flat.as_str();
        while let Some(at) = rest.find(root) {
            rest = &rest[at + root.len()..];
            // The names this path reaches: one, or a group's members.
            let reached = match rest.strip_prefix('{') {
                Some(group) => group,
                None => rest,
            };
            for item in top_level_items(reached) {
                if item.starts_with("thread") {
                    return Some(item);
                }
                if let Some(sub) = item.strip_prefix("sync::") {
                    let members = match sub.strip_prefix('{') {
                        Some(group) => top_level_items(group),
                        None => vec![sub.to_string()],
                    };
                    for member in members {
                        let name = member.split("::").next().unwrap_or("");
                        let name = name.trim_end_matches(|c: char| !c.is_alphanumeric());
                        if !name.is_empty() && !NEVER_BLOCK.contains(&name) {
                            return Some(format!("sync::{member}"));
                        }
                    }
                }
            }
        }
    }
    None
}

/// The items of a `use` group up to its closing brace (or of one path up
/// to its end), split at the commas of its own level.
fn top_level_items(text: &str) -> Vec<String> {
    let (mut items, mut item, mut depth) = (Vec::new(), String::new(), 0);
    for c in text.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' | ';' | ')' | '(' | '<' | '>' | '=' | '&' | ' ' if depth == 0 => {
                items.push(std::mem::take(&mut item));
                if c != ',' {
                    break;
                }
                continue;
            }
            _ => {}
        }
        item.push(c);
    }
    items.push(item);
    items.retain(|i| !i.is_empty());
    items
}

/// The scan finds a primitive however a `use` spells it, and lets pass
/// what never blocks.
#[test]
fn the_seam_scan_reads_groups_paths_and_lines() {
    let named = |code: &str| {
        statements(code)
            .iter()
            .find_map(|(_, s)| primitive_named(s))
    };
    for bad in [
        "use std::sync::Mutex;",
        "use std::{io, sync::Mutex};",
        "use std::sync::{\n    Arc,\n    Condvar,\n};",
        "use core::sync::atomic::AtomicBool;",
        "let _ = std::thread::current();",
        "std::thread_local! {",
        "static X: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);",
        "use std::{\n    sync::{mpsc, Arc},\n    thread,\n};",
    ] {
        assert!(named(bad).is_some(), "missed: {bad}");
    }
    for fine in [
        "use std::sync::Arc;",
        "use std::sync::{Arc, OnceLock};",
        "use std::{io, path::Path, sync::Weak};",
        "use crate::sync::{Condvar, Mutex};",
        "let _ = crate::sync::thread::current(); // std::thread::current()",
        "fn f(e: std::sync::PoisonError<()>) {}",
    ] {
        assert_eq!(named(fine), None, "{fine}");
    }
}
