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
//!
//! **Cost: what changed, not what exists.** A disk's identity (its `wwid` and `device` link)
//! is read when its entry in `/sys/block` is new, and kept from round to round after that:
//! each round lists `/sys/block` (one directory read, which gives each entry's inode number
//! too) and reads again only
//!
//! * an `sd*` name not listed the round before (a disk added, or re-plugged under a new name);
//! * a name listed under another inode number: the kernel removed that disk and made one of
//!   the same name again (sysfs never gives a new entry the number of an old one: a 64-bit id
//!   with a generation, or ids handed out in turn), so a disk replaced under its old name, or
//!   two disks swapping names, are read anew;
//! * the disks a VD is tied to, each round, so a tie found stale (the disk's `wwid` read anew
//!   after a rescan) is made again the same round.
//!
//! A disk no longer listed is forgotten. What this leaves: a disk tied to no VD whose `wwid`
//! changes in place (a rescan of the same kernel device, not a re-plug) is seen when its entry
//! changes; a fixture tree on a file system that reuses inode numbers can hide a replaced
//! untied disk the same way. A round with 1,000 disks and nothing changed reads 1 directory and
//! the few tied disks, not 1,000 × (`wwid`, `device` link).

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::os::unix::fs::DirEntryExt;

use crate::root::{list_dir, read_optional, Root};
use crate::sources::storcli::Controller;

/// `megaraid_sas`: logical drives start at this channel, with this many targets each.
const LD_FIRST_CHANNEL: u32 = 2;
const LD_PER_CHANNEL: u32 = 128;

/// One `sd*` disk's identity.
#[derive(Debug, Default, PartialEq)]
struct Disk {
    /// `wwid` without `naa.`, lower case.
    naa: Option<String>,
    /// `host:channel:target:lun`.
    hctl: Option<[u32; 4]>,
}

/// A disk's identity as last read, with the inode number of its `/sys/block` entry then.
#[derive(Debug)]
struct Known {
    ino: u64,
    disk: Disk,
    /// The round that last read it (not to be read twice in one).
    read_in: u64,
    /// The round that last listed it.
    listed: u64,
}

/// The disks' identities kept between rounds (one per monitor).
#[derive(Debug, Default)]
pub(super) struct Tie {
    /// `sdb` → its identity.
    known: BTreeMap<String, Known>,
    /// Rounds so far.
    round: u64,
    /// How many identities the last round read.
    #[cfg(test)]
    pub(super) read: usize,
}

impl Tie {
    /// `c0/v1` → `sdb` for every VD of `ctls` that can be tied.
    pub(super) fn devices(&mut self, root: &Root, ctls: &[Controller]) -> BTreeMap<String, String> {
        #[cfg(test)]
        {
            self.read = 0;
        }
        self.round += 1;
        // Updated in place: an unchanged disk costs a lookup, no map rebuilt.
        for (name, ino) in sd_entries(root) {
            match self.known.get_mut(&name) {
                Some(k) if k.ino == ino => k.listed = self.round,
                _ => {
                    let k = self.read_disk(root, &name, ino);
                    self.known.insert(name, k);
                }
            }
        }
        self.known.retain(|_, k| k.listed == self.round);
        let mut out = tie(&self.known, ctls, root);
        // The tied disks read again: a stale tie is made again now, not at the next change.
        let mut changed = false;
        let tied: Vec<String> = out.values().cloned().collect();
        for name in tied {
            let Some(ino) = self
                .known
                .get(&name)
                .filter(|k| k.read_in != self.round)
                .map(|k| k.ino)
            else {
                continue;
            };
            let k = self.read_disk(root, &name, ino);
            if self.known.get(&name).is_some_and(|old| old.disk != k.disk) {
                changed = true;
            }
            self.known.insert(name, k);
        }
        if changed {
            out = tie(&self.known, ctls, root);
        }
        out
    }

    fn read_disk(&mut self, root: &Root, name: &str, ino: u64) -> Known {
        #[cfg(test)]
        {
            self.read += 1;
        }
        Known {
            ino,
            disk: disk(root, name),
            read_in: self.round,
            listed: self.round,
        }
    }
}

