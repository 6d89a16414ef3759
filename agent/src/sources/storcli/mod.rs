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

use serde_json::{Map, Value};

use super::ParseError;

mod text;
mod value;
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

/// Parses storcli JSON output into one [`Controller`] per answering controller.
pub fn parse(json: &str) -> Result<Vec<Controller>, ParseError> {
    if json.trim().is_empty() {
        return Err(ParseError::new(1, "", "empty output: no storcli JSON"));
    }
    let doc: Value =
        serde_json::from_str(json).map_err(|e| super::smartctl::json_error(json, &e))?;
    let first = json.lines().next().unwrap_or_default();
    let ctls = doc
        .get("Controllers")
        .ok_or_else(|| ParseError::new(1, first, "not storcli JSON: no \"Controllers\""))?
        .as_array()
        .ok_or_else(|| ParseError::new(1, first, "\"Controllers\" is not a list"))?;
    Ok(ctls.iter().map(controller).collect())
}

fn controller(c: &Value) -> Controller {
    let st = c.get("Command Status");
    let mut out = Controller {
        controller: st.and_then(|s| s.get("Controller")).and_then(as_u32),
        status: CommandStatus {
            ok: st.and_then(|s| s.get("Status")).and_then(word).as_deref() == Some("Success"),
            // storcli writes "None" when it has nothing to say
            description: st
                .and_then(|s| s.get("Description"))
                .and_then(text)
                .filter(|d| d != "None"),
            errors: st
                .and_then(|s| s.get("Detailed Status"))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|d| d.get("ErrMsg").and_then(text))
                        .collect()
                })
                .unwrap_or_default(),
        },
        cli_version: st.and_then(|s| s.get("CLI Version")).and_then(text),
        ..Controller::default()
    };
    match c.get("Response Data") {
        Some(Value::Object(rd)) => response_data(rd, &mut out),
        Some(Value::Array(rows)) => {
            out.rebuilds = rows.iter().filter_map(rebuild).collect();
        }
        _ => {}
    }
    // `PDs for VD n` or `VDn Properties` without the VD's own row: no DG, state or level
    // to report, so no virtual drive (storcli prints the three together)
    out.virtual_drives.retain(|v| v.dg != NO_DG);
    out.virtual_drives.sort_by_key(|v| (v.dg, v.vd));
    out.physical_drives.sort_by_key(|d| d.slot);
    out.rebuilds.sort_by_key(|r| r.slot);
    out
}

/// The drive group of a VD seen only through `PDs for VD n` / `VDn Properties` so far.
const NO_DG: u32 = u32::MAX;

fn response_data(rd: &Map<String, Value>, out: &mut Controller) {
    for (key, v) in rd {
        match key.as_str() {
            "Product Name" => out.model = text(v),
            "Serial Number" => out.serial = text(v),
            "Basics" => {
                out.model = out.model.take().or_else(|| v.get("Model").and_then(text));
                out.serial = out
                    .serial
                    .take()
                    .or_else(|| v.get("Serial Number").and_then(text));
            }
            "Status" => out.controller_status = v.get("Controller Status").and_then(text),
            "HwCfg" => {
                out.roc_temperature_c = [
                    "ROC temperature(Degree Celsius)",
                    "ROC temperature(Degree Celcius)",
                ]
                .iter()
                .find_map(|k| v.get(*k))
                .and_then(|t| {
                    t.as_i64().or_else(|| {
                        let s = t.as_str()?;
                        s.trim().parse().ok().or_else(|| temperature(s))
                    })
                });
            }
            "VD LIST" => rows(v).for_each(|r| upsert_vd(out, key, r)),
            "TOPOLOGY" => out.topology = rows(v).filter_map(topology_drive).collect(),
            "PD LIST" | "Drive Information" => rows(v).for_each(|r| upsert_pd(out, r)),
            "BBU_Info" => battery(v, BatteryKind::Bbu, out),
            "Cachevault_Info" => battery(v, BatteryKind::CacheVault, out),
            "Physical Device Information" => {
                if let Some(m) = v.as_object() {
                    response_data(m, out);
                }
            }
            "System Overview" => out.overview = rows(v).filter_map(summary).collect(),
            k if k.starts_with("PDs for VD ") => {
                let n = k
                    .trim_start_matches("PDs for VD ")
                    .trim()
                    .parse::<u32>()
                    .ok();
                let slots: Vec<Slot> = rows(v)
                    .filter_map(|r| {
                        upsert_pd(out, r);
                        r.get("EID:Slt")
                            .and_then(word)
                            .as_deref()
                            .and_then(Slot::parse_eid_slt)
                    })
                    .collect();
                if let Some(n) = n {
                    vd_by_number(out, n).members = slots;
                }
            }
            k if k.starts_with("VD") && k.ends_with(" Properties") => {
                let n = k
                    .trim_start_matches("VD")
                    .trim_end_matches(" Properties")
                    .parse::<u32>()
                    .ok();
                if let (Some(n), Some(p)) = (n, v.as_object()) {
                    let vd = vd_by_number(out, n);
                    vd.os_drive_name = p.get("OS Drive Name").and_then(text);
                    vd.naa_id = p.get("SCSI NAA Id").and_then(text);
                    vd.write_cache_configured = p
                        .get("Write Cache(initial setting)")
                        .and_then(word)
                        .as_deref()
                        .and_then(WritePolicy::from_setting);
                    vd.active_operations = p
                        .get("Active Operations")
                        .and_then(text)
                        .filter(|s| s != "None");
                }
            }
            k if k.starts_with("Drive /") && k.ends_with(" - Detailed Information") => {
                let id = k
                    .trim_start_matches("Drive ")
                    .trim_end_matches(" - Detailed Information");
                if let (Some((_, slot)), Some(d)) = (Slot::parse_drive_id(id), v.as_object()) {
                    detail(out, slot, id, d);
                }
            }
            k if k.starts_with("Drive /") => rows(v).for_each(|r| upsert_pd(out, r)),
            k if k.starts_with('/') && k.contains("/v") => {
                rows(v).for_each(|r| upsert_vd(out, key, r));
            }
            _ => {}
        }
    }
}

