//! The whole agent binary reading drive health on the disk-server fixture tree
//! (`agent/fixtures/sysfs/disk-server`: `sda` whose `sda1` is in `md0`, `sdb` and `sdc` the
//! paths of multipath map `mpatha`, `nvme0n1`) with a stand-in `smartctl` that prints real
//! fixtures, says a disk is asleep, and hangs for another.

#![allow(clippy::unwrap_used)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn agent_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn smartctl_fixture(name: &str) -> String {
    agent_dir()
        .join("fixtures/smartctl")
        .join(name)
        .display()
        .to_string()
}

/// A proc root of real captured files, the disk-server sys tree, and a config naming the
/// stand-in smartctl.
fn setup(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let proc_root = storwatch_test_support::files::fixture_proc_root(dir);
    let smartctl = dir.join("smartctl");
    let sleep_pid = dir.join("sleep.pid");
    fs::write(
        &smartctl,
        format!(
            "#!/bin/sh\nfor dev; do :; done\ncase \"$dev\" in\n\
             /dev/sda) cat '{}';;\n\
             /dev/sdb) cat '{}'; exit 2;;\n\
             /dev/sdc) sleep 1000 & echo $! > '{}'; wait;;\n\
             /dev/nvme0n1) cat '{}';;\n\
             *) echo \"unexpected $dev\" >&2; exit 1;;\n\
             esac\n",
            smartctl_fixture("sce-ata-seagate-st3000nm0033-188-packed-4-4-4.json"),
            smartctl_fixture("synthetic-ata-n-standby-power-mode-standby-exit2.json"),
            sleep_pid.display(),
            smartctl_fixture("sce-nvme-intel-p4510.json"),
        ),
    )
    .unwrap();
    fs::set_permissions(&smartctl, fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.join("agent.toml");
    fs::write(
        &config,
        format!(
            "[drive]\nsmartctl = \"{}\"\ntimeout = \"1s\"\n",
            smartctl.display()
        ),
    )
    .unwrap();
    (
        proc_root,
        agent_dir().join("fixtures/sysfs/disk-server/sys"),
        config,
    )
}

fn line<'a>(text: &'a str, device: &str) -> &'a str {
    let prefix = format!("drive,host=ds01,device={device},");
    text.lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no drive line for {device} in\n{text}"))
}

#[test]
fn once_reports_every_disk_of_the_fixture_tree() {
    let dir = tempfile::tempdir().unwrap();
    let (proc_root, sys_root, config) = setup(dir.path());
    let started = Instant::now();
    let out = storwatch_test_support::process::agent_once(
        Path::new(env!("CARGO_BIN_EXE_storwatch-agent")),
        "ds01",
        &proc_root,
        &sys_root,
        &config,
    )
    .output()
    .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // One hung disk costs its timeout once, not the run.
    assert!(started.elapsed() < Duration::from_secs(30));

    let sda = line(&text, "sda");
    assert!(
        sda.starts_with(
            "drive,host=ds01,device=sda,serial=REDACTED,wwn=5000c500499602d2,model=ST3000NM0033-9ZM178,protocol=ata,md=md0 "
        ),
        "{sda}"
    );
    assert!(sda.contains(",command_timeout=4i,"), "{sda}");
    assert!(
        sda.contains(",read_ok=true,asleep=false,last_read_age_s="),
        "{sda}"
    );
    let sdb = line(&text, "sdb");
    assert!(
        sdb.starts_with("drive,host=ds01,device=sdb,mpath=mpatha read_ok=true,asleep=true "),
        "{sdb}"
    );
    let sdc = line(&text, "sdc");
    assert!(
        sdc.contains("read_ok=false,asleep=false,read_error=\"smartctl /dev/sdc: "),
        "{sdc}"
    );
    assert!(sdc.contains("no answer within 1s, killed"), "{sdc}");
    let nvme = line(&text, "nvme0n1");
    assert!(nvme.contains(",protocol=nvme "), "{nvme}");
    assert!(nvme.contains(",unsafe_shutdowns=8i,"), "{nvme}");
    let errors = text
        .lines()
        .find(|l| l.starts_with("agent_source,host=ds01,source=smartctl "))
        .unwrap_or_else(|| panic!("no smartctl errors counted in\n{text}"));
    assert!(errors.contains("errors=1i"), "{errors}");
    assert!(
        err.contains("smartctl /dev/sdc"),
        "the hang is logged: {err}"
    );

    // The hung call's child is gone with it.
    let pid = fs::read_to_string(dir.path().join("sleep.pid")).unwrap();
    let proc_pid = format!("/proc/{}", pid.trim());
    let deadline = Instant::now() + Duration::from_secs(5);
    while Path::new(&proc_pid).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !Path::new(&proc_pid).exists(),
        "the hung smartctl's sleep still runs"
    );
    for l in text.lines() {
        let parsed: Vec<_> = influxdb_line_protocol::parse_lines(l).collect();
        assert!(parsed.len() == 1 && parsed[0].is_ok(), "{l}");
    }
}

