//! The exposition: the latest reports in the Prometheus text format (version 0.0.4).
//!
//! The names are [`storwatch_wire::prom`]'s, shared with the collector's remote-write output.
//! Every numeric field of a report line becomes one sample: metric
//! `storwatch_<measurement>_<field>`, labels from the line's tags, booleans as 0/1. Field names
//! are spelt the Prometheus way, in base units, as `promtool check metrics` asks: `_ms`, `_us`,
//! `_s` become `_seconds` (values scaled), `_kb` `_bytes` (×1024, the kernel's KiB), `_per_s`
//! `_per_second`, `_pct` `_percent`, and iostat's one-letter directions are written out (`r`
//! read, `w` write, `d` discard, `f` flush; `rkb_per_s` is `read_bytes_per_second`). So
//! `disk.r_await_ms` is `storwatch_disk_read_await_seconds`. Fields with `total` in their name
//! after its first word are counters and end in `_total` (`pressure.io_some_total_us` is
//! `storwatch_pressure_io_some_seconds_total`); all others are gauges. String fields (states,
//! names) are left out: they are labels in the `_info` metric of their measurement when they
//! describe the series (`storwatch_md_info{array="md0",state="recovering",sync_action="recover"}
//! 1`). Events are not exposed (a scrape would miss most of them; they stay in InfluxDB).
//!
//! A series stays exposed for [`KEEP_REPORTS`] reports after the last report that carried it, so
//! lines written only on change or every few minutes (`disk_tunables`) do not flicker, and a
//! vanished device disappears within a minute at the default interval. Samples carry no
//! timestamp: Prometheus stamps them with the scrape time.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use storwatch_wire::lp::{parse_line, Backend, FieldValue, Point};
use storwatch_wire::prom::{prom_line_planned, PromLine, PromPlan};

use page::{write_labels, Family};
use plain::OnePass;

/// How many reports a series outlives the last report that carried it.
pub const KEEP_REPORTS: u64 = 6;
/// Series of ended jobs (`job`, `job_io` lines no longer in the latest report) kept at most,
/// and their estimated bytes at most: past either, the oldest go first. Under job churn every
/// job is a new series, and [`KEEP_REPORTS`] reports of ended jobs grew the agent past its
/// unit's memory limit (`MemoryMax=128M`); a running job's series is never dropped (their
/// number is bounded by `[jobs] max_jobs`).
pub const MAX_ENDED_JOB_SERIES: usize = 1_000;
/// See [`MAX_ENDED_JOB_SERIES`]: 1 MiB.
pub const MAX_ENDED_JOB_BYTES: usize = 1 << 20;
/// The measurements whose series are jobs'.
const JOB_MEASUREMENTS: [&str; 2] = ["job", "job_io"];
/// Measurements not exposed.
const SKIPPED: [&str; 1] = ["event"];

/// What the series of one measurement, one set of label names and one field layout have in
/// common, kept once for them all (the 200 `disk` series of a disk server share one): their
/// samples' names, and where a line so laid out has each value and `_info` label.
#[derive(Debug)]
struct Shape {
    measurement: String,
    /// Numeric fields: (the Prometheus name without the base, the field as written).
    names: Vec<(String, String)>,
    /// String fields' label names, for the measurement's `_info` metric.
    info: Vec<String>,
    /// The field keys of the line read in whole, as written, each with whether it was a
    /// string ([`layout_of`]): a line of a series of this shape with the same layout is read by
    /// the plan alone (see [`PromPlan`]).
    layout: Vec<u8>,
    plan: PromPlan,
}

impl Shape {
    /// Whether series of `self` and of `other` give the same samples: the same names in the
    /// same order, and an `_info` sample or not alike.
    fn same_samples(&self, other: &Shape) -> bool {
        self.names == other.names && self.info.is_empty() == other.info.is_empty()
    }
}

#[derive(Debug, Clone)]
struct Series {
    shape: Arc<Shape>,
    /// The labels as every sample of the series writes them after its name: `{k="v",…}`,
    /// escaped, or nothing.
    labels_text: String,
    /// The values of [`Shape::names`], in base units.
    values: Vec<f64>,
    /// The values of [`Shape::info`].
    info: Vec<String>,
    report: u64,
}

/// The field keys of `p` and whether each is a string, one after another (each its length, a
/// byte for its kind, its bytes), at the end of `out`.
fn layout_of(p: &Point<'_>, out: &mut Vec<u8>) {
    for (k, v) in &p.fields {
        out.extend_from_slice(&k.len().to_le_bytes());
        out.push(u8::from(matches!(v, FieldValue::String(_))));
        out.extend_from_slice(k.as_bytes());
    }
}

