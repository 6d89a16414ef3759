//! The dashboards for a Prometheus datasource (`dashboards/prometheus/`): the committed files are
//! what the generator makes of the InfluxQL dashboards and `queries.yaml`
//! (`cargo xtask gen` writes them), every InfluxQL query has its PromQL counterpart, and
//! every PromQL query runs on a real Prometheus holding the simulated fleet as a Prometheus
//! scraping each agent's `/metrics` after each report would: none errors, every panel has data on
//! some scenario's host, and the incidents show where they should.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use storwatch_agent::sink::SinkStats;
use storwatch_dashboards_tests::fleet::{host, host_toml, SCENARIOS, SPAN_S};
use storwatch_dashboards_tests::prom::{openmetrics, scrape_reports, Samples};
use storwatch_dashboards_tests::promql_dashboards::generate;
use storwatch_dashboards_tests::promql_queries::{
    expand_promql, promql_dashboard_queries, PromqlQuery,
};
use storwatch_dashboards_tests::{shift, SteppedHost, STEP_NS};
use storwatch_sim::scenario::Kind;
use storwatch_test_support::http::{http, urlencode};
use storwatch_test_support::process::Proc;
use storwatch_test_support::wait::{now_s, wait_for};
use storwatch_test_support::{promtool_ok, scratch, workspace};
use storwatch_wire::lp::{parse_line, Backend, FieldValue};
use storwatch_wire::prom::prom_line;

/// This test's Prometheus port (19640–19649 are free for the PromQL dashboards' tests).
const PORT: u16 = 19641;
/// The panels' interval in the queries: the scrape interval, as Grafana's min interval makes it
/// on a quarter hour.
const INTERVAL: &str = "10s";
/// The step of the range queries.
const STEP_S: u64 = 30;
/// Where the scrapes fall within their 10 s: this many ms before each multiple of 10 s.
/// Prometheus before 3.0 counts a sample exactly on a range's start in the range, so samples on
/// the steps' boundaries would be counted in two intervals; real scrapes are offset within the
/// interval (by a hash of the target), the backfilled fleet is too.
const SCRAPE_OFFSET_MS: i64 = 4_321;

/// Panels that the simulated fleet cannot fill, and why (the test fails if one has data, so
/// that the list stays true).
const NO_SIM_DATA: &[(&str, &str, &str)] = &[(
    "disk-server.json",
    "Filesystem fill on the virtual drives",
    "no simulated host mounts a filesystem on a hardware virtual drive's block device",
)];

#[test]
fn committed_dashboards_are_the_generated_ones() {
    let files = generate().unwrap_or_else(|e| panic!("dashboards/prometheus/queries.yaml:\n{e}"));
    let dir = workspace().join("dashboards/prometheus");
    let mut stale = Vec::new();
    for (file, text) in files {
        let old = std::fs::read_to_string(dir.join(&file)).unwrap_or_default();
        if old != text {
            stale.push(file);
        }
    }
    assert!(
        stale.is_empty(),
        "dashboards/prometheus/{stale:?} differ from what the generator makes of dashboards/*.json \
         and queries.yaml: run `cargo xtask gen`"
    );
}

