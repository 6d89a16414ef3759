//! Every dashboard query and alert rule against the real InfluxDB, filled by a live simulated
//! fleet: for each scenario the simulator binary writes its host's tree once a second and the
//! agent binary runs on it, reporting every 10 s through the real collector into a throw-away
//! influxd, as at a site. Two more hosts: one stopped after its first report, for the
//! agent-silent rule; one in a write storm after an hour of calm history (stepped under the
//! agent's library, since an hour cannot pass in a test, and sent through the collector too), to
//! leave its own await baseline. After about eight minutes of live data:
//!
//! * Grafana's evaluations of every alert rule are replayed over the run: at each tick of its
//!   group's interval, its queries with their relative time ranges ending at that tick, its
//!   reduce, threshold and math expressions per series, and each alert instance going Normal →
//!   Pending → Firing once its condition has held for the rule's `for`. Each rule must fire on
//!   the scenarios made for it, no rule's condition may ever hold on `healthy`, and
//!   agent-silent only on the stopped host;
//! * every panel query, template variable query and annotation query runs with Grafana's macros
//!   expanded as Grafana does (`$timeFilter`, `$__interval`, `$site`/`$device` as "All" = `.*`,
//!   `$host` each scenario's host), none errors, and each returns data on at least one scenario;
//! * the panels made for an incident show it on its scenario and not on `healthy`;
//! * nothing was lost on the way: no agent dropped a line, the collector rejected and
//!   dead-lettered none.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use serde_yaml::Value as Yaml;
use storwatch_dashboards_tests::{
    dashboard_queries, expand, history, now_ns, panel_query, series, shift, DashboardQuery, Labels,
    STEP_NS,
};
use storwatch_sim::scenario::Kind;
use storwatch_test_support::{binary, http, wait_for, Collector, Influxd, Proc};

const DB: &str = "storwatch";
const PORT: u16 = 18611;
const COLLECTOR_PORT: u16 = PORT + 4;
const TOKEN: &str = "dashboards-test-token-0123456789";
/// How long the fleet runs.
const RUN_S: u64 = 500;
/// The agent-silent rule's threshold (300 s) and a margin for the heartbeat.
const SILENT_S: u64 = 310;

struct Scenario {
    kind: Kind,
    /// the simulator's `--speed`: how much faster than real time the scenario's events come
    speed: f64,
    /// rules (uid without the `storwatch-` prefix) that must fire on this host
    fires: &'static [&'static str],
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        kind: Kind::Healthy,
        speed: 1.0,
        fires: &[],
    },
    Scenario {
        kind: Kind::WriteStorm,
        speed: 1.0,
        fires: &["disk-saturated"],
    },
    Scenario {
        kind: Kind::NicSaturation,
        speed: 1.0,
        fires: &["nic-line-rate", "nic-errors-drops"],
    },
    // a failure every 3-9 s instead of 30-90 s
    Scenario {
        kind: Kind::MultipathFlap,
        speed: 10.0,
        fires: &["mpath-path-flapping", "mpath-path-down"],
    },
    // the second member fails after a minute instead of ten
    Scenario {
        kind: Kind::MdRebuild,
        speed: 10.0,
        fires: &["md-degraded", "md-rebuild-risk"],
    },
    Scenario {
        kind: Kind::MultipathDegraded,
        speed: 1.0,
        fires: &["mpath-non-preferred", "mpath-fewer-paths"],
    },
    Scenario {
        kind: Kind::MdDegraded,
        speed: 1.0,
        fires: &["md-degraded", "md-degraded-no-rebuild"],
    },
    // the agent calls a recovery stalled after 60 polls without progress
    Scenario {
        kind: Kind::MdStalled,
        speed: 1.0,
        fires: &["md-degraded", "md-rebuild-stalled"],
    },
    Scenario {
        kind: Kind::MdCheck,
        speed: 1.0,
        fires: &["md-mismatch-growing"],
    },
    Scenario {
        kind: Kind::ZpoolResilver,
        speed: 1.0,
        fires: &[
            "zpool-not-online",
            "zpool-checksum-errors",
            "zpool-capacity",
        ],
    },
    Scenario {
        kind: Kind::ZpoolCacheFaulted,
        speed: 1.0,
        fires: &["zpool-fault-under-online"],
    },
    Scenario {
        kind: Kind::ZpoolRaidz1Resilver,
        speed: 1.0,
        fires: &["zpool-not-online", "zpool-rebuild-risk"],
    },
    Scenario {
        kind: Kind::MixedRw,
        speed: 10.0,
        fires: &["disk-mixed-rw"],
    },
    Scenario {
        kind: Kind::WorkerStaging,
        speed: 1.0,
        fires: &["disk-saturated"],
    },
    Scenario {
        kind: Kind::ReadaheadDrift,
        speed: 1.0,
        fires: &[],
    },
    // an hour's three 10 s bursts in five minutes: too short for the 10 min saturation rule
    Scenario {
        kind: Kind::BurstSaturation,
        speed: 12.0,
        fires: &[],
    },
];

