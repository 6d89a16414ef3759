//! A line's fields written in place: [`LineWriter::fields_of`] starts a line of a series whose
//! measurement and tags are encoded already, [`Fields`] writes each field of a key fixed when
//! compiled, and [`Fields::write`] ends it — the same bytes as [`LineWriter::line_of`] and
//! [`super::Line::field_key`] (property tests compare them).
//!
//! Why a second way: the builder chain ([`super::Line`]) moves the line by value in and out of
//! every call and puts each field together on the stack before appending it; for the ~2,000
//! fields a reading of 100 batch jobs writes that was ~185 instructions a field, the largest
//! part of the jobs collector's report (callgrind). Here
//!
//! * the line is put together in the writer's scratch buffer, kept long between lines: a field
//!   is written into bytes that are there already, by stores of a fixed size, without a
//!   capacity check or a call; the line is appended to the report by one copy when it ends;
//! * a key's bytes, separator and `=` included (`,key=`), are a constant copied by one
//!   fixed-size copy; the line's first separator becomes a space when the line is written, so
//!   a field does not ask whether it is the first; the series key and the common tags are
//!   copied by fixed-size copies of their padded bytes, the timestamp likewise;
//! * a value rounded to three decimals is written from its integer thousandths, as
//!   [`super::Line::field_key_r3`] does, its digits eight at a time or, below 1000, from a
//!   table; every other value (non-finite, -0, 1e12 and beyond, a string) goes the general
//!   way, out of line.

use super::digits::{i64_at, milli_at, rounded_thousandths, saturate, thousandths};
use super::{
    value_into, FieldKey, LineWriter, SeriesKey, Value, FIELD_ROOM, KEY_ROOM, PAD, STAMP_ROOM,
};
use crate::lp::rules::float_is_storable;

/// Bytes the scratch buffer grows by when a field may not fit: room for eight fields of any
/// number (it grows only while the lines get longer than any before).
const GROW: usize = FIELD_ROOM * 8;

/// The scratch buffer's length when the writer is made: room for any line the agent writes.
pub(super) const SCRATCH: usize = 4096;

/// Bytes of a [`FieldText`]'s encoded form, `,key="value"`.
const TEXT_ROOM: usize = 64;
const _: () = assert!(TEXT_ROOM <= FIELD_ROOM && STAMP_ROOM <= FIELD_ROOM);

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
    #[inline(always)]
    pub fn fields_of(&mut self, key: &SeriesKey, ts_ns: i64) -> Fields<'_> {
        let m = key.measurement;
        let common = self.common_padded.len() - PAD;
        let first = m + common + (key.len - m);
        // The last copy of each part may end up to 31 bytes past it.
        if self.scratch.len() < first + PAD + FIELD_ROOM {
            self.scratch.resize(first + GROW, 0);
        }
        let key_tags = key.bytes.get(m..).unwrap_or_default();
        copy_padded(&mut self.scratch, 0, &key.bytes, m);
        copy_padded(&mut self.scratch, m, &self.common_padded, common);
        copy_padded(&mut self.scratch, m + common, key_tags, key.len - m);
        Fields {
            w: self,
            first,
            at: first,
            ts_ns,
            writable: key.writable,
        }
    }
}

/// Copies the first `len` bytes of `src` into `dst` from `at` by copies of a fixed size: one of
/// 16, 32 or 64 bytes for the lengths of nearly every key part, 16 at a time beyond. `src`
/// holds `len` + [`PAD`] bytes (the padding of a key), `dst` as many from `at`.
#[inline(always)]
fn copy_padded(dst: &mut [u8], at: usize, src: &[u8], len: usize) {
    if len <= 16 {
        copy_chunk::<16>(dst, at, src);
    } else if len <= 32 {
        copy_chunk::<32>(dst, at, src);
    } else if len <= 64 {
        copy_chunk::<64>(dst, at, src);
    } else {
        let n = len.div_ceil(16) * 16;
        if let (Some(d), Some(s)) = (dst.get_mut(at..at + n), src.get(..n)) {
            for (d, s) in d.chunks_exact_mut(16).zip(s.chunks_exact(16)) {
                d.copy_from_slice(s);
            }
        }
    }
}

