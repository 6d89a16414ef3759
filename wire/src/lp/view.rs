//! One line read without building anything: [`LineView`] keeps where a line's measurement,
//! tags and fields are (by the 1.x/2.x grammar, [`super::scan`]) and its timestamp, and hands
//! out names (unescaped only when they hold a backslash), field types and values when asked.
//! The collector's validation and its remote-write encoder read every line this way, so that a
//! line costs no allocation; [`parse_line`] builds a whole [`Point`] instead.
//!
//! [`parse_view`] accepts exactly the lines [`parse_line`] accepts, with the same reasons, and
//! reads them the same (tests below, over InfluxDB's own parser tests in
//! `wire/fixtures/lp-corpus`): for 1.x and 2.x a [`LineView`], for 3.x (InfluxDB 3's own
//! parser) the [`Point`].
//!
//! A value of a field is not parsed until asked for. The scanner has already refused most
//! values the 1.x/2.x storage engine cannot read, but it splits the field set a little
//! differently from the engine's field iterator around escapes (`a\\=1` is a key and a value
//! to the scanner, a key alone to the iterator), so each value is still checked as the
//! iterator splits it: a plain number short enough to be in range (`-?[0-9]+(\.[0-9]*)?`, or
//! an integer) by its bytes, anything else by parsing it. The type is then read off the
//! value's first and last byte, as the engine reads it.

use std::borrow::Cow;

use super::parse::{
    explain, go_value, parse_line, slice, unescape, FieldType, FieldValue, Point, NAME_ESCAPES,
    TAG_ESCAPES,
};
use super::plain::{on_field, read_plain, PlainFields, PlainLine};
use super::rules::Backend;
use super::scan::{go_parse_int, scan, scan_to, tag_starts, walk_fields};

/// The fields of a line, in written order: each key unescaped, and its type (what
/// [`Parsed::field_types`] gives), gathered by [`parse_view_typed`] as it reads the line.
pub type FieldTypes<'a> = Vec<(Cow<'a, str>, FieldType)>;

/// Tag keys 2.x keeps for itself (the measurement, the field, the time).
const V2_RESERVED_TAGS: [&str; 3] = ["_measurement", "_field", "time"];

/// A line read by the 1.x/2.x grammar: where its parts are, and its timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineView<'a> {
    line: &'a str,
    /// Measurement and tags as written.
    key: (usize, usize),
    /// Where the measurement ends.
    name_end: usize,
    /// Where the first tag starts (`key.1` when there is none).
    tags: usize,
    /// The field set as written.
    fields: (usize, usize),
    timestamp: Option<i64>,
    /// Read by 2.x's grammar (unsigned integers), not 1.x's.
    unsigned: bool,
}

/// One field of a [`LineView`], as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldRef<'a> {
    key: &'a str,
    value: &'a str,
}

impl<'a> FieldRef<'a> {
    /// The key as written.
    pub fn key_raw(&self) -> &'a str {
        self.key
    }

    /// The key, unescaped.
    pub fn key(&self) -> Cow<'a, str> {
        unescape(self.key, NAME_ESCAPES)
    }

    /// The value's type, by the value as written (the scanner refused what is none of them).
    pub fn field_type(&self) -> FieldType {
        let b = self.value.as_bytes();
        match b.first() {
            Some(b'"') => FieldType::String,
            Some(c) if b"0123456789-.nNiIu".contains(c) => match b.last() {
                Some(b'i') => FieldType::Integer,
                Some(b'u') => FieldType::Unsigned,
                _ => FieldType::Float,
            },
            _ => FieldType::Boolean,
        }
    }

    /// The value, as [`parse_line`] reads it.
    pub fn value(&self) -> Result<FieldValue<'a>, String> {
        go_value(self.value)
    }
}

