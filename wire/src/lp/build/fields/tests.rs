//! [`Fields`] against the builder chain ([`Line`]): the same bytes, lines and skipped count
//! for any values, keys and series.

use super::super::Line;
use super::*;
use proptest::prelude::*;

const A: FieldKey = FieldKey::new("a");
const RATE: FieldKey = FieldKey::new("read_bytes_per_s");
const LONG: FieldKey = FieldKey::new("a_key_of_forty_six_bytes_which_is_the_longest_");
const KEYS: [FieldKey; 3] = [A, RATE, LONG];

const CPUSET: FieldText = FieldText::new("cores_from", "cpuset");
const ODD: FieldText = FieldText::new("t", " a,b=c {}~ ");
/// The longest: a 46-byte key and a 14-byte value, 64 bytes written.
const FULL: FieldText = FieldText::new(
    "a_key_of_forty_six_bytes_which_is_the_longest_",
    "fourteen_bytes",
);
const TEXTS: [FieldText; 3] = [CPUSET, ODD, FULL];

/// One field of a line, as the report code writes it.
#[derive(Debug, Clone)]
enum Op {
    R3(usize, Option<f64>),
    F(usize, f64),
    I(usize, i64),
    U(usize, Option<u64>),
    Text(usize),
    Any(usize, Value<'static>),
}

/// The same field through the builder chain.
fn old<'a>(line: Line<'a>, op: &Op) -> Line<'a> {
    match *op {
        Op::R3(k, v) => line.field_key_r3_opt(KEYS[k], v),
        Op::F(k, v) => line.field_key(KEYS[k], v),
        Op::I(k, v) => line.field_key(KEYS[k], v),
        Op::U(k, v) => line.field_key_opt(KEYS[k], v),
        Op::Text(t) => line.field_key(TEXTS[t].key(), TEXTS[t].value()),
        Op::Any(k, v) => line.field_key(KEYS[k], v),
    }
}

fn new(f: &mut Fields<'_>, op: &Op) {
    match *op {
        Op::R3(k, v) => f.r3_opt(KEYS[k], v),
        Op::F(k, v) => f.f64(KEYS[k], v),
        Op::I(k, v) => f.i64(KEYS[k], v),
        Op::U(k, v) => f.u64_opt(KEYS[k], v),
        Op::Text(t) => f.text(&TEXTS[t]),
        Op::Any(k, v) => f.value(KEYS[k], v),
    }
}

fn series() -> Vec<SeriesKey> {
    vec![
        SeriesKey::new("job", &[("batch", "slurm"), ("job", "1"), ("slot", "")]),
        SeriesKey::new("job io", &[("de=v", "sd a\\"), ("time", "x")]),
        SeriesKey::new("#comment", &[("a", "b")]),
        SeriesKey::new("", &[]),
    ]
}

/// Each line written both ways into writers of the same common tags: the bytes, each line's
/// answer, the lines and the skipped counts.
fn both(lines: &[(usize, i64, Vec<Op>)]) -> Result<(), TestCaseError> {
    both_with("h,1", series(), lines)
}

/// [`both`] with the host tag `host` and the series `keys`.
fn both_with(
    host: &str,
    keys: Vec<SeriesKey>,
    lines: &[(usize, i64, Vec<Op>)],
) -> Result<(), TestCaseError> {
    let extra = vec![("site".to_owned(), "a b".to_owned())];
    let mut a = LineWriter::new(host, &extra);
    let mut b = LineWriter::new(host, &extra);
    for (s, ts, ops) in lines {
        let key = &keys[*s % keys.len()];
        let mut line = a.line_of(key, *ts);
        for op in ops {
            line = old(line, op);
        }
        let wa = line.write();
        let mut f = b.fields_of(key, *ts);
        for op in ops {
            new(&mut f, op);
        }
        let wb = f.write();
        prop_assert_eq!(wa, wb, "{:?}", ops);
        prop_assert_eq!(
            String::from_utf8_lossy(a.as_bytes()),
            String::from_utf8_lossy(b.as_bytes()),
            "{:?}",
            ops
        );
    }
    prop_assert_eq!(a.lines(), b.lines());
    prop_assert_eq!(a.skipped(), b.skipped());
    Ok(())
}

