use super::*;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/smartctl")
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(fixture_dir().join(name)).expect("fixture is readable")
}

fn drive(name: &str) -> DriveHealth {
    parse(&fixture(name)).expect("fixture parses")
}

#[test]
fn snapshot_real_fixtures() {
    insta::glob!("../../../fixtures/smartctl", "*.json", |path| {
        let text = std::fs::read_to_string(path).expect("fixture is readable");
        insta::assert_debug_snapshot!(parse(&text));
    });
}

#[test]
fn snapshot_text_fixtures() {
    insta::glob!("../../../fixtures/smartctl", "*.txt", |path| {
        let text = std::fs::read_to_string(path).expect("fixture is readable");
        insta::assert_debug_snapshot!(parse_scsi_text(&text));
    });
}

#[test]
fn the_corpus_covers_every_protocol_and_is_large_enough() {
    let mut ata = 0;
    let mut scsi = 0;
    let mut nvme = 0;
    let mut real = 0;
    for entry in std::fs::read_dir(fixture_dir()).expect("fixture dir") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        if !name.ends_with(".json") || name.starts_with("garbage") || name.starts_with("truncated")
        {
            continue;
        }
        if !name.starts_with("synthetic") {
            real += 1;
        }
        match parse(&std::fs::read_to_string(&path).expect("readable")).map(|d| d.protocol) {
            Ok(Protocol::Ata) => ata += 1,
            Ok(Protocol::Scsi) => scsi += 1,
            Ok(Protocol::Nvme) => nvme += 1,
            _ => {}
        }
    }
    assert!(real >= 40, "{real} real smartctl JSON outputs");
    assert!(
        ata >= 20 && scsi >= 5 && nvme >= 8,
        "ata {ata} scsi {scsi} nvme {nvme}"
    );
}

#[test]
fn seagate_188_packs_three_counters() {
    // the issue's example: 4295032833 = 0x0001_0001_0001
    assert_eq!(raw16_words(4_295_032_833), [1, 1, 1]);
    let d = drive("sce-ata-seagate-st3000nm0033-188-packed-4-4-4.json");
    let ata = d.ata.expect("ATA attributes");
    assert_eq!(ata.command_timeout_raw, Some(17_180_131_332));
    assert_eq!(ata.command_timeout_words, Some([4, 4, 4]));
    assert_eq!(ata.reallocated_sectors, Some(1));
    let d = drive("sce-ata-seagate-exos-x16-188-packed-12-12-12.json");
    assert_eq!(
        d.ata.expect("ATA").command_timeout_words,
        Some([12, 12, 12])
    );
    // this one's own text form (raw.string, smartctl's raw16 print) says "2 2 2"
    let d = drive("sce-ata-seagate-st2000nm0008-188-raw16-string-2-2-2.json");
    assert_eq!(d.ata.expect("ATA").command_timeout_words, Some([2, 2, 2]));
}

/// Where the JSON carries both a raw value and smartctl's text rendering of it
/// (`raw.string`), the two must agree: a plain number is the value itself, three numbers
/// are the raw16 words. This is the cross-check against smartctl's own text form.
#[test]
fn raw_values_agree_with_the_text_smartctl_printed_for_them() {
    let mut checked = 0;
    let mut packed = 0;
    for entry in std::fs::read_dir(fixture_dir()).expect("fixture dir") {
        let path = entry.expect("entry").path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let Some(table) = doc
            .pointer("/ata_smart_attributes/table")
            .and_then(|t| t.as_array())
        else {
            continue;
        };
        let d = parse(&text).expect("parses");
        let ata = d.ata.expect("ATA attributes");
        for a in table {
            let (Some(id), Some(raw), Some(s)) = (
                a.get("id").and_then(|v| v.as_u64()),
                a.pointer("/raw/value").and_then(|v| v.as_u64()),
                a.pointer("/raw/string").and_then(|v| v.as_str()),
            ) else {
                continue;
            };
            let ours = match id {
                5 => ata.reallocated_sectors,
                187 => ata.reported_uncorrectable,
                188 => ata.command_timeout_raw,
                197 => ata.pending_sectors,
                198 => ata.offline_uncorrectable,
                199 => ata.udma_crc_errors,
                _ => continue,
            };
            assert_eq!(ours, Some(raw), "{}: attribute {id}", path.display());
            let words: Vec<u64> = s.split_whitespace().map_while(|w| w.parse().ok()).collect();
            if words.len() == 1 && s.trim().chars().all(|c| c.is_ascii_digit()) {
                assert_eq!(words[0], raw, "{}: {id} {s:?}", path.display());
                checked += 1;
            } else if words.len() == 3 && s.split_whitespace().count() == 3 {
                let w = raw16_words(raw);
                assert_eq!(
                    words,
                    w.map(u64::from).to_vec(),
                    "{}: {id} {s:?}",
                    path.display()
                );
                packed += 1;
            }
        }
    }
    assert!(checked > 100, "{checked} plain raw values checked");
    assert!(packed >= 1, "{packed} raw16 values checked");
}

