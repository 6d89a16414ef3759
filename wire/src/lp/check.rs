//! Validation of written line protocol, line by line: how a body splits into numbered lines,
//! whether each line parses by the rules of the backend, the limits on its length and its time,
//! and its timestamp converted to nanoseconds.
//!
//! Like InfluxDB v1, a body with some bad lines is a partial write: the caller keeps the good
//! lines and names every bad line by number with its reason ([`Rejection`]). Line numbers count
//! the lines of the body as InfluxDB splits them (a newline inside a quoted string value does
//! not end a line), starting at 1, blank and `#` comment lines included.

use std::borrow::Cow;

use super::parse::{parse_line, FieldValue, Point};
use super::rules::{float_is_storable, Backend};

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

    /// Nanoseconds in one unit.
    pub fn ns_factor(self) -> i64 {
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

/// One refused line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// 1-based line number in the body.
    pub line: usize,
    pub reason: String,
}

/// A line that passed.
#[derive(Debug, Clone)]
pub struct Accepted<'a> {
    pub point: Point<'a>,
    /// The line to store: timestamp in nanoseconds (added when the line had none), surrounding
    /// whitespace trimmed.
    pub text: Cow<'a, str>,
    /// The timestamp in nanoseconds.
    pub ts_ns: i64,
    /// `text` is the line exactly as sent.
    pub verbatim: bool,
}

/// The verdict on one line of a body.
#[derive(Debug, Clone)]
pub enum Checked<'a> {
    /// Blank or `#` comment: harmless as it is, counted in the numbering, stored nowhere.
    Skip,
    Accepted(Accepted<'a>),
    Rejected(String),
}

/// The lines of a body as InfluxDB splits them, numbered from 1 (blank and comment lines
/// included), each without its newline.
pub fn lines(body: &str) -> impl Iterator<Item = (usize, &str)> {
    split(body).enumerate().map(|(i, l)| (i + 1, l))
}

/// `split_lines` walks every character to track quoted strings and escapes; a body without a
/// double quote and without a backslash before a newline splits exactly at its newlines, which
/// is much faster to find.
fn split(body: &str) -> Box<dyn Iterator<Item = &str> + '_> {
    if body.as_bytes().contains(&b'"') || body.contains("\\\n") {
        Box::new(influxdb_line_protocol::split_lines(body))
    } else {
        Box::new(body.split('\n'))
    }
}

/// Checks one line of a body (as [`lines`] gives it) by the rules of `backend`, against the
/// limits; `now_ns` is the receive time, given to a line without a timestamp so that a resend
/// writes the same point again instead of a new one.
pub fn check_line<'a>(
    raw: &'a str,
    backend: Backend,
    precision: Precision,
    now_ns: i64,
    limits: &LineLimits,
) -> Checked<'a> {
    let line = raw.trim_end_matches(['\r', ' ', '\t']).trim_start();
    if line.is_empty() || line.starts_with('#') {
        return Checked::Skip;
    }
    if line.len() > limits.max_line_bytes {
        return Checked::Rejected(format!(
            "line of {} bytes exceeds the limit of {}",
            line.len(),
            limits.max_line_bytes
        ));
    }
    let point = match parse_line(line, backend) {
        Ok(p) => p,
        Err(reason) => return Checked::Rejected(reason),
    };
    if let Some(reason) = bad_value(&point) {
        return Checked::Rejected(reason);
    }
    let ts_ns = match point.timestamp {
        Some(t) => match t.checked_mul(precision.ns_factor()) {
            Some(ns) => ns,
            None => {
                return Checked::Rejected(format!("timestamp {t} out of range for its precision"))
            }
        },
        None => now_ns,
    };
    if limits.max_future_ns > 0 && ts_ns > now_ns.saturating_add(limits.max_future_ns) {
        return Checked::Rejected(format!(
            "timestamp {ts_ns} is {} s in the future (limit {} s)",
            (ts_ns - now_ns) / 1_000_000_000,
            limits.max_future_ns / 1_000_000_000
        ));
    }
    if limits.max_past_ns > 0 && ts_ns < now_ns.saturating_sub(limits.max_past_ns) {
        return Checked::Rejected(format!(
            "timestamp {ts_ns} is {} s in the past (limit {} s)",
            now_ns.saturating_sub(ts_ns) / 1_000_000_000,
            limits.max_past_ns / 1_000_000_000
        ));
    }
    let text = match (point.timestamp, precision) {
        (Some(_), Precision::Nanoseconds) => Cow::Borrowed(line),
        (Some(_), _) => {
            // The timestamp is the last space-separated token of a line that has one.
            let head = line.rsplit_once(' ').map_or(line, |(h, _)| h);
            Cow::Owned(format!("{} {ts_ns}", head.trim_end()))
        }
        (None, _) => Cow::Owned(format!("{line} {ts_ns}")),
    };
    let verbatim = matches!(text, Cow::Borrowed(_)) && line.len() == raw.len();
    Checked::Accepted(Accepted {
        point,
        text,
        ts_ns,
        verbatim,
    })
}

