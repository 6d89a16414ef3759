//! The drive monitor with the real parser, the real process handling and a fake `smartctl`: a
//! shell script written by each test that prints real fixtures, exits with smartctl's real
//! statuses, hangs, or floods.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::*;
use crate::collect::SourceErrors;
use crate::command::Finished;
use crate::event::Event;
use crate::sources::smartctl;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/smartctl")
        .join(name)
}

/// A host with whole disks `disks`, `md0` built on `sdb1` and `sdc`, and a fake smartctl.
struct Host {
    dir: tempfile::TempDir,
}

impl Host {
    fn new(disks: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let h = Host { dir };
        for (i, d) in disks.iter().enumerate() {
            h.write(&format!("sys/block/{d}/dev"), &format!("8:{}\n", i * 16));
            h.write(&format!("sys/block/{d}/size"), "1000\n");
        }
        h.write("sys/block/md0/dev", "9:0\n");
        fs::create_dir_all(h.path("sys/block/md0/slaves")).unwrap();
        if disks.contains(&"sdb") {
            h.write("sys/block/sdb/sdb1/dev", "8:17\n");
            h.write("sys/block/sdb/sdb1/partition", "1\n");
            fs::create_dir_all(h.path("sys/block/sdb/sdb1/holders/md0")).unwrap();
            fs::create_dir_all(h.path("sys/block/md0/slaves/sdb1")).unwrap();
        }
        if disks.contains(&"sdc") {
            fs::create_dir_all(h.path("sys/block/sdc/holders/md0")).unwrap();
            fs::create_dir_all(h.path("sys/block/md0/slaves/sdc")).unwrap();
        }
        h
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    fn root(&self) -> Root {
        Root::new(self.path("proc"), self.path("sys"))
    }

    /// Writes the fake smartctl: `cases` is the body of a `case "$dev" in … esac`. Every call
    /// is logged (`seconds device`) to `calls`.
    fn smartctl(&self, cases: &str) -> PathBuf {
        let p = self.path("bin/smartctl");
        let log = self.path("calls");
        self.write(
            "bin/smartctl",
            &format!(
                "#!/bin/sh\nfor dev; do :; done\necho \"$(date +%s.%N) $dev\" >> {}\ncase \"$dev\" in\n{cases}\nesac\n",
                log.display()
            ),
        );
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// The calls made so far: (seconds since the epoch, device).
    fn calls(&self) -> Vec<(f64, String)> {
        fs::read_to_string(self.path("calls"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (t, d) = l.split_once(' ')?;
                Some((t.parse().ok()?, d.to_owned()))
            })
            .collect()
    }
}

/// A case printing fixture `name` and exiting with `status`.
fn prints(dev: &str, name: &str, status: i32) -> String {
    format!(
        "{dev}) cat '{}'; exit {status};;\n",
        fixture(name).display()
    )
}

fn cfg(smartctl: PathBuf, interval_ms: u64, timeout_ms: u64) -> DriveConfig {
    DriveConfig {
        smartctl,
        interval: Duration::from_millis(interval_ms),
        timeout: Duration::from_millis(timeout_ms),
        ..DriveConfig::default()
    }
}

/// Drives a collector the way the scheduler does.
struct Driver {
    root: Root,
    events: Vec<Event>,
    errors: SourceErrors,
}

impl Driver {
    fn new(root: Root) -> Self {
        Self {
            root,
            events: Vec::new(),
            errors: SourceErrors::new(&["smartctl"]),
        }
    }

    fn sample(&mut self, m: &mut DriveCollector, now_s: f64) {
        let mut cx = SampleCx {
            root: &self.root,
            now_s,
            itv_cs: Some(100),
            uptime_cs: 0,
            events: &mut self.events,
            errors: &mut self.errors,
        };
        m.sample(&mut cx);
    }

    fn report(&mut self, m: &mut DriveCollector, now_s: f64) -> String {
        let mut w = LineWriter::new("ds01", &[]);
        let mut cx = ReportCx {
            root: &self.root,
            ts_ns: 1_700_000_000_000_000_000,
            now_s,
            uptime_cs: 0,
            errors: &mut self.errors,
        };
        Collector::report(m, &mut w, &mut cx);
        self.events.clear();
        String::from_utf8(w.take()).unwrap()
    }

    /// Errors counted since start, for the smartctl source.
    fn error_total(&self) -> u64 {
        self.errors
            .totals()
            .iter()
            .find(|(n, _)| n == "smartctl")
            .map_or(0, |(_, t)| *t)
    }
}

fn line<'a>(text: &'a str, device: &str) -> &'a str {
    let prefix = format!("drive,host=ds01,device={device},");
    let bare = format!("drive,host=ds01,device={device} ");
    text.lines()
        .find(|l| l.starts_with(&prefix) || l.starts_with(&bare))
        .unwrap_or_else(|| panic!("no line for {device} in\n{text}"))
}

fn field(line: &str, key: &str) -> Option<String> {
    // the fields: after the first space that is not escaped, before the timestamp
    let mut prev = ' ';
    let start = line.char_indices().find_map(|(i, c)| {
        let hit = c == ' ' && prev != '\\';
        prev = c;
        hit.then_some(i + 1)
    })?;
    let fields = line.get(start..)?.rsplit_once(' ')?.0;
    split_fields(fields)
        .into_iter()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")).map(str::to_owned))
}

/// Splits a field set on the commas outside quoted strings.
fn split_fields(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut escaped = false;
    for c in s.chars() {
        match c {
            '\\' if quoted && !escaped => escaped = true,
            '"' if !escaped => quoted = !quoted,
            ',' if !quoted => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => escaped = false,
        }
        cur.push(c);
    }
    out.push(cur);
    out
}

#[test]
fn lines_of_real_fixtures() {
    let mut text = String::new();
    for (device, name, md) in [
        (
            "sda",
            "sce-ata-seagate-st3000nm0033-188-packed-4-4-4.json",
            "md0",
        ),
        (
            "sdb",
            "scrutiny-ata-hitachi-usbjmicron-FAILED-exit216.json",
            "",
        ),
        ("sdc", "sce-ata-ssd-micron-5300-188-29-crc-24.json", ""),
        (
            "sdd",
            "sce-scsi-seagate-st373453lc-grown-260-uncorrected-read-1.json",
            "",
        ),
        (
            "sde",
            "libblockdev-scsi-hgst-husmr3280-sas-ssd-no-grown-defect-list.json",
            "",
        ),
        (
            "sdf",
            "synthetic-smartd-jsonstate-scsi-seagate-non-medium-1445.json",
            "",
        ),
        (
            "nvme0n1",
            "scrutiny-nvme-samsung-970-evo-media-errors.json",
            "",
        ),
        (
            "nvme1n1",
            "sce-nvme-samsung-pm1725a-critical-warning-16-failed-exit8.json",
            "",
        ),
    ] {
        let json = fs::read_to_string(fixture(name)).unwrap();
        let health = smartctl::parse(&json).unwrap();
        let s = DriveState {
            place: Placement {
                md: md.into(),
                ..Placement::default()
            },
            health: Some(Box::new(health)),
            read_at_s: Some(100.0),
            read_ok: Some(true),
            ..DriveState::default()
        };
        let entry = s
            .health
            .as_ref()
            .map(|h| BookEntry::assess(device, h, &RiskModel::default()));
        let mut w = LineWriter::new("ds01", &[]);
        write_line(
            &mut w,
            1_700_000_000_000_000_000,
            130.0,
            device,
            &s,
            entry.as_ref(),
            &Tags::default(),
        );
        text.push_str(&String::from_utf8(w.take()).unwrap());
    }
    insta::assert_snapshot!(text);
    // The facts, not only the snapshot: Seagate's packed 188 decoded, another maker's raw.
    assert_eq!(
        field(line(&text, "sda"), "command_timeout").as_deref(),
        Some("4i")
    );
    assert_eq!(
        field(line(&text, "sdc"), "command_timeout").as_deref(),
        Some("29i")
    );
    assert_eq!(
        field(line(&text, "sdb"), "health_ok").as_deref(),
        Some("false")
    );
    assert_eq!(
        field(line(&text, "sdb"), "pending_sectors").as_deref(),
        Some("8i")
    );
    assert_eq!(
        field(line(&text, "sdd"), "grown_defects").as_deref(),
        Some("260i")
    );
    // A vendor-format defect list: the field is absent, not 0.
    assert_eq!(field(line(&text, "sde"), "grown_defects"), None);
    assert_eq!(
        field(line(&text, "sdf"), "non_medium_errors").as_deref(),
        Some("1445i")
    );
    assert_eq!(
        field(line(&text, "nvme0n1"), "media_errors").as_deref(),
        Some("7i")
    );
    assert_eq!(
        field(line(&text, "nvme1n1"), "critical_warning").as_deref(),
        Some("16i")
    );
    assert_eq!(
        field(line(&text, "sda"), "last_read_age_s").as_deref(),
        Some("30i")
    );
    for l in text.lines() {
        let parsed: Vec<_> = influxdb_line_protocol::parse_lines(l).collect();
        assert!(parsed.len() == 1 && parsed[0].is_ok(), "{l}");
    }
}

