//! `/proc/diskstats`: per block device I/O counters.
//!
//! Kernel documentation: `Documentation/admin-guide/iostats.rst` and
//! `Documentation/ABI/testing/procfs-diskstats`. Each line is `major minor name` followed by:
//!
//! * 4 fields — partitions on kernels before 2.6.25: reads, sectors read, writes, sectors written;
//! * 11 fields — 2.6.25 … 4.17 (reads … weighted time in queue);
//! * 15 fields — 4.18+: adds discards, discards merged, sectors discarded, discard ms;
//! * 17 fields — 5.5+: adds flushes and flush ms.
//!
//! Sectors are always 512 bytes. The `*_ms` fields are milliseconds and were printed as 32-bit
//! `%u` on many kernels, so they wrap after ~49.7 days; rates treat any counter that goes
//! backwards as a reset (see `rates.rs`).
//!
//! Lines may also be tab- or multi-space-padded (the sysfs `stat` file uses fixed 8-wide columns,
//! overflowing on busy SAS disks); whitespace splitting handles all of them.
//!
//! More than 17 statistics are accepted and the extra ones ignored, so that a kernel adding
//! counters at the end of the line (as 4.18 and 5.5 did) does not blind the agent; they must
//! still be numbers, which catches two lines glued together. Any other count (5–10, 12–14, 16) is
//! a malformed line.
//!
//! `/sys/block/<dev>/stat` (and `…/<dev>/<part>/stat`) carries the same statistics without
//! `major minor name`; [`parse_sysfs_stat`] reads that shape.

use std::fmt;

use super::{fields, swar, ParseError, Rows};

/// Which of the kernel's line shapes a row came in; older shapes leave later counters at 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskstatsFormat {
    /// 4 stat fields (partitions before 2.6.25): no merges, times, in-flight.
    Partition4,
    /// 11 stat fields (2.6.25 … 4.17).
    Fields11,
    /// 15 stat fields (4.18+): with discards.
    Fields15,
    /// 17 stat fields (5.5+): with discards and flushes.
    Fields17,
}

/// One row of `/proc/diskstats`. Counter names follow iostats.rst; times are milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskStat<'a> {
    /// Device major number.
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
    /// Kernel device name (`sda`, `dm-3`, `nvme0n1p2`, `md127`).
    pub name: &'a str,
    /// The line's shape.
    pub format: DiskstatsFormat,
    /// Reads completed.
    pub reads: u64,
    /// Adjacent reads merged.
    pub reads_merged: u64,
    /// 512-byte sectors read.
    pub sectors_read: u64,
    /// Milliseconds spent reading (sum over all reads).
    pub read_ms: u64,
    /// Writes completed.
    pub writes: u64,
    /// Adjacent writes merged.
    pub writes_merged: u64,
    /// 512-byte sectors written.
    pub sectors_written: u64,
    /// Milliseconds spent writing.
    pub write_ms: u64,
    /// I/Os currently in flight (a gauge, not a counter).
    pub in_flight: u64,
    /// Milliseconds the device had I/O in flight (iostat's `tot_ticks`, the base of %util).
    pub io_ms: u64,
    /// Weighted milliseconds doing I/O (iostat's `rq_ticks`, the base of aqu-sz).
    pub queue_ms: u64,
    /// Discards completed (4.18+, else 0).
    pub discards: u64,
    /// Discards merged (4.18+, else 0).
    pub discards_merged: u64,
    /// Sectors discarded (4.18+, else 0).
    pub sectors_discarded: u64,
    /// Milliseconds spent discarding (4.18+, else 0).
    pub discard_ms: u64,
    /// Flush requests completed (5.5+, else 0).
    pub flushes: u64,
    /// Milliseconds spent flushing (5.5+, else 0).
    pub flush_ms: u64,
}

/// Number of statistics the widest known line shape (5.5+) carries.
const MAX_STATS: usize = 17;

/// What was wrong with a line; rendered into [`ParseError::reason`] only when a line fails.
#[derive(Debug)]
enum Fault<'a> {
    /// No `minor`/`name` after the major number.
    Missing(&'static str),
    /// A column that is not a decimal unsigned integer.
    NotNumber { column: usize, field: &'a str },
    /// A column of digits too large for its type.
    TooLarge {
        column: usize,
        field: &'a str,
        bits: u32,
    },
    /// A number of statistics no kernel prints.
    Count(usize),
    /// A sysfs `stat` file with a second line of numbers.
    SecondLine,
    /// A file with no statistics at all.
    Empty,
}

impl fmt::Display for Fault<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing(what) => write!(f, "missing {what}"),
            Self::NotNumber { column, field } => {
                write!(f, "column {column} ({field:?}) is not an unsigned integer")
            }
            Self::TooLarge {
                column,
                field,
                bits,
            } => write!(f, "column {column} ({field:?}) does not fit in {bits} bits"),
            Self::Count(0) => write!(f, "no statistics after the device name"),
            Self::Count(n) => write!(
                f,
                "{n} statistics; expected 4, 11, 15 or at least {MAX_STATS}"
            ),
            Self::SecondLine => write!(f, "more than one line of statistics"),
            Self::Empty => write!(f, "no statistics"),
        }
    }
}

