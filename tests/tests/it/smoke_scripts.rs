//! Smoke runs of the shipped benches and scripts that no other test runs, each for a few seconds
//! with the real binaries: a bench or a script nobody runs breaks unnoticed. Each asserts what the
//! tool is for (the figures it prints, the verdicts it gives), not only that it started.
//!
//! `scripts/quickstart.sh` runs here too (start --prometheus, status, stop of a whole fleet, with
//! its Prometheus checked over its HTTP API: targets, rules, every PromQL dashboard query).
//!
//! Run elsewhere: `storwatch-collector-bench` (collector/tests/it/bench_smoke.rs), the criterion
//! benches and the queue store bench (`test = true` in their crates' Cargo.toml: `cargo test`
//! runs each once), `scripts/check-packages.sh` and `scripts/build-rpm.sh` (tests/it/packages.rs;
//! the deb maintainer scripts only where cargo-deb is installed), `scripts/influxd-test.sh`
//! (every test with an influxd; its owner watch here), the InfluxDB setup scripts,
//! `deploy/grafana/install.sh` and the v2/v3 rollup generators and their tests (collector/tests/it/influx_setup.rs, tests/dashboards).
//!
//! `bench/jobs-cost.sh` (100 jobs beside none) runs with 5 jobs for a 3 s window,
//! `bench/jobs-walk-cost.sh` (the collector on a disk server) with 10 services.
//!
//! `bench/run-agent-bench.sh` runs on the shared bench harness (`../shared/bench` beside the
//! checkout, as CI has it; skipped, saying so, where it is not there) for one 11 s window, and
//! `bench/side-by-side.sh` on it for one 8 s window.
//!
//! Not run by any test: `deploy/influxdb/v2/check-flux.sh` (it fetches Flux with Go
//! and builds libflux, minutes on a fresh machine), `deploy/compose/Dockerfile` (needs a
//! container engine) and `scripts/test.sh` itself.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use storwatch_dashboards_tests::promql_queries::{expand_promql, promql_dashboard_queries};
use storwatch_test_support::{binary, http, promtool_ok, scratch, urlencode, workspace};

/// `scripts/influxd-test.sh start` with `STORWATCH_INFLUXD_OWNER`: the server answers while its
/// owner lives and is stopped once the owner is gone (a test process killed by an interrupted run,
/// which never got to stop it); without an owner it runs on until `stop`.
#[test]
fn an_influxd_whose_owner_is_gone_is_stopped() {
    let dir = scratch();
    let port = 18930u16;
    // a server left by an earlier run would answer in place of this one
    assert!(
        std::net::TcpListener::bind(("127.0.0.1", port)).is_ok(),
        "127.0.0.1:{port} is in use (a stale influxd?)"
    );
    let script = workspace().join("scripts/influxd-test.sh");
    let owned = dir.path().join("owned");
    let free = dir.path().join("free");
    // Whatever fails below, the owner and both servers end with the test.
    struct Guard<'a>(std::process::Child, &'a Path, [&'a Path; 2]);
    impl Drop for Guard<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
            for data in self.2 {
                let _ = Command::new("bash")
                    .arg(self.1)
                    .arg("stop")
                    .arg(data)
                    .output();
            }
        }
    }
    let mut guard = Guard(
        Command::new("sleep")
            .arg("600")
            .spawn()
            .expect("spawn sleep"),
        &script,
        [&owned, &free],
    );
    let start = |data: &Path, owner: Option<u32>| {
        let mut cmd = Command::new("bash");
        cmd.arg(&script)
            .arg("start")
            .arg(data)
            .arg(port.to_string());
        match owner {
            Some(pid) => cmd.env("STORWATCH_INFLUXD_OWNER", pid.to_string()),
            None => cmd.env_remove("STORWATCH_INFLUXD_OWNER"),
        };
        let out = cmd.output().expect("run influxd-test.sh");
        assert!(out.status.success(), "{}", text(&out));
    };
    let ping = || http(&format!("http://127.0.0.1:{port}/ping"), "GET", &[], b"").0;
    let pid_of = |data: &Path| -> i32 {
        std::fs::read_to_string(data.join("influxd.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    // running (a zombie not yet reaped counts as ended)
    let alive = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| !r.trim_start().starts_with('Z'))
        })
    };
    start(&owned, Some(guard.0.id()));
    assert_eq!(ping(), 204);
    let server = pid_of(&owned);
    std::thread::sleep(Duration::from_secs(2));
    assert!(alive(server), "stopped while its owner lives");
    guard.0.kill().unwrap();
    guard.0.wait().unwrap();
    let t0 = Instant::now();
    while alive(server) && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !alive(server),
        "influxd {server} still running after its owner ended"
    );
    // without an owner: runs until stopped
    start(&free, None);
    let server = pid_of(&free);
    std::thread::sleep(Duration::from_secs(2));
    assert!(alive(server));
    let out = Command::new("bash")
        .arg(&script)
        .arg("stop")
        .arg(&free)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!alive(server));
}

