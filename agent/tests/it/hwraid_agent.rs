//! The whole agent binary reading a MegaRAID controller through stand-in `storcli64` scripts that
//! print corpus files (`agent/fixtures/storcli/`), hang, print garbage, or are missing, on a sys
//! tree where the controller's host and its VD 0 (`sda`, `0:2:0:0`) are.

#![allow(clippy::unwrap_used)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use storwatch_test_support::process::signal;
use storwatch_test_support::wait_for;

fn agent_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn corpus(name: &str) -> PathBuf {
    agent_dir().join("fixtures/storcli").join(name)
}

/// A proc root of real captured files and a sys tree with one `megaraid_sas` host whose VD 0 is
/// `sda`.
fn roots(dir: &Path) -> (PathBuf, PathBuf) {
    let proc_root = storwatch_test_support::files::fixture_proc_root(dir);
    let sys = dir.join("sys");
    let dev = sys.join("devices/pci0000:00/0000:00:01.0/host0/target0:2:0/0:2:0:0");
    fs::create_dir_all(&dev).unwrap();
    fs::create_dir_all(sys.join("block/sda")).unwrap();
    fs::write(sys.join("block/sda/dev"), "8:0\n").unwrap();
    std::os::unix::fs::symlink(&dev, sys.join("block/sda/device")).unwrap();
    fs::create_dir_all(sys.join("class/scsi_host/host0")).unwrap();
    fs::write(
        sys.join("class/scsi_host/host0/proc_name"),
        "megaraid_sas\n",
    )
    .unwrap();
    (proc_root, sys)
}

/// A stand-in storcli answering each call with a file (`exec cat`), and a config naming it.
fn stand_in(dir: &Path, answers: [(&str, &Path); 4], timeout: &str) -> PathBuf {
    let mut script = String::from("#!/bin/sh\ncase \"$1 $2 $3 $4\" in\n");
    for (call, file) in answers {
        script.push_str(&format!("'{call} J') exec cat '{}';;\n", file.display()));
    }
    script.push_str("*) echo \"unexpected: $*\" >&2; exit 1;;\nesac\n");
    let storcli = dir.join("storcli64");
    fs::write(&storcli, script).unwrap();
    fs::set_permissions(&storcli, fs::Permissions::from_mode(0o755)).unwrap();
    config(dir, &storcli, timeout)
}

fn config(dir: &Path, storcli: &Path, timeout: &str) -> PathBuf {
    let config = dir.join("agent.toml");
    fs::write(
        &config,
        format!(
            "[drive]\nenabled = false\n[hwraid]\nstorcli = \"{}\"\ntimeout = \"{timeout}\"\n",
            storcli.display()
        ),
    )
    .unwrap();
    config
}

/// `once` on the roots with `config`: its output and standard error.
fn once(dir: &Path, config: &Path) -> (String, String) {
    let (proc_root, sys_root) = (dir.join("proc"), dir.join("sys"));
    let out = storwatch_test_support::process::agent_once(
        Path::new(env!("CARGO_BIN_EXE_storwatch-agent")),
        "ds01",
        &proc_root,
        &sys_root,
        config,
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let text = String::from_utf8(out.stdout).unwrap();
    for l in text.lines() {
        let parsed: Vec<_> = influxdb_line_protocol::parse_lines(l).collect();
        assert!(parsed.len() == 1 && parsed[0].is_ok(), "{l}");
    }
    (text, err)
}

fn line<'a>(text: &'a str, start: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line starting {start} in\n{text}"))
}

fn field(line: &str, key: &str) -> f64 {
    let fields = line.split(' ').nth(1).unwrap_or_default();
    fields
        .split(',')
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .map(|v| v.trim_end_matches('i'))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no numeric {key} in {line}"))
}

/// The netdata RAID6 rebuilding drive 252:3, its per-drive answer given by `pds`.
fn rebuilding(dir: &Path, pds: &Path) -> PathBuf {
    let show = corpus("edited-netdata-c0-show-all-raid6-dgrd-pd-252-3-rbld.json");
    stand_in(
        dir,
        [
            ("/call show all", &show),
            // no `/c0/vall show all` capture of this controller: its `show all` stands in
            ("/call/vall show all", &show),
            ("/call/eall/sall show all", pds),
            (
                "/call/eall/sall show rebuild",
                &corpus("synthetic-c0-eall-sall-show-rebuild-252-3-37pct.json"),
            ),
        ],
        "10s",
    )
}

