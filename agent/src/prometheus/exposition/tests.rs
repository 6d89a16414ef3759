use std::cell::Cell;
use std::fmt::Write as _;

use proptest::prelude::*;
use proptest::test_runner::{TestCaseResult, TestRunner};
use storwatch_wire::prom::prom_field;

use super::page::{help_of, write_value};
use super::*;
use crate::prometheus::help::HELP;

mod reference;
use reference::Reference;

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

/// The reports of a small world: few measurements, devices and fields; each report's lines are
/// of a few series (chosen anew for each world), so that reports repeat series, drop them,
/// bring them back, and change their fields, order and string fields; most lines write the
/// fields of their series' layout (values of any type), so that a series' next line often has
/// the fields of its last, as the agent's do. Two devices make a tag value with `,` and `=` in it whose series key is
/// that of two tags (`t0=a\,t1\=sda` and `t0=a,t1=sda`).
fn world() -> impl Strategy<Value = Vec<String>> {
    let measurement = prop::sample::select(vec![
        "disk",
        "md",
        "disk_tunables",
        "my-meas",
        "my_meas",
        "event",
    ]);
    let device = prop::sample::select(vec![
        "sda",
        "sdb",
        "dm-0",
        "a\\,b=c",
        "x\\\"y",
        "a",
        "a\\,t1\\=sda",
    ]);
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
    let layout = prop::sample::select(vec![
        &["util_pct", "r_await_ms"][..],
        &["v", "w", "stalled"][..],
        &["util_pct"][..],
        &["errors_total", "rkb_per_s", "v", "state"][..],
    ]);
    let value = prop::sample::select(vec![
        "12.5",
        "0",
        "-0",
        "3i",
        "-42i",
        "true",
        "1e300",
        "0.30000000000000004",
        "123456789012345678",
        "\"clean\"",
    ]);
    let series = (measurement, prop::collection::vec(device, 1..=2), layout).prop_map(
        |(m, devices, layout)| {
            let tags: String = devices
                .iter()
                .enumerate()
                .map(|(i, d)| format!(",t{i}={d}"))
                .collect();
            (format!("{m},host=n1{tags}"), layout)
        },
    );
    // a line of a series: mostly its layout's fields, with values of any type; else any fields
    let line = (
        any::<prop::sample::Index>(),
        prop::bool::weighted(0.75),
        prop::collection::vec(value, 4),
        prop::collection::vec(field, 1..5),
    );
    (
        prop::collection::vec(series, 1..12),
        prop::collection::vec(prop::collection::vec(line, 0..12), 1..14),
    )
        .prop_map(|(series, reports)| {
            reports
                .iter()
                .map(|lines| {
                    let mut report = String::new();
                    for (at, by_layout, values, fields) in lines {
                        let (key, layout) = at.get(&series);
                        let fields: Vec<String> = if *by_layout {
                            layout
                                .iter()
                                .zip(values)
                                .map(|(k, v)| format!("{k}={v}"))
                                .collect()
                        } else {
                            fields.iter().map(|f| f.to_string()).collect()
                        };
                        let _ = writeln!(report, "{key} {} 1", fields.join(","));
                    }
                    report
                })
                .collect()
        })
}

/// Runs `test` on `cases` values of `strategy`; panics with the smallest failing one.
fn run<S: Strategy>(cases: u32, strategy: &S, test: impl Fn(S::Value) -> TestCaseResult) {
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    if let Err(e) = TestRunner::new(config).run(strategy, test) {
        panic!("{e}");
    }
}

#[test]
fn the_page_is_the_one_made_anew_from_every_report() {
    let (lines, one_pass, viewed) = (Cell::new(0), Cell::new(0), Cell::new(0));
    run(300, &world(), |reports| {
        let (mut e, mut r) = (Exposition::default(), Reference::default());
        for report in &reports {
            e.update(report);
            r.update(report);
            prop_assert_eq!(e.render(), r.render());
        }
        lines.set(lines.get() + reports.iter().map(|r| r.lines().count()).sum::<usize>() as u64);
        one_pass.set(one_pass.get() + e.one_pass);
        viewed.set(viewed.get() + e.viewed);
        Ok(())
    });
    // and the view's, for the lines with strings
    assert!(
        viewed.get() * 50 > lines.get(),
        "{} of {} lines read by the view",
        viewed.get(),
        lines.get()
    );
    // the one-pass reading had its part in the pages compared
    assert!(
        one_pass.get() * 50 > lines.get(),
        "{} of {} lines read in one pass",
        one_pass.get(),
        lines.get()
    );
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
}

