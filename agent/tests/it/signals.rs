//! The agent as a daemon meets signals and the clock: SIGHUP reloads, SIGTERM reports the
//! unfinished interval and ends the wait for the next sample at once, the wait itself is one
//! wakeup, and a wall clock that steps back does not stop sampling.

#![allow(clippy::unwrap_used)]

use std::fs;
use std::process::Command;
use std::time::Duration;

use storwatch_test_support::files::write_replacing as write;
use storwatch_test_support::process::signal;
use storwatch_test_support::wait::wait_for;

/// As an operator meets it on this machine: SIGHUP reloads the configuration (a new tag shows
/// on the following lines; a broken file keeps the running one), SIGUSR1 is harmless, and
/// SIGTERM reports the unfinished interval, marked partial, before exiting.
#[test]
fn sighup_reloads_and_sigterm_reports_the_partial_interval() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agent.toml");
    let out = dir.path().join("out.lp");
    write(
        &config,
        "sample_interval = \"250ms\"\nreport_interval = \"1s\"\n",
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_storwatch-agent"))
        .arg("run")
        .arg("--config")
        .arg(&config)
        .arg("--output")
        .arg(format!("file:{}", out.display()))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let read = || fs::read_to_string(&out).unwrap_or_default();
    assert!(
        wait_for(Duration::from_secs(15), || read().contains("agent,")),
        "no report"
    );

    write(
        &config,
        "sample_interval = \"250ms\"\nreport_interval = \"1s\"\n[tags]\nsite = \"reloaded\"\n",
    );
    signal(pid, "HUP");
    assert!(
        wait_for(Duration::from_secs(15), || read().contains("site=reloaded")),
        "the new tag never showed: {}",
        read()
    );
    write(&config, "report_interval = \"not a duration\"\n");
    signal(pid, "HUP");
    signal(pid, "USR1");
    std::thread::sleep(Duration::from_millis(600));
    assert!(child.try_wait().unwrap().is_none(), "the agent died");
    let before = read().matches("agent,").count();
    assert!(wait_for(Duration::from_secs(15), || read()
        .matches("agent,")
        .count()
        > before + 1));

    // Stop in the middle of an interval: the samples so far are reported, marked partial.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    std::thread::sleep(Duration::from_millis(
        (1000 - (now_ms % 1000) as u64 + 600) % 1000,
    ));
    signal(pid, "TERM");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("configuration reloaded"), "{stderr}");
    assert!(
        stderr.contains("keeping the running configuration"),
        "{stderr}"
    );
    let text = read();
    let last_agent = text.lines().rfind(|l| l.starts_with("agent,")).unwrap();
    assert!(last_agent.contains("partial=true"), "{last_agent}");
    assert!(last_agent.contains("site=reloaded"), "{last_agent}");
}

/// Between samples the sampling thread sleeps until the next one, not in short naps: a busy
/// disk server should not pay wakeups for nothing. SIGTERM still ends that sleep at once.
#[test]
fn the_sampling_thread_sleeps_until_the_next_sample_and_sigterm_ends_the_sleep() {
    let dir = tempfile::tempdir().unwrap();
    // Samples fall on whole hours: keep the window below clear of one.
    let into_hour = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        % 3600;
    if into_hour > 3590 {
        std::thread::sleep(Duration::from_secs(3600 - into_hour + 1));
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_storwatch-agent"))
        .arg("run")
        .args(["--sample-interval", "1h", "--report-interval", "1h"])
        .arg("--output")
        .arg(format!("file:{}", dir.path().join("out.lp").display()))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let switches = || {
        fs::read_to_string(format!("/proc/{pid}/task/{pid}/status"))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .unwrap()
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    // past start-up and the first sample, into the hour-long sleep
    std::thread::sleep(Duration::from_secs(1));
    let before = switches();
    std::thread::sleep(Duration::from_secs(2));
    let slept = switches() - before;
    signal(pid, "TERM");
    let stopped = wait_for(Duration::from_secs(15), || {
        child.try_wait().unwrap().is_some()
    });
    if !stopped {
        child.kill().unwrap();
    }
    assert!(stopped, "SIGTERM did not end the sleep");
    assert!(slept <= 1, "{slept} wakeups in 2 s of sleep");
}

/// The wall clock stepped back an hour (an NTP step at boot, a VM restored from a snapshot):
/// sampling goes on at once, with a warning, instead of waiting an hour for the instant it had
/// planned. The clock is libfaketime's, moved through its timestamp file while the agent runs.
#[test]
fn sampling_goes_on_when_the_wall_clock_steps_back() {
    let dir = tempfile::tempdir().unwrap();
    let clock = dir.path().join("clock");
    let out = dir.path().join("out.lp");
    write(&clock, "+0\n");
    let mut child = Command::new(env!("CARGO_BIN_EXE_storwatch-agent"))
        .arg("run")
        .args(["--sample-interval", "250ms", "--report-interval", "1s"])
        .arg("--output")
        .arg(format!("file:{}", out.display()))
        .env("LD_PRELOAD", storwatch_test_support::process::libfaketime())
        .env("FAKETIME_TIMESTAMP_FILE", &clock)
        .env("FAKETIME_NO_CACHE", "1")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let read = || fs::read_to_string(&out).unwrap_or_default();
    let reports = || read().matches("agent,").count();
    assert!(
        wait_for(Duration::from_secs(15), || reports() >= 1),
        "no report"
    );
    write(&clock, "-3600\n");
    let before = reports();
    let went_on = wait_for(Duration::from_secs(15), || reports() >= before + 2);
    signal(child.id(), "TERM");
    child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(went_on, "no report after the step: {stderr}");
    assert!(stderr.contains("the wall clock went back"), "{stderr}");
    // the reports after the step carry the stepped clock's time
    let stamps: Vec<i64> = read()
        .lines()
        .filter(|l| l.starts_with("agent,"))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    let (first, last) = (stamps[0], stamps[stamps.len() - 1]);
    assert!(first - last > 3_000_000_000_000, "{stamps:?}");
}
