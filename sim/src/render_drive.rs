//! The drive-health and hardware-RAID tools' output, rendered from the simulated state: what
//! `smartctl --json -a` prints for each drive (ATA attributes, SCSI error counters, the NVMe
//! health log), `smartctl -l error` of a SAS disk, `smartctl --scan`, and the `storcli64 … J`
//! documents of a MegaRAID controller (`/call show all`, `/call/vall show all`,
//! `/call/eall/sall show all`, `/call/eall/sall show rebuild`, `/call/bbu show all`).
//!
//! The shapes are those of the real captures in `agent/fixtures/smartctl/` and
//! `agent/fixtures/storcli/` (smartctl 7.3, storcli 007.2807): the same keys, nesting and value
//! types, key order and indentation included (smartctl indents by two spaces, storcli by tabs
//! with `"key" : value`). The unit tests read every document back with the agent's own parsers.
//!
//! The stand-ins in `bin/` only `cat` files of `run/smartctl/` and `run/storcli/`, rewritten
//! each second ([`write_dynamic`]); sysfs carries what ties a virtual drive to its block device:
//! `device/wwid` (`naa.` + the VD's SCSI NAA id) and the SCSI address `host:channel:target:lun`
//! (target = VD number on the `megaraid_sas` host) as the name `device` links to
//! ([`write_static`]).

use std::fmt::Write as _;
use std::io;

use crate::model::{Controller, DriveProtocol, Host, Pd, Smart};
use crate::tree::Tree;

/// A JSON value whose objects keep their key order (as the tools print them).
#[derive(Debug, Clone)]
pub enum J {
    S(String),
    U(u64),
    I(i64),
    /// A number printed as given (`"gigabytes_processed"` is a string; this is for floats).
    F(f64),
    B(bool),
    A(Vec<J>),
    O(Vec<(String, J)>),
}

