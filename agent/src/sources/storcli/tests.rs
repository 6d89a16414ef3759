use super::*;
use proptest::prelude::*;
use std::path::Path;

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/storcli")
        .join(name);
    std::fs::read_to_string(p).expect("fixture is readable")
}

fn one(name: &str) -> Controller {
    let mut c = parse(&fixture(name)).expect("fixture parses");
    assert_eq!(c.len(), 1, "{name}: one controller");
    c.remove(0)
}

fn slot(e: u32, s: u32) -> Slot {
    Slot {
        enclosure: Some(e),
        slot: s,
    }
}

#[test]
fn snapshot_real_fixtures() {
    insta::glob!("../../../fixtures/storcli", "*.json", |path| {
        let text = std::fs::read_to_string(path).expect("fixture is readable");
        insta::assert_debug_snapshot!(parse(&text));
    });
}

#[test]
fn snapshot_text_fixtures() {
    insta::glob!("../../../fixtures/storcli", "*.txt", |path| {
        let text = std::fs::read_to_string(path).expect("fixture is readable");
        insta::assert_debug_snapshot!(parse_text(&text));
    });
}

#[test]
fn the_corpus_has_fifteen_real_outputs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/storcli");
    let real = std::fs::read_dir(dir)
        .expect("fixture dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| {
            !["synthetic", "garbage", "truncated", "edited"]
                .iter()
                .any(|p| n.starts_with(p))
        })
        .count();
    assert!(real >= 15, "{real} real storcli outputs");
}

#[test]
fn raid6_degraded_with_a_member_rebuilding() {
    let c = one("edited-netdata-c0-show-all-raid6-dgrd-pd-252-3-rbld.json");
    let vd = c.virtual_drive(0, 0).expect("VD 0/0");
    assert_eq!(vd.state, VdState::Degraded);
    assert_eq!(vd.raid_level, "RAID6");
    assert_eq!(
        c.drive(slot(252, 3)).expect("PD 252:3").state,
        PdState::Rebuild
    );
    assert_eq!(
        c.drive(slot(252, 0)).expect("PD 252:0").state,
        PdState::Online
    );
    let r = one("synthetic-c0-eall-sall-show-rebuild-252-3-37pct.json");
    let rb: Vec<&Rebuild> = r.rebuilds.iter().filter(|r| r.in_progress).collect();
    assert_eq!(rb.len(), 1);
    assert_eq!(rb[0].slot, slot(252, 3));
    assert_eq!(rb[0].progress_pct, Some(37));
    assert_eq!(rb[0].time_left_s, Some(5 * 3600 + 12 * 60));
    let idle = r
        .rebuilds
        .iter()
        .find(|r| r.slot == slot(252, 0))
        .expect("252:0");
    assert_eq!(
        (idle.in_progress, idle.progress_pct, idle.time_left_s),
        (false, None, None)
    );
}

#[test]
fn members_or_properties_without_their_vd_row_make_no_vd() {
    let c = parse(
        r#"{"Controllers": [{"Response Data": {
            "PDs for VD 3": [{"EID:Slt": "8:1", "DID": 1, "State": "Onln", "DG": 3}],
            "VD3 Properties": {"OS Drive Name": "/dev/sdz"}}}]}"#,
    )
    .expect("parses");
    assert!(c[0].virtual_drives.is_empty());
    assert_eq!(c[0].drive(slot(8, 1)).expect("8:1").dg, Some(3));
}

