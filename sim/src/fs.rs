//! The host's mounted filesystems: `proc/self/mountinfo` and the numbers `statvfs(3)` would
//! give, in `run/statvfs.txt` (the agent's `[fs] statvfs_file`: a simulated mount point has no
//! real filesystem behind it).
//!
//! Every data device carries one filesystem: XFS on each multipath map (`/srv/<map>`, the
//! dCache/XRootD pool layout) and on each MD array (`/srv/<array>`), a ZFS dataset per pool
//! (`/<pool>`), ext4 on a worker node's scratch disk (`/scratch`), each 55–70 % full and
//! steady, plus the pseudo filesystems a systemd host mounts. `fs-filling` fills one pool
//! filesystem towards full in about ten hours and keeps another at 96.5 %.

use crate::model::{Host, Role};
use crate::scenario::Kind;

/// One mounted filesystem.
#[derive(Debug, Clone)]
pub struct SimFs {
    pub mount: String,
    pub fstype: String,
    pub source: String,
    pub major: u32,
    pub minor: u32,
    /// 4 KiB blocks.
    pub blocks: u64,
    pub used: f64,
    /// Blocks written (net) per second.
    pub rate: f64,
    pub files: u64,
    pub files_used: u64,
}

const BLOCK: u64 = 4096;

/// The filesystems of host `h` in scenario `kind`.
pub fn build(h: &Host, kind: Kind) -> Vec<SimFs> {
    let mut v = Vec::new();
    fn add(
        v: &mut Vec<SimFs>,
        mount: String,
        fstype: &str,
        source: String,
        devt: (u32, u32),
        bytes: u64,
    ) {
        let blocks = bytes / BLOCK;
        let share = 0.55 + 0.05 * (v.len() % 4) as f64;
        v.push(SimFs {
            mount,
            fstype: fstype.to_owned(),
            source,
            major: devt.0,
            minor: devt.1,
            blocks,
            used: blocks as f64 * share,
            rate: 0.0,
            files: blocks / 64,
            files_used: (blocks as f64 / 64.0 * share * 0.1) as u64,
        });
    }
    for m in &h.maps {
        if let Some(d) = h.dev(&m.dev) {
            add(
                &mut v,
                format!("/srv/{}", m.name),
                "xfs",
                format!("/dev/mapper/{}", m.name),
                (d.major, d.minor),
                d.size_sectors * 512,
            );
        }
    }
    for a in &h.arrays {
        if let Some(d) = h.dev(&a.name) {
            add(
                &mut v,
                format!("/srv/{}", a.name),
                "xfs",
                format!("/dev/{}", a.name),
                (d.major, d.minor),
                d.size_sectors * 512,
            );
        }
    }
    for (i, p) in h.pools.iter().enumerate() {
        add(
            &mut v,
            format!("/{}", p.name),
            "zfs",
            p.name.clone(),
            (0, 60 + i as u32),
            p.size_bytes,
        );
    }
    if v.is_empty() {
        if let Some(d) = h.devices.iter().find(|d| d.role == Role::Disk) {
            add(
                &mut v,
                "/scratch".into(),
                "ext4",
                format!("/dev/{}", d.name),
                (d.major, d.minor),
                d.size_sectors * 512,
            );
        }
    }
    if kind == Kind::FsFilling {
        if let Some(f) = v.first_mut() {
            // 15 % left, written at a net rate that fills it in ten hours.
            f.used = f.blocks as f64 * 0.85;
            f.rate = f.blocks as f64 * 0.15 / 36_000.0;
        }
        if let Some(f) = v.get_mut(1) {
            f.used = f.blocks as f64 * 0.965;
        }
    }
    v
}

/// One second: each filesystem grows by its rate, a little noise on the steady ones (files
/// written and deleted).
pub fn tick(fs: &mut [SimFs], h: &mut Host) {
    for f in fs {
        let noise = h.rng.range(-1.0, 1.0) * 2560.0; // ±10 MiB
        f.used = (f.used + f.rate + noise).clamp(0.0, f.blocks as f64);
    }
}

/// `/proc/self/mountinfo`.
pub fn mountinfo(fs: &[SimFs]) -> String {
    let mut s = String::from(
        "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw\n\
         23 1 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:6 - sysfs sysfs rw\n\
         24 1 0:5 / /dev rw,nosuid shared:2 - devtmpfs devtmpfs rw,size=131072k,mode=755\n\
         25 1 0:23 / /run rw,nosuid,nodev shared:21 - tmpfs tmpfs rw,mode=755\n\
         26 23 0:24 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw\n",
    );
    for (i, f) in fs.iter().enumerate() {
        s.push_str(&format!(
            "{} 1 {}:{} / {} rw,noatime shared:{} - {} {} rw\n",
            40 + i,
            f.major,
            f.minor,
            f.mount,
            30 + i,
            f.fstype,
            f.source
        ));
    }
    s
}

/// The agent's `statvfs_file`: mount point, frsize, blocks, bfree, bavail, files, ffree,
/// favail, read-only.
pub fn statvfs(fs: &[SimFs]) -> String {
    let mut s = String::from("# mount frsize blocks bfree bavail files ffree favail ro\n");
    for f in fs {
        let free = f.blocks.saturating_sub(f.used as u64);
        // XFS keeps nothing back for root; ext4 5 %.
        let reserved = if f.fstype == "ext4" { f.blocks / 20 } else { 0 };
        let ffree = f.files - f.files_used;
        s.push_str(&format!(
            "{} {BLOCK} {} {free} {} {} {ffree} {ffree} 0\n",
            f.mount,
            f.blocks,
            free.saturating_sub(reserved),
            f.files
        ));
    }
    s
}