impl<'a> LineView<'a> {
    /// Reads `line` (without its newline) by the 1.x grammar, or with `unsigned` integers by
    /// 2.x's (which also refuses its reserved tag keys). The error is the grammar's reason,
    /// without what [`parse_line`] adds to it. A plain line is read in one pass
    /// ([`super::plain`]), any other by the full grammar.
    fn go(line: &'a str, unsigned: bool) -> Result<LineView<'a>, String> {
        match read_plain(line, unsigned, &mut on_field(|_, _, _| {})) {
            Some(p) => Ok(LineView::of_plain(line, unsigned, p)),
            None => LineView::go_full(line, unsigned),
        }
    }

    /// [`LineView::go`], the line's fields and their types put in `fields` as well.
    fn go_typed(
        line: &'a str,
        unsigned: bool,
        fields: &mut FieldTypes<'a>,
    ) -> Result<LineView<'a>, String> {
        fields.clear();
        let mut typed = on_field(|k, _, t| fields.push((Cow::Borrowed(k), t)));
        if let Some(p) = read_plain(line, unsigned, &mut typed) {
            return Ok(LineView::of_plain(line, unsigned, p));
        }
        fields.clear();
        let view = LineView::go_full(line, unsigned)?;
        fields.extend(view.fields().map(|f| (f.key(), f.field_type())));
        Ok(view)
    }

    fn of_plain(line: &'a str, unsigned: bool, p: PlainLine) -> LineView<'a> {
        LineView {
            line,
            key: (0, p.key_end),
            name_end: p.name_end,
            tags: p.tags,
            fields: p.fields,
            timestamp: p.timestamp,
            unsigned,
        }
    }

    /// [`LineView::go`] by the full grammar, whatever the line.
    pub(crate) fn go_full(line: &'a str, unsigned: bool) -> Result<LineView<'a>, String> {
        let buf = line.as_bytes();
        let spans = scan(buf, unsigned)?;
        for (_, v) in walk_fields(buf, spans.fields) {
            let v = slice(line, v);
            if !plain_value(v) {
                go_value(v)?;
            }
        }
        let timestamp = match spans.timestamp {
            Some(ts) => Some(go_parse_int(slice(line, ts))?),
            None => None,
        };
        let view = LineView {
            line,
            key: spans.key,
            name_end: scan_to(&buf[..spans.key.1], spans.key.0, b','),
            tags: spans.tags,
            fields: spans.fields,
            timestamp,
            unsigned,
        };
        if unsigned {
            if let Some((k, _)) = view.tags_raw().find(|(k, _)| V2_RESERVED_TAGS.contains(k)) {
                return Err(format!("cannot use reserved tag key \"{k}\""));
            }
        }
        Ok(view)
    }

    /// The line.
    pub fn line(&self) -> &'a str {
        self.line
    }

    /// Measurement and tags as written (`disk,host=a`): the series, as the line spells it.
    pub fn series_key(&self) -> &'a str {
        slice(self.line, self.key)
    }

