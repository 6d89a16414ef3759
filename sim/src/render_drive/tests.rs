//! The simulated tools' output read back with the agent's own parsers.

use std::process::Command;

use storwatch_agent::sources::smartctl::{self, OverallHealth, Protocol};
use storwatch_agent::sources::storcli::{self, BatteryState, PdState, VdState};

use super::*;
use crate::model::Host;
use crate::scenario::{Kind, Scenario, ALL};

fn host(kind: Kind, speed: f64) -> (Scenario, Host) {
    let mut sc = Scenario::new(kind, speed);
    let h = sc.build(&format!("t-{}", kind.name()), 7);
    (sc, h)
}

fn step(sc: &mut Scenario, h: &mut Host, n: u64) {
    for _ in 0..n {
        h.tick();
        sc.drive(h);
    }
}

fn controller(h: &Host) -> &Controller {
    h.drives.controller.as_ref().expect("a controller")
}

/// The SMART document of `did` behind the controller, parsed.
fn pd_smart(h: &Host, did: u32) -> smartctl::DriveHealth {
    let c = controller(h);
    let p = c.pds.iter().find(|p| p.did == did).expect("pd");
    let json = smartctl_json(
        &p.smart,
        "/dev/bus/0",
        &format!("sat+megaraid,{did}"),
        "/dev/bus/0 [megaraid_disk]",
        h.epoch_s,
    );
    smartctl::parse(&json).expect("parses")
}

#[test]
fn every_disk_of_every_scenario_has_smart_data_the_agent_reads() {
    for kind in ALL {
        let (_, h) = host(kind, 1.0);
        let vds: Vec<String> = h
            .drives
            .controller
            .iter()
            .flat_map(|c| c.vds.iter().map(|v| v.dev.clone()))
            .collect();
        for d in &h.devices {
            if !(d.name.starts_with("sd") || d.name.starts_with("nvme")) || vds.contains(&d.name) {
                continue;
            }
            let m = h
                .drives
                .disks
                .get(&d.name)
                .unwrap_or_else(|| panic!("{}: {} has no SMART data", kind.name(), d.name));
            let path = format!("/dev/{}", d.name);
            let json = smartctl_json(m, &path, "sat", &path, h.epoch_s);
            let r = smartctl::parse(&json).unwrap_or_else(|e| panic!("{}: {e}", d.name));
            assert_eq!(r.serial.as_deref(), Some(m.serial.as_str()));
            assert!(!m.serial.is_empty());
            assert_eq!(r.power_on_hours, Some(m.power_on_s / 3600));
            assert!(r.power_on_hours.unwrap_or(0) > 24 * 365, "{}", d.name);
            assert_eq!(
                r.health,
                OverallHealth::Passed,
                "{} {}",
                kind.name(),
                d.name
            );
            assert_eq!(r.outcome(), smartctl::Outcome::Read);
            assert_eq!(r.capacity_bytes, Some(m.capacity_bytes));
            match m.protocol {
                DriveProtocol::Ata => {
                    assert_eq!(r.protocol, Protocol::Ata);
                    let a = r.ata.expect("attributes");
                    assert_eq!(a.pending_sectors, Some(0));
                    assert_eq!(a.reallocated_sectors, Some(0));
                    assert!(a.failing_now.is_empty());
                    assert!(r.wwn.is_some());
                }
                DriveProtocol::Scsi => {
                    assert_eq!(r.protocol, Protocol::Scsi);
                    let s = r.scsi.expect("counters");
                    assert_eq!(s.grown_defects, Some(0));
                    let text = smartctl::parse_scsi_text(&smartctl_scsi_error_text(m))
                        .expect("text parses");
                    assert_eq!(text.non_medium_errors, Some(0));
                    assert_eq!(text.read_uncorrected, Some(0));
                    assert_eq!(text.verify_uncorrected, Some(0));
                }
                DriveProtocol::Nvme => {
                    assert_eq!(r.protocol, Protocol::Nvme);
                    assert!(r.nvme.is_some());
                }
            }
        }
    }
}

