//! `smartctl --json` (smartmontools ≥ 7.0): one drive's identity and health.
//!
//! Input is the JSON document `smartctl -j -a|-x [-n standby] DEVICE` prints (also
//! `smartctl -j -H -A -i`, any subset). The fields read, by protocol:
//!
//! * every drive: `smartctl.{version, exit_status, messages[]}`, `device.{name, type,
//!   protocol}`, `model_name` (`scsi_model_name`, or `vendor` + `product`), `serial_number`,
//!   `wwn.{naa, oui, id}`, `firmware_version` (`scsi_revision`, `revision`),
//!   `user_capacity.bytes` (NVMe: `nvme_total_capacity`), `rotation_rate` (0 = solid state),
//!   `smart_status.passed`, `temperature.current` (°C), `power_on_time.hours`,
//!   `power_mode.{ata_value, name}`.
//! * ATA: `ata_smart_attributes.table[]` raw values of 5 (reallocated sectors), 187 (reported
//!   uncorrectable), 188 (command timeouts), 197 (pending sectors), 198 (offline
//!   uncorrectable), 199 (UDMA CRC errors), and which attributes are failing now
//!   (`when_failed == "now"`).
//! * SCSI/SAS: `scsi_grown_defect_list` (absent when the drive keeps its defect list in a
//!   vendor format: absent stays `None`, never 0) and `scsi_error_counter_log.{read, write,
//!   verify}.total_uncorrected_errors`. The non-medium error count is printed by smartctl as
//!   text only (`pout`, not `jout`, in `scsiprint.cpp`), so [`parse_scsi_text`] reads it from
//!   `smartctl -a|-x` text output.
//! * NVMe: `nvme_smart_health_information_log.{critical_warning, available_spare,
//!   available_spare_threshold, percentage_used, media_errors, unsafe_shutdowns}` (and its
//!   `power_on_hours`/`temperature` where the top-level fields are absent).
//!
//! **Exit status.** smartctl's exit status is a bit mask (smartctl(8), EXIT STATUS): see
//! [`ExitBits`]. With `-n standby` a drive in STANDBY or SLEEP is not touched: smartctl
//! prints `Device is in STANDBY mode, exit(2)` (JSON: `smartctl.messages[]` with severity
//! `information`, and for ATA `power_mode.{ata_value, name}`, `ataprint.cpp`), and exits
//! with 2 — bit 1, the same bit as "device open failed" — unless `-n standby,STATUS` chose
//! another status. So the standby case is recognised from the message or `power_mode`,
//! never from the status alone: [`DriveHealth::low_power_mode`] is `Some`, and
//! [`DriveHealth::outcome`] says the drive was not read without it being an error.
//!
//! **smartd's cached state.** `smartd -j PREFIX` / `--jsonstate=PREFIX` writes one JSON file
//! per drive (`PREFIX MODEL-SERIAL.ata.json`, `.scsi.json`, `.nvme.json`) with smartctl's
//! field names; it is new in smartmontools' development tree after 7.5 (commit
//! 0d1737f08, 2026-04-28; in no release: 7.5, 2025-04-30, is the latest; `doc/CHANGELOG.md`). Those files are read by this same parser: they carry `device`,
//! `smart_status`, `temperature`, the ATA attribute table, the SCSI error counter log (with
//! the non-medium error count, `scsi_error_counter_log.non_medium_error.count`, which
//! smartctl's JSON lacks) and the NVMe log, but no `smartctl` section, no exit status and no
//! `model_name`/`serial_number`: the identity comes from smartd's `device_info` line
//! (`write_dev_state_json` in `smartd.cpp`). Released smartd versions
//! keep only `-s PREFIX` state files (`smartd.MODEL-SERIAL.ata.state`, its own key = value
//! text) and `-A PREFIX` attribute logs (`attrlog.MODEL-SERIAL.ata.csv`), neither of which is
//! smartctl JSON.
//!
//! `parse` never panics; malformed or truncated JSON is a [`ParseError`] naming the line
//! and what was wrong.