/// Floats at the edges of every branch: NaN, the infinities, zeros of both signs, halves of a
/// thousandth, the thousandths form's bounds, huge and tiny values.
fn edge_floats() -> Vec<f64> {
    vec![
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        -0.000_1,
        0.000_5,
        -0.000_5,
        0.000_499_999_999_999_9,
        f64::from_bits(1),
        f64::MIN_POSITIVE,
        0.1 + 0.2,
        999_999_999_999.999,
        -999_999_999_999.999,
        999_999_999_999.999_5,
        1e12,
        1e12 - 0.000_5,
        1e15,
        999_999_999_999_999.5,
        9_007_199_254_740_992.0,
        1e21,
        1e22,
        f64::MAX,
        f64::MIN,
        i64::MAX as f64,
    ]
}

fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        proptest::num::f64::ANY,
        proptest::sample::select(edge_floats()),
        (-100_000_000i64..100_000_000).prop_map(|k| k as f64 / 1000.0),
        (-1e18f64..1e18),
        (0.0f64..200.0),
    ]
}

fn value() -> impl Strategy<Value = Value<'static>> {
    prop_oneof![
        float().prop_map(Value::F),
        any::<i64>().prop_map(Value::I),
        any::<u64>().prop_map(Value::U),
        any::<bool>().prop_map(Value::B),
        proptest::sample::select(vec!["", "plain", "a \"quoted\" b\\", "line1\nline2", "é ü"])
            .prop_map(Value::S),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0..KEYS.len();
    prop_oneof![
        4 => (k.clone(), proptest::option::of(float())).prop_map(|(k, v)| Op::R3(k, v)),
        1 => (k.clone(), float()).prop_map(|(k, v)| Op::F(k, v)),
        1 => (k.clone(), any::<i64>()).prop_map(|(k, v)| Op::I(k, v)),
        1 => (k.clone(), proptest::option::of(any::<u64>())).prop_map(|(k, v)| Op::U(k, v)),
        1 => (0..TEXTS.len()).prop_map(Op::Text),
        1 => (k, value()).prop_map(|(k, v)| Op::Any(k, v)),
    ]
}

/// Lines of the same leading fields `head`, each with its own `tails`: through the chain,
/// `head` written each time; through [`Fields`], encoded by the first line and appended to the
/// others.
fn encoded_once(s: usize, head: &[Op], tails: &[Vec<Op>], ts: i64) -> Result<(), TestCaseError> {
    let keys = series();
    let key = &keys[s % keys.len()];
    let mut a = LineWriter::new("h", &[]);
    let mut b = LineWriter::new("h", &[]);
    let mut kept: Option<EncodedFields> = None;
    for tail in tails {
        let mut line = a.line_of(key, ts);
        for op in head.iter().chain(tail) {
            line = old(line, op);
        }
        let wa = line.write();
        let mut f = b.fields_of(key, ts);
        match &kept {
            Some(e) => f.encoded(e),
            None => {
                let m = f.mark();
                for op in head {
                    new(&mut f, op);
                }
                kept = Some(f.since(m));
            }
        }
        for op in tail {
            new(&mut f, op);
        }
        prop_assert_eq!(wa, f.write(), "{:?} {:?}", head, tail);
    }
    prop_assert_eq!(
        String::from_utf8_lossy(a.as_bytes()),
        String::from_utf8_lossy(b.as_bytes())
    );
    prop_assert_eq!(a.lines(), b.lines());
    prop_assert_eq!(a.skipped(), b.skipped());
    Ok(())
}

proptest! {
    #[test]
    fn fields_encoded_once_append_the_bytes_of_writing_them_again(
        s in 0usize..4,
        head in proptest::collection::vec(op(), 0..30),
        tails in proptest::collection::vec(proptest::collection::vec(op(), 0..4), 1..5),
        ts in prop_oneof![Just(1_700_000_000_000_000_000i64), any::<i64>()],
    ) {
        encoded_once(s, &head, &tails, ts)?;
    }

    #[test]
    fn fields_write_the_bytes_of_the_builder_chain(
        lines in proptest::collection::vec(
            (0usize..4, prop_oneof![Just(1_700_000_000_000_000_000i64), any::<i64>()],
             proptest::collection::vec(op(), 0..40)),
            1..6,
        ),
    ) {
        both(&lines)?;
    }

    /// Keys and common tags of any length (their bytes are copied 16 at a time).
    #[test]
    fn fields_write_the_bytes_of_the_builder_chain_for_any_key(
        host in "[a-z0-9,= -]{0,40}",
        measurement in "[a-z_ ,#]{0,40}",
        tag in "\\PC{0,50}",
        lines in proptest::collection::vec(
            (0usize..5, Just(1_700_000_000_000_000_000i64), proptest::collection::vec(op(), 0..8)),
            1..4,
        ),
    ) {
        let mut keys = series();
        keys.push(SeriesKey::new(&measurement, &[("t", &tag), ("u", "x")]));
        both_with(&host, keys, &lines)?;
    }
}

