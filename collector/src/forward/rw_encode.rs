//! Remote-write request bodies written with buffers and name caches kept from one request to
//! the next ([`Encoder`]): the protobuf is written straight into one buffer (each series' size
//! is known before it is written), compressed by one snappy encoder into another, and the names
//! a line needs are looked up, not rebuilt, once its series or field was seen.
//!
//! Each line is read once, building nothing: a line of a known series whose fields follow its
//! layout by its values alone ([`known_line`]), another plain line (no escape but a tag value's
//! escaped separators, strings without escapes, short plain numbers) by wire's one pass
//! ([`view_plain`], the collector's ingest reads lines by it too), which tells the encoder each
//! field as it reaches it (a string field's `_info` series by its series key and strings as
//! written: [`info_line`]), any other by [`parse_view`]; the encoder takes the line's series key,
//! measurement and field keys as written and parses only the values. A line's labels are
//! cached by its series key as written (measurement and tags, as the 1.x/2.x grammar delimits
//! them; a new key's labels come from its tags) and its metric names and unit factors by
//! measurement and field as written; the caches hash with [`Fx`](crate::hash::Fx). A line with
//! a string field the one pass does not read, or a key written twice, or two fields that come
//! to one Prometheus name, or one only InfluxDB 3's grammar reads, takes [`prom_line`] whole, as
//! every line did before. The caches are dropped when they hold more than [`MAX_CACHED`]
//! entries. The request's series and samples are a [`RequestSeries`].

use std::borrow::Cow;
use std::sync::Arc;

use storwatch_wire::lp::{
    parse_line, parse_view, view_plain, Backend, FieldValue, LineView, Parsed, Point,
};
use storwatch_wire::prom::{field_metric, metric_name, prom_line, tag_label_name};

use super::rw_proto::{put_label, read_labels, Labels};
use super::rw_series::RequestSeries;
use super::rw_snappy::Snappy;
use crate::hash::FxMap;

mod info_line;
mod known_line;
mod plain_line;
mod request;

use plain_line::{Layout, PlainLine, MAX_LAYOUTS, NONE};

/// Label sets or metric names kept at most (a 200-disk server has ~1,500 label sets; 600 of them
/// 900,000 — past this the caches start again empty).
pub(super) const MAX_CACHED: usize = 1 << 20;

/// A label set: its `Label` messages (as `TimeSeries` field 1), sorted by name, and where
/// `__name__` sorts among them.
#[derive(Debug)]
struct LabelSet {
    /// shared with `label_ids`' key: one allocation a label set
    bytes: Arc<[u8]>,
    split: usize,
}

impl LabelSet {
    fn before(&self) -> &[u8] {
        self.bytes.get(..self.split).unwrap_or_default()
    }

    fn after(&self) -> &[u8] {
        self.bytes.get(self.split..).unwrap_or_default()
    }
}

/// A series key's label set and the layout ([`plain_line`]) its last plain line was read by.
#[derive(Debug, Clone, Copy)]
struct Known {
    lid: u32,
    layout: u32,
}

/// A metric name and its `Label { "__name__", name }` message as `TimeSeries` field 1.
#[derive(Debug)]
struct Metric {
    name: Box<str>,
    label: Vec<u8>,
}

