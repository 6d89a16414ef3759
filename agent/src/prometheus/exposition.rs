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

use std::collections::BTreeMap;
use std::fmt::Write as _;

use storwatch_wire::lp::{parse_line, Backend};
use storwatch_wire::prom::{metric_name, prom_line, PromLine};

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
    /// Numeric fields (named the Prometheus way) and their values in base units.
    values: Vec<(String, String, f64)>,
    /// String fields, for the measurement's `_info` metric.
    info: Vec<(String, String)>,
    report: u64,
}

impl Series {
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
}

/// The latest value of every series the recent reports carried.
#[derive(Debug, Default)]
pub struct Exposition {
    series: BTreeMap<String, Series>,
    reports: u64,
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
            let PromLine {
                labels,
                values,
                info,
                ..
            } = prom_line(&p);
            let mut key = p.measurement.to_string();
            for (k, v) in &labels {
                let _ = write!(key, ",{k}={v}");
            }
            self.series.insert(
                key,
                Series {
                    measurement: p.measurement.to_string(),
                    labels,
                    values,
                    info,
                    report: self.reports,
                },
            );
        }
        let now = self.reports;
        self.series
            .retain(|_, s| now.saturating_sub(s.report) < KEEP_REPORTS);
        self.bound_ended_jobs();
    }

    /// Drops the oldest series of ended jobs past [`MAX_ENDED_JOB_SERIES`] or
    /// [`MAX_ENDED_JOB_BYTES`].
    fn bound_ended_jobs(&mut self) {
        let now = self.reports;
        let mut ended: Vec<(u64, usize, &String)> = self
            .series
            .iter()
            .filter(|(_, s)| s.report < now && JOB_MEASUREMENTS.contains(&s.measurement.as_str()))
            .map(|(k, s)| (s.report, k.len() + s.size(), k))
            .collect();
        let total: usize = ended.iter().map(|e| e.1).sum();
        if ended.len() <= MAX_ENDED_JOB_SERIES && total <= MAX_ENDED_JOB_BYTES {
            return;
        }
        // newest first: the ones kept
        ended.sort_by(|a, b| b.0.cmp(&a.0).then(a.2.cmp(b.2)));
        let (mut n, mut bytes) = (0, 0);
        let drop: Vec<String> = ended
            .into_iter()
            .filter(|(_, size, _)| {
                n += 1;
                bytes += size;
                n > MAX_ENDED_JOB_SERIES || bytes > MAX_ENDED_JOB_BYTES
            })
            .map(|(_, _, k)| k.clone())
            .collect();
        for k in drop {
            self.series.remove(&k);
        }
    }

    /// The estimated bytes the ended jobs' series hold (what [`MAX_ENDED_JOB_BYTES`] bounds).
    #[cfg(test)]
    fn ended_job_bytes(&self) -> (usize, usize) {
        self.series
            .iter()
            .filter(|(_, s)| {
                s.report < self.reports && JOB_MEASUREMENTS.contains(&s.measurement.as_str())
            })
            .fold((0, 0), |(n, b), (k, s)| (n + 1, b + k.len() + s.size()))
    }

    /// The text format: one family per metric name, each with HELP and TYPE, families sorted.
    pub fn render(&self) -> String {
        // family name -> (measurement, field, samples)
        let mut families: BTreeMap<String, (String, String, Vec<String>)> = BTreeMap::new();
        for s in self.series.values() {
            let base = metric_name(&s.measurement);
            for (prom, field, v) in &s.values {
                let name = format!("{base}_{prom}");
                let fam = families
                    .entry(name.clone())
                    .or_insert_with(|| (s.measurement.clone(), field.clone(), Vec::new()));
                fam.2.push(sample(&name, &s.labels, &[], *v));
            }
            if !s.info.is_empty() {
                let name = format!("{base}_info");
                let fam = families
                    .entry(name.clone())
                    .or_insert_with(|| (s.measurement.clone(), String::new(), Vec::new()));
                fam.2.push(sample(&name, &s.labels, &s.info, 1.0));
            }
        }
        let mut out = String::with_capacity(64 * families.len());
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

fn sample(name: &str, labels: &[(String, String)], extra: &[(String, String)], v: f64) -> String {
    let mut s = String::with_capacity(name.len() + 64);
    s.push_str(name);
    if !labels.is_empty() || !extra.is_empty() {
        s.push('{');
        for (i, (k, val)) in labels.iter().chain(extra).enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str(k);
            s.push_str("=\"");
            escape_label(val, &mut s);
            s.push('"');
        }
        s.push('}');
    }
    s.push(' ');
    if v.is_nan() {
        s.push_str("NaN");
    } else if v.is_infinite() {
        s.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else {
        let _ = write!(s, "{v}");
    }
    s.push('\n');
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use storwatch_wire::prom::prom_field;

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
            let running = e.series.values().filter(|s| s.report == e.reports).count();
            assert_eq!(running, 6_000);
        }
        // the newest ended ones are those kept: those of the report before the last
        let ended: Vec<u64> = e
            .series
            .values()
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
}
