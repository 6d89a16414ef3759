//! Every dashboard query and alert rule against the real InfluxDB, filled by a simulated fleet
//! in simulated time, as at a site: each scenario's host is stepped for a quarter of an hour
//! under the agent's own library ([`SteppedHost`]: the simulator's tree and the agent's
//! `Scheduler` with its storage collectors inline, nothing sleeping), one thread per host, and
//! every report travels the way an agent's does — through the agent's HTTP output and spool
//! (`storwatch_agent::sink`) to the real collector binary, which forwards it to one throw-away
//! influxd set up by `deploy/influxdb/setup.sh` (retention policies and continuous queries). The
//! reports are stamped so that the simulated quarter hour ends when the test starts. Two more
//! hosts:
//!
//! * `sim-gone`, whose agent sent one report 20 minutes ago and stopped. It reported to a
//!   collector whose wall clock was set 20 minutes back (libfaketime), which recorded the host
//!   as last seen then; the test's collector starts on the same queue directory and, like a
//!   collector restarted at a site, remembers the host, so that its own heartbeat carries the
//!   silence;
//! * `sim-calm-then-storm`, a disk server calm for an hour before its quarter hour of write
//!   storm, to leave its own await baseline.
//!
//! Then:
//!
//! * Grafana's evaluations of every alert rule are replayed over the quarter hour: every
//!   interval of its group, its queries with their relative time ranges ending there, its
//!   reduce, threshold and math expressions per series, and each alert instance going Normal →
//!   Pending → Firing once its condition has held for the rule's `for`. The rules that fire on
//!   each host must be exactly its scenario's `fires` list (the PromQL rules are held to the
//!   same lists in promql_rules.rs), no rule's condition may ever hold on `healthy`, and
//!   agent-silent only on the stopped host;
//! * every panel query, template variable query and annotation query runs with Grafana's macros
//!   expanded as Grafana does (`$timeFilter`, `$__interval`, `$site`/`$device` as "All" = `.*`,
//!   `$host` each scenario's host), none errors, and each returns data on at least one scenario;
//! * the panels made for an incident show it on its scenario and not on `healthy`;
//! * the stat rows, computed as Grafana does (each series' last value, folded by the panel's
//!   reduce-row function, coloured by its thresholds), show nothing red or orange on `healthy`
//!   and turn red or orange on the incidents (an array without redundancy, a degraded one, a
//!   flapping path, a write storm, starved jobs);
//! * nothing was lost on the way: every report of every agent is in influxd, no agent dropped a
//!   line (its own `agent` lines, and its output's counters once flushed), and the collector
//!   rejected and dead-lettered none.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use serde_norway::Value as Yaml;
use storwatch_agent::sink::{self, OutputSpec, Sink, SinkStats};
use storwatch_dashboards_tests::fleet::{
    host, host_toml, CALM_S, CALM_THEN_STORM, CALM_THEN_STORM_FIRES, DRIVES_UNREADABLE, GONE,
    GONE_AGO_S, GONE_FIRES, SCENARIOS, SPAN_S,
};
use storwatch_dashboards_tests::{
    dashboard_queries, expand, expand_vd_device, panel_query, series, DashboardQuery, Labels,
    SteppedHost, STEP_NS,
};
use storwatch_sim::scenario::Kind;
use storwatch_test_support::{now_ns, scratch, wait_for, workspace, Collector, Influxd};

const DB: &str = "storwatch";
const PORT: u16 = 19611;
const COLLECTOR_PORT: u16 = PORT + 4;
const TOKEN: &str = "dashboards-test-token-0123456789";
/// The agents' configuration file: the collector's write URL and token, a spool per host, the
/// quick backoff of a test, and the host's own settings ([`host_toml`]).
fn agent_toml(dir: &Path, name: &str, url: &str) -> String {
    format!(
        "output = \"{url}\"\n[http]\ntoken_file = \"{}\"\nspool_dir = \"{}\"\n\
         backoff_min_s = 0.2\nbackoff_max_s = 2.0\n{}",
        dir.join("agent.token").display(),
        dir.join(format!("{name}.spool")).display(),
        host_toml(name)
    )
}

