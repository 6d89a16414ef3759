//! The real agent on simulated hosts: step a scenario a few seconds (no sleeping: each step
//! advances uptime by exactly 1 s), sample after every step with the agent's own `Scheduler` and
//! health monitors, and check that the report shows what the scenario is made to show.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use storwatch_agent::collect::md::MdCollector;
use storwatch_agent::collect::mpath::{MpathCollector, MpathConfig};
use storwatch_agent::collect::zpool::{ZpoolCollector, ZpoolConfig};
use storwatch_agent::collect::Collector;
use storwatch_agent::command::SystemRunner;
use storwatch_agent::config::Config;
use storwatch_agent::health::risk::RiskModel;
use storwatch_agent::scheduler::Scheduler;
use storwatch_agent::sink::SinkStats;
use storwatch_sim::scenario::Kind;
use storwatch_sim::sim::Sim;
use storwatch_test_support::lp::field;
use storwatch_wire::lp::LineWriter;

const TS: i64 = 1_763_000_000_000_000_000;

fn config(root: &Path) -> Config {
    Config {
        proc_root: root.join("proc"),
        sys_root: root.join("sys"),
        ..Config::default()
    }
}

fn mpath_monitor(root: &Path, dmsetup_interval_s: f64) -> Box<dyn Collector> {
    Box::new(MpathCollector::new_inline(
        MpathConfig {
            dmsetup: root.join("bin/dmsetup"),
            dmsetup_interval_s,
            use_ioctl: false,
            use_multipathd: false,
            ..MpathConfig::default()
        },
        Arc::new(SystemRunner),
    ))
}

/// Runs `kind` for `steps` seconds under the agent and returns its report.
fn report(
    kind: Kind,
    steps: u32,
    monitors: impl FnOnce(&Path) -> Vec<Box<dyn Collector>>,
) -> String {
    report_with(kind, steps, 1.0, monitors)
}

/// [`report`] with the scenario's timeline `speed` times faster; one report over the whole run,
/// and no source may have failed.
fn report_with(
    kind: Kind,
    steps: u32,
    speed: f64,
    monitors: impl FnOnce(&Path) -> Vec<Box<dyn Collector>>,
) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(dir.path(), kind, "sim1", 7, speed).unwrap();
    let mut s = Scheduler::new(&config(dir.path()), monitors(dir.path()));
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

fn lines<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(prefix)).collect()
}

fn num(line: &str, key: &str) -> f64 {
    field(line, key).parse().unwrap()
}

fn disk<'a>(text: &'a str, device: &str) -> &'a str {
    lines(text, &format!("disk,host=sim1,device={device},"))
        .first()
        .copied()
        .unwrap_or_else(|| panic!("no disk line for {device}\n{text}"))
}

#[test]
fn healthy_server_is_busy_but_never_saturated() {
    let text = report(Kind::Healthy, 12, |_| Vec::new());
    let disks = lines(&text, "disk,");
    // 2 OS disks, 8 paths, 4 maps
    assert_eq!(disks.len(), 14, "{text}");
    for l in &disks {
        assert_eq!(num(l, "saturated_s"), 0.0, "{l}");
        assert!(num(l, "util_max_pct") < 90.0, "{l}");
    }
    for m in ["dm-0", "dm-1", "dm-2", "dm-3"] {
        let l = disk(&text, m);
        assert!(l.contains(",kind=mpath,"), "{l}");
        let util = num(l, "util_pct");
        assert!((8.0..60.0).contains(&util), "{l}");
        // 1 MiB reads
        assert!((num(l, "rareq_sz_kb") - 1024.0).abs() < 1.0, "{l}");
    }
    let nic = lines(&text, "net,host=sim1,iface=ens1f0 ")[0];
    let util = num(nic, "util_pct");
    assert!((20.0..60.0).contains(&util), "{nic}");
    assert_eq!(num(nic, "speed_mbps"), 10000.0);
    // every CPU's jiffies sum to 100 per second: the shares add up to 100 %
    let cpu = lines(&text, "cpu,")[0];
    let sum: f64 = [
        "user_pct",
        "nice_pct",
        "system_pct",
        "iowait_pct",
        "steal_pct",
        "idle_pct",
    ]
    .iter()
    .map(|k| num(cpu, k))
    .sum();
    assert!((sum - 100.0).abs() < 0.01, "{sum} {cpu}");
}

#[test]
fn write_storm_pins_every_lun_at_100_percent_with_the_nic_far_below_line_rate() {
    let text = report(Kind::WriteStorm, 12, |_| Vec::new());
    for m in ["dm-0", "dm-1", "dm-2", "dm-3"] {
        let l = disk(&text, m);
        assert_eq!(num(l, "util_max_pct"), 100.0, "{l}");
        assert!(num(l, "saturated_s") >= 10.0, "{l}");
        assert!(num(l, "w_await_ms") > 50.0, "{l}");
        assert!(num(l, "aqu_sz") > 30.0, "{l}");
    }
    // the active path of each map is saturated too; the standby path idles
    assert!(num(disk(&text, "sdc"), "saturated_s") > 0.0);
    assert_eq!(num(disk(&text, "sdd"), "w_per_s"), 0.0);
    let nic = lines(&text, "net,host=sim1,iface=ens1f0 ")[0];
    assert!(num(nic, "util_pct") < 30.0, "{nic}");
}