/// Why a counter field is not a u64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CounterError {
    /// Empty, or something other than decimal digits.
    NotNumber,
    /// Only digits, but more than 64 bits' worth.
    TooLarge,
}

/// Parses a decimal counter (`%llu`) in one pass over its bytes.
///
/// This is the inner loop of the per-second parsers (17 fields × every block device), so it
/// does not check the digits first and parse second as `str::parse` after validation would.
pub(crate) fn parse_counter(field: &str) -> Result<u64, CounterError> {
    if field.is_empty() {
        return Err(CounterError::NotNumber);
    }
    let mut value: u64 = 0;
    let mut overflow = false;
    for b in field.bytes() {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return Err(CounterError::NotNumber);
        }
        match value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(digit)))
        {
            Some(v) => value = v,
            // Keep scanning: "99999999999999999999x" is not a number at all.
            None => overflow = true,
        }
    }
    if overflow {
        Err(CounterError::TooLarge)
    } else {
        Ok(value)
    }
}

/// Parses column `column` (1-based, for the error) as a u64.
fn number(field: &str, column: usize) -> Result<u64, Fault<'_>> {
    parse_counter(field).map_err(|e| match e {
        CounterError::NotNumber => Fault::NotNumber { column, field },
        CounterError::TooLarge => Fault::TooLarge {
            column,
            field,
            bits: 64,
        },
    })
}

/// Parses a major or minor number (`%u` in the kernel, 12 and 20 bits in practice).
fn device_number(field: &str, column: usize) -> Result<u32, Fault<'_>> {
    let v = number(field, column)?;
    u32::try_from(v).map_err(|_| Fault::TooLarge {
        column,
        field,
        bits: 32,
    })
}

/// Reads the statistics after `major minor name` (or the whole sysfs line); `first_column` is
/// the 1-based column of the first statistic, for error messages.
fn stats<'a>(
    tokens: impl Iterator<Item = &'a str>,
    first_column: usize,
) -> Result<(DiskstatsFormat, [u64; MAX_STATS]), Fault<'a>> {
    let mut values = [0u64; MAX_STATS];
    let mut count = 0usize;
    for (i, tok) in tokens.enumerate() {
        let v = number(tok, first_column + i)?;
        // Statistics past the 17th are checked above but not kept.
        if let Some(slot) = values.get_mut(i) {
            *slot = v;
        }
        count = i + 1;
    }
    let format = format_for(count).ok_or(Fault::Count(count))?;
    Ok((format, values))
}

/// The line shape with `count` statistics, if the kernel prints such lines.
fn format_for(count: usize) -> Option<DiskstatsFormat> {
    match count {
        4 => Some(DiskstatsFormat::Partition4),
        11 => Some(DiskstatsFormat::Fields11),
        15 => Some(DiskstatsFormat::Fields15),
        n if n >= MAX_STATS => Some(DiskstatsFormat::Fields17),
        _ => None,
    }
}

/// Parses a well-formed line in a single pass over its bytes, splitting and converting numbers
/// together; `None` for anything unusual, which then goes through [`parse_line`] to get the same
/// row or the reason it is malformed. The two agree on every input (see the property tests).
///
/// The line is `text[start..end]`; the numbers are read eight bytes at a time ([`swar`]),
/// which may look at the bytes after `end` (the line's `\n`, the next line) but never counts
/// them: a digit run that would reach past `end` leaves the line to [`parse_line`].
///
/// This exists because the agent parses every block device's 17 counters every second: ~1,650
/// instructions a row of the kernel's shape against ~2,030 a byte at a time.
fn parse_line_fast(text: &str, start: usize, end: usize) -> Option<DiskStat<'_>> {
    let b = text.as_bytes();
    let (major, at) = field(b, swar::skip_spaces(b, start), end)?;
    let (minor, at) = field(b, swar::skip_spaces(b, at), end)?;
    let major = u32::try_from(major).ok()?;
    let minor = u32::try_from(minor).ok()?;
    let name_start = swar::skip_spaces(b, at).min(end);
    let mut at = name_start;
    while at < end && b.get(at).is_some_and(|c| !c.is_ascii_whitespace()) {
        at += 1;
    }
    if at == name_start {
        return None;
    }
    // Both ends sit next to ASCII whitespace or the line's ends, so they are char boundaries;
    // `get` would say None rather than panic if they were not.
    let name = text.get(name_start..at)?;
    let mut values = [0u64; MAX_STATS];
    let mut count = 0usize;
    loop {
        // The kernel separates the statistics with one space (looked at alone, the common
        // case); more are skipped, and trailing ones end the line.
        if b.get(at) == Some(&b' ') && at < end {
            at += 1;
            if b.get(at) == Some(&b' ') {
                at = swar::skip_spaces(b, at);
            }
        }
        if at >= end {
            break;
        }
        let (v, next) = field(b, at, end)?;
        if let Some(slot) = values.get_mut(count) {
            *slot = v;
        }
        count += 1;
        at = next;
    }
    Some(row(major, minor, name, format_for(count)?, &values))
}

