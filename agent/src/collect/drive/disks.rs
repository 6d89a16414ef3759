//! The disks a round reads and where each sits: the whole disks of `/sys/block`, the MD arrays
//! and multipath maps above each, the members of an array, and what smartctl is pointed at.
//!
//! **Where each disk sits, kept between rounds** ([`Places`]). Walking up a disk's `holders/`
//! reads a dozen files of each device on the way, most of them for a disk that nothing holds:
//! at 1,000 disks that walk was a seventh of the drive thread's round. What a walk finds can
//! only change when a device that holds others changes, and every holder is a `/sys/block`
//! entry of its own (an MD array, a dm map: not a drive) which the kernel links both ways
//! (`bd_link_disk_holder`: `holders/H` in the member, `slaves/M` in the holder, made and
//! removed together). So a round lists `/sys/block` once (the listing gives each entry's
//! inode number) and reads, of each entry that is not a drive, its `slaves/` and `holders/`
//! and its dm name and uuid; when none of that changed since the last round, a disk listed
//! under the same inode number keeps its place, and only a disk that is new, or listed
//! under another inode number (removed and made again: a disk replaced under its old name),
//! is walked. Any change among the holders (an array or map made, removed, renamed, a member
//! added or dropped) walks every disk again, once.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::DirEntryExt;

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
#[cfg(test)]
pub(super) fn whole_disks(root: &Root, filter: &Filter) -> Vec<String> {
    drives(block_entries(root), filter)
        .into_iter()
        .map(|(n, _)| n)
        .collect()
}

/// The entries of `/sys/block` with their inode numbers (the listing gives them: no `stat`);
/// none when it cannot be listed.
fn block_entries(root: &Root) -> Vec<(String, u64)> {
    let Ok(rd) = std::fs::read_dir(root.sys("block")) else {
        return Vec::new();
    };
    rd.filter_map(|e| {
        let e = e.ok()?;
        Some((e.file_name().into_string().ok()?, e.ino()))
    })
    .collect()
}

/// The drives among `entries`, without the excluded ones, sorted as a round reads them.
fn drives(mut entries: Vec<(String, u64)>, filter: &Filter) -> Vec<(String, u64)> {
    entries.retain(|(n, _)| is_drive(n) && filter.matches(n));
    entries.sort_by(|(a, _), (b, _)| (a.len(), a).cmp(&(b.len(), b)));
    entries
}

/// A `/sys/block` entry that is not a drive (an MD array, a dm map, a loop device), as a walk
/// up from a disk reads it: what it holds and is held by, and what names its kind.
#[derive(Debug, PartialEq)]
struct Holder {
    name: String,
    ino: u64,
    slaves: Option<Vec<String>>,
    holders: Option<Vec<String>>,
    dm_name: Option<String>,
    dm_uuid: Option<String>,
}

impl Holder {
    fn read(root: &Root, name: &str, ino: u64) -> Self {
        let dir = root.sys(&format!("block/{name}"));
        let list = |sub: &str| list_dir(&dir.join(sub)).ok().flatten();
        let text = |sub: &str| read_optional(&dir.join(sub)).ok().flatten();
        Self {
            name: name.to_owned(),
            ino,
            slaves: list("slaves"),
            holders: list("holders"),
            dm_name: text("dm/name"),
            dm_uuid: text("dm/uuid"),
        }
    }
}

/// Each disk's place (its MD arrays and multipath maps), kept between rounds; see the module's
/// documentation.
#[derive(Debug, Default)]
pub(super) struct Places {
    /// The entries of `/sys/block` that are not drives, as the last round read them, by name.
    holders: Vec<Holder>,
    /// Each disk of the last round: the inode number of its `/sys/block` entry, its place.
    known: BTreeMap<String, (u64, Placement)>,
    /// Disks walked up in the last round.
    pub(super) walked: usize,
}

