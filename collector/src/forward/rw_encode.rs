//! Remote-write request bodies written with buffers and name caches kept from one request to
//! the next ([`Encoder`]): the protobuf is written straight into one buffer (each series' size
//! is known before it is written), compressed by one snappy encoder into another, and the names
//! a line needs are looked up, not rebuilt, once its series or field was seen.
//!
//! Each line is read once, by [`parse_view`], which builds nothing: the encoder takes the
//! line's series key, measurement and field keys as written and parses only the values. A
//! line's labels are cached by its series key as written (measurement and tags, as the 1.x/2.x
//! grammar delimits them) and its metric names and unit factors by measurement and field as
//! written; the caches hash with [`Fx`](crate::hash::Fx). A line with a string field, or two
//! fields that come to one Prometheus name, or one only InfluxDB 3's grammar reads, takes
//! [`prom_line`] whole, as every line did before. The caches are dropped when they hold more
//! than [`MAX_CACHED`] entries.

use storwatch_wire::lp::{parse_line, parse_view, Backend, FieldValue, LineView, Parsed, Point};
use storwatch_wire::prom::{field_metric, metric_name, prom_line};

use crate::hash::FxMap;

/// Labels of one series without `__name__`, sorted by name, each name once.
pub type Labels = Vec<(String, String)>;

/// Label sets or metric names kept at most (a 200-disk server has ~1,500 label sets; 600 of them
/// 900,000 — past this the caches start again empty).
pub(super) const MAX_CACHED: usize = 1 << 20;

/// A label set: its labels, and its `Label` messages (as `TimeSeries` field 1) before and after
/// where `__name__` sorts.
#[derive(Debug)]
struct LabelSet {
    labels: Labels,
    before: Vec<u8>,
    after: Vec<u8>,
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
    /// label set by series key as written
    keys: FxMap<Box<str>, u32>,
    label_ids: FxMap<Labels, u32>,
    label_sets: Vec<LabelSet>,
    /// by measurement as written: its fields' metrics and unit factors by field key as written
    measurements: FxMap<Box<str>, usize>,
    fields: Vec<FxMap<Box<str>, (u32, f64)>>,
    metric_ids: FxMap<Box<str>, u32>,
    metrics: Vec<Metric>,
    // one request
    /// series of the request by (label set, metric); hashed with Fx, whose finish moves the
    /// well-mixed high bits down (the multiply alone, which this map had, leaves the low bits,
    /// the bucket, to the metric's few ids: every series of a metric probed one chain)
    series: FxMap<u64, u32>,
    series_keys: Vec<u64>,
    samples: Vec<(u32, i64, f64)>,
    line_values: Vec<(u32, f64)>,
    counts: Vec<u32>,
    grouped: Vec<(i64, f64)>,
    proto: Vec<u8>,
    compressed: Vec<u8>,
    snappy: Option<snap::raw::Encoder>,
    sent: usize,
}

impl Encoder {
    /// Forgets the previous request (not the caches).
    pub fn clear(&mut self) {
        if self.label_sets.len() > MAX_CACHED || self.metrics.len() > MAX_CACHED {
            let snappy = self.snappy.take();
            *self = Encoder {
                snappy,
                ..Encoder::default()
            };
        }
        self.series.clear();
        self.series_keys.clear();
        self.samples.clear();
        self.sent = 0;
    }

