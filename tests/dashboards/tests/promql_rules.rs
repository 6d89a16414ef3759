//! The Prometheus alert rules (`alerts/prometheus/storwatch-rules.yml`): generated from the
//! Grafana rules and `alerts/prometheus/expressions.yaml` (the committed file is what the
//! generator makes; `STORWATCH_BLESS=1` rewrites it), clean under `promtool check rules`.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use serde_norway::Value as Yaml;
use storwatch_dashboards_tests::promql_rules::{generate, rule_groups, RULES_FILE};
use storwatch_test_support::workspace;

#[test]
fn the_rule_file_is_the_generated_one() {
    let root = workspace();
    let made = generate(&root).unwrap_or_else(|p| panic!("{}", p.join("\n")));
    let path = root.join(RULES_FILE);
    if std::env::var_os("STORWATCH_BLESS").is_some() {
        // whole or not at all: the other tests read it meanwhile
        let tmp = path.with_extension("yml.new");
        std::fs::write(&tmp, &made).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == made,
        "{RULES_FILE} is not what alerts/storwatch-rules.yaml and alerts/prometheus/expressions.yaml \
         make: run STORWATCH_BLESS=1 cargo test -p storwatch-dashboards-tests --test promql_rules"
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
        assert_eq!(fg["name"].as_str(), Some(g.name.as_str()));
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
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(file)
        .output()
        .expect("promtool (Debian's prometheus package) is installed");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
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
