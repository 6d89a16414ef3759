//! Every dashboard query on the 1 min and 1 h rollups, on a real InfluxDB set up by
//! `deploy/influxdb/setup.sh`: an hour of 10 s reports from a few simulated hosts (stepped under
//! the agent's library, since an hour cannot pass in a test, and stamped as the last whole clock
//! hour) goes into
//! `raw`, with the collector heartbeat `docs/collector.md` specifies for them; each continuous
//! query's own SELECT ... INTO then fills `rp_1m` and `rp_1h` over that window (the backfill
//! `setup.influxql` describes). With the Resolution variable `$rp` on `rp_1m` and on `rp_1h`:
//!
//! * every panel and annotation query reads the level `$rp` names, none errors, and each
//!   returns data on at least one host;
//! * a burst survives: "Hottest disks" still shows util_max_pct 100 on the burst and write-storm
//!   hosts at rp_1h, with the same saturated seconds as raw, while the hour's mean %util is low;
//! * the site tables mean the same at every level: seconds saturated, NIC drops and the lines the
//!   collector accepted add up to the same totals on raw, rp_1m and rp_1h;
//! * so do the worker nodes' jobs (`jobs`): jobs started and ended add up to the same totals, the
//!   most jobs running and stalled at once are the same, and the I/O stall over the hour is the
//!   same mean on raw, rp_1m and rp_1h.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Instant;

use serde_json::Value as Json;
use storwatch_dashboards_tests::{
    dashboard_queries, expand, expand_vd_device, history, panel_query, series, shift,
    DashboardQuery, Labels, STEP_NS,
};
use storwatch_sim::scenario::Kind;
use storwatch_test_support::{now_ns, workspace, Influxd};

const DB: &str = "storwatch";
const PORT: u16 = 19650;
const HOUR_NS: i64 = 3_600_000_000_000;
/// Seconds of each scenario: an hour of reports.
const STEPS: u32 = 3600;
/// The collector's heartbeat interval (`[heartbeat] interval_s`).
const HEARTBEAT_S: i64 = 30;

const HOSTS: &[Kind] = &[
    Kind::WriteStorm,
    // three 10 s bursts in the hour
    Kind::BurstSaturation,
    Kind::MdRebuild,
    Kind::MultipathFlap,
    Kind::NicSaturation,
    Kind::ZpoolResilver,
    // a MegaRAID RAID6 rebuilding, a member growing pending sectors: drive and RAID lines
    Kind::HwraidRebuild,
    // NVMe drives, one wearing out
    Kind::NvmeWearout,
    // a worker node: HTCondor jobs coming and going, stalled on a disk server's write storm
    Kind::JobsIoStarved,
];

/// The host whose agent cannot read its drives (smartctl exits 1, as without the privilege to
/// open them): the drives not read.
const DRIVES_UNREADABLE: Kind = Kind::NicSaturation;

fn host(kind: Kind) -> String {
    format!("rp-{}", kind.name())
}

/// The host's agent configuration: `dmsetup` every 5 s on the flapping host (its path stays
/// down 5–20 s), every report elsewhere; a failing smartctl on [`DRIVES_UNREADABLE`].
fn agent_toml(kind: Kind) -> String {
    let dmsetup = if kind == Kind::MultipathFlap {
        5.0
    } else {
        10.0
    };
    let drive = if kind == DRIVES_UNREADABLE {
        "[drive]\nsmartctl = \"/bin/false\"\n"
    } else {
        ""
    };
    format!("[mpath]\ndmsetup_interval_s = {dmsetup:?}\n{drive}")
}

/// The collector's heartbeat for `name` over its stamped reports, as `docs/collector.md` gives
/// it: every 30 s, the lines accepted since the last one and the seconds since the last line.
fn heartbeat(name: &str, reports: &[(i64, String)]) -> String {
    let (first, last) = (reports[0].0, reports[reports.len() - 1].0);
    let mut out = String::new();
    let mut beat = first - first.rem_euclid(HEARTBEAT_S * 1_000_000_000);
    let mut next = 0;
    let mut last_seen = 0i64;
    while beat <= last + HEARTBEAT_S * 1_000_000_000 {
        let mut lines = 0usize;
        while next < reports.len() && reports[next].0 <= beat {
            lines += reports[next].1.lines().count();
            last_seen = reports[next].0;
            next += 1;
        }
        if last_seen > 0 {
            out.push_str(&format!(
                "collector_heartbeat,host={name} last_seen_s={}i,age_s={}i,lines={lines}i {beat}\n",
                last_seen / 1_000_000_000,
                (beat - last_seen) / 1_000_000_000,
            ));
        }
        beat += HEARTBEAT_S * 1_000_000_000;
    }
    out
}

