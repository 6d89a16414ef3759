//! The disks a round reads and where each sits: the whole disks of `/sys/block`, the MD arrays
//! and multipath maps above each, the members of an array, and what smartctl is pointed at.

use std::collections::BTreeSet;

use crate::collect::fs::Placement;
use crate::filter::Filter;
use crate::root::{list_dir, read_optional, Root};
use crate::sources::sysblock::{self, DeviceKind};

/// Devices visited at most when walking up one disk's device stack.
const MAX_STACK: usize = 256;

/// What smartctl is pointed at for one disk.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Target {
    /// `/dev/sda`, `/dev/bus/0`.
    pub(super) path: String,
    /// `-d` when smartctl cannot find the type itself (`megaraid,1`).
    pub(super) device_type: Option<String>,
}

impl Target {
    /// How errors name it.
    pub(super) fn label(&self) -> String {
        match &self.device_type {
            Some(t) => format!("-d {t} {}", self.path),
            None => self.path.clone(),
        }
    }
}

/// Whether the kernel has a MegaRAID/PERC management device (`/proc/devices` lists
/// `megaraid_sas_ioctl` or `megadev`): what smartctl's `-d megaraid` needs.
pub(super) fn has_megaraid(root: &Root) -> bool {
    read_optional(&root.proc("devices"))
        .ok()
        .flatten()
        .is_some_and(|t| {
            t.lines().any(|l| {
                let name = l.split_whitespace().nth(1).unwrap_or_default();
                name.starts_with("megaraid_sas_ioctl") || name.starts_with("megadev")
            })
        })
}

/// `/dev/<name>`.
pub(super) fn device_path(name: &str) -> String {
    format!("/dev/{name}")
}

/// Whether a `/sys/block` name is a drive smartctl can read: `sd*` (SCSI, SATA, SAS) and NVMe
/// namespaces `nvme<ctrl>n<ns>`. Partitions are not listed in `/sys/block`; dm, md, loop,
/// zram and virtio disks are not drives with a SMART log.
pub(super) fn is_drive(name: &str) -> bool {
    if let Some(rest) = name.strip_prefix("sd") {
        return !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_lowercase());
    }
    if let Some(rest) = name.strip_prefix("nvme") {
        let Some((ctrl, ns)) = rest.split_once('n') else {
            return false;
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        return digits(ctrl) && digits(ns);
    }
    false
}

/// The whole disks of `/sys/block`, sorted, without the excluded ones. An unreadable
/// `/sys/block` is no disks.
pub(super) fn whole_disks(root: &Root, filter: &Filter) -> Vec<String> {
    let mut names: Vec<String> = list_dir(&root.sys("block"))
        .ok()
        .flatten()
        .unwrap_or_default()
        .into_iter()
        .filter(|n| is_drive(n) && filter.matches(n))
        .collect();
    names.sort_by(|a, b| (a.len(), a).cmp(&(b.len(), b)));
    names
}

