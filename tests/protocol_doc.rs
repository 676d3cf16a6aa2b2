//! The code cites the repository's protocol spec, `docs/PROTOCOL.md`, by
//! section (`PROTOCOL 7.8`) and by invariant (`I4`): every such citation in
//! the workspace's Rust sources must name a section heading or an invariant
//! the document has, so that a reader who follows one always lands on it.
//!
//! Sections come from the document's `## N. Title` and `### N.M Title`
//! headings, invariants from its `- **I<n>.` list items. Citations are
//! `PROTOCOL` followed by a section number, with the numbers that follow it
//! in a list or a range (`PROTOCOL 5.2, 5.3`, `PROTOCOL 4.3 to 4.5`,
//! `PROTOCOL 7.5-7.7`), on any line; and invariants (`I8`, `I13-I16`,
//! `I13, I14`) standing alone as words in comments only (lines that start
//! with `//`), so that code is never read as a citation. A comment's lines
//! are read as one text, so a citation broken across two lines still counts.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

/// The directories whose `.rs` files may cite the document (any `target/`
/// below them is skipped).
const SOURCES: &[&str] = &[
    "core",
    "src",
    "sim",
    "os-unix",
    "os-linux",
    "os-macos",
    "os-windows",
    "tests",
    "fuzz/fuzz_targets",
];

/// What a citation names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Cited {
    /// A section number, such as `7.8`.
    Section(String),
    /// An invariant number, such as 4 for `I4`.
    Invariant(u32),
}

impl fmt::Display for Cited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cited::Section(s) => write!(f, "PROTOCOL {s}"),
            Cited::Invariant(n) => write!(f, "invariant I{n}"),
        }
    }
}

/// The sections and invariants a document defines.
#[derive(Debug, Default)]
struct Contents {
    sections: BTreeSet<String>,
    invariants: BTreeSet<u32>,
}

impl Contents {
    fn has(&self, cited: &Cited) -> bool {
        match cited {
            Cited::Section(s) => self.sections.contains(s),
            Cited::Invariant(n) => self.invariants.contains(n),
        }
    }
}

/// Reads the section numbers of `## N. Title` and `### N.M Title` headings
/// (outside code fences) and the numbers of `- **I<n>.` items.
fn contents(doc: &str) -> Contents {
    let mut found = Contents::default();
    let mut fenced = false;
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if let Some(title) = line
            .strip_prefix("## ")
            .or_else(|| line.strip_prefix("### "))
        {
            let number = title.split_whitespace().next().unwrap_or("");
            let number = number.strip_suffix('.').unwrap_or(number);
            if is_section_number(number) {
                found.sections.insert(number.to_owned());
            }
        }
        if let Some(item) = line.trim_start().strip_prefix("- **I") {
            let digits: String = item.chars().take_while(char::is_ascii_digit).collect();
            if !digits.is_empty() && item[digits.len()..].starts_with('.') {
                found.invariants.insert(digits.parse().unwrap());
            }
        }
    }
    found
}

/// Whether `s` is `N`, `N.M`, `N.M.K`...: digits separated by single dots.
fn is_section_number(s: &str) -> bool {
    !s.is_empty()
        && s.split('.')
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The section number at the start of `text` (`7`, `7.8`), and its length:
/// digits, then any `.digits` groups (a final `.` ends a sentence, not the
/// number). A number followed by a letter or `_` (`2s`) is none.
fn section_at(text: &str) -> Option<(String, usize)> {
    let bytes = text.as_bytes();
    let mut end = 0;
    loop {
        let start = end;
        while end < bytes.len() && bytes[end].is_ascii_digit() {
            end += 1;
        }
        if end == start {
            // A group without digits: only legal after a dot we did not take.
            return None;
        }
        if end + 1 < bytes.len() && bytes[end] == b'.' && bytes[end + 1].is_ascii_digit() {
            end += 1;
            continue;
        }
        break;
    }
    if text[end..].chars().next().is_some_and(is_word_char) {
        return None;
    }
    Some((text[..end].to_owned(), end))
}

/// The separators that continue a list or a range of section numbers after
/// `PROTOCOL <n>`.
const SECTION_JOINERS: &[&str] = &[", ", " to ", " and ", " or ", "-", "–", " - ", " – "];

/// Every `PROTOCOL <n>` citation in `text`, with the numbers listed after it,
/// as (byte offset, section).
fn section_citations(text: &str) -> Vec<(usize, String)> {
    const KEY: &str = "PROTOCOL";
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find(KEY) {
        let at = from + found;
        from = at + KEY.len();
        if text[..at].chars().next_back().is_some_and(is_word_char) {
            continue;
        }
        let rest = &text[from..];
        let gap = rest.len() - rest.trim_start_matches([' ', '\t']).len();
        if gap == 0 {
            continue;
        }
        let mut pos = from + gap;
        let Some((number, len)) = section_at(&text[pos..]) else {
            continue;
        };
        out.push((at, number));
        pos += len;
        // Further numbers in a list or a range: `5.2, 5.3`, `4.3 to 4.5`.
        'list: loop {
            for joiner in SECTION_JOINERS {
                if let Some(after) = text[pos..].strip_prefix(joiner) {
                    if let Some((number, len)) = section_at(after) {
                        let start = pos + joiner.len();
                        out.push((start, number));
                        pos = start + len;
                        continue 'list;
                    }
                }
            }
            break;
        }
        from = pos;
    }
    out
}

