use super::*;
use crate::health::risk::{loss_probability_members, Exposure, RiskModel};
use crate::sources::smartctl::parse;
use std::path::{Path, PathBuf};

const AFR: f64 = 0.02;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/smartctl")
}

fn text(name: &str) -> String {
    std::fs::read_to_string(fixture_dir().join(name)).expect("fixture is readable")
}

fn drive(name: &str) -> DriveHealth {
    parse(&text(name)).expect("fixture parses")
}

/// The real document with one ATA attribute's raw value replaced (value and string both), the
/// attribute appended when the drive does not report it (the MG09 has no 187 or 188).
fn with_raw(name: &str, id: u64, raw: u64) -> DriveHealth {
    let mut doc: serde_json::Value = serde_json::from_str(&text(name)).expect("json");
    let table = doc["ata_smart_attributes"]["table"]
        .as_array_mut()
        .expect("attribute table");
    if !table.iter().any(|a| a["id"].as_u64() == Some(id)) {
        table.push(serde_json::json!({"id": id, "raw": {"value": 0, "string": "0"}}));
    }
    let attr = table
        .iter_mut()
        .find(|a| a["id"].as_u64() == Some(id))
        .expect("attribute present");
    attr["raw"]["value"] = raw.into();
    attr["raw"]["string"] = raw.to_string().into();
    parse(&doc.to_string()).expect("edited fixture parses")
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-300)
}

fn m() -> DriveRiskModel {
    DriveRiskModel::default()
}

/// A clean real hard disk in mid-life: multiplier exactly 1.
const CLEAN: &str = "sce-ata-toshiba-mg09aca18te.json";

/// RAID6 of 12 with one member failed: 11 survivors, one parity left, a 24 h rebuild left.
fn raid6_one_failed(survivors: &[DriveHealth]) -> f64 {
    assert_eq!(survivors.len(), 11);
    let model = RiskModel::default();
    let rates: Vec<Option<f64>> = survivors
        .iter()
        .map(|d| Some(assess(&model.drive, model.afr, Some(d)).afr))
        .collect();
    loss_probability_members(
        &model,
        &Exposure {
            surviving: 11,
            redundancy_left: 1,
            window_h: Some(24.0),
            bytes_to_read: Some(11 * 18_000_207_937_536),
        },
        &rates,
    )
}

#[test]
fn two_real_raid6_arrays_differing_in_one_survivor_with_pending_sectors() {
    // Ten clean MG09ACA18TE (4772 h: multiplier 1) and an eleventh survivor: in array A a
    // healthy real Hitachi HUA722020ALA330 (78405 h, no defects), in array B the real Hitachi
    // HDS721050DLE630 from scrutiny's corpus with 8 pending sectors (197), 1975 reallocated and
    // SMART health FAILED (PROVENANCE-drives.md).
    let clean = drive(CLEAN);
    let healthy = drive("sce-ata-hitachi-hua722020ala330.json");
    let pending = drive("scrutiny-ata-hitachi-usbjmicron-FAILED-exit216.json");
    assert_eq!(
        pending.ata.as_ref().and_then(|a| a.pending_sectors),
        Some(8)
    );

    // A: HUA722020ALA330 age factor 1 + 0.5·(78405 − 26298)/8766 = 3.97211, no condition.
    let h = assess(&m(), AFR, Some(&healthy));
    assert!(close(h.multiplier, 3.972_108, 1e-6), "{h:?}");
    assert!(h.conditions.is_empty());
    // B: FAILED → 100, × age 3.24127 → capped at 100.
    let f = assess(&m(), AFR, Some(&pending));
    assert_eq!(f.multiplier, 100.0);
    assert!(f.capped);
    assert!(f.conditions.contains(&Condition::Pending(8)));
    assert!(f.conditions.contains(&Condition::HealthFailed));

    let mut a = vec![clean.clone(); 10];
    a.push(healthy);
    let mut b = vec![clean; 10];
    b.push(pending);
    let risk_a = raid6_one_failed(&a);
    let risk_b = raid6_one_failed(&b);
    // p = 1 − exp(−0.02·M·24/8766): M = 1 → 5.475552e-5, M = 3.97211 → 2.174944e-4,
    // M = 100 → 5.460737e-3. P(> 1 of 11), exact (mpmath, 40 digits): A = 2.539002e-7
    // (≈ 45p² + 10·p·p_A), B = 3.123460e-6.
    assert!(close(risk_a, 2.539_002e-7, 1e-5), "{risk_a}");
    assert!(close(risk_b, 3.123_460e-6, 1e-5), "{risk_b}");
    assert!(
        close(risk_b / risk_a, 12.301_92, 1e-5),
        "{}",
        risk_b / risk_a
    );
}