#[test]
fn hwraid_rebuild_storcli_documents_show_the_degraded_vd_and_its_rebuild() {
    let (mut sc, mut h) = host(Kind::HwraidRebuild, 1.0);
    let c = controller(&h);
    let all = storcli::parse(&storcli_show_all(c)).expect("show all parses");
    let ctl = all.first().expect("one controller");
    assert!(ctl.status.ok);
    assert_eq!(ctl.controller_status.as_deref(), Some("Needs Attention"));
    assert_eq!(ctl.virtual_drives.len(), 2);
    let v0 = ctl.virtual_drive(0, 0).expect("vd 0");
    // one of RAID6's two parities gone: partially degraded
    assert_eq!(v0.state, VdState::PartiallyDegraded);
    assert_eq!(v0.raid_level, "RAID6");
    assert!(!v0.write_cache_fell_back());
    assert_eq!(
        ctl.virtual_drive(1, 1).expect("vd 1").state,
        VdState::Optimal
    );
    assert_eq!(ctl.physical_drives.len(), 25);
    let slot = |s: u32| storcli::Slot {
        enclosure: Some(64),
        slot: s,
    };
    assert_eq!(ctl.drive(slot(24)).expect("spare").state, PdState::Rebuild);
    assert_eq!(
        ctl.drive(slot(3)).expect("failed").state,
        PdState::UnconfiguredBad
    );
    let bbu = ctl.batteries.first().expect("bbu");
    assert_eq!(bbu.state, BatteryState::Optimal);

    let vall = storcli::parse(&storcli_vall(c)).expect("vall parses");
    let v = vall
        .first()
        .and_then(|c| c.virtual_drive(0, 0))
        .expect("vd 0");
    assert_eq!(v.os_drive_name.as_deref(), Some("/dev/sdb"));
    assert_eq!(v.naa_id.as_deref(), Some(c.vds[0].naa_id.as_str()));
    assert_eq!(v.members.len(), 12);
    assert!(v.members.contains(&slot(24)));

    let rb = |h: &Host| {
        let r = storcli::parse(&storcli_rebuild(controller(h))).expect("rebuild parses");
        let rows = r.first().expect("ctl").rebuilds.clone();
        let going: Vec<_> = rows.into_iter().filter(|r| r.in_progress).collect();
        assert_eq!(going.len(), 1);
        going.into_iter().next().expect("one")
    };
    let first = rb(&h);
    assert_eq!(first.slot, slot(24));
    let p0 = first.progress_pct.expect("progress");
    assert!((34..=40).contains(&p0), "{p0}");
    let left0 = first.time_left_s.expect("time left");
    // 8 TB at ~180 MB/s, 60-66 % to go: 7-8 h
    assert!((6 * 3600..9 * 3600).contains(&left0), "{left0}");

    let pds = storcli::parse(&storcli_pds(c)).expect("pds parse");
    let pd = |doc: &[storcli::Controller], s: u32| {
        doc.first()
            .and_then(|c| c.drive(slot(s)))
            .cloned()
            .expect("pd")
    };
    assert_eq!(pd(&pds, 3).media_errors, Some(1487));
    assert_eq!(pd(&pds, 3).smart_alert, Some(true));
    assert_eq!(pd(&pds, 7).media_errors, Some(0));
    assert_eq!(
        pd(&pds, 7).serial.as_deref(),
        Some(c.pds[7].smart.serial.as_str())
    );
    assert_eq!(
        pd_smart(&h, 27).ata.and_then(|a| a.pending_sectors),
        Some(0)
    );

    // 15 minutes on: the rebuild moved, the second member of VD 0 grows pending sectors
    step(&mut sc, &mut h, 900);
    let later = rb(&h);
    assert!(later.progress_pct.expect("progress") > p0);
    assert!(later.time_left_s.expect("left") < left0);
    let pds = storcli::parse(&storcli_pds(controller(&h))).expect("pds parse");
    let media = pd(&pds, 7).media_errors.expect("count");
    assert!(media >= 10, "{media}");
    let s7 = pd_smart(&h, 27);
    let pending = s7
        .ata
        .as_ref()
        .and_then(|a| a.pending_sectors)
        .expect("197");
    assert_eq!(pending, media * 8);
    assert_eq!(s7.exit_status, Some(64), "error log entries");
    assert_eq!(s7.device_type.as_deref(), Some("sat+megaraid,27"));
    step(&mut sc, &mut h, 20);
    let s7b = pd_smart(&h, 27);
    assert!(s7b.ata.and_then(|a| a.pending_sectors).expect("197") > pending);
    // the failed drive reads as failing
    let s3 = pd_smart(&h, 23);
    assert_eq!(s3.health, OverallHealth::Failed);
    assert_eq!(s3.exit_status, Some(8 | 64));
}

