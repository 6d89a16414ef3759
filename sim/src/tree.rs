//! Writing the host's state under a root directory: `proc/`, `sys/`, `run/` (the tools'
//! current output) and `bin/` (the `zpool` and `dmsetup` stand-ins).
//!
//! Every file is written whole to a temporary name and renamed into place, so a reader sees
//! one version or the next, never half of one — except `device/state`, rewritten in place like
//! the sysfs attribute it stands for (see [`Tree::write_in_place`]). A file whose content did not change is not
//! rewritten: the static part of sysfs is written once.

use std::fs;
use std::io;

use crate::model::{Host, Role};
use crate::render;

pub use crate::files::{Tree, MARKER};

const ZPOOL_SH: &str = r#"#!/bin/sh
# Stand-in for zpool(8), written by storwatch-sim: prints the simulated pools' current state
# (kept up to date in ../run/) in the formats of OpenZFS 2.2, which has no `status -j`.
run="$(dirname "$0")/../run"
case "$*" in
  "status -p"|"status") cat "$run/zpool-status.txt" ;;
  "list -Hp") cat "$run/zpool-list.txt" ;;
  "status -j"*) echo "invalid option 'j'" >&2; echo "usage:" >&2; echo "	status [-c [script1,script2,...]] [-igLpPstvxD]  [-T d|u] [pool] ... [interval [count]]" >&2; exit 2 ;;
  *) echo "storwatch-sim zpool: unsupported: $*" >&2; exit 2 ;;
esac
"#;

const DMSETUP_SH: &str = r#"#!/bin/sh
# Stand-in for dmsetup(8), written by storwatch-sim: prints the simulated multipath maps'
# current status and table (kept up to date in ../run/).
run="$(dirname "$0")/../run"
case "$*" in
  "status --target multipath") cat "$run/dmsetup-status.txt" ;;
  "table --target multipath") cat "$run/dmsetup-table.txt" ;;
  *) echo "storwatch-sim dmsetup: unsupported: $*" >&2; exit 1 ;;
esac
"#;

/// Writes what does not change while the host runs: the block devices' identity, slaves and
/// holders, queue tunables, the NICs' link attributes, the host name and the tool stand-ins.
pub fn write_static(t: &mut Tree, h: &Host) -> io::Result<()> {
    t.write("host", &format!("{}\n", h.name))?;
    // first: a disk's `device/` may be a link to its SCSI device
    crate::render_drive::write_static(t, h)?;
    t.script("bin/zpool", ZPOOL_SH)?;
    t.script("bin/dmsetup", DMSETUP_SH)?;
    for d in &h.devices {
        let base = format!("sys/block/{}", d.name);
        t.write(
            &format!("{base}/dev"),
            &format!("{}:{}\n", d.major, d.minor),
        )?;
        t.write(&format!("{base}/size"), &format!("{}\n", d.size_sectors))?;
        t.write(&format!("{base}/ro"), "0\n")?;
        t.write(&format!("{base}/removable"), "0\n")?;
        let q = &d.tunables;
        let rot = if d.rotational { "1\n" } else { "0\n" };
        t.write(&format!("{base}/queue/rotational"), rot)?;
        t.write(
            &format!("{base}/queue/read_ahead_kb"),
            &format!("{}\n", q.read_ahead_kb),
        )?;
        t.write(
            &format!("{base}/queue/scheduler"),
            &format!("{}\n", q.scheduler),
        )?;
        t.write(
            &format!("{base}/queue/nr_requests"),
            &format!("{}\n", q.nr_requests),
        )?;
        t.write(
            &format!("{base}/queue/max_sectors_kb"),
            &format!("{}\n", q.max_sectors_kb),
        )?;
        t.write(&format!("{base}/queue/logical_block_size"), "512\n")?;
        t.write(
            &format!("{base}/queue/physical_block_size"),
            if d.rotational { "4096\n" } else { "512\n" },
        )?;
        fs::create_dir_all(t.root().join(format!("{base}/slaves")))?;
        fs::create_dir_all(t.root().join(format!("{base}/holders")))?;
        for s in &d.slaves {
            t.link(&format!("../../{s}"), &format!("{base}/slaves/{s}"))?;
        }
        for hd in &d.holders {
            t.link(&format!("../../{hd}"), &format!("{base}/holders/{hd}"))?;
        }
        if d.name.starts_with("sd") {
            t.write(
                &format!("{base}/device/vendor"),
                &format!("{:<8}\n", d.vendor),
            )?;
            t.write(
                &format!("{base}/device/model"),
                &format!("{:<16}\n", d.model),
            )?;
            t.write(&format!("{base}/device/queue_depth"), "64\n")?;
        }
        if d.role == Role::Map {
            if let Some(n) = &d.dm_name {
                t.write(&format!("{base}/dm/name"), &format!("{n}\n"))?;
            }
            if let Some(u) = &d.dm_uuid {
                t.write(&format!("{base}/dm/uuid"), &format!("{u}\n"))?;
            }
            t.write(&format!("{base}/dm/suspended"), "0\n")?;
        }
        t.link(
            &format!("../../block/{}", d.name),
            &format!("sys/dev/block/{}:{}", d.major, d.minor),
        )?;
    }
    for n in &h.nics {
        let base = format!("sys/class/net/{}", n.name);
        if let Some(s) = n.speed_mbps {
            t.write(&format!("{base}/speed"), &format!("{s}\n"))?;
            t.write(&format!("{base}/duplex"), "full\n")?;
            t.write(&format!("{base}/operstate"), "up\n")?;
            t.write(&format!("{base}/type"), "1\n")?;
        } else {
            t.write(&format!("{base}/operstate"), "unknown\n")?;
            t.write(&format!("{base}/type"), "772\n")?;
        }
        t.write(&format!("{base}/mtu"), &format!("{}\n", n.mtu))?;
        t.write(&format!("{base}/carrier"), "1\n")?;
    }
    Ok(())
}

