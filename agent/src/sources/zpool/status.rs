//! `zpool status [-p]` text, every format from Solaris 10 to OpenZFS 2.3.
//!
//! A pool is a block of `key: value` lines — `pool:`, `id:`, `state:`, `status:`, `action:`,
//! `see:`, `scan:` (or Solaris' `scrub:`), `config:`, `errors:` — whose values may continue on
//! indented lines, and a `config:` table `NAME STATE READ WRITE CKSUM [note]` whose indentation
//! (two columns per level, tabs expanded to 8) is the vdev tree. Differences handled here:
//!
//! * the scan line: Solaris `scrub: resilver in progress, 0.14% done, 0h0m to go`;
//!   `scan: … / 146G scanned out of 1.24T at 177M/s, 1h47m to go / 0 repaired, 11.56% done`
//!   (≤ 0.7); `461G scanned at 120M/s, 258G issued at 67.2M/s, 496G total / 0B repaired,
//!   52.05% done, 0 days 01:01:21 to go` (0.8); `403M / 405M scanned at 100M/s, 68.4M / 405M
//!   issued at 10.0M/s` (2.x); dRAID sequential rebuilds print one more `scan:` line each,
//!   `resilver (draid1:4d:11c:1s-0) in progress since …` with `1.59T issued 6.07G/s` (no
//!   "at"). Durations `7h7m`, `06:58:02`, `1 days 09:48:34`; locale decimal commas (`9,12T`).
//! * counters exact with `-p`, else suffixed (`1.05K`, powers of 1024);
//! * notes after the counters: `(resilvering)`, `was /dev/…`, `too many errors`, `cannot
//!   open`, `insufficient replicas`, `58.5K resilvered`; spares print `INUSE currently in use`
//!   or `AVAIL` with no counters; `-c` adds script columns after CKSUM;
//! * sections `logs`, `cache`, `spares`, `special`, `dedup` at the root's indentation;
//! * tabs or spaces, misaligned columns (a long pool name pushes them), trailing spaces, a
//!   line indented one column short, no blank line after `config:`, no `errors:` line, a
//!   permanent-error file list indented or not.
//!
//! Lines that make no sense in their place are errors with their line number: a config row
//! with no state, a counter that is not a number, text outside any field.

use super::{
    parse_duration, parse_percent, parse_rate, parse_size, Pool, Scan, ScanKind, ScanState, Vdev,
    VdevKind, ZpoolStatus,
};
use crate::sources::ParseError;

/// The deepest vdev nesting accepted; real trees are five deep (root, dRAID, spare,
/// replacing, disk). Deeper indentation is clamped so hostile input cannot recurse without
/// bound.
const MAX_DEPTH: usize = 32;

/// Where a continuation line belongs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cont {
    None,
    Status,
    Action,
    Scan,
    /// A key this parser does not use (`remove:`, `checkpoint:`, `expand:`): its lines are
    /// skipped.
    Ignored,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Section {
    Header,
    /// After `config:`, before the NAME header.
    ConfigPending,
    Config,
    /// After the config's closing blank line.
    ConfigDone,
    Errors,
}

struct PoolBuilder {
    pool: Pool,
    /// Scan text: (first line, continuation lines).
    scans: Vec<(usize, String, Vec<String>)>,
    rows: Vec<(usize, Vdev)>,
    base_indent: usize,
    extra_columns: Vec<String>,
}

impl PoolBuilder {
    fn new(name: String) -> Self {
        Self {
            pool: Pool {
                name,
                ..Pool::default()
            },
            scans: Vec::new(),
            rows: Vec::new(),
            base_indent: 0,
            extra_columns: Vec::new(),
        }
    }

    fn finish(mut self) -> Pool {
        for (_, head, rest) in &self.scans {
            if let Some(scan) = parse_scan(head, rest) {
                self.pool.scans.push(scan);
            }
        }
        self.pool.config = build_tree(self.rows);
        if self.pool.name.is_empty() {
            if let Some(root) = self.pool.root() {
                self.pool.name = root.name.clone();
            }
        }
        if self.pool.data_errors.is_none() && !self.pool.error_files.is_empty() {
            self.pool.data_errors = u64::try_from(self.pool.error_files.len()).ok();
        }
        self.pool
    }
}

