//! The drive book: the drive collector's latest reading of each disk — identity, own annual
//! failure rate, failure probability — shared with the collectors that compute a rebuild risk
//! (MD, zpool, hardware RAID), and the zpool collector's vdev leaves shared back for the `pool`
//! tag of the `drive` lines.
//!
//! **Shape.** A [`DriveBook`] is a cheap clone of one `Arc`: [`crate::assemble::storage`] makes
//! one and hands a clone to each collector. The writer builds a new immutable [`BookView`] and
//! swaps it in; a reader takes the current view (an `Arc` clone). The lock is held only for
//! that swap or clone, never while a reading is taken or a risk computed, so neither the drive
//! collector's thread nor the sampling thread waits on the other.
//!
//! **Keys.** A disk is found by
//! * its kernel name (`sdc`, `nvme0n1`), or a partition of it (`sdc1`, `nvme0n1p2`): the MD
//!   members of `/proc/mdstat` and `/sys/block/mdX/md/dev-*/block`;
//! * a device path or `/dev/disk/by-id` name as `zpool status -P` prints a vdev leaf
//!   (`/dev/sdc1`, `/dev/disk/by-id/wwn-0x5000c500a1b2c3d4-part1`,
//!   `/dev/disk/by-id/ata-ST4000NM0033-9ZM170_Z1Z3ABCD-part1`, `scsi-35000c500…`,
//!   `nvme-…_SERIAL`): the partition suffix dropped, `wwn-0x…` and `scsi-3…` by world wide name,
//!   `ata-`/`scsi-SATA_`/`nvme-`/`usb-` names by the serial after the last `_`; any other path
//!   (`/dev/disk/by-vdev/…`) through its symbolic link, and any other bare name through
//!   `/dev/disk/by-vdev`, `by-partuuid` (TrueNAS), `by-id` and `by-path`, on the node's own `/dev`
//!   only (the sys root is `/sys`);
//! * its serial number or world wide name ([`DriveBook::by_serial`], [`DriveBook::by_wwn`],
//!   [`DriveBook::probability_by_serial`], …): the physical drives a RAID controller lists.
//!   Serials compare trimmed and without case; a WWN as hex digits without `0x` and case.
//!
//! A disk that was never read is not in the book: its caller keeps the flat rate for it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use crate::health::drive::{assess, DriveRisk};
use crate::health::risk::{disk_failure_probability, RiskModel};
use crate::sources::smartctl::DriveHealth;

/// What the book knows of one disk: its last good reading, assessed.
#[derive(Debug, Clone, PartialEq)]
pub struct BookEntry {
    /// The kernel name (`sdc`, `nvme0n1`), or the name of a disk behind a controller
    /// (`bus/0:megaraid,5`).
    pub device: String,
    /// Serial number as the drive reports it.
    pub serial: Option<String>,
    /// World wide name, 16 hex digits.
    pub wwn: Option<String>,
    /// Model name.
    pub model: Option<String>,
    /// The drive's own annual failure rate ([`DriveRisk::afr`]).
    pub afr: f64,
    /// A condition of the drive raises its rate above the flat one (pending, reallocated or
    /// uncorrectable sectors, media errors, a failing verdict, an NVMe critical warning or spare
    /// below threshold, …): it counts in `members_at_risk`. Age alone does not.
    pub at_risk: bool,
    /// The probability of the drive failing within `[risk] open_window_h` (the `drive` line's
    /// `failure_probability`).
    pub failure_probability: f64,
}

impl BookEntry {
    /// The entry for a disk read as `health`, its rate from `model`.
    pub fn assess(device: &str, health: &DriveHealth, model: &RiskModel) -> Self {
        let r: DriveRisk = assess(&model.drive, model.afr, Some(health));
        Self {
            device: device.to_owned(),
            serial: health.serial.clone(),
            wwn: health.wwn.clone(),
            model: health.model.clone(),
            afr: r.afr,
            at_risk: r.read && r.condition_multiplier > 1.0,
            failure_probability: r.failure_probability(model.open_window_h),
        }
    }

