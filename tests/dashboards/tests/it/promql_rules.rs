//! The Prometheus alert rules (`alerts/prometheus/storwatch-rules.yml`): generated from the
//! Grafana rules and `alerts/prometheus/expressions.yaml` (the committed file is what the
//! generator makes; `cargo xtask gen` writes it), clean under `promtool check rules`, and
//! firing on the simulated fleet exactly as `fleet::SCENARIOS` lists, rule by rule, under
//! `promtool test rules`: each host's reports through the agent's own `/metrics` exposition as
//! a Prometheus scraping it every 10 s stores them (one test group per host, the rules
//! evaluated every minute), and the set of rules that reached firing on the host must be its
//! `fires` list. `STORWATCH_PROMTOOL_TESTS=<dir>` keeps the test files there, to run
//! `promtool test rules <dir>/<host>.test.yml` by hand.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use serde_norway::Value as Yaml;
use storwatch_dashboards_tests::fleet::{
    host, host_toml, CALM_S, CALM_THEN_STORM, CALM_THEN_STORM_FIRES, GONE, GONE_AGO_S, GONE_FIRES,
    SCENARIOS, SPAN_S,
};
use storwatch_dashboards_tests::prom::{
    promtool_values_scraped, scrape_labels, scrape_reports, selector, Samples,
};
use storwatch_dashboards_tests::promql_rules::{
    generate, prom_group_name, rule_groups, RULES_FILE,
};
use storwatch_dashboards_tests::{history_phases, shift};
use storwatch_sim::scenario::Kind;
use storwatch_test_support::{promtool, workspace};
use storwatch_wire::prom::{metric_name, prom_field};

#[test]
fn the_rule_file_is_the_generated_one() {
    let root = workspace();
    let made = generate(&root).unwrap_or_else(|p| panic!("{}", p.join("\n")));
    let committed = std::fs::read_to_string(root.join(RULES_FILE)).unwrap_or_default();
    assert!(
        committed == made,
        "{RULES_FILE} is not what alerts/storwatch-rules.yaml and alerts/prometheus/expressions.yaml \
         make: run `cargo xtask gen`"
    );
}

#[test]
fn every_grafana_rule_has_one_alerting_rule_and_the_file_reads_back() {
    let root = workspace();
    let groups = rule_groups(&root).unwrap_or_else(|p| panic!("{}", p.join("\n")));
    let doc: Yaml =
        serde_norway::from_str(&std::fs::read_to_string(root.join(RULES_FILE)).unwrap()).unwrap();
    let file_groups = doc["groups"].as_sequence().unwrap();
    assert_eq!(file_groups.len(), groups.len());
    let mut alerts = 0;
    for (g, fg) in groups.iter().zip(file_groups) {
        assert_eq!(fg["name"].as_str(), Some(prom_group_name(&g.name).as_str()));
        assert_eq!(fg["interval"].as_str(), Some(g.interval.as_str()));
        let rules = fg["rules"].as_sequence().unwrap();
        assert_eq!(
            rules.len(),
            g.recording.len() + g.alerts.len(),
            "{}",
            g.name
        );
        for (r, fr) in g.recording.iter().zip(rules) {
            assert_eq!(fr["record"].as_str(), Some(r.record.as_str()));
            assert_eq!(fr["expr"].as_str(), Some(r.expr.as_str()));
        }
        for (a, fr) in g.alerts.iter().zip(&rules[g.recording.len()..]) {
            alerts += 1;
            assert_eq!(fr["alert"].as_str(), Some(a.alert.as_str()));
            assert_eq!(fr["expr"].as_str(), Some(a.expr.as_str()));
            assert_eq!(fr["for"].as_str(), Some(a.for_.as_str()));
            for (k, v) in &a.labels {
                assert_eq!(
                    fr["labels"][k.as_str()].as_str(),
                    Some(v.as_str()),
                    "{}",
                    a.alert
                );
            }
            for (k, v) in &a.annotations {
                assert_eq!(
                    fr["annotations"][k.as_str()].as_str(),
                    Some(v.as_str()),
                    "{}",
                    a.alert
                );
            }
            let labels: Vec<&str> = a.labels.iter().map(|l| l.0.as_str()).collect();
            assert_eq!(labels, ["severity", "object"], "{}", a.alert);
            let url = &a.annotations[2].1;
            assert_eq!(
                *url,
                format!(
                    "alerts/runbooks/{}.md",
                    a.alert.trim_start_matches("storwatch-")
                )
            );
            assert!(root.join(url).is_file(), "{url}");
        }
    }
    assert_eq!(alerts, 33);
}