#[test]
fn controller_show_all_real_raid6() {
    let c = one("netdata-c0-show-all-raid6-optl-ibbu-optimal.json");
    assert!(c.status.ok);
    assert_eq!(c.controller, Some(0));
    assert_eq!(
        c.model.as_deref(),
        Some("ServeRAID M5015 SAS/SATA Controller")
    );
    assert_eq!(c.controller_status.as_deref(), Some("Optimal"));
    let vd = c.virtual_drive(0, 0).expect("VD 0/0");
    assert_eq!(vd.state, VdState::Optimal);
    assert_eq!(vd.name.as_deref(), Some("Sluthub"));
    let cache = vd.cache.as_ref().expect("cache");
    assert_eq!(
        (cache.read_ahead, cache.write, cache.cached_io),
        (Some(true), Some(WritePolicy::WriteBack), Some(false))
    );
    assert_eq!(c.physical_drives.len(), 6);
    assert!(c
        .physical_drives
        .iter()
        .all(|d| d.state == PdState::Online && d.dg == Some(0)));
    assert_eq!(c.batteries.len(), 1);
    assert_eq!(c.batteries[0].kind, BatteryKind::Bbu);
    assert_eq!(c.batteries[0].state, BatteryState::Optimal);
    assert_eq!(c.batteries[0].temperature_c, Some(34));
}

#[test]
fn drive_details_carry_error_counts() {
    let c = one("netdata-c0-eall-sall-show-all-6-sata-media-other-predictive.json");
    assert_eq!(c.physical_drives.len(), 6);
    let d = c.drive(slot(252, 0)).expect("252:0");
    assert_eq!(d.did, Some(34));
    assert_eq!(
        (d.media_errors, d.other_errors, d.predictive_failures),
        (Some(0), Some(0), Some(0))
    );
    assert_eq!(d.smart_alert, Some(false));
    assert_eq!(d.serial.as_deref(), Some("ZL2PVFA8"));
    assert_eq!(d.wwn.as_deref(), Some("5000C500E54F4EBB"));
    assert_eq!(d.temperature_c, Some(28));
    assert_eq!(d.model.as_deref(), Some("ST16000NM001G-2KK103"));
    let bytes = d.size_bytes.expect("size");
    assert!(
        (15_990_000_000_000..16_010_000_000_000).contains(&bytes),
        "{bytes}"
    );
}

#[test]
fn virtual_drives_name_their_os_device() {
    let c = one("cloudpods-c0-vall-show-all-7-vds-os-drive-name-wb-wt.json");
    assert_eq!(c.virtual_drives.len(), 7);
    let v0 = c.virtual_drive(0, 0).expect("VD 0");
    assert_eq!(v0.os_drive_name.as_deref(), Some("/dev/sda"));
    assert_eq!(
        v0.naa_id.as_deref(),
        Some("600605b010e943702a3372bf4d29f6a7")
    );
    assert_eq!(v0.members, vec![slot(8, 0), slot(8, 1)]);
    assert_eq!(v0.write_cache_configured, Some(WritePolicy::WriteBack));
    assert!(!v0.write_cache_fell_back());
    let v6 = c.virtual_drive(6, 6).expect("VD 6");
    assert_eq!(v6.os_drive_name.as_deref(), Some("/dev/sdg"));
    // configured write-through and running write-through: no incident
    assert_eq!(v6.write_cache_configured, Some(WritePolicy::WriteThrough));
    assert!(!v6.write_cache_fell_back());
    assert_eq!(c.physical_drives.len(), 9);
}

#[test]
fn write_back_that_fell_to_write_through_is_seen() {
    let c = one("edited-cloudpods-c0-vall-show-all-v0-write-back-fell-to-rwtd.json");
    let v0 = c.virtual_drive(0, 0).expect("VD 0");
    assert_eq!(
        v0.cache.as_ref().and_then(|c| c.write),
        Some(WritePolicy::WriteThrough)
    );
    assert!(v0.write_cache_fell_back());
    assert!(c
        .virtual_drives
        .iter()
        .filter(|v| v.vd != 0)
        .all(|v| !v.write_cache_fell_back()));
}