/// The number at `at` in `b` and where it ends, when it ends at a space or at `end`.
#[inline(always)]
fn field(b: &[u8], at: usize, end: usize) -> Option<(u64, usize)> {
    let (v, next) = swar::number(b, at)?;
    (next == end || (next < end && b.get(next) == Some(&b' '))).then_some((v, next))
}

/// Builds a row from the statistics in kernel order; shapes without a counter leave it at 0.
fn row<'a>(
    major: u32,
    minor: u32,
    name: &'a str,
    format: DiskstatsFormat,
    v: &[u64; MAX_STATS],
) -> DiskStat<'a> {
    if format == DiskstatsFormat::Partition4 {
        // Old partition lines: reads, sectors read, writes, sectors written (iostats.rst).
        let [reads, sectors_read, writes, sectors_written, ..] = *v;
        return DiskStat {
            reads,
            sectors_read,
            writes,
            sectors_written,
            ..DiskStat::zero(major, minor, name, format)
        };
    }
    let [reads, reads_merged, sectors_read, read_ms, writes, writes_merged, sectors_written, write_ms, in_flight, io_ms, queue_ms, discards, discards_merged, sectors_discarded, discard_ms, flushes, flush_ms] =
        *v;
    DiskStat {
        major,
        minor,
        name,
        format,
        reads,
        reads_merged,
        sectors_read,
        read_ms,
        writes,
        writes_merged,
        sectors_written,
        write_ms,
        in_flight,
        io_ms,
        queue_ms,
        discards,
        discards_merged,
        sectors_discarded,
        discard_ms,
        flushes,
        flush_ms,
    }
}

impl<'a> DiskStat<'a> {
    /// A row with every counter at 0.
    fn zero(major: u32, minor: u32, name: &'a str, format: DiskstatsFormat) -> Self {
        Self {
            major,
            minor,
            name,
            format,
            reads: 0,
            reads_merged: 0,
            sectors_read: 0,
            read_ms: 0,
            writes: 0,
            writes_merged: 0,
            sectors_written: 0,
            write_ms: 0,
            in_flight: 0,
            io_ms: 0,
            queue_ms: 0,
            discards: 0,
            discards_merged: 0,
            sectors_discarded: 0,
            discard_ms: 0,
            flushes: 0,
            flush_ms: 0,
        }
    }
}

/// Parses one non-blank `/proc/diskstats` line.
fn parse_line(line: &str) -> Result<DiskStat<'_>, Fault<'_>> {
    let mut tokens = fields(line);
    let major = device_number(tokens.next().ok_or(Fault::Missing("major number"))?, 1)?;
    let minor = device_number(tokens.next().ok_or(Fault::Missing("minor number"))?, 2)?;
    let name = tokens.next().ok_or(Fault::Missing("device name"))?;
    let (format, values) = stats(tokens, 4)?;
    Ok(row(major, minor, name, format, &values))
}

/// Parses the whole file. Never panics; malformed lines are returned in `errors`, the rest parse.
///
/// Blank lines are skipped; an empty file gives no rows and no errors (a host with no block
/// devices is odd but not malformed).
pub fn parse(text: &str) -> Rows<DiskStat<'_>> {
    // One allocation for the rows: the 1 s loop parses this file every second. Newlines are
    // found with the `memchr` crate's vector search, once: `str::lines` cost ~2.6 instructions a
    // byte, counting them first as much again.
    let newlines = memchr::memchr_iter(b'\n', text.as_bytes()).count();
    let mut out = Rows {
        rows: Vec::with_capacity(newlines + 1),
        errors: Vec::new(),
    };
    for (i, (start, line)) in lines(text).enumerate() {
        match parse_line_in(i + 1, text, start, line) {
            Ok(Some(row)) => out.rows.push(row),
            Ok(None) => {}
            Err(e) => out.errors.push(e),
        }
    }
    out
}

