//! The `drive` lines' cost at 1,000 drives, without 1,000 smartctl children: 1,000 drives filled
//! from one real reading, the report written `STORWATCH_DRIVE_REPORTS` times (default 10).
//! Counted with callgrind (docs/performance.md, "Run of 2026-12-06: the drive lines"):
//!
//! ```sh
//! cargo test --release -p storwatch-agent --lib --no-run   # prints the test binary
//! valgrind --tool=callgrind --callgrind-out-file=cg.out BIN --ignored --exact \
//!     collect::drive::report_bench::report_1000_drives
//! callgrind_annotate --inclusive=yes cg.out | grep 'DriveCollector.*report'
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use super::*;
use crate::collect::SourceErrors;
use crate::sources::smartctl;

/// 1,000 drives `sd0`..`sd999`, each read once from the SAS document smartctl printed for a
/// Seagate ST600MP0036 (the harness's `--drives` answer), every tenth a member of an array.
pub(super) fn thousand_drives() -> DriveCollector {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/smartctl/libblockdev-scsi-seagate-st600mp0036.json");
    let json = std::fs::read_to_string(path).unwrap();
    let health = smartctl::parse(&json).unwrap();
    let root = Root::new("/nonexistent/proc", "/nonexistent/sys");
    let mut m = DriveCollector::new(DriveConfig::default(), root);
    for i in 0..1000 {
        let name = format!("sd{i}");
        let entry = BookEntry::assess(&name, &health, &m.risk);
        let s = DriveState {
            place: Placement {
                md: if i % 10 == 0 {
                    "md0".into()
                } else {
                    String::new()
                },
                ..Placement::default()
            },
            health: Some(Box::new(health.clone())),
            entry: Some(entry),
            read_at_s: Some(100.0),
            read_ok: Some(true),
            error_log_at_s: Some(90.0),
            ..DriveState::default()
        };
        m.drives.insert(name, s);
    }
    m.publish();
    m
}

/// A report of `m` at `now_s`.
pub(super) fn report(m: &mut DriveCollector, now_s: f64) -> String {
    let root = Root::new("/nonexistent/proc", "/nonexistent/sys");
    let mut errors = SourceErrors::default();
    let mut w = LineWriter::new("ds01", &[]);
    Collector::report(
        m,
        &mut w,
        &mut ReportCx {
            root: &root,
            ts_ns: (now_s * 1e9) as i64,
            now_s,
            uptime_cs: 0,
            errors: &mut errors,
        },
    );
    String::from_utf8(w.take()).unwrap()
}

#[test]
#[ignore = "a measurement: run under callgrind, see the module comment"]
fn report_1000_drives() {
    let mut m = thousand_drives();
    let n: usize = std::env::var("STORWATCH_DRIVE_REPORTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let mut bytes = 0;
    for r in 0..n {
        let text = report(&mut m, 130.0 + 10.0 * r as f64);
        assert_eq!(text.lines().count(), 1000);
        bytes += text.len();
    }
    println!("{n} reports of 1,000 drive lines, {bytes} bytes");
}