#[test]
fn the_generated_dashboards_keep_the_layout_and_name_prometheus_only() {
    for q in promql_dashboard_queries() {
        assert!(!q.query.is_empty(), "{} {}: empty query", q.file, q.what);
        for influx in ["$rp", "$timeFilter", "SELECT", "$__interval_ms", "$tag_"] {
            assert!(
                !q.query.contains(influx),
                "{} {}: {influx} in {}",
                q.file,
                q.what,
                q.query
            );
        }
    }
    // every $variable a query names is one of its dashboard's (Grafana leaves an unknown one
    // as written, and the query then matches nothing) or one of Grafana's macros
    let dir = workspace().join("dashboards");
    for q in promql_dashboard_queries() {
        let d: Json = serde_json::from_str(
            &std::fs::read_to_string(dir.join("prometheus").join(&q.file)).unwrap(),
        )
        .unwrap();
        let vars: Vec<&str> = d["templating"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        for name in variables_named(&q.query) {
            assert!(
                vars.contains(&name.as_str())
                    || ["__interval", "__rate_interval", "__range"].contains(&name.as_str()),
                "{} {}: ${name} is not a variable of the dashboard: {}",
                q.file,
                q.what,
                q.query
            );
        }
    }
    for file in storwatch_dashboards_tests::promql_files::FILES {
        let i: Json =
            serde_json::from_str(&std::fs::read_to_string(dir.join(file)).unwrap()).unwrap();
        let p: Json = serde_json::from_str(
            &std::fs::read_to_string(dir.join("prometheus").join(file)).unwrap(),
        )
        .unwrap();
        assert_eq!(p["uid"], format!("{}-prom", i["uid"].as_str().unwrap()));
        assert_eq!(
            p["title"],
            format!("{} (Prometheus)", i["title"].as_str().unwrap())
        );
        let text = serde_json::to_string(&p).unwrap();
        assert!(!text.contains("influxdb"), "{file}: names influxdb");
        let vars: Vec<&str> = p["templating"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert!(!vars.contains(&"rp"), "{file}: $rp kept");
        assert_eq!(p["templating"]["list"][0]["query"], "prometheus");
        assert_eq!(
            p["templating"]["list"][0]["current"]["value"],
            "storwatch-prometheus"
        );
        // same panels at the same places
        let grid = |d: &Json| -> Vec<(u64, String, String)> {
            let mut out = Vec::new();
            let mut stack: Vec<&Json> = d["panels"].as_array().unwrap().iter().collect();
            while let Some(x) = stack.pop() {
                stack.extend(x["panels"].as_array().into_iter().flatten());
                out.push((
                    x["id"].as_u64().unwrap(),
                    x["title"].to_string(),
                    x["gridPos"].to_string(),
                ));
            }
            out.sort();
            out
        };
        assert_eq!(grid(&i), grid(&p), "{file}: panels differ");
    }
}

/// The `$name`s of a query (not `$1`, a regex group of `label_replace`).
fn variables_named(q: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in q.match_indices('$') {
        let name: String = q[i + 1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            out.push(name);
        }
    }
    out
}

/// The reports of scenario `kind`'s host at the scenario's speed over [`SPAN_S`] simulated
/// seconds, stamped 1, 2, 3 … report intervals from the epoch.
fn reports(kind: Kind, speed: f64) -> Vec<String> {
    let dir = scratch();
    let name = host(kind);
    let mut h = SteppedHost::new(dir.path(), kind, &name, speed, &host_toml(&name));
    (1..=i64::from(SPAN_S) / 10)
        .map(|k| String::from_utf8(h.report(k * STEP_NS, SinkStats::default())).unwrap())
        .collect()
}

/// The event lines of `reports` as the collector's remote-write output stores them (a site whose
/// agents are scraped and whose collector also forwards has them): one
/// `storwatch_event_info{<tags>,<string fields>} 1` sample at the event's time.
fn remote_written_events(reports: &[(i64, String)], into: &mut Samples) {
    for (_, lines) in reports {
        for line in lines.lines().filter(|l| l.starts_with("event,")) {
            let Ok(p) = parse_line(line, Backend::V1) else {
                continue;
            };
            let Some(ts_ns) = line
                .rsplit_once(' ')
                .and_then(|(_, t)| t.parse::<i64>().ok())
            else {
                continue;
            };
            let pl = prom_line(&p);
            // the tags win over a string field of the same name
            let mut labels: BTreeMap<String, String> = pl.info.iter().cloned().collect();
            labels.extend(pl.labels.iter().cloned());
            let points = into.entry((pl.info_metric(), labels)).or_default();
            let at_ms = ts_ns / 1_000_000;
            if points.last().is_none_or(|&(t, _)| t < at_ms) {
                points.push((at_ms, 1.0));
            }
        }
    }
}

/// A real Prometheus on the simulated fleet's quarter hour, backfilled with promtool.
struct Prometheus {
    // dropped in this order: the process, then its files
    _proc: Proc,
    _dir: tempfile::TempDir,
    /// the end of the data (seconds since the epoch, on a report)
    end_s: u64,
    /// the write storm's host's reports, as stored: (stamp in ns, lines)
    storm: Vec<(i64, String)>,
}

/// Starts it: the fleet's histories in parallel threads, the samples into blocks, Prometheus on
/// [`PORT`]. It stops (and its files go) when dropped, on a failing assertion too.
fn fleet_prometheus() -> Prometheus {
    assert_eq!(
        http(&url("/-/ready"), "GET", &[], b"").0,
        0,
        "something already listens on 127.0.0.1:{PORT}"
    );
    {
        let t0 = Instant::now();
        let end_s = now_s() / 10 * 10;
        // the last scrape a few seconds before the end, as a Prometheus spreads its scrapes
        // over the interval: no sample on a step's boundary
        let end_ns = i64::try_from(end_s).unwrap() * 1_000_000_000 - SCRAPE_OFFSET_MS * 1_000_000;
        let threads: Vec<_> = SCENARIOS
            .iter()
            .map(|s| {
                let (kind, speed) = (s.kind, s.speed);
                std::thread::spawn(move || {
                    let t = Instant::now();
                    let r = shift(&reports(kind, speed), end_ns);
                    let stepped = t.elapsed().as_secs_f64();
                    let mut samples = Samples::new();
                    scrape_reports(&host(kind), &r, &mut samples);
                    remote_written_events(&r, &mut samples);
                    let kept = if kind == Kind::WriteStorm {
                        r
                    } else {
                        Vec::new()
                    };
                    (samples, stepped, t.elapsed().as_secs_f64() - stepped, kept)
                })
            })
            .collect();
        let mut samples = Samples::new();
        let (mut stepped, mut scraped) = (0.0, 0.0);
        let mut storm = Vec::new();
        for t in threads {
            let (s, a, b, kept) = t.join().unwrap();
            samples.extend(s);
            storm.extend(kept);
            stepped += a;
            scraped += b;
        }
        eprintln!(
            "fleet: {:.1} s, the hosts' threads {stepped:.1} s stepping the simulator and agent, \
             {scraped:.1} s through the exposition",
            t0.elapsed().as_secs_f64()
        );
        let dir = scratch();
        let om = dir.path().join("fleet.om");
        std::fs::write(&om, openmetrics(&samples)).unwrap();
        if let Some(keep) = std::env::var_os("STORWATCH_PROM_FLEET") {
            std::fs::copy(&om, keep).unwrap();
        }
        let data = dir.path().join("data");
        promtool_ok(
            &[
                OsStr::new("tsdb"),
                OsStr::new("create-blocks-from"),
                OsStr::new("openmetrics"),
                om.as_os_str(),
                data.as_os_str(),
            ],
            None,
        );
        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, "global:\n  scrape_interval: 10s\n").unwrap();
        std::fs::remove_file(&om).unwrap();
        eprintln!(
            "{} series in blocks at {:.1} s",
            samples.len(),
            t0.elapsed().as_secs_f64()
        );
        let proc = start_prometheus(dir.path(), &config, &data);
        Prometheus {
            _proc: proc,
            _dir: dir,
            end_s,
            storm,
        }
    }
}

fn start_prometheus(dir: &Path, config: &Path, data: &Path) -> Proc {
    let mut proc = Proc::spawn(
        "prometheus",
        &dir.join("prometheus.log"),
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg("--storage.tsdb.retention.time=3650d")
            .arg(format!("--web.listen-address=127.0.0.1:{PORT}")),
    );
    let ready = wait_for(Duration::from_secs(60), || {
        http(&url("/-/ready"), "GET", &[], b"").0 == 200
    });
    assert!(
        ready && proc.running(),
        "prometheus did not start:\n{}",
        proc.log_tail(30)
    );
    proc
}

fn url(path: &str) -> String {
    format!("http://127.0.0.1:{PORT}{path}")
}

/// Prometheus's answer to an API GET: its `data`, or its error.
fn api(path: &str) -> Result<Json, String> {
    let (status, body) = http(&url(path), "GET", &[], b"");
    let j: Json = serde_json::from_str(&body).map_err(|e| format!("{status} {e}: {body}"))?;
    if j["status"] != "success" {
        return Err(format!("{status}: {} {}", j["errorType"], j["error"]));
    }
    Ok(j["data"].clone())
}

/// The series of a panel's or an annotation's query over the quarter hour (range queries with a
/// step of [`STEP_S`], instant queries at the end), or Prometheus's error.
fn run(p: &Prometheus, q: &PromqlQuery, expanded: &str) -> Result<Vec<Json>, String> {
    let e = urlencode(expanded);
    let data = if q.instant {
        api(&format!("/api/v1/query?query={e}&time={}", p.end_s))?
    } else {
        // annotations at their step (10 s), so that an event's one sample is not stepped over
        let step = if q.what.starts_with("annotation") {
            10
        } else {
            STEP_S
        };
        api(&format!(
            "/api/v1/query_range?query={e}&start={}&end={}&step={step}",
            p.end_s - u64::from(SPAN_S),
            p.end_s
        ))?
    };
    Ok(data["result"].as_array().cloned().unwrap_or_default())
}

/// A template variable's values: the series its `label_values(selector, label)` selects, that
/// label's values.
fn variable_values(p: &Prometheus, query: &str) -> Result<BTreeSet<String>, String> {
    let inner = query
        .trim()
        .strip_prefix("label_values(")
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| format!("not label_values(selector, label): {query}"))?;
    let (selector, label) = inner
        .rsplit_once(',')
        .ok_or_else(|| format!("not label_values(selector, label): {query}"))?;
    let data = api(&format!(
        "/api/v1/series?match[]={}&start={}&end={}",
        urlencode(selector.trim()),
        p.end_s - u64::from(SPAN_S),
        p.end_s
    ))?;
    Ok(data
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s[label.trim()].as_str().map(str::to_string))
        .collect())
}