/// One line of the file as [`parse`] reads it: `Ok(None)` for a blank line, else its row or
/// why it is malformed; `number` (1-based, as [`lines`] counts) goes into the error.
pub fn parse_numbered_line(number: usize, line: &str) -> Result<Option<DiskStat<'_>>, ParseError> {
    parse_line_in(number, line, 0, line)
}

/// [`parse_numbered_line`] of `line`, which starts at byte `start` of `text` (as [`lines`]
/// gives them): the fast parse reads the line eight bytes at a time, and may look at the
/// bytes after it in `text` rather than load the line's last few bytes one by one.
///
/// For a reader that takes the file a line at a time (the disk collector, which leaves out a
/// line whose bytes are those it parsed a second ago).
pub fn parse_line_in<'a>(
    number: usize,
    text: &'a str,
    start: usize,
    line: &'a str,
) -> Result<Option<DiskStat<'a>>, ParseError> {
    let end = start + line.len();
    // `line` must be that part of `text` (the same bytes in memory: two addresses compared); a
    // caller that passes another is read by `line` alone.
    let within = end <= text.len() && text.as_ptr().wrapping_add(start) == line.as_ptr();
    let fast = if within {
        parse_line_fast(text, start, end)
    } else {
        parse_line_fast(line, 0, line.len())
    };
    if let Some(row) = fast {
        return Ok(Some(row));
    }
    if fields(line).next().is_none() {
        return Ok(None);
    }
    parse_line(line)
        .map(Some)
        .map_err(|fault| ParseError::new(number, line, fault))
}

/// The statistics of a line whose head (`major minor name`) the caller knows from the same
/// bytes parsed before: `text[at..end]`, from the byte after the name to the line's end, in
/// the kernel's shape — for each statistic one space and 1–19 digits, nothing else. The row is
/// the one [`parse_line_in`] gives for the whole line, with major and minor 0 and an empty
/// name; `None` for anything else (a longer name, more spaces, a tab, a statistic that is not
/// one, a count no kernel prints), which the caller then parses whole.
///
/// For the disk collector: a busy device's line changes every second in its counters only,
/// and its head was ~300 of a row's ~1,800 instructions.
pub fn parse_stats_after(text: &str, at: usize, end: usize) -> Option<DiskStat<'static>> {
    let b = text.as_bytes();
    if end > b.len() {
        return None;
    }
    let mut values = [0u64; MAX_STATS];
    let mut count = 0usize;
    let mut at = at;
    while at < end {
        if b.get(at) != Some(&b' ') {
            return None;
        }
        // Read in the file's text: the last number's load reads the line's `\n` and the next
        // line rather than fall back to a byte loop; digits running past `end` are no number
        // of this line.
        let (v, next) = swar::number(b, at + 1).filter(|&(_, next)| next <= end)?;
        if let Some(slot) = values.get_mut(count) {
            *slot = v;
        }
        count += 1;
        at = next;
    }
    Some(row(0, 0, "", format_for(count)?, &values))
}

/// The lines of `text` as `str::lines` gives them (a final empty line is none, a `\r` before
/// a `\n` is dropped), found with `memchr`, each with the byte offset where it starts in
/// `text`. The n-th (from 1) is line n of [`parse`]'s errors.
pub fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let start = text.len() - rest.len();
        let (line, next) = match memchr::memchr(b'\n', rest.as_bytes()) {
            // `\n` is ASCII: both sides of it are char boundaries.
            Some(i) => {
                let line = &rest[..i];
                (line.strip_suffix('\r').unwrap_or(line), &rest[i + 1..])
            }
            None => (rest, ""),
        };
        rest = next;
        Some((start, line))
    })
}

