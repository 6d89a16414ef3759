//! Tests of the Grafana dashboards (`dashboards/`) and alert rules (`alerts/`):
//! `tests/it/lint.rs` holds them to the documented metrics and Grafana's provisioning rules,
//! `tests/it/queries.rs` runs them against a real InfluxDB filled by a simulated fleet through the
//! agent's HTTP output and the real collector, `tests/it/rollups.rs` on the 1 min and 1 h rollups,
//! `tests/it/install.rs` installs them as a site does.
//!
//! This library holds what they share: simulated hosts under the agent's own library
//! ([`SteppedHost`]: simulated time, so an hour takes seconds), every query of the dashboards
//! with Grafana's expansion of its macros, and InfluxDB's answers as series.
#![allow(clippy::unwrap_used)]

pub mod fleet;
pub mod prom;
pub mod promql_dashboards;
pub mod promql_files;
pub mod promql_labels;
pub mod promql_queries;
pub mod promql_repoint;
pub mod promql_rules;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value as Json;

use storwatch_agent::assemble;
use storwatch_agent::config::Config;
use storwatch_agent::scheduler::Scheduler;
use storwatch_agent::sink::SinkStats;
use storwatch_sim::scenario::Kind;
use storwatch_sim::sim::Sim;
use storwatch_test_support::{scratch, workspace, Influxd};
use storwatch_wire::lp::LineWriter;

/// The agent's report interval, in nanoseconds.
pub const STEP_NS: i64 = 10_000_000_000;

/// A simulated host under the agent's own library, in simulated time: each [`SteppedHost::step`]
/// advances the simulator's tree by one second (uptime +1.00 s) and takes the agent's sample of
/// it, as the agent binary's loop does once a wall-clock second. The storage collectors are the
/// ones the configuration enables ([`assemble::storage`]), inline: the `dmsetup` and `zpool`
/// stand-ins run on the sampling thread when the simulated time makes them due, so nothing
/// answers in real time and nothing sleeps.
pub struct SteppedHost {
    sim: Sim,
    cfg: Config,
    scheduler: Scheduler,
    /// Simulated seconds since the agent started.
    t: u32,
}

impl SteppedHost {
    /// Host `name` running scenario `kind` (seed 7) at `speed` (see the simulator's `--speed`)
    /// in `root`, under an agent configured by `agent_toml` (the agent's config file). The
    /// host's own settings are added as a launcher passes them: `--proc-root`/`--sys-root` and
    /// `--host` for the tree, tag `site=lab`, the tree's filesystem numbers (`[fs] statvfs_file`),
    /// the tree's `dmsetup` and `zpool` stand-ins as
    /// the only multipath and ZFS sources (the device-mapper ioctl and multipathd's socket would
    /// be this machine's), and its `smartctl` and `storcli64` stand-ins for drive health and
    /// hardware RAID (unless `agent_toml` names other programs), as in the quickstart.
    pub fn new(root: &Path, kind: Kind, name: &str, speed: f64, agent_toml: &str) -> SteppedHost {
        let sim = Sim::new(root, kind, name, 7, speed).unwrap();
        let mut cfg = Config::parse(agent_toml).unwrap();
        cfg.validate().unwrap();
        cfg.host = name.to_string();
        cfg.tags.insert("site".into(), "lab".into());
        cfg.proc_root = root.join("proc");
        cfg.sys_root = root.join("sys");
        cfg.mpath.dmsetup = root.join("bin/dmsetup");
        cfg.mpath.use_ioctl = false;
        cfg.mpath.use_multipathd = false;
        cfg.zpool.zpool = root.join("bin/zpool");
        // the stand-ins, unless the configuration names another program
        if cfg.drive.smartctl == Path::new("smartctl") {
            cfg.drive.smartctl = root.join("bin/smartctl");
        }
        if cfg.hwraid.storcli.as_os_str().is_empty() {
            cfg.hwraid.storcli = root.join("bin/storcli64");
        }
        cfg.fs.statvfs_file = root.join("run/statvfs.txt");
        let mut scheduler = Scheduler::new(&cfg, assemble::storage(&cfg, true));
        scheduler.sample(0.0);
        SteppedHost {
            sim,
            cfg,
            scheduler,
            t: 0,
        }
    }