fn hosts() -> Vec<String> {
    SCENARIOS.iter().map(|s| host(s.kind)).collect()
}

/// One Prometheus for both checks (the fleet's quarter hour takes most of the time).
#[test]
fn prometheus_runs_every_query_and_shows_the_incidents() {
    let t0 = Instant::now();
    let p = fleet_prometheus();
    eprintln!("fleet in Prometheus in {:.1} s", t0.elapsed().as_secs_f64());
    every_query_runs_and_every_panel_has_data(&p);
    eprintln!("every query run, {:.1} s", t0.elapsed().as_secs_f64());
    incidents_show_on_their_panels(&p);
}

fn every_query_runs_and_every_panel_has_data(p: &Prometheus) {
    let queries = promql_dashboard_queries();
    assert!(queries.len() > 100, "{} queries", queries.len());
    let hosts = hosts();
    let mut errors = Vec::new();
    let mut empty = Vec::new();
    // panel -> whether any of its queries had data on some host
    let mut panel_data: BTreeMap<(String, String), bool> = BTreeMap::new();
    for q in &queries {
        if !q.panel {
            match variable_values(p, &expand_promql(&q.query, ".*", INTERVAL)) {
                Err(e) => errors.push(format!("{} {}: {e}\n  {}", q.file, q.what, q.query)),
                Ok(v) if v.is_empty() => empty.push(format!("{} {}", q.file, q.what)),
                Ok(_) => {}
            }
            continue;
        }
        let panel = q
            .what
            .rsplit_once(" query ")
            .map_or(q.what.clone(), |(p, _)| p.to_string());
        let mut any = false;
        for h in &hosts {
            let e = expand_promql(&q.query, h, INTERVAL);
            match run(p, q, &e) {
                Err(err) => {
                    errors.push(format!("{} {}: {err}\n  {e}", q.file, q.what));
                    break;
                }
                Ok(r) => any |= !r.is_empty(),
            }
        }
        if !any {
            empty.push(format!("{} {}", q.file, q.what));
        }
        *panel_data.entry((q.file.clone(), panel)).or_default() |= any;
    }
    for e in &empty {
        eprintln!("no data on any scenario's host: {e}");
    }
    assert!(
        errors.is_empty(),
        "{} queries fail:\n{}",
        errors.len(),
        errors.join("\n")
    );
    let known = |f: &str, p: &str| {
        NO_SIM_DATA
            .iter()
            .any(|(kf, kp, _)| *kf == f && p == format!("panel {kp:?}"))
    };
    let dead: Vec<_> = panel_data
        .iter()
        .filter(|((f, p), any)| !**any && !known(f, p))
        .map(|((f, p), _)| format!("{f} {p}"))
        .collect();
    let filled: Vec<_> = panel_data
        .iter()
        .filter(|((f, p), any)| **any && known(f, p))
        .map(|((f, p), _)| format!("{f} {p}"))
        .collect();
    assert!(
        filled.is_empty(),
        "NO_SIM_DATA lists panels with data: {filled:?}"
    );
    assert!(
        dead.is_empty(),
        "panels without data on any scenario's host:\n{}",
        dead.join("\n")
    );
}