#[test]
fn batteries_from_bbu_and_cachevault_show_all() {
    let b = one("synthetic-c0-bbu-show-all-battery-failed.json");
    assert_eq!(b.batteries.len(), 1);
    assert_eq!(b.batteries[0].state, BatteryState::Failed);
    assert_eq!(b.batteries[0].model.as_deref(), Some("iBBU08"));
    assert_eq!(b.batteries[0].temperature_c, Some(34));
    let cv = one("synthetic-c0-cv-show-all-cachevault-optimal.json");
    assert_eq!(cv.batteries[0].kind, BatteryKind::CacheVault);
    assert_eq!(cv.batteries[0].state, BatteryState::Optimal);
    assert_eq!(BatteryState::parse("Learning"), BatteryState::Learning);
    assert_eq!(
        BatteryState::parse("Dgd (Needs Attention)"),
        BatteryState::Degraded
    );
}

#[test]
fn offline_unconfigured_jbod_and_foreign_drives() {
    let c = one("pystorcli2-c0-e35-s12-show-pd-offln.json");
    assert_eq!(
        c.drive(slot(35, 12)).expect("35:12").state,
        PdState::Offline
    );
    let c = one("pystorcli2-c0-e35-s12-show-ugood-spun-down.json");
    let d = c.drive(slot(35, 12)).expect("35:12");
    assert_eq!(
        (d.state.clone(), d.dg, d.spun.as_deref()),
        (PdState::UnconfiguredGood, None, Some("D"))
    );
    let c = one("cloudpods-c0-eall-sall-show-ugood-foreign-and-jbod-on-raid.json");
    let f = c.drive(slot(65, 6)).expect("65:6");
    assert_eq!(
        (f.state.clone(), f.foreign, f.dg),
        (PdState::UnconfiguredGood, true, None)
    );
    assert_eq!(c.drive(slot(65, 7)).expect("65:7").state, PdState::Jbod);
    assert_eq!(c.drive(slot(65, 11)).expect("65:11").dg, Some(1));
    let c = one("netdata-c0-show-all-hba-9500-mpt3sas-jbod.json");
    assert!(c.physical_drives.len() > 20, "{}", c.physical_drives.len());
    assert!(c.physical_drives.iter().all(|d| d.state == PdState::Jbod));
    assert!(c
        .physical_drives
        .iter()
        .all(|d| d.serial.is_none() && d.media_errors.is_none()));
    assert_eq!(c.model.as_deref(), Some("HBA 9500-8i"));
}

#[test]
fn a_failed_command_is_data_not_a_parse_error() {
    let c = one("pystorcli2-c0-e252-s7-set-good-failure-errcd-255.json");
    assert!(!c.status.ok);
    assert_eq!(c.status.errors, vec!["Operation not allowed.".to_owned()]);
    let c = one("pystorcli2-c0-show-status-failure-incomplete-foreign-config.json");
    assert!(!c.status.ok);
    assert_eq!(
        c.status.errors,
        vec!["Incomplete foreign configuration".to_owned()]
    );
    assert_eq!(
        c.virtual_drive(2, 1).expect("VD 2/1").state,
        VdState::Optimal
    );
}

/// nytrocli prints the one VD of a Nytro WarpDrive as `"DG/VD": 0`, a number (drive group 0,
/// VD 0, as its TOPOLOGY and PD LIST `DG` say), next to a Nytro MegaRAID's `"0/1"`.
#[test]
fn dg_vd_as_a_number_or_a_string() {
    let c = parse(&fixture(
        "mirantis-nytrocli-call-show-all-nytro-megaraid-and-warpdrive-dg-vd-number.json",
    ))
    .expect("parses");
    assert_eq!(c.len(), 2);
    let warp = &c[1];
    assert_eq!(warp.model.as_deref(), Some("Nytro WarpDrive XP6210-4A2048"));
    let vd = warp.virtual_drive(0, 0).expect("VD 0/0");
    assert_eq!(
        (vd.raid_level.as_str(), &vd.state),
        ("RAID0", &VdState::Optimal)
    );
    assert!(warp.unreadable.is_empty(), "{:?}", warp.unreadable);
    assert!(c[0].virtual_drive(0, 1).is_some() && c[0].virtual_drive(1, 0).is_some());
    // a row with neither form is said, not dropped
    for odd in ["\"zero\"", "\"0-1\"", "-1", "null", "4294967296"] {
        let json = format!(
            r#"{{"Controllers":[{{"Command Status":{{"Controller":0,"Status":"Success"}},
            "Response Data":{{"VD LIST":[{{"DG/VD":{odd},"TYPE":"RAID1","State":"Optl"}}]}}}}]}}"#
        );
        let c = parse(&json).expect("parses");
        assert!(c[0].virtual_drives.is_empty(), "{odd}");
        assert_eq!(c[0].unreadable.len(), 1, "{odd}");
        assert!(
            c[0].unreadable[0].starts_with("VD LIST: a virtual drive row not understood (\""),
            "{}",
            c[0].unreadable[0]
        );
    }
}

