//! A report's line of a series already known by its key as written, with the field keys and
//! kinds of the line that series was last read whole from, read without allocation: its values
//! are then the fields' numbers taken by the series' plan, its strings copied only when they
//! changed. A plain line (wire's [`view_plain`]: no escape but a tag value's escaped
//! separators, short plain numbers, strings without escapes — nearly every line the agent
//! writes) is read in one pass ([`plain_number`], the full grammar's reading of its numbers);
//! any other (an exponent, a long number, an escaped name) by wire's view ([`parse_view`]: the
//! line's parts found, its names and unescaped strings borrowed).
//!
//! Any other line (a series not known by that key, other fields, an escaped key or string) is
//! read by the full grammar ([`Exposition::read_whole`]), which also makes its key as written
//! known for the next report.

use std::collections::HashMap;

use storwatch_wire::lp::{
    parse_view, plain_number, view_plain, Backend, FieldType, FieldValue, Parsed, PlainFields,
};
use storwatch_wire::prom::number;

use super::{Exposition, Series};

/// What the one-pass or view reading made of a line.
pub(super) enum OnePass<'a> {
    /// Read: its values are its series'.
    Taken,
    /// A line of a series not known by this key as written, or whose fields are not its
    /// series' layout: to read whole.
    Unknown(&'a str),
    /// Not plain ([`Exposition::read_plain`]), or not line protocol ([`Exposition::read_view`]).
    NotPlain,
}

/// The series of a plain line found by its key as written, and its fields checked against the
/// series' layout as the reading tells them, their numbers kept in `values`, their strings in
/// `strings`.
struct Visit<'e, 'a> {
    known: &'e HashMap<String, usize>,
    series: &'e [Series],
    line: &'a str,
    /// The line's numbers, in written order (a string's NaN).
    values: &'e mut Vec<f64>,
    /// The line's strings: each its field's index and where its text is in the line.
    strings: &'e mut Vec<(usize, usize, usize)>,
    /// The line's series key as written.
    key: &'a str,
    /// The series, while the line's fields so far are its layout.
    at: Option<usize>,
    /// Where the next field is in the series' layout.
    next: usize,
}

impl<'a> PlainFields<'a> for Visit<'_, 'a> {
    fn series_key(&mut self, key: &'a str) {
        self.key = key;
        self.at = self.known.get(key).copied();
    }

    fn field(&mut self, key: &'a str, value: &'a str, ty: FieldType) {
        let Some(s) = self.at.and_then(|i| self.series.get(i)) else {
            return;
        };
        let string = ty == FieldType::String;
        let Some(end) = next_in_layout(&s.shape.layout, self.next, key, string) else {
            self.at = None;
            return;
        };
        if string {
            // as written, quoted, without escapes (a plain line has none)
            let from = value.as_ptr() as usize - self.line.as_ptr() as usize + 1;
            let to = from + value.len().saturating_sub(2);
            self.strings.push((self.values.len(), from, to));
            self.values.push(f64::NAN);
        } else if let Some(v) = plain_number(value, ty) {
            self.values.push(v);
        } else {
            self.at = None;
            return;
        }
        self.next = end;
    }
}

/// Where the field after the one at `at` in `layout` starts, if the field at `at` is `key`, a
/// string or not as `string` says (as `layout_of` writes a field: its key's length, 1 for a
/// string, its key).
#[inline]
fn next_in_layout(layout: &[u8], at: usize, key: &str, string: bool) -> Option<usize> {
    let len = key.len().to_le_bytes();
    let end = at + len.len() + 1 + key.len();
    let field = layout.get(at..end)?;
    (field[..len.len()] == len
        && field[len.len()] == u8::from(string)
        && &field[len.len() + 1..] == key.as_bytes())
    .then_some(end)
}

