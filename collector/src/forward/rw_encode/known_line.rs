//! A line of a series the encoder knows, read by what it knows: most lines of a drain or of a
//! steady stream are a known series (its key as written, up to its first space not escaped)
//! whose fields come in its layout's order ([`super::plain_line`]). Such a line needs none of
//! what the one-pass reading checks of a line not seen before (its tags' names and repeats,
//! its key's length): its key was read plain before and is the same bytes, and its fields are
//! compared with the layout's keys, so only its values and its timestamp are read. Its string
//! fields name its `_info` series by its strings as written ([`super::info_line`]), looked up
//! once. Anything else (an unknown key, a field off the layout, one more or fewer, a value that
//! is not a plain number, boolean or string, strings not seen before, a timestamp that is not
//! plain digits) is left to the one-pass reading, which then reads the line whole as before.
//!
//! What this reads it reads as the one-pass reading does: the same values (by
//! [`plain_number`], from the same bytes, of the type that reading gives), the same timestamp,
//! named by the same layout. Test: `a_known_series_line_is_read_as_the_one_pass_reading_reads_it`.

use storwatch_wire::lp::rules::MAX_KEY_BYTES;
use storwatch_wire::lp::{plain_number, plain_timestamp, FieldType};

use super::plain_line::{NONE, STRING};
use super::{time_ms, Encoder};

impl Encoder {
    /// `line` when its series is known and its fields are its layout's, in order, all of them:
    /// its samples added; false (nothing added) otherwise.
    pub(super) fn add_known(&mut self, line: &str, now_ms: i64) -> bool {
        let b = line.as_bytes();
        let Some(space) = key_end(b) else {
            return false;
        };
        // a key known as written: the same bytes, followed by a space, as when it was read
        // plain (so read plain again it would end there too)
        let Some(known) = line.get(..space).and_then(|k| self.keys.get(k)).copied() else {
            return false;
        };
        if known.layout == NONE {
            return false;
        }
        let Some(layout) = self.layouts.get(known.layout as usize) else {
            return false;
        };
        self.line_values.clear();
        let mut strings = false;
        let (mut i, mut at) = (space + 1, 4);
        for (j, &(end, id, scale)) in layout.fields.iter().enumerate() {
            if j > 0 {
                // the comma after the value before
                if b.get(i) != Some(&b',') {
                    return false;
                }
                i += 1;
            }
            let end = end as usize;
            let Some(key) = layout.keys.get(at..end) else {
                return false;
            };
            at = end + 1;
            let v = i + key.len() + 1;
            if b.get(i..v - 1) != Some(key) || b.get(v - 1) != Some(&b'=') {
                return false;
            }
            if id == STRING {
                // a label of the `_info` series, named in `info_key` as the one-pass reading
                // names it: the series key, then each string's key and text as written
                let Some(end) = string_at(b, v) else {
                    return false;
                };
                let k = &mut self.info_key;
                if !strings {
                    strings = true;
                    k.clear();
                    k.extend_from_slice(&b[..space]);
                    k.push(b'\n');
                }
                k.extend_from_slice(key);
                k.push(0);
                k.extend_from_slice(&b[v..end]);
                k.push(0);
                i = end;
                continue;
            }
            let Some((end, x)) = value_at(line, v) else {
                return false;
            };
            i = end;
            self.line_values.push((id, x * scale));
        }
        let ts = match b.get(i) {
            None => None,
            Some(b' ') => match plain_timestamp(b.get(i + 1..).unwrap_or_default()) {
                Some(t) => Some(t),
                None => return false,
            },
            // a field more than the layout's
            Some(_) => return false,
        };
        // the one-pass reading's limit on the key and fields (InfluxDB's on a series key and
        // field key): a line past it is not read plain
        if i - 1 + 4 > MAX_KEY_BYTES {
            return false;
        }
        // its `_info` series known (a string changed: made by the one-pass reading)
        let info = match strings {
            true => match self.info_ids.get(self.info_key.as_slice()) {
                Some(&info) => Some(info),
                None => return false,
            },
            false => None,
        };
        if self.line_values.is_empty() && !strings {
            return false;
        }
        let ts = time_ms(ts, now_ms);
        if !self.line_values.is_empty() {
            let values = std::mem::take(&mut self.line_values);
            self.req.push_line(known.lid, &values, ts);
            self.line_values = values;
        }
        if let Some((id, mid)) = info.filter(|(id, _)| *id != NONE) {
            self.req.push_line(id, &[(mid, 1.0)], ts);
        }
        #[cfg(test)]
        {
            self.string_lines += usize::from(strings);
        }
        true
    }
}

/// Where a series key as written ends: at its first space not escaped (a backslash and the
/// byte after it are passed together: a plain key's escapes are a backslash before a space, a
/// comma or an equals sign, as in a drive's `model=SEAGATE\ ST600`). `None` without one.
#[inline]
fn key_end(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    loop {
        i += memchr::memchr2(b' ', b'\\', b.get(i..)?)?;
        if b.get(i) == Some(&b' ') {
            return Some(i);
        }
        i += 2;
    }
}

/// The end of a string value starting at `v` (after its closing quote) when it is plain: no
/// backslash or control byte before its closing quote, as the one-pass reading reads one.
#[inline]
fn string_at(b: &[u8], v: usize) -> Option<usize> {
    if b.get(v) != Some(&b'"') {
        return None;
    }
    let text = b.get(v + 1..)?;
    let close = memchr::memchr(b'"', text)?;
    if text[..close].iter().any(|&c| c == b'\\' || c < 0x20) {
        return None;
    }
    Some(v + 1 + close + 1)
}

