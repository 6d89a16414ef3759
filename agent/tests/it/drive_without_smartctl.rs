//! A node without smartctl: the running agent says so in one info line and nothing else — no
//! `drive` lines, no source errors, no repeat at the next rounds.

#![allow(clippy::unwrap_used)]

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn agent_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

#[test]
fn without_smartctl_one_info_line_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let proc_root = storwatch_test_support::files::fixture_proc_root(dir.path());
    let config = dir.path().join("agent.toml");
    // A path (the disk-server tree is not this machine's /sys) to no program; a round a second.
    fs::write(
        &config,
        format!(
            "[drive]\nsmartctl = \"{}\"\ninterval = \"1s\"\n",
            dir.path().join("bin/smartctl").display()
        ),
    )
    .unwrap();
    let out = dir.path().join("out.lp");
    let mut child = Command::new(env!("CARGO_BIN_EXE_storwatch-agent"))
        .arg("run")
        .args(["--sample-interval", "250ms", "--report-interval", "1s"])
        .args(["--host", "ds01"])
        .arg("--proc-root")
        .arg(&proc_root)
        .arg("--sys-root")
        .arg(agent_dir().join("fixtures/sysfs/disk-server/sys"))
        .arg("--config")
        .arg(&config)
        .arg("--output")
        .arg(format!("file:{}", out.display()))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let read = || fs::read_to_string(&out).unwrap_or_default();
    // Four reports: the drive monitor has started four rounds.
    let reported = wait_for(Duration::from_secs(20), || {
        read().matches("\nagent,").count() + usize::from(read().starts_with("agent,")) >= 4
    });
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(reported, "fewer than four reports:\n{}\n{stderr}", read());

    let said: Vec<&str> = stderr.lines().filter(|l| l.contains("smartctl")).collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(said[0].contains("INFO"), "{}", said[0]);
    assert!(said[0].contains("not found"), "{}", said[0]);
    let text = read();
    assert!(!text.lines().any(|l| l.starts_with("drive,")), "{text}");
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("agent_source,") && l.contains("source=smartctl")),
        "{text}"
    );
}