use super::ParseError;

mod fields;
pub mod output;
pub mod scan;
mod tree;

pub(crate) use fields::json_error;
use fields::{
    ata_health, device_info, nvme_health, scsi_health, str_at, str_field, u64_at, version, wwn,
};
use tree::Node;

/// Which command set the drive speaks (`device.protocol`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Protocol {
    /// ATA/SATA, also behind SAT bridges and MegaRAID (`-d sat+megaraid,N`).
    Ata,
    /// SCSI/SAS.
    Scsi,
    /// NVMe.
    Nvme,
    /// A protocol this parser does not know, as smartctl named it.
    Other(String),
    /// No `device.protocol` in the document (open failed, or a subset without `-i`).
    Unknown,
}

/// `smart_status.passed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverallHealth {
    /// The drive's own verdict: PASSED.
    Passed,
    /// The drive reports itself failing (smartctl prints "FAILED!").
    Failed,
    /// Not reported (no `-H`, drive asleep, open failed).
    Unknown,
}

/// One entry of `smartctl.messages[]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// `information`, `warning` or `error`.
    pub severity: String,
    /// The text smartctl printed.
    pub text: String,
}

/// The ATA attributes that predict failure, as raw values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AtaHealth {
    /// 5 Reallocated_Sector_Ct.
    pub reallocated_sectors: Option<u64>,
    /// 187 Reported_Uncorrect.
    pub reported_uncorrectable: Option<u64>,
    /// 188 Command_Timeout, whole raw value.
    pub command_timeout_raw: Option<u64>,
    /// 188 decoded as three 16-bit counters, see [`raw16_words`].
    pub command_timeout_words: Option<[u16; 3]>,
    /// 197 Current_Pending_Sector.
    pub pending_sectors: Option<u64>,
    /// 198 Offline_Uncorrectable.
    pub offline_uncorrectable: Option<u64>,
    /// 199 UDMA_CRC_Error_Count (cabling, not media).
    pub udma_crc_errors: Option<u64>,
    /// Ids of attributes whose normalised value is at or below threshold now.
    pub failing_now: Vec<u8>,
}

/// SCSI/SAS error counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScsiHealth {
    /// Elements in the grown defect list; `None` when the drive did not report it.
    pub grown_defects: Option<u64>,
    /// Total uncorrected read errors (error counter log).
    pub read_uncorrected: Option<u64>,
    /// Total uncorrected write errors.
    pub write_uncorrected: Option<u64>,
    /// Total uncorrected verify errors.
    pub verify_uncorrected: Option<u64>,
    /// Non-medium error count: only smartd's JSON state carries it
    /// (`scsi_error_counter_log.non_medium_error.count`); smartctl prints it as text, see
    /// [`parse_scsi_text`].
    pub non_medium_errors: Option<u64>,
}

/// NVMe SMART / Health Information log (log page 02h).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvmeHealth {
    /// Critical Warning byte; see [`NvmeHealth::warnings`].
    pub critical_warning: Option<u8>,
    /// Available spare, percent of the factory spare.
    pub available_spare_pct: Option<u8>,
    /// Threshold below which the drive raises critical warning bit 0, percent.
    pub available_spare_threshold_pct: Option<u8>,
    /// Vendor estimate of life used, percent; may exceed 100.
    pub percentage_used: Option<u16>,
    /// Unrecovered data integrity errors.
    pub media_errors: Option<u64>,
    /// Power losses without a shutdown notification.
    pub unsafe_shutdowns: Option<u64>,
}