/// Powers of ten a double holds exactly, up to the 15 digits of the fast path.
const POW10: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// The value starting at `v`: where it ends (at a comma, a space or the end of the line) and
/// its number as [`plain_number`] reads it, the digits read as they are passed. A number of at
/// most 15 digits is read here in the same way (its digits as an integer, divided by a power
/// of ten: one rounding); anything else (a boolean, more digits, what is no plain number) by
/// [`plain_number`] itself.
#[inline(always)]
fn value_at(line: &str, v: usize) -> Option<(usize, f64)> {
    let b = line.as_bytes();
    let neg = b.get(v) == Some(&b'-');
    let d0 = v + usize::from(neg);
    let (mut i, mut m) = (d0, 0u64);
    while let Some(c) = b.get(i).filter(|c| c.is_ascii_digit()) {
        m = m.wrapping_mul(10).wrapping_add(u64::from(c - b'0'));
        i += 1;
    }
    let whole = i - d0;
    let ends = |i: usize| matches!(b.get(i), None | Some(b',' | b' '));
    let signed = |f: f64| if neg { -f } else { f };
    if (1..=15).contains(&whole) {
        match b.get(i) {
            None | Some(b',' | b' ') => return Some((i, signed(m as f64))),
            Some(b'.') => {
                let f0 = i + 1;
                let mut j = f0;
                while let Some(c) = b.get(j).filter(|c| c.is_ascii_digit()) {
                    m = m.wrapping_mul(10).wrapping_add(u64::from(c - b'0'));
                    j += 1;
                }
                let frac = j - f0;
                if whole + frac <= 15 && ends(j) {
                    return Some((j, signed(m as f64 / POW10[frac])));
                }
            }
            Some(b'i') if ends(i + 1) => {
                // at most 15 digits: an i64
                let n = m as i64;
                return Some((i + 1, (if neg { -n } else { n }) as f64));
            }
            Some(b'u') if !neg && ends(i + 1) => return Some((i + 1, m as f64)),
            _ => {}
        }
    }
    value_slow(line, v)
}

/// [`value_at`] of any value: cut at the next comma or space, typed as the one-pass reading
/// types it, read by [`plain_number`].
#[cold]
fn value_slow(line: &str, v: usize) -> Option<(usize, f64)> {
    let b = line.as_bytes();
    let mut i = v;
    while i < b.len() && b[i] != b',' && b[i] != b' ' {
        i += 1;
    }
    let value = line.get(v..i)?;
    Some((i, plain_number(value, value_type(value)?)?))
}

/// The type the one-pass reading gives a value (by its first byte, and an integer's or unsigned
/// one's suffix); `None` for one it gives none (a string, anything else).
#[inline]
fn value_type(v: &str) -> Option<FieldType> {
    let b = v.as_bytes();
    match (b.first()?, b.last()?) {
        (b'0'..=b'9' | b'-', b'i') => Some(FieldType::Integer),
        (b'0'..=b'9' | b'-', b'u') => Some(FieldType::Unsigned),
        (b'0'..=b'9' | b'-', _) => Some(FieldType::Float),
        (b't' | b'f' | b'T' | b'F', _) => Some(FieldType::Boolean),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values read as they are passed are [`plain_number`]'s, bit for bit, and end where the
    /// one-pass reading ends them: numbers of every length on both sides of the 15 digits,
    /// signs, zeros, suffixes, booleans, and what is no plain number.
    #[test]
    fn values_read_in_passing_are_plain_numbers() {
        let mut rng = fastrand::Rng::with_seed(9);
        let mut values: Vec<String> = [
            "0",
            "-0",
            "0.",
            "-0.0",
            "1",
            "-1",
            "1.5",
            "4.",
            ".5",
            "-.5",
            "-",
            "",
            "1e3",
            "1.5i",
            "5i",
            "-5i",
            "0i",
            "-0i",
            "5u",
            "-5u",
            "18446744073709551615u",
            "t",
            "T",
            "true",
            "True",
            "TRUE",
            "f",
            "false",
            "FALSE",
            "tru",
            "x",
            "\"s\"",
            "1.2.3",
            "12a",
            "999999999999999",
            "9999999999999999",
            "123456789012345.",
            "12345678.9012345",
            "12345678.90123456",
            "999999999999999999i",
            "9999999999999999999i",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for _ in 0..40_000 {
            let digits = |rng: &mut fastrand::Rng, n: usize| -> String {
                (0..n).map(|_| char::from(b'0' + rng.u8(..10))).collect()
            };
            let sign = if rng.bool() { "-" } else { "" };
            let n = rng.usize(0..20);
            let whole = digits(&mut rng, n);
            let v = match rng.u8(..5) {
                0 => format!("{sign}{whole}"),
                1 => format!("{sign}{whole}i"),
                2 => format!("{sign}{whole}u"),
                _ => {
                    let n = rng.usize(0..20);
                    format!("{sign}{whole}.{}", digits(&mut rng, n))
                }
            };
            values.push(v);
        }
        for v in &values {
            let want = value_type(v).and_then(|t| plain_number(v, t));
            for end in ["", ",x=1", " 123"] {
                let line = format!("{v}{end}");
                let got = value_at(&line, 0);
                match (got, want) {
                    (Some((at, x)), Some(w)) => {
                        assert_eq!(x.to_bits(), w.to_bits(), "{line:?}");
                        assert_eq!(at, v.len(), "{line:?}");
                    }
                    (None, None) => {}
                    _ => panic!("{line:?}: {got:?} against {want:?}"),
                }
            }
        }
    }
}