/// A stand-in smartctl that never answers and ignores SIGTERM and SIGINT, as a smartctl in an
/// ioctl on a hung disk does not end at them: it starts a `sleep` (which inherits the ignored
/// signals), writes `<its pid> <the sleep's pid>` to `pids.<disk>`, and waits.
fn hung_setup(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let proc_root = storwatch_test_support::files::fixture_proc_root(dir);
    let smartctl = dir.join("smartctl");
    fs::write(
        &smartctl,
        format!(
            "#!/bin/sh\ntrap '' TERM INT\nfor dev; do :; done\nsleep 1000 &\n\
             echo \"$$ $!\" > '{}'/pids.\"${{dev##*/}}\"\nwait\n",
            dir.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&smartctl, fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.join("agent.toml");
    // Every disk due within 2 s, none killed by its timeout while the test runs.
    fs::write(
        &config,
        format!(
            "[drive]\nsmartctl = \"{}\"\ninterval = \"2s\"\ntimeout = \"1h\"\nmax_running = 8\n",
            smartctl.display()
        ),
    )
    .unwrap();
    (
        proc_root,
        agent_dir().join("fixtures/sysfs/disk-server/sys"),
        config,
    )
}

/// The process ids the hung calls wrote: each call's shell and its sleep, 8 for the 4 disks.
fn hung_pids(dir: &Path) -> Vec<i32> {
    ["sda", "sdb", "sdc", "nvme0n1"]
        .iter()
        .filter_map(|d| fs::read_to_string(dir.join(format!("pids.{d}"))).ok())
        .flat_map(|t| {
            t.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// Whether process `pid` runs: it exists and is not a zombie (a call's `sleep`, once killed,
/// is its dead shell's orphan, a zombie until the system's init reaps it).
fn alive(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s.rsplit_once(')')?.1.trim_start().starts_with('Z')))
        .is_some_and(|zombie| !zombie)
}

/// Kills what a failed test left running (the hung calls' groups), so no test leaks them.
struct Reaper(Vec<i32>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = Command::new("kill")
                .args(["-KILL", &p.to_string()])
                .status();
        }
    }
}

/// Starts the agent (`args`: `run` or `once` and its flags) on the fixture tree with the hung
/// smartctl, waits for the four calls, sends `signal`, and checks that the agent ends at once
/// and leaves none of the calls, nor what they started, running.
fn hung_calls_end_with_the_agent(mode: &str, signal: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (proc_root, sys_root, config) = hung_setup(dir.path());
    let out = dir.path().join("out.lp");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_storwatch-agent"));
    cmd.args([
        mode,
        "--sample-interval",
        "250ms",
        "--report-interval",
        "1s",
        "--host",
        "ds01",
    ])
    .arg("--proc-root")
    .arg(&proc_root)
    .arg("--sys-root")
    .arg(&sys_root)
    .arg("--config")
    .arg(&config)
    .arg("--output")
    .arg(format!("file:{}", out.display()))
    .stderr(std::process::Stdio::piped());
    let mut agent = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while hung_pids(dir.path()).len() < 8 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let pids = hung_pids(dir.path());
    let _reaper = Reaper(pids.clone());
    assert_eq!(pids.len(), 8, "the four calls did not all start");
    assert!(pids.iter().all(|p| alive(*p)));

    storwatch_test_support::process::signal(agent.id(), signal);
    let stopped = Instant::now();
    let mut exited = false;
    while !exited && stopped.elapsed() < Duration::from_secs(20) {
        exited = agent.try_wait().unwrap().is_some();
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = stopped.elapsed();
    let _ = agent.kill();
    let status = agent.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut agent.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(exited, "the agent did not stop: {stderr}");
    assert!(took < Duration::from_secs(5), "stopping took {took:?}");
    // Gone by the time the agent is (it waits for them), not left to systemd's kill.
    let left: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    assert!(
        left.is_empty(),
        "{mode} ended by SIG{signal} ({status:?}) left {} of {} hung-call processes running: {left:?}\n{stderr}",
        left.len(),
        pids.len()
    );
}

#[test]
fn sigterm_ends_the_agents_hung_calls_with_it() {
    hung_calls_end_with_the_agent("run", "TERM");
}

#[test]
fn sigint_ends_the_agents_hung_calls_with_it() {
    hung_calls_end_with_the_agent("run", "INT");
}

#[test]
fn sigterm_ends_the_hung_calls_of_once_with_it() {
    hung_calls_end_with_the_agent("once", "TERM");
}

/// More disks than calls may run (1,000 disks, `max_running` 4, one due every 2 ms): when the
/// agent stops, the drive thread finds its 4 calls ended by the kill and goes on to the disks
/// waiting. None of them may start once the agent is stopping: a process forked
/// while the agent exits outlives it. Before, the thread forked one refused call after another
/// until the process ended (the stop waited its 2 s for them to be reaped), and the last one
/// was left running.
#[test]
fn no_call_starts_once_the_agent_is_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let (proc_root, _, config) = hung_setup(dir.path());
    fs::write(
        &config,
        format!(
            "[drive]\nsmartctl = \"{}\"\ninterval = \"2s\"\ntimeout = \"1h\"\nmax_running = 4\n",
            dir.path().join("smartctl").display()
        ),
    )
    .unwrap();
    let sys = dir.path().join("sys");
    // sda … sdz, sdaa … sdzz, sdaaa …: the kernel's names
    let letter = |i: usize| char::from(b'a' + (i % 26) as u8);
    let names: Vec<String> = (0..1000)
        .map(|i| match i {
            0..26 => format!("sd{}", letter(i)),
            26..702 => format!("sd{}{}", letter(i / 26 - 1), letter(i)),
            _ => format!(
                "sd{}{}{}",
                letter((i - 702) / 676),
                letter((i - 702) / 26),
                letter(i)
            ),
        })
        .collect();
    for (i, n) in names.iter().enumerate() {
        fs::create_dir_all(sys.join("block").join(n)).unwrap();
        fs::write(
            sys.join("block").join(n).join("dev"),
            format!("8:{}\n", i * 16),
        )
        .unwrap();
    }
    let pids = || -> Vec<i32> {
        fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| {
                let e = e.ok()?;
                e.file_name()
                    .to_str()?
                    .starts_with("pids.")
                    .then(|| e.path())
            })
            .filter_map(|p| fs::read_to_string(p).ok())
            .flat_map(|t| {
                t.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect()
    };
    let mut agent = Command::new(env!("CARGO_BIN_EXE_storwatch-agent"))
        .args([
            "run",
            "--sample-interval",
            "250ms",
            "--report-interval",
            "1s",
        ])
        .args(["--host", "ds01"])
        .arg("--proc-root")
        .arg(&proc_root)
        .arg("--sys-root")
        .arg(&sys)
        .arg("--config")
        .arg(&config)
        .arg("--output")
        .arg(format!("file:{}", dir.path().join("out.lp").display()))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Four calls running, and the rest of the disks due (past 2 s).
    let started = storwatch_test_support::wait_for(Duration::from_secs(20), || pids().len() >= 8);
    std::thread::sleep(Duration::from_millis(2500));
    storwatch_test_support::process::signal(agent.id(), "TERM");
    let stopping = Instant::now();
    let mut exited = false;
    while !exited && stopping.elapsed() < Duration::from_secs(20) {
        exited = agent.try_wait().unwrap().is_some();
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = stopping.elapsed();
    let _ = agent.kill();
    let _ = agent.wait();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut agent.stderr.take().unwrap(), &mut stderr).unwrap();
    // (the calls that began before the exit have written their pids by now, or never will)
    std::thread::sleep(Duration::from_millis(300));
    let all = pids();
    let _reaper = Reaper(all.clone());
    assert!(started, "the calls did not start: {stderr}");
    assert!(exited, "the agent did not stop: {stderr}");
    let left: Vec<i32> = all.iter().copied().filter(|p| alive(*p)).collect();
    assert!(
        left.is_empty(),
        "{} stand-in processes of {} left running: {left:?}\n{stderr}",
        left.len(),
        all.len()
    );
    assert_eq!(
        all.len(),
        8,
        "calls started after the agent began stopping (4 before)\n{stderr}"
    );
    assert!(
        took < Duration::from_secs(1),
        "stopping took {took:?}\n{stderr}"
    );
}