/// Each VD of `ctls` tied to one of `disks`, the first way that answers.
fn tie(
    disks: &BTreeMap<String, Known>,
    ctls: &[Controller],
    root: &Root,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    // The hosts are listed only when a VD is left for the third way.
    let one_host = OnceCell::new();
    let one_host = || {
        *one_host.get_or_init(|| {
            let hosts = megaraid_hosts(root);
            (hosts.len() == 1 && ctls.len() == 1).then(|| hosts[0])
        })
    };
    for c in ctls {
        let Some(n) = c.controller else { continue };
        for v in &c.virtual_drives {
            let by_naa = v.naa_id.as_deref().and_then(|id| {
                let id = normal_naa(id);
                disks
                    .iter()
                    .find(|(_, k)| k.disk.naa.as_deref() == Some(id.as_str()))
            });
            let by_name = || {
                let name = v.os_drive_name.as_deref()?.strip_prefix("/dev/")?;
                disks.get_key_value(name)
            };
            let by_hctl = || {
                let h = one_host()?;
                let want = [
                    h,
                    LD_FIRST_CHANNEL + v.vd / LD_PER_CHANNEL,
                    v.vd % LD_PER_CHANNEL,
                    0,
                ];
                disks.iter().find(|(_, k)| k.disk.hctl == Some(want))
            };
            if let Some((name, _)) = by_naa.or_else(by_name).or_else(by_hctl) {
                out.insert(format!("c{n}/v{}", v.vd), name.clone());
            }
        }
    }
    out
}