/// `bench/read-walk.c`: built with the system's C compiler and run on a file of its own, it
/// prints the four costs of a read, each a positive number of microseconds.
#[test]
fn read_walk_bench_builds_and_prints_four_costs() {
    let dir = scratch();
    let exe = dir.path().join("read-walk");
    let cc = Command::new("cc")
        .args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(workspace().join("bench/read-walk.c"))
        .output()
        .expect("run cc");
    assert!(
        cc.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let file = dir.path().join("value");
    std::fs::write(&file, "mq-deadline\n").unwrap();
    let out = Command::new(&exe).arg(&file).arg("2000").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let costs: Vec<f64> = text
        .split(" us")
        .filter_map(|part| part.rsplit(' ').next()?.parse().ok())
        .collect();
    assert_eq!(costs.len(), 4, "{text}");
    assert!(costs.iter().all(|c| *c > 0.0), "{text}");
    // A file that is not there: a clear failure, not a figure.
    let gone = Command::new(&exe)
        .arg(dir.path().join("missing"))
        .arg("10")
        .output()
        .unwrap();
    assert_eq!(gone.status.code(), Some(1), "{gone:?}");
}

/// Whether the shared bench harness (`../shared/bench`) is beside the checkout, as CI has it;
/// where it is not, the test is skipped, saying so (or fails, unless skips are allowed).
fn bench_harness_here() -> bool {
    let harness = workspace().join("../shared/bench");
    if harness.join("run.sh").is_file() {
        return true;
    }
    storwatch_test_support::skip_or_fail(
        "bench-harness",
        &format!("no bench harness at {}", harness.display()),
    );
    false
}

/// `bench/run-agent-bench.sh` on the shared harness's synthetic 200-disk host, with the test
/// build of the agent (`STORWATCH_AGENT_BIN`, so no release build) for one round of 11 s: the
/// harness writes a result row for the agent with the collections it measured, their CPU and
/// the lines each report wrote. With `--drives`, the agent that reads its disks through the fake
/// smartctl and storcli64 every 60 s / 10 s has a row too, and its children's CPU is counted.
#[test]
fn agent_bench_script_measures_the_agent_on_the_bench_host() {
    if !bench_harness_here() {
        return;
    }
    let agent = binary("storwatch-agent", "storwatch-agent");
    let dir = scratch();
    let work = dir.path().join("work");
    let out = Command::new("bash")
        .arg(workspace().join("bench/run-agent-bench.sh"))
        .args(["--duration", "11", "--warmup", "1", "--rounds", "1"])
        .args([
            "--drives",
            "--only",
            "storwatch,storwatch-drives-fast",
            "--root",
        ])
        .arg(dir.path().join("host"))
        .env("STORWATCH_AGENT_BIN", &agent)
        .env("STORWATCH_BENCH_DIR", &work)
        .output()
        .expect("run bench/run-agent-bench.sh");
    assert!(out.status.success(), "{}", text(&out));
    let results = std::fs::read_to_string(work.join("out/results.jsonl")).unwrap();
    let row_of = |name: &str| -> serde_json::Value {
        results
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no {name} row in results.jsonl:\n{results}"))
    };
    let num = |row: &serde_json::Value, k: &str| {
        row[k].as_f64().unwrap_or_else(|| panic!("{k} in {row}"))
    };
    let row = row_of("storwatch");
    assert!(num(&row, "collections") >= 10.0, "{row}");
    assert!(num(&row, "sched_ms_per_coll") > 0.0, "{row}");
    // one 10 s report of a 200-disk host: hundreds of lines, spread over the window's collections
    assert!(num(&row, "lines_per_coll") > 10.0, "{row}");
    // 200 disks read once a minute through a shell stand-in: ~7 children a second, whose CPU
    // the agent's live process tree never shows
    let drives = row_of("storwatch-drives-fast");
    let children = num(&drives, "children_ms_per_coll");
    assert!(children > 0.0, "{drives}");
    let total = num(&drives, "total_ms_per_coll");
    let sched = num(&drives, "sched_ms_per_coll");
    assert!((total - sched - children).abs() < 0.01, "{drives}");
}

/// `bench/side-by-side.sh` on the shared harness's 200-disk host with the test build, the core
/// agent and the RAID monitor's agent beside the floor for one 8 s window: a row each, with
/// its threads' run time, its ratio to the floor (the floor's own 1.00) and its RSS; the
/// agents' rows name their sampling thread. An agent it does not know is refused.
#[test]
fn side_by_side_script_measures_the_floor_and_the_agents_at_once() {
    if !bench_harness_here() {
        return;
    }
    let agent = binary("storwatch-agent", "storwatch-agent");
    let dir = scratch();
    let run = |agents: &str| {
        Command::new("bash")
            .arg(workspace().join("bench/side-by-side.sh"))
            .args(["--warmup", "5", "--duration", "8", "--agents", agents])
            .env("STORWATCH_AGENT_BIN", &agent)
            .env("TMPDIR", dir.path())
            .output()
            .expect("run bench/side-by-side.sh")
    };
    let out = run("core,raid");
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let row = |name: &str| -> Vec<String> {
        let line = t
            .lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no {name} row:\n{t}"));
        line.split('|').map(|c| c.trim().to_string()).collect()
    };
    // | name | threads | of which | children | total | × floor | RSS MiB |
    let num = |r: &[String], i: usize| -> f64 { r[i].parse().unwrap_or_else(|_| panic!("{r:?}")) };
    let floor = row("floor-full");
    assert!(num(&floor, 2) > 0.0, "{floor:?}");
    assert_eq!(floor[6], "1.00", "{floor:?}");
    for name in ["core", "raid"] {
        let r = row(name);
        assert!(num(&r, 2) > 0.0 && num(&r, 5) > 0.0, "{r:?}");
        assert!(num(&r, 6) > 0.0 && num(&r, 7) > 1.0, "{r:?}");
        assert!(
            (num(&r, 5) - num(&r, 2) - num(&r, 4)).abs() < 0.002,
            "{r:?}"
        );
        assert!(r[3].contains("storwatch-agent"), "{r:?}");
    }
    let refused = run("nosuch");
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(text(&refused).contains("unknown agent nosuch"));
}

/// `bench/jobs-cost.sh` with the test build, 5 jobs, 1 s reports, one round of 3 s: a CPU row for
/// the agent without jobs, one for the agent with them and one for the read floor (which kept
/// the 5 jobs' 7 files open), the round's cost against the floor, and the jobs agent's job lines.
#[test]
fn jobs_cost_script_measures_both_agents() {
    let agent = binary("storwatch-agent", "storwatch-agent");
    let out = Command::new("bash")
        .arg(workspace().join("bench/jobs-cost.sh"))
        .args([
            "--duration",
            "3",
            "--jobs",
            "5",
            "--rounds",
            "1",
            "--warmup",
            "3",
        ])
        .args(["--report", "1"])
        .env("STORWATCH_AGENT_BIN", &agent)
        .output()
        .expect("run bench/jobs-cost.sh");
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    for tree in ["nojobs", "jobs", "floor"] {
        let row = t
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(tree))
            .unwrap_or_else(|| panic!("no {tree} row:\n{t}"));
        let ms: f64 = row.split_whitespace().nth(2).unwrap().parse().unwrap();
        assert!(ms > 0.0, "{row}");
    }
    let jobs_lines = t
        .lines()
        .find_map(|l| l.strip_prefix("all rounds: "))
        .and_then(|l| l.split(',').nth(1))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or_else(|| panic!("no line counts:\n{t}"));
    assert!(jobs_lines >= 5, "{t}");
    assert!(t.contains("jobs-floor: 35 files kept open"), "{t}");
    let round = t
        .lines()
        .find_map(|l| l.strip_prefix("round 1: the jobs cost "))
        .unwrap_or_else(|| panic!("no cost against the floor:\n{t}"));
    assert!(
        round.contains("; read floor ") && round.contains("; above the floor "),
        "{round}"
    );
}

