//! Ingest: a write body from bytes to the lines that go into the queue.
//!
//! * [`decode`] — gzip inflation within a size limit, UTF-8, the count of lines offered;
//! * [`validate`] — every line checked by the rules of the InfluxDB versions of the outputs
//!   (`storwatch_wire::lp::check`), then against the learned field types ([`types`]);
//!   accepted lines get nanosecond timestamps, refused ones are named by line number.
//!
//! Field types follow InfluxDB: a field keeps the type it was first written with, and a line
//! giving it another is dropped. A line that writes the same new field twice with two types is
//! dropped too, but its first type stays learned (1.x creates the field before it drops the
//! point). Fields named `time` are not typed: 1.x and 2.x drop them, 3.x refuses the line.

pub mod decode;
pub mod types;

use crate::hash::FxMap;
use std::borrow::Cow;

use storwatch_wire::lp::rules::RESERVED_KEY;
use storwatch_wire::lp::{
    check_line_typed, lines, Accepted, Backends, Checked, FieldTypes, Kind, Parsed,
};
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
    /// Nothing was kept because a line does not parse and an output's version (2.x) refuses a
    /// whole body for that; `rejected` names the lines that do not parse.
    pub whole_body_refused: bool,
    /// Lines per value of the host tag among the accepted lines.
    pub(crate) hosts: FxMap<String, u64>,
}

/// How a write is read: the versions of the outputs, the request's precision, the receive time
/// and the collector's limits.
#[derive(Debug, Clone)]
pub struct Rules<'a> {
    pub backends: Backends,
    pub precision: Precision,
    /// The receive time: lines without a timestamp get it (truncated to the precision), so a
    /// resend of the same queue record writes the same points again instead of new ones.
    pub now_ns: i64,
    pub limits: &'a LineLimits,
    /// Tag naming the sending host (counted for the heartbeat).
    pub host_tag: &'a str,
}