    /// The measurement as written.
    pub fn measurement_raw(&self) -> &'a str {
        slice(self.line, (self.key.0, self.name_end))
    }

    /// The measurement, unescaped.
    pub fn measurement(&self) -> Cow<'a, str> {
        unescape(self.measurement_raw(), NAME_ESCAPES)
    }

    /// The tags as written, (key, value), in the order written.
    pub fn tags_raw(&self) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        let (line, end) = (self.line, self.key.1);
        let buf = &line.as_bytes()[..end];
        tag_starts(line.as_bytes(), self.tags, end).map(move |t| {
            let k_end = scan_to(buf, t, b'=');
            let mut v_end = k_end + 1;
            while v_end < end && !(buf[v_end] == b',' && buf[v_end - 1] != b'\\') {
                v_end += 1;
            }
            (slice(line, (t, k_end)), slice(line, (k_end + 1, v_end)))
        })
    }

    /// The tags, unescaped, in the order written.
    pub fn tags(&self) -> impl Iterator<Item = (Cow<'a, str>, Cow<'a, str>)> + 'a {
        self.tags_raw()
            .map(|(k, v)| (unescape(k, TAG_ESCAPES), unescape(v, TAG_ESCAPES)))
    }

    /// The value of tag `key` (unescaped names).
    pub fn tag(&self, key: &str) -> Option<Cow<'a, str>> {
        // A key without the characters an escape can hide is written as it reads: a series key
        // without it has no such tag (most lines have no `time` tag, which every line is asked).
        if !key.bytes().any(|c| b", =\\".contains(&c)) && !self.series_key().contains(key) {
            return None;
        }
        // Without a backslash in the series key, every tag is written as it reads.
        if memchr::memchr(b'\\', self.series_key().as_bytes()).is_none() {
            return self
                .tags_raw()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| Cow::Borrowed(v));
        }
        self.tags().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The fields as written, in the order written.
    pub fn fields(&self) -> impl Iterator<Item = FieldRef<'a>> + 'a {
        let line = self.line;
        walk_fields(line.as_bytes(), self.fields).map(move |(k, v)| FieldRef {
            key: slice(line, k),
            value: slice(line, v),
        })
    }

    /// The timestamp as written, in the request's precision.
    pub fn timestamp(&self) -> Option<i64> {
        self.timestamp
    }

    /// Where the field set ends in the line (see [`Point::fields_end`]).
    pub fn fields_end(&self) -> usize {
        self.fields.1
    }

    /// The whole [`Point`]: the line read again, by [`parse_line`].
    pub fn to_point(&self) -> Result<Point<'a>, String> {
        let backend = if self.unsigned {
            Backend::V2
        } else {
            Backend::V1
        };
        parse_line(self.line, backend)
    }
}

/// Whether `v` is a value [`go_value`] reads without fail, by its bytes: a quoted string, a
/// boolean word, or a number of digits with at most one '.' (a float of at most 24 characters,
/// an integer of at most 18 digits, an unsigned one of at most 19), optionally negative.
fn plain_value(v: &str) -> bool {
    let b = v.as_bytes();
    match b.first() {
        None => return false,
        Some(b'"') => return b.len() >= 2 && b.last() == Some(&b'"'),
        Some(b't' | b'f' | b'T' | b'F') => return true,
        _ => {}
    }
    let (digits, limit) = match b.last() {
        Some(b'i') => (&b[..b.len() - 1], 18),
        Some(b'u') if b[0] != b'-' => (&b[..b.len() - 1], 19),
        _ => (b, 23),
    };
    let digits = digits.strip_prefix(b"-").unwrap_or(digits);
    let float = limit == 23;
    let mut dot = false;
    let mut n = 0;
    for c in digits {
        match c {
            b'0'..=b'9' => n += 1,
            b'.' if float && !dot && n > 0 => dot = true,
            _ => return false,
        }
    }
    n > 0 && digits.len() <= limit && digits.first() != Some(&b'.')
}

/// A line read by the grammar of one InfluxDB version: a [`LineView`] for 1.x and 2.x, the
/// [`Point`] InfluxDB 3's parser gives for 3.x.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed<'a> {
    Go(LineView<'a>),
    V3(Point<'a>),
}

/// Reads one line (without its newline) by the grammar of `backend`, accepting and refusing
/// exactly what [`parse_line`] does, for the same reasons.
pub fn parse_view(line: &str, backend: Backend) -> Result<Parsed<'_>, String> {
    let read = match backend {
        Backend::V1 => LineView::go(line, false).map(Parsed::Go),
        Backend::V2 => LineView::go(line, true).map(Parsed::Go),
        Backend::V3 => return parse_line(line, backend).map(Parsed::V3),
    };
    read.map_err(|reason| explain(line, reason, backend))
}

