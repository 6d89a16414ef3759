//! `/sys/block/<dev>/…` and `/sys/dev/block/<major>:<minor>/…`: what a block device is, and its
//! tunables.
//!
//! Kernel documentation: `Documentation/ABI/stable/sysfs-block`, `Documentation/ABI/testing/
//! sysfs-block-dm`. Partitions do not appear in `/sys/block`; they are reached through
//! `/sys/dev/block/<major>:<minor>` (a link to `…/block/sda/sda1`), which exists for every
//! block device and carries a `partition` file only for partitions. A partition has no `queue/`
//! of its own: its rotational flag and tunables are its disk's (`<partition>/../queue`).
//!
//! Every file here is a single value with a trailing newline. Reading happens when a device
//! first appears (identity) or every few minutes (tunables), never in the 1 s loop.
//!
//! Some trees lack the `dev/block` link or have a dangling one (generated fixture hosts write
//! partition links one `../` too deep; some container runtimes mount a partial sysfs); for those
//! [`read_info`] falls back to `block/<name>` and `block/<disk>/<name>`, checking the `dev` file
//! so that a name now held by another device is not mistaken for the one asked about.

use crate::root::JoinSized;
use std::io;
use std::path::{Path, PathBuf};

use crate::root::{list_dir, read_value_into, read_value_optional, Dir, Root};

use super::{parse_u64, ParseError, SourceError};

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
///
/// The dm uuid prefix is the convention of the tool that created the map (multipathd `mpath-`,
/// LVM `LVM-`, kpartx `part<N>-<uuid of the whole map>`, cryptsetup `CRYPT-`); a kpartx map is a
/// partition even though it is a whole dm device to the kernel.
pub fn classify(name: &str, dm_uuid: Option<&str>, partition: bool) -> DeviceKind {
    if partition {
        return DeviceKind::Part;
    }
    if let Some(uuid) = dm_uuid.filter(|u| !u.is_empty()) {
        return if uuid.starts_with("mpath-") {
            DeviceKind::Mpath
        } else if uuid.starts_with("LVM-") {
            DeviceKind::Lvm
        } else if is_kpartx_uuid(uuid) {
            DeviceKind::Part
        } else {
            DeviceKind::Dm
        };
    }
    if name.starts_with("dm-") {
        DeviceKind::Dm
    } else if is_md_name(name) {
        DeviceKind::Md
    } else if name.starts_with("nvme") {
        DeviceKind::Nvme
    } else if name.starts_with("loop") {
        DeviceKind::Loop
    } else {
        DeviceKind::Disk
    }
}

/// `part1-mpath-3600…`: kpartx's uuid for partition 1 of a map.
fn is_kpartx_uuid(uuid: &str) -> bool {
    uuid.strip_prefix("part")
        .and_then(|rest| rest.split_once('-'))
        .is_some_and(|(n, base)| {
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && !base.is_empty()
        })
}

/// `md0`, `md127`, `md_d0` (old partitionable arrays), `md/…` (a named array as diskstats may
/// show it).
fn is_md_name(name: &str) -> bool {
    name.strip_prefix("md")
        .and_then(|rest| rest.chars().next())
        .is_some_and(|c| c.is_ascii_digit() || c == '_' || c == '/')
}

/// The active scheduler in `queue/scheduler` text: `mq-deadline kyber [bfq] none` → `bfq`.
///
/// A single entry without brackets (`none`, which is all dm and md devices offer) is the active
/// one; several without brackets, or none at all, is `None`.
pub fn parse_scheduler(text: &str) -> Option<&str> {
    let mut count = 0usize;
    let mut last = None;
    for tok in text.split_ascii_whitespace() {
        if let Some(active) = tok.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            return (!active.is_empty()).then_some(active);
        }
        count += 1;
        last = Some(tok);
    }
    if count == 1 {
        last
    } else {
        None
    }
}

/// Whether `path` is a directory (following links); missing or dangling is `false`.
fn is_dir(path: &Path) -> Result<bool, SourceError> {
    match std::fs::metadata(path) {
        Ok(meta) => Ok(meta.is_dir()),
        Err(e)
            if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            Ok(false)
        }
        Err(e) => Err(SourceError::io(path, e)),
    }
}

/// Reads a one-line text attribute without its trailing newline; `None` when absent or empty
/// (device-mapper prints an empty line for a map created without a uuid).
fn read_text(path: &Path) -> Result<Option<String>, SourceError> {
    Ok(read_value_optional(path)?.and_then(|mut text| {
        let len = text.trim_end_matches(['\n', '\r']).len();
        text.truncate(len);
        (!text.is_empty()).then_some(text)
    }))
}

