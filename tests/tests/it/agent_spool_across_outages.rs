//! The agent's HTTP output and spool against the real collector and influxd: the collector is
//! killed (-9) for a while, the agent is killed (-9) while its spool holds the undelivered
//! reports and started again on the same spool, then the collector comes back. Every report the
//! agent spooled arrives: the `agent` measurement of the node has no hole except the moment the
//! agent itself was dead.
#![allow(clippy::unwrap_used)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use storwatch_test_support::*;

const TOKEN: &str = "spool-agents-token-0123456789";

fn start_agent(
    dir: &std::path::Path,
    proc_root: &std::path::Path,
    sys_root: &std::path::Path,
) -> Child {
    let cfg = dir.join("agent.toml");
    std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
    std::fs::write(
        &cfg,
        format!(
            "[http]\nspool_dir = \"{}\"\ntoken_file = \"{}\"\nbackoff_min_s = 0.1\nbackoff_max_s = 0.5\ntimeout_s = 2.0\n",
            dir.join("spool").display(),
            dir.join("token").display()
        ),
    )
    .unwrap();
    Command::new(binary("storwatch-agent", "storwatch-agent"))
        .arg("--config")
        .arg(&cfg)
        .arg("run")
        .arg("--proc-root")
        .arg(proc_root)
        .arg("--sys-root")
        .arg(sys_root)
        .args([
            "--sample-interval",
            "100ms",
            "--report-interval",
            "500ms",
            "--host",
            "spool-node",
        ])
        .args(["--output", "http://127.0.0.1:18480/write?db=spool"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn report_times(influx: &Influxd) -> Vec<f64> {
    let v = influx.query(
        "spool",
        "SELECT samples FROM agent WHERE host = 'spool-node'",
    );
    v["results"][0]["series"][0]["values"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .filter_map(|r| r[0].as_str().map(str::to_string))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .iter()
        .filter_map(|t| rfc3339_seconds(t))
        .collect()
}

/// Seconds (with fraction) within the day of an RFC 3339 time from InfluxDB: enough to measure
/// gaps of a test that runs for seconds.
fn rfc3339_seconds(t: &str) -> Option<f64> {
    let time = t.split('T').nth(1)?.trim_end_matches('Z');
    let mut parts = time.split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}

#[test]
fn spooled_reports_survive_a_collector_outage_and_an_agent_restart() {
    let dir = tempfile::tempdir().unwrap();
    let influx = Influxd::start(&dir.path().join("influx"), 18470);
    influx.create_db("spool");
    let cdir = dir.path().join("collector");
    std::fs::create_dir_all(&cdir).unwrap();
    let mut collector = Collector::start(&cdir, 18480, &influx.url(), "spool", TOKEN);
    let (proc_root, sys_root) = fixture_roots(&dir.path().join("root"));
    let adir = dir.path().join("agent");
    std::fs::create_dir_all(&adir).unwrap();

    let mut agent = start_agent(&adir, &proc_root, &sys_root);
    std::thread::sleep(Duration::from_secs(2));
    // Collector gone: the agent keeps sampling into its spool.
    collector.stop();
    std::thread::sleep(Duration::from_secs(3));
    // The agent dies too, with undelivered reports in the spool, and comes back on it.
    let _ = agent.kill();
    let _ = agent.wait();
    let mut agent = start_agent(&adir, &proc_root, &sys_root);
    std::thread::sleep(Duration::from_secs(1));
    collector.start_again();
    std::thread::sleep(Duration::from_secs(3));
    let ok = wait_for(Duration::from_secs(30), || {
        let t = report_times(&influx);
        t.len() >= 14 && t.windows(2).filter(|w| w[1] - w[0] > 1.2).count() <= 1
    });
    let _ = Command::new("kill").arg(agent.id().to_string()).status();
    let _ = agent.wait();
    let times = report_times(&influx);
    let gaps: Vec<f64> = times
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|g| *g > 1.2)
        .collect();
    assert!(ok, "{} reports, gaps above 1.2 s: {gaps:?}", times.len());
    // the only hole is the agent's own restart
    assert!(gaps.iter().all(|g| *g < 3.0), "{gaps:?}");
}
