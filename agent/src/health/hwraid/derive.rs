//! One reading → statuses: the words storcli prints, a level's redundancy, a physical drive's
//! failure rate from its own counters, the controller's and battery's verdicts.
//!
//! **A PD's rate from storcli's counters** (docs/drive-risk.md, "Drives behind a RAID
//! controller"): storcli reports no SMART attributes, only the controller's own counters of the
//! drive, mapped onto [`crate::health::drive`]'s multipliers:
//!
//! * `Media Error Count` > 0 — unrecoverable medium errors the controller saw: the
//!   uncorrected/media-error figure (`media_errors_multiplier`, 14, Pinheiro et al.'s
//!   reallocation figure), growing with the count as for SMART counts;
//! * `Predictive Failure Count` > 0 or `S.M.A.R.T alert flagged by drive` — the drive's own
//!   SMART threshold tripped (a PFA): the drive says it is failing, as SMART overall health
//!   FAILED does (`failed_multiplier`, 100);
//!
//! `Other Error Count` — transport and non-medium errors (link resets, timeouts, unit
//! attentions) — is reported (`other_errors`) but raises nothing: storcli counts a unit attention
//! after every bus reset, controller reset or hot-plug, so healthy drives commonly show a few,
//! and counting them made `members_at_risk`, and the alert built on it, fire on healthy arrays.
//!
//! The largest multiplier counts, not their product; no age factor (storcli's `show all` gives
//! no power-on hours). A drive whose counters storcli did not give keeps the flat rate.

use crate::health::drive::{Condition, DriveRisk};
use crate::health::risk::RiskModel;
use crate::sources::storcli::{BatteryState, PdState, PhysicalDrive, VdState};

/// A VD state as storcli prints it.
pub fn vd_state_word(s: &VdState) -> String {
    match s {
        VdState::Optimal => "Optl".into(),
        VdState::Degraded => "Dgrd".into(),
        VdState::PartiallyDegraded => "Pdgd".into(),
        VdState::Offline => "OfLn".into(),
        VdState::Recovery => "Rec".into(),
        VdState::Other(o) => o.clone(),
    }
}

/// Whether the agent knows what a VD state means for its redundancy: `Optl`, `Dgrd`, `Pdgd`,
/// `OfLn`. Any other word (`Rec`, `Cac`, one a new storcli prints) is reported as it is, with
/// no redundancy figure and no risk.
pub(super) fn vd_state_known(s: &VdState) -> bool {
    vd_word_known(&vd_state_word(s))
}

/// [`vd_state_known`] of a state as printed.
pub(super) fn vd_word_known(w: &str) -> bool {
    matches!(w, "Optl" | "Dgrd" | "Pdgd" | "OfLn")
}

/// A PD state as storcli prints it.
pub fn pd_state_word(s: &PdState) -> String {
    match s {
        PdState::Online => "Onln".into(),
        PdState::Offline => "Offln".into(),
        PdState::Rebuild => "Rbld".into(),
        PdState::UnconfiguredGood => "UGood".into(),
        PdState::UnconfiguredBad => "UBad".into(),
        PdState::GlobalHotSpare => "GHS".into(),
        PdState::DedicatedHotSpare => "DHS".into(),
        PdState::Jbod => "JBOD".into(),
        PdState::Failed => "Failed".into(),
        PdState::CopyBack => "Cpybck".into(),
        PdState::Missing => "Msng".into(),
        PdState::Unsupported => "UGUnsp".into(),
        PdState::Shielded(s) | PdState::Other(s) => s.clone(),
    }
}

/// A PD state that holds no data it should (`pds_failed`).
pub(super) fn pd_failed(s: &PdState) -> bool {
    matches!(
        s,
        PdState::Failed | PdState::UnconfiguredBad | PdState::Offline | PdState::Missing
    )
}

/// A PD state nothing is wrong with.
pub(super) fn pd_ok(s: &PdState) -> bool {
    matches!(
        s,
        PdState::Online
            | PdState::UnconfiguredGood
            | PdState::GlobalHotSpare
            | PdState::DedicatedHotSpare
            | PdState::Jbod
            | PdState::CopyBack
    )
}

/// A battery state as the `bbu_state` field words it, and whether it is good: `Optimal`, or a
/// learn cycle (scheduled, normal; the cache may run write-through meanwhile, which the VD's
/// `write_back_active` shows).
pub(super) fn battery_word(s: &BatteryState) -> (String, bool) {
    match s {
        BatteryState::Optimal => ("Optimal".into(), true),
        BatteryState::Learning => ("Learning".into(), true),
        BatteryState::Degraded => ("Degraded".into(), false),
        BatteryState::Failed => ("Failed".into(), false),
        BatteryState::Missing => ("Missing".into(), false),
        BatteryState::Other(o) => (o.clone(), false),
    }
}

/// The member failures a level absorbs when every member is present; `None` for a level not
/// known. Spanned levels (10, 50, 60) count one span's: the failures absorbed for certain,
/// whichever members fail.
pub fn base_redundancy(level: &str, members: u32) -> Option<u32> {
    let l = level.trim().to_ascii_uppercase();
    let l = l.strip_prefix("RAID").unwrap_or(&l);
    Some(match l {
        "0" | "00" => 0,
        "1" | "1E" | "10" | "1E0" | "5" | "50" => u32::from(members >= 2),
        "6" | "60" => 2,
        _ => return None,
    })
}

/// Whether `level` reads every survivor to rebuild (parity) rather than one copy (mirrors).
pub(super) fn is_parity(level: &str) -> bool {
    let l = level.to_ascii_uppercase();
    l.contains('5') || l.contains('6')
}

/// A PD's failure rate from the controller's counters of it (see the module's comment);
/// [`DriveRisk::flat`] when storcli gave none of them.
pub fn pd_risk(model: &RiskModel, pd: &PhysicalDrive) -> DriveRisk {
    let m = &model.drive;
    if pd.media_errors.is_none() && pd.predictive_failures.is_none() && pd.smart_alert.is_none() {
        return DriveRisk::flat(model.afr);
    }
    let count = |base: f64, n: u64| base * (1.0 + m.count_growth * (n as f64).log10());
    let mut conditions = Vec::new();
    let mut condition = 1.0_f64;
    if let Some(n) = pd.media_errors.filter(|&n| n > 0) {
        conditions.push(Condition::MediaErrors(n));
        condition = condition.max(count(m.media_errors_multiplier, n));
    }
    if pd.predictive_failures.is_some_and(|n| n > 0) || pd.smart_alert == Some(true) {
        conditions.push(Condition::HealthFailed);
        condition = condition.max(m.failed_multiplier);
    }
    let capped = condition > m.max_multiplier;
    let multiplier = condition.min(m.max_multiplier);
    DriveRisk {
        afr: model.afr * multiplier,
        multiplier,
        condition_multiplier: condition,
        age_multiplier: 1.0,
        capped,
        read: true,
        conditions,
    }
}
