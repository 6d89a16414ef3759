//! A line's fields written in place: [`LineWriter::fields_of`] starts a line of a series whose
//! measurement and tags are encoded already, [`Fields`] writes each field of a key fixed when
//! compiled straight into the report's buffer, and [`Fields::write`] ends it — the same bytes
//! as [`LineWriter::line_of`] and [`super::Line::field_key`] (a property test compares them).
//!
//! Why a second way: the builder chain ([`super::Line`]) moves the line by value in and out of
//! every call and puts each field together on the stack before appending it; for the ~2,000
//! fields a reading of 100 batch jobs writes that was ~185 instructions a field, the largest
//! part of the jobs collector's report (callgrind). Here
//!
//! * the buffer is grown once for several fields (zeros, cut off again when the line ends), so a
//!   field is written where it stays, without a copy and without a capacity check a byte;
//! * a key's bytes, separator and `=` included (`,key=`), are a constant copied by one
//!   fixed-size copy; the line's first separator becomes a space when the line is written, so
//!   a field does not ask whether it is the first;
//! * a value rounded to three decimals is written from its integer thousandths, as
//!   [`super::Line::field_key_r3`] does; every other value (non-finite, -0, 1e12 and beyond, a
//!   string) goes the general way, out of line.

use super::digits::{i64_at, milli_at, rounded_thousandths, saturate, thousandths};
use super::{value_into, FieldKey, LineWriter, SeriesKey, Value, FIELD_ROOM, KEY_ROOM};
use crate::lp::rules::float_is_storable;

/// Bytes the buffer grows by when a field may not fit: room for eight fields of any number, so
/// that a line of short fields grows it once.
const GROW: usize = FIELD_ROOM * 8;

/// Bytes of a [`FieldText`]'s encoded form, `,key="value"`.
const TEXT_ROOM: usize = 64;
const _: () = assert!(TEXT_ROOM <= FIELD_ROOM);

/// A string field whose key and value are both fixed when the program is compiled
/// (`const CPUSET: FieldText = FieldText::new("cores_from", "cpuset");`), checked then and
/// written by [`Fields::text`] as one constant: the key by [`FieldKey::new`]'s rules, the value
/// printable ASCII without `"` and `\` (nothing to escape or clean), the whole at most 64 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldText {
    /// `,key="value"`, padded with zeros.
    bytes: [u8; TEXT_ROOM],
    len: usize,
    key: FieldKey,
    value: &'static str,
}

impl FieldText {
    /// The field `key="value"`. Panics (when the program is compiled, in a `const`) when the
    /// key is not one [`FieldKey::new`] takes, the value holds a byte other than printable
    /// ASCII or holds `"` or `\`, or the field is longer than 64 bytes.
    pub const fn new(key: &'static str, value: &'static str) -> Self {
        let k = FieldKey::new(key);
        let kb = key.as_bytes();
        let vb = value.as_bytes();
        assert!(
            kb.len() + vb.len() + 4 <= TEXT_ROOM,
            "a constant string field is longer than 64 bytes"
        );
        let mut bytes = [0u8; TEXT_ROOM];
        bytes[0] = b',';
        let mut i = 0;
        while i < kb.len() {
            bytes[1 + i] = kb[i];
            i += 1;
        }
        bytes[1 + kb.len()] = b'=';
        bytes[2 + kb.len()] = b'"';
        let mut i = 0;
        while i < vb.len() {
            let b = vb[i];
            assert!(
                b >= 0x20 && b < 0x7f && b != b'"' && b != b'\\',
                "a constant string value needs escaping or cleaning"
            );
            bytes[3 + kb.len() + i] = b;
            i += 1;
        }
        bytes[3 + kb.len() + vb.len()] = b'"';
        Self {
            bytes,
            len: 4 + kb.len() + vb.len(),
            key: k,
            value,
        }
    }

    /// The key.
    pub const fn key(&self) -> FieldKey {
        self.key
    }

    /// The value.
    pub const fn value(&self) -> &'static str {
        self.value
    }
}

impl LineWriter {
    /// Starts a line of the series `key` stamped `ts_ns` whose fields are written through the
    /// [`Fields`] returned: the bytes of [`LineWriter::line_of`] with the same key, fields and
    /// timestamp. End it with [`Fields::write`]; dropped without, it leaves nothing.
    pub fn fields_of(&mut self, key: &SeriesKey, ts_ns: i64) -> Fields<'_> {
        let start = self.buf.len();
        let (measurement, tags) = key.bytes.split_at(key.measurement.min(key.bytes.len()));
        self.buf.extend_from_slice(measurement);
        self.buf.extend_from_slice(&self.common);
        self.buf.extend_from_slice(tags);
        let first = self.buf.len();
        Fields {
            w: self,
            start,
            first,
            at: first,
            ts_ns,
            writable: key.writable,
            done: false,
        }
    }
}