/// A copy of the tree's two definitions with `change` applied to expressions.yaml.
fn generate_changed(change: impl Fn(&str) -> String) -> Result<String, Vec<String>> {
    let dir = storwatch_test_support::scratch();
    let root = workspace();
    for f in [
        "alerts/storwatch-rules.yaml",
        "alerts/prometheus/expressions.yaml",
    ] {
        let to = dir.path().join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        let text = std::fs::read_to_string(root.join(f)).unwrap();
        let text = if f.ends_with("expressions.yaml") {
            change(&text)
        } else {
            text
        };
        std::fs::write(to, text).unwrap();
    }
    generate(dir.path())
}

#[test]
fn a_rule_without_expression_or_an_expression_without_rule_is_refused() {
    let missing = generate_changed(|t| t.replace("  storwatch-nic-line-rate:\n", "  x:\n"))
        .unwrap_err()
        .join("\n");
    assert!(
        missing.contains("storwatch-nic-line-rate: no expression")
            && missing.contains("x has no Grafana rule"),
        "{missing}"
    );
    // a summary naming a value the expression does not return
    let other = generate_changed(|t| t.replace("    value: RC\n", "    value: RM\n"))
        .unwrap_err()
        .join("\n");
    assert!(
        other.contains("storwatch-disk-mixed-rw: summary"),
        "{other}"
    );
}

/// `promtool check rules` on `file`: its exit status and output.
fn promtool_check(file: &Path) -> (bool, String) {
    promtool(
        &[OsStr::new("check"), OsStr::new("rules"), file.as_os_str()],
        None,
    )
}

#[test]
fn promtool_checks_the_rule_file_clean() {
    let (ok, text) = promtool_check(&workspace().join(RULES_FILE));
    assert!(ok, "{text}");
    assert!(text.contains("SUCCESS: 35 rules found"), "{text}");
    assert!(
        !text.to_lowercase().contains("warning") && !text.contains("FAILED"),
        "{text}"
    );
}

// ------------------------------------------------------------------------------------------
// The rules on the simulated fleet, under `promtool test rules`.

/// One host of the fleet as a Prometheus scraping its agent stored it.
struct Scraped {
    host: String,
    samples: Samples,
    /// the scrapes of its agent (ms), the failed ones included
    scrapes: Vec<i64>,
    /// what must fire on it (uids without the `storwatch-` prefix), and nothing else
    fires: Vec<String>,
}

/// Host `name` through `phases`, its reports ending at `end_s` seconds, scraped after each.
fn scraped(name: &str, phases: &[(Kind, f64, u32)], end_s: i64, fires: &[&str]) -> Scraped {
    let reports = history_phases(name, phases, &host_toml(name));
    let reports = shift(&reports, end_s * 1_000_000_000);
    let mut samples = Samples::new();
    scrape_reports(name, &reports, &mut samples);
    Scraped {
        host: name.to_string(),
        samples,
        scrapes: reports.iter().map(|(t, _)| t / 1_000_000).collect(),
        fires: fires.iter().map(|f| f.to_string()).collect(),
    }
}

