//! A plain line's names found by its shape: the field keys of a measurement's lines come in one
//! order line after line (an agent writes a measurement's fields the same way every time), so
//! a line is read against a [`Layout`] — the field keys of a line read before, each with its
//! metric and unit factor — and a field whose key is the layout's at its place takes the
//! layout's names by comparing its key's bytes, without hashing it. A series (its key as
//! written) keeps the layout its last line was read by; a new series takes its measurement's
//! last. A line whose keys part from its layout has the rest of its fields looked up by name,
//! as every field was before, and its keys become a layout, interned (one per measurement and
//! key order). A string field has its place in the layout too (its key marked a string's), so
//! that a known series' line with strings is read by its layout ([`super::known_line`]); a
//! layout never holds a key twice. At most [`MAX_LAYOUTS`] layouts are kept: past it, the
//! encoder's caches start again empty, as past [`super::MAX_CACHED`].

use storwatch_wire::lp::{plain_number, FieldType, PlainFields};

use super::Encoder;

/// Layouts (measurement and field order) kept at most.
pub(in crate::forward) const MAX_LAYOUTS: usize = 1 << 16;

/// No layout.
pub(super) const NONE: u32 = u32::MAX;

/// A layout's string field (a label of the line's `_info` series, not a metric of its own).
pub(super) const STRING: u32 = u32::MAX;

/// A measurement's field keys in one order, each key's metric and unit factor.
#[derive(Debug, Default, Clone)]
pub(super) struct Layout {
    /// the measurement's index in the encoder's `fields`
    m: u32,
    /// the measurement's index (4 bytes), then each key followed by a comma, a string's by a
    /// quote (neither of which a plain key holds): what the layout is interned by
    pub(super) keys: Vec<u8>,
    /// per field: where its key ends in `keys`, its metric ([`STRING`] for a string) and unit
    /// factor
    pub(super) fields: Vec<(u32, u32, f64)>,
}

impl Layout {
    /// Empties it for the keys of measurement `m`, the first `n` of `from`'s kept.
    fn start(&mut self, m: usize, from: Option<&Layout>, n: usize) {
        self.m = m as u32;
        self.keys.clear();
        self.keys.extend_from_slice(&self.m.to_le_bytes());
        self.fields.clear();
        if let Some(from) = from.filter(|f| f.m == self.m && n > 0) {
            let n = n.min(from.fields.len());
            let end = from.fields.get(n - 1).map_or(4, |f| f.0 as usize + 1);
            self.keys
                .extend_from_slice(from.keys.get(4..end).unwrap_or_default());
            self.fields.extend_from_slice(&from.fields[..n]);
        }
    }

    fn push(&mut self, key: &str, id: u32, scale: f64) {
        self.keys.extend_from_slice(key.as_bytes());
        self.fields.push((self.keys.len() as u32, id, scale));
        self.keys.push(if id == STRING { b'"' } else { b',' });
    }

    /// Whether no key is written twice (a line's numbers written twice are found as they are
    /// read; a string's key may be a number's too).
    fn keys_distinct(&self) -> bool {
        let key = |j: usize| {
            let start = j
                .checked_sub(1)
                .map_or(4, |p| self.fields[p].0 as usize + 1);
            self.keys.get(start..self.fields[j].0 as usize)
        };
        (0..self.fields.len()).all(|j| (0..j).all(|i| key(i) != key(j)))
    }
}

impl Encoder {
    /// The layout in `next`, interned: its number.
    fn intern_layout(&mut self) -> u32 {
        if let Some(id) = self.layout_ids.get(self.next_layout.keys.as_slice()) {
            return *id;
        }
        let id = self.layouts.len() as u32;
        self.layouts.push(self.next_layout.clone());
        self.layout_ids
            .insert(self.next_layout.keys.as_slice().into(), id);
        id
    }

    /// Layouts kept.
    #[cfg(test)]
    pub(super) fn layouts(&self) -> usize {
        self.layouts.len()
    }
}

/// The encoder told of a plain line as wire reads it: its series key (the series' label set
/// and layout when known), its measurement, then each field's metric, unit factor and value
/// into `line_values`. What it learns of a line found not plain afterwards is right all the
/// same: the caches map names as written, and a plain name is written as it reads.
pub(super) struct PlainLine<'e, 'a> {
    pub(super) enc: &'e mut Encoder,
    pub(super) key: &'a str,
    measurement: &'a str,
    /// the measurement's index in `fields`, once known
    m: usize,
    /// the series' label set, when its key is known
    pub(super) lid: Option<u32>,
    /// the layout the line is read by ([`NONE`]: none)
    pub(super) layout: u32,
    /// fields told, and where the next one's key starts in the layout's keys
    j: usize,
    at: usize,
    /// a field not at its place in the layout: the line's fields from it on are looked up by
    /// name, and the line's keys gathered in the encoder's `next_layout`
    pub(super) off: bool,
    /// a field written twice
    pub(super) twice: bool,
    /// a value that is not a number (none that wire's reading gives)
    pub(super) bad: bool,
    /// a string field: its key and text are in the encoder's `info_key`, after the series key
    pub(super) strings: bool,
}

