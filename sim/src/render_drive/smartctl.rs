//! What smartctl prints: `smartctl --json -a` of each drive (ATA attributes, SCSI error
//! counters, the NVMe health log), `smartctl -l error` of a SAS disk, the refusal on a virtual
//! drive, and `smartctl --scan`.

use std::fmt::Write as _;

use super::ata::ata_table;
use super::json::{obj, s, Style, J};
use crate::model::{DriveProtocol, Host, Smart};

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
pub(super) fn asctime(epoch_s: u64) -> String {
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

/// `user_capacity` of a drive of `bytes` with 512-byte logical blocks.
fn user_capacity(bytes: u64) -> J {
    obj([("blocks", J::U(bytes / 512)), ("bytes", J::U(bytes))])
}

/// `smart_support`: available and enabled, as on every drive the scenarios hold.
fn smart_support() -> J {
    obj([("available", J::B(true)), ("enabled", J::B(true))])
}

fn wwn(w: u64) -> J {
    obj([
        ("naa", J::U(w >> 60)),
        ("oui", J::U((w >> 36) & 0xff_ffff)),
        ("id", J::U(w & 0xf_ffff_ffff)),
    ])
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
            push("user_capacity", user_capacity(m.capacity_bytes));
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
            push("smart_support", smart_support());
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
            push("user_capacity", user_capacity(m.capacity_bytes));
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
            push("smart_support", smart_support());
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
            push("smart_support", smart_support());
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
