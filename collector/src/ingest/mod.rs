//! Validation of a write body: every line parsed with `influxdb-line-protocol`, checked against
//! the limits and the learned field types, its timestamp converted to nanoseconds.
//!
//! Like InfluxDB v1, a body with some bad lines is a partial write: the good lines are kept and
//! the answer names every bad line by number with its reason. Line numbers count the lines of
//! the body as InfluxDB splits them (a newline inside a quoted string value does not end a line),
//! starting at 1, blank and `#` comment lines included.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use influxdb_line_protocol::{parse_lines, split_lines, FieldValue, ParsedLine};
use serde::{Deserialize, Serialize};

/// Timestamp precision of a write request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    Nanoseconds,
    Microseconds,
    Milliseconds,
    Seconds,
    Minutes,
    Hours,
}

impl Precision {
    /// Parses the `precision` query parameter (v1 and v2 spellings).
    pub fn parse(s: &str) -> Option<Precision> {
        Some(match s {
            "" | "n" | "ns" => Precision::Nanoseconds,
            "u" | "us" | "µ" | "µs" => Precision::Microseconds,
            "ms" => Precision::Milliseconds,
            "s" => Precision::Seconds,
            "m" => Precision::Minutes,
            "h" => Precision::Hours,
            _ => return None,
        })
    }

    fn ns_factor(self) -> i64 {
        match self {
            Precision::Nanoseconds => 1,
            Precision::Microseconds => 1_000,
            Precision::Milliseconds => 1_000_000,
            Precision::Seconds => 1_000_000_000,
            Precision::Minutes => 60_000_000_000,
            Precision::Hours => 3_600_000_000_000,
        }
    }
}

/// The limits validation applies.
#[derive(Debug, Clone)]
pub struct LineLimits {
    pub max_line_bytes: usize,
    /// Nanoseconds a timestamp may lie ahead of now (0 = unlimited).
    pub max_future_ns: i64,
    /// Nanoseconds a timestamp may lie behind now (0 = unlimited).
    pub max_past_ns: i64,
}

/// The InfluxDB type of a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    Float,
    Integer,
    Unsigned,
    String,
    Boolean,
}

impl FieldType {
    fn of(v: &FieldValue<'_>) -> FieldType {
        match v {
            FieldValue::F64(_) => FieldType::Float,
            FieldValue::I64(_) => FieldType::Integer,
            FieldValue::U64(_) => FieldType::Unsigned,
            FieldValue::String(_) => FieldType::String,
            FieldValue::Boolean(_) => FieldType::Boolean,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FieldType::Float => "float",
            FieldType::Integer => "integer",
            FieldType::Unsigned => "unsigned",
            FieldType::String => "string",
            FieldType::Boolean => "boolean",
        }
    }
}

/// Errors saving or loading the field-type map.
#[derive(Debug, thiserror::Error)]
pub enum TypeMapError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
}

type Types = HashMap<String, HashMap<String, FieldType>>;

/// Field types per measurement, learned from accepted lines and kept in `types.json` of the
/// queue directory. A new field's type is saved (fsync'd) before the line that introduced it is
/// acknowledged, so after a restart the collector still refuses what InfluxDB would refuse.
#[derive(Debug)]
pub struct TypeMap {
    path: Option<PathBuf>,
    types: RwLock<Types>,
    max_fields: usize,
}

impl TypeMap {
    /// An in-memory map (tests).
    pub fn in_memory() -> TypeMap {
        TypeMap {
            path: None,
            types: RwLock::new(HashMap::new()),
            max_fields: 1_000_000,
        }
    }

    /// Loads `types.json` from `dir` (empty when absent).
    pub fn load(dir: &Path) -> Result<TypeMap, TypeMapError> {
        let path = dir.join("types.json");
        let types = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| TypeMapError::Json {
                path: path.clone(),
                source,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => HashMap::new(),
            Err(source) => return Err(TypeMapError::Io { path, source }),
        };
        Ok(TypeMap {
            path: Some(path),
            types: RwLock::new(types),
            // A client inventing field names without end must not grow memory without end;
            // beyond this, new fields pass unchecked and InfluxDB's own check applies.
            max_fields: 1_000_000,
        })
    }

