//! `/sys/block/<dev>/…` and `/sys/dev/block/<major>:<minor>/…`: what a block device is, and its
//! tunables.
//!
//! Kernel documentation: `Documentation/ABI/stable/sysfs-block`, `Documentation/ABI/testing/
//! sysfs-block-dm`. Partitions do not appear in `/sys/block`; they are reached through
//! `/sys/dev/block/<major>:<minor>` (a link to `…/block/sda/sda1`), which exists for every
//! block device and carries a `partition` file only for partitions.

use crate::root::Root;

use super::SourceError;

/// What a block device is; the `kind` tag of the `disk` measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeviceKind {
    /// A whole SCSI/SATA/SAS/virtio disk.
    Disk,
    /// An NVMe namespace.
    Nvme,
    /// A partition of any disk.
    Part,
    /// A dm-multipath map (dm uuid `mpath-…`).
    Mpath,
    /// An LVM logical volume (dm uuid `LVM-…`).
    Lvm,
    /// Any other device-mapper device (crypt, raw dm, …).
    Dm,
    /// An MD RAID array.
    Md,
    /// A loop device.
    Loop,
}

impl DeviceKind {
    /// The tag value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disk => "disk",
            Self::Nvme => "nvme",
            Self::Part => "part",
            Self::Mpath => "mpath",
            Self::Lvm => "lvm",
            Self::Dm => "dm",
            Self::Md => "md",
            Self::Loop => "loop",
        }
    }
}

/// Identity of a block device: read when it first appears, not every second.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BlockInfo {
    /// `dm/name` for device-mapper devices (`mpatha`, `vg0-lv_data`).
    pub dm_name: Option<String>,
    /// `dm/uuid` (`mpath-3600…`, `LVM-…`, `CRYPT-…`).
    pub dm_uuid: Option<String>,
    /// Devices below this one (`slaves/`), sorted.
    pub slaves: Vec<String>,
    /// Devices stacked on this one (`holders/`), sorted.
    pub holders: Vec<String>,
    /// `queue/rotational`: true for spinning disks.
    pub rotational: Option<bool>,
    /// `size`, in 512-byte sectors.
    pub size_sectors: Option<u64>,
    /// Whether the device is a partition (has a `partition` file).
    pub partition: bool,
}

/// Block-layer tunables that sites tune per node and that drift (`queue/…`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tunables {
    /// `queue/read_ahead_kb`.
    pub read_ahead_kb: Option<u64>,
    /// The active I/O scheduler: the bracketed entry of `queue/scheduler` (`none` when it is the
    /// only entry).
    pub scheduler: Option<String>,
    /// `queue/nr_requests`.
    pub nr_requests: Option<u64>,
    /// `queue/max_sectors_kb`.
    pub max_sectors_kb: Option<u64>,
}

/// Classifies a device from its kernel name, dm uuid and whether it is a partition.
pub fn classify(name: &str, dm_uuid: Option<&str>, partition: bool) -> DeviceKind {
    let _ = (name, dm_uuid, partition);
    unimplemented!("classify")
}

/// The active scheduler in `queue/scheduler` text: `mq-deadline kyber [bfq] none` → `bfq`.
pub fn parse_scheduler(text: &str) -> Option<&str> {
    let _ = text;
    unimplemented!("parse_scheduler")
}

/// Reads the identity of device `name` with numbers `major:minor`. `Ok(None)` when the device has
/// vanished from sysfs.
pub fn read_info(
    root: &Root,
    name: &str,
    major: u32,
    minor: u32,
) -> Result<Option<BlockInfo>, SourceError> {
    let _ = (root, name, major, minor);
    unimplemented!("read_info")
}

/// Reads the tunables of device `major:minor`; `Ok(None)` when it has no `queue/` (partitions).
pub fn read_tunables(root: &Root, major: u32, minor: u32) -> Result<Option<Tunables>, SourceError> {
    let _ = (root, major, minor);
    unimplemented!("read_tunables")
}
