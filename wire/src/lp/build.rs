//! Reports → InfluxDB line protocol.
//!
//! Lines are written straight into one reusable buffer with the escaping and cleaning of
//! [`super::rules`], so that every InfluxDB version reads back what was written:
//!
//! * separators are escaped (measurement: `,` and space; tag keys, tag values and field keys:
//!   `,`, `=`, space; string fields: `"` and `\`); a backslash that versions read differently
//!   (before another backslash, a separator or `"`, or at the end) is dropped;
//! * control characters in names, tag values and string fields become spaces (a newline would
//!   start a second line);
//! * empty tag values are omitted (InfluxDB treats a missing tag and an empty one alike); a tag
//!   or field named `time` is skipped (it is the timestamp's name);
//! * non-finite floats are skipped (counted in [`LineWriter::skipped`]); a line left without a
//!   field, or whose measurement is empty or starts with `#`, is not written;
//! * integers are written with the `i` suffix — InfluxDB 1.x has no unsigned type — and
//!   values above `i64::MAX` saturate.
//!
//! The `influxdb-line-protocol` crate's builder formats every character through `core::fmt`: on a
//! 250-device report it cost ~57,000 instructions a line, half of the agent's whole CPU budget
//! (callgrind). The validator of every version is the judge: the tests and a property test check
//! that everything written here passes each of them and reads back to the same values.
//!
//! Tags come in the order the caller gives them, after the writer's common tags (`host`, then
//! the configured extra tags, sorted); callers add tags and fields in a fixed order so output is
//! deterministic and snapshot-testable.

use super::rules::{
    clean_name, clean_string, clean_tag_value, escape_name_into, escape_string_into,
    float_is_storable, is_plain, key_is_writable, measurement_is_writable, KEY_SPECIAL,
    MEASUREMENT_SPECIAL, PLAIN, RESERVED_KEY,
};

mod digits;
mod fields;

pub use fields::{EncodedFields, FieldText, Fields, FieldsMark};

use digits::{
    append_prefix, i64_at, milli_at, push_f64, push_i64, rounded_thousandths, saturate, thousandths,
};

/// A field value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// A float; skipped when not finite.
    F(f64),
    /// A signed integer.
    I(i64),
    /// An unsigned integer, written as a signed one (saturating).
    U(u64),
    /// A boolean.
    B(bool),
    /// A string.
    S(&'a str),
}

impl From<f64> for Value<'_> {
    fn from(v: f64) -> Self {
        Self::F(v)
    }
}
impl From<i64> for Value<'_> {
    fn from(v: i64) -> Self {
        Self::I(v)
    }
}
impl From<u64> for Value<'_> {
    fn from(v: u64) -> Self {
        Self::U(v)
    }
}
impl From<u32> for Value<'_> {
    fn from(v: u32) -> Self {
        Self::U(u64::from(v))
    }
}
impl From<bool> for Value<'_> {
    fn from(v: bool) -> Self {
        Self::B(v)
    }
}
impl<'a> From<&'a str> for Value<'a> {
    fn from(v: &'a str) -> Self {
        Self::S(v)
    }
}

/// Accumulates the lines of one report.
#[derive(Debug, Default)]
pub struct LineWriter {
    buf: Vec<u8>,
    /// The common tags, encoded once (`,host=…,k=v…`): copied into every line.
    common: Vec<u8>,
    /// `common` and [`PAD`] zeros, for copies 16 bytes at a time.
    common_padded: Vec<u8>,
    /// The end of a line stamped `stamp_ns` (` <ts>\n`, at most 22 bytes, padded with zeros),
    /// encoded once for the lines of a report, which share their timestamp: copied by one copy
    /// of a fixed size where there is room for it.
    stamp: [u8; STAMP_ROOM],
    /// The bytes of `stamp` written; 0 before the first line.
    stamp_len: usize,
    stamp_ns: i64,
    /// Where [`Fields`] puts a line together before it is appended to `buf`: kept long between
    /// lines (what is past the line is left from the last), so that a field is written into
    /// bytes that are there already.
    scratch: Vec<u8>,
    lines: usize,
    skipped: usize,
}

impl LineWriter {
    /// A writer whose lines all carry `host=<host>` and then `extra_tags` (sorted by key).
    pub fn new(host: &str, extra_tags: &[(String, String)]) -> Self {
        let mut common_tags = vec![("host".to_owned(), host.to_owned())];
        let mut extra: Vec<_> = extra_tags
            .iter()
            .filter(|(k, _)| k != "host")
            .cloned()
            .collect();
        extra.sort();
        common_tags.extend(extra);
        let mut common = Vec::new();
        for (k, v) in &common_tags {
            push_tag(&mut common, k, v);
        }
        let mut common_padded = common.clone();
        common_padded.resize(common.len() + PAD, 0);
        Self {
            // A report's first 64 KiB without a growth: growing from nothing took ~15
            // `realloc`s a report, each a move of the buffer where the heap had no room after it.
            buf: Vec::with_capacity(64 * 1024),
            common,
            common_padded,
            // Allocated with the writer, long enough for any line the agent writes: it does not
            // grow while a report is written.
            scratch: vec![0; fields::SCRATCH],
            ..Self::default()
        }
    }