    pub fn get(&self, measurement: &str, field: &str) -> Option<FieldType> {
        let t = self.types.read().unwrap_or_else(|e| e.into_inner());
        t.get(measurement).and_then(|m| m.get(field)).copied()
    }

    fn save(&self, types: &Types) -> Result<(), TypeMapError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let io = |source| TypeMapError::Io {
            path: path.clone(),
            source,
        };
        let tmp = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec(types).map_err(|source| TypeMapError::Json {
            path: path.clone(),
            source,
        })?;
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp).map_err(io)?;
            f.write_all(&bytes).map_err(io)?;
            f.sync_data().map_err(io)?;
        }
        std::fs::rename(&tmp, path).map_err(io)?;
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io)?;
        }
        Ok(())
    }
}

/// One rejected line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// 1-based line number in the body.
    pub line: usize,
    pub reason: String,
}

/// The result of validating a body.
#[derive(Debug, Default)]
pub struct Validated {
    /// Every line was accepted exactly as sent (no rejection, no timestamp rewritten, nothing
    /// trimmed): the body itself is what goes into the queue, without a copy, and `accepted`
    /// stays empty.
    pub verbatim: bool,
    /// Accepted lines, each ending in `\n`, timestamps in nanoseconds (empty when `verbatim`).
    pub accepted: String,
    pub accepted_lines: u64,
    pub rejected: Vec<Rejection>,
    /// Lines per value of the host tag among the accepted lines.
    pub hosts: HashMap<String, u64>,
}

/// Validates `body` against the limits and the type map (learning new field types).
///
/// `now_ns` is the receive time: lines without a timestamp get it, so a resend of the same
/// queue record writes the same points again instead of new ones.
pub fn validate(
    body: &str,
    precision: Precision,
    now_ns: i64,
    limits: &LineLimits,
    types: &TypeMap,
    host_tag: &str,
) -> Result<Validated, TypeMapError> {
    let mut out = Validated {
        verbatim: true,
        ..Validated::default()
    };
    // Accepted lines in body order; joined into `accepted` only when the body cannot be kept.
    let mut kept: Vec<std::borrow::Cow<'_, str>> = Vec::new();
    // Lines with a field the map does not know yet: typed under the write lock afterwards.
    let mut pending: Vec<(usize, Option<String>, &str)> = Vec::new();
    // One read lock for the whole body: the common case (every field known) never writes.
    let known = types.types.read().unwrap_or_else(|e| e.into_inner());
    for (i, raw) in lines_of(body).enumerate() {
        let n = i + 1;
        let line = raw.trim_end_matches(['\r', ' ', '\t']).trim_start();
        if line.is_empty() || line.starts_with('#') {
            // Blank and comment lines are harmless as they are: outputs skip them.
            continue;
        }
        if line.len() != raw.len() {
            out.verbatim = false;
        }
        if line.len() > limits.max_line_bytes {
            out.rejected.push(Rejection {
                line: n,
                reason: format!(
                    "line of {} bytes exceeds the limit of {}",
                    line.len(),
                    limits.max_line_bytes
                ),
            });
            continue;
        }
        let parsed = match parse_lines(line).next() {
            Some(Ok(p)) => p,
            Some(Err(e)) => {
                out.rejected.push(Rejection {
                    line: n,
                    reason: format!("unable to parse: {e}"),
                });
                continue;
            }
            None => continue,
        };
        if let Some(reason) = bad_value(&parsed) {
            out.rejected.push(Rejection { line: n, reason });
            continue;
        }
        let ts = match parsed.timestamp {
            Some(t) => match t.checked_mul(precision.ns_factor()) {
                Some(ns) => ns,
                None => {
                    out.rejected.push(Rejection {
                        line: n,
                        reason: format!("timestamp {t} out of range for its precision"),
                    });
                    continue;
                }
            },
            None => now_ns,
        };
        if limits.max_future_ns > 0 && ts > now_ns.saturating_add(limits.max_future_ns) {
            out.rejected.push(Rejection {
                line: n,
                reason: format!(
                    "timestamp {ts} is {} s in the future (limit {} s)",
                    (ts - now_ns) / 1_000_000_000,
                    limits.max_future_ns / 1_000_000_000
                ),
            });
            continue;
        }
        if limits.max_past_ns > 0 && ts < now_ns.saturating_sub(limits.max_past_ns) {
            out.rejected.push(Rejection {
                line: n,
                reason: format!(
                    "timestamp {ts} is {} s in the past (limit {} s)",
                    now_ns.saturating_sub(ts) / 1_000_000_000,
                    limits.max_past_ns / 1_000_000_000
                ),
            });
            continue;
        }
        let rewritten = match (parsed.timestamp, precision) {
            (Some(_), Precision::Nanoseconds) => None,
            (Some(_), _) => {
                // The timestamp is the last space-separated token of a line that has one.
                let head = line.rsplit_once(' ').map_or(line, |(h, _)| h);
                Some(format!("{} {ts}", head.trim_end()))
            }
            (None, _) => Some(format!("{line} {ts}")),
        };
        if rewritten.is_some() {
            out.verbatim = false;
        }
        match type_check(&known, &parsed) {
            TypeCheck::Known => {
                out.accept(&parsed, host_tag);
                kept.push(
                    rewritten.map_or(std::borrow::Cow::Borrowed(line), std::borrow::Cow::Owned),
                );
            }
            TypeCheck::Conflict(field, was) => {
                out.rejected.push(conflict(n, &parsed, &field, was));
            }
            TypeCheck::New => pending.push((n, rewritten, line)),
        }
    }
    drop(known);
    if !pending.is_empty() {
        learn(pending, types, &mut out, &mut kept, host_tag)?;
    }
    if !out.rejected.is_empty() {
        out.verbatim = false;
    }
    if !out.verbatim {
        out.accepted.reserve(kept.iter().map(|l| l.len() + 1).sum());
        for l in &kept {
            out.accepted.push_str(l);
            out.accepted.push('\n');
        }
    }
    out.rejected.sort_by_key(|r| r.line);
    Ok(out)
}

