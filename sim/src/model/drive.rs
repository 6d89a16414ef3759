//! Drive health and hardware RAID: what `smartctl` reads from each disk (SMART attributes, SCSI
//! error counters, the NVMe health log) and what `storcli` shows of a MegaRAID controller (its
//! virtual drives, physical drives, rebuilds and battery).
//!
//! Every simulated disk has a [`Smart`] record (healthy by default, see
//! `scenario::hwraid::default_smart`); the drive scenarios change some of them as their incident
//! unfolds. `render_drive` turns this state into the tools' JSON, which the `bin/smartctl` and
//! `bin/storcli64` stand-ins print.

use std::collections::BTreeMap;

/// How smartctl talks to a drive (`device.protocol` of its JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriveProtocol {
    /// SATA, directly or behind a SAT layer (`sat`, `sat+megaraid,N`).
    Ata,
    /// SAS or a SCSI LUN (`scsi`).
    Scsi,
    /// An NVMe namespace (`nvme`).
    Nvme,
}

/// The NVMe SMART / health information log (log page 2).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NvmeLog {
    /// Share of the rated endurance used, percent; may pass 100 (up to 255).
    pub percentage_used: u64,
    /// Spare capacity left, percent.
    pub available_spare: u64,
    /// Below this the drive sets critical warning bit 0.
    pub available_spare_threshold: u64,
    pub media_errors: u64,
    pub unsafe_shutdowns: u64,
    /// Thousands of 512-byte units.
    pub data_units_read: u64,
    pub data_units_written: u64,
    pub host_reads: u64,
    pub host_writes: u64,
    pub controller_busy_min: u64,
    /// Bits other than 0 (spare) that the scenario sets (2: reliability degraded).
    pub warning_bits: u8,
}

impl NvmeLog {
    /// The `critical_warning` byte: bit 0 when the spare is below its threshold, plus the
    /// scenario's bits.
    pub fn critical_warning(&self) -> u8 {
        u8::from(self.available_spare < self.available_spare_threshold) | self.warning_bits
    }
}

/// What smartctl reads from one drive.
#[derive(Debug, Clone, PartialEq)]
pub struct Smart {
    pub protocol: DriveProtocol,
    /// ATA/NVMe model name; SCSI: vendor and product.
    pub vendor: String,
    pub model: String,
    pub serial: String,
    /// NAA 5 world wide name (64 bits); `None` for a SCSI LUN named by an NAA 6 id.
    pub wwn: Option<u64>,
    /// `logical_unit_id` of a SCSI LUN (`0x6…`).
    pub lun_id: Option<String>,
    pub firmware: String,
    pub capacity_bytes: u64,
    /// 0 for solid state.
    pub rotation_rpm: u32,
    pub power_on_s: u64,
    pub power_cycles: u64,
    pub temperature_c: i64,
    /// `smart_status.passed`.
    pub passed: bool,
    // ATA attributes (raw values)
    pub reallocated: u64,
    pub reported_uncorrect: u64,
    pub pending: u64,
    pub offline_uncorrectable: u64,
    pub crc_errors: u64,
    /// Entries in the ATA or NVMe error log (exit status bit 6).
    pub error_log_entries: u64,
    // SCSI
    pub grown_defects: u64,
    pub uncorrected_read: u64,
    pub uncorrected_write: u64,
    pub uncorrected_verify: u64,
    pub non_medium: u64,
    pub gb_read: f64,
    pub gb_written: f64,
    /// NVMe.
    pub nvme: NvmeLog,
}

impl Smart {
    /// smartctl's exit status for a successful read of this drive (smartctl(8): bit 3 the
    /// drive reports itself failing, bit 6 error-log entries).
    pub fn exit_status(&self) -> u8 {
        let mut s = 0;
        let failing = !self.passed
            || (self.protocol == DriveProtocol::Nvme && self.nvme.critical_warning() != 0);
        if failing {
            s |= 8;
        }
        if self.error_log_entries > 0 {
            s |= 64;
        }
        s
    }

    /// `smart_status.passed` as smartctl prints it: an NVMe drive with a critical warning fails.
    pub fn passed_now(&self) -> bool {
        self.passed && !(self.protocol == DriveProtocol::Nvme && self.nvme.critical_warning() != 0)
    }
}

/// A physical drive's rebuild in progress.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PdRebuild {
    /// Bytes rebuilt so far.
    pub done_bytes: f64,
    /// Bytes per second now.
    pub rate_bps: f64,
}

/// A physical drive behind the controller.
#[derive(Debug, Clone, PartialEq)]
pub struct Pd {
    pub eid: u32,
    pub slot: u32,
    /// Device id: the N of `smartctl -d megaraid,N`.
    pub did: u32,
    /// storcli's state: `Onln`, `Rbld`, `UBad`, `GHS`, `UGood`, `Offln`, …
    pub state: String,
    /// Drive group, when configured.
    pub dg: Option<u32>,
    /// Row within its drive group.
    pub row: Option<u32>,
    /// `Intf`, `Med`.
    pub interface: String,
    pub medium: String,
    pub media_errors: u64,
    pub other_errors: u64,
    pub predictive_failures: u64,
    pub smart_alert: bool,
    pub rebuild: Option<PdRebuild>,
    /// What smartctl reads through the controller.
    pub smart: Smart,
}

