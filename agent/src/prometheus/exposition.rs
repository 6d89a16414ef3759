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

use storwatch_wire::lp::{parse_line, Backend, FieldValue, Point};
use storwatch_wire::prom::{metric_name, number, prom_line_planned, PromLine, PromPlan};

use super::help::HELP;

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

#[derive(Debug, Clone)]
struct Series {
    measurement: String,
    labels: Vec<(String, String)>,
    /// The labels as every sample of the series writes them after its name: `{k="v",…}`,
    /// escaped, or nothing.
    labels_text: String,
    /// Numeric fields (named the Prometheus way, as written) and their values in base units.
    values: Vec<(String, String, f64)>,
    /// String fields, for the measurement's `_info` metric.
    info: Vec<(String, String)>,
    report: u64,
    /// The field keys of the line last read in whole, as written, each with whether it was a
    /// string ([`layout_of`]), and where its values and `_info` labels came from: a line of the
    /// same series with the same layout is read by the plan alone (see [`PromPlan`]).
    layout: Vec<u8>,
    plan: PromPlan,
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
    /// Takes the values and strings of `p` by the plan, if `p`'s fields are laid out as those
    /// the plan was made from (`layout`: [`layout_of`] `p`).
    fn take_by_plan(&mut self, p: &Point<'_>, layout: &[u8]) -> bool {
        if layout != self.layout {
            return false;
        }
        for ((_, _, kept), &(at, scale)) in self.values.iter_mut().zip(&self.plan.values) {
            if let Some(v) = p.fields.get(at).and_then(|(_, v)| number(v)) {
                *kept = v * scale;
            }
        }
        for ((_, kept), &at) in self.info.iter_mut().zip(&self.plan.info) {
            if let Some((_, FieldValue::String(v))) = p.fields.get(at) {
                if kept != v {
                    kept.clear();
                    kept.push_str(v);
                }
            }
        }
        true
    }

    /// Its estimated size in memory, bytes: the strings' lengths, the values, and a fixed
    /// overhead for the vectors, the map's node and each string's header (24 bytes).
    fn size(&self) -> usize {
        const STRING: usize = 24;
        let pairs = |v: &[(String, String)]| {
            v.iter()
                .map(|(a, b)| a.len() + b.len() + 2 * STRING)
                .sum::<usize>()
        };
        128 + self.measurement.len()
            + pairs(&self.labels)
            + pairs(&self.info)
            + self
                .values
                .iter()
                .map(|(a, b, _)| a.len() + b.len() + 2 * STRING + 8)
                .sum::<usize>()
    }

    /// Whether a line read as `values` and `info` has this series' samples: the same fields in
    /// the same order, and an `_info` sample or not as before. Then its new values are taken in
    /// place and the families need not be made again.
    fn same_samples(&self, values: &[(String, String, f64)], info: &[(String, String)]) -> bool {
        self.values.len() == values.len()
            && self.info.is_empty() == info.is_empty()
            && self
                .values
                .iter()
                .zip(values)
                .all(|(a, b)| a.0 == b.0 && a.1 == b.1)
    }
}

/// Where [`Family::members`] points at a series' `_info` sample instead of one of its values.
const INFO: u32 = u32::MAX;

/// One metric family of the page: its name, its HELP and TYPE lines, and its samples in the
/// order of their series' keys, each `(series, value)`: an index into [`Exposition::series`]
/// and one into that series' values (or [`INFO`]).
#[derive(Debug)]
struct Family {
    name: String,
    head: String,
    members: Vec<(u32, u32)>,
    /// The measurement and field the HELP and TYPE lines were made from (the first series').
    measurement: String,
    field: String,
}

impl Family {
    fn new(name: String, measurement: &str, field: &str, members: Vec<(u32, u32)>) -> Family {
        let kind = if !field.is_empty() && name.ends_with("_total") {
            "counter"
        } else {
            "gauge"
        };
        let help = help_of(&name, measurement, field);
        let head = format!(
            "# HELP {name} {}\n# TYPE {name} {kind}\n",
            escape_help(&help)
        );
        Family {
            name,
            head,
            members,
            measurement: measurement.to_owned(),
            field: field.to_owned(),
        }
    }
}