/// Copies the first `N` bytes of `src` into `dst` from `at`.
#[inline(always)]
fn copy_chunk<const N: usize>(dst: &mut [u8], at: usize, src: &[u8]) {
    let d = dst.get_mut(at..).and_then(|d| d.first_chunk_mut::<N>());
    if let (Some(d), Some(s)) = (d, src.first_chunk::<N>()) {
        *d = *s;
    }
}

/// Where a line's fields stood ([`Fields::mark`]).
#[derive(Debug, Clone, Copy)]
pub struct FieldsMark {
    at: usize,
    skipped: usize,
}

/// Fields encoded once ([`Fields::since`]) and appended as they are to later lines of the same
/// fields ([`Fields::encoded`]): for a series whose values change far less often than it is
/// written (a drive's reading, new once a round, written every report), only what changes is
/// written each time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EncodedFields {
    /// `,key=value…`: each field with its leading comma (the line's first made a space when
    /// the line is written).
    bytes: Box<[u8]>,
    /// Non-finite floats skipped among them.
    skipped: usize,
}

/// The fields of one line being written (see the module documentation). Each field is
/// written or, for a non-finite float, skipped and counted in [`LineWriter::skipped`], as
/// [`super::Line::field_key`] does.
#[derive(Debug)]
pub struct Fields<'a> {
    w: &'a mut LineWriter,
    /// Where the fields start in the writer's scratch buffer: the first field's separator,
    /// made a space when the line ends.
    first: usize,
    /// Where the next field goes. The scratch buffer holds at least this, what is past it
    /// left from earlier lines.
    at: usize,
    ts_ns: i64,
    /// The measurement name can start a line.
    writable: bool,
}

