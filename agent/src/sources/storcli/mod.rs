//! `storcli` / `storcli64` / `perccli` JSON output (the `J` suffix): MegaRAID / PERC
//! controllers, their virtual drives (VDs), physical drives (PDs), rebuilds and batteries.
//!
//! One parser reads every command the agent runs, because they all share one envelope —
//! `{"Controllers": [{"Command Status": {…, "Status": "Success"|"Failure", "Detailed
//! Status": [{"ErrMsg"…}]}, "Response Data": …}]}` — and differ only in the keys of
//! `Response Data`:
//!
//! | command | keys read |
//! |---|---|
//! | `/call show [all] J` | `Product Name`/`Basics.Model`, `Serial Number`, `Status.Controller Status`, `VD LIST`, `PD LIST`, `BBU_Info`, `Cachevault_Info`, `Physical Device Information` (HBA firmware) |
//! | `/cx/vall show all J` | `/cx/vN` (one VD row), `PDs for VD N`, `VDN Properties` (`OS Drive Name`, `Write Cache(initial setting)`, `Active Operations`) |
//! | `/cx/eall/sall show [all] J` | `Drive /cx/eE/sS` (one PD row), `Drive … - Detailed Information` → `Drive … State` (`Media Error Count`, `Other Error Count`, `Predictive Failure Count`, `S.M.A.R.T alert flagged by drive`) and `Drive … Device attributes` (`SN`, `WWN`, `Firmware Revision`); `Drive Information` |
//! | `/cx/eall/sall show rebuild J` | `Response Data` is a list of `{"Drive-ID", "Progress%", "Status", "Estimated Time Left"}` |
//! | `/cx/bbu show all J`, `/cx/cv show all J` | `BBU_Info` / `Cachevault_Info` as `{"Property", "Value"}` rows (`Battery State`, `State`, `Temperature`) |
//! | `show J` | `System Overview` (one row per controller: `Hlth`, `VDs`, `VNOpt`, `DNOpt`) |
//!
//! State abbreviations are storcli's own; the legends it prints under each table (copied
//! from a real `storcli64 /c0 show all` run, `fixtures/storcli/mtik00-text-…-dgrd-…txt`):
//!
//! ```text
//! VD:  Cac=CacheCade|Rec=Recovery|OfLn=OffLine|Pdgd=Partially Degraded|dgrd=Degraded
//!      Optl=Optimal|RO=Read Only|RW=Read Write|HD=Hidden|B=Blocked|Consist=Consistent|
//!      R=Read Ahead Always|NR=No Read Ahead|WB=WriteBack|
//!      AWB=Always WriteBack|WT=WriteThrough|C=Cached IO|D=Direct IO|sCC=Scheduled
//!      Check Consistency
//! PD:  DHS-Dedicated Hot Spare|UGood-Unconfigured Good|GHS-Global Hotspare
//!      UBad-Unconfigured Bad|Onln-Online|Offln-Offline|Intf-Interface
//!      Sp-Spun|U-Up|D-Down|T-Transition|F-Foreign
//!      UGUnsp-Unsupported|UGShld-UnConfigured shielded|HSPShld-Hotspare shielded
//!      CFShld-Configured shielded|Cpybck-CopyBack|CBShld-Copyback Shielded
//! TOPOLOGY: Onln=Online|Rbld=Rebuild|Dgrd=Degraded|Pdgd=Partially degraded|Offln=Offline
//!      Msng=Missing
//! ```
//!
//! Sizes are printed rounded to three decimals in binary units (`14.551 TB` is 16 × 10¹²
//! bytes), so `size_bytes` is approximate. A controller whose command failed is returned
//! with its failure (`status.ok == false` and the messages): that is data, not a parse
//! error. Malformed or truncated JSON is a [`ParseError`] naming the line.
//!
//! [`parse_text`] reads the same facts from the text tables of `storcli /cx show [all]`
//! (without `J`), for captures that exist only as text.

use super::ParseError;

mod json;
mod text;
mod value;
use json::empty_vd;
pub use json::parse;
pub use text::parse_text;
use value::{as_u32, as_u64, dg_vd, temperature, text, word};
pub use value::{duration_s, parse_size};