impl Series {
    /// Its estimated size in memory, bytes: its labels, values and strings, and a fixed
    /// overhead for the vectors, the map's node and each string's header (24 bytes); its shape
    /// is shared, not counted.
    fn size(&self) -> usize {
        const STRING: usize = 24;
        128 + self.labels_text.len()
            + 8 * self.values.len()
            + self.info.iter().map(|v| v.len() + STRING).sum::<usize>()
    }
}

/// The latest value of every series the recent reports carried.
///
/// Every report is read into it, and a page is made from it for each report a scrape asks for
/// (`served`), so what both cost is paid every report: the series are kept in place (a line of
/// a known series, in the fields it was last read whole in, updates its values without
/// allocation: [`plain`]), and the families, which change only when a series comes, goes or
/// writes other fields, are made again only then; the page is then written family by family
/// with no allocation.
#[derive(Debug, Default)]
pub struct Exposition {
    /// Every series, in no order; [`Exposition::keys`] gives their order.
    series: Vec<Series>,
    /// `measurement,label=value,…` of each series, to its index in [`Exposition::series`].
    keys: BTreeMap<String, usize>,
    /// A line's series key as written (`disk,host=a,device=sda`), to its series' index: a line
    /// of a known series is read without allocation ([`plain`]).
    by_key: HashMap<String, usize>,
    /// The series' shapes, each by its measurement, label names and layout (as
    /// `Exposition::shape_key` writes them); one goes when no series has it.
    shapes: HashMap<Vec<u8>, Arc<Shape>>,
    reports: u64,
    /// The page's families, by name; made again when `families_stale`.
    families: Vec<Family>,
    families_stale: bool,
    /// A line's key, made here to look the series up.
    key: String,
    /// A line's [`layout_of`], made here.
    layout: Vec<u8>,
    /// A line's key in [`Exposition::shapes`], made here.
    shape_key: Vec<u8>,
    /// A line's labels as written after a sample's name, made here.
    labels_text: String,
    /// A line's numbers, read here (a string's NaN).
    numbers: Vec<f64>,
    /// A line's strings, read in one pass or by the view: each its field's index and where its
    /// text is in the line.
    strings: Vec<(usize, usize, usize)>,
    /// Lines read in one pass.
    #[cfg(test)]
    one_pass: u64,
    /// Lines read by the view.
    #[cfg(test)]
    viewed: u64,
    /// Every line read whole: the reading the one-pass one is compared with.
    #[cfg(test)]
    whole_only: bool,
}

impl Exposition {
    /// Takes in one report (line protocol, one line per `\n`); lines that do not parse are
    /// skipped (the agent wrote them, so there are none).
    pub fn update(&mut self, report: &str) {
        self.reports += 1;
        for line in report.lines() {
            let key = match self.read_plain(line) {
                OnePass::Taken => continue,
                OnePass::Unknown(key) => Some(key),
                OnePass::NotPlain => match self.read_view(line) {
                    OnePass::Taken => continue,
                    OnePass::Unknown(key) => Some(key),
                    OnePass::NotPlain => None,
                },
            };
            let Ok(p) = parse_line(line, Backend::V1) else {
                continue;
            };
            if SKIPPED.contains(&p.measurement.as_ref()) {
                continue;
            }
            self.layout.clear();
            layout_of(&p, &mut self.layout);
            self.read_whole(&p, key);
        }
        let now = self.reports;
        if self
            .series
            .iter()
            .any(|s| now.saturating_sub(s.report) >= KEEP_REPORTS)
        {
            let mut keep: Vec<bool> = self
                .series
                .iter()
                .map(|s| now.saturating_sub(s.report) < KEEP_REPORTS)
                .collect();
            self.bound_ended_jobs(&mut keep);
            self.keep(&keep);
        } else {
            let mut keep = vec![true; self.series.len()];
            if self.bound_ended_jobs(&mut keep) {
                self.keep(&keep);
            }
        }
    }