#[test]
fn hwraid_cache_wt_bbu_fails_and_the_cache_falls_to_write_through() {
    let (mut sc, mut h) = host(Kind::HwraidCacheWt, 1.0);
    let doc = storcli::parse(&storcli_vall(controller(&h))).expect("parses");
    let v = doc
        .first()
        .and_then(|c| c.virtual_drive(1, 1))
        .cloned()
        .expect("vd");
    assert!(!v.write_cache_fell_back());
    assert_eq!(controller(&h).cache(&controller(&h).vds[1]), "RWBD");
    step(&mut sc, &mut h, 130);
    let c = controller(&h);
    let doc = storcli::parse(&storcli_vall(c)).expect("parses");
    for vd in 0..2 {
        let v = doc
            .first()
            .and_then(|c| c.virtual_drive(vd, vd))
            .cloned()
            .expect("vd");
        assert!(v.write_cache_fell_back(), "vd {vd}: {:?}", v.cache);
        assert_eq!(v.state, VdState::Optimal);
    }
    let all = storcli::parse(&storcli_show_all(c)).expect("parses");
    let ctl = all.first().expect("ctl");
    assert_eq!(
        ctl.batteries.first().map(|b| b.state.clone()),
        Some(BatteryState::Failed)
    );
    assert_eq!(ctl.controller_status.as_deref(), Some("Needs Attention"));
    let bbu = storcli::parse(&storcli_bbu(c)).expect("bbu parses");
    assert_eq!(
        bbu.first()
            .and_then(|c| c.batteries.first())
            .map(|b| b.state.clone()),
        Some(BatteryState::Failed)
    );
    assert!(storcli::parse(&storcli_rebuild(c))
        .expect("parses")
        .iter()
        .all(|c| c.rebuilds.iter().all(|r| !r.in_progress)));
}

#[test]
fn nvme_wearout_passes_its_endurance_and_its_spare_threshold() {
    let (mut sc, mut h) = host(Kind::NvmeWearout, 10.0);
    let read = |h: &Host, dev: &str| {
        let m = h.drives.disks.get(dev).expect("nvme");
        let path = format!("/dev/{dev}");
        smartctl::parse(&smartctl_json(m, &path, "nvme", &path, h.epoch_s)).expect("parses")
    };
    let n = read(&h, "nvme2n1").nvme.expect("log");
    assert_eq!(n.percentage_used, Some(99));
    assert_eq!(n.critical_warning, Some(0));
    assert_eq!(n.media_errors, Some(0));
    // an hour of the timeline at --speed 10
    step(&mut sc, &mut h, 360);
    let r = read(&h, "nvme2n1");
    let n = r.nvme.clone().expect("log");
    assert!(n.percentage_used.expect("used") > 100, "{n:?}");
    assert!(
        n.available_spare_pct < n.available_spare_threshold_pct,
        "{n:?}"
    );
    assert_eq!(n.critical_warning.map(|c| c & 1), Some(1));
    assert!(n.media_errors.expect("media") > 0);
    assert_eq!(r.health, OverallHealth::Failed);
    assert_eq!(r.exit_status.map(|e| e & 8), Some(8));
    // the others are fine, and their written data grew with the load
    let before = h
        .drives
        .disks
        .get("nvme0n1")
        .expect("nvme0")
        .nvme
        .data_units_written;
    step(&mut sc, &mut h, 10);
    let other = read(&h, "nvme0n1");
    let o = other.nvme.expect("log");
    assert_eq!(o.critical_warning, Some(0));
    assert_eq!(other.health, OverallHealth::Passed);
    let after = h
        .drives
        .disks
        .get("nvme0n1")
        .expect("nvme0")
        .nvme
        .data_units_written;
    // ~600 MB/s for 10 s: ~6 GB = ~11,700 units of 512,000 bytes
    assert!(after - before > 8_000, "{before} {after}");
}