    /// Starts a line of the series `key` (its measurement and tags encoded once, see
    /// [`SeriesKey`]) stamped `ts_ns`: the same bytes as [`LineWriter::line`] with the same
    /// measurement and tags, without cleaning and escaping them again. More tags may follow.
    pub fn line_of<'a>(&'a mut self, key: &SeriesKey, ts_ns: i64) -> Line<'a> {
        let start = self.buf.len();
        self.buf.extend_from_slice(&key.bytes[..key.measurement]);
        self.buf.extend_from_slice(&self.common);
        self.buf
            .extend_from_slice(&key.bytes[key.measurement..key.len]);
        Line {
            w: self,
            start,
            ts_ns,
            fields: 0,
            writable: key.writable,
            done: false,
        }
    }

    /// Starts a line of `measurement` stamped `ts_ns`; finish it with [`Line::write`]. The line
    /// is written into the report's buffer as it is built (no allocation per line); a line
    /// dropped without `write`, or left without a valid field, is taken back out.
    pub fn line<'a>(&'a mut self, measurement: &'a str, ts_ns: i64) -> Line<'a> {
        let start = self.buf.len();
        let measurement = clean_name(measurement);
        let writable = measurement_is_writable(&measurement);
        escape_name_into(&mut self.buf, &measurement, MEASUREMENT_SPECIAL);
        self.buf.extend_from_slice(&self.common);
        Line {
            w: self,
            start,
            ts_ns,
            fields: 0,
            writable,
            done: false,
        }
    }

    /// The bytes written so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Takes the bytes written so far, leaving the writer empty (the counters stay).
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// Empties the writer for the next report, keeping its buffers (and so their size: a report
    /// as long as the last one is written without a growth); the counters start again at 0.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.lines = 0;
        self.skipped = 0;
    }

    /// Lines written since creation (or [`LineWriter::clear`]).
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Values skipped (non-finite floats, unwritable keys) and lines dropped (no field, no
    /// writable measurement) since creation (or [`LineWriter::clear`]).
    pub fn skipped(&self) -> usize {
        self.skipped
    }
}

/// A measurement and its tags (after the writer's common tags) cleaned and escaped once, for a
/// series written at every report: [`LineWriter::line_of`] copies its bytes. It holds no
/// common tag, so one key serves any writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesKey {
    /// The escaped measurement, then the escaped `,key=value` tags, then [`PAD`] zeros.
    bytes: Vec<u8>,
    /// Where the tags end in `bytes`.
    len: usize,
    /// Where the measurement ends in `bytes`.
    measurement: usize,
    /// The measurement name can start a line.
    writable: bool,
}

impl SeriesKey {
    /// The key of `measurement` with `tags` in this order, by the rules of [`Line::tag`] (an
    /// empty value is omitted).
    pub fn new(measurement: &str, tags: &[(&str, &str)]) -> Self {
        let measurement = clean_name(measurement);
        let writable = measurement_is_writable(&measurement);
        let mut bytes = Vec::new();
        escape_name_into(&mut bytes, &measurement, MEASUREMENT_SPECIAL);
        let end = bytes.len();
        for (k, v) in tags {
            push_tag(&mut bytes, k, v);
        }
        let len = bytes.len();
        bytes.resize(len + PAD, 0);
        Self {
            bytes,
            len,
            measurement: end,
            writable,
        }
    }
}

/// A field key fixed when the program is compiled and checked then: [`Line::field_key`] writes
/// it as it is, without the checks [`Line::field`] makes of every key at every line (a third of
/// a field's cost for the ~2,500 fields of 100 jobs' lines). Made in a `const`
/// (`const CORES: FieldKey = FieldKey::new("cores");`), a key that would need escaping or
/// cleaning, an empty one or `time` does not compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldKey {
    key: &'static str,
    /// `,`, the key and `=`, padded with zeros: copied whole (a fixed-size copy, no call) into
    /// the field being written.
    bytes: [u8; KEY_ROOM],
}

/// Bytes of a [`FieldKey`]'s encoded form: the separator, the key (at most 46 bytes) and `=`.
const KEY_ROOM: usize = 48;
/// Room for a number's text: at most 21 bytes (a sign, 19 digits and `i`; a float of the
/// thousandths form, 18), with margin.
const NUMBER_ROOM: usize = 32;
/// Room for one field written by [`Line::field_key`]: the key's and a number's.
const FIELD_ROOM: usize = KEY_ROOM + NUMBER_ROOM;
/// Room for a line's end: a space, a timestamp (at most 20 bytes) and a newline.
const STAMP_ROOM: usize = 24;
/// Zeros after the bytes of a series key and of the common tags: [`Fields`] copies them by
/// copies of a fixed size (16, 32 or 64 bytes, no call), the last past their end.
const PAD: usize = 32;

impl FieldKey {
    /// The key `key`: only bytes written as they are anywhere in a line (printable ASCII but
    /// space, `,`, `=`, `"` and `\`), not empty, not `time`. Panics otherwise — when the
    /// program is compiled, in a `const`.
    pub const fn new(key: &'static str) -> Self {
        let b = key.as_bytes();
        assert!(!b.is_empty(), "a field key is empty");
        let r = RESERVED_KEY.as_bytes();
        let mut reserved = b.len() == r.len();
        let mut i = 0;
        while i < b.len() {
            assert!(
                PLAIN[b[i] as usize],
                "a field key needs escaping or cleaning"
            );
            if reserved && b[i] != r[i] {
                reserved = false;
            }
            i += 1;
        }
        assert!(!reserved, "a field key is `time`");
        assert!(
            b.len() + 2 <= KEY_ROOM,
            "a field key is longer than 46 bytes"
        );
        let mut bytes = [0u8; KEY_ROOM];
        bytes[0] = b',';
        let mut i = 0;
        while i < b.len() {
            bytes[i + 1] = b[i];
            i += 1;
        }
        bytes[b.len() + 1] = b'=';
        Self { key, bytes }
    }

