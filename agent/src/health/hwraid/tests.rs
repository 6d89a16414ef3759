use std::collections::BTreeMap;
use std::path::Path;

use super::*;
use crate::health::risk::RiskModel;
use crate::sources::storcli::{self, Controller};

fn fixture(name: &str) -> Vec<Controller> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/storcli")
        .join(name);
    let text = std::fs::read_to_string(&path).expect("fixture");
    storcli::parse(&text).expect("parses")
}

/// The degraded RAID6 with its rebuild rows merged in, as the collector merges them.
fn rebuilding() -> Vec<Controller> {
    let mut c = fixture("edited-netdata-c0-show-all-raid6-dgrd-pd-252-3-rbld.json");
    let r = fixture("synthetic-c0-eall-sall-show-rebuild-252-3-37pct.json");
    c[0].rebuilds = r[0].rebuilds.clone();
    c
}

fn params() -> Params {
    Params {
        stall_after_s: 7200.0,
        eta_window_s: 3600.0,
        risk: RiskModel::default(),
    }
}

#[test]
fn redundancy_by_level() {
    assert_eq!(base_redundancy("RAID0", 4), Some(0));
    assert_eq!(base_redundancy("RAID1", 2), Some(1));
    assert_eq!(base_redundancy("RAID5", 4), Some(1));
    assert_eq!(base_redundancy("RAID6", 6), Some(2));
    assert_eq!(base_redundancy("RAID10", 8), Some(1));
    assert_eq!(base_redundancy("RAID50", 8), Some(1));
    assert_eq!(base_redundancy("RAID60", 12), Some(2));
    assert_eq!(base_redundancy("JBOD", 1), None);
}

#[test]
fn an_optimal_raid6_has_two_left_and_no_risk() {
    let mut d = HwraidDetector::new(params());
    let mut ev = Vec::new();
    d.observe(
        &fixture("netdata-c0-show-all-raid6-optl-ibbu-optimal.json"),
        &BTreeMap::new(),
        0.0,
        &mut ev,
    );
    let v = &d.vds()[0];
    assert_eq!(v.vd, "c0/v0");
    assert_eq!((v.state.as_str(), v.ok, v.degraded), ("Optl", true, false));
    assert_eq!(
        (v.members, v.members_online, v.redundancy_left),
        (6, 6, Some(2))
    );
    assert_eq!(v.rebuild_risk, Some(0.0));
    assert_eq!(v.write_back_active, Some(true));
    let c = &d.controllers()[0];
    assert_eq!(
        (c.bbu_present, c.bbu_state.as_deref(), c.bbu_ok, c.ok),
        (true, Some("Optimal"), Some(true), Some(true))
    );
    assert!(ev.is_empty(), "the first reading is the baseline");
}

#[test]
fn a_rebuilding_raid6_reports_progress_eta_risk_and_events() {
    let mut d = HwraidDetector::new(params());
    let mut ev = Vec::new();
    d.observe(
        &fixture("netdata-c0-show-all-raid6-optl-ibbu-optimal.json"),
        &BTreeMap::new(),
        0.0,
        &mut ev,
    );
    d.observe(&rebuilding(), &BTreeMap::new(), 60.0, &mut ev);
    let v = &d.vds()[0];
    assert_eq!((v.state.as_str(), v.degraded), ("Dgrd", true));
    assert_eq!(
        (v.members, v.members_online, v.members_rebuilding),
        (6, 5, 1)
    );
    assert_eq!(v.redundancy_left, Some(1));
    assert_eq!(v.rebuild_progress_pct, Some(37.0));
    // storcli's own estimate: 5 Hours 12 Minutes
    assert_eq!(v.rebuild_eta_s, Some(18_720.0));
    let risk = v.rebuild_risk.expect("risk");
    assert!(risk > 0.0 && risk < 1e-5, "{risk}");
    let pd = d.pds().iter().find(|p| p.slot == "252:3").expect("252:3");
    assert_eq!(pd.state, "Rbld");
    assert_eq!(pd.vd, "c0/v0");
    let objs: Vec<(&str, &str, &str)> = ev
        .iter()
        .map(|e| {
            (
                e.object.as_str(),
                e.from_state.as_str(),
                e.to_state.as_str(),
            )
        })
        .collect();
    assert_eq!(
        objs,
        [
            ("c0/v0", "Optl", "Dgrd"),
            ("c0/v0/rebuild", "idle", "rebuilding"),
            ("c0/252:3", "Onln", "Rbld"),
        ]
    );
}

