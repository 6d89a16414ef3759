//! The multipath maps in sysfs: `/sys/block/dm-*/dm/{uuid,name}` (maps are the dm devices whose
//! uuid starts `mpath-`; read once per device), `slaves/` (the paths), and each path's
//! `device/state` (`running`, `offline`, `blocked`, `transport-offline`; NVMe: `live`).

use crate::root::JoinSized;
use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::path::Path;

use crate::root::{read_value_into, Root};
use crate::sources::dmmultipath::DevT;
use crate::sources::SourceError;

/// A multipath map as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SysMap {
    pub(super) dm: String,
    pub(super) dev: Option<DevT>,
    pub(super) name: String,
    pub(super) wwid: String,
    pub(super) slaves: Vec<SysPath>,
}

/// A path of a map: a slave of its dm device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SysPath {
    pub(super) name: String,
    pub(super) dev: Option<DevT>,
    pub(super) state: Option<String>,
}

/// Identity of a dm device, read once.
#[derive(Debug, Clone)]
struct DmIdent {
    mpath: Option<(String, String)>,
    dev: Option<DevT>,
}

/// Polls between two scans of `/sys/block` and the maps' `slaves/`. Listing 250 directory
/// entries and 40 `slaves/` each second was a third of the agent's CPU on a 200-disk server;
/// between scans only each path's `device/state` is read (from a kept-open file), and a path whose
/// state file vanished forces a scan at once. A map that appears, or a path added to a map or
/// taken out of it while its device stays, is seen within this many polls: administrative
/// changes, where a path's failure is its state, read every poll. At one scan in 10 polls the
/// scans were still 5 % of the sampling thread's time on the 200-disk bench host (perf:
/// `getdents64` and the `openat`s of the 40 `slaves/`), hence one in 30.
const TOPOLOGY_RESCAN_POLLS: u32 = 30;

/// The maps and their paths, with what is kept between scans.
#[derive(Debug, Default)]
pub(super) struct Topology {
    idents: BTreeMap<String, DmIdent>,
    /// Every map's paths, in the order of the last scan's maps and their `slaves`: the polls
    /// between scans walk both together instead of looking each path up by name.
    slaves: Vec<SlaveCache>,
    /// The maps and their paths from the last directory scan, and the polls since.
    last: Option<(Vec<SysMap>, u32)>,
    buf: String,
    /// The `getdents64` buffer of the directory listings, kept between scans.
    dirents: Vec<MaybeUninit<u8>>,
}

impl Topology {
    /// The multipath maps in sysfs and their paths with current path states, the polls since
    /// the last directory scan, and whether any path's state differs from the last poll's (always
    /// true after a scan). The caller hands the maps back with [`Self::keep`] so that the next
    /// poll can reuse them without a copy.
    pub(super) fn scan(&mut self, root: &Root) -> Result<(Vec<SysMap>, u32, bool), SourceError> {
        if let Some((mut maps, age)) = self.last.take() {
            if age + 1 < TOPOLOGY_RESCAN_POLLS {
                let block = root.sys("block");
                let mut vanished = false;
                let mut moved = false;
                let paths = maps.iter_mut().flat_map(|m| m.slaves.iter_mut());
                let mut caches = self.slaves.iter_mut();
                let mut aligned = true;
                for p in paths {
                    let Some(cache) = caches.next().filter(|c| c.name == p.name) else {
                        aligned = false;
                        break;
                    };
                    let had = p.state.is_some();
                    moved |= cache.refresh_state(&block, &p.name, &mut p.state);
                    vanished |= had && p.state.is_none();
                }
                if aligned && caches.next().is_none() && !vanished {
                    return Ok((maps, age + 1, moved));
                }
            }
        }
        Ok((self.scan_dirs(root)?, 0, true))
    }

    /// Keeps the maps [`Self::scan`] returned for the next poll.
    pub(super) fn keep(&mut self, maps: Vec<SysMap>, age: u32) {
        self.last = Some((maps, age));
    }