impl Places {
    /// The whole disks of `/sys/block`, sorted, without the excluded ones, each with its place:
    /// what [`whole_disks`] and [`above`] of each would answer.
    pub(super) fn round(&mut self, root: &Root, filter: &Filter) -> Vec<(String, Placement)> {
        let entries = block_entries(root);
        let mut holders: Vec<Holder> = entries
            .iter()
            .filter(|(n, _)| !is_drive(n))
            .map(|(n, ino)| Holder::read(root, n, *ino))
            .collect();
        holders.sort_by(|a, b| a.name.cmp(&b.name));
        if holders != self.holders {
            self.known.clear();
            self.holders = holders;
        }
        self.walked = 0;
        let mut known = BTreeMap::new();
        let mut out = Vec::new();
        for (name, ino) in drives(entries, filter) {
            let place = match self.known.remove(&name) {
                Some((was, place)) if was == ino => place,
                _ => {
                    self.walked += 1;
                    above(root, &name)
                }
            };
            out.push((name.clone(), place.clone()));
            known.insert(name, (ino, place));
        }
        self.known = known;
        out
    }
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

    /// A sysfs tree a test changes as the kernel would: every holder linked both ways.
    struct Tree(std::path::PathBuf);

    impl Tree {
        fn block(&self) -> std::path::PathBuf {
            self.0.join("block")
        }

        /// A whole device of `/sys/block` (`dev` numbers from a counter).
        fn device(&self, name: &str, minor: u32) {
            let d = self.block().join(name);
            std::fs::create_dir_all(d.join("holders")).expect("mkdir");
            std::fs::create_dir_all(d.join("slaves")).expect("mkdir");
            std::fs::write(d.join("dev"), format!("8:{minor}\n")).expect("dev");
        }

        fn partition(&self, disk: &str, part: &str, minor: u32) {
            let d = self.block().join(disk).join(part);
            std::fs::create_dir_all(d.join("holders")).expect("mkdir");
            std::fs::write(d.join("dev"), format!("8:{minor}\n")).expect("dev");
            std::fs::write(d.join("partition"), "1\n").expect("partition");
        }

        fn dm(&self, name: &str, minor: u32, dm_name: &str, uuid: &str) {
            self.device(name, minor);
            let d = self.block().join(name).join("dm");
            std::fs::create_dir_all(&d).expect("mkdir");
            std::fs::write(d.join("name"), format!("{dm_name}\n")).expect("name");
            std::fs::write(d.join("uuid"), format!("{uuid}\n")).expect("uuid");
        }

        /// `member` (`sda` or `sda/sda1`) held by `holder`: both links.
        fn hold(&self, member: &str, holder: &str) {
            let leaf = member.rsplit('/').next().unwrap_or(member);
            std::os::unix::fs::symlink(
                format!("../../{holder}"),
                self.block().join(member).join("holders").join(holder),
            )
            .expect("holders link");
            std::os::unix::fs::symlink(
                format!("../../{member}"),
                self.block().join(holder).join("slaves").join(leaf),
            )
            .expect("slaves link");
        }

        fn release(&self, member: &str, holder: &str) {
            let leaf = member.rsplit('/').next().unwrap_or(member);
            std::fs::remove_file(self.block().join(member).join("holders").join(holder))
                .expect("holders link");
            std::fs::remove_file(self.block().join(holder).join("slaves").join(leaf))
                .expect("slaves link");
        }

        fn remove(&self, name: &str) {
            std::fs::remove_dir_all(self.block().join(name)).expect("rm");
        }
    }

