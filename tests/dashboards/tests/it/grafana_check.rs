//! Pieces of `scripts/grafana-check.sh` that run before any Grafana does, run here on what
//! `deploy/grafana/install.sh` writes. (The script itself needs a Grafana server: opt-in,
//! docs/deploy.md.)
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shell function `name` of `scripts/grafana-check.sh`, as written there.
fn function(name: &str) -> String {
    let script = std::fs::read_to_string(root().join("scripts/grafana-check.sh")).unwrap();
    let start = script
        .find(&format!("\n{name}() {{\n"))
        .unwrap_or_else(|| panic!("no function {name} in scripts/grafana-check.sh"));
    let body = &script[start + 1..];
    let end = body.find("\n}\n").unwrap();
    body[..end + 3].to_string()
}

/// `install.sh ARGS` into `home` as grafana-check.sh's install_grafana_side does, then
/// `dropin_env home VAR` under the script's own `set -euo pipefail`: (exit status, output).
fn dropin_env_after(home: &Path, args: &[&str], var: &str) -> (i32, String) {
    let out = Command::new("bash")
        .arg(root().join("deploy/grafana/install.sh"))
        .args(["--runbook-base", "http://127.0.0.1/storwatch-runbooks"])
        .arg("--provisioning")
        .arg(home.join("provisioning"))
        .arg("--dashboards")
        .arg(home.join("dashboards"))
        .arg("--systemd-dir")
        .arg(home.join("systemd"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = format!(
        "set -euo pipefail\n{}\nv=$(dropin_env \"$1\" \"$2\")\necho \"$v\"\n",
        function("dropin_env")
    );
    let out = Command::new("bash")
        .args(["-c", &script, "check"])
        .arg(home)
        .arg(var)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    )
}

/// The Prometheus half installs with `--datasource prometheus`: no InfluxDB drop-in then, and
/// the Prometheus URL is in the other one. Reading them must neither end the script (it did,
/// with status 2 and no message, on the missing file) nor miss the URL.
#[test]
fn dropin_env_reads_each_datasource_drop_in() {
    let dir = tempfile::tempdir().unwrap();
    let prom = dir.path().join("prometheus");
    let args = [
        "--datasource",
        "prometheus",
        "--prometheus-url",
        "http://127.0.0.1:9090",
    ];
    assert_eq!(
        dropin_env_after(&prom, &args, "STORWATCH_PROMETHEUS_URL"),
        (0, "http://127.0.0.1:9090".to_string())
    );
    assert_eq!(
        dropin_env_after(&prom, &args, "STORWATCH_INFLUX_URL"),
        (0, String::new())
    );
    let influx = dir.path().join("influxql");
    assert_eq!(
        dropin_env_after(
            &influx,
            &["--influx-url", "http://127.0.0.1:8086"],
            "STORWATCH_INFLUX_URL"
        ),
        (0, "http://127.0.0.1:8086".to_string())
    );
}