/// The latest value of every series the recent reports carried.
///
/// The page is made once per report, so what it costs is paid every report: the series are
/// kept in place (a line whose series is known updates its values), and the families, which
/// change only when a series comes, goes or writes other fields, are made again only then;
/// the page is then written family by family with no allocation.
#[derive(Debug, Default)]
pub struct Exposition {
    /// Every series, in no order; [`Exposition::keys`] gives their order.
    series: Vec<Series>,
    /// `measurement,label=value,…` of each series, to its index in [`Exposition::series`].
    keys: BTreeMap<String, usize>,
    /// A line's measurement and tags as written (each its length and its bytes), to its
    /// series' index: a line of a known series is found without naming its labels.
    written: HashMap<Vec<u8>, usize>,
    reports: u64,
    /// The page's families, by name; made again when `families_stale`.
    families: Vec<Family>,
    families_stale: bool,
    /// A line's key, made here to look the series up.
    key: String,
    /// A line's key in [`Exposition::written`], made here.
    written_key: Vec<u8>,
    /// A line's [`layout_of`], made here.
    layout: Vec<u8>,
}

impl Exposition {
    /// Takes in one report (line protocol, one line per `\n`); lines that do not parse are
    /// skipped (the agent wrote them, so there are none).
    pub fn update(&mut self, report: &str) {
        self.reports += 1;
        for line in report.lines() {
            let Ok(p) = parse_line(line, Backend::V1) else {
                continue;
            };
            if SKIPPED.contains(&p.measurement.as_ref()) {
                continue;
            }
            self.written_key.clear();
            for part in
                std::iter::once(&p.measurement).chain(p.tags.iter().flat_map(|(k, v)| [k, v]))
            {
                self.written_key
                    .extend_from_slice(&part.len().to_le_bytes());
                self.written_key.extend_from_slice(part.as_bytes());
            }
            self.layout.clear();
            layout_of(&p, &mut self.layout);
            if let Some(&i) = self.written.get(&self.written_key) {
                let s = &mut self.series[i];
                if s.take_by_plan(&p, &self.layout) {
                    s.report = self.reports;
                    continue;
                }
            }
            self.read_whole(&p);
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
    /// (`self.layout` is the line's [`layout_of`]).
    fn read_whole(&mut self, p: &Point<'_>) {
        let (
            PromLine {
                labels,
                values,
                info,
                ..
            },
            plan,
        ) = prom_line_planned(p);
        let layout = self.layout.clone();
        self.key.clear();
        self.key.push_str(&p.measurement);
        for (k, v) in &labels {
            let _ = write!(self.key, ",{k}={v}");
        }
        if let Some(&i) = self.keys.get(self.key.as_str()) {
            let s = &mut self.series[i];
            if s.labels != labels {
                // one key for two label sets (a value with `,` or `=` in it): the line's
                s.labels_text.clear();
                write_labels(&labels, &[], &mut s.labels_text);
                s.labels = labels;
            }
            if s.same_samples(&values, &info) {
                for (kept, new) in s.values.iter_mut().zip(&values) {
                    kept.2 = new.2;
                }
            } else {
                s.values = values;
                self.families_stale = true;
            }
            s.info = info;
            s.report = self.reports;
            s.layout = layout;
            s.plan = plan;
            self.written.insert(self.written_key.clone(), i);
            return;
        }
        let mut labels_text = String::new();
        write_labels(&labels, &[], &mut labels_text);
        let i = self.series.len();
        self.keys.insert(self.key.clone(), i);
        self.written.insert(self.written_key.clone(), i);
        self.series.push(Series {
            measurement: p.measurement.to_string(),
            labels,
            labels_text,
            values,
            info,
            report: self.reports,
            layout,
            plan,
        });
        self.families_stale = true;
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
        self.written.retain(|_, i| {
            *i = to[*i];
            *i != usize::MAX
        });
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
                keep[*i] && s.report < now && JOB_MEASUREMENTS.contains(&s.measurement.as_str())
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
                s.report < self.reports && JOB_MEASUREMENTS.contains(&s.measurement.as_str())
            })
            .fold((0, 0), |(n, b), (k, s)| (n + 1, b + k.len() + s.size()))
    }