impl Validated {
    /// The accepted text: `body` itself when it was kept verbatim.
    pub fn accepted_text<'a>(&'a self, body: &'a str) -> &'a str {
        if self.verbatim {
            body
        } else {
            &self.accepted
        }
    }

    fn accept(&mut self, parsed: &ParsedLine<'_>, host_tag: &str) {
        self.accepted_lines += 1;
        if let Some(h) = parsed.tag_value(host_tag) {
            match self.hosts.get_mut(h.as_str()) {
                Some(c) => *c += 1,
                None => {
                    self.hosts.insert(h.as_str().to_string(), 1);
                }
            }
        }
    }
}

enum TypeCheck {
    Known,
    /// (field, type already known)
    Conflict(String, FieldType),
    New,
}

fn type_check(known: &Types, p: &ParsedLine<'_>) -> TypeCheck {
    let m = known.get(p.series.measurement.as_str());
    let mut all_known = true;
    for (k, v) in &p.field_set {
        match m.and_then(|m| m.get(k.as_str())) {
            Some(t) if *t != FieldType::of(v) => {
                return TypeCheck::Conflict(k.as_str().to_string(), *t)
            }
            Some(_) => {}
            None => all_known = false,
        }
    }
    if all_known {
        TypeCheck::Known
    } else {
        TypeCheck::New
    }
}

/// Types the lines with new fields under the write lock, in body order, and saves the map
/// before any of them can be acknowledged.
fn learn<'a>(
    pending: Vec<(usize, Option<String>, &'a str)>,
    types: &TypeMap,
    out: &mut Validated,
    kept: &mut Vec<std::borrow::Cow<'a, str>>,
    host_tag: &str,
) -> Result<(), TypeMapError> {
    let mut t = types.types.write().unwrap_or_else(|e| e.into_inner());
    let mut total: usize = t.values().map(|m| m.len()).sum();
    let mut learned = false;
    for (n, rewritten, line) in pending {
        let Some(Ok(p)) = parse_lines(line).next() else {
            continue;
        };
        // Another request may have taught the map these fields meanwhile.
        if let TypeCheck::Conflict(field, was) = type_check(&t, &p) {
            out.rejected.push(conflict(n, &p, &field, was));
            continue;
        }
        let m = t
            .entry(p.series.measurement.as_str().to_string())
            .or_default();
        for (k, v) in &p.field_set {
            if !m.contains_key(k.as_str()) && total < types.max_fields {
                m.insert(k.as_str().to_string(), FieldType::of(v));
                total += 1;
                learned = true;
            }
        }
        out.accept(&p, host_tag);
        kept.push(rewritten.map_or(std::borrow::Cow::Borrowed(line), std::borrow::Cow::Owned));
    }
    if learned {
        types.save(&t)?;
    }
    Ok(())
}

