//! Prometheus names for storwatch's lines: one function for the agent's `/metrics` exposition
//! and the collector's remote-write output, so that a series is named the same whether it was
//! scraped from the agent or written by the collector.
//!
//! Every numeric field of a line becomes one sample: metric `storwatch_<measurement>_<field>`,
//! labels from the line's tags, booleans as 0/1. Field names are spelt the Prometheus way, in
//! base units, as `promtool check metrics` asks: `_ms`, `_us`, `_s` become `_seconds` (values
//! scaled), `_kb` `_bytes` (×1024, the kernel's KiB), `_per_s` `_per_second`, `_pct` `_percent`,
//! and iostat's one-letter directions are written out (`r` read, `w` write, `d` discard, `f`
//! flush; `rkb_per_s` is `read_bytes_per_second`). Fields with `total` in their name after its
//! first word are counters and end in `_total` (`mem.total_kb`, an amount, is the gauge
//! `storwatch_mem_total_bytes`); a gauge never ends in `_count`, `_sum` or `_bucket`, the parts of a
//! histogram or summary (`count` is written `number`). String fields are labels of the measurement's `_info` metric (value 1).
//!
//! A line that writes a field twice (`state="a",state="b"`, or two fields that come to one
//! Prometheus name) is read as InfluxDB stores it: the last value wins, for numbers and strings
//! alike, so the scrape, remote write and InfluxDB all hold one value, the same one. A string
//! field named like one of the line's tags is left out of `_info`: the tag's label stays (a
//! label name appears once in a series).

use crate::lp::{FieldValue, Point};

/// One line in Prometheus's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct PromLine {
    /// `storwatch_<measurement>`: the prefix of every metric of the line.
    pub base: String,
    /// Labels from the line's tags (valid label names), sorted.
    pub labels: Vec<(String, String)>,
    /// Numeric fields: (Prometheus name without the base, the field as written, value in base
    /// units), in the order written.
    pub values: Vec<(String, String, f64)>,
    /// String fields as (label name, value), for the `<base>_info` metric, in the order written.
    pub info: Vec<(String, String)>,
}

impl PromLine {
    /// The metric name of one of [`PromLine::values`].
    pub fn metric(&self, prom_field: &str) -> String {
        format!("{}_{prom_field}", self.base)
    }

    /// The name of the `_info` metric.
    pub fn info_metric(&self) -> String {
        format!("{}_info", self.base)
    }
}

/// A parsed line in Prometheus's terms.
pub fn prom_line(p: &Point<'_>) -> PromLine {
    prom_line_planned(p).0
}

/// Where [`prom_line`] took each of a line's values and `_info` labels from: for each of
/// [`PromLine::values`], the index of its field in the line and the factor its value was
/// multiplied by; for each of [`PromLine::info`], the index of its field. A line whose fields
/// have the same keys in the same order, each a string field or not as before, and whose tags
/// are the same, comes out of [`prom_line`] with the same names: its values are these fields'
/// numbers times these factors, its `_info` labels these fields' strings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromPlan {
    pub values: Vec<(usize, f64)>,
    pub info: Vec<usize>,
}

/// [`prom_line`] and its [`PromPlan`].
pub fn prom_line_planned(p: &Point<'_>) -> (PromLine, PromPlan) {
    let mut labels: Vec<(String, String)> = p
        .tags
        .iter()
        .map(|(k, v)| (tag_label_name(k), v.to_string()))
        .collect();
    labels.sort();
    // two tags that come to one label name (`a-b`, `a_b`): one label
    labels.dedup_by(|b, a| a.0 == b.0);
    let mut values: Vec<(String, String, f64)> = Vec::with_capacity(p.fields.len());
    let mut info: Vec<(String, String)> = Vec::new();
    let mut plan = PromPlan::default();
    for (i, (field, value)) in p.fields.iter().enumerate() {
        // written again later in the line: the later value is the line's
        if p.fields
            .get(i + 1..)
            .is_some_and(|rest| rest.iter().any(|(k, _)| k == field))
        {
            continue;
        }
        let Some(v) = number(value) else {
            let FieldValue::String(s) = value else {
                continue;
            };
            let name = label_name(field);
            if labels.iter().any(|(k, _)| *k == name) {
                continue;
            }
            if let Some(at) = info.iter().position(|(k, _)| *k == name) {
                info.remove(at);
                plan.info.remove(at);
            }
            info.push((name, s.to_string()));
            plan.info.push(i);
            continue;
        };
        let (name, scale) = field_metric(&p.measurement, field);
        if let Some(at) = values.iter().position(|(n, _, _)| *n == name) {
            values.remove(at);
            plan.values.remove(at);
        }
        values.push((name, field.to_string(), v * scale));
        plan.values.push((i, scale));
    }
    let line = PromLine {
        base: metric_name(&p.measurement),
        labels,
        values,
        info,
    };
    (line, plan)
}