/// Writes `WriteRequest`s, keeping its buffers and caches from one request to the next.
#[derive(Debug, Default)]
pub struct Encoder {
    // kept across requests
    /// label set and layout by series key as written
    keys: FxMap<Box<str>, Known>,
    /// label set by its `Label` messages (sorted, without `__name__`)
    label_ids: FxMap<Arc<[u8]>, u32>,
    /// label names by tag key
    label_names: FxMap<Box<str>, Box<str>>,
    label_sets: Vec<LabelSet>,
    /// by measurement as written: its fields' metrics and unit factors by field key as written
    measurements: FxMap<Box<str>, usize>,
    fields: Vec<FxMap<Box<str>, (u32, f64)>>,
    /// by measurement: the layout its last line that did not follow one was read by
    m_layout: Vec<u32>,
    /// field layouts ([`plain_line`]), interned by measurement and keys
    layouts: Vec<Layout>,
    layout_ids: FxMap<Box<[u8]>, u32>,
    next_layout: Layout,
    metric_ids: FxMap<Box<str>, u32>,
    metrics: Vec<Metric>,
    /// the series and samples of the request being written
    req: RequestSeries,
    line_values: Vec<(u32, f64)>,
    /// a plain line's `_info` series by its series key and strings as written ([`plain_line`]):
    /// its label set and metric ([`plain_line::NONE`]: none)
    info_ids: FxMap<Box<[u8]>, (u32, u32)>,
    info_key: Vec<u8>,
    /// a line's field keys (where in the line) and whether each is a string's
    line_keys: Vec<(usize, usize, bool)>,
    label_bytes: Vec<u8>,
    /// a new series key's label names and values, and where each is in it
    tag_text: String,
    tag_spans: Vec<[usize; 3]>,
    proto: Vec<u8>,
    snappy: Snappy,
    /// numbers the requests written, for `set_at` and `metric_at`
    written: u32,
    /// per label set: the request it was last written in and where its `before` and `after`
    /// bytes were written there (uncompressed)
    set_at: Vec<(u32, u64, u64)>,
    /// per metric: the request and where its label was last written there
    metric_at: Vec<(u32, u64)>,
    sent: usize,
    /// lines read as a known series' ([`known_line`])
    #[cfg(test)]
    known_lines: usize,
    /// plain lines with string fields read in one pass
    #[cfg(test)]
    string_lines: usize,
}

impl Encoder {
    /// Forgets the previous request (not the caches).
    pub fn clear(&mut self) {
        if self.label_sets.len() > MAX_CACHED
            || self.metrics.len() > MAX_CACHED
            || self.info_ids.len() > MAX_CACHED
            || self.layouts.len() > MAX_LAYOUTS
        {
            let (snappy, proto) = (
                std::mem::take(&mut self.snappy),
                std::mem::take(&mut self.proto),
            );
            *self = Encoder {
                snappy,
                proto,
                ..Encoder::default()
            };
        }
        self.req.clear();
        self.sent = 0;
    }

