//! One line of line protocol into a [`Point`]: measurement, tags, fields with their types and
//! values, the timestamp as written — read by the grammar of the backend version:
//!
//! * 1.x and 2.x: the Go parser's rules ([`super::scan`]), names unescaped as influxd
//!   unescapes them (`\,` `\=` `\ ` in tags; also `\"` in measurement names and field keys;
//!   any other backslash stays); 2.x adds unsigned integers and refuses the tag keys it keeps
//!   for itself (`_measurement`, `_field`, `time`);
//! * 3.x: the `influxdb-line-protocol` crate, the parser InfluxDB 3 itself uses.
//!
//! A refused line gets the backend's own reason; NaN, infinities and (on 1.x) unsigned
//! integers get a reason that names them.

use std::borrow::Cow;

use influxdb_line_protocol::{EscapedStr, FieldValue as CrateValue};

use super::rules::Backend;
use super::scan::{go_parse_float, go_parse_int, go_parse_uint, scan, scan_to, walk_fields};

/// A field value with its InfluxDB type.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue<'a> {
    Float(f64),
    Integer(i64),
    Unsigned(u64),
    String(Cow<'a, str>),
    Boolean(bool),
}

/// The InfluxDB type of a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldType {
    Float,
    Integer,
    Unsigned,
    String,
    Boolean,
}

impl FieldType {
    const NAMES: [(FieldType, &'static str); 5] = [
        (FieldType::Float, "float"),
        (FieldType::Integer, "integer"),
        (FieldType::Unsigned, "unsigned"),
        (FieldType::String, "string"),
        (FieldType::Boolean, "boolean"),
    ];

    /// The name InfluxDB uses in its messages.
    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(t, _)| *t == self)
            .map_or("unknown", |(_, n)| n)
    }

    /// The type of that name.
    pub fn from_name(name: &str) -> Option<FieldType> {
        Self::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(t, _)| *t)
    }
}

impl FieldValue<'_> {
    /// Its type.
    pub fn field_type(&self) -> FieldType {
        match self {
            FieldValue::Float(_) => FieldType::Float,
            FieldValue::Integer(_) => FieldType::Integer,
            FieldValue::Unsigned(_) => FieldType::Unsigned,
            FieldValue::String(_) => FieldType::String,
            FieldValue::Boolean(_) => FieldType::Boolean,
        }
    }
}

/// One parsed line; names and values unescaped.
#[derive(Debug, Clone, PartialEq)]
pub struct Point<'a> {
    pub measurement: Cow<'a, str>,
    /// Tags in the order written.
    pub tags: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    /// Fields in the order written.
    pub fields: Vec<(Cow<'a, str>, FieldValue<'a>)>,
    /// The timestamp as written, in the request's precision.
    pub timestamp: Option<i64>,
    /// Where the field set ends in the line: the line up to here plus a timestamp is the line
    /// with another timestamp.
    pub fields_end: usize,
}

impl<'a> Point<'a> {
    /// The value of tag `key`.
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_ref())
    }

    /// The value of field `key` (the first, when it is written twice).
    pub fn field(&self, key: &str) -> Option<&FieldValue<'a>> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// Parses one line (without its newline) by the grammar of `backend`; the error is the reason,
/// in the backend's words.
pub fn parse_line(line: &str, backend: Backend) -> Result<Point<'_>, String> {
    let parsed = match backend {
        Backend::V1 => parse_go(line, false),
        Backend::V2 => parse_go(line, true).and_then(|p| {
            // 2.x keeps the measurement and the field in tags of these names.
            match p
                .tags
                .iter()
                .find(|(k, _)| matches!(k.as_ref(), "_measurement" | "_field" | "time"))
            {
                Some((k, _)) => Err(format!("cannot use reserved tag key \"{k}\"")),
                None => Ok(p),
            }
        }),
        Backend::V3 => parse_v3(line),
    };
    parsed.map_err(|reason| explain(line, reason, backend))
}

/// Unescapes `s`: a backslash before one of `special` is dropped, any other stays.
pub(super) fn unescape<'a>(s: &'a str, special: &[u8]) -> Cow<'a, str> {
    let b = s.as_bytes();
    if !b.contains(&b'\\') {
        return Cow::Borrowed(s);
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1).is_some_and(|c| special.contains(c)) {
            out.push(b[i + 1]);
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    // Only ASCII backslashes were removed: still UTF-8.
    Cow::Owned(
        String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    )
}

/// What `\x` means in measurement names and field keys (Go's `escape.Unescape`).
pub(super) const NAME_ESCAPES: &[u8] = b", =\"";
/// What `\x` means in tag keys and values (Go's `unescapeTag`).
pub(super) const TAG_ESCAPES: &[u8] = b", =";
/// What `\x` means inside a string field value.
const STRING_ESCAPES: &[u8] = b"\\\"";

pub(super) fn slice(line: &str, (a, b): (usize, usize)) -> &str {
    line.get(a..b).unwrap_or("")
}

