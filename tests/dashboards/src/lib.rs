//! Tests of the Grafana dashboards (`dashboards/`) and alert rules (`alerts/`):
//! `tests/lint.rs` holds them to the documented metrics and Grafana's provisioning rules,
//! `tests/queries.rs` runs them against a real InfluxDB filled by a live simulated fleet (the
//! simulator and agent binaries, the collector), `tests/rollups.rs` on the 1 min and 1 h
//! rollups, `tests/install.rs` installs them as a site does.
//!
//! This library holds what needs more time than a test can wait for: history, made by stepping a
//! simulated host under the agent's own library (its `Sampler` and health monitors) without
//! sleeping, and stamped to end when the test wants.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

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

/// The agent's report interval, in nanoseconds.
pub const STEP_NS: i64 = 10_000_000_000;

/// The agent's health monitors as the agent binary builds them for a simulated host under
/// `root`, with its `dmsetup` stand-in run every `dmsetup_interval_s` (a fork and exec each:
/// most of what stepping an hour costs) and its `zpool` stand-in polled on the monitor's own
/// thread in real time.
pub fn monitors(root: &Path, dmsetup_interval_s: f64) -> Vec<Box<dyn Monitor>> {
    vec![
        Box::new(MdMonitor::new(Default::default(), RiskModel::default())),
        Box::new(MpathMonitor::new_inline(
            MpathConfig {
                dmsetup: root.join("bin/dmsetup"),
                dmsetup_interval_s,
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

/// `steps` seconds of a scenario (seed 7, real speed) stepped without sleeping under the agent's
/// library as host `name`, tag `site=lab`: its reports, stamped 1, 2, 3 … report intervals from
/// the epoch ([`shift`] moves them). The zpool monitor answers in real time, so a ZFS host's
/// first reports may lack its pool.
pub fn history(kind: Kind, name: &str, steps: u32, dmsetup_interval_s: f64) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(dir.path(), kind, name, 7, 1.0).unwrap();
    let cfg = Config {
        proc_root: dir.path().join("proc"),
        sys_root: dir.path().join("sys"),
        ..Config::default()
    };
    let mut sampler = Sampler::new(&cfg, monitors(dir.path(), dmsetup_interval_s));
    let mut reports: Vec<String> = Vec::new();
    sampler.sample(0.0);
    for i in 1..=steps {
        sim.step().unwrap();
        sampler.sample(f64::from(i));
        if i % 10 == 0 {
            let mut w = LineWriter::new(name, &[("site".to_string(), "lab".to_string())]);
            sampler.report(
                &mut w,
                i64::from(i / 10) * STEP_NS,
                f64::from(i),
                SinkStats::default(),
            );
            reports.push(String::from_utf8(w.take()).unwrap());
        }
    }
    reports
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
