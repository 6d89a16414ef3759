//! The reference the exposition is tested against: the page as it was made before the series
//! were kept in place.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use storwatch_wire::lp::{parse_line, Backend};
use storwatch_wire::prom::{metric_name, prom_line, PromLine};

use super::super::page::{escape_help, help_of, write_labels, write_value};
use super::super::{KEEP_REPORTS, SKIPPED};

/// The page as it was made before the series were kept in place: every report's lines
/// made into series anew, every page's families and samples made from them.
#[derive(Default)]
pub(super) struct Reference {
    series: BTreeMap<String, (String, PromLine, u64)>,
    reports: u64,
}

impl Reference {
    pub(super) fn update(&mut self, report: &str) {
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

    pub(super) fn render(&self) -> String {
        let mut families: BTreeMap<String, (String, String, Vec<String>)> = BTreeMap::new();
        let sample = |name: &str, labels: &[(String, String)], extra: &[(String, String)], v| {
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