    /// The probability of this drive failing within `window_h` hours.
    pub fn probability(&self, window_h: f64) -> f64 {
        disk_failure_probability(self.afr, window_h)
    }
}

/// One state of the book, as published.
#[derive(Debug, Clone, Default)]
pub struct BookView {
    /// By device name.
    drives: BTreeMap<String, BookEntry>,
    /// Normalized serial → device.
    serials: BTreeMap<String, String>,
    /// Normalized WWN → device.
    wwns: BTreeMap<String, String>,
    /// Each pool's vdev leaves as `zpool status` names them.
    pools: BTreeMap<String, Vec<String>>,
    /// Normalized serial → the hardware virtual drive (`c0/v1`) the drive is a member of.
    vd_by_serial: BTreeMap<String, String>,
    /// Normalized WWN → the same.
    vd_by_wwn: BTreeMap<String, String>,
    /// Leaves are resolved through the links of this `/dev` (the node's own, when the sys root
    /// is `/sys`; none on a fixture tree).
    dev: Option<PathBuf>,
}

/// The shared handle (see the module).
#[derive(Debug, Clone, Default)]
pub struct DriveBook {
    inner: Arc<Mutex<Arc<BookView>>>,
}

impl DriveBook {
    /// An empty book. `own_dev`: vdev paths that are neither `/dev/<disk>` nor a by-id name
    /// are resolved through their links in this machine's `/dev` (true when the sys root is
    /// the node's own `/sys`).
    pub fn new(own_dev: bool) -> Self {
        Self::with_dev(own_dev.then(|| PathBuf::from("/dev")))
    }

