//! Reading one line of line protocol into a [`Point`]: measurement, tags, fields with their
//! types, and the timestamp as written (in the request's precision).

use std::borrow::Cow;

use influxdb_line_protocol::{EscapedStr, FieldValue as CrateValue};

use super::rules::Backend;

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
}

impl<'a> Point<'a> {
    /// The value of tag `key`.
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_ref())
    }

    /// The value of field `key`.
    pub fn field(&self, key: &str) -> Option<&FieldValue<'a>> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

fn cow(s: EscapedStr<'_>) -> Cow<'_, str> {
    match s {
        EscapedStr::SingleSlice(s) => Cow::Borrowed(s),
        EscapedStr::CopiedValue(s) => Cow::Owned(s),
    }
}

/// Parses one line (without its newline) by the rules of `backend`; the error is the reason.
pub fn parse_line(line: &str, _backend: Backend) -> Result<Point<'_>, String> {
    let parsed = match influxdb_line_protocol::parse_lines(line).next() {
        Some(Ok(p)) => p,
        Some(Err(e)) => return Err(format!("unable to parse: {e}")),
        None => return Err("unable to parse: empty line".into()),
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
    Ok(Point {
        measurement: cow(parsed.series.measurement),
        tags,
        fields,
        timestamp: parsed.timestamp,
    })
}