/// The 1.x/2.x grammar, and values as the storage engine reads them.
fn parse_go(line: &str, unsigned: bool) -> Result<Point<'_>, String> {
    let buf = line.as_bytes();
    let spans = scan(buf, unsigned)?;
    let key = &buf[..spans.key.1];
    let name_end = scan_to(key, spans.key.0, b',');
    let measurement = unescape(slice(line, (spans.key.0, name_end)), NAME_ESCAPES);
    let mut tags = Vec::new();
    for t in spans.tag_starts(buf) {
        let k_end = scan_to(key, t, b'=');
        let mut v_end = k_end + 1;
        while v_end < key.len() && !(key[v_end] == b',' && key[v_end - 1] != b'\\') {
            v_end += 1;
        }
        tags.push((
            unescape(slice(line, (t, k_end)), TAG_ESCAPES),
            unescape(slice(line, (k_end + 1, v_end)), TAG_ESCAPES),
        ));
    }
    let mut fields = Vec::new();
    for (k, v) in walk_fields(buf, spans.fields) {
        let key = unescape(slice(line, k), NAME_ESCAPES);
        fields.push((key, go_value(slice(line, v))?));
    }
    let timestamp = match spans.timestamp {
        Some(ts) => Some(go_parse_int(slice(line, ts))?),
        None => None,
    };
    Ok(Point {
        measurement,
        tags,
        fields,
        timestamp,
        fields_end: spans.fields.1,
    })
}

/// A field value as the 1.x/2.x field iterator types and reads it (the scanner has already
/// refused what cannot be read).
pub(super) fn go_value(v: &str) -> Result<FieldValue<'_>, String> {
    let Some(first) = v.bytes().next() else {
        return Err("missing field value".into());
    };
    if first == b'"' {
        let inner = v.get(1..v.len().saturating_sub(1)).unwrap_or("");
        return Ok(FieldValue::String(unescape(inner, STRING_ESCAPES)));
    }
    if b"0123456789-.nNiIu".contains(&first) {
        if let Some(n) = v.strip_suffix('i') {
            return go_parse_int(n)
                .map(FieldValue::Integer)
                .map_err(|e| format!("unable to parse integer value {v:?}: {e}"));
        }
        if let Some(n) = v.strip_suffix('u') {
            return go_parse_uint(n)
                .map(FieldValue::Unsigned)
                .map_err(|e| format!("unable to parse unsigned value {v:?}: {e}"));
        }
        return go_parse_float(v)
            .map(FieldValue::Float)
            .map_err(|()| "invalid float".to_string());
    }
    Ok(FieldValue::Boolean(matches!(
        v,
        "t" | "T" | "true" | "True" | "TRUE"
    )))
}

fn cow(s: EscapedStr<'_>) -> Cow<'_, str> {
    match s {
        EscapedStr::SingleSlice(s) => Cow::Borrowed(s),
        EscapedStr::CopiedValue(s) => Cow::Owned(s),
    }
}

/// The 3.x grammar: InfluxDB 3's own parser.
fn parse_v3(line: &str) -> Result<Point<'_>, String> {
    let parsed = match influxdb_line_protocol::parse_lines(line).next() {
        Some(Ok(p)) => p,
        Some(Err(e)) => return Err(e.to_string()),
        None => return Err("No fields were provided".into()),
    };
    let tags = parsed
        .series
        .tag_set
        .map(|t| t.into_iter().map(|(k, v)| (cow(k), cow(v))).collect())
        .unwrap_or_default();
    let fields = parsed
        .field_set
        .into_iter()
        .map(|(k, v)| {
            let v = match v {
                CrateValue::F64(f) => FieldValue::Float(f),
                CrateValue::I64(i) => FieldValue::Integer(i),
                CrateValue::U64(u) => FieldValue::Unsigned(u),
                CrateValue::Boolean(b) => FieldValue::Boolean(b),
                CrateValue::String(s) => FieldValue::String(cow(s)),
            };
            (cow(k), v)
        })
        .collect();
    // Only spaces may follow the timestamp, which holds none: it is the last word.
    let trimmed = line.trim_end_matches(' ');
    let fields_end = match parsed.timestamp {
        Some(_) => trimmed
            .rsplit_once(' ')
            .map_or(trimmed.len(), |(head, _)| head.trim_end_matches(' ').len()),
        None => trimmed.len(),
    };
    Ok(Point {
        measurement: cow(parsed.series.measurement),
        tags,
        fields,
        timestamp: parsed.timestamp,
        fields_end,
    })
}

/// Adds to a refusal what the backend's own words do not say: that a value is NaN or infinite
/// (1.x says "invalid number" or "invalid boolean", 3.x "No fields were provided"), or an
/// unsigned integer 1.x cannot store.
pub(super) fn explain(line: &str, reason: String, backend: Backend) -> String {
    for (key, value) in loose_fields(line) {
        let v = value.to_ascii_lowercase();
        let v = v.trim_start_matches(['-', '+']);
        if matches!(v, "nan" | "inf" | "infinity") {
            return format!(
                "{reason} (field {key:?} is {value}: InfluxDB stores no NaN or infinity)"
            );
        }
        if backend == Backend::V1
            && value.len() > 1
            && value.ends_with('u')
            && value[..value.len() - 1].bytes().all(|b| b.is_ascii_digit())
        {
            return format!(
                "{reason} (field {key:?} is the unsigned integer {value}: InfluxDB 1.x has no \
                 unsigned type; write {}i)",
                &value[..value.len() - 1]
            );
        }
    }
    reason
}