#[test]
fn once_reports_a_rebuilding_vd_tied_to_its_disk_and_ranks_its_risk_by_its_members() {
    let dir = tempfile::tempdir().unwrap();
    roots(dir.path());
    let pds = corpus("netdata-c0-eall-sall-show-all-6-sata-media-other-predictive.json");
    let config = rebuilding(dir.path(), &pds);
    let (text, _) = once(dir.path(), &config);

    let vd = line(&text, "raid_vd,host=ds01,");
    assert!(
        vd.starts_with(
            "raid_vd,host=ds01,controller=c0,vd=c0/v0,name=Sluthub,level=RAID6,device=sda state=\"Dgrd\",ok=false,degraded=true,redundancy_left=1i,members=6i,members_online=5i,members_rebuilding=1i,rebuild_progress_pct=37,rebuild_eta_s=18720i,rebuild_stalled=false,rebuild_risk="
        ),
        "{vd}"
    );
    let clean_risk = field(vd, "rebuild_risk");
    assert!(clean_risk > 0.0 && clean_risk < 1e-6, "{vd}");
    assert_eq!(field(vd, "members_at_risk"), 0.0);
    let pd = line(&text, "raid_pd,host=ds01,controller=c0,slot=252:3,");
    assert!(
        pd.contains(" state=\"Rbld\",ok=false,")
            && pd.contains(",rebuild_progress_pct=37,rebuild_eta_s=18720i,"),
        "{pd}"
    );
    let ctl = line(&text, "raid_controller,host=ds01,controller=c0,");
    assert!(
        ctl.contains(" status=\"Optimal\",ok=true,vds=1i,vds_degraded=1i,vds_offline=0i,pds=6i,pds_failed=0i,bbu_present=true,bbu_state=\"Optimal\",bbu_ok=true,read_ok=true,"),
        "{ctl}"
    );

    // The same, with the controller counting 12 media errors on survivor 252:5.
    let mut json = fs::read_to_string(&pds).unwrap();
    let at = json.find("\"Drive /c0/e252/s5 State\"").unwrap();
    let key = "\"Media Error Count\": 0";
    let i = at + json[at..].find(key).unwrap();
    json.replace_range(i..i + key.len(), "\"Media Error Count\": 12");
    let edited = dir.path().join("pds-252-5-media-errors.json");
    fs::write(&edited, json).unwrap();
    let config = rebuilding(dir.path(), &edited);
    let (text, _) = once(dir.path(), &config);
    let vd = line(&text, "raid_vd,host=ds01,");
    assert_eq!(field(vd, "members_at_risk"), 1.0, "{vd}");
    let risk = field(vd, "rebuild_risk");
    assert!(risk > 5.0 * clean_risk, "{risk} vs {clean_risk}");
    let bad = line(&text, "raid_pd,host=ds01,controller=c0,slot=252:5,");
    let good = line(&text, "raid_pd,host=ds01,controller=c0,slot=252:4,");
    assert!(bad.contains(",media_errors=12i,"), "{bad}");
    assert!(
        field(bad, "failure_probability") > 10.0 * field(good, "failure_probability"),
        "{bad}\n{good}"
    );
}

#[test]
fn garbage_is_a_source_error_and_a_missing_storcli_one_info_line() {
    let dir = tempfile::tempdir().unwrap();
    roots(dir.path());
    let garbage = corpus("garbage-not-json-error-line.json");
    let config = stand_in(
        dir.path(),
        [
            ("/call show all", &garbage),
            ("/call/vall show all", &garbage),
            ("/call/eall/sall show all", &garbage),
            ("/call/eall/sall show rebuild", &garbage),
        ],
        "10s",
    );
    let (text, err) = once(dir.path(), &config);
    // (the agent line's `hwraid_cpu_us` is the collector's own cost, not a reading)
    assert!(
        !text.lines().any(|l| l.starts_with("raid_")),
        "no good reading, no lines:\n{text}"
    );
    let errors = line(&text, "agent_source,host=ds01,source=storcli ");
    assert!(errors.contains("errors=1i"), "{errors}");
    assert!(
        err.contains("storcli /call show all J: exit status 0"),
        "{err}"
    );

    let config = config_missing(dir.path());
    let (text, err) = once(dir.path(), &config);
    assert!(!text.lines().any(|l| l.starts_with("raid_")), "{text}");
    assert!(!text.contains("source=storcli"), "not an error: {text}");
    assert_eq!(
        err.matches("not found; hardware RAID controllers are not read")
            .count(),
        1,
        "{err}"
    );
}

/// perccli's real answer on a node without a PERC: a state, not an error — one `raid_controller`
/// line `controller=none`, one info line in the log, no source error.
#[test]
fn no_controller_found_is_one_line_and_one_info_log_line_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    roots(dir.path());
    let none = corpus("canonical-perccli-call-show-no-controller-found.json");
    let config = stand_in(
        dir.path(),
        [
            ("/call show all", &none),
            ("/call/vall show all", &none),
            ("/call/eall/sall show all", &none),
            ("/call/eall/sall show rebuild", &none),
        ],
        "10s",
    );
    let (text, err) = once(dir.path(), &config);
    let ctl = line(&text, "raid_controller,host=ds01,controller=none ");
    assert!(
        ctl.contains("status=\"No Controller found\",vds=0i,") && ctl.contains(",read_ok=true,"),
        "{ctl}"
    );
    assert!(!text.contains("source=storcli"), "not an error: {text}");
    assert_eq!(
        err.matches("No Controller found: no MegaRAID or PERC controller on this node")
            .count(),
        1,
        "{err}"
    );
}