/// Validates `body` by `rules` and against the type map (learning new field types).
///
/// Each line is read once ([`check_line_typed`] gives its fields' keys and types as it reads
/// it) and type-checked at once under one read lock of the map. A line whose measurement and
/// fields (keys and types, in order) are those of the line before it that was found known is
/// known too, without a look in the map: the lines of one sender mostly repeat one shape.
pub fn validate(body: &str, rules: &Rules<'_>, types: &TypeMap) -> Result<Validated, TypeMapError> {
    let mut out = Validated {
        verbatim: true,
        ..Validated::default()
    };
    // Accepted lines in body order (those with new fields after them, once learned); joined
    // into `accepted` only when the body cannot be kept.
    let mut kept: Vec<Cow<'_, str>> = Vec::new();
    // Lines with a field the map does not know yet: typed under the write lock afterwards.
    let mut pending: Vec<(usize, Accepted<'_>)> = Vec::new();
    // The fields of this line, and of the last line found known (with its measurement).
    let mut fields: FieldTypes<'_> = Vec::new();
    let mut shape: FieldTypes<'_> = Vec::new();
    let mut shape_of: Option<Cow<'_, str>> = None;
    // One read lock for the whole body: the common case (every field known) never writes.
    let known = types.read();
    for (n, raw) in lines(body) {
        let a = match check_line_typed(
            raw,
            rules.backends,
            rules.precision,
            rules.now_ns,
            rules.limits,
            &mut fields,
        ) {
            Checked::Skip => continue,
            Checked::Rejected { kind, reason } => {
                out.rejected.push(Rejection {
                    line: n,
                    kind,
                    reason,
                });
                continue;
            }
            Checked::Accepted(a) => a,
        };
        if !a.verbatim {
            out.verbatim = false;
        }
        let measurement = a.point.measurement();
        if shape_of.as_deref() == Some(measurement.as_ref()) && shape == fields {
            out.accept(&a.point, rules.host_tag);
            kept.push(a.text);
            continue;
        }
        match type_check(&known, &measurement, &fields) {
            TypeCheck::Known => {
                out.accept(&a.point, rules.host_tag);
                kept.push(a.text);
                shape_of = Some(measurement);
                std::mem::swap(&mut shape, &mut fields);
            }
            TypeCheck::Conflict(field, was) => {
                out.rejected.push(conflict(n, &a.point, &field, was));
            }
            TypeCheck::New => pending.push((n, a)),
        }
    }
    drop(known);
    if rules.backends.syntax_error_refuses_body()
        && out.rejected.iter().any(|r| r.kind == Kind::Syntax)
    {
        // Nothing is kept and nothing is learned: 2.x stops at parsing.
        out.rejected.retain(|r| r.kind == Kind::Syntax);
        out.whole_body_refused = true;
        out.verbatim = false;
        out.accepted_lines = 0;
        out.hosts.clear();
        return Ok(out);
    }
    if !pending.is_empty() {
        learn(pending, types, &mut out, &mut kept, rules.host_tag)?;
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

    fn accept(&mut self, p: &Parsed<'_>, host_tag: &str) {
        self.accepted_lines += 1;
        if let Some(h) = p.tag(host_tag) {
            match self.hosts.get_mut(h.as_ref()) {
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

/// The typed fields of a line: every field but `time`.
fn typed<'p, 'a>(
    p: &'p Parsed<'a>,
) -> impl Iterator<Item = (std::borrow::Cow<'a, str>, FieldType)> + 'p {
    p.field_types().filter(|(k, _)| k != RESERVED_KEY)
}

/// Fields of a line compared pairwise for a repeat without allocating; a line with more
/// takes a vector.
const FEW_FIELDS: usize = 32;

/// How the fields of a line of `measurement` (keys unescaped, with their types, `time` among
/// them or not) stand against the map.
fn type_check(known: &Types, measurement: &str, fields: &[(Cow<'_, str>, FieldType)]) -> TypeCheck {
    let m = known.get(measurement);
    let mut all_known = true;
    let mut few: [(&str, FieldType); FEW_FIELDS] = [("", FieldType::Float); FEW_FIELDS];
    let mut many: Vec<(&str, FieldType)> = Vec::new();
    // A field written twice with two types is a conflict even when it is new.
    let mut repeat = false;
    let typed = fields
        .iter()
        .filter(|(k, _)| k != RESERVED_KEY)
        .map(|(k, t)| (k.as_ref(), *t));
    for (i, (k, t)) in typed.enumerate() {
        match m.and_then(|m| m.get(k)) {
            Some(was) if was.0 != t => return TypeCheck::Conflict(k.to_string(), was.0),
            Some(_) => {}
            None => all_known = false,
        }
        let before: &[(&str, FieldType)] = if i < FEW_FIELDS { &few[..i] } else { &many };
        repeat |= before.iter().any(|(k2, t2)| *k2 == k && *t2 != t);
        if i < FEW_FIELDS {
            few[i] = (k, t);
        } else {
            if many.is_empty() {
                many.extend(few.iter().copied());
            }
            many.push((k, t));
        }
    }
    if all_known && !repeat {
        TypeCheck::Known
    } else {
        TypeCheck::New
    }
}

/// [`type_check`] of a parsed line.
fn type_check_point(known: &Types, p: &Parsed<'_>) -> TypeCheck {
    let fields: Vec<_> = p.field_types().collect();
    type_check(known, &p.measurement(), &fields)
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
    let mut learned: Vec<(String, String, FieldType)> = Vec::new();
    for (n, a) in pending {
        let p = &a.point;
        // Another request may have taught the map these fields meanwhile.
        if let TypeCheck::Conflict(field, was) = type_check_point(&t, p) {
            out.rejected.push(conflict(n, p, &field, was));
            continue;
        }
        let m = t.entry(p.measurement().into_owned()).or_default();
        let mut repeat: Option<(String, FieldType)> = None;
        for (k, ty) in typed(p) {
            match m.get(k.as_ref()) {
                // Only a field this very line introduced can disagree here.
                Some(was) if was.0 != ty => {
                    repeat = Some((k.to_string(), was.0));
                    break;
                }
                Some(_) => {}
                None if total < types.max_fields => {
                    m.insert(k.to_string(), Stored(ty));
                    total += 1;
                    learned.push((p.measurement().into_owned(), k.into_owned(), ty));
                }
                None => {}
            }
        }
        if let Some((field, was)) = repeat {
            out.rejected.push(conflict(n, p, &field, was));
            continue;
        }
        out.accept(p, host_tag);
        kept.push(a.text);
    }
    if !learned.is_empty() {
        types.append(&t, &learned)?;
    }
    Ok(())
}

/// A field type conflict, in influxd's words.
fn conflict(n: usize, p: &Parsed<'_>, field: &str, known: FieldType) -> Rejection {
    let now = typed(p)
        .filter(|(k, _)| *k == field)
        .map(|(_, t)| t)
        .find(|t| *t != known)
        .map_or("other", FieldType::name);
    Rejection {
        line: n,
        kind: Kind::Dropped,
        reason: format!(
            "field type conflict: input field \"{field}\" on measurement \"{}\" is type {now}, \
             already exists as type {}",
            p.measurement(),
            known.name()
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use storwatch_wire::lp::{check_line, Backend};

    const NOW: i64 = 1_700_000_000_000_000_000;

    /// 200-byte lines, 1 h ahead, 1 day behind.
    const LIMITS: LineLimits = LineLimits {
        max_line_bytes: 200,
        max_future_ns: 3_600_000_000_000,
        max_past_ns: 86_400_000_000_000,
    };

    const NS: Precision = Precision::NS;
    const MS: Precision = Precision {
        factor_ns: 1_000_000,
    };
    const SECONDS: Precision = Precision {
        factor_ns: 1_000_000_000,
    };

    fn rules(backends: &[Backend], precision: Precision) -> Rules<'static> {
        Rules {
            backends: Backends::of(backends),
            precision,
            now_ns: NOW,
            limits: &LIMITS,
            host_tag: "host",
        }
    }

    fn v(body: &str, p: Precision, t: &TypeMap) -> Validated {
        validate(body, &rules(&[Backend::V1], p), t).unwrap()
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
        let out = v(body, SECONDS, &t);
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
            SECONDS,
            &t,
        );
        assert_eq!(out.accepted_lines, 1);
        assert_eq!(out.rejected.len(), 1);
        assert_eq!(out.rejected[0].line, 2);
        assert!(out.rejected[0]
            .reason
            .contains("is type float, already exists as type integer"));
        assert_eq!(t.get("m", "f"), Some(FieldType::Integer));
        let out = v(
            "m,host=a f=\"x\" 1700000000\nm,host=a f=3i,g=true 1700000000\n",
            SECONDS,
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
        let out = v(&body, NS, &t);
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
        let ms = v("m v=1 1700000000123\n", MS, &t);
        assert_eq!(ms.accepted, "m v=1 1700000000123000000\n");
        let body = "m,t=a\\ b s=\"x y\" 1700000000000000001\n";
        let ns = v(body, NS, &t);
        assert!(ns.verbatim);
        assert_eq!(ns.accepted, "");
        assert_eq!(ns.accepted_text(body), body);
    }

    #[test]
    fn types_persist_across_load() {
        let dir = tempfile::tempdir().unwrap();
        let t = TypeMap::load(dir.path()).unwrap();
        v("m f=1i 1700000000\n", SECONDS, &t);
        let t2 = TypeMap::load(dir.path()).unwrap();
        assert_eq!(t2.get("m", "f"), Some(FieldType::Integer));
        let out = v("m f=1 1700000000\n", SECONDS, &t2);
        assert_eq!(out.rejected.len(), 1);
    }

    #[test]
    fn a_field_given_two_types_in_one_line_is_dropped_but_its_first_type_stays() {
        let t = TypeMap::in_memory();
        let out = v(
            "x v=1i,v=2 1700000000\nx w=1i,w=2i 1700000000\n",
            SECONDS,
            &t,
        );
        assert_eq!(out.accepted_lines, 1);
        assert_eq!(out.rejected[0].line, 1);
        assert_eq!(out.rejected[0].kind, Kind::Dropped);
        assert_eq!(t.get("x", "v"), Some(FieldType::Integer));
        let out = v("x v=2 1700000000\n", SECONDS, &t);
        assert_eq!(out.rejected.len(), 1, "{:?}", out.rejected);
    }

    #[test]
    fn a_line_like_a_known_one_in_all_but_one_field_type_or_its_measurement_is_checked_again() {
        let t = TypeMap::in_memory();
        v("m f=1i,g=1 1700000000\nn f=1,g=1 1700000000\n", SECONDS, &t);
        let body = "m,host=a f=2i,g=2 1700000000\n\
                    m,host=b f=3i,g=3 1700000000\n\
                    m,host=c f=4.5,g=4 1700000000\n\
                    n,host=d f=2i,g=2 1700000000\n\
                    m,host=e g=5,f=5i 1700000000\n\
                    m,host=f f=6i,g=6,h=1 1700000000\n\
                    m,host=g f=7i,g=7,f=7 1700000000\n\
                    m,host=h f=8i,g=8 1700000000\n";
        let out = v(body, SECONDS, &t);
        let lines: Vec<usize> = out.rejected.iter().map(|r| r.line).collect();
        assert_eq!(lines, vec![3, 4, 7], "{:?}", out.rejected);
        assert!(out.rejected[1]
            .reason
            .contains("is type integer, already exists as type float"));
        assert_eq!(out.accepted_lines, 5);
        assert_eq!(t.get("m", "h"), Some(FieldType::Float));
        // the line that taught `h` comes after the lines known before
        assert!(out
            .accepted
            .ends_with("m,host=f f=6i,g=6,h=1 1700000000000000000\n"));
    }

    #[test]
    fn time_fields_are_not_typed() {
        let t = TypeMap::in_memory();
        let out = v(
            "m time=1i,v=1 1700000000\nm time=\"x\",v=2 1700000000\n",
            SECONDS,
            &t,
        );
        assert_eq!(out.accepted_lines, 2, "{:?}", out.rejected);
        assert_eq!(t.get("m", "time"), None);
    }

    #[test]
    fn two_x_refuses_the_whole_body_for_one_bad_line_and_learns_nothing() {
        let t = TypeMap::in_memory();
        let body = "m v=1i 1700000000\nm v= 1700000000\nm,time=1 w=1 1700000000\n";
        let out = validate(body, &rules(&[Backend::V2], SECONDS), &t).unwrap();
        assert!(out.whole_body_refused);
        assert_eq!(out.accepted_lines, 0);
        // a time tag does not parse on 2.x either (a key it keeps for itself)
        let lines: Vec<usize> = out.rejected.iter().map(|r| r.line).collect();
        assert_eq!(lines, vec![2, 3]);
        assert_eq!(t.get("m", "v"), None);
        // 1.x keeps the good line
        let out = validate(body, &rules(&[Backend::V1], SECONDS), &t).unwrap();
        assert!(!out.whole_body_refused);
        assert_eq!(out.accepted_lines, 1);
        assert_eq!(out.rejected.len(), 2);
    }

    proptest! {
        #[test]
        fn never_panics_and_accepted_lines_reparse(body in "\\PC{0,300}") {
            let t = TypeMap::in_memory();
            let out = validate(&body, &rules(&[Backend::V1], SECONDS), &t).unwrap();
            let text = out.accepted_text(&body);
            let n = lines(text)
                .filter(|(_, l)| matches!(
                    check_line(l, Backends::one(Backend::V1), NS, NOW, &LineLimits::NONE),
                    Checked::Accepted(_)
                ))
                .count() as u64;
            prop_assert_eq!(n, out.accepted_lines);
        }
    }
}