/// An exposition that reads every line whole, as before the one-pass reading.
fn whole_only() -> Exposition {
    Exposition {
        whole_only: true,
        ..Exposition::default()
    }
}

#[test]
fn a_plain_line_of_a_known_series_is_read_in_one_pass_as_it_is_whole() {
    let report = |n: u32| {
        format!(
            "disk,host=n1,device=sda util_pct={n}.5,r_await_ms={n}i,rkb_per_s=-{n},stalled=t 1\n\
             md,host=n1,array=md0 state=\"clean\",members={n}i 1\n\
             net,host=n1,iface=a\\ b rx_bytes_per_s={n} 1\n\
             disk,host=n1,device=sdb util_pct={n}e3,r_await_ms=1234567890123456789i 1\n\
             cpu,host=n1 iowait_pct=0.{n}000000000000000000001,user_pct=1{n} 1\n"
        )
    };
    let (mut e, mut whole) = (Exposition::default(), whole_only());
    for n in 0..4 {
        e.update(&report(n));
        whole.update(&report(n));
        assert_eq!(e.render(), whole.render());
    }
    // read whole the first time; then sda's, md's, net's and cpu's lines (md's string has no
    // escape, net's is an escaped space in a tag value, cpu's 24-character float a fraction) in
    // one pass, and sdb's (an exponent, a 19-digit integer) by the view
    assert_eq!((e.one_pass, whole.one_pass), (12, 0));
    assert_eq!((e.viewed, whole.viewed), (3, 0));
    assert!(e
        .render()
        .contains("storwatch_disk_read_await_seconds{device=\"sda\",host=\"n1\"} 0.003\n"));
    // other fields: read whole, then in one pass again
    for (line, one_pass) in [
        ("disk,host=n1,device=sda util_pct=7 1", 12),
        ("disk,host=n1,device=sda util_pct=8 1", 13),
        ("disk,host=n1,device=sda util_pct=\"x\" 1", 13),
        ("disk,host=n1,device=sda util_pct=9 1", 13),
        ("disk,host=n1,device=sda util_pct=10 1", 14),
    ] {
        e.update(line);
        whole.update(line);
        assert_eq!(e.one_pass, one_pass, "{line}");
        assert_eq!(e.render(), whole.render(), "{line}");
    }
    assert!(e
        .render()
        .contains("storwatch_disk_util_percent{device=\"sda\",host=\"n1\"} 10\n"));
}

#[test]
fn a_label_set_that_shares_its_key_with_another_takes_its_labels_back() {
    // `t0=a\,u\=c` is the label set {t0="a,u=c"}, `t0=a,u=c` {t0="a",u="c"}: both are the
    // series key `m,t0=a,u=c`, the later line's labels the series'
    // (the line of two tags plain, read in one pass, or not, found by its tags)
    for a in ["m,t0=a,u=c v=1 1", "m,t0=a,u=c v=1,s=\"x\" 1"] {
        let b = "m,t0=a\\,u\\=c v=2 1";
        let (mut e, mut r) = (Exposition::default(), Reference::default());
        for line in [a, b, a, a, b, a] {
            e.update(line);
            r.update(line);
            let page = e.render();
            assert_eq!(page, r.render(), "{line}");
            let labels = if line.contains('\\') {
                "{t0=\"a,u=c\"}"
            } else {
                "{t0=\"a\",u=\"c\"}"
            };
            assert!(page.contains(labels), "{line}: {page}");
        }
    }
}