fn config_missing(dir: &Path) -> PathBuf {
    config(dir, &dir.join("no-such-storcli64"), "10s")
}

/// A storcli that never answers is killed at its timeout and reported, while the agent's
/// reports go on every second meanwhile: the calls run on the monitor's own thread.
#[test]
fn a_hung_storcli_is_killed_and_holds_up_no_report() {
    let dir = tempfile::tempdir().unwrap();
    let (proc_root, sys_root) = roots(dir.path());
    let pid_file = dir.path().join("sleep.pid");
    let storcli = dir.path().join("storcli64");
    fs::write(
        &storcli,
        format!(
            "#!/bin/sh\nsleep 1000 & echo $! > '{}'; wait\n",
            pid_file.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&storcli, fs::Permissions::from_mode(0o755)).unwrap();
    let config = config(dir.path(), &storcli, "3s");
    let out = dir.path().join("out.lp");
    let mut agent = Command::new(env!("CARGO_BIN_EXE_storwatch-agent"))
        .args([
            "run",
            "--sample-interval",
            "250ms",
            "--report-interval",
            "1s",
            "--host",
            "ds01",
            "--output",
        ])
        .arg(format!("file:{}", out.display()))
        .arg("--proc-root")
        .arg(&proc_root)
        .arg("--sys-root")
        .arg(&sys_root)
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let read = || fs::read_to_string(&out).unwrap_or_default();
    let counted = wait_for(Duration::from_secs(30), || {
        read()
            .lines()
            .any(|l| l.starts_with("agent_source,host=ds01,source=storcli "))
    });
    let started = Instant::now();
    signal(agent.id(), "TERM");
    let status = agent.wait().unwrap();
    let mut err = String::new();
    if let Some(mut e) = agent.stderr.take() {
        use std::io::Read;
        e.read_to_string(&mut err).unwrap();
    }
    assert!(
        counted,
        "the hung call was never reported:\n{}\n{err}",
        read()
    );
    assert!(status.success(), "{status}: {err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let text = read();
    // Reports before the one counting the killed call: written while it hung.
    let lines: Vec<&str> = text.lines().collect();
    let first_error = lines
        .iter()
        .position(|l| l.starts_with("agent_source,host=ds01,source=storcli "))
        .unwrap();
    let reports_before = lines[..first_error]
        .iter()
        .filter(|l| l.starts_with("agent,host=ds01"))
        .count();
    assert!(
        reports_before >= 2,
        "{reports_before} reports before the 3 s timeout ended: the hang held them up\n{text}"
    );
    assert!(err.contains("no answer within 3s, killed"), "{err}");
    // The hung call's child is gone with its process group.
    let pid = fs::read_to_string(&pid_file).unwrap();
    let proc_pid = PathBuf::from(format!("/proc/{}", pid.trim()));
    assert!(
        wait_for(Duration::from_secs(5), || !proc_pid.exists()),
        "the hung storcli's sleep still runs"
    );
}

#[test]
fn storcli_s_own_logs_are_not_left_in_the_agent_s_directory() {
    let dir = tempfile::tempdir().unwrap();
    roots(dir.path());
    let show = corpus("netdata-c0-show-all-raid6-optl-ibbu-optimal.json");
    // A stand-in that, as storcli does, writes its logs into its working directory.
    let storcli = dir.path().join("storcli64");
    let seen = dir.path().join("cwds");
    fs::write(
        &storcli,
        format!(
            "#!/bin/sh\npwd >> '{seen}'\necho log >> storcli.log\necho log >> MegaSAS.log\nexec cat '{show}'\n",
            seen = seen.display(),
            show = show.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&storcli, fs::Permissions::from_mode(0o755)).unwrap();
    let config = config(dir.path(), &storcli, "10s");
    let agent_dir = dir.path().join("state");
    fs::create_dir(&agent_dir).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_storwatch-agent"))
        .args(["once", "--sample-interval", "1s", "--report-interval", "1s"])
        .args(["--host", "ds01"])
        .arg("--proc-root")
        .arg(dir.path().join("proc"))
        .arg("--sys-root")
        .arg(dir.path().join("sys"))
        .arg("--config")
        .arg(&config)
        .current_dir(&agent_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        line(&text, "raid_controller,host=ds01,").contains("read_ok=true"),
        "{text}"
    );
    let left: Vec<_> = fs::read_dir(&agent_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left in the agent's directory: {left:?}");
    // Each call ran in the monitor's private directory, emptied after it and gone with it.
    let cwds = fs::read_to_string(&seen).unwrap();
    let cwds: Vec<&str> = cwds.lines().collect();
    assert_eq!(cwds.len(), 3, "{cwds:?}");
    for d in &cwds {
        assert!(d.contains("storwatch-storcli-"), "{d}");
        assert!(!Path::new(d).exists(), "{d} removed at exit");
    }
}