#[test]
fn standby_is_not_read_and_not_an_error() {
    let json = fs::read_to_string(fixture(
        "synthetic-ata-n-standby-power-mode-standby-exit2.json",
    ))
    .unwrap();
    let fin = Finished {
        status: 2,
        stdout: json,
        stderr: String::new(),
    };
    assert!(matches!(
        reading::interpret("/dev/sdb", &fin),
        ReadResult::Asleep(m) if m == "STANDBY"
    ));
    // Exit 2 without the standby message: the device could not be opened.
    let json =
        fs::read_to_string(fixture("scrutiny-open-failed-windows-exit2-no-device.json")).unwrap();
    let r = reading::interpret(
        "/dev/sdx",
        &Finished {
            status: 2,
            stdout: json,
            stderr: String::new(),
        },
    );
    match r {
        ReadResult::Failed(e @ DriveError::NotRead { .. }) => {
            assert!(
                e.to_string()
                    .starts_with("smartctl /dev/sdx: not read (exit status 2)"),
                "{e}"
            )
        }
        other => panic!("{other:?}"),
    }
}

/// A MegaRAID virtual drive answers as smartctl does on Linux: not a drive, not an error.
#[test]
fn a_raid_controllers_virtual_drive_is_not_an_error() {
    let json = r#"{
  "json_format_version": [1, 0],
  "smartctl": {
    "version": [7, 3],
    "argv": ["smartctl", "--json", "-a", "-n", "standby", "/dev/sda"],
    "messages": [
      {
        "string": "Smartctl open device: /dev/sda failed: DELL or MegaRaid controller, please try adding '-d megaraid,N'",
        "severity": "error"
      }
    ],
    "exit_status": 2
  }
}"#;
    let r = reading::interpret(
        "/dev/sda",
        &Finished {
            status: 2,
            stdout: json.into(),
            stderr: String::new(),
        },
    );
    assert!(
        matches!(&r, ReadResult::BehindController(m) if m.contains("-d megaraid,N")),
        "{r:?}"
    );
    let h = Host::new(&["sda"]);
    h.write("megaraid.json", json);
    let smartctl = h.smartctl(&format!(
        "/dev/sda) cat '{}'; exit 2;;\n",
        h.path("megaraid.json").display()
    ));
    let mut m = DriveCollector::new_inline(cfg(smartctl, 60_000, 5000), h.root());
    let mut d = Driver::new(h.root());
    d.sample(&mut m, 0.0);
    assert_eq!(h.calls().len(), 1);
    assert_eq!(d.report(&mut m, 10.0), "");
    assert_eq!(d.error_total(), 0);
}