impl<'e> PlainLine<'e, '_> {
    pub(super) fn new(enc: &'e mut Encoder) -> Self {
        PlainLine {
            enc,
            key: "",
            measurement: "",
            m: usize::MAX,
            lid: None,
            layout: NONE,
            j: 0,
            at: 4,
            off: false,
            twice: false,
            bad: false,
            strings: false,
        }
    }

    /// After the line: a line read off its layout has its keys' layout kept (interned), as
    /// its measurement's and its series' (a known series' here, a new one's when it is
    /// learnt).
    pub(super) fn end(&mut self) {
        if !self.off || self.twice || self.bad {
            return;
        }
        let enc = &mut *self.enc;
        if self.strings && !enc.next_layout.keys_distinct() {
            // a string's key written twice: the line is read whole, and no line by this layout
            return;
        }
        let id = enc.intern_layout();
        self.layout = id;
        if let Some(l) = enc.m_layout.get_mut(self.m) {
            *l = id;
        }
        if self.lid.is_some() {
            if let Some(k) = enc.keys.get_mut(self.key) {
                k.layout = id;
            }
        }
    }
}

impl<'a> PlainFields<'a> for PlainLine<'_, 'a> {
    fn series_key(&mut self, key: &'a str) {
        self.key = key;
        if let Some(k) = self.enc.keys.get(key) {
            self.lid = Some(k.lid);
            if let Some(l) = self.enc.layouts.get(k.layout as usize) {
                self.layout = k.layout;
                self.m = l.m as usize;
            }
        }
    }

    fn measurement(&mut self, name: &'a str) {
        self.measurement = name;
        if self.layout == NONE {
            self.m = self.enc.measurement_index(name);
            self.layout = self.enc.m_layout.get(self.m).copied().unwrap_or(NONE);
        }
    }

    fn field(&mut self, key: &'a str, value: &'a str, ty: FieldType) {
        if ty == FieldType::String {
            // a label of the line's `_info` series: the series key and the strings as written
            // name it in the encoder's cache
            let k = &mut self.enc.info_key;
            if !self.strings {
                self.strings = true;
                k.clear();
                k.extend_from_slice(self.key.as_bytes());
                k.push(b'\n');
            }
            k.extend_from_slice(key.as_bytes());
            k.push(0);
            k.extend_from_slice(value.as_bytes());
            k.push(0);
            if self.at_place(key, true).is_none() {
                self.string_by_name(key);
            }
            return;
        }
        let Some(value) = plain_number(value, ty) else {
            self.bad = true;
            return;
        };
        match self.at_place(key, false) {
            // the layout's fields are distinct: so are the line's so far
            Some((id, scale)) => self.enc.line_values.push((id, value * scale)),
            None => self.field_by_name(key, value),
        }
    }
}

impl<'a> PlainLine<'_, 'a> {
    /// The layout's next field when it is `key`, a string's when `string`: passed, its metric
    /// and unit factor.
    #[inline]
    fn at_place(&mut self, key: &str, string: bool) -> Option<(u32, f64)> {
        if self.off {
            return None;
        }
        let l = self.enc.layouts.get(self.layout as usize)?;
        let &(end, id, scale) = l.fields.get(self.j)?;
        if (id == STRING) != string || l.keys.get(self.at..end as usize) != Some(key.as_bytes()) {
            return None;
        }
        self.j += 1;
        self.at = end as usize + 1;
        Some((id, scale))
    }

    /// A string field off the layout: gathered into `next_layout` (its label is the line's
    /// `_info` series', named as the line is read whole).
    #[cold]
    #[inline(never)]
    fn string_by_name(&mut self, key: &'a str) {
        self.go_off();
        self.enc.next_layout.push(key, STRING, 0.0);
    }

    /// From here on, the line's keys are gathered in `next_layout`, the layout's before them
    /// first.
    fn go_off(&mut self) {
        if !self.off {
            self.off = true;
            let enc = &mut *self.enc;
            let layout = enc.layouts.get(self.layout as usize);
            enc.next_layout.start(self.m, layout, self.j);
        }
    }

    /// A field off the layout: named by its key (a lookup), and gathered into `next_layout`.
    #[cold]
    #[inline(never)]
    fn field_by_name(&mut self, key: &'a str, value: f64) {
        self.go_off();
        let enc = &mut *self.enc;
        let measurement = self.measurement;
        let (id, scale) = enc.field(self.m, key, || measurement.into(), || key.into());
        if enc.line_values.iter().any(|(m, _)| *m == id) {
            self.twice = true;
        }
        enc.line_values.push((id, value * scale));
        enc.next_layout.push(key, id, scale);
    }
}