/// Parses the output of `zpool status [-p] [-v] [-c …] [pool…]`.
///
/// "no pools available" and empty output give no pools.
pub fn parse(text: &str) -> Result<ZpoolStatus, ParseError> {
    let mut pools = Vec::new();
    let mut cur: Option<PoolBuilder> = None;
    let mut section = Section::Header;
    let mut cont = Cont::None;

    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim_end();
        let trimmed = line.trim_start();
        if trimmed.is_empty() {
            if section == Section::Config && cur.as_ref().is_some_and(|b| !b.rows.is_empty()) {
                section = Section::ConfigDone;
            }
            continue;
        }
        // Elisions in documentation excerpts.
        if trimmed == "..." {
            continue;
        }
        if trimmed == "no pools available" {
            continue;
        }
        if let Some((key, value)) = key_value(line, section) {
            let value = value.trim();
            if key == "pool" {
                if value.is_empty() {
                    return Err(ParseError::new(n, line, "pool: without a name"));
                }
                if let Some(b) = cur.take() {
                    pools.push(b.finish());
                }
                cur = Some(PoolBuilder::new(value.to_owned()));
                section = Section::Header;
                cont = Cont::None;
                continue;
            }
            let b = cur.get_or_insert_with(|| PoolBuilder::new(String::new()));
            cont = Cont::None;
            match key {
                "id" => b.pool.guid = value.parse().ok(),
                "state" => b.pool.state = value.to_owned(),
                "status" => {
                    b.pool.status = Some(value.to_owned());
                    cont = Cont::Status;
                }
                "action" => {
                    b.pool.action = Some(value.to_owned());
                    cont = Cont::Action;
                }
                "see" => b.pool.see = Some(value.to_owned()),
                "scan" | "scrub" => {
                    b.scans.push((n, value.to_owned(), Vec::new()));
                    cont = Cont::Scan;
                }
                "config" => {
                    section = Section::ConfigPending;
                    continue;
                }
                "errors" => {
                    b.pool.errors = Some(value.to_owned());
                    b.pool.data_errors = data_errors(value);
                    section = Section::Errors;
                    continue;
                }
                _ => cont = Cont::Ignored,
            }
            section = Section::Header;
            continue;
        }
        if is_config_header(trimmed) {
            let b = cur.get_or_insert_with(|| PoolBuilder::new(String::new()));
            b.base_indent = indent_width(line);
            b.extra_columns = trimmed
                .split_ascii_whitespace()
                .skip(5)
                .map(str::to_owned)
                .collect();
            section = Section::Config;
            continue;
        }
        match section {
            Section::ConfigPending | Section::Config => {
                let b = cur.get_or_insert_with(|| PoolBuilder::new(String::new()));
                if section == Section::ConfigPending {
                    // A config without its NAME header: indentation starts here.
                    b.base_indent = indent_width(line);
                    section = Section::Config;
                }
                let indent = indent_width(line);
                let vdev = parse_row(trimmed, indent <= b.base_indent, &b.extra_columns)
                    .map_err(|reason| ParseError::new(n, line, reason))?;
                b.rows.push((indent, vdev));
            }
            Section::Errors => {
                if let Some(b) = cur.as_mut() {
                    b.pool.error_files.push(trimmed.to_owned());
                }
            }
            Section::Header | Section::ConfigDone => {
                let Some(b) = cur.as_mut() else {
                    return Err(ParseError::new(n, line, "text before any pool"));
                };
                match cont {
                    Cont::Status => append(&mut b.pool.status, trimmed),
                    Cont::Action => append(&mut b.pool.action, trimmed),
                    Cont::Scan => {
                        if let Some(last) = b.scans.last_mut() {
                            last.2.push(trimmed.to_owned());
                        }
                    }
                    Cont::Ignored => {}
                    Cont::None => {
                        return Err(ParseError::new(n, line, "line outside any field"));
                    }
                }
            }
        }
    }
    if let Some(b) = cur.take() {
        pools.push(b.finish());
    }
    Ok(ZpoolStatus { pools })
}