/// A field's value as a sample's: booleans 1 and 0; strings none.
pub fn number(value: &FieldValue<'_>) -> Option<f64> {
    match value {
        FieldValue::Float(f) => Some(*f),
        FieldValue::Integer(i) => Some(*i as f64),
        FieldValue::Unsigned(u) => Some(*u as f64),
        FieldValue::Boolean(b) => Some(f64::from(u8::from(*b))),
        FieldValue::String(_) => None,
    }
}

/// Fields whose name by [`prom_field`] would be another measurement's metric, and the name they
/// get instead: (measurement, field, Prometheus field name). `agent.source_errors` (errors of
/// all sources in the interval) would be `storwatch_agent_source_errors`, the family of the
/// per-source `agent_source.errors`, and every sum over that family would count each error
/// twice. The metric contract (`contract/*.yaml`) holds every name once; `cargo xtask check`
/// fails when two fields share one.
pub const RENAMED: [(&str, &str, &str); 1] = [("agent", "source_errors", "errors")];

/// The Prometheus field name of `measurement`'s `field` ([`prom_field`], or its [`RENAMED`]
/// name) and the factor to its base unit.
pub fn field_metric(measurement: &str, field: &str) -> (String, f64) {
    match RENAMED
        .iter()
        .find(|(m, f, _)| *m == measurement && *f == field)
    {
        Some((_, _, name)) => (name.to_string(), 1.0),
        None => prom_field(field),
    }
}

/// A field's name in Prometheus's conventions and the factor to its base unit.
pub fn prom_field(field: &str) -> (String, f64) {
    let mut parts: Vec<&str> = Vec::new();
    let mut scale = 1.0;
    let mut total = false;
    let tokens: Vec<String> = name_part(field).split('_').map(str::to_owned).collect();
    for (i, t) in tokens.iter().enumerate() {
        let after_per = i > 0 && tokens.get(i - 1).is_some_and(|p| p == "per");
        match t.as_str() {
            // `total` first names an amount (`mem.total_kb`, MemTotal), a gauge; after another
            // word a cumulative count (`errors_total`, `io_some_total_us`)
            "total" if i > 0 => total = true,
            "s" if after_per => parts.push("second"),
            "s" | "sec" => parts.push("seconds"),
            "ms" => {
                parts.push("seconds");
                scale *= 1e-3;
            }
            "us" => {
                parts.push("seconds");
                scale *= 1e-6;
            }
            "ns" => {
                parts.push("seconds");
                scale *= 1e-9;
            }
            "kb" => {
                parts.push("bytes");
                scale *= 1024.0;
            }
            "mb" => {
                parts.push("bytes");
                scale *= 1024.0 * 1024.0;
            }
            "rkb" | "wkb" | "dkb" => {
                parts.push(direction(t.get(..1).unwrap_or("")));
                parts.push("bytes");
                scale *= 1024.0;
            }
            "r" | "w" | "d" | "f" => parts.push(direction(t)),
            "pct" => parts.push("percent"),
            other => parts.push(other),
        }
    }
    if total {
        parts.push("total");
    } else if let Some(last) = parts.last_mut() {
        // `_count`, `_sum` and `_bucket` belong to histograms and summaries (promtool rejects
        // them on a gauge): `jobs.count` is `storwatch_jobs_number`,
        // `mpath_path.fail_count` `storwatch_mpath_path_fail_number`.
        match *last {
            "count" => *last = "number",
            "sum" | "bucket" => {
                *last = if *last == "sum" {
                    "sum_value"
                } else {
                    "bucket_value"
                }
            }
            _ => {}
        }
    }
    (parts.join("_"), scale)
}

fn direction(letter: &str) -> &'static str {
    match letter {
        "r" => "read",
        "w" => "write",
        "d" => "discard",
        _ => "flush",
    }
}

/// `storwatch_<measurement>` with anything but `[a-zA-Z0-9_]` made `_`.
pub fn metric_name(measurement: &str) -> String {
    format!("storwatch_{}", name_part(measurement))
}