/// A node with a MegaRAID controller: its disks are listed by `smartctl --scan` and read
/// through it, `-d megaraid,N /dev/bus/0`, beside the node's own disks.
#[test]
fn disks_behind_a_megaraid_controller_are_read_through_it() {
    let h = Host::new(&["sda"]);
    h.write(
        "proc/devices",
        "Character devices:\n  1 mem\n250 megaraid_sas_ioctl\n\nBlock devices:\n  8 sd\n",
    );
    let scan = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/smartctl-scan/scrutiny-issue267-scan-megaraid-bus0.txt");
    let p = h.path("bin/smartctl");
    h.write(
        "bin/smartctl",
        &format!(
            "#!/bin/sh\necho \"$*\" >> {log}\ncase \"$*\" in\n--scan) cat '{scan}';;\n\
             *'-d megaraid,1 /dev/bus/0') cat '{one}'; exit 4;;\n\
             *'-d megaraid,'*' /dev/bus/0') cat '{zero}'; exit 4;;\n\
             *' /dev/sda') cat '{sda}';;\n*) exit 1;;\nesac\n",
            log = h.path("calls").display(),
            scan = scan.display(),
            one = fixture("scrutiny-ata-wd4000fyyx-sat-megaraid-1-exit4.json").display(),
            zero = fixture("scrutiny-ata-wd4000fyyx-sat-megaraid-0-exit4.json").display(),
            sda = fixture("sce-ata-seagate-st3000nm0033-188-packed-4-4-4.json").display(),
        ),
    );
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = cfg(p, 60_000, 5000);
    c.exclude = vec!["bus/0:megaraid,8".into()];
    let mut m = DriveCollector::new_inline(c, h.root());
    let mut d = Driver::new(h.root());
    d.sample(&mut m, 0.0);
    let text = d.report(&mut m, 1.0);
    let calls = fs::read_to_string(h.path("calls")).unwrap();
    assert!(calls.starts_with("--scan\n"), "{calls}");
    assert!(
        calls.contains("--json -a -n standby -d megaraid,1 /dev/bus/0\n"),
        "{calls}"
    );
    assert!(!calls.contains("megaraid,8"), "excluded: {calls}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "sda and megaraid 1, 2, 3, 6, 7: {text}");
    let one = lines
        .iter()
        .find(|l| l.starts_with("drive,host=ds01,device=bus/0:megaraid\\,1,"))
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(
        field(one, "reallocated_sectors").as_deref(),
        Some("387i"),
        "{one}"
    );
    assert_eq!(field(one, "exit_status").as_deref(), Some("4i"));
    assert!(one.contains(",protocol=ata "), "{one}");
    assert_eq!(d.error_total(), 0);
    // Without the controller in /proc/devices, no scan.
    fs::remove_file(h.path("proc/devices")).unwrap();
    d.sample(&mut m, 61.0);
    let text = d.report(&mut m, 62.0);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert_eq!(
        fs::read_to_string(h.path("calls"))
            .unwrap()
            .matches("--scan")
            .count(),
        1
    );
}

/// A SAS disk's non-medium error count comes from a second, text call (`-l error`): smartctl
/// prints it only as text.
#[test]
fn a_sas_disks_non_medium_errors_come_from_its_text_error_log() {
    let h = Host::new(&["sda"]);
    let p = h.path("bin/smartctl");
    h.write(
        "bin/smartctl",
        &format!(
            "#!/bin/sh\necho \"$*\" >> {log}\ncase \"$*\" in\n\
             '-l error -n standby /dev/sda') cat '{text}';;\n\
             '--json -a -n standby /dev/sda') cat '{json}';;\n*) exit 1;;\nesac\n",
            log = h.path("calls").display(),
            text = fixture("karlsbakk-sas-text-a-error-counter-log-non-medium-3-fragment.txt")
                .display(),
            json = fixture("sce-scsi-hitachi-h109060-sas-clean.json").display(),
        ),
    );
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    let mut m = DriveCollector::new_inline(cfg(p, 60_000, 5000), h.root());
    let mut d = Driver::new(h.root());
    d.sample(&mut m, 0.0);
    let text = d.report(&mut m, 1.0);
    let sda = line(&text, "sda");
    assert_eq!(
        field(sda, "non_medium_errors").as_deref(),
        Some("3i"),
        "{sda}"
    );
    assert_eq!(field(sda, "grown_defects").as_deref(), Some("0i"), "{sda}");
    assert_eq!(
        fs::read_to_string(h.path("calls")).unwrap(),
        "--json -a -n standby /dev/sda\n-l error -n standby /dev/sda\n"
    );
    assert_eq!(d.error_total(), 0);
}

/// The `-l error` call of a SAS disk is made every `sas_error_log_every` rounds (3 here) and for
/// a degraded array's member read at once; the rounds between carry the last count, with its
/// age. The fake's count changes from 3 to 7 after the first round: a line shows 7 only once a
/// new `-l error` call was made.
#[test]
fn a_sas_disks_error_log_is_read_every_nth_round_and_carried_between() {
    let h = Host::new(&["sda", "sdb", "sdc"]);
    let p = h.path("bin/smartctl");
    h.write("count", "3");
    h.write(
        "bin/smartctl",
        &format!(
            "#!/bin/sh\necho \"$*\" >> {log}\ncase \"$*\" in\n\
             '-l error -n standby '*) sed \"s/count: *3$/count: $(cat {count})/\" '{text}';;\n\
             '--json -a -n standby '*) cat '{json}';;\n*) exit 1;;\nesac\n",
            log = h.path("calls").display(),
            count = h.path("count").display(),
            text = fixture("karlsbakk-sas-text-a-error-counter-log-non-medium-3-fragment.txt")
                .display(),
            json = fixture("sce-scsi-hitachi-h109060-sas-clean.json").display(),
        ),
    );
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    let calls = |h: &Host| -> (usize, usize) {
        let log = fs::read_to_string(h.path("calls")).unwrap_or_default();
        fs::write(h.path("calls"), "").unwrap();
        (
            log.matches("--json -a").count(),
            log.matches("-l error").count(),
        )
    };
    let nm = |text: &str, dev: &str| {
        let l = line(text, dev);
        (
            field(l, "non_medium_errors").unwrap_or_default(),
            field(l, "non_medium_errors_age_s").unwrap_or_default(),
        )
    };
    let mut c = cfg(p, 60_000, 5000);
    c.sas_error_log_every = 3;
    let mut m = DriveCollector::new_inline(c, h.root());
    let mut d = Driver::new(h.root());

    // Round 0: every disk's JSON and its `-l error`.
    d.sample(&mut m, 0.0);
    assert_eq!(calls(&h), (3, 3));
    let text = d.report(&mut m, 1.0);
    assert_eq!(nm(&text, "sda"), ("3i".into(), "1i".into()), "{text}");
    h.write("count", "7");

    // Round 1: the JSON only; the count of round 0 carried, 61 s old.
    d.sample(&mut m, 60.0);
    assert_eq!(calls(&h), (3, 0));
    let text = d.report(&mut m, 61.0);
    assert_eq!(nm(&text, "sda"), ("3i".into(), "61i".into()), "{text}");
    assert_eq!(
        field(line(&text, "sda"), "last_read_age_s").as_deref(),
        Some("1i")
    );

    // md0 degrades: its members (sdb, sdc) are read at once, `-l error` too.
    d.events.push(Event::new(
        "md",
        "md0",
        "clean",
        "degraded",
        "md0 degraded".into(),
    ));
    d.sample(&mut m, 62.0);
    assert_eq!(calls(&h), (2, 2));
    let text = d.report(&mut m, 63.0);
    assert_eq!(nm(&text, "sdb"), ("7i".into(), "1i".into()), "{text}");
    assert_eq!(nm(&text, "sdc"), ("7i".into(), "1i".into()), "{text}");
    assert_eq!(nm(&text, "sda"), ("3i".into(), "63i".into()), "{text}");

    // Round 2: the JSON only again.
    d.sample(&mut m, 120.0);
    assert_eq!(calls(&h), (3, 0));
    let text = d.report(&mut m, 121.0);
    assert_eq!(nm(&text, "sda"), ("3i".into(), "121i".into()), "{text}");
    assert_eq!(nm(&text, "sdb"), ("7i".into(), "59i".into()), "{text}");

    // Round 3: the third after round 0, `-l error` for every disk.
    d.sample(&mut m, 180.0);
    assert_eq!(calls(&h), (3, 3));
    let text = d.report(&mut m, 181.0);
    assert_eq!(nm(&text, "sda"), ("7i".into(), "1i".into()), "{text}");
    assert_eq!(d.error_total(), 0);
}

/// Five disks over a 4 s round (one call every 0.8 s): `sda` answers, `sdb` is asleep, `sdc`
/// hangs (`sleep 1000` under the script) past its 2.5 s timeout, `sdd` prints 2 GB, `nvme0n1`
/// answers. The sampling thread is never held up, `nvme0n1` is read on schedule while `sdc`
/// still hangs, the hung call and everything it started are killed at the timeout, and the
/// flood is cut at the bound.
#[test]
fn a_hung_disk_and_a_flood_delay_nobody() {
    let h = Host::new(&["sda", "sdb", "sdc", "sdd", "nvme0n1"]);
    let sleep_pid = h.path("sleep.pid");
    let smartctl =
        h.smartctl(&format!(
        "{}{}/dev/sdc) sleep 1000 & echo $! > {}; wait;;\n/dev/sdd) yes | head -c 2147483648;;\n{}",
        prints("/dev/sda", "sce-ata-seagate-st3000nm0033-188-packed-4-4-4.json", 0),
        prints(
            "/dev/sdb",
            "synthetic-ata-n-standby-power-mode-standby-exit2.json",
            2
        ),
        sleep_pid.display(),
        prints("/dev/nvme0n1", "sce-nvme-intel-p4510.json", 0),
    ));
    let mut m = DriveCollector::new(cfg(smartctl, 4000, 2500), h.root());
    let mut d = Driver::new(h.root());
    let start = Instant::now();
    let epoch_start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let mut slowest = Duration::ZERO;
    while start.elapsed() < Duration::from_millis(5000) {
        let t = Instant::now();
        d.sample(&mut m, start.elapsed().as_secs_f64());
        slowest = slowest.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = d.report(&mut m, start.elapsed().as_secs_f64());
    // The sampling thread only picks up answers (a generous bound, for a loaded machine).
    assert!(
        slowest < Duration::from_millis(500),
        "a sample took {slowest:?}"
    );

    let calls = h.calls();
    let at = |dev: &str| {
        calls
            .iter()
            .find(|(_, d)| d == dev)
            .map(|(t, _)| t - epoch_start)
            .unwrap_or_else(|| panic!("{dev} never called: {calls:?}"))
    };
    let sdc = at("/dev/sdc");
    let nvme = at("/dev/nvme0n1");
    assert!(
        nvme - sdc < 2.5,
        "nvme0n1 waited for the hung sdc: {calls:?}"
    );
    assert!(
        (1.5..3.5).contains(&(at("/dev/sdd") - at("/dev/sda"))),
        "{calls:?}"
    );

    let sda = line(&text, "sda");
    assert_eq!(field(sda, "read_ok").as_deref(), Some("true"), "{sda}");
    assert_eq!(field(sda, "command_timeout").as_deref(), Some("4i"));
    let sdb = line(&text, "sdb");
    assert_eq!(field(sdb, "asleep").as_deref(), Some("true"), "{sdb}");
    assert_eq!(field(sdb, "read_ok").as_deref(), Some("true"));
    let sdc = line(&text, "sdc");
    assert_eq!(field(sdc, "read_ok").as_deref(), Some("false"), "{sdc}");
    let err = field(sdc, "read_error").unwrap();
    assert!(
        err.contains("smartctl /dev/sdc") && err.contains("no answer within 2.5s"),
        "{err}"
    );
    let sdd = line(&text, "sdd");
    let err = field(sdd, "read_error").unwrap();
    assert!(err.contains("more than 1048576 bytes"), "{err}");
    let nvme = line(&text, "nvme0n1");
    assert!(nvme.contains(",protocol=nvme "), "{nvme}");
    assert_eq!(field(nvme, "unsafe_shutdowns").as_deref(), Some("8i"));
    assert_eq!(d.error_total(), 2, "the hang and the flood");

    // What the hung script started is gone with it.
    let pid = fs::read_to_string(&sleep_pid).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Path::new(&format!("/proc/{}", pid.trim())).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !Path::new(&format!("/proc/{}", pid.trim())).exists(),
        "the hung call's sleep still runs"
    );
    // The worker thread ends with the monitor, without waiting for anything.
    let t = Instant::now();
    drop(m);
    assert!(t.elapsed() < Duration::from_secs(1));
}

/// A controller on which every call hangs (smartctl ignoring SIGTERM, killed at its timeout):
/// 10 disks, a round of 2 s, calls killed after 0.5 s, 2 at a time, so a round has room for
/// about 8 calls. Each round used to start again at the first disk and drop the calls it had
/// not started: the last disks were never tried and had no line at all. The next round now
/// starts with the first disk left out, and a disk left out says so on its line.
#[test]
fn every_disk_gets_its_turn_when_hung_calls_fill_the_rounds() {
    let disks = [
        "sda", "sdb", "sdc", "sdd", "sde", "sdf", "sdg", "sdh", "sdi", "sdj",
    ];
    let h = Host::new(&disks);
    let smartctl = h.smartctl("*) trap '' TERM; sleep 1000 & wait;;\n");
    let mut c = cfg(smartctl, 2000, 500);
    c.max_running = 2;
    let mut m = DriveCollector::new(c, h.root());
    let mut d = Driver::new(h.root());
    let start = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut text = String::new();
    // Four rounds: the first leaves two disks out, the second starts with them.
    while start.elapsed() < Duration::from_millis(8000) {
        let t = Instant::now();
        d.sample(&mut m, start.elapsed().as_secs_f64());
        slowest = slowest.max(t.elapsed());
        if start.elapsed() > Duration::from_millis(2100) && text.is_empty() {
            // just after the first round ended
            text = d.report(&mut m, start.elapsed().as_secs_f64());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        slowest < Duration::from_millis(500),
        "a sample took {slowest:?}"
    );
    let calls = h.calls();
    for disk in disks {
        let dev = format!("/dev/{disk}");
        assert!(
            calls.iter().any(|(_, d)| *d == dev),
            "{disk} never tried in 4 rounds: {calls:?}"
        );
    }
    // The disks the first round left out have a line that says so, and an error each.
    let left_out: Vec<&str> = disks
        .iter()
        .copied()
        .filter(|disk| {
            text.lines()
                .find(|l| l.starts_with(&format!("drive,host=ds01,device={disk} ")))
                .and_then(|l| field(l, "read_error"))
                .is_some_and(|e| e.contains("not read in its round"))
        })
        .collect();
    assert!(
        !left_out.is_empty(),
        "no disk said it was left out:\n{text}"
    );
    let sdj = line(&text, "sdj");
    assert_eq!(field(sdj, "read_ok").as_deref(), Some("false"), "{sdj}");
    assert_eq!(
        field(sdj, "read_error").as_deref(),
        Some("\"smartctl /dev/sdj: not read in its round: all 2 calls (max_running) were taken until the round ended; read first in the next round\""),
    );
}

/// Inline rounds on a stepped clock: a good reading, then garbage, then JSON cut short: the
/// good reading stays with its age, each bad answer is a source error.
#[test]
fn garbage_and_truncated_output_keep_the_last_good_reading() {
    let h = Host::new(&["sda"]);
    let n = h.path("n");
    let smartctl = h.smartctl(&format!(
        "/dev/sda) n=$(cat {n} 2>/dev/null || echo 0); echo $((n+1)) > {n}\n  case $n in\n  0) cat '{}';;\n  1) cat '{}';;\n  *) cat '{}';;\n  esac;;\n",
        fixture("sce-ata-seagate-st3500418as-reallocated-304.json").display(),
        fixture("garbage-text-output-without-json-flag.json").display(),
        fixture("truncated-sce-ata-seagate-st3500418as-at-4096-bytes.json").display(),
        n = n.display(),
    ));
    let mut m = DriveCollector::new_inline(cfg(smartctl, 60_000, 5000), h.root());
    let mut d = Driver::new(h.root());
    d.sample(&mut m, 0.0);
    let text = d.report(&mut m, 10.0);
    let sda = line(&text, "sda");
    assert_eq!(
        field(sda, "reallocated_sectors").as_deref(),
        Some("304i"),
        "{sda}"
    );
    assert_eq!(field(sda, "last_read_age_s").as_deref(), Some("10i"));
    assert_eq!(d.error_total(), 0);
    // Reported every interval from the latest reading, read or not.
    d.sample(&mut m, 30.0);
    let text = d.report(&mut m, 40.0);
    assert_eq!(
        field(line(&text, "sda"), "last_read_age_s").as_deref(),
        Some("40i")
    );

    for (t, what) in [(60.0, "malformed JSON"), (120.0, "truncated JSON")] {
        d.sample(&mut m, t);
        let text = d.report(&mut m, t + 5.0);
        let sda = line(&text, "sda");
        assert_eq!(field(sda, "read_ok").as_deref(), Some("false"), "{sda}");
        assert_eq!(field(sda, "reallocated_sectors").as_deref(), Some("304i"));
        assert_eq!(
            field(sda, "last_read_age_s").as_deref(),
            Some(format!("{}i", t + 5.0).as_str())
        );
        assert!(field(sda, "read_error").unwrap().contains(what), "{sda}");
    }
    assert_eq!(d.error_total(), 2);
}

/// JSON that is not smartctl's output, after a good reading: an object with a `smartctl` key
/// but none of the fields every smartctl prints (`json_format_version`,
/// `smartctl.exit_status`, `device`), exit 0. Taken as a reading it had no serial, model, health
/// or counts, and the healthy failure probability (0.0149 → 0.0004): a failing drive looked
/// healthy. It is a source error and the last good reading stays.
#[test]
fn json_that_is_not_smartctls_keeps_the_last_good_reading() {
    let h = Host::new(&["sda"]);
    let n = h.path("n");
    let smartctl = h.smartctl(&format!(
        "/dev/sda) n=$(cat {n} 2>/dev/null || echo 0); echo $((n+1)) > {n}\n  case $n in\n  0) cat '{}';;\n  *) echo '{{\"hello\":[\"world\"],\"smartctl\":\"yes\"}}';;\n  esac;;\n",
        fixture("sce-ata-seagate-st3000nm0033-188-packed-4-4-4.json").display(),
        n = n.display(),
    ));
    let mut m = DriveCollector::new_inline(cfg(smartctl, 60_000, 5000), h.root());
    let mut d = Driver::new(h.root());
    d.sample(&mut m, 0.0);
    let good = d.report(&mut m, 10.0);
    let good = line(&good, "sda").to_owned();
    assert_eq!(field(&good, "read_ok").as_deref(), Some("true"), "{good}");
    let p_good = field(&good, "failure_probability").expect("a probability");

    d.sample(&mut m, 60.0);
    assert_eq!(h.calls().len(), 2, "the second call ran");
    let text = d.report(&mut m, 70.0);
    let sda = line(&text, "sda");
    assert!(
        sda.starts_with("drive,host=ds01,device=sda,serial=REDACTED,wwn=5000c500499602d2,model=ST3000NM0033-9ZM178,protocol=ata "),
        "{sda}"
    );
    assert_eq!(field(sda, "read_ok").as_deref(), Some("false"), "{sda}");
    assert_eq!(field(sda, "health_ok").as_deref(), Some("true"));
    assert_eq!(field(sda, "reallocated_sectors").as_deref(), Some("1i"));
    assert_eq!(field(sda, "failure_probability"), Some(p_good));
    assert_eq!(field(sda, "last_read_age_s").as_deref(), Some("70i"));
    let err = field(sda, "read_error").expect("an error");
    assert!(
        err.contains("smartctl /dev/sda: exit status 0: line 1: not smartctl's output: no json_format_version"),
        "{err}"
    );
    assert_eq!(d.error_total(), 1);
}

#[test]
fn without_smartctl_nothing_is_said() {
    let h = Host::new(&["sda", "sdb"]);
    let mut m = DriveCollector::new_inline(cfg(h.path("bin/no-smartctl"), 60_000, 1000), h.root());
    let mut d = Driver::new(h.root());
    for t in [0.0, 1.0, 61.0] {
        d.sample(&mut m, t);
    }
    assert_eq!(d.report(&mut m, 62.0), "");
    assert_eq!(d.error_total(), 0);
    // A name looked up in PATH that is not there: the same.
    let mut m = DriveCollector::new_inline(
        cfg(PathBuf::from("storwatch-no-such-smartctl"), 60_000, 1000),
        h.root(),
    );
    d.sample(&mut m, 0.0);
    assert_eq!(d.report(&mut m, 1.0), "");
    assert_eq!(d.error_total(), 0);
}

/// An MD array's degraded event in a sample has its member disks read in that sample, out of
/// their schedule; the other disks wait for theirs.
#[test]
fn members_of_a_degraded_array_are_read_at_once() {
    let h = Host::new(&["sda", "sdb", "sdc"]);
    let fx = "sce-ata-seagate-st3000nm0033-188-packed-4-4-4.json";
    let smartctl = h.smartctl(&format!(
        "{}{}{}",
        prints("/dev/sda", fx, 0),
        prints("/dev/sdb", fx, 0),
        prints("/dev/sdc", fx, 0)
    ));
    let mut m = DriveCollector::new_inline(cfg(smartctl, 1_800_000, 5000), h.root());
    let mut d = Driver::new(h.root());
    d.sample(&mut m, 0.0);
    assert_eq!(h.calls().len(), 3, "the first round reads every disk");
    let text = d.report(&mut m, 10.0);
    assert!(line(&text, "sdb").contains(",md=md0"), "{text}");
    assert!(line(&text, "sdc").contains(",md=md0"), "{text}");
    assert!(!line(&text, "sda").contains(",md="), "{text}");
    d.sample(&mut m, 11.0);
    assert_eq!(h.calls().len(), 3, "nothing due before the next round");
    d.events.push(Event::new(
        "md",
        "md0",
        "clean",
        "degraded",
        "md0 degraded".into(),
    ));
    d.sample(&mut m, 12.0);
    let mut again: Vec<String> = h.calls().into_iter().skip(3).map(|(_, d)| d).collect();
    again.sort();
    assert_eq!(again, ["/dev/sdb", "/dev/sdc"]);
    // The same event is not acted on twice, nor a member's own event.
    d.events
        .push(Event::new("md", "md0/sdc", "active", "failed", "x".into()));
    d.sample(&mut m, 13.0);
    assert_eq!(h.calls().len(), 5);
    let text = d.report(&mut m, 20.0);
    assert_eq!(
        field(line(&text, "sdb"), "last_read_age_s").as_deref(),
        Some("8i")
    );
    assert_eq!(
        field(line(&text, "sda"), "last_read_age_s").as_deref(),
        Some("20i")
    );
}

/// smartd's `--jsonstate` files, fresh, stand for smartctl on the disks they name; a stale one
/// (or none) leaves the disk to smartctl. The three files are the corpus' smartd state files
/// (`/dev/sdc` ATA with 16 pending sectors, `/dev/sdb` SAS with 1445 non-medium errors,
/// `/dev/nvme0` with its spare below threshold).
#[test]
fn fresh_smartd_state_files_replace_smartctl_and_stale_ones_do_not() {
    let h = Host::new(&["sda", "sdb", "sdc", "nvme0n1"]);
    let state = h.path("smartd");
    fs::create_dir_all(&state).unwrap();
    for (file, kind) in [
        (
            "synthetic-smartd-jsonstate-ata-seagate-pending-16.json",
            "ST3000NM0033-9ZM178-Z1Y00000.ata",
        ),
        (
            "synthetic-smartd-jsonstate-scsi-seagate-non-medium-1445.json",
            "SEAGATE-ST600MP0036-W3F00000.scsi",
        ),
        (
            "synthetic-smartd-jsonstate-nvme-spare-below-threshold.json",
            "Samsung_SSD_970_EVO_500GB-S466NX0M000000H.nvme",
        ),
    ] {
        fs::copy(fixture(file), state.join(format!("smartd.{kind}.json"))).unwrap();
    }
    // not a state file: ignored
    h.write(
        "smartd/smartd.ST3000NM0033-9ZM178-Z1Y00000.ata.state",
        "temperature-min = 17\n",
    );
    let fx = "sce-ata-toshiba-mg09aca18te.json";
    let smartctl = h.smartctl(&format!(
        "{}{}{}{}",
        prints("/dev/sda", fx, 0),
        prints("/dev/sdb", "libblockdev-scsi-seagate-st600mp0036.json", 0),
        prints("/dev/sdc", fx, 0),
        prints("/dev/nvme0n1", "sce-nvme-samsung-970-evo-plus.json", 0),
    ));
    let mut c = cfg(smartctl, 60_000, 5000);
    c.smartd_state_dir = Some(state.clone());
    c.smartd_state_max_age = Duration::from_secs(600);
    let mut m = DriveCollector::new_inline(c, h.root());
    let mut d = Driver::new(h.root());
    d.sample(&mut m, 0.0);
    let called: Vec<String> = h.calls().into_iter().map(|(_, d)| d).collect();
    assert_eq!(called, ["/dev/sda"], "only the disk without a state file");
    let text = d.report(&mut m, 1.0);
    let sdc = line(&text, "sdc");
    assert_eq!(
        field(sdc, "pending_sectors").as_deref(),
        Some("16i"),
        "{sdc}"
    );
    assert!(sdc.contains(",serial=Z1Y00000,"), "{sdc}");
    let sdb = line(&text, "sdb");
    assert_eq!(
        field(sdb, "non_medium_errors").as_deref(),
        Some("1445i"),
        "{sdb}"
    );
    let nvme = line(&text, "nvme0n1");
    assert_eq!(
        field(nvme, "available_spare_pct").as_deref(),
        Some("9i"),
        "{nvme}"
    );
    assert_eq!(d.error_total(), 0);

    // An hour later the files have not moved: stale, smartctl reads every disk.
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    for e in fs::read_dir(&state).unwrap() {
        let f = fs::File::options()
            .write(true)
            .open(e.unwrap().path())
            .unwrap();
        f.set_modified(old).unwrap();
    }
    d.sample(&mut m, 61.0);
    let mut called: Vec<String> = h.calls().into_iter().skip(1).map(|(_, d)| d).collect();
    called.sort();
    // sdb's SAS JSON has no non-medium count: its `-l error` text call follows
    assert_eq!(
        called,
        [
            "/dev/nvme0n1",
            "/dev/sda",
            "/dev/sdb",
            "/dev/sdb",
            "/dev/sdc"
        ]
    );
    let text = d.report(&mut m, 62.0);
    assert_eq!(
        field(line(&text, "sdc"), "pending_sectors").as_deref(),
        Some("0i")
    );
}

/// Without smartctl but with smartd's fresh state, the disks it names are still read.
#[test]
fn without_smartctl_the_smartd_state_is_still_read() {
    let h = Host::new(&["sda", "sdc"]);
    let state = h.path("smartd");
    fs::create_dir_all(&state).unwrap();
    fs::copy(
        fixture("synthetic-smartd-jsonstate-ata-seagate-pending-16.json"),
        state.join("smartd.ST3000NM0033-9ZM178-Z1Y00000.ata.json"),
    )
    .unwrap();
    let mut c = cfg(h.path("bin/no-smartctl"), 60_000, 1000);
    c.smartd_state_dir = Some(state);
    let mut m = DriveCollector::new_inline(c, h.root());
    let mut d = Driver::new(h.root());
    d.sample(&mut m, 0.0);
    let text = d.report(&mut m, 1.0);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert_eq!(
        field(line(&text, "sdc"), "pending_sectors").as_deref(),
        Some("16i")
    );
    assert_eq!(d.error_total(), 0);
}

/// A reading whose medium error counts grew since the disk's last one is an `event` of the
/// sample that took it; the first reading is the baseline.
#[test]
fn growing_counts_are_events_of_the_sample_that_reads_them() {
    let h = Host::new(&["sda"]);
    let n = h.path("n");
    // Two real captures of the same model (serials redacted alike): 1 reallocated sector, then
    // 304.
    let smartctl = h.smartctl(&format!(
        "/dev/sda) n=$(cat {n} 2>/dev/null || echo 0); echo $((n+1)) > {n}\n  case $n in\n  0) cat '{}';;\n  *) cat '{}';;\n  esac;;\n",
        fixture("sce-ata-seagate-st3500418as-188-packed-1-reallocated-1.json").display(),
        fixture("sce-ata-seagate-st3500418as-reallocated-304.json").display(),
        n = n.display(),
    ));
    let mut m = DriveCollector::new_inline(cfg(smartctl, 60_000, 5000), h.root());
    let mut d = Driver::new(h.root());
    d.sample(&mut m, 0.0);
    assert!(d.events.is_empty(), "{:?}", d.events);
    d.report(&mut m, 10.0);
    d.sample(&mut m, 61.0);
    let got: Vec<(&str, &str, &str, &str)> = d
        .events
        .iter()
        .map(|e| {
            (
                e.source,
                e.object.as_str(),
                e.from_state.as_str(),
                e.to_state.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [(
            "drive",
            "sda",
            "reallocated_sectors=1",
            "reallocated_sectors=304"
        )]
    );
}

/// The book (which the MD, zpool and controller monitors read) is published again only when a
/// reading changes what it holds for a disk: a round that reads every disk as it was leaves the
/// published view as it is; a disk whose reading changed, or a read disk that is gone, makes a
/// new one.
#[test]
fn the_book_is_published_again_only_when_a_reading_changes_it() {
    let h = Host::new(&["sda", "sdd"]);
    let n = h.path("n");
    // sda: 1 reallocated sector in rounds 0 and 1, then 304 (two real captures of one model).
    let smartctl = h.smartctl(&format!(
        "/dev/sda) n=$(cat {n} 2>/dev/null || echo 0); echo $((n+1)) > {n}\n  case $n in\n  0|1) cat '{}';;\n  *) cat '{}';;\n  esac;;\n{}",
        fixture("sce-ata-seagate-st3500418as-188-packed-1-reallocated-1.json").display(),
        fixture("sce-ata-seagate-st3500418as-reallocated-304.json").display(),
        prints("/dev/sdd", "sce-ata-wdc-wd20efrx-red.json", 0),
        n = n.display(),
    ));
    let mut m = DriveCollector::new_inline(cfg(smartctl, 60_000, 5000), h.root());
    let mut d = Driver::new(h.root());
    d.sample(&mut m, 0.0);
    let first = m.book().view();
    assert_eq!(first.drives().count(), 2);
    let text0 = d.report(&mut m, 1.0);

    // Round 1: both disks read again, as they were.
    d.sample(&mut m, 60.0);
    assert_eq!(h.calls().len(), 4, "both disks read twice");
    assert!(
        Arc::ptr_eq(&first, &m.book().view()),
        "an unchanged round published the book again"
    );
    // The lines still carry each disk's probability, as before.
    let text1 = d.report(&mut m, 61.0);
    for dev in ["sda", "sdd"] {
        assert_eq!(
            field(line(&text1, dev), "failure_probability"),
            field(line(&text0, dev), "failure_probability"),
        );
    }

    // Round 2: sda's reallocated sectors grew: a new view, with its new entry.
    d.sample(&mut m, 120.0);
    let second = m.book().view();
    assert!(!Arc::ptr_eq(&first, &second));
    let (was, now) = (
        first.by_device("sda").unwrap(),
        second.by_device("sda").unwrap(),
    );
    assert!(now.afr > was.afr && now.at_risk, "{was:?} → {now:?}");
    let text2 = d.report(&mut m, 121.0);
    let p = |t: &str| field(line(t, "sda"), "failure_probability").unwrap();
    assert_ne!(p(&text2), p(&text1));

    // Round 3: sdd is gone: a new view without it.
    fs::remove_dir_all(h.path("sys/block/sdd")).unwrap();
    d.sample(&mut m, 180.0);
    let third = m.book().view();
    assert!(!Arc::ptr_eq(&second, &third));
    assert!(third.by_device("sdd").is_none() && third.by_device("sda").is_some());
}

/// The RAID controller monitor names the virtual drive of its physical drives in the book: the
/// `drive` line of the disk with that serial or WWN carries it as `raid_vd`.
#[test]
fn a_disk_named_by_a_controller_carries_its_virtual_drive() {
    let h = Host::new(&["sda", "sdd"]);
    let smartctl = h.smartctl(&format!(
        "{}{}",
        prints("/dev/sda", "sce-ata-toshiba-mg09aca18te.json", 0),
        prints("/dev/sdd", "sce-ata-wdc-wd20efrx-red.json", 0),
    ));
    let book = DriveBook::new(false);
    // (the corpus' serials are redacted alike: by WWN, which storcli also gives)
    let wwn =
        smartctl::parse(&fs::read_to_string(fixture("sce-ata-toshiba-mg09aca18te.json")).unwrap())
            .unwrap()
            .wwn
            .unwrap();
    book.publish_raid_vds(vec![(None, Some(format!("0x{wwn}")), "c0/v1".into())]);
    let mut m = DriveCollector::new_inline(cfg(smartctl, 60_000, 5000), h.root())
        .with_book(book.clone(), RiskModel::default());
    let mut d = Driver::new(h.root());
    d.sample(&mut m, 0.0);
    let text = d.report(&mut m, 1.0);
    assert!(line(&text, "sda").contains(",raid_vd=c0/v1 "), "{text}");
    assert!(!line(&text, "sdd").contains("raid_vd="), "{text}");
    // and the readings are in the book, by device
    assert!(book.view().by_device("sda").is_some());
}

/// smartd's attribute log `name` (`agent/fixtures/smartd-attrlog`), its last line as written now.
fn attrlog_fixture(name: &str) -> String {
    fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/smartd-attrlog")
            .join(name),
    )
    .unwrap()
}

/// Appends `text` to the log at `path` and dates it now (the kernel's file times are coarse:
/// a line appended right after a reading could look older than it).
fn append_log(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = fs::File::options()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f.set_modified(std::time::SystemTime::now()).unwrap();
}

/// A host with an ATA disk (sda), an NVMe disk and a SAS disk, read by smartctl from real
/// fixtures, and smartd's attribute logs under `<dir>/smartd/attrlog.`.
fn attrlog_host() -> (Host, PathBuf, DriveConfig) {
    let h = Host::new(&["sda", "sdb", "nvme0n1"]);
    fs::create_dir_all(h.path("smartd")).unwrap();
    let smartctl = h.smartctl(&format!(
        "{}{}{}",
        prints(
            "/dev/sda",
            "sce-ata-seagate-st3000nm0033-188-packed-4-4-4.json",
            0
        ),
        prints("/dev/sdb", "libblockdev-scsi-seagate-st600mp0036.json", 0),
        prints("/dev/nvme0n1", "sce-nvme-samsung-970-evo-plus.json", 0),
    ));
    let mut c = cfg(smartctl, 60_000, 5000);
    let prefix = h.path("smartd/attrlog.");
    c.smartd_attrlog_prefix = prefix.clone();
    c.smartd_attrlog_full_every = 3;
    // smartd's logs are there before the first reading (smartd writes a line when it starts).
    let ata = attrlog_fixture("synthetic-smartd75-ST3000NM0033_9ZM178-REDACTED.ata.csv");
    append_log(
        &ata_log(&prefix),
        &format!("{}\n", ata.lines().next().unwrap()),
    );
    append_log(
        &nvme_log(&prefix),
        &attrlog_fixture("synthetic-smartd75-Samsung_SSD_970_EVO_Plus_250GB-REDACTED.nvme.csv"),
    );
    (h, prefix, c)
}

fn nvme_log(prefix: &Path) -> PathBuf {
    PathBuf::from(format!(
        "{}Samsung_SSD_970_EVO_Plus_250GB-REDACTED.nvme.csv",
        prefix.display()
    ))
}

fn ata_log(prefix: &Path) -> PathBuf {
    PathBuf::from(format!(
        "{}ST3000NM0033_9ZM178-REDACTED.ata.csv",
        prefix.display()
    ))
}

/// The devices smartctl was called for after the first `skip` calls, sorted, once each (the
/// SAS disk's `-l error` call is the fake's JSON, so its count is asked for every round).
fn called_since(h: &Host, skip: usize) -> Vec<String> {
    let mut v: Vec<String> = h.calls().into_iter().skip(skip).map(|(_, d)| d).collect();
    v.sort();
    v.dedup();
    v
}

/// A disk whose attribute log has a new line changing nothing its reading depends on is not
/// read by smartctl: its line is the last reading with the log's temperature and power-on
/// hours; the `full_every`-th round reads it again whatever the log says. A SAS disk is read by
/// smartctl every round (its verdict is not in the log).
#[test]
fn an_unchanged_fresh_attribute_log_replaces_smartctl_until_the_kth_round() {
    let (h, prefix, c) = attrlog_host();
    let nvme_text =
        attrlog_fixture("synthetic-smartd75-Samsung_SSD_970_EVO_Plus_250GB-REDACTED.nvme.csv");
    let mut m = DriveCollector::new_inline(c, h.root());
    let mut d = Driver::new(h.root());
    d.sample(&mut m, 0.0);
    assert_eq!(
        called_since(&h, 0),
        ["/dev/nvme0n1", "/dev/sda", "/dev/sdb"]
    );
    let n = h.calls().len();
    let text = d.report(&mut m, 1.0);
    let before = line(&text, "sda").to_owned();
    assert_eq!(field(&before, "temperature_c").as_deref(), Some("22i"));
    assert_eq!(field(&before, "full_read_age_s"), None);

    // smartd's cycle after the reading: a log of 5,000 older lines (only its tail is read)
    // whose last line moved only what the reading does not depend on (error rates, 9, 190,
    // 194, each on the same side of its threshold).
    let log = attrlog_fixture("synthetic-smartd75-ST3000NM0033_9ZM178-REDACTED.ata.csv");
    let old_line = log.lines().next().unwrap();
    let mut big = String::new();
    for _ in 0..5000 {
        big.push_str(old_line);
        big.push('\n');
    }
    big.push_str(&log);
    append_log(&ata_log(&prefix), &big);
    append_log(&nvme_log(&prefix), &nvme_text);
    d.sample(&mut m, 61.0);
    assert_eq!(
        called_since(&h, n),
        ["/dev/sdb"],
        "sda and nvme0n1 not called"
    );
    let n = h.calls().len();
    let text = d.report(&mut m, 62.0);
    let sda = line(&text, "sda");
    assert_eq!(field(sda, "temperature_c").as_deref(), Some("23i"), "{sda}");
    assert_eq!(field(sda, "power_on_hours").as_deref(), Some("57745i"));
    assert_eq!(field(sda, "command_timeout").as_deref(), Some("4i"));
    assert_eq!(field(sda, "health_ok").as_deref(), Some("true"));
    assert_eq!(field(sda, "read_ok").as_deref(), Some("true"));
    assert_eq!(field(sda, "full_read_age_s").as_deref(), Some("62i"));
    let age: i64 = field(sda, "last_read_age_s")
        .unwrap()
        .trim_end_matches('i')
        .parse()
        .unwrap();
    assert!(age <= 2, "{sda}");
    let nvme = line(&text, "nvme0n1");
    assert_eq!(field(nvme, "power_on_hours").as_deref(), Some("3149i"));
    assert_eq!(field(nvme, "full_read_age_s").as_deref(), Some("62i"));
    assert_eq!(d.error_total(), 0);

    // One line confirms once: without a new one, smartctl reads the disk.
    d.sample(&mut m, 122.0);
    assert_eq!(
        called_since(&h, n),
        ["/dev/nvme0n1", "/dev/sda", "/dev/sdb"]
    );
    let text = d.report(&mut m, 123.0);
    assert_eq!(field(line(&text, "sda"), "full_read_age_s"), None);
    assert_eq!(
        field(line(&text, "sda"), "temperature_c").as_deref(),
        Some("22i")
    );

    // Two rounds confirmed in a row, then (full_every = 3) smartctl, new line or not.
    for (round, t) in [(3, 183.0), (4, 244.0), (5, 305.0)] {
        append_log(&ata_log(&prefix), log.lines().last().unwrap());
        append_log(&ata_log(&prefix), "\n");
        let n = h.calls().len();
        d.sample(&mut m, t);
        let sda_called = called_since(&h, n).contains(&"/dev/sda".to_owned());
        assert_eq!(sda_called, round == 5, "round {round}");
    }
}

/// Each of a changed value, a stale log, a line smartd is still writing, and a log that does
/// not parse makes smartctl read the disk.
#[test]
fn a_changed_stale_half_written_or_bad_log_leaves_the_disk_to_smartctl() {
    let log = attrlog_fixture("synthetic-smartd75-ST3000NM0033_9ZM178-REDACTED.ata.csv");
    let last = log.lines().last().unwrap().to_owned();
    let cases: [(&str, String); 6] = [
        // the control: the same line again confirms the reading
        ("unchanged", last.clone() + "\n"),
        // a reallocated sector more (5's raw)
        (
            "reallocated",
            last.replace("\t5;100;1;", "\t5;100;2;") + "\n",
        ),
        // attribute 1's value at its threshold (44): the verdict may have changed
        ("at threshold", last.replace("\t1;76;", "\t1;44;") + "\n"),
        // a new attribute appeared
        ("new attribute", last.clone() + "\t231;100;0;\n"),
        // smartd is writing its next line
        (
            "half written",
            last.clone() + "\n2026-12-06 05:00:00;\t1;75;354",
        ),
        (
            "garbage",
            "2026-12-06 05:00:00;\tnot;a;log;line\n".to_owned(),
        ),
    ];
    for (what, text) in cases {
        let (h, prefix, c) = attrlog_host();
        let mut m = DriveCollector::new_inline(c, h.root());
        let mut d = Driver::new(h.root());
        d.sample(&mut m, 0.0);
        append_log(&ata_log(&prefix), &text);
        let n = h.calls().len();
        d.sample(&mut m, 61.0);
        assert_eq!(
            called_since(&h, n).contains(&"/dev/sda".to_owned()),
            what != "unchanged",
            "{what}: sda read by smartctl or not"
        );
        assert_eq!(d.error_total(), 0, "{what}");
    }

    // stale: a line written after the reading but older than smartd_attrlog_max_age
    let (h, prefix, mut c) = attrlog_host();
    c.smartd_attrlog_max_age = Duration::from_millis(300);
    let mut m = DriveCollector::new_inline(c, h.root());
    let mut d = Driver::new(h.root());
    d.sample(&mut m, 0.0);
    append_log(&ata_log(&prefix), &(last + "\n"));
    std::thread::sleep(Duration::from_millis(600));
    let n = h.calls().len();
    d.sample(&mut m, 61.0);
    assert!(called_since(&h, n).contains(&"/dev/sda".to_owned()));
}

/// A log that first turns up after a disk's reading confirms from the disk's next smartctl
/// reading on: the reading found no log, so nothing was kept for one to confirm.
#[test]
fn a_log_that_turns_up_after_the_reading_confirms_the_next_one() {
    let (h, prefix, c) = attrlog_host();
    let path = ata_log(&prefix);
    fs::remove_file(&path).unwrap();
    let last = attrlog_fixture("synthetic-smartd75-ST3000NM0033_9ZM178-REDACTED.ata.csv")
        .lines()
        .last()
        .unwrap()
        .to_owned()
        + "\n";
    let mut m = DriveCollector::new_inline(c, h.root());
    let mut d = Driver::new(h.root());
    d.sample(&mut m, 0.0);
    append_log(&path, &last);
    let n = h.calls().len();
    d.sample(&mut m, 61.0);
    assert!(called_since(&h, n).contains(&"/dev/sda".to_owned()));
    append_log(&path, &last);
    let n = h.calls().len();
    d.sample(&mut m, 122.0);
    assert!(!called_since(&h, n).contains(&"/dev/sda".to_owned()));
}

/// Out of schedule (a degraded array's member) and with the logs turned off, smartctl reads
/// the disk whatever its log says.
#[test]
fn asked_for_disks_and_an_empty_prefix_always_run_smartctl() {
    let log = attrlog_fixture("synthetic-smartd75-ST3000NM0033_9ZM178-REDACTED.ata.csv");
    let (h, prefix, mut c) = attrlog_host();
    c.smartd_attrlog_prefix = PathBuf::new();
    let mut m = DriveCollector::new_inline(c, h.root());
    let mut d = Driver::new(h.root());
    d.sample(&mut m, 0.0);
    append_log(&ata_log(&prefix), &log);
    let n = h.calls().len();
    d.sample(&mut m, 61.0);
    assert!(called_since(&h, n).contains(&"/dev/sda".to_owned()));
}

/// The attribute-log line smartd would write for smartctl fixture `name` (its ATA table as
/// `\tID;VALUE;RAW;` tuples), and the log's file name after the prefix.
fn ata_log_of(name: &str) -> (String, String) {
    let v: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(fixture(name)).unwrap()).unwrap();
    let mut line = "2026-12-06 04:00:00;".to_owned();
    for a in v["ata_smart_attributes"]["table"].as_array().unwrap() {
        line.push_str(&format!(
            "\t{};{};{};",
            a["id"], a["value"], a["raw"]["value"]
        ));
    }
    line.push('\n');
    let file = crate::sources::smartd_attrlog::file_names(
        crate::sources::smartd_attrlog::LogProtocol::Ata,
        v["model_name"].as_str().unwrap(),
        v["serial_number"].as_str().unwrap(),
        None,
    )
    .remove(0);
    (line, file)
}

/// A disk behind a RAID controller (`-d megaraid,N`) is read by smartctl every round, whatever
/// its model's and serial's attribute log says; a disk by its kernel name is confirmed.
#[test]
fn a_disk_behind_a_controller_is_never_confirmed_by_a_log() {
    let h = Host::new(&["sda"]);
    h.write(
        "proc/devices",
        "Character devices:\n  1 mem\n250 megaraid_sas_ioctl\n\nBlock devices:\n  8 sd\n",
    );
    let p = h.path("bin/smartctl");
    h.write(
        "bin/smartctl",
        &format!(
            "#!/bin/sh\necho \"$*\" >> {log}\ncase \"$*\" in\n\
             --scan) echo '/dev/bus/0 -d megaraid,1 # /dev/bus/0 [megaraid_disk_01], SCSI device';;\n\
             *'-d megaraid,1 /dev/bus/0') cat '{one}'; exit 4;;\n\
             *' /dev/sda') cat '{sda}';;\n*) exit 1;;\nesac\n",
            log = h.path("calls").display(),
            one = fixture("scrutiny-ata-wd4000fyyx-sat-megaraid-1-exit4.json").display(),
            sda = fixture("sce-ata-seagate-st3000nm0033-188-packed-4-4-4.json").display(),
        ),
    );
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    fs::create_dir_all(h.path("smartd")).unwrap();
    let prefix = h.path("smartd/attrlog.");
    let mut c = cfg(p, 60_000, 5000);
    c.smartd_attrlog_prefix = prefix.clone();
    let logs = [
        "scrutiny-ata-wd4000fyyx-sat-megaraid-1-exit4.json",
        "sce-ata-seagate-st3000nm0033-188-packed-4-4-4.json",
    ];
    // smartd's logs are there before the reading, and get a new line after it.
    for f in logs {
        let (line, file) = ata_log_of(f);
        append_log(&PathBuf::from(format!("{}{file}", prefix.display())), &line);
    }
    let mut m = DriveCollector::new_inline(c, h.root());
    let mut d = Driver::new(h.root());
    d.sample(&mut m, 0.0);
    let calls = |h: &Host| fs::read_to_string(h.path("calls")).unwrap();
    assert!(
        calls(&h).contains("-d megaraid,1 /dev/bus/0"),
        "{}",
        calls(&h)
    );
    for f in logs {
        let (line, file) = ata_log_of(f);
        append_log(&PathBuf::from(format!("{}{file}", prefix.display())), &line);
    }
    let before = calls(&h).lines().count();
    d.sample(&mut m, 61.0);
    let round: Vec<String> = calls(&h).lines().skip(before).map(str::to_owned).collect();
    assert!(
        round
            .iter()
            .any(|c| c.ends_with("-d megaraid,1 /dev/bus/0")),
        "{round:?}"
    );
    assert!(
        !round.iter().any(|c| c.ends_with(" /dev/sda")),
        "sda confirmed by its log: {round:?}"
    );
}
