//! The shipped benchmark binary, `storwatch-collector-bench`, run short: it must start the
//! collector it ships with (a token file the collector accepts), measure both phases against a
//! real influxd (`scripts/influxd-test.sh`) and print its figures. A bench nobody runs breaks
//! unnoticed; this is its smoke run, not a measurement (no figure is compared with a bound).
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

/// The first number after `key` in `text` (digits and a decimal point).
fn number_after(text: &str, key: &str) -> Option<f64> {
    let rest = &text[text.find(key)? + key.len()..];
    let num: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    num.parse().ok()
}

#[test]
fn collector_bench_runs_both_phases_and_prints_its_figures() {
    let bin = Path::new(env!("CARGO_BIN_EXE_storwatch-collector-bench"));
    // The bench starts the collector from its own directory: cargo puts both there.
    assert!(
        bin.with_file_name("storwatch-collector").is_file(),
        "storwatch-collector is not beside {}",
        bin.display()
    );
    let help = Command::new(bin).arg("--help").output().unwrap();
    assert!(help.status.success(), "--help: {help:?}");
    assert!(String::from_utf8_lossy(&help.stdout).contains("--drain-lines"));

    let scratch = storwatch_test_support::scratch();
    let out = Command::new(bin)
        .args([
            "--senders",
            "2",
            "--seconds",
            "1",
            "--lines-per-request",
            "500",
        ])
        .args(["--drain-lines", "20000", "--port-base", "18800"])
        .env("BENCH_DIR", scratch.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    // Phase 1: durable acknowledgements from two senders, the output unreachable.
    let acks = stdout
        .lines()
        .find(|l| l.starts_with("acks: 2 senders, 500 lines/request"))
        .unwrap_or_else(|| panic!("no acks line in:\n{stdout}"));
    let acked = number_after(acks, " s: ").unwrap();
    assert!(acked >= 500.0, "nothing acknowledged: {acks}");
    assert!(number_after(acks, "=").unwrap() > 0.0, "{acks}");
    assert!(number_after(acks, "peak RSS").unwrap() > 0.0, "{acks}");
    // Phase 2: influxd's own ingest and the collector's drain of the same 20,000 lines, and the
    // bench's own check that influxd holds all of them (it exits non-zero otherwise).
    let drain = stdout
        .lines()
        .find(|l| l.starts_with("drain: 20000 lines;"))
        .unwrap_or_else(|| panic!("no drain line in:\n{stdout}"));
    assert!(
        number_after(drain, "direct ingest").unwrap() > 0.0,
        "{drain}"
    );
    assert!(
        number_after(drain, "collector drain").unwrap() > 0.0,
        "{drain}"
    );
    assert!(drain.contains("% of direct"), "{drain}");
    assert!(
        drain.ends_with("stored in influxd: 20000 samples of util_pct"),
        "{drain}"
    );
    // Everything it made was under BENCH_DIR, and it cleaned up after itself.
    let left: Vec<_> = std::fs::read_dir(scratch.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
