//! The series and samples of one remote-write request, as its lines add them: a series is a
//! label set and a metric (`label set << 32 | metric`, numbered in the order they first come),
//! each sample its series, time and value. A label set's series are found by position where its
//! lines repeat its first line's fields ([`Run`]), by a map otherwise; the samples go out grouped
//! per series, in time order, one per millisecond ([`RequestSeries::each_series`]).

use crate::hash::FxMap;

/// Where a label set's series are in the request being written: its first line's metrics are
/// series `first..first + len` in that line's order, so a later line of the label set with the
/// same fields in the same order finds its series by position; any other line of it looks
/// them up in the request's series map (`mapped`: the run is in the map too).
#[derive(Debug, Clone, Copy, Default)]
struct Run {
    /// The request it belongs to (`RequestSeries::request`); another number: not in this one.
    request: u32,
    first: u32,
    len: u32,
    mapped: bool,
}

/// The request's series and samples, with the buffers kept from one request to the next.
#[derive(Debug, Default)]
pub(super) struct RequestSeries {
    /// per label set: where its series are in the current request
    runs: Vec<Run>,
    /// numbers the requests, for `runs`
    request: u32,
    /// series of the request by (label set, metric), for the label sets whose lines did not
    /// all find their series by position (`Run`); hashed with Fx, whose finish moves the
    /// well-mixed high bits down (the multiply alone, which this map had, leaves the low bits,
    /// the bucket, to the metric's few ids: every series of a metric probed one chain)
    series: FxMap<u64, u32>,
    series_keys: Vec<u64>,
    /// the samples, in line order: their series, and (time, value)
    sample_series: Vec<u32>,
    sample_values: Vec<(i64, f64)>,
    /// no sample's series is below the one before it: each series' samples are together,
    /// series after series, as a batch of lines that are grouped by series leaves them
    in_series_order: bool,
    counts: Vec<u32>,
    at: Vec<u32>,
    grouped: Vec<(i64, f64)>,
    sorted: Vec<(i64, f64)>,
}

impl RequestSeries {
    /// Forgets the request's series and samples (not the label sets).
    pub(super) fn clear(&mut self) {
        self.series.clear();
        self.series_keys.clear();
        self.sample_series.clear();
        self.sample_values.clear();
        self.in_series_order = true;
        if self.request == u32::MAX {
            self.runs.fill(Run::default());
            self.request = 0;
        }
        self.request += 1;
    }

    /// A label set was added to the encoder's (numbered on from the last).
    pub(super) fn add_label_set(&mut self) {
        self.runs.push(Run::default());
    }

    /// Series in the request.
    pub(super) fn series(&self) -> usize {
        self.series_keys.len()
    }

    /// Samples added, before a series' samples at one millisecond are made one.
    pub(super) fn samples(&self) -> usize {
        self.sample_series.len()
    }

    /// Each series' samples are together, series after series (grouped without sorting).
    #[cfg(test)]
    pub(super) fn in_series_order(&self) -> bool {
        self.in_series_order
    }

    /// Adds one line's samples: `values` of distinct metrics, of the label set `lid`.
    pub(super) fn push_line(&mut self, lid: u32, values: &[(u32, f64)], ts: i64) {
        let Some(run) = self.runs.get_mut(lid as usize) else {
            return;
        };
        if run.request != self.request {
            // the label set's first line in this request: all its series are new
            let first = self.series_keys.len() as u32;
            *run = Run {
                request: self.request,
                first,
                len: values.len() as u32,
                mapped: false,
            };
            for (j, (mid, v)) in values.iter().enumerate() {
                self.series_keys
                    .push((u64::from(lid) << 32) | u64::from(*mid));
                self.sample(first + j as u32, ts, *v);
            }
            return;
        }
        let run = *run;
        for (j, (mid, v)) in values.iter().enumerate() {
            let at = run.first as usize + j;
            let s = match self.series_keys.get(at) {
                Some(k) if j < run.len as usize && *k as u32 == *mid => at as u32,
                _ => self.series_of(lid, *mid),
            };
            self.sample(s, ts, *v);
        }
    }

