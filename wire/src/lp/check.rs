//! Validation of written line protocol, line by line, by the rules of the InfluxDB versions the
//! lines go to: how a body splits into numbered lines, whether each line parses, what storage
//! then drops, the limits on length and time, and the timestamp converted to nanoseconds.
//!
//! What a version refuses falls in two kinds, because versions answer them differently:
//!
//! * [`Kind::Syntax`] — the line does not parse (or its time is out of range): 1.x and 3.x
//!   drop that line and keep the others (a partial write, 400); 2.x refuses the whole body (400);
//! * [`Kind::Dropped`] — the line parses but storage drops it: a `time` tag, only `time` fields
//!   (1.x, 2.x), a `time` key, a repeated key or a name used as tag and field (3.x); the others
//!   are kept and the answer is 400 (1.x, 3.x) or 422 (2.x).
//!
//! The collector's own limits ([`Kind::Limit`]) drop the line and keep the others. Field type
//! conflicts need the field types seen so far, which the caller keeps.
//!
//! Line numbers count the lines of the body as InfluxDB splits them (a newline inside a quoted
//! string value or after a backslash does not end a line), starting at 1, blank and `#` comment
//! lines included.

use std::borrow::Cow;

use super::line_end::scan_line;
use super::precision::{to_ns, Precision};
use super::rules::{Backend, Backends, RESERVED_KEY};
use super::scan::skip_whitespace;
use super::view::{parse_view, parse_view_typed, FieldTypes, Parsed};

/// The limits the collector applies on top of InfluxDB's rules.
#[derive(Debug, Clone)]
pub struct LineLimits {
    /// Longest line in bytes (0 = no limit beyond the body's).
    pub max_line_bytes: usize,
    /// Nanoseconds a timestamp may lie ahead of now (0 = unlimited).
    pub max_future_ns: i64,
    /// Nanoseconds a timestamp may lie behind now (0 = unlimited).
    pub max_past_ns: i64,
}

impl LineLimits {
    /// No limit of the collector's own.
    pub const NONE: LineLimits = LineLimits {
        max_line_bytes: 0,
        max_future_ns: 0,
        max_past_ns: 0,
    };
}

/// Why a line was refused, as far as the answer to the write is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// It does not parse, or its timestamp is out of range.
    Syntax,
    /// It parses, but storage drops it.
    Dropped,
    /// A limit of the collector's own.
    Limit,
}

/// One refused line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// 1-based line number in the body.
    pub line: usize,
    pub kind: Kind,
    pub reason: String,
}

/// A line that passed.
#[derive(Debug, Clone)]
pub struct Accepted<'a> {
    /// The line as the oldest of the versions reads it.
    pub point: Parsed<'a>,
    /// The line to store: its timestamp in nanoseconds (added when the line had none), leading
    /// whitespace skipped.
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
    Rejected {
        kind: Kind,
        reason: String,
    },
}

/// The lines of a body as InfluxDB splits them, numbered from 1 (blank and comment lines
/// included), each without its newline.
pub fn lines(body: &str) -> impl Iterator<Item = (usize, &str)> {
    split(body).enumerate().map(|(i, l)| (i + 1, l))
}

/// Splitting tracks quoted strings and escapes as influxd does ([`scan_line`]); a line with no
/// double quote and no backslash before its newline ends at that newline: each line's end is
/// looked for with one search for the three bytes, and only a line where a quote or a backslash
/// comes first is split by the walk.
fn split(body: &str) -> impl Iterator<Item = &str> + '_ {
    let b = body.as_bytes();
    let mut pos = 0;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let rest = b.get(pos..).unwrap_or_default();
        let end = match memchr::memchr3(b'\n', b'"', b'\\', rest) {
            Some(i) if rest[i] == b'\n' => pos + i,
            Some(_) => scan_line(b, pos),
            None => b.len(),
        };
        let line = body.get(pos..end).unwrap_or("");
        if end >= b.len() {
            done = true;
        }
        pos = end + 1;
        Some(line)
    })
}