    /// The key.
    pub const fn as_str(&self) -> &'static str {
        self.key
    }
}

/// One line being built: tags first, then fields, then [`Line::write`].
#[derive(Debug)]
pub struct Line<'a> {
    w: &'a mut LineWriter,
    /// Where the line starts in the buffer, to take it back.
    start: usize,
    ts_ns: i64,
    /// Fields written so far.
    fields: usize,
    /// The measurement name can start a line.
    writable: bool,
    done: bool,
}

impl<'a> Line<'a> {
    /// Adds a tag; an empty value is omitted. Tags come before fields: a tag added after a
    /// field is a programming error, ignored (and caught by debug builds).
    pub fn tag(self, key: &str, value: &str) -> Self {
        debug_assert!(self.fields == 0, "tag {key} added after a field");
        if self.fields == 0 {
            push_tag(&mut self.w.buf, key, value);
        }
        self
    }

    /// Adds a field; a non-finite float is skipped (and counted).
    pub fn field(mut self, key: &str, value: impl Into<Value<'a>>) -> Self {
        let value = value.into();
        if !key.is_empty()
            && is_plain(key)
            && key != RESERVED_KEY
            && !matches!(value, Value::F(f) if !float_is_storable(f))
        {
            // Nearly every key: written as it is, one scan instead of cleaning and escaping.
            self.w.buf.push(if self.fields == 0 { b' ' } else { b',' });
            self.w.buf.extend_from_slice(key.as_bytes());
            self.w.buf.push(b'=');
            value_into(&mut self.w.buf, value);
            self.fields += 1;
            return self;
        }
        let key = clean_name(key);
        if matches!(value, Value::F(f) if !float_is_storable(f)) || !key_is_writable(&key) {
            self.w.skipped += 1;
            return self;
        }
        self.w.buf.push(if self.fields == 0 { b' ' } else { b',' });
        field_into(&mut self.w.buf, &key, value);
        self.fields += 1;
        self
    }

    /// [`Line::field`] with a key checked at compile time: the same bytes, without checking the
    /// key again.
    pub fn field_key(mut self, key: FieldKey, value: impl Into<Value<'a>>) -> Self {
        let value = value.into();
        if matches!(value, Value::F(f) if !float_is_storable(f)) {
            self.w.skipped += 1;
            return self;
        }
        // The field is put together on the stack (the key by a fixed-size copy, the number's
        // digits in place) and appended in one copy: a push or a copy call per piece was half
        // of a field's cost.
        let mut f = [0u8; FIELD_ROOM];
        if let Some(k) = f.get_mut(..KEY_ROOM) {
            k.copy_from_slice(&key.bytes);
        }
        if let Some(sep) = f.get_mut(0) {
            *sep = if self.fields == 0 { b' ' } else { b',' };
        }
        let at = key.key.len() + 2;
        let end = match value {
            Value::F(v) => thousandths(v).map(|m| milli_at(&mut f, at, m)),
            Value::I(i) => Some(i64_at(&mut f, at, i)),
            Value::U(u) => Some(i64_at(&mut f, at, saturate(u))),
            Value::B(_) | Value::S(_) => None,
        };
        match end {
            Some(end) => append_prefix(&mut self.w.buf, &f, end),
            None => {
                self.w
                    .buf
                    .extend_from_slice(f.get(..at).unwrap_or_default());
                value_into(&mut self.w.buf, value);
            }
        }
        self.fields += 1;
        self
    }

    /// [`Line::field_key`] of `v` rounded to three decimals, `(v * 1000).round() / 1000`: the
    /// same bytes, with one rounding where the rounded float, written, would be rounded again
    /// to find its thousandths. Inlined: the key, a constant, is then copied by stores of
    /// its bytes, and the line stays in the caller's registers between fields.
    #[inline]
    pub fn field_key_r3(mut self, key: FieldKey, v: f64) -> Self {
        let Some(m) = rounded_thousandths(v) else {
            // NaN and the infinities (skipped), -0, 1e12 and beyond: the float.
            return self.field_key(key, (v * 1000.0).round() / 1000.0);
        };
        let mut f = [0u8; FIELD_ROOM];
        if let Some(k) = f.get_mut(..KEY_ROOM) {
            k.copy_from_slice(&key.bytes);
        }
        if let Some(sep) = f.get_mut(0) {
            *sep = if self.fields == 0 { b' ' } else { b',' };
        }
        let end = milli_at(&mut f, key.key.len() + 2, m);
        append_prefix(&mut self.w.buf, &f, end);
        self.fields += 1;
        self
    }

    /// [`Line::field_key_r3`] when `v` is `Some`.
    #[inline]
    pub fn field_key_r3_opt(self, key: FieldKey, v: Option<f64>) -> Self {
        match v {
            Some(v) => self.field_key_r3(key, v),
            None => self,
        }
    }

    /// [`Line::field_key`] when `value` is `Some`.
    pub fn field_key_opt<V: Into<Value<'a>>>(self, key: FieldKey, value: Option<V>) -> Self {
        match value {
            Some(v) => self.field_key(key, v),
            None => self,
        }
    }

    /// Adds a field when `value` is `Some`.
    pub fn field_opt<V: Into<Value<'a>>>(self, key: &str, value: Option<V>) -> Self {
        match value {
            Some(v) => self.field(key, v),
            None => self,
        }
    }

    /// Ends the line with its timestamp; returns false (and takes the line back) when it has no
    /// valid field.
    pub fn write(mut self) -> bool {
        self.done = true;
        if self.fields == 0 || !self.writable {
            self.w.buf.truncate(self.start);
            self.w.skipped += 1;
            return false;
        }
        self.w.end_line(self.ts_ns);
        true
    }
}

