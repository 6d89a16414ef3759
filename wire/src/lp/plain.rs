//! The common line read in one pass: a line without escapes or odd spacing
//! (`disk,host=a,dev=sda util=1.5,n=2i 1700000000000000000`: what agents, Telegraf and most
//! clients write) has its measurement, tags, fields, field types and timestamp found by one
//! walk over its bytes, where the full reading ([`super::scan`], then the view's check of each
//! value and the type check's walk over the fields) walks the field set three times.
//!
//! [`read_plain`] only ever accepts: it answers `None` for anything it does not recognise as
//! plainly good, and the caller then reads the line by the full grammar, which accepts or
//! refuses it with influxd's words. What it accepts it reads exactly as the full grammar does
//! (same positions, same timestamp; tests in `view_tests.rs`, over InfluxDB's own parser tests
//! in `wire/fixtures/lp-corpus` and generated lines). It gives up, so the full grammar decides,
//! on:
//!
//! * a backslash anywhere before the timestamp but before a space, a comma or an equals sign in a
//!   tag value; a byte below 0x20 (tab, NUL, CR) anywhere before it; a double quote anywhere but
//!   around a string field's value;
//! * anything but exactly one space between the parts, a space after the timestamp;
//! * an empty or odd name (a tag key with ' ' or ',', a tag value with '='), a repeated tag key,
//!   more than [`MAX_TAGS`] tags, on 2.x a tag key 2.x keeps for itself;
//! * a value other than a string without escapes, a boolean word or a short plain number
//!   (`-?[0-9]+(\.[0-9]*)?` of at most 23 digits before the point and 64 characters in all,
//!   an integer of at most 18 digits, an unsigned one of at most 19): the numbers the Go parser
//!   reads without a range check;
//! * a timestamp of more than 19 digits or out of the `i64` range;
//! * a key near the 1.x/2.x key-length limit.
//!
//! The reading tells a [`PlainFields`] of the line's measurement and of each field (key, value
//! as written, type) as it reaches them, so a caller that wants the fields (the collector's type
//! check, its remote-write encoder) walks none of them again; [`plain_number`] reads a value the
//! reading gave as a number, as the full grammar's value reading does.

use super::parse::FieldType;
use super::rules::MAX_KEY_BYTES;
use super::scan::go_parse_float;

/// Tags compared pairwise for a repeated key; a line with more is read by the full grammar.
pub(crate) const MAX_TAGS: usize = 32;

/// Where the parts of a plain line are (the line starts at 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlainLine {
    /// Where the measurement and tags end (the space before the fields).
    pub key_end: usize,
    /// Where the measurement ends.
    pub name_end: usize,
    /// Where the first tag starts (`key_end` when there is none).
    pub tags: usize,
    /// The field set.
    pub fields: (usize, usize),
    pub timestamp: Option<i64>,
}

/// Bytes that end a name in a plain line, or make it not plain.
const STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = true;
        c += 1;
    }
    t[b',' as usize] = true;
    t[b' ' as usize] = true;
    t[b'=' as usize] = true;
    t[b'\\' as usize] = true;
    t[b'"' as usize] = true;
    t
};

/// The first byte at or after `i` that ends a name (or the end of `buf`).
#[inline]
fn name_end(buf: &[u8], mut i: usize) -> usize {
    while i < buf.len() && !STOP[buf[i] as usize] {
        i += 1;
    }
    i
}

/// The end of a tag value starting at `i` (as [`name_end`]), a backslash before a space, a comma
/// or an equals sign taken with it (`model=SEAGATE\ ST600`: the escapes every grammar reads
/// alike); `None` at any other backslash.
#[inline]
fn tag_value_end(buf: &[u8], mut i: usize) -> Option<usize> {
    loop {
        i = name_end(buf, i);
        if buf.get(i) != Some(&b'\\') {
            return Some(i);
        }
        match buf.get(i + 1) {
            Some(b' ' | b',' | b'=') => i += 2,
            _ => return None,
        }
    }
}

/// Tag keys 2.x keeps for itself.
const V2_RESERVED: [&[u8]; 3] = [b"_measurement", b"_field", b"time"];