#[test]
fn md_rebuild_reports_a_recovering_raid6_then_a_second_failure() {
    let text = report(Kind::MdRebuild, 5, |_| {
        vec![Box::new(MdCollector::new(
            Default::default(),
            RiskModel::default(),
        ))]
    });
    let md = lines(&text, "md,host=sim1,array=md0,level=raid6 ");
    assert_eq!(md.len(), 1, "{text}");
    let md = md[0];
    assert_eq!(field(md, "state"), "\"recovering\"", "{md}");
    assert_eq!(field(md, "sync_action"), "\"recover\"", "{md}");
    assert_eq!(num(md, "members"), 14.0, "{md}");
    assert_eq!(num(md, "degraded"), 1.0, "{md}");
    let speed = num(md, "sync_speed_kbps");
    assert!((120_000.0..170_000.0).contains(&speed), "{md}");
    let pct = num(md, "sync_pct");
    assert!((15.0..35.0).contains(&pct), "{md}");
    // members read at the rebuild speed: busy, not saturated
    let member = disk(&text, "sdc");
    assert!((40.0..95.0).contains(&num(member, "util_pct")), "{member}");

    // Ten minutes in, slot 11 fails: two members down, recovery continuing.
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(dir.path(), Kind::MdRebuild, "sim1", 7, 60.0).unwrap();
    let mut mon = MdCollector::new(Default::default(), RiskModel::default());
    let root = storwatch_agent::root::Root::new(dir.path().join("proc"), dir.path().join("sys"));
    let mut events = Vec::new();
    for i in 0..15 {
        sim.step().unwrap();
        mon.poll(&root, f64::from(i), &mut events).unwrap();
    }
    let a = mon.array("md0").unwrap();
    assert_eq!((a.degraded, a.failed), (2, 1), "{a:?}");
    assert_eq!(a.state.as_str(), "recovering");
    assert_eq!(a.redundancy_left, Some(0), "{a:?}");
    assert!(!events.is_empty());
}

#[test]
fn nic_saturation_runs_the_link_above_90_percent_with_drops() {
    let text = report(Kind::NicSaturation, 12, |_| Vec::new());
    let nic = lines(&text, "net,host=sim1,iface=ens1f0 ")[0];
    let util = num(nic, "util_pct");
    assert!(util > 90.0 && util <= 100.0, "{nic}");
    assert!(num(nic, "rx_drops_per_s") > 10.0, "{nic}");
    assert!(num(nic, "tx_packets_per_s") > 100_000.0, "{nic}");
}

#[test]
fn readahead_drift_shows_64_kb_on_the_data_devices() {
    let text = report(Kind::ReadaheadDrift, 3, |_| Vec::new());
    for dev in ["sdc", "dm-0", "dm-3"] {
        let l = lines(&text, &format!("disk_tunables,host=sim1,device={dev},"))[0];
        assert_eq!(num(l, "read_ahead_kb"), 64.0, "{l}");
    }
    let healthy = report(Kind::Healthy, 3, |_| Vec::new());
    let l = lines(&healthy, "disk_tunables,host=sim1,device=dm-0,")[0];
    assert_eq!(num(l, "read_ahead_kb"), 8192.0, "{l}");
    // small readahead: 64 KiB reads
    assert!((num(disk(&text, "dm-0"), "rareq_sz_kb") - 64.0).abs() < 1.0);
}

#[test]
fn worker_staging_saturates_the_local_disk_with_iowait_and_psi_high() {
    let text = report(Kind::WorkerStaging, 12, |_| Vec::new());
    let sda = disk(&text, "sda");
    assert_eq!(num(sda, "util_max_pct"), 100.0, "{sda}");
    assert!(num(sda, "saturated_s") > 5.0, "{sda}");
    let cpu = lines(&text, "cpu,")[0];
    assert!(num(cpu, "iowait_pct") > 15.0, "{cpu}");
    assert_eq!(num(cpu, "cpus"), 64.0);
    let psi = lines(&text, "pressure,")[0];
    assert!(num(psi, "io_some_pct") > 50.0, "{psi}");
}

#[test]
fn multipath_flap_fails_and_reinstates_a_path_in_sysfs_and_device_mapper() {
    // fails at tick 3, stays down 5-20 s, the next failure 30-90 s later at speed 1
    let text = report(Kind::MultipathFlap, 30, |root| {
        vec![mpath_monitor(root, 0.0)]
    });
    let sdc = lines(&text, "mpath_path,host=sim1,map=mpatha,path=sdc,")
        .first()
        .copied()
        .unwrap_or_else(|| panic!("{text}"));
    assert!(num(sdc, "transitions") >= 2.0, "{sdc}");
    assert!(num(sdc, "fail_count") >= 1.0, "{sdc}");
    let map = lines(&text, "mpath,host=sim1,map=mpatha,")[0];
    assert_eq!(num(map, "paths"), 2.0, "{map}");
    assert_eq!(num(map, "groups"), 2.0, "{map}");
    // the other maps never moved
    let b = lines(&text, "mpath,host=sim1,map=mpathb,")[0];
    assert_eq!(num(b, "transitions"), 0.0, "{b}");
}