#[test]
fn without_storcli_s_estimate_the_eta_comes_from_the_rate_and_a_still_rebuild_stalls() {
    let mut d = HwraidDetector::new(params());
    let mut ev = Vec::new();
    let at = |pct: u8| {
        let mut c = rebuilding();
        for r in &mut c[0].rebuilds {
            if r.in_progress {
                r.progress_pct = Some(pct);
                r.time_left_s = None;
            }
        }
        c
    };
    d.observe(&at(10), &BTreeMap::new(), 0.0, &mut ev);
    assert_eq!(d.vds()[0].rebuild_eta_s, None, "one sample: no rate yet");
    d.observe(&at(20), &BTreeMap::new(), 600.0, &mut ev);
    // 10 % in 600 s: 80 % left takes 4800 s
    let eta = d.vds()[0].rebuild_eta_s.expect("eta");
    assert!((eta - 4800.0).abs() < 1e-6, "{eta}");
    assert!(!d.vds()[0].rebuild_stalled);
    d.observe(&at(20), &BTreeMap::new(), 600.0 + 7200.0, &mut ev);
    let v = &d.vds()[0];
    assert!(v.rebuild_stalled);
    assert_eq!(v.rebuild_eta_s, None);
    assert!(ev
        .iter()
        .any(|e| e.object == "c0/v0/rebuild" && e.to_state == "stalled"));
    d.observe(&at(21), &BTreeMap::new(), 600.0 + 7260.0, &mut ev);
    assert!(!d.vds()[0].rebuild_stalled);
    assert!(ev
        .iter()
        .any(|e| e.object == "c0/v0/rebuild" && e.from_state == "stalled"));
}

#[test]
fn a_survivor_with_media_errors_raises_the_risk_and_is_counted_at_risk() {
    let clean = {
        let mut c = rebuilding();
        for d in &mut c[0].physical_drives {
            d.media_errors = Some(0);
            d.other_errors = Some(0);
            d.predictive_failures = Some(0);
            d.smart_alert = Some(false);
        }
        c
    };
    let mut bad = clean.clone();
    if let Some(d) = bad[0].physical_drives.iter_mut().find(|d| d.slot.slot == 5) {
        d.media_errors = Some(12);
    }
    let mut pfa = clean.clone();
    if let Some(d) = pfa[0].physical_drives.iter_mut().find(|d| d.slot.slot == 5) {
        d.predictive_failures = Some(1);
    }
    let risk = |c: &[Controller]| {
        let mut d = HwraidDetector::new(params());
        d.observe(c, &BTreeMap::new(), 0.0, &mut Vec::new());
        (
            d.vds()[0].rebuild_risk.unwrap_or(f64::NAN),
            d.vds()[0].members_at_risk,
        )
    };
    let (r_clean, n_clean) = risk(&clean);
    let (r_bad, n_bad) = risk(&bad);
    let (r_pfa, n_pfa) = risk(&pfa);
    assert_eq!((n_clean, n_bad, n_pfa), (0, 1, 1));
    assert!(
        r_clean < r_bad && r_bad < r_pfa,
        "{r_clean} {r_bad} {r_pfa}"
    );
    // the flat rate for every clean survivor: the binomial of risk.rs
    let flat = crate::health::risk::loss_probability(
        &RiskModel::default(),
        &crate::health::risk::Exposure {
            surviving: 5,
            redundancy_left: 1,
            window_h: Some(18_720.0 / 3600.0),
            bytes_to_read: None,
        },
    );
    assert!(
        (r_clean - flat).abs() <= 1e-12 * flat,
        "{r_clean} vs {flat}"
    );
}

#[test]
fn pd_counters_map_onto_the_drive_model() {
    let m = RiskModel::default();
    let mut pd = fixture("netdata-c0-eall-sall-show-all-6-sata-media-other-predictive.json")[0]
        .physical_drives[0]
        .clone();
    let r = pd_risk(&m, &pd);
    assert!(r.read);
    assert_eq!(r.multiplier, 1.0);
    // storcli counts a unit attention after every bus reset or hot-plug: reported, no risk
    pd.other_errors = Some(25);
    let r = pd_risk(&m, &pd);
    assert_eq!((r.multiplier, r.condition_multiplier), (1.0, 1.0));
    assert!(r.conditions.is_empty(), "{:?}", r.conditions);
    pd.media_errors = Some(1);
    assert_eq!(pd_risk(&m, &pd).multiplier, 14.0);
    pd.smart_alert = Some(true);
    assert_eq!(pd_risk(&m, &pd).multiplier, 100.0);
    pd.media_errors = None;
    pd.predictive_failures = None;
    pd.smart_alert = None;
    assert!(!pd_risk(&m, &pd).read, "no counters: the flat rate");
}