    fn scan_dirs(&mut self, root: &Root) -> Result<Vec<SysMap>, SourceError> {
        let block = root.sys("block");
        let dms =
            list_names(&block, &mut self.dirents, |n| n.starts_with(b"dm-"))?.unwrap_or_default();
        self.idents.retain(|k, _| dms.contains(k));
        let mut out = Vec::new();
        // Slave names can be reused by another disk after a rescan: only the paths of this scan
        // keep their cache.
        let mut old: BTreeMap<String, SlaveCache> = std::mem::take(&mut self.slaves)
            .into_iter()
            .map(|c| (c.name.clone(), c))
            .collect();
        for dm in &dms {
            let dir = block.join_sized(dm);
            if !self.idents.contains_key(dm) {
                let ident = read_ident(&dir, &mut self.buf)?;
                self.idents.insert(dm.clone(), ident);
            }
            let Some(ident) = self.idents.get(dm) else {
                continue;
            };
            let Some((name, wwid)) = ident.mpath.clone() else {
                continue;
            };
            let dev = ident.dev;
            let mut slaves = Vec::new();
            let listed = list_names(&dir.join_sized("slaves"), &mut self.dirents, |_| true)?;
            for s in listed.unwrap_or_default() {
                let mut cache = match old.remove(&s) {
                    Some(c) => c,
                    None => SlaveCache {
                        dev: read_dev(&block.join_sized(&s).join_sized("dev"), &mut self.buf)?,
                        state: None,
                        name: s.clone(),
                    },
                };
                let dev = cache.dev;
                let state = cache.read_state(&block, &s);
                self.slaves.push(cache);
                slaves.push(SysPath {
                    name: s,
                    dev,
                    state,
                });
            }
            out.push(SysMap {
                dm: dm.clone(),
                dev,
                name,
                wwid,
                slaves,
            });
        }
        Ok(out)
    }
}

/// Size of the `getdents64` buffer: a 250-disk `/sys/block` (about 8 KiB of entries) in one or
/// two calls.
const DIRENTS_BUF: usize = 16 * 1024;

/// The names in directory `path` that `keep` accepts (`.` and `..` never), sorted; `Ok(None)`
/// when the directory is absent. What [`crate::root::list_dir`] gives, filtered, but read
/// through `buf` with no allocation for a name left out: a rescan lists the 250 entries of
/// `/sys/block` for the few `dm-*` among them, and the standard listing allocated each name
/// twice (a third of the monitor's instructions on a 200-disk server).
fn list_names(
    path: &Path,
    buf: &mut Vec<MaybeUninit<u8>>,
    keep: impl Fn(&[u8]) -> bool,
) -> Result<Option<Vec<String>>, SourceError> {
    use rustix::fs::{Mode, OFlags, RawDir};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(e) => {
            let e = std::io::Error::from(e);
            let absent = e.kind() == std::io::ErrorKind::NotFound
                || matches!(e.raw_os_error(), Some(libc::ENODEV) | Some(libc::ENXIO));
            return if absent {
                Ok(None)
            } else {
                Err(SourceError::io(path, e))
            };
        }
    };
    if buf.len() < DIRENTS_BUF {
        buf.resize(DIRENTS_BUF, MaybeUninit::uninit());
    }
    let mut names = Vec::new();
    let mut dir = RawDir::new(fd, buf.as_mut_slice());
    while let Some(entry) = dir.next() {
        let entry = entry.map_err(|e| SourceError::io(path, e.into()))?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." || !keep(name) {
            continue;
        }
        if let Ok(name) = std::str::from_utf8(name) {
            names.push(name.to_owned());
        }
    }
    names.sort_unstable();
    Ok(Some(names))
}

/// A path device, with its `device/state` kept open: sysfs regenerates an attribute on every
/// read from offset 0, so one `pread` a second replaces open+read+close.
#[derive(Debug)]
struct SlaveCache {
    name: String,
    dev: Option<DevT>,
    state: Option<std::fs::File>,
}

impl SlaveCache {
    /// The state of path `name` under the sysfs `block` directory; the path is only built when
    /// the file has to be (re)opened, so a steady second costs one `pread` and no allocation
    /// beyond the value.
    /// Reads the state into `state`; true when it changed. The unchanged steady state
    /// allocates nothing.
    fn refresh_state(&mut self, block: &Path, name: &str, state: &mut Option<String>) -> bool {
        self.with_state(block, name, |now| match (now, state.as_deref()) {
            (Some(now), Some(was)) if now == was => false,
            (None, None) => false,
            (now, _) => {
                *state = now.map(str::to_owned);
                true
            }
        })
    }

    fn read_state(&mut self, block: &Path, name: &str) -> Option<String> {
        self.with_state(block, name, |now| now.map(str::to_owned))
    }

    /// Calls `f` with the path's state (trimmed), or `None` when it cannot be read.
    fn with_state<T>(&mut self, block: &Path, name: &str, f: impl FnOnce(Option<&str>) -> T) -> T {
        use std::os::unix::fs::FileExt;
        for attempt in 0..2 {
            if self.state.is_none() {
                let path = block.join_sized(name).join_sized("device/state");
                self.state = std::fs::File::open(path).ok();
            }
            let Some(file) = self.state.as_ref() else {
                return f(None);
            };
            let mut b = [0u8; 64];
            match file.read_at(&mut b, 0) {
                Ok(n) => {
                    let text = String::from_utf8_lossy(b.get(..n).unwrap_or_default());
                    return f(Some(text.trim()));
                }
                // The device went away (ENODEV) or was replaced: reopen once by name.
                Err(_) if attempt == 0 => self.state = None,
                Err(_) => return f(None),
            }
        }
        f(None)
    }
}