/// The fleet, one thread per host: every scenario of [`SCENARIOS`] for [`SPAN_S`] at its
/// speed; [`CALM_THEN_STORM`], an hour of calm then [`SPAN_S`] of write storm; [`GONE`], one
/// report then [`GONE_AGO_S`] of failed scrapes (`up` 0).
fn fleet() -> Vec<Scraped> {
    let span = i64::from(SPAN_S);
    std::thread::scope(|s| {
        let mut threads: Vec<_> = SCENARIOS
            .iter()
            .map(|sc| {
                s.spawn(move || {
                    scraped(
                        &host(sc.kind),
                        &[(sc.kind, sc.speed, SPAN_S)],
                        span,
                        sc.fires,
                    )
                })
            })
            .collect();
        threads.push(s.spawn(move || {
            let phases = [
                (Kind::Healthy, 1.0, CALM_S),
                (Kind::WriteStorm, 1.0, SPAN_S),
            ];
            scraped(
                CALM_THEN_STORM,
                &phases,
                i64::from(CALM_S) + span,
                CALM_THEN_STORM_FIRES,
            )
        }));
        threads.push(s.spawn(move || {
            let mut gone = scraped(GONE, &[(Kind::Healthy, 1.0, 10)], 10, GONE_FIRES);
            let up = gone
                .samples
                .entry(("up".to_string(), scrape_labels(GONE)))
                .or_default();
            for k in 1..=GONE_AGO_S / 10 {
                let t = 10_000 + k * 10_000;
                up.push((t, 0.0));
                gone.scrapes.push(t);
            }
            gone
        }));
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

/// A YAML single-quoted scalar.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The `promtool test rules` file of one host: its series every 10 s from 0, the rules
/// evaluated every minute, and at the last scrape the set of rules that were firing at any
/// evaluation: exactly the host's `fires`.
fn promtool_test(h: &Scraped, rules: &Path) -> String {
    let end_ms = *h.scrapes.last().unwrap();
    let mut out = format!(
        "# {}: the storwatch rules on the simulated host, scraped every 10 s\n\
         rule_files:\n- {}\nevaluation_interval: 1m\ntests:\n- name: {}\n  interval: 10s\n  input_series:\n",
        h.host,
        quoted(&rules.display().to_string()),
        quoted(&h.host)
    );
    for ((name, labels), points) in &h.samples {
        let values = promtool_values_scraped(points, &h.scrapes, 0, 10_000);
        let _ = writeln!(
            out,
            "  - series: {}\n    values: {}",
            quoted(&selector(name, labels)),
            quoted(&values)
        );
    }
    let window_s = end_ms / 1000 + 60;
    let expr = format!(
        "group by (alertname) (max_over_time(ALERTS{{alertstate=\"firing\",host=\"{}\"}}[{window_s}s]))",
        h.host
    );
    let _ = write!(
        out,
        "  promql_expr_test:\n  - expr: {}\n    eval_time: {}ms\n    exp_samples:",
        quoted(&expr),
        end_ms
    );
    if h.fires.is_empty() {
        out.push_str(" []\n");
    } else {
        out.push('\n');
        let fires: BTreeSet<&String> = h.fires.iter().collect();
        for f in fires {
            let _ = writeln!(
                out,
                "    - labels: {}\n      value: 1",
                quoted(&format!("{{alertname=\"storwatch-{f}\"}}"))
            );
        }
    }
    out
}

/// Every metric the rules read is one the fleet's agents serve (a rule on a misspelt name
/// would never fire), or the collector's heartbeat, which reaches Prometheus by remote write
/// only: named by the same function as every field.
fn unknown_metrics_are_refused(fleet: &[Scraped]) {
    let served: BTreeSet<&str> = fleet
        .iter()
        .flat_map(|h| h.samples.keys().map(|(name, _)| name.as_str()))
        .collect();
    let heartbeat = format!(
        "{}_{}",
        metric_name("collector_heartbeat"),
        prom_field("age_s").0
    );
    let text = std::fs::read_to_string(workspace().join(RULES_FILE)).unwrap();
    let mut unknown = BTreeSet::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("storwatch_") {
        let name: String = rest[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[i + name.len()..];
        if !served.contains(name.as_str()) && name != heartbeat {
            unknown.insert(name);
        }
    }
    assert!(
        unknown.is_empty(),
        "{RULES_FILE} reads metrics no agent of the fleet serves: {unknown:?}"
    );
}

#[test]
fn the_rules_fire_exactly_as_listed_on_the_simulated_fleet() {
    let t0 = Instant::now();
    let rules = workspace().join(RULES_FILE);
    let tmp = storwatch_test_support::scratch();
    let dir = std::env::var_os("STORWATCH_PROMTOOL_TESTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir).unwrap();
    let fleet = fleet();
    let stepped = t0.elapsed();
    unknown_metrics_are_refused(&fleet);
    let files: Vec<(String, std::path::PathBuf)> = fleet
        .iter()
        .map(|h| {
            let file = dir.join(format!("{}.test.yml", h.host));
            std::fs::write(&file, promtool_test(h, &rules)).unwrap();
            (h.host.clone(), file)
        })
        .collect();
    let failures: Vec<String> = std::thread::scope(|s| {
        let threads: Vec<_> = files
            .iter()
            .map(|(host, file)| {
                s.spawn(move || {
                    let args = [OsStr::new("test"), OsStr::new("rules"), file.as_os_str()];
                    let (ok, text) = promtool(&args, None);
                    ok.then_some(())
                        .ok_or_else(|| format!("{host} ({}):\n{text}", file.display()))
                })
            })
            .collect();
        threads
            .into_iter()
            .filter_map(|t| t.join().unwrap().err())
            .collect()
    });
    eprintln!(
        "{} hosts stepped in {:.1} s, promtool done at {:.1} s",
        fleet.len(),
        stepped.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of {} hosts:\n{}",
        failures.len(),
        fleet.len(),
        failures.join("\n")
    );
}

/// The agent-silent rule's other two ways in, beside the fleet's stopped scrape target: a host
/// whose reports reach Prometheus through the collector's remote-write output, seen by the
/// collector's heartbeat (every 30 s, `age_s` the seconds since the host's last line: one host
/// silent from minute 2, one reporting all along), and a scrape target that carries a `host`
/// label of its own (kept, not taken from the address).
#[test]
fn agent_silent_reads_the_collector_heartbeat_and_a_targets_own_host() {
    let heartbeat = format!(
        "{}_{}",
        metric_name("collector_heartbeat"),
        prom_field("age_s").0
    );
    // 20 min of heartbeats every 30 s
    let beats = 40;
    let silent: Vec<String> = (0..=beats)
        .map(|k| (if k < 4 { k % 2 * 10 } else { (k - 3) * 30 }).to_string())
        .collect();
    let alive: Vec<String> = (0..=beats).map(|k| (k % 3 * 10).to_string()).collect();
    let down: Vec<String> = (0..=beats * 3)
        .map(|k| if k < 6 { "1" } else { "0" }.to_string())
        .collect();
    let rules = workspace().join(RULES_FILE);
    let test = format!(
        "rule_files:\n- {}\nevaluation_interval: 1m\ntests:\n\
         - interval: 30s\n  input_series:\n\
         \x20 - series: '{heartbeat}{{host=\"n-silent\"}}'\n    values: '{}'\n\
         \x20 - series: '{heartbeat}{{host=\"n-alive\"}}'\n    values: '{}'\n\
         - interval: 10s\n  input_series:\n\
         \x20 - series: 'up{{job=\"storwatch\",instance=\"10.0.0.7:9634\",host=\"n-labelled\"}}'\n    values: '{}'\n\
         \x20 - series: 'up{{job=\"storwatch\",instance=\"n-up:9634\"}}'\n    values: '{}'\n",
        quoted(&rules.display().to_string()),
        silent.join(" "),
        alive.join(" "),
        down.join(" "),
        vec!["1"; down.len()].join(" ")
    );
    // both groups: the alerts at the end, by host
    let expect = |hosts: &[&str]| {
        let mut s = String::from(
            "  promql_expr_test:\n  - expr: 'group by (host) (ALERTS{alertname=\"storwatch-agent-silent\",alertstate=\"firing\"})'\n    eval_time: 20m\n    exp_samples:\n",
        );
        for h in hosts {
            let _ = writeln!(s, "    - labels: '{{host=\"{h}\"}}'\n      value: 1");
        }
        s
    };
    let mut groups = test.split("- interval: ");
    let head = groups.next().unwrap().to_string();
    let mut text = head;
    for (g, hosts) in groups.zip([&["n-silent"][..], &["n-labelled"][..]]) {
        text.push_str("- interval: ");
        text.push_str(g);
        text.push_str(&expect(hosts));
    }
    let dir = storwatch_test_support::scratch();
    let file = dir.path().join("agent-silent.test.yml");
    std::fs::write(&file, &text).unwrap();
    let (ok, out) = promtool(
        &[OsStr::new("test"), OsStr::new("rules"), file.as_os_str()],
        None,
    );
    assert!(ok, "{text}\n{out}");
}