#[test]
fn the_same_real_drive_with_and_without_pending_sectors() {
    // Only one survivor's attribute 197 differs: the real MG09ACA18TE as captured, and the same
    // document with 197 = 8.
    let clean = drive(CLEAN);
    let pending = with_raw(CLEAN, 197, 8);
    let r = assess(&m(), AFR, Some(&pending));
    // 16 · (1 + 0.5·log10 8) = 23.224720
    assert!(close(r.multiplier, 23.224_720, 1e-6), "{r:?}");
    assert_eq!(r.conditions, vec![Condition::Pending(8)]);

    let same = raid6_one_failed(&vec![clean.clone(); 11]);
    let mut v = vec![clean; 10];
    v.push(pending);
    let differs = raid6_one_failed(&v);
    // C(11,2)·p² ≈ 1.64845e-7; with one survivor at p' = 1.270908e-3: 45p² + 10·p·p' ≈ 8.30428e-7
    assert!(close(same, 1.648_450e-7, 1e-5), "{same}");
    assert!(close(differs, 8.304_275e-7, 1e-5), "{differs}");
    assert!(close(differs / same, 5.037_626, 1e-5), "{}", differs / same);
}

#[test]
fn each_ata_condition_takes_its_multiplier() {
    for (id, want, cond) in [
        (5, 14.0, Condition::Reallocated(1)),
        (187, 14.0, Condition::ReportedUncorrectable(1)),
        (188, 4.0, Condition::CommandTimeouts(1)),
        (197, 16.0, Condition::Pending(1)),
        (198, 39.0, Condition::OfflineUncorrectable(1)),
    ] {
        let r = assess(&m(), AFR, Some(&with_raw(CLEAN, id, 1)));
        assert_eq!(r.multiplier, want, "attribute {id}");
        assert_eq!(r.conditions, vec![cond]);
        assert!(close(r.afr, AFR * want, 1e-12));
        assert!(r.failure_probability(24.0) > disk_failure_probability(AFR, 24.0));
    }
    // zero raw values are no condition
    let r = assess(&m(), AFR, Some(&drive(CLEAN)));
    assert_eq!((r.multiplier, r.read), (1.0, true));
}

#[test]
fn several_conditions_take_the_largest_not_the_product() {
    let mut d = with_raw(CLEAN, 197, 1);
    if let Some(a) = d.ata.as_mut() {
        a.reallocated_sectors = Some(1);
        a.offline_uncorrectable = Some(1);
    }
    let r = assess(&m(), AFR, Some(&d));
    assert_eq!(r.multiplier, 39.0);
    assert_eq!(r.conditions.len(), 3);
}

#[test]
fn seagate_packed_command_timeouts_count_the_largest_word() {
    // raw 51540393996 = 0x000C_000C_000C → 12 12 12: 4 · (1 + 0.5·log10 12) = 6.158362
    let r = assess(
        &m(),
        AFR,
        Some(&drive("sce-ata-seagate-exos-x16-188-packed-12-12-12.json")),
    );
    assert_eq!(r.conditions, vec![Condition::CommandTimeouts(12)]);
    assert!(close(r.multiplier, 6.158_362, 1e-6), "{r:?}");
}

