//! The zpool scenarios' pools: layouts, a resilver in progress, the pools' I/O.

use super::*;

/// The zpool-resilver host: twelve 16 TB disks in one raidz2 vdev (`data`), `sdj` dead and
/// being replaced by `sdo`, `sdf` returning bad data now and then.
pub(super) fn build_zpool(h: &mut Host) {
    jbod(h, 13);
    let mut leaves: Vec<Vdev> = (0..12)
        .map(|i| Vdev::new(&sd_name(2 + i), vec![]))
        .collect();
    if let Some(l) = leaves.get_mut(3) {
        l.cksum_errors = 3;
    }
    let size: u64 = 191_953_518_821_376;
    let alloc = size / 1000 * 871;
    h.pools.push(Zpool {
        name: "data".to_owned(),
        size_bytes: size,
        alloc_bytes: alloc,
        frag_pct: 41,
        health: "DEGRADED".to_owned(),
        root: resilvering_root(
            "data",
            "raidz2-0",
            leaves,
            Replacement {
                slot: 7,
                guid: "7786134019462245912",
                old_dev: "sdj",
                new_dev: "sdo",
            },
        ),
        cache: Vec::new(),
        scan: Some(resilver_scan(
            h.epoch_s,
            alloc,
            480e6,
            1.5e9,
            5 * 3600,
            10.0,
        )),
    });
    if let Some(d) = h.dev_mut("sdj") {
        d.state = "offline".to_owned();
    }
    for i in 0..13 {
        if let Some(d) = h.dev_mut(&sd_name(2 + i)) {
            d.holders.clear();
        }
    }
}

/// zpool-cache-faulted: pool `data`, one raidz2 vdev of 12 × 16 TB (`sdc`…`sdn`), ONLINE,
/// 62 % full; its L2ARC SSD `sdo` was FAULTED by ZFS after 41 write errors (`too many errors`),
/// so reads miss the cache. The pool holds all its data and reads ONLINE.
pub(super) fn build_zpool_cache_faulted(h: &mut Host) {
    jbod(h, 12);
    let mut ssd = sd(14, Role::Disk, SSD_960_SECT, SSD);
    ssd.rotational = false;
    ssd.vendor = "ATA".to_owned();
    ssd.model = "SAMSUNG MZ7L3960".to_owned();
    h.devices.push(ssd);
    let leaves: Vec<Vdev> = (0..12)
        .map(|i| Vdev::new(&sd_name(2 + i), vec![]))
        .collect();
    let root = Vdev::new("data", vec![Vdev::new("raidz2-0", leaves)]);
    let mut l2 = Vdev::new("sdo", vec![]);
    l2.state = "FAULTED".to_owned();
    l2.write_errors = 41;
    l2.note = "too many errors".to_owned();
    let size: u64 = 191_953_518_821_376;
    h.pools.push(Zpool {
        name: "data".to_owned(),
        size_bytes: size,
        alloc_bytes: size / 100 * 62,
        frag_pct: 18,
        health: "ONLINE".to_owned(),
        root,
        cache: vec![l2],
        scan: None,
    });
}

/// zpool-raidz1-resilver: pool `scratch`, one raidz1 vdev of 8 × 16 TB (`sdc`…`sdj`), 78 %
/// full; `sdg` died (UNAVAIL, `was /dev/sdg1`) and `replacing-4` resilvers onto `sdk` at
/// 300 MB/s issued (900 MB/s scanned), started 2 h before: until it finishes a read error on
/// any of the seven other disks loses data.
pub(super) fn build_zpool_raidz1(h: &mut Host) {
    jbod(h, 9);
    let leaves: Vec<Vdev> = (0..8).map(|i| Vdev::new(&sd_name(2 + i), vec![])).collect();
    let size: u64 = 127_969_012_547_584;
    let alloc = size / 100 * 78;
    h.pools.push(Zpool {
        name: "scratch".to_owned(),
        size_bytes: size,
        alloc_bytes: alloc,
        frag_pct: 23,
        health: "DEGRADED".to_owned(),
        root: resilvering_root(
            "scratch",
            "raidz1-0",
            leaves,
            Replacement {
                slot: 4,
                guid: "1412876650329401734",
                old_dev: "sdg",
                new_dev: "sdk",
            },
        ),
        cache: Vec::new(),
        scan: Some(resilver_scan(h.epoch_s, alloc, 300e6, 900e6, 2 * 3600, 7.0)),
    });
    if let Some(d) = h.dev_mut("sdg") {
        d.state = "offline".to_owned();
    }
}

/// A dead disk being replaced inside a top-level vdev.
pub(super) struct Replacement<'a> {
    /// Its position among the vdev's children.
    slot: usize,
    /// The GUID `zpool status` shows for the dead disk.
    guid: &'a str,
    /// The dead disk's device (`was /dev/<old_dev>1`).
    old_dev: &'a str,
    /// The disk resilvering in its place.
    new_dev: &'a str,
}