/// The bits of the NVMe Critical Warning byte (NVMe base specification, SMART / Health
/// Information log, byte 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CriticalWarning {
    /// Bit 0: available spare below its threshold.
    pub spare_below_threshold: bool,
    /// Bit 1: temperature above or below a threshold.
    pub temperature: bool,
    /// Bit 2: NVM subsystem reliability degraded by media or internal errors.
    pub reliability_degraded: bool,
    /// Bit 3: media placed in read-only mode.
    pub read_only: bool,
    /// Bit 4: volatile memory backup device failed.
    pub volatile_backup_failed: bool,
    /// Bit 5: persistent memory region read-only or unreliable.
    pub persistent_memory_unreliable: bool,
}

impl NvmeHealth {
    /// The critical warning byte split into its bits (`None` when the byte is absent).
    pub fn warnings(&self) -> Option<CriticalWarning> {
        let w = self.critical_warning?;
        Some(CriticalWarning {
            spare_below_threshold: w & 0x01 != 0,
            temperature: w & 0x02 != 0,
            reliability_degraded: w & 0x04 != 0,
            read_only: w & 0x08 != 0,
            volatile_backup_failed: w & 0x10 != 0,
            persistent_memory_unreliable: w & 0x20 != 0,
        })
    }

    /// Available spare at or below its threshold (the condition of warning bit 0).
    pub fn spare_at_or_below_threshold(&self) -> Option<bool> {
        Some(self.available_spare_pct? <= self.available_spare_threshold_pct?)
    }
}

/// One drive as `smartctl --json` reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriveHealth {
    /// smartctl's version, e.g. `7.3`.
    pub smartctl_version: Option<String>,
    /// `smartctl.exit_status` as printed inside the JSON.
    pub exit_status: Option<u8>,
    /// `smartctl.messages[]`.
    pub messages: Vec<Message>,
    /// `device.name`, e.g. `/dev/sda`.
    pub device: Option<String>,
    /// `device.type`, e.g. `sat`, `scsi`, `nvme`, `sat+megaraid,0`.
    pub device_type: Option<String>,
    /// `device.protocol`.
    pub protocol: Protocol,
    /// Model name (SCSI: vendor and product).
    pub model: Option<String>,
    /// Serial number.
    pub serial: Option<String>,
    /// World wide name as 16 hex digits (NAA, OUI, id), the form of `/dev/disk/by-id/wwn-0x…`.
    pub wwn: Option<String>,
    /// Firmware revision.
    pub firmware: Option<String>,
    /// Capacity in bytes.
    pub capacity_bytes: Option<u64>,
    /// Rotation rate in rpm; `Some(0)` for solid state.
    pub rotation_rate_rpm: Option<u32>,
    /// `smart_status.passed`.
    pub health: OverallHealth,
    /// Current temperature, °C.
    pub temperature_c: Option<i64>,
    /// Power-on hours.
    pub power_on_hours: Option<u64>,
    /// Low-power mode that kept smartctl from reading the drive (`-n standby`), e.g.
    /// `STANDBY`; `None` when the drive was read.
    pub low_power_mode: Option<String>,
    /// ATA attributes, for ATA drives with an attribute table.
    pub ata: Option<AtaHealth>,
    /// SCSI counters, for SCSI drives that reported any.
    pub scsi: Option<ScsiHealth>,
    /// NVMe health log, for NVMe drives.
    pub nvme: Option<NvmeHealth>,
}

/// What a smartctl run amounts to, for a collector deciding what to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The drive was read (its health may still be bad: see the fields).
    Read,
    /// `-n standby` left the drive asleep in this mode: not read, and not an error.
    LowPower(String),
    /// Nothing was read: the command line was refused (exit bit 0) or the device could not
    /// be opened or identified (bit 1 without a low-power message). The messages say why.
    NotRead,
}