/// Fields storcli prints as a number on one controller and a string on another are read
/// either way.
#[test]
fn fields_printed_as_numbers_or_strings() {
    let json = r#"{"Controllers":[{"Command Status":{"Controller":0,"Status":"Success"},
        "Response Data":{"PD LIST":[
            {"EID:Slt":"252:0","DID":"7","State":"Onln","DG":"0","Size":"1.0 TB"},
            {"EID:Slt":"252:1","DID":8,"State":"Onln","DG":0,"Size":"1.0 TB"}],
          "VD LIST":[{"DG/VD":"0/0","TYPE":"RAID1","State":"Optl","Name":1}]}}]}"#;
    let c = &parse(json).expect("parses")[0];
    let d: Vec<(Option<u32>, Option<u32>)> =
        c.physical_drives.iter().map(|d| (d.did, d.dg)).collect();
    assert_eq!(d, [(Some(7), Some(0)), (Some(8), Some(0))]);
    assert_eq!(c.virtual_drives[0].name.as_deref(), Some("1"));
}

/// storcli (`No Controller found.`) and perccli (`No Controller found`, a real answer) on a
/// machine without a controller.
#[test]
fn no_controller_found_is_told_apart() {
    let c = parse(&fixture(
        "canonical-perccli-call-show-no-controller-found.json",
    ))
    .expect("parses");
    assert_eq!(c.len(), 1);
    assert!(c[0].controller.is_none() && c[0].status.no_controller());
    let storcli = fixture("canonical-perccli-call-show-no-controller-found.json")
        .replace("No Controller found", "No Controller found.");
    assert!(parse(&storcli).expect("parses")[0].status.no_controller());
    let other = one("pystorcli2-c0-e252-s7-set-good-failure-errcd-255.json");
    assert!(!other.status.no_controller());
}

#[test]
fn system_overview_lists_every_controller() {
    let c = one("pystorcli2-show-2-controllers-overview.json");
    assert_eq!(c.overview.len(), 2);
    assert_eq!(c.overview[1].controller, 1);
    assert_eq!(c.overview[1].health.as_deref(), Some("Opt"));
    assert_eq!(c.overview[1].vds_not_optimal, Some(0));
}