    /// An empty book resolving leaves through the links under `dev` (a `/dev` tree), or
    /// through none.
    pub fn with_dev(dev: Option<PathBuf>) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Arc::new(BookView {
                dev,
                ..BookView::default()
            }))),
        }
    }

    /// The current state: an `Arc` clone under the lock.
    pub fn view(&self) -> Arc<BookView> {
        Arc::clone(&self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A new view from the current one, swapped in. The lock is held for the copy so that two
    /// writers (drives, pools) do not lose each other's change; readers only clone the `Arc`.
    fn update(&self, f: impl FnOnce(&mut BookView)) {
        let mut cur = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next = (**cur).clone();
        f(&mut next);
        *cur = Arc::new(next);
    }

    /// Replaces every drive with `entries` (the drive collector, after its readings changed).
    pub fn publish(&self, entries: Vec<BookEntry>) {
        let mut drives = BTreeMap::new();
        let mut serials = BTreeMap::new();
        let mut wwns = BTreeMap::new();
        for e in entries {
            if let Some(s) = e
                .serial
                .as_deref()
                .map(norm_serial)
                .filter(|s| !s.is_empty())
            {
                serials.insert(s, e.device.clone());
            }
            if let Some(w) = e.wwn.as_deref().map(norm_wwn).filter(|w| !w.is_empty()) {
                wwns.insert(w, e.device.clone());
            }
            drives.insert(e.device.clone(), e);
        }
        // Not through `update`: the drives of the current view would be copied only to be
        // dropped; the rest (pools, virtual drives) is copied under the lock as there.
        let mut cur = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let next = BookView {
            drives,
            serials,
            wwns,
            pools: cur.pools.clone(),
            vd_by_serial: cur.vd_by_serial.clone(),
            vd_by_wwn: cur.vd_by_wwn.clone(),
            dev: cur.dev.clone(),
        };
        *cur = Arc::new(next);
    }

    /// Replaces the pools' vdev leaves (the zpool collector, when `zpool status` was read).
    pub fn publish_pools(&self, pools: BTreeMap<String, Vec<String>>) {
        if self.view().pools != pools {
            self.update(|v| v.pools = pools);
        }
    }

    /// Replaces the members of the hardware virtual drives (the RAID controller collector, after
    /// each read): `(serial, wwn, vd)` of each physical drive in a virtual drive (`vd` as
    /// `c0/v1`). The `drive` line of a disk with that serial or WWN gets the `raid_vd` tag.
    pub fn publish_raid_vds(&self, members: Vec<(Option<String>, Option<String>, String)>) {
        let mut by_serial = BTreeMap::new();
        let mut by_wwn = BTreeMap::new();
        for (serial, wwn, vd) in members {
            if let Some(s) = serial.as_deref().map(norm_serial).filter(|s| !s.is_empty()) {
                by_serial.insert(s, vd.clone());
            }
            if let Some(w) = wwn.as_deref().map(norm_wwn).filter(|w| !w.is_empty()) {
                by_wwn.insert(w, vd);
            }
        }
        let v = self.view();
        if v.vd_by_serial != by_serial || v.vd_by_wwn != by_wwn {
            self.update(|v| {
                v.vd_by_serial = by_serial;
                v.vd_by_wwn = by_wwn;
            });
        }
    }

    /// The drive with this serial number.
    pub fn by_serial(&self, serial: &str) -> Option<BookEntry> {
        self.view().by_serial(serial).cloned()
    }

    /// The drive with this world wide name (`5000c500a1b2c3d4`, `0x5000C500A1B2C3D4`).
    pub fn by_wwn(&self, wwn: &str) -> Option<BookEntry> {
        self.view().by_wwn(wwn).cloned()
    }

    /// The annual failure rate of the drive with this serial: an entry for
    /// [`crate::health::risk::loss_probability_members`] (`None`: not read, the flat rate).
    pub fn afr_by_serial(&self, serial: &str) -> Option<f64> {
        self.view().by_serial(serial).map(|e| e.afr)
    }

    /// The annual failure rate of the drive with this world wide name.
    pub fn afr_by_wwn(&self, wwn: &str) -> Option<f64> {
        self.view().by_wwn(wwn).map(|e| e.afr)
    }

    /// The probability of the drive with this serial failing within `window_h` hours.
    pub fn probability_by_serial(&self, serial: &str, window_h: f64) -> Option<f64> {
        self.view()
            .by_serial(serial)
            .map(|e| e.probability(window_h))
    }

    /// The probability of the drive with this world wide name failing within `window_h` hours.
    pub fn probability_by_wwn(&self, wwn: &str, window_h: f64) -> Option<f64> {
        self.view().by_wwn(wwn).map(|e| e.probability(window_h))
    }
}

impl BookView {
    /// Every drive, by device name.
    pub fn drives(&self) -> impl Iterator<Item = &BookEntry> {
        self.drives.values()
    }

    /// The drive with this serial number.
    pub fn by_serial(&self, serial: &str) -> Option<&BookEntry> {
        self.serials
            .get(&norm_serial(serial))
            .and_then(|d| self.drives.get(d))
    }

    /// The drive with this world wide name.
    pub fn by_wwn(&self, wwn: &str) -> Option<&BookEntry> {
        self.wwns
            .get(&norm_wwn(wwn))
            .and_then(|d| self.drives.get(d))
    }

    /// The drive a kernel name is, or is a partition of (`sdc1` → `sdc`, `nvme0n1p2` →
    /// `nvme0n1`).
    pub fn by_device(&self, name: &str) -> Option<&BookEntry> {
        if let Some(e) = self.drives.get(name) {
            return Some(e);
        }
        // The longest drive name followed by a partition suffix. Only a split inside the
        // name's trailing digits (or before the `p` ahead of them) leaves one, and the splits
        // that do are contiguous from the end: a lookup for each of those few, not a scan of
        // every drive (each MD member of each report, at 1,000 drives 36,000 instructions).
        (0..name.len())
            .rev()
            .filter(|&i| name.is_char_boundary(i))
            .take_while(|&i| is_partition_suffix(&name[i..]))
            .find_map(|i| self.drives.get(&name[..i]))
    }

    /// The drive a vdev leaf or MD member names: a kernel name, a `/dev` path or a
    /// `/dev/disk/by-id` name, with or without a partition (see the module).
    pub fn resolve(&self, leaf: &str) -> Option<&BookEntry> {
        let base = leaf.rsplit('/').next().unwrap_or(leaf);
        let whole = strip_part(base);
        if let Some(hex) = whole.strip_prefix("wwn-") {
            return self.by_wwn(hex);
        }
        if let Some(e) = self.by_device(base) {
            return Some(e);
        }
        if let Some(rest) = whole.strip_prefix("scsi-3") {
            if let Some(e) = self.by_wwn(rest) {
                return Some(e);
            }
        }
        let by_id = ["ata-", "scsi-", "nvme-", "usb-", "sas-"]
            .iter()
            .any(|p| whole.starts_with(p));
        if by_id {
            if let Some((_, serial)) = whole.rsplit_once('_') {
                if let Some(e) = self.by_serial(serial) {
                    return Some(e);
                }
            }
        }
        // by-vdev, by-path, by-partuuid (TrueNAS names its leaves by partition UUID), …: the
        // link's target names the kernel device
        let dev = self.dev.as_deref()?;
        let links: Vec<PathBuf> = match leaf.strip_prefix("/dev/") {
            Some(rel) => vec![dev.join(rel)],
            None if !leaf.contains('/') && !leaf.is_empty() => [
                "disk/by-vdev",
                "disk/by-partuuid",
                "disk/by-id",
                "disk/by-path",
            ]
            .iter()
            .map(|d| dev.join(d).join(leaf))
            .collect(),
            None => Vec::new(),
        };
        for link in links {
            let Ok(target) = std::fs::canonicalize(&link) else {
                continue;
            };
            if let Some(name) = target.file_name().and_then(|n| n.to_str()) {
                if name != base {
                    return self.by_device(name);
                }
            }
        }
        None
    }

    /// The hardware virtual drive (`c0/v1`) a drive with this serial or WWN is a member of
    /// (empty: none known). The serial decides when both are known.
    pub fn raid_vd_of(&self, serial: Option<&str>, wwn: Option<&str>) -> &str {
        serial
            .and_then(|s| self.vd_by_serial.get(&norm_serial(s)))
            .or_else(|| wwn.and_then(|w| self.vd_by_wwn.get(&norm_wwn(w))))
            .map_or("", String::as_str)
    }

    /// The pools whose vdev leaves name drive `device`, comma-separated (empty: none).
    pub fn pools_of(&self, device: &str) -> String {
        self.pool_tags().remove(device).unwrap_or_default()
    }

    /// Every drive named by a pool's vdev leaves, with its pools comma-separated: each leaf
    /// resolved once (for the `drive` lines of one report).
    pub fn pool_tags(&self) -> BTreeMap<String, String> {
        let mut out: BTreeMap<String, String> = BTreeMap::new();
        for (pool, leaves) in &self.pools {
            let mut devices: Vec<&str> = leaves
                .iter()
                .filter_map(|l| self.resolve(l).map(|e| e.device.as_str()))
                .collect();
            devices.sort_unstable();
            devices.dedup();
            for d in devices {
                let tag = out.entry(d.to_owned()).or_default();
                if !tag.is_empty() {
                    tag.push(',');
                }
                tag.push_str(pool);
            }
        }
        out
    }
}

/// `1`, `12`, `p2`: what follows a disk's name in its partitions' names.
fn is_partition_suffix(s: &str) -> bool {
    let digits = s.strip_prefix('p').unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A by-id name without its `-partN`.
fn strip_part(name: &str) -> &str {
    match name.rsplit_once("-part") {
        Some((whole, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => whole,
        _ => name,
    }
}

fn norm_serial(s: &str) -> String {
    s.trim().to_ascii_uppercase()
}

fn norm_wwn(w: &str) -> String {
    let w = w.trim();
    let w = w
        .strip_prefix("0x")
        .or_else(|| w.strip_prefix("0X"))
        .unwrap_or(w);
    w.chars()
        .filter(char::is_ascii_hexdigit)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(device: &str, serial: &str, wwn: &str, afr: f64) -> BookEntry {
        BookEntry {
            device: device.into(),
            serial: Some(serial.into()),
            wwn: Some(wwn.into()),
            model: Some("ST4000NM0033-9ZM170".into()),
            afr,
            at_risk: afr > 0.02,
            failure_probability: disk_failure_probability(afr, 168.0),
        }
    }

    fn book() -> DriveBook {
        let b = DriveBook::new(false);
        b.publish(vec![
            entry("sdc", "Z1Z3ABCD", "5000c500a1b2c3d4", 0.02),
            entry("sdcd", "Z1Z3WXYZ", "5000c500a1b2c3ff", 0.5),
            entry("nvme0n1", "PHLJ123", "5cd2e4aabbccdd01", 0.03),
        ]);
        b
    }

    #[test]
    fn members_and_leaves_find_their_disk() {
        let v = book().view();
        let dev = |leaf: &str| v.resolve(leaf).map(|e| e.device.clone());
        assert_eq!(dev("sdc").as_deref(), Some("sdc"));
        assert_eq!(dev("sdc1").as_deref(), Some("sdc"));
        assert_eq!(
            dev("sdcd2").as_deref(),
            Some("sdcd"),
            "the longest disk name"
        );
        assert_eq!(dev("/dev/sdcd").as_deref(), Some("sdcd"));
        assert_eq!(dev("nvme0n1p3").as_deref(), Some("nvme0n1"));
        assert_eq!(
            dev("/dev/disk/by-id/wwn-0x5000c500a1b2c3d4-part1").as_deref(),
            Some("sdc")
        );
        assert_eq!(
            dev("/dev/disk/by-id/scsi-35000c500a1b2c3ff").as_deref(),
            Some("sdcd")
        );
        assert_eq!(
            dev("/dev/disk/by-id/ata-ST4000NM0033-9ZM170_Z1Z3WXYZ-part9").as_deref(),
            Some("sdcd")
        );
        assert_eq!(
            dev("nvme-INTEL_SSDPE2KX040T8_PHLJ123").as_deref(),
            Some("nvme0n1")
        );
        for none in [
            "sdd",
            "sdc1x",
            "sdcp",
            "wwn-0x5000c500a1b2c3d5",
            "/dev/mapper/mpatha",
        ] {
            assert_eq!(dev(none), None, "{none}");
        }
    }

    #[test]
    fn a_partition_finds_the_longest_disk_name_as_a_scan_of_every_drive_did() {
        let devices = [
            "sda", "sdaa", "sdc", "sdc1", "nvme0n1", "nvme0n12", "md1", "dm-3", "sdé",
        ];
        let b = DriveBook::new(false);
        b.publish(
            devices
                .iter()
                .enumerate()
                .map(|(i, d)| entry(d, &format!("S{i}"), &format!("5000c500{i:08x}"), 0.01))
                .collect(),
        );
        let v = b.view();
        // what `by_device` did before: every drive tried as a prefix, the longest kept
        let scan = |name: &str| {
            v.drives
                .values()
                .filter(|e| {
                    name.strip_prefix(e.device.as_str())
                        .is_some_and(is_partition_suffix)
                })
                .max_by_key(|e| e.device.len())
                .map(|e| e.device.clone())
        };
        let names = [
            "sda",
            "sda1",
            "sda12",
            "sdaa3",
            "sdab1",
            "sdc12",
            "sdc1p2",
            "sdcp",
            "sdc1x",
            "nvme0n1p3",
            "nvme0n123",
            "nvme0n12p1",
            "nvme0n1p",
            "md1p1",
            "md12",
            "dm-3",
            "dm-31",
            "sdé1",
            "sdé",
            "é1",
            "1",
            "p1",
            "",
            "sdz9",
        ];
        for name in names {
            let exact = v.drives.get(name).map(|e| e.device.clone());
            assert_eq!(
                v.by_device(name).map(|e| e.device.clone()),
                exact.or_else(|| scan(name)),
                "{name}"
            );
        }
        assert_eq!(
            v.by_device("sdc12").map(|e| e.device.as_str()),
            Some("sdc1")
        );
        assert_eq!(
            v.by_device("nvme0n123").map(|e| e.device.as_str()),
            Some("nvme0n12")
        );
        assert_eq!(v.by_device("sdé1").map(|e| e.device.as_str()), Some("sdé"));
    }

    #[test]
    fn other_names_through_the_links_of_dev() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dev = dir.path().join("dev");
        let mk = |rel: &str, target: &str| {
            let p = dev.join(rel);
            std::fs::create_dir_all(p.parent().unwrap_or(&dev)).unwrap_or_else(|e| panic!("{e}"));
            std::os::unix::fs::symlink(target, &p).unwrap_or_else(|e| panic!("{e}"));
        };
        std::fs::create_dir_all(&dev).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dev.join("sdcd2"), "").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dev.join("sdc1"), "").unwrap_or_else(|e| panic!("{e}"));
        mk(
            "disk/by-partuuid/dad98d96-3cbe-469e-b262-b8416dfc72ec",
            "../../sdcd2",
        );
        mk("disk/by-vdev/A3", "../../sdc1");
        let b = DriveBook::with_dev(Some(dev.clone()));
        b.publish(book().view().drives().cloned().collect());
        let v = b.view();
        let dev_of = |leaf: &str| v.resolve(leaf).map(|e| e.device.clone());
        assert_eq!(
            dev_of("dad98d96-3cbe-469e-b262-b8416dfc72ec").as_deref(),
            Some("sdcd")
        );
        assert_eq!(dev_of("A3").as_deref(), Some("sdc"));
        assert_eq!(dev_of("/dev/disk/by-vdev/A3").as_deref(), Some("sdc"));
        assert_eq!(dev_of("B7"), None);
        // without a /dev to look in, none of them
        let v = book().view();
        assert!(v.resolve("A3").is_none());
    }

    #[test]
    fn a_controller_finds_its_drives_by_serial_and_wwn() {
        let b = book();
        assert_eq!(b.afr_by_serial(" z1z3wxyz "), Some(0.5));
        assert_eq!(b.afr_by_wwn("0x5000C500A1B2C3FF"), Some(0.5));
        assert_eq!(
            b.by_wwn("5000c500a1b2c3d4").map(|e| e.device),
            Some("sdc".into())
        );
        let p = b
            .probability_by_serial("Z1Z3WXYZ", 24.0)
            .unwrap_or_default();
        assert!((p - disk_failure_probability(0.5, 24.0)).abs() < 1e-15);
        assert_eq!(b.probability_by_wwn("5000c500a1b2c3d5", 24.0), None);
        assert_eq!(b.afr_by_serial("nope"), None);
    }

    #[test]
    fn pools_name_their_disks_and_a_reader_keeps_its_view() {
        let b = book();
        let before = b.view();
        let mut pools = BTreeMap::new();
        pools.insert(
            "tank".to_owned(),
            vec![
                "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4-part1".to_owned(),
                "/dev/sdcd1".to_owned(),
            ],
        );
        pools.insert("backup".to_owned(), vec!["sdcd2".to_owned()]);
        b.publish_pools(pools);
        let v = b.view();
        assert_eq!(v.pools_of("sdc"), "tank");
        assert_eq!(v.pools_of("sdcd"), "backup,tank");
        assert_eq!(v.pools_of("nvme0n1"), "");
        // a view taken earlier is not changed under its reader
        assert_eq!(before.pools_of("sdc"), "");
        // a new publication of the drives keeps the pools
        b.publish(vec![entry("sdc", "Z1Z3ABCD", "5000c500a1b2c3d4", 0.02)]);
        assert_eq!(b.view().pools_of("sdc"), "tank");
        assert_eq!(b.view().pools_of("sdcd"), "");
    }

    #[test]
    fn a_controller_names_the_virtual_drive_of_its_disks() {
        let b = book();
        b.publish_raid_vds(vec![
            (Some(" z1z3abcd".into()), None, "c0/v1".into()),
            (None, Some("0x5000C500A1B2C3FF".into()), "c0/v2".into()),
        ]);
        let v = b.view();
        assert_eq!(v.raid_vd_of(Some("Z1Z3ABCD"), None), "c0/v1");
        assert_eq!(
            v.raid_vd_of(Some("Z1Z3WXYZ"), Some("5000c500a1b2c3ff")),
            "c0/v2"
        );
        assert_eq!(v.raid_vd_of(Some("PHLJ123"), None), "");
        assert_eq!(v.raid_vd_of(None, None), "");
        // the drives stay as published
        assert_eq!(b.afr_by_serial("Z1Z3WXYZ"), Some(0.5));
    }
}