/// Writes what changes every second.
pub fn write_dynamic(t: &mut Tree, h: &Host) -> io::Result<()> {
    t.write("proc/diskstats", &render::diskstats(h))?;
    t.write("proc/net/dev", &render::net_dev(&h.nics))?;
    t.write("proc/uptime", &render::uptime(h))?;
    t.write("proc/stat", &render::stat(h))?;
    t.write("proc/meminfo", &render::meminfo(h))?;
    t.write("proc/pressure/io", &render::pressure_io(h))?;
    t.write("proc/mdstat", &render::mdstat(h))?;
    for d in &h.devices {
        if d.name.starts_with("sd") {
            t.write_in_place(
                &format!("sys/block/{}/device/state", d.name),
                &format!("{}\n", d.state),
            )?;
        }
    }
    for n in &h.nics {
        t.write(
            &format!("sys/class/net/{}/carrier_changes", n.name),
            &format!("{}\n", n.carrier_changes),
        )?;
    }
    for a in &h.arrays {
        for (rel, text) in render::md_sysfs(a) {
            t.write(&format!("sys/block/{}/md/{rel}", a.name), &text)?;
        }
    }
    crate::render_drive::write_dynamic(t, h)?;
    t.write("run/dmsetup-status.txt", &render::dmsetup_status(&h.maps))?;
    t.write("run/dmsetup-table.txt", &render::dmsetup_table(&h.maps))?;
    t.write(
        "run/zpool-status.txt",
        &render::zpool_status(&h.pools, h.epoch_s),
    )?;
    t.write("run/zpool-list.txt", &render::zpool_list(&h.pools))?;
    for p in &h.pools {
        t.write(
            &format!("proc/spl/kstat/zfs/{}/state", p.name),
            &format!("{}\n", p.health),
        )?;
    }
    if let Some(cg) = &h.cgroups {
        for dir in &cg.removed {
            t.remove_dir(&format!("{}/{dir}", crate::render_cgroup::MOUNT))?;
        }
        for (rel, text) in crate::render_cgroup::files(cg) {
            t.write(&rel, &text)?;
        }
    }
    Ok(())
}
