//! Tests of the Grafana dashboards (`dashboards/`) and alert rules (`alerts/`):
//! `tests/lint.rs` holds them to the documented metrics and Grafana's provisioning rules,
//! `tests/queries.rs` runs them against a real InfluxDB filled by a live simulated fleet (the
//! simulator and agent binaries, the collector), `tests/rollups.rs` on the 1 min and 1 h
//! rollups, `tests/install.rs` installs them as a site does.
//!
//! This library holds what they share: history, which needs more time than a test can wait for
//! (made by stepping a simulated host under the agent's own library, its `Scheduler` and health
//! monitors, without sleeping, and stamped to end when the test wants), every query of the
//! dashboards with Grafana's expansion of its macros, and InfluxDB's answers as series.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value as Json;

use storwatch_agent::collect::Collector;
use storwatch_agent::command::SystemRunner;
use storwatch_agent::config::Config;
use storwatch_agent::health::md::MdMonitor;
use storwatch_agent::health::mpath::{MpathConfig, MpathMonitor};
use storwatch_agent::health::zpool::{ZpoolConfig, ZpoolMonitor};
use storwatch_agent::risk::RiskModel;
use storwatch_agent::scheduler::Scheduler;
use storwatch_agent::sink::SinkStats;
use storwatch_sim::scenario::Kind;
use storwatch_sim::sim::Sim;
use storwatch_test_support::Influxd;
use storwatch_wire::lp::LineWriter;

/// The agent's report interval, in nanoseconds.
pub const STEP_NS: i64 = 10_000_000_000;

/// The agent's health monitors as the agent binary builds them for a simulated host under
/// `root`, with its `dmsetup` stand-in run every `dmsetup_interval_s` (a fork and exec each:
/// most of what stepping an hour costs) and its `zpool` stand-in polled on the monitor's own
/// thread in real time.
pub fn monitors(root: &Path, dmsetup_interval_s: f64) -> Vec<Box<dyn Collector>> {
    vec![
        Box::new(MdMonitor::new(Default::default(), RiskModel::default())),
        Box::new(MpathMonitor::new_inline(
            MpathConfig {
                dmsetup: root.join("bin/dmsetup"),
                dmsetup_interval_s,
                use_ioctl: false,
                use_multipathd: false,
                ..MpathConfig::default()
            },
            Arc::new(SystemRunner),
        )),
        Box::new(ZpoolMonitor::new(
            ZpoolConfig {
                zpool: root.join("bin/zpool"),
                interval_s: 0.2,
                timeout_s: 5.0,
                ..ZpoolConfig::default()
            },
            RiskModel::default(),
            Arc::new(SystemRunner),
        )),
    ]
}

/// `steps` seconds of a scenario (seed 7, real speed) stepped without sleeping under the agent's
/// library as host `name`, tag `site=lab`: its reports, stamped 1, 2, 3 … report intervals from
/// the epoch ([`shift`] moves them). The zpool monitor answers in real time, so a ZFS host's
/// first reports may lack its pool.
pub fn history(kind: Kind, name: &str, steps: u32, dmsetup_interval_s: f64) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(dir.path(), kind, name, 7, 1.0).unwrap();
    let cfg = Config {
        proc_root: dir.path().join("proc"),
        sys_root: dir.path().join("sys"),
        ..Config::default()
    };
    let mut sampler = Scheduler::new(&cfg, monitors(dir.path(), dmsetup_interval_s));
    let mut reports: Vec<String> = Vec::new();
    sampler.sample(0.0);
    for i in 1..=steps {
        sim.step().unwrap();
        sampler.sample(f64::from(i));
        if i % 10 == 0 {
            let mut w = LineWriter::new(name, &[("site".to_string(), "lab".to_string())]);
            sampler.report(
                &mut w,
                i64::from(i / 10) * STEP_NS,
                f64::from(i),
                SinkStats::default(),
            );
            reports.push(String::from_utf8(w.take()).unwrap());
        }
    }
    reports
}

/// The reports moved in time so that the last one is stamped `end_ns`: each report's stamp and
/// its lines.
pub fn shift(reports: &[String], end_ns: i64) -> Vec<(i64, String)> {
    let shift = end_ns - reports.len() as i64 * STEP_NS;
    let mut out = Vec::new();
    for (k, r) in reports.iter().enumerate() {
        let at = (k as i64 + 1) * STEP_NS + shift;
        let mut text = String::new();
        for line in r.lines() {
            let (head, ts) = line.rsplit_once(' ').unwrap();
            let ts: i64 = ts.parse().unwrap();
            text.push_str(&format!("{head} {}\n", ts + shift));
        }
        out.push((at, text));
    }
    out
}