/// Checks one line of a body (as [`lines`] gives it) by the rules of every version in
/// `backends`, against the limits. `now_ns` is the receive time, given to a line without a
/// timestamp (truncated to the precision) so that a resend writes the same point again.
pub fn check_line<'a>(
    raw: &'a str,
    backends: Backends,
    precision: Precision,
    now_ns: i64,
    limits: &LineLimits,
) -> Checked<'a> {
    check(raw, backends, precision, now_ns, limits, None)
}

/// [`check_line`], and for an accepted line its fields (keys unescaped) and their types in
/// `fields`, as its [`Accepted::point`] gives them by [`Parsed::field_types`], gathered while
/// the line was read (`fields` says nothing of a line that is not accepted).
pub fn check_line_typed<'a>(
    raw: &'a str,
    backends: Backends,
    precision: Precision,
    now_ns: i64,
    limits: &LineLimits,
    fields: &mut FieldTypes<'a>,
) -> Checked<'a> {
    check(raw, backends, precision, now_ns, limits, Some(fields))
}

fn check<'a>(
    raw: &'a str,
    backends: Backends,
    precision: Precision,
    now_ns: i64,
    limits: &LineLimits,
    mut fields: Option<&mut FieldTypes<'a>>,
) -> Checked<'a> {
    let line = raw
        .get(skip_whitespace(raw.as_bytes(), 0)..)
        .unwrap_or_default();
    if line.is_empty() || line.starts_with('#') {
        return Checked::Skip;
    }
    if limits.max_line_bytes > 0 && line.len() > limits.max_line_bytes {
        return Checked::Rejected {
            kind: Kind::Limit,
            reason: format!(
                "line of {} bytes exceeds the limit of {}",
                line.len(),
                limits.max_line_bytes
            ),
        };
    }
    let mut point: Option<Parsed<'a>> = None;
    let mut ts_ns = None;
    for b in backends.iter() {
        // The fields are gathered for the reading that is kept: the first.
        let (p, typed) = match fields.as_deref_mut() {
            Some(f) if point.is_none() => (parse_view_typed(line, b, f), true),
            _ => (parse_view(line, b), false),
        };
        let p = match p {
            Ok(p) => p,
            Err(reason) => return syntax(line, reason),
        };
        if let Some(t) = p.timestamp() {
            match to_ns(t, precision, b) {
                Ok(ns) => ts_ns = Some(ns),
                Err(reason) => return syntax(line, reason),
            }
        }
        if let Some(reason) = dropped(&p, b, fields.as_deref().filter(|_| typed)) {
            return Checked::Rejected {
                kind: Kind::Dropped,
                reason,
            };
        }
        point.get_or_insert(p);
    }
    let Some(point) = point else {
        return Checked::Skip;
    };
    let ts_ns = ts_ns.unwrap_or_else(|| precision.truncate(now_ns));
    if let Some(reason) = out_of_window(ts_ns, now_ns, limits) {
        return Checked::Rejected {
            kind: Kind::Limit,
            reason,
        };
    }
    let text = if point.timestamp().is_some() && precision.factor_ns == 1 {
        Cow::Borrowed(line)
    } else {
        let head = line.get(..point.fields_end()).unwrap_or(line);
        Cow::Owned(format!("{head} {ts_ns}"))
    };
    let verbatim = matches!(text, Cow::Borrowed(_)) && line.len() == raw.len();
    Checked::Accepted(Accepted {
        point,
        text,
        ts_ns,
        verbatim,
    })
}

/// A line that does not parse, named as influxd names it.
fn syntax(line: &str, reason: String) -> Checked<'_> {
    Checked::Rejected {
        kind: Kind::Syntax,
        reason: format!("unable to parse '{}': {reason}", quote(line)),
    }
}

/// A line for a message: at most 256 bytes of it.
pub fn quote(line: &str) -> Cow<'_, str> {
    const MAX: usize = 256;
    if line.len() <= MAX {
        return Cow::Borrowed(line);
    }
    let mut end = MAX;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &line[..end]))
}