/// The fields of one line being written (see the module documentation). Each field is
/// written or, for a non-finite float, skipped and counted in [`LineWriter::skipped`], as
/// [`super::Line::field_key`] does.
#[derive(Debug)]
pub struct Fields<'a> {
    w: &'a mut LineWriter,
    /// Where the line starts in the buffer, to take it back.
    start: usize,
    /// Where its fields start: the first field's separator, made a space when the line ends.
    first: usize,
    /// Where the next field goes. The buffer may hold zeros after it (its length is at least
    /// this), cut off when the line ends.
    at: usize,
    ts_ns: i64,
    /// The measurement name can start a line.
    writable: bool,
    done: bool,
}

impl Fields<'_> {
    /// The next [`FIELD_ROOM`] bytes of the buffer, where a field is written; the buffer grows
    /// when it holds fewer.
    #[inline]
    fn room(&mut self) -> Option<&mut [u8; FIELD_ROOM]> {
        let at = self.at;
        if self.w.buf.len() < at + FIELD_ROOM {
            self.grow();
        }
        self.w
            .buf
            .get_mut(at..at + FIELD_ROOM)
            .and_then(|r| r.try_into().ok())
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        self.w.buf.resize(self.at + GROW, 0);
    }

    /// The field `key` of `v` rounded to three decimals, `(v * 1000).round() / 1000`: the bytes
    /// of [`super::Line::field_key_r3`].
    #[inline]
    pub fn r3(&mut self, key: FieldKey, v: f64) {
        match rounded_thousandths(v) {
            Some(m) => self.thousandths(key, m),
            // NaN and the infinities (skipped), -0, 1e12 and beyond: the float.
            None => self.value(key, (v * 1000.0).round() / 1000.0),
        }
    }

    /// [`Fields::r3`] when `v` is `Some`.
    #[inline]
    pub fn r3_opt(&mut self, key: FieldKey, v: Option<f64>) {
        if let Some(v) = v {
            self.r3(key, v);
        }
    }

    /// The field `key` of the float `v`, as it is.
    #[inline]
    pub fn f64(&mut self, key: FieldKey, v: f64) {
        match thousandths(v) {
            Some(m) => self.thousandths(key, m),
            None => self.value(key, v),
        }
    }

    /// A float of `m` thousandths.
    #[inline]
    fn thousandths(&mut self, key: FieldKey, m: i64) {
        let at = key.as_str().len() + 2;
        match self.room() {
            Some(f) => {
                if let Some(k) = f.get_mut(..KEY_ROOM) {
                    k.copy_from_slice(&key.bytes);
                }
                self.at += milli_at(f, at, m);
            }
            None => self.value(key, Value::F(m as f64 / 1000.0)),
        }
    }

    /// The field `key` of the integer `v` (`i` appended).
    #[inline]
    pub fn i64(&mut self, key: FieldKey, v: i64) {
        let at = key.as_str().len() + 2;
        match self.room() {
            Some(f) => {
                if let Some(k) = f.get_mut(..KEY_ROOM) {
                    k.copy_from_slice(&key.bytes);
                }
                self.at += i64_at(f, at, v);
            }
            None => self.value(key, v),
        }
    }

    /// The field `key` of the unsigned integer `v`, written as a signed one (saturating).
    #[inline]
    pub fn u64(&mut self, key: FieldKey, v: u64) {
        self.i64(key, saturate(v));
    }

    /// [`Fields::u64`] when `v` is `Some`.
    #[inline]
    pub fn u64_opt(&mut self, key: FieldKey, v: Option<u64>) {
        if let Some(v) = v {
            self.u64(key, v);
        }
    }

    /// A string field fixed when compiled.
    #[inline]
    pub fn text(&mut self, t: &FieldText) {
        match self.room() {
            Some(f) => {
                if let Some(d) = f.get_mut(..TEXT_ROOM) {
                    d.copy_from_slice(&t.bytes);
                }
                self.at += t.len;
            }
            None => self.value(t.key, t.value),
        }
    }

    /// The field `key` of any value, the general way: [`super::Line::field_key`]'s bytes.
    #[inline(never)]
    pub fn value<'v>(&mut self, key: FieldKey, value: impl Into<Value<'v>>) {
        let value = value.into();
        if matches!(value, Value::F(f) if !float_is_storable(f)) {
            self.w.skipped += 1;
            return;
        }
        let buf = &mut self.w.buf;
        buf.truncate(self.at);
        buf.extend_from_slice(key.bytes.get(..key.as_str().len() + 2).unwrap_or_default());
        value_into(buf, value);
        self.at = buf.len();
    }

    /// [`Fields::value`] when `value` is `Some`.
    pub fn value_opt<'v, V: Into<Value<'v>>>(&mut self, key: FieldKey, value: Option<V>) {
        if let Some(v) = value {
            self.value(key, v);
        }
    }

    /// Ends the line with its timestamp; returns false (and takes the line back) when it has no
    /// field or its measurement cannot start a line.
    pub fn write(mut self) -> bool {
        self.done = true;
        let w = &mut *self.w;
        if self.at == self.first || !self.writable {
            w.buf.truncate(self.start);
            w.skipped += 1;
            return false;
        }
        w.buf.truncate(self.at);
        if let Some(sep) = w.buf.get_mut(self.first) {
            *sep = b' ';
        }
        w.end_line(self.ts_ns);
        true
    }
}

impl Drop for Fields<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.w.buf.truncate(self.start);
        }
    }
}

#[cfg(test)]
mod tests;