/// The PromQL of `what` in dashboard `file` (`panel "…" query "…"` or `annotation "…"`).
fn query_of(file: &str, what: &str) -> PromqlQuery {
    promql_dashboard_queries()
        .into_iter()
        .find(|q| q.file == file && q.what == what)
        .unwrap_or_else(|| panic!("{file}: no {what}"))
}

/// Every series' labels and values (range queries: every point; instant: the one value) of
/// query `what` of `file` for host `h`.
fn values(
    p: &Prometheus,
    file: &str,
    what: &str,
    h: &str,
) -> Vec<(BTreeMap<String, String>, Vec<f64>)> {
    let q = query_of(file, what);
    let e = expand_promql(&q.query, h, INTERVAL);
    let num = |v: &Json| v[1].as_str().and_then(|s| s.parse::<f64>().ok());
    run(p, &q, &e)
        .unwrap_or_else(|err| panic!("{err}\n  {e}"))
        .into_iter()
        .map(|s| {
            let labels = s["metric"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                        .collect()
                })
                .unwrap_or_default();
            let vals = match s["values"].as_array() {
                Some(points) => points.iter().filter_map(num).collect(),
                None => num(&s["value"]).into_iter().collect(),
            };
            (labels, vals)
        })
        .collect()
}

fn peak(series: &[(BTreeMap<String, String>, Vec<f64>)]) -> f64 {
    series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0, f64::max)
}