/// What the storage of `backend` drops from a parsed line, in its words.
/// `fields` are the line's fields and types when the caller has them already.
fn dropped(p: &Parsed<'_>, backend: Backend, fields: Option<&FieldTypes<'_>>) -> Option<String> {
    match (backend, p) {
        (Backend::V1 | Backend::V2, _) => {
            let m = || p.measurement();
            if p.tag(RESERVED_KEY).is_some() {
                return Some(format!(
                    "invalid tag key: input tag \"{RESERVED_KEY}\" on measurement \"{}\" is invalid",
                    m()
                ));
            }
            // A field named time is dropped; a line with nothing else goes with it.
            let only_time = match fields {
                Some(f) => f.iter().all(|(k, _)| k == RESERVED_KEY),
                None => p.field_types().all(|(k, _)| k == RESERVED_KEY),
            };
            if only_time {
                return Some(format!(
                    "invalid field name: input field \"{RESERVED_KEY}\" on measurement \"{}\" is invalid",
                    m()
                ));
            }
            None
        }
        (Backend::V3, Parsed::V3(p)) => {
            let m = &p.measurement;
            let keys = || {
                p.tags
                    .iter()
                    .map(|(k, _)| k)
                    .chain(p.fields.iter().map(|(k, _)| k))
            };
            if keys().any(|k| k == RESERVED_KEY) {
                return Some(format!(
                    "table {m}: \"{RESERVED_KEY}\" is the timestamp column and cannot be a tag or a field"
                ));
            }
            let mut seen: Vec<&str> = keys().map(|k| k.as_ref()).collect();
            seen.sort_unstable();
            if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
                return Some(format!(
                    "table {m}: column \"{}\" is given twice (a repeated tag or field, or a tag \
                     and a field of that name)",
                    w[0]
                ));
            }
            None
        }
        // 3.x is read by its own parser, never into a view.
        (Backend::V3, Parsed::Go(_)) => None,
    }
}