/// `major:minor` of a whole device of `/sys/block`.
pub(super) fn devt(root: &Root, name: &str) -> Option<(u32, u32)> {
    let text = read_optional(&root.sys(&format!("block/{name}/dev"))).ok()??;
    let (a, b) = text.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The MD arrays and multipath maps built on disk `name` (or on its partitions), found by
/// walking up sysfs `holders/`: the same tags, in the same form (sorted, comma-separated; a map
/// by its dm name), as [`crate::collect::fs::place`] finds walking down from a filesystem.
pub(super) fn above(root: &Root, name: &str) -> Placement {
    let mut place = Placement {
        device: name.to_owned(),
        kind: "disk".to_owned(),
        ..Placement::default()
    };
    if name.starts_with("nvme") {
        place.kind = DeviceKind::Nvme.as_str().to_owned();
    }
    let mut md = BTreeSet::new();
    let mut mpath = BTreeSet::new();
    // The disk's partitions hold arrays as the disk itself does.
    let mut todo: Vec<String> = vec![name.to_owned()];
    let disk_dir = root.sys(&format!("block/{name}"));
    for entry in list_dir(&disk_dir).ok().flatten().unwrap_or_default() {
        if entry.starts_with(name) && disk_dir.join(&entry).join("partition").is_file() {
            todo.push(entry);
        }
    }
    let mut seen = BTreeSet::new();
    while let Some(n) = todo.pop() {
        if !seen.insert(n.clone()) || seen.len() > MAX_STACK {
            continue;
        }
        let numbers = devt(root, &n).or_else(|| {
            // a partition: its `dev` is in its disk's directory
            let text = read_optional(&disk_dir.join(&n).join("dev")).ok()??;
            let (a, b) = text.trim().split_once(':')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        });
        let Some((major, minor)) = numbers else {
            continue;
        };
        let Ok(Some(info)) = sysblock::read_info(root, &n, major, minor) else {
            continue;
        };
        if n != name {
            match sysblock::classify(&n, info.dm_uuid.as_deref(), info.partition) {
                DeviceKind::Md => {
                    md.insert(n.clone());
                }
                DeviceKind::Mpath => {
                    mpath.insert(info.dm_name.clone().unwrap_or_else(|| n.clone()));
                }
                _ => {}
            }
        }
        todo.extend(info.holders.iter().cloned());
    }
    place.md = md.into_iter().collect::<Vec<_>>().join(",");
    place.mpath = mpath.into_iter().collect::<Vec<_>>().join(",");
    place
}

/// The whole disks under MD array `array` (its `slaves/`, a partition counted as its disk),
/// among `disks`.
pub(super) fn array_disks<'a>(
    root: &Root,
    array: &str,
    disks: impl Iterator<Item = &'a String> + Clone,
) -> Vec<String> {
    let members = list_dir(&root.sys(&format!("block/{array}/slaves")))
        .ok()
        .flatten()
        .unwrap_or_default();
    let mut out = BTreeSet::new();
    for m in members {
        // The disk a partition is on: the longest disk name that starts its name.
        if let Some(d) = disks
            .clone()
            .filter(|d| m.starts_with(d.as_str()))
            .max_by_key(|d| d.len())
        {
            out.insert(d.clone());
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn drives_are_whole_sd_and_nvme_namespaces() {
        for yes in ["sda", "sdz", "sdaa", "nvme0n1", "nvme12n3"] {
            assert!(is_drive(yes), "{yes}");
        }
        for no in [
            "sda1",
            "sd",
            "nvme0n1p1",
            "nvme0",
            "nvme0c0n1",
            "dm-0",
            "md127",
            "loop0",
            "vda",
            "zram0",
            "sr0",
        ] {
            assert!(!is_drive(no), "{no}");
        }
    }

    #[test]
    fn the_disk_server_tree_places_its_disks() {
        let sys = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sysfs/disk-server/sys");
        let root = Root::new("/nonexistent", sys);
        assert_eq!(
            whole_disks(&root, &Filter::default()),
            ["sda", "sdb", "sdc", "nvme0n1"].map(String::from)
        );
        assert_eq!(
            whole_disks(&root, &Filter::excluding(&["sdc".into()])),
            ["sda", "sdb", "nvme0n1"].map(String::from)
        );
        let sda = above(&root, "sda");
        assert_eq!((sda.md.as_str(), sda.mpath.as_str()), ("md0", ""));
        let sdb = above(&root, "sdb");
        assert_eq!((sdb.md.as_str(), sdb.mpath.as_str()), ("", "mpatha"));
        let nvme = above(&root, "nvme0n1");
        assert_eq!((nvme.kind.as_str(), nvme.md.as_str()), ("nvme", ""));
        let disks = ["sda", "sdb", "sdc", "nvme0n1"].map(String::from);
        assert_eq!(array_disks(&root, "md0", disks.iter()), ["sda"]);
    }
}