/// Now, in nanoseconds since the epoch.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// A series' tags.
pub type Labels = BTreeMap<String, String>;

/// One series of an InfluxDB answer.
#[derive(Debug, Clone)]
pub struct Series {
    pub tags: Labels,
    pub columns: Vec<String>,
    pub rows: Vec<Json>,
}

impl Series {
    /// The values of `column` in every row.
    pub fn column(&self, column: &str) -> Vec<Json> {
        let i = self
            .columns
            .iter()
            .position(|c| c == column)
            .unwrap_or_else(|| panic!("no column {column} in {:?}", self.columns));
        self.rows.iter().map(|r| r[i].clone()).collect()
    }
}

/// The series of the answer to `q` in database `db`, or InfluxDB's error.
pub fn series(influx: &Influxd, db: &str, q: &str) -> Result<Vec<Series>, String> {
    let r = influx.query(db, q);
    let res = &r["results"][0];
    if let Some(e) = res.get("error").or_else(|| r.get("error")) {
        return Err(e.to_string());
    }
    if r.is_null() {
        return Err("no JSON answer".to_string());
    }
    let text = |v: &Json| v.as_str().unwrap_or("").to_string();
    Ok(res["series"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| Series {
            tags: s["tags"]
                .as_object()
                .map(|m| m.iter().map(|(k, v)| (k.clone(), text(v))).collect())
                .unwrap_or_default(),
            columns: s["columns"]
                .as_array()
                .into_iter()
                .flatten()
                .map(text)
                .collect(),
            rows: s["values"].as_array().cloned().unwrap_or_default(),
        })
        .collect())
}

/// One query of a dashboard.
#[derive(Debug, Clone)]
pub struct DashboardQuery {
    /// the dashboard's file name
    pub file: String,
    /// `variable $x`, `annotation "…"` or `panel "…" query "A"`
    pub what: String,
    pub query: String,
    /// a panel's or an annotation's query (not a template variable's)
    pub panel: bool,
}

/// Every query of the dashboards in `dashboards/`: template variables, annotations, panels
/// (nested rows included).
pub fn dashboard_queries() -> Vec<DashboardQuery> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dashboards");
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    assert!(names.len() >= 4, "{names:?}");
    let mut qs = Vec::new();
    for path in names {
        let d: Json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let mut push = |what: String, q: &Json, panel: bool| {
            qs.push(DashboardQuery {
                file: file.clone(),
                what,
                query: q.as_str().unwrap().to_string(),
                panel,
            })
        };
        for v in d["templating"]["list"].as_array().unwrap() {
            if v["type"] == "query" {
                push(
                    format!("variable ${}", v["name"].as_str().unwrap()),
                    &v["query"],
                    false,
                );
            }
        }
        for a in d["annotations"]["list"].as_array().unwrap() {
            if a["query"].is_string() {
                push(format!("annotation {}", a["name"]), &a["query"], true);
            }
        }
        let mut stack: Vec<&Json> = d["panels"].as_array().unwrap().iter().collect();
        while let Some(p) = stack.pop() {
            stack.extend(p["panels"].as_array().into_iter().flatten());
            for t in p["targets"].as_array().into_iter().flatten() {
                push(
                    format!("panel {} query {}", p["title"], t["refId"]),
                    &t["query"],
                    true,
                );
            }
        }
    }
    qs
}

/// The query of target `ref_id` of the panel titled `title` in dashboard `file`.
pub fn panel_query(file: &str, title: &str, ref_id: &str) -> String {
    let what = format!("panel {title:?} query {ref_id:?}");
    dashboard_queries()
        .into_iter()
        .find(|q| q.file == file && q.what == what)
        .unwrap_or_else(|| panic!("{file}: no {what}"))
        .query
}

/// Grafana's expansion of a dashboard query: the time range, the Resolution variable `rp`, the
/// panels' interval, site and device on "All", and the host.
pub fn expand(q: &str, time_filter: &str, rp: &str, interval: &str, host: &str) -> String {
    q.replace("$timeFilter", time_filter)
        .replace("$rp", rp)
        .replace("$__interval", interval)
        .replace("$site", ".*")
        .replace("$device", ".*")
        .replace("$host", host)
}
