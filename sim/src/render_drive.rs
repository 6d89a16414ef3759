//! The drive-health and hardware-RAID tools' output, rendered from the simulated state: what
//! `smartctl --json -a` prints for each drive (ATA attributes, SCSI error counters, the NVMe
//! health log), `smartctl -l error` of a SAS disk, `smartctl --scan`, and the `storcli64 … J`
//! documents of a MegaRAID controller (`/call show all`, `/call/vall show all`,
//! `/call/eall/sall show all`, `/call/eall/sall show rebuild`, `/call/bbu show all`).
//!
//! The shapes are those of the real captures in `agent/fixtures/smartctl/` and
//! `agent/fixtures/storcli/` (smartctl 7.3, storcli 007.2807): the same keys, nesting and value
//! types, key order and indentation included (smartctl indents by two spaces, storcli by tabs
//! with `"key" : value`). The unit tests read every document back with the agent's own parsers.
//!
//! The stand-ins in `bin/` only `cat` files of `run/smartctl/` and `run/storcli/`, rewritten
//! each second ([`write_dynamic`]); sysfs carries what ties a virtual drive to its block device:
//! `device/wwid` (`naa.` + the VD's SCSI NAA id) and the SCSI address `host:channel:target:lun`
//! (target = VD number on the `megaraid_sas` host) as the name `device` links to
//! ([`write_static`]).

use std::io;

use crate::files::Tree;
use crate::model::{Controller, DriveProtocol, Host, Smart};

mod ata;
mod json;
mod smartctl;
mod storcli;

pub use json::{obj, s, Style, J};
pub use smartctl::*;
pub use storcli::*;

const SMARTCTL_SH: &str = r#"#!/bin/sh
# Stand-in for smartctl(8), written by storwatch-sim: prints the simulated drives' current
# state (kept up to date in ../run/smartctl/) as smartctl 7.3 does, for the calls the agent
# makes: --scan, --json -a -n standby [-d megaraid,N] DEVICE, -l error -n standby DEVICE.
run="$(dirname "$0")/../run/smartctl"
json=0 log='' did='' dev='' scan=0
while [ $# -gt 0 ]; do
  case $1 in
    --scan) scan=1 ;;
    --json|-j) json=1 ;;
    -a|-x|-H|-i) ;;
    -n) shift ;;
    -l) shift; log=$1 ;;
    -d) shift; case $1 in *megaraid,*) did=${1##*,} ;; esac ;;
    -*) echo "smartctl: storwatch-sim stand-in: unsupported option $1" >&2; exit 1 ;;
    *) dev=$1 ;;
  esac
  shift