#[test]
fn an_offline_vd_is_certain_loss_and_a_cache_fall_is_an_event() {
    let mut d = HwraidDetector::new(params());
    let mut ev = Vec::new();
    d.observe(
        &fixture("cloudpods-c0-vall-show-all-7-vds-os-drive-name-wb-wt.json"),
        &BTreeMap::new(),
        0.0,
        &mut ev,
    );
    d.observe(
        &fixture("edited-cloudpods-c0-vall-show-all-v0-write-back-fell-to-rwtd.json"),
        &BTreeMap::new(),
        10.0,
        &mut ev,
    );
    let v0 = &d.vds()[0];
    assert_eq!(
        (v0.write_back_configured, v0.write_back_active),
        (Some(true), Some(false))
    );
    assert_eq!(
        ev.iter()
            .map(|e| (
                e.object.as_str(),
                e.from_state.as_str(),
                e.to_state.as_str()
            ))
            .collect::<Vec<_>>(),
        [("c0/v0/cache", "write-back", "write-through")]
    );

    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/storcli/mtik00-text-c2-show-all-offline.txt"),
    )
    .expect("fixture");
    let c = storcli::parse_text(&text).expect("parses");
    let mut d = HwraidDetector::new(params());
    d.observe(&c, &BTreeMap::new(), 0.0, &mut Vec::new());
    assert_eq!(d.controllers()[0].roc_temperature_c, Some(63));
    let v = &d.vds()[0];
    assert_eq!(v.state, "OfLn");
    assert_eq!((v.redundancy_left, v.rebuild_risk), (Some(0), Some(1.0)));
    assert_eq!(d.controllers()[0].vds_offline, 1);
}

#[test]
fn a_round_without_rebuild_progress_is_no_stall() {
    let mut d = HwraidDetector::new(params());
    let mut ev = Vec::new();
    d.observe(&rebuilding(), &BTreeMap::new(), 0.0, &mut ev);
    // `show rebuild` failed from then on: the drive is still Rbld, its progress unknown
    let mut blind = rebuilding();
    blind[0].rebuilds.clear();
    d.observe(&blind, &BTreeMap::new(), 3.0 * 7200.0, &mut ev);
    let v = &d.vds()[0];
    assert!(!v.rebuild_stalled, "{v:?}");
    assert_eq!((v.rebuild_progress_pct, v.members_rebuilding), (None, 1));
    assert!(ev.iter().all(|e| e.to_state != "stalled"), "{ev:?}");
}

#[test]
fn a_rebuild_storcli_still_gives_a_time_left_for_stalls_all_the_same() {
    let mut d = HwraidDetector::new(params());
    let mut ev = Vec::new();
    d.observe(&rebuilding(), &BTreeMap::new(), 0.0, &mut ev);
    d.observe(&rebuilding(), &BTreeMap::new(), 7200.0, &mut ev);
    let v = &d.vds()[0];
    assert!(v.rebuild_stalled, "37 % for two hours: {v:?}");
    assert_eq!(v.rebuild_eta_s, None);
    assert!(ev.iter().any(|e| e.to_state == "stalled"), "{ev:?}");
}

#[test]
fn a_paused_rebuild_is_stalled_at_once_with_its_percentage() {
    let mut d = HwraidDetector::new(params());
    let mut ev = Vec::new();
    d.observe(&rebuilding(), &BTreeMap::new(), 0.0, &mut ev);
    assert!(!d.vds()[0].rebuild_stalled);
    let mut paused = fixture("edited-netdata-c0-show-all-raid6-dgrd-pd-252-3-rbld.json");
    let r = fixture("edited-synthetic-c0-eall-sall-show-rebuild-252-3-37pct-paused.json");
    assert!(r[0]
        .rebuilds
        .iter()
        .any(|r| r.halted && r.status == "Paused"));
    paused[0].rebuilds = r[0].rebuilds.clone();
    // One minute later: far short of `stall_after`, but storcli says the rebuild is paused.
    d.observe(&paused, &BTreeMap::new(), 60.0, &mut ev);
    let v = &d.vds()[0];
    assert!(v.rebuild_stalled, "{v:?}");
    assert_eq!(v.rebuild_progress_pct, Some(37.0));
    assert_eq!(v.rebuild_eta_s, None);
    let p = d.pds().iter().find(|p| p.slot == "252:3").expect("252:3");
    assert_eq!(
        (p.rebuild_progress_pct, p.rebuild_eta_s),
        (Some(37.0), None)
    );
    assert!(
        ev.iter()
            .any(|e| e.object == "c0/v0/rebuild" && e.to_state == "stalled"),
        "{ev:?}"
    );
}