    /// Every round's places are those of [`whole_disks`] and [`above`] from scratch, through
    /// arrays and maps made, grown, renamed and removed, disks added, replaced under their
    /// name and removed; and a round that finds the holders unchanged walks only the disks
    /// that are new or replaced (every disk, every round, before).
    #[test]
    fn each_round_walks_only_what_changed_and_places_as_from_scratch() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tree = Tree(dir.path().join("sys"));
        let root = Root::new(dir.path().join("proc"), dir.path().join("sys"));
        for (i, d) in ["sda", "sdb", "sdc", "sdd", "nvme0n1"].iter().enumerate() {
            tree.device(d, 16 * i as u32);
        }
        tree.partition("sda", "sda1", 1);
        tree.partition("sda", "sda2", 2);
        tree.device("md0", 900);
        tree.hold("sda/sda1", "md0");
        tree.hold("sdb", "md0");
        tree.dm("dm-0", 901, "mpatha", "mpath-3600a0b80001");
        tree.hold("sdc", "dm-0");
        tree.hold("sdd", "dm-0");
        // LVM on the map: not a tag, but walked through
        tree.dm("dm-1", 902, "vg-lv", "LVM-abc");
        tree.hold("dm-0", "dm-1");

        let mut places = Places::default();
        let filter = Filter::default();
        let mut check = |what: &str, walked: usize| {
            let got = places.round(&root, &filter);
            let scratch: Vec<(String, Placement)> = whole_disks(&root, &filter)
                .into_iter()
                .map(|n| {
                    let p = above(&root, &n);
                    (n, p)
                })
                .collect();
            assert_eq!(got, scratch, "{what}");
            assert_eq!(places.walked, walked, "{what}: disks walked");
            got.into_iter()
                .map(|(n, p)| format!("{n}:{}:{}", p.md, p.mpath))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let first = check("first round", 5);
        assert_eq!(
            first, "sda:md0: sdb:md0: sdc::mpatha sdd::mpatha nvme0n1::",
            "the tags themselves"
        );
        check("nothing changed", 0);

        // an array made on a disk that is also a map's path
        tree.device("md1", 903);
        tree.hold("sdc", "md1");
        let s = check("md1 made", 5);
        assert!(s.contains("sdc:md1:mpatha"), "{s}");
        check("nothing changed", 0);

        // a disk added: only it is walked; then an array grows onto it
        tree.device("sde", 80);
        check("sde added", 1);
        tree.hold("sde", "md0");
        let s = check("md0 grown onto sde", 6);
        assert!(s.contains("sde:md0:"), "{s}");

        // a map renamed (dm/name): no entry of a disk changed, the tag did
        std::fs::write(tree.block().join("dm-0/dm/name"), "mpathz\n").expect("rename");
        let s = check("dm-0 renamed", 6);
        assert!(s.contains("sdd::mpathz"), "{s}");

        // a partition's array on a new partition (a member added to an existing array)
        tree.partition("sda", "sda3", 3);
        check("sda3 made, holding nothing", 0);
        tree.hold("sda/sda3", "md1");
        let s = check("md1 grown onto sda3", 6);
        assert!(s.contains("sda:md0,md1:"), "{s}");

        // sdb replaced under its name (another inode), and back in md0
        // made while the old one is there: another inode (outside /sys/block, not listed)
        let new = dir.path().join("sdb.new");
        std::fs::create_dir_all(&new).expect("mkdir");
        tree.release("sdb", "md0");
        check("sdb dropped from md0", 6);
        tree.remove("sdb");
        std::fs::rename(&new, tree.block().join("sdb")).expect("rename");
        tree.device("sdb", 16);
        let s = check("sdb replaced", 1);
        assert!(s.contains("sdb::"), "{s}");
        tree.hold("sdb", "md0");
        let s = check("the new sdb in md0", 6);
        assert!(s.contains("sdb:md0:"), "{s}");

        // a map removed, then a disk removed
        tree.release("dm-0", "dm-1");
        tree.release("sdc", "dm-0");
        tree.release("sdd", "dm-0");
        tree.remove("dm-0");
        let s = check("dm-0 removed", 6);
        assert!(s.contains("sdc:md1: sdd::"), "{s}");
        tree.remove("sdd");
        let s = check("sdd removed", 0);
        assert!(!s.contains("sdd"), "{s}");

        // /sys/block gone, then back
        let moved = dir.path().join("block.away");
        std::fs::rename(tree.block(), &moved).expect("away");
        assert_eq!(check("no /sys/block", 0), "");
        std::fs::rename(&moved, tree.block()).expect("back");
        check("back", 5);
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
