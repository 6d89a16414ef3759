//! The ATA SMART attribute table of a simulated SATA drive as `smartctl --json -a` prints it:
//! each attribute's normalised value, worst, threshold, flags and raw value from the drive's
//! counters.

use super::json::{obj, s, J};
use crate::model::Smart;

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

pub(super) fn ata_table(m: &Smart) -> J {
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