impl LineWriter {
    /// Ends the line being written with the timestamp `ts_ns` and counts it.
    fn end_line(&mut self, ts_ns: i64) {
        self.stamp(ts_ns);
        self.buf
            .extend_from_slice(self.stamp.get(..self.stamp_len).unwrap_or_default());
        self.lines += 1;
    }

    /// Makes `stamp` the end of a line stamped `ts_ns`.
    #[inline]
    fn stamp(&mut self, ts_ns: i64) {
        if self.stamp_len == 0 || self.stamp_ns != ts_ns {
            self.new_stamp(ts_ns);
        }
    }

    #[cold]
    fn new_stamp(&mut self, ts_ns: i64) {
        let mut s = Vec::with_capacity(STAMP_ROOM);
        s.push(b' ');
        push_i64(&mut s, ts_ns);
        s.push(b'\n');
        self.stamp = [0; STAMP_ROOM];
        if let Some(d) = self.stamp.get_mut(..s.len()) {
            d.copy_from_slice(&s);
        }
        self.stamp_len = s.len().min(STAMP_ROOM);
        self.stamp_ns = ts_ns;
    }
}

impl Drop for Line<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.w.buf.truncate(self.start);
        }
    }
}

/// Appends `,key=value` with the value cleaned; nothing for an empty value.
fn push_tag(buf: &mut Vec<u8>, key: &str, value: &str) {
    let v = clean_tag_value(value);
    let key = clean_name(key);
    if !v.is_empty() && key_is_writable(&key) {
        buf.push(b',');
        escape_name_into(buf, &key, KEY_SPECIAL);
        buf.push(b'=');
        escape_name_into(buf, &v, KEY_SPECIAL);
    }
}

fn field_into(buf: &mut Vec<u8>, key: &str, v: Value<'_>) {
    escape_name_into(buf, key, KEY_SPECIAL);
    buf.push(b'=');
    value_into(buf, v);
}

