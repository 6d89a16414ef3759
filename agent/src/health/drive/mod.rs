//! One drive's probability of failing within a window, from its condition and age as
//! `smartctl --json` reports them ([`DriveHealth`], [`crate::sources::smartctl`]). No I/O.
//! What changed between two readings of a drive (its `event`s) is [`events`].
//!
//! **Model.** A drive fails at a constant rate over a short window: its annual failure rate is
//! the fleet's flat rate ([`crate::health::risk::RiskModel::afr`], 2 %/year by default) times a
//! hazard multiplier `M`, so `p = 1 − exp(−AFR·M·T/8766)` over `T` hours. `M` is the product of
//! two factors, capped at [`DriveRiskModel::max_multiplier`] (default 100):
//!
//! * **condition** — the largest multiplier among the conditions the drive shows (not their
//!   product: each published multiplier is marginal, measured over drives that often show the
//!   others too, so multiplying them would count the same evidence several times);
//! * **age** — hard disks only (`rotation_rate` not 0, not NVMe): a bathtub over power-on hours.
//!
//! **Sources** (full references, figures and what we took from each: docs/drive-risk.md).
//!
//! * E. Pinheiro, W.-D. Weber, L. A. Barroso, "Failure Trends in a Large Disk Drive Population",
//!   USENIX FAST 2007 (Google, >100,000 consumer ATA drives): after the first scan error drives
//!   are 39 times more likely to fail within 60 days than drives without; after the first
//!   reallocation over 14 times; after the first offline reallocation over 21 times; after the
//!   first probational (pending) count 16 times; "the critical threshold … is one". AFR by age
//!   from 1.7 % in the first year to 8.6 % in the third (with a higher rate in the first three
//!   months, and a model mix the authors warn about).
//! * B. Schroeder, G. A. Gibson, "Disk failures in the real world: What does an MTTF of
//!   1,000,000 hours mean to you?", USENIX FAST 2007 (~100,000 drives): annual replacement rates
//!   "2-4% common and up to 13%"; "rather than a significant infant mortality effect … a
//!   significant early onset of wear-out degradation", rates growing steadily with age.
//! * Backblaze, A. Klein, "What SMART Stats Tell Us About Hard Drives" (2016-10-06) and
//!   B. Beach, "Hard Drive SMART Stats" (2014-11-12): the five attributes 5, 187, 188, 197, 198
//!   whose raw value above zero is "a reason to investigate"; 187's failure rate stays near
//!   zero while its raw value is 0 and rises steeply above. B. Beach, "How long do disk drives
//!   last?" (2013-11-12): 5.1 %/year in the first 1.5 years, 1.4 % in the next 1.5, 11.8 % after
//!   three years; its 2025 follow-up ("Are Hard Drives Getting Better? Let's Revisit the Bathtub
//!   Curve") finds a much flatter curve: about 1.3 % in the first year, a peak of 4.25 % at ten.
//!
//! The multipliers map as: 197 pending ← Pinheiro's probational counts (16); 198 offline
//! uncorrectable ← scan errors (39); 5 reallocated ← reallocations (14); 187 reported
//! uncorrectable, SAS uncorrected errors and grown defects, NVMe media errors ← the reallocation
//! figure (14) — no study publishes their own multiplier; 188 command timeouts ← 4, our
//! choice, lower because timeouts also come from cables, power and controllers. A count above
//! one raises the multiplier by [`DriveRiskModel::count_growth`] per tenfold (the sources show
//! the rate rising with the count but publish no formula; 0 gives the pure threshold model).
//! SMART overall health FAILED and an NVMe critical warning that says the drive itself is
//! failing (bits 2–5) take [`DriveRiskModel::failed_multiplier`]. NVMe available spare at or
//! below its threshold (or warning bit 0) and `percentage_used` ≥ 100 have no published field
//! multiplier either: 16 (the pending-sector figure: the drive's reserve of replacement blocks
//! at its end) and 4 (the wear-out ceiling) are our defaults. Every number is configurable in
//! `[risk.drive]`.
//!
//! A drive without data — not read, asleep in a low-power mode (`-n standby`), or unknown to
//! the caller — keeps the flat rate: `M = 1` ([`DriveRisk::flat`]).