fn name_part(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// A tag's label name: [`label_name`], except that the tag `job` (the batch job of the `job`
/// and `job_io` lines) is `batch_job`. Prometheus puts its own `job` label (the scrape job) on
/// every scraped sample and renames a target's `job` to `exported_job`; remote write would keep
/// it as `job` and clash with the scrape job's. One name on both paths.
pub fn tag_label_name(tag: &str) -> String {
    if tag == "job" {
        "batch_job".to_owned()
    } else {
        label_name(tag)
    }
}

/// A label name: `[a-zA-Z_][a-zA-Z0-9_]*`, never starting with `__` (reserved).
pub fn label_name(s: &str) -> String {
    let mut n = name_part(s);
    if n.starts_with(|c: char| c.is_ascii_digit()) || n.is_empty() {
        n.insert(0, '_');
    }
    while n.starts_with("__") {
        n.remove(0);
    }
    n
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::lp::{parse_line, Backend};

    #[test]
    fn a_line_in_prometheus_terms() {
        let line = "md,host=n1,array=md0,9x=y state=\"recovering\",sync_eta_s=5,stalled=true,r_await_ms=2i 1";
        let p = prom_line(&parse_line(line, Backend::V1).unwrap());
        assert_eq!(p.base, "storwatch_md");
        assert_eq!(
            p.labels,
            vec![
                ("_9x".into(), "y".into()),
                ("array".into(), "md0".into()),
                ("host".into(), "n1".into())
            ]
        );
        assert_eq!(
            p.values,
            vec![
                ("sync_eta_seconds".into(), "sync_eta_s".into(), 5.0),
                ("stalled".into(), "stalled".into(), 1.0),
                ("read_await_seconds".into(), "r_await_ms".into(), 0.002),
            ]
        );
        assert_eq!(p.info, vec![("state".into(), "recovering".into())]);
        assert_eq!(p.metric("stalled"), "storwatch_md_stalled");
        assert_eq!(p.info_metric(), "storwatch_md_info");
    }

    #[test]
    fn a_field_written_twice_keeps_its_last_value() {
        // InfluxDB stores the last value of a field a line writes twice; so do the scrape and
        // remote write, strings and numbers alike
        let line = "md,host=n1 state=\"first\",v=1,state=\"second\",v=2i,sync_pct=3,sync_pct=4 1";
        let p = prom_line(&parse_line(line, Backend::V1).unwrap());
        assert_eq!(p.info, vec![("state".into(), "second".into())]);
        assert_eq!(
            p.values,
            vec![
                ("v".into(), "v".into(), 2.0),
                ("sync_percent".into(), "sync_pct".into(), 4.0)
            ]
        );
        // two fields of one Prometheus name: the later; a string field named like a tag: the
        // tag's label only (one label name per series); a field that changes type: its last
        let p = prom_line(
            &parse_line(
                "m,host=n1 a_b=\"x\",a-b=\"y\",host=\"h\",r_ms=1,r_s=2,k=1,k=\"s\" 1",
                Backend::V1,
            )
            .unwrap(),
        );
        assert_eq!(
            p.info,
            vec![("a_b".into(), "y".into()), ("k".into(), "s".into())]
        );
        assert_eq!(p.values, vec![("read_seconds".into(), "r_s".into(), 2.0)]);
        assert_eq!(p.labels, vec![("host".into(), "n1".into())]);
    }

    #[test]
    fn a_renamed_field_does_not_join_another_measurements_family() {
        let line = "agent,host=h source_errors=2i\nagent_source,host=h,source=md errors=2i";
        let names: Vec<String> = line
            .lines()
            .map(|l| {
                let p = parse_line(l, Backend::V1).unwrap();
                let pl = prom_line(&p);
                pl.metric(&pl.values[0].0)
            })
            .collect();
        assert_eq!(
            names,
            ["storwatch_agent_errors", "storwatch_agent_source_errors"]
        );
        assert_eq!(field_metric("disk", "r_await_ms"), prom_field("r_await_ms"));
    }

    #[test]
    fn total_first_is_an_amount_and_after_a_word_a_counter() {
        assert_eq!(prom_field("total_kb"), ("total_bytes".to_string(), 1024.0));
        assert_eq!(prom_field("errors_total").0, "errors_total");
        assert_eq!(prom_field("io_some_total_us").0, "io_some_seconds_total");
    }

    #[test]
    fn no_gauge_ends_as_a_histogram_or_summary_part_does() {
        assert_eq!(prom_field("count").0, "number");
        assert_eq!(prom_field("fail_count").0, "fail_number");
        assert_eq!(prom_field("count_total").0, "count_total");
        assert_eq!(prom_field("cpu_sum").0, "cpu_sum_value");
        assert_eq!(prom_field("le_bucket").0, "le_bucket_value");
        assert_eq!(prom_field("counted").0, "counted");
    }

    #[test]
    fn the_batch_job_tag_is_not_the_scrape_job() {
        let p = parse_line(
            "job,host=n1,batch=slurm,job=1234 cpu_efficiency_pct=50 1",
            Backend::V1,
        )
        .unwrap();
        let l = prom_line(&p);
        assert!(l
            .labels
            .contains(&("batch_job".to_owned(), "1234".to_owned())));
        assert!(!l.labels.iter().any(|(k, _)| k == "job"));
    }

    #[test]
    fn label_names_are_valid() {
        assert_eq!(label_name("__x"), "_x");
        assert_eq!(label_name(""), "_");
        assert_eq!(label_name("a-b.c"), "a_b_c");
    }
}