#[test]
fn the_stand_ins_print_the_current_state_for_the_agents_command_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("h");
    let mut sim = crate::sim::Sim::new(&root, Kind::HwraidRebuild, "h", 3, 1.0).expect("sim");
    sim.step().expect("step");
    let run = |prog: &str, args: &[&str]| {
        let out = Command::new(root.join("bin").join(prog))
            .args(args)
            .output()
            .expect("runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, scan) = run("smartctl", &["--scan"]);
    assert_eq!(code, Some(0));
    let entries = smartctl::scan::parse(&scan).expect("scan parses");
    assert_eq!(entries.iter().filter(|e| e.is_megaraid()).count(), 25);
    let (code, json) = run(
        "smartctl",
        &[
            "--json",
            "-a",
            "-n",
            "standby",
            "-d",
            "megaraid,27",
            "/dev/bus/0",
        ],
    );
    assert_eq!(code, Some(0));
    let r = smartctl::parse(&json).expect("parses");
    assert_eq!(r.model.as_deref(), Some("ST8000NM000A-2KE101"));
    let (code, json) = run("smartctl", &["--json", "-a", "-n", "standby", "/dev/sdb"]);
    assert_eq!(code, Some(2));
    assert!(smartctl::parse(&json)
        .expect("parses")
        .messages
        .iter()
        .any(|m| m.text.contains("-d megaraid,N")));
    let (code, json) = run("smartctl", &["--json", "-a", "-n", "standby", "/dev/sda"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        smartctl::parse(&json).expect("parses").protocol,
        Protocol::Ata
    );
    let (code, _) = run("smartctl", &["--json", "-a", "-n", "standby", "/dev/sdzz"]);
    assert_eq!(code, Some(2));
    for args in [
        "/call show all J",
        "/call/vall show all J",
        "/call/eall/sall show all J",
        "/call/eall/sall show rebuild J",
        "/call/bbu show all J",
    ] {
        let (code, json) = run("storcli64", &args.split(' ').collect::<Vec<_>>());
        assert_eq!(code, Some(0), "{args}");
        let doc = storcli::parse(&json).unwrap_or_else(|e| panic!("{args}: {e}"));
        assert!(doc.first().is_some_and(|c| c.status.ok), "{args}");
    }
    let (code, _) = run("storcli64", &["/call", "delete", "J"]);
    assert_eq!(code, Some(1));
    // sysfs ties each VD to its block device: wwid and SCSI address
    let wwid = std::fs::read_to_string(root.join("sys/block/sdc/device/wwid")).expect("wwid");
    assert_eq!(
        wwid.trim(),
        format!("naa.{}", controller(sim.host()).vds[1].naa_id)
    );
    let dev = std::fs::canonicalize(root.join("sys/block/sdc/device")).expect("device link");
    assert_eq!(dev.file_name().and_then(|n| n.to_str()), Some("0:2:1:0"));
    assert_eq!(
        std::fs::read_to_string(root.join("sys/class/scsi_host/host0/proc_name"))
            .expect("proc_name"),
        "megaraid_sas\n"
    );
    assert!(
        std::fs::read_to_string(root.join("sys/block/sdc/device/vendor"))
            .expect("vendor")
            .starts_with("AVAGO")
    );
    let devices = std::fs::read_to_string(root.join("proc/devices")).expect("devices");
    assert!(devices.contains(" megaraid_sas_ioctl\n"));
    // no controller, no storcli
    let other = dir.path().join("nvme");
    let nv = crate::sim::Sim::new(&other, Kind::NvmeWearout, "n", 3, 1.0).expect("sim");
    assert!(!nv.root().join("bin/storcli64").exists());
    assert!(nv.root().join("bin/smartctl").exists());
    let devices = std::fs::read_to_string(other.join("proc/devices")).expect("devices");
    assert!(!devices.contains("megaraid"));
}

#[test]
fn asctime_is_smartctls() {
    assert_eq!(
        super::smartctl::asctime(1_234_567_890),
        "Fri Feb 13 23:31:30 2009 UTC"
    );
    assert_eq!(
        super::smartctl::asctime(1_798_377_663),
        "Sun Dec 27 13:21:03 2026 UTC"
    );
}
