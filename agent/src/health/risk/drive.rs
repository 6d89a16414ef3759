//! The configuration of each drive's own rate (agent config `[risk.drive]`): the hazard
//! multipliers and the age curve that [`crate::health::drive::assess`] applies. It sits with the
//! `[risk]` model that holds it, below the drive model that reads it.

/// Hazard multipliers and the age curve (agent config `[risk.drive]`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DriveRiskModel {
    /// ATA 5 (reallocated sectors) above 0 (Pinheiro et al. 2007: 14× after the first).
    pub reallocated_multiplier: f64,
    /// ATA 187 (reported uncorrectable) above 0 (the reallocation figure; Backblaze 2014).
    pub reported_uncorrectable_multiplier: f64,
    /// ATA 188 (command timeouts; Seagate's three packed counters) above 0 (our choice).
    pub command_timeout_multiplier: f64,
    /// ATA 197 (current pending sectors) above 0 (Pinheiro: probational counts, 16×).
    pub pending_multiplier: f64,
    /// ATA 198 (offline uncorrectable) above 0 (Pinheiro: scan errors, 39×).
    pub offline_uncorrectable_multiplier: f64,
    /// SCSI/SAS grown defect list above 0 (the reallocation figure).
    pub grown_defects_multiplier: f64,
    /// SCSI/SAS uncorrected read, write or verify errors above 0 (the reallocation figure).
    pub uncorrected_errors_multiplier: f64,
    /// NVMe media and data integrity errors above 0 (the reallocation figure).
    pub media_errors_multiplier: f64,
    /// NVMe available spare at or below its threshold, or critical warning bit 0 (our choice).
    pub spare_below_threshold_multiplier: f64,
    /// NVMe `percentage_used` ≥ 100 (our choice).
    pub worn_out_multiplier: f64,
    /// SMART overall health FAILED, or an NVMe critical warning bit 2–5 (reliability degraded,
    /// read-only, volatile backup failed, persistent memory unreliable).
    pub failed_multiplier: f64,
    /// Growth of a count's multiplier per tenfold count: `M·(1 + g·log10(n))` for `n ≥ 1`.
    pub count_growth: f64,
    /// Power-on hours below which a hard disk is in its infancy (default 2190 h, three months).
    pub infant_hours: f64,
    /// Age factor during infancy (Pinheiro: about 3 % AFR in the first three months against
    /// 1.7 % at one year).
    pub infant_multiplier: f64,
    /// Power-on hours at which wear-out starts (default 26298 h, three years).
    pub wearout_start_hours: f64,
    /// Added to the age factor per year past `wearout_start_hours`.
    pub wearout_per_year: f64,
    /// Largest age factor.
    pub wearout_max: f64,
    /// Cap on the whole multiplier (condition × age).
    pub max_multiplier: f64,
}

impl Default for DriveRiskModel {
    fn default() -> Self {
        Self {
            reallocated_multiplier: 14.0,
            reported_uncorrectable_multiplier: 14.0,
            command_timeout_multiplier: 4.0,
            pending_multiplier: 16.0,
            offline_uncorrectable_multiplier: 39.0,
            grown_defects_multiplier: 14.0,
            uncorrected_errors_multiplier: 14.0,
            media_errors_multiplier: 14.0,
            spare_below_threshold_multiplier: 16.0,
            worn_out_multiplier: 4.0,
            failed_multiplier: 100.0,
            count_growth: 0.5,
            infant_hours: 2190.0,
            infant_multiplier: 1.75,
            wearout_start_hours: 26298.0,
            wearout_per_year: 0.5,
            wearout_max: 4.0,
            max_multiplier: 100.0,
        }
    }
}

impl DriveRiskModel {
    /// Checks what serde cannot: every number finite and not negative, a cap of at least 1,
    /// infancy ending before wear-out starts. The message names the key.
    pub fn validate(&self) -> Result<(), String> {
        let keys = [
            ("reallocated_multiplier", self.reallocated_multiplier),
            (
                "reported_uncorrectable_multiplier",
                self.reported_uncorrectable_multiplier,
            ),
            (
                "command_timeout_multiplier",
                self.command_timeout_multiplier,
            ),
            ("pending_multiplier", self.pending_multiplier),
            (
                "offline_uncorrectable_multiplier",
                self.offline_uncorrectable_multiplier,
            ),
            ("grown_defects_multiplier", self.grown_defects_multiplier),
            (
                "uncorrected_errors_multiplier",
                self.uncorrected_errors_multiplier,
            ),
            ("media_errors_multiplier", self.media_errors_multiplier),
            (
                "spare_below_threshold_multiplier",
                self.spare_below_threshold_multiplier,
            ),
            ("worn_out_multiplier", self.worn_out_multiplier),
            ("failed_multiplier", self.failed_multiplier),
            ("count_growth", self.count_growth),
            ("infant_hours", self.infant_hours),
            ("infant_multiplier", self.infant_multiplier),
            ("wearout_start_hours", self.wearout_start_hours),
            ("wearout_per_year", self.wearout_per_year),
            ("wearout_max", self.wearout_max),
            ("max_multiplier", self.max_multiplier),
        ];
        for (key, v) in keys {
            if !v.is_finite() || v < 0.0 {
                return Err(format!(
                    "[risk.drive] {key} = {v}: must be a finite number, not negative"
                ));
            }
        }
        if self.max_multiplier < 1.0 {
            return Err(format!(
                "[risk.drive] max_multiplier = {}: must be at least 1",
                self.max_multiplier
            ));
        }
        if self.infant_hours > self.wearout_start_hours {
            return Err(format!(
                "[risk.drive] infant_hours ({}) must not exceed wearout_start_hours ({})",
                self.infant_hours, self.wearout_start_hours
            ));
        }
        Ok(())
    }
}
