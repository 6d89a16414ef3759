//! The agent's Prometheus exposition as a site meets it: the agent runs on this machine's own
//! /proc and /sys with `[prometheus] listen` set, Prometheus's own `promtool check metrics` accepts the page, and a
//! real Prometheus scraping the agent stores its series.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::Duration;

use storwatch_test_support::*;

const AGENT_PORT: u16 = 18520;
const PROM_PORT: u16 = 18521;

fn metrics_page() -> String {
    http(
        &format!("http://127.0.0.1:{AGENT_PORT}/metrics"),
        "GET",
        &[],
        b"",
    )
    .1
}

#[test]
fn promtool_accepts_the_page_and_prometheus_scrapes_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agent.toml");
    std::fs::write(
        &config,
        format!("[prometheus]\nlisten = \"127.0.0.1:{AGENT_PORT}\"\n"),
    )
    .unwrap();
    let mut agent = Proc::spawn(
        "agent",
        &dir.path().join("agent.log"),
        Command::new(binary("storwatch-agent", "storwatch-agent"))
            .arg("run")
            .arg("--config")
            .arg(&config)
            .args([
                "--sample-interval",
                "500ms",
                "--report-interval",
                "1s",
                "--host",
                "prom-node",
                "--output",
                "file:/dev/null",
            ]),
    );
    assert!(
        wait_for(Duration::from_secs(20), || metrics_page()
            .contains("storwatch_disk_util_percent{")),
        "no disk metrics served; agent log:\n{}",
        agent.log_tail(20)
    );
    let page = metrics_page();
    assert!(
        page.contains("# TYPE storwatch_disk_util_percent gauge"),
        "{page}"
    );
    assert!(page.contains("host=\"prom-node\""), "{page}");
    assert!(
        http(
            &format!("http://127.0.0.1:{AGENT_PORT}/other"),
            "GET",
            &[],
            b""
        )
        .0 == 404
    );

    // promtool: the exposition format and Prometheus's naming rules.
    promtool_ok(&["check", "metrics"], Some(page.as_bytes()));

    // A real Prometheus scraping the agent every second.
    let prom_cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &prom_cfg,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: storwatch\n    \
             static_configs:\n      - targets: ['127.0.0.1:{AGENT_PORT}']\n"
        ),
    )
    .unwrap();
    let _prom = Proc::spawn(
        "prometheus",
        &dir.path().join("prometheus.log"),
        Command::new("prometheus")
            .arg(format!("--config.file={}", prom_cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{PROM_PORT}")),
    );
    let query = format!(
        "http://127.0.0.1:{PROM_PORT}/api/v1/query?query=storwatch_disk_util_percent%7Bhost%3D%22prom-node%22%7D"
    );
    let stored = wait_for(Duration::from_secs(40), || {
        let (status, body) = http(&query, "GET", &[], b"");
        status == 200
            && serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["data"]["result"].as_array().map(|r| !r.is_empty()))
                .unwrap_or(false)
    });
    assert!(
        stored,
        "Prometheus stored no storwatch_disk_util_percent; its log:\n{}",
        std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default()
    );
    let targets = http(
        &format!("http://127.0.0.1:{PROM_PORT}/api/v1/targets"),
        "GET",
        &[],
        b"",
    )
    .1;
    assert!(targets.contains("\"health\":\"up\""), "{targets}");
    assert!(agent.running(), "{}", agent.log_tail(20));
}