/// Virtual drive state (`State` of `VD LIST`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VdState {
    /// `Optl`: optimal.
    Optimal,
    /// `Dgrd`: degraded, redundancy lost.
    Degraded,
    /// `Pdgd`: partially degraded (e.g. RAID6 with one member missing).
    PartiallyDegraded,
    /// `OfLn`: offline, data unavailable.
    Offline,
    /// `Rec`: recovery.
    Recovery,
    /// Anything else, as storcli printed it.
    Other(String),
}

impl VdState {
    fn from_abbrev(s: &str) -> Self {
        match s.trim() {
            "Optl" => Self::Optimal,
            // the legend writes "dgrd"; the tables print "Dgrd"
            "Dgrd" | "dgrd" => Self::Degraded,
            "Pdgd" => Self::PartiallyDegraded,
            "OfLn" => Self::Offline,
            "Rec" => Self::Recovery,
            other => Self::Other(other.to_owned()),
        }
    }
}

/// Physical drive state (`State` of `PD LIST` and `Drive /cx/eE/sS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PdState {
    /// `Onln`: online member of a drive group.
    Online,
    /// `Offln`: offline.
    Offline,
    /// `Rbld`: being rebuilt.
    Rebuild,
    /// `UGood`: unconfigured, good.
    UnconfiguredGood,
    /// `UBad`: unconfigured, bad.
    UnconfiguredBad,
    /// `GHS`: global hot spare.
    GlobalHotSpare,
    /// `DHS`: dedicated hot spare.
    DedicatedHotSpare,
    /// `JBOD`: passed through to the OS.
    Jbod,
    /// `Failed` (MegaCLI-era name some firmware still prints).
    Failed,
    /// `Cpybck`: copyback in progress.
    CopyBack,
    /// `Msng`: missing.
    Missing,
    /// `UGUnsp`: unsupported.
    Unsupported,
    /// `UGShld`, `HSPShld`, `CFShld`, `CBShld`: shielded (diagnostics after errors).
    Shielded(String),
    /// Anything else, as storcli printed it.
    Other(String),
}

impl PdState {
    fn from_abbrev(s: &str) -> Self {
        match s.trim() {
            "Onln" => Self::Online,
            "Offln" => Self::Offline,
            "Rbld" => Self::Rebuild,
            "UGood" => Self::UnconfiguredGood,
            "UBad" => Self::UnconfiguredBad,
            "GHS" => Self::GlobalHotSpare,
            "DHS" => Self::DedicatedHotSpare,
            "JBOD" => Self::Jbod,
            "Failed" | "Fail" => Self::Failed,
            "Cpybck" => Self::CopyBack,
            "Msng" => Self::Missing,
            "UGUnsp" => Self::Unsupported,
            s @ ("UGShld" | "HSPShld" | "CFShld" | "CBShld") => Self::Shielded(s.to_owned()),
            other => Self::Other(other.to_owned()),
        }
    }
}

/// Write policy: the middle of the `Cache` column, or `Write Cache(initial setting)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WritePolicy {
    /// `WB`: write-back while the battery/CacheVault is good.
    WriteBack,
    /// `AWB`: write-back even without a good battery.
    AlwaysWriteBack,
    /// `WT`: write-through.
    WriteThrough,
}

impl WritePolicy {
    /// `Write Cache(initial setting)`: `WriteBack`, `WriteThrough`, `AlwaysWriteBack`.
    fn from_setting(s: &str) -> Option<Self> {
        match s.trim() {
            "WriteBack" | "WB" => Some(Self::WriteBack),
            "AlwaysWriteBack" | "AWB" => Some(Self::AlwaysWriteBack),
            "WriteThrough" | "WT" => Some(Self::WriteThrough),
            _ => None,
        }
    }

    /// Whether writes are acknowledged from the controller's cache.
    pub fn is_write_back(self) -> bool {
        !matches!(self, Self::WriteThrough)
    }
}

/// The `Cache` column, e.g. `RWBD` = read-ahead, write-back, direct I/O; `NRWTD`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachePolicy {
    /// As printed.
    pub text: String,
    /// `R` (true) or `NR` (false).
    pub read_ahead: Option<bool>,
    /// `WB`, `AWB` or `WT`.
    pub write: Option<WritePolicy>,
    /// `C` (true, cached I/O) or `D` (false, direct I/O).
    pub cached_io: Option<bool>,
}

