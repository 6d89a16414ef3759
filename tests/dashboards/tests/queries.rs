//! Every dashboard query and alert rule against the real InfluxDB, filled by the real agent.
//!
//! Simulated hosts (one per scenario, tag `site=lab`) are stepped without sleeping under the
//! agent's `Sampler` and health monitors; each 10 steps make one report, written to a throw-away
//! influxd with timestamps ending now (the healthy host's through the real collector, whose
//! forwarding is checked line for line). The collector's heartbeat adds a host last seen 20
//! minutes ago. Then:
//!
//! * every panel query, template variable query and annotation query runs with Grafana's macros
//!   expanded as Grafana does (`$timeFilter`, `$__interval`, `$site`/`$device` as "All" = `.*`,
//!   `$host` the scenario's host), none errors, and each returns data on at least one scenario;
//! * every alert rule runs with its queries' relative time ranges, its reduce, threshold and math
//!   expressions evaluated per series, and must fire on the scenarios made for it and never on
//!   `healthy`.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::Value as Json;
use serde_yaml::Value as Yaml;
use storwatch_agent::command::SystemRunner;
use storwatch_agent::config::Config;
use storwatch_agent::encode::LineWriter;
use storwatch_agent::health::md::MdMonitor;
use storwatch_agent::health::mpath::{MpathConfig, MpathMonitor};
use storwatch_agent::health::zpool::{ZpoolConfig, ZpoolMonitor};
use storwatch_agent::health::Monitor;
use storwatch_agent::risk::RiskModel;
use storwatch_agent::sampler::Sampler;
use storwatch_agent::sink::SinkStats;
use storwatch_sim::scenario::Kind;
use storwatch_sim::sim::Sim;
use storwatch_tests::{http, wait_for, Collector, Influxd};

const DB: &str = "storwatch";
const PORT: u16 = 18611;
/// The collector that carries the healthy host's reports.
const COLLECTOR_PORT: u16 = PORT + 4;
const TOKEN: &str = "dashboards-test-token-0123456789";
const STEP_NS: i64 = 10_000_000_000;
const CALM_THEN_STORM: &str = "sim-calm-then-storm";

struct Scenario {
    kind: Kind,
    speed: f64,
    steps: u32,
    /// rules (uid without the `storwatch-` prefix) that must fire on this host
    fires: &'static [&'static str],
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        kind: Kind::Healthy,
        speed: 1.0,
        steps: 60,
        fires: &[],
    },
    Scenario {
        kind: Kind::WriteStorm,
        speed: 1.0,
        steps: 60,
        fires: &["disk-saturated"],
    },
    Scenario {
        kind: Kind::NicSaturation,
        speed: 1.0,
        steps: 60,
        fires: &["nic-line-rate", "nic-errors-drops"],
    },
    Scenario {
        kind: Kind::MultipathFlap,
        speed: 10.0,
        steps: 150,
        fires: &["mpath-path-flapping", "mpath-path-down"],
    },
    Scenario {
        kind: Kind::MdRebuild,
        speed: 10.0,
        steps: 90,
        fires: &["md-degraded", "md-rebuild-risk"],
    },
    // the non-preferred rule wants more than 20 of the last 30 reports
    Scenario {
        kind: Kind::MultipathDegraded,
        speed: 1.0,
        steps: 250,
        fires: &["mpath-non-preferred", "mpath-fewer-paths"],
    },
    Scenario {
        kind: Kind::MdDegraded,
        speed: 1.0,
        steps: 30,
        fires: &["md-degraded", "md-degraded-no-rebuild"],
    },
    // the agent calls a recovery stalled after 60 polls without progress
    Scenario {
        kind: Kind::MdStalled,
        speed: 1.0,
        steps: 90,
        fires: &["md-degraded", "md-rebuild-stalled"],
    },
    Scenario {
        kind: Kind::MdCheck,
        speed: 1.0,
        steps: 60,
        fires: &["md-mismatch-growing"],
    },
    Scenario {
        kind: Kind::ZpoolResilver,
        speed: 1.0,
        steps: 40,
        fires: &[
            "zpool-not-online",
            "zpool-checksum-errors",
            "zpool-capacity",
        ],
    },
    Scenario {
        kind: Kind::ZpoolCacheFaulted,
        speed: 1.0,
        steps: 30,
        fires: &["zpool-fault-under-online"],
    },
    Scenario {
        kind: Kind::ZpoolRaidz1Resilver,
        speed: 1.0,
        steps: 30,
        fires: &["zpool-not-online", "zpool-rebuild-risk"],
    },
    Scenario {
        kind: Kind::MixedRw,
        speed: 10.0,
        steps: 200,
        fires: &["disk-mixed-rw"],
    },
    Scenario {
        kind: Kind::WorkerStaging,
        speed: 1.0,
        steps: 60,
        fires: &["disk-saturated"],
    },
    Scenario {
        kind: Kind::ReadaheadDrift,
        speed: 1.0,
        steps: 30,
        fires: &[],
    },
    // the hour's three 10 s bursts within 60 s: too short for the 10 min saturation rule
    Scenario {
        kind: Kind::BurstSaturation,
        speed: 60.0,
        steps: 60,
        fires: &[],
    },
];

