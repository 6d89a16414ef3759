use std::collections::BTreeMap;
use std::fmt::Write as _;

use proptest::prelude::*;
use storwatch_wire::lp::{parse_line, Backend};
use storwatch_wire::prom::{metric_name, prom_field, prom_line, PromLine};

use super::page::{escape_help, help_of, write_labels, write_value};
use super::*;
use crate::prometheus::help::HELP;

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