/// smartctl's exit status split into its bits (smartctl(8), EXIT STATUS).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExitBits {
    /// The status itself.
    pub code: u8,
    /// Bit 0: command line did not parse.
    pub command_line: bool,
    /// Bit 1: device open failed, no IDENTIFY DEVICE, or device in a low-power mode (`-n`).
    pub open_failed_or_low_power: bool,
    /// Bit 2: a SMART or other command failed, or a checksum error in a SMART structure.
    pub command_failed: bool,
    /// Bit 3: SMART status check returned "DISK FAILING".
    pub disk_failing: bool,
    /// Bit 4: prefail attributes at or below threshold.
    pub prefail_at_threshold: bool,
    /// Bit 5: status OK, but usage or prefail attributes were at or below threshold in the
    /// past.
    pub past_threshold: bool,
    /// Bit 6: the device error log contains records of errors.
    pub error_log: bool,
    /// Bit 7: the self-test log contains records of errors.
    pub self_test_log: bool,
}

impl DriveHealth {
    /// Read, asleep, or not read, from the low-power message and the exit status inside the
    /// JSON. A caller that has the process's own exit status should prefer it when the JSON
    /// has none (smartctl killed before printing `exit_status`).
    pub fn outcome(&self) -> Outcome {
        if let Some(mode) = &self.low_power_mode {
            return Outcome::LowPower(mode.clone());
        }
        let bits = exit_status(i32::from(self.exit_status.unwrap_or(0)));
        if bits.command_line || bits.open_failed_or_low_power {
            Outcome::NotRead
        } else {
            Outcome::Read
        }
    }
}

/// Splits smartctl's exit status into its eight bits. Statuses outside 0–255 (a shell's
/// 128+signal, or -1 for "killed") keep only their low byte, as `wait(2)` does.
pub fn exit_status(code: i32) -> ExitBits {
    let c = (code & 0xff) as u8;
    ExitBits {
        code: c,
        command_line: c & 0x01 != 0,
        open_failed_or_low_power: c & 0x02 != 0,
        command_failed: c & 0x04 != 0,
        disk_failing: c & 0x08 != 0,
        prefail_at_threshold: c & 0x10 != 0,
        past_threshold: c & 0x20 != 0,
        error_log: c & 0x40 != 0,
        self_test_log: c & 0x80 != 0,
    }
}

/// Splits a 48-bit ATA raw value into three 16-bit words in the order smartctl prints them
/// for `-v ID,raw16`: most significant first (`"%u %u %u", word[2], word[1], word[0]`,
/// `lib/atacmds.cpp`).
///
/// smartmontools' drive database applies `-v 188,raw16` to Seagate models
/// (`drivedb/drivedb.h`), because Seagate packs three counters into attribute 188
/// (Command_Timeout): raw 4295032833 = 0x0001_0001_0001 prints as `1 1 1`. Seagate does not
/// document the words; they are commonly read as command timeouts in total (word 0), over
/// 5 s (word 1) and over 7.5 s (word 2). Anything non-zero in any of them is a timeout.
pub fn raw16_words(raw: u64) -> [u16; 3] {
    let w = |i: u32| ((raw >> (16 * i)) & 0xffff) as u16;
    [w(2), w(1), w(0)]
}

/// Parses one `smartctl --json` document (or smartd's JSON state, which lacks smartctl's own
/// fields); what a smartctl call printed is checked further by [`output::parse`].
pub fn parse(json: &str) -> Result<DriveHealth, ParseError> {
    from_object(&object(json)?, json)
}

/// The JSON object of a document: its members the parser reads ([`tree`]).
fn object(json: &str) -> Result<Node<'_>, ParseError> {
    if json.trim().is_empty() {
        return Err(ParseError::new(1, "", "empty output: no smartctl JSON"));
    }
    let doc = tree::parse(json, &tree::DOC).map_err(|e| json_error(json, &e))?;
    if doc.is_object() {
        Ok(doc)
    } else {
        Err(ParseError::new(
            1,
            json.lines().next().unwrap_or_default(),
            "smartctl JSON must be an object",
        ))
    }
}