/// `bench/jobs-walk-cost.sh` with the test build, 10 services, 1 s reports, one round of 3 s: the
/// agent with the jobs collector on and off, both measured, and no `jobs` line on a disk server.
#[test]
fn jobs_walk_cost_script_measures_the_collector_on_a_disk_server() {
    let agent = binary("storwatch-agent", "storwatch-agent");
    let out = Command::new("bash")
        .arg(workspace().join("bench/jobs-walk-cost.sh"))
        .args(["--duration", "3", "--rounds", "1", "--warmup", "3"])
        .args(["--report", "1", "--services", "10"])
        .env("STORWATCH_AGENT_BIN", &agent)
        .env_remove("STORWATCH_AGENT_BIN_BEFORE")
        .output()
        .expect("run bench/jobs-walk-cost.sh");
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let round = t
        .lines()
        .find_map(|l| l.strip_prefix("round 1: jobs off "))
        .unwrap_or_else(|| panic!("no round line:\n{t}"));
    let off: f64 = round.split_whitespace().next().unwrap().parse().unwrap();
    let on: f64 = round
        .split("; on ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no figure with the collector on: {round}"));
    assert!(off > 0.0 && on > 0.0, "{round}");
    assert!(
        t.contains("jobs lines written (a disk server writes none): 0"),
        "{t}"
    );
}