/// The invariant number at the start of `text`, when `text` starts with `I`
/// and one or two digits that end the word, and its length.
fn invariant_at(text: &str) -> Option<(u32, usize)> {
    let digits: String = text
        .strip_prefix('I')?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    if digits.is_empty() || digits.len() > 2 {
        return None;
    }
    let len = 1 + digits.len();
    if text[len..].chars().next().is_some_and(is_word_char) {
        return None;
    }
    Some((digits.parse().ok()?, len))
}

/// The separators of a range of invariants: `I13-I16`, `I13 to I16`.
const RANGE_JOINERS: &[&str] = &["-", "–", "..", " to "];

/// Every invariant named in the comment text `text`, as (byte offset,
/// number); a range names every invariant from its first to its last.
fn invariant_citations(text: &str) -> Vec<(usize, u32)> {
    let mut out = Vec::new();
    // Where the scan may look again: past the end of a range just read.
    let mut resume = 0;
    for (at, c) in text.char_indices() {
        if at < resume || c != 'I' || text[..at].chars().next_back().is_some_and(is_word_char) {
            continue;
        }
        let Some((first, len)) = invariant_at(&text[at..]) else {
            continue;
        };
        out.push((at, first));
        let after = at + len;
        for joiner in RANGE_JOINERS {
            let Some(tail) = text[after..].strip_prefix(joiner) else {
                continue;
            };
            let named = tail.strip_prefix('I').unwrap_or(tail);
            let digits: String = named.chars().take_while(char::is_ascii_digit).collect();
            let ends_word = !named[digits.len()..]
                .chars()
                .next()
                .is_some_and(is_word_char);
            if let (Ok(last), true) = (digits.parse::<u32>(), ends_word) {
                if first < last && last - first <= 30 {
                    out.extend((first + 1..=last).map(|n| (at, n)));
                    resume = text.len() - named.len() + digits.len();
                }
            }
            break;
        }
    }
    out
}

/// A citation found in a source file.
#[derive(Debug)]
struct Citation {
    file: PathBuf,
    line: usize,
    cited: Cited,
}

/// A comment's text, its lines joined by a space, and where each line
/// starts in it.
#[derive(Default)]
struct Comment {
    text: String,
    /// (byte offset in `text`, 1-based line number in the file).
    starts: Vec<(usize, usize)>,
}

impl Comment {
    fn push(&mut self, body: &str, line: usize) {
        if !self.text.is_empty() {
            self.text.push(' ');
        }
        self.starts.push((self.text.len(), line));
        self.text.push_str(body);
    }

    fn line_of(&self, offset: usize) -> usize {
        let i = self.starts.partition_point(|&(start, _)| start <= offset);
        self.starts[i.saturating_sub(1)].1
    }
}

/// Every citation in one file's source text.
fn citations_in(file: &Path, source: &str) -> Vec<Citation> {
    let mut out = Vec::new();
    let mut comment = Comment::default();
    let flush = |comment: &mut Comment, out: &mut Vec<Citation>| {
        for (at, section) in section_citations(&comment.text) {
            out.push(Citation {
                file: file.to_owned(),
                line: comment.line_of(at),
                cited: Cited::Section(section),
            });
        }
        for (at, n) in invariant_citations(&comment.text) {
            out.push(Citation {
                file: file.to_owned(),
                line: comment.line_of(at),
                cited: Cited::Invariant(n),
            });
        }
        *comment = Comment::default();
    };
    for (i, line) in source.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(body) = trimmed.strip_prefix("//") {
            // `///` and `//!` doc comments, and plain `//` comments.
            let body = body.strip_prefix(['/', '!']).unwrap_or(body);
            comment.push(body.trim(), i + 1);
            continue;
        }
        flush(&mut comment, &mut out);
        // Code lines (and their trailing comments) may cite sections too.
        for (_, section) in section_citations(line) {
            out.push(Citation {
                file: file.to_owned(),
                line: i + 1,
                cited: Cited::Section(section),
            });
        }
    }
    flush(&mut comment, &mut out);
    out
}

