//! A report's line read in one pass, allocating nothing, when it is plain (wire's
//! [`view_plain`]: no escape, no string, short plain numbers — nearly every line the agent
//! writes) and of a series already known by its key as written, with the field keys and kinds
//! of the line that series was last read whole from: its values are then the fields' numbers
//! ([`plain_number`], the full grammar's reading of them) taken by the series' plan.
//!
//! Any other line (not plain, a series not known by that key, other fields) is read by the full
//! grammar ([`Exposition::read_whole`] or, for a line that is not plain, the plan of the series
//! its tags name), which also makes its key as written known for the next report.

use std::collections::HashMap;

use storwatch_wire::lp::{plain_number, view_plain, Backend, FieldType, PlainFields};

use super::{Exposition, Series};

/// What the one-pass reading made of a line.
pub(super) enum OnePass<'a> {
    /// Read: its values are its series'.
    Taken,
    /// A plain line of a series not known by this key as written, or whose fields are not its
    /// series' layout: to read whole.
    Unknown(&'a str),
    /// Not plain: to read whole.
    NotPlain,
}

/// The series of a plain line found by its key as written, and its fields checked against the
/// series' layout as the reading tells them, their numbers kept in `values`.
struct Visit<'e, 'a> {
    known: &'e HashMap<String, usize>,
    series: &'e [Series],
    /// The line's numbers, in written order.
    values: &'e mut Vec<f64>,
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
        // as `layout_of` writes a field: its key's length, 0 for a number, its key
        let len = key.len().to_le_bytes();
        let end = self.next + len.len() + 1 + key.len();
        let number = plain_number(value, ty);
        match (s.shape.layout.get(self.next..end), number) {
            (Some(field), Some(v))
                if field[..len.len()] == len
                    && field[len.len()] == 0
                    && &field[len.len() + 1..] == key.as_bytes() =>
            {
                self.next = end;
                self.values.push(v);
            }
            _ => self.at = None,
        }
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
        let mut visit = Visit {
            known: &self.plain,
            series: &self.series,
            values: &mut self.numbers,
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
        // the plan's fields are numbers (a plain line has no string, and this one has the
        // layout the plan was made from): each value is one of the line's
        for (kept, &(field, scale)) in s.values.iter_mut().zip(&s.shape.plan.values) {
            if let Some(v) = self.numbers.get(field) {
                *kept = v * scale;
            }
        }
        s.report = self.reports;
        #[cfg(test)]
        {
            self.one_pass += 1;
        }
        OnePass::Taken
    }
}