fn read_ident(dir: &Path, buf: &mut String) -> Result<DmIdent, SourceError> {
    let dev = read_dev(&dir.join_sized("dev"), buf)?;
    let uuid = if read_value_into(&dir.join_sized("dm/uuid"), buf)? {
        buf.trim().to_owned()
    } else {
        String::new()
    };
    let mpath = match uuid.strip_prefix("mpath-") {
        Some(wwid) => {
            let name = if read_value_into(&dir.join_sized("dm/name"), buf)? {
                buf.trim().to_owned()
            } else {
                String::new()
            };
            let name = if name.is_empty() {
                wwid.to_owned()
            } else {
                name
            };
            Some((name, wwid.to_owned()))
        }
        None => None,
    };
    Ok(DmIdent { mpath, dev })
}

fn read_dev(path: &Path, buf: &mut String) -> Result<Option<DevT>, SourceError> {
    Ok(if read_value_into(path, buf)? {
        DevT::parse(buf.trim())
    } else {
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::root::list_dir;

    /// A map added between scans is seen at the scan [`TOPOLOGY_RESCAN_POLLS`] polls after the
    /// last, not before; the polls between read the known paths' states alone.
    #[test]
    fn a_map_added_is_seen_at_the_next_scan() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let w = |p: &str, s: &str| {
            let p = tmp.path().join(p);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("fixture");
            std::fs::write(p, s).expect("fixture");
        };
        let map = |dm: &str, name: &str, wwid: &str, sd: &str, dev: &str| {
            w(&format!("block/{dm}/dev"), "253:3\n");
            w(&format!("block/{dm}/dm/name"), &format!("{name}\n"));
            w(&format!("block/{dm}/dm/uuid"), &format!("mpath-{wwid}\n"));
            w(&format!("block/{dm}/slaves/{sd}"), "");
            w(&format!("block/{sd}/dev"), &format!("{dev}\n"));
            w(&format!("block/{sd}/device/state"), "running\n");
        };
        map("dm-3", "mpatha", "3600a", "sdb", "8:16");
        let root = Root::new(tmp.path().join("proc"), tmp.path());
        let mut t = Topology::default();
        let poll = |t: &mut Topology| {
            let (maps, age, _) = t.scan(&root).expect("scan");
            let names: Vec<String> = maps.iter().map(|m| m.name.clone()).collect();
            t.keep(maps, age);
            (names, age)
        };
        assert_eq!(poll(&mut t), (vec!["mpatha".to_string()], 0));
        map("dm-4", "mpathb", "3600b", "sdc", "8:32");
        for age in 1..TOPOLOGY_RESCAN_POLLS {
            assert_eq!(poll(&mut t), (vec!["mpatha".to_string()], age));
        }
        let both = vec!["mpatha".to_string(), "mpathb".to_string()];
        assert_eq!(poll(&mut t), (both, 0));
    }

    /// The listing without allocation names what the standard one does, filtered: links, files,
    /// directories, `dm-*` among others, more entries than one `getdents64` buffer holds.
    #[test]
    fn list_names_is_list_dir_filtered() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let d = tmp.path();
        for i in 0..600 {
            std::fs::create_dir(d.join(format!("sd-with-a-long-name-{i:04}"))).expect("fixture");
        }
        for i in [0, 7, 10, 39, 100] {
            std::os::unix::fs::symlink("../x", d.join(format!("dm-{i}"))).expect("fixture");
        }
        std::fs::write(d.join("dm-file"), "x").expect("fixture");
        std::fs::write(d.join("md0"), "x").expect("fixture");
        let mut buf = Vec::new();
        let all = list_dir(d).expect("list").expect("present");
        assert_eq!(
            list_names(d, &mut buf, |_| true).expect("list"),
            Some(all.clone())
        );
        let dm: Vec<String> = all.into_iter().filter(|n| n.starts_with("dm-")).collect();
        assert_eq!(dm, ["dm-0", "dm-10", "dm-100", "dm-39", "dm-7", "dm-file"]);
        assert_eq!(
            list_names(d, &mut buf, |n| n.starts_with(b"dm-")).expect("list"),
            Some(dm)
        );
        // The buffer is kept for the next listing.
        assert!(buf.len() >= DIRENTS_BUF);
    }

    #[test]
    fn list_names_of_an_absent_directory_is_none() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut buf = Vec::new();
        let gone = tmp.path().join("gone");
        assert_eq!(list_names(&gone, &mut buf, |_| true).expect("absent"), None);
        assert_eq!(list_dir(&gone).expect("absent"), None);
        // A file where a directory is expected is an error, as with the standard listing.
        std::fs::write(&gone, "x").expect("fixture");
        assert!(list_names(&gone, &mut buf, |_| true).is_err());
        assert!(list_dir(&gone).is_err());
    }
}
