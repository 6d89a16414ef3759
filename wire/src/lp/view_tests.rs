//! The view against [`parse_line`]: on every line of InfluxDB's own parser tests
//! (`wire/fixtures/lp-corpus`), on the lines storwatch writes, and on generated lines, both
//! accept and refuse the same lines for the same reasons and read the same names, types,
//! values and timestamps.

use super::*;
use crate::lp::check::lines;
use proptest::prelude::*;

const CORPUS: [(&str, &str); 2] = [
    (
        "influxdb-v1.8.10-models-points_test.go.txt",
        include_str!("../../fixtures/lp-corpus/influxdb-v1.8.10-models-points_test.go.txt"),
    ),
    (
        "influxdb-v2.7.12-models-points_test.go.txt",
        include_str!("../../fixtures/lp-corpus/influxdb-v2.7.12-models-points_test.go.txt"),
    ),
];

/// A corpus line: `%XX` is byte XX.
fn decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(x)) => {
                out.push(x);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// Every input of the corpus: each literal whole, and each of its lines as InfluxDB splits
/// them, leading whitespace skipped as the validation skips it.
fn corpus() -> Vec<String> {
    let mut out = Vec::new();
    for (_, text) in CORPUS {
        for entry in text.lines() {
            let Ok(lit) = String::from_utf8(decode(entry)) else {
                continue;
            };
            for (_, l) in lines(&lit) {
                out.push(l.to_string());
                out.push(l.trim_start_matches([' ', '\t', '\0']).to_string());
            }
            out.push(lit);
        }
    }
    out
}

/// The view reads `line` by `backend` as [`parse_line`] does; the description of a
/// difference otherwise.
fn agree(line: &str, backend: Backend) -> Result<(), String> {
    let differ = |what: &str, old: &dyn std::fmt::Debug, new: &dyn std::fmt::Debug| {
        Err(format!(
            "{backend:?} {line:?}: {what}: parse_line {old:?}, view {new:?}"
        ))
    };
    let (old, new) = (parse_line(line, backend), parse_view(line, backend));
    let (p, v) = match (old, new) {
        (Err(a), Err(b)) if a == b => return Ok(()),
        (Ok(p), Ok(v)) => (p, v),
        (a, b) => return differ("verdict", &a.err(), &b.err()),
    };
    if p.measurement != v.measurement() {
        return differ("measurement", &p.measurement, &v.measurement());
    }
    let tags: Vec<_> = v.tags().collect();
    if p.tags != tags {
        return differ("tags", &p.tags, &tags);
    }
    for key in p
        .tags
        .iter()
        .map(|(k, _)| k.as_ref())
        .chain(["time", "host", "a"])
    {
        if v.tag(key).as_deref() != p.tag(key) {
            return differ("tag", &p.tag(key), &v.tag(key));
        }
    }
    let types: Vec<_> = v.field_types().collect();
    let want: Vec<_> = p
        .fields
        .iter()
        .map(|(k, v)| (k.clone(), v.field_type()))
        .collect();
    if want != types {
        return differ("field types", &want, &types);
    }
    if let Parsed::Go(g) = &v {
        let values: Vec<_> = g.fields().map(|f| (f.key(), f.value())).collect();
        let want: Vec<_> = p
            .fields
            .iter()
            .map(|(k, v)| (k.clone(), Ok(v.clone())))
            .collect();
        if values != want {
            return differ("fields", &want, &values);
        }
        if g.line() != line {
            return differ("line", &line, &g.line());
        }
    }
    if (p.timestamp, p.fields_end) != (v.timestamp(), v.fields_end()) {
        return differ(
            "timestamp, fields_end",
            &(p.timestamp, p.fields_end),
            &(v.timestamp(), v.fields_end()),
        );
    }
    Ok(())
}

#[test]
fn the_view_reads_every_line_of_influxdbs_parser_tests_as_parse_line_does() {
    let inputs = corpus();
    assert!(inputs.len() > 1000, "{} inputs", inputs.len());
    let (mut accepted, mut refused) = (0, 0);
    for line in &inputs {
        for b in Backend::ALL {
            if let Err(e) = agree(line, b) {
                panic!("{e}");
            }
            match parse_line(line, b) {
                Ok(_) => accepted += 1,
                Err(_) => refused += 1,
            }
        }
    }
    // both kinds are there in number
    assert!(accepted > 300 && refused > 300, "{accepted} {refused}");
}

#[test]
fn the_view_reads_what_storwatch_writes_as_parse_line_does() {
    for line in [
        "disk,host=node001,device=sd1,name=sd1,kind=disk,rotational=1 r_per_s=12.5,w_per_s=30.25,\
         rkb_per_s=1024.5,wkb_per_s=2048.25,r_await_ms=1.25,w_await_ms=3.5,aqu_sz=0.5,\
         util_pct=45.25,util_max_pct=99.5,saturated_s=2i 1700000000000000000",
        "md,host=n1,array=md0 state=\"clean\",host=\"x\",degraded=false 1000000000",
        "jobs,host=n1,job=7 count=3u,running=true 1000000000",
        "m\\ x,a\\ b=c\\,d v=1 -5000000",
        "m\\\\ x,t=1 v=1 5",
        "event,host=a,source=md,object=md0 text=\"a \\\"quoted\\\" word\\\\\" 17",
        "m,_field=x v=1",
        "m,time=1 v=1",
        "m v=9223372036854775807i,w=18446744073709551615u 99999999999999999999",
    ] {
        for b in Backend::ALL {
            if let Err(e) = agree(line, b) {
                panic!("{e}");
            }
        }
    }
}

#[test]
fn a_view_of_a_line() {
    let line = "c\\ p\\,u,t\\ k=a\\,b,t2=x v=1i,s=\"a b\",f\\=k=2.5,b=T 5";
    let Ok(Parsed::Go(v)) = parse_view(line, Backend::V1) else {
        panic!("{line}");
    };
    assert_eq!(v.measurement_raw(), "c\\ p\\,u");
    assert_eq!(v.measurement(), "c p,u");
    assert_eq!(v.series_key(), "c\\ p\\,u,t\\ k=a\\,b,t2=x");
    assert_eq!(
        v.tags_raw().collect::<Vec<_>>(),
        [("t\\ k", "a\\,b"), ("t2", "x")]
    );
    assert_eq!(v.tag("t k").as_deref(), Some("a,b"));
    let fields: Vec<_> = v
        .fields()
        .map(|f| (f.key_raw(), f.key(), f.field_type()))
        .collect();
    use FieldType::*;
    assert_eq!(
        fields,
        [
            ("v", "v".into(), Integer),
            ("s", "s".into(), String),
            ("f\\=k", "f=k".into(), Float),
            ("b", "b".into(), Boolean)
        ]
    );
    assert_eq!(v.timestamp(), Some(5));
    assert!(matches!(
        parse_view("m v=1", Backend::V3),
        Ok(Parsed::V3(_))
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// Lines made of the characters the grammar turns on.
    #[test]
    fn the_view_agrees_with_parse_line_on_generated_lines(
        line in "[a-c_ ,=\"\\\\.0-9eEiutfTFN+-]{0,40}"
    ) {
        for b in Backend::ALL {
            if let Err(e) = agree(&line, b) {
                prop_assert!(false, "{}", e);
            }
        }
    }

    /// Lines shaped like line protocol, with escapes, quotes and odd values in every part.
    #[test]
    fn the_view_agrees_with_parse_line_on_lines_of_line_protocol_shape(
        m in "[a-z\\\\ ,=\"]{1,6}",
        tags in proptest::collection::vec(("[a-z\\\\ ,=]{0,4}", "[a-z\\\\ ,=\"]{0,4}"), 0..4),
        fields in proptest::collection::vec(
            ("[a-z\\\\ ,=\"]{0,4}", "(-?[0-9]{0,20}(\\.[0-9]*)?([eE][+-]?[0-9]{1,3})?[iu]?|\"[a-z\\\\\" ,=]{0,5}\"|[tTfF][a-zA-Z]{0,4})"),
            0..4
        ),
        ts in "( -?[0-9]{0,21})?",
    ) {
        let mut line = m;
        for (k, v) in &tags {
            line.push_str(&format!(",{k}={v}"));
        }
        let fields: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        line.push(' ');
        line.push_str(&fields.join(","));
        line.push_str(&ts);
        for b in Backend::ALL {
            if let Err(e) = agree(&line, b) {
                prop_assert!(false, "{}", e);
            }
        }
    }
}

/// A field as the one-pass reading tells it: key, type, and the value as a number
/// ([`plain_number`], its bits; for a string, its text as written, hashed).
type PlainField = (String, FieldType, Option<u64>);

/// Told of a plain line: its series key, measurement and fields.
#[derive(Default)]
struct Told {
    series_key: Option<String>,
    measurement: Option<String>,
    fields: Vec<PlainField>,
}

impl<'a> PlainFields<'a> for Told {
    fn series_key(&mut self, key: &'a str) {
        assert!(self.series_key.is_none() && self.measurement.is_none());
        self.series_key = Some(key.to_string());
    }

    fn measurement(&mut self, name: &'a str) {
        assert!(self.series_key.is_some());
        assert!(self.measurement.is_none() && self.fields.is_empty());
        self.measurement = Some(name.to_string());
    }

    fn field(&mut self, key: &'a str, value: &'a str, ty: FieldType) {
        let n = super::super::plain::plain_number(value, ty).map(f64::to_bits);
        // a string's value as written, quotes included
        let n = n.or_else(|| (ty == FieldType::String).then(|| text_bits(value)));
        self.fields.push((key.to_string(), ty, n));
    }
}

/// What the one-pass reading of a plain line gives: the view, the measurement and the fields.
fn plain(line: &str, unsigned: bool) -> Option<(LineView<'_>, Told)> {
    let mut told = Told::default();
    let backend = if unsigned { Backend::V2 } else { Backend::V1 };
    let view = view_plain(line, backend, &mut told)?;
    Some((view, told))
}

/// A string's text as a number to compare (its hash), where [`PlainField`] holds a value.
fn text_bits(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// A value as the full grammar reads it, as [`plain_number`] gives it.
fn number(v: FieldValue<'_>) -> Option<u64> {
    let n = match v {
        FieldValue::Float(f) => f,
        FieldValue::Integer(i) => i as f64,
        FieldValue::Unsigned(u) => u as f64,
        FieldValue::Boolean(b) => f64::from(u8::from(b)),
        FieldValue::String(_) => return None,
    };
    Some(n.to_bits())
}

/// A line the one-pass reading takes is read by it exactly as the full grammar reads it: the
/// same view (every position, the timestamp), the same measurement, and the same fields,
/// types and values (the numbers bit for bit).
fn plain_agrees(line: &str, unsigned: bool) -> Result<bool, String> {
    let Some((view, told)) = plain(line, unsigned) else {
        return Ok(false);
    };
    let full = LineView::go_full(line, unsigned);
    if full != Ok(view) {
        return Err(format!(
            "{line:?} (unsigned {unsigned}): one pass {view:?}, full grammar {full:?}"
        ));
    }
    if told.measurement.as_deref() != Some(&*view.measurement()) {
        return Err(format!("{line:?}: told measurement {:?}", told.measurement));
    }
    if told.series_key.as_deref() != Some(view.series_key()) {
        return Err(format!("{line:?}: told series key {:?}", told.series_key));
    }
    let mut want: Vec<PlainField> = Vec::new();
    for f in view.fields() {
        let value = f.value().map_err(|e| format!("{line:?}: {e}"))?;
        let n = match value {
            // the full grammar's string, quoted again as it was written (no escape in a plain one)
            FieldValue::String(s) => Some(text_bits(&format!("\"{s}\""))),
            value => number(value),
        };
        want.push((f.key().into_owned(), f.field_type(), n));
    }
    if told.fields != want {
        return Err(format!(
            "{line:?}: one pass fields {:?}, full grammar {want:?}",
            told.fields
        ));
    }
    Ok(true)
}

/// splitmix64: random numbers for a test, the same every run.
struct Rng(u64);

impl Rng {
    fn u64(&mut self, range: impl std::ops::RangeBounds<u64>) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let lo = match range.start_bound() {
            std::ops::Bound::Included(&a) => a,
            _ => 0,
        };
        match range.end_bound() {
            std::ops::Bound::Excluded(&b) => lo + z % (b - lo),
            std::ops::Bound::Included(&b) if b - lo < u64::MAX => lo + z % (b - lo + 1),
            _ => z,
        }
    }

    fn usize(&mut self, range: impl std::ops::RangeBounds<u64>) -> usize {
        self.u64(range) as usize
    }

    fn f64(&mut self) -> f64 {
        (self.u64(..) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Numbers of every length the one-pass reading takes, around the fast path's edges (15
/// digits) and its limits (18 digits for an integer, 19 unsigned, 23 characters for a float),
/// and random ones: read as the full grammar reads them, bit for bit.
#[test]
fn the_one_pass_reading_reads_numbers_as_the_full_grammar_does() {
    let mut rng = Rng(7);
    let mut taken = 0;
    for i in 0..45_000u64 {
        let v = match i % 9 {
            0 => {
                let scale = 10f64.powi(rng.u64(0..25) as i32 - 5);
                format!("{}", rng.f64() * scale)
            }
            1 => {
                let whole = 10u64.pow(rng.u64(0..16) as u32);
                format!("{}.{}", rng.u64(0..whole), rng.u64(0..1_000_000))
            }
            2 => format!("-{}", rng.u64(..)),
            3 => format!("{}i", (rng.u64(..) as i64) >> rng.u64(0..64)),
            4 => format!("{}u", rng.u64(..) >> rng.u64(0..64)),
            5 => {
                let digits: String = (0..rng.usize(1..24))
                    .map(|_| char::from(b'0' + rng.u64(0..10) as u8))
                    .collect();
                let at = rng.usize(0..=digits.len() as u64);
                format!("-{}.{}", &digits[..at], &digits[at..])
            }
            6 => {
                let end = 10u64.pow(rng.u64(0..20) as u32);
                format!("{}.", rng.u64(0..end))
            }
            // small fractions as `Display` writes them: long, up to the limit and past it
            7 => format!("{}", rng.f64() * 10f64.powi(-(rng.u64(0..50) as i32))),
            _ => [
                "t", "F", "true", "False", "TRUE", "0", "-0", "-0.0", "007", "1.000",
            ][rng.usize(0..10)]
            .to_string(),
        };
        let line = format!("m,h=x v={v},w=1 1");
        taken += plain_readings(&line);
    }
    // most of them are plain (the rest: over a limit, or `-.5`)
    assert!(taken > 65_000, "{taken} plain readings");
}

/// How many of the two readings of `line` (integers signed, then unsigned) were taken in one
/// pass, each checked against the full grammar (a disagreement panics).
fn plain_readings(line: &str) -> usize {
    [false, true]
        .into_iter()
        .filter(|&unsigned| plain_agrees(line, unsigned).unwrap_or_else(|e| panic!("{e}")))
        .count()
}

#[test]
fn a_plain_line_of_influxdbs_parser_tests_is_read_in_one_pass_as_the_full_grammar_reads_it() {
    let mut taken = 0;
    for line in corpus() {
        taken += plain_readings(&line);
    }
    // the corpus holds plain lines in number, not only odd ones
    assert!(taken > 200, "{taken} plain readings");
}

#[test]
fn what_storwatch_and_telegraf_write_is_read_in_one_pass() {
    for (line, unsigned) in [
        (
            "disk,host=node001,device=sd1,name=sd1,kind=disk,rotational=1 r_per_s=12.5,\
             w_per_s=30.25,rkb_per_s=1024.5,wkb_per_s=2048.25,r_await_ms=1.25,w_await_ms=3.5,\
             aqu_sz=0.5,util_pct=45.25,util_max_pct=99.5,saturated_s=2i 1700000000000000000",
            false,
        ),
        ("jobs,host=n1,job=7 count=3u,running=true 1000000000", true),
        ("cpu usage_idle=99.1,ok=T", false),
        ("m v=-922337203685477580i -9223372036854775808", false),
        // numbers and words on each side of the values' fast paths
        ("m v=-0,w=-0.0,x=007,y=1.000,z=0.1,a=5. 0", false),
        (
            "m v=t,w=T,x=true,y=True,z=TRUE,a=f,b=F,c=false,d=False,e=FALSE",
            false,
        ),
        (
            "m v=123456789012345.6,w=1234567890123456,x=0.30000000000000004",
            false,
        ),
        ("m v=999999999999999999i,w=-999999999999999999i", false),
        ("m v=9999999999999999999u,w=0u 1", true),
        ("m,host=é v=1", false),
        // strings without escapes: spaces, commas, equal signs, quotes' neighbours, empty
        ("md,host=n1 state=\"clean\" 1", false),
        (
            "mpath_path,host=n1,map=mpatha dm_state=\"active\",state=\"running, ready\",n=0i",
            false,
        ),
        ("m s=\"a=b c,d\",t=\"\",u=\"é ünï\",v=1 7", false),
        ("m s=\"\"", true),
        // escaped separators in tag values
        (
            "drive,host=n1,device=sda,model=SEAGATE\\ ST600MP0036 health_ok=true 1",
            false,
        ),
        ("m,a=x\\,y\\=z\\ ,b=\\  v=1", false),
        ("m,a=\\,\\, v=1", true),
        // long fractions: to 64 characters
        (
            "drive,host=n1,device=sda failure_probability=0.000000001234567890123456 1",
            false,
        ),
        (
            "m v=-0.0000000000000000000000000000000000000000000000000000000000001,w=1.",
            false,
        ),
    ] {
        assert_eq!(plain_agrees(line, unsigned), Ok(true), "{line}");
    }
    // what the full grammar decides: an escape (in a string too), a control byte in a string, a
    // string not ended or ended before another byte, a second space, NaN, a long number
    for line in [
        "md,host=n1 state=\"cl\\\"ean\" 1",
        "md,host=n1 state=\"a\\\\\" 1",
        "md,host=n1 state=\"a\tb\" 1",
        "md,host=n1 state=\"clean 1",
        "md,host=n1 state=\"clean\"x 1",
        "md,host=n1 state=\"clean\"\"x\" 1",
        "m\\ x v=1",
        "m,a\\ b=1 v=1",
        "m,a=b\\c v=1",
        "m,a=b\\\\ v=1",
        "m,a=b\\ v=1",
        "m,a=x\\,y\\=z\\ ,b=\\ v=1",
        "m,a=b\\\\,c=d v=1",
        "m s\\ t=1",
        "m  v=1",
        "m v=1  1",
        "m v=1 1 ",
        "m v=NaN",
        "m v=123456789012345678901234",
        "m v=123456789012345678901234.5",
        "m v=0.000000000000000000000000000000000000000000000000000000000000001",
        "m v=1234567890123456789i",
        "m v=1 12345678901234567890",
        "m,a=1,a=2 v=1",
        "m,a=b=c v=1",
        "m\tv=1",
    ] {
        assert!(plain(line, false).is_none(), "{line}");
    }
    assert!(plain("m,time=1 v=1", true).is_none());
    assert!(plain("m v=1u", false).is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// Lines close to plain ones, every part allowed to go wrong by a byte.
    #[test]
    fn the_one_pass_reading_agrees_with_the_full_grammar_on_generated_lines(
        m in "[a-c=,\\\\]{1,3}",
        tags in proptest::collection::vec(("[a-c_ ,=]{0,3}", "[a-c0-9=\" ]{0,3}"), 0..4),
        fields in proptest::collection::vec(
            ("[a-c_ =]{0,3}", "(-?[0-9]{0,25}(\\.[0-9]{0,4})?[iu.]?|[tTfF][a-zA-Z]{0,4}|N|\"a\")"),
            0..4
        ),
        ts in "( {1,2}-?[0-9]{0,21} ?)?",
        unsigned in any::<bool>(),
    ) {
        let mut line = m;
        for (k, v) in &tags {
            line.push_str(&format!(",{k}={v}"));
        }
        let fields: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        line.push(' ');
        line.push_str(&fields.join(","));
        line.push_str(&ts);
        if let Err(e) = plain_agrees(&line, unsigned) {
            prop_assert!(false, "{}", e);
        }
        for b in [Backend::V1, Backend::V2] {
            if let Err(e) = agree(&line, b) {
                prop_assert!(false, "{}", e);
            }
        }
    }

    /// The fields `parse_view_typed` gathers are those `field_types` gives, for every grammar.
    #[test]
    fn the_fields_gathered_while_reading_are_the_field_types(
        line in "[a-c_ ,=\"\\\\.0-9eEiutfTFN+-]{0,40}"
    ) {
        for b in Backend::ALL {
            let mut fields = vec![(Cow::Borrowed("stale"), FieldType::String)];
            if let Ok(p) = parse_view_typed(&line, b, &mut fields) {
                let want: Vec<_> = p.field_types().collect();
                prop_assert_eq!(&fields, &want);
            }
        }
    }
}