pub mod events;

pub use crate::health::risk::DriveRiskModel;
use crate::health::risk::{disk_failure_probability, RiskModel, HOURS_PER_YEAR};
use crate::sources::smartctl::{DriveHealth, Outcome, OverallHealth, Protocol};

/// A condition that raised a drive's rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// ATA 5.
    Reallocated(u64),
    /// ATA 187.
    ReportedUncorrectable(u64),
    /// ATA 188: the largest of its three 16-bit words.
    CommandTimeouts(u64),
    /// ATA 197.
    Pending(u64),
    /// ATA 198.
    OfflineUncorrectable(u64),
    /// SCSI grown defect list.
    GrownDefects(u64),
    /// SCSI uncorrected read + write + verify errors.
    UncorrectedErrors(u64),
    /// NVMe media errors.
    MediaErrors(u64),
    /// NVMe available spare at or below its threshold.
    SpareBelowThreshold,
    /// NVMe percentage used at or above 100.
    WornOut,
    /// SMART overall health FAILED.
    HealthFailed,
    /// NVMe critical warning bits 2–5.
    CriticalWarning(u8),
}

/// One drive's rate, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct DriveRisk {
    /// The annual failure rate used for this drive: the flat rate times [`DriveRisk::multiplier`].
    pub afr: f64,
    /// The hazard multiplier applied (condition × age, capped).
    pub multiplier: f64,
    /// The largest condition multiplier (1 when the drive shows none).
    pub condition_multiplier: f64,
    /// The age factor (1 for solid state, unknown age or mid-life).
    pub age_multiplier: f64,
    /// The cap was applied.
    pub capped: bool,
    /// The drive's health was read (false: the flat rate, for lack of data).
    pub read: bool,
    /// The conditions found, in a fixed order.
    pub conditions: Vec<Condition>,
}

impl DriveRisk {
    /// The flat rate: a drive without data.
    pub fn flat(base_afr: f64) -> Self {
        Self {
            afr: base_afr,
            multiplier: 1.0,
            condition_multiplier: 1.0,
            age_multiplier: 1.0,
            capped: false,
            read: false,
            conditions: Vec::new(),
        }
    }

    /// Probability of this drive failing within `window_h` hours.
    pub fn failure_probability(&self, window_h: f64) -> f64 {
        disk_failure_probability(self.afr, window_h)
    }
}