/// The incidents show on the panels an operator looks at, and not on the healthy host.
fn incidents_show_on_their_panels(p: &Prometheus) {
    let healthy = host(Kind::Healthy);

    // the write storm's disks: seconds saturated per interval
    let what = r#"panel "Seconds saturated per interval" query "A""#;
    let storm = peak(&values(
        p,
        "worker-node.json",
        what,
        &host(Kind::WriteStorm),
    ));
    let calm = peak(&values(p, "worker-node.json", what, &healthy));
    assert!(storm >= 5.0, "write storm: {storm} s saturated at most");
    assert_eq!(calm, 0.0, "healthy host saturated");
    // and its peak 1 s %util at 100 on the disk server's heat map
    let what = r#"panel "Per-disk %util heat map (peak 1 s per interval)" query "A""#;
    let util = peak(&values(
        p,
        "disk-server.json",
        what,
        &host(Kind::WriteStorm),
    ));
    assert!(util >= 99.0, "write storm: peak %util {util}");

    // the site overview's hottest disks mean what InfluxQL's max() and sum() over the range
    // mean: the peak 1 s %util and the seconds saturated of the write storm's reports, device by
    // device, computed here from the lines the agent wrote
    let storm_host = host(Kind::WriteStorm);
    let mut want: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for (_, lines) in &p.storm {
        for line in lines.lines().filter(|l| l.starts_with("disk,")) {
            let point = parse_line(line, Backend::V1).unwrap();
            let tag = |k: &str| {
                point
                    .tags
                    .iter()
                    .find(|(t, _)| t == k)
                    .map(|(_, v)| v.to_string())
                    .unwrap_or_default()
            };
            if !["disk", "nvme", "mpath", "md"].contains(&tag("kind").as_str()) {
                continue;
            }
            let field = |k: &str| {
                point
                    .fields
                    .iter()
                    .find(|(f, _)| f == k)
                    .map(|(_, v)| match v {
                        FieldValue::Float(x) => *x,
                        FieldValue::Integer(i) => *i as f64,
                        FieldValue::Unsigned(u) => *u as f64,
                        _ => f64::NAN,
                    })
            };
            let e = want.entry(tag("device")).or_insert((0.0, 0.0));
            e.0 = e.0.max(field("util_max_pct").unwrap_or(0.0));
            e.1 += field("saturated_s").unwrap_or(0.0);
        }
    }
    assert!(want.values().any(|(_, sat)| *sat > 0.0), "{want:?}");
    let table = |col: &str| -> BTreeMap<String, f64> {
        let what = format!(
            "panel \"Hottest disks (peak 1 s %util, seconds saturated)\" query \"A_{col}\""
        );
        values(p, "site-overview.json", &what, ".*")
            .into_iter()
            .filter(|(l, _)| l.get("host") == Some(&storm_host))
            .map(|(l, v)| (l["device"].clone(), v[0]))
            .collect()
    };
    let (util, saturated) = (table("util_max_pct"), table("saturated_s"));
    for (device, (u, sat)) in &want {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.abs().max(1.0);
        assert!(
            util.get(device).is_some_and(|x| close(*x, *u)),
            "{device}: peak %util {:?} in Prometheus, {u} in the reports",
            util.get(device)
        );
        assert!(
            saturated.get(device).is_some_and(|x| close(*x, *sat)),
            "{device}: {:?} s saturated in Prometheus, {sat} in the reports",
            saturated.get(device)
        );
    }
    assert_eq!(util.len(), want.len(), "{util:?} vs {want:?}");

    // and per Grafana interval (1 min: six reports), the worker node's seconds saturated per
    // interval is the sum of the interval's reports, as InfluxQL's sum() GROUP BY time(1m)
    let q = query_of(
        "worker-node.json",
        r#"panel "Seconds saturated per interval" query "A""#,
    );
    let e = urlencode(&expand_promql(&q.query, &storm_host, "1m"));
    // Grafana aligns a range query's start and end on its step
    let data = api(&format!(
        "/api/v1/query_range?query={e}&start={}&end={}&step=60",
        (p.end_s - 840) / 60 * 60,
        p.end_s / 60 * 60
    ))
    .unwrap();
    let mut checked = 0;
    for series in data["result"].as_array().unwrap() {
        let device = series["metric"]["device"].as_str().unwrap();
        for point in series["values"].as_array().unwrap() {
            let t_ns = point[0].as_f64().unwrap() as i64 * 1_000_000_000;
            let got: f64 = point[1].as_str().unwrap().parse().unwrap();
            let mut sum = 0.0;
            for (at, lines) in &p.storm {
                if *at <= t_ns - 60_000_000_000 || *at > t_ns {
                    continue;
                }
                for line in lines.lines().filter(|l| l.starts_with("disk,")) {
                    let point = parse_line(line, Backend::V1).unwrap();
                    if !point.tags.iter().any(|(k, v)| k == "device" && v == device) {
                        continue;
                    }
                    match point.fields.iter().find(|(f, _)| f == "saturated_s") {
                        Some((_, FieldValue::Float(x))) => sum += x,
                        Some((_, FieldValue::Integer(x))) => sum += *x as f64,
                        Some((_, FieldValue::Unsigned(x))) => sum += *x as f64,
                        _ => {}
                    }
                }
            }
            assert!(
                (got - sum).abs() < 1e-6,
                "{device} at {t_ns}: {got} s saturated in Prometheus, {sum} in the reports"
            );
            checked += 1;
        }
    }
    assert!(checked >= 13, "{checked} intervals checked");

    // md-rebuild: the recovery's progress grows
    let what = r#"panel "Rebuild / resilver progress" query "A""#;
    let md = values(p, "disk-server.json", what, &host(Kind::MdRebuild));
    assert!(
        md.iter().any(|(_, v)| v.len() > 2 && v[v.len() - 1] > v[0]),
        "md-rebuild: no progress {md:?}"
    );
    assert!(values(p, "disk-server.json", what, &healthy).is_empty());

    // the flapping path: transitions in the 10 min window at or above the flapping threshold (3)
    let what = r#"panel "Flapping multipath paths" query "A_transitions_10min""#;
    let flap_host = host(Kind::MultipathFlap);
    let rows = values(p, "site-overview.json", what, &flap_host);
    let flapping = peak(
        &rows
            .iter()
            .filter(|(l, _)| l.get("host") == Some(&flap_host))
            .cloned()
            .collect::<Vec<_>>(),
    );
    assert!(
        flapping >= 3.0,
        "{flap_host}: {flapping} transitions in the window"
    );
    let calm = peak(
        &rows
            .iter()
            .filter(|(l, _)| l.get("host") == Some(&healthy))
            .cloned()
            .collect::<Vec<_>>(),
    );
    assert_eq!(calm, 0.0, "healthy host's paths flap");
    // and the storage events annotation marks it, not the healthy host
    let what = r#"annotation "storage events""#;
    let marks = values(p, "disk-server.json", what, &flap_host);
    assert!(
        marks.iter().any(|(l, _)| l.contains_key("path")),
        "{flap_host}: no path transitions among the storage events"
    );
    assert!(
        marks
            .iter()
            .any(|(l, _)| l.get("source").is_some_and(|s| s == "mpath")
                && l.get("text").is_some_and(|t| !t.is_empty())),
        "{flap_host}: no remote-written mpath event with its text: {marks:?}"
    );
    assert!(values(p, "disk-server.json", what, &healthy).is_empty());

    // the hardware RAID rebuild: progress grows, the VD shows a rebuild risk
    let what = r#"panel "Virtual drive rebuild progress and ETA" query "A""#;
    let vd = values(p, "disk-server.json", what, &host(Kind::HwraidRebuild));
    assert!(
        vd.iter().any(|(_, v)| v.len() > 2 && v[v.len() - 1] > v[0]),
        "hwraid-rebuild: no progress {vd:?}"
    );

    // every host reported up to the end: its silence is at most a report or two
    let what = r#"panel "Agents by silence (collector heartbeat)" query "A_age_s""#;
    let ages = values(p, "site-overview.json", what, ".*");
    assert_eq!(ages.len(), SCENARIOS.len(), "{ages:?}");
    for (l, v) in &ages {
        assert!(
            v.iter().all(|a| (0.0..=30.0).contains(a)),
            "{l:?}: silent {v:?} s"
        );
    }

    // the starved worker's jobs stall on I/O, the healthy workers' hardly
    let what = r#"panel "Worker nodes by jobs' I/O stall (worst first)" query "A_io_stall_pct""#;
    let rows = values(p, "site-overview.json", what, ".*");
    let stall = |k: Kind| {
        let h = host(k);
        peak(
            &rows
                .iter()
                .filter(|(l, _)| l.get("host") == Some(&h))
                .cloned()
                .collect::<Vec<_>>(),
        )
    };
    let starved = stall(Kind::JobsIoStarved);
    for k in [Kind::WorkerHtcondor, Kind::WorkerSlurm] {
        assert!(
            starved > 2.0 * stall(k),
            "starved {starved} vs {} {}",
            host(k),
            stall(k)
        );
    }
}