    /// The agent's configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// One simulated second: the simulator steps, the agent samples.
    pub fn step(&mut self) {
        self.sim.step().unwrap();
        self.t += 1;
        self.scheduler.sample(f64::from(self.t));
    }

    /// One report interval: steps through it and returns its report, stamped `ts_ns`, with
    /// `sink`'s counters in the agent line (as the agent hands its output's to each report).
    pub fn report(&mut self, ts_ns: i64, sink: SinkStats) -> Vec<u8> {
        let per =
            (self.cfg.report_interval.as_millis() / self.cfg.sample_interval.as_millis()).max(1);
        for _ in 0..per {
            self.step();
        }
        let tags: Vec<(String, String)> = self
            .cfg
            .tags
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut w = LineWriter::new(&self.cfg.host, &tags);
        self.scheduler
            .report(&mut w, ts_ns, f64::from(self.t), sink);
        w.take()
    }
}

/// `steps` seconds of scenario `kind` (seed 7, real speed) under the agent's library as host
/// `name`, tag `site=lab`, configured by `agent_toml`: its reports, stamped 1, 2, 3 … report
/// intervals from the epoch ([`shift`] moves them).
pub fn history(kind: Kind, name: &str, steps: u32, agent_toml: &str) -> Vec<String> {
    history_phases(name, &[(kind, 1.0, steps)], agent_toml)
}

/// Host `name`'s agent through `phases` (scenario, the simulator's speed, simulated seconds)
/// one after the other — each its own tree, the agent restarted on it, as `sim-calm-then-storm`
/// goes from a calm hour to its storm — configured by `agent_toml`: its reports, stamped 1, 2,
/// 3 … report intervals from the epoch ([`shift`] moves them).
pub fn history_phases(name: &str, phases: &[(Kind, f64, u32)], agent_toml: &str) -> Vec<String> {
    let dir = scratch();
    let mut out = Vec::new();
    for (i, &(kind, speed, steps)) in phases.iter().enumerate() {
        let root = dir.path().join(i.to_string());
        let mut host = SteppedHost::new(&root, kind, name, speed, agent_toml);
        for _ in 0..steps / 10 {
            let k = out.len() as i64 + 1;
            let r = host.report(k * STEP_NS, SinkStats::default());
            out.push(String::from_utf8(r).unwrap());
        }
    }
    out
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
    let dir = workspace().join("dashboards");
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

/// Grafana's expansion of the disk server's `$vd_device` (the block devices of the host's
/// hardware virtual drives) on "All", as it writes a multi-value variable into a regex: the
/// values its query finds for `host` in database `db`, `(sdb|sdc)`.
pub fn expand_vd_device(influx: &Influxd, db: &str, q: &str, host: &str) -> String {
    if !q.contains("$vd_device") {
        return q.to_string();
    }
    let var = dashboard_queries()
        .into_iter()
        .find(|v| v.file == "disk-server.json" && v.what == "variable $vd_device")
        .expect("disk-server.json: variable $vd_device");
    let values: Vec<String> = series(influx, db, &expand(&var.query, "", "raw", "10s", host))
        .unwrap_or_else(|e| panic!("{e}: {}", var.query))
        .into_iter()
        .flat_map(|s| s.column("value"))
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    q.replace("$vd_device", &format!("({})", values.join("|")))
}

/// `$__interval_ms` of an interval written as Grafana writes `$__interval` (`10s`, `5m`, `1h`).
fn interval_ms(interval: &str) -> String {
    let digits = interval.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let n: u64 = digits.parse().unwrap_or(0);
    let unit = match &interval[digits.len()..] {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => 0,
    };
    (n * unit).to_string()
}

/// Grafana's expansion of a dashboard query: the time range, the Resolution variable `rp`, the
/// panels' interval, site and device on "All", and the host.
pub fn expand(q: &str, time_filter: &str, rp: &str, interval: &str, host: &str) -> String {
    q.replace("$timeFilter", time_filter)
        .replace("$rp", rp)
        .replace("$__interval_ms", &interval_ms(interval))
        .replace("$__interval", interval)
        .replace("$site", ".*")
        .replace("$device", ".*")
        .replace("$host", host)
}