#[test]
fn text_tables_of_real_degraded_and_offline_controllers() {
    let c =
        parse_text(&fixture("mtik00-text-c0-show-all-raid10-dgrd-pd-offln.txt")).expect("parses");
    assert_eq!(c.len(), 1);
    let c = &c[0];
    assert_eq!(c.controller, Some(0));
    assert_eq!(c.model.as_deref(), Some("ServeRAID M5110e"));
    // one sub-command of `show all` failed; storcli says so in the header
    assert!(!c.status.ok);
    assert_eq!(c.status.errors, vec!["command invalid".to_owned()]);
    assert_eq!(
        c.virtual_drive(1, 1).expect("VD 1/1").state,
        VdState::Degraded
    );
    assert_eq!(c.virtual_drive(1, 1).expect("VD 1/1").raid_level, "RAID10");
    assert_eq!(
        c.virtual_drive(0, 0).expect("VD 0/0").state,
        VdState::Optimal
    );
    assert_eq!(c.physical_drives.len(), 16);
    assert_eq!(
        c.drive(slot(24, 10)).expect("24:10").state,
        PdState::Offline
    );
    assert_eq!(
        c.drive(slot(24, 10)).expect("24:10").model.as_deref(),
        Some("AL13SEB300")
    );
    assert_eq!(c.batteries.len(), 1);
    assert_eq!(c.batteries[0].kind, BatteryKind::CacheVault);
    assert_eq!(c.batteries[0].temperature_c, Some(37));
    let all = parse_text(&fixture(
        "mtik00-text-call-show-all-3-controllers-c2-raid10-dgrd.txt",
    ))
    .expect("parses");
    assert_eq!(
        all.iter().map(|c| c.controller).collect::<Vec<_>>(),
        vec![Some(0), Some(1), Some(2)]
    );
    let c2 = &all[2];
    assert_eq!(
        c2.virtual_drive(0, 0).expect("c2 VD 0/0").state,
        VdState::Degraded
    );
    assert_eq!(
        c2.drive(slot(88, 9)).expect("c2 88:9").state,
        PdState::Offline
    );
    assert!(all[..2]
        .iter()
        .all(|c| c.virtual_drives.iter().all(|v| v.state == VdState::Optimal)));
    let c = parse_text(&fixture("mtik00-text-c2-show-all-offline.txt")).expect("parses");
    assert_eq!(
        c[0].virtual_drive(0, 0).expect("VD 0/0").state,
        VdState::Offline
    );
    assert_eq!(
        c[0].virtual_drive(0, 0).expect("VD 0/0").name.as_deref(),
        Some("VD_0")
    );
}

#[test]
fn every_state_abbreviation_maps() {
    for (s, want) in [
        ("Optl", VdState::Optimal),
        ("Dgrd", VdState::Degraded),
        ("dgrd", VdState::Degraded),
        ("Pdgd", VdState::PartiallyDegraded),
        ("OfLn", VdState::Offline),
        ("Rec", VdState::Recovery),
        ("Xyz", VdState::Other("Xyz".into())),
    ] {
        assert_eq!(VdState::from_abbrev(s), want, "{s}");
    }
    for (s, want) in [
        ("Onln", PdState::Online),
        ("Offln", PdState::Offline),
        ("Rbld", PdState::Rebuild),
        ("UGood", PdState::UnconfiguredGood),
        ("UBad", PdState::UnconfiguredBad),
        ("GHS", PdState::GlobalHotSpare),
        ("DHS", PdState::DedicatedHotSpare),
        ("JBOD", PdState::Jbod),
        ("Failed", PdState::Failed),
        ("Cpybck", PdState::CopyBack),
        ("Msng", PdState::Missing),
        ("UGUnsp", PdState::Unsupported),
        ("CFShld", PdState::Shielded("CFShld".into())),
    ] {
        assert_eq!(PdState::from_abbrev(s), want, "{s}");
    }
    for (s, w) in [
        ("RWBD", Some(WritePolicy::WriteBack)),
        ("NRWTD", Some(WritePolicy::WriteThrough)),
        ("RAWBC", Some(WritePolicy::AlwaysWriteBack)),
        ("?", None),
    ] {
        assert_eq!(CachePolicy::parse(s).write, w, "{s}");
    }
    assert_eq!(CachePolicy::parse("RAWBC").cached_io, Some(true));
}

