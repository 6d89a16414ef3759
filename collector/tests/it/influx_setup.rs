//! The site's InfluxDB setup (`deploy/influxdb/setup.influxql`, applied by `setup.sh`) on a real
//! influxd: retention policies, and continuous queries that keep a 10 s burst at 100 % util
//! visible in the 1 min and 1 h rollups. The checks live in `deploy/influxdb/test-setup.sh`
//! (shell, so that a site can run the same proof against its own InfluxDB version); this test
//! runs it under `cargo test` and fails with its output when any check fails.

use std::path::Path;
use std::process::Command;

#[test]
fn influxdb_setup_keeps_bursts_through_the_rollups() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/influxdb/test-setup.sh");
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .expect("run deploy/influxdb/test-setup.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        script.display(),
        out.status
    );
    // the script's last word, so a script that exits 0 early cannot pass
    assert!(
        stdout.contains("PASS: setup.influxql keeps bursts"),
        "no PASS line:\n{stdout}"
    );
    assert!(
        stdout.contains("ok: rp_1h disk util_max_pct = 100"),
        "{stdout}"
    );
}