fn rows(v: &Value) -> impl Iterator<Item = &Map<String, Value>> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

fn vd_by_number(out: &mut Controller, n: u32) -> &mut VirtualDrive {
    let i = match out.virtual_drives.iter().position(|v| v.vd == n) {
        Some(i) => i,
        None => {
            out.virtual_drives.push(empty_vd(NO_DG, n));
            out.virtual_drives.len() - 1
        }
    };
    &mut out.virtual_drives[i]
}

fn empty_vd(dg: u32, vd: u32) -> VirtualDrive {
    VirtualDrive {
        dg,
        vd,
        raid_level: String::new(),
        state: VdState::Other(String::new()),
        access: None,
        cache: None,
        write_cache_configured: None,
        size: None,
        size_bytes: None,
        name: None,
        os_drive_name: None,
        naa_id: None,
        active_operations: None,
        members: Vec::new(),
    }
}

fn upsert_vd(out: &mut Controller, table: &str, r: &Map<String, Value>) {
    let (dg, vd) = match dg_vd(r.get("DG/VD")) {
        Ok(v) => v,
        Err(why) => {
            // Never dropped in silence: a VD whose number cannot be read is a VD the
            // operator would not see.
            out.unreadable.push(format!(
                "{table}: a virtual drive row not understood ({why}): {}",
                Value::Object(r.clone())
            ));
            return;
        }
    };
    let size = r.get("Size").and_then(text);
    let v = vd_by_number(out, vd);
    v.dg = dg;
    v.raid_level = r.get("TYPE").and_then(text).unwrap_or_default();
    v.state = VdState::from_abbrev(&r.get("State").and_then(word).unwrap_or_default());
    v.access = r.get("Access").and_then(text);
    v.cache = r
        .get("Cache")
        .and_then(word)
        .as_deref()
        .map(CachePolicy::parse);
    v.size_bytes = size.as_deref().and_then(parse_size);
    v.size = size;
    v.name = r.get("Name").and_then(text);
}

fn pd_by_slot(out: &mut Controller, slot: Slot) -> &mut PhysicalDrive {
    let i = match out.physical_drives.iter().position(|d| d.slot == slot) {
        Some(i) => i,
        None => {
            out.physical_drives.push(PhysicalDrive {
                slot,
                did: None,
                state: PdState::Other(String::new()),
                dg: None,
                foreign: false,
                size: None,
                size_bytes: None,
                interface: None,
                medium: None,
                model: None,
                spun: None,
                media_errors: None,
                other_errors: None,
                predictive_failures: None,
                smart_alert: None,
                serial: None,
                wwn: None,
                firmware: None,
                temperature_c: None,
            });
            out.physical_drives.len() - 1
        }
    };
    &mut out.physical_drives[i]
}

fn upsert_pd(out: &mut Controller, r: &Map<String, Value>) {
    let Some(slot) = r
        .get("EID:Slt")
        .and_then(word)
        .as_deref()
        .and_then(Slot::parse_eid_slt)
    else {
        return;
    };
    let size = r.get("Size").and_then(text);
    let d = pd_by_slot(out, slot);
    d.did = r.get("DID").and_then(as_u32);
    d.state = PdState::from_abbrev(&r.get("State").and_then(word).unwrap_or_default());
    d.dg = r.get("DG").and_then(as_u32);
    d.foreign = r.get("DG").and_then(word).as_deref() == Some("F");
    d.size_bytes = size.as_deref().and_then(parse_size);
    d.size = size;
    d.interface = r.get("Intf").and_then(text);
    d.medium = r.get("Med").and_then(text);
    d.model = r.get("Model").and_then(text);
    d.spun = r.get("Sp").and_then(text);
}

