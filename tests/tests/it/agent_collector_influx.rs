//! Agent -> collector -> InfluxDB, every piece a real binary: the agent's report (from a
//! fixture root) pushed gzip'd with a token through the collector, which is kill -9'd between
//! pushes, arrives whole in a real influxd, with the heartbeat of each node beside it.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;

use storwatch_test_support::*;

const TOKEN: &str = "e2e-agents-token-0123456789";

/// The series key of a line (measurement and tags): everything before the first unescaped space.
fn series_key(line: &str) -> String {
    let mut prev = '\0';
    let mut key = String::new();
    for c in line.chars() {
        if c == ' ' && prev != '\\' {
            break;
        }
        key.push(c);
        prev = c;
    }
    key
}

fn agent_report(host: &str, dir: &std::path::Path) -> String {
    let (proc_root, sys_root) = fixture_roots(dir);
    let out = Command::new(binary("storwatch-agent", "storwatch-agent"))
        .arg("once")
        .arg("--proc-root")
        .arg(&proc_root)
        .arg("--sys-root")
        .arg(&sys_root)
        .args([
            "--sample-interval",
            "100ms",
            "--report-interval",
            "200ms",
            "--host",
            host,
            "--output",
            "-",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "agent failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn agent_reports_reach_influxdb_through_a_crashing_collector() {
    let dir = tempfile::tempdir().unwrap();
    let influx = Influxd::start(&dir.path().join("influx"), 18450);
    influx.create_db("e2e");
    let cdir = dir.path().join("collector");
    std::fs::create_dir_all(&cdir).unwrap();
    let mut collector = Collector::start(&cdir, 18460, &influx.url(), "e2e", TOKEN);
    let auth = format!("Token {TOKEN}");

    // expected series per (host, measurement)
    let mut expected: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (i, host) in ["node-a", "node-b", "node-c"].iter().enumerate() {
        let report = agent_report(host, &dir.path().join(format!("root-{i}")));
        assert!(report.lines().count() >= 3, "the agent reported: {report}");
        for line in report.lines().filter(|l| !l.is_empty()) {
            let key = series_key(line);
            let measurement = key.split(',').next().unwrap().to_string();
            expected
                .entry((host.to_string(), measurement))
                .or_default()
                .insert(key);
        }
        let body = gzip(report.as_bytes());
        let (status, text) = http(
            &collector.url("/write?db=e2e"),
            "POST",
            &[("Authorization", &auth), ("Content-Encoding", "gzip")],
            &body,
        );
        assert_eq!(status, 204, "{text}");
        if i == 1 {
            collector.crash_and_restart();
        }
    }
    // A stranger is refused and nothing of theirs is stored.
    let (status, _) = http(
        &collector.url("/write?db=e2e"),
        "POST",
        &[("Authorization", "Token not-the-token-0000000000")],
        b"disk,host=intruder util_pct=1",
    );
    assert_eq!(status, 401);

    for ((host, m), series) in &expected {
        let q = format!("SHOW SERIES FROM \"{m}\" WHERE host = '{host}'");
        let ok = wait_for(Duration::from_secs(30), || {
            influx.query("e2e", &q)["results"][0]["series"][0]["values"]
                .as_array()
                .map_or(0, |v| v.len())
                == series.len()
        });
        assert!(
            ok,
            "{host} {m}: expected {} series, InfluxDB has {}",
            series.len(),
            influx.query("e2e", &q)
        );
    }
    for host in ["node-a", "node-b", "node-c"] {
        let q = format!("SELECT last(last_seen_s) FROM collector_heartbeat WHERE host = '{host}'");
        assert!(
            wait_for(Duration::from_secs(15), || influx.scalar("e2e", &q) > 0.0),
            "heartbeat of {host}"
        );
    }
    assert_eq!(
        influx.scalar("e2e", "SELECT count(*) FROM /.*/ WHERE host = 'intruder'"),
        0.0
    );
}