#[test]
fn more_pending_sectors_never_lower_the_probability() {
    for id in [5, 187, 188, 197, 198] {
        let mut last = 0.0;
        for n in [
            0,
            1,
            2,
            3,
            8,
            10,
            100,
            1000,
            65535,
            1 << 20,
            u64::from(u32::MAX),
        ] {
            // 188's raw value is three packed counters, not one count: its counters grow as
            // `n n n` (Seagate's form; below 65536 the plain count is the same number)
            let raw = if id == 188 {
                let w = n.min(0xffff);
                w << 32 | w << 16 | w
            } else {
                n
            };
            let p = assess(&m(), AFR, Some(&with_raw(CLEAN, id, raw))).failure_probability(24.0);
            assert!(p >= last, "attribute {id}: {n} gives {p} < {last}");
            last = p;
        }
    }
}

#[test]
fn the_cap_bounds_every_combination() {
    // FAILED (100) × age 3.24 would be 324: capped at 100.
    let r = assess(
        &m(),
        AFR,
        Some(&drive(
            "scrutiny-ata-hitachi-usbjmicron-FAILED-exit216.json",
        )),
    );
    assert!(r.capped);
    assert_eq!(r.multiplier, 100.0);
    assert!(close(r.age_multiplier, 3.241_273, 1e-6), "{r:?}");
    // a lower cap wins; a huge count stays under it too
    let low = DriveRiskModel {
        max_multiplier: 20.0,
        ..m()
    };
    let r = assess(&low, AFR, Some(&with_raw(CLEAN, 198, u64::from(u32::MAX))));
    assert_eq!((r.multiplier, r.capped), (20.0, true));
    // the cap can be raised
    let high = DriveRiskModel {
        max_multiplier: 1000.0,
        ..m()
    };
    let r = assess(
        &high,
        AFR,
        Some(&drive(
            "scrutiny-ata-hitachi-usbjmicron-FAILED-exit216.json",
        )),
    );
    assert!(!r.capped);
    assert!(close(r.multiplier, 324.127_31, 1e-6), "{r:?}");
}

#[test]
fn count_growth_zero_is_the_threshold_model() {
    let flat = DriveRiskModel {
        count_growth: 0.0,
        ..m()
    };
    for n in [1, 8, 5000] {
        let r = assess(&flat, AFR, Some(&with_raw(CLEAN, 197, n)));
        assert_eq!(r.multiplier, 16.0);
    }
}

#[test]
fn nvme_spare_below_threshold() {
    // real Intel P4510, spare 100 % of threshold 10 %: clean; the same with 5 % spare left
    let mut d = drive("sce-nvme-intel-p4510.json");
    assert_eq!(assess(&m(), AFR, Some(&d)).multiplier, 1.0);
    if let Some(n) = d.nvme.as_mut() {
        n.available_spare_pct = Some(5);
    }
    let r = assess(&m(), AFR, Some(&d));
    assert_eq!(r.conditions, vec![Condition::SpareBelowThreshold]);
    assert_eq!(r.multiplier, 16.0);
    // at the threshold counts too (the spec's warning is "below"; smartctl's is ≤)
    if let Some(n) = d.nvme.as_mut() {
        n.available_spare_pct = Some(10);
    }
    assert_eq!(assess(&m(), AFR, Some(&d)).multiplier, 16.0);
    // smartd's state: spare 9 < 10, warning bit 0, 97 % used, 7 media errors:
    // max(16, 14·(1 + 0.5·log10 7) = 19.915686)
    let r = assess(
        &m(),
        AFR,
        Some(&drive(
            "synthetic-smartd-jsonstate-nvme-spare-below-threshold.json",
        )),
    );
    assert_eq!(
        r.conditions,
        vec![Condition::MediaErrors(7), Condition::SpareBelowThreshold]
    );
    assert!(close(r.multiplier, 19.915_686, 1e-6), "{r:?}");
    assert_eq!(r.age_multiplier, 1.0, "flash does not age by hours here");
}

