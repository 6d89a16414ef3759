//! What the host's storage is made of: devices and their tunables, multipath maps and paths,
//! MD arrays and members, zpools and vdevs.

use super::*;

/// Block-queue tunables (`/sys/block/<dev>/queue/*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tunables {
    pub read_ahead_kb: u64,
    /// The whole `scheduler` line, the active one in brackets.
    pub scheduler: String,
    pub nr_requests: u64,
    pub max_sectors_kb: u64,
}

/// What a block device is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// A whole disk (or LUN) used directly.
    Disk,
    /// One path (`sdX`) of the multipath map `map` (its dm name).
    Path { map: String },
    /// A dm-multipath map (`dm-N`).
    Map,
    /// An MD array.
    Md,
}

/// One block device.
#[derive(Debug, Clone)]
pub struct Device {
    pub name: String,
    pub major: u32,
    pub minor: u32,
    pub role: Role,
    pub rotational: bool,
    pub size_sectors: u64,
    pub svc: Service,
    pub merge_frac: f64,
    pub tunables: Tunables,
    /// SCSI vendor/model for `sd` devices.
    pub vendor: String,
    pub model: String,
    /// `/sys/block/<sd>/device/state`: `running`, `offline`.
    pub state: String,
    /// dm name (`mpatha`) and uuid for maps.
    pub dm_name: Option<String>,
    pub dm_uuid: Option<String>,
    /// Devices this one is built on (`slaves/`) and those built on it (`holders/`).
    pub slaves: Vec<String>,
    pub holders: Vec<String>,
    /// This second's demand, set by the scenario (maps, arrays and plain disks).
    pub demand: Demand,
    pub c: Counters,
    pub last: Second,
}

impl Device {
    /// A device with sensible defaults for its kind.
    pub fn new(name: &str, major: u32, minor: u32, role: Role, size_sectors: u64) -> Self {
        let sd = name.starts_with("sd");
        Self {
            name: name.to_owned(),
            major,
            minor,
            role,
            rotational: sd,
            size_sectors,
            svc: HDD_SEQ,
            merge_frac: 0.05,
            tunables: Tunables {
                read_ahead_kb: 8192,
                scheduler: if sd {
                    "[mq-deadline] kyber bfq none".to_owned()
                } else {
                    "none".to_owned()
                },
                nr_requests: if sd { 256 } else { 128 },
                max_sectors_kb: 1280,
            },
            vendor: "SEAGATE".to_owned(),
            model: "ST16000NM004J".to_owned(),
            state: "running".to_owned(),
            dm_name: None,
            dm_uuid: None,
            slaves: Vec::new(),
            holders: Vec::new(),
            demand: Demand::default(),
            c: Counters::default(),
            last: Second::default(),
        }
    }
}

/// One path of a multipath map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpathPath {
    /// Kernel name of the path device (`sdc`).
    pub dev: String,
    pub major: u32,
    pub minor: u32,
    /// Failed in the kernel's view (`F` in `dmsetup status`).
    pub failed: bool,
    /// The kernel's cumulative fail count.
    pub fail_count: u64,
}

/// A dm-multipath map: path groups in priority order (group 1 is the preferred one, as
/// multipathd orders them by ALUA priority).
#[derive(Debug, Clone)]
pub struct MpathMap {
    /// dm name (`mpatha`).
    pub name: String,
    /// Kernel name of the map device (`dm-0`).
    pub dev: String,
    pub wwid: String,
    pub size_sectors: u64,
    pub groups: Vec<Vec<MpathPath>>,
    /// 1-based group the kernel sends I/O to.
    pub active_group: usize,
    /// multipathd's `failback manual`: the map stays on its current group while that has a
    /// path up, instead of going back to the preferred group (`failback immediate`).
    pub manual_failback: bool,
}

impl MpathMap {
    /// The first group (in priority order) with a path up: where dm-multipath sends I/O, with
    /// immediate failback. With manual failback the current group is kept while it has a path
    /// up.
    pub fn choose_group(&mut self) {
        let current_up = self
            .groups
            .get(self.active_group.saturating_sub(1))
            .is_some_and(|g| g.iter().any(|p| !p.failed));
        if self.manual_failback && current_up {
            return;
        }
        self.active_group = self
            .groups
            .iter()
            .position(|g| g.iter().any(|p| !p.failed))
            .map_or(1, |i| i + 1);
    }
}

/// One member of an MD array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MdMember {
    pub dev: String,
    /// Role in the array (`slot`), `None` for a spare.
    pub slot: Option<u32>,
    /// The number in brackets in `/proc/mdstat` (the superblock's descriptor number).
    pub desc_nr: u32,
    /// `in_sync`, `faulty`, `spare` (a spare being rebuilt is `spare` until it is in sync).
    pub state: String,
    pub errors: u64,
}

/// A running resync/recovery.
#[derive(Debug, Clone, PartialEq)]
pub struct MdSync {
    /// `recover`, `resync`, `check`.
    pub action: String,
    /// Done so far, KiB per member.
    pub done_kb: f64,
    /// Speed, KiB/s (`sync_speed`).
    pub speed_kbps: f64,
}

/// An MD array.
#[derive(Debug, Clone)]
pub struct MdArray {
    /// `md0`.
    pub name: String,
    pub level: String,
    pub raid_disks: u32,
    pub parity: u32,
    pub chunk_kb: u64,
    /// Per-member size, KiB (`component_size`).
    pub component_kb: u64,
    pub members: Vec<MdMember>,
    pub sync: Option<MdSync>,
    pub mismatch_cnt: u64,
}

impl MdArray {
    /// Members that are out of the array or not yet in sync.
    pub fn degraded(&self) -> u32 {
        let in_sync = self
            .members
            .iter()
            .filter(|m| m.slot.is_some() && m.state == "in_sync")
            .count() as u32;
        self.raid_disks.saturating_sub(in_sync)
    }
}

/// One vdev in a pool's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vdev {
    pub name: String,
    pub state: String,
    pub read_errors: u64,
    pub write_errors: u64,
    pub cksum_errors: u64,
    /// Text after the counters (`(resilvering)`, `was /dev/…`).
    pub note: String,
    pub children: Vec<Vdev>,
}

impl Vdev {
    /// A leaf or interior vdev, healthy.
    pub fn new(name: &str, children: Vec<Vdev>) -> Self {
        Self {
            name: name.to_owned(),
            state: "ONLINE".to_owned(),
            read_errors: 0,
            write_errors: 0,
            cksum_errors: 0,
            note: String::new(),
            children,
        }
    }
}

/// A resilver or scrub in progress.
#[derive(Debug, Clone, PartialEq)]
pub struct ZScan {
    /// `resilver` or `scrub`.
    pub kind: String,
    /// Start, seconds since the epoch.
    pub start_epoch: u64,
    pub total_bytes: u64,
    pub scanned_bytes: f64,
    pub issued_bytes: f64,
    pub repaired_bytes: f64,
    /// Issue rate, bytes/s.
    pub issue_bps: f64,
    /// Scan (metadata walk) rate, bytes/s.
    pub scan_bps: f64,
}

/// A ZFS pool.
#[derive(Debug, Clone)]
pub struct Zpool {
    pub name: String,
    pub size_bytes: u64,
    pub alloc_bytes: u64,
    pub frag_pct: u64,
    pub health: String,
    pub root: Vdev,
    pub scan: Option<ZScan>,
    /// L2ARC devices (the `cache` section of `zpool status`).
    pub cache: Vec<Vdev>,
}