/// A virtual drive.
#[derive(Debug, Clone, PartialEq)]
pub struct Vd {
    pub dg: u32,
    pub vd: u32,
    pub name: String,
    /// `RAID6`, …
    pub level: String,
    /// Parity drives (2 for RAID6): members that may be missing before the data is.
    pub parity: u32,
    /// Members by row (indexes into [`Controller::pds`]).
    pub members: Vec<usize>,
    /// The block device the OS sees (`sdb`).
    pub dev: String,
    /// `SCSI NAA Id` (32 hex digits, NAA 6), also the disk's `device/wwid` as `naa.<id>`.
    pub naa_id: String,
    /// `Write Cache(initial setting)` is WriteBack.
    pub write_back_configured: bool,
    pub size_bytes: u64,
    pub strip_kb: u32,
}

/// BBU or CacheVault.
#[derive(Debug, Clone, PartialEq)]
pub struct Bbu {
    /// `iBBU09`, …
    pub model: String,
    /// `Optimal`, `Failed`, `Learning`, `Degraded`.
    pub state: String,
    pub temperature_c: i64,
}

/// A MegaRAID controller.
#[derive(Debug, Clone, PartialEq)]
pub struct Controller {
    /// `c0`'s number.
    pub number: u32,
    pub model: String,
    pub serial: String,
    pub firmware: String,
    /// SCSI host number of its driver (`/dev/bus/N` of `smartctl --scan`, `hostN` in sysfs).
    pub scsi_host: u32,
    pub roc_temperature_c: i64,
    pub bbu: Option<Bbu>,
    pub vds: Vec<Vd>,
    pub pds: Vec<Pd>,
}

impl Controller {
    /// A VD's state from its members (missing: not `Onln`, rebuilding ones included) as the
    /// firmware words it: `Optl`; `Pdgd` (partially degraded) while fewer are missing than it has
    /// parity (RAID6 with one gone: still fault tolerant); `Dgrd` when the missing ones use up
    /// its parity (RAID5 with one, RAID6 with two gone: no redundancy left); `OfLn` when more are
    /// missing than it has parity.
    pub fn vd_state(&self, v: &Vd) -> &'static str {
        let online = v
            .members
            .iter()
            .filter(|&&i| self.pds.get(i).is_some_and(|p| p.state == "Onln"))
            .count();
        let missing = v.members.len().saturating_sub(online);
        if missing == 0 {
            "Optl"
        } else if missing > v.parity as usize {
            "OfLn"
        } else if missing < v.parity as usize {
            "Pdgd"
        } else {
            "Dgrd"
        }
    }

    /// The write policy in effect: write-back only while the cache is protected.
    pub fn write_back_active(&self, v: &Vd) -> bool {
        v.write_back_configured && self.bbu.as_ref().is_some_and(|b| b.state == "Optimal")
    }

    /// `Cache` column of the VD list: read-ahead, write policy, direct I/O.
    pub fn cache(&self, v: &Vd) -> String {
        let w = if self.write_back_active(v) {
            "WB"
        } else {
            "WT"
        };
        format!("R{w}D")
    }

    /// `Controller Status`: `Needs Attention` while a VD is not optimal or the cache is not
    /// protected.
    pub fn status(&self) -> &'static str {
        let vds_ok = self.vds.iter().all(|v| self.vd_state(v) == "Optl");
        let bbu_ok = self.bbu.as_ref().is_none_or(|b| b.state == "Optimal");
        if vds_ok && bbu_ok {
            "Optimal"
        } else {
            "Needs Attention"
        }
    }

    /// One second: rebuilds advance; a finished one brings its drive online.
    pub fn tick(&mut self) {
        for p in &mut self.pds {
            if let Some(r) = &mut p.rebuild {
                r.done_bytes += r.rate_bps;
                if r.done_bytes >= p.smart.capacity_bytes as f64 {
                    p.rebuild = None;
                    p.state = "Onln".to_owned();
                }
            }
        }
    }
}

/// A SCSI device's address: host, channel, target, lun.
pub type ScsiAddr = (u32, u32, u32, u32);

/// Drive health and the RAID controller of a host.
#[derive(Debug, Clone, Default)]
pub struct Drives {
    /// SMART of each block device smartctl can open, by kernel name (`sda`, `nvme0n1`).
    pub disks: BTreeMap<String, Smart>,
    /// A hardware RAID controller: its VDs are block devices smartctl refuses.
    pub controller: Option<Controller>,
    /// SCSI address (host, channel, target, lun) and driver of block devices that have one
    /// written to sysfs.
    pub scsi: BTreeMap<String, (ScsiAddr, String)>,
    /// What the tree's drive and controller files were last rendered from (a fingerprint per
    /// file), so that an unchanged drive is not rendered again (`render_drive::write_dynamic`).
    pub rendered: std::cell::RefCell<std::collections::HashMap<String, u64>>,
}

impl Drives {
    /// One second: every drive has been powered on a second longer, rebuilds advance.
    pub fn tick(&mut self) {
        for s in self.disks.values_mut() {
            s.power_on_s += 1;
        }
        if let Some(c) = &mut self.controller {
            for p in &mut c.pds {
                p.smart.power_on_s += 1;
            }
            c.tick();
        }
    }

    /// The physical drive with device id `did`.
    pub fn pd_mut(&mut self, did: u32) -> Option<&mut Pd> {
        self.controller
            .as_mut()
            .and_then(|c| c.pds.iter_mut().find(|p| p.did == did))
    }
}