    /// Adds the samples of `lines`; `now_ms` stamps a line without a timestamp. The lines that
    /// cannot be read (the queue holds only validated lines, so none in practice) are returned
    /// as (index, reason).
    pub fn add_lines(&mut self, lines: &[&str], now_ms: i64) -> Result<(), Vec<(usize, String)>> {
        let mut bad = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            if self.add_known(line, now_ms) {
                #[cfg(test)]
                {
                    self.known_lines += 1;
                }
                continue;
            }
            if self.add_plain(line, now_ms) {
                continue;
            }
            let added = match view_any(line) {
                Ok(Parsed::Go(v)) => self.add(&v, now_ms),
                Ok(Parsed::V3(p)) => {
                    self.add_slow(&p, time_ms(p.timestamp, now_ms));
                    Ok(())
                }
                Err(e) => Err(e),
            };
            if let Err(e) = added {
                bad.push((i, format!("not line protocol: {e}")));
            }
        }
        if bad.is_empty() {
            Ok(())
        } else {
            Err(bad)
        }
    }

    /// `line` if it is plain ([`view_plain`], by 2.x's grammar as [`view_any`] reads first):
    /// its names taken from the caches by the names as written as the reading reaches them;
    /// false (nothing added) when it is not plain, for the grammar to read.
    fn add_plain(&mut self, line: &str, now_ms: i64) -> bool {
        self.line_values.clear();
        let mut read = PlainLine::new(self);
        let Some(v) = view_plain(line, Backend::V2, &mut read) else {
            return false;
        };
        read.end();
        let (twice, bad, lid, layout) = (read.twice, read.bad, read.lid, read.layout);
        let strings = read.strings;
        if bad {
            return false;
        }
        let ts = time_ms(v.timestamp(), now_ms);
        if twice || (strings && !self.strings_once(line, &v)) {
            // a field written twice: the later value is the line's (prom_line decides)
            return match parse_any(line) {
                Ok(point) => {
                    self.add_slow(&point, ts);
                    true
                }
                Err(_) => false,
            };
        }
        // the line's `_info` series if known, else made from the line read whole, after its
        // numbers' label set (the order prom_line's reading adds them in)
        let known = match strings {
            true => self.info_ids.get(self.info_key.as_slice()).copied(),
            false => None,
        };
        let whole = match strings && known.is_none() {
            true => match parse_any(line) {
                Ok(p) => Some(p),
                Err(_) => return false,
            },
            false => None,
        };
        self.push_line_values(&v, ts, lid, layout, true);
        let info = known.or_else(|| whole.map(|p| self.new_info_series(&p)));
        if let Some((id, mid)) = info.filter(|(id, _)| *id != NONE) {
            self.req.push_line(id, &[(mid, 1.0)], ts);
        }
        #[cfg(test)]
        {
            self.string_lines += usize::from(strings);
        }
        true
    }

    /// A line read by the 1.x/2.x grammar: its values parsed, its names taken from the caches
    /// by the names as written.
    fn add(&mut self, v: &LineView<'_>, now_ms: i64) -> Result<(), String> {
        let ts = time_ms(v.timestamp(), now_ms);
        self.line_values.clear();
        let m = self.measurement_index(v.measurement_raw());
        let mut plain = true;
        for f in v.fields() {
            let value = match f.value()? {
                FieldValue::Float(f) => f,
                FieldValue::Integer(i) => i as f64,
                FieldValue::Unsigned(u) => u as f64,
                FieldValue::Boolean(b) => f64::from(u8::from(b)),
                FieldValue::String(_) => {
                    plain = false;
                    break;
                }
            };
            let (id, scale) = self.field(m, f.key_raw(), || v.measurement(), || f.key());
            if self.line_values.iter().any(|(m, _)| *m == id) {
                // a field written twice: the later value is the line's (prom_line decides)
                plain = false;
                break;
            }
            self.line_values.push((id, value * scale));
        }
        if !plain {
            let p = parse_any(v.line())?;
            self.add_slow(&p, ts);
            return Ok(());
        }
        self.push_line_values(v, ts, None, NONE, false);
        Ok(())
    }

    /// The line's gathered values (`line_values`), if any, into the request under its series'
    /// labels (`lid` when known), learnt from its tags the first time (as written when the
    /// line is `plain`: no escapes), with `layout` as the series' layout.
    fn push_line_values(
        &mut self,
        v: &LineView<'_>,
        ts: i64,
        lid: Option<u32>,
        layout: u32,
        plain: bool,
    ) {
        if self.line_values.is_empty() {
            return;
        }
        let lid = match lid.or_else(|| self.keys.get(v.series_key()).map(|k| k.lid)) {
            Some(id) => id,
            // a plain key's only escapes are a tag value's escaped separators
            None if plain && memchr::memchr(b'\\', v.series_key().as_bytes()).is_none() => {
                // no escapes: the tags are the series key's parts after the measurement, cut
                // at commas and their first equals sign
                let key = v.series_key();
                let tags = key
                    .get(v.measurement_raw().len()..)
                    .unwrap_or_default()
                    .split(',')
                    .filter_map(|t| t.split_once('='))
                    .map(|(k, v)| (Cow::Borrowed(k), Cow::Borrowed(v)));
                self.learn_labels(key, tags, layout)
            }
            None => self.learn_labels(v.series_key(), v.tags(), layout),
        };
        let values = std::mem::take(&mut self.line_values);
        self.req.push_line(lid, &values, ts);
        self.line_values = values;
    }

    /// The index of a measurement (as written) in `fields`.
    fn measurement_index(&mut self, raw: &str) -> usize {
        if let Some(i) = self.measurements.get(raw) {
            return *i;
        }
        self.fields.push(FxMap::default());
        self.m_layout.push(NONE);
        let i = self.fields.len() - 1;
        self.measurements.insert(raw.into(), i);
        i
    }

    /// The metric and unit factor of field `key_raw` (as written) of measurement `m`, named
    /// from the measurement and the key unescaped when not seen before.
    fn field<'a>(
        &mut self,
        m: usize,
        key_raw: &str,
        measurement: impl FnOnce() -> Cow<'a, str>,
        key: impl FnOnce() -> Cow<'a, str>,
    ) -> (u32, f64) {
        if let Some(f) = self.fields.get(m).and_then(|f| f.get(key_raw)) {
            return *f;
        }
        let measurement = measurement();
        let (name, scale) = field_metric(&measurement, &key());
        let id = self.metric_id(&format!("{}_{name}", metric_name(&measurement)));
        if let Some(f) = self.fields.get_mut(m) {
            f.insert(key_raw.into(), (id, scale));
        }
        (id, scale)
    }

    /// The label set of a series key not seen before, from its tags (unescaped): the labels
    /// as prom_line gives them, tags named, sorted, one per name (of two, the smaller value).
    /// The names and values are gathered in one string kept from one call to the next.
    fn learn_labels<'a>(
        &mut self,
        series_key: &str,
        tags: impl Iterator<Item = (Cow<'a, str>, Cow<'a, str>)>,
        layout: u32,
    ) -> u32 {
        let (mut text, mut spans) = (
            std::mem::take(&mut self.tag_text),
            std::mem::take(&mut self.tag_spans),
        );
        text.clear();
        spans.clear();
        for (k, v) in tags {
            let start = text.len();
            match self.label_names.get(k.as_ref()) {
                Some(n) => text.push_str(n),
                None => {
                    let n = tag_label_name(&k);
                    text.push_str(&n);
                    self.label_names.insert(k.as_ref().into(), n.into());
                }
            }
            let name_end = text.len();
            text.push_str(&v);
            spans.push([start, name_end, text.len()]);
        }
        // sorted by the bytes (as by the strings), not cut at char boundaries each comparison
        let raw = text.as_bytes();
        let bytes = |s: &[usize; 3]| {
            (
                raw.get(s[0]..s[1]).unwrap_or_default(),
                raw.get(s[1]..s[2]).unwrap_or_default(),
            )
        };
        spans.sort_unstable_by(|a, b| bytes(a).cmp(&bytes(b)));
        spans.dedup_by(|b, a| bytes(a).0 == bytes(b).0);
        let label = |s: &[usize; 3]| (&text[s[0]..s[1]], &text[s[1]..s[2]]);
        let id = self.label_set(spans.iter().map(label));
        self.keys
            .insert(series_key.into(), Known { lid: id, layout });
        self.tag_text = text;
        self.tag_spans = spans;
        id
    }

    /// A line with string fields or a field written twice: named as [`prom_line`] names it.
    fn add_slow(&mut self, p: &Point<'_>, ts: i64) {
        let line = prom_line(p);
        if !line.values.is_empty() {
            let labels = clean(line.labels.clone());
            let id = self.label_set(labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            // prom_line names each metric once
            let values: Vec<(u32, f64)> = line
                .values
                .iter()
                .map(|(name, _, v)| (self.metric_id(&line.metric(name)), *v))
                .collect();
            self.req.push_line(id, &values, ts);
        }
        if !line.info.is_empty() {
            let mut labels = line.labels.clone();
            labels.extend(line.info.iter().cloned());
            let labels = clean(labels);
            let id = self.label_set(labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            let mid = self.metric_id(&line.info_metric());
            self.req.push_line(id, &[(mid, 1.0)], ts);
        }
    }

    fn metric_id(&mut self, name: &str) -> u32 {
        if let Some(id) = self.metric_ids.get(name) {
            return *id;
        }
        let id = self.metrics.len() as u32;
        let mut label = Vec::new();
        put_label(&mut label, "__name__", name);
        self.metrics.push(Metric {
            name: name.into(),
            label,
        });
        self.metric_ids.insert(name.into(), id);
        id
    }

    /// The label set of `labels` (sorted by name, each name once), added when new.
    fn label_set<'l>(&mut self, labels: impl Iterator<Item = (&'l str, &'l str)>) -> u32 {
        let mut encoded = std::mem::take(&mut self.label_bytes);
        encoded.clear();
        let mut split = None;
        for (k, v) in labels {
            if split.is_none() && k >= "__name__" {
                split = Some(encoded.len());
            }
            put_label(&mut encoded, k, v);
        }
        let split = split.unwrap_or(encoded.len());
        if let Some(id) = self.label_ids.get(encoded.as_slice()) {
            let id = *id;
            self.label_bytes = encoded;
            return id;
        }
        let id = self.label_sets.len() as u32;
        let bytes: Arc<[u8]> = encoded.as_slice().into();
        self.label_ids.insert(bytes.clone(), id);
        self.label_sets.push(LabelSet { bytes, split });
        self.req.add_label_set();
        self.label_bytes = encoded;
        id
    }

    /// Series in the request.
    pub fn series(&self) -> usize {
        self.req.series()
    }

    /// Samples added, before a series' samples at one millisecond are made one.
    pub fn samples(&self) -> usize {
        self.req.samples()
    }

    /// Every series: its labels with `__name__`, sorted, and its samples in time order, one per
    /// millisecond (the later line's); series by label set and name.
    pub fn timeseries(&mut self) -> Vec<(Labels, Vec<(i64, f64)>)> {
        let mut out = Vec::new();
        let (sets, metrics) = (&self.label_sets, &self.metrics);
        self.req.each_series(|key, samples| {
            let set = &sets[(key >> 32) as usize];
            let name = &metrics[(key & 0xffff_ffff) as usize].name;
            let mut labels = read_labels(set.before());
            labels.push(("__name__".to_string(), name.to_string()));
            labels.extend(read_labels(set.after()));
            out.push(((key >> 32, name.to_string()), labels, samples.to_vec()));
        });
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.into_iter().map(|(_, l, s)| (l, s)).collect()
    }
}