#[test]
fn a_job_line_of_every_kind_of_field() {
    let ops = vec![
        Op::R3(1, Some(87.654_321)),
        Op::R3(0, Some(1.0)),
        Op::Text(0),
        Op::R3(0, None),
        Op::R3(0, Some(10.000_4)),
        Op::U(1, Some(1_234_567_890)),
        Op::U(0, Some(u64::MAX)),
        Op::U(0, None),
        Op::R3(2, Some(-0.000_1)),
        Op::R3(0, Some(f64::NAN)),
        Op::R3(0, Some(2e12)),
        Op::F(1, 0.1 + 0.2),
        Op::I(2, i64::MIN),
        Op::Any(0, Value::S("a \"b\"\n")),
        Op::Any(0, Value::B(true)),
        Op::Text(2),
    ];
    both(&[(0, 7, ops.clone()), (1, 7, ops.clone()), (0, 8, ops)]).expect("same bytes");
    let mut w = LineWriter::new("wn1", &[]);
    let key = SeriesKey::new("job", &[("job", "12")]);
    let mut f = w.fields_of(&key, 5);
    f.r3(CPU, 99.999_9);
    f.text(&CPUSET);
    f.u64(RATE, 3);
    assert!(f.write());
    assert_eq!(
        std::str::from_utf8(w.as_bytes()).expect("utf8"),
        "job,host=wn1,job=12 cpu=100,cores_from=\"cpuset\",read_bytes_per_s=3i 5\n"
    );
}
const CPU: FieldKey = FieldKey::new("cpu");

#[test]
fn a_line_without_a_field_or_dropped_leaves_no_trace() {
    let key = SeriesKey::new("job", &[("job", "12")]);
    let mut w = LineWriter::new("h", &[]);
    let mut f = w.fields_of(&key, 1);
    f.r3(A, 1.5);
    assert!(f.write());
    let before = w.as_bytes().to_vec();
    // Only skipped values: not written, counted (each NaN, then the line).
    let mut f = w.fields_of(&key, 2);
    f.r3(A, f64::NAN);
    f.f64(A, f64::INFINITY);
    f.r3_opt(A, None);
    f.u64_opt(A, None);
    assert!(!f.write());
    assert_eq!(w.skipped(), 3);
    // Left half-written, after the scratch buffer grew past it: nothing of it is written.
    {
        let mut f = w.fields_of(&key, 3);
        for _ in 0..100 {
            f.r3(LONG, 123_456.789);
        }
    }
    assert_eq!(w.as_bytes(), &before[..]);
    assert_eq!(w.lines(), 1);
    // The next line is the first's bytes and its own, nothing left from the long one.
    let mut f = w.fields_of(&key, 4);
    f.i64(A, -5);
    assert!(f.write());
    assert_eq!(
        std::str::from_utf8(w.as_bytes()).expect("utf8"),
        "job,host=h,job=12 a=1.5 1\njob,host=h,job=12 a=-5i 4\n"
    );
}

#[test]
fn a_constant_text_that_is_not_plain_is_refused() {
    for (k, v) in [
        ("time", "x"),
        ("a b", "x"),
        ("k", "a\"b"),
        ("k", "a\\b"),
        ("k", "a\nb"),
        ("k", "é"),
        ("k", "\u{7f}"),
        (
            "a_key_of_forty_six_bytes_which_is_the_longest_",
            "fifteen_bytes__",
        ),
    ] {
        let r = std::panic::catch_unwind(|| FieldText::new(k, v));
        assert!(r.is_err(), "{k:?} {v:?}");
    }
    assert_eq!(FULL.key().as_str().len() + FULL.value().len() + 4, 64);
    assert_eq!(CPUSET.value(), "cpuset");
}