fn append(slot: &mut Option<String>, more: &str) {
    let s = slot.get_or_insert_with(String::new);
    if !s.is_empty() {
        s.push(' ');
    }
    s.push_str(more);
}

/// Keys zpool prints before its colon, right-aligned to column 7 (`  pool:`, `status:`) or,
/// for the longer ones, from column 0 (`checkpoint:`).
const KEYS: &[&str] = &[
    "pool",
    "id",
    "state",
    "status",
    "action",
    "see",
    "scan",
    "scrub",
    "config",
    "errors",
    "remove",
    "checkpoint",
    "expand",
    "prefetch",
];

/// Splits a `key: value` line. Outside the config any lower-case word followed by a colon at
/// the left margin (indent ≤ 4) is a key, so a key added by a newer release is skipped rather
/// than taken for text; inside the config only the known keys end the table.
fn key_value(line: &str, section: Section) -> Option<(&str, &str)> {
    let trimmed = line.trim_start();
    let (key, value) = trimmed.split_once(':')?;
    if !(value.is_empty() || value.starts_with([' ', '\t'])) {
        return None;
    }
    if KEYS.contains(&key) {
        return Some((key, value));
    }
    let in_config = matches!(section, Section::Config | Section::ConfigPending);
    let margin = line.len() - trimmed.len();
    let wordlike = !key.is_empty() && key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    (!in_config && section != Section::Errors && margin <= 4 && wordlike).then_some((key, value))
}

fn is_config_header(trimmed: &str) -> bool {
    let mut f = trimmed.split_ascii_whitespace();
    f.next() == Some("NAME") && f.next() == Some("STATE")
}

/// Width of the leading whitespace, tabs advancing to the next multiple of 8.
fn indent_width(line: &str) -> usize {
    let mut w = 0;
    for c in line.chars() {
        match c {
            ' ' => w += 1,
            '\t' => w = (w / 8 + 1) * 8,
            _ => break,
        }
    }
    w
}

/// One config row: `name state [read write cksum] [note | -c columns]`.
fn parse_row(trimmed: &str, top: bool, extra_columns: &[String]) -> Result<Vdev, String> {
    let words: Vec<&str> = trimmed.split_ascii_whitespace().collect();
    let Some((&name, rest)) = words.split_first() else {
        return Err("empty config row".into());
    };
    let Some((&state, rest)) = rest.split_first() else {
        if top {
            if let Some(kind) = VdevKind::section_from_word(name) {
                return Ok(Vdev {
                    name: name.to_owned(),
                    kind,
                    ..Vdev::default()
                });
            }
        }
        return Err("config row without a state".into());
    };
    let mut v = Vdev {
        name: name.to_owned(),
        kind: VdevKind::from_name(name),
        state: state.to_owned(),
        ..Vdev::default()
    };
    let mut note_words = rest;
    if let [r, w, c, tail @ ..] = rest {
        if r.starts_with(|c: char| c.is_ascii_digit()) {
            let (Some(r), Some(w), Some(c)) = (parse_size(r), parse_size(w), parse_size(c)) else {
                return Err("error counters are not numbers".into());
            };
            v.read_errors = Some(r);
            v.write_errors = Some(w);
            v.cksum_errors = Some(c);
            note_words = tail;
        }
    } else if rest
        .first()
        .is_some_and(|r| r.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err("fewer than three error counters".into());
    }
    if !extra_columns.is_empty() && note_words.len() == extra_columns.len() {
        v.extra = extra_columns
            .iter()
            .zip(note_words)
            .map(|(k, v)| (k.clone(), (*v).to_owned()))
            .collect();
    } else if !note_words.is_empty() {
        let note = note_words.join(" ");
        // "(awaiting resilver)": a new device that holds nothing yet, like one resilvering.
        v.resilvering = note_words.contains(&"(resilvering)") || note_words.contains(&"(awaiting");
        if let Some(("was", path)) = note.split_once(' ').filter(|(w, _)| *w == "was") {
            v.was = Some(path.to_owned());
        }
        v.note = Some(note);
    }
    Ok(v)
}