/// Every `.rs` file under `dir`, skipping `target/` directories.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if entry.file_name() != "target" {
                rust_files(&path, out);
            }
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_citation_of_the_protocol_names_a_section_or_invariant_it_has() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc_path = root.join("docs").join("PROTOCOL.md");
    let doc = std::fs::read_to_string(&doc_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", doc_path.display()));
    let have = contents(&doc);
    assert!(
        !have.sections.is_empty(),
        "{} has no `## N. Title` or `### N.M Title` headings",
        doc_path.display()
    );
    assert!(
        !have.invariants.is_empty(),
        "{} has no `- **I<n>.` invariants",
        doc_path.display()
    );
    for anchor in [Cited::Section("7.8".into()), Cited::Invariant(4)] {
        assert!(have.has(&anchor), "{} lacks {anchor}", doc_path.display());
    }

    let mut files = Vec::new();
    for dir in SOURCES {
        rust_files(&root.join(dir), &mut files);
    }
    let mut checked = 0;
    let mut missing = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        for citation in citations_in(file.strip_prefix(root).unwrap_or(file), &source) {
            checked += 1;
            if !have.has(&citation.cited) {
                missing.push(format!(
                    "{}:{}: {}",
                    citation.file.display(),
                    citation.line,
                    citation.cited
                ));
            }
        }
    }
    assert!(
        checked > 0,
        "no citations found in {} files: the scan is broken",
        files.len()
    );
    assert!(
        missing.is_empty(),
        "{} of {checked} citations name nothing in docs/PROTOCOL.md:\n{}",
        missing.len(),
        missing.join("\n")
    );
    eprintln!(
        "{checked} citations in {} files, all found among {} sections and {} invariants",
        files.len(),
        have.sections.len(),
        have.invariants.len()
    );
}

#[test]
fn the_scan_reads_headings_lists_ranges_and_comments_only() {
    let doc = "# Title\n## 1. One\n### 1.2 Sub\n```\n## 9. In a fence\n```\n- **I3. Three.**\n- **I14. Fourteen.**\n";
    let have = contents(doc);
    assert_eq!(
        have.sections.iter().map(String::as_str).collect::<Vec<_>>(),
        ["1", "1.2"]
    );
    assert_eq!(have.invariants.iter().copied().collect::<Vec<_>>(), [3, 14]);

    let sections = |t: &str| -> Vec<String> {
        section_citations(t)
            .into_iter()
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
    };
    assert_eq!(sections("(PROTOCOL 7.8)."), ["7.8"]);
    assert_eq!(sections("PROTOCOL 9."), ["9"]);
    assert_eq!(
        sections("(PROTOCOL 4.3 to 4.5, 7.12 to 7.14; the rest)"),
        ["4.3", "4.5", "7.12", "7.14"]
    );
    assert_eq!(sections("(PROTOCOL 7.5-7.7, 7.12)"), ["7.5", "7.7", "7.12"]);
    assert_eq!(sections("(PROTOCOL 2 and 3)"), ["2", "3"]);
    assert_eq!(sections("(PROTOCOL 7.10 step 4, made exact)"), ["7.10"]);
    assert!(sections("PROTOCOL_2 and XPROTOCOL 3 and PROTOCOL x").is_empty());

    let invariants = |t: &str| -> Vec<u32> {
        invariant_citations(t)
            .into_iter()
            .map(|(_, n)| n)
            .collect::<Vec<_>>()
    };
    assert_eq!(invariants("(invariant I7)"), [7]);
    assert_eq!(invariants("I13, I14: names"), [13, 14]);
    assert_eq!(invariants("I13-I16 hold"), [13, 14, 15, 16]);
    assert!(invariants("I2C, XI3, I3x, I/O, I100, Item").is_empty());

    // Invariants count in comments only; a citation may span two lines.
    let source = "let i4 = I4;\n//! Reading (PROTOCOL\n//! 3.1) keeps\n/// invariant I2.\nfn f() {} // PROTOCOL 6\n";
    let found: Vec<(usize, Cited)> = citations_in(Path::new("x.rs"), source)
        .into_iter()
        .map(|c| (c.line, c.cited))
        .collect();
    assert_eq!(
        found,
        [
            (2, Cited::Section("3.1".into())),
            (4, Cited::Invariant(2)),
            (5, Cited::Section("6".into())),
        ]
    );
}