done
if [ $scan = 1 ]; then cat "$run/scan.txt"; exit 0; fi
name=${dev#/dev/}
case $name in bus/*) name=bus${name#bus/} ;; esac
[ -n "$did" ] && name=$name.megaraid$did
if [ ! -f "$run/$name.json" ]; then
  echo "Smartctl open device: $dev failed: No such device" >&2
  exit 2
fi
if [ "$log" = error ]; then
  [ -f "$run/$name.error.txt" ] || { echo "smartctl: storwatch-sim stand-in: no error log of $dev" >&2; exit 4; }
  cat "$run/$name.error.txt"
  exit 0
fi
[ $json = 1 ] || { echo "smartctl: storwatch-sim stand-in: only --json output" >&2; exit 1; }
cat "$run/$name.json"
read -r code <"$run/$name.exit"
exit "$code"
"#;

const STORCLI_SH: &str = r#"#!/bin/sh
# Stand-in for storcli64, written by storwatch-sim: prints the simulated MegaRAID controller's
# current state (kept up to date in ../run/storcli/) as storcli 007.2807 does with J.
run="$(dirname "$0")/../run/storcli"
case "$*" in
  "/call show all J"|"/c0 show all J"|"/call show J"|"/c0 show J") cat "$run/show-all.json" ;;
  "/call/vall show all J"|"/c0/vall show all J"|"/call/vall show J"|"/c0/vall show J") cat "$run/vall-show-all.json" ;;
  "/call/eall/sall show all J"|"/c0/eall/sall show all J") cat "$run/eall-sall-show-all.json" ;;
  "/call/eall/sall show rebuild J"|"/c0/eall/sall show rebuild J") cat "$run/eall-sall-show-rebuild.json" ;;
  "/call/bbu show all J"|"/c0/bbu show all J"|"/call/bbu show J"|"/c0/bbu show J") cat "$run/bbu-show-all.json" ;;
  *) echo "storcli64: storwatch-sim stand-in: unsupported: $*" >&2; exit 1 ;;
esac
"#;

/// The `/proc/devices` of a host; with a MegaRAID controller its management device is listed
/// (what smartctl's `-d megaraid` needs, and what the agent looks for).
pub fn proc_devices(h: &Host) -> String {
    let mut t = String::from(
        "Character devices:\n  1 mem\n  4 /dev/vc/0\n  4 tty\n  4 ttyS\n  5 /dev/tty\n  5 /dev/console\n  5 /dev/ptmx\n  7 vcs\n 10 misc\n 13 input\n 21 sg\n 29 fb\n128 ptm\n136 pts\n180 usb\n188 ttyUSB\n189 usb_device\n",
    );
    if h.drives.controller.is_some() {
        t.push_str("238 megaraid_sas_ioctl\n");
    }
    t.push_str("239 nvme-generic\n240 nvme\n241 bsg\n242 watchdog\n243 ptp\n244 pps\n245 cec\n246 rtc\n247 dax\n248 dimmctl\n249 ndctl\n250 tpm\n251 hidraw\n252 ipmidev\n253 aux\n254 gpiochip\n\nBlock devices:\n  7 loop\n  8 sd\n  9 md\n 65 sd\n 66 sd\n 67 sd\n 68 sd\n 69 sd\n 70 sd\n 71 sd\n128 sd\n129 sd\n130 sd\n131 sd\n132 sd\n133 sd\n134 sd\n135 sd\n253 device-mapper\n254 mdp\n259 blkext\n");
    t
}

/// What does not change: the stand-ins, `/proc/devices`, and for disks with a SCSI address the
/// sysfs that ties them to it (`device` → `…/hostH/targetH:C:T/H:C:T:L`, `scsi_host/hostH/
/// proc_name`) and, for a controller's virtual drives, `device/wwid`. Called before the block
/// devices are written, so that `device/` is the link.
pub fn write_static(t: &mut Tree, h: &Host) -> io::Result<()> {
    t.script("bin/smartctl", SMARTCTL_SH)?;
    // storcli only where there is a controller: elsewhere it is not installed
    if h.drives.controller.is_some() {
        t.script("bin/storcli64", STORCLI_SH)?;
    }
    t.write("proc/devices", &proc_devices(h))?;
    for (dev, ((host, ch, tg, lun), driver)) in &h.drives.scsi {
        let addr = format!("{host}:{ch}:{tg}:{lun}");
        let pci = if driver == "megaraid_sas" {
            "pci0000:3a/0000:3a:00.0/0000:3b:00.0"
        } else {
            "pci0000:00/0000:00:17.0/ata1"
        };
        let dir = format!("sys/devices/{pci}/host{host}/target{host}:{ch}:{tg}/{addr}");
        t.write(&format!("{dir}/scsi_level"), "7\n")?;
        t.write(&format!("{dir}/type"), "0\n")?;
        // /sys/block/sdX/device -> the SCSI device, as the kernel links it
        t.link(
            &format!("../../devices/{pci}/host{host}/target{host}:{ch}:{tg}/{addr}"),
            &format!("sys/block/{dev}/device"),
        )?;
        t.write(
            &format!("sys/class/scsi_host/host{host}/proc_name"),
            &format!("{driver}\n"),
        )?;
        t.link(
            &format!("../../../../sys/block/{dev}/device"),
            &format!("sys/class/scsi_device/{addr}/device"),
        )?;
    }
    if let Some(c) = &h.drives.controller {
        for v in &c.vds {
            t.write(
                &format!("sys/block/{}/device/wwid", v.dev),
                &format!("naa.{}\n", v.naa_id),
            )?;
        }
    }
    Ok(())
}

/// What changes: every drive's smartctl answers, the controller's storcli documents and the
/// scan.
pub fn write_dynamic(t: &mut Tree, h: &Host) -> io::Result<()> {
    let minute = h.epoch_s / 60 * 60;
    let vds: Vec<&str> = h
        .drives
        .controller
        .iter()
        .flat_map(|c| c.vds.iter().map(|v| v.dev.as_str()))
        .collect();
    for d in &h.devices {
        if !(d.name.starts_with("sd") || d.name.starts_with("nvme")) {
            continue;
        }
        let path = format!("/dev/{}", d.name);
        let key = smartctl_key(&path, None);
        if vds.contains(&d.name.as_str()) {
            if changed(h, &key, 0) {
                t.write(
                    &format!("run/smartctl/{key}.json"),
                    &smartctl_vd_refused(&path),
                )?;
                t.write(&format!("run/smartctl/{key}.exit"), "2\n")?;
            }
            continue;
        }
        let Some(m) = h.drives.disks.get(&d.name) else {
            continue;
        };
        if !changed(h, &key, fingerprint(m, minute)) {
            continue;
        }
        let dtype = match m.protocol {
            DriveProtocol::Ata => "sat",
            DriveProtocol::Scsi => "scsi",
            DriveProtocol::Nvme => "nvme",
        };
        t.write(
            &format!("run/smartctl/{key}.json"),
            &smartctl_json(m, &path, dtype, &path, minute),
        )?;
        t.write(
            &format!("run/smartctl/{key}.exit"),
            &format!("{}\n", m.exit_status()),
        )?;
        if m.protocol == DriveProtocol::Scsi {
            t.write(
                &format!("run/smartctl/{key}.error.txt"),
                &smartctl_scsi_error_text(m),
            )?;
        }
    }
    if changed(h, "scan", h.devices.len() as u64) {
        t.write("run/smartctl/scan.txt", &smartctl_scan(h))?;
    }
    if let Some(c) = &h.drives.controller {
        let bus = format!("/dev/bus/{}", c.scsi_host);
        for p in &c.pds {
            let key = smartctl_key(&bus, Some(p.did));
            if !changed(h, &key, fingerprint(&p.smart, minute)) {
                continue;
            }
            let dtype = format!("sat+megaraid,{}", p.did);
            let info = format!("{bus} [megaraid_disk_{:02}] [SAT]", p.did);
            t.write(
                &format!("run/smartctl/{key}.json"),
                &smartctl_json(&p.smart, &bus, &dtype, &info, minute),
            )?;
            t.write(
                &format!("run/smartctl/{key}.exit"),
                &format!("{}\n", p.smart.exit_status()),
            )?;
        }
        if changed(h, "storcli", controller_fingerprint(c)) {
            t.write("run/storcli/show-all.json", &storcli_show_all(c))?;
            t.write("run/storcli/vall-show-all.json", &storcli_vall(c))?;
            t.write("run/storcli/eall-sall-show-all.json", &storcli_pds(c))?;
            t.write(
                "run/storcli/eall-sall-show-rebuild.json",
                &storcli_rebuild(c),
            )?;
            t.write("run/storcli/bbu-show-all.json", &storcli_bbu(c))?;
        }
    }
    Ok(())
}

/// Whether the output named `key` has to be rendered again: its inputs' fingerprint differs
/// from the last one rendered (rendering 25 drives' JSON every second would cost a disk
/// server's tree more than everything else).
fn changed(h: &Host, key: &str, fp: u64) -> bool {
    let mut seen = h.drives.rendered.borrow_mut();
    if seen.get(key) == Some(&fp) {
        return false;
    }
    seen.insert(key.to_owned(), fp);
    true
}

/// What a drive's smartctl output shows, hashed: its health (every counter, the verdict, the
/// temperature) at once, and the totals that grow with its I/O (bytes and commands, power-on
/// time) with the minute: a busy disk's file is rendered again once a minute, not every second.
fn fingerprint(m: &Smart, minute: u64) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut s = std::collections::hash_map::DefaultHasher::new();
    let n = &m.nvme;
    (
        minute,
        m.temperature_c,
        m.passed,
        m.power_cycles,
        (
            m.reallocated,
            m.reported_uncorrect,
            m.pending,
            m.offline_uncorrectable,
        ),
        (
            m.crc_errors,
            m.error_log_entries,
            m.grown_defects,
            m.non_medium,
        ),
        (
            m.uncorrected_read,
            m.uncorrected_write,
            m.uncorrected_verify,
        ),
    )
        .hash(&mut s);
    (
        n.percentage_used,
        n.available_spare,
        n.available_spare_threshold,
        n.media_errors,
        n.unsafe_shutdowns,
        n.warning_bits,
    )
        .hash(&mut s);
    s.finish()
}

/// What storcli shows of a controller, hashed: states, counters, temperatures, rebuild progress
/// and time left as printed, the battery.
fn controller_fingerprint(c: &Controller) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut s = std::collections::hash_map::DefaultHasher::new();
    c.roc_temperature_c.hash(&mut s);
    c.bbu
        .as_ref()
        .map(|b| (&b.state, b.temperature_c))
        .hash(&mut s);
    for p in &c.pds {
        (
            &p.state,
            p.dg,
            p.media_errors,
            p.other_errors,
            p.predictive_failures,
            p.smart_alert,
            p.smart.temperature_c,
        )
            .hash(&mut s);
        if let Some(r) = p.rebuild {
            let cap = p.smart.capacity_bytes as f64;
            let pct = (r.done_bytes / cap * 100.0).floor() as u64;
            let left_min = ((cap - r.done_bytes).max(0.0) / r.rate_bps.max(1.0) / 60.0) as u64;
            (pct, left_min).hash(&mut s);
        }
    }
    for v in &c.vds {
        (&v.members, v.write_back_configured).hash(&mut s);
    }
    s.finish()
}

#[cfg(test)]
mod tests;