/// Turns (indentation, row) pairs into the tree. A row's parent is the nearest row above it
/// that is indented less, so an over-indented row (`sda` four columns in, in a documentation
/// excerpt) still hangs under its real parent and its siblings stay siblings. A root-level
/// row after a section node is that section's member (a line indented one column short); a
/// further root-level row after the root (a flattened, hand-formatted listing) becomes a
/// child of the root.
fn build_tree(rows: Vec<(usize, Vdev)>) -> Vec<Vdev> {
    let mut leveled = Vec::with_capacity(rows.len());
    // Indentation of the open ancestors of the next row.
    let mut open: Vec<usize> = Vec::new();
    let mut in_section = false;
    let mut seen_root = false;
    for (indent, v) in rows {
        while open.last().is_some_and(|&top| top >= indent) {
            open.pop();
        }
        let mut depth = open.len().min(MAX_DEPTH);
        if depth == 0 {
            if v.kind.is_section() {
                in_section = true;
            } else if in_section || seen_root {
                depth = 1;
                open.push(0);
            } else {
                seen_root = true;
            }
        }
        if open.len() < MAX_DEPTH {
            open.push(indent);
        }
        leveled.push((depth, v));
    }
    let mut it = leveled.into_iter().peekable();
    let mut out = build_level(&mut it, 0);
    for v in &mut out {
        if !v.kind.is_section() {
            v.kind = VdevKind::Root;
        }
    }
    out
}

fn build_level(
    it: &mut std::iter::Peekable<std::vec::IntoIter<(usize, Vdev)>>,
    depth: usize,
) -> Vec<Vdev> {
    let mut out = Vec::new();
    while let Some((d, _)) = it.peek() {
        if *d < depth {
            break;
        }
        let Some((d, mut v)) = it.next() else { break };
        v.children = build_level(it, d + 1);
        out.push(v);
    }
    out
}

/// `errors:` text → number of data errors.
fn data_errors(value: &str) -> Option<u64> {
    if value.starts_with("No known data errors") {
        return Some(0);
    }
    let (n, rest) = value.split_once(' ')?;
    rest.starts_with("data error").then(|| n.parse().ok())?
}