/// The rate of one drive: `base_afr` (the flat `[risk] afr`) times its hazard multiplier.
/// `None`, and a drive that was not read or is asleep, gets the flat rate.
pub fn assess(model: &DriveRiskModel, base_afr: f64, drive: Option<&DriveHealth>) -> DriveRisk {
    let Some(d) = drive else {
        return DriveRisk::flat(base_afr);
    };
    if d.outcome() != Outcome::Read {
        return DriveRisk::flat(base_afr);
    }
    let mut conditions = Vec::new();
    let mut condition = 1.0_f64;
    let mut raise = |c: Condition, m: f64| {
        conditions.push(c);
        condition = condition.max(m);
    };
    let count = |base: f64, n: u64| base * (1.0 + model.count_growth * (n as f64).log10());

    if let Some(a) = &d.ata {
        if let Some(n) = a.reallocated_sectors.filter(|&n| n > 0) {
            raise(
                Condition::Reallocated(n),
                count(model.reallocated_multiplier, n),
            );
        }
        if let Some(n) = a.reported_uncorrectable.filter(|&n| n > 0) {
            raise(
                Condition::ReportedUncorrectable(n),
                count(model.reported_uncorrectable_multiplier, n),
            );
        }
        // Seagate packs three 16-bit counters into 188; for other drives the low word is the
        // count itself. The largest word is non-zero exactly when the raw value is.
        if let Some(w) = a.command_timeout_words {
            let n = u64::from(w.iter().copied().max().unwrap_or(0));
            if n > 0 {
                raise(
                    Condition::CommandTimeouts(n),
                    count(model.command_timeout_multiplier, n),
                );
            }
        }
        if let Some(n) = a.pending_sectors.filter(|&n| n > 0) {
            raise(Condition::Pending(n), count(model.pending_multiplier, n));
        }
        if let Some(n) = a.offline_uncorrectable.filter(|&n| n > 0) {
            raise(
                Condition::OfflineUncorrectable(n),
                count(model.offline_uncorrectable_multiplier, n),
            );
        }
    }
    if let Some(s) = &d.scsi {
        if let Some(n) = s.grown_defects.filter(|&n| n > 0) {
            raise(
                Condition::GrownDefects(n),
                count(model.grown_defects_multiplier, n),
            );
        }
        let unc = [
            s.read_uncorrected,
            s.write_uncorrected,
            s.verify_uncorrected,
        ]
        .iter()
        .flatten()
        .fold(0_u64, |a, &b| a.saturating_add(b));
        if unc > 0 {
            raise(
                Condition::UncorrectedErrors(unc),
                count(model.uncorrected_errors_multiplier, unc),
            );
        }
    }
    if let Some(n) = &d.nvme {
        if let Some(e) = n.media_errors.filter(|&e| e > 0) {
            raise(
                Condition::MediaErrors(e),
                count(model.media_errors_multiplier, e),
            );
        }
        let warn = n.warnings().unwrap_or_default();
        if n.spare_at_or_below_threshold() == Some(true) || warn.spare_below_threshold {
            raise(
                Condition::SpareBelowThreshold,
                model.spare_below_threshold_multiplier,
            );
        }
        if n.percentage_used.is_some_and(|u| u >= 100) {
            raise(Condition::WornOut, model.worn_out_multiplier);
        }
        let failing = warn.reliability_degraded
            || warn.read_only
            || warn.volatile_backup_failed
            || warn.persistent_memory_unreliable;
        if failing {
            raise(
                Condition::CriticalWarning(n.critical_warning.unwrap_or(0)),
                model.failed_multiplier,
            );
        }
    }
    if d.health == OverallHealth::Failed {
        raise(Condition::HealthFailed, model.failed_multiplier);
    }

    let age = if is_hard_disk(d) {
        d.power_on_hours
            .map_or(1.0, |h| age_multiplier(model, h as f64))
    } else {
        1.0
    };
    let raw = condition * age;
    let capped = raw > model.max_multiplier;
    let multiplier = raw.min(model.max_multiplier);
    DriveRisk {
        afr: base_afr * multiplier,
        multiplier,
        condition_multiplier: condition,
        age_multiplier: age,
        capped,
        read: true,
        conditions,
    }
}

/// One survivor's entry for [`crate::health::risk::loss_probability_members`]: its own rate
/// when its health was read, `None` (the flat rate) when there is no reading or it was not read.
pub fn member_afr(model: &RiskModel, drive: Option<&DriveHealth>) -> Option<f64> {
    let r = assess(&model.drive, model.afr, drive);
    r.read.then_some(r.afr)
}

/// The bathtub: `infant_multiplier` below `infant_hours`, 1 in mid-life, then rising by
/// `wearout_per_year` per year past `wearout_start_hours` up to `wearout_max`.
pub fn age_multiplier(model: &DriveRiskModel, power_on_hours: f64) -> f64 {
    if power_on_hours < model.infant_hours {
        return model.infant_multiplier;
    }
    if power_on_hours <= model.wearout_start_hours {
        return 1.0;
    }
    let years = (power_on_hours - model.wearout_start_hours) / HOURS_PER_YEAR;
    (1.0 + model.wearout_per_year * years).min(model.wearout_max)
}

/// Hard disks age by power-on hours; flash wears by writes (NVMe `percentage_used`) and the
/// age studies are of hard disks. A drive that does not say its rotation rate is taken as a
/// hard disk unless it is NVMe.
fn is_hard_disk(d: &DriveHealth) -> bool {
    d.protocol != Protocol::Nvme && d.rotation_rate_rpm != Some(0)
}

#[cfg(test)]
mod tests;