/// What the one-pass reading tells its caller as it reads a plain line. The measurement and
/// the field keys as written are the names unescaped (a plain line has no escape in them; its
/// tag values may, and its series key as written keeps them: [`LineView::tags`] unescapes).
/// It may be told of a line's measurement and some of its fields and then find the line not
/// plain.
///
/// [`LineView::tags`]: super::view::LineView::tags
pub trait PlainFields<'a> {
    /// The series key (the measurement and tags as written), once the tags are read and just
    /// before [`PlainFields::measurement`].
    fn series_key(&mut self, _key: &'a str) {}

    /// The measurement, once the tags are read and before any field.
    fn measurement(&mut self, _name: &'a str) {}

    /// A field, in written order: its key, its value as written and the value's type.
    fn field(&mut self, key: &'a str, value: &'a str, ty: FieldType);
}

/// A [`PlainFields`] that is told only of the fields, by a closure ([`on_field`]).
#[derive(Debug)]
pub struct OnField<F>(F);

/// The fields of a plain line told to `f` (key, value, type).
pub fn on_field<'a, F: FnMut(&'a str, &'a str, FieldType)>(f: F) -> OnField<F> {
    OnField(f)
}

impl<'a, F: FnMut(&'a str, &'a str, FieldType)> PlainFields<'a> for OnField<F> {
    #[inline]
    fn field(&mut self, key: &'a str, value: &'a str, ty: FieldType) {
        (self.0)(key, value, ty)
    }
}

/// Reads `line` (without its newline) in one pass when it is plain, telling `visit` of the
/// measurement and of each field in written order; `None` when it is not plain.
pub(crate) fn read_plain<'a>(
    line: &'a str,
    unsigned: bool,
    visit: &mut impl PlainFields<'a>,
) -> Option<PlainLine> {
    let buf = line.as_bytes();
    // The measurement: up to the first ',' or ' ', '=' included.
    let mut i = 0;
    loop {
        i = name_end(buf, i);
        match buf.get(i) {
            Some(b'=') => i += 1,
            Some(b',' | b' ') if i > 0 => break,
            _ => return None,
        }
    }
    let name_end_at = i;
    let mut tags = i;
    if buf[i] == b',' {
        i += 1;
        tags = i;
        let mut keys = [(0usize, 0usize); MAX_TAGS];
        let mut n = 0;
        loop {
            let t = i;
            i = name_end(buf, i);
            if i == t || buf.get(i) != Some(&b'=') {
                return None;
            }
            let key = &buf[t..i];
            if n == MAX_TAGS
                || keys[..n].iter().any(|&(a, b)| &buf[a..b] == key)
                || (unsigned && V2_RESERVED.contains(&key))
            {
                return None;
            }
            keys[n] = (t, i);
            n += 1;
            let v = i + 1;
            i = tag_value_end(buf, v)?;
            if i == v {
                return None;
            }
            match buf.get(i) {
                Some(b',') => i += 1,
                Some(b' ') => break,
                _ => return None,
            }
        }
    }
    let key_end = i;
    if key_end > MAX_KEY_BYTES {
        return None;
    }
    visit.series_key(line.get(..key_end)?);
    visit.measurement(line.get(..name_end_at)?);
    // The fields, after exactly one space.
    i += 1;
    let start = i;
    loop {
        let k = i;
        i = name_end(buf, i);
        if i == k || buf.get(i) != Some(&b'=') {
            return None;
        }
        let (end, ty) = value(buf, i + 1, unsigned)?;
        visit.field(line.get(k..i)?, line.get(i + 1..end)?, ty);
        i = end;
        match buf.get(i) {
            Some(b',') => i += 1,
            _ => break,
        }
    }
    let fields = (start, i);
    if key_end + 4 + (fields.1 - fields.0) > MAX_KEY_BYTES {
        return None;
    }
    let timestamp = if i < buf.len() {
        // `value` ends at ',' or ' ' or the end: a space here.
        Some(plain_timestamp(buf.get(i + 1..)?)?)
    } else {
        None
    };
    Some(PlainLine {
        key_end,
        name_end: name_end_at,
        tags,
        fields,
        timestamp,
    })
}

/// A plain value starting at `i`: where it ends (at ',', ' ' or the end of the line) and its
/// type.
#[inline]
fn value(buf: &[u8], mut i: usize, unsigned: bool) -> Option<(usize, FieldType)> {
    let first = *buf.get(i)?;
    let ty = match first {
        b'0'..=b'9' | b'-' => {
            let neg = first == b'-';
            i += usize::from(neg);
            let d0 = i;
            while i < buf.len() && buf[i].is_ascii_digit() {
                i += 1;
            }
            let digits = i - d0;
            if digits == 0 {
                return None;
            }
            match buf.get(i) {
                Some(b'.') => {
                    i += 1;
                    while i < buf.len() && buf[i].is_ascii_digit() {
                        i += 1;
                    }
                    if digits > 23 || i - d0 > FLOAT_CHARS {
                        return None;
                    }
                    FieldType::Float
                }
                Some(b'i') if digits <= 18 => {
                    i += 1;
                    FieldType::Integer
                }
                Some(b'u') if unsigned && !neg && digits <= 19 => {
                    i += 1;
                    FieldType::Unsigned
                }
                _ if digits <= 23 => FieldType::Float,
                _ => return None,
            }
        }
        b'"' => {
            // a string without escapes: up to the next quote (a backslash or a control byte in
            // it, or no end: not plain)
            i += 1;
            loop {
                match *buf.get(i)? {
                    b'"' => break,
                    b'\\' => return None,
                    c if c < 0x20 => return None,
                    _ => i += 1,
                }
            }
            i += 1;
            FieldType::String
        }
        b't' | b'f' | b'T' | b'F' => {
            let s = i;
            while i < buf.len() && buf[i].is_ascii_alphabetic() {
                i += 1;
            }
            let word = &buf[s..i];
            if word.len() != 1
                && !matches!(
                    word,
                    b"true" | b"True" | b"TRUE" | b"false" | b"False" | b"FALSE"
                )
            {
                return None;
            }
            FieldType::Boolean
        }
        _ => return None,
    };
    match buf.get(i) {
        None | Some(b',' | b' ') => Some((i, ty)),
        _ => None,
    }
}