#[test]
fn slots_durations_and_sizes() {
    assert_eq!(Slot::parse_eid_slt("252:3"), Some(slot(252, 3)));
    assert_eq!(
        Slot::parse_eid_slt(" :4"),
        Some(Slot {
            enclosure: None,
            slot: 4
        })
    );
    assert_eq!(Slot::parse_eid_slt("x:4"), None);
    assert_eq!(Slot::parse_drive_id("/c1/e8/s6"), Some((1, slot(8, 6))));
    assert_eq!(
        Slot::parse_drive_id("/c0/s2"),
        Some((
            0,
            Slot {
                enclosure: None,
                slot: 2
            }
        ))
    );
    assert_eq!(Slot::parse_drive_id("/c0/x2"), None);
    assert_eq!(
        duration_s("1 Day 2 Hours 3 Minutes 4 Seconds"),
        Some(93_784)
    );
    assert_eq!(duration_s("-"), None);
    assert_eq!(duration_s("5 Fortnights"), None);
    assert_eq!(parse_size("1.000 TB"), Some(1 << 40));
    assert_eq!(parse_size("512 KB"), Some(512 << 10));
    assert_eq!(parse_size("NaN TB"), None);
    assert_eq!(parse_size("1e30 TB"), None);
}

#[test]
fn garbage_and_truncated_output_are_errors_naming_the_problem() {
    let e = parse(&fixture("truncated-netdata-c0-show-all-at-3000-bytes.json")).expect_err("cut");
    assert!(e.reason.contains("truncated"), "{e}");
    let e = parse(&fixture("garbage-not-json-error-line.json")).expect_err("text");
    assert!(e.reason.contains("malformed JSON"), "{e}");
    assert_eq!(e.line, 1);
    let e = parse("{\"Controller\": []}").expect_err("no Controllers");
    assert!(e.reason.contains("Controllers"), "{e}");
    let e = parse("{\"Controllers\": {}}").expect_err("not a list");
    assert!(e.reason.contains("not a list"), "{e}");
    assert!(parse("  \n").expect_err("empty").reason.contains("empty"));
    let e = parse_text("VD LIST :\n=======\n\nno table here\n").expect_err("no table");
    assert_eq!(e.line, 1);
    let e = parse_text("PD LIST :\n---\nEID:Slt DID State DG Size Intf Med SED PI SeSz Model Sp\n---\n252:0 4 Onln\n---\n")
        .expect_err("short row");
    assert_eq!(e.line, 5);
}

proptest! {
    #[test]
    fn never_panics(text in "\\PC*") {
        let _ = parse(&text);
        let _ = parse_text(&text);
    }

    #[test]
    fn never_panics_on_any_prefix_of_a_real_output(cut in 0usize..23_000) {
        let text = fixture("netdata-c0-show-all-raid6-optl-ibbu-optimal.json");
        if let Some(prefix) = text.get(..cut.min(text.len())) {
            let _ = parse(prefix);
            let _ = parse_text(prefix);
        }
    }

    #[test]
    fn never_panics_on_odd_values(
        key in "VD LIST|PD LIST|BBU_Info|Cachevault_Info|PDs for VD 0|VD0 Properties|/c0/v0|Drive /c0/e1/s2|Drive /c0/e1/s2 - Detailed Information|System Overview|Basics",
        inner in "[0-9a-zA-Z\\[\\]{}\":,/ -]{0,40}",
    ) {
        let _ = parse(&format!("{{\"Controllers\": [{{\"Response Data\": {{\"{key}\": {inner}}}}}]}}"));
        let _ = parse(&format!("{{\"Controllers\": [{{\"Response Data\": [{inner}]}}]}}"));
    }

    #[test]
    fn never_panics_on_table_rows(row in "[ 0-9A-Za-z:/.-]{0,60}") {
        let _ = parse_text(&format!("VD LIST :\n===\n---\nDG/VD TYPE State Access Consist Cache sCC Size Name\n---\n{row}\n---\n"));
        let _ = parse_text(&format!("PD LIST :\n===\n---\nEID:Slt DID State DG Size Intf Med SED PI SeSz Model Sp\n---\n{row}\n---\n"));
        let _ = parse_text(&format!("BBU_Info :\n===\n---\nModel State Temp\n---\n{row}\n---\n"));
    }
}