/// The drive a document's object describes (`json`: the document, for errors).
fn from_object(root: &Node<'_>, json: &str) -> Result<DriveHealth, ParseError> {
    if !root.contains_key("smartctl") && !root.contains_key("device") {
        return Err(ParseError::new(
            1,
            json.lines().next().unwrap_or_default(),
            "not smartctl JSON: neither \"smartctl\" nor \"device\" present",
        ));
    }

    let sc = root.get("smartctl").filter(|s| s.is_object());
    let smartctl_version = sc.and_then(|s| s.get("version")).and_then(version);
    let exit_status = sc
        .and_then(|s| s.get("exit_status"))
        .and_then(Node::as_u64)
        .and_then(|v| u8::try_from(v).ok());
    let messages: Vec<Message> = sc
        .and_then(|s| s.get("messages"))
        .and_then(Node::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|m| {
                    Some(Message {
                        severity: str_at(m, &["severity"]).unwrap_or_default(),
                        text: str_at(m, &["string"])?,
                    })
                })
                .collect()
        })
        .unwrap_or_default();

    let dev = root.get("device");
    let protocol = match dev.and_then(|d| d.get("protocol")).and_then(Node::as_str) {
        // smartd's JSON state says "ATA+SCSI" for ATA drives behind a SAT layer
        Some("ATA" | "ATA+SCSI") => Protocol::Ata,
        Some("SCSI") => Protocol::Scsi,
        Some("NVMe") => Protocol::Nvme,
        Some(other) => Protocol::Other(other.to_owned()),
        None => Protocol::Unknown,
    };

    // smartd's JSON state names the drive only in `device_info`
    let info = str_field(root, "device_info")
        .map(|i| device_info(&i))
        .unwrap_or_default();
    let model = str_field(root, "model_name")
        .or_else(|| str_field(root, "scsi_model_name"))
        .or_else(|| {
            let v = str_field(root, "vendor")?;
            let p = str_field(root, "product")?;
            Some(format!("{v} {p}"))
        })
        .or(info.model);

    let health = match root
        .get("smart_status")
        .and_then(|s| s.get("passed"))
        .and_then(Node::as_bool)
    {
        Some(true) => OverallHealth::Passed,
        Some(false) => OverallHealth::Failed,
        None => OverallHealth::Unknown,
    };

    let low_power_mode = low_power_mode(root, &messages, exit_status);

    let ata = root
        .get("ata_smart_attributes")
        .and_then(|a| a.get("table"))
        .and_then(Node::as_array)
        .map(ata_health);

    let scsi = scsi_health(root);
    let nvme = root
        .get("nvme_smart_health_information_log")
        .filter(|n| n.is_object())
        .map(nvme_health);

    Ok(DriveHealth {
        smartctl_version,
        exit_status,
        messages,
        device: dev.and_then(|d| str_at(d, &["name"])),
        device_type: dev.and_then(|d| str_at(d, &["type"])),
        protocol,
        model,
        serial: str_field(root, "serial_number").or(info.serial),
        wwn: wwn(root.get("wwn")).or(info.wwn),
        firmware: str_field(root, "firmware_version")
            .or_else(|| str_field(root, "scsi_revision"))
            .or_else(|| str_field(root, "revision"))
            .or(info.firmware),
        capacity_bytes: u64_at(root.get("user_capacity"), &["bytes"])
            .or_else(|| root.get("nvme_total_capacity").and_then(Node::as_u64)),
        rotation_rate_rpm: root
            .get("rotation_rate")
            .and_then(Node::as_u64)
            .and_then(|v| u32::try_from(v).ok()),
        health,
        temperature_c: root
            .get("temperature")
            .and_then(|t| t.get("current"))
            .and_then(Node::as_i64)
            .or_else(|| {
                root.get("nvme_smart_health_information_log")
                    .and_then(|n| n.get("temperature"))
                    .and_then(Node::as_i64)
            }),
        power_on_hours: u64_at(root.get("power_on_time"), &["hours"]).or_else(|| {
            u64_at(
                root.get("nvme_smart_health_information_log"),
                &["power_on_hours"],
            )
        }),
        low_power_mode,
        ata,
        scsi,
        nvme,
    })
}