/// The host whose agent stops after its first report.
const GONE: &str = "sim-gone";
/// A disk server in a write storm after a calm hour: its await leaves its own baseline.
const CALM_THEN_STORM: &str = "sim-calm-then-storm";

fn host(kind: Kind) -> String {
    format!("sim-{}", kind.name())
}

/// The agents' configuration: the simulated host's `dmsetup` is the only multipath source (the
/// device-mapper ioctl and multipathd's socket would be this machine's), as in the quickstart.
fn agent_config(dir: &Path) -> std::path::PathBuf {
    let token = dir.join("agent.token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let cfg = dir.join("agent.toml");
    std::fs::write(
        &cfg,
        format!(
            "[mpath]\nuse_ioctl = false\nuse_multipathd = false\n\
             [http]\ntoken_file = \"{}\"\nbackoff_min_s = 0.2\nbackoff_max_s = 2.0\n",
            token.display()
        ),
    )
    .unwrap();
    cfg
}

/// Starts the simulator for one host under `dir/<name>` and, once its tree is written, the
/// agent on it with the host's `zpool`/`dmsetup` stand-ins first on PATH.
fn start_host(dir: &Path, name: &str, kind: Kind, speed: f64, output: &str) -> (Proc, Proc) {
    let root = dir.join(name);
    let sim = Proc::spawn(
        &format!("storwatch-sim {name}"),
        &dir.join(format!("{name}.sim.log")),
        Command::new(binary("storwatch-sim", "storwatch-sim"))
            .arg("--root")
            .arg(&root)
            .args(["--scenario", kind.name(), "--host", name, "--seed", "7"])
            .args(["--speed", &speed.to_string()]),
    );
    assert!(
        wait_for(Duration::from_secs(30), || root
            .join("proc/diskstats")
            .is_file()
            && root.join("host").is_file()),
        "{name}: the simulator wrote no tree: {}",
        sim.log_tail(20)
    );
    let path = format!(
        "{}:{}",
        root.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let agent = Proc::spawn(
        &format!("storwatch-agent {name}"),
        &dir.join(format!("{name}.agent.log")),
        Command::new(binary("storwatch-agent", "storwatch-agent"))
            .env("PATH", path)
            .arg("--config")
            .arg(agent_config(dir))
            .arg("run")
            .arg("--proc-root")
            .arg(root.join("proc"))
            .arg("--sys-root")
            .arg(root.join("sys"))
            .args(["--host", name, "--tag", "site=lab", "--output", output])
            .arg("--spool-dir")
            .arg(root.join("spool")),
    );
    (sim, agent)
}

/// Each series' tags and rows; a query InfluxDB refuses fails the test.
fn query(influx: &Influxd, q: &str) -> Rows {
    series(influx, DB, q)
        .unwrap_or_else(|e| panic!("query failed: {e}\n  {q}"))
        .into_iter()
        .map(|s| (s.tags, s.rows))
        .collect()
}

/// Grafana's expansion of a dashboard query for one host, with site and device on "All" and
/// the 10 s retention policy.
fn expand_dashboard(q: &str, host: &str) -> String {
    expand(q, "time > now() - 1h", "raw", "10s", host)
}

// ------------------------------------------------------------------------------------------
// Grafana's server-side expressions, the part the rules use.

/// One query's answer: each series' tags and rows.
type Rows = Vec<(Labels, Vec<Json>)>;
type Values = BTreeMap<Labels, f64>;

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

/// Evaluates one rule as Grafana would at `at_ns` (its queries' relative time ranges end
/// there); returns the label sets its condition is true for.
fn evaluate(influx: &Influxd, rule: &Yaml, at_ns: i64) -> Vec<BTreeMap<String, String>> {
    let mut results: BTreeMap<String, Values> = BTreeMap::new();
    let mut raw: BTreeMap<String, Rows> = BTreeMap::new();
    for d in rule["data"].as_sequence().unwrap() {
        let r = d["refId"].as_str().unwrap().to_string();
        let m = &d["model"];
        if d["datasourceUid"].as_str() == Some("__expr__") {
            let input = m["expression"].as_str().unwrap();
            let out: Values = match m["type"].as_str().unwrap() {
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
            let tf = if to > 0 {
                format!("time > {at_ns} - {from}s AND time < {at_ns} - {to}s")
            } else {
                format!("time > {at_ns} - {from}s AND time <= {at_ns}")
            };
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

/// Rows of `measurement` for `host`.
fn rows_of(influx: &Influxd, measurement: &str, host: &str) -> usize {
    let r = influx.query(
        DB,
        &format!("SELECT count(\"uptime_s\") FROM \"{measurement}\" WHERE \"host\" = '{host}'"),
    );
    r["results"][0]["series"][0]["values"][0][1]
        .as_u64()
        .unwrap_or(0) as usize
}

/// Panics with the logs of the first process that died.
fn all_running(procs: &mut [Proc]) {
    for p in procs.iter_mut() {
        if !p.running() {
            panic!("{} exited:\n{}", p.name, p.log_tail(30));
        }
    }
}

/// Every alert rule of alerts/: its uid without the `storwatch-` prefix, the rule, and its
/// group's evaluation interval in seconds.
fn rules(root: &Path) -> Vec<(String, Yaml, i64)> {
    let doc: Yaml = serde_yaml::from_str(
        &std::fs::read_to_string(root.join("alerts/storwatch-rules.yaml")).unwrap(),
    )
    .unwrap();
    let mut out = Vec::new();
    for g in doc["groups"].as_sequence().unwrap() {
        let interval = seconds(g["interval"].as_str().unwrap());
        for r in g["rules"].as_sequence().unwrap() {
            let uid = r["uid"].as_str().unwrap();
            out.push((
                uid.trim_start_matches("storwatch-").to_string(),
                r.clone(),
                interval,
            ));
        }
    }
    out
}

/// A Grafana duration (`30s`, `5m`, `1h`) in seconds.
fn seconds(d: &str) -> i64 {
    let (n, unit) = d.split_at(d.len() - 1);
    let n: i64 = n.parse().unwrap_or_else(|_| panic!("duration {d}"));
    n * match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => panic!("duration {d}"),
    }
}

fn opt_min(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What Grafana's evaluations made of one alert instance (one label set).
#[derive(Default, Debug)]
struct State {
    /// the first evaluation where the condition held (Pending, or Firing when `for` is 0)
    first_true: Option<i64>,
    /// the first evaluation where it had held for the rule's `for` (Firing)
    firing: Option<i64>,
}

/// Grafana's scheduler over `[from_ns, to_ns]`: the rule evaluated at every multiple of its
/// group's interval (returned: how many), each alert instance Pending while its condition holds and Firing once it
/// has held for the rule's `for`; a false evaluation sends it back to Normal.
fn replay(
    influx: &Influxd,
    rule: &Yaml,
    interval_s: i64,
    from_ns: i64,
    to_ns: i64,
) -> (BTreeMap<Labels, State>, u32) {
    let for_ns = seconds(rule["for"].as_str().unwrap()) * 1_000_000_000;
    let step = interval_s * 1_000_000_000;
    let mut out: BTreeMap<Labels, State> = BTreeMap::new();
    let mut pending: BTreeMap<Labels, i64> = BTreeMap::new();
    let mut t = (from_ns / step + 1) * step;
    let mut n = 0;
    while t <= to_ns {
        n += 1;
        let on: BTreeSet<Labels> = evaluate(influx, rule, t).into_iter().collect();
        pending.retain(|l, _| on.contains(l));
        for l in on {
            let since = *pending.entry(l.clone()).or_insert(t);
            let st = out.entry(l).or_default();
            st.first_true.get_or_insert(t);
            if t - since >= for_ns {
                st.firing.get_or_insert(t);
            }
        }
        t += step;
    }
    (out, n)
}

#[test]
fn dashboards_and_alert_rules_on_a_live_simulated_fleet() {
    let dir = tempfile::tempdir().unwrap();
    let influx = Influxd::start(&dir.path().join("influxd"), PORT);
    influx.setup_site(DB);
    let cdir = dir.path().join("collector");
    std::fs::create_dir_all(&cdir).unwrap();
    let collector = Collector::start(&cdir, COLLECTOR_PORT, &influx.url(), DB, TOKEN);
    let write_url = collector.url(&format!("/write?db={DB}"));
    let auth = format!("Token {TOKEN}");

    // CALM_THEN_STORM was calm for the hour before: stepped under the agent's library on a
    // thread while the fleet runs (the rules are replayed on the data's own timestamps, so
    // history may arrive late), sent through the collector in batches as an agent would
    let storm = CALM_THEN_STORM.to_string();
    let history_end = now_ns() / STEP_NS * STEP_NS;
    let calm = {
        let (storm, write_url, auth) = (storm.clone(), write_url.clone(), auth.clone());
        std::thread::spawn(move || {
            let built = Instant::now();
            let reports = history(Kind::Healthy, &storm, 3600, 10.0);
            let body: String = shift(&reports, history_end)
                .into_iter()
                .map(|(_, r)| r)
                .collect();
            let lines: Vec<&str> = body.lines().collect();
            for batch in lines.chunks(2000) {
                let (code, answer) = http(
                    &write_url,
                    "POST",
                    &[("Authorization", &auth)],
                    (batch.join("\n") + "\n").as_bytes(),
                );
                assert_eq!(code, 204, "{storm}: history refused: {answer}");
            }
            built.elapsed()
        })
    };

    // the fleet
    let hosts = dir.path().join("hosts");
    std::fs::create_dir_all(&hosts).unwrap();
    let started = Instant::now();
    let started_ns = now_ns();
    let (gone_sim, mut gone_agent) = start_host(&hosts, GONE, Kind::Healthy, 1.0, &write_url);
    let mut procs = vec![gone_sim];
    for s in SCENARIOS {
        let (sim, agent) = start_host(&hosts, &host(s.kind), s.kind, s.speed, &write_url);
        procs.push(sim);
        procs.push(agent);
    }
    let (sim, agent) = start_host(&hosts, CALM_THEN_STORM, Kind::WriteStorm, 1.0, &write_url);
    procs.push(sim);
    procs.push(agent);
    // the silent host: its agent stops once its first report is in influxd
    assert!(
        wait_for(Duration::from_secs(60), || rows_of(&influx, "agent", GONE)
            > 0),
        "{GONE}: no report within 60 s: {}",
        gone_agent.log_tail(30)
    );
    gone_agent.kill();
    let gone_at = Instant::now();
    eprintln!(
        "fleet of {} hosts up; {GONE} silent after {:.0} s",
        SCENARIOS.len() + 2,
        gone_at.duration_since(started).as_secs_f64()
    );

    // ---- the live run
    let until = (started + Duration::from_secs(RUN_S)).max(gone_at + Duration::from_secs(SILENT_S));
    while Instant::now() < until {
        all_running(&mut procs);
        std::thread::sleep(Duration::from_millis(500));
    }
    all_running(&mut procs);

    let took = calm.join().expect("the history thread");
    eprintln!(
        "{storm}: an hour of calm history made and sent in {:.1} s",
        took.as_secs_f64()
    );
    // the collector forwards it all before the replay
    assert!(
        wait_for(Duration::from_secs(60), || rows_of(
            &influx, "agent", &storm
        ) >= 360),
        "{storm}: the history did not reach influxd"
    );

    // ---- alert rules: Grafana's evaluations over the run, replayed
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let healthy = host(Kind::Healthy);
    let mut problems = BTreeSet::new();
    let mut states: BTreeMap<(String, String), State> = BTreeMap::new();
    let mut evaluations = 0;
    for (uid, rule, interval_s) in rules(&root) {
        let (instances, n) = replay(&influx, &rule, interval_s, started_ns, now_ns());
        evaluations += n;
        for (labels, st) in instances {
            let h = labels.get("host").cloned().unwrap_or_default();
            let e = states.entry((uid.clone(), h)).or_default();
            e.first_true = opt_min(e.first_true, st.first_true);
            e.firing = opt_min(e.firing, st.firing);
        }
    }
    let secs = |t: Option<i64>| t.map(|t| (t - started_ns) / 1_000_000_000);
    let mut table = String::new();
    for ((uid, h), st) in &states {
        table.push_str(&format!(
            "  {uid:<26} {h:<28} true after {:>5?} s, firing after {:>5?} s\n",
            secs(st.first_true),
            secs(st.firing)
        ));
        if *h == healthy {
            problems.insert(format!("storwatch-{uid} is true on {healthy}"));
        }
        if uid == "agent-silent" && h != GONE {
            problems.insert(format!(
                "storwatch-agent-silent is true on {h}, which reports"
            ));
        }
    }
    let firing = |uid: &str, h: &str| {
        states
            .get(&(uid.to_string(), h.to_string()))
            .is_some_and(|s| s.firing.is_some())
    };
    if !firing("agent-silent", GONE) {
        problems.insert(format!("{GONE}: storwatch-agent-silent does not fire"));
    }
    if !firing("disk-await-baseline", CALM_THEN_STORM) {
        problems.insert(format!(
            "{CALM_THEN_STORM}: storwatch-disk-await-baseline does not fire"
        ));
    }
    for s in SCENARIOS {
        let h = host(s.kind);
        for rule in s.fires {
            if !firing(rule, &h) {
                problems.insert(format!("{h}: storwatch-{rule} does not fire"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{}\nstates ({evaluations} evaluations):\n{table}",
        problems.iter().cloned().collect::<Vec<_>>().join("\n")
    );
    eprintln!("alert rules ({evaluations} evaluations):\n{table}");

    // ---- dashboards
    let mut empty = Vec::new();
    let queries = dashboard_queries();
    for DashboardQuery {
        file,
        what,
        query: q,
        ..
    } in &queries
    {
        let has_data = SCENARIOS.iter().any(|s| {
            let series = query(&influx, &expand_dashboard(q, &host(s.kind)));
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
    assert!(
        empty.is_empty(),
        "{} quer(ies) without data:\n{}",
        empty.len(),
        empty.join("\n")
    );
    assert!(queries.len() > 50, "{}", queries.len());

    incident_panels(&influx);

    // ---- nothing lost on the way
    for s in SCENARIOS {
        let h = host(s.kind);
        let q = format!("SELECT max(\"dropped_lines\") FROM \"agent\" WHERE \"host\" = '{h}'");
        let dropped = influx.query(DB, &q)["results"][0]["series"][0]["values"][0][1].clone();
        assert_eq!(dropped.as_f64(), Some(0.0), "{h}: dropped lines: {q}");
    }
    let (code, metrics) = http(&collector.url("/metrics"), "GET", &[], b"");
    assert_eq!(code, 200, "{metrics}");
    for name in ["lines_rejected_total", "output_dead_lettered_total"] {
        let bad: Vec<&str> = metrics
            .lines()
            .filter(|l| l.starts_with(&format!("storwatch_collector_{name}")))
            .filter(|l| !l.ends_with(" 0"))
            .collect();
        assert!(bad.is_empty(), "{bad:?}");
    }
}

/// Per series: its tags and the values of `col` in every row.
fn column(influx: &Influxd, q: &str, col: &str) -> Vec<(Labels, Vec<Json>)> {
    series(influx, DB, q)
        .unwrap_or_else(|e| panic!("{e}\n  {q}"))
        .into_iter()
        .map(|s| {
            let vals = s.column(col);
            (s.tags, vals)
        })
        .collect()
}

/// The panels made for an incident show it on the scenario made for it, and not on `healthy`.
fn incident_panels(influx: &Influxd) {
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
    let rows = column(influx, &q, "read_ahead_kb");
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
        column(influx, &q, "saturated_s")
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
        column(influx, &site(q.clone(), h), "last")
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