#[test]
fn nvme_worn_out_and_media_errors() {
    let mut d = drive("sce-nvme-intel-p3700.json"); // 51 % used
    assert_eq!(assess(&m(), AFR, Some(&d)).multiplier, 1.0);
    if let Some(n) = d.nvme.as_mut() {
        n.percentage_used = Some(100);
    }
    let r = assess(&m(), AFR, Some(&d));
    assert_eq!(
        (r.multiplier, r.conditions.clone()),
        (4.0, vec![Condition::WornOut])
    );
    // real Samsung 970 EVO with 7 media errors
    let r = assess(
        &m(),
        AFR,
        Some(&drive("scrutiny-nvme-samsung-970-evo-media-errors.json")),
    );
    assert_eq!(r.conditions, vec![Condition::MediaErrors(7)]);
}

#[test]
fn failed_health_takes_the_failed_multiplier() {
    // real Samsung PM1725a: FAILED, critical warning 0x10 (volatile memory backup failed)
    let r = assess(
        &m(),
        AFR,
        Some(&drive(
            "sce-nvme-samsung-pm1725a-critical-warning-16-failed-exit8.json",
        )),
    );
    assert_eq!(
        r.conditions,
        vec![Condition::CriticalWarning(16), Condition::HealthFailed]
    );
    assert_eq!(r.multiplier, 100.0);
    assert!(!r.capped);
    // FAILED alone on an otherwise clean drive
    let mut d = drive(CLEAN);
    d.health = OverallHealth::Failed;
    let r = assess(&m(), AFR, Some(&d));
    assert_eq!(
        (r.multiplier, r.conditions),
        (100.0, vec![Condition::HealthFailed])
    );
    // the temperature bit alone is no failure
    let mut d = drive("sce-nvme-intel-p4510.json");
    if let Some(n) = d.nvme.as_mut() {
        n.critical_warning = Some(0x02);
    }
    assert_eq!(assess(&m(), AFR, Some(&d)).multiplier, 1.0);
}

#[test]
fn sas_grown_defects_and_uncorrected_errors() {
    // real ST373453LC: 260 grown defects, 1 + 535 uncorrected; 102880 h → age capped at 4:
    // max(14·(1 + 0.5·log10 260) = 30.905, 14·(1 + 0.5·log10 536) = 33.104) × 4 = 132.4 → 100
    let r = assess(
        &m(),
        AFR,
        Some(&drive(
            "sce-scsi-seagate-st373453lc-grown-260-uncorrected-read-1.json",
        )),
    );
    assert_eq!(
        r.conditions,
        vec![
            Condition::GrownDefects(260),
            Condition::UncorrectedErrors(536)
        ]
    );
    assert!(close(r.condition_multiplier, 33.104_154, 1e-6), "{r:?}");
    assert_eq!(r.age_multiplier, 4.0);
    assert_eq!((r.multiplier, r.capped), (100.0, true));
    // its sibling with an empty defect list: age only, 91691 h → 1 + 0.5·7.4596 = 4.0 (capped)
    let r = assess(
        &m(),
        AFR,
        Some(&drive("sce-scsi-seagate-st373453lc-grown-0.json")),
    );
    assert!(r.conditions.is_empty());
    // an SAS SSD without a grown defect list: nothing, and no age factor
    let r = assess(
        &m(),
        AFR,
        Some(&drive(
            "libblockdev-scsi-hgst-husmr3280-sas-ssd-no-grown-defect-list.json",
        )),
    );
    assert_eq!((r.multiplier, r.age_multiplier), (1.0, 1.0));
}

#[test]
fn asleep_not_read_or_unknown_keep_the_flat_rate() {
    for name in [
        "synthetic-ata-n-standby-power-mode-standby-exit2.json",
        "scrutiny-open-failed-windows-exit2-no-device.json",
    ] {
        let r = assess(&m(), AFR, Some(&drive(name)));
        assert_eq!(r, DriveRisk::flat(AFR), "{name}");
        assert!(!r.read);
    }
    assert_eq!(assess(&m(), AFR, None), DriveRisk::flat(AFR));
    assert!(close(
        DriveRisk::flat(AFR).failure_probability(24.0),
        5.475_552e-5,
        1e-6
    ));
}

