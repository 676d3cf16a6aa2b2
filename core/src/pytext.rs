//! Python's `str.strip()` and `str.splitlines()`, which the record parsers
//! of filelock apply before reading any field.
//!
//! Rust's `str::trim` and `str::lines` use other character sets (`trim`
//! keeps U+001C..U+001F, `lines` splits only on `\n`), so a record that
//! Python reads one way would read another way here. These functions use
//! exactly CPython's sets (PROTOCOL 3.2).

/// Whether Python's `str.strip()` removes `c` (CPython's `Py_UNICODE_ISSPACE`).
pub fn is_py_space(c: char) -> bool {
    matches!(
        c,
        '\u{09}'..='\u{0D}'
            | '\u{1C}'..='\u{20}'
            | '\u{85}'
            | '\u{A0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200A}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202F}'
            | '\u{205F}'
            | '\u{3000}'
    )
}

/// Whether Python's `str.splitlines()` breaks a line at `c`. `\r\n` counts as
/// one break; [`lines`] handles that pair.
pub fn is_py_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\u{0B}'
            | '\u{0C}'
            | '\r'
            | '\u{1C}'
            | '\u{1D}'
            | '\u{1E}'
            | '\u{85}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

/// Python's `text.strip()` with no argument.
pub fn strip(text: &str) -> &str {
    text.trim_matches(is_py_space)
}

/// Python's `text.splitlines()` (without the line ends), as an iterator.
///
/// As in Python, a break at the very end adds no empty last line, and the
/// empty string has no lines.
pub fn lines(text: &str) -> Lines<'_> {
    Lines { rest: text }
}

/// Iterator returned by [`lines`].
#[derive(Clone, Debug)]
pub struct Lines<'a> {
    rest: &'a str,
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.rest.is_empty() {
            return None;
        }
        match self.rest.char_indices().find(|&(_, c)| is_py_line_break(c)) {
            None => {
                let line = self.rest;
                self.rest = "";
                Some(line)
            }
            Some((at, c)) => {
                let line = &self.rest[..at];
                let mut after = at + c.len_utf8();
                if c == '\r' && self.rest.as_bytes().get(after) == Some(&b'\n') {
                    after += 1;
                }
                self.rest = &self.rest[after..];
                Some(line)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(text: &str) -> heapless::Vec<&str, 16> {
        lines(text).collect()
    }

    #[test]
    fn splitlines_matches_python() {
        assert_eq!(collect(""), [] as [&str; 0]);
        assert_eq!(collect("a"), ["a"]);
        assert_eq!(collect("a\n"), ["a"]);
        assert_eq!(collect("a\n\n"), ["a", ""]);
        assert_eq!(collect("a\r\nb"), ["a", "b"]);
        assert_eq!(collect("a\r\rb"), ["a", "", "b"]);
        assert_eq!(collect("a\x1cb\u{2028}c"), ["a", "b", "c"]);
        // U+001F is whitespace to strip() but not a line break.
        assert_eq!(collect("a\x1fb"), ["a\x1fb"]);
    }

    #[test]
    fn strip_matches_python() {
        assert_eq!(strip(" \x1c\x1f1\n\u{3000}"), "1");
        assert_eq!(strip("\u{feff}1"), "\u{feff}1");
        assert_eq!(strip("\u{200b}"), "\u{200b}");
    }
}