#[test]
fn zpool_resilver_through_the_zpool_stand_in() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(dir.path(), Kind::ZpoolResilver, "sim1", 7, 1.0).unwrap();
    let mut m = ZpoolCollector::new(
        ZpoolConfig {
            zpool: dir.path().join("bin/zpool"),
            interval_s: 0.2,
            timeout_s: 5.0,
            ..ZpoolConfig::default()
        },
        RiskModel::default(),
        Arc::new(SystemRunner),
    );
    let root = storwatch_agent::root::Root::new(dir.path().join("proc"), dir.path().join("sys"));
    let start = Instant::now();
    let mut out = String::new();
    let mut i = 0.0;
    while start.elapsed() < Duration::from_secs(15) {
        sim.step().unwrap();
        m.poll(&root, i, &mut Vec::new()).unwrap();
        i += 1.0;
        let mut w = LineWriter::new("sim1", &[]);
        m.report(&mut w, TS);
        out = String::from_utf8(w.take()).unwrap();
        if out.contains("scan=\"resilver\"") && out.contains("capacity_pct") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let pool = lines(&out, "zpool,host=sim1,pool=data ")
        .first()
        .copied()
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(field(pool, "health"), "\"DEGRADED\"", "{pool}");
    let cap = num(pool, "capacity_pct");
    assert!((86.5..87.5).contains(&cap), "{pool}");
    assert_eq!(field(pool, "capacity_over_85"), "true", "{pool}");
    assert_eq!(field(pool, "scan"), "\"resilver\"", "{pool}");
    let sdf = lines(&out, "zpool_vdev,host=sim1,pool=data,vdev=sdf,")[0];
    assert!(num(sdf, "cksum_errors") >= 3.0, "{sdf}");
    assert_eq!(m.command_errors(), 0, "{out}");
}

#[test]
fn burst_saturation_hides_three_10_s_bursts_in_a_low_hour() {
    // --speed 10: the hour is 360 ticks; each burst stays 10 one-second samples long.
    let text = report_with(Kind::BurstSaturation, 360, 10.0, |_| Vec::new());
    let b = disk(&text, "dm-1");
    assert_eq!(num(b, "util_max_pct"), 100.0, "{b}");
    let sat = num(b, "saturated_s");
    assert!((28.0..=31.0).contains(&sat), "three 10 s bursts: {b}");
    assert!(num(b, "util_pct") < 20.0, "the hour's mean hides them: {b}");
    for other in ["dm-0", "dm-2", "dm-3"] {
        assert_eq!(num(disk(&text, other), "saturated_s"), 0.0);
    }
}

#[test]
fn mixed_rw_loses_most_of_its_throughput_when_writers_join() {
    // --speed 10: reads alone for the first 6 ticks, then reads and writes mixed.
    let alone = report_with(Kind::MixedRw, 5, 10.0, |_| Vec::new());
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(dir.path(), Kind::MixedRw, "sim1", 7, 10.0).unwrap();
    for _ in 0..10 {
        sim.step().unwrap();
    }
    let mut s = Scheduler::new(&config(dir.path()), Vec::new());
    s.sample(0.0);
    for i in 1..=10 {
        sim.step().unwrap();
        s.sample(f64::from(i));
    }
    let mut w = LineWriter::new("sim1", &[]);
    s.report(&mut w, TS, 10.0, SinkStats::default());
    let mixed = String::from_utf8(w.take()).unwrap();
    let mb = |t: &str| {
        let l = disk(t, "dm-0");
        (num(l, "rkb_per_s") + num(l, "wkb_per_s")) / 1024.0
    };
    let (before, during) = (mb(&alone), mb(&mixed));
    assert!(during < before * 0.6, "{before} MB/s alone, {during} mixed");
    let l = disk(&mixed, "dm-0");
    assert!(num(l, "rkb_per_s") > 0.3 * num(l, "wkb_per_s"), "{l}");
    assert_eq!(num(l, "util_max_pct"), 100.0, "{l}");
}

#[test]
fn multipath_flap_shows_in_sysfs_between_dmsetup_runs() {
    // dmsetup only once (its default interval is 30 s): the agent must see the path go
    // offline and come back through device/state, which it re-reads from a kept-open file.
    let text = report(Kind::MultipathFlap, 30, |root| {
        vec![mpath_monitor(root, 3600.0)]
    });
    let sdc = lines(&text, "mpath_path,host=sim1,map=mpatha,path=sdc,")[0];
    assert!(num(sdc, "transitions") >= 2.0, "{sdc}");
}