/// Labels sorted by name, each name once ([`prom_line`] already leaves out a string field
/// named like a tag, and keeps the last of a field written twice).
fn clean(mut labels: Labels) -> Labels {
    if !labels.is_sorted_by(|a, b| a.0 <= b.0) {
        labels.sort_by(|a, b| a.0.cmp(&b.0));
    }
    labels.dedup_by(|b, a| a.0 == b.0);
    labels
}

/// A queue line by the grammar of the InfluxDB versions in turn: the collector took it under
/// the rules of its InfluxDB outputs, whichever they are.
fn view_any(line: &str) -> Result<Parsed<'_>, String> {
    parse_view(line, Backend::V2)
        .or_else(|_| parse_view(line, Backend::V1))
        .or_else(|_| parse_view(line, Backend::V3))
}

/// The same, read whole.
fn parse_any(line: &str) -> Result<Point<'_>, String> {
    parse_line(line, Backend::V2)
        .or_else(|_| parse_line(line, Backend::V1))
        .or_else(|_| parse_line(line, Backend::V3))
}

/// A line's time in milliseconds: its timestamp (ns), else `now_ms`.
fn time_ms(ts_ns: Option<i64>, now_ms: i64) -> i64 {
    ts_ns.map(|ns| ns.div_euclid(1_000_000)).unwrap_or(now_ms)
}

#[cfg(test)]
mod tests;