/// A host the collector has not heard from for 20 minutes.
const GONE: &str = "sim-gone";

/// The collector's heartbeat (docs/collector.md) for the last 10 minutes up to `end_ns`: every
/// scenario's host reporting every 10 s, and [`GONE`] last seen 20 minutes before `end_ns`.
fn heartbeats(end_ns: i64) -> String {
    let mut out = String::new();
    for k in 0..60i64 {
        let ts = end_ns - k * STEP_NS;
        let now_s = ts / 1_000_000_000;
        for s in SCENARIOS {
            out.push_str(&format!(
                "collector_heartbeat,host={} last_seen_s={}i,age_s=0i,lines=412i {ts}\n",
                host(s.kind),
                now_s
            ));
        }
        let last = end_ns / 1_000_000_000 - 1200;
        out.push_str(&format!(
            "collector_heartbeat,host={GONE} last_seen_s={last}i,age_s={}i,lines=0i {ts}\n",
            now_s - last
        ));
    }
    out
}

fn host(kind: Kind) -> String {
    format!("sim-{}", kind.name())
}

fn monitors(root: &Path) -> Vec<Box<dyn Monitor>> {
    vec![
        Box::new(MdMonitor::new(Default::default(), RiskModel::default())),
        Box::new(MpathMonitor::new_inline(
            MpathConfig {
                dmsetup: root.join("bin/dmsetup"),
                dmsetup_interval_s: 1.0,
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

/// Runs a scenario under the agent and returns its reports, stamped 1, 2, 3 … report intervals
/// from the epoch (`shift` moves them to end now).
/// The zpool monitor answers from its own thread: a ZFS scenario runs on (up to 60 s of wall
/// time) until its report carries the `zpool status` details.
fn run(s: &Scenario) -> Vec<String> {
    run_as(s, &host(s.kind))
}

/// [`run`] under another host name.
fn run_as(s: &Scenario, name: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(dir.path(), s.kind, name, 7, s.speed).unwrap();
    let cfg = Config {
        proc_root: dir.path().join("proc"),
        sys_root: dir.path().join("sys"),
        ..Config::default()
    };
    let mut sampler = Sampler::new(&cfg, monitors(dir.path()));
    let wants_zpool = matches!(
        s.kind,
        Kind::ZpoolResilver | Kind::ZpoolCacheFaulted | Kind::ZpoolRaidz1Resilver
    );
    let resilvering = s.kind != Kind::ZpoolCacheFaulted;
    let started = std::time::Instant::now();
    let mut reports: Vec<String> = Vec::new();
    sampler.sample(0.0);
    let mut i = 0u32;
    loop {
        i += 1;
        sim.step().unwrap();
        if wants_zpool {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        sampler.sample(f64::from(i));
        if i % 10 == 0 {
            let mut w = LineWriter::new(name, &[("site".to_string(), "lab".to_string())]);
            sampler.report(
                &mut w,
                i64::from(i / 10) * STEP_NS,
                f64::from(i),
                SinkStats::default(),
            );
            let text = String::from_utf8(w.take()).unwrap();
            let done = i >= s.steps
                && (!wants_zpool
                    || ((!resilvering || text.contains("scan=\"resilver\""))
                        && text.contains("redundancy_left")
                        && text.contains("capacity_pct"))
                    || started.elapsed() > std::time::Duration::from_secs(60));
            reports.push(text);
            if done {
                break;
            }
        }
    }
    reports
}

/// The reports moved in time so that the last one is stamped `end_ns`.
fn shift(reports: &[String], end_ns: i64) -> String {
    let shift = end_ns - reports.len() as i64 * STEP_NS;
    let mut out = String::new();
    for line in reports.iter().flat_map(|r| r.lines()) {
        let (head, ts) = line.rsplit_once(' ').unwrap();
        let ts: i64 = ts.parse().unwrap();
        out.push_str(&format!("{head} {}\n", ts + shift));
    }
    out
}

fn query(influx: &Influxd, q: &str) -> Rows {
    let r = influx.query(DB, q);
    let res = &r["results"][0];
    assert!(
        res.get("error").is_none() && r.get("error").is_none(),
        "query failed: {r}\n  {q}"
    );
    let mut out = Vec::new();
    for s in res["series"].as_array().into_iter().flatten() {
        let tags: BTreeMap<String, String> = s["tags"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let rows: Vec<Json> = s["values"].as_array().cloned().unwrap_or_default();
        out.push((tags, rows));
    }
    out
}

/// Grafana's expansion of a dashboard query for one host, with site and device on "All".
fn expand_dashboard(q: &str, host: &str) -> String {
    q.replace("$timeFilter", "time > now() - 1h")
        .replace("$__interval", "10s")
        .replace("$site", ".*")
        .replace("$device", ".*")
        .replace("$host", host)
}

// ------------------------------------------------------------------------------------------
// Grafana's server-side expressions, the part the rules use.

type Labels = BTreeMap<String, String>;
/// One query's answer: each series' tags and rows.
type Rows = Vec<(Labels, Vec<Json>)>;
type Series = BTreeMap<Labels, f64>;

fn reduce(rows: &[Json], how: &str) -> Option<f64> {
    let v: Vec<f64> = rows.iter().filter_map(|r| r[1].as_f64()).collect();
    if v.is_empty() {
        return None;
    }
    Some(match how {
        "last" => v[v.len() - 1],
        "mean" => v.iter().sum::<f64>() / v.len() as f64,
        "max" => v.iter().copied().fold(f64::MIN, f64::max),
        "min" => v.iter().copied().fold(f64::MAX, f64::min),
        "count" => v.len() as f64,
        other => panic!("reducer {other} not handled"),
    })
}

/// A math expression (`$A > 5 * $B && $A > 20`) for one label set.
fn math(e: &str, var: &dyn Fn(&str) -> Option<f64>) -> Option<f64> {
    let toks: Vec<String> = {
        let mut t = Vec::new();
        let c: Vec<char> = e.chars().collect();
        let mut i = 0;
        while i < c.len() {
            if c[i].is_whitespace() {
                i += 1;
                continue;
            }
            let start = i;
            if c[i] == '$' || c[i].is_ascii_alphanumeric() || c[i] == '.' {
                i += 1;
                while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '_' || c[i] == '.') {
                    i += 1;
                }
            } else if i + 1 < c.len()
                && ["&&", "||", ">=", "<=", "==", "!="].contains(&&*format!("{}{}", c[i], c[i + 1]))
            {
                i += 2;
            } else {
                i += 1;
            }
            t.push(c[start..i].iter().collect());
        }
        t
    };
    fn prec(op: &str) -> Option<u8> {
        Some(match op {
            "||" => 1,
            "&&" => 2,
            ">" | "<" | ">=" | "<=" | "==" | "!=" => 3,
            "+" | "-" => 4,
            "*" | "/" => 5,
            _ => return None,
        })
    }
    fn expr(
        t: &[String],
        pos: &mut usize,
        min: u8,
        var: &dyn Fn(&str) -> Option<f64>,
    ) -> Option<f64> {
        let mut lhs = atom(t, pos, var)?;
        while let Some(op) = t.get(*pos) {
            let Some(p) = prec(op) else { break };
            if p < min {
                break;
            }
            let op = op.clone();
            *pos += 1;
            let rhs = expr(t, pos, p + 1, var)?;
            let b = |x: bool| if x { 1.0 } else { 0.0 };
            lhs = match op.as_str() {
                "||" => b(lhs != 0.0 || rhs != 0.0),
                "&&" => b(lhs != 0.0 && rhs != 0.0),
                ">" => b(lhs > rhs),
                "<" => b(lhs < rhs),
                ">=" => b(lhs >= rhs),
                "<=" => b(lhs <= rhs),
                "==" => b(lhs == rhs),
                "!=" => b(lhs != rhs),
                "+" => lhs + rhs,
                "-" => lhs - rhs,
                "*" => lhs * rhs,
                _ => lhs / rhs,
            };
        }
        Some(lhs)
    }
    fn atom(t: &[String], pos: &mut usize, var: &dyn Fn(&str) -> Option<f64>) -> Option<f64> {
        let tok = t.get(*pos)?.clone();
        *pos += 1;
        if tok == "(" {
            let v = expr(t, pos, 0, var)?;
            assert_eq!(
                t.get(*pos).map(String::as_str),
                Some(")"),
                "unbalanced {t:?}"
            );
            *pos += 1;
            Some(v)
        } else if let Some(name) = tok.strip_prefix('$') {
            var(name)
        } else if tok == "-" {
            atom(t, pos, var).map(|v| -v)
        } else {
            Some(tok.parse().unwrap_or_else(|_| panic!("math token {tok}")))
        }
    }
    let mut pos = 0;
    let v = expr(&toks, &mut pos, 0, var);
    // a missing input (no series with these labels) ends the evaluation early: no value
    if v.is_some() {
        assert_eq!(pos, toks.len(), "math expression not fully read: {e}");
    }
    v
}

#[test]
fn math_expressions_follow_precedence() {
    let vars = |n: &str| match n {
        "A" => Some(30.0),
        "B" => Some(4.0),
        _ => None,
    };
    assert_eq!(math("$A > 5 * $B && $A > 20", &vars), Some(1.0));
    assert_eq!(math("$A > 10 * $B || $B > 5", &vars), Some(0.0));
    assert_eq!(math("($A + $B) * 2", &vars), Some(68.0));
    assert_eq!(math("$A - $B - 1", &vars), Some(25.0));
    assert_eq!(math("$C > 1", &vars), None);
}

/// Evaluates one rule; returns the label sets its condition is true for.
fn evaluate(influx: &Influxd, rule: &Yaml) -> Vec<BTreeMap<String, String>> {
    let mut results: BTreeMap<String, Series> = BTreeMap::new();
    let mut raw: BTreeMap<String, Rows> = BTreeMap::new();
    for d in rule["data"].as_sequence().unwrap() {
        let r = d["refId"].as_str().unwrap().to_string();
        let m = &d["model"];
        if d["datasourceUid"].as_str() == Some("__expr__") {
            let input = m["expression"].as_str().unwrap();
            let out: Series = match m["type"].as_str().unwrap() {
                "reduce" => raw[input]
                    .iter()
                    .filter_map(|(tags, rows)| {
                        reduce(rows, m["reducer"].as_str().unwrap()).map(|v| (tags.clone(), v))
                    })
                    .collect(),
                "threshold" => {
                    let ev = &m["conditions"][0]["evaluator"];
                    let limit = ev["params"][0].as_f64().unwrap();
                    results[input]
                        .iter()
                        .map(|(t, v)| {
                            let on = match ev["type"].as_str().unwrap() {
                                "gt" => *v > limit,
                                "lt" => *v < limit,
                                other => panic!("threshold {other} not handled"),
                            };
                            (t.clone(), if on { 1.0 } else { 0.0 })
                        })
                        .collect()
                }
                "math" => {
                    let refs: Vec<&str> = input
                        .split('$')
                        .skip(1)
                        .map(|p| {
                            p.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                                .next()
                                .unwrap()
                        })
                        .collect();
                    let label_sets: BTreeSet<BTreeMap<String, String>> =
                        results[refs[0]].keys().cloned().collect();
                    label_sets
                        .into_iter()
                        .filter_map(|tags| {
                            let v = math(input, &|n: &str| {
                                results.get(n).and_then(|s| s.get(&tags)).copied()
                            });
                            v.map(|v| (tags, v))
                        })
                        .collect()
                }
                other => panic!("expression type {other} not handled"),
            };
            results.insert(r, out);
        } else {
            let range = &d["relativeTimeRange"];
            let from = range["from"].as_u64().unwrap();
            let to = range["to"].as_u64().unwrap_or(0);
            let mut tf = format!("time > now() - {from}s");
            if to > 0 {
                tf.push_str(&format!(" AND time < now() - {to}s"));
            }
            let q = m["query"].as_str().unwrap().replace("$timeFilter", &tf);
            raw.insert(r, query(influx, &q));
        }
    }
    let cond = rule["condition"].as_str().unwrap();
    results[cond]
        .iter()
        .filter(|(_, v)| **v != 0.0)
        .map(|(t, _)| t.clone())
        .collect()
}

#[test]
fn dashboards_and_alert_rules_on_the_simulated_fleet() {
    let dir = tempfile::tempdir().unwrap();
    let influx = Influxd::start(&dir.path().join("influxd"), PORT);
    influx.create_db(DB);
    // the healthy host's reports go the way an agent's do: through the real collector, which
    // queues them and forwards them to influxd (and writes its heartbeat for the host);
    // started before the data is stamped, as it may have to be built first
    let cdir = dir.path().join("collector");
    std::fs::create_dir_all(&cdir).unwrap();
    let collector = Collector::start(&cdir, COLLECTOR_PORT, &influx.url(), DB, TOKEN);
    // the scenarios first, so that the data ends just before the rules are evaluated: the
    // shortest rule window is 60 s
    let runs: Vec<(Kind, Vec<String>)> = SCENARIOS.iter().map(|s| (s.kind, run(s))).collect();
    // a disk server that was healthy an hour ago and is in a write storm now: its await leaves
    // its own baseline
    assert!(SCENARIOS[0].kind == Kind::Healthy && SCENARIOS[1].kind == Kind::WriteStorm);
    let calm = run_as(&SCENARIOS[0], CALM_THEN_STORM);
    let storm = run_as(&SCENARIOS[1], CALM_THEN_STORM);
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let end_ns = now_ns / STEP_NS * STEP_NS - STEP_NS;
    let mut via_collector = 0;
    for (kind, reports) in &runs {
        let body = shift(reports, end_ns);
        let url = if *kind == Kind::Healthy {
            via_collector = body.lines().count();
            collector.url(&format!("/write?db={DB}"))
        } else {
            format!("{}/write?db={DB}", influx.url())
        };
        let auth = format!("Token {TOKEN}");
        let (code, body) = http(&url, "POST", &[("Authorization", &auth)], body.as_bytes());
        assert_eq!(code, 204, "{}: write refused: {body}", kind.name());
    }
    // every line the collector accepted is in influxd (its own heartbeat aside)
    let healthy = host(Kind::Healthy);
    let rows = |influx: &Influxd| -> usize {
        let r = influx.query(
            DB,
            &format!("SELECT * FROM /.*/ WHERE \"host\" = '{healthy}'"),
        );
        r["results"][0]["series"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["name"] != "collector_heartbeat")
            .map(|s| s["values"].as_array().map_or(0, Vec::len))
            .sum()
    };
    assert!(
        wait_for(std::time::Duration::from_secs(30), || rows(&influx)
            >= via_collector),
        "{healthy}: {} of {via_collector} lines forwarded by the collector",
        rows(&influx)
    );
    assert_eq!(rows(&influx), via_collector, "{healthy}");
    for (reports, end) in [(&calm, end_ns - 3600 * 1_000_000_000), (&storm, end_ns)] {
        let (code, body) = http(
            &format!("{}/write?db={DB}", influx.url()),
            "POST",
            &[],
            shift(reports, end).as_bytes(),
        );
        assert_eq!(code, 204, "{CALM_THEN_STORM}: write refused: {body}");
    }
    let (code, body) = http(
        &format!("{}/write?db={DB}", influx.url()),
        "POST",
        &[],
        heartbeats(end_ns).as_bytes(),
    );
    assert_eq!(code, 204, "heartbeat: write refused: {body}");

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // ---- alert rules
    let doc: Yaml = serde_yaml::from_str(
        &std::fs::read_to_string(root.join("alerts/storwatch-rules.yaml")).unwrap(),
    )
    .unwrap();
    let mut fired: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for g in doc["groups"].as_sequence().unwrap() {
        for r in g["rules"].as_sequence().unwrap() {
            let uid = r["uid"]
                .as_str()
                .unwrap()
                .trim_start_matches("storwatch-")
                .to_string();
            let hosts = evaluate(&influx, r)
                .into_iter()
                .filter_map(|t| t.get("host").cloned())
                .collect();
            fired.insert(uid, hosts);
        }
    }
    let mut problems = Vec::new();
    if fired["agent-silent"] != BTreeSet::from([GONE.to_string()]) {
        problems.push(format!(
            "storwatch-agent-silent fires on {:?}, not only on {GONE}",
            fired["agent-silent"]
        ));
    }
    if !fired["disk-await-baseline"].contains(CALM_THEN_STORM) {
        problems.push(format!(
            "{CALM_THEN_STORM}: storwatch-disk-await-baseline does not fire"
        ));
    }
    for s in SCENARIOS {
        let h = host(s.kind);
        for rule in s.fires {
            match fired.get(*rule) {
                None => problems.push(format!("no rule storwatch-{rule}")),
                Some(hosts) if !hosts.contains(&h) => {
                    problems.push(format!("{h}: storwatch-{rule} does not fire"))
                }
                _ => {}
            }
        }
    }
    let healthy = host(Kind::Healthy);
    for (rule, hosts) in &fired {
        if hosts.contains(&healthy) {
            problems.push(format!("storwatch-{rule} fires on {healthy}"));
        }
    }
    assert!(
        problems.is_empty(),
        "{}\nfired: {fired:#?}",
        problems.join("\n")
    );
    eprintln!("alert rules fired: {fired:#?}");

    // ---- dashboards
    let mut empty = Vec::new();
    let mut checked = 0;
    let mut names: Vec<_> = std::fs::read_dir(root.join("dashboards"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    assert!(names.len() >= 4, "{names:?}");
    for path in names {
        let d: Json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let mut qs: Vec<(String, String)> = Vec::new();
        for v in d["templating"]["list"].as_array().unwrap() {
            if v["type"] == "query" {
                qs.push((
                    format!("variable ${}", v["name"].as_str().unwrap()),
                    v["query"].as_str().unwrap().into(),
                ));
            }
        }
        for a in d["annotations"]["list"].as_array().unwrap() {
            if let Some(q) = a["query"].as_str() {
                qs.push((format!("annotation {}", a["name"]), q.into()));
            }
        }
        let mut stack: Vec<&Json> = d["panels"].as_array().unwrap().iter().collect();
        while let Some(p) = stack.pop() {
            stack.extend(p["panels"].as_array().into_iter().flatten());
            for t in p["targets"].as_array().into_iter().flatten() {
                qs.push((
                    format!("panel {} query {}", p["title"], t["refId"]),
                    t["query"].as_str().unwrap().into(),
                ));
            }
        }
        for (what, q) in qs {
            checked += 1;
            let has_data = SCENARIOS.iter().any(|s| {
                let series = query(&influx, &expand_dashboard(&q, &host(s.kind)));
                series.iter().any(|(_, rows)| {
                    rows.iter().any(|r| {
                        r.as_array()
                            .is_some_and(|r| r[1..].iter().any(|v| !v.is_null()))
                    })
                })
            });
            if !has_data {
                empty.push(format!("{file}: {what}: no data on any scenario\n    {q}"));
            }
        }
    }
    assert!(
        empty.is_empty(),
        "{} quer(ies) without data:\n{}",
        empty.len(),
        empty.join("\n")
    );
    assert!(checked > 50, "{checked}");
}

/// The query of a dashboard panel's target, by panel title and refId.
fn panel_query(file: &str, title: &str, ref_id: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dashboards");
    let d: Json = serde_json::from_str(&std::fs::read_to_string(root.join(file)).unwrap()).unwrap();
    let p = d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["title"] == title)
        .unwrap_or_else(|| panic!("{file}: no panel {title:?}"));
    let t = p["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["refId"] == ref_id)
        .unwrap();
    t["query"].as_str().unwrap().to_string()
}

/// Per series (its `host` tag and other tags): the values of `column` in every row.
fn column(influx: &Influxd, q: &str, col: &str) -> Vec<(Labels, Vec<Json>)> {
    let r = influx.query(DB, q);
    assert!(r["results"][0].get("error").is_none(), "{r}\n  {q}");
    let mut out = Vec::new();
    for s in r["results"][0]["series"].as_array().into_iter().flatten() {
        let i = s["columns"]
            .as_array()
            .unwrap()
            .iter()
            .position(|c| c == col)
            .unwrap_or_else(|| panic!("no column {col} in {s}"));
        let tags: Labels = s["tags"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let vals = s["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row[i].clone())
            .collect();
        out.push((tags, vals));
    }
    out
}

/// The panels made for an incident show it on the scenario made for it, and not on `healthy`.
#[test]
fn panels_show_the_incidents() {
    let dir = tempfile::tempdir().unwrap();
    let influx = Influxd::start(&dir.path().join("influxd"), PORT + 2);
    influx.create_db(DB);
    let pick = [
        Kind::Healthy,
        Kind::WriteStorm,
        Kind::MultipathFlap,
        Kind::ReadaheadDrift,
    ];
    let runs: Vec<(Kind, Vec<String>)> = SCENARIOS
        .iter()
        .filter(|s| pick.contains(&s.kind))
        .map(|s| (s.kind, run(s)))
        .collect();
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    for (kind, reports) in &runs {
        let (code, body) = http(
            &format!("{}/write?db={DB}", influx.url()),
            "POST",
            &[],
            shift(reports, now_ns / STEP_NS * STEP_NS - STEP_NS).as_bytes(),
        );
        assert_eq!(code, 204, "{}: {body}", kind.name());
    }
    let site = |q: String, host: &str| expand_dashboard(&q, host);

    // readahead drift: the lowest read_ahead_kb of the fleet is 64, on the drifting host only
    let q = site(
        panel_query(
            "site-overview.json",
            "Tunables that differ from the fleet (lowest read_ahead_kb first)",
            "A",
        ),
        "",
    );
    let rows = column(&influx, &q, "read_ahead_kb");
    let at_64: BTreeSet<String> = rows
        .iter()
        .filter(|(_, v)| v.iter().any(|x| x.as_f64() == Some(64.0)))
        .map(|(t, _)| t["host"].clone())
        .collect();
    assert_eq!(
        at_64,
        BTreeSet::from([host(Kind::ReadaheadDrift)]),
        "{rows:?}"
    );

    // write storm: saturated seconds on the storm's host, none on the healthy one
    let q = site(
        panel_query(
            "site-overview.json",
            "Hottest disks (peak 1 s %util, seconds saturated)",
            "A",
        ),
        "",
    );
    let saturated: BTreeMap<String, f64> =
        column(&influx, &q, "saturated_s")
            .into_iter()
            .fold(BTreeMap::new(), |mut m, (t, v)| {
                *m.entry(t["host"].clone()).or_insert(0.0) +=
                    v.iter().filter_map(Json::as_f64).sum::<f64>();
                m
            });
    assert!(saturated[&host(Kind::WriteStorm)] > 100.0, "{saturated:?}");
    assert_eq!(saturated[&host(Kind::Healthy)], 0.0, "{saturated:?}");

    // multipath flap: the per-path timeline shows sdc down; on the healthy host every path is active
    let q = panel_query("disk-server.json", "Per-path state", "A");
    let states = |h: &str| -> BTreeSet<String> {
        column(&influx, &site(q.clone(), h), "last")
            .into_iter()
            .flat_map(|(t, v)| {
                v.into_iter()
                    .filter_map(move |x| x.as_str().map(|s| format!("{}/{}", t["path"], s)))
            })
            .collect()
    };
    let flap = states(&host(Kind::MultipathFlap));
    assert!(
        flap.iter().any(|s| s == "sdc/failed" || s == "sdc/offline"),
        "{flap:?}"
    );
    let healthy = states(&host(Kind::Healthy));
    assert!(
        !healthy.is_empty() && healthy.iter().all(|s| s.ends_with("/active")),
        "{healthy:?}"
    );
}