    /// The series (label set `lid`, metric `mid`) of the request, added when new: by the map.
    fn series_of(&mut self, lid: u32, mid: u32) -> u32 {
        if let Some(run) = self.runs.get_mut(lid as usize) {
            if !run.mapped {
                run.mapped = true;
                for s in run.first..run.first + run.len {
                    if let Some(k) = self.series_keys.get(s as usize) {
                        self.series.insert(*k, s);
                    }
                }
            }
        }
        let key = (u64::from(lid) << 32) | u64::from(mid);
        let next = self.series_keys.len() as u32;
        let s = *self.series.entry(key).or_insert(next);
        if s == next {
            self.series_keys.push(key);
        }
        s
    }

    fn sample(&mut self, series: u32, ts: i64, v: f64) {
        if self.sample_series.last().is_some_and(|last| *last > series) {
            self.in_series_order = false;
        }
        self.sample_series.push(series);
        self.sample_values.push((ts, v));
    }

    /// Groups the samples per series (series in the order their lines came), each series' in
    /// time order with one per millisecond (the later line's), and calls `each` with its key
    /// (label set << 32 | metric) and samples.
    pub(super) fn each_series(&mut self, mut each: impl FnMut(u64, &[(i64, f64)])) {
        let mut sorted = std::mem::take(&mut self.sorted);
        if self.in_series_order {
            // each series' samples are together already, series after series
            let (series, values) = (&self.sample_series, &self.sample_values);
            let mut i = 0;
            while i < series.len() {
                let s = series[i];
                let mut j = i + 1;
                while j < series.len() && series[j] == s {
                    j += 1;
                }
                let key = self.series_keys.get(s as usize).copied().unwrap_or(0);
                each(key, one_per_ms(&values[i..j], &mut sorted));
                i = j;
            }
            self.sorted = sorted;
            return;
        }
        // counting sort by series: stable, so a series' samples stay in line order
        let n = self.series_keys.len();
        self.counts.clear();
        self.counts.resize(n + 1, 0);
        for s in &self.sample_series {
            self.counts[*s as usize + 1] += 1;
        }
        for i in 0..n {
            self.counts[i + 1] += self.counts[i];
        }
        let mut grouped = std::mem::take(&mut self.grouped);
        grouped.clear();
        grouped.resize(self.sample_series.len(), (0, 0.0));
        let mut at = std::mem::take(&mut self.at);
        at.clear();
        at.extend_from_slice(&self.counts);
        for (s, tv) in self.sample_series.iter().zip(&self.sample_values) {
            let i = &mut at[*s as usize];
            grouped[*i as usize] = *tv;
            *i += 1;
        }
        for s in 0..n {
            let run = &grouped[self.counts[s] as usize..self.counts[s + 1] as usize];
            each(self.series_keys[s], one_per_ms(run, &mut sorted));
        }
        self.grouped = grouped;
        self.at = at;
        self.sorted = sorted;
    }
}

/// A series' samples in line order as they go out: in time order, one per millisecond (the
/// later line's); `run` itself when it is so already, else sorted in `scratch`.
#[inline(always)]
fn one_per_ms<'a>(run: &'a [(i64, f64)], scratch: &'a mut Vec<(i64, f64)>) -> &'a [(i64, f64)] {
    if run.len() < 2 || run.windows(2).all(|w| w[0].0 < w[1].0) {
        return run;
    }
    scratch.clear();
    scratch.extend_from_slice(run);
    // stable: of two samples at one millisecond the later line's comes last
    scratch.sort_by_key(|(t, _)| *t);
    // keep the last of each millisecond
    let mut w = 0;
    for r in 0..scratch.len() {
        if r + 1 < scratch.len() && scratch[r + 1].0 == scratch[r].0 {
            continue;
        }
        scratch[w] = scratch[r];
        w += 1;
    }
    scratch.truncate(w);
    scratch
}