impl CachePolicy {
    /// Decodes the `Cache` column; parts it does not recognise are left `None`.
    pub fn parse(text: &str) -> Self {
        let t = text.trim();
        let (read_ahead, rest) = if let Some(r) = t.strip_prefix("NR") {
            (Some(false), r)
        } else if let Some(r) = t.strip_prefix('R') {
            (Some(true), r)
        } else {
            (None, t)
        };
        let (write, rest) = if let Some(r) = rest.strip_prefix("AWB") {
            (Some(WritePolicy::AlwaysWriteBack), r)
        } else if let Some(r) = rest.strip_prefix("WB") {
            (Some(WritePolicy::WriteBack), r)
        } else if let Some(r) = rest.strip_prefix("WT") {
            (Some(WritePolicy::WriteThrough), r)
        } else {
            (None, rest)
        };
        let cached_io = match rest {
            "C" => Some(true),
            "D" => Some(false),
            _ => None,
        };
        Self {
            text: t.to_owned(),
            read_ahead,
            write,
            cached_io,
        }
    }
}

/// A physical drive's place: enclosure and slot (`EID:Slt`, `Drive-ID`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slot {
    /// Enclosure id; `None` for drives attached without an enclosure.
    pub enclosure: Option<u32>,
    /// Slot number.
    pub slot: u32,
}

impl Slot {
    /// `252:3`, ` :3` or `:3`.
    pub fn parse_eid_slt(s: &str) -> Option<Self> {
        let (e, sl) = s.trim().split_once(':')?;
        let e = e.trim();
        Some(Self {
            enclosure: if e.is_empty() {
                None
            } else {
                Some(e.parse().ok()?)
            },
            slot: sl.trim().parse().ok()?,
        })
    }

    /// `/c0/e252/s3` or `/c0/s3` → controller and slot.
    pub fn parse_drive_id(s: &str) -> Option<(u32, Self)> {
        let mut ctl = None;
        let mut enclosure = None;
        let mut slot = None;
        for part in s.trim().split('/').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_at_checked(1)?;
            let v: u32 = v.parse().ok()?;
            match k {
                "c" => ctl = Some(v),
                "e" => enclosure = Some(v),
                "s" => slot = Some(v),
                _ => return None,
            }
        }
        Some((
            ctl?,
            Self {
                enclosure,
                slot: slot?,
            },
        ))
    }
}

impl std::fmt::Display for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.enclosure {
            Some(e) => write!(f, "{e}:{}", self.slot),
            None => write!(f, ":{}", self.slot),
        }
    }
}

/// A virtual drive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualDrive {
    /// Drive group (`DG` of `DG/VD`).
    pub dg: u32,
    /// Virtual drive number (`VD` of `DG/VD`).
    pub vd: u32,
    /// `TYPE`, e.g. `RAID6`, `RAID10`.
    pub raid_level: String,
    /// `State`.
    pub state: VdState,
    /// `Access`: `RW`, `RO`, `B` (blocked), `HD` (hidden).
    pub access: Option<String>,
    /// `Cache`: the policy in effect now.
    pub cache: Option<CachePolicy>,
    /// `Write Cache(initial setting)` of `VDn Properties`: the policy configured.
    pub write_cache_configured: Option<WritePolicy>,
    /// `Size` as printed.
    pub size: Option<String>,
    /// `Size` in bytes (approximate: storcli rounds).
    pub size_bytes: Option<u64>,
    /// `Name`.
    pub name: Option<String>,
    /// `OS Drive Name` of `VDn Properties`, e.g. `/dev/sda`.
    pub os_drive_name: Option<String>,
    /// `SCSI NAA Id` of `VDn Properties` (the disk's WWN as the OS sees it).
    pub naa_id: Option<String>,
    /// `Active Operations` of `VDn Properties`, `None` when it says `None`.
    pub active_operations: Option<String>,
    /// Members (`PDs for VD n`), in slot order.
    pub members: Vec<Slot>,
}

impl VirtualDrive {
    /// A write-back VD now running write-through (battery or CacheVault bad or learning):
    /// every write waits for the disks, a performance incident.
    pub fn write_cache_fell_back(&self) -> bool {
        let now = self.cache.as_ref().and_then(|c| c.write);
        matches!(
            (self.write_cache_configured, now),
            (
                Some(WritePolicy::WriteBack | WritePolicy::AlwaysWriteBack),
                Some(WritePolicy::WriteThrough)
            )
        )
    }
}