#[test]
fn other_errors_alone_put_no_member_at_risk() {
    let mut c = rebuilding();
    for d in &mut c[0].physical_drives {
        d.media_errors = Some(0);
        d.other_errors = Some(3);
        d.predictive_failures = Some(0);
        d.smart_alert = Some(false);
    }
    let mut d = HwraidDetector::new(params());
    d.observe(&c, &BTreeMap::new(), 0.0, &mut Vec::new());
    let v = &d.vds()[0];
    assert_eq!(v.members_at_risk, 0, "{v:?}");
    let p = d.pds().iter().find(|p| p.slot == "252:5").expect("252:5");
    assert_eq!((p.other_errors, p.at_risk), (Some(3), false));
    assert_eq!(p.afr, Some(RiskModel::default().afr));
}

#[test]
fn an_optimal_vd_with_a_copyback_and_a_dedicated_spare_has_no_risk() {
    // The optimal RAID6 of six: 252:5 receiving a copyback, and a seventh drive, a hot spare
    // dedicated to its drive group, listed with DG 0 (the drive-group fallback: no `PDs for VD`).
    let mut c = fixture("netdata-c0-show-all-raid6-optl-ibbu-optimal.json");
    for v in &mut c[0].virtual_drives {
        v.members.clear();
    }
    let mut spare = c[0].physical_drives[0].clone();
    spare.slot.slot = 9;
    spare.did = Some(40);
    spare.state = storcli::PdState::DedicatedHotSpare;
    spare.dg = Some(0);
    c[0].physical_drives.push(spare);
    if let Some(d) = c[0].physical_drives.iter_mut().find(|d| d.slot.slot == 5) {
        d.state = storcli::PdState::CopyBack;
    }
    let mut d = HwraidDetector::new(params());
    d.observe(&c, &BTreeMap::new(), 0.0, &mut Vec::new());
    let v = &d.vds()[0];
    assert_eq!(
        (
            v.members,
            v.members_online,
            v.redundancy_left,
            v.rebuild_risk
        ),
        (6, 6, Some(2), Some(0.0)),
        "{v:?}"
    );
    assert!(v.member_slots.iter().all(|(s, _)| s != "252:9"), "{v:?}");
    let spare = d.pds().iter().find(|p| p.slot == "252:9").expect("252:9");
    assert_eq!(spare.vd, "", "a spare is in no VD");
}

#[test]
fn a_degraded_raid10_is_judged_on_the_missing_drive_s_mirror_partner_alone() {
    // Real `show all` text: RAID10 VD 1 of seven RAID1 spans, 24:10 Offln, its partner 24:11.
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/storcli/mtik00-text-c0-show-all-raid10-dgrd-pd-offln.txt"),
    )
    .expect("fixture");
    let with = storcli::parse_text(&text).expect("parses");
    let spans: std::collections::BTreeSet<u32> = with[0]
        .topology
        .iter()
        .filter(|t| t.dg == 1)
        .map(|t| t.arr)
        .collect();
    assert_eq!(spans.len(), 7, "{:?}", with[0].topology);
    let mut without = with.clone();
    without[0].topology.clear();
    let vd1 = |c: &[Controller]| {
        let mut d = HwraidDetector::new(params());
        d.observe(c, &BTreeMap::new(), 0.0, &mut Vec::new());
        let v = d
            .vds()
            .iter()
            .find(|v| v.vd == "c0/v1")
            .expect("v1")
            .clone();
        let partner = d
            .pds()
            .iter()
            .find(|p| p.slot == "24:11")
            .expect("24:11")
            .clone();
        (v, partner)
    };
    let (flat, _) = vd1(&without);
    let (span, partner) = vd1(&with);
    assert_eq!(
        (span.level.as_str(), span.state.as_str()),
        ("RAID10", "Dgrd")
    );
    assert_eq!((span.members, span.members_online), (14, 13));
    assert_eq!(span.redundancy_left, Some(0));
    let (r_flat, r_span) = (
        flat.rebuild_risk.expect("flat"),
        span.rebuild_risk.expect("span"),
    );
    // Only 24:11's loss loses data: the risk of one survivor, not of thirteen.
    let one = crate::health::risk::loss_probability_members(
        &RiskModel::default(),
        &crate::health::risk::Exposure {
            surviving: 1,
            redundancy_left: 0,
            window_h: None,
            bytes_to_read: with[0]
                .physical_drives
                .iter()
                .filter(|d| d.dg == Some(1))
                .filter_map(|d| d.size_bytes)
                .max(),
        },
        &[partner.afr],
    );
    assert!((r_span - one).abs() <= 1e-12, "{r_span} vs {one}");
    assert!(
        // the unrecoverable-read term of copying 24:11 is common to both
        r_span > 0.0 && r_span < r_flat / 2.0,
        "{r_span} vs {r_flat}"
    );
}