fn detail(out: &mut Controller, slot: Slot, id: &str, d: &Map<String, Value>) {
    let state = d.get(&format!("Drive {id} State"));
    let attrs = d.get(&format!("Drive {id} Device attributes"));
    let pd = pd_by_slot(out, slot);
    let count = |k: &str| state.and_then(|s| s.get(k)).and_then(as_u64);
    pd.media_errors = count("Media Error Count");
    pd.other_errors = count("Other Error Count");
    pd.predictive_failures = count("Predictive Failure Count");
    pd.smart_alert = match state
        .and_then(|s| s.get("S.M.A.R.T alert flagged by drive"))
        .and_then(word)
        .as_deref()
    {
        Some("Yes") => Some(true),
        Some("No") => Some(false),
        _ => None,
    };
    pd.temperature_c = state
        .and_then(|s| s.get("Drive Temperature"))
        .and_then(word)
        .as_deref()
        .and_then(temperature);
    let attr = |k: &str| {
        attrs
            .and_then(|a| a.get(k))
            .and_then(text)
            .filter(|s| s != "REDACTED")
    };
    pd.serial = attr("SN");
    pd.wwn = attr("WWN");
    pd.firmware = attr("Firmware Revision");
}

fn battery(v: &Value, kind: BatteryKind, out: &mut Controller) {
    let rows: Vec<&Map<String, Value>> = rows(v).collect();
    if rows.iter().any(|r| r.contains_key("Property")) {
        // `/cx/bbu show all`, `/cx/cv show all`: one battery as Property/Value rows
        let prop = |names: &[&str]| {
            rows.iter().find_map(|r| {
                let p = r.get("Property").and_then(word)?;
                names
                    .contains(&p.as_str())
                    .then(|| r.get("Value").and_then(text))
                    .flatten()
            })
        };
        let state = prop(&["Battery State", "State"]);
        if state.is_none() && prop(&["Type", "Model"]).is_none() {
            return;
        }
        out.batteries.push(Battery {
            kind,
            model: prop(&["Type", "Model"]),
            state: BatteryState::parse(state.as_deref().unwrap_or_default()),
            temperature_c: prop(&["Temperature"]).as_deref().and_then(temperature),
        });
    } else {
        for r in rows {
            out.batteries.push(Battery {
                kind,
                model: r.get("Model").and_then(text),
                state: BatteryState::parse(&r.get("State").and_then(word).unwrap_or_default()),
                temperature_c: r
                    .get("Temp")
                    .and_then(word)
                    .as_deref()
                    .and_then(temperature),
            });
        }
    }
}

fn summary(r: &Map<String, Value>) -> Option<ControllerSummary> {
    Some(ControllerSummary {
        controller: r.get("Ctl").and_then(as_u32)?,
        model: r.get("Model").and_then(text),
        health: r.get("Hlth").and_then(text),
        vds: r.get("VDs").and_then(as_u64),
        vds_not_optimal: r.get("VNOpt").and_then(as_u64),
        dgs_not_optimal: r.get("DNOpt").and_then(as_u64),
        bbu: r.get("BBU").and_then(text),
    })
}

/// A `TOPOLOGY` row of a drive (`Type` `DRIVE`, a numbered `Arr`); `None` for the rows of the
/// group and its spans.
fn topology_drive(r: &Map<String, Value>) -> Option<TopologyDrive> {
    if r.get("Type").and_then(text).as_deref() != Some("DRIVE") {
        return None;
    }
    Some(TopologyDrive {
        dg: r.get("DG").and_then(as_u32)?,
        arr: r.get("Arr").and_then(as_u32)?,
        row: r.get("Row").and_then(as_u32),
        slot: r
            .get("EID:Slot")
            .and_then(word)
            .as_deref()
            .and_then(Slot::parse_eid_slt),
        state: r.get("State").and_then(text).unwrap_or_default(),
    })
}

fn rebuild(r: &Value) -> Option<Rebuild> {
    let (_, slot) = Slot::parse_drive_id(&word(r.get("Drive-ID")?)?)?;
    let status = r.get("Status").and_then(text).unwrap_or_default();
    Some(Rebuild {
        slot,
        progress_pct: r
            .get("Progress%")
            .and_then(as_u64)
            .and_then(|p| u8::try_from(p).ok()),
        in_progress: status.eq_ignore_ascii_case("In progress"),
        halted: !status.is_empty()
            && !status.eq_ignore_ascii_case("In progress")
            && !status.eq_ignore_ascii_case("Not in progress"),
        time_left_s: r
            .get("Estimated Time Left")
            .and_then(word)
            .as_deref()
            .and_then(duration_s),
        status,
    })
}

#[cfg(test)]
mod tests;