/// Reads a one-number sysfs attribute; `None` when absent or empty, an error naming the file
/// when not a number.
pub(crate) fn read_number(path: &Path, buf: &mut String) -> Result<Option<u64>, SourceError> {
    if !read_value_into(path, buf)? {
        return Ok(None);
    }
    parse_number(buf).map_err(|e| SourceError::parse(path, e))
}

/// A one-number attribute's text: `None` when empty.
fn parse_number(text: &str) -> Result<Option<u64>, ParseError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    parse_u64(text)
        .map(Some)
        .ok_or_else(|| ParseError::new(1, text, "not an unsigned integer"))
}

/// Whether the `dev` file in `dir` names `major:minor` (true when there is no `dev` file).
fn dev_matches(dir: &Path, major: u32, minor: u32, buf: &mut String) -> Result<bool, SourceError> {
    if !read_value_into(&dir.join_sized("dev"), buf)? {
        return Ok(true);
    }
    let (maj, min) = buf.trim().split_once(':').unwrap_or_default();
    Ok(maj.parse() == Ok(major) && min.parse() == Ok(minor))
}

/// The sysfs directory of a block device, or `None` when it is not (or no longer) there.
fn device_dir(
    root: &Root,
    name: Option<&str>,
    major: u32,
    minor: u32,
    buf: &mut String,
) -> Result<Option<PathBuf>, SourceError> {
    let by_number = root.sys(&format!("dev/block/{major}:{minor}"));
    if is_dir(&by_number)? {
        return Ok(Some(by_number));
    }
    let Some(name) = name else {
        return Ok(None);
    };
    // sysfs spells a `/` in a kernel name as `!` (`cciss/c0d0` → `cciss!c0d0`).
    let name = name.replace('/', "!");
    if name.is_empty() || name == "." || name == ".." {
        return Ok(None);
    }
    let block = root.sys("block");
    let whole = block.join_sized(&name);
    if is_dir(&whole)? && dev_matches(&whole, major, minor, buf)? {
        return Ok(Some(whole));
    }
    // A partition lives in its disk's directory, and its name starts with the disk's.
    for disk in list_dir(&block)?.unwrap_or_default() {
        if disk.len() >= name.len() || !name.starts_with(disk.as_str()) {
            continue;
        }
        let part = block.join_sized(&disk).join_sized(&name);
        if is_dir(&part)? && dev_matches(&part, major, minor, buf)? {
            return Ok(Some(part));
        }
    }
    Ok(None)
}

/// Reads the identity of device `name` with numbers `major:minor`. `Ok(None)` when the device has
/// vanished from sysfs.
pub fn read_info(
    root: &Root,
    name: &str,
    major: u32,
    minor: u32,
) -> Result<Option<BlockInfo>, SourceError> {
    let mut buf = String::new();
    let Some(dir) = device_dir(root, Some(name), major, minor, &mut buf)? else {
        return Ok(None);
    };
    let partition = read_value_into(&dir.join_sized("partition"), &mut buf)?;
    // The kernel resolves `..` after following the dev/block link, so this is the disk's queue.
    let queue = if partition {
        dir.join_sized("../queue")
    } else {
        dir.join_sized("queue")
    };
    let info = BlockInfo {
        dm_name: read_text(&dir.join_sized("dm/name"))?,
        dm_uuid: read_text(&dir.join_sized("dm/uuid"))?,
        slaves: list_dir(&dir.join_sized("slaves"))?.unwrap_or_default(),
        holders: list_dir(&dir.join_sized("holders"))?.unwrap_or_default(),
        rotational: read_number(&queue.join_sized("rotational"), &mut buf)?.map(|r| r != 0),
        size_sectors: read_number(&dir.join_sized("size"), &mut buf)?,
        partition,
    };
    // A device removed while we read it left us with a half-empty answer: report it gone.
    if !is_dir(&dir)? {
        return Ok(None);
    }
    Ok(Some(info))
}

