//! Ingest: a write body from bytes to the lines that go into the queue.
//!
//! * [`decode`] — gzip inflation within a size limit, UTF-8, the count of lines offered;
//! * [`validate`] — every line checked by the shared line-protocol rules
//!   (`storwatch_wire::lp::check`), then against the learned field types ([`types`]);
//!   accepted lines get nanosecond timestamps, refused ones are named by line number.

pub mod decode;
pub mod types;

use std::borrow::Cow;
use std::collections::HashMap;

use storwatch_wire::lp::{check_line, lines, Accepted, Backend, Checked, Point};
pub use storwatch_wire::lp::{FieldType, LineLimits, Precision, Rejection};

pub use self::decode::{decode, offered_lines, DecodeError};
use self::types::{Stored, Types};
pub use self::types::{TypeMap, TypeMapError};

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
    let mut kept: Vec<Cow<'_, str>> = Vec::new();
    // Lines with a field the map does not know yet: typed under the write lock afterwards.
    let mut pending: Vec<(usize, Accepted<'_>)> = Vec::new();
    // One read lock for the whole body: the common case (every field known) never writes.
    let known = types.read();
    for (n, raw) in lines(body) {
        let a = match check_line(raw, Backend::V1, precision, now_ns, limits) {
            Checked::Skip => continue,
            Checked::Rejected(reason) => {
                out.rejected.push(Rejection { line: n, reason });
                continue;
            }
            Checked::Accepted(a) => a,
        };
        if !a.verbatim {
            out.verbatim = false;
        }
        match type_check(&known, &a.point) {
            TypeCheck::Known => {
                out.accept(&a.point, host_tag);
                kept.push(a.text);
            }
            TypeCheck::Conflict(field, was) => {
                out.rejected.push(conflict(n, &a.point, &field, was));
            }
            TypeCheck::New => pending.push((n, a)),
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

    fn accept(&mut self, p: &Point<'_>, host_tag: &str) {
        self.accepted_lines += 1;
        if let Some(h) = p.tag(host_tag) {
            match self.hosts.get_mut(h) {
                Some(c) => *c += 1,
                None => {
                    self.hosts.insert(h.to_string(), 1);
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

fn type_check(known: &Types, p: &Point<'_>) -> TypeCheck {
    let m = known.get(p.measurement.as_ref());
    let mut all_known = true;
    for (k, v) in &p.fields {
        match m.and_then(|m| m.get(k.as_ref())) {
            Some(t) if t.0 != v.field_type() => return TypeCheck::Conflict(k.to_string(), t.0),
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
    pending: Vec<(usize, Accepted<'a>)>,
    types: &TypeMap,
    out: &mut Validated,
    kept: &mut Vec<Cow<'a, str>>,
    host_tag: &str,
) -> Result<(), TypeMapError> {
    let mut t = types.write();
    let mut total: usize = t.values().map(|m| m.len()).sum();
    let mut learned = false;
    for (n, a) in pending {
        let p = &a.point;
        // Another request may have taught the map these fields meanwhile.
        if let TypeCheck::Conflict(field, was) = type_check(&t, p) {
            out.rejected.push(conflict(n, p, &field, was));
            continue;
        }
        let m = t.entry(p.measurement.to_string()).or_default();
        for (k, v) in &p.fields {
            if !m.contains_key(k.as_ref()) && total < types.max_fields {
                m.insert(k.to_string(), Stored(v.field_type()));
                total += 1;
                learned = true;
            }
        }
        out.accept(p, host_tag);
        kept.push(a.text);
    }
    if learned {
        types.save(&t)?;
    }
    Ok(())
}

fn conflict(n: usize, p: &Point<'_>, field: &str, known: FieldType) -> Rejection {
    let now = p.field(field).map_or("other", |v| v.field_type().name());
    Rejection {
        line: n,
        reason: format!(
            "field type conflict: field {field:?} of measurement {:?} is {now}, already {}",
            p.measurement,
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

    /// 200-byte lines, 1 h ahead, 1 day behind.
    const LIMITS: LineLimits = LineLimits {
        max_line_bytes: 200,
        max_future_ns: 3_600_000_000_000,
        max_past_ns: 86_400_000_000_000,
    };

    fn v(body: &str, p: Precision, t: &TypeMap) -> Validated {
        validate(body, p, NOW, &LIMITS, t, "host").unwrap()
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
    fn every_bad_line_is_named_and_nothing_kept_of_it() {
        let t = TypeMap::in_memory();
        let long = format!("m v={} 1", "1".repeat(300));
        let body = format!("{long}\nm v=1 1\nm,host= v=1\nm v=NaN\nm v=1 99999999999999999\n");
        let out = v(&body, Precision::Nanoseconds, &t);
        assert_eq!(out.accepted_lines, 0);
        let lines: Vec<usize> = out.rejected.iter().map(|r| r.line).collect();
        assert_eq!(lines, vec![1, 2, 3, 4, 5], "{:?}", out.rejected);
        assert!(out.rejected[0].reason.contains("exceeds the limit"));
        assert!(out.rejected[1].reason.contains("in the past"));
        assert!(out.accepted.is_empty());
    }

    #[test]
    fn a_body_accepted_as_sent_is_kept_verbatim() {
        let t = TypeMap::in_memory();
        let ms = v("m v=1 1700000000123\n", Precision::Milliseconds, &t);
        assert_eq!(ms.accepted, "m v=1 1700000000123000000\n");
        let body = "m,t=a\\ b s=\"x y\" 1700000000000000001\n";
        let ns = v(body, Precision::Nanoseconds, &t);
        assert!(ns.verbatim);
        assert_eq!(ns.accepted, "");
        assert_eq!(ns.accepted_text(body), body);
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

    proptest! {
        #[test]
        fn never_panics_and_accepted_lines_reparse(body in "\\PC{0,300}") {
            let t = TypeMap::in_memory();
            let out = validate(&body, Precision::Seconds, NOW, &LIMITS, &t, "host").unwrap();
            let text = out.accepted_text(&body);
            let n = lines(text)
                .filter(|(_, l)| matches!(
                    check_line(l, Backend::V1, Precision::Nanoseconds, NOW, &LineLimits {
                        max_line_bytes: usize::MAX, max_future_ns: 0, max_past_ns: 0,
                    }),
                    Checked::Accepted(_)
                ))
                .count() as u64;
            prop_assert_eq!(n, out.accepted_lines);
        }
    }
}
