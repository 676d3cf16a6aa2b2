//! The house of the facade: its top-level modules (the children of
//! `src/lib.rs`) depend on one another one way only, from the lock kinds
//! down to the leaves they share, never in a circle; and no source file of
//! the facade, the core, the simulator or an adapter grows past
//! [`MOST_LINES`] lines, tests inside it included, so that each file keeps
//! to one concern.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The most lines a source file may have.
const MOST_LINES: usize = 800;

/// The source trees whose files [`MOST_LINES`] bounds, below the
/// repository's root; every `os-*/src` is added to them.
const TREES: [&str; 3] = ["src", "core/src", "sim/src"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// The code of a line, without its comment (a `//` inside a string cuts
/// the line short too, which can only hide a reference, never make one).
fn code(line: &str) -> &str {
    line.split("//").next().unwrap_or_default()
}

fn ident_at(text: &str) -> Option<&str> {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    (end > 0).then(|| &text[..end])
}

/// The top-level modules `src/lib.rs` declares, each with the files it
/// spans: `src/NAME.rs`, or `src/NAME/mod.rs` and everything under
/// `src/NAME/`.
fn top_level_modules() -> BTreeMap<String, Vec<PathBuf>> {
    let src = root().join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let mut modules = BTreeMap::new();
    for line in lib.lines() {
        let line = code(line).trim();
        let rest = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("pub(crate) mod "))
            .or_else(|| line.strip_prefix("mod "));
        let Some(name) = rest.and_then(|r| r.strip_suffix(';')) else {
            continue;
        };
        let mut files = Vec::new();
        let flat = src.join(format!("{name}.rs"));
        if flat.is_file() {
            files.push(flat);
        }
        let folder = src.join(name);
        if folder.is_dir() {
            rust_files(&folder, &mut files);
        }
        assert!(!files.is_empty(), "no file for `mod {name};` in src/lib.rs");
        modules.insert(name.to_string(), files);
    }
    modules
}

/// How many modules deep a file's own module is below the crate root:
/// 1 for `src/NAME.rs` and `src/NAME/mod.rs`, 2 for `src/NAME/CHILD.rs`.
fn depth(file: &Path) -> usize {
    let relative = file.strip_prefix(root().join("src")).unwrap();
    let parts = relative.components().count();
    if relative.file_name().is_some_and(|n| n == "mod.rs") {
        parts - 1
    } else {
        parts
    }
}

/// The top-level modules a file names, with the line of each: by
/// `crate::NAME` (a `use crate::{..}` group's first names included), or by
/// as many `super::` as reach the crate root from where they stand (inline
/// `mod NAME { .. }` blocks count as one level more).
fn references(file: &Path, text: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    // The indentation of each inline module open around the line.
    let mut inline: Vec<usize> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = code(raw);
        let indent = line.len() - line.trim_start().len();
        if inline.last() == Some(&indent) && line.trim_start().starts_with('}') {
            inline.pop();
        }
        let trimmed = line.trim();
        let opens_inline = trimmed.ends_with('{')
            && trimmed
                .trim_start_matches("pub ")
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub(super) ")
                .starts_with("mod ");
        let levels = depth(file) + inline.len();
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().last();
            let after = &rest[at + "crate::".len()..];
            rest = after;
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            if let Some(group) = after.strip_prefix('{') {
                let group = group.split('}').next().unwrap_or_default();
                for name in group.split(',') {
                    if let Some(name) = ident_at(name.trim()) {
                        found.push((name.to_string(), n + 1));
                    }
                }
            } else if let Some(name) = ident_at(after) {
                found.push((name.to_string(), n + 1));
            }
        }
        let mut rest = line;
        while let Some(at) = rest.find("super::") {
            let before = rest[..at].chars().last();
            let mut after = &rest[at..];
            let mut ups = 0;
            while let Some(next) = after.strip_prefix("super::") {
                ups += 1;
                after = next;
            }
            rest = after;
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            if ups == levels {
                if let Some(name) = ident_at(after) {
                    found.push((name.to_string(), n + 1));
                }
            }
        }
        if opens_inline {
            inline.push(indent);
        }
    }
    found
}

