//! What `storcli64 … J` prints of a MegaRAID controller: `/call show all`, `/call/vall show
//! all`, `/call/eall/sall show all`, `/call/eall/sall show rebuild`, `/call/bbu show all`.

use super::json::{obj, s, Style, J};
use crate::model::{Controller, Pd};

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