/// Reads `line` (without its newline) in one pass when it is plain ([`super::plain`]: no
/// escape, short plain numbers, strings without escapes), telling `visit` of its measurement and of each
/// field (key, value as written, type) as it goes; `None` when the line is not plain, or
/// `backend` is 3.x, and only the full grammar ([`parse_view`]) reads it. A line it reads is
/// one [`parse_view`] accepts for `backend`, read the same.
pub fn view_plain<'a>(
    line: &'a str,
    backend: Backend,
    visit: &mut impl PlainFields<'a>,
) -> Option<LineView<'a>> {
    let unsigned = match backend {
        Backend::V1 => false,
        Backend::V2 => true,
        Backend::V3 => return None,
    };
    read_plain(line, unsigned, visit).map(|p| LineView::of_plain(line, unsigned, p))
}

/// [`parse_view`], the line's fields (keys unescaped) and their types put in `fields` as well
/// (emptied first; left empty or partial when the line is refused): what a caller would
/// otherwise walk the line's fields again for.
pub fn parse_view_typed<'a>(
    line: &'a str,
    backend: Backend,
    fields: &mut FieldTypes<'a>,
) -> Result<Parsed<'a>, String> {
    let read = match backend {
        Backend::V1 => LineView::go_typed(line, false, fields).map(Parsed::Go),
        Backend::V2 => LineView::go_typed(line, true, fields).map(Parsed::Go),
        Backend::V3 => {
            fields.clear();
            let p = parse_line(line, backend)?;
            fields.extend(p.fields.iter().map(|(k, v)| (k.clone(), v.field_type())));
            return Ok(Parsed::V3(p));
        }
    };
    read.map_err(|reason| explain(line, reason, backend))
}

/// Either of two iterators of one item type.
enum Either<A, B> {
    A(A),
    B(B),
}

impl<T, A: Iterator<Item = T>, B: Iterator<Item = T>> Iterator for Either<A, B> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        match self {
            Either::A(a) => a.next(),
            Either::B(b) => b.next(),
        }
    }
}

impl<'a> Parsed<'a> {
    /// The measurement, unescaped.
    pub fn measurement(&self) -> Cow<'a, str> {
        match self {
            Parsed::Go(v) => v.measurement(),
            Parsed::V3(p) => p.measurement.clone(),
        }
    }

    /// The tags, unescaped, in the order written.
    pub fn tags(&self) -> impl Iterator<Item = (Cow<'a, str>, Cow<'a, str>)> + '_ {
        match self {
            Parsed::Go(v) => Either::A(v.tags()),
            Parsed::V3(p) => Either::B(p.tags.iter().cloned()),
        }
    }

    /// The value of tag `key`.
    pub fn tag(&self, key: &str) -> Option<Cow<'a, str>> {
        match self {
            Parsed::Go(v) => v.tag(key),
            Parsed::V3(_) => self.tags().find(|(k, _)| k == key).map(|(_, v)| v),
        }
    }

    /// The fields' keys, unescaped, and their types, in the order written.
    pub fn field_types(&self) -> impl Iterator<Item = (Cow<'a, str>, FieldType)> + '_ {
        match self {
            Parsed::Go(v) => Either::A(v.fields().map(|f| (f.key(), f.field_type()))),
            Parsed::V3(p) => Either::B(p.fields.iter().map(|(k, v)| (k.clone(), v.field_type()))),
        }
    }

    /// The timestamp as written, in the request's precision.
    pub fn timestamp(&self) -> Option<i64> {
        match self {
            Parsed::Go(v) => v.timestamp(),
            Parsed::V3(p) => p.timestamp,
        }
    }

    /// Where the field set ends in the line (see [`Point::fields_end`]).
    pub fn fields_end(&self) -> usize {
        match self {
            Parsed::Go(v) => v.fields_end(),
            Parsed::V3(p) => p.fields_end,
        }
    }

    /// The whole [`Point`] (a view's line read again, by [`parse_line`]).
    pub fn to_point(&self) -> Result<Point<'a>, String> {
        match self {
            Parsed::Go(v) => v.to_point(),
            Parsed::V3(p) => Ok(p.clone()),
        }
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