/// Parses a `/sys/block/<dev>/stat` file: one line of 4, 11, 15 or 17+ statistics without
/// `major minor name`. The row has an empty name and major/minor 0; the caller knows which
/// device it read.
pub fn parse_sysfs_stat(text: &str) -> Result<DiskStat<'static>, ParseError> {
    let mut found = None;
    for (i, line) in text.lines().enumerate() {
        let mut tokens = fields(line).peekable();
        if tokens.peek().is_none() {
            continue;
        }
        if found.is_some() {
            return Err(ParseError::new(i + 1, line, Fault::SecondLine));
        }
        let (format, values) = stats(tokens, 1).map_err(|f| ParseError::new(i + 1, line, f))?;
        found = Some(row(0, 0, "", format, &values));
    }
    found.ok_or_else(|| ParseError::new(1, text, Fault::Empty))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn snapshot_real_fixtures() {
        insta::glob!("../../fixtures/diskstats", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture is readable");
            insta::assert_debug_snapshot!(parse(&text));
        });
    }

    #[test]
    fn snapshot_real_sysfs_stat_fixtures() {
        insta::glob!("../../fixtures/diskstats/sysfs-stat", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture is readable");
            insta::assert_debug_snapshot!(parse_sysfs_stat(&text));
        });
    }

    fn one(text: &str) -> DiskStat<'_> {
        let rows = parse(text);
        assert!(rows.errors.is_empty(), "{:?}", rows.errors);
        assert_eq!(rows.rows.len(), 1);
        rows.rows[0]
    }

    fn error(text: &str) -> ParseError {
        let rows = parse(text);
        assert!(rows.rows.is_empty(), "{:?}", rows.rows);
        assert_eq!(rows.errors.len(), 1, "{:?}", rows.errors);
        rows.errors[0].clone()
    }

    #[test]
    fn lines_are_split_as_str_lines_splits_them() {
        for text in [
            "",
            "\n",
            "a",
            "a\n",
            "a\nb",
            "a\r\nb\r\n",
            "\n\na\n\n",
            "a\rb\n",
            "\r\n",
            "a\r",
        ] {
            let ours: Vec<&str> = lines(text).map(|(_, l)| l).collect();
            let std: Vec<&str> = text.lines().collect();
            assert_eq!(ours, std, "{text:?}");
            for (start, line) in lines(text) {
                assert_eq!(text.get(start..start + line.len()), Some(line), "{text:?}");
            }
        }
    }

    #[test]
    fn seventeen_statistics_land_in_kernel_order() {
        let d = one("8 16 sdb 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n");
        assert_eq!((d.major, d.minor, d.name), (8, 16, "sdb"));
        assert_eq!(d.format, DiskstatsFormat::Fields17);
        let got = [
            d.reads,
            d.reads_merged,
            d.sectors_read,
            d.read_ms,
            d.writes,
            d.writes_merged,
            d.sectors_written,
            d.write_ms,
            d.in_flight,
            d.io_ms,
            d.queue_ms,
            d.discards,
            d.discards_merged,
            d.sectors_discarded,
            d.discard_ms,
            d.flushes,
            d.flush_ms,
        ];
        assert_eq!(
            got,
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]
        );
    }

    #[test]
    fn old_partition_line_maps_its_four_statistics() {
        let d = one("   3    1   hda1 35486 38030 38031 38032");
        assert_eq!(d.format, DiskstatsFormat::Partition4);
        assert_eq!(
            (d.reads, d.sectors_read, d.writes, d.sectors_written),
            (35486, 38030, 38031, 38032)
        );
        assert_eq!(
            (d.reads_merged, d.read_ms, d.io_ms, d.queue_ms),
            (0, 0, 0, 0)
        );
    }

    #[test]
    fn eleven_and_fifteen_leave_newer_counters_at_zero() {
        let d = one("8 0 sda 1 2 3 4 5 6 7 8 9 10 11");
        assert_eq!(d.format, DiskstatsFormat::Fields11);
        assert_eq!((d.queue_ms, d.discards, d.flushes), (11, 0, 0));
        let d = one("8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15");
        assert_eq!(d.format, DiskstatsFormat::Fields15);
        assert_eq!((d.discard_ms, d.flushes, d.flush_ms), (15, 0, 0));
    }

    #[test]
    fn statistics_beyond_seventeen_are_ignored_if_numeric() {
        let d = one("8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20");
        assert_eq!(d.format, DiskstatsFormat::Fields17);
        assert_eq!(d.flush_ms, 17);
        let e = error("8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 8 1 sda1");
        assert_eq!(e.reason, "column 23 (\"sda1\") is not an unsigned integer");
    }

    #[test]
    fn tabs_and_runs_of_spaces_separate_fields() {
        let d = one("\t 253\t\t2   dm-2 \t1 2 3 4 5 6 7 8 9 10 11\t  \r\n");
        assert_eq!((d.major, d.minor, d.name, d.queue_ms), (253, 2, "dm-2", 11));
    }

    #[test]
    fn empty_and_blank_text_give_nothing() {
        assert_eq!(parse(""), Rows::default());
        assert_eq!(parse("\n  \n\t\n"), Rows::default());
    }

    #[test]
    fn blank_lines_are_skipped_and_line_numbers_stay_true() {
        let rows = parse("\n8 0 sda 1 2 3 4\n\n8 1 sda1 x 2 3 4\n   \n8 2 sda2 1 2 3 4\n");
        assert_eq!(rows.rows.len(), 2);
        assert_eq!(rows.errors.len(), 1);
        assert_eq!(rows.errors[0].line, 4);
        assert_eq!(rows.errors[0].text, "8 1 sda1 x 2 3 4");
    }

    #[test]
    fn truncated_lines_are_errors() {
        assert_eq!(error("8").reason, "missing minor number");
        assert_eq!(error("8 0").reason, "missing device name");
        assert_eq!(
            error("8 0 sda").reason,
            "no statistics after the device name"
        );
        assert_eq!(
            error("8 0 sda 1 2 3 4 5 6 7").reason,
            "7 statistics; expected 4, 11, 15 or at least 17"
        );
        // A 5.5+ line cut short by one field (sysstat's root1 fixture has such a line).
        assert_eq!(
            error("65 32 sds 386 416 8554 100 727 820 8746 3902 0 762 7902 0 0 0").reason,
            "14 statistics; expected 4, 11, 15 or at least 17"
        );
    }

    #[test]
    fn non_numeric_fields_are_errors() {
        assert_eq!(
            error("x 0 sda 1 2 3 4").reason,
            "column 1 (\"x\") is not an unsigned integer"
        );
        assert_eq!(
            error("8 0 sda 1 2 -3 4").reason,
            "column 6 (\"-3\") is not an unsigned integer"
        );
        assert_eq!(
            error("8 0 sda 1 2 3 4.5").reason,
            "column 7 (\"4.5\") is not an unsigned integer"
        );
    }

    #[test]
    fn values_that_overflow_are_errors() {
        let max = format!("8 0 sda {} 2 3 4", u64::MAX);
        assert_eq!(one(&max).reads, u64::MAX);
        assert_eq!(
            error("8 0 sda 18446744073709551616 2 3 4").reason,
            "column 4 (\"18446744073709551616\") does not fit in 64 bits"
        );
        assert_eq!(
            error("4294967296 0 sda 1 2 3 4").reason,
            "column 1 (\"4294967296\") does not fit in 32 bits"
        );
        assert_eq!(one("4294967295 1048575 sda 1 2 3 4").major, u32::MAX);
    }

    #[test]
    fn one_bad_line_does_not_cost_the_others_their_rows() {
        let text = "8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n\
                    garbage\n\
                    8 16 sdb 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n";
        let rows = parse(text);
        let names: Vec<_> = rows.rows.iter().map(|d| d.name).collect();
        assert_eq!(names, ["sda", "sdb"]);
        assert_eq!(rows.errors.len(), 1);
        assert_eq!(rows.errors[0].line, 2);
        assert_eq!(
            rows.errors[0].reason,
            "column 1 (\"garbage\") is not an unsigned integer"
        );
    }

    #[test]
    fn counters_parse_in_one_pass() {
        assert_eq!(parse_counter("0"), Ok(0));
        assert_eq!(parse_counter("0042"), Ok(42));
        assert_eq!(parse_counter("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(
            parse_counter("18446744073709551616"),
            Err(CounterError::TooLarge)
        );
        assert_eq!(
            parse_counter("99999999999999999999999"),
            Err(CounterError::TooLarge)
        );
        assert_eq!(
            parse_counter("99999999999999999999x"),
            Err(CounterError::NotNumber)
        );
        for bad in ["", "-1", "+1", "1.0", " 1", "１", "0x10", "/", ":"] {
            assert_eq!(parse_counter(bad), Err(CounterError::NotNumber), "{bad:?}");
        }
    }

    #[test]
    fn error_text_is_cut_to_200_characters() {
        let long = format!("8 0 sda {}", "x".repeat(500));
        assert_eq!(error(&long).text.chars().count(), 200);
    }

    #[test]
    fn sysfs_stat_has_no_device_columns() {
        let d = parse_sysfs_stat("       1        2        3        4        5        6        7        8        0       10       11\n")
            .expect("valid");
        assert_eq!((d.major, d.minor, d.name), (0, 0, ""));
        assert_eq!(d.format, DiskstatsFormat::Fields11);
        assert_eq!((d.reads, d.write_ms, d.queue_ms), (1, 8, 11));
    }

    #[test]
    fn sysfs_stat_errors() {
        let e = parse_sysfs_stat("").expect_err("empty");
        assert_eq!((e.line, e.reason.as_str()), (1, "no statistics"));
        let e = parse_sysfs_stat("1 2 3 4\n1 2 3 4\n").expect_err("two lines");
        assert_eq!(
            (e.line, e.reason.as_str()),
            (2, "more than one line of statistics")
        );
        let e = parse_sysfs_stat("1 2 3 x").expect_err("non-numeric");
        assert_eq!(e.reason, "column 4 (\"x\") is not an unsigned integer");
        let e = parse_sysfs_stat("1 2 3").expect_err("truncated");
        assert_eq!(e.reason, "3 statistics; expected 4, 11, 15 or at least 17");
        assert!(parse_sysfs_stat("\n1 2 3 4\n\n").is_ok());
    }

    /// A line the way the kernel would print it, with random padding.
    fn line_strategy() -> impl Strategy<Value = (u32, u32, String, Vec<u64>, Vec<&'static str>)> {
        let count = prop_oneof![Just(4usize), Just(11), Just(15), Just(17), 18usize..=22];
        (
            any::<u32>(),
            any::<u32>(),
            "[a-z][a-z0-9!_-]{0,14}",
            count.prop_flat_map(|n| proptest::collection::vec(any::<u64>(), n)),
            proptest::collection::vec(
                prop_oneof![Just(" "), Just("  "), Just("\t"), Just(" \t ")],
                25,
            ),
        )
    }

    proptest! {
        #[test]
        fn counter_agrees_with_std(text in "[0-9]{1,22}|\\PC{0,6}") {
            let std = text.parse::<u64>().ok().filter(|_| text.bytes().all(|b| b.is_ascii_digit()));
            prop_assert_eq!(parse_counter(&text).ok(), std);
        }

        #[test]
        fn never_panics_on_arbitrary_text(text in "\\PC*") {
            let rows = parse(&text);
            prop_assert!(rows.rows.len() + rows.errors.len() <= text.lines().count());
            let _ = parse_sysfs_stat(&text);
        }

        #[test]
        fn never_panics_on_numeric_tokens(
            tokens in proptest::collection::vec(
                prop_oneof![any::<u64>().prop_map(|v| v.to_string()), "[0-9]{1,25}", Just("-".to_owned())],
                0..25,
            ),
            sep in prop_oneof![Just(" "), Just("\t"), Just("   ")],
        ) {
            let line = tokens.join(sep);
            let rows = parse(&line);
            prop_assert!(rows.rows.len() + rows.errors.len() <= 1);
            let _ = parse_sysfs_stat(&line);
        }

        #[test]
        fn fast_path_agrees_with_the_field_by_field_parser(
            tokens in proptest::collection::vec(
                prop_oneof![
                    any::<u64>().prop_map(|v| v.to_string()),
                    any::<u32>().prop_map(|v| v.to_string()),
                    "[0-9]{18,22}",
                    "[a-z]{1,4}[0-9]?",
                    "\\PC{1,3}",
                ],
                0..22,
            ),
            seps in proptest::collection::vec(prop_oneof![Just(" "), Just("\t"), Just("  "), Just("\x0c"), Just("\u{a0}")], 22),
        ) {
            let mut line = String::new();
            for (tok, sep) in tokens.iter().zip(&seps) {
                line.push_str(sep);
                line.push_str(tok);
            }
            // The fast path may leave a line to the slow one (None), never read it differently.
            let slow = parse_line(&line).ok();
            let fast = parse_line_fast(&line, 0, line.len());
            if fields(&line).next().is_some() && fast.is_some() {
                prop_assert_eq!(fast, slow, "{:?}", line);
            } else {
                prop_assert_eq!(fast, None);
            }
        }

        #[test]
        fn fast_path_agrees_on_near_valid_lines(
            major in prop_oneof![any::<u32>().prop_map(|v| v.to_string()), "[0-9]{10,11}"],
            name in "[a-z]{1,4}[0-9]{0,2}|[0-9]{1,3}|\\PC{1,2}",
            stats in proptest::collection::vec(
                prop_oneof![
                    8 => any::<u64>().prop_map(|v| v.to_string()),
                    1 => "[0-9]{20,21}",
                    1 => "[0-9]{1,3}[a-z.-]",
                ],
                0..20,
            ),
            sep in prop_oneof![Just(" "), Just("\t"), Just(" \r")],
        ) {
            let line = format!("{major}{sep}7{sep}{name}{sep}{}", stats.join(sep));
            let (fast, slow) = (parse_line_fast(&line, 0, line.len()), parse_line(&line).ok());
            // The kernel's own shape (single spaces, numbers of at most 19 digits) takes the fast
            // path; anything else may fall back to the slow one, never reads differently.
            let longest_number = line
                .split(|c: char| !c.is_ascii_digit())
                .map(str::len)
                .max()
                .unwrap_or(0);
            if sep == " " && longest_number <= 19 {
                prop_assert_eq!(fast, slow, "{:?}", line);
            } else if fast.is_some() {
                prop_assert_eq!(fast, slow, "{:?}", line);
            }
        }

        /// A line read in the file's text (the fast parse may load the bytes after it) is read
        /// as the line alone is: whatever follows it, a newline, `\r\n`, the next row, digits
        /// right after a `\r`, or nothing (the file's last line).
        #[test]
        fn a_line_read_in_its_text_is_read_as_the_line_alone(
            rows in proptest::collection::vec(
                prop_oneof![
                    4 => (any::<u16>(), any::<u16>(), proptest::collection::vec(any::<u64>(), 17))
                        .prop_map(|(ma, mi, v)| format!("{ma:4} {mi:7} sd{mi} {}", v.iter().map(u64::to_string).collect::<Vec<_>>().join(" "))),
                    1 => "[0-9 ]{0,40}",
                    1 => "\\PC{0,12}",
                ],
                1..6,
            ),
            ends in proptest::collection::vec(prop_oneof![Just("\n"), Just("\r\n"), Just("\r"), Just(" \n")], 6),
        ) {
            let mut text = String::new();
            for (row, end) in rows.iter().zip(&ends) {
                text.push_str(row);
                text.push_str(end);
            }
            for (i, (start, line)) in lines(&text).enumerate() {
                prop_assert_eq!(
                    parse_line_in(i + 1, &text, start, line),
                    parse_numbered_line(i + 1, line),
                    "{:?} in {:?}", line, text
                );
            }
            // A line that is not the text's own is read alone too.
            let copy = text.clone();
            for (i, (start, line)) in lines(&copy).enumerate() {
                prop_assert_eq!(parse_line_in(i + 1, &text, start, line), parse_numbered_line(i + 1, line));
            }
        }

        /// The statistics read after a head known from the same bytes are those of the whole
        /// line: a line in the kernel's shape (one space between fields, numbers of at most 19
        /// digits) always; any other either the same or left to the whole parse (`None`), never
        /// read differently. Read in the file's text, whatever follows the line.
        #[test]
        fn statistics_after_a_known_head_are_those_of_the_whole_line(
            rows in proptest::collection::vec(
                (
                    any::<u16>(),
                    prop_oneof![Just(4usize), Just(11), Just(15), Just(17), 18usize..=21, 0usize..=22],
                    proptest::collection::vec(
                        prop_oneof![
                            6 => any::<u64>().prop_map(|v| v.to_string()),
                            3 => (0u64..100_000_000_000).prop_map(|v| v.to_string()),
                            1 => "[0-9]{19,21}",
                        ],
                        22,
                    ),
                    prop_oneof![
                        8 => Just(" "),
                        1 => Just("  "),
                        1 => Just("\t"),
                        1 => Just(" x"),
                        1 => Just("x "),
                        1 => Just(" -"),
                    ],
                    0usize..24,
                ),
                1..5,
            ),
            ends in proptest::collection::vec(prop_oneof![Just("\n"), Just("\r\n"), Just(" \n")], 5),
            bare in any::<bool>(),
        ) {
            let mut text = String::new();
            let mut shaped = Vec::new();
            for ((mi, count, values, odd, at), end) in rows.iter().zip(&ends) {
                // One separator may be odd: after the name, between statistics, or none.
                let mut line = format!("{:4} {mi:7} sd{mi}", mi % 300);
                for (i, v) in values.iter().take(*count).enumerate() {
                    line.push_str(if i == *at { odd } else { " " });
                    line.push_str(v);
                }
                let kernel = (*at >= *count || *odd == " ")
                    && values.iter().take(*count).all(|v| v.len() <= 19)
                    && format_for(*count).is_some()
                    && end.trim_start_matches(' ') == *end;
                shaped.push(kernel);
                text.push_str(&line);
                text.push_str(end);
            }
            if bare {
                // The file's last line without its newline.
                text.truncate(text.trim_end_matches(['\n', '\r']).len());
            }
            for (i, (start, line)) in lines(&text).enumerate() {
                let Ok(Some(whole)) = parse_line_in(i + 1, &text, start, line) else {
                    continue;
                };
                let head = whole.name.as_ptr() as usize + whole.name.len() - text.as_ptr() as usize;
                let after = parse_stats_after(&text, head, start + line.len());
                let want = DiskStat { major: 0, minor: 0, name: "", ..whole };
                match after {
                    Some(a) => prop_assert_eq!(a, want, "{:?}", line),
                    None => prop_assert!(
                        !shaped.get(i).copied().unwrap_or(false),
                        "a line in the kernel's shape left to the whole parse: {:?}",
                        line
                    ),
                }
            }
        }

        #[test]
        fn printed_lines_parse_back((major, minor, name, values, seps) in line_strategy()) {
            let mut line = format!("{}{major}{}{minor}{}{name}", seps[0], seps[1], seps[2]);
            for (v, sep) in values.iter().zip(seps.iter().skip(3).cycle()) {
                line.push_str(sep);
                line.push_str(&v.to_string());
            }
            let rows = parse(&line);
            prop_assert!(rows.errors.is_empty(), "{:?}", rows.errors);
            prop_assert_eq!(rows.rows.len(), 1);
            let d = rows.rows[0];
            prop_assert_eq!((d.major, d.minor, d.name), (major, minor, name.as_str()));
            prop_assert_eq!(d.reads, values[0]);
            if values.len() >= 11 {
                prop_assert_eq!(d.queue_ms, values[10]);
            } else {
                prop_assert_eq!(d.sectors_written, values[3]);
            }
            if values.len() >= 17 {
                prop_assert_eq!(d.flush_ms, values[16]);
            }
        }
    }
}
