//! What the builder writes, the validator of every InfluxDB version accepts, and reads back as
//! the values that were written (after the builder's documented cleaning).
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use storwatch_wire::lp::rules::{
    clean_name, clean_string, clean_tag_value, key_is_writable, measurement_is_writable,
};
use storwatch_wire::lp::{
    check_line, lines, Backend, Backends, Checked, FieldValue, LineLimits, LineWriter, Precision,
};

const NOW: i64 = 1_700_000_000_000_000_000;

/// Names as the agent uses them (devices, pools, mount points) plus every character the
/// protocol treats specially.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z_][a-zA-Z0-9_ ,=\"\\\\./:#-]{0,15}",
        Just("time".to_string()),
        "\\PC{0,8}",
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof!["\\PC{0,20}", "[a-z ,=\"\\\\\t\n\r]{0,20}"]
}

#[derive(Debug, Clone)]
enum V {
    F(f64),
    I(i64),
    U(u64),
    B(bool),
    S(String),
}

fn value() -> impl Strategy<Value = V> {
    prop_oneof![
        proptest::num::f64::ANY.prop_map(V::F),
        any::<i64>().prop_map(V::I),
        any::<u64>().prop_map(V::U),
        any::<bool>().prop_map(V::B),
        text().prop_map(V::S),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn everything_built_passes_every_backend_and_reads_back(
        measurement in name(),
        host in text(),
        tags in proptest::collection::vec((name(), text()), 0..4),
        fields in proptest::collection::vec((name(), value()), 1..5),
        ts in any::<i64>(),
    ) {
        // Keys are unique within a line, as the agent writes them ...
        let mut seen = std::collections::BTreeSet::new();
        seen.insert("host".to_string());
        let tags: Vec<_> = tags.into_iter().filter(|(k, _)| seen.insert(clean_name(k).into_owned())).collect();
        // ... and no name is both a tag and a field (3.x refuses that).
        let fields: Vec<_> = fields.into_iter().filter(|(k, _)| seen.insert(clean_name(k).into_owned())).collect();

        let mut w = LineWriter::new(&host, &[]);
        let mut line = w.line(&measurement, ts);
        for (k, v) in &tags {
            line = line.tag(k, v);
        }
        for (k, v) in &fields {
            line = match v {
                V::F(f) => line.field(k, *f),
                V::I(i) => line.field(k, *i),
                V::U(u) => line.field(k, *u),
                V::B(b) => line.field(k, *b),
                V::S(s) => line.field(k, s.as_str()),
            };
        }
        let written = line.write();
        let out = std::str::from_utf8(w.as_bytes()).unwrap().to_string();
        let expected_fields: Vec<_> = fields
            .iter()
            .filter(|(k, v)| !matches!(v, V::F(f) if !f.is_finite()) && key_is_writable(&clean_name(k)))
            .collect();
        prop_assert_eq!(
            written,
            !expected_fields.is_empty() && measurement_is_writable(&clean_name(&measurement))
        );
        if !written {
            prop_assert!(out.is_empty());
            return Ok(());
        }
        let mut expected_tags: Vec<(String, String)> = Vec::new();
        for (k, v) in std::iter::once(&("host".to_string(), host.clone())).chain(tags.iter()) {
            let (k, v) = (clean_name(k), clean_tag_value(v));
            if key_is_writable(&k) && !v.is_empty() {
                expected_tags.push((k.into_owned(), v.into_owned()));
            }
        }

        let numbered: Vec<_> = lines(&out).collect();
        prop_assert_eq!(numbered.len(), 2, "{:?}", out); // the line and the empty tail
        for backend in Backend::ALL {
            let a = match check_line(numbered[0].1, Backends::one(backend), Precision::NS, NOW, &LineLimits::NONE) {
                Checked::Accepted(a) => a,
                other => return Err(TestCaseError::fail(format!("{backend:?} {other:?}: {out:?}"))),
            };
            prop_assert!(a.verbatim);
            prop_assert_eq!(a.ts_ns, ts);
            let p = &a.point.to_point().map_err(TestCaseError::fail)?;
            prop_assert_eq!(p.measurement.to_string(), clean_name(&measurement).into_owned());
            let got_tags: Vec<(String, String)> =
                p.tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            prop_assert_eq!(&got_tags, &expected_tags);
            prop_assert_eq!(p.fields.len(), expected_fields.len());
            for ((k, v), (gk, gv)) in expected_fields.iter().zip(&p.fields) {
                prop_assert_eq!(clean_name(k).into_owned(), gk.to_string());
                let want = match v {
                    V::F(f) => FieldValue::Float(*f),
                    V::I(i) => FieldValue::Integer(*i),
                    // No 1.x type holds it: written as a saturated signed integer.
                    V::U(u) => FieldValue::Integer(i64::try_from(*u).unwrap_or(i64::MAX)),
                    V::B(b) => FieldValue::Boolean(*b),
                    V::S(s) => FieldValue::String(clean_string(s).into_owned().into()),
                };
                prop_assert_eq!(gv, &want);
            }
        }
    }
}
