//! smartd's `--jsonstate` files as the cheaper source of a disk's reading.
//!
//! `smartd -j PREFIX` (smartmontools' development tree after 7.5: commit 0d1737f08, 2026-04-28; in no release yet) writes, after each check cycle, one file per drive
//! (`PREFIX MODEL-SERIAL[-NSID].PRT.json`, replaced by rename) with smartctl's field names; the
//! parser is [`crate::sources::smartctl::parse`]. With `[drive] smartd_state_dir` set, each
//! round lists that directory's `*.json` files, and a disk whose file is *fresh* (modified
//! within `smartd_state_max_age`) is read from it instead of running smartctl: smartd already
//! woke the disk and paid for the commands. A disk without a fresh file (smartd skipped it
//! asleep with `-n standby`, it is not in `smartd.conf`, smartd is stopped) is read by smartctl
//! as before.
//!
//! A file names its disk by `device.name`, the device smartd opened: `/dev/sdc` is disk `sdc`,
//! an NVMe controller `/dev/nvme0` its first namespace `nvme0n1`. Disks behind a RAID
//! controller (`/dev/bus/0` with `-d megaraid,N`) are not matched: smartctl reads them. When
//! two files name one device (a drive moved since an older file was written), the newer wins.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::sources::smartctl::{self, DriveHealth, Outcome};

/// Files bigger than this are not smartd's (a state file is a few kB): skipped.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// The fresh state files of one round, by disk name.
#[derive(Debug, Default)]
pub(super) struct StateFiles {
    files: BTreeMap<String, (PathBuf, SystemTime)>,
}

/// The disk a file's `device.name` is: `/dev/sdc` → `sdc`, `/dev/nvme0` → `nvme0n1`,
/// `/dev/nvme0n2` → `nvme0n2`; `None` for anything else (`/dev/bus/0`, `/dev/sg3`).
pub(super) fn disk_of(device: &str) -> Option<String> {
    let name = device.strip_prefix("/dev/")?;
    if name.contains('/') {
        return None;
    }
    if let Some(rest) = name.strip_prefix("nvme") {
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        return match rest.split_once('n') {
            None if digits(rest) => Some(format!("{name}n1")),
            Some((c, ns)) if digits(c) && digits(ns) => Some(name.to_owned()),
            _ => None,
        };
    }
    let rest = name.strip_prefix("sd")?;
    (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_lowercase())).then(|| name.to_owned())
}

impl StateFiles {
    /// Lists `dir`: every `*.json` modified within `max_age` of `now`, by the disk its
    /// `device.name` names. An unreadable directory, file or document is skipped (the disk is
    /// then read by smartctl); what was skipped is logged at debug level.
    pub(super) fn list(dir: &Path, max_age: Duration, now: SystemTime) -> Self {
        let mut files: BTreeMap<String, (PathBuf, SystemTime)> = BTreeMap::new();
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) => {
                tracing::debug!(source = "smartctl", "{}: {e}", dir.display());
                return Self::default();
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            let Ok(mtime) = meta.modified() else {
                continue;
            };
            let age = now.duration_since(mtime).unwrap_or_default();
            if !meta.is_file() || meta.len() > MAX_FILE_BYTES || age > max_age {
                continue;
            }
            let Some(disk) = read(&path).ok().and_then(|h| device_of(&h)) else {
                continue;
            };
            match files.get(&disk) {
                Some((_, t)) if *t >= mtime => {}
                _ => {
                    files.insert(disk, (path, mtime));
                }
            }
        }
        Self { files }
    }

    /// Disk `name`'s reading from its fresh file, when there is one and it holds a reading.
    /// A file that went bad since it was listed is `None`: smartctl reads the disk.
    pub(super) fn reading(&self, name: &str) -> Option<DriveHealth> {
        let (path, _) = self.files.get(name)?;
        match read(path) {
            Ok(h) if h.outcome() == Outcome::Read && device_of(&h).as_deref() == Some(name) => {
                Some(h)
            }
            Ok(_) => None,
            Err(e) => {
                tracing::debug!(source = "smartctl", "{}: {e}", path.display());
                None
            }
        }
    }

    /// How many disks have a fresh file.
    pub(super) fn len(&self) -> usize {
        self.files.len()
    }

    /// Disk `name` has a fresh file.
    pub(super) fn has(&self, name: &str) -> bool {
        self.files.contains_key(name)
    }
}

fn device_of(h: &DriveHealth) -> Option<String> {
    h.device.as_deref().and_then(disk_of)
}

/// One state file, parsed.
fn read(path: &Path) -> Result<DriveHealth, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    smartctl::parse(&text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names() {
        assert_eq!(disk_of("/dev/sdc").as_deref(), Some("sdc"));
        assert_eq!(disk_of("/dev/sdaa").as_deref(), Some("sdaa"));
        assert_eq!(disk_of("/dev/nvme0").as_deref(), Some("nvme0n1"));
        assert_eq!(disk_of("/dev/nvme1n2").as_deref(), Some("nvme1n2"));
        for none in [
            "/dev/bus/0",
            "/dev/sg3",
            "/dev/sdc1",
            "sdc",
            "/dev/nvme",
            "/dev/nvme0n",
        ] {
            assert_eq!(disk_of(none), None, "{none}");
        }
    }
}