    /// Reads a line of a series not seen, or not in the fields its plan was made from
    /// (`self.layout` is the line's [`layout_of`]); `written`: its series key as written.
    fn read_whole(&mut self, p: &Point<'_>, written: Option<&str>) {
        let (
            PromLine {
                labels,
                values,
                info,
                ..
            },
            plan,
        ) = prom_line_planned(p);
        let (names, numbers): (Vec<_>, Vec<f64>) =
            values.into_iter().map(|(n, f, v)| ((n, f), v)).unzip();
        let (info_names, info): (Vec<String>, Vec<String>) = info.into_iter().unzip();
        self.shape_key.clear();
        for part in std::iter::once(p.measurement.as_ref()).chain(labels.iter().map(|l| &*l.0)) {
            self.shape_key.extend_from_slice(&part.len().to_le_bytes());
            self.shape_key.extend_from_slice(part.as_bytes());
        }
        self.shape_key.push(0xff);
        self.shape_key.extend_from_slice(&self.layout);
        let shape = match self.shapes.get(&self.shape_key) {
            Some(shape) => Arc::clone(shape),
            None => {
                let shape = Arc::new(Shape {
                    measurement: p.measurement.to_string(),
                    names,
                    info: info_names,
                    layout: self.layout.clone(),
                    plan,
                });
                self.shapes
                    .insert(self.shape_key.clone(), Arc::clone(&shape));
                shape
            }
        };
        self.key.clear();
        self.key.push_str(&p.measurement);
        for (k, v) in &labels {
            let _ = write!(self.key, ",{k}={v}");
        }
        self.labels_text.clear();
        write_labels(&labels, &[], &mut self.labels_text);
        if let Some(&i) = self.keys.get(self.key.as_str()) {
            let s = &mut self.series[i];
            if s.labels_text != self.labels_text {
                // one key for two label sets (a value with `,` or `=` in it): the line's; a
                // line written as the other set is read whole again, to take its labels back
                s.labels_text.clone_from(&self.labels_text);
                self.by_key.retain(|_, at| *at != i);
            }
            if !s.shape.same_samples(&shape) {
                self.families_stale = true;
            }
            let old = std::mem::replace(&mut s.shape, shape);
            s.values = numbers;
            s.info = info;
            s.report = self.reports;
            // the last series of its shape took another: the shape goes (the map holds the other)
            if Arc::strong_count(&old) == 2 {
                self.shapes.retain(|_, s| !Arc::ptr_eq(s, &old));
            }
            self.know(written, i);
            return;
        }
        let i = self.series.len();
        self.keys.insert(self.key.clone(), i);
        self.series.push(Series {
            shape,
            labels_text: self.labels_text.clone(),
            values: numbers,
            info,
            report: self.reports,
        });
        self.know(written, i);
        self.families_stale = true;
    }

    /// Keeps the series key as written of the line just read, `written`, as series `i`'s.
    fn know(&mut self, written: Option<&str>, i: usize) {
        let Some(key) = written else {
            return;
        };
        match self.by_key.get_mut(key) {
            Some(at) => *at = i,
            None => {
                self.by_key.insert(key.to_owned(), i);
            }
        }
    }

    /// Keeps the series whose `keep` is true, in place, and their keys.
    fn keep(&mut self, keep: &[bool]) {
        let mut to = vec![usize::MAX; self.series.len()];
        let mut n = 0;
        for (i, k) in keep.iter().enumerate() {
            if *k {
                to[i] = n;
                n += 1;
            }
        }
        let mut i = 0;
        self.series.retain(|_| {
            i += 1;
            keep[i - 1]
        });
        self.keys.retain(|_, i| {
            *i = to[*i];
            *i != usize::MAX
        });
        self.by_key.retain(|_, i| {
            *i = to[*i];
            *i != usize::MAX
        });
        self.shapes.retain(|_, s| Arc::strong_count(s) > 1);
        self.families_stale = true;
    }

    /// Marks in `keep` the oldest series of ended jobs past [`MAX_ENDED_JOB_SERIES`] or
    /// [`MAX_ENDED_JOB_BYTES`] (among those `keep` still keeps); true if it marked any.
    fn bound_ended_jobs(&self, keep: &mut [bool]) -> bool {
        let now = self.reports;
        let mut ended: Vec<(u64, usize, &String, usize)> = self
            .keys
            .iter()
            .map(|(k, &i)| (k, i, &self.series[i]))
            .filter(|(_, i, s)| {
                keep[*i]
                    && s.report < now
                    && JOB_MEASUREMENTS.contains(&s.shape.measurement.as_str())
            })
            .map(|(k, i, s)| (s.report, k.len() + s.size(), k, i))
            .collect();
        let total: usize = ended.iter().map(|e| e.1).sum();
        if ended.len() <= MAX_ENDED_JOB_SERIES && total <= MAX_ENDED_JOB_BYTES {
            return false;
        }
        // newest first: the ones kept
        ended.sort_by(|a, b| b.0.cmp(&a.0).then(a.2.cmp(b.2)));
        let (mut n, mut bytes) = (0, 0);
        for (_, size, _, i) in ended {
            n += 1;
            bytes += size;
            if n > MAX_ENDED_JOB_SERIES || bytes > MAX_ENDED_JOB_BYTES {
                keep[i] = false;
            }
        }
        true
    }

    /// The estimated bytes the ended jobs' series hold (what [`MAX_ENDED_JOB_BYTES`] bounds).
    #[cfg(test)]
    fn ended_job_bytes(&self) -> (usize, usize) {
        self.keys
            .iter()
            .map(|(k, &i)| (k, &self.series[i]))
            .filter(|(_, s)| {
                s.report < self.reports && JOB_MEASUREMENTS.contains(&s.shape.measurement.as_str())
            })
            .fold((0, 0), |(n, b), (k, s)| (n + 1, b + k.len() + s.size()))
    }
}

mod page;
mod plain;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
