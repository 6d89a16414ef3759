//! One module per kernel interface. Each has a pure `parse(&str)` that never panics and a
//! `read(&Root)` that does the I/O; see each module's header for the kernel file and its formats.

use std::fmt;
use std::path::{Path, PathBuf};

pub mod cgroup;
pub mod diskstats;
pub mod dmmultipath;
pub mod mdstat;
pub mod mdsys;
pub mod meminfo;
pub mod mountinfo;
pub mod multipathd;
pub mod netdev;
pub mod pressure;
pub mod smartctl;
pub mod smartd_attrlog;
pub mod stat;
pub mod statvfs;
pub mod storcli;
pub(crate) mod swar;
pub mod sysblock;
pub mod sysnet;
pub mod uptime;
pub mod zpool;

/// A line of kernel text that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}: {text:?}")]
pub struct ParseError {
    /// 1-based line number within the file.
    pub line: usize,
    /// The offending line, cut to 200 characters.
    pub text: String,
    /// What was wrong with it.
    pub reason: String,
}

impl ParseError {
    /// An error for line `line` (1-based) holding `text`.
    pub fn new(line: usize, text: &str, reason: impl fmt::Display) -> Self {
        Self {
            line,
            text: text.chars().take(200).collect(),
            reason: reason.to_string(),
        }
    }
}

/// Rows parsed from a multi-row file plus the lines that could not be parsed.
///
/// One garbage line in `/proc/diskstats` must not cost the other 199 disks their sample, so
/// row parsers keep going and report the bad lines alongside the good rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows<T> {
    /// Rows that parsed.
    pub rows: Vec<T>,
    /// Lines that did not, in file order.
    pub errors: Vec<ParseError>,
}

impl<T> Default for Rows<T> {
    fn default() -> Self {
        Self {
            rows: Vec::new(),
            errors: Vec::new(),
        }
    }
}

/// Failure to read or understand a source.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The file exists but could not be read.
    #[error("{path}: {source}")]
    Io {
        /// File or directory that failed.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An external tool failed, hung or is missing.
    #[error(transparent)]
    Command(#[from] crate::command::CommandError),
    /// The file was read but its text is malformed.
    #[error("{path}: {error}")]
    Parse {
        /// File that held the text.
        path: PathBuf,
        /// What was wrong, with its line.
        error: ParseError,
    },
}

impl SourceError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_owned(),
            source,
        }
    }

    /// A parse error in `path`.
    pub fn parse(path: &Path, error: ParseError) -> Self {
        Self::Parse {
            path: path.to_owned(),
            error,
        }
    }
}

/// Parses a decimal unsigned integer field; kernels print counters as `%llu`/`%lu`/`%u`.
///
/// One pass over the bytes with overflow checks: this runs for every field of every row of
/// `/proc/diskstats` each second (5000 fields on a 250-device server), where `str::parse` after a
/// validation pass cost twice as much.
pub(crate) fn parse_u64(field: &str) -> Option<u64> {
    let bytes = field.as_bytes();
    if bytes.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in bytes {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// The lines of a text with their 1-based numbers, split as `str::lines` splits them (`\n`, or
/// `\r\n`), and where they are: a parser can look ahead (clone it) and skip a run of lines.
#[derive(Debug, Clone)]
pub(crate) struct Lines<'a> {
    text: &'a str,
    pos: usize,
    no: usize,
}

impl<'a> Lines<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Self {
            text,
            pos: 0,
            no: 0,
        }
    }

    /// Byte offset of the next line (the text's length at the end).
    pub(crate) fn offset(&self) -> usize {
        self.pos
    }

    /// Byte offset of `line`, a line this iterator returned.
    pub(crate) fn offset_of(&self, line: &str) -> usize {
        (line.as_ptr() as usize).saturating_sub(self.text.as_ptr() as usize)
    }

    /// Moves to byte offset `to` (a line start after the current one), counting the lines.
    pub(crate) fn skip_to(&mut self, to: usize) {
        while self.pos < to && self.next().is_some() {}
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = (usize, &'a str);

    fn next(&mut self) -> Option<(usize, &'a str)> {
        let rest = self.text.get(self.pos..)?;
        if rest.is_empty() {
            return None;
        }
        let (line, len) = match rest.find('\n') {
            Some(i) => (rest.get(..i).unwrap_or_default(), i + 1),
            None => (rest, rest.len()),
        };
        self.pos += len;
        self.no += 1;
        Some((self.no, line.strip_suffix('\r').unwrap_or(line)))
    }
}

/// Splits a line into whitespace-separated fields.
pub(crate) fn fields(line: &str) -> std::str::SplitAsciiWhitespace<'_> {
    line.split_ascii_whitespace()
}

#[cfg(test)]
mod tests {
    use super::parse_u64;

    #[test]
    fn lines_split_as_str_lines_does_with_numbers_and_offsets() {
        for text in ["", "a", "a\n", "a\nb", "a\r\nb\r\n", "\n\n x \n", "a\rb\n"] {
            let ours: Vec<(usize, &str)> = super::Lines::new(text).collect();
            let std: Vec<(usize, &str)> =
                text.lines().enumerate().map(|(i, l)| (i + 1, l)).collect();
            assert_eq!(ours, std, "{text:?}");
            let mut lines = super::Lines::new(text);
            while let Some((_, line)) = lines.next() {
                assert_eq!(
                    text.get(lines.offset_of(line)..)
                        .map(|r| r.starts_with(line)),
                    Some(true)
                );
            }
            assert_eq!(lines.offset(), text.len());
        }
    }

    #[test]
    fn parse_u64_accepts_digits_only_and_refuses_overflow() {
        assert_eq!(parse_u64("0"), Some(0));
        assert_eq!(parse_u64("18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64("18446744073709551616"), None);
        assert_eq!(parse_u64(""), None);
        assert_eq!(parse_u64("-1"), None);
        assert_eq!(parse_u64("+1"), None);
        assert_eq!(parse_u64("12a"), None);
        assert_eq!(parse_u64("１２"), None);
    }
}