/// What `smartctl -a|-x` text output of a SCSI/SAS drive says that its JSON does not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScsiText {
    /// `Non-medium error count:` (errors not caused by the medium: bus, firmware, …).
    pub non_medium_errors: Option<u64>,
    /// `Elements in grown defect list:`.
    pub grown_defects: Option<u64>,
    /// Last column of the `read:` row of the error counter log (total uncorrected).
    pub read_uncorrected: Option<u64>,
    /// Same for `write:`.
    pub write_uncorrected: Option<u64>,
    /// Same for `verify:`.
    pub verify_uncorrected: Option<u64>,
    /// `Device is in STANDBY mode, exit(2)`: the mode named.
    pub low_power_mode: Option<String>,
}

/// Reads the SCSI/SAS lines of `smartctl -a|-x` text output. Lines it does not know are
/// skipped; a known line whose number does not parse is an error naming it.
pub fn parse_scsi_text(text: &str) -> Result<ScsiText, ParseError> {
    let mut out = ScsiText::default();
    for (no, line) in super::Lines::new(text) {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("Non-medium error count:") {
            out.non_medium_errors = Some(number(no, line, rest.trim())?);
        } else if let Some(rest) = t.strip_prefix("Elements in grown defect list:") {
            out.grown_defects = Some(number(no, line, rest.trim())?);
        } else if let Some(mode) = low_power_message(t) {
            out.low_power_mode = Some(mode);
        } else {
            for (prefix, slot) in [
                ("read:", &mut out.read_uncorrected),
                ("write:", &mut out.write_uncorrected),
                ("verify:", &mut out.verify_uncorrected),
            ] {
                if let Some(rest) = t.strip_prefix(prefix) {
                    // seven columns: ECC fast, delayed, rereads, total corrected,
                    // algorithm invocations, gigabytes processed, total uncorrected
                    let cols: Vec<&str> = super::fields(rest).collect();
                    if cols.len() != 7 {
                        return Err(ParseError::new(
                            no,
                            line,
                            format_args!("{prefix} row has {} columns, expected 7", cols.len()),
                        ));
                    }
                    *slot = Some(number(no, line, cols[6])?);
                }
            }
        }
    }
    Ok(out)
}

fn number(no: usize, line: &str, s: &str) -> Result<u64, ParseError> {
    super::parse_u64(s)
        .ok_or_else(|| ParseError::new(no, line, format_args!("{s:?} is not a count")))
}

/// `Device is in STANDBY mode, exit(2)` → `STANDBY`; also `STANDBY (OS)`, `SLEEP`, `IDLE_B`,
/// `STANDBY BY COMMAND` (`ataprint.cpp`, `scsiprint.cpp`, `smartctl.cpp`).
fn low_power_message(text: &str) -> Option<String> {
    let rest = text.trim().strip_prefix("Device is in ")?;
    let (mode, tail) = rest.rsplit_once(" mode, exit(")?;
    tail.strip_suffix(')')?.parse::<u16>().ok()?;
    Some(mode.to_owned())
}

fn low_power_mode(root: &Node<'_>, messages: &[Message], exit: Option<u8>) -> Option<String> {
    if let Some(m) = messages.iter().find_map(|m| low_power_message(&m.text)) {
        return Some(m);
    }
    // power_mode alone is printed for every drive smartctl checked with -n; only when it
    // also stopped (no identity read) did the mode keep the drive from being read.
    let name = root
        .get("power_mode")
        .and_then(|p| p.get("name"))
        .and_then(Node::as_str)?;
    let stopped = !root.contains_key("model_name")
        && !root.contains_key("serial_number")
        && exit.is_some_and(|e| e & 0x02 != 0);
    stopped.then(|| name.to_owned())
}

#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;