fn value_into(buf: &mut Vec<u8>, v: Value<'_>) {
    // A number is put together on the stack and appended by one copy of a known size.
    let mut n = [0u8; NUMBER_ROOM];
    match v {
        Value::F(f) => match thousandths(f) {
            Some(m) => {
                let end = milli_at(&mut n, 0, m);
                append_prefix(buf, &n, end);
            }
            None => push_f64(buf, f),
        },
        Value::I(i) => {
            let end = i64_at(&mut n, 0, i);
            append_prefix(buf, &n, end);
        }
        Value::U(u) => {
            let end = i64_at(&mut n, 0, saturate(u));
            append_prefix(buf, &n, end);
        }
        Value::B(x) => buf.extend_from_slice(if x { b"true" } else { b"false" }),
        Value::S(s) => {
            buf.push(b'"');
            escape_string_into(buf, &clean_string(s));
            buf.push(b'"');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::digits::push_u64;
    use super::*;
    use influxdb_line_protocol::{parse_lines, FieldValue};
    use proptest::prelude::*;

    fn text(w: &LineWriter) -> &str {
        std::str::from_utf8(w.as_bytes()).expect("utf8")
    }

    #[test]
    fn a_series_key_writes_the_bytes_of_line_and_tag() {
        let extra = vec![("site".to_owned(), "a b".to_owned())];
        let cases: &[(&str, &[(&str, &str)])] = &[
            (
                "job",
                &[
                    ("batch", "slurm"),
                    ("job", "12,3"),
                    ("slot", ""),
                    ("owner", "1000"),
                ],
            ),
            (
                "job io",
                &[("time", "x"), ("de=v", "sd a\\"), ("k", " \t ")],
            ),
            ("#comment", &[("a", "b")]),
            ("", &[]),
        ];
        for (m, tags) in cases {
            let key = SeriesKey::new(m, tags);
            let mut a = LineWriter::new("h,1", &extra);
            let mut b = LineWriter::new("h,1", &extra);
            let mut line = a.line(m, 7);
            for (k, v) in tags.iter() {
                line = line.tag(k, v);
            }
            let wa = line.tag("device", "sda").field("x", 1.5).write();
            let wb = b
                .line_of(&key, 7)
                .tag("device", "sda")
                .field("x", 1.5)
                .write();
            assert_eq!((wa, text(&a)), (wb, text(&b)), "{m} {tags:?}");
            assert_eq!(a.skipped(), b.skipped());
        }
    }

    #[test]
    fn each_line_ends_with_its_own_timestamp_when_they_change() {
        let mut w = LineWriter::new("h", &[]);
        for ts in [0, 5, 5, -7, 1_700_000_010_000_000_000, 0, i64::MIN] {
            assert!(w.line("m", ts).field("x", 1u64).write());
        }
        assert_eq!(
            text(&w),
            "m,host=h x=1i 0\nm,host=h x=1i 5\nm,host=h x=1i 5\nm,host=h x=1i -7\n\
             m,host=h x=1i 1700000010000000000\nm,host=h x=1i 0\n\
             m,host=h x=1i -9223372036854775808\n"
        );
    }

    #[test]
    fn common_tags_first_then_line_tags_in_order() {
        let mut w = LineWriter::new(
            "ds01",
            &[
                ("site".into(), "T2_X".into()),
                ("role".into(), "disk".into()),
            ],
        );
        assert!(w
            .line("disk", 1_700_000_010_000_000_000)
            .tag("device", "sda")
            .tag("name", "")
            .field("util_pct", 99.5)
            .field("saturated_s", 7u64)
            .field("ok", true)
            .write());
        assert_eq!(
            text(&w),
            "disk,host=ds01,role=disk,site=T2_X,device=sda util_pct=99.5,saturated_s=7i,ok=true 1700000010000000000\n"
        );
    }

    #[test]
    fn bad_values_are_cleaned_or_skipped() {
        let mut w = LineWriter::new("h", &[]);
        assert!(w
            .line("event", 5)
            .tag("object", "md0\nmalicious,x=1 y=2")
            .tag("trail", "ab\\")
            .field("nan", f64::NAN)
            .field("text", "line1\nline2 \"quoted\" back\\")
            .field("big", u64::MAX)
            .write());
        let out = text(&w);
        assert_eq!(out.lines().count(), 1, "{out}");
        let parsed: Vec<_> = parse_lines(out).collect::<Result<_, _>>().expect("parses");
        assert_eq!(parsed.len(), 1);
        let l = &parsed[0];
        let tags = l.series.tag_set.as_ref().expect("tags");
        let obj = tags
            .iter()
            .find(|(k, _)| k.as_str() == "object")
            .expect("object");
        assert_eq!(obj.1.as_str(), "md0 malicious,x=1 y=2");
        let trail = tags
            .iter()
            .find(|(k, _)| k.as_str() == "trail")
            .expect("trail");
        assert_eq!(trail.1.as_str(), "ab");
        assert!(l.field_set.iter().all(|(k, _)| k.as_str() != "nan"));
        assert_eq!(w.skipped(), 1);
        let big = l
            .field_set
            .iter()
            .find(|(k, _)| k.as_str() == "big")
            .expect("big");
        assert!(matches!(big.1, FieldValue::I64(i64::MAX)));
    }

    #[test]
    fn an_unfinished_line_leaves_no_trace() {
        let mut w = LineWriter::new("h", &[]);
        w.line("disk", 1)
            .tag("device", "sda")
            .field("util_pct", 5.0)
            .write();
        let before = w.as_bytes().len();
        drop(
            w.line("disk", 2)
                .tag("device", "sdb")
                .field("util_pct", 6.0),
        );
        assert_eq!(w.as_bytes().len(), before);
        assert_eq!(w.lines(), 1);
        assert_eq!(text(&w), "disk,host=h,device=sda util_pct=5 1\n");
    }

    #[test]
    fn a_line_without_valid_fields_is_not_written() {
        let mut w = LineWriter::new("h", &[]);
        assert!(!w
            .line("net", 1)
            .tag("iface", "eth0")
            .field("x", f64::INFINITY)
            .write());
        assert!(w.as_bytes().is_empty());
        assert_eq!(w.lines(), 0);
    }

    #[test]
    fn fast_number_formatting_matches_display() {
        let mut buf = Vec::new();
        for f in [
            0.0,
            -0.0,
            0.1,
            0.5,
            1.0,
            3.184,
            -3.184,
            95.0,
            99.999,
            100.0,
            0.001,
            0.01,
            12800.25,
            1e9,
            1e11 + 0.125,
            1e12,
            1e15,
            2.3e-7,
            1.0 / 3.0,
            f64::MAX,
            f64::MIN_POSITIVE,
        ] {
            buf.clear();
            push_f64(&mut buf, f);
            assert_eq!(
                std::str::from_utf8(&buf).expect("utf8"),
                format!("{f}"),
                "{f}"
            );
        }
        for i in [0, 1, -1, 9, 10, 12345, i64::MAX, i64::MIN] {
            buf.clear();
            push_i64(&mut buf, i);
            assert_eq!(std::str::from_utf8(&buf).expect("utf8"), i.to_string());
        }
    }

    proptest! {
        #[test]
        fn rounded_floats_print_like_display(k in -1_000_000_000_000_000i64..1_000_000_000_000_000i64) {
            let f = (k as f64 / 1000.0 * 1000.0).round() / 1000.0;
            let mut buf = Vec::new();
            push_f64(&mut buf, f);
            prop_assert_eq!(std::str::from_utf8(&buf).expect("utf8"), format!("{f}"));
        }

        #[test]
        fn any_float_prints_like_display(f in proptest::num::f64::NORMAL | proptest::num::f64::ZERO | proptest::num::f64::SUBNORMAL) {
            let mut buf = Vec::new();
            push_f64(&mut buf, f);
            prop_assert_eq!(std::str::from_utf8(&buf).expect("utf8"), format!("{f}"));
        }
    }

    /// The writer before the digit pairs and the integer rounding: one digit a division,
    /// `f64::round`. The new one must write the same bytes.
    fn old_push_u64(buf: &mut Vec<u8>, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        buf.extend_from_slice(&digits[i..]);
    }

    fn old_thousandths(f: f64) -> Option<i64> {
        let m = (f * 1000.0).round();
        (f.abs() < 1e12 && m / 1000.0 == f && !(f == 0.0 && f.is_sign_negative()))
            .then_some(m as i64)
    }

    #[test]
    fn digit_pairs_write_every_length_like_display() {
        let mut buf = Vec::new();
        let mut old = Vec::new();
        // Every power of ten and its neighbours: each number of digits, odd and even.
        let mut p: u64 = 1;
        loop {
            for v in [p - 1, p, p + 1, p.saturating_mul(5), p.saturating_mul(9)] {
                buf.clear();
                old.clear();
                push_u64(&mut buf, v);
                old_push_u64(&mut old, v);
                assert_eq!(std::str::from_utf8(&buf).expect("utf8"), v.to_string());
                assert_eq!(buf, old);
            }
            match p.checked_mul(10) {
                Some(n) => p = n,
                None => break,
            }
        }
        for v in (0..100_000).chain([u64::MAX, u64::MAX - 1, i64::MAX as u64]) {
            buf.clear();
            push_u64(&mut buf, v);
            assert_eq!(std::str::from_utf8(&buf).expect("utf8"), v.to_string());
        }
    }

    /// The integers and thousandths written eight digits at a time, at every number of digits
    /// (each power of ten and its neighbours), from several places, against `Display`.
    #[test]
    fn eight_digits_at_a_time_write_every_length_like_display() {
        let mut p: u64 = 1;
        loop {
            for v in [
                p - 1,
                p,
                p + 1,
                p.saturating_mul(5),
                p.saturating_mul(9),
                p.saturating_mul(2) - 1,
            ] {
                for at in [0, 1, 7, 47] {
                    let mut f = [b'x'; 80];
                    let i = i64::try_from(v).unwrap_or(i64::MAX);
                    for x in [i, -i] {
                        let end = i64_at(&mut f, at, x);
                        assert_eq!(
                            std::str::from_utf8(&f[at..end]).expect("utf8"),
                            format!("{x}i")
                        );
                        if x.unsigned_abs() < 1_000_000_000_000_000 {
                            let end = milli_at(&mut f, at, x);
                            let want = x as f64 / 1000.0;
                            assert_eq!(
                                std::str::from_utf8(&f[at..end]).expect("utf8"),
                                format!("{want}")
                            );
                        }
                    }
                }
            }
            match p.checked_mul(10) {
                Some(n) => p = n,
                None => break,
            }
        }
        for m in (-100_000..100_000)
            .chain((0..2_000_000_000).step_by(997))
            .chain([i64::MAX, i64::MIN + 1])
        {
            let mut f = [0u8; 32];
            let end = i64_at(&mut f, 0, m);
            assert_eq!(
                std::str::from_utf8(&f[..end]).expect("utf8"),
                format!("{m}i")
            );
            if m.unsigned_abs() < 1_000_000_000_000_000 {
                let end = milli_at(&mut f, 0, m);
                assert_eq!(
                    std::str::from_utf8(&f[..end]).expect("utf8"),
                    format!("{}", m as f64 / 1000.0)
                );
            }
        }
    }

    #[test]
    fn thousandths_round_halves_away_from_zero_as_round_does() {
        // The values between two thousandths, halves and their neighbours, both signs.
        for k in (-5_000i64..5_000).chain([999_999_999_999_999, -999_999_999_999_999]) {
            for f in [
                (k as f64 + 0.5) / 1000.0,
                k as f64 / 1000.0,
                (k as f64 + 0.499_999_999) / 1000.0,
                (k as f64 + 0.500_000_001) / 1000.0,
                0.499_999_999_999_999_94,
                -0.499_999_999_999_999_94,
            ] {
                assert_eq!(thousandths(f), old_thousandths(f), "{f}");
            }
        }
        for f in [
            f64::NAN,
            f64::INFINITY,
            -0.0,
            0.0,
            1e12,
            -1e12,
            999_999_999_999.999,
        ] {
            assert_eq!(thousandths(f), old_thousandths(f), "{f}");
        }
    }

    #[test]
    fn a_compile_time_key_writes_what_field_writes() {
        const COUNT: FieldKey = FieldKey::new("count");
        const RATE: FieldKey = FieldKey::new("read_bytes_per_s");
        let mut a = LineWriter::new("h", &[]);
        let mut b = LineWriter::new("h", &[]);
        let wa = a
            .line("jobs", 9)
            .field("count", 3u64)
            .field("read_bytes_per_s", f64::NAN)
            .field_opt("read_bytes_per_s", Some(12.5))
            .field_opt("count", None::<u64>)
            .write();
        let wb = b
            .line("jobs", 9)
            .field_key(COUNT, 3u64)
            .field_key(RATE, f64::NAN)
            .field_key_opt(RATE, Some(12.5))
            .field_key_opt(COUNT, None::<u64>)
            .write();
        assert_eq!((wa, text(&a)), (wb, text(&b)));
        assert_eq!(a.skipped(), b.skipped());
        assert_eq!(text(&b), "jobs,host=h count=3i,read_bytes_per_s=12.5 9\n");
        assert_eq!(RATE.as_str(), "read_bytes_per_s");
    }

    #[test]
    fn a_key_that_is_not_plain_is_refused() {
        for bad in [
            "",
            "time",
            "a b",
            "a,b",
            "a=b",
            "a\"b",
            "a\\",
            "é",
            "a\n",
            "a_key_of_forty_seven_bytes_which_is_1_too_long_",
        ] {
            let r = std::panic::catch_unwind(|| FieldKey::new(bad));
            assert!(r.is_err(), "{bad:?}");
        }
        for good in ["times", "tim", "t", "io_some_pct", "Time"] {
            assert_eq!(FieldKey::new(good).as_str(), good);
        }
    }

    proptest! {
        #[test]
        fn any_integer_prints_like_display_and_the_old_writer(u in any::<u64>(), i in any::<i64>(), small in 0u64..10_000_000) {
            for v in [u, small, u >> (u % 64)] {
                let (mut new, mut old) = (Vec::new(), Vec::new());
                push_u64(&mut new, v);
                old_push_u64(&mut old, v);
                prop_assert_eq!(std::str::from_utf8(&new).expect("utf8"), v.to_string());
                prop_assert_eq!(&new, &old);
            }
            let mut buf = Vec::new();
            push_i64(&mut buf, i);
            prop_assert_eq!(std::str::from_utf8(&buf).expect("utf8"), i.to_string());
        }

        /// A field written with a compile-time key is byte for byte the one `field` writes,
        /// for any value, in first place or after another.
        #[test]
        fn a_compile_time_key_writes_any_value_as_field_does(
            f in proptest::num::f64::ANY,
            k in -1_000_000_000_000_000i64..1_000_000_000_000_000i64,
            i in any::<i64>(),
            u in any::<u64>(),
            small in 0u64..100_000,
        ) {
            const A: FieldKey = FieldKey::new("a");
            const LONG: FieldKey = FieldKey::new("a_key_of_forty_six_bytes_which_is_the_longest_");
            let r = k as f64 / 1000.0;
            let values: [Value<'_>; 8] = [
                Value::F(f), Value::F(r), Value::F(-r), Value::I(i), Value::U(u),
                Value::U(small), Value::I(-(small as i64)), Value::F(small as f64 / 1000.0),
            ];
            for v in values {
                for key in [A, LONG] {
                    let mut a = LineWriter::new("h", &[]);
                    let mut b = LineWriter::new("h", &[]);
                    let wa = a.line("m", 1).field(key.as_str(), v).field("z", 1u64).field(key.as_str(), v).write();
                    let wb = b.line("m", 1).field_key(key, v).field_key(FieldKey::new("z"), 1u64).field_key(key, v).write();
                    prop_assert_eq!((wa, text(&a)), (wb, text(&b)));
                    prop_assert_eq!(a.skipped(), b.skipped());
                }
            }
        }

        #[test]
        fn thousandths_are_the_old_rounding(f in proptest::num::f64::ANY, k in -1_000_000_000_000_000i64..1_000_000_000_000_000i64) {
            prop_assert_eq!(thousandths(f), old_thousandths(f));
            for g in [k as f64 / 1000.0, (k as f64 + 0.5) / 1000.0, k as f64 / 1000.0 + 1e-9] {
                prop_assert_eq!(thousandths(g), old_thousandths(g));
                let mut buf = Vec::new();
                push_f64(&mut buf, g);
                prop_assert_eq!(std::str::from_utf8(&buf).expect("utf8"), format!("{g}"));
            }
        }
    }

    /// What a field of `v` must read as: `Display`'s text of the float, the integer with `i`
    /// (an unsigned one above `i64::MAX` saturated), nothing for NaN and the infinities.
    fn expected(v: Value<'_>) -> Option<String> {
        match v {
            Value::F(f) if !f.is_finite() => None,
            Value::F(f) => Some(format!("{f}")),
            Value::I(i) => Some(format!("{i}i")),
            Value::U(u) => Some(format!("{}i", u.min(i64::MAX as u64))),
            Value::B(b) => Some(format!("{b}")),
            Value::S(_) => None,
        }
    }

    /// The numbers at the edges of every branch of the writers: zeros of both signs,
    /// subnormals, the thousandths form's bounds, 1e21 and beyond (`Display` never switches to
    /// an exponent), the integer limits.
    fn edge_values() -> Vec<Value<'static>> {
        let mut v = vec![
            Value::F(0.0),
            Value::F(-0.0),
            Value::F(f64::from_bits(1)),
            Value::F(-f64::from_bits(1)),
            Value::F(f64::MIN_POSITIVE / 2.0),
            Value::F(f64::MIN_POSITIVE),
            Value::F(0.000_5),
            Value::F(-0.000_5),
            Value::F(0.000_499_999_999_999_9),
            Value::F(-0.000_1),
            Value::F(0.1 + 0.2),
            Value::F(999_999_999_999.999),
            Value::F(-999_999_999_999.999),
            Value::F(999_999_999_999.999_5),
            Value::F(999_999_999_999.999_4),
            Value::F(1e12 - 0.000_5),
            Value::F(1e12),
            Value::F(1e15),
            Value::F(1e15 - 1.0),
            Value::F(999_999_999_999_999.5),
            Value::F(9_007_199_254_740_992.0),
            Value::F(4_503_599_627_370_496.5),
            Value::F(1e21),
            Value::F(1e22),
            Value::F(-1.5e300),
            Value::F(f64::MAX),
            Value::F(f64::MIN),
            Value::F(f64::NAN),
            Value::F(-f64::NAN),
            Value::F(f64::INFINITY),
            Value::F(f64::NEG_INFINITY),
            Value::F(i64::MAX as f64),
            Value::F(u64::MAX as f64),
            Value::I(0),
            Value::I(-1),
            Value::I(i64::MAX),
            Value::I(i64::MIN),
            Value::I(i64::MIN + 1),
            Value::U(0),
            Value::U(u64::MAX),
            Value::U(i64::MAX as u64),
            Value::U(i64::MAX as u64 + 1),
        ];
        let mut p = 1u64;
        while let Some(n) = p.checked_mul(10) {
            v.extend([Value::U(p - 1), Value::U(p), Value::I(-(p as i64))]);
            v.extend([Value::F(p as f64 / 1000.0), Value::F(-(p as f64) - 0.5)]);
            p = n;
        }
        v
    }

    /// One field of `v` in a line of its own, written by `field`, by `field_key`, and for a
    /// float by `field_key_r3` of the same float (rounded already, or not).
    fn one_field(v: Value<'_>) -> [(bool, String); 2] {
        const A: FieldKey = FieldKey::new("a");
        let mut a = LineWriter::new("h", &[]);
        let mut b = LineWriter::new("h", &[]);
        let wa = a.line("m", 1).field("a", v).write();
        let wb = b.line("m", 1).field_key(A, v).write();
        [(wa, text(&a).to_owned()), (wb, text(&b).to_owned())]
    }

    #[test]
    fn every_edge_number_is_written_as_display_writes_it() {
        for v in edge_values() {
            let want = expected(v).map(|e| format!("m,host=h a={e} 1\n"));
            for (written, got) in one_field(v) {
                assert_eq!(written, want.is_some(), "{v:?}");
                assert_eq!(got, want.clone().unwrap_or_default(), "{v:?}");
            }
        }
    }

    /// `field_key_r3(v)` against `field_key` of the value rounded by `f64::round`, the agent's
    /// rounding before it: the same bytes and the same skipped count.
    fn r3_agrees(v: f64) -> Result<(), TestCaseError> {
        const K: FieldKey = FieldKey::new("k");
        let rounded = (v * 1000.0).round() / 1000.0;
        let mut a = LineWriter::new("h", &[]);
        let mut b = LineWriter::new("h", &[]);
        let wa = a
            .line("m", 1)
            .field("z", 1u64)
            .field_key(K, rounded)
            .field_key(K, rounded)
            .write();
        let wb = b
            .line("m", 1)
            .field("z", 1u64)
            .field_key_r3(K, v)
            .field_key_r3_opt(K, Some(v))
            .write();
        prop_assert_eq!((wa, text(&a)), (wb, text(&b)), "{:e}", v);
        prop_assert_eq!(a.skipped(), b.skipped());
        let mut c = LineWriter::new("h", &[]);
        let wc = c
            .line("m", 1)
            .field_key_r3(K, v)
            .field_key_r3_opt(K, None)
            .write();
        let want = expected(Value::F(rounded)).map(|e| format!("m,host=h k={e} 1\n"));
        prop_assert_eq!(
            (wc, text(&c).to_owned()),
            (want.is_some(), want.unwrap_or_default())
        );
        Ok(())
    }

    #[test]
    fn a_rounded_field_is_the_field_of_the_rounded_value_at_every_edge() {
        for v in edge_values() {
            if let Value::F(f) = v {
                for g in [f, f / 1000.0, f * 1000.0, f + 0.000_5, f - 0.000_5] {
                    r3_agrees(g).expect("agrees");
                }
            }
        }
        // halves and their neighbours around every thousandth of a few units, both signs
        for k in -20_000i64..20_000 {
            let base = k as f64 / 1000.0;
            for g in [
                base,
                base + 0.000_5,
                base + 0.000_499_999,
                base + 0.000_500_001,
            ] {
                r3_agrees(g).expect("agrees");
            }
        }
    }

    proptest! {
        #[test]
        fn any_number_is_written_as_display_writes_it(
            f in proptest::num::f64::ANY,
            i in any::<i64>(),
            u in any::<u64>(),
            k in -1_000_000_000_000_000i64..1_000_000_000_000_000i64,
        ) {
            for v in [Value::F(f), Value::F(k as f64 / 1000.0), Value::I(i), Value::U(u)] {
                let want = expected(v).map(|e| format!("m,host=h a={e} 1\n"));
                for (written, got) in one_field(v) {
                    prop_assert_eq!(written, want.is_some());
                    prop_assert_eq!(&got, &want.clone().unwrap_or_default());
                }
            }
        }

        #[test]
        fn a_rounded_field_is_the_field_of_the_rounded_value(
            f in proptest::num::f64::ANY,
            k in -1_000_000_000_000_000_000i64..1_000_000_000_000_000_000i64,
            scale in 0i32..20,
        ) {
            r3_agrees(f)?;
            let g = k as f64 / 10f64.powi(scale);
            r3_agrees(g)?;
            r3_agrees(-g)?;
            r3_agrees(g / 1e6 + 0.000_5)?;
        }
    }

    proptest! {
        #[test]
        fn anything_encoded_parses_back(
            tag in "\\PC{0,20}",
            s in "\\PC{0,30}",
            f in proptest::num::f64::ANY,
            i in any::<i64>(),
            u in any::<u64>(),
        ) {
            let mut w = LineWriter::new("host-1", &[]);
            let written = w.line("m", 42).tag("t", &tag).field("f", f).field("s", s.as_str())
                .field("i", i).field("u", u).write();
            prop_assert!(written);
            let out = std::str::from_utf8(w.as_bytes()).expect("utf8");
            let parsed: Vec<_> = parse_lines(out).collect::<Result<_, _>>()
                .map_err(|e| TestCaseError::fail(format!("{e}: {out:?}")))?;
            prop_assert_eq!(parsed.len(), 1);
            let l = &parsed[0];
            prop_assert_eq!(l.timestamp, Some(42));
            let got_i = l.field_set.iter().find(|(k, _)| k.as_str() == "i").map(|(_, v)| v.clone());
            prop_assert_eq!(got_i, Some(FieldValue::I64(i)));
            if f.is_finite() {
                let got_f = l.field_set.iter().find(|(k, _)| k.as_str() == "f").map(|(_, v)| v.clone());
                prop_assert_eq!(got_f, Some(FieldValue::F64(f)));
            }
        }
    }
}