/// Parses a scan: its first line (after `scan:`) and continuation lines.
///
/// Returns `None` for "none requested" and for a line this parser cannot classify (the text
/// is then simply not used: an unknown scan wording must not hide the pool).
fn parse_scan(head: &str, rest: &[String]) -> Option<Scan> {
    let head = head.trim();
    if head.starts_with("none requested") || head.is_empty() {
        return None;
    }
    let (kind, after) = if let Some(a) = head.strip_prefix("error scrub") {
        (ScanKind::ErrorScrub, a)
    } else if let Some(a) = head.strip_prefix("scrub") {
        (ScanKind::Scrub, a)
    } else if let Some(a) = head.strip_prefix("resilvered") {
        (ScanKind::Resilver, a)
    } else if let Some(a) = head.strip_prefix("resilver") {
        (ScanKind::Resilver, a)
    } else {
        return None;
    };
    let mut scan = Scan::new(kind, ScanState::InProgress);
    let mut after = after.trim_start();
    // dRAID sequential rebuild: "resilver (draid1:4d:11c:1s-0) in progress since …",
    // "resilvered (draid1:8d:12c:2s-0) 273M in 00:00:34 with 0 errors on …".
    if kind == ScanKind::Resilver {
        if let Some(inner) = after.strip_prefix('(') {
            if let Some((vdev, tail)) = inner.split_once(')') {
                scan.kind = ScanKind::Rebuild;
                scan.vdev = Some(vdev.to_owned());
                after = tail.trim_start();
            }
        }
    }
    let finished_resilver = head.starts_with("resilvered");
    let mut progress = String::new();
    if let Some(t) = after.strip_prefix("in progress since ") {
        scan.time = Some(t.trim().to_owned());
    } else if let Some(t) = after.strip_prefix("in progress") {
        // Solaris: "resilver in progress, 0.14% done, 0h0m to go".
        progress.push_str(t.trim_start_matches(',').trim());
    } else if let Some(t) = after.strip_prefix("paused since ") {
        scan.state = ScanState::Paused;
        scan.time = Some(t.trim().to_owned());
    } else if let Some(t) = after
        .strip_prefix("canceled on ")
        .or_else(|| after.strip_prefix("stopped after "))
    {
        scan.state = ScanState::Canceled;
        scan.time = Some(t.trim().to_owned());
    } else {
        // "repaired 0B in 06:58:02 with 0 errors on <date>" (scrub),
        // "1.14M in 0h0m with 0 errors on <date>" (after "resilvered"),
        // "completed after 0h0m with 0 errors on <date>" (Solaris).
        let body = if let Some(b) = after.strip_prefix("repaired ") {
            b
        } else if let Some(b) = after.strip_prefix("completed after ") {
            // No size; make the shape "<dur> with …".
            scan.state = ScanState::Finished;
            finished_tail(&mut scan, b);
            return Some(with_progress(scan, &progress, rest));
        } else if finished_resilver {
            after
        } else {
            return None;
        };
        scan.state = ScanState::Finished;
        let (size, tail) = body.split_once(" in ").unwrap_or((body, ""));
        scan.processed_bytes = parse_size(size);
        finished_tail(&mut scan, tail);
    }
    Some(with_progress(scan, &progress, rest))
}

/// "<duration> with <n> errors on <date>".
fn finished_tail(scan: &mut Scan, tail: &str) {
    let (dur, tail) = tail.split_once(" with ").unwrap_or((tail, ""));
    scan.duration_s = parse_duration(dur);
    let (errs, date) = tail.split_once(" errors").unwrap_or((tail, ""));
    scan.errors = errs.trim().parse().ok();
    if let Some(d) = date.trim().strip_prefix("on ") {
        scan.time = Some(d.trim().to_owned());
    }
}

fn with_progress(mut scan: Scan, inline: &str, rest: &[String]) -> Scan {
    for text in std::iter::once(inline).chain(rest.iter().map(String::as_str)) {
        // Clauses are separated by ", "; a decimal comma ("9,12T") has no space after it.
        for clause in text.split(", ") {
            progress_clause(&mut scan, clause.trim());
        }
    }
    // Before 0.8 scanning and issuing were one step: what was scanned is the progress.
    if scan.percent.is_none() {
        if let (Some(done), Some(total)) = (scan.progress_bytes(), scan.total_bytes) {
            if total > 0 {
                scan.percent = Some(done as f64 * 100.0 / total as f64);
            }
        }
    }
    scan
}

