//! Smoke runs of the shipped benches and scripts that no other test runs, each for a few seconds
//! with the real binaries: a bench or a script nobody runs breaks unnoticed. Each asserts what the
//! tool is for (the figures it prints, the verdicts it gives), not only that it started.
//!
//! Run elsewhere: `storwatch-collector-bench` (collector/tests/bench_smoke.rs), the criterion
//! benches (`test = true` in their crates' Cargo.toml: `cargo test` runs each benchmark once),
//! `scripts/check-packages.sh` and `scripts/build-rpm.sh` (tests/packages.rs),
//! `scripts/influxd-test.sh` (every test with an influxd), the InfluxDB setup scripts and the
//! v2/v3 rollup generators (collector/tests/influx_setup.rs, tests/dashboards).
#![allow(clippy::unwrap_used)]

use std::process::Command;

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