/// Reads the tunables of device `major:minor`; `Ok(None)` for a partition (its queue is its
/// disk's), a device without `queue/` or none of the four files, or one that is gone (so a
/// device vanishing mid-read writes no empty line). Every five minutes for every disk of the
/// host: the files are opened through the device's directory, opened once, not each by its
/// path through `/sys/dev/block`'s link (half the cost on a 250-disk server).
pub fn read_tunables(root: &Root, major: u32, minor: u32) -> Result<Option<Tunables>, SourceError> {
    let mut dir = Dir::new(root.sys(&format!("dev/block/{major}:{minor}")));
    let mut buf = String::new();
    if dir.read_value("partition", &mut buf)? {
        return Ok(None);
    }
    let scheduler = if dir.read_value("queue/scheduler", &mut buf)? {
        parse_scheduler(&buf).map(str::to_owned)
    } else {
        None
    };
    let mut number = |rel: &str| -> Result<Option<u64>, SourceError> {
        Ok(dir.parse_value(rel, &mut buf, parse_number)?.flatten())
    };
    let t = Tunables {
        read_ahead_kb: number("queue/read_ahead_kb")?,
        scheduler,
        nr_requests: number("queue/nr_requests")?,
        max_sectors_kb: number("queue/max_sectors_kb")?,
    };
    Ok((t != Tunables::default()).then_some(t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn server() -> Root {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sysfs/disk-server");
        Root::new(base.join("proc"), base.join("sys"))
    }

    fn info(name: &str, major: u32, minor: u32) -> BlockInfo {
        read_info(&server(), name, major, minor)
            .expect("readable")
            .unwrap_or_else(|| panic!("{name} {major}:{minor} is in the fixture tree"))
    }

    #[test]
    fn classify_by_uuid_name_and_partition_flag() {
        use DeviceKind::*;
        let cases: &[(&str, Option<&str>, bool, DeviceKind)] = &[
            ("sda", None, false, Disk),
            ("sdaa", None, false, Disk),
            ("vda", None, false, Disk),
            ("sda1", None, true, Part),
            ("nvme0n1", None, false, Nvme),
            ("nvme0n1p2", None, true, Part),
            ("loop7", None, false, Loop),
            ("md0", None, false, Md),
            ("md127", None, false, Md),
            ("md_d0", None, false, Md),
            ("md/raid6", None, false, Md),
            ("md127p1", None, true, Part),
            ("mdx", None, false, Disk),
            (
                "dm-0",
                Some("mpath-3600508b400105e210000900000490000"),
                false,
                Mpath,
            ),
            (
                "dm-1",
                Some("LVM-Q1n4BoVEcWBqQ5c8hGR6v3u1SrT2xZZ0u7wEFQwuHzVh1g1pMF8X5mvkDSbN3wq4"),
                false,
                Lvm,
            ),
            (
                "dm-2",
                Some("part1-mpath-3600508b400105e210000900000490000"),
                false,
                Part,
            ),
            ("dm-3", Some("part12-LVM-abc"), false, Part),
            ("dm-4", Some("CRYPT-LUKS2-0123456789abcdef-luks"), false, Dm),
            ("dm-5", Some(""), false, Dm),
            ("dm-6", None, false, Dm),
            ("dm-7", Some("partx-mpath-1"), false, Dm),
            ("dm-8", Some("part1-"), false, Dm),
            // Whatever the name, the partition flag wins.
            ("dm-9", Some("mpath-1"), true, Part),
            ("md0", None, true, Part),
        ];
        for &(name, uuid, partition, want) in cases {
            assert_eq!(
                classify(name, uuid, partition),
                want,
                "{name} {uuid:?} {partition}"
            );
        }
        assert_eq!(DeviceKind::Mpath.as_str(), "mpath");
    }

    #[test]
    fn scheduler_is_the_bracketed_entry() {
        assert_eq!(
            parse_scheduler("mq-deadline kyber [bfq] none\n"),
            Some("bfq")
        );
        assert_eq!(
            parse_scheduler("[none] mq-deadline kyber bfq \n"),
            Some("none")
        );
        assert_eq!(parse_scheduler("noop deadline [cfq] \n"), Some("cfq"));
        assert_eq!(parse_scheduler("none\n"), Some("none"));
        assert_eq!(parse_scheduler("[none]\n"), Some("none"));
        assert_eq!(parse_scheduler(""), None);
        assert_eq!(parse_scheduler(" \n"), None);
        assert_eq!(parse_scheduler("mq-deadline kyber\n"), None);
        assert_eq!(parse_scheduler("[] none"), None);
    }

    #[test]
    fn whole_disk() {
        let sda = info("sda", 8, 0);
        assert_eq!(
            sda,
            BlockInfo {
                dm_name: None,
                dm_uuid: None,
                slaves: vec![],
                holders: vec![],
                rotational: Some(false),
                size_sectors: Some(937_703_088),
                partition: false,
            }
        );
        let sdb = info("sdb", 8, 16);
        assert_eq!(
            (sdb.rotational, sdb.holders),
            (Some(true), vec!["dm-0".to_owned()])
        );
    }

    #[test]
    fn partition_takes_rotational_from_its_disk() {
        let sda1 = info("sda1", 8, 1);
        assert!(sda1.partition);
        assert_eq!(sda1.rotational, Some(false));
        assert_eq!(sda1.size_sectors, Some(2_097_152));
        assert_eq!(sda1.holders, ["md0"]);
        assert_eq!(classify("sda1", None, sda1.partition), DeviceKind::Part);
    }

    #[test]
    fn multipath_map_and_its_kpartx_partition() {
        let map = info("dm-0", 253, 0);
        assert_eq!(map.dm_name.as_deref(), Some("mpatha"));
        assert_eq!(map.dm_uuid.as_deref(), Some("mpath-35000c500a1000002"));
        assert_eq!(map.slaves, ["sdb", "sdc"]);
        assert_eq!(map.holders, ["dm-2"]);
        assert_eq!(map.rotational, Some(true));
        assert_eq!(
            classify("dm-0", map.dm_uuid.as_deref(), map.partition),
            DeviceKind::Mpath
        );
        let part = info("dm-2", 253, 2);
        assert_eq!(part.dm_name.as_deref(), Some("mpatha1"));
        assert_eq!(part.slaves, ["dm-0"]);
        assert!(
            !part.partition,
            "a kpartx map is a whole dm device to the kernel"
        );
        assert_eq!(
            classify("dm-2", part.dm_uuid.as_deref(), part.partition),
            DeviceKind::Part
        );
    }

    #[test]
    fn lvm_plain_dm_and_md() {
        let lv = info("dm-1", 253, 1);
        assert_eq!(lv.dm_name.as_deref(), Some("vg0-lv_data"));
        assert_eq!(lv.slaves, ["sda2"]);
        assert_eq!(
            classify("dm-1", lv.dm_uuid.as_deref(), false),
            DeviceKind::Lvm
        );
        let plain = info("dm-3", 253, 3);
        assert_eq!(
            (plain.dm_name.as_deref(), plain.dm_uuid.as_deref()),
            (Some("scratch"), None)
        );
        assert_eq!(
            classify("dm-3", plain.dm_uuid.as_deref(), false),
            DeviceKind::Dm
        );
        let md = info("md0", 9, 0);
        assert_eq!(
            (md.slaves.as_slice(), md.dm_name.as_deref()),
            (&["sda1".to_owned()][..], None)
        );
        assert_eq!(classify("md0", None, md.partition), DeviceKind::Md);
    }

    #[test]
    fn dangling_dev_link_falls_back_to_the_name() {
        // dev/block/259:1 points one directory too high, as mkhost.py writes partition links.
        let p = info("nvme0n1p1", 259, 1);
        assert!(p.partition);
        assert_eq!(
            (p.rotational, p.size_sectors),
            (Some(false), Some(3_750_746_800))
        );
    }

    #[test]
    fn vanished_or_renamed_devices_are_none() {
        let root = server();
        assert_eq!(read_info(&root, "sdz", 65, 160).expect("readable"), None);
        // Not at 8:99, and the sda that is there is 8:0: not the device asked about.
        assert_eq!(read_info(&root, "sda", 8, 99).expect("readable"), None);
        assert_eq!(read_info(&root, "..", 1, 1).expect("readable"), None);
        assert_eq!(read_info(&root, "", 1, 1).expect("readable"), None);
        let missing = Root::new("/nonexistent/proc", "/nonexistent/sys");
        assert_eq!(read_info(&missing, "sda", 8, 0).expect("readable"), None);
        assert_eq!(read_tunables(&missing, 8, 0).expect("readable"), None);
    }

    #[test]
    fn tunables_of_disks_dm_md_nvme_loop() {
        let root = server();
        let t = |maj, min| read_tunables(&root, maj, min).expect("readable");
        assert_eq!(
            t(8, 0),
            Some(Tunables {
                read_ahead_kb: Some(128),
                scheduler: Some("mq-deadline".to_owned()),
                nr_requests: Some(64),
                max_sectors_kb: Some(1280),
            })
        );
        assert_eq!(t(253, 0).and_then(|t| t.scheduler).as_deref(), Some("none"));
        let md = t(9, 0).expect("md0 has a queue");
        assert_eq!(
            (md.read_ahead_kb, md.max_sectors_kb),
            (Some(40960), Some(1024))
        );
        let nvme = t(259, 0).expect("nvme0n1 has a queue");
        assert_eq!(
            (nvme.scheduler.as_deref(), nvme.nr_requests),
            (Some("none"), Some(1023))
        );
        assert_eq!(t(7, 0).and_then(|t| t.scheduler).as_deref(), Some("none"));
    }

    #[test]
    fn partitions_have_no_tunables() {
        let root = server();
        assert_eq!(read_tunables(&root, 8, 1).expect("readable"), None);
        assert_eq!(read_tunables(&root, 259, 1).expect("readable"), None);
        assert_eq!(read_tunables(&root, 65, 160).expect("readable"), None);
    }

    #[test]
    fn malformed_number_is_an_error_naming_the_file() {
        let dir = std::env::temp_dir().join(format!("storwatch-sysblock-{}", std::process::id()));
        let disk = dir.join("sys/block/sdx");
        std::fs::create_dir_all(disk.join("queue")).expect("mkdir");
        std::fs::write(disk.join("dev"), "8:240\n").expect("write");
        std::fs::write(disk.join("size"), "12x\n").expect("write");
        std::fs::write(disk.join("queue/read_ahead_kb"), "lots\n").expect("write");
        let root = Root::new(dir.join("proc"), dir.join("sys"));
        let e = read_info(&root, "sdx", 8, 240).expect_err("bad size");
        assert!(e.to_string().contains("sdx/size"), "{e}");
        assert!(e.to_string().contains("not an unsigned integer"), "{e}");
        std::fs::create_dir_all(dir.join("sys/dev/block")).expect("mkdir");
        std::os::unix::fs::symlink("../../block/sdx", dir.join("sys/dev/block/8:240"))
            .expect("link");
        let e = read_tunables(&root, 8, 240).expect_err("bad read_ahead_kb");
        assert!(e.to_string().contains("8:240/queue/read_ahead_kb"), "{e}");
        assert!(e.to_string().contains("not an unsigned integer"), "{e}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    /// Needs a generated host: `python3 shared/bench/mkhost.py --root DIR` and
    /// `STORWATCH_FAKEHOST=DIR`. Every device in its diskstats must be found and classified as
    /// the generator made it.
    #[test]
    #[ignore = "needs a tree generated by mkhost.py in STORWATCH_FAKEHOST"]
    fn generated_host() {
        let dir =
            PathBuf::from(std::env::var("STORWATCH_FAKEHOST").expect("STORWATCH_FAKEHOST set"));
        let root = Root::new(dir.join("proc"), dir.join("sys"));
        let text = std::fs::read_to_string(root.proc("diskstats")).expect("diskstats");
        let rows = crate::sources::diskstats::parse(&text);
        assert!(rows.errors.is_empty(), "{:?}", rows.errors);
        for d in &rows.rows {
            let info = read_info(&root, d.name, d.major, d.minor)
                .expect("readable")
                .unwrap_or_else(|| panic!("{} {}:{} not found", d.name, d.major, d.minor));
            let kind = classify(d.name, info.dm_uuid.as_deref(), info.partition);
            let want = match d.name {
                n if n.starts_with("dm-") => DeviceKind::Mpath,
                n if n.starts_with("md") => DeviceKind::Md,
                n if info.partition && n.starts_with("sd") => DeviceKind::Part,
                _ => DeviceKind::Disk,
            };
            assert_eq!(kind, want, "{}", d.name);
            assert!(
                info.rotational.is_some() && info.size_sectors.is_some(),
                "{}: {info:?}",
                d.name
            );
            let tunables = read_tunables(&root, d.major, d.minor).expect("readable");
            assert_eq!(tunables.is_some(), !info.partition, "{}", d.name);
        }
    }

    /// The live host: every device in /proc/diskstats must be found in /sys.
    #[test]
    #[ignore = "reads the live host"]
    fn live_host() {
        let root = Root::default();
        let text = std::fs::read_to_string(root.proc("diskstats")).expect("diskstats");
        for d in crate::sources::diskstats::parse(&text).rows {
            let info = read_info(&root, d.name, d.major, d.minor).expect("readable");
            assert!(info.is_some(), "{} {}:{}", d.name, d.major, d.minor);
        }
    }

    proptest! {
        #[test]
        fn scheduler_never_panics(text in "\\PC*") {
            if let Some(s) = parse_scheduler(&text) {
                prop_assert!(!s.is_empty());
                prop_assert!(text.contains(s));
            }
        }

        #[test]
        fn classify_never_panics(name in "\\PC*", uuid in proptest::option::of("\\PC*"), part in any::<bool>()) {
            let _ = classify(&name, uuid.as_deref(), part);
        }
    }
}
