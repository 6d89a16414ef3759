//! The SMART data every simulated disk has: a healthy record for each disk a scenario did not
//! give one (serial, WWN, power-on hours from its years in service), and each second of every
//! drive (powered on a second longer, the bytes it moved counted).

use super::*;
use crate::model::{DriveProtocol, NvmeLog, Rand, Smart};

/// A 3.84 TB NVMe SSD, bytes.
pub(super) const NVME_3T84: u64 = 3_840_755_982_336;

pub(super) fn alnum(rng: &mut Rand, n: usize) -> String {
    const A: &[u8] = b"0123456789ABCDEFGHJKLMNPQRSTVWXYZ";
    (0..n)
        .map(|_| char::from(A[rng.int(0, (A.len() - 1) as u64) as usize]))
        .collect()
}

pub(super) fn blank(protocol: DriveProtocol, rng: &mut Rand, up_s: u64) -> Smart {
    // in service 1–4 years before this boot
    let deployed = rng.int(365, 4 * 365) * 86_400;
    Smart {
        protocol,
        vendor: String::new(),
        model: String::new(),
        serial: String::new(),
        wwn: None,
        lun_id: None,
        firmware: String::new(),
        capacity_bytes: 0,
        rotation_rpm: 0,
        power_on_s: deployed + up_s,
        power_cycles: rng.int(8, 40),
        temperature_c: rng.int(29, 36) as i64,
        passed: true,
        reallocated: 0,
        reported_uncorrect: 0,
        pending: 0,
        offline_uncorrectable: 0,
        crc_errors: 0,
        error_log_entries: 0,
        grown_defects: 0,
        uncorrected_read: 0,
        uncorrected_write: 0,
        uncorrected_verify: 0,
        non_medium: 0,
        gb_read: 0.0,
        gb_written: 0.0,
        nvme: NvmeLog::default(),
    }
}

pub(super) fn seagate_wwn(rng: &mut Rand) -> u64 {
    0x5000_c500_0000_0000 | rng.int(0x1000_0000, 0xffff_ffff)
}

/// A Samsung PM9A3 3.84 TB NVMe SSD's SMART record, its NVMe log still to fill.
pub(super) fn samsung_nvme(rng: &mut Rand, up_s: u64) -> Smart {
    let mut m = blank(DriveProtocol::Nvme, rng, up_s);
    m.model = "SAMSUNG MZQL23T8HCLS-00A07".into();
    m.serial = format!("S64HNE0R{}", rng.int(100_000, 999_999));
    m.firmware = "GDC5602Q".into();
    m
}

/// Gives every disk without SMART data a healthy record: serial, WWN, power-on hours from its
/// years in service, the bytes it moved since boot. Called once the host is built (and its
/// counters filled with its uptime's history).
pub(super) fn default_smart(h: &mut Host) {
    let up_s = h.uptime_s();
    let vds: Vec<String> = h
        .drives
        .controller
        .iter()
        .flat_map(|c| c.vds.iter().map(|v| v.dev.clone()))
        .collect();
    let seed = h
        .name
        .bytes()
        .fold(h.uptime_cs, |a, b| a.rotate_left(7) ^ u64::from(b));
    let mut rng = Rand::new(seed);
    for d in &h.devices {
        let sd = d.name.starts_with("sd");
        if !(sd || d.name.starts_with("nvme"))
            || vds.contains(&d.name)
            || h.drives.disks.contains_key(&d.name)
        {
            continue;
        }
        let bytes = d.size_sectors * 512;
        let mut m;
        if !sd {
            m = samsung_nvme(&mut rng, up_s);
            m.nvme = NvmeLog {
                percentage_used: rng.int(8, 30),
                available_spare: 100,
                available_spare_threshold: 10,
                unsafe_shutdowns: rng.int(2, 12),
                ..NvmeLog::default()
            };
        } else if d.vendor == "ATA" {
            m = blank(DriveProtocol::Ata, &mut rng, up_s);
            m.model = d.model.trim().to_owned();
            m.serial = format!("S6{}", alnum(&mut rng, 12));
            m.wwn = Some(0x5002_5388_0000_0000 | rng.int(0x1000_0000, 0xffff_ffff));
            m.firmware = "GDC7302Q".into();
            m.rotation_rpm = if d.rotational { 7200 } else { 0 };
        } else if let Role::Path { map } = &d.role {
            // a LUN of the external RAID: both paths name the same LUN
            m = blank(DriveProtocol::Scsi, &mut rng, up_s);
            m.vendor = d.vendor.clone();
            m.model = d.model.clone();
            let wwid = h
                .maps
                .iter()
                .find(|x| &x.name == map)
                .map_or("36d039ea0001a2b3c000004e165f3a1b2c", |x| x.wwid.as_str());
            m.serial = format!(
                "SV{}",
                &wwid.get(wwid.len().saturating_sub(10)..).unwrap_or("0")
            );
            m.lun_id = Some(format!("0x{}", wwid.get(1..).unwrap_or(wwid)));
            m.firmware = "0840".into();
            m.rotation_rpm = 7200;
            m.power_on_s = up_s + 900 * 86_400;
            m.temperature_c = 0;
        } else {
            m = blank(DriveProtocol::Scsi, &mut rng, up_s);
            m.vendor = d.vendor.clone();
            m.model = d.model.clone();
            m.serial = format!(
                "ZL2{}0000C{}",
                alnum(&mut rng, 5),
                rng.int(1000_0000, 9999_9999)
            );
            m.wwn = Some(seagate_wwn(&mut rng));
            m.firmware = "E004".into();
            m.rotation_rpm = if d.rotational { 7200 } else { 0 };
        }
        m.capacity_bytes = if m.protocol == DriveProtocol::Nvme {
            bytes.max(NVME_3T84 / 2)
        } else {
            bytes
        };
        m.gb_read = d.c.r_sect as f64 * 512.0 / 1e9;
        m.gb_written = d.c.w_sect as f64 * 512.0 / 1e9;
        m.nvme.data_units_read = d.c.r_sect / 1000;
        m.nvme.data_units_written = d.c.w_sect / 1000;
        m.nvme.host_reads = d.c.r_ios;
        m.nvme.host_writes = d.c.w_ios;
        h.drives.disks.insert(d.name.clone(), m);
    }
}

/// One second of every drive: powered on a second longer, the bytes the disk moved in the last
/// second counted (SCSI gigabytes processed, NVMe data units), rebuilds advance.
pub(super) fn tick_drives(h: &mut Host) {
    h.drives.tick();
    let Host {
        devices, drives, ..
    } = h;
    for d in devices.iter() {
        if let Some(m) = drives.disks.get_mut(&d.name) {
            let s = d.last;
            m.gb_read += s.r_sect as f64 * 512.0 / 1e9;
            m.gb_written += s.w_sect as f64 * 512.0 / 1e9;
            if m.protocol == DriveProtocol::Nvme {
                m.nvme.data_units_read += s.r_sect / 1000;
                m.nvme.data_units_written += s.w_sect / 1000;
                m.nvme.host_reads += s.r_ios;
                m.nvme.host_writes += s.w_ios;
            }
        }
    }
}