/// `scripts/compare-agents.py`: the same agent as "old" and "new" on five simulator scenarios
/// (without the shared bench harness, 2 s reports): every host gets a verdict, and the two runs
/// of one binary read the same lines.
#[test]
fn compare_agents_script_gives_every_host_a_verdict() {
    let agent = binary("storwatch-agent", "storwatch-agent");
    let sim = binary("storwatch-sim", "storwatch-sim");
    let scenarios = [
        "healthy",
        "multipath-flap",
        "md-degraded",
        "zpool-resilver",
        "worker-staging",
    ];
    let dir = scratch();
    let out = Command::new("python3")
        .arg(workspace().join("scripts/compare-agents.py"))
        .arg(&agent)
        .arg(&agent)
        .arg("--sim")
        .arg(&sim)
        .args(["--harness", "", "--seconds", "7", "--report-interval", "2"])
        .args(["--scenarios", &scenarios.join(",")])
        .env("TMPDIR", dir.path())
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "compare-agents.py failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.starts_with("5 hosts, two agents each"), "{stdout}");
    for s in scenarios {
        let verdict = stdout
            .lines()
            .find(|l| l.starts_with(&format!("sim-{s}-01: ")))
            .unwrap_or_else(|| panic!("no verdict for {s}:\n{stdout}"));
        assert!(verdict.contains(": identical, "), "{verdict}");
        // At least two reports compared after the first (partial) one.
        let reports: usize = verdict
            .split(", ")
            .nth(1)
            .and_then(|r| r.strip_suffix(" reports"))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(reports >= 2, "{verdict}");
    }
    // Its scratch directory is removed when the outputs agree.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// `scripts/quickstart.sh` on the workspace's binaries (`QUICKSTART_BIN`) in a scratch state
/// directory, one host per scenario.
struct Quickstart {
    state: PathBuf,
    bin: PathBuf,
}

impl Quickstart {
    fn run(&self, args: &[&str]) -> Output {
        Command::new("bash")
            .arg(workspace().join("scripts/quickstart.sh"))
            .args(args)
            .env("QUICKSTART_DIR", &self.state)
            .env("QUICKSTART_BIN", &self.bin)
            .output()
            .expect("run scripts/quickstart.sh")
    }
}

impl Drop for Quickstart {
    /// Whatever the test's fate, nothing it started keeps running.
    fn drop(&mut self) {
        let _ = self.run(&["stop"]);
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The `rows` and `hosts` columns of measurement `m` in the status table.
fn status_row(status: &str, m: &str) -> Option<(u64, u64)> {
    let line = status
        .lines()
        .find(|l| l.split_whitespace().next() == Some(m))?;
    let cols: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|c| c.parse().ok())
        .collect();
    Some((*cols.first()?, *cols.get(1)?))
}

/// The quickstart's Prometheus (`start --prometheus`), at the port `start` wrote in ports.env.
struct Prometheus {
    url: String,
}

impl Prometheus {
    fn of(state: &Path) -> Prometheus {
        let env = std::fs::read_to_string(state.join("ports.env")).unwrap();
        let port = env
            .lines()
            .find_map(|l| l.strip_prefix("PROMETHEUS_PORT="))
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| panic!("no PROMETHEUS_PORT in ports.env:\n{env}"));
        Prometheus {
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// GET `path?query`: the `data` of a successful answer, or Prometheus's error.
    fn get(&self, path: &str, query: &[(&str, &str)]) -> Result<Json, String> {
        let q: Vec<String> = query
            .iter()
            .map(|(k, v)| format!("{}={}", urlencode(k), urlencode(v)))
            .collect();
        let (status, body) = http(
            &format!("{}{path}?{}", self.url, q.join("&")),
            "GET",
            &[],
            b"",
        );
        let v: Json = serde_json::from_str(&body)
            .map_err(|e| format!("{path}: HTTP {status}, not JSON ({e}): {body}"))?;
        if status != 200 || v["status"] != "success" {
            return Err(format!(
                "{path}: HTTP {status}: {} {}",
                v["errorType"], v["error"]
            ));
        }
        Ok(v["data"].clone())
    }

    /// An instant query's vector: each sample's labels and value.
    fn vector(&self, promql: &str) -> Vec<(Json, f64)> {
        let data = self
            .get("/api/v1/query", &[("query", promql)])
            .unwrap_or_else(|e| panic!("{promql}: {e}"));
        data["result"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| {
                let v = s["value"][1].as_str().and_then(|v| v.parse().ok());
                (s["metric"].clone(), v.unwrap_or(f64::NAN))
            })
            .collect()
    }
}

/// The names of the rules (alerting and recording) of a Prometheus rule file.
fn rule_names(file: &str) -> BTreeSet<String> {
    file.lines()
        .filter_map(|l| {
            let l = l.trim_start().strip_prefix("- ")?;
            l.strip_prefix("alert: ")
                .or_else(|| l.strip_prefix("record: "))
        })
        .map(|n| n.trim().trim_matches(['\'', '"']).to_string())
        .collect()
}

/// A dashboard query as Grafana sends it to Prometheus: a template variable's
/// `label_values(selector, label)` as a label-values request, a table's as an instant query, a
/// panel's as a range query over the last 15 minutes at `step`. Whether it returned data.
fn grafana_asks(prom: &Prometheus, query: &str, instant: bool, step: &str) -> Result<bool, String> {
    if let Some(args) = query
        .trim()
        .strip_prefix("label_values(")
        .and_then(|a| a.strip_suffix(')'))
    {
        let (selector, label) = match args.rsplit_once(',') {
            Some((sel, label)) => (Some(sel.trim()), label.trim()),
            None => (None, args.trim()),
        };
        let mut q = Vec::new();
        if let Some(sel) = selector {
            q.push(("match[]", sel));
        }
        let data = prom.get(&format!("/api/v1/label/{label}/values"), &q)?;
        return Ok(data.as_array().is_some_and(|a| !a.is_empty()));
    }
    let data = if instant {
        prom.get("/api/v1/query", &[("query", query)])?
    } else {
        let end = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let (start, end) = ((end - 900).to_string(), end.to_string());
        prom.get(
            "/api/v1/query_range",
            &[
                ("query", query),
                ("start", &start),
                ("end", &end),
                ("step", step),
            ],
        )?
    };
    Ok(data["result"].as_array().is_some_and(|r| !r.is_empty()))
}

/// `scripts/quickstart.sh start --prometheus`, `status` and `stop`: InfluxDB, the collector, the
/// simulator, an agent per simulated host and one on this host, and Prometheus start; every
/// host's `disk` lines reach InfluxDB through the collector; Prometheus scrapes every agent, its
/// generated configuration passes `promtool check config`, it has loaded every rule of
/// alerts/prometheus/storwatch-rules.yml and evaluates each without error, and it answers every
/// query of the PromQL dashboards; `stop` leaves nothing of the state directory running.
#[test]
fn quickstart_starts_a_reporting_fleet_and_stops_it() {
    let bins = scratch();
    for (package, name) in [
        ("storwatch-agent", "storwatch-agent"),
        ("storwatch-collector", "storwatch-collector"),
        ("storwatch-sim", "storwatch-sim"),
    ] {
        std::os::unix::fs::symlink(binary(package, name), bins.path().join(name)).unwrap();
    }
    let sim = bins.path().join("storwatch-sim");
    let list = Command::new(&sim).arg("--list").output().unwrap();
    let scenarios = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count() as u64;
    assert!(scenarios > 0, "{list:?}");
    let state = scratch();
    let qs = Quickstart {
        state: state.path().join("qs"),
        bin: bins.path().to_path_buf(),
    };
    let start = qs.run(&["start", "--hosts-per-scenario", "1", "--prometheus"]);
    let started = Instant::now();
    let out = text(&start);
    assert!(start.status.success(), "start failed:\n{out}");
    assert!(
        out.contains(&format!("{} agents report every 10 s", scenarios + 1)),
        "{out}"
    );
    assert!(out.contains("Prometheus      http://127.0.0.1:"), "{out}");
    assert!(
        !out.contains("without alerting rules"),
        "the rule file is not loaded:\n{out}"
    );
    // The MegaRAID disk servers (hwraid-*) have a storcli64 stand-in as well as a smartctl.
    let controllers = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter(|l| l.starts_with("hwraid-"))
        .count() as u64;
    // The batch workers carry a cgroup v2 tree of jobs: their agents send a `jobs` line.
    let batch_workers = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter(|l| {
            ["worker-htcondor ", "worker-slurm ", "jobs-io-starved "]
                .iter()
                .any(|w| l.starts_with(w))
        })
        .count() as u64;
    assert_eq!(batch_workers, 3, "{list:?}");
    // Every host's first report: 10-20 s after start. Each simulated host's agent reads its
    // first disk through the smartctl stand-in at once, so its first report has a `drive` line.
    let t = Instant::now();
    let status = loop {
        let st = qs.run(&["status"]);
        let out = text(&st);
        let hosts = |m: &str| status_row(&out, m).map_or(0, |(_, hosts)| hosts);
        if hosts("disk") == scenarios + 1
            && hosts("drive") >= scenarios
            && hosts("raid_vd") == controllers
            && hosts("raid_controller") == controllers
            && hosts("jobs") == batch_workers
        {
            break out;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "not every host's disk, drive, raid and jobs lines in InfluxDB after 60 s:\n{out}"
        );
        std::thread::sleep(Duration::from_secs(2));
    };
    assert!(status.contains(" running, 0 not"), "{status}");
    for m in ["net", "cpu", "agent"] {
        assert!(
            status_row(&status, m).is_some_and(|(rows, hosts)| rows > 0 && hosts == scenarios + 1),
            "{m}: {status}"
        );
    }
    check_prometheus(&qs.state, &list_hosts(&list.stdout), started);
    let stop = qs.run(&["stop"]);
    let out = text(&stop);
    assert!(stop.status.success(), "stop failed:\n{out}");
    assert!(out.contains("nothing of"), "{out}");
    let after = qs.run(&["status"]);
    assert_eq!(after.status.code(), Some(3), "{}", text(&after));
    assert!(!any_process_under(&qs.state), "processes left after stop");
}

/// The simulated hosts of a one-host-per-scenario fleet (`storwatch-sim --list` output).
fn list_hosts(list: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(list)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(|s| format!("sim-{s}-01"))
        .collect()
}

/// The quickstart's Prometheus, `started` when `start` returned: every agent scraped, the
/// configuration valid, the rules loaded and healthy, every dashboard query answered.
fn check_prometheus(state: &Path, sim_hosts: &[String], started: Instant) {
    let prom = Prometheus::of(state);
    let agents = sim_hosts.len() + 1;
    // every agent's target up and every host's series stored (the agent's own line): a target
    // is up from its first scrape, its series come with the first scrape after the agent's first
    // report, and Prometheus spreads the targets' scrapes over the 10 s interval
    let t = Instant::now();
    let hosts = loop {
        let up = prom.vector(r#"up{job="storwatch"}"#);
        let hosts: BTreeSet<String> = prom
            .vector("count by (host) (storwatch_agent_uptime_seconds)")
            .into_iter()
            .filter_map(|(m, _)| m["host"].as_str().map(str::to_string))
            .collect();
        if up.len() == agents && up.iter().all(|(_, v)| *v == 1.0) && hosts.len() == agents {
            break hosts;
        }
        assert!(
            t.elapsed() < Duration::from_secs(25),
            "not every agent's target up and its series stored 25 s after the InfluxDB checks \
             ({agents} agents): targets {up:?}, hosts {hosts:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    for h in sim_hosts {
        assert!(hosts.contains(h), "no series of {h}: {hosts:?}");
    }
    let sites: Vec<(Json, f64)> = prom.vector("count by (site) (storwatch_agent_uptime_seconds)");
    assert_eq!(sites.len(), 1, "{sites:?}");
    assert_eq!(sites[0].0["site"], "quickstart", "{sites:?}");

    // the configuration start wrote, as Prometheus's own checker sees it
    let config = state.join("prometheus/prometheus.yml");
    let check = promtool_ok(
        &[
            OsStr::new("check"),
            OsStr::new("config"),
            config.as_os_str(),
        ],
        None,
    );
    assert!(check.contains("SUCCESS"), "{check}");

    // every query of every PromQL dashboard, as Grafana would ask it (host: the storm's disk
    // server where a dashboard selects one host, else every host)
    let queries = promql_dashboard_queries();
    assert!(!queries.is_empty(), "no query in dashboards/prometheus/");
    let mut with_data = 0;
    let mut failed = Vec::new();
    for q in &queries {
        let host = match q.file.as_str() {
            "disk-server.json" => "sim-write-storm-01",
            "worker-node.json" => "sim-jobs-io-starved-01",
            _ => ".*",
        };
        match grafana_asks(
            &prom,
            &expand_promql(&q.query, host, "10s"),
            q.instant,
            "10",
        ) {
            Ok(true) => with_data += 1,
            Ok(false) => {}
            Err(e) => failed.push(format!("{} {}: {e}\n  {}", q.file, q.what, q.query)),
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    eprintln!(
        "quickstart Prometheus: {} PromQL dashboard queries answered, {with_data} with data",
        queries.len()
    );
    assert!(with_data > 0, "no dashboard query returned data");

    // the rules: every rule of the file loaded and none in error. Prometheus evaluates a group
    // first at an offset of up to its interval (1 min) after start: a rule it has evaluated must
    // be healthy, and one whose group has not run yet has its expression asked of the same
    // Prometheus now (what the evaluation runs), which must answer without error.
    let file = std::fs::read_to_string(workspace().join("alerts/prometheus/storwatch-rules.yml"))
        .expect("alerts/prometheus/storwatch-rules.yml");
    let want = rule_names(&file);
    assert!(
        !want.is_empty(),
        "no rule in alerts/prometheus/storwatch-rules.yml"
    );
    let data = prom.get("/api/v1/rules", &[]).unwrap();
    let rules: Vec<&Json> = data["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .collect();
    let loaded: BTreeSet<String> = rules
        .iter()
        .filter_map(|r| r["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(loaded, want, "the rules Prometheus loaded");
    let mut evaluated = 0;
    let mut errors = Vec::new();
    for r in &rules {
        match r["health"].as_str() {
            Some("ok") => evaluated += 1,
            Some("unknown") => {
                let q = r["query"].as_str().unwrap_or_default();
                if let Err(e) = prom.get("/api/v1/query", &[("query", q)]) {
                    errors.push(format!("{}: {e}", r["name"]));
                }
            }
            _ => errors.push(format!("{}: {} {}", r["name"], r["health"], r["lastError"])),
        }
    }
    assert!(errors.is_empty(), "rules in error:\n{}", errors.join("\n"));
    eprintln!(
        "quickstart Prometheus: {} rules loaded, {evaluated} evaluated by Prometheus (health ok) \
         {:.0} s after start, the others' expressions answered",
        rules.len(),
        started.elapsed().as_secs_f64()
    );
}

/// Whether a process's command line names `dir`.
fn any_process_under(dir: &Path) -> bool {
    let needle = format!("{}/", dir.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| {
                    String::from_utf8_lossy(&c)
                        .replace('\0', " ")
                        .contains(&needle)
                })
                .unwrap_or(false)
        })
}