/// Grafana's expansion of a dashboard query for one host at Resolution `rp`, with the panels'
/// interval at that level's step.
fn expand_at(q: &str, rp: &str, host: &str) -> String {
    let interval = match rp {
        "rp_1m" => "1m",
        "rp_1h" => "1h",
        _ => "10s",
    };
    // three hours: the data's hour and the hour buckets it touches at rp_1h
    expand(q, "time > now() - 3h", rp, interval, host)
}

/// Per `host` tag: the values of the named columns in every row of every series.
fn by_host(influx: &Influxd, q: &str, col: &str) -> BTreeMap<(String, Labels), Vec<f64>> {
    let mut out: BTreeMap<(String, Labels), Vec<f64>> = BTreeMap::new();
    for s in series(influx, DB, q).unwrap_or_else(|e| panic!("{e}\n  {q}")) {
        let host = s.tags.get("host").cloned().unwrap_or_default();
        let vals = s
            .column(col)
            .iter()
            .filter_map(Json::as_f64)
            .collect::<Vec<_>>();
        out.entry((host, s.tags)).or_default().extend(vals);
    }
    out
}

#[test]
fn dashboards_read_the_rollups() {
    let t0 = Instant::now();
    let influx = Influxd::start_scratch(PORT);
    influx.setup_site(DB);

    // ---- an hour per host, stepped in parallel, stamped after all ran so that it ends now
    let threads: Vec<_> = HOSTS
        .iter()
        .map(|&k| std::thread::spawn(move || (k, history(k, &host(k), STEPS, &agent_toml(k)))))
        .collect();
    let histories: Vec<(Kind, Vec<String>)> =
        threads.into_iter().map(|t| t.join().unwrap()).collect();
    eprintln!("{} hosts stepped in {:?}", HOSTS.len(), t0.elapsed());
    // the last report 10 s before the last hour boundary: the hour is one whole rp_1h interval
    // and each of its minutes holds six reports, so a mean of minute or hour means is the mean
    // of the reports and the levels can be compared exactly (a partial hour at either end of a
    // range weighs as much as a whole one in a mean at rp_1h)
    let end = now_ns() / HOUR_NS * HOUR_NS - STEP_NS;
    let mut first = end;
    for (kind, reports) in &histories {
        let stamped = shift(reports, end);
        first = first.min(stamped[0].0);
        let body: String = stamped.iter().map(|(_, r)| r.as_str()).collect();
        influx.write(DB, &body);
        influx.write(DB, &heartbeat(&host(*kind), &stamped));
    }

    // ---- backfill: each continuous query's own SELECT ... INTO over the window, 1 min first
    let dry = Command::new("bash")
        .arg(workspace().join("deploy/influxdb/setup.sh"))
        .arg("--dry-run")
        .output()
        .unwrap();
    assert!(dry.status.success());
    let statements = String::from_utf8(dry.stdout).unwrap();
    // (the heartbeat after the last report falls into the next hour)
    let (from, to) = (first / HOUR_NS * HOUR_NS, (end / HOUR_NS + 2) * HOUR_NS);
    for level in ["1m", "1h"] {
        let mut n = 0;
        for st in statements.lines() {
            if !st.starts_with(&format!("CREATE CONTINUOUS QUERY \"cq_{level}_")) {
                continue;
            }
            let select = st
                .split_once(" BEGIN ")
                .and_then(|(_, s)| s.strip_suffix(" END"))
                .unwrap_or_else(|| panic!("no BEGIN ... END: {st}"));
            let select = select.replacen(
                " GROUP BY ",
                &format!(" WHERE time >= {from} AND time < {to} GROUP BY "),
                1,
            );
            series(&influx, DB, &select).unwrap_or_else(|e| panic!("backfill: {e}\n  {select}"));
            n += 1;
        }
        assert!(n >= 16, "{n} continuous queries of the {level} level");
    }
    eprintln!("written and rolled up at {:?}", t0.elapsed());

    // ---- every dashboard query at each rollup level
    // the measurements the continuous queries roll up (`INTO "storwatch"."rp_1m"."disk"`); a
    // panel of a measurement without rollups (the per-job `job`, `job_io`) reads the 10 s reports
    // at every level (the lint wants `FROM "raw".` on it), and the query test covers it on those
    let rolled: std::collections::BTreeSet<String> = statements
        .lines()
        .filter_map(|st| st.split_once(" INTO ")?.1.split(' ').next())
        .filter_map(|into| into.rsplit('.').next())
        .map(|m| m.trim_matches('"').to_string())
        .collect();
    assert!(
        rolled.contains("disk") && rolled.contains("raid_vd"),
        "{rolled:?}"
    );
    let measurement = |q: &str| -> Option<String> {
        let after = q.split(" FROM ").nth(1)?.split(' ').next()?;
        Some(after.rsplit('.').next()?.trim_matches('"').to_string())
    };
    let queries = dashboard_queries();
    let mut problems = Vec::new();
    let mut checked = 0;
    for rp in ["rp_1m", "rp_1h"] {
        for DashboardQuery {
            file,
            what,
            query: q,
            panel,
        } in &queries
        {
            if *panel && !q.contains("\"$rp\".") {
                if measurement(q).is_some_and(|m| !rolled.contains(&m)) {
                    continue;
                }
                problems.push(format!("{file}: {what}: does not read \"$rp\".\n    {q}"));
            }
            checked += 1;
            let mut has_data = false;
            for &k in HOSTS {
                let e = expand_at(&expand_vd_device(&influx, DB, q, &host(k)), rp, &host(k));
                match series(&influx, DB, &e) {
                    Ok(answer) => {
                        has_data |= answer.iter().any(|s| {
                            s.rows.iter().any(|r| {
                                r.as_array()
                                    .is_some_and(|r| r[1..].iter().any(|v| !v.is_null()))
                            })
                        })
                    }
                    Err(err) => {
                        problems.push(format!("{file}: {what} at {rp}: {err}\n    {e}"));
                        break;
                    }
                }
            }
            if !has_data {
                problems.push(format!(
                    "{file}: {what}: no data at {rp} on any host\n    {q}"
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(checked > 100, "{checked}");

    // ---- a burst survives: the hottest disk of the burst and storm hosts at rp_1h
    let hottest = panel_query(
        "site-overview.json",
        "Hottest disks (peak 1 s %util, seconds saturated)",
        "A",
    );
    let at = |rp: &str, col: &str| by_host(&influx, &expand_at(&hottest, rp, ""), col);
    let per_host = |m: &BTreeMap<(String, Labels), Vec<f64>>, h: &str, f: fn(f64, f64) -> f64| {
        m.iter()
            .filter(|((x, _), _)| x == h)
            .flat_map(|(_, v)| v.iter().copied())
            .reduce(f)
            .unwrap_or(f64::NAN)
    };
    let (util_max, util_max_raw) = (at("rp_1h", "util_max_pct"), at("raw", "util_max_pct"));
    let (sat, sat_raw, sat_1m) = (
        at("rp_1h", "saturated_s"),
        at("raw", "saturated_s"),
        at("rp_1m", "saturated_s"),
    );
    let util_mean = at("rp_1h", "util_pct");
    for kind in [Kind::BurstSaturation, Kind::WriteStorm] {
        let h = host(kind);
        let peak = per_host(&util_max, &h, f64::max);
        assert!(
            peak >= 100.0 && peak == per_host(&util_max_raw, &h, f64::max),
            "{h}: util_max_pct at rp_1h {peak}, raw {}",
            per_host(&util_max_raw, &h, f64::max)
        );
        let s = per_host(&sat, &h, |a, b| a + b);
        assert!(s >= 30.0, "{h}: saturated_s at rp_1h {s}");
        assert_eq!(s, per_host(&sat_raw, &h, |a, b| a + b), "{h}: saturated_s");
        assert_eq!(s, per_host(&sat_1m, &h, |a, b| a + b), "{h}: saturated_s");
    }
    // ... which the hour's mean hides: the burst disk's mean %util stays low
    let burst = host(Kind::BurstSaturation);
    let (key, _) = util_max
        .iter()
        .find(|((h, _), v)| *h == burst && v.iter().any(|x| *x >= 100.0))
        .unwrap();
    let mean = util_mean[key].iter().copied().fold(f64::NAN, f64::max);
    assert!(mean < 30.0, "{key:?}: hourly mean %util {mean}");

    // ---- the same totals at every level
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0);
    for (title, col) in [
        ("NICs by % of link", "rx_drops"),
        ("Agents by silence (collector heartbeat)", "lines"),
    ] {
        let q = panel_query("site-overview.json", title, "A");
        let raw = by_host(&influx, &expand_at(&q, "raw", ""), col);
        let mut nonzero = false;
        for rp in ["rp_1m", "rp_1h"] {
            let rolled = by_host(&influx, &expand_at(&q, rp, ""), col);
            assert_eq!(
                raw.keys().collect::<Vec<_>>(),
                rolled.keys().collect::<Vec<_>>(),
                "{title}"
            );
            for (k, v) in &raw {
                let (a, b) = (v.iter().sum::<f64>(), rolled[k].iter().sum::<f64>());
                nonzero |= a > 0.0;
                assert!(close(a, b), "{title}: {col} of {k:?}: raw {a}, {rp} {b}");
            }
        }
        assert!(nonzero, "{title}: {col} is 0 everywhere: {raw:?}");
    }

    // ---- the worker nodes' jobs mean the same at every level
    let stall_hosts = |rp: &str, col: &str| {
        let q = panel_query(
            "site-overview.json",
            "Worker nodes by jobs' I/O stall (worst first)",
            "A",
        );
        let mut out = BTreeMap::new();
        for ((h, _), v) in by_host(&influx, &expand_at(&q, rp, ""), col) {
            out.insert(h, v);
        }
        out
    };
    let workers = [host(Kind::JobsIoStarved)];
    for (col, want) in [
        ("jobs", "the most jobs running at once"),
        ("stalled", "the most jobs stalled at once"),
        ("io_stall_pct", "the mean I/O stall"),
        ("cpu_efficiency_pct", "the mean CPU efficiency"),
    ] {
        let raw = stall_hosts("raw", col);
        assert_eq!(
            raw.keys().collect::<Vec<_>>(),
            workers.iter().collect::<Vec<_>>(),
            "{col}: the worker nodes"
        );
        for rp in ["rp_1m", "rp_1h"] {
            let rolled = stall_hosts(rp, col);
            for (h, v) in &raw {
                let (a, b) = (v[0], rolled.get(h).map_or(f64::NAN, |r| r[0]));
                eprintln!("{h}: {want} ({col}) raw {a}, {rp} {b}");
                assert!(close(a, b), "{h}: {want} ({col}): raw {a}, {rp} {b}");
            }
        }
    }
    let starved = host(Kind::JobsIoStarved);
    assert!(
        stall_hosts("rp_1h", "stalled")[&starved][0] >= 1.0,
        "{starved}: no job stalled at rp_1h"
    );
    let running = panel_query("worker-node.json", "Jobs running, started and ended", "A");
    for h in &workers {
        let totals = |rp: &str| {
            let q = expand_at(&running, rp, h);
            let at = |col: &str, f: fn(f64, f64) -> f64| {
                by_host(&influx, &q, col)
                    .into_values()
                    .flatten()
                    .reduce(f)
                    .unwrap_or(f64::NAN)
            };
            [
                at("running", f64::max),
                at("started", |a, b| a + b),
                at("ended", |a, b| a + b),
            ]
        };
        let raw = totals("raw");
        assert!(raw[0] > 0.0 && raw[1] > 0.0 && raw[2] > 0.0, "{h}: {raw:?}");
        for rp in ["rp_1m", "rp_1h"] {
            let rolled = totals(rp);
            eprintln!("{h}: running (max), started, ended: raw {raw:?}, {rp} {rolled:?}");
            assert_eq!(raw, rolled, "{h}: running (max), started, ended at {rp}");
        }
    }
    eprintln!("done in {:?}", t0.elapsed());
}