#[test]
fn the_bathtub() {
    let model = m();
    assert_eq!(age_multiplier(&model, 0.0), 1.75);
    assert_eq!(age_multiplier(&model, 2189.0), 1.75);
    assert_eq!(age_multiplier(&model, 2190.0), 1.0);
    assert_eq!(age_multiplier(&model, 26298.0), 1.0);
    // five years: 1 + 0.5 · (43830 − 26298)/8766 = 2
    assert!(close(age_multiplier(&model, 43830.0), 2.0, 1e-12));
    assert_eq!(age_multiplier(&model, 200_000.0), 4.0);
    // a new hard disk is in its infancy, a new SSD is not
    let mut d = drive(CLEAN);
    d.power_on_hours = Some(100);
    assert_eq!(assess(&model, AFR, Some(&d)).multiplier, 1.75);
    d.rotation_rate_rpm = Some(0);
    assert_eq!(assess(&model, AFR, Some(&d)).multiplier, 1.0);
    // unknown age: no factor
    let mut d = drive(CLEAN);
    d.power_on_hours = None;
    assert_eq!(assess(&model, AFR, Some(&d)).age_multiplier, 1.0);
}

#[test]
fn every_drive_of_the_corpus_gets_a_rate_within_the_bounds() {
    let model = m();
    let mut n = 0;
    for entry in std::fs::read_dir(fixture_dir()).expect("fixture dir") {
        let path = entry.expect("entry").path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(d) = parse(&text) else {
            continue;
        };
        let r = assess(&model, AFR, Some(&d));
        assert!(
            r.multiplier.is_finite() && (1.0..=model.max_multiplier).contains(&r.multiplier),
            "{path:?}: {r:?}"
        );
        let p = r.failure_probability(168.0);
        assert!((0.0..1.0).contains(&p), "{path:?}: {p}");
        n += 1;
    }
    assert!(n >= 40, "{n} fixtures assessed");
}

#[test]
fn default_config_section_matches_the_defaults() {
    let parsed: RiskModel = toml::from_str("[drive]\npending_multiplier = 16.0\n").expect("toml");
    assert_eq!(parsed.drive, DriveRiskModel::default());
    let err = toml::from_str::<RiskModel>("[drive]\npending_multiplyer = 1.0\n")
        .expect_err("typo rejected");
    assert!(err.to_string().contains("pending_multiplyer"), "{err}");
}

#[test]
fn member_rates_for_the_array() {
    let model = RiskModel::default();
    let clean = drive(CLEAN);
    let asleep = drive("synthetic-ata-n-standby-power-mode-standby-exit2.json");
    let pending = with_raw(CLEAN, 197, 1);
    assert_eq!(member_afr(&model, Some(&clean)), Some(0.02));
    assert_eq!(member_afr(&model, Some(&asleep)), None);
    assert_eq!(member_afr(&model, None), None);
    assert_eq!(member_afr(&model, Some(&pending)), Some(0.32));
}

#[test]
fn bad_numbers_are_refused_with_their_key() {
    assert_eq!(m().validate(), Ok(()));
    for (bad, key) in [
        (
            DriveRiskModel {
                pending_multiplier: -1.0,
                ..m()
            },
            "pending_multiplier",
        ),
        (
            DriveRiskModel {
                count_growth: f64::NAN,
                ..m()
            },
            "count_growth",
        ),
        (
            DriveRiskModel {
                max_multiplier: 0.5,
                ..m()
            },
            "max_multiplier",
        ),
        (
            DriveRiskModel {
                infant_hours: 30000.0,
                ..m()
            },
            "infant_hours",
        ),
    ] {
        let err = bad.validate().expect_err("refused");
        assert!(err.contains(key), "{err}");
    }
}

#[test]
fn the_agent_config_refuses_a_bad_risk_drive_value() {
    let c =
        crate::config::Config::parse("[risk.drive]\npending_multiplier = -16.0\n").expect("parses");
    let err = c.validate().expect_err("refused").to_string();
    assert!(err.contains("pending_multiplier"), "{err}");
}