/// A physical drive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhysicalDrive {
    /// Enclosure and slot (`EID:Slt`).
    pub slot: Slot,
    /// Device id (`DID`), the N of `smartctl -d megaraid,N`.
    pub did: Option<u32>,
    /// `State`.
    pub state: PdState,
    /// Drive group; `None` for `-` (unconfigured) and `F` (foreign).
    pub dg: Option<u32>,
    /// `DG` is `F`: the drive carries a foreign configuration.
    pub foreign: bool,
    /// `Size` as printed.
    pub size: Option<String>,
    /// `Size` in bytes (approximate).
    pub size_bytes: Option<u64>,
    /// `Intf`: `SAS`, `SATA`, `NVMe`.
    pub interface: Option<String>,
    /// `Med`: `HDD` or `SSD`.
    pub medium: Option<String>,
    /// `Model`, trimmed.
    pub model: Option<String>,
    /// `Sp`: `U` up, `D` down, `T` transition, `-` unknown.
    pub spun: Option<String>,
    /// `Media Error Count` (detailed information).
    pub media_errors: Option<u64>,
    /// `Other Error Count`.
    pub other_errors: Option<u64>,
    /// `Predictive Failure Count`.
    pub predictive_failures: Option<u64>,
    /// `S.M.A.R.T alert flagged by drive`.
    pub smart_alert: Option<bool>,
    /// `SN`, trimmed.
    pub serial: Option<String>,
    /// `WWN`.
    pub wwn: Option<String>,
    /// `Firmware Revision`, trimmed.
    pub firmware: Option<String>,
    /// `Drive Temperature`, °C.
    pub temperature_c: Option<i64>,
}

/// One drive row of the `TOPOLOGY` table (`/cx show [all]`): the span (`Arr`) of its drive
/// group a drive is in — the RAID1 pair of a RAID10, the RAID5/6 set of a RAID50/60.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyDrive {
    /// `DG`.
    pub dg: u32,
    /// `Arr`: the span.
    pub arr: u32,
    /// `Row`: the position in the span.
    pub row: Option<u32>,
    /// `EID:Slot`; `None` for a member that is gone (`-`).
    pub slot: Option<Slot>,
    /// `State` as printed (`Onln`, `Rbld`, `Msng`, …).
    pub state: String,
}

/// One row of `show rebuild`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rebuild {
    /// The drive being rebuilt.
    pub slot: Slot,
    /// `Progress%`; `None` when not in progress (`-`).
    pub progress_pct: Option<u8>,
    /// `Status` is `In progress`.
    pub in_progress: bool,
    /// `Status` is neither `In progress` nor `Not in progress`: `Paused` after `storcli
    /// /cx/ex/sx pause rebuild` or when the controller holds the rebuild itself (any other word
    /// storcli prints there counts the same: the rebuild is not running).
    pub halted: bool,
    /// `Status` as printed.
    pub status: String,
    /// `Estimated Time Left` in seconds; `None` for `-`.
    pub time_left_s: Option<u64>,
}

/// Battery backup unit or CacheVault (supercapacitor + flash) protecting the write cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Battery {
    /// BBU or CacheVault.
    pub kind: BatteryKind,
    /// `Model` / `Type`, e.g. `iBBU08`, `CVPM02`.
    pub model: Option<String>,
    /// `State` / `Battery State`.
    pub state: BatteryState,
    /// `Temp` / `Temperature`, °C.
    pub temperature_c: Option<i64>,
}

/// Which kind of cache protection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatteryKind {
    /// `BBU_Info`.
    Bbu,
    /// `Cachevault_Info`.
    CacheVault,
}

/// `State` of a BBU or CacheVault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatteryState {
    /// `Optimal`.
    Optimal,
    /// A learn cycle (the cache runs write-through meanwhile unless AWB).
    Learning,
    /// `Degraded`, `Dgd`, `Needs Attention`, `Replace`.
    Degraded,
    /// `Failed`.
    Failed,
    /// `Missing`, `Absent`.
    Missing,
    /// Anything else, as printed.
    Other(String),
}