/// Builds an object from `(key, value)` pairs.
pub fn obj<const N: usize>(kv: [(&str, J); N]) -> J {
    J::O(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// A string value.
pub fn s(v: impl Into<String>) -> J {
    J::S(v.into())
}

/// How a tool lays out its JSON.
#[derive(Clone, Copy)]
pub enum Style {
    /// smartctl: two spaces per level, `"key": value`.
    Smartctl,
    /// storcli: a tab per level, `"key" : value`.
    Storcli,
}

impl J {
    /// The document as the tool prints it, with a final newline.
    pub fn render(&self, style: Style) -> String {
        let mut out = String::new();
        self.write(&mut out, 0, style);
        out.push('\n');
        out
    }

    fn write(&self, out: &mut String, level: usize, style: Style) {
        let pad = |out: &mut String, n: usize| match style {
            Style::Smartctl => out.push_str(&"  ".repeat(n)),
            Style::Storcli => out.push_str(&"\t".repeat(n)),
        };
        match self {
            J::S(v) => out.push_str(&serde_json::Value::from(v.as_str()).to_string()),
            J::U(v) => {
                let _ = write!(out, "{v}");
            }
            J::I(v) => {
                let _ = write!(out, "{v}");
            }
            J::F(v) => out.push_str(&serde_json::Value::from(*v).to_string()),
            J::B(v) => out.push_str(if *v { "true" } else { "false" }),
            J::A(items) => {
                if items.is_empty() {
                    out.push_str("[]");
                    return;
                }
                out.push_str("[\n");
                for (i, it) in items.iter().enumerate() {
                    pad(out, level + 1);
                    it.write(out, level + 1, style);
                    if i + 1 < items.len() {
                        out.push(',');
                    }
                    out.push('\n');
                }
                pad(out, level);
                out.push(']');
            }
            J::O(kv) => {
                if kv.is_empty() {
                    out.push_str("{}");
                    return;
                }
                out.push_str("{\n");
                for (i, (k, v)) in kv.iter().enumerate() {
                    pad(out, level + 1);
                    out.push_str(&serde_json::Value::from(k.as_str()).to_string());
                    out.push_str(match style {
                        Style::Smartctl => ": ",
                        Style::Storcli => " : ",
                    });
                    v.write(out, level + 1, style);
                    if i + 1 < kv.len() {
                        out.push(',');
                    }
                    out.push('\n');
                }
                pad(out, level);
                out.push('}');
            }
        }
    }
}

fn smartctl_header(argv: &[&str], exit: u8, messages: Vec<J>) -> J {
    let mut kv = vec![
        ("version".to_owned(), J::A(vec![J::U(7), J::U(3)])),
        ("svn_revision".to_owned(), s("5338")),
        ("platform_info".to_owned(), s("x86_64-linux-6.1.0-27-amd64")),
        ("build_info".to_owned(), s("(local build)")),
        (
            "argv".to_owned(),
            J::A(argv.iter().map(|a| s(*a)).collect()),
        ),
    ];
    if !messages.is_empty() {
        kv.push(("messages".to_owned(), J::A(messages)));
    }
    kv.push(("exit_status".to_owned(), J::U(u64::from(exit))));
    J::O(kv)
}

fn local_time(epoch_s: u64) -> J {
    obj([("time_t", J::U(epoch_s)), ("asctime", s(asctime(epoch_s)))])
}

/// `Fri Nov 27 13:21:03 2026 UTC`, as smartctl's `local_time.asctime` in a UTC zone.
fn asctime(epoch_s: u64) -> String {
    let days = epoch_s / 86_400;
    let sod = epoch_s % 86_400;
    // civil_from_days (H. Hinnant)
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    const WD: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MON: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let wd = WD.get((days % 7) as usize).copied().unwrap_or("Thu");
    let mon = MON.get((m - 1) as usize).copied().unwrap_or("Jan");
    format!(
        "{wd} {mon} {d:2} {:02}:{:02}:{:02} {y} UTC",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

fn wwn(w: u64) -> J {
    obj([
        ("naa", J::U(w >> 60)),
        ("oui", J::U((w >> 36) & 0xff_ffff)),
        ("id", J::U(w & 0xf_ffff_ffff)),
    ])
}

/// One ATA attribute row: `(id, name, value, worst, thresh, flags, flags string, raw)`.
#[allow(clippy::too_many_arguments)]
fn attr(
    id: u64,
    name: &str,
    value: u64,
    worst: u64,
    thresh: u64,
    flags: u64,
    raw: u64,
    raw_s: String,
) -> J {
    let fl = |bit: u64| J::B(flags & bit != 0);
    let fs: String = [(1, 'P'), (2, 'O'), (4, 'S'), (8, 'R'), (16, 'C'), (32, 'K')]
        .iter()
        .map(|&(b, c)| if flags & b != 0 { c } else { '-' })
        .collect::<String>()
        + " ";
    obj([
        ("id", J::U(id)),
        ("name", s(name)),
        ("value", J::U(value)),
        ("worst", J::U(worst)),
        ("thresh", J::U(thresh)),
        ("when_failed", s("")),
        (
            "flags",
            obj([
                ("value", J::U(flags)),
                ("string", s(fs)),
                ("prefailure", fl(1)),
                ("updated_online", fl(2)),
                ("performance", fl(4)),
                ("error_rate", fl(8)),
                ("event_count", fl(16)),
                ("auto_keep", fl(32)),
            ]),
        ),
        ("raw", obj([("value", J::U(raw)), ("string", s(raw_s))])),
    ])
}

/// A normalised value for a counter that drags it down from 100 as it grows.
fn norm(raw: u64) -> u64 {
    100u64.saturating_sub(raw / 8).max(1)
}

fn ata_table(m: &Smart) -> J {
    let h = m.power_on_s / 3600;
    let raw = |v: u64| (v, v.to_string());
    let hdd = m.rotation_rpm > 0;
    let mut t = vec![attr(
        1,
        "Raw_Read_Error_Rate",
        82,
        64,
        44,
        0x0f,
        163_840_212,
        "163840212".into(),
    )];
    if hdd {
        t.push(attr(3, "Spin_Up_Time", 90, 90, 0, 0x03, 0, "0".into()));
        let ss = m.power_cycles + 3;
        t.push(attr(
            4,
            "Start_Stop_Count",
            100,
            100,
            20,
            0x32,
            ss,
            ss.to_string(),
        ));
    }
    let (r, rs) = raw(m.reallocated);
    t.push(attr(
        5,
        "Reallocated_Sector_Ct",
        norm(r),
        norm(r),
        10,
        0x33,
        r,
        rs,
    ));
    if hdd {
        t.push(attr(
            7,
            "Seek_Error_Rate",
            91,
            60,
            45,
            0x0f,
            1_004_418_529,
            "1004418529".into(),
        ));
    }
    t.push(attr(
        9,
        "Power_On_Hours",
        100u64.saturating_sub(h / 876).max(1),
        100u64.saturating_sub(h / 876).max(1),
        0,
        0x32,
        h,
        h.to_string(),
    ));
    if hdd {
        t.push(attr(
            10,
            "Spin_Retry_Count",
            100,
            100,
            97,
            0x13,
            0,
            "0".into(),
        ));
    }
    t.push(attr(
        12,
        "Power_Cycle_Count",
        100,
        100,
        20,
        0x32,
        m.power_cycles,
        m.power_cycles.to_string(),
    ));
    if hdd {
        t.push(attr(18, "Head_Health", 100, 100, 50, 0x0b, 0, "0".into()));
    }
    let (u, us) = raw(m.reported_uncorrect);
    t.push(attr(
        187,
        "Reported_Uncorrect",
        norm(u),
        norm(u),
        0,
        0x32,
        u,
        us,
    ));
    if hdd {
        t.push(attr(
            188,
            "Command_Timeout",
            100,
            100,
            0,
            0x32,
            0,
            "0 0 0".into(),
        ));
        t.push(attr(
            190,
            "Airflow_Temperature_Cel",
            100 - m.temperature_c.clamp(0, 99) as u64,
            55,
            40,
            0x22,
            m.temperature_c.max(0) as u64,
            format!("{} (Min/Max 22/{})", m.temperature_c, m.temperature_c + 9),
        ));
    }
    let tc = m.temperature_c.max(0) as u64;
    t.push(attr(
        194,
        "Temperature_Celsius",
        tc,
        45,
        0,
        0x22,
        tc,
        format!("{tc} (0 20 0 0 0)"),
    ));
    let (p, ps) = raw(m.pending);
    t.push(attr(
        197,
        "Current_Pending_Sector",
        norm(p),
        norm(p),
        0,
        0x12,
        p,
        ps,
    ));
    let (o, os) = raw(m.offline_uncorrectable);
    t.push(attr(
        198,
        "Offline_Uncorrectable",
        norm(o),
        norm(o),
        0,
        0x10,
        o,
        os,
    ));
    let (c, cs) = raw(m.crc_errors);
    t.push(attr(199, "UDMA_CRC_Error_Count", 200, 200, 0, 0x3e, c, cs));
    if hdd {
        t.push(attr(
            200,
            "Pressure_Limit",
            100,
            100,
            1,
            0x23,
            0,
            "0".into(),
        ));
        t.push(attr(
            240,
            "Head_Flying_Hours",
            100,
            100,
            0,
            0x00,
            h,
            format!("{h} (5 49 0)"),
        ));
    }
    let lbas_w = (m.gb_written * 1e9 / 512.0) as u64;
    let lbas_r = (m.gb_read * 1e9 / 512.0) as u64;
    t.push(attr(
        241,
        "Total_LBAs_Written",
        100,
        253,
        0,
        0x00,
        lbas_w,
        lbas_w.to_string(),
    ));
    t.push(attr(
        242,
        "Total_LBAs_Read",
        100,
        253,
        0,
        0x00,
        lbas_r,
        lbas_r.to_string(),
    ));
    J::A(t)
}

/// `smartctl --json -a -n standby [-d TYPE] PATH` of a drive that was read.
pub fn smartctl_json(m: &Smart, path: &str, dtype: &str, info: &str, epoch_s: u64) -> String {
    let mut argv = vec!["smartctl", "--json", "-a", "-n", "standby"];
    if dtype.contains("megaraid") {
        argv.push("-d");
        argv.push(dtype.strip_prefix("sat+").unwrap_or(dtype));
    }
    argv.push(path);
    let exit = m.exit_status();
    let mut kv: Vec<(String, J)> = vec![
        ("json_format_version".into(), J::A(vec![J::U(1), J::U(0)])),
        ("smartctl".into(), smartctl_header(&argv, exit, Vec::new())),
        ("local_time".into(), local_time(epoch_s)),
        (
            "device".into(),
            obj([
                ("name", s(path)),
                ("info_name", s(info)),
                ("type", s(dtype)),
                (
                    "protocol",
                    s(match m.protocol {
                        DriveProtocol::Ata => "ATA",
                        DriveProtocol::Scsi => "SCSI",
                        DriveProtocol::Nvme => "NVMe",
                    }),
                ),
            ]),
        ),
    ];
    let mut push = |k: &str, v: J| kv.push((k.to_owned(), v));
    let hours = m.power_on_s / 3600;
    match m.protocol {
        DriveProtocol::Ata => {
            push(
                "model_family",
                s(if m.rotation_rpm > 0 {
                    "Seagate Exos 7E8"
                } else {
                    "Samsung based SSDs"
                }),
            );
            push("model_name", s(&m.model));
            push("serial_number", s(&m.serial));
            if let Some(w) = m.wwn {
                push("wwn", wwn(w));
            }
            push("firmware_version", s(&m.firmware));
            push(
                "user_capacity",
                obj([
                    ("blocks", J::U(m.capacity_bytes / 512)),
                    ("bytes", J::U(m.capacity_bytes)),
                ]),
            );
            push("logical_block_size", J::U(512));
            push(
                "physical_block_size",
                J::U(if m.rotation_rpm > 0 { 4096 } else { 512 }),
            );
            push("rotation_rate", J::U(u64::from(m.rotation_rpm)));
            push(
                "form_factor",
                obj([
                    ("ata_value", J::U(2)),
                    (
                        "name",
                        s(if m.rotation_rpm > 0 {
                            "3.5 inches"
                        } else {
                            "2.5 inches"
                        }),
                    ),
                ]),
            );
            push("in_smartctl_database", J::B(true));
            push(
                "ata_version",
                obj([
                    ("string", s("ACS-4 (minor revision not indicated)")),
                    ("major_value", J::U(4064)),
                    ("minor_value", J::U(65_535)),
                ]),
            );
            push(
                "sata_version",
                obj([("string", s("SATA 3.3")), ("value", J::U(511))]),
            );
            push(
                "interface_speed",
                obj([(
                    "max",
                    obj([
                        ("sata_value", J::U(14)),
                        ("string", s("6.0 Gb/s")),
                        ("units_per_second", J::U(60)),
                        ("bits_per_unit", J::U(100_000_000)),
                    ]),
                )]),
            );
            push(
                "smart_support",
                obj([("available", J::B(true)), ("enabled", J::B(true))]),
            );
            push("smart_status", obj([("passed", J::B(m.passed_now()))]));
            push(
                "ata_smart_attributes",
                obj([("revision", J::U(10)), ("table", ata_table(m))]),
            );
            push("power_on_time", obj([("hours", J::U(hours))]));
            push("power_cycle_count", J::U(m.power_cycles));
            push("temperature", obj([("current", J::I(m.temperature_c))]));
            push(
                "ata_smart_error_log",
                obj([(
                    "summary",
                    obj([("revision", J::U(1)), ("count", J::U(m.error_log_entries))]),
                )]),
            );
            push(
                "ata_smart_self_test_log",
                obj([("standard", obj([("revision", J::U(1)), ("count", J::U(0))]))]),
            );
        }
        DriveProtocol::Scsi => {
            push("scsi_vendor", s(&m.vendor));
            push("scsi_product", s(&m.model));
            push("scsi_model_name", s(format!("{} {}", m.vendor, m.model)));
            push("scsi_revision", s(&m.firmware));
            push("scsi_version", s("SPC-5"));
            push(
                "user_capacity",
                obj([
                    ("blocks", J::U(m.capacity_bytes / 512)),
                    ("bytes", J::U(m.capacity_bytes)),
                ]),
            );
            push("logical_block_size", J::U(512));
            push("rotation_rate", J::U(u64::from(m.rotation_rpm)));
            if let Some(l) = &m.lun_id {
                push("logical_unit_id", s(l));
            } else if let Some(w) = m.wwn {
                push("logical_unit_id", s(format!("0x{w:016x}")));
                push("wwn", wwn(w));
            }
            push("serial_number", s(&m.serial));
            push(
                "device_type",
                obj([
                    ("scsi_terminology", s("direct access block device")),
                    ("scsi_value", J::U(0)),
                ]),
            );
            push(
                "scsi_transport_protocol",
                obj([("name", s("SAS (SPL-4)")), ("value", J::U(6))]),
            );
            push(
                "smart_support",
                obj([("available", J::B(true)), ("enabled", J::B(true))]),
            );
            push("temperature_warning", obj([("enabled", J::B(true))]));
            push("smart_status", obj([("passed", J::B(m.passed_now()))]));
            push(
                "temperature",
                obj([("current", J::I(m.temperature_c)), ("drive_trip", J::U(60))]),
            );
            push(
                "power_on_time",
                obj([
                    ("hours", J::U(hours)),
                    ("minutes", J::U(m.power_on_s / 60 % 60)),
                ]),
            );
            push("scsi_grown_defect_list", J::U(m.grown_defects));
            let row = |gb: f64, unc: u64| {
                obj([
                    ("errors_corrected_by_eccfast", J::U((gb * 1900.0) as u64)),
                    ("errors_corrected_by_eccdelayed", J::U(0)),
                    ("errors_corrected_by_rereads_rewrites", J::U(0)),
                    ("total_errors_corrected", J::U((gb * 1900.0) as u64)),
                    ("correction_algorithm_invocations", J::U(0)),
                    ("gigabytes_processed", s(format!("{gb:.3}"))),
                    ("total_uncorrected_errors", J::U(unc)),
                ])
            };
            push(
                "scsi_error_counter_log",
                obj([
                    ("read", row(m.gb_read, m.uncorrected_read)),
                    ("write", row(m.gb_written, m.uncorrected_write)),
                    ("verify", row(m.gb_read / 40.0, m.uncorrected_verify)),
                ]),
            );
        }
        DriveProtocol::Nvme => {
            let n = &m.nvme;
            push("model_name", s(&m.model));
            push("serial_number", s(&m.serial));
            push("firmware_version", s(&m.firmware));
            push(
                "nvme_pci_vendor",
                obj([("id", J::U(0x144d)), ("subsystem_id", J::U(0x144d))]),
            );
            push("nvme_ieee_oui_identifier", J::U(0x002538));
            push("nvme_total_capacity", J::U(m.capacity_bytes));
            push("nvme_unallocated_capacity", J::U(0));
            push("nvme_controller_id", J::U(4));
            push(
                "nvme_version",
                obj([("string", s("1.3")), ("value", J::U(66_304))]),
            );
            push("nvme_number_of_namespaces", J::U(1));
            push(
                "smart_support",
                obj([("available", J::B(true)), ("enabled", J::B(true))]),
            );
            push(
                "smart_status",
                obj([
                    ("passed", J::B(m.passed_now())),
                    (
                        "nvme",
                        obj([("value", J::U(u64::from(n.critical_warning())))]),
                    ),
                ]),
            );
            push(
                "nvme_smart_health_information_log",
                obj([
                    ("critical_warning", J::U(u64::from(n.critical_warning()))),
                    ("temperature", J::I(m.temperature_c)),
                    ("available_spare", J::U(n.available_spare)),
                    (
                        "available_spare_threshold",
                        J::U(n.available_spare_threshold),
                    ),
                    ("percentage_used", J::U(n.percentage_used)),
                    ("data_units_read", J::U(n.data_units_read)),
                    ("data_units_written", J::U(n.data_units_written)),
                    ("host_reads", J::U(n.host_reads)),
                    ("host_writes", J::U(n.host_writes)),
                    ("controller_busy_time", J::U(n.controller_busy_min)),
                    ("power_cycles", J::U(m.power_cycles)),
                    ("power_on_hours", J::U(hours)),
                    ("unsafe_shutdowns", J::U(n.unsafe_shutdowns)),
                    ("media_errors", J::U(n.media_errors)),
                    ("num_err_log_entries", J::U(m.error_log_entries)),
                    ("warning_temp_time", J::U(0)),
                    ("critical_comp_time", J::U(0)),
                ]),
            );
            push("temperature", obj([("current", J::I(m.temperature_c))]));
            push("power_cycle_count", J::U(m.power_cycles));
            push("power_on_time", obj([("hours", J::U(hours))]));
        }
    }
    J::O(kv).render(Style::Smartctl)
}

/// smartctl on a MegaRAID virtual drive: refused, exit status 2 (`os_linux.cpp`).
pub fn smartctl_vd_refused(path: &str) -> String {
    let argv = ["smartctl", "--json", "-a", "-n", "standby", path];
    let msg = obj([
        (
            "string",
            s(format!(
                "Smartctl open device: {path} failed: DELL or MegaRaid controller, please try adding '-d megaraid,N'"
            )),
        ),
        ("severity", s("error")),
    ]);
    obj([
        ("json_format_version", J::A(vec![J::U(1), J::U(0)])),
        ("smartctl", smartctl_header(&argv, 2, vec![msg])),
    ])
    .render(Style::Smartctl)
}

/// `smartctl -l error -n standby PATH` of a SAS disk (text: the error counter log).
pub fn smartctl_scsi_error_text(m: &Smart) -> String {
    // scsiprint.cpp: "%s%8" PRIu64 " %8" PRIu64 "  %8" PRIu64 "  %8" PRIu64 "   %8" PRIu64
    // then "   %12.3f    %8" PRIu64
    let row = |name: &str, gb: f64, unc: u64| {
        let c = (gb * 1900.0) as u64;
        format!(
            "{name:<8}{c:>8} {:>8}  {:>8}  {c:>8}   {:>8}   {gb:>12.3}    {unc:>8}\n",
            0, 0, 0
        )
    };
    let mut t = String::from(
        "smartctl 7.3 2022-02-28 r5338 [x86_64-linux-6.1.0-27-amd64] (local build)\n\
         Copyright (C) 2002-22, Bruce Allen, Christian Franke, www.smartmontools.org\n\n\
         === START OF READ SMART DATA SECTION ===\n\
         Error counter log:\n\
         \x20          Errors Corrected by           Total   Correction     Gigabytes    Total\n\
         \x20              ECC          rereads/    errors   algorithm      processed    uncorrected\n\
         \x20          fast | delayed   rewrites  corrected  invocations   [10^9 bytes]  errors\n",
    );
    t.push_str(&row("read:", m.gb_read, m.uncorrected_read));
    t.push_str(&row("write:", m.gb_written, m.uncorrected_write));
    t.push_str(&row("verify:", m.gb_read / 40.0, m.uncorrected_verify));
    let _ = write!(t, "\nNon-medium error count:{:>9}\n\n", m.non_medium);
    t
}

/// The file name under `run/smartctl/` of a device path and `-d` type, as the stand-in builds
/// it: `/dev/sda` → `sda`, `/dev/nvme0n1` → `nvme0n1`, `/dev/bus/0 -d megaraid,7` →
/// `bus0.megaraid7`.
pub fn smartctl_key(path: &str, megaraid_did: Option<u32>) -> String {
    let name = path.strip_prefix("/dev/").unwrap_or(path);
    let name = match name.strip_prefix("bus/") {
        Some(n) => format!("bus{n}"),
        None => name.to_owned(),
    };
    match megaraid_did {
        Some(d) => format!("{name}.megaraid{d}"),
        None => name,
    }
}

/// `smartctl --scan` of the host: its own disks, then the disks behind the controller.
pub fn smartctl_scan(h: &Host) -> String {
    let mut out = String::new();
    for d in &h.devices {
        if d.name.starts_with("sd") {
            let _ = writeln!(out, "/dev/{0} -d scsi # /dev/{0}, SCSI device", d.name);
        } else if d.name.starts_with("nvme") {
            let ctrl = d.name.split_once('n').map_or("", |x| x.1);
            let ctrl = ctrl.split('n').next().unwrap_or("0");
            let _ = writeln!(
                out,
                "/dev/nvme{ctrl} -d nvme # /dev/nvme{ctrl}, NVMe device"
            );
        }
    }
    if let Some(c) = &h.drives.controller {
        for p in &c.pds {
            let _ = writeln!(
                out,
                "/dev/bus/{0} -d megaraid,{1} # /dev/bus/{0} [megaraid_disk_{1:02}], SCSI device",
                c.scsi_host, p.did
            );
        }
    }
    out
}

// ---------------------------------------------------------------- storcli

const CLI_VERSION: &str = "007.2807.0000.0000 Dec 22, 2023";
const STORCLI_OS: &str = "Linux 6.1.0-27-amd64";

fn command_status(c: &Controller, description: &str) -> J {
    obj([
        ("CLI Version", s(CLI_VERSION)),
        ("Operating system", s(STORCLI_OS)),
        ("Controller", J::U(u64::from(c.number))),
        ("Status", s("Success")),
        ("Description", s(description)),
    ])
}

fn envelope(c: &Controller, description: &str, data: J) -> String {
    obj([(
        "Controllers",
        J::A(vec![obj([
            ("Command Status", command_status(c, description)),
            ("Response Data", data),
        ])]),
    )])
    .render(Style::Storcli)
}

/// storcli's binary size with three decimals: `7.276 TB`.
pub fn storcli_size(bytes: u64) -> String {
    let b = bytes as f64;
    let tib = 1024f64.powi(4);
    if b >= tib {
        format!("{:.3} TB", b / tib)
    } else {
        format!("{:.3} GB", b / 1024f64.powi(3))
    }
}

fn pd_row(p: &Pd) -> J {
    obj([
        ("EID:Slt", s(format!("{}:{}", p.eid, p.slot))),
        ("DID", J::U(u64::from(p.did))),
        ("State", s(&p.state)),
        ("DG", p.dg.map_or_else(|| s("-"), |g| J::U(u64::from(g)))),
        ("Size", s(storcli_size(coerced(p.smart.capacity_bytes)))),
        ("Intf", s(&p.interface)),
        ("Med", s(&p.medium)),
        ("SED", s("N")),
        ("PI", s("N")),
        ("SeSz", s("512B")),
        ("Model", s(&p.smart.model)),
        ("Sp", s("U")),
        ("Type", s("-")),
    ])
}

/// The size a controller uses of a drive (coerced down to whole GiB).
fn coerced(bytes: u64) -> u64 {
    bytes / (1 << 30) * (1 << 30) - (1 << 30)
}

fn vd_row(c: &Controller, v: &crate::model::Vd) -> J {
    obj([
        ("DG/VD", s(format!("{}/{}", v.dg, v.vd))),
        ("TYPE", s(&v.level)),
        ("State", s(c.vd_state(v))),
        ("Access", s("RW")),
        ("Consist", s("Yes")),
        ("Cache", s(c.cache(v))),
        ("Cac", s("-")),
        ("sCC", s("ON")),
        ("Size", s(storcli_size(v.size_bytes))),
        ("Name", s(&v.name)),
    ])
}

fn bbu_info(c: &Controller) -> Option<J> {
    let b = c.bbu.as_ref()?;
    Some(J::A(vec![obj([
        ("Model", s(&b.model)),
        ("State", s(&b.state)),
        (
            "RetentionTime",
            s(if b.state == "Optimal" {
                "48 hours +"
            } else {
                "N/A"
            }),
        ),
        ("Temp", s(format!("{}C", b.temperature_c))),
        ("Mode", s("4")),
        ("MfgDate", s("2021/03/18")),
        ("Next Learn", s("2026/12/18  03:00:00")),
    ])]))
}

/// `storcli64 /call show all J`.
pub fn storcli_show_all(c: &Controller) -> String {
    let mut topo = Vec::new();
    for v in &c.vds {
        let st = c.vd_state(v);
        let vd_size = storcli_size(v.size_bytes);
        let group = |arr: J| {
            obj([
                ("DG", J::U(u64::from(v.dg))),
                ("Arr", arr),
                ("Row", s("-")),
                ("EID:Slot", s("-")),
                ("DID", s("-")),
                ("Type", s(&v.level)),
                ("State", s(st)),
                ("BT", s("N")),
                ("Size", s(&vd_size)),
                ("PDC", s("dsbl")),
                ("PI", s("N")),
                ("SED", s("N")),
                ("DS3", s("none")),
                ("FSpace", s("N")),
                ("TR", s("N")),
            ])
        };
        topo.push(group(s("-")));
        topo.push(group(J::U(0)));
        for (row, &i) in v.members.iter().enumerate() {
            let Some(p) = c.pds.get(i) else { continue };
            topo.push(obj([
                ("DG", J::U(u64::from(v.dg))),
                ("Arr", J::U(0)),
                ("Row", J::U(row as u64)),
                ("EID:Slot", s(format!("{}:{}", p.eid, p.slot))),
                ("DID", J::U(u64::from(p.did))),
                ("Type", s("DRIVE")),
                ("State", s(&p.state)),
                ("BT", s("N")),
                ("Size", s(storcli_size(coerced(p.smart.capacity_bytes)))),
                ("PDC", s("dsbl")),
                ("PI", s("N")),
                ("SED", s("N")),
                ("DS3", s("none")),
                ("FSpace", s("-")),
                ("TR", s("N")),
            ]));
        }
    }
    let mut data: Vec<(String, J)> = vec![
        (
            "Basics".into(),
            obj([
                ("Controller", J::U(u64::from(c.number))),
                ("Model", s(&c.model)),
                ("Serial Number", s(&c.serial)),
                ("SAS Address", s("500605b00d1e2f30")),
                ("PCI Address", s("00:3b:00:00")),
            ]),
        ),
        (
            "Version".into(),
            obj([
                ("Firmware Package Build", s("24.21.0-0151")),
                ("Firmware Version", s(&c.firmware)),
                ("Driver Name", s("megaraid_sas")),
                ("Driver Version", s("07.719.03.00-rc1")),
            ]),
        ),
        (
            "Status".into(),
            obj([
                ("Controller Status", s(c.status())),
                ("Memory Correctable Errors", J::U(0)),
                ("Memory Uncorrectable Errors", J::U(0)),
                ("ECC Bucket Count", J::U(0)),
                ("Any Offline VD Cache Preserved", s("No")),
                (
                    "BBU Status",
                    J::U(u64::from(
                        c.bbu.as_ref().is_some_and(|b| b.state != "Optimal"),
                    )),
                ),
                ("Controller has booted into safe mode", s("No")),
            ]),
        ),
        (
            "HwCfg".into(),
            obj([
                ("ChipRevision", s(" C0")),
                ("BBU", s(if c.bbu.is_some() { "Present" } else { "Absent" })),
                ("On Board Memory Size", s("2048MB")),
                ("Temperature Sensor for ROC", s("Present")),
                ("Temperature Sensor for Controller", s("Absent")),
                ("ROC temperature(Degree Celsius)", J::I(c.roc_temperature_c)),
            ]),
        ),
        (
            "Policies".into(),
            obj([
                (
                    "Policies Table",
                    J::A(vec![obj([
                        ("Policy", s("Rebuild Rate")),
                        ("Current", s("30 %")),
                        ("Default", s("30%")),
                    ])]),
                ),
                ("Auto Rebuild", s("On")),
            ]),
        ),
        ("Drive Groups".into(), J::U(c.vds.len() as u64)),
        ("TOPOLOGY".into(), J::A(topo)),
        ("Virtual Drives".into(), J::U(c.vds.len() as u64)),
        (
            "VD LIST".into(),
            J::A(c.vds.iter().map(|v| vd_row(c, v)).collect()),
        ),
        ("Physical Drives".into(), J::U(c.pds.len() as u64)),
        ("PD LIST".into(), J::A(c.pds.iter().map(pd_row).collect())),
        ("Enclosures".into(), J::U(1)),
        (
            "Enclosure LIST".into(),
            J::A(vec![obj([
                ("EID", J::U(u64::from(c.pds.first().map_or(64, |p| p.eid)))),
                ("State", s("OK")),
                ("Slots", J::U(26)),
                ("PD", J::U(c.pds.len() as u64)),
                ("PS", J::U(0)),
                ("Fans", J::U(0)),
                ("TSs", J::U(1)),
                ("Alms", J::U(0)),
                ("SIM", J::U(0)),
                ("Port#", s("Port 0 - 3 & Port 4 - 7")),
                ("ProdID", s("12G SAS Expander")),
                ("VendorSpecific", s("x40-66.16.11.0")),
            ])]),
        ),
    ];
    if let Some(b) = bbu_info(c) {
        data.push(("BBU_Info".into(), b));
    }
    envelope(c, "None", J::O(data))
}

/// `storcli64 /call/vall show all J`: each VD, its members and its properties (OS drive name,
/// SCSI NAA id, configured write cache, active operations).
pub fn storcli_vall(c: &Controller) -> String {
    let mut data = Vec::new();
    for v in &c.vds {
        data.push((
            format!("/c{}/v{}", c.number, v.vd),
            J::A(vec![vd_row(c, v)]),
        ));
        let members: Vec<J> = v
            .members
            .iter()
            .filter_map(|&i| c.pds.get(i))
            .map(pd_row)
            .collect();
        data.push((format!("PDs for VD {}", v.vd), J::A(members)));
        let rebuilding = v
            .members
            .iter()
            .filter_map(|&i| c.pds.get(i))
            .any(|p| p.rebuild.is_some());
        let blocks = v.size_bytes / 512;
        data.push((
            format!("VD{} Properties", v.vd),
            obj([
                ("Strip Size", s(format!("{} KB", v.strip_kb))),
                ("Number of Blocks", J::U(blocks)),
                ("VD has Emulated PD", s("No")),
                ("Span Depth", J::U(1)),
                ("Number of Drives Per Span", J::U(v.members.len() as u64)),
                (
                    "Write Cache(initial setting)",
                    s(if v.write_back_configured {
                        "WriteBack"
                    } else {
                        "WriteThrough"
                    }),
                ),
                ("Disk Cache Policy", s("Disabled")),
                ("Encryption", s("None")),
                ("Data Protection", s("Disabled")),
                (
                    "Active Operations",
                    s(if rebuilding { "Rebuild" } else { "None" }),
                ),
                ("Exposed to OS", s("Yes")),
                ("OS Drive Name", s(format!("/dev/{}", v.dev))),
                ("Creation Date", s("14-03-2023")),
                ("Creation Time", s("10:42:17 AM")),
                ("Emulation type", s("default")),
                ("Is LD Ready for OS Requests", s("Yes")),
                ("SCSI NAA Id", s(&v.naa_id)),
                ("Unmap Enabled", s("N/A")),
            ]),
        ));
    }
    envelope(c, "None", J::O(data))
}

/// `storcli64 /call/eall/sall show all J`: every PD with its error counters and identity.
pub fn storcli_pds(c: &Controller) -> String {
    let mut data = Vec::new();
    for p in &c.pds {
        let id = format!("Drive /c{}/e{}/s{}", c.number, p.eid, p.slot);
        data.push((id.clone(), J::A(vec![pd_row(p)])));
        let t = p.smart.temperature_c;
        let position = match (p.dg, p.row) {
            (Some(g), Some(r)) => format!("DriveGroup:{g}, Span:0, Row:{r}"),
            _ => "N/A".to_owned(),
        };
        data.push((
            format!("{id} - Detailed Information"),
            J::O(vec![
                (
                    format!("{id} State"),
                    obj([
                        ("Shield Counter", J::U(0)),
                        ("Media Error Count", J::U(p.media_errors)),
                        ("Other Error Count", J::U(p.other_errors)),
                        ("BBM Error Count", J::U(0)),
                        (
                            "Drive Temperature",
                            s(format!("{t:>3}C ({:.2} F)", t as f64 * 1.8 + 32.0)),
                        ),
                        ("Predictive Failure Count", J::U(p.predictive_failures)),
                        (
                            "S.M.A.R.T alert flagged by drive",
                            s(if p.smart_alert { "Yes" } else { "No" }),
                        ),
                    ]),
                ),
                (
                    format!("{id} Device attributes"),
                    obj([
                        ("SN", s(format!("{:>20}", p.smart.serial))),
                        ("Manufacturer Id", s("ATA     ")),
                        ("Model Number", s(&p.smart.model)),
                        ("NAND Vendor", s("NA")),
                        (
                            "WWN",
                            s(p.smart
                                .wwn
                                .map_or_else(|| "NA".to_owned(), |w| format!("{w:016X}"))),
                        ),
                        ("Firmware Revision", s(format!("{:<8}", p.smart.firmware))),
                        (
                            "Raw size",
                            s(format!(
                                "{} [0x{:x} Sectors]",
                                storcli_size(p.smart.capacity_bytes),
                                p.smart.capacity_bytes / 512
                            )),
                        ),
                        (
                            "Coerced size",
                            s(format!(
                                "{} [0x{:x} Sectors]",
                                storcli_size(coerced(p.smart.capacity_bytes)),
                                coerced(p.smart.capacity_bytes) / 512
                            )),
                        ),
                        ("Device Speed", s("6.0Gb/s")),
                        ("Link Speed", s("6.0Gb/s")),
                        ("Write Cache", s("N/A")),
                        ("Logical Sector Size", s("512B")),
                        ("Physical Sector Size", s("4 KB")),
                        ("Connector Name", s("")),
                    ]),
                ),
                (
                    format!("{id} Policies/Settings"),
                    obj([
                        ("Drive position", s(position)),
                        ("Enclosure position", s("1")),
                        ("Sequence Number", J::U(2)),
                        ("Commissioned Spare", s("No")),
                        ("Emergency Spare", s("No")),
                        ("Last Predictive Failure Event Sequence Number", J::U(0)),
                        ("Multipath", s("No")),
                    ]),
                ),
            ]),
        ));
    }
    envelope(c, "Show Drive Information Succeeded.", J::O(data))
}

/// storcli's `Estimated Time Left`: `5 Hours 12 Minutes`, `12 Minutes`.
pub fn storcli_time_left(secs: u64) -> String {
    let h = secs / 3600;
    let m = secs / 60 % 60;
    if h > 0 {
        format!("{h} Hours {m} Minutes")
    } else {
        format!("{} Minutes", m.max(1))
    }
}

/// `storcli64 /call/eall/sall show rebuild J`.
pub fn storcli_rebuild(c: &Controller) -> String {
    let rows = c
        .pds
        .iter()
        .map(|p| {
            let id = format!("/c{}/e{}/s{}", c.number, p.eid, p.slot);
            match p.rebuild {
                Some(r) => {
                    let cap = p.smart.capacity_bytes as f64;
                    let pct = (r.done_bytes / cap * 100.0).floor().clamp(0.0, 99.0) as u64;
                    let left = ((cap - r.done_bytes).max(0.0) / r.rate_bps.max(1.0)) as u64;
                    obj([
                        ("Drive-ID", s(id)),
                        ("Progress%", J::U(pct)),
                        ("Status", s("In progress")),
                        ("Estimated Time Left", s(storcli_time_left(left))),
                    ])
                }
                None => obj([
                    ("Drive-ID", s(id)),
                    ("Progress%", s("-")),
                    ("Status", s("Not in progress")),
                    ("Estimated Time Left", s("-")),
                ]),
            }
        })
        .collect();
    envelope(c, "Show Drive Rebuild Status Succeeded.", J::A(rows))
}

/// `storcli64 /call/bbu show all J`.
pub fn storcli_bbu(c: &Controller) -> String {
    let Some(b) = &c.bbu else {
        return obj([(
            "Controllers",
            J::A(vec![obj([(
                "Command Status",
                obj([
                    ("CLI Version", s(CLI_VERSION)),
                    ("Operating system", s(STORCLI_OS)),
                    ("Controller", J::U(u64::from(c.number))),
                    ("Status", s("Failure")),
                    ("Description", s("None")),
                    (
                        "Detailed Status",
                        J::A(vec![obj([
                            ("Ctrl", J::U(u64::from(c.number))),
                            ("Status", s("Failed")),
                            ("Property", s("-")),
                            ("ErrMsg", s("use /cx/cv")),
                            ("ErrCd", J::U(255)),
                        ])]),
                    ),
                ]),
            )])]),
        )])
        .render(Style::Storcli);
    };
    let prop = |p: &str, v: String| obj([("Property", s(p)), ("Value", s(v))]);
    envelope(
        c,
        "None",
        obj([
            (
                "BBU_Info",
                J::A(vec![
                    prop("Type", b.model.clone()),
                    prop("Voltage", "3884 mV".into()),
                    prop("Current", "0 mA".into()),
                    prop("Temperature", format!("{} C", b.temperature_c)),
                    prop("Battery State", b.state.clone()),
                ]),
            ),
            (
                "BBU_Firmware_Status",
                J::A(vec![
                    prop("Charging Status", "None".into()),
                    prop("Voltage", "OK".into()),
                    prop("Temperature", "OK".into()),
                    prop("Learn Cycle Active", "No".into()),
                    prop("Battery Pack Missing", "No".into()),
                    prop(
                        "Battery Replacement required",
                        if b.state == "Optimal" { "No" } else { "Yes" }.into(),
                    ),
                ]),
            ),
        ]),
    )
}

// ---------------------------------------------------------------- stand-ins and files

const SMARTCTL_SH: &str = r#"#!/bin/sh
# Stand-in for smartctl(8), written by storwatch-sim: prints the simulated drives' current
# state (kept up to date in ../run/smartctl/) as smartctl 7.3 does, for the calls the agent
# makes: --scan, --json -a -n standby [-d megaraid,N] DEVICE, -l error -n standby DEVICE.
run="$(dirname "$0")/../run/smartctl"
json=0 log='' did='' dev='' scan=0
while [ $# -gt 0 ]; do
  case $1 in
    --scan) scan=1 ;;
    --json|-j) json=1 ;;
    -a|-x|-H|-i) ;;
    -n) shift ;;
    -l) shift; log=$1 ;;
    -d) shift; case $1 in *megaraid,*) did=${1##*,} ;; esac ;;
    -*) echo "smartctl: storwatch-sim stand-in: unsupported option $1" >&2; exit 1 ;;
    *) dev=$1 ;;
  esac
  shift