/// `root` → DEGRADED `top` → `leaves`, with `r.slot` turned into `replacing-N` of the UNAVAIL
/// old disk and the resilvering new one, as `zpool status` shows a `zpool replace` under way.
pub(super) fn resilvering_root(
    root: &str,
    top: &str,
    mut leaves: Vec<Vdev>,
    r: Replacement<'_>,
) -> Vdev {
    let mut old = Vdev::new(r.guid, vec![]);
    old.state = "UNAVAIL".to_owned();
    old.note = format!("was /dev/{}1", r.old_dev);
    let mut new = Vdev::new(r.new_dev, vec![]);
    new.note = "(resilvering)".to_owned();
    let mut replacing = Vdev::new(&format!("replacing-{}", r.slot), vec![old, new]);
    replacing.state = "DEGRADED".to_owned();
    if let Some(slot) = leaves.get_mut(r.slot) {
        *slot = replacing;
    }
    let mut top = Vdev::new(top, leaves);
    top.state = "DEGRADED".to_owned();
    let mut root = Vdev::new(root, vec![top]);
    root.state = "DEGRADED".to_owned();
    root
}

/// A resilver started `elapsed_s` before `now_epoch_s`, issuing `issue_bps` and scanning
/// `scan_bps`, having repaired 1/`repaired_share` of what it issued.
pub(super) fn resilver_scan(
    now_epoch_s: u64,
    alloc: u64,
    issue_bps: f64,
    scan_bps: f64,
    elapsed_s: u64,
    repaired_share: f64,
) -> ZScan {
    ZScan {
        kind: "resilver".to_owned(),
        start_epoch: now_epoch_s - elapsed_s,
        total_bytes: alloc,
        scanned_bytes: scan_bps * elapsed_s as f64,
        issued_bytes: issue_bps * elapsed_s as f64,
        repaired_bytes: issue_bps * elapsed_s as f64 / repaired_share,
        issue_bps,
        scan_bps,
    }
}

pub(super) fn leaves(v: &Vdev, out: &mut Vec<Vdev>) {
    if v.children.is_empty() {
        out.push(v.clone());
    }
    for c in &v.children {
        leaves(c, out);
    }
}

/// The pool scenarios other than zpool-resilver: a resilver reads every ONLINE leaf and writes
/// the new disk; the users read and write on top; a FAULTED or UNAVAIL leaf and a FAULTED cache
/// device get nothing.
pub(super) fn pool_io(h: &mut Host, tick: u64) {
    let mut all = Vec::new();
    let mut issue = 0.0;
    if let Some(p) = h.pools.first() {
        leaves(&p.root, &mut all);
        all.extend(p.cache.iter().cloned());
        issue = p.scan.as_ref().map_or(0.0, |s| s.issue_bps) / 1e6;
    }
    let readers = all
        .iter()
        .filter(|l| l.state == "ONLINE" && l.note.is_empty())
        .count()
        .max(1) as f64;
    let user = wave(tick as f64) * h.rng.noise(0.2);
    for l in &all {
        let d = if l.state != "ONLINE" {
            Demand::default()
        } else if l.note.contains("resilvering") {
            Demand::mbs(0.0, issue / readers, 1024.0, 1024.0)
        } else {
            Demand::mbs(issue / readers + 20.0 * user, 8.0 * user, 1024.0, 256.0)
        };
        h.demand(&l.name, d);
    }
    os_io(h);
    set_nic(h, "ens1f0", 80e6 * user, 220e6 * user, 0.0);
}

/// zpool-resilver: the resilver reads every surviving leaf and writes the new disk; the users'
/// I/O goes on; `sdf` gains a checksum error now and then.
pub(super) fn zpool_io(h: &mut Host, tick: u64, cksum_every: u64) {
    let issue = h
        .pools
        .first()
        .and_then(|p| p.scan.as_ref())
        .map_or(0.0, |s| s.issue_bps)
        / 1e6;
    let user = wave(tick as f64) * h.rng.noise(0.2);
    for i in 0..13 {
        let name = sd_name(2 + i);
        let d = match name.as_str() {
            "sdj" => Demand::default(),
            "sdo" => Demand::mbs(0.0, issue / 10.0, 1024.0, 1024.0),
            _ => Demand::mbs(issue / 11.0 + 20.0 * user, 8.0 * user, 1024.0, 256.0),
        };
        h.demand(&name, d);
    }
    os_io(h);
    set_nic(h, "ens1f0", 80e6 * user, 220e6 * user, 0.0);
    if tick > 0 && tick % cksum_every == 0 {
        if let Some(leaf) = h
            .pools
            .first_mut()
            .and_then(|p| p.root.children.first_mut())
            .and_then(|r| r.children.get_mut(3))
        {
            leaf.cksum_errors += 1;
        }
    }
}