    /// Adds the samples of `lines`; `now_ms` stamps a line without a timestamp. The lines that
    /// cannot be read (the queue holds only validated lines, so none in practice) are returned
    /// as (index, reason).
    pub fn add_lines(&mut self, lines: &[&str], now_ms: i64) -> Result<(), Vec<(usize, String)>> {
        let mut bad = Vec::new();
        for (i, line) in lines.iter().enumerate() {
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

    /// A line read by the 1.x/2.x grammar: its values parsed, its names taken from the caches
    /// by the names as written.
    fn add(&mut self, v: &LineView<'_>, now_ms: i64) -> Result<(), String> {
        let ts = time_ms(v.timestamp(), now_ms);
        self.line_values.clear();
        let fields = match self.measurements.get(v.measurement_raw()) {
            Some(i) => *i,
            None => {
                self.fields.push(FxMap::default());
                let i = self.fields.len() - 1;
                self.measurements.insert(v.measurement_raw().into(), i);
                i
            }
        };
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
            let (id, scale) = match self.fields[fields].get(f.key_raw()) {
                Some(m) => *m,
                None => {
                    let (name, scale) = field_metric(&v.measurement(), &f.key());
                    let id = self.metric_id(&format!("{}_{name}", metric_name(&v.measurement())));
                    self.fields[fields].insert(f.key_raw().into(), (id, scale));
                    (id, scale)
                }
            };
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
        if self.line_values.is_empty() {
            return Ok(());
        }
        let lid = match self.keys.get(v.series_key()) {
            Some(id) => *id,
            None => {
                let p = parse_any(v.line())?;
                let id = self.label_set(clean(prom_line(&p).labels));
                self.keys.insert(v.series_key().into(), id);
                id
            }
        };
        for i in 0..self.line_values.len() {
            let (mid, v) = self.line_values[i];
            self.push(lid, mid, ts, v);
        }
        Ok(())
    }

    /// A line with string fields or a field written twice: named as [`prom_line`] names it.
    fn add_slow(&mut self, p: &Point<'_>, ts: i64) {
        let line = prom_line(p);
        if !line.values.is_empty() {
            let id = self.label_set(clean(line.labels.clone()));
            for (name, _, v) in &line.values {
                let mid = self.metric_id(&line.metric(name));
                self.push(id, mid, ts, *v);
            }
        }
        if !line.info.is_empty() {
            let mut labels = line.labels.clone();
            labels.extend(line.info.iter().cloned());
            let id = self.label_set(clean(labels));
            let mid = self.metric_id(&line.info_metric());
            self.push(id, mid, ts, 1.0);
        }
    }

    fn metric_id(&mut self, name: &str) -> u32 {
        if let Some(id) = self.metric_ids.get(name) {
            return *id;
        }
        let id = self.metrics.len() as u32;
        let mut msg = Vec::new();
        put_bytes(&mut msg, 1, b"__name__");
        put_bytes(&mut msg, 2, name.as_bytes());
        let mut label = Vec::with_capacity(msg.len() + 2);
        put_bytes(&mut label, 1, &msg);
        self.metrics.push(Metric {
            name: name.into(),
            label,
        });
        self.metric_ids.insert(name.into(), id);
        id
    }

    fn label_set(&mut self, labels: Labels) -> u32 {
        if let Some(id) = self.label_ids.get(&labels) {
            return *id;
        }
        let id = self.label_sets.len() as u32;
        let at = labels.partition_point(|(k, _)| k.as_str() < "__name__");
        let encode = |pairs: &[(String, String)]| {
            let (mut out, mut msg) = (Vec::new(), Vec::new());
            for (k, v) in pairs {
                msg.clear();
                put_bytes(&mut msg, 1, k.as_bytes());
                put_bytes(&mut msg, 2, v.as_bytes());
                put_bytes(&mut out, 1, &msg);
            }
            out
        };
        self.label_sets.push(LabelSet {
            before: encode(&labels[..at]),
            after: encode(&labels[at..]),
            labels: labels.clone(),
        });
        self.label_ids.insert(labels, id);
        id
    }

    fn push(&mut self, label_set: u32, metric: u32, ts: i64, v: f64) {
        let key = (u64::from(label_set) << 32) | u64::from(metric);
        let next = self.series_keys.len() as u32;
        let s = *self.series.entry(key).or_insert(next);
        if s == next {
            self.series_keys.push(key);
        }
        self.samples.push((s, ts, v));
    }

    /// Series in the request.
    pub fn series(&self) -> usize {
        self.series_keys.len()
    }

    /// Samples added, before a series' samples at one millisecond are made one.
    pub fn samples(&self) -> usize {
        self.samples.len()
    }

    /// Groups the samples per series (series in the order their lines came), each series' in
    /// time order with one per millisecond (the later line's), and calls `each` with its label
    /// set, metric and samples.
    fn each_series(&mut self, mut each: impl FnMut(&Self, usize, &[(i64, f64)])) {
        // counting sort by series: stable, so a series' samples stay in line order
        let n = self.series_keys.len();
        self.counts.clear();
        self.counts.resize(n + 1, 0);
        for (s, _, _) in &self.samples {
            self.counts[*s as usize + 1] += 1;
        }
        for i in 0..n {
            self.counts[i + 1] += self.counts[i];
        }
        let mut grouped = std::mem::take(&mut self.grouped);
        grouped.clear();
        grouped.resize(self.samples.len(), (0, 0.0));
        let mut at = self.counts.clone();
        for (s, t, v) in &self.samples {
            let i = &mut at[*s as usize];
            grouped[*i as usize] = (*t, *v);
            *i += 1;
        }
        for s in 0..n {
            let run = &mut grouped[self.counts[s] as usize..self.counts[s + 1] as usize];
            if !run.is_sorted_by_key(|(t, _)| *t) {
                // stable: of two samples at one millisecond the later line's comes last
                run.sort_by_key(|(t, _)| *t);
            }
            // keep the last of each millisecond, moved to the front of the run
            let mut w = 0;
            for r in 0..run.len() {
                if r + 1 < run.len() && run[r + 1].0 == run[r].0 {
                    continue;
                }
                run[w] = run[r];
                w += 1;
            }
            each(self, s, &run[..w]);
        }
        self.grouped = grouped;
    }

    /// Every series: its labels with `__name__`, sorted, and its samples in time order, one per
    /// millisecond (the later line's); series by label set and name.
    pub fn timeseries(&mut self) -> Vec<(Labels, Vec<(i64, f64)>)> {
        let mut out = Vec::new();
        self.each_series(|e, s, samples| {
            let key = e.series_keys[s];
            let set = &e.label_sets[(key >> 32) as usize];
            let name = &e.metrics[(key & 0xffff_ffff) as usize].name;
            let at = set.labels.partition_point(|(k, _)| k.as_str() < "__name__");
            let mut labels = set.labels.clone();
            labels.insert(at, ("__name__".to_string(), name.to_string()));
            out.push(((key >> 32, name.to_string()), labels, samples.to_vec()));
        });
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.into_iter().map(|(_, l, s)| (l, s)).collect()
    }

    /// Writes the `WriteRequest` protobuf of the samples added; the samples it holds.
    pub fn encode(&mut self) -> usize {
        let mut proto = std::mem::take(&mut self.proto);
        proto.clear();
        let mut count = 0;
        self.each_series(|e, s, samples| {
            let key = e.series_keys[s];
            let set = &e.label_sets[(key >> 32) as usize];
            let name = &e.metrics[(key & 0xffff_ffff) as usize].label;
            let size: usize = set.before.len()
                + name.len()
                + set.after.len()
                + samples
                    .iter()
                    .map(|(t, _)| 12 + varint_len(*t as u64))
                    .sum::<usize>();
            proto.push(0x0a);
            put_varint(&mut proto, size as u64);
            proto.extend_from_slice(&set.before);
            proto.extend_from_slice(name);
            proto.extend_from_slice(&set.after);
            for (t, v) in samples {
                // TimeSeries.samples = 2: Sample { double value = 1; int64 timestamp = 2; }
                proto.push(0x12);
                proto.push((10 + varint_len(*t as u64)) as u8);
                proto.push(0x09);
                proto.extend_from_slice(&v.to_le_bytes());
                proto.push(0x10);
                put_varint(&mut proto, *t as u64);
            }
            count += samples.len();
        });
        self.proto = proto;
        self.sent = count;
        count
    }

    /// The protobuf [`Encoder::encode`] wrote.
    pub fn protobuf(&self) -> &[u8] {
        &self.proto
    }

    /// The protobuf [`Encoder::encode`] wrote in snappy's block format.
    pub fn compress(&mut self) -> Result<&[u8], snap::Error> {
        let need = snap::raw::max_compress_len(self.proto.len());
        if need == 0 && !self.proto.is_empty() {
            return Err(snap::Error::TooBig {
                given: self.proto.len() as u64,
                max: u32::MAX as u64,
            });
        }
        if self.compressed.len() < need {
            self.compressed.resize(need, 0);
        }
        let enc = self.snappy.get_or_insert_with(snap::raw::Encoder::new);
        let n = enc.compress(&self.proto, &mut self.compressed)?;
        Ok(&self.compressed[..n])
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

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited field (wire type 2).
pub(super) fn put_bytes(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_varint(out, u64::from((field << 3) | 2));
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn varint_lengths() {
        for v in [0u64, 1, 127, 128, 16_383, 16_384, u64::MAX, -1i64 as u64] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(varint_len(v), b.len(), "{v}");
        }
    }

    /// The cached path names and encodes every line as the line-by-line path (`prom_line`,
    /// sorted, one protobuf per request) did, request after request with the caches warm.
    #[test]
    fn cached_names_give_the_same_requests_as_prom_line() {
        let lines = [
            "disk,host=n1,device=sda r_await_ms=4,util_pct=50i,rkb_per_s=2 2000000000",
            "disk,device=sda,host=n1 r_await_ms=5,util_pct=60i 1000000000",
            "disk,host=n1,device=sda r_await_ms=6,r_await_ms=7 1000000000",
            "md,host=n1,array=md0 state=\"clean\",host=\"x\",degraded=false 1000000000",
            "jobs,host=n1,job=7 count=3u,running=true 1000000000",
            "m\\ x,a\\ b=c\\,d v=1 -5000000",
            // a space after an escaped backslash is escaped too (the Go grammar looks one byte
            // back): these are two series of the measurement `m\\ x`
            "m\\\\ x,t=1 v=1 1000000000",
            "m\\\\ x,t=2 v=2 1000000000",
        ];
        let mut e = Encoder::default();
        for _ in 0..3 {
            e.clear();
            e.add_lines(&lines, 0).unwrap();
            let got = e.timeseries();
            let mut slow = Encoder::default();
            for l in &lines {
                let p = parse_any(l).unwrap();
                let ts = p.timestamp.unwrap().div_euclid(1_000_000);
                slow.add_slow(&p, ts);
            }
            assert_eq!(got, slow.timeseries());
            assert_eq!(e.encode(), slow.encode());
            assert_eq!(e.protobuf(), slow.protobuf());
        }
    }
}