    /// The families, by name, each with its samples in the order of their series' keys.
    fn make_families(&mut self) {
        // family name -> (measurement, field, samples), the names not made until the end
        let bases: Vec<String> = self
            .series
            .iter()
            .map(|s| metric_name(&s.measurement))
            .collect();
        let mut families: BTreeMap<Name<'_>, Members<'_>> = BTreeMap::new();
        for &i in self.keys.values() {
            let (s, base) = (&self.series[i], bases[i].as_str());
            let at = u32::try_from(i).unwrap_or(u32::MAX);
            for (j, (prom, field, _)) in s.values.iter().enumerate() {
                let j = u32::try_from(j).unwrap_or(u32::MAX - 1);
                families
                    .entry(Name(base, prom))
                    .or_insert_with(|| (&s.measurement, field, Vec::new()))
                    .2
                    .push((at, j));
            }
            if !s.info.is_empty() {
                families
                    .entry(Name(base, "info"))
                    .or_insert_with(|| (&s.measurement, "", Vec::new()))
                    .2
                    .push((at, INFO));
            }
        }
        // the families of the last page keep their HELP and TYPE lines
        let mut last: HashMap<String, Family> = HashMap::with_capacity(self.families.len());
        for mut f in std::mem::take(&mut self.families) {
            last.insert(std::mem::take(&mut f.name), f);
        }
        let mut name = String::new();
        self.families = families
            .into_iter()
            .map(|(n, (measurement, field, members))| {
                name.clear();
                let _ = write!(name, "{}_{}", n.0, n.1);
                match last.remove_entry(name.as_str()) {
                    Some((name, f)) if f.measurement == measurement && f.field == field => {
                        Family { name, members, ..f }
                    }
                    _ => Family::new(name.clone(), measurement, field, members),
                }
            })
            .collect();
        self.families_stale = false;
    }

    /// The text format: one family per metric name, each with HELP and TYPE, families sorted.
    pub fn render(&mut self) -> String {
        let mut out = Vec::new();
        self.render_into(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// [`Exposition::render`], written at the end of `out`.
    pub fn render_into(&mut self, out: &mut Vec<u8>) {
        if self.families_stale {
            self.make_families();
        }
        let mut info_labels = String::new();
        for f in &self.families {
            out.extend_from_slice(f.head.as_bytes());
            for &(i, j) in &f.members {
                let Some(s) = self.series.get(i as usize) else {
                    continue;
                };
                out.extend_from_slice(f.name.as_bytes());
                let v = if j == INFO {
                    info_labels.clear();
                    write_labels(&s.labels, &s.info, &mut info_labels);
                    out.extend_from_slice(info_labels.as_bytes());
                    1.0
                } else {
                    out.extend_from_slice(s.labels_text.as_bytes());
                    s.values.get(j as usize).map_or(f64::NAN, |v| v.2)
                };
                write_value(v, out);
            }
        }
    }
}

/// The family's HELP from the metric contract ([`HELP`]); a family the contract lacks (a field
/// added to a collector but not yet to `contract/*.yaml`, which a test catches) still gets one.
fn help_of(name: &str, measurement: &str, field: &str) -> String {
    match HELP.binary_search_by(|(n, _)| (*n).cmp(name)) {
        Ok(i) => HELP[i].1.to_string(),
        Err(_) if field.is_empty() => {
            format!("States of storwatch's {measurement} series as labels (always 1).")
        }
        Err(_) => format!("storwatch {measurement} field {field}, in base units."),
    }
}

fn escape_label(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A family's measurement and field (the first series' that has it) and its samples, while the
/// families are made.
type Members<'a> = (&'a str, &'a str, Vec<(u32, u32)>);

/// A family's name, `<base>_<field>`, compared as that string without making it.
#[derive(Debug, Clone, Copy)]
struct Name<'a>(&'a str, &'a str);

impl Name<'_> {
    fn bytes(&self) -> impl Iterator<Item = u8> + '_ {
        self.0.bytes().chain(*b"_").chain(self.1.bytes())
    }
}

impl Ord for Name<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if self.0 == other.0 {
            return self.1.cmp(other.1);
        }
        // bases that differ before either ends differ there, in both names
        let n = self.0.len().min(other.0.len());
        match self.0.as_bytes()[..n].cmp(&other.0.as_bytes()[..n]) {
            std::cmp::Ordering::Equal => self.bytes().cmp(other.bytes()),
            unequal => unequal,
        }
    }
}

impl PartialOrd for Name<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Name<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Name<'_> {}