/// The facade's import graph: for each top-level module, the other
/// top-level modules it names, each with where it first does.
fn graph() -> BTreeMap<String, BTreeMap<String, String>> {
    let modules = top_level_modules();
    let mut graph = BTreeMap::new();
    for (name, files) in &modules {
        let mut edges = BTreeMap::new();
        for file in files {
            let text = std::fs::read_to_string(file).unwrap();
            for (to, line) in references(file, &text) {
                if to != *name && modules.contains_key(&to) {
                    let at = file.strip_prefix(root()).unwrap().display();
                    edges.entry(to).or_insert_with(|| format!("{at}:{line}"));
                }
            }
        }
        graph.insert(name.clone(), edges);
    }
    graph
}

/// A circle of the graph, as the modules along it (the first again at the
/// end), if it has one.
fn circle(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeMap<String, String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut found = path[start..].to_vec();
            found.push(node.to_string());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph[node].keys() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(found) = visit(node, graph, &mut Vec::new(), &mut done) {
            return Some(found);
        }
    }
    None
}

#[test]
fn the_facades_top_level_modules_import_each_other_in_no_circle() {
    let graph = graph();
    // The reader must see the house: the lock kinds build on the leaves.
    for (from, to) in [("kernel", "soft"), ("soft", "error")] {
        assert!(
            graph.get(from).is_some_and(|e| e.contains_key(to)),
            "the reader lost the import {from} -> {to}: {graph:#?}"
        );
    }
    if let Some(found) = circle(&graph) {
        let ties: Vec<String> = found
            .windows(2)
            .map(|w| format!("  {} -> {} (at {})", w[0], w[1], graph[&w[0]][&w[1]]))
            .collect();
        panic!(
            "the facade's top-level modules import each other in a circle: {}\n{}",
            found.join(" -> "),
            ties.join("\n")
        );
    }
}

#[test]
fn the_reader_finds_a_circle_where_there_is_one() {
    let mut graph = BTreeMap::new();
    let edge = |to: &str| BTreeMap::from([(to.to_string(), "here".to_string())]);
    graph.insert("a".to_string(), edge("b"));
    graph.insert("b".to_string(), edge("c"));
    graph.insert("c".to_string(), edge("a"));
    graph.insert("d".to_string(), edge("a"));
    let found = circle(&graph).expect("a -> b -> c -> a");
    assert_eq!(found.first(), found.last());
    assert_eq!(found.len(), 4);
    graph.get_mut("c").unwrap().clear();
    assert_eq!(circle(&graph), None);

    let file = root().join("src").join("soft").join("wake.rs");
    let refs = references(
        &file,
        "use crate::{error, held::X};\nmod imp {\n    fn f(_: &super::super::super::netfs::A) {}\n}\n// crate::kernel\nfn g() { super::super::sync::lock(); }\n",
    );
    let names: Vec<&str> = refs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["error", "held", "netfs", "sync"]);
}

#[test]
fn no_source_file_exceeds_the_most_lines() {
    let mut trees: Vec<PathBuf> = TREES.iter().map(|t| root().join(t)).collect();
    for entry in std::fs::read_dir(root()).unwrap() {
        let path = entry.unwrap().path();
        let is_adapter = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("os-"));
        if is_adapter && path.join("src").is_dir() {
            trees.push(path.join("src"));
        }
    }
    assert!(trees.len() > TREES.len(), "no adapter found under os-*/src");
    let mut files = Vec::new();
    for tree in &trees {
        rust_files(tree, &mut files);
    }
    let mut over = Vec::new();
    for file in &files {
        let lines = std::fs::read_to_string(file).unwrap().lines().count();
        if lines > MOST_LINES {
            over.push(format!(
                "  {}: {lines} lines",
                file.strip_prefix(root()).unwrap().display()
            ));
        }
    }
    assert!(
        over.is_empty(),
        "source files over {MOST_LINES} lines (split them by concern):\n{}",
        over.join("\n")
    );
}