/// A timestamp that is all of `buf`: `-?[0-9]{1,19}` within `i64`, as the one-pass reading
/// reads one (and the remote-write encoder's reading of a known series' line).
#[inline]
pub fn plain_timestamp(buf: &[u8]) -> Option<i64> {
    let (neg, digits) = match buf.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, buf),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let mut mag: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        // 19 digits fit a u64.
        mag = mag * 10 + u64::from(c - b'0');
    }
    if neg {
        0i64.checked_sub_unsigned(mag)
    } else {
        i64::try_from(mag).ok()
    }
}

/// Characters of a plain float with a point at most, digits and point (its whole part at most
/// 23 digits): what `Display` writes for the agent's small fractions (a probability of 1e-9 is
/// `0.000000001234567890123456`, 26) fits; a longer one is read by the full grammar. With at
/// most 23 digits before the point and 63 in all, the value is neither out of range (the Go
/// parser's error) nor below the smallest double.
const FLOAT_CHARS: usize = 64;

/// Powers of ten a double holds exactly.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// A value the one-pass reading gave ([`PlainFields::field`]) as a number: a float, an integer
/// or an unsigned one as the full grammar reads it (then `as f64`), a boolean as 1 or 0; `None`
/// for a string or a value the reading would not have given.
///
/// A float of at most 15 digits is its digits as an integer divided by a power of ten: both
/// exact in a double, so the one rounding of the division gives the nearest double to the
/// decimal, as `str::parse` does (Clinger's fast path); longer ones are parsed as the full
/// grammar parses them. The reading's integers (at most 18 digits) fit an `i64`, its unsigned
/// ones (at most 19) a `u64`.
pub fn plain_number(value: &str, ty: FieldType) -> Option<f64> {
    let b = value.as_bytes();
    match ty {
        FieldType::Boolean => {
            return match value {
                "t" | "T" | "true" | "True" | "TRUE" => Some(1.0),
                "f" | "F" | "false" | "False" | "FALSE" => Some(0.0),
                _ => None,
            }
        }
        FieldType::String => return None,
        FieldType::Float | FieldType::Integer | FieldType::Unsigned => {}
    }
    let negative = b.first() == Some(&b'-');
    let mut i = usize::from(negative);
    let start = i;
    let mut m: u64 = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        m = m.wrapping_mul(10).wrapping_add(u64::from(b[i] - b'0'));
        i += 1;
    }
    let whole = i - start;
    let limit = match ty {
        FieldType::Integer => 18,
        FieldType::Unsigned => 19,
        _ => 23,
    };
    if whole == 0 || whole > limit {
        return None;
    }
    match (ty, b.get(i)) {
        (FieldType::Integer, Some(b'i')) if i + 1 == b.len() => {
            // at most 18 digits: no overflow above
            let n = m as i64;
            return Some(if negative { -n } else { n } as f64);
        }
        (FieldType::Unsigned, Some(b'u')) if i + 1 == b.len() && !negative => {
            return Some(m as f64);
        }
        (FieldType::Float, None) => {}
        (FieldType::Float, Some(b'.')) => {
            i += 1;
            let f = i;
            while i < b.len() && b[i].is_ascii_digit() {
                m = m.wrapping_mul(10).wrapping_add(u64::from(b[i] - b'0'));
                i += 1;
            }
            if i != b.len() || i - start > FLOAT_CHARS {
                return None;
            }
            let frac = i - f;
            if whole + frac <= 15 {
                let f = m as f64 / POW10[frac];
                return Some(if negative { -f } else { f });
            }
            return go_parse_float(value).ok();
        }
        _ => return None,
    }
    if whole <= 15 {
        let f = m as f64;
        return Some(if negative { -f } else { f });
    }
    go_parse_float(value).ok()
}