done
if [ $scan = 1 ]; then cat "$run/scan.txt"; exit 0; fi
name=${dev#/dev/}
case $name in bus/*) name=bus${name#bus/} ;; esac
[ -n "$did" ] && name=$name.megaraid$did
if [ ! -f "$run/$name.json" ]; then
  echo "Smartctl open device: $dev failed: No such device" >&2
  exit 2
fi
if [ "$log" = error ]; then
  [ -f "$run/$name.error.txt" ] || { echo "smartctl: storwatch-sim stand-in: no error log of $dev" >&2; exit 4; }
  cat "$run/$name.error.txt"
  exit 0
fi
[ $json = 1 ] || { echo "smartctl: storwatch-sim stand-in: only --json output" >&2; exit 1; }
cat "$run/$name.json"
read -r code <"$run/$name.exit"
exit "$code"
"#;

const STORCLI_SH: &str = r#"#!/bin/sh
# Stand-in for storcli64, written by storwatch-sim: prints the simulated MegaRAID controller's
# current state (kept up to date in ../run/storcli/) as storcli 007.2807 does with J.
run="$(dirname "$0")/../run/storcli"
case "$*" in
  "/call show all J"|"/c0 show all J"|"/call show J"|"/c0 show J") cat "$run/show-all.json" ;;
  "/call/vall show all J"|"/c0/vall show all J"|"/call/vall show J"|"/c0/vall show J") cat "$run/vall-show-all.json" ;;
  "/call/eall/sall show all J"|"/c0/eall/sall show all J") cat "$run/eall-sall-show-all.json" ;;
  "/call/eall/sall show rebuild J"|"/c0/eall/sall show rebuild J") cat "$run/eall-sall-show-rebuild.json" ;;
  "/call/bbu show all J"|"/c0/bbu show all J"|"/call/bbu show J"|"/c0/bbu show J") cat "$run/bbu-show-all.json" ;;
  *) echo "storcli64: storwatch-sim stand-in: unsupported: $*" >&2; exit 1 ;;
esac
"#;

/// The `/proc/devices` of a host; with a MegaRAID controller its management device is listed
/// (what smartctl's `-d megaraid` needs, and what the agent looks for).
pub fn proc_devices(h: &Host) -> String {
    let mut t = String::from(
        "Character devices:\n  1 mem\n  4 /dev/vc/0\n  4 tty\n  4 ttyS\n  5 /dev/tty\n  5 /dev/console\n  5 /dev/ptmx\n  7 vcs\n 10 misc\n 13 input\n 21 sg\n 29 fb\n128 ptm\n136 pts\n180 usb\n188 ttyUSB\n189 usb_device\n",
    );
    if h.drives.controller.is_some() {
        t.push_str("238 megaraid_sas_ioctl\n");
    }
    t.push_str("239 nvme-generic\n240 nvme\n241 bsg\n242 watchdog\n243 ptp\n244 pps\n245 cec\n246 rtc\n247 dax\n248 dimmctl\n249 ndctl\n250 tpm\n251 hidraw\n252 ipmidev\n253 aux\n254 gpiochip\n\nBlock devices:\n  7 loop\n  8 sd\n  9 md\n 65 sd\n 66 sd\n 67 sd\n 68 sd\n 69 sd\n 70 sd\n 71 sd\n128 sd\n129 sd\n130 sd\n131 sd\n132 sd\n133 sd\n134 sd\n135 sd\n253 device-mapper\n254 mdp\n259 blkext\n");
    t
}

/// What does not change: the stand-ins, `/proc/devices`, and for disks with a SCSI address the
/// sysfs that ties them to it (`device` → `…/hostH/targetH:C:T/H:C:T:L`, `scsi_host/hostH/
/// proc_name`) and, for a controller's virtual drives, `device/wwid`. Called before the block
/// devices are written, so that `device/` is the link.
pub fn write_static(t: &mut Tree, h: &Host) -> io::Result<()> {
    t.script("bin/smartctl", SMARTCTL_SH)?;
    // storcli only where there is a controller: elsewhere it is not installed
    if h.drives.controller.is_some() {
        t.script("bin/storcli64", STORCLI_SH)?;
    }
    t.write("proc/devices", &proc_devices(h))?;
    for (dev, ((host, ch, tg, lun), driver)) in &h.drives.scsi {
        let addr = format!("{host}:{ch}:{tg}:{lun}");
        let pci = if driver == "megaraid_sas" {
            "pci0000:3a/0000:3a:00.0/0000:3b:00.0"
        } else {
            "pci0000:00/0000:00:17.0/ata1"
        };
        let dir = format!("sys/devices/{pci}/host{host}/target{host}:{ch}:{tg}/{addr}");
        t.write(&format!("{dir}/scsi_level"), "7\n")?;
        t.write(&format!("{dir}/type"), "0\n")?;
        // /sys/block/sdX/device -> the SCSI device, as the kernel links it
        t.link(
            &format!("../../devices/{pci}/host{host}/target{host}:{ch}:{tg}/{addr}"),
            &format!("sys/block/{dev}/device"),
        )?;
        t.write(
            &format!("sys/class/scsi_host/host{host}/proc_name"),
            &format!("{driver}\n"),
        )?;
        t.link(
            &format!("../../../../sys/block/{dev}/device"),
            &format!("sys/class/scsi_device/{addr}/device"),
        )?;
    }
    if let Some(c) = &h.drives.controller {
        for v in &c.vds {
            t.write(
                &format!("sys/block/{}/device/wwid", v.dev),
                &format!("naa.{}\n", v.naa_id),
            )?;
        }
    }
    Ok(())
}

/// What changes: every drive's smartctl answers, the controller's storcli documents and the
/// scan.
pub fn write_dynamic(t: &mut Tree, h: &Host) -> io::Result<()> {
    let minute = h.epoch_s / 60 * 60;
    let vds: Vec<&str> = h
        .drives
        .controller
        .iter()
        .flat_map(|c| c.vds.iter().map(|v| v.dev.as_str()))
        .collect();
    for d in &h.devices {
        if !(d.name.starts_with("sd") || d.name.starts_with("nvme")) {
            continue;
        }
        let path = format!("/dev/{}", d.name);
        let key = smartctl_key(&path, None);
        if vds.contains(&d.name.as_str()) {
            if changed(h, &key, 0) {
                t.write(
                    &format!("run/smartctl/{key}.json"),
                    &smartctl_vd_refused(&path),
                )?;
                t.write(&format!("run/smartctl/{key}.exit"), "2\n")?;
            }
            continue;
        }
        let Some(m) = h.drives.disks.get(&d.name) else {
            continue;
        };
        if !changed(h, &key, fingerprint(m, minute)) {
            continue;
        }
        let dtype = match m.protocol {
            DriveProtocol::Ata => "sat",
            DriveProtocol::Scsi => "scsi",
            DriveProtocol::Nvme => "nvme",
        };
        t.write(
            &format!("run/smartctl/{key}.json"),
            &smartctl_json(m, &path, dtype, &path, minute),
        )?;
        t.write(
            &format!("run/smartctl/{key}.exit"),
            &format!("{}\n", m.exit_status()),
        )?;
        if m.protocol == DriveProtocol::Scsi {
            t.write(
                &format!("run/smartctl/{key}.error.txt"),
                &smartctl_scsi_error_text(m),
            )?;
        }
    }
    if changed(h, "scan", h.devices.len() as u64) {
        t.write("run/smartctl/scan.txt", &smartctl_scan(h))?;
    }
    if let Some(c) = &h.drives.controller {
        let bus = format!("/dev/bus/{}", c.scsi_host);
        for p in &c.pds {
            let key = smartctl_key(&bus, Some(p.did));
            if !changed(h, &key, fingerprint(&p.smart, minute)) {
                continue;
            }
            let dtype = format!("sat+megaraid,{}", p.did);
            let info = format!("{bus} [megaraid_disk_{:02}] [SAT]", p.did);
            t.write(
                &format!("run/smartctl/{key}.json"),
                &smartctl_json(&p.smart, &bus, &dtype, &info, minute),
            )?;
            t.write(
                &format!("run/smartctl/{key}.exit"),
                &format!("{}\n", p.smart.exit_status()),
            )?;
        }
        if changed(h, "storcli", controller_fingerprint(c)) {
            t.write("run/storcli/show-all.json", &storcli_show_all(c))?;
            t.write("run/storcli/vall-show-all.json", &storcli_vall(c))?;
            t.write("run/storcli/eall-sall-show-all.json", &storcli_pds(c))?;
            t.write(
                "run/storcli/eall-sall-show-rebuild.json",
                &storcli_rebuild(c),
            )?;
            t.write("run/storcli/bbu-show-all.json", &storcli_bbu(c))?;
        }
    }
    Ok(())
}

/// Whether the output named `key` has to be rendered again: its inputs' fingerprint differs
/// from the last one rendered (rendering 25 drives' JSON every second would cost a disk
/// server's tree more than everything else).
fn changed(h: &Host, key: &str, fp: u64) -> bool {
    let mut seen = h.drives.rendered.borrow_mut();
    if seen.get(key) == Some(&fp) {
        return false;
    }
    seen.insert(key.to_owned(), fp);
    true
}

/// What a drive's smartctl output shows, hashed: its health (every counter, the verdict, the
/// temperature) at once, and the totals that grow with its I/O (bytes and commands, power-on
/// time) with the minute: a busy disk's file is rendered again once a minute, not every second.
fn fingerprint(m: &Smart, minute: u64) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut s = std::collections::hash_map::DefaultHasher::new();
    let n = &m.nvme;
    (
        minute,
        m.temperature_c,
        m.passed,
        m.power_cycles,
        (
            m.reallocated,
            m.reported_uncorrect,
            m.pending,
            m.offline_uncorrectable,
        ),
        (
            m.crc_errors,
            m.error_log_entries,
            m.grown_defects,
            m.non_medium,
        ),
        (
            m.uncorrected_read,
            m.uncorrected_write,
            m.uncorrected_verify,
        ),
    )
        .hash(&mut s);
    (
        n.percentage_used,
        n.available_spare,
        n.available_spare_threshold,
        n.media_errors,
        n.unsafe_shutdowns,
        n.warning_bits,
    )
        .hash(&mut s);
    s.finish()
}

/// What storcli shows of a controller, hashed: states, counters, temperatures, rebuild progress
/// and time left as printed, the battery.
fn controller_fingerprint(c: &Controller) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut s = std::collections::hash_map::DefaultHasher::new();
    c.roc_temperature_c.hash(&mut s);
    c.bbu
        .as_ref()
        .map(|b| (&b.state, b.temperature_c))
        .hash(&mut s);
    for p in &c.pds {
        (
            &p.state,
            p.dg,
            p.media_errors,
            p.other_errors,
            p.predictive_failures,
            p.smart_alert,
            p.smart.temperature_c,
        )
            .hash(&mut s);
        if let Some(r) = p.rebuild {
            let cap = p.smart.capacity_bytes as f64;
            let pct = (r.done_bytes / cap * 100.0).floor() as u64;
            let left_min = ((cap - r.done_bytes).max(0.0) / r.rate_bps.max(1.0) / 60.0) as u64;
            (pct, left_min).hash(&mut s);
        }
    }
    for v in &c.vds {
        (&v.members, v.write_back_configured).hash(&mut s);
    }
    s.finish()
}

#[cfg(test)]
mod tests;
