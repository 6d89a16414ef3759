//! `scripts/grafana-browser-check.sh`'s data and judge, without a browser: the expectations name
//! only scenarios the simulator has and dashboards the repository has, and `verdicts.py` fails a
//! page for each thing the check promises (on pages written by hand as shot.js writes them; the
//! real pages come from the opt-in script, docs/deploy.md).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_norway::Value as Yaml;
use storwatch_sim::scenario::ALL;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn expectations() -> Yaml {
    serde_norway::from_str(
        &std::fs::read_to_string(root().join("scripts/grafana-ui/expectations.yaml")).unwrap(),
    )
    .unwrap()
}

fn dashboard_uids() -> BTreeSet<String> {
    let mut uids = BTreeSet::new();
    for dir in ["dashboards", "dashboards/prometheus"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().and_then(|x| x.to_str()) == Some("json") {
                let d: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
                uids.insert(d["uid"].as_str().unwrap().to_string());
            }
        }
    }
    uids
}

#[test]
fn expectations_name_real_scenarios_and_dashboards() {
    let exp = expectations();
    let uids = dashboard_uids();
    let kinds: BTreeSet<String> = exp["dashboards"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_string())
        .collect();
    let mut listed = BTreeSet::new();
    for (kind, d) in exp["dashboards"].as_mapping().unwrap() {
        for uid in d["uids"].as_sequence().unwrap() {
            let uid = uid.as_str().unwrap();
            assert!(
                uids.contains(uid),
                "{kind:?}: no dashboard {uid} in dashboards/"
            );
            listed.insert(uid.to_string());
        }
    }
    assert_eq!(listed, uids, "every dashboard is rendered, under one kind");
    let sims: BTreeSet<&str> = ALL.iter().map(|k| k.name()).collect();
    let scenarios = exp["scenarios"].as_mapping().unwrap();
    for (name, s) in scenarios {
        let name = name.as_str().unwrap();
        assert!(sims.contains(name), "{name}: not a simulator scenario");
        let on: Vec<&str> = s["dashboards"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        assert!(!on.is_empty(), "{name}: rendered on no dashboard");
        for (k, _) in s.as_mapping().unwrap() {
            let k = k.as_str().unwrap();
            assert!(
                k == "dashboards" || on.contains(&k),
                "{name}: expectations for {k}, where it is not rendered"
            );
        }
        for k in on {
            assert!(kinds.contains(k), "{name}: no dashboard kind {k}");
        }
    }
    let missing: Vec<&&str> = sims
        .iter()
        .filter(|s| !scenarios.contains_key(**s))
        .collect();
    assert!(missing.is_empty(), "scenarios never rendered: {missing:?}");
}

/// verdicts.py on `pages` (name, JSON) listed in a pages.tsv of `lines`: (exit status, output).
fn verdicts(lines: &str, pages: &[(&str, serde_json::Value)]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    for (name, json) in pages {
        std::fs::write(dir.path().join(format!("{name}.json")), json.to_string()).unwrap();
    }
    std::fs::write(dir.path().join("pages.tsv"), lines).unwrap();
    let out = Command::new("python3")
        .arg(root().join("scripts/grafana-ui/verdicts.py"))
        .arg("--expectations")
        .arg(root().join("scripts/grafana-ui/expectations.yaml"))
        .arg("--pages")
        .arg(dir.path().join("pages.tsv"))
        .arg("--shots")
        .arg(dir.path())
        .arg("--repo")
        .arg(root())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn table(title: &str, cols: &[(&str, bool)], fold_text: &str) -> serde_json::Value {
    serde_json::json!({
        "title": title, "state": "data", "text": fold_text, "fold_text": fold_text,
        "table": {"columns": cols.iter().map(|(n, v)| serde_json::json!({"name": n, "visible": v}))
            .collect::<Vec<_>>(), "colcount": cols.len(), "rows": 1}
    })
}

fn data(title: &str, fold_text: &str) -> serde_json::Value {
    serde_json::json!({"title": title, "state": "data", "text": fold_text, "fold_text": fold_text})
}

#[test]
fn verdicts_fail_what_the_on_call_cannot_see() {
    let line = "p\tdisk-server\tstorwatch-disk-server\tsim-md-rebuild-01\tmd-rebuild\n";
    let good = serde_json::json!({"width": 1600, "page_errors": [], "panels": [
        data("NIC rx/tx bytes", ""), data("await (ms)", ""), data("Throughput", ""),
        table("MD arrays", &[("array", true), ("state", true), ("sync %", true), ("rebuild risk", true)],
              "md127 degraded recovery 12 %"),
    ]});
    let (code, out) = verdicts(line, &[("p", good)]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("pass  storwatch-disk-server x sim-md-rebuild-01"),
        "{out}"
    );

    // the risk column cut off at 1600 px, the recovery below the first screen, a panel error,
    // "No data" on a panel whose queries answered values
    let bad = serde_json::json!({"width": 1600, "page_errors": [], "panels": [
        {"title": "NIC rx/tx bytes", "state": "message", "message": "No data", "query_values": 120,
         "text": "", "fold_text": ""},
        {"title": "await (ms)", "state": "error", "error": "InfluxDB returned error: timeout",
         "text": "", "fold_text": ""},
        data("Throughput", ""),
        table("MD arrays", &[("array", true), ("state", true), ("sync %", true), ("rebuild risk", false)],
              "md127 degraded"),
        data("Rebuild / resilver progress", "recovery"),
    ]});
    let mut bad_below = bad.clone();
    bad_below["panels"][4]["fold_text"] = serde_json::json!("");
    let (code, out) = verdicts(line, &[("p", bad_below)]);
    assert_eq!(code, 1, "{out}");
    for want in [
        "FAIL  storwatch-disk-server x sim-md-rebuild-01",
        "panel 'NIC rx/tx bytes' shows 'No data' though its queries answered 120 values",
        "panel 'await (ms)': error: InfluxDB returned error: timeout",
        "table 'MD arrays': column /risk/ not in view (cut off or scrolled out at 1600 px: rebuild risk)",
        "incident: /recover|rebuild/ not in the first 1200 px (it is further down the page or cut off)",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    // a page never rendered fails too
    let (code, out) = verdicts(line, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("not rendered"), "{out}");
}

#[test]
fn the_alert_list_holds_one_set_of_rules() {
    let line = "alerts\talert-list\t/alerting/list\t-\t-\n";
    let one =
        serde_json::json!({"panels": [], "page_text": "Grafana-managed storwatch Disks Network"});
    assert_eq!(verdicts(line, &[("alerts", one)]).0, 0);
    let two = serde_json::json!({"panels": [], "page_text":
        "storwatch Disks Data source-managed /etc/prometheus/storwatch/rules/storwatch-rules.yml storwatch: Disks storwatch-disk-saturated"});
    let (code, out) = verdicts(line, &[("alerts", two)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("every alert twice"), "{out}");
    assert!(out.contains("under a path on disk"), "{out}");
}

/// A panel that lists only what is wrong may say its own good news ("every MD member in sync")
/// on a host whose scenario is not that incident; on the scenario whose incident it lists it must
/// show rows, and a table with its headers and no row is as empty as "No data".
#[test]
fn empty_is_good_only_where_the_host_has_nothing_wrong() {
    let says = |title: &str, msg: &str| {
        serde_json::json!({"title": title, "state": "message", "message": msg, "query_values": 0,
            "text": msg, "fold_text": msg})
    };
    let headers_only = |title: &str| {
        serde_json::json!({"title": title, "state": "data", "text": title, "fold_text": title,
            "table": {"columns": [{"name": "errors", "visible": false}], "colcount": 1, "rows": 0}})
    };
    let page = |panel: serde_json::Value| {
        serde_json::json!({"width": 1600, "page_errors": [], "panels": [
            data("Redundancy", "md0 degraded recovery stall 0"), panel]})
    };
    let healthy = "p\tstorage-health\tstorwatch-storage-health\tsim-healthy-01\thealthy\n";
    let (code, out) = verdicts(
        healthy,
        &[(
            "p",
            page(says("MD members not in sync", "every MD member in sync")),
        )],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("says 'every MD member in sync'"), "{out}");
    // Grafana's own "No data" is no statement
    let (_, out) = verdicts(
        healthy,
        &[("p", page(says("MD members not in sync", "No data")))],
    );
    assert!(!out.contains("says 'No data'"), "{out}");
    // the headers of an empty PromQL table: its columns are not judged, its emptiness is
    let (code, out) = verdicts(
        healthy,
        &[("p", page(headers_only("MD members not in sync")))],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("headers show without a row"), "{out}");
    // md-degraded's member out of sync must be listed: neither the message nor an empty table
    let degraded = "p\tstorage-health\tstorwatch-storage-health\tsim-md-degraded-01\tmd-degraded\n";
    for panel in [
        says("MD members not in sync", "every MD member in sync"),
        headers_only("MD members not in sync"),
    ] {
        let (code, out) = verdicts(degraded, &[("p", page(panel))]);
        assert_eq!(code, 1, "{out}");
        assert!(
            out.contains("must show data: panel 'MD members not in sync'"),
            "{out}"
        );
    }
}