/// `key=value` pairs after the first unescaped space, split naively on ',' (good enough to
/// recognise a bare number or word; quoted strings are skipped).
fn loose_fields(line: &str) -> impl Iterator<Item = (&str, &str)> {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() && !(b[i] == b' ' && i > 0 && b[i - 1] != b'\\') {
        i += 1;
    }
    let rest = line.get(i..).unwrap_or("").trim_start();
    let fields = rest.split(' ').next().unwrap_or("");
    fields
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .filter(|(_, v)| !v.starts_with('"'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(line: &str, b: Backend) -> Point<'_> {
        parse_line(line, b).unwrap_or_else(|e| panic!("{line}: {e}"))
    }

    #[test]
    fn names_unescape_as_influxd_does() {
        let pt = p(
            "c\\ p\\,u\\=x,t\\ k=a\\,b\\\\c,t2=x\\\"y f\\=k=1i 5",
            Backend::V1,
        );
        assert_eq!(pt.measurement, "c p,u=x");
        assert_eq!(pt.tags[0], ("t k".into(), "a,b\\\\c".into()));
        assert_eq!(pt.tags[1], ("t2".into(), "x\\\"y".into()));
        assert_eq!(pt.fields[0], ("f=k".into(), FieldValue::Integer(1)));
        assert_eq!(pt.timestamp, Some(5));
        let pt = p("m s=\"a\\\"b\\\\c\\d\"", Backend::V1);
        assert_eq!(pt.fields[0].1, FieldValue::String("a\"b\\c\\d".into()));
        // 3.x collapses an escaped backslash where 1.x keeps both
        let pt = p("m,t=a\\\\b v=1", Backend::V3);
        assert_eq!(pt.tags[0].1, "a\\b");
    }

    #[test]
    fn values_and_types() {
        let pt = p(
            "m a=1,b=1i,c=-2.5e3,d=t,e=FALSE,f=\"\",g=.5,h=5.",
            Backend::V1,
        );
        let types: Vec<_> = pt.fields.iter().map(|(_, v)| v.field_type()).collect();
        use FieldType::*;
        assert_eq!(
            types,
            [Float, Integer, Float, Boolean, Boolean, String, Float, Float]
        );
        assert_eq!(pt.field("c"), Some(&FieldValue::Float(-2500.0)));
        assert_eq!(pt.field("d"), Some(&FieldValue::Boolean(true)));
        assert_eq!(
            p("m u=5u", Backend::V2).field("u"),
            Some(&FieldValue::Unsigned(5))
        );
        assert_eq!(
            p("m u=5u", Backend::V3).field("u"),
            Some(&FieldValue::Unsigned(5))
        );
    }

    #[test]
    fn grammar_differs_by_version() {
        assert!(parse_line("m v=.1", Backend::V1).is_ok());
        assert!(parse_line("m v=.1", Backend::V3).is_err());
        assert!(parse_line("m v=1u", Backend::V1).is_err());
        assert!(parse_line("m\tv=1", Backend::V1).is_err());
        assert!(parse_line("m v=1 5 ", Backend::V1).is_ok());
        assert!(parse_line("m,_field=x v=1", Backend::V1).is_ok());
        assert_eq!(
            parse_line("m,_field=x v=1", Backend::V2),
            Err("cannot use reserved tag key \"_field\"".to_string())
        );
    }

    #[test]
    fn refusals_name_nan_inf_and_unsigned() {
        let e = parse_line("m v=NaN", Backend::V1).expect_err("nan");
        assert!(e.starts_with("invalid number") && e.contains("NaN"), "{e}");
        let e = parse_line("m v=-Inf", Backend::V1).expect_err("inf");
        assert!(e.contains("-Inf") && e.contains("infinity"), "{e}");
        let e = parse_line("m a=1,v=inf", Backend::V3).expect_err("inf");
        assert!(e.contains("\"v\" is inf"), "{e}");
        let e = parse_line("m v=1u", Backend::V1).expect_err("u");
        assert!(e.contains("1.x has no unsigned type; write 1i"), "{e}");
    }

    #[test]
    fn the_field_set_end_locates_the_timestamp() {
        for (line, b, head) in [
            ("m v=1 17", Backend::V1, "m v=1"),
            ("m v=1  17  ", Backend::V1, "m v=1"),
            ("m v=1", Backend::V1, "m v=1"),
            ("m s=\"a b\" 17", Backend::V3, "m s=\"a b\""),
            ("m v=1 17", Backend::V3, "m v=1"),
        ] {
            assert_eq!(&line[..p(line, b).fields_end], head, "{line}");
        }
    }
}
