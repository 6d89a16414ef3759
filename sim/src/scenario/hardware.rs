//! The hardware scenarios share: disk names and sizes, the OS disks, NICs, a disk server's
//! multipath maps and MD arrays, degraded paths, a JBOD.

use super::*;

/// Kernel name of the `i`-th SCSI disk (`sd_format_disk_name`: sda … sdz, sdaa …).
pub fn sd_name(i: usize) -> String {
    let mut s = String::new();
    let mut i = i + 1;
    while i > 0 {
        i -= 1;
        s.insert(0, char::from(b'a' + (i % 26) as u8));
        i /= 26;
    }
    format!("sd{s}")
}

/// Device numbers of the `i`-th SCSI disk (16 minors per disk, majors 8, 65–71, 128–135).
pub fn sd_devt(i: usize) -> (u32, u32) {
    const MAJORS: [u32; 16] = [
        8, 65, 66, 67, 68, 69, 70, 71, 128, 129, 130, 131, 132, 133, 134, 135,
    ];
    let major = MAJORS.get(i / 16).copied().unwrap_or(135);
    (major, (i % 16) as u32 * 16)
}

/// 16 TB SAS disk, in sectors.
pub(super) const HDD_16TB_SECT: u64 = 31_251_759_104;
/// 960 GB SATA SSD, in sectors.
pub(super) const SSD_960_SECT: u64 = 1_875_385_008;
/// One LUN: half of a 12 × 16 TB RAID6 set (10 data disks), in sectors.
pub(super) const LUN_SECT: u64 = 156_250_000_000;

pub(super) fn sd(i: usize, role: Role, size: u64, svc: Service) -> Device {
    let (major, minor) = sd_devt(i);
    let mut d = Device::new(&sd_name(i), major, minor, role, size);
    d.svc = svc;
    d
}

pub(super) fn os_disks(h: &mut Host) {
    for i in 0..2 {
        let mut d = sd(i, Role::Disk, SSD_960_SECT, SSD);
        d.rotational = false;
        d.vendor = "ATA".to_owned();
        d.model = "SAMSUNG MZ7L3960".to_owned();
        d.tunables.read_ahead_kb = 128;
        h.devices.push(d);
    }
}

pub(super) fn nics(h: &mut Host, data_mbps: u64, data_mtu: u64) {
    let nic = |name: &str, speed: Option<u64>, mtu: u64| Nic {
        name: name.to_owned(),
        speed_mbps: speed,
        mtu,
        carrier_changes: 2,
        demand: NetDemand::default(),
        c: Default::default(),
    };
    h.nics.push(nic("lo", None, 65536));
    h.nics.push(nic("eno1", Some(1000), 1500));
    h.nics.push(nic("ens1f0", Some(data_mbps), data_mtu));
}

/// The disk server: two OS SSDs, an external RAID enclosure with two 12-disk RAID6 sets
/// exported as 4 LUNs, each reached over two paths (one per controller) through dm-multipath
/// with ALUA; LUN affinity alternates the preferred controller. A 10 GbE data NIC.
pub(super) fn disk_server(h: &mut Host, read_ahead_kb: u64) {
    os_disks(h);
    let mut paths = Vec::new();
    for k in 0..4usize {
        let map = format!("mpath{}", char::from(b'a' + k as u8));
        let dm = format!("dm-{k}");
        let mut pair = Vec::new();
        for j in 0..2 {
            let mut p = sd(
                2 + 2 * k + j,
                Role::Path { map: map.clone() },
                LUN_SECT,
                RAID_LUN,
            );
            p.vendor = "NETAPP".to_owned();
            p.model = "INF-01-00".to_owned();
            p.tunables.read_ahead_kb = read_ahead_kb;
            p.holders = vec![dm.clone()];
            pair.push(MpathPath {
                dev: p.name.clone(),
                major: p.major,
                minor: p.minor,
                failed: false,
                fail_count: 0,
            });
            paths.push(p);
        }
        let wwid = format!("36d039ea0001a2b3c0000{:04x}65f3a1b2c", 0x4e1 + k);
        let mut d = Device::new(&dm, 253, k as u32, Role::Map, LUN_SECT);
        d.svc = RAID_LUN;
        d.rotational = true;
        d.dm_name = Some(map.clone());
        d.dm_uuid = Some(format!("mpath-{wwid}"));
        d.tunables.read_ahead_kb = read_ahead_kb;
        d.tunables.nr_requests = 256;
        d.slaves = pair.iter().map(|p| p.dev.clone()).collect();
        let (a, b) = match (pair.first(), pair.get(1)) {
            (Some(a), Some(b)) => (a.clone(), b.clone()),
            _ => continue,
        };
        let groups = if k % 2 == 0 {
            vec![vec![a], vec![b]]
        } else {
            vec![vec![b], vec![a]]
        };
        h.maps.push(MpathMap {
            name: map,
            dev: dm,
            wwid,
            size_sectors: LUN_SECT,
            groups,
            active_group: 1,
            manual_failback: false,
        });
        paths.push(d);
    }
    // diskstats order: sd devices first, then dm.
    let (mut sds, dms): (Vec<Device>, Vec<Device>) =
        paths.into_iter().partition(|d| d.name.starts_with("sd"));
    h.devices.append(&mut sds);
    h.devices.extend(dms);
    nics(h, 10_000, 9000);
}

/// multipath-degraded: `failback manual` on every map; controller B was restarted, so the
/// maps that prefer it (`mpathb`, `mpathd`) moved to controller A (group 2) and stay there with
/// both paths up. `mpathc`'s path through controller B (`sdh`) stayed down past
/// `dev_loss_tmo`: the kernel removed the SCSI device and multipathd reloaded the map without
/// it, leaving one path in one group.
pub(super) fn degrade_paths(h: &mut Host) {
    for m in &mut h.maps {
        m.manual_failback = true;
        if m.name == "mpathb" || m.name == "mpathd" {
            m.active_group = 2;
        }
    }
    let gone = "sdh";
    if let Some(m) = h.maps.iter_mut().find(|m| m.name == "mpathc") {
        for g in &mut m.groups {
            g.retain(|p| p.dev != gone);
        }
        m.groups.retain(|g| !g.is_empty());
    }
    h.devices.retain(|d| d.name != gone);
    for d in &mut h.devices {
        d.slaves.retain(|s| s != gone);
    }
}

/// multipath-hung: every path of map `name` failed, their SCSI devices offline (the enclosure's
/// two controller ports gone at once); the map keeps its table, `queue_if_no_path` included.
pub(super) fn lose_all_paths(h: &mut Host, name: &str) {
    let mut gone = Vec::new();
    if let Some(m) = h.maps.iter_mut().find(|m| m.name == name) {
        for p in m.groups.iter_mut().flatten() {
            p.failed = true;
            p.fail_count += 1;
            gone.push(p.dev.clone());
        }
    }
    for d in &mut h.devices {
        if gone.contains(&d.name) {
            d.state = "offline".to_owned();
        }
    }
}

/// Directly attached data disks `sdc…` (`n` of them) after the OS disks.
pub(super) fn jbod(h: &mut Host, n: usize) {
    os_disks(h);
    for i in 0..n {
        h.devices
            .push(sd(2 + i, Role::Disk, HDD_16TB_SECT, HDD_SEQ));
    }
    nics(h, 10_000, 9000);
}