/// The lines of a body as InfluxDB splits them. `split_lines` walks every character to track
/// quoted strings and escapes; a body without a double quote and without a backslash before a
/// newline splits exactly at its newlines, which is much faster to find.
fn lines_of(body: &str) -> Box<dyn Iterator<Item = &str> + '_> {
    if body.as_bytes().contains(&b'"') || body.contains("\\\n") {
        Box::new(split_lines(body))
    } else {
        Box::new(body.split('\n'))
    }
}

/// Values InfluxDB refuses that the parser lets through.
fn bad_value(p: &ParsedLine<'_>) -> Option<String> {
    for (k, v) in &p.field_set {
        if let FieldValue::F64(f) = v {
            if !f.is_finite() {
                return Some(format!("field {:?} is not a finite number", k.as_str()));
            }
        }
    }
    if let Some(tags) = &p.series.tag_set {
        for (k, v) in tags {
            if v.as_str().is_empty() {
                return Some(format!("tag {:?} has an empty value", k.as_str()));
            }
        }
    }
    None
}

fn conflict(n: usize, p: &ParsedLine<'_>, field: &str, known: FieldType) -> Rejection {
    let now = p
        .field_value(field)
        .map(FieldType::of)
        .map_or("other", FieldType::name);
    Rejection {
        line: n,
        reason: format!(
            "field type conflict: field {field:?} of measurement {:?} is {now}, already {}",
            p.series.measurement.as_str(),
            known.name()
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: i64 = 1_700_000_000_000_000_000;

    fn limits() -> LineLimits {
        LineLimits {
            max_line_bytes: 200,
            max_future_ns: 3600 * 1_000_000_000,
            max_past_ns: 86400 * 1_000_000_000,
        }
    }

    fn v(body: &str, p: Precision, t: &TypeMap) -> Validated {
        validate(body, p, NOW, &limits(), t, "host").unwrap()
    }

    #[test]
    fn good_lines_kept_bad_lines_named() {
        let t = TypeMap::in_memory();
        let body = "disk,host=a util_pct=1.5 1700000000\n\
                    this is not line protocol\n\
                    \n\
                    # a comment\n\
                    disk,host=b util_pct=2 1700000001\n\
                    disk,host=a util_pct=3\n\
                    net,host=a rx=1i 1800000000\n";
        let out = v(body, Precision::Seconds, &t);
        assert_eq!(out.accepted_lines, 3);
        assert_eq!(
            out.accepted,
            "disk,host=a util_pct=1.5 1700000000000000000\n\
             disk,host=b util_pct=2 1700000001000000000\n\
             disk,host=a util_pct=3 1700000000000000000\n"
        );
        let lines: Vec<usize> = out.rejected.iter().map(|r| r.line).collect();
        assert_eq!(lines, vec![2, 7]);
        assert!(
            out.rejected[0].reason.starts_with("unable to parse"),
            "{:?}",
            out.rejected
        );
        assert!(
            out.rejected[1].reason.contains("in the future"),
            "{:?}",
            out.rejected
        );
        assert_eq!(out.hosts.get("a"), Some(&2));
        assert_eq!(out.hosts.get("b"), Some(&1));
    }

    #[test]
    fn type_conflicts_within_and_across_requests() {
        let t = TypeMap::in_memory();
        let out = v(
            "m,host=a f=1i 1700000000\nm,host=a f=2.5 1700000000\n",
            Precision::Seconds,
            &t,
        );
        assert_eq!(out.accepted_lines, 1);
        assert_eq!(out.rejected.len(), 1);
        assert_eq!(out.rejected[0].line, 2);
        assert!(out.rejected[0].reason.contains("is float, already integer"));
        assert_eq!(t.get("m", "f"), Some(FieldType::Integer));
        let out = v(
            "m,host=a f=\"x\" 1700000000\nm,host=a f=3i,g=true 1700000000\n",
            Precision::Seconds,
            &t,
        );
        assert_eq!(out.accepted_lines, 1);
        assert_eq!(out.rejected[0].line, 1);
        assert_eq!(t.get("m", "g"), Some(FieldType::Boolean));
    }

    #[test]
    fn limits_and_values() {
        let t = TypeMap::in_memory();
        let long = format!("m v={} 1", "1".repeat(300));
        let body = format!("{long}\nm v=1 1\nm,host= v=1\nm v=NaN\nm v=1 99999999999999999\n");
        let out = v(&body, Precision::Nanoseconds, &t);
        assert_eq!(out.accepted_lines, 0);
        let lines: Vec<usize> = out.rejected.iter().map(|r| r.line).collect();
        assert_eq!(lines, vec![1, 2, 3, 4, 5], "{:?}", out.rejected);
        assert!(out.rejected[0].reason.contains("exceeds the limit"));
        assert!(out.rejected[1].reason.contains("in the past"));
        // hours overflow i64 nanoseconds
        let out = v("m v=1 9223372036854775\n", Precision::Hours, &t);
        assert!(out.rejected[0].reason.contains("out of range"));
    }

    #[test]
    fn precisions_convert_to_ns_and_ns_lines_pass_unchanged() {
        let t = TypeMap::in_memory();
        let ms = v("m v=1 1700000000123\n", Precision::Milliseconds, &t);
        assert_eq!(ms.accepted, "m v=1 1700000000123000000\n");
        let body = "m,t=a\\ b s=\"x y\" 1700000000000000001\n";
        let ns = v(body, Precision::Nanoseconds, &t);
        assert!(ns.verbatim);
        assert_eq!(ns.accepted, "");
        assert_eq!(ns.accepted_text(body), body);
        assert_eq!(Precision::parse("u"), Some(Precision::Microseconds));
        assert_eq!(Precision::parse("x"), None);
    }

    #[test]
    fn types_persist_across_load() {
        let dir = tempfile::tempdir().unwrap();
        let t = TypeMap::load(dir.path()).unwrap();
        v("m f=1i 1700000000\n", Precision::Seconds, &t);
        let t2 = TypeMap::load(dir.path()).unwrap();
        assert_eq!(t2.get("m", "f"), Some(FieldType::Integer));
        let out = v("m f=1 1700000000\n", Precision::Seconds, &t2);
        assert_eq!(out.rejected.len(), 1);
    }

    #[test]
    fn fast_line_split_matches_the_reference() {
        for body in [
            "a v=1\nb v=2\n\nc v=3",
            "a,t=x\\ y v=1\n",
            "a s=\"x\ny\" 1\nb v=1\n",
            "a,t=x\\\nv=1\n",
            "",
            "\n\n",
        ] {
            let fast: Vec<&str> = lines_of(body).collect();
            let reference: Vec<&str> = split_lines(body).collect();
            assert_eq!(fast, reference, "{body:?}");
        }
    }

    proptest! {
        #[test]
        fn fast_split_matches_reference_on_any_input(body in "[a-z =,\"\\\\\n0-9.]{0,80}") {
            let fast: Vec<&str> = lines_of(&body).collect();
            let reference: Vec<&str> = split_lines(&body).collect();
            prop_assert_eq!(fast, reference);
        }

        #[test]
        fn never_panics_and_accepted_lines_reparse(body in "\\PC{0,300}") {
            let t = TypeMap::in_memory();
            let out = validate(&body, Precision::Seconds, NOW, &limits(), &t, "host").unwrap();
            let text = out.accepted_text(&body);
            let n = parse_lines(text)
                .filter(|r| r.is_ok())
                .count() as u64;
            prop_assert_eq!(n, out.accepted_lines);
        }
    }
}