fn out_of_window(ts_ns: i64, now_ns: i64, limits: &LineLimits) -> Option<String> {
    if limits.max_future_ns > 0 && ts_ns > now_ns.saturating_add(limits.max_future_ns) {
        return Some(format!(
            "timestamp {ts_ns} is {} s in the future (limit {} s)",
            ts_ns.saturating_sub(now_ns) / 1_000_000_000,
            limits.max_future_ns / 1_000_000_000
        ));
    }
    if limits.max_past_ns > 0 && ts_ns < now_ns.saturating_sub(limits.max_past_ns) {
        return Some(format!(
            "timestamp {ts_ns} is {} s in the past (limit {} s)",
            now_ns.saturating_sub(ts_ns) / 1_000_000_000,
            limits.max_past_ns / 1_000_000_000
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: i64 = 1_700_000_000_000_000_000;
    const S: Precision = Precision {
        factor_ns: 1_000_000_000,
    };

    fn limits() -> LineLimits {
        LineLimits {
            max_line_bytes: 200,
            max_future_ns: 3600 * 1_000_000_000,
            max_past_ns: 86400 * 1_000_000_000,
        }
    }

    fn check_on(line: &str, b: Backend, p: Precision) -> Checked<'_> {
        check_line(line, Backends::one(b), p, NOW, &limits())
    }

    fn check(line: &str, p: Precision) -> Checked<'_> {
        check_on(line, Backend::V1, p)
    }

    fn rejected(c: Checked<'_>) -> (Kind, String) {
        match c {
            Checked::Rejected { kind, reason } => (kind, reason),
            other => panic!("not rejected: {other:?}"),
        }
    }

    fn text(c: Checked<'_>) -> String {
        match c {
            Checked::Accepted(a) => a.text.into_owned(),
            other => panic!("not accepted: {other:?}"),
        }
    }

    #[test]
    fn limits_and_kinds() {
        let long = format!("m v={} 1", "1".repeat(300));
        assert_eq!(rejected(check(&long, Precision::NS)).0, Kind::Limit);
        let (k, r) = rejected(check("m v=1 1", Precision::NS));
        assert_eq!(k, Kind::Limit);
        assert!(r.contains("in the past"), "{r}");
        let (k, r) = rejected(check("m v=1 1800000000", S));
        assert_eq!(k, Kind::Limit);
        assert!(r.contains("in the future"), "{r}");
        let (k, r) = rejected(check("m,host= v=1", Precision::NS));
        assert_eq!(k, Kind::Syntax);
        assert_eq!(r, "unable to parse 'm,host= v=1': missing tag value");
        let (k, r) = rejected(check("m v=1 99999999999999999", S));
        assert_eq!(k, Kind::Syntax);
        assert!(r.contains("time outside range"), "{r}");
        let (k, r) = rejected(check("m,time=1 v=1", Precision::NS));
        assert_eq!(k, Kind::Dropped);
        assert_eq!(
            r,
            "invalid tag key: input tag \"time\" on measurement \"m\" is invalid"
        );
        assert_eq!(rejected(check("m time=1", Precision::NS)).0, Kind::Dropped);
        assert!(matches!(
            check("m time=1,v=2 1700000000000000000", Precision::NS),
            Checked::Accepted(_)
        ));
        assert_eq!(
            rejected(check_on("m time=1,v=2", Backend::V3, Precision::NS)).0,
            Kind::Dropped
        );
        assert_eq!(
            rejected(check_on("m,a=1 a=2", Backend::V3, Precision::NS)).0,
            Kind::Dropped
        );
        assert!(matches!(check("  # note", S), Checked::Skip));
        assert!(matches!(check("\t", S), Checked::Skip));
        // a lone CR is no blank line to influxd
        assert_eq!(rejected(check("\r", S)).0, Kind::Syntax);
    }

    #[test]
    fn timestamps_in_nanoseconds() {
        let ms = Precision {
            factor_ns: 1_000_000,
        };
        assert_eq!(
            text(check("m v=1 1700000000123", ms)),
            "m v=1 1700000000123000000"
        );
        assert_eq!(
            text(check("m v=1 1700000000123  ", ms)),
            "m v=1 1700000000123000000"
        );
        assert_eq!(text(check("m v=1", S)), format!("m v=1 {NOW}"));
        let line = "m,t=a\\ b s=\"x y\" 1700000000000000001";
        match check(line, Precision::NS) {
            Checked::Accepted(a) => {
                assert!(a.verbatim);
                assert_eq!(a.text, line);
                assert_eq!(a.ts_ns, 1_700_000_000_000_000_001);
                assert_eq!(a.point.tag("t").as_deref(), Some("a b"));
            }
            other => panic!("{other:?}"),
        }
        match check("  m v=1 1700000000000000001", Precision::NS) {
            Checked::Accepted(a) => assert!(!a.verbatim),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_version_must_accept() {
        let v1v3 = Backends::of(&[Backend::V1, Backend::V3]);
        let c = check_line(
            "m v=.5 1700000000000000000",
            v1v3,
            Precision::NS,
            NOW,
            &limits(),
        );
        assert!(rejected(c).1.contains("unable to parse"));
        let c = check_line(
            "m v=0.5 1700000000000000000",
            v1v3,
            Precision::NS,
            NOW,
            &limits(),
        );
        assert!(matches!(c, Checked::Accepted(_)));
    }

    #[test]
    fn lines_split_like_influxd() {
        let numbered: Vec<(usize, &str)> =
            lines("a v=1\n\nb s=\"x\ny\"\nc,t=x\\\ny v=1\n").collect();
        assert_eq!(
            numbered,
            vec![
                (1, "a v=1"),
                (2, ""),
                (3, "b s=\"x\ny\""),
                (4, "c,t=x\\\ny v=1"),
                (5, "")
            ]
        );
        assert_eq!(lines("").count(), 1);
        assert_eq!(quote(&"é".repeat(200)).len(), 256 + "…".len());
    }

    proptest! {
        #[test]
        fn split_matches_the_reference(body in "[a-z =,\"\\\\\n0-9.]{0,80}") {
            let ours: Vec<&str> = split(&body).collect();
            let reference: Vec<&str> = influxdb_line_protocol::split_lines(&body).collect();
            prop_assert_eq!(ours, reference);
        }

        #[test]
        fn never_panics(body in "\\PC{0,300}") {
            for (_, l) in lines(&body) {
                for b in Backend::ALL {
                    let _ = check_line(l, Backends::one(b), S, NOW, &limits());
                }
            }
        }
    }
}
