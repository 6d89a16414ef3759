//! The real agent's drive and hardware-RAID monitors on the drive scenarios, through the
//! simulator's `bin/smartctl` and `bin/storcli64`: stepped without sleeping, one report over the
//! run, and the report shows the incident.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use storwatch_agent::config::Config;
use storwatch_agent::scheduler::Scheduler;
use storwatch_agent::sink::SinkStats;
use storwatch_sim::scenario::Kind;
use storwatch_sim::sim::Sim;
use storwatch_test_support::lp::field;
use storwatch_wire::lp::LineWriter;

const TS: i64 = 1_763_000_000_000_000_000;

/// Only the drive and hwraid monitors, reading the tree's stand-ins: every disk each 10 s,
/// the controller each 5 s.
fn config(root: &Path) -> Config {
    let mut cfg = Config {
        proc_root: root.join("proc"),
        sys_root: root.join("sys"),
        ..Config::default()
    };
    cfg.md.enabled = false;
    cfg.mpath.enabled = false;
    cfg.zpool.enabled = false;
    cfg.fs.enabled = false;
    cfg.drive.smartctl = root.join("bin/smartctl");
    cfg.drive.interval = Duration::from_secs(10);
    cfg.hwraid.storcli = root.join("bin/storcli64");
    cfg.hwraid.interval = Duration::from_secs(5);
    cfg
}

/// Runs `kind` for `steps` seconds at `speed` under the two monitors; the report over the run.
fn report(kind: Kind, steps: u32, speed: f64) -> String {
    report_with(kind, steps, speed, |_| {})
}

/// [`report`], with the monitors' configuration changed by `tweak`.
fn report_with(kind: Kind, steps: u32, speed: f64, tweak: impl Fn(&mut Config)) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(dir.path(), kind, "sim1", 7, speed).unwrap();
    let mut cfg = config(dir.path());
    tweak(&mut cfg);
    let monitors = storwatch_agent::assemble::storage(&cfg, true);
    let mut s = Scheduler::new(&cfg, monitors);
    s.sample(0.0);
    for i in 1..=steps {
        sim.step().unwrap();
        s.sample(f64::from(i));
    }
    let mut w = LineWriter::new("sim1", &[]);
    s.report(&mut w, TS, f64::from(steps), SinkStats::default());
    let text = String::from_utf8(w.take()).unwrap();
    let errors: Vec<_> = s.error_totals().into_iter().filter(|e| e.1 > 0).collect();
    assert!(errors.is_empty(), "source errors {errors:?}\n{text}");
    text
}

/// The line of `measurement` whose tags contain `tag`.
fn line<'a>(text: &'a str, measurement: &str, tag: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(&format!("{measurement},")) && l.contains(tag))
        .unwrap_or_else(|| panic!("no {measurement} line with {tag}:\n{text}"))
}

fn num(line: &str, key: &str) -> f64 {
    field(line, key).parse().unwrap()
}

#[test]
fn hwraid_rebuild_shows_the_degraded_vd_its_rebuild_and_the_second_members_pending_sectors() {
    // 20 s at --speed 60: 20 minutes of the timeline, the second member failing from minute 10
    let text = report(Kind::HwraidRebuild, 20, 60.0);
    let vd = line(&text, "raid_vd", "vd=c0/v0");
    assert!(vd.contains("device=sdb"), "{vd}");
    // a RAID6 with one member gone is still fault tolerant: the firmware says partially degraded
    assert_eq!(field(vd, "state"), "\"Pdgd\"", "{vd}");
    assert_eq!(field(vd, "degraded"), "true", "{vd}");
    assert_eq!(num(vd, "redundancy_left"), 1.0, "{vd}");
    assert_eq!(num(vd, "members_rebuilding"), 1.0, "{vd}");
    let pct = num(vd, "rebuild_progress_pct");
    assert!((34.0..=41.0).contains(&pct), "{vd}");
    assert!(num(vd, "rebuild_eta_s") > 5.0 * 3600.0, "{vd}");
    assert!(num(vd, "members_at_risk") >= 1.0, "{vd}");
    let other = line(&text, "raid_vd", "vd=c0/v1");
    assert!(other.contains("device=sdc"), "{other}");
    assert_eq!(field(other, "state"), "\"Optl\"", "{other}");
    let weak = line(&text, "raid_pd", "slot=64:7,");
    assert!(num(weak, "media_errors") > 0.0, "{weak}");
    let spare = line(&text, "raid_pd", "slot=64:24,");
    assert_eq!(field(spare, "state"), "\"Rbld\"", "{spare}");
    let drive = line(&text, "drive", "device=bus/0:megaraid\\,27");
    assert!(num(drive, "pending_sectors") > 0.0, "{drive}");
    let failed = line(&text, "drive", "device=bus/0:megaraid\\,23");
    assert_eq!(field(failed, "health_ok"), "false", "{failed}");
    let ctl = line(&text, "raid_controller", "controller=c0");
    assert_eq!(field(ctl, "bbu_ok"), "true", "{ctl}");
    assert_eq!(num(ctl, "vds_degraded"), 1.0, "{ctl}");
    // the growth is an event
    assert!(
        text.lines().any(|l| l.starts_with("event,")
            && l.contains("megaraid\\,27")
            && l.contains("pending_sectors")),
        "{text}"
    );
}

