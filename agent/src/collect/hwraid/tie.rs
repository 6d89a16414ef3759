//! Which block device (`sdX`) each virtual drive is, read under the sys root so a fixture tree
//! tests it. Three ways, the first that answers wins:
//!
//! 1. **NAA id.** storcli's `SCSI NAA Id` of a VD (`/cx/vall show all`, `VDn Properties`) is the
//!    identifier the VD reports in its SCSI device identification page (VPD 0x83), which the
//!    kernel prints in `/sys/block/sdX/device/wwid` as `naa.<hex>`. Stable across reboots and
//!    controller order.
//! 2. **OS Drive Name.** storcli's own `OS Drive Name` (`/dev/sdb`), taken when
//!    `/sys/block/sdb` exists: storcli asked this kernel a moment ago.
//! 3. **SCSI address.** `megaraid_sas` exposes VD *n* as `H:2:n:0` (logical drives sit on the
//!    channels after the two physical ones; target = VD number, 128 per channel): with one
//!    `megaraid_sas` host (`/sys/class/scsi_host/hostH/proc_name`) and one controller, the disk
//!    whose `/sys/block/sdX/device` link ends in that address is the VD. With several
//!    controllers the host-to-controller order is not known and this way is not tried.
//!
//! A VD tied none of these ways has no `device` tag.

use std::collections::BTreeMap;

use crate::root::{list_dir, read_optional, Root};
use crate::sources::storcli::Controller;

/// `megaraid_sas`: logical drives start at this channel, with this many targets each.
const LD_FIRST_CHANNEL: u32 = 2;
const LD_PER_CHANNEL: u32 = 128;

/// One `sd*` disk's identity.
#[derive(Debug, Default)]
struct Disk {
    name: String,
    /// `wwid` without `naa.`, lower case.
    naa: Option<String>,
    /// `host:channel:target:lun`.
    hctl: Option<[u32; 4]>,
}

/// `c0/v1` → `sdb` for every VD of `ctls` that can be tied.
pub(super) fn devices(root: &Root, ctls: &[Controller]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let names: Vec<String> = list_dir(&root.sys("block"))
        .ok()
        .flatten()
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.starts_with("sd"))
        .collect();
    let disks: Vec<Disk> = names.iter().map(|n| disk(root, n)).collect();
    let hosts = megaraid_hosts(root);
    let one_host = (hosts.len() == 1 && ctls.len() == 1).then(|| hosts[0]);
    for c in ctls {
        let Some(n) = c.controller else { continue };
        for v in &c.virtual_drives {
            let by_naa = v.naa_id.as_deref().and_then(|id| {
                let id = normal_naa(id);
                disks.iter().find(|d| d.naa.as_deref() == Some(id.as_str()))
            });
            let by_name = || {
                let name = v.os_drive_name.as_deref()?.strip_prefix("/dev/")?;
                disks.iter().find(|d| d.name == name)
            };
            let by_hctl = || {
                let h = one_host?;
                let want = [
                    h,
                    LD_FIRST_CHANNEL + v.vd / LD_PER_CHANNEL,
                    v.vd % LD_PER_CHANNEL,
                    0,
                ];
                disks.iter().find(|d| d.hctl == Some(want))
            };
            if let Some(d) = by_naa.or_else(by_name).or_else(by_hctl) {
                out.insert(format!("c{n}/v{}", v.vd), d.name.clone());
            }
        }
    }
    out
}

fn disk(root: &Root, name: &str) -> Disk {
    let dev = root.sys(&format!("block/{name}/device"));
    let naa = read_optional(&dev.join("wwid"))
        .ok()
        .flatten()
        .and_then(|w| w.trim().strip_prefix("naa.").map(normal_naa));
    // `device` links to `…/0:2:1:0`; its `scsi_device/` names the same address.
    let hctl = std::fs::read_link(&dev)
        .ok()
        .and_then(|l| l.file_name().and_then(|f| f.to_str()).and_then(parse_hctl))
        .or_else(|| {
            list_dir(&dev.join("scsi_device"))
                .ok()
                .flatten()?
                .iter()
                .find_map(|e| parse_hctl(e))
        });
    Disk {
        name: name.to_owned(),
        naa,
        hctl,
    }
}

/// The numbers of the SCSI hosts the `megaraid_sas` driver runs.
fn megaraid_hosts(root: &Root) -> Vec<u32> {
    list_dir(&root.sys("class/scsi_host"))
        .ok()
        .flatten()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|h| {
            let n: u32 = h.strip_prefix("host")?.parse().ok()?;
            let driver = read_optional(&root.sys(&format!("class/scsi_host/{h}/proc_name")))
                .ok()
                .flatten()?;
            (driver.trim() == "megaraid_sas").then_some(n)
        })
        .collect()
}

fn normal_naa(id: &str) -> String {
    id.trim().trim_start_matches("0x").to_ascii_lowercase()
}

fn parse_hctl(s: &str) -> Option<[u32; 4]> {
    let mut it = s.split(':').map(|p| p.parse::<u32>().ok());
    let out = [it.next()??, it.next()??, it.next()??, it.next()??];
    it.next().is_none().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn vall() -> Vec<Controller> {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/storcli/cloudpods-c0-vall-show-all-7-vds-os-drive-name-wb-wt.json"),
        )
        .expect("fixture");
        crate::sources::storcli::parse(&text).expect("parses")
    }

    #[test]
    fn a_vd_is_tied_by_naa_id_then_os_name_then_scsi_address() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sys = dir.path();
        let mk = |name: &str, wwid: Option<&str>, hctl: &str| {
            let d = sys.join("devices/pci0/host0/target").join(hctl);
            std::fs::create_dir_all(&d).expect("dir");
            if let Some(w) = wwid {
                std::fs::write(d.join("wwid"), format!("{w}\n")).expect("wwid");
            }
            let b = sys.join("block").join(name);
            std::fs::create_dir_all(&b).expect("block");
            std::os::unix::fs::symlink(&d, b.join("device")).expect("link");
        };
        // v0's NAA id on a disk whose kernel name is not storcli's /dev/sda
        mk(
            "sdq",
            Some("naa.600605b010e943702a3372bf4d29f6a7"),
            "0:2:0:0",
        );
        // v1 by storcli's OS Drive Name (no wwid)
        mk("sdb", None, "0:2:1:0");
        std::fs::create_dir_all(sys.join("class/scsi_host/host0")).expect("host");
        std::fs::write(
            sys.join("class/scsi_host/host0/proc_name"),
            "megaraid_sas\n",
        )
        .expect("proc_name");
        let root = Root::new("/nonexistent", sys);
        let mut ctls = vall();
        let got = devices(&root, &ctls);
        assert_eq!(got.get("c0/v0").map(String::as_str), Some("sdq"));
        assert_eq!(got.get("c0/v1").map(String::as_str), Some("sdb"));
        assert_eq!(got.get("c0/v2"), None, "sdc is not in this tree");
        // without NAA id and name: by the address megaraid_sas gives VD 1
        for v in &mut ctls[0].virtual_drives {
            v.naa_id = None;
            v.os_drive_name = None;
        }
        let got = devices(&root, &ctls);
        assert_eq!(got.get("c0/v1").map(String::as_str), Some("sdb"));
        assert_eq!(got.get("c0/v0").map(String::as_str), Some("sdq"));
    }
}