/// smartctl sets exit bit 3 exactly when the drive's own verdict is FAILED: the JSON
/// carries both, and they must agree in every fixture that has both.
#[test]
fn health_agrees_with_exit_bit_3_in_every_fixture() {
    let mut checked = 0;
    for entry in std::fs::read_dir(fixture_dir()).expect("fixture dir") {
        let path = entry.expect("entry").path();
        let Ok(d) = parse(&std::fs::read_to_string(&path).unwrap_or_default()) else {
            continue;
        };
        let Some(code) = d.exit_status else { continue };
        if d.health == OverallHealth::Unknown {
            continue;
        }
        let failing = exit_status(i32::from(code)).disk_failing;
        assert_eq!(
            d.health == OverallHealth::Failed,
            failing,
            "{}",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 50, "{checked} fixtures with both");
}

#[test]
fn failing_ata_disk_with_pending_sectors() {
    let d = drive("scrutiny-ata-hitachi-usbjmicron-FAILED-exit216.json");
    assert_eq!(d.health, OverallHealth::Failed);
    assert_eq!(d.protocol, Protocol::Ata);
    assert_eq!(d.device_type.as_deref(), Some("usbjmicron"));
    let ata = d.ata.expect("ATA");
    assert_eq!(ata.reallocated_sectors, Some(1975));
    assert_eq!(ata.pending_sectors, Some(8));
    assert_eq!(ata.offline_uncorrectable, Some(0));
    assert!(ata.failing_now.contains(&5), "{:?}", ata.failing_now);
    let bits = exit_status(i32::from(d.exit_status.expect("exit status")));
    assert_eq!(bits.code, 216);
    assert!(bits.disk_failing && bits.prefail_at_threshold && bits.error_log && bits.self_test_log);
    assert!(!bits.open_failed_or_low_power && !bits.command_failed);
}

#[test]
fn reallocated_sectors_and_crc_errors_are_raw_values() {
    let d = drive("sce-ata-seagate-st3500418as-reallocated-304.json");
    assert_eq!(d.ata.expect("ATA").reallocated_sectors, Some(304));
    let d = drive("sce-ata-wdc-re4-wd2003fyys-udma-crc-3118119.json");
    assert_eq!(d.ata.expect("ATA").udma_crc_errors, Some(3_118_119));
    let d = drive("sce-ata-hp-mb0500ebncr-187-1.json");
    assert_eq!(d.ata.expect("ATA").reported_uncorrectable, Some(1));
}

#[test]
fn identity_fields() {
    let d = drive("sce-ata-seagate-st3000nm0033-188-packed-4-4-4.json");
    assert_eq!(d.model.as_deref(), Some("ST3000NM0033-9ZM178"));
    assert_eq!(d.smartctl_version.as_deref(), Some("7.3"));
    assert_eq!(d.rotation_rate_rpm, Some(7200));
    assert_eq!(d.capacity_bytes, Some(3_000_592_982_016));
    let wwn = d.wwn.expect("wwn");
    assert_eq!(wwn.len(), 16, "{wwn}");
    assert!(wwn.starts_with("5000c5"), "Seagate's OUI 000c50: {wwn}");
    assert!(d.power_on_hours.is_some() && d.temperature_c.is_some());
    let ssd = drive("sce-ata-ssd-intel-s4500-reallocated-4.json");
    assert_eq!(ssd.rotation_rate_rpm, Some(0));
    assert_eq!(ssd.ata.expect("ATA").reallocated_sectors, Some(4));
}

#[test]
fn sas_grown_defects_and_uncorrected_errors() {
    let d = drive("sce-scsi-seagate-st373453lc-grown-260-uncorrected-read-1.json");
    assert_eq!(d.protocol, Protocol::Scsi);
    let s = d.scsi.expect("SCSI counters");
    assert_eq!(s.grown_defects, Some(260));
    assert_eq!(s.read_uncorrected, Some(1));
    assert_eq!(s.write_uncorrected, Some(535));
    assert_eq!(s.verify_uncorrected, None, "no verify row: absent, not 0");
    let d = drive("sce-scsi-hitachi-h109060-sas-clean.json");
    let s = d.scsi.expect("SCSI counters");
    assert_eq!((s.grown_defects, s.verify_uncorrected), (Some(0), Some(0)));
    // an Intel RAID volume answers as SCSI and reports no counters at all
    let d = drive("scrutiny-scsi-intel-raid1-volume-windows-exit4.json");
    assert_eq!(d.scsi, None);
    assert!(exit_status(4).command_failed);
}

#[test]
fn sas_without_a_grown_defect_list_is_none_not_zero() {
    let d = drive("libblockdev-scsi-hgst-husmr3280-sas-ssd-no-grown-defect-list.json");
    let s = d.scsi.expect("SCSI counters");
    assert_eq!(s.grown_defects, None);
    assert_eq!(
        (
            s.read_uncorrected,
            s.write_uncorrected,
            s.verify_uncorrected
        ),
        (Some(0), Some(0), Some(0))
    );
    let d = drive("libblockdev-scsi-seagate-st600mp0036.json");
    assert_eq!(d.scsi.expect("SCSI").grown_defects, Some(0));
    let d = drive("libblockdev-scsi-wd4001fyyg-no-verify-row.json");
    assert_eq!(d.scsi.expect("SCSI").verify_uncorrected, None);
}

#[test]
fn sas_non_medium_errors_from_text() {
    let t = parse_scsi_text(&fixture(
        "karlsbakk-sas-text-a-error-counter-log-non-medium-3-fragment.txt",
    ))
    .expect("parses");
    assert_eq!(t.non_medium_errors, Some(3));
    assert_eq!(t.read_uncorrected, Some(0));
    assert_eq!(t.write_uncorrected, Some(0));
    assert_eq!(t.verify_uncorrected, None);
    assert_eq!(t.low_power_mode, None);
    let e = parse_scsi_text("Non-medium error count:   lots\n").expect_err("not a number");
    assert_eq!(e.line, 1);
    assert!(e.reason.contains("lots"), "{e}");
    let e = parse_scsi_text("\nread: 1 2 3\n").expect_err("short row");
    assert_eq!(e.line, 2);
    assert!(e.reason.contains("3 columns"), "{e}");
}

#[test]
fn nvme_health_log() {
    let d = drive("sce-nvme-samsung-pm1725a-critical-warning-16-failed-exit8.json");
    assert_eq!(d.protocol, Protocol::Nvme);
    assert_eq!(d.health, OverallHealth::Failed);
    let n = d.nvme.expect("NVMe log");
    assert_eq!(n.critical_warning, Some(16));
    let w = n.warnings().expect("warning bits");
    assert!(w.volatile_backup_failed);
    assert!(!w.spare_below_threshold && !w.read_only && !w.reliability_degraded);
    assert_eq!(n.spare_at_or_below_threshold(), Some(false));
    assert!(exit_status(i32::from(d.exit_status.expect("exit"))).disk_failing);

    let n = drive("sce-nvme-intel-p3700.json").nvme.expect("NVMe log");
    assert_eq!(
        (n.available_spare_pct, n.available_spare_threshold_pct),
        (Some(93), Some(10))
    );
    assert_eq!(n.percentage_used, Some(51));
    let n = drive("scrutiny-nvme-samsung-970-evo-media-errors.json")
        .nvme
        .expect("NVMe log");
    assert_eq!(n.media_errors, Some(7));
    assert_eq!(n.unsafe_shutdowns, Some(10));
    let spare_low = NvmeHealth {
        available_spare_pct: Some(9),
        available_spare_threshold_pct: Some(10),
        critical_warning: Some(1),
        ..NvmeHealth::default()
    };
    assert_eq!(spare_low.spare_at_or_below_threshold(), Some(true));
    assert!(spare_low.warnings().expect("bits").spare_below_threshold);
}

#[test]
fn standby_is_not_read_and_not_an_error() {
    let d = drive("synthetic-ata-n-standby-power-mode-standby-exit2.json");
    assert_eq!(d.low_power_mode.as_deref(), Some("STANDBY"));
    assert_eq!(d.health, OverallHealth::Unknown);
    assert_eq!(d.ata, None);
    assert!(exit_status(2).open_failed_or_low_power);
    assert_eq!(d.outcome(), Outcome::LowPower("STANDBY".into()));
    // the same exit bit without the message: open failed, not asleep
    let d = drive("scrutiny-open-failed-windows-exit2-no-device.json");
    assert_eq!(d.outcome(), Outcome::NotRead);
    // a failing drive that was read is Read; its health says the rest
    assert_eq!(
        drive("scrutiny-ata-hitachi-usbjmicron-FAILED-exit216.json").outcome(),
        Outcome::Read
    );
    assert_eq!(
        drive("scrutiny-scsi-intel-raid1-volume-windows-exit4.json").outcome(),
        Outcome::Read
    );
    assert_eq!(d.exit_status, Some(2));
    assert_eq!(d.low_power_mode, None);
    assert_eq!(d.protocol, Protocol::Unknown);
    assert_eq!(d.messages[0].severity, "error");
    // the text forms of real standby runs
    for (f, mode) in [
        ("pysmart-issue82-text-n-standby-all-exit2.txt", "STANDBY"),
        (
            "truenas-spindown-pr58-text-n-standby-by-command-exit2.txt",
            "STANDBY BY COMMAND",
        ),
    ] {
        let t = parse_scsi_text(&fixture(f)).expect("parses");
        assert_eq!(t.low_power_mode.as_deref(), Some(mode), "{f}");
    }
}

/// smartd's `--jsonstate` files (smartmontools' development tree after 7.5): smartctl's field names, no `smartctl`
/// section, the identity only in `device_info`, and the SCSI non-medium count in JSON.
#[test]
fn smartd_json_state_files() {
    let d = drive("synthetic-smartd-jsonstate-ata-seagate-pending-16.json");
    assert_eq!(d.protocol, Protocol::Ata);
    assert_eq!(d.model.as_deref(), Some("ST3000NM0033-9ZM178"));
    assert_eq!(d.serial.as_deref(), Some("Z1Y00000"));
    assert_eq!(d.wwn.as_deref(), Some("5000c500499602d2"));
    assert_eq!(d.firmware.as_deref(), Some("SN04"));
    assert_eq!((d.exit_status, d.outcome()), (None, Outcome::Read));
    let a = d.ata.expect("ATA");
    assert_eq!(a.pending_sectors, Some(16));
    assert_eq!(a.command_timeout_words, Some([1, 1, 1]));

    let d = drive("synthetic-smartd-jsonstate-scsi-seagate-non-medium-1445.json");
    assert_eq!(d.model.as_deref(), Some("SEAGATE ST600MP0036"));
    assert_eq!(d.firmware.as_deref(), Some("KT39"));
    assert_eq!(d.serial.as_deref(), Some("W3F00000"));
    assert_eq!(d.wwn.as_deref(), Some("5000c500a1b2c3d4"));
    let s = d.scsi.expect("SCSI");
    assert_eq!(
        (s.non_medium_errors, s.read_uncorrected, s.grown_defects),
        (Some(1445), Some(18), None)
    );

    let d = drive("synthetic-smartd-jsonstate-nvme-spare-below-threshold.json");
    assert_eq!(d.power_on_hours, Some(12798));
    assert_eq!(d.serial.as_deref(), Some("S466NX0M000000H"));
    let n = d.nvme.expect("NVMe");
    assert_eq!(n.spare_at_or_below_threshold(), Some(true));
    assert!(n.warnings().expect("bits").spare_below_threshold);
    assert_eq!(n.percentage_used, Some(97));
}

#[test]
fn drives_behind_megaraid() {
    let d = drive("scrutiny-ata-wd4000fyyx-sat-megaraid-1-exit4.json");
    assert_eq!(d.device_type.as_deref(), Some("sat+megaraid,1"));
    assert_eq!(d.ata.expect("ATA").reallocated_sectors, Some(387));
}

#[test]
fn exit_status_bits_follow_the_man_page() {
    assert_eq!(exit_status(0), ExitBits::default());
    let all = exit_status(255);
    assert!(
        all.command_line
            && all.open_failed_or_low_power
            && all.command_failed
            && all.disk_failing
            && all.prefail_at_threshold
            && all.past_threshold
            && all.error_log
            && all.self_test_log
    );
    assert!(exit_status(1).command_line);
    assert!(exit_status(32).past_threshold && !exit_status(32).disk_failing);
    assert!(exit_status(64).error_log);
    assert!(exit_status(128).self_test_log);
    assert_eq!(exit_status(-1).code, 255);
    assert_eq!(exit_status(256 + 8).code, 8);
}

#[test]
fn garbage_and_truncated_output_are_errors_naming_the_problem() {
    let e = parse(&fixture(
        "truncated-sce-ata-seagate-st3500418as-at-4096-bytes.json",
    ))
    .expect_err("truncated");
    assert!(e.reason.contains("truncated"), "{e}");
    assert!(e.line > 100, "points at the end: {e}");
    let e = parse(&fixture("garbage-text-output-without-json-flag.json")).expect_err("text");
    assert_eq!(e.line, 1);
    assert!(e.reason.contains("malformed JSON"), "{e}");
    assert!(e.text.starts_with("smartctl 7.3"), "{e}");
    let e = parse(&fixture("garbage-libblockdev-malformed-json.json")).expect_err("hahaha");
    assert_eq!((e.line, e.text.trim()), (29, "hahaha"), "{e}");
    assert!(e.reason.contains("malformed JSON"), "{e}");
    let d = drive("libblockdev-ata-toshiba-thnsnh128-exit32-edited.json");
    let bits = exit_status(i32::from(d.exit_status.expect("exit")));
    assert!(bits.past_threshold && !bits.disk_failing);
    assert_eq!(d.health, OverallHealth::Passed);
    let e = parse(&fixture("garbage-empty-output.json")).expect_err("empty");
    assert!(e.reason.contains("empty"), "{e}");
    let e = parse(&fixture("garbage-json-array-not-object.json")).expect_err("array");
    assert!(e.reason.contains("object"), "{e}");
    let e = parse(r#"{"json_format_version": [1, 0]}"#).expect_err("no smartctl section");
    assert!(e.reason.contains("not smartctl JSON"), "{e}");
}

#[test]
fn odd_values_are_dropped_not_fatal() {
    let d = parse(
        r#"{"smartctl": {"exit_status": 300, "version": [7, "x"]},
            "device": {"protocol": "SAS-NEW"},
            "temperature": {"current": "hot"},
            "nvme_smart_health_information_log": {"critical_warning": 999, "available_spare": -1},
            "ata_smart_attributes": {"table": [{"id": 5}, {"name": "no id"}, {"id": 197, "raw": {"value": 3}}]}}"#,
    )
    .expect("parses");
    assert_eq!(d.exit_status, None);
    assert_eq!(d.smartctl_version, None);
    assert_eq!(d.protocol, Protocol::Other("SAS-NEW".into()));
    let sat = parse(r#"{"device": {"protocol": "ATA+SCSI"}}"#).expect("smartd's SAT form");
    assert_eq!(sat.protocol, Protocol::Ata);
    assert_eq!(d.temperature_c, None);
    let n = d.nvme.expect("log");
    assert_eq!((n.critical_warning, n.available_spare_pct), (None, None));
    let a = d.ata.expect("table");
    assert_eq!((a.reallocated_sectors, a.pending_sectors), (None, Some(3)));
}

proptest! {
    #[test]
    fn never_panics(text in "\\PC*") {
        let _ = parse(&text);
        let _ = parse_scsi_text(&text);
    }

    #[test]
    fn never_panics_on_any_prefix_of_a_real_output(cut in 0usize..12_000) {
        let text = fixture("sce-scsi-seagate-st373453lc-grown-260-uncorrected-read-1.json");
        let cut = cut.min(text.len());
        if let Some(prefix) = text.get(..cut) {
            let r = parse(prefix);
            let complete = prefix.trim_end().ends_with('}');
            prop_assert!(r.is_err() || cut == text.len() || complete, "cut at {}", cut);
        }
    }

    #[test]
    fn never_panics_on_json_of_any_shape(
        key in "smartctl|device|ata_smart_attributes|nvme_smart_health_information_log|wwn|power_mode|x",
        inner in "[0-9a-z\\[\\]{}\":, -]{0,40}",
    ) {
        let _ = parse(&format!("{{\"{key}\": {inner}}}"));
        let _ = parse(&format!("{{\"smartctl\": {{}}, \"{key}\": {{\"table\": [{inner}]}}}}"));
    }

    #[test]
    fn never_panics_on_device_info(info in "\\PC{0,80}") {
        let doc = serde_json::json!({"device": {"protocol": "SCSI"}, "device_info": info});
        let _ = parse(&doc.to_string());
        let doc = serde_json::json!({"device": {}, "device_info": format!("[{info}")});
        let _ = parse(&doc.to_string());
    }

    #[test]
    fn raw16_words_round_trip(raw in 0u64..(1 << 48)) {
        let [w2, w1, w0] = raw16_words(raw);
        prop_assert_eq!((u64::from(w2) << 32) | (u64::from(w1) << 16) | u64::from(w0), raw);
    }
}