impl BatteryState {
    fn parse(s: &str) -> Self {
        let l = s.trim().to_ascii_lowercase();
        if l.starts_with("optimal") || l == "ok" {
            Self::Optimal
        } else if l.contains("learn") {
            Self::Learning
        } else if l.starts_with("fail") {
            Self::Failed
        } else if l.starts_with("missing") || l.starts_with("absent") {
            Self::Missing
        } else if l.starts_with("dgd")
            || l.starts_with("degraded")
            || l.contains("attention")
            || l.contains("replace")
        {
            Self::Degraded
        } else {
            Self::Other(s.trim().to_owned())
        }
    }
}

/// `Command Status` of one controller's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandStatus {
    /// `Status` is `Success`.
    pub ok: bool,
    /// `Description`.
    pub description: Option<String>,
    /// `ErrMsg` of each `Detailed Status` row.
    pub errors: Vec<String>,
}

impl CommandStatus {
    /// storcli's and perccli's answer on a machine without a controller they drive:
    /// `Description` `No Controller found.` (storcli) or `No Controller found` (perccli),
    /// whatever `Status` says (storcli2 says `Success`).
    pub fn no_controller(&self) -> bool {
        self.description.as_deref().is_some_and(|d| {
            d.trim_end_matches('.')
                .trim()
                .eq_ignore_ascii_case("No Controller found")
        })
    }

    /// `Description` and the `ErrMsg`s as one line (`Failure` when storcli gave neither).
    pub fn message(&self) -> String {
        let mut msg = self.description.clone().unwrap_or_else(|| "Failure".into());
        if !self.errors.is_empty() {
            msg = format!("{msg}: {}", self.errors.join("; "));
        }
        msg
    }
}

/// One row of `System Overview` (`storcli show J`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerSummary {
    /// `Ctl`.
    pub controller: u32,
    /// `Model`.
    pub model: Option<String>,
    /// `Hlth`: `Opt`, `NdAtn` (needs attention), …
    pub health: Option<String>,
    /// `VDs`.
    pub vds: Option<u64>,
    /// `VNOpt`: virtual drives not optimal.
    pub vds_not_optimal: Option<u64>,
    /// `DNOpt`: drive groups not optimal.
    pub dgs_not_optimal: Option<u64>,
    /// `BBU`: `Opt`, `Msng`, `N/A`, …
    pub bbu: Option<String>,
}

/// One controller's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Controller {
    /// `Command Status.Controller`; `None` for commands without one (`show`).
    pub controller: Option<u32>,
    /// Whether the command succeeded, and why not.
    pub status: CommandStatus,
    /// `CLI Version`.
    pub cli_version: Option<String>,
    /// `Product Name` or `Basics.Model`.
    pub model: Option<String>,
    /// `Serial Number`.
    pub serial: Option<String>,
    /// `Status.Controller Status`, e.g. `Optimal`.
    pub controller_status: Option<String>,
    /// `HwCfg.ROC temperature(Degree Celsius)` (some versions spell it `Celcius`), °C; absent
    /// when the controller has no ROC sensor (`Temperature Sensor for ROC = Absent`).
    pub roc_temperature_c: Option<i64>,
    /// Virtual drives, by drive group and number.
    pub virtual_drives: Vec<VirtualDrive>,
    /// Physical drives, by enclosure and slot.
    pub physical_drives: Vec<PhysicalDrive>,
    /// `show rebuild` rows.
    pub rebuilds: Vec<Rebuild>,
    /// BBUs and CacheVaults.
    pub batteries: Vec<Battery>,
    /// The `TOPOLOGY` table's drive rows: which span each drive is in.
    pub topology: Vec<TopologyDrive>,
    /// `System Overview` rows (`storcli show`).
    pub overview: Vec<ControllerSummary>,
    /// What the answer held that could not be read, one line each (a `VD LIST` row whose
    /// `DG/VD` is neither `"0/1"` nor a number): reported, never dropped in silence.
    pub unreadable: Vec<String>,
}

impl Controller {
    /// The physical drive in `slot`.
    pub fn drive(&self, slot: Slot) -> Option<&PhysicalDrive> {
        self.physical_drives.iter().find(|d| d.slot == slot)
    }

    /// The virtual drive `dg/vd`.
    pub fn virtual_drive(&self, dg: u32, vd: u32) -> Option<&VirtualDrive> {
        self.virtual_drives
            .iter()
            .find(|v| v.dg == dg && v.vd == vd)
    }
}

#[cfg(test)]
mod tests;