/// Lines of a few series in a few field layouts, the values plain or not: what the one-pass
/// reading takes and what it leaves to the full grammar (escapes, strings, exponents, long or
/// out-of-range numbers, boolean words, unsigned integers 1.x refuses).
fn odd_line() -> impl Strategy<Value = String> {
    let series = prop::sample::select(vec![
        "disk,host=n1,device=sda",
        "disk,host=n1,device=sdb",
        "disk,host=n1,device=a\\ b",
        "disk,device=sda,host=n1",
        "m\\,x,host=n1",
    ]);
    let layout = prop::sample::select(vec![
        &["util_pct", "r_await_ms"][..],
        &["util_pct", "r_await_ms", "rkb_per_s"][..],
        &["v", "v"][..],
        &["a\\ b", "errors_total"][..],
    ]);
    // plain numbers, at the edges of what the one-pass reading takes
    let plain = prop::sample::select(vec![
        "1",
        "-0",
        "0.5",
        "1.",
        "00012",
        "12345678901234567",
        "123456789012345678901",
        "0.123456789012345678901",
        "9007199254740993",
        "0.30000000000000004",
        "123456789012345678i",
        "-0i",
        "t",
        "FALSE",
    ]);
    // what only the full grammar reads (or refuses)
    let odd = prop::sample::select(vec![
        "0.1234567890123456789012",
        "1234567890123456789i",
        "-9223372036854775808i",
        "9223372036854775808i",
        "1u",
        "1e3",
        "1.5E-3",
        "1e400",
        ".5",
        "+1",
        "tRUE",
        "\"str\"",
        "\"a\\\"b\"",
    ]);
    let value = prop_oneof![6 => plain, 1 => odd];
    (series, layout, prop::collection::vec(value, 3)).prop_map(|(series, keys, values)| {
        let fields: Vec<String> = keys
            .iter()
            .zip(values)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{series} {} 1\n", fields.join(","))
    })
}

#[test]
fn the_one_pass_reading_is_the_whole_one() {
    let reports = prop::collection::vec(prop::collection::vec(odd_line(), 0..8), 1..12);
    let one_pass = Cell::new(0);
    run(300, &reports, |reports| {
        let (mut e, mut whole, mut r) = (Exposition::default(), whole_only(), Reference::default());
        for report in &reports {
            let report: String = report.concat();
            e.update(&report);
            whole.update(&report);
            r.update(&report);
            let page = e.render();
            prop_assert_eq!(&page, &whole.render());
            prop_assert_eq!(&page, &r.render());
        }
        one_pass.set(one_pass.get() + e.one_pass);
        Ok(())
    });
    assert!(
        one_pass.get() > 100,
        "{} lines read in one pass",
        one_pass.get()
    );
}

#[test]
fn series_of_one_layout_share_their_shape_and_a_shape_no_series_has_goes() {
    let mut e = Exposition::default();
    let disks = |fields: &str| -> String {
        (0..200)
            .map(|d| format!("disk,host=a,device=sd{d} {fields} 1\n"))
            .collect()
    };
    e.update(&disks("util_pct=1,r_await_ms=2"));
    assert_eq!(e.series.len(), 200);
    assert_eq!(e.shapes.len(), 1, "one shape for 200 series");
    assert!(e
        .series
        .iter()
        .all(|s| Arc::ptr_eq(&s.shape, &e.series[0].shape)));
    // another layout: a shape of its own; the old one goes with the last series that had it
    e.update(&disks("util_pct=1,r_await_ms=2,state=\"ok\""));
    assert_eq!(e.shapes.len(), 1);
    let page = e.render();
    assert!(page.contains("storwatch_disk_info{device=\"sd7\",host=\"a\",state=\"ok\"} 1\n"));
    assert!(page.contains("storwatch_disk_read_await_seconds{device=\"sd7\",host=\"a\"} 0.002\n"));
    // the same fields under other label names: another shape
    e.update("disk,host=a,dev=sdz util_pct=1,r_await_ms=2,state=\"ok\" 1\n");
    assert_eq!(e.shapes.len(), 2);
    for _ in 0..KEEP_REPORTS {
        e.update("disk,host=a,dev=sdz util_pct=1,r_await_ms=2,state=\"ok\" 1\n");
    }
    assert_eq!(e.series.len(), 1);
    assert_eq!(e.shapes.len(), 1, "the disks' shape went with them");
}