impl Fields<'_> {
    /// The next [`FIELD_ROOM`] bytes of the scratch buffer, where a field is written; the
    /// buffer grows when it holds fewer.
    #[inline(always)]
    fn room(&mut self) -> Option<&mut [u8; FIELD_ROOM]> {
        let at = self.at;
        if self.w.scratch.get(at..at + FIELD_ROOM).is_none() {
            self.grow();
        }
        self.w
            .scratch
            .get_mut(at..at + FIELD_ROOM)
            .and_then(|r| r.try_into().ok())
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        self.w.scratch.resize(self.at + GROW, 0);
    }

    /// Copies `,key=` to the start of `f`; returns where the value goes. The key is a constant
    /// where this is inlined: the copy is of 16, 32 or 48 bytes, as its length needs.
    #[inline(always)]
    fn key_into(f: &mut [u8; FIELD_ROOM], key: &FieldKey) -> usize {
        let len = key.as_str().len() + 2;
        if len <= 16 {
            if let (Some(d), Some(k)) = (f.first_chunk_mut::<16>(), key.bytes.first_chunk::<16>()) {
                *d = *k;
            }
        } else if len <= 32 {
            if let (Some(d), Some(k)) = (f.first_chunk_mut::<32>(), key.bytes.first_chunk::<32>()) {
                *d = *k;
            }
        } else if let Some(d) = f.first_chunk_mut::<KEY_ROOM>() {
            *d = key.bytes;
        }
        len
    }

    /// The field `key` of `v` rounded to three decimals, `(v * 1000).round() / 1000`: the bytes
    /// of [`super::Line::field_key_r3`].
    #[inline(always)]
    pub fn r3(&mut self, key: FieldKey, v: f64) {
        match rounded_thousandths(v) {
            Some(m) => self.thousandths(&key, m),
            None => self.r3_other(key, v),
        }
    }

    /// NaN and the infinities (skipped), -0, 1e12 and beyond: the rounded float, the general
    /// way.
    #[cold]
    #[inline(never)]
    fn r3_other(&mut self, key: FieldKey, v: f64) {
        self.value(key, (v * 1000.0).round() / 1000.0);
    }

    /// [`Fields::r3`] when `v` is `Some`.
    #[inline(always)]
    pub fn r3_opt(&mut self, key: FieldKey, v: Option<f64>) {
        if let Some(v) = v {
            self.r3(key, v);
        }
    }

    /// The field `key` of the float `v`, as it is.
    #[inline]
    pub fn f64(&mut self, key: FieldKey, v: f64) {
        match thousandths(v) {
            Some(m) => self.thousandths(&key, m),
            None => self.value(key, v),
        }
    }

    /// A float of `m` thousandths.
    #[inline(always)]
    fn thousandths(&mut self, key: &FieldKey, m: i64) {
        let at = self.at;
        match self.room() {
            Some(f) => {
                let v = Self::key_into(f, key);
                let end = milli_at(f, v, m);
                self.at = at + end;
            }
            None => self.value(*key, Value::F(m as f64 / 1000.0)),
        }
    }

    /// The field `key` of the integer `v` (`i` appended).
    #[inline(always)]
    pub fn i64(&mut self, key: FieldKey, v: i64) {
        let at = self.at;
        match self.room() {
            Some(f) => {
                let at_v = Self::key_into(f, &key);
                let end = i64_at(f, at_v, v);
                self.at = at + end;
            }
            None => self.value(key, v),
        }
    }

    /// The field `key` of the unsigned integer `v`, written as a signed one (saturating).
    #[inline(always)]
    pub fn u64(&mut self, key: FieldKey, v: u64) {
        self.i64(key, saturate(v));
    }

    /// [`Fields::u64`] when `v` is `Some`.
    #[inline(always)]
    pub fn u64_opt(&mut self, key: FieldKey, v: Option<u64>) {
        if let Some(v) = v {
            self.u64(key, v);
        }
    }

    /// A string field fixed when compiled.
    #[inline(always)]
    pub fn text(&mut self, t: &FieldText) {
        let at = self.at;
        match self.room() {
            Some(f) => {
                if let Some(d) = f.first_chunk_mut::<TEXT_ROOM>() {
                    *d = t.bytes;
                }
                self.at = at + t.len;
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
        let buf = &mut self.w.scratch;
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

    /// Where the fields written so far end, for [`Fields::since`].
    pub fn mark(&self) -> FieldsMark {
        FieldsMark {
            at: self.at,
            skipped: self.w.skipped,
        }
    }

    /// The fields written since `m`, encoded, for [`Fields::encoded`] to append to later lines
    /// as they are.
    pub fn since(&self, m: FieldsMark) -> EncodedFields {
        EncodedFields {
            bytes: self.w.scratch.get(m.at..self.at).unwrap_or_default().into(),
            skipped: self.w.skipped.saturating_sub(m.skipped),
        }
    }

    /// Appends the fields `e`, encoded by [`Fields::since`]: the bytes writing them again would
    /// give, and the non-finite floats they skipped counted again.
    pub fn encoded(&mut self, e: &EncodedFields) {
        let end = self.at + e.bytes.len();
        if self.w.scratch.len() < end + FIELD_ROOM {
            self.w.scratch.resize(end + GROW, 0);
        }
        if let Some(d) = self.w.scratch.get_mut(self.at..end) {
            d.copy_from_slice(&e.bytes);
        }
        self.at = end;
        self.w.skipped += e.skipped;
    }

    /// Ends the line with its timestamp; returns false (and takes the line back) when it has no
    /// field or its measurement cannot start a line.
    #[inline(always)]
    pub fn write(mut self) -> bool {
        if self.at == self.first || !self.writable {
            self.w.skipped += 1;
            return false;
        }
        // The timestamp where the next field would go, by one copy of a fixed size.
        self.w.stamp(self.ts_ns);
        let (stamp, len) = (self.w.stamp, self.w.stamp_len);
        let at = self.at;
        let in_room = match self.room().and_then(|f| f.first_chunk_mut::<STAMP_ROOM>()) {
            Some(d) => {
                *d = stamp;
                true
            }
            None => false,
        };
        let w = &mut *self.w;
        if let Some(sep) = w.scratch.get_mut(self.first) {
            *sep = b' ';
        }
        if in_room {
            w.buf
                .extend_from_slice(w.scratch.get(..at + len).unwrap_or_default());
        } else {
            w.buf
                .extend_from_slice(w.scratch.get(..at).unwrap_or_default());
            w.buf
                .extend_from_slice(stamp.get(..len).unwrap_or_default());
        }
        w.lines += 1;
        true
    }
}

#[cfg(test)]
mod tests;
