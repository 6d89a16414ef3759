//! Smoke runs of the shipped benches and scripts that no other test runs, each for a few seconds
//! with the real binaries: a bench or a script nobody runs breaks unnoticed. Each asserts what the
//! tool is for (the figures it prints, the verdicts it gives), not only that it started.
//!
//! `scripts/quickstart.sh` runs here too (start, status, stop of a whole fleet: about 20 s).
//!
//! Run elsewhere: `storwatch-collector-bench` (collector/tests/bench_smoke.rs), the criterion
//! benches and the queue store bench (`test = true` in their crates' Cargo.toml: `cargo test`
//! runs each once), `scripts/check-packages.sh` and `scripts/build-rpm.sh` (tests/packages.rs;
//! the deb maintainer scripts only where cargo-deb is installed), `scripts/influxd-test.sh`
//! (every test with an influxd), the InfluxDB setup scripts, `deploy/grafana/install.sh` and the
//! v2/v3 rollup generators and their tests (collector/tests/influx_setup.rs, tests/dashboards).
//!
//! `bench/jobs-cost.sh` (100 jobs beside none) runs with 5 jobs for a 3 s window.
//!
//! `bench/run-agent-bench.sh` runs on the shared bench harness (`../shared/bench` beside the
//! checkout, as CI has it; skipped, saying so, where it is not there) for one 11 s window.
//!
//! Not run by any test: `deploy/influxdb/v2/check-flux.sh` (it fetches Flux with Go
//! and builds libflux, minutes on a fresh machine), `deploy/compose/Dockerfile` (needs a
//! container engine) and `scripts/test.sh` itself.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use storwatch_test_support::{binary, scratch, workspace};

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

/// `bench/run-agent-bench.sh` on the shared harness's synthetic 200-disk host, with the test
/// build of the agent (`STORWATCH_AGENT_BIN`, so no release build) for one round of 11 s: the
/// harness writes a result row for the agent with the collections it measured, their CPU and
/// the lines each report wrote. With `--drives`, the agent that reads its disks through the fake
/// smartctl and storcli64 every 60 s / 10 s has a row too, and its children's CPU is counted.
#[test]
fn agent_bench_script_measures_the_agent_on_the_bench_host() {
    let harness = workspace().join("../shared/bench");
    if !harness.join("run.sh").is_file() {
        eprintln!(
            "SKIPPED agent_bench_script_measures_the_agent_on_the_bench_host: no bench harness at {}",
            harness.display()
        );
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

/// `bench/jobs-cost.sh` with the test build, 5 jobs, 1 s reports, one round of 3 s: a CPU row for
/// the agent without jobs and one for the agent with them, and the jobs agent's job lines.
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
    for tree in ["nojobs", "jobs"] {
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

/// `scripts/quickstart.sh start`, `status` and `stop`: InfluxDB, the collector, the simulator
/// and an agent per simulated host and one on this host start; every host's `disk` lines reach
/// InfluxDB through the collector; `stop` leaves nothing of the state directory running.
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
    let start = qs.run(&["start", "--hosts-per-scenario", "1"]);
    let out = text(&start);
    assert!(start.status.success(), "start failed:\n{out}");
    assert!(
        out.contains(&format!("{} agents report every 10 s", scenarios + 1)),
        "{out}"
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
    let stop = qs.run(&["stop"]);
    let out = text(&stop);
    assert!(stop.status.success(), "stop failed:\n{out}");
    assert!(out.contains("nothing of"), "{out}");
    let after = qs.run(&["status"]);
    assert_eq!(after.status.code(), Some(3), "{}", text(&after));
    assert!(!any_process_under(&qs.state), "processes left after stop");
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