/// What one host's agent sent.
struct Sent {
    host: String,
    reports: usize,
    /// its output's counters once everything was delivered
    stats: SinkStats,
}

/// Host `name`'s agent through `phases` (scenario, speed, simulated seconds) one after the
/// other — each its own tree, the agent restarted on it with the same output and spool — with
/// its reports stamped so that the last is `end_ns`, each handed to the agent's HTTP output
/// as the agent's loop does. Returns once the output has delivered all of it.
fn run_host(dir: &Path, name: &str, phases: &[(Kind, f64, u32)], end_ns: i64, url: &str) -> Sent {
    let toml = agent_toml(dir, name, url);
    let total: i64 = phases.iter().map(|p| i64::from(p.2 / 10)).sum();
    let mut output: Option<Box<dyn Sink>> = None;
    let mut k = 0;
    for (i, &(kind, speed, seconds)) in phases.iter().enumerate() {
        let root = dir.join(format!("{name}.{i}"));
        let mut h = SteppedHost::new(&root, kind, name, speed, &toml);
        let out = output.get_or_insert_with(|| {
            let spec: OutputSpec = h.config().output.parse().unwrap();
            sink::open(&spec, &h.config().http, &h.config().file).unwrap()
        });
        for _ in 0..seconds / 10 {
            k += 1;
            let report = h.report(end_ns - (total - k) * STEP_NS, out.stats());
            out.send(&report).unwrap();
        }
    }
    let mut out = output.unwrap();
    // the agent's shutdown, until its spool is empty
    let delivered = wait_for(Duration::from_secs(120), || {
        out.flush().unwrap();
        out.stats().spool_bytes == 0
    });
    assert!(delivered, "{name}: not delivered: {:?}", out.stats());
    Sent {
        host: name.to_string(),
        reports: k as usize,
        stats: out.stats(),
    }
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
/// the 10 s retention policy. `$vd_device` (disk server: the block devices of the host's
/// hardware virtual drives) on "All" is, as Grafana writes a multi-value variable into a
/// regex, its values `(sdb|sdc)`: those its query finds for the host.
fn expand_dashboard(influx: &Influxd, q: &str, host: &str) -> String {
    let q = expand_vd_device(influx, DB, q, host);
    expand(&q, "time > now() - 1h", "raw", "10s", host)
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

/// Reports (`agent` lines) of every host in influxd.
fn reports_stored(influx: &Influxd) -> BTreeMap<String, usize> {
    query(
        influx,
        "SELECT count(\"uptime_s\") FROM \"agent\" GROUP BY \"host\"",
    )
    .into_iter()
    .map(|(tags, rows)| {
        let n = rows[0][1].as_u64().unwrap_or(0) as usize;
        (tags["host"].clone(), n)
    })
    .collect()
}

/// Every alert rule of alerts/: its uid without the `storwatch-` prefix, the rule, and its
/// group's evaluation interval in seconds.
fn rules(root: &Path) -> Vec<(String, Yaml, i64)> {
    let doc: Yaml = serde_norway::from_str(
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

/// Grafana's scheduler over `(from_ns, to_ns]`: the rule evaluated every interval of its group
/// (returned: how many times), each alert instance Pending while its condition holds and Firing
/// once it has held for the rule's `for`; a false evaluation sends it back to Normal.
///
/// Grafana's scheduler ticks every 10 s from its own start and evaluates a rule on every tick
/// its interval divides, so the instants are multiples of the interval from some 10 s boundary:
/// here the last one is the last 10 s boundary before `to_ns`.
fn replay(
    influx: &Influxd,
    rule: &Yaml,
    interval_s: i64,
    from_ns: i64,
    to_ns: i64,
) -> (BTreeMap<Labels, State>, u32) {
    let for_ns = seconds(rule["for"].as_str().unwrap()) * 1_000_000_000;
    let step = interval_s * 1_000_000_000;
    let last = to_ns / 10_000_000_000 * 10_000_000_000;
    let mut t = last - (last - from_ns - 1) / step * step;
    let mut out: BTreeMap<Labels, State> = BTreeMap::new();
    let mut pending: BTreeMap<Labels, i64> = BTreeMap::new();
    let mut n = 0;
    while t <= last {
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
fn dashboards_and_alert_rules_on_a_simulated_fleet() {
    let t0 = Instant::now();
    let dir = scratch();
    let influx = Influxd::start(&dir.path().join("influxd"), PORT);
    influx.setup_site(DB);
    let cdir = dir.path().join("collector");
    std::fs::create_dir_all(&cdir).unwrap();
    let config = Collector::write_config(&cdir, COLLECTOR_PORT, &influx.url(), DB, TOKEN);
    let url = format!("http://127.0.0.1:{COLLECTOR_PORT}/write?db={DB}");
    let hosts = dir.path().join("hosts");
    std::fs::create_dir_all(&hosts).unwrap();
    std::fs::write(hosts.join("agent.token"), format!("{TOKEN}\n")).unwrap();
    let end_ns = now_ns() / STEP_NS * STEP_NS;
    let from_ns = end_ns - i64::from(SPAN_S) * 1_000_000_000;

    // ---- sim-gone: one report to a collector whose clock says 20 minutes ago, which then
    // stops; the test's collector takes over its queue directory, and so its memory of hosts
    let gone = {
        let then = Collector::start_with_clock_offset(
            &Collector::bin(),
            &config,
            COLLECTOR_PORT,
            -GONE_AGO_S,
        );
        let sent = run_host(
            &hosts,
            GONE,
            &[(Kind::Healthy, 1.0, 10)],
            end_ns - GONE_AGO_S * 1_000_000_000,
            &url,
        );
        assert!(
            wait_for(Duration::from_secs(30), || reports_stored(&influx)
                .get(GONE)
                .is_some_and(|n| *n == 1)),
            "{GONE}: its report did not reach influxd"
        );
        drop(then);
        sent
    };
    let collector = Collector::start_with_config(&Collector::bin(), &config, COLLECTOR_PORT);

    // ---- the fleet, one thread per host
    let mut sent = std::thread::scope(|s| {
        let (hosts, url) = (&hosts, &url);
        let mut threads: Vec<_> = SCENARIOS
            .iter()
            .map(|sc| {
                s.spawn(move || {
                    let phases = [(sc.kind, sc.speed, SPAN_S)];
                    run_host(hosts, &host(sc.kind), &phases, end_ns, url)
                })
            })
            .collect();
        threads.push(s.spawn(move || {
            let phases = [
                (Kind::Healthy, 1.0, CALM_S),
                (Kind::WriteStorm, 1.0, SPAN_S),
            ];
            run_host(hosts, CALM_THEN_STORM, &phases, end_ns, url)
        }));
        threads
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect::<Vec<Sent>>()
    });
    sent.push(gone);
    eprintln!(
        "{} hosts stepped and delivered to the collector in {:.1} s",
        sent.len(),
        t0.elapsed().as_secs_f64()
    );

    // ---- nothing lost on the way: every report in influxd, no line dropped or refused
    let want: BTreeMap<String, usize> = sent.iter().map(|s| (s.host.clone(), s.reports)).collect();
    assert!(
        wait_for(Duration::from_secs(60), || reports_stored(&influx) == want),
        "reports sent {want:?}, in influxd {:?}",
        reports_stored(&influx)
    );
    for s in &sent {
        assert_eq!(s.stats.dropped_lines, 0, "{}: {:?}", s.host, s.stats);
        let q = format!(
            "SELECT max(\"dropped_lines\") FROM \"agent\" WHERE \"host\" = '{}'",
            s.host
        );
        assert_eq!(influx.scalar(DB, &q), 0.0, "{}: dropped lines: {q}", s.host);
    }
    for name in ["lines_rejected_total", "output_dead_lettered_total"] {
        let bad: Vec<_> = collector
            .metrics(name)
            .into_iter()
            .filter(|(_, v)| *v != 0.0)
            .collect();
        assert!(bad.is_empty(), "{bad:?}");
    }
    // the collector's heartbeat has told of the silence by the last evaluation
    let silent_q =
        format!("SELECT last(\"age_s\") FROM \"collector_heartbeat\" WHERE \"host\" = '{GONE}'");
    assert!(
        wait_for(Duration::from_secs(30), || {
            let q = format!(
                "{silent_q} AND time <= {}",
                now_ns() / 10_000_000_000 * 10_000_000_000
            );
            influx.scalar(DB, &q) >= GONE_AGO_S as f64
        }),
        "{GONE}: no heartbeat of its silence: {}",
        influx.query(DB, &silent_q)
    );
    eprintln!("forwarded at {:.1} s", t0.elapsed().as_secs_f64());

    // ---- alert rules: Grafana's evaluations over the quarter hour, replayed
    let healthy = host(Kind::Healthy);
    let to_ns = now_ns();
    let replays: Vec<_> = std::thread::scope(|s| {
        let influx = &influx;
        let threads: Vec<_> = rules(&workspace())
            .into_iter()
            .map(|(uid, rule, interval_s)| {
                s.spawn(move || (uid, replay(influx, &rule, interval_s, from_ns, to_ns)))
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let mut problems = BTreeSet::new();
    let mut states: BTreeMap<(String, String), State> = BTreeMap::new();
    let mut evaluations = 0;
    for (uid, (instances, n)) in replays {
        evaluations += n;
        for (labels, st) in instances {
            let h = labels.get("host").cloned().unwrap_or_default();
            let e = states.entry((uid.clone(), h)).or_default();
            e.first_true = opt_min(e.first_true, st.first_true);
            e.firing = opt_min(e.firing, st.firing);
        }
    }
    let secs = |t: Option<i64>| t.map(|t| (t - from_ns) / 1_000_000_000);
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
    // the healthy workers' jobs wait on I/O a few % of their time: never a stall
    for kind in [Kind::WorkerHtcondor, Kind::WorkerSlurm] {
        let h = host(kind);
        if states.contains_key(&("jobs-io-stall".to_string(), h.clone())) {
            problems.insert(format!("storwatch-jobs-io-stall is true on {h}"));
        }
    }
    // exactly the rules listed fire on each host, as the PromQL rules must (promql_rules.rs)
    let mut listed: BTreeMap<String, &[&str]> =
        SCENARIOS.iter().map(|s| (host(s.kind), s.fires)).collect();
    listed.insert(GONE.to_string(), GONE_FIRES);
    listed.insert(CALM_THEN_STORM.to_string(), CALM_THEN_STORM_FIRES);
    for (h, fires) in &listed {
        for rule in *fires {
            if !firing(rule, h) {
                problems.insert(format!("{h}: storwatch-{rule} does not fire"));
            }
        }
        for ((uid, sh), st) in &states {
            if sh == h && st.firing.is_some() && !fires.contains(&uid.as_str()) {
                problems.insert(format!(
                    "{h}: storwatch-{uid} fires, which its scenario does not list"
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{}\nstates ({evaluations} evaluations):\n{table}",
        problems.iter().cloned().collect::<Vec<_>>().join("\n")
    );
    eprintln!(
        "alert rules ({evaluations} evaluations, done at {:.1} s):\n{table}",
        t0.elapsed().as_secs_f64()
    );

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
            let series = query(&influx, &expand_dashboard(&influx, q, &host(s.kind)));
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

    jobs_panels(&influx);
    incident_panels(&influx);
    first_screen(&influx);
    eprintln!("done in {:.1} s", t0.elapsed().as_secs_f64());
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
    let site = |q: String, host: &str| expand_dashboard(influx, &q, host);

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

    // multipath hung: the maps table shows mpathd's hung_io, with the table's features and handler
    let q = panel_query("storage-health.json", "Multipath maps", "A");
    let hung = |h: &str| -> BTreeSet<String> {
        column(influx, &site(q.clone(), h), "hung_io")
            .into_iter()
            .filter(|(_, v)| v.iter().any(|x| x.as_bool() == Some(true)))
            .map(|(t, _)| t["map"].clone())
            .collect()
    };
    assert_eq!(
        hung(&host(Kind::MultipathHung)),
        BTreeSet::from(["mpathd".to_owned()])
    );
    assert_eq!(hung(&host(Kind::Healthy)), BTreeSet::new());
    let features = column(
        influx,
        &site(q.clone(), &host(Kind::MultipathHung)),
        "features",
    );
    assert!(
        features
            .iter()
            .all(|(_, v)| v.iter().all(|x| x.as_str() == Some("queue_if_no_path"))),
        "{features:?}"
    );

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

    drives_and_hardware_raid(influx);
}

/// The colour a stat panel shows on host `h`, with its value: every series of its queries, the
/// last value of each, folded as its `calculateField` reduce-row transformation does (`min`,
/// `max`, `sum`), then the step of its thresholds that value reaches.
fn stat_colour(influx: &Influxd, p: &Json, h: &str) -> (Option<f64>, String) {
    let reducer = p["transformations"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["id"] == "calculateField")
        .and_then(|t| t["options"]["reduce"]["reducer"].as_str())
        .unwrap_or("max")
        .to_string();
    let mut lasts = Vec::new();
    for t in p["targets"].as_array().into_iter().flatten() {
        let q = expand_dashboard(influx, t["query"].as_str().unwrap_or(""), h);
        let col = q
            .split(" AS \"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("")
            .to_string();
        for (_, vals) in column(influx, &q, &col) {
            if let Some(v) = vals.iter().rev().find_map(Json::as_f64) {
                lasts.push(v);
            }
        }
    }
    let value = match reducer.as_str() {
        "min" => lasts.iter().copied().reduce(f64::min),
        "sum" => (!lasts.is_empty()).then(|| lasts.iter().sum()),
        _ => lasts.iter().copied().reduce(f64::max),
    };
    let steps = p["fieldConfig"]["defaults"]["thresholds"]["steps"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let colour = match value {
        None => "none".to_string(),
        Some(v) => steps
            .iter()
            .rfind(|st| st["value"].as_f64().is_none_or(|x| v >= x))
            .and_then(|st| st["color"].as_str())
            .unwrap_or("")
            .to_string(),
    };
    (value, colour)
}

/// The stat rows: nothing red or orange on the healthy hosts; the incidents red on the first
/// screen (the disk server's stat for its kind of trouble).
fn first_screen(influx: &Influxd) {
    let stats = |file: &str| -> Vec<Json> {
        let d: Json = serde_json::from_str(
            &std::fs::read_to_string(workspace().join("dashboards").join(file)).unwrap(),
        )
        .unwrap();
        d["panels"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["type"] == "stat")
            .cloned()
            .collect()
    };
    let mut table = String::new();
    let mut problems = Vec::new();
    let mut colour_of = BTreeMap::new();
    for (file, hosts) in [
        (
            "disk-server.json",
            vec![
                Kind::Healthy,
                Kind::MdDegraded,
                Kind::MdRebuild,
                Kind::MultipathFlap,
                Kind::WriteStorm,
            ],
        ),
        (
            "worker-node.json",
            vec![Kind::WorkerHtcondor, Kind::WorkerSlurm, Kind::JobsIoStarved],
        ),
    ] {
        for p in stats(file) {
            let title = p["title"].as_str().unwrap_or("").to_string();
            for kind in &hosts {
                let h = host(*kind);
                let (v, c) = stat_colour(influx, &p, &h);
                table.push_str(&format!("{file} {title:30} {h:28} {v:?} {c}\n"));
                colour_of.insert((title.clone(), h.clone()), c.clone());
                let healthy = matches!(
                    kind,
                    Kind::Healthy | Kind::WorkerHtcondor | Kind::WorkerSlurm
                );
                if healthy && (c.contains("red") || c.contains("orange")) {
                    problems.push(format!("{file}: {title:?} is {c} ({v:?}) on healthy {h}"));
                }
            }
        }
    }
    for (title, kind, want) in [
        ("Redundancy", Kind::MdRebuild, "red"),
        ("Rebuild risk", Kind::MdRebuild, "red"),
        // a RAID6 with one member down still has one failure to spare: degraded, not lost
        ("Members down", Kind::MdDegraded, "orange"),
        ("Flapping paths", Kind::MultipathFlap, "red"),
        ("Peak %util", Kind::WriteStorm, "red"),
        ("I/O stall", Kind::JobsIoStarved, "red"),
        ("CPU efficiency", Kind::JobsIoStarved, "red"),
    ] {
        let c = colour_of
            .get(&(title.to_string(), host(kind)))
            .cloned()
            .unwrap_or_default();
        if c != want {
            problems.push(format!("{title:?} is {c:?} on {}, not {want}", host(kind)));
        }
    }
    assert!(problems.is_empty(), "{}\n{table}", problems.join("\n"));
    eprintln!("stat rows:\n{table}");
}

/// The last value of `col` of each series of a table query, by the series' tag `tag`.
fn last_by(influx: &Influxd, q: &str, tag: &str, col: &str) -> BTreeMap<String, Json> {
    column(influx, q, col)
        .into_iter()
        .filter_map(|(t, v)| Some((t.get(tag)?.clone(), v.last()?.clone())))
        .collect()
}

/// The drive and hardware RAID panels show the incidents of their scenarios, and nothing of them
/// on the hosts without one.
fn drives_and_hardware_raid(influx: &Influxd) {
    let q = |file: &str, title: &str, r: &str, h: &str| {
        expand_dashboard(influx, &panel_query(file, title, r), h)
    };
    let (rebuild, cache_wt, nvme, healthy) = (
        host(Kind::HwraidRebuild),
        host(Kind::HwraidCacheWt),
        host(Kind::NvmeWearout),
        host(Kind::Healthy),
    );

    // the rebuild's VD is degraded with a member at risk; the other VD and the cache-wt host's
    // are optimal
    let vds = "Virtual drives";
    let state = last_by(
        influx,
        &q("storage-health.json", vds, "A", &rebuild),
        "vd",
        "state",
    );
    assert!(
        state.values().any(|s| s == "Pdgd" || s == "Dgrd"),
        "{state:?}"
    );
    assert!(state.values().any(|s| s == "Optl"), "{state:?}");
    let at_risk = last_by(
        influx,
        &q("storage-health.json", vds, "A", &rebuild),
        "vd",
        "members_at_risk",
    );
    assert!(
        at_risk.values().any(|v| v.as_f64().unwrap_or(0.0) >= 1.0),
        "{at_risk:?}"
    );
    let state = last_by(
        influx,
        &q("storage-health.json", vds, "A", &cache_wt),
        "vd",
        "state",
    );
    assert!(
        !state.is_empty() && state.values().all(|s| s == "Optl"),
        "{state:?}"
    );

    // physical drives: the rebuilding one is listed, none of the cache-wt host's healthy drives
    let pds = "Physical drives not Onln/UGood, or with errors";
    let listed = last_by(
        influx,
        &q("storage-health.json", pds, "A", &rebuild),
        "slot",
        "state",
    );
    assert!(listed.values().any(|s| s == "Rbld"), "{listed:?}");
    let listed = last_by(
        influx,
        &q("storage-health.json", pds, "A", &cache_wt),
        "slot",
        "state",
    );
    assert!(listed.is_empty(), "{listed:?}");

    // drives not healthy: the weak member of the rebuilding VD, read behind the controller; none
    // on the healthy or cache-wt hosts, whose drives are all read
    let bad = "Drives not healthy";
    let pending = last_by(
        influx,
        &q("storage-health.json", bad, "A", &rebuild),
        "device",
        "pending_sectors",
    );
    assert!(
        pending
            .iter()
            .any(|(d, p)| d.starts_with("bus/") && p.as_f64().unwrap_or(0.0) > 0.0),
        "{pending:?}"
    );
    for h in [&healthy, &cache_wt] {
        let rows = column(influx, &q("storage-health.json", bad, "A", h), "health_ok");
        assert!(rows.is_empty(), "{h}: {rows:?}");
        // and the host's drives were read: the disk server's table lists them
        let read = column(influx, &q("disk-server.json", "Drives", "A", h), "read_ok");
        assert!(
            !read.is_empty()
                && read
                    .iter()
                    .all(|(_, v)| v.last().and_then(Json::as_bool) == Some(true)),
            "{h}: {read:?}"
        );
    }

    // drives not read: every drive of the host whose smartctl fails, with smartctl's status
    let unreadable = host(DRIVES_UNREADABLE);
    let errors = last_by(
        influx,
        &q("storage-health.json", "Drives not read", "A", &unreadable),
        "device",
        "read_error",
    );
    let drives = last_by(
        influx,
        &q("disk-server.json", "Drives", "A", &unreadable),
        "device",
        "read_ok",
    );
    assert!(
        !errors.is_empty()
            && errors.len() == drives.len()
            && errors
                .values()
                .all(|e| e.as_str().is_some_and(|e| e.contains("exit status 1"))),
        "{errors:?} {drives:?}"
    );
    let errors = column(
        influx,
        &q("storage-health.json", "Drives not read", "A", &healthy),
        "read_error",
    );
    assert!(errors.is_empty(), "{errors:?}");

    // NVMe wear-out: nvme2n1's spare below its threshold
    let t = "NVMe spare against threshold, wear";
    let spare = last_by(
        influx,
        &q("storage-health.json", t, "A", &nvme),
        "device",
        "available_spare_pct",
    );
    let threshold = last_by(
        influx,
        &q("storage-health.json", t, "A", &nvme),
        "device",
        "available_spare_threshold_pct",
    );
    assert!(
        spare["nvme2n1"].as_f64().unwrap() < threshold["nvme2n1"].as_f64().unwrap(),
        "{spare:?} {threshold:?}"
    );

    // the disk server's VD panels read the disk lines of the VDs' own block devices
    let util = "%util of the virtual drives' block devices (peak 1 s)";
    let devices = |h: &str| -> BTreeSet<String> {
        column(influx, &q("disk-server.json", util, "A", h), "max")
            .into_iter()
            .map(|(t, _)| t["device"].clone())
            .collect()
    };
    let vd_devices: BTreeSet<String> = column(
        influx,
        &q("disk-server.json", "Virtual drive state", "A", &rebuild),
        "last",
    )
    .into_iter()
    .map(|(t, _)| t["device"].clone())
    .collect();
    assert!(!vd_devices.is_empty(), "no VD tied to a block device");
    assert_eq!(devices(&rebuild), vd_devices);
    assert_eq!(devices(&healthy), BTreeSet::new());

    // write-back configured, write-through in effect once the BBU failed
    let cache = "Cache policy (configured write-back, in effect)";
    let active = column(
        influx,
        &q("disk-server.json", cache, "C", &cache_wt),
        "last",
    );
    assert!(
        !active.is_empty()
            && active.iter().all(|(_, v)| {
                let v: Vec<bool> = v.iter().filter_map(Json::as_bool).collect();
                v.first() == Some(&true) && v.last() == Some(&false)
            }),
        "{active:?}"
    );

    // the drive and RAID events have an annotation of their own, and only they: the growing
    // sectors of the rebuild's weak member, the BBU failing and the cache falling to
    // write-through on the cache-wt host
    let sources = |file: &str, name: &str, h: &str| -> BTreeSet<String> {
        let what = format!("annotation {name:?}");
        let a = dashboard_queries()
            .into_iter()
            .find(|q| q.file == file && q.what == what)
            .unwrap_or_else(|| panic!("{file}: no {what}"));
        column(influx, &expand_dashboard(influx, &a.query, h), "source")
            .into_iter()
            .flat_map(|(_, v)| v.into_iter().filter_map(|x| x.as_str().map(str::to_string)))
            .collect()
    };
    for file in ["storage-health.json", "disk-server.json"] {
        let ours = "drive and RAID events";
        let on_rebuild = sources(file, ours, &rebuild);
        assert!(on_rebuild.contains("drive"), "{file}: {on_rebuild:?}");
        let on_cache_wt = sources(file, ours, &cache_wt);
        assert!(on_cache_wt.contains("hwraid"), "{file}: {on_cache_wt:?}");
        for h in [&rebuild, &cache_wt] {
            let storage = sources(file, "storage events", h);
            assert!(
                !storage.contains("hwraid") && !storage.contains("drive"),
                "{file}: {storage:?}"
            );
        }
    }

    // the site's arrays table has the rebuilding VD next to the MD arrays
    let arrays = "Arrays (MD and hardware RAID): degraded, rebuilding, at risk";
    let risk = column(
        influx,
        &q("site-overview.json", arrays, "B", ""),
        "rebuild_risk",
    );
    let on = |h: &str| {
        risk.iter()
            .filter(|(t, _)| t["host"] == h)
            .flat_map(|(_, v)| v.iter().filter_map(Json::as_f64))
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))
    };
    assert!(on(&rebuild).is_some_and(|r| r > 0.0), "{risk:?}");
    assert_eq!(on(&cache_wt), Some(0.0), "{risk:?}");
}

/// The Jobs row of the worker-node dashboard: the starved worker's jobs stall and lose their
/// efficiency while the write-storm server next to them on the same axis is at 100 %; the
/// healthy workers' jobs run at 85-95 % with little stall; the ranking tells them apart, and
/// the site overview lists the starved worker worst.
fn jobs_panels(influx: &Influxd) {
    let on = |q: &str, h: &str| expand(q, "time > now() - 1h", "raw", "10s", h);
    let title = "Jobs' CPU efficiency and I/O stall vs the storage servers' %util";
    let q = panel_query("worker-node.json", title, "A");
    let mean = |h: &str, col: &str| -> f64 {
        let v: Vec<f64> = column(influx, &on(&q, h), col)
            .into_iter()
            .flat_map(|(_, v)| v)
            .filter_map(|x| x.as_f64())
            .collect();
        assert!(!v.is_empty(), "{h}: no {col} in {q}");
        v.iter().sum::<f64>() / v.len() as f64
    };
    let starved = host(Kind::JobsIoStarved);
    let (eff, stall) = (mean(&starved, "efficiency"), mean(&starved, "io_stall"));
    assert!(
        eff < 40.0 && stall > 50.0,
        "{starved}: efficiency {eff}, io stall {stall}"
    );
    for kind in [Kind::WorkerHtcondor, Kind::WorkerSlurm] {
        let h = host(kind);
        let (eff, stall) = (mean(&h, "efficiency"), mean(&h, "io_stall"));
        assert!(
            (80.0..=96.0).contains(&eff) && stall < 10.0,
            "{h}: efficiency {eff}, io stall {stall}"
        );
    }
    // the storage servers on the same axis: the write-storm host pinned at 100 %
    let q = panel_query("worker-node.json", title, "B");
    let peak: BTreeMap<String, f64> = column(influx, &on(&q, &starved), "max")
        .into_iter()
        .map(|(t, v)| {
            let m = v.iter().filter_map(Json::as_f64).fold(0.0, f64::max);
            (t["host"].clone(), m)
        })
        .collect();
    assert_eq!(peak.get(&host(Kind::WriteStorm)), Some(&100.0), "{peak:?}");
    assert!(peak[&host(Kind::Healthy)] < 95.0, "{peak:?}");
    // the ranking: the starved host's jobs at the top with io_some above 30 %, none of the
    // healthy workers' jobs above 10 %
    let q = panel_query("worker-node.json", "Jobs ranked by I/O stall", "A");
    let some = |h: &str| -> Vec<f64> {
        column(influx, &on(&q, h), "io_some_pct")
            .into_iter()
            .flat_map(|(_, v)| v)
            .filter_map(|x| x.as_f64())
            .collect()
    };
    // (a job that failed within seconds is seen over a whole interval: its share is a lower
    // bound, so the median, not every job)
    let mut s = some(&starved);
    s.sort_by(f64::total_cmp);
    assert!(!s.is_empty() && s[s.len() / 2] > 30.0, "{starved}: {s:?}");
    for kind in [Kind::WorkerHtcondor, Kind::WorkerSlurm] {
        let s = some(&host(kind));
        assert!(
            !s.is_empty() && s.iter().all(|v| *v < 10.0),
            "{kind:?}: {s:?}"
        );
    }
    // the site overview: the worker nodes by their jobs' stall, the starved one worst
    let q = panel_query(
        "site-overview.json",
        "Worker nodes by jobs' I/O stall (worst first)",
        "A",
    );
    let by_host: BTreeMap<String, f64> = column(influx, &on(&q, ""), "io_stall_pct")
        .into_iter()
        .filter_map(|(t, v)| Some((t["host"].clone(), v.first()?.as_f64()?)))
        .collect();
    assert!(by_host[&starved] > 50.0, "{by_host:?}");
    for kind in [Kind::WorkerHtcondor, Kind::WorkerSlurm] {
        assert!(by_host[&host(kind)] < 10.0, "{by_host:?}");
    }
}