impl Series {
    /// Takes a line's values and strings, read in the layout of the series' plan: `numbers`
    /// each field's number, `strings` where each string field's text is in `line`.
    fn take(
        &mut self,
        line: &str,
        numbers: &[f64],
        strings: &[(usize, usize, usize)],
        report: u64,
    ) {
        for (kept, &(field, scale)) in self.values.iter_mut().zip(&self.shape.plan.values) {
            if let Some(v) = numbers.get(field) {
                *kept = v * scale;
            }
        }
        for (kept, &field) in self.info.iter_mut().zip(&self.shape.plan.info) {
            let Some(&(_, from, to)) = strings.iter().find(|(at, _, _)| *at == field) else {
                continue;
            };
            let v = line.get(from..to).unwrap_or_default();
            if kept != v {
                kept.clear();
                kept.push_str(v);
            }
        }
        self.report = report;
    }
}

impl Exposition {
    /// Reads `line` in one pass if it is plain and of a known series in its layout, taking its
    /// values into the series.
    pub(super) fn read_plain<'a>(&mut self, line: &'a str) -> OnePass<'a> {
        #[cfg(test)]
        if self.whole_only {
            return OnePass::NotPlain;
        }
        self.numbers.clear();
        self.strings.clear();
        let mut visit = Visit {
            known: &self.by_key,
            series: &self.series,
            line,
            values: &mut self.numbers,
            strings: &mut self.strings,
            key: "",
            at: None,
            next: 0,
        };
        if view_plain(line, Backend::V1, &mut visit).is_none() {
            return OnePass::NotPlain;
        }
        let (key, at, next) = (visit.key, visit.at, visit.next);
        let Some(s) = at.and_then(|i| self.series.get_mut(i)) else {
            return OnePass::Unknown(key);
        };
        if next != s.shape.layout.len() {
            return OnePass::Unknown(key);
        }
        s.take(line, &self.numbers, &self.strings, self.reports);
        #[cfg(test)]
        {
            self.one_pass += 1;
        }
        OnePass::Taken
    }

    /// Reads `line` by wire's view if it is of a known series in its layout, taking its values
    /// and strings into the series: a line [`Exposition::read_plain`] did not take.
    pub(super) fn read_view<'a>(&mut self, line: &'a str) -> OnePass<'a> {
        #[cfg(test)]
        if self.whole_only {
            return OnePass::NotPlain;
        }
        let Ok(Parsed::Go(view)) = parse_view(line, Backend::V1) else {
            return OnePass::NotPlain;
        };
        let key = view.series_key();
        let Some(s) = self.by_key.get(key).and_then(|&i| self.series.get_mut(i)) else {
            return OnePass::Unknown(key);
        };
        let layout = &s.shape.layout;
        // each field in the layout's order, as `layout_of` wrote it: its key's length, 1 for a
        // string, its key; a number's value kept, a string's where it is in the line
        self.numbers.clear();
        self.strings.clear();
        let mut next = 0;
        for (at, f) in view.fields().enumerate() {
            let k = f.key_raw();
            let string = f.field_type() == FieldType::String;
            // an escaped key reads otherwise than written
            let end = next_in_layout(layout, next, k, string).filter(|_| !k.contains('\\'));
            let Some(end) = end else {
                return OnePass::Unknown(key);
            };
            next = end;
            match f.value() {
                Ok(FieldValue::String(std::borrow::Cow::Borrowed(v))) => {
                    self.numbers.push(f64::NAN);
                    let from = v.as_ptr() as usize - line.as_ptr() as usize;
                    self.strings.push((at, from, from + v.len()));
                }
                Ok(v) if !string => self.numbers.push(number(&v).unwrap_or(f64::NAN)),
                // an escaped string, or a value the view took and the reading does not
                _ => return OnePass::Unknown(key),
            }
        }
        if next != layout.len() {
            return OnePass::Unknown(key);
        }
        s.take(line, &self.numbers, &self.strings, self.reports);
        #[cfg(test)]
        {
            self.viewed += 1;
        }
        OnePass::Taken
    }
}