/// The `sd*` entries of `/sys/block` with their inode numbers (the listing gives them: no
/// `stat`); none when it cannot be listed.
fn sd_entries(root: &Root) -> Vec<(String, u64)> {
    let Ok(rd) = std::fs::read_dir(root.sys("block")) else {
        return Vec::new();
    };
    rd.filter_map(|e| {
        let e = e.ok()?;
        let name = e.file_name().into_string().ok()?;
        name.starts_with("sd").then(|| (name, e.ino()))
    })
    .collect()
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
    Disk { naa, hctl }
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
        let got = Tie::default().devices(&root, &ctls);
        assert_eq!(got.get("c0/v0").map(String::as_str), Some("sdq"));
        assert_eq!(got.get("c0/v1").map(String::as_str), Some("sdb"));
        assert_eq!(got.get("c0/v2"), None, "sdc is not in this tree");
        // without NAA id and name: by the address megaraid_sas gives VD 1
        for v in &mut ctls[0].virtual_drives {
            v.naa_id = None;
            v.os_drive_name = None;
        }
        let got = Tie::default().devices(&root, &ctls);
        assert_eq!(got.get("c0/v1").map(String::as_str), Some("sdb"));
        assert_eq!(got.get("c0/v0").map(String::as_str), Some("sdq"));
    }

    /// A sysfs-like tree: `block/<name>` a link to the disk's directory under the SCSI device,
    /// whose `device` link leads back to it, as the kernel lays them out.
    struct Host {
        dir: tempfile::TempDir,
        plugs: usize,
    }

    impl Host {
        fn new() -> Self {
            let dir = tempfile::tempdir().expect("tempdir");
            std::fs::create_dir_all(dir.path().join("block")).expect("block");
            Self { dir, plugs: 0 }
        }

        fn root(&self) -> Root {
            Root::new("/nonexistent", self.dir.path())
        }

        /// A disk named `name` (in place of one of that name, as the kernel does: a new entry,
        /// under an inode number the old one never had).
        fn plug(&mut self, name: &str, naa: &str, hctl: &str) {
            self.plugs += 1;
            let sys = self.dir.path();
            let dev = sys.join(format!("devices/plug{}/{hctl}", self.plugs));
            let disk = dev.join("block").join(name);
            std::fs::create_dir_all(&disk).expect("disk");
            std::fs::write(dev.join("wwid"), format!("naa.{naa}\n")).expect("wwid");
            std::os::unix::fs::symlink(&dev, disk.join("device")).expect("device");
            let new = sys.join("block").join(format!(".{name}.new"));
            std::os::unix::fs::symlink(&disk, &new).expect("link");
            std::fs::rename(&new, sys.join("block").join(name)).expect("rename");
        }

        fn unplug(&self, name: &str) {
            std::fs::remove_file(self.dir.path().join("block").join(name)).expect("unplug");
        }

        /// The `wwid` of `name`'s device rewritten in place (a rescan of the same device).
        fn rescan(&self, name: &str, naa: &str) {
            let dev = self.dir.path().join("block").join(name).join("device");
            std::fs::write(dev.join("wwid"), format!("naa.{naa}\n")).expect("wwid");
        }
    }

    const V: [&str; 6] = [
        "600605b010e943702a3372bf4d29f6a7",
        "600605b010e943702a3372c04d2fb6b9",
        "600605b010e943702a3372c04d3ad143",
        "600605b010e943702a3372c14d48b67e",
        "600605b010e943702a3372c24d57b796",
        "600605b010e943702a3372c34d665ecf",
    ];

    /// One round: the kept tie, checked against one read from scratch (what every round did
    /// before identities were kept), and how many identities the round read.
    fn round(tie: &mut Tie, host: &Host, ctls: &[Controller]) -> (Vec<String>, usize) {
        let root = host.root();
        let got = tie.devices(&root, ctls);
        assert_eq!(
            got,
            Tie::default().devices(&root, ctls),
            "kept tie is stale"
        );
        let pairs = got.iter().map(|(v, d)| format!("{v}={d}")).collect();
        (pairs, tie.read)
    }

    #[test]
    fn each_round_reads_only_new_replaced_and_tied_disks_and_ties_as_from_scratch() {
        let ctls = vall();
        let mut host = Host::new();
        // 2 disks tied by NAA id (their names are not storcli's /dev/sda, /dev/sdb), 20 not tied
        host.plug("sdq", V[0], "0:2:0:0");
        host.plug("sdr", V[1], "0:2:1:0");
        for i in 0..20 {
            host.plug(
                &format!("sda{}", (b'a' + i) as char),
                &format!("5000c500{i:024x}"),
                &format!("0:0:{i}:0"),
            );
        }
        let mut tie = Tie::default();
        let (got, read) = round(&mut tie, &host, &ctls);
        assert_eq!(
            (got, read),
            (vec!["c0/v0=sdq".into(), "c0/v1=sdr".into()], 22)
        );
        // nothing changed: only the 2 tied disks are read again
        let (got, read) = round(&mut tie, &host, &ctls);
        assert_eq!(
            (got, read),
            (vec!["c0/v0=sdq".into(), "c0/v1=sdr".into()], 2)
        );
        // a disk added is seen: it and the tied ones
        host.plug("sds", V[2], "0:2:2:0");
        let (got, read) = round(&mut tie, &host, &ctls);
        assert_eq!(got, ["c0/v0=sdq", "c0/v1=sdr", "c0/v2=sds"]);
        assert_eq!(read, 3);
        // sdq replaced under its name by VD 3's disk: v0 untied, v3 tied to the new sdq
        host.plug("sdq", V[3], "0:2:3:0");
        let (got, read) = round(&mut tie, &host, &ctls);
        assert_eq!(got, ["c0/v1=sdr", "c0/v2=sds", "c0/v3=sdq"]);
        assert_eq!(read, 3, "the new sdq, sdr and sds");
        // two disks swap names (both re-plugged): sdr (v1) and an untied one
        host.plug("sdr", "5000c500ffffffffffffffffffffffff", "0:0:99:0");
        host.plug("sdaa", V[1], "0:2:1:0");
        let (got, read) = round(&mut tie, &host, &ctls);
        assert_eq!(got, ["c0/v1=sdaa", "c0/v2=sds", "c0/v3=sdq"]);
        assert_eq!(read, 4, "the two re-plugged, sds and sdq");
        // a disk removed
        host.unplug("sds");
        let (got, read) = round(&mut tie, &host, &ctls);
        assert_eq!(got, ["c0/v1=sdaa", "c0/v3=sdq"]);
        assert_eq!(read, 2);
        // a tied disk's wwid changed in place (a rescan, no new entry): tied anew this round
        host.rescan("sdq", V[5]);
        let (got, read) = round(&mut tie, &host, &ctls);
        assert_eq!(got, ["c0/v1=sdaa", "c0/v5=sdq"]);
        assert_eq!(read, 2);
        // /sys/block gone: nothing tied, nothing kept; back: every disk read again
        let block = host.dir.path().join("block");
        let aside = host.dir.path().join("block.aside");
        std::fs::rename(&block, &aside).expect("aside");
        let (got, read) = round(&mut tie, &host, &ctls);
        assert_eq!((got.len(), read), (0, 0));
        std::fs::rename(&aside, &block).expect("back");
        let (got, read) = round(&mut tie, &host, &ctls);
        assert_eq!(got, ["c0/v1=sdaa", "c0/v5=sdq"]);
        assert_eq!(read, 22);
    }
}
