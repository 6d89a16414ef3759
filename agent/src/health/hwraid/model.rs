//! What the `raid_controller`, `raid_vd` and `raid_pd` lines say (docs/metrics-hwraid.md).

/// One controller, as last read.
#[derive(Debug, Clone, PartialEq)]
pub struct ControllerStatus {
    /// `c0`.
    pub controller: String,
    /// Product name.
    pub model: Option<String>,
    /// Serial number.
    pub serial: Option<String>,
    /// storcli's `Controller Status` (`Optimal`, `Needs Attention`, …).
    pub status: Option<String>,
    /// `Optimal`; `None` when storcli gave no status.
    pub ok: Option<bool>,
    /// Virtual drives.
    pub vds: u32,
    /// Virtual drives `Dgrd` or `Pdgd`.
    pub vds_degraded: u32,
    /// Virtual drives `OfLn`.
    pub vds_offline: u32,
    /// Physical drives.
    pub pds: u32,
    /// Physical drives `Failed`, `UBad`, `Offln` or `Msng`.
    pub pds_failed: u32,
    /// The RAID-on-chip's temperature, °C.
    pub roc_temperature_c: Option<i64>,
    /// A BBU or CacheVault is reported.
    pub bbu_present: bool,
    /// Its state as storcli words it (`Optimal`, `Failed`, `Learning`, `Degraded`, …).
    pub bbu_state: Option<String>,
    /// `Optimal`, or a learn cycle (a scheduled, normal state).
    pub bbu_ok: Option<bool>,
}

/// One virtual drive, as last read.
#[derive(Debug, Clone, PartialEq)]
pub struct VdStatus {
    /// `c0`.
    pub controller: String,
    /// `c0/v1`.
    pub vd: String,
    /// Its name, when set.
    pub name: Option<String>,
    /// `RAID6`, `RAID60`, `RAID1`, …
    pub level: String,
    /// The block device (`sdb`), where tied.
    pub device: Option<String>,
    /// The state as storcli prints it (`Optl`, `Dgrd`, `Pdgd`, `OfLn`, `Rec`, …).
    pub state: String,
    /// `Optl`.
    pub ok: bool,
    /// `Dgrd` or `Pdgd`.
    pub degraded: bool,
    /// Member failures it can still absorb for certain; `None` for a level not known.
    pub redundancy_left: Option<u32>,
    /// Members (the drive group's drives, a missing one counted).
    pub members: u32,
    /// Members `Onln`.
    pub members_online: u32,
    /// Members `Rbld`.
    pub members_rebuilding: u32,
    /// Progress of the least-advanced rebuilding member, percent.
    pub rebuild_progress_pct: Option<f64>,
    /// Seconds left: storcli's estimate, else from the progress rate.
    pub rebuild_eta_s: Option<f64>,
    /// A rebuild whose progress has not moved for `stall_after`.
    pub rebuild_stalled: bool,
    /// Probability of losing data before redundancy is restored.
    pub rebuild_risk: Option<f64>,
    /// Surviving members whose own counters raise their failure probability above the flat rate.
    pub members_at_risk: u32,
    /// storcli's `Cache` column (`RWBD`, `NRWTD`, …).
    pub cache: Option<String>,
    /// The VD's policy asks for write-back (`Write Cache(initial setting)`).
    pub write_back_configured: Option<bool>,
    /// Write-back in effect now (the `Cache` column).
    pub write_back_active: Option<bool>,
    /// Size, bytes (approximate: storcli rounds).
    pub size_bytes: Option<u64>,
    /// Members by slot (`252:3`), for `top`'s notes.
    pub member_slots: Vec<(String, String)>,
}

/// One physical drive, as last read.
#[derive(Debug, Clone, PartialEq)]
pub struct PdStatus {
    /// `c0`.
    pub controller: String,
    /// `252:3` (enclosure:slot).
    pub slot: String,
    /// Device id.
    pub did: Option<u32>,
    /// The virtual drives of its drive group (`c0/v1`, comma-separated); empty when in none.
    pub vd: String,
    /// Serial number.
    pub serial: Option<String>,
    /// World wide name.
    pub wwn: Option<String>,
    /// Model.
    pub model: Option<String>,
    /// `HDD` / `SSD`.
    pub medium: Option<String>,
    /// `SAS` / `SATA` / `NVMe`.
    pub interface: Option<String>,
    /// State as storcli prints it.
    pub state: String,
    /// `Onln`, `UGood`, `GHS`, `DHS`, `JBOD` or `Cpybck`.
    pub ok: bool,
    /// `Media Error Count`.
    pub media_errors: Option<u64>,
    /// `Other Error Count`.
    pub other_errors: Option<u64>,
    /// `Predictive Failure Count`.
    pub predictive_failures: Option<u64>,
    /// `S.M.A.R.T alert flagged by drive`.
    pub smart_alert: Option<bool>,
    /// °C.
    pub temperature_c: Option<i64>,
    /// Rebuild progress while `Rbld`, percent.
    pub rebuild_progress_pct: Option<f64>,
    /// Rebuild seconds left while `Rbld`.
    pub rebuild_eta_s: Option<f64>,
    /// Probability of failing within the risk window (`[risk] open_window_h`); `None` when
    /// storcli gave none of its counters.
    pub failure_probability: Option<f64>,
    /// Its annual failure rate when its counters were read (for the VD's risk).
    pub afr: Option<f64>,
    /// Its counters raise its rate above the flat one.
    pub at_risk: bool,
}