/// Values InfluxDB refuses that the parser lets through.
fn bad_value(p: &Point<'_>) -> Option<String> {
    for (k, v) in &p.fields {
        if let FieldValue::Float(f) = v {
            if !float_is_storable(*f) {
                return Some(format!("field {k:?} is not a finite number"));
            }
        }
    }
    for (k, v) in &p.tags {
        if v.is_empty() {
            return Some(format!("tag {k:?} has an empty value"));
        }
    }
    None
}

#[cfg(test)]
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

    fn check(line: &str, p: Precision) -> Checked<'_> {
        check_line(line, Backend::V1, p, NOW, &limits())
    }

    fn reason(c: Checked<'_>) -> String {
        match c {
            Checked::Rejected(r) => r,
            other => panic!("accepted: {other:?}"),
        }
    }

    fn text(c: Checked<'_>) -> String {
        match c {
            Checked::Accepted(a) => a.text.into_owned(),
            other => panic!("not accepted: {other:?}"),
        }
    }

    #[test]
    fn limits_and_values() {
        let long = format!("m v={} 1", "1".repeat(300));
        assert!(reason(check(&long, Precision::Nanoseconds)).contains("exceeds the limit"));
        assert!(reason(check("m v=1 1", Precision::Nanoseconds)).contains("in the past"));
        assert!(!reason(check("m,host= v=1", Precision::Nanoseconds)).is_empty());
        assert!(!reason(check("m v=NaN", Precision::Nanoseconds)).is_empty());
        assert!(
            reason(check("m v=1 99999999999999999", Precision::Seconds)).contains("out of range")
        );
        // hours overflow i64 nanoseconds
        assert!(reason(check("m v=1 9223372036854775", Precision::Hours)).contains("out of range"));
        assert!(reason(check("m v=1 1800000000", Precision::Seconds)).contains("in the future"));
        assert!(reason(check("not line protocol", Precision::Seconds)).contains("unable to parse"));
        assert!(matches!(
            check("  # note", Precision::Seconds),
            Checked::Skip
        ));
        assert!(matches!(check(" \r", Precision::Seconds), Checked::Skip));
    }

    #[test]
    fn precisions_convert_to_ns_and_ns_lines_pass_unchanged() {
        assert_eq!(
            text(check("m v=1 1700000000123", Precision::Milliseconds)),
            "m v=1 1700000000123000000"
        );
        assert_eq!(
            text(check("m v=1", Precision::Seconds)),
            format!("m v=1 {NOW}")
        );
        let line = "m,t=a\\ b s=\"x y\" 1700000000000000001";
        match check(line, Precision::Nanoseconds) {
            Checked::Accepted(a) => {
                assert!(a.verbatim);
                assert_eq!(a.text, line);
                assert_eq!(a.ts_ns, 1_700_000_000_000_000_001);
                assert_eq!(a.point.tag("t"), Some("a b"));
            }
            other => panic!("{other:?}"),
        }
        match check("m v=1 1700000000000000001\r", Precision::Nanoseconds) {
            Checked::Accepted(a) => assert!(!a.verbatim),
            other => panic!("{other:?}"),
        }
        assert_eq!(Precision::parse("u"), Some(Precision::Microseconds));
        assert_eq!(Precision::parse("x"), None);
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
            let fast: Vec<&str> = split(body).collect();
            let reference: Vec<&str> = influxdb_line_protocol::split_lines(body).collect();
            assert_eq!(fast, reference, "{body:?}");
        }
        let numbered: Vec<(usize, &str)> = lines("a v=1\n\nb s=\"x\ny\"\n").collect();
        assert_eq!(
            numbered,
            vec![(1, "a v=1"), (2, ""), (3, "b s=\"x\ny\""), (4, "")]
        );
    }

    proptest! {
        #[test]
        fn fast_split_matches_reference_on_any_input(body in "[a-z =,\"\\\\\n0-9.]{0,80}") {
            let fast: Vec<&str> = split(&body).collect();
            let reference: Vec<&str> = influxdb_line_protocol::split_lines(&body).collect();
            prop_assert_eq!(fast, reference);
        }

        #[test]
        fn never_panics(body in "\\PC{0,300}") {
            for (_, l) in lines(&body) {
                for b in Backend::ALL {
                    let _ = check_line(l, b, Precision::Seconds, NOW, &limits());
                }
            }
        }
    }
}