fn progress_clause(scan: &mut Scan, clause: &str) {
    let words: Vec<&str> = clause.split_ascii_whitespace().collect();
    match words.as_slice() {
        // ≤ 0.7: "146G scanned out of 1.24T at 177M/s"
        [done, "scanned", "out", "of", total, "at", rate] => {
            scan.examined_bytes = parse_size(done);
            scan.total_bytes = parse_size(total);
            scan.rate_bps = parse_rate(rate);
        }
        [done, "scanned", "out", "of", total] => {
            scan.examined_bytes = parse_size(done);
            scan.total_bytes = parse_size(total);
        }
        // 2.x: "403M / 405M scanned at 100M/s", "68.4M / 405M issued at 10.0M/s"
        [done, "/", total, "scanned", "at", rate] => {
            scan.examined_bytes = parse_size(done);
            scan.total_bytes = scan.total_bytes.or(parse_size(total));
            scan.rate_bps = scan.rate_bps.or(parse_rate(rate));
        }
        [done, "/", total, "issued", "at", rate] => {
            scan.issued_bytes = parse_size(done);
            scan.total_bytes = parse_size(total);
            scan.rate_bps = parse_rate(rate);
        }
        // 2.x with no rate (a paused scrub): "0B / 12.8T scanned, 0B / 12.8T issued"
        [done, "/", total, "scanned"] => {
            scan.examined_bytes = parse_size(done);
            scan.total_bytes = scan.total_bytes.or(parse_size(total));
        }
        [done, "/", total, "issued"] => {
            scan.issued_bytes = parse_size(done);
            scan.total_bytes = parse_size(total);
        }
        // 0.8: "461G scanned at 120M/s", "258G issued at 67.2M/s"; rebuild: "1.59T issued 6.07G/s"
        [done, "scanned", "at", rate] => {
            scan.examined_bytes = parse_size(done);
            scan.rate_bps = scan.rate_bps.or(parse_rate(rate));
        }
        [done, "issued", "at", rate] | [done, "issued", rate] => {
            scan.issued_bytes = parse_size(done);
            scan.rate_bps = parse_rate(rate);
        }
        [done, "scanned"] => scan.examined_bytes = parse_size(done),
        [done, "issued"] => scan.issued_bytes = parse_size(done),
        [total, "total"] => scan.total_bytes = parse_size(total),
        [n, "repaired" | "resilvered"] => scan.processed_bytes = parse_size(n),
        [pct, "done"] => scan.percent = parse_percent(pct),
        [.., "to", "go"] => {
            let dur = words[..words.len() - 2].join(" ");
            scan.tool_eta_s = parse_duration(&dur);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn snapshot_real_fixtures() {
        insta::glob!("../../../fixtures/zpool-status", "*.txt", |path| {
            let text = std::fs::read_to_string(path).expect("fixture is readable");
            let rendered = match parse(&text) {
                Ok(s) => super::super::render(&s),
                Err(e) => format!("error: {e}\n"),
            };
            insta::assert_snapshot!(rendered);
        });
    }

    fn one(text: &str) -> Pool {
        let mut s = parse(text).expect("parses");
        assert_eq!(s.pools.len(), 1, "{s:?}");
        s.pools.remove(0)
    }

    #[test]
    fn empty_and_no_pools() {
        assert_eq!(parse(""), Ok(ZpoolStatus::default()));
        assert_eq!(parse("no pools available\n"), Ok(ZpoolStatus::default()));
    }

    #[test]
    fn error_cases_carry_the_line() {
        let e = parse("  pool: \n").expect_err("no name");
        assert_eq!((e.line, e.reason.as_str()), (1, "pool: without a name"));

        let e = parse("hello world\n").expect_err("garbage");
        assert_eq!((e.line, e.reason.as_str()), (1, "text before any pool"));

        let text = "  pool: t\n state: ONLINE\nconfig:\n\n\tNAME STATE READ WRITE CKSUM\n\tt ONLINE 0 0 0\n\t  sda\n";
        let e = parse(text).expect_err("row without state");
        assert_eq!((e.line, e.text.as_str()), (7, "\t  sda"));
        assert_eq!(e.reason, "config row without a state");

        let text = "  pool: t\nconfig:\n\tNAME STATE READ WRITE CKSUM\n\tt ONLINE 0 x1 0\n";
        let e = parse(text).expect_err("bad counter");
        assert_eq!(
            (e.line, e.reason.as_str()),
            (4, "error counters are not numbers")
        );

        let text = "  pool: t\nconfig:\n\tNAME STATE READ WRITE CKSUM\n\tt ONLINE 0 0\n";
        let e = parse(text).expect_err("two counters");
        assert_eq!(e.reason, "fewer than three error counters");

        let text = "  pool: t\n state: ONLINE\n  stray text here\n";
        let e = parse(text).expect_err("stray");
        assert_eq!((e.line, e.reason.as_str()), (3, "line outside any field"));
    }

    #[test]
    fn suffixed_and_exact_counters() {
        let p = one("  pool: z\n state: DEGRADED\nconfig:\n  NAME STATE READ WRITE CKSUM\n  z DEGRADED 0 0 0\n    sdb FAULTED 7 1.05K 0  too many errors\n    sdc ONLINE 0 0 123456789012\n");
        let root = p.root().expect("root");
        let sdb = &root.children[0];
        assert_eq!(
            (sdb.read_errors, sdb.write_errors, sdb.note.as_deref()),
            (Some(7), Some(1075), Some("too many errors"))
        );
        assert_eq!(root.children[1].cksum_errors, Some(123_456_789_012));
    }

    #[test]
    fn unknown_keys_are_skipped_with_their_lines() {
        let p = one("  pool: t\n state: ONLINE\nremove: Removal of vdev 1 copied 3.2G in 0h1m\n\tsome continuation\nnewkey: later release\n  scan: none requested\nconfig:\n\n\tNAME STATE READ WRITE CKSUM\n\tt ONLINE 0 0 0\n\nerrors: No known data errors\n");
        assert_eq!(p.state, "ONLINE");
        assert!(p.scans.is_empty());
        assert_eq!(p.data_errors, Some(0));
    }

    #[test]
    fn scan_wordings() {
        let s = parse_scan("scrub canceled on Mon Jan  1 00:00:00 2024", &[]).expect("scan");
        assert_eq!((s.kind, s.state), (ScanKind::Scrub, ScanState::Canceled));
        let s = parse_scan("scrub paused since Mon Jan  1 00:00:00 2024", &[]).expect("scan");
        assert_eq!(s.state, ScanState::Paused);
        let s = parse_scan(
            "resilver in progress since Sat Jan 12 11:29:36 2019",
            &[
                "72.6M scanned out of 1.03T at 2.42M/s, 123h32m to go".into(),
                "72.2M resilvered, 0.01% done".into(),
            ],
        )
        .expect("scan");
        assert_eq!(s.examined_bytes, Some(76_126_618));
        assert_eq!(s.tool_eta_s, Some(444_720));
        assert_eq!(s.percent, Some(0.01));
        let s = parse_scan(
            "scrub in progress since x",
            &[
                "1.00G scanned at 1.00M/s, 512M issued at 1.00M/s, 2.00G total".into(),
                "0B repaired, 25.00% done, no estimated completion time".into(),
            ],
        )
        .expect("scan");
        assert_eq!(
            (s.issued_bytes, s.total_bytes, s.tool_eta_s),
            (Some(536_870_912), Some(2_147_483_648), None)
        );
        assert_eq!(parse_scan("none requested", &[]), None);
        assert_eq!(parse_scan("defragmenting", &[]), None);
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,400}") {
            let _ = parse(&text);
        }

        #[test]
        fn never_panics_on_status_like_lines(lines in proptest::collection::vec(
            prop_oneof![
                Just("  pool: p".to_owned()),
                Just("config:".to_owned()),
                Just("\tNAME STATE READ WRITE CKSUM".to_owned()),
                Just("  scan: resilver (draid1:4d:11c:1s-0) in progress since x".to_owned()),
                Just("errors: Permanent errors have been detected in the following files:".to_owned()),
                Just("spares".to_owned()),
                "[ \t]{0,40}[a-z0-9/.:-]{1,12}( +[A-Z]{4,8})?( +[0-9.,KM]{1,5}){0,4}( +[a-z()/ ]{0,20})?",
                "[ \t]{0,12}[0-9.,/ ]{0,30}(scanned|issued|total|to go|done|repaired)[ 0-9a-z/.,:]{0,30}",
            ],
            0..40,
        )) {
            let _ = parse(&lines.join("\n"));
        }
    }
}