/// `{k="v",…}` of `labels` and then `extra`, escaped, at the end of `out`; nothing when both
/// are empty.
fn write_labels(labels: &[(String, String)], extra: &[(String, String)], out: &mut String) {
    if labels.is_empty() && extra.is_empty() {
        return;
    }
    out.push('{');
    for (i, (k, val)) in labels.iter().chain(extra).enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push_str("=\"");
        escape_label(val, out);
        out.push('"');
    }
    out.push('}');
}

/// ` <value>\n` of a sample.
fn write_value(v: f64, out: &mut Vec<u8>) {
    out.push(b' ');
    if v.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 { b"+Inf" } else { b"-Inf" });
    } else if v == v.trunc() && v.abs() < 1e15 && !(v == 0.0 && v.is_sign_negative()) {
        // a whole number, as `{v}` writes it (no `.0`), without the float's formatting
        let mut n = v.abs() as u64;
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        if v < 0.0 {
            out.push(b'-');
        }
        out.extend_from_slice(&digits[at..]);
    } else {
        let _ = std::io::Write::write_fmt(out, format_args!("{v}"));
    }
    out.push(b'\n');
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use storwatch_wire::prom::{prom_field, prom_line};

    const REPORT: &str = "\
disk,host=node1,device=sda,name=sda util_pct=12.5,r_per_s=3i,saturated_s=0i 1700000000000000000
md,host=node1,array=md0,level=raid6 members=12i,state=\"recovering\",sync_action=\"recover\",stalled=false,rebuild_risk=1.5e-7 1700000000000000000
agent_source,host=node1,source=zpool errors=0i,errors_total=3i 1700000000000000000
event,host=node1,kind=md_degraded message=\"md0 lost a member\" 1700000000000000000
";

    #[test]
    fn help_comes_from_the_contract_and_says_what_the_metric_is() {
        assert!(
            HELP.windows(2).all(|w| w[0].0 < w[1].0),
            "sorted, for the lookup"
        );
        let help = help_of("storwatch_disk_read_await_seconds", "disk", "r_await_ms");
        assert!(
            help.starts_with("Block device: Mean time per read"),
            "{help}"
        );
        assert!(help.ends_with("(seconds)."), "{help}");
        // every family HELP names is a metric: no template text left
        assert!(HELP.iter().all(|(_, h)| !h.contains("in base units")));
        // a field the contract does not know still gets a HELP line
        let other = help_of("storwatch_disk_new_thing", "disk", "new_thing");
        assert_eq!(other, "storwatch disk field new_thing, in base units.");
    }

    #[test]
    fn report_as_text_format() {
        let mut e = Exposition::default();
        e.update(REPORT);
        insta::assert_snapshot!(e.render());
    }

    #[test]
    fn a_field_written_twice_is_one_sample_with_the_last_value() {
        // a duplicate label or a second sample of one series would fail the whole scrape
        let mut e = Exposition::default();
        e.update("md,host=n1,array=md0 state=\"clean\",v=1,state=\"degraded\",v=2,host=\"x\" 1\n");
        let text = e.render();
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            samples,
            vec![
                "storwatch_md_info{array=\"md0\",host=\"n1\",state=\"degraded\"} 1",
                "storwatch_md_v{array=\"md0\",host=\"n1\"} 2",
            ],
            "{text}"
        );
    }

    #[test]
    fn labels_are_escaped_and_names_made_valid() {
        let mut e = Exposition::default();
        e.update("my-meas,host=a\\ b,9tag=x\\\"y\\\\z,__x=1 v.1=2i 1\n");
        let text = e.render();
        assert!(
            // 1.x keeps `\"` and `\\` of a tag value as written; the text format escapes each
            text.contains(r#"storwatch_my_meas_v_1{_9tag="x\\\"y\\\\z",_x="1",host="a b"} 2"#),
            "{text}"
        );
        assert!(
            text.contains("# TYPE storwatch_my_meas_v_1 gauge"),
            "{text}"
        );
    }

    #[test]
    fn field_names_in_base_units() {
        for (field, name, scale) in [
            ("r_await_ms", "read_await_seconds", 1e-3),
            ("rkb_per_s", "read_bytes_per_second", 1024.0),
            ("d_per_s", "discard_per_second", 1.0),
            ("io_some_total_us", "io_some_seconds_total", 1e-6),
            ("rss_kb", "rss_bytes", 1024.0),
            ("util_pct", "util_percent", 1.0),
            ("errors_total", "errors_total", 1.0),
            ("sync_eta_s", "sync_eta_seconds", 1.0),
            ("rareq_sz_kb", "rareq_sz_bytes", 1024.0),
        ] {
            assert_eq!(prom_field(field), (name.to_string(), scale), "{field}");
        }
    }

    #[test]
    fn series_outlive_a_few_reports_then_go() {
        let mut e = Exposition::default();
        e.update("disk_tunables,device=sda read_ahead_kb=128i 1\n");
        for _ in 1..KEEP_REPORTS {
            e.update("disk,device=sda util_pct=1 2\n");
            assert!(e
                .render()
                .contains("storwatch_disk_tunables_read_ahead_bytes"));
        }
        e.update("disk,device=sda util_pct=1 2\n");
        assert!(!e.render().contains("read_ahead"));
        assert!(e
            .render()
            .contains("storwatch_disk_util_percent{device=\"sda\"} 1\n"));
    }

    #[test]
    fn under_job_churn_the_ended_jobs_series_are_bounded_and_the_running_ones_kept() {
        // 2,000 new jobs at every report, each with a job line and two job_io lines
        let mut e = Exposition::default();
        let line = |r: u64, j: u64| {
            format!(
                "job,host=wn042,batch=htcondor,job=_var_lib_condor_execute_slot1_{j}@wn042.example.org,\
                 slot=slot1_{j} cpu_efficiency_pct=93.5,cores=8,cores_from=\"cpu_weight\",cpu_s=74.8,\
                 interval_s=10,io_some_pct=1.5,read_bytes_per_s=1048576,write_bytes_per_s=65536,\
                 memory_current_bytes=2147483648i,age_s={r}0 1\n\
                 job_io,host=wn042,batch=htcondor,job=_var_lib_condor_execute_slot1_{j}@wn042.example.org,\
                 device=sda read_bytes_per_s=1048576,write_bytes_per_s=65536 1\n\
                 job_io,host=wn042,batch=htcondor,job=_var_lib_condor_execute_slot1_{j}@wn042.example.org,\
                 device=dm-2 read_bytes_per_s=1048576,write_bytes_per_s=65536 1\n"
            )
        };
        for r in 0..2 * KEEP_REPORTS {
            let report: String = (0..2_000).map(|j| line(r, r * 2_000 + j)).collect();
            e.update(&report);
            let (n, bytes) = e.ended_job_bytes();
            assert!(n <= MAX_ENDED_JOB_SERIES, "{n} series of ended jobs");
            assert!(bytes <= MAX_ENDED_JOB_BYTES, "{bytes} bytes of ended jobs");
            // the running jobs: all there
            let running = e.series.iter().filter(|s| s.report == e.reports).count();
            assert_eq!(running, 6_000);
        }
        // the newest ended ones are those kept: those of the report before the last
        let ended: Vec<u64> = e
            .series
            .iter()
            .filter(|s| s.report < e.reports)
            .map(|s| s.report)
            .collect();
        assert!(!ended.is_empty());
        assert!(ended.iter().all(|r| *r == e.reports - 1), "{ended:?}");
        // other series keep their KEEP_REPORTS
        e.update("disk_tunables,device=sda read_ahead_kb=128i 1\n");
        e.update(&line(99, 1));
        assert!(e.render().contains("read_ahead"));
    }

    #[test]
    fn empty_and_garbage_reports_render_nothing() {
        let mut e = Exposition::default();
        e.update("");
        e.update("not line protocol at all\n\u{1b}[31m\n");
        assert_eq!(e.render(), "");
    }

    /// The page as it was made before the series were kept in place: every report's lines
    /// made into series anew, every page's families and samples made from them.
    #[derive(Default)]
    struct Reference {
        series: BTreeMap<String, (String, PromLine, u64)>,
        reports: u64,
    }

    impl Reference {
        fn update(&mut self, report: &str) {
            self.reports += 1;
            for line in report.lines() {
                let Ok(p) = parse_line(line, Backend::V1) else {
                    continue;
                };
                if SKIPPED.contains(&p.measurement.as_ref()) {
                    continue;
                }
                let pl = prom_line(&p);
                let mut key = p.measurement.to_string();
                for (k, v) in &pl.labels {
                    let _ = write!(key, ",{k}={v}");
                }
                self.series
                    .insert(key, (p.measurement.to_string(), pl, self.reports));
            }
            let now = self.reports;
            self.series
                .retain(|_, s| now.saturating_sub(s.2) < KEEP_REPORTS);
        }

        fn render(&self) -> String {
            let mut families: BTreeMap<String, (String, String, Vec<String>)> = BTreeMap::new();
            let sample =
                |name: &str, labels: &[(String, String)], extra: &[(String, String)], v| {
                    let mut s = name.to_string();
                    let mut l = String::new();
                    write_labels(labels, extra, &mut l);
                    s.push_str(&l);
                    let mut out = Vec::new();
                    write_value(v, &mut out);
                    s + std::str::from_utf8(&out).unwrap()
                };
            for (measurement, pl, _) in self.series.values() {
                let labels = &pl.labels;
                let base = metric_name(measurement);
                for (prom, field, v) in &pl.values {
                    let name = format!("{base}_{prom}");
                    families
                        .entry(name.clone())
                        .or_insert_with(|| (measurement.clone(), field.clone(), Vec::new()))
                        .2
                        .push(sample(&name, labels, &[], *v));
                }
                if !pl.info.is_empty() {
                    let name = format!("{base}_info");
                    families
                        .entry(name.clone())
                        .or_insert_with(|| (measurement.clone(), String::new(), Vec::new()))
                        .2
                        .push(sample(&name, labels, &pl.info, 1.0));
                }
            }
            let mut out = String::new();
            for (name, (measurement, field, samples)) in &families {
                let kind = if !field.is_empty() && name.ends_with("_total") {
                    "counter"
                } else {
                    "gauge"
                };
                let help = help_of(name, measurement, field);
                let _ = writeln!(out, "# HELP {name} {}", escape_help(&help));
                let _ = writeln!(out, "# TYPE {name} {kind}");
                for s in samples {
                    out.push_str(s);
                }
            }
            out
        }
    }

    /// A line of a small world: few measurements, devices and fields, so that reports repeat
    /// series, drop them, bring them back, and change their fields, order and string fields.
    fn world_line() -> impl Strategy<Value = String> {
        let measurement = prop::sample::select(vec![
            "disk",
            "md",
            "disk_tunables",
            "my-meas",
            "my_meas",
            "event",
        ]);
        let device = prop::sample::select(vec!["sda", "sdb", "dm-0", "a\\,b=c", "x\\\"y"]);
        let field = prop::sample::select(vec![
            "util_pct=12.5",
            "util_pct=0",
            "r_await_ms=3i",
            "errors_total=7i",
            "state=\"clean\"",
            "state=\"degraded\"",
            "stalled=true",
            "v=1e300",
            "v=-0.000001",
            "v=-0",
            "v=123456789012345678",
            "w=-42i",
            "w=999999999999999",
            "ab_c=1",
            "rkb_per_s=1024",
        ]);
        (
            measurement,
            prop::collection::vec(device, 1..=2),
            prop::collection::vec(field, 1..5),
        )
            .prop_map(|(m, devices, fields)| {
                let tags: String = devices
                    .iter()
                    .enumerate()
                    .map(|(i, d)| format!(",t{i}={d}"))
                    .collect();
                format!("{m},host=n1{tags} {} 1\n", fields.join(","))
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn a_value_is_written_as_rust_writes_it(
            v in prop_oneof![
                any::<f64>(),
                any::<i64>().prop_map(|i| i as f64),
                (-1e16f64..1e16).prop_map(f64::trunc),
                Just(-0.0),
                Just(0.0),
                Just(1e15),
                Just(-1e15 + 1.0),
            ]
        ) {
            let mut out = Vec::new();
            write_value(v, &mut out);
            let want = if v.is_nan() {
                " NaN\n".to_string()
            } else if v.is_infinite() {
                format!(" {}Inf\n", if v > 0.0 { "+" } else { "-" })
            } else {
                format!(" {v}\n")
            };
            prop_assert_eq!(String::from_utf8(out).unwrap(), want);
        }

        #[test]
        fn the_page_is_the_one_made_anew_from_every_report(
            reports in prop::collection::vec(prop::collection::vec(world_line(), 0..12), 1..14)
        ) {
            let (mut e, mut r) = (Exposition::default(), Reference::default());
            for lines in &reports {
                let report: String = lines.concat();
                e.update(&report);
                r.update(&report);
                prop_assert_eq!(e.render(), r.render());
            }
        }
    }
}