#[test]
fn hwraid_stalled_shows_no_redundancy_left_a_stalled_rebuild_and_a_risk_far_above_the_rules() {
    // `[hwraid] stall_after` 2 min instead of 2 h: the percentage has not moved for that long
    // after 150 s; the controller polled every 5 s
    let text = report_with(Kind::HwraidStalled, 150, 1.0, |c| {
        c.hwraid.stall_after = Duration::from_secs(120);
    });
    let vd = line(&text, "raid_vd", "vd=c0/v0");
    assert!(vd.contains("device=sdb"), "{vd}");
    assert_eq!(field(vd, "state"), "\"Dgrd\"", "{vd}");
    assert_eq!(field(vd, "degraded"), "true", "{vd}");
    assert_eq!(num(vd, "redundancy_left"), 0.0, "{vd}");
    assert_eq!(num(vd, "members"), 12.0, "{vd}");
    assert_eq!(num(vd, "members_online"), 10.0, "{vd}");
    assert_eq!(num(vd, "members_rebuilding"), 1.0, "{vd}");
    assert_eq!(num(vd, "rebuild_progress_pct"), 41.0, "{vd}");
    assert_eq!(field(vd, "rebuild_stalled"), "true", "{vd}");
    // a stalled rebuild has no ETA
    assert!(!vd.contains("rebuild_eta_s="), "{vd}");
    // the rule's threshold is 0.1 %
    let risk = num(vd, "rebuild_risk");
    assert!(risk > 0.1, "{vd}");
    assert!(num(vd, "members_at_risk") >= 1.0, "{vd}");
    let gone = line(&text, "raid_pd", "slot=64:9,");
    assert_eq!(field(gone, "state"), "\"Offln\"", "{gone}");
    let rebuilding = line(&text, "raid_pd", "slot=64:3,");
    assert_eq!(field(rebuilding, "state"), "\"Rbld\"", "{rebuilding}");
    let frail = line(&text, "raid_pd", "slot=64:7,");
    assert!(num(frail, "media_errors") > 212.0, "{frail}");
    let ctl = line(&text, "raid_controller", "controller=c0");
    assert_eq!(num(ctl, "vds_degraded"), 1.0, "{ctl}");
    // the stall is an event
    assert!(
        text.lines()
            .any(|l| l.starts_with("event,") && l.contains("c0/v0") && l.contains("stalled")),
        "{text}"
    );
}

#[test]
fn hwraid_stalled_is_not_stalled_before_stall_after() {
    // the default 2 h: the same frozen percentage for 150 s is no stall yet, and the ETA is
    // storcli's (growing) estimate
    let text = report(Kind::HwraidStalled, 150, 1.0);
    let vd = line(&text, "raid_vd", "vd=c0/v0");
    assert_eq!(field(vd, "rebuild_stalled"), "false", "{vd}");
    assert!(num(vd, "rebuild_eta_s") > 500.0 * 3600.0, "{vd}");
    assert!(num(vd, "rebuild_risk") > 0.1, "{vd}");
}

#[test]
fn hwraid_cache_wt_falls_to_write_through_when_the_bbu_fails() {
    let text = report(Kind::HwraidCacheWt, 20, 10.0);
    let ctl = line(&text, "raid_controller", "controller=c0");
    assert_eq!(field(ctl, "bbu_state"), "\"Failed\"", "{ctl}");
    for vd in ["vd=c0/v0", "vd=c0/v1"] {
        let l = line(&text, "raid_vd", vd);
        assert_eq!(field(l, "write_back_configured"), "true", "{l}");
        assert_eq!(field(l, "write_back_active"), "false", "{l}");
    }
}

#[test]
fn nvme_wearout_shows_the_worn_drive_past_its_endurance_and_spare_threshold() {
    // 60 s at --speed 20: 20 minutes of the timeline
    let text = report(Kind::NvmeWearout, 60, 20.0);
    let worn = line(&text, "drive", "device=nvme2n1");
    assert!(num(worn, "percentage_used_pct") > 100.0, "{worn}");
    assert!(
        num(worn, "available_spare_pct") < num(worn, "available_spare_threshold_pct"),
        "{worn}"
    );
    assert_eq!(num(worn, "critical_warning"), 1.0, "{worn}");
    assert_eq!(field(worn, "health_ok"), "false", "{worn}");
    assert!(num(worn, "media_errors") > 0.0, "{worn}");
    let fine = line(&text, "drive", "device=nvme0n1");
    assert_eq!(field(fine, "health_ok"), "true", "{fine}");
    assert_eq!(num(fine, "critical_warning"), 0.0, "{fine}");
    // no controller here: no storcli, no raid lines
    assert!(!text.contains("raid_controller,"), "{text}");
}
